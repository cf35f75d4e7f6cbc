"""Chapter 14's static check: the student's XOR swizzle, read and priced without a GPU.

The student writes the body of `chunk_at<CHUNKS, SWIZZLE>(r, c)` (where chunk c of row r
of a shared tile whose rows are CHUNKS 16-byte chunks long is stored) as one line
`chunk = <expression>;`; the kernel around it (14_mma_kernel.cuh) is given. This module
reads that expression (C's comparisons and `?:` allowed, so that a choice between two
formulas by CHUNKS is one line), evaluates it (`cexpr`) for every chunk of both tiles of the graded
configuration, the A tile (BM rows of BK halves: CHUNKS = BK / 8) and the B tile (BK rows
of BN halves: CHUNKS = BN / 8), and checks, in this order, what the kernel relies on:

* every chunk stays in its row and no two chunks of a row share a place (a permutation):
  otherwise a copy overwrites another chunk, and the data of one is lost;
* rows r and r + 8 are permuted alike: the kernel works out the addresses of rows 0-7
  once and reuses them 8, 16, ... rows further on (its copies and its ldmatrix alike);
* every ldmatrix of the kernel costs the least it can, 4 wavefronts (four 8-lane phases
  of 16 bytes a lane: chapter 04's bank model at width 16, as chapter 13 applied it). A:
  ldmatrix.x4, lane l gives row warp_row + l % 16, logical chunk kk / 8 + l / 16; B:
  ldmatrix.x4.trans, lane l gives row kk + l % 16, logical chunk c0 + l / 16, for each
  pair of chunks of the warp's columns.

It also prices the cp.async stores that fill the tiles (the kernel's TileStream order:
thread i copies chunk i % CHUNKS of rows i / CHUNKS + j * THREADS / CHUNKS), for the
report only: the lesson is the reads. A layout that passes gets a note with the predicted
wavefronts (`Exercise.static_checks`' `note`).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

from gemm_kernels.core.kernels import get as get_kernel
from gemm_kernels.exercises.cexpr import (ExpressionError, assignments, code_only,
                                          compile_expression)
from gemm_kernels.exercises.ch04_checks import _body
from gemm_kernels.exercises.stubs import STUB
from gemm_kernels.memory import banks

CHUNK_BYTES = 16        # a chunk: 8 halves, what one lane of ldmatrix or cp.async moves
LINE_SLOTS = banks.BANKS * banks.WORD // CHUNK_BYTES   # 16-byte slots of a 128-byte line
LEAST = 4               # wavefronts of a warp's 512 bytes: four phases of 8 lanes
NAMES = ("r", "c", "CHUNKS")
# The other tile widths the chapter uses or recommends, checked once the graded
# configuration passes: BK = 64 gives A rows of 8 chunks (and BN = 64 B rows of 8),
# BN = 256 gives B rows of 32 chunks. One formula must serve every width.
OTHER_WIDTHS = ({"BK": 64, "BN": 64}, {"BN": 256})


@dataclass(frozen=True)
class Tile:
    """One shared tile of the kernel: `rows` rows of `chunks` 16-byte chunks."""
    name: str
    rows: int
    chunks: int

    @property
    def label(self) -> str:
        return (f"the {self.name} tile (CHUNKS = {self.chunks}: rows of {8 * self.chunks} "
                f"halves, {CHUNK_BYTES * self.chunks} bytes)")


def tiles(params: dict) -> tuple[Tile, Tile]:
    """The A and B tiles of mma_sync at `params` (the registry's defaults filled in)."""
    p = get_kernel("mma_sync").resolve(params)
    return Tile("A", p["BM"], p["BK"] // 8), Tile("B", p["BK"], p["BN"] // 8)


# ------------------------------------------------------------------ the expression

def chunk_expression(source: str) -> tuple[str | None, str | None]:
    """(the expression of the one line `chunk = ...;` in chunk_at, None) or (None, a
    problem; None too while the body still holds the stub, which the grader reports)."""
    pattern = r"\bchunk_at\s*\([^)]*\)\s*\{"
    m, raw = re.search(pattern, code_only(source)), re.search(pattern, source)
    if not m or not raw:
        return None, ("the swizzle check cannot find the function chunk_at: keep its name, "
                      "its parameters (int r, int c) and its line `chunk = <expression>;`")
    found, changed = assignments(_body(code_only(source), m.end()), "chunk")
    if not found:
        if STUB in _body(source, raw.end()):
            return None, None
        return None, ("the swizzle check cannot find the line `chunk = <expression>;` in "
                      "chunk_at: write the swizzle as that one line")
    if changed:
        return None, ("chunk_at changes chunk after its line `chunk = <expression>;`: the "
                      "swizzle check reads that one line, so write the whole swizzle there")
    if len(found) > 1:
        return None, (f"chunk_at assigns chunk {len(found)} times: the swizzle check reads "
                      "one line `chunk = <expression>;`. To choose by the row's length, "
                      "write the choice inside it: `chunk = CHUNKS == 4 ? ... : ...;`")
    return found[0], None


def chunk_table(expression: str, tile: Tile) -> list[list[int]]:
    """table[r][c]: the place of chunk c of row r of `tile`, by the expression."""
    f = compile_expression(expression, NAMES, conditionals=True)
    return [[f(r=r, c=c, CHUNKS=tile.chunks) for c in range(tile.chunks)]
            for r in range(tile.rows)]


# ------------------------------------------------------------------ what the kernel relies on

def permutation_problem(table: list[list[int]], tile: Tile) -> tuple[str, str] | None:
    """(the first chunk sent outside its row, or two chunks of a row sent to one place;
    why that breaks the kernel), or None."""
    for r, row in enumerate(table):
        for c, place in enumerate(row):
            if not 0 <= place < tile.chunks:
                return (f"for {tile.label}, chunk_at(r = {r}, c = {c}) is {place}, "
                        f"{'before' if place < 0 else 'past the end of'} the row",
                        f"a row has chunks 0 to {tile.chunks - 1}, so that copy would "
                        "overwrite a chunk of another row (or land outside the tile)")
        seen: dict[int, int] = {}
        for c, place in enumerate(row):
            if place in seen:
                return (f"for {tile.label}, chunks {seen[place]} and {c} of row {r} both "
                        f"go to place {place}",
                        "the copy of one overwrites the other, so the row loses a chunk of "
                        "its data and ldmatrix reads the same 16 bytes for both: the swizzle "
                        "must permute each row's chunks (a place of its own for every chunk)")
            seen[place] = c
    return None


def rows_8_apart_problem(table: list[list[int]], tile: Tile) -> tuple[str, str] | None:
    """(the first rows r and r + 8 permuted differently; why the kernel needs them
    alike), or None."""
    for r in range(tile.rows - 8):
        for c in range(tile.chunks):
            if table[r][c] != table[r + 8][c]:
                return (f"for {tile.label}, rows {r} and {r + 8} are permuted differently "
                        f"(chunk {c} goes to place {table[r][c]} in row {r}, to "
                        f"{table[r + 8][c]} in row {r + 8})",
                        "the kernel works out the addresses of rows 0-7 once and reuses "
                        "them 8, 16, ... rows further on, in its copies and its ldmatrix, so "
                        "rows 8 apart must be permuted alike, or it reads other chunks than "
                        "it stored")
    return None


def explained(found: list[tuple[str, str]]) -> tuple[str, ...]:
    """Each fact, followed by its reason unless the next fact shares it (so that the
    same reason is not given twice in a row)."""
    return tuple(fact + ("" if i + 1 < len(found) and found[i + 1][1] == why else f": {why}")
                 for i, (fact, why) in enumerate(found))


# ------------------------------------------------------------------ the bank model

def address(table: list[list[int]], tile: Tile, r: int, c: int) -> int:
    """The byte address of logical chunk c of row r, from the tile's start."""
    return (r * tile.chunks + table[r][c]) * CHUNK_BYTES


def ldmatrix_loads(table_a, table_b, a: Tile, b: Tile, params: dict):
    """(tile, what it reads, [(lane, row, logical chunk)] of its 32 lanes, its
    banks.Analysis) for every ldmatrix of one tile of K of every warp of the block, as
    the kernel issues them."""
    p = get_kernel("mma_sync").resolve(params)
    wm, wn = p["BM"] // p["WARPS_M"], p["BN"] // p["WARPS_N"]
    out = []
    for warp_m in range(p["WARPS_M"]):
        for i in range(wm // 16):
            for kk in range(0, p["BK"], 16):
                row0 = warp_m * wm + 16 * i
                out.append((a, f"rows {row0}-{row0 + 15}, chunks {kk // 8}-{kk // 8 + 1}",
                            [(l, row0 + l % 16, kk // 8 + l // 16) for l in range(32)]))
    for warp_n in range(p["WARPS_N"]):
        for jj in range(wn // 16):
            c0 = (warp_n * wn + 16 * jj) // 8
            for kk in range(0, p["BK"], 16):
                out.append((b, f"rows {kk}-{kk + 15}, chunks {c0}-{c0 + 1}",
                            [(l, kk + l % 16, c0 + l // 16) for l in range(32)]))
    tables = {a.name: table_a, b.name: table_b}
    return [(t, what, lanes, banks.analyse([address(tables[t.name], t, r, c)
                                            for _, r, c in lanes], width=CHUNK_BYTES))
            for t, what, lanes in out]


def copy_store_cost(table, tile: Tile, threads: int) -> int:
    """The wavefronts of the dearest warp's cp.async store of `tile`, in TileStream's
    order: thread i copies chunk i % CHUNKS of rows i / CHUNKS + j * THREADS / CHUNKS."""
    step = threads // tile.chunks
    return max(banks.analyse([address(table, tile, i // tile.chunks + j * step,
                                      i % tile.chunks)
                              for i in range(32 * warp, 32 * warp + 32)],
                             width=CHUNK_BYTES).wavefronts
               for warp in range(threads // 32)
               for j in range(tile.rows * tile.chunks // threads))


def phase_collision(lanes, analysis) -> str:
    """Which 8-lane phase of a conflicted ldmatrix collides, and on which rows."""
    phase = max(analysis.phases, key=lambda ph: ph.degree)
    first, last = phase.lanes[0], phase.lanes[-1]
    by_slot: dict[int, list[int]] = {}
    for access in phase.accesses:
        _, r, _ = lanes[access.lane]
        by_slot.setdefault(access.address // CHUNK_BYTES % LINE_SLOTS, []).append(r)
    slot, rows = max(by_slot.items(), key=lambda x: len(x[1]))
    chunk = lanes[first][2]
    return (f"in its phase of lanes {first}-{last} (rows {lanes[first][1]}-"
            f"{lanes[last][1]}, logical chunk {chunk}), rows "
            f"{', '.join(map(str, rows[:-1]))} and {rows[-1]} "
            f"{'both' if len(rows) == 2 else 'all'} land in 16-byte slot {slot} of their "
            f"128-byte lines (banks {4 * slot}-{4 * slot + 3}): "
            f"{'an' if phase.degree == 8 else 'a'} {phase.degree}-way conflict")


@dataclass(frozen=True)
class Verdict:
    """What `assess` found: the problems (empty: a pass) and, where the layout could be
    priced, the wavefronts of the dearest ldmatrix and cp.async warp store of each tile
    ("A", "B")."""
    problems: tuple[str, ...]
    ldmatrix: dict | None = None
    stores: dict | None = None


def width_label(extra: dict, params: dict) -> str:
    """'with BK = 64, BN = 64 (A rows of 8 chunks, B rows of 8 chunks)'."""
    a, b = tiles({**params, **extra})
    return (f"with {', '.join(f'{k} = {v}' for k, v in extra.items())} (A rows of "
            f"{a.chunks} chunks, B rows of {b.chunks} chunks)")


@functools.lru_cache(maxsize=64)
def assess(source: str, params: tuple = (), widths: bool = True) -> Verdict:
    """Exercise 14's check of `source` at `params` (a tuple of items) and, where that
    passes and `widths`, at the chapter's OTHER_WIDTHS: a swizzle right for rows of 4
    and 16 chunks but conflicted for rows of 8 or 32 fails, the width named."""
    verdict = assess_one(source, params)
    if verdict.problems or verdict.ldmatrix is None or not widths:
        return verdict
    for extra in OTHER_WIDTHS:
        other = assess_one(source, tuple(sorted({**dict(params), **extra}.items())))
        if other.problems:
            label = width_label(extra, dict(params))
            return Verdict(tuple(f"the formula must hold for every tile width the chapter "
                                 f"uses; {label}: {x}" for x in other.problems))
    return verdict


def assess_one(source: str, params: tuple = ()) -> Verdict:
    """The check of `source` at the one configuration `params`."""
    params = dict(params)
    a, b = tiles(params)
    expr, problem = chunk_expression(source)
    if expr is None:
        return Verdict((problem,) if problem else ())
    try:
        tables = {t.name: chunk_table(expr, t) for t in (a, b)}
    except ExpressionError as e:
        return Verdict((f"chunk_at: {e}",))
    for check in (permutation_problem, rows_8_apart_problem):
        found = [x for x in (check(tables[t.name], t) for t in (a, b)) if x]
        if found:
            return Verdict(explained(found))
    loads = ldmatrix_loads(tables["A"], tables["B"], a, b, params)
    worst = {t.name: max(an.wavefronts for tt, _, _, an in loads if tt is t) for t in (a, b)}
    p = get_kernel("mma_sync").resolve(params)
    threads = 32 * p["WARPS_M"] * p["WARPS_N"]
    stores = {t.name: copy_store_cost(tables[t.name], t, threads) for t in (a, b)}
    problems = []
    for t in (a, b):
        if worst[t.name] <= LEAST:
            continue
        _, what, lanes, an = next(x for x in loads if x[0] is t
                                  and x[3].wavefronts == worst[t.name])
        problems.append(
            f"an ldmatrix of {t.label}, reading {what}, costs {an.wavefronts} wavefronts "
            f"where {LEAST} is the least: {phase_collision(lanes, an)}")
    if problems:
        problems[-1] += (f" (predicted per ldmatrix: A {worst['A']}, B {worst['B']} "
                         f"wavefronts, against {LEAST})")
    return Verdict(tuple(problems), worst, stores)


def swizzle_check(params: dict | None = None) -> Callable[[str], list[str]]:
    """The static check of exercise 14 at `params` (`assess`). Its `note(source)` gives a
    passing swizzle's predicted wavefronts, for the grader's report."""
    items = tuple(sorted((params or {}).items()))

    def check(source: str) -> list[str]:
        return list(assess(source, items).problems)

    def note(source: str) -> str:
        v = assess(source, items)
        if v.problems or v.ldmatrix is None:
            return ""
        return (f"predicted per ldmatrix: A {v.ldmatrix['A']}, B {v.ldmatrix['B']} "
                f"wavefronts (the least: {LEAST}, no bank conflict); the cp.async stores "
                f"that fill the tiles: A {v.stores['A']}, B {v.stores['B']} wavefronts per "
                "warp copy")

    check.__name__ = "swizzle_check"
    check.note = note
    return check


def swizzle_hint(detail: str) -> str:
    """Exercise 14's step-2 hint, chosen by what the check found."""
    if STUB in detail or "cannot find" in detail:
        return ""                                   # the message says what to write
    if "the check reads only" in detail or "cannot read" in detail or "divides" in detail:
        return ("write the place as one C integer expression in r, c and CHUNKS, e.g. "
                "c ^ (something of r)")
    if "past the end of the row" in detail or "before the row" in detail:
        return ("CHUNKS is a power of two, so c ^ x stays inside the row when x < CHUNKS: "
                "mask what you XOR in (x & (CHUNKS - 1)), for CHUNKS = 4 as for 16")
    if "both go to place" in detail:
        return ("c ^ x, with x worked out from the row alone (not from c), sends the "
                "different chunks of a row to different places: a permutation")
    if "permuted differently" in detail:
        return ("let the row's part depend on r's lowest three bits only (r & 7, or bits "
                "of it): rows r and r + 8 then share it")
    if "is the least" in detail:
        return ("a phase reads one logical chunk of 8 consecutive rows: the 8 places must "
                "fall in 8 different 16-byte slots of their 128-byte lines ((r * CHUNKS + "
                "place) % 8). Rows of 8, 16 or 32 chunks start a line each; rows of 4 chunks (64 "
                "bytes) share a line two by two, row bit 0 picking the half: which bits of "
                "r must your XOR bring into the place, for each?")
    return ""
