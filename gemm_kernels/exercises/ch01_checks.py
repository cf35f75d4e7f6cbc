"""Chapter 01's static check: the student's thread -> (row, col) mapping, for both values
of X_TO_COL, and the row strides of the dot product, all without a GPU.

The student writes `row` and `col` from the thread's place in the grid (and X_TO_COL),
and the loop `acc += A[...] * B[...]`. The check:

* runs the kernel's statements before `if (row < M && col < N)` (the given `x` and `y`,
  then what the student wrote) for every thread of the grid the launcher starts, on a
  C of 37 x 21 (neither side a multiple of a block), at X_TO_COL = 0 and 1 and BLOCK = 8
  and 32: every element of C must be computed by exactly one thread;
* asks that neighbouring threads in x (neighbouring lanes of a warp) take neighbouring
  columns of one row with X_TO_COL = 1, and neighbouring rows of one column with
  X_TO_COL = 0: the two mappings the chapter compares;
* evaluates each `A[...]` and `B[...]` of the dot product, where it is written with
  row, col, the loop's variable and M, N, K, on a 7 x 13 x 5 problem: A is M x K and B is
  K x N, row-major, so row r of A starts at r * K and row k of B at k * N. The chapter's
  indexing mistake, `A[row * M + k]`, is right only when M == K;
* runs the header of the loop over k (`for (int k = 0; k < K; ++k)`) at K = 5: it must
  take every k from 0 to K - 1 once (`k < K - 1` leaves a product out, `k <= K` reads
  past the row of A and past the end of B); and the loop must add each product to the
  accumulator (`acc = A[...] * B[...]` keeps only the last one).

Where a statement cannot be read (a form this reader does not know), that part of the
check is left out: the run of the kernel on ragged shapes still judges the numbers.
"""
from __future__ import annotations

import re

from gemm_kernels.core.kernels import get as get_kernel
from gemm_kernels.exercises.ch01_02_cstatements import (Unsupported, cells_text,
                                                        compile_expression,
                                                        compile_statements, placement,
                                                        readable, thread_names)
from gemm_kernels.exercises.stubs import stub_lines

KERNEL, ENTRY = "naive", "sgemm_naive"
SHAPE = (37, 21)                     # M x N of C: ragged for blocks of 8 and 32
BLOCKS = (8, 32)
STRIDE_SHAPE = (7, 13, 5)            # M, N, K all different: a wrong stride shows
MAPPINGS = {1: "x->col", 0: "x->row"}


def _elements(run, names: list[str], block: int, x_to_col: int, M: int, N: int):
    """{(row, col): [threads]} over the whole grid, and {thread: (row, col)} for the
    threads of block (0, 0); a thread is (threadIdx.x, threadIdx.y) of block (bx, by)."""
    kern = get_kernel(KERNEL)
    p = kern.resolve({"BLOCK": block, "MAPPING": MAPPINGS[x_to_col]})
    gx, gy, _ = kern.grid(p, (M, N, 1))
    values = dict(zip(names, (block, x_to_col)))
    owners, first = {}, {}
    for bx in range(gx):
        for by in range(gy):
            for ty in range(block):
                for tx in range(block):
                    env = {**values, "M": M, "N": N, "K": 1,
                           **thread_names((bx, by, 0), (tx, ty, 0), (block, block, 1),
                                          (gx, gy, 1))}
                    out = run(env)
                    rc = (out.get("row"), out.get("col"))
                    if (bx, by) == (0, 0):
                        first[(tx, ty)] = rc
                    if rc[0] is not None and 0 <= rc[0] < M and 0 <= rc[1] < N:
                        owners.setdefault(rc, []).append(((bx, by), (tx, ty)))
    return owners, first


def _thread(t) -> str:
    (bx, by), (tx, ty) = t
    return f"thread ({tx}, {ty}) of block ({bx}, {by})"


