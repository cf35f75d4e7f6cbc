"""Chapter 04's static check: the bank model applied to the student's tile layout.

The student's source places the tiles' elements with two functions, `a_word(m, k)` (the
word of the A tile holding A(m, k)) and `b_word(k, n)` (the word of the B tile holding
B(k, n)), each ending in one line `word = <expression>;`. This module reads those two
expressions, evaluates them for every element of a BLOCK x BLOCK tile with a small
evaluator of C integer expressions, and then:

* refuses a layout that puts two elements in one word or a word outside the tile's room;
* refuses a layout that does not keep k along the rows of both tiles (A(m, k) and
  A(m, k + 1), B(k, n) and B(k + 1, n) in neighbouring words, for every even k): the
  exercise is the chapter's `conflict` layout, sA[m][k] and sB[n][k], whose store of b
  walks down a column and whose reads the compiler can merge into wide loads. Chapter
  03's layout, B stored as sB[k][n], is already cheap; this one needs the chapter;
* prices every warp access of one step along K (the store of a and of b, the reads of A
  and B) with `gemm_kernels.memory.banks`, each shared load at the width the compiler gave
  it. ptxas merges the reads of consecutive k into LDS.64 or LDS.128 only where it can
  prove from the index arithmetic that the words are adjacent and aligned: rows of BLOCK
  + 2 or + 4 words, yes; an XOR in the index, mostly not (the layout would allow LDS.128,
  the SASS has 32-bit LDS). So the check counts the loads of each width between the
  step's two barriers in the submission's SASS and prices exactly those. Which of them
  read A it learns from one more compilation, with B's layout replaced by one whose
  reads always merge (`loads_of_a`); inside a tile each load covers an aligned group of
  k the layout keeps in neighbouring words, placed in the way that costs the step least
  (the SASS does not say which k a load reads: the benefit of the doubt). Where the
  loads do not add up to one word per value of k (a loop left rolled), each tile is
  priced at the narrowest width the SASS has;
* refuses a layout whose step costs a warp more wavefronts than the chapter's `conflict`
  layout with PAD = 4 (53 at BLOCK = 32). The chapter's lesson is that the rate follows
  the wavefronts per step, not the conflict count: PAD = 2 (51, one 2-way conflicted
  store) and PAD = 4 (53) pass, the conflict-free PAD = 1 (66: its reads cannot merge)
  does not, and neither does an XOR swizzle read through the kernel's scalar loads
  (about 150: the compiler cannot merge them); the message says why and what would
  (explicit float4 loads).

No GPU is needed, so a student without one still learns what the layout costs.
"""
from __future__ import annotations

import functools
import re
from typing import Callable

from gemm_kernels.exercises.cexpr import (ExpressionError, assignments, code_only,
                                          compile_expression)
from gemm_kernels.exercises.ch05_checks import between_barriers, opcodes
from gemm_kernels.exercises.stubs import STUB
from gemm_kernels.exercises.submission import submission_sass
from gemm_kernels.memory import banks

ROOM_PAD = 4        # the skeleton's tiles hold BLOCK rows of BLOCK + ROOM_PAD words
# The most wavefronts one step may cost a warp: those of the chapter's `conflict` layout
# with PAD = 4 (rows of BLOCK + 4 words, k along them, reads merged into LDS.128), the
# dearer of its two best layouts (PAD = 2 costs 51 at BLOCK = 32, PAD = 4 53).
BUDGET_LAYOUT = "x * (BLOCK + 4) + k"

def word_expression(source: str, function: str) -> tuple[str | None, str | None]:
    """(the expression of the one line `word = ...;` in `function`'s body, None) or
    (None, a problem; None too when the body still holds the stub, which the grader
    reports itself)."""
    m = re.search(rf"\b{function}\s*\([^)]*\)\s*\{{", code_only(source))
    raw = re.search(rf"\b{function}\s*\([^)]*\)\s*\{{", source)
    if not m or not raw:
        return None, (f"the bank check cannot find the function {function}: keep its "
                      "name and its line `word = <expression>;`")
    found, changed = assignments(_body(code_only(source), m.end()), "word")
    if not found:
        if STUB in _body(source, raw.end()):
            return None, None
        return None, (f"the bank check cannot find the line `word = <expression>;` in "
                      f"{function}: write the layout as that one line")
    if changed:
        return None, (f"{function} changes word after its line `word = <expression>;`: "
                      "the bank check reads that one line, so write the whole layout there")
    if len(found) > 1:
        return None, (f"{function} assigns word {len(found)} times: the bank check reads "
                      "one line `word = <expression>;`")
    return found[0], None


