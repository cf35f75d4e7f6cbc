"""Chapter 03's pictures of one thread and one warp (the block-level walk along K is
`pictures.tile_walk`).

`thread_zoom` follows one thread of a small block through one step along K: the element
of A and of B it copies into the tiles, the row of As and the column of Bs it then
multiplies, and, for one k, what the whole row of threads it belongs to reads.

`wavefront_lanes` draws the three kinds of shared-memory access of the chapter's kernel
as passes over the 32 banks, priced by the bank model (`memory.banks`): the store of a
tile, the read of a column of Bs, and the broadcast LDS.128 of four words of As.

`copy_bug` draws what the common copy bug puts in the tiles, next to the correct copy
(`memory.ch03_copies.copy_bug`).

Each returns the Figure; every text is at least 9 points.
"""
from __future__ import annotations

from gemm_kernels.memory import banks, ch03_copies

SMALL, TEXT = 9, 10
_COPY, _ROW, _ONE, _GRID, _C = "#2b6cb0", "#f2b45a", "#c0392b", "0.6", "#f2b45a"
_PALE = "#e8eef6"


def _plt():
    import matplotlib.pyplot as plt
    return plt


def _grid(ax, x0, y0, n, name, filled=None, pale=None, labels=None):
    """An n x n grid with its top-left corner at (x0, y0), one unit a cell; `filled`
    {(r, c): colour}; `pale` cells lightly shaded; `name` written above it."""
    from matplotlib.patches import Rectangle
    for r in range(n):
        for c in range(n):
            face = (filled or {}).get((r, c)) or (_PALE if pale and (r, c) in pale else "white")
            ax.add_patch(Rectangle((x0 + c, y0 + r), 1, 1, facecolor=face, edgecolor=_GRID,
                                   lw=0.8))
    ax.text(x0 + n / 2, y0 - 0.5, name, ha="center", va="bottom", fontsize=TEXT)
    for i in range(n):
        ax.text(x0 - 0.3, y0 + i + 0.5, str(i), ha="right", va="center", fontsize=SMALL,
                color="0.4")
        ax.text(x0 + i + 0.5, y0 + n + 0.3, str(i), ha="center", va="top", fontsize=SMALL,
                color="0.4")


def thread_zoom(BLOCK: int = 8, tx: int = 2, ty: int = 5, k: int = 3):
    """One thread (tx, ty) of a BLOCK x BLOCK block at one step along K, in three\n    panels: what it copies, what it multiplies, and what its row of threads reads at one\n    k. Each panel lays the tiles out as the product does: As left of the tile of C, Bs\n    above it, so a row of As lines up with a row of C and a column of Bs with a column."""
    for name, v, lo, hi in (("BLOCK", BLOCK, 2, 16), ("tx", tx, 0, BLOCK - 1),
                            ("ty", ty, 0, BLOCK - 1), ("k", k, 0, BLOCK - 1)):
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise ValueError(f"thread_zoom: {name}={v!r} is not an integer from {lo} to {hi}")
    plt = _plt()
    n = BLOCK
    gap = 2.5
    fig, axes = plt.subplots(1, 3, figsize=(15, 7.0), layout="constrained")
    panels = [
        ("1. Copy", {"As": {(ty, tx): _COPY}, "Bs": {(ty, tx): _COPY}, "C": {(ty, tx): _PALE}},
         None,
         f"Thread (tx = {tx}, ty = {ty}) computes C[row][col],\n"
         f"row = tile_row * BLOCK + {ty}, col = tile_col * BLOCK + {tx}.\n"
         f"It copies one element into each tile:\n"
         f"  As[{ty}][{tx}] = A[row][k0 + {tx}]\n"
         f"  Bs[{ty}][{tx}] = B[k0 + {ty}][col]\n"
         "The other threads copy the other cells; the\n"
         "tiles are complete after __syncthreads()."),
        ("2. Multiply-add", {"As": {(ty, c): _ROW for c in range(n)},
                             "Bs": {(r, tx): _ROW for r in range(n)},
                             "C": {(ty, tx): _C}}, None,
         f"Then it reads row {ty} of As and column {tx} of Bs:\n"
         f"  acc += As[{ty}][k] * Bs[k][{tx}],  k = 0 .. {n - 1}\n"
         f"{n} multiply-adds into its element of C, from\n"
         f"values that {2 * n - 2} other threads copied."),
        (f"3. At k = {k}: its row of threads", {"As": {(ty, k): _ONE},
                                                "Bs": {(k, c): _ROW for c in range(n)},
                                                "C": {(ty, c): _PALE for c in range(n)}},
         {(ty, c) for c in range(n)},
         f"The {n} threads of row ty = {ty} all read As[{ty}][{k}]\n"
         f"(one word for all: a broadcast) and {n} neighbouring\n"
         f"words Bs[{k}][0 .. {n - 1}], one each. At BLOCK = 32 a row\n"
         "of threads is a warp: one word of As for its 32\n"
         "lanes, 32 neighbouring words of Bs."),
    ]
    for ax, (title, cells, pale, text) in zip(axes, panels):
        _grid(ax, 0, n + gap, n, "As", cells["As"], pale=pale)
        _grid(ax, n + gap, 0, n, "Bs", cells["Bs"])
        _grid(ax, n + gap, n + gap, n, "tile of C", cells["C"])
        ax.text(0, 2 * n + gap + 1.6, text, ha="left", va="top", fontsize=TEXT)
        ax.set_title(title, fontsize=TEXT + 2, fontweight="bold")
        ax.set_xlim(-1.2, 2 * n + gap + 0.5)
        ax.set_ylim(2 * n + gap + 8.5, -1.8)
        ax.set_aspect("equal")
        ax.axis("off")
    fig.suptitle(f"One thread at one step along K (a {n} x {n} block drawn; the chapter's "
                 "32 x 32 block works the same way)", fontsize=TEXT + 2)
    fig.get_layout_engine().set(h_pad=0.25)
    return fig


