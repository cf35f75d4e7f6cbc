"""The worked solutions' rates beside their chapters' kernels, read from one run."""
import pytest

from gemm_kernels.notebook import ch06_08_solutions as s


@pytest.mark.parametrize("exercise", ["06_tile_2d_reg", "07_float4", "08_double_buffer"])
def test_the_solution_and_the_chapters_kernel_come_from_one_run(exercise):
    rows = s.rate(exercise)
    assert [r["kernel"] for r in rows][0] == "worked solution"
    assert rows[1]["/ chapter's kernel"] == "1.000"
    assert "one run" in rows.title and "recorded on" in rows.title


def test_the_double_buffer_that_keeps_its_loads_in_flight_beats_the_chapters_kernel():
    assert float(s.rate("08_double_buffer")[0]["/ chapter's kernel"]) > 1.05


def test_a_solution_not_recorded_is_refused(monkeypatch):
    from gemm_kernels.notebook import timed_variants
    monkeypatch.setattr(timed_variants, "row", lambda *a, **k: None)
    with pytest.raises(LookupError):
        s.rate("06_tile_2d_reg")