def _body(text: str, start: int) -> str:
    """The text after an opening brace at `start` - 1, up to its matching brace."""
    depth = 1
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i]
    return text[start:]


def word_table(expression: str, names: tuple[str, str], block: int) -> list[list[int]]:
    """table[i][j]: the expression's word for names[0] = i, names[1] = j."""
    f = compile_expression(expression, names + ("BLOCK",))
    return [[f(**{names[0]: i, names[1]: j, "BLOCK": block}) for j in range(block)]
            for i in range(block)]


def layout_problems(table: list[list[int]], label: str, room: int) -> list[str]:
    """Two elements in one word, or a word outside 0 .. room - 1."""
    block = len(table)
    seen: dict[int, tuple[int, int]] = {}
    for i in range(block):
        for j in range(block):
            w = table[i][j]
            if not 0 <= w < room:
                return [f"{label.format(i, j)} is word {w}, outside the tile's "
                        f"{room} words (0 to {room - 1})"]
            if w in seen:
                return [f"{label.format(*seen[w])} and {label.format(i, j)} are both "
                        f"word {w}: every element needs a word of its own"]
            seen[w] = (i, j)
    return []


def read_width(table: list[list[int]], along_rows: bool) -> int:
    """The widest merge (4, 2 or 1 words) the layout allows for the reads along k: every
    lane's w values of consecutive k in consecutive words, the first a multiple of w.
    `table[i][j]`; k is j for A (a_word(m, k)) and i for B (b_word(k, n))."""
    block = len(table)
    for w in (4, 2):
        def word(x, k):
            return table[k][x] if along_rows else table[x][k]
        if all(word(x, k) % w == 0 and all(word(x, k + i) == word(x, k) + i for i in range(w))
               for x in range(block) for k in range(0, block, w)):
            return w
    return 1


def k_across_rows(table: list[list[int]], along_rows: bool) -> tuple[int, int] | None:
    """The first (x, k), k even, whose element of k + 1 is not in the word after that of
    k (x: m for A, n for B; `table` as for `read_width`), or None when there is none."""
    block = len(table)
    def word(x, k):
        return table[k][x] if along_rows else table[x][k]
    return next(((x, k) for x in range(block) for k in range(0, block - 1, 2)
                 if word(x, k + 1) != word(x, k) + 1), None)


@functools.cache
def step_budget(block: int) -> int:
    """The wavefronts one step of the chapter's `conflict`, PAD = 4 layout costs a warp."""
    a = word_table(BUDGET_LAYOUT.replace("x", "m"), ("m", "k"), block)
    b = word_table(BUDGET_LAYOUT.replace("x", "n"), ("k", "n"), block)
    cost, _ = step_cost(a, b, read_width(a, along_rows=False), read_width(b, along_rows=True))
    return max(total for total, _ in cost)


@functools.cache
def chapter_03_cost(block: int) -> int:
    """One step of chapter 03's layout (sA[m][k] and sB[k][n], rows of BLOCK words; A read
    with LDS.128, B with LDS along a row): the least a step can cost at one output per
    thread. The exercise's rule reaches it too: A read wide (rows of an even length), B
    read 32 bits at a time from rows of an odd length, whose column store is then free."""
    a = word_table("m * BLOCK + k", ("m", "k"), block)
    b = word_table("k * BLOCK + n", ("k", "n"), block)
    cost, _ = step_cost(a, b, read_width(a, along_rows=False), 1)
    return max(total for total, _ in cost)


# The shared loads of SASS and their width in words.
LOAD_WIDTHS = {"LDS": 1, "LDS.64": 2, "LDS.128": 4}
LOAD_NAMES = {w: op for op, w in LOAD_WIDTHS.items()}


def sass_loads(sass: str) -> dict[int, int]:
    """How many shared loads of each width (in words: 1, 2, 4) lie between the step's two
    barriers, the inner loop of one step."""
    n = dict.fromkeys(LOAD_NAMES, 0)
    for op in between_barriers(opcodes(sass)):
        w = LOAD_WIDTHS.get(op.replace(".U", "").replace(".32", ""))
        if w:
            n[w] += 1
    return n


