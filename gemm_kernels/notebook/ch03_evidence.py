"""Chapter 03's evidence, one call per notebook cell: the rates next to chapter 02 and
cuBLAS (linear axis), the shared-memory bound, what Nsight Compute counted on the
shared-memory side and on the global side, the whole argument in one table, the
prediction for the kernel with threadIdx.x and threadIdx.y swapped, the EDGES and GRID
appendix, and, for the solution notebook, the grader's verdict on typical mistakes.

Every number is measured now (live) or read from the recording, or computed from the
kernels' SASS and the bank model here; where a counter was not recorded, the text says
so and names it.
"""
from __future__ import annotations

import re
from fractions import Fraction

from gemm_kernels.core import analysis
from gemm_kernels.core.table import Table
from gemm_kernels.measure import ladder, lookup, profile, records, roofline, studies
from gemm_kernels.memory import ch03_04_tiles, ch03_copies

KERNEL, BEFORE = "smem_tiled", "coalesced"
SIZES = (1024, 2048, 4096, 8192)
SHAPE = (4096,) * 3
SHARED_BUSY = "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"
FMA_BUSY = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
SHARED_LOADS = "smsp__inst_executed_op_shared_ld.sum"
SHARED_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
L1_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
L2_SECTORS = "lts__t_sectors_srcunit_tex_op_read.sum"
DRAM_READ = "dram__bytes_read.sum"
L1_HIT, L2_HIT = "l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct"


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

def rates(sizes=SIZES):
    """The rates of chapter 02's and this chapter's kernel, with cuBLAS, by size, on a
    linear axis (the gain of this chapter is a factor of about one and a half, which a
    log axis flattens); under it, smem_tiled / coalesced per size. Returns the Figure,
    or None without any rate."""
    table = ladder.compare([BEFORE, KERNEL], sizes)
    if not table:
        print("no rates here: no GPU, and the recording has none for these kernels")
        return None
    ax = ladder.plot(table)
    from matplotlib.ticker import FuncFormatter, MultipleLocator
    ax.set_yscale("linear")
    top = max(r["GFLOP/s"] for r in table)
    ax.set_ylim(0, top * 1.1)
    ax.yaxis.set_major_locator(MultipleLocator(10_000 if top > 20_000 else 2_000))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_ylabel("GFLOP/s")
    for line in ax.get_legend().get_texts():
        if line.get_text().startswith("cublas"):
            line.set_text("cuBLAS (timed on its own at each size)")
    by = {(r["kernel"], r["size"]): r["GFLOP/s"] for r in table}
    for n in sizes:
        if (KERNEL, n) in by and (BEFORE, n) in by:
            print(f"{n}^3: smem_tiled / coalesced = {by[KERNEL, n] / by[BEFORE, n]:.2f}x")
        else:
            missing = [k for k in (BEFORE, KERNEL) if (k, n) not in by]
            print(f"{n}^3: no ratio, {' and '.join(missing)} not measured at this size")
    return ax.figure


def wavefront_sum(params: dict | None = None) -> str:
    """One line: one warp's shared-memory wavefronts per step, access by access."""
    rows = ch03_04_tiles.per_instruction(KERNEL, params or {"BLOCK": 32})
    parts = [f"{r['per warp and step']} {r['SASS']} x {r['wavefronts each']} ({r['example']})"
             for r in rows]
    total = ch03_04_tiles.wavefronts_per_step(KERNEL, params or {"BLOCK": 32})
    ffma = _loop(KERNEL, params)["FFMA"]
    return (f"per warp and step: {' + '.join(parts)}\n"
            f"  = {total} wavefronts for {ffma} FFMA")


def bound(params: dict | None = None) -> str:
    """The shared-memory bound and the measured rates at 2048^3 and 4096^3 against it."""
    c = ch03_04_tiles.smem_ceiling(KERNEL, params or {"BLOCK": 32})
    lines = [f"{c['wavefronts/step']} wavefronts per {c['FFMA/step']} FFMA per warp and step "
             f"-> shared-memory bound {c['smem bound GFLOP/s']:,.0f} GFLOP/s = "
             f"{c['bound % of peak']:.0f}% of the FP32 peak ({c['peak GFLOP/s']:,.0f} GFLOP/s)"]
    for n in (2048, 4096):
        r = _rate(KERNEL, (n,) * 3, params)
        if r:
            g = r["gflops"]["median"]
            lines.append(f"measured at {n}^3: {g:,.0f} GFLOP/s = "
                         f"{g / c['smem bound GFLOP/s']:.0%} of the bound")
    return "\n".join(lines)


