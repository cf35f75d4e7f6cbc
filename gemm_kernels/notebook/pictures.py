"""Pictures that teach the ideas of chapters 00, 03, 05 and 06.

`gpu_hierarchy` (chapter 00) draws grid, blocks, warps and threads beside DRAM, L2 and
one SM, with the numbers of the live or recorded GPU.

`tile_walk` draws one block of `smem_tiled` (chapter 03) walking along K: at each step
the block copies one tile of its row strip of A and one tile of its column strip of B
into shared memory, and every thread adds BLOCK products to its element of C.

`thread_map` draws, for `tile_1d` (chapter 05) and `tile_2d`, `tile_2d_reg`,
`tile_2d_strided` (chapter 06), which outputs of the block's C tile each thread
computes, and for one step k the shared-memory values one thread reads and the FMAs
they feed.

Both take the kernel's tunables and refuse what the registry refuses, with its message,
as a ValueError. The geometry comes from the registry and from the thread-tile model
(`memory.ch05_06_thread_tiles`, whose index formulas are the kernels'), so a picture
follows whatever values a widget is set to. Each function returns the Figure.
"""
from __future__ import annotations

import numpy as np

from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.core.registry import ceil_div, int_problem
from gemm_kernels.memory import ch05_06_thread_tiles
from gemm_kernels.memory.wavefronts import WARP

# Text sizes in points: a notebook shows figures at their own size, so these are what
# the student reads; nothing is smaller than SMALL.
SMALL, TEXT = 9, 10

# Default matrix sides of tile_walk, in tiles: enough tiles that a strip is visibly a
# part of its matrix and the walk has several steps, few enough to number every tile.
_TILES_ACROSS = 4

# tile_walk's colours: this step's pair of tiles, earlier and later steps, the C tile,
# and the edges of the matrices.
_NOW, _DONE, _LATER, _C_TILE, _EDGE = "#2b6cb0", "#a9c4e4", "white", "#f2b45a", "0.45"

# thread_map's colours: one per highlighted thread (matplotlib's tab10, readable on the
# greys), then the rest of warp 0 and the other threads.
_THREAD_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
_WARP0, _OTHERS = "#c9d9ea", "#e6e6e6"


def _plt():
    # pyplot only when a picture is drawn: importing the package stays cheap.
    import matplotlib.pyplot as plt
    return plt


def _checked(name: str, params) -> dict:
    """The kernel's full parameters, or a ValueError with every reason the registry
    gives for refusing them."""
    kernel = KERNELS[name]
    bad = kernel.problems(params)
    if bad:
        raise ValueError(f"{name}: " + "; ".join(bad))
    return kernel.resolve(params)


# ------------------------------------------------------------------ chapter 03

