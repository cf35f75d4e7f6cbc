"""Grade a student's notebook file: every `%%exercise NAME` cell, for an instructor
(`python -m gemm_kernels grade NOTEBOOK.ipynb`)."""
from __future__ import annotations

from pathlib import Path

from gemm_kernels.exercises.grader import Report
from gemm_kernels.exercises.magic import submit
from gemm_kernels.exercises.solutions import MAGIC, exercise_cells, solution_text

def solution_source(name: str) -> str:
    """The worked solution of exercise `name`: its cell in its chapter's solution notebook,
    the one source the chapters' tables of graded mistakes start from."""
    from gemm_kernels.exercises.catalog import get
    return solution_text(get(name).chapter, name)


def solution_kernel(name: str):
    """The worked solution of exercise `name` as a kernel named "<name>: worked solution":
    the chapter's kernel around the solution's text (what a variant's recorded row is
    matched against, by that name and the text's hash)."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.submission import submission_kernel
    k = submission_kernel(name, get(name).kernel, solution_source(name))
    return k.with_code(k.code, name=f"{name}: worked solution", source=k.source)


def solution_shape(name: str) -> tuple:
    """The shape exercise `name` is timed at: its time_shape, else its time_size, cubed
    for a GEMM, squared for a copy."""
    from gemm_kernels.core.launch import DTYPES, kernel_of
    from gemm_kernels.exercises.catalog import get
    ex = get(name)
    if ex.time_shape:
        return tuple(ex.time_shape)
    n = ex.time_size
    return (n, n, n) if kernel_of(ex.kernel).op in DTYPES else (n, n)


def grade_notebook(path: str | Path, gpu: bool | None = None) -> list[Report]:
    cells = exercise_cells(path)
    if not cells:
        raise ValueError(f"{path}: no {MAGIC} cell to grade")
    return [submit(name, source, gpu) for name, source in cells]