def uniform(width: int, block: int) -> tuple[tuple[int, int], ...]:
    """The reads of one tile in a step, every load `width` words wide: (first k, width)."""
    return tuple((k, width) for k in range(0, block, width))


def describe(plan) -> str:
    """'24 LDS and 2 LDS.128' for a tile's reads (a plan of (first k, width))."""
    n = {w: sum(1 for _, x in plan if x == w) for w in LOAD_NAMES}
    return " and ".join(f"{n[w]} {LOAD_NAMES[w]}" for w in sorted(n) if n[w])


def _modes(k0: int, allowed: int):
    """The ways one aligned group of four k can be read when the layout allows loads up
    to `allowed` words wide: each a tuple of (first k, width)."""
    modes = [tuple((k0 + i, 1) for i in range(4))]
    if allowed >= 2:
        modes += [((k0, 2), (k0 + 2, 2)), ((k0, 2), (k0 + 2, 1), (k0 + 3, 1)),
                  ((k0, 1), (k0 + 1, 1), (k0 + 2, 2))]
    if allowed >= 4:
        modes.append(((k0, 4),))
    return modes


def _read_words(table, along_rows: bool, k: int, lanes) -> list[int]:
    """The word each lane reads at `k`: A(ty, k) (a_word, table[m][k]) or B(k, tx)
    (b_word, table[k][n])."""
    return [table[k][tx] for _, tx in lanes] if along_rows else [table[ty][k] for ty, _ in lanes]


def _lanes(block: int, warp: int):
    return [divmod(warp * banks.WARP + lane, block) for lane in range(banks.WARP)]


def _cheapest(a, b, tiles, loads: dict[int, int]):
    """The reads of `tiles` (0: A, 1: B) with exactly `loads[w]` loads of w words between
    them, each load covering an aligned group of w consecutive k that the layout keeps
    in neighbouring words, in the way that costs a step least over all warps: a plan
    (tuple of (first k, width)) per tile, or None when no such reading exists."""
    block = len(a)
    if block % 4 or sum(w * n for w, n in loads.items()) != block * len(tiles):
        return None
    tables = ((a, False), (b, True))
    allowed = [read_width(t, along_rows=r) for t, r in tables]
    warps = block * block // banks.WARP

    @functools.cache
    def cost(tile: int, k: int, w: int) -> int:
        t, r = tables[tile]
        return sum(banks.analyse(banks.words_to_bytes(_read_words(t, r, k, _lanes(block, wp))),
                                 4 * w).wavefronts for wp in range(warps))

    best = {(0, 0): (0, ())}                  # (LDS.128 used, LDS.64 used) -> (cost, modes)
    for tile in tiles:
        for k0 in range(0, block, 4):
            nxt = {}
            for (n4, n2), (c, chosen) in best.items():
                for mode in _modes(k0, allowed[tile]):
                    m4 = n4 + sum(w == 4 for _, w in mode)
                    m2 = n2 + sum(w == 2 for _, w in mode)
                    if m4 > loads.get(4, 0) or m2 > loads.get(2, 0):
                        continue
                    cc = c + sum(cost(tile, k, w) for k, w in mode)
                    if (m4, m2) not in nxt or cc < nxt[(m4, m2)][0]:
                        nxt[(m4, m2)] = (cc, chosen + ((tile, mode),))
            best = nxt
    found = best.get((loads.get(4, 0), loads.get(2, 0)))
    if found is None:
        return None
    plans = {tile: [] for tile in tiles}
    for tile, mode in found[1]:
        plans[tile].extend(mode)
    return [tuple(plans[t]) for t in tiles]


