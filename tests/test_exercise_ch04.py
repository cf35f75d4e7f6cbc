"""Chapter 04's exercise: the skeleton compiles and is refused, the solution (the chapter's
fastest layout) passes every step this machine can run, and the bank check refuses here
(no GPU needed) what the chapter shows to be slower: the conflicted layouts, the
conflict-free padding whose reads cannot merge, XOR swizzles that the compiler reads with
scalar loads (each load is priced at the width the SASS gives it), and layouts outside
the exercise's rule (chapter 03's among them). The same swizzle read with explicit float4
loads passes. Its evaluator and model are tested on their own, conflicting expressions
as the negative control."""
import pytest

from gemm_kernels.exercises import ch04_checks
from gemm_kernels.exercises.ch04_checks import (bank_problems, compiled_reads, describe,
                                                k_across_rows, layout_problems, read_width,
                                                sass_loads, step_budget, step_cost,
                                                tile_layout_check, with_prediction,
                                                with_word,
                                                word_expression, word_table)
from gemm_kernels.notebook.ch04_banks import SWIZZLE, with_layout as layout_in
from gemm_kernels.exercises.stubs import skeleton
from exercise_helpers import (FAIL, PASS, assert_right_and_timed, grade, skeleton_cell,
                              solution, static_verdict)
from gpu import needs_gpu

NAME = "04_tile_layout"
A_LINE = "word = m * (BLOCK + 2) + k;"
B_LINE = "word = n * (BLOCK + 2) + k;"


def with_layout(a=A_LINE, b=B_LINE, predicted=51):
    src = solution(NAME)
    assert src.count(A_LINE) == 1 and src.count(B_LINE) == 1
    return with_prediction(src.replace(A_LINE, a).replace(B_LINE, b), predicted)


def verdict_of(a, b, predicted=51):
    return static_verdict(NAME, with_layout(a=f"word = {a};", b=f"word = {b};",
                                            predicted=predicted))


def test_skeleton_compiles_and_is_refused_only_for_the_lines_to_write():
    v = static_verdict(NAME, skeleton_cell(NAME))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "YOUR CODE HERE" in v["static"][1], v
    assert "bank" not in v["static"][1] and "word" not in v["static"][1], v


def test_the_solution_is_the_chapters_fastest_layout():
    """`conflict`, PAD = 2: reads merged into LDS.64, 51 wavefronts per step (Nsight
    Compute counts 51.4 in the chapter); the exercise is timed against that kernel."""
    from gemm_kernels.exercises.catalog import get
    assert get(NAME).params == {"BLOCK": 32, "LAYOUT": "conflict", "PAD": 2}
    v = static_verdict(NAME, solution(NAME))
    assert v["compile"][0] == PASS and v["static"][0] == PASS, v
    a = word_table("m * (BLOCK + 2) + k", ("m", "k"), 32)
    b = word_table("n * (BLOCK + 2) + k", ("k", "n"), 32)
    assert step_cost(a, b, 2, 2)[0][0] == (51, 50)


def test_the_chapters_conflicting_layout_is_refused_by_the_bank_check():
    """sB[n][k], rows of BLOCK words: the store of b and every read of B hit one bank."""
    v = verdict_of("m * BLOCK + k", "n * BLOCK + k")
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert "costs warp 0 305 wavefronts, more than the 53" in v["static"][1], v
    assert "the read of B, b_word(0, tx) (128-bit)" in v["static"][1] and \
        "32 wavefronts where 4 would do" in v["static"][1], v
    assert "the store of b" in v["static"][1] and "the read of A" not in v["static"][1], v


def test_the_conflict_free_padding_is_refused_for_its_unmerged_reads():
    """Rows of BLOCK + 1 (or + 3) words: no conflict anywhere, but 64 plain LDS, 66
    wavefronts per step; the chapter measures both slower than PAD = 2. Conflict-free is
    not enough."""
    for pad in (1, 3):
        v = verdict_of(f"m * (BLOCK + {pad}) + k", f"n * (BLOCK + {pad}) + k")
        assert v["static"][0] == FAIL, v
        assert "costs warp 0 66 wavefronts, more than the 53" in v["static"][1], v
        assert "even without a conflict its instructions need 66" in v["static"][1], v
        assert "would do" not in v["static"][1], v


