"""Chapter 04's pictures and tables: banks drawn on the tile, one summary table, the
lower bound at one output per thread, and the exercise's layouts priced as the grader
prices them (as compiled).

The kernel `bank_layout` takes its layout as the parameter LAYOUT: "conflict"
(sA[m][k], sB[n][k]: k runs along the rows of both tiles, as a dot product reads them;
named for what it does without padding) and "transposed" (sA[k][m], sB[k][n]). Those
values key the recorded measurements, and the chapter uses them as the layouts' only
names, in the text, the tables and the explorer alike.
"""
from __future__ import annotations

from gemm_kernels.memory import banks, ch03_04_tiles

# Chapter 03's kernel twice: with every tile checked, as every bank_layout variant is (the
# fair comparison), and with its faster check-free interior loop (its default).
CH03 = [("smem_tiled", {"BLOCK": 32, "EDGES": "always"}), ("smem_tiled", {"BLOCK": 32})]
# The configurations of the chapter's summary table: chapter 03's kernel, `conflict` with
# the paddings that change the load width, `transposed` unpadded and padded by 1.
MAIN = (CH03 +
        [("bank_layout", {"BLOCK": 32, "LAYOUT": "conflict", "PAD": p}) for p in (0, 1, 2, 4)] +
        [("bank_layout", {"BLOCK": 32, "LAYOUT": "transposed", "PAD": p}) for p in (0, 1)])
# Every configuration: chapter 03's kernel, then both layouts, PAD = 0..4, BLOCK = 32 and 16.
ALL = CH03 + ch03_04_tiles.variants()


def layout_name(params: dict) -> str:
    """'sA[m][k], sB[n][k] ("conflict"), PAD=0' for a bank_layout configuration; chapter
    03's tiles and loop otherwise."""
    return ch03_04_tiles.label("bank_layout" if "LAYOUT" in params else "smem_tiled", params)


def summary(configs=None, size: int = 2048):
    """The chapter's table: per configuration (default: MAIN) the loads one warp issues per
    step along K, the wavefronts per warp and step from the bank model and from Nsight
    Compute, the shared-memory bound, the measured rate at size^3 and its share of the
    bound."""
    from gemm_kernels.core.table import Table
    t = ch03_04_tiles.summary(configs if configs is not None else MAIN, size)
    cols = ["layout", "loads per step", "wavefronts, model", "wavefronts, ncu",
            "bound GFLOP/s", "GFLOP/s", "% of bound"]
    if len({r["BLOCK"] for r in t}) > 1:
        cols.insert(0, "BLOCK")
    return Table(list(t), cols, title=t.title)


def ceiling_plot(size: int = 2048, ax=None):
    """Every configuration (chapter 03's kernel and both BLOCKs of bank_layout) as its
    shared-memory bound and its measured rate, labelled by the chapter's names, each on two
    lines (tiles and layout, then padding) so that the bars keep most of the width."""
    everything = ch03_04_tiles.summary(ALL, size)
    return ch03_04_tiles.ceiling_plot(everything, size, ax=ax, two_lines=True)


# ------------------------------------------------------------------ pictures

def _plt():
    import matplotlib.pyplot as plt
    return plt


def bank_grid(pads=(0, 1), block: int = 32, column: int = 0, rows: int = 12,
              first: int = 8, last: int = 3):
    """A block x block tile of floats, one panel per padding, drawn as an excerpt large
    enough to read: its first `rows` rows, its first `first` and last `last` columns and
    the padding, each word labelled with its bank and coloured by it (a cyclic colour
    map: bank 31 sits next to bank 0); column `column` outlined, and the wavefronts of a
    warp that reads or writes the whole column (one lane per row) in the title. Returns
    the Figure."""
    import numpy as np
    from matplotlib.patches import Rectangle
    plt = _plt()
    from matplotlib.colors import ListedColormap
    base = plt.get_cmap("hsv", banks.BANKS)(range(banks.BANKS))
    base[:, :3] = 0.45 + 0.55 * base[:, :3]       # light, so that the numbers stand out
    cmap = ListedColormap(base)
    fig, axes = plt.subplots(1, len(pads), figsize=(6.4 * len(pads), 6.2), layout="constrained")
    for ax, pad in zip(np.atleast_1d(axes), pads):
        S = block + pad
        cols = list(range(first)) + [None] + list(range(block - last, S))
        for y in range(rows):
            for x, c in enumerate(cols):
                if c is None:
                    ax.text(x, y, "...", ha="center", va="center", fontsize=10)
                    continue
                bank = (y * S + c) % banks.BANKS
                colour = "0.88" if c >= block else cmap(bank)
                ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=colour,
                                       edgecolor="white", linewidth=0.8,
                                       hatch="///" if c >= block else None))
                ax.text(x, y, str(bank), ha="center", va="center", fontsize=10,
                        color="0.4" if c >= block else "black")
        x0 = cols.index(column)
        ax.add_patch(Rectangle((x0 - 0.5, -0.5), 1, rows, fill=False, edgecolor="black",
                               linewidth=2.4, zorder=3))
        ax.set_xlim(-0.5, len(cols) - 0.5)
        ax.set_ylim(rows - 0.5, -0.5)
        ax.set_aspect("equal")
        ax.set_xticks(range(len(cols)), ["" if c is None else
                                         (f"{c}\npad" if c >= block else str(c)) for c in cols],
                      fontsize=9)
        ax.set_yticks(range(rows), [str(r) for r in range(rows)], fontsize=9)
        for side in ("top", "right", "bottom", "left"):
            ax.spines[side].set_visible(False)
        an = banks.analyse(banks.words_to_bytes([r * S + column for r in range(block)]), 4)
        used = len({(r * S + column) % banks.BANKS for r in range(block)})
        what = (f"all in bank {column % banks.BANKS}" if used == 1
                else f"in {used} different banks")
        ax.set_title(f"rows of {S} words{' (' + str(pad) + ' unused)' if pad else ''}: "
                     f"column {column} is {what}\n"
                     f"a warp reading it (one lane per row): {an.wavefronts} "
                     f"wavefront{'s' if an.wavefronts > 1 else ''}", fontsize=11)
        ax.set_xlabel("column of the tile (word in its row)", fontsize=10)
        ax.set_ylabel("row of the tile", fontsize=10)
    fig.suptitle(f"A {block} x {block} tile of floats: the bank of each word (word % 32), "
                 f"rows 0-{rows - 1} and the first and last columns; column {column} "
                 "outlined", fontsize=12)
    return fig