def tile_walk(BLOCK: int | None = None, K: int | None = None, M: int | None = None,
              N: int | None = None, tile_row: int = 1, tile_col: int = 2, steps: int = 3):
    """One block of `smem_tiled` at its first `steps` steps along K, one panel a step.

    BLOCK: the kernel's tunable (None: the registry's default). M, N, K: the matrix
    sides in elements (None: four tiles each). tile_row, tile_col: which tile of C the
    block computes. Tiles that stick out of a matrix (a side that is not a multiple of
    BLOCK) are drawn hatched where the kernel copies zeros.
    """
    kernel = KERNELS["smem_tiled"]
    p = _checked(kernel.name, None if BLOCK is None else {"BLOCK": BLOCK})
    b = p["BLOCK"]
    M, N, K = (b * _TILES_ACROSS if v is None else v for v in (M, N, K))
    bad = [m for m in (int_problem("M", M), int_problem("N", N), int_problem("K", K),
                       int_problem("steps", steps),
                       int_problem("tile_row", tile_row, 0), int_problem("tile_col", tile_col, 0))
           if m]
    if not bad and tile_row >= ceil_div(M, b):
        bad.append(f"tile_row={tile_row}: M={M} has {ceil_div(M, b)} rows of tiles, "
                   f"numbered from 0")
    if not bad and tile_col >= ceil_div(N, b):
        bad.append(f"tile_col={tile_col}: N={N} has {ceil_div(N, b)} columns of tiles, "
                   f"numbered from 0")
    if bad:
        raise ValueError("tile_walk: " + "; ".join(bad))

    total = ceil_div(K, b)
    shown = min(steps, total)
    tx, ty, _ = kernel.threads(p)
    plt = _plt()
    fig, axes = plt.subplots(1, shown, figsize=(4.4 * shown, 5.6), layout="constrained",
                             squeeze=False)
    ragged = False
    for t, ax in enumerate(axes[0]):
        ragged |= _draw_step(ax, b, M, N, K, tile_row, tile_col, t, total)
    shown_text = f" (the first {shown} shown)" if total > shown else ""
    fig.suptitle(f"One block walks K = {K} in {total} steps of BLOCK = {b}{shown_text}",
                 fontsize=TEXT + 2)
    handles = [_patch(_NOW, "this step's tiles, copied into shared memory"),
               _patch(_DONE, "tiles of earlier steps (already added)"),
               _patch(_LATER, "tiles of later steps"),
               _patch(_C_TILE, "the block's tile of C: one element per thread")]
    if ragged:
        handles.append(_patch("white", "outside the matrix: copied as zeros", hatch="///"))
    # The routine of one step is the legend's title: one block of text under the panels
    # (a separate figure text and an outside legend would be placed on top of each other).
    routine = (f"At every step each of the {tx} x {ty} threads copies one element of the "
               f"A tile and one of the B tile into shared memory ({kernel.smem(p)} bytes: "
               f"As and Bs),\nthe block waits at __syncthreads(), every thread adds {b} "
               f"products (its row of As times its column of Bs) to its element of C, and "
               f"the block waits again.")
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=TEXT,
               title=routine, title_fontsize=TEXT, frameon=False)
    return fig


def _patch(colour, label, hatch=None):
    from matplotlib.patches import Patch
    return Patch(facecolor=colour, edgecolor=_EDGE, hatch=hatch, label=label)


def _rect(ax, x, y, w, h, gid=None, **style):
    from matplotlib.patches import Rectangle
    r = Rectangle((x, y), w, h, **style)
    r.set_gid(gid)
    ax.add_patch(r)
    return r


def _matrix(ax, name, x, y, rows, cols, b, label_at):
    """A matrix's outline and its tile grid; its name and size beside it."""
    _rect(ax, x, y, cols, rows, gid=name, facecolor="white", edgecolor=_EDGE, lw=1.2)
    for c in range(b, cols, b):
        ax.plot([x + c, x + c], [y, y + rows], color="0.85", lw=0.6)
    for r in range(b, rows, b):
        ax.plot([x, x + cols], [y + r, y + r], color="0.85", lw=0.6)
    text = f"{name}: {rows} x {cols}"
    if label_at == "left":
        ax.text(x - b / 4, y + rows / 2, text, rotation=90, ha="right", va="center",
                fontsize=TEXT)
    elif label_at == "top":
        ax.text(x + cols / 2, y - b / 4, text, ha="center", va="bottom", fontsize=TEXT)
    else:
        ax.text(x + cols / 2, y + rows + b / 4, text, ha="center", va="top", fontsize=TEXT)


def _outside(ax, x, y, b, right, bottom) -> bool:
    """Hatch the part of the b x b tile at (x, y) past `right` or `bottom` (the
    matrix's edges): the kernel copies zeros there. True if there was any."""
    over = False
    if x + b > right:
        _rect(ax, right, y, x + b - right, b, facecolor="white", edgecolor=_EDGE,
              hatch="///", lw=0.8)
        over = True
    if y + b > bottom:
        _rect(ax, x, bottom, b, y + b - bottom, facecolor="white", edgecolor=_EDGE,
              hatch="///", lw=0.8)
        over = True
    return over


