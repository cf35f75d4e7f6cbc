"""Chapter 08's exercise (the order of a double-buffered step): the skeleton compiles and
is refused, the solution passes every step this machine can run, wrong orders are refused
by the static check, a missing barrier and a store into the wrong stage on a GPU; and
the racecheck reading of compute-sanitizer's output."""
import pytest

from gemm_kernels.exercises.ch08_checks import step_order
from gemm_kernels.exercises.gpu_step import RACECHECK_SHAPE, race_report, sanitizer
from exercise_helpers import (FAIL, PASS, assert_right_and_timed, grade, refused_as_wrong,
                              solution, static_verdict)
from gpu import needs_gpu

NAME = "08_double_buffer"
FETCH = ("        if (more)\n            fetch_tiles<BM, BN, BK, NT, VEC>(ra, rb, A, B, M, N, K, "
         "row0, col0, (tile + 1) * BK);\n")
COMPUTE = "        compute_stage<BM, BN, BK, TM, TN>(As[cur], Bs[cur], tr, tc, acc);\n"
STORE = "        if (more) store_tiles<BM, BN, BK, NT, VEC>(ra, rb, As[cur ^ 1], Bs[cur ^ 1]);\n"
LOOP_BARRIER = STORE + "        __syncthreads();\n"


def test_loads_after_the_compute_are_refused_without_a_gpu():
    """No overlap: the warp computes, then waits for its loads."""
    src = solution(NAME)
    assert FETCH + COMPUTE in src
    v = static_verdict(NAME, src.replace(FETCH + COMPUTE, COMPUTE + FETCH))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "loads the next tile after compute_stage" \
        in v["static"][1], v


def test_store_before_the_compute_is_refused_without_a_gpu():
    src = solution(NAME)
    assert COMPUTE + STORE in src
    v = static_verdict(NAME, src.replace(COMPUTE + STORE, STORE + COMPUTE))
    assert v["static"][0] == FAIL and "stores the next tile before compute_stage" \
        in v["static"][1], v


def test_no_barrier_at_all_is_refused_by_the_sass_check():
    v = static_verdict(NAME, solution(NAME).replace("__syncthreads();", ""))
    assert v["static"][0] == FAIL and "no BAR.SYNC" in v["static"][1], v


def test_step_order_accepts_the_order_and_ignores_comments():
    body = "for (int tile = 0; tile < tiles; ++tile) {\n" + FETCH + COMPUTE + STORE + "}\n"
    assert step_order(body) == []
    commented = body.replace(COMPUTE, "        // compute_stage<...> comes later\n" + COMPUTE)
    assert step_order(commented) == []
    assert "not there" in step_order("for (int k = 0; k < K; ++k) {}")[0]
    assert "does not call fetch_tiles" in step_order("for (int tile = 0;;) { }")[0]


# compute-sanitizer's racecheck output, as it prints a race and a clean run.
RACE = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at sgemm_double_buffer+0x1a30
=========     and Read access at sgemm_double_buffer+0x1c10 [2048 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"""
CLEAN = "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"


def test_race_report_names_the_race():
    race, note = race_report(RACE, 3)
    assert race and "Write access" in race and "Read access" in race and not note
    assert "x".join(map(str, RACECHECK_SHAPE)) in race and "__syncthreads()" in race


def test_race_report_of_a_clean_run_and_of_a_sanitizer_that_could_not_run():
    assert race_report(CLEAN, 0) == (None, "; racecheck at 33x65x17: no shared-memory hazard")
    race, note = race_report("cannot attach to the process", 1)
    assert race is None and "could not run" in note


WRONG = {
    # step t+1 reads the stage other warps are still storing (read after write)
    "no barrier at the end of a step": (LOOP_BARRIER, STORE),
    # the next tile lands in the stage being read, and the other one is never written
    "next tile stored into the current stage": ("As[cur ^ 1], Bs[cur ^ 1]", "As[cur], Bs[cur]"),
}


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    old, new = WRONG[what]
    assert static_verdict(NAME, solution(NAME).replace(old, new))["static"][0] == PASS
    detail = refused_as_wrong(NAME, old, new)
    if sanitizer() and what == "no barrier at the end of a step":
        assert "data race on shared memory" in detail, detail


@needs_gpu
def test_the_solution_reports_its_racecheck_on_a_gpu():
    r = grade(NAME, solution(NAME), gpu=True)
    assert_right_and_timed(r)
    correct = next(s for s in r.steps if s.name == "correct")
    assert ("no shared-memory hazard" if sanitizer() else "not available") in correct.detail
