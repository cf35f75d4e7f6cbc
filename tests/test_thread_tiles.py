"""The thread-tile model of chapters 05-06 (gemm_kernels.memory.ch05_06_thread_tiles):
load counts against the SASS, launch wavefronts and conflicts against the recorded
Nsight Compute counters."""
from __future__ import annotations

import pytest

from gemm_kernels import analysis
from gemm_kernels.memory import ch05_06_thread_tiles as tt

from test_bank_predict import check_against_recorded
from test_registry_ch03_06 import _toolchain_or_skip

STRIDED_44 = ("tile_2d_strided", {"BM": 128, "BN": 128, "BK": 8, "TM": 4, "TN": 4})
CONTIG_44 = ("tile_2d_reg", {"BM": 128, "BN": 128, "BK": 8, "TM": 4, "TN": 4})
K4 = {"BM": 64, "BN": 64, "BK": 8, "TM": 8}                 # siboehm's kernel 4 tile
K5 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}      # siboehm's kernel 5 tile


def test_model_matches_the_recorded_counters():
    rows = check_against_recorded(tt.KERNELS, tt.predict, ld_excess=0.02)
    assert {r["kernel"] for _, r in rows} == set(tt.KERNELS)


def test_invalid_configuration_is_rejected():
    with pytest.raises(ValueError, match="threads per block"):
        tt.geometry("tile_1d", {"BM": 128, "BN": 128, "TM": 4})
    with pytest.raises(ValueError, match="models"):
        tt.geometry("smem_tiled")


SASS_CASES = [("tile_1d", {}), ("tile_1d", K4), ("tile_2d_reg", K5), ("tile_1d", {"BM": 128, "BN": 32, "BK": 16, "TM": 16}),
              ("tile_1d", {"BM": 32, "BN": 64, "BK": 8, "TM": 4}),
              ("tile_2d_reg", {}), CONTIG_44, ("tile_2d_reg", {"BM": 64, "BN": 128, "BK": 16, "TN": 4}),
              STRIDED_44, ("tile_2d_strided", {"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 4})]


@pytest.mark.parametrize("name,params", SASS_CASES)
def test_load_counts_match_the_sass(name, params):
    _toolchain_or_skip()
    loop = analysis.summary(name, params)["loop_histogram"]
    got = {f: n for f, n in loop.items() if f.startswith("LDS") or f == "FFMA"}
    assert got == tt.instruction_counts(name, params)


def test_inner_product_loop_is_rolled():
    _toolchain_or_skip()
    p = K5
    loop = analysis.summary("tile_2d", K5)["loop_histogram"]
    # 64 rolled dot products in the step: one FFMA and two LDS each, run BK times
    assert loop["FFMA"] == p["TM"] * p["TN"] and loop["LDS"] == 2 * p["TM"] * p["TN"]
    assert tt.instruction_counts("tile_2d", K5)["LDS"] == loop["LDS"] * p["BK"]