def _draw_step(ax, b, M, N, K, tile_row, tile_col, t, total) -> bool:
    """Panel of step t: A (left), B (top), C (bottom right), shared memory in the free
    corner. Returns whether a drawn tile sticks out of its matrix."""
    gap = b                    # one tile: room for a tile that sticks out of A or B
    ax0, ay0 = 0, K + gap      # A's top-left corner
    bx0, by0 = K + gap, 0      # B's
    cx0, cy0 = K + gap, K + gap
    _matrix(ax, "A", ax0, ay0, M, K, b, "left")
    _matrix(ax, "B", bx0, by0, K, N, b, "top")
    _matrix(ax, "C", cx0, cy0, M, N, b, "bottom")

    over = False
    row_y, col_x = ay0 + tile_row * b, bx0 + tile_col * b
    for s in range(total):
        face = _NOW if s == t else _DONE if s < t else _LATER
        ink = "white" if s == t else "0.2" if s < t else "0.5"
        for name, x, y in (("A", ax0 + s * b, row_y), ("B", col_x, by0 + s * b)):
            _rect(ax, x, y, b, b, gid=f"{name} tile {s}", facecolor=face, edgecolor=_EDGE,
                  lw=1.0)
            # Above the hatching of a tile that sticks out of its matrix.
            ax.text(x + b / 2, y + b / 2, str(s), ha="center", va="center", color=ink,
                    fontsize=TEXT + 1, fontweight="bold" if s == t else "normal", zorder=4)
        over |= _outside(ax, ax0 + s * b, row_y, b, ax0 + K, ay0 + M)
        over |= _outside(ax, col_x, by0 + s * b, b, bx0 + N, by0 + K)
    c_x, c_y = cx0 + tile_col * b, cy0 + tile_row * b
    _rect(ax, c_x, c_y, b, b, gid="C tile", facecolor=_C_TILE, edgecolor="0.2", lw=1.4)
    over |= _outside(ax, c_x, c_y, b, cx0 + N, cy0 + M)

    # Shared memory: As and Bs side by side in the corner left free by the L of A and B,
    # with the copies into them and the products out of them as arrows.
    pad, sep = b / 4, b / 2
    sy = K - pad - b
    bs_x = K - pad - b
    as_x = bs_x - sep - b
    _rect(ax, as_x - pad, sy - pad - b / 2, 2 * b + sep + 2 * pad, b + 1.5 * pad + b / 2,
          facecolor="0.96", edgecolor="0.6", lw=0.8, ls="--")
    ax.text(as_x + b + sep / 2, sy - b / 4, "shared memory", ha="center", va="center",
            fontsize=SMALL)
    for name, x in (("As", as_x), ("Bs", bs_x)):
        _rect(ax, x, sy, b, b, gid=name, facecolor=_NOW, edgecolor="0.2", lw=1.0)
        ax.text(x + b / 2, sy + b / 2, name, ha="center", va="center", color="white",
                fontsize=TEXT)
    arrow = dict(arrowstyle="-|>", color=_NOW, lw=1.6, shrinkA=2, shrinkB=2)
    ax.annotate("", xy=(as_x + b / 2, sy + b), xytext=(ax0 + (t + 0.5) * b, row_y),
                arrowprops=arrow)
    ax.annotate("", xy=(bs_x + b, sy + b / 2), xytext=(col_x, by0 + (t + 0.5) * b),
                arrowprops=arrow)
    ax.annotate("", xy=(c_x, c_y), xytext=(bs_x + b / 2, sy + b),
                arrowprops={**arrow, "color": "0.2", "connectionstyle": "arc3,rad=-0.2"})
    ax.text(c_x + b / 2, c_y + b + pad, f"each thread adds\n{b} products", ha="center",
            va="top", fontsize=SMALL)

    last = min(K, (t + 1) * b) - 1
    ax.set_title(f"Step {t}: k = {t * b} to {last}", fontsize=TEXT + 1)
    ax.set_aspect("equal")
    ax.set_xlim(min(0, as_x - pad) - b, cx0 + max(N, (tile_col + 1) * b) + b / 2)
    ax.set_ylim(cy0 + max(M, (tile_row + 1) * b) + b, min(0, sy - pad - b / 2) - b / 2)
    ax.axis("off")
    return over


