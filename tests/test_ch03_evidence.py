"""Chapter 03's evidence at 4096^3 (study ch03_caches): the predicted global loads, the
traffic table and picture, the stall plot by BLOCK, and the split of BLOCK = 8's time
into instructions and cycles per instruction."""
import contextlib
import re
import io

import matplotlib
import pytest

matplotlib.use("Agg")

from gemm_kernels.notebook import ch03_evidence as ch03  # noqa: E402


def _quiet(f, *a, **k):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        got = f(*a, **k)
    return got, out.getvalue()


def test_the_prediction_is_two_n_cubed_over_block_floats():
    assert ch03.predicted_load_bytes(32, 4096) == 2 * 4096 ** 3 // 32 * 4 == 17_179_869_184
    assert ch03.predicted_load_bytes(8, 64) == 2 * ch03.predicted_load_bytes(16, 64)
    # One block of 2 x 2 threads on a 2 x 2 x 2 GEMM copies 2 tiles of 4 floats once.
    assert ch03.predicted_load_bytes(2, 2) == 2 * 4 * 4


def _fake(monkeypatch, l1_sectors, dram, hit=0.0):
    """Recorded rows with the given counters for every step, a timed rate of 1 ms at
    4096^3 and a device copy of 4,000 GB/s."""
    def row(study, kernel, params=None):
        return {"metrics": {ch03.L1_SECTORS: l1_sectors[params["BLOCK"]],
                            ch03.DRAM_READ: dram[params["BLOCK"]], ch03.L1_HIT: hit}}
    flops = 2 * 4096 ** 3
    monkeypatch.setattr(ch03, "_study_row", row)
    monkeypatch.setattr(ch03, "_rate", lambda *a: {"gflops": {"median": flops / 1e-3 / 1e9}})
    monkeypatch.setattr(ch03, "_copy_gbps", lambda: 4000.0)


def test_traffic_rows_turn_sectors_and_bytes_into_gigabytes_and_a_dram_rate(monkeypatch):
    _fake(monkeypatch, {8: 2e9, 16: 1e9, 32: 5e8}, {8: 4e9, 16: 2e9, 32: 1e9})
    rows = ch03.traffic_rows()
    assert [r["BLOCK"] for r in rows] == [8, 16, 32, 32]
    assert rows[0]["asked of L1, GB"] == pytest.approx(2e9 * 32 / 1e9)
    assert rows[0]["read from DRAM, GB"] == pytest.approx(4.0)
    # 4 GB in the 1 ms of the timed run: 4,000 GB/s, all of a device copy.
    assert rows[0]["DRAM GB/s at the timed rate"] == pytest.approx(4000.0)
    assert rows[0]["% of a device copy"] == pytest.approx(100.0)
    assert rows[-1]["kernel"].startswith(ch03.BEFORE) and rows[-1]["predicted loads, GB"] is None


def test_traffic_leaves_out_what_was_not_profiled(monkeypatch):
    monkeypatch.setattr(ch03, "_study_row", lambda *a, **k: None)
    assert ch03.traffic_rows() == []
    fig, out = _quiet(ch03.traffic)
    assert "not recorded" in fig.axes[0].texts[0].get_text()
    matplotlib.pyplot.close(fig)


def test_the_recorded_loads_are_what_the_prediction_says():
    rows = [r for r in ch03.traffic_rows() if r["predicted loads, GB"] is not None]
    if not rows:
        pytest.skip("ch03_caches not in the recording")
    for r in rows:
        # Every element of a tile is loaded once, in whole sectors.
        assert r["asked of L1, GB"] == pytest.approx(r["predicted loads, GB"], rel=0.01)
        # DRAM reads fall by BLOCK as well, and are less than what the loads ask for.
        assert 0.3 < r["read from DRAM, GB"] / r["predicted loads, GB"] < 0.7
        # DRAM is not the limit: well under what a device copy reaches.
        assert r.get("% of a device copy", 0) < 50


@pytest.mark.parametrize("name", ["traffic", "stall_plot"])
def test_the_pictures_are_readable(name):
    from test_pictures import test_pictures_are_readable
    test_pictures_are_readable(name, lambda: _quiet(getattr(ch03, name))[0])


