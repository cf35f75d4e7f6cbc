"""Chapter 06's tables and pictures: what the compiler makes of each loop order, one
counting table for the kernels compared, where each kernel stands at 4096^3, why
Boehm's kernel-5 tile gains less on chapter 05 here than on his GPU, the path from that tile to the
registry's default one change at a time (with where its warps wait, from the study
`ch06_path_stalls`), and the appendix's comparison of thread patches.

Rates come from the recording (or are measured, live); stall reasons and issue-slot use
only from the recording; the rest is the static analysis and the bank model, run here.
A configuration is written (label, kernel, params); params None means the registry's
default.
"""
from __future__ import annotations

import html

import re

from gemm_kernels.core import analysis, compiler, device
from gemm_kernels.core.kernels import get as get_kernel
from gemm_kernels.core.launch import kernel_of
from gemm_kernels.core.registry import Kernel
from gemm_kernels.core.table import Table
from gemm_kernels.measure import lookup, records, studies
from gemm_kernels.memory import ch05_06_thread_tiles as tiles
from gemm_kernels.notebook import evidence, fragments
from gemm_kernels.notebook.ch05_tile_1d import A6000, BOEHM, BOEHM_SIZE
from gemm_kernels.notebook.display import Folded, Stacked
from gemm_kernels.exercises.notebooks import solution_source

# The tile of Boehm's kernel 5 (chapter 06) and of his kernel 4 (chapter 05).
K5 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
K4 = {"BM": 64, "BN": 64, "BK": 8, "TM": 8}
# From K5 to the registry's default, one change at a time: the steps of the study
# `ch06_path_stalls` (found by their parameters, so the labels here are the chapter's
# names: the last step is the default).
PATH_STUDY = "ch06_path_stalls"
# The chapter's name for the registry's default of tile_2d_reg: "ch06" beside chapter
# 05's "ch05 default", so that no sentence names two configurations "default".
DEFAULT = "ch06 default"
PATH = (("K5", K5), ("patch 8x4", {**K5, "TN": 4}), ("BM 64", {**K5, "TN": 4, "BM": 64}),
        (DEFAULT, None))
# The chapter calls each configuration by one short name in every table, plot and
# sentence; the profiled study `stalls` labels its steps in words, renamed here.
STUDY_NAMES = {"chapter 05, kernel-4 tile": "ch05 kernel-4 tile",
               "chapter 05, default": "ch05 default", "chapter 06, kernel-5 tile": "K5"}
# The four thread patches of the K5 tile (appendix).
PATCHES = ((8, 8), (8, 4), (4, 8), (4, 4))

_STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
ISSUE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
WARPS = "sm__warps_active.avg.pct_of_peak_sustained_active"
WARPS_PER_SM = 64       # sm_90: the denominator of sm__warps_active's percentage


def _params(name, params) -> dict:
    return kernel_of(name).resolve(params)


def _f(v, digits: int = 1):
    """A number with a fixed count of decimals, as text ('21.0', not '21'); None stays."""
    return None if v is None else f"{v:.{digits}f}"


def _short(p: dict) -> str:
    return " ".join(f"{n}={p[n]}" for n in ("BM", "BN", "BK", "TM", "TN") if n in p)


# ------------------------------------------------------------------ loop orders

# The k loop of sgemm_tile_2d, kept rolled on purpose.
_ROLLED = re.compile(r"#pragma unroll 1(\s*\n\s*for \(int k = 0; k < BK; \+\+k\))")


def unrolled_dot_product() -> Kernel:
    """`tile_2d` as it is, in its dot-product order, with one change: its k loop is
    unrolled (`#pragma unroll` where the file says `#pragma unroll 1`). For the static
    analysis only: compiled here, never timed."""
    k = get_kernel("tile_2d")
    text, n = _ROLLED.subn(r"#pragma unroll\1", k.source_text())
    if n != 1:
        raise ValueError(f"{k.source}: expected one '#pragma unroll 1' before the k loop "
                         f"of sgemm_tile_2d, found {n}")
    return k.with_code(text, name="tile_2d, k loop unrolled", source=k.source)


def loop_orders(configs) -> Table:
    """Per (label, kernel, params): registers (ptxas here), and the main loop's shared
    loads, FFMAs and how many FFMAs read each register a shared load fills (fewest and
    most), from the SASS compiled here. The loads and FFMAs are counted twice: as written
    in the loop's code (static) and as executed in one trip per tile, where a k loop left
    rolled inside runs its body once per k (TM * TN * BK FFMAs a trip, whatever the code
    size)."""
    rows = []
    for label, name, params in configs:
        k = kernel_of(name)
        p = k.resolve(params)
        body = analysis.main_loop(compiler.sass(k, p))
        readers = [len(r) for _, _, r in fragments.fragment_uses(body)]
        lds = sum(f.startswith("LDS") for _, f, _ in body)
        ffma = sum(f == "FFMA" for _, f, _ in body)
        runs = p["TM"] * p["TN"] * p["BK"] // ffma if ffma else 1
        rows.append({"kernel": label, "params": _short(p),
                     "registers": compiler.resources(k, p)["registers"],
                     "shared loads in the code": lds,
                     "of them LDS.128": sum(f == "LDS.128" for _, f, _ in body),
                     "FFMA in the code": ffma,
                     "inner k loop runs": runs,
                     "shared loads executed": f"{lds * runs:,}",
                     "FFMA executed": f"{ffma * runs:,}",
                     "FFMAs per loaded register: fewest": min(readers, default=None),
                     "most": max(readers, default=None)})
    # the runs of the inner loop stay in the rows (tests, readers), off the page
    shown = [c for c in rows[0] if c != "inner k loop runs"]
    return Table(rows, shown, title="main loop, one trip per tile: instructions in "
                 "the code, and executed (a rolled k loop runs its body once per k; SASS "
                 f"compiled here for sm_90 by ptxas {compiler.ptxas_version()})")


# ------------------------------------------------------------------ counting

# The one measure of shared-memory work the chapter compares: the lane FMAs a whole
# warp does per shared-load wavefront in one tile (one BK slice of K: one thread's FFMAs
# x 32 over the warp's wavefronts). Shared memory serves about one wavefront per cycle
# per SM, so this is how many FMAs one wavefront feeds. It is 32 / chapter 05's
# wavefronts per FFMA instruction, counted over the loads only; the name says "FMAs"
# (lanes), not "FFMA" (instructions), because chapter 05's tables count instructions.
WARP_FFMA = "FMAs per wavefront"


def fmas_shown(x: float) -> int | float:
    """An FMAs-per-wavefront count as printed: whole above 10, one decimal below, where
    rounding to a whole FMA would move a bound computed from it by several percent."""
    return round(x) if x >= 10 else round(x, 1)


def warp_ffma_per_wavefront(summary_row: dict) -> int | float:
    """WARP_FFMA of one row of the bank model's `step_summary` (`fmas_shown`)."""
    return fmas_shown(32 * summary_row["FFMA"] / float(summary_row["wavefronts"]))


def step_table(configs) -> Table:
    """The bank model's `step_summary` of `configs` with the chapter's one measure,
    WARP_FFMA, in place of the per-thread ratio."""
    rows = [{**{k: v for k, v in r.items() if k != "FFMA per wavefront"},
             WARP_FFMA: warp_ffma_per_wavefront(r)} for r in tiles.step_summary(configs)]
    return Table(rows, list(rows[0]), title="one tile (one BK slice of K): per thread (FFMA, loads) and "
                 "per warp (wavefronts, bank model, and the warp's lane FMAs per wavefront)")


def counting(configs) -> Table:
    """One table for the kernels compared, per (label, kernel, params): per thread and
    tile (one BK slice of K) its FFMAs and shared-load instructions (model, as compiled),
    per warp and tile the shared wavefronts (bank model) and lane FMAs per wavefront, and the
    registers of the binary that was timed (ptxas here where none was) with the warps
    per SM they allow."""
    rows = []
    for label, name, params in configs:
        p = _params(name, params)
        s = tiles.step_summary([(name, p)])[0]
        loads = s["LDS"] + s["LDS.64"] + s["LDS.128"]
        timed = (lookup.binary(name, p) or {}).get("registers")
        occ = analysis.kernel_occupancy(name, p, registers=timed)
        rows.append({"kernel": label, "params": s["params"], "FFMA": s["FFMA"],
                     "shared loads": loads, "FFMA per load": s["FFMA per load"],
                     "wavefronts": s["wavefronts"], "conflicts":
                         round(s["wavefronts"] - s["ideal"], 2),
                     WARP_FFMA: warp_ffma_per_wavefront(s),
                     "registers": occ.registers_per_thread, "warps/SM": occ.warps_per_sm})
    # the columns are defined in the chapter's prose; the title says only what a row counts
    return Table(rows, list(rows[0]), title="one tile (one BK slice of K): per thread (FFMA, "
                 "loads), per warp (wavefronts, bank model), and the timed binary's registers")


