"""Chapter 05's pictures and tables: one thread's work, the tile copy, what the compiler
makes of the two loop orders, and the evidence tables the chapter reads (the
shared-memory bound, where the warps wait, outputs per thread, warps against work).

Every number comes from the static analysis here (ptxas, nvdisasm, the bank model) or
from the recording; the functions only gather and lay them out.
"""
from __future__ import annotations

import re

from gemm_kernels.core import analysis
from gemm_kernels.core.kernels import get
from gemm_kernels.core.table import Table

K4 = {"BM": 64, "BN": 64, "BK": 8, "TM": 8}        # the tile of Boehm's kernel 4
# Boehm's results table (his repository's README, chapters 05 and 06's reference: an RTX
# A6000, 4092x4092), GFLOP/s; and that GPU's FP32 peak from NVIDIA's data sheet (84 SMs of
# 128 FP32 lanes, boost clock 1.80 GHz), so his rates can be set against his GPU's peak.
BOEHM = {"kernel 3": 2980.3, "kernel 4": 8474.7, "kernel 5": 15971.7, "cuBLAS": 23249.6}
BOEHM_SIZE = 4092
A6000 = {"name": "RTX A6000", "sm_count": 84, "fp32_lanes_per_sm": 128, "sm_clock_mhz": 1800}
SMALL, TEXT = 9, 10


def _plt():
    import matplotlib.pyplot as plt
    return plt


def _params(params=None) -> dict:
    k = get("tile_1d")
    bad = k.problems(params or {})
    if bad:
        raise ValueError("tile_1d: " + "; ".join(bad))
    return k.resolve(params or {})


# ------------------------------------------------------------------ one thread's work

def one_thread(params=None, tr: int = 1, tc: int = 40, k: int = 5):
    """The block's three tiles laid out as a product (As left of C, Bs above it) and one
    thread's share of step k: the TM outputs it owns (rows tr*TM .. tr*TM + TM-1 of
    column tc of the C tile), the TM values of As it reads (column k, the same rows) and
    the one value of Bs (row k, column tc). Which thread that is, the picture does not
    say: that is the exercise. Returns the Figure."""
    from matplotlib.patches import Rectangle
    p = _params(params)
    BM, BN, BK, TM = p["BM"], p["BN"], p["BK"], p["TM"]
    if not (0 <= tr < BM // TM and 0 <= tc < BN and 0 <= k < BK):
        raise ValueError(f"tr in 0..{BM // TM - 1}, tc in 0..{BN - 1}, k in 0..{BK - 1}")
    gap = max(4, BK // 2)
    x_c, y_c = BK + gap, BK + gap                        # C's top-left corner
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9.0, 7.2), layout="constrained")
    colour, pale = "#d62728", "#f4c7c3"

    def tile(x, y, w, h, name, label):
        ax.add_patch(Rectangle((x, y), w, h, facecolor="0.93", edgecolor="0.45", lw=1.2))
        ax.text(x + w / 2, y - 1.2, f"{name}  ({label})", ha="center", va="bottom",
                fontsize=TEXT)

    tile(0, y_c, BK, BM, "As", f"{BM} x {BK}")
    tile(x_c, 0, BN, BK, "Bs", f"{BK} x {BN}")
    tile(x_c, y_c, BN, BM, "C tile", f"{BM} x {BN}")
    r0 = tr * TM
    # this step's column of As and row of Bs, pale; what the thread reads, strong
    ax.add_patch(Rectangle((k, y_c), 1, BM, facecolor=pale, edgecolor="none"))
    ax.add_patch(Rectangle((x_c, k), BN, 1, facecolor=pale, edgecolor="none"))
    ax.add_patch(Rectangle((k, y_c + r0), 1, TM, facecolor=colour, edgecolor="black", lw=1))
    ax.add_patch(Rectangle((x_c + tc, k), 1, 1, facecolor=colour, edgecolor="black", lw=1))
    ax.add_patch(Rectangle((x_c + tc, y_c + r0), 1, TM, facecolor=colour, edgecolor="black",
                           lw=1.4))
    # guides from the reads to the outputs they feed
    ax.plot([k + 1, x_c + tc], [y_c + r0 + TM / 2] * 2, color=colour, lw=1, ls=":")
    ax.plot([x_c + tc + 0.5] * 2, [k + 1, y_c + r0], color=colour, lw=1, ls=":")
    ax.annotate(f"its {TM} outputs: rows {r0}..{r0 + TM - 1}\nof column {tc}, "
                f"acc[0..{TM - 1}]", xy=(x_c + tc + 1, y_c + r0 + TM / 2),
                xytext=(x_c + tc + 6, y_c + r0 + TM + 8), fontsize=TEXT,
                arrowprops=dict(arrowstyle="->", color="0.2"))
    ax.annotate(f"{TM} values of As:\ncolumn k = {k}, the same rows", xy=(k + 0.5, y_c + r0 + TM),
                xytext=(0, y_c + BM + 6), fontsize=TEXT, arrowprops=dict(arrowstyle="->", color="0.2"))
    ax.annotate(f"1 value of Bs:\nrow k = {k}, column {tc}", xy=(x_c + tc + 1, k + 0.5),
                xytext=(x_c + BN + 3, BK / 2 + 3), fontsize=TEXT,
                arrowprops=dict(arrowstyle="->", color="0.2"))
    ax.set_xlim(-1, x_c + BN + 24)
    ax.set_ylim(y_c + BM + 11, -6)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"One thread of a tile_1d block (BM = {BM}, BN = {BN}, BK = {BK}, TM = {TM}) "
                 f"at step k = {k}:\n{TM} + 1 shared-memory values feed {TM} multiply-adds, "
                 f"one into each of its {TM} outputs", fontsize=TEXT + 1)
    return fig


# ------------------------------------------------------------------ the tile copy

