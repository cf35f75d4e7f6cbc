"""A student's source as a kernel of the registry: the exercise's registry entry (its
tunables, constraints, launch geometry) around the student's text.

One kernel object per (exercise, source), cached: the compiler caches by kernel object,
so the grader's steps and the static checks that read the SASS share one compilation.
"""
from __future__ import annotations

import functools

from gemm_kernels.core import compiler
from gemm_kernels.core.kernels import get as get_kernel

SOURCE_NAME = "exercise.cu"       # what NVRTC calls the student's text in its messages


@functools.lru_cache(maxsize=64)
def submission_kernel(exercise: str, kernel: str, source: str):
    """Registry kernel `kernel` with `source` as its text, named for `exercise`."""
    return get_kernel(kernel).with_code(source, name=f"{exercise}:submission",
                                        source=SOURCE_NAME)


def submission_sass(exercise: str, kernel: str, params: dict, source: str) -> str | None:
    """The SASS of the submission at `params`, or None when it does not compile (the
    compile step reports that)."""
    try:
        return compiler.sass(submission_kernel(exercise, kernel, source), params)
    except RuntimeError:
        return None
