"""Chapter 03's evidence, one call per notebook cell: the rates next to chapter 02 and
cuBLAS (with the gain over chapter 02 as its own panel), the shared-memory bound, where the warps wait at each BLOCK, what
Nsight Compute counted on the shared-memory side, the global traffic at 4096^3 against
the prediction 2 n^3 / BLOCK floats, the whole argument in one table, the prediction
for the kernel with threadIdx.x and threadIdx.y swapped, the EDGES and GRID appendix,
and, for the solution notebook, why the rate rises with BLOCK (instructions and waits
per BLOCK) and the grader's verdict on typical mistakes.

Every number is measured now (live) or read from the recording, or computed from the
kernels' SASS and the bank model here; where a counter was not recorded, the text says
so and names it.
"""
from __future__ import annotations

import re
from fractions import Fraction

from gemm_kernels.core import analysis
from gemm_kernels.core.table import Table
from gemm_kernels.measure import ladder, lookup, records, roofline, studies, timing
from gemm_kernels.memory import ch03_04_tiles, ch03_copies
from gemm_kernels.exercises.notebooks import solution_source

KERNEL, BEFORE = "smem_tiled", "coalesced"
SIZES = (1024, 2048, 4096, 8192)
SHAPE = (4096,) * 3
SHARED_BUSY = "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"
FMA_BUSY = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
SHARED_LOADS = "smsp__inst_executed_op_shared_ld.sum"
SHARED_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
ISSUE_ACTIVE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
INSTRUCTIONS, DURATION = "smsp__inst_executed.sum", "gpu__time_duration.sum"
L1_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
DRAM_READ = "dram__bytes_read.sum"
L1_HIT = "l1tex__t_sector_hit_rate.pct"
L2_READ = "lts__t_sectors_srcunit_tex_op_read.sum"   # sectors the L1 read from the L2
L2_HIT = "lts__t_sector_hit_rate.pct"                # all L2 sectors, reads and writes
SECTOR = 32                                       # bytes in an L1 / L2 sector
# The study that profiled this chapter's kernel at each BLOCK at 4096^3 (global traffic,
# cache hit rates, stall reasons), and chapter 02's kernel the same way.
CACHES, CACHES_BEFORE = "ch03_caches", "ch02_caches"
TRAFFIC_BLOCKS = (8, 16, 32)


def _rate(kernel: str, shape=SHAPE, params: dict | None = None):
    """The row of one configuration (live or recorded), or None."""
    try:
        return lookup.measure_or_lookup(kernel, shape, params)
    except LookupError:
        return None


def _study_row(study: str, kernel: str, params: dict | None = None):
    """The recorded row of `kernel` (its step with `params`, if given) in a study."""
    for step, row in studies.results(study):
        if step.kernel == kernel and (params is None or step.params == params):
            return row
    return None


def _loop(kernel: str, params: dict | None = None) -> dict:
    return analysis.summary(kernel, params)["loop_histogram"]


# ------------------------------------------------------------------ the measurement

def gain_sentence(table, sizes=SIZES) -> str:
    """One sentence: smem_tiled / coalesced over the sizes where both were measured, and
    the sizes where one is missing (so the prose need not point at a printed ratio)."""
    by = {(r["kernel"], r["size"]): r["GFLOP/s"] for r in table}
    both = [n for n in sizes if (KERNEL, n) in by and (BEFORE, n) in by]
    if not both:
        return "no size has both kernels measured"
    ratios = [by[KERNEL, n] / by[BEFORE, n] for n in both]
    lo, hi = min(ratios), max(ratios)
    span = f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}x to {hi:.2f}x"
    text = (f"smem_tiled runs {span} as fast as chapter 02's coalesced kernel "
            f"({', '.join(f'{n}^3: {r:.2f}x' for n, r in zip(both, ratios))})")
    missing = [n for n in sizes if n not in both]
    if missing:
        text += f"; not both measured at {', '.join(f'{n}^3' for n in missing)}"
    return text


def rates(sizes=SIZES):
    """Left: the rates of chapter 02's and this chapter's kernel by size (log size axis,
    linear GFLOP/s axis from zero);
    right: the ratio smem_tiled / coalesced per size, the gain this chapter is about.
    Only the sizes where both kernels were measured are drawn, and cuBLAS is left out:
    the tables give each kernel's share of the cuBLAS run timed beside it, the one way
    this course states a percentage of cuBLAS. Printed first, `gain_sentence`. Returns
    the Figure, or None without any rate."""
    table = ladder.compare([BEFORE, KERNEL], sizes)
    if not table:
        print("no rates here: no GPU, and the recording has none for these kernels")
        return None
    import matplotlib.pyplot as plt
    by = {(r["kernel"], r["size"]): r["GFLOP/s"] for r in table}
    both = [n for n in sizes if (KERNEL, n) in by and (BEFORE, n) in by]
    print(gain_sentence(table, both))
    drawn = Table([r for r in table if r["kernel"] in (KERNEL, BEFORE) and r["size"] in both],
                  table.columns, table.title)
    fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(11, 4.2),
                                   gridspec_kw={"width_ratios": [3, 2]})
    ladder.plot(drawn, ax=ax)
    # The two kernels lie within a factor of two of each other: a linear GFLOP/s axis
    # from zero shows that gap at its true size, where the ladder's log axis shrinks it.
    from matplotlib.ticker import FuncFormatter
    ax.set_yscale("linear")
    ax.set_ylim(0, max(r["GFLOP/s"] for r in drawn) * 1.15)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_ylabel("GFLOP/s")
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    ax.set_title("GFLOP/s: smem_tiled and coalesced (chapter 02)", fontsize=10)
    ratios = [by[KERNEL, n] / by[BEFORE, n] for n in both]
    ax_r.bar(range(len(both)), ratios, color="C1", width=0.6)
    for i, r in enumerate(ratios):
        ax_r.text(i, r, f"{r:.2f}x", ha="center", va="bottom", fontsize=10)
    ax_r.axhline(1, color="0.3", lw=1)
    ax_r.set_xticks(range(len(both)), [f"{n:,}" for n in both])
    ax_r.set_ylim(0, max(ratios, default=1) * 1.25)
    ax_r.set_xlabel("matrix size M = N = K")
    ax_r.set_ylabel("smem_tiled / coalesced")
    ax_r.set_title("the gain: smem_tiled / coalesced", fontsize=10)
    src = records.current()
    if src:
        fig.suptitle(f"smem_tiled against chapter 02's kernel ({src.label})", fontsize=10)
    fig.tight_layout()
    return fig


def wavefront_sum(params: dict | None = None) -> str:
    """One line: one warp's shared-memory wavefronts per step, access by access."""
    params = params or {"BLOCK": 32}
    line = ch03_04_tiles.step_sum(KERNEL, params)
    # one step's FFMA, not the SASS loop's: ptxas may unroll several steps into one loop
    ffma = ch03_04_tiles.smem_ceiling(KERNEL, params)["FFMA/step"]
    return f"{line} for {ffma} FFMA"


