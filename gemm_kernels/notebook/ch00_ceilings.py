"""Chapter 00's tables and excerpts: cuBLAS against the FP32 peak, the two timing
pitfalls with their ratio, the core loop of l2_read, the checker of the A100 prediction,
the picture of the copy exercise's block where it starts on its tile, the two
recorded GPUs side by side, and (for the solution) what
the copy kernel reaches and how the number of rows per thread moves it; and a first
launch (`add_one`) played on the CPU for a reader without a GPU.

Every number comes from the recording (or is measured now, live) through `lookup` and
`roofline`; nothing here is typed in.
"""
from __future__ import annotations

from gemm_kernels.core import device
from gemm_kernels.core.table import Table
from gemm_kernels.measure import lookup, records, roofline
from gemm_kernels.notebook.display import Text, source

COPY_SIZE = (8192, 8192)          # the copy exercise's timed shape (256 MiB each way)
COPY_PARAMS = {"T": "float", "TILE": 32, "ROWS": 4}   # the exercise's configuration


def cublas_table(sizes=(1024, 2048, 4096, 8192)) -> Table:
    """cuBLAS SGEMM at each size^3: TFLOP/s (median of the timed calls), the slowest and
    fastest call, the share of the theoretical FP32 peak, and the correctness check."""
    props = records.described_device()
    peak = device.peak_fp32_gflops(props)
    rows = []
    for n in sizes:
        try:
            r = lookup.measure_or_lookup("cublas", (n, n, n))
        except LookupError:
            continue
        g = r["gflops"]
        rows.append({"size": f"{n}^3", "TFLOP/s": g["median"] / 1000,
                     "slowest to fastest call": f"{g['min'] / 1000:.1f} to {g['max'] / 1000:.1f}",
                     "% of FP32 peak": f"{100 * g['median'] / peak:.0f}%",
                     "error / bound": r.get("error_over_bound")})
    return Table(rows, list(rows[0]) if rows else ["size"],
                 title=f"cuBLAS SGEMM, {records.source()}")


def two_gpus(size: int = 4096) -> Table:
    """The recorded GPUs side by side with only what this chapter has taught: the peaks
    from its formulas and its two measured ceilings (`gpus.summary` without the
    later-chapter kernel and the recording's name, which the appendix table keeps). Every
    TFLOP/s to one decimal, so that 52 reads 52.0 beside 51.2."""
    from gemm_kernels.measure import gpus
    full = gpus.summary(size)
    keep = [c for c in full.columns if c not in ("capstone, % of its cuBLAS", "recording")]
    one_decimal = lambda c, v: f"{v:.1f}" if "TFLOP/s" in c and isinstance(v, float) else v
    rows = [{c: one_decimal(c, r[c]) for c in keep} for r in full]
    # the L2 differs too (the ladder appendix compares the GPUs kernel by kernel);
    # gpus.summary lists the recordings in the order of gpus.recordings()
    l2 = [rec.device.get("l2_bytes") for rec in gpus.recordings()]
    if len(l2) == len(rows):
        for row, b in zip(rows, l2):
            row["L2, MiB"] = f"{b / 2**20:,.0f}" if b else "-"
        keep = [*keep, "L2, MiB"]
    return Table(rows, keep, f"The recorded GPUs side by side ({size}^3 for cuBLAS)")


def naive_dram_gap(size: int = roofline.GROWING_SIZE) -> Text:
    """The roofline's verdict on the naive kernel in one line the student can check: the
    DRAM bytes Nsight Compute counted, the time DRAM needs for them at its measured
    bandwidth (the device copy), that time as a share of the kernel's, and its inverse:
    how many times its bytes DRAM would have to move to be the limit."""
    p = roofline.dram_point("naive", size)
    if p is None or p["how"] != "ncu" or not p["limit_bytes"]:
        return Text(f"Not in this recording: the naive kernel's DRAM bytes at {size}^3.")
    gbps = p["limit_bytes"] / (p["ms"] * 1e-3) / 1e9     # the measured DRAM ceiling
    dram_ms = p["bytes"] / (gbps * 1e9) * 1e3
    return Text(f"The naive kernel at {size}^3: DRAM moved {p['bytes'] / 1e9:,.1f} GB "
                f"(counted by Nsight Compute). At the device copy's {gbps:,.0f} GB/s that "
                f"takes {dram_ms:,.1f} ms; the kernel took {p['ms']:,.0f} ms, so DRAM was "
                f"busy for {dram_ms / p['ms']:.1%} of it: to be the limit, DRAM would have to "
                f"move {p['ms'] / dram_ms:,.0f} times the bytes it moved.")


