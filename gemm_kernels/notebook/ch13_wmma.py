"""Chapter 13: tensor cores through WMMA. What the tensor cores give (cuBLAS in FP16 and
FP32 on one GPU, in one run), what a warp's 16 x 16 x 16 step does, a tutorial's
half-precision kernel and its three bugs (each run through the checker: on the GPU, or
on the CPU in the emulation), the two kernels of cuda/13_wmma.cu measured and profiled,
the bank model applied to the fragment loads (ldmatrix), and the numerics of FP16 inputs.

Chapter 13's rows may sit in another recording than the one the other chapters show:
`recording()` finds the one that holds them, and every number here is read from it, so
that a plot never mixes GPUs.
"""
from __future__ import annotations

import re

from gemm_kernels.core import analysis, compiler, device
from gemm_kernels.core.kernels import get
from gemm_kernels.core.table import Table, fmt_number
from gemm_kernels.measure import records, studies, timing
from gemm_kernels.memory import banks
from gemm_kernels.notebook import evidence
from gemm_kernels.notebook.display import Markdown, Text
from gemm_kernels.notebook.mma_layout import fragment_map, lane_grid

NAIVE, TILED = "wmma_naive", "wmma_tiled"
SIZES = (1024, 2048, 4096, 8192)
STUDY = "ch13_wmma"


def recording():
    """The recording that holds chapter 13's rows (see `records.holding`)."""
    return records.holding(TILED)


def study_recording():
    """The recording that holds the chapter's Nsight Compute study (sections 7 and 8):
    the one shown if it does, else another GPU's, named wherever it is shown."""
    return studies.recording_of(STUDY)


def which_recording() -> Text:
    rec, prof = recording(), study_recording()
    if rec is None:
        return Text("This chapter's measurements are not in any recording here.")
    return Text(f"This chapter's measurements: {rec.label}."
                + evidence.profile_elsewhere(rec, prof, "sections 7 and 8"))


def _row(kernel: str, n: int, params: dict | None = None, rec=None) -> dict | None:
    rec = rec or recording()
    if rec is None:
        return None
    full = {} if kernel in timing.REFERENCE_KERNELS else get(kernel).resolve(params)
    rows = [r for r in rec.find(kernel, (n, n, n), full) if "gflops" in r]
    return rows[0] if rows else None


def _tflops(row) -> float | None:
    return row["gflops"]["median"] / 1000 if row else None


# ------------------------------------------------------------------ 1. the gain

def tensor_core_gain(rec=None) -> Table:
    """cuBLAS in FP32 (FFMA, SGEMM) and in FP16 with FP32 accumulation (tensor cores),
    each timed alone in the same run, at each size."""
    rec = rec or recording()
    rows = []
    for n in SIZES:
        s, h = _row("cublas", n, rec=rec), _row("cublas_hgemm", n, rec=rec)
        if s and h and s["run"] == h["run"]:
            rows.append({"size": f"{n}³", "FP32 TFLOP/s": _tflops(s),
                         "FP16 (FP32 accumulate) TFLOP/s": _tflops(h),
                         # the ratio of the rates as printed (3 figures), so that a reader
                         # dividing the two columns finds the same number
                         "FP16 / FP32": float(f"{_tflops(h):.3g}") / float(f"{_tflops(s):.3g}")})
    return Table(rows, ["size", "FP32 TFLOP/s", "FP16 (FP32 accumulate) TFLOP/s",
                        "FP16 / FP32"],
                 title=f"cuBLAS, each timed on its own in one run ({_gpu(rec)})")


def _label(rec) -> str:
    return rec.label if rec is not None else "no recording"


def _gpu(rec) -> str:
    """The GPU alone ('H200'), for a caption: the banner (`which_recording`) gives each
    recording's GPU and days once, so the chapter's own captions repeat only the GPU.
    Shared helpers (`plot_ladder`, `sweep_table`) keep the whole label."""
    return rec.device["name"].removeprefix("NVIDIA ") if rec is not None else "no recording"


# ------------------------------------------------------------------ 2. the pictures

def plot_tile_walk(ax=None):
    """One warp's work in the naive kernel: its 16 x 16 tile of C, and the K loop that
    multiplies a 16 x 16 tile of A (a row strip) by a 16 x 16 tile of B (a column strip)
    per mma_sync."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 4.2))
    M = N = K = 6          # in tiles of 16
    tm, tn, step = 2, 3, 1
    origin = {"A": (0, 0), "B": (K + 1.5, M + 1.5), "C": (K + 1.5, 0)}

    def grid(name, rows, cols, color_of):
        x0, y0 = origin[name]
        for r in range(rows):
            for c in range(cols):
                ax.add_patch(Rectangle((x0 + c, y0 + rows - 1 - r), 1, 1,
                                       facecolor=color_of(r, c), edgecolor="0.6", lw=0.6))
        ax.text(x0 + cols / 2, y0 + rows + 0.2, name, ha="center", va="bottom", fontsize=12)

    grid("A", M, K, lambda r, c: "tab:orange" if (r == tm and c == step) else
         "moccasin" if r == tm else "white")
    grid("B", K, N, lambda r, c: "tab:orange" if (c == tn and r == step) else
         "moccasin" if c == tn else "white")
    grid("C", M, N, lambda r, c: "tab:blue" if (r == tm and c == tn) else "white")
    ax.annotate("one mma_sync: 16 x 16 of A times 16 x 16 of B,\nadded to the warp's "
                "16 x 16 accumulator", xy=(origin["C"][0] + tn + 0.5, M - tm - 0.5),
                xytext=(origin["C"][0] + N + 0.8, 2.0), fontsize=9,
                arrowprops={"arrowstyle": "->"})
    ax.text(origin["A"][0] + K / 2, -1.4, "the warp's loop walks along K, 16 at a time:\n"
            "dark = this step, light = the strip it walks", ha="center", fontsize=9)
    ax.set_xlim(-0.5, 2 * K + N + 6)
    ax.set_ylim(-1.8, M + K + 3)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("One warp of the naive kernel: each square is a 16 x 16 tile")
    return ax


def warp_map(notes: bool, WM: int = 2, WN: int = 2) -> list[list[tuple[int, int]]]:
    """(warp_m, warp_n) that each thread of a (32, WM * WN) block computes, per row of
    threads: the chapter's rule (row threadIdx.y is one warp), or the notes' rule (the
    warp from threadIdx.y / 8 and threadIdx.x / 8, as if a warp were 8 x 8 threads)."""
    return [[(ty // 8, tx // 8) if notes else (ty // WN, ty % WN) for tx in range(32)]
            for ty in range(WM * WN)]


def plot_warp_map(ax=None):
    """The block's 4 x 32 threads coloured by the 16 x 16 tile they compute, with the
    chapter's rule and with the notes' rule: a warp is one row of 32 threads."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    if ax is None:
        _, ax = plt.subplots(2, 1, figsize=(10, 3.6))
    colors = ListedColormap(["tab:blue", "tab:orange", "tab:green", "tab:red"])
    for a, notes in zip(ax, (False, True)):
        m = warp_map(notes)
        a.imshow([[2 * wm + wn for wm, wn in row] for row in m], cmap=colors, vmin=0, vmax=3,
                 aspect="auto")
        # one label per run of lanes on the same tile, at its middle: readable, not
        # repeated across the band
        for ty, row in enumerate(m):
            start = 0
            for tx in range(1, len(row) + 1):
                if tx == len(row) or row[tx] != row[start]:
                    a.text((start + tx - 1) / 2, ty, "tile {},{}".format(*row[start]),
                           ha="center", va="center", fontsize=10, color="white",
                           fontweight="bold")
                    start = tx
        a.set_yticks(range(len(m)), [f"warp {ty}" for ty in range(len(m))], fontsize=8)
        a.set_xticks([0, 8, 16, 24, 31])
        a.set_xlabel("threadIdx.x (the lane)", fontsize=8)
        a.set_title(("the tutorial's rule, threadIdx.y / 8 and threadIdx.x / 8: each warp "
                     "spans four tiles, all warps the same four" if notes else
                     "the chapter's kernel: each warp, one row of threads, computes a tile "
                     "of its own") + "   (label: warp_m, warp_n of the tile)", fontsize=9)
    plt.tight_layout()
    return ax


def warp_tile_writers(swapped: bool, WM: int = 2, WN: int = 4, blocks: int = 2):
    """{(tile row, tile column): ["b0 w5", ...]}: which warp of which block (blocks one
    above the other, blockIdx.y = 0, 1, ...) writes each 16 x 16 tile of C, with the
    solution's warp index (threadIdx.y / WN, threadIdx.y % WN) or with WM and WN swapped
    (threadIdx.y / WM, threadIdx.y % WM). Tiles of the first `blocks` blocks' rows only,
    each present even where no warp writes it."""
    writers = {(r, c): [] for r in range(blocks * WM) for c in range(WN)}
    for b in range(blocks):
        for w in range(WM * WN):
            wm, wn = divmod(w, WM if swapped else WN)
            tile = (b * WM + wm, wn)
            if tile in writers:
                writers[tile].append(f"b{b} w{w}")
    return writers


