"""ch08_waves: the wave count and the grouping of chapter 08's sweep comparison."""
from gemm_kernels.notebook import ch08_waves


def test_waves_is_blocks_over_what_fits():
    # 512 blocks of 64 x 128 at 2048^3 on 132 SMs: 4 per SM is just under one wave,
    # 3 per SM a full wave and a 29% one.
    assert round(ch08_waves.waves(512, 4, 132), 2) == 0.97
    assert round(ch08_waves.waves(512, 3, 132), 2) == 1.29


def test_group_separates_rounds_from_blocks():
    row = lambda b7, b8, w7, w8: {"blocks/SM 07": b7, "blocks/SM 08": b8,
                                  "waves 07": w7, "waves 08": w8}
    assert ch08_waves._group(row(2, 2, "0.97", "0.97")) == "same blocks per SM"
    assert ch08_waves._group(row(4, 3, "0.97", "1.29")) == "other blocks per SM, other rounds"
    assert ch08_waves._group(row(3, 2, "1.29", "1.94")) == "other blocks per SM, same rounds"


def test_rows_cover_the_recorded_sweep_sorted():
    rows = ch08_waves.rows(2048, sms=132)
    assert rows, "the recording holds both kernels' sweeps at 2048^3"
    ratios = [float(r["08 / 07"]) for r in rows]
    assert ratios == sorted(ratios)
