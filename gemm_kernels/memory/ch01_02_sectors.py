"""Which element each lane of a warp touches, and what that costs in 32-byte sectors.

A model of chapters 01-02's global loads: for one warp and one step k of the dot
product, the addresses the 32 lanes load from A and from B, the sectors (aligned
32-byte pieces of memory, the unit the L1/L2 move) and the 128-byte cache lines those
addresses fall in; and, next to a recorded Nsight Compute study, how many of those lines
and sectors one SM handled per cycle.
"""
from __future__ import annotations

SECTOR = 32
LINE = 128
# The L1 data pipe's wavefronts for global loads: one per 128-byte line a request
# touches (measured on the H200: 2, 3, 5, 9 and 33 per warp and step, the model's lines).
# The output-stage count (l1tex__t_output_wavefronts_...) counts something else.
WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_lgds_cmd_read.sum"
L1_BUSY = "l1tex__throughput.avg.pct_of_peak_sustained_active"


def _element(kernel: str, p: dict, block: tuple[int, int], t: int) -> tuple[int, int]:
    """(row, col) of C that thread `t` (linear index within its block, threadIdx.x
    fastest) of block `block` = (blockIdx.x, blockIdx.y) computes, from the kernels'
    index expressions."""
    from gemm_kernels.core.kernels import get
    bx, by, _ = get(kernel).threads(p)
    if kernel == "naive":
        x, y = block[0] * bx + t % bx, block[1] * by + t // bx
        return (x, y) if p["MAPPING"] == "x->row" else (y, x)
    if kernel == "coalesced":
        # GRID only numbers the tiles differently: x->row walks tile rows with blockIdx.x
        tile_row, tile_col = block if p["GRID"] == "x->row" else block[::-1]
        return tile_row * p["BLOCK"] + t // p["BLOCK"], tile_col * p["BLOCK"] + t % p["BLOCK"]
    raise ValueError(f"the access model covers naive and coalesced, not {kernel}")


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
        row, col = _element(kernel, p, (0, 0), t)
        active = row < M and col < N
        out.append({"lane": lane, "row": row, "col": col, "active": active,
                    "A": (row * K + k) if active else None,
                    "B": (k * N + col) if active else None})
    return out


