"""Chapter 01's exercise: typical mistakes in the index and the dot product are refused
with the right message, most of them without a GPU by the static check of both mappings
and the strides (the checks every exercise shares are in tests/test_exercises.py)."""
import pytest

from exercise_helpers import FAIL, PASS, refused_as_wrong, solution, static_verdict
from gemm_kernels.exercises import ch01_checks
from gemm_kernels.exercises.ch01_02_cstatements import compile_statements, tokens
from gpu import needs_gpu

NAME = "01_index"
ROW = "row = X_TO_COL ? y : x;\n    col = X_TO_COL ? x : y;"
LOOP = "for (int k = 0; k < K; ++k)\n            acc += A[row * K + k] * B[k * N + col];"

# Typical wrong answers, refused without a GPU (step "static"), with a word of the message.
STATIC = {
    "the flag ignored (x->col always)": (ROW, "row = y;\n    col = x;", "X_TO_COL = 0"),
    "row and column swapped": (ROW, "row = X_TO_COL ? x : y;\n    col = X_TO_COL ? y : x;",
                               "computed by no thread"),
    "lanes down a column with X_TO_COL = 1": (
        ROW, "row = X_TO_COL ? blockIdx.y * BLOCK + threadIdx.x : x;\n"
             "    col = X_TO_COL ? blockIdx.x * BLOCK + threadIdx.y : y;",
        "neighbouring columns of one row"),
    "row stride M (the notes' A[i*M+k])": ("A[row * K + k]", "A[row * M + k]",
                                            "right only when M == K"),
    "row stride of B": ("B[k * N + col]", "B[k * K + col]", "row k of B starts at k * N"),
    # The loop: each mistake named as what it is, not as a mapping problem.
    "one step short": (LOOP, LOOP.replace("k < K", "k < K - 1"), "k = 4 is left out"),
    "one step too many": (LOOP, LOOP.replace("k < K", "k <= K"), "past the end of B"),
    "assigned, not added": (LOOP, LOOP.replace("acc +=", "acc ="),
                            "only the last product is left"),
}
# Right answers in other forms: the static step passes them.
RIGHT = {
    "if constexpr": (ROW, "if constexpr (X_TO_COL) { row = y; col = x; }\n"
                          "    else { row = x; col = y; }"),
    "from the built-ins": (ROW, "if (X_TO_COL == 1) {\n"
                                "        row = blockIdx.y * blockDim.y + threadIdx.y;\n"
                                "        col = blockIdx.x * blockDim.x + threadIdx.x;\n"
                                "    } else { row = x; col = y; }"),
    "another loop variable": (LOOP, "for (int i = 0; i < K; i++) acc += A[row * K + i] * "
                                    "B[i * N + col];"),
    "k counted down, acc = acc + ...": (
        LOOP, "for (int k = K - 1; k >= 0; k--) { acc = acc + A[row * K + k] * B[k * N + col]; }"),
    "pointer walking": (LOOP, "const float* a = A + row * K;\n        const float* b = B + col;\n"
                              "        for (int k = 0; k < K; ++k, b += N) acc += a[k] * *b;"),
}


@pytest.mark.parametrize("what", STATIC)
def test_wrong_answers_are_refused_without_a_gpu(what):
    old, new, words = STATIC[what]
    src = solution(NAME)
    assert old in src
    v = static_verdict(NAME, src.replace(old, new))
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert words in " ".join(v["static"][1].split()), v["static"][1]


@pytest.mark.parametrize("what", RIGHT)
def test_right_answers_in_other_forms_pass_the_static_check(what):
    old, new = RIGHT[what]
    src = solution(NAME)
    assert old in src
    assert ch01_checks.index_check(src.replace(old, new)) == []


def test_the_statement_reader_keeps_cs_division_and_refuses_what_it_does_not_know():
    run = compile_statements("int q = -7 / 2, r = -7 % 2; if (q < 0) { q += 10; } else q = 0;")
    assert run({}) == {"q": 7, "r": -1}      # -7 / 2 is -3 in C
    assert tokens("threadIdx . x")[0] == ("name", "threadIdx.x")
    with pytest.raises(ValueError):
        compile_statements("row = foo(x);")({"x": 1})


# Refused on a GPU by the element-wise check.
WRONG = {
    "no edge test": ("if (row < M && col < N) {", "{"),
}


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    refused_as_wrong(NAME, *WRONG[what])
