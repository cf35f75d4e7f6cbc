"""Chapter 00's exercise, a copy kernel graded by its speed: the skeleton compiles and is
refused, the solution passes every step this machine can run, typical mistakes are refused
with the right message."""
import pytest

from exercise_helpers import (FAIL, PASS, first_failure, grade, refused_as_wrong,
                              skeleton_cell, solution, static_verdict)
from gemm_kernels.exercises import ch00_checks
from gpu import needs_gpu

NAME = "00_copy"


def test_skeleton_compiles_and_is_refused_with_the_line_to_write():
    v = static_verdict(NAME, skeleton_cell(NAME))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "YOUR CODE HERE" in v["static"][1], v


# Typical wrong answers, refused on a GPU by the element-wise check or the guard.
WRONG = {
    "no bounds test": ("if (r < rows && c < cols)\n", ""),
    "the loop stops after ROWS rows": ("dy < TILE", "dy < ROWS"),
}


def columns_down_lanes(src: str) -> str:
    """Correct but slow: lanes on consecutive rows (threadIdx.x picks the row), so every
    warp instruction touches 32 sectors of 32 bytes to move 128 bytes."""
    old_c = "const int c = blockIdx.x * TILE + threadIdx.x;\n"
    old_r = "const int r = blockIdx.y * TILE + threadIdx.y + dy;"
    assert old_c in src and old_r in src
    return src.replace(old_c, "").replace(
        old_r, "const int r = blockIdx.y * TILE + threadIdx.x;\n"
               "        const int c = blockIdx.x * TILE + threadIdx.y + dy;")


def test_the_column_mapping_is_refused_without_a_gpu():
    v = static_verdict(NAME, columns_down_lanes(solution(NAME)))
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert "32 sectors of 32 bytes in 32 lines" in v["static"][1], v
    assert "4 sectors in 1 line" in v["static"][1], v


def test_the_probe_sees_every_read_and_write_of_the_solution():
    trace = ch00_checks.probe_trace(solution(NAME), 32, 4)
    assert trace is not None and len(trace) == 32 * 4
    reads, writes = trace[33]               # thread (1, 1): rows 1, 5, ..., 29 of column 1
    assert reads == writes == [r * ch00_checks.PROBE_SIDE + 1 for r in range(1, 32, 4)]
    assert ch00_checks.lane_problems(trace) == []


# Coalesced in other words than the solution's: a local copy, pointer steps.
COALESCED = {
    "through a local": ("out[(size_t)r * cols + c] = in[(size_t)r * cols + c];",
                        "{ const T v = in[(size_t)r * cols + c]; out[(size_t)r * cols + c] = v; }"),
    "pointer arithmetic": ("out[(size_t)r * cols + c] = in[(size_t)r * cols + c];",
                           "*(out + (size_t)r * cols + c) = *(in + (size_t)r * cols + c);"),
}


def test_lanes_8_floats_apart_are_refused():
    """Each lane copying its own run of 8 floats of a row: lanes 32 bytes apart, so a
    warp's load touches 32 sectors in 8 lines."""
    trace = [([8 * lane], [8 * lane]) for lane in range(32)]
    (problem,) = ch00_checks.lane_problems(trace)
    assert "32 sectors of 32 bytes in 8 lines" in problem and "1st load" in problem


def test_a_half_warp_is_held_to_its_own_lanes():
    """16 active lanes on 16 neighbouring floats: 2 sectors, which is all they need."""
    trace = [([lane], [lane]) if lane < 16 else ([], []) for lane in range(32)]
    assert ch00_checks.lane_problems(trace) == []


