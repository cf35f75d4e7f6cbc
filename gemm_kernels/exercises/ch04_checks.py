"""Chapter 04's static check: the bank model applied to the student's tile layout.

The student's source places the tiles' elements with two functions, `a_word(m, k)` (the
word of the A tile holding A(m, k)) and `b_word(k, n)` (the word of the B tile holding
B(k, n)), each ending in one line `word = <expression>;`. This module reads those two
expressions, evaluates them for every element of a BLOCK x BLOCK tile with a small
evaluator of C integer expressions, and then:

* refuses a layout that puts two elements in one word or a word outside the tile's room;
* prices every warp access of the kernel (the store of a and of b, the reads of A and B
  for each k) with `gemm_kernels.memory.banks`, one 4-byte word per lane as the source
  writes it, and refuses any access that costs more wavefronts than its ideal.

No GPU and no compiler is needed, so a student without a GPU still learns whether the
layout conflicts.
"""
from __future__ import annotations

import re
from typing import Callable

from gemm_kernels.exercises.cexpr import ExpressionError, code_only, compile_expression
from gemm_kernels.exercises.stubs import STUB
from gemm_kernels.memory import banks

ROOM_PAD = 4        # the skeleton's tiles hold BLOCK rows of BLOCK + ROOM_PAD words

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


def warp_accesses(a: list[list[int]], b: list[list[int]]):
    """(name, warp, 32 words) for every shared-memory access of every warp of the
    kernel's block (BLOCK x BLOCK threads, tx = thread % BLOCK, ty = thread // BLOCK):
    the stores of a = A(ty, tx) and b = B(ty, tx), and the reads A(ty, k), B(k, tx)."""
    block = len(a)
    for warp in range(block * block // banks.WARP):
        lanes = [divmod(warp * banks.WARP + lane, block) for lane in range(banks.WARP)]
        yield "the store of a, a_word(ty, tx)", warp, [a[ty][tx] for ty, tx in lanes]
        yield "the store of b, b_word(ty, tx)", warp, [b[ty][tx] for ty, tx in lanes]
        for k in range(block):
            yield f"the read of A, a_word(ty, {k})", warp, [a[ty][k] for ty, _ in lanes]
            yield f"the read of B, b_word({k}, tx)", warp, [b[k][tx] for _, tx in lanes]


def bank_problems(a: list[list[int]], b: list[list[int]]) -> list[str]:
    """The accesses whose predicted wavefronts exceed the ideal, the worst of each kind
    first found (one line per kind: store a, store b, read A, read B)."""
    worst: dict[str, tuple[int, str]] = {}
    for name, warp, words in warp_accesses(a, b):
        r = banks.analyse(banks.words_to_bytes(words), 4)
        if r.wavefronts > r.ideal:
            kind = name.split(",")[0]
            bank, served = max(enumerate(r.phases[0].words_per_bank), key=lambda x: x[1])
            text = (f"{name} in warp {warp} costs {r.wavefronts} wavefronts where "
                    f"{r.ideal} would do: bank {bank} serves {served} different words")
            if kind not in worst or r.wavefronts > worst[kind][0]:
                worst[kind] = (r.wavefronts, text)
    return [text for _, text in worst.values()]


def tile_layout_check(block: int) -> Callable[[str], list[str]]:
    """The static check of exercise 04 for tiles of `block` x `block` elements."""
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
            problems += [f"{function}: {p}" for p in found]
            if not found:
                tables.append(table)
        if len(tables) == 2 and not problems:
            problems += bank_problems(*tables)
        return problems

    check.__name__ = f"tile_layout_check_{block}"
    return check
