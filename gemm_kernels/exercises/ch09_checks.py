"""Chapter 09's static check: the z-order lane mapping, priced by the bank model.

The student writes `qr = ...;` and `qc = ...;` in the kernel's `if constexpr (ZORDER)`
branch: the thread's place in the (BM/8) x (BN/8) grid. Each k, a thread reads its A
values with LDS.128 at words 4*qr and BM/2 + 4*qr of row k of As, and its B values at
4*qc and BN/2 + 4*qc of row k of Bs. The check evaluates both expressions for every
thread of a block at the graded configuration and asks two things:

* the mapping is one-to-one: every thread gets its own place in the grid;
* every one of those four LDS.128 costs a warp 2 wavefronts, the least a 128-bit load
  of 32 lanes can cost (half-warps never merge; inside each half-warp the two quarter
  phases merge only when lanes i and i^1, or i and i^2, read the same address, and the
  merged phase must then hit every bank at most once).

Expressions are C integer arithmetic on the names below: evaluated by a small
evaluator that knows integers, those names, + - * / % & | ^ << >> and parentheses
(C division and remainder, on non-negative values only), and nothing else.
"""
from __future__ import annotations

import re

from gemm_kernels.core.kernels import get as get_kernel
from gemm_kernels.exercises.cexpr import code_only, compile_expression, evaluate
from gemm_kernels.exercises.stubs import STUB, stub_lines
from gemm_kernels.memory.banks import analyse

BM = BN = 128                    # the graded configuration (the registry's default)
WARP = 32
IDEAL = 2                        # wavefronts of a warp's LDS.128 with merged quarters


def _assignments(source: str) -> tuple[str, str] | str:
    """(qr's expression, qc's expression) in the ZORDER branch, or a problem."""
    text = code_only(source)
    m = re.search(r"if\s+constexpr\s*\(\s*ZORDER\s*\)", text)
    if not m:
        return ("the 'if constexpr (ZORDER) {' branch is not there any more: keep it "
                "and write qr and qc inside it")
    start, depth = text.find("{", m.end()), 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            break
    branch = text[start:end]
    found = {}
    for name in ("qr", "qc"):
        a = re.search(rf"\b{name}\s*=(?!=)\s*([^;]+);", branch)
        if not a:
            return (f"no '{name} = ...;' in the ZORDER branch: write the thread's "
                    f"{'row' if name == 'qr' else 'column'} in the grid as one assignment "
                    f"'{name} = <expression of warp, lane, WARPS_N>;'")
        found[name] = a.group(1).strip()
    return found["qr"], found["qc"]