def test_the_bounds_picture_has_a_bar_pair_per_block():
    ax = ch03.block_bounds_plot()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0] == "shared wavefronts + global lines"
    matplotlib.pyplot.close(ax.figure)
    # sorted by bound: BLOCK = 4 (half-empty warps) lowest, at the bottom
    assert labels[0].startswith("BLOCK=4") and "16 lanes per warp" in labels[0]
    assert {lb.split()[0] for lb in labels} <= {f"BLOCK={b}" for b in ch03.BLOCKS}
    assert "shared + global-lines bound" in ax.get_title()


def test_against_coalesced_compares_l1_and_dram_bytes(monkeypatch):
    _fake(monkeypatch, {32: 5e8}, {32: 1e9}, hit=95.0)
    first, second = ch03.against_coalesced().splitlines()
    assert first.startswith("chapter 02, coalesced") and second.startswith("smem_tiled, BLOCK = 32")
    assert "16.0 GB (95% hit), reads 1.0 GB from DRAM" in second
    monkeypatch.setattr(ch03, "_study_row", lambda *a, **k: None)
    assert "not profiled" in ch03.against_coalesced()


def test_the_stall_plot_has_chapter_02_and_each_block():
    fig = ch03.stall_plot()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    matplotlib.pyplot.close(fig)
    if len(labels) < 4:
        pytest.skip("ch03_caches or ch02_caches not in the recording")
    assert labels[0].startswith("chapter 02") and "schedulers issue on" in labels[0]
    assert [lb.split("\n")[0] for lb in labels[1:]] == \
        [f"chapter 03, BLOCK = {b}" for b in ch03.TRAFFIC_BLOCKS]


def test_block_stalls_splits_the_time_into_instructions_and_cycles_per_instruction():
    table, out = _quiet(ch03.block_stalls)
    if not out:
        pytest.skip("ch03_caches not in the recording")
    assert [r["BLOCK"] for r in table] == [str(b) for b in ch03.TRAFFIC_BLOCKS]
    assert table.columns[0] == "BLOCK" and " run " not in table.title
    inst, cpi, product, measured = (float(x) for x in re.findall(r"([\d.]+)x", out))
    assert product == pytest.approx(inst * cpi, abs=0.01)
    # Time on one scheduler = instructions / issue rate: the split explains the time.
    assert product == pytest.approx(measured, rel=0.03)
    # The smaller BLOCK needs more instructions for the same FFMA.
    assert inst > 1


def test_chapter_02_against_this_kernel_splits_the_same_way():
    """The faster kernel waits longer per instruction (its stall bars are longer) but
    issues far fewer instructions per FFMA: the split shows both and explains the time."""
    out = ch03.against_coalesced_split()
    if "not profiled" in out:
        pytest.skip("ch02_caches or ch03_caches not in the recording")
    inst, cpi, product, measured = (float(x) for x in re.findall(r"([\d.]+)x", out))
    assert inst > 1 > cpi and product == pytest.approx(measured, rel=0.03)
    # the profiler's times, not the timed runs': the line says so
    assert "under the profiler, clocks fixed" in out


def test_the_bound_of_a_half_empty_warp_counts_only_its_lanes():
    rows = {r["BLOCK"]: r for r in ch03.block_bounds()}
    assert rows[4]["lanes per warp"] == 16 and rows[8]["lanes per warp"] == 32
    # BLOCK = 4 and 8 cost the same wavefronts per FFMA instruction; BLOCK = 4's FFMA
    # does 16 multiply-adds, so its bound is half
    assert rows[4]["shared bound GFLOP/s"] == pytest.approx(rows[8]["shared bound GFLOP/s"] / 2)


def test_the_second_bound_adds_the_global_lines_to_the_shared_wavefronts():
    rows = {r["BLOCK"]: r for r in ch03.block_bounds()}
    assert [rows[b]["global lines per warp and step"] for b in (4, 8, 16, 32)] == [8, 8, 4, 2]
    for r in rows.values():
        wf, gl = r["shared wavefronts per warp and step"], r["global lines per warp and step"]
        assert r["shared + lines bound GFLOP/s"] == pytest.approx(
            r["shared bound GFLOP/s"] * wf / (wf + gl))
    # the second bound rises with BLOCK, in the order of the rates
    both = [rows[b]["shared + lines bound GFLOP/s"] for b in (4, 8, 16, 32)]
    assert both == sorted(both)


