"""Chapter 12's kernel: the capstone's source (cuda/09_capstone.cu) with split-K.

The split is a handful of lines: the block takes its slice of K from blockIdx.z
(cuda/split_k.cuh), moves A, B and C to the slice's start and its workspace plane, and
uses the slice's length KS where the capstone uses K as the extent of its loop (K stays
the row stride of A). Rather than a second copy of the capstone, chapter 12's registry
entry compiles the capstone's text with these edits applied, so the two can never drift
apart, and the chapter shows exactly this difference. Each edit must apply exactly once.
"""
from __future__ import annotations

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
"""

EDITS = (
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


def derive(capstone: str) -> str:
    """The capstone's source with split-K: every edit applied, each exactly once."""
    for old, new in EDITS:
        n = capstone.count(old)
        if n != 1:
            raise ValueError(f"split-K edit applies {n} times, not once: {old[:60]!r}")
        capstone = capstone.replace(old, new)
    return capstone
