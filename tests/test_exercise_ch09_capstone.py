"""Chapter 09's second exercise (one step of the capstone's cp.async pipeline): the
skeleton compiles and is refused, the solution passes every step this machine can run,
waits with the wrong count (or none) and a barrier before the wait are refused from the
source, and so are the classic race (the commit inside the request's if), a tile copied
into the stage being computed, a request past the end of K, a request bound off by one
either way, and source pointers that do not move on by one tile; a ring that does not move is refused on a
GPU (and on the CPU: test_cpu_step_cp_async.py); and the checks on their own."""
import pytest

from gemm_kernels.exercises.ch09_checks import hoist_advance, pipeline_requests, pipeline_wait
from exercise_helpers import (FAIL, PASS, refused_as_wrong, skeleton_cell, solution,
                              static_verdict)
from gpu import needs_gpu

NAME = "09_capstone_step"
WAIT = "cp_async_wait<STAGES - 2>();\n                __syncthreads();"
ISSUE = "if constexpr (HOIST) issue_next(ws);\n                    else                 " \
        "issue_tile(tile + STAGES - 1, ws);"
RING = "        rs = rs + 1 == STAGES ? 0 : rs + 1;\n        ws = ws + 1 == STAGES ? 0 : ws + 1;\n"


def with_wait(count: str) -> str:
    return solution(NAME).replace(WAIT, f"cp_async_wait<{count}>();\n                "
                                        "__syncthreads();")


def loop(step: str) -> str:
    return "for (int tile = 0; tile < tiles; ++tile) {\n" + step + "\n}\n"


def test_wait_for_everything_is_refused_without_a_gpu():
    """Right results, but every copy gets one step of compute to arrive in, not three."""
    src = with_wait("0")
    assert src != solution(NAME)
    v = static_verdict(NAME, src)
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "the overlap the stages buy is lost" in v["static"][1] \
        and "the tile requested in this iteration" in v["static"][1], v
    assert "STAGES-2" not in v["static"][1] and "STAGES - 2" not in v["static"][1], v


def test_one_group_too_many_in_flight_is_refused_as_a_race_without_a_gpu():
    v = static_verdict(NAME, with_wait("STAGES - 1"))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "(a race)" in v["static"][1] \
        and "at STAGES=4 lets up to 3 groups stay in flight" in v["static"][1], v
    assert "STAGES-2" not in v["static"][1] and "= 2 in flight" not in v["static"][1], v


def test_no_wait_at_all_is_refused_without_a_gpu():
    """A race the element-wise check cannot be relied on to see: each copy has
    STAGES - 1 steps of compute to land in, and usually does."""
    v = static_verdict(NAME, solution(NAME).replace(WAIT, "__syncthreads();"))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "no 'cp_async_wait<count>();' in the K loop" \
        in v["static"][1], v


def test_the_wait_count_check():
    assert pipeline_wait(loop("cp_async_commit(); cp_async_wait<STAGES - 2>(); "
                              "__syncthreads();")) == []
    # a literal 2 is right at STAGES = 4 only: at STAGES = 3 it is a race
    problems = pipeline_wait(loop("cp_async_commit(); cp_async_wait<2>(); __syncthreads();"))
    assert len(problems) == 1 and "at STAGES=3" in problems[0] and "race" in problems[0]
    problems = pipeline_wait(loop("cp_async_commit(); cp_async_wait<STAGES - 3>(); "
                                  "__syncthreads();"))
    assert len(problems) == 1 and "requested 1 iteration ago" in problems[0], problems
    assert "0 or more" in pipeline_wait(loop("cp_async_commit(); cp_async_wait<STAGES - 5>();"
                                             " __syncthreads();"))[0]


def test_the_order_and_form_of_the_step_are_checked():
    problems = pipeline_wait(loop("cp_async_commit(); __syncthreads(); "
                                  "cp_async_wait<STAGES - 2>();"))
    assert problems == [p for p in problems if "no __syncthreads() after the wait" in p] \
        and problems, problems
    problems = pipeline_wait(loop("cp_async_wait<STAGES - 2>(); __syncthreads();"))
    assert len(problems) == 1 and "no cp_async_commit()" in problems[0], problems
    # a wait in a comment, or outside the K loop, does not count
    problems = pipeline_wait("cp_async_wait<STAGES - 2>();\n" + loop(
        "cp_async_commit(); // cp_async_wait<STAGES - 2>();\n__syncthreads();"))
    assert len(problems) == 1 and "no 'cp_async_wait<count>();'" in problems[0], problems
    assert "cannot read the wait's count" in pipeline_wait(loop(
        "cp_async_commit(); cp_async_wait<min(STAGES, 2)>(); __syncthreads();"))[0]
    assert "is not there any more" in pipeline_wait("cp_async_wait<STAGES - 2>();")[0]
    # a count the check cannot read is named as such, not as a missing wait
    unread = pipeline_wait(loop("cp_async_commit(); "
                                "cp_async_wait<(STAGES >= 3 ? STAGES - 3 : 0)>(); __syncthreads();"))
    assert len(unread) == 1 and "cannot read the count of the wait" in unread[0], unread