def register_blocks(configs) -> str:
    """One line per (label, kernel, params): the occupancy arithmetic of the registers
    of the timed binary (as `counting`): registers per thread rounded up to the
    allocation step, times the block's threads, against the SM's register file; the
    block count is `analysis.occupancy`'s."""
    lim = device.limits()
    step = lim["register_allocation_unit"] // lim["warp_size"]   # registers per thread
    per_sm = lim["registers_per_sm"]
    lines = [f"an SM has {per_sm:,} registers, handed out in steps of {step} per thread"]
    for label, name, params in configs:
        p = _params(name, params)
        timed = (lookup.binary(name, p) or {}).get("registers")
        occ = analysis.kernel_occupancy(name, p, registers=timed)
        regs, threads = occ.registers_per_thread, occ.threads_per_block
        rounded = -(-regs // step) * step
        block = rounded * threads
        n = occ.limits["registers"]
        fit = (f"{n} blocks need {n * block:,} <= {per_sm:,}, " if n > 1 else "")
        cap = (f" (two blocks would need at most {per_sm:,} / (2 x {threads}) = "
               f"{per_sm // (2 * threads)} registers per thread)" if n == 1 else "")
        lines.append(f"{label}: {regs} registers per thread, counted as {rounded}; a block of "
                     f"{threads} threads: {rounded} x {threads} = {block:,}; {fit}{n + 1} "
                     f"{'blocks ' if n == 1 else ''}need {(n + 1) * block:,} > {per_sm:,}: {n} block{'' if n == 1 else 's'} "
                     f"per SM{cap}")
    return "\n".join(lines)


# ------------------------------------------------------------------ standings

STANDINGS = (("ch03 smem_tiled", "smem_tiled", None),
             ("ch05 kernel-4 tile", "tile_1d", K4),
             ("ch05 default", "tile_1d", None),
             ("tile_2d (rolled dot products), K5 tile", "tile_2d", K5),
             ("K5", "tile_2d_reg", K5),
             (DEFAULT, "tile_2d_reg", None))
# The main path's measurement: the chapter's two configurations against chapter 05's
# best (and cuBLAS, drawn by `standings` itself).
STORY = tuple(c for c in STANDINGS if c[0] in ("ch05 default", "K5", DEFAULT))


def ladder_plot(table, ax=None):
    """`ladder.plot` of a `ch05_06_thread_tiles.ladder_table`, with cuBLAS named as chapter
    03 names it: the ladder's cuBLAS line is cuBLAS timed in runs of its own, not the
    cuBLAS beside each kernel that the standings chart divides by, and the legend says so.
    Returns the Axes."""
    from gemm_kernels.measure import ladder
    ax = ladder.plot(table, ax=ax)
    # in TFLOP/s, the unit of the rest of the chapter: every line's rates over 1000 (the
    # 1, 2, 5 x 10^n ticks of the log axis stay where they are)
    for line in ax.get_lines():
        line.set_ydata([y / 1e3 for y in line.get_ydata()])
    ax.relim()
    ax.autoscale_view()
    ax.set_ylabel("TFLOP/s (log scale)")
    ax.set_title(table.title.replace("GFLOP/s", "TFLOP/s"))
    legend = ax.get_legend()
    for text in legend.get_texts() if legend else []:
        if text.get_text().startswith("cublas"):
            text.set_text("cuBLAS (timed on its own at each size)")
        elif text.get_text().endswith("· tile_2d"):
            # the rolled dot product is a counter-example, not a step of the ladder
            text.set_text(text.get_text() + " (k loop kept rolled: the counter-example)")
    return ax


# Every configuration the chapter names, as (name, kernel, params, where it is used):
# the table a student keeps beside the chapter. None: the kernel's registry default.
NAMES = (("ch05 default", "tile_1d", None, "the kernel to beat: chapter 05's best"),
         ("K5", "tile_2d_reg", K5, "Boehm's kernel 5: every section"),
         (DEFAULT, "tile_2d_reg", None, "best of the sweep: the exercise, the last step of 'From K5 to ch06 default'"),
         ("patch 8x4", "tile_2d_reg", dict(PATH)["patch 8x4"], "a step of the path, labelled by its change (patch 8x8 -> 8x4)"),
         ("BM 64", "tile_2d_reg", dict(PATH)["BM 64"], "a step of the path, labelled by its change (BM 128 -> 64)"),
         ("K5, two blocks", "tile_2d_reg", K5,
          "K5 with __launch_bounds__(256, 2): 'The control', the practice"),
         ("strided", "tile_2d_strided", K5, "another thread layout: the practice, Appendix C"),
         ("ch05 kernel-4 tile", "tile_1d", K4,
          "chapter 05's kernel at Boehm's kernel-4 tile: Appendices G, H"),
         ("tile_2d", "tile_2d", K5, "the dot-product order, k loop rolled: Appendices D, F"))


# The first MAIN_NAMES of NAMES are those a reader needs before the chapter's first
# section (the kernel to beat, Boehm's tile, the exercise's); the others are introduced
# where they are first used, and listed folded.
MAIN_NAMES = 3


def configurations(k5: dict, default: dict, fold_rest: bool = False):
    """Every configuration the chapter names (NAMES, with `k5` and `default` for its two
    own), a column per tunable ('-': a tunable the kernel lacks) and where it is used,
    then the values the sweep of `tile_2d_reg` tried. `fold_rest`: the main path's
    names needed first (the first MAIN_NAMES) as a table, the rest folded under it, so
    that a reader meets each other name where it is used."""
    params = [p.name for p in get_kernel("tile_2d_reg").params]
    own = {"K5": k5, DEFAULT: default}
    rows = []
    for name, kernel, p, where in NAMES:
        p = get_kernel(kernel).resolve(own.get(name, p))
        rows.append({"name": name, "kernel": kernel, **{t: p.get(t, "-") for t in params},
                     "where it is used": where})
    swept = {p.name: ", ".join(map(str, p.values)) for p in get_kernel("tile_2d_reg").params}
    rows.append({"name": "values swept", "kernel": "tile_2d_reg", **swept,
                 "where it is used": "the sweep at 2048³: Appendix E"})
    columns = ["name", "kernel"] + params + ["where it is used"]
    if not fold_rest:
        return Table(rows, columns,
                     title="the configurations the chapter names, and the sweep of tile_2d_reg")
    return Stacked(Table(rows[:MAIN_NAMES], columns,
                         title="the three configurations you need first"),
                   Folded(Table(rows[MAIN_NAMES:], columns),
                          "the other names, each introduced where it is first used, "
                          "and the values swept"))


def ladder_rows(table) -> Table:
    """A `ch05_06_thread_tiles.ladder_table` in TFLOP/s, the unit of the rest of the
    chapter: median, min, max and the cuBLAS of the same run, one decimal each."""
    def tf(g):
        return None if g is None else f"{g / 1e3:.1f}"
    rates = ("GFLOP/s", "min", "max", "cuBLAS same run")
    rows = [{**r, **{c: tf(r.get(c) or None) for c in rates}} for r in table]
    columns = ["TFLOP/s" if c == "GFLOP/s" else c for c in table.columns]
    for r in rows:
        r["TFLOP/s"] = r.pop("GFLOP/s")
    return Table(rows, columns, title=table.title.replace("GFLOP/s", "TFLOP/s"))


def standings_rows(size: int = 4096, configs=STANDINGS) -> list[dict]:
    """Per (label, kernel, params): TFLOP/s at size^3, its % of cuBLAS timed in the
    same run, and the run it was timed in with its day (None where not measured)."""
    out = []
    for label, name, params in configs:
        try:
            r = lookup.measure_or_lookup(name, (size,) * 3, params)
        except LookupError:
            out.append({"kernel": label, "TFLOP/s": None, "% of cuBLAS": None,
                        "run": None, "timed on": None})
            continue
        out.append({"kernel": label, "TFLOP/s": r["gflops"]["median"] / 1e3,
                    "% of cuBLAS": lookup.share(r), "run": r.get("run"),
                    "timed on": (r.get("time") or "")[:10] or None})
    return out


# Pairs of STANDINGS labels whose rates standing_ratios divides: Boehm's like-for-like
# step (his kernel-4 tile to his kernel 5), then each chapter's default.
RATIOS = (("K5", "ch05 kernel-4 tile",
           f"K5 / ch05 kernel-4 tile ({_short(K4)}; his kernel 4 -> 5)"),
          (DEFAULT, "ch05 default", f"{DEFAULT} / ch05 default"))


def standing_ratios(size: int = 4096, rows=None, only: str | None = None) -> str:
    """One line per pair of RATIOS: their TFLOP/s at size^3 (standings_rows) and the
    ratio, then whether one run timed both (else the day of each), or which was not
    measured. `only`: the line of the pair whose first label is `only`."""
    r = {row["kernel"]: row for row in (rows or standings_rows(size))}
    lines = []
    for top, bottom, what in RATIOS:
        if only is not None and top != only:
            continue
        a, b = r.get(top, {}), r.get(bottom, {})
        if a.get("TFLOP/s") is None or b.get("TFLOP/s") is None:
            lines.append(f"{what}: not measured")
            continue
        line = (f"{what}: {a['TFLOP/s']:.1f} / {b['TFLOP/s']:.1f} TFLOP/s at {size}³ "
                f"= x{a['TFLOP/s'] / b['TFLOP/s']:.2f}")
        # rates of different runs compare less closely: say which runs these are
        if a.get("run") and b.get("run"):
            days = f"both on {a['timed on']}" if a["timed on"] == b["timed on"] else \
                f"{a['timed on']} and {b['timed on']}"
            line += ", timed in one run" if a["run"] == b["run"] else \
                f", timed in two runs ({days})"
        lines.append(line)
    return "\n".join(lines)




def _peak_line(props: dict, name: str) -> tuple[float, str]:
    """This GPU's FP32 peak in GFLOP/s, and the formula written out."""
    lanes = props.get("fp32_lanes_per_sm") or device.fp32_lanes(props["compute_capability"])
    peak = device.peak_fp32_gflops({**props, "fp32_lanes_per_sm": lanes})
    return peak, (f"{name}: {props['sm_count']} SMs x {lanes} FP32 lanes x 2 x "
                  f"{props['sm_clock_mhz'] / 1e3:.2f} GHz = {peak / 1e3:.1f} TFLOP/s peak")


def share_of_peak(gflops: float, props: dict | None = None) -> float:
    """gflops as a share of this GPU's FP32 peak (SMs x FP32 lanes x 2 x clock), in %."""
    return 100 * gflops / _peak_line(props or records.described_device(), "")[0]


def _here_rates(size: int, rows=None) -> tuple[float | None, float | None]:
    """Chapter 05 at his kernel-4 tile and K5 here, TFLOP/s at size^3 (None if not measured)."""
    r = {row["kernel"]: row["TFLOP/s"] for row in (rows or standings_rows(size))}
    return r.get("ch05 kernel-4 tile"), r.get("K5")


def boehm_step(size: int = 4096, rows=None, capped: bool | float = False) -> str:
    """Boehm's step from kernel 4 to kernel 5 against the same step here (chapter 05 at
    his kernel-4 tile to K5), each GPU's ratio of its own two rates. With `capped`, one
    more line: the step to K5 held to two blocks per SM (`capped_run`'s rate, or the
    TFLOP/s given)."""
    here4, here5 = _here_rates(size, rows)
    if None in (here4, here5):
        return "the step here is not measured"
    b4, b5 = BOEHM["kernel 4"] / 1e3, BOEHM["kernel 5"] / 1e3
    lines = ["the step from kernel 4 to kernel 5, each GPU's rate over its own:",
             f"  Boehm ({A6000['name']}, {BOEHM_SIZE}x{BOEHM_SIZE}): kernel 4 -> kernel 5: "
             f"{b4:.1f} -> {b5:.1f} TFLOP/s = x{b5 / b4:.2f}",
             f"  here ({size}³): ch05 kernel-4 tile -> K5: {here4:.1f} -> "
             f"{here5:.1f} TFLOP/s = x{here5 / here4:.2f}"]
    if capped is not False:
        c = capped if capped is not True else \
            capped_run(CAPPED_COMPARE)[0]["gflops"]["median"] / 1e3
        lines.append(f"  here ({CAPPED_SHAPE[0]}³): ch05 kernel-4 tile -> K5, two blocks: {here4:.1f} -> {c:.1f} TFLOP/s = x{c / here4:.2f}")
    return "\n".join(lines)


def boehm_table(size: int = 4096, rows=None, props: dict | None = None) -> Table:
    """Boehm's kernels 4 and 5 and his cuBLAS (his README, RTX A6000) beside chapter 05
    at his kernel-4 tile, K5 and cuBLAS here: each rate in TFLOP/s, as a share of its
    GPU's FP32 peak (the title writes both peaks out) and of its GPU's cuBLAS."""
    here4, here5 = _here_rates(size, rows)
    props = props or records.described_device()
    try:
        cublas = lookup.measure_or_lookup("cublas", (size,) * 3)["gflops"]["median"] / 1e3
    except LookupError:
        cublas = None
    bpeak, bline = _peak_line(A6000, A6000["name"])
    peak, line = _peak_line(props, "here")
    b = {k: v / 1e3 for k, v in BOEHM.items()}
    out = []
    for gpu, label, tf, top, pk in (
            ("Boehm", "kernel 4", b["kernel 4"], b["cuBLAS"], bpeak),
            ("Boehm", "kernel 5", b["kernel 5"], b["cuBLAS"], bpeak),
            ("Boehm", "cuBLAS", b["cuBLAS"], b["cuBLAS"], bpeak),
            ("here", "ch05 kernel-4 tile", here4, cublas, peak),
            ("here", "K5", here5, cublas, peak),
            ("here", "cuBLAS", cublas, cublas, peak)):
        known = None not in (tf, top)
        out.append({"GPU": gpu, "kernel": label, "TFLOP/s": _f(tf),
                    "% of FP32 peak": None if tf is None else f"{100 * tf * 1e3 / pk:.0f}",
                    "% of that GPU's cuBLAS": f"{100 * tf / top:.1f}" if known else None})
    return Table(out, list(out[0]), title=(
        f"each GPU's FP32 peak (SMs x FP32 lanes x 2 x clock): {bline}; {line}. Boehm's "
        f"rates from his README at {BOEHM_SIZE}x{BOEHM_SIZE}, ours at {size}³, "
        + records.recording_label()))


# The kernels set against chapter 05's shared-memory bound: chapter 05's default (the
# bound's own row there), the rolled dot product and the two register-cached tiles.
BOUND_CONFIGS = (("ch05 default", "tile_1d", None), ("tile_2d", "tile_2d", K5),
                 ("K5", "tile_2d_reg", K5), (DEFAULT, "tile_2d_reg", None))


def bound_table(configs=BOUND_CONFIGS, size: int = 4096) -> Table:
    """Chapter 05's shared-memory bound for each (label, kernel, params): the warp's
    lane FMAs per wavefront by the bank model, loads and the tile copies' stores (from
    chapter 05's `step_wavefronts`; the chapter's one shared-memory measure), the rate shared memory alone allows at that count
    (chapter 05's `smem_bound`), the rate at size^3 and its share of the bound. The title
    writes the bound's formula with this GPU's SMs and clock."""
    from gemm_kernels.notebook import ch05_tile_1d
    props = records.described_device()
    # three figures, so that a rate near its bound (tile_2d) divides as printed
    tf = lambda x: None if x is None else _f(x / 1e3, 2 if x < 1e4 else 1)  # noqa: E731
    rows = []
    for label, name, params in configs:
        p = _params(name, params)
        st = ch05_tile_1d.step_wavefronts(name, p)
        w = st["total"] / st["FFMA"]
        bound = ch05_tile_1d.smem_bound(w, props)
        try:
            g = lookup.measure_or_lookup(name, (size,) * 3, params)["gflops"]["median"]
        except LookupError:
            g = None
        rows.append({"kernel": label, "FMAs per wavefront, loads and stores": fmas_shown(32 / w),
                     "bound TFLOP/s": tf(bound), f"TFLOP/s at {size}": tf(g),
                     "% of bound": None if g is None else f"{100 * g / bound:.0f}%"})
    return Table(rows, list(rows[0]), title=(
        f"chapter 05's shared-memory bound: {props['sm_count']} SMs x "
        f"{props['sm_clock_mhz'] / 1e3:.2f} GHz x 1 wavefront per cycle x 2 flop per FMA x FMAs "
        f"per wavefront (a warp's loads and tile-copy stores, bank model); rates at {size}³, "
        + records.recording_label()))


def standings(size: int = 4096, configs=STANDINGS, ax=None):
    """Horizontal bars: each configuration's TFLOP/s at size^3, labelled with its share
    of the cuBLAS timed beside it (one cuBLAS per bar, and no second one drawn)."""
    import matplotlib.pyplot as plt
    rows = standings_rows(size, configs)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.4))
    y = list(range(len(rows)))[::-1]
    vals = [r["TFLOP/s"] or 0 for r in rows]
    # this chapter's kernels in orange (the configurations' kernels, not their labels)
    colours = ["tab:orange" if name.startswith("tile_2d") else "tab:blue"
               for _, name, _ in configs]
    ax.barh(y, vals, color=colours)
    for yi, r, v in zip(y, rows, vals):
        text = "not measured" if r["TFLOP/s"] is None else f"{v:.1f} TFLOP/s" + (
            f"  ({r['% of cuBLAS']:.0f}% of cuBLAS)" if r["% of cuBLAS"] is not None else "")
        ax.text(v, yi, " " + text, va="center", fontsize=9)
    ax.set_yticks(y, [r["kernel"] for r in rows], fontsize=9)
    # room to the right of the longest bar for its label
    ax.set_xlim(0, max(vals + [1]) * 1.6)
    # room above the top bar for the legend of the two colours
    ax.set_ylim(-0.6, len(rows) + 0.5)
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=c, label=lab) for c, lab in
                       (("tab:blue", "earlier chapters' kernels"),
                        ("tab:orange", "this chapter's kernels")) if c in colours],
              loc="upper right", ncol=2, fontsize=8)
    ax.set_xlabel(f"TFLOP/s at {size}³ (share: of the cuBLAS timed in the same run)")
    ax.set_title(f"At {size}³, {records.source()}", fontsize=10)
    ax.figure.tight_layout()
    return ax.figure