@pytest.mark.parametrize("a, b, rule", [
    ("m * BLOCK + k", "k * BLOCK + n",
     "b_word: this exercise keeps k along the rows of both tiles"),
    ("k * (BLOCK + 1) + m", "k * (BLOCK + 1) + n",
     "a_word: this exercise keeps k along the rows of both tiles"),
    ("m * BLOCK + (k ^ m)", "n * (BLOCK + 2) + k",
     "but A(1, 0) is word 33 and A(1, 1) word 32")])
def test_a_layout_without_k_along_its_rows_is_refused(a, b, rule):
    """Chapter 03's layout (B stored as sB[k][n]: 50 wavefronts without any padding), the
    chapter's `transposed` layout, and an XOR that splits the pairs of k are outside the
    exercise, which asks for the dot-product layout, the one that needs the chapter."""
    v = verdict_of(a, b)
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert rule in v["static"][1], v
    assert "wavefronts" not in v["static"][1], v


@pytest.mark.parametrize("a, b", [
    ("m * (BLOCK + 4) + k", "n * (BLOCK + 4) + k"),
    ("m * (BLOCK + 2) + k", "n * (BLOCK + 4) + k")])
def test_other_layouts_within_the_budget_pass(a, b):
    """Rows of BLOCK + 4 words: the reads merge into LDS.128 and the store of b costs 4
    wavefronts, 53 per step; A at BLOCK + 2 and B at BLOCK + 4 too."""
    v = verdict_of(a, b, predicted=53)
    assert v["static"][0] == PASS, v


def test_a_pass_reports_its_cost_next_to_the_budget_and_chapter_03():
    v = static_verdict(NAME, solution(NAME))
    assert "51 wavefronts per warp and step (the budget: 53; the least any layout can " \
        "cost, under this rule as in chapter 03: 50)" in v["static"][1], v
    assert "outside" not in v["static"][1], v
    v = verdict_of("m * (BLOCK + 4) + k", "n * (BLOCK + 4) + k", predicted=53)
    assert "53 wavefronts per warp and step" in v["static"][1], v


def test_a_pass_above_the_least_asks_for_the_least_without_giving_the_layout():
    """51 passes, and the report turns the pricing into a design question: 50 is
    reachable, which read need not be wide? It names no layout; at 50 it asks nothing."""
    detail = static_verdict(NAME, solution(NAME))["static"][1]
    assert "bonus question: 50 is reachable under this rule" in detail, detail
    assert "gains nothing from being wide" in detail, detail
    assert "BLOCK + 1" not in detail and "m * BLOCK" not in detail, detail
    v = verdict_of("m * BLOCK + k", "n * (BLOCK + 1) + k", predicted=50)
    assert v["static"][0] == PASS and "bonus" not in v["static"][1], v


@pytest.mark.parametrize("a, b, loads", [
    ("m * BLOCK + k", "n * (BLOCK + 1) + k", {1: 32, 2: 0, 4: 8}),
    ("m * (BLOCK + 2) + k", "n * (BLOCK + 1) + k", {1: 32, 2: 16, 4: 0})])
def test_a_wide_a_and_a_narrow_b_tie_chapter_03_under_the_rule(a, b, loads):
    """50, chapter 03's cost, is reachable under the rule: A read wide (a broadcast, 16
    wavefronts), B read 32 bits at a time from rows of BLOCK + 1 words (32, no conflict),
    and both stores free. The grader passes it at 50 and refuses 51 for it."""
    v = verdict_of(a, b, predicted=50)
    assert v["static"][0] == PASS, v
    assert "50 wavefronts per warp and step" in v["static"][1], v
    src = with_prediction(with_word(with_word(solution(NAME), "a_word", a), "b_word", b), 50)
    r = ch04_checks.assess(src, 32, NAME, "bank_layout",
                           (("BLOCK", 32), ("LAYOUT", "conflict"), ("PAD", 2)))
    assert r["wavefronts"] == 50 and r["loads"] == loads, r
    assert verdict_of(a, b, predicted=51)["static"][0] == FAIL


@pytest.mark.parametrize("a, b, cost, tiles, load", [
    # the worked solution's old swizzle: ptxas merges one group of four k per tile
    ("m * BLOCK + (k ^ ((m & 7) << 2))", "n * BLOCK + (k ^ ((n & 7) << 2))", 151,
     "A and B", "LDS.128"),
    # an XOR that keeps the pairs of k: A at BLOCK + 2 is merged, B is not
    ("m * (BLOCK + 2) + k", "n * BLOCK + (k ^ ((2 * n) & (BLOCK - 1)))", 81, "B", "LDS.64")])
