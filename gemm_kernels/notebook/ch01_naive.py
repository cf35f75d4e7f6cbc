"""Chapter 01's helpers: the launcher's grid and block, a picture of what one thread
computes, the naive kernel's resources in words, its compiled loop read line by line,
the profiler's word on where its loads press, and the check of the chapter's prediction.

Why a module: the chapter's cells stay one call long, and what they print (the reading
of the SASS, the occupancy arithmetic, the recorded ratio of the two mappings) is
computed from the compiler's output and the recording, never typed into the text.
"""
from __future__ import annotations

import re

from gemm_kernels.core import analysis, compiler, device
from gemm_kernels.core.kernels import get as get_kernel
from gemm_kernels.core.table import Table, fmt_number
from gemm_kernels.notebook.display import Text

KERNEL = "naive"


# ---------------------------------------------------------------- one thread's work

def dot_product_picture(M: int = 5, N: int = 7, K: int = 6, row: int = 3, col: int = 4):
    """What one thread of the naive kernel computes, drawn on small matrices laid out as
    in Boehm's article (B above C, A to its left): row `row` of A and column `col` of B,
    their cells numbered by the step k that reads them, k walking along the row of A and
    down the column of B, and the one element C[row][col] the thread writes. The
    chapter's first GEMM figure: the exercise asks for exactly this loop, and chapter
    02's sector pictures keep the layout. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    gap = 1.2
    origin = {"A": (0.0, K + gap), "B": (K + gap, 0.0), "C": (K + gap, K + gap)}
    shape = {"A": (M, K), "B": (K, N), "C": (M, N)}
    colour = {"A": "C0", "B": "C1", "C": "C3"}
    # (matrix, r, c) -> the step k that reads it ("" for C's element)
    marked = {("A", row, k): k for k in range(K)}
    marked.update({("B", k, col): k for k in range(K)})
    marked[("C", row, col)] = ""
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    for name, (x0, y0) in origin.items():
        rows, cols = shape[name]
        for r in range(rows):
            for c in range(cols):
                k = marked.get((name, r, c))
                ax.add_patch(Rectangle((x0 + c, y0 + r), 1, 1, edgecolor="0.55", lw=0.8,
                                       facecolor="white" if k is None else colour[name],
                                       alpha=1 if k is None else 0.85, gid=f"{name}[{r}][{c}]"
                                       if k is not None else None))
                if k != "" and k is not None:
                    ax.text(x0 + c + .5, y0 + r + .5, f"k={k}" if k == 0 else str(k),
                            ha="center", va="center", fontsize=8, color="white")
    ax.text(origin["A"][0] + K / 2, origin["A"][1] - .25, "A: M x K", ha="center",
            va="bottom", fontsize=10)
    ax.text(origin["B"][0] - .25, origin["B"][1] + K / 2, "B: K x N", ha="right",
            va="center", fontsize=10)
    ax.text(origin["C"][0] + N / 2, origin["C"][1] + M + .35, "C: M x N", ha="center",
            va="top", fontsize=10)
    ya = origin["A"][1] + row + .5               # the thread's row, across A and into C
    xb = origin["B"][0] + col + .5               # the thread's column, down B and into C
    arrow = dict(arrowstyle="->", lw=1.6, color="k")
    ax.annotate("", (origin["A"][0] + K + .05, ya - .62), (origin["A"][0] - .05, ya - .62),
                arrowprops=arrow)
    ax.text(origin["A"][0] - .2, ya, "row", ha="right", va="center", fontsize=9)
    ax.annotate("", (xb + .62, origin["B"][1] + K + .05), (xb + .62, origin["B"][1] - .05),
                arrowprops=arrow)
    ax.text(xb, origin["B"][1] - .2, "col", ha="center", va="bottom", fontsize=9)
    guide = dict(color=colour["C"], lw=1, ls="--")
    ax.plot([origin["A"][0] + K, xb - .5], [ya, ya], **guide)
    ax.plot([xb, xb], [origin["B"][1] + K, ya - .5], **guide)
    ax.text(xb + .65, ya, "C[row][col]", ha="left", va="center", fontsize=9,
            color=colour["C"], fontweight="bold")
    ax.set_xlim(-1.3, K + gap + N + 2.6)
    ax.set_ylim(K + gap + M + 1.0, -1.0)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("One thread: acc += A[row][k] * B[k][col] for k = 0 .. K-1, then it "
                 "writes C[row][col]", fontsize=10)
    fig.text(0.5, 0.02, "the arrows: k walks along the thread's row of A and down its "
             "column of B, one step of the loop per cell", ha="center", fontsize=9)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def cuda_launch(shape=(1000, 700, 300), params: dict | None = None) -> str:
    """The launch `gk.launch` makes, written as plain CUDA C++ with the numbers filled in:
    the block and the grid the registry gives the naive kernel for `shape` (M, N, K), the
    grid's x over the rows of C (M) with x->row and over its columns (N) with x->col, and
    the `<<<grid, block>>>` call of the template instantiation by its C++ name."""
    k = get_kernel(KERNEL)
    p = k.resolve(params)
    M, N, K = shape
    grid, block = k.grid(p, shape), k.threads(p)
    b = p["BLOCK"]
    # which dimension of C the grid's x runs over, as the registry's grid sizes it
    xs, ys = ("M", "N") if p["MAPPING"] == "x->row" else ("N", "M")
    size = {"M": M, "N": N}
    assert grid[:2] == (-(-size[xs] // b), -(-size[ys] // b)), (grid, p)
    code = [(f"dim3 block({block[0]}, {block[1]});", "BLOCK x BLOCK threads"),
            (f"dim3 grid(ceil_div({xs}, {b}), ceil_div({ys}, {b}));",
             f"= ({grid[0]}, {grid[1]}): x runs over the {size[xs]:,} "
             f"{'rows' if xs == 'M' else 'columns'} of C ({p['MAPPING']})")]
    width = max(len(c) for c, _ in code) + 2
    return "\n".join([f"// M = {M:,}, N = {N:,}, K = {K:,}; ceil_div(a, b) = (a + b - 1) / b"]
                      + [f"{c:<{width}}// {note}" for c, note in code]
                      + [f"{k.name_expression(p, shape)}<<<grid, block>>>"
                         "(M, N, K, alpha, A, B, beta, C);"])


def launch_naive(shape=(1000, 700, 300), params: dict | None = None) -> Text:
    """`gk.launch` on the naive kernel, as the plain CUDA launch it makes (`cuda_launch`:
    the grid and the block the registry gives for `shape` (M, N, K), no GPU needed) and
    the thread count; live, the kernel also runs on random matrices and its C is compared
    with cuBLAS's (cupy.matmul)."""
    k = get_kernel(KERNEL)
    p = k.resolve(params)
    M, N, K = shape
    grid, block = k.grid(p, shape), k.threads(p)
    threads = grid[0] * grid[1] * block[0] * block[1]
    text = (f"{cuda_launch(shape, params)}\n\n"
            f"A grid of {grid[0]} x {grid[1]} blocks of {block[0]} x {block[1]} threads: "
            f"{grid[0]} x {grid[1]} x {block[0] * block[1]:,} = {threads:,} threads for the "
            f"{M * N:,} elements of C (the rest fail the edge test)")
    if not device.is_live():
        return Text(text + ".\nNo GPU here: the launch itself needs one.")
    import cupy
    from gemm_kernels.core.launch import launch
    A, B = cupy.random.rand(M, K, dtype=cupy.float32), cupy.random.rand(K, N, dtype=cupy.float32)
    C = cupy.zeros((M, N), dtype=cupy.float32)
    launch(KERNEL, A, B, C, params=p)
    cupy.cuda.Device().synchronize()
    err = float(cupy.abs(C - A @ B).max())
    return Text(text + f".\nLaunched: the largest difference from cupy.matmul is {err:.1e}.")


