"""Waves: how many blocks a GPU runs at once, and how many rounds a grid takes.

A grid of B blocks on a GPU whose SMs each hold `per_sm` of them runs in
ceil(B / (SMs * per_sm)) waves; the last one is partly empty unless B divides evenly.
"""
from __future__ import annotations

from gemm_kernels.core.analysis import occupancy
from gemm_kernels.core.registry import ceil_div


def tiles(shape, BM: int, BN: int) -> int:
    """Tiles of C (BM x BN) a GEMM of `shape` (M, N, K) has: one block each."""
    M, N, _ = shape
    return ceil_div(M, BM) * ceil_div(N, BN)


def per_sm(threads: int, registers: int, smem: int, limits: dict) -> int:
    """Resident blocks per SM (registers per thread as ptxas allocated them)."""
    return occupancy(threads, registers, smem, limits).blocks_per_sm


def waves(blocks: int, slots: int) -> int:
    """Rounds of `slots` blocks (SMs x blocks per SM) that `blocks` blocks take."""
    return ceil_div(blocks, slots)


def filled(blocks: int, slots: int) -> float:
    """The share of the block slots that the waves keep busy: 1.0 when `blocks` is a
    multiple of `slots`, 0.51 for one block more than a full wave... (wave
    quantisation)."""
    return blocks / (waves(blocks, slots) * slots)
