"""Chapter 15's exercise, the mbarrier parities of the warp-specialised ring: each wrong
pair of parities is refused by step 2 with the first tile and stage where the ring goes
wrong and what happens there (stale data read, unread data overwritten, a wait that never
passes, a value that is no parity), the right pair passes, and step 3 says why it does
not run without a GPU (the kernel's PTX has no CPU emulation) instead of failing."""
import re

import pytest

from gemm_kernels import device
from gemm_kernels.core.kernels import get as get_kernel
from gemm_kernels.core.registry import CUDA_DIR, runnable
from gemm_kernels.exercises import ch15_checks
from gemm_kernels.exercises.catalog import get
from gemm_kernels.exercises.cexpr import compile_expression
from gemm_kernels.exercises.grader import SKIPPED, hint
from gemm_kernels.exercises.stubs import STUB
from exercise_helpers import FAIL, PASS, assert_right_and_timed, grade, status
from gpu import needs_gpu

NAME = "15_phases"
FULL, EMPTY = "(t / STAGES) & 1", "(t / STAGES - 1) & 1"      # the chapter's parities

# The chapter's waits, and what the cell writes in their place.
_WAITS = {"empty": ("if (t >= STAGES) barrier_wait(smem_u32(&empty[s]), (t / STAGES - 1) & 1);",
                    "if (t >= STAGES) barrier_wait(smem_u32(&empty[s]), empty_parity);"),
          "full": ("barrier_wait(smem_u32(&full[s]), (t / STAGES) & 1);",
                   "barrier_wait(smem_u32(&full[s]), full_parity);")}


def cell(full: str = FULL, empty: str = EMPTY) -> str:
    """The exercise cell: the chapter's file with its kernel renamed, and the kernel again
    with the lines `full_parity = <full>;` and `empty_parity = <empty>;` (or the stub)
    before its two waits."""
    text = (CUDA_DIR / "15_wgmma.cu").read_text()
    kernel = text[text.index("template <int CONSUMERS, int STAGES, int GROUP>"):]
    for name, line in (("empty", empty), ("full", full)):
        old, new = _WAITS[name]
        assert kernel.count(old) == 1, name
        indent = re.search(rf"\n( *){re.escape(old)}", kernel)[1]
        body = line if line == STUB else f"{name}_parity = {line};"
        kernel = kernel.replace(old, f"unsigned {name}_parity = 0;\n{indent}{body}\n"
                                     f"{indent}{new}")
    return ("#define hgemm_wgmma_ws hgemm_wgmma_ws_given\n#include \"15_wgmma.cu\"\n"
            "#undef hgemm_wgmma_ws\n\n" + kernel)


def static_step(full: str = FULL, empty: str = EMPTY):
    report = grade(NAME, cell(full, empty), gpu=False, emulate=False)
    v = status(report)
    assert v["compile"][0] == PASS, v
    step = next(s for s in report.steps if s.name == "static")
    return step.status, step.detail, step.hint


def test_the_cell_is_the_chapters_kernel_with_two_lines_to_write():
    src = cell()
    assert "full_parity = (t / STAGES) & 1;" in src
    assert "barrier_wait(smem_u32(&full[s]), full_parity);" in src
    assert "if (t >= STAGES) barrier_wait(smem_u32(&empty[s]), empty_parity);" in src
    assert src.count("hgemm_wgmma_ws(") == 1         # only the student's kernel by that name


def test_the_solution_passes_and_step_3_is_skipped_with_the_reason():
    report = grade(NAME, cell(), gpu=False)
    v = status(report)
    assert v["compile"][0] == PASS and v["static"][0] == PASS, v
    assert "HGMMA, UTMALDG present" in v["static"][1]
    assert "the ring played for STAGES = 2, 3 and 4" in v["static"][1]
    verdict, detail = v["correct"]
    assert verdict == SKIPPED, v
    assert "inline PTX" in detail and "mbarrier" in detail and "wgmma" in detail
    assert "step 2 checked" in detail and "error" not in detail, detail
    assert report.passed and not report.complete


