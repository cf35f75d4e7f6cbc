"""Chapter 02's static check: the student's coalesced mapping covers C once and keeps a
warp's loads as few lines wide as the chapter's mapping, all without a GPU.

The student writes `row` and `col` of thread `threadIdx.x` inside the block's tile. The
check runs the kernel's statements before `if (row < M && col < N)` (the given tile
coordinates, then what the student wrote) for every thread of the grid:

* on a C of 37 x 21 (ragged for every block size), at BLOCK = 8, 16 and 32 and both
  block orders (GRID), every element of C must be computed by exactly one thread;
* at BLOCK = 8, 16 and 32, the 32 lanes of each warp of block (0, 0) load A[row][k] and
  B[k][col] at k = 0 of a 4096^3 problem: the 32-byte sectors and 128-byte lines these
  two loads touch (`ch01_02_sectors`, the model of the chapter) must be no more than the
  chapter's mapping touches. Lanes that run down a column of C instead of along a row
  compute the right numbers but touch 33 lines per step instead of 2 at BLOCK = 32.
  The task asks for the fewest lines (the L1's cost, one cycle per line): a warp on 2 rows
  of 16 columns touches fewer sectors (4) but more lines (3) and is refused, saying why.
"""
from __future__ import annotations

import re

from gemm_kernels.core.kernels import get as get_kernel
from gemm_kernels.exercises.ch01_02_cstatements import (Unsupported, cells_text, readable,
                                                        thread_names)
from gemm_kernels.exercises.cexpr import code_only
from gemm_kernels.exercises.stubs import stub_lines
from gemm_kernels.memory.ch01_02_sectors import lines, sectors

KERNEL, ENTRY = "coalesced", "sgemm_coalesced"
SHAPE = (37, 21)
BLOCKS = (8, 16, 32)
MODEL = 4096                       # the chapter's model: M = N = K = 4096
GRIDS = {1: "x->row", 0: "x->col"}


def _grid(block: int, grid_value: int, M: int, N: int) -> tuple[int, int]:
    kern = get_kernel(KERNEL)
    p = kern.resolve({"BLOCK": block, "GRID": GRIDS[grid_value]})
    gx, gy, _ = kern.grid(p, (M, N, 1))
    return gx, gy


def _block(run, names, block: int, grid_value: int, M: int, N: int, bx: int, by: int):
    """[(row, col)] of the threads of block (bx, by), in threadIdx.x order."""
    gx, gy = _grid(block, grid_value, M, N)
    values = dict(zip(names, (block, grid_value)))
    out = []
    for t in range(block * block):
        env = {**values, "M": M, "N": N, "K": 1,
               **thread_names((bx, by, 0), (t, 0, 0), (block * block, 1, 1), (gx, gy, 1))}
        res = run(env)
        out.append((res.get("row"), res.get("col")))
    return out


def _run_grid(run, names, block: int, grid_value: int, M: int, N: int):
    """{(row, col): [(block, thread)]} of the elements inside C, over the whole grid."""
    gx, gy = _grid(block, grid_value, M, N)
    owners = {}
    for bx in range(gx):
        for by in range(gy):
            for t, rc in enumerate(_block(run, names, block, grid_value, M, N, bx, by)):
                if rc[0] is not None and 0 <= rc[0] < M and 0 <= rc[1] < N:
                    owners.setdefault(rc, []).append(((bx, by), t))
    return owners


def warp_cost(elements, n: int = MODEL, k: int = MODEL) -> tuple[int, int]:
    """(sectors, lines) that the loads of A[row][0] and B[0][col] of the lanes at
    `elements` ((row, col) each) touch, with A n x k and B k x n, row-major."""
    a = [r * k for r, _ in elements]
    b = [c for _, c in elements]
    return sectors(a) + sectors(b), lines(a) + lines(b)


def _fixed_32(source: str, block: int) -> str:
    """A mapping that fails at a BLOCK other than 32 and writes the number 32 in its code
    most often divides by a fixed 32 where BLOCK belongs: say so."""
    if block != 32 and re.search(r"\b32\b", code_only(source)):
        return ". Does your mapping use BLOCK, or a fixed 32?"
    return ""


