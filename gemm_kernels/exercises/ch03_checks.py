"""Chapter 03's static checks: the tile loop's two barriers, read from the submission's
SASS, and the price of the student's copies and reads, read from its source.

A missing barrier is a race, and a race may go unseen in a correctness test: the
threads of a block happen to run in an order that hides it. The SASS shows the
structure without running anything: the shared stores (STS, the tile copies) before a
first BAR.SYNC, the shared loads (LDS, the products) between it and a second one.

Which element each thread copies is the student's choice. `copy_problems` reads that
choice from the source (the statements `As[..][..] = ... A[..] ...;` and
`Bs[..][..] = ... B[..] ...;`, the reads `As[..][..]` and `Bs[..][..]` inside a loop, and
the `int name = expression;` lines they use), evaluates it for every thread of the
block with `cexpr`, and prices it with `memory.ch03_copies`, as chapter 02 prices
global loads and chapter 04 shared accesses:

* a warp's load of A or of B must touch no more 32-byte sectors than its floats need
  (coalesced, chapter 02);
* a warp's store into a tile, and each read of a tile in the products, must cost one
  wavefront per pass (no bank conflict: the chapter's layout has none);
* the threads of a block must load as many different elements of A (of B) as the tile
  holds, and store them into as many different words.

`product_problems` then follows the products through those copies: for every thread and
every k of the loop it finds which element of A and of B the words it reads hold, and
names the first thread whose products are not those of its own output C[row][col] (the
element it read, where that came from, and the element it needed there), or the k its
loop leaves out. A wrong index is thus named with its thread before anything runs.

Each message ends with what to look at for that check (the grader's hint for step 2 is
one text for all checks, so the guidance lives in the messages).

It says nothing where it cannot read the source (pointer arithmetic, a helper function,
a conditional expression in an index): it never refuses a kernel for its style, and a
wrong index is found when the kernel runs (step 3), where the numbers are compared.
"""
from __future__ import annotations

import re
from typing import Callable

from gemm_kernels.exercises.cexpr import ExpressionError, code_only, compile_expression
from gemm_kernels.exercises.ch05_checks import opcodes
from gemm_kernels.exercises.stubs import STUB
from gemm_kernels.exercises.submission import submission_sass
from gemm_kernels.memory import ch03_copies


def barrier_problems(sass: str) -> list[str]:
    """What is missing from the loop's copy, barrier, products, barrier order."""
    ops = opcodes(sass)
    bars = [i for i, op in enumerate(ops) if op.startswith("BAR.SYNC")]
    if len(bars) < 2:
        return [f"{len(bars)} __syncthreads() in the compiled loop where a step needs two: one "
                "after the copies (nobody reads a tile before it is complete) and one after "
                "the products (nobody overwrites a tile that others still read)"]
    if not any(op.startswith("STS") for op in ops[:bars[0]]):
        return ["no shared store (STS) before the first __syncthreads(): copy the elements "
                "into the tiles, then wait"]
    if not any(re.fullmatch(r"LDS(\.\w+)*", op) for op in ops[bars[0] + 1:bars[1]]):
        return ["no shared load (LDS) between the two __syncthreads(): the products read "
                "the tiles between the barriers"]
    return []


def two_barriers(exercise: str, kernel: str, params: dict) -> Callable[[str], list[str]]:
    """The SASS check of exercise 03 (see the module's docstring); silent while the
    source still holds the stub, which the grader reports itself."""
    def check(source: str) -> list[str]:
        if STUB in source:
            return []
        sass = submission_sass(exercise, kernel, params, source)
        return [] if sass is None else barrier_problems(sass)
    check.__name__ = f"two_barriers_{exercise}"
    return check


# ------------------------------------------------------------------ the copies, priced

# Where the block sits and which step it is at when the source is evaluated: an interior
# block (every element inside the matrices) at its second step. The sides are large and
# different, so that a row of A (K floats) is far from a row of B (N floats).
_SIDES = {"M": 1024, "N": 2048, "K": 4096}
_BLOCK_XY = (1, 1)
_INT_DEF = re.compile(r"\b(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:int|long|size_t|auto)\s+"
                      r"(\w+)\s*=\s*([^;{}]+);")
_FOR = re.compile(r"\bfor\s*\(\s*(?:const\s+)?(?:int|unsigned)\s+(\w+)\s*=")