def test_an_xor_swizzle_read_one_float_per_k_is_refused_as_compiled(a, b, cost, tiles, load):
    """The layout would allow wide reads, but ptxas cannot prove the XOR-ed addresses
    adjacent and emits mostly 32-bit LDS: priced as compiled, the step costs far more
    than the budget, and the message says why and what would merge them."""
    v = verdict_of(a, b)
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    msg = v["static"][1]
    assert f"costs warp 0 {cost} wavefronts, more than the 53" in msg, v
    assert f"each {4 if load == 'LDS.128' else 2} values of k of {tiles} be one {load}" \
        in msg, v
    assert "through an XOR" in msg and "pad the rows instead" in msg, v
    # the vector loads this exercise does not allow are the hint's, not the message's
    assert "reinterpret_cast" not in msg, v
    hint = _static_hint(with_layout(a=f"word = {a};", b=f"word = {b};"))
    assert "reinterpret_cast<const float4*>" in hint and "__align__(16)" in hint, hint


def test_an_odd_row_start_of_one_tile_is_named_in_one_sentence():
    """B's rows start at odd words (n * (BLOCK + 2) + k + 1): ptxas then reads A with 32
    LDS too. The message names the cause in one line, without the aside on swizzles."""
    v = verdict_of("m * (BLOCK + 2) + k", "n * (BLOCK + 2) + k + 1", predicted=99)
    msg = v["static"][1]
    assert v["static"][0] == FAIL and "99 wavefronts" in msg, v
    assert ("your B rows start at odd words; ptxas then reads A narrow too (A with 32 LDS)"
            in msg), msg
    assert "reinterpret_cast" not in msg and "__align__" not in msg, msg


def test_the_swizzle_with_explicit_float4_loads_passes_at_the_cost_of_pad_4():
    """The positive control: the same XOR swizzle, read four k at a time with explicit
    float4 loads (16 LDS.128 in the SASS), costs 53 wavefronts and passes."""
    src = with_prediction(layout_in(solution(NAME), SWIZZLE, float4=True), 53)
    v = static_verdict(NAME, src)
    assert v["static"][0] == PASS and "53 wavefronts per warp and step" in v["static"][1], v


def test_the_budget_is_the_chapters_pad_4_layout():
    assert step_budget(32) == 53 and step_budget(16) == 28
    a = word_table("m * (BLOCK + 4) + k", ("m", "k"), 32)
    b = word_table("n * (BLOCK + 4) + k", ("k", "n"), 32)
    assert bank_problems(a, b, 4, 4, 53) == []
    assert bank_problems(a, b, 4, 4, 52)[0].startswith("one step along K costs warp 0 53")


def test_the_merge_decides_the_price():
    """PAD = 2 priced with the reads it gets in SASS (LDS.64) passes; priced as 32-bit
    reads it would cost 99: 66 for the instructions, and its B reads, 34 words apart, are
    2-way conflicted."""
    a = word_table("m * (BLOCK + 2) + k", ("m", "k"), 32)
    b = word_table("n * (BLOCK + 2) + k", ("k", "n"), 32)
    assert bank_problems(a, b, 2, 2, 53) == []
    unmerged = bank_problems(a, b, 1, 1, 53)
    assert "99 wavefronts" in unmerged[0] and "its instructions need 66" in unmerged[0], unmerged
    assert "the read of B, b_word(0, tx) (32-bit)" in " ".join(unmerged), unmerged


def test_k_across_rows_finds_the_first_split_pair():
    assert k_across_rows(word_table("m * (BLOCK + 1) + k", ("m", "k"), 32), False) is None
    assert k_across_rows(word_table("n * 36 + (k ^ 4)", ("k", "n"), 32), True) is None
    assert k_across_rows(word_table("k * BLOCK + n", ("k", "n"), 32), True) == (0, 0)
    assert k_across_rows(word_table("m * BLOCK + (k ^ (m & 1))", ("m", "k"), 32), False) == (1, 0)


def test_the_read_widths_follow_the_layout_and_the_sass():
    a = word_table("m * (BLOCK + 4) + k", ("m", "k"), 32)
    assert read_width(a, along_rows=False) == 4
    assert read_width(word_table("k * (BLOCK + 1) + n", ("k", "n"), 32), along_rows=True) == 1
    assert read_width(word_table("n * (BLOCK + 2) + k", ("k", "n"), 32), along_rows=True) == 2
    sass = ("        /*0100*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;\n"
            "        /*0110*/                   LDS.64 R4, [R2] ;\n"
            "        /*0120*/                   LDS R6, [R3] ;\n"
            "        /*0125*/                   LDS.U.128 R8, [R3+0x10] ;\n"
            "        /*0130*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;\n"
            "        /*0140*/                   LDS R7, [R3] ;\n")
    assert sass_loads(sass) == {1: 1, 2: 1, 4: 1}