def copy_map(params=None) -> dict:
    """For the A tile (BM x BK) and the B tile (BK x BN): the pass i and the thread t that
    copy each element (idx = t + i*NT walks the tile row by row), the passes, and the
    threads left idle in the last pass (the `% NT` guard's work)."""
    import numpy as np
    p = _params(params)
    nt = p["BM"] * p["BN"] // p["TM"]
    out = {"threads": nt}
    for name, rows, cols in (("A", p["BM"], p["BK"]), ("B", p["BK"], p["BN"])):
        n = rows * cols
        passes = -(-n // nt)
        idx = np.arange(rows * cols).reshape(rows, cols)
        out[name] = {"pass": idx // nt, "thread": idx % nt, "passes": passes,
                     "idle": passes * nt - n, "shape": (rows, cols)}
    return out


def copy_picture(params=None):
    """The A tile and the B tile of one configuration (default: the registry's), drawn to
    scale side by side, each element coloured by the pass that copies it; warp 0's and
    warp 1's elements of pass 0 outlined and named, and what they read and store written
    beside them. Returns the Figure."""
    from matplotlib.patches import Patch, Rectangle
    p = _params(params)
    cm = copy_map(p)
    nt = cm["threads"]
    colours = ["#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6", "#fb9a99", "#ffff99", "#8dd3c7",
               "#bebada"]
    outline = {0: "black", 1: "#d62728"}
    outline_name = {0: "black", 1: "red"}
    a_rows, a_cols = cm["A"]["shape"]
    b_rows, b_cols = cm["B"]["shape"]
    gap = 5
    width, height = a_cols + gap + b_cols, max(a_rows, b_rows)
    cell = 0.105
    plt = _plt()
    fig, ax = plt.subplots(figsize=(width * cell + 0.6, height * cell + 1.4), layout="constrained")
    notes = []
    for x0, name in ((0, "A"), (a_cols + gap, "B")):
        t = cm[name]
        rows, cols = t["shape"]
        for r in range(rows):
            for c in range(cols):
                i, th = t["pass"][r, c], t["thread"][r, c]
                warp = th // 32 if i == 0 else None
                ax.add_patch(Rectangle((x0 + c, r), 1, 1, facecolor=colours[i % len(colours)],
                                       edgecolor="white", lw=0.3))
        for warp, colour in outline.items():
            cells = [(r, c) for r in range(rows) for c in range(cols)
                     if t["pass"][r, c] == 0 and t["thread"][r, c] // 32 == warp]
            for r, c in cells:
                ax.add_patch(Rectangle((x0 + c, r), 1, 1, fill=False, edgecolor=colour,
                                       lw=1.1, zorder=3))
            if cells:
                from gemm_kernels.memory import banks
                rs = sorted({r for r, _ in cells})
                store = banks.analyse(banks.words_to_bytes(
                    [r * cols + c for r, c in sorted(cells)] + [None] * (32 - len(cells))), 4)
                notes.append((name, warp, rs, sorted({c for _, c in cells}), store.wavefronts))
        what = "As" if name == "A" else "Bs"
        ax.text(x0 + cols / 2, -0.8, f"{what}: {rows} x {cols}, {t['passes']} "
                f"pass{'es' if t['passes'] > 1 else ''}", ha="center", va="bottom",
                fontsize=TEXT)
    lines = [f"In pass i, thread t copies element idx = t + i x {nt} of each tile, "
             "counted row by row:", "a warp copies 32 neighbouring elements."]
    for name, warp, rs, cs, wf in notes:
        what, src = ("As", "A") if name == "A" else ("Bs", "B")
        row_text = f"row {rs[0]}" if len(rs) == 1 else f"rows {rs[0]}-{rs[-1]}"
        lines.append(f"warp {warp} ({outline_name[warp]}): {what} {row_text}, columns "
                     f"{cs[0]}-{cs[-1]}: loads {len(rs)} piece{'s' if len(rs) > 1 else ''} of "
                     f"{4 * len(cs)} bytes of {src}, stores in {wf} wavefront{'s' if wf > 1 else ''}")
    ax.text(a_cols + gap, b_rows + 3, "\n".join(lines), va="top", ha="left", fontsize=TEXT)
    ax.legend(handles=[Patch(facecolor=colours[i], label=f"pass i = {i}")
                       for i in range(max(cm["A"]["passes"], cm["B"]["passes"]))],
              loc="lower right", fontsize=SMALL, frameon=False, ncols=2)
    ax.set_xlim(-0.5, width + 0.5)
    ax.set_ylim(height + 0.5, -3.5)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"The tile copy of one step, {nt} threads (BM = {p['BM']}, BN = {p['BN']}, "
                 f"BK = {p['BK']}, TM = {p['TM']}); colour: the pass", fontsize=TEXT + 1)
    return fig


# ------------------------------------------------------------------ the loop orders

_LOOP = """#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k][tc];
#pragma unroll
            for (int i = 0; i < TM; ++i)
                acc[i] += As[tr * TM + i][k] * b;
        }"""
LOOP_ORDERS = {
    "k outside, Bs[k][tc] in a register (the kernel's)": _LOOP,
    "i outside: one dot product per output": """#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int k = 0; k < BK; ++k)
                acc[i] += As[tr * TM + i][k] * Bs[k][tc];""",
    "i outside, the k loop kept rolled": """#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll 1
            for (int k = 0; k < BK; ++k)
                acc[i] += As[tr * TM + i][k] * Bs[k][tc];""",
}


def loop_orders(params=None) -> Table:
    """tile_1d compiled with each loop of LOOP_ORDERS in place of its own: registers and
    spills (ptxas) and the shared loads and FFMA between the two barriers of one step
    (nvdisasm), with the loads per FFMA."""
    from gemm_kernels.core import compiler
    from gemm_kernels.exercises.ch05_checks import between_barriers, opcodes
    p = _params(params)
    k = get("tile_1d")
    src = k.source_text()
    if _LOOP not in src:
        raise ValueError("tile_1d's loop is not the one this table replaces")
    rows = []
    for i, (label, loop) in enumerate(LOOP_ORDERS.items()):
        variant = k.with_code(src.replace(_LOOP, loop), name=f"tile_1d:order{i}",
                              source="05_tile_1d_variant.cu")
        res = compiler.resources(variant, p)
        ops = between_barriers(opcodes(compiler.sass(variant, p)))
        n = {w: sum(1 for op in ops if op == w) for w in ("LDS", "LDS.64", "LDS.128")}
        ffma = sum(1 for op in ops if op.startswith("FFMA"))
        loads = sum(n.values())
        # a rolled loop's body is compiled once: its counts are those of one k, not of BK
        rolled = "#pragma unroll 1" in loop
        rows.append({"loop": label + (" (counts: one k)" if rolled else ""),
                     "registers": res["registers"],
                     "spills (bytes)": res["spill_stores"], "LDS.128": n["LDS.128"],
                     "LDS": n["LDS"], "FFMA": ffma,
                     "loads per FFMA": f"{loads / ffma:.3g}" if ffma else "-"})
    return Table(rows, list(rows[0]), title="one step of tile_1d between its two barriers, "
                 f"as compiled ({' '.join(f'{n}={p[n]}' for n in ('BM', 'BN', 'BK', 'TM'))}; "
                 "a loop kept rolled counts once, as its body)")


def inner_loop(params=None, limit: int = 24):
    """The compiled inner loop of one step, from its first shared load on (`limit`
    lines), and what it shows about reuse: the first LDS (a value of B) and how many FFMA
    read its register before it is loaded again, and the same for the four registers of
    the first LDS.128 (four values of k of one row of A). Returns (SASS text, the two
    findings as lines)."""
    import re
    from gemm_kernels.core import compiler
    from gemm_kernels.notebook import display
    p = _params(params)
    k = get("tile_1d")
    body = [t for _, _, t in analysis.main_loop(compiler.sass(k, p))]
    regs = [[int(r) for r in re.findall(r"\bR(\d+)", t)] for t in body]

    def written(i: int) -> set[int]:
        """The registers instruction i writes: none for a store, a barrier or a branch;
        4 from the first for LDS.128, 2 for LDS.64, else the first."""
        t, r = body[i], regs[i]
        if not r or t.startswith(("ST", "BAR", "BRA", "@")):
            return set()
        n = 4 if t.startswith("LDS.128") else 2 if t.startswith("LDS.64") else 1
        return set(range(r[0], r[0] + n))

    def readers(i: int, width: int) -> list[int]:
        """For each of the `width` registers instruction i loads, the FFMA that read it
        before it is written again."""
        out = []
        for reg in range(regs[i][0], regs[i][0] + width):
            n = 0
            for j in range(i + 1, len(body)):
                if body[j].startswith("FFMA") and reg in regs[j][1:]:
                    n += 1
                if reg in written(j):
                    break
            out.append(n)
        return out

    first_b = next(i for i, t in enumerate(body) if re.match(r"LDS R\d+, \[", t))
    first_a = next(i for i, t in enumerate(body) if t.startswith("LDS.128"))
    b, a = readers(first_b, 1)[0], readers(first_a, 4)
    lines = [f"{body[first_b]}  (Bs[k][tc], one value of B): R{regs[first_b][0]} is read by "
             f"{b} FFMA before it is loaded again (TM = {p['TM']})",
             f"{body[first_a]}  (As[tr*TM + i][k..k+3], four values of k of one row of A): "
             f"its four registers are read by {', '.join(map(str, a))} FFMA"]
    return display.sass_loop(k, p, start="LDS", limit=limit), "\n".join(lines)


def chapter_03_loads() -> str:
    """Chapter 03's kernel as compiled: its shared loads and FFMA per step of its main
    loop, and FFMA per load."""
    h = analysis.summary("smem_tiled", {"BLOCK": 32})["loop_histogram"]
    loads = h.get("LDS", 0) + h.get("LDS.128", 0)
    return (f"chapter 03's kernel as compiled: {h.get('LDS.128', 0)} LDS.128 and "
            f"{h.get('LDS', 0)} LDS for {h['FFMA']} FFMA, {h['FFMA'] / loads:.2f} FFMA per load")


# ------------------------------------------------------------------ the evidence at 4096^3

def _measured(kernel, params, size=4096):
    from gemm_kernels.measure import lookup
    try:
        return lookup.measure_or_lookup(kernel, (size,) * 3, params)["gflops"]["median"]
    except LookupError:
        return None


def _profiled():
    from gemm_kernels.measure import studies
    return [(s, r) for s, r in studies.results("stalls")
            if r and s.kernel in ("smem_tiled", "tile_1d")]


LDS = "smsp__inst_executed_op_shared_ld.sum"
WF = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
BUSY = "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"


def smem_bound(w: float, props: dict | None = None) -> float:
    """GFLOP/s that shared memory alone allows at w wavefronts per FFMA instruction: an SM
    serves one wavefront per clock, and an FFMA instruction is 32 lanes x 2 flops."""
    from gemm_kernels.measure import records
    props = props or records.described_device()
    return props["sm_count"] * props["sm_clock_mhz"] * 1e6 / w * 32 * 2 / 1e9


def step_wavefronts(kernel, params) -> dict:
    """One warp's shared-memory wavefronts per step along K by the bank model, loads and
    the tile copies' stores (the convention of chapter 04, whose 50 per step counts
    both), and its FFMA instructions per step: {"loads", "stores", "total", "FFMA"}.
    Chapter 03's kernel is priced by chapter 04's model, the tiles by chapter 05's."""
    if kernel == "smem_tiled":
        from gemm_kernels.memory import ch03_04_tiles as model
        ins = [i for i in model.warp_instructions(kernel, params) if i.warp == 0]
        warps, ffma = 1, model._params(kernel, params)[1]["BLOCK"]
    else:
        from gemm_kernels.memory import ch05_06_thread_tiles as model
        from gemm_kernels.memory import wavefronts
        ins = model.warp_instructions(kernel, params)
        warps = wavefronts.warps(model.geometry(kernel, params).threads)
        ffma = model.fma_per_step(kernel, params)
    part = {op: sum(i.analysis.wavefronts for i in ins if i.op == op) / warps
            for op in ("ld", "st")}
    return {"loads": part["ld"], "stores": part["st"], "total": part["ld"] + part["st"],
            "FFMA": ffma}


def loads_table(configs) -> Table:
    """Per thread and step along K: the FFMA, the shared loads as ptxas merges them, and
    FFMA per load."""
    from gemm_kernels.memory import ch05_06_thread_tiles
    rows = [{k: r[k] for k in ("params", "threads", "FFMA", "LDS", "LDS.128", "FFMA per load")}
            for r in ch05_06_thread_tiles.step_summary(configs)]
    return Table(rows, list(rows[0]), title="one step along K, per thread: FFMA and shared loads")


def wavefront_table(configs) -> Table:
    """Per warp and step along K, by the bank model: FFMA instructions, the wavefronts of
    the loads (the same in every warp), those of the tile copies' stores (the block's
    mean: where a copy leaves warps idle, some warps store and some do not), and
    wavefronts per FFMA, the `w` of the shared-memory bound (the one convention of
    chapters 04 and 05: loads and stores together)."""
    from gemm_kernels.memory import ch05_06_thread_tiles
    rows = []
    for (name, params), r in zip(configs, ch05_06_thread_tiles.step_summary(configs)):
        w = step_wavefronts(name, params)
        rows.append({"params": r["params"], "FFMA (warp instructions)": w["FFMA"],
                     "load wavefronts": _whole(w["loads"]),
                     "store wavefronts (average per warp)": _whole(w["stores"]),
                     "wavefronts per FFMA": f"{w['total'] / w['FFMA']:.3f}"})
    return Table(rows, list(rows[0]), title="one step along K, per warp: shared-memory "
                 "wavefronts (bank model)")


def _whole(x):
    return int(x) if x == int(x) else round(x, 2)


def bound_table() -> Table:
    """Chapter 03's kernel and the two tile_1d tiles as profiled at 4096^3: shared loads
    per FFMA in the SASS, wavefronts per FFMA (loads and stores) by the bank model, the
    shared-memory bound that gives, the same wavefronts as Nsight Compute counted them
    (the check of the model), the measured rate, its share of the bound, and how busy
    Nsight Compute found the shared-memory pipe."""
    from gemm_kernels.measure import records
    rows = []
    for s, r in _profiled():
        h, m = analysis.summary(s.kernel, s.params)["loop_histogram"], r["metrics"]
        ffma = r["shape"][0] * r["shape"][1] * r["shape"][2] // 32   # FFMA warp instructions
        st = step_wavefronts(s.kernel, s.params)
        w, g = st["total"] / st["FFMA"], _measured(s.kernel, s.params)
        rows.append({"kernel": s.label,
                     "loads per FFMA, SASS": f"{(h.get('LDS', 0) + h.get('LDS.128', 0)) / h['FFMA']:.3g}",
                     "wavefronts per FFMA, model": f"{w:.3f}",
                     "wavefronts per FFMA, Nsight Compute": f"{m[WF] / ffma:.3f}",
                     "bound GFLOP/s": smem_bound(w),
                     "measured GFLOP/s": g,
                     "% of bound": round(100 * g / smem_bound(w)) if g else None,
                     "shared pipe busy": f"{m[BUSY]:.0f}%"})
    return Table(rows, list(rows[0]) if rows else [],
                 title=f"shared-memory bound from the bank model's wavefronts (loads and "
                       f"stores), checked against Nsight Compute's count, 4096^3 "
                       f"({records.recording_label()})")


def bound_plot(ax=None):
    """bound_table as bars, drawn as chapter 04 draws its bounds: the bound pale, the
    measured rate solid inside it, with its share of the bound; TFLOP/s at 4096^3."""
    from matplotlib.patches import Patch
    plt = _plt()
    t = bound_table()
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 2.9))
    y = list(range(len(t)))[::-1]
    ax.barh(y, [(r["bound GFLOP/s"] or 0) / 1e3 for r in t], height=0.8, color="0.85",
            edgecolor="0.6")
    ax.barh(y, [(r["measured GFLOP/s"] or 0) / 1e3 for r in t], height=0.45, color="tab:blue")
    for yi, r in zip(y, t):
        if r["% of bound"]:
            ax.text(r["bound GFLOP/s"] / 1e3, yi, f" {r['% of bound']}% of bound",
                    va="center", fontsize=SMALL)
    ax.set_yticks(y, [r["kernel"] for r in t])
    ax.set_xlabel("TFLOP/s at 4096^3")
    ax.set_xlim(0, max(r["bound GFLOP/s"] for r in t) / 1e3 * 1.2)
    ax.legend(handles=[Patch(facecolor="0.85", edgecolor="0.6",
                             label="shared-memory bound (bank model)"),
                       Patch(color="tab:blue", label="measured")],
              fontsize=SMALL, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.figure.tight_layout()
    return ax


def wait_table() -> Table:
    """The same three kernels: their two largest waits, registers, resident warps (blocks
    per SM from ptxas, warps active from Nsight Compute), and how busy the schedulers
    and the FMA pipe were."""
    from gemm_kernels.notebook import evidence
    rows = []
    for s, r in _profiled():
        m, occ = r["metrics"], analysis.kernel_occupancy(s.kernel, s.params)
        waits = sorted(((v, k) for k, v in evidence.stall_reasons(r).items()
                        if k != "selected"), reverse=True)
        rows.append({"kernel": s.label,
                     "two largest waits (cycles per instruction)":
                         ", ".join(f"{k} {v:.1f}" for v, k in waits[:2]),
                     "registers": occ.registers_per_thread,
                     "warps per SM": f"{occ.warps_per_sm} of {occ.max_warps_per_sm}",
                     "warps active": f"{m['sm__warps_active.avg.pct_of_peak_sustained_active']:.0f}%",
                     "schedulers busy": f"{m['smsp__issue_active.avg.pct_of_peak_sustained_active']:.0f}%",
                     "FMA pipe busy": f"{m['sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active']:.0f}%"})
    return Table(rows, list(rows[0]) if rows else [],
                 title="Nsight Compute at 4096^3; registers and warps per SM from ptxas")


def ffma_issue_line() -> str:
    """The default tile as profiled at 4096^3: the share of cycles its schedulers issue,
    the instructions it executes per FFMA, and so the share of cycles on which an FFMA
    issues (the first over the second), next to how busy Nsight Compute found the FMA
    pipe. Instructions per FFMA are a ceiling of their own: at this issue rate, every
    instruction that is not an FFMA takes an issue slot from one."""
    row = next(((s, r) for s, r in _profiled()
                if s.kernel == "tile_1d" and not s.params), None)
    if row is None:
        return "the default tile's profile: not recorded"
    s, r = row
    m = r["metrics"]
    issue = m["smsp__issue_active.avg.pct_of_peak_sustained_active"]
    per_ffma = _executed_per_ffma()[("tile_1d", tuple(sorted(get("tile_1d").resolve({}).items())))]
    return (f"default tile, 4096^3: the schedulers issue on {issue:.0f}% of cycles, "
            f"{per_ffma:.2f} instructions per FFMA, so an FFMA issues on "
            f"{issue / per_ffma:.0f}% of cycles; FMA pipe busy "
            f"{m['sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active']:.0f}%")


def ceilings(params=None) -> dict:
    """The default tile's two ceilings at 4096^3 as shares of the FP32 peak, next to its
    measured share. The issue ceiling: schedulers that issued on every cycle, at the
    instructions per FFMA Nsight Compute counted, would give an FFMA 1 / (instructions
    per FFMA) of the cycles. The shared-memory ceiling: smem_bound at the bank model's
    wavefronts per FFMA, over the peak (the same clock). The lower one binds."""
    from gemm_kernels.core import device
    from gemm_kernels.measure import records
    p = get("tile_1d").resolve(params or {})
    key = ("tile_1d", tuple(sorted(p.items())))
    per_ffma = _executed_per_ffma().get(key)
    g = _measured("tile_1d", p)
    peak = device.peak_fp32_gflops(records.described_device())
    if per_ffma is None or g is None or not peak:
        return {}
    st = step_wavefronts("tile_1d", p)
    out = {"instructions per FFMA": per_ffma, "issue": 1 / per_ffma,
           "shared memory": smem_bound(st["total"] / st["FFMA"]) / peak,
           "measured": g / peak}
    out["binds"] = min(("issue", "shared memory"), key=out.get)
    out["of the binding ceiling"] = out["measured"] / out[out["binds"]]
    return out


def ceilings_line(params=None) -> str:
    """ceilings() as one printed line each."""
    c = ceilings(params)
    if not c:
        return "the default tile's ceilings: not recorded"
    return (f"issue ceiling (schedulers issuing on every cycle, "
            f"{c['instructions per FFMA']:.2f} instructions per FFMA): "
            f"1 / {c['instructions per FFMA']:.2f} = {c['issue']:.0%} of the FP32 peak\n"
            f"shared-memory ceiling (the shared-memory bound over the peak): {c['shared memory']:.0%} of the FP32 peak\n"
            f"measured: {c['measured']:.0%} of the FP32 peak, {c['of the binding ceiling']:.0%} "
            f"of the lower ceiling, {c['binds']}, the one that binds")


def _tile(kernel, p) -> tuple[int, int, int, int]:
    if kernel == "smem_tiled":
        return p["BLOCK"], p["BLOCK"], p["BLOCK"], 1
    return p["BM"], p["BN"], p["BK"], p["TM"]


def _executed_per_ffma() -> dict:
    """Instructions Nsight Compute counted per FFMA instruction, by (kernel, resolved
    params as a sorted tuple), for every tile of chapter 05's profiles (the studies stalls
    and ch05_outputs_stalls). Every multiply-add is one lane of an FFMA, so a launch runs
    M*N*K / 32 FFMA instructions."""
    from gemm_kernels.measure import studies
    out = {}
    for study in ("stalls", "ch05_outputs_stalls"):
        for s, r in studies.results(study):
            if r and s.kernel in ("smem_tiled", "tile_1d"):
                m, n, k = r["shape"]
                key = (s.kernel, tuple(sorted(get(s.kernel).resolve(s.params).items())))
                out[key] = r["metrics"]["smsp__inst_executed.sum"] / (m * n * k / 32)
    return out


def outputs_table() -> Table:
    """The study ch05_outputs (one tile family at 4096^3, 1 to 16 outputs per thread):
    per step the tile, threads, registers (of the timed binary), warps per SM, the FFMA a
    thread does between two barriers, shared loads per FFMA and loop instructions per
    FFMA (counted once each in the SASS: static), the instructions per FFMA Nsight Compute
    counted as executed, and the rate."""
    from gemm_kernels.measure import studies
    executed = _executed_per_ffma()
    rows = []
    for s, r in studies.results("ch05_outputs"):
        p = get(s.kernel).resolve(s.params)
        bm, bn, bk, tm = _tile(s.kernel, p)
        h = analysis.summary(s.kernel, s.params)["loop_histogram"]
        regs = ((r or {}).get("binary") or {}).get("registers")
        occ = analysis.kernel_occupancy(s.kernel, s.params, registers=regs)
        rows.append({"outputs per thread": s.label.split(" (")[0].replace(" outputs per thread", "")
                                                  .replace(" output per thread", ""),
                     "BM x BN x BK": f"{bm} x {bn} x {bk}", "threads": occ.threads_per_block,
                     "registers": occ.registers_per_thread,
                     "warps per SM": f"{occ.warps_per_sm} ({occ.blocks_per_sm} block"
                                     f"{'s' if occ.blocks_per_sm > 1 else ''})",
                     "FFMA per thread per step": tm * bk,
                     "loads per FFMA": f"{(h.get('LDS', 0) + h.get('LDS.128', 0)) / h['FFMA']:.3g}",
                     "instructions per FFMA, SASS": f"{sum(h.values()) / h['FFMA']:.1f}",
                     "instructions per FFMA, executed":
                         f"{e:.1f}" if (e := executed.get((s.kernel, tuple(sorted(p.items())))))
                         else "-",
                     "GFLOP/s": r["gflops"]["median"] if r else None})
    return Table(rows, list(rows[0]), title="one tile family, timed together at 4096^3; "
                 "registers of the timed binaries, loads and static instruction counts "
                 "from the SASS, executed instructions from Nsight Compute at 4096^3")


def outputs_plot():
    """Two panels with one row per number of outputs per thread: on the left the study
    ch05_outputs (the five tiles timed together at 4096^3), on the right the sweep's
    fastest tile for each (best_per_tm, 2048^3). Each bar says its rate over chapter 03's
    kernel at its own size, and its tile. Returns the Figure."""
    from gemm_kernels.measure import studies
    plt = _plt()
    five = [(_tile(s.kernel, get(s.kernel).resolve(s.params)), r["gflops"]["median"] if r else 0)
            for s, r in studies.results("ch05_outputs")]
    best = [((*map(int, r["BM x BN x BK"].split(" x ")),
              int(r["outputs per thread"].split()[0])), r["GFLOP/s"] or 0)
            for r in best_per_tm()]
    fig, axes = plt.subplots(1, 2, sharey=True, figsize=(12, 4.4))
    top = max(g for _, g in five + best) / 1e3
    rows = list(range(len(five)))[::-1]
    for ax, bars, colour, title in (
            (axes[0], five, "tab:blue", "the five tiles, timed together at 4096^3"),
            (axes[1], best, "tab:green", "the sweep's fastest tile for each, 2048^3")):
        base = bars[0][1]                           # chapter 03's kernel, the first row
        ax.barh(rows, [g / 1e3 for _, g in bars], color=colour)
        for y, ((bm, bn, bk, tm), g) in zip(rows, bars):
            ax.text(g / 1e3, y, f" {g / 1e3:.1f} ({g / base:.1f}x chapter 03)\n"
                    f" {bm} x {bn} x {bk} tile, {bm * bn // tm:,} threads",
                    va="center", fontsize=SMALL)
        ax.set_xlim(0, top * 1.75)
        ax.set_xlabel("TFLOP/s")
        ax.set_title(title, fontsize=TEXT)
    axes[0].set_yticks(rows, [f"{tm} output{'s' if tm > 1 else ''} per thread"
                              + (" (chapter 03)" if tm == 1 else "")
                              for (_, _, _, tm), _ in five], fontsize=SMALL)
    fig.suptitle("How many outputs should a thread compute?", fontsize=TEXT)
    fig.tight_layout()
    return fig


def outputs_diagnosis() -> str:
    """Why the 2- and 4-output tiles of ch05_outputs are slow, one line each, from their
    Nsight Compute profile (ch05_outputs_stalls): the 2-output tile's FFMA per thread
    between two barriers and the barrier's share of its waits; the 4-output tile's blocks
    per SM and the share of cycles its schedulers issue on."""
    from gemm_kernels.measure import studies
    from gemm_kernels.notebook import evidence
    lines = []
    for s, r in studies.results("ch05_outputs_stalls"):
        if not r:
            continue
        bm, bn, bk, tm = _tile(s.kernel, get(s.kernel).resolve(s.params))
        if tm == 2:
            w = {k: v for k, v in evidence.stall_reasons(r).items() if k != "selected"}
            lines.append(f"{s.label}: {tm * bk} FFMA per thread between two barriers; "
                         f"the barrier takes {w.get('barrier', 0) / sum(w.values()):.0%} "
                         "of its warps' waits")
        else:
            blocks = analysis.kernel_occupancy(
                s.kernel, s.params, registers=(r.get("binary") or {}).get("registers")).blocks_per_sm
            busy = r["metrics"]["smsp__issue_active.avg.pct_of_peak_sustained_active"]
            lines.append(f"{s.label}: {blocks} block{'s' if blocks > 1 else ''} per SM; "
                         f"its schedulers issue on {busy:.0f}% of cycles")
    return "\n".join(lines)


# ------------------------------------------------------------------ the sweep, 2048^3

def best_per_tm(size: int = 2048) -> Table:
    """For each TM, the fastest tile the sweep recorded at size^3, next to chapter 03's
    kernel at the same size."""
    from gemm_kernels.measure import ladder, records, tradeoff
    t03 = ladder.share("smem_tiled", size)
    rows = [{"outputs per thread": "1 (chapter 03)", "BM x BN x BK": "32 x 32 x 32", "threads": 1024,
             "GFLOP/s": t03["GFLOP/s"] if t03 else None, "vs chapter 03": "1.0x"}]
    for tm in next(q for q in get("tile_1d").params if q.name == "TM").values:
        ranked = tradeoff.ranked("tile_1d", size, fixed={"TM": tm})
        if not ranked:
            continue
        p, g = ranked[0]
        rows.append({"outputs per thread": str(tm),
                     "BM x BN x BK": f"{p['BM']} x {p['BN']} x {p['BK']}",
                     "threads": p["BM"] * p["BN"] // tm, "GFLOP/s": g,
                     "vs chapter 03": f"{g / t03['GFLOP/s']:.1f}x" if t03 else "-"})
    return Table(rows, list(rows[0]), title=f"the fastest recorded tile for each TM, "
                 f"{size}^3 ({records.recording_label()})")


def outputs_stalls() -> Table:
    """The 2- and 4-output tiles as profiled at 4096^3: warps active, schedulers busy,
    instructions issued, the time, all waits and the barrier's share of them."""
    from gemm_kernels.measure import studies
    from gemm_kernels.notebook import evidence
    rows = []
    for s, r in studies.results("ch05_outputs_stalls"):
        if not r:
            continue
        m = r["metrics"]
        w = {k: v for k, v in evidence.stall_reasons(r).items() if k != "selected"}
        rows.append({"tile": s.label,
                     "warps active": f"{m['sm__warps_active.avg.pct_of_peak_sustained_active']:.0f}%",
                     "schedulers busy": f"{m['smsp__issue_active.avg.pct_of_peak_sustained_active']:.0f}%",
                     "instructions (billions)": m["smsp__inst_executed.sum"] / 1e9,
                     "time (ms)": m["gpu__time_duration.sum"] / 1e6,
                     "waits per instruction (cycles)": sum(w.values()),
                     "at the barrier": f"{w.get('barrier', 0):.1f} "
                                       f"({w.get('barrier', 0) / sum(w.values()):.0%})"})
    return Table(rows, list(rows[0]) if rows else [],
                 title="the 2- and 4-output tiles under Nsight Compute, 4096^3")


def heatmaps(size: int = 2048, fixed_bn: int | None = None):
    """The sweep as two heat maps with one colour scale: the best rate over the other
    tunables for each (BM, BN), and for each (BM, TM) at BN = fixed_bn (default: the
    registry default's BN). Returns the Figure."""
    import math
    from gemm_kernels.notebook import widgets
    plt = _plt()
    bn = fixed_bn or get("tile_1d").defaults()["BN"]
    values = []
    for x, y, fixed in (("BN", "BM", None), ("TM", "BM", {"BN": bn})):
        values += [v for row in widgets.sweep_grid("tile_1d", x, y, size, fixed)[2]
                   for v in row if not math.isnan(v)]
    lo, hi = min(values) / 1e3, max(values) / 1e3
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 3.9))
    widgets.heatmap("tile_1d", x="BN", y="BM", size=size, ax=axes[0], vmin=lo, vmax=hi,
                    invalid="hatch")
    widgets.heatmap("tile_1d", x="TM", y="BM", size=size, fixed={"BN": bn}, ax=axes[1],
                    vmin=lo, vmax=hi, invalid="hatch")
    axes[1].set_title(axes[1].get_title().replace("tile_1d:", f"tile_1d, BN = {bn}:"), fontsize=9)
    # One colour scale, so one bar: the left map's is the same as the right one's.
    bar = axes[0].images[0].colorbar if axes[0].images else None
    if bar is not None:
        bar.remove()
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ mappings, priced

