"""The capstone explorer driven from Python (no browser), in recorded mode: the static
analysis with every valid answer, the registry's message for an invalid choice, the
recorded rate with its same-run share, and the controls wired to all of it."""
import pytest

from gemm_kernels.core import analysis, device
from gemm_kernels.core.kernels import get
from gemm_kernels.core.launch import problems
from gemm_kernels.measure import records
from gemm_kernels.notebook import capstone_widget as cw

INVALID = {"BN": 256, "WM": 64, "WN": 64, "MINB": 2}     # registers do not fit


def _row(params, size, gflops):
    k = get("capstone")
    return {"chapter": "09", "kernel": "capstone", "params": k.resolve(params),
            "shape": [size] * 3, "gflops": {"median": gflops, "min": gflops, "max": gflops},
            "source": k.source_hash(), "run": "run-a", "time": "2026-01-02T03:04:05Z",
            "reference": {"kernel": "cublas",
                          "gflops": {"median": 1000.0, "min": 1000.0, "max": 1000.0}}}


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """Two recorded capstone configurations. Their numbers are test data, never shown
    as measurements: they exercise the widget's plumbing."""
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    device._gpu_present.cache_clear()
    rec = records.Record({"name": "Test GPU 9000"}, "2026-01-02T03:04:05Z", "abc1234",
                         [_row({}, 2048, 750.0), _row({"HOIST": False}, 4096, 500.0)],
                         runs={"run-a": {"command": "test", "started": "2026-01-02T03:00:00Z"}})
    path = records.save(rec, tmp_path / "test-gpu-9000.json")
    monkeypatch.setenv("GEMM_KERNELS_RECORD", str(path))
    records._LOADED.clear()
    yield
    records._LOADED.clear()


def test_warp_pairs_are_the_valid_ones():
    pairs = cw.warp_pairs()
    assert (32, 64) in pairs and (64, 128) not in pairs     # 64 x 128 never fits a BN
    for wm, wn in pairs:
        assert any(not problems("capstone", {"WM": wm, "WN": wn, "BN": bn}) for bn in (128, 256))


def test_recorded_configuration_gets_registers_blocks_and_share(recorded):
    ex = cw.CapstoneExplorer(2048)
    res = ex.evaluate({})
    occ = analysis.kernel_occupancy("capstone")
    assert res["ok"] and res["value"] == 750.0
    assert f"{occ.registers_per_thread} registers" in res["static"]
    assert f"{occ.blocks_per_sm} block" in res["static"] and "FFMA" in res["static"]
    assert res["message"].startswith(res["static"])
    assert "750 GFLOP/s, 75% of cublas in the same run" in res["message"]
    assert "HOIST=True" in res["message"]                   # every tunable is named


def test_invalid_choice_shows_the_registrys_message(recorded):
    res = cw.CapstoneExplorer(2048).evaluate(INVALID)
    assert not res["ok"] and res["static"] is None
    assert res["message"] == "Not a valid configuration: " + "; ".join(
        problems("capstone", INVALID, (2048,) * 3))


def test_unrecorded_choice_still_gets_the_static_analysis(recorded):
    res = cw.CapstoneExplorer(2048).evaluate({"STAGES": 2})
    assert not res["ok"] and "registers" in res["message"]
    assert "not in the recording" in res["message"]


def test_recorded_sizes_come_from_the_recording(recorded):
    assert cw.recorded_sizes() == (2048, 4096)


def test_controls_drive_the_explorer(recorded):
    box = cw.capstone_explorer(2048)
    (row1, row2, status, image) = box.children
    controls = {c.description: c for c in row1.children + row2.children}
    assert set(controls) >= {"BN", "WM x WN", "BK", "STAGES", "GROUP", "MINB", "HOIST",
                             "size", "Run"}
    assert controls["size"].options == (2048, 4096)
    controls["BN"].value, controls["WM x WN"].value, controls["MINB"].value = 256, (64, 64), 2
    controls["Run"].click()
    assert "Not a valid configuration" in status.value and "crimson" in status.value
    assert image.value == b""
    controls["BN"].value, controls["WM x WN"].value, controls["MINB"].value = 128, (32, 64), 1
    controls["size"].value = 4096
    controls["HOIST"].value = False
    controls["Run"].click()
    assert "500 GFLOP/s" in status.value and "green" in status.value
    assert image.value[:4] == b"\x89PNG"