def test_each_load_is_priced_at_its_own_width():
    """compiled_reads shares the SASS's loads out between the tiles; each covers an
    aligned group of k the layout keeps together. Two LDS.128 among 56 LDS do not make
    the reads 128-bit (the old check priced every read at the widest width found)."""
    a = word_table("m * BLOCK + (k ^ ((m & 7) << 2))", ("m", "k"), 32)
    b = word_table("n * BLOCK + (k ^ ((n & 7) << 2))", ("k", "n"), 32)
    pa, pb = compiled_reads(a, b, {1: 56, 2: 0, 4: 2}, {1: 28, 2: 0, 4: 1})
    assert describe(pa) == describe(pb) == "28 LDS and 1 LDS.128"
    assert sum(w for _, w in pa) == sum(w for _, w in pb) == 32
    assert max(step_cost(a, b, pa, pb)[0])[0] > 140
    assert max(step_cost(a, b, 4, 4)[0])[0] == 53          # what the old check priced
    # without knowing which tile a load reads, the cheapest sharing: still far over
    pa, pb = compiled_reads(a, b, {1: 56, 2: 0, 4: 2})
    assert max(step_cost(a, b, pa, pb)[0])[0] > 53
    # loads that are not one word per k (a loop left rolled): cannot be shared out
    assert compiled_reads(a, b, {1: 2, 2: 0, 4: 0}) is None
    # a layout that forbids wide reads cannot take them
    odd = word_table("m * (BLOCK + 1) + k", ("m", "k"), 32)
    assert compiled_reads(odd, odd, {1: 0, 2: 0, 4: 16}) is None


def test_with_word_rewrites_one_function_as_the_check_reads_it():
    src = with_word(solution(NAME), "b_word", "n * BLOCK + k")
    assert word_expression(src, "b_word") == ("n * BLOCK + k", None)
    assert word_expression(src, "a_word") == ("m * (BLOCK + 2) + k", None)
    assert with_word("int f() { return 0; }", "b_word", "k") is None


def test_two_elements_in_one_word_are_refused():
    v = static_verdict(NAME, with_layout(a="word = m + k;"))
    assert v["static"][0] == FAIL and "every element needs a word of its own" in v["static"][1], v


def test_a_layout_outside_the_tiles_room_is_refused():
    v = static_verdict(NAME, with_layout(b="word = n * (BLOCK + 5) + k;"))
    assert v["static"][0] == FAIL and "outside the tile's 1152 words" in v["static"][1], v


def test_a_layout_the_check_cannot_read_is_a_clear_problem():
    v = static_verdict(NAME, with_layout(a="word = m > k ? m : k;"))
    assert v["static"][0] == FAIL and "a_word: cannot read" in v["static"][1], v
    v = static_verdict(NAME, with_layout(a="word = m * 34 + k;\n    word += 1;"))
    assert v["static"][0] == FAIL and "a_word changes word after its line" in v["static"][1], v
    v = static_verdict(NAME, with_layout(a="word = m * 34 + k;\n    word = word;"))
    assert v["static"][0] == FAIL and "assigns word 2 times" in v["static"][1], v


# ------------------------------------------------------------------ the check's parts

def test_the_bank_model_on_a_padded_and_a_conflicting_table():
    padded = word_table("k * (BLOCK + 1) + m", ("m", "k"), 32)
    assert layout_problems(padded, "A({}, {})", 32 * 36) == []
    assert bank_problems(padded, padded, 1, 1, 66) == []
    conflicting = word_table("n * BLOCK + k", ("k", "n"), 32)   # table[k][n]
    problems = bank_problems(padded, conflicting, 1, 1, 66)
    assert len(problems) == 3 and "costs warp 0 1089 wavefronts, more than the 66" \
        in problems[0] and all("32 wavefronts" in p for p in problems[1:]), problems


def test_the_bank_model_with_two_rows_of_threads_per_warp():
    """BLOCK = 16: a warp holds two rows (ty, ty + 1); rows 17 words apart wrap into
    one another's banks, rows 16 apart do not when read along n."""
    good = word_table("k * BLOCK + n", ("k", "n"), 16)
    a = word_table("m * BLOCK + k", ("m", "k"), 16)
    assert step_cost(a, good)[0][0] == (34, 34)
    padded = word_table("k * (BLOCK + 1) + n", ("k", "n"), 16)
    cost, worst = step_cost(a, padded)
    assert cost[0] == (35, 34) and any("the store of b" in w for w in worst), (cost, worst)