def compiled_reads(a: list[list[int]], b: list[list[int]], loads: dict[int, int],
                   loads_a: dict[int, int] | None = None):
    """The reads of A and of B in one step as the SASS issues them: (plan of A, plan of
    B), each a tuple of (first k, width), or None when the loads do not add up to one
    word per value of k of each tile. `loads[w]`: the step's shared loads of w words;
    `loads_a`, where known, those that read A (the rest read B). Inside a tile, and
    between the tiles where `loads_a` is not known, the loads are placed in the way that
    costs a step least (the SASS does not say which k a load reads: the benefit of the
    doubt)."""
    if loads_a is not None:
        loads_b = {w: loads.get(w, 0) - loads_a.get(w, 0) for w in LOAD_NAMES}
        if min(loads_b.values()) >= 0:
            pa, pb = _cheapest(a, b, (0,), loads_a), _cheapest(a, b, (1,), loads_b)
            if pa and pb:
                return pa[0], pb[0]
    found = _cheapest(a, b, (0, 1), loads)
    return tuple(found) if found else None


def with_word(source: str, function: str, expression: str) -> str | None:
    """`source` with the body of `function` replaced by the one line `word =
    <expression>;` (and its declaration and return), or None when the function cannot be
    found."""
    m = re.search(rf"\b{function}\s*\([^)]*\)\s*\{{", source)
    if not m:
        return None
    body = _body(source, m.end())
    return (source[:m.end()] + f"\n    int word = 0;\n    word = {expression};\n    return word;\n"
            + source[m.end() + len(body):])


def loads_of_a(exercise: str, kernel: str, params: dict, source: str,
               block: int) -> dict[int, int] | None:
    """The shared loads of one step that read A, by width: the submission compiled once
    more with B's layout replaced by one whose reads always merge (BLOCK / 4 LDS.128),
    minus those. None where that cannot be told."""
    probe = with_word(source, "b_word", BUDGET_LAYOUT.replace("x", "n"))
    sass = submission_sass(exercise, kernel, params, probe) if probe else None
    if not sass:
        return None
    n = sass_loads(sass)
    if n[4] < block // 4:
        return None
    n[4] -= block // 4
    return n


