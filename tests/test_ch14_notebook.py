"""Chapter 14's notebooks as files: the exercise and its grade in place, short code cells
that call the package, no measured number typed into the text, and every table and
sentence of the recording read from the one recording that holds the chapter's rows."""
import pytest

from gemm_kernels.notebook import ch14_mma as ch14

from notebook_files import (ROOT, assert_code_cells_are_short_calls,
                            assert_exercise_followed_by_its_grade, assert_no_measurement_typed,
                            cells)

CHAPTER = ROOT / "notebooks" / "14_mma_sync.ipynb"
SOLUTION = ROOT / "notebooks" / "solutions" / "14_solution.ipynb"


@pytest.mark.parametrize("path", [CHAPTER, SOLUTION])
def test_the_exercise_is_followed_by_its_grade(path):
    assert_exercise_followed_by_its_grade(path, "14_swizzle", solved=path == SOLUTION)


def test_code_cells_are_short_calls_into_the_package():
    assert_code_cells_are_short_calls(CHAPTER)


def test_no_measurement_is_typed_into_the_text():
    assert_no_measurement_typed(CHAPTER, SOLUTION)


def test_every_measured_table_names_the_chapters_recording():
    rec = ch14.recording()
    if rec is None:
        pytest.skip("no recording holds chapter 13's or 14's rows")
    assert rec.label in ch14.rates_table().title or "not recorded" in ch14.rates_table().title
    # the profile may come from another GPU's recording than the rates: it names its own
    prof = ch14.study_recording()
    if prof is not None:
        assert prof.label in ch14.profile_table().title
        assert prof.label in ch14.bank_table().title


def test_the_measured_counters_sit_beside_the_prediction_when_recorded():
    t = ch14.bank_table()
    if t[0]["measured per LDSM"] is None:
        pytest.skip("the chapter's profile is not recorded yet")
    plain, swizzled = t
    # one unit (millions) in the column: the swizzle leaves a tiny remainder
    assert swizzled["of them conflicts (M)"] < plain["of them conflicts (M)"] / 1000
    assert abs(swizzled["measured per LDSM"] - swizzled["predicted per ldmatrix"]) < 1


def test_no_swizzled_answer_is_shown_before_the_exercise():
    cs = cells(CHAPTER)
    ex = [c.get("id") for c in cs].index("ex-14_swizzle-kernel")
    before = "".join("".join(c["source"]) for c in cs[:ex] if c["cell_type"] == "code")
    assert "plot_swizzle(swizzled=False)" in before and "plot_swizzle()" not in before
    assert "plot_bank_model(swizzled=False)" in before and "plot_bank_model()" not in before
    text = "".join("".join(c["source"]) for c in cs[:ex] if c["cell_type"] == "markdown")
    assert "emulation" not in text.replace("no\nCPU emulation", "").replace(
        "no CPU emulation", "")


def test_the_appendix_shows_the_whole_kernel_header():
    src = "".join("".join(c["source"]) for c in cells(CHAPTER) if c["cell_type"] == "code")
    assert 'display.source("14_mma_kernel.cuh", whole=True)' in src


def test_wave_line_counts_the_blocks_against_the_sms():
    from gemm_kernels.notebook import ch14_mma
    s = str(ch14_mma.wave_line(1024))
    assert "= 64 blocks for 132 SMs" in s and "68 SMs (52%) get no block" in s
    # split-K is chapter 12's (chapter 15 names neither it nor stream-K)
    assert "split-K" in s and "chapter 12" in s and "chapter 15" not in s


def test_pipe_ceiling_divides_the_profiled_rate_by_the_busy_share():
    from gemm_kernels.notebook import ch14_mma
    s = str(ch14_mma.pipe_ceiling())
    assert "a pipe busy all the time would give" in s and "GHz" in s


def test_no_solved_chunk_at_before_the_spoiler_appendix():
    cs = cells(CHAPTER)
    spoiler = next(i for i, c in enumerate(cs) if "".join(c["source"]).startswith(
        "## Appendix C: check your answer"))
    before = "".join("".join(c["source"]) for c in cs[:spoiler] if c["cell_type"] == "code")
    assert 'display.source("mma_sync", whole=True)' not in before
    assert "ch14.your_swizzle()" in before
