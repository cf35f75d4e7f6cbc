"""Chapter 10's static check: the loads a thread has in flight before its first store,
read from the SASS.

Little's law: a kernel moves at most (bytes in flight) / (latency) bytes per second. A
thread of a copy has in flight the loads it sends before its first store: a store needs
the value it writes, so the thread stops there until that value has come back. The check
compiles the student's copy, reads the order of its global loads (LDG) and stores (STG)
in the SASS, and asks for all TILE / ROWS loads of a thread before its first store, at
the graded parameters and at other values of ROWS (a count that only fits one
configuration, or a compiler that reorders one configuration only, does not pass).

The verdict is the SASS order, the one the chapter teaches: what runs is what ptxas made
of the source, so a kernel whose SASS sends only some of its loads before the first store
makes two round trips to memory, whatever its source says. The PTX (what the source asked
for, after NVVM) is read as well, only to say whose order it is:

* where the PTX interleaves loads and stores, the source does: refused, with the counts;
* where the PTX sends every load first and the SASS does not, the source's order is right
  and ptxas, scheduling the address arithmetic on its own, moved a store up (it does at
  ROWS = 4 with int offsets, and with moving pointers). At the graded configuration (the
  one that is timed) that is refused, with a message that says so; at the other values of
  ROWS it is a note on a pass, not a failure: the student's source is right, and what
  ptxas does with it there is its own choice, which may change with the toolkit. The note
  names what keeps every load first here: offsets (size_t)r * cols + c;
* a kernel refused on the order is also run on the CPU (`cpu_step`, every thread
  emulated) when that can run here: the grader stops after a failed step 2, and a kernel
  that copies the wrong elements must not be reported only as a slow one.
"""
from __future__ import annotations

import re

from gemm_kernels.exercises.ch05_checks import opcodes
from gemm_kernels.exercises.stubs import stub_lines
from gemm_kernels.exercises.submission import submission_kernel, submission_sass

_LOAD, _STORE = re.compile(r"LDG(\.\w+)*"), re.compile(r"STG(\.\w+)*")
_PTX_ACCESS = re.compile(r"\b(ld|st)\.global\b")


def loads_before_first_store(sass: str) -> tuple[int, int]:
    """(global loads before the first global store, global loads in all) in the order
    of the SASS: the loads a thread has in flight before it must wait for one of them
    (a store needs the value it writes)."""
    ops = opcodes(sass)
    first = next((i for i, op in enumerate(ops) if _STORE.fullmatch(op)), len(ops))
    return (sum(1 for op in ops[:first] if _LOAD.fullmatch(op)),
            sum(1 for op in ops if _LOAD.fullmatch(op)))


def ptx_loads_first(ptx: str) -> bool:
    """True when the PTX (NVRTC's output, before ptxas schedules it) has all its global
    loads before its first global store: the order the source asked for."""
    ops = _PTX_ACCESS.findall(ptx)
    return "st" not in ops or "ld" not in ops[ops.index("st"):]


def _order_problem(p: dict, before: int, want: int) -> str:
    return (f"with TILE = {p['TILE']}, ROWS = {p['ROWS']} a thread sends {before} of its "
            f"{want} loads before its first store (STG), so the rest wait for another round "
            "trip to memory: all of them must be in flight first")


def _also_wrong(exercise: str, kernel: str, params: dict, source: str) -> str | None:
    """The CPU emulation's verdict on a kernel that failed on the order, when it is wrong
    (None when it is right or cannot run here)."""
    from gemm_kernels.exercises.cpu_step import correct_on_cpu
    ok, detail = correct_on_cpu(submission_kernel(exercise, kernel, source), params)
    if ok is False:
        return ("it does not copy yet; run on the CPU (every thread emulated): "
                f"{detail}; element (r, c) of `out` must be element (r, c) of `in`")
    return None


def _ptxas_problem(p: dict, before: int, want: int) -> str:
    return (f"with TILE = {p['TILE']}, ROWS = {p['ROWS']} your source sends all {want} loads "
            f"first (the PTX keeps that order), but ptxas moved a store up: in the SASS, "
            f"which is what runs, only {before} of them go before the first store, so the "
            "rest wait for a second round trip. Index `in` and `out` with offsets computed "
            "as (size_t)r * cols + c, as the chapter's copy does: with those ptxas keeps every load "
            "first here (int offsets or moving pointers let it move a store up)")


def _ptxas_note(p: dict, before: int, want: int) -> str:
    return (f"at ROWS = {p['ROWS']} (a note, not graded) your source sends all {want} loads "
            f"first (the PTX keeps that order), but ptxas moved a store up: in the SASS, "
            f"which is what would run there, only {before} of them go before the first "
            "store. Offsets computed as (size_t)r * cols + c keep every load first there too")


def _measure(exercise: str, kernel: str, params: dict, also, source: str,
             notes: list | None = None) -> list[str]:
    """The problems of the source: at each configuration, a SASS that does not send every
    load before its first store (said as the source's order or as ptxas's, from the PTX),
    or that lacks loads; a kernel refused on the order and wrong as well is reported as
    wrong. Where only ptxas reordered, at a configuration other than the graded one, the
    finding goes to `notes` instead."""
    from gemm_kernels.core import compiler
    k = submission_kernel(exercise, kernel, source)
    problems, ordering = [], False
    for change in ({}, *also):
        p = {**params, **change}
        sass = submission_sass(exercise, kernel, p, source)
        if sass is None:
            if change:
                problems.append(f"it does not compile with ROWS = {p['ROWS']}")
            continue
        want = p["TILE"] // p["ROWS"]
        before, total = loads_before_first_store(sass)
        if total < want:
            problems.append(
                f"with TILE = {p['TILE']}, ROWS = {p['ROWS']} the SASS has {total} global "
                f"load{'' if total == 1 else 's'} (LDG) where each thread copies {want} "
                "elements")
        elif before < want:
            by_ptxas = ptx_loads_first(compiler.ptx(k, p)[0])
            if by_ptxas and change:
                if notes is not None:
                    notes.append(_ptxas_note(p, before, want))
                continue
            ordering = True
            problems.append(_ptxas_problem(p, before, want) if by_ptxas
                            else _order_problem(p, before, want))
    if ordering:          # a wrong kernel is reported as wrong first, then as slow
        wrong = _also_wrong(exercise, kernel, params, source)
        problems = [wrong] if wrong else problems
    return problems


def loads_in_flight(exercise: str, kernel: str, params: dict, also=()):
    """The static check of the copy exercise: at the graded parameters and at each
    change of them in `also` (e.g. {"ROWS": 4}), the compiled kernel issues every one of
    a thread's TILE / ROWS loads before its first store. Reads the SASS (and the PTX) of
    each configuration; silent while the source still holds the stub, which the grader
    reports itself. Its `note(source)`, for a passing source, says what the SASS holds."""
    def check(source: str) -> list[str]:
        if stub_lines(source):
            return []
        return _measure(exercise, kernel, params, also, source)

    def note(source: str) -> str:
        notes = []
        if stub_lines(source) or _measure(exercise, kernel, params, also, source, notes):
            return ""
        if notes:
            return (f"every load before the first store in the SASS at ROWS = "
                    f"{params['ROWS']}, the graded configuration; " + "; ".join(notes))
        return "every load before the first store in the SASS at ROWS = " \
            + " and ".join(str({**params, **c}["ROWS"]) for c in ({}, *also))

    check.__name__ = f"loads_in_flight_{exercise}"
    check.note = note
    return check
