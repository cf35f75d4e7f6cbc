"""Provenance without a GPU: rows built by the real measuring, recording and merging
code from fake measurements (the GPU side of `timing` and the run's toolchain are
replaced), and checked for run, time, binary and same-run reference."""
import datetime
import json
import re
from pathlib import Path

import pytest

from gemm_kernels.core import analysis, compiler, device
from gemm_kernels.core.kernels import get
from gemm_kernels.measure import lookup, record, records, timing

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
CANDIDATE_MS, REFERENCE_MS = 2.0, 1.0     # the kernel takes twice its reference's time


class FakeFunction:
    """Stands for the loaded cupy.RawKernel: some attributes fail or are unknown (-1)."""
    num_regs = 127
    local_size_bytes = 0
    shared_size_bytes = 16384
    const_size_bytes = -1
    max_threads_per_block = 256
    binary_version = 90

    @property
    def ptx_version(self):
        raise RuntimeError("the driver refuses")


class Clock:
    def __init__(self):
        self.now = 0.0

    def event(self):
        return self.now

    def elapsed_ms(self, a, b):
        return b - a

    def synchronize(self):
        pass

    def flush(self):
        pass


@pytest.fixture
def fake_gpu(monkeypatch):
    """timing.measure and record.run work as on a GPU, on scripted durations."""
    clock = Clock()

    def advance(ms):
        def fn():
            clock.now += ms
        return fn

    def setup(name, shape, p):
        fns = {"candidate": advance(CANDIDATE_MS)}
        if name in timing.REFERENCE_KERNELS:
            return fns, lambda: ({"error_over_bound": 0.05} if name.startswith("cublas") else {})
        fns["reference"] = advance(REFERENCE_MS)
        extra = {"error_over_bound": 0.05} if get(name).op in ("sgemm", "dgemm") else {"exact": True}
        return fns, lambda: {**extra, "binary": compiler.binary_attributes(FakeFunction())}

    monkeypatch.setattr(timing, "setup", setup)
    monkeypatch.setattr(timing, "cuda_clock", lambda: clock)
    monkeypatch.setattr(timing, "measure_pitfalls", lambda: {
        "chapter": "00", "kernel": "timing_pitfalls", "params": {}, "shape": [64] * 3,
        "metrics": {"events_random_ms": 1.0}, "time": records.utc_now()})
    monkeypatch.setattr(record, "toolchain", lambda: {"cupy": "14.2.0", "cuda_runtime": 13020,
                                                      "nvrtc": "13.0", "driver": 13000})
    monkeypatch.setattr(record, "warm", lambda configs: None)
    monkeypatch.setattr(device, "properties", lambda: {"name": "Test GPU", "l2_bytes": 1 << 20,
                                                          "compute_capability": "9.0"})
    record.run.cache_clear()
    yield
    record.run.cache_clear()


def _check_row(row, run_id):
    assert row["run"] == run_id and ISO.match(row["time"])
    if row["kernel"] in timing.REFERENCE_KERNELS or "metrics" in row:
        assert "reference" not in row and "binary" not in row
        return
    ref = row["reference"]
    assert ref["kernel"] == timing.reference_of(row["kernel"])
    unit = "gflops" if "gflops" in row else "gbps"
    assert set(ref[unit]) == {"median", "min", "max"}
    assert lookup.share(row) == pytest.approx(100 * REFERENCE_MS / CANDIDATE_MS)
    assert row["binary"] == {"registers": 127, "local_size_bytes": 0,
                             "shared_size_bytes": 16384, "const_size_bytes": None,
                             "max_threads_per_block": 256, "ptx_version": None,
                             "binary_version": 90}


def test_rows_of_each_kind(fake_gpu):
    rid = record.run().id
    rows = [record.measure("naive", (64, 64, 64)), record.measure("dgemm_tiled", (64, 64, 64)),
            record.measure("transpose_padded", (64, 64), {"T": "double"}),
            record.measure("cublas", (64, 64, 64)), record.measure("device_copy", (64, 64))]
    for r in rows:
        _check_row(r, rid)
    assert [r.get("reference", {}).get("kernel") for r in rows] == \
        ["cublas", "cublas_dgemm", "device_copy", None, None]
    # min time -> max rate; the reference in the same unit as the row
    assert rows[0]["gflops"]["median"] == pytest.approx(timing.gflops((64,) * 3, CANDIDATE_MS))
    assert rows[2]["reference"]["gbps"]["median"] == pytest.approx(
        timing.gbps(2 * 64 * 64 * 8, REFERENCE_MS))


def test_plan_and_sweep_rows_all_carry_provenance(fake_gpu):
    rows = record.plan_rows(["00", "01", "11"], log=lambda *_: None)
    rows += record.sweep_rows("transpose_naive", log=lambda *_: None)
    rid = record.run().id
    assert {r["kernel"] for r in rows} >= {"cublas", "device_copy", "timing_pitfalls", "naive",
                                           "dgemm_tiled", "cublas_dgemm", "transpose_naive"}
    for r in rows:
        _check_row(r, rid)


