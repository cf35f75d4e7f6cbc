"""Chapter 15's static check: the phase parities of the warp-specialised ring, simulated
without a GPU.

The student writes two lines of `hgemm_wgmma_ws`: `full_parity = <expression>;` (the
parity the consumers wait for on full[s] before they read tile t) and
`empty_parity = <expression>;` (the parity the producer waits for on empty[s] before it
copies tile t >= STAGES into stage s), expressions in t and STAGES. This module reads
the two expressions (`cexpr`) and plays the ring for STAGES = 2, 3 and 4 and 4 STAGES + 1
tiles, the graded STAGES first, in every order the producer, the copies and the consumers
can take:

* an mbarrier counts its completed phases; phase k has parity k & 1. A wait for parity p
  passes as soon as the barrier's current (open) phase has the other parity, i.e. once
  the latest phase of parity p has completed, whichever phase that was (PTX ISA,
  mbarrier: phase parity). So a wait whose parity is off by one passes at once, on a
  phase completed long ago;
* full[s] completes a phase when a copy's bytes have landed in stage s; empty[s] when
  every consumer has arrived after reading stage s;
* a consumer whose wait passes before tile t has landed in its stage reads stale data; a
  producer whose wait passes before every consumer has finished tile t - STAGES
  overwrites unread data; a state where nobody can move and tiles are left is a wait that
  never passes (on a GPU: a hang, stopped by the grader's time limit).

The report names the first tile, its stage, and what happens, with the barrier's state,
so that a student can see which phase the wait asked for and which it should have.
"""
from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass
from typing import Callable

from gemm_kernels.core.kernels import get as get_kernel
from gemm_kernels.exercises.cexpr import (ExpressionError, assignments, code_only,
                                          compile_expression, initializers)
from gemm_kernels.exercises.stubs import STUB

NAMES = ("t", "STAGES")
LINES = ("full_parity", "empty_parity")


def tiles_played(stages: int) -> int:
    """Tiles the simulation runs through: four times round the ring, and one more."""
    return 4 * stages + 1


# ------------------------------------------------------------------ the expressions

def parity_expressions(source: str) -> tuple[dict | None, str | None]:
    """({"full_parity": text, "empty_parity": text}, None), or (None, a problem), or
    (None, None) while a line is still the stub (the grader reports the stub)."""
    code = code_only(source)
    found = {}
    for name in LINES:
        lines, changed = assignments(code, name)
        if not lines and STUB not in source:
            # the parity written where the variable is declared is the same answer
            lines = initializers(code, name)
        if changed:
            return None, (f"{name} is changed after its line `{name} = <expression>;`: the "
                          "check reads that one line, so write the whole parity there")
        if len(lines) > 1:
            return None, (f"{name} is assigned {len(lines)} times: the check reads one line "
                          f"`{name} = <expression>;`, an expression in t and STAGES")
        if lines:
            found[name] = lines[0]
    if len(found) < len(LINES):
        if STUB in source:
            return None, None
        missing = [n for n in LINES if n not in found]
        return None, ("the check cannot find the line " +
                      " or ".join(f"`{n} = <expression>;`" for n in missing) +
                      " in hgemm_wgmma_ws: keep the given lines around it and write each "
                      "parity as one such line")
    return found, None


# ------------------------------------------------------------------ the ring

@dataclass(frozen=True)
class State:
    """One moment of the ring. producer: the next tile it copies; consumers: for each, its
    tile and whether it is reading it (its wait passed); full_done / empty_done: phases
    each barrier has completed; empty_in: arrivals in empty's open phase; holds: the tile
    whose bytes are in each stage (-1: none yet); flying: the tile being copied into each
    stage (-1: none)."""
    producer: int
    consumers: tuple
    full_done: tuple
    empty_done: tuple
    empty_in: tuple
    holds: tuple
    flying: tuple


def _set(t: tuple, i: int, v) -> tuple:
    return t[:i] + (v,) + t[i + 1:]


def _phases(n: int) -> str:
    return f"{n} phase{'' if n == 1 else 's'}"


def _barrier(name: str, done: int) -> str:
    """What a barrier's state means for a wait: its completed phases and its open one."""
    if done == 0:
        return f"{name} has completed no phase yet: its open phase 0 has parity 0"
    closed = ("phase 0 (parity 0)" if done == 1 else
              f"phases 0 to {done - 1}, the latest of parity {(done - 1) & 1}")
    return f"{name} has completed {closed}; its open phase {done} has parity {done & 1}"


@dataclass(frozen=True)
class Fault:
    """What goes wrong at `tile` (with `stages` stages): `kind` ("stale", "overwrite",
    "forever", "parity"), in words."""
    stages: int
    tile: int
    kind: str
    text: str
    who: str = ""           # "consumers" or "producer": whose wait
    instead: str = ""       # for a wait that never passes: the timing that leads there


