"""Which element each lane of a warp touches, and what that costs in 32-byte sectors.

A model of chapters 01-02's global loads: for one warp and one step k of the dot
product, the addresses the 32 lanes load from A and from B, and the sectors (aligned
32-byte pieces of memory, the unit the L1/L2 move) those addresses fall in.
"""
from __future__ import annotations

SECTOR = 32


def warp_elements(kernel: str, params: dict, M: int, N: int, K: int, k: int = 0,
                  warp: int = 0) -> list[dict]:
    """Per lane of `warp` in block (0, 0): its (row, col) of C and the element of A and
    of B it loads at step k, for the naive and coalesced kernels."""
    from gemm_kernels.core.kernels import get
    kern = get(kernel)
    p = kern.resolve(params)
    bx, by, _ = kern.threads(p)
    out = []
    for lane in range(32):
        t = warp * 32 + lane
        if t >= bx * by:                    # a block smaller than a warp leaves lanes empty
            out.append({"lane": lane, "row": None, "col": None, "active": False,
                        "A": None, "B": None})
            continue
        tx, ty = t % bx, t // bx            # threadIdx.x varies fastest within a warp
        if kernel == "naive":
            x, y = tx, ty
            row, col = (x, y) if p["MAPPING"] == "x->row" else (y, x)
        elif kernel == "coalesced":
            row, col = t // p["BLOCK"], t % p["BLOCK"]
        else:
            raise ValueError(f"the access model covers naive and coalesced, not {kernel}")
        active = row < M and col < N
        out.append({"lane": lane, "row": row, "col": col, "active": active,
                    "A": (row * K + k) if active else None,
                    "B": (k * N + col) if active else None})
    return out