def stall_plot(top: int = 6):
    """Where the warps wait at 4096^3, chapter 02's kernel above this chapter's: the
    cycles a warp waits per issued instruction, by reason (Nsight Compute), the `top`
    largest reasons over both and the rest as "other"."""
    import matplotlib.pyplot as plt
    from gemm_kernels.notebook import evidence
    got = [(label, evidence.stall_reasons(row)) for label, row in (
        ("chapter 02 (coalesced)", _study_row("ch02_caches", BEFORE, {"BLOCK": 32})),
        ("chapter 03 (smem_tiled)", _study_row("stalls", KERNEL))) if row]
    fig, ax = plt.subplots(figsize=(10, 0.7 * max(len(got), 1) + 1.6))
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
    out = [f"shared-memory pipe busy {m[SHARED_BUSY]:.0f}% of its peak, "
           f"FMA pipe busy {m[FMA_BUSY]:.0f}%; longest wait: {top_stall(row)}",
           f"FFMA instructions:        {ffma:,}"]
    if SHARED_LOADS in m and SHARED_WAVEFRONTS in m:
        lds, wf = m[SHARED_LOADS], m[SHARED_WAVEFRONTS]
        out += [f"shared-memory loads:      {lds:,.0f} = {lds / ffma:.2f} per FFMA "
                f"(the SASS loop: {sass:.2f})",
                f"shared-memory wavefronts: {wf:,.0f} = {wf / ffma:.2f} per FFMA "
                f"(bank model: {model:.2f})"]
    return "\n".join(out)


# ------------------------------------------------------------------ the global side

def global_side():
    """Nsight Compute's global-load counters of both kernels at 1024^3 as a Table, after
    a printed paragraph on 4096^3: chapter 02's kernel's DRAM traffic and cache hit
    rates there, and an upper bound on smem_tiled's DRAM bandwidth from its load count
    (its DRAM bytes at 4096^3 were not profiled)."""
    rows = []
    cols = {BEFORE: profile.counters(BEFORE), KERNEL: profile.counters(KERNEL)}
    labels = (("sectors the loads ask of L1", L1_SECTORS, 1, "{:,.0f}"),
              ("sectors L1 asks of L2 (its misses)", L2_SECTORS, 1, "{:,.0f}"),
              ("MB read from DRAM", DRAM_READ, 1e6, "{:,.1f}"))
    for label, metric, div, fmt in labels:
        row = {"1024^3": label}
        for k, r in cols.items():
            v = (r or {}).get("metrics", {}).get(metric)
            row[k] = fmt.format(v / div) if v is not None else "-"
        if all(cols.values()):
            a, b = (cols[k]["metrics"].get(metric) for k in (BEFORE, KERNEL))
            row["smem_tiled / coalesced"] = f"{b / a:.2f}" if a and b is not None else "-"
        rows.append(row)
    print(_dram_at_4096())
    src = records.current()
    return Table(rows, ["1024^3", BEFORE, KERNEL, "smem_tiled / coalesced"],
                 title="global loads at 1024^3, Nsight Compute"
                       + (f" ({src.label})" if src else ""))