# ------------------------------------------------------------------ chapter 05 vs K5

def issue_table() -> Table:
    """Chapter 05's kernel (its kernel-4 tile and its default) next to this chapter's
    K5 tile, profiled at 4096^3 (the study `stalls`): time under the profiler,
    instructions issued, warps resident per SM, the share of cycles in which a scheduler
    issued, the FMA pipe's busy share, and the clock the profiler ran at."""
    pairs = [(s, r) for s, r in studies.results("stalls")
             if s.kernel in ("tile_1d", "tile_2d_reg")]
    rows = []
    for step, r in pairs:
        m = (r or {}).get("metrics", {})
        get = lambda k, f=1.0: None if m.get(k) is None else m[k] * f   # noqa: E731
        rows.append({"kernel": STUDY_NAMES.get(step.label, step.label),
                     "time (ms)": _f(get("gpu__time_duration.sum", 1e-6), 2),
                     "instructions (billions)": _f(get("smsp__inst_executed.sum", 1e-9), 2),
                     "warps per SM": _f(get(WARPS, WARPS_PER_SM / 100)),
                     "issue share %": get(ISSUE),
                     "FMA pipe busy %": get(
                         "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
                     # an SM's elapsed cycles over the time: the clock the profiler ran at
                     "profiler clock (GHz)": None if None in (
                         get("sm__cycles_elapsed.avg"), get("gpu__time_duration.sum")) else
                         _f(m["sm__cycles_elapsed.avg"] / m["gpu__time_duration.sum"], 2)})
    return Table(rows, list(rows[0]), title="4096³ under Nsight Compute, "
                 + records.recording_label())


def issue_summary(table=None) -> Table:
    """issue_table cut to what Appendix G reads: instructions, issue share, profiled
    time, the achieved (resident) warps per SM, and the profiler's clock (lower than the
    timed runs', so profiled times compare only with each other)."""
    rows = list(table if table is not None else issue_table())
    out = [{"kernel": r["kernel"], "instructions (billions)": r["instructions (billions)"],
            "issue share": f"{r['issue share %']:.1f}%", "time (ms)": r["time (ms)"],
            "warps per SM, achieved": r["warps per SM"],
            "profiler clock (GHz)": r["profiler clock (GHz)"]} for r in rows]
    return Table(out, list(out[0]), title="4096³ under Nsight Compute, "
                 + records.recording_label())


def _profiled_counters() -> dict:
    """The counters of issue_table's kernels, by the names the chapter gives them."""
    return {STUDY_NAMES.get(s.label, s.label): r["metrics"]
            for s, r in studies.results("stalls")
            if r is not None and s.kernel in ("tile_1d", "tile_2d_reg")}


def issue_rule(kernel: str = "K5", against: str = "ch05 kernel-4 tile", counters=None,
               sm_count: int | None = None) -> str:
    """Appendix G's rule worked from the profiled counters: time is about instructions /
    (SMs x 4 schedulers x issue share x clock). First `kernel`'s time over `against`'s
    predicted as the instruction ratio over the issue-share ratio (same clock, same SMs),
    beside the profiled ratio; then `kernel`'s own time from the rule, beside its
    profiled time. Each division prints its operands with enough digits to redo it."""
    got = _profiled_counters() if counters is None else counters
    sms = sm_count if sm_count is not None else records.described_device()["sm_count"]
    inst = {k: got[k]["smsp__inst_executed.sum"] / 1e9 for k in (kernel, against)}
    share = {k: got[k][ISSUE] / 100 for k in (kernel, against)}
    ms = {k: got[k]["gpu__time_duration.sum"] / 1e6 for k in (kernel, against)}
    # an SM's elapsed cycles over the time (ns): the clock the profiler ran at, in GHz
    ghz = got[kernel]["sm__cycles_elapsed.avg"] / got[kernel]["gpu__time_duration.sum"]
    r_inst = round(inst[kernel] / inst[against], 3)
    r_share = round(share[kernel] / share[against], 3)
    # instructions (billions) / (SMs x 4 x share x GHz) is in seconds: x 1e3 for ms
    own = inst[kernel] / (sms * 4 * share[kernel] * ghz) * 1e3
    return (
        "time ≈ instructions / (SMs x 4 schedulers x issue share x clock), at 4096³ "
        "under Nsight Compute:\n"
        f"  {kernel} over {against}: instructions {inst[kernel]:.3f} / {inst[against]:.3f} "
        f"billion = {r_inst:.3f}; issue share {100 * share[kernel]:.2f}% / "
        f"{100 * share[against]:.2f}% = {r_share:.3f}; time {r_inst:.3f} / {r_share:.3f} = "
        f"{r_inst / r_share:.2f} (profiled: {ms[kernel]:.2f} / {ms[against]:.2f} ms = "
        f"{ms[kernel] / ms[against]:.2f})\n"
        f"  {kernel} alone: {inst[kernel]:.3f} billion / ({sms} x 4 x "
        f"{share[kernel]:.4f} x {ghz:.2f} GHz) = {own:.1f} ms (profiled: {ms[kernel]:.2f} ms)")


# ------------------------------------------------------------------ the path to the default

def _stall_row(kernel: str, params: dict, shape) -> dict | None:
    """The profile of (kernel, params) at `shape` from `ch06_path_stalls`, else from
    any other profiled study with the same counters (the K5 tile is in `stalls`)."""
    full = _params(kernel, params)
    for step, r in studies.results(PATH_STUDY, shape):
        if r is not None and step.kernel == kernel and _params(kernel, step.params) == full:
            return r
    rec = records.current()
    rows = [] if rec is None else [r for r in rec.find(kernel, shape, full)
                                   if r.get("study") and _STALL.format("barrier")
                                   in (r.get("metrics") or {})]
    # The course-wide study `stalls` first, so that the choice does not hang on file order.
    rows.sort(key=lambda r: r["study"] != "stalls")
    return rows[0] if rows else None


ALL_STALLS = "all stall reasons"
_TIME = "gpu__time_duration.sum"
_INST = "smsp__inst_executed.sum"
ALL_WITH_SELECTED = "all reasons, selected included"
_STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_COLUMNS = {"issue share %": ISSUE,
                 "barrier": _STALL.format("barrier"),
                 "long scoreboard": _STALL.format("long_scoreboard"),
                 "short scoreboard": _STALL.format("short_scoreboard")}


def blocks_x_warps(blocks: int, warps: int) -> str:
    """Warps per SM written as blocks per SM x warps per block: "2 x 8" for two blocks of
    8 warps (16 warps per SM in all)."""
    return f"{blocks} x {warps // blocks if blocks else warps}"


def path_rows(size: int = 2048, stall_shape=(4096, 4096, 4096)) -> list[dict]:
    """Per step of PATH: registers of the timed binary, blocks and warps per SM, steps
    along K at 4096, FMAs per wavefront and conflicts (bank model), the recorded rate
    at size^3 and its ratio to the step before, and where the warps wait at
    `stall_shape` (None where that configuration was not profiled)."""
    rows, prev, prev_issue, prev_prof, prev_inst = [], None, None, None, None
    for label, p in PATH:
        p = _params("tile_2d_reg", p)
        try:
            rec = lookup.recorded("tile_2d_reg", (size,) * 3, p)
            regs, rng = rec["binary"]["registers"], rec["gflops"]
            g, day = rng["median"], (rec.get("time") or "")[:10] or None
        except LookupError:
            regs, g, rng, day = None, None, None, None
        occ = analysis.kernel_occupancy("tile_2d_reg", p, registers=regs)
        s = tiles.step_summary([("tile_2d_reg", p)])[0]
        prof = _stall_row("tile_2d_reg", p, stall_shape)
        m = (prof or {}).get("metrics", {})
        rows.append({"step": label, "params": _short(p), "registers": occ.registers_per_thread,
                     "blocks/SM": occ.blocks_per_sm, "warps/SM": occ.warps_per_sm,
                     # blocks per SM x warps per block, so that "1 x 16" and "2 x 8" read
                     # at a glance as the same warps in one block or in two
                     "blocks x warps": blocks_x_warps(occ.blocks_per_sm, occ.warps_per_sm),
                     "k steps at 4096": 4096 // p["BK"],
                     WARP_FFMA: warp_ffma_per_wavefront(s),
                     "conflicts": tiles.conflicts("tile_2d_reg", p),
                     f"TFLOP/s at {size}": None if g is None else _f(g / 1e3),
                     # the spread of the timed calls, so that a step reads against the noise
                     "min..max": None if rng is None else
                         f"{rng['min'] / 1e3:.1f}..{rng['max'] / 1e3:.1f}",
                     "x previous": None if g is None or prev is None else _f(g / prev, 2),
                     # rows may be timed in different runs: the day says which share one
                     "timed on": day,
                     **{c: m.get(k) for c, k in STALL_COLUMNS.items()},
                     # beside the rate's `x previous`, so that a step's two factors read
                     # side by side
                     "issue x previous": None if prev_issue is None or m.get(ISSUE) is None
                     else _f(m[ISSUE] / prev_issue, 2),
                     # by time ≈ instructions / issue share, the profiled step is the issue
                     # share's step over this one: beside it, so the division reads off
                     "instructions (M)": None if m.get(_INST) is None
                     else f"{m[_INST] / 1e6:,.0f}",
                     "instructions x previous": None if prev_inst is None
                     or m.get(_INST) is None else _f(m[_INST] / prev_inst, 2),
                     # the profiled speed-up over the step before (its time before over
                     # after): beside the timed `x previous`, so that a step where the two
                     # differ shows (the profiler runs at its own, lower clock)
                     "profiled x previous": None if prev_prof is None or m.get(_TIME) is None
                     else _f(prev_prof / m[_TIME], 2),
                     # every stall reason, "selected" included: at a fixed number of warps
                     # per scheduler this total is that number over the issue share, so
                     # only its split among reasons says more than the rate does
                     ALL_STALLS: sum(v for k, v in m.items() if k.startswith(_STALL_PREFIX))
                     if m else None})
        prev, prev_issue, prev_prof, prev_inst = g, m.get(ISSUE), m.get(_TIME), m.get(_INST)
    return rows


# The two halves of the path table a reader takes in one at a time: what each step
# changed and what it did to the rate, then where the warps wait, with only the rate's
# step beside the issue share's (the rates themselves are the first half's).
# "evidence" is the main path's short table: the timed step beside the issue share and
# the three waits; "bookkeeping" (the appendix) the profiled step and the instructions,
# from which the issue share's step follows by time ≈ instructions / issue share.
PATH_PARTS = {
    "changed": ("step", "params", "registers", "blocks/SM", "warps/SM",
                WARP_FFMA, "conflicts", "TFLOP/s at {size}", "min..max", "x previous"),
    "evidence": ("step", "blocks x warps", "x previous", "issue share %",
                 "barrier", "long scoreboard", "short scoreboard"),
    "bookkeeping": ("step", "blocks x warps", "x previous", "profiled x previous",
                    "issue share %", "issue x previous", "instructions (M)",
                    "instructions x previous")}


def path_table(size: int = 2048, part: str | None = None) -> Table:
    """path_rows as a table, the stall columns to two decimals. `part`: only the columns
    of PATH_PARTS[part] ("changed": the step and its rate; "evidence": the rate's step and
    where the warps wait at 4096^3; "bookkeeping": the timed and profiled steps beside the
    issue share's and the instructions'; the days of the runs are in the caption); None: every column (the rows
    always hold all of them)."""
    stalls = [c for c in STALL_COLUMNS if not c.endswith("%")]
    rows = [{**r, **{c: _f(r[c], 2) for c in stalls}} for r in path_rows(size)]
    if part is None:
        return Table(rows, list(rows[0]),
                     title=f"from K5 to {DEFAULT}, one change at a time: rates at {size}³, "
                           "where the warps wait at 4096³ (Nsight Compute; stalls in cycles "
                           "per issued instruction; '-': not profiled, or no step before); "
                           + records.recording_label())
    columns = [c.format(size=size) for c in PATH_PARTS[part]]
    # one line each: the caveats (runs, which rows compare) are the chapter's text
    at = "" if size == 4096 else f" at {size}³"
    title = {"changed": f"from K5 to {DEFAULT}: what changed, and the rate at {size}³; ",
             "evidence": "the same steps at 4096³: where the warps wait (Nsight Compute, "
                         "stalls in cycles per issued instruction), beside the timed rate "
                         f"over the step before{at}; ",
             "bookkeeping": "the same steps at 4096³: the timed and the profiled speed-up "
                            f"over the step before{at}, and the steps in the share of issuing "
                            "cycles and in instructions (Nsight Compute); "}[part]
    # one decimal for every issue share, so that 52% does not read as coarser than 62.2%
    return Table(rows, columns, title=title + records.recording_label(), pct_decimals=1)


# The two steps of PATH the chapter makes a prediction for, by position in PATH, with
# what each changes; both keep 16 warps per SM, so their stalls compare directly. The
# prediction: fewer barrier and long-scoreboard stalls per issued instruction, and a
# larger share of issue slots used.
CHECKS = ((2, "one block of 16 warps per SM becomes two blocks of 8"),
          (3, "half as many copy phases and barriers per FFMA"))


def path_check(rows=None, only: str | None = None) -> str:
    """Each step of CHECKS against its prediction, one line per step: the barrier +
    long-scoreboard stalls per issued instruction and the issue slots used, before and
    after, where both configurations were profiled, and by how much all stall reasons
    together fall where rows carry that total; otherwise which were not.
    `only`: the line of that step's label alone."""
    rows = rows or path_rows()
    keys = ("barrier", "long scoreboard", "issue share %")
    wait = lambda r: r["barrier"] + r["long scoreboard"]   # noqa: E731
    lines = []
    for at, what in CHECKS:
        before, after = rows[at - 1], rows[at]
        if only is not None and after["step"] != only:
            continue
        head = f"{before['step']} -> {after['step']} ({what}): "
        missing = [r["step"] for r in (before, after) if any(r[k] is None for k in keys)]
        if missing:
            lines.append(head + f"not profiled: {' and '.join(missing)}; the prediction "
                         "stays a prediction until the barrier and long-scoreboard stalls "
                         "and the issue slots both used are side by side.")
            continue
        w0, w1 = wait(before), wait(after)
        i0, i1 = before["issue share %"], after["issue share %"]
        way = lambda a, b: "falls" if b < a else "rises" if b > a else "stays"  # noqa: E731
        lines.append(head + f"barrier + long scoreboard per issued instruction {w0:.2f} -> "
                     f"{w1:.2f} ({way(w0, w1)}), issue slots used {i0:.1f}% -> {i1:.1f}% "
                     f"({way(i0, i1)})" + _total_drop(before, after, w0 - w1) + ".")
    if not lines:
        raise ValueError(f"no checked step is labelled {only!r}")
    return "\n".join(lines)


# Each cycle every resident warp is counted in one state (issuing, selected or a stall
# reason), so all stall reasons per issued instruction come to the warps per scheduler
# over the issue share.
ALL_EXPECTED = "expected: warps per scheduler ÷ issue share"


def path_check_table(rows=None) -> Table:
    """path_check's numbers as one row per step of CHECKS, before -> after: the barrier
    + long-scoreboard stalls per issued instruction, the issue slots used, all stall
    reasons together, warps per scheduler over the issue share (what that total comes to
    at fixed warps), how much the two stalls and all of them fall, and the two's share
    of all stalls before the step, and their share of the fall (two columns); '-' where a
    configuration was not profiled. What each step changes is said in the prose, so the
    columns stay short."""
    rows = rows or path_rows()

    def value(r, what):
        """One row's number for a column, or None where the row was not profiled."""
        keys = {"wait": ("barrier", "long scoreboard"), "issue": ("issue share %",),
                "all": (ALL_STALLS,), "per": ("warps/SM", "issue share %")}[what]
        if any(r.get(k) is None for k in keys):
            return None
        return {"wait": lambda: r["barrier"] + r["long scoreboard"],
                "issue": lambda: r["issue share %"], "all": lambda: r[ALL_STALLS],
                "per": lambda: r["warps/SM"] / 4 / (r["issue share %"] / 100)}[what]()

    def pair(before, after, what, fmt="{:.2f}"):
        a, b = value(before, what), value(after, what)
        return None if a is None or b is None else f"{fmt.format(a)} -> {fmt.format(b)}"

    def fall(before, after, what):
        a, b = value(before, what), value(after, what)
        return None if a is None or b is None else f"{a - b:.2f}"

    def shares(before, after):
        """If every stall fell in proportion, the two would carry the same share of the
        fall as of the stalls before: the null model the step is tested against. Both
        shares, or two Nones where a row was not profiled."""
        w0, w1, a0, a1 = (value(r, k) for k in ("wait", "all") for r in (before, after))
        if None in (w0, w1, a0, a1) or a0 == a1:
            return None, None
        # each share with its numerator and denominator, so that it reads off the row
        return (f"{w0:.2f} / {a0:.2f} = {w0 / a0:.0%}",
                f"{w0 - w1:.2f} / {a0 - a1:.2f} = {(w0 - w1) / (a0 - a1):.0%}")

    out = []
    for at, _ in CHECKS:
        before, after = rows[at - 1], rows[at]
        of_stalls, of_fall = shares(before, after)
        out.append({"step": f"{before['step']} -> {after['step']}",
                    "barrier + long scoreboard": pair(before, after, "wait"),
                    "issue share": pair(before, after, "issue", "{:.1f}%"),
                    "all stalls": pair(before, after, "all"),
                    ALL_EXPECTED: pair(before, after, "per"),
                    "fall of the two": fall(before, after, "wait"),
                    "fall of all stalls": fall(before, after, "all"),
                    "the two: share of all stalls": of_stalls,
                    "the two: share of the fall": of_fall})
    return Table(out, list(out[0]), title="the two predicted steps, before -> after, at "
                 "4096³ (Nsight Compute; stalls in cycles per issued instruction); "
                 + records.recording_label())


def fall_shares(rows=None, others: bool = False) -> str:
    """The main path's test of the two predicted steps in plain numbers: per step of
    CHECKS, all stall reasons and the barrier + long-scoreboard stalls, before -> after
    and by how much each fell, then the two shares the prediction compares: the two
    stalls' share of all stalls before the step, and their share of the fall
    (path_check_table's columns). `others`: instead, one line per step setting the fall
    of barrier + long scoreboard against the fall of all other reasons together, the
    prediction's own terms; '-' where a configuration was not profiled."""
    if others:
        def fall(x):
            return "-" if x is None else (f"fall by {x:.2f}" if x >= 0 else f"rise by {-x:.2f}")
        out = ["the predicted steps at 4096³, 16 warps per SM (Nsight Compute; cycles per "
               "issued instruction):"]
        for r in path_check_table(rows):
            two, total = r["fall of the two"], r["fall of all stalls"]
            rest = None if two is None or total is None else float(total) - float(two)
            out.append(f"  {r['step']}: barrier + long scoreboard "
                       f"{fall(None if two is None else float(two))}; all other reasons "
                       f"together {fall(rest)}")
        return "\n".join(out)
    lines = [f"  {r['step']}: all stalls {r['all stalls']}, a fall of {r['fall of all stalls']}; "
             f"barrier + long scoreboard {r['barrier + long scoreboard']}, a fall of "
             f"{r['fall of the two']}\n"
             f"    barrier + long scoreboard: {r['the two: share of all stalls']} of all "
             f"stalls before the step; {r['the two: share of the fall']} of the fall"
             for r in path_check_table(rows)]
    return "\n".join(["stalls per issued instruction at 4096³, 16 warps per SM (Nsight Compute):"]
                     + lines)


def _total_drop(before: dict, after: dict, two: float) -> str:
    """How much of the fall of all stall reasons together the barrier and long-scoreboard
    stalls carry, as a clause for path_check; empty where a row lacks the total."""
    t0, t1 = before.get(ALL_STALLS), after.get(ALL_STALLS)
    if t0 is None or t1 is None:
        return ""
    return (f"; all stall reasons together {t0:.2f} -> {t1:.2f}" + _per_scheduler(before, after)
            + f": barrier + long scoreboard fall by {two:.2f}, the total by {t0 - t1:.2f}")


def _per_scheduler(before: dict, after: dict) -> str:
    """Warps per scheduler over the issue share, before -> after, as a clause for
    _total_drop: what all stall reasons together come to when the warps stay fixed (an SM
    has four schedulers); empty where a row lacks its warps per SM."""
    if before.get("warps/SM") is None or after.get("warps/SM") is None:
        return ""
    one = lambda r: (f"{r['warps/SM'] / 4:g} / {r['issue share %'] / 100:.3f} = "  # noqa: E731
                     f"{r['warps/SM'] / 4 / (r['issue share %'] / 100):.2f}")
    return f" (warps per scheduler / issue share: {one(before)} -> {one(after)})"


# Two of PATH's steps (by position) around the tile step, for what else that step changes.
TILE_STEP = (1, 2)


def tile_step_rows(size: int = 4096, rows=None) -> list[dict]:
    """What the tile step (`patch 8x4` -> `BM 64`) changes besides the blocks per SM, per
    configuration at size^3: the blocks of the grid, the blocks per SM, the waves they
    make on this GPU's SMs (grid blocks over SMs x blocks per SM), the FFMAs per word a
    block copies from global memory (its reuse: BM*BN / (BM+BN)), and from Nsight Compute
    (at 4096^3) the instructions executed and the kernel's time."""
    rows, sms = rows or path_rows(), records.described_device().get("sm_count")
    out = []
    for at in TILE_STEP:
        label, p = PATH[at]
        p = _params("tile_2d_reg", p)
        r = next(x for x in rows if x["step"] == label)
        blocks = -(-size // p["BM"]) * -(-size // p["BN"])
        m = (_stall_row("tile_2d_reg", p, (4096,) * 3) or {}).get("metrics", {})
        inst, t = m.get("smsp__inst_executed.sum"), m.get(_TIME)
        out.append({"step": label, "params": _short(p), f"blocks at {size}³": f"{blocks:,}",
                    "blocks/SM": r["blocks/SM"],
                    "waves": None if not sms else _f(blocks / (sms * r["blocks/SM"]), 2),
                    "FMAs per word copied": _f(p["BM"] * p["BN"] / (p["BM"] + p["BN"])),
                    "instructions (M, ncu)": None if inst is None else f"{inst / 1e6:,.0f}",
                    "time (ms, ncu)": None if t is None else _f(t / 1e6, 2)})
    return out


def tile_step_line(size: int = 4096) -> str:
    """The tile step's waves, reuse and instructions in one line (`tile_step_rows`)."""
    before, after = tile_step_rows(size)
    inst, reuse = "instructions (M, ncu)", "FMAs per word copied"
    return (f"{before['step']} -> {after['step']} at {size}³: waves {before['waves']} -> "
            f"{after['waves']}; FMAs per word copied from global memory {before[reuse]} -> "
            f"{after[reuse]}; instructions (Nsight Compute) {before[inst]} M -> {after[inst]} M")


PATH_PANELS = ("rate", "issue", "stalls")


def path_plot(size: int = 2048, rows=None, panels=PATH_PANELS):
    """The chapter's key result, drawn from path_rows: the four steps from K5 to the
    default on x; "rate", the rate at size^3 (each bar labelled with its blocks x warps per block);
    "issue", the share of issue slots used; "stalls", the barrier and long-scoreboard
    stalls per issued instruction (stacked), the last two at 4096^3 under Nsight Compute.
    `panels` picks which, in that order, so that the chapter can show the rates before its
    predictions and the counters after them. A step not profiled has no bar in the last
    two panels."""
    import matplotlib.pyplot as plt
    unknown = set(panels) - set(PATH_PANELS)
    if unknown or not panels:
        raise ValueError(f"panels: a selection of {PATH_PANELS}, not {tuple(panels)}")
    panels = [p for p in PATH_PANELS if p in panels]
    rows = rows or path_rows(size)
    x = list(range(len(rows)))
    names = [r["step"].replace(" = ", "\n= ") for r in rows]
    fig, axes = plt.subplots(1, len(panels), figsize=(13 * len(panels) / 3 + 0.6, 3.8),
                             squeeze=False)
    ax_of = dict(zip(panels, axes[0]))
    if "rate" in ax_of:
        ax = ax_of["rate"]
        rate = [float(r[f"TFLOP/s at {size}"] or 0.0) for r in rows]
        ax.bar(x, rate, color="tab:orange")
        for xi, v, r in zip(x, rate, rows):
            # blocks x warps per block: one block of 16 and two of 8 read apart at a glance
            ax.text(xi, v, f"{v:.1f}\n{r['blocks x warps']} warps", ha="center",
                    va="bottom", fontsize=8)
        ax.set_ylim(0, max(rate + [1]) * 1.3)
        ax.set_title(f"rate at {size}³ (TFLOP/s)", fontsize=10)
    if "issue" in ax_of:
        ax = ax_of["issue"]
        issue = [r["issue share %"] for r in rows]
        ax.bar(x, [v or 0.0 for v in issue], color="tab:green")
        for xi, v in zip(x, issue):
            ax.text(xi, v or 0.0, " -" if v is None else f"{v:.0f}%", ha="center",
                    va="bottom", fontsize=8)
        ax.set_ylim(0, 100)
        ax.set_title("issue share at 4096³ (%)", fontsize=10)
    if "stalls" in ax_of:
        _stall_panel(ax_of["stalls"], rows, x)
    for ax in ax_of.values():
        ax.set_xticks(x, names, fontsize=8)
    fig.suptitle(f"From K5 to {DEFAULT}, one change at a time ({records.recording_label()})",
                 fontsize=10)
    fig.tight_layout()
    return fig


def _stall_panel(ax, rows, x):
    """path_plot's stall panel: barrier on long scoreboard, stacked, per issued instruction."""
    bottom = [0.0] * len(rows)
    # Stall cycles per issued instruction grow with the warps sharing a scheduler, so a
    # step with other warps per SM than the default's is hatched: not comparable.
    hatch = ["//" if r["warps/SM"] != rows[-1]["warps/SM"] else None for r in rows]
    for key, colour in (("barrier", evidence.stall_colour("barrier")),
                        ("long scoreboard", evidence.stall_colour("long scoreboard"))):
        vals = [r[key] or 0.0 for r in rows]
        ax.bar(x, vals, bottom=bottom, color=colour, label=key, hatch=hatch,
               edgecolor="white")
        bottom = [a + b for a, b in zip(bottom, vals)]
    for xi, v in zip(x, bottom):
        ax.text(xi, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, max(bottom + [0.1]) * 1.25)
    ax.set_title(f"barrier + long-scoreboard stalls per issued instruction,\n4096³; "
                 f"compare only the steps at {rows[-1]['warps/SM']} warps/SM", fontsize=9)
    # solid swatches for the two stalls (the legend would otherwise copy the first bar's
    # hatch), and one hatched swatch that says what the hatching marks
    from matplotlib.patches import Patch
    handles = [Patch(color=evidence.stall_colour(k), label=k)
               for k in ("barrier", "long scoreboard")]
    handles += [Patch(facecolor="white", edgecolor="grey", hatch="//",
                      label=f"hatched: not {rows[-1]['warps/SM']} warps/SM")] if any(hatch) else []
    ax.legend(handles=handles, fontsize=8, frameon=False, loc="upper right")


# ------------------------------------------------------------------ patches (appendix)

def patch_rows(size: int = 2048) -> list[dict]:
    """The four patches of the K5 tile: registers of the timed binary, warps per SM,
    FFMA per load, wavefronts per warp and step (and the ideal), FMAs per wavefront, the
    B conflicts of warp 0, and the recorded rate at size^3."""
    rows = []
    for tm, tn in PATCHES:
        p = {**K5, "TM": tm, "TN": tn}
        try:
            rec = lookup.recorded("tile_2d_reg", (size,) * 3, p)
            regs, g = rec["binary"]["registers"], rec["gflops"]
        except LookupError:
            regs, g = None, None
        occ = analysis.kernel_occupancy("tile_2d_reg", p, registers=regs)
        s = tiles.step_summary([("tile_2d_reg", p)])[0]
        rows.append({"patch": f"{tm}x{tn}", "registers": occ.registers_per_thread,
                     "warps/SM": occ.warps_per_sm, "FFMA per thread": s["FFMA"],
                     "FFMA per load": s["FFMA per load"], "wavefronts": s["wavefronts"],
                     "ideal": s["ideal"], WARP_FFMA: warp_ffma_per_wavefront(s),
                     "conflicts": tiles.conflicts("tile_2d_reg", p),
                     f"TFLOP/s at {size}": None if g is None else g["median"] / 1e3,
                     "min..max": None if g is None else
                         f"{g['min'] / 1e3:.1f}..{g['max'] / 1e3:.1f}",
                     "_min": None if g is None else g["min"] / 1e3,
                     "_max": None if g is None else g["max"] / 1e3})
    return rows


def patch_table(size: int = 2048, patches: tuple[str, ...] | None = None) -> Table:
    """patch_rows as a table; `patches` ("8x4", ...): only those rows, in that order
    (the main path compares two of them), None: all four."""
    rate = f"TFLOP/s at {size}"
    by_patch = {r["patch"]: {**r, rate: _f(r[rate])} for r in patch_rows(size)}
    rows = [by_patch[p] for p in (patches or by_patch)]
    what = "four thread patches" if patches is None else "the patches " + " and ".join(patches)
    return Table(rows, [c for c in rows[0] if not c.startswith("_")], title=f"the K5 tile (128 x 128 x 8) with {what}"
                 ": per tile (one BK slice of K), FFMA and loads per thread, wavefronts per warp "
                 f"(bank model); rates timed at {size}³, {records.recording_label()}")


def patch_plot(size: int = 2048, ax=None):
    """Rate against FMAs per wavefront for the four patches, each point labelled with
    its patch and warps per SM, its bar the min..max of its timed calls."""
    import matplotlib.pyplot as plt
    rows = [r for r in patch_rows(size) if r[f"TFLOP/s at {size}"] is not None]
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4))
    xs = [float(r[WARP_FFMA]) for r in rows]
    ys = [r[f"TFLOP/s at {size}"] for r in rows]
    for r, x, y in zip(rows, xs, ys):
        ax.errorbar(x, y, yerr=[[y - r["_min"]], [r["_max"] - y]], fmt="o", color="tab:blue",
                    ms=8, capsize=4)
        # A label goes left of its point where another point sits close on its right.
        crowded = any(0 < x2 - x < 32 and abs(y2 - y) < 1.0 for x2, y2 in zip(xs, ys))
        ax.annotate(f"{r['patch']}: {r['warps/SM']} warps/SM", (x, y),
                    xytext=(-10 if crowded else 10, -3), textcoords="offset points",
                    ha="right" if crowded else "left", fontsize=9)
    ax.set_xlim(min(xs) - 38, max(xs) + 38)
    ax.set_xlabel("FMAs per shared wavefront (the warp's 32 lanes, one tile; bank model)")
    ax.set_ylabel(f"TFLOP/s at {size}³")
    ax.set_title(f"The K5 tile's four patches, timed at {size}³ (bars: min..max of the timed "
                 f"calls),\n"
                 f"{records.recording_label()}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.figure.tight_layout()
    return ax.figure


def stall_reasons(label_rows=None) -> dict:
    """{step label: stall reasons (cycles per issued instruction)} for the steps of
    PATH that were profiled."""
    out = {}
    for label, p in label_rows or PATH:
        r = _stall_row("tile_2d_reg", p, (4096, 4096, 4096))
        if r is not None:
            out[label] = evidence.stall_reasons(r)
    return out


__all__ = ["K5", "K4", "PATH", "PATH_STUDY", "CHECKS", "unrolled_dot_product", "loop_orders",
           "counting", "standings", "standings_rows", "bound_table", "issue_table", "path_rows",
           "path_table", "PATH_PARTS", "blocks_x_warps", "path_check", "path_check_table", "patch_rows", "patch_table", "patch_plot",
           "stall_reasons", "stall_table", "issue_summary", "issue_rule"]


# ------------------------------------------------------------------ solution notebook

def stall_table(label_rows=None) -> Table:
    """stall_reasons as a table: one row per reason (those at 0.01 or more somewhere),
    largest first at the step after K5, then all of them summed; one column per
    profiled step; and how much each falls at the two predicted steps (CHECKS)."""
    got = stall_reasons(label_rows)
    labels = list(got)
    reasons = sorted({k for d in got.values() for k, v in d.items() if v >= 0.01},
                     key=lambda k: -got[labels[min(1, len(labels) - 1)]].get(k, 0.0))
    steps = [(labels[at - 1], labels[at]) for at, _ in CHECKS if at < len(labels)]

    def row(name, value):
        r = {"stall reason": name, **{lab: _f(value(lab), 2) for lab in labels}}
        for before, after in steps:
            r[f"fall, {before} -> {after}"] = _f(value(before) - value(after), 2)
        return r

    rows = [row(k, lambda lab, k=k: got[lab].get(k, 0.0)) for k in reasons]
    # the total holds "selected" too: a warp issuing is no stall, so the label says so
    rows.append(row(ALL_WITH_SELECTED, lambda lab: sum(got[lab].values())))
    return Table(rows, list(rows[0]), title="every stall reason at 4096³ (Nsight Compute; "
                 "cycles per issued instruction; 'selected': the warp issuing) along the "
                 f"path from K5 to {DEFAULT}; " + records.recording_label())


def with_min_blocks(name: str, blocks: int) -> Kernel:
    """Kernel `name` of 06_tile_2d.cu as it is, with a second argument in its
    `__launch_bounds__`: at least `blocks` blocks per SM, so ptxas must fit a thread in
    65536 / (blocks x threads per block) registers, spilling what does not fit. The
    variant `tile_2d_reg` with 2 was timed (`timed_variants`, read by `capped_split`)."""
    k = get_kernel(name)
    rx = re.compile(r"(__launch_bounds__\(\(BM / TM\) \* \(BN / TN\))(\)\s*\n" + k.entry + r"\()")
    text, n = rx.subn(rf"\1, {blocks}\2", k.source_text())
    if n != 1:
        raise ValueError(f"{k.source}: expected one __launch_bounds__ before {k.entry}, "
                         f"found {n}")
    return k.with_code(text, name=f"{name}, __launch_bounds__(NT, {blocks})", source=k.source)


def static_rows(configs, arch: str | None = None, instructions: bool = False) -> Table:
    """Per (label, kernel, params), from ptxas and the SASS compiled here: registers,
    spill bytes, blocks and warps per SM those registers allow, and the main loop's
    shared loads and FFMAs. `arch`: compile for another architecture (sm_86 for
    Boehm's RTX A6000; default: the recording's), with that architecture's occupancy
    limits. `instructions`: add every instruction of one trip through the main loop,
    the count a timed difference between two loops could come from."""
    rows = []
    for label, name, params in configs:
        k = kernel_of(name)
        p = k.resolve(params)
        s = analysis.summary(k, p, arch=arch)
        occ = analysis.kernel_occupancy(k, p, arch=arch)
        h = s["loop_histogram"]
        row = {"kernel": label, "params": _short(p), "registers": s["registers"],
               "spill stores (bytes)": s["spill_stores"], "blocks/SM": occ.blocks_per_sm,
               "warps/SM": occ.warps_per_sm,
               "loop shared loads": sum(v for f, v in h.items() if f.startswith("LDS")),
               "loop FFMA": h.get("FFMA", 0)}
        if instructions:
            row["loop instructions, all"] = sum(h.values())
        rows.append(row)
        built = s["arch"]
    return Table(rows, list(rows[0]), title=f"ptxas {compiler.ptxas_version()} -v and the "
                 f"SASS compiled here for {built} (no GPU needed)")


# What chapter 05's default waits on, beside K5, under Nsight Compute at 4096³: the
# counters that say whether shared memory holds a kernel back.
SHARED_PRESSURE = (
    ("shared-memory pipe busy, % of peak",
     "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"),
    ("MIO throttle (queue to shared memory full)", _STALL.format("mio_throttle")),
    ("short scoreboard (waiting for a shared load)", _STALL.format("short_scoreboard")))


def shared_pressure(names=("ch05 default", "K5"), counters=None) -> Table:
    """For each profiled kernel of `names` (issue_table's profile at 4096³): how busy
    the shared-memory pipe was, and the two stalls (cycles per issued instruction) that
    rise when shared memory holds a kernel back: MIO throttle, the queue to shared
    memory full, and short scoreboard, a shared load's result awaited."""
    counters = counters if counters is not None else _profiled_counters()
    rows = []
    for name in names:
        m = counters.get(name) or {}
        rows.append({"kernel": name, **{label: (None if m.get(metric) is None else
                                                 f"{m[metric]:.1f}%" if "%" in label
                                                 else f"{m[metric]:.2f}")
                                        for label, metric in SHARED_PRESSURE}})
    return Table(rows, list(rows[0]), title="is shared memory the limit? 4096³ under Nsight "
                 "Compute (stalls in cycles per issued instruction); "
                 + records.recording_label())


EXERCISE = "06_tile_2d_reg"
# Three mistakes students make, as (what, text of the solution, what replaces it).
MISTAKES = (
    ("j loop left rolled", "#pragma unroll\n                for (int j",
     "#pragma unroll 1\n                for (int j"),
    ("dot-product order, k loop rolled",
     """#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[tr * TM + i][k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += a[i] * b[j];
        }""",
     """#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) {
#pragma unroll 1
                for (int k = 0; k < BK; ++k)
                    acc[i][j] += As[tr * TM + i][k] * Bs[k][tc * TN + j];
            }"""),
    ("B's column without the patch width", "b[j] = Bs[k][tc * TN + j]", "b[j] = Bs[k][tc + j]"),
)


SAYS = "what the grader says"


class GraderSays(list):
    """(mistake, what the grader says) pairs shown as a numbered list: one message is a
    paragraph, too long to read in a table cell."""

    def _repr_html_(self):
        return "<ol>" + "".join(f"<li><b>{html.escape(what)}</b>: {html.escape(says)}</li>"
                                for what, says in self) + "</ol>"

    def __repr__(self):
        return "\n".join(f"{i}. {what}: {says}" for i, (what, says) in enumerate(self, 1))


def mistakes(gpu: bool | None = None):
    """The solution with each of MISTAKES made, graded like a submission: a short table
    of each step's verdict, then what the grader says for each mistake, as a list."""
    from gemm_kernels.notebook.worked_solutions import graded_mistakes
    t = graded_mistakes(EXERCISE, MISTAKES, gpu)
    verdicts = Table(t, [c for c in t.columns if c != SAYS], title=t.title)
    return Stacked(verdicts, GraderSays((r["mistake"], r[SAYS]) for r in t))


def mistake_loads(which: str = "B's column without the patch width") -> Table:
    """The worked solution and the solution with mistake `which` (of MISTAKES), compiled
    here at the exercise's configuration: registers, the main loop's shared loads by
    width and its FFMAs, and the loads per TM * TN FFMA against the TM + TN the static
    step allows."""
    from gemm_kernels.exercises.catalog import get as get_exercise
    from gemm_kernels.exercises.submission import submission_kernel
    ex = get_exercise(EXERCISE)
    _, old, new = next(m for m in MISTAKES if m[0] == which)
    src = solution_source(EXERCISE)
    p = get_kernel(ex.kernel).resolve(ex.params)
    per = p["TM"] * p["TN"]
    rows = []
    for label, text in (("worked solution", src), (which, src.replace(old, new, 1))):
        s = analysis.summary(submission_kernel(EXERCISE, ex.kernel, text), p)
        h = s["loop_histogram"]
        loads = sum(v for f, v in h.items() if f.startswith("LDS"))
        rows.append({"kernel": label, "registers": s["registers"],
                     "LDS.128": h.get("LDS.128", 0), "LDS": h.get("LDS", 0),
                     "FFMA": h.get("FFMA", 0),
                     f"shared loads per {per} FFMA": _f(per * loads / h["FFMA"], 1),
                     "the static step allows": p["TM"] + p["TN"]})
    return Table(rows, list(rows[0]), title=f"the main loop compiled here at {_short(p)} "
                 f"(ptxas {compiler.ptxas_version()}, sm_90)")


# ------------------------------------------------------------------ contiguous or strided

def contiguous_vs_strided(tm: int = 4, tn: int = 4, size: int = 2048) -> Table:
    """Every tile shape recorded for both `tile_2d_reg` (a contiguous patch per thread)
    and `tile_2d_strided` (outputs spread across the tile) with TM x TN outputs per
    thread: both rates at size^3 (TFLOP/s) with the min..max of their timed calls, and
    their ratio; the title gives the range of the ratio and how many rows have ranges
    that do not overlap."""
    from gemm_kernels.measure import tradeoff
    fixed, shape = {"TM": tm, "TN": tn}, (size,) * 3
    strided = {tuple(c.items()) for c, _ in tradeoff.ranked("tile_2d_strided", size, fixed)}
    rows = [{"BM": c["BM"], "BN": c["BN"], "BK": c["BK"],
             "a": lookup.recorded("tile_2d_reg", shape, c)["gflops"],
             "b": lookup.recorded("tile_2d_strided", shape, c)["gflops"]}
            for c, _ in tradeoff.ranked("tile_2d_reg", size, fixed) if tuple(c.items()) in strided]
    rng = lambda g: f"{g['min'] / 1e3:.1f}..{g['max'] / 1e3:.1f}"   # noqa: E731
    apart = sum(r["a"]["min"] > r["b"]["max"] or r["b"]["min"] > r["a"]["max"] for r in rows)
    ratios = [r["a"]["median"] / r["b"]["median"] for r in rows]
    span = f"{min(ratios):.2f} to {max(ratios):.2f}" if rows else "nothing recorded"
    # "apart in 8 of them" over 8 shapes reads as if some were not: say "all" then
    where = f"in all {apart}" if rows and apart == len(rows) else f"in {apart} of them"
    out = [{"BM": r["BM"], "BN": r["BN"], "BK": r["BK"],
            "contiguous": _f(r["a"]["median"] / 1e3), "min..max": rng(r["a"]),
            "strided": _f(r["b"]["median"] / 1e3), "min..max ": rng(r["b"]),
            "contiguous / strided": _f(q, 2)} for r, q in zip(rows, ratios)]
    return Table(out, ["BM", "BN", "BK", "contiguous", "min..max", "strided", "min..max ",
                       "contiguous / strided"],
                 title=f"TFLOP/s at {size}³, {tm}x{tn} outputs per thread; contiguous / "
                       f"strided: {span} over {len(out)} tile shapes, the min..max ranges "
                       f"apart {where}; " + records.recording_label())


# the capped patch is timed at 4096^3, K5, in one run with these two (`timed_variants`)
CAPPED_SHAPE, CAPPED_PARAMS = (4096, 4096, 4096), K5
CAPPED_COMPARE = ("tile_2d_reg", "tile_2d_strided")


def capped_run(names, params: dict | None = None) -> tuple[dict, dict]:
    """The recorded row of the contiguous patch held to two blocks per SM
    (`__launch_bounds__(NT, 2)`) at CAPPED_SHAPE, and the rows of the kernels `names`
    timed in the same run: (that row, {name: row})."""
    from gemm_kernels.measure import lookup
    p = params or CAPPED_PARAMS
    capped = lookup.variant_row(with_min_blocks("tile_2d_reg", 2), CAPPED_SHAPE, p)
    if capped is None:
        raise LookupError("the contiguous patch with __launch_bounds__(NT, 2) is not recorded")
    got = {}
    for name in names:
        found = [r for r in records.current().find(name, CAPPED_SHAPE, kernel_of(name).resolve(p))
                 if r.get("run") == capped["run"] and "gflops" in r]
        if not found:
            raise LookupError(f"{name} is not recorded in the run of the capped patch")
        got[name] = found[0]
    return capped, got


def capped_split(params: dict | None = None) -> Table:
    """The contiguous 8x8 patch, the strided one, and the contiguous one held to two
    blocks per SM (`__launch_bounds__(NT, 2)`, spilling a little), timed in one run at
    4096^3 with cuBLAS in the same process: is the strided kernel's gain its second
    block or its conflict-free reads? Per kernel the rate, the share of cuBLAS and of
    this GPU's FP32 peak (`share_of_peak`), the registers and local memory of the timed binary, the blocks per SM they allow, and
    the share of the contiguous-to-strided gap the kernel closes."""
    from gemm_kernels.measure import timing
    p = params or CAPPED_PARAMS
    capped, got = capped_run(CAPPED_COMPARE, p)
    rows = [("K5", "tile_2d_reg", got["tile_2d_reg"]),
            ("strided", "tile_2d_strided", got["tile_2d_strided"]),
            ("K5, two blocks", "tile_2d_reg", capped)]
    low = got["tile_2d_reg"]["gflops"]["median"]
    gap = got["tile_2d_strided"]["gflops"]["median"] - low
    out = [{**run_row(label, kernel, r, tflops=True, **{"% of cuBLAS": f"{timing.share(r):.1f}",
                                           "% of FP32 peak": f"{share_of_peak(r['gflops']['median']):.0f}"}),
            "share of the gap closed": f"{(r['gflops']['median'] - low) / gap:.0%}"}
           for label, kernel, r in rows]
    # the peak in the caption: the chapter defines it only in an appendix
    peak = _peak_line(records.described_device(), "")[0]
    return Table(out, list(out[0]), title=(
        f"the 8x8 patch at {' '.join(f'{k}={v}' for k, v in p.items())}, timed in one run "
        f"at {CAPPED_SHAPE[0]}³ (FP32 peak: {peak / 1e3:.1f} TFLOP/s); "
        f"{records.recording_label()}"))


def control_lines(params: dict | None = None) -> str:
    """The control unfolded: `K5` and `K5, two blocks` (timed in one run, `capped_run`),
    each with its rate, registers, local memory and blocks of warps per SM; the one line
    of source that differs; then two rows with 16 warps per SM, each as its rate over
    K5's: one block (the path's patch step, `path_rows`, which also changes the patch) and
    two blocks (the control)."""
    p = params or CAPPED_PARAMS
    capped, got = capped_run(("tile_2d_reg",), p)
    k5 = got["tile_2d_reg"]
    threads = (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])
    lines = []
    for label, r in (("K5", k5), ("K5, two blocks", capped)):
        row = run_row(label, "tile_2d_reg", r, tflops=True)
        blocks = row["blocks/SM"]
        lines.append(f"{label}: {row['TFLOP/s']} TFLOP/s, {row['registers']} registers, "
                     f"{row['local memory (bytes)']} B of local memory, {blocks} "
                     f"block{'' if blocks == 1 else 's'} of {threads // 32} warps per SM")
    before = get_kernel("tile_2d_reg").source_text().splitlines()
    after = with_min_blocks("tile_2d_reg", 2).source_text().splitlines()
    (old, new), = [(b, a) for b, a in zip(before, after) if b != a]
    lines.append(f"the one line of source that differs ({threads} threads a block):\n"
                 f"  K5:             {old.strip()}\n  K5, two blocks: {new.strip()}")
    steps = {r["step"]: r for r in path_rows(CAPPED_SHAPE[0])}
    lines.append(f"over K5, {steps['patch 8x4']['warps/SM']} warps per SM in one block "
                 f"(patch 8x4: a smaller patch, no "
                 f"conflict): x{steps['patch 8x4']['x previous']}; in two blocks (K5, two "
                 f"blocks: K5's patch and conflict): "
                 f"x{_f(capped['gflops']['median'] / k5['gflops']['median'], 2)}")
    return "\n".join(lines)