def warp_accesses(a: list[list[int]], b: list[list[int]], wa=1, wb=1):
    """(name, warp, first word of each of the 32 lanes, width in words) for every shared
    access of one step of every warp of the kernel's block (BLOCK x BLOCK threads,
    tx = thread % BLOCK, ty = thread // BLOCK): the stores of a = A(ty, tx) and
    b = B(ty, tx), and the reads A(ty, k) and B(k, tx). `wa` and `wb`: the reads of each
    tile, a width in words for all of them or a plan of (first k, width)."""
    block = len(a)
    plan_a = uniform(wa, block) if isinstance(wa, int) else wa
    plan_b = uniform(wb, block) if isinstance(wb, int) else wb
    for warp in range(block * block // banks.WARP):
        lanes = _lanes(block, warp)
        yield "the store of a, a_word(ty, tx)", warp, [a[ty][tx] for ty, tx in lanes], 1
        yield "the store of b, b_word(ty, tx)", warp, [b[ty][tx] for ty, tx in lanes], 1
        for k, w in plan_a:
            yield f"the read of A, a_word(ty, {k})", warp, _read_words(a, False, k, lanes), w
        for k, w in plan_b:
            yield f"the read of B, b_word({k}, tx)", warp, _read_words(b, True, k, lanes), w


def step_cost(a: list[list[int]], b: list[list[int]], wa=1, wb=1):
    """Per warp, (wavefronts of one step, the ideal of its instructions), and the worst
    access of each kind (store a, store b, read A, read B) that pays more than its
    ideal, described. `wa`, `wb` as for `warp_accesses`."""
    cost, worst = [], {}
    for warp in range(len(a) * len(a) // banks.WARP):
        total = ideal = 0
        for name, _, words, width in (x for x in warp_accesses(a, b, wa, wb) if x[1] == warp):
            r = banks.analyse(banks.words_to_bytes(words), 4 * width)
            total, ideal = total + r.wavefronts, ideal + r.ideal
            if r.wavefronts > r.ideal:
                kind = name.split(",")[0]
                bank, served = max(enumerate(r.phases[0].words_per_bank), key=lambda x: x[1])
                text = (f"{name} ({32 * width}-bit) in warp {warp} costs {r.wavefronts} "
                        f"wavefronts where {r.ideal} would do: bank {bank} serves {served} "
                        "different words")
                if kind not in worst or r.wavefronts > worst[kind][0]:
                    worst[kind] = (r.wavefronts, text)
        cost.append((total, ideal))
    return cost, [text for _, text in worst.values()]


def unmerged(a, b, wa, wb, expressions=("", "")) -> list[str]:
    """Why the tiles whose layout allows wider reads than the compiled ones (`wa`, `wb`:
    widths or plans) were not merged, in one sentence that names the cause: the other
    tile's rows starting at words that are not a multiple of the width (ptxas then gives
    up on both), an XOR it cannot see through, or index arithmetic it cannot prove
    aligned; empty when none. `expressions`: the submission's a_word and b_word. What a
    swizzle would need (explicit vector loads) is the hint's, not the message's."""
    found, narrow = [], []
    for tile, table, along, plan, expr in (("A", a, False, wa, expressions[0]),
                                           ("B", b, True, wb, expressions[1])):
        plan = uniform(plan, len(a)) if isinstance(plan, int) else plan
        allowed = read_width(table, along_rows=along)
        if any(w < allowed for _, w in plan):
            found.append((tile, allowed, describe(plan), "^" in expr))
        narrow.append((tile, allowed))
    if not found:
        return []
    allowed = max(w for _, w, _, _ in found)
    tiles = " and ".join(t for t, *_ in found)
    reads = " and ".join(f"{t} with {d}" for t, _, d, _ in found)
    odd = [t for t, w in narrow if w < allowed and t not in tiles]
    if odd and not any(x for *_, x in found):
        start = "odd words" if allowed == 2 else f"words that are not multiples of {allowed}"
        return [f"your {' and '.join(odd)} rows start at {start}; ptxas then reads {tiles} "
                f"narrow too ({reads}): start the rows of both tiles at multiples of "
                f"{allowed} words"]
    how = ("it cannot see through an XOR that neighbouring k stay adjacent and aligned"
           if any(x for *_, x in found) else
           "it cannot prove from your index arithmetic that neighbouring k are adjacent "
           "and aligned")
    return [f"your layout would let each {allowed} values of k of {tiles} be one "
            f"{LOAD_NAMES[allowed]}, but the SASS reads {reads}: {how}; in this exercise "
            f"pad the rows instead, each row starting at a multiple of {allowed} words"]


def bank_problems(a: list[list[int]], b: list[list[int]], wa, wb, budget: int,
                  expressions: tuple[str, str] | None = None) -> list[str]:
    """Empty when every warp's step costs at most `budget` wavefronts; otherwise the
    first such warp's cost, and the accesses that pay more than their ideal or, where
    none does, the loads that did not merge. `wa`, `wb`: widths or plans of the reads;
    `expressions` (a_word's and b_word's) where they come from a submission's SASS: then
    a tile read narrower than its layout allows is explained (`unmerged`)."""
    cost, worst = step_cost(a, b, wa, wb)
    over = next(((w, t, i) for w, (t, i) in enumerate(cost) if t > budget), None)
    if over is None:
        return []
    warp, total, ideal = over
    why = unmerged(a, b, wa, wb, expressions) if expressions is not None else []
    head = (f"one step along K costs warp {warp} {total} wavefronts, more than the "
            f"{budget} this exercise allows")
    if ideal > budget:
        head += f": even without a conflict its instructions need {ideal}"
        if not why:
            reads = " and ".join(f"{describe(uniform(w, len(a)) if isinstance(w, int) else w)}"
                                 f" ({t})" for t, w in (("A", wa), ("B", wb)))
            head += (f", because the reads are {reads}; the compiler merges the reads of "
                     "consecutive k into LDS.64 or LDS.128 only where a row starts at a word "
                     "that is a multiple of 2 or 4")
    return [head] + why + worst


@functools.lru_cache(maxsize=32)
def assess(source: str, block: int, exercise: str = "", kernel: str = "",
           params: tuple = ()) -> dict:
    """Exercise 04's check of `source` for tiles of `block` x `block` elements:
    {"problems": what is wrong (empty: a pass), "wavefronts" and "ideal": one step of the
    costliest warp and the same loads without a conflict (None where the layout could not
    be priced), "loads": the step's shared loads by width in the SASS, "plans": the reads
    of A and of B as priced}. With `exercise`,
    `kernel` and `params` (a tuple of items) it prices the loads of the submission's
    SASS; else one 4-byte word per read."""
    room = block * (block + ROOM_PAD)
    tables, problems, expressions = [], [], []
    for function, names, label in (("a_word", ("m", "k"), "A({}, {})"),
                                   ("b_word", ("k", "n"), "B({}, {})")):
        expr, problem = word_expression(source, function)
        if problem:
            problems.append(problem)
        if expr is None:
            continue
        try:
            table = word_table(expr, names, block)
        except ExpressionError as e:
            problems.append(f"{function}: {e}")
            continue
        found = layout_problems(table, label, room)
        is_b = function == "b_word"
        across = None if found else k_across_rows(table, along_rows=is_b)
        if across:
            x, k = across
            first, second = ((k, x), (k + 1, x)) if is_b else ((x, k), (x, k + 1))
            found = [f"this exercise keeps k along the rows of both tiles, as the dot "
                     f"product reads them ({'sB[n][k]' if is_b else 'sA[m][k]'}): the "
                     "element of k + 1 must be in the word after the element of k, for "
                     f"every even k, but {label.format(*first)} is word "
                     f"{table[first[0]][first[1]]} and {label.format(*second)} word "
                     f"{table[second[0]][second[1]]}"]
        problems += [f"{function}: {p}" for p in found]
        if not found:
            tables.append(table)
            expressions.append(expr)
    if len(tables) != 2 or problems:
        return {"problems": tuple(problems), "wavefronts": None, "ideal": None, "loads": None,
                "plans": None, "parts": None}
    a, b = tables
    params = dict(params)
    sass = submission_sass(exercise, kernel, params, source) if exercise else None
    loads = sass_loads(sass) if sass else {1: 2 * block, 2: 0, 4: 0}
    plans = compiled_reads(a, b, loads, loads_of_a(exercise, kernel, params, source, block)
                           if sass else None)
    if plans is None:                   # not one load per k: the narrowest width each
        built = [w for w in sorted(loads) if loads[w]] or [1]
        plans = tuple(next((w for w in built if w <= read_width(t, along_rows=r)), 1)
                      for t, r in ((a, False), (b, True)))
    found = bank_problems(a, b, *plans, step_budget(block),
                          tuple(expressions) if sass else None)
    cost = step_cost(a, b, *plans)[0]
    total, ideal = max(cost)
    return {"problems": tuple(found), "loads": loads, "plans": plans, "wavefronts": total,
            "ideal": ideal, "parts": step_parts(a, b, *plans, warp=cost.index((total, ideal)))}


def step_parts(a, b, wa, wb, warp: int = 0) -> dict[str, int]:
    """The wavefronts of one step of `warp`, by access: {"store of a": .., "store of b":
    .., "reads of A": .., "reads of B": ..}."""
    parts = dict.fromkeys(("store of a", "store of b", "reads of A", "reads of B"), 0)
    for name, _, words, width in (x for x in warp_accesses(a, b, wa, wb) if x[1] == warp):
        kind = {"the store of a": "store of a", "the store of b": "store of b",
                "the read of A": "reads of A", "the read of B": "reads of B"}[name.split(",")[0]]
        parts[kind] += banks.analyse(banks.words_to_bytes(words), 4 * width).wavefronts
    return parts


PREDICTION = "PREDICTED_WAVEFRONTS"


def with_prediction(source: str, wavefronts: int) -> str:
    """`source` with its prediction set to `wavefronts` (added where it has none)."""
    line = f"constexpr int {PREDICTION} = {wavefronts};"
    found = re.sub(rf"constexpr\s+int\s+{PREDICTION}\s*=\s*\d+\s*;", line, source, count=1)
    return found if found != source or line in source else line + "\n" + source


def prediction_problems(source: str, result: dict) -> list[str]:
    """The student's written price of one step (`constexpr int PREDICTED_WAVEFRONTS =
    ...;`) against the grader's, for a layout that passed the budget: the exercise asks
    for a layout priced by hand before it is run, not one found by trying paddings."""
    if result["problems"] or result["wavefronts"] is None:
        return []
    m = re.search(rf"\b{PREDICTION}\s*=\s*(\d+)", code_only(source))
    predicted = int(m.group(1)) if m else 0
    total = result["wavefronts"]
    if predicted == total:
        return []
    if not predicted:
        return [f"your layout is within the budget; now price it: set {PREDICTION} to the "
                "wavefronts one step costs a warp (the two stores, then the reads of A and "
                "of B at all 32 k, at the width the compiler gives them) and run the cell "
                "again"]
    return [f"you predicted {predicted} wavefronts per warp and step: "
            f"{prediction_gap(predicted, total)}. Price the four accesses one by one with the "
            "chapter's rules (the width the compiler gives each read, its phases and whether "
            "they merge, the bank of each word), then correct the prediction"]


def prediction_gap(predicted: int, total: int) -> str:
    """How far a wrong prediction is from the price, in words that do not give the price
    away: the direction and a band (a store costs a few wavefronts, the reads of one
    operand at all 32 k a few dozen), so the student recounts rather than copies."""
    off = abs(predicted - total)
    band = "by 1 or 2" if off <= 2 else "by 3 to 16" if off <= 16 else "by more than 16"
    return f"too {'high' if predicted > total else 'low'} {band}"


def tile_layout_check(block: int, exercise: str = "", kernel: str = "",
                      params: dict | None = None) -> Callable[[str], list[str]]:
    """The static check of exercise 04 for tiles of `block` x `block` elements (`assess`).
    Its `note(source)` is what a passing layout costs, for the grader's report."""
    items = tuple(sorted((params or {}).items()))

    def check(source: str) -> list[str]:
        r = assess(source, block, exercise, kernel, items)
        return list(r["problems"]) + prediction_problems(source, r)

    def note(source: str) -> str:
        r = assess(source, block, exercise, kernel, items)
        if r["problems"] or r["wavefronts"] is None:
            return ""
        least = chapter_03_cost(block)
        bonus = "" if r["wavefronts"] <= least else (
            f". A pass; and a bonus question: {least} is reachable under this rule. Which "
            "of the two reads gains nothing from being wide, and what would a row length "
            "that keeps it narrow do to the store beside it?")
        return (f"{r['wavefronts']} wavefronts per warp and step (the budget: "
                f"{step_budget(block)}; the least any layout can cost, under this rule as in "
                f"chapter 03: {least}){bonus}")

    check.__name__ = f"tile_layout_check_{block}"
    check.note = note
    return check


def tile_layout_hint(detail: str) -> str:
    """Exercise 04's step-2 hint, chosen by what the check found: one fixed text would
    talk about prices to a student whose expression is not yet a layout, and about the
    layout rule to one whose layout is only mispriced."""
    if "YOUR CODE HERE" in detail or "cannot find" in detail:
        return ""                                   # the message says what to write
    if "k along the rows" in detail:
        return ("write each word as row_start(row) + position(k): the row (m for A, n for B) "
                "picks where a row begins, k the place inside it, so that k and k + 1 sit "
                "side by side")
    if "outside the tile" in detail or "word of its own" in detail:
        return ("rows of S words, BLOCK <= S <= BLOCK + 4, starting at row * S, give every "
                "element a word of its own inside the tile")
    if "through an XOR" in detail:
        return ("a swizzle keeps its merged reads only with explicit vector loads, which "
                "this exercise's kernel does not have: outside it you would read four k at "
                "once, *reinterpret_cast<const float4*>(&sA[a_word<BLOCK>(ty, k)]) for k = "
                "0, 4, 8, ..., from __align__(16) tiles (the worked solution prices that); "
                "here, a row start that is a multiple of 4 words keeps the reads merged")
    if "even without a conflict" in detail:
        return ("the reads are narrow: the compiler merges the reads of consecutive k into "
                "LDS.64 or LDS.128 only where it can prove them neighbouring and a row starts "
                "at a multiple of 2 or 4 words (the section 'What the compiler emits')")
    if "more than the" in detail:
        return ("a warp is one row of threads (ty fixed, tx = 0..31): find the access that "
                "walks down a column of a tile, and give each row a start that moves the "
                "next row to other banks, without losing the merged reads")
    if PREDICTION in detail or "you predicted" in detail:
        return ("price the four accesses one by one for warp 0: the store of a, the store of "
                "b, and the reads of A and of B, each read as many times as the loop issues "
                "it at the width the compiler gives it (32 / 4 LDS.128, 32 / 2 LDS.64 or 32 "
                "LDS); a broadcast and a read of neighbouring words cost the least their "
                "width allows, a column the most words one bank must deliver")
    return ""
