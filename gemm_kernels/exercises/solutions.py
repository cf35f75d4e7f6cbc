"""The exercise cells of a notebook (`%%exercise NAME` and the CUDA text under it), and
the worked solution of an exercise read from its chapter's solution notebook. Below the
catalog and the grader: a static check may compare a submission with the worked answer.
"""
from __future__ import annotations

import json
from pathlib import Path

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


def solution_text(chapter: str, name: str) -> str:
    """The CUDA text of exercise `name`'s cell in chapter `chapter`'s solution notebook."""
    path = SOLUTIONS / f"{chapter}_solution.ipynb"
    found = [src for n, src in exercise_cells(path) if n == name]
    if len(found) != 1:
        raise ValueError(f"{path}: expected one {MAGIC} {name} cell, found {len(found)}")
    return found[0]
