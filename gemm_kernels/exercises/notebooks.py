"""Grade a student's notebook file: every `%%exercise NAME` cell, for an instructor
(`python -m gemm_kernels grade NOTEBOOK.ipynb`)."""
from __future__ import annotations

import json
from pathlib import Path

from gemm_kernels.exercises.grader import Report
from gemm_kernels.exercises.magic import submit

MAGIC = "%%exercise"
SOLUTIONS = Path(__file__).resolve().parents[2] / "notebooks" / "solutions"


def exercise_cells(path: str | Path) -> list[tuple[str, str]]:
    """(exercise name, CUDA source) of each exercise cell, in notebook order."""
    try:
        nb = json.loads(Path(path).read_text())
        cells = nb["cells"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a readable notebook ({e})") from None
    out = []
    for c in cells:
        if c.get("cell_type") != "code":
            continue
        src = "".join(c.get("source", []))
        first, _, body = src.partition("\n")
        if first.startswith(MAGIC):
            out.append((first[len(MAGIC):].strip(), body))
    return out


def solution_source(name: str) -> str:
    """The worked solution of exercise `name`: its cell in its chapter's solution notebook,
    the one source the chapters' tables of graded mistakes start from."""
    from gemm_kernels.exercises.catalog import get
    path = SOLUTIONS / f"{get(name).chapter}_solution.ipynb"
    found = [src for n, src in exercise_cells(path) if n == name]
    if len(found) != 1:
        raise ValueError(f"{path}: expected one {MAGIC} {name} cell, found {len(found)}")
    return found[0]


def grade_notebook(path: str | Path, gpu: bool | None = None) -> list[Report]:
    cells = exercise_cells(path)
    if not cells:
        raise ValueError(f"{path}: no {MAGIC} cell to grade")
    return [submit(name, source, gpu) for name, source in cells]
