"""What the exercise tests share: a chapter's solution and skeleton, read from the
notebooks, and the grader's verdict on a source, without a GPU (steps 1-2) or with one."""
import json
from pathlib import Path

from gemm_kernels.exercises.catalog import get
from gemm_kernels.exercises.grader import FAIL, PASS, grade
from gemm_kernels.exercises.solutions import exercise_cells

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def chapter_notebook(chapter: str) -> Path:
    return next(NOTEBOOKS.glob(f"{chapter}_*.ipynb"))


def solution_notebook(chapter: str) -> Path:
    return NOTEBOOKS / "solutions" / f"{chapter}_solution.ipynb"


def source_in(path: Path, name: str) -> str:
    """The CUDA source of exercise `name`'s cell in notebook `path`."""
    found = [src for n, src in exercise_cells(path) if n == name]
    assert len(found) == 1, f"{path.name} has {len(found)} %%exercise {name} cells"
    return found[0]


def solution(name: str) -> str:
    return source_in(solution_notebook(get(name).chapter), name)


def skeleton_cell(name: str) -> str:
    return source_in(chapter_notebook(get(name).chapter), name)


def status(report) -> dict:
    """{step name: (status, detail)}."""
    return {s.name: (s.status, s.detail) for s in report.steps}


def static_verdict(name: str, source: str) -> dict:
    """Steps 1-2 only (step 3 on the CPU has tests of its own: test_cpu_step.py)."""
    return status(grade(name, source, gpu=False, emulate=False))


def first_failure(report):
    return next(((s.name, s.detail) for s in report.steps if s.status == FAIL), None)


def refused_as_wrong(name: str, old: str, new: str):
    """Grade the solution with `old` replaced by `new` on a GPU: step "correct" must be
    the first to fail. Returns its detail, for checks of the message."""
    src = solution(name)
    assert old in src, f"{old!r} is not in the solution of {name}"
    step, detail = first_failure(grade(name, src.replace(old, new), gpu=True))
    assert step == "correct", (step, detail)
    return detail


def assert_right_and_timed(report) -> None:
    """Steps 1-3 passed and step 4 ran. Its verdict is a timing, which a test never
    asserts: `scripts/gpu_host.sh grade` reports it for every solution."""
    print(f"\n{report}")
    v = status(report)
    assert all(v[s][0] == PASS for s in ("compile", "static", "correct")), str(report)
    assert v["speed"][0] in (PASS, FAIL) and "timed together" in v["speed"][1], str(report)


__all__ = ["assert_right_and_timed", "refused_as_wrong", "FAIL", "PASS", "chapter_notebook", "solution_notebook", "source_in", "solution",
           "skeleton_cell", "status", "static_verdict", "first_failure", "grade", "json"]
