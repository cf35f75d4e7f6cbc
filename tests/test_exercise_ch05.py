"""Chapter 05's exercise: the skeleton compiles and is refused, the solution passes every
step this machine can run, typical mistakes are refused with the right message (a mapping
whose warps pay more shared-memory wavefronts, one that leaves outputs to no thread, one
whose stores of C are scattered, a loop the compiler cannot unroll), and what the
compiler makes equal is accepted (the dot-product order of the loops); the SASS reading
of the shared-load check, on hand-written SASS."""
import pytest

from gemm_kernels.exercises.ch05_checks import (between_barriers, load_ratio,
                                                mapping_expressions, mapping_problems,
                                                opcodes)
from exercise_helpers import FAIL, PASS, first_failure, grade, solution, static_verdict
from gpu import needs_gpu

NAME = "05_tile_1d"
PARAMS = {"BM": 64, "BN": 64, "BK": 16, "TM": 16}
TC, TR = "tc = t % BN;", "tr = t / BN;"
LOOP = """#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k][tc];
#pragma unroll
            for (int i = 0; i < TM; ++i)
                acc[i] += As[tr * TM + i][k] * b;
        }"""


def _with_loop(loop):
    src = solution(NAME)
    assert LOOP in src
    return src.replace(LOOP, loop)


def _with_mapping(tc, tr):
    src = solution(NAME)
    assert src.count(TC) == 1 and src.count(TR) == 1
    return src.replace(TC, f"tc = {tc};").replace(TR, f"tr = {tr};")


def test_the_dot_product_order_passes_it_compiles_to_the_same_loads():
    """i outside, k inside, both unrolled: ptxas keeps Bs[k][tc] in a register by itself,
    so the order is not what the exercise grades (the chapter shows the SASS)."""
    v = static_verdict(NAME, _with_loop("""#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int k = 0; k < BK; ++k)
                acc[i] += As[tr * TM + i][k] * Bs[k][tc];"""))
    assert v["static"][0] == PASS, v


def test_threads_down_the_column_are_refused_by_the_bank_check():
    v = static_verdict(NAME, _with_mapping("t / (BM / TM)", "t % (BM / TM)"))
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert "costs warp 0 1,040 shared-memory wavefronts" in v["static"][1], v
    assert "more than the 144" in v["static"][1], v
    assert "4 different row groups" in v["static"][1], v


def test_a_mapping_that_leaves_outputs_to_no_thread_is_refused():
    v = static_verdict(NAME, _with_mapping("t % 32", "t / 32 % (BM / TM)"))
    assert v["static"][0] == FAIL and "threads 0 and 128 both get tc = 0, tr = 0" in v["static"][1], v
    v = static_verdict(NAME, _with_mapping("t % 32", "t / 32"))
    assert v["static"][0] == FAIL and "outside the tile" in v["static"][1], v


@pytest.mark.parametrize("tc, tr, says", [
    ("t % BM", "t / BM", "thread 64 gets tc = 0, tr = 2, outside the tile"),
    ("t % 64", "t / 64", "thread 128 gets tc = 0, tr = 2, outside the tile"),
])
def test_a_mapping_right_only_at_the_square_tile_is_refused(tc, tr, says):
    """BM where BN belongs, or the default's 64 written as a number, covers the graded
    64 x 64 tile and passes its bank check; at a non-square tile of the sweep it leaves
    outputs to no thread, and step 2 says so with that tile."""
    v = static_verdict(NAME, _with_mapping(tc, tr))
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    detail = " ".join(v["static"][1].split())
    assert "at BM = 32, BN = 128, BK = 16, TM = 16 (256 threads)" in detail, detail
    assert says in detail, detail


def test_the_chapters_mapping_covers_the_non_square_tile():
    from gemm_kernels.exercises.ch05_checks import other_tile_problems
    assert other_tile_problems("t % BN", "t / BN") == []
    # one row group per half-warp, written in BN, holds there too
    assert other_tile_problems("t % 16 + (t / 32) * 16 % BN",
                               "(t / 16) % 2 + (t / 32) * 16 / BN * 2") == []


def test_each_half_warp_may_broadcast_its_own_row_group():
    """A 128-bit load's half-warps are served apart: one row group per half-warp costs
    the same 144 wavefronts, and passes the static step."""
    v = static_verdict(NAME, _with_mapping("t % 16 + (t / 32) * 16 % BN",
                                           "(t / 16) % 2 + (t / 32) * 16 / BN * 2"))
    assert v["static"][0] == PASS, v


