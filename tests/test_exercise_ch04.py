"""Chapter 04's exercise: the skeleton compiles and is refused, the solution passes every
step this machine can run, the bank check refuses conflicting layouts here (no GPU
needed), and its evaluator and model are tested on their own, conflicting expressions
as the negative control."""
import pytest

from gemm_kernels.exercises import ch04_checks
from gemm_kernels.exercises.ch04_checks import (bank_problems, layout_problems, read_width,
                                                sass_widths, step_cost, tile_layout_check,
                                                word_expression, word_table)
from gemm_kernels.exercises.stubs import skeleton
from exercise_helpers import (FAIL, PASS, assert_right_and_timed, grade, skeleton_cell,
                              solution, static_verdict)
from gpu import needs_gpu

NAME = "04_tile_layout"
A_LINE = "word = k * (BLOCK + 1) + m;"
B_LINE = "word = k * (BLOCK + 1) + n;"


def with_layout(a=A_LINE, b=B_LINE):
    src = solution(NAME)
    assert src.count(A_LINE) == 1 and src.count(B_LINE) == 1
    return src.replace(A_LINE, a).replace(B_LINE, b)


def test_skeleton_compiles_and_is_refused_only_for_the_lines_to_write():
    v = static_verdict(NAME, skeleton_cell(NAME))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "YOUR CODE HERE" in v["static"][1], v
    assert "bank" not in v["static"][1] and "word" not in v["static"][1], v


def test_the_chapters_conflicting_layout_is_refused_by_the_bank_check():
    """sB[n][k], rows of BLOCK words: the store of b and every read of B hit one bank."""
    v = static_verdict(NAME, with_layout(a="word = m * BLOCK + k;", b="word = n * BLOCK + k;"))
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert "the read of B" in v["static"][1] and "32 wavefronts where 1 would do" in \
        v["static"][1], v
    assert "the store of b" in v["static"][1] and "the read of A" not in v["static"][1], v


def test_transposed_without_padding_is_refused_for_its_store():
    v = static_verdict(NAME, with_layout(a="word = k * BLOCK + m;", b="word = k * BLOCK + n;"))
    assert v["static"][0] == FAIL and "the store of a" in v["static"][1], v
    assert "the read of" not in v["static"][1] and "the store of b" not in v["static"][1], v


def test_an_even_padding_passes_within_the_budget():
    """Rows of BLOCK + 2 words: the store of a is 2-way conflicted, 1 wavefront more in
    a step of 66, within the budget; the chapter's fastest layout (`conflict`, PAD = 2,
    its reads merged into LDS.64) passes too, and its unmerged twin would not."""
    v = static_verdict(NAME, with_layout(a="word = k * (BLOCK + 2) + m;"))
    assert v["static"][0] == PASS, v
    fastest = with_layout(a="word = m * (BLOCK + 2) + k;", b="word = n * (BLOCK + 2) + k;")
    assert static_verdict(NAME, fastest)["static"][0] == PASS
    a = word_table("m * (BLOCK + 2) + k", ("m", "k"), 32)
    b = word_table("n * (BLOCK + 2) + k", ("k", "n"), 32)
    assert step_cost(a, b, 2, 2)[0][0] == (51, 50)
    unmerged = bank_problems(a, b)
    assert unmerged and "the read of B, b_word(0, tx) (32-bit)" in " ".join(unmerged), unmerged


def test_the_read_widths_follow_the_layout_and_the_sass():
    a = word_table("m * (BLOCK + 4) + k", ("m", "k"), 32)
    assert read_width(a, along_rows=False) == 4
    assert read_width(word_table("k * (BLOCK + 1) + n", ("k", "n"), 32), along_rows=True) == 1
    assert read_width(word_table("n * (BLOCK + 2) + k", ("k", "n"), 32), along_rows=True) == 2
    sass = ("        /*0100*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;\n"
            "        /*0110*/                   LDS.64 R4, [R2] ;\n"
            "        /*0120*/                   LDS R6, [R3] ;\n"
            "        /*0130*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;\n")
    assert sass_widths(sass) == {1, 2}


