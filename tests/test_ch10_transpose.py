"""Chapter 10's tables and pictures (gemm_kernels.notebook.ch10_transpose): the loads in
flight read from the SASS, Little's law from the profiled counters, the DRAM and L2 table,
and the tiles the first blocks take in each block order. CPU only; the rows that need the
recording are checked against it where it has them."""
import matplotlib
import pytest

from gemm_kernels.exercises import magic
from gemm_kernels.notebook import ch10_transpose as c
from gemm_kernels.exercises.notebooks import solution_source

matplotlib.use("Agg")


def test_round_trips_split_the_loads_at_the_stores():
    assert c.round_trips(["LDG", "LDG", "LDG", "STG", "STG", "STG", "EXIT", "LDG", "STG"]) == [3, 1]
    assert c.round_trips(["LDG", "LDG.128", "STG.128"], family="LDG.128") == [1]
    assert c.round_trips(["STG", "EXIT"]) == []
    # a shared store needs its loaded value as much as a global one does
    assert c.round_trips(["LDG", "STS", "LDG", "LDG", "STS", "STS", "BAR"]) == [1, 2]
    assert c.round_trips(["STS", "LDG", "LDG", "STS"]) == [2]


def test_compact_counts_repeats():
    assert c.compact(["LDG", "LDG", "STG", "EXIT", "LDG"]) == "2 LDG, STG, EXIT, LDG"


def test_the_copy_sends_three_loads_then_one_and_copy_smem_four():
    assert c.round_trips(c.accesses("copy", {"T": "float"})) == [3, 1]
    assert c.round_trips(c.accesses("copy_smem", {"T": "float"})) == [4]


def test_a_round_trip_ends_at_the_first_shared_store_in_the_real_sass():
    # two tiles per block: ptxas stores the first loaded value to shared memory before it
    # sends the other seven loads, so a thread waits for one load, then for seven
    order = c.accesses("transpose_padded", {"T": "float", "STACK": 2})
    assert "STS" in order[order.index("LDG"):order.index("LDG") + 3]
    assert c.round_trips(order) == [1, 7]
    # the vector transpose's scalar path (the one that runs at odd shapes): four round trips
    assert c.round_trips(c.accesses("transpose_fast", {"T": "float"}), "LDG") == [3, 6, 6, 1]


def test_kernels_that_send_every_load_first_keep_one_round_trip():
    # the negative control: every STS comes after every load, so nothing is split
    assert c.round_trips(c.accesses("transpose_padded", {"T": "float", "STACK": 1})) == [4]
    assert c.round_trips(c.accesses("transpose_diagonal", {"T": "float"})) == [4]
    for rows, loads in ((4, 8), (8, 4), (16, 2)):
        order = c.accesses("copy_smem", {"T": "float", "TILE": 32, "ROWS": rows})
        assert c.round_trips(order) == [loads]


def test_the_in_flight_table_gives_the_bytes_a_warp_has_in_flight():
    rows = {r["kernel"]: r for r in c.in_flight_table()}
    assert "average" in c.IN_FLIGHT_BYTES and "round trip" in c.IN_FLIGHT_BYTES   # says what it averages
    # the average, then each round trip's bytes where there are several
    assert rows["copy"][c.IN_FLIGHT_BYTES] == "256 (384, then 128)"
    assert rows["copy, double"][c.IN_FLIGHT_BYTES] == "512 (768, then 256)"
    # two tiles per block: twice the one-tile kernel's loads, in two uneven round trips
    assert rows["padded transpose, two tiles per block, x->row order"][c.IN_FLIGHT_BYTES] == "512 (128, then 896)"
    assert rows["padded transpose, one tile per block, x->row order"][c.IN_FLIGHT_BYTES] == "512"
    assert rows["padded transpose, two tiles per block, x->row order"][c.TRIPS] == "1, then 7"
    assert len(c.in_flight_table().columns) == 5


def test_the_in_flight_table_prints_every_share_to_one_decimal():
    t = c.in_flight_table()
    # the profiled warps are little_table's; this table is the SASS and the timed rates
    assert not any("profiled" in col for col in t.columns)
    shares = [cell for row in t._cells() for col, cell in zip(t.columns, row) if "%" in col]
    assert shares and all(s == "-" or (s.endswith("%") and s[-3] == ".") for s in shares), shares


def test_table_prints_percentages_at_fixed_decimals_where_asked():
    from gemm_kernels.core.table import Table
    rows = [{"kernel": "a", "% of copy": 96.0}, {"kernel": "b", "% of copy": 101.23}]
    assert [r[1] for r in Table(rows, ["kernel", "% of copy"])._cells()] == ["96%", "101%"]
    fixed = Table(rows, ["kernel", "% of copy"], pct_decimals=1)._cells()
    assert [r[1] for r in fixed] == ["96.0%", "101.2%"]
    assert fixed and rows[0]["% of copy"] == 96.0          # the rows keep their numbers


def test_part2_answers_include_the_sm_bytes_at_rows_8():
    key = c.in_flight_key()
    answers = {r["question"]: r["answer"] for r in c.in_flight_answers()}
    per_warp_8 = c.round_trips(c.accesses("copy_smem", {"T": "float", "TILE": 32, "ROWS": 8}))[0] * 32 * 4
    assert answers[c.SM_BYTES] == key["warp slots per SM"] * per_warp_8
    assert answers["warps needed, ROWS=16"] == answers[c.SM_BYTES] // answers["bytes a warp, ROWS=16"]


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