def mapping_problems(source: str) -> list[str]:
    """Problems of the row and col the source computes, at X_TO_COL = 1 then 0."""
    found = readable(source, ENTRY)
    if found is None:
        return []
    run, names = found
    M, N = SHAPE
    for x_to_col in (1, 0):
        setting = f"{names[1]} = {x_to_col}"
        for block in BLOCKS:
            try:
                owners, first = _elements(run, names, block, x_to_col, M, N)
            except Unsupported:
                return []
            at = f"with {setting}, BLOCK = {block}, on a {M} x {N} C"
            twice = next(((rc, ts) for rc, ts in owners.items() if len(ts) > 1), None)
            if twice:
                (r, c), ts = twice
                return [f"{at}, {_thread(ts[0])} and {_thread(ts[1])} both compute "
                        f"C[{r}][{c}]: every element needs its own thread"]
            missing = [(r, c) for r in range(M) for c in range(N) if (r, c) not in owners]
            if missing:
                r, c = missing[0]
                return [f"{at}, {len(missing):,} of its {M * N:,} elements are computed by "
                        f"no thread (C[{r}][{c}] for one): the grid covers C only if row "
                        "comes from the coordinate that runs over M (the launcher makes "
                        "x run over the rows of C when the mapping is x->row, over its "
                        "columns when it is x->col)"]
            along = "column" if x_to_col else "row"
            r0, c0 = first[(0, 0)]
            r1, c1 = first[(1, 0)]
            want = (r0, c0 + 1) if x_to_col else (r0 + 1, c0)
            if (r1, c1) != want:
                lanes = [first[(tx, 0)] for tx in range(min(block, 32))]
                where = cells_text(lanes)
                return [f"{at}, threads (0, 0) and (1, 0) of block (0, 0) compute "
                        f"C[{r0}][{c0}] and C[{r1}][{c1}], so the first {len(lanes)} lanes "
                        f"of warp 0 compute {where}; {setting} asks for neighbouring "
                        f"{'columns of one row' if x_to_col else 'rows of one column'} "
                        f"({MAPPINGS[x_to_col]}: x runs along the {along}s of C)"]
    return []


_LOOP = re.compile(r"for\s*\(\s*(?:int|unsigned|auto|long)?\s*([A-Za-z_]\w*)\s*=")
_ACCESS = re.compile(r"\b([AB])\s*\[")


def _subscripts(text: str):
    """(matrix, index text) of each A[...] and B[...] in `text`, brackets balanced."""
    out = []
    for m in _ACCESS.finditer(text):
        depth, start = 0, m.end() - 1
        for end in range(start, len(text)):
            depth += {"[": 1, "]": -1}.get(text[end], 0)
            if depth == 0:
                out.append((m.group(1), text[start + 1:end].strip()))
                break
    return out


def stride_problems(source: str) -> list[str]:
    """Problems of the A and B subscripts of the dot product (row strides)."""
    try:
        _, rest = placement(source, ENTRY)
    except Unsupported:
        return []
    loop = _LOOP.search(rest)
    if not loop:
        return []
    k_name = loop.group(1)
    M, N, K = STRIDE_SHAPE
    dims = {"A": (M, K, "M x K", lambda r, c, k: r * K + k, "row r of A starts at r * K"),
            "B": (K, N, "K x N", lambda r, c, k: k * N + c, "row k of B starts at k * N")}
    problems = []
    for matrix, index in _subscripts(rest):
        try:
            f = compile_expression(index)
        except Unsupported:
            continue
        _, _, shape, right, why = dims[matrix]
        for r, c, k in ((M - 1, N - 1, K - 1), (1, 2, 3), (2, 0, 1)):
            try:
                got = f({"row": r, "col": c, k_name: k, "M": M, "N": N, "K": K})
            except Unsupported:
                break
            if got != right(r, c, k):
                problems.append(
                    f"{matrix}[{index}] at row = {r}, col = {c}, {k_name} = {k} of a "
                    f"{M} x {N} x {K} problem reads element {got} of {matrix} ({shape}, "
                    f"row-major), not {right(r, c, k)}: {why}"
                    + (" (the stride M is right only when M == K, which is why square "
                       "tests miss it)" if matrix == "A" and got == r * M + k else ""))
                break
    return problems


