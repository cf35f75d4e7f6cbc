"""Chapter 06's exercise: the skeleton compiles and is refused, the solution passes every
step this machine can run and its SASS shows the fragments loaded once per k, typical
mistakes are refused with the right message."""
import pytest

from gemm_kernels.exercises.catalog import get
from gemm_kernels.exercises.ch05_checks import load_ratio, submission_sass
from exercise_helpers import FAIL, first_failure, grade, solution, static_verdict
from gpu import needs_gpu

NAME = "06_tile_2d_reg"
LOOP = """#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[tr * TM + i][k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += a[i] * b[j];
        }"""


def _with_loop(loop):
    src = solution(NAME)
    assert LOOP in src
    return src.replace(LOOP, loop)


def test_solutions_sass_loads_the_fragments_once_per_k():
    # 8 x 4 per thread, BK = 16: per k, two LDS.128 of A's column every 4 k (the k loop
    # is unrolled, As[r][k..k+3] merge) and one LDS.128 of B's row: 48 loads, 512 FFMA
    ex = get(NAME)
    sass = submission_sass(NAME, ex.kernel, ex.params, solution(NAME))
    assert load_ratio(sass) == (48, 512)


def test_the_inner_product_order_is_refused_by_the_shared_load_count():
    # a dot product per output, k innermost: 2 shared loads per FFMA, not 12 per 32
    v = static_verdict(NAME, _with_loop("""#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) {
#pragma unroll 1
                for (int k = 0; k < BK; ++k)
                    acc[i][j] += As[tr * TM + i][k] * Bs[k][tc * TN + j];
            }"""))
    assert v["static"][0] == FAIL, v
    assert "2.00 per FFMA" in v["static"][1] and "at most 0.38" in v["static"][1], v


def test_a_rolled_j_loop_is_refused_for_its_local_memory_not_its_shared_loads():
    # the shared loads lie outside the 128 rolled four-trip j loops, the FFMAs inside: the
    # code holds each FFMA once, so a load ratio from it would blame the right loads
    from gemm_kernels.exercises.grader import hint
    v = static_verdict(NAME, _with_loop(LOOP.replace(
        "#pragma unroll\n                for (int j", "#pragma unroll 1\n                for (int j")))
    assert v["static"][0] == FAIL and "bytes of stack" in v["static"][1], v
    assert "128 loops the compiler kept rolled" in v["static"][1], v
    assert "2 local-memory loads (LDL) and 1 store (STL)" in v["static"][1], v
    assert "per FFMA; at most" not in v["static"][1], v
    h = hint(get(NAME), "static", v["static"][1])
    assert "not unrolled" in h and "shared loads" not in h, h


@needs_gpu
@pytest.mark.parametrize("what,old,new", [
    ("B's columns from the thread's row", "Bs[k][tc * TN + j]", "Bs[k][tr * TN + j]"),
    ("B's columns without the patch width", "Bs[k][tc * TN + j]", "Bs[k][tc + j]"),
])
def test_wrong_products_are_refused_before_the_gpu_runs_them(what, old, new):
    # step 2 follows the products, so nothing wrong is launched on the GPU
    step, detail = first_failure(grade(NAME, _with_loop(LOOP.replace(old, new)), gpu=True))
    assert step == "static", (what, step, detail)


PARAMS = {"BM": 64, "BN": 128, "BK": 16, "TM": 8, "TN": 4}


def test_the_solutions_products_are_followed_and_pass():
    from gemm_kernels.exercises.ch06_checks import product_problems
    assert product_problems(solution(NAME), PARAMS) == []
    # the dot-product order, unrolled, reads the tiles directly: also right
    assert product_problems(_with_loop("""#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j)
#pragma unroll
                for (int k = 0; k < BK; ++k)
                    acc[i][j] += As[tr * TM + i][k] * Bs[k][tc * TN + j];"""), PARAMS) == []