def test_launch_defaults_are_the_registrys():
    rows = {r["parameter"]: r["value"] for r in c.launch_defaults("transpose_padded")}
    assert rows == {"T": "float", "TILE": "32", "ROWS": "8", "PAD": "1",
                    "ORDER": "x->row (1)", "STACK": "2"}
    assert [r["parameter"] for r in c.launch_defaults("copy")] == ["T", "TILE", "ROWS"]


def test_the_copy_chain_defines_both_counts_of_bytes_in_flight():
    rows = {r["quantity"]: r for r in c.copy_little()}
    row = rows["bytes a warp has in flight, averaged over its round trips"]
    assert row["value"] == "256" and "384 in the first round trip, 128 in the second" in row["from"]
    # the per-SM figure of this table and of the evidence table are the same average, and
    # the timed rate against the profiled one says which it is
    assert "bytes in flight per SM, averaged over the round trips" in rows
    assert "read bandwidth, timed (not under the profiler)" in rows


@pytest.mark.parametrize("shape, study", [(c.SQUARE, "ch10_naive_store"), (c.ODD, c.DRAM_STUDY)])
def test_the_copy_chain_takes_the_warps_profiled_at_its_own_shape(shape, study):
    """Section 5 works the chain at 8192 x 8192 and appendix A.2 at the ragged shape: each
    reads the float copy's warps resident from the profile at that shape, not the other."""
    row = next(r for s, r in c.studies.results(study, shape)
               if s.kernel == "copy" and c.kernel_of("copy").resolve(s.params)["T"] == "float")
    assert tuple(row["shape"]) == shape
    warps = row["metrics"]["sm__warps_active.avg.pct_of_peak_sustained_active"] / 100 * 64
    table = c.copy_little(shape)
    assert c._shape_text(shape) in table.title
    rows = {r["quantity"]: r["value"] for r in table}
    assert rows["warps resident per SM"] == f"{warps:.1f}"
    assert c.copy_little().title == c.copy_little(c.SQUARE).title


def test_source_without_leaves_out_one_comment_paragraph():
    full = str(c.display.source("transpose_fast"))
    cut = str(c.source_without("transpose_fast", "(Moving aligned pairs"))
    assert "Moving aligned pairs" in full and "Moving aligned pairs" not in cut
    assert "measured no faster" not in cut
    assert "Shared tile row length" in cut and "__global__ void transpose_fast" in cut
    assert len(full.splitlines()) - len(cut.splitlines()) == 4     # three lines and the "//"
    with pytest.raises(ValueError):
        c.source_without("transpose_fast", "no such words")


def test_the_column_read_picture_names_its_configuration_and_marks_conflicts():
    ax = c.plot_column_read("transpose_padded", {"T": "float", "TILE": 16, "PAD": 1})
    assert "TILE = 16" in ax.get_title() and "PAD = 1" in ax.get_title()
    assert "2 wavefronts" in ax.get_title()
    assert any(p.get_edgecolor()[:3] != (0, 0, 0) and p.get_linewidth() == 2 for p in ax.patches)
    ax = c.plot_column_read("transpose_padded", {"T": "float", "TILE": 32, "PAD": 1})
    assert "1 wavefront" in ax.get_title() and not any(p.get_linewidth() == 2 for p in ax.patches)
    assert "box label: lane" in ax.figure._suptitle.get_text()     # the numbers in the boxes


def test_the_copy_rates_name_the_shape_of_the_device_copys_share_of_the_peak():
    text = c.copy_rates()
    assert "of the DRAM peak at " + c._shape_text(c.ODD) in text


def test_the_heat_map_title_gives_the_shape_and_what_a_cell_is():
    ax = c.padded_heatmap()
    assert "8192 x 8192" in ax.get_title() and "best over ORDER and STACK" in ax.get_title()


def test_every_mistake_of_the_solution_table_applies():
    for what, changes in c.MISTAKES:
        src = c._mistake_source(changes)
        assert src != solution_source(c.EXERCISE), what
    assert "#pragma unroll\n    for (int dy" in c._mistake_source(None)


def test_the_warp_time_parts_add_up_and_the_pictures_draw():
    for w in c.warp_times():
        assert w["loads"] + w["barrier"] + w["other"] == pytest.approx(w["cycles"])
    c.plot_warp_time()
    fig = c.plot_block_orders()
    assert any("launch number" in a.get_ylabel() for a in fig.axes)     # the colour bar


def test_submitted_returns_the_last_source_of_an_exercise(monkeypatch):
    monkeypatch.setattr(magic, "grade", lambda name, source, gpu=None: "report")
    magic.submit("10_in_flight", "// my copy")
    assert magic.submitted("10_in_flight") == "// my copy"
    with pytest.raises(ValueError):
        magic.submitted("no_such_exercise")


def test_the_worked_solution_is_set_beside_the_copy_of_its_own_run():
    rows = list(c.solution_rates())
    assert [r["kernel"] for r in rows] == ["the chapter's copy",
                                           "the worked solution: every load first",
                                           "copy through a shared tile"]
    assert [r["loads before the first store"] for r in rows] == [3, 4, 4]
    if rows[1]["% of device copy"] is None:
        pytest.skip("the recording has no row of the worked solution")
    assert rows[0]["timed"] == rows[1]["timed"] == "same run"
    line = c.solution_gap()
    assert "closes" in line and f"{rows[1]['% of device copy']:.1f}%" in line, line


def test_a_pointer_answer_is_in_the_mistakes():
    src = c._mistake_source(dict(c.MISTAKES)["all loads first, through pointers (size_t)"])
    assert "src[(size_t)i * ROWS * cols]" in src and "v[i] = in[" not in src


