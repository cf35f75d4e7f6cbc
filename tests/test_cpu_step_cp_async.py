"""The CPU step's cp.async emulation and dynamic shared memory (`cpu_step.emulated_text`,
the end of `cuda_on_cpu.h`): chapter 09's pipeline exercise runs on the CPU. The
solution passes; each way of getting the wait wrong (one group too many in flight, a
commit missing or made only when a tile is requested, the barrier before the wait, no
wait) fails with words that name the wait, although the copies of a real GPU would
usually have arrived in time; a kernel with `extern __shared__` and no cp.async runs,
and an access past its dynamic shared memory is stopped."""
import dataclasses

import pytest

from exercise_helpers import solution
from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.exercises import cpu_step
from gemm_kernels.exercises.catalog import EXERCISES
from gemm_kernels.exercises.grader import FAIL, PASS, SKIPPED, grade, student_kernel
# the exercise's request, commit, and a commit moved inside the request
from test_exercise_ch09_capstone import COMMIT, INSIDE, REQUEST

NAME = "09_capstone_step"
WAIT = "cp_async_wait<STAGES - 2>();\n                __syncthreads();"

needs_cxx = pytest.mark.skipif(cpu_step.host_compiler() is None,
                               reason="no C++ compiler here: the CPU step cannot run")


def changed(old: str, new: str, also: tuple = ()) -> str:
    src = solution(NAME)
    for o, n in ((old, new), *also):
        assert src.count(o) == 1, o
        src = src.replace(o, n)
    return src


def on_cpu(source: str):
    ex = EXERCISES[NAME]
    return cpu_step.correct_on_cpu(student_kernel(ex, source), ex.params)


# ---------------------------------------------------------------- the CPU build's text

def test_the_cp_async_helpers_are_taken_out_of_the_compiled_text_only():
    src = solution(NAME)
    text = cpu_step.emulated_text(src)
    assert "asm" in src and "asm" not in cpu_step.code_only(text)
    assert text.count("\n") == src.count("\n")            # every line where it was
    assert "cp_async_wait<STAGES - 2>();" in text          # the calls stay
    assert "float* const smem = reinterpret_cast<float*>(cpu_dynamic_shared);" in text
    assert cpu_step.uses_cp_async(src) and cpu_step.emulation_problem(src) is None
    # the lines after the helpers are unchanged, at the same line numbers
    s, t = src.splitlines(), text.splitlines()
    start = next(i for i, l in enumerate(s) if "sgemm_capstone(" in l)
    assert s[start:] != t[start:] and \
        [a for a, b in zip(s[start:], t[start:]) if a != b] == \
        [l for l in s[start:] if "extern __shared__" in l]


def test_a_helper_whose_asm_is_not_the_one_emulated_is_left_and_refused():
    """A cp_async_4 whose asm copies 16 bytes is not the 4-byte copy the shim emulates."""
    src = solution(NAME).replace("cp.async.ca.shared.global [%0], [%1], 4, %2;",
                                 "cp.async.ca.shared.global [%0], [%1], 16, %2;")
    assert "inline PTX (cp.async)" in cpu_step.emulation_problem(src)
    text = cpu_step.emulated_text(src)
    assert "[%1], 16, %2;" in text and "[%1], 4, %2;" not in text     # only that one stays
    assert "cp.async.wait_group" not in text and "cp.async.commit_group" not in text


def test_other_inline_ptx_is_still_refused():
    assert "ldmatrix" in cpu_step.emulation_problem(KERNELS["mma_sync"].source_with_headers())
    assert cpu_step.emulation_problem('__device__ void f() { asm volatile("trap;"); }')


# ---------------------------------------------------------------- the exercise on the CPU

@needs_cxx
def test_the_solution_passes_step_3_on_the_cpu():
    v = {s.name: (s.status, s.detail) for s in grade(NAME, solution(NAME), gpu=False).steps}
    assert v["static"][0] == PASS and v["correct"][0] == PASS, v
    assert "every element right" in v["correct"][1] and "no data race at 33x68x129" \
        in v["correct"][1], v
    assert v["speed"][0] == SKIPPED, v


@needs_cxx
def test_one_group_too_many_in_flight_is_refused_on_the_cpu():
    ok, detail = on_cpu(changed(WAIT, WAIT.replace("STAGES - 2", "STAGES - 1")))
    assert ok is False, detail
    assert "a cp.async copy landed at the cp_async_wait of line" in detail \
        and "the wait's count let the group of the tile being read stay in flight" in detail, \
        detail


@needs_cxx
def test_the_barrier_before_the_wait_is_refused_on_the_cpu():
    ok, detail = on_cpu(changed(WAIT, "__syncthreads();\n                "
                                      "cp_async_wait<STAGES - 2>();"))
    assert ok is False and "data race on shared memory" in detail \
        and "no __syncthreads() between that wait and the read" in detail, detail


@pytest.mark.parametrize("old, new, says", [
    (WAIT, "__syncthreads();", "committed but never waited for"),                # no wait
    (COMMIT, "// END SOLUTION", "never been committed (no cp_async_commit()"),   # no commit
])
@needs_cxx
def test_a_tile_never_waited_for_reads_nan_on_the_cpu(old, new, says):
    ok, detail = on_cpu(changed(old, new))
    assert ok is False and detail.startswith("wrong at"), detail
    assert "came out NaN because a tile was read from shared memory before its cp.async " \
           "copies had landed" in detail and "cp_async_wait<count>()" in detail, detail
    assert says in detail, detail


