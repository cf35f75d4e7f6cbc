"""Chapter 11's static check: the 64-bit bank model on the student's double tiles.

The student stages the tiles `A_shared` and `B_shared` (doubles) and writes the inner
loop that reads them. The check finds every `A_shared[..][..]` and `B_shared[..][..]` in
the code (comments aside), evaluates both indices for every lane of every warp of the
BLOCK x BLOCK block and every `k` of the inner loop, with the row length read from the
tile's declaration, and prices each warp instruction with the bank model at width 8: two
half-warp phases of 16 lanes x 8 bytes.

The bound is one wavefront per half-warp. When lanes i and i ^ 1 read the same double the
model merges the two half-warps into one phase, and two different doubles 128 bytes apart
then show up as a 2-way conflict of that phase: 2 wavefronts, the same as the two phases
unmerged (`A_shared[ty][k]` with BLOCK = 16 is that case). Merging can only save a
wavefront, so an access costing more than one per half-warp is the only real conflict.
"""
from __future__ import annotations

import re

from gemm_kernels.exercises.cexpr import code_only, compile_expression, evaluate
from gemm_kernels.exercises.stubs import stub_lines
from gemm_kernels.memory import banks

WIDTH = 8                                     # a double: one 64-bit shared access
BOUND = 2                                     # one wavefront per half-warp
TILES = ("A_shared", "B_shared")
NAMES = ("threadIdx.x", "threadIdx.y", "k", "BLOCK")

_DECL = re.compile(r"__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?double\s+"
                   r"(A_shared|B_shared)\s*\[([^\[\]]*)\]\s*\[([^\[\]]*)\]\s*;")
_ACCESS = re.compile(r"\b(A_shared|B_shared)\s*\[([^\[\]]+)\]\s*\[([^\[\]]+)\]")
_STORE = re.compile(r"\s*=(?!=)")


def warp_addresses(row_tree, col_tree, pitch: int, block: int, warp: int, k: int) -> list[int]:
    """Byte offsets of [row][col] in a tile of doubles whose rows are `pitch` long, for the
    32 lanes of `warp` (thread (l % BLOCK, l // BLOCK) of the block for lane l)."""
    out = []
    for lane in range(banks.WARP):
        t = warp * banks.WARP + lane
        names = {"threadIdx.x": t % block, "threadIdx.y": t // block, "k": k, "BLOCK": block}
        r, c = row_tree(names), col_tree(names)
        if r < 0 or c < 0:
            raise ValueError(f"index [{r}][{c}] for thread ({t % block}, {t // block})")
        out.append((r * pitch + c) * WIDTH)
    return out


def worst_access(row: str, col: str, pitch: int, block: int):
    """The costliest warp instruction of an access [row][col] (over the warps of the
    block and the k of the inner loop): its analysis."""
    row_tree, col_tree = compile_expression(row, NAMES), compile_expression(col, NAMES)
    return max((banks.analyse(warp_addresses(row_tree, col_tree, pitch, block, warp, k), WIDTH)
                for warp in range(block * block // banks.WARP) for k in range(block)),
               key=lambda a: a.wavefronts)


def tiles_64bit(block: int):
    """The static check of the 64-bit tile exercise with BLOCK = `block`: a callable
    source -> problems."""

    def check(source: str) -> list[str]:
        code = code_only(source)
        names = {"BLOCK": block}
        pitch = {}
        for tile, _, length in _DECL.findall(code):
            try:
                pitch[tile] = evaluate(length, names)
            except ValueError as e:
                return [f"cannot read the row length `{length.strip()}` of {tile}: {e}"]
        missing = [t for t in TILES if t not in pitch]
        if missing:
            return [f"no declaration `__shared__ double {missing[0]}[..][..];` found "
                    "(the bank check reads the row length from it)"]
        declarations = [d.span() for d in _DECL.finditer(code)]
        problems, seen = [], set()
        for m in _ACCESS.finditer(code):
            if any(s <= m.start() < e for s, e in declarations):
                continue
            tile, row, col = m.group(1), m.group(2).strip(), m.group(3).strip()
            seen.add(tile)
            store = bool(_STORE.match(code, m.end()))
            what = f"{'the store to' if store else 'the read of'} {tile}[{row}][{col}]"
            try:
                a = worst_access(row, col, pitch[tile], block)
            except ValueError as e:
                problems.append(f"cannot evaluate {what} (write the indices with "
                                f"{', '.join(NAMES)}): {e}")
                continue
            if a.wavefronts > BOUND:
                problems.append(
                    f"{what} costs {a.wavefronts} wavefronts per warp instead of "
                    f"{BOUND}: a {a.max_degree}-way bank conflict in a half-warp "
                    "(the doubles one half-warp touches must lie in different pairs of banks)")
        if not stub_lines(source):
            problems += [f"no access to {t} found: stage the tile and read it in the "
                         "inner loop" for t in TILES if t not in seen]
        return problems

    return check