def zorder_lanes(source: str, bm: int = BM, bn: int = BN) -> list[str]:
    """Problems of the lane mapping written in `source`; empty when it is one-to-one and
    every LDS.128 of the k loop costs a warp the ideal 2 wavefronts (nothing while the
    source still holds a stub: the grader names the lines still to write)."""
    if stub_lines(source):
        return []
    found = _assignments(source)
    if isinstance(found, str):
        return [found]
    threads = bm * bn // 64
    places = []
    for t in range(threads):
        names = {"t": t, "warp": t >> 5, "lane": t & 31, "WARPS_N": bn // 64,
                 "BM": bm, "BN": bn}
        try:
            places.append(tuple(evaluate(e, names) for e in found))
        except ValueError as e:
            return [f"cannot evaluate the lane mapping: {e}"]
    outside = [(t, p) for t, p in enumerate(places)
               if not (0 <= p[0] < bm // 8 and 0 <= p[1] < bn // 8)]
    if outside:
        t, (qr, qc) = outside[0]
        return [f"thread {t} gets qr={qr}, qc={qc}, outside the {bm // 8} x {bn // 8} grid "
                f"(qr < {bm // 8}, qc < {bn // 8})"]
    if len(set(places)) < threads:
        seen = {}
        t, p = next((t, p) for t, p in enumerate(places) if seen.setdefault(p, t) != t)
        return [f"threads {seen[p]} and {t} both get qr={p[0]}, qc={p[1]}: every thread "
                "needs its own place in the grid, or some outputs are never computed"]
    problems = []
    reads = (("A", 0, "4*qr"), ("A", bm // 2, "BM/2 + 4*qr"),
             ("B", 0, "4*qc"), ("B", bn // 2, "BN/2 + 4*qc"))
    for operand, base, where in reads:
        worst = None
        for w in range(threads // WARP):
            lanes = places[w * WARP:(w + 1) * WARP]
            words = [base + 4 * (qr if operand == "A" else qc) for qr, qc in lanes]
            a = analyse([4 * x for x in words], 16)
            if worst is None or a.wavefronts > worst[1].wavefronts:
                worst = (w, a)
        w, a = worst
        if a.wavefronts > IDEAL:
            problems.append(
                f"the {operand} read (LDS.128 at word {where} of row k) of warp {w} costs "
                f"{a.wavefronts} wavefronts, the ideal is {IDEAL} ("
                + ("the quarter-warps do not merge: they merge when every lane i reads "
                   "the same address as lane i^1, or every lane the same as lane i^2"
                   if a.merge is None else
                   f"the quarters merge ({a.merge}) but a bank is hit {a.max_degree} times")
                + ")")
    return problems


def _zorder_note(source: str) -> str:
    """The pass line's words for what `zorder_lanes` checked, so that the student sees
    the point of the exercise graded, not only the registers."""
    if stub_lines(source) or zorder_lanes(source):
        return ""
    return f"bank model: every LDS.128 of the k loop at {IDEAL} wavefronts"


zorder_lanes.note = _zorder_note


# The static hint of 09_zorder: the rules that make the quarter-warps merge, which the
# student is asked to derive from the chapter's bank table; so they are shown only after
# a wrong mapping, never while the part is not written yet.
ZORDER_HINT = ("a thread's place is its warp's block plus its lane's place inside it: the "
               "block starts at row 4 * (warp / WARPS_N) and column 8 * (warp % WARPS_N). "
               "Inside the block, one operand pairs lane i with lane i^1, the other lane i "
               "with lane i^2 (either way round): lanes that share qr read the same A words, "
               "lanes that share qc the same B words. So which bits of the lane may qr "
               "depend on, and which may qc? Each lane bit goes to exactly one of them")


def zorder_hint(detail: str) -> str:
    """The static hint of 09_zorder for the failure `detail`: none while the part is not
    written yet (the message says so), else `ZORDER_HINT`."""
    return "" if STUB in detail else ZORDER_HINT


# ---------------------------------------------------------------- the capstone's step
# The second exercise of the chapter: one step of the capstone's cp.async pipeline. The
# student writes, in the K loop `for (int tile = ...)`, the request of tile t+STAGES-1
# with its commit, the wait `cp_async_wait<count>();` with the barrier after it, and
# the move of the stage ring. When the wait runs (last k of step t), t+STAGES groups are
# committed, one per tile, oldest first; the next fragments read tile t+1, the
# (STAGES-1)-th newest group. So the count must be STAGES-2: one more lets tile t+1
# still be in flight (a race that mostly goes unseen, as copies usually arrive in time);
# one less also waits for tiles that are not needed yet, and the newest copy gets fewer
# steps of compute to arrive in (the results stay right, the overlap is lost). Both are
# decided here, from the source, for every STAGES the kernel takes.

_TILE_LOOP = re.compile(r"for\s*\(\s*int\s+tile\s*=")
_WAIT = re.compile(r"cp_async_wait\s*<([^<>;]*)>\s*\(\s*\)\s*;")


def braced(text: str, at: int) -> str | None:
    """The text between the first '{' from `at` and its matching '}', or None."""
    start, depth = text.find("{", at), 0
    if start < 0:
        return None
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            return text[start + 1:end]
    return None


def _stage_counts() -> tuple[int, ...]:
    """The STAGES values the capstone kernel takes (the registry's)."""
    return tuple(next(p.values for p in get_kernel("capstone").params
                      if p.name == "STAGES"))


def pipeline_wait(source: str) -> list[str]:
    """Problems of the K loop's cp.async step in `source`: a commit, one wait of the form
    `cp_async_wait<count>();` followed by __syncthreads(), and a count that leaves
    exactly STAGES-2 groups in flight for every STAGES; empty when all hold."""
    text = code_only(source)
    m = _TILE_LOOP.search(text)
    body = braced(text, m.end()) if m else None
    if body is None:
        return ["the K loop 'for (int tile = 0; tile < tiles; ++tile) { ... }' is not "
                "there any more: keep it as given and write its iteration inside it"]
    problems = []
    if not re.search(r"\bcp_async_commit\s*\(\s*\)", body):
        problems.append("no cp_async_commit() in the K loop: each iteration's copies must "
                        "close a group of their own (one per iteration, even an empty one), "
                        "since the wait counts groups")
    waits = list(_WAIT.finditer(body))
    if not waits:
        if re.search(r"\bcp_async_wait\s*<", body):
            return problems + [
                "cannot read the count of the wait in the K loop: write it as "
                "'cp_async_wait<count>();' with a count in STAGES, + - * / and numbers "
                "(no < or > inside it)"]
        return problems + [
            "no 'cp_async_wait<count>();' in the K loop: without a wait the fragments of "
            "the next tile may be read before its copies have landed (a race that the "
            "result rarely shows, since copies usually arrive in time); write the wait "
            "in that form, before the barrier of the last k"]
    if len(re.findall(r"\bcp_async_wait\b", body)) > len(waits):
        problems.append("write every wait of the K loop as 'cp_async_wait<count>();' so "
                        "that its count can be read")
    if "__syncthreads" not in body[waits[-1].end():]:
        problems.append("no __syncthreads() after the wait in the K loop: the wait covers "
                        "only this thread's own copies; the barrier after it is what "
                        "makes every thread's copies of the next tile visible to all")
    for w in waits:
        expr = w.group(1).strip()
        for stages in sorted(_stage_counts(), reverse=True):
            try:
                n = evaluate(expr, {"STAGES": stages})
            except ValueError as e:
                problems.append(f"cannot read the wait's count: {e}")
                break
            want = stages - 2
            if n < 0:
                problems.append(f"cp_async_wait<{expr}>() at STAGES={stages} is a count of "
                                f"{n}: a count of groups is 0 or more")
                break
            at = (f"cp_async_wait<{expr}>() at STAGES={stages} lets up to {n} "
                  f"group{'s' * (n != 1)} stay in flight")
            if n > want:
                problems.append(
                    f"{at}: that can include the group of tile t+1, the tile the next "
                    "fragments read, so its copies may still be in flight (a race); "
                    "count the groups committed by then, and find tile t+1's place among "
                    "them")
                break
            if n < want:
                ago = ("in this iteration" if n == 0
                       else f"{n} iteration{'s' * (n != 1)} ago")
                problems.append(
                    f"{at}: so it also waits for the tile requested {ago}, which no "
                    "fragment reads yet: right results, but that copy had less time to "
                    "arrive than the ring gives it, and the overlap the stages buy is lost")
                break
    return problems


# ---------------------------------------------------------------- the step's structure
# Two races that the wait's count alone does not show, both known from practice:
#
# * the commit inside the request's `if (tile + STAGES - 1 < tiles)`: the steps near the
#   end of K, with no tile left to request, then close no group, the count of groups
#   falls behind the count of steps, and the wait of step t no longer covers tile t + 1
#   (at STAGES = 4 and 8 tiles, step 5's wait leaves tile 6 in flight, and step 6 reads
#   it). An else branch that commits too keeps one group per step, and is fine.
# * the request into stage rs, the one being read in this very step.
#
# So the K loop is read as statements (if / else, loops, blocks, plain statements), and
# each commit and each request is checked against the conditions around it.

class _Stmt:
    """One statement of the K loop: `kind` 'if', 'loop', 'block' or 'plain'; `head` the
    condition or loop header; `body` / `orelse` the statements inside; `text` the plain
    statement; `at` its offset in the text it was read from."""

    def __init__(self, kind, at, head="", body=(), orelse=(), text=""):
        self.kind, self.at, self.head = kind, at, head
        self.body, self.orelse, self.text = list(body), list(orelse), text

    def all_text(self) -> str:
        inner = " ".join(s.all_text() for s in self.body + self.orelse)
        return f"{self.head} {self.text} {inner}"


_OPEN, _CLOSE = "({[", ")}]"


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _matching(text: str, i: int) -> int:
    """The index just past the bracket that closes the one at `i`."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] in _OPEN:
            depth += 1
        elif text[j] in _CLOSE:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def _statement(text: str, i: int) -> tuple[_Stmt | None, int]:
    """The statement starting at `i` (after white space), and where the next one starts."""
    i = _skip_ws(text, i)
    if i >= len(text):
        return None, i
    if text[i] == "#":                                   # #pragma unroll and the like
        end = text.find("\n", i)
        return _Stmt("plain", i, text=""), len(text) if end < 0 else end + 1
    if text[i] == "{":
        end = _matching(text, i)
        return _Stmt("block", i, body=_statements(text[i + 1:end - 1], i + 1)), end
    m = re.match(r"(if|for|while|switch)\b\s*(constexpr\b\s*)?\(", text[i:])
    if m:
        open_at = i + m.end() - 1
        close = _matching(text, open_at)
        head = text[open_at + 1:close - 1]
        body, j = _statement(text, close)
        stmt = _Stmt("if" if m.group(1) == "if" else "loop", i, head=head,
                     body=[body] if body else [])
        if m.group(1) == "if":
            k = _skip_ws(text, j)
            if re.match(r"else\b", text[k:]):
                orelse, j = _statement(text, k + 4)
                stmt.orelse = [orelse] if orelse else []
        return stmt, j
    depth = 0                                            # a plain statement: to its ';'
    for j in range(i, len(text)):
        c = text[j]
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == ";" and depth == 0:
            return _Stmt("plain", i, text=text[i:j + 1]), j + 1
    return _Stmt("plain", i, text=text[i:]), len(text)


def _statements(text: str, offset: int = 0) -> list[_Stmt]:
    out, i = [], 0
    while True:
        s, i = _statement(text, i)
        if s is None:
            return out
        s.at += offset
        out.append(s)


def _walk(stmts, around=()):
    """(plain statement, the statements around it: ('if', head, branch taken, the other
    branch) or ('loop', head)), for every plain statement, in order."""
    for s in stmts:
        if s.kind == "plain":
            yield s, around
        elif s.kind == "block":
            yield from _walk(s.body, around)
        elif s.kind == "loop":
            yield from _walk(s.body, around + (("loop", s.head, None, None),))
        else:
            yield from _walk(s.body, around + (("if", s.head, "then", s.orelse),))
            yield from _walk(s.orelse, around + (("if", s.head, "else", s.body),))


_COMMIT = re.compile(r"\bcp_async_commit\s*\(")
_ON_TILES = re.compile(r"\btiles?\b")
_ON_K = re.compile(r"\bk\b")


def _call_args(text: str, name: str) -> list[list[str]]:
    """The argument lists of every call of `name` in `text`, split at top-level commas."""
    out = []
    for m in re.finditer(rf"\b{name}\s*\(", text):
        end = _matching(text, m.end() - 1)
        inner, args, depth, start = text[m.end():end - 1], [], 0, 0
        for j, c in enumerate(inner):
            depth += (c in _OPEN) - (c in _CLOSE)
            if c == "," and depth == 0:
                args.append(inner[start:j].strip())
                start = j + 1
        args.append(inner[start:].strip())
        out.append(args)
    return out


def _stage_is(expr: str, want: str) -> bool | None:
    """Whether `expr` names the same stage as `want` ('rs' or 'ws') in every step of
    every ring the kernel takes; None when the expression cannot be read."""
    try:
        f = compile_expression(expr, ("tile", "STAGES", "rs", "ws"))
    except ValueError:
        return None
    for stages in _stage_counts():
        for tile in range(3 * stages):
            env = {"tile": tile, "STAGES": stages, "rs": tile % stages,
                   "ws": (tile + stages - 1) % stages}
            try:
                if f(env) != env[want]:
                    return False
            except ValueError:
                return None
    return True


def _tile_is(expr: str) -> bool | None:
    """Whether `expr` is tile + STAGES - 1 for every tile and STAGES; None if unreadable."""
    try:
        f = compile_expression(expr, ("tile", "STAGES"))
        return all(f(tile=t, STAGES=s) == t + s - 1 for s in _stage_counts() for t in range(9))
    except ValueError:
        return None


# The request's guard. A request of tile t + STAGES - 1 is right exactly when that tile
# exists: `tile + STAGES - 1 < tiles`. One off either way is wrong, and on a GPU the
# result rarely says why: a guard one step too strict (`tile + STAGES < tiles`) never
# requests the last tile, so its stage still holds an older one; one too lax
# (`tile + STAGES - 2 < tiles`, or `<= tiles`) requests a tile past the end of K, which
# issue_next copies without a bounds test, reading past the end of A and B. So the
# guard is read from the source and evaluated for every step of K's of 1 to 12 tiles
# at every STAGES the kernel takes; any condition with the same truth table passes.

_COMPARE = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
            ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
_GUARD_NAMES = ("tile", "tiles", "STAGES", "BK", "K")
_GUARD_BK = 16


def _top_level(text: str, token: str) -> list[int]:
    """Where `token` occurs in `text` outside brackets."""
    out, depth = [], 0
    for i, c in enumerate(text):
        depth += (c in _OPEN) - (c in _CLOSE)
        if depth == 0 and text.startswith(token, i):
            out.append(i)
    return out


def _comparison_at(text: str) -> tuple[int, str] | None:
    """(position, operator) of the one top-level comparison of `text`, else None
    (`<<` and `>>` are shifts, not comparisons)."""
    found, depth, i = [], 0, 0
    while i < len(text):
        c = text[i]
        depth += (c in _OPEN) - (c in _CLOSE)
        two = text[i:i + 2]
        if depth == 0 and two in ("<<", ">>"):
            i += 2
            continue
        if depth == 0 and two in ("<=", ">=", "==", "!="):
            found.append((i, two))
            i += 2
            continue
        if depth == 0 and c in "<>":
            found.append((i, c))
        i += 1
    return found[0] if len(found) == 1 else None


def compile_condition(text: str):
    """A function of tile, tiles, STAGES, BK and K that evaluates the C condition `text`:
    comparisons of integer expressions, joined by && and ||, negated by !, in
    parentheses. ValueError for anything else."""
    text = text.strip()
    if text.startswith("(") and _matching(text, 0) == len(text):
        return compile_condition(text[1:-1])
    for token, join in (("||", any), ("&&", all)):
        cuts = _top_level(text, token)
        if cuts:
            parts = [text[a:b] for a, b in zip([0] + [c + 2 for c in cuts], cuts + [len(text)])]
            fs = [compile_condition(p) for p in parts]
            return lambda env, fs=fs, join=join: join(f(env) for f in fs)
    if text.startswith("!") and not text.startswith("!="):
        f = compile_condition(text[1:])
        return lambda env: not f(env)
    at = _comparison_at(text)
    if at is None:
        raise ValueError(f"cannot read the condition {text!r}: write it as a comparison "
                         "such as 'tile + STAGES - 1 < tiles'")
    i, op = at
    lhs = compile_expression(text[:i], _GUARD_NAMES)
    rhs = compile_expression(text[i + len(op):], _GUARD_NAMES)
    return lambda env: _COMPARE[op](lhs(env), rhs(env))


# A student may name a part of the condition first (`const int nt = tile + STAGES - 1;
# if (nt < tiles)`). Such a local is read as its initialiser, provided it is declared
# once and never assigned again; any other name stays unreadable.
_LOCAL = re.compile(r"\b(?:const\s+)?(?:unsigned\s+)?(?:int|long|bool|auto|size_t|unsigned)"
                    r"\s+([A-Za-z_]\w*)\s*=\s*([^;{}]+);")


# The ring's stage indices: the checks read them by name (a request into ws, compute on
# rs), so they are never replaced by their first values, even where an answer forgot to
# move them (that answer is then refused on the GPU, by its wrong results).
_RING_NAMES = ("rs", "ws")


def _locals(text: str) -> dict[str, str]:
    """{name: initialiser} of the locals of `text` declared once with an initialiser
    and never written again (the names the guard is read in, and the ring's stage
    indices, are left out)."""
    found: dict[str, list[str]] = {}
    for m in _LOCAL.finditer(text):
        found.setdefault(m.group(1), []).append(m.group(2).strip())
    out = {}
    for name, inits in found.items():
        writes = re.findall(rf"(?:\+\+|--)\s*\b{name}\b|\b{name}\s*"
                            r"(?:\+\+|--|<<=|>>=|[-+*/%&|^]?=(?!=))", text)
        if name not in _GUARD_NAMES + _RING_NAMES and len(inits) == 1 and len(writes) == 1:
            out[name] = inits[0]
    return out


def _expand(expr: str, names: dict[str, str]) -> str:
    """`expr` with every local of `names` replaced by its parenthesised initialiser
    (repeated, so that a local set from another local is read too)."""
    for _ in range(8):
        new = re.sub(r"\b[A-Za-z_]\w*\b",
                     lambda m: f"({names[m.group(0)]})" if m.group(0) in names else m.group(0),
                     expr)
        if new == expr:
            break
        expr = new
    return expr


def _guard_problem(guards: list[tuple[str, bool]],
                   names: dict[str, str] | None = None) -> str | None:
    """What is wrong with requesting under `guards` ((condition, branch taken) of every
    if around the request that names tiles), or None when together they hold exactly
    when tile + STAGES - 1 < tiles, for every step of every K and ring. The locals of
    `names` ({name: initialiser}) are read as their initialisers."""
    shown = " && ".join(("" if taken else "!") + f"({' '.join(h.split())})"
                        for h, taken in guards)
    if len(guards) == 1 and guards[0][1]:
        shown = " ".join(guards[0][0].split())
    try:
        tests = [(compile_condition(_expand(h, names or {})), taken) for h, taken in guards]
    except ValueError as e:
        return (f"cannot read the condition of the request 'if ({shown})': {e}; a local "
                "is read only when it is declared once, with its value, and never "
                "assigned again")
    cases = [(4, 8)] + [(s, n) for s in _stage_counts() for n in range(1, 13)]
    for stages, tiles in cases:
        for k in (tiles * _GUARD_BK, tiles * _GUARD_BK - 5):
            for tile in range(tiles):
                env = {"tile": tile, "tiles": tiles, "STAGES": stages, "BK": _GUARD_BK,
                       "K": k}
                try:
                    asks = all(f(env) == taken for f, taken in tests)
                except ValueError as e:
                    return f"cannot evaluate the condition of the request: {e}"
                want, wanted = tile + stages - 1 < tiles, tile + stages - 1
                if asks == want:
                    continue
                where = (f"at STAGES={stages} with {tiles} tile{'s' * (tiles != 1)}, "
                         f"iteration {tile}")
                if asks:
                    return (f"'if ({shown})' requests tile {wanted} {where}, but the last "
                            f"tile is tile {tiles - 1}: issue_next's copies are not "
                            "checked, so they read past the end of A and B")
                return (f"'if ({shown})' does not request tile {wanted} {where}, although "
                        "K has it: that tile is never copied, its stage still holds an "
                        "older tile, and the results come out wrong")
    return None


def pipeline_requests(source: str) -> list[str]:
    """Problems of the commits and requests in the K loop: a commit that depends on
    whether a tile is left (no else branch that commits too), a commit made at every k,
    a request into any stage but ws (the one freed in the step before), a request of
    any tile but tile + STAGES - 1, or one made even when K has no such tile. Empty
    when none of these is found (the K loop missing is `pipeline_wait`'s to report)."""
    text = code_only(source)
    m = _TILE_LOOP.search(text)
    body = braced(text, m.end()) if m else None
    if body is None:
        return []
    problems, names = [], _locals(text)
    for stmt, around in _walk(_statements(body)):
        if _COMMIT.search(stmt.text):
            for kind, head, branch, other in around:
                if kind == "if" and _ON_TILES.search(_expand(head, names)) and \
                        not any(_COMMIT.search(s.all_text()) for s in other):
                    shown = " ".join(head.split())
                    problems.append(
                        f"cp_async_commit() sits inside 'if ({shown})'"
                        + (" (its else branch)" if branch == "else" else "")
                        + ": an iteration with no tile to request then closes no group, "
                        "the groups fall behind the iterations, and near the end of K the "
                        "wait lets the next tile still be in flight (a race: at STAGES=4 "
                        "with 8 tiles, iteration 5's wait leaves tile 6 in flight, and "
                        "iteration 6 reads it); commit in every iteration, outside that if, "
                        "even when nothing was requested")
                    break
            k_loops = [i for i, (kind, head, _, _) in enumerate(around)
                       if kind == "loop" and _ON_K.search(head)]
            if k_loops and not any(kind == "if" and _ON_K.search(head)
                                   for kind, head, _, _ in around[k_loops[-1] + 1:]):
                problems.append(
                    "cp_async_commit() runs at every k of the iteration, so an iteration "
                    "closes BK groups and the wait's count of groups no longer counts "
                    "tiles; commit once per iteration, at k == 0 with the request")
        for name, stage_arg in (("issue_next", 0), ("issue_tile", 1)):
            for args in _call_args(stmt.text, name):
                if len(args) <= stage_arg:
                    continue
                stage = args[stage_arg]
                if _stage_is(_expand(stage, names), "ws"):
                    pass
                elif _stage_is(_expand(stage, names), "rs"):
                    problems.append(
                        f"{name}(...) copies into stage {stage}, the stage this iteration "
                        "is computing on: the copies overwrite values that are still being "
                        "read (a race); request into ws, the stage finished in the "
                        "iteration before")
                else:
                    problems.append(
                        f"{name}(...) copies into stage '{stage}': the tile requested in "
                        "iteration t goes into the stage freed in iteration t-1, which is "
                        "ws; write the stage as ws")
                if name == "issue_tile" and _tile_is(_expand(args[0], names)) is not True:
                    problems.append(f"issue_tile({args[0]}, ...) requests tile {args[0]}: "
                                    "the tile requested in iteration t is "
                                    "tile + STAGES - 1")
                guards = [(head, branch == "then") for kind, head, branch, _ in around
                          if kind == "if" and re.search(r"\b(tiles|K)\b",
                                                        _expand(head, names))]
                if guards:
                    problem = _guard_problem(guards, names)
                    if problem:
                        problems.append(problem)
                else:
                    problems.append(
                        f"{name}(...) runs even when K has no tile tile + STAGES - 1 "
                        "left: " + ("issue_next's copies are not checked, so they then "
                                    "read past the end of A and B" if name == "issue_next"
                                    else "it then requests a tile that does not exist")
                        + "; request it only when K has it")
    return list(dict.fromkeys(problems))


# ---------------------------------------------------------------- HOIST: moving on
# With HOIST every tile after tile 0 is whole, so `issue_next` copies from pointers kept
# across tiles: a_src[r], one per A row the thread copies (A_ROWS of them), and b_src,
# the first B row. After its copies it moves them on by one tile: BK floats along a row
# of A, BK rows (BK * N floats) down B. The student writes those two moves; here they
# are read from `issue_next` and evaluated for two configurations.

_CONFIGS = ({"BM": 128, "BN": 128, "BK": 16, "NT": 256, "N": 4096, "K": 4096, "M": 4096},
            {"BM": 128, "BN": 128, "BK": 8, "NT": 256, "N": 1000, "K": 777, "M": 333})


def _hoist_names(c: dict) -> dict:
    """The kernel's constants of the copy layout for configuration `c`."""
    a_step = c["NT"] // 8
    b_cpr = c["BN"] // 4
    b_step = c["NT"] // b_cpr
    return {**c, "A_STEP": a_step, "A_ROWS": c["BM"] // a_step, "LDA": c["BM"] + 4,
            "A_PER": c["BM"] * c["BK"] // c["NT"], "B_CPR": b_cpr, "B_STEP": b_step,
            "B_PER": c["BK"] * b_cpr // c["NT"], "b_rows": b_step * c["N"]}


def _increment(stmt: str, target: str) -> tuple[str, str] | None:
    """(index text or '', the amount added) of `target[...] += amount;` or
    `target[...] = target[...] + amount;` (or amount + target) in `stmt`, else None."""
    idx = r"\s*\[\s*([^\]]+?)\s*\]" if target == "a_src" else r"()"
    m = re.fullmatch(rf"\s*{target}{idx}\s*\+=\s*(.+?)\s*;\s*", stmt, flags=re.S)
    if m:
        return m.group(1), m.group(2)
    m = re.fullmatch(rf"\s*{target}{idx}\s*=\s*(.+?)\s*;\s*", stmt, flags=re.S)
    if m:
        same = rf"{target}\s*\[\s*{re.escape(m.group(1))}\s*\]" if target == "a_src" \
            else rf"{target}\b"
        rest = re.sub(rf"^\s*{same}\s*\+|\+\s*{same}\s*$", "", m.group(2))
        if rest != m.group(2):
            return m.group(1), rest.strip()
    return None


def _loop_rows(head: str) -> tuple[str, str] | None:
    """(variable, bound) of a loop header `int v = 0; v < bound; ++v` (or v++)."""
    m = re.fullmatch(r"\s*int\s+(\w+)\s*=\s*0\s*;\s*(\w+)\s*<\s*([^;]+?)\s*;\s*"
                     r"(?:\+\+\s*(\w+)|(\w+)\s*\+\+|(\w+)\s*\+=\s*1)\s*", head)
    if m and m.group(1) == m.group(2) == (m.group(4) or m.group(5) or m.group(6)):
        return m.group(1), m.group(3)
    return None


def _landing(target: str, floats: int, n: dict) -> str:
    """Where a move of `floats` takes the pointer, in the matrix's own terms: along a
    row of A (K floats long), or down B (rows of N floats)."""
    if target == "a_src":
        return (f"that is {floats} column{'s' * (floats != 1)} along a row of A"
                if 0 <= floats < n["K"] else "that leaves the thread's row of A")
    rows, rest = divmod(floats, n["N"])
    return (f"that is {rows} row{'s' * (rows != 1)} down B" if rest == 0 else
            f"that is {rows} row{'s' * (rows != 1)} and {rest} float{'s' * (rest != 1)} "
            "down B, off the thread's column")


def hoist_advance(source: str) -> list[str]:
    """Problems of the source pointers' moves in `issue_next` (the HOIST path): every
    a_src[r], r = 0..A_ROWS-1, must move on by BK and b_src by BK * N, once per call,
    after the copies that read them. Empty when they do."""
    text = code_only(source)
    m = re.search(r"\bissue_next\s*=\s*\[[^\]]*\]\s*\([^)]*\)\s*(mutable\s*)?\{", text)
    body = braced(text, m.end() - 1) if m else None
    if body is None:
        return ["the lambda 'auto issue_next = [&](int stage) { ... };' is not there any "
                "more: keep it as given and move the source pointers on inside it"]
    names = [_hoist_names(c) for c in _CONFIGS]
    walked = list(_walk(_statements(body)))
    problems = []
    for target, want, what in (("a_src", "BK", "one tile along its row of A"),
                               ("b_src", "BK * N", "one tile down B")):
        moves = [(s, around, inc) for s, around in walked
                 for inc in [_increment(s.text, target)] if inc]
        if not moves:
            problems.append(f"issue_next does not move {target} on: after its copies, "
                            f"{target} must move {what} ('{target}"
                            + ("[r]" if target == "a_src" else "") + " += ...;')")
            continue
        copies = [s.at for s, _ in walked if re.search(r"\bcp_async_(4|16)\s*\(", s.text)
                  and re.search(rf"\b{target}\b", s.text)]
        rows_hit = []
        for s, around, (index, amount) in moves:
            try:
                got = [evaluate(amount, n) for n in names]
            except ValueError as e:
                problems.append(f"cannot read the move of {target}: {e}")
                continue
            expected = [evaluate(want, n) for n in names]
            if got != expected:
                by = amount if amount.strip() == str(got[0]) else f"{amount} = {got[0]}"
                problems.append(
                    f"{target} moves on by {by} float{'s' * (got[0] != 1)} at BK = "
                    f"{names[0]['BK']}, N = {names[0]['N']}, K = {names[0]['K']}: "
                    f"{_landing(target, got[0], names[0])}, not {what}")
            if copies and s.at < max(copies):
                problems.append(f"{target} moves on before the last copy that reads it: "
                                "move it after those copies, or they copy the next tile")
            loops = [head for kind, head, _, _ in around if kind == "loop"]
            if target == "b_src":
                if loops:
                    problems.append("b_src moves on inside a loop: it must move once per "
                                    "call, by one tile")
                continue
            parsed = _loop_rows(loops[-1]) if len(loops) == 1 else None
            if parsed and index.strip() == parsed[0]:
                try:
                    n_rows = [evaluate(parsed[1], n) for n in names]
                except ValueError:
                    n_rows = None
                if n_rows == [n["A_ROWS"] for n in names]:
                    rows_hit += list(range(names[0]["A_ROWS"]))
                else:
                    problems.append(f"the loop around a_src[{index}] runs to {parsed[1]}: "
                                    "each of the A_ROWS row pointers moves on once")
            elif not loops and re.fullmatch(r"\d+", index.strip()):
                rows_hit.append(int(index))
            else:
                problems.append(f"a_src[{index}] moves on inside 'for ({'; '.join(loops)})'"
                                if loops else f"cannot tell which rows a_src[{index}] is")
                rows_hit = None
                break
        if target == "a_src" and rows_hit is not None and not problems and \
                sorted(rows_hit) != list(range(names[0]["A_ROWS"])):
            problems.append("each of the A_ROWS row pointers a_src[0..A_ROWS-1] must move "
                            "on exactly once per call (write 'for (int r = 0; r < A_ROWS; "
                            "++r) a_src[r] += ...;')")
    return list(dict.fromkeys(problems))


def pipeline_step(source: str) -> list[str]:
    """Every static check of the pipeline exercise: the wait (`pipeline_wait`), the
    commits and requests (`pipeline_requests`) and the HOIST moves (`hoist_advance`);
    nothing while the source still holds a stub (the grader names the lines still to
    write), so that the untouched skeleton's report gives none of the answers away."""
    if stub_lines(source):
        return []
    return pipeline_wait(source) + pipeline_requests(source) + hoist_advance(source)


# The static hints of exercise 09_capstone_step, one per kind of problem; `pipeline_hint`
# shows only those whose problem the report names, so that a wrong pointer step is not
# answered with advice on the wait's count.
PIPELINE_HINTS = (
    (("cp_async_wait", "wait"),
     "count the groups committed when the wait runs at the last k of iteration t (the "
     "prologue's, then one per iteration so far), and how many of them are newer than "
     "tile t + 1's group: those may stay in flight"),
    (("cp_async_commit", "commit"),
     "one commit per iteration, requested or not"),
    (("a_src", "b_src", "issue_next", "pointer"),
     "after issue_next's copies, each source pointer moves on by one whole tile"),
    (("condition of the request",),
     "write the request's condition as a comparison of tile, tiles and STAGES (or of "
     "locals set once from them)"),
    ((("' requests tile", "' does not request tile", "request it only when K has it"),),
     "for each iteration, which tile would the request copy, and does K have that tile?"),
)


def pipeline_hint(detail: str) -> str:
    """The static hint of 09_capstone_step for the failure `detail`: the hints whose
    keywords the detail names (the first keyword of each, or any of a first tuple of
    them, is tried first, so that a message on pointers that mentions a wait does not
    pull in the wait's hint), or all of them where none matches (a failure this list
    does not know); none while the parts are not written yet."""
    if STUB in detail:
        return ""
    first = [h for keys, h in PIPELINE_HINTS
             if any(k in detail for k in (keys[0] if isinstance(keys[0], tuple) else
                                          (keys[0],)))]
    if first:
        return "; ".join(first)
    some = [h for keys, h in PIPELINE_HINTS if any(k in detail for k in keys[1:])]
    return "; ".join(some or [h for _, h in PIPELINE_HINTS])


# Step 3 of 09_capstone_step on the CPU (cpu_step's cp.async emulation) names a tile read
# before its copies landed, or a race with a landing copy: then the hint is about the
# wait; any other wrong result, about the ring and the requests.
PIPELINE_CORRECT_HINTS = (
    "the next tile's group must be complete before anyone reads it: count the groups "
    "committed when the wait runs (one per iteration, requested or not) and leave in "
    "flight only those newer than tile t + 1's; then the barrier, after the wait",
    "request tile tile + STAGES - 1 into stage ws (the one finished in the iteration "
    "before), never into rs; commit in every iteration, even when no tile is left; move "
    "rs and ws on by one, back to 0 after STAGES - 1")


def pipeline_correct_hint(detail: str) -> str:
    """The hint of 09_capstone_step's step 3 for the failure `detail`."""
    copies = re.search(r"cp\.async copies had landed|a cp\.async copy landed", detail)
    return PIPELINE_CORRECT_HINTS[0 if copies else 1]
