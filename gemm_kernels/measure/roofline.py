"""Chapter 00: the ceilings of a GPU and where the series' kernels sit under them."""
from __future__ import annotations

from gemm_kernels.core import device
from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.core.registry import runnable
from gemm_kernels.measure import lookup, profile, records


def device_properties() -> dict:
    """The live GPU's properties, or those of the GPU the recording was made on."""
    if device.is_live():
        return device.properties()
    rec = records.current()
    return rec.device if rec else {}


def peak_table(props: dict) -> str:
    """Peak FP32 for this GPU, derived the way the course notes derive the RTX 3090's:
    SMs x FP32 lanes per SM x 2 FLOP per fused multiply-add x clock."""
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


# Nsight Compute's counters of the bytes a launch moved between the L2 and DRAM.
DRAM_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
COPY_SHAPE = (1 << 30,)    # the device copy chapter 00 measures: 1 GiB, far beyond the L2
# How `placement` found a kernel's intensity, as the roofline's legend says it.
PLACED = {"ncu": "filled: placed by the DRAM bytes Nsight Compute counted",
          "model": "hollow: placed by the model, each matrix moved once"}


def ceilings(props: dict) -> list[dict]:
    """The memory ceilings of the roofline, fastest level first: {'level', 'gbps', 'how'}.
    'gbps' is None where neither the recording nor the device properties give the
    level's bandwidth; the plot then leaves that ceiling out and says so."""
    smem = device.smem_bandwidth_gbps(props)
    try:
        dram = lookup.measure_or_lookup("device_copy", COPY_SHAPE)["gbps"]["median"]
        dram_how = "measured: device copy of 1 GiB"
    except LookupError:
        dram = device.peak_bandwidth_gbps(props)
        dram_how = "theoretical: memory clock x bus width"
    return [{"level": "shared memory", "gbps": smem,
             "how": f"{props.get('sm_count')} SMs x {device.SMEM_BANKS * device.SMEM_BANK_BYTES}"
                    " B per clock"},
            {"level": "L2", "gbps": None,
             "how": "no L2 bandwidth in the recording or the device properties"},
            {"level": "DRAM", "gbps": dram, "how": dram_how}]


def placement(kernel: str, shape, props: dict) -> tuple[float, str]:
    """(FLOP per DRAM byte, how it was found) of `kernel` at `shape`: 'ncu' from the DRAM
    bytes Nsight Compute counted for its default configuration at that shape on this GPU
    (the recording's), else 'model', each matrix moved once (`intensity`)."""
    M, N, K = shape
    rec = records.current()
    same_gpu = rec is not None and rec.device.get("name") == props.get("name")
    row = profile.counters(kernel, shape=shape) if same_gpu and kernel in KERNELS else None
    moved = sum(row["metrics"].get(m, 0) for m in DRAM_METRICS) if row else 0
    if row and DRAM_METRICS[0] in row["metrics"] and moved > 0:
        return 2 * M * N * K / moved, "ncu"
    return intensity(M, N, K), "model"


def plot(kernels, size: int = profile.GEMM_SHAPE[0], ax=None):
    """Hierarchical roofline: the FP32 peak and one bandwidth ceiling per memory level
    (`ceilings`), cuBLAS and the kernels (default configurations) at size^3, each at its
    measured GFLOP/s and its FLOP per DRAM byte (`placement`: filled markers where
    Nsight Compute counted the bytes, hollow where the model places it). The default
    size is the one the recording profiles, so the kernels sit at measured bytes."""
    import matplotlib.pyplot as plt
    import numpy as np
    from gemm_kernels.core import style
    props = device_properties()
    peak = device.peak_fp32_gflops(props)
    shape = (size,) * 3
    pts, refused = [], []
    for name in ["cublas", *kernels]:
        ok, why = runnable(KERNELS[name]) if name in KERNELS else (True, "")
        if not ok:     # a kernel this GPU cannot run: the legend says why
            refused.append(why)
            continue
        try:
            rate = lookup.measure_or_lookup(name, shape)["gflops"]["median"]
        except LookupError:
            continue
        pts.append((name, *placement(name, shape, props), rate))
    roofs = ceilings(props)
    drawn = [c for c in roofs if c["gbps"]]
    ridges = [peak / c["gbps"] for c in drawn]
    xs = ridges + [ai for _, ai, _, _ in pts]
    x = np.logspace(np.log10(min(xs) / 8), np.log10(max(xs) * 8), 200)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5.5))
    ax.axhline(peak, color="k", lw=2, label=f"FP32 peak: {peak / 1000:.1f} TFLOP/s "
                                            "(SMs x lanes x 2 x clock)")
    for c, ls in zip(roofs, ("-.", ":", "--")):
        if not c["gbps"]:
            # An empty entry: the legend says which ceiling is missing and why.
            ax.plot([], [], " ", label=f"{c['level']}: ceiling left out ({c['how']})")
            continue
        below = x <= peak / c["gbps"]
        ax.plot(x[below], c["gbps"] * x[below], ls, color="k", lw=1.5,
                label=f"{c['level']}: {c['gbps'] / 1000:.1f} TB/s ({c['how']})")
    # Two key entries explain the fill once, instead of a word on every kernel's line.
    for how, fill in (("ncu", "k"), ("model", "none")):
        ax.plot([], [], "o", mec="k", mfc=fill, mew=1.5, ls="none", label=PLACED[how])
    for (name, ai, how, rate), (colour, marker) in zip(
            pts, [("k", "*")] + style.series_styles(len(pts) - 1)):
        ax.plot(ai, rate, marker, ms=11 if marker == "*" else 8, mec=colour, mew=1.5,
                mfc=colour if how == "ncu" else "none", ls="none",
                label=f"{name}: {rate / 1000:.1f} TFLOP/s at {ai:.0f} FLOP/B ({how})")
    for why in refused:
        ax.plot([], [], " ", label=f"left out: {why}")
    dram = next(c for c in roofs if c["level"] == "DRAM")
    if dram["gbps"]:
        # The ridge's label runs up its line on the memory-bound side, left of it, at
        # the bottom: every SGEMM point of the series sits far right of the ridge.
        ridge = peak / dram["gbps"]
        ax.axvline(ridge, color="gray", ls=":", lw=1)
        ax.text(ridge / 1.08, peak / 300, f"DRAM ridge: {ridge:.0f} FLOP/B", color="gray",
                fontsize=9, rotation=90, ha="right", va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x[0], x[-1])
    ax.set_ylim(min([rate for *_, rate in pts] + [peak / 300]) / 2, peak * 2)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of the ceiling's level;\n"
                  "kernels: FLOP per DRAM byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"Roofline at {size}^3, {records.source()}", fontsize=10)
    # Outside the axes, right of them: the legend never covers a point or a label.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
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