def run_row(label: str, kernel: str, r: dict, tflops: bool = False, **after_range) -> dict:
    """One timed row of a capped run for a table: its rate and the range of its calls
    (in TFLOP/s with `tflops`, as chapter 06's prose gives its rates), `after_range`'s
    columns, then the timed binary's registers and local memory and the blocks per SM
    they allow (chapters 06 and 07 show the same run this way)."""
    b, g = r.get("binary") or {}, r["gflops"]
    rate = (lambda v: f"{v / 1e3:.1f}") if tflops else (lambda v: f"{v:,.0f}")
    return {"kernel": label, ("TFLOP/s" if tflops else "GFLOP/s"): rate(g["median"]),
            "range": f"{rate(g['min'])}..{rate(g['max'])}", **after_range,
            "registers": b.get("registers"), "local memory (bytes)": b.get("local_size_bytes"),
            "blocks/SM": analysis.kernel_occupancy(
                kernel, r["params"], registers=b.get("registers")).blocks_per_sm}


def counter_table(configs) -> Table:
    """`ch05_06_thread_tiles.counter_table` (the bank model against Nsight Compute) per
    (label, kernel, params), each row named by its label (the chapter's name for the
    configuration), its counts written for people (thousands separated)."""
    from gemm_kernels.memory import ch05_06_thread_tiles
    ctr = ch05_06_thread_tiles.counter_table([(name, p) for _, name, p in configs])
    return Table([{**{c: f"{v:,}" if isinstance(v, int) else v for c, v in r.items()},
                   "kernel": label} for r, (label, _, _) in zip(ctr, configs)],
                 ctr.columns, title=ctr.title)


