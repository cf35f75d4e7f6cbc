"""Chapter 00: the ceilings of a GPU and where the series' kernels sit under them."""
from __future__ import annotations

from gemm_kernels.core import device, style
from gemm_kernels.core.kernels import KERNELS, L2_READ_SHAPE
from gemm_kernels.core.registry import runnable
from gemm_kernels.measure import lookup, profile, records


MiB = 1 << 20      # buffers and caches are sized in powers of two (MiB, GiB) ...
MB = 1e6           # ... traffic and bandwidth in powers of ten (MB, GB/s), as profilers do


def spec_table(gpus: dict):
    """The peak FP32 and DRAM bandwidth of each GPU ({column name: properties}), with
    the formulas filled in: SMs x FP32 lanes per SM x 2 FLOP per FMA x clock, and
    bus width x data rate per pin / 8 (the data rate is 2 x the memory clock CUDA
    reports, `memoryClockRate`: a convention of how the clock is reported). The last
    row is the ridge: FLOP per DRAM byte needed to reach the peak."""
    from gemm_kernels.core.table import Table
    cols = {}
    for name, p in gpus.items():
        lanes = p.get("fp32_lanes_per_sm") or device.fp32_lanes(p["compute_capability"])
        ghz = p["sm_clock_mhz"] / 1000
        peak = device.peak_fp32_gflops(p)
        rate = 2 * p["memory_clock_mhz"] / 1000          # Gbit/s per pin
        bw = device.peak_bandwidth_gbps(p)
        cols[name] = {
            "compute capability": p["compute_capability"],
            "SMs x FP32 lanes per SM": f"{p['sm_count']} x {lanes}",
            "SM clock": f"{ghz:.3f} GHz",
            "peak FP32 = SMs x lanes x 2 x clock":
                f"{p['sm_count']} x {lanes} x 2 x {ghz:.3f} = {peak / 1000:.1f} TFLOP/s",
            # the row that makes the data rate traceable to the reported memory clock
            "data rate per pin = 2 x reported memory clock":
                f"2 x {p['memory_clock_mhz']:,.0f} MHz = {rate:.4g} Gbit/s",
            "DRAM = bus width x data rate / 8":
                f"{p['memory_bus_bits']:,} bit x {rate:.4g} Gbit/s / 8 = {bw:,.0f} GB/s",
            "ridge = peak / DRAM": f"{peak / bw:.1f} FLOP per byte"}
    rows = [{"": q, **{n: c[q] for n, c in cols.items()}} for q in next(iter(cols.values()))]
    return Table(rows, ["", *cols], title="theoretical peaks, from the specifications")


def cache_sizes(props: dict, sizes=(1024, 4096)) -> str:
    """The L2 of this GPU beside the bytes of an n^3 SGEMM's matrices (A, B and C in
    float32), and the scratch buffer the timing harness writes to empty the L2."""
    from gemm_kernels.measure import timing
    l2 = props.get("l2_bytes")
    lines = [f"L2 of the {props.get('name')}: "
             + (f"{l2 / MiB:,.0f} MiB" if l2 else "not reported")]
    for n in sizes:
        lines.append(f"A, B and C of a {n}^3 SGEMM: 3 x {n}^2 x 4 B = {3 * n * n * 4 / MiB:,.0f} MiB")
    lines.append(f"scratch buffer written before each timed call: "
                 f"{timing.flush_bytes(l2) / MiB:,.0f} MiB (twice the L2)")
    lines.append(f"warm-up calls: {timing.WARMUP}; timed calls: {timing.REPEATS}")
    return "\n".join(lines)


def intensity(M: int, N: int, K: int, bytes_per=4) -> float:
    """FLOP per byte if each matrix crossed DRAM once: 2MNK / (bytes of A, B and C)."""
    return 2 * M * N * K / (bytes_per * (M * K + K * N + M * N))


# ------------------------------------------------------------------ the ceilings

