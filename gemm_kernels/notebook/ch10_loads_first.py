"""Chapter 10's closing experiment: the lesson of its copies (send every load before the
first store) applied to its best transpose, `transpose_padded` with two tiles per block.

Two variants of it, timed in one run beside the device copy at the chapter's two shapes
(`timed_variants`): the text as built, under its own name, and the text with the load loop
split in two, every load of a thread into registers first, then the shared stores. The
text as built runs under its own name so that timing it never replaces the registry
kernel's rows, which the chapter's other tables compare within their own runs.
"""
from __future__ import annotations

import functools

from gemm_kernels.core.launch import kernel_of
from gemm_kernels.core.source_edits import apply

KERNEL = "transpose_padded"
AS_BUILT = "transpose_padded: as built, timed beside every-load-first"
LOADS_FIRST = "transpose_padded: every load first"
# The registry's defaults (TILE 32, ROWS 8, two tiles per block, x->row): a thread moves
# TILE / ROWS * STACK = 8 elements, so the split kernel has 8 loads in flight per thread.
PARAMS = {"T": "float"}

_HEADER = ("// Chapter 10: matrix transpose, a kernel that only moves data.\n",
           "// Chapter 10, closing experiment: transpose_padded below with its load loop split\n"
           "// in two, every load of a thread first (into registers), then the shared stores.\n"
           "//\n"
           "// Chapter 10: matrix transpose, a kernel that only moves data.\n")

_LOOP = """    for (int dy = 0; dy < TILE; dy += ROWS) {
#pragma unroll
        for (int s = 0; s < STACK; ++s) {              // row y of tile s
            const int y = s * TILE + threadIdx.y + dy;
            if (row0 + y < rows && col0 + tx < cols)
                tile[y][tx] = in[(size_t)(row0 + y) * cols + col0 + tx];
        }
    }
"""

# Both loops are unrolled, so v lives in registers; an element outside the matrix is
# neither loaded nor stored, so its register is never read.
_SPLIT = """    T v[TILE / ROWS][STACK];                          // every load first ...
#pragma unroll
    for (int i = 0; i < TILE / ROWS; ++i) {
#pragma unroll
        for (int s = 0; s < STACK; ++s) {
            const int y = s * TILE + threadIdx.y + i * ROWS;
            if (row0 + y < rows && col0 + tx < cols)
                v[i][s] = in[(size_t)(row0 + y) * cols + col0 + tx];
        }
    }
#pragma unroll
    for (int i = 0; i < TILE / ROWS; ++i) {           // ... then the shared stores
#pragma unroll
        for (int s = 0; s < STACK; ++s) {
            const int y = s * TILE + threadIdx.y + i * ROWS;
            if (row0 + y < rows && col0 + tx < cols)
                tile[y][tx] = v[i][s];
        }
    }
"""

EDITS = (_HEADER, (_LOOP, _SPLIT))


@functools.lru_cache(maxsize=None)
def loads_first_kernel():
    """`transpose_padded` around the edited text (its tunables, grid and checks unchanged)."""
    k = kernel_of(KERNEL)
    return k.with_code(apply(k.source_text(), EDITS, f"{LOADS_FIRST} ({k.source})"),
                       name=LOADS_FIRST, source=k.source)


@functools.lru_cache(maxsize=None)
def as_built_kernel():
    """`transpose_padded`'s own text under another name (its rows never replace the
    registry kernel's)."""
    k = kernel_of(KERNEL)
    return k.with_code(k.source_text(), name=AS_BUILT, source=k.source)


def _register_variants():
    """Both texts become variants that a study's step may name (`ch10_loads_first`, the
    profile of the two), by the names their rows carry."""
    from gemm_kernels.measure import studies
    studies.register_variant(LOADS_FIRST, loads_first_kernel)
    studies.register_variant(AS_BUILT, as_built_kernel)


_register_variants()