def test_part_2_answers_come_from_the_sass_and_the_warp_slots():
    """copy_smem sends all TILE / ROWS loads first; ROWS = 16 would need twice the 64 warp
    slots an SM has to keep ROWS = 8's bytes in flight."""
    key = c.in_flight_key()
    assert [key[f"loads, ROWS={r}"] for r in (4, 16)] == [8, 2]
    assert [key[f"bytes a warp, ROWS={r}"] for r in (4, 16)] == [1024, 256]
    assert key["warps needed, ROWS=16"] == 128 and key["warp slots per SM"] == 64


def test_part_2_is_graded_item_by_item():
    key = c.in_flight_key()
    right = {k: key[k] for k in c.ANSWER_KEYS}
    assert c.in_flight_problems(right) == []
    c.assert_in_flight(right)
    assert "not answered yet" in c.in_flight_problems({k: None for k in c.ANSWER_KEYS})[0]
    wrong = {**right, "loads, ROWS=4": 4, "warps needed, ROWS=16": 64}
    problems = c.in_flight_problems(wrong)
    assert len(problems) == 2 and problems[0].startswith("loads, ROWS=4: 4 is not it")
    assert "ROWS=16" in problems[1] and "warps" in problems[1]
    with pytest.raises(AssertionError, match="part 2"):
        c.assert_in_flight(wrong)
    assert "not answered" in c.in_flight_problems({**right, "bytes a warp, ROWS=16": None})[0]


def test_bytes_that_follow_from_a_wrong_load_count_blame_the_count():
    """A wrong load count with bytes consistent with it (4 loads, 512 bytes): the bytes
    are refused too, but the hint says the multiplication is right and the count is off;
    bytes that follow from nothing get the hint about lanes and bytes."""
    key = c.in_flight_key()
    right = {k: key[k] for k in c.ANSWER_KEYS}
    problems = c.in_flight_problems({**right, "loads, ROWS=4": 4, "bytes a warp, ROWS=4": 512})
    assert len(problems) == 2 and problems[1].startswith("bytes a warp, ROWS=4: 512 is not it")
    assert "the load count is what is off" in problems[1], problems
    alone = c.in_flight_problems({**right, "bytes a warp, ROWS=4": 32})
    assert "load count" not in alone[0] and "32 lanes x 4 bytes" in alone[0], alone


def test_the_notebooks_ask_exactly_the_graded_questions():
    """The answer cell of the chapter names every key the check grades."""
    import json, pathlib
    nb = json.loads(pathlib.Path(__file__).parents[1].joinpath(
        "notebooks", "10_transpose.ipynb").read_text())
    cell = next("".join(x["source"]) for x in nb["cells"]
                if "".join(x["source"]).startswith("my_answer = {"))
    assert all(f'"{k}": None' in cell for k in c.ANSWER_KEYS)


def test_copy_smem_by_rows_counts_the_loads_and_compares_with_rows_8():
    t = c.copy_smem_by_rows()
    got = {r["ROWS"]: r for r in t}
    assert [got[r]["loads before the first store"] for r in (4, 8, 16)] == [8, 4, 2]
    assert got[16]["bytes a warp has in flight"] == 256
    if got[8]["GB/s (median)"]:
        assert got[8]["rate / rate at ROWS = 8"] == "1.00"
        assert got[8]["implied latency vs ROWS = 8"] == "1.00"
        # latency = bytes in flight per SM / rate, relative to ROWS = 8
        for r in (4, 16):
            per_sm = lambda x: got[x][c.WARPS_SM] * got[x]["bytes a warp has in flight"]
            want = (per_sm(r) / per_sm(8)) / (got[r]["GB/s (median)"] / got[8]["GB/s (median)"])
            assert got[r]["implied latency vs ROWS = 8"] == f"{want:.2f}"


def test_copy_smem_by_rows_counts_the_warps_of_the_timed_registers():
    """ROWS = 4's timed binary has 38 registers: 12 blocks of 4 warps, not 16, fit an SM."""
    from gemm_kernels.core import analysis
    from gemm_kernels.measure import lookup
    got = {r["ROWS"]: r for r in c.copy_smem_by_rows()}
    for r in (4, 8, 16):
        p = {"T": "float", "TILE": 32, "ROWS": r}
        timed = (lookup.binary("copy_smem", p) or {}).get("registers")
        assert got[r][c.WARPS_SM] == analysis.kernel_occupancy(
            "copy_smem", p, registers=timed).warps_per_sm
    if (lookup.binary("copy_smem", {"T": "float", "TILE": 32, "ROWS": 4}) or {}).get("registers") == 38:
        assert [got[r][c.WARPS_SM] for r in (4, 8, 16)] == [48, 64, 64]
    # the header says where the warps come from, in words a student knows
    assert "occupancy calculator" in c.WARPS_SM


def test_copy_orders_shows_the_copys_split_changing_with_rows():
    """The chapter's copy: 3 loads first at ROWS = 8, 1 of 8 at ROWS = 4 (ptxas's choice)."""
    got = {r["ROWS"]: r for r in c.copy_orders()}
    assert [got[r]["elements a thread"] for r in (8, 4, 2)] == [4, 8, 16]
    assert got[8]["loads and stores, in SASS order"] == "3 LDG, 3 STG, EXIT, LDG, STG, EXIT"
    assert got[8]["loads before the first store"] == 3
    assert got[4]["loads before the first store"] < 8
    # a kernel that sends every load first (copy_smem) has no split
    smem = {r["ROWS"]: r for r in c.copy_orders("copy_smem", rows=(8,))}
    assert smem[8]["loads before the first store"] == 4


