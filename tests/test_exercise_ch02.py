"""Chapter 02's exercise: the skeleton compiles and is refused, the solution passes every
step this machine can run, typical mistakes are refused with the right message: the
uncoalesced mapping and the mappings that miss elements of C without a GPU."""
import pytest

from exercise_helpers import FAIL, PASS, refused_as_wrong, solution, static_verdict
from gpu import needs_gpu

NAME = "02_coalesced"
ROW = "row = tile_row * BLOCK + threadIdx.x / BLOCK;"
COL = "col = tile_col * BLOCK + threadIdx.x % BLOCK;"


def swapped(src: str) -> str:
    return src.replace(ROW, ROW.replace("/", "%")).replace(COL, COL.replace("%", "/"))


def test_the_uncoalesced_mapping_is_refused_for_its_lines():
    """Lanes running down a column: every element right, but 33 lines per warp and step
    instead of 2; the static step says so without a GPU."""
    src = solution(NAME)
    assert ROW in src and COL in src
    v = static_verdict(NAME, swapped(src))
    assert v["static"][0] == FAIL, v
    detail = " ".join(v["static"][1].split())
    assert "33 sectors in 33 lines" in detail and "5 sectors in 2 lines" in detail, detail


TWO_ROWS = """if (BLOCK == 32) {
        const int w = threadIdx.x / 32, l = threadIdx.x % 32;
        row = tile_row * BLOCK + (l % 2) * 16 + w % 16;
        col = tile_col * BLOCK + (w / 16) * 16 + l / 2;
    } else {
        row = tile_row * BLOCK + threadIdx.x / BLOCK;
        col = tile_col * BLOCK + threadIdx.x % BLOCK;
    }"""


def test_fewer_sectors_in_more_lines_is_refused_saying_why():
    """A warp on rows 0 and 16, columns 0 to 15 (lanes alternate between the rows) touches
    4 sectors, fewer than the chapter's 5, but 3 lines instead of 2: the task asks for the
    fewest lines, and the message names the two rows apart and says why lines count."""
    src = solution(NAME)
    two_rows = src.replace(ROW + "\n    " + COL, TWO_ROWS)
    assert TWO_ROWS in two_rows
    v = static_verdict(NAME, two_rows)
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    detail = " ".join(v["static"][1].split())
    assert "rows 0 and 16, columns 0 to 15" in detail and "rows 0 to 16" not in detail, detail
    assert "4 sectors in 3 lines" in detail and "fewer sectors" in detail, detail
    assert "one cycle on every 128-byte line" in detail, detail
    assert "must run along a row" not in detail, detail


def test_the_task_asks_for_the_fewest_lines():
    """The exercise's TODO asks what the static step grades: lines, not sectors."""
    words = " ".join(solution(NAME).replace("//", " ").split())
    assert "touch as few 128-byte lines as possible" in words, words


# Typical wrong answers, refused without a GPU (step "static"), with a word of the message.
STATIC = {
    "the tile's offset forgotten": (ROW, "row = threadIdx.x / BLOCK;", "both compute"),
    "row and column both from the modulo": (ROW, ROW.replace("/", "%"), "both compute"),
    "one element too far along the row": (COL, COL.replace(";", " + 1;"), "by no thread"),
    "blockDim.x for BLOCK": (COL, COL.replace("% BLOCK", "% blockDim.x"), "by no thread"),
}


@pytest.mark.parametrize("what", STATIC)
def test_wrong_answers_are_refused_without_a_gpu(what):
    old, new, words = STATIC[what]
    src = solution(NAME)
    v = static_verdict(NAME, src.replace(old, new))
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert words in v["static"][1], v["static"][1]


def test_the_tile_from_blockidx_is_refused_naming_the_block_order():
    """blockIdx.y / blockIdx.x in place of tile_row / tile_col covers C with one GRID
    only; the message names the order that fails and the one that works."""
    src = solution(NAME)
    src = src.replace(ROW, ROW.replace("tile_row", "blockIdx.y")).replace(
        COL, COL.replace("tile_col", "blockIdx.x"))
    v = static_verdict(NAME, src)
    assert v["static"][0] == FAIL, v
    detail = " ".join(v["static"][1].split())
    assert "by no thread" in detail and "GRID = 1 numbers the blocks" in detail, detail
    assert "not from blockIdx" in detail, detail


def test_a_missing_tile_offset_is_named_when_two_blocks_collide():
    """row and col inside the tile only: threads of different blocks compute the same
    element, and the message points at the tile's offset, not at the in-tile mapping."""
    src = solution(NAME).replace(ROW, "row = threadIdx.x / BLOCK;").replace(
        COL, "col = threadIdx.x % BLOCK;")
    v = static_verdict(NAME, src)
    assert v["static"][0] == FAIL, v
    detail = " ".join(v["static"][1].split())
    assert "two blocks compute the same element" in detail, detail
    assert "tile_row * BLOCK" in detail and "own element of the" not in detail, detail
    # two threads of one block on one element keep the in-tile message
    v = static_verdict(NAME, solution(NAME).replace(ROW, ROW.replace("/", "%")))
    assert "own element of the" in v["static"][1], v["static"][1]


@needs_gpu
def test_a_mapping_the_static_check_cannot_read_is_still_judged_by_its_numbers():
    refused_as_wrong(NAME, ROW, "row = tile_row * BLOCK + min(threadIdx.x, 0u);")


def test_a_fixed_32_is_named_in_the_message():
    """Dividing by 32 where BLOCK belongs is right at BLOCK = 32 only; the message asks
    about it, and a wrong mapping without the number 32 does not get the question."""
    src = solution(NAME)
    v = static_verdict(NAME, src.replace(ROW, ROW.replace("/ BLOCK", "/ 32")).replace(
        COL, COL.replace("% BLOCK", "% 32")))
    assert v["static"][0] == FAIL, v
    assert "a fixed 32?" in v["static"][1], v["static"][1]
    v = static_verdict(NAME, src.replace(ROW, "row = threadIdx.x / BLOCK;"))
    assert v["static"][0] == FAIL and "a fixed 32" not in v["static"][1], v
