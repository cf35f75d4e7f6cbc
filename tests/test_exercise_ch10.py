"""Chapter 10's exercise, a copy with all its loads in flight: the chapter's own copy (three
loads, a store, the fourth load) is refused by the static step with the counts read from
its SASS, at the graded ROWS and at ROWS = 4; the solution passes; a wrong index passes
the static step and is refused by step 3, on the CPU (every thread emulated) or on a GPU.
The check's reading of SASS is tested on its own, and so are the messages for four natural
mistakes: offsets in int (ptxas moves a store up at ROWS = 4: a note, not a fail), a transposing store (wrong, said first),
overlapping rows (two threads on one element, not a missing barrier) and a load without its
row check (a read outside `in`)."""
import pytest

from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.exercises import cpu_step
from gemm_kernels.exercises.catalog import get
from gemm_kernels.exercises.ch10_checks import loads_before_first_store, loads_in_flight
from gemm_kernels.exercises.grader import grade
from exercise_helpers import FAIL, PASS, refused_as_wrong, solution, static_verdict, status
from gpu import needs_gpu
from gemm_kernels.notebook.ch10_transpose import POINTERS

NAME = "10_in_flight"
EX = get(NAME)


def chapter_copy() -> str:
    """The chapter's copy kernel as a submission: its own loop, one load and one store
    per iteration."""
    return KERNELS["copy"].source_text()


def test_the_chapters_copy_is_refused_with_its_load_counts():
    v = static_verdict(NAME, chapter_copy())
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert "ROWS = 8 a thread sends 3 of its 4 loads before its first store" in v["static"][1], v
    assert "ROWS = 4 a thread sends 1 of its 8 loads" in v["static"][1], v


def test_the_solution_sends_every_load_first_at_every_rows_checked():
    v = static_verdict(NAME, solution(NAME))
    assert v["static"] == (PASS, v["static"][1]) and "no spills" in v["static"][1], v


def test_a_count_written_in_for_rows_8_only_is_refused_at_rows_4():
    src = solution(NAME).replace("constexpr int N = TILE / ROWS;", "constexpr int N = 4;")
    assert src != solution(NAME)
    v = static_verdict(NAME, src)
    assert v["static"][0] == FAIL and "ROWS = 4" in v["static"][1], v
    assert "ROWS = 8" not in v["static"][1], v


# A wrong index: the same loads first, from the wrong rows. The static step cannot see
# it; the element-wise check can.
WRONG_ROW = ("const int r0 = blockIdx.y * TILE + threadIdx.y;",
             "const int r0 = blockIdx.y * TILE + threadIdx.y * 2;")


def test_a_wrong_index_passes_the_static_step():
    v = static_verdict(NAME, solution(NAME).replace(*WRONG_ROW))
    assert v["static"][0] == PASS, v


@pytest.mark.skipif(cpu_step.host_compiler() is None, reason="no C++ compiler here")
def test_a_wrong_index_is_refused_on_the_cpu():
    src = solution(NAME).replace(*WRONG_ROW)
    v = status(grade(NAME, src, gpu=False))
    assert v["correct"][0] == FAIL, v


@needs_gpu
def test_a_wrong_index_is_refused_on_a_gpu():
    refused_as_wrong(NAME, *WRONG_ROW)


# ------------------------------------------------------------------ the check on its own

SASS = """
        /*0100*/                   LDG.E.CONSTANT R2, desc[UR4][R2.64] ;
        /*0110*/               @P0 LDG.E.CONSTANT R4, desc[UR4][R4.64] ;
        /*0120*/                   STG.E desc[UR4][R6.64], R2 ;
        /*0130*/                   LDG.E.CONSTANT R8, desc[UR4][R8.64] ;
        /*0140*/                   STG.E desc[UR4][R6.64+0x10], R4 ;
        /*0150*/                   EXIT ;
"""


def test_loads_before_the_first_store_are_counted_in_sass_order():
    assert loads_before_first_store(SASS) == (2, 3)
    assert loads_before_first_store(SASS.replace("STG", "NOP")) == (3, 3)


def test_the_check_is_silent_while_the_stub_is_there():
    check = loads_in_flight(NAME, EX.kernel, EX.params, also=({"ROWS": 4},))
    assert check("// YOUR CODE HERE") == []


