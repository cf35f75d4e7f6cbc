"""The thread-tile model of chapters 05-06 (gemm_kernels.thread_tiles): ownership of
outputs, load counts against the SASS, bank wavefronts worked out by hand."""
from __future__ import annotations

import pytest

from gemm_kernels import analysis, kernels
from gemm_kernels.memory import ch05_06_thread_tiles as tt

from test_registry_ch03_06 import _toolchain_or_skip

STRIDED_44 = ("tile_2d_strided", {"BM": 128, "BN": 128, "BK": 8, "TM": 4, "TN": 4})
CONTIG_44 = ("tile_2d_reg", {"BM": 128, "BN": 128, "BK": 8, "TM": 4, "TN": 4})
K4 = {"BM": 64, "BN": 64, "BK": 8, "TM": 8}                 # siboehm's kernel 4 tile
K5 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}      # siboehm's kernel 5 tile


@pytest.mark.parametrize("name", tt.KERNELS)
def test_every_output_of_the_tile_is_owned_once(name):
    for p in kernels.get(name).valid_configurations()[::5]:
        g = tt.geometry(name, p)
        owned = [o for t in range(g.threads) for o in g.outputs(t)]
        assert sorted(owned) == [(r, c) for r in range(p["BM"]) for c in range(p["BN"])]


def test_seed_004_patterns():
    g = tt.geometry(*CONTIG_44)
    assert g.outputs(1)[:4] == [(0, 4), (0, 5), (0, 6), (0, 7)]
    s = tt.geometry(*STRIDED_44)
    assert s.outputs(1)[:4] == [(0, 1), (0, 33), (0, 65), (0, 97)]
    assert s.outputs(32)[0] == (1, 0)


def test_load_counts_by_hand():
    assert tt.instruction_counts("tile_1d", K4) == {"LDS.128": 16, "LDS": 8, "FFMA": 64}
    assert tt.instruction_counts(*CONTIG_44) == {"LDS.128": 16, "FFMA": 128}
    assert tt.instruction_counts(*STRIDED_44) == {"LDS.128": 8, "LDS": 32, "FFMA": 128}
    assert tt.instruction_counts("tile_2d", K5) == {"LDS": 1024, "FFMA": 512}


def _warp0(name, params, operand):
    return [i for i in tt.warp_instructions(name, params)
            if i.warp == 0 and i.op == "ld" and i.group == operand]


def test_wavefronts_by_hand():
    # contiguous 4x4: A broadcast LDS.128 = 2 half-warp phases; B LDS.128 = 4 quarters of
    # 8 lanes x 4 words on 32 distinct banks
    assert {i.analysis.wavefronts for i in _warp0(*CONTIG_44, "A")} == {2}
    assert {i.analysis.wavefronts for i in _warp0(*CONTIG_44, "B")} == {4}
    # strided: B is 32 consecutive words per LDS
    assert {i.analysis.wavefronts for i in _warp0(*STRIDED_44, "B")} == {1}
    # both: 48 wavefronts per warp and step, none from conflicts
    for c in (CONTIG_44, STRIDED_44):
        ins = _warp0(*c, "A") + _warp0(*c, "B")
        assert sum(i.analysis.wavefronts for i in ins) == 48
        assert sum(i.analysis.conflicts for i in ins) == 0
    # default 8x8: lanes tc and tc+4 of a quarter hit the same banks: 8 instead of 4
    assert {i.analysis.wavefronts for i in _warp0("tile_2d_reg", K5, "B")} == {8}
    # TN = 4: 8 lanes x 4 words cover the 32 banks once
    assert {i.analysis.wavefronts for i in _warp0("tile_2d_reg", {**K5, "TN": 4}, "B")} == {4}


def test_stores_of_c():
    t = tt.store_table([CONTIG_44, STRIDED_44])
    assert (t[0]["sectors per STG"], t[0]["sector requests"], t[0]["distinct sectors"]) == (16, 256, 64)
    assert (t[1]["sectors per STG"], t[1]["sector requests"], t[1]["distinct sectors"]) == (4, 64, 64)


def test_launch_totals():
    p = tt.predict(*STRIDED_44, shape=(1024, 1024, 1024))
    steps = 8 * 8 * 128
    assert p["ld wavefronts"] == steps * 32 * 48
    assert p["st wavefronts"] == steps * 32 * 2 and p["st conflicts"] == 0


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


def test_conflicts_per_step():
    assert tt.conflicts(*CONTIG_44) == 0 and tt.conflicts(*STRIDED_44) == 0
    assert tt.conflicts("tile_2d_reg", K5) == 16 * 4   # 16 B loads x 4 extra wavefronts
