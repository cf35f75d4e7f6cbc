"""Chapter 10's tables and pictures (gemm_kernels.notebook.ch10_transpose): the loads in
flight read from the SASS, Little's law from the profiled counters, the DRAM and L2 table,
and the tiles the first blocks take in each block order. CPU only; the rows that need the
recording are checked against it where it has them."""
import matplotlib
import pytest

from gemm_kernels.exercises import magic
from gemm_kernels.notebook import ch10_transpose as c

matplotlib.use("Agg")


def test_round_trips_split_the_loads_at_the_stores():
    assert c.round_trips(["LDG", "LDG", "LDG", "STG", "STG", "STG", "EXIT", "LDG", "STG"]) == [3, 1]
    assert c.round_trips(["LDG", "LDG.128", "STG.128"], family="LDG.128") == [1]
    assert c.round_trips(["STG", "EXIT"]) == []


def test_compact_counts_repeats():
    assert c.compact(["LDG", "LDG", "STG", "EXIT", "LDG"]) == "2 LDG, STG, EXIT, LDG"


def test_the_copy_sends_three_loads_then_one_and_copy_smem_four():
    assert c.round_trips(c.accesses("copy", {"T": "float"})) == [3, 1]
    assert c.round_trips(c.accesses("copy_smem", {"T": "float"})) == [4]
    assert c.round_trips(c.accesses("transpose_padded", {"T": "float", "STACK": 2})) == [8]


def test_the_in_flight_table_gives_the_bytes_a_warp_has_in_flight():
    rows = {r["kernel"]: r for r in c.in_flight_table()}
    assert rows["copy"]["bytes a warp has in flight"] == 3 * 4 * 32
    assert rows["copy, double"]["bytes a warp has in flight"] == 3 * 8 * 32
    assert rows["padded transpose, two tiles per block"]["loads before the first store"] == 8


def test_first_wave_holds_the_blocks_the_gpu_holds_at_once():
    for order in ("x->col", "x->row", "diagonal"):
        ty, tx, taken = c.first_wave(order, sms=132)
        assert (ty, tx) == (256, 129)
        assert len(taken) == 8 * 132           # 8 blocks of 256 threads per SM
        assert all(0 <= r < ty and 0 <= col < tx for r, col in taken)


def test_x_col_reads_whole_rows_and_x_row_writes_whole_rows():
    _, _, col = c.first_wave("x->col", sms=132)
    _, _, row = c.first_wave("x->row", sms=132)
    p_col, p_row = c.pieces(col, 32, c.ODD), c.pieces(row, 32, c.ODD)
    assert p_col["in"]["bytes"] > 10 * p_col["out"]["bytes"]
    assert p_row["out"]["bytes"] > 10 * p_row["in"]["bytes"]


def test_pieces_of_one_tile_at_the_edge_are_cut_to_the_matrix():
    got = c.pieces({(0, 0): 0}, 32, (8, 20))
    assert got["in"] == {"pieces": 8, "bytes": 20 * 4}
    assert got["out"] == {"pieces": 20, "bytes": 8 * 4}


def test_littles_law_accounts_for_the_profiled_read_rate():
    rows = c.little_table()
    if len(rows) == 0 or "read GB/s, measured" not in rows.columns:
        pytest.skip("the profiled study ch10_dram is not in this recording")
    for r in rows:
        assert abs(r["read GB/s, Little's law"] / r["read GB/s, measured"] - 1) < 0.15, r


def test_the_warp_time_parts_add_up_and_the_pictures_draw():
    for w in c.warp_times():
        assert w["loads"] + w["barrier"] + w["other"] == pytest.approx(w["cycles"])
    c.plot_warp_time()
    c.plot_block_orders()


def test_submitted_returns_the_last_source_of_an_exercise(monkeypatch):
    monkeypatch.setattr(magic, "grade", lambda name, source, gpu=None: "report")
    magic.submit("10_in_flight", "// my copy")
    assert magic.submitted("10_in_flight") == "// my copy"
    with pytest.raises(ValueError):
        magic.submitted("no_such_exercise")