def test_scattered_stores_of_c_are_refused_even_when_the_banks_are_fine():
    # lanes 0..31 get columns 0, 33, 2, 35, ...: conflict-free reads of B, 8 sectors a store
    assert mapping_problems("(t * 33) % 64", "t / 64", PARAMS) == [
        "a store of C by warp 0 touches 8 32-byte sectors where 4 would do: its 32 lanes "
        "should write 32 neighbouring columns of one row (chapter 02)"]


def test_a_conflicted_read_of_b_is_named():
    problems = mapping_problems("(t % 2) * 32 + (t / 2) % 32", "t / 64", PARAMS)
    assert "costs warp 0 160 shared-memory wavefronts" in problems[0]
    assert "the read of Bs[0][tc] (32-bit) in warp 0 costs 2 wavefronts where 1 would do" \
        in problems[1]


def test_the_mapping_lines_are_read_once_and_whole():
    src = solution(NAME)
    assert mapping_expressions(src) == ("t % BN", "t / BN")
    assert mapping_expressions(src.replace(TR, TR + " tr += 0;")).startswith(
        "tr is changed after its line")
    assert mapping_expressions(src.replace(TC, "")).startswith("no line `tc = <expression>;`")
    assert mapping_expressions(src.replace(TC, TC + " " + TC)).startswith("tc is assigned 2 times")
    assert "cannot evaluate" in mapping_problems("t % q", "t / BN", PARAMS)[0]


def test_a_dot_product_per_output_is_refused_by_the_shared_load_count():
    # k innermost and rolled: each product reads both operands from shared memory
    v = static_verdict(NAME, _with_loop("""#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll 1
            for (int k = 0; k < BK; ++k)
                acc[i] += As[tr * TM + i][k] * Bs[k][tc];"""))
    assert v["static"][0] == FAIL, v
    assert "2.00 per FFMA" in v["static"][1] and "no LDS.128" in v["static"][1], v


def test_a_rolled_i_loop_is_refused_for_its_local_memory():
    v = static_verdict(NAME, _with_loop(LOOP.replace(
        "#pragma unroll\n            for (int i", "#pragma unroll 1\n            for (int i")))
    assert v["static"][0] == FAIL and "bytes of stack" in v["static"][1], v


def _sass(loop, epilogue=("@!P0 FFMA",)):
    """nvdisasm-like text: `loop` between two barriers, then `epilogue`."""
    ops = ["BAR.SYNC.DEFER_BLOCKING", *loop, "BAR.SYNC.DEFER_BLOCKING", *epilogue, "EXIT"]
    return "".join(f"        /*{16 * i:04x}*/                   {op} R1, R2 ;\n"
                   for i, op in enumerate(ops))


def test_opcodes_skip_predicates_and_keep_modifiers():
    ops = opcodes(_sass(["LDS.128", "FFMA"]))
    assert ops == ["BAR.SYNC.DEFER_BLOCKING", "LDS.128", "FFMA", "BAR.SYNC.DEFER_BLOCKING",
                   "FFMA", "EXIT"]
    assert between_barriers(ops) == ["LDS.128", "FFMA"]


def test_load_ratio_of_a_register_cached_loop():
    # one B value and two LDS.128 of A for 8 FFMA; the epilogue's FFMA is left out
    assert load_ratio(_sass(["LDS.128", "LDS.128", "LDS"] + ["FFMA"] * 8)) == (3, 8)


def _rolled(body, label=".L_x_1"):
    """nvdisasm-like text with `body` a loop between two barriers that branches back to
    its start (addresses rising, as in a real listing)."""
    ops = ["BAR.SYNC.DEFER_BLOCKING", *body, f"@P0 BRA `({label})", "BAR.SYNC.DEFER_BLOCKING",
           "EXIT"]
    lines = [f"        /*{16 * i:04x}*/                   {op} R1, R2 ;" for i, op in enumerate(ops)]
    return "\n".join(lines[:1] + [f"{label}:"] + lines[1:]) + "\n"


def test_a_rolled_loop_of_products_without_shared_loads_is_named_not_counted():
    from gemm_kernels.exercises.ch05_checks import rolled_loops, rolled_products
    sass = _rolled(["LDL", "LDL", "FFMA", "STL"])
    assert rolled_loops(sass) == [["LDL", "LDL", "FFMA", "STL"]]
    said = rolled_products(sass)
    assert "1 loop the compiler kept rolled" in said and "2 local-memory loads" in said, said
    # a rolled loop that loads its own operands (the dot-product order) keeps its ratio
    assert rolled_products(_rolled(["LDS", "LDS", "FFMA"])) is None
    assert rolled_products(_sass(["LDS.128", "FFMA"])) is None


