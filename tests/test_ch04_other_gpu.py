"""Chapter 04's solution table of the 50- and 51-wavefront layouts may come from another
GPU's recording than the chapter's other tables: its title then says so, from the
recordings' own device names, so that its rates are compared with each other only."""
from types import SimpleNamespace

from gemm_kernels.measure import records
from gemm_kernels.notebook import ch04_banks


def test_a_table_from_another_gpu_says_so(monkeypatch):
    monkeypatch.setattr(records, "current", lambda: SimpleNamespace(device={"name": "GPU A"}))
    line = ch04_banks.other_gpu_warning(SimpleNamespace(device={"name": "GPU B"}))
    assert "not the GPU of the chapter's other tables (GPU A)" in line
    assert "with each other only" in line
    assert ch04_banks.other_gpu_warning(SimpleNamespace(device={"name": "GPU A"})) == ""
    assert ch04_banks.other_gpu_warning(None) == ""


def test_the_recorded_table_names_both_gpus_when_they_differ():
    rec = records.current()
    text = str(ch04_banks.mixed_against_solution())
    if rec is not None and "has not been timed" not in text and rec.device["name"] not in text.splitlines()[0]:
        assert "compare these rows with each other only" in text


def _timed(median, lo, hi):
    return {"gflops": {"median": median, "min": lo, "max": hi}}


def test_the_verdict_on_50_against_51_follows_the_ranges(monkeypatch):
    """The sentence under the table says which layout ran faster and whether the timed
    calls' ranges overlap, from the rows themselves."""
    apart = [("51", 51, _timed(8959, 8943, 8982)), ("50", 50, _timed(9055, 9027, 9073))]
    monkeypatch.setattr(ch04_banks, "_mixed_rows", lambda: (None, apart))
    line = ch04_banks.mixed_verdict()
    assert line.startswith("50 wavefronts per step ran at 1.01x the rate of 51")
    assert "do not overlap" in line and "every timed call of the 50" in line
    close = [("51", 51, _timed(9000, 8900, 9100)), ("50", 50, _timed(8990, 8950, 9050))]
    monkeypatch.setattr(ch04_banks, "_mixed_rows", lambda: (None, close))
    line = ch04_banks.mixed_verdict()
    assert line.startswith("51 wavefronts") and "overlap: neither is faster" in line
    monkeypatch.setattr(ch04_banks, "_mixed_rows", lambda: (None, []))
    assert "not timed in one run" in ch04_banks.mixed_verdict()
