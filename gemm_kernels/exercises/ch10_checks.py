"""Chapter 10's static check: the loads a thread has in flight before its first store,
read from the SASS.

Little's law: a kernel moves at most (bytes in flight) / (latency) bytes per second. A
thread of a copy has in flight the loads it sends before its first store: a store needs
the value it writes, so the thread stops there until that value has come back. The check
compiles the student's copy, reads the order of its global loads (LDG) and stores (STG)
in the SASS, and asks for all TILE / ROWS loads of a thread before its first store, at
the graded parameters and at other values of ROWS (a count that only fits one
configuration, or a compiler that reorders one configuration only, does not pass).
"""
from __future__ import annotations

import re

from gemm_kernels.exercises.ch05_checks import opcodes
from gemm_kernels.exercises.stubs import stub_lines
from gemm_kernels.exercises.submission import submission_sass

_LOAD, _STORE = re.compile(r"LDG(\.\w+)*"), re.compile(r"STG(\.\w+)*")


def loads_before_first_store(sass: str) -> tuple[int, int]:
    """(global loads before the first global store, global loads in all) in the order
    of the SASS: the loads a thread has in flight before it must wait for one of them
    (a store needs the value it writes)."""
    ops = opcodes(sass)
    first = next((i for i, op in enumerate(ops) if _STORE.fullmatch(op)), len(ops))
    return (sum(1 for op in ops[:first] if _LOAD.fullmatch(op)),
            sum(1 for op in ops if _LOAD.fullmatch(op)))


def loads_in_flight(exercise: str, kernel: str, params: dict, also=()):
    """The static check of the copy exercise: at the graded parameters and at each
    change of them in `also` (e.g. {"ROWS": 4}), the compiled kernel issues every one of
    a thread's TILE / ROWS loads before its first store. Reads the SASS of each
    configuration; silent while the source still holds the stub, which the grader
    reports itself."""
    def check(source: str) -> list[str]:
        if stub_lines(source):
            return []
        problems = []
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
                    f"loads (LDG) where each thread copies {want} elements")
            elif before < want:
                problems.append(
                    f"with TILE = {p['TILE']}, ROWS = {p['ROWS']} a thread sends {before} of "
                    f"its {want} loads before its first store (STG), so the rest wait for "
                    "another round trip to memory: all of them must be in flight first")
        return problems

    check.__name__ = f"loads_in_flight_{exercise}"
    return check