def bound(params: dict | None = None) -> str:
    """The shared-memory bound and the measured rates at 2048^3 and 4096^3 against it."""
    c = ch03_04_tiles.smem_ceiling(KERNEL, params or {"BLOCK": 32})
    lines = [f"{c['wavefronts/step']} wavefronts per {c['FFMA/step']} FFMA per warp and step "
             f"-> shared-memory bound {c['smem bound GFLOP/s']:,.0f} GFLOP/s = "
             f"{c['bound % of peak']:.0f}% of the FP32 peak ({c['peak GFLOP/s']:,.0f} GFLOP/s)"]
    shares = []
    for n in (2048, 4096):
        r = _rate(KERNEL, (n,) * 3, params)
        if r:
            g = r["gflops"]["median"]
            shares.append(g / c['smem bound GFLOP/s'])
            lines.append(f"measured at {n}^3: {g:,.0f} GFLOP/s = "
                         f"{shares[-1]:.0%} of the bound")
    if shares:
        lo, hi = f"{min(shares):.0%}", f"{max(shares):.0%}"
        lines.append(f"so the kernel runs at {lo if lo == hi else lo + ' to ' + hi} of what "
                     "shared memory alone allows")
    return "\n".join(lines)


def stall_plot(top: int = 6):
    """Where the warps wait at 4096^3: chapter 02's kernel (BLOCK = 32) above this
    chapter's at BLOCK = 8, 16 and 32, the cycles a warp waits per issued instruction,
    by reason (Nsight Compute), the `top` largest reasons over all bars and the rest as
    "other". Each bar's label says on what share of the cycles the schedulers issued."""
    import matplotlib.pyplot as plt
    from gemm_kernels.notebook import evidence
    rows = [("chapter 02, coalesced, BLOCK = 32",
             _study_row(CACHES_BEFORE, BEFORE, {"BLOCK": 32}))]
    rows += [(f"chapter 03, BLOCK = {b}", _study_row(CACHES, KERNEL, {"BLOCK": b}))
             for b in TRAFFIC_BLOCKS]
    got = [(f"{label}\nschedulers issue on {row['metrics'][ISSUE_ACTIVE]:.0f}% of cycles"
            if ISSUE_ACTIVE in row["metrics"] else label, evidence.stall_reasons(row))
           for label, row in rows if row]
    fig, ax = plt.subplots(figsize=(10, 0.8 * max(len(got), 1) + 1.6))
    if not got:
        ax.text(0.5, 0.5, "stall reasons not recorded", ha="center", va="center")
        ax.set_axis_off()
        return fig
    evidence.stall_bars(ax, got, top, fontsize=10)
    ax.set_title(f"Where the warps wait ({' x '.join(map(str, SHAPE))}, Nsight Compute)",
                 fontsize=10)
    fig.tight_layout()
    return fig


def top_stall(row) -> str:
    """'mio throttle (50% of the wait)' for a profiled row; '-' without one."""
    from gemm_kernels.notebook import evidence
    waits = {k: v for k, v in evidence.stall_reasons(row or {}).items() if k != "selected"}
    if not waits:
        return "-"
    k = max(waits, key=waits.get)
    return f"{k} ({waits[k] / sum(waits.values()):.0%} of the wait)"


def _billions(n: float) -> str:
    """A launch-wide count for people: 2147483648 -> '2.15 billion'."""
    return f"{n / 1e9:.2f} billion"


def shared_side() -> str:
    """What Nsight Compute counted for smem_tiled at 4096^3: how busy the shared-memory
    and FMA pipes were, the stall that leads, and the shared loads and wavefronts per
    FFMA next to the SASS and the bank model."""
    row = _study_row("stalls", KERNEL)
    if row is None:
        return "smem_tiled at 4096^3: not profiled"
    m = row["metrics"]
    ffma = SHAPE[0] * SHAPE[1] * SHAPE[2] // 32      # FFMA warp instructions in the launch
    h = _loop(KERNEL)
    sass = (h["LDS"] + h["LDS.128"]) / h["FFMA"]
    model = ch03_04_tiles.wavefronts_per_step(KERNEL, {"BLOCK": 32}) / h["FFMA"]
    out = [f"shared-memory (L1 data) pipe busy {m[SHARED_BUSY]:.0f}% of its peak, "
           f"FMA pipe busy {m[FMA_BUSY]:.0f}%; longest wait: {top_stall(row)}",
           f"FFMA instructions:        {_billions(ffma)}"]
    if SHARED_LOADS in m and SHARED_WAVEFRONTS in m:
        lds, wf = m[SHARED_LOADS], m[SHARED_WAVEFRONTS]
        out += [f"shared-memory loads:      {_billions(lds)} = {lds / ffma:.2f} per FFMA "
                f"(the SASS loop: {sass:.2f})",
                f"shared-memory wavefronts: {_billions(wf)} = {wf / ffma:.2f} per FFMA "
                f"(bank model: {model:.2f})",
                unmerged_line()]
    return "\n".join(out)


# The phases a warp's wide shared load needs when no lanes' requests merge: 32 lanes x
# 16 (8) bytes in 128-byte wavefronts.
PHASES = {"LDS.128": 4, "LDS.64": 2}


def unmerged_line(params: dict | None = None) -> str:
    """What the bank model would count without the merge of the LDS.128 broadcast
    (each wide load at its full number of phases), per warp and step and per FFMA: the
    figure Nsight Compute's count is told apart from."""
    p = params or {"BLOCK": 32}
    rows = ch03_04_tiles.per_instruction(KERNEL, p)
    total = sum(r["per warp and step"] * max(r["wavefronts each"], PHASES.get(r["SASS"], 0))
                for r in rows)
    ffma = _loop(KERNEL, p)["FFMA"]
    return (f"bank model without the merge (each LDS.128 in {PHASES['LDS.128']} wavefronts): "
            f"{total} per {ffma} FFMA = {total / ffma:.2f} per FFMA")


# ------------------------------------------------------------------ the global side

def predicted_load_bytes(block: int, n: int = SHAPE[0]) -> int:
    """The bytes this chapter's kernel loads from global memory for an n x n x n GEMM:
    (n / BLOCK)^2 blocks, each copying 2 BLOCK^2 floats at each of n / BLOCK steps,
    i.e. 2 n^3 / BLOCK floats of 4 bytes: BLOCK times fewer than one load per operand of
    every multiply-add."""
    return 2 * n ** 3 // block * 4


def _copy_gbps():
    """The DRAM rate a device copy reaches (chapter 00), or None."""
    copy = [c for c in roofline.ceilings(records.described_device())
            if c["level"] == "DRAM" and c["kind"] == "measured"]
    return copy[0]["gbps"] if copy else None