def sweep_heatmaps(size: int = 2048, vmin: float = 15, vmax: float = 32):
    """The sweep of tile_2d_reg as two heat maps on one colour scale (TM against TN, BM
    against BN), each cell the best rate over the tunables not on its axes, the colour
    bars naming the size."""
    import matplotlib.pyplot as plt
    from gemm_kernels.notebook import widgets
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    widgets.heatmap("tile_2d_reg", x="TN", y="TM", size=size, ax=axes[0], vmin=vmin, vmax=vmax)
    widgets.heatmap("tile_2d_reg", x="BN", y="BM", size=size, ax=axes[1], vmin=vmin, vmax=vmax)
    for cb in fig.axes[2:]:
        cb.set_ylabel(f"best TFLOP/s at {size}³", fontsize=9)
    fig.tight_layout()
    return fig


def lds128_pictures(params: dict, kernel: str = "tile_2d_reg", warp: int = 0):
    """Two 16-byte loads of `warp` in one step, side by side, lane by bank: the first load
    of A (each word labelled by its row m of As: a broadcast in each half-warp, the
    cheapest LDS.128) and the first load of B (`b_load_picture`); each title gives the
    instruction's wavefronts under the bank model. Returns the figure."""
    import matplotlib.pyplot as plt
    from gemm_kernels.memory import banks
    fig, axes = plt.subplots(1, 2, figsize=(15, 6.5))
    a = tiles.first(kernel, params, operand="A", warp=warp)
    bk = tiles.geometry(kernel, params).params["BK"]
    banks.plot_banks(a.analysis, ax=axes[0], row_of=lambda w: w // bk,
                     row_name="the row m of As it lies in",
                     title=f"the A load of warp {warp}: {a.analysis.wavefronts} wavefronts")
    b = tiles.first(kernel, params, operand="B", warp=warp)
    b_load_picture(params, kernel, warp, ax=axes[1])
    # the outline marks a bank serving more than one distinct word in a phase; where every
    # bank read is outlined, the title says so, or the outline would seem to single some out
    every = all(n != 1 for ph in b.analysis.phases for n in ph.words_per_bank)
    axes[1].set_title(f"the B load of warp {warp}: {b.analysis.wavefronts} wavefronts "
                      + ("(every bank here\nserves two distinct words: outlined)" if every
                         else "(outlined: a bank\nserving two distinct words)"))
    fig.tight_layout()
    return fig