COPY_SHAPE = (1 << 30,)    # the device copy chapter 00 measures: 1 GiB, far beyond the L2
LEVELS = ("DRAM", "L2", "shared memory")
# Nsight Compute's counts behind each level's bytes (profile.METRICS holds them all).
DRAM_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
L2_METRICS = tuple(profile.ROOFLINE[:2])        # 32-byte sectors the SMs asked of the L2
SMEM_TOTAL = profile.ROOFLINE[2]                # every shared-memory wavefront
SMEM_LD_ST = tuple(profile.SHARED[:2])          # the wavefronts of loads and stores only
SECTOR_BYTES = 32
# A wavefront is one pass of the 32 banks: 128 bytes of the shared memory's bandwidth,
# used in full or not (a conflicted access spends more wavefronts on the same bytes).
WAVEFRONT_BYTES = device.SMEM_BANKS * device.SMEM_BANK_BYTES


def l2_ceiling() -> dict | None:
    """The L2's read bandwidth from the l2_read timings at L2_READ_SHAPE, one per PASSES
    (measured now, live, or recorded): the straight line time = fixed + PASSES x per
    pass, fitted by least squares; bandwidth = bytes of the buffer / time per pass. The
    first pass (from DRAM) and the launch fall into `fixed`. None with fewer than two
    PASSES timed."""
    import numpy as np
    from gemm_kernels.measure import timing
    k = KERNELS["l2_read"]
    passes = next(p for p in k.params if p.name == "PASSES").values
    pts = []
    for n in passes:
        try:
            row = lookup.measure_or_lookup("l2_read", L2_READ_SHAPE, {"PASSES": n})
        except LookupError:
            continue
        pts.append((n, timing.times_ms(row)["median"]))
    if len(pts) < 2:
        return None
    per_pass_ms, fixed_ms = np.polyfit([n for n, _ in pts], [t for _, t in pts], 1)
    nbytes = timing.input_bytes("l2_read", L2_READ_SHAPE, k.defaults())
    return {"gbps": nbytes / (per_pass_ms * 1e-3) / 1e9, "per_pass_ms": per_pass_ms,
            "fixed_ms": fixed_ms, "bytes": nbytes, "passes": [n for n, _ in pts],
            "times_ms": [t for _, t in pts]}


def ceilings(props: dict) -> list[dict]:
    """The memory ceilings of the roofline, fastest level first, each
    {'level', 'gbps', 'kind' ('measured' or 'theoretical'), 'how'}. 'gbps' is None where
    a level's bandwidth is not known here (the L2 without l2_read timings)."""
    smem = device.smem_bandwidth_gbps(props)
    l2 = l2_ceiling()
    out = [{"level": "shared memory", "gbps": smem, "kind": "theoretical",
            "how": f"{props.get('sm_count')} SMs x {WAVEFRONT_BYTES} B x clock"},
           {"level": "L2", "gbps": l2 and l2["gbps"], "kind": "measured",
            "how": "l2_read: a 16 MiB buffer read again and again" if l2 else
                   "no l2_read timings here"}]
    try:
        copy = lookup.measure_or_lookup("device_copy", COPY_SHAPE)["gbps"]["median"]
        out.append({"level": "DRAM", "gbps": copy, "kind": "measured",
                    "how": "device copy of 1 GiB"})
    except LookupError:
        pass
    out.append({"level": "DRAM", "gbps": device.peak_bandwidth_gbps(props),
                "kind": "theoretical", "how": "bus width x data rate / 8"})
    return out


# ------------------------------------------------------------------ the kernels