def test_the_pipe_model_is_the_global_lines_plus_the_bank_model():
    # BLOCK = 32: 2 lines, 8 LDS.128 x 2 + 32 LDS, 2 stores; BLOCK = 4: 8 lines, 1 + 4, 2
    assert ch03.pipe_model(32) == {"global reads": 2, "shared loads": 48,
                                   "shared stores": 2, "total": 52}
    assert ch03.pipe_model(4) == {"global reads": 8, "shared loads": 5,
                                  "shared stores": 2, "total": 15}
    for b in ch03.BLOCKS:   # the block_bounds columns, split
        m, c = ch03.pipe_model(b), ch03.ch03_04_tiles.wavefronts_per_step(ch03.KERNEL,
                                                                          {"BLOCK": b})
        assert m["shared loads"] + m["shared stores"] == c


def _fake_pipe(monkeypatch, per_step: dict[str, float] | None):
    """ch03_l1_pipe rows whose counters give these wavefronts per warp and step."""
    def row(study, kernel, params):
        b = params["BLOCK"]
        steps = ch03.SHAPE[0] ** 3 / (min(32, b * b) * b)
        return {"metrics": {ch03.PIPE.format(k): v * steps
                            for k, v in (per_step or {}).items()}}
    monkeypatch.setattr(ch03, "_study_row", row)


def test_the_pipe_count_says_when_it_was_not_recorded(monkeypatch):
    _fake_pipe(monkeypatch, None)
    assert ch03.pipe_counted(32) is None
    assert "not recorded" in ch03.pipe_counts()
    assert ch03.block_bounds()[0]["counted bound GFLOP/s"] == "-"


def test_the_pipe_count_is_per_warp_and_step_with_the_rest_as_other(monkeypatch):
    _fake_pipe(monkeypatch, {"": 60, "_mem_lgds_cmd_read": 2, "_mem_shared_op_ld": 48,
                             "_mem_shared_op_st": 2})
    got = ch03.pipe_counted(32)
    assert got["total"] == pytest.approx(60) and got["other"] == pytest.approx(8)
    table, out = _quiet(ch03.pipe_counts)
    row = {r["BLOCK"]: r for r in table}[32]
    assert row["other"] == "8.0 / 0" and row["total"] == "60.0 / 52"
    assert row["per FFMA"] == "1.88 / 1.62"
    # the same per-step count at every BLOCK: fewer FFMA per step, more per multiply-add
    assert "counted 4 > 8 > 16 > 32, model 4 > 8 > 16 > 32" in out
    # the counted bound scales the shared bound by the model's over the counted wavefronts
    r = {r["BLOCK"]: r for r in ch03.block_bounds()}[32]
    assert r["counted bound GFLOP/s"] == pytest.approx(r["shared bound GFLOP/s"] * 50 / 60)


def test_the_recorded_pipe_count_matches_the_model_but_for_other():
    got = ch03.pipe_counted(32)
    if got is None:
        pytest.skip("ch03_l1_pipe not in the recording")
    for part in ch03.PIPE_PARTS:
        assert got[part] == pytest.approx(ch03.pipe_model(32)[part], abs=0.3)


def test_without_the_merge_each_wide_load_costs_four_wavefronts():
    # 2 stores x 1 + 8 LDS.128 x 4 + 32 LDS x 1 = 66 per 32 FFMA
    assert ch03.unmerged_line().endswith("66 per 32 FFMA = 2.06 per FFMA")


def test_the_dram_share_line_divides_dram_by_the_prediction(monkeypatch):
    _fake(monkeypatch, {8: 2e9, 16: 1e9, 32: 5e8},
          {b: ch03.predicted_load_bytes(b) / 2 for b in (8, 16, 32)})
    line = ch03.dram_share_line()
    assert "BLOCK = 8: 0.50, BLOCK = 16: 0.50, BLOCK = 32: 0.50" in line
    assert line.endswith("A and B read once would be 0.13 GB")