def few_tiles_bound(size: int = 1024, tile: int = 128) -> Text:
    """The arithmetic behind "too few output tiles" at a small size: if each block took a
    `tile` x `tile` tile of C, only (size / tile)^2 blocks, so at most that many SMs,
    would work; their peak (those SMs x lanes x 2 x clock) set against cuBLAS's recorded
    rate at size^3 says whether cuBLAS can be working that way."""
    props = records.described_device()
    lanes = props.get("fp32_lanes_per_sm") or device.fp32_lanes(props["compute_capability"])
    try:
        g = lookup.measure_or_lookup("cublas", (size, size, size))["gflops"]
    except LookupError:
        return Text(f"Not in this recording: cuBLAS at {size}^3.")
    tiles = (size // tile) ** 2
    busy = min(tiles, props["sm_count"])
    ghz = props["sm_clock_mhz"] / 1000
    bound = busy * lanes * 2 * ghz                               # GFLOP/s
    head = (f"{tile} x {tile} tiles of C at {size}^3: {size}^2 / {tile}^2 = {tiles} blocks, "
            f"so at most {busy} of the {props['sm_count']} SMs work. Their peak: {busy} x "
            f"{lanes} x 2 x {ghz:.3f} GHz = {bound / 1000:.1f} TFLOP/s.\n"
            f"cuBLAS at {size}^3: {g['median'] / 1000:.1f} TFLOP/s (median; fastest call "
            f"{g['max'] / 1000:.1f}).\n")
    if g["median"] > bound:
        return Text(head + f"That is more than {busy} SMs can deliver: cuBLAS does not run "
                    f"{tile} x {tile} tiles here.")
    return Text(head + f"That is within what {busy} SMs can deliver: the measurement does "
                f"not rule out {tile} x {tile} tiles.")


def littles_law(latency_ns: float = 1000.0, threads_per_sm: int = 2048) -> Text:
    """The order of magnitude behind the solution's Little's-law hypothesis. The bytes an
    SM must keep in flight to keep DRAM's reads busy: the read half of the DRAM bandwidth
    (a copy's rate counts reads plus writes; the 1 GiB device copy where it was measured,
    the formula's otherwise) x a latency that is assumed, not measured. Against it, what
    one element per thread has in flight, for floats and doubles, beside what the copy at
    one element per thread reached; and the test that needs no latency: doubles have
    twice the floats' bytes in flight, against the ratio of their measured shares."""
    props = records.described_device()
    bw, how = next(((c["gbps"], c["how"]) for c in roofline.ceilings(props)
                    if c["level"] == "DRAM" and c["gbps"]), (None, ""))
    sms = props.get("sm_count")
    if not bw or not sms:
        return Text("The device properties lack the DRAM bandwidth or the SM count.")
    read = bw / 2
    need = read * 1e9 * latency_ns * 1e-9          # bytes in flight, whole GPU
    lines = [f"read bandwidth: {bw:,.0f} GB/s ({how}: reads plus writes) / 2 = "
             f"{read:,.0f} GB/s",
             f"{read:,.0f} GB/s x {latency_ns:,.0f} ns (an assumed DRAM latency under load, "
             f"not measured here) = {need / 1e6:.1f} MB in flight, "
             f"{need / sms / 1e3:,.1f} KB for each of {sms} SMs"]
    shares = {}
    tile = COPY_PARAMS["TILE"]
    for t, size in (("float", 4), ("double", 8)):
        flying = size * threads_per_sm
        line = (f"one {t} per thread x {threads_per_sm:,} threads per SM = "
                f"{flying / 1e3:.1f} KB in flight per SM, {flying / (need / sms):.0%} of that")
        # set against what the copy at one element per thread reached (ROWS = TILE)
        try:
            r = lookup.measure_or_lookup("copy", COPY_SIZE, {"T": t, "TILE": tile, "ROWS": tile})
            shares[t] = r["gbps"]["median"] / r["reference"]["gbps"]["median"]
            line += f"; measured: {shares[t]:.0%} of the device copy timed beside it"
        except (LookupError, KeyError):
            pass
        lines.append(line)
    if len(shares) == 2:
        lines.append(f"doubles over floats: 2.0 times the bytes in flight (whatever the "
                     f"latency); measured shares {shares['double']:.0%} / "
                     f"{shares['float']:.0%} = {shares['double'] / shares['float']:.1f} times")
    return Text("\n".join(lines))


def _duration(ms: float) -> str:
    """A time for people: microseconds below a millisecond, else milliseconds."""
    return f"{ms * 1000:,.0f} µs" if ms < 1 else f"{ms:,.3f} ms"


def pitfalls() -> Table:
    """The two timing mistakes measured on cuBLAS at 4096^3, each next to the harness's
    time: the time (µs below a millisecond) and its share of the harness's, in percent
    to the digit that tells the all-zero run from the random one."""
    t = roofline.pitfalls_table()
    harness = next(r["ms"] for r in t if r["what"].startswith("CUDA events, random"))
    col = "% of the harness's time"
    rows = [{"what": r["what"], "time": _duration(r["ms"]),
             col: f"{100 * r['ms'] / harness:.3g}%"} for r in t]
    return Table(rows, ["what", "time", col], title=t.title)


def l2_read_core() -> Text:
    """The part of l2_read that the measurement rests on: the index of the thread's
    16 bytes, and the PASSES loads of them combined into one store (the tail for sizes
    that are not a multiple of 4 words, and the inline PTX of load16, are in the
    appendix)."""
    text = source("l2_read", entry="l2_read")
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("template"))
    stop = next(i for i, ln in enumerate(lines) if "} else {" in ln)
    core = lines[start:stop] + ["    }", "    // ... (the last 1 to 3 words when rows * cols "
                                "is not a multiple of 4)", "}"]
    return Text("\n".join(core))