def level_bytes(metrics: dict) -> dict:
    """{level: (bytes, note)} for each level whose counts are in `metrics`: DRAM bytes
    read and written, L2 sectors read and written x 32 B, shared-memory wavefronts x
    128 B (the total where it was counted, else loads and stores, which leave out
    cp.async's copies into shared memory: note 'ld+st'). A level with no traffic has
    no entry. A kernel with no shared-memory loads or stores has no shared-memory
    entry either: the total still counts a few wavefronts per warp that the kernel's
    code does not issue (2 per warp for chapter 01's kernel, measured on the H200), and
    they would place it on a level it never uses."""
    out = {}
    if DRAM_METRICS[0] in metrics:
        out["DRAM"] = (sum(metrics.get(m, 0) for m in DRAM_METRICS), "")
    if L2_METRICS[0] in metrics:
        out["L2"] = (SECTOR_BYTES * sum(metrics.get(m, 0) for m in L2_METRICS), "")
    uses_shared = sum(metrics.get(m, 0) for m in SMEM_LD_ST) > 0
    if SMEM_TOTAL in metrics and uses_shared:
        out["shared memory"] = (WAVEFRONT_BYTES * metrics[SMEM_TOTAL], "")
    elif SMEM_LD_ST[0] in metrics:
        out["shared memory"] = (WAVEFRONT_BYTES * sum(metrics.get(m, 0) for m in SMEM_LD_ST),
                                "ld+st")
    return {lv: v for lv, v in out.items() if v[0] > 0}


def point(kernel: str, size: int, props: dict) -> dict | None:
    """One kernel (default configuration) at size^3: {'kernel', 'chapter', 'gflops',
    'x': {level: FLOP per byte of that level}, 'how' ('ncu' where Nsight Compute counted
    the bytes on this GPU, else 'model': DRAM only, each matrix moved once), 'notes'}.
    None when the rate is neither measurable here nor recorded."""
    shape = (size,) * 3
    try:
        rate = lookup.measure_or_lookup(kernel, shape)["gflops"]["median"]
    except LookupError:
        return None
    flops = 2 * size ** 3
    rec = records.current()
    same_gpu = rec is not None and rec.device.get("name") == props.get("name")
    row = profile.counters(kernel, shape=shape) if same_gpu and kernel in KERNELS else None
    moved = level_bytes(row["metrics"]) if row else {}
    chapter = KERNELS[kernel].chapter if kernel in KERNELS else "00"
    if "DRAM" not in moved:
        return {"kernel": kernel, "chapter": chapter, "gflops": rate, "how": "model",
                "x": {"DRAM": intensity(*shape)}, "notes": {}}
    return {"kernel": kernel, "chapter": chapter, "gflops": rate, "how": "ncu",
            "x": {lv: flops / b for lv, (b, _) in moved.items()},
            "notes": {lv: n for lv, (_, n) in moved.items() if n}}


def missing(pts: list[dict], roofs: list[dict]) -> str | None:
    """One line naming what the roofline lacks here, or None when nothing is missing."""
    gaps = []
    if not any(c["level"] == "L2" and c["gbps"] for c in roofs):
        gaps.append("the L2 ceiling (no l2_read timings: `python -m gemm_kernels sweep "
                    "l2_read` on a GPU)")
    measured = [p for p in pts if p["how"] == "ncu"]
    if measured and not any("L2" in p["x"] for p in measured):
        gaps.append("the kernels' L2 bytes (no L2 sector counts: `python -m gemm_kernels "
                    "profile`)")
    if any(p["notes"].get("shared memory") == "ld+st" for p in measured):
        gaps.append("cp.async's copies into shared memory (only the wavefronts of loads "
                    "and stores were counted)")
    return "Not in this recording: " + "; ".join(gaps) + "." if gaps else None


L1_NOT_DRAWN = "L1, not drawn"


