"""Chapter 07's pictures: where each thread's float4 goes in shared memory, what a
thread reads back at one k, and the two chapters' tunables on one colour scale.

`tile_stores` draws the first rows of the A tile as the threads fetch it (float4 f = t
of thread t: row m = f / (BK/4), k = 4 * (f % (BK/4))), the same float4s in the
row-major tile `As[m][k]` (chapter 06's layout, kept by `float4_a_rows`: one STS.128
each) and in the transposed tile `As[k][m]` (`float4`: four STS.32, one per row k), and
the B tile, stored whole in both kernels. The index formulas are the kernels' (07_float4.cu,
07_float4_a_rows.cu).

`tile_reads` draws the words of the A tile that thread 0 reads from shared memory: at
one k from the transposed tile (two LDS.128), and from the row-major tile the LDS.128
the compiler makes along k (eight, each holding four values of k).

`tunables` draws the best recorded rate per (TM, TN) of chapter 06's `tile_2d_reg` and
of `float4`, each cell with the blocks per SM of its configuration's timed binary.
"""
from __future__ import annotations

from gemm_kernels.core import analysis, style
from gemm_kernels.core.kernels import KERNELS

# Text sizes in points, as in `pictures`: nothing smaller than SMALL.
SMALL, TEXT = 9, 10
_EDGE, _EMPTY = "0.35", "0.93"


def _plt():
    import matplotlib.pyplot as plt
    return plt