def test_the_round_trip_picture_draws_two_trips_for_copy_and_one_for_the_goal():
    import matplotlib
    matplotlib.use("Agg")
    fig = c.plot_round_trips()
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert labels.count("2 round trips") == 1 and labels.count("1 round trip") == 2, labels
    assert "3 loads in flight: 384 B a warp" in labels


def test_the_mistakes_table_numbers_the_steps_as_the_report_does():
    assert c.STEPS.index("static") + 1 == 2 and c.STEPS.index("correct") + 1 == 3


def test_the_copys_sass_is_cut_to_its_guarded_accesses_and_exits():
    """Section 5's evidence in the student's view: three guarded loads, their stores, an
    EXIT behind a bounds test, then the fourth load; the rest counted, not shown."""
    text = str(c.sass_accesses("copy", {"T": "float"}))
    ops = [l.split()[1] if l.split()[1].startswith("@") is False else l.split()[2]
           for l in text.splitlines() if l.startswith("/*")]
    kinds = [op.split(".")[0] for op in ops]
    assert kinds[:kinds.index("STG")].count("LDG") == 3
    assert kinds.index("EXIT") < len(kinds) - 1 and kinds[kinds.index("EXIT") + 1] == "LDG"
    assert "@!P" in text and "instructions: addresses and bounds tests" in text
    assert "IMAD" not in text


def test_padding_steps_change_one_thing_per_row(recorded_mode):
    from gemm_kernels.core.launch import kernel_of
    from gemm_kernels.notebook import ch10_transpose as c
    resolved = [kernel_of(k).resolve({"T": "float", **change}) for _, k, change in c.PADDING_STEPS]
    # the first step is transpose_smem; as the padded kernel it is PAD 0, x->col, one tile
    as_padded = [{"PAD": 0, "ORDER": "x->col", "STACK": 1}] + [
        {k: p[k] for k in ("PAD", "ORDER", "STACK")} for p in resolved[1:]]
    for before, after in zip(as_padded, as_padded[1:]):
        assert sum(before[k] != after[k] for k in before) == 1, (before, after)
    assert resolved[-1] == kernel_of("transpose_padded").resolve({"T": "float"})
    t = c.padding_steps()
    assert len(t) == len(c.PADDING_STEPS) and "recorded on" in t.title
    assert all(v.rstrip("*").endswith("%") for row in t for k, v in row.items() if k != "step")


def test_little_table_gives_both_latencies_for_each_profiled_kernel():
    rows = c.little_table()
    if not c.warp_times():
        pytest.skip("the profiled counters are not recorded")
    assert len(rows) == len(c.warp_times())
    for r, w in zip(rows, c.warp_times()):
        trips = len(w["trips"])
        wait = w["loads"] / trips / w["clock"] / 1e3
        life = w["cycles"] / w["clock"] / 1e3
        assert r["B a warp reads (trips)"] == f"{w['bytes']:,} ({trips})"
        assert float(r[c.LITTLE_RATE]) == \
            pytest.approx(w["resident"] * w["bytes"] / trips / wait / 1e3, abs=0.05)
        assert r["load wait, % of life"] == f"{100 * w['loads'] / w['cycles']:.0f}%"
        # a warp's whole life is longer than its wait for loads
        assert float(r["warp life, µs"]) >= float(r["load wait / trip, µs"])


def test_the_naive_store_touches_a_sector_a_lane_and_the_tiled_store_a_row_of_them():
    assert c.warp_store_sectors(True) == 32
    assert c.warp_store_sectors(False) == 4                 # 32 floats, 128 bytes
    assert c.warp_store_sectors(False, "double") == 8
    assert c.warp_store_sectors(True, "double") == 32


def test_row_accesses_straddle_a_sector_more_only_where_rows_are_not_whole_sectors():
    # 4 rows of 40 floats (160 bytes): tile columns of 32 and 8 lanes, row starts drift
    # 0, 160, 320, 480 bytes, i.e. 0, 0, 0, 0 mod 32 -> aligned; 41 floats drift 4 B a row
    touched, fewest, n = c._row_piece_sectors(4, 40, 4, 32)
    assert (touched, fewest, n) == (4 * (4 + 1), 4 * (4 + 1), 8)
    touched, fewest, n = c._row_piece_sectors(2, 41, 4, 32)
    # row 0: [0,128) 4 sectors, [128,164) 2; row 1 starts at 164: [164,292) 5, [292,328) 2
    assert (touched, fewest, n) == (4 + 2 + 5 + 2, 4 + 2 + 4 + 2, 4)
    rows = {(r["T"], r["shape"]): r for r in c.sectors_per_access()}
    assert rows["float", "8192 x 8192"]["sectors per warp access, reading in"] == "4.00 (fewest 4.00)"
    ragged = rows["float", "8191 x 4097"]
    assert ragged["bytes per row: in, out"] == "16,388, 32,764"
    assert float(ragged["sectors per warp access, reading in"].split()[0]) > 4.5


def test_the_naive_sector_bound_is_the_copys_bytes_over_an_element_and_a_sector():
    rows = c.naive_sector_bound()
    assert [r["T"] for r in rows] == ["float", "double"]
    # float: 2 x 4 bytes over 4 + 32; double: 2 x 8 over 8 + 32
    assert rows[0]["sector bound, % of device copy"] == pytest.approx(100 * 8 / 36)
    assert rows[1]["sector bound, % of device copy"] == pytest.approx(40.0)
    assert rows[0]["32-byte sectors per warp store instruction: naive"] == 32 and rows[0]["coalesced"] == 4
    for r in rows:
        if r["timed, % of device copy"] is not None:
            assert 0 < r["timed, % of device copy"] < 100