# ---------------------------------------------------------------- resources

def resources(params: dict | None = None) -> Table:
    """The naive kernel's registers, spills, block, blocks and warps per SM, occupancy,
    and the instructions of one pass of its compiled loop (no shared memory yet: its
    columns come in chapter 03)."""
    from gemm_kernels.measure import lookup
    s = analysis.summary(KERNEL, params)
    timed = (lookup.binary(KERNEL, params) or {}).get("registers")
    occ = analysis.kernel_occupancy(KERNEL, params, registers=timed)
    h = s["loop_histogram"]
    row = {"registers per thread": timed or s["registers"], "spills": s["spill_stores"],
           "threads per block": occ.threads_per_block, "blocks per SM": occ.blocks_per_sm,
           "warps per SM": f"{occ.warps_per_sm} of {occ.max_warps_per_sm}",
           "occupancy": analysis.percent(occ.occupancy),
           "FFMA per pass of the loop": h.get("FFMA", 0),
           "LDG per pass of the loop": sum(v for op, v in h.items() if op.startswith("LDG"))}
    return Table([row], list(row), title=f"{KERNEL}, {_settings(s['params'])}: static "
                 f"analysis (ptxas -v, nvdisasm; {s['arch']})")


def registers_in_words(params: dict | None = None) -> Text:
    """Why the occupancy is what it is, as arithmetic: registers per thread times the
    threads an SM can hold, against the SM's register file; which registers are used
    (the timed binary's, and whether ptxas here agrees)."""
    from gemm_kernels.measure import lookup
    from gemm_kernels.measure import records
    s = analysis.summary(KERNEL, params)
    timed = (lookup.binary(KERNEL, params) or {}).get("registers")
    regs = timed or s["registers"]
    props = records.described_device()
    threads, file = props.get("max_threads_per_sm"), props.get("registers_per_sm")
    occ = analysis.kernel_occupancy(KERNEL, params, registers=timed)
    source = f"each thread uses {regs} registers" + \
        ("" if not timed or timed == s["registers"] else
         f" (in the binary that was timed; ptxas {compiler.ptxas_version()} here: "
         f"{s['registers']})")
    if not (threads and file):
        return Text(source + ".")
    used = regs * threads
    fits = ("exactly the whole register file" if used == file else
            "within the register file" if used < file else "more than the register file")
    return Text(f"{source[0].upper()}{source[1:]}. An SM holds at most {threads:,} threads: "
                f"{regs} x {threads:,} = {used:,} registers, {fits} of an SM ({file:,}). "
                f"So {occ.blocks_per_sm} blocks of {occ.threads_per_block:,} threads fit, "
                f"{occ.warps_per_sm} warps of the {occ.max_warps_per_sm} an SM can hold: "
                f"occupancy {analysis.percent(occ.occupancy)}.")


def _settings(p: dict) -> str:
    return ", ".join(f"{n} = {v}" for n, v in p.items())


# ---------------------------------------------------------------- the compiled loop