@needs_cxx
def test_the_commit_inside_the_request_is_refused_on_the_cpu():
    """The race the static step finds by reading: on the CPU the last tiles' groups are
    never completed, and their NaN reaches C."""
    ok, detail = on_cpu(changed(COMMIT, "// END SOLUTION", ((REQUEST, INSIDE),)))
    assert ok is False and "before its cp.async copies had landed" in detail \
        and "every step commits one group" in detail, detail


@needs_cxx
def test_waiting_for_everything_is_right_on_the_cpu():
    """wait<0> loses the overlap (the static step's to refuse), not the results."""
    ok, detail = on_cpu(changed(WAIT, WAIT.replace("STAGES - 2", "0")))
    assert ok is True, detail


@needs_cxx
def test_a_ring_that_does_not_move_is_wrong_on_the_cpu():
    """Passes the static step; the CPU step now finds it without a GPU."""
    ring = ("        rs = rs + 1 == STAGES ? 0 : rs + 1;\n"
            "        ws = ws + 1 == STAGES ? 0 : ws + 1;\n")
    report = grade(NAME, changed(ring, ""), gpu=False)
    v = {s.name: (s.status, s.detail) for s in report.steps}
    assert v["static"][0] == PASS and v["correct"][0] == FAIL, v
    assert v["correct"][1].startswith("wrong at"), v


# ---------------------------------------------------------------- extern __shared__ alone

DYNAMIC = ("    extern __shared__ __align__(16) float smem[];\n"
           "    float (&As)[BLOCK][BLOCK] = *reinterpret_cast<float (*)[BLOCK][BLOCK]>(smem);\n"
           "    float (&Bs)[BLOCK][BLOCK] = "
           "*reinterpret_cast<float (*)[BLOCK][BLOCK]>(smem + BLOCK * BLOCK);\n")
STATIC = "    __shared__ float As[BLOCK][BLOCK];\n    __shared__ float Bs[BLOCK][BLOCK];\n"


def dynamic_smem_tiled(tiles: int):
    """Chapter 03's tiled kernel with its two tiles in dynamic shared memory, launched
    with room for `tiles` of them."""
    k = KERNELS["smem_tiled"]
    text = k.source_text()
    assert text.count(STATIC) == 1
    k = k.with_code(text.replace(STATIC, DYNAMIC), name="smem_tiled:dynamic",
                    source="exercise.cu")
    return dataclasses.replace(k, dynamic_smem=lambda p, lim: tiles * p["BLOCK"] ** 2 * 4)


@needs_cxx
def test_a_kernel_with_dynamic_shared_memory_and_no_cp_async_runs_on_the_cpu():
    k = dynamic_smem_tiled(2)
    assert cpu_step.emulation_problem(k.source_with_headers()) is None
    assert not cpu_step.uses_cp_async(k.source_text())
    ok, detail = cpu_step.correct_on_cpu(k, {"BLOCK": 8})
    assert ok is True and "every element right" in detail and "no data race" in detail, detail


@needs_cxx
def test_an_access_past_the_dynamic_shared_memory_is_stopped():
    ok, detail = cpu_step.correct_on_cpu(dynamic_smem_tiled(1), {"BLOCK": 8})
    assert ok is False and "outside the dynamic shared memory (extern __shared__)" \
        in detail and "AddressSanitizer" in detail, detail


def test_the_hint_of_step_3_follows_its_failure():
    from gemm_kernels.exercises.ch09_checks import pipeline_correct_hint
    early = pipeline_correct_hint("wrong at 32x48x64: ...; 12 elements of C came out NaN "
                                  "because a tile was read from shared memory before its "
                                  "cp.async copies had landed: ...")
    race = pipeline_correct_hint("a data race on shared memory: a cp.async copy landed at "
                                 "the cp_async_wait of line 243 ...")
    ring = pipeline_correct_hint("wrong at 32x48x64 with alpha=1.0, beta=0.0: 1536 "
                                 "elements wrong")
    assert early == race and "groups committed" in early and "ws" not in early
    assert "into stage ws" in ring and "groups committed" not in ring



def test_the_nan_in_c_tells_a_late_copy_from_memory_never_written():
    """C's NaN carry the bits of the NaN they came from (x86 keeps a NaN's payload
    through products and sums): the emulation's in-flight NaN, or the block's poison."""
    import numpy as np
    out = np.ones((4, 4), np.float32)
    bits = out.view(np.uint32)
    assert cpu_step.cp_async_words(out, "") == ""
    bits[0, :3] = cpu_step.IN_FLIGHT_BITS
    late = cpu_step.cp_async_words(out, "cp.async note: 5 copies committed but never waited "
                                        "for, 0 never committed, when their blocks ended\n")
    assert late.startswith("3 elements of C came out NaN because a tile was read") and \
        "cp_async_wait<count>()" in late and "5 cp.async copies had been committed but " \
        "never waited for" in late and "never been committed" not in late, late
    bits[0, :3] = cpu_step.POISON_BITS | 0x80000000           # the sign does not matter
    never = cpu_step.cp_async_words(out, "")
    assert never.startswith("3 elements of C came out NaN because shared memory was read "
                            "that no copy had written") and "cp_async_wait" not in never, never


@needs_cxx
def test_a_copy_into_the_stage_being_read_is_a_race_at_the_copy():
    ok, detail = on_cpu(changed("if constexpr (HOIST) issue_next(ws);",
                                "if constexpr (HOIST) issue_next(rs);"))
    assert ok is False and "a cp.async copy was issued at line" in detail \
        and "into a place that another thread reads" in detail, detail
