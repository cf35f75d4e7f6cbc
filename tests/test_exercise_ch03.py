"""Chapter 03's exercise: the skeleton compiles and is refused, the solution passes every
step this machine can run, typical mistakes are refused with the right message: a
missing barrier already by the static check of the SASS (a race a run may not show), a
copy or a read that goes down a column of a tile, or a copy that loads one element many
times, by the price of the copies read from the source; other wrong indices when the
kernel runs."""
import pytest

from exercise_helpers import (FAIL, PASS, refused_as_wrong, solution, static_verdict)
from gpu import needs_gpu

NAME = "03_tile_loop"
FIRST = "__syncthreads();               // the tiles are complete"
SECOND = "__syncthreads();               // everyone has read the tiles before the next copy"
STORE_B = "Bs[ty][tx] = (kb < K && col < N) ? B[kb * N + col] : 0.f;"
PRODUCT = "acc += As[ty][k] * Bs[k][tx];"


def test_solution_passes_the_static_steps_with_its_barriers():
    v = static_verdict(NAME, solution(NAME))
    assert v["compile"][0] == PASS and v["static"][0] == PASS, v
    assert "BAR.SYNC present" in v["static"][1], v


def test_an_early_return_before_the_barriers_is_named_without_a_gpu():
    """The most common tiled-kernel bug: threads outside C leave at the top of the step.
    Its numbers are wrong only at the edges, so the static step names the return."""
    src = solution(NAME)
    copy = "        const int ka = k0 + tx;"
    assert copy in src
    v = static_verdict(NAME, src.replace(copy, "        if (row >= M || col >= N) return;\n" + copy))
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    detail = " ".join(v["static"][1].split())
    assert "a `return` comes before a __syncthreads()" in detail, detail
    # a return after the last barrier is harmless and passes
    assert static_verdict(NAME, src.replace(SECOND, SECOND + "\n        if (K < 0) return;"))[
        "static"][0] == PASS


@pytest.mark.parametrize("guard, says", [
    ("if (row < M && col < N) {", "if (row < M && col < N)"),
    ("if (tx < BLOCK) {", "if (tx < BLOCK)"),
])
def test_a_barrier_under_a_condition_that_differs_between_threads_is_named(guard, says):
    """A __syncthreads() that only some threads reach is undefined (on a GPU it may hang
    rather than give wrong numbers): the static step names it and its condition, as it
    names an early return, before anything runs."""
    src = solution(NAME)
    assert PRODUCT in src and SECOND in src
    body = "#pragma unroll\n        for (int k = 0; k < BLOCK; ++k)\n            " + PRODUCT
    assert body in src
    bad = src.replace(body + "\n        " + SECOND,
                      guard + "\n" + body + "\n        " + SECOND + "\n        }")
    assert bad != src
    v = static_verdict(NAME, bad)
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    detail = " ".join(v["static"][1].split())
    assert "a __syncthreads() runs only under `" + says + "`" in detail, detail
    assert "differs between the threads of a block" in detail and "hang" in detail, detail


def test_a_barrier_under_a_condition_the_same_for_every_thread_passes():
    """A condition on the block's place or the sizes only (every thread of the block takes
    the same branch) is no divergent barrier."""
    from gemm_kernels.exercises.ch03_checks import divergent_barrier
    src = solution(NAME)
    assert divergent_barrier(src) == []
    guarded = src.replace(SECOND, "if (K > 0) {\n" + SECOND + "\n}")
    assert divergent_barrier(guarded) == []
    assert static_verdict(NAME, guarded)["static"][0] == PASS
    # the else of a thread-dependent if is as divergent as its if
    other = src.replace(SECOND, "if (ty == 0) { acc += 0.f; } else {\n" + SECOND + "\n}")
    assert "if (ty == 0)" in " ".join(divergent_barrier(other))


def test_the_edge_hint_asks_about_skipped_copies_and_barriers():
    from gemm_kernels.exercises.catalog import _tile_loop_correct_hint
    hint = _tile_loop_correct_hint("wrong at 7x13x5: 33 elements wrong; worst at (4, 0)")
    assert "skip their copies or a barrier" in hint


