"""Static checks of chapters 05-07: read from the submission's SASS, and chapter 05's
thread -> outputs mapping read from its source and priced with the bank model.

From the SASS: what the compiled inner loop issues, which no reading of the source can
tell for sure, since the compiler merges, hoists and widens loads on its own. Chapters 05
and 06 ask for the shared-memory operands of the inner loop to be read once and reused
from registers: `shared_loads_per_ffma` bounds the number of shared load instructions
(LDS of any width) per FFMA by what register reuse gives with one float per load. The
compiled kernel is the one the grader's static step has just built (same kernel, name and
configuration), so the SASS comes from the compiler's cache. In chapter 05's kernel the
order of the two loops does not change that count once both are unrolled (ptxas loads
each distinct word once); a loop kept rolled does.

From the source: `thread_mapping` (chapter 05, below) evaluates the student's two lines
`tc = ...;` and `tr = ...;` for every thread of a block and prices what they decide.
"""
from __future__ import annotations

import re
from fractions import Fraction
from typing import Callable

from gemm_kernels.core import analysis
from gemm_kernels.exercises.submission import submission_sass

_OPCODE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", re.M)


def opcodes(sass: str) -> list[str]:
    """The opcode (with its modifiers, e.g. LDS.128, LDG.E.128.CONSTANT) of every
    instruction in nvdisasm's text, in order; predicates are skipped."""
    return _OPCODE.findall(sass)


def count(sass: str, pattern: str) -> int:
    """How many instructions' opcodes match the regular expression `pattern` whole."""
    rx = re.compile(pattern)
    return sum(1 for op in opcodes(sass) if rx.fullmatch(op))


def between_barriers(ops: list[str]) -> list[str]:
    """The instructions between the first two barriers (BAR.SYNC): in the tiled kernels,
    the work on one pair of tiles, without the copies before it or the epilogue after
    the k loop (whose FFMAs, alpha * acc + beta * C, are not the inner loop's). All of
    them when there are fewer than two barriers."""
    bars = [i for i, op in enumerate(ops) if op.startswith("BAR.SYNC")]
    return ops[bars[0] + 1:bars[1]] if len(bars) >= 2 else ops


def load_ratio(sass: str) -> tuple[int, int]:
    """(shared load instructions of any width, FFMA instructions) between the barriers.
    A loop the compiler kept rolled counts once, as its body: the ratio is still the
    loop's loads per FFMA when the loads sit inside it too (`rolled_products` says what
    to report when they do not)."""
    ops = between_barriers(opcodes(sass))
    return (sum(1 for op in ops if re.fullmatch(r"LDS(\.\w+)*", op)),
            sum(1 for op in ops if re.fullmatch(r"FFMA(\.\w+)*", op)))


def rolled_loops(sass: str) -> list[list[str]]:
    """The opcodes of each loop the compiler kept rolled between the first two barriers
    (`analysis.loops`), without its branch back. Such a body appears once in the code but
    runs once per trip, so counts taken from the code undercount what it executes."""
    ins = analysis.instructions(sass)
    bars = [a for a, _, text in ins if text.startswith("BAR.SYNC")]
    if not bars:
        return []
    start, end = bars[0], bars[1] if len(bars) > 1 else float("inf")
    return [[text.split()[0] for a, _, text in ins if lo <= a < hi]
            for lo, hi in analysis.loops(sass) if start < lo and hi < end]


def _is(op: str, name: str) -> bool:
    return re.fullmatch(rf"{name}(\.\w+)*", op) is not None


