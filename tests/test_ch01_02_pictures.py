"""Chapters 01-02: the thread -> element map, the sector pictures, the indexing mistake
through the checker, the SASS loop shown with its branch back, and the line limit next to
the recorded rates and counters."""
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gemm_kernels.core import style  # noqa: E402
from gemm_kernels.memory import ch01_02_sectors, ch01_indexing  # noqa: E402


def _lanes(ax):
    return sorted(int(t.get_text()) for t in ax.texts if t.get_text().isdigit())


@pytest.mark.parametrize("mapping, where", [("x->row", "rows 0 to 31 of column 0"),
                                            ("x->col", "columns 0 to 31 of row 0")])
def test_thread_map_labels_the_32_lanes_of_warp_0_readably(mapping, where):
    fig = ch01_02_sectors.thread_map("naive", [{"BLOCK": 32, "MAPPING": mapping}])
    ax = fig.axes[0]
    assert _lanes(ax) == list(range(32))
    assert all(t.get_fontsize() >= style.MIN_LABEL_POINTS for t in ax.texts)
    title = " ".join(ax.get_title().split())
    assert "{" not in title and where in title
    plt.close(fig)


def test_thread_map_puts_warp_0_where_the_kernel_puts_it():
    """BLOCK = 8, x->row: warp 0 is 8 rows by 4 columns, lane l at row l % 8, column l // 8."""
    fig = ch01_02_sectors.thread_map("naive", [{"BLOCK": 8, "MAPPING": "x->row"}])
    pos = {int(t.get_text()): t.get_position() for t in fig.axes[0].texts}
    assert all(pos[l] == (l // 8, l % 8) for l in range(32))
    plt.close(fig)


def test_a_warp_down_a_column_is_drawn_side_by_side_with_its_32_sectors_of_A():
    fig = ch01_02_sectors.sector_picture("naive", {"BLOCK": 32, "MAPPING": "x->row"})
    ax_c, ax_a, ax_b = fig.axes[:3]
    assert "in 32 sectors (32 lines" in " ".join(ax_a.get_title().split())
    assert "in 1 sector (1 line" in " ".join(ax_b.get_title().split())
    assert ax_c.get_position().x1 < ax_a.get_position().x0        # C beside A
    assert sum(int(t.get_text()) for t in ax_b.texts) == 32      # one element, 32 lanes
    plt.close(fig)


def test_the_coalesced_kernels_default_block_order_is_left_out_of_its_name():
    assert ch01_02_sectors.label("coalesced", {"BLOCK": 8}) == "coalesced, BLOCK = 8"
    assert "GRID = x->col" in ch01_02_sectors.label("coalesced", {"BLOCK": 8, "GRID": "x->col"})
    row = ch01_02_sectors.sector_table([("coalesced", {"BLOCK": 8})])[0]
    assert row["settings"] == "BLOCK = 8" and row["params"]["GRID"] == "x->row"


def test_sector_table_gives_the_profilers_sectors_per_request():
    row = ch01_02_sectors.sector_table([("naive", {"MAPPING": "x->row"})])[0]
    assert (row["A sectors"], row["B sectors"], row["sectors per request"]) == (32, 1, 16.5)
    assert row["sectors per step (A + B)"] == 33     # both loads: the line table's count
    row = ch01_02_sectors.sector_table([("coalesced", {"BLOCK": 16})])[0]
    assert row["sectors per request"] == 2 and isinstance(row["sectors per request"], int)


def test_a_brief_sector_table_leaves_out_the_columns_that_never_change():
    configs = [("naive", {"BLOCK": b, "MAPPING": "x->col"}) for b in (8, 32)]
    brief = ch01_02_sectors.sector_table(configs, brief=True)
    assert "kernel" not in brief.columns and "active lanes" not in brief.columns
    assert brief.title.startswith("naive, one warp")
    assert [r["128-byte lines (A + B)"] for r in brief] == [5, 2]
    full = ch01_02_sectors.sector_table(configs)
    assert "kernel" in full.columns and "active lanes" in full.columns
    assert full.title.startswith("one warp")


def test_the_bank_column_equals_the_lines_of_the_naive_kernel_at_a_power_of_two_size():
    # at 4096 a warp's rows of A are 4096 words apart and share one bank, so the words on
    # the busiest bank and the lines are one count for every configuration the chapter runs
    configs = [("naive", {"BLOCK": b, "MAPPING": m})
               for m in ("x->row", "x->col") for b in (8, 16, 32)]
    table = ch01_02_sectors.sector_table(configs, brief=True, banks=True)
    assert ([r["words on the busiest bank (A + B)"] for r in table]
            == [r["128-byte lines (A + B)"] for r in table] == [9, 17, 33, 5, 3, 2])
    assert "words on the busiest bank (A + B)" not in ch01_02_sectors.sector_table(configs).columns


def test_the_wrong_row_strides_pass_square_shapes_only():
    wrong = ch01_indexing.check_table([(16, 16, 16), (7, 13, 5), (13, 7, 5)], "M", "M")
    assert [r["checker"] for r in wrong] == ["pass", "FAIL", "FAIL"]
    assert wrong[2]["threads writing past C"] != "0"       # M > N: rows land past C
    right = ch01_indexing.check_table([(7, 13, 5), (13, 7, 5)], "K", "N")
    assert all(r["checker"] == "pass" and r["never written"] == "0" for r in right)


def test_never_written_counts_only_elements_no_thread_stores_to():
    # 7 x 13 with C[row * 7 + col]: the stores cover offsets 0 .. 6*7+12 = 54, so 91 - 55
    # elements are never written; the other NaN were written by threads that read past A.
    row = ch01_indexing.check_table([(7, 13, 5)], "M", "M")[0]
    assert row["never written"] == "36"
    assert row["wrong, read past A"] == "20"


def test_the_four_element_columns_are_disjoint_and_cover_c():
    for row in ch01_indexing.check_table([(7, 13, 5), (33, 65, 17), (65, 33, 17)], "M", "M"):
        parts = ("right", "wrong, read inside A", "wrong, read past A", "never written")
        assert sum(int(row[c].replace(",", "")) for c in parts) == \
            int(row["elements of C"].replace(",", ""))


def test_an_unknown_stride_is_refused():
    import numpy as np
    with pytest.raises(ValueError, match="row stride"):
        ch01_indexing.naive_on_cpu(np.ones((2, 3)), np.ones((3, 4)), a_stride="L")


def test_the_loop_listing_keeps_its_predicated_branch_back():
    from gemm_kernels import display
    text = str(display.sass_loop("naive", limit=4, tail=3))
    lines = text.splitlines()
    assert len(lines) == 4 + 1 + 3 and "instructions not shown" in lines[4]
    assert lines[-1].split("*/")[1].strip().startswith("@P")
    assert "BRA" in lines[-1]


def test_the_loop_mix_can_keep_a_few_opcodes_and_sum_the_rest():
    configs = [("naive", {"MAPPING": m}) for m in ("x->row", "x->col")]
    full = ch01_02_sectors.loop_mix(configs)
    short = ch01_02_sectors.loop_mix(configs, keep=("LDG", "FFMA"))
    assert list(short[0]) == ["configuration", "LDG", "FFMA", "other"]
    for f, s in zip(full, short):
        assert (s["LDG"], s["FFMA"]) == (f["LDG"], f["FFMA"]) == (32, 16)
        assert s["other"] == sum(n for op, n in f.items()
                                 if op not in ("configuration", "LDG", "FFMA"))
    assert short[0]["other"] == short[1]["other"] > 0


def test_line_count_separates_what_the_sector_count_does_not():
    rows = ch01_02_sectors.sector_table([("coalesced", {"BLOCK": b}) for b in (8, 16, 32)])
    assert [r["A sectors"] + r["B sectors"] for r in rows] == [5, 4, 5]
    assert [r["128-byte lines (A + B)"] for r in rows] == [5, 3, 2]
    assert ch01_02_sectors.lines([0, 31, 32, None]) == 2     # floats 0-31: one line


def test_line_rate_divides_the_model_by_the_recorded_cycles():
    from gemm_kernels.measure import records, studies
    table = ch01_02_sectors.line_rate("ch02_caches")
    assert [r["lines per warp and k"] for r in table] == [5, 3, 2]
    sms = records.current().device["sm_count"]
    for row, (_, rec) in zip(table, studies.results("ch02_caches")):
        if rec is None:
            assert row["lines per SM cycle"] == "-"
            continue
        M, N, K = rec["shape"]
        want = M * N * K / 32 / sms * row["lines per warp and k"] / rec["metrics"]["sm__cycles_elapsed.avg"]
        assert row["lines per SM cycle"] == f"{want:.2f}"


def test_occupancy_table_halves_at_half_warp_blocks():
    t = ch01_02_sectors.occupancy_table("coalesced", [{"BLOCK": 4}, {"BLOCK": 8}])
    assert [r["occupancy"] for r in t] == ["50%", "100%"]
    assert [r["active lanes per warp"] for r in t] == [16, 32]


# ------------------------------------------------------------------ the line limit

H200 = {"name": "NVIDIA H200", "sm_count": 132, "sm_clock_mhz": 1980.0}


def test_the_line_limit_averages_over_steps_where_rows_of_b_are_misaligned():
    aligned = ch01_02_sectors.line_limit("coalesced", {"BLOCK": 32}, H200,
                                         (2048,) * 3, steps=32)
    assert aligned["lines"] == 2 and aligned["sectors"] == 5
    # N = 2047: row k of B starts k floats before a line's start (mod 32); the warp's 32
    # floats of B fit one line at 1 start of 32, else they span 2 (and 5 sectors, not 4,
    # except at the 3 other starts that are whole sectors)
    odd = ch01_02_sectors.line_limit("coalesced", {"BLOCK": 32}, H200, (2047,) * 3, steps=32)
    assert odd["lines"] == 1 + 63 / 32 and odd["sectors"] == 1 + (4 * 4 + 28 * 5) / 32
    assert odd["GFLOP/s"] == pytest.approx(aligned["GFLOP/s"] * 2 / odd["lines"])


def test_the_line_limit_is_sms_times_clock_times_flop_per_line():
    lim = ch01_02_sectors.line_limit("naive", {"BLOCK": 32, "MAPPING": "x->row"}, H200)
    assert (lim["lanes"], lim["lines"], lim["sectors"]) == (32, 33, 33)
    assert lim["GFLOP/s"] == pytest.approx(132 * 1.98 * 64 / 33)
    half = ch01_02_sectors.line_limit("naive", {"BLOCK": 4, "MAPPING": "x->row"}, H200)
    assert (half["lanes"], half["lines"]) == (16, 5)
    assert half["GFLOP/s"] == pytest.approx(132 * 1.98 * 32 / 5)
    assert ch01_02_sectors.line_limit("coalesced", {"BLOCK": 32}, {})["GFLOP/s"] is None


def test_the_l1_table_divides_the_recorded_wavefronts_by_the_warp_steps():
    from gemm_kernels.measure import studies
    table = ch01_02_sectors.l1_table("ch02_l1_lines")
    for row, (step, rec) in zip(table, studies.results("ch02_l1_lines")):
        if rec is None:
            assert row["L1 data-stage wavefronts per warp and step"] == "-"
            continue
        M, N, K = rec["shape"]
        lanes = ch01_02_sectors.line_limit(step.kernel, step.params)["lanes"]
        want = rec["metrics"][ch01_02_sectors.WAVEFRONTS] / (M * N // lanes * K)
        assert row["L1 data-stage wavefronts per warp and step"] == f"{want:.2f}"


def test_the_clock_check_scales_the_profiled_clock_by_the_rate_ratio():
    for r in ch01_02_sectors.clock_check("ch02_l1_lines"):
        assert r["timed clock (MHz)"] == pytest.approx(r["profiled clock (MHz)"]
                                                       * r["timed / profiled"])


def test_check_prediction_asks_for_both_numbers_first(capsys, recorded_mode):
    ch01_02_sectors.check_prediction(None, 900)
    assert "both predictions first" in capsys.readouterr().out
    lim = ch01_02_sectors.line_limit(*ch01_02_sectors.PREDICT)["GFLOP/s"]
    ch01_02_sectors.check_prediction(lim, 1.0)
    out = capsys.readouterr().out.splitlines()
    assert "That is the model's number" in out[0] and "Not yet" in out[1]
    # a wrong (b) keeps the measured rate back until it is right
    assert not any(line.startswith("Measured at") for line in out)
    half = ch01_02_sectors._rate(*ch01_02_sectors.PREDICT_FROM, 2048)["gflops"]["median"] / 2
    ch01_02_sectors.check_prediction(lim, half)
    assert capsys.readouterr().out.splitlines()[2].startswith("Measured at 2048^3")


def test_the_rate_table_has_one_row_per_size_and_each_kernels_share():
    t = ch01_02_sectors.rate_table(["naive", "coalesced"], sizes=(2048,))
    assert len(t) == 1 and "coalesced: % of cuBLAS" in t.columns
    # each kernel's own cuBLAS, so that its share can be checked
    row = t[0]
    for k in ("naive", "coalesced"):
        share = 100 * row[f"{k} (GFLOP/s)"] / row[f"cuBLAS beside {k} (GFLOP/s)"]
        assert share == pytest.approx(row[f"{k}: % of cuBLAS"], rel=1e-6)
    one = ch01_02_sectors.rate_table(["naive"], sizes=(2048,))
    assert "cuBLAS, timed beside it (GFLOP/s)" in one.columns
    # only the shares asked for: the kernels' rates and their ratio stay
    narrow = ch01_02_sectors.rate_table(["naive", "coalesced"], sizes=(2048,),
                                        shares=("coalesced",))
    assert "cuBLAS beside naive (GFLOP/s)" not in narrow.columns
    assert "naive: % of cuBLAS" not in narrow.columns
    assert {"naive (GFLOP/s)", "cuBLAS beside coalesced (GFLOP/s)",
            "coalesced / naive"} <= set(narrow.columns)


def test_the_rate_tables_spread_names_the_kernels_not_cublas():
    """The caption's spread is the kernels' runs only: cuBLAS's calls spread more
    (chapter 00), so the caption must not read as covering them."""
    t = ch01_02_sectors.rate_table(["naive"], sizes=(2048,))
    assert "slowest run of naive differ by" in t.title and "cuBLAS's calls spread" in t.title