def traffic_rows(blocks=TRAFFIC_BLOCKS) -> list[dict]:
    """Per BLOCK of this chapter's kernel at 4096^3, then chapter 02's kernel at
    BLOCK = 32: the predicted load bytes (none for chapter 02), the bytes its loads ask
    of the L1 (32-byte sectors), the share of those sectors that hit the L1, the bytes
    the L1 read from the L2 and the L2's hit rate (over all its sectors, reads and writes),
    the bytes read from DRAM (Nsight Compute, study ch03_caches / ch02_caches), and the DRAM rate
    those bytes need over the time of the timed run (not the profiled one, whose clock
    the profiler fixes), also as a share of what a device copy reaches. Steps not
    recorded are left out."""
    copy = _copy_gbps()
    steps = [(f"smem_tiled, BLOCK = {b}", KERNEL, b, CACHES) for b in blocks]
    steps.append(("coalesced, BLOCK = 32 (chapter 02)", BEFORE, 32, CACHES_BEFORE))
    rows = []
    for label, kernel, b, study in steps:
        prof = _study_row(study, kernel, {"BLOCK": b})
        if prof is None:
            continue
        m = prof["metrics"]
        row = {"kernel": label, "BLOCK": b,
               "predicted loads, GB": predicted_load_bytes(b) / 1e9 if kernel == KERNEL
               else None,
               "asked of L1, GB": m[L1_SECTORS] * SECTOR / 1e9,
               "L1 hit %": m[L1_HIT],
               "read from L2, GB": m[L2_READ] * SECTOR / 1e9 if L2_READ in m else None,
               "L2 hit %": m.get(L2_HIT), "read from DRAM, GB": m[DRAM_READ] / 1e9}
        timed = _rate(kernel, SHAPE, {"BLOCK": b})
        if timed:
            seconds = 2 * SHAPE[0] * SHAPE[1] * SHAPE[2] / (timed["gflops"]["median"] * 1e9)
            gbps = m[DRAM_READ] / seconds / 1e9
            row["DRAM GB/s at the timed rate"] = gbps
            if copy:
                row["% of a device copy"] = 100 * gbps / copy
        rows.append(row)
    return rows


def l2_line(shape=SHAPE) -> str:
    """One line: how large A, B and C are at `shape` against the L2 of the recorded (or
    live) GPU, so that 'larger than the L2' is a number."""
    l2 = records.described_device().get("l2_bytes")
    M, N, K = shape
    sizes = {"A": M * K * 4, "B": K * N * 4, "C": M * N * 4}
    each = ", ".join(f"{n} {b / 2**20:,.0f} MiB" for n, b in sizes.items())
    if not l2:
        return f"at {M}x{N}x{K}: {each}; the L2's size is not recorded here"
    ratios = sorted({round(b / l2, 2) for b in sizes.values()})
    return (f"at {M}x{N}x{K}: {each}, each {' or '.join(f'{r:.2f}x' for r in ratios)} the L2 "
            f"({l2 / 2**20:,.0f} MiB), all three together {sum(sizes.values()) / l2:.1f}x")


def dram_share_line(shape=SHAPE) -> str:
    """One line: the bytes read from DRAM over the predicted load bytes, per BLOCK, and
    what reading A and B once would take (the least any kernel must read), for scale."""
    rows = [r for r in traffic_rows() if r["predicted loads, GB"]]
    if not rows:
        return "global traffic by BLOCK not recorded"
    M, N, K = shape
    once = (M * K + K * N) * 4 / 1e9
    shares = ", ".join(f"BLOCK = {r['BLOCK']}: {r['read from DRAM, GB'] / r['predicted loads, GB']:.2f}"
                       for r in rows)
    return (f"read from DRAM / predicted loads: {shares}; "
            f"A and B read once would be {once:.2f} GB")


def reread_line(shape=SHAPE) -> str:
    """One line per BLOCK: the bytes of reading B once per row of tiles of C (M / BLOCK
    rows times B's bytes) next to the bytes read from DRAM, the arithmetic behind the
    reading that A's strips stay in the L2 while B is read again for each row of tiles."""
    rows = [r for r in traffic_rows() if r["predicted loads, GB"]]
    if not rows:
        return "global traffic by BLOCK not recorded"
    M, N, K = shape
    b_gb = K * N * 4 / 1e9
    return "\n".join(
        f"BLOCK = {r['BLOCK']:>2}: B once per row of tiles = {M // r['BLOCK']} rows x "
        f"{b_gb:.3f} GB = {M // r['BLOCK'] * b_gb:.1f} GB; read from DRAM "
        f"{r['read from DRAM, GB']:.1f} GB" for r in rows)


def traffic_table() -> Table:
    """The evidence that tiling by BLOCK divides global traffic by BLOCK, at 4096^3 where
    A and B do not fit in the L2: `traffic_rows` as a table (with chapter 02's kernel for
    comparison), which the notebook shows as HTML like every other table."""
    # No L1 hit column: Nsight Compute's hit rate counts sector requests, which need not
    # match the bytes the L1 then reads from the L2, and nothing here needs it.
    cols = ["kernel", "predicted loads, GB", "asked of L1, GB",
            "read from L2, GB", "L2 hit %", "read from DRAM, GB",
            "DRAM GB/s at the timed rate", "% of a device copy"]
    src = records.current()
    hits = ("L2 hit %",)   # one precision per column
    return Table([{c: (f"{r[c]:.1f}%" if c in hits and r.get(c) is not None else r.get(c))
                   for c in cols} for r in traffic_rows()], cols,
                 title=f"global loads at {'x'.join(map(str, SHAPE))}, Nsight Compute"
                       + (f" ({src.label})" if src else ""))


def traffic():
    """The picture of `traffic_table`: the predicted bytes 2 n^3 / BLOCK x 4 against the
    bytes the loads asked of the L1 and those read from DRAM, per BLOCK, on log axes (a
    factor of BLOCK is a straight line). Returns the Figure."""
    import matplotlib.pyplot as plt
    rows = traffic_rows()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    mine = [r for r in rows if r["kernel"].startswith(KERNEL)]
    if not mine:
        ax.text(0.5, 0.5, "global traffic by BLOCK not recorded", ha="center", va="center")
        ax.set_axis_off()
        return fig
    from gemm_kernels.core.style import series_styles
    (c_l1, _), (c_dram, _) = series_styles(2)
    blocks = list(TRAFFIC_BLOCKS)
    ax.plot(blocks, [predicted_load_bytes(b) / 1e9 for b in blocks], "--", color="0.3",
            label="predicted: 2 n³ / BLOCK floats x 4 B")
    x = [r["BLOCK"] for r in mine]
    l1 = [r["asked of L1, GB"] for r in mine]
    dram = [r["read from DRAM, GB"] for r in mine]
    ax.plot(x, l1, "o", ms=9, color=c_l1, label="asked of L1 (sectors x 32 B)")
    ax.plot(x, dram, "s-", ms=8, color=c_dram, label="read from DRAM")
    for b, a, d in zip(x, l1, dram):
        ax.annotate(f"{a:.1f} GB", (b, a), textcoords="offset points", xytext=(8, 6),
                    fontsize=9, color=c_l1)
        ax.annotate(f"{d:.1f} GB", (b, d), textcoords="offset points", xytext=(-8, -16),
                    ha="right", fontsize=9, color=c_dram)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(blocks, [str(b) for b in blocks])
    ax.set_xlim(blocks[0] / 1.4, blocks[-1] * 1.6)
    ax.set_ylim(min(dram) / 2, max(l1) * 3)
    ax.set_xlabel("BLOCK")
    ax.set_ylabel("GB")
    ax.legend(fontsize=9, loc="upper right", frameon=False)
    ax.set_title(f"smem_tiled's global loads at {' x '.join(map(str, SHAPE))}: "
                 "predicted and measured (Nsight Compute)", fontsize=10)
    fig.tight_layout()
    return fig