MAPPINGS = {
    "along the row (the kernel's)": ("t % BN", "t / BN"),
    "down the column first": ("t / (BM / TM)", "t % (BM / TM)"),
}
# A third that costs no more: each half-warp its own row group (a 128-bit load's two
# half-warps are served apart, so each can broadcast its own address).
HALVES = {"one row group per half-warp": ("t % 16 + (t / 32) * 16 % BN",
                                          "(t / 16) % 2 + (t / 32) * 16 / BN * 2")}


def lanes_line(tc: str = HALVES["one row group per half-warp"][0],
               tr: str = HALVES["one row group per half-warp"][1], params=None) -> str:
    """Which (tr, tc) the 32 lanes of warp 0 get from a mapping, as runs of lanes that
    share a row group and take consecutive columns (the grader's C evaluator)."""
    from gemm_kernels.exercises.cexpr import evaluate
    p = _params(params)
    env = {**p, "NT": p["BM"] * p["BN"] // p["TM"]}
    got = [(evaluate(tr, {**env, "t": t}), evaluate(tc, {**env, "t": t})) for t in range(32)]
    runs, start = [], 0
    for t in range(1, 33):
        if t == 32 or got[t][0] != got[t - 1][0] or got[t][1] != got[t - 1][1] + 1:
            runs.append(f"lanes {start}-{t - 1}: tr = {got[start][0]}, "
                        f"tc = {got[start][1]}..{got[t - 1][1]}")
            start = t
    return (f"warp 0 at BM = {p['BM']}, BN = {p['BN']}, TM = {p['TM']}, tc = {tc}, tr = {tr}: "
            + "; ".join(runs))


def mapping_prices(params=None, mappings=None) -> Table:
    """Each mapping (tc, tr) priced the way the exercise's check prices it: one step along
    K of the costliest warp in shared-memory wavefronts (A read as LDS.128, B as LDS),
    that as a multiple of the first mapping's, the same with no bank conflict at all, and the 32-byte sectors of a store of C."""
    from gemm_kernels.exercises.ch05_checks import (coverage_problems, mapping_step,
                                                    mapping_table, store_sectors)
    p = _params(params)
    rows, first = [], None
    for label, (tc, tr) in (mappings or MAPPINGS).items():
        places = mapping_table(tc, tr, p)
        if isinstance(places, str) or coverage_problems(places, p):
            continue
        cost, _ = mapping_step(places, p)
        worst = max(range(len(cost)), key=lambda w: cost[w][0])
        first = first or cost[worst][0]
        rows.append({"mapping": label, "tc": tc, "tr": tr,
                     "values of tr in one warp": len({r for _, r in places[:32]}),
                     "wavefronts per step": cost[worst][0],
                     "cost / along-the-row cost": f"{cost[worst][0] / first:.1f}x",
                     "without conflicts": cost[worst][1],
                     "sectors per store of C": max(store_sectors(places, p))})
    return Table(rows, list(rows[0]), title="one step along K of the costliest warp, bank "
                 f"model ({' '.join(f'{n}={p[n]}' for n in ('BM', 'BN', 'BK', 'TM'))})")


def owner_line(tr: int = 1, tc: int = 40, params=None) -> str:
    """The thread t that each mapping of MAPPINGS gives the piece (tr, tc), the piece
    drawn by one_thread, found by evaluating the mapping for every thread."""
    from gemm_kernels.exercises.ch05_checks import mapping_table
    p = _params(params)
    lines = [f"rows {tr * p['TM']}-{tr * p['TM'] + p['TM'] - 1} of column {tc} "
             f"(tr = {tr}, tc = {tc}) at BM = {p['BM']}, BN = {p['BN']}, TM = {p['TM']}:"]
    for label, (tc_expr, tr_expr) in MAPPINGS.items():
        places = mapping_table(tc_expr, tr_expr, p)
        t = places.index((tc, tr))
        lines.append(f"  {label}: t = {t} (tc = {tc_expr}, tr = {tr_expr})")
    return "\n".join(lines)


# ------------------------------------------------------------------ for the solution

def _variant_sources() -> dict:
    """The chapter's kernel as an exercise submission (its own mapping lines and loop),
    and the same source with one thing changed, as a student might write it."""
    src = get("tile_1d").source_text()
    mapping = ("const int tc = t % BN;", "const int tr = t / BN;")
    if _LOOP not in src or not all(m in src for m in mapping):
        raise ValueError("tile_1d's mapping or loop is not the one these variants change")

    def mapped(tc, tr):
        return src.replace(mapping[0], f"const int tc = {tc};").replace(mapping[1],
                                                                         f"const int tr = {tr};")
    i_rolled = _LOOP.replace("#pragma unroll\n            for (int i",
                             "#pragma unroll 1\n            for (int i")
    return {
        "the chapter's kernel": src,
        "i outside: one dot product per output": src.replace(
            _LOOP, LOOP_ORDERS["i outside: one dot product per output"]),
        "i outside, the k loop kept rolled": src.replace(
            _LOOP, LOOP_ORDERS["i outside, the k loop kept rolled"]),
        "the i loop kept rolled (acc[i] with i not known)": src.replace(_LOOP, i_rolled),
        "threads down the column first": mapped("t / (BM / TM)", "t % (BM / TM)"),
        "one row group per half-warp": mapped(*HALVES["one row group per half-warp"]),
        "tc = t % 32: two threads per output": mapped("t % 32", "t / 32 % (BM / TM)"),
        "tc = t % BM: BM where BN belongs": mapped("t % BM", "t / BM"),
        "the row of As without tr*TM": src.replace(
            _LOOP, _LOOP.replace("As[tr * TM + i][k]", "As[i][k]")),
    }


def _whole_problems(detail: str, width: int) -> str:
    """Step 2's problems (separated by '; ') as whole sentences: as many as fit in
    `width` characters, at least the first, and how many more there are."""
    parts = detail.split("; ")
    shown = [parts[0]]
    for part in parts[1:]:
        if len("; ".join(shown + [part])) > width:
            break
        shown.append(part)
    rest = len(parts) - len(shown)
    return "; ".join(shown) + (f" (and {rest} more)" if rest else "")


def _key_phrase(detail: str) -> str:
    """Step 2's first problem up to its first ': ' outside parentheses, without the
    parenthesised asides at its end, and how many more problems there are: the message's
    gist, for a table."""
    parts = detail.split("; ")
    text, depth = parts[0], 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and text.startswith(": ", i):
            text = text[:i]
            break
    while text.endswith(")") and " (" in text:
        text = text[:text.rindex(" (")]
    rest = len(parts) - 1
    return text + (f" (and {rest} more)" if rest else "")


def mistakes(width: int = 240, key_phrases: bool = False) -> Table:
    """Steps 2 and 3 of the exercise without a GPU (step 3 then runs the kernel on the
    CPU, where a compiler is installed) on the chapter's kernel and on variants of it:
    the verdicts, and what step 2 says (whole problems, never cut inside one; with
    `key_phrases`, the gist of the first problem only, so that the table stays narrow)."""
    from gemm_kernels.exercises.grader import grade
    rows = []
    for label, src in _variant_sources().items():
        steps = {s.name: s for s in grade("05_tile_1d", src, gpu=False).steps}
        static = steps["static"]
        text = (_key_phrase(static.detail) if key_phrases
                else _whole_problems(static.detail, width))
        # the mapping as the student would write it, so that each verdict sits beside it
        tc, tr = (re.search(rf"const int {v} = (.+?);", src).group(1) for v in ("tc", "tr"))
        rows.append({"submission": label, "tc = ..., tr = ...": f"{tc}, {tr}",
                     "step 2 (static)": static.status,
                     "step 3 (right numbers)": steps["correct"].status,
                     "what step 2 says": text})
    return Table(rows, list(rows[0]), title="the exercise's steps 2 and 3 without a GPU, on "
                 "variants of the chapter's kernel (BM = BN = 64, BK = TM = 16)")


def _any_bk(tile, bks):
    """(the tile's resolved params, tile_1d without its constraints and with every BK of
    `bks` allowed): BK = 32 is outside the kernel's tunables but compiles from the same
    source."""
    from dataclasses import replace
    k = get("tile_1d")
    wide = replace(k, name="tile_1d:any_bk", constraints=(),
                   params=tuple(replace(q, values=tuple(sorted(set(q.values) | set(bks))))
                                if q.name == "BK" else q for q in k.params))
    return k.resolve(tile or {}), wide


def bk_loop_counts(tile=None, bks=(8, 16, 32)) -> Table:
    """The static evidence for 'what happens once per step': the main loop (one step
    along K) of tile_1d at one BM, BN, TM for each BK, counted in its SASS: barriers,
    global loads and shared stores (the tile copy), shared loads, FFMA, every other
    instruction, and the loop's instructions per FFMA. Compiled here, no GPU needed."""
    p0, wide = _any_bk(tile, bks)
    rows = []
    for bk in bks:
        h = analysis.summary(wide, {**p0, "BK": bk})["loop_histogram"]
        ffma = h.get("FFMA", 0)
        named = {"BAR": h.get("BAR", 0), "LDG (copy)": h.get("LDG", 0),
                 "STS (copy)": h.get("STS", 0),
                 "LDS + LDS.128": h.get("LDS", 0) + h.get("LDS.128", 0), "FFMA": ffma}
        total = sum(h.values())
        rows.append({"BK": bk, **named, "other": total - sum(named.values()),
                     "loop instructions": total,
                     "per FFMA": f"{total / ffma:.2f}" if ffma else None,
                     "FFMA per BAR": ffma / named["BAR"] if named["BAR"] else None})
    return Table(rows, list(rows[0]), title=f"tile_1d, BM = {p0['BM']}, BN = {p0['BN']}, "
                 f"TM = {p0['TM']}: one step of the main loop per thread, counted in the SASS "
                 "(sm_90, compiled here)")


def bk_instructions(tile=None, bks=(8, 16, 32)) -> dict:
    """The loop counts of bk_loop_counts as a straight line in BK: a step issues `fixed`
    instructions whatever its depth (`bar` of them barriers) and `per_bk` more per unit of
    BK, of which `ffma_per_bk` FFMA. Raises if the counts are not on one line."""
    rows = bk_loop_counts(tile, bks)
    (b0, i0), (b1, i1) = ((r["BK"], r["loop instructions"]) for r in (rows[0], rows[-1]))
    per_bk = (i1 - i0) / (b1 - b0)
    fixed = i0 - per_bk * b0
    if any(abs(fixed + per_bk * r["BK"] - r["loop instructions"]) > 1e-9 for r in rows):
        raise ValueError("the loop's instructions are not a straight line in BK")
    bars = {r["BAR"] for r in rows}
    if len(bars) != 1:
        raise ValueError("the barriers per step change with BK")
    return {"rows": rows, "fixed": fixed, "bar": bars.pop(), "per_bk": per_bk,
            "ffma_per_bk": rows[0]["FFMA"] / rows[0]["BK"]}


def bk_instructions_line(tile=None) -> str:
    """The static account of the clean pair's instruction ratio: the loop counts at
    BK = 8, 16, 32 split into a fixed part per step and a part per unit of BK; the
    instructions BK = 8 and BK = 16 issue for the same FFMA, and their ratio (the one the
    profiler counts); and the fixed part in FFMA of issue, beside the fixed cost the
    sweep's fit gives."""
    c = bk_instructions(tile)
    n = {r["BK"]: r["loop instructions"] for r in c["rows"]}
    ffma = {r["BK"]: r["FFMA"] for r in c["rows"]}
    steps = ffma[16] // ffma[8]
    per_ffma = c["per_bk"] / c["ffma_per_bk"]
    fixed_ffma = c["fixed"] / per_ffma
    f, _ = bk_model()
    bks = ", ".join(str(b) for b in sorted(n))
    return (f"The loop counts of the first table (compiled here), split: a step issues "
            f"{c['fixed']:.0f} instructions whatever its depth ({c['bar']} BAR and "
            f"{c['fixed'] - c['bar']:.0f} others) plus {c['per_bk']:.2f} per unit of BK, "
            f"exactly at BK = {bks}.\n"
            f"For the same {ffma[16]} FFMA, BK = 8 issues {steps} x {n[8]} = {steps * n[8]} "
            f"loop instructions and BK = 16 {n[16]}: {steps * n[8] / n[16]:.3f}x.\n"
            f"The fixed {c['fixed']:.0f} instructions = issue slots of about "
            f"{fixed_ffma:.0f} FFMA with their share of loads and addresses ({per_ffma:.2f} "
            f"instructions each); the fit to the sweep's pairs put the fixed cost per step at "
            f"{f} FFMA.")


def pair_counts(pairs, tie: float = 0.005) -> str:
    """bk_scatter's pairs in words: how many BK = 16 wins, ties (within `tie`, relative)
    or loses; then per TM the range and median of the gains."""
    import statistics
    r = [g16 / g8 for _, g8, g16 in pairs]
    faster = sum(x > 1 + tie for x in r)
    slower = sum(x < 1 - tie for x in r)
    ties = len(r) - faster - slower
    lines = [f"BK = 16 is faster in {faster} of {len(r)} pairs, slower in {slower}, "
             f"level (within {tie:.1%}) in {ties}"]
    for tm in sorted({c["TM"] for c, _, _ in pairs}):
        g = sorted(g16 / g8 for c, g8, g16 in pairs if c["TM"] == tm)
        lines.append(f"TM = {tm:2d}: {len(g)} pairs, BK=16 / BK=8 from {g[0]:.2f} to "
                     f"{g[-1]:.2f}, median {statistics.median(g):.2f}")
    return "\n".join(lines)


def bk_pair_lines(tiles=({"BM": 64, "BN": 32, "TM": 2}, {"BM": 64, "BN": 64, "TM": 4}),
                  size: int = 2048) -> str:
    """Each tile (BM, BN, TM; default: the 2- and 4-output tiles of the study ch05_outputs)
    at BK = 8 and BK = 16: registers (compiled here), blocks and warps per SM, the sweep's
    rate at size^3, and at BK = 16 its rate over BK = 8's. A pair that keeps its warps
    isolates the work per step; a pair whose warps change does not."""
    from gemm_kernels.measure import tradeoff
    rate = {tuple(sorted(c.items())): g for c, g in tradeoff.ranked("tile_1d", size)}
    lines = []
    for t in tiles:
        lines.append(f"{t['TM']} outputs per thread, {t['BM']} x {t['BN']} tile, {size}^3:")
        g = {}
        for bk in (8, 16):
            p = {**t, "BK": bk}
            occ = analysis.kernel_occupancy("tile_1d", p)
            g[bk] = rate[tuple(sorted(p.items()))]
            lines.append(f"  BK = {bk:<2d}: {occ.registers_per_thread} registers, "
                         f"{occ.blocks_per_sm} block{'s' if occ.blocks_per_sm > 1 else ' '} "
                         f"({occ.warps_per_sm} warps) per SM, {g[bk]:,.0f} GFLOP/s"
                         + (f" ({g[16] / g[8]:.2f}x)" if bk == 16 else ""))
    return "\n".join(lines)


def register_cap_line(p=None) -> str:
    """A configuration the registry refuses for its registers, compiled anyway (without
    the constraints): the cap its block size leaves a thread, and what ptxas made of it.
    Default: BM = BN = 128, BK = 8, TM = 16, 1,024 threads."""
    from gemm_kernels.core import compiler
    p = p or {"BM": 128, "BN": 128, "BK": 8, "TM": 16}
    p0, wide = _any_bk(p, (p["BK"],))
    threads = p0["BM"] * p0["BN"] // p0["TM"]
    res = compiler.resources(wide, p0)
    return (f"BM = {p0['BM']}, BN = {p0['BN']}, BK = {p0['BK']}, TM = {p0['TM']}: "
            f"{threads:,} threads per block leave a thread at most "
            f"{min(255, 65536 // threads)} registers; compiled anyway ({res['arch']}): "
            f"{res['registers']} registers, {res['spill_stores']} bytes of spill stores and "
            f"{res['spill_loads']} of spill loads per thread")


def check_prediction(bk: int | None, size: int = 2048) -> str:
    """The check of the chapter's 'Predict, then check' at the default tile's BM, BN, TM:
    for the chosen BK, then the other one (so that the student compares them in one
    output), per step the barriers and FFMA of the compiled loop (no GPU needed), the
    tile's own rate and the best and median rates the sweep measured at size^3 over the
    tiles with that BK. With no BK chosen it says what to do, so that the notebook as
    given shows no answer."""
    if bk not in (8, 16):
        return "write your prediction down, then set BK to 8 or 16 and run this cell"
    return (_prediction_lines(bk, size) + "\n\nthe other depth, for comparison:\n"
            + _prediction_lines(24 - bk, size) + "\n\n" + _per_step_line())


def _per_step_line() -> str:
    """check_prediction's closing line: what a step costs whatever its depth, and over how
    many FFMA each depth spreads it (the default tile's compiled loop)."""
    counts = {}
    for bk in (8, 16):
        p0, wide = _any_bk(None, (bk,))
        counts[bk] = analysis.summary(wide, {**p0, "BK": bk})["loop_histogram"]
    bars = {h.get("BAR", 0) for h in counts.values()}
    if len(bars) != 1:
        return "the two depths meet different numbers of barriers per step"
    return (f"every step meets {bars.pop()} barriers whatever its depth: BK = 16 "
            f"spreads them over {counts[16]['FFMA']} FFMA per thread, BK = 8 over "
            f"{counts[8]['FFMA']}")


def _prediction_lines(bk: int, size: int) -> str:
    """check_prediction's lines for one BK."""
    import statistics
    from gemm_kernels.measure import lookup, tradeoff
    p0, wide = _any_bk(None, (bk,))
    h = analysis.summary(wide, {**p0, "BK": bk})["loop_histogram"]
    rates = [g for _, g in tradeoff.ranked("tile_1d", size, fixed={"BK": bk})]
    line = (f"BK = {bk}, BM = {p0['BM']}, BN = {p0['BN']}, TM = {p0['TM']}: per step "
            f"{h.get('BAR', 0)} barriers for {h.get('FFMA', 0)} FFMA per thread (SASS)")
    if not rates:
        return line + f"\nno tile with BK = {bk} measured at {size}^3"
    # The same tile at this BK is the clean comparison; the sweep's best and median mix
    # every other tunable in.
    try:
        this = lookup.recorded("tile_1d", (size,) * 3, {**p0, "BK": bk})["gflops"]["median"]
        line += f"\nthis tile at {size}^3: {this:,.0f} GFLOP/s"
    except LookupError:
        line += f"\nthis tile was not measured at {size}^3"
    return line + (f"\nthe sweep at {size}^3, {len(rates)} tiles with BK = {bk}: best "
                   f"{max(rates):,.0f} GFLOP/s, median {statistics.median(rates):,.0f}")


DEPTH_STALLS = "ch05_depth_stalls"
_STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
DEPTH_COLUMNS = {
    "time, ms": ("gpu__time_duration.sum", 1e6),
    "instructions (billions)": ("smsp__inst_executed.sum", 1e9),
    "schedulers issue, % of cycles": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "warps active %": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "barrier": _STALL.format("barrier"),
    "long scoreboard": _STALL.format("long_scoreboard"),
    "short scoreboard": _STALL.format("short_scoreboard"),
    "mio throttle": _STALL.format("mio_throttle"),
    "FMA pipe busy %": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
}


def _all_waits(name: str) -> dict:
    """Per step label of profiled study `name`: the sum of a warp's waits per issued
    instruction over every stall reason but "selected" (the cycle it issues), as
    outputs_stalls counts them."""
    from gemm_kernels.measure import studies
    from gemm_kernels.notebook import evidence
    return {s.label: sum(v for k, v in evidence.stall_reasons(r).items() if k != "selected")
            for s, r in studies.results(name) if r}


_DEPTH_REASONS = ("barrier", "long scoreboard", "short scoreboard", "mio throttle")


def depth_stalls(shares: bool = False) -> Table:
    """The clean BK pair under Nsight Compute (study ch05_depth_stalls: the default tile,
    BM = BN = 64, TM = 16, at BK = 8 and 16, profiled in one run): the time, the
    instructions, the share of cycles the schedulers issue, the warp slots in use, the
    waits per issued instruction (cycles) and the FMA pipe. Printed first, the time of
    BK = 8 over BK = 16 split into the ratio of instructions times the ratio of cycles per
    instruction (1 / issue share), as chapter 03's solution splits BLOCK.

    `shares`: also the sum of all waits per instruction, each wait shown with its share of
    that sum, and a printed line comparing the change of each wait with the change that
    fewer warps at the same issue rate imply: at a fixed issue share, a warp's cycles per
    instruction scale with the warps resident, so only a wait that moves by more than
    the warps do says something about the deeper step."""
    from gemm_kernels.notebook import evidence
    table = evidence.counters(DEPTH_STALLS, DEPTH_COLUMNS)
    total = _all_waits(DEPTH_STALLS)
    got = {r["step"]: r for r in table if r["time, ms"] is not None}
    if {"BK = 8", "BK = 16"} <= set(got):
        a, b = got["BK = 8"], got["BK = 16"]
        inst = a["instructions (billions)"] / b["instructions (billions)"]
        cpi = b["schedulers issue, % of cycles"] / a["schedulers issue, % of cycles"]
        # three decimals: at two, 1.04 x 1.00 = 1.03 reads as an arithmetic slip
        print(f"BK = 8 against BK = 16: {inst:.3f}x the instructions x {cpi:.3f}x the SM "
              f"cycles per issued instruction = {inst * cpi:.3f}x the time (measured: "
              f"{a['time, ms'] / b['time, ms']:.3f}x)")
        if shares:
            warps = b["warps active %"] / a["warps active %"] - 1
            every = total["BK = 16"] / total["BK = 8"] - 1
            moved = {k: b[k] / a[k] - 1 for k in _DEPTH_REASONS}
            more = [k for k in moved if moved[k] < every - 0.05]
            less = [k for k in moved if every - 0.05 <= moved[k] <= 0]
            rose = [k for k in moved if moved[k] > 0]
            said = "; ".join(f"{head}: " + ", ".join(f"{k} {100 * moved[k]:+.0f}%" for k in ks)
                             for head, ks in (("fell by more", more), ("fell by less", less),
                                              ("rose", rose)) if ks)
            print(f"warps active, BK = 16 against BK = 8: {100 * warps:+.0f}%, at the same "
                  f"issue share, so a warp's cycles per instruction must change by about as "
                  f"much; all waits changed by {100 * every:+.0f}%. Against that, {said}")
        print(evidence.profiled_against_timed(DEPTH_STALLS))
    else:
        print(f"study {DEPTH_STALLS}: not recorded")
    for r in table:     # one decimal for every time: "8" next to "8.3" reads as a slip
        if r["time, ms"] is not None:
            r["time, ms"] = f"{r['time, ms']:.1f}"
            # two decimals: at one, 3.9 / 3.7 reads as 1.05, not the 1.036 printed above
            r["instructions (billions)"] = f"{r['instructions (billions)']:.2f}"
    if shares:
        for r in table:
            t = total.get(r["step"])
            if t and r["time, ms"] is not None:
                for k in _DEPTH_REASONS:
                    r[k] = f"{r[k]:.2f} ({100 * r[k] / t:.0f}%)"
                r["all waits"] = f"{t:.2f}"
        cols = list(table.columns)
        cols.insert(cols.index("barrier"), "all waits")
        table.columns = cols
    table.title = (f"tile_1d, BM = BN = 64, TM = 16, at {_shape(DEPTH_STALLS)} under Nsight "
                   "Compute, both depths in one run: each warp's waits, in its cycles per issued "
                   "instruction")
    return table


def _shape(study: str) -> str:
    from gemm_kernels.measure import studies
    return "x".join(map(str, studies.get(study).shapes[0]))


def bk_model(size: int = 2048, fixed=range(0, 2001)):
    """A one-number model of the gain of BK = 16 over BK = 8, against the sweep's pairs.
    A step costs a thread a fixed time F (the tile copy's wait, the two barriers) plus
    its n FFMA at BK = 8 (n = 8 TM), 2n at BK = 16; in units of one FFMA's time,
    f = F / w, so rate(16) / rate(8) = 2 (f + n) / (f + 2 n). The one f that fits the
    pairs best (least squares over `fixed`), and per TM: the pairs, the measured median
    gain and range, the fitted model's gain and the residual (median over model). The
    constant comes from the same pairs it is shown against: a description with one free
    number, not an independent test. Returns (f, Table)."""
    import statistics
    pairs = bk_pairs(size)

    def gain(f, tm):
        n = 8 * tm
        return 2 * (f + n) / (f + 2 * n)

    f = min(fixed, key=lambda f: sum((gain(f, c["TM"]) - g16 / g8) ** 2
                                     for c, g8, g16 in pairs))
    rows = []
    for tm in sorted({c["TM"] for c, _, _ in pairs}):
        r = sorted(g16 / g8 for c, g8, g16 in pairs if c["TM"] == tm)
        rows.append({"TM": tm, "FFMA per thread per step at BK = 8": 8 * tm,
                     "pairs": len(r), "measured gain, median": f"{statistics.median(r):.3f}x",
                     "measured range": f"{r[0]:.2f}x .. {r[-1]:.2f}x",
                     "model": f"{gain(f, tm):.3f}x",
                     "median / model": f"{statistics.median(r) / gain(f, tm):.2f}"})
    return f, Table(rows, list(rows[0]), title=f"BK = 16 over BK = 8 at {size}^3: the sweep's "
                    f"pairs against the model with its one constant fitted to them, a fixed "
                    f"cost per step of {f} FFMA per thread (a fit, not a prediction)")


def bk_table(tile=None, bks=(8, 16, 32)) -> Table:
    """tile_1d at one BM, BN, TM (default: the registry default's) for each BK, compiled
    here: registers, spills, shared memory, blocks and warps per SM, FFMA per barrier,
    and the rate at 2048^3 where one was measured. BK = 32 is outside the kernel's
    tunables; it is compiled from the same source, without the registry's constraints."""
    from gemm_kernels.core import compiler
    from gemm_kernels.measure import lookup
    p0, wide = _any_bk(tile, bks)
    rows = []
    for bk in bks:
        p = {**p0, "BK": bk}
        res = compiler.resources(wide, p)
        occ = analysis.occupancy(p["BM"] * p["BN"] // p["TM"], res["registers"], res["smem_bytes"])
        h = analysis.summary(wide, p)["loop_histogram"]
        tunable = bk in next(q.values for q in get("tile_1d").params if q.name == "BK")
        try:
            g = lookup.recorded("tile_1d", (2048,) * 3, p)["gflops"]["median"]
        except (LookupError, ValueError):
            g = None if tunable else "not a tunable, not timed"
        rows.append({"BK": bk, "registers": res["registers"], "spills (bytes)": res["spill_stores"],
                     "shared memory (bytes)": res["smem_bytes"],
                     "blocks x warps per SM": f"{occ.blocks_per_sm} x {occ.threads_per_block // 32}"
                                              f" = {occ.warps_per_sm}",
                     "FFMA per barrier": h["FFMA"] // max(1, h.get("BAR", 1)),
                     "GFLOP/s at 2048^3": g if g is not None else "not measured"})
    return Table(rows, list(rows[0]), title=f"tile_1d, BM = {p0['BM']}, BN = {p0['BN']}, "
                 f"TM = {p0['TM']}: ptxas -v and nvdisasm here (sm_90)")


def bk_pairs(size: int = 2048) -> list[tuple[dict, float, float]]:
    """Every pair of measured configurations that differ only in BK: (the BK = 8
    configuration, its GFLOP/s, the GFLOP/s at BK = 16), from the sweep at size^3."""
    from gemm_kernels.measure import tradeoff
    rate = {tuple(sorted(c.items())): g for c, g in tradeoff.ranked("tile_1d", size)}
    pairs = []
    for c, g8 in tradeoff.ranked("tile_1d", size, fixed={"BK": 8}):
        g16 = rate.get(tuple(sorted({**c, "BK": 16}.items())))
        if g16:
            pairs.append((c, g8, g16))
    return pairs


def bk_scatter(size: int = 2048, ax=None):
    """Every pair of measured configurations that differ only in BK: the rate at BK = 16
    against the rate at BK = 8, coloured by TM, with the diagonal (no gain) drawn."""
    from gemm_kernels.core.style import series_styles
    from gemm_kernels.measure import records
    plt = _plt()
    pairs = bk_pairs(size)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 5.6))
    tms = sorted({c["TM"] for c, _, _ in pairs})
    for (colour, marker), tm in zip(series_styles(len(tms)), tms):
        pts = [(g8 / 1e3, g16 / 1e3) for c, g8, g16 in pairs if c["TM"] == tm]
        ax.scatter(*zip(*pts), color=colour, marker=marker, s=45, label=f"TM = {tm}", zorder=3)
    lo = min(min(g8, g16) for _, g8, g16 in pairs) / 1e3 * 0.95
    hi = max(max(g8, g16) for _, g8, g16 in pairs) / 1e3 * 1.03
    ax.plot([lo, hi], [lo, hi], color="0.5", lw=1, ls="--", label="no gain")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel(f"TFLOP/s with BK = 8 ({size}^3)")
    ax.set_ylabel(f"TFLOP/s with BK = 16 ({size}^3)")
    ax.legend(fontsize=SMALL, loc="lower right")
    ax.set_title(f"{len(pairs)} pairs differing only in BK\n({records.recording_label()})",
                 fontsize=TEXT)
    return ax, pairs


