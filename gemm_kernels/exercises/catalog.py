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
from gemm_kernels.exercises.ch05_checks import shared_loads_per_ffma  # noqa: E402

# graded at the registry's default configuration
_TILE_1D = {"BM": 64, "BN": 64, "BK": 16, "TM": 16}
register(Exercise(
    name="05_tile_1d", chapter="05", title="the 1D-tile inner loop: one B value, TM FMAs",
    kernel="tile_1d", params=_TILE_1D,
    sass=("LDS.128",),
    # One B value and TM A values per k for TM FFMA: (TM + 1) / TM loads per FFMA at
    # most, against 2 when every product reads both operands from shared memory.
    static_checks=(shared_loads_per_ffma(
        "05_tile_1d", "tile_1d", _TILE_1D, 17, 16,
        "per k, one value of B read once and TM values of A, for TM FFMA"),),
    hints={"static": "k outermost: read Bs[k][tc] into a register once per k, then the TM "
                     "products with As[tr*TM + i][k]; unroll both loops so that acc[] "
                     "stays in registers and the A reads along k merge into LDS.128",
           "correct": "thread (tr, tc) owns rows tr*TM .. tr*TM+TM-1 of column tc: "
                      "acc[i] += As[tr*TM + i][k] * Bs[k][tc], for every k of the tile",
           "speed": "keep B's value in a register for the whole i loop, and unroll both "
                    "loops"},
))


# ---------------------------------------------------------------- chapter 06
# graded at the registry's default configuration
_TILE_2D_REG = {"BM": 64, "BN": 128, "BK": 16, "TM": 8, "TN": 4}
register(Exercise(
    name="06_tile_2d_reg", chapter="06", title="register caching of the A and B fragments",
    kernel="tile_2d_reg", params=_TILE_2D_REG,
    sass=("LDS.128",),
    # Per k, TM + TN values read for TM * TN FFMA: 12 for 32 at 8 x 4. The inner-product
    # order (each output's dot product on its own) reads 2 per FFMA.
    static_checks=(shared_loads_per_ffma(
        "06_tile_2d_reg", "tile_2d_reg", _TILE_2D_REG,
        8 + 4, 8 * 4, "per k, TM + TN values read into registers, then TM*TN FFMA"),),
    hints={"static": "k outermost: per k, load a[0..TM-1] and b[0..TN-1] from shared memory "
                     "once, then the TM x TN products from registers; unroll every loop",
           "correct": "a[i] = As[tr*TM + i][k], b[j] = Bs[k][tc*TN + j], then "
                      "acc[i][j] += a[i] * b[j] for every i and j",
           "speed": "unroll the k, i and j loops so that a[], b[] and acc[][] are registers"},
))


# ---------------------------------------------------------------- chapter 07
from gemm_kernels.exercises.ch07_checks import all_loads_128  # noqa: E402

# graded at the registry's default configuration
_FLOAT4 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
register(Exercise(
    name="07_float4", chapter="07", title="float4 loads and the transposed A store",
    kernel="float4", params=_FLOAT4,
    # A and B arrive by 128-bit read-only loads, B's float4 is stored whole, the
    # operands leave shared memory 128 bits at a time.
    sass=("LDG.E.128.CONSTANT", "LDS.128", "STS.128"),
    static_checks=(all_loads_128("07_float4", "float4", _FLOAT4),),
    hints={"static": "read A and B with load_float4 (one LDG.E.128 each), store B's float4 "
                     "whole with a float4 store, and read a[] and b[] as float4s from "
                     "As[k][tr*TM + i] and Bs[k][tc*TN + j]",
           "correct": "the float4 of A at row m, columns k..k+3 goes down a column of the "
                      "transposed tile: As[k][m], As[k+1][m], As[k+2][m], As[k+3][m]; "
                      "float4s outside A or B are zeros",
           "speed": "every shared-memory read of the inner loop should be an LDS.128"},
))


# ---------------------------------------------------------------- chapter 08
# (chapter 08's exercise is registered here)


# ---------------------------------------------------------------- chapter 09
# (chapter 09's exercise is registered here)


# ---------------------------------------------------------------- chapter 10
# (chapter 10's exercise is registered here)


# ---------------------------------------------------------------- chapter 11
# (chapter 11's exercise is registered here)
