"""Chapter 15's notebooks as files: the exercise and its grade in place, short code cells
that call the package, no measured number typed into the text, and every table and
sentence of the recording read from the one recording that holds the chapter's rows."""
import json
import re
from pathlib import Path

import pytest

from gemm_kernels.notebook import ch15_hopper as ch15

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "notebooks" / "15_hopper.ipynb"
SOLUTION = ROOT / "notebooks" / "solutions" / "15_solution.ipynb"


def cells(path):
    return json.loads(path.read_text())["cells"]


@pytest.mark.parametrize("path", [CHAPTER, SOLUTION])
def test_the_exercise_is_followed_by_its_grade(path):
    ids = [c.get("id") for c in cells(path)]
    assert ids.index("ex-15_phases-kernel") < ids.index("ex-15_phases-test")
    src = "".join(next(c for c in cells(path) if c.get("id") == "ex-15_phases-kernel")["source"])
    assert src.startswith("%%exercise 15_phases")
    assert ("BEGIN SOLUTION" in src) == (path == SOLUTION)


def test_code_cells_are_short_calls_into_the_package():
    for c in cells(CHAPTER)[2:]:
        if c["cell_type"] == "code" and not c["id"].startswith("ex-"):
            assert len(c["source"]) <= 2, c["id"]


def test_no_measurement_is_typed_into_the_text():
    """Rates, percentages of cuBLAS and counts of millions come from the recording."""
    for c in cells(CHAPTER) + cells(SOLUTION):
        if c["cell_type"] == "markdown":
            text = "".join(c["source"])
            assert not re.search(r"\d+(\.\d+)?\s*(TFLOP/s|%|ms\b|million)", text), c["id"]


def test_every_measured_table_names_its_recording():
    rec, prof = ch15.recording(), ch15.study_recording()
    if rec is None:
        pytest.skip("no recording holds chapter 15's rows")
    assert rec.label in ch15.rates_table().title
    if prof is not None:
        assert prof.label in ch15.study_table().title


def test_no_parity_is_shown_before_the_exercise():
    """The answer (the waits with their parities) appears only after the exercise."""
    cs = cells(CHAPTER)
    ex = [c.get("id") for c in cs].index("ex-15_phases-kernel")
    before = "".join("".join(c["source"]) for c in cs[:ex] if c["cell_type"] == "code")
    assert "phase_table" not in before and "whole=True" not in before
    shown = "".join("".join(o.get("text", "") or "".join(o.get("data", {}).get("text/plain", ""))
                            for o in c.get("outputs", [])) for c in cs[:ex])
    assert "(t / STAGES - 1) & 1" not in shown and "(t / STAGES) & 1" not in shown


def test_the_appendix_shows_the_whole_source():
    src = "".join("".join(c["source"]) for c in cells(CHAPTER) if c["cell_type"] == "code")
    assert 'display.source("wgmma_ws", whole=True)' in src
