"""Chapter 09's ladder step 4, split into one change per step.

From the z-order kernel (step 3) to the capstone's first build (step 4c), three things
change: how a tile reaches shared memory (cp.async into a ring of stages instead of
registers and STS), which outputs a thread owns (warp tiles), and whether the fragments
of the next k are read while the FFMAs of this one run (two fragment sets). To say which
of them brings the gain, two intermediate kernels are timed beside the others:

* step 4a (`ZORDER_RING`): the z-order kernel at step 3's configuration whose copies are
  the capstone's cp.async copies into its two shared stages (a ring of 2). The copy order
  is the capstone's (A 4 bytes at a time straight to its transposed place, lane =
  8 * row + k; B 16 bytes): a 16-byte cp.async cannot transpose, so the float4 load of an
  A row cannot stay. Everything else (the 2 x 2 sub-tiles, the k loop, one barrier per
  tile) is the z-order kernel's.
* step 4b (`ONE_FRAGMENT_SET`): the capstone at step 4's configuration with one set of
  fragments: at each k the LDS.128 of that k, then its FFMAs; the wait for the next tile
  and the barrier at the end of the tile (where the capstone, loading the next tile's
  first fragments at the last k, waits one k earlier).
* step 4c: the capstone itself.

Both variants are the registry kernels' own text with a few edits, each of which must
find its text exactly once (as `core.split_k_source` does for chapter 12), so a change to
09_zorder.cu or 09_capstone.cu shows here as an error, never as a silent no-op. The
variants are timed and profiled as steps of the `ch09_ladder` and `ch09_step_stalls`
studies (`Step.variant`, resolved through `timed_variants`).
"""
from __future__ import annotations

import dataclasses
import functools

from gemm_kernels.core.launch import kernel_of
from gemm_kernels.core.source_edits import apply

ZORDER_RING = "zorder: cp.async ring, 2 stages"
ONE_FRAGMENT_SET = "capstone: one fragment set"

# The capstone's cp.async helpers, taken from its source (between these two lines).
_HELPERS = ("// 4-byte copy global -> shared; src_bytes = 0", "template <int BM, int BN, int BK, int WM")

_RING_HEADER = """// Chapter 09, ladder step 4a: the z-order kernel below with one change. Its tiles reach
// shared memory by cp.async (the capstone's copies and helpers), into the same two
// stages, instead of LDG into registers and STS: issued for tile t+1 before the FFMAs of
// tile t, waited for (cp.async.wait_group 0) before the barrier at the end of tile t.
// fetch_tiles and store_tiles are no longer called.
//
"""

_ISSUE = """
    // Step 4a: the copies of one tile into stage s, as the capstone issues them. A: 4 bytes
    // at a time, straight to its transposed place; a warp copies 4 rows x 8 k (lane =
    // 8 * row + k: 4 full sectors, words k * LDA + m in 32 different banks). B: 16 bytes
    // (VEC) or 4 bytes at a time. Sources are clamped inside the matrices; outside them the
    // predicate makes the copy write zeros.
    auto issue_tile = [&](int k0, int s) {
        constexpr int A_STEP = NT / 8;                       // rows between a thread's A copies
        constexpr int BW = VEC ? 4 : 1, B_CPR = BN / BW, B_STEP = NT / B_CPR;
        static_assert(BM % A_STEP == 0 && BK % 8 == 0 && NT % B_CPR == 0 && BK % B_STEP == 0,
                      "copy layout");
#pragma unroll
        for (int i = 0; i < BM * BK / NT; ++i) {
            const int m = t / 8 + (i * A_STEP) % BM, k = t % 8 + 8 * ((i * A_STEP) / BM);
            const int r = row0 + m;
            cp_async_4(&As[s][k][m], A + min(r, M - 1) * K + min(k0 + k, K - 1),
                       r < M && k0 + k < K);
        }
        const int n = t % B_CPR * BW;
        const int c = col0 + n < N ? col0 + n : 0;
#pragma unroll
        for (int i = 0; i < BK * B_CPR / NT; ++i) {
            const int k = t / B_CPR + i * B_STEP;
            const float* src = B + min(k0 + k, K - 1) * N + c;
            if constexpr (VEC) cp_async_16(&Bs[s][k][n], src, col0 + n < N && k0 + k < K);
            else               cp_async_4(&Bs[s][k][n], src, col0 + n < N && k0 + k < K);
        }
    };
"""