def test_tile_rates_resolves_each_tile_with_the_other_defaults():
    rows = c.tile_rates()
    assert [r["TILE"] for r in rows] == [64, 32]
    # float, VEC_BYTES = 16: TILE / 4 lanes x ROWS = 16 rows of threads
    assert [r["threads a block"] for r in rows] == [256, 128]
    for r in rows:
        assert (r["GB/s"] is None) == (r["% of device copy"] is None)


def test_the_tile_picture_has_three_panels():
    import matplotlib
    matplotlib.use("Agg")
    fig = c.plot_tile_transpose()
    assert len(fig.axes) == 3


def test_the_reveals_hold_the_worked_solution_and_part_2s_answers():
    assert str(c.worked_solution()) == solution_source(c.EXERCISE)
    rows = {r["question"]: r["answer"] for r in c.in_flight_answers()}
    key = c.in_flight_key()
    assert rows == {k: key[k] for k in (*c.ANSWER_KEYS, c.SM_BYTES)}


def test_the_wavefront_comparison_names_the_profiled_shape():
    from gemm_kernels.memory import ch10_11_instructions as bc, wavefronts
    cfg = [("transpose_padded", {"T": "float", "TILE": 16, "PAD": 0})]
    m = wavefronts.recorded(*cfg[0])
    if m is None:
        pytest.skip("the recording has no counters for this configuration")
    assert "whole launches at " + " x ".join(map(str, m["shape"])) in bc.comparison(cfg).title


def test_queueing_compares_the_copy_with_the_one_tile_transpose_per_round_trip():
    text = c.queueing()
    if not c.warp_times():
        pytest.skip("the profiled counters are not recorded")
    rows = {r["kernel"]: r for r in c.little_table()}
    copy = next(r for k, r in rows.items() if k == "copy")
    # the waits it quotes are the little table's, for the copy and the one-tile kernel
    assert f"waits {copy['load wait / trip, µs']} µs" in text
    tile = next(r for k, r in rows.items() if "one tile" in k)
    assert f"waits {tile['load wait / trip, µs']} µs" in text
    assert "2.0 times as many" in text


def test_naive_store_l2_reads_the_profiled_counters(recorded_mode):
    """Each row's requests per warp store are the L2's write requests over the store
    instructions: one per 32-byte sector for the naive store (32 lanes, one element each),
    and the coalesced store's 128 bytes (float) or 256 bytes (double) in one or two."""
    from gemm_kernels.measure import studies
    rows = {r["kernel"]: r for r in c.naive_store_l2()}
    assert set(rows) == {s.label for s in studies.get(c.NAIVE_STORE_STUDY).steps}
    assert rows["naive transpose, float"]["L2 write requests per warp store"] == 32
    assert rows["copy, float"]["L2 write requests per warp store"] == 1
    assert rows["padded transpose, double"]["L2 write requests per warp store"] == 2
    step, rec = studies.results(c.NAIVE_STORE_STUDY)[1]
    assert rows[step.label]["time under the profiler (µs)"] == \
        rec["metrics"]["gpu__time_duration.sum"] / 1e3


def test_a_row_from_another_run_than_its_column_is_named():
    assert c._other_run_rows({"a": ["r1", "r1"], "b": [None, "r1"]}) == []
    got = c._other_run_rows({"a": ["r1", "r2", "r2", "r2"], "b": ["r1"] * 4})
    assert got == [("a", 0)]


def test_a_rate_from_another_run_is_starred_and_the_star_explained(recorded_mode):
    t = c.padding_steps()
    starred = [v for row in t for k, v in row.items() if k != "step" and v.endswith("*")]
    assert ("*: timed in another run" in t.title) == bool(starred)


def test_the_bottom_line_prints_the_chapters_steps_and_the_block_orders_gain():
    text = c.bottom_line()
    t = c.padding_steps()
    first, best = t[0], t[len(t) - 1]     # no padding, and this chapter's configuration
    for row in (first, best):
        square, odd = (row[k].rstrip("*") for k in ("float, 8192 x 8192", "float, 8191 x 4097"))
        assert f"{square} and {odd}" in text
    assert "x->row instead of x->col" in text and text.count("points") == 2


def test_the_mistakes_table_keeps_the_clause_that_names_the_problem():
    assert c._first_clause("wrong at 7x13: 84 elements wrong; worst at (0, 1)") == \
        "wrong at 7x13: 84 elements wrong"
    assert c._first_clause("a race: two threads (line 27): each element must ...") == \
        "a race: two threads (line 27)"
    assert c._first_clause("28 registers; at ROWS = 4 a note: moved. Offsets ...", "ROWS = 4") == \
        "at ROWS = 4 a note: moved"


def test_profiled_padded_steps_name_their_block_order():
    # the chapter compares block orders, so every profiled padded kernel says which it runs
    for w in c.warp_times():
        if w["kernel"].startswith("transpose_padded") or w["kernel"] == "transpose_diagonal":
            assert "order" in w["step"]