def test_no_barrier_at_all_is_refused_by_the_sass_check():
    src = solution(NAME)
    assert FIRST in src and SECOND in src
    v = static_verdict(NAME, src.replace(FIRST, "").replace(SECOND, ""))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "no BAR.SYNC in the SASS" in v["static"][1], v


def test_the_skeleton_is_refused_for_its_stub_not_for_its_barriers():
    from exercise_helpers import skeleton_cell
    v = static_verdict(NAME, skeleton_cell(NAME))
    assert v["static"][0] == FAIL and "YOUR CODE HERE" in v["static"][1], v
    assert "__syncthreads() in the compiled loop" not in v["static"][1], v


@pytest.mark.parametrize("which, gone", [("first", FIRST), ("second", SECOND)])
def test_one_missing_barrier_is_refused_without_a_gpu(which, gone):
    """Only one __syncthreads() per step: the BAR.SYNC presence check alone passed it."""
    src = solution(NAME)
    v = static_verdict(NAME, src.replace(gone, ""))
    assert v["compile"][0] == PASS, v
    assert v["static"][0] == FAIL and "1 __syncthreads() in the compiled loop where a step " \
        "needs two" in v["static"][1], (which, v)


def test_the_barrier_order_is_read_from_the_sass():
    from gemm_kernels.exercises.ch03_checks import barrier_problems
    def sass(*ops):
        return "".join(f"        /*{16 * i:04x}*/                   {op} ;\n" for i, op in enumerate(ops))
    assert barrier_problems(sass("STS [R1], R2", "BAR.SYNC.DEFER_BLOCKING 0x0",
                                 "LDS.128 R4, [R3]", "BAR.SYNC.DEFER_BLOCKING 0x0")) == []
    assert "no shared store (STS) before" in barrier_problems(sass(
        "BAR.SYNC.DEFER_BLOCKING 0x0", "STS [R1], R2", "LDS R4, [R3]",
        "BAR.SYNC.DEFER_BLOCKING 0x0"))[0]
    assert "no shared load (LDS) between" in barrier_problems(sass(
        "STS [R1], R2", "BAR.SYNC.DEFER_BLOCKING 0x0", "BAR.SYNC.DEFER_BLOCKING 0x0",
        "LDS R4, [R3]"))[0]


def _static_problem(old, new, src=None):
    src = solution(NAME) if src is None else src
    assert old in src, old
    v = static_verdict(NAME, src.replace(old, new))
    assert v["compile"][0] == PASS, v
    return v["static"]


def test_the_solutions_copies_are_priced_as_free():
    from gemm_kernels.exercises.ch03_checks import copy_problems
    assert copy_problems(solution(NAME), 32) == []


def test_a_tile_stored_down_a_column_is_refused_with_its_price():
    # stored and read transposed: the products are right, the store is 32-way conflicted
    src = solution(NAME).replace(STORE_B, STORE_B.replace("Bs[ty][tx]", "Bs[tx][ty]"))
    status, detail = _static_problem(PRODUCT, "acc += As[ty][k] * Bs[tx][k];", src)
    assert status == FAIL and "the store Bs[tx][ty] costs warp 0 32 wavefronts where 1 " \
        "would do" in detail, detail


def test_the_copy_without_the_threads_place_is_refused():
    status, detail = _static_problem("A[row * K + ka]", "A[row * K + k0]")
    assert status == FAIL and "load only 32 different elements of A" in detail, detail


def test_the_swapped_mapping_is_refused_for_its_loads_stores_and_reads():
    src = solution(NAME).replace("const int tx = threadIdx.x;", "const int tx = threadIdx.y;") \
        .replace("const int ty = threadIdx.y;", "const int ty = threadIdx.x;")
    v = static_verdict(NAME, src)
    detail = v["static"][1]
    assert v["static"][0] == FAIL, v
    for part in ("the load A[row * K + ka] touches 32 sectors", "the store As[ty][tx] costs",
                 "the read As[ty][k] costs warp 0 32 wavefronts"):
        assert part in detail, (part, detail)


