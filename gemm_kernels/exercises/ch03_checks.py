"""Chapter 03's static check, read from the submission's SASS: the tile loop's two
barriers, in their places.

A missing barrier is a race, and a race may go unseen in a correctness test: the
threads of a block happen to run in an order that hides it. The SASS shows the
structure without running anything: the shared stores (STS, the tile copies) before a
first BAR.SYNC, the shared loads (LDS, the products) between it and a second one. The
check cannot see a wrong index; only a run on a GPU shows that.
"""
from __future__ import annotations

import re
from typing import Callable

from gemm_kernels.exercises.ch05_checks import opcodes
from gemm_kernels.exercises.stubs import STUB
from gemm_kernels.exercises.submission import submission_sass


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
    """The static check of exercise 03 (see the module's docstring); silent while the
    source still holds the stub, which the grader reports itself."""
    def check(source: str) -> list[str]:
        if STUB in source:
            return []
        sass = submission_sass(exercise, kernel, params, source)
        return [] if sass is None else barrier_problems(sass)
    check.__name__ = f"two_barriers_{exercise}"
    return check