REQUEST = ("if (tile + STAGES - 1 < tiles) {\n"
           "                    if constexpr (HOIST) issue_next(ws);\n"
           "                    else                 issue_tile(tile + STAGES - 1, ws);\n"
           "                }")
COMMIT = "cp_async_commit();\n                // END SOLUTION"
INSIDE = REQUEST[:-1] + "    cp_async_commit();\n                }"


def with_commit_inside_the_if(orelse: str = "") -> str:
    """The solution with its commit moved into the request's if (and `orelse` after it)."""
    src = solution(NAME)
    assert REQUEST in src and COMMIT in src
    return src.replace(COMMIT, "// END SOLUTION").replace(REQUEST, INSIDE + orelse)


def test_the_commit_inside_the_request_is_refused_as_a_race_without_a_gpu():
    """The known race: no empty groups at the end of K, so at STAGES = 4 and 8 tiles the
    wait of step 5 leaves tile 6 in flight. The wait's count alone is right."""
    src = with_commit_inside_the_if()
    assert pipeline_wait(src) == []
    v = static_verdict(NAME, src)
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "sits inside 'if (tile + STAGES - 1 < tiles)'" \
        in v["static"][1] and "(a race" in v["static"][1], v


def test_a_commit_in_both_branches_keeps_one_group_per_step():
    src = with_commit_inside_the_if(" else {\n                    cp_async_commit();\n"
                                    "                }")
    assert pipeline_requests(src) == [], pipeline_requests(src)


def test_the_stage_of_the_request_is_checked_without_a_gpu():
    """The copies must go into ws, the stage finished in the step before: rs (this step's)
    is a race; an expression equal to ws in every step is fine."""
    rs = solution(NAME).replace(ISSUE, ISSUE.replace("(ws)", "(rs)").replace(", ws)", ", rs)"))
    v = static_verdict(NAME, rs)
    assert v["static"][0] == FAIL and \
        "the stage this iteration is computing on" in v["static"][1], v
    same = solution(NAME).replace("issue_next(ws)", "issue_next((tile + STAGES - 1) % STAGES)")
    assert pipeline_requests(same) == []
    other = pipeline_requests(solution(NAME).replace("issue_next(ws)", "issue_next(0)"))
    assert len(other) == 1 and "write the stage as ws" in other[0], other


def test_a_commit_at_every_k_and_a_request_past_k_are_refused():
    every_k = loop("for (int k = 0; k < BK; ++k) { if (k == 0) { if (tile + STAGES - 1 < "
                   "tiles) issue_next(ws); } cp_async_commit(); }")
    assert any("at every k" in p for p in pipeline_requests(every_k))
    once = loop("for (int k = 0; k < BK; ++k) { if (k == 0) { if (tile + STAGES - 1 < "
                "tiles) issue_next(ws); cp_async_commit(); } }")
    assert pipeline_requests(once) == []
    past = pipeline_requests(loop("issue_next(ws); cp_async_commit();"))
    assert len(past) == 1 and "read past the end of A and B" in past[0], past


GUARD = "if (tile + STAGES - 1 < tiles) {"


@pytest.mark.parametrize("guard, says", [
    # the last tile is never requested: its stage keeps an older tile, wrong results
    ("tile + STAGES < tiles", "does not request tile 7 at STAGES=4 with 8 tiles, iteration 4"),
    # a tile past the end of K: issue_next copies it unchecked, past the end of A and B
    ("tile + STAGES - 2 < tiles", "requests tile 8 at STAGES=4 with 8 tiles, iteration 5"),
    ("tile + STAGES - 1 <= tiles", "requests tile 8 at STAGES=4 with 8 tiles, iteration 5"),
])
def test_a_request_bound_off_by_one_is_refused_without_a_gpu(guard, says):
    """Each passes every other static check; the guard itself is read and evaluated for
    every K of up to 12 tiles, where step 3's runs see only a few."""
    src = solution(NAME)
    assert src.count(GUARD) == 1
    v = static_verdict(NAME, src.replace(GUARD, f"if ({guard}) {{"))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and says in v["static"][1], v
    assert ("read past the end of A and B" if "requests" in says else
            "the results come out wrong") in v["static"][1], v
    assert "request exactly when" not in v["static"][1], v    # the answer is not given


