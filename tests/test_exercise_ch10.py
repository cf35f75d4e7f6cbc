"""Chapter 10's exercise, the padded transpose: the skeleton compiles and is refused, the
solution passes every step this machine can run, an unpadded tile is refused by the bank
check, wrong transposes are refused on a GPU; the bank check itself on CPU."""
import pytest

from gemm_kernels.exercises.catalog import get
from gemm_kernels.exercises.ch10_checks import padded_tile
from exercise_helpers import (FAIL, PASS, refused_as_wrong, solution, static_verdict)
from gpu import needs_gpu

NAME = "10_padded"
DECL = "__shared__ T tile[H][TILE + PAD];"


@pytest.mark.parametrize("row, ways, wavefronts", [("TILE", 32, 32), ("TILE + 2", 2, 2)])
def test_a_conflicting_tile_is_refused_by_the_bank_check(row, ways, wavefronts):
    src = solution(NAME).replace(DECL, f"__shared__ T tile[H][{row}];")
    v = static_verdict(NAME, src)
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert f"the read down a tile column (tile[x][ty]) costs {wavefronts} wavefronts per " \
           f"warp instead of 1: a {ways}-way bank conflict" in v["static"][1], v


def test_a_transpose_that_skips_the_tile_is_refused_by_the_sass_check():
    src = solution(NAME).replace("= tile[x][ty];", "= in[(size_t)(row0 + x) * cols + col0 + ty];")
    v = static_verdict(NAME, src)
    assert v["static"][0] == FAIL and "no LDS in the SASS" in v["static"][1], v


# Typical wrong answers, refused on a GPU by the element-wise check or the guard.
WRONG = {
    "the tile read along a row (no transpose)": ("= tile[x][ty];", "= tile[ty][x];"),
    "out's row stride cols instead of rows": ("(size_t)(col0 + ty) * rows + row0 + x",
                                             "(size_t)(col0 + ty) * cols + row0 + x"),
}


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    refused_as_wrong(NAME, *WRONG[what])


# ------------------------------------------------------------------ the check on CPU

PARAMS = get(NAME).params


@pytest.mark.parametrize("row", ["TILE + PAD", "TILE + 1", "33", "(TILE + 1) * 1", "TILE | 1"])
def test_the_bank_check_accepts_a_padded_tile(row):
    assert padded_tile(PARAMS)(f"__shared__ T tile[H][{row}];") == []


@pytest.mark.parametrize("row, ways", [("TILE", 32), ("TILE + 2", 2), ("2 * TILE", 32),
                                       ("TILE + 16", 16)])
def test_the_bank_check_refuses_a_conflicting_tile(row, ways):
    problems = padded_tile(PARAMS)(f"__shared__ T tile[H][{row}];")
    assert len(problems) == 1 and f"a {ways}-way bank conflict" in problems[0], problems


def test_the_bank_check_prices_doubles_with_the_64_bit_rules():
    double = {**PARAMS, "T": "double"}
    assert padded_tile(double)("__shared__ T tile[H][TILE + 1];") == []
    problems = padded_tile(double)("__shared__ T tile[H][TILE];")
    assert "costs 32 wavefronts per warp instead of 2: a 16-way" in problems[0], problems


def test_the_bank_check_sees_the_row_store_conflict_of_a_16_wide_tile():
    problems = padded_tile({**PARAMS, "TILE": 16})("__shared__ T tile[H][TILE + 1];")
    assert any("the store of a tile row" in p for p in problems), problems


@pytest.mark.parametrize("src, says", [
    ("// __shared__ T tile[H][TILE + 1];", "no shared tile found"),
    ("__shared__ T tile[H][TILE + W];", "'W' in 'TILE + W'"),
    ("__shared__ T tile[TILE][TILE + 1];", "must hold H = 64 rows"),
    ("__shared__ T tile[H][TILE]; __shared__ T tile[H][TILE + 1];", "2 shared arrays"),
])
def test_the_bank_check_says_what_it_cannot_read(src, says):
    problems = padded_tile(PARAMS)(src)
    assert len(problems) == 1 and says in problems[0], problems

