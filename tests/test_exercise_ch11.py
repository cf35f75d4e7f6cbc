"""Chapter 11's exercise, double tiles without bank conflicts: the skeleton compiles and is
refused, the solution passes every step this machine can run, a transposed B tile is
refused by the 64-bit bank check (and accepted once padded), wrong tiles are refused on a
GPU; the bank check itself on CPU."""
import pytest

from gemm_kernels.exercises.ch11_checks import tiles_64bit
from exercise_helpers import (FAIL, PASS, refused_as_wrong, solution, static_verdict)
from gpu import needs_gpu

NAME = "11_dgemm"
STORE_B = "B_shared[threadIdx.y][threadIdx.x] = (i < K"
READ_B = "B_shared[k][threadIdx.x]"


def transposed_b(src: str, padded: bool = False) -> str:
    """B staged transposed and read accordingly: correct, and a 16-way conflict in both
    accesses (16 doubles 128 bytes apart) unless each row gets one double of padding."""
    assert STORE_B in src and READ_B in src
    out = src.replace(STORE_B, "B_shared[threadIdx.x][threadIdx.y] = (i < K") \
        .replace(READ_B, "B_shared[threadIdx.x][k]")
    if padded:
        out = out.replace("double B_shared[BLOCK][BLOCK];", "double B_shared[BLOCK][BLOCK + 1];")
    return out


def test_a_transposed_b_tile_is_refused_by_the_bank_check():
    v = static_verdict(NAME, transposed_b(solution(NAME)))
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    for access in ("the store to B_shared[threadIdx.x][threadIdx.y]",
                   "the read of B_shared[threadIdx.x][k]"):
        assert f"{access} costs 32 wavefronts per warp instead of 2: a 16-way bank " \
               "conflict" in v["static"][1], v


def test_a_transposed_b_tile_padded_by_one_double_passes_the_static_steps():
    v = static_verdict(NAME, transposed_b(solution(NAME), padded=True))
    assert v["static"][0] == PASS, v


def test_an_index_the_check_cannot_read_is_named():
    src = solution(NAME).replace(READ_B, "B_shared[k][col % BLOCK]")
    v = static_verdict(NAME, src)
    assert v["static"][0] == FAIL and "cannot evaluate the read of B_shared[k][col % BLOCK]" \
        in v["static"][1] and "'col' in 'col % BLOCK'" in v["static"][1], v


# Typical wrong answers, refused on a GPU by the element-wise check.
WRONG = {
    "A tile read down a column": ("A_shared[threadIdx.y][k]", "A_shared[k][threadIdx.y]"),
    "no zeros outside the matrices": ("(row < M && j < K) ? A[row * K + j] : 0.0",
                                      "A[row * K + j]"),
}


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    refused_as_wrong(NAME, *WRONG[what])


# ------------------------------------------------------------------ the check on CPU

def _kernel(store_a, store_b, read, pitch_b="BLOCK"):
    return (f"__shared__ double A_shared[BLOCK][BLOCK];\n"
            f"__shared__ double B_shared[BLOCK][{pitch_b}];\n"
            f"{store_a} = 0.0;\n{store_b} = 0.0;\nacc += {read};\n")


GOOD = ("A_shared[threadIdx.y][threadIdx.x]", "B_shared[threadIdx.y][threadIdx.x]",
        "A_shared[threadIdx.y][k] * B_shared[k][threadIdx.x]")


def test_the_bank_check_accepts_the_chapters_tiles():
    assert tiles_64bit(16)(_kernel(*GOOD)) == []


def test_a_merged_broadcast_is_not_a_conflict():
    """A_shared[ty][k]: lanes i and i ^ 1 share a double, the half-warps merge, and the
    two doubles of the merged phase cost 2 wavefronts, as the two phases would."""
    assert tiles_64bit(16)(_kernel(GOOD[0], GOOD[1], "A_shared[threadIdx.y][k]")) == []


@pytest.mark.parametrize("read, ways", [("B_shared[threadIdx.x][k]", 16),
                                        ("B_shared[k][2 * threadIdx.x]", 2),
                                        ("B_shared[threadIdx.x % 4][k]", 4)])
def test_the_bank_check_refuses_a_conflicting_read(read, ways):
    problems = tiles_64bit(16)(_kernel(GOOD[0], GOOD[1], read, pitch_b="2 * BLOCK"))
    assert len(problems) == 1 and f"a {ways}-way bank conflict" in problems[0], problems


def test_one_double_of_padding_removes_the_column_conflict():
    src = _kernel(GOOD[0], "B_shared[threadIdx.x][threadIdx.y]", "B_shared[threadIdx.x][k]")
    assert len(tiles_64bit(16)(src)) == 2
    assert tiles_64bit(16)(src.replace("B_shared[BLOCK][BLOCK]",
                                       "B_shared[BLOCK][BLOCK + 1]")) == []


def test_comments_are_not_read_as_code():
    src = _kernel(*GOOD) + "// B_shared[threadIdx.x][k] would conflict\n"
    assert tiles_64bit(16)(src) == []


def test_a_missing_tile_access_is_named():
    src = "__shared__ double A_shared[BLOCK][BLOCK];\n__shared__ double B_shared[BLOCK][BLOCK];\n" \
          "acc += A_shared[threadIdx.y][k];\n"
    problems = tiles_64bit(16)(src)
    assert problems == ["no access to B_shared found: stage the tile and read it in the inner "
                        "loop"], problems