# ------------------------------------------------------------------ printed lines

def ladder_by_kernel(table) -> Table:
    """The ladder's rows (ladder.compare) grouped by kernel: each chapter's sizes together,
    cuBLAS last, so that one kernel reads down a column without the cuBLAS rows of every
    size between its rows. The cuBLAS rows are named as the text names cuBLAS, with no
    chapter (the ladder files them under "00")."""
    rows = sorted(table, key=lambda r: (r["chapter"] == "00", str(r["chapter"]),
                                        r["kernel"], r["size"]))
    rows = [{**r, "chapter": "-", "kernel": "cuBLAS"} if r["kernel"] == "cublas" else r
            for r in rows]
    return Table(rows, table.columns, title=table.title)


def rates_by_size(params=None) -> str:
    """One tile's measured rate at the chapter's two sizes, with what each size is used
    for: 2048^3 for the sweep and the exercise, 4096^3 for the bound and the
    profiles."""
    from gemm_kernels.measure import lookup
    p = params or get("tile_1d").defaults()
    uses = {2048: "the sweep and the exercise",
            4096: "the bound and the profiles"}
    parts = []
    for size, use in uses.items():
        g = lookup.measure_or_lookup("tile_1d", (size,) * 3, p)["gflops"]["median"]
        parts.append(f"{g:,.0f} GFLOP/s at {size}^3 ({use})")
    name = " ".join(f"{k}={v}" for k, v in p.items())
    return f"{name} runs at " + "; ".join(parts)