# ------------------------------------------------------------------ messages a student can act on

from gemm_kernels.exercises.ch10_checks import ptx_loads_first   # noqa: E402

LOAD = "if (r < rows && c < cols) v[i] = in[(size_t)r * cols + c];"
STORE = "if (r < rows && c < cols) out[(size_t)r * cols + c] = v[i];"
no_compiler = pytest.mark.skipif(cpu_step.host_compiler() is None, reason="no C++ compiler here")


def test_the_ptx_order_is_read_from_global_loads_and_stores():
    assert ptx_loads_first("ld.global.f32 %f1, [%rd1];\nld.global.f32 %f2, [%rd2];\n"
                           "st.global.f32 [%rd3], %f1;\nst.global.f32 [%rd4], %f2;")
    assert not ptx_loads_first("ld.global.f32 %f1, [%rd1];\nst.global.f32 [%rd3], %f1;\n"
                               "ld.global.f32 %f2, [%rd2];")
    assert ptx_loads_first("ld.shared.f32 %f1, [%r1];")


def test_offsets_in_int_pass_with_a_note_on_what_ptxas_did_at_rows_4():
    """A correct source in int offsets sends every load first in its PTX, but ptxas moves a
    store up at ROWS = 4: the SASS sends 3 of its 8 loads first there. The graded ROWS = 8
    keeps every load first, so the source passes; ROWS = 4 is a note that says the source's
    order is right, what ptxas did, and what keeps the order (size_t offsets)."""
    src = solution(NAME).replace(LOAD, LOAD.replace("(size_t)r", "r")) \
        .replace(STORE, STORE.replace("(size_t)r", "r"))
    v = static_verdict(NAME, src)
    assert v["static"][0] == PASS, v
    detail = v["static"][1]
    assert "at ROWS = 8, the graded configuration" in detail, detail
    assert "ROWS = 4 (a note, not graded) your source sends all 8 loads" in detail, detail
    assert "ptxas moved a store up" in detail and "size_t" in detail, detail


@no_compiler
def test_a_transposing_store_is_reported_as_wrong_not_as_slow():
    """The SASS of this source moves a store up at ROWS = 4 (a note, not graded), and the
    kernel is wrong: it is refused as a wrong copy (step 3, on the CPU), not as a slow one."""
    src = solution(NAME).replace(STORE, STORE.replace("(size_t)c * rows + r", "(size_t)c * rows + r")
                                 .replace("(size_t)r * cols + c", "(size_t)c * rows + r"))
    v = status(grade(NAME, src, gpu=False))
    assert v["static"][0] == PASS and v["correct"][0] == FAIL, v
    assert "moved a store up" not in v["correct"][1], v


# The reviewer's answer with pointers: all loads, then all stores, offsets in size_t. Its
# PTX keeps that order; ptxas moves a store up at ROWS = 4 only: a pass at the graded
# ROWS = 8, with a note naming ptxas and the size_t offsets.


def pointer_answer() -> str:
    src = solution(NAME)
    start, end = src.index("    T v[N];"), src.index("    // END SOLUTION")
    return src[:start] + POINTERS + src[end:]


def test_a_pointer_answer_passes_with_the_note_naming_ptxas():
    v = static_verdict(NAME, pointer_answer())
    assert v["static"][0] == PASS, v
    assert "ptxas moved a store up" in v["static"][1] and "your source sends all" in v["static"][1], v


def test_the_solution_passes_with_every_load_first():
    v = static_verdict(NAME, solution(NAME))
    assert v["static"][0] == PASS and "every load before the first store" in v["static"][1], v


@no_compiler
def test_overlapping_rows_are_two_threads_on_one_element_not_a_missing_barrier():
    src = solution(NAME).replace("const int r = r0 + i * ROWS;", "const int r = r0 + i;")
    v = status(grade(NAME, src, gpu=False))
    assert v["correct"][0] == FAIL, v
    assert "two threads wrote the same element" in v["correct"][1], v
    assert "exactly one thread" in v["correct"][1] and "__syncthreads" not in v["correct"][1], v


