"""Chapter 12's kernel: the capstone's source (cuda/09_capstone.cu) with split-K and a
padded copy of B.

The split is a handful of lines: the block takes its slice of K from blockIdx.z
(cuda/split_k.cuh), moves A, B and C to the slice's start and its workspace plane, and
uses the slice's length KS where the capstone uses K as the extent of its loop (K stays
the row stride of A). Rather than a second copy of the capstone, chapter 12's registry
entry compiles the capstone's text with these edits applied, so the two can never drift
apart, and the chapter shows exactly this difference. Each edit must apply exactly once.

The padded B (template flag PAD_B) is for N % 4 != 0, where the capstone copies B 4 bytes
at a time: its rows are not 16-byte aligned. The launcher then passes a copy of B whose
rows are padded to LDB = N rounded up to a multiple of 4 floats, so that B is copied 16
bytes at a time again; C, whose rows are still not aligned, keeps the scalar epilogue.
A column beyond N read from the padding only feeds outputs beyond N, which are never
stored.
"""
from __future__ import annotations

from gemm_kernels.core.source_edits import apply

SLICE = """
    // ---- the slice of K this block sums over (all of K unless the grid is split in z)
    int k_begin, KS;
    split_k_range<BK>(K, &k_begin, &KS);
    A += k_begin;
    B += static_cast<size_t>(k_begin) * N;
    C += static_cast<size_t>(blockIdx.z) * M * N;
"""

HEADER = """// Split-K (chapter 12; split_k.cuh): with gridDim.z = S > 1, block z computes the
// product over its own slice of K (whole BK tiles), into plane z of a workspace that the
// launcher passes as C, and a second kernel sums the planes. Everything below, HOIST's
// remainder tile included, works on the slice: A and B start at its first k, A's rows
// keep their stride K, and KS (the slice's length) replaces K as the extent. With S = 1
// the slice is the whole of K.
//
// PAD_B (chapter 12): B arrives with its rows padded to LDB floats, a multiple of 4, so
// that it is copied 16 bytes at a time even when N % 4 != 0; C keeps the scalar path.
//
"""

# Split-K alone: its slice, and KS for K as the loop's extent.
SPLIT_EDITS = (
    ("// HOIST (template flag, on by default):",
     HEADER + "// HOIST (template flag, on by default):"),
    ('#include "vec4.cuh"\n', '#include "vec4.cuh"\n#include "split_k.cuh"\n'),
    ("    const int row0 = by * BM, col0 = bx * BN;\n",
     "    const int row0 = by * BM, col0 = bx * BN;\n" + SLICE),
    ("    // K-1 in the same way), so each copy", "    // KS-1 in the same way), so each copy"),
    ("    const int tiles = (K + BK - 1) / BK;", "    const int tiles = (KS + BK - 1) / BK;"),
    ("&& k0 + k < K;\n            cp_async_4(as + k * LDA + m, A + a_off[i] + min(k0 + k, K - 1), ok);",
     "&& k0 + k < KS;\n            cp_async_4(as + k * LDA + m, A + a_off[i] + min(k0 + k, KS - 1), ok);"),
    ("b_col_ok && k0 + k < K;\n            const float* src = B + min(k0 + k, K - 1) * N + b_col;",
     "b_col_ok && k0 + k < KS;\n            const float* src = B + min(k0 + k, KS - 1) * N + b_col;"),
    ("    // kb = K - tiles*BK in (-BK, 0]", "    // kb = KS - tiles*BK in (-BK, 0]"),
    ("const int kb = K - tiles * BK;", "const int kb = KS - tiles * BK;"),
)

# The padded B, on top of split-K: a template flag, 16-byte copies of B, and LDB as B's
# row stride.
PAD_B_EDITS = (
    ("    B += static_cast<size_t>(k_begin) * N;\n",
     "    const int LDB = PAD_B ? (N + 3) / 4 * 4 : N;   // B's row stride (see PAD_B)\n"
     "    B += static_cast<size_t>(k_begin) * LDB;\n"),
    ("          bool HOIST, bool VEC>\n", "          bool HOIST, bool VEC, bool PAD_B>\n"),
    ("    constexpr int BW = VEC ? 4 : 1;", "    constexpr int BW = VEC || PAD_B ? 4 : 1;"),
    ("min(k0 + k, KS - 1) * N + b_col;\n            if constexpr (VEC) cp_async_16",
     "min(k0 + k, KS - 1) * LDB + b_col;\n            if constexpr (VEC || PAD_B) cp_async_16"),
    ("const int b_rows = B_STEP * N;", "const int b_rows = B_STEP * LDB;"),
    ("max(k, 0) * N + b_col;\n            if constexpr (VEC) cp_async_16",
     "max(k, 0) * LDB + b_col;\n            if constexpr (VEC || PAD_B) cp_async_16"),
    ("b_src = B + (kb + b_k + BK) * N + b_col;", "b_src = B + (kb + b_k + BK) * LDB + b_col;"),
    ("            if constexpr (VEC) cp_async_16(bd", "            if constexpr (VEC || PAD_B) cp_async_16(bd"),
    ("        b_src += BK * N;", "        b_src += BK * LDB;"),
)

EDITS = SPLIT_EDITS + PAD_B_EDITS


def derive(capstone: str) -> str:
    """The capstone's source with split-K: every edit applied, each exactly once."""
    return apply(capstone, EDITS, "split-K")
