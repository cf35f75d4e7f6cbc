"""Chapter 03's tile copies and tile reads, lane by lane, priced without a GPU.

A block of `smem_tiled` is BLOCK x BLOCK threads; warp w holds threads 32w .. 32w+31,
threadIdx.x fastest (at BLOCK = 32 a warp is one row of threads, ty fixed). At every step
along K each thread copies one element of A and one of B into the tiles As and Bs, and
then reads a row of As and a column of Bs. Which element a thread copies is a choice:
this module prices a choice, given as functions of (tx, ty), the way chapters 02 and 04
price accesses:

* a warp's global load: the 32-byte sectors its 32 lanes touch, next to the fewest that
  hold the same bytes (4 for 32 different floats in a row, 1 for a broadcast);
* a warp's shared-memory store or load: its wavefronts (`banks.analyse`), next to the
  ideal (1 for a 32-bit access without a bank conflict).

`mappings()` gives the chapter's own choice ("as written": threadIdx.x along the rows of
C and of both tiles) and the one with threadIdx.x and threadIdx.y swapped; `price` sums
one step of one warp for either. The exercise's static check (`exercises.ch03_checks`)
prices a student's copy with the same functions.

`copy_bug` shows a common indexing mistake thread by thread: the copy
`As[ty][tx] = A[row * K + k0]` (and `Bs[ty][tx] = B[k0 * N + col]`) has no tx (no ty)
in its index, so all threads of a row of the block copy the same element.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from gemm_kernels.memory import banks

WARP = 32
SECTOR = 32          # bytes: the unit the L1 and L2 move
FLOAT = 4


# ------------------------------------------------------------------ pricing

def lanes(block: int, warp: int) -> list[tuple[int, int]]:
    """(tx, ty) of the 32 lanes of `warp` in a BLOCK x BLOCK block (BLOCK * BLOCK must be
    a multiple of 32: BLOCK = 8, 16 or 32)."""
    if block * block % WARP:
        raise ValueError(f"BLOCK={block}: a block of {block * block} threads is not a "
                         "whole number of warps")
    return [((warp * WARP + lane) % block, (warp * WARP + lane) // block)
            for lane in range(WARP)]


def sectors(indices) -> tuple[int, int]:
    """(32-byte sectors a warp's float loads at these element indices touch, the fewest
    sectors that could hold the same distinct floats)."""
    distinct = set(indices)
    return len({FLOAT * i // SECTOR for i in distinct}), -(-len(distinct) * FLOAT // SECTOR)


def wavefronts(words, width_words: int = 1) -> tuple[int, int]:
    """(wavefronts, ideal) of a warp's shared-memory access at these 4-byte word
    offsets, `width_words` words per lane."""
    a = banks.analyse(banks.words_to_bytes(list(words)), FLOAT * width_words)
    return a.wavefronts, a.ideal


@dataclass(frozen=True)
class Mapping:
    """Which element of A and of B thread (tx, ty) copies, where it stores them, and what
    it reads in the products, as functions of (tx, ty) (and k for the reads). Element
    (r, c) of a tile is row r, column c of the tile; the A tile is A[row0 + r][k0 + c],
    the B tile B[k0 + r][col0 + c]; `row` is the tile's row length in words."""
    name: str
    copy_a: Callable[[int, int], tuple[int, int]]     # (tx, ty) -> (r, c) of the A tile
    copy_b: Callable[[int, int], tuple[int, int]]
    read_a: Callable[[int, int, int], tuple[int, int]]  # (tx, ty, k) -> (r, c) of As
    read_b: Callable[[int, int, int], tuple[int, int]]


def mappings() -> dict[str, Mapping]:
    """The chapter's mapping and the swapped one (threadIdx.x down the rows of C)."""
    return {
        "as written": Mapping("as written", lambda tx, ty: (ty, tx), lambda tx, ty: (ty, tx),
                              lambda tx, ty, k: (ty, k), lambda tx, ty, k: (k, tx)),
        "swapped": Mapping("swapped", lambda tx, ty: (tx, ty), lambda tx, ty: (tx, ty),
                           lambda tx, ty, k: (tx, k), lambda tx, ty, k: (k, ty)),
    }