def _tile(BM: int, BN: int, BK: int, TM: int, TN: int) -> dict:
    p = {"BM": BM, "BN": BN, "BK": BK, "TM": TM, "TN": TN}
    bad = KERNELS["float4"].problems(p)
    if bad:
        raise ValueError("float4: " + "; ".join(bad))
    return {**p, "NT": (BM // TM) * (BN // TN)}


def a_fetch(t: int, BK: int = 8) -> tuple[int, int]:
    """(m, k): the row of the A tile and the first of the four k of the float4 that
    thread t fetches first (float4 number f = t; the kernels' m = f / (BK/4),
    k = f % (BK/4) * 4)."""
    return t // (BK // 4), t % (BK // 4) * 4


def b_fetch(t: int, BN: int = 128) -> tuple[int, int]:
    """(k, n): the row of the B tile and the first of the four n of thread t's float4."""
    return t // (BN // 4), t % (BN // 4) * 4


def _colours(threads):
    """One colour per thread (tab20, in the order given)."""
    import matplotlib
    tab20 = matplotlib.colormaps["tab20"].colors
    order = tab20[0::2] + tab20[1::2]
    return {t: order[i % len(order)] for i, t in enumerate(threads)}


def _cell(ax, x, y, colour, text=None, size=SMALL, lw=0.6):
    from matplotlib.patches import Rectangle
    ax.add_patch(Rectangle((x, y), 1, 1, facecolor=colour, edgecolor=_EDGE, lw=lw))
    if text:
        from matplotlib.colors import to_rgba
        ax.text(x + 0.5, y + 0.5, text, ha="center", va="center", fontsize=size,
                color=style.text_colour(to_rgba(colour)))


def _outline(ax, x, y, w, h, lw=2.2, colour="k"):
    from matplotlib.patches import Rectangle
    ax.add_patch(Rectangle((x, y), w, h, fill=False, edgecolor=colour, lw=lw))


def _grid_axes(ax, cols, rows, xlabels, ylabels, xname, yname):
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.set_xticks([c + 0.5 for c in range(cols)], xlabels, fontsize=SMALL)
    ax.set_yticks([r + 0.5 for r in range(rows)], ylabels, fontsize=SMALL)
    ax.set_xlabel(xname, fontsize=TEXT)
    ax.set_ylabel(yname, fontsize=TEXT)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)


def tile_stores(BK: int = 8, rows: int = 8, BM: int = 128, BN: int = 128, TM: int = 8,
                TN: int = 8, b_tile: bool = True, fetched: bool = True):
    """The first `rows` rows of the A tile, as fetched and as stored row-major and
    transposed, and (`b_tile`) the first float4s of the B tile, each float4 in its
    thread's colour and outlined. With `fetched=False` only the transposed tile, larger:
    its labels name each value's thread already. Returns the Figure."""
    g = _tile(BM, BN, BK, TM, TN)
    per_row = BK // 4                        # float4s per row of the A tile
    if not 1 <= rows <= BM or (rows * per_row) > g["NT"]:
        raise ValueError(f"rows must be 1..{min(BM, g['NT'] // per_row)}, got {rows}")
    a_threads = list(range(rows * per_row))
    b_cols = 16                              # n shown of the B tile: four float4s
    b_threads = [k * (BN // 4) + j for k in range(2) for j in range(b_cols // 4)]
    colour = _colours(a_threads + [t for t in b_threads if t not in a_threads])
    plt = _plt()
    # Every cell the same size: the three A panels side by side, BK + BK + rows cells.
    third = max(rows, 3 * BK // 4)           # the transposed panel: room for its labels
    cell = 11.5 / (2 * BK + third) if fetched else 0.32
    top = max(rows, BK) * cell
    bottom = 2.4 if b_tile else 0
    height = top + 3 + bottom
    fig = plt.figure(figsize=(14 if fetched else 8, height))
    gs = fig.add_gridspec(2 if b_tile else 1, 3 if fetched else 1,
                          width_ratios=[BK, BK, third] if fetched else None,
                          height_ratios=[top + 1.6, bottom] if b_tile else None,
                          hspace=0.35, wspace=0.3, top=1 - (0.8 if fetched else 1.1) / height,
                          bottom=(0.8 if b_tile else 1.4) / height,
                          left=0.06 if fetched else 0.3, right=0.98 if fetched else 0.8)
    ax_g, ax_r, ax_t = ((fig.add_subplot(gs[0, i]) for i in range(3)) if fetched
                        else (None, None, fig.add_subplot(gs[0, 0])))
    ax_b = fig.add_subplot(gs[1, :]) if b_tile else None

    # (a) A in global memory and (b) the row-major tile: the same picture, row m holds
    # k = 0..BK-1, each float4 is four adjacent words.
    for ax, title in ((ax_g, "A in global memory: rows of the tile,\n"
                             "one float4 (16 bytes) per thread"),
                      (ax_r, "row-major tile As[m][k] (chapter 06,\n"
                             "float4_a_rows): 1 STS.128 per float4")):
        if ax is None:
            continue
        for t in a_threads:
            m, k = a_fetch(t, BK)
            for j in range(4):
                _cell(ax, k + j, m, colour[t], f"t{t}" if j == 0 else None)
            _outline(ax, k, m, 4, 1)
        _grid_axes(ax, BK, rows, list(range(BK)), [f"m={m}" for m in range(rows)],
                   "k", "")
        ax.set_title(title, fontsize=TEXT)

    # (c) the transposed tile: thread t's float4 goes down column m, rows k..k+3, one
    # STS.32 per row; rows k and k + 4 are written by the same store number.
    for t in a_threads:
        m, k = a_fetch(t, BK)
        for j in range(4):
            _cell(ax_t, m, k + j, colour[t], f"t{t}.{'xyzw'[j]}", size=SMALL - 1)
        _outline(ax_t, m, k, 1, 4)
    # store 0 of the threads that fetched row 0: column 0, rows 0, 4, ..: one bank
    from gemm_kernels.memory import banks, ch07_09_patterns
    firsts = [t for t in a_threads if a_fetch(t, BK)[0] == 0]
    for t in firsts:
        _outline(ax_t, 0, a_fetch(t, BK)[1], 1, 1, lw=2.6, colour="crimson")
    wf = banks.analyse(ch07_09_patterns.a_store(BM=BM, BK=BK, PAD=0, s=0)).wavefronts
    _grid_axes(ax_t, rows, BK, list(range(rows)),
               [f"k={k} (store {k % 4})" for k in range(BK)], "m", "")
    if rows < BK:   # few columns: cells twice as wide as tall, so that "t10.x" fits in one
        ax_t.set_aspect(0.5)
    ax_t.set_title("transposed tile As[k][m] (this chapter):\n"
                   "4 STS.32 per float4, one per row k", fontsize=TEXT)
    who = ", ".join(f"t{t}" for t in firsts[:-1]) + f" and t{firsts[-1]}"
    times = {2: "twice", 4: "four times"}.get(len(firsts), f"{len(firsts)} times")
    ax_t.text(1, -0.11 if b_tile else -0.085,
              f"A row of As is {BM} words, so column m is bank m % 32.\n"
              f"Red: store 0 of {who} hits bank 0\n{times} (different words): "
              f"{wf} wavefronts for the warp.", fontsize=SMALL, va="top", ha="right",
              color="crimson", transform=ax_t.transAxes)

    # (d) the B tile, both kernels: float4 f = t of row k goes in whole.
    for t in (b_threads if b_tile else []):
        k, n = b_fetch(t, BN)
        for j in range(4):
            _cell(ax_b, n + j, k, colour[t], f"t{t}" if j == 0 else None)
        _outline(ax_b, n, k, 4, 1)
    if b_tile:
        _grid_axes(ax_b, b_cols, 2, list(range(b_cols)), [f"k={k}" for k in range(2)],
                   "n", "")
        ax_b.set_title(f"B tile Bs[k][n], both kernels: a float4 of a row of B goes in "
                       f"whole, 1 STS.128 (threads 0-{BN // 4 - 1} fill row k = 0)",
                       fontsize=TEXT)

    # float4s each thread stores per tile: at BK = 16 the A tile has two per thread
    # (the second of thread t at row BM/2 + t/4), so the title must not say "one"
    def each(n: int) -> str:
        return {1: "one", 2: "two", 4: "four"}.get(n, str(n)) + " float4" + ("s" if n > 1 else "")
    a_each, b_each = BM * BK // 4 // g["NT"], BK * BN // 4 // g["NT"]
    fig.suptitle(f"Who stores what: the first {rows} rows of the {BM} x {BK} A tile"
                 + (" " if fetched else "\n") + f"(threads t0-t{a_threads[-1]}; {g['NT']} threads, each {each(a_each)} of A"
                 + (f" and {each(b_each)} of B" if b_tile else "") + " per tile)",
                 fontsize=TEXT + 1)
    return fig


def tile_reads(BK: int = 8, BM: int = 128, BN: int = 128, TM: int = 8, TN: int = 8,
               thread: int = 0):
    """The A words `thread` reads from shared memory: from the row-major tile, the
    LDS.128 the compiler makes along k (each four values of k of one row, all of them
    held until their k comes); from the transposed tile, the two LDS.128 of one k.
    Returns the Figure."""
    g = _tile(BM, BN, BK, TM, TN)
    if not 0 <= thread < g["NT"]:
        raise ValueError(f"thread must be 0..{g['NT'] - 1}, got {thread}")
    tr = thread // (BN // TN)
    rows = range(tr * TM, tr * TM + TM)          # the thread's rows of the tile
    shown = rows
    now, held, other = "#1f77b4", "#9ecae1", _EMPTY
    plt = _plt()
    fig, (ax_r, ax_t) = plt.subplots(1, 2, figsize=(11, 5.6),
                                     gridspec_kw={"width_ratios": [BK, len(shown)]})
    # row-major: rows m of the picture, k across; LDS.128 of As[m][0..3]
    for i, m in enumerate(shown):
        for k in range(BK):
            mine = m in rows and k < 4
            _cell(ax_r, k, i, now if mine and k == 0 else held if mine else other)
        if m in rows:
            _outline(ax_r, 0, i, 4, 1)
    _grid_axes(ax_r, BK, len(shown), list(range(BK)), [f"m={m}" for m in shown], "k", "")
    ax_r.set_title(f"row-major As[m][k]: {TM} LDS.128 along k\n"
                   f"give thread {thread} its {TM} values at k = 0\n"
                   f"and hold {TM * 3} more for k = 1..3", fontsize=TEXT)
    # transposed: rows k, columns m; LDS.128 of As[0][m..m+3]
    for k in range(BK):
        for j, m in enumerate(shown):
            mine = k == 0 and m in rows
            _cell(ax_t, j, k, now if mine else other)
    for h in range(TM // 4):
        _outline(ax_t, h * 4, 0, 4, 1)
    _grid_axes(ax_t, len(shown), BK, [str(m) for m in shown], [f"k={k}" for k in range(BK)],
               "m", "")
    ax_t.set_title(f"transposed As[k][m]: {TM // 4} LDS.128 at k = 0\n"
                   f"give thread {thread} its {TM} values; nothing held\n"
                   f"for later k", fontsize=TEXT)
    from matplotlib.patches import Patch
    fig.legend(handles=[Patch(facecolor=now, edgecolor=_EDGE, label="read and used at k = 0"),
                        Patch(facecolor=held, edgecolor=_EDGE,
                              label="read now, held in registers until k = 1..3"),
                        Patch(facecolor="white", edgecolor="k", lw=2, label="one LDS.128")],
               loc="lower center", ncol=3, fontsize=TEXT, frameon=False)
    fig.suptitle(f"What thread {thread} (rows {rows[0]}-{rows[-1]} of the tile) reads from "
                 f"the A tile: both layouts take {TM * BK // 4} LDS.128 per tile of "
                 f"BK = {BK}", fontsize=TEXT + 1)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    return fig


# ------------------------------------------------------------------ the tunables

def best_per_patch(kernel: str, size: int = 2048) -> dict:
    """{(TM, TN): (GFLOP/s, params, blocks per SM)}: the best recorded configuration of
    each thread patch at size^3 (two blocks per SM allowed), with the blocks per SM its
    timed binary's registers allow."""
    from gemm_kernels.core.launch import kernel_of, problems
    from gemm_kernels.measure import lookup
    k = kernel_of(kernel)
    best = {}
    for c in k.configurations():
        if c.get("ONE_PER_SM") or problems(k, c, (size,) * 3):
            continue
        try:
            r = lookup.recorded(k.name, (size,) * 3, c)
        except LookupError:
            continue
        key, rate = (c["TM"], c["TN"]), r["gflops"]["median"]
        if key not in best or rate > best[key][0]:
            regs = (r.get("binary") or {}).get("registers")
            occ = analysis.kernel_occupancy(k.name, c, registers=regs)
            best[key] = (rate, c, occ.blocks_per_sm)
    return best


def tunables(kernels=("tile_2d_reg", "float4"), size: int = 2048):
    """Side by side, per kernel: the best rate of each (TM, TN) at size^3 over BM, BN,
    BK, on one colour scale, each cell with the blocks per SM of that configuration.
    Returns the Figure."""
    import math

    import numpy as np
    from gemm_kernels.measure import records
    plt = _plt()
    grids = {name: best_per_patch(name, size) for name in kernels}
    tms = sorted({tm for g in grids.values() for tm, _ in g} or {4, 8})
    tns = sorted({tn for g in grids.values() for _, tn in g} or {4, 8})
    rates = [v[0] / 1e3 for g in grids.values() for v in g.values()]
    lo, hi = (min(rates), max(rates)) if rates else (0, 1)
    fig, axes = plt.subplots(1, len(kernels), figsize=(5.2 * len(kernels) + 1.2, 4.4))
    axes = np.atleast_1d(axes)
    im = None
    for ax, name in zip(axes, kernels):
        data = np.full((len(tms), len(tns)), math.nan)
        for (tm, tn), (rate, _, _) in grids[name].items():
            data[tms.index(tm), tns.index(tn)] = rate / 1e3
        im = ax.imshow(data, cmap="viridis", origin="lower", vmin=lo, vmax=hi)
        for (tm, tn), (rate, c, blocks) in grids[name].items():
            i, j = tms.index(tm), tns.index(tn)
            ax.text(j, i, f"{rate / 1e3:.1f}\n{blocks} block{'s' if blocks != 1 else ''}/SM\n"
                          f"{c['BM']}x{c['BN']}x{c['BK']}", ha="center", va="center",
                    fontsize=SMALL, color=style.text_colour(im.cmap(im.norm(rate / 1e3))))
        if not grids[name]:
            ax.text(0.5, 0.5, "not recorded", transform=ax.transAxes, ha="center")
        ax.set_xticks(range(len(tns)), tns)
        ax.set_yticks(range(len(tms)), tms)
        ax.set_xlabel("TN (columns per thread)", fontsize=TEXT)
        ax.set_ylabel("TM (rows per thread)", fontsize=TEXT)
        ax.set_title(f"{name} (chapter {KERNELS[name].chapter})", fontsize=TEXT)
    fig.colorbar(im, ax=list(axes), label=f"best TFLOP/s at {size}^3")
    fig.suptitle(f"Best configuration of each thread patch, {records.source()}",
                 fontsize=TEXT)
    return fig


def sweep_table(kernel: str = "float4", size: int = 2048, top: int = 6):
    """The `top` fastest configurations of the recorded sweep at size^3, in TFLOP/s (the
    unit of the rest of the chapter)."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import records, tradeoff
    from gemm_kernels.notebook.ch07_ablation import tflops
    rows = [{**c, "TFLOP/s": tflops(g)} for c, g in tradeoff.ranked(kernel, size)[:top]]
    return Table(rows, list(rows[0]) if rows else ["TFLOP/s"],
                 title=f"{kernel} at {size}^3: the {top} fastest configurations, "
                       f"{records.source()}")
