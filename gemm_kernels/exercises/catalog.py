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

from gemm_kernels.exercises.ch08_checks import step_order
from gemm_kernels.exercises.ch09_checks import zorder_lanes
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
    racecheck: also run the submission once under compute-sanitizer's racecheck (where
        the CUDA toolkit provides it); a shared-memory hazard fails step "correct" even
        when the numbers came out right this time.
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
    racecheck: bool = False


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
register(Exercise(
    name="08_double_buffer", chapter="08", title="the order of a double-buffered step",
    kernel="double_buffer", params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
    sass=("LDG.E.128", "LDS.128", "BAR.SYNC"),
    static_checks=(step_order,), racecheck=True,
    hints={"compile": "keep the kernel's name, template parameters and the given helpers; "
                      "call them with their template arguments, e.g. "
                      "fetch_tiles<BM, BN, BK, NT, VEC>(...)",
           "static": "in the K loop: fetch_tiles (next tile), compute_stage (stage cur), "
                     "store_tiles (stage cur ^ 1), __syncthreads()",
           "correct": "the prologue needs a barrier between its store and the first "
                      "compute; each step stores into the OTHER stage (cur ^ 1) and ends "
                      "with a barrier",
           "speed": "the next tile's fetch_tiles must come before compute_stage, and only "
                    "one __syncthreads() per step"},
))


# ---------------------------------------------------------------- chapter 09
register(Exercise(
    name="09_zorder", chapter="09", title="the z-order lane mapping",
    kernel="zorder", params={"BM": 128, "BN": 128, "BK": 8, "PAD": 4, "ZORDER": True},
    sass=("LDS.128",), static_checks=(zorder_lanes,),
    hints={"compile": "keep the kernel's name and template parameters; write qr and qc "
                      "as plain integer expressions",
           "static": "lane = b4 b3 b2 b1 b0 (bits): take qr's two low bits from b1 and b4, "
                     "qc's three from b0, b2 and b3; then i and i^1 share A, i and i^2 "
                     "share B",
           "correct": "every thread needs its own (qr, qc): 4 rows per warp down the grid "
                      "(warp / WARPS_N), 8 columns across (warp % WARPS_N)",
           "speed": "the bank check passed, so look for extra work in qr and qc"},
))


# ---------------------------------------------------------------- chapter 10
# (chapter 10's exercise is registered here)


# ---------------------------------------------------------------- chapter 11
# (chapter 11's exercise is registered here)