def shares_4096() -> str:
    """The K4 tile and the default at 4096^3: rate, share of the cuBLAS run timed beside
    it, the ratio to chapter 03's kernel and the share of the FP32 peak of the GPU the
    numbers describe; then chapter 03's kernel's own share of cuBLAS; then how that peak
    is reckoned."""
    from gemm_kernels.core import device
    from gemm_kernels.measure import ladder, records
    props = records.described_device()
    peak = device.peak_fp32_gflops(props)
    t03 = ladder.share("smem_tiled", 4096)
    lines = []
    for label, p in (("K4 tile", K4), ("default", get("tile_1d").defaults())):
        s = ladder.share("tile_1d", 4096, p)
        if not s:
            lines.append(f"{label}: not measured")
            continue
        line = f"tile_1d {label:8s} at 4096^3: {s['GFLOP/s']:,.0f} GFLOP/s"
        if s["% of cuBLAS"] is not None:
            line += f" = {s['% of cuBLAS']:.0f}% of cuBLAS"
        if t03:
            line += f", {s['GFLOP/s'] / t03['GFLOP/s']:.1f}x chapter 03's kernel"
        if peak:
            line += f", {s['GFLOP/s'] / peak:.0%} of the FP32 peak"
        lines.append(line)
    # chapter 03's own share of cuBLAS: the ratios above are taken against it, so a
    # comparison of ratios with another GPU's needs it too
    if t03 and t03["% of cuBLAS"] is not None:
        lines.append(f"smem_tiled (chapter 03) at 4096^3: {t03['GFLOP/s']:,.0f} GFLOP/s = "
                     f"{t03['% of cuBLAS']:.0f}% of cuBLAS")
    if peak:
        lanes = props.get("fp32_lanes_per_sm") or device.fp32_lanes(props["compute_capability"])
        lines.append(f"FP32 peak of the {props['name']}: {props['sm_count']} SMs x {lanes} "
                     f"FMA lanes x 2 flops x {props['sm_clock_mhz']:,.0f} MHz = "
                     f"{peak:,.0f} GFLOP/s")
    return "\n".join(lines)


