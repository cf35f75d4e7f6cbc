"""Chapter 08's exercise (a double buffer whose loads stay in flight): the static step
reads the compiled loop, so the chapter's own kernel (loads sunk to the store) is
refused, and so are a missing barrier, a second barrier and a register count that costs
the second block; a store into the wrong stage passes the SASS and is refused by step 3
(on the CPU without a GPU, on a GPU with one).
Also the racecheck reading of compute-sanitizer's output."""
import pytest

from gemm_kernels.core import compiler
from gemm_kernels.exercises import cpu_step
from gemm_kernels.exercises.ch08_checks import loop_loads, prefetch_problems
from gemm_kernels.exercises.gpu_step import RACECHECK_SHAPE, race_report, sanitizer
from gemm_kernels.exercises.submission import submission_kernel
from exercise_helpers import (FAIL, PASS, assert_right_and_timed, grade, refused_as_wrong,
                              solution, static_verdict, status)
from gpu import needs_gpu

NAME = "08_double_buffer"
PARAMS = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
FETCH = ("        fetch_tiles<BM, BN, BK, NT, VEC>(ra, rb, A, B, M, N, K, row0, col0, "
         "(tile + 1) * BK);\n")
COMPUTE = "        compute_stage<BM, BN, BK, TM, TN>(As[cur], Bs[cur], tr, tc, acc);\n"
STORE = "        store_tiles<BM, BN, BK, NT, VEC>(ra, rb, As[cur ^ 1], Bs[cur ^ 1]);\n"
LOOP_BARRIER = STORE + "        __syncthreads();\n"
PROLOGUE_BARRIER = "As[0], Bs[0]);\n    __syncthreads();\n"
LAUNCH_BOUNDS = "__launch_bounds__((BM / TM) * (BN / TN), 2)"


def _guarded(src: str) -> str:
    """The solution written as the chapter's kernel: fetch and store under if (more)."""
    assert FETCH in src and STORE in src
    return (src.replace(FETCH, "        if (tile + 1 < tiles)\n    " + FETCH)
               .replace(STORE, "        if (tile + 1 < tiles)\n    " + STORE))


def test_the_chapters_own_loop_is_refused_for_its_sunk_loads():
    """Correct, one barrier, 128 registers: only the loads' position fails it."""
    v = static_verdict(NAME, _guarded(solution(NAME)))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "not in flight" in v["static"][1], v
    assert f"ptxas installed here ({compiler.ptxas_version()}) schedules as the chapter's" \
        in v["static"][1], v
    assert "fails the quarter-step check" in v["static"][1], v
    assert "registers" not in v["static"][1] and "__syncthreads" not in v["static"][1], v
    # the strip is the feedback; the cure (the branch, the same work in every step) is
    # the student's to find, and the hint points to the section that finds it after
    assert "an if around" not in v["static"][1] and "same work" not in v["static"][1], v
    report = grade(NAME, _guarded(solution(NAME)), gpu=False, emulate=False)
    hint = next(st.hint for st in report.steps if st.name == "static")
    assert "Why the loads sank" in hint and "if (more)" not in hint, hint


def test_a_pass_prints_how_long_the_loads_stay_in_flight():
    """The static step's pass line carries the measured number, so the student need not
    look it up in the chapter."""
    from gemm_kernels.notebook.ch08_prefetch import worked_answer_note
    v = static_verdict(NAME, solution(NAME))
    assert v["static"][0] == PASS, v
    assert "your loads are in flight for " in v["static"][1], v
    assert "of the step's 512 FFMAs (passes the quarter-step check: 128 or more)" \
        in v["static"][1], v
    # the same number as the chapter's note on the worked answer
    count = v["static"][1].split("in flight for ")[1].split(" ")[0]
    assert f"in flight for {count} of the step's 512" in worked_answer_note()


def test_source_order_decides_nothing_the_compiler_hoists_the_loads():
    """Fetch written after the compute: no branch, so ptxas still issues the loads early
    and the check (which reads the SASS, not the source) accepts it."""
    src = solution(NAME)
    assert FETCH + COMPUTE in src
    v = static_verdict(NAME, src.replace(FETCH + COMPUTE, COMPUTE + FETCH))
    assert v["static"][0] == PASS, v


def test_without_the_second_launch_bound_the_registers_cost_the_second_block():
    src = solution(NAME)
    assert LAUNCH_BOUNDS in src
    v = static_verdict(NAME, src.replace(LAUNCH_BOUNDS, "__launch_bounds__((BM / TM) * (BN / TN))"))
    assert v["static"][0] == FAIL and "more than the 128" in v["static"][1], v


