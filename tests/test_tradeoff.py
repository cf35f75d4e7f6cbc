"""gemm_kernels.tradeoff and ladder.share without a GPU (recorded mode)."""
from __future__ import annotations

import os

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