def _helpers() -> str:
    text = kernel_of("capstone").source_text()
    start, end = text.index(_HELPERS[0]), text.index(_HELPERS[1])
    return text[start:end]


def ring_edits() -> tuple[tuple[str, str], ...]:
    """(old, new) text edits of 09_zorder.cu for step 4a."""
    return (
        ("// Chapter 09: conflict-free shared memory, both ways.\n",
         _RING_HEADER + "// Chapter 09: conflict-free shared memory, both ways.\n"),
        ('#include "vec4.cuh"\n', '#include "vec4.cuh"\n\n' + _helpers()),
        ("    float ra[BM * BK / NT], rb[BK * BN / NT];\n", ""),
        ("    const int tiles = (K + BK - 1) / BK;\n",
         "    const int tiles = (K + BK - 1) / BK;\n" + _ISSUE),
        ("    fetch_tiles<BM, BN, BK, NT, VEC>(ra, rb, A, B, M, N, K, row0, col0, 0);\n"
         "    store_tiles<BM, BN, BK, NT, LDA, VEC>(ra, rb, As[0], Bs[0]);\n"
         "    __syncthreads();\n",
         "    issue_tile(0, 0);\n    cp_async_commit();\n    cp_async_wait<0>();\n"
         "    __syncthreads();\n"),
        ("        if (more)\n            fetch_tiles<BM, BN, BK, NT, VEC>(ra, rb, A, B, M, N, "
         "K, row0, col0, (tile + 1) * BK);\n",
         "        if (more) {   // the next tile, into the other stage\n"
         "            issue_tile((tile + 1) * BK, cur ^ 1);\n            cp_async_commit();\n"
         "        }\n"),
        ("        if (more) store_tiles<BM, BN, BK, NT, LDA, VEC>(ra, rb, As[cur ^ 1], "
         "Bs[cur ^ 1]);\n        __syncthreads();\n",
         "        cp_async_wait<0>();   // this thread's copies of the next tile have landed\n"
         "        __syncthreads();      // and everyone's\n"),
    )


_ONE_SET_HEADER = """// Chapter 09, ladder step 4b: the capstone below with one change. One set of fragments
// instead of two (item 5 undone): at each k the LDS.128 of that k, then its FFMAs. The
// wait for the next tile and the barrier move to the end of the tile.
//
"""

ONE_SET_EDITS = (
    ("// Chapter 09, capstone: the fastest FP32",
     _ONE_SET_HEADER + "// Chapter 09, capstone: the fastest FP32"),
    ("    float fa[2][TM], fb[2][TN];\n",
     "    float fa[TM], fb[TN];   // one set of fragments (step 4b)\n"),
    ("    load_frags(fa[0], fb[0], 0, 0);\n", ""),
    ("            if (k == BK - 1) {   // the next tile must be in shared memory for everyone\n"
     "                cp_async_wait<STAGES - 2>();\n"
     "                __syncthreads();\n"
     "            }\n"
     "            const int next_stage = k < BK - 1 ? rs : (rs + 1 == STAGES ? 0 : rs + 1);\n"
     "            load_frags(fa[(k + 1) & 1], fb[(k + 1) & 1], next_stage, (k + 1) % BK);\n",
     "            load_frags(fa, fb, rs, k);   // this k's fragments, used right below\n"),
    ("acc[i][j] = fmaf(fa[k & 1][i], fb[k & 1][j], acc[i][j]);",
     "acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);"),
    ("        rs = rs + 1 == STAGES ? 0 : rs + 1;\n",
     "        cp_async_wait<STAGES - 2>();   // the next tile must be in shared memory\n"
     "        __syncthreads();               // for everyone\n"
     "        rs = rs + 1 == STAGES ? 0 : rs + 1;\n"),
    ("    // (The fragments loaded at the last k of the last tile come from a stage nobody\n"
     "    // filled; they are never used. No copy is in flight: tile tiles-1 was waited for.)\n",
     ""),
)


@functools.lru_cache(maxsize=None)
def ring_kernel():
    """Step 4a: the registry's zorder around the edited text, needing cp.async (sm_80+)."""
    return dataclasses.replace(kernel_of("zorder").edited(ring_edits(), ZORDER_RING),
                               features=("cp.async",))


@functools.lru_cache(maxsize=None)
def one_set_kernel():
    """Step 4b: the registry's capstone around the edited text."""
    return kernel_of("capstone").edited(ONE_SET_EDITS, ONE_FRAGMENT_SET)