def _value(f, name: str, t: int, stages: int) -> tuple[int | None, Fault | None]:
    try:
        v = f(t=t, STAGES=stages)
    except ExpressionError as e:
        return None, Fault(stages, t, "parity", f"{name}: {e}")
    if v not in (0, 1):
        return None, Fault(
            stages, t, "parity",
            f"with STAGES = {stages}, at tile {t} (stage {t % stages}) {name} is {v}: a "
            "phase parity is 0 or 1, the only values mbarrier.try_wait.parity takes (PTX "
            "ISA); what it does with another value is not defined")
    return v, None


def play(full: Callable, empty: Callable, stages: int, consumers: int,
         tiles: int) -> list[Fault]:
    """The faults of the ring with these parity functions, found in every order of its
    moves, keeping those of the earliest tile (one per kind); empty when it runs right."""
    first: dict[str, Fault] = {}

    def record(f: Fault):
        if f.kind not in first:
            first[f.kind] = f

    # the parities first: a value other than 0 or 1 needs no simulation
    fp, ep = [], []
    for t in range(tiles):
        for name, f, out, needed in (("full_parity", full, fp, True),
                                     ("empty_parity", empty, ep, t >= stages)):
            v, fault = _value(f, name, t, stages) if needed else (0, None)
            if fault:
                return [fault]
            out.append(v)

    none = (-1,) * stages
    start = State(0, ((0, False),) * consumers, (0,) * stages, (0,) * stages,
                  (0,) * stages, none, none)
    seen, queue = {start}, deque([start])
    while queue:
        st = queue.popleft()
        moves = []
        # the producer copies tile p into stage p % STAGES, after its wait
        p = st.producer
        if p < tiles:
            s = p % stages
            if p < stages or (st.empty_done[s] & 1) != ep[p]:
                unread = [c for c, (ct, _) in enumerate(st.consumers) if ct <= p - stages]
                if unread:
                    ct, reading = st.consumers[unread[0]]
                    record(Fault(stages, p, "overwrite",
                                 f"with STAGES = {stages}, at tile {p} (stage {s}) the "
                                 f"producer's wait on empty[{s}] for parity {ep[p]} passes "
                                 f"before the consumers have finished tile {p - stages}, "
                                 f"which stage {s} still holds ("
                                 + ("a consumer is reading it" if ct == p - stages and reading
                                    else f"a consumer is still at tile {ct}")
                                 + f"): {_barrier(f'empty[{s}]', st.empty_done[s])}, so "
                                 "the wait returns at once, and the copy of tile "
                                 f"{p} overwrites data not yet read", "producer"))
                else:
                    moves.append(State(p + 1, st.consumers, st.full_done, st.empty_done,
                                       st.empty_in, st.holds, _set(st.flying, s, p)))
        # a copy lands: its bytes complete full[s]'s open phase
        for s in range(stages):
            if st.flying[s] >= 0:
                moves.append(State(st.producer, st.consumers,
                                   _set(st.full_done, s, st.full_done[s] + 1), st.empty_done,
                                   st.empty_in, _set(st.holds, s, st.flying[s]),
                                   _set(st.flying, s, -1)))
        # a consumer waits on full[s], then reads; when done, it arrives on empty[s]
        for c, (ct, reading) in enumerate(st.consumers):
            if ct >= tiles:
                continue
            s = ct % stages
            if reading:
                arrived = st.empty_in[s] + 1
                done = arrived == consumers
                moves.append(State(st.producer, _set(st.consumers, c, (ct + 1, False)),
                                   st.full_done,
                                   _set(st.empty_done, s, st.empty_done[s] + done),
                                   _set(st.empty_in, s, 0 if done else arrived),
                                   st.holds, st.flying))
            elif (st.full_done[s] & 1) != fp[ct]:
                if st.holds[s] != ct:
                    now = ("nothing yet" if st.holds[s] < 0 else f"tile {st.holds[s]}")
                    copy = ("is still in flight" if st.flying[s] == ct else
                            "has not been issued yet")
                    record(Fault(stages, ct, "stale",
                                 f"with STAGES = {stages}, at tile {ct} (stage {s}) the "
                                 f"consumers' wait on full[{s}] for parity {fp[ct]} passes "
                                 f"before tile {ct}'s bytes have landed (its copy {copy}): "
                                 f"{_barrier(f'full[{s}]', st.full_done[s])}, so the wait "
                                 f"returns at once, and the consumers read stage {s} while "
                                 f"it holds {now}: stale data", "consumers"))
                else:
                    moves.append(State(st.producer, _set(st.consumers, c, (ct, True)),
                                       st.full_done, st.empty_done, st.empty_in, st.holds,
                                       st.flying))
        if not moves and not (st.producer == tiles
                              and all(ct == tiles for ct, _ in st.consumers)):
            record(_forever(st, fp, ep, stages, tiles))
        for m in moves:
            if m not in seen:
                seen.add(m)
                queue.append(m)
    if not first:
        return []
    earliest = min(f.tile for f in first.values())
    return [f for f in first.values() if f.tile == earliest]


