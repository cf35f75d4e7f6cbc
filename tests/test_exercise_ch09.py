"""Chapter 09's exercise (the z-order lane mapping): the skeleton compiles and is
refused, the solution passes every step this machine can run, mappings with bank
conflicts or shared places are refused by the bank check (and, shown on a GPU, by the element-wise check); and
the check's expression evaluator."""

from gemm_kernels.exercises.catalog import get
from gemm_kernels.exercises.ch09_checks import zorder_lanes
from gemm_kernels.exercises.grader import run_gpu_steps
from exercise_helpers import FAIL, PASS, grade, skeleton_cell, solution, static_verdict
from gpu import needs_gpu

NAME = "09_zorder"
QR = "qr = (warp / WARPS_N) * 4 + (((lane >> 1) & 1) | ((lane >> 3) & 2));"
QC = "qc = (warp % WARPS_N) * 8 + ((lane & 1) | ((lane >> 1) & 6));"


def branch(qr, qc):
    return f"if constexpr (ZORDER) {{\n    {qr}\n    {qc}\n}} else {{ qr = t / 16; }}"


def test_the_z_order_mapping_costs_the_ideal():
    assert zorder_lanes(branch(QR, QC)) == []


def test_the_pass_line_names_the_bank_check():
    v = static_verdict(NAME, solution(NAME))
    assert v["static"][0] == PASS and "every LDS.128 of the k loop at 2 wavefronts" \
        in v["static"][1], v


def test_row_major_lanes_in_a_warp_are_refused_by_the_bank_check():
    """4 x 8 per warp, but lane = 8 * row + column: the B reads do not merge (4 wavefronts)."""
    src = solution(NAME).replace(QR, "qr = (warp / WARPS_N) * 4 + lane / 8;") \
                        .replace(QC, "qc = (warp % WARPS_N) * 8 + lane % 8;")
    v = static_verdict(NAME, src)
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "B read" in v["static"][1] \
        and "4 wavefronts, the ideal is 2" in v["static"][1], v


def test_the_chapters_row_major_layout_is_refused_by_the_bank_check():
    problems = zorder_lanes(branch("qr = t / 16;", "qc = t % 16;"))
    assert problems and all("B read" in p and "do not merge" in p for p in problems)


def test_threads_sharing_a_place_are_refused():
    problems = zorder_lanes(branch(QR, "qc = (lane & 1) | ((lane >> 1) & 6);"))
    assert len(problems) == 1 and "both get" in problems[0], problems


def test_a_place_outside_the_grid_is_refused():
    problems = zorder_lanes(branch(QR.replace("* 4", "* 5"), QC))
    assert len(problems) == 1 and "outside the 16 x 16 grid" in problems[0], problems


def test_a_mapping_it_cannot_read_is_named():
    assert "cannot evaluate" in zorder_lanes(branch("qr = min(warp, 3);", QC))[0]
    assert "is not there" in zorder_lanes("qr = 0; qc = 0;")[0]


def test_the_untouched_skeleton_is_told_only_what_is_not_written():
    """The merge rules are for the student to derive from the chapter's bank table: the
    report of the skeleton names the lines to write, and no rule, hint or bit."""
    static = next(s for s in grade(NAME, skeleton_cell(NAME), gpu=False, emulate=False).steps
                  if s.name == "static")
    assert static.status == FAIL and "YOUR CODE HERE" in static.detail, static
    assert "i^1" not in static.detail + static.hint and "qr" not in static.detail, static
    assert static.hint == "", static


def test_a_wrong_mapping_gets_the_merge_rules_as_its_hint():
    src = solution(NAME).replace(QR, "qr = (warp / WARPS_N) * 4 + lane / 8;") \
                        .replace(QC, "qc = (warp % WARPS_N) * 8 + lane % 8;")
    static = next(s for s in grade(NAME, src, gpu=False, emulate=False).steps
                  if s.name == "static")
    assert static.status == FAIL and "one operand pairs lane i with lane i^1" in static.hint
    # both pairings pass the grader, so the hint prescribes neither
    assert "either way round" in static.hint and "must" not in static.hint


@needs_gpu
def test_shared_places_are_wrong_on_a_gpu_too():
    """The bank check refuses this before a GPU sees it; run the GPU steps anyway, to
    show that the element-wise check would refuse it as well (outputs never computed)."""
    src = solution(NAME).replace(QC, "qc = (lane & 1) | ((lane >> 1) & 6);")
    steps = run_gpu_steps(get(NAME), src)
    assert steps[0].name == "correct" and steps[0].status == FAIL, steps