def _lanes_text(lanes) -> str:
    lanes = sorted(lanes)
    return f"lane {lanes[0]}" if len(lanes) == 1 else f"lanes {lanes[0]}-{lanes[-1]}"


def wavefront_lanes(k: int = 0, ty: int = 0):
    """The chapter's three shared-memory accesses, warp ty (one row of threads at
    BLOCK = 32), as passes over the 32 banks: each row of a panel is one wavefront (one
    pass, up to one word from every bank), coloured where a bank delivers a word."""
    from matplotlib.patches import Rectangle
    B = 32
    accesses = [
        (f"STS  As[ty][tx]: lane i writes word 32·ty + i", [ty * B + i for i in range(32)], 4),
        (f"LDS  Bs[k][tx], k = {k}: lane i reads word 32·k + i",
         [k * B + i for i in range(32)], 4),
        (f"LDS.128  As[ty][{k}..{k + 3}]: every lane reads the same 4 words",
         [ty * B + k] * 32, 16),
    ]
    analyses = [(t, banks.analyse(banks.words_to_bytes(w), width)) for t, w, width in accesses]
    heights = [max(1, sum(p.wavefronts for p in a.phases)) for _, a in analyses]
    plt = _plt()
    fig, axes = plt.subplots(len(accesses), 1, figsize=(11, 0.6 * sum(heights) + 3.2),
                             height_ratios=[h + 1.2 for h in heights], layout="constrained")
    cmap = plt.get_cmap("tab10")
    for ax, (title, a), h in zip(axes, analyses, heights):
        row = 0
        for p, phase in enumerate(a.phases):
            if not phase.active:
                continue
            colour = cmap(p % 10)
            served = phase.bank_words()
            readers = {}
            for acc in phase.accesses:
                for bank in acc.banks:
                    readers.setdefault(bank, []).append(acc.lane)
            for b in range(B):
                ax.add_patch(Rectangle((b, row), 1, 1, facecolor=colour if b in served else "white",
                                       edgecolor="0.7", lw=0.6))
                if len(readers.get(b, ())) == 1:      # one lane: its number in the cell
                    ax.text(b + 0.5, row + 0.5, str(readers[b][0]), ha="center",
                            va="center", fontsize=SMALL, color="white")
            lanes = [acc.lane for acc in phase.accesses]
            shared = len(readers.get(min(served), ())) > 1
            if shared:   # words every lane of the pass reads: the lanes across those cells
                ax.text((min(served) + max(served) + 1) / 2, row + 0.5, _lanes_text(lanes),
                        ha="center", va="center", fontsize=SMALL, color="white")
            ax.text(B + 0.5, row + 0.5, f"wavefront {row + 1}: {_lanes_text(lanes)}"
                    + (f", all {len(lanes)} read these {len(served)} words" if shared else ""),
                    va="center", fontsize=SMALL)
            row += 1
        ax.set_xlim(-0.2, B + 14)
        ax.set_ylim(h, 0)
        ax.set_xticks([b + 0.5 for b in range(0, B, 4)], [str(b) for b in range(0, B, 4)],
                      fontsize=SMALL)
        ax.set_yticks([])
        for s in ("top", "right", "left"):
            ax.spines[s].set_visible(False)
        ax.spines["bottom"].set_bounds(0, B)   # the axis spans the banks, not the notes
        ax.set_title(f"{title}  ->  {a.wavefronts} wavefront{'s' * (a.wavefronts != 1)}",
                     fontsize=TEXT)
    axes[-1].set_xlabel("bank (word w lives in bank w % 32); a number in a cell: the lane "
                        "served; a range: the lanes that all read that word", fontsize=SMALL)
    fig.suptitle("One warp's shared-memory accesses, as passes over the 32 banks",
                 fontsize=TEXT + 2)
    return fig


