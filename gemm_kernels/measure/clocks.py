"""The clock a kernel runs at, and the power it draws, when it runs for seconds.

A timed row gives a rate, not the clock the GPU ran at. Under a long, heavy load a GPU
lowers its SM clock to stay within its power limit, so two kernels doing the same work
at a different energy per FLOP run at different clocks. Nsight Compute cannot show this:
it locks the clock while it measures. Here the candidate is launched back to back for a
few seconds, then its reference the same way (both as the timing harness calls them, on
the same inputs), while the driver's NVML library is asked every few milliseconds for
the SM clock, the board's power draw and the reasons the clock is held down; the
samples of each run's first quarter (the clock still settling) are left out.

`summary`, `launch_count` and `reasons` are plain Python (tested on a CPU); `Nvml` and
`measure` need a GPU and its driver.
"""
from __future__ import annotations

import ctypes
import functools
import statistics
import time

SECONDS = 2.0           # each run: long enough for the power management to settle
SETTLE = 0.25           # the share of each run's samples left out at its start
POLL_S = 0.005
CHUNK_S = 0.1           # launches are queued this much GPU time at a time
# NVML's "clocks event reasons" bits (nvml.h): why the clock is below its maximum.
REASONS = {0x1: "idle", 0x2: "application clocks setting", 0x4: "power cap",
           0x8: "hardware slowdown", 0x20: "software thermal slowdown",
           0x40: "hardware thermal slowdown", 0x80: "hardware power brake"}
CLOCK_SM = 1            # nvmlClockType_t NVML_CLOCK_SM


def reasons(mask: int) -> list[str]:
    """The names of the bits set in an NVML clocks-event-reasons mask."""
    return [name for bit, name in REASONS.items() if mask & bit]


def launch_count(one_ms: float, seconds: float = SECONDS) -> int:
    """How many launches of a call that takes `one_ms` fill `seconds` (at least 1)."""
    if not one_ms > 0:
        raise ValueError(f"a call's time must be positive, got {one_ms!r} ms")
    return max(1, round(1000 * seconds / one_ms))