def boehm_line(size: int = 4096) -> str:
    """The step from the shared-memory kernel to the kernel-4 tile, as a ratio of shares of
    cuBLAS, here (chapter 03's kernel to this chapter's kernel-4 tile, at size^3) and in
    Boehm's results table (his kernels 3 and 4): a ratio of shares lets two GPUs be set
    side by side."""
    from gemm_kernels.measure import ladder, records
    k4, t03 = ladder.share("tile_1d", size, K4), ladder.share("smem_tiled", size)
    # his README prints the shares to 0.1%: the ratio is taken of the shares as printed
    b4, b3 = (round(100 * BOEHM[k] / BOEHM["cuBLAS"], 1) for k in ("kernel 4", "kernel 3"))
    here = ("not measured" if not (k4 and t03) else
            f"{k4['% of cuBLAS']:.0f}% / {t03['% of cuBLAS']:.0f}% = "
            f"{k4['% of cuBLAS'] / t03['% of cuBLAS']:.1f}x")
    line = (f"kernel-4 tile over the shared-memory kernel, in shares of cuBLAS: here "
            f"({records.described_device()['name']}, {size}^3) {here}; Boehm "
            f"({A6000['name']}, {BOEHM_SIZE}^2) {b4:.1f}% / {b3:.1f}% = {b4 / b3:.1f}x")
    if not k4:
        return line
    # the same step over his base: how much of the gap is this course's stronger base
    return (line + f"\nthe kernel-4 tile here over Boehm's kernel 3: {k4['% of cuBLAS']:.0f}% / "
            f"{b3:.1f}% = {k4['% of cuBLAS'] / b3:.1f}x")