_FOR = re.compile(r"for\s*\(([^;()]*);([^;]*);([^)]*)\)")
_STEP = {r"^\+\+\s*(\w+)$": r"\1 += 1", r"^(\w+)\s*\+\+$": r"\1 += 1"}


def _loop_values(init: str, cond: str, step: str, K: int) -> tuple[str, list[int]] | None:
    """(the loop variable, the values it takes) for the loop header at K; None where the
    header is not one this reader follows (a pointer, a call, another variable)."""
    name = re.search(r"([A-Za-z_]\w*)\s*=[^=]", init + " ")
    if not name:
        return None
    k = name.group(1)
    for pattern, repl in _STEP.items():
        step = re.sub(pattern, repl, step.strip())
    M, N, _ = STRIDE_SHAPE
    try:
        env = compile_statements(init + ";")({"M": M, "N": N, "K": K})
        test, advance = compile_expression(cond), compile_statements(step + ";")
        values = []
        while test(env) and len(values) <= 2 * K + 2:
            values.append(env[k])
            env = advance(env)
    except (Unsupported, KeyError):
        return None
    return k, values


def _body(text: str) -> str:
    """The statement after a loop header: a { block } or one statement up to its ';'."""
    text = text.lstrip()
    if not text.startswith("{"):
        return text.split(";", 1)[0] + ";"
    depth = 0
    for end, ch in enumerate(text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth == 0:
            return text[1:end]
    return text


def loop_problems(source: str) -> list[str]:
    """Problems of the dot product's loop: the values its variable takes (every k from 0
    to K - 1, once) and how the products reach the accumulator (added, not assigned)."""
    try:
        _, rest = placement(source, ENTRY)
    except Unsupported:
        return []
    loop = _FOR.search(rest)
    if not loop:
        return []
    problems = []
    K = STRIDE_SHAPE[2]
    header = f"for ({'; '.join(' '.join(p.split()) for p in loop.groups())})"
    found = _loop_values(*loop.groups(), K)
    if found and sorted(found[1]) != list(range(K)):
        k, values = found
        took = (f"{k} = {values[0]} to {values[-1]}" if values and
                values == list(range(values[0], values[-1] + 1)) else
                f"{k} = {', '.join(map(str, values[:8]))}" if values else "no value at all")
        left = [v for v in range(K) if v not in values]
        why = (f"at {k} = K it reads A[row * K + K], the first element of the next row "
               "of A, and B[K * N + col], past the end of B" if K in values else
               f"the product of {k} = {', '.join(map(str, left))} "
               f"{'is' if len(left) == 1 else 'are'} left out" if left else
               "a product is added twice")
        problems.append(f"at K = {K} the loop {header} takes {took}: the dot product "
                        f"needs every k from 0 to K - 1 = {K - 1}, once each ({why})")
    acc = re.search(r"gemm_epilogue\s*\(\s*([A-Za-z_]\w*)", rest)
    acc = acc.group(1) if acc else "acc"
    body = _body(rest[loop.end():])
    for m in re.finditer(rf"(?<![\w.]){re.escape(acc)}\s*=(?!=)\s*([^;]*);", body):
        if not re.search(rf"\b{re.escape(acc)}\b", m.group(1)) and re.search(r"\b[AB]\s*\[",
                                                                           m.group(1)):
            problems.append(f"inside the loop, '{acc} = {' '.join(m.group(1).split())}' "
                            f"replaces {acc} at every k, so only the last product is left: "
                            f"add each product to it ('{acc} += ...')")
            break
    return problems


def index_check(source: str) -> list[str]:
    """The static check of exercise 01_index: problems, empty when the mapping covers C
    once in both settings, runs the right way in each, the strides are right, and the
    loop adds the product of every k from 0 to K - 1 to the accumulator."""
    if stub_lines(source):          # the grader already names the lines still to write
        return []
    return mapping_problems(source) + stride_problems(source) + loop_problems(source)