def summary(samples: list[tuple[float, int, int, int]], settle: float = SETTLE) -> dict:
    """What a run's samples say: [(t seconds, SM MHz, power mW, reasons mask)] in time
    order -> SM clock and power (median, min, max) over the samples after the first
    `settle` share of the run, and the share of those samples held down by each reason."""
    if not samples:
        raise ValueError("no samples: the run ended before the first one")
    t0, t1 = samples[0][0], samples[-1][0]
    kept = [s for s in samples if s[0] >= t0 + settle * (t1 - t0)] or samples[-1:]
    spread = lambda xs: {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
    held = {}
    for _, _, _, mask in kept:
        for name in reasons(mask):
            held[name] = held.get(name, 0) + 1
    return {"sm_mhz": spread([s[1] for s in kept]),
            "power_w": spread([s[2] / 1000 for s in kept]),
            "samples": len(kept),
            "held_down": {k: round(v / len(kept), 3) for k, v in sorted(held.items())}}


class Nvml:
    """The driver's NVML (libnvidia-ml), through ctypes: the GPU CuPy uses, found by
    its PCI bus id."""

    def __init__(self):
        import cupy
        try:
            self._lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as e:
            raise RuntimeError(f"NVML (the driver's libnvidia-ml.so.1) cannot be loaded: {e}")
        self._call("nvmlInit_v2")
        self._dev = ctypes.c_void_p()
        bus = cupy.cuda.Device().pci_bus_id.encode()
        self._call("nvmlDeviceGetHandleByPciBusId_v2", ctypes.c_char_p(bus),
                   ctypes.byref(self._dev))
        self._reasons = next(n for n in ("nvmlDeviceGetCurrentClocksEventReasons",
                                         "nvmlDeviceGetCurrentClocksThrottleReasons")
                             if hasattr(self._lib, n))

    def _call(self, name, *args):
        rc = getattr(self._lib, name)(*args)
        if rc:
            raise RuntimeError(f"NVML {name} failed (error {rc})")

    def sample(self) -> tuple[float, int, int, int]:
        mhz, mw, mask = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
        self._call("nvmlDeviceGetClockInfo", self._dev, CLOCK_SM, ctypes.byref(mhz))
        self._call("nvmlDeviceGetPowerUsage", self._dev, ctypes.byref(mw))
        self._call(self._reasons, self._dev, ctypes.byref(mask))
        return time.monotonic(), mhz.value, mw.value, mask.value

    def power_limit_w(self) -> float:
        mw = ctypes.c_uint()
        self._call("nvmlDeviceGetEnforcedPowerLimit", self._dev, ctypes.byref(mw))
        return mw.value / 1000


def _sustained(fn, nvml: Nvml, seconds: float) -> dict:
    """`fn` launched back to back for about `seconds`, sampled: its time per call (ms)
    and the summary of the samples. Launches are queued a chunk at a time, one chunk
    ahead of the GPU, so it never waits for the host, and the samples are taken while
    the chunk before runs."""
    import cupy
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    fn()                                     # loaded and at a working clock
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    one_ms = cupy.cuda.get_elapsed_time(start, stop)
    n, chunk = launch_count(one_ms, seconds), launch_count(one_ms, CHUNK_S)
    samples, marks, done = [], [], 0
    start.record()
    while done < n:
        for _ in range(min(chunk, n - done)):
            fn()
        done += min(chunk, n - done)
        marks.append(cupy.cuda.Event())
        marks[-1].record()
        while len(marks) >= 2 and not marks[-2].done:
            samples.append(nvml.sample())
            time.sleep(POLL_S)
    while not marks[-1].done:
        samples.append(nvml.sample())
        time.sleep(POLL_S)
    marks[-1].synchronize()
    return {"launches": n, "ms": cupy.cuda.get_elapsed_time(start, marks[-1]) / n,
            **summary(samples)}


def measure(kernel, shape, params: dict | None = None, seconds: float = SECONDS) -> dict:
    """One row: `kernel` at `shape` run for `seconds`, then its reference (cuBLAS) the
    same way, each with its rate and the clock and power it ran at ("sustained")."""
    from gemm_kernels.core.kernels import KERNELS
    from gemm_kernels.core.launch import kernel_of
    from gemm_kernels.measure import records, timing
    k = kernel_of(kernel) if isinstance(kernel, str) else kernel
    p = k.resolve(params)
    fns, after = timing.setup(k.name if k.name in KERNELS else k, tuple(shape), p)
    nvml = _nvml()
    unit, rate = timing.unit_and_rate(k.name, shape, p)
    runs = {}
    for name, fn in fns.items():
        s = _sustained(fn, nvml, seconds)
        runs[name] = {unit: rate(s.pop("ms")), **s}
    return {"chapter": k.chapter, "kernel": k.name, "params": p, "shape": list(shape),
            "source": k.source_hash(), "power_limit_w": nvml.power_limit_w(),
            "sustained": runs["candidate"], **after(),
            "reference": {"kernel": timing.reference_of(k.name), "sustained": runs["reference"]},
            "time": records.utc_now()}


@functools.lru_cache(maxsize=None)
def _nvml() -> Nvml:
    """One NVML handle per process."""
    return Nvml()


def text(row: dict) -> str:
    """One line for a log: each run's rate, clock and power."""
    def one(run):
        rate = run.get("gflops", run.get("gbps"))
        return (f"{rate:,.0f} at {run['sm_mhz']['median']:,.0f} MHz, "
                f"{run['power_w']['median']:,.0f} W")
    return (f"{one(row['sustained'])}; {row['reference']['kernel']} "
            f"{one(row['reference']['sustained'])} (limit {row['power_limit_w']:,.0f} W)")