def _bracket(text: str, start: int) -> tuple[str, int] | None:
    """(the text inside the bracket opening at text[start] == '[', the index after its
    closing bracket), or None when it does not close."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"[": 1, "]": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i], i + 1
    return None


def _subscripts(text: str, name: str):
    """(position, [index texts], end) of every `name[..][..]` in `text`."""
    for m in re.finditer(rf"\b{name}\s*\[", text):
        pos, idx = m.end() - 1, []
        while pos < len(text) and text[pos] == "[":
            got = _bracket(text, pos)
            if got is None:
                break
            idx.append(got[0])
            pos = got[1]
            while pos < len(text) and text[pos].isspace():
                pos += 1
        yield m.start(), idx, pos


def _env(block: int, tx: int, ty: int) -> dict:
    bx, by = _BLOCK_XY
    return {"threadIdx.x": tx, "threadIdx.y": ty, "threadIdx.z": 0,
            "blockIdx.x": bx, "blockIdx.y": by, "blockDim.x": block, "blockDim.y": block,
            "BLOCK": block, "k0": block, **_SIDES,
            # tile_row and tile_col come from the GRID choice (a conditional expression
            # the evaluator does not read): the block's place in either order.
            "tile_row": by, "tile_col": bx}


_DEFAULTS = ("tile_row", "tile_col")


def _is_store(code: str, end: int) -> bool:
    """Whether the subscript ending at `end` is assigned to (`=`, not `==`)."""
    return re.match(r"\s*=(?!=)", code[end:end + 40]) is not None


class _Unreadable(Exception):
    """The source says something this check does not read: it stays silent."""


def _values(expr: str, envs: list[dict]) -> list[int]:
    """`expr` evaluated in each environment (one per thread)."""
    try:
        f = compile_expression(expr, tuple(envs[0]))
        return [f(e) for e in envs]
    except (ExpressionError, KeyError, ZeroDivisionError, OverflowError, RecursionError):
        raise _Unreadable(expr) from None


def _threads(code: str, upto: int, block: int, loop_vars=()) -> list[dict]:
    """One environment per thread of the block: the built-in names, then every
    `int name = expression;` before position `upto` that the evaluator reads (in order);
    the loop variables in `loop_vars` bound to 0."""
    envs = [_env(block, t % block, t // block) for t in range(block * block)]
    for e in envs:
        e.update({v: 0 for v in loop_vars})
    for m in _INT_DEF.finditer(code):
        if m.start() >= upto:
            break
        name, expr = m.group(1), m.group(2)
        if name in loop_vars:
            continue
        try:
            vals = _values(expr, envs)
        except _Unreadable:
            if name not in _DEFAULTS:  # a name the evaluator cannot read is unknown from here on
                for e in envs:
                    e.pop(name, None)
            continue
        for e, v in zip(envs, vals):
            e[name] = v
    return envs


def _row_length(code: str, tile: str, block: int) -> int:
    m = re.search(rf"__shared__\s+float\s+{tile}\s*\[([^\]]+)\]\s*\[([^\]]+)\]", code)
    if not m:
        raise _Unreadable(tile)
    return _values(m.group(2), [{"BLOCK": block}])[0]


def _warps(values: list[int]) -> list[list[int]]:
    return [values[i:i + ch03_copies.WARP] for i in range(0, len(values), ch03_copies.WARP)]


def _describe_lanes(indices: list[int]) -> str:
    step = indices[1] - indices[0]
    if step == 0 and len(set(indices)) == 1:
        return "all 32 lanes read the same float"
    if step == 1 and indices == list(range(indices[0], indices[0] + len(indices))):
        return "its lanes read 32 neighbouring floats"
    return (f"neighbouring lanes read floats {step:,} apart (the check places the block in "
            f"matrices with M = {_SIDES['M']:,}, N = {_SIDES['N']:,}, K = {_SIDES['K']:,}: a "
            f"row of A is {_SIDES['K']:,} floats long, a row of B {_SIDES['N']:,})")


def _store_problems(code: str, block: int, tile: str, matrix: str, stride: int,
                    pos: int, idx: list[str], end: int) -> list[str]:
    """(what is wrong, what is costly) about one store into a tile and the load on its
    right-hand side: wrong, the elements or words the block cannot all have; costly,
    wavefronts or sectors beyond the fewest."""
    problems, wrong = [], []
    row_len = _row_length(code, tile, block)
    rhs = code[end:code.find(";", end)]
    envs = _threads(code, pos, block)
    where = f"{tile}[{idx[0].strip()}][{idx[1].strip()}]"
    words = [r * row_len + c for r, c in zip(_values(idx[0], envs), _values(idx[1], envs))]
    if any(not 0 <= w < block * row_len for w in words):
        return [f"the store {where} writes outside the tile's {block} x {row_len} words"], []
    if len(set(words)) < block * block:
        wrong.append(f"the {block * block} threads of a block store into only "
                        f"{len(set(words))} different words of {tile} with {where}: every "
                        "thread needs a place of its own in the tile")
    for w, lane_words in enumerate(_warps(words)):
        wf, ideal = ch03_copies.wavefronts(lane_words)
        if wf > ideal:
            bank, served = max(((b, sum(1 for x in set(lane_words) if x % 32 == b))
                                for b in range(32)), key=lambda x: x[1])
            problems.append(f"the store {where} costs warp {w} {wf} wavefronts where {ideal} "
                            f"would do: bank {bank} receives {served} different words (word w "
                            "of shared memory sits in bank w % 32)")
            break
    load = next(_subscripts(rhs, matrix), None)
    if load is None or len(load[1]) != 1:
        return wrong, problems
    text = load[1][0].strip()
    flat = _values(text, envs)
    if len(set(flat)) < block * block:
        wrong.append(f"the {block * block} threads of a block load only {len(set(flat))} "
                        f"different elements of {matrix} with {matrix}[{text}], where the tile "
                        f"holds {block * block}: each thread must copy an element of its own")
    for w, lane_idx in enumerate(_warps(flat)):
        got, fewest = ch03_copies.sectors(lane_idx)
        if got > fewest:
            problems.append(f"the load {matrix}[{text}] touches {got} sectors of 32 bytes in "
                            f"warp {w} where {fewest} would hold its floats: "
                            f"{_describe_lanes(lane_idx)} (chapter 02: a warp's load is "
                            "cheapest when neighbouring lanes read neighbouring floats)")
            break
    return wrong, problems


def _copy_problems(code: str, block: int) -> tuple[list[str], list[str]]:
    """(what is wrong, what is costly) about the copies, as `_store_problems`."""
    wrong, costly = [], []
    for tile, matrix, stride in (("As", "A", _SIDES["K"]), ("Bs", "B", _SIDES["N"])):
        for pos, idx, end in _subscripts(code, tile):
            if len(idx) != 2 or not _is_store(code, end):
                continue
            try:
                bad, dear = _store_problems(code, block, tile, matrix, stride, pos, idx, end)
            except _Unreadable:
                continue
            wrong += [p for p in bad if p not in wrong]
            costly += [p for p in dear if p not in costly]
    return wrong, costly


def _read_problems(code: str, block: int) -> list[str]:
    problems = []
    loops = [(m.start(), m.group(1)) for m in _FOR.finditer(code)]
    for tile in ("As", "Bs"):
        seen = set()
        for pos, idx, end in _subscripts(code, tile):
            if len(idx) != 2 or _is_store(code, end):
                continue                                   # a store, priced above
            names = set(re.findall(r"[A-Za-z_]\w*", idx[0] + " " + idx[1]))
            loop_vars = tuple(dict.fromkeys(v for p, v in loops
                                            if p < pos and v != "k0" and v in names))
            if not loop_vars or (idx[0], idx[1]) in seen:
                continue
            seen.add((idx[0], idx[1]))
            try:
                row_len = _row_length(code, tile, block)
                envs = _threads(code, pos, block, loop_vars)
                words = [r * row_len + c for r, c in zip(_values(idx[0], envs),
                                                         _values(idx[1], envs))]
            except _Unreadable:
                continue
            for w, lane_words in enumerate(_warps(words)):
                wf, ideal = ch03_copies.wavefronts(lane_words)
                if wf > ideal:
                    why = (" (a column of a tile whose rows are a multiple of 32 words "
                           "long lies in one bank)" if row_len % 32 == 0 else "")
                    problems.append(
                        f"the read {tile}[{idx[0].strip()}][{idx[1].strip()}] costs warp {w} "
                        f"{wf} wavefronts where {ideal} would do, at every "
                        f"{' and '.join(loop_vars)}: some of its lanes read different words "
                        f"of one bank{why}")
                    break
    return problems


# ------------------------------------------------------------------ the products, followed

_K_LOOP = re.compile(r"\bfor\s*\(\s*(?:const\s+)?(?:int|unsigned)\s+(\w+)\s*=\s*([^;]+);\s*(\w+)"
                     r"\s*(<=|<)\s*([^;]+);\s*(?:\+\+\s*(\w+)|(\w+)\s*\+\+|(\w+)\s*\+=\s*1)\s*\)")


def _tile_contents(code: str, block: int, tile: str, matrix: str, cols: int):
    """{word of the tile: ((row, column) of the matrix element stored there, (tx, ty) of
    the thread that stores it)} from the store `tile[..][..] = ... matrix[..] ...;`."""
    for pos, idx, end in _subscripts(code, tile):
        if len(idx) != 2 or not _is_store(code, end):
            continue
        rhs = code[end:code.find(";", end)]
        load = next(_subscripts(rhs, matrix), None)
        if load is None or len(load[1]) != 1:
            continue
        envs = _threads(code, pos, block)
        row_len = _row_length(code, tile, block)
        words = [r * row_len + c for r, c in zip(_values(idx[0], envs), _values(idx[1], envs))]
        flat = _values(load[1][0], envs)
        return {w: (divmod(f, cols), (e["threadIdx.x"], e["threadIdx.y"]))
                for w, f, e in zip(words, flat, envs)}, row_len
    raise _Unreadable(tile)


def _where(word: int, row_len: int, tile: str) -> str:
    return f"{tile}[{word // row_len}][{word % row_len}]"


def _product_problems(code: str, block: int) -> list[str]:
    a_of, a_len = _tile_contents(code, block, "As", "A", _SIDES["K"])
    b_of, b_len = _tile_contents(code, block, "Bs", "B", _SIDES["N"])
    loop = next((m for m in _K_LOOP.finditer(code) if m.group(1) != "k0"), None)
    if loop is None or len({g for g in (loop.group(1), loop.group(3), loop.group(6),
                                         loop.group(7), loop.group(8)) if g}) != 1:
        raise _Unreadable("loop")
    var, body = loop.group(1), code[loop.end():]
    reads = {}
    for tile in ("As", "Bs"):
        found = next(((pos, idx) for pos, idx, end in _subscripts(body, tile)
                      if len(idx) == 2 and not _is_store(body, end)), None)
        if found is None:
            raise _Unreadable(tile)
        reads[tile] = found
    envs = _threads(code, loop.start(), block)
    if not all("row" in e and "col" in e for e in envs[:1]):
        raise _Unreadable("row, col")
    first = _values(loop.group(2), envs[:1])[0]
    last = _values(loop.group(5), envs[:1])[0] - (loop.group(4) == "<")
    ks = range(first, last + 1)
    k0 = envs[0]["k0"]
    text = {t: f"{t}[{i[0].strip()}][{i[1].strip()}]" for t, (_, i) in reads.items()}
    words = {}
    for t, (_, idx) in reads.items():
        row_len = a_len if t == "As" else b_len
        words[t] = [[r * row_len + c for r, c in zip(_values(idx[0], k_envs),
                                                     _values(idx[1], k_envs))]
                    for k_envs in ([{**e, var: k} for e in envs] for k in ks)]
    where_a = {elem: w for w, (elem, _) in a_of.items()}
    where_b = {elem: w for w, (elem, _) in b_of.items()}
    look = ("; look at the indices of that read: which one must follow the thread, which "
            f"one follows {var}")
    for n, e in enumerate(envs):
        tx, ty, row, col = e["threadIdx.x"], e["threadIdx.y"], e["row"], e["col"]
        who = (f"thread (tx = {tx}, ty = {ty}) computes C[{row}][{col}] (the check places "
               f"the block at blockIdx (1, 1), at the step k0 = {k0})")
        used = []
        for j, k in enumerate(ks):
            wa, wb = words["As"][j][n], words["Bs"][j][n]
            if wa not in a_of or wb not in b_of:
                t, w = ("As", wa) if wa not in a_of else ("Bs", wb)
                return [f"{who}, but at {var} = {k} {text[t]} reads word {w} of {t}, which "
                        "no thread of the block wrote at this step" + look]
            (ar, ac), a_by = a_of[wa]
            (br, bc), b_by = b_of[wb]
            if ar != row or (bc == col and ac != br and ac != k0 + k):
                need, t, w, held, by = ((row, br if bc == col else k0 + k), "As", wa,
                                        f"A[{ar}][{ac}]", a_by)
            elif bc != col or ac != br:
                need, t, w, held, by = ((ac, col), "Bs", wb, f"B[{br}][{bc}]", b_by)
            else:
                used.append(ac)
                continue
            at = (where_a if t == "As" else where_b).get(need)
            row_len = a_len if t == "As" else b_len
            return [f"{who}, but at {var} = {k} its product reads {text[t]} = "
                    f"{_where(w, row_len, t)}, which holds {held} (copied by thread "
                    f"({by[0]}, {by[1]})); C[{row}][{col}] needs {t[0]}[{need[0]}][{need[1]}] "
                    "there" + (f", which the copies put in {_where(at, row_len, t)}"
                               if at is not None else "") + look]
        missing = sorted(set(range(k0, k0 + block)) - set(used))
        twice = sorted({c for c in used if used.count(c) > 1})
        if missing or twice:
            what = (f"never adds A[{row}][{missing[0]}] * B[{missing[0]}][{col}]"
                    + (f" (nor {len(missing) - 1} other products of this step)"
                       if len(missing) > 1 else "") if missing else
                    f"adds A[{row}][{twice[0]}] * B[{twice[0]}][{col}] more than once")
            return [f"{who}, and its loop over {var} runs {var} = {first} .. {last}: it "
                    f"{what}, while the tiles hold the {block} values of k from k0 to "
                    f"k0 + {block - 1}"]
    return []


def product_problems(source: str, block: int) -> list[str]:
    """The first thread whose products are not those of its own output (see the module's
    docstring); empty when every thread adds A[row][k] * B[k][col] once for every k of
    the tile, or when the source says something this check does not read."""
    try:
        return _product_problems(code_only(source), block)
    except (_Unreadable, KeyError, IndexError):
        return []


def early_exit(source: str) -> list[str]:
    """A `return` before the last __syncthreads() (typically `if (row >= M || col >= N)
    return;` at the top): the threads outside C leave without their copies and barriers,
    so their block reads tile elements nobody filled, and the barrier is one that not
    every thread reaches. A correctness test shows it only as wrong numbers at the edges,
    so name it here."""
    code = code_only(source)
    bars = [m.start() for m in re.finditer(r"\b__syncthreads\s*\(", code)]
    early = next((m for m in re.finditer(r"\breturn\b", code) if bars and m.start() < bars[-1]),
                 None)
    if early is None:
        return []
    return ["a `return` comes before a __syncthreads(): a thread "
            "outside C that leaves there skips its copies and the barriers, so its block "
            "reads tile elements nobody filled, and waits at a barrier not every thread "
            "reaches. Keep every thread in the loop to the end; guard only the copies (0.f "
            "outside the matrix) and the final store"]


def _thread_names(code: str) -> set[str]:
    """The names whose value differs between the threads of a block: threadIdx, and every
    `int name = expression;` whose expression uses one of them (row, col, tx, ...)."""
    names, defs = {"threadIdx"}, [(m.group(1), m.group(2)) for m in _INT_DEF.finditer(code)]
    grown = True
    while grown:
        grown = False
        for name, expr in defs:
            if name not in names and names & set(re.findall(r"[A-Za-z_]\w*", expr)):
                names.add(name)
                grown = True
    return names


def _if_before(code: str, end: int) -> tuple[str, int] | None:
    """(the condition, the position of its `if`) when code[:end] ends with `if (...)`."""
    before = code[:end].rstrip()
    if not before.endswith(")"):
        return None
    depth = 0
    for i in range(len(before) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(before[i], 0)
        if depth == 0:
            m = re.search(r"\bif\s*$", before[:i])
            return (before[i + 1:-1], m.start()) if m else None
    return None


def _conditions(code: str, pos: int) -> list[str]:
    """The conditions of the `if`s (and `else`s) under which the statement at code[pos]
    runs: the `if (...)` directly before it, and those of every brace around it."""
    found, start = [], pos
    direct = _if_before(code, pos)
    if direct:
        found.append(direct[0])
    depth = 0
    for i in range(start - 1, -1, -1):
        depth += {"}": 1, "{": -1}.get(code[i], 0)
        if depth >= 0:
            continue
        depth = 0
        got = _if_before(code, i)
        if got is None and re.search(r"\belse\s*$", code[:i]):
            close = re.search(r"\}\s*else\s*$", code[:i])
            if close:                               # the if of `if (c) { .. } else {`
                d = 0
                for j in range(close.start(), -1, -1):
                    d += {"}": 1, "{": -1}.get(code[j], 0)
                    if d == 0:
                        got = _if_before(code, j)
                        break
        if got:
            found.append(got[0])
    return found


def divergent_barrier(source: str) -> list[str]:
    """A __syncthreads() under an `if` whose condition differs between the threads of a
    block (typically the bounds check `if (row < M && col < N)` around the step): the
    threads for which it is false never reach that barrier while the others wait there.
    CUDA leaves that undefined: wrong numbers at the edges, or a kernel that hangs. A
    correctness test shows it at best as wrong numbers, so name it here, as `early_exit`
    names a return."""
    code = code_only(source)
    thread = _thread_names(code)
    for m in re.finditer(r"\b__syncthreads\s*\(", code):
        for cond in _conditions(code, m.start()):
            used = sorted(thread & set(re.findall(r"[A-Za-z_]\w*", cond)))
            if used:
                return [f"a __syncthreads() runs only under `if ({' '.join(cond.split())})`, "
                        f"a condition that differs between the threads of a block (it reads "
                        f"{', '.join(used)}): the threads for which it is false never reach "
                        "that barrier while the others wait there. CUDA leaves that "
                        "undefined: the kernel may give wrong numbers or hang. Every thread "
                        "of the block must reach every barrier; guard only the copies (0.f "
                        "outside the matrix) and the final store"]
    return []


def copy_problems(source: str, block: int) -> list[str]:
    """The price of the copies and reads in `source` (see the module's docstring): empty
    when they are coalesced and conflict-free, or when the source says something this
    check does not read."""
    code = code_only(source)
    wrong, costly = _copy_problems(code, block)
    return wrong + costly + _read_problems(code, block)


_COPY_HINT = (" (a warp is one row of threads, threadIdx.y fixed and threadIdx.x = 0..31 at "
              "BLOCK = 32: its 32 loads should be 32 neighbouring floats, its store and reads "
              "32 different banks or one shared word)")


def _guarded(code: str, pos: int) -> bool:
    """Whether the statement starting at code[pos] runs only under an `if (...)`: it
    follows the condition directly, or lies in the braces that follow it."""
    before = code[:pos].rstrip()
    if not before.endswith(")"):
        depth = 0                       # the brace that opens the statement's block
        for i in range(pos - 1, -1, -1):
            depth += {"}": 1, "{": -1}.get(code[i], 0)
            if depth < 0:
                before = code[:i].rstrip()
                break
        else:
            return False
    if not before.endswith(")"):
        return False
    depth = 0
    for i in range(len(before) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(before[i], 0)
        if depth == 0:
            return re.search(r"\bif\s*$", before[:i]) is not None
    return False


def unfilled_edges(code: str) -> list[str]:
    """A tile whose only store sits under an `if` (in bounds) with nothing written
    otherwise: at the edges of the matrix the thread's word keeps the previous step's
    element, which the products then add. Step 3 would see only wrong numbers; this names
    the cause. Empty where a tile has several stores (an else, a zero written first)."""
    found = []
    for tile, matrix in (("As", "A"), ("Bs", "B")):
        stores = [pos for pos, _, end in _subscripts(code, tile) if _is_store(code, end)]
        if len(stores) == 1 and _guarded(code, stores[0]):
            found.append(
                f"the store into {tile} runs only inside an if, and nothing is written when "
                f"the element lies outside {matrix}: at the last step along K, and in the "
                f"blocks at the edge of C, that word of {tile} keeps the element of the "
                f"previous step (or whatever shared memory held at the first), and the "
                f"products of the threads that read it add it to their sums. Write 0.f "
                f"where the element lies outside {matrix} (an else, or cond ? {matrix}[..] "
                f": 0.f)")
    return found


def copies_priced(block: int) -> Callable[[str], list[str]]:
    """The copy check of exercise 03; silent while the source still holds the stub.

    What is wrong comes before what is costly: copies that cannot fill the tiles, then a
    product that reads the wrong element or a k left out, then the price of the accesses.
    A read such as Bs[tx][k] is both a wrong product and a conflicted read; the student
    must fix the index, not make the read cheaper."""
    def check(source: str) -> list[str]:
        if STUB in source:
            return []
        code = code_only(source)
        unfilled = unfilled_edges(code)
        if unfilled:
            return unfilled
        wrong, costly = _copy_problems(code, block)
        if wrong:
            return [wrong[0] + _COPY_HINT] + wrong[1:]
        products = product_problems(source, block)
        priced = costly + _read_problems(code, block)
        if products:
            return products
        if priced:
            return [priced[0] + _COPY_HINT] + priced[1:]
        return []
    check.__name__ = f"copies_priced_{block}"
    return check