def test_the_expression_is_read_from_its_function():
    src = solution(NAME)
    assert word_expression(src, "a_word") == ("m * (BLOCK + 2) + k", None)
    assert word_expression(src, "b_word") == ("n * (BLOCK + 2) + k", None)
    assert word_expression(skeleton(src), "a_word") == (None, None)
    expr, problem = word_expression(src.replace("a_word(int m", "aword(int m"), "a_word")
    assert expr is None and "cannot find the function a_word" in problem


def test_the_check_is_the_exercises():
    from gemm_kernels.exercises.catalog import get
    (check,) = get(NAME).static_checks
    assert check.__name__ == tile_layout_check(32).__name__
    assert ch04_checks.ROOM_PAD == 4 and "BLOCK * (BLOCK + 4)" in solution(NAME)


@needs_gpu
def test_an_unpadded_swizzle_with_float4_loads_passes_on_a_gpu():
    """The bank model's other answer: an XOR of groups of four k instead of padding, read
    with explicit float4 loads: correct and fast."""
    r = grade(NAME, with_prediction(layout_in(solution(NAME), SWIZZLE, float4=True), 53),
              gpu=True)
    assert_right_and_timed(r)


def test_a_layout_within_the_budget_needs_its_price_predicted():
    """The exercise asks for a layout priced by hand: without a prediction, or with a
    wrong one, a layout within the budget is refused; the message says which way and
    roughly how far the prediction is off, never the price itself (else any guess would
    reveal the answer to copy)."""
    v = verdict_of("m * (BLOCK + 2) + k", "n * (BLOCK + 2) + k", predicted=0)
    assert v["static"][0] == FAIL and "set PREDICTED_WAVEFRONTS" in v["static"][1], v
    v = verdict_of("m * (BLOCK + 2) + k", "n * (BLOCK + 2) + k", predicted=48)
    assert v["static"][0] == FAIL, v
    assert "you predicted 48 wavefronts per warp and step: too low by 3 to 16" \
        in v["static"][1], v
    assert "51" not in v["static"][1], v
    v = verdict_of("m * (BLOCK + 2) + k", "n * (BLOCK + 2) + k", predicted=52)
    assert "too high by 1 or 2" in v["static"][1] and "51" not in v["static"][1], v
    v = verdict_of("m * (BLOCK + 2) + k", "n * (BLOCK + 2) + k", predicted=99)
    assert "too high by more than 16" in v["static"][1], v
    # over the budget, the price is the message; the prediction is not asked about
    v = verdict_of("m * (BLOCK + 1) + k", "n * (BLOCK + 1) + k", predicted=0)
    assert "PREDICTED" not in v["static"][1], v


def test_with_prediction_sets_or_adds_the_line():
    assert "PREDICTED_WAVEFRONTS = 53;" in with_prediction(solution(NAME), 53)
    assert "PREDICTED_WAVEFRONTS = 51;" not in with_prediction(solution(NAME), 53)
    assert with_prediction("int x;", 7).startswith("constexpr int PREDICTED_WAVEFRONTS = 7;")


def _static_hint(source):
    report = grade(NAME, source, gpu=False, emulate=False)
    step = next(s for s in report.steps if s.name == "static")
    assert step.status == FAIL, step
    return step.hint


def test_the_step_2_hint_answers_the_failure_not_every_failure():
    """The hint depends on the message: a mispriced layout is told how to price, a
    layout over the budget where to look, k down the rows the shape of the rule, and an
    unwritten skeleton nothing beyond the message."""
    mispriced = _static_hint(with_layout(predicted=50))
    assert "price the four accesses" in mispriced and "column of a tile" not in mispriced
    over = _static_hint(with_layout(a="word = m * BLOCK + k;", b="word = n * BLOCK + k;",
                                    predicted=305))
    assert "down a column" in over and "price the four" not in over
    across = _static_hint(with_layout(b="word = k * (BLOCK + 2) + n;"))
    assert "row_start" in across
    narrow = _static_hint(with_layout(a="word = m * (BLOCK + 1) + k;",
                                      b="word = n * (BLOCK + 1) + k;", predicted=66))
    assert "LDS.64" in narrow and "down a column" not in narrow
    assert _static_hint(skeleton_cell(NAME)) == ""
    for hint in (mispriced, over, across, narrow):
        assert "51" not in hint and "BLOCK + 2" not in hint     # never the answer