# ------------------------------------------------------------------ chapters 05-06

def owners(kernel: str, params=None) -> np.ndarray:
    """The BM x BN array of the thread that computes each output of the block's C tile
    (-1 where no thread does), from the thread-tile model's index formulas."""
    g = ch05_06_thread_tiles.geometry(kernel, _checked(kernel, params))
    grid = np.full((g.params["BM"], g.params["BN"]), -1)
    for t in range(g.threads):
        for r, c in g.outputs(t):
            grid[r, c] = t
    return grid


_SHAPE = {
    "tile_1d": "{TM} outputs down one column",
    "tile_2d": "a patch of {TM} x {TN} outputs",
    "tile_2d_reg": "a patch of {TM} x {TN} outputs",
    "tile_2d_strided": "{TM} x {TN} outputs, {RS} rows and {CS} columns apart,",
}

# thread_map's panels are about this wide, in inches; an output smaller than _FINE
# points there is too small to see on its own, and the map adds an enlarged corner of
# _ZOOM x _ZOOM outputs (enough to hold one stride of the strided kernel at BM = 128).
# Below _LINED points the white lines between outputs would cover the outputs.
_PANEL, _FINE, _ZOOM, _LINED = 4.0, 6.0, 40, 4.0


def thread_map(kernel: str, params=None, threads=None, k: int = 0, overview: bool = True):
    """Which outputs of one block's C tile each thread computes, and what one thread
    reads from shared memory at one value of k and the FMAs those values feed.

    kernel: tile_1d, tile_2d, tile_2d_reg or tile_2d_strided; params: its tunables
    (None: the registry's defaults). threads: the threads to colour (None: threads 0,
    1, 2 and the first thread of warp 1); the reads are those of the first of them.
    k: the value of k inside the BK-deep tiles of A and B whose reads are shown.

    When a single output would be too small to see, a middle panel enlarges the
    top-left corner of the tile; `overview=False` then leaves out the whole tile and
    draws the enlarged corner and the reads only.
    """
    if kernel not in _SHAPE:
        raise ValueError(f"thread_map draws {', '.join(_SHAPE)}; got {kernel!r}")
    p = _checked(kernel, params)
    g = ch05_06_thread_tiles.geometry(kernel, p)
    threads = (0, 1, 2, WARP) if threads is None else tuple(threads)
    bad = [m for t in threads for m in [int_problem("a thread", t, 0)] if m]
    bad += [f"thread {t}: the block has {g.threads} threads, numbered from 0"
            for t in threads if not int_problem("a thread", t, 0) and t >= g.threads]
    if not threads or len(set(threads)) != len(threads) or \
            len(threads) > len(_THREAD_COLOURS):
        bad.append(f"threads={threads}: give 1 to {len(_THREAD_COLOURS)} different thread "
                   "numbers")
    bad += [m for m in [int_problem("k", k, 0)] if m]
    if not bad and k >= p["BK"]:
        bad.append(f"k={k}: the tiles are BK={p['BK']} deep, so k runs from 0 to {p['BK'] - 1}")
    if bad:
        raise ValueError(f"thread_map({kernel!r}): " + "; ".join(bad))

    BM, BN, tm, tn = p["BM"], p["BN"], p["TM"], p.get("TN", 1)
    colour = dict(zip(threads, _THREAD_COLOURS))
    grid = owners(kernel, p)
    cell = _PANEL * 72 / max(BM, BN)                 # points per output in the full map
    # The smallest thing the map must show: one output of the strided kernel, else one
    # thread's run of outputs, TN wide (one column for tile_1d).
    fine = cell * (1 if kernel == "tile_2d_strided" else min(tm, tn))
    zoom = fine < _FINE
    whole = overview or not zoom          # the whole tile is drawn unless zoom replaces it
    panels = (2 if whole else 1) + zoom
    plt = _plt()
    # Without the whole tile the figure keeps room for the title's width.
    fig, axes = plt.subplots(1, panels, figsize=(_PANEL * panels + (1 if whole else 3), 6.4),
                             layout="constrained")
    if whole:
        _draw_owners(axes[0], grid, colour, BM, BN, fine)
        axes[0].set_gid("owners")
        axes[0].set_title("Which outputs each thread computes", fontsize=TEXT + 1)
    if zoom:
        rows, cols = min(BM, _ZOOM), min(BN, _ZOOM)
        if whole:
            # Dashed, unlike warp 0's solid outline: the part the next panel enlarges.
            _rect(axes[0], -0.5, -0.5, cols, rows, facecolor="none", edgecolor="0.2",
                  lw=1.2, ls="--", zorder=3)
        z = axes[1 if whole else 0]
        _draw_owners(z, grid, colour, rows, cols, fine * max(BM, BN) / max(rows, cols))
        z.set_gid("zoom")
        z.set_title(f"Which outputs each thread computes\n(the top-left {rows} x {cols} "
                    "of the tile)" if not whole else
                    f"Its top-left {rows} x {cols} outputs, enlarged", fontsize=TEXT + 1)
    _draw_reads(axes[-1], g, threads[0], colour[threads[0]], k)
    axes[-1].set_gid("reads")

    shape = _SHAPE[kernel].format(TM=tm, TN=tn, RS=BM // tm, CS=BN // tn)
    tunables = ", ".join(f"{q.name} = {p[q.name]}" for q in KERNELS[kernel].params)
    fig.suptitle(f"{kernel} with {tunables}:\neach of the {g.threads} threads computes "
                 f"{shape} of the block's {BM} x {BN} tile of C", fontsize=TEXT + 2)
    handles = [_patch(colour[t], _thread_label(g, t)) for t in threads]
    handles += [_patch(_WARP0, f"the other threads of warp 0, threads 0 to {WARP - 1} "
                               "(black outline)"),
                _patch(_OTHERS, "the other threads of the block")]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=TEXT,
               frameon=False)
    return fig