@no_compiler
def test_a_load_without_its_row_check_is_a_read_outside_the_input():
    src = solution(NAME).replace(LOAD, "if (c < cols) v[i] = in[(size_t)r * cols + c];")
    v = status(grade(NAME, src, gpu=False))
    assert v["correct"][0] == FAIL and "outside the input `in`" in v["correct"][1], v


ASAN_LEFT_OF_C = """==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x613 at pc 0x5
READ of size 4 at 0x6130000001e0 thread T1
    #0 0x55 in void copy<float, 32, 8>(int, int, float const*, float*) exercise.cu:21
0x6130000001e0 is located 32 bytes to the left of 364-byte region [0x613000000200,0x61300000036c)
allocated by thread T0 here:
    #1 0x564 in alloc_C driver.cpp:20
"""


def test_asan_names_the_array_of_a_copy_by_the_kind_of_access():
    """AddressSanitizer names the allocation nearest to the address: past the end of `in`
    that can be `out`. In a copy a read is of `in`, a write of `out`."""
    assert "outside the input `in`" in cpu_step.sanitizer_message(ASAN_LEFT_OF_C, 1, move=True)
    assert "outside the output `out`" in cpu_step.sanitizer_message(
        ASAN_LEFT_OF_C.replace("READ of", "WRITE of"), 1, move=True)
    assert "outside the output" in cpu_step.sanitizer_message(ASAN_LEFT_OF_C, 1)   # GEMM: C


def test_a_kernel_wrong_as_well_as_out_of_order_gets_the_bounds_hint():
    """Step 2 reports a kernel that does not copy yet as wrong (the CPU emulation's
    finding): its hint is about the elements and the bounds, not the order."""
    from gemm_kernels.exercises.grader import hint
    wrong = ("it does not copy yet; run on the CPU (every thread emulated): a read outside "
             "the input `in`; element (r, c) of `out` must be element (r, c) of `in`")
    assert "inside the matrix" in hint(EX, "static", wrong)
    order = "with TILE = 32, ROWS = 8 a thread sends 3 of its 4 loads before its first store"
    assert hint(EX, "static", order).startswith("a store (STG) needs the value")


def test_an_array_in_local_memory_is_refused_with_its_one_load_counted_in_the_singular():
    """Both loops kept rolled (`#pragma unroll 1`): the values go through a stack array,
    the SASS has a single LDG in its loop, and the message counts it in good English."""
    src = solution(NAME).replace("#pragma unroll\n", "#pragma unroll 1\n")
    assert src.count("#pragma unroll 1") == 2
    v = static_verdict(NAME, src)
    assert v["static"][0] == FAIL and "bytes of stack" in v["static"][1], v
    assert "has 1 global load (LDG) where" in v["static"][1], v


def test_the_order_hint_states_why_not_how():
    """The step-2 hint explains why a store ends the loads in flight; it does not name
    the technique (values kept in registers), which is the exercise."""
    from gemm_kernels.exercises.grader import hint
    order = "with TILE = 32, ROWS = 8 a thread sends 3 of its 4 loads before its first store"
    text = hint(EX, "static", order)
    assert "register" not in text and "TODO" not in text, text


def test_wrong_values_inside_the_matrix_get_the_value_hint_not_the_bounds_hint():
    """Step 3: an access outside the matrix is about the bounds; wrong values with every
    access inside are about which value goes where."""
    from gemm_kernels.exercises.grader import hint
    wrong = "wrong at 1x1: 1 element wrong; worst at (0,0): 0.0 against 0.126"
    assert "(r, c) of `in`" in hint(EX, "correct", wrong)
    assert "inside the matrix" not in hint(EX, "correct", wrong)
    outside = "at 1x1: a write of 4 bytes outside the output `out`, at line 24 of your cell"
    assert "inside the matrix" in hint(EX, "correct", outside)


def test_no_order_hint_under_the_unwritten_stub():
    """While the marker is there, nothing was written: a hint about the order of loads and
    stores would read as the answer, not as help with a message."""
    from gemm_kernels.exercises.grader import hint
    stub = ("write the part marked '// YOUR CODE HERE' (line 15 of the cell), then delete the "
            "marker line: while it is there, the grader takes that part as not written")
    assert hint(EX, "static", stub) == ""
