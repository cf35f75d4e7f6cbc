"""Chapter 07's static check: on the float4 path every load of A and B from global
memory and every load from shared memory is 128 bits wide.

"LDG.E.128" and "LDS.128" appearing somewhere in the SASS is not enough: the epilogue's
float4 reads of C are LDG.E.128 too, and one operand read as float4 next to another
read a float at a time still shows an LDS.128. A and B are `const __restrict__`, so
their loads take the read-only path (LDG.E...CONSTANT) and C's do not: that tells them
apart.
"""
from __future__ import annotations

from typing import Callable

from gemm_kernels.exercises.ch05_checks import count
from gemm_kernels.exercises.submission import submission_sass


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