def test_its_sass_is_the_chapters():
    """The cell compiles to the chapter's kernel: same registers, same instructions."""
    from gemm_kernels.core import compiler
    from gemm_kernels.exercises.grader import student_kernel
    mine = student_kernel(get(NAME), cell())
    ops = lambda k: re.findall(r"^\s+/\*[0-9a-f]{4}\*/\s+([A-Z][\w.]*)",
                               compiler.sass(k, {}), re.M)
    assert ops(mine) == ops(get_kernel("wgmma_ws"))
    assert (compiler.resources(mine, {})["registers"]
            == compiler.resources(get_kernel("wgmma_ws"), {})["registers"])


def test_the_parity_of_every_tile_reads_stale_data_at_tile_1():
    verdict, detail, tip = static_step(full="t & 1")
    assert verdict == FAIL
    assert detail.startswith("with STAGES = 4, at tile 1 (stage 1) the consumers' wait on "
                             "full[1] for parity 1 passes before tile 1's bytes have landed")
    assert "full[1] has completed no phase yet" in detail and "stale data" in detail
    assert "waited forever" in detail                 # the other timing, named too
    assert "Which phase does tile t complete" in tip


def test_the_producer_one_phase_late_overwrites_unread_data():
    verdict, detail, tip = static_step(empty="(t / STAGES) & 1")
    assert verdict == FAIL
    assert detail.startswith("with STAGES = 4, at tile 4 (stage 0) the producer's wait on "
                             "empty[0] for parity 1 passes before the consumers have "
                             "finished tile 0")
    assert "the copy of tile 4 overwrites data not yet read" in detail
    assert "t - STAGES" in tip


@pytest.mark.parametrize("full,empty,where,what", [
    ("0", EMPTY, "at tile 4 (stage 0) the consumers' wait", "holds tile 0: stale data"),
    ("1", EMPTY, "at tile 0 (stage 0) the consumers' wait", "holds nothing yet: stale data"),
    (FULL, "0", "at tile 8 (stage 0) the producer's wait", "overwrites data not yet read"),
    (FULL, "1", "at tile 4 (stage 0) the producer's wait", "overwrites data not yet read"),
])
def test_a_constant_parity_is_refused_where_it_first_goes_wrong(full, empty, where, what):
    verdict, detail, _ = static_step(full, empty)
    assert verdict == FAIL and f"with STAGES = 4, {where}" in detail and what in detail


@pytest.mark.parametrize("full,empty,line,tile,value", [
    ("t / STAGES", EMPTY, "full_parity", 8, 2),
    (FULL, "t / STAGES - 1", "empty_parity", 12, 2)])
def test_a_phase_number_is_no_parity(full, empty, line, tile, value):
    """Right for the first two trips round the ring, then a 2, which PTX does not define."""
    verdict, detail, tip = static_step(full, empty)
    assert verdict == FAIL
    assert f"at tile {tile} (stage 0) {line} is {value}: a phase parity is 0 or 1" in detail
    assert "& 1" in tip


def test_a_parity_written_for_4_stages_only_fails_with_2():
    verdict, detail, _ = static_step("(t >> 2) & 1", "((t >> 2) - 1) & 1")
    assert verdict == FAIL and detail.startswith("with STAGES = 2, at tile 2 (stage 0)")
    assert "overwrites data not yet read" in detail and "; and the consumers' wait" in detail


@pytest.mark.parametrize("full,empty", [
    ("t / STAGES % 2", "(t - STAGES) / STAGES % 2"),
    ("(t / STAGES) & 1", "(t / STAGES + 1) & 1"),          # -1 and +1: the same parity
    ("t / STAGES & 1", "1 ^ (t / STAGES) & 1")])
