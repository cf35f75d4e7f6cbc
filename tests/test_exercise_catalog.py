"""Every chapter has its exercise: registered, valid for its registry kernel, its cell in
the chapter notebook (the skeleton) and in the solution notebook (the solution)."""
import pytest

from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.exercises.catalog import EXERCISES
from gemm_kernels.exercises.solutions import exercise_cells
from gemm_kernels.exercises.stubs import skeleton
from exercise_helpers import NOTEBOOKS, chapter_notebook, solution_notebook

CHAPTERS = sorted(p.name[:2] for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_has_an_exercise(chapter):
    assert any(e.chapter == chapter for e in EXERCISES.values()), f"chapter {chapter}"


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_each_exercise_is_a_valid_configuration_of_its_kernel(name):
    e = EXERCISES[name]
    assert e.kernel in KERNELS and not KERNELS[e.kernel].problems(e.params), name


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_each_exercise_has_its_two_cells(name):
    e = EXERCISES[name]
    student = dict(exercise_cells(chapter_notebook(e.chapter)))
    solved = dict(exercise_cells(solution_notebook(e.chapter)))
    assert name in student and name in solved
    assert student[name] == skeleton(solved[name]) != solved[name]