# The offset r * cols + c: in 32 bits it wraps past 2^31 elements, which no test shape
# reaches; the static step reads the width of the multiplication from the PTX.
OFFSET = "(size_t)r * cols + c"
SIXTY_FOUR = {
    "a size_t variable": ("if (r < rows && c < cols)\n            out[(size_t)r * cols + c] = "
                          "in[(size_t)r * cols + c];",
                          "const size_t i = (size_t)r * cols + c;\n        "
                          "if (r < rows && c < cols)\n            out[i] = in[i];"),
    "an unsigned long long factor": (OFFSET, "r * (unsigned long long)cols + c"),
}
THIRTY_TWO = {
    "int": (OFFSET, "r * cols + c"),
    "the cast after the product": (OFFSET, "(size_t)(r * cols + c)"),
    "unsigned": (OFFSET, "(unsigned)r * cols + c"),
}


@pytest.mark.parametrize("what", {**COALESCED, **SIXTY_FOUR})
def test_coalesced_64_bit_rewrites_pass_the_static_step(what):
    src = solution(NAME)
    old, new = {**COALESCED, **SIXTY_FOUR}[what]
    assert old in src
    v = static_verdict(NAME, src.replace(old, new))
    assert v["static"][0] == PASS, v


@pytest.mark.parametrize("what", THIRTY_TWO)
def test_32_bit_offsets_are_refused_without_a_gpu(what):
    src = solution(NAME)
    old, new = THIRTY_TWO[what]
    assert old in src
    v = static_verdict(NAME, src.replace(old, new))
    assert v["static"][0] == FAIL and "computed in 32 bits" in v["static"][1], v
    assert "(size_t)r * cols + c" in v["static"][1]


def test_the_skeleton_is_refused_for_its_stub_only():
    v = static_verdict(NAME, skeleton_cell(NAME))
    assert "32 bits" not in v["static"][1], v


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    refused_as_wrong(NAME, *WRONG[what])


@needs_gpu
def test_a_copy_with_lanes_down_a_column_is_refused_before_the_gpu_runs_it():
    """Right in every element, but uncoalesced: step 2 refuses it on a GPU as it does
    without one (its sectors and lines counted), so nothing is launched."""
    step, detail = first_failure(grade(NAME, columns_down_lanes(solution(NAME)), gpu=True))
    assert step == "static" and "sectors" in detail, (step, detail)


def test_the_solution_is_the_reference_copy_line_for_line():
    """The solution notebook shows the reference kernel's recorded rate as the solution's:
    that holds only while the two bodies are the same code."""
    import re
    from gemm_kernels.notebook.display import source

    def body(text):
        text = re.sub(r"//[^\n]*", "", text)
        return " ".join(text[text.index("__global__"):].split())

    assert body(solution(NAME).split("#include \"common.cuh\"")[1]) == body(source("copy"))


def test_copy_correct_hint_answers_the_failure_found():
    """Step 3's hint asks about what failed: the bound for an access outside the arrays,
    the row step for a race, the block and tile place of an unwritten element; none of
    them spells out the whole index."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.grader import hint
    ex = get("00_copy")
    outside = hint(ex, "correct", "at 1x1: a read of 4 bytes outside the input `in`")
    race = hint(ex, "correct", "a data race on the output: two threads wrote the same element")
    nan = hint(ex, "correct", "wrong at 127x129: 10,707 elements wrong, 10,707 NaN; "
                              "worst at (44, 0): nan against -1.8 (|err|/bound inf)")
    assert "inside" in outside and "race" not in outside
    assert "By how many rows" in race
    assert "blockIdx = (0, 1)" in nan and "row 12, column 0" in nan
    # a wrong row stride (rows instead of cols) leaves elements unwritten and puts others
    # in the wrong place: the hint asks for the offset and says how long a row is
    stride = hint(ex, "correct", "wrong at 7x13: 40 elements wrong, 36 NaN; "
                                 "worst at (4, 3): nan against -1.07 (|err|/bound inf)")
    assert "which offset did that thread use" in stride and "`cols` elements long" in stride
    assert "4 other elements hold a value that belongs elsewhere" in stride
    wrong = hint(ex, "correct", "wrong at 7x13: 5 elements wrong, 0 NaN; worst at (1, 2)")
    assert "`cols` elements long" in wrong and "NaN" not in wrong
    for h in (outside, race, nan, stride, wrong):
        assert "threadIdx.y" not in h and "blockIdx.y" not in h
