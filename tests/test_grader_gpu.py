"""The grader on a GPU: a kernel that hangs or writes through a wild pointer ends the
child process, not the one that graded it, which goes on launching kernels; the
solution of chapter 01 grades in seconds."""
import time


from gemm_kernels.exercises.catalog import get
from gemm_kernels.exercises.grader import FAIL, SKIPPED, grade, run_gpu_steps
from exercise_helpers import assert_right_and_timed, solution
from gpu import needs_gpu

pytestmark = needs_gpu

NAME = "01_index"
STORE = "C[row * N + col] = gemm_epilogue(acc, alpha, beta, &C[row * N + col]);"
# A loop that never ends and that no compiler may remove: clock64() reads a counter
# that starts at 0 and counts up, and each read is a side effect.
HANG = "while (clock64() >= 0) { }\n        " + STORE
# A store 1 TiB past C: no allocation lies there.
WILD = "C[row * N + col + (1LL << 38)] = acc;\n        " + STORE
TIME_LIMIT = 30        # the child's start (CuPy, NVRTC) takes seconds; the hang, forever


def parent_still_works():
    """A kernel launched and checked in this process after the child's end."""
    from gemm_kernels.measure.check import check
    r = check("naive", (33, 65, 17), alpha=1.5, beta=-0.5)
    assert r.ok, r.message


def submission(old, new):
    src = solution(NAME)
    assert old in src
    return src.replace(old, new)


def test_a_hanging_kernel_times_out_and_the_parent_goes_on():
    start = time.perf_counter()
    steps = run_gpu_steps(get(NAME), submission(STORE, HANG), time_limit=TIME_LIMIT)
    took = time.perf_counter() - start
    print(f"\nhanging kernel ended after {took:.1f} s (limit {TIME_LIMIT} s)")
    assert [(s.name, s.status) for s in steps] == [("correct", FAIL), ("speed", SKIPPED)]
    assert "timed out" in steps[0].detail, steps[0].detail
    assert took < TIME_LIMIT + 15          # killed at the limit, not waited for
    parent_still_works()


def test_a_wild_store_is_refused_and_the_parent_goes_on():
    steps = run_gpu_steps(get(NAME), submission(STORE, WILD), time_limit=120)
    assert steps[0].name == "correct" and steps[0].status == FAIL, steps
    detail = steps[0].detail
    assert detail.startswith("illegal address") or "outside" in detail \
        or "wrong" in detail, detail
    parent_still_works()


def test_the_solution_grades_in_seconds():
    """All four steps run; the grading time is printed (asked: under 10 s on the GPU)."""
    assert_right_and_timed(grade(NAME, solution(NAME), gpu=True))