def test_your_orders_counts_a_passing_copy_and_says_what_to_do_before(monkeypatch):
    from types import SimpleNamespace
    monkeypatch.setattr(magic, "_SOURCES", {})
    monkeypatch.setattr(magic, "_LAST", {})
    assert "has not been run yet" in str(c.your_orders())
    answer = solution_source(c.EXERCISE)
    magic._SOURCES["10_in_flight"] = answer
    magic._LAST["10_in_flight"] = SimpleNamespace(passed=False)
    assert str(c.your_orders()).startswith("Pass part 1 first")
    magic._LAST["10_in_flight"] = SimpleNamespace(passed=True)
    rows = list(c.your_orders())
    assert [(r["ROWS"], r["kernel"]) for r in rows] == [
        (8, "the chapter's copy"), (8, "the submitted copy"),
        (4, "the chapter's copy"), (4, "the submitted copy")]
    assert [r["loads before the first store"] for r in rows[1::2]] == [4, 8]


def test_block_orders_time_the_three_orders_of_one_tile_per_block(recorded_mode):
    t = c.block_orders()
    assert [r["block order"] for r in t] == ["x->col", "x->row", "diagonal (transpose_diagonal)"]
    assert all(v.rstrip("*").endswith("%") for row in t for k, v in row.items() if k != "block order")
    assert "one tile per block" in t.title and "recorded on" in t.title


def test_block_order_pieces_are_the_pictures_captions():
    t = c.block_order_pieces()
    rows = {r["block order"]: r for r in t}
    assert list(rows) == ["x->col", "x->row", "diagonal"]
    for order, r in rows.items():
        got = c.pieces(c.first_wave(order)[2], 32, c.ODD)
        assert r["in, read: pieces of rows"] == got["in"]["pieces"]
        assert r["out: bytes a piece"] == round(got["out"]["bytes"])
    # x->col writes short pieces and x->row reads short ones; the diagonal makes both short
    assert rows["x->col"]["out: bytes a piece"] < rows["x->col"]["in: bytes a piece"]
    assert rows["x->row"]["in: bytes a piece"] < rows["x->row"]["out: bytes a piece"]
    assert rows["diagonal"]["in: bytes a piece"] < rows["x->col"]["out: bytes a piece"]


def test_the_solution_margin_is_set_against_a_shift_between_runs(recorded_mode):
    from gemm_kernels.notebook import ch10_loads_first
    text = ch10_loads_first.solution_margin()
    if not text:
        pytest.skip("the recording lacks one of the rates")
    rows = {r["kernel"]: r["% of device copy"] for r in c.solution_rates()}
    margin = rows["the worked solution: every load first"] - rows["copy through a shared tile"]
    assert f"is {margin:.1f} points ahead of copy_smem" in text
    assert "One kernel, timed in two runs" in text
    assert text.endswith("probably real, though not certain.") == (
        margin > float(text.split("moved by ")[1].split()[0]))
    assert ";" not in text


def test_the_evidence_table_keeps_the_rows_the_text_pairs():
    kernels = [r["kernel"] for r in c.in_flight_table()]
    assert kernels[:2] == ["copy", "copy through a shared tile"]
    assert not any("x->col" in k or "diagonal" in k for k in kernels)


def test_little_table_splits_into_the_law_and_a_warps_life():
    full = c.little_table()
    law, life = c.little_table(part="law"), c.little_table(part="life")
    if not list(full):
        pytest.skip("the recording has no profiled study")
    assert law.columns[0] == life.columns[0] == "kernel"
    assert set(law.columns[1:]) | set(life.columns[1:]) == set(full.columns[1:])
    assert not set(law.columns[1:]) & set(life.columns[1:])
    with pytest.raises(ValueError):
        c.little_table(part="other")


def test_the_main_chart_shows_only_the_kernels_section_4_explains():
    assert set(c.MAIN_KERNELS) == {"copy", "copy_smem", "transpose_naive", "transpose_smem",
                                   "transpose_padded"}
    assert c.KERNELS[:len(c.MAIN_KERNELS)] == c.MAIN_KERNELS
    assert {"transpose_diagonal", "transpose_fast"} <= set(c.KERNELS)


def test_the_main_chart_shows_the_padded_kernel_as_the_lesson_and_with_both_knobs():
    """Section 4's chart: the main kernels, the padded one twice, padding alone and then
    this chapter's configuration, each labelled as which."""
    names = [e if isinstance(e, str) else e[1] for e in c.MAIN_CHART]
    assert names == list(c.MAIN_KERNELS) + ["transpose_padded"]
    lesson, tuned = c.MAIN_CHART[-2:]
    assert "lesson" in lesson[0] and lesson[2] == c.PADDING_STEPS[1][2]
    assert "x->row + STACK = 2" in tuned[0] and tuned[2] == c.PADDING_STEPS[-1][2]
    # the tuning's cause is open, and the bar says so
    assert "measured, not explained" in tuned[0]


def test_the_round_trip_picture_has_no_time_unit():
    import matplotlib
    matplotlib.use("Agg")
    ax = c.plot_round_trips().axes[0]
    assert list(ax.get_xticks()) == [] and "µs" not in ax.get_xlabel()


def test_the_checks_table_gives_one_reading_per_check():
    rows = list(c.ruled_out())
    questions = [r["question"] for r in rows]
    assert len(questions) == 6 and len(set(questions)) == 6
    assert all(r["reading"].startswith(("yes", "no")) for r in rows)
    two = next(r for r in rows if "two tiles" in r["question"])
    assert "77.1%" in two["evidence (printed from the recording)"]
    assert "87.6%" in two["evidence (printed from the recording)"]


@pytest.mark.parametrize("shape", [c.ODD, c.SQUARE])
def test_out_pieces_line_quotes_the_pieces_table(shape):
    """A.3 prints the line at the main path's square shape, beside its ragged table."""
    rows = {r["block order"]: r for r in c.block_order_pieces(shape)}
    line = c.out_pieces_line(shape)
    assert f"{shape[0]} x {shape[1]}" in line
    for order in ("x->col", "x->row"):
        assert f"{order}: {rows[order]['out, written: pieces of rows']:,} pieces" in line
        assert f"{rows[order]['out: bytes a piece']:,} bytes" in line
    assert "diagonal" not in line