def column_store(pads=(0, 1), block: int = 32):
    """The lane x bank pictures of a warp that stores one column of the tile (lane i to
    row i), for each padding; labels: the tile row of each word. Returns the Figure."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(pads), figsize=(7.5 * len(pads), 5.5), layout="constrained")
    for ax, pad in zip(axes, pads):
        S = block + pad
        an = banks.analyse(banks.words_to_bytes([lane * S for lane in range(banks.WARP)]), 4)
        banks.plot_banks(an, ax=ax, row_of=lambda w, S=S: w // S, row_name="the tile row",
                         title=f"one column, rows of {S} words: {an.wavefronts} "
                               f"wavefront{'s' if an.wavefronts > 1 else ''}, ideal {an.ideal}")
    return fig


# The 128-bit loads wide_loads can draw, by name: (one warp's byte addresses, what the
# lanes read, the label of a word, what the label counts).
WIDE_LOADS = {
    "broadcast": (banks.broadcast(0, 16), "every lane the same 16 bytes (a broadcast)",
                  lambda w: w // 4, "float4 number"),
    "pairs": (banks.words_to_bytes([4 * (lane // 2) for lane in range(banks.WARP)]),
              "lanes 2j and 2j + 1 both read float4 j", lambda w: w // 4, "float4 number"),
    "diagonal": (banks.words_to_bytes([36 * lane for lane in range(banks.WARP)]),
                 "lane i at word 36 i (rows of 36 words)", lambda w: w // 36, "row of 36 words"),
    # Chapter 05's read of A with threads down the column first: lane i in row group i % 4,
    # the groups' rows 256 words apart, so all four groups hit the same four banks.
    "groups": (banks.words_to_bytes([256 * (lane % 4) for lane in range(banks.WARP)]),
               "lane i at word 256 x (i % 4): 4 groups, the same banks", lambda w: w // 256, "group i % 4"),
}


def wide_loads(cases=("broadcast", "pairs", "diagonal")):
    """128-bit loads of one warp, lane x bank, one panel per name of WIDE_LOADS in
    `cases`: every lane reading the same 16 bytes (a broadcast: the quarters of each half
    merge, 2 wavefronts); lanes 2j and 2j + 1 reading float4 j (the i^1 rule: each
    half-warp asks for 8 float4, 128 neighbouring bytes, and its quarters merge: 2
    wavefronts); lane i reading the 16 bytes at word 36 i (rows of 36 words: no pairs, 4
    quarter phases of 1 wavefront each); lane i reading word 256 (i % 4) (4 different
    words in the same banks in every phase: 4 wavefronts a phase, 16 in all). Three
    panels or fewer sit in one row, more in two. Returns the Figure."""
    plt = _plt()
    cols = len(cases) if len(cases) <= 3 else -(-len(cases) // 2)
    rows = -(-len(cases) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(20 / 3 * cols, 5.5 * rows),
                             layout="constrained", squeeze=False)
    for ax, name in zip(axes.flat, cases):
        addresses, what, row_of, row_name = WIDE_LOADS[name]
        an = banks.analyse(addresses, 16)
        banks.plot_banks(an, ax=ax, row_of=row_of, row_name=row_name,
                         title=f"128-bit, {what}:\n{_count(an)}")
    return fig


def _count(an) -> str:
    """'1 wavefront, ideal 1' / '32 wavefronts, ideal 4' for a panel title."""
    return f"{an.wavefronts} wavefront{'s' * (an.wavefronts != 1)}, ideal {an.ideal}"


def read_b(pads=(0, 1)):
    """The B read of the k-along-rows layout at BLOCK = 32 (one wide load: several values
    of k per lane), lane x bank, for each padding; labels: the row n of the B tile."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(pads), figsize=(7.5 * len(pads), 7), layout="constrained")
    for ax, pad in zip(axes, pads):
        p = {"BLOCK": 32, "LAYOUT": "conflict", "PAD": pad}
        ins = next(i for i in ch03_04_tiles.warp_instructions("bank_layout", p)
                   if i.group == "read B")
        S, start = 32 + pad, 32 * (32 + pad)          # sB follows sA: BLOCK rows of S words
        banks.plot_banks(ins.analysis, ax=ax, row_of=lambda w, S=S, s=start: (w - s) // S,
                         row_name="the row n of the B tile",
                         title=f"{layout_name(p)}: read B, sB[n = tx][k..] ({ins.sass})\n" +
                               _count(ins.analysis))
    return fig


