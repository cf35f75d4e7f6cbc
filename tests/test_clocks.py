"""The clock and power of a kernel run for seconds (`gemm_kernels.measure.clocks`): the
plain-Python parts on a CPU (what the samples say, how many launches, the reasons'
bits), the study's rows kept apart from timed rows, and a real run on a GPU."""
import pytest

from gemm_kernels.measure import clocks, record, studies, study_run
from tests.gpu import needs_gpu


def _samples(mhz, mw, masks):
    return [(0.1 * i, c, w, m) for i, (c, w, m) in enumerate(zip(mhz, mw, masks))]


def test_the_first_quarter_of_a_run_is_left_out():
    # the clock starts high, then settles at 1,500 MHz under the power cap
    s = clocks.summary(_samples([1980, 1980, 1500, 1500, 1500, 1500, 1510, 1490, 1500],
                                [500_000] * 2 + [700_000] * 7, [0] * 2 + [0x4] * 7))
    assert s["sm_mhz"]["median"] == 1500 and s["sm_mhz"]["max"] == 1510
    assert s["power_w"] == {"median": 700, "min": 700, "max": 700}
    assert s["held_down"] == {"power cap": 1.0} and s["samples"] == 7


def test_the_share_held_down_counts_each_reason():
    s = clocks.summary(_samples([1500] * 4, [1000] * 4, [0x4, 0x4 | 0x20, 0, 0x4]), settle=0)
    assert s["held_down"] == {"power cap": 0.75, "software thermal slowdown": 0.25}


def test_no_samples_is_an_error_not_an_empty_summary():
    with pytest.raises(ValueError, match="no samples"):
        clocks.summary([])


def test_reasons_name_each_bit():
    assert clocks.reasons(0) == []
    assert clocks.reasons(0x4 | 0x40) == ["power cap", "hardware thermal slowdown"]


@pytest.mark.parametrize("ms, n", [(3.0, 667), (0.05, 40_000), (5000, 1)])
def test_launches_fill_the_seconds_within_bounds(ms, n):
    assert clocks.launch_count(ms, 2.0) == n


def test_a_call_of_no_time_is_refused():
    with pytest.raises(ValueError, match="positive"):
        clocks.launch_count(0)


def _row(study=None):
    run = {"gflops": 1.0, "sm_mhz": {"median": 1500}, "power_w": {"median": 690}}
    row = {"kernel": "mma_sync", "params": {"BK": 64}, "shape": [8192] * 3,
           "sustained": run, "power_limit_w": 700,
           "reference": {"kernel": "cublas_hgemm", "sustained": run}}
    return {**row, "study": study} if study else row


def test_a_clocks_row_never_stands_for_a_timed_row():
    timed = {"kernel": "mma_sync", "params": {"BK": 64}, "shape": [8192] * 3,
             "gflops": {"median": 1.0}}
    assert record._key(_row("ch14_clocks")) != record._key(timed)
    assert "gflops" not in _row() and "metrics" not in _row()   # readers of rates skip it


def test_the_study_records_each_launch_with_its_study(monkeypatch):
    seen = []
    monkeypatch.setattr(record, "warm", lambda configs: None)
    monkeypatch.setattr(clocks, "measure",
                        lambda k, shape, full: seen.append((k, tuple(shape))) or _row())
    rows = study_run.study_rows("ch14_clocks", log=lambda *a: None)
    st = studies.get("ch14_clocks")
    assert len(rows) == len(seen) == len(st.steps) * len(st.shapes)
    assert all(r["study"] == "ch14_clocks" and "run" in r for r in rows)
    assert "690 W" in clocks.text(rows[0]) and "limit 700 W" in clocks.text(rows[0])


@needs_gpu
def test_a_real_run_reports_a_clock_and_a_power():
    row = clocks.measure("mma_sync", (2048, 2048, 2048), {}, seconds=0.5)
    for run in (row["sustained"], row["reference"]["sustained"]):
        assert run["gflops"] > 0 and run["sm_mhz"]["median"] > 100
        assert run["power_w"]["median"] > 10 and run["samples"] >= 1
    assert row["power_limit_w"] > 50