def table(kernels, size: int = profile.GEMM_SHAPE[0]):
    """Per kernel at size^3: its TFLOP/s, its FLOP per byte at each level, and the
    lowest roof over it: the FP32 peak or a level's ceiling x the kernel's FLOP per byte
    of that level (the most it could reach were that level its only limit)."""
    from gemm_kernels.core.table import Table
    props = records.described_device()
    peak = device.peak_fp32_gflops(props)
    bw = {c["level"]: c["gbps"] for c in ceilings(props) if c["gbps"]}   # measured DRAM first
    rows = []
    for name in ["cublas", *kernels]:
        p = point(name, size, props)
        if p is None:
            continue
        roofs = [("FP32 peak", peak)] + [(lv, bw[lv] * x) for lv, x in p["x"].items()
                                         if lv in bw and p["how"] == "ncu"]
        level, roof = min(roofs, key=lambda r: r[1])
        row = {"chapter": p["chapter"], "kernel": name, "TFLOP/s": p["gflops"] / 1000}
        for lv in LEVELS:
            x = p["x"].get(lv) if p["how"] == "ncu" or lv == "DRAM" else None
            row[f"FLOP/B {lv}"] = x
        if p["how"] == "ncu" and "shared memory" not in p["x"]:
            # Every load goes through the L1, a level without a ceiling here: no drawn
            # roof is its limit, and a share of one would read as headroom it lacks.
            row |= {"lowest roof": L1_NOT_DRAWN, "its TFLOP/s": None, "% of it": None}
        else:
            row |= {"lowest roof": level, "its TFLOP/s": roof / 1000,
                    "% of it": 100 * p["gflops"] / roof}
        rows.append(row)
    return Table(rows, list(rows[0]) if rows else ["kernel"],
                 title=f"{size}^3, bytes counted by Nsight Compute, {records.source()}")


def dram_traffic(kernels, size: int = profile.GEMM_SHAPE[0]) -> str:
    """The DRAM bytes Nsight Compute counted for the kernels at size^3 (smallest and
    largest over the kernels), beside the bytes of A and B and of C."""
    shape = (size,) * 3
    rows = [r for r in (profile.counters(k, shape=shape) for k in kernels)
            if r and DRAM_METRICS[0] in r["metrics"]]
    if not rows:
        return f"no DRAM counts for these kernels at {size}^3 here"
    read = [r["metrics"][DRAM_METRICS[0]] / MB for r in rows]
    written = [r["metrics"][DRAM_METRICS[1]] / MB for r in rows]
    return (f"DRAM bytes of {len(rows)} kernels at {size}^3 (Nsight Compute):\n"
            f"  read    {min(read):,.2f} to {max(read):,.2f} MB;"
            f" A and B hold {2 * size * size * 4 / MB:,.2f} MB\n"
            f"  written {min(written):,.2f} to {max(written):,.2f} MB;"
            f" C holds {size * size * 4 / MB:,.2f} MB")


def l2_summary() -> str:
    """The L2 ceiling as `l2_ceiling` fits it, in words, or what is missing."""
    l2 = l2_ceiling()
    if l2 is None:
        return ("L2 ceiling: no l2_read timings here (run `python -m gemm_kernels sweep "
                "l2_read` on a GPU); the roofline leaves the L2 ceiling out.")
    return (f"l2_read on {l2['bytes'] / MiB:,.0f} MiB, PASSES = "
            f"{', '.join(map(str, l2['passes']))}: time = {l2['fixed_ms'] * 1e3:,.1f} µs + "
            f"PASSES x {l2['per_pass_ms'] * 1e3:,.3f} µs\n"
            f"L2 read bandwidth = {l2['bytes'] / MB:,.2f} MB / {l2['per_pass_ms'] * 1e3:,.3f} µs"
            f" = {l2['gbps']:,.0f} GB/s")


# ------------------------------------------------------------------ the picture

LEVEL_MARKERS = {"DRAM": "o", "L2": "s", "shared memory": "^"}
# Measured ceilings black, theoretical ones grey; one dash pattern per level.
CEILING_LOOK = {"shared memory": "-.", "L2": (0, (6, 2, 1, 2, 1, 2)), "DRAM": "--"}