def test_barriers_are_counted_in_the_sass():
    src = solution(NAME)
    assert LOOP_BARRIER in src and PROLOGUE_BARRIER in src
    none = static_verdict(NAME, src.replace(LOOP_BARRIER, STORE))
    assert none["static"][0] == FAIL and "no __syncthreads() in the compiled K loop" \
        in none["static"][1], none
    two = static_verdict(NAME, src.replace(STORE, "        __syncthreads();\n" + STORE))
    assert two["static"][0] == FAIL and "2 __syncthreads() per step" in two["static"][1], two
    # a second barrier is safe: the message says the exercise, not the kernel, is the limit
    assert "is not wrong" in two["static"][1] and "this exercise asks for one" in two["static"][1]
    pro = static_verdict(NAME, src.replace(PROLOGUE_BARRIER, "As[0], Bs[0]);\n"))
    assert pro["static"][0] == FAIL and "between the prologue and the K loop" \
        in pro["static"][1], pro


def test_loop_loads_measures_the_distance_to_the_store():
    k = submission_kernel(NAME, "double_buffer", solution(NAME))
    lp = loop_loads(compiler.sass(k, PARAMS))
    assert lp.ffma == 8 * 8 * 8 and lp.barriers == 1 and lp.barriers_before >= 1
    assert lp.loads and all(ld.use is not None for ld in lp.loads)
    assert lp.fewest >= lp.needed == lp.ffma // 4
    assert prefetch_problems(compiler.sass(k, PARAMS)) == []


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100"])
def test_the_solution_keeps_its_loads_in_flight_on_every_arch(arch):
    """Colab's T4 to the B200: the solution is within 128 registers without spills and its
    loads stay in flight; the chapter's loop is refused there too. (On sm_120, ptxas 12.9
    spills 8 bytes at 128 registers for this loop: an RTX 50 student's grade says so.)"""
    k = submission_kernel(NAME, "double_buffer", solution(NAME))
    res = compiler.resources(k, PARAMS, arch)
    assert res["registers"] <= 128 and not res["spill_stores"], res
    assert prefetch_problems(compiler.sass(k, PARAMS, arch)) == []
    sunk = submission_kernel(NAME, "double_buffer", _guarded(solution(NAME)))
    assert any("not in flight" in p for p in prefetch_problems(compiler.sass(sunk, PARAMS, arch)))


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


# The next tile lands in the stage being read (a race), and the other stage is never
# written: the SASS looks like the solution's, so only a run can refuse it.
WRONG_STAGE = ("As[cur ^ 1], Bs[cur ^ 1]", "As[cur], Bs[cur]")


def test_a_store_into_the_stage_being_read_passes_the_sass():
    old, new = WRONG_STAGE
    assert static_verdict(NAME, solution(NAME).replace(old, new))["static"][0] == PASS


@needs_gpu
def test_a_store_into_the_stage_being_read_is_refused_on_a_gpu():
    refused_as_wrong(NAME, *WRONG_STAGE)


@needs_gpu
def test_the_solution_reports_its_racecheck_on_a_gpu():
    r = grade(NAME, solution(NAME), gpu=True)
    assert_right_and_timed(r)
    correct = next(s for s in r.steps if s.name == "correct")
    assert ("no shared-memory hazard" if sanitizer() else "not available") in correct.detail


needs_cxx = pytest.mark.skipif(cpu_step.host_compiler() is None,
                               reason="step 3 on the CPU needs a host C++ compiler")


@needs_cxx
def test_without_a_gpu_the_solution_is_right_and_the_wrong_stage_a_race():
    """Step 3 on the CPU: the solution passes it, the store into the stage being read
    (which passes the SASS) is reported as a race on the shared tile."""
    ok = status(grade(NAME, solution(NAME), gpu=False))
    assert ok["correct"][0] == PASS, ok
    old, new = WRONG_STAGE
    bad = status(grade(NAME, solution(NAME).replace(old, new), gpu=False))
    assert bad["static"][0] == PASS and bad["correct"][0] == FAIL, bad
    assert "data race" in bad["correct"][1], bad


def test_a_peeled_loop_is_another_answer():
    """The last tile's compute after a loop over the others, fetch and store in every
    step: the grader takes it (the exercise's K loop is the student's to shape)."""
    from gemm_kernels.notebook.ch08_prefetch import with_k_loop
    src = with_k_loop(solution(NAME))
    assert "tile < tiles - 1" in src and src.count("for (int tile = 0;") == 1
    v = static_verdict(NAME, src)
    assert v["static"][0] == PASS, v


