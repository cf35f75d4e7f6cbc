"""Chapter 07's exercise: the skeleton compiles and is refused, the solution passes every
step this machine can run, typical mistakes are refused with the right message (loads
narrower than 128 bits by the SASS check here, a wrong layout on a GPU)."""
import pytest

from gemm_kernels.exercises.stubs import skeleton
from exercise_helpers import (FAIL, PASS, assert_right_and_timed, first_failure, grade,
                              skeleton_cell, solution, static_verdict)
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


def test_notebook_cell_is_the_solutions_skeleton():
    assert skeleton_cell(NAME) == skeleton(solution(NAME))


def test_solution_passes_the_static_steps():
    v = static_verdict(NAME, solution(NAME))
    assert v["compile"][0] == PASS and v["static"][0] == PASS, v
    assert "LDG.E.128.CONSTANT, LDS.128, STS.128 present" in v["static"][1], v


def test_skeleton_compiles_and_is_refused_with_the_lines_to_write():
    v = static_verdict(NAME, skeleton_cell(NAME))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "YOUR CODE HERE" in v["static"][1], v
    assert "no LDS.128 in the SASS" in v["static"][1], v


def test_a_typo_is_a_compile_error_on_the_cells_line():
    src = _changed(A_LOAD, A_LOAD.replace("load_float4", "load_flaot4"))
    line = next(i for i, l in enumerate(src.split("\n"), 2) if "flaot4" in l)
    v = static_verdict(NAME, src)
    assert v["compile"][0] == FAIL and f"line {line}:" in v["compile"][1], v


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


@needs_gpu
def test_solution_passes_on_a_gpu():
    r = grade(NAME, solution(NAME), gpu=True)
    assert_right_and_timed(r)