def test_a_read_down_a_column_of_bs_is_refused_as_a_wrong_product_before_its_price():
    # Bs[tx][k] reads B transposed: a wrong product first, which is what the student
    # must fix; its 32-way conflict is not the point
    status, detail = _static_problem("acc += As[ty][k] * Bs[k][tx];",
                                     "acc += As[ty][k] * Bs[tx][k];")
    assert status == FAIL and "its product reads Bs[tx][k]" in detail, detail
    assert "costs" not in detail, detail


def test_a_costly_read_of_the_right_element_is_refused_with_its_price():
    from gemm_kernels.exercises.ch03_checks import copies_priced
    # both tiles stored and read transposed: every product right, every access conflicted
    src = solution(NAME).replace("As[ty][tx] =", "As[tx][ty] =").replace(
        "Bs[ty][tx] =", "Bs[tx][ty] =").replace(PRODUCT, "acc += As[k][ty] * Bs[tx][k];")
    problems = copies_priced(32)(src)
    assert problems and "costs warp 0 32 wavefronts" in problems[0], problems


@pytest.mark.parametrize("old, new", [
    ("A[row * K + ka]", "*(A + row * K + ka)"),                      # pointer arithmetic
    ("const int ka = k0 + tx;", "const int ka = (k0 + tx) < K ? k0 + tx : 0;"),
    ("""#pragma unroll
        for (int k = 0; k < BLOCK; ++k)
            acc += As[ty][k] * Bs[k][tx];""", "acc = tile_dot<BLOCK>(As, Bs, ty, tx, acc);"),
])
def test_what_the_price_check_cannot_read_it_leaves_alone(old, new):
    from gemm_kernels.exercises.ch03_checks import copy_problems
    src = solution(NAME)
    assert old in src
    assert copy_problems(src.replace(old, new), 32) == []


def test_padding_a_tile_makes_its_column_reads_free():
    from gemm_kernels.exercises.ch03_checks import copy_problems
    src = solution(NAME).replace("acc += As[ty][k] * Bs[k][tx];", "acc += As[ty][k] * Bs[tx][k];")
    assert copy_problems(src, 32)
    padded = src.replace("__shared__ float Bs[BLOCK][BLOCK];", "__shared__ float Bs[BLOCK][BLOCK + 1];")
    assert copy_problems(padded, 32) == []


# Typical wrong answers the price check cannot see, refused on a GPU by the element-wise
# check.
# wrong only in what they load from global memory: step 2 reads the shared tiles'
# products, not the loads' addresses, so step 3 on the GPU is the one that catches them
WRONG = {
    "the step's offset forgotten for B": ("const int kb = k0 + ty;", "const int kb = ty;"),
}


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    refused_as_wrong(NAME, *WRONG[what])





def test_the_solutions_products_are_those_of_each_threads_output():
    from gemm_kernels.exercises.ch03_checks import product_problems
    src = solution(NAME)
    assert product_problems(src, 32) == []
    # the k of the tile in another order is the same sum
    assert product_problems(src.replace(
        PRODUCT, "acc += As[ty][BLOCK - 1 - k] * Bs[BLOCK - 1 - k][tx];"), 32) == []


@pytest.mark.parametrize("wrong, says", [
    ("acc += As[k][tx] * Bs[ty][k];",
     "thread (tx = 0, ty = 0) computes C[32][32] (the check places the block at blockIdx "
     "(1, 1), at the step k0 = 0), but at k = 1 its product reads As[k][tx] = As[1][0], "
     "which holds A[33][0] (copied by thread (0, 1)); C[32][32] needs A[32][1] there, "
     "which the copies put in As[0][1]"),
    ("acc += As[ty][k] * Bs[k][ty];",
     "thread (tx = 1, ty = 0) computes C[32][33]"),
    ("acc += As[ty][k] * Bs[0][tx];",
     "reads Bs[0][tx] = Bs[0][0], which holds B[0][32] (copied by thread (0, 0)); "
     "C[32][32] needs B[1][32] there"),
])
def test_a_wrong_product_is_named_with_its_thread_and_the_element_it_needed(wrong, says):
    status, detail = _static_problem(PRODUCT, wrong)
    assert status == FAIL and says in detail, detail