def _forever(st: State, fp, ep, stages: int, tiles: int) -> Fault:
    """The wait that never passes in a state where nothing can move: one whose phase has
    already completed, so that with its parity it waits for the next phase instead (the
    other side's waits are then fair: they need what this one holds back)."""
    waits = []
    p = st.producer
    if p < tiles:
        s, done = p % stages, st.empty_done[p % stages]
        waits.append((p, done >= p // stages, "producer", (
            f"the producer waits forever on empty[{s}] for parity {ep[p]} before copying "
            f"tile {p}: {_barrier(f'empty[{s}]', done)}, so the wait needs phase {done} to "
            f"complete, which only the consumers' finishing tile {done * stages + s} can "
            f"do, and they wait for the copy of tile {p} first"),
            f"had the consumers finished tile {p - stages} before the producer's wait"))
    ct = min(ct for ct, _ in st.consumers)
    if ct < tiles:
        s, done = ct % stages, st.full_done[ct % stages]
        waits.append((ct, done >= ct // stages + 1, "consumers", (
            f"the consumers wait forever on full[{s}] for parity {fp[ct]} before reading "
            f"tile {ct}: {_barrier(f'full[{s}]', done)}, so the wait needs phase {done} to "
            f"complete, which only the copy of tile {done * stages + s} can do, and the "
            f"producer waits for the consumers to finish tile {ct} first"),
            f"had tile {ct}'s bytes landed before the consumers' wait"))
    tile, _, who, text, instead = sorted(waits, key=lambda w: (not w[1], w[0]))[0]
    return Fault(stages, tile, "forever",
                 f"with STAGES = {stages}, at tile {tile} (stage {tile % stages}) {text}: "
                 "the kernel never finishes (a hang)", who, instead)


def described(faults: list[Fault]) -> str:
    """The faults of one tile in words: a wait that passes too early, with, where the same
    wait never passes in another timing, that too (a shorter clause); else the hang."""
    early = [f for f in faults if f.kind != "forever"]
    if not early:
        return faults[0].text
    where = f"with STAGES = {early[0].stages}, at tile {early[0].tile} " \
            f"(stage {early[0].tile % early[0].stages}) "
    text = "; and ".join(f.text.replace(where, "") if i else f.text
                         for i, f in enumerate(early))
    hang = [f for f in faults if f.kind == "forever" and f.who in {e.who for e in early}]
    if hang:
        text += (f" ({hang[0].instead}, it would instead have waited forever, for a later "
                 "phase of that parity: a hang)")
    return text


# ------------------------------------------------------------------ the check

@functools.lru_cache(maxsize=64)
def assess(source: str, params: tuple = ()) -> tuple[str, ...]:
    """Exercise 15's problems with `source` at `params` (a tuple of items): empty when
    the parities run the ring right for every STAGES checked."""
    p = get_kernel("wgmma_ws").resolve(dict(params))
    exprs, problem = parity_expressions(source)
    if exprs is None:
        return (problem,) if problem else ()
    try:
        full, empty = (compile_expression(exprs[n], NAMES) for n in LINES)
    except ExpressionError as e:
        return (str(e),)
    order = [p["STAGES"]] + [s for s in (2, 3, 4) if s != p["STAGES"]]
    for stages in order:
        faults = play(full, empty, stages, p["CONSUMERS"], tiles_played(stages))
        if faults:
            return (described(faults),)
    return ()


def phases_check(params: dict | None = None) -> Callable[[str], list[str]]:
    """The static check of exercise 15 at `params` (`assess`). Its `note(source)` says
    what a passing pair was played through, for the grader's report."""
    items = tuple(sorted((params or {}).items()))

    def check(source: str) -> list[str]:
        return list(assess(source, items))

    def note(source: str) -> str:
        exprs, _ = parity_expressions(source)
        if assess(source, items) or exprs is None:
            return ""
        return ("the ring played for STAGES = 2, 3 and 4, 4 STAGES + 1 tiles, in every "
                "order of copies and consumers: no stage read before its bytes land, none "
                "overwritten before it is read, no wait that never passes")

    check.__name__ = "phases_check"
    check.note = note
    return check


def phases_hint(detail: str) -> str:
    """Exercise 15's step-2 hint, chosen by what the check found."""
    if STUB in detail or "cannot find" in detail:
        return ""                                   # the message says what to write
    if "the check reads only" in detail or "cannot read" in detail or "divides" in detail:
        return ("write each parity as one C integer expression in t and STAGES, e.g. "
                "(something of t and STAGES) & 1")
    if "is not defined" in detail:
        return ("a parity is one bit: keep only the lowest bit of the phase number (& 1)")
    if "stale data" in detail:
        return ("count the copies into stage s: tiles s, s + STAGES, s + 2 STAGES ... land "
                "there, and each completes one phase of full[s], the first phase 0. Which "
                "phase does tile t complete, and what is its parity?")
    if "overwrites data not yet read" in detail:
        return ("before copying tile t, the producer needs the consumers to have finished "
                "tile t - STAGES: the consumers finish stage s once per trip round the ring, "
                "completing phase 0 of empty[s] after tile s. Which phase of empty[s] do "
                "they complete after tile t - STAGES?")
    if "waits forever" in detail:
        return ("a wait for parity p needs the latest phase of parity p to be the one you "
                "mean: asking for the other parity waits for a phase that completes only "
                "later, after the other side has moved, and it waits for you")
    return ""
