"""The registry: every kernel of the series, its tunables, constraints and geometry.

One entry per kernel. Sources live in `cuda/`, numbered like the chapters. GEMM
kernels share one signature:

    (int M, int N, int K, T alpha, const T* A, const T* B, T beta, T* C)

with A (M x K), B (K x N) and C (M x N) row-major, C = alpha*A@B + beta*C. A kernel
marked `a_transposed` receives A^T (K x M, row-major) in place of A; its callers still
pass A, and the launcher transposes it once (see `launch.operands`).
Transpose and copy kernels take (int rows, int cols, const T* in, T* out).
"""
from __future__ import annotations

import functools

from gemm_kernels.core import device
from gemm_kernels.core import split_k_source
from gemm_kernels.core.registry import CUDA_DIR, Constraint, Kernel, Param, ceil_div

BLOCK_SIZES = (4, 8, 16, 32, 64)


def _square_block_constraint(name="BLOCK"):
    # The message needs the product, which str.format cannot compute: precompute it.
    def check(p):
        return p[name] * p[name] <= 1024
    return Constraint(check, f"{name}={{{name}}} needs {name}*{name} threads per block; "
                             f"at most 1024 are allowed, so {name} must be 32 or less")


def _sm(lim) -> int:
    """The sm number of the architecture a per-arch rule is checked for (86 for sm_86)."""
    return device.sm_number(lim["arch"])


# Register rules. A block of NT threads (and MINB blocks per SM, where the source asks
# for them in __launch_bounds__) leaves each thread at most min(255, 65536 / (MINB * NT))
# registers; what a thread needs beyond that, ptxas spills to local memory. Each kernel
# estimates its need from its tile sizes (calibrated on sm_90). Where ptxas for other
# architectures needs more than that estimate at the same cap, a per-arch rule says so:
# these were measured with the pip ptxas (12.9) by compiling every configuration for
# sm_75, 80, 86, 89, 90 and 120 (`pytest -m slow tests/test_arch_matrix.py -s`).
def _cap(threads: int, blocks: int = 1) -> int:
    """Registers per thread that `blocks` resident blocks of `threads` threads leave."""
    return min(255, 65536 // (blocks * threads))


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


# ---------------------------------------------------------------- chapter 00
# The L2's read bandwidth, for the roofline's L2 ceiling: a buffer that fits in the L2,
# read PASSES times through loads that skip the L1 (ld.relaxed.gpu) (op "read": the copy signature,
# out = in, after PASSES reads). 16 MiB fits in the L2 of an A100, H100 or H200 with
# room to spare; `sweep l2_read` times every PASSES at this shape.
L2_READ_SHAPE = (2048, 2048)
L2_READ_THREADS = 256
register(Kernel(
    name="l2_read", chapter="00", title="L2 read bandwidth: one buffer read PASSES times",
    source="00_l2_read.cu", entry="l2_read", op="read",
    params=(Param("T", ("float",), "float", "element type (4-byte words)"),
            Param("PASSES", (1, 2, 4, 8, 16, 32, 64), 16,
                  "times each thread loads its 16 bytes; the first pass comes from DRAM")),
    template=("T", "PASSES"),
    threads=lambda p: (L2_READ_THREADS, 1, 1),
    grid=lambda p, s: (ceil_div(s[0] * s[1], 4 * L2_READ_THREADS), 1, 1),
    align=16,
))

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
    params=(Param("BLOCK", BLOCK_SIZES, 32, "the block is BLOCK*BLOCK threads in one dimension"),
            # x->row: 6.2 against 6.0 TFLOP/s for x->col at 4096^3 on the H200
            Param("GRID", ("x->col", "x->row"), "x->row",
                  "blockIdx.x walks the tile columns of C (x->col) or its tile rows (x->row)",
                  cxx={"x->col": 0, "x->row": 1})),
    template=("BLOCK", "GRID"),
    constraints=(_square_block_constraint(),),
    threads=lambda p: (p["BLOCK"] * p["BLOCK"], 1, 1),
    grid=lambda p, s: ((ceil_div(s[1], p["BLOCK"]), ceil_div(s[0], p["BLOCK"]), 1)
                       if p["GRID"] == "x->col" else
                       (ceil_div(s[0], p["BLOCK"]), ceil_div(s[1], p["BLOCK"]), 1)),
))

# ---------------------------------------------------------------- chapters 03-04
def _smem_tiled_shape_params(p, s):
    """CHECKED=False (no bounds checks) only for EDGES="auto" and a shape whose M, N
    and K are all multiples of BLOCK; the static analysis (s=None) sees the path the
    EDGES setting stands for."""
    if p["EDGES"] == "always":
        return {"CHECKED": True}
    if s is None:
        return {"CHECKED": False}
    return {"CHECKED": any(d % p["BLOCK"] for d in s)}


