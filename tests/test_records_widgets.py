"""Recorded mode without a GPU: loading and labelling a record, looking rows up, and the
GEMM explorer widget driven from Python (no browser)."""
import pytest

from gemm_kernels import device, lookup, records, widgets
from gemm_kernels.core.kernels import get
from gemm_kernels.measure import record
from gemm_kernels.measure.record import merge


def _row(kernel, params, shape, gflops):
    k = get(kernel)
    return {"chapter": k.chapter, "kernel": kernel, "params": k.resolve(params),
            "shape": list(shape), "gflops": {"median": gflops, "min": gflops, "max": gflops},
            "error_over_bound": 0.05, "repeats": 20, "source": k.source_hash(),
            "reference": {"kernel": "cublas",
                          "gflops": {"median": 1000.0, "min": 990.0, "max": 1010.0}}}


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """A small record file in recorded mode. Its numbers are test data, never shown as
    measurements: they only exercise the loader and the widget's plumbing."""
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    device._gpu_present.cache_clear()
    cublas = {"chapter": "00", "kernel": "cublas", "params": {}, "shape": [2048] * 3,
              "gflops": {"median": 1000.0, "min": 990.0, "max": 1010.0}, "repeats": 20}
    rec = records.Record({"name": "Test GPU 9000", "compute_capability": "9.0"},
                         "2026-01-02T03:04:05Z", "abc1234",
                         [cublas, _row("naive", {"BLOCK": 16}, (2048,) * 3, 250.0),
                          {**_row("naive", {"BLOCK": 8}, (2048,) * 3, 99.0), "source": "old"}])
    path = records.save(rec, tmp_path / "test-gpu-9000.json")
    monkeypatch.setenv("GEMM_KERNELS_RECORD", str(path))
    records._LOADED.clear()
    yield path
    records._LOADED.clear()


def test_label_names_device_and_date(recorded):
    rec = records.load(recorded)
    assert rec.label == "recorded on Test GPU 9000, 2026-01-02"
    assert records.source() == rec.label


def test_lookup_returns_the_row_and_its_source(recorded):
    row = lookup.measure_or_lookup("naive", (2048,) * 3, {"BLOCK": 16})
    assert row["gflops"]["median"] == 250.0
    assert row["source"] == "recorded on Test GPU 9000, 2026-01-02"


def test_rows_of_other_kernel_sources_are_not_shown(recorded):
    with pytest.raises(LookupError, match="not in the recording"):
        lookup.measure_or_lookup("naive", (2048,) * 3, {"BLOCK": 8})


def test_schema_is_checked(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": 99, "device": {}, "created": "", "commit": "", "results": []}')
    with pytest.raises(ValueError, match="bad.json: schema 99"):
        records.load(bad)


def test_explorer_reports_recorded_rate_and_share(recorded):
    ex = widgets.Explorer("naive")
    res = ex.evaluate({"BLOCK": 16, "MAPPING": "x->row"})
    assert res["ok"] and res["value"] == 250.0
    assert "25% of cublas in the same run" in res["message"] and "Test GPU 9000" in res["message"]
    assert ex.history == [("BLOCK=16 MAPPING=x->row", 250.0, 1000.0)]


def test_explorer_never_divides_by_another_runs_reference(recorded, monkeypatch):
    """A row without its own reference gets no share, though a cuBLAS row is recorded."""
    from gemm_kernels.measure import lookup
    row = lookup.recorded("naive", (2048,) * 3, {"BLOCK": 16})
    monkeypatch.setattr(lookup, "measure_or_lookup",
                        lambda *a, **k: {kk: v for kk, v in row.items() if kk != "reference"})
    ex = widgets.Explorer("naive")
    res = ex.evaluate({"BLOCK": 16, "MAPPING": "x->row"})
    assert res["ok"] and "no reference measured in the same run" in res["message"]
    assert ex.history == [("BLOCK=16 MAPPING=x->row", 250.0, None)]


def test_explorer_invalid_choice_is_a_message(recorded):
    res = widgets.Explorer("naive").evaluate({"BLOCK": 64})
    assert not res["ok"] and "1024" in res["message"] and "BLOCK" in res["message"]


def test_explorer_unrecorded_choice_is_a_message(recorded):
    res = widgets.Explorer("naive").evaluate({"BLOCK": 4})
    assert not res["ok"] and "not in the recording" in res["message"]


def test_widget_run_button_drives_the_explorer(recorded):
    ex = widgets.Explorer("naive")
    box = ex.widget()
    controls, status, _ = box.children
    block = next(c for c in controls.children if getattr(c, "description", "") == "BLOCK")
    button = next(c for c in controls.children if getattr(c, "description", "") == "Run")
    block.value = 64
    button.click()
    assert "Not a valid configuration" in status.value and "crimson" in status.value
    block.value = 16
    button.click()
    assert "250 GFLOP/s" in status.value and "green" in status.value


def test_merge_drops_rows_of_old_sources(recorded, monkeypatch):
    monkeypatch.setattr(device, "properties", lambda: {"name": "Test GPU 9000"})
    monkeypatch.setattr(record, "toolchain", lambda: {})
    record.run.cache_clear()
    old = records.load(recorded)
    old.results = [record.stamp(r) for r in old.results]
    records.save(old, recorded)
    rec = merge([record.stamp(_row("naive", {"BLOCK": 32}, (2048,) * 3, 300.0))], path=recorded)
    kept = {(r["kernel"], r["params"].get("BLOCK")) for r in rec.results}
    assert ("naive", 8) not in kept and ("naive", 16) in kept and ("naive", 32) in kept
    assert list(rec.runs) == [record.run().id]
    record.run.cache_clear()
