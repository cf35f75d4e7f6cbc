"""The shared launch model (gemm_kernels.memory.wavefronts): lanes, launch totals, grouping and
the model-vs-ncu table, on hand-made instruction lists."""
from __future__ import annotations

import pytest

from gemm_kernels import kernels, records
from gemm_kernels.memory import wavefronts as sm
from gemm_kernels.measure.profile import SHARED

ROW = tuple(4 * l for l in range(32))              # 32 consecutive words: 1 wavefront
COLUMN = tuple(4 * 32 * l for l in range(32))      # one bank: 32 wavefronts


def test_lanes_of_a_partial_warp():
    assert sm.warps(48) == 2
    assert sm.lanes(48, 1) == list(range(32, 48)) + [None] * 16


def test_totals_scale_by_repeats():
    ins = [sm.WarpInstr("st", "row", 0, 4, ROW), sm.WarpInstr("ld", "col", 0, 4, COLUMN)]
    assert sm.totals(ins, 10) == {"ld wavefronts": 320, "ld conflicts": 310,
                                  "st wavefronts": 10, "st conflicts": 0}
    assert sm.sass_counts(ins) == {"STS": 1, "LDS": 1}
    assert ins[1].sass == "LDS" and sm.WarpInstr("ld", "", 0, 16, ROW).sass == "LDS.128"


def test_distinct_counts_instructions_that_behave_the_same():
    ins = [sm.WarpInstr("ld", f"r{k}", 0, 4, ROW) for k in range(3)] + \
          [sm.WarpInstr("ld", "c", 0, 4, COLUMN)]
    got = sm.distinct(ins, lambda i, a: a.wavefronts)
    assert [(i.what, n) for i, _, n in got] == [("r0", 3), ("c", 1)]


def test_whole_tiles():
    assert sm.whole_tiles((64, 32), (32, 16), ("TILE", "TILE")) == 4
    with pytest.raises(ValueError, match="whole tiles.*multiples of BLOCK=16$"):
        sm.whole_tiles((64, 40, 64), (16,) * 3, ("BLOCK",) * 3)


def test_resolve_refuses_other_kernels():
    with pytest.raises(ValueError, match="no shared-memory model; this one models tile_1d"):
        sm.resolve("naive", {}, ("tile_1d",))


def test_comparison_reads_the_recorded_counters(monkeypatch):
    p = kernels.get("copy_smem").resolve({"T": "float", "TILE": 32})
    rec = records.Record({"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc", [
        {"chapter": "10", "kernel": "copy_smem", "params": p, "shape": [64, 64],
         "source": kernels.get("copy_smem").source_hash(),
         "metrics": {SHARED[0]: 7.0, SHARED[1]: 8.0, SHARED[2]: 1.0, SHARED[3]: 2.0}}])
    monkeypatch.setitem(records._LOADED, "record", rec)
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    seen = []

    def predict(name, params, shape):
        seen.append(shape)
        return {"ld wavefronts": 1, "ld conflicts": 0, "st wavefronts": 3, "st conflicts": 0}

    t = sm.comparison([("copy_smem", p)], predict, lambda n, q: q["TILE"])
    assert seen == [(64, 64)]
    assert t[0] == {"kernel": "copy_smem", "params": 32, "ld wf model": 1, "ld wf ncu": 7,
                    "ld conf model": 0, "ld conf ncu": 1, "st wf model": 3, "st wf ncu": 8,
                    "st conf model": 0, "st conf ncu": 2}
    assert "Test GPU" in t.title
    raw = sm.comparison([("copy_smem", p)], predict, lambda n, q: q["TILE"], exact=False)
    assert raw[0]["ld wf ncu"] == 7.0 and isinstance(raw[0]["ld wf ncu"], float)