def rolled_products(sass: str) -> str | None:
    """What to say when the FFMAs between the barriers sit in rolled loops that hold no
    shared load (a loop over j or i left rolled), or None. The loads per FFMA mean
    nothing there: the loads lie outside those loops and run once, the FFMAs inside run
    once per trip, and the code holds each only once. What such a loop does cost is
    local memory: the array it indexes with a run-time value (acc, a[], b[]) is not in
    registers."""
    loops = [body for body in rolled_loops(sass)
             if any(_is(op, "FFMA") for op in body) and not any(_is(op, "LDS") for op in body)]
    if not loops:
        return None
    ffma = sum(_is(op, "FFMA") for body in loops for op in body)
    ldl = sum(_is(op, "LDL") for body in loops for op in body)
    stl = sum(_is(op, "STL") for body in loops for op in body)
    local = (f": each of their FFMAs comes with {ldl / ffma:.0f} local-memory loads (LDL) "
             f"and {stl / ffma:.0f} store{'' if stl == ffma else 's'} (STL), because the "
             "array the loop indexes with its run-time counter lives in local memory, not "
             "in registers" if ldl or stl else "")
    return (f"the multiply-adds sit in {len(loops)} loop{'s' if len(loops) > 1 else ''} "
            f"the compiler kept rolled (each ends in a branch back to its start), with no "
            f"shared load inside{local}; unroll every loop that indexes acc, a[] or b[]. "
            "(The shared loads per FFMA are not counted here: a rolled loop's FFMA appears "
            "once in the code but runs once per trip)")


def shared_loads_per_ffma(exercise: str, kernel: str, params: dict,
                          loads: int, per_ffma: int, why: str) -> Callable[[str], list[str]]:
    """A static check: at most `loads` shared load instructions per `per_ffma` FFMA in
    the submission's SASS; `why` says where the bound comes from."""
    bound = Fraction(loads, per_ffma)
    def check(source: str) -> list[str]:
        sass = submission_sass(exercise, kernel, params, source)
        if sass is None:
            return []
        lds, ffma = load_ratio(sass)
        if not ffma:
            return ["no FFMA between the two __syncthreads(): the loop that multiplies "
                    "and adds is missing"]
        rolled = rolled_products(sass)
        if rolled:
            return [rolled]
        if Fraction(lds, ffma) > bound:
            return [f"the inner loop issues {lds} shared loads (LDS) for {ffma} FFMA, "
                    f"{lds / ffma:.2f} per FFMA; "
                    f"at most {float(bound):.2f} expected ({why})"]
        return []
    check.__name__ = f"shared_loads_per_ffma_{exercise}"
    return check


# ------------------------------------------------------------------ chapter 05's mapping
#
# Chapter 05's exercise leaves the thread -> outputs mapping to the student: two lines,
# `tc = <expression>;` and `tr = <expression>;` in t, BM, BN, BK, TM and NT, give thread t
# the TM outputs at rows tr*TM .. tr*TM + TM-1 of column tc of the block's C tile. Which
# lanes of a warp share a row group and which share a column decides what the inner loop
# costs in shared memory: the reads of As[tr*TM + i][k..k+3] (LDS.128) are a broadcast
# when the lanes share tr, and the reads of Bs[k][tc] (LDS) one wavefront when the lanes'
# columns fall in different banks. `thread_mapping` evaluates the two expressions for
# every thread, refuses a mapping that leaves an output to no thread or to two, prices
# one step of every warp with the bank model at the widths the chapter's loop compiles
# to (A 128-bit, four k at a time; B 32-bit), and counts the 32-byte sectors of each
# warp's stores of C. The compiler cannot change any of this: it is the mapping's.

def mapping_expressions(source: str) -> tuple[str, str] | str:
    """(tc's expression, tr's expression) of the lines `tc = ...;` and `tr = ...;`, or a
    problem (an empty string while the source still holds the stub, which the grader
    reports itself)."""
    from gemm_kernels.exercises.cexpr import code_only
    from gemm_kernels.exercises.stubs import STUB
    if STUB in source:
        return ""
    text = re.sub(r"\bint\s+tc\s*=\s*0\s*,\s*tr\s*=\s*0\s*;", " ", code_only(source))
    found = {}
    for name, what in (("tc", "column of the C tile"), ("tr", "group of TM rows")):
        lines = re.findall(rf"(?<![\w.]){name}\s*=(?!=)\s*([^;]+);", text)
        if re.search(rf"(?<![\w.]){name}\s*(<<|>>|[-+*/%&|^])=|\+\+\s*{name}\b|--\s*{name}\b"
                     rf"|(?<![\w.]){name}\s*(\+\+|--)", text):
            return (f"{name} is changed after its line `{name} = <expression>;`: the check "
                    "reads that one line, so write the whole mapping there")
        if not lines:
            return (f"no line `{name} = <expression>;`: write the thread's {what} as one "
                    f"assignment in t, BM, BN, BK, TM and NT")
        if len(lines) > 1:
            return f"{name} is assigned {len(lines)} times: the check reads one line `{name} = ...;`"
        found[name] = lines[0].strip()
    return found["tc"], found["tr"]