def plot_swapped_warps(WM: int = 2, WN: int = 4, ax=None):
    """Two blocks of WM x WN warps, one above the other: the tiles of C each warp writes
    with the solution's index and with WM and WN swapped, coloured by how many warps
    write each tile (0: left unwritten, 2: written twice)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    if ax is None:
        _, ax = plt.subplots(1, 2, figsize=(10, 4))
    colors = ListedColormap(["white", "tab:blue", "tab:red"])
    for a, swapped in zip(ax, (False, True)):
        writers = warp_tile_writers(swapped, WM, WN)
        rows, cols = 1 + max(r for r, _ in writers), 1 + max(c for _, c in writers)
        a.imshow([[min(len(writers[r, c]), 2) for c in range(cols)] for r in range(rows)],
                 cmap=colors, vmin=0, vmax=2, alpha=0.6)
        for (r, c), who in writers.items():
            a.text(c, r, "\n".join(who) or "unwritten", ha="center", va="center", fontsize=9)
        # the line between the two blocks' rows of tiles
        a.axhline(WM - 0.5, color="black", lw=2)
        a.set_xticks(range(cols), [f"col {c}" for c in range(cols)], fontsize=8)
        a.set_yticks(range(rows), [f"row {r}" for r in range(rows)], fontsize=8)
        a.set_title(f"{'WM and WN swapped' if swapped else 'the solution'}: "
                    f"{WM} x {WN} warps, blocks b0 and b1", fontsize=9)
    plt.tight_layout()
    return ax


def plot_block_tile(params: dict | None = None, warp: tuple[int, int] = (0, 1), ax=None):
    """The tiled kernel's block tile (its default unless `params`) in 16 x 16 fragments:
    C coloured by the warp that owns each accumulator, and, for one warp at one 16-wide
    `kk` of the shared tiles, the fragments of A (left) and of B (above) it loads, each
    used by a whole row or column of its accumulators."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    p = get(TILED).resolve(params)
    wm_n, wn_n = p["WARPS_M"], 8 // p["WARPS_M"]
    rows, cols, depth = p["BM"] // 16, p["BN"] // 16, p["BK"] // 16
    fm, fn = rows // wm_n, cols // wn_n
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 7))
    colors = plt.get_cmap("tab10")
    gap = 0.6
    for r in range(rows):                      # C, by owner warp
        for c in range(cols):
            w = (r // fm) * wn_n + c // fn
            mine = (r // fm, c // fn) == warp
            ax.add_patch(Rectangle((c, -r - 1), 1, 1, facecolor=colors(w),
                                   alpha=0.9 if mine else 0.3, edgecolor="white", lw=1))
    for r in range(rows):                      # A's tile: BM x BK
        for k in range(depth):
            use = k == 0 and r // fm == warp[0]
            ax.add_patch(Rectangle((-depth - gap + k, -r - 1), 1, 1,
                                   facecolor="gold" if use else "white", edgecolor="0.5"))
    for k in range(depth):                     # B's tile: BK x BN
        for c in range(cols):
            use = k == 0 and c // fn == warp[1]
            ax.add_patch(Rectangle((c, gap + depth - k - 1), 1, 1,
                                   facecolor="gold" if use else "white", edgecolor="0.5"))
    ax.text(-depth / 2 - gap, gap + 0.3, f"A tile\n{p['BM']} x {p['BK']}", ha="center", fontsize=9)
    ax.text(cols / 2, gap + depth + 0.3, f"B tile, {p['BK']} x {p['BN']}", ha="center",
            fontsize=9)
    ax.text(cols / 2, -rows - 0.9,
            f"C: {p['BM']} x {p['BN']}, {wm_n} x {wn_n} warps of {fm} x {fn} accumulators "
            f"(colour: the owner warp)\ngold: the {fm} A and {fn} B fragments that warp "
            f"{warp} loads at one 16-wide step kk along K, for its {fm * fn} mma_sync", ha="center", fontsize=9)
    ax.set_xlim(-depth - gap - 0.3, cols + 0.3)
    ax.set_ylim(-rows - 1.6, gap + depth + 1.2)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("The tiled kernel's block tile, in 16 x 16 fragments")
    return ax


# ------------------------------------------------------------------ 3. the notes' bugs

def reinterpret_demo(M: int = 32, N: int = 32, K: int = 32, seed: int = 0) -> Table:
    """The notes' `reinterpret_cast<half*>(A)` on FP32 data, on the CPU: what the kernel
    then reads as A's first elements, and what that does to C (judged by the checker)."""
    import numpy as np
    from gemm_kernels.measure.check import compare_gemm, random_normal
    rng = np.random.default_rng(seed)
    A, B = random_normal((M, K), "float32", rng), random_normal((K, N), "float32", rng)
    seen_a = A.view(np.float16).ravel()[:M * K].reshape(M, K)
    seen_b = B.view(np.float16).ravel()[:K * N].reshape(K, N)
    with np.errstate(all="ignore"):
        C = seen_a.astype(np.float32) @ seen_b.astype(np.float32)
    v = compare_gemm(C, A.astype(np.float16), B.astype(np.float16))
    # little-endian: half j is the low (even j) or high (odd j) half of float j // 2
    # two decimals for every FP32 value, so the column lines up (0.10, not 0.1)
    rows = [{"element": f"A[0][{j}]", "the FP32 value": f"{A[0, j]:.2f}",
             "what a half* reads there": float(seen_a[0, j]),
             "its bytes come from": f"the {('low', 'high')[j % 2]} half of float A[0][{j // 2}]"}
            for j in range(4)]
    return Table(rows, ["element", "the FP32 value", "what a half* reads there",
                        "its bytes come from"],
                 title=f"{M}x{N}x{K} on the CPU: {v.bad:,} of {M * N:,} elements of C wrong "
                       f"({v.nan:,} NaN)")


# The notes' two warp-level bugs, as edits of the chapter's kernel text (cuda/13_wmma.cu).
NOTES_BUGS = {
    "the warp from threadIdx.y / 8 and threadIdx.x / 8":
        ("const int warp_m = threadIdx.y / WN, warp_n = threadIdx.y % WN;",
         "const int warp_m = threadIdx.y / 8, warp_n = threadIdx.x / 8;"),
    "B's fragment declared col_major over row-major B":
        ("wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;",
         "wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;"),
}
BUG_SHAPE = (32, 48, 64)


def notes_kernel(bug: str):
    """The chapter's naive kernel with one of the notes' bugs put back (a variant: its
    own name and text, checked like any kernel)."""
    k = get(NAIVE)
    old, new = NOTES_BUGS[bug]
    return k.with_code(k.source_text().replace(old, new), name=f"{NAIVE} ({bug})",
                       source=k.source)


# The notes' first bug as an edit too: FP32 pointers, read as FP16 through a cast (only
# for the picture: the launcher passes FP16 arrays, so the check runs the other two).
NOTES_CAST = ("hgemm_wmma_naive(int M, int N, int K, float alpha, const half* __restrict__ A,\n"
              "                 const half* __restrict__ B, float beta, float* __restrict__ C) {\n",
              "hgemm_wmma_naive(int M, int N, int K, float alpha, const float* A32,\n"
              "                 const float* B32, float beta, float* __restrict__ C) {\n"
              "    const half* A = reinterpret_cast<const half*>(A32);\n"
              "    const half* B = reinterpret_cast<const half*>(B32);\n")


# The tutorial's epilogue: C = A B, alpha and beta ignored (the exercise's part 3 adds them).
TUTORIAL_EPILOGUE = ("    wmma::store_matrix_sync(C + static_cast<size_t>(row) * N + col, acc, N,\n"
                     "                            wmma::mem_row_major);   // C = A B\n"
                     "}\n")


def _naive_text() -> str:
    text = get(NAIVE).source_text()
    start = text.index("template <int WM, int WN>")
    return text[start:text.index("\n}\n", start) + 3]


def _tutorial_text() -> str:
    """The chapter's naive kernel with the tutorial's three bugs put back and its
    epilogue (`TUTORIAL_EPILOGUE`) in place of the chapter's."""
    text = _naive_text()
    for old, new in (NOTES_CAST, *NOTES_BUGS.values()):
        assert old in text, old
        text = text.replace(old, new)
    text = text.replace("               // the whole warp leaves together", "")
    cut = text.index("    // An accumulator fragment loaded from C")
    return text[:cut] + TUTORIAL_EPILOGUE


def tutorial_kernel() -> Text:
    """The tutorial kernel of section 2, in full: three bugs, and C = A B only."""
    return Text(_tutorial_text())


def notes_diff() -> Text:
    """The tutorial kernel shown as its difference from the chapter's (a unified diff)."""
    import difflib
    return Text("".join(difflib.unified_diff(_naive_text().splitlines(keepends=True),
                                             _tutorial_text().splitlines(keepends=True),
                                             "the chapter's kernel", "the tutorial kernel",
                                             n=1)))


# How section 2 names bugs 2 and 3 before the exercise: by number only (the checker's
# message is the clue; the exercise asks for the fix).
BUG_NAMES = dict(zip(NOTES_BUGS, ("bug 2", "bug 3")))


def bug_verdicts() -> Table:
    """Each bug of the notes in the chapter's kernel, through the checker: on the GPU
    (at BUG_SHAPE) when there is one, else in the CPU emulation (every thread a host
    thread; it also stops a warp whose lanes pass different pointers). The rows name
    the bugs by number (BUG_NAMES): the exercise asks for the fix."""
    from gemm_kernels.exercises import cpu_step
    from gemm_kernels.measure.check import check
    rows = []
    for bug in ["none (the chapter's kernel)", *NOTES_BUGS]:
        k = get(NAIVE) if bug not in NOTES_BUGS else notes_kernel(bug)
        if device.is_live():
            r = check(k, BUG_SHAPE, seed=13)
            ok, what = r.ok, str(r.message or "every element right")
        else:
            ok, what = cpu_step.correct_on_cpu(k, {})
        rows.append({"bug": BUG_NAMES.get(bug, bug), "verdict": {True: "right", False: "WRONG", None: "-"}[ok],
                     "what the check says": what})
    where = "on this GPU" if device.is_live() else "on the CPU (every thread emulated)"
    return Table(rows, ["bug", "verdict", "what the check says"], title=f"checked {where}")


# The usual mistakes of the exercise, each made in the worked solution (what, the
# solution's text, what replaces it).
MISTAKES = (
    ("the tutorial's warp index (threadIdx.y / 8, threadIdx.x / 8)",
     "const int warp_m = threadIdx.y / WN, warp_n = threadIdx.y % WN;",
     "const int warp_m = threadIdx.y / 8, warp_n = threadIdx.x / 8;"),
    ("every warp of a block on the same tile (warp_m = warp_n = 0)",
     "const int warp_m = threadIdx.y / WN, warp_n = threadIdx.y % WN;",
     "const int warp_m = 0, warp_n = 0;"),
    ("B's fragment declared col_major",
     "wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;",
     "wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;"),
    ("B loaded with A's leading dimension K",
     "B + static_cast<size_t>(k) * N + col, N);", "B + static_cast<size_t>(k) * N + col, K);"),
    ("C read although beta == 0", "    if (beta != 0.0f) {", "    if (true) {"),
    ("alpha left out where beta == 0",
     "} else {\n        for (int i = 0; i < acc.num_elements; ++i) acc.x[i] = alpha * acc.x[i];"
     "\n    }", "}"),
    ("WM and WN swapped in the warp's index",
     "const int warp_m = threadIdx.y / WN, warp_n = threadIdx.y % WN;",
     "const int warp_m = threadIdx.y / WM, warp_n = threadIdx.y % WM;"),
)

# A mapping of warps to tiles other than the solution's, which is just as right: every
# tile of the block still gets exactly one warp (the solution's follow-up question).
PERMUTED_WARPS = ("const int warp_m = threadIdx.y / WN, warp_n = threadIdx.y % WN;",
                  "const int warp_m = threadIdx.y % WM, warp_n = threadIdx.y / WM;")


def grader_in_short(said: str) -> str:
    """The grader's message for a mistake cut to what shows it (the check that caught it,
    or how many elements were wrong and where), for a narrow table; the full message is
    `mistake_hints`'s."""

    if "passed another pointer" in said:
        return "the lanes of a warp passed different pointers (the emulation's check)"
    if "ThreadSanitizer" in said:
        return "a data race: two threads wrote the same element (ThreadSanitizer)"
    outside = re.search(r"a (read|write) of \d+ bytes? outside (\w+)", said)
    if outside:
        return f"a {outside[1]} outside {outside[2]} (AddressSanitizer)"
    wrong = re.search(r"at (\S+)(?: with ([^:]*))?: ([\d,]+) elements? wrong(, [\d,]+ NaN)?", said)
    if wrong:
        shape, args, n, nan = wrong.groups()
        return (f"{n} element{'' if n == '1' else 's'} wrong{' (NaN)' if nan else ''} at {shape}"
                + (f", {args}" if args else ""))
    return said


def mistakes(gpu: bool | None = None) -> Table:
    """The worked solution with each of MISTAKES made, graded like a submission, shown
    narrow: the mistake, the first step that failed and, in short, what it says. The rows
    keep every step's verdict, the grader's full words and its hint (`mistake_hints`
    shows those, apart)."""
    from gemm_kernels.exercises.grader import FAIL
    from gemm_kernels.notebook.worked_solutions import graded_mistakes
    graded = graded_mistakes("13_wmma", MISTAKES, gpu, hints=True)
    steps = [c for c in graded[0] if c not in ("mistake", "what the grader says", "its hint")]
    rows = [{**r, "failed at": next((c for c in steps if r[c] == FAIL), "-"),
             "what shows it": grader_in_short(r["what the grader says"])} for r in graded]
    # one step for every row says nothing per row: it goes into the title instead
    failed = {r["failed at"] for r in rows}
    if len(failed) == 1:
        return Table(rows, ["mistake", "what shows it"],
                     title=f"the solution with one mistake each, graded as a submission: "
                           f"every one fails at step '{failed.pop()}'; what shows it")
    return Table(rows, ["mistake", "failed at", "what shows it"],
                 title="the solution with one mistake each, graded as a submission: the "
                       "first step that failed, and what shows it")


def mistake_hints(table: Table) -> Table:
    """The grader's full words and the hint it gives with each mistake of a `mistakes`
    table."""
    return Table(table, ["mistake", "what the grader says", "its hint"],
                 title="the grader's words and hint for each mistake")


def permuted_warps(gpu: bool | None = None) -> Table:
    """The worked solution with its warps mapped to tiles column-first, graded."""
    from gemm_kernels.notebook.worked_solutions import graded_mistakes
    return graded_mistakes("13_wmma", (("warp_m = threadIdx.y % WM, warp_n = threadIdx.y / WM",
                                        *PERMUTED_WARPS),), gpu,
                           title="the solution with its warps mapped column-first, graded "
                                 "as a submission (steps that cannot run here: 'not run')")


# ------------------------------------------------------------------ 4. SASS

def sass_counts(kernel: str, params: dict | None = None) -> Table:
    """The instructions that matter here, counted in the kernel's SASS (for the GPU the
    analysis describes): tensor-core mma (HMMA), fragment loads from shared memory
    (LDSM: ldmatrix), other shared and global loads, shared stores."""

    sass = compiler.sass(get(kernel), params or {})
    ops = re.findall(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass, re.M)
    groups = {"HMMA (tensor core)": "HMMA", "LDSM (ldmatrix)": "LDSM", "LDS": "LDS",
              "STS": "STS", "STG": "STG"}
    row = {"kernel": kernel}
    for label, prefix in groups.items():
        row[label] = sum(1 for o in ops if o.split(".")[0] == prefix)
    row[LDG_BY_WIDTH] = ldg_by_width(ops)
    row["HMMA shape"] = ", ".join(sorted({o for o in ops if o.startswith("HMMA")}))
    return Table([row], ["kernel", *groups, LDG_BY_WIDTH, "HMMA shape"],
                 title=f"SASS for {compiler.static_arch(get(kernel))}, whole kernel")


LDG_BY_WIDTH = "LDG, by bytes per lane"


def ldg_by_width(ops: list[str]) -> str:
    """The global loads among SASS opcodes (LDG.E.128.CONSTANT, ...) counted by the bytes
    each lane loads, widest first ("8 x 16 B, 64 x 4 B"): a 16-byte tile load and a
    4-byte element read are different costs, which one LDG total would hide."""
    import collections
    width = {"128": 16, "64": 8, "U16": 2, "S16": 2, "U8": 1, "S8": 1}
    counts = collections.Counter(
        next((width[p] for p in o.split(".")[1:] if p in width), 4)
        for o in ops if o.split(".")[0] == "LDG")
    return ", ".join(f"{n} x {b} B" for b, n in sorted(counts.items(), reverse=True)) or "0"


def naive_loads() -> Text:
    """Where the naive kernel's global loads come from, read from its SASS: the first
    step along K (its loads, each marked A or B by the HMMA operand its register feeds,
    the MOVM that transpose B's pairs in registers, and its two HMMA), and the loads
    counted by width."""
    import collections

    sass = compiler.sass(get(NAIVE), {})
    lines = [l.strip() for l in sass.splitlines() if re.search(r"\b(LDG|HMMA|MOVM)\.", l)]
    first = [i for i, l in enumerate(lines) if "HMMA" in l][:2]
    loads = [i for i, l in enumerate(lines[:first[-1] + 1]) if "LDG" in l][:8]
    # Each load marked with the operand it fills: HMMA.16816 D, A, B, C reads A from four
    # registers from its second operand on, B from two from its third (after MOVM).
    operand = {}
    for i in first:
        _, a, b, _ = (int(r) for r in re.findall(r"\bR(\d+)", lines[i])[:4])
        operand.update({a + j: "A" for j in range(4)} | {b + j: "B" for j in range(2)})

    width = max(len(l) for l in lines[:first[-1] + 1])

    def marked(line):
        dest = re.search(r"LDG\.E R(\d+),", line)
        return f"{line:<{width}}   // {operand[int(dest.group(1))]}" if (
            dest and int(dest.group(1)) in operand) else line

    step = [marked(l) for i, l in enumerate(lines[:first[-1] + 1])
            if i in loads or i in first or ("MOVM" in l and i < first[-1])]
    ops = collections.Counter(re.findall(r"\b(LDG(?:\.\w+)*) ", sass))
    narrow, wide = ops.get("LDG.E", 0), ops.get("LDG.E.64", 0)
    hmma = sum(1 for l in lines if "HMMA" in l)
    movm = sum(1 for l in lines if "MOVM" in l)
    import textwrap
    unrolled = sum(o.startswith("HMMA") for o in main_loop(sass)) // 2
    said = (f"In the whole kernel: {hmma} HMMA, that is {hmma // 2} steps along K (the loop "
            f"unrolled {unrolled} times, and a {hmma // 2 - unrolled}-step copy of the body "
            f"for the 0 to {unrolled - 1} trips left over); {narrow} LDG.E = "
            f"{hmma // 2} steps x 8; {movm} MOVM = {hmma // 2} steps x {movm // max(hmma // 2, 1)}; "
            f"and {wide} LDG.E.64, the epilogue's read of C (beta != 0).")
    return Text(textwrap.fill("The first step along K: its loads, each marked with the HMMA "
                              "operand it fills (A or B), its MOVM and its two HMMA; other "
                              "instructions left out.", 88) + "\n\n" + "\n".join(step) + "\n\n" + textwrap.fill(said, 88))


def naive_a_loads() -> dict[tuple[int, int], tuple[int, int]]:
    """Rows 0-7 of the naive kernel's 16 x 16 tile of A as its first LDG.E of A and the
    one at +0x10 read them: (row, column) -> (lane, element). The compiled addresses
    follow chapter 14's m16n8k16 layout: lane l reads 4 bytes at row l / 4, columns
    2 (l % 4) and 2 (l % 4) + 1 (elements a0, a1), and 16 bytes further along the same
    row at +0x10 (a4, a5). Two more loads read rows 8-15 (a2, a3, a6, a7)."""
    return {rc: held for rc, held in fragment_map()["A"].items() if held[1] in (0, 1, 4, 5)}


def plot_naive_a_loads(ax=None):
    """The naive kernel's tile of A: each element of rows 0-7 labelled with the lane
    that loads it (chapter 14's drawing), and each row outlined as the one 32-byte
    sector it is: the first LDG.E reads the left half of 8 sectors, the one at +0x10
    the right half. Rows 8-15, which two other loads read alike, are cut to one band
    that says so."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    if ax is None:
        _, ax = plt.subplots(figsize=(8.5, 6.2))
    cells = naive_a_loads()
    lane_grid(ax, cells, 16, 16, "A", "a",
              "The naive kernel's 16 x 16 tile of A (2 bytes per square): each square is\n"
              "'lane' over 'element'; black: the 8 sectors of 32 bytes the two loads touch")
    rows = sorted({r for r, _ in cells})
    for r in rows:
        ax.add_patch(Rectangle((0, 15 - r), 16, 1, fill=False, edgecolor="black", lw=1.8))
    ax.plot([8, 8], [16 - len(rows), 16], color="black", ls="--", lw=1)
    ax.text(4, 16.15, "first LDG.E (a0, a1):\nbytes 0-15 of each sector", ha="center",
            va="bottom", fontsize=8)
    ax.text(12, 16.15, "LDG.E at +0x10 (a4, a5):\nbytes 16-31 of each sector",
            ha="center", va="bottom", fontsize=8)
    ax.text(8, 16 - len(rows) - 0.6, "rows 8-15 (not drawn): two more LDG.E, "
            "(a2, a3) and (a6, a7), in the same pattern", ha="center", va="center",
            fontsize=9, color="0.4")
    ax.set_ylim(16 - len(rows) - 1.2, 17.4)
    drawn = [(t, l.get_text()) for t, l in zip(ax.get_yticks(), ax.get_yticklabels())
             if t > 16 - len(rows)]
    ax.set_yticks([t for t, _ in drawn], [l for _, l in drawn])
    ax.set_xlabel("column (k)")
    ax.set_ylabel("row (m)")
    return ax


def main_loop(sass: str) -> list[str]:
    """The opcodes of a kernel's K loop in its SASS: `analysis.main_loop` counting HMMA,
    so not a small loop of the prologue or the epilogue; none when no loop holds an HMMA."""
    body = analysis.main_loop(sass, work=("HMMA",)) if analysis.loops(sass) else []
    if not any(f == "HMMA" for _, f, _ in body):
        return []
    return [text.split()[0] for _, _, text in body]


def tiled_helpers():
    """The two helpers the tiled kernel calls, folded under the kernel in section 6:
    `TileLoader` (the 16-byte global loads into registers, then the stores into the
    padded shared rows) from cuda/13_wmma.cu, and `gemm_epilogue` from common.cuh (the
    `beta == 0` branch)."""
    from gemm_kernels.notebook import display
    loader = display.source(TILED, between=("// Copy one BR x BC tile", "};"))
    epilogue = display.source("common.cuh", between=("// C = alpha * acc + beta * C", "}"))
    return display.Folded(Text(f"{loader}\n\n// from common.cuh:\n{epilogue}"),
                          "The two helpers it calls: TileLoader and gemm_epilogue")


# What each group of the main loop's opcodes does (any other opcode: address arithmetic
# and moves, the integer work that computes where to load and store).
LOOP_GROUPS = (("the tensor core", ("HMMA",)),
               ("memory and the barrier", ("LDSM", "LDS", "LDG", "STS", "BAR")),
               ("branches and their tests", ("BRA", "BSSY", "BSYNC", "ISETP", "PLOP3")))


def loop_opcodes(kernel: str = TILED, params: dict | None = None) -> Text:
    """The main loop of a kernel's SASS, counted by opcode and grouped by what the
    instructions do: what a warp issues per tile of K, and how many per HMMA."""
    import collections
    ops = collections.Counter(o.split(".")[0] for o in main_loop(compiler.sass(get(kernel),
                                                                              params or {})))
    total, hmma = sum(ops.values()), ops.get("HMMA", 0)
    if not hmma:
        return Text(f"{kernel}: no loop with HMMA found in its SASS.")
    named = {o for _, group in LOOP_GROUPS for o in group}
    groups = [(name, [o for o in group if ops.get(o)]) for name, group in LOOP_GROUPS]
    groups.append(("address arithmetic and moves",
                   [o for o, _ in ops.most_common() if o not in named]))
    said = [f"* {name}: {sum(ops[o] for o in group)} ("
            + ", ".join(f"{ops[o]} {o}" for o in group) + ")" for name, group in groups]
    overhead = sum(ops[o] for _, group in groups[2:] for o in group)
    return Markdown(f"The main loop of {kernel} (one tile of K, per warp): {total} "
                    f"instructions for {hmma} HMMA, {total / hmma:.1f} per HMMA (the profile's count "
                    f"is higher: it includes the prologue and the epilogue).\n\n"
                    + "\n".join(said)
                    + f"\n\nBranches and address arithmetic together: {overhead} of {total} "
                    f"({_pct(100 * overhead / total)}).")


# ------------------------------------------------------------------ 5. measured

def rates_table(kernels=(NAIVE, TILED), rec=None) -> Table:
    """Each kernel's default at each size, and cuBLAS FP16 timed beside it."""
    rec = rec or recording()
    rows = []
    for n in SIZES:
        for k in kernels:
            r = _row(k, n, rec=rec)
            if r:
                # the % from the rates as printed (3 digits), so that a reader redoing it agrees
                ours = float(f"{_tflops(r):.3g}")
                theirs = float(f"{r['reference']['gflops']['median'] / 1000:.3g}")
                rows.append({"size": f"{n}³", "kernel": k, "TFLOP/s": ours,
                             "cuBLAS FP16 TFLOP/s": theirs,
                             "% of cuBLAS FP16": 100 * ours / theirs})
    shape = get(NAIVE).resolve({})
    said = ([f"{NAIVE} in blocks of {shape['WM']} x {shape['WN']} warps (32 x "
             f"{shape['WM'] * shape['WN']} threads)"] if NAIVE in kernels else []) + (
           [f"{TILED} at its default tile (rows padded)"] if TILED in kernels else [])
    return Table(rows, ["size", "kernel", "TFLOP/s", "cuBLAS FP16 TFLOP/s", "% of cuBLAS FP16"],
                 title=f"Each row's cuBLAS timed beside it ({_gpu(rec)}); " + ", ".join(said))


def naive_against_capstone(n: int = 4096, rec=None) -> Text:
    """The naive WMMA kernel at n³ against chapter 09's FP32 capstone (FFMA only), from
    the same recording: tensor cores fed without reuse against a good FFMA kernel."""
    naive, cap = _row(NAIVE, n, rec=rec), _row("capstone", n, rec=rec)
    if not (naive and cap):
        return Text(f"The rows at {n}³ are not all in the recording.")
    return Text(f"At {n}³ the naive WMMA kernel runs at {_tflops(naive):,.1f} TFLOP/s, "
                f"{_tflops(naive) / _tflops(cap):.2f}x the rate of chapter 09's FP32 capstone "
                f"({_tflops(cap):,.1f} TFLOP/s, FFMA only).")


SIZE_STUDY = "ch13_size_4112"   # the two WMMA kernels and the FP32 capstone, timed off 4096


def off_power_of_two(n: int = 4096, kernels: tuple[str, ...] | None = None) -> Table:
    """The naive and tiled WMMA kernels and the FP32 capstone (or only those of `kernels`,
    named as the study's steps: NAIVE, TILED, "capstone") at n³ (the chapter's run)
    and at the size of `SIZE_STUDY` (rows 32 bytes past a multiple of 128, one run of
    its own), each rate with the cuBLAS timed beside it (FP16 for the WMMA kernels, FP32
    for the capstone): the two sizes are compared through those shares, the kernels at
    one size directly."""
    study = studies.get(SIZE_STUDY)
    odd = tuple(study.shapes[0])
    rec = studies.recording_of(SIZE_STUDY, odd)
    found = studies.results(SIZE_STUDY, odd, rec) if rec else []
    if kernels is not None:
        found = [(step, row) for step, row in found if step.kernel in kernels]
    if not found or any(row is None for _, row in found):
        return Table([], ["kernel"], title=f"Not recorded yet: the kernels at {odd[0]}³.")
    rows = []
    for step, row in found:
        ref = "cuBLAS FP32" if step.kernel == "capstone" else "cuBLAS FP16"
        here = _row(step.kernel, n, rec=rec)      # the same GPU's rows at n³
        cells = {"kernel": step.label, "compared with": ref}
        for size, r in ((n, here), (odd[0], row)):
            cells[f"{size}³ TFLOP/s"] = fmt_number(_tflops(r)) if r else "-"
            cells[f"{size}³ % of its cuBLAS"] = (
                _pct(100 * r["gflops"]["median"] / r["reference"]["gflops"]["median"])
                if r and r.get("reference") else "-")
        rows.append(cells)
    return Table(rows, list(rows[0]),
                 title=f"{n}³: the chapter's rows; {odd[0]}³: "
                       f"{records.rows_label([r for _, r in found], rec)}")


def tiled_against_naive(n: int = 4096, rec=None) -> Text:
    """The tiled kernel's rate at n³ as a multiple of the naive kernel's."""
    naive, tiled = _row(NAIVE, n, rec=rec), _row(TILED, n, rec=rec)
    if not (naive and tiled):
        return Text(f"The rows at {n}³ are not all in the recording.")
    p = get(TILED).resolve({})
    small = SIZES[0]
    blocks = -(-small // p["BM"]) * -(-small // p["BN"])
    sms = (rec or recording()).device.get("sm_count")
    few = "" if not sms or 2 * blocks >= sms else (
        f" At {small}³ its grid is only {blocks} blocks of {p['BM']} x {p['BN']} for the "
        f"GPU's {sms} SMs: at most {blocks} SMs have work, which holds that row's rate down.")
    return Text(f"At {n}³ the tiled kernel runs at {_tflops(tiled) / _tflops(naive):.1f} times "
                f"the naive kernel's rate." + few)


def global_bytes_per_hmma(params: dict | None = None) -> Table:
    """Bytes of A and B a kernel asks of global memory per HMMA (one 16 x 8 x 16
    tensor-core step), counted from the tiles: the naive kernel's warp loads a 16 x 16
    fragment of A and of B (FP16) per 16-deep step for two HMMA; the tiled kernel's block
    loads a BM x BK tile of A and a BK x BN tile of B per step for BM*BN*BK / (16*8*16)
    HMMA. Requests to the memory system (L2 or DRAM), not DRAM traffic."""
    p = get(TILED).resolve(params)
    frags = 2 * 16 * 16 * 2                       # a fragment of A and of B, 2 bytes a half
    naive = frags / 2
    tile = (p["BM"] * p["BK"] + p["BK"] * p["BN"]) * 2
    hmma = p["BM"] * p["BN"] * p["BK"] // (16 * 8 * 16)
    rows = [{"kernel": NAIVE, "loaded per step": "one 16 x 16 fragment of A and of B per warp",
             "bytes per step": frags, "HMMA per step": 2, "bytes per HMMA": naive},
            {"kernel": TILED, "loaded per step": f"a {p['BM']} x {p['BK']} tile of A and a "
                                                 f"{p['BK']} x {p['BN']} tile of B per block",
             "bytes per step": tile, "HMMA per step": hmma, "bytes per HMMA": tile / hmma}]
    rows[1]["x fewer"] = f"{naive / (tile / hmma):.0f}x"
    rows[0]["x fewer"] = "1x"
    return Table(rows, list(rows[0]), title="global loads of A and B (FP16) per HMMA, "
                 f"counted from the tiles ({TILED}: BM = {p['BM']}, BN = {p['BN']}, "
                 f"BK = {p['BK']})")


LADDER = (("cublas_hgemm", "cuBLAS FP16 (tensor cores)", "k", "-"),
          (TILED, "13 wmma_tiled", "tab:blue", "-"),
          (NAIVE, "13 wmma_naive", "tab:cyan", "-"),
          ("cublas", "cuBLAS FP32", "0.4", "--"),
          ("capstone", "09 capstone (FP32)", "tab:orange", "--"))


def plot_ladder(rec=None, ax=None, series=LADDER):
    """The FP16 kernels and cuBLAS FP16 beside the FP32 series' best (chapter 09's
    capstone) and cuBLAS FP32, from the same recording, log axis. `series`: (kernel,
    label, colour, line style[, params]) per line (a later chapter adds its kernels)."""
    import matplotlib.pyplot as plt
    rec = rec or recording()
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.5))
    for kernel, label, color, style, *params in series:
        pts = [(n, _tflops(_row(kernel, n, params[0] if params else None, rec=rec)))
               for n in SIZES]
        pts = [(n, t) for n, t in pts if t]
        if pts:
            ax.plot([n for n, _ in pts], [t for _, t in pts], marker="o", color=color,
                    linestyle=style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = [t for t in (10, 20, 50, 100, 200, 500, 1000)]
    ax.set_yticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xticks(SIZES, [f"{n}³" for n in SIZES])
    ax.set_ylabel("TFLOP/s (log axis)")
    ax.set_xlabel("M = N = K")
    ax.set_title(f"Tensor cores (solid) and FFMA (dashed), {_label(rec)}", fontsize=10)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(True, which="both", alpha=0.3)
    return ax


# ------------------------------------------------------------------ 6. the profile

def profile_rows(rec=None) -> list[tuple[str, dict | None]]:
    rec = rec or study_recording()
    return [(step.label, row["metrics"] if row else None)
            for step, row in studies.results(STUDY, rec=rec)]


def profiler_clocks(n: int = 4096, rec=None) -> Text:
    """Why the profiler's times are longer than the timed rates (Nsight Compute holds
    the clock low while it measures): `evidence.profiled_against_timed` for this
    chapter's study at n³, on the GPU that holds it."""
    return Markdown(evidence.profiled_against_timed(STUDY, (n, n, n), rec or study_recording()))


def profiler_ratios(n: int = 4096, rec=None) -> Text:
    """Appendix B's test of the clock reading: per profiled step that was also timed
    (`evidence.profiled_and_timed`), its profiled time over the time its timed rate
    implies, beside the GPU's top clock over the clock the profiler held for it; each
    time as `profiler_clocks` prints it (3 digits). Were the lower clock the whole
    story, the two ratios would match."""
    rec = rec or study_recording()
    top = (rec.device or {}).get("sm_clock_mhz")
    steps = [s for s in evidence.profiled_and_timed(STUDY, (n, n, n), rec)
             if s["timed_ms"] and s["clock_mhz"]]
    if not (steps and top):
        return Text("The profiled and the timed times are not both recorded.")
    lines = []
    for s in steps:
        prof, timed = float(f"{s['profiled_ms']:.3g}"), float(f"{s['timed_ms']:.3g}")
        lines.append(f"{s['label']}: profiled time / timed time = {prof:g} / {timed:g} = "
                     f"{prof / timed:.2f}; top clock / the profiler's = {top:,.0f} / "
                     f"{s['clock_mhz']:,.0f} = {top / s['clock_mhz']:.2f}")
    return Text("\n".join(lines))


PACE = ("warps per scheduler", "cycles per issue, all reasons", "issue active %")
PER_HMMA = ("instructions per HMMA", "tensor pipe cycles per HMMA")


def hmma_pace(m: dict) -> tuple[float | None, float | None]:
    """From a profiled row's counters: the instructions a warp issues per HMMA (all
    instructions executed over the HMMA executed) and the cycles each HMMA keeps the
    tensor pipe busy (the pipe's active cycles over the HMMA executed)."""
    hmma = m.get("sm__inst_executed_pipe_tensor_op_hmma.sum")
    pipe = m.get("sm__pipe_tensor_op_hmma_cycles_active.sum")
    inst = m.get("smsp__inst_executed.sum")
    return (inst / hmma if hmma and inst else None, pipe / hmma if hmma and pipe else None)


def warp_pace(m: dict) -> tuple[float | None, float | None, float | None]:
    """How fast a scheduler can issue, from a profiled row's metrics: the warps it holds
    (sm__warps_active as warps, over the SM's schedulers), the cycles one warp takes from
    one instruction to its next (every stall reason per issued instruction, 'selected',
    the issue itself, included), and the share of cycles in which it issued. Warps /
    cycles bounds the issue share: few warps, each slow, cannot keep it high."""
    from gemm_kernels.notebook.ch07_ablation import SCHEDULERS_PER_SM, WARPS_PER_SM
    active = m.get("sm__warps_active.avg.pct_of_peak_sustained_active")
    reasons = evidence.stall_reasons({"metrics": m})
    return (active / 100 * WARPS_PER_SM / SCHEDULERS_PER_SM if active else None,
            sum(reasons.values()) if reasons else None,
            m.get("smsp__issue_active.avg.pct_of_peak_sustained_active"))


def profile_table(rec=None) -> Table:
    """The study's main counters per step, at 4096³: time, the tensor pipe's busy
    share, DRAM bytes read, shared-memory wavefronts of loads and their bank conflicts,
    and the two largest stall reasons per issued instruction (a warp's pace is
    `pace_table`'s)."""
    rows = []
    for label, m in profile_rows(rec):
        if m is None:
            rows.append({"step": label})
            continue
        stalls = sorted(((v, k) for k, v in evidence.stall_reasons({"metrics": m}).items()
                         if "selected" not in k), reverse=True)[:2]
        rows.append({
            "step": label, "time (ms)": m.get("gpu__time_duration.sum", 0) / 1e6,
            "tensor pipe busy %": m.get(
                "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
            "DRAM read (MB)": m.get("dram__bytes_read.sum", 0) / 1e6,
            "shared load wavefronts (M)":
                m.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", 0) / 1e6,
            "of them conflicts (M)":
                m.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", 0) / 1e6,
            "largest stalls (cycles per issue)": ", ".join(f"{n} {fmt_number(v)}"
                                                           for v, n in stalls)})
    return Table(rows, ["step", "time (ms)", "tensor pipe busy %", "DRAM read (MB)",
                        "shared load wavefronts (M)", "of them conflicts (M)",
                        "largest stalls (cycles per issue)"],
                 title=f"Nsight Compute at 4096³ ({_gpu(rec or study_recording())})")


# The counters of `profile_table` that are not stall reasons, then the two waits section
# 8 reads: what `ncu_command` asks for.
PROFILE_METRICS = ("gpu__time_duration.sum",
                   "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                   "dram__bytes_read.sum",
                   "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                   "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                   "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
                   "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio")


def ncu_command():
    """The Nsight Compute command line for section 8's table (`studies.ncu_command`
    with `PROFILE_METRICS`), folded: what to run on a GPU to count it again."""
    from gemm_kernels.notebook import display
    return display.Folded(Text(studies.ncu_command(STUDY, PROFILE_METRICS)),
                          "How to collect these counters yourself (Nsight Compute)")


def _step_occupancy(step):
    """The occupancy model (`analysis.kernel_occupancy`) of a study step's kernel, with
    the registers of its timed binary where the chapter's recording holds one (the
    profiled binary is built from the same source), else those ptxas gives here."""
    from gemm_kernels.core import analysis
    full = get(step.kernel).resolve(step.params)
    rec = recording()
    timed = [r["binary"]["registers"] for r in (rec.find(step.kernel, None, full) if rec else [])
             if r.get("binary", {}).get("registers")]
    return analysis.kernel_occupancy(step.kernel, step.params,
                                     registers=timed[0] if timed else None)


def pace_table(rec=None) -> Table:
    """A warp's pace per profiled step: the registers per thread, the blocks per SM the
    occupancy model allows and what limits them, then, measured, the warps each
    scheduler holds, the cycles one warp takes from one instruction to its next and
    the share of cycles in which the scheduler issued (`warp_pace`)."""
    rows = []
    for step, row in studies.results(STUDY, rec=rec or study_recording()):
        occ = _step_occupancy(step)
        warps, cycles, issue = warp_pace(row["metrics"]) if row else (None,) * 3
        every, per_hmma = hmma_pace(row["metrics"]) if row else (None, None)
        rows.append({"step": step.label, "registers per thread": occ.registers_per_thread,
                     "blocks per SM (limited by)":
                         f"{occ.blocks_per_sm} ({occ.limiter}; {occ.warps_per_sm} of "
                         f"{occ.max_warps_per_sm} warps)",
                     PACE[0]: warps, PACE[1]: cycles,
                     # whole percents: "10%" beside "39.5%" would read as unlike values
                     PACE[2]: None if issue is None else round(issue),
                     PER_HMMA[0]: every, PER_HMMA[1]: per_hmma})
    return Table(rows, ["step", "registers per thread", "blocks per SM (limited by)", *PACE,
                        *PER_HMMA],
                 # the profile of `profile_table`, whose caption names the recording
                 title="A warp's pace at 4096³: occupancy from the registers, then Nsight "
                       "Compute (the profile of section 8's first table)")


def plot_profile(rec=None, ax=None):
    """Per step: the tensor pipe's busy share and the shared-load wavefronts per LDSM."""
    import matplotlib.pyplot as plt
    rows = [(label, m) for label, m in profile_rows(rec) if m]
    if ax is None:
        _, ax = plt.subplots(1, 2, figsize=(11, 3.2))
    labels = [label.replace(", ", ",\n") for label, _ in rows]
    busy = [m.get("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", 0)
            for _, m in rows]
    ax[0].barh(labels, busy, color="tab:blue")
    ax[0].set_xlabel("% of cycles the HMMA pipe is busy")
    ax[0].set_xlim(0, 100)
    for i, b in enumerate(busy):
        ax[0].text(b + 1, i, f"{b:.0f}%", va="center", fontsize=8)
    stalls = [m.get("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", 0)
              for _, m in rows]
    short = [m.get("smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio", 0)
             for _, m in rows]
    y = range(len(rows))
    ax[1].barh([i - 0.2 for i in y], stalls, height=0.4, color="tab:red",
               label="long scoreboard (global memory)")
    ax[1].barh([i + 0.2 for i in y], short, height=0.4, color="tab:purple",
               label="short scoreboard (shared memory / MIO)")
    # values on the bars, as in the left panel
    for i, (lo, sh) in enumerate(zip(stalls, short)):
        ax[1].text(lo + 1, i - 0.2, f"{lo:.1f}", va="center", fontsize=8)
        ax[1].text(sh + 1, i + 0.2, f"{sh:.1f}", va="center", fontsize=8)
    ax[1].set_xlim(0, 1.15 * max(stalls + short))   # room for the largest value
    ax[1].set_yticks(list(y), [""] * len(rows))
    ax[1].set_xlabel("cycles a warp waits per issued instruction")
    ax[1].legend(fontsize=8)
    ax[0].invert_yaxis()
    ax[1].invert_yaxis()
    ax[0].figure.suptitle(f"Nsight Compute at 4096³ ({_gpu(rec or study_recording())})",
                          fontsize=10)
    plt.tight_layout()
    return ax


# ------------------------------------------------------------------ 7. ldmatrix banks

def ldmatrix_addresses(row_bytes: int, rows: int = 8, matrices: int = 4) -> list[int]:
    """Byte addresses the 32 lanes give one ldmatrix of four 8 x 8 half matrices read
    from a row-major shared tile whose rows are `row_bytes` long: lanes 8i to 8i+7 give
    the 8 rows (16 bytes each) of matrix i. Matrices 0 and 1 are the top and bottom 8
    rows of a 16 x 16 fragment, 2 and 3 the same 16 bytes to the right."""
    out = []
    for i in range(matrices):
        r0, c0 = 8 * (i % 2), 16 * (i // 2)
        out += [(r0 + r) * row_bytes + c0 for r in range(rows)]
    return out


def ldmatrix_analysis(row_halves: int):
    """The bank model (chapter 04's, at 16 bytes per lane: four phases of 8 lanes) of one
    fragment load from rows `row_halves` long."""
    from gemm_kernels.memory import banks
    return banks.analyse(ldmatrix_addresses(2 * row_halves), width=16)


def swizzled_ldsm_wavefronts(swizzle, row_halves: int = 32, rows: int = 16) -> list[int]:
    """The bank model's wavefronts of each fragment load of A (one per 16-wide step kk)
    from an unpadded tile whose rows are `row_halves` long, with 16-byte chunk c of row r
    stored at chunk swizzle(r, c) of that row."""
    from gemm_kernels.memory import banks
    chunks = 2 * row_halves // 16
    out = []
    for kk in range(0, chunks, 2):            # a fragment is 16 halves: two chunks
        addrs = [row * 2 * row_halves + 16 * swizzle(row, kk + i // 2)
                 for i in range(4) for row in range(8 * (i % 2), 8 * (i % 2) + 8)]
        out.append(banks.wavefronts(addrs, width=16))
    return out


def check_swizzle(swizzle, row_halves: int = 32, rows: int = 16) -> Text:
    """Section 7's optional task, graded: `swizzle(r, c)` must send the chunks of each row
    of an unpadded A tile (BK = 32: 4 chunks of 16 bytes) to distinct chunks of that row,
    and leave every fragment load at the least, 4 wavefronts (`swizzled_ldsm_wavefronts`).
    A failing answer gets what is wrong and a question."""
    chunks = 2 * row_halves // 16
    if swizzle is None:
        return Text("write your swizzle(r, c) above and run this cell.")
    for r in range(rows):
        got = [swizzle(r, c) for c in range(chunks)]
        if sorted(got) != list(range(chunks)):
            return Text(f"row {r}: chunks 0-{chunks - 1} go to {got}. Each chunk needs a place "
                        f"of its own in the row: is your map one-to-one onto 0-{chunks - 1}?")
    waves = swizzled_ldsm_wavefronts(swizzle, row_halves, rows)
    if max(waves) > 4:
        return Text(f"each row keeps its chunks, but one LDSM of A costs "
                    f"{' and '.join(map(str, waves))} wavefronts at the tile's {len(waves)} "
                    f"steps (4 is the least). Rows 64 bytes apart: which rows of a phase of 8 "
                    f"still start on the same four banks, and how could the chunk depend on r?")
    return Text(f"right: every chunk has its place, and one LDSM of A costs {waves[0]} "
                f"wavefronts at each step, as with PAD = 8, without the extra bytes.")


def ldmatrix_table(params: dict | None = None, rec=None) -> Table:
    """Predicted wavefronts per fragment load (ldmatrix of four 8 x 8 matrices) for the
    A and B tiles at PAD 0 and 8, and what Nsight Compute measured: shared-load
    wavefronts per LDSM instruction (which also counts the epilogue's few loads)."""
    p = get(TILED).resolve(params)
    measured = {}
    for label, m in profile_rows(rec):
        if m and m.get("smsp__inst_executed_op_ldsm.sum"):
            pad = 0 if "not padded" in label else 8
            measured[pad] = (m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
                             / m["smsp__inst_executed_op_ldsm.sum"])
    FM = p["BM"] // p["WARPS_M"] // 16
    FN = p["BN"] // (8 // p["WARPS_M"]) // 16
    rows = []
    for pad in (0, 8):
        a = ldmatrix_analysis(p["BK"] + pad).wavefronts
        b = ldmatrix_analysis(p["BN"] + pad).wavefronts
        rows.append({"PAD": pad, "A row (bytes)": 2 * (p["BK"] + pad),
                     "B row (bytes)": 2 * (p["BN"] + pad),
                     "wavefronts per A load": a, "per B load": b,
                     "predicted per LDSM": (FM * a + FN * b) / (FM + FN),
                     "measured per LDSM": measured.get(pad)})
    return Table(rows, ["PAD", "A row (bytes)", "B row (bytes)", "wavefronts per A load",
                        "per B load", "predicted per LDSM", "measured per LDSM"],
                 title=f"{p['BM']}x{p['BN']} tile, BK={p['BK']}: a warp loads {FM} A and "
                       f"{FN} B fragments per 16-wide step along K, so predicted per LDSM = "
                       f"({FM} x per A load + {FN} x per B load) / {FM + FN} (4 wavefronts per "
                       f"load is the minimum: 512 bytes)")


LDSM_GUESSES = ("A, PAD 0", "B, PAD 0", "A, PAD 8", "B, PAD 8")


def check_ldsm_prediction(mine: dict | None, params: dict | None = None) -> Text:
    """Section 7's 'Predict, then check': the student's wavefronts for one fragment load
    (LDSM) of A and of B, rows not padded and padded by 8 halves, at the tiled kernel's
    default tile, against the bank model (`ldmatrix_analysis`). A wrong number is
    answered with a question that points at the slip, never with the number, so that
    the student works it out; the model's numbers are printed once all four are right.
    With a prediction missing it only says what to do."""
    if not mine or any(mine.get(k) is None for k in LDSM_GUESSES):
        return Text("write your four predictions in `mine` (wavefronts of one LDSM; 4 is "
                    "the least) and run this cell.")
    p = get(TILED).resolve(params)
    lines, wrong = [], []
    for key in LDSM_GUESSES:
        tile, pad = key.split(", PAD ")
        halves = (p["BK"] if tile == "A" else p["BN"]) + int(pad)
        want = ldmatrix_analysis(halves).wavefronts
        lines.append(f"{key}: rows of {2 * halves} bytes, {want} wavefronts by the bank "
                     "model, as you said.")
        if mine[key] != want:
            wrong.append(f"{key}: not yet. A row is {2 * halves} bytes: on which bank "
                         "does each of the 8 rows of one phase start (row r at "
                         f"r x {2 * halves} bytes, modulo 128), and how many 16-byte rows "
                         "share the same four banks? Each phase costs that many "
                         "wavefronts, and there are four phases.")
    if wrong:
        return Text("\n".join(wrong) + f"\n{4 - len(wrong)} of 4 right: correct your "
                    "numbers and run the cell again.")
    return Text("\n".join(lines) + "\n4 of 4 right.")


def plot_ldmatrix_banks(tiles=(("A", 32), ("A", 40), ("B", 128), ("B", 136)), ax=None):
    """The model's picture of one fragment load (one LDSM, its four phases) for each
    (tile, row length in halves), two panels a row: the default tile's A and B rows,
    without and with padding."""
    import matplotlib.pyplot as plt
    from gemm_kernels.memory import banks
    if ax is None:
        rows = (len(tiles) + 1) // 2
        _, ax = plt.subplots(rows, 2, figsize=(12, 4.2 * rows), squeeze=False)
        ax = ax.ravel()
    for a, (name, h) in zip(ax, tiles):
        an = ldmatrix_analysis(h)
        banks.plot_banks(an, ax=a, title=f"{name}: rows of {h} halves ({2 * h} bytes): "
                                         f"{an.wavefronts} wavefronts")
    plt.tight_layout()
    return ax


# ------------------------------------------------------------------ 8. numerics

def numerics(n: int = 256, seed: int = 0) -> Table:
    """Where the error of an FP16 GEMM comes from, on the CPU at n³: rounding the FP32
    inputs to FP16 (compared with the product of the FP32 inputs), against the
    accumulation's own error (an FP32 sum of the FP16 inputs' exact products, compared
    with the float64 product of the same FP16 inputs), each as the largest |error| over
    the element's scale |A| @ |B|; and the bound the checker allows the kernels."""
    import numpy as np
    from gemm_kernels.measure.check import random_normal, tensor_core_bound
    rng = np.random.default_rng(seed)
    A, B = random_normal((n, n), "float32", rng), random_normal((n, n), "float32", rng)
    A16, B16 = A.astype(np.float16), B.astype(np.float16)
    exact32 = A.astype(np.float64) @ B.astype(np.float64)
    exact16 = A16.astype(np.float64) @ B16.astype(np.float64)
    scale = np.abs(A16.astype(np.float64)) @ np.abs(B16.astype(np.float64))
    summed = (A16.astype(np.float32) @ B16.astype(np.float32)).astype(np.float64)
    rows = [{"error": "FP16 inputs against FP32 inputs (rounding the data)",
             "value": float(np.max(np.abs(exact16 - exact32) / scale))},
            {"error": "FP32 accumulation of the FP16 inputs (round-to-nearest, on the CPU)",
             "value": float(np.max(np.abs(summed - exact16) / scale))},
            # gamma_(K+2)(2^-23) of `tensor_core_bound`, to first order
            {"error": f"the checker's bound for a tensor-core kernel, about (K + 2) x "
                      f"2⁻²³ with K = {n}",
             "value": tensor_core_bound(n)}]
    # powers of ten: values four orders of magnitude apart read at a glance
    for r in rows:
        r["largest |error| / scale"] = _scientific(r["value"])
    return Table(rows, ["error", "largest |error| / scale"],
                 title=f"{n}x{n}x{n}, standard normal inputs, on the CPU")


def _scientific(x: float) -> str:
    """1.2 x 10⁻⁴: a small number as people write it."""
    import math
    e = math.floor(math.log10(abs(x)))
    sup = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
    return f"{x / 10 ** e:.1f} x 10{str(e).translate(sup)}"


def timed_errors(rec=None) -> Table:
    """What the timed runs computed, judged by the checker: each row's largest error
    over its bound (below 1 is right)."""
    rec = rec or recording()
    rows = []
    for k in (NAIVE, TILED, "cublas_hgemm"):
        row = {"kernel": k}
        for n in SIZES:
            r = _row(k, n, rec=rec)
            if r and "error_over_bound" in r:
                # one format for the whole table (0.0030, not 0.003 beside 0.0044)
                row[f"{n}³"] = f"{r['error_over_bound']:.4f}"
        if len(row) > 1:
            rows.append(row)
    return Table(rows, ["kernel", *(f"{n}³" for n in SIZES)],
                 title=f"Largest |error| / bound in the outputs of the timed runs "
                       f"({_gpu(rec)})")


# ------------------------------------------------------------------ 9. explore

def explorer():
    """The tiled kernel's tunables -> its rate beside cuBLAS FP16 (live: compiled,
    checked and timed; recorded: the sweep at 2048³)."""
    from gemm_kernels.notebook.widgets import Explorer
    return Explorer(TILED, rec=recording()).widget()


def sweep_table(rec=None, top: int = 8, kernel: str = TILED) -> Table:
    """The recorded sweep of the tiled kernel (or `kernel`) at 2048³, fastest first."""
    rec = rec or recording()
    k = get(kernel)
    rows = []
    for c in k.valid_configurations():
        rs = [r for r in (rec.find(kernel, (2048,) * 3, c) if rec else []) if "gflops" in r]
        if rs:
            # whole percents: the column reads alike ("27%" beside "26.8%" would not)
            share = timing.share(rs[0])
            rows.append({**c, "TFLOP/s": _tflops(rs[0]),
                         "% of cuBLAS FP16": None if share is None else round(share)})
    rows.sort(key=lambda r: -r["TFLOP/s"])
    return Table(rows[:top] + ([] if len(rows) <= top else rows[-2:]),
                 [p.name for p in k.params] + ["TFLOP/s", "% of cuBLAS FP16"],
                 title=(f"{kernel} at 2048³: the {top} fastest and the 2 slowest of "
                        f"{len(rows)}" if len(rows) > top else
                        f"{kernel} at 2048³: all {len(rows)} configurations, fastest first")
                       + f" ({_label(rec)}); each row's % is against cuBLAS FP16 timed "
                         f"beside that row")


# ------------------------------------------------------------------ sentences

def _pct(x: float) -> str:
    return f"{x:.0f}%"


_BUSY = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
_LONG = "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
_SHORT = "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio"


def _profiled_steps(rec=None):
    """The study's three rows (naive, tiled unpadded, tiled padded), or None if one is
    missing."""
    rows = dict(profile_rows(rec))
    steps = tuple(rows.get(s.label) for s in studies.get(STUDY).steps)
    return steps if all(steps) else None


_NO_PROFILE = "The profile of this chapter's kernels is not in the recording."


def naive_to_tiled_evidence(rec=None) -> Text:
    """What the profile says about the naive -> tiled step (section 6's factor): the
    DRAM bytes read and the wait for global loads of the naive kernel and of the padded
    tiled kernel, and their profiled times."""
    steps = _profiled_steps(rec)
    if not steps:
        return Text(_NO_PROFILE)
    naive, _, padded = steps
    t = [m["gpu__time_duration.sum"] / 1e6 for m in (naive, padded)]
    loads = "smsp__inst_executed_op_global_ld.sum"
    hmma = "sm__inst_executed_pipe_tensor_op_hmma.sum"
    per = [m[loads] / m[hmma] for m in (naive, padded)]
    return Text(f"Nsight Compute at 4096³ ({_gpu(rec or study_recording())}), naive -> "
                f"tiled (rows padded): global load instructions per HMMA {per[0]:g} -> "
                f"{per[1]:g}; DRAM read {naive['dram__bytes_read.sum'] / 1e6:,.0f} -> "
                f"{padded['dram__bytes_read.sum'] / 1e6:,.0f} MB; wait for global loads "
                f"('long scoreboard') {naive[_LONG]:.0f} -> {padded[_LONG]:.1f} cycles per "
                f"issued instruction; time {t[0]:.1f} -> {t[1]:.2f} ms (x{t[0] / t[1]:.1f}).")


def padding_store_cost(rec=None) -> Text:
    """What padding costs on the stores into the shared tiles: bank conflicts of the
    shared-store wavefronts, unpadded and padded, from the profile, and how much the
    store wavefronts grow (they pass the same data stage as the fragment loads, the
    stage `shared_stage_ceiling` finds nearest to full)."""
    steps = _profiled_steps(rec)
    if not steps:
        return Text(_NO_PROFILE)
    _, plain, padded = steps
    wave = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"
    conf = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
    # the growth from the values as printed, so that a reader redoing it agrees
    before, after = round(plain[wave] / 1e6, 1), round(padded[wave] / 1e6, 1)
    return Text(f"Shared-memory stores at 4096³, Nsight Compute "
                f"({_gpu(rec or study_recording())}): {plain.get(conf, 0) / 1e6:.1f} M of "
                f"{before:.1f} M store wavefronts are conflicts without padding, "
                f"{padded.get(conf, 0) / 1e6:.1f} M of {after:.1f} M with it: padding adds "
                f"{after - before:.1f} M store wavefronts, "
                f"{_pct(100 * (after - before) / before)} more.")


# One shared-memory wavefront per cycle per SM: the L1's data stage reads each of the 32
# banks once per cycle (section 8's fold measures the naive kernel's stage full at
# 0.97 wavefronts per cycle by this count).
SHARED_WAVEFRONTS_PER_CYCLE = 1


def ldsm_wavefronts_per_hmma(FM: int, FN: int, per_ldsm: int = 4) -> float:
    """The model's shared-memory load wavefronts per HMMA for a warp tile of FM x FN
    16 x 16 fragments, conflict-free: per 16-wide step the warp loads FM + FN fragments
    (one LDSM each, `per_ldsm` wavefronts) for FM x FN mma_sync, two HMMA each. Bigger
    warp tiles load fewer fragments per HMMA."""
    return (FM + FN) * per_ldsm / (2 * FM * FN)


def shared_stage_ceiling(rec=None) -> Markdown:
    """The ceiling that shared memory sets on the padded kernel's tensor pipe, from its
    profile: the shared-memory wavefronts (loads, stores, other) per HMMA; the HMMA a
    full pipe would finish per cycle per SM (one per `tensor pipe cycles per HMMA` on
    each of the SM's schedulers); the wavefronts per cycle that rate would ask of a stage
    that passes one; the pipe's busy share at which the stage is full; how busy the
    stage already is. Then the model's LDSM wavefronts per HMMA for the kernel's warp
    tile and a bigger one (`ldsm_wavefronts_per_hmma`). Each step is rounded as printed."""
    steps = _profiled_steps(rec)
    if not steps:
        return Markdown(_NO_PROFILE)
    from gemm_kernels.notebook.ch07_ablation import SCHEDULERS_PER_SM
    m = steps[2]
    sms = (rec or study_recording()).device.get("sm_count")
    hmma = m["sm__inst_executed_pipe_tensor_op_hmma.sum"]
    ld = m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
    st = m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"]
    total = m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]
    other = total - ld - st
    _, per_hmma = hmma_pace(m)
    per_hmma = round(per_hmma, 1)
    waves = round(total / hmma, 2)
    full = round(SCHEDULERS_PER_SM / per_hmma, 2)
    asked = round(full * waves, 2)
    cap = SHARED_WAVEFRONTS_PER_CYCLE / asked
    busy = total / sms / m["sm__cycles_elapsed.avg"]
    step = studies.get(STUDY).steps[2]
    k = get(step.kernel)
    p = k.resolve(step.params)
    warps_n = k.threads(p)[0] // 32 // p["WARPS_M"]
    FM, FN = p["BM"] // p["WARPS_M"] // 16, p["BN"] // warps_n // 16
    ours, square = ldsm_wavefronts_per_hmma(FM, FN), ldsm_wavefronts_per_hmma(4, 4)
    return Markdown(
        f"**Shared memory sets a lower ceiling.** Fragment loads and tile stores pass the "
        f"same data stage, which passes {SHARED_WAVEFRONTS_PER_CYCLE} wavefront per cycle "
        f"per SM (the naive kernel's fold above measures that stage full at this rate). From the padded kernel's profile at 4096³ "
        f"({_gpu(rec or study_recording())}):\n\n"
        f"1. Shared-memory wavefronts: {ld / 1e6:.1f} M loads + {st / 1e6:.1f} M stores + "
        f"{other / 1e6:.1f} M other = {total / 1e6:.1f} M, for {hmma / 1e6:.1f} M HMMA: "
        f"{waves:.2f} per HMMA.\n"
        f"2. A full tensor pipe finishes one HMMA every {per_hmma:.1f} cycles on each of "
        f"the SM's {SCHEDULERS_PER_SM} schedulers: {SCHEDULERS_PER_SM} / {per_hmma:.1f} = "
        f"{full:.2f} HMMA per cycle per SM.\n"
        f"3. At that rate the stage would have to pass {full:.2f} x {waves:.2f} = "
        f"{asked:.2f} wavefronts per cycle. It passes {SHARED_WAVEFRONTS_PER_CYCLE}.\n"
        f"4. So shared memory alone caps the pipe at {SHARED_WAVEFRONTS_PER_CYCLE} / "
        f"{asked:.2f} = {_pct(100 * cap)} busy, far below the ceiling the instructions "
        f"set (the fold below).\n"
        f"5. The stage is already {_pct(100 * busy)} busy ({total / 1e6:.1f} M wavefronts "
        f"/ {sms} SMs / {m['sm__cycles_elapsed.avg'] / 1e6:.2f} M cycles), while the pipe "
        f"is {_pct(m[_BUSY])} busy. The two agree: a pipe {_pct(m[_BUSY])} busy asks "
        f"{m[_BUSY] / 100:.2f} x {asked:.2f} = {m[_BUSY] / 100 * asked:.2f} of the "
        f"stage's cycles.\n\n"
        f"The tiles' global loads also return their data through the L1; whether they take "
        f"cycles of this stage was not counted here, so the true ceiling can only be "
        f"lower, not higher. More warps would run into "
        f"this wall. What lowers it is fewer wavefronts per HMMA: the model gives "
        f"{ours:.2f} load wavefronts per HMMA for this kernel's warp tile of {FM} x {FN} "
        f"fragments, and {square:.2f} for a 4 x 4 warp tile: bigger warp tiles, more "
        f"HMMA per loaded fragment.")


def naive_sectors_per_load(naive: dict):
    """Sectors of 32 bytes the L1 counts per global load instruction of the naive
    kernel (8 for its pairs of halves scattered over 8 rows), or None."""
    sectors = naive.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
    requests = naive.get("smsp__inst_executed_op_global_ld.sum")
    return sectors / requests if sectors and requests else None


L1_STUDY = "ch13_naive_l1"   # the naive kernel's L1 stages, profiled in a run of its own
_L1_PCT = ".avg.pct_of_peak_sustained_active"


def naive_l1_stages():
    """The naive kernel's L1 stages, from `L1_STUDY`: a dict of the data stage's busy
    share ("data"), the MOVM's part of it ("movm": the shared pipe's wavefronts that are
    not loads), the tag stage's (set look-ups, "tag") and the write-back's to registers
    ("back"), and the bank conflicts of the global loads in the data stage
    ("conflicts"), each in % of its peak; data-stage wavefronts per load instruction
    ("waves"); the bytes between the rows of A (and of B) at the study's shape
    ("row_bytes"); the recording's label ("label") and its GPU ("gpu"). None where the
    study is not recorded."""
    rec = studies.recording_of(L1_STUDY)
    row = None if rec is None else studies.results(L1_STUDY, rec=rec)[0][1]
    if row is None:
        return None
    m = row["metrics"]
    names = {"data": "data_pipe_lsu_wavefronts",
             "movm": "data_pipe_lsu_wavefronts_mem_shared_op_misc",
             "tag": "t_set_accesses", "back": "lsu_writeback_active",
             "conflicts": "data_bank_conflicts_pipe_lsu_mem_gds_op_ld"}
    stages = {k: m.get(f"l1tex__{v}{_L1_PCT}") for k, v in names.items()}
    waves = m.get("l1tex__data_pipe_lsu_wavefronts_mem_lgds_cmd_read.sum")
    loads = m.get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
    if None in stages.values() or not (waves and loads):
        return None
    k = studies.get(L1_STUDY).shapes[0][2]   # a cube: rows of A and of B equally long
    return {**stages, "waves": waves / loads, "row_bytes": 2 * k,
            "label": records.rows_label([row], rec), "gpu": _gpu(rec)}


STRIDE_STUDY = "ch13_naive_stride"   # the naive kernel on and off 128-byte row strides


def bank_model_words(row_stride: int, rows: int = 8, row_bytes: int = 16) -> int:
    """Chapter 04's shared-memory bank model applied to one naive-kernel load: 32 lanes
    of 4 bytes, `rows` rows of `row_bytes` each, `row_stride` bytes apart; the wavefronts
    the model gives (the words on the busiest bank)."""
    per_row = row_bytes // 4
    return banks.wavefronts([(lane // per_row) * row_stride + 4 * (lane % per_row)
                             for lane in range(rows * per_row)])


def stride_sizes():
    """The stride study's two sizes (rows a multiple of 128 bytes apart, then 32 bytes
    past one), each a dict of its shape, the data stage's wavefronts per load ("waves"),
    its busy share ("busy") and the share of it taken by the loads' bank conflicts
    ("conflicts"), in %, and the rate under the profiler in TFLOP/s ("rate"); with the
    recording's label. (None, None) where the study is not recorded."""
    rec = studies.recording_of(STRIDE_STUDY)
    study = studies.get(STRIDE_STUDY)
    rows = [(shape, row) for shape in study.shapes
            for _, row in studies.results(STRIDE_STUDY, shape, rec)] if rec else []
    if not rows or any(r is None for _, r in rows):
        return None, None
    sizes = []
    for shape, row in rows:
        m = row["metrics"]
        sizes.append({
            "shape": shape,
            "waves": (m["l1tex__data_pipe_lsu_wavefronts_mem_lgds_cmd_read.sum"]
                      / m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]),
            "busy": m["l1tex__data_pipe_lsu_wavefronts" + _L1_PCT],
            "conflicts": m["l1tex__data_bank_conflicts_pipe_lsu_mem_gds_op_ld" + _L1_PCT],
            "rate": 2 * shape[0] * shape[1] * shape[2] / m["gpu__time_duration.sum"] / 1e3})
    return sizes, records.rows_label([r for _, r in rows], rec)


def stride_control() -> Text:
    """The control of the bank reading: the naive kernel profiled at two sizes in one run
    (`stride_sizes`): per size, the bytes between rows, the data stage's wavefronts per
    load beside chapter 04's bank model, its busy share and the share of it taken by the
    loads' bank conflicts, and the rate under the profiler."""
    sizes, label = stride_sizes()
    if sizes is None:
        return Text("The naive kernel off a 128-byte row stride: not recorded yet.")
    lines = [f"the naive kernel under Nsight Compute, {label}:"]
    for s in sizes:
        shape = s["shape"]
        lines.append(
            f"  {shape[0]}³, rows {2 * shape[2]:,} bytes apart ({2 * shape[2] % 128} past a "
            f"multiple of 128): {s['waves']:.1f} data-stage wavefronts per load (chapter 04's "
            f"bank model: {bank_model_words(2 * shape[2])}), data stage busy "
            f"{s['busy']:.1f}% of its peak, bank conflicts {s['conflicts']:.1f}% of that "
            f"peak; "
            f"{s['rate']:.1f} TFLOP/s under the profiler")
    return Text("\n".join(lines))


STRIDE_OFFSETS = (0, 16, 32, 48, 64)   # bytes past a multiple of 128: the bank table's rows


def stride_bank_table(n: int = 4096, offsets=STRIDE_OFFSETS) -> Table:
    """Chapter 04's bank model (`bank_model_words`) for one naive-kernel load at sizes
    just past n³, whose FP16 rows lie `offsets` bytes past a multiple of 128 apart (n a
    multiple of 64): where each row starts in the banks, the model's wavefronts per
    load, and the wavefronts Nsight Compute measured where the stride study profiled
    that size (`stride_sizes`), "-" elsewhere. The cost does not fall in a straight
    line with the offset: 16 and 48 bytes spread the 8 rows over all 32 banks."""
    sizes, label = stride_sizes()
    measured = {2 * s["shape"][2]: s["waves"] for s in sizes or []}
    rows = []
    for off in offsets:
        stride = 2 * n + off
        shift = off // 4
        rows.append({"size": f"{stride // 2}³", "rows apart (bytes)": f"{stride:,}",
                     "past a multiple of 128": off,
                     "where each row starts": ("on the same 4 banks as the one before"
                                               if shift == 0 else
                                               f"{shift} banks after the one before"),
                     "wavefronts per load, the model": bank_model_words(stride),
                     "measured": (f"{measured[stride]:.1f}" if stride in measured else "-")})
    return Table(rows, list(rows[0]),
                 title="One load of the naive kernel (16 bytes from each of 8 rows of A or "
                       "B): chapter 04's bank model, and Nsight Compute's count "
                       + (f"({label})" if label else "(not recorded yet)"))


def stride_ratio() -> str:
    """The stride study read as one test, in two sentences (in section 8's fold): the
    data stage is full at both sizes, so the loads it passes per cycle go as
    1 / wavefronts per load; the ratio of the wavefronts (off the 128-byte stride over on it, inverted) beside the ratio of
    the rates under the profiler, each from the values as printed. Empty where the study
    is not recorded."""
    sizes, _ = stride_sizes()
    if sizes is None:
        return ""
    on, off = sizes
    waves = [round(s["waves"], 1) for s in sizes]
    rates = [round(s["rate"], 1) for s in sizes]
    return (f"The stage is full at both sizes ({on['busy']:.1f}% and {off['busy']:.1f}%), "
            f"so the loads it passes per cycle go as 1 / wavefronts: {waves[0]:.1f} / "
            f"{waves[1]:.1f} = {waves[0] / waves[1]:.1f} times as many off the stride. The "
            f"rate under the profiler rose {rates[1]:.1f} / {rates[0]:.1f} = "
            f"{rates[1] / rates[0]:.1f} times.")


def naive_data_stage(naive: dict, l1: dict | None, sms):
    """What the naive kernel asks of the L1's data stage, which passes one wavefront per
    cycle, each piece rounded as printed: (loads per cycle per SM, wavefronts per load,
    wavefronts per cycle for the loads, for the MOVM, both together). None where a
    counter is missing."""
    loads = naive.get("smsp__inst_executed_op_global_ld.sum")
    cycles = naive.get("sm__cycles_elapsed.avg")
    if not (l1 and loads and cycles and sms):
        return None
    rate, waves = round(loads / sms / cycles, 3), round(l1["waves"], 1)
    asked, movm = round(rate * waves, 2), round(l1["movm"] / 100, 2)
    return rate, waves, asked, movm, round(asked + movm, 2)


def data_stage_queue(rec=None) -> Text:
    """Section 8's sentences on how full the L1's data stage is (where `naive_l1_stages`
    is recorded): the naive kernel's wavefronts per load at 4096³ and the stage's busy
    share, then the off-stride size's wavefronts and the rate under the profiler
    (`stride_sizes`). They follow the definition of the data stage, after the bank
    model's table. Empty where the stages are not recorded."""
    steps = _profiled_steps(rec)
    if not steps:
        return Text(_NO_PROFILE)
    sms = (rec or study_recording()).device.get("sm_count")
    l1 = naive_l1_stages()
    stage = naive_data_stage(steps[0], l1, sms)
    if not stage:
        return Text("")
    sizes, _ = stride_sizes()
    control = "" if sizes is None else (
        f" At {sizes[1]['shape'][0]}³ a load takes {sizes[1]['waves']:.1f} wavefronts, and "
        f"the kernel ran {round(sizes[1]['rate'], 1) / round(sizes[0]['rate'], 1):.1f} "
        f"times as fast under the profiler.")
    return Text(f"At 4096³ Nsight Compute measured the data stage busy {l1['data']:.1f}% of "
                f"its peak, with {stage[1]:.1f} wavefronts per load: the loads wait their "
                f"turn there." + control)


def profile_waits(rec=None) -> Text:
    """Where each profiled kernel waits, one or two sentences each: the naive kernel on
    its global loads (DRAM far from busy), the unpadded tiled kernel on shared memory,
    the padded one on no single reason. Why the naive kernel's loads wait (the L1's
    data stage) is `data_stage_queue`; its counters in detail `naive_at_powers_of_two`."""
    steps = _profiled_steps(rec)
    if not steps:
        return Text(_NO_PROFILE)
    naive, plain, padded = steps
    dram_busy = naive.get("dram__throughput.avg.pct_of_peak_sustained_elapsed")
    dram = ("" if not dram_busy else
            f" DRAM is busy {dram_busy:.0f}% of its peak, so DRAM bandwidth does not hold "
            f"it back.")
    barrier = plain.get("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio")
    rest = sorted(((v, k) for k, v in evidence.stall_reasons({"metrics": padded}).items()
                   if "selected" not in k), reverse=True)[:2]
    _, cycles, _ = warp_pace(padded)
    return Markdown(
        f"* **The naive kernel waits for its global loads**: a warp spends "
        f"{naive[_LONG]:.0f} cycles per issued instruction stalled on 'long scoreboard', "
        f"the wait for a global load. Its tensor pipe is busy {_pct(naive[_BUSY])} of the "
        f"time.{dram} Its second stall, 'mio throttle' (a wait for room in the queue to the "
        f"shared-memory pipe), is most likely its MOVM (the "
        f"fold below).\n" +
        f"* **The tiled kernel with unpadded rows waits for shared memory** ('short "
        f"scoreboard', {plain[_SHORT]:.1f} cycles per instruction): its fragment loads "
        f"meet bank conflicts (section 7). Tensor pipe busy: {_pct(plain[_BUSY])}."
        + ("" if barrier is None else
           f" Its 'barrier' stall ({barrier:.1f}) is warps waiting at __syncthreads() for "
           f"the slower warps of their block.") + "\n"
        f"* **With padded rows no single stall dominates.** The tensor pipe is busy "
        f"{_pct(padded[_BUSY])} of the time. The largest stalls are "
        + " and ".join(f"'{k}' {v:.1f}" for v, k in rest)
        + " cycles per instruction ('wait': a fixed-latency dependency, chapter 07). With "
        f"all the small ones, a warp takes {cycles:.1f} cycles from one instruction to its "
        f"next.")


def naive_deeper_look(rec=None) -> Markdown:
    """The naive kernel's counters in detail (shown folded), one paragraph per question:
    where its re-reads are served, what each load asks of the L1, and what its 'mio
    throttle' stall is; the L1's stages follow in `naive_l1_table`."""
    steps = _profiled_steps(rec)
    if not steps:
        return Markdown(_NO_PROFILE)
    naive = steps[0]
    paragraphs = []
    l2_read = naive.get("lts__t_sectors_srcunit_tex_op_read.sum", 0) * 32 / 1e9
    l2_hits = naive.get("lts__t_sector_hit_rate.pct")
    ms = naive["gpu__time_duration.sum"] / 1e6
    if l2_hits:
        paragraphs.append(
            f"**Who serves the re-reads?** Each tile of A is fetched again by every warp of "
            f"its row of C. Most of those re-reads are L2 hits: the L2 serves "
            f"{l2_read:.1f} GB of reads in {ms:.1f} ms, and {l2_hits:.0f}% of its sectors "
            f"were hits. DRAM delivers {naive['dram__bytes_read.sum'] / 1e9:.2f} GB.")
    sectors = naive.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
    requests = naive["smsp__inst_executed_op_global_ld.sum"]
    l2_sectors = naive.get("lts__t_sectors_srcunit_tex_op_read.sum")
    if sectors and l2_sectors:
        per = naive_sectors_per_load(naive)
        paragraphs.append(
            f"**How much does one load touch?** {per:.1f} sectors ({per * 32:.0f} bytes) per "
            f"instruction for the 128 bytes a warp asks for: the L1 counts "
            f"{sectors / 1e6:,.0f} M sectors of 32 bytes for {requests / 1e6:,.0f} M load "
            f"instructions. The pairs of halves lie in 8 rows, so each load uses half of "
            f"each sector it touches (chapter 02's model).")
        paragraphs.append(
            f"**Is the other half wasted?** No. The L1 is asked for {sectors / 1e6:,.0f} M "
            f"sectors and passes only {l2_sectors / 1e6:,.0f} M on to the L2, so it serves "
            f"{_pct(100 * (1 - l2_sectors / sectors))} of them itself. The warp's next load "
            f"(at +16 bytes in the machine code) reads the other half of each sector.")
    # the naive kernel's MOVM go through the shared-memory pipe (no shared loads)
    movm = naive.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_misc.sum")
    mio = naive.get("smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio")
    if movm and mio:
        sass = compiler.sass(get(NAIVE), {})
        per_hmma = (len(re.findall(r"\bMOVM\.", sass))
                    // max(len(re.findall(r"\bHMMA\.", sass)), 1))
        paragraphs.append(
            f"**What is the 'mio throttle' stall ({mio:.1f})?** Most likely the MOVM. The "
            f"kernel reads no shared memory, but the MOVM run on the shared-memory pipe, "
            f"which counts {movm / 1e6:.1f} M wavefronts that are not loads, one per MOVM "
            f"({per_hmma} per HMMA in the machine code, "
            f"{per_hmma * naive['sm__inst_executed_pipe_tensor_op_hmma.sum'] / 1e6:.1f} M).")
    if naive_l1_stages():
        paragraphs.append("**Is the data stage the only busy part of the L1?** Yes. Each "
                          "stage's busy share, from the run of its own:")
    return Markdown("\n\n".join(paragraphs))


def naive_l1_table() -> Table | None:
    """The naive kernel's L1 stages (`naive_l1_stages`) as a table, in % of each stage's
    peak: only the data stage is near it. None where the study is not recorded."""
    l1 = naive_l1_stages()
    if l1 is None:
        return None
    rows = [("data stage (reads the 32 banks)", l1["data"]),
            ("of it: bank conflicts of the global loads", l1["conflicts"]),
            ("of it: the MOVM", l1["movm"]),
            ("tag stage (the set look-ups)", l1["tag"]),
            ("write-back to registers", l1["back"])]
    return Table([{"L1 stage": k, "busy, % of peak": round(v, 1)} for k, v in rows],
                 ["L1 stage", "busy, % of peak"],
                 title=f"The naive kernel's L1 at 4096³ (Nsight Compute, {l1['gpu']})")


def stride_excess() -> str:
    """The stride study's off-stride size against chapter 04's bank model (in section 8's
    fold): the share of the data stage's busy cycles that are the loads' bank conflicts,
    read as wavefronts per load, beside the model's conflicts; the excess over the model
    is what is left, and is not conflicts. Empty where the study is not recorded."""
    sizes, _ = stride_sizes()
    if sizes is None:
        return ""
    off = sizes[-1]
    share = off["conflicts"] / off["busy"]
    model = bank_model_words(2 * off["shape"][2])
    return (f"Off the 128-byte stride each load costs fewer wavefronts, and fewer of them "
            f"are bank conflicts. At {off['shape'][0]}³ the conflicts take "
            f"{off['conflicts']:.1f}% of the stage's peak, against {off['busy']:.1f}% busy: "
            f"{share:.0%} of its busy cycles, about {share * off['waves']:.1f} of a load's "
            f"{off['waves']:.1f} wavefronts. Chapter 04's bank model gives {model} "
            f"wavefronts, {model - 1} more than a load without conflicts needs. So the "
            f"excess over the model is not bank conflicts. What it is was not measured here.")


def naive_at_powers_of_two(rec=None):
    """Section 8's fold on the naive kernel: the data stage's cycles counted from the
    profile (`naive_data_stage`), the control at a row stride off 128 bytes
    (`stride_control`), and its counters in detail (`naive_deeper_look`)."""
    from gemm_kernels.notebook.capstone_pictures import Reveal
    steps = _profiled_steps(rec)
    sms = (rec or study_recording()).device.get("sm_count")
    l1 = naive_l1_stages()
    stage = steps and naive_data_stage(steps[0], l1, sms)
    counted = [] if not stage else [
        f"**The queue, counted.** The {sms} SMs issued "
        f"{steps[0]['smsp__inst_executed_op_global_ld.sum'] / 1e6:,.0f} M loads in "
        f"{steps[0]['sm__cycles_elapsed.avg'] / 1e6:.2f} M cycles: {stage[0]:.3f} loads per "
        f"cycle per SM. The stage passes one wavefront per cycle. So the loads ask for "
        f"{stage[0]:.3f} x {stage[1]:.1f} = {stage[2]:.2f} of its cycles, and the MOVM "
        f"(section 4), which pass through the same stage, for {stage[3]:.2f} more: "
        f"{stage[4]:.2f} in all."]
    on, off = studies.get(STRIDE_STUDY).shapes
    return Reveal(
        "Why the naive kernel is so slow at power-of-two sizes", *counted,
        f"**The control.** The kernel was timed above at {off[0]}³, where the rows lie "
        f"{2 * off[2]:,} bytes apart. The profiler ran it there too, in the same run as "
        f"{on[0]}³:",
        f"```\n{stride_control()}\n```",
        *filter(None, [stride_ratio()]),
        *filter(None, [stride_excess()]),
        f"The data stage is still nearly full at {off[0]}³, so the loads still set the "
        "pace: fewer of them per `HMMA` is section 6's job.",
        naive_deeper_look(rec), *filter(None, [naive_l1_table()]))


def pace_analysis(rec=None):
    """Section 8's deeper part, folded under one line: why the padded kernel's tensor pipe
    is idle more than half of the time, from the pace table, its arithmetic and the main
    loop's instructions counted from the machine code."""
    from gemm_kernels.notebook.capstone_pictures import Reveal
    return Reveal(
        "The deeper part: a warp's pace, step by step",
        "First what the registers allow: the registers each thread uses and the blocks per "
        "SM they leave room for (the occupancy model of chapter 03). Then what Nsight "
        "Compute measured: the warps each scheduler holds, the cycles one warp takes from "
        "one instruction to its next (all stall reasons together), the share of cycles in "
        "which the scheduler issued ('issue active'), and, from its counters, the "
        "instructions a warp issues per `HMMA` and the cycles each `HMMA` keeps the tensor "
        "pipe busy:",
        pace_table(rec), pace_summary(rec),
        "What are those instructions? The tiled kernel's main loop, counted from its machine "
        "code:",
        loop_opcodes())


def pace_summary(rec=None) -> Text:
    """The padded kernel's pace, in sentences, from the pace table's columns: warps per
    scheduler over cycles per issue gives the issue share; instructions and pipe cycles
    per HMMA turn it into the tensor pipe's busy share, and bound it at full issue; the
    registers set the warps (the pace table's occupancy)."""
    steps = _profiled_steps(rec)
    if not steps:
        return Text(_NO_PROFILE)
    padded = steps[2]
    from gemm_kernels.notebook.ch07_ablation import SCHEDULERS_PER_SM
    warps, cycles, issue = warp_pace(padded)
    every, per_hmma = hmma_pace(padded)
    # the arithmetic from the values as printed, so that a reader redoing it agrees
    every, per_hmma, rate = round(every or 0, 1), round(per_hmma or 0, 1), round(issue) / 100
    props = (rec or study_recording()).device
    per_sm = FP16_FLOP_PER_CLOCK_SM.get(props.get("compute_capability"))
    at_peak = HMMA_FLOP / (per_sm / SCHEDULERS_PER_SM) if per_sm else None
    ceiling = ("" if not (at_peak and per_hmma) else
               f"\n* **A full pipe is not the peak.** The peak rate ({per_sm:,} FLOP per clock "
               f"per SM, a quarter on each scheduler's tensor core) would finish an "
               f"HMMA.16816's {HMMA_FLOP:,} FLOP in {at_peak:.0f} cycles, not "
               f"{per_hmma:.1f}, so even a pipe never idle gives at most {at_peak:.0f} / "
               f"{per_hmma:.1f} = {_pct(100 * at_peak / per_hmma)} of the peak (appendix B).")
    hmma_side = ("" if not (every and per_hmma) else
                 f"2. One instruction in {every:.1f} is an HMMA.\n"
                 f"3. Each HMMA keeps the tensor pipe busy {per_hmma:.1f} cycles.\n"
                 f"4. So the pipe is busy {rate:.2f} / {every:.1f} x {per_hmma:.1f} = "
                 f"{_pct(100 * rate / every * per_hmma)} of the time: the "
                 f"{_pct(padded[_BUSY])} measured.\n"
                 f"5. At full issue, one instruction every cycle, it would be busy "
                 f"1 / {every:.1f} x {per_hmma:.1f} = {_pct(100 / every * per_hmma)}.\n\n"
                 f"No scheduler sustains issue in every cycle. "
                 + (f"To fill the pipe, it would have to issue in {every:.1f} / "
                    f"{per_hmma:.1f} = {_pct(100 * every / per_hmma)} of cycles, so with "
                    f"this many instructions per HMMA, more warps alone are not a way to "
                    f"fill it. " if every < per_hmma else
                    "So with this many instructions per HMMA, more warps alone cannot fill "
                    "the pipe. ")
                 + "Fewer instructions per HMMA would lower this ceiling, but shared "
                   "memory sets a lower one (the lines above this fold). The main loop's "
                   "instructions are below.\n")
    step = studies.get(STUDY).steps[2]
    occ = _step_occupancy(step)
    asked, allowed, one_more, accumulators = register_budget(step)
    return Markdown(
        f"**Too few warps, and too many instructions per HMMA.** The tensor pipe's busy "
        f"share, step by step from the table's columns:\n\n"
        f"1. A scheduler holds only {warps:.1f} warps to switch between, each issuing once "
        f"every {cycles:.1f} cycles: {warps:.1f} / {cycles:.1f} = {warps / cycles:.2f} "
        f"instructions per cycle, the {_pct(issue)} issue active.\n"
        + hmma_side + ceiling
        + f"\n* **The registers set the number of warps.** The table's "
        f"{occ.registers_per_thread} registers per thread leave room for "
        f"{occ.blocks_per_sm} blocks, {occ.warps_per_sm // SCHEDULERS_PER_SM} warps per "
        f"scheduler. The kernel's `__launch_bounds__` asks for {asked} blocks per SM, which "
        f"lets a thread use up to {allowed} registers. At {asked + 1} blocks a thread would "
        f"get at most {one_more}, and its accumulators alone take {accumulators}. More "
        f"warps would need fewer accumulators and so less reuse: each warp must instead ask "
        f"fewer wavefronts and issue fewer instructions per HMMA.")


def register_budget(step):
    """The tiled kernel's register budget for a study step: the blocks per SM its
    `__launch_bounds__` asks for, the most registers per thread at which that many fit
    and at which one block more would fit (the occupancy model), and the FP32 accumulator
    registers each thread holds (its warp's FM x FN fragments of 16 x 16 over 32 lanes)."""
    from gemm_kernels.core import analysis, device
    k = get(step.kernel)
    p = k.resolve(step.params)
    asked = int(re.search(r"__launch_bounds__\(TILED_THREADS, (\d+)\)",
                          k.source_text()).group(1))
    threads = k.threads(p)[0]
    limits = device.limits()

    def most(blocks):
        return max(r for r in range(1, limits["max_registers_per_thread"] + 1)
                   if analysis.occupancy(threads, r, 0, limits).limits["registers"] >= blocks)
    warps_n = threads // 32 // p["WARPS_M"]
    fragments = (p["BM"] // p["WARPS_M"] // 16) * (p["BN"] // warps_n // 16)
    return asked, most(asked), most(asked + 1), fragments * 16 * 16 // 32


# The dense FP16 (FP32 accumulate) tensor-core rate of one SM per clock, in FLOP, from
# NVIDIA's H100 architecture whitepaper (an H100 SM: 4 tensor cores, 512 FP16 FMA per
# clock each, dense); the peak is that x SMs x clock.
FP16_FLOP_PER_CLOCK_SM = {"9.0": 4096}
HMMA_FLOP = 2 * 16 * 8 * 16           # one HMMA.16816 (mma.m16n8k16)
# The clock at which NVIDIA's datasheets quote that peak (H100 SXM and H200: 1,830 MHz,
# "989 TFLOP/s dense FP16"), lower than the top clock the recording reports.
DATASHEET_CLOCK_MHZ = {"9.0": 1830}


def datasheet_peak(props: dict) -> str:
    """The same peak at the datasheet's clock, as a clause beside the top-clock peak (so
    that a reader checking NVIDIA's figure finds it), or "" for an unknown GPU."""
    cc = props.get("compute_capability")
    per_sm, mhz = FP16_FLOP_PER_CLOCK_SM.get(cc), DATASHEET_CLOCK_MHZ.get(cc)
    if not (per_sm and mhz):
        return ""
    return (f" (NVIDIA's datasheet quotes {per_sm * props['sm_count'] * mhz / 1e6:,.0f} "
            f"TFLOP/s: the same arithmetic at {mhz / 1e3:.2f} GHz)")


def fp16_peak(rec) -> tuple[float, str] | None:
    """The recorded GPU's dense FP16 tensor-core peak in TFLOP/s (the whitepaper's rate
    per SM x the recorded SMs and top clock) and the sentence that works it out; None
    where the rate per SM of its architecture is not known here."""
    props = rec.device if rec is not None else {}
    per_sm = FP16_FLOP_PER_CLOCK_SM.get(props.get("compute_capability"))
    if not per_sm:
        return None
    peak = per_sm * props["sm_count"] * props["sm_clock_mhz"] / 1e6     # TFLOP/s
    return peak, (f"{props['name']}: dense FP16 tensor-core peak {per_sm:,} FLOP per clock "
                  f"per SM x {props['sm_count']} SMs x {props['sm_clock_mhz'] / 1e3:.2f} GHz "
                  f"(its top clock) = {peak:,.0f} TFLOP/s{datasheet_peak(props)}.")


def against_peak(n: int = 4096, rec=None) -> Text:
    """The two kernels and cuBLAS FP16 at n³ against the GPU's dense FP16 tensor-core
    peak (`fp16_peak`, from the recorded SMs and clock)."""
    rec = rec or recording()
    peak = fp16_peak(rec)
    naive, tiled = _row(NAIVE, n, rec=rec), _row(TILED, n, rec=rec)
    if not (peak and naive and tiled and tiled.get("reference")):
        return Text("The FP16 peak of the recorded GPU is not known here.")
    peak, said = peak
    ref = tiled["reference"]["gflops"]["median"] / 1e3
    shares = ", ".join(f"{name} {_tflops(row):,.0f} TFLOP/s ({_pct(100 * _tflops(row) / peak)})"
                       for name, row in (("the tiled kernel", tiled), ("the naive one", naive)))
    return Markdown(f"{said} At {n}³: cuBLAS FP16 timed beside the tiled kernel {ref:,.0f} TFLOP/s "
                f"({_pct(100 * ref / peak)} of it), {shares}.")


def _padding_pair(rec, params: dict | None = None) -> tuple[float, float] | None:
    """The tiled kernel's recorded rate at 2048³ without and with padding (PAD 0 and 8)
    at the tile `params` (the default where not given), or None if either is missing."""
    rates = []
    for pad in (0, 8):
        c = get(TILED).resolve({**(params or {}), "PAD": pad})
        rs = [r for r in (rec.find(TILED, (2048,) * 3, c) if rec else []) if "gflops" in r]
        if not rs:
            return None
        rates.append(_tflops(rs[0]))
    return rates[0], rates[1]


def padding_effect(rec=None) -> Text:
    """The default tile without and with padding, from the recorded sweep at 2048³."""
    rec = rec or recording()
    pair = _padding_pair(rec)
    if pair is None:
        return Text("The sweep with and without padding is not in the recording.")
    return Text(f"At the default tile and 2048³: {pair[0]:,.0f} TFLOP/s without padding, "
                f"{pair[1]:,.0f} with it, x{pair[1] / pair[0]:.1f} ({_gpu(rec)}).")


def padding_by_depth(depths=(16, 32), rec=None) -> Text:
    """What padding gains at each depth BK of the default 128 x 128 tile (WARPS_M = 2),
    from the recorded sweep at 2048³: the answer to section 11's question."""
    rec = rec or recording()
    p = get(TILED).resolve({})
    lines = []
    for bk in depths:
        pair = _padding_pair(rec, {"BK": bk})
        if pair is None:
            return Text(f"The sweep at BK = {bk} is not in the recording.")
        lines.append(f"BK = {bk}: {pair[0]:,.0f} TFLOP/s without padding, {pair[1]:,.0f} "
                     f"with it, x{pair[1] / pair[0]:.1f}")
    return Text(f"{p['BM']} x {p['BN']} tile, WARPS_M = {p['WARPS_M']}, at 2048³ "
                f"({_gpu(rec)}):\n" + "\n".join(lines))


BK16_GUESSES = ("A, PAD 0", "A, PAD 8", "padding gains")


def check_bk16_prediction(mine: dict | None, params: dict | None = None) -> Text:
    """Section 11's question, checked: the wavefronts of one fragment load of A at
    BK = 16 without and with padding (the bank model, `ldmatrix_analysis`), and whether
    padding then gains "more" or "less" than at the default depth. The answer for the
    gain follows from the model: fewer conflicts of A to remove at BK = 16 (B's rows do
    not change with BK). A wrong answer is met with a question, never with the number."""
    if not mine or any(mine.get(k) is None for k in BK16_GUESSES):
        return Text('write your predictions in `mine` (wavefronts of one LDSM of A; '
                    '"more" or "less" for the gain) and run this cell.')
    p = get(TILED).resolve({**(params or {}), "BK": 16})
    deep = get(TILED).resolve(params)
    wrong = []
    for pad in (0, 8):
        halves = p["BK"] + pad
        if mine[f"A, PAD {pad}"] != ldmatrix_analysis(halves).wavefronts:
            wrong.append(f"A, PAD {pad}: not yet. A row is {2 * halves} bytes: on which "
                         f"bank does each of the 8 rows of one phase start (row r at "
                         f"r x {2 * halves} bytes, modulo 128), and how many 16-byte rows "
                         f"share the same four banks? Each phase costs that many "
                         f"wavefronts, and there are four phases.")
    plain_here = ldmatrix_analysis(p["BK"]).wavefronts
    plain_deep = ldmatrix_analysis(deep["BK"]).wavefronts
    want = "less" if plain_here < plain_deep else "more"
    if str(mine["padding gains"]).strip().lower() != want:
        wrong.append(f"padding gains: not yet. Without padding, how many wavefronts does "
                     f"one LDSM of A cost at BK = {deep['BK']} (section 7), and how many at "
                     f"BK = {p['BK']}? Padding brings both to 4. Do B's rows change with BK?")
    if wrong:
        return Text("\n".join(wrong) + f"\n{3 - len(wrong)} of 3 right: correct your "
                    "answers and run the cell again.")
    return Text(f"A at BK = {p['BK']}: {plain_here} wavefronts per LDSM without padding, "
                f"{ldmatrix_analysis(p['BK'] + 8).wavefronts} with it (at BK = {deep['BK']}: "
                f"{plain_deep}). B's rows are the same at both depths, so padding has {want} "
                f"to remove at BK = {p['BK']}: it should gain {want}.\n3 of 3 right.")


def ladder_summary(n: int = 4096, rec=None) -> Text:
    """The tiled kernel at n³ against the FP32 series' best and cuBLAS FP16, in words,
    and its rate at the largest size (the ladder's dip there, if there is one)."""
    rec = rec or recording()
    tiled, cap, half = (_row(k, n, rec=rec) for k in (TILED, "capstone", "cublas_hgemm"))
    if not (tiled and cap and half):
        return Text(f"The rows at {n}³ are not all in the recording.")
    last = _row(TILED, SIZES[-1], rec=rec)
    after = "" if not last or SIZES[-1] == n else (
        f" At {SIZES[-1]}³ it runs at {_tflops(last):,.0f} TFLOP/s, "
        f"{_pct(timing.share(last))} of cuBLAS FP16 beside it"
        + (f": slower than at {n}³." if _tflops(last) < _tflops(tiled) else "."))
    return Markdown(f"At {n}³ the tiled WMMA kernel runs at {_tflops(tiled):,.0f} TFLOP/s: "
                f"{tiled['gflops']['median'] / cap['gflops']['median']:.1f} times the rate of "
                f"chapter 09's FP32 capstone and {_pct(timing.share(tiled))} of cuBLAS FP16 "
                f"timed beside it." + after)


# ------------------------------------------------------------------ reading the tiled kernel

def tiled_listing() -> Text:
    """The tiled kernel as `display.source` shows it, its lines numbered for
    `tiled_where_to_look`."""
    from gemm_kernels.notebook import display
    return display.numbered(display.source(TILED))


def tiled_where_to_look() -> Markdown:
    """A short reading guide to `tiled_listing`: the lines of the shared tiles, the
    double buffer, the fragment loads with their mma, and the epilogue, each range found
    in the listing's text by its first and last line (never typed in)."""
    from gemm_kernels.notebook import display
    text = display.source(TILED)

    def span(first, last, start=1):
        a = display.line_of(text, first, start)
        return a, display.line_of(text, last, a)

    tiles = span("constexpr int A_BYTES", "auto Bs =")
    first = span("a_next.load(A, M, K, K, row0, 0)", "__syncthreads();")
    top = span("const int cur = t & 1;", "}", display.line_of(text, "const int cur"))
    bottom = span("if (t + 1 < tiles) {   // the other buffer", "__syncthreads();")
    frags = (display.line_of(text, "for (int kk = 0; kk < BK"), bottom[0] - 1)
    epilogue = (display.line_of(text, "// Epilogue"), len(text.split("\n")))

    def lines(r):
        return f"lines {r[0]}-{r[1]}"
    return Markdown(
        f"* **The shared tiles** ({lines(tiles)}): two buffers each of `A` and `B`, rows "
        f"`BK + PAD` and `BN + PAD` halves long.\n"
        f"* **The double buffer**: the first tile goes in before the loop ({lines(first)}); "
        f"in the loop over tiles, `cur` picks the buffer the warps read, and the next "
        f"tile's global loads are sent into registers at the top ({lines(top)}); after the "
        f"mma they are stored into the other buffer, `cur ^ 1`, and one barrier follows "
        f"({lines(bottom)}).\n"
        f"* **The fragment loads and the mma** ({lines(frags)}): per 16-wide step `kk`, the "
        f"`load_matrix_sync` from the shared tiles (`LDSM`) and the `mma_sync` on the warp's "
        f"accumulators; the `if constexpr` picks which set of fragments stays in registers.\n"
        f"* **The epilogue** ({lines(epilogue)}): each accumulator through the warp's "
        f"scratch tile in shared memory, then out to `C`, element by element, with bounds, "
        f"`alpha` and `beta`.")