register(Kernel(
    name="smem_tiled", chapter="03", title="shared-memory cache blocking",
    source="03_smem_tiled.cu", entry="sgemm_smem_tiled", op="sgemm",
    params=(Param("BLOCK", BLOCK_SIZES, 32,
                  "the block is BLOCK x BLOCK threads; the A and B tiles are BLOCK x BLOCK"),
            Param("GRID", ("x->col", "x->row"), "x->col",
                  "blockIdx.x walks the tile columns of C (x->col) or its tile rows (x->row)",
                  cxx={"x->col": 0, "x->row": 1}),
            # auto: 9.1 against 8.4 TFLOP/s for always at 4096^3 on the H200
            Param("EDGES", ("always", "auto"), "auto",
                  "always: bounds checks on every tile; auto: a check-free interior kernel "
                  "when M, N and K are multiples of BLOCK, the checked one otherwise")),
    template=("BLOCK", "GRID", "CHECKED"),
    constraints=(_square_block_constraint(),),
    threads=lambda p: (p["BLOCK"], p["BLOCK"], 1),
    grid=lambda p, s: ((ceil_div(s[1], p["BLOCK"]), ceil_div(s[0], p["BLOCK"]), 1)
                       if p["GRID"] == "x->col" else
                       (ceil_div(s[0], p["BLOCK"]), ceil_div(s[1], p["BLOCK"]), 1)),
    smem=lambda p: 2 * p["BLOCK"] * p["BLOCK"] * 4,
    shape_params=_smem_tiled_shape_params,
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
def _tile_threads_1d(p):
    return p["BM"] * p["BN"] // p["TM"]


def _tile_threads_2d(p):
    return (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])


def _tile_smem(p):
    return (p["BM"] * p["BK"] + p["BK"] * p["BN"]) * 4


def _tile_1d_fits(p):
    """Chapter 05's register estimate (TM accumulators, the A values the unrolled k
    loop loads ahead, addresses) within what a block of BM*BN/TM threads leaves."""
    return 2 * p["TM"] + p["TM"] * p["BK"] // 8 + 32 <= _cap(_tile_threads_1d(p))


_TILE_SMEM_RULE = Constraint(
    lambda p: _tile_smem(p) <= 48 * 1024,
    "the tiles need (BM + BN) * BK * 4 = ({BM} + {BN}) * {BK} * 4 bytes of shared memory; "
    "at most 49152 are allowed: lower BK, BM or BN")

register(Kernel(
    name="tile_1d", chapter="05", title="1D block tiling: TM outputs per thread",
    source="05_tile_1d.cu", entry="sgemm_tile_1d", op="sgemm",
    # The values span the useful range while keeping the whole space small enough to
    # sweep on the GPU host in a minute or two.
    params=(Param("BM", (32, 64, 128), 64, "rows of the C tile per block"),
            Param("BN", (32, 64, 128), 64, "columns of the C tile per block"),
            # defaults: the fastest of the sweep recorded on the H200 (figures/data/)
            Param("BK", (8, 16), 16, "depth of the A and B tiles (step along K)"),
            Param("TM", (2, 4, 8, 16), 16, "outputs per thread, down one column")),
    template=("BM", "BN", "BK", "TM"),
    constraints=(
        Constraint(lambda p: p["BM"] % p["TM"] == 0,
                   "TM={TM} must divide BM={BM}: each thread computes TM rows of the "
                   "BM-row tile; choose TM <= BM"),
        Constraint(lambda p: p["BM"] % p["TM"] or _tile_threads_1d(p) >= 32,
                   "BM*BN/TM = {BM}*{BN}/{TM} threads per block is less than one warp "
                   "(32): lower TM or raise BM or BN"),
        Constraint(lambda p: p["BM"] % p["TM"] or _tile_threads_1d(p) <= 1024,
                   "BM*BN/TM = {BM}*{BN}/{TM} threads per block is more than 1024: "
                   "raise TM or lower BM or BN"),
        # Registers: TM accumulators, and the A values that the unrolled k loop
        # loads ahead (ptxas -v on sm_90: 52 at TM=8, BK=8). Past min(255,
        # 65536 / threads) per thread, ptxas spills to local memory.
        Constraint(lambda p: p["BM"] % p["TM"] or _tile_1d_fits(p),
                   "TM={TM} with BK={BK} needs about 2*TM + TM*BK/8 + 32 registers per "
                   "thread, more than a thread may have in a block of BM*BN/TM = "
                   "{BM}*{BN}/{TM} threads (min(255, 65536 / threads)); it would spill "
                   "to local memory: lower TM or BK, or use fewer threads"),
        # The same at 1024 threads (64 registers per thread), per architecture: with
        # TM=8 and BK=16 the estimate is exactly 64. ptxas for sm_90 and sm_100 fits it
        # in 32-43 registers; ptxas for sm_75-sm_89 and sm_120 needs more for the
        # thread's TM*BK = 128 values of A per tile and spills 16-28 bytes (TM=8 with
        # BK=8 fits). So on those, a 1024-thread block takes TM*BK < 128.
        Constraint(lambda p, lim: p["BM"] % p["TM"] or not _tile_1d_fits(p)
                   or _tile_threads_1d(p) < 1024 or p["TM"] * p["BK"] < 128
                   or 90 <= _sm(lim) < 120,
                   "TM={TM} with BK={BK} in a block of BM*BN/TM = {BM}*{BN}/{TM} = 1024 "
                   "threads: each thread may have 64 registers, and on {arch} ptxas needs "
                   "more for the TM*BK = {TM}*{BK} values of A a thread reads per tile; it "
                   "would spill to local memory: use BK=8, or a smaller BM or BN (at most "
                   "512 threads)", per_arch=True),
        _TILE_SMEM_RULE,
    ),
    threads=lambda p: (_tile_threads_1d(p), 1, 1),
    grid=lambda p, s: (ceil_div(s[1], p["BN"]), ceil_div(s[0], p["BM"]), 1),
    smem=_tile_smem,
))


def _tile_2d_kernel(name, entry, title, defaults, arch_rules=()):
    """One of chapter 06's three kernels; `arch_rules`: its own per-arch constraints."""
    bm, bn, bk, tm, tn = defaults
    return Kernel(
        name=name, chapter="06", title=title,
        source="06_tile_2d.cu", entry=entry, op="sgemm",
        params=(Param("BM", (64, 128), bm, "rows of the C tile per block"),
                Param("BN", (64, 128), bn, "columns of the C tile per block"),
                Param("BK", (8, 16), bk, "depth of the A and B tiles (step along K)"),
                Param("TM", (4, 8), tm, "rows of outputs per thread"),
                Param("TN", (4, 8), tn, "columns of outputs per thread")),
        template=("BM", "BN", "BK", "TM", "TN"),
        constraints=(
            Constraint(lambda p: p["BM"] % p["TM"] == 0,
                       "TM={TM} must divide BM={BM}: choose TM <= BM"),
            Constraint(lambda p: p["BN"] % p["TN"] == 0,
                       "TN={TN} must divide BN={BN}: choose TN <= BN"),
            Constraint(lambda p: _tile_threads_2d(p) >= 32,
                       "(BM/TM)*(BN/TN) = ({BM}/{TM})*({BN}/{TN}) threads per block is "
                       "less than one warp (32): lower TM or TN, or raise BM or BN"),
            Constraint(lambda p: _tile_threads_2d(p) <= 1024,
                       "(BM/TM)*(BN/TN) = ({BM}/{TM})*({BN}/{TN}) threads per block is "
                       "more than 1024: raise TM or TN, or lower BM or BN"),
            # Registers: TM*TN accumulators, and about as many again for the operands,
            # addresses and loads that the unrolled loop keeps in flight (ptxas -v on
            # sm_90: 8x8 takes 159). A block of NT threads may give each at most
            # min(255, 65536 / NT); past that ptxas spills to local memory.
            Constraint(lambda p: 2 * p["TM"] * p["TN"] + 32 <= _cap(_tile_threads_2d(p)),
                       "TM*TN = {TM}*{TN} outputs per thread need about 2*TM*TN + 32 "
                       "registers, more than a thread may have in a block of "
                       "(BM/TM)*(BN/TN) = ({BM}/{TM})*({BN}/{TN}) threads "
                       "(min(255, 65536 / threads)); it would spill to local memory: "
                       "lower TM or TN, or use fewer threads"),
            *arch_rules,
            _TILE_SMEM_RULE,
        ),
        threads=lambda p: (_tile_threads_2d(p), 1, 1),
        grid=lambda p, s: (ceil_div(s[1], p["BN"]), ceil_div(s[0], p["BM"]), 1),
        smem=_tile_smem,
    )


register(_tile_2d_kernel(
    "tile_2d", "sgemm_tile_2d",
    "2D block tiling, inner-product order (shared memory read for every FMA)",
    (128, 128, 8, 8, 8)))
# The register-caching kernel at 1024 threads (64 registers per thread) with 4x4
# outputs: the estimate, 2*16 + 32, is exactly 64. With BK=8, ptxas for sm_75-sm_89
# needs more and spills 4 bytes; ptxas for sm_90, sm_100 and sm_120 fits it in 59-64.
# (The strided kernel, whose default this tile is, fits it everywhere.)
_TILE_2D_REG_1024 = Constraint(
    lambda p, lim: _tile_threads_2d(p) < 1024 or (p["TM"], p["TN"], p["BK"]) != (4, 4, 8)
    or _sm(lim) >= 90,
    "TM*TN = {TM}*{TN} outputs per thread with BK={BK} in a block of (BM/TM)*(BN/TN) = "
    "({BM}/{TM})*({BN}/{TN}) = 1024 threads: each thread may have 64 registers, and on "
    "{arch} ptxas needs more for the accumulators, the cached operands and the copy "
    "addresses; it would spill to local memory: use BK=16, TM or TN = 8, or a smaller BM "
    "or BN (at most 512 threads)", per_arch=True)

register(_tile_2d_kernel(
    "tile_2d_reg", "sgemm_tile_2d_reg",
    "2D block tiling, outer product with register caching",
    (64, 128, 16, 8, 4),       # the fastest of the sweep recorded on the H200
    arch_rules=(_TILE_2D_REG_1024,)))
register(_tile_2d_kernel(
    "tile_2d_strided", "sgemm_tile_2d_strided",
    "2D block tiling, outer product, each thread's outputs strided across the tile",
    (128, 128, 8, 4, 4)))

# ---------------------------------------------------------------- chapters 07-09
# Shapes are (M, N, K). The kernels of 07-09 have two code paths, chosen from the shape
# by `shape_params` (the template argument VEC): 16-byte loads of A and B and 16-byte
# stores of C when K % 4 == 0 and N % 4 == 0 (every row of A and B then starts 16-byte
# aligned), one float at a time otherwise. Both paths handle every M, N, K >= 1.
def _vec_ab_shape_params(p, s):
    return {"VEC": s is None or (s[2] % 4 == 0 and s[1] % 4 == 0)}


def _vec_tile_threads(p):
    return (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])