def mapping_table(tc: str, tr: str, params: dict) -> list[tuple[int, int]] | str:
    """(tc, tr) of every thread of a block at `params`, or a problem."""
    from gemm_kernels.exercises.cexpr import ExpressionError, compile_expression
    p = params
    nt = p["BM"] * p["BN"] // p["TM"]
    names = ("t", "threadIdx.x", "BM", "BN", "BK", "TM", "NT")
    try:
        f_tc, f_tr = compile_expression(tc, names), compile_expression(tr, names)
        out = []
        for t in range(nt):
            env = {"t": t, "threadIdx.x": t, "BM": p["BM"], "BN": p["BN"], "BK": p["BK"],
                   "TM": p["TM"], "NT": nt}
            out.append((f_tc(env), f_tr(env)))
    except ExpressionError as e:
        return f"cannot evaluate the mapping: {e}"
    return out


def coverage_problems(places: list[tuple[int, int]], params: dict) -> list[str]:
    """An output of the tile left to no thread or to two, or a (tc, tr) outside the tile."""
    p = params
    rows = p["BM"] // p["TM"]
    for t, (tc, tr) in enumerate(places):
        if not (0 <= tc < p["BN"] and 0 <= tr < rows):
            return [f"thread {t} gets tc = {tc}, tr = {tr}, outside the tile: tc must lie in "
                    f"0..{p['BN'] - 1} (BN = {p['BN']} columns) and tr in 0..{rows - 1} "
                    f"(BM / TM = {rows} groups of TM = {p['TM']} rows)"]
    seen: dict[tuple[int, int], int] = {}
    for t, place in enumerate(places):
        if place in seen:
            tc, tr = place
            return [f"threads {seen[place]} and {t} both get tc = {tc}, tr = {tr}: both would "
                    f"compute rows {tr * p['TM']}..{tr * p['TM'] + p['TM'] - 1} of column "
                    f"{tc}, and some other outputs of the tile would get no thread"]
        seen[place] = t
    return []


def _warp_lanes(places, warp):
    return places[warp * 32:(warp + 1) * 32]