# ------------------------------------------------------------------ the A100 prediction

_SLIPS = {
    "peak": ((2, "twice the right value: 128 lanes per SM? The A100 (8.0) has 64"),
             (0.5, "half the right value: each lane does one FMA, 2 FLOP, per clock"),
             (1e-3, "a thousand times too small: that is TFLOP/s, the cell asks for GFLOP/s"),
             (1e3, "a thousand times too large: clock in MHz gives MFLOP/s; divide by "
                   "1,000 for GFLOP/s"),
             (1e9, "a billion times too large: that is FLOP/s, the cell asks for GFLOP/s")),
    "ridge": ((1e-3, "a thousand times too small: the bandwidth in MB/s? GFLOP/s over "
                     "GB/s gives FLOP per byte"),
              (1e3, "a thousand times too large: GFLOP/s over TB/s (2.039)? Take both in "
                    "giga: GFLOP/s over 2,039 GB/s")),
}


def _number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def check_a100(a100: dict, bandwidth_gbps: float, my_peak_gflops, my_ridge, my_n) -> None:
    """The chapter's prediction for the A100: peak FP32 in GFLOP/s, the ridge in FLOP per
    DRAM byte and the smallest square n with n/6 at or right of it. Each guess is
    compared with the formula's value (within 5%); a wrong one is matched against the
    usual slips (128 lanes, the 2 of an FMA, a factor of 1,000 in the units). The ridge
    and n are also judged against the student's own peak and ridge, so that one slip is
    not counted three times."""
    import math
    if None in (my_peak_gflops, my_ridge, my_n):
        print("Write your three numbers first (my_peak_gflops, my_ridge, my_n), then run "
              "this cell again.")
        return
    peak = device.peak_fp32_gflops(a100)
    ridge = peak / bandwidth_gbps
    n = math.ceil(6 * ridge)
    close = lambda a, b: b != 0 and abs(a / b - 1) <= 0.05
    out = []
    for what, mine, right, unit in (("peak", my_peak_gflops, peak, "GFLOP/s"),
                                    ("ridge", my_ridge, ridge, "FLOP per byte")):
        if close(mine, right):
            out.append(f"{what}: {_number(mine)} {unit}, right.")
            continue
        why = next((w for f, w in _SLIPS[what] if close(mine, right * f)), None)
        if what == "ridge" and close(mine, my_peak_gflops / bandwidth_gbps):
            why = "it follows from your peak, and the division is right"
        out.append(f"{what}: {_number(mine)} {unit}, but the formula gives "
                   f"{_number(right)} {unit}" + (f": {why}." if why else "."))
    if my_n == n:
        out.append(f"n: {my_n}, right: n/6 = {n / 6:.2f} is the first at or past the ridge, "
                   f"{ridge:.2f}.")
    elif my_ridge > 0 and my_n == math.ceil(6 * my_ridge):
        out.append(f"n: {my_n} follows from your ridge; from the right one, {ridge:.2f}, "
                   f"n = {n} (n/6 >= ridge means n >= 6 x ridge, rounded up).")
    else:
        out.append(f"n: {my_n}, but n/6 >= {ridge:.2f} first holds at n = {n} "
                   "(n >= 6 x ridge, rounded up).")
    print("\n".join(out))