def _register_variants():
    """Steps 4a and 4b become variants that a study's step may name
    (`measure.studies.Step.variant`), by the names their kernels and rows carry: the
    ladder's study times, and its profile launches, these very texts."""
    from gemm_kernels.measure import studies
    studies.register_variant(ZORDER_RING, ring_kernel)
    studies.register_variant(ONE_FRAGMENT_SET, one_set_kernel)


_register_variants()


def _kernel_diff(before: str, after: str, names: tuple[str, str], entry: str,
                 upto: str) -> str:
    """`display.kernel_diff` with every `cp_async_wait` count hidden (`_hide_wait_count`)."""
    from gemm_kernels.notebook.display import kernel_diff
    return _hide_wait_count(kernel_diff(before, after, names, entry, upto))


def _hide_wait_count(text: str) -> str:
    """Every `cp_async_wait<count>` with its count as `?`: the pipeline exercise asks for
    it, so code shown before the exercise does not give it away."""
    import re
    return re.sub(r"cp_async_wait<[^>]*>", "cp_async_wait<?>", text)


def step4a_diff():
    """Step 4a as what it changes in step 3's kernel (09_zorder.cu): the copies of a tile
    issued by cp.async (`issue_tile`), committed, and waited for before the barrier, in
    place of fetch_tiles into registers and store_tiles from them. The diff shows
    `issue_tile` as one line (a long insertion would hide the loop's few changed lines),
    then its body in full."""
    from gemm_kernels.notebook.display import Text
    short = ("\n    auto issue_tile = [&](int k0, int s) { ... };   "
             "// cp.async copies of one tile (below)\n")
    edits = tuple((old, new.replace(_ISSUE, short)) for old, new in ring_edits())
    zorder = kernel_of("zorder").source_text()
    text = apply(zorder, edits, f"{ZORDER_RING} (diff)")
    diff = _kernel_diff(zorder, text, ("step 3 (09_zorder.cu)", "step 4a"),
                        "sgemm_zorder(", "const int r = row0")
    return Text(diff + "\n\nissue_tile, in full:\n" + _ISSUE.strip("\n"))


def step4c_diff():
    """Step 4c (the capstone) as what it changes in step 4b's main loop: the fragments of
    the next k loaded into a second set while this k's FFMAs run, so the wait and the
    barrier move to the last k, before the next tile's first fragments are read."""
    from gemm_kernels.notebook.display import Text
    return Text(_kernel_diff(one_set_kernel().code, kernel_of("capstone").source_text(),
                             ("step 4b", "step 4c (09_capstone.cu)"), "float acc[TM][TN]",
                             "// ---- C = alpha"))


def _between(text: str, start: str, end: str) -> list[str]:
    """The lines of `text` from the first holding `start` to the first after it holding
    `end`, both included."""
    lines = text.splitlines()
    i = next(n for n, l in enumerate(lines) if start in l)
    j = next(n for n in range(i, len(lines)) if end in lines[n])
    return lines[i:j + 1]


# Where a thread's outputs lie and how it reads its fragments: in step 4a (the z-order
# kernel's lines, sub-tiles half the block's tile apart) and in step 4b (the capstone's,
# sub-tiles 16 rows and 32 columns apart inside the warp's WM x WN tile).
_PLACE_4A = (("    int qr, qc;", "const int am = 4 * qr, bn = 4 * qc;"),
             ("const float4 a0 = ", "const float b[8] = "))
_PLACE_4B = (("const int t = threadIdx.x, lane", "const int bn ="),
             ("auto load_frags = ", "    };"))


def step4b_diff():
    """Step 4b as what it changes in step 4a's kernel: which outputs a thread owns (its
    place in a warp tile instead of in the block's grid) and the fragment reads that
    follow from it. The two kernels are different files, so the diff sets the few lines
    that decide this side by side (from the very texts that were timed); the copies,
    the ring and the k loop's FFMAs are the same in both."""
    import difflib
    from gemm_kernels.notebook.display import Text
    before = [l for a, b in _PLACE_4A for l in _between(ring_kernel().code, a, b)]
    after = [l for a, b in _PLACE_4B for l in _between(one_set_kernel().code, a, b)]
    diff = difflib.unified_diff(before, after, "step 4a (09_zorder.cu, cp.async copies)",
                                "step 4b (09_capstone.cu, one fragment set)", n=0,
                                lineterm="")
    return Text("\n".join(l for l in diff if not l.startswith("@@")))