def test_the_reread_line_prices_b_once_per_row_of_tiles(monkeypatch):
    b_bytes = ch03.SHAPE[1] * ch03.SHAPE[2] * 4
    _fake(monkeypatch, {8: 2e9, 16: 1e9, 32: 5e8},
          {b: ch03.SHAPE[0] // b * b_bytes for b in (8, 16, 32)})
    lines = ch03.reread_line().splitlines()
    assert len(lines) == 3
    for line, b in zip(lines, (8, 16, 32)):
        gb = f"{ch03.SHAPE[0] // b * b_bytes / 1e9:.1f} GB"
        assert f"{ch03.SHAPE[0] // b} rows" in line and line.count(gb) == 2


def test_the_grader_table_keeps_the_first_words_and_the_message_in_full():
    table = ch03.Table([{"mistake": "m", "in full": "short part: the rest",
                         "what the grader says": "short part"}],
                       ["mistake", "what the grader says"])
    assert ch03.mistakes_in_full(table) == "m:\n  short part: the rest"


def test_the_gain_sentence_spans_the_sizes_measured_for_both_kernels():
    table = [{"kernel": "coalesced", "size": 1024, "GFLOP/s": 100.0},
             {"kernel": "smem_tiled", "size": 1024, "GFLOP/s": 150.0},
             {"kernel": "coalesced", "size": 2048, "GFLOP/s": 100.0},
             {"kernel": "smem_tiled", "size": 2048, "GFLOP/s": 140.0},
             {"kernel": "smem_tiled", "size": 4096, "GFLOP/s": 140.0}]
    s = ch03.gain_sentence(table, (1024, 2048, 4096))
    assert "1.40x to 1.50x" in s and "1024^3: 1.50x" in s
    assert "not both measured at 4096^3" in s
    assert ch03.gain_sentence([], (1024,)) == "no size has both kernels measured"


def test_the_rates_figure_has_the_ratio_panel_and_says_what_is_compared():
    fig = ch03.rates()
    if fig is None:
        pytest.skip("no rates here")
    titles = [ax.get_title() for ax in fig.axes]
    assert any("smem_tiled / coalesced" in t for t in titles)
    assert any("coalesced" in t and "smem_tiled" in t for t in titles)


def test_the_rates_figure_draws_no_cublas_line_and_no_size_missing_a_kernel():
    fig = ch03.rates()
    if fig is None:
        pytest.skip("no rates here")
    left = fig.axes[0]
    labels = [line.get_label() for line in left.get_lines()]
    assert not any("cublas" in t.lower() for t in labels)
    # no "not recorded at ..." note: every size drawn has both kernels
    assert not any("not recorded" in t.get_text() for t in left.texts)
    xs = {tuple(line.get_xdata()) for line in left.get_lines() if not line.get_label().startswith("_")}
    assert len(xs) == 1
    # two rates within a factor of two: a linear GFLOP/s axis from zero
    assert left.get_yscale() == "linear" and left.get_ylim()[0] == 0


def test_the_traffic_rows_carry_the_l2_columns_where_recorded():
    rows = [r for r in ch03.traffic_rows() if r["kernel"].startswith("smem_tiled")]
    if not rows:
        pytest.skip("no cache study recorded here")
    for r in rows:
        assert 0 <= r["L2 hit %"] <= 100
        assert r["read from DRAM, GB"] <= r["read from L2, GB"] * 1.1


def test_check_prediction_gives_the_multiply_adds_between_two_barriers():
    for block in (8, 32):
        assert f"{block} multiply-adds between two barriers" in ch03.check_prediction(block)


def test_the_rates_sentence_names_no_size_it_does_not_draw(capsys):
    fig = ch03.rates()
    if fig is None:
        pytest.skip("no rates here")
    assert "not both measured" not in capsys.readouterr().out


def test_traffic_table_is_a_table_with_one_precision_per_hit_column(monkeypatch):
    from gemm_kernels.core.table import Table
    _fake(monkeypatch, {8: 2e9, 16: 1e9, 32: 5e8}, {8: 4e9, 16: 2e9, 32: 1e9})
    t = ch03.traffic_table()
    assert isinstance(t, Table) and "<table" in t._repr_html_()
    assert len(list(t)) == 4 and "L1 hit %" not in t.columns


def test_the_occupancy_prediction_is_checked_before_anything_is_shown():
    from gemm_kernels.core import analysis
    asked = ch03.check_occupancy_prediction(32, None, 64, 4)
    assert asked.startswith("write your prediction first") and "GFLOP/s" not in asked
    o = analysis.kernel_occupancy(ch03.KERNEL, {"BLOCK": 32})
    right = ch03.check_occupancy_prediction(32, o.blocks_per_sm, o.warps_per_sm, 4)
    assert "blocks per SM: %d, right." % o.blocks_per_sm in right
    assert "warps per SM: %d, right." % o.warps_per_sm in right
    assert "multiply-adds between two barriers" in right       # then the measurement
    wrong = ch03.check_occupancy_prediction(32, o.blocks_per_sm + 1,
                                            (o.blocks_per_sm + 1) * 32, 4)
    assert "smallest quotient wins" in wrong and "follows from your blocks" in wrong
    odd = ch03.check_occupancy_prediction(4, 32, 16, 4)       # 16 threads: one warp, not half
    assert "a partial warp still takes a whole one" in odd
    assert "must each be one of" in ch03.check_occupancy_prediction(5, 1, 1, 4)


def test_block_resources_give_the_inputs_of_the_prediction_not_its_answer():
    """The prediction needs each BLOCK's threads, registers and shared memory; the
    table gives those and leaves blocks and warps per SM to the student."""
    t = ch03.block_resources()
    rows = {r["BLOCK"]: r for r in t}
    assert sorted(rows) == [4, 8, 16, 32]
    assert rows[4]["threads/block"] == 16 and rows[4]["warps/block"] == 1
    assert rows[32]["threads/block"] == 1024 and rows[32]["warps/block"] == 32
    assert rows[32]["shared memory/block"] == "8,192 B"
    assert all(r["registers/thread (ptxas)"] > 0 for r in rows.values())
    assert not any("SM" in c for c in t.columns)


def test_the_swapped_kernel_swaps_only_the_two_thread_indices():
    """The course notes' question: the variant differs from the kernel as written in the
    two lines that name tx and ty, and the table says when it was not timed."""
    from gemm_kernels.core.kernels import get
    from gemm_kernels.notebook import ch03_evidence
    written = get("smem_tiled").source_text().splitlines()
    swapped = ch03_evidence.swapped_kernel()
    changed = [(a, b) for a, b in zip(written, swapped.code.splitlines()) if a != b]
    assert [b.strip() for _, b in changed] == ["const int tx = threadIdx.y;",
                                                "const int ty = threadIdx.x;"]
    assert swapped.base == "smem_tiled" and swapped.name == ch03_evidence.SWAPPED
    t = ch03_evidence.swap_measured()
    assert [r["wavefronts per warp and step (model)"] for r in t] == [50, 352]
    assert [r["global sectors per warp and step (model)"] for r in t] == [8, 64]
    if t[1]["GFLOP/s"] is None:
        assert "not timed" in t.title


def test_block_bounds_shows_the_model_or_the_counted_bound():
    model, counted = ch03.block_bounds(), ch03.block_bounds(view="counted")
    assert "counted bound GFLOP/s" not in model.columns
    assert "% of shared + lines bound" in model.columns
    # the student's view: one bound, the pipe's wavefronts per FFMA behind it
    assert "shared bound GFLOP/s" not in model.columns
    assert [r["wavefronts per FFMA (shared + lines)"] for r in model] == \
        ["3.75", "2.75", "1.88", "1.62"]
    # BLOCK = 4 fills 16 lanes of its warp: both views say so beside its bound
    assert "lanes per warp" in model.columns and model[0]["lanes per warp"] == 16
    # the solution's view: the count, the bound it gives and the rate's share of it
    assert "all wavefronts counted per warp and step" in counted.columns
    assert "counted bound GFLOP/s" in counted.columns
    for r in counted:
        if r["GFLOP/s"] and r["counted bound GFLOP/s"] != "-":
            assert r["% of counted bound"] == f"{r['GFLOP/s'] / r['counted bound GFLOP/s']:.0%}"
    # the student's view leaves the count to the solution; both keep every column's value
    assert "all wavefronts counted per warp and step" not in model.columns
    for r in model:
        if r["GFLOP/s"]:
            assert r["% of shared + lines bound"] == \
                f"{r['GFLOP/s'] / r['shared + lines bound GFLOP/s']:.0%}"


def test_the_gaps_line_sets_the_bounds_steps_beside_the_rates(recorded_mode):
    # recorded mode: on a GPU the rates would be timed again in each call, and the two
    # calls below would not agree to the last digit
    line = ch03.gaps_line()
    rows = {r["BLOCK"]: r for r in ch03.block_bounds()}
    if rows[8]["GFLOP/s"] is None:
        assert "not recorded" in line
        return
    head, shared, both, rate = line.splitlines()
    assert "8 to 16, 16 to 32" in head
    for text, col in ((shared, "shared bound GFLOP/s"), (both, "shared + lines bound GFLOP/s"),
                      (rate, "GFLOP/s")):
        assert text.endswith(", ".join(f"{rows[b][col] / rows[a][col]:.2f}x"
                                       for a, b in ((8, 16), (16, 32))))
    assert "shared bound " in shared and "rate at 2048^3" in rate

def test_the_pipe_table_hides_the_unnamed_rest(monkeypatch):
    _fake_pipe(monkeypatch, {"": 60, "_mem_lgds_cmd_read": 2, "_mem_shared_op_ld": 48,
                             "_mem_shared_op_st": 2})
    table, _ = _quiet(ch03.pipe_counts)
    assert "other" not in table.columns and "total" in table.columns


def test_the_swap_factors_are_those_of_the_table():
    written, swapped = ch03.swap_measured()
    line = ch03.swap_factors()
    if not (written["GFLOP/s"] and swapped["GFLOP/s"]):
        assert "not timed" in line
        return
    assert f"{written['GFLOP/s'] / swapped['GFLOP/s']:.1f}x" in line


def test_fifth_line_answers_the_question():
    line = ch03.fifth_line()
    assert line.startswith("BLOCK = 32 over BLOCK = 16")
    assert ("more than a fifth" in line) != ("less than a fifth" in line)


def test_summary_puts_both_kernels_on_the_one_pipe():
    t = ch03.summary()
    assert "L1 pipe bound" in t.columns and "shared-only bound" not in t.columns
    before, here = (r for r in t if r["kernel"] in ("coalesced", "smem_tiled"))
    # chapter 02's row carries its own wavefronts and bound, the figures of the gain's split
    assert before["L1 pipe wavefronts / FFMA"] == "2.00"
    assert before["L1 pipe bound"] == pytest.approx(8363.52, rel=0.01)
    assert here["L1 pipe wavefronts / FFMA"] == "1.62"
    if here["GFLOP/s"]:
        assert here["% of bound"] == f"{here['GFLOP/s'] / here['L1 pipe bound']:.0%}"


def test_the_two_kernels_on_one_pipe_split_the_gain_into_bound_and_share():
    text = ch03.pipe_against_coalesced()
    if "not recorded" in text:
        return
    before, before_sum, here, here_sum, gain = text.splitlines()
    assert before.startswith("chapter 02, coalesced   2.00 wavefronts per FFMA")
    assert here.startswith("smem_tiled, BLOCK = 32  1.62 wavefronts per FFMA")
    # each figure's sum is printed under it, so 1.62 does not come out of nowhere
    assert "1 wavefront for the A broadcast + 1 for the B line, per FFMA" in before_sum
    assert "50 shared + 2 lines = 52 per 32 FFMA" in here_sum
    num = lambda s: float(s.replace(",", ""))
    b0, g0 = (num(x) for x in re.findall(r"([\d,]+) GFLOP/s", before))
    b1, g1 = (num(x) for x in re.findall(r"([\d,]+) GFLOP/s", here))
    # only the ratio of bounds is the model's; the line says the rest is chapter 02's share
    assert "from the model" in gain and "chapter 02 ran further below its bound" in gain
    f_gain, f_bound, f_share = (float(x) for x in re.findall(r"([\d.]+)x", gain))
    assert f_bound == pytest.approx(b1 / b0, abs=0.01)
    assert f_gain == pytest.approx(g1 / g0, abs=0.01)
    assert f_bound * f_share == pytest.approx(f_gain, abs=0.02)


def test_the_wavefront_sum_counts_the_ffma_of_one_step():
    # at BLOCK = 16 the SASS loop holds several steps; the sum is per step, as the bound's
    assert ch03.wavefront_sum().endswith("= 50 wavefronts for 32 FFMA")
    assert ch03.wavefront_sum({"BLOCK": 16}).endswith(" for 16 FFMA")
