"""The exercises: for each chapter, which registry kernel the student's source stands in
for, the configuration graded, what the static step looks for, the speed asked for.

The student's source keeps the kernel's name and template parameters, so the registry's
tunables, validation, launch geometry, checker and timing harness serve it unchanged.
Its solution lives in `notebooks/solutions/`, inside nbgrader's solution markers; the
chapter's notebook holds the same cell with those regions replaced by TODO comments.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from gemm_kernels.measure.check import RAGGED_SHAPES


@dataclass(frozen=True)
class Exercise:
    """One graded kernel.

    kernel: the registry entry the submission replaces (and the reference it is timed
        against: the chapter's own kernel, at the same configuration).
    params: the configuration graded.
    sass: opcodes that must appear in the submission's SASS (the chapter's point).
    max_registers: registers per thread allowed; spills are never allowed.
    speed: the fraction of the reference kernel's rate the submission must reach,
        both timed in one process, interleaved with cuBLAS.
    static_checks: further checks of the source without a GPU (e.g. the bank model on
        the student's shared-memory index); each returns problems, empty when fine.
    hints: a hint per step ("compile", "static", "correct", "speed"), shown on failure.
    """
    name: str
    chapter: str
    title: str
    kernel: str
    params: dict
    sass: tuple[str, ...] = ()
    max_registers: int = 255
    speed: float = 0.9
    static_checks: tuple[Callable[[str], list[str]], ...] = ()
    shapes: tuple = tuple(RAGGED_SHAPES)
    time_size: int = 2048
    hints: dict = field(default_factory=dict)


EXERCISES: dict[str, Exercise] = {}


def register(e: Exercise) -> Exercise:
    if e.name in EXERCISES:
        raise ValueError(f"exercise {e.name!r} registered twice")
    EXERCISES[e.name] = e
    return e


def get(name: str) -> Exercise:
    try:
        return EXERCISES[name]
    except KeyError:
        raise ValueError(f"no exercise named {name!r}; the exercises are "
                         f"{', '.join(sorted(EXERCISES))}") from None


# ---------------------------------------------------------------- chapter 01
register(Exercise(
    name="01_index", chapter="01", title="the thread -> (row, col) index",
    kernel="naive", params={"BLOCK": 32, "MAPPING": "x->col"},
    hints={"compile": "keep the kernel's name and template parameters as given",
           "correct": "row comes from the y coordinate and col from x when X_TO_COL is 1; "
                      "threads past the edge of C must not write",
           "speed": "with X_TO_COL = 1, neighbouring lanes (threadIdx.x) must get "
                    "neighbouring columns, so that a warp reads B in one piece"},
))


# ---------------------------------------------------------------- chapter 00
# (chapter 00's exercise is registered here)


# ---------------------------------------------------------------- chapter 02
# (chapter 02's exercise is registered here)


# ---------------------------------------------------------------- chapter 03
# (chapter 03's exercise is registered here)


# ---------------------------------------------------------------- chapter 04
# (chapter 04's exercise is registered here)


# ---------------------------------------------------------------- chapter 05
# (chapter 05's exercise is registered here)


# ---------------------------------------------------------------- chapter 06
# (chapter 06's exercise is registered here)


# ---------------------------------------------------------------- chapter 07
# (chapter 07's exercise is registered here)


# ---------------------------------------------------------------- chapter 08
# (chapter 08's exercise is registered here)


# ---------------------------------------------------------------- chapter 09
# (chapter 09's exercise is registered here)


# ---------------------------------------------------------------- chapter 10
# (chapter 10's exercise is registered here)


# ---------------------------------------------------------------- chapter 11
# (chapter 11's exercise is registered here)