def _thread_label(g, t) -> str:
    tr, tc = g.position(t)
    warp, lane = divmod(t, WARP)
    first = f", the first thread of warp {warp}" if warp and not lane else ""
    return f"thread {t} (tr = {tr}, tc = {tc}{first})"


def _draw_owners(ax, grid, colour, rows, cols, fine):
    """The top-left rows x cols outputs of the C tile, each in the colour of the thread
    that computes it. Where what a thread owns is at least _LINED points wide (`fine`:
    one output of the strided kernel, a patch of the others), white lines part outputs
    of different threads and a black line outlines warp 0."""
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_rgb
    from matplotlib.ticker import MaxNLocator
    view = grid[:rows, :cols]
    rgb = np.empty(view.shape + (3,))
    rgb[:] = to_rgb(_OTHERS)
    rgb[view < WARP] = to_rgb(_WARP0)
    for t, c in colour.items():
        rgb[view == t] = to_rgb(c)
    ax.imshow(rgb, interpolation="nearest")
    if fine >= _LINED:
        # A contiguous patch then reads as one block, strided outputs as separate cells.
        split = [[(c + 0.5, r - 0.5), (c + 0.5, r + 0.5)] for r in range(rows)
                 for c in range(cols - 1) if view[r, c] != view[r, c + 1]]
        split += [[(c - 0.5, r + 0.5), (c + 0.5, r + 0.5)] for r in range(rows - 1)
                  for c in range(cols) if view[r, c] != view[r + 1, c]]
        ax.add_collection(LineCollection(split, colors="white", linewidths=0.6))
        # Every side of a warp-0 output that borders another warp's output or the edge
        # of the tile; a side on the edge of the view whose neighbour is warp 0 goes on.
        warp0 = np.pad(grid < WARP, 1)
        edge = []
        for r, c in zip(*np.nonzero(view < WARP)):
            for dr, dc, side in ((0, -1, [(c - 0.5, r - 0.5), (c - 0.5, r + 0.5)]),
                                 (0, 1, [(c + 0.5, r - 0.5), (c + 0.5, r + 0.5)]),
                                 (-1, 0, [(c - 0.5, r - 0.5), (c + 0.5, r - 0.5)]),
                                 (1, 0, [(c - 0.5, r + 0.5), (c + 0.5, r + 0.5)])):
                if not warp0[r + 1 + dr, c + 1 + dc]:
                    edge.append(side)
        ax.add_collection(LineCollection(edge, colors="black", linewidths=1.6))
    ax.set_xlabel("column of the C tile", fontsize=TEXT)
    ax.set_ylabel("row of the C tile", fontsize=TEXT)
    ax.xaxis.set_major_locator(MaxNLocator(8, integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(8, integer=True))
    ax.tick_params(labelsize=SMALL)
    ax.set_aspect("equal")


def _draw_reads(holder, g, t, colour, k):
    """Thread t at one value of k as an outer product: the column of As values it reads (left),
    the row of Bs values (top), and one square per FMA they feed, at row i and column
    j for As value i and Bs value j; the squares are the thread's outputs.

    `holder` fills the panel's place in the layout and carries the title and the
    caption; the schematic, with equal squares, is an inset that shrinks inside it.
    Shrunk directly, the panel would leave its title where the layout made no room."""
    holder.set_title(f"Thread {t} at one value of k (k = {k}):\n"
                     "the values it reads, the FMAs they feed", fontsize=TEXT + 1)
    out = g.outputs(t)
    a_rows = sorted({r for r, _ in out})      # As[r][k] for each row of its outputs
    b_cols = sorted({c for _, c in out})      # Bs[k][c] for each column
    holder.set_xlabel(_reads_sentence(g.kernel, len(a_rows), len(b_cols)), fontsize=TEXT)
    holder.set_xticks([])
    holder.set_yticks([])
    for side in holder.spines.values():
        side.set_visible(False)

    ax = holder.inset_axes((0, 0, 1, 1))
    ax.set_gid("schematic")
    for i, r in enumerate(a_rows):
        _rect(ax, 0, 2 + i, 1, 1, gid="As value", facecolor=colour, edgecolor="white")
        ax.text(-0.2, 2.5 + i, f"As[{r}][{k}]", ha="right", va="center", fontsize=SMALL)
    for j, c in enumerate(b_cols):
        _rect(ax, 2 + j, 0, 1, 1, gid="Bs value", facecolor=colour, edgecolor="white")
        ax.text(2.5 + j, -0.2, f"Bs[{k}][{c}]", ha="center", va="bottom", rotation=90,
                fontsize=SMALL)
    for i in range(len(a_rows)):
        for j in range(len(b_cols)):
            _rect(ax, 2 + j, 2 + i, 1, 1, gid="FMA", facecolor=colour, alpha=0.45,
                  edgecolor="white")
    ax.text(2 + len(b_cols) / 2, 2.2 + len(a_rows), "one square: one FMA, one output",
            ha="center", va="top", fontsize=SMALL)
    # Room for the labels: about four squares of text left of the column and above the
    # row (nine-point labels of up to 10 characters next to squares of about that size),
    # one below the squares.
    ax.set_xlim(-4.5, 2.5 + len(b_cols))
    ax.set_ylim(3.5 + len(a_rows), -4.5)
    ax.set_aspect("equal")
    ax.axis("off")


def _reads_sentence(kernel, n_a, n_b) -> str:
    """How many shared-memory reads feed how many FMAs at one k, as the loop is written."""
    fma = n_a * n_b
    if kernel == "tile_2d":
        # Inner-product order: every FMA reads both of its operands again.
        return (f"{n_a} values of As and {n_b} of Bs, but each\n"
                f"of the {fma} FMAs reads its own pair:\n"
                f"{2 * fma} shared-memory reads → {fma} FMAs")
    return (f"{n_a} values of As + {n_b} of Bs\n"
            f"= {n_a + n_b} shared-memory reads → {fma} FMAs\n"
            f"(each As value feeds {_fmas(n_b)},\neach Bs value {_fmas(n_a)})")


def _fmas(n) -> str:
    return f"{n} FMA" if n == 1 else f"{n} FMAs"


# ------------------------------------------------------------------ chapter 00

# gpu_hierarchy's colours: the threads' side (grid, block, warp) and the hardware's
# (DRAM, L2, SM, its parts).
_SOFT, _WARP_BOX, _HARD, _SM_BOX, _PART = "#eef3fa", "#a9c4e4", "#f4f4f4", "#fdf0dc", "#f2b45a"


def _box(ax, x, y, w, h, text, colour, gid, size=TEXT, top=True):
    """A labelled rectangle; the label at its top edge (or centred)."""
    _rect(ax, x, y, w, h, gid=gid, facecolor=colour, edgecolor=_EDGE, lw=1.0)
    if top:
        ax.text(x + 0.15, y + h - 0.12, text, ha="left", va="top", fontsize=size)
    else:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size)