def _vec_tile_rules(stages):
    """Constraints of chapters 07-08 (`stages` copies of the tiles in shared memory)."""
    nt = _vec_tile_threads
    return (
        Constraint(lambda p: p["BM"] % p["TM"] == 0,
                   "TM={TM} must divide BM={BM}: each thread computes TM rows of the tile"),
        Constraint(lambda p: p["BN"] % p["TN"] == 0,
                   "TN={TN} must divide BN={BN}: each thread computes TN columns of the tile"),
        Constraint(lambda p: p["BM"] % p["TM"] or p["BN"] % p["TN"] or 32 <= nt(p) <= 1024,
                   "(BM/TM)*(BN/TN) = ({BM}/{TM})*({BN}/{TN}) threads per block must be "
                   "between 32 and 1024: change TM, TN, BM or BN"),
        Constraint(lambda p: p["BM"] % p["TM"] or p["BN"] % p["TN"] or not nt(p)
                   or (p["BM"] * p["BK"] // 4) % nt(p) == 0,
                   "the A tile holds BM*BK/4 = {BM}*{BK}/4 float4s, which must split evenly "
                   "over the (BM/TM)*(BN/TN) = ({BM}/{TM})*({BN}/{TN}) threads: raise BK "
                   "or TM, or lower BN"),
        Constraint(lambda p: p["BM"] % p["TM"] or p["BN"] % p["TN"] or not nt(p)
                   or (p["BK"] * p["BN"] // 4) % nt(p) == 0,
                   "the B tile holds BK*BN/4 = {BK}*{BN}/4 float4s, which must split evenly "
                   "over the (BM/TM)*(BN/TN) = ({BM}/{TM})*({BN}/{TN}) threads: raise BK "
                   "or TN, or lower BM"),
        Constraint(lambda p: p["BM"] % p["TM"] or p["BN"] % p["TN"] or not nt(p)
                   or p["TM"] * p["TN"] + 2 * (p["TM"] + p["TN"]) + 24
                   <= _cap(nt(p)),
                   "TM*TN = {TM}*{TN} accumulators (plus the cached operands) do not fit in "
                   "the registers a thread may have in a block of (BM/TM)*(BN/TN) = "
                   "({BM}/{TM})*({BN}/{TN}) threads (65536 per block, 255 per thread): "
                   "lower TM or TN"),
        Constraint(lambda p: stages * (p["BM"] + p["BN"]) * p["BK"] * 4 <= 48 * 1024,
                   f"the tiles need {stages} * (BM + BN) * BK * 4 = {stages} * "
                   "({BM} + {BN}) * {BK} * 4 bytes of shared memory; at most 49152 are "
                   "allowed: lower BK, BM or BN"),
    )


def _vec_tile_params():
    return (Param("BM", (64, 128), 128, "rows of the C tile per block"),
            Param("BN", (64, 128), 128, "columns of the C tile per block"),
            Param("BK", (8, 16), 8, "depth of the A and B tiles (step along K)"),
            Param("TM", (4, 8), 8, "rows of outputs per thread (a multiple of 4: LDS.128)"),
            Param("TN", (4, 8), 8,
                  "columns of outputs per thread (a multiple of 4: LDS.128, STG.128)"))


# Chapter 08's question: what does double buffering hide when a second block per SM no
# longer hides it? ONE_PER_SM asks for so much (unused) dynamic shared memory that two
# blocks cannot share an SM, whatever the registers would allow. A launch setting, not
# a template argument: the compiled kernel is the same.
_ONE_PER_SM = Param("ONE_PER_SM", (False, True), False,
                    "True: each block reserves unused shared memory so that only one block "
                    "fits on an SM (what a second resident block hides, made visible)")


def _one_per_sm_smem(static_smem):
    """Dynamic shared memory that leaves room for one block per SM: just over half of
    the SM's shared memory, counting the block's static tiles and the runtime's share."""
    def dynamic(p, lim):
        if not p["ONE_PER_SM"]:
            return 0
        return lim["smem_per_sm"] // 2 + 1 - static_smem(p) - lim["smem_reserved_per_block"]
    return dynamic


register(Kernel(
    name="float4", chapter="07",
    title="float4 global loads, transposed A tile, LDS.128 reads",
    source="07_float4.cu", entry="sgemm_float4", op="sgemm",
    params=_vec_tile_params() + (_ONE_PER_SM,),
    template=("BM", "BN", "BK", "TM", "TN", "VEC"),
    constraints=_vec_tile_rules(1),
    threads=lambda p: (_vec_tile_threads(p), 1, 1),
    grid=lambda p, s: (ceil_div(s[1], p["BN"]), ceil_div(s[0], p["BM"]), 1),
    smem=lambda p: (p["BM"] + p["BN"]) * p["BK"] * 4,
    dynamic_smem=_one_per_sm_smem(lambda p: (p["BM"] + p["BN"]) * p["BK"] * 4),
    shape_params=_vec_ab_shape_params,
    align=16,
))

# The same-tile ablation of chapter 07: float4's 16-byte global loads without its
# transposed A tile (A is stored row-major with STS.128, as chapter 06 lays it out).
register(Kernel(
    name="float4_a_rows", chapter="07",
    title="float4 global loads, A tile kept row-major (A stored with STS.128)",
    source="07_float4_a_rows.cu", entry="sgemm_float4_a_rows", op="sgemm",
    params=_vec_tile_params(),
    template=("BM", "BN", "BK", "TM", "TN", "VEC"),
    constraints=_vec_tile_rules(1),
    threads=lambda p: (_vec_tile_threads(p), 1, 1),
    grid=lambda p, s: (ceil_div(s[1], p["BN"]), ceil_div(s[0], p["BM"]), 1),
    smem=lambda p: (p["BM"] + p["BN"]) * p["BK"] * 4,
    shape_params=_vec_ab_shape_params,
    align=16,
))

# Chapter 10's use of a transpose: float4 reading a pre-transposed A (K x M), whose
# float4s run along m and go into the k-major A tile whole (one STS.128). Its vector
# path needs the rows of A^T and of B aligned: M % 4 == 0 and N % 4 == 0, any K.
register(Kernel(
    name="float4_at", chapter="07",
    title="float4 on a pre-transposed A: A^T loaded along m, A tile stored with STS.128",
    source="07_float4_at.cu", entry="sgemm_float4_at", op="sgemm",
    params=_vec_tile_params() + (_ONE_PER_SM,),
    template=("BM", "BN", "BK", "TM", "TN", "VEC"),
    constraints=_vec_tile_rules(1),
    threads=lambda p: (_vec_tile_threads(p), 1, 1),
    grid=lambda p, s: (ceil_div(s[1], p["BN"]), ceil_div(s[0], p["BM"]), 1),
    smem=lambda p: (p["BM"] + p["BN"]) * p["BK"] * 4,
    dynamic_smem=_one_per_sm_smem(lambda p: (p["BM"] + p["BN"]) * p["BK"] * 4),
    shape_params=lambda p, s: {"VEC": s is None or (s[0] % 4 == 0 and s[1] % 4 == 0)},
    align=16,
    a_transposed=True,
))

register(Kernel(
    name="double_buffer", chapter="08",
    title="double buffering: two shared stages, next tile prefetched into registers",
    source="08_double_buffer.cu", entry="sgemm_double_buffer", op="sgemm",
    params=_vec_tile_params() + (_ONE_PER_SM,),
    template=("BM", "BN", "BK", "TM", "TN", "VEC"),
    constraints=_vec_tile_rules(2),
    threads=lambda p: (_vec_tile_threads(p), 1, 1),
    grid=lambda p, s: (ceil_div(s[1], p["BN"]), ceil_div(s[0], p["BM"]), 1),
    smem=lambda p: 2 * (p["BM"] + p["BN"]) * p["BK"] * 4,
    dynamic_smem=_one_per_sm_smem(lambda p: 2 * (p["BM"] + p["BN"]) * p["BK"] * 4),
    shape_params=_vec_ab_shape_params,
    align=16,
))


def _zorder_threads(p):
    return p["BM"] * p["BN"] // 64     # 8 x 8 outputs per thread


register(Kernel(
    name="zorder", chapter="09",
    title="conflict-free shared memory: padded A tile (BM+4) and z-order thread layout",
    source="09_zorder.cu", entry="sgemm_zorder", op="sgemm",
    params=(Param("BM", (64, 128), 128, "rows of the C tile per block"),
            Param("BN", (64, 128), 128, "columns of the C tile per block"),
            Param("BK", (8, 16), 8, "depth of the A and B tiles (step along K)"),
            Param("PAD", (0, 4), 4,
                  "floats added to each row of the k-major A tile (BM + PAD): 4 makes the "
                  "transposed store conflict-free at BK = 8 and keeps rows 16-byte aligned"),
            Param("ZORDER", (True, False), True,
                  "True: each warp is a 4 x 8 block of threads with neighbours sharing "
                  "operands (conflict-free, merged LDS.128); False: row-major threads")),
    template=("BM", "BN", "BK", "PAD", "ZORDER", "VEC"),
    constraints=(
        Constraint(lambda p: _zorder_threads(p) <= 512,
                   "BM*BN/64 = {BM}*{BN}/64 threads (8 x 8 outputs each) is more than 512: "
                   "above that a thread gets fewer than the ~120 registers it needs; "
                   "lower BM or BN"),
        Constraint(lambda p: (p["BM"] * p["BK"] // 4) % _zorder_threads(p) == 0,
                   "the A tile holds BM*BK/4 = {BM}*{BK}/4 float4s, which must split evenly "
                   "over the BM*BN/64 = {BM}*{BN}/64 threads (BN must divide 16*BK): raise "
                   "BK or lower BN"),
        Constraint(lambda p: (p["BK"] * p["BN"] // 4) % _zorder_threads(p) == 0,
                   "the B tile holds BK*BN/4 = {BK}*{BN}/4 float4s, which must split evenly "
                   "over the BM*BN/64 = {BM}*{BN}/64 threads (BM must divide 16*BK): raise "
                   "BK or lower BM"),
        Constraint(lambda p: 2 * (p["BM"] + p["PAD"] + p["BN"]) * p["BK"] * 4 <= 48 * 1024,
                   "two stages of tiles need 2 * (BM + PAD + BN) * BK * 4 = "
                   "2 * ({BM} + {PAD} + {BN}) * {BK} * 4 bytes of shared memory; at most "
                   "49152 are allowed: lower BK, BM or BN"),
    ),
    threads=lambda p: (_zorder_threads(p), 1, 1),
    grid=lambda p, s: (ceil_div(s[1], p["BN"]), ceil_div(s[0], p["BM"]), 1),
    smem=lambda p: 2 * (p["BM"] + p["PAD"] + p["BN"]) * p["BK"] * 4,
    shape_params=_vec_ab_shape_params,
    align=16,
))


def _cap_threads(p):
    return 32 * (p["BM"] // p["WM"]) * (p["BN"] // p["WN"])


def _cap_smem(p):
    """Dynamic shared memory: STAGES x (k-major A tile with rows BM + 4, B tile)."""
    return p["STAGES"] * p["BK"] * (p["BM"] + 4 + p["BN"]) * 4


def _cap_ok(p):
    """The warp grid is well formed (the other rules are only meaningful then)."""
    return p["BM"] % p["WM"] == 0 and p["BN"] % p["WN"] == 0 and _cap_threads(p) <= 1024


# The capstone's tunables and rules, shared with chapter 12's split-K entry (same source).
_CAP_PARAMS = (Param("BM", (128,), 128, "rows of the C tile per block"),
               Param("BN", (128, 256), 128, "columns of the C tile per block"),
               Param("BK", (8, 16), 16, "depth of a pipeline stage (step along K)"),
               Param("WM", (32, 64), 32,
                     "rows of a warp's region (each thread: WM/16 sub-tiles of 4 rows)"),
               Param("WN", (64, 128), 64,
                     "columns of a warp's region (each thread: WN/32 sub-tiles of 4 columns)"),
               Param("STAGES", (2, 3, 4), 4,
                     "shared-memory stages in the cp.async ring (STAGES-1 tiles in flight)"),
               Param("GROUP", (1, 8), 1,
                     "tile rows per rasterisation group (1: plain row-by-row block order)"),
               Param("MINB", (1, 2), 1,
                     "blocks per SM promised to ptxas (__launch_bounds__): 2 caps a 256-thread "
                     "block at 128 registers per thread"),
               Param("HOIST", (False, True), True,
                     "copy addresses leave the main loop: the K remainder is tile 0, every "
                     "later tile is whole and its copies use source pointers that just "
                     "advance (no per-tile clamps or predicates)"))
_CAP_RULES = (
    Constraint(lambda p: p["BM"] % p["WM"] == 0,
               "WM={WM} must divide BM={BM}: the block tile is split into warp regions"),
    Constraint(lambda p: p["BN"] % p["WN"] == 0,
               "WN={WN} must divide BN={BN}: the block tile is split into warp regions"),
    Constraint(lambda p: p["BM"] % p["WM"] or p["BN"] % p["WN"] or _cap_threads(p) <= 1024,
               "(BM/WM)*(BN/WN) = ({BM}/{WM})*({BN}/{WN}) warps is more than 32 "
               "(1024 threads): raise WM or WN"),
    Constraint(lambda p: not _cap_ok(p) or _cap_threads(p) % p["BN"] == 0,
               "BN={BN} must divide the number of threads, 32*(BM/WM)*(BN/WN) = "
               "32*({BM}/{WM})*({BN}/{WN}), so that every thread copies whole parts of "
               "a B row: lower WM or WN, or BN"),
    Constraint(lambda p: not _cap_ok(p) or p["BM"] % (_cap_threads(p) // 8) == 0,
               "each copy of the A tile covers threads/8 rows, and BM={BM} must be a "
               "multiple of that (threads = 32*({BM}/{WM})*({BN}/{WN})): raise WM or WN"),
    Constraint(lambda p: not _cap_ok(p) or (p["BK"] * p["BN"] // 4) % _cap_threads(p) == 0,
               "the B tile holds BK*BN/4 = {BK}*{BN}/4 float4s, which must split evenly "
               "over the 32*(BM/WM)*(BN/WN) = 32*({BM}/{WM})*({BN}/{WN}) threads: raise "
               "BK, WM or WN"),
    # Registers: WM*WN/32 accumulators, two sets of fragments (TM + TN each) and
    # about 24 for addresses. With warps of 32 x 64 (8 x 8 per thread) that is 120,
    # and where the cap is 128 (MINB=2 with BN=128, or BN=256: 512 threads) ptxas
    # takes 120-128 and, in a few builds per architecture, spills 4-32 bytes. Which
    # builds depends on BK, STAGES, GROUP and HOIST in no pattern (on sm_90: 7 of
    # the 48, and their register need without the cap, 128-154, is no different
    # from the builds that fit), so no rule here picks them out. Refusing all 48
    # would refuse the MINB=2 builds that chapter 09 measures and the 128 x 256
    # tile, where 41 of the 48 compile for sm_90 without spills (the H200's
    # recording agrees). tests/test_arch_matrix.py lists them as known spills.
    Constraint(lambda p: not _cap_ok(p)
               or p["WM"] * p["WN"] // 32 + 2 * (p["WM"] // 4 + p["WN"] // 8) + 24
               <= _cap(_cap_threads(p), p["MINB"]),
               "a thread holds WM*WN/32 = {WM}*{WN}/32 accumulators plus two sets of "
               "operands; with MINB={MINB} blocks of 32*({BM}/{WM})*({BN}/{WN}) "
               "threads per SM that does not fit in 65536 registers (255 per thread): "
               "lower WM or WN, or MINB"),
    Constraint(lambda p, lim: p["MINB"] * (_cap_smem(p) + lim["smem_reserved_per_block"])
               <= lim["smem_per_sm"],
               "STAGES * BK * (BM + 4 + BN) * 4 = {STAGES} * {BK} * ({BM} + 4 + {BN}) * 4 "
               "bytes of shared memory per block: MINB={MINB} blocks of it (plus the "
               "{smem_reserved_per_block} bytes the runtime keeps for each) do not fit "
               "in the {smem_per_sm_kib} KiB of an {arch} SM: lower STAGES or BK, or MINB",
               per_arch=True),
)


register(Kernel(
    name="capstone", chapter="09",
    title="capstone: cp.async multi-stage pipeline, warp tiling, z-order, "
          "register double buffering",
    source="09_capstone.cu", entry="sgemm_capstone", op="sgemm",
    # defaults: the fastest of the 4096^3 sweep on the H200 (98% of cuBLAS there)
    params=_CAP_PARAMS,
    template=("BM", "BN", "BK", "WM", "WN", "STAGES", "GROUP", "MINB", "HOIST", "VEC"),
    constraints=_CAP_RULES,
    threads=lambda p: (_cap_threads(p), 1, 1),
    grid=lambda p, s: (ceil_div(s[1], p["BN"]), ceil_div(s[0], p["BM"]), 1),
    dynamic_smem=lambda p, lim: _cap_smem(p),
    features=("cp.async",),
    # A is always copied 4 bytes at a time (transposed on the way), so only B and C
    # need 16-byte alignment: the vector path needs N % 4 == 0, any K.
    shape_params=lambda p, s: {"VEC": s is None or s[1] % 4 == 0},
    align=16,
))


# ---------------------------------------------------------------- chapters 10-11
# Chapter 10: transposes and copies, (rows, cols, in, out), T = float or double.
_ITEMSIZE = {"float": 4, "double": 8}
_T = Param("T", ("float", "double"), "float", "element type: float32 or float64")
_TILE = Param("TILE", (16, 32, 64), 32, "each block moves one TILE x TILE tile")
_ROWS = Param("ROWS", (1, 2, 4, 8, 16, 32), 8,
              "rows of threads per block; each thread handles TILE/ROWS rows of its tile, "
              "ROWS apart (the stride loop)")
_PAD = Param("PAD", (0, 1, 2), 1, "unused elements appended to each shared tile row")
_ROWS_DIVIDE = Constraint(lambda p: p["TILE"] % p["ROWS"] == 0,
                          "ROWS={ROWS} must divide TILE={TILE}: each thread handles "
                          "TILE/ROWS rows of the tile; choose ROWS <= TILE, a power of two")
_TILE_THREADS = Constraint(lambda p: p["TILE"] * p["ROWS"] <= 1024,
                           "TILE={TILE} with ROWS={ROWS} needs TILE*ROWS threads per block, "
                           "more than the limit of 1024; lower ROWS or TILE")


def _tile_grid(p, s):
    return (ceil_div(s[1], p["TILE"]), ceil_div(s[0], p["TILE"]), 1)


def _tile_shape_rule(p, s):
    rows, cols = s
    if rows < 1 or cols < 1:
        return f"rows={rows}, cols={cols}: both must be at least 1"
    if ceil_div(rows, p["TILE"]) > 65535:
        return (f"rows={rows} needs {ceil_div(rows, p['TILE'])} tile rows with TILE={p['TILE']}, "
                "more than the 65535 blocks gridDim.y allows; use a larger TILE")
    return None


def _register_tile_kernel(name, entry, op, title, padded=False):
    params = (_T, _TILE, _ROWS) + ((_PAD,) if padded else ())
    register(Kernel(
        name=name, chapter="10", title=title, source="10_transpose.cu", entry=entry, op=op,
        params=params, template=tuple(q.name for q in params),
        constraints=(_ROWS_DIVIDE, _TILE_THREADS),
        threads=lambda p: (p["TILE"], p["ROWS"], 1),
        grid=_tile_grid,
        smem=(lambda p: 0) if entry in ("copy", "transpose_naive") else
             (lambda p: p["TILE"] * (p["TILE"] + p.get("PAD", 0)) * _ITEMSIZE[p["T"]]),
        shape_rule=_tile_shape_rule,
    ))


_register_tile_kernel("copy", "copy", "copy", "copy kernel: the bandwidth a transpose aims at")
_register_tile_kernel("copy_smem", "copy_smem", "copy", "copy through a shared-memory tile")
_register_tile_kernel("transpose_naive", "transpose_naive", "transpose",
                      "naive transpose: coalesced reads, strided writes")
_register_tile_kernel("transpose_smem", "transpose_smem", "transpose",
                      "shared-memory tile: coalesced both ways, bank conflicts on the column read")

def _padded_grid(p, s):
    tiles_r = ceil_div(s[0], p["TILE"] * p["STACK"])
    tiles_c = ceil_div(s[1], p["TILE"])
    return (tiles_c, tiles_r, 1) if p["ORDER"] == "x->col" else (tiles_r, tiles_c, 1)


def _padded_shape_rule(p, s):
    rows, cols = s
    if rows < 1 or cols < 1:
        return f"rows={rows}, cols={cols}: both must be at least 1"
    tiles_r = ceil_div(rows, p["TILE"] * p["STACK"])
    tiles_c = ceil_div(cols, p["TILE"])
    if p["ORDER"] == "x->col" and tiles_r > 65535:
        return (f"rows={rows} needs {tiles_r} tile rows with TILE={p['TILE']}, "
                f"STACK={p['STACK']}, more than the 65535 blocks gridDim.y allows; "
                "use a larger TILE or STACK")
    if p["ORDER"] == "x->row" and tiles_c > 65535:
        return (f"cols={cols} needs {tiles_c} tile columns with TILE={p['TILE']}, more than "
                "the 65535 blocks gridDim.y allows with ORDER=x->row; use a larger TILE "
                "or ORDER=x->col")
    return None


def _padded_smem(p):
    return p["STACK"] * p["TILE"] * (p["TILE"] + p["PAD"]) * _ITEMSIZE[p["T"]]


register(Kernel(
    name="transpose_padded", chapter="10",
    title="padded shared tile: TILE x (TILE + PAD), no bank conflicts",
    source="10_transpose.cu", entry="transpose_padded", op="transpose",
    params=(_T, _TILE, _ROWS, _PAD,
            # x->row with STACK=2: 87% of the device copy at 8191x4097 float32 against
            # 76% for x->col, STACK=1 (H200 sweep)
            Param("ORDER", ("x->col", "x->row"), "x->row",
                  "blockIdx.x walks the tile columns of `in` (x->col) or its tile rows "
                  "(x->row: consecutive blocks write neighbouring pieces of a row of out)",
                  cxx={"x->col": 0, "x->row": 1}),
            Param("STACK", (1, 2), 2,
                  "tiles per block, one under the other: the block moves (STACK*TILE) x "
                  "TILE elements and writes STACK*TILE consecutive elements per row of out")),
    template=("T", "TILE", "ROWS", "PAD", "ORDER", "STACK"),
    constraints=(_ROWS_DIVIDE, _TILE_THREADS,
                 Constraint(lambda p: _padded_smem(p) <= 48 * 1024,
                            "STACK={STACK} with TILE={TILE}, PAD={PAD}, T={T} needs "
                            "STACK*TILE*(TILE+PAD)*sizeof(T) bytes of shared memory, more "
                            "than 49152; use STACK=1 or a smaller TILE")),
    threads=lambda p: (p["TILE"], p["ROWS"], 1),
    grid=_padded_grid,
    smem=_padded_smem,
    shape_rule=_padded_shape_rule,
))
_register_tile_kernel("transpose_diagonal", "transpose_diagonal", "transpose",
                      "diagonal block order against partition camping", padded=True)


def _vec(p):
    """Elements per vector access for transpose_fast."""
    return max(1, p["VEC_BYTES"] // _ITEMSIZE[p["T"]])


def _fast_shape_params(p, s):
    vec = _vec(p)
    if s is None:                      # static analysis: the vector path
        return {"VEC_LOAD": vec > 1, "VEC_STORE": vec > 1}
    rows, cols = s
    return {"VEC_LOAD": vec > 1 and cols % vec == 0, "VEC_STORE": vec > 1 and rows % vec == 0}


register(Kernel(
    name="transpose_fast", chapter="10",
    title="beyond: several elements per thread, 16-byte loads and stores",
    source="10_transpose.cu", entry="transpose_fast", op="transpose",
    params=(_T,
            # defaults: among the fastest of the sweep recorded on the H200 (figures/data/)
            Param("TILE", _TILE.values, 64, _TILE.doc),
            Param("ROWS", (1, 2, 4, 8, 16, 32, 64), 16,
                  "rows of threads per block; the block is (TILE*sizeof(T)/VEC_BYTES) x ROWS "
                  "threads and each handles TILE/ROWS vectors of its tile"),
            Param("VEC_BYTES", (4, 8, 16), 16,
                  "bytes per global load/store on the vector path (used where cols or rows "
                  "allow aligned vectors; scalar otherwise)"),
            _PAD),
    template=("T", "TILE", "ROWS", "VEC_BYTES", "PAD", "VEC_LOAD", "VEC_STORE"),
    constraints=(
        Constraint(lambda p: p["VEC_BYTES"] >= _ITEMSIZE[p["T"]],
                   "VEC_BYTES={VEC_BYTES} is smaller than one {T}; choose VEC_BYTES >= 8 for double"),
        _ROWS_DIVIDE,
        Constraint(lambda p: p["ROWS"] % _vec(p) == 0,
                   "ROWS={ROWS} must be a multiple of VEC_BYTES/sizeof(T) (VEC_BYTES={VEC_BYTES}, "
                   "T={T}) so the scalar path can renumber the block as TILE-wide rows"),
        Constraint(lambda p: p["TILE"] // _vec(p) * p["ROWS"] <= 1024,
                   "TILE={TILE}, ROWS={ROWS}, VEC_BYTES={VEC_BYTES}: more than 1024 threads "
                   "per block; lower ROWS"),
    ),
    threads=lambda p: (p["TILE"] // _vec(p), p["ROWS"], 1),
    grid=_tile_grid,
    smem=lambda p: p["TILE"] * (p["TILE"] + p["PAD"]) * _ITEMSIZE[p["T"]],
    shape_rule=_tile_shape_rule,
    shape_params=_fast_shape_params,
))


# Chapter 11: 64-bit shared memory.
def _gemm_int_rule(p, s):
    M, N, K = s
    if min(M, N, K) < 1:
        return f"M={M}, N={N}, K={K}: all must be at least 1"
    if max(M * K, K * N, M * N) >= 2 ** 31:
        return "this kernel indexes with 32-bit ints: M*K, K*N and M*N must stay below 2^31"
    return None


register(Kernel(
    name="dgemm_tiled", chapter="11", title="double-precision shared-memory tiles (LDS.64)",
    source="11_dgemm_tiled.cu", entry="dgemm_tiled", op="dgemm",
    params=(Param("BLOCK", (8, 16, 32), 16,
                  "the block is BLOCK x BLOCK threads; the A and B tiles are BLOCK x BLOCK doubles"),),
    template=("BLOCK",),
    threads=lambda p: (p["BLOCK"], p["BLOCK"], 1),
    grid=lambda p, s: (ceil_div(s[1], p["BLOCK"]), ceil_div(s[0], p["BLOCK"]), 1),
    smem=lambda p: 2 * p["BLOCK"] * p["BLOCK"] * 8,
    shape_rule=_gemm_int_rule,
))

register(Kernel(
    name="sgemm_tiled_vec", chapter="11",
    title="float tiles read as float2/float4 from shared memory (LDS.64/LDS.128)",
    source="11_dgemm_tiled.cu", entry="sgemm_tiled_vec", op="sgemm",
    params=(Param("BLOCK", (8, 16, 32), 16, "the block is BLOCK x BLOCK threads"),
            Param("VEC", (1, 2, 4), 4,
                  "C elements per thread along a row; the B tile is read VEC floats at a time "
                  "(1: LDS, 2: LDS.64, 4: LDS.128)")),
    template=("BLOCK", "VEC"),
    threads=lambda p: (p["BLOCK"], p["BLOCK"], 1),
    grid=lambda p, s: (ceil_div(s[1], p["BLOCK"] * p["VEC"]), ceil_div(s[0], p["BLOCK"]), 1),
    smem=lambda p: (p["BLOCK"] * p["BLOCK"] + p["BLOCK"] * p["BLOCK"] * p["VEC"]) * 4,
    shape_rule=_gemm_int_rule,
))


# ---------------------------------------------------------------- chapter 12
# The last mile: a tile size and a split of K for every shape, and the matrix-vector
# end. Both kernels split K over the grid's z (cuda/split_k.cuh) and go through the one
# launcher, which adds the workspace and the reduction when there is more than a slice.
SPLITS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
WORKSPACE_LIMIT = 1 << 30      # bytes of split-K partial products the launcher allocates


def slices(k_chunks: int, split: int) -> int:
    """K slices of a split-K launch: `split` asked for, as many as whole chunks of K
    allow with none empty (split_k_range gives each ceil(chunks / slices) chunks)."""
    return ceil_div(k_chunks, ceil_div(k_chunks, split))


def _workspace_rule(chunk: int):
    def rule(p, s):
        z = slices(ceil_div(s[2], chunk), p["SPLIT"])
        need = z * s[0] * s[1] * 4 if z > 1 else 0
        if need > WORKSPACE_LIMIT:
            return (f"SPLIT={p['SPLIT']} at {s[0]}x{s[1]}x{s[2]}: {z} partial products of "
                    f"{s[0]}x{s[1]} floats need {need / 2**30:.1f} GiB of workspace, more "
                    f"than the {WORKSPACE_LIMIT >> 30} GiB allowed: lower SPLIT")
        return None
    return rule


_SPLIT = Param("SPLIT", SPLITS, 1,
               "slices of K, one per blockIdx.z; above 1 each slice writes a partial "
               "product and a second kernel adds them into C (in a fixed order)")
CAP_SPLIT_BK = 16


def _one(name: str, value) -> Param:
    """The capstone's tunable `name` held at one value (the capstone's default)."""
    spec = next(q for q in _CAP_PARAMS if q.name == name)
    return Param(name, (value,), value, spec.doc)


def _split_padded_b(p, s) -> int | None:
    """B's padded row length for capstone_split (PAD_B where N % 4 != 0), else None."""
    return (s[1] + 3) // 4 * 4 if p["PAD_B"] and s[1] % 4 else None


register(Kernel(
    name="capstone_split", chapter="12",
    title="the capstone with a tile size and a split of K chosen for the shape",
    source="09_capstone.cu", entry="sgemm_capstone", op="sgemm",
    # the capstone's text with split-K's few lines added (core/split_k_source.py)
    code=split_k_source.derive((CUDA_DIR / "09_capstone.cu").read_text()),
    # The capstone's kernel with smaller tiles and split-K. A separate entry, not more
    # values of the capstone's tunables: chapter 09 sweeps every capstone configuration
    # at 4096^3, where these are beside the point. The rest is held at the capstone's
    # defaults (warps of 32 x 64, BK 16, 4 stages, HOIST), so its rules apply unchanged.
    params=(Param("BM", (64, 128), 128, "rows of the C tile per block"),
            Param("BN", (64, 128), 128, "columns of the C tile per block"),
            _SPLIT, _one("BK", CAP_SPLIT_BK),
            *(_one(n, v) for n, v in (("WM", 32), ("WN", 64), ("STAGES", 4), ("GROUP", 1),
                                      ("MINB", 1), ("HOIST", True))),
            Param("PAD_B", (False, True), False,
                  "where N % 4 != 0: copy B first into rows padded to a multiple of 4 "
                  "floats, so that the kernel reads it 16 bytes at a time (no effect "
                  "when N % 4 == 0)")),
    template=("BM", "BN", "BK", "WM", "WN", "STAGES", "GROUP", "MINB", "HOIST", "VEC",
              "PAD_B"),
    constraints=_CAP_RULES,
    threads=lambda p: (_cap_threads(p), 1, 1),
    grid=lambda p, s: (ceil_div(s[1], p["BN"]), ceil_div(s[0], p["BM"]),
                       slices(ceil_div(s[2], p["BK"]), p["SPLIT"])),
    dynamic_smem=lambda p, lim: _cap_smem(p),
    features=("cp.async",),
    shape_rule=_workspace_rule(CAP_SPLIT_BK),
    shape_params=lambda p, s: {"VEC": s is None or s[1] % 4 == 0,
                               "PAD_B": s is not None and _split_padded_b(p, s) is not None},
    padded_b=_split_padded_b,
    splits=lambda p, s: slices(ceil_div(s[2], p["BK"]), p["SPLIT"]),
    align=16,
))

# The matrix-vector end (M == 1 or N == 1). ROWS (N == 1): a warp per row of A, K cut
# into slices of whole 128-float chunks; COLS (M == 1): a block per 128 (or 32) columns
# of B, K cut into slices of whole groups of WARPS rows. The slices are added in the same
# launch (split_k_finish): at a few tens of microseconds per product, a second kernel
# would cost a tenth of the time.
def _gemv_cols(s) -> bool:
    return s is not None and s[0] == 1 and s[1] > 1


def _gemv_chunk(p, s) -> int:
    return p["WARPS"] if _gemv_cols(s) else 128


def _gemv_vec(s) -> bool:
    return s is None or (s[1] % 4 == 0 if _gemv_cols(s) else s[2] % 4 == 0)


def _gemv_rule(p, s):
    if s[0] != 1 and s[1] != 1:
        return (f"gemv computes a matrix-vector product: M or N must be 1, got "
                f"{s[0]}x{s[1]}x{s[2]} (use capstone_split)")
    return _workspace_rule(_gemv_chunk(p, s))(p, s)


register(Kernel(
    name="gemv", chapter="12", title="matrix-vector product: M == 1 or N == 1",
    source="12_gemv.cu", entry="sgemv", op="sgemm",
    params=(Param("SPLIT", (1, 2, 4, 8, 16, 32, 64), 1,
                  "slices of K, one per blockIdx.z; above 1 each slice writes a partial "
                  "product and the last block of each range of outputs adds them into C "
                  "(in a fixed order), in the same launch"),
            Param("WARPS", (8, 32), 8,
                  "warps per block: rows of A per block (N == 1), or rows of B a block "
                  "reads at once (M == 1)"),
            Param("STREAM", (False, True), True,
                  "M == 1: read B with streaming loads (__ldcs: lines evict-first), the "
                  "hint for data read once; no effect when N == 1")),
    template=("COLS", "VEC", "WARPS", "STREAM"),
    threads=lambda p: (32 * p["WARPS"], 1, 1),
    grid=lambda p, s: (ceil_div(s[1], 32 * (4 if _gemv_vec(s) else 1)) if _gemv_cols(s)
                       else ceil_div(s[0], p["WARPS"]), 1,
                       slices(ceil_div(s[2], _gemv_chunk(p, s)), p["SPLIT"])),
    shape_rule=_gemv_rule,
    shape_params=lambda p, s: {"COLS": _gemv_cols(s), "VEC": _gemv_vec(s),
                               "STREAM": p["STREAM"] and _gemv_cols(s)},
    splits=lambda p, s: slices(ceil_div(s[2], _gemv_chunk(p, s)), p["SPLIT"]),
    finishes_split=True,
    smem=lambda p: p["WARPS"] * 128 * 4,     # COLS: the warps' sums of 128 columns
    align=16,
))


# ---------------------------------------------------------------- chapter 13

# The naive WMMA kernel reads whole 16 x 16 fragments from global memory.
def _wmma_whole_tiles(p, s):
    bad = [f"{d}={v}" for d, v in zip("MNK", s) if v % 16]
    if bad:
        return (f"hgemm_wmma_naive loads whole 16 x 16 fragments straight from global "
                f"memory, so M, N and K must be multiples of 16 ({', '.join(bad)}); "
                f"wmma_tiled takes any shape")
    return None


register(Kernel(
    name="wmma_naive", chapter="13",
    title="tensor cores through WMMA: one warp per 16 x 16 tile, fragments from global memory",
    source="13_wmma.cu", entry="hgemm_wmma_naive", op="hgemm",
    params=(Param("WM", (1, 2, 4), 2, "warps of a block along M (each 16 rows of C)"),
            Param("WN", (1, 2, 4), 2, "warps of a block along N (each 16 columns of C)")),
    template=("WM", "WN"),
    threads=lambda p: (32, p["WM"] * p["WN"], 1),
    grid=lambda p, s: (ceil_div(s[1], 16 * p["WN"]), ceil_div(s[0], 16 * p["WM"]), 1),
    shape_rule=_wmma_whole_tiles,
    # load_matrix_sync and store_matrix_sync need 32-byte-aligned addresses
    align=32,
))

TILED_WMMA_THREADS = 256


def _wmma_tiles_bytes(p) -> int:
    """Two buffers of the A and B tiles (FP16), or the epilogue's scratch of one 16 x 16
    FP32 tile per warp where that is larger (the source puts both in the same bytes)."""
    tiles = 2 * (p["BM"] * (p["BK"] + p["PAD"]) + p["BK"] * (p["BN"] + p["PAD"])) * 2
    return max(tiles, TILED_WMMA_THREADS // 32 * 16 * 16 * 4)


register(Kernel(
    name="wmma_tiled", chapter="13",
    title="tensor cores through WMMA: shared-memory tiles in two buffers, 8 warps each "
          "computing a grid of fragments",
    source="13_wmma.cu", entry="hgemm_wmma_tiled", op="hgemm",
    params=(Param("BM", (64, 128), 128, "rows of the C tile per block"),
            Param("BN", (64, 128), 128, "columns of the C tile per block"),
            Param("BK", (16, 32), 32, "depth of a shared-memory tile (one or two fragment "
                                      "steps along K)"),
            Param("WARPS_M", (2, 4), 2, "the 8 warps as WARPS_M x (8 / WARPS_M): each "
                                        "computes (BM / WARPS_M) x (BN * WARPS_M / 8)"),
            Param("PAD", (0, 8), 8, "halves added to each shared row (8: rows start in "
                                    "different banks)")),
    template=("BM", "BN", "BK", "WARPS_M", "PAD", "VEC"),
    # __launch_bounds__(256, 2) caps a thread at 128 registers. The 128 x 128 tile with
    # BK = 32 (the default) fits them on sm_90 and newer; ptxas for sm_75 to sm_89 spills
    # 4-24 bytes there (tests/test_arch_matrix.py lists it as a known spill): the default
    # must stay accepted on a T4, and the spill costs less than half the blocks.
    threads=lambda p: (TILED_WMMA_THREADS, 1, 1),
    grid=lambda p, s: (ceil_div(s[1], p["BN"]), ceil_div(s[0], p["BM"]), 1),
    smem=_wmma_tiles_bytes,
    # 16-byte loads (8 halves) where K % 8 == 0 and N % 8 == 0, else element by element
    shape_params=lambda p, s: {"VEC": s is None or (s[2] % 8 == 0 and s[1] % 8 == 0)},
    align=16,
))


# ---------------------------------------------------------------- chapter 14

def _mma_threads(p) -> int:
    return 32 * p["WARPS_M"] * p["WARPS_N"]



def _rows_of_16_bytes(why: str):
    """A shape rule for kernels that move rows of A and B in 16-byte pieces: K and N
    multiples of 8 halves; `why` says what needs it."""
    def rule(p, s):
        bad = [f"{d}={v}" for d, v in zip("NK", s[1:]) if v % 8]
        if bad:
            return (f"{why}, so K and N must be multiples of 8 ({', '.join(bad)}); pad the "
                    f"matrices, or use wmma_tiled, which takes any shape")
        return None
    return rule


_mma_rows_rule = _rows_of_16_bytes("hgemm_mma copies whole 16-byte chunks (8 halves) of "
                                   "the rows of A and B")
_tma_rows_rule = _rows_of_16_bytes("TMA reads rows whose strides are multiples of 16 bytes "
                                   "(8 halves)")


def _mma_smem(p) -> int:
    """Dynamic shared memory: STAGES buffers of the A tile (BM x BK) and the B tile
    (BK x BN), FP16."""
    return p["STAGES"] * (p["BM"] * p["BK"] + p["BK"] * p["BN"]) * 2


register(Kernel(
    name="mma_sync", chapter="14",
    title="mma.sync m16n8k16 fed by ldmatrix from swizzled shared tiles, a cp.async ring",
    source="14_mma.cu", entry="hgemm_mma", op="hgemm",
    params=(Param("BM", (64, 128, 256), 128, "rows of the C tile per block"),
            Param("BN", (64, 128, 256), 128, "columns of the C tile per block"),
            Param("BK", (32, 64), 32, "depth of a pipeline stage (two or four 16-steps)"),
            Param("WARPS_M", (2, 4), 2, "warps of a block along M"),
            Param("WARPS_N", (2, 4), 2, "warps of a block along N"),
            Param("STAGES", (2, 3, 4), 4, "shared-memory stages in the copy ring "
                                          "(STAGES - 1 tiles in flight)"),
            Param("SWIZZLE", (False, True), True, "16-byte chunks of each shared row stored "
                                                  "at chunk ^ f(row): ldmatrix without bank "
                                                  "conflicts")),
    template=("BM", "BN", "BK", "WARPS_M", "WARPS_N", "STAGES", "SWIZZLE"),
    constraints=(
        Constraint(lambda p: p["BM"] % (16 * p["WARPS_M"]) == 0
                   and p["BN"] % (16 * p["WARPS_N"]) == 0,
                   "a warp's region, (BM / WARPS_M) x (BN / WARPS_N) = ({BM} / {WARPS_M}) x "
                   "({BN} / {WARPS_N}), must be whole 16 x 16 steps of ldmatrix: raise BM or "
                   "BN, or lower WARPS_M or WARPS_N"),
        Constraint(lambda p: p["WARPS_M"] * p["WARPS_N"] <= 8,
                   "WARPS_M * WARPS_N = {WARPS_M} * {WARPS_N} warps: take at most 8 (more "
                   "give each warp too little work)"),
        Constraint(lambda p: (p["BM"] * p["BK"] // 8) % _mma_threads(p) == 0
                   and (p["BK"] * p["BN"] // 8) % _mma_threads(p) == 0,
                   "the A tile ({BM} x {BK}) and the B tile ({BK} x {BN}) must split into "
                   "16-byte chunks evenly over the 32 * {WARPS_M} * {WARPS_N} threads"),
        # a warp holds (BM / WARPS_M) * (BN / WARPS_N) / 32 accumulators per thread,
        # plus its A fragments and addresses: above 128 of them ptxas runs out of the
        # 255 registers a thread may have
        Constraint(lambda p: p["BM"] * p["BN"] // (p["WARPS_M"] * p["WARPS_N"]) // 32 <= 128,
                   "a warp's region of (BM / WARPS_M) x (BN / WARPS_N) = ({BM} / {WARPS_M}) "
                   "x ({BN} / {WARPS_N}) holds too many accumulators for 255 registers per "
                   "thread: add warps or shrink the tile"),
    ),
    threads=lambda p: (_mma_threads(p), 1, 1),
    grid=lambda p, s: (ceil_div(s[1], p["BN"]), ceil_div(s[0], p["BM"]), 1),
    dynamic_smem=lambda p, lim: _mma_smem(p),
    shape_rule=_mma_rows_rule,
    align=16,
))


# ---------------------------------------------------------------- chapter 15

WGMMA_BN, WGMMA_BK = 128, 64     # the kernel's tile width and depth (15_wgmma.cu)


def _wgmma_smem(p) -> int:
    """STAGES buffers of the A tile (BM x 64) and the B tile (64 x 128), FP16, plus 1024
    bytes to start them on a 1024-byte boundary (the 128-byte swizzle's period)."""
    return p["STAGES"] * (p["BM"] + WGMMA_BN) * WGMMA_BK * 2 + 1024


def _tensor_maps(rows: int):
    """The launcher's extra arguments: the TMA descriptions of A (boxes of `rows` x 64,
    the A tile) and B (boxes of 64 x 64, a quarter or half of the B tile)."""
    def maps(p, A, B, C):
        from gemm_kernels.core import tensor_map
        return (tensor_map.half_matrix(A, rows(p), WGMMA_BK),
                tensor_map.half_matrix(B, WGMMA_BK, 64))
    return maps


register(Kernel(
    name="wgmma_tma", chapter="15",
    title="Hopper: TMA copies into 128-byte-swizzled tiles, wgmma from shared memory",
    source="15_wgmma.cu", entry="hgemm_wgmma", op="hgemm",
    params=(Param("BM", (64, 128), 128, "rows of the C tile per block: one warpgroup of "
                                        "128 threads per 64 rows (the tile is BM x 128)"),
            Param("STAGES", (2, 3, 4), 4, "shared-memory stages (TMA copies in flight)")),
    template=("BM", "STAGES", "LEAD_B", "STRIDE_B"),
    # B's descriptor (MN-major, 128-byte swizzle): 8192 bytes between the tile's two
    # 64-column halves (each 64 rows of 128 bytes), 1024 between groups of 8 rows
    fixed={"LEAD_B": 8192, "STRIDE_B": 1024},
    threads=lambda p: (128 * (p["BM"] // 64), 1, 1),
    grid=lambda p, s: (ceil_div(s[1], WGMMA_BN), ceil_div(s[0], p["BM"]), 1),
    dynamic_smem=lambda p, lim: _wgmma_smem(p),
    shape_rule=_tma_rows_rule,
    align=16,
    features=("cp.async", "wgmma"),      # TMA's copies are cp.async.bulk.tensor
    extra_args=_tensor_maps(lambda p: p["BM"]),
))


def _ws_smem(p) -> int:
    """STAGES buffers of the A tile (64 CONSUMERS x 64) and the B tile (64 x 256), FP16,
    plus 1024 bytes of alignment room."""
    return p["STAGES"] * (64 * p["CONSUMERS"] + 256) * WGMMA_BK * 2 + 1024


_CONSUMERS = Param("CONSUMERS", (1, 2), 2, "consumer warpgroups, 64 rows of the C tile "
                                         "each (the tile is 64 CONSUMERS x 256)")


def _warp_specialised(name: str, title: str, source: str, entry: str, stages: int,
                      group: Param, grid) -> Kernel:
    """Chapter 15's warp-specialised kernels (per tile, persistent, in clusters): one
    producer and CONSUMERS consumer warpgroups, BM x 256 tiles through a ring of STAGES,
    the same shared memory and tensor maps; they differ in the grid and the tile order."""
    return Kernel(
        name=name, chapter="15", title=title, source=source, entry=entry, op="hgemm",
        params=(_CONSUMERS,
                Param("STAGES", (2, 3, 4), stages, "shared-memory stages (TMA copies in "
                                                   "flight)"),
                group),
        template=("CONSUMERS", "STAGES", "GROUP"),
        threads=lambda p: (128 * (p["CONSUMERS"] + 1), 1, 1),
        grid=grid,
        dynamic_smem=lambda p, lim: _ws_smem(p),
        shape_rule=_tma_rows_rule,
        align=16,
        features=("cp.async", "wgmma"),
        extra_args=_tensor_maps(lambda p: 64 * p["CONSUMERS"]),
    )


register(_warp_specialised(
    "wgmma_ws", "Hopper, warp-specialised: a producer warpgroup issues the TMA copies, "
                "consumer warpgroups the wgmma, mbarriers between them",
    "15_wgmma.cu", "hgemm_wgmma_ws", 4,
    Param("GROUP", (1, 8, 16), 1, "blocks walk groups of GROUP tile rows column by column "
                                  "(more L2 hits) instead of row by row"),
    lambda p, s: (ceil_div(s[1], 256), ceil_div(s[0], 64 * p["CONSUMERS"]), 1)))


@functools.lru_cache(maxsize=None)
def _sm_count() -> int | None:
    """The live GPU's SM count; None without one."""
    return device.properties()["sm_count"] if device.is_live() else None


def _one_block_per_sm(p, s):
    """The persistent kernel's grid: one block per SM (one fits: its ring takes most of
    the shared memory), each walking its share of the tiles; fewer where there are fewer
    tiles. Without a live GPU, one block per tile."""
    tiles = ceil_div(s[1], 256) * ceil_div(s[0], 64 * p["CONSUMERS"])
    return (min(tiles, _sm_count() or tiles), 1, 1)


register(_warp_specialised(
    "wgmma_persistent", "Hopper, warp-specialised and persistent: one block per SM walks "
                        "the tiles, the copies of the next tile landing while the consumers "
                        "write C",
    "15_wgmma_persistent.cu", "hgemm_wgmma_persistent", 3,
    Param("GROUP", (1, 8, 16), 16, "tiles walked in groups of GROUP tile rows, column by "
                                   "column, instead of row by row"),
    _one_block_per_sm))

register(_warp_specialised(
    "wgmma_cluster", "Hopper, warp-specialised in clusters of 2 blocks: each copies half of "
                     "the B tile both share and TMA multicasts it into both",
    "15_wgmma_cluster.cu", "hgemm_wgmma_cluster", 3,
    Param("GROUP", (1, 8), 8, "pairs of tile rows walked in groups of GROUP, column by "
                              "column, instead of row by row"),
    # y rounded up to even: the cluster is 2 blocks along y
    lambda p, s: (ceil_div(s[1], 256), 2 * ceil_div(s[0], 128 * p["CONSUMERS"]), 1)))