def plot(kernels, size: int = profile.GEMM_SHAPE[0], ax=None):
    """Hierarchical roofline at size^3: the FP32 peak and one ceiling per memory level
    (`ceilings`); cuBLAS and each kernel (default configuration) at its measured GFLOP/s,
    once per level at its FLOP per byte of that level (`point`): one colour per kernel,
    one marker per level, a thin line joining a kernel's points. Prints one line naming
    what is missing (`missing`). The default size is the one the recording profiles."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.lines import Line2D
    props = records.described_device()
    peak = device.peak_fp32_gflops(props)
    verdicts = {n: runnable(KERNELS[n]) for n in kernels}
    refused = [why for ok, why in verdicts.values() if not ok]
    runs = [n for n, (ok, _) in verdicts.items() if ok]
    pts = [p for p in (point(n, size, props) for n in ["cublas", *runs]) if p]
    roofs = [c for c in ceilings(props) if c["gbps"] or c["level"] == "L2"]
    drawn = [c for c in roofs if c["gbps"]]
    xs = [peak / c["gbps"] for c in drawn] + [x for p in pts for x in p["x"].values()]
    x = np.logspace(np.log10(min(xs) / 4), np.log10(max(xs) * 4), 400)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 6))
    handles = [ax.axhline(peak, color="k", lw=2,
                          label=f"FP32 peak: {peak / 1000:.1f} TFLOP/s (theoretical)")]
    for c in drawn:
        ridge = peak / c["gbps"]
        colour = "k" if c["kind"] == "measured" else "0.55"
        below = x <= ridge
        handles += ax.plot(x[below], c["gbps"] * x[below], ls=CEILING_LOOK[c["level"]],
                           color=colour, lw=1.5,
                           label=f"{c['level']}, {c['kind']}: {c['gbps'] / 1000:.1f} TB/s,"
                                 f" ridge {ridge:.1f} FLOP/B\n  ({c['how']})")
    _ridge_labels(ax, drawn, peak)
    colours = [("k", None)] + style.series_styles(len(pts) - 1)
    for p, (colour, _) in zip(pts, colours):
        levels = [lv for lv in LEVELS if lv in p["x"]]
        if len(levels) > 1:
            ax.plot([p["x"][lv] for lv in levels], [p["gflops"]] * len(levels), "-",
                    color=colour, lw=0.8, alpha=0.6)
        for lv in levels:
            line, = ax.plot(p["x"][lv], p["gflops"], LEVEL_MARKERS[lv], ms=8, mew=1.5,
                            mec=colour, mfc=colour if p["how"] == "ncu" else "none",
                            ls="none")
            line.set_gid(f"{p['kernel']}|{lv}")
        label = "cuBLAS" if p["kernel"] == "cublas" else f"{p['chapter']} {p['kernel']}"
        handles.append(Line2D([], [], color=colour, lw=3,
                              label=f"{label}: {p['gflops'] / 1000:.1f} TFLOP/s"))
    # The marker key, once, in black: which level a point is placed by.
    shown = {lv for p in pts for lv in p["x"] if p["how"] == "ncu"}
    for lv in LEVELS:
        if lv in shown:
            handles.append(Line2D([], [], marker=LEVEL_MARKERS[lv], color="k", ls="none",
                                  label=f"FLOP per {lv} byte (Nsight Compute)"))
    if any(p["how"] == "model" for p in pts):
        handles.append(Line2D([], [], marker="o", mfc="none", mec="k", ls="none",
                              label="hollow: FLOP per DRAM byte of the model, n/6"))
    for why in refused:     # a kernel this GPU cannot run: the legend says why
        handles.append(Line2D([], [], ls="none", label=f"left out: {why}"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x[0], x[-1])
    ax.set_ylim(min(p["gflops"] for p in pts) / 3 if pts else peak / 1000,
                peak * 1.5 ** (len(drawn) + 1.6))
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved at that level)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"Hierarchical roofline at {size}^3, {records.source()}", fontsize=10)
    # Outside the axes, right of them: the legend never covers a point or a label.
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1),
              borderaxespad=0)
    ax.grid(True, which="both", alpha=0.3)
    gap = missing(pts, roofs)
    if gap:
        print(gap)
    return ax


# ------------------------------------------------------------------ a roofline per chapter
#
# The picture grows with the course: chapter 00 draws the ceilings with cuBLAS and the
# naive kernel on them; a later chapter calls `chapter_plot` with its own kernels. At
# GROWING_SIZE^3 the three matrices (192 MiB) are larger than the L2, so DRAM traffic is
# not an artefact of everything staying in the cache, as it is at 1024^3.

GROWING_SIZE = 4096


def _name_params(entry) -> tuple[str, dict | None]:
    """A kernel given as its name (default configuration) or as (name, params)."""
    return (entry, None) if isinstance(entry, str) else (entry[0], entry[1])


def dram_counted(kernel: str, params: dict | None, shape) -> float | None:
    """The DRAM bytes (read + written) Nsight Compute counted for `kernel` (default
    configuration where params is None) at `shape` on the recorded GPU, from any profile
    row (a study's included); None where the recording has none."""
    rec = records.current()
    if rec is None or kernel not in KERNELS:
        return None
    full = KERNELS[kernel].resolve(params)
    rows = [r for r in rec.find(kernel, shape, full)
            if DRAM_METRICS[0] in r.get("metrics", {})
            and all(r["params"].get(k) == v for k, v in full.items())]
    if not rows:
        return None
    return sum(rows[-1]["metrics"].get(m, 0) for m in DRAM_METRICS)


_LIVE_RATES: dict = {}


def _rate(name: str, shape, params: dict | None) -> float:
    """The median GFLOP/s of `name` at `shape`: recorded, or measured once per session
    when live (the plot and its table ask for the same kernels; a naive kernel at
    4096^3 takes seconds per timed call on a small GPU)."""
    if not device.is_live():
        return lookup.measure_or_lookup(name, shape, params)["gflops"]["median"]
    key = (name, tuple(shape), tuple(sorted((params or {}).items())))
    if key not in _LIVE_RATES:
        _LIVE_RATES[key] = lookup.measure_or_lookup(name, shape, params)["gflops"]["median"]
    return _LIVE_RATES[key]


def dram_point(entry, size: int = GROWING_SIZE, props: dict | None = None) -> dict | None:
    """One kernel at size^3 on the DRAM roofline: {'kernel', 'params', 'label', 'gflops',
    'ms', 'bytes' (DRAM bytes), 'x' (FLOP per DRAM byte), 'how' ('ncu': counted by Nsight
    Compute on this GPU; 'model': each matrix crossing DRAM once, n/6), 'limit_x' (the
    FLOP per byte at which the measured DRAM ceiling equals the kernel's rate: DRAM can be
    its limit only left of it), 'limit_bytes' (the bytes that would take)}. None when the
    rate is neither measurable here nor recorded."""
    name, params = _name_params(entry)
    props = props if props is not None else records.described_device()
    shape = (size,) * 3
    try:
        rate = _rate(name, shape, params)
    except LookupError:
        return None
    flops = 2 * size ** 3
    rec = records.current()
    same_gpu = rec is not None and rec.device.get("name") == props.get("name")
    counted = dram_counted(name, params, shape) if same_gpu else None
    moved = counted if counted else flops / intensity(*shape)
    dram = next((c["gbps"] for c in ceilings(props)
                 if c["level"] == "DRAM" and c["gbps"]), None)      # measured first
    chapter = KERNELS[name].chapter if name in KERNELS else "00"
    label = "cuBLAS" if name == "cublas" else f"{chapter} {name}"
    ms = flops / (rate * 1e9) * 1e3
    return {"kernel": name, "params": params, "label": label, "gflops": rate, "ms": ms,
            "bytes": moved, "x": flops / moved, "how": "ncu" if counted else "model",
            "limit_x": rate / dram if dram else None,
            "limit_bytes": dram * 1e9 * ms * 1e-3 if dram else None}


def _ridge_labels(ax, drawn: list[dict], peak: float) -> None:
    """The memory ridges (the L2's, the measured and the theoretical DRAM's) named above the
    roof, where no point can be (no kernel beats the peak): a tick up from the bend and
    its label, each on its own height so that ridges close together stay readable."""
    # largest ridge lowest: a tick rising from a smaller ridge passes left of every label
    ridges = [c for c in drawn if c["level"] in ("DRAM", "L2")]
    for i, c in enumerate(sorted(ridges, key=lambda c: c["gbps"])):
        ridge = peak / c["gbps"]
        colour = "k" if c["kind"] == "measured" else "0.4"
        top = peak * 1.5 ** (i + 1)
        ax.plot([ridge, ridge], [peak, top], color=colour, lw=1, ls=":")
        ax.text(ridge, top, f" {c['level']} ridge ({c['kind']}): {ridge:.1f} FLOP/B",
                ha="left", va="center", fontsize=8, color=colour)


def chapter_plot(kernels=(), size: int = GROWING_SIZE, ax=None):
    """The roofline as far as the course has come: the FP32 peak, the DRAM ceilings
    (measured by the device copy, and from the specifications) and the L2 ceiling
    (measured by l2_read), with cuBLAS and `kernels` (names, or (name, params)) at their
    GFLOP/s at size^3. Each sits at its FLOP per DRAM byte: counted by Nsight Compute
    where the recording has the count at this size (filled marker), else the model's
    n/6, each matrix crossing DRAM once (hollow); the legend draws each kernel's marker
    as the plot does. The ridges are named in the legend only (three labels close
    together above the roof would be unreadable)."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.lines import Line2D
    props = records.described_device()
    peak = device.peak_fp32_gflops(props)
    pts = [p for p in (dram_point(k, size, props) for k in ["cublas", *kernels]) if p]
    drawn = [c for c in ceilings(props) if c["gbps"] and c["level"] in ("DRAM", "L2")]
    xs = [peak / c["gbps"] for c in drawn] + [p["x"] for p in pts]
    x = np.logspace(np.log10(min(xs) / 30), np.log10(max(xs) * 3), 400)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 5.5))
    handles = [ax.axhline(peak, color="k", lw=2,
                          label=f"FP32 peak: {peak / 1000:.1f} TFLOP/s (theoretical)")]
    for c in drawn:
        ridge = peak / c["gbps"]
        below = x <= ridge
        handles += ax.plot(x[below], c["gbps"] * x[below], ls=CEILING_LOOK[c["level"]],
                           color="k" if c["kind"] == "measured" else "0.55", lw=1.5,
                           label=f"{c['level']}, {c['kind']}: {c['gbps'] / 1000:.1f} TB/s,"
                                 f" ridge {ridge:.1f} FLOP/B\n  ({c['how']})")
    colours = [("k", None)] + style.series_styles(len(pts) - 1)
    for p, (colour, _) in zip(pts, colours):
        face = colour if p["how"] == "ncu" else "none"      # filled: counted; hollow: n/6
        line, = ax.plot(p["x"], p["gflops"], "o", ms=9, mew=2, mec=colour, mfc=face,
                        ls="none")
        line.set_gid(f"{p['kernel']}|DRAM")
        ax.annotate(p["label"], (p["x"], p["gflops"]), xytext=(-10, -6),
                    textcoords="offset points", ha="right", va="top", fontsize=9,
                    color=colour)
        handles.append(Line2D([], [], marker="o", ms=7, mew=2, mec=colour, mfc=face,
                              ls="none", label=f"{p['label']}: {p['gflops']:,.0f} GFLOP/s"))
    if any(p["how"] == "ncu" for p in pts):
        handles.append(Line2D([], [], marker="o", color="k", ls="none",
                              label="filled: FLOP per DRAM byte counted (Nsight Compute)"))
    if any(p["how"] == "model" for p in pts):
        handles.append(Line2D([], [], marker="o", mfc="none", mec="k", ls="none",
                              label="hollow: each matrix crosses DRAM once (n/6)"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x[0], x[-1])
    ax.set_ylim(min(p["gflops"] for p in pts) / 3 if pts else peak / 1000, peak * 2)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved through DRAM, or through the "
                  "L2 for the L2 roof)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"Roofline at {size}^3, {records.source()}", fontsize=10)
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1),
              borderaxespad=0)
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
