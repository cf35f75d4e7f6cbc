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
# The L1 data pipe's wavefronts for global loads. On the H200 they follow the most
# distinct words any one of the 32 banks must deliver (`bank_words`), as for shared
# memory: at 2048^3 that equals the 128-byte lines (2, 3, 5, 9 and 33 per warp and step),
# at 2047^3 it does and the lines do not (study ch02_alignment_l1).
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


def bank_words(indices, elem_bytes: int = 4) -> int:
    """The most distinct 4-byte words any one of the L1's 32 banks must deliver for these
    element indices (None = inactive lane; a word several lanes read counts once, a
    broadcast): the wavefronts of the same load from shared memory (`banks.wavefronts`).
    Rows a power-of-two number of words apart share a bank, so there it counts the rows,
    as `lines` does; at other strides the two counts part."""
    from gemm_kernels.memory import banks
    return banks.wavefronts([None if i is None else i * elem_bytes for i in indices],
                            elem_bytes)


def sector_table(configs, M=4096, N=4096, K=4096, brief=False, banks=False):
    """Per configuration, one warp at one step k: the 32-byte sectors its load of A and
    its load of B touch, their sum (per step) and average (what Nsight Compute calls
    sectors per request),
    and the distinct 128-byte cache lines the two loads touch. Every row is one
    multiply-add per active lane. `brief`: the kernel and the active lanes are left out
    where every row has the same (the kernel then named in the title), so that a narrow
    table keeps only the columns that vary. `banks`: a last column, the words the two
    loads queue on their busiest L1 bank (`bank_words`), the other count the L1's cycles
    may follow, so that lines and bank words are read side by side."""
    from gemm_kernels.core.kernels import get
    from gemm_kernels.core.table import Table
    rows = []
    for kernel, params in configs:
        lanes = warp_elements(kernel, params, M, N, K)
        sa, sb = sectors(l["A"] for l in lanes), sectors(l["B"] for l in lanes)
        rows.append({"kernel": kernel, "params": get(kernel).resolve(params),
                     "settings": _settings(kernel, params),
                     "active lanes": sum(l["active"] for l in lanes),
                     "A sectors": sa, "B sectors": sb,
                     # per step (both loads) beside per request (per load), so that the
                     # line table's per-step count and the profiler's per-request one
                     # read from one table
                     "sectors per step (A + B)": sa + sb,
                     # a whole number shows without ".0"
                     "sectors per request": (sa + sb) / 2 if (sa + sb) % 2 else (sa + sb) // 2,
                     "128-byte lines (A + B)": lines(l["A"] for l in lanes)
                     + lines(l["B"] for l in lanes)})
        if banks:
            rows[-1]["words on the busiest bank (A + B)"] = (bank_words(l["A"] for l in lanes)
                                                             + bank_words(l["B"] for l in lanes))
    same = {c for c in ("kernel", "active lanes") if len({r[c] for r in rows}) == 1}
    drop = {"params"} | (same if brief else set())
    who = f"{rows[0]['kernel']}, " if "kernel" in drop else ""
    return Table(rows, [c for c in rows[0] if c not in drop],
                 title=f"{who}one warp, one step k: the 32-byte sectors and 128-byte lines "
                       "its loads touch" + (", and the words they queue on the busiest L1 bank"
                                            if banks else ""))


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
    settings = _settings(kernel, params)
    active = sum(l["active"] for l in lanes)
    unlabelled = "" if readable else " (too small to label the lanes)"
    title = (f"{kernel}, {settings}: the {active} lanes of warp 0 compute "
             f"{describe_lanes(lanes)} of C{unlabelled}")
    style.fit_title(ax, title)
    ax.set_xlabel("column of C")
    ax.set_ylabel("row of C")
    return ax


