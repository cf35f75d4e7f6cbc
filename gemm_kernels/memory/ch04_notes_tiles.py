"""The course notes' shared-memory kernels, emulated on the CPU: what their tile loads put in
shared memory and what they compute, next to the corrected index expressions.

The notes' kernels (matmulShared, matmulBankOpt, matmulBankOpt2) load their tiles with

    i = threadIdx.y + blockIdx.y * blockDim.y      (row of C)
    j = threadIdx.x + blockIdx.x * blockDim.x      (column of C)
    shareA[..] = A[i * M + k];    shareB[..] = B[k * N + j];    k = 0, BLOCK, 2*BLOCK, ...

Two mistakes: the row stride of A (M x K, row-major) is K, not M; and neither index
contains threadIdx.x (for A) or threadIdx.y (for B), so every thread of a tile row
copies the same element A[i][k] and every thread of a tile column the same B[k][j]:
the tiles hold one column of A and one row of B, repeated. The corrected loads are

    A[i * K + (k + threadIdx.x)]      (the element m = threadIdx.y, k = threadIdx.x)
    B[(k + threadIdx.y) * N + j]      (the element k = threadIdx.y, n = threadIdx.x)

This module evaluates both thread by thread for small matrices. version="published"
runs the kernels exactly as the notes publish them (layout "conflict": matmulShared;
"transposed": matmulBankOpt, whose padded twin matmulBankOpt2 computes the same);
version="corrected" runs `bank_layout`'s index expressions with the same two layouts.
"""
from __future__ import annotations

import numpy as np

VERSIONS = ("published", "corrected")
LAYOUTS = ("conflict", "transposed")


def _check(version, layout):
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def tile_sources(version: str, M: int, N: int, K: int, BLOCK: int, block=(0, 0),
                 k0: int = 0) -> dict:
    """For block (bx, by) at step k0: {"A": grid, "B": grid}, grid[ty][tx] = the flat
    index into A (or B) that thread (tx, ty) copies into shared memory."""
    _check(version, "conflict")
    bx, by = block
    ty, tx = np.meshgrid(np.arange(BLOCK), np.arange(BLOCK), indexing="ij")
    i, j = by * BLOCK + ty, bx * BLOCK + tx
    if version == "published":
        a, b = i * M + k0, k0 * N + j
    else:
        a, b = i * K + (k0 + tx), (k0 + ty) * N + j
    return {"A": a, "B": b}


def label(flat, cols: int, name: str) -> np.ndarray:
    """'A[r][c]' strings for a grid of flat indices into a matrix with `cols` columns."""
    f = np.vectorize(lambda x: f"{name}[{x // cols}][{x % cols}]")
    return f(flat)


def emulate(A, B, BLOCK: int, version: str = "corrected", layout: str = "conflict"):
    """C = A @ B computed the way the kernel does, block by block and thread by thread.
    Needs M, N, K multiples of BLOCK (the published kernels' loads have no bounds
    handling)."""
    _check(version, layout)
    A, B = np.asarray(A, float), np.asarray(B, float)
    M, K = A.shape
    K2, N = B.shape
    if K2 != K:
        raise ValueError(f"A is {M}x{K} but B is {K2}x{N}")
    if M % BLOCK or N % BLOCK or K % BLOCK:
        raise ValueError("M, N and K must be multiples of BLOCK for this emulation")
    a, b = A.ravel(), B.ravel()
    C = np.zeros((M, N))
    ty, tx = np.meshgrid(np.arange(BLOCK), np.arange(BLOCK), indexing="ij")
    for by in range(M // BLOCK):
        for bx in range(N // BLOCK):
            acc = np.zeros((BLOCK, BLOCK))
            for k0 in range(0, K, BLOCK):
                src = tile_sources(version, M, N, K, BLOCK, (bx, by), k0)
                va = a[np.clip(src["A"], 0, a.size - 1)]   # the published loads can read past A
                vb = b[np.clip(src["B"], 0, b.size - 1)]
                sA, sB = np.zeros((BLOCK, BLOCK)), np.zeros((BLOCK, BLOCK))
                if version == "published" and layout == "conflict":  # matmulShared, literally
                    sA[tx, ty], sB[ty, tx] = va, vb          # shareA[bi][bj], shareB[bj][bi]
                    acc += np.einsum("xk,yk->yx", sA, sB)    # shareA[bi][in] * shareB[bj][in]
                elif version == "published":                 # matmulBankOpt(2), literally
                    sA[ty, tx], sB[tx, ty] = va, vb          # shareA[bj][bi], shareB[bi][bj]
                    acc += np.einsum("kx,ky->yx", sA, sB)    # shareA[in][bi] * shareB[in][bj]
                elif layout == "conflict":    # sA[m][k] = a(m=ty, k=tx), sB[n][k] = b(k=ty, n=tx)
                    sA[ty, tx], sB[tx, ty] = va, vb
                    acc += np.einsum("yk,xk->yx", sA, sB)    # sA[ty][k] * sB[tx][k]
                else:                         # sA[k][m], sB[k][n]
                    sA[tx, ty], sB[ty, tx] = va, vb
                    acc += np.einsum("ky,kx->yx", sA, sB)    # sA[k][ty] * sB[k][tx]
            C[by * BLOCK:(by + 1) * BLOCK, bx * BLOCK:(bx + 1) * BLOCK] = acc
    return C