def b_load_picture(params: dict, kernel: str = "tile_2d_reg", warp: int = 0, ax=None):
    """The first load of B by `warp` in one step, drawn lane by bank with each word
    labelled by where it lies in the B tile (the float4 of row k of Bs, columns 4f to
    4f + 3), not by its place in all of shared memory, where the A tile comes first."""
    from gemm_kernels.memory import banks
    ins = tiles.first(kernel, params, operand="B", warp=warp)
    p = tiles.geometry(kernel, params).params
    start = p["BM"] * p["BK"]                     # the B tile's first word
    return banks.plot_banks(
        ins.analysis, ax=ax, row_of=lambda w: ((w - start) % p["BN"]) // 4,
        row_name="the float4 f of Bs's row k it lies in, columns 4f to 4f+3",
        title=f"the B load of warp {warp} (outlined: a bank serving two distinct words)")


def block_timeline(tiles: int = 3, copy: float = 1.0, compute: float = 2.0,
                   one_block_warps: int = 16, copy_label: str = "copy"):
    """A schematic (a model, not a measurement) of one SM running one block or two blocks
    of 8 warps: by default chapter 06's step BM 128 -> 64 (the same 16 warps per SM as one
    block or as two), with `one_block_warps=8` chapter 07's one block per SM against two.
    Each block alternates copying a pair of tiles (global loads, then a barrier) and
    computing on it (FFMAs, then a barrier); `copy_label` names the copy's boxes. With one
    block every warp copies at once, so the SM has no FFMA to issue for that stretch; two
    blocks are drawn half a step apart, so one computes while the other copies. Returns
    the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    period = copy + compute
    lanes = [(f"one block of {one_block_warps} warps", 0.0), ("SM: FFMAs to issue?", None),
             ("block 0 (8 warps)", 0.0), ("block 1 (8 warps)", period / 2),
             ("SM: FFMAs to issue?", None)]
    end = tiles * period + period / 2
    fig, ax = plt.subplots(figsize=(11, 3.6))
    computing = {0: [], 1: []}          # case -> compute intervals of its blocks

    def box(x0, x1, lane, colour, text=""):
        ax.add_patch(Rectangle((x0, lane + 0.15), x1 - x0, 0.7, facecolor=colour,
                               edgecolor="0.4"))
        if text:
            ax.text((x0 + x1) / 2, lane + 0.5, text, ha="center", va="center", fontsize=8)

    for lane, (name, start) in enumerate(lanes):
        if start is None:
            continue
        case = 0 if lane == 0 else 1
        for t in range(tiles):
            c0 = start + t * period
            box(c0, c0 + copy, lane, "#f6b26b", copy_label)
            box(c0 + copy, c0 + period, lane, "#6aa84f", f"compute tile {t}")
            computing[case].append((c0 + copy, c0 + period))
            for x in (c0 + copy, c0 + period):      # the barrier closing copy and compute
                ax.plot([x, x], [lane + 0.1, lane + 0.9], color="k", lw=2.5)
    for lane, case in ((1, 0), (4, 1)):
        for x0, x1 in computing[case]:
            box(x0, min(x1, end), lane, "#d9ead3")
    ax.set_xlim(0, end)
    ax.set_ylim(len(lanes), 0)
    ax.set_yticks([i + 0.5 for i in range(len(lanes))], [n for n, _ in lanes], fontsize=9)
    ax.set_xticks([])
    ax.set_xlabel("time (schematic, not to scale)")
    ax.axhline(2, color="0.5", lw=1)
    # with 16 warps the two cases differ only in how the warps are grouped (chapter 06)
    cases = ("the same 16 warps as one block (top) or two blocks (bottom)"
             if one_block_warps == 16 else
             f"one block of {one_block_warps} warps (top) or two blocks of 8 (bottom)")
    ax.set_title(f"A model of one SM: {cases}\nblack bars: __syncthreads(); light green: "
                 "some warp has FFMAs to issue", fontsize=10)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ the practice, graded

PRACTICE_KEYS = ("load instructions", "wavefronts", "conflicts", "winner")
_PRACTICE_HINTS = {
    "load instructions": "load instructions: count per thread and tile. Which of a strided "
                         "thread's values are adjacent in shared memory? One row of As at "
                         "four consecutive k is; its B values at one k lie BN/TN words apart",
    "wavefronts": "wavefronts: count per warp and tile, load by load. A scalar LDS is one "
                  "phase of 32 lanes: how many different words must one bank deliver?",
    "conflicts": "conflicts: wavefronts minus ideal. Do two lanes of one phase read "
                 "different words of one bank?",
    "winner": "winner: set the registers and blocks per SM of step 2 against the wavefronts "
              "of step 1. Which of the two did 'The control' find carries more?"}
_PRACTICE_TRIES = {"n": 0}


def practice_key(params: dict | None = None) -> dict:
    """The answers of the practice at `params` (default K5): the strided kernel's shared
    load instructions per thread and tile, its wavefronts and conflicts per warp and tile
    (bank model, step_table), and the faster of the two layouts timed in one run
    (capped_split, 'K5' or 'strided')."""
    row = step_table([("tile_2d_strided", params or K5)])[0]
    rates = {r["kernel"]: float(r["TFLOP/s"]) for r in capped_split()
             if r["kernel"] in ("K5", "strided") and r["TFLOP/s"] is not None}
    return {"load instructions": row["LDS"] + row["LDS.64"] + row["LDS.128"],
            "wavefronts": row["wavefronts"], "conflicts": row["wavefronts"] - row["ideal"],
            "winner": max(rates, key=rates.get) if len(rates) == 2 else None}


def check_practice(mine: dict | None, key: dict | None = None) -> str:
    """'Predict, then check' for the practice: the student's predictions (`mine`, with
    PRACTICE_KEYS) against practice_key. A wrong one is answered with a question, not the
    number; the answers show once all are right or after a second try. With nothing
    predicted it only says what to do, so that the notebook as given shows no answer."""
    if not mine or all(mine.get(k) is None for k in PRACTICE_KEYS):
        return ("write your four predictions in `mine` (numbers per thread or per warp and "
                "tile; the winner as \"K5\" or \"strided\"), then run this cell")
    key = key if key is not None else practice_key()
    wrong = [k for k in PRACTICE_KEYS
             if mine.get(k) is None or str(mine[k]).strip() != str(key[k])]
    _PRACTICE_TRIES["n"] += 1
    if not wrong:
        head = "right: all four predictions match"
    else:
        out = ["not yet:"] + [f"  {k}: not predicted" if mine.get(k) is None else
                              f"  {_PRACTICE_HINTS[k]}" for k in wrong]
        if _PRACTICE_TRIES["n"] < 2:
            return "\n".join(out + ["correct your predictions and run the cell again (the "
                                    "answers show after a second try)"])
        head = "\n".join(out + ["the answers, after your second try:"])
    return head + "\n" + "\n".join(f"  {k}: {key[k]}" + (
        "" if mine.get(k) is None or str(mine[k]).strip() == str(key[k]) else
        f" (you wrote {mine[k]})") for k in PRACTICE_KEYS)