@needs_cxx
def test_the_peeled_loop_is_right_on_the_cpu():
    from gemm_kernels.notebook.ch08_prefetch import with_k_loop
    v = status(grade(NAME, with_k_loop(solution(NAME)), gpu=False))
    assert v["correct"][0] == PASS, v


def test_in_flight_words_say_the_count_and_the_side_of_the_bar():
    """One wording of 'in flight' for the chapter, its solution and the grader."""
    from gemm_kernels.exercises.ch08_checks import LoopLoads, Load, in_flight_words
    short = LoopLoads(100, 1024, 1, 1, (Load(0, 5, 163),))
    long_ = LoopLoads(100, 512, 1, 1, (Load(0, 5, 262),))
    assert in_flight_words(short) == ("in flight for 163 of the step's 1,024 FFMAs (fails "
                                      "the quarter-step check: 256 or more)")
    assert "262 of the step's 512 FFMAs (passes the quarter-step check: 128 or more)" \
        in in_flight_words(long_)
    assert in_flight_words(LoopLoads(10, 8, 1, 1, ())) == "no global load used in the loop"


def test_a_spill_in_the_loop_is_named_as_register_pressure(monkeypatch):
    """A spill (STL) at the register cap gets advice about registers, not arrays."""
    import gemm_kernels.exercises.ch08_checks as ch
    monkeypatch.setattr(ch, "loop_loads", lambda sass: ch.LoopLoads(10, 512, 1, 1,
                                                                      (ch.Load(0, 5, 300),)))
    problems = prefetch_problems("/*0010*/  STL [R1], R2 ;")
    assert len(problems) == 1 and "register pressure" in problems[0]
    # the generic spill line names arrays: this one says which of the two causes is likely
    assert "Of the two causes a spill can have" in problems[0], problems
    assert prefetch_problems("/*0010*/  STS [R1], R2 ;") == []


def test_a_sunk_loop_report_draws_the_students_own_loop():
    """The refusal shows where the student's own LDGs sit: a text loop strip with its
    loads at the end of the trip, and per load the FFMAs before it and before its use."""
    msg = static_verdict(NAME, _guarded(solution(NAME)))["static"][1]
    assert "your compiled loop, one trip" in msg, msg
    strip = msg.split("|")[1]
    assert "L" in strip and strip.index("L") > len(strip) * 3 // 4, strip
    assert "global load 1: issued after" in msg and "FFMAs later" in msg, msg


def test_loop_strip_text_places_loads_and_uses():
    from gemm_kernels.exercises.ch08_checks import Load, LoopLoads, loop_strip_text
    text = loop_strip_text(LoopLoads(100, 512, 1, 1, (Load(10, 90, 300, 20),)), width=10)
    assert text.splitlines()[0].endswith("|-L-------u|"), text
    assert "issued after 20 of the step's 512 FFMAs, first used 300 FFMAs later" in text
    assert loop_strip_text(LoopLoads(100, 512, 1, 1, ())) == ""


def test_a_race_in_a_helper_is_traced_to_the_students_calls():
    """The race checker names the helpers' lines; the hint names the helpers, and so the
    calls in the student's K loop that led there."""
    from gemm_kernels.exercises.ch08_checks import helpers_at, race_hint
    detail = ("a data race on the shared array As between line 95 and line 75 of your "
              "cell: two threads touched the same element")
    assert helpers_at(detail) == [(95, "compute_stage"), (75, "store_tiles")]
    hint = race_hint(detail)
    assert hint.startswith("line 95 is in compute_stage and line 75 is in store_tiles")
    assert "your calls of compute_stage(...) and store_tiles(...) in the K loop" in hint
    # a line of the kernel itself is the student's own: no helper named
    assert helpers_at("a data race between line 170 and line 171 of your cell") == []
    assert race_hint("2145 elements wrong").startswith("wrong numbers with no race")


@needs_cxx
def test_the_wrong_stage_race_hint_names_the_helpers():
    old, new = WRONG_STAGE
    report = grade(NAME, solution(NAME).replace(old, new), gpu=False)
    step = next(s for s in report.steps if s.name == "correct")
    assert "data race" in step.detail, step.detail
    assert "(the given helpers): the race comes from your call" in step.hint, step.hint
