"""What every exercise must do, whatever its chapter (its cells are checked in
tests/test_exercise_catalog.py): the skeleton compiles and is refused, naming the lines to write; the
solution passes the static steps here and, on a GPU, is right and timed; a typo is a
compile error on the right line of the cell. Each chapter's own wrong answers are in
tests/test_exercise_chNN.py."""
import pytest

from gemm_kernels.exercises.catalog import EXERCISES
from gemm_kernels.exercises.stubs import BEGIN, STUB
from exercise_helpers import (FAIL, PASS, assert_right_and_timed, grade, skeleton_cell,
                              solution, static_verdict)
from gpu import needs_gpu

NAMES = sorted(EXERCISES)


@pytest.mark.parametrize("name", NAMES)
def test_the_solution_passes_the_static_steps(name):
    v = static_verdict(name, solution(name))
    assert v["compile"][0] == PASS and v["static"][0] == PASS, v


@pytest.mark.parametrize("name", NAMES)
def test_the_skeleton_compiles_and_is_refused_naming_the_lines_to_write(name):
    src = skeleton_cell(name)
    v = static_verdict(name, src)
    stubs = [i for i, line in enumerate(src.split("\n"), 2) if STUB in line]
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert STUB in v["static"][1] and all(str(i) in v["static"][1] for i in stubs), v


@pytest.mark.parametrize("name", NAMES)
def test_a_typo_is_a_compile_error_on_the_cells_line(name):
    lines = solution(name).split("\n")
    at = next(i for i, line in enumerate(lines) if BEGIN in line) + 1
    lines.insert(at, "    (void)no_such_name;")
    v = static_verdict(name, "\n".join(lines))
    assert v["compile"][0] == FAIL and f"line {at + 2}:" in v["compile"][1], v


@needs_gpu
@pytest.mark.parametrize("name", NAMES)
def test_the_solution_is_right_and_timed_on_a_gpu(name):
    assert_right_and_timed(grade(name, solution(name), gpu=True))
