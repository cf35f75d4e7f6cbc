"""The loader of figures/data/*.json: bad files are skipped with a warning naming them
(the notebooks still run), an explicitly named bad file is a ValueError naming it, and
a recording without references gives no ratio rather than a crash."""
import json
import warnings

import pytest

from gemm_kernels.core.kernels import get
from gemm_kernels.measure import ladder, lookup, records

GOOD = {"schema": 2, "device": {"name": "Test GPU"}, "created": "2026-01-01T00:00:00Z",
        "commit": "abc", "runs": {}, "results": []}
BAD = {"empty.json": "", "truncated.json": json.dumps(GOOD)[:40], "list.json": "[1, 2]",
       "foreign.json": '{"name": "something else"}',
       "schema.json": json.dumps({**GOOD, "schema": 99}),
       "rows.json": json.dumps({**GOOD, "results": [{"kernel": "naive"}]}),
       "binary.json": b"\xff\xfe\x00garbage"}


def _write(path, content):
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_file_is_skipped_with_a_warning_naming_it(data_dir, name):
    _write(data_dir / name, BAD[name])
    (data_dir / "good.json").write_text(json.dumps({**GOOD, "created": "2025-01-01T00:00:00Z"}))
    with pytest.warns(UserWarning, match=name):
        rec = records.load()
    assert rec.path.name == "good.json"       # the newest good one; the bad one is skipped


@pytest.mark.parametrize("name", sorted(BAD))
def test_explicit_bad_path_is_a_value_error_naming_it(data_dir, name):
    _write(data_dir / name, BAD[name])
    with pytest.raises(ValueError, match=name):
        records.load(data_dir / name)


def test_unreadable_path_is_a_value_error(data_dir):
    with pytest.raises(ValueError, match="cannot be read"):
        records.load(data_dir / "missing.json")
    (data_dir / "dir.json").mkdir()
    with pytest.raises(ValueError, match="dir.json"):
        records.load(data_dir / "dir.json")


def test_only_bad_files_leave_no_recording_and_lookups_say_so(data_dir):
    (data_dir / "empty.json").write_text("")
    with pytest.warns(UserWarning, match="empty.json"):
        assert records.current() is None
    with pytest.raises(LookupError, match="no usable recording"):
        lookup.recorded("naive", (2048,) * 3)
    with pytest.raises(LookupError, match="no GFLOP/s of the ladder kernels"):
        ladder.markdown()


def test_schema_1_still_loads(data_dir):
    (data_dir / "old.json").write_text(json.dumps({**GOOD, "schema": 1}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rec = records.load()
    assert rec.runs == {} and rec.label == "recorded on Test GPU, 2026-01-01"


def test_recording_without_references_gives_no_ratio(data_dir):
    k = get("naive")
    row = {"chapter": k.chapter, "kernel": "naive", "params": k.resolve({}),
           "shape": [1024] * 3, "gflops": {"median": 250.0, "min": 240.0, "max": 260.0},
           "repeats": 20, "source": k.source_hash()}
    (data_dir / "old.json").write_text(json.dumps({**GOOD, "schema": 1, "results": [row]}))
    assert lookup.share(lookup.recorded("naive", (1024,) * 3)) is None
    t = ladder.compare(["naive"], (1024,))
    assert [r["kernel"] for r in t] == ["naive"] and t[0]["% of cuBLAS"] is None
    assert repr(t).splitlines()[-1].split()[-2] == "-"      # the table shows "-"
    assert ladder.share("naive", 1024)["% of cuBLAS"] is None
    with pytest.raises(LookupError, match="no cuBLAS measured in the same run"):
        ladder.markdown((1024,))


def test_label_names_the_days_its_rows_were_measured():
    rec = records.Record({"name": "GPU X"}, "2026-01-05T00:00:00Z", "abc",
                         [{"time": "2026-01-02T10:00:00Z"}, {"time": "2026-01-05T09:00:00Z"},
                          {"kernel": "no time"}], None)
    assert rec.label == "recorded on GPU X, 2026-01-02 to 2026-01-05"
    rec.results[:] = [{"time": "2026-01-02T10:00:00Z"}]
    assert rec.label == "recorded on GPU X, 2026-01-02"
    rec.results[:] = []
    assert rec.label == "recorded on GPU X, 2026-01-05"


def test_the_recording_to_read_can_be_named_from_anywhere(data_dir, monkeypatch):
    _write(data_dir / "other.json", json.dumps({**GOOD, "device": {"name": "Other"}}))
    monkeypatch.chdir(data_dir.parent)        # as a notebook in another folder would be
    monkeypatch.setenv("GEMM_KERNELS_RECORD", "other.json")
    assert records.load().device["name"] == "Other"
    monkeypatch.setenv("GEMM_KERNELS_RECORD", "missing.json")
    with pytest.raises(ValueError, match="missing.json"):
        records.load()


def test_holding_finds_the_recording_with_a_kernels_rows_once(monkeypatch):
    """A kernel recorded only in another file is found there, and the files are read
    once per process, not on every call."""
    from gemm_kernels.measure import records
    shown = records.Record({"name": "A GPU"}, "t", "c", [], runs={})
    other = records.Record({"name": "B GPU"}, "t", "c",
                           [{"chapter": "13", "kernel": "k", "params": {}, "shape": [1, 1, 1],
                             "gflops": {"median": 1.0}, "run": "r"}], runs={})
    reads = []
    monkeypatch.setattr(records, "_LOADED", {"record": shown})
    monkeypatch.setattr(records, "available", lambda: [{"path": "b.json"}])
    monkeypatch.setattr(records, "load", lambda path=None: reads.append(path) or other)
    assert records.holding("k") is other and records.holding("k") is other
    assert reads == ["b.json"]
    assert records.holding("nothing") is None