@pytest.mark.parametrize("guard", ["tile + STAGES <= tiles", "tiles > tile + STAGES - 1",
                                   "tile < tiles - (STAGES - 1)", "!(tile + STAGES - 1 >= tiles)",
                                   "(tile + STAGES - 1) * BK < K",
                                   "tile >= 0 && tile + STAGES - 1 < tiles"])
def test_any_guard_with_the_same_truth_table_passes(guard):
    assert pipeline_requests(loop(f"if ({guard}) issue_next(ws); cp_async_commit();")) == []


@pytest.mark.parametrize("step", [
    "const int nt = tile + STAGES - 1; if (nt <= tiles - 1) issue_next(ws); cp_async_commit();",
    "const int nt = tile + STAGES - 1; const bool more = nt < tiles; "
    "if (more) issue_tile(nt, ws); cp_async_commit();",
    "int ahead = STAGES - 1; if (tile + ahead < tiles) { issue_next(ws); } cp_async_commit();"])
def test_a_guard_written_with_locals_set_once_passes(step):
    """A correct request whose condition names a local (set once from tile, tiles and
    STAGES) is read through that local, in the whole solution too."""
    assert pipeline_requests(loop(step)) == []
    src = solution(NAME).replace(GUARD, "const int nt = tile + STAGES - 1;\n"
                                        "                if (nt <= tiles - 1) {")
    assert src != solution(NAME)
    assert static_verdict(NAME, src)["static"][0] == PASS


def test_locals_do_not_hide_a_wrong_request():
    """Through a local, an off-by-one guard, a commit inside the request's if and a
    local written twice are still refused."""
    short = pipeline_requests(loop("const bool more = tile + STAGES < tiles; "
                                   "if (more) issue_next(ws); cp_async_commit();"))
    assert len(short) == 1 and "'if (more)' does not request tile 7" in short[0], short
    inside = pipeline_requests(loop("const bool more = tile + STAGES - 1 < tiles; "
                                    "if (more) { issue_next(ws); cp_async_commit(); }"))
    assert len(inside) == 1 and "sits inside 'if (more)'" in inside[0], inside
    twice = pipeline_requests(loop("int nt = tile + STAGES - 1; nt += 1; "
                                   "if (nt < tiles) issue_next(ws); cp_async_commit();"))
    assert len(twice) == 1 and "cannot read the condition of the request" in twice[0] \
        and "declared once" in twice[0], twice


def test_the_hint_of_a_request_is_about_the_request():
    """An unreadable or off-by-one condition is not answered with the wait's or the
    pointers' hint."""
    from gemm_kernels.exercises.ch09_checks import pipeline_hint
    unread = pipeline_hint(pipeline_requests(loop("if (min(tile, 3) < tiles) issue_next(ws);"
                                                  " cp_async_commit();"))[0])
    assert "comparison of tile, tiles and STAGES" in unread and "groups" not in unread \
        and "source pointer" not in unread, unread
    off = pipeline_hint(pipeline_requests(loop("if (tile + STAGES - 2 < tiles) "
                                               "issue_next(ws); cp_async_commit();"))[0])
    assert "does K have that tile" in off and "source pointer" not in off, off


def test_a_guard_it_cannot_read_or_a_request_in_the_else_branch():
    unread = pipeline_requests(loop("if (min(tile, 3) < tiles) issue_next(ws); "
                                    "cp_async_commit();"))
    assert len(unread) == 1 and "cannot read the condition of the request" in unread[0]
    flipped = "if (tile + STAGES - 1 >= tiles) {} else issue_next(ws); cp_async_commit();"
    assert pipeline_requests(loop(flipped)) == []
    wrong = pipeline_requests(loop("if (tile + STAGES - 1 < tiles) {} else issue_next(ws); "
                                   "cp_async_commit();"))
    assert len(wrong) == 1 and \
        "'if (!(tile + STAGES - 1 < tiles))' does not request tile 3" in wrong[0], wrong


MOVES = ("a_src[r] += BK;", "b_src += BK * N;")


def test_the_source_pointers_must_move_on_by_one_tile():
    src = solution(NAME)
    assert all(m in src for m in MOVES) and hoist_advance(src) == []
    assert hoist_advance(src.replace("b_src += BK * N;", "b_src = b_src + BK * N;")) == []
    assert hoist_advance(src.replace("a_src[r] += BK;", "a_src[r] = BK + a_src[r];")) == []
    short = hoist_advance(src.replace("b_src += BK * N;", "b_src += BK;"))
    assert len(short) == 1 and "0 rows and 16 floats down B" in short[0], short
    assert "BK * N" not in short[0] and "65536" not in short[0], short
    wrong = hoist_advance(src.replace("a_src[r] += BK;", "a_src[r] += 8;"))
    assert len(wrong) == 1 and "a_src moves on by 8 floats" in wrong[0], wrong
    missing = hoist_advance(src.replace("a_src[r] += BK;", ";"))
    assert len(missing) == 1 and "does not move a_src on" in missing[0], missing
    v = static_verdict(NAME, src.replace("b_src += BK * N;", "b_src += N;"))
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v