def _mib(n) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n / 2**10:g} KiB"


def gpu_hierarchy(props=None):
    """The hierarchy the course uses, with one GPU's numbers: on the left what a launch
    creates (a grid of blocks, each block cut into warps of 32 threads), on the right
    where it runs (DRAM, the L2 shared by all SMs, and one SM with its 4 schedulers,
    register file and shared memory / L1). `props` is a device-properties dict
    (`measure.records.described_device()`, the live or recorded GPU, by default).
    Returns the Figure."""
    from gemm_kernels.core import device
    if props is None:
        from gemm_kernels.measure import records
        props = records.described_device()
    need = ("name", "sm_count", "l2_bytes", "smem_per_sm", "registers_per_sm",
            "max_threads_per_sm", "max_threads_per_block")
    missing = [k for k in need if props.get(k) is None]
    if missing:
        raise ValueError("gpu_hierarchy: the device properties lack " + ", ".join(missing))
    warp = props.get("warp_size", WARP)
    sms, l2, smem = props["sm_count"], props["l2_bytes"], props["smem_per_sm"]
    regs, threads_sm = props["registers_per_sm"], props["max_threads_per_sm"]
    threads_block = props["max_threads_per_block"]
    lanes = props.get("fp32_lanes_per_sm") or device.fp32_lanes(props["compute_capability"])
    bw = device.peak_bandwidth_gbps(props)

    plt = _plt()
    fig, (soft, hard) = plt.subplots(1, 2, figsize=(12, 6.4), width_ratios=(1, 1.25),
                                     layout="constrained")
    fig.suptitle(f"Threads and hardware of the {props['name']}", fontsize=TEXT + 2)
    soft.set_title("What a launch creates", fontsize=TEXT + 1)
    hard.set_title("Where it runs", fontsize=TEXT + 1)
    for ax in (soft, hard):
        ax.set_axis_off()
        ax.set_aspect("equal")
    soft.set_xlim(0, 9.2), soft.set_ylim(0, 9.6)
    hard.set_xlim(0, 11.5), hard.set_ylim(0, 9.6)

    # --- the threads' side: grid > block > warp > thread
    _box(soft, 0.1, 0.1, 9.0, 9.3, "grid: all the blocks of one launch\n"
         "(gridDim.x x gridDim.y of them)", _SOFT, "grid")
    for i, x in enumerate((5.6, 6.5, 7.4)):                 # other blocks, in miniature
        _rect(soft, x + 0.2, 7.0, 0.7, 0.7, gid=f"block {i + 1}", facecolor="white",
              edgecolor=_EDGE)
    soft.text(7.6, 6.8, "more blocks", ha="center", va="top", fontsize=SMALL)
    _box(soft, 0.4, 0.4, 5.0, 7.9, f"block: up to {threads_block} threads\n"
         f"= up to {threads_block // warp} warps; all on one SM,\nsharing its shared memory",
         "white", "block")
    for w in range(3):
        y = 4.6 - w * 1.75
        _box(soft, 0.7, y, 4.4, 1.45, f"warp {w}: threads {w * warp}..{w * warp + warp - 1}",
             _WARP_BOX, f"warp {w}", size=SMALL)
        for t in range(16):                                    # its 32 threads, 2 rows
            for r in range(2):
                _rect(soft, 0.85 + t * 0.26, y + 0.15 + r * 0.33, 0.22, 0.27,
                      gid=f"thread {w}.{r * 16 + t}", facecolor="white", edgecolor=_EDGE,
                      lw=0.5)
    soft.text(2.9, 0.55, "...", ha="center", va="bottom", fontsize=TEXT)
    soft.text(5.6, 5.2, f"warp = {warp} threads with\nconsecutive thread indices\n"
              "(threadIdx.x fastest):\nthey issue each\ninstruction together",
              ha="left", va="top", fontsize=SMALL)

    # --- the hardware's side: DRAM > L2 > SMs > one SM's parts
    dram = f"DRAM: {_mib(props.get('dram_bytes', 0))}" if props.get("dram_bytes") else "DRAM"
    dram += f", {bw:,.0f} GB/s theoretical" if bw else ""
    _box(hard, 0.1, 0.1, 11.3, 1.0, dram, _HARD, "DRAM", top=False)
    _box(hard, 0.1, 1.4, 11.3, 1.0, f"L2 cache: {_mib(l2)}, shared by all {sms} SMs",
         _HARD, "L2", top=False)
    _box(hard, 0.1, 2.7, 8.6, 6.7, f"one SM (streaming multiprocessor) of {sms}:\n"
         f"up to {threads_sm} threads = {threads_sm // warp} warps resident at once",
         _SM_BOX, "SM")
    for s in range(4):
        _box(hard, 0.35 + s * 2.07, 5.6, 1.9, 2.3,
             f"scheduler {s}\n{lanes // 4} FP32\nlanes;\npicks a\nready warp", _PART,
             f"scheduler {s}", size=SMALL)
    _box(hard, 0.35, 4.2, 8.1, 1.1, f"register file: {regs:,} x 32-bit registers "
         f"({_mib(regs * 4)}),\nsplit among the resident threads", _PART, "registers",
         size=SMALL, top=False)
    _box(hard, 0.35, 2.95, 8.1, 1.0, f"shared memory / L1: up to {_mib(smem)} of shared "
         "memory\nfor the SM's blocks; the rest caches loads", _PART, "shared memory",
         size=SMALL, top=False)
    for i, y in enumerate((7.9, 6.3, 4.7, 3.1)):               # the other SMs, in miniature
        _rect(hard, 9.0, y, 1.2, 1.2, gid=f"SM {i + 1}", facecolor=_SM_BOX, edgecolor=_EDGE)
        hard.text(9.6, y + 0.6, "SM", ha="center", va="center", fontsize=SMALL)
    hard.text(9.6, 3.02, f"{sms} SMs in all", ha="center", va="top", fontsize=SMALL)
    return fig
