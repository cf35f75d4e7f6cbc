"""Chapter 07's static check: on the float4 path every load of A and B from global
memory and every load from shared memory is 128 bits wide.

"LDG.E.128" and "LDS.128" appearing somewhere in the SASS is not enough: the epilogue's
float4 reads of C are LDG.E.128 too, and one operand read as float4 next to another
read a float at a time still shows an LDS.128. A and B are `const __restrict__`, so
their loads take the read-only path (LDG.E...CONSTANT) and C's do not: that tells them
apart.

The exercise is graded at BK = 8, but the float4 -> (m, k) mapping it asks for must hold
for any BK: `right_at` also runs the submission at BK = 16 (the sweep's best depth) on
the CPU, every thread emulated, so a mapping with the 8 written in does not pass.
"""
from __future__ import annotations

import functools
from typing import Callable

from gemm_kernels.exercises.ch05_checks import count
from gemm_kernels.exercises.stubs import stub_lines
from gemm_kernels.exercises.submission import submission_kernel, submission_sass


def all_loads_128(exercise: str, kernel: str, params: dict) -> Callable[[str], list[str]]:
    """A static check: no read-only global load and no shared load narrower than 128
    bits in the submission's SASS at `params`."""
    def check(source: str) -> list[str]:
        sass = submission_sass(exercise, kernel, params, source)
        if sass is None:
            return []
        problems = []
        narrow_g = count(sass, r"LDG(\.E)?(\.(8|16|32|64|U8|S8|U16|S16))?\.CONSTANT")
        if narrow_g:
            problems.append(f"{narrow_g} loads of A or B from global memory narrower than "
                            "128 bits: read them a float4 at a time (load_float4)")
        narrow_s = count(sass, r"LDS(\.(U8|S8|U16|S16|32|64))?")
        if narrow_s:
            problems.append(f"{narrow_s} loads from shared memory narrower than 128 bits: "
                            "read a[] and b[] four values at a time, as float4")
        return problems
    check.__name__ = f"all_loads_128_{exercise}"
    return check


def _where(params: dict, base: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in params.items() if base.get(k) != v)


def right_at(exercise: str, kernel: str, graded: dict, params: dict) -> Callable[[str], list[str]]:
    """A static check: a submission that computes the right C at the graded
    configuration (`graded`) does so at `params` too, both run on the CPU with every
    thread emulated (`cpu_step`). One that is wrong where graded is left to step 3 (its
    message and hint fit that failure); where the emulation cannot run here, the check
    says so in its note and passes."""

    @functools.lru_cache(maxsize=8)
    def verdict(source: str):
        from gemm_kernels.exercises.cpu_step import correct_on_cpu
        if stub_lines(source) or submission_sass(exercise, kernel, params, source) is None:
            return None, ""
        k = submission_kernel(exercise, kernel, source)
        ok_graded, detail = correct_on_cpu(k, graded)
        if ok_graded is not True:   # wrong where graded: step 3 reports it, with its hint
            return None, detail if ok_graded is None else ""
        return correct_on_cpu(k, params)

    def where() -> str:
        return _where(params, graded)

    def check(source: str) -> list[str]:
        ok, detail = verdict(source)
        if ok is False:
            return [f"right at BK = {graded['BK']} but wrong with {where()} (run on the "
                    f"CPU, every thread emulated): {detail}. The mapping of a float4 to its "
                    f"row m and first k must hold for every BK: a row of the A tile holds "
                    f"BK / 4 float4s, so write m and k with BK, not with the "
                    f"{graded['BK']} of the graded tile"]
        return []

    def note(source: str) -> str:
        ok, detail = verdict(source)
        if ok:
            return f"right with {where()} as well (on the CPU)"
        if ok is None and detail:
            return f"not checked with {where()} here ({detail})"
        # wrong where graded: step 3 reports it at BK = graded, with its own hint
        return f"{where()} not checked: the kernel is wrong at the graded tile (step 3)"

    check.__name__ = f"right_at_{exercise}"
    check.note = note
    return check