_LDG = re.compile(r"^LDG\S*\s+(R\d+),\s*(?:desc\[\w+\])?\[(R\d+)\.64(?:\+(0x[0-9a-f]+))?\]")
_WIDE = re.compile(r"^IMAD\.WIDE\s+(R\d+),\s*(R\d+)(?:\.reuse)?,\s*0x4,\s*(R\d+)")
_UPTR = re.compile(r"^UIADD3\s+(UR\d+),\s*UP\d+,\s*(UR\d+),\s*(0x[0-9a-f]+)")
_KSTEP = re.compile(r"^UIADD3\s+(UR\d+),\s*\1,\s*(0x[0-9a-f]+)")
_COUNT = re.compile(r"^IADD3\s+(R\d+),\s*(R\d+),\s*-(0x[0-9a-f]+)")
_UMOV = re.compile(r"^MOV\s+(R\d+),\s*(UR\d+)")
_UCARRY = re.compile(r"^UIADD3\.X\s+(UR\d+)")


def loop_loads(params: dict | None = None) -> dict:
    """What one pass of the naive kernel's compiled loop loads, read off its SASS.

    The loads of B are those whose address register was made by `IMAD.WIDE d, s, 0x4, p`
    with the loop's most used multiplier `s` (a register holding N: each is the previous
    address plus N floats, the next row of B). The other loads read A: one base
    register plus constant offsets (consecutive floats of one row). Returns {'FFMA',
    'LDG', 'A': [(address, text, k offset)], 'B': [(address, text, k offset)],
    'stride': s, 'notes': {address: what the line does}}."""
    k = get_kernel(KERNEL)
    body = analysis.main_loop(compiler.sass(k, k.resolve(params)))
    wides = [(a, _WIDE.match(t)) for a, _, t in body if _WIDE.match(t)]
    multipliers = [m.group(2) for _, m in wides]
    stride = max(set(multipliers), key=multipliers.count) if multipliers else None
    b_regs = {m.group(1) for _, m in wides if m.group(2) == stride}
    row_of, a_loads, b_loads, notes = {}, [], [], {}
    ffma = sum(op == "FFMA" for _, op, _ in body)
    # A's running pointer lives in a pair of uniform registers (one value for the whole
    # warp): the low half is the one moved on by 4 x ffma bytes, the high half takes the carry
    low = {m.group(1) for _, _, t in body if (m := _UPTR.match(t))
           and int(m.group(3), 16) == 4 * ffma}
    high = {m.group(1) for _, _, t in body if (m := _UCARRY.match(t))}
    for a, op, t in body:
        ld, wide = _LDG.match(t), _WIDE.match(t)
        if ld and ld.group(2) in b_regs:
            j = row_of.setdefault(ld.group(2), 0)     # made at the end of the pass before
            b_loads.append((a, t, j))
            notes[a] = f"B[k+{j}][col]" if j else "B[k][col]"
        elif ld:
            off = int(ld.group(3) or "0", 16) // 4
            a_loads.append((a, t, off))
            notes[a] = f"A[row][k+{off}]" if off else "A[row][k]"
        elif wide and wide.group(2) == stride:
            j = row_of.get(wide.group(3), 0) + 1
            row_of[wide.group(1)] = j
            notes[a] = (f"address of B[k+{j}][col]: the one before + {stride} x 4 bytes"
                        + (" (for the next pass)" if j >= ffma else ""))
        elif wide and wide.group(1) == wide.group(3):
            notes[a] = (f"the address of A[row][k]: A's running pointer + {wide.group(2)} "
                        f"x 4 bytes ({wide.group(2)} holds row * K)")
        elif op == "FFMA":
            notes[a] = "acc += a * b"
        elif _UMOV.match(t) and _UMOV.match(t).group(2) in low | high:
            half = "low" if _UMOV.match(t).group(2) in low else "high"
            notes[a] = (f"A's running pointer ({half} half), copied from a uniform register: "
                        "one value for the whole warp")
        elif _UPTR.match(t) and int(_UPTR.match(t).group(3), 16) == 4 * ffma:
            notes[a] = f"A's pointer moves on {4 * ffma} bytes: the next {ffma} floats of the row"
        elif _COUNT.match(t) and int(_COUNT.match(t).group(3), 16) == ffma:
            notes[a] = f"{ffma} fewer k left to do"
        elif _KSTEP.match(t) and int(_KSTEP.match(t).group(2), 16) == ffma:
            notes[a] = f"k moves on by {ffma}"
        elif t.startswith("UIADD3.X"):
            notes[a] = "the carry into the pointer's upper 32 bits (a 64-bit add in two halves)"
        elif op == "ISETP":
            # the compiler counts the k left in steps of 4 (K rounded down to a multiple
            # of 4, the rest done after the loop), so "more than ffma - 4" means "at least
            # ffma"; another constant is not explained
            m = re.search(r", (0x[0-9a-f]+), PT", t)
            notes[a] = ("enough k left for another pass? (sets the predicate)"
                        if not m or int(m.group(1), 16) != ffma - 4 else
                        f"at least {ffma} k left for another pass? The count left is a "
                        f"multiple of 4, so more than {ffma - 4} means at least {ffma}")
        elif op == "BRA":
            notes[a] = "if so, back to the loop's first instruction"
    return {"FFMA": ffma, "LDG": len(a_loads) + len(b_loads), "A": a_loads, "B": b_loads,
            "stride": stride, "notes": notes}


def _loop_text(kernel: str, params: dict) -> list[str]:
    k = get_kernel(kernel)
    return [t for _, _, t in analysis.main_loop(compiler.sass(k, k.resolve(params)))]