def test_two_elements_in_one_word_are_refused():
    v = static_verdict(NAME, with_layout(a="word = m + k;"))
    assert v["static"][0] == FAIL and "every element needs a word of its own" in v["static"][1], v


def test_a_layout_outside_the_tiles_room_is_refused():
    v = static_verdict(NAME, with_layout(b="word = k * (BLOCK + 5) + n;"))
    assert v["static"][0] == FAIL and "outside the tile's 1152 words" in v["static"][1], v


@pytest.mark.parametrize("a, b", [("m * BLOCK + (k ^ m)", "k * BLOCK + (n ^ k)"),
                                  ("m * (BLOCK + 1) + k", "n * (BLOCK + 3) + k"),
                                  ("m * BLOCK + k", "k * BLOCK + n")])
def test_other_conflict_free_layouts_pass(a, b):
    v = static_verdict(NAME, with_layout(a=f"word = {a};", b=f"word = {b};"))
    assert v["static"][0] == PASS, v


def test_a_layout_the_check_cannot_read_is_a_clear_problem():
    v = static_verdict(NAME, with_layout(a="word = m > k ? m : k;"))
    assert v["static"][0] == FAIL and "a_word: cannot read" in v["static"][1], v
    v = static_verdict(NAME, with_layout(a="word = k * 33 + m;\n    word += 1;"))
    assert v["static"][0] == FAIL and "a_word changes word after its line" in v["static"][1], v
    v = static_verdict(NAME, with_layout(a="word = k * 33 + m;\n    word = word;"))
    assert v["static"][0] == FAIL and "assigns word 2 times" in v["static"][1], v


# ------------------------------------------------------------------ the check's parts

def test_the_bank_model_on_a_padded_and_a_conflicting_table():
    padded = word_table("k * (BLOCK + 1) + m", ("m", "k"), 32)
    assert layout_problems(padded, "A({}, {})", 32 * 36) == []
    assert bank_problems(padded, padded) == []
    conflicting = word_table("n * BLOCK + k", ("k", "n"), 32)   # table[k][n]
    problems = bank_problems(padded, conflicting)
    assert len(problems) == 3 and "costs warp 0 1089 wavefronts where its instructions need 66" \
        in problems[0] and all("32 wavefronts" in p for p in problems[1:]), problems


def test_the_bank_model_with_two_rows_of_threads_per_warp():
    """BLOCK = 16: a warp holds two rows (ty, ty + 1); rows 17 words apart wrap into
    one another's banks, rows 16 apart do not when read along n."""
    good = word_table("k * BLOCK + n", ("k", "n"), 16)
    a = word_table("m * BLOCK + k", ("m", "k"), 16)
    assert bank_problems(a, good) == []
    padded = word_table("k * (BLOCK + 1) + n", ("k", "n"), 16)
    cost, worst = step_cost(a, padded)
    assert cost[0] == (35, 34) and any("the store of b" in w for w in worst), (cost, worst)
    assert bank_problems(a, padded) == []   # one wavefront in 35: within the budget


def test_the_expression_is_read_from_its_function():
    src = solution(NAME)
    assert word_expression(src, "a_word") == ("k * (BLOCK + 1) + m", None)
    assert word_expression(src, "b_word") == ("k * (BLOCK + 1) + n", None)
    assert word_expression(skeleton(src), "a_word") == (None, None)
    expr, problem = word_expression(src.replace("a_word(int m", "aword(int m"), "a_word")
    assert expr is None and "cannot find the function a_word" in problem


def test_the_check_is_the_exercises():
    from gemm_kernels.exercises.catalog import get
    (check,) = get(NAME).static_checks
    assert check.__name__ == tile_layout_check(32).__name__
    assert ch04_checks.BUDGET == 1.10
    assert ch04_checks.ROOM_PAD == 4 and "BLOCK * (BLOCK + 4)" in solution(NAME)


@needs_gpu
def test_an_unpadded_swizzle_passes_on_a_gpu():
    """The bank model's other answer: an XOR instead of padding, correct and fast."""
    r = grade(NAME, with_layout(a="word = m * BLOCK + (k ^ m);", b="word = k * BLOCK + (n ^ k);"),
              gpu=True)
    assert_right_and_timed(r)