def sectors(indices, elem_bytes: int = 4) -> int:
    """Distinct 32-byte sectors touched by element indices (None = inactive lane)."""
    return len({i * elem_bytes // SECTOR for i in indices if i is not None})


def sector_table(configs, M=4096, N=4096, K=4096):
    """Sectors per warp-wide load of A and of B, and bytes moved per useful byte."""
    from gemm_kernels.core.table import Table
    rows = []
    for kernel, params in configs:
        lanes = warp_elements(kernel, params, M, N, K)
        sa, sb = sectors(l["A"] for l in lanes), sectors(l["B"] for l in lanes)
        used = 4 * (len({l["A"] for l in lanes if l["active"]}) +
                    len({l["B"] for l in lanes if l["active"]}))
        rows.append({"kernel": kernel, "params": params,
                     "active lanes": sum(l["active"] for l in lanes),
                     "A sectors": sa, "B sectors": sb,
                     "bytes fetched": SECTOR * (sa + sb), "bytes used": used,
                     "efficiency": f"{used / (SECTOR * (sa + sb)):.0%}"})
    return Table(rows, list(rows[0]), title="one warp, one step k: 32-byte sectors per load")


def describe_lanes(lanes) -> str:
    """Where the active lanes of `warp_elements` sit in C, in words."""
    act = [l for l in lanes if l["active"]]
    rows, cols = sorted({l["row"] for l in act}), sorted({l["col"] for l in act})
    if len(cols) == 1:
        return f"rows {rows[0]} to {rows[-1]} of column {cols[0]}, one lane per row"
    if len(rows) == 1:
        return f"columns {cols[0]} to {cols[-1]} of row {rows[0]}, one lane per column"
    return f"rows {rows[0]} to {rows[-1]} and columns {cols[0]} to {cols[-1]}"


# Inches per element of C in `lane_picture`: 18 points, where a two-digit lane label fits
# at style.MAX_LABEL_POINTS.
CELL_INCHES = 0.25


def lane_picture(kernel: str, params: dict, rows: int = 8, cols: int = 40, ax=None):
    """Which C elements the 32 lanes of warp 0 own, drawn on the top-left rows x cols
    corner of C, each labelled with its lane. Without `ax`, the figure is sized to the
    corner, so the cells stay square and the labels readable whatever its shape."""
    import matplotlib.pyplot as plt
    import numpy as np
    from gemm_kernels.core import style
    from gemm_kernels.core.kernels import get
    lanes = warp_elements(kernel, params, 4096, 4096, 4096)
    grid = np.full((rows, cols), np.nan)
    for l in lanes:
        if l["active"] and l["row"] < rows and l["col"] < cols:
            grid[l["row"], l["col"]] = l["lane"]
    if ax is None:
        # At least 5 inches wide: a tall, narrow corner still leaves its title room.
        _, ax = plt.subplots(figsize=(max(5, CELL_INCHES * cols + 2), CELL_INCHES * rows + 1.6))
    im = ax.imshow(grid, cmap="viridis", vmin=0, vmax=31)
    size = style.label_points(*style.cell_points(ax, cols, rows), chars=2)
    readable = size >= style.MIN_LABEL_POINTS
    if readable:
        for (r, c), v in np.ndenumerate(grid):
            if not np.isnan(v):
                ax.text(c, r, int(v), ha="center", va="center", fontsize=size,
                        color=style.text_colour(im.cmap(im.norm(v))))
    settings = ", ".join(f"{n} = {v}" for n, v in get(kernel).resolve(params).items())
    active = sum(l["active"] for l in lanes)
    unlabelled = "" if readable else " (too small to label the lanes)"
    title = (f"{kernel}, {settings}: the {active} lanes of warp 0 compute "
             f"{describe_lanes(lanes)} of C{unlabelled}")
    style.fit_title(ax, title)
    ax.set_xlabel("column of C")
    ax.set_ylabel("row of C")
    return ax


def sector_picture(kernel: str, params: dict, rows: int = 4, cols: int = 40, k_cols: int = 16):
    """Warp 0 at step k = 0, in three panels: the C elements its lanes own (as
    `lane_picture`), then the elements of A and of B they load, each labelled with how
    many lanes load it, on a light shade for every 32-byte sector the load touches (thin
    lines: sector boundaries, 8 floats). Returns the figure."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    M = N = K = 4096
    lanes = [l for l in warp_elements(kernel, params, M, N, K) if l["active"]]
    per = SECTOR // 4
    fig, axes = plt.subplots(3, 1, figsize=(max(6, CELL_INCHES * cols + 2),
                                            CELL_INCHES * (2 * rows + 1) + 4.2),
                             gridspec_kw={"height_ratios": [rows, rows, 1]})
    lane_picture(kernel, params, rows=rows, cols=cols, ax=axes[0])
    for ax, name, shape, width in ((axes[1], "A", (rows, k_cols), K), (axes[2], "B", (1, cols), N)):
        counts = {}
        for l in lanes:
            counts[l[name]] = counts.get(l[name], 0) + 1
        grid = np.zeros(shape)
        for idx in counts:                  # shade every sector the warp touches
            r, c = divmod(idx, width)
            if name == "B":
                r = 0
            if r < shape[0]:
                c0 = c - c % per
                grid[r, c0:min(c0 + per, shape[1])] = np.maximum(grid[r, c0:c0 + per], 1)
        for idx, n in counts.items():
            r, c = divmod(idx, width)
            r = 0 if name == "B" else r
            if r < shape[0] and c < shape[1]:
                grid[r, c] = 2
                ax.text(c, r, n, ha="center", va="center", fontsize=8)
        ax.imshow(grid, cmap=ListedColormap(["white", "#fdd9b5", "#f28e2b"]), vmin=0, vmax=2,
                  aspect="equal")
        for x in range(per, shape[1], per):
            ax.axvline(x - 0.5, color="0.4", lw=0.8)
        n_sec = sectors(counts)
        what = "row k = 0 of B" if name == "B" else "column k = 0 of A (k along x)"
        ax.set_title(f"{name}: {what}; the warp loads {len(counts)} element{'s' if len(counts) > 1 else ''} "
                     f"in {n_sec} sector{'s' if n_sec > 1 else ''} (label: lanes per element)",
                     fontsize=9)
        ax.set_xlabel("column of B" if name == "B" else "k")
        ax.set_ylabel("row" if name == "A" else "")
        ax.set_yticks(range(shape[0]) if name == "A" else [])
    fig.tight_layout()
    return fig