def sector_picture(kernel: str, params: dict, k_cols: int = 16):
    """Warp 0 at step k = 0, in three panels: the C elements its lanes own (as
    `lane_picture`, cropped to the warp's rows and to whole sectors of its columns), then
    the elements of A and of B they load, each labelled with how many lanes load it, on a
    light shade for every 32-byte sector the load touches (thin lines: sector boundaries,
    8 floats). A warp a few rows tall is drawn in a column of panels; a warp down a
    column of C (32 rows) side by side, C and A next to each other and B under A.
    Returns the figure; its first three axes are C, A and B."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    from gemm_kernels.core import style
    M = N = K = 4096
    lanes = [l for l in warp_elements(kernel, params, M, N, K) if l["active"]]
    per = SECTOR // 4
    rows = max(l["row"] for l in lanes) + 1
    cols = -(-(max(l["col"] for l in lanes) + 1) // per) * per
    b_cols = max(cols, k_cols)
    tall = rows > 8
    cell = 0.22 if tall else CELL_INCHES
    if tall:
        fig = plt.figure(figsize=(cell * (cols + k_cols) + 5.5, cell * (rows + 1) + 3.2))
        grid = fig.add_gridspec(2, 2, width_ratios=[cols + 3, k_cols],
                                height_ratios=[rows, 3])
        axes = [fig.add_subplot(grid[:, 0]), fig.add_subplot(grid[0, 1]),
                fig.add_subplot(grid[1, 1])]
    else:
        fig, axes = plt.subplots(3, 1, figsize=(max(7, cell * max(cols, b_cols) + 2),
                                                cell * (2 * rows + 1) + 4.2),
                                 gridspec_kw={"height_ratios": [rows, rows, 1]})
    lane_picture(kernel, params, rows=rows, cols=cols, ax=axes[0])
    axes[0].set_yticks(range(rows) if rows <= 8 else range(0, rows, 4))
    for ax, name, shape, width in ((axes[1], "A", (rows, k_cols), K),
                                   (axes[2], "B", (1, b_cols), N)):
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
        for y in range(1, shape[0]):
            ax.axhline(y - 0.5, color="0.85", lw=0.5)
        n_sec, n_lines = sectors(counts), lines(counts)
        what = "row k = 0 of B" if name == "B" else "columns k = 0 to 15 of A"
        style.fit_title(ax, f"{name}: {what}; the warp loads {len(counts)} element"
                            f"{'s' if len(counts) > 1 else ''} in {n_sec} sector"
                            f"{'s' if n_sec > 1 else ''} ({n_lines} line"
                            f"{'s' if n_lines > 1 else ''} of 128 bytes); the number in a box: "
                            "how many lanes load that element", fontsize=9)
        ax.set_xlabel("column of B" if name == "B" else "k")
        ax.set_ylabel("row of A" if name == "A" else "")
        ax.set_yticks(range(shape[0]) if name == "A" and shape[0] <= 8 else
                      range(0, shape[0], 4) if name == "A" else [])
    fig.tight_layout()
    return fig


def _settings(kernel: str, params: dict) -> str:
    """The settings in words, e.g. "BLOCK = 32, MAPPING = x->row". The coalesced
    kernel's block order (GRID) is named only where it is not the default: chapter 02
    keeps it there throughout."""
    from gemm_kernels.core.kernels import get
    k = get(kernel)
    p, default = k.resolve(params), k.defaults()
    return ", ".join(f"{n} = {v}" for n, v in p.items()
                     if not (n == "GRID" and v == default.get("GRID")))


def label(kernel: str, params: dict) -> str:
    """"naive, BLOCK = 32, MAPPING = x->row": a configuration as the chapters name it."""
    return f"{kernel}, {_settings(kernel, params)}"


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


# ---------------------------------------------------------------- rates and the line limit

# The distinct 128-byte lines the L1's tag stage looks up per wavefront (measured on an
# H200: 32 lanes in 32 different lines cost 8 tag wavefronts, `ch02_naive_alignment_l1`).
TAG_LINES = 4


def line_limit(kernel: str, params: dict, props: dict | None = None,
               shape=(4096, 4096, 4096), steps: int = 1) -> dict:
    """What one L1 wavefront per SM and cycle allows, with a warp's wavefronts counted two
    ways. At one step k a warp does one multiply-add (2 FLOP) per active lane, and its two
    loads touch `lines` distinct 128-byte lines and need `banks` cycles of the 32 banks
    (`bank_words`, per load). If the L1 of an SM passes one wavefront per cycle, the whole
    GPU does at most

        SMs x clock x 2 x active lanes / wavefronts per step   FLOP per second,

    'GFLOP/s' with wavefronts = lines, 'bank GFLOP/s' with wavefronts = banks.

    The L1 passes a load through two stages, each one wavefront per cycle: the tag stage
    looks up at most `TAG_LINES` distinct lines per wavefront (`tags`, ceil(lines / 4) per
    load), the data stage delivers at most one word per bank per wavefront (`banks`). The
    slower stage sets the time: 'stage GFLOP/s' with wavefronts = max(tags, banks).

    `shape` is (M, N, K); with `steps` > 1 the counts are the mean over steps k = 0 ..
    steps-1, which differ where a row of B (N floats) is not a whole number of lines, so
    that its rows start at different places in a line (misaligned).
    {'lanes', 'sectors', 'lines', 'banks', 'tags', 'GFLOP/s', 'bank GFLOP/s',
    'stage GFLOP/s'}; the rates are None
    where the device's SM count or clock is unknown."""
    if props is None:
        from gemm_kernels.measure import records
        props = records.described_device()
    n_lines = n_sectors = n_banks = n_tags = 0
    for k in range(steps):
        warp = warp_elements(kernel, params, *shape, k=k)
        for operand in ("A", "B"):
            idx = [l[operand] for l in warp]
            n_lines += lines(idx)
            n_tags += -(-lines(idx) // TAG_LINES)
            n_sectors += sectors(idx)
            n_banks += bank_words(idx)
    lanes = sum(l["active"] for l in warp)
    n_lines, n_sectors, n_banks, n_tags = (_whole(x / steps)
                                           for x in (n_lines, n_sectors, n_banks, n_tags))
    sms, mhz = props.get("sm_count"), props.get("sm_clock_mhz")

    def bound(wavefronts):
        return sms * mhz * 1e6 * 2 * lanes / wavefronts / 1e9 if sms and mhz else None
    return {"lanes": lanes, "sectors": n_sectors, "lines": n_lines, "banks": n_banks,
            "tags": n_tags, "GFLOP/s": bound(n_lines), "bank GFLOP/s": bound(n_banks),
            "stage GFLOP/s": bound(max(n_tags, n_banks))}


def _whole(x: float):
    """An int where a mean is whole (so that tables show 2, not 2.0)."""
    return int(x) if x == int(x) else x


def _rate(kernel: str, params: dict | None, size: int) -> dict:
    from gemm_kernels.measure import lookup
    return lookup.measure_or_lookup(kernel, (size,) * 3, params)


def rate_table(kernels, sizes=(1024, 2048, 4096), shares=None):
    """One row per size: each kernel's GFLOP/s (the median of its timed runs) and its
    share of the cuBLAS run timed beside it in the same process, with that cuBLAS rate as
    a column (one per kernel: each kernel had its own), so every share can be checked.
    `shares` names the kernels whose cuBLAS columns to show (all by default; fewer keep
    the table narrow where another chapter already showed a kernel's share).
    The title says how far the fastest and slowest run of the kernels (not cuBLAS's,
    which spread more) lay from their median in any row."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import lookup, records
    rows, spread = [], 0.0
    for n in sizes:
        row = {"size": n}
        for k in kernels:
            r = _rate(k, None, n)
            g = r["gflops"]
            ref = (r.get("reference") or {}).get("gflops", {}).get("median")
            row[f"{k} (GFLOP/s)"] = g["median"]
            if shares is None or k in shares:
                row[("cuBLAS, timed beside it (GFLOP/s)" if len(kernels) == 1 else
                     f"cuBLAS beside {k} (GFLOP/s)")] = ref
                row[f"{k}: % of cuBLAS"] = lookup.share(r)
            spread = max(spread, (g["max"] - g["min"]) / g["median"])
        if len(kernels) == 2:
            a, b = kernels
            row[f"{b} / {a}"] = f"{row[f'{b} (GFLOP/s)'] / row[f'{a} (GFLOP/s)']:.1f} x"
        rows.append(row)
    spread_text = f"{spread:.0%}" if spread >= 0.01 else f"{spread:.1%}"
    return Table(rows, list(rows[0]),
                 title=f"{records.source()}: medians of the timed runs (in any row, the "
                       f"fastest and the slowest run of {' and of '.join(kernels)} differ "
                       f"by {spread_text} of its median or less; cuBLAS's calls spread "
                       f"more, as chapter 00 shows)")


def limit_plot(configs, size: int = 2048):
    """Bars: per configuration, the measured rate in front of the rate one L1 wavefront
    per SM and cycle allows, counting a wavefront per line (one count at 2048, whose rows
    share a bank), with the measured share written at its end. Returns the figure."""
    import matplotlib.pyplot as plt
    from gemm_kernels.measure import records
    props = records.described_device()
    names, rates, limits = [], [], []
    for kernel, params in configs:
        names.append(f"{label(kernel, params)}  ({line_limit(kernel, params, props)['lines']}"
                     " lines)")
        rates.append(_rate(kernel, params, size)["gflops"]["median"])
        limits.append(line_limit(kernel, params, props)["GFLOP/s"] or 0)
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(configs) + 1.9))
    y = list(range(len(configs)))[::-1]
    ax.barh(y, limits, color="#d9d9d9", height=0.75,
            label="one wavefront per SM and cycle allows (here one per 128-byte line)")
    ax.barh(y, rates, color="#4c78a8", height=0.45, label=f"measured at {size}^3")
    for yy, r, lim in zip(y, rates, limits):
        ax.text(max(r, lim) * 1.01, yy, f"{r:,.0f} of {lim:,.0f} ({r / lim:.0%})" if lim
                else f"{r:,.0f}", va="center", fontsize=8)
    ax.set_yticks(y, names, fontsize=9)
    ax.set_xlim(0, max(limits + rates) * 1.4)
    ax.set_xlabel("GFLOP/s")
    sms, mhz = props.get("sm_count"), props.get("sm_clock_mhz")
    ax.set_title(f"{props.get('name', 'the GPU')}: {sms} SMs x {mhz:,.0f} MHz x 2 FLOP per "
                 "active lane / lines per step" if sms and mhz else "the line limit",
                 fontsize=10)
    ax.legend(loc="upper right", fontsize=8, frameon=False, bbox_to_anchor=(1, -0.12), ncol=2)
    fig.text(0.01, 0.01, records.source(), fontsize=8, color="0.35")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


# ---------------------------------------------------------------- the profiler's counts

SECTORS_LD = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
REQUESTS_LD = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
L1_HIT = "l1tex__t_sector_hit_rate.pct"
CYCLES = "sm__cycles_elapsed.avg"
DURATION = "gpu__time_duration.sum"


def _warp_steps(kernel, params, shape) -> tuple[int, int]:
    """(active lanes per warp, warp-steps in the whole problem)."""
    M, N, K = shape
    lanes = sum(l["active"] for l in warp_elements(kernel, params, M, N, K))
    return lanes, M * N // lanes * K


def requests_table(study: str = "ch02_l1_lines"):
    """Per step of a profiled study: the load requests and sectors per request Nsight
    Compute counted, next to the sectors per request of the model (`sector_table`)."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import studies
    rows = []
    for step, row in studies.results(study):
        model = sector_table([(step.kernel, step.params)])[0]["sectors per request"]
        m = (row or {}).get("metrics", {})
        rows.append({"configuration": label(step.kernel, step.params),
                     "load requests (millions)": m[REQUESTS_LD] / 1e6 if REQUESTS_LD in m else None,
                     # one decimal in both columns, so that 2 and 2.5 read alike
                     "sectors per request, counted": (f"{m[SECTORS_LD] / m[REQUESTS_LD]:.1f}"
                                                      if REQUESTS_LD in m else None),
                     "sectors per request, model": f"{model:.1f}"})
    shape = " x ".join(map(str, studies.get(study).shapes[0]))
    return Table(rows, list(rows[0]), title=f"global loads at {shape}, counted by Nsight "
                 "Compute, and the model's count")


def l1_table(study: str = "ch02_l1_lines"):
    """Per step of a profiled study, what the L1 did: the lines per warp and step of the
    model; the wavefronts its data pipe spent on global loads per warp and step
    (`WAVEFRONTS`); those wavefronts per SM and cycle; `L1_BUSY`, the utilisation of
    its busiest stage; and its sector hit rate."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import records, studies
    props = records.recorded_device()      # the GPU the rows were profiled on
    sms = props.get("sm_count")
    rows = []
    for step, row in studies.results(study):
        shape = tuple(row["shape"]) if row else studies.get(study).shapes[0]
        m = (row or {}).get("metrics", {})
        _, steps = _warp_steps(step.kernel, step.params, shape)
        n_lines = line_limit(step.kernel, step.params, props)["lines"]
        wf = m.get(WAVEFRONTS)
        rows.append({"configuration": label(step.kernel, step.params),
                     "lines per warp and step (model)": n_lines,
                     "L1 data-stage wavefronts per warp and step": f"{wf / steps:.2f}" if wf else "-",
                     "L1 data-stage wavefronts per SM and cycle": (f"{wf / sms / m[CYCLES]:.2f}"
                                                        if wf and sms and CYCLES in m else "-"),
                     "busiest L1 stage (% of its peak)": m.get(L1_BUSY),
                     "L1 hit rate (%)": m.get(L1_HIT)})
    shape = " x ".join(map(str, studies.get(study).shapes[0]))
    return Table(rows, list(rows[0]), title=f"the L1 at {shape}, counted by Nsight Compute")


def clock_check(study: str = "ch02_l1_lines", size: int | None = None) -> list[dict]:
    """Per step of a profiled study: the SM clock while it was profiled (its SM cycles
    over its duration), the ratio of its timed rate to its rate under the profiler, and
    the clock the timed run must have had if it took the same number of cycles."""
    from gemm_kernels.measure import studies
    out = []
    for step, row in studies.results(study):
        if row is None:
            continue
        m, shape = row["metrics"], tuple(row["shape"])
        profiled = 2 * shape[0] * shape[1] * shape[2] / m[DURATION]          # GFLOP/s
        timed = _rate(step.kernel, step.params, shape[0])["gflops"]["median"]
        ghz = m[CYCLES] / m[DURATION]
        out.append({"configuration": label(step.kernel, step.params),
                    "profiled clock (MHz)": ghz * 1e3, "timed / profiled": timed / profiled,
                    "timed clock (MHz)": ghz * 1e3 * timed / profiled})
    return out


# ---------------------------------------------------------------- predict, then check

PREDICT = ("naive", {"BLOCK": 4, "MAPPING": "x->row"})
PREDICT_FROM = ("naive", {"BLOCK": 8, "MAPPING": "x->row"})


def check_prediction(line_model, occupancy_model, size: int = 2048) -> None:
    """Chapter 02's prediction for the naive kernel, x->row, BLOCK = 4 at size^3: (a)
    from the line limit, (b) as half of BLOCK = 8's rate (half the warps per SM). Says
    whether each number is the model's (within 2%); a wrong one gets a question back,
    never the model's number, and the measured rate comes only once both are right."""
    if line_model is None or occupancy_model is None:
        print("Write both predictions first (numbers in GFLOP/s), then run this cell again.")
        return
    lim = line_limit(*PREDICT)
    half = _rate(*PREDICT_FROM, size)["gflops"]["median"] / 2
    hints = {"(a) the line limit": "Not yet. How many lanes of a warp does a block of "
                                   "4 x 4 threads fill, how many lines do their loads touch "
                                   "per step, and what does the limit's formula give for them?",
             "(b) half the warps": "Not yet. How many warps does an SM hold at BLOCK = 4 "
                                   "and at BLOCK = 8, and what is BLOCK = 8's measured rate "
                                   "scaled by their ratio?"}
    right = 0
    for name, got, want, how in (
            ("(a) the line limit", line_model, lim["GFLOP/s"],
             f"SMs x clock x 2 FLOP x {lim['lanes']} active lanes / {lim['lines']} lines"),
            ("(b) half the warps", occupancy_model, half, "half the rate of BLOCK = 8")):
        ok = abs(got / want - 1) <= 0.02
        right += ok
        print(f"{name}: you wrote {got:,.0f} GFLOP/s. "
              + (f"That is the model's number ({how})." if ok else hints[name]))
    if right < 2:
        print("Correct the prediction marked 'Not yet' and run the cell again: the "
              "measured rate comes once both are right.")
        return
    rate = _rate(*PREDICT, size)["gflops"]["median"]
    print(f"Measured at {size}^3: {rate:,.0f} GFLOP/s: {rate / lim['GFLOP/s']:.0%} of (a), "
          f"{rate / half:.0%} of (b).")


def loop_mix(configs, keep=None):
    """Per configuration (kernel, params), or (name, kernel, params) for a kernel that is
    not the registry's (a variant of its source, named by `name`): the instructions of
    the compiled main loop, by opcode (from nvdisasm, run here): the same counts mean the
    same loop. With `keep` (opcodes, e.g. ("LDG", "FFMA")) only those get a column and
    the rest are summed under "other", so that a first reading meets no unexplained
    opcode."""
    from gemm_kernels.core import analysis
    from gemm_kernels.core.table import Table
    rows, ops = [], []
    for config in configs:
        name, kernel, params = config if len(config) == 3 else (None, *config)
        h = analysis.summary(kernel, params)["loop_histogram"]
        if keep is not None:
            h = {**{op: h.get(op, 0) for op in keep},
                 "other": sum(n for op, n in h.items() if op not in keep)}
        ops += [op for op in h if op not in ops]
        rows.append({"configuration": name or label(kernel, params), **h})
    return Table(rows, ["configuration", *ops],
                 title="instructions in one pass of the compiled loop (static analysis, sm_90)")


def caches_table(study: str = "ch02_caches"):
    """A load's way down the memory hierarchy, per step of the study: requests, sectors,
    the L1's hit rate, sectors fetched from L2, the L2's hit rate, bytes from DRAM."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import studies
    columns = {"load requests (millions)": (REQUESTS_LD, 1e6),
               "sectors requested (millions)": (SECTORS_LD, 1e6),
               "L1 hit rate (%)": (L1_HIT, None),
               "sectors fetched from L2 (millions)": ("lts__t_sectors_srcunit_tex_op_read.sum", 1e6),
               "L2 hit rate (%)": ("lts__t_sector_hit_rate.pct", None),
               "read from DRAM (GB)": ("dram__bytes_read.sum", 1e9)}
    rows = []
    for step, row in studies.results(study):
        m = (row or {}).get("metrics", {})
        rows.append({"configuration": label(step.kernel, step.params),
                     **{h: (m[k] / d if d else m[k]) if k in m else None
                        for h, (k, d) in columns.items()}})
    shape = " x ".join(map(str, studies.get(study).shapes[0]))
    return Table(rows, ["configuration", *columns],
                 title=f"a load's way down the memory hierarchy at {shape}, Nsight Compute")