def same_loop(block: int = 32) -> Text:
    """The evidence behind "the same loop", from the compiler run here: x->row's and
    x->col's main loops at `block`, compared instruction by instruction."""
    a, b = (_loop_text(KERNEL, {"BLOCK": block, "MAPPING": m}) for m in ("x->row", "x->col"))
    verdict = (f"the same {len(a)} instructions, operand for operand" if a == b else
               f"different loops ({len(a)} and {len(b)} instructions)")
    return Text(f"The compiled loops at BLOCK = {block}, x->row against x->col: {verdict}.")


def read_loop(params: dict | None = None, head: int = 8, tail: int = 14) -> Text:
    """The loop's first `head` and last `tail` instructions (as `display.sass_loop`
    shows them), each with what it does in the kernel's terms after '//'."""
    from gemm_kernels.notebook.display import sass_loop
    notes = loop_loads(params)["notes"]
    width = 52
    out = []
    for line in sass_loop(KERNEL, params, limit=head, tail=tail).splitlines():
        m = re.match(r"/\*([0-9a-f]+)\*/", line)
        note = notes.get(int(m.group(1), 16)) if m else None
        out.append(f"{line:<{width}}// {note}" if note else line)
    return Text("\n".join(out))


def loop_in_numbers(params: dict | None = None) -> Text:
    """One pass of the loop in numbers: FFMA and LDG, how many loads read A and B and
    how their addresses are made, and the bytes the loads deliver to the lanes per FLOP
    (4 B per lane and load). These are bytes delivered
    by the L1, not bytes moved through DRAM, so they are not set
    against the roofline's ridge (which counts DRAM bytes): the line says so. The cap
    these loads set is `cap_line`'s, printed once, in the main text."""
    r = loop_loads(params)
    offsets = sorted(o for _, _, o in r["A"])
    per_ffma = 4 * r["LDG"] / r["FFMA"]          # bytes loaded per multiply-add
    lines = [
        f"One pass of the loop: {r['FFMA']} FFMA and {r['LDG']} LDG, so k is unrolled by "
        f"{r['FFMA']}: {r['LDG'] / r['FFMA']:g} loads per multiply-add.",
        f"{len(r['A'])} LDG read A: one base register plus {4 * offsets[0]} to "
        f"{4 * offsets[-1]} bytes, {len(offsets)} consecutive floats of row `row`.",
        f"{len(r['B'])} LDG read B: each address is the one before plus {r['stride']} x 4 "
        f"bytes ({r['stride']} holds N), the next row of column `col`.",
        f"{per_ffma:g} bytes delivered to the lanes per multiply-add (2 FLOP), a "
        f"broadcast counted once per lane: {2 / per_ffma:g} FLOP per byte delivered by the "
        "L1 cache (not per byte of DRAM: the caches serve most of these loads)."]
    return Text("\n".join(lines))


def _cap_sentence(cap: dict) -> str:
    """The cap of `l1_cap` in three short lines, the arithmetic written out, and what
    lifts it."""
    return (f"The cap: at least one L1 wavefront per scalar load instruction, "
            f"{cap['loads_per_step']:g} per warp-step of 64 FLOP (32 lanes x one multiply-add).\n"
            f"So at most {64 / cap['loads_per_step']:g} FLOP per SM per clock = "
            f"{cap['cap_gflops']:,.0f} GFLOP/s, {cap['cap_gflops'] / cap['peak_gflops']:.1%} "
            f"of the FP32 peak ({cap['peak_gflops']:,.0f} GFLOP/s), for this loop of 4-byte "
            "loads.\nWhat lifts it: fewer L1 wavefronts per multiply-add: wide loads that "
            "bring several values per wavefront (16-byte shared loads, LDS.128, in chapter 03; "
            "float4 global loads in chapter 07), and reuse of loaded values in registers "
            "(chapters 05-06).")


def cap_line(params: dict | None = None) -> Text:
    """The cap of `l1_cap` for the main text, line by line: the loads per multiply-add,
    then the cap their wavefronts set."""
    r, cap = loop_loads(params), l1_cap(params)
    if cap is None:
        return Text("Not known here: the GPU's SM count or clock.")
    return Text(f"{r['LDG'] / r['FFMA']:g} loads of 4 B per multiply-add (2 FLOP), "
                "one load instruction each per warp.\n" + _cap_sentence(cap))