def sectors(indices, elem_bytes: int = 4) -> int:
    """Distinct 32-byte sectors touched by element indices (None = inactive lane)."""
    return len({i * elem_bytes // SECTOR for i in indices if i is not None})


def lines(indices, elem_bytes: int = 4) -> int:
    """Distinct 128-byte cache lines touched by element indices (None = inactive lane)."""
    return len({i * elem_bytes // LINE for i in indices if i is not None})


def sector_table(configs, M=4096, N=4096, K=4096):
    """Per configuration, one warp at one step k: the 32-byte sectors its load of A and
    its load of B touch, their average (what Nsight Compute calls sectors per request),
    and the distinct 128-byte cache lines the two loads touch. Every row is one
    multiply-add per active lane."""
    from gemm_kernels.core.kernels import get
    from gemm_kernels.core.table import Table
    rows = []
    for kernel, params in configs:
        lanes = warp_elements(kernel, params, M, N, K)
        sa, sb = sectors(l["A"] for l in lanes), sectors(l["B"] for l in lanes)
        rows.append({"kernel": kernel, "params": get(kernel).resolve(params),
                     "active lanes": sum(l["active"] for l in lanes),
                     "A sectors": sa, "B sectors": sb,
                     # a whole number shows without ".0"
                     "sectors per request": (sa + sb) / 2 if (sa + sb) % 2 else (sa + sb) // 2,
                     "128-byte lines (A + B)": lines(l["A"] for l in lanes)
                     + lines(l["B"] for l in lanes)})
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


def _settings(kernel: str, params: dict) -> str:
    from gemm_kernels.core.kernels import get
    return ", ".join(f"{n} = {v}" for n, v in get(kernel).resolve(params).items())


def thread_map(kernel: str, configs, size: int = 32):
    """Side by side, one panel per configuration in `configs` (a list of params): the
    top-left size x size corner of C, each element coloured by the warp of its block
    that computes it, thick lines between blocks, and the 32 lanes of warp 0 of block
    (0, 0) labelled with their lane number. Returns the figure."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    from gemm_kernels.core import style
    from gemm_kernels.core.kernels import get
    kern = get(kernel)
    fig, axes = plt.subplots(1, len(configs), figsize=(7.2 * len(configs), 7.9), squeeze=False)
    # Light, distinct shades for the warps; warp 0 of the first block gets a dark one of
    # its own, so that its labelled lanes stand out.
    light = ListedColormap([c for c in plt.get_cmap("tab20").colors[1::2]])
    owned, boundaries = [], False
    for ax, params in zip(axes[0], configs):
        p = kern.resolve(params)
        bx, by, _ = kern.threads(p)
        warp = np.full((size, size), -1)
        block_id = np.full((size, size), -1)
        lane0 = {}
        blocks = -(-size // p["BLOCK"])
        for b in range(blocks * blocks):
            blk = (b % blocks, b // blocks)
            for t in range(bx * by):
                r, c = _element(kernel, p, blk, t)
                if r < size and c < size:
                    warp[r, c], block_id[r, c] = t // 32, b
                    if b == 0 and t < 32:
                        lane0[(r, c)] = t
        shade = np.ma.masked_less(warp % light.N, 0)
        ax.imshow(shade, cmap=light, vmin=0, vmax=light.N - 1)
        ax.imshow(np.ma.masked_where(warp != 0, np.where(block_id == 0, 1.0, np.nan)),
                  cmap=ListedColormap(["#08306b"]), vmin=0, vmax=1)
        for r in range(size):             # block boundaries
            for c in range(size):
                if c + 1 < size and block_id[r, c] != block_id[r, c + 1]:
                    boundaries = True
                    ax.plot([c + .5, c + .5], [r - .5, r + .5], color="black", lw=2)
                if r + 1 < size and block_id[r, c] != block_id[r + 1, c]:
                    boundaries = True
                    ax.plot([c - .5, c + .5], [r + .5, r + .5], color="black", lw=2)
        ax.set_xlim(-.5, size - .5)
        ax.set_ylim(size - .5, -.5)
        owned.append((ax, lane0))
        lanes = warp_elements(kernel, params, size, size, size)
        style.fit_title(ax, f"{_settings(kernel, params)}\nwarp 0 (dark, lanes numbered) "
                            f"computes {describe_lanes(lanes)}")
        ax.set_xlabel("column of C")
        ax.set_ylabel("row of C")
    fig.text(0.5, 0.01, "colour: the warp of its block that computes the element; " +
             ("thick lines: block boundaries" if boundaries else "the corner is one block"),
             ha="center", fontsize=9)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    for ax, lane0 in owned:               # sized to the cells as laid out
        pts = style.label_points(*style.cell_points(ax, size, size), chars=2)
        if pts >= style.MIN_LABEL_POINTS:
            for (r, c), lane in lane0.items():
                ax.text(c, r, lane, ha="center", va="center", fontsize=pts, color="white")
    return fig


def sector_strips(kernel: str, configs, per_line: int = 16):
    """One panel per configuration: the 32-byte sectors that warp 0's load of A and its
    load of B touch at step k = 0, each drawn as a box of 8 floats with the floats some
    lane loads filled in (`per_line` boxes to a line). Sectors are drawn side by side
    wherever they lie in memory. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    per, gap = SECTOR // 4, 1
    M = N = K = 4096
    data = []
    for params in configs:
        lanes = [l for l in warp_elements(kernel, params, M, N, K) if l["active"]]
        data.append((params, {m: sorted({l[m] for l in lanes}) for m in "AB"}))

    def lines(idx):
        return -(-len({i // per for i in idx}) // per_line)
    heights = [sum(lines(idx[m]) for m in "AB") + 0.6 for _, idx in data]
    fig, axes = plt.subplots(len(configs), 1, figsize=(12, 0.55 * sum(heights) + 0.8),
                             squeeze=False, gridspec_kw={"height_ratios": heights})
    for ax, (params, idx) in zip(axes[:, 0], data):
        y = 0
        for m in "AB":
            secs = sorted({i // per for i in idx[m]})
            used = set(idx[m])
            ax.text(-1, y + 0.4, m, ha="right", va="center", fontsize=11, weight="bold")
            for n, sec in enumerate(secs):
                x0, yy = (n % per_line) * (per + gap), y + n // per_line
                for f in range(per):
                    if sec * per + f in used:
                        ax.add_patch(Rectangle((x0 + f, yy), 1, 0.8, lw=0, fc="#e8590c"))
                ax.add_patch(Rectangle((x0, yy), per, 0.8, lw=0.8, ec="black", fc="none"))
            ax.text(min(len(secs), per_line) * (per + gap), y + 0.4,
                    f" {len(secs)} sector{'s' if len(secs) > 1 else ''} "
                    f"({SECTOR * len(secs):,} bytes) looked up for {len(used)} "
                    f"float{'s' if len(used) > 1 else ''} loaded",
                    ha="left", va="center", fontsize=9)
            y += lines(idx[m])
        ax.set_xlim(-3, per_line * (per + gap) + 55)
        ax.set_ylim(y, -0.1)
        ax.set_axis_off()
        ax.set_title(_settings(kernel, params), fontsize=10, loc="left")
    fig.suptitle("warp 0 at step k = 0: the sectors its two loads touch (box: one 32-byte "
                 "sector, 8 floats; orange: a float some lane loads)", fontsize=10)
    fig.tight_layout()
    return fig


def line_rate(study: str = "ch02_caches"):
    """Per step of a recorded Nsight Compute study of the naive or coalesced kernel: the
    128-byte lines and the sectors one warp's two loads touch at one step k (the model
    above), and how many of each one SM worked through per cycle over the whole kernel,
    from the recorded `sm__cycles_elapsed.avg` (cycles of one SM: the clock does not
    enter). A step without a recorded row shows "-"."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import records, studies
    rec = records.current()
    sms = rec.device["sm_count"] if rec else None
    pairs = studies.results(study)
    # The L1's own count of the wavefronts it spent on global loads, where the study
    # recorded it: the direct check of the line count.
    measured = any(row and WAVEFRONTS in row["metrics"] for _, row in pairs)
    out = []
    for step, row in pairs:
        M, N, K = row["shape"] if row else studies.get(study).shapes[0]
        lanes = warp_elements(step.kernel, step.params, M, N, K)
        active = sum(l["active"] for l in lanes)
        n_lines = lines(l["A"] for l in lanes) + lines(l["B"] for l in lanes)
        n_sectors = sectors(l["A"] for l in lanes) + sectors(l["B"] for l in lanes)
        entry = {"step": f"{step.kernel}, {_settings(step.kernel, step.params)}",
                 "lines per warp and k": n_lines, "sectors per warp and k": n_sectors,
                 "SM cycles (millions)": "-", "lines per SM cycle": "-",
                 "sectors per SM cycle": "-"}
        if measured:
            entry["L1 wavefronts per warp and k"] = "-"
            entry["L1 busy"] = "-"
            if row is not None and WAVEFRONTS in row["metrics"]:
                entry["L1 wavefronts per warp and k"] = \
                    f"{row['metrics'][WAVEFRONTS] / (M * N // active * K):.2f}"
                entry["L1 busy"] = f"{row['metrics'].get(L1_BUSY, float('nan')):.0f}%"
        if row is not None and sms:
            cycles = row["metrics"]["sm__cycles_elapsed.avg"]
            warp_steps = M * N // active * K / sms          # one SM's share
            # two decimals kept as text: the table would drop the zeros of 1.00
            entry.update({"SM cycles (millions)": f"{cycles / 1e6:.1f}",
                          "lines per SM cycle": f"{warp_steps * n_lines / cycles:.2f}",
                          "sectors per SM cycle": f"{warp_steps * n_sectors / cycles:.2f}"})
        out.append(entry)
    shape = "x".join(map(str, studies.get(study).shapes[0]))
    return Table(out, list(out[0]), title=f"two loads per warp and step k, at {shape}; "
                 "cycles recorded by Nsight Compute")


def occupancy_table(kernel: str, configs):
    """Per configuration (a list of params) of the naive or coalesced kernel: threads
    per block, resident blocks and occupancy per SM, and the warp's active lanes, so
    that block sizes can be compared at equal (or unequal) occupancy."""
    from gemm_kernels.core import analysis
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import lookup
    rows = []
    for params in configs:
        timed = (lookup.binary(kernel, params) or {}).get("registers")
        occ = analysis.kernel_occupancy(kernel, params, registers=timed)
        rows.append({"settings": _settings(kernel, params),
                     "registers": timed or analysis.summary(kernel, params)["registers"],
                     "threads per block": occ.threads_per_block,
                     "blocks per SM": occ.blocks_per_sm,
                     "occupancy": analysis.percent(occ.occupancy),
                     "active lanes per warp": sum(l["active"] for l in
                                                  warp_elements(kernel, params, 4096, 4096, 4096))})
    return Table(rows, list(rows[0]), title=f"{kernel}: registers and occupancy per SM (sm_90)")
