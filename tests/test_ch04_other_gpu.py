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