def gap_bars(block: int = 32, size: int = 2048):
    """The gap from the naive kernel to cuBLAS at size^3 as four bars on a log axis:
    x->row, x->col (the same instructions: what the addresses alone gain), the cap of
    `l1_cap` (which x->col comes under) and cuBLAS timed beside x->row. Each bar says its
    rate and its relation to the bar above. The rates are the recording's, or measured
    live. Returns the figure, or None where the cap is not known."""
    import matplotlib.pyplot as plt
    from gemm_kernels.measure import lookup, records
    cap = l1_cap({"BLOCK": block, "MAPPING": "x->row"})
    if cap is None:
        print("Not known here: the GPU's SM count or clock.")
        return None
    run = {m: lookup.measure_or_lookup(KERNEL, (size,) * 3, {"BLOCK": block, "MAPPING": m})
           for m in ("x->row", "x->col")}
    row, col = (run[m]["gflops"]["median"] for m in ("x->row", "x->col"))
    cap_rate = cap["cap_gflops"]
    bars = [("x->row", row, "C0", ""),
            ("x->col", col, "C2", f"{col / row:.1f} x x->row: the addresses"),
            ("the cap of this loop", cap_rate, "white",
             f"x->col reaches {col / cap_rate:.0%} of it")]
    ref = (run["x->row"].get("reference") or {}).get("gflops", {}).get("median")
    if ref:
        bars.append(("cuBLAS", ref, "0.6", f"{ref / cap_rate:.1f} x the cap"))
    fig, ax = plt.subplots(figsize=(8, 2.6))
    ys = range(len(bars))[::-1]
    for y, (label, rate, colour, note) in zip(ys, bars):
        ax.barh(y, rate, color=colour, edgecolor="k", height=0.6, gid=label,
                hatch="//" if colour == "white" else None)
        ax.text(rate * 1.12, y, f"{rate:,.0f}" + (f"  ({note})" if note else ""),
                va="center", fontsize=9)
    ax.set_yticks(list(ys), [b[0] for b in bars], fontsize=9)
    ax.set_xscale("log")
    ax.set_xlim(row / 3, max(b[1] for b in bars) * 15)
    ax.set_xlabel("GFLOP/s (log scale)")
    ax.set_title(f"BLOCK = {block}, {size}^3: the two mappings, the cap on their loop, "
                 f"and cuBLAS\n{records.source()}", fontsize=10)
    ax.grid(True, axis="x", which="major", alpha=0.3)
    fig.tight_layout()
    return fig


def l1_cap(params: dict | None = None) -> dict | None:
    """The most the loop can reach if its L1 did one wavefront per SM and clock and each
    scalar load instruction cost one wavefront, its least: a warp-step (32 lanes x one
    multiply-add, 64 FLOP) issues LDG / FFMA load instructions (from the compiled loop),
    so 64 / that many FLOP per SM and clock, beside the FP32 peak, for the GPU the
    numbers describe. It holds for this loop of 4-byte loads only: a wide load that the
    lanes share delivers more per wavefront. None where the SMs or clock are missing."""
    from gemm_kernels.measure import records
    r = loop_loads(params)
    props = records.described_device()
    peak = device.peak_fp32_gflops(props)
    if not (peak and props.get("sm_count") and props.get("sm_clock_mhz")):
        return None
    loads = r["LDG"] / r["FFMA"]          # load instructions per warp-step
    return {"loads_per_step": loads,
            "cap_gflops": 64 / loads * props["sm_count"] * props["sm_clock_mhz"] / 1e3,
            "peak_gflops": peak}


# ---------------------------------------------------------------- the measurement

def share_range(table) -> str:
    """'0.97% to 1.5%': the range of the naive kernel's share of cuBLAS in a
    `ch01_02_sectors.rate_table`, written as the table writes it."""
    share = [r[f"{KERNEL}: % of cuBLAS"] for r in table]
    return f"{fmt_number(min(share))}% to {fmt_number(max(share))}%"


def sweep_table(size: int = 2048, blocks=(8, 16, 32)) -> Table:
    """The rates the chapter's widget looks up, as a table: the naive kernel at size^3
    for `blocks`, with both mappings (recorded, or measured live), for a reader whose
    notebook has no running kernel to draw the widget. BLOCK = 4 is left out: its rate
    is what chapter 02 asks the student to predict."""
    from gemm_kernels.measure import lookup, records
    rows = [{"BLOCK": b, **{f"{m} (GFLOP/s)": lookup.measure_or_lookup(
        KERNEL, (size,) * 3, {"BLOCK": b, "MAPPING": m})["gflops"]["median"]
        for m in ("x->row", "x->col")}} for b in blocks]
    return Table(rows, ["BLOCK", "x->row (GFLOP/s)", "x->col (GFLOP/s)"],
                 title=f"naive at {size}^3, {records.source()}")


def doubling_ratios(table) -> Text:
    """What each doubling of BLOCK does to each mapping's rate in a `sweep_table`: the
    ratio of each row's rate to the row above, for x->row and for x->col; then, at the
    largest BLOCK, x->col's rate over x->row's: the ratio the chapter asks to predict."""
    out = []
    for m in ("x->row", "x->col"):
        col = f"{m} (GFLOP/s)"
        steps = [f"{a['BLOCK']} -> {b['BLOCK']}: x{b[col] / a[col]:.2f}"
                 for a, b in zip(table, table[1:])]
        out.append(f"{m}, each time BLOCK doubles: " + ", ".join(steps))
    # the ratio the prediction asked for, so that the student meets it beside the sweep
    # (check_guess gives it too, but only once a guess is written)
    last = table[-1]
    out.append(f"At BLOCK = {last['BLOCK']}, x->col / x->row = "
               f"{last['x->col (GFLOP/s)'] / last['x->row (GFLOP/s)']:.1f}: compare it with "
               "your guess.")
    return Text("\n".join(out))


def _sweep(size: int, blocks):
    """(params, the step's sector and line counts, the recorded rate at size^3) for each
    mapping and BLOCK of the sweep."""
    from gemm_kernels.measure import lookup
    from gemm_kernels.memory import ch01_02_sectors
    for m in ("x->row", "x->col"):
        for b in blocks:
            params = {"BLOCK": b, "MAPPING": m}
            counts = ch01_02_sectors.sector_table([(KERNEL, params)])[0]
            rate = lookup.measure_or_lookup(KERNEL, (size,) * 3, params)["gflops"]["median"]
            yield params, counts, rate


