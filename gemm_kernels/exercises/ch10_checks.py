"""Chapter 10's static check: the bank model on the student's shared tile.

The student declares the transpose's shared tile, `__shared__ T tile[ROWS_EXPR][LEN_EXPR];`.
The check reads that line, evaluates its two sizes with the exercise's parameters (TILE,
PAD, ...), and prices the two shared accesses every tiled transpose makes, for each warp
instruction of warp 0: the store of a tile row (`tile[y][tx]`) and the read down a tile
column (`tile[x][ty]`). A problem when an access costs more wavefronts than the bank model's
ideal, that is when the layout has a bank conflict.
"""
from __future__ import annotations

import re

from gemm_kernels.exercises.cexpr import code_only, evaluate
from gemm_kernels.exercises.stubs import stub_lines
from gemm_kernels.memory import banks

# ------------------------------------------------------------------ the tile check

_DECL = re.compile(r"__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?(\w+)\s+tile\s*"
                   r"\[([^\[\]]*)\]\s*\[([^\[\]]*)\]\s*;")
_ITEMSIZE = {"float": 4, "double": 8}


def tile_accesses(pitch: int, params: dict) -> dict[str, list[banks.Analysis]]:
    """The bank model on the shared accesses of warp 0 (threads (l % TILE, l // TILE) of
    the TILE x ROWS block), one analysis per instruction of the stride loop, for a tile
    whose rows start `pitch` elements apart."""
    tile, rows, size = params["TILE"], params["ROWS"], _ITEMSIZE[params["T"]]
    lanes = [(l % tile, l // tile) for l in range(banks.WARP)]
    out = {"the store of a tile row (tile[y][tx])": [],
           "the read down a tile column (tile[x][ty])": []}
    for dy in range(0, tile, rows):
        row_store = [((ty + dy) * pitch + tx) * size for tx, ty in lanes]
        column_read = [(tx * pitch + ty + dy) * size for tx, ty in lanes]
        for what, addrs in zip(out, (row_store, column_read)):
            out[what].append(banks.analyse(addrs, size))
    return out


def padded_tile(params: dict):
    """The static check of the padded-transpose exercise at `params` (all of the kernel's
    parameters, T TILE ROWS PAD ORDER STACK): a callable source -> problems."""
    names = {"TILE": params["TILE"], "ROWS": params["ROWS"], "PAD": params["PAD"],
             "STACK": params["STACK"], "H": params["STACK"] * params["TILE"]}

    def check(source: str) -> list[str]:
        decls = _DECL.findall(code_only(source))
        if not decls:
            return [] if stub_lines(source) else [
                "no shared tile found: declare it on one line as "
                "`__shared__ T tile[rows][row length];` (the bank check reads that line)"]
        if len(decls) > 1:
            return [f"{len(decls)} shared arrays named tile: declare one"]
        _, rows_expr, len_expr = decls[0]
        try:
            n_rows, pitch = evaluate(rows_expr, names), evaluate(len_expr, names)
        except ValueError as e:
            return [f"cannot read the size of the tile `[{rows_expr}][{len_expr}]`: {e}"]
        if n_rows < names["H"] or pitch < names["TILE"]:
            return [f"the tile is {n_rows} x {pitch} elements: it must hold H = "
                    f"{names['H']} rows of at least TILE = {names['TILE']} elements"]
        problems = []
        for what, found in tile_accesses(pitch, params).items():
            worst = max(found, key=lambda a: a.wavefronts - a.ideal)
            if worst.wavefronts > worst.ideal:
                problems.append(
                    f"with rows of {pitch} elements ({pitch * _ITEMSIZE[params['T']]} bytes), "
                    f"{what} costs {worst.wavefronts} wavefronts per warp instead of "
                    f"{worst.ideal}: a {worst.max_degree}-way bank conflict (pad each row "
                    "so that the next row starts in another bank)")
        return problems

    return check
