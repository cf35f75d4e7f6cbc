"""The per-lane address patterns of chapters 07-09 (gemm_kernels.memory.ch07_09_patterns)
against the kernels: the lane grid against the .cu source, the wavefronts of a launch
against the Nsight Compute counters recorded on a GPU host (figures/data)."""
import re

import pytest

from gemm_kernels.core.kernels import get
from gemm_kernels.memory import ch07_09_patterns as sp

from test_bank_predict import check_against_recorded

WARPS = 8          # 256 threads: every chapter 07-09 default block
TILE = {"BM": 128, "BN": 128, "BK": 8}     # the tile step_table models


def _eval_c(expr: str, **names) -> int:
    """An integer C expression of + * / % & | >> << and parentheses, evaluated."""
    assert re.fullmatch(r"[\w\s()+*/%&|<>-]+", expr), expr
    return eval(expr.replace("/", "//"), {}, names)


def _source_lane_grid(name: str, t: int, BN: int = 128) -> tuple[int, int]:
    """(qr, qc) of thread t, by the expressions written in the kernel's source."""
    src = get(name).source_text()
    if name == "zorder":
        qr = re.search(r"qr = (\(warp / WARPS_N\) \* 4 \+ .+?);", src).group(1)
        qc = re.search(r"qc = (\(warp % WARPS_N\) \* 8 \+ .+?);", src).group(1)
    else:
        qr = re.search(r"const int qr = (.+?);", src).group(1)
        qc = re.search(r"const int qc = (.+?);", src).group(1)
    names = dict(t=t, lane=t & 31, warp=t >> 5, WARPS_N=BN // 64)
    return _eval_c(qr, **names), _eval_c(qc, **names)


@pytest.mark.parametrize("name", ["zorder", "capstone"])
def test_zorder_lane_grid_is_the_kernels(name):
    """The model's z-order lane grid is the one the kernel computes, and it places the 32
    lanes of a warp on the 4 x 8 sub-tile grid once each."""
    grid = [_source_lane_grid(name, lane) for lane in range(32)]
    assert sorted(grid) == [(r, c) for r in range(4) for c in range(8)]
    assert grid == [sp._lane_grid("zorder", lane, 128) for lane in range(32)]
    if name == "zorder":   # warp 3 of BN = 128 (two warps across): grid rows 4..7, cols 8..15
        assert _source_lane_grid(name, 3 * 32 + 5) == (4 + grid[5][0], 8 + grid[5][1])


def test_rowmajor_lane_grid_is_the_kernels():
    src = get("zorder").source_text()
    assert "qr = t / (BN / 8);" in src and "qc = t % (BN / 8);" in src
    assert "const int tr = t / (BN / TN), tc = t % (BN / TN);" in get("float4").source_text()


def _predict(kernel, params, shape):
    """Launch totals from the model's per-warp step table: per k, the A and B LDS.128 of
    every warp; per tile copy, the four transposed A stores (STS.32) and one conflict-free
    STS.128 of B (4 quarter-warp wavefronts)."""
    layout = "float4" if kernel in ("float4", "double_buffer") else \
        "zorder" if params["ZORDER"] else "rowmajor"
    pad = params.get("PAD", 0)
    row = sp.step_table([(kernel, layout, pad)])[0]
    M, N, K = shape
    warps = (M // TILE["BM"]) * (N // TILE["BN"]) * WARPS
    copies = warps * K // TILE["BK"]
    return {"ld wavefronts": warps * K * row["reads per k"],
            "ld conflicts": warps * K * row["read conflicts"],
            "st wavefronts": copies * (row["A STS.32 x4"] + 4),
            "st conflicts": copies * row["store conflicts"]}


def test_model_matches_the_recorded_counters():
    names = ("float4", "double_buffer", "zorder")
    # the step table models the default 128 x 128 x 8 tile with 8 x 8 per thread
    for name in names:
        assert all(get(name).defaults()[p] == v for p, v in TILE.items())
    rows = check_against_recorded(names, _predict, ld_excess=0.02)
    assert {r["kernel"] for _, r in rows} == set(names)
    assert all(all(r["params"][p] == v for p, v in TILE.items()) for _, r in rows)