def rate_times_lines(size: int = 2048, blocks=(8, 16, 32), product: bool = True,
                     brief: bool = False) -> Table:
    """Per BLOCK and mapping: the 32-byte sectors and the 128-byte lines one warp's loads
    touch at one step, from the index expressions, beside Nsight Compute's wavefronts
    per step (the L1 cycles) where the naive kernel was profiled ('not profiled' elsewhere), the
    recorded rate at size^3, and rate x lines: where the L1's cycles per step set the
    rate, the product stays about constant. The sectors stand beside the lines so that a
    reader sees which of the two the rate follows. `product=False` leaves out rate x
    lines (the two-row table of BLOCK = 32: the counts and the rates only); `brief`
    leaves out the sectors (the six-row test: lines, wavefronts, rate, product)."""
    from gemm_kernels.notebook.ch01_naive_dram import wavefronts_per_step
    counted, rows = wavefronts_per_step(size), []
    sectors_col, lines_col, wf_col = "32-byte sectors per step (from the indices)", \
        "128-byte lines per step (from the indices)", "wavefronts per step, Nsight Compute"
    for params, counts, rate in _sweep(size, blocks):
        cycles = counts["128-byte lines (A + B)"]
        wf = counted.get((params["MAPPING"], params["BLOCK"]))
        rows.append({"settings": _settings(params)})
        if not brief:
            rows[-1][sectors_col] = counts["sectors per step (A + B)"]
        rows[-1].update({lines_col: cycles, wf_col: "not profiled" if wf is None else f"{wf:.2f}",
                         f"rate at {size}^3 (GFLOP/s)": fmt_number(rate)})
        if product:
            rows[-1]["rate x lines"] = fmt_number(rate * cycles)
    what = ("the lines" if brief else "the sectors and lines") + \
        " its loads touch, the L1 wavefronts Nsight Compute counted"
    return Table(rows, list(rows[0]), title=f"one warp, one step k: {what}, and "
                 + ("the rate times the lines" if product else "the recorded rate"))


def pace_line(example: dict | None = None, size: int = 2048) -> Text:
    """The rate one L1 cycle per SM and clock allows a warp's step, its arithmetic written
    out: the number that rate x lines of `rate_times_lines` should stay near. `example`
    (a configuration's params) adds one worked line: that pace over the configuration's
    lines per step, the rate it predicts, beside its recorded (or measured) rate at
    size^3."""
    from gemm_kernels.measure import lookup
    from gemm_kernels.memory import ch01_02_sectors
    pace = _pace()
    if pace is None:
        return Text("Not known here: the GPU's SM count or clock.")
    text = (f"At one L1 cycle per SM and clock, rate x lines would be {pace['text']} "
            "for every row.")
    if example:
        lines = ch01_02_sectors.sector_table([(KERNEL, example)])[0]["128-byte lines (A + B)"]
        rate = lookup.measure_or_lookup(KERNEL, (size,) * 3, example)["gflops"]["median"]
        text += (f"\n{_settings(example)}: {pace['gflops']:,.0f} / {lines} lines per step = "
                 f"{pace['gflops'] / lines:,.0f} GFLOP/s predicted; measured at {size}^3: "
                 f"{rate:,.0f} GFLOP/s.")
    return Text(text)


def per_sector_products(size: int = 2048, blocks=(8, 16, 32)) -> Text:
    """Why the L1's cycles are not sectors: the configurations of `rate_times_lines` whose
    rate times their sectors per step passes what one L1 cycle per SM and clock allows.
    An L1 that spent a cycle per sector would there do more than one cycle per clock.
    Then Nsight Compute's count for x->col's loads (`ch01_naive_dram.xcol_counted`):
    Nsight Compute's wavefronts follow the lines, not the sectors."""
    from gemm_kernels.notebook.ch01_naive_dram import xcol_counted
    pace = _pace()
    if pace is None:
        return Text("Not known here: the GPU's SM count or clock.")
    over = []
    for params, counts, rate in _sweep(size, blocks):
        sectors = counts["sectors per step (A + B)"]
        if rate * sectors > pace["gflops"]:
            over.append(f"  {_settings(params)}: {rate:,.0f} GFLOP/s x {sectors} "
                        f"sectors per step = {rate * sectors:,.0f}")
    if not over:
        return Text(f"Counted in sectors, every configuration stays under {pace['gflops']:,.0f}: "
                    "at this size the sectors do not rule themselves out.")
    return Text(f"Rate x sectors per step, where it passes {pace['gflops']:,.0f} (one L1 cycle "
                "per SM per clock):\n" + "\n".join(over) + "\nAt a cycle per sector the L1 "
                "would do more than one cycle per clock there.\n"
                f"{xcol_counted()}\nThe wavefronts follow the lines, not the sectors: "
                "the L1's cycles are not sectors.")


def _pace() -> dict | None:
    """The rate one L1 cycle per SM and clock allows a warp's step (64 FLOP: 32 lanes x
    one multiply-add), over all SMs at the clock the driver reports: the GFLOP/s and
    the arithmetic behind it. None where the SMs or the clock are not known."""
    from gemm_kernels.measure import records
    props = records.described_device()
    if not (props.get("sm_count") and props.get("sm_clock_mhz")):
        return None
    gflops = 64 * props["sm_count"] * props["sm_clock_mhz"] / 1e3
    return {"gflops": gflops,
            "text": f"64 FLOP x {props['sm_count']} SMs x {props['sm_clock_mhz']:,.0f} MHz = "
                    f"{gflops:,.0f} GFLOP/s"}


