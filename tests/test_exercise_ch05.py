"""Chapter 05's exercise: the skeleton compiles and is refused, the solution passes every
step this machine can run, typical mistakes are refused with the right message; the
SASS reading of the shared-load check, on hand-written SASS."""
import pytest

from gemm_kernels.exercises.ch05_checks import between_barriers, load_ratio, opcodes
from exercise_helpers import FAIL, first_failure, grade, solution, static_verdict
from gpu import needs_gpu

NAME = "05_tile_1d"
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
def test_wrong_answers_are_refused_on_a_gpu(what, loop):
    step, detail = first_failure(grade(NAME, _with_loop(loop), gpu=True))
    assert step == "correct", (what, step, detail)