def test_block_orders_draw_two_orders_at_the_square_shape():
    """Any subset of the orders draws at any shape, captioned with its pieces."""
    fig = c.plot_block_orders(c.SQUARE, orders=("x->col", "x->row"))
    panels = [a for a in fig.axes if a.get_title()]
    assert [a.get_title() for a in panels] == ["x->col: in, read", "x->col: out, written",
                                               "x->row: in, read", "x->row: out, written"]
    rows = {r["block order"]: r for r in c.block_order_pieces(c.SQUARE)}
    assert f"{rows['x->row']['out, written: pieces of rows']:,} pieces" in panels[3].get_xlabel()
    assert "8192 x 8192" in fig._suptitle.get_text()


def test_latency_check_is_the_checks_tables_first_row():
    """A.4's table, at the ragged shape of its study, opens with the check at that shape."""
    first = list(c.ruled_out())[0]
    assert first["evidence (printed from the recording)"] == c.latency_check(c.ODD, check=True)
    assert "stall counter" in c.latency_check() and "Little's law" in c.latency_check()


def test_latency_check_reads_the_square_profile_beside_the_law_table():
    """Section 5's check is at 8192 x 8192, the shape of copy_little's table: the stall
    cycles are the float copy's row of the study profiled there, and the law's latency
    is the table's."""
    text = c.latency_check()
    w = next(w for w in c.warp_times("ch10_naive_store")
             if w["kernel"] == "copy" and w["params"]["T"] == "float")
    assert text.startswith("copy, 8192 x 8192,")
    assert f"{w['loads']:,.0f} cycles" in text
    assert f"{w['loads'] / 2 / w['clock'] / 1e3:.2f} µs a round trip" in text
    assert f"{c._copy_chain(c.SQUARE)['latency'] * 1e6:.2f} µs" in text
    assert f"{100 * w['loads'] / w['cycles']:.0f}% of their life," in text
    assert list(c.copy_little())[-1]["value"].startswith(text.split("the table above: ")[1][:4])
    # the main path prints the measurement and the law's estimate; the arithmetic check
    # (law x waiting share) only with check=True, for the appendix
    assert len(text.splitlines()) == 2
    assert text.splitlines()[0].startswith("copy, 8192 x 8192, measured by the stall counter")


def test_latency_check_prints_the_laws_latency_times_the_waiting_share():
    """The last line multiplies the law's latency by the share of a warp's life spent
    waiting, and sets the stall counter's latency beside the product."""
    w = next(w for w in c.warp_times("ch10_naive_store")
             if w["kernel"] == "copy" and w["params"]["T"] == "float")
    law = c._copy_chain(c.SQUARE)["latency"] * 1e6
    last = c.latency_check(check=True).splitlines()[-1]
    assert f"{law:.2f} µs x {100 * w['loads'] / w['cycles']:.0f}%" in last
    assert f"= {law * w['loads'] / w['cycles']:.2f} µs" in last
    assert last.endswith(f"the stall counter's {c._stall_latency(c.SQUARE):.2f} µs.")


def test_the_padded_lesson_source_is_transpose_smem_with_one_changed_line():
    smem = str(c.kernel_source("transpose_smem")).splitlines()
    lesson = str(c.padded_lesson_source()).splitlines()
    changed = [(a, b) for a, b in zip(smem, lesson) if a != b]
    assert len(smem) == len(lesson) and len(changed) == 4     # and the name, aligned
    assert "int PAD>" in changed[0][1] and "void transpose_padded(" in changed[1][1]
    assert "tile[TILE][TILE + PAD]" in changed[3][1]
    assert "STACK" not in "\n".join(lesson) and "ORDER" not in "\n".join(lesson)


def test_the_worked_solution_is_a_variant_the_solution_study_profiles():
    """The study profiles the copy and the worked solution in one run; the solution's
    step launches the registered worked solution, whose SASS sends its 4 loads first."""
    from gemm_kernels.measure import studies
    st = studies.get(c.SOLUTION_STUDY)
    assert not studies.problems(st)
    assert [s.variant for s in st.steps] == [None, c.SOLUTION]
    k = studies.step_kernel(st.steps[1])
    assert k.name == c.SOLUTION
    assert c.round_trips(c._sass_order(k, k.resolve(st.steps[1].params))) == [4]


def _stub_solution_profile(monkeypatch):
    """The profile study's two steps without rows; returns a function that gives them
    rows (per issued instruction ratios with as many instructions as warps, so a warp's
    stall cycles are the ratio itself: 3,000 for the copy, 1,500 for the solution)."""
    from gemm_kernels.measure import studies
    st = studies.get(c.SOLUTION_STUDY)
    warps = c._warps("copy", {"T": "float"}, c.SQUARE)

    def row(long_stall):
        return {"shape": list(c.SQUARE), "run": "r", "metrics": {
            "smsp__inst_executed.sum": warps,
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": long_stall,
            "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio": 100.0,
            "sm__warps_active.avg.pct_of_peak_sustained_active": 75.0,
            "sm__cycles_elapsed.avg": 1.5e5, "gpu__time_duration.sum": 1.0e5,
            "dram__bytes_read.sum": 1.0e9}}

    def recorded():
        monkeypatch.setattr(studies, "results",
                            lambda *a, **k: list(zip(st.steps, (row(3000.0), row(1500.0)))))
    monkeypatch.setattr(studies, "results", lambda *a, **k: [(s, None) for s in st.steps])
    return recorded