def copy_bug(M: int = 8, N: int = 8, K: int = 8, BLOCK: int = 4, block=(1, 1), k0: int = 4):
    """The A and B tiles of block `block` at the step starting at k0, as the buggy copy
    (A[row * K + k0], B[k0 * N + col]) and the correct one fill them, each cell labelled
    with the element it holds (`memory.ch03_copies.copy_bug`). Only the buggy panels show
    their code: the correct copy is the exercise's answer, seen before the exercise. Printed first: how many
    elements of C each version gets wrong against A @ B, the whole product emulated, in
    the title: the figure is the answer to a question, so nothing is printed outside it
    (a notebook folds it under the question)."""
    from matplotlib.patches import Rectangle
    got = ch03_copies.copy_bug(M, N, K, BLOCK, block, k0)
    plt = _plt()
    fig, axes = plt.subplots(1, 4, figsize=(13, 4.2), layout="constrained")
    cmap = plt.get_cmap("Pastel1")
    panels = [("buggy", "As"), ("buggy", "Bs"), ("correct", "As"), ("correct", "Bs")]
    for ax, (version, tile) in zip(axes, panels):
        labels = got[version][tile]
        n = len(labels)
        flat = [lab for r in labels for lab in r]
        # an element copied by several threads gets a colour; one copied once stays white
        repeated = [lab for lab in dict.fromkeys(flat) if flat.count(lab) > 1]
        colour_of = {lab: (cmap(repeated.index(lab) % 9) if lab in repeated else "white")
                     for lab in flat}
        for r in range(n):
            for c in range(n):
                ax.add_patch(Rectangle((c, r), 1, 1, facecolor=colour_of[labels[r][c]],
                                       edgecolor="0.5", lw=0.8))
                ax.text(c + 0.5, r + 0.5, labels[r][c], ha="center", va="center",
                        fontsize=SMALL)
        ax.set_xlim(0, n)
        ax.set_ylim(n, 0)
        ax.set_aspect("equal")
        ax.set_xticks([c + 0.5 for c in range(n)], [str(c) for c in range(n)], fontsize=SMALL)
        ax.set_yticks([r + 0.5 for r in range(n)], [str(r) for r in range(n)], fontsize=SMALL)
        ax.set_xlabel("tx", fontsize=SMALL)
        ax.set_ylabel("ty", fontsize=SMALL)
        code = {"As": "A[row * K + k0]", "Bs": "B[k0 * N + col]"}[tile]
        # the correct copy is the exercise's answer: its panels are titled without code
        ax.set_title(f"buggy: {tile}[ty][tx] = {code}" if version == "buggy"
                     else f"the correct copy: {tile}", fontsize=SMALL)
    verdict = {v: f"{got[v]['wrong elements']} of {M * N} elements of C wrong against A @ B"
               for v in got}
    fig.suptitle(f"What block {tuple(block)} copies at the step k0 = {k0} ({M} x {K} times "
                 f"{K} x {N}, BLOCK = {BLOCK})\nbuggy copy: {verdict['buggy']}; correct "
                 f"copy: {verdict['correct']}\n(a colour: one element copied by several threads)",
                 fontsize=TEXT + 1)
    return fig