# ------------------------------------------------------------------ the copy exercise

def copy_block_picture(tile: int = COPY_PARAMS["TILE"], rows: int = COPY_PARAMS["ROWS"]):
    """One block of the copy exercise (tile x rows threads) on its tile x tile tile, where
    the block starts: its rows of threads are its warps (a warp is 32 consecutive
    threadIdx.x), on the first `rows` rows of the tile, warp 0 drawn lane by lane. The
    rest of the tile is left blank with a question: how the block covers it is the
    exercise, so the picture shows the start and not the loop."""
    import matplotlib.pyplot as plt
    import numpy as np
    warps = tile * rows // 32
    fig, ax = plt.subplots(figsize=(11, 7))
    shades = plt.get_cmap("Blues")(np.linspace(0.35, 0.75, rows))
    ax.add_patch(plt.Rectangle((0, 0), tile, tile, fc="0.93", ec="0.2", lw=1.2))
    for y in range(rows):
        ax.add_patch(plt.Rectangle((0, y), tile, 1, fc=shades[y], ec="none"))
        ax.text(-0.6, y + 0.5, f"threadIdx.y = {y} (warp {y * tile // 32})", ha="right",
                va="center", fontsize=8)
    for y in range(tile + 1):
        ax.axhline(y, color="white", lw=0.3)
    for x in range(tile + 1):
        ax.axvline(x, color="white", lw=0.3)
    ax.axhline(rows, color="0.2", lw=1.2)
    ax.add_patch(plt.Rectangle((0, 0), tile, 1, fill=False, ec="#c0392b", lw=2.5))
    # the lane numbers above the tile, where they have room to be read
    for lane in (0, 1, 2, 3, tile - 1):
        ax.text(lane + 0.5, -0.3, str(lane), ha="center", va="bottom", fontsize=9,
                color="#c0392b", clip_on=False)
    ax.text(tile / 2, -0.3, "...  lanes (threadIdx.x) of warp 0  ...", ha="center",
            va="bottom", color="#c0392b", fontsize=9, clip_on=False)
    ax.text(tile / 2, (rows + tile) / 2,
            f"rows {rows} to {tile - 1} of the tile:\nwhich threads copy them?",
            ha="center", va="center", fontsize=12, color="0.35")
    ax.annotate(f"warp 0 (threadIdx.y = 0): lanes 0..{tile - 1},\n"
                f"threadIdx.x = 0..{tile - 1}, on {tile} neighbouring\nfloats of row 0",
                xy=(tile, 0.5), xytext=(tile + 1.2, 2.5), fontsize=9, color="#c0392b",
                va="center", arrowprops={"arrowstyle": "->", "color": "#c0392b"})
    ax.text(tile + 1.2, tile / 2,
            f"a block = {tile} x {rows} threads = {warps} warps,\n"
            f"one warp per row of threads;\nthe tile = {tile} x {tile} elements",
            fontsize=9, va="center")
    ax.set_xticks([0, tile // 2, tile])
    ax.set_xticklabels(["0", f"column {tile // 2}", f"{tile}"])
    ax.set_yticks([])
    ax.set_xlabel("columns of the tile")
    ax.set_title(f"One block of the copy where it starts on its {tile} x {tile} tile "
                 f"(TILE = {tile}, ROWS = {rows})", fontsize=10, pad=22)
    ax.set_xlim(-0.2, tile)
    ax.set_ylim(tile, 0)
    ax.set_aspect("equal")
    fig.subplots_adjust(left=0.2, right=0.62)
    return fig


# ------------------------------------------------------------------ the copy's solution

def copy_result(params: dict = COPY_PARAMS, shape=COPY_SIZE) -> str:
    """The copy kernel at the exercise's configuration and shape, next to the device
    copy timed beside it in the same run."""
    r = lookup.measure_or_lookup("copy", shape, params)
    ref = r.get("reference", {}).get("gbps", {}).get("median")
    rate = r["gbps"]["median"]
    mib = shape[0] * shape[1] * 4 / (1 << 20)
    line = (f"copy, TILE={params['TILE']}, ROWS={params['ROWS']}, {params['T']}, "
            f"{shape[0]:,} x {shape[1]:,} ({mib:,.0f} MiB read and {mib:,.0f} MiB written): "
            f"{rate:,.0f} GB/s (slowest to fastest call {r['gbps']['min']:,.0f} to "
            f"{r['gbps']['max']:,.0f})")
    if ref:
        line += f"\ndevice-to-device copy timed beside it: {ref:,.0f} GB/s, so {rate / ref:.0%} of it"
    return line + f"\n({r['source']})"


def column_writes_cost(params: dict = COPY_PARAMS, shape=COPY_SIZE) -> str:
    """Half of the "lanes down a column" copy, as recorded: chapter 10's naive transpose
    reads rows as the copy does but writes down columns of its output. Its share of the
    device copy timed beside it, next to the copy's own, at the exercise's configuration;
    the recording holds no timed run of a copy with both sides down a column."""
    rows = {}
    for name in ("copy", "transpose_naive"):
        try:
            r = lookup.measure_or_lookup(name, shape, params)
        except LookupError:
            return "Not in this recording: the naive transpose at the exercise's configuration."
        rows[name] = (r["gbps"]["median"], lookup.share(r))
    (c, c_share), (t, t_share) = rows["copy"], rows["transpose_naive"]
    return (f"copy (reads and writes along rows): {c:,.0f} GB/s, {c_share:.0f}% of the device "
            f"copy timed beside it\n"
            f"naive transpose (reads along rows, writes down columns): {t:,.0f} GB/s, "
            f"{t_share:.0f}% of the device copy timed beside it, {c / t:.1f} times slower\n"
            f"(TILE={params['TILE']}, ROWS={params['ROWS']}, {params['T']}, "
            f"{shape[0]:,} x {shape[1]:,}; {records.source()})")


def rows_per_thread_plot(tile: int = 32, shape=COPY_SIZE, ax=None):
    """The copy at TILE = `tile`: GB/s against ROWS (so TILE / ROWS elements per thread),
    float and double, each with the device copy timed beside it."""
    import matplotlib.pyplot as plt
    from gemm_kernels.core.kernels import KERNELS
    rows_values = next(p.values for p in KERNELS["copy"].params if p.name == "ROWS")
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4))
    refs = []
    for t, colour, marker in (("float", "C0", "o"), ("double", "C1", "s")):
        xs, ys = [], []
        for rows in rows_values:
            try:
                r = lookup.measure_or_lookup("copy", shape, {"T": t, "TILE": tile, "ROWS": rows})
            except LookupError:
                continue
            xs.append(tile // rows)
            ys.append(r["gbps"]["median"])
            ref = r.get("reference", {}).get("gbps", {}).get("median")
            if ref:
                refs.append(ref)
        ax.plot(xs, ys, marker=marker, color=colour,
                label=f"copy of {t}s ({4 if t == 'float' else 8} bytes per lane)")
        if t == COPY_PARAMS["T"] and tile == COPY_PARAMS["TILE"] and \
                tile // COPY_PARAMS["ROWS"] in xs:
            i = xs.index(tile // COPY_PARAMS["ROWS"])
            ax.annotate(f"the exercise: ROWS = {COPY_PARAMS['ROWS']}", (xs[i], ys[i]),
                        xytext=(0, -28), textcoords="offset points", ha="center",
                        fontsize=8, color=colour, arrowprops={"arrowstyle": "->",
                                                              "color": colour})
    if refs:
        ax.axhspan(min(refs), max(refs), color="0.8", alpha=0.6,
                   label=f"device copy timed beside each ({min(refs):,.0f} to {max(refs):,.0f})")
    from matplotlib.ticker import FixedLocator, ScalarFormatter
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([tile // r for r in rows_values]))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel(f"elements per thread = TILE / ROWS (TILE = {tile}; "
                  f"a block is {tile} x ROWS threads)")
    ax.set_ylabel("GB/s (bytes read + written)")
    ax.set_ylim(0, None)
    ax.set_title(f"The copy at {shape[0]:,} x {shape[1]:,}, {records.source()}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, alpha=0.3)
    return ax


# ------------------------------------------------------------------ the appendix

L2_LOADS = ("ld.relaxed.gpu.global", "ld.global.cg", "ld.global")


def l2_read_loads(passes: int = 16) -> Table:
    """l2_read compiled here with each of three PTX loads in load16 (the kernel's own,
    ld.relaxed.gpu, first) at PASSES = `passes`: how many 16-byte loads (LDG.E.128...)
    the SASS keeps in the main path. ptxas merges the repeated loads of one address
    unless the load is ld.relaxed.gpu."""
    import re
    from gemm_kernels.core import compiler
    from gemm_kernels.core.kernels import KERNELS
    k = KERNELS["l2_read"]
    text = k.source_text()
    vector = re.compile(r"\b(LDG\.E\.128(?:\.[A-Z]+)*)")
    rows = []
    for load in L2_LOADS:
        variant = k if load == L2_LOADS[0] else k.with_code(
            text.replace(L2_LOADS[0], load), name=f"l2_read:{load}", source="l2_read.cu")
        found = vector.findall(compiler.sass(variant, {"PASSES": passes}))
        rows.append({"load16 uses": f"{load}" + (" (l2_read)" if load == L2_LOADS[0] else ""),
                     "16-byte loads in the SASS": len(found),
                     "as": ", ".join(sorted(set(found))) or "-"})
    return Table(rows, list(rows[0]),
                 title=f"l2_read at PASSES = {passes}, compiled here: {passes} loads asked for")


# The ladder's bars in words a reader of chapter 00 can decode (the registry's names are
# identifiers); a kernel missing here keeps its registry name.
LADDER_LABELS = {
    "naive": "naive", "coalesced": "coalesced", "smem_tiled": "shared-memory tiles",
    "bank_layout": "colliding shared reads", "tile_1d": "1D tiles",
    "tile_2d": "2D tiles, shared read per FMA", "tile_2d_reg": "2D tiles, registers",
    "tile_2d_strided": "2D tiles, strided outputs", "float4": "float4 loads",
    "double_buffer": "double buffering", "zorder": "z-order threads",
    "capstone": "capstone", "sgemm_tiled_vec": "float, vector shared loads",
}


# The ladder's bars that are not steps up but variants a chapter measures on purpose
# (a layout whose shared-memory reads collide; 2D tiles that reread shared memory for
# every FMA; outputs strided across the tile): drawn hatched, so that a dip reads as a
# chosen experiment. Chapter 11's float control kernel is left off the plot: it is a
# check of 16-byte shared loads before chapter 11's double precision, not an SGEMM step.
LADDER_VARIANTS = ("bank_layout", "tile_2d", "tile_2d_strided")
LADDER_LEFT_OFF = ("sgemm_tiled_vec",)


def ladder_plot(size: int = 4096):
    """`gpus.plot_ladder` for the SGEMM kernels of chapters 01 to 09 (every chapter's
    kernel as a share of cuBLAS on each recorded GPU), its bars named in plain words,
    chapter first, each with its share written on it; the variants measured on purpose
    hatched and named in the legend, and the 100% line labelled as cuBLAS."""
    from matplotlib.patches import Patch
    from gemm_kernels.measure import gpus
    from gemm_kernels.measure.ladder import ladder_kernels
    kernels = [k for k in ladder_kernels() if k not in LADDER_LEFT_OFF]
    ax = gpus.plot_ladder(size, kernels)
    ax.set_xticks(ax.get_xticks(), [f"{gpus.KERNELS[k].chapter} {LADDER_LABELS.get(k, k)}"
                                    for k in kernels], rotation=30, ha="right")
    for bars in ax.containers:
        for k, bar in zip(kernels, bars):
            if k in LADDER_VARIANTS:
                bar.set_hatch("//")
                bar.set_edgecolor("white")
        # each bar's share written on it: the first bars are too short to read off the axis
        for bar in bars:
            h = bar.get_height()
            # near the dashed 100% line a label above the bar would sit on the line, so
            # it goes inside the top of the bar, in white
            inside = h > 90
            ax.annotate(f"{h:.1f}" if h < 10 else f"{h:.0f}",
                        (bar.get_x() + bar.get_width() / 2, h),
                        xytext=(0, -2 if inside else 1), textcoords="offset points",
                        ha="center", va="top" if inside else "bottom", fontsize=7,
                        color="white" if inside else "black")
    handles, labels = ax.get_legend_handles_labels()
    line = next(l for l in ax.get_lines() if list(l.get_ydata()) == [100, 100])  # cuBLAS
    ax.legend([*handles, line, Patch(facecolor="0.6", edgecolor="white", hatch="//")],
              [*labels, "cuBLAS on the same GPU (100%)", "a variant measured on purpose"],
              fontsize=8, loc="upper left")
    ax.set_title(f"The SGEMM kernels of chapters 01 to 09 at {size}^3, as a share of cuBLAS "
                 "on each recorded GPU", fontsize=10)
    return ax


def roofline_plot(kernels=("naive",), size: int = roofline.GROWING_SIZE):
    """Chapter 00's roofline: `roofline.chapter_plot` with DRAM's roofs only, since every
    kernel on it is placed by its DRAM bytes (an L2 roof on the same axis would invite
    reading a kernel against it), and an arrow from each kernel counted by Nsight Compute
    up to the roof above it, labelled with how many times below that roof it runs: the
    naive kernel sits near the DRAM ridge, and the arrow shows that this does not make it
    a kernel on the edge. Returns the figure."""
    ax = roofline.chapter_plot(list(kernels), size)
    fig = ax.figure
    for line in list(ax.get_lines()):
        if line.get_label().startswith("L2"):
            line.remove()
    legend = ax.get_legend()
    keep = [(h, t.get_text()) for h, t in zip(legend.legend_handles, legend.get_texts())
            if not t.get_text().startswith("L2")]
    ax.legend([h for h, _ in keep], [t for _, t in keep], fontsize=8, loc="upper left",
              bbox_to_anchor=(1.02, 1), borderaxespad=0)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved through DRAM)")
    props = records.described_device()
    peak = device.peak_fp32_gflops(props)
    dram = next((c["gbps"] for c in roofline.ceilings(props)
                 if c["level"] == "DRAM" and c["kind"] == "measured" and c["gbps"]), None)
    for k in kernels:
        p = roofline.dram_point(k, size, props)
        if p is None or p["how"] != "ncu":
            continue
        roof = min(peak, dram * p["x"]) if dram else peak
        ax.annotate("", xy=(p["x"], roof), xytext=(p["x"], p["gflops"]),
                    arrowprops={"arrowstyle": "<->", "color": "0.35", "lw": 1.2})
        ax.annotate(f"{roof / p['gflops']:,.0f}x below the roof",
                    (p["x"], (roof * p["gflops"]) ** 0.5), xytext=(8, 0),
                    textcoords="offset points", va="center", fontsize=9, color="0.25")
    return fig


# ---------------------------------------------------------------- the first launch

def add_one_on_cpu(n: int = 1000, threads: int = 256):
    """(blocks, x): the launch of `add_one` (x[i] += 1 for i < n, one thread per
    element) played thread by thread on the CPU, block after block: what the GPU
    computes, for a reader without one."""
    import numpy as np
    x = np.zeros(n, dtype=np.float32)
    blocks = (n + threads - 1) // threads
    for b in range(blocks):
        for t in range(threads):
            i = b * threads + t          # int i = blockIdx.x * blockDim.x + threadIdx.x
            if i < n:                    # the last block is only partly used
                x[i] += 1.0
    return blocks, x