XCOL_ODD = "ch01_xcol_2047"


def size_gap(block: int = 32, sizes=(2048, 2047), row_only: bool = False) -> Text:
    """The mapping's factor at a power-of-two size and one size off it. The two sizes
    were timed in different runs, so each rate is also given as a share of the cuBLAS
    timed beside it; the factor is the plain ratio of the two rates. x->col at
    `sizes[1]` comes from its own timed study (`XCOL_ODD`); the other rates from the
    chapter's recording. A last line gives the L1 cycles per step that x->row's rate at
    `sizes[1]` implies (`implied_cycles`), beside the lines it touches. `row_only`: x->row's
    rate and share at each size only, then how many times as fast it runs at `sizes[1]`
    (the short version, for the main text's measurement)."""
    from gemm_kernels.measure import lookup, studies
    from gemm_kernels.memory import ch01_02_sectors
    big, odd = sizes
    share = {}
    for n in sizes:
        share[("x->row", n)] = lookup.measure_or_lookup(
            KERNEL, (n,) * 3, {"BLOCK": block, "MAPPING": "x->row"})
    share[("x->col", big)] = lookup.measure_or_lookup(
        KERNEL, (big,) * 3, {"BLOCK": block, "MAPPING": "x->col"})
    shown = lambda v: f"{v:.2g}%" if v < 1 else f"{v:.1f}%"     # 0.98%, 3.3%, 12.8%
    if row_only:
        if any(not r or not r.get("reference") for r in share.values()):
            return Text(f"Not in this recording: x->row at {odd}^3, beside cuBLAS.")
        rate = {n: share[("x->row", n)]["gflops"]["median"] for n in sizes}
        return Text("\n".join(
            [f"x->row, BLOCK = {block}, at {n}^3: {rate[n]:,.0f} GFLOP/s, "
             f"{shown(100 * rate[n] / share[('x->row', n)]['reference']['gflops']['median'])} "
             "of cuBLAS" for n in sizes]
            + [f"At {odd}^3 it runs {rate[odd] / rate[big]:.1f} times as fast as at {big}^3."]))
    shape = (odd,) * 3
    rec = studies.recording_of(XCOL_ODD, shape)
    share[("x->col", odd)] = next((row for step, row in studies.results(XCOL_ODD, shape, rec)
                                   if row and step.params.get("BLOCK") == block), None)
    if any(not r or not r.get("reference") for r in share.values()):
        return Text(f"Not in this recording: both mappings at {odd}^3, each beside cuBLAS.")
    rate = {k: r["gflops"]["median"] for k, r in share.items()}
    pct = {k: 100 * r["gflops"]["median"] / r["reference"]["gflops"]["median"]
           for k, r in share.items()}
    text = [f"At {n}^3: x->col {rate[('x->col', n)]:,.0f} GFLOP/s, {shown(pct[('x->col', n)])} "
            f"of cuBLAS; x->row {rate[('x->row', n)]:,.0f} GFLOP/s, {shown(pct[('x->row', n)])}. "
            f"x->col / x->row: {rate[('x->col', n)] / rate[('x->row', n)]:.1f} x." for n in sizes]
    if _pace() is not None:
        text.append(str(implied_cycles(odd, block)))
    return Text("\n".join(text))


def implied_cycles(size: int = 2047, block: int = 32) -> Text:
    """The L1 cycles per warp and step that x->row's recorded (or measured) rate at size^3
    implies, if the L1 does one cycle per SM and clock (`pace_line`): that pace over the
    rate. Set beside the 128-byte lines a step touches, which it equals at 2048^3 only."""
    from gemm_kernels.measure import lookup
    from gemm_kernels.memory import ch01_02_sectors
    pace = _pace()
    if pace is None:
        return Text("Not known here: the GPU's SM count or clock.")
    params = {"BLOCK": block, "MAPPING": "x->row"}
    row = lookup.measure_or_lookup(KERNEL, (size,) * 3, params)
    if not row:
        return Text(f"Not in this recording: x->row at {size}^3.")
    rate = row["gflops"]["median"]
    lines = ch01_02_sectors.sector_table([(KERNEL, params)], M=size, N=size,
                                         K=size)[0]["128-byte lines (A + B)"]
    return Text(f"At {size}^3, x->row: {pace['gflops']:,.0f} / {rate:,.0f} GFLOP/s = "
                f"{pace['gflops'] / rate:.1f} L1 cycles per warp and step, at one L1 cycle "
                f"per SM and clock; its loads touch {lines} lines per step.")


def which_count(block: int = 32, size: int = 2048) -> Text:
    """From x->row to x->col at `block`: how many times fewer lines and sectors per step
    a warp's loads touch (counted from the index expressions), beside how
    many times faster the recorded (or measured) rate is: the prediction each count
    would have made."""
    from gemm_kernels.measure import lookup
    from gemm_kernels.memory import ch01_02_sectors
    count, rate = {}, {}
    for m in ("x->row", "x->col"):
        params = {"BLOCK": block, "MAPPING": m}
        row, = ch01_02_sectors.sector_table([(KERNEL, params)])
        count[m] = (row["128-byte lines (A + B)"], row["sectors per step (A + B)"])
        rate[m] = lookup.measure_or_lookup(KERNEL, (size,) * 3, params)["gflops"]["median"]
    (l_row, s_row), (l_col, s_col) = count["x->row"], count["x->col"]
    # worked out from the indices, not profiled: lines, not wavefronts (they agree only
    # where Nsight Compute counted both, at 2048^3)
    rows = [("128-byte lines per step", f"{l_row:g} -> {l_col:g}", f"{l_row / l_col:.1f} times fewer"),
            ("sectors per step", f"{s_row:g} -> {s_col:g}",
             f"{s_row / s_col:.1f} times fewer"),
            (f"rate at {size}^3", f"{rate['x->row']:,.0f} -> {rate['x->col']:,.0f} GFLOP/s",
             f"{rate['x->col'] / rate['x->row']:.1f} times faster")]
    return Text(f"From x->row to x->col at BLOCK = {block}:\n" + "\n".join(
        f"  {a:<24}{b}: {c}" for a, b, c in rows))