def against_coalesced(block: int = 32) -> str:
    """Two lines: the bytes chapter 02's kernel and this one (at `block`) ask of the L1,
    the share that hit there, and the bytes read from DRAM, at 4096^3 (Nsight Compute):
    what shared memory replaced."""
    rows = {r["kernel"].split(",")[0]: r for r in traffic_rows((block,))}
    out = []
    for name, label in ((BEFORE, "chapter 02, coalesced"), (KERNEL, f"{KERNEL}, BLOCK = {block}")):
        r = rows.get(name)
        out.append(f"{label:<24} asks the L1 for {r['asked of L1, GB']:6,.1f} GB "
                   f"({r['L1 hit %']:.0f}% hit), reads {r['read from DRAM, GB']:.1f} GB from DRAM"
                   if r else f"{label}: not profiled")
    return "\n".join(out)


# ------------------------------------------------------------------ one table

def summary(shape=SHAPE) -> Table:
    """The chapter in one table at `shape`: per kernel its rate and share of cuBLAS, its
    global loads per FFMA, its wavefronts per FFMA on the shared-memory (L1 data) pipe
    (chapter 02: its global lines; here: shared wavefronts plus global lines), the bound of
    that pipe and the share of it reached, how busy Nsight Compute found the two pipes, and
    the longest wait."""
    from gemm_kernels.memory import ch01_02_sectors
    rows = []
    for kernel, study in ((BEFORE, "ch02_caches"), (KERNEL, "stalls"), ("cublas", None)):
        r = _rate(kernel, shape)
        g = r["gflops"]["median"] if r else None
        row = {"kernel": kernel, "GFLOP/s": g,
               "% of cuBLAS": "100%" if kernel == "cublas" else
               (f"{lookup.share(r):.0f}%" if r and lookup.share(r) is not None else "-")}
        if kernel != "cublas":
            h = _loop(kernel)
            prof = _study_row(study, kernel, {"BLOCK": 32} if kernel == BEFORE else None)
            m = (prof or {}).get("metrics", {})
            row["global loads / FFMA"] = str(Fraction(h.get("LDG", 0), h["FFMA"]))
            if kernel == KERNEL:
                b = block_bounds((32,), shape)[0]
                wf, bnd = b["wavefronts per FFMA (shared + lines)"], b["shared + lines bound GFLOP/s"]
            else:
                lim = ch01_02_sectors.line_limit(kernel, {"BLOCK": 32}, shape=shape)
                wf, bnd = f"{lim['lines']:.2f}", lim["GFLOP/s"]
            row["L1 pipe wavefronts / FFMA"] = wf
            row["L1 pipe bound"] = bnd
            row["% of bound"] = f"{g / bnd:.0%}" if g and bnd else "-"
            row["L1 pipe busy (shared)"] = f"{m[SHARED_BUSY]:.0f}%" if SHARED_BUSY in m else "-"
            row["FMA pipe busy"] = f"{m[FMA_BUSY]:.0f}%" if FMA_BUSY in m else "-"
            row["longest wait"] = top_stall(prof)
        rows.append(row)
    cols = ["kernel", "GFLOP/s", "% of cuBLAS", "global loads / FFMA",
            "L1 pipe wavefronts / FFMA", "L1 pipe bound", "% of bound",
            "L1 pipe busy (shared)", "FMA pipe busy", "longest wait"]
    return Table([{c: r.get(c, "-") for c in cols} for r in rows], cols,
                 title=f"at {'x'.join(map(str, shape))} ({records.source()}); "
                       "% of cuBLAS: against cuBLAS timed in the same run")


# ------------------------------------------------------------------ the swap

# The course notes' question, measured: the kernel with threadIdx.x running down the
# rows of C. Timed beside the kernel as written (`timed_variants`), and both profiled
# with their shared-memory counters (the `ch03_swap` study).
SWAPPED = "smem_tiled: tx and ty swapped"
SWAP_STUDY = "ch03_swap"
_SWAP = (("const int tx = threadIdx.x;", "const int tx = threadIdx.y;"),
         ("const int ty = threadIdx.y;", "const int ty = threadIdx.x;"))


def swapped_kernel():
    """Chapter 03's kernel with tx = threadIdx.y and ty = threadIdx.x: a warp then runs
    down a column of C, reads a column of each tile and copies down columns."""
    from gemm_kernels.core.kernels import get
    k = get(KERNEL)
    text = k.source_text()
    for old, new in _SWAP:
        if old not in text:
            raise ValueError(f"{k.source} no longer has the line {old!r}")
        text = text.replace(old, new)
    return k.with_code(text, name=SWAPPED, source=k.source)


studies.register_variant(SWAPPED, swapped_kernel)


def swap_measured(shape=(2048,) * 3) -> Table:
    """The kernel as written and swapped at BLOCK = 32: the rate of each, timed in one
    run beside cuBLAS, and the shared-memory wavefronts per warp and step that Nsight
    Compute counted, beside the bank model's price; and the model's global sectors per
    warp and step (the swap also stops the copies from coalescing)."""
    M, N, K = shape
    per_step = M * N // 32 * (K // 32)        # warps x steps of K, at BLOCK = 32
    prices = {name: ch03_copies.price(m) for name, m in ch03_copies.mappings().items()}
    profiled = studies.results(SWAP_STUDY, shape, studies.recording_of(SWAP_STUDY))
    swapped = swapped_kernel()
    # both rows from the recording that timed the swapped kernel (the same run)
    rec = lookup.variant_recording(swapped, shape, {"BLOCK": 32})
    rows = []
    for label, kernel, price in (("as written (tx along a row)", KERNEL, prices["as written"]),
                                 ("swapped (tx down a column)", swapped, prices["swapped"])):
        timed = lookup.variant_row(kernel, shape, {"BLOCK": 32}, rec=rec)
        row = next(r for st, r in profiled
                   if (st.variant or st.kernel) == getattr(kernel, "name", kernel))
        m = (row or {}).get("metrics")
        rows.append({"kernel": label,
                     "GFLOP/s": timed["gflops"]["median"] if timed else None,
                     "% of cuBLAS": f"{timing.share(timed):.0f}%" if timed else None,
                     "global sectors per warp and step (model)": price["global sectors"],
                     "wavefronts per warp and step (model)": price["wavefronts"],
                     "(Nsight Compute)": m[SHARED_WAVEFRONTS] / per_step if m else "-"})
    when = (f"both timed in one run, {rec.label}" if rec and rows[1]["GFLOP/s"]
            else "the swapped kernel not timed")
    return Table(rows, list(rows[0]), title=f"BLOCK = 32 at {'x'.join(map(str, shape))}: "
                 f"{when}")


