"""ch08_waves: the wave count, the rounds of a launch and the grouping of chapter 08's
sweep comparison (its appendix)."""
from gemm_kernels.notebook import ch08_waves


def test_waves_is_blocks_over_what_fits():
    # 512 blocks of 64 x 128 at 2048^3 on 132 SMs: 4 per SM is just under one wave,
    # 3 per SM a full wave and a 29% one.
    assert round(ch08_waves.waves(512, 4, 132), 2) == 0.97
    assert round(ch08_waves.waves(512, 3, 132), 2) == 1.29


def test_rounds_spell_out_the_last_partial_round():
    assert ch08_waves.rounds(512, 4, 132) == "1 x 4"            # 512 <= 528: one round
    assert ch08_waves.rounds(512, 3, 132) == "1 x 3 + 1 x 1"    # 396, then 116 alone
    assert ch08_waves.rounds(512, 2, 132) == "1 x 2 + 1 x 2"    # 264, then 248 on 132 SMs
    assert ch08_waves.rounds(528, 4, 132) == "1 x 4"
    assert ch08_waves.rounds(1056, 4, 132) == "2 x 4"


def test_group_compares_blocks_per_sm():
    row = lambda b7, b8: {"blocks/SM 07": b7, "blocks/SM 08": b8}
    assert ch08_waves._group(row(2, 2)) == "same blocks per SM"
    assert ch08_waves._group(row(4, 3)) == "double buffering fits fewer blocks"
    assert ch08_waves._group(row(1, 2)) == "double buffering fits more blocks"


def test_rows_cover_the_recorded_sweep_sorted():
    rows = ch08_waves.rows(2048, sms=132)
    assert rows, "the recording holds both kernels' sweeps at 2048^3"
    ratios = [float(r["08 / 07"]) for r in rows]
    assert ratios == sorted(ratios)
    alone = ch08_waves.rows(2048, sms=132, one_per_sm=True)
    assert alone and all(r["one per SM"] and r["blocks/SM 07"] == r["blocks/SM 08"] == 1
                         for r in alone)


def test_the_more_blocks_case_is_explained_by_registers():
    from gemm_kernels.notebook import ch08_waves
    note = ch08_waves.more_blocks_note()
    assert note and "registers per thread" in note and "fits 2" in note
