"""Chapter 01's indexing mistake, run through the series' checker without a GPU.

The naive kernel's index expressions evaluated thread by thread in NumPy, on flat
row-major buffers laid out as the GPU check lays them out: C poisoned with NaN and
followed by a guard region, A followed by NaN (what a read past its end finds is
undefined on a GPU; NaN makes such a read show up in the result). The outcome goes
through the same element-wise comparison (`measure.check.compare_gemm`) that judges
every kernel on the GPU.
"""
from __future__ import annotations

STRIDES = ("M", "N", "K")


def naive_on_cpu(A, B, a_stride: str = "K", c_stride: str = "N"):
    """(C, reads past A, writes past C, never written) for C[row*c_stride + col] = sum
    over k of A[row*a_stride + k] * B[k*N + col], one (row, col) per thread of an M x N
    grid; a_stride and c_stride name the dimension used as the row stride ("M", "N" or
    "K"). Where two threads write one element the later one (row-major order) wins.
    "Never written" counts the elements of C no thread stores to: a NaN in C is either
    one of those or a NaN a thread wrote after reading past A."""
    import numpy as np
    from gemm_kernels.measure.check import guard_length
    (M, K), N = A.shape, B.shape[1]
    dims = {"M": M, "N": N, "K": K}
    if a_stride not in dims or c_stride not in dims:
        raise ValueError(f"a row stride is one of {', '.join(STRIDES)}")
    row, col = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")
    a_idx = row[..., None] * dims[a_stride] + np.arange(K)
    a = np.concatenate([A.ravel(), np.full(max(0, a_idx.max() + 1 - A.size), np.nan)])
    acc = np.einsum("ijk,kj->ij", a[a_idx], B.astype(np.float64))
    guard = guard_length(N)
    out = np.full(M * N + guard, np.nan)
    c_idx = (row * dims[c_stride] + col).ravel()
    inside = c_idx < out.size            # further out than the guard: not seen at all
    out[c_idx[inside]] = acc.ravel()[inside]
    written = np.zeros(M * N, dtype=bool)
    written[c_idx[c_idx < M * N]] = True
    return (out[:M * N].reshape(M, N), int((a_idx >= A.size).any(axis=2).sum()),
            int((c_idx >= M * N).sum()), int((~written).sum()))


def check_table(shapes, a_stride: str = "M", c_stride: str = "M", seed: int = 0):
    """Per shape (M, N, K): the naive kernel with the given row strides, on random normal
    inputs, judged by the checker. Every element of C falls in exactly one of four columns
    (they add up to the elements of C): right; wrong, its thread having read only inside
    A; wrong, its thread having read past A (NaN here, whatever memory follows A on a
    GPU); never written. Then the threads that write past C, and the checker's verdict."""
    import numpy as np
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure.check import compare_gemm
    rng = np.random.default_rng(seed)
    rows = []
    for M, N, K in shapes:
        A = rng.standard_normal((M, K)).astype(np.float32)
        B = rng.standard_normal((K, N)).astype(np.float32)
        C, _, write_past, unwritten = naive_on_cpu(A, B, a_stride, c_stride)
        v = compare_gemm(C.astype(np.float32), A, B)
        # a NaN in C is either never written or written after a read past A (the only
        # NaN the inputs hold); every other wrong element read inside A
        rows.append({"M x N x K": f"{M} x {N} x {K}",
                     "elements of C": f"{M * N:,}",
                     "right": f"{M * N - v.bad:,}",
                     "wrong, read inside A": f"{v.bad - v.nan:,}",
                     "wrong, read past A": f"{v.nan - unwritten:,}",
                     "never written": f"{unwritten:,}",
                     "threads writing past C": f"{write_past:,}",
                     "checker": "pass" if v.ok else "FAIL"})
    return Table(rows, list(rows[0]), title=f"A[row * {a_stride} + k], "
                 f"C[row * {c_stride} + col], judged element by element against float64: "
                 "each element of C in one of the four middle columns")
