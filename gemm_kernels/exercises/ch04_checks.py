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
  and B) with `gemm_kernels.memory.banks`, at the width the compiler gives the reads:
  ptxas merges the reads of consecutive k into LDS.64 or LDS.128 when the layout puts
  them in consecutive, aligned words (as chapter 04 shows), and the submission's SASS
  says which widths it used;
* refuses a layout whose step costs a warp more wavefronts than the chapter's `conflict`
  layout with PAD = 4 (53 at BLOCK = 32). The chapter's lesson is that the rate follows
  the wavefronts per step, not the conflict count: PAD = 2 (51, one 2-way conflicted
  store) and PAD = 4 (53) pass, the conflict-free PAD = 1 (66: its reads cannot merge)
  does not.

No GPU is needed, so a student without one still learns what the layout costs.
"""
from __future__ import annotations

import re
from typing import Callable

from gemm_kernels.exercises.cexpr import ExpressionError, code_only, compile_expression
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
    body = re.sub(r"\bint\s+word\s*=[^;]*;", "", _body(code_only(source), m.end()))
    found = [e.strip() for e in re.findall(r"\bword\s*=(?!=)([^;]+);", body)]
    if not found:
        if STUB in _body(source, raw.end()):
            return None, None
        return None, (f"the bank check cannot find the line `word = <expression>;` in "
                      f"{function}: write the layout as that one line")
    if re.search(r"\bword\s*(<<|>>|[-+*/%&|^])=|\+\+\s*word\b|--\s*word\b|\bword\s*(\+\+|--)",
                 body):
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


def step_budget(block: int) -> int:
    """The wavefronts one step of the chapter's `conflict`, PAD = 4 layout costs a warp."""
    a = word_table(BUDGET_LAYOUT.replace("x", "m"), ("m", "k"), block)
    b = word_table(BUDGET_LAYOUT.replace("x", "n"), ("k", "n"), block)
    cost, _ = step_cost(a, b, read_width(a, along_rows=False), read_width(b, along_rows=True))
    return max(total for total, _ in cost)


def sass_widths(sass: str) -> set[int]:
    """The widths (in words) of the shared loads between the step's two barriers."""
    widths = {"LDS": 1, "LDS.64": 2, "LDS.128": 4}
    return {widths[op.replace(".U", "").replace(".32", "")]
            for op in between_barriers(opcodes(sass)) if op.startswith("LDS")
            and op.replace(".U", "").replace(".32", "") in widths}


def warp_accesses(a: list[list[int]], b: list[list[int]], wa: int = 1, wb: int = 1):
    """(name, warp, first word of each of the 32 lanes, width in words) for every shared
    access of one step of every warp of the kernel's block (BLOCK x BLOCK threads,
    tx = thread % BLOCK, ty = thread // BLOCK): the stores of a = A(ty, tx) and
    b = B(ty, tx), and the reads A(ty, k) and B(k, tx), `wa` and `wb` values of k per
    read."""
    block = len(a)
    for warp in range(block * block // banks.WARP):
        lanes = [divmod(warp * banks.WARP + lane, block) for lane in range(banks.WARP)]
        yield "the store of a, a_word(ty, tx)", warp, [a[ty][tx] for ty, tx in lanes], 1
        yield "the store of b, b_word(ty, tx)", warp, [b[ty][tx] for ty, tx in lanes], 1
        for k in range(0, block, wa):
            yield f"the read of A, a_word(ty, {k})", warp, [a[ty][k] for ty, _ in lanes], wa
        for k in range(0, block, wb):
            yield f"the read of B, b_word({k}, tx)", warp, [b[k][tx] for _, tx in lanes], wb


def step_cost(a: list[list[int]], b: list[list[int]], wa: int = 1, wb: int = 1):
    """Per warp, (wavefronts of one step, the ideal of its instructions), and the worst
    access of each kind (store a, store b, read A, read B) that pays more than its
    ideal, described."""
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


def bank_problems(a: list[list[int]], b: list[list[int]], wa: int, wb: int,
                  budget: int) -> list[str]:
    """Empty when every warp's step costs at most `budget` wavefronts; otherwise the
    first such warp's cost, and the accesses that pay more than their ideal or, where
    none does, the loads that did not merge."""
    cost, worst = step_cost(a, b, wa, wb)
    over = next(((w, t, i) for w, (t, i) in enumerate(cost) if t > budget), None)
    if over is None:
        return []
    warp, total, ideal = over
    head = (f"one step along K costs warp {warp} {total} wavefronts, more than the "
            f"{budget} this exercise allows")
    if ideal > budget:
        head += (f": even without a conflict its instructions need {ideal}, because the "
                 f"reads are {32 * wa}-bit (A) and {32 * wb}-bit (B) loads; the compiler "
                 "merges the reads of consecutive k into LDS.64 or LDS.128 only where a "
                 "row starts at a word that is a multiple of 2 or 4")
    return [head] + worst


def tile_layout_check(block: int, exercise: str = "", kernel: str = "",
                      params: dict | None = None) -> Callable[[str], list[str]]:
    """The static check of exercise 04 for tiles of `block` x `block` elements; with
    `exercise`, `kernel` and `params` it reads the read widths from the submission's
    SASS (else it prices one 4-byte word per read)."""
    room = block * (block + ROOM_PAD)

    def check(source: str) -> list[str]:
        tables, problems = [], []
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
        if len(tables) == 2 and not problems:
            a, b = tables
            sass = submission_sass(exercise, kernel, params, source) if exercise else None
            built = sass_widths(sass) if sass else {1}
            wa = max([1] + [w for w in built if w <= read_width(a, along_rows=False)])
            wb = max([1] + [w for w in built if w <= read_width(b, along_rows=True)])
            problems += bank_problems(a, b, wa, wb, step_budget(block))
        return problems

    check.__name__ = f"tile_layout_check_{block}"
    return check