COUNTERS = (("ld wf", "load wavefronts"), ("ld conf", "load bank conflicts"),
            ("st wf", "store wavefronts (the tile copies)"),
            ("st conf", "store bank conflicts (the tile copies)"))


def counter_table(params=None) -> Table:
    """The default tile (or `params`) in a 1024^3 launch: shared-memory wavefronts and
    bank conflicts of the loads and of the tile copies' stores, one counter per row, the
    bank model next to Nsight Compute. Printed first: how far the two are apart, and
    what the stores' extra wavefronts weigh in the launch's total."""
    from gemm_kernels.memory import ch05_06_thread_tiles
    p = params or get("tile_1d").defaults()
    r = ch05_06_thread_tiles.counter_table([("tile_1d", p)])
    row = r[0]
    rows = [{"counter": label, "bank model": row[f"{k} model"],
             "Nsight Compute": row[f"{k} ncu"]} for k, label in COUNTERS]
    ld_m, ld_n, st_m, st_n = (row[k] for k in ("ld wf model", "ld wf ncu",
                                               "st wf model", "st wf ncu"))
    if ld_n and st_n:
        extra = st_n - st_m
        print(f"loads: model and Nsight Compute {abs(ld_n - ld_m) / ld_m:.2%} apart; stores: "
              f"Nsight Compute counts {extra:,} wavefronts more than the model, "
              f"{extra / st_m:.0%} of the stores and {extra / (ld_m + st_m):.1%} of all "
              "shared-memory wavefronts of the launch")
    return Table(rows, list(rows[0]), title=f"{row['params']}, {r.title}")


def load_wavefronts_line() -> str:
    """The default tile's load wavefronts in a 1024^3 launch: model and Nsight Compute."""
    from gemm_kernels.memory import ch05_06_thread_tiles
    row = ch05_06_thread_tiles.counter_table([("tile_1d", get("tile_1d").defaults())])[0]
    model, ncu = row["ld wf model"], row["ld wf ncu"]
    if not ncu:
        return "not profiled here"
    return (f"load wavefronts, 1024^3: model {model:,}, Nsight Compute {ncu:,} "
            f"({abs(ncu - model) / model:.2%} apart)")