def _lanes_message(block: int, w: int, lanes, want, mine, best) -> str:
    """What a warp that touches more lines than the chapter's mapping costs. The task asks
    for the fewest 128-byte lines; a mapping that saves sectors but adds a line (2 rows x
    16 columns: 4 sectors in 3 lines, against 5 in 2) hears why sectors are not enough."""
    (s, n), (s0, n0) = mine, best
    head = (f"at BLOCK = {block}, warp {w} of block (0, 0) computes {cells_text(lanes)} of C: "
            f"at each k its loads of A and B touch {s} sectors in {n} lines of 128 bytes, "
            f"against {s0} sectors in {n0} lines when consecutive threads take consecutive "
            f"columns ({cells_text(want)}). The numbers come out right, but ")
    if s <= s0:
        return head + (f"the extra line{'s' * (n - n0 > 1)} cost{'s' * (n - n0 == 1)} "
                       "more than the fewer sectors save: the L1 spends one cycle on every "
                       "128-byte line a warp's load touches, however few of its sectors it "
                       "uses. The task asks for the fewest lines, and a warp touches a line "
                       "of A for every row of C it spans")
    return head + "every load costs more: the lanes of a warp must run along a row of the tile"


def coalesced_check(source: str) -> list[str]:
    """The static check of exercise 02_coalesced: problems, empty when the mapping covers
    C once and no warp's loads touch more lines than the chapter's mapping."""
    if stub_lines(source):
        return []
    found = readable(source, ENTRY)
    if found is None:
        return []
    run, names = found
    M, N = SHAPE
    for block in BLOCKS:
        for grid_value in (1, 0):
            try:
                owners = _run_grid(run, names, block, grid_value, M, N)
            except Unsupported:
                return []
            at = f"at BLOCK = {block} and {names[1]} = {grid_value}, on a {M} x {N} C"
            twice = next(((rc, ts) for rc, ts in owners.items() if len(ts) > 1), None)
            if twice:
                (r, c), ((b0, t0), (b1, t1)) = twice[0], twice[1][:2]
                fixed = _fixed_32(source, block)
                if b0 != b1 and not fixed:     # two blocks on one element: the offset
                    return [f"{at}, thread {t0} of block {b0} and thread {t1} of block "
                            f"{b1} both compute C[{r}][{c}]: two blocks compute the same "
                            "element. Do row and col add the tile's offset (tile_row * "
                            "BLOCK, tile_col * BLOCK)?"]
                who = (f"threads {t0} and {t1} of block {b0}" if b0 == b1 else
                       f"thread {t0} of block {b0} and thread {t1} of block {b1}")
                return [f"{at}, {who} both compute C[{r}][{c}]: each of the "
                        f"{block * block} threads needs its own element of the "
                        f"{block} x {block} tile{fixed}"]
            missing = [(r, c) for r in range(M) for c in range(N) if (r, c) not in owners]
            if missing:
                r, c = missing[0]
                head = (f"{at}, {len(missing):,} of its {M * N:,} elements are computed "
                        f"by no thread (C[{r}][{c}] for one)")
                other = 1 - grid_value
                if len(_run_grid(run, names, block, other, M, N)) == M * N:
                    return [f"{head}. {names[1]} = {grid_value} numbers the blocks the "
                            f"other way round from {names[1]} = {other}, with which your "
                            "lines compute every element: take the tile from tile_row and "
                            "tile_col, not from blockIdx, and both orders work"]
                return [f"{head}: the tile's rows start at tile_row * BLOCK and its columns "
                        f"at tile_col * BLOCK, and the {block * block} threads must take all "
                        f"{block} x {block} places{_fixed_32(source, block)}"]
    # the lanes: what each warp of block (0, 0) loads, against the chapter's mapping
    for block in sorted(BLOCKS, reverse=True):
        try:
            first = _block(run, names, block, 1, MODEL, MODEL, 0, 0)
        except Unsupported:
            return []
        for w in range(block * block // 32):
            lanes = first[32 * w:32 * w + 32]
            want = [(t // block, t % block) for t in range(32 * w, 32 * w + 32)]
            (s, n), (s0, n0) = warp_cost(lanes), warp_cost(want)
            if n > n0 or s > s0:
                return [_lanes_message(block, w, lanes, want, (s, n), (s0, n0))]
    return []