def swap_factors(shape=(2048,) * 3) -> str:
    """One line from `swap_measured`: how many times slower the swapped kernel runs, and
    how many times the wavefronts Nsight Compute counted per warp and step rise."""
    written, swapped = swap_measured(shape)
    if not (written["GFLOP/s"] and swapped["GFLOP/s"]):
        return "the swapped kernel was not timed: no factor to compare"
    rate = written["GFLOP/s"] / swapped["GFLOP/s"]
    wf = [r["(Nsight Compute)"] for r in (written, swapped)]
    counted = (f"the counted wavefronts rise {wf[1] / wf[0]:.1f}x" if "-" not in wf
               else "the wavefronts were not counted")
    return f"swapped against as written: the rate falls {rate:.1f}x, {counted}"


# ------------------------------------------------------------------ appendix

MEMORY_OPS = ("FFMA", "LDS", "LDS.128", "STS", "LDG", "BAR")


def edges_table() -> Table:
    """EDGES="always" (the bounds-checked loop on every shape) against "auto" (the
    interior loop where the sides are multiples of BLOCK): registers, the main loop's
    instructions and how many of them are address arithmetic, compares and branches,
    and the rates at 4096^3 and 2048^3 with either GRID."""
    rows = []
    for edges in ("always", "auto"):
        s = analysis.summary(KERNEL, {"BLOCK": 32, "EDGES": edges})
        h = s["loop_histogram"]
        row = {"EDGES": edges, "registers": s["registers"],
               "loop instructions": sum(h.values()),
               "of them address, compare, branch": sum(v for o, v in h.items()
                                                       if o not in MEMORY_OPS)}
        for n in (4096, 2048):
            for grid in ("x->col", "x->row"):
                r = _rate(KERNEL, (n,) * 3, {"BLOCK": 32, "GRID": grid, "EDGES": edges})
                row[f"{n}^3 {grid}"] = r["gflops"]["median"] if r else None
        rows.append(row)
    return Table(rows, list(rows[0]),
                 title=f"smem_tiled BLOCK = 32: main loop (SASS, sm_90) and GFLOP/s by "
                       f"size and GRID ({records.source()})")


# ------------------------------------------------------------------ the solution

_EARLY_RETURN = ("    float acc = 0.f;\n",
                 "    float acc = 0.f;\n    if (row >= M || col >= N) return;   // the mistake\n")


def mistakes(source: str | None = None) -> dict[str, str]:
    """Typical wrong versions of the solution, by what is wrong."""
    src = source or solution_source("03_tile_loop")
    second = re.search(r"\n[ \t]*__syncthreads\(\);[^\n]*before the next copy[^\n]*", src)
    out = {}
    if second:
        out["no second __syncthreads()"] = src.replace(second.group(0), "")
    out["early return for threads outside C"] = src.replace(*_EARLY_RETURN)
    out["copy index without tx (and ty)"] = (src.replace("A[row * K + ka]", "A[row * K + k0]")
                                             .replace("B[kb * N + col]", "B[k0 * N + col]"))
    out["threadIdx.x down the rows (swapped)"] = (
        src.replace("const int tx = threadIdx.x;", "const int tx = threadIdx.y;")
           .replace("const int ty = threadIdx.y;", "const int ty = threadIdx.x;"))
    return {k: v for k, v in out.items() if v != src}


def grade_mistakes(source: str | None = None) -> Table:
    """The grader's verdict, step by step, on each of `mistakes`: what runs here (no GPU:
    steps 1-2) and the first words of the first step that failed (up to its first colon);
    each row keeps the whole first message as "in full" (`mistakes_in_full`)."""
    from gemm_kernels.exercises.grader import grade
    rows = []
    for what, src in mistakes(source).items():
        report = grade("03_tile_loop", src)
        row = {"mistake": what}
        for s in report.steps:
            row[s.name] = s.status
        bad = next((s for s in report.steps if s.status == "FAIL"), None)
        row["in full"] = (bad.detail.split("; ")[0] if bad else
                          "nothing yet: the steps that ran here passed")
        row["what the grader says"] = row["in full"].split(": ")[0]
        rows.append(row)
    cols = ["mistake"] + [c for c in ("compile", "static", "correct", "speed") if c in rows[0]] \
        + ["what the grader says"]
    return Table(rows, cols, title="the grader on four wrong versions of the solution")


def mistakes_in_full(table: Table) -> str:
    """The whole first message of each row of `grade_mistakes`, one paragraph a mistake."""
    return "\n\n".join(f"{r['mistake']}:\n  {r['in full']}" for r in table)


# ------------------------------------------------------------------ occupancy and BLOCK

def check_prediction(block: int | None, shape=(2048,) * 3) -> str:
    """The answer to the chapter's 'Predict, then check' for one BLOCK: the occupancy the
    compiler's resources allow, the multiply-adds per thread between two barriers (the
    FFMA of the SASS loop), and the rate recorded at `shape`. With no BLOCK chosen, it
    says what to do instead, so that the notebook as given does not show an answer."""
    if block is None:
        return "write your prediction down, then set BLOCK to 4, 8, 16 or 32 and run this cell"
    occ = analysis.kernel_occupancy(KERNEL, {"BLOCK": block}).explain()
    # ptxas unrolls several steps into one loop at small BLOCK: count per barrier pair
    loop = _loop(KERNEL, {"BLOCK": block})
    ffma = loop["FFMA"] * 2 // max(loop.get("BAR", 2), 2)
    r = _rate(KERNEL, shape, {"BLOCK": block})
    rate = (f"{r['gflops']['median']:,.0f} GFLOP/s at {shape[0]}^3" if r else
            f"no rate recorded at {shape[0]}^3")
    return (f"BLOCK = {block}: {occ}\n"
            f"each thread: {ffma} multiply-adds between two barriers (FFMA per pair of "
            "barriers in the SASS loop)\n"
            f"{rate}")