def mapping_step(places: list[tuple[int, int]], params: dict):
    """Per warp: (wavefronts of one step's shared loads, their ideal), and the costliest
    read of A and of B that pays more than its ideal, described (one text per operand)."""
    from gemm_kernels.memory import banks
    p = params
    BK, BN, TM = p["BK"], p["BN"], p["TM"]
    b_start = p["BM"] * BK          # Bs follows As; BM*BK words is a multiple of 32
    cost, worst = [], {}
    for warp in range(len(places) // 32):
        lanes = _warp_lanes(places, warp)
        total = ideal = 0
        reads = [("A", f"As[tr*TM + {i}][{k}..{k + 3}]", 16,
                  [4 * ((tr * TM + i) * BK + k) for _, tr in lanes])
                 for i in range(TM) for k in range(0, BK, 4)]
        reads += [("B", f"Bs[{k}][tc]", 4, [4 * (b_start + k * BN + tc) for tc, _ in lanes])
                  for k in range(BK)]
        for operand, what, width, addresses in reads:
            r = banks.analyse(addresses, width)
            total, ideal = total + r.wavefronts, ideal + r.ideal
            cheapest = 2 if operand == "A" else 1
            if r.wavefronts > cheapest and (operand not in worst or
                                            r.wavefronts > worst[operand][0]):
                rows = len({tr for _, tr in lanes})
                cols = len({tc for tc, _ in lanes})
                spread = (f"its 32 lanes read {rows} different row groups (tr)" if operand == "A"
                          else f"its 32 lanes read {cols} different columns (tc)")
                worst[operand] = (r.wavefronts,
                                  f"the read of {what} ({8 * width}-bit) in warp {warp} costs "
                                  f"{r.wavefronts} wavefronts where {cheapest} would do: "
                                  f"{spread}, and the busiest bank serves "
                                  f"{r.max_degree} different words")
        cost.append((total, ideal))
    return cost, [text for _, text in worst.values()]


def store_sectors(places: list[tuple[int, int]], params: dict, N: int = 4096) -> list[int]:
    """Per warp: the most 32-byte sectors one of its TM stores of C touches (row-major C
    with N columns; a warp of 32 lanes storing 4 bytes each needs at least 4)."""
    p = params
    out = []
    for warp in range(len(places) // 32):
        lanes = _warp_lanes(places, warp)
        out.append(max(len({((tr * p["TM"] + i) * N + tc) * 4 // 32 for tc, tr in lanes})
                       for i in range(p["TM"])))
    return out


def mapping_problems(tc: str, tr: str, params: dict, reference=("t % BN", "t / BN")) -> list[str]:
    """Everything wrong with the mapping (tc, tr) at `params`: coverage, the shared-memory
    cost of one step against the chapter's mapping (`reference`), the C stores' sectors."""
    places = mapping_table(tc, tr, params)
    if isinstance(places, str):
        return [places]
    bad = coverage_problems(places, params)
    if bad:
        return bad
    budget = max(t for t, _ in mapping_step(mapping_table(*reference, params), params)[0])
    cost, worst = mapping_step(places, params)
    problems = []
    over = next(((w, t) for w, (t, _) in enumerate(cost) if t > budget), None)
    if over:
        warp, total = over
        problems.append(f"one step along K costs warp {warp} {total:,} shared-memory "
                        f"wavefronts in its loads, more than the {budget:,} a warp can get "
                        "away with (every read of A a broadcast, every read of B conflict-free)")
        problems += worst
    sectors = store_sectors(places, params)
    if max(sectors) > 4:
        warp = max(range(len(sectors)), key=sectors.__getitem__)
        problems.append(f"a store of C by warp {warp} touches {sectors[warp]} 32-byte "
                        "sectors where 4 would do: its 32 lanes should write 32 neighbouring "
                        "columns of one row (chapter 02)")
    return problems


_PRICE_IT = (" (a warp is 32 consecutive t, and which of them share tr and which share tc "
             "decides the price: price As[tr*TM + i][k..k+3], one LDS.128, and Bs[k][tc], "
             "one LDS, for lanes 0-31 with chapter 04's bank rules)")


# A tile that is not square, where a mapping that confuses BM with BN, or hard-codes the
# default's 64, leaves outputs to no thread (one of the sweep's fastest tiles).
OTHER_TILE = {"BM": 32, "BN": 128, "BK": 16, "TM": 16}


def other_tile_problems(tc: str, tr: str, other: dict = OTHER_TILE) -> list[str]:
    """The coverage of the mapping at a second, non-square tile: the kernel is a template
    compiled for every tile of the sweep, so the two lines must give every output of any
    BM x BN tile to one thread, not only of the graded 64 x 64 one."""
    places = mapping_table(tc, tr, other)
    bad = [places] if isinstance(places, str) else coverage_problems(places, other)
    if not bad:
        return []
    nt = other["BM"] * other["BN"] // other["TM"]
    return [f"the mapping covers the graded 64 x 64 tile, but the kernel is a template "
            f"compiled for other tiles too, and at BM = {other['BM']}, BN = {other['BN']}, "
            f"BK = {other['BK']}, TM = {other['TM']} ({nt} threads) {bad[0]}. Write tc and "
            "tr in BM, BN, TM (which of them counts the columns of the tile?), not in the "
            "numbers of the default tile"]


def thread_mapping(exercise: str, params: dict) -> Callable[[str], list[str]]:
    """The static check of exercise 05 (see above), at the graded tile and at a
    non-square one (`other_tile_problems`): silent while the source holds the stub,
    which the grader reports itself."""
    def check(source: str) -> list[str]:
        found = mapping_expressions(source)
        if isinstance(found, str):
            return [found] if found else []
        problems = mapping_problems(*found, params)
        if problems and "wavefronts" in problems[0]:
            problems[0] += _PRICE_IT
        return problems or other_tile_problems(*found)
    check.__name__ = f"thread_mapping_{exercise}"
    return check


# ------------------------------------------------------------------ chapter 05's products
#
# A wrong index in the loop of products shows in step 3 as a wrong element, far from its
# cause. `trace_products` follows the loop instead, before anything runs: the statement
# `acc[..] += <factor> * <factor>;` between the two barriers, each factor a read
# `As[..][..]` or `Bs[..][..]`, a `float name = As/Bs[..][..];` read before it, or an
# element `name[..]` of an array filled by `name[v] = As/Bs[..][..];` in a loop over v
# (chapter 06's a[] and b[]); every `for (int v = a; v < b; ++v)` around the statement is
# walked, for each traced thread with its own (tc, tr). Each output acc[..] of a thread is
# one element (row, column) of the C tile (the given stores say which); it must add
# As[that row][k] * Bs[k][that column] once for every k of the tile. The first output that
# does not is named with its thread, the k at which it went wrong, what it read and the
# row of As and column of Bs it needed. Chapters 05 and 06 share it.

_FLOAT_READ = re.compile(r"\bfloat\s+(\w+)\s*=\s*(As|Bs)\s*\[([^\]]+)\]\s*\[([^\]]+)\]\s*;")
_ARRAY_FILL = re.compile(r"(?<![\w.])(\w+)\s*\[\s*(\w+)\s*\]\s*=(?!=)\s*(As|Bs)\s*"
                         r"\[([^\]]+)\]\s*\[([^\]]+)\]\s*;")
_TILE_READ = re.compile(r"^(As|Bs)\s*\[([^\]]+)\]\s*\[([^\]]+)\]$")
_ELEMENT = re.compile(r"^(\w+)\s*\[([^\]]+)\]$")
_ACC_ADD = re.compile(r"\bacc((?:\s*\[[^\]]+\])+)\s*\+=\s*([^;]+);")
_LOOP = re.compile(r"\bfor\s*\(\s*(?:const\s+)?int\s+(\w+)\s*=\s*([^;]+);\s*(\w+)\s*(<=|<)"
                   r"\s*([^;]+);\s*(?:\+\+\s*(\w+)|(\w+)\s*\+\+|(\w+)\s*\+=\s*1)\s*\)")


class Unread(Exception):
    """The loop says something this check does not read: it stays silent."""


def _between_barriers_text(code: str) -> str:
    at = [m.end() for m in re.finditer(r"__syncthreads\s*\(\s*\)\s*;", code)]
    if len(at) < 2:
        raise Unread("barriers")
    return code[at[0]:at[1] - len("__syncthreads();")]


def _statement_end(code: str, pos: int) -> int:
    """Where the statement that starts at `pos` ends: a `{ .. }` block, a nested `for`,
    or a simple statement up to its `;` (a `#pragma` line before it skipped)."""
    while True:
        m = re.match(r"\s*#[^\n]*\n", code[pos:])
        if not m:
            break
        pos += m.end()
    pos += len(code[pos:]) - len(code[pos:].lstrip())
    if code.startswith("{", pos):
        depth = 0
        for i in range(pos, len(code)):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            if depth == 0:
                return i + 1
        raise Unread("braces")
    m = _LOOP.match(code, pos)
    if m:
        return _statement_end(code, m.end())
    end = code.find(";", pos)
    if end < 0:
        raise Unread("statement")
    return end + 1


def _loops(code: str, consts: dict) -> list[tuple[str, range, int, int]]:
    """Every `for` loop of `code`: (variable, its values, where it starts, where its body
    ends)."""
    from gemm_kernels.exercises.cexpr import ExpressionError, compile_expression
    out = []
    for m in _LOOP.finditer(code):
        var = m.group(1)
        if {g for g in m.group(3, 6, 7, 8) if g} != {var}:
            raise Unread(var)
        try:
            lo = compile_expression(m.group(2), tuple(consts))(consts)
            hi = compile_expression(m.group(5), tuple(consts))(consts) - (m.group(4) == "<")
        except ExpressionError:
            raise Unread(var) from None
        out.append((var, range(lo, hi + 1), m.start(), _statement_end(code, m.end())))
    return out


def _around(loops, pos: int) -> list:
    return [lp for lp in loops if lp[2] < pos < lp[3]]


def trace_products(source: str, consts: dict, places, acc_shape: tuple, output_of,
                   threads=None) -> list[str]:
    """The first output whose products are wrong (see above), or []. `consts`: the
    template constants; `places`: (tc, tr) of every thread; `acc_shape`: the dimensions
    of acc; `output_of(index, tc, tr)`: the (row, column) of the C tile that acc[index]
    of that thread holds; `threads`: the threads to trace (all by default). Raises
    Unread where the loop says something this check does not read."""
    from itertools import product as combos

    from gemm_kernels.exercises.cexpr import ExpressionError, code_only, compile_expression
    body = _between_barriers_text(code_only(source))
    adds = list(_ACC_ADD.finditer(body))
    if len(adds) != 1:
        raise Unread("acc")
    acc_indices = re.findall(r"\[([^\]]+)\]", adds[0].group(1))
    rhs = adds[0].group(2)
    if len(acc_indices) != len(acc_shape):
        raise Unread("acc")
    loops = _loops(body, consts)
    around = _around(loops, adds[0].start())
    if len({v for v, *_ in around}) != len(around):
        raise Unread("loops")
    # the reads a factor may name: a float read before the product, or an array filled
    # in a loop, each inside loops that are also around the product (the same k)
    temps = {}
    for m in _FLOAT_READ.finditer(body):
        temps[m.group(1)] = (m.group(2), m.group(3).strip(), m.group(4).strip(), None, m.start())
    for m in _ARRAY_FILL.finditer(body):
        if m.group(1) in temps or m.group(1) == "acc":
            raise Unread(m.group(1))
        fill = [lp for lp in _around(loops, m.start()) if lp[0] == m.group(2)]
        if len(fill) != 1:
            raise Unread(m.group(1))
        temps[m.group(1)] = (m.group(3), m.group(4).strip(), m.group(5).strip(), fill[0],
                             m.start())
    for name, (*_, fill, at) in temps.items():
        if any(lp not in around for lp in _around(loops, at) if lp is not fill):
            raise Unread(name)
    factors = re.split(r"\*(?![^\[]*\])", rhs)
    if len(factors) != 2:
        raise Unread(rhs)
    names = (*consts, *(v for v, *_ in loops), "t", "threadIdx.x", "tc", "tr")
    try:
        reads = {}
        for text in factors:
            text = text.strip().strip("()").strip()
            m, e = _TILE_READ.match(text), _ELEMENT.match(text)
            if m:
                index = None
                tile, rows, cols = m.group(1), m.group(2).strip(), m.group(3).strip()
            elif text in temps and temps[text][3] is None:
                index = None
                tile, rows, cols = temps[text][:3]
            elif e and e.group(1) in temps and temps[e.group(1)][3] is not None:
                fill = temps[e.group(1)][3]
                index = (fill[0], fill[1], compile_expression(e.group(2), names), e.group(1))
                tile, rows, cols = temps[e.group(1)][:3]
            else:
                raise Unread(text)
            shown = text if index else f"{tile}[{rows}][{cols}]"
            reads[tile] = (compile_expression(rows, names), compile_expression(cols, names),
                           index, shown)
        f_acc = [compile_expression(x, names) for x in acc_indices]
    except ExpressionError:
        raise Unread(rhs) from None
    if set(reads) != {"As", "Bs"}:
        raise Unread(rhs)

    def acc_text(index):
        return "acc" + "".join(f"[{x}]" for x in index)

    BK = consts["BK"]
    for t in (range(len(places)) if threads is None else threads):
        tc, tr = places[t]
        who = f"thread t = {t} (tc = {tc}, tr = {tr})"
        seen = {}
        for values in combos(*(r for _, r, *_ in around)):
            env = {**consts, **dict(zip((v for v, *_ in around), values)), "t": t,
                   "threadIdx.x": t, "tc": tc, "tr": tr}
            at = ", ".join(f"{v} = {x}" for (v, *_), x in zip(around, values))
            index = tuple(f(env) for f in f_acc)
            if not all(0 <= x < n for x, n in zip(index, acc_shape)):
                last = acc_text(tuple(n - 1 for n in acc_shape))
                return [f"{who} adds to {acc_text(index)} at {at}: its outputs are "
                        f"{acc_text((0,) * len(acc_shape))} .. {last}"]
            got = {}
            for tile, (f_r, f_c, fill, shown) in reads.items():
                where = env
                if fill:
                    var, values_of, f_i, array = fill
                    x = f_i(env)
                    if x not in values_of:
                        return [f"{who} at {at} reads {array}[{x}], which the loop that fills "
                                f"{array} writes only for {var} = {values_of[0]} .. "
                                f"{values_of[-1]}"]
                    where = {**env, var: x}
                got[tile] = (f_r(where), f_c(where))
            (ar, ac), (br, bc) = got["As"], got["Bs"]
            row, col = output_of(index, tc, tr)
            out = f"output (row {row}, column {col}) of the C tile is {acc_text(index)} of {who}"
            a_ok, b_ok = ar == row and 0 <= ac < BK, bc == col and 0 <= br < BK
            if not (a_ok and b_ok and ac == br):
                wrong = ("the row of As" if not a_ok else "the column of Bs" if not b_ok
                         else "the k of As and of Bs (they differ)")
                return [f"{out}: at {at} it adds {reads['As'][3]} * {reads['Bs'][3]} = "
                        f"As[{ar}][{ac}] * Bs[{br}][{bc}], and {wrong} is wrong there: that "
                        f"output needs row {row} of As and column {col} of Bs, the same k "
                        f"in both"]
            seen.setdefault(index, []).append(ac)
        for index in combos(*(range(n) for n in acc_shape)):
            ks = seen.get(index, [])
            missing = sorted(set(range(BK)) - set(ks))
            twice = sorted({k for k in ks if ks.count(k) > 1})
            if missing or twice:
                row, col = output_of(index, tc, tr)
                what = (f"never adds the product of k = {missing[0]}"
                        + (f" (nor {len(missing) - 1} more)" if len(missing) > 1 else "")
                        if missing else f"adds the product of k = {twice[0]} more than once")
                return [f"output (row {row}, column {col}) of the C tile is "
                        f"{acc_text(index)} of {who}: its loop {what}, while the tiles hold "
                        f"BK = {BK} values of k (0 .. {BK - 1}) at each step"]
    return []


def product_problems(source: str, params: dict) -> list[str]:
    """Exercise 05's trace of the products (see above): acc[i] of thread (tc, tr) is row
    tr*TM + i, column tc. Empty when every output adds each k of the tile once, when the
    mapping itself is refused (its own message says why), or when the source says
    something this check does not read."""
    found = mapping_expressions(source)
    if isinstance(found, str):
        return []
    places = mapping_table(*found, params)
    if isinstance(places, str) or coverage_problems(places, params):
        return []
    p = params
    consts = {"BM": p["BM"], "BN": p["BN"], "BK": p["BK"], "TM": p["TM"],
              "NT": p["BM"] * p["BN"] // p["TM"]}
    try:
        return trace_products(source, consts, places, (p["TM"],),
                              lambda index, tc, tr: (tr * p["TM"] + index[0], tc))
    except (Unread, KeyError, ZeroDivisionError):
        return []


def products_followed(exercise: str, params: dict, problems=None) -> Callable[[str], list[str]]:
    """An exercise's check of its loop of products: `problems(source, params)`, by
    default exercise 05's (see above); chapter 06 passes its own."""
    problems = problems or product_problems

    def check(source: str) -> list[str]:
        return problems(source, params)
    check.__name__ = f"products_followed_{exercise}"
    return check