def _dram_at_4096() -> str:
    M = N = K = SHAPE[0]
    inputs = 4 * (M * K + K * N)
    copy = [c for c in roofline.ceilings(roofline.device_properties())
            if c["level"] == "DRAM" and c["kind"] == "measured"]
    copy_gbps = copy[0]["gbps"] if copy else None
    lines = []
    row = _study_row("ch02_caches", BEFORE, {"BLOCK": 32})
    timed = _rate(BEFORE)
    if row and timed:
        m = row["metrics"]
        ms = 2 * M * N * K / timed["gflops"]["median"] / 1e6
        gbps = m[DRAM_READ] / (ms * 1e-3) / 1e9
        lines.append(
            f"coalesced at 4096^3: {m[L1_HIT]:.0f}% of its load sectors hit L1, "
            f"{m[L2_HIT]:.0f}% of the rest hit L2; it reads {m[DRAM_READ] / 1e9:.2f} GB from "
            f"DRAM, {m[DRAM_READ] / inputs:.0f} x the {inputs / 1e6:,.0f} MB of A and B.\n"
            f"  Over the {ms:.1f} ms the kernel runs, that is {gbps / 1e3:.2f} TB/s"
            + (f", {gbps / copy_gbps:.0%} of the {copy_gbps:,.0f} GB/s a device copy reaches "
               "(chapter 00)." if copy_gbps else "."))
    timed = _rate(KERNEL)
    if timed:
        h = _loop(KERNEL)
        warp_steps = (M * N // 32) * (K // 32)             # warps x steps along K
        requests = h["LDG"] * warp_steps
        nbytes = requests * 128                           # 32 lanes x 4 bytes each
        ms = 2 * M * N * K / timed["gflops"]["median"] / 1e6
        gbps = nbytes / (ms * 1e-3) / 1e9
        lines.append(
            f"smem_tiled at 4096^3: its DRAM bytes were not profiled. Its loads ask for "
            f"{requests:,} x 128 B = {nbytes / 1e9:.1f} GB;\n  even if not one of them hit "
            f"a cache, over its {ms:.1f} ms that is {gbps / 1e3:.2f} TB/s"
            + (f", {gbps / copy_gbps:.0%} of the device copy's rate." if copy_gbps else "."))
    return "\n".join(lines)


# ------------------------------------------------------------------ one table

def summary(shape=SHAPE) -> Table:
    """The chapter in one table at `shape`: per kernel its rate and share of cuBLAS, its
    global loads and shared-memory wavefronts per FFMA, the shared-memory bound and the
    share of it reached, how busy Nsight Compute found the two pipes, and the longest
    wait."""
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
                c = ch03_04_tiles.smem_ceiling(kernel, {"BLOCK": 32})
                row["shared wavefronts / FFMA"] = f"{c['wavefronts/step'] / h['FFMA']:.2f}"
                row["shared-memory bound"] = c["smem bound GFLOP/s"]
                row["% of bound"] = f"{g / c['smem bound GFLOP/s']:.0%}" if g else "-"
            else:
                row["shared wavefronts / FFMA"] = "0"
            row["shared pipe busy"] = f"{m[SHARED_BUSY]:.0f}%" if SHARED_BUSY in m else "-"
            row["FMA pipe busy"] = f"{m[FMA_BUSY]:.0f}%" if FMA_BUSY in m else "-"
            row["longest wait"] = top_stall(prof)
        rows.append(row)
    cols = ["kernel", "GFLOP/s", "% of cuBLAS", "global loads / FFMA",
            "shared wavefronts / FFMA", "shared-memory bound", "% of bound",
            "shared pipe busy", "FMA pipe busy", "longest wait"]
    return Table([{c: r.get(c, "-") for c in cols} for r in rows], cols,
                 title=f"at {'x'.join(map(str, shape))}; % of cuBLAS: of the cuBLAS run "
                       f"timed beside each kernel ({records.source()})")


# ------------------------------------------------------------------ the swap

def swap_evidence(shape=(2048,) * 3):
    """The swapped kernel (threadIdx.x down the rows of C), predicted: the measured
    penalty of the same change in chapter 01 (global memory) and chapter 04 (shared
    memory) as a Table, after printed lines with the model's price of one step, as
    written and swapped, and the shared-memory bound each gives."""
    pairs = (("global memory (chapter 01, naive)", ("naive", {"BLOCK": 32, "MAPPING": "x->col"}),
              ("naive", {"BLOCK": 32, "MAPPING": "x->row"})),
             ("shared memory (chapters 03 and 04)", (KERNEL, {"BLOCK": 32}),
              ("bank_layout", {"BLOCK": 32, "LAYOUT": "conflict", "PAD": 0})))
    rows = []
    for what, along, down in pairs:
        a, d = (_rate(k, shape, p) for k, p in (along, down))
        a, d = (x["gflops"]["median"] if x else None for x in (a, d))
        rows.append({"where the warp reads": what, "along a row, GFLOP/s": a,
                     "down a column, GFLOP/s": d,
                     "slower by": f"{a / d:.1f}x" if a and d else "-"})
    written = ch03_04_tiles.smem_ceiling(KERNEL, {"BLOCK": 32})
    for name, m in ch03_copies.mappings().items():
        p = ch03_copies.price(m)
        b = written["smem bound GFLOP/s"] * written["wavefronts/step"] / p["wavefronts"]
        print(f"{name:10s}: per warp and step {p['global sectors']:2d} global sectors, "
              f"{p['wavefronts']:3d} shared wavefronts -> shared-memory bound {b:6,.0f} GFLOP/s"
              + ("  (prediction)" if name == "swapped" else ""))
    c04 = ch03_04_tiles.smem_ceiling("bank_layout", pairs[1][2][1])
    g04 = _rate(pairs[1][2][0], shape, pairs[1][2][1])
    if g04:
        g = g04["gflops"]["median"]
        print(f"chapter 04's layout that reads down columns: bound "
              f"{c04['smem bound GFLOP/s']:,.0f} GFLOP/s, measured {g:,.0f} GFLOP/s = "
              f"{g / c04['smem bound GFLOP/s']:.0%} of it")
    return Table(rows, list(rows[0]), title=f"measured at {'x'.join(map(str, shape))}, "
                                            f"BLOCK = 32 ({records.source()})")


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

def solution_source() -> str:
    """The solution's source of exercise 03_tile_loop, read from the solution notebook."""
    from pathlib import Path
    from gemm_kernels.exercises.notebooks import exercise_cells
    path = Path(__file__).resolve().parents[2] / "notebooks" / "solutions" / "03_solution.ipynb"
    return dict(exercise_cells(path))["03_tile_loop"]


_EARLY_RETURN = ("    float acc = 0.f;\n",
                 "    float acc = 0.f;\n    if (row >= M || col >= N) return;   // the mistake\n")


def mistakes(source: str | None = None) -> dict[str, str]:
    """Typical wrong versions of the solution, by what is wrong."""
    src = source or solution_source()
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
    steps 1-2) and the first message of the first step that failed."""
    from gemm_kernels.exercises.grader import grade
    rows = []
    for what, src in mistakes(source).items():
        report = grade("03_tile_loop", src)
        row = {"mistake": what}
        for s in report.steps:
            row[s.name] = s.status
        bad = next((s for s in report.steps if s.status == "FAIL"), None)
        row["what the grader says"] = (bad.detail.split("; ")[0] if bad else
                                       "nothing yet: the steps that ran here passed")
        rows.append(row)
    cols = ["mistake"] + [c for c in ("compile", "static", "correct", "speed") if c in rows[0]] \
        + ["what the grader says"]
    return Table(rows, cols, title="the grader on four wrong versions of the solution")


# ------------------------------------------------------------------ occupancy and BLOCK

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


def block_bounds(blocks=(8, 16, 32), shape=(2048,) * 3) -> Table:
    """Per BLOCK: the shared-memory bound (bank model) and the measured rate against it."""
    rows = []
    for b in blocks:
        c = ch03_04_tiles.smem_ceiling(KERNEL, {"BLOCK": b})
        r = _rate(KERNEL, shape, {"BLOCK": b})
        g = r["gflops"]["median"] if r else None
        rows.append({"BLOCK": b, "wavefronts per warp and step": c["wavefronts/step"],
                     "FFMA per step": c["FFMA/step"], "bound GFLOP/s": c["smem bound GFLOP/s"],
                     "GFLOP/s": g,
                     "% of bound": f"{g / c['smem bound GFLOP/s']:.0%}" if g else "-"})
    return Table(rows, list(rows[0]), title=f"shared-memory bound and rate at "
                                            f"{'x'.join(map(str, shape))} ({records.source()})")