@pytest.mark.parametrize("old, new, says", [
    ("Bs[k][tc * TN + j]", "Bs[k][tc + j]",
     "output (row 0, column 4) of the C tile is acc[0][0] of thread t = 1 (tc = 1, tr = 0): "
     "at k = 0, i = 0, j = 0 it adds a[i] * b[j] = As[0][0] * Bs[0][1], and the column of "
     "Bs is wrong there: that output needs row 0 of As and column 4 of Bs"),
    ("a[i] * b[j]", "a[j % TM] * b[i % TN]",
     "acc[0][1] of thread t = 0 (tc = 0, tr = 0): at k = 0, i = 0, j = 1 it adds "
     "a[j % TM] * b[i % TN] = As[1][0] * Bs[0][0], and the row of As is wrong there"),
    ("As[tr * TM + i][k]", "As[tr + i][k]",
     "acc[0][0] of thread t = 32 (tc = 0, tr = 1): at k = 0, i = 0, j = 0 it adds "
     "a[i] * b[j] = As[1][0] * Bs[0][0], and the row of As is wrong there: that output "
     "needs row 8 of As"),
    ("As[tr * TM + i][k]", "As[tr * TM + i][0]", "the k of As and of Bs (they differ)"),
    ("k < BK; ++k", "k < BK - 1; ++k", "its loop never adds the product of k = 15"),
])
def test_a_wrong_product_names_its_thread_what_it_read_and_what_it_needed(old, new, says):
    from gemm_kernels.exercises.ch06_checks import product_problems
    src = solution(NAME)
    assert src.count(old) == 1, old
    problems = product_problems(src.replace(old, new), PARAMS)
    assert problems and says in problems[0], problems


def test_a_wrong_product_is_refused_in_step_2_with_its_own_hint():
    from gemm_kernels.exercises.grader import hint
    v = static_verdict(NAME, _with_loop(LOOP.replace("Bs[k][tc * TN + j]", "Bs[k][tc + j]")))
    assert v["static"][0] == FAIL and "needs row 0 of As and column 4 of Bs" in v["static"][1], v
    h = hint(get(NAME), "static", v["static"][1])
    assert "row and column" in h and "shared loads" not in h, h


def test_hints_point_at_the_failure_not_at_the_answer():
    # the chapter leaves the loop order and the indices to the student
    details = ("access to invalid memory (SEGV), at line 64 of your cell", "63 elements wrong",
               "output (row 0, column 4) of the C tile is acc[0][0] of thread t = 1")
    for hint in get(NAME).hints.values():
        for text in ([hint(d) for d in details] if callable(hint) else [hint]):
            assert "As[tr" not in text and "Bs[k]" not in text and "outermost" not in text, text


def test_a_crash_gets_the_shared_index_hint_and_wrong_numbers_the_patch_hint():
    from gemm_kernels.exercises.grader import hint
    ex = get(NAME)
    crash = hint(ex, "correct", "an access to invalid memory (SEGV), at line 64 of your cell "
                                "(found by AddressSanitizer): check the bounds")
    assert "As or Bs past the end of the tile" in crash and "row of the patch" not in crash
    wrong = hint(ex, "correct", "63 of 4096 elements wrong at 64x64x64")
    assert "row of the patch" in wrong and "past the end" not in wrong


def test_the_static_step_says_which_widths_the_shared_loads_have():
    from gemm_kernels.exercises.ch06_checks import widths_words
    ok = static_verdict(NAME, solution(NAME))["static"][1]
    assert "the loop's 48 shared loads are all LDS.128" in ok, ok
    rolled = static_verdict(NAME, _with_loop(LOOP.replace(
        "#pragma unroll\n        for (int k", "#pragma unroll 1\n        for (int k")))["static"]
    assert "LDS.128 present" in rolled[1] and "narrower" in rolled[1], rolled
    assert "speed step" in widths_words({"LDS.128": 1, "LDS": 8})
    assert "as your k loop, left rolled, reads A" in rolled[1], rolled


def test_narrow_reads_from_an_unaligned_index_point_at_the_index_not_a_rolled_loop():
    """Bs[k][tc + j]: the k loop is unrolled, but B's four values are not provably
    16-byte aligned, so B comes 32 bits at a time. The note names the index, not a loop."""
    src = solution(NAME)
    assert src.count("Bs[k][tc * TN + j]") == 1, "the solution's B read changed"
    # step 2 now refuses this product (see above), so the note is read from its check
    from gemm_kernels.exercises.ch06_checks import shared_load_widths
    ex = get(NAME)
    note = shared_load_widths(NAME, ex.kernel, ex.params).note(
        src.replace("Bs[k][tc * TN + j]", "Bs[k][tc + j]"))
    assert "narrower" in note and "column index of your Bs reads" in note, note
    assert "left rolled" not in note, note
