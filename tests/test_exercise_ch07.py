"""Chapter 07's exercise: the skeleton compiles and is refused, the solution passes every
step this machine can run, typical mistakes are refused with the right message (loads
narrower than 128 bits by the SASS check here, a wrong layout on a GPU)."""
import re
import pytest

from exercise_helpers import FAIL, first_failure, grade, solution, static_verdict
from gpu import needs_gpu

NAME = "07_float4"
A_LOAD = "v = load_float4(A + (row0 + m) * K + k0 + k);"
A_STORE = """                As[k + 0][m] = v.x;
                As[k + 1][m] = v.y;
                As[k + 2][m] = v.z;
                As[k + 3][m] = v.w;"""
B_READ = """            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[k][tc * TN + j]);
                b[j] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;
            }"""


def _changed(old, new):
    src = solution(NAME)
    assert src.count(old) == 1, old
    return src.replace(old, new)


def test_four_scalar_loads_of_A_are_refused():
    # the compiler cannot prove A's float address 16-byte aligned: four LDG.E, not one
    v = static_verdict(NAME, _changed(A_LOAD, "{ const float* p = A + (row0 + m) * K + k0 + k; "
                                              "v = make_float4(p[0], p[1], p[2], p[3]); }"))
    assert v["static"][0] == FAIL, v
    assert "4 loads of A or B from global memory narrower than 128 bits" in v["static"][1], v


def test_B_read_a_float_at_a_time_is_refused():
    # the strided operands of chapter 06's third kernel: 32-bit shared loads
    v = static_verdict(NAME, _changed(
        B_READ, "            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tc + j * (BN / TN)];"))
    assert v["static"][0] == FAIL, v
    assert "loads from shared memory narrower than 128 bits" in v["static"][1], v


@needs_gpu
@pytest.mark.parametrize("what,old,new", [
    ("A's tile not transposed", A_STORE,
     "                *reinterpret_cast<float4*>(&As[0][0] + m * BK + k) = v;"),
    ("A's float4 read without the tile's offset k0", A_LOAD,
     "v = load_float4(A + (row0 + m) * K + k);"),
])
def test_wrong_answers_are_refused_on_a_gpu(what, old, new):
    step, detail = first_failure(grade(NAME, _changed(old, new), gpu=True))
    assert step == "correct", (what, step, detail)




def test_a_mapping_written_for_BK_8_only_is_refused_at_BK_16():
    # the float4 -> (m, k) mapping with BK = 8's numbers written in: right at the graded
    # BK = 8, wrong at BK = 16 (run on the CPU, every thread emulated)
    src = _changed("const int m = f / (BK / 4), k = f % (BK / 4) * 4;",
                   "const int m = f / 2, k = f % 2 * 4;")
    static = {s.name: s for s in grade(NAME, src, gpu=False).steps}["static"]
    assert static.status == FAIL and "right at BK = 8 but wrong with BK = 16" \
        in static.detail, static
    assert "write m and k with BK" in static.detail, static
    # the hint speaks of the mapping only, not of loads narrower than 128 bits
    assert "f = 5" in static.hint and "128-bit" not in static.hint, static.hint


def test_a_narrow_load_gets_the_narrow_load_hint_only():
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.grader import hint as hint_for
    h = hint_for(get(NAME), "static", "4 loads of A or B from global memory narrower than "
                                      "128 bits: read them a float4 at a time (load_float4)")
    assert "16-byte aligned" in h and "BK = 16" not in h, h


def test_a_float4_read_past_A_gets_the_float4_hint():
    # the bounds test removed: AddressSanitizer reports the 16-byte read (not 4 bytes,
    # one float of it), and the hint names the two causes of a float4 overrun
    src = _changed("if (row0 + m < M && k0 + k < K) v = load_float4(", "v = load_float4(")
    report = grade(NAME, src, gpu=False)
    step, detail = first_failure(report)
    # AddressSanitizer names A where it can attribute the read, else "invalid memory"
    assert step == "correct" and re.search(r"a read of 16 bytes (outside A|to invalid memory)",
                                           detail), (step, detail)
    hint = {s.name: s for s in report.steps}["correct"].hint
    assert "bounds test" in hint, hint


def test_a_kernel_wrong_where_graded_is_left_to_step_3():
    # A's tile not transposed: wrong at BK = 8 too, so step 3 reports it with its hint
    src = _changed(A_STORE, "                *reinterpret_cast<float4*>(&As[0][0] + m * BK + k) = v;")
    steps = {s.name: s for s in grade(NAME, src, gpu=False).steps}
    assert steps["static"].status != FAIL and steps["correct"].status == FAIL, steps
    # the pass message ends in a sentence, not a dangling separator
    assert "BK = 16 not checked: the kernel is wrong at the graded tile (step 3)" \
        in steps["static"].detail and not steps["static"].detail.rstrip().endswith(";"), steps


def test_the_solution_is_right_at_BK_16_and_says_so():
    static = {s.name: s for s in grade(NAME, solution(NAME), gpu=False).steps}["static"]
    assert "right with BK = 16 as well" in static.detail, static


def test_hints_do_not_give_the_answer():
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.grader import hint as hint_for
    ex = get(NAME)
    details = ("a read of 16 bytes outside A, at line 40 of your cell (found by "
               "AddressSanitizer)", "wrong at 7x13x5: 3 elements wrong", "misaligned address")
    for step in ex.hints:
        for detail in details:
            hint = hint_for(ex, step, detail)
            assert "As[k][tr" not in hint and "Bs[k][tc" not in hint, hint


def test_the_correct_hint_answers_the_kind_of_failure():
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.grader import hint as hint_for
    ex = get(NAME)
    outside = hint_for(ex, "correct", "a read of 16 bytes outside A, at line 40 of your cell "
                                      "(found by AddressSanitizer): check the bounds")
    wrong = hint_for(ex, "correct", "wrong at 7x13x5 with alpha=1.0, beta=0.0: 3 elements "
                                    "wrong; worst at (4, 5)")
    # a float4 read past A: the bounds test; a start that is not a multiple of 4 is
    # reported as misaligned instead (on a GPU and on the CPU), which the hint says
    assert "bounds test" in outside and "multiple of 4" in outside and "misaligned" in outside
    odd = hint_for(ex, "correct", "a misaligned address: a read of a float4 (16 bytes) at an "
                                  "address that is not a multiple of 16 bytes, at line 38")
    assert "multiple of 16 bytes" in odd and "bounds test" not in odd, odd
    # the commonest cause on ragged shapes, a row beyond the matrix, is named first
    assert outside.index("row of A at or beyond M") < outside.index("too close to the end")
    scalar = hint_for(ex, "correct", "a read of 4 bytes outside A, at line 39 of your cell")
    assert "names the array" in scalar and "misaligned" not in scalar
    assert "nothing was read or written outside" in wrong and "names the array" not in wrong
    assert "16 bytes" in hint_for(ex, "correct", "misaligned address: a vector load")