def test_other_forms_of_the_right_parities_pass(full, empty):
    verdict, detail, _ = static_step(full, empty)
    assert verdict == PASS, detail


def test_names_other_than_t_and_stages_are_refused():
    verdict, detail, tip = static_step(full="(t / STAGES) & 1 ^ s & 0")
    assert verdict == FAIL and "'s'" in detail and "t, STAGES" in detail
    assert "t and STAGES" in tip


def test_a_parity_changed_after_its_line_is_refused():
    src = cell().replace("full_parity = (t / STAGES) & 1;",
                         "full_parity = t / STAGES;\n        full_parity &= 1;")
    v = status(grade(NAME, src, gpu=False, emulate=False))
    assert v["static"][0] == FAIL and "changed after its line" in v["static"][1]


def test_the_stub_is_reported_as_not_written():
    v = status(grade(NAME, cell(STUB, STUB), gpu=False, emulate=False))
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert STUB in v["static"][1] and "tile" not in v["static"][1], v
    assert ch15_checks.phases_hint(v["static"][1]) == ""


def test_one_line_written_and_the_other_a_stub_reports_the_stub_only():
    v = status(grade(NAME, cell(FULL, STUB), gpu=False, emulate=False))
    assert v["static"][0] == FAIL and STUB in v["static"][1] and "tile" not in v["static"][1]


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("consumers", [1, 2])
def test_the_chapters_parities_run_the_ring_in_every_order(stages, consumers):
    full, empty = (compile_expression(e, ch15_checks.NAMES) for e in (FULL, EMPTY))
    assert ch15_checks.play(full, empty, stages, consumers,
                            ch15_checks.tiles_played(stages)) == []


def test_a_wrong_parity_is_early_in_one_timing_and_a_hang_in_another():
    """A wait for the wrong parity passes at once while the phase it needs is still open,
    and waits for the next phase of its parity once that phase has completed."""
    full, empty = (compile_expression(e, ch15_checks.NAMES) for e in ("1", EMPTY))
    faults = ch15_checks.play(full, empty, 2, 2, ch15_checks.tiles_played(2))
    assert {f.kind for f in faults} == {"stale", "forever"}
    assert {f.tile for f in faults} == {0}
    hang = next(f for f in faults if f.kind == "forever")
    assert "full[0] has completed phase 0 (parity 0); its open phase 1" in hang.text
    assert "the kernel never finishes" in hang.text


def test_each_steps_hint_answers_its_failure():
    ex = get(NAME)
    timed_out = ("timed out after 120 s: the kernel never finished (a loop that does not "
                 "end, or a __syncthreads() some threads of the block never reach)")
    assert "time limit" in hint(ex, "correct", timed_out)
    assert "two parity lines aside" in hint(ex, "correct", "wrong at 7x16x24")
    assert "#include" in hint(ex, "compile", "line 9: x") and hint(ex, "speed", "slow")
    assert "waits for you" in ch15_checks.phases_hint("... waits forever on full[0] ...")


@needs_gpu
@pytest.mark.skipif(device.is_live() and not runnable(get_kernel("wgmma_ws"))[0],
                    reason="wgmma_ws runs on sm_90 (Hopper) only")
def test_the_solution_is_right_and_timed_on_a_gpu():
    assert_right_and_timed(grade(NAME, cell(), gpu=True))


def test_a_parity_written_where_it_is_declared_passes():
    src = cell().replace("unsigned full_parity = 0;\n", "").replace(
        "full_parity = (t / STAGES) & 1;", "unsigned full_parity = (t / STAGES) & 1;")
    assert "unsigned full_parity = (t / STAGES) & 1;" in src
    v = status(grade(NAME, src, gpu=False, emulate=False))
    assert v["static"][0] == PASS, v
    wrong = src.replace("unsigned full_parity = (t / STAGES) & 1;", "unsigned full_parity = 1;")
    assert status(grade(NAME, wrong, gpu=False, emulate=False))["static"][0] == FAIL