# ------------------------------------------------------------------ the lower bound

def lower_bound(block: int = 32) -> list[tuple[str, int, str]]:
    """The fewest wavefronts one warp can spend per step along K at one output per thread
    (block x block threads, block = 32: a warp is one row ty of threads), whatever the
    layout, from the data the step must move and the bank model's best case for each
    access. Rows: (access, wavefronts at least, why)."""
    warp = banks.WARP
    # A: the warp's 32 lanes all need the same `block` values A(ty, k): a broadcast. The
    # widest broadcast per wavefront, over the three load widths, from the model.
    per_wf = {w: (w // banks.WORD) / banks.analyse(banks.broadcast(0, w), w).wavefronts
              for w in banks.WIDTHS}
    best = max(per_wf.values())
    a = int(-(-block // best))
    # B: every lane needs its own `block` values B(k, tx): block * 32 different words, and
    # a wavefront delivers at most one word from each of the 32 banks.
    b = block * warp // banks.BANKS
    return [("read A", a, f"{block} values shared by all lanes; a broadcast delivers at most "
                          f"{best:g} words per wavefront (64-bit: {per_wf[8]:g}, 128-bit: "
                          f"{per_wf[16]:g}, 32-bit: {per_wf[4]:g})"),
            ("read B", b, f"{block} x {warp} = {block * warp:,} different words, at most "
                          f"{banks.BANKS} per wavefront"),
            ("stores", 2, "one STS of a and one of b, at least 1 wavefront each"),
            ("total", a + b + 2, "")]


def lower_bound_table(block: int = 32):
    from gemm_kernels.core.table import Table
    rows = [{"access": n, "wavefronts, at least": w, "because": why}
            for n, w, why in lower_bound(block)]
    return Table(rows, ["access", "wavefronts, at least", "because"],
                 title=f"one warp, one step along K, BLOCK = {block}: the least any layout can cost")


# ------------------------------------------------------------------ the store excess

def store_excess():
    """(per STS, the least and the most extra wavefronts Nsight Compute counted beyond
    the model over every recorded configuration; the same per load instruction; the
    excess as a share of all shared wavefronts, least and most)."""
    per_st, per_ld, share = [], [], []
    for name, p in [("smem_tiled", {"BLOCK": 32})] + ch03_04_tiles.variants():
        meas = ch03_04_tiles.measured(name, p)
        if not meas:
            continue
        pred = ch03_04_tiles.predict(name, p)
        instr = {"ld": 0, "st": 0}
        for r in ch03_04_tiles.per_instruction(name, p, meas["shape"]):
            instr[r["op"]] += r["in the launch"]
        st = meas["st wavefronts"] - pred["st wavefronts"]
        ld = meas["ld wavefronts"] - pred["ld wavefronts"]
        per_st.append(st / instr["st"])
        per_ld.append(ld / instr["ld"])
        share.append((st + ld) / (meas["st wavefronts"] + meas["ld wavefronts"]))
    if not per_st:
        return None
    return {"configurations": len(per_st), "per STS": (min(per_st), max(per_st)),
            "per load": (min(per_ld), max(per_ld)), "share": (min(share), max(share))}


def default_against_fastest(size: int = 2048) -> str:
    """The kernel's default layout (conflict, PAD=0: the worst, on purpose) next to the
    chapter's fastest (conflict, PAD=2) at size^3, one line each, with their ratio."""
    from gemm_kernels.core.kernels import get
    from gemm_kernels.measure import lookup
    rows = []
    for what, p in (("the kernel's default", get("bank_layout").defaults()),
                    ("the chapter's fastest", {"BLOCK": 32, "LAYOUT": "conflict", "PAD": 2})):
        try:
            g = lookup.recorded("bank_layout", (size,) * 3, p)["gflops"]["median"]
        except LookupError:
            return f"bank_layout: not recorded at {size}^3"
        rows.append((what, layout_name(p), g))
    lines = [f"{what:22}: {label}, {g:,.0f} GFLOP/s at {size}^3" for what, label, g in rows]
    return "\n".join(lines + [f"the fastest runs {rows[1][2] / rows[0][2]:.1f}x the default"])


# The probe's patterns the chapter discusses.
PROBE_PATTERNS = ("w4_stride32", "w4_stride33", "w8_broadcast", "w8_pairs_xor1",
                  "w16_broadcast", "w16_pairs_xor1", "w16_merge_first_half_only")
# The patterns the text discusses, in words (the probe's own names are for its log).
PROBE_WORDS = {
    "w4_stride32": "32-bit, lanes 32 words apart (a column of a 32-word-wide tile)",
    "w4_stride33": "32-bit, lanes 33 words apart (the same column, rows padded by one)",
    "w8_broadcast": "64-bit, every lane the same address (a broadcast: the A reads at PAD=2)",
    "w8_pairs_xor1": "64-bit, lanes i and i^1 share an address, in the whole warp",
    "w16_broadcast": "128-bit, every lane the same address (a broadcast)",
    "w16_pairs_xor1": "128-bit, lanes i and i^1 share an address, in the whole warp",
    "w16_merge_first_half_only": "128-bit, lanes i and i^1 share an address in lanes "
                                 "0-15 only",
}


def probe_table():
    """The hardware probe's patterns that disagree with the model, if any, and those the
    chapter discusses; the title counts the agreements over all of them. None without
    the probe's recording."""
    from gemm_kernels.core.table import Table
    probe = ch03_04_tiles.probe_table()
    if probe is None:
        return None
    import re
    rows = [{**r, "pattern": PROBE_WORDS.get(r["pattern"], r["pattern"])} for r in probe
            if r["agree"] != "yes" or r["pattern"] in PROBE_PATTERNS]
    title = re.sub(r"Version (\d+\.\d+\.\d+)(\.\d+)?", r"Nsight Compute \1", probe.title)
    return Table(rows, probe.columns, title=title + "; shown: the disagreements and the "
                 "patterns the text discusses")


# ------------------------------------------------------------------ the exercise's layouts

EXERCISE = "04_tile_layout"
# Layouts under the exercise's rule (k along the rows of both tiles), as the expression of
# a_word(m, k); b_word(k, n) is the same with n for m (x stands for both), or, for a layout
# whose tiles differ, a pair (a_word, b_word).
EXERCISE_LAYOUTS = {
    "rows of BLOCK words": "x * BLOCK + k",
    "rows of BLOCK + 1": "x * (BLOCK + 1) + k",
    "rows of BLOCK + 2": "x * (BLOCK + 2) + k",
    "rows of BLOCK + 3": "x * (BLOCK + 3) + k",
    "rows of BLOCK + 4": "x * (BLOCK + 4) + k",
    "A: rows of BLOCK, B: rows of BLOCK + 1": ("m * BLOCK + k", "n * (BLOCK + 1) + k"),
    "rows of BLOCK, XOR swizzle": "x * BLOCK + (k ^ ((x & 7) << 2))",
}
# The layout that reaches the least a step can cost under the rule: A read wide, B narrow.
MIXED = "A: rows of BLOCK, B: rows of BLOCK + 1"
SWIZZLE = EXERCISE_LAYOUTS["rows of BLOCK, XOR swizzle"]
# The exercise kernel's inner loop, and the same with explicit 16-byte loads: four values
# of k of each tile per load, whatever the compiler can prove about the addresses.
SCALAR_LOOP = """#pragma unroll
        for (int k = 0; k < BLOCK; ++k)
            acc += sA[a_word<BLOCK>(ty, k)] * sB[b_word<BLOCK>(k, tx)];"""
FLOAT4_LOOP = """#pragma unroll
        for (int k = 0; k < BLOCK; k += 4) {      // four values of k per load
            const float4 a4 = *reinterpret_cast<const float4*>(&sA[a_word<BLOCK>(ty, k)]);
            const float4 b4 = *reinterpret_cast<const float4*>(&sB[b_word<BLOCK>(k, tx)]);
            acc += a4.x * b4.x;
            acc += a4.y * b4.y;
            acc += a4.z * b4.z;
            acc += a4.w * b4.w;
        }"""


def tile_expressions(expression) -> tuple[str, str]:
    """(a_word, b_word) of a layout of EXERCISE_LAYOUTS: a pair as it is, one expression
    in x for both tiles (x: m in a_word, n in b_word)."""
    if isinstance(expression, tuple):
        return expression
    return expression.replace("x", "m"), expression.replace("x", "n")


def with_layout(source: str, expression, float4: bool = False) -> str:
    """The exercise's source `source` (a submission, e.g. `magic.submitted`) with
    `expression` as the layout of the tiles (one expression in x for both, or a pair
    (a_word, b_word): `tile_expressions`); with `float4`, its inner loop reads four values
    of k at once with explicit float4 loads (FLOAT4_LOOP) from tiles declared 16-byte
    aligned."""
    from gemm_kernels.exercises.ch04_checks import with_word
    for function, expr in zip(("a_word", "b_word"), tile_expressions(expression)):
        source = with_word(source, function, expr)
        if source is None:
            raise ValueError(f"the source has no function {function}")
    if float4:
        if SCALAR_LOOP not in source:
            raise ValueError("the source's inner loop is not the exercise's")
        source = source.replace(SCALAR_LOOP, FLOAT4_LOOP).replace(
            "__shared__ float", "__shared__ __align__(16) float")
    return source


def _priced(source: str) -> dict:
    from gemm_kernels.exercises import ch04_checks
    from gemm_kernels.exercises.catalog import get
    ex = get(EXERCISE)
    return ch04_checks.assess(source, ex.params["BLOCK"], EXERCISE, ex.kernel,
                              tuple(sorted(ex.params.items())))


def exercise_layouts(source: str, layouts=None):
    """Each layout compiled in the exercise's kernel (`source`: a submission) and priced
    the way the grader prices it: the shared loads of one step in the SASS, and one step
    of the costliest warp in wavefronts, with its ideal (the same loads without a
    conflict) and the budget. The XOR swizzle twice: read by the kernel's scalar loop, and
    by explicit float4 loads."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.exercises import ch04_checks as c
    from gemm_kernels.exercises.catalog import get
    block = get(EXERCISE).params["BLOCK"]
    cases = [(label, expr, False) for label, expr in (layouts or EXERCISE_LAYOUTS).items()]
    if layouts is None:
        cases.append(("rows of BLOCK, XOR swizzle", SWIZZLE, True))
    rows = []
    for label, expr, float4 in cases:
        r = _priced(with_layout(source, expr, float4))
        loads = {w: n for w, n in r["loads"].items() if n}
        a_expr, b_expr = tile_expressions(expr)
        rows.append({"layout": label, "a_word(m, k)": a_expr, "b_word(k, n)": b_expr,
                     "reads in the source": "explicit float4" if float4 else "one float per k",
                     "loads of one step (SASS)": " + ".join(
                         f"{n} {c.LOAD_NAMES[w]}" for w, n in sorted(loads.items())),
                     "wavefronts per step": r["wavefronts"], "without conflicts": r["ideal"],
                     "within the budget": "yes" if not r["problems"] else "no"})
    return Table(rows, list(rows[0]), title=f"under the exercise's rule, BLOCK = {block}, "
                 f"compiled and priced as the grader does: one step of the costliest warp "
                 f"(budget {c.step_budget(block)})")


def float4_swizzle(source: str, gpu: bool | None = None):
    """The XOR swizzle with explicit float4 loads, graded like a submission (without a
    GPU, or with gpu=False: steps 1-3, step 3 on the CPU), and the start of its compiled
    inner loop: (Report, SASS text)."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.grader import grade
    from gemm_kernels.exercises.submission import submission_kernel
    from gemm_kernels.notebook import display
    from gemm_kernels.exercises.ch04_checks import with_prediction
    ex = get(EXERCISE)
    src = with_layout(source, SWIZZLE, float4=True)
    src = with_prediction(src, _priced(src)["wavefronts"])   # the price, rightly predicted
    loop = display.sass_loop(submission_kernel(EXERCISE, ex.kernel, src), ex.params,
                             start="LDS", limit=14)
    return grade(EXERCISE, src, gpu), loop


def exercise_lower_bound(block: int = 32):
    """The least one step can cost under the exercise's rule, for each pair of widths of
    the merged reads of A and of B: A (a broadcast: the model's best words per wavefront
    at its width), B (block x 32 different words, 32 per wavefront, at any width), the
    store of a (1: a warp stores one row of the A tile) and the store of b. Reads of B
    w words wide constrain the store of b: B(k, n) for k a multiple of w starts an aligned
    group of w words, so it lies in a bank that is a multiple of w, and the warp's 32
    stores of b for such a k share 32 / w banks, w words per bank. Reads of B 32 bits wide
    leave the store of b free (rows of an odd length put a column in 32 banks), and the
    reads of A do not constrain the store of b at all: the least, 50 at BLOCK = 32, needs
    A read wide and B read 32 bits at a time."""
    from gemm_kernels.core.table import Table
    rows = []
    b = block * banks.WARP // banks.BANKS
    for wa in (1, 2, 4):
        an = banks.analyse(banks.broadcast(0, 4 * wa), 4 * wa)
        a = block // wa * an.wavefronts
        for wb in (1, 2, 4):
            rows.append({"reads of A": f"{32 * wa}-bit", "reads of B": f"{32 * wb}-bit",
                         "read A": a, "read B": b, "store a": 1, "store b": wb,
                         "total": a + b + 1 + wb})
    return Table(rows, list(rows[0]), title=f"the least one step can cost a warp under the "
                 f"exercise's rule, BLOCK = {block}, for each width of the reads")


# ------------------------------------------------------------------ printed lines

def bound_line(block: int = 32) -> str:
    """The constants of the table's shared-memory bound (the measured GPU's SMs and clock)
    and the formula with them, worked for chapter 03's kernel."""
    from gemm_kernels.measure import records
    props = records.described_device()
    if not props.get("sm_count") or not props.get("sm_clock_mhz"):
        return "no device properties here"
    wf = ch03_04_tiles.wavefronts_per_step("smem_tiled", {"BLOCK": block})
    bound = ch03_04_tiles.smem_ceiling("smem_tiled", {"BLOCK": block}, props)["smem bound GFLOP/s"]
    return (f"bound GFLOP/s = {props['sm_count']} SMs x {props['sm_clock_mhz']:,.0f} MHz x "
            f"({block} x 32 x 2 flops) / wavefronts per step, for the {props.get('name', 'GPU')} "
            f"that was measured; chapter 03's kernel, {wf} wavefronts: {bound:,.0f} GFLOP/s")


def ceiling_range(size: int = 2048) -> str:
    """Measured / bound over every configuration, and how far apart the bounds are."""
    t = summary(ALL, size)
    shares = [r["% of bound"] for r in t if r["GFLOP/s"]]
    bounds = [r["bound GFLOP/s"] for r in t]
    return (f"every one of the {len(shares)} configurations runs at {min(shares):.0f}% to "
            f"{max(shares):.0f}% of its shared-memory bound, while the bounds differ "
            f"{max(bounds) / min(bounds):.1f}-fold (the fastest bound over the slowest)")


def fixed_rest(size: int = 2048):
    """How far each configuration sits below its shared-memory bound, explained by one
    constant per BLOCK. The bound lets a warp-step take w clocks of the SM (its
    wavefronts); measured, it takes t = w x bound / rate. Model: t = w + c, with c the
    clocks of everything else in a step (global loads, barriers, loop), the same for every
    layout of one BLOCK with the same bounds checks; c is its least-squares fit, the mean
    of t - w over those rows. Chapter 03's interior loop (fewer checks) is shown but left
    out of the fit. The share w / (w + c) grows with w: the cheaper a layout, the further
    below its bound it runs. Returns a Table: per row the fitted share w / (w + c) beside the
    measured one."""
    from gemm_kernels.core.table import Table
    t = [r for r in summary(ALL, size) if r["GFLOP/s"]]
    rest = {(r["BLOCK"], r["layout"]): r["wavefronts, model"] * (r["bound GFLOP/s"] / r["GFLOP/s"] - 1)
            for r in t}
    fitted = {}
    for block in sorted({r["BLOCK"] for r in t}, reverse=True):
        same = [rest[r["BLOCK"], r["layout"]] for r in t if r["BLOCK"] == block and "interior" not in r["layout"]]
        fitted[block] = sum(same) / len(same)
    rows = []
    for r in t:
        w, c = r["wavefronts, model"], fitted[r["BLOCK"]]
        rows.append({"BLOCK": r["BLOCK"], "layout": r["layout"], "wavefronts": w,
                     "other clocks, this row": round(rest[r["BLOCK"], r["layout"]], 1),
                     "% of bound": r["% of bound"],
                     "% of bound, fitted": round(100 * w / (w + c)),
                     "in the fit": "no: fewer checks" if "interior" in r["layout"] else "yes"})
    gap = max(abs(r["% of bound"] - r["% of bound, fitted"]) for r in rows
              if "interior" not in r["layout"])
    return Table(rows, list(rows[0]),
                 title=f"a warp-step takes its wavefronts plus a fixed rest of clocks, one per "
                       f"BLOCK ({', '.join(f'BLOCK = {b}: {c:.1f}' for b, c in fitted.items())}"
                       f"); the fitted share of the bound is within {gap} points of the "
                       f"measured one in every fitted row (all but chapter 03's interior "
                       f"loop, not fitted: it has fewer bounds checks) ({size}^3)")


def same_checks(size: int = 2048) -> str:
    """The chapter's fastest layout next to chapter 03's kernel with the same bounds
    checks (EDGES='always') and with its check-free interior loop, and its share of the
    cuBLAS run timed beside it."""
    from gemm_kernels.measure import ladder, lookup
    best = {"BLOCK": 32, "LAYOUT": "conflict", "PAD": 2}
    g = lookup.measure_or_lookup("bank_layout", (size,) * 3, best)["gflops"]["median"]
    # the full name once; "the fastest layout" after it, so the lines stay readable
    lines = [f"the fastest layout, {layout_name(best)}: {g:,.0f} GFLOP/s at {size}^3"]
    for edges in ("always", "auto"):
        g03 = lookup.measure_or_lookup("smem_tiled", (size,) * 3,
                                       {"BLOCK": 32, "EDGES": edges})["gflops"]["median"]
        lines.append(f"chapter 03, EDGES={edges!r}: {g03:,.0f} GFLOP/s; "
                     f"the fastest layout runs at {g / g03:.2f}x")
    share = ladder.share("bank_layout", size, best)
    if share and share["% of cuBLAS"] is not None:
        lines.append(f"the fastest layout: {share['% of cuBLAS']:.0f}% of cuBLAS timed in the same run")
    return "\n".join(lines)


def merge_scope_line(blocks=(8, 16, 32)) -> str:
    """One sentence for appendix C: whether every 128-bit instruction of the chapter's
    configurations (chapter 03's kernel at each block size and every bank_layout variant)
    costs the same whether the merge rule is checked per half-warp or over the whole warp,
    and how many configurations and 128-bit instructions that covers; so the chapter's
    numbers do not depend on the reading the probe settled."""
    configs = [("smem_tiled", {"BLOCK": b}) for b in blocks] + ch03_04_tiles.variants()
    wide = sum(1 for n, p in configs for i in ch03_04_tiles.warp_instructions(n, p)
               if i.width == 16)
    same = ch03_04_tiles.scope_independent(configs)
    extra = [c for c in configs if c not in ALL]
    # chapter 03's two rows (edges checked on every tile or not) share one layout
    which = (f"{len(configs)} configurations (the {len(configs) - len(extra)} layouts of the "
             f"chapter's tables, and chapter 03's kernel at BLOCK = "
             + " and ".join(str(p["BLOCK"]) for _, p in extra) + " as well)")
    if not same:
        return (f"some 128-bit loads of the {which} cost differently "
                f"per half-warp and over the whole warp: the reading matters")
    return (f"all {wide:,} 128-bit warp loads of the {which} cost the "
            f"same whether the rule is checked per half-warp or over the whole warp: the "
            f"chapter's counts do not depend on the reading")


def store_excess_line() -> str:
    ex = store_excess()
    if not ex:
        return "no profiled configurations here"
    return (f"{ex['configurations']} configurations at 1024^3: extra wavefronts per STS "
            f"{ex['per STS'][0]:.2f} .. {ex['per STS'][1]:.2f}; per load instruction "
            f"{ex['per load'][0]:.4f} .. {ex['per load'][1]:.4f}; all of it as a share of the "
            f"shared wavefronts: {ex['share'][0]:.2%} .. {ex['share'][1]:.2%}")


# The warm-up before the exercise: lane i loads the float2 at word 4i with one LDS.64.
WARM_UP_WORDS = tuple(4 * i for i in range(32))


def check_warm_up(mine: int | None) -> str:
    """The warm-up's check: the student's count of wavefronts for the LDS.64 of
    WARM_UP_WORDS, answered with a question while it is wrong (never the number), and with
    the bank model's phase-by-phase count once it is right. None: only says what to do,
    so that the notebook as given shows no answer."""
    from gemm_kernels.notebook.widgets import BankExplorer
    if mine is None:
        return "write your count in `my_wavefronts`, then run this cell"
    an = banks.analyse(banks.words_to_bytes(WARM_UP_WORDS), 8)
    if mine == an.wavefronts:
        return "right:\n" + BankExplorer.describe(an)
    side = "high" if mine > an.wavefronts else "low"
    return (f"not yet ({side}): a 64-bit load goes in two phases of 16 lanes; in lanes 0-15, "
            "which bank holds word 4i, and which other lane of the same phase starts in "
            "that bank?")


PREDICTION_KEYS = ("B read", "store of b", "per step")
_TRIES: dict = {}


def predicted_key(pad: int, block: int = 16, layout: str = "conflict") -> dict:
    """The answers of 'Predict, then check' for one PAD, from the bank model: the wavefronts
    of one of the warp's B reads (the instruction the SASS has, at its width), of its store
    of b, and of the whole step (every shared access of one warp and step)."""
    got = {r["access"]: r for r in
           ch03_04_tiles.per_instruction("bank_layout", {"BLOCK": block, "LAYOUT": layout,
                                                         "PAD": pad})}
    return {"B read": got["read B"]["wavefronts each"],
            "store of b": got["store b"]["wavefronts each"],
            "per step": sum(r["per warp and step"] * r["wavefronts each"] for r in got.values()),
            "B read width": got["read B"]["SASS"]}


def prediction_problems(pad: int, mine: dict, block: int = 16,
                        layout: str = "conflict") -> list[str]:
    """What is wrong in the student's predicted wavefronts for one PAD, one line each, as
    a question that points at the slip without giving the number (empty: all right)."""
    key, out = predicted_key(pad, block, layout), []
    hints = {"B read": f"B read: count again with the width ptxas uses at PAD = {pad} (a row "
                       f"of {block + pad} words: is its start 16-, 8- or 4-byte aligned?) and "
                       "the phases of that width (8 lanes for 128 bits, 16 for 64)",
             "store of b": f"store of b: lane (tx, ty) writes word tx * {block + pad} + ty; "
                           "a warp is two rows of 16 threads, so find which lanes share a bank",
             "per step": "per step: add up every shared access of one warp and step: the "
                         "stores of a and b once, and each read as often as the SASS issues "
                         f"it for {block} values of k"}
    for k in PREDICTION_KEYS:
        if mine.get(k) is None:
            out.append(f"{k}: not predicted")
        elif mine[k] != key[k]:
            out.append(hints[k])
    return out


def check_prediction(pad: int | None, mine: dict | None = None, block: int = 16,
                     layout: str = "conflict", size: int = 2048):
    """'Predict, then check' for one padding. The student's predicted wavefronts (`mine`:
    B read, store of b, per step) are checked first: a wrong one is answered with a
    question, not the number, and the answer is shown once they are right or after a
    second try at that PAD. The answer: printed, the wavefronts per warp and step (model and
    Nsight Compute) and the rate at size^3; returned, the access-by-access table
    (`ch03_04_tiles.side_by_side`). With no PAD or no prediction it only says what to do,
    so that the notebook as given shows no answer."""
    if pad is None or not mine or all(mine.get(k) is None for k in PREDICTION_KEYS):
        print("write your prediction in `mine`, set PAD to 0, 1 or 2 and run this cell")
        return None
    problems = prediction_problems(pad, mine, block, layout)
    _TRIES[pad] = _TRIES.get(pad, 0) + 1
    if problems:
        print("not yet:\n  " + "\n  ".join(problems))
        if _TRIES[pad] < 2:
            print("correct your numbers and run the cell again (the answer shows after a "
                  "second try)")
            return None
        print("the answer, after your second try:")
    else:
        print(f"right: all three predictions for PAD = {pad} match the bank model")
    params = {"BLOCK": block, "LAYOUT": layout, "PAD": pad}
    row = summary([("bank_layout", params)], size)[0]
    ncu = row["wavefronts, ncu"]
    rate = row["GFLOP/s"]
    print(f"{layout_name(params)}, BLOCK = {block}: {row['wavefronts, model']} wavefronts per "
          "warp and step (bank model)"
          + (f", {ncu:.1f} counted by Nsight Compute" if ncu is not None else "")
          + (f"; {rate:,.0f} GFLOP/s at {size}^3" if rate is not None else
             f"; no rate recorded at {size}^3"))
    return ch03_04_tiles.side_by_side("bank_layout", params)


def prediction_table(pads=(0, 1, 2), block: int = 16, layout: str = "conflict"):
    """The solution's answer in one table: per PAD, each access of one warp and step as
    the SASS issues it (instruction x count) with the wavefronts one of them costs (bank
    model), and the step's total; the derivation by hand explains each cell."""
    from gemm_kernels.core.table import Table
    names = {"read B": "B read", "store b": "store of b", "read A": "A read",
             "store a": "store of a"}
    rows = []
    for pad in pads:
        params = {"BLOCK": block, "LAYOUT": layout, "PAD": pad}
        got = {r["access"]: r for r in ch03_04_tiles.per_instruction("bank_layout", params)}
        row = {"PAD": pad}
        total = 0
        for access, head in names.items():
            r = got[access]
            row[head] = f"{r['per warp and step']} {r['SASS']} x {r['wavefronts each']:g}"
            total += r["per warp and step"] * r["wavefronts each"]
        row["per step"] = total
        rows.append(row)
    return Table(rows, ["PAD", *names.values(), "per step"],
                 title=f"{layout}, BLOCK = {block}: per warp and step, instructions x "
                       "wavefronts each (bank model)")


# ------------------------------------------------------------------ the 50-wavefront layout, timed

# The least a step can cost under the exercise's rule (MIXED: A read wide, B read 32 bits
# at a time from rows of BLOCK + 1) costs one wavefront less than the worked solution's
# rows of BLOCK + 2, and issues 40 shared loads per step where that one issues 32: which
# is faster is a timing question. `timed_variants` times it beside the exercise's kernel.
MIXED_TIMED = f"{EXERCISE}: {MIXED}"


def mixed_kernel():
    """The exercise's kernel with the MIXED layout (priced at 50), named MIXED_TIMED, the
    name its recorded row carries."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.ch04_checks import with_prediction
    from gemm_kernels.exercises.notebooks import solution_source
    from gemm_kernels.exercises.submission import submission_kernel
    source = with_prediction(with_layout(solution_source(EXERCISE), EXERCISE_LAYOUTS[MIXED]),
                             50)
    k = submission_kernel(EXERCISE, get(EXERCISE).kernel, source)
    return k.with_code(k.code, name=MIXED_TIMED, source=k.source)


def _mixed_rows():
    """(the recording, [(label, wavefronts per step, row)]): the chapter's kernel at the
    worked solution's layout (rows of BLOCK + 2, 51) and the 50-wavefront layout, both
    from the one run that timed the 50 beside the chapter's kernel; ([] where the 50 was
    not timed)."""
    from gemm_kernels.core.launch import kernel_of
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.ch04_checks import chapter_03_cost
    from gemm_kernels.exercises.notebooks import solution_shape
    from gemm_kernels.measure import lookup
    ex = get(EXERCISE)
    shape = tuple(solution_shape(EXERCISE))
    rec = lookup.variant_recording(mixed_kernel(), shape, dict(ex.params))
    mixed = lookup.variant_row(mixed_kernel(), shape, dict(ex.params), rec=rec)
    if mixed is None:
        return rec, []
    chapter = next((r for r in rec.find(ex.kernel, shape, kernel_of(ex.kernel).resolve(ex.params))
                    if r.get("run") == mixed.get("run") and "gflops" in r), None)
    rows = [(f"{ex.params['LAYOUT']}, PAD={ex.params['PAD']} (the worked solution's layout)",
             ch03_04_tiles.wavefronts_per_step(ex.kernel, ex.params), chapter),
            (MIXED, chapter_03_cost(32), mixed)]
    return rec, [r for r in rows if r[2]]


def mixed_against_solution():
    """The 50-wavefront layout's rate beside the chapter's kernel at the worked
    solution's layout (51, the chapter's fastest), both from the one run that timed
    them side by side; a sentence instead where it was not recorded."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.exercises.notebooks import solution_shape
    from gemm_kernels.measure import lookup
    from gemm_kernels.notebook.display import Text
    rec, got = _mixed_rows()
    if not got:
        return Text(f"The layout \"{MIXED}\" has not been timed yet; on a GPU, "
                    "`python -m gemm_kernels.notebook.timed_variants "
                    f"\"{MIXED_TIMED}\"` times it beside the chapter's kernel.")
    rows = [{"layout": label, "wavefronts per step": w, "GFLOP/s": r["gflops"]["median"],
             "range": f"{r['gflops']['min']:,.0f} .. {r['gflops']['max']:,.0f}",
             "% of cuBLAS": f"{lookup.share(r):.1f}%" if lookup.share(r) is not None else "-"}
            for label, w, r in got]
    shape = "x".join(map(str, solution_shape(EXERCISE)))
    return Table(rows, list(rows[0]), title=f"{EXERCISE} at {shape}: medians and ranges of "
                 f"the timed calls, one run, each beside cuBLAS ({rec.label})"
                 + other_gpu_warning(rec))


def mixed_verdict() -> str:
    """One line: which of the two layouts of `mixed_against_solution` ran faster in
    their common run, by how much, and whether the ranges of their timed calls overlap
    (then neither is faster beyond the spread)."""
    _, got = _mixed_rows()
    if len(got) < 2:
        return "the two layouts were not timed in one run here"
    (_, w51, r51), (_, w50, r50) = got
    a, b = r50["gflops"], r51["gflops"]
    fast, slow = (w50, w51) if a["median"] >= b["median"] else (w51, w50)
    ratio = max(a["median"], b["median"]) / min(a["median"], b["median"])
    overlap = a["min"] <= b["max"] and b["min"] <= a["max"]
    return (f"{fast} wavefronts per step ran at {ratio:.2f}x the rate of {slow}; "
            + ("the ranges of the timed calls overlap: neither is faster beyond the spread"
               if overlap else
               f"the ranges do not overlap: every timed call of the {fast} beat every call "
               f"of the {slow}"))


def other_gpu_warning(rec) -> str:
    """A line for a table recorded on another GPU than the chapter's other tables: its
    rows compare with each other only (a rate on one GPU says nothing of another's)."""
    from gemm_kernels.measure import records
    shown = records.current()
    name = (lambda r: r.device.get("name") if isinstance(r.device, dict) else r.device)
    if rec is None or shown is None or name(rec) == name(shown):
        return ""
    return (f"\nnot the GPU of the chapter's other tables ({name(shown)}): compare these "
            "rows with each other only")