def price(mapping: Mapping, block: int = 32, K: int = 4096, N: int = 4096,
          warp: int = 0, a_width: int = 4) -> dict:
    """One warp, one step along K: per access, (cost, ideal). Global loads in sectors
    (A is M x K, B is K x N, row-major), shared accesses in wavefronts. The reads of A
    are priced `a_width` values of k per load (4: the LDS.128 ptxas emits for As[ty][k]
    when one thread reads consecutive words; 1: a plain LDS), those of B one per load.
    Also the totals: 'global sectors', 'wavefronts' (per step: stores + reads)."""
    ls = lanes(block, warp)
    out = {}
    for name, copy, stride in (("load A", mapping.copy_a, K), ("load B", mapping.copy_b, N)):
        out[name] = sectors([r * stride + c for r, c in (copy(tx, ty) for tx, ty in ls)])
    for name, copy in (("store As", mapping.copy_a), ("store Bs", mapping.copy_b)):
        out[name] = wavefronts([r * block + c for r, c in (copy(tx, ty) for tx, ty in ls)])
    # A read of As merges a_width values of k only where one lane's k, k+1, ... are
    # consecutive words (As[.][k]); down a column (As[k][.]) they stay 32-bit.
    a_along_row = all(mapping.read_a(tx, ty, 1)[1] == mapping.read_a(tx, ty, 0)[1] + 1
                      for tx, ty in ls)
    wa = a_width if a_along_row else 1
    ra = [wavefronts([(r * block + c) for r, c in (mapping.read_a(tx, ty, k) for tx, ty in ls)], wa)
          for k in range(0, block, wa)]
    rb = [wavefronts([(r * block + c) for r, c in (mapping.read_b(tx, ty, k) for tx, ty in ls)])
          for k in range(block)]
    out["read As"] = (sum(w for w, _ in ra), sum(i for _, i in ra))
    out["read Bs"] = (sum(w for w, _ in rb), sum(i for _, i in rb))
    out["A reads per load"] = wa
    out["global sectors"] = out["load A"][0] + out["load B"][0]
    out["wavefronts"] = sum(out[k][0] for k in ("store As", "store Bs", "read As", "read Bs"))
    return out


def global_lines(block: int, K: int = 4096, N: int = 4096, warp: int = 0) -> int:
    """The 128-byte lines one warp's two copy loads (A[row][k0 + tx], B[k0 + ty][col])
    touch per step, with the tiles aligned to lines: chapter 02's count of L1 data-pipe
    wavefronts for global loads (one per line). A block of BLOCK^2 < 32 threads fills only
    that many lanes of its warp."""
    from gemm_kernels.memory.ch01_02_sectors import lines
    threads = range(warp * WARP, min((warp + 1) * WARP, block * block))
    pairs = [(t % block, t // block) for t in threads]          # (tx, ty)
    return (lines([ty * K + tx for tx, ty in pairs])
            + lines([ty * N + tx for tx, ty in pairs]))


# ------------------------------------------------------------------ the copy bug

VERSIONS = ("buggy", "correct")


def copy_sources(version: str, M: int, N: int, K: int, BLOCK: int, block=(0, 0),
                 k0: int = 0) -> dict:
    """For block (bx, by) at the step starting at k0: {"A": grid, "B": grid} where
    grid[ty][tx] is the flat index into A (or B) that thread (tx, ty) copies.
    "buggy": A[row * K + k0] and B[k0 * N + col]; "correct": A[row * K + k0 + tx] and
    B[(k0 + ty) * N + col]. row = by * BLOCK + ty, col = bx * BLOCK + tx."""
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
    bx, by = block
    ty, tx = np.meshgrid(np.arange(BLOCK), np.arange(BLOCK), indexing="ij")
    row, col = by * BLOCK + ty, bx * BLOCK + tx
    if version == "buggy":
        return {"A": row * K + k0, "B": k0 * N + col}
    return {"A": row * K + k0 + tx, "B": (k0 + ty) * N + col}


def emulate(A, B, BLOCK: int, version: str = "correct"):
    """C = A @ B computed tile by tile as the kernel does, with the copies of `version`
    (M, N, K multiples of BLOCK)."""
    A, B = np.asarray(A, float), np.asarray(B, float)
    M, K = A.shape
    K2, N = B.shape
    if K2 != K:
        raise ValueError(f"A is {M}x{K} but B is {K2}x{N}")
    if M % BLOCK or N % BLOCK or K % BLOCK:
        raise ValueError("M, N and K must be multiples of BLOCK for this emulation")
    a, b = A.ravel(), B.ravel()
    C = np.zeros((M, N))
    for by in range(M // BLOCK):
        for bx in range(N // BLOCK):
            acc = np.zeros((BLOCK, BLOCK))
            for k0 in range(0, K, BLOCK):
                src = copy_sources(version, M, N, K, BLOCK, (bx, by), k0)
                acc += a[src["A"]] @ b[src["B"]]     # As[ty][k] * Bs[k][tx], summed over k
            C[by * BLOCK:(by + 1) * BLOCK, bx * BLOCK:(bx + 1) * BLOCK] = acc
    return C


def copy_bug(M: int = 8, N: int = 8, K: int = 8, BLOCK: int = 4, block=(1, 1), k0: int = 4,
             seed: int = 0) -> dict:
    """The copy bug on small random matrices: per version, the tiles of block `block` at
    step k0 as 'A[r][c]' labels, whether C equals A @ B, how many elements of C differ
    from A @ B (of M * N), and how many different values the block's tile of C holds."""
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    out = {}
    bx, by = block
    for version in VERSIONS:
        src = copy_sources(version, M, N, K, BLOCK, block, k0)
        C = emulate(A, B, BLOCK, version)
        tile = C[by * BLOCK:(by + 1) * BLOCK, bx * BLOCK:(bx + 1) * BLOCK]
        out[version] = {
            "As": [[f"A[{i // K}][{i % K}]" for i in r] for r in src["A"]],
            "Bs": [[f"B[{i // N}][{i % N}]" for i in r] for r in src["B"]],
            "right": bool(np.allclose(C, A @ B)),
            "wrong elements": int(np.count_nonzero(~np.isclose(C, A @ B))),
            "distinct A elements": len(np.unique(src["A"])),
            "tile values": len(np.unique(tile.round(12)))}
    return out