def test_load_ratio_of_a_dot_product_loop():
    # the negative control: both operands loaded for every FFMA
    assert load_ratio(_sass(["LDS", "LDS", "FFMA"] * 4)) == (8, 4)


@needs_gpu
@pytest.mark.parametrize("what,loop", [
    ("rows of A without the thread's offset",
     LOOP.replace("As[tr * TM + i][k]", "As[i][k]")),
    ("the first column of the tile skipped",
     LOOP.replace("for (int k = 0; k < BK; ++k)", "for (int k = 1; k < BK; ++k)")),
])
def test_wrong_products_are_refused_before_the_gpu_runs_them(what, loop):
    # step 2 follows every thread's products, so nothing wrong is launched on the GPU
    step, detail = first_failure(grade(NAME, _with_loop(loop), gpu=True))
    assert step == "static", (what, step, detail)




PRODUCT = "acc[i] += As[tr * TM + i][k] * b;"


def test_the_solutions_products_are_followed_and_pass():
    from gemm_kernels.exercises.ch05_checks import product_problems
    assert product_problems(solution(NAME), PARAMS) == []
    assert product_problems(_with_loop("""#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int k = 0; k < BK; ++k)
                acc[i] += As[tr * TM + i][k] * Bs[k][tc];"""), PARAMS) == []


@pytest.mark.parametrize("wrong, says", [
    ("acc[i] += As[tr + i][k] * b;",
     "output (row 16, column 0) of the C tile is acc[0] of thread t = 64 (tc = 0, tr = 1): "
     "at k = 0, i = 0 it adds As[tr + i][k] * Bs[k][tc] = As[1][0] * Bs[0][0], and the row "
     "of As is wrong there: that output needs row 16 of As and column 0 of Bs"),
    ("acc[i] += As[tr * TM + i][k] * Bs[k][tr];", "and the column of Bs is wrong there"),
    ("acc[i] += As[tr * TM + i][k] * Bs[i][tc];", "the k of As and of Bs (they differ)"),
])
def test_a_wrong_product_names_its_output_thread_and_what_it_needed(wrong, says):
    from gemm_kernels.exercises.ch05_checks import product_problems
    src = solution(NAME)
    assert PRODUCT in src
    problems = product_problems(src.replace(PRODUCT, wrong), PARAMS)
    assert problems and says in problems[0], problems
    # the solution's own line is not dictated
    assert "tr * TM + i" not in problems[0].split(" it adds ")[0], problems


def test_a_loop_that_misses_a_k_is_named():
    from gemm_kernels.exercises.ch05_checks import product_problems
    problems = product_problems(solution(NAME).replace("k < BK; ++k", "k < BK - 1; ++k"), PARAMS)
    assert problems == ["output (row 0, column 0) of the C tile is acc[0] of thread t = 0 "
                        "(tc = 0, tr = 0): its loop never adds the product of k = 15, while "
                        "the tiles hold BK = 16 values of k (0 .. 15) at each step"]


def test_the_wrong_product_is_refused_in_step_2_and_the_hints_do_not_give_the_line():
    from gemm_kernels.exercises.catalog import get
    v = static_verdict(NAME, solution(NAME).replace(PRODUCT, "acc[i] += As[i][k] * b;"))
    assert v["static"][0] == FAIL and "needs row 16 of As" in v["static"][1], v
    hints = " ".join(h if isinstance(h, str) else h("no LDS.128 in the SASS")
                     for h in get(NAME).hints.values())
    assert "As[tr*TM + i][k] * Bs[k][tc]" not in hints and "acc[i] +=" not in hints


def _static_hint(source):
    step = next(s for s in grade(NAME, source, gpu=False, emulate=False).steps
                if s.name == "static")
    assert step.status == FAIL, step
    return step.hint


def test_the_unroll_hint_comes_only_where_the_compiled_loop_is_at_fault():
    """The advice to unroll answers a failure of the SASS (no LDS.128, a rolled loop's
    spills), never a wrong mapping or a wrong product, which it would send the wrong way."""
    rolled = _with_loop(LOOP.replace("#pragma unroll\n            for (int i",
                                     "#pragma unroll 1\n            for (int i"))
    hint = _static_hint(rolled)
    assert "#pragma unroll" in hint
    # one reason per loop: only the i loop keeps acc[] in registers (appendix G)
    assert "unroll the i loop" in hint and "unroll the k loop" in hint and "both" not in hint
    assert _static_hint(_with_mapping("t / 16", "t % 16")) == ""
    assert _static_hint(solution(NAME).replace(PRODUCT, "acc[i] += As[i][k] * b;")) == ""
