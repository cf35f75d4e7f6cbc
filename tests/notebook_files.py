"""Checks of a chapter's two notebooks as files, shared by the chapters' notebook tests:
the exercise cell followed by its grade, short code cells that call the package, and no
measured number typed into the text (rates, percentages, times come from the recording)."""
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def assert_exercise_followed_by_its_grade(path: Path, exercise: str, solved: bool):
    ids = [c.get("id") for c in cells(path)]
    assert ids.index(f"ex-{exercise}-kernel") < ids.index(f"ex-{exercise}-test")
    src = "".join(next(c for c in cells(path) if c.get("id") == f"ex-{exercise}-kernel")["source"])
    assert src.startswith(f"%%exercise {exercise}")
    assert ("BEGIN SOLUTION" in src) == solved


def assert_code_cells_are_short_calls(path: Path):
    for c in cells(path)[2:]:
        if c["cell_type"] == "code" and not c["id"].startswith("ex-"):
            assert len(c["source"]) <= 2, c["id"]


def assert_no_measurement_typed(*paths: Path):
    for path in paths:
        for c in cells(path):
            if c["cell_type"] == "markdown":
                text = "".join(c["source"])
                assert not re.search(r"\d+(\.\d+)?\s*(TFLOP/s|%|ms\b|million)", text), c["id"]
