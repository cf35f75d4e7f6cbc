"""Chapter 15's notebooks as files: the exercise and its grade in place, short code cells
that call the package, no measured number typed into the text, and every table and
sentence of the recording read from the one recording that holds the chapter's rows."""
import pytest

from gemm_kernels.notebook import ch15_hopper as ch15

from notebook_files import (ROOT, assert_code_cells_are_short_calls,
                            assert_exercise_followed_by_its_grade, assert_no_measurement_typed,
                            cells)

CHAPTER = ROOT / "notebooks" / "15_hopper.ipynb"
SOLUTION = ROOT / "notebooks" / "solutions" / "15_solution.ipynb"


@pytest.mark.parametrize("path", [CHAPTER, SOLUTION])
def test_the_exercise_is_followed_by_its_grade(path):
    assert_exercise_followed_by_its_grade(path, "15_phases", solved=path == SOLUTION)


def test_code_cells_are_short_calls_into_the_package():
    assert_code_cells_are_short_calls(CHAPTER)


def test_no_measurement_is_typed_into_the_text():
    assert_no_measurement_typed(CHAPTER, SOLUTION)


def test_every_measured_table_names_its_recording():
    rec, prof = ch15.recording(), ch15.study_recording()
    if rec is None:
        pytest.skip("no recording holds chapter 15's rows")
    assert rec.label in ch15.rates_table().title
    if prof is not None:
        assert prof.label in ch15.roles_busy()
    order = ch15.order_recording()
    if order is not None:
        assert order.label in ch15.study_table().title


def test_no_parity_is_shown_before_the_exercise():
    """The answer (the waits with their parities) appears only after the exercise."""
    cs = cells(CHAPTER)
    ex = [c.get("id") for c in cs].index("ex-15_phases-kernel")
    before = "".join("".join(c["source"]) for c in cs[:ex] if c["cell_type"] == "code")
    assert "phase_table" not in before and "whole=True" not in before
    shown = "".join("".join(o.get("text", "") or "".join(o.get("data", {}).get("text/plain", ""))
                            for o in c.get("outputs", [])) for c in cs[:ex])
    assert "(t / STAGES - 1) & 1" not in shown and "(t / STAGES) & 1" not in shown


def test_no_parity_is_shown_after_the_exercise_before_the_spoiler_appendix():
    """Section 9's kernels show their loops with the waits left out; the whole files (the
    answer in them) only in the appendix, under its spoiler banner."""
    import re
    cs = cells(CHAPTER)
    spoiler = next(i for i, c in enumerate(cs) if "".join(c["source"]).startswith(
        "## Appendix D: the kernels' source, whole (spoiler)"))
    assert "**Spoiler" in "".join(cs[spoiler]["source"])
    shown = "".join("".join(c["source"]) + "".join(
        o.get("text", "") or "".join(o.get("data", {}).get("text/plain", ""))
        for o in c.get("outputs", [])) for c in cs[:spoiler])
    assert not re.search(r"/ STAGES( - 1)?\) & 1", shown)
    assert "step / STAGES" not in shown
    after = "".join("".join(c["source"]) for c in cs[spoiler:] if c["cell_type"] == "code")
    assert 'display.source("wgmma_persistent")' in after
    assert 'display.source("wgmma_cluster")' in after


def test_the_appendix_shows_the_whole_source():
    src = "".join("".join(c["source"]) for c in cells(CHAPTER) if c["cell_type"] == "code")
    assert 'display.source("wgmma_ws", whole=True' in src


def test_waves_table_shows_the_twelve_warp_tail_wave():
    from gemm_kernels.notebook import ch15_hopper
    rows = {r["configuration"]: r for r in ch15_hopper.waves_table()}
    r = rows["BM 64, STAGES 3"]
    assert r["blocks"] == 512 and r["slots"] == 396 and r["blocks in the last wave"] == 116


def test_the_body_shows_each_hopper_instruction_before_the_exercise():
    """TMA, the mbarriers, wgmma with its fence / commit / wait, and setmaxnreg: each is
    shown from the kernel's source in the sections that teach it, and the exercise comes
    after the warp-specialised kernel it completes."""
    cs = cells(CHAPTER)
    ids = [c.get("id") for c in cs]
    ex = ids.index("ex-15_phases-kernel")
    assert ids.index("c15-kernel2-source") < ex
    shown = "".join("".join(o.get("data", {}).get("text/plain", "")) for c in cs[:ex]
                    for o in c.get("outputs", []))
    for needed in ("cp.async.bulk.tensor.2d", "mbarrier.try_wait.parity", "wgmma.fence",
                   "wgmma.commit_group", "wgmma.wait_group", "wgmma.mma_async",
                   "setmaxnreg.dec", "setmaxnreg.inc"):
        assert needed in shown, needed