def lambda_body(*lines: str) -> str:
    return "auto issue_next = [&](int stage) {\n" + "\n".join(lines) + "\n};\n"


A_COPY = "for (int i = 0; i < A_PER; ++i) cp_async_4(ad, a_src[i % A_ROWS] + 8 * (i / A_ROWS));"
B_COPY = "for (int i = 0; i < B_PER; ++i) cp_async_16(bd, b_src + i * b_rows);"
A_MOVE = "for (int r = 0; r < A_ROWS; ++r) a_src[r] += BK;"
B_MOVE = "b_src += BK * N;"


def test_the_pointers_move_after_the_copies_that_read_them_once_per_row():
    # the kernel's own order: A's pointers move between the A and the B copies
    assert hoist_advance(lambda_body(A_COPY, A_MOVE, B_COPY, B_MOVE)) == []
    early = hoist_advance(lambda_body(A_MOVE, A_COPY, B_COPY, B_MOVE))
    assert len(early) == 1 and "a_src moves on before the last copy that reads it" in early[0]
    rows = hoist_advance(lambda_body(A_COPY, B_COPY, A_MOVE.replace("A_ROWS", "A_PER"), B_MOVE))
    assert len(rows) == 1 and "runs to A_PER" in rows[0], rows
    looped = hoist_advance(lambda_body(A_COPY, B_COPY, A_MOVE, "for (int i = 0; i < 2; ++i) "
                                       + B_MOVE))
    assert len(looped) == 1 and "b_src moves on inside a loop" in looped[0], looped
    unrolled = [f"a_src[{r}] += BK;" for r in range(4)]
    assert hoist_advance(lambda_body(A_COPY, B_COPY, *unrolled, B_MOVE)) == []
    assert hoist_advance(lambda_body(A_COPY, B_COPY, *unrolled[:3], B_MOVE))
    assert "is not there any more" in hoist_advance("a_src[r] += BK;")[0]


WRONG = {
    # every step computes on stage 0 and copies into stage STAGES - 1
    "the ring does not move": (RING, ""),
}


@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_left_to_the_gpu_pass_the_static_step(what):
    # the ring's indices are never read as their first values (a forgotten move is a
    # wrong result, found on the GPU, not a request into the wrong stage)
    old, new = WRONG[what]
    assert static_verdict(NAME, solution(NAME).replace(old, new))["static"][0] == PASS


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    old, new = WRONG[what]
    assert static_verdict(NAME, solution(NAME).replace(old, new))["static"][0] == PASS
    refused_as_wrong(NAME, old, new)




def test_the_static_hint_answers_only_the_failure_it_follows():
    """A pointer stepped by BK gets the pointer hint alone; a wrong wait count the wait's;
    a commit inside the request's if the commit's (not all three run together)."""
    from gemm_kernels.exercises.grader import grade
    src = solution(NAME)

    def static_hint(source):
        return next(s.hint for s in grade(NAME, source, gpu=False, emulate=False).steps
                    if s.name == "static")

    pointer = static_hint(src.replace("b_src += BK * N;", "b_src += BK;"))
    assert "source pointer moves on" in pointer and "groups committed" not in pointer \
        and "one commit per iteration" not in pointer, pointer
    wait = static_hint(with_wait("STAGES - 1"))
    assert "groups committed" in wait and "source pointer" not in wait, wait
    commit = static_hint(with_commit_inside_the_if())
    assert "one commit per iteration" in commit and "source pointer" not in commit \
        and "groups committed" not in commit, commit


def test_the_untouched_skeleton_is_told_only_what_is_not_written():
    """Where the commit goes (every step, even an empty one) is the exercise's insight: the
    report of the skeleton names the lines to write and nothing else; the explanation
    comes with a wrong submission (the commit inside the request's if)."""
    from gemm_kernels.exercises.grader import grade
    static = next(s for s in grade(NAME, skeleton_cell(NAME), gpu=False, emulate=False).steps
                  if s.name == "static")
    assert static.status == FAIL and "YOUR CODE HERE" in static.detail, static
    said = static.detail + static.hint
    assert "commit" not in said and "empty" not in said and "wait" not in said, static
    wrong = static_verdict(NAME, with_commit_inside_the_if())["static"]
    assert wrong[0] == FAIL and "even" in wrong[1] + "".join(
        s.hint for s in grade(NAME, with_commit_inside_the_if(), gpu=False,
                              emulate=False).steps), wrong
