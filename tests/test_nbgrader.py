"""The exercise cells under the real nbgrader, on chapter 01: `generate_assignment` turns
the solution notebook into the chapter's student version, and `autograde` scores the
student version 0 and the solution full marks.

A course directory in a temporary folder, nbgrader's layout:
    nbgrader_config.py, gemm_kernels -> the package (the notebooks' first cell looks for a
    gemm_kernels folder among the working directory's parents), source/ch01/01_naive.ipynb,
    release/ (generated), submitted/<student>/ch01/, autograded/ (written), gradebook.db.
"""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gemm_kernels.exercises.solutions import exercise_cells
from gemm_kernels.exercises.stubs import STUB, skeleton
from exercise_helpers import chapter_notebook, solution_notebook, source_in

nbgrader_api = pytest.importorskip("nbgrader.api", reason="nbgrader: pip install -r "
                                   "requirements-dev.txt")

ROOT = Path(__file__).resolve().parent.parent
NAME, ASSIGNMENT, NOTEBOOK = "01_index", "ch01", "01_naive"
TEST_CELL = f"ex{NAME}_test"
CONFIG = f"""\
c = get_config()
c.CourseDirectory.course_id = "gemm_kernels"
c.CourseDirectory.root = {{root!r}}
c.CourseDirectory.db_url = "sqlite:///" + {{db!r}}
c.Exchange.root = {{exchange!r}}          # never used offline; kept inside the course
c.ClearSolutions.code_stub = {{{{"python": {STUB!r}}}}}
c.Execute.timeout = 300                    # per cell; a GPU host grades steps 3-4 too
"""


def _env() -> dict:
    """This environment, with the interpreter's scripts on PATH (nbgrader's gradebook runs
    the `alembic` command) and the package on PYTHONPATH (for the kernels nbgrader starts;
    the notebooks' first cell finds it through the course's gemm_kernels link too)."""
    def prepend(var, first):
        return os.pathsep.join([first, *filter(None, [os.environ.get(var)])])
    return {**os.environ, "PATH": prepend("PATH", str(Path(sys.executable).parent)),
            "PYTHONPATH": prepend("PYTHONPATH", str(ROOT))}


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    """One nbgrader command in the course directory."""
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{res.stdout}\n{res.stderr}"
    print(f"nbgrader {args[0]}: {time.perf_counter() - t:.1f} s")
    return res


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The course after generate_assignment and autograde of two submissions: 'student'
    (the generated student version, untouched) and 'solver' (the solution)."""
    course = tmp_path_factory.mktemp("course")
    (course / "gemm_kernels").symlink_to(ROOT / "gemm_kernels", target_is_directory=True)
    (course / "nbgrader_config.py").write_text(CONFIG.format(
        root=str(course), db=str(course / "gradebook.db"), exchange=str(course / "exchange")))
    source = course / "source" / ASSIGNMENT
    source.mkdir(parents=True)
    shutil.copy(solution_notebook("01"), source / f"{NOTEBOOK}.ipynb")

    start = time.perf_counter()
    nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    released = course / "release" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    for student, nb in (("student", released), ("solver", source / f"{NOTEBOOK}.ipynb")):
        dest = course / "submitted" / student / ASSIGNMENT
        dest.mkdir(parents=True)
        shutil.copy(nb, dest / f"{NOTEBOOK}.ipynb")
    nbgrader(course, "autograde", ASSIGNMENT, "--force")
    print(f"\nnbgrader generate_assignment + autograde of 2 submissions: "
          f"{time.perf_counter() - start:.1f} s")
    return course


def test_generated_student_version_is_the_chapter_notebooks_cell(course):
    released = course / "release" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    generated = source_in(released, NAME)
    assert generated == source_in(chapter_notebook("01"), NAME)
    assert generated == skeleton(source_in(solution_notebook("01"), NAME))
    assert len(exercise_cells(released)) == 1


def _test_cell_score(course: Path, student: str) -> tuple[float, float]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", _env()["PATH"])
        with nbgrader_api.Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            grade = gb.find_grade(TEST_CELL, NOTEBOOK, ASSIGNMENT, student)
            return grade.score, grade.max_score


def _error_in_test_cell(course: Path, student: str) -> str:
    nb = json.loads((course / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
                    .read_text())
    cell = next(c for c in nb["cells"]
                if c["metadata"].get("nbgrader", {}).get("grade_id") == TEST_CELL)
    return "\n".join(o.get("evalue", "") for o in cell["outputs"] if o["output_type"] == "error")


def test_student_version_scores_zero(course):
    assert _test_cell_score(course, "student") == (0, 1)
    assert STUB in _error_in_test_cell(course, "student")   # refused for the stub left in


def test_solution_scores_full_marks(course):
    assert _test_cell_score(course, "solver") == (1, 1), _error_in_test_cell(course, "solver")
