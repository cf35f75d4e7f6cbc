"""gemm_kernels.tradeoff and ladder.share without a GPU (recorded mode)."""
from __future__ import annotations

import os

import pytest

from gemm_kernels import ladder, records, tradeoff

from test_registry_ch03_06 import _toolchain_or_skip


def test_ranked_is_sorted_and_valid():
    os.environ.setdefault("GEMM_KERNELS_MODE", "recorded")
    r = tradeoff.ranked("tile_2d_reg")
    if records.current() is None:
        assert r == []
        return
    rates = [g for _, g in r]
    assert rates == sorted(rates, reverse=True)
    assert all(set(c) == {"BM", "BN", "BK", "TM", "TN"} for c, _ in r)
    assert tradeoff.ranked("tile_2d_reg", fixed={"TN": 4}) == [x for x in r if x[0]["TN"] == 4]


def test_share_missing_is_none():
    os.environ.setdefault("GEMM_KERNELS_MODE", "recorded")
    assert ladder.share("tile_2d_reg", 3000) is None


def test_table_columns():
    _toolchain_or_skip()
    t = tradeoff.table("tile_2d_reg", [{"TM": 4, "TN": 4}], extra={"x": lambda p: p["TM"]})
    assert t[0]["threads"] == (64 // 4) * (128 // 4) and t[0]["x"] == 4
    assert t[0]["spills"] == 0


def test_table_shows_the_timed_binary_and_uses_it_for_occupancy(monkeypatch):
    """A recorded rate comes with the registers of the binary that ran; where ptxas here
    disagrees, both are shown, the note names the configuration, and occupancy follows
    the timed binary."""
    _toolchain_or_skip()
    from gemm_kernels.core import analysis, compiler
    from gemm_kernels.core.kernels import get
    k = get("tile_2d_reg")
    p = k.resolve({"TM": 4, "TN": 4})
    here = compiler.resources(k, p)["registers"]
    timed = here + 100                      # enough to change the blocks per SM
    row = {"chapter": k.chapter, "kernel": k.name, "params": p, "shape": [2048] * 3,
           "gflops": {"median": 1000.0, "min": 990.0, "max": 1010.0}, "repeats": 20,
           "source": k.source_hash(), "run": "r", "time": "2026-01-01T00:00:00Z",
           "binary": {"registers": timed}}
    rec = records.Record({"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc", [row],
                         runs={"r": {}})
    monkeypatch.setattr(records, "_LOADED", {"record": rec})
    t = tradeoff.table("tile_2d_reg", [p])
    assert t[0][analysis.TIMED_REGISTERS] == timed
    assert t[0][analysis.local_registers_column()] == here
    occ = analysis.kernel_occupancy(k, p, registers=timed)
    assert t[0]["blocks/SM"] == occ.blocks_per_sm != analysis.kernel_occupancy(k, p).blocks_per_sm
    assert f"{timed} timed vs {here} here" in t.title.splitlines()[1]
    assert f" {timed} " in repr(t).splitlines()[-1]          # an integer, not "229.0"
    # asked for one column, the table keeps both where the counts differ
    assert analysis.TIMED_REGISTERS in tradeoff.table("tile_2d_reg", [p],
                                                      one_registers_column=True).columns


def test_table_merges_the_register_columns_where_they_agree():
    _toolchain_or_skip()
    from gemm_kernels.core import analysis
    t = tradeoff.table("tile_1d", [{"BM": 64, "BN": 64, "BK": 16, "TM": 16}],
                       one_registers_column=True)
    if t.title.count("\n"):
        pytest.skip("the timed binary and ptxas here differ on this machine")
    assert "registers" in t.columns and analysis.TIMED_REGISTERS not in t.columns
    assert analysis.local_registers_column() not in t.columns
    assert t[0]["registers"] == 80


def test_resources_show_the_timed_binary(monkeypatch):
    _toolchain_or_skip()
    from gemm_kernels.core import analysis
    from gemm_kernels.core.kernels import get
    from gemm_kernels.notebook import display
    monkeypatch.setattr(records.device, "is_live", lambda: False)
    k = get("naive")
    p = k.resolve({})
    here = analysis.summary("naive")["registers"]
    row = {"chapter": k.chapter, "kernel": k.name, "params": p, "shape": [2048] * 3,
           "gflops": {"median": 1.0, "min": 1.0, "max": 1.0}, "source": k.source_hash(),
           "run": "r", "time": "2026-01-01T00:00:00Z", "binary": {"registers": here + 1}}
    monkeypatch.setattr(records, "_LOADED", {"record": records.Record(
        {"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc", [row], runs={"r": {}})})
    t = display.resources(["naive", "coalesced"])
    assert [r[analysis.TIMED_REGISTERS] for r in t] == [here + 1, None]
    assert "naive: " in t.title and "coalesced" not in t.title
    # one column only where the two agree for every kernel: here they do not
    assert analysis.TIMED_REGISTERS in display.resources(["naive"], one_register_column=True).columns
    row["binary"]["registers"] = here
    one = display.resources(["naive"], one_register_column=True)
    assert analysis.TIMED_REGISTERS not in one.columns and one[0]["registers"] == here
    monkeypatch.setattr(records, "_LOADED", {"record": None})
    assert analysis.TIMED_REGISTERS not in display.resources(["naive"]).columns


def test_resources_can_give_the_loads_per_ffma():
    from gemm_kernels.notebook import display
    flip = display.resources(["smem_tiled"], loads_per_ffma=True)
    plain = display.resources(["smem_tiled"])
    assert "LDS/FFMA" in flip.columns and "FFMA/LDS" not in flip.columns
    assert float(flip[0]["LDS/FFMA"]) == pytest.approx(1 / plain[0]["FFMA/LDS"], abs=0.01)
    assert flip[0]["LDS/FFMA"] == f"{flip[0]['loop LDS'] / flip[0]['loop FFMA']:.2f}"
