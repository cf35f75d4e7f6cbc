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
from gemm_kernels.exercises.cexpr import code_only, evaluate
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
    every LDS.128 of the k loop costs a warp the ideal 2 wavefronts."""
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
                + ("the quarter-warps do not merge: lanes i and i^1, or i and i^2, must "
                   "read the same address" if a.merge is None else
                   f"the quarters merge ({a.merge}) but a bank is hit {a.max_degree} times")
                + ")")
    return problems


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
                "there any more: keep it as given and write its step inside it"]
    problems = []
    if not re.search(r"\bcp_async_commit\s*\(\s*\)", body):
        problems.append("no cp_async_commit() in the K loop: each step's copies must close "
                        "a group of their own (one per step, even an empty one), since the "
                        "wait counts groups")
    waits = list(_WAIT.finditer(body))
    if not waits:
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
                                f"{n}: a count of groups is 0 or more; keep STAGES-2 = "
                                f"{want} in flight")
                break
            at = (f"cp_async_wait<{expr}>() at STAGES={stages} waits until at most {n} "
                  f"group{'s' * (n != 1)} {'are' if n != 1 else 'is'} in flight")
            if n > want:
                problems.append(
                    f"{at}: tile t+1, which the next fragments read, has only {want} "
                    f"newer group{'s' * (want != 1)} after it, so its own copies may "
                    f"still be in flight (a race); keep STAGES-2 = {want} in flight")
                break
            if n < want:
                ago = "in this step" if n == 0 else f"{n} step{'s' * (n != 1)} ago"
                problems.append(
                    f"{at}: it also waits for tiles that are not needed yet, down to the "
                    f"one requested {ago}, so a copy gets {n + 1} step"
                    f"{'s' * (n != 0)} of compute to arrive in instead of STAGES-1 = "
                    f"{stages - 1} (right results, but the overlap the stages buy is "
                    f"lost); keep STAGES-2 = {want} in flight")
                break
    return problems
