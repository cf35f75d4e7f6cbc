"""Chapter 02's exercise: the skeleton compiles and is refused, the solution passes every
step this machine can run, typical mistakes are refused with the right message."""
import pytest

from gemm_kernels.exercises.stubs import skeleton
from exercise_helpers import (FAIL, PASS, assert_right_and_timed, first_failure, grade,
                              skeleton_cell, solution, static_verdict)
from gpu import needs_gpu

NAME = "02_coalesced"
ROW = "row = tile_row * BLOCK + threadIdx.x / BLOCK;"
COL = "col = tile_col * BLOCK + threadIdx.x % BLOCK;"


def test_notebook_cell_is_the_solutions_skeleton():
    assert skeleton_cell(NAME) == skeleton(solution(NAME))


def test_solution_passes_the_static_steps():
    v = static_verdict(NAME, solution(NAME))
    assert v["compile"][0] == PASS and v["static"][0] == PASS, v


def test_skeleton_compiles_and_is_refused_with_the_lines_to_write():
    v = static_verdict(NAME, skeleton_cell(NAME))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "YOUR CODE HERE" in v["static"][1], v


def test_a_typo_is_a_compile_error_on_the_cells_line():
    src = solution(NAME).replace(COL, COL.replace("threadIdx.x %", "threadIdx.xx %"))
    line = next(i for i, l in enumerate(src.split("\n"), 2) if "threadIdx.xx" in l)
    v = static_verdict(NAME, src)
    assert v["compile"][0] == FAIL and f"line {line}:" in v["compile"][1], v


@needs_gpu
def test_the_uncoalesced_mapping_is_right_and_only_its_speed_tells():
    """Lanes running down a column: every element right; only the speed step can tell it
    apart (its verdict, a timing, is printed, not asserted)."""
    src = solution(NAME)
    assert ROW in src and COL in src
    wrong = src.replace(ROW, ROW.replace("/", "%")).replace(COL, COL.replace("%", "/"))
    assert_right_and_timed(grade(NAME, wrong, gpu=True))


# Typical wrong answers, refused on a GPU by the element-wise check or the guard.
WRONG = {
    "the tile's offset forgotten": (ROW, "row = threadIdx.x / BLOCK;"),
    "row and column both from the modulo": (ROW, ROW.replace("/", "%")),
    "one element too far along the row": (COL, COL.replace(";", " + 1;")),
}


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    old, new = WRONG[what]
    src = solution(NAME)
    assert old in src
    step, detail = first_failure(grade(NAME, src.replace(old, new), gpu=True))
    assert step == "correct", (step, detail)


@needs_gpu
def test_solution_passes_on_a_gpu():
    r = grade(NAME, solution(NAME), gpu=True)
    assert_right_and_timed(r)
