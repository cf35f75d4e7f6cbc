"""Chapter 02's exercise: the skeleton compiles and is refused, the solution passes every
step this machine can run, typical mistakes are refused with the right message."""
import pytest

from exercise_helpers import assert_right_and_timed, grade, solution, refused_as_wrong
from gpu import needs_gpu

NAME = "02_coalesced"
ROW = "row = tile_row * BLOCK + threadIdx.x / BLOCK;"
COL = "col = tile_col * BLOCK + threadIdx.x % BLOCK;"


@needs_gpu
def test_the_uncoalesced_mapping_is_right_and_only_its_speed_tells():
    """Lanes running down a column: every element right; only the speed step can tell it
    apart (its verdict, a timing, is printed, not asserted)."""
    src = solution(NAME)
    assert ROW in src and COL in src
    wrong = src.replace(ROW, ROW.replace("/", "%")).replace(COL, COL.replace("%", "/"))
    assert_right_and_timed(grade(NAME, wrong, gpu=True))


# Typical wrong answers, refused on a GPU by the element-wise check or the guard.
WRONG = {
    "the tile's offset forgotten": (ROW, "row = threadIdx.x / BLOCK;"),
    "row and column both from the modulo": (ROW, ROW.replace("/", "%")),
    "one element too far along the row": (COL, COL.replace(";", " + 1;")),
}


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    refused_as_wrong(NAME, *WRONG[what])


