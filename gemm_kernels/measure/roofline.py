"""Chapter 00: the ceilings of a GPU and where the series' kernels sit under them."""
from __future__ import annotations

from gemm_kernels.core import device

from gemm_kernels.measure import lookup, records


def device_properties() -> dict:
    """The live GPU's properties, or those of the GPU the recording was made on."""
    if device.is_live():
        return device.properties()
    rec = records.current()
    return rec.device if rec else {}


def peak_table(props: dict) -> str:
    """Peak FP32 derived the way seed 001 derives the RTX 3090's, for this GPU."""
    lanes = props.get("fp32_lanes_per_sm") or device.fp32_lanes(props["compute_capability"])
    peak = device.peak_fp32_gflops(props)
    bw = device.peak_bandwidth_gbps(props)
    lines = [f"{props['name']} (compute capability {props['compute_capability']})",
             f"  SMs                  {props['sm_count']}",
             f"  FP32 lanes per SM    {lanes}",
             f"  SM clock (max)       {props['sm_clock_mhz']:.0f} MHz",
             f"  peak FP32 = {props['sm_count']} x {lanes} x 2 x {props['sm_clock_mhz'] / 1000:.3f} GHz"
             f" = {peak:,.0f} GFLOP/s"]
    if bw:
        lines.append(f"  DRAM: 2 x {props['memory_clock_mhz']:.0f} MHz x {props['memory_bus_bits']} bit / 8"
                     f" = {bw:,.0f} GB/s (reads and writes share it)")
    return "\n".join(lines)


def intensity(M: int, N: int, K: int, bytes_per=4) -> float:
    """FLOP per byte if each matrix crossed DRAM once: 2MNK / (bytes of A, B and C)."""
    return 2 * M * N * K / (bytes_per * (M * K + K * N + M * N))


def plot(kernels, size: int = 4096, ax=None):
    """Roofline: the FP32 peak and the measured copy bandwidth as ceilings, cuBLAS and
    the kernels measured at size^3 (live or recorded) at the problem's intensity."""
    import matplotlib.pyplot as plt
    import numpy as np
    props = device_properties()
    peak = device.peak_fp32_gflops(props)
    copy = lookup.measure_or_lookup("device_copy", (1 << 30,))["gbps"]["median"]
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5))
    x = np.logspace(-2, 4, 200)
    ax.plot(x, np.minimum(peak, copy * x), "k-", lw=2,
            label=f"roof: {peak / 1000:.1f} TFLOP/s peak, {copy / 1000:.2f} TB/s copy")
    ai = intensity(size, size, size)
    pts = [("cublas", lookup.measure_or_lookup("cublas", (size,) * 3))]
    for name in kernels:
        try:
            pts.append((name, lookup.measure_or_lookup(name, (size,) * 3)))
        except LookupError:
            pass
    for i, (name, row) in enumerate(pts):
        ax.plot(ai, row["gflops"]["median"], "*" if name == "cublas" else "o", ms=9,
                label=f"{name}: {row['gflops']['median'] / 1000:.1f} TFLOP/s")
    ax.axvline(peak / copy, color="gray", ls=":", lw=1)
    ax.text(peak / copy, peak / 30, f" ridge {peak / copy:.0f} FLOP/B", color="gray", fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte, each matrix moved once)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"Roofline at {size}^3, {records.source()}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    return ax


def pitfalls_table():
    """The pitfalls row, measured now (live) or from the recording."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import timing
    if device.is_live():
        row, src = timing.measure_pitfalls(), records.source()
    else:
        rec = records.current()
        found = rec.find("timing_pitfalls") if rec else []
        if not found:
            raise LookupError("the recording has no timing_pitfalls row")
        row, src = found[0], rec.label
    m = row["metrics"]
    rows = [{"what": "host timer around the launch, no synchronize", "ms": m["host_timer_without_sync_ms"]},
            {"what": "CUDA events, random inputs (the harness)", "ms": m["events_random_ms"]},
            {"what": "CUDA events, all-zero inputs", "ms": m["events_zeros_ms"]}]
    return Table(rows, ["what", "ms"],
                 title=f"cuBLAS SGEMM {'x'.join(map(str, row['shape']))}, {src}")
