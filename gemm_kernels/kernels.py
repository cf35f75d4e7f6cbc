"""The registry: every kernel of the series, its tunables, constraints and geometry.

One entry per kernel. Sources live in `cuda/`, numbered like the chapters. GEMM
kernels share one signature:

    (int M, int N, int K, T alpha, const T* A, const T* B, T beta, T* C)

with A (M x K), B (K x N) and C (M x N) row-major, C = alpha*A@B + beta*C.
Transpose and copy kernels take (int rows, int cols, const T* in, T* out).
"""
from __future__ import annotations

from .registry import Constraint, Kernel, Param, ceil_div

BLOCK_SIZES = (4, 8, 16, 32, 64)


def _square_block_constraint(name="BLOCK"):
    # The message needs the product, which str.format cannot compute: precompute it.
    def check(p):
        return p[name] * p[name] <= 1024
    return Constraint(check, f"{name}={{{name}}} needs {name}*{name} threads per block; "
                             f"at most 1024 are allowed, so {name} must be 32 or less")


KERNELS: dict[str, Kernel] = {}


def register(k: Kernel) -> Kernel:
    if k.name in KERNELS:
        raise ValueError(f"kernel {k.name!r} registered twice")
    KERNELS[k.name] = k
    return k


def get(name: str) -> Kernel:
    try:
        return KERNELS[name]
    except KeyError:
        raise ValueError(f"no kernel named {name!r}; known kernels: "
                         f"{', '.join(sorted(KERNELS))}") from None


def by_chapter(chapter: str) -> list[Kernel]:
    return [k for k in KERNELS.values() if k.chapter == chapter]


# ---------------------------------------------------------------- chapter 01
register(Kernel(
    name="naive", chapter="01", title="naive: one thread per element of C",
    source="01_naive.cu", entry="sgemm_naive", op="sgemm",
    params=(Param("BLOCK", BLOCK_SIZES, 32, "the block is BLOCK x BLOCK threads"),
            Param("MAPPING", ("x->row", "x->col"), "x->row",
                  "threadIdx.x runs down a column of C (x->row) or along a row (x->col)",
                  cxx={"x->row": 0, "x->col": 1})),
    template=("BLOCK", "MAPPING"),
    constraints=(_square_block_constraint(),),
    threads=lambda p: (p["BLOCK"], p["BLOCK"], 1),
    grid=lambda p, s: ((ceil_div(s[0], p["BLOCK"]), ceil_div(s[1], p["BLOCK"]), 1)
                       if p["MAPPING"] == "x->row" else
                       (ceil_div(s[1], p["BLOCK"]), ceil_div(s[0], p["BLOCK"]), 1)),
))

# ---------------------------------------------------------------- chapter 02
register(Kernel(
    name="coalesced", chapter="02", title="global-memory coalescing",
    source="02_coalesced.cu", entry="sgemm_coalesced", op="sgemm",
    params=(Param("BLOCK", BLOCK_SIZES, 32, "the block is BLOCK*BLOCK threads in one dimension"),),
    template=("BLOCK",),
    constraints=(_square_block_constraint(),),
    threads=lambda p: (p["BLOCK"] * p["BLOCK"], 1, 1),
    grid=lambda p, s: (ceil_div(s[1], p["BLOCK"]), ceil_div(s[0], p["BLOCK"]), 1),
))

# ---------------------------------------------------------------- chapters 03-04
register(Kernel(
    name="smem_tiled", chapter="03", title="shared-memory cache blocking",
    source="03_smem_tiled.cu", entry="sgemm_smem_tiled", op="sgemm",
    params=(Param("BLOCK", BLOCK_SIZES, 32,
                  "the block is BLOCK x BLOCK threads; the A and B tiles are BLOCK x BLOCK"),),
    template=("BLOCK",),
    constraints=(_square_block_constraint(),),
    threads=lambda p: (p["BLOCK"], p["BLOCK"], 1),
    grid=lambda p, s: (ceil_div(s[1], p["BLOCK"]), ceil_div(s[0], p["BLOCK"]), 1),
    smem=lambda p: 2 * p["BLOCK"] * p["BLOCK"] * 4,
))

register(Kernel(
    name="bank_layout", chapter="04",
    title="bank conflicts: conflicting layout, transposed layout, padding",
    source="04_bank_conflicts.cu", entry="sgemm_smem_layout", op="sgemm",
    params=(Param("BLOCK", (16, 32), 32, "the block is BLOCK x BLOCK threads"),
            Param("LAYOUT", ("conflict", "transposed"), "conflict",
                  "conflict: tiles stored sA[m][k], sB[n][k] (k contiguous); "
                  "transposed: sA[k][m], sB[k][n] (k-major)",
                  cxx={"conflict": 0, "transposed": 1}),
            Param("PAD", (0, 1, 2, 3, 4), 0,
                  "words added to the row length of both tiles (row = BLOCK + PAD)")),
    template=("BLOCK", "LAYOUT", "PAD"),
    threads=lambda p: (p["BLOCK"], p["BLOCK"], 1),
    grid=lambda p, s: (ceil_div(s[1], p["BLOCK"]), ceil_div(s[0], p["BLOCK"]), 1),
    smem=lambda p: 2 * p["BLOCK"] * (p["BLOCK"] + p["PAD"]) * 4,
))

# ---------------------------------------------------------------- chapters 05-06

# ---------------------------------------------------------------- chapters 07-09

# ---------------------------------------------------------------- chapters 10-11
