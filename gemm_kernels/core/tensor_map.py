"""TMA tensor maps for chapter 15: the driver's description of a matrix that the copy
engine reads (cuTensorMapEncodeTiled), as a 128-byte structure a kernel takes by value.

CuPy does not wrap this driver call, so it is reached through ctypes in the driver
library itself (libcuda, present wherever a GPU runs CUDA). The result is a NumPy
structured scalar aligned to 64 bytes (`cupy.make_aligned_dtype`), which CuPy passes as
a kernel argument of the kernel's `TensorMap` type.
"""
from __future__ import annotations

import ctypes
import functools

# The driver's enumerations (cuda.h: CUtensorMapDataType, ...Swizzle, ...L2promotion,
# ...FloatOOBfill, ...Interleave): the values this package uses.
FLOAT16 = 6
SWIZZLE_128B = 3
L2_PROMOTION_256B = 3
OOB_FILL_ZEROS = 0        # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: outside the matrix, zeros
INTERLEAVE_NONE = 0


@functools.lru_cache(maxsize=None)
def _encode():
    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p,
                   u64p, u32p, u32p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    return fn


def _dtype():
    import cupy
    import numpy as np
    return cupy.make_aligned_dtype(np.dtype([("bytes", np.uint64, (16,))]), alignment=64)


def half_matrix(array, box_rows: int, box_cols: int):
    """The tensor map of a row-major FP16 CuPy matrix whose copies move boxes of
    box_rows x box_cols elements, written to shared memory in the 128-byte swizzle (so
    box_cols * 2 must be at most 128 bytes), with zeros where a box leaves the matrix.
    RuntimeError with the driver's code when the driver refuses it (e.g. a row stride
    that is not a multiple of 16 bytes)."""
    import numpy as np
    rows, cols = array.shape
    # the driver writes a CUtensorMap, which is 64-byte aligned: a buffer with room to
    # align it, copied into the argument afterwards
    raw = np.zeros(128 + 64, dtype=np.uint8)
    at = -raw.ctypes.data % 64
    dims = (ctypes.c_uint64 * 2)(cols, rows)                   # innermost first
    strides = (ctypes.c_uint64 * 1)(array.strides[0])          # bytes between rows
    box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    steps = (ctypes.c_uint32 * 2)(1, 1)
    err = _encode()(raw.ctypes.data + at, FLOAT16, 2, array.data.ptr, dims, strides, box, steps,
                    INTERLEAVE_NONE, SWIZZLE_128B, L2_PROMOTION_256B, OOB_FILL_ZEROS)
    if err:
        raise RuntimeError(f"cuTensorMapEncodeTiled refused a {rows} x {cols} FP16 matrix "
                           f"with {box_rows} x {box_cols} boxes: CUDA driver error {err}")
    return raw[at:at + 128].view(_dtype())[0]