def test_a_loop_that_stops_short_is_named_with_the_product_it_leaves_out():
    status, detail = _static_problem("k < BLOCK; ++k", "k < BLOCK - 1; ++k")
    assert status == FAIL and "its loop over k runs k = 0 .. 30: it never adds " \
        "A[32][31] * B[31][32]" in detail, detail


def test_a_wrong_copy_is_named_before_its_price():
    # A[ka * K + row] copies A transposed: uncoalesced, but above all the wrong element
    status, detail = _static_problem("A[row * K + ka]", "A[ka * K + row]")
    assert status == FAIL and detail.startswith("thread (tx = 0, ty = 0) computes C[32][32]")
    assert "which holds A[0][32]" in detail and "sectors" not in detail, detail


def test_a_copy_refusal_says_what_a_warp_should_do_and_where_the_block_was_placed():
    # the swapped mapping: right products, lanes down the columns of A
    status, detail = _static_problem("const int tx = threadIdx.x;\n    const int ty = threadIdx.y;",
                                     "const int tx = threadIdx.y;\n    const int ty = threadIdx.x;")
    assert status == FAIL and "a row of A is 4,096 floats long" in detail, detail
    assert "its 32 loads should be 32 neighbouring floats" in detail, detail


STORE_A = "As[ty][tx] = (row < M && ka < K) ? A[row * K + ka] : 0.f;"


@pytest.mark.parametrize("store", [
    "if (row < M && ka < K) As[ty][tx] = A[row * K + ka];",
    "if (row < M && ka < K) {\n            As[ty][tx] = A[row * K + ka];\n        }",
])
def test_a_store_without_its_zero_fill_is_named_in_step_2(store):
    """The edges are the one subtle part of the copy: a store skipped outside A leaves
    the previous step's element in the tile. Step 2 names that cause; step 3 would only
    see wrong numbers."""
    src = solution(NAME)
    assert STORE_A in src
    v = static_verdict(NAME, src.replace(STORE_A, store))
    assert v["static"][0] == FAIL, v
    assert "store into As runs only inside an if" in v["static"][1], v
    assert "Write 0.f where the element lies outside A" in v["static"][1], v


@pytest.mark.parametrize("store", [
    "if (row < M && ka < K) As[ty][tx] = A[row * K + ka]; else As[ty][tx] = 0.f;",
    "As[ty][tx] = 0.f;\n        if (row < M && ka < K) As[ty][tx] = A[row * K + ka];",
    "float a = 0.f;\n        if (row < M && ka < K) a = A[row * K + ka];\n        As[ty][tx] = a;",
])
def test_a_store_with_its_zero_fill_written_otherwise_is_not_refused(store):
    from gemm_kernels.exercises.ch03_checks import unfilled_edges
    from gemm_kernels.exercises.cexpr import code_only
    assert unfilled_edges(code_only(solution(NAME).replace(STORE_A, store))) == []


def test_the_step_3_hint_follows_the_failure_found():
    """One generic paragraph talked about 'worst at (r, c)' to a student whose message
    named a read outside A; each failure now gets its own question."""
    from gemm_kernels.exercises.catalog import _tile_loop_correct_hint as hint
    a = hint("a read of 4 bytes outside A, at line 31 of your cell (found by AddressSanitizer)")
    assert "copy from A" in a and "below M" in a and "below K" in a and "worst at" not in a
    b = hint("a read of 4 bytes outside B, at line 32 of your cell")
    assert "copy from B" in b and "below N" in b
    assert "__syncthreads()" in hint("a data race on shared memory")
    assert "C[r][c]" in hint("max |err|/bound 3.2, worst at (6, 12)")


def test_a_read_of_a_checked_on_its_row_only_gets_the_a_bounds_hint():
    src = solution(NAME)
    assert STORE_A in src
    from gemm_kernels.exercises.magic import submit
    r = submit(NAME, src.replace(STORE_A, "As[ty][tx] = (row < M) ? A[row * K + ka] : 0.f;"),
               gpu=False)
    step = {s.name: s for s in r.steps}["correct"]
    assert step.status == FAIL and "outside A" in step.detail, step
    assert "copy from A" in step.hint, step