def test_run_entry(fake_gpu, monkeypatch):
    monkeypatch.setattr("sys.argv", [str(Path(record.REPO) / "gemm_kernels" / "__main__.py"),
                                     "record", "--chapters", "03"])
    monkeypatch.setenv("GEMM_KERNELS_COMMIT", "1e05b74")
    r = record.run()
    assert re.match(r"^\d{8}T\d{6}Z-[0-9a-f]{6}$", r.id)
    assert r.info["command"] == "python -m gemm_kernels record --chapters 03"
    assert r.info["commit"] == "1e05b74" and ISO.match(r.info["started"])
    assert r.info["toolchain"]["nvrtc"] == "13.0"
    assert r.info["timing"] == {"flush_l2": True, "interleaved": True, "warmup": 3, "repeats": 20}
    assert record.run() is r                       # one run per process


def test_command_line_outside_the_package():
    assert record.command_line(["/usr/bin/ipykernel_launcher.py", "-f", "a b.json"]) == \
        "python /usr/bin/ipykernel_launcher.py -f 'a b.json'"
    assert record.command_line([str(record.REPO / "gemm_kernels/measure/profile.py"),
                                "--target"]) == "python -m gemm_kernels.measure.profile --target"
    t = datetime.datetime(2026, 11, 23, 15, 4, 5, tzinfo=datetime.timezone.utc)
    assert record.run_id(t, "3fa2c1") == "20261123T150405Z-3fa2c1"


def _old_file(path, rows, runs):
    rec = records.Record({"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc", rows, runs=runs)
    records.save(rec, path)


def test_merge_keeps_referenced_runs_and_drops_stale_rows(fake_gpu, tmp_path):
    k = get("naive")
    path = tmp_path / "test-gpu.json"

    def old(params, run, source=k.source_hash()):
        r = {"chapter": "01", "kernel": "naive", "params": k.resolve(params), "shape": [64] * 3,
             "gflops": {"median": 1.0, "min": 1.0, "max": 1.0}, "source": source,
             "time": "2026-01-01T00:00:00Z"}
        return {**r, "run": run} if run else r
    _old_file(path, [old({"BLOCK": 8}, "kept"), old({"BLOCK": 16}, "replaced"),
                     old({"BLOCK": 32}, "stale", source="older code"), old({"BLOCK": 4}, None)],
              {"kept": {"command": "a"}, "replaced": {"command": "b"}, "stale": {"command": "c"},
               "never used": {"command": "d"}})
    new = record.measure("naive", (64,) * 3, {"BLOCK": 16})
    logged = []
    rec = record.merge([new], path=path, log=logged.append)
    data = json.loads(path.read_text())
    assert data["schema"] == 2 and set(data) >= {"device", "created", "commit", "runs", "results"}
    assert set(data["runs"]) == {"kept", record.run().id}
    assert data["runs"][record.run().id]["toolchain"]["cupy"] == "14.2.0"
    blocks = {r["params"]["BLOCK"]: r["run"] for r in data["results"]}
    assert blocks == {8: "kept", 16: record.run().id}       # 32: stale source; 4: no run
    assert logged and "1 rows" in logged[0]
    assert rec.runs == data["runs"]


def test_merge_refuses_rows_without_a_run(fake_gpu, tmp_path):
    row = {"chapter": "00", "kernel": "cublas", "params": {}, "shape": [64] * 3}
    with pytest.raises(ValueError, match="no run"):
        record.merge([row], path=tmp_path / "x.json")


def test_profile_rows_are_stamped(fake_gpu):
    r = record.stamp({"chapter": "04", "kernel": "bank_layout", "params": {}, "shape": [64] * 3,
                      "metrics": {}})
    assert r["run"] == record.run().id and ISO.match(r["time"])


def test_share_uses_the_rows_own_reference_only():
    row = {"gflops": {"median": 30.0}, "reference": {"kernel": "cublas", "gflops": {"median": 60.0}}}
    assert lookup.share(row) == 50.0
    assert lookup.share({"gbps": {"median": 9.0},
                         "reference": {"kernel": "device_copy", "gbps": {"median": 10.0}}}) == 90.0
    assert lookup.share({"gflops": {"median": 30.0}}) is None          # schema 1
    assert lookup.share({"gflops": {"median": 30.0}, "reference": {"kernel": "cublas"}}) is None


def test_binary_attributes_of_an_object_without_them():
    assert compiler.binary_attributes(object()) == dict.fromkeys(compiler.BINARY_ATTRIBUTES)


def test_ptxas_version_is_parsed():
    text = ("ptxas: NVIDIA (R) Ptx optimizing assembler\nCopyright (c) 2005-2025 NVIDIA\n"
            "Built on Wed_Jul_16\nCuda compilation tools, release 12.9, V12.9.86\n")
    assert compiler.parse_ptxas_version(text) == "12.9"
    assert compiler.parse_ptxas_version("V13.0.48") == "13.0"
    assert compiler.parse_ptxas_version("nothing") is None


def test_registers_note_names_differences_only(monkeypatch):
    monkeypatch.setattr(compiler, "ptxas_version", lambda: "12.9")
    assert analysis.registers_note([("a", None, 40), ("b", 40, 40)]) is None
    note = analysis.registers_note([("STAGES=2", 127, 130), ("b", 40, 40)])
    assert "STAGES=2: 127 timed vs 130 here" in note and "ptxas 12.9" in note and "b:" not in note
    assert analysis.local_registers_column() == "registers (ptxas 12.9 here)"


def test_occupancy_from_a_given_register_count():
    # 256 threads: 127 registers -> 128 per thread allocated: 2 blocks; 130 -> 136: 1 block
    lim = device.limits_for("sm_90")
    assert analysis.occupancy(256, 127, 0, lim).blocks_per_sm == 2
    assert analysis.occupancy(256, 130, 0, lim).blocks_per_sm == 1