def check_occupancy_prediction(block, my_blocks_per_sm, my_warps_per_sm, my_slowest,
                               shape=(2048,) * 3) -> str:
    """The chapter's 'Predict, then check' with the student's numbers: blocks and warps
    per SM at `block` (against the occupancy the compiler's resources allow), and the
    BLOCK expected to be slowest (against the rates recorded at `shape`). A wrong count
    gets the way to redo it, not the answer; then `check_prediction` shows what was
    measured. Nothing is revealed before all four values are written."""
    if None in (block, my_blocks_per_sm, my_warps_per_sm, my_slowest):
        return ("write your prediction first: BLOCK (4, 8, 16 or 32), my_blocks_per_sm, "
                "my_warps_per_sm and my_slowest, then run this cell again")
    if block not in BLOCKS or my_slowest not in BLOCKS:
        return f"BLOCK and my_slowest must each be one of {', '.join(map(str, BLOCKS))}"
    o = analysis.kernel_occupancy(KERNEL, {"BLOCK": block})
    warps_per_block = -(-o.threads_per_block // 32)
    out = []
    if my_blocks_per_sm == o.blocks_per_sm:
        out.append(f"blocks per SM: {my_blocks_per_sm}, right.")
    else:
        out.append(f"blocks per SM: {my_blocks_per_sm} is not what the resources allow. A "
                   f"block has {o.threads_per_block} threads, {o.registers_per_thread} "
                   f"registers each (ptxas) and {o.smem_per_block} B of shared memory: "
                   "divide each of the SM's limits (threads, registers, resident blocks, "
                   "shared memory) by what one block takes; the smallest quotient wins.")
    if my_warps_per_sm == o.warps_per_sm:
        out.append(f"warps per SM: {my_warps_per_sm}, right.")
    elif my_warps_per_sm == my_blocks_per_sm * warps_per_block:
        out.append(f"warps per SM: {my_warps_per_sm} follows from your blocks per SM "
                   f"({warps_per_block} warp{'s' if warps_per_block > 1 else ''} per block).")
    else:
        out.append(f"warps per SM: {my_warps_per_sm}, but blocks per SM x warps per block "
                   f"gives another number: a block of {o.threads_per_block} threads "
                   f"fills {warps_per_block} warp{'s' if warps_per_block > 1 else ''} "
                   "(a warp is 32 threads; a partial warp still takes a whole one).")
    rates = {b: r["gflops"]["median"] for b in BLOCKS
             if (r := _rate(KERNEL, shape, {"BLOCK": b}))}
    if rates:
        slowest = min(rates, key=rates.get)
        out.append(f"slowest: BLOCK = {my_slowest}, "
                   + ("right." if my_slowest == slowest else
                      f"but the measured slowest at {shape[0]}^3 is BLOCK = {slowest}: "
                      "compare the multiply-adds per barrier and the warps per SM below."))
    return "\n".join(out) + "\n\n" + check_prediction(block, shape)


def register_cliff(registers=(32, 33, 40, 64), threads: int = 1024,
                   shared: int = 8192) -> Table:
    """Blocks and warps per SM of a 1024-thread block with 8 KiB of shared memory, for
    register counts chosen here (not from ptxas): the step from 32 to 33."""
    rows = []
    for regs in registers:
        o = analysis.occupancy(threads, regs, shared)
        rows.append({"registers/thread": regs,
                     "registers/block": -(-regs * 32 // 256) * 256 * (threads // 32),
                     "blocks/SM": o.blocks_per_sm, "warps/SM": o.warps_per_sm,
                     "occupancy": f"{o.occupancy:.0%}", "limited by": o.limiter})
    return Table(rows, list(rows[0]), title=f"BLOCK = 32 ({threads} threads, "
                                            f"{shared // 1024} KiB shared), sm_90 limits")


BLOCKS = (4, 8, 16, 32)


def block_resources(blocks=BLOCKS) -> Table:
    """Per BLOCK: what one block takes, as `ptxas -v` and the launch give it (threads,
    warps, registers per thread, shared memory): the inputs of the chapter's occupancy
    prediction, without its answer (blocks and warps per SM, `block_occupancy`)."""
    rows = []
    for b in blocks:
        o = analysis.kernel_occupancy(KERNEL, {"BLOCK": b})
        rows.append({"BLOCK": b, "threads/block": o.threads_per_block,
                     "warps/block": -(-o.threads_per_block // 32),
                     "registers/thread (ptxas)": o.registers_per_thread,
                     "shared memory/block": f"{o.smem_per_block:,} B"})
    return Table(rows, list(rows[0]), title="smem_tiled by BLOCK: what one block takes")


def block_occupancy(blocks=BLOCKS) -> Table:
    """Per BLOCK: threads, registers (ptxas), blocks and warps per SM, occupancy, what
    limits it, and the multiply-adds a thread does between two barriers."""
    rows = []
    for b in blocks:
        o = analysis.kernel_occupancy(KERNEL, {"BLOCK": b})
        rows.append({"BLOCK": b, "threads": o.threads_per_block,
                     "registers": o.registers_per_thread, "blocks/SM": o.blocks_per_sm,
                     "warps/SM": o.warps_per_sm, "occupancy": f"{o.occupancy:.0%}",
                     "limited by": o.limiter, "FMAs per thread between barriers": b})
    return Table(rows, list(rows[0]), title="smem_tiled by BLOCK: occupancy on sm_90")


def block_rates(blocks=BLOCKS, shape=(2048,) * 3) -> Table:
    """Per BLOCK: the rate at `shape` and its ratio to the BLOCK before."""
    rows = []
    for b in blocks:
        r = _rate(KERNEL, shape, {"BLOCK": b})
        g = r["gflops"]["median"] if r else None
        before = rows[-1]["GFLOP/s"] if rows else None
        rows.append({"BLOCK": b, "GFLOP/s": g,
                     "x the BLOCK before": f"{g / before:.2f}x" if g and before else "-"})
    return Table(rows, list(rows[0]), title=f"at {'x'.join(map(str, shape))} "
                                            f"({records.source()})")


# The study that counted the L1 data pipe's wavefronts of every kind for this kernel at
# each BLOCK (4096^3), and the counters of its parts that the model below predicts.
L1_PIPE = "ch03_l1_pipe"
PIPE = "l1tex__data_pipe_lsu_wavefronts{}.sum"
PIPE_PARTS = {"global reads": "_mem_lgds_cmd_read", "shared loads": "_mem_shared_op_ld",
              "shared stores": "_mem_shared_op_st"}


def pipe_model(block: int, shape=SHAPE) -> dict:
    """Per warp and step, the L1 data pipe's wavefronts the chapter's model predicts: the
    128-byte lines of the two global loads (chapter 02's rule) and the shared loads and
    stores of the bank model."""
    acc = ch03_04_tiles.per_instruction(KERNEL, {"BLOCK": block})
    shared = {op: sum(r["per warp and step"] * r["wavefronts each"] for r in acc
                      if r["op"] == op) for op in ("ld", "st")}
    parts = {"global reads": ch03_copies.global_lines(block, shape[2], shape[1]),
             "shared loads": shared["ld"], "shared stores": shared["st"]}
    return {**parts, "total": sum(parts.values())}


def pipe_counted(block: int, shape=SHAPE) -> dict | None:
    """Per warp and step (n^3 / (lanes x BLOCK) of them), the wavefronts Nsight Compute
    counted on the L1 data pipe (study ch03_l1_pipe): the total, the parts the model
    predicts, and the rest ("other"); None where the study was not recorded."""
    m = (_study_row(L1_PIPE, KERNEL, {"BLOCK": block}) or {}).get("metrics", {})
    keys = {"total": PIPE.format(""), **{k: PIPE.format(v) for k, v in PIPE_PARTS.items()}}
    if not all(k in m for k in keys.values()):
        return None
    warp_steps = shape[0] * shape[1] * shape[2] / (min(32, block * block) * block)
    got = {k: m[v] / warp_steps for k, v in keys.items()}
    got["other"] = got["total"] - sum(got[k] for k in PIPE_PARTS)
    return got


def pipe_counts(blocks=BLOCKS):
    """Per BLOCK, the L1 data pipe's wavefronts per warp and step, counted against the
    model, part by part, and per multiply-add (the combined bound's input); the rest of
    the count beyond the model's parts is in each row as "other", not shown. Printed
    first: the order of the BLOCKs by wavefronts per FFMA, counted and modelled.
    Returns the Table, or a line saying the count was not recorded."""
    rows = []
    for b in blocks:
        got, model = pipe_counted(b), pipe_model(b)
        if got is None:
            continue
        row = {"BLOCK": b}
        for part in (*PIPE_PARTS, "other", "total"):
            row[part] = f"{got[part]:.1f} / {model.get(part, 0)}"
        row["per FFMA"] = f"{got['total'] / b:.2f} / {model['total'] / b:.2f}"
        rows.append(row)
    if not rows:
        return (f"the L1 data pipe's wavefronts ({PIPE.format('')}) were not recorded for "
                "this kernel: the 'global lines' column is chapter 02's rule applied, "
                "not a count")
    def order(i):   # the BLOCKs by wavefronts per FFMA instruction, most first
        return " > ".join(str(r["BLOCK"]) for r in
                          sorted(rows, key=lambda r: -float(r["per FFMA"].split(" / ")[i])))
    print(f"BLOCK by wavefronts per FFMA, most first: counted {order(0)}, model "
          f"{order(1)}")
    # "other" (the count minus its three named parts) stays in the rows, not shown: the
    # profile does not say what it is, and the total already includes it.
    return Table(rows, [c for c in rows[0] if c != "other"],
                 title=f"{KERNEL}: the shared-memory (L1 data) pipe's wavefronts per "
                 f"warp and step at {SHAPE[0]}^3, counted by Nsight Compute / model "
                 f"({records.source()})")


# The columns `block_bounds` shows: the chapter's model (shared wavefronts plus the global
# loads' lines) for the student notebook; the bound from Nsight Compute's count of every
# wavefront on the pipe for the solution notebook, which splits that count (`pipe_counts`).
BOUND_COLUMNS = {
    "model": ["BLOCK", "lanes per warp", "wavefronts per FFMA (shared + lines)", "shared + lines bound GFLOP/s",
              "GFLOP/s", "% of shared + lines bound"],
    "counted": ["BLOCK", "lanes per warp", "all wavefronts counted per warp and step",
                "counted bound GFLOP/s", "GFLOP/s", "% of shared bound",
                "% of shared + lines bound", "% of counted bound"],
}


def block_bounds(blocks=BLOCKS, shape=(2048,) * 3, view: str = "model") -> Table:
    """Per BLOCK: three bounds and the measured rate against each. The shared bound counts
    the shared-memory wavefronts of a warp and step (bank model) at one per SM and clock.
    The second adds the 128-byte lines of the step's two global loads
    (`ch03_copies.global_lines`): chapter 02 found one L1 data-pipe wavefront per line,
    on the pipe that shared memory also uses. A block of BLOCK^2 < 32 threads fills only
    that many lanes of its warp: each FFMA instruction does BLOCK^2 multiply-adds, not 32,
    so both bounds scale by BLOCK^2 / 32 (`smem_ceiling` assumes full warps). The third
    puts in place of that sum the wavefronts Nsight Compute counted on the pipe, all
    kinds together, at 4096^3 (`pipe_counted`), where recorded. Every row holds all
    three; `view` picks the columns shown (`BOUND_COLUMNS`)."""
    rows = []
    for b in blocks:
        c = ch03_04_tiles.smem_ceiling(KERNEL, {"BLOCK": b})
        lanes = min(32, b * b)
        wf, gl = c["wavefronts/step"], ch03_copies.global_lines(b, shape[2], shape[1])
        bound = c["smem bound GFLOP/s"] * lanes / 32
        both = bound * wf / (wf + gl)
        r = _rate(KERNEL, shape, {"BLOCK": b})
        g = r["gflops"]["median"] if r else None
        got = pipe_counted(b)
        counted = bound * wf / got["total"] if got else None
        rows.append({"BLOCK": b, "lanes per warp": lanes, "FFMA per step": c["FFMA/step"],
                     "shared wavefronts per warp and step": wf,
                     "global lines per warp and step": gl,
                     "wavefronts per FFMA (shared + lines)": f"{(wf + gl) / c['FFMA/step']:.2f}",
                     "all wavefronts counted per warp and step":
                         round(got["total"], 1) if got else "-",
                     "shared bound GFLOP/s": bound, "shared + lines bound GFLOP/s": both,
                     "counted bound GFLOP/s": counted or "-",
                     "GFLOP/s": g, "% of shared bound": f"{g / bound:.0%}" if g else "-",
                     "% of shared + lines bound": f"{g / both:.0%}" if g else "-",
                     "% of counted bound": f"{g / counted:.0%}" if g and counted else "-"})
    what = {"model": "the bound of the shared-memory (L1 data) pipe, shared wavefronts "
                     "plus global lines,",
            "counted": f"every wavefront counted on the pipe per step (at {SHAPE[0]}^3), "
                       "the bound it gives, the rate against it and the model's two "
                       "bounds,"}[view]
    return Table(rows, BOUND_COLUMNS[view],
                 title=f"{what} and the rate at {'x'.join(map(str, shape))} "
                       f"({records.source()})")


def gaps_line(blocks=(8, 16, 32), shape=(2048,) * 3) -> str:
    """One line: from one BLOCK to the next (at full occupancy), the factor by which the
    shared bound grows next to the factor by which the measured rate grows. The shared
    bound orders them as the rates do, but its steps are much smaller."""
    rows = {r["BLOCK"]: r for r in block_bounds(blocks, shape)}
    pairs = list(zip(blocks, blocks[1:]))
    if any(rows[b]["GFLOP/s"] is None for b in blocks):
        return f"the rates at {shape[0]}^3 were not recorded for every BLOCK"

    def steps(col):
        return ", ".join(f"{rows[b][col] / rows[a][col]:.2f}x" for a, b in pairs)
    head = ", ".join(f"{a} to {b}" for a, b in pairs)
    lines = {"the shared bound": "shared bound GFLOP/s",
             "the shared + lines bound": "shared + lines bound GFLOP/s",
             f"the rate at {shape[0]}^3": "GFLOP/s"}
    return f"each doubling of BLOCK ({head}) multiplies\n" + "\n".join(
        f"  {name:<26}by {steps(col)}" for name, col in lines.items())


def fifth_line(shape=(2048,) * 3) -> str:
    """One line: the answer to the chapter's question whether BLOCK = 32 beats BLOCK = 16
    by more than a fifth, from the rates recorded at `shape`."""
    rows = {r["BLOCK"]: r["GFLOP/s"] for r in block_bounds((16, 32), shape)}
    if None in rows.values():
        return f"the rates at {shape[0]}^3 were not recorded for BLOCK = 16 and 32"
    ratio = rows[32] / rows[16]
    return (f"BLOCK = 32 over BLOCK = 16 at {shape[0]}^3: {ratio:.2f}x, "
            f"{'more' if ratio > 1.2 else 'less'} than a fifth more (1.20x)")


def block_bounds_plot(blocks=BLOCKS, shape=(2048,) * 3):
    """`block_bounds` drawn: per BLOCK its shared + lines bound (pale bar) and its
    measured rate inside it. Returns the Axes."""
    rows = [{"BLOCK": r["BLOCK"], "GFLOP/s": r["GFLOP/s"],
             "bound GFLOP/s": r["shared + lines bound GFLOP/s"],
             "layout": KERNEL + (f" ({r['lanes per warp']} lanes per warp)"
                                 if r["lanes per warp"] < 32 else ""),
             "% of bound": (100 * r["GFLOP/s"] / r["shared + lines bound GFLOP/s"]
                            if r["GFLOP/s"] else None)}
            for r in block_bounds(blocks, shape)]
    n = "x".join(map(str, shape))
    return ch03_04_tiles.ceiling_plot(rows, shape[0],
                                      title=f"{KERNEL} at {n}: each BLOCK's rate, as a % of its "
                                            "shared + global-lines bound",
                                      bound_label="shared wavefronts + global lines")


def block_stalls(blocks=TRAFFIC_BLOCKS) -> Table:
    """Per BLOCK at 4096^3, under Nsight Compute (study ch03_caches): the time, the warp
    instructions per FFMA instruction of the launch (n^3 / 32 of them), on what share of
    the cycles the schedulers issued, and the largest waits per issued instruction.
    Printed first: the time of the smallest BLOCK over the largest's, split into the
    ratio of instructions times the ratio of cycles per instruction (1 / issue share)."""
    from gemm_kernels.notebook import evidence
    ffma = SHAPE[0] * SHAPE[1] * SHAPE[2] // 32
    cols = {"time, ms": (DURATION, 1e6), "instructions per FFMA": (INSTRUCTIONS, ffma),
            "schedulers issue, % of cycles": ISSUE_ACTIVE,
            "warps active %": "sm__warps_active.avg.pct_of_peak_sustained_active"}
    for reason in ("mio_throttle", "short_scoreboard", "barrier", "long_scoreboard"):
        cols[f"{reason.replace('_', ' ')} (cycles)"] = STALL.format(reason)
    table = evidence.counters(CACHES, cols, kernels=(KERNEL,))
    for r in table:                       # the study's steps are the BLOCK values
        r["BLOCK"] = r.pop("step").replace("BLOCK = ", "")
    table.columns = ["BLOCK", *cols]
    table.title = (f"smem_tiled by BLOCK at {SHAPE[0]}^3 under Nsight Compute: the time, "
                   "the instructions and where the warps wait")
    got = {f"BLOCK = {r['BLOCK']}": r for r in table if r["time, ms"] is not None}
    lo, hi = (f"BLOCK = {b}" for b in (min(blocks), max(blocks)))
    if lo in got and hi in got:
        print(_time_split(lo, hi, *(_split_terms(got[k]) for k in (lo, hi))))
    for r in table:                       # one number format per column
        for c in cols:
            v = r[c]
            if isinstance(v, (int, float)):
                r[c] = f"{v:.1f}%" if "%" in c else f"{v:.2f}" if "FFMA" in c else f"{v:.1f}"
    return table


def _split_terms(r) -> tuple[float, float, float]:
    """(instructions per FFMA, issue share %, time) of a `block_stalls`-style row."""
    return r["instructions per FFMA"], r["schedulers issue, % of cycles"], r["time, ms"]


def _time_split(slow: str, fast: str, a, b) -> str:
    """The time of `slow` over `fast` as the ratio of instructions per FFMA times the ratio
    of cycles per instruction (one over the share of cycles on which the schedulers
    issue), next to the measured ratio; a and b are `_split_terms` tuples."""
    inst, cpi = a[0] / b[0], b[1] / a[1]
    return (f"{slow} against {fast}: {inst:.2f}x the instructions x {cpi:.2f}x the cycles "
            f"per instruction = {inst * cpi:.2f}x the time (measured under the profiler, "
            f"clocks fixed: {a[2] / b[2]:.2f}x)")


def against_coalesced_split(block: int = 32) -> str:
    """Why the faster kernel has the longer bars in the stall plot: chapter 02's kernel
    against this one at `block`, under Nsight Compute at 4096^3, the time split into
    instructions per FFMA and cycles per instruction (`_time_split`)."""
    ffma = SHAPE[0] * SHAPE[1] * SHAPE[2] // 32
    rows = [_study_row(CACHES_BEFORE, BEFORE, {"BLOCK": 32}),
            _study_row(CACHES, KERNEL, {"BLOCK": block})]
    if not all(r and {INSTRUCTIONS, ISSUE_ACTIVE, DURATION} <= set(r["metrics"]) for r in rows):
        return "instructions and issue share not profiled here"
    a, b = ((r["metrics"][INSTRUCTIONS] / ffma, r["metrics"][ISSUE_ACTIVE],
             r["metrics"][DURATION]) for r in rows)
    return (f"instructions per FFMA: chapter 02 {a[0]:.2f}, smem_tiled {b[0]:.2f}\n"
            + _time_split("chapter 02", f"smem_tiled (BLOCK = {block})", a, b))


def pipe_against_coalesced(shape=(2048,) * 3) -> str:
    """Chapter 02's kernel (BLOCK = 32) and this one (BLOCK = 32) on the same pipe: each
    one's wavefronts per FFMA instruction (chapter 02: its global lines; here: shared
    wavefronts plus global lines), the bound that gives, the rate at `shape` and its share
    of the bound; then the gain split into the ratio of bounds times the ratio of shares.
    The product equals the measured gain by construction: the split is the point."""
    from gemm_kernels.memory import ch01_02_sectors
    before = ch01_02_sectors.line_limit(BEFORE, {"BLOCK": 32}, shape=shape)
    r_before = _rate(BEFORE, shape, {"BLOCK": 32})
    row = next(iter(block_bounds((32,), shape)))
    if not r_before or row["GFLOP/s"] is None or not before["GFLOP/s"]:
        return f"the rates at {shape[0]}^3 were not recorded for both kernels"
    n = f"{shape[0]}^3"
    got = [("chapter 02, coalesced", before["lines"], before["GFLOP/s"],
            r_before["gflops"]["median"]),
           ("smem_tiled, BLOCK = 32", float(row["wavefronts per FFMA (shared + lines)"]),
            row["shared + lines bound GFLOP/s"], row["GFLOP/s"])]
    # where each wavefronts-per-FFMA figure comes from, printed under it
    sw, gl = row["shared wavefronts per warp and step"], row["global lines per warp and step"]
    sums = ["(1 wavefront for the A broadcast + 1 for the B line, per FFMA)",
            f"({sw:g} shared + {gl:g} lines = {sw + gl:g} per {row['FFMA per step']:g} FFMA)"]
    lines = [f"{name:<23} {wf:.2f} wavefronts per FFMA -> bound {b:,.0f} GFLOP/s, "
             f"measured at {n} {g:,.0f} GFLOP/s = {g / b:.0%} of it\n{'':<23} {why}"
             for (name, wf, b, g), why in zip(got, sums)]
    (_, _, b0, g0), (_, _, b1, g1) = got
    # Only the ratio of bounds comes from the model; the ratio of shares is what is left
    # of the measured gain, so the product equals it by construction.
    lines.append(f"measured gain at {n}: {g1 / g0:.2f}x = {b1 / b0:.2f}x (the ratio of the two "
                 f"bounds, from the model) x {(g1 / b1) / (g0 / b0):.2f}x (the rest: chapter 02 "
                 "ran further below its bound)")
    return "\n".join(lines)