def test_solution_profile_is_not_recorded_yet_then_shows_both_rows(monkeypatch):
    """Until the study's rows exist the table says so; with rows, one line per kernel:
    round trips and bytes per round trip from each kernel's own SASS, the wait per
    round trip = stall cycles / round trips / the profiler's clock."""
    recorded = _stub_solution_profile(monkeypatch)
    assert c.solution_profile().title.startswith("Not recorded yet")
    recorded()
    copy, sol = list(c.solution_profile())
    assert copy["round trips (SASS)"] == 2 and sol["round trips (SASS)"] == 1
    assert copy["bytes a warp has in flight, per round trip"] == "384, then 128"
    assert sol["bytes a warp has in flight, per round trip"] == "512"
    assert copy["warps resident per SM"] == "48.0"
    assert copy["wait per round trip, µs"] == f"{3000 / 2 / 1.5 / 1e3:.2f}"
    assert sol["wait per round trip, µs"] == f"{1500 / 1 / 1.5 / 1e3:.2f}"
    assert sol["share of a warp's life waiting for loads"] == f"{100 * 1500 / 1600:.0f}%"


def test_sass_beside_shows_the_copy_and_copy_smem_with_their_round_trips():
    """Section 5.1's listing: both kernels, titled with their loads per round trip; the
    copy_smem column also shows its barrier and shared loads."""
    b = c.sass_beside()
    (t1, copy), (t2, smem) = b.titled
    assert t1 == "copy: loads per round trip 3, then 1" and t2 == "copy_smem: loads per round trip 4"
    assert "BAR" in smem and "LDS" in smem and "STS" in smem and "BAR" not in copy
    assert "<pre>" in b._repr_html_() and repr(b).startswith(t1)
    # the default listing (other notebooks print it) is unchanged: no barrier, no LDS
    assert "BAR" not in c.sass_accesses("copy_smem", {"T": "float", "ROWS": 8})


def test_column_read_prediction_is_graded_against_the_bank_model(capsys):
    """Section 3's four cases: the key is the model's column-read wavefronts (a: 1, b: 2,
    c: 2, d: 2); a wrong number gets a question, not the number."""
    assert c.column_read_key() == {"a": 1, "b": 2, "c": 2, "d": 2}
    c._COLUMN_TRIES.clear()
    c.check_column_reads({k: None for k in c.COLUMN_CASES})
    assert "write your four predictions" in capsys.readouterr().out
    c.check_column_reads({"a": 1, "b": 1, "c": 2, "d": 2})
    out = capsys.readouterr().out
    assert "not yet" in out and "(b)" in out and "(a)" not in out and "is not it" in out
    c.check_column_reads({"a": 1, "b": 2, "c": 2, "d": 2})
    assert capsys.readouterr().out.startswith("right")


def test_solution_profile_reading_works_its_ratios_out_from_the_two_rows(monkeypatch):
    """The reading under the profile: the round trips, the bytes per round trip, the
    wait per round trip and in all (µs at each row's clock), the share of life; '' until
    both rows exist."""
    recorded = _stub_solution_profile(monkeypatch)
    assert c.solution_profile_reading() == ""
    recorded()
    text = c.solution_profile_reading()
    trips, wait, life = text.splitlines()
    assert "2 (copy) -> 1 (worked solution)" in trips and "256 -> 512 (2.0 x)" in trips
    assert "1.00 -> 1.00 µs (1.00 x)" in wait and "2.00 -> 1.00 µs (-50%)" in wait
    assert f"{100 * 3000 / 3100:.0f}% -> {100 * 1500 / 1600:.0f}%" in life


def test_smem_bound_is_one_wavefront_per_sm_and_clock():
    """Chapter 04's bound for the transposes: transpose_smem's float block costs 32
    store wavefronts and 32 x 32 load wavefronts for 1,024 elements; padding leaves one
    wavefront per instruction; the bound scales with the bytes each wavefront carries."""
    from gemm_kernels.measure import records
    props = records.described_device()
    b = c.smem_bound("transpose_smem", {"T": "float"})
    assert b["wavefronts"] == 32 + 32 * 32 and b["elements"] == 1024
    want = props["sm_count"] * props["sm_clock_mhz"] * 1e6 * 1024 / 1056 * 8 / 1e9
    assert b["bound GB/s"] == pytest.approx(want)
    d = c.smem_bound("transpose_smem", {"T": "double"})
    assert d["wavefronts"] == 2 * 32 + 32 * 32        # 64-bit: two phases a store
    padded = c.smem_bound("transpose_padded", {"T": "float", "PAD": 1, "STACK": 1})
    assert padded["wavefronts"] == 64 and padded["bound GB/s"] > 10 * b["bound GB/s"]


def test_smem_bound_table_sets_the_timed_rate_against_the_bound(recorded_mode):
    t = c.smem_bound_table()
    rows = list(t)
    assert [r["T"] for r in rows] == ["float", "double"] * 2
    first = rows[0]
    if first["timed, GB/s"]:
        share = 100 * first["timed, GB/s"] / first["shared-memory bound, GB/s"]
        assert first["timed, % of the bound"] == f"{share:.0f}%"


def test_the_main_paths_bottom_line_stops_at_the_padded_tile():
    text = c.bottom_line(shapes=[c.SQUARE], knobs=False)
    assert "x->row" not in text and "STACK" not in text and "two tiles" not in text
    assert len(text.splitlines()) == 1 + 3
