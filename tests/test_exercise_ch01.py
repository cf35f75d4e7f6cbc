"""Chapter 01's exercise: typical mistakes in the index and the dot product are refused
with the right message (the checks every exercise shares are in tests/test_exercises.py)."""
import pytest

from exercise_helpers import refused_as_wrong
from gpu import needs_gpu

NAME = "01_index"


# Typical wrong answers, refused on a GPU by the element-wise check or the guard.
WRONG = {
    "row stride M (the notes' A[i*M+k])": ("A[row * K + k]", "A[row * M + k]"),
    "row and column swapped": ("row = X_TO_COL ? y : x;\n    col = X_TO_COL ? x : y;",
                               "row = X_TO_COL ? x : y;\n    col = X_TO_COL ? y : x;"),
    "no edge test": ("if (row < M && col < N) {", "{"),
}


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    refused_as_wrong(NAME, *WRONG[what])