def sector_estimate_note(sectors: dict, lines: dict) -> str:
    """What a guess near the sector count's ratio is told: it is the reasoning the hint
    asks for, and the gap between it and the measurement is the chapter's subject: the
    L1 wavefronts per step. `sectors` and `lines` map each mapping to its count per warp
    and step; at the chapter's size the lines equal the wavefronts Nsight Compute counts
    (optional section D)."""
    row, col = "x->row", "x->col"
    return (f"Counting 32-byte sectors, as the hint asks, gives {sectors[row]} -> "
            f"{sectors[col]} per step, {sectors[row] / sectors[col]:.1f} x. This is the "
            "expected reasoning, and x->col is indeed many times faster. The gap between "
            "that estimate and the measurement is what this chapter is about: a step "
            f"costs {lines[row]} L1 wavefronts against {lines[col]} "
            f"({lines[row] / lines[col]:.1f} x). The chapter's section 'Why it is slow' "
            "shows it.")


def check_guess(my_guess, block: int = 32, size: int = 2048) -> None:
    """The chapter's prediction: x->col's rate over x->row's at `block`, size^3. The
    prompt asks for that ratio as a number and says up front that a guess within a
    factor of 1.6 of the recorded (or, live, measured) ratio, either way, counts as
    right: the L1 wavefronts of a warp's step (here equal to its lines) land inside it,
    "the same" does not. A guess below that range but near the sector count's ratio
    (the hint's first estimate) is told that this is the expected reasoning, and that
    the gap is the chapter's subject (`sector_estimate_note`)."""
    from gemm_kernels.measure import lookup
    from gemm_kernels.memory import ch01_02_sectors
    if my_guess is None:
        print("Write your guess first (a number: 1.0 means the same speed), then run "
              "this cell again.")
        return
    if isinstance(my_guess, bool) or not isinstance(my_guess, (int, float)):
        print(f"Your guess {my_guess!r} is not a number: write it without quotes, e.g. "
              "my_guess = 2.5, then run this cell again.")
        return
    rate = {m: lookup.measure_or_lookup(KERNEL, (size,) * 3, {"BLOCK": block, "MAPPING": m})
            ["gflops"]["median"] for m in ("x->row", "x->col")}
    ratio = rate["x->col"] / rate["x->row"]
    count = {m: ch01_02_sectors.sector_table([(KERNEL, {"BLOCK": block, "MAPPING": m})])[0]
             for m in ("x->row", "x->col")}
    sectors = {m: count[m]["sectors per step (A + B)"] for m in count}
    lines = {m: count[m]["128-byte lines (A + B)"] for m in count}
    by_sectors = sectors["x->row"] / sectors["x->col"]
    # the sector count's answer, within the same factor of 1.6, is the second tier
    sector_tier = by_sectors / 1.6 <= my_guess < ratio / 1.6
    verdict = ("right" if ratio / 1.6 <= my_guess <= ratio * 1.6 else
               "the sector count's answer, the expected first estimate, below the "
               "measurement" if sector_tier else
               "too low" if my_guess < ratio else "too high")
    print(f"You guessed {my_guess:g}; at BLOCK = {block}, {size}^3: x->row "
          f"{rate['x->row']:,.0f} GFLOP/s, x->col {rate['x->col']:,.0f} GFLOP/s, "
          f"{ratio:.1f} times as fast. Your guess is {verdict} (right means from "
          f"{ratio / 1.6:.1f} to {ratio * 1.6:.1f}: within a factor of 1.6 either way).")
    # each wrong guess gets the hint that fits it: "the same speed", the sector count
    # (the hint's own estimate), a little faster, or too much
    if verdict == "too low" and my_guess <= 1.6:
        print("The same instructions, a different speed: the addresses a warp loads "
              "decide it. The chapter's section 'Why it is slow' draws them.")
    elif sector_tier:
        print(sector_estimate_note(sectors, lines))
    elif verdict == "too low":
        print("Faster, yes, but by more: count what a warp's step costs the L1, not the "
              "32-byte sectors it touches. The chapter's section 'Why it is slow' counts it.")
    elif verdict == "right" and my_guess > ratio * 1.1:
        # the wavefront count's answer overshoots: x->col falls short of its pace
        print(f"The L1 wavefronts, {lines['x->row']} against {lines['x->col']} per step, give "
              f"{lines['x->row'] / lines['x->col']:.1f} x. The measurement is a little "
              "lower: x->col reaches only part of the rate its wavefronts allow. The "
              "table of six configurations in 'Why it is slow' prints how much.")
    elif verdict == "too high":
        print("Faster, but not that much: every load instruction costs at least one L1 "
              f"wavefront, so x->col's step still costs {lines['x->col']} wavefronts, against "
              f"x->row's {lines['x->row']}. The chapter's section 'Why it is slow' counts them.")
