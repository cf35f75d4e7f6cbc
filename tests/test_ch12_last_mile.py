"""Chapter 12's module: the recording it reads, the waves arithmetic it draws, the
benchmark and the model's evidence it shows, the plan exercise's rating and the
widget's answers (bad input included), all in recorded mode."""
import statistics
import matplotlib
import pytest

matplotlib.use("Agg")

from gemm_kernels.core.kernels import get  # noqa: E402
from gemm_kernels.measure import records, timing  # noqa: E402
from gemm_kernels.notebook import ch12_last_mile as c  # noqa: E402
from gemm_kernels.plan import calibrate, model  # noqa: E402


@pytest.fixture(scope="module")
def rec():
    r = c.recording()
    if r is None:
        pytest.skip("no recording holds chapter 12's rows")
    return r


def test_the_recording_holds_the_split_kernels_rows(rec):
    assert rec.find(c.SPLIT)
    assert c.rules(rec).device == rec.device["name"]


def test_slot_grid_marks_the_empty_slots_of_the_last_wave():
    grid, keep = c.slot_grid(blocks=10, sms=4, per_sm=2)     # 8 slots: 2 waves, 6 empty
    assert keep == [0, 1]
    assert (grid[:2] == 1).all()
    assert (grid[2:] == 2).sum() == 2 and (grid[2:] == 0).sum() == 6


def test_slot_grid_skips_the_middle_waves():
    grid, keep = c.slot_grid(blocks=8 * 10 + 1, sms=4, per_sm=2, show=3)
    assert keep == [0, 1, 10] and grid.shape == (6, 4)


def test_wave_layout_of_the_capstone_at_1024(rec):
    lay = c.wave_layout((1024, 1024, 1024), 128, 128, 1, rec)
    assert lay["tiles"] == 64 and lay["blocks"] == 64 and lay["waves"] == 1
    assert lay["slots"] == lay["sms"] * lay["per_sm"]
    assert lay["filled"] == pytest.approx(64 / lay["slots"])


def test_a_split_multiplies_the_blocks(rec):
    one = c.wave_layout((1024, 1024, 1024), 128, 64, 1, rec)
    three = c.wave_layout((1024, 1024, 1024), 128, 64, 3, rec)
    assert three["slices"] == 3 and three["blocks"] == 3 * one["blocks"]


def test_the_plan_is_the_models_fastest_candidate(rec, recorded_mode):
    shape = (1024, 1024, 1024)
    p = c.plan_for(shape, rec)
    t, (BM, BN, s) = c.ranked(shape, c.rules(rec), c._limits(rec))[0]
    assert (p.params["BM"], p.params["BN"], p.params["SPLIT"]) == (BM, BN, s)
    assert p.predicted_us == t


def test_a_vector_shape_gets_the_gemv_plan(rec):
    assert c.plan_for((1, 4096, 4096), rec).kernel == c.GEMV


def test_bench_rows_cover_every_benchmark_shape_with_the_recorded_share(rec):
    rows = c.bench_rows(rec)
    assert [r["shape"] for r in rows] == calibrate.bench_shapes()
    r = next(r for r in rows if r["% of cuBLAS"] is not None)
    p = c.plan_for(r["shape"], rec)
    assert r["% of cuBLAS"] == timing.share(c.row_of(rec, p.kernel, r["shape"], p.params))
    assert "cuBLAS" in c.bench_table(rec).title and rec.label in c.bench_table(rec).title


def test_shortfalls_name_only_shapes_below_the_line(rec):
    text = c.shortfalls(rec, below=0.0)
    assert text.startswith("At every benchmark shape")
    low = min((r for r in c.bench_rows(rec) if r["% of cuBLAS"]), key=lambda r: r["% of cuBLAS"])
    assert "x".join(map(str, low["shape"])) in c.shortfalls(rec, below=100.0)


def test_shortfalls_mark_a_shape_where_cublas_varies(rec):
    ref = [r["cuBLAS beside it, GFLOP/s"] for r in c.timed_here([(777, 555, 333)], rec)]
    assert c._cublas_varies((777, 555, 333), rec) == (max(ref) / min(ref) > 1.2)
    assert not c._cublas_varies((3, 5, 7), rec)


def test_fit_points_predict_with_the_rules_and_measure_from_the_rows(rec):
    pts = c.fit_points(rec)
    assert pts and all(p["measured_us"] > 0 and p["predicted_us"] > 0 for p in pts)
    p = pts[0]
    row = c.row_of(rec, c.SPLIT, p["shape"], {k: p[k] for k in ("BM", "BN", "SPLIT")})
    M, N, K = p["shape"]
    assert p["measured_us"] == pytest.approx(2 * M * N * K / (row["gflops"]["median"] * 1e3))


def test_pick_rows_compare_with_the_best_measured(rec):
    rows = c.pick_rows(rec)
    assert rows and all(0 < r["pick / best rate %"] <= 100 for r in rows)


def test_rate_choice_best_and_worse_and_not_a_candidate(rec):
    shape = (256, 384, 16384)
    t, (BM, BN, s) = c.ranked(shape, c.rules(rec), c._limits(rec))[0]
    assert "is the model's best" in c.rate_choice(shape, BM, BN, s, rec)
    worse = c.rate_choice(shape, 128, 128, 1, rec)
    assert "number" in worse and "the best's time" in worse
    assert "the model's best:" not in worse and "reveal=True" in worse     # not the answer
    assert "the model's best:" in c.rate_choice(shape, 128, 128, 1, rec, reveal=True)
    assert "not a candidate" in c.rate_choice(shape, 32, 32, 1, rec)


def test_part_1_passes_a_choice_within_reach_of_the_fastest_measured(rec):
    """The pass rule is on measurements, with its negative controls: the fastest measured
    passes; the model's own pick, timed slower than that by more than PASS_WITHIN, fails;
    so do the capstone's launch (one block per tile, no split) and a configuration that is
    no candidate; the verdict and the choice's measured share are printed under it."""
    shape = (256, 384, 16384)
    rates = c._measured_rates(shape, rec)
    fastest = max(rates, key=rates.get)
    assert c.choice_passes(shape, *fastest, rec)
    t = c.model_terms(shape, *fastest, rec)
    right = {k: t[k] for k in ("blocks", "n", "q", "rounds")}
    assert "Part 1: PASS: measured" in c.rate_choice(shape, *fastest, rec, terms=right)
    pick = c.ranked(shape, c.rules(rec), c._limits(rec))[0][1]
    assert rates[pick] < rates[fastest] * (1 - c.PASS_WITHIN)
    assert not c.choice_passes(shape, *pick, rec)
    assert not c.choice_passes(shape, 128, 128, 1, rec)
    assert "Part 1: not yet" in c.rate_choice(shape, 128, 128, 1, rec)
    assert "Try another choice" in c.rate_choice(shape, 128, 128, 1, rec)
    limit = rates[fastest] * (1 - c.PASS_WITHIN)
    assert all(c.choice_passes(shape, *cf, rec) == (r >= limit) for cf, r in rates.items())
    assert sum(r >= limit for r in rates.values()) < len(rates) / 4    # most choices fail
    assert not c.choice_passes(shape, 32, 32, 1, rec)


def test_padding_table_shows_every_pair_the_rule_counts(rec):
    """One row per configuration timed both ways, and the title's count is the rule's."""
    t = c.padding_table(rec)
    wins, pairs = c.rules(rec).provenance["padded_b_faster"].split(" of ")
    assert len(t) == int(pairs) and f"faster at {wins} of {pairs}" in t.title
    assert all(r["shape"][1] % 4 for r in t)


@pytest.mark.parametrize("M, N, K, says", [
    (0, 5, 5, "at least 1"), (-3, 5, 5, "at least 1"), ("1.5", 5, 5, "not a whole number"),
    (8, "abc", 8, "not a whole number"), (8, 8, "", "not a whole number")])
def test_bad_input_gets_a_message_not_a_traceback(rec, M, N, K, says):
    text, shape = c.report(M, N, K, rec)
    assert shape is None and "Cannot plan" in text and says in text


def test_a_recorded_shape_shows_the_recorded_rate_and_cublas(rec, recorded_mode):
    text, shape = c.report(1024, 1024, 1024, rec)
    assert shape == (1024, 1024, 1024)
    assert "Recorded" in text and "cuBLAS" in text and "prediction" in text


def test_an_unrecorded_shape_shows_only_the_labelled_prediction(rec, recorded_mode):
    text, _ = c.report(1234, 567, 89, rec)
    assert "Not recorded at this shape" in text and "prediction" in text
    assert "% of cuBLAS" not in text


def test_pictures_draw_with_the_device_in_the_title(rec):
    ax = c.plot_waves((1024, 1024, 1024), 128, 128, 1, rec)
    lay = c.wave_layout((1024, 1024, 1024), 128, 128, 1, rec)
    assert f"{lay['filled']:.0%} of the slots filled" in ax.get_title()
    assert rec.device["name"] in ax.get_title()
    assert rec.label in c.plot_bench(rec).get_title()
    assert rec.label in c.plot_fit(rec).get_title()
    assert c.plot_split_k(3).get_title().startswith("Split-K with 3 slices")


def test_gemv_bound_is_two_flops_per_four_bytes():
    # 1000 x 1 x 1000: 4,008,000 bytes, 2,000,000 FLOPs; at 1000 GB/s: 499 GFLOP/s
    assert c.gemv_bound_gflops((1000, 1, 1000), 1000.0) == pytest.approx(2e6 / 4.008e6 * 1000)


def test_gemv_table_has_the_vector_and_nearly_vector_shapes_only(rec):
    rows = c.gemv_table(rec)
    assert rows and all(min(r["shape"][:2]) <= c.THIN for r in rows)
    shapes = {tuple(r["shape"]) for r in rows}
    assert (3, 4096, 4096) in shapes and (1, 4096, 4096) in shapes and (4096, 1, 4096) in shapes
    assert all(r["% of the bound"] is None or r["GFLOP/s"] < r["bound GFLOP/s"] * 1.5
               for r in rows)


def test_sgemm_demo_says_it_needs_a_gpu_in_recorded_mode(rec, recorded_mode):
    assert "needs a GPU" in c.sgemm_demo((64, 64, 64))


def test_fit_summary_splits_the_rows_by_measured_time(rec):
    text = c.fit_summary(rec, bands=(100.0, 1000.0))
    n = len(c.fit_points(rec))
    import re
    counts = [int(x) for x in re.findall(r"(\d+) rows,", text)]
    assert sum(counts) == n and "under 100 µs" in text


def test_the_rules_summary_names_gamma_and_every_tile(rec):
    text = c.rules_summary(rec)
    assert "gamma = " in text and "r0 = " in text
    for BM, BN in model.TILES:
        assert f"{BM}x{BN} tile: c0 = " in text


def test_the_tile_table_shows_fewer_blocks_where_the_scalar_path_needs_more_registers(rec):
    rows = {r["tile"]: r for r in c.tile_table(rec)}
    assert set(rows) == {f"{BM}x{BN}" for BM, BN in model.TILES}
    for r in rows.values():
        if r["registers, other N"] > r["registers, N a multiple of 4"]:
            assert r["blocks per SM, other N"] <= r["blocks per SM, N a multiple of 4"]
    # the shown column of each path holds both of its numbers
    for path in ("N a multiple of 4", "other N", "other N, B padded"):
        for r in rows.values():
            assert r[path] == (f"{r['registers, ' + path]} registers: "
                               f"{r['blocks per SM, ' + path]} blocks per SM")


def test_the_profiles_name_every_launch_and_a_stall(rec):
    t = c.profile_table("ch12_gemv", rec)
    col = "two largest stalls (cycles per instruction)"
    assert len(t) == 6 and all(r[col].startswith("long scoreboard") for r in t)
    assert all(len(r[col].split(", ")) == 2 and "selected" not in r[col] for r in t)
    assert "FMA pipe %" not in t.columns         # a GEMV has no FMA pipe figure: no column
    ragged = c.profile_table("ch12_ragged_n", rec)
    assert not any("stall" in col for col in ragged.columns)
    # rows: the ragged shape scalar, then B padded; the aligned shape (twice)
    ragged_n, padded, wide = ragged[0], ragged[1], ragged[2]
    for other in (wide, padded):                 # the scalar path issues more of both
        assert ragged_n["instructions (millions)"] > other["instructions (millions)"]
        assert (ragged_n["load/store instructions (millions)"]
                > other["load/store instructions (millions)"])
    assert padded["warps resident %"] > ragged_n["warps resident %"]   # its block back
    from gemm_kernels.measure import studies
    from gemm_kernels.notebook import timed_variants  # noqa: F401 (registers the variants)
    absent = next(s.name for s in studies.STUDY_LIST
                  if all(row is None for shape in s.shapes
                         for _, row in studies.results(s.name, shape, rec)))
    assert "not in this recording" in c.profile_table(absent, rec)


def test_the_model_terms_add_up_to_the_prediction(rec):
    t = c.plan_terms((256, 384, 16384), [(64, 128, 32), (128, 128, 1)], rec)
    for r in t:
        assert r["GEMM (µs)"] + r["reduction (µs)"] == pytest.approx(r["predicted (µs)"])
    assert t[1]["reduction (µs)"] == pytest.approx(0)
    assert "reduction takes" in c.reduction_share((1024, 1024, 1024), rec)
    assert "no split" in c.reduction_share(_unsplit_square(rec), rec)


def _unsplit_square(rec):
    """A large square the recorded rules plan without a split (which one depends on the
    fitted rules)."""
    shape = next(((n,) * 3 for n in (8192, 6144, 4096, 3000, 2048)
                  if c.plan_for((n,) * 3, rec).params["SPLIT"] == 1), None)
    assert shape is not None, "the rules split every large square"
    return shape


def test_the_walkthrough_adds_up_to_the_prediction_of_the_plan(rec):
    text = c.model_walkthrough((1024, 1024, 1024), rec)
    t = c.model_terms((1024, 1024, 1024), 64, 128, 4, rec)
    assert "n = ceil(512 / " in text and "K_slice = 256" in text
    assert text.splitlines()[-1].endswith(f"= {t['total']:.1f} µs")
    assert t["rounds term"] + t["work term"] + t["reduction"] == pytest.approx(t["total"])
    no_split = c.model_walkthrough(_unsplit_square(rec), rec)
    assert "reduction" not in no_split


def test_the_gemv_account_separates_what_was_measured_from_what_was_not(rec):
    text = c.gemv_account((1, 4096, 4096), rec=rec)
    p = c.plan_for((1, 4096, 4096), rec)
    z = get(p.kernel).grid(p.params, (1, 4096, 4096))[2]
    assert f"K in {z} slices" in text and "one launch" in text
    assert "cuBLAS's, in the same run" in text and "DRAM busy" in text
    # the plan's own launch is named where it was profiled (alone: the other launches are
    # in the profile table), and said not to be elsewhere, with the split launches instead
    own = "the plan's own launch" in text
    assert own != ("was not profiled" in text)
    assert own != ("K in 16 slices" in text)
    assert "same launch: no second kernel" in c.reduction_share((1, 4096, 4096), rec)
    assert c.reduction_us((1, 4096, 4096), 32, rec) > c.rules(rec).reduce_us
    other = c.gemv_account((1, 8192, 1024), rec=rec)
    assert "Nsight" not in other and "nor any launch at this shape" in other


def test_the_tile_evidence_compares_both_tiles_where_measured(rec):
    t = c.tile_evidence(rec=rec)
    assert [r["tile"] for r in t] == ["128x128", "64x128"] * 2
    r = t[2]
    assert r["busiest SM's work (128x128 tiles)"] >= r["average SM's work (128x128 tiles)"]
    assert t[3]["busiest SM's work (128x128 tiles)"] < r["busiest SM's work (128x128 tiles)"]


def test_the_capstone_share_gives_the_share_of_busy_sms(rec):
    sms = c.rules(rec).sm_count
    assert f"64 of the {sms} SMs ({64 / sms:.0%})" in c.capstone_share(1024, rec)


def test_a_choice_is_judged_by_a_measurement_where_every_candidate_was_timed(rec):
    text = c.rate_choice((256, 384, 16384), 64, 128, 32, rec, reveal=True)
    assert "Measured at this shape: the fastest configuration is" in text
    assert 0 < c.model_error(rec) < 1
    assert c.measured_best((7, 7, 7), rec) is None


def test_useful_shares_mark_the_blocks_of_a_ragged_edge():
    share = c.useful_shares((129, 256, 64), 128, 128, slices=2)
    # 2 rows of tiles x 2 columns, twice (the slices); the second row holds one row of C
    assert list(share) == [1, 1, 1 / 128, 1 / 128] * 2


def test_slot_grid_places_values_where_the_blocks_run():
    import numpy as np
    grid, _ = c.slot_grid(blocks=5, sms=2, per_sm=2, values=np.arange(5.0))
    assert grid[:2].tolist() == [[0, 1], [2, 3]]
    assert grid[2, 0] == 4 and np.isnan(grid[2:]).sum() == 3


def test_the_ragged_shape_draws_its_mostly_idle_blocks_hatched(rec):
    ax = c.plot_waves((4097, 1023, 515), 128, 128, 1, rec)
    assert "inside C" in ax.get_title() and ax.get_legend() is not None
    assert "inside C" not in c.plot_waves((1024, 1024, 1024), 128, 128, 1, rec).get_title()


def test_the_ladder_holds_measured_rates_with_more_busy_sms_going_faster(rec):
    rows = c.ladder_rows(rec=rec)
    assert len(rows) == len(c.LADDER)
    assert rows[0]["configuration"] == "128x128, no split"
    assert all(r["SMs busy"] == min(r["blocks"], c.rules(rec).sm_count) for r in rows)
    # the capstone's tile with K in 4 slices against the same tile without a split
    assert rows[2]["GFLOP/s"] > 2 * rows[0]["GFLOP/s"]
    assert rec.label in c.plot_ladder(rec=rec).get_title()
    assert c.ladder_rows((7, 7, 7), rec=rec) == []


def test_the_rules_summary_shows_a_full_sm_per_tile(rec):
    r = c.rules(rec)
    text = c.rules_summary(rec)
    assert text.count("GFLOP/s per SM") == len(model.TILES)
    assert f"^{r.gamma:g} = " in text
    # a full SM computes no more than its FP32 peak (2 FLOP per lane per cycle at the top
    # clock): the model's q^gamma, not q^(1 - gamma), which gave rates above it
    import re
    peak = 2 * rec.device["fp32_lanes_per_sm"] * rec.device["sm_clock_mhz"] / 1e3
    per_sm = [float(x.replace(",", "")) for x in
              re.findall(r"= ([\d,.]+) GFLOP/s per SM", str(text))]
    assert len(per_sm) == len(model.TILES) and max(per_sm) <= peak, (per_sm, peak)


def test_the_bench_plot_has_a_legend_and_the_shortfall_line(rec):
    ax = c.plot_bench(rec, below=90)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "squares" in labels and any(l.startswith("90%") for l in labels)
    assert ax.get_xlabel()
    # a bar is blue exactly when its shape is a square, and the squares come first
    rows = sorted((r for r in c.bench_rows(rec) if r["% of cuBLAS"] is not None),
                  key=lambda r: len(set(r["shape"])) != 1)
    blue = [p.get_facecolor() == matplotlib.colors.to_rgba("tab:blue") for p in ax.patches]
    assert blue == [len(set(r["shape"])) == 1 for r in rows]
    assert blue == sorted(blue, reverse=True) and any(blue) and not all(blue)


def test_the_rules_summary_gives_the_gemv_rule(rec):
    r = c.rules(rec)
    text = c.rules_summary(rec)
    assert f"blocks of {r.gemv_warps['cols']} warps where M == 1" in text
    assert f"gives every SM {r.gemv_warps_per_sm} warps" in text


def test_the_rules_summary_says_what_decided_the_padding_and_the_loads(rec):
    text = c.rules_summary(rec)
    r = c.rules(rec)
    assert f"faster at {r.provenance['padded_b_faster']} calibration shapes" in text
    assert ("B padded" if r.pad_ragged_b else "B not padded") in text
    assert f"faster at {r.provenance['gemv_streaming_faster']} calibration shapes" in text


RAGGED = (4097, 1023, 515)      # N % 4 != 0: the plan copies B into padded rows


def test_the_waves_of_a_padded_plan_use_the_padded_registers(rec):
    """The picture, the walkthrough and the prediction describe one launch: with B padded,
    the blocks per SM are those of the padded build (the tile table's), not the scalar
    path's."""
    r = c.rules(rec)
    if not model.pads(r, RAGGED):
        pytest.skip("these rules do not pad B")
    p = c.plan_for(RAGGED, rec).params
    BM, BN, split = p["BM"], p["BN"], p["SPLIT"]
    tile = r.tiles[model.tile_name(BM, BN)]
    padded = model.slots(model.split_params(BM, BN, split),
                         model.registers(tile, RAGGED[1], True), 1, c._limits(rec))
    lay = c.wave_layout(RAGGED, BM, BN, split, rec)
    assert lay["per_sm"] == padded
    assert c.wave_layout(RAGGED, BM, BN, split, rec, padded=False)["per_sm"] == model.slots(
        model.split_params(BM, BN, split), model.registers(tile, RAGGED[1]), 1, c._limits(rec))
    t = c.model_terms(RAGGED, BM, BN, split, rec)
    assert t["per_sm"] == padded and t["copy of B"] == pytest.approx(model.copy_us(r, RAGGED))
    assert (t["rounds term"] + t["work term"] + t["copy of B"] + t["reduction"]
            == pytest.approx(t["total"]))
    text = c.model_walkthrough(RAGGED, rec)
    assert f"per_sm = {padded}" in text and "copy of B" in text and "no split" in text
    assert text.splitlines()[-1].endswith(f"= {t['total']:.1f} µs")


@pytest.mark.parametrize("shape", [(4096, 1024, 515), RAGGED])
def test_a_profiled_shape_reads_the_timed_row_never_the_profile(rec, recorded_mode, shape):
    """The profile of chapter 12 has rows of the plan's own launch at these shapes, without
    a rate: the widget, the report and the rating must read timed rows only."""
    p = c.plan_for(shape, rec)
    assert any("gflops" not in r for r in rec.find(p.kernel, list(shape),
                                                     get(p.kernel).resolve(p.params))) or \
        shape == RAGGED
    row = c.row_of(rec, p.kernel, shape, p.params)
    assert row is None or "gflops" in row
    text, _ = c.report(*shape, rec)
    assert "prediction" in text
    BM, BN, split = p.params["BM"], p.params["BN"], p.params["SPLIT"]
    assert "predicted" in c.rate_choice(shape, BM, BN, split, rec)


def test_the_rating_finds_the_padded_plans_recorded_rate(rec):
    p = c.plan_for(RAGGED, rec)
    if c.row_of(rec, p.kernel, RAGGED, p.params) is None:
        pytest.skip("the plan was not timed at the ragged shape")
    text = c.rate_choice(RAGGED, p.params["BM"], p.params["BN"], p.params["SPLIT"], rec)
    assert "recorded" in text.splitlines()[1] and "not recorded" not in text.splitlines()[1]


def test_close_candidates_call_a_pick_within_the_models_error_a_tie_break(rec):
    text = c.close_candidates((8192, 8192, 8192), rec=rec)
    ranking = c.ranked((8192, 8192, 8192), c.rules(rec), c._limits(rec))[:5]
    spread = ranking[-1][0] / ranking[0][0] - 1
    assert ("cannot tell" in text) == (spread < c.model_error(rec))
    assert text.count(" µs") == 5


def test_the_split_cost_of_the_rows_path_counts_warps_steps_and_instructions(rec):
    t = c.gemv_split_cost((4096, 1, 4096), rec=rec)
    if isinstance(t, str):
        pytest.skip("the gemv profile is not recorded")
    split, whole = t[0], t[-1]
    assert split["warps"] == 16 * whole["warps"] == 16 * 4096
    assert split["float4 steps per warp"] == 2 and whole["float4 steps per warp"] == 32
    assert split["instructions per warp"] * split["warps"] == pytest.approx(
        split["instructions (millions)"] * 1e6)
    assert all("plain loads" not in r["launch"] for r in t)     # M == 1 only


def test_the_plan_study_profiles_the_launch_the_plan_runs(rec):
    """ch12_gemv_plan's step is the M == 1 plan's own launch: once recorded, the account
    names it as such and no longer says it was not profiled."""
    from gemm_kernels.measure import studies
    step = studies.get("ch12_gemv_plan").steps[0]
    p = c.plan_for((1, 4096, 4096), rec)
    assert get(step.kernel).resolve(step.params) == p.params


def test_slot_counts_answer_the_exercises_first_questions(rec):
    t = c.slot_counts((256, 384, 16384), rec)
    big = next(r for r in t if r["tile"] == "128x128")
    assert big["tiles of C"] == 6
    assert all(r["block slots"] == r["blocks per SM"] * c.rules(rec).sm_count for r in t)


def test_pick_table_misses_only_keeps_the_shapes_where_the_pick_is_not_the_best(rec):
    full, misses = c.pick_table(rec), c.pick_table(rec, misses_only=True)
    assert 0 < len(misses) < len(full)
    assert all(r["model's pick"] != r["best measured"] for r in misses)
    assert f"{len(misses)} of {len(full)} calibration shapes" in misses.title
    # the pick was predicted fastest, so the best measured was predicted no faster
    assert all(not r["best's predicted time vs the pick's"].startswith("-") for r in misses)
    assert "best's predicted time vs the pick's" not in full.columns
    close = sum(r["predicted gap"] <= c.model_error(rec) for r in misses)
    assert f"at {close} of them the model predicted the best within its typical error" in misses.title


def test_gemv_gap_shows_the_graders_time_shape_against_reading_its_bytes_once(rec):
    rows = c.gemv_gap(rec=rec)
    shapes = [tuple(r["shape"]) for r in rows]
    assert (8192, 1, 8192) in shapes and (1, 4096, 4096) in shapes
    for r in rows:
        assert r["timed call (µs)"] > r["bytes once at the copy's rate (µs)"] > 0
        assert r["% of the bound"] == pytest.approx(
            100 * r["bytes once at the copy's rate (µs)"] / r["timed call (µs)"])
    big = next(r for r in rows if tuple(r["shape"]) == (8192, 1, 8192))
    assert big["MiB read and written"] == pytest.approx(4 * (8192 * 8192 + 8192 + 8192) / 2**20)
    assert "grader" in big["launch"]


def test_the_chapter_reads_the_recording_that_profiled_the_plans_own_gemv_launch(rec):
    """Chapter 12's timings and profiles come from one recording, the one that holds the
    M == 1 plan's own launch profiled (where one does): the account names that launch."""
    from gemm_kernels.measure import studies
    if not all(row for _, row in studies.results("ch12_gemv_plan", None, rec)):
        pytest.skip("no recording holds the M == 1 plan's profile")
    text = str(c.gemv_account((1, 4096, 4096), rec=rec))
    assert "the plan's own launch" in text and "was not profiled" not in text


def test_last_mile_rows_set_the_capstone_beside_the_plan(rec):
    rows = {r["kind of shape"]: r for r in c.last_mile_rows(rec=rec)}
    assert len(rows) == len(c.LAST_MILE)
    assert all(r["plan % of cuBLAS"] for r in rows.values())
    gemv = rows["a matrix times a vector"]
    assert gemv["capstone % of cuBLAS"] is None          # never timed at M == 1
    # the shapes the model was fitted on are marked: a calibration shape, and one it never saw
    assert rows["few tiles of C, short K"]["calibration shape"] == "yes"
    assert rows["a large square: the capstone's home"]["calibration shape"] == "no"


def test_plot_planner_marks_the_models_first_candidate(rec, recorded_mode):
    fig = c.plot_planner((640, 640, 640), rec)
    right = fig.axes[1]
    bars = right.patches
    times = [b.get_height() for b in bars]
    assert times == sorted(times)                       # by predicted time
    assert bars[0].get_facecolor() != bars[1].get_facecolor()
    assert times[0] == pytest.approx(c.plan_for((640, 640, 640), rec).predicted_us)


@pytest.mark.parametrize("name, short", [
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_"
     "aligna4_alignc4_execute_kernel__5x_cublas", "xmma GEMM, 64x64x8 tiles"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_"
     "aligna4_alignc4_execute_split_k_kernel__5x_cublas", "xmma split-K kernel, 64x64x8 tiles"),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)",
     "CUTLASS SIMT SGEMM, 256x128 tiles"),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float>", "split-K reduction"),
    ("void gemv2T_kernel_val<int, int, float>", "gemv (matrix-vector)"),
])
def test_cublas_kernel_names_read_as_family_and_tile(name, short):
    assert c.cublas_kernel_name(name) == short


def test_cublas_launches_list_every_launch_of_a_shape_beside_the_plan(rec):
    from gemm_kernels.measure import cublas_kernels
    t = c.cublas_launches(((256, 256, 65536), (1, 4096, 4096)), rec)
    launches = cublas_kernels.recorded((256, 256, 65536), rec)
    if launches is None:
        pytest.skip("this recording holds no cuBLAS launches")
    assert len(t) == len(launches) + len(cublas_kernels.recorded((1, 4096, 4096), rec))
    assert t[0]["shape"] == "256x256x65536" and t[1]["shape"] == ""
    assert [r["blocks"] for r in t[:len(launches)]] == [l["grid"] for l in launches]
    assert t[0]["plan % of cuBLAS"] == timing.share(
        c.row_of(rec, c.plan_for((256, 256, 65536), rec).kernel, (256, 256, 65536),
                 c.plan_for((256, 256, 65536), rec).params))


def test_fit_outliers_name_the_rows_far_above_their_prediction_with_cublas_beside(rec):
    far = [p for p in c.fit_points(rec) if p["measured_us"] >= 3 * p["predicted_us"]]
    text = str(c.fit_outliers(rec, factor=3.0))
    assert text.count("predicted") == len(far) or (not far and "No calibration row" in text)
    for p in far:
        assert c._shape_text(p["shape"]) in text and "cuBLAS, timed beside it" in text
    assert "No calibration row" in str(c.fit_outliers(rec, factor=1e9))


def test_streaming_gains_compare_the_fastest_of_each_kind_of_load(rec):
    import re
    text = str(c.streaming_gains(rec))
    for plain, stream, gain in re.findall(
            r"fastest plain ([\d,.]+) GFLOP/s, fastest streaming ([\d,.]+) GFLOP/s \(([+-]\d+)%\)",
            text):
        p, s = (float(x.replace(",", "")) for x in (plain, stream))
        assert abs(100 * (s / p - 1) - int(gain)) <= 1
    assert "configurations" in text or "No M == 1" in text


def test_round_by_round_prices_a_partly_filled_last_round_at_its_own_blocks():
    assert c.round_by_round(4, 4, 0.25) == pytest.approx(4 / 4 ** 0.25)   # one full round
    assert c.round_by_round(6, 4, 0.25) == pytest.approx(4 ** 0.75 + 2 ** 0.75)
    assert c.round_by_round(6, 4, 0.25) > 6 / 4 ** 0.25                  # the model's, flattered
    assert c.round_by_round(3, 4, 0.0) == pytest.approx(3)


def test_the_last_round_table_keeps_the_models_prediction_where_rounds_are_full(rec):
    t = c.last_round_table((256, 384, 16384), [(64, 128, 64), (64, 128, 32)], rec)
    two, one = t
    assert one["predicted (µs)"] == pytest.approx(one["predicted, each round at its own q (µs)"])
    assert two["rounds"] == 2
    assert two["predicted, each round at its own q (µs)"] > two["predicted (µs)"]
    assert two["predicted (µs)"] == pytest.approx(
        c.model_terms((256, 384, 16384), 64, 128, 64, rec)["total"])


def test_the_gemv_warp_picture_shows_512_bytes_per_step_and_five_shuffle_rounds():
    top, bottom = c.plot_gemv_warp(warps=8)
    assert "512 contiguous bytes" in " ".join(t.get_text() for t in top.texts)
    rounds = [t.get_text() for t in bottom.texts if t.get_text().startswith("round")]
    assert [r.split("d = ")[1].split("\n")[0] for r in rounds] == ["16", "8", "4", "2", "1"]
    assert "32 partial sums" in bottom.texts[-1].get_text()
    # drawn with fewer warps than the plan's blocks: the title says both
    assert f"8 warps (the plan's blocks have {c.rules().gemv_warps['cols']})" in top.get_title()


def test_tile_line_recovers_a_known_line_and_the_origin_fit():
    # rows whose times are exactly c0 x rounds + c1 x work: least squares gives both
    # back; held at the origin it fits c1 alone (negative control: a different c1)
    lim = model.device.limits_for("sm_90")
    tile = {"registers": 127, "registers_scalar": 127, "registers_padded": 127}
    shapes = [(640, 640, 640), (1280, 1280, 2560), (4608, 4608, 2560), (384, 384, 128)]
    c0, c1 = 3.0, 6e-6
    rows = []
    for s in shapes:
        (rounds, work), _ = model.terms(s, 128, 128, 1, 127, 132, lim, 0.25)
        t = c0 * rounds + c1 * work
        rows.append({"shape": s, "gflops": {"median": 2 * s[0] * s[1] * s[2] / (t * 1e3)}})
    got = model.tile_line(rows, 128, 128, tile, 132, lim, 0.25)
    assert got == pytest.approx((c0, c1), rel=1e-6)
    zero, c1_0 = model.tile_line(rows, 128, 128, tile, 132, lim, 0.25, origin=True)
    assert zero == 0.0 and c1_0 != pytest.approx(c1, rel=1e-6)


def test_c0_clamp_names_the_clamped_tile_and_the_refit(rec):
    text = str(c.c0_clamp(rec))
    r = c.rules(rec)
    clamped = [name for name, t in r.tiles.items() if t["c0_us"] == 0.0]
    for name in clamped:
        assert f"{name} tile: least squares gives c0 = -" in text
    assert "Refitted with c0 held at 0" in text or not clamped


def test_fit_points_predict_each_row_with_its_own_padding(rec):
    """A ragged-N shape is timed with B padded and without: each row is predicted as it
    ran (the copy of B only in the padded one), and the model's pick there is one the plan
    would run (padded as the rules say)."""
    r = c.rules(rec)
    for row in c.pick_rows(rec):
        ragged = row["shape"][1] % 4 != 0
        assert row["model's pick"].endswith(", B padded") == (ragged and model.pads(r, row["shape"]))
    pts = c.fit_points(rec)
    padded = [p for p in pts if p["PAD_B"]]
    assert padded
    for p in padded:
        twin = next(q for q in pts if q["shape"] == p["shape"] and not q["PAD_B"]
                    and (q["BM"], q["BN"], q["SPLIT"]) == (p["BM"], p["BN"], p["SPLIT"]))
        assert p["predicted_us"] == pytest.approx(model.predict_us(
            r, p["shape"], p["BM"], p["BN"], p["SPLIT"], sm_count=r.sm_count,
            limits=c._limits(rec), padded=True))
        assert p["predicted_us"] != pytest.approx(twin["predicted_us"])


def test_timed_here_lists_every_configuration_and_marks_the_plan(rec):
    shape = (2048, 2048, 2048)
    t = c.timed_here([shape], rec)
    timed = [r for r in rec.find(c.SPLIT, list(shape)) if "gflops" in r]
    assert len(t) == len(timed) and "cuBLAS" in t.title
    assert sum(r["configuration"].endswith("(the plan)") for r in t) == 1
    assert all(r["% of cuBLAS"] > 0 and r["timed call (µs)"] > 0 for r in t)


def test_top_measured_counts_the_passing_configurations(rec):
    shape = calibrate.EXERCISE_SHAPE
    t = c.top_measured(shape, 5, rec)
    assert [r["model's rank"] for r in t] == [1, 2, 3, 4, 5]
    passing = sum(c.choice_passes(shape, *k, rec) for k in c._measured_rates(shape, rec))
    assert f"{passing} of the {len(c._measured_rates(shape, rec))} configurations" in t.title
    assert all((r["Part 1"] == "pass") == (r["% of the fastest measured"] >= 95) for r in t)


def test_the_widget_gives_the_timed_call_in_microseconds(rec, recorded_mode):
    text, _ = c.report(4097, 1023, 515, rec)
    assert "µs, " in text.split("Recorded")[1]


def test_the_gemv_profile_says_each_launchs_block_size(rec):
    t = c.profile_table("ch12_gemv", rec)
    assert all("warps per block" in r["launch"] for r in t)
    assert all(r["launch"].count("warps per block") == 1 for r in c.profile_table("ch12_gemv_plan", rec))


def test_a_disturbed_fitted_row_says_how_far_the_constants_move_without_it(rec):
    text = str(c.fit_outliers(rec))
    if "was given this row" in text:
        assert "left out, the tile's least-squares c0 goes from" in text


class _OneCublasSlowed:
    """A recording whose first timed split row at `shape` has a cuBLAS beside it ten
    times slower than recorded: a planted disturbed run."""

    def __init__(self, rec, shape):
        self._rec, self._shape, self.planted = rec, tuple(shape), None

    def __getattr__(self, name):
        return getattr(self._rec, name)

    def find(self, kernel, shape, *args, **kw):
        import copy
        rows = self._rec.find(kernel, shape, *args, **kw)
        if getattr(kernel, "name", kernel) != c.SPLIT or tuple(shape) != self._shape:
            return rows
        rows = copy.deepcopy(rows)
        timed = [r for r in rows if "gflops" in r]
        timed[0]["reference"]["gflops"]["median"] /= 10
        self.planted = timed[0]["params"]
        return rows


def test_timed_here_marks_a_run_whose_cublas_was_far_slower(rec):
    shape = (777, 555, 333)
    # the recording as it is: no cuBLAS call there ran three times slower than the others
    assert not any("(a disturbed run)" in r["configuration"] for r in c.timed_here([shape], rec))
    slowed = _OneCublasSlowed(rec, shape)
    rows = list(c.timed_here([shape], slowed))
    marked = [r for r in rows if "(a disturbed run)" in r["configuration"]]
    assert len(marked) == 1, "the planted slow cuBLAS is marked, and only it"
    assert marked[0]["cuBLAS beside it, GFLOP/s"] == min(r["cuBLAS beside it, GFLOP/s"]
                                                         for r in rows)


def test_the_ladder_counts_the_waves_of_a_launch_past_one(rec):
    rows = c.ladder_rows(rec=rec)
    assert all(r["waves"] >= 1 for r in rows)
    assert all(r["slots filled %"] <= 100 for r in rows)


def test_gemv_rule_recomputes_the_fitted_block_sizes_and_split(rec):
    from gemm_kernels.plan import choose
    r = c.rules(rec)
    text = c.gemv_rule(((1, 4096, 4096), (4096, 1, 4096)), rec)
    need = r.gemv_warps_per_sm * r.sm_count
    assert f"rounded: {r.gemv_warps_per_sm} per SM" in text and f"{need:,} warps" in text
    assert f"the plan takes {r.gemv_warps['cols']}." in text
    assert f"the plan takes {r.gemv_warps['rows']}." in text
    for shape in ((1, 4096, 4096), (4096, 1, 4096)):
        z = choose.gemv_params(shape, r)["SPLIT"]
        line = next(s for s in text.splitlines() if s.startswith(f"* {c._shape_text(shape)}"))
        assert line.endswith("no split." if z == 1 else f"K in {z} slices.")
        assert model.gemv_warps(get(c.GEMV), choose.gemv_params(shape, r), shape) >= need


def test_the_capstone_share_checks_the_busy_sms_at_the_one_block_rate(rec):
    c1 = c.rules(rec).tiles["128x128"]["c1_us_per_mfma"]
    text = c.capstone_share(1024, rec)
    alone = round(2 / c1 / 1e3, 1)   # printed to one decimal, so that the sum multiplies out
    assert f"64 x {alone:,.1f} = {c.fmt_number(64 * alone)} GFLOP/s" in text


def test_ragged_waves_count_one_wave_more_for_the_scalar_build(rec):
    """At 4097 x 1023 x 515 the scalar 64 x 128 build fits one block fewer per SM, so its
    blocks need two waves where the padded build's need one; at the aligned shape both
    builds are one (negative control): the same waves, nothing for the waves to explain."""
    text = str(c.ragged_waves((4097, 1023, 515), 64, 128, rec=rec))
    scalar, padded = (c.wave_layout((4097, 1023, 515), 64, 128, 1, rec, padded=p)
                      for p in (False, True))
    assert scalar["per_sm"] + 1 == padded["per_sm"]
    assert (scalar["waves"], padded["waves"]) == (2, 1)
    assert "2 waves" in text and "1 wave;" in text and "The profile measured" in text
    aligned = str(c.ragged_waves((4096, 1024, 515), 64, 128, rec=rec))
    assert "should take 0% longer" in aligned and "2 waves" not in aligned
    # the sum is printed, and its quotient is the share the text states
    gamma = c.rules(rec).gamma
    slow, fast = (c.round_by_round(4, s, gamma) for s in (3, 4))
    assert c.round_sum_text(4, 3, gamma) in text and c.round_sum_text(4, 4, gamma) in text
    assert f"= {slow / fast:.2f}, so the scalar build should take {slow / fast - 1:.0%}" in text
    # section 4 comes before section 6's symbols: only section 1's preview is used
    assert "gamma" not in text and "q = " not in text and "per_sm" not in text


def test_round_sum_text_writes_out_round_by_round():
    """Each round's blocks over their count to the power gamma, summed: 4 blocks in rounds
    of 3 make 3 then 1; in rounds of 4, one round (negative control: no second term)."""
    assert c.round_sum_text(4, 3, 0.25) == "3 / 3^0.25 + 1 / 1^0.25 = 3.28"
    assert c.round_sum_text(4, 4, 0.25) == "4 / 4^0.25 = 2.83"
    assert c.round_sum_text(8, 4, 0.5) == f"4 / 4^0.5 + 4 / 4^0.5 = {c.round_by_round(8, 4, 0.5):.2f}"


def test_timing_method_is_read_from_the_runs_and_the_shapes_are_out_of_sample(rec):
    """The rates' repeats, warm-up and L2 flush come from the benchmark rows' runs; no
    benchmark shape is a calibration shape (the model never saw them)."""
    text = str(c.timing_method(rec))
    p = c.plan_for((2048, 2048, 2048), rec)
    row = c.row_of(rec, p.kernel, (2048, 2048, 2048), p.params)
    how = rec.runs[row["run"]]["timing"]
    assert f"median of {row['repeats']} timed calls, after {how['warmup']} warm-up" in text
    assert ("empty L2" in text) == how["flush_l2"]
    cal = {tuple(s) for _, _, s in c.calibrate.calibration_runs()}
    shapes = c.calibrate.bench_shapes()
    assert not cal & set(map(tuple, shapes))
    assert f"None of the {len(shapes)} benchmark shapes is a calibration shape" in text


def test_copy_against_gap_sets_the_model_copy_beside_the_timed_gap(rec):
    """At 4097 x 1023 x 515 the plan pads B: the gap is the plan's time less cuBLAS's,
    and the copy is the model's own term; a plan that does not pad (1024^3) is refused."""
    text = str(c.copy_against_gap((4097, 1023, 515), rec))
    p = c.plan_for((4097, 1023, 515), rec)
    row = c.row_of(rec, p.kernel, (4097, 1023, 515), p.params)
    ours = c._time_us(row)
    theirs = 2 * 4097 * 1023 * 515 / (row["reference"]["gflops"]["median"] * 1e3)
    copy = c.model_terms((4097, 1023, 515), 64, 128, 1, rec)["copy of B"]
    assert f"{ours:.1f} µs, cuBLAS's {theirs:.1f} µs, a gap of {ours - theirs:.1f} µs" in text
    assert f"alone: {copy:.1f} µs" in text
    with pytest.raises(ValueError):
        c.copy_against_gap((1024, 1024, 1024), rec)


def test_split_k_edits_show_the_split_then_the_padded_b_with_context():
    """Section 3's diff holds split-K's lines only, section 4's the padded B's; each change
    has a line of context and changes are separated by '...', no hunk headers; the two
    steps compose to the kernel the registry compiles."""
    from gemm_kernels.core.registry import CUDA_DIR
    from gemm_kernels.core.source_edits import apply
    from gemm_kernels.core.split_k_source import EDITS, PAD_B_EDITS, SPLIT_EDITS, derive
    split, pad = str(c.split_k_edits("split")), str(c.split_k_edits("pad_b"))
    assert "PAD_B" not in split and "LDB" not in split and "+    const int tiles = (KS" in split
    assert "+          bool HOIST, bool VEC, bool PAD_B>" in pad and "KS + BK" not in pad
    for text in (split, pad):
        assert "@@" not in text and "\n...\n" in text
        assert any(l.startswith(" ") for l in text.splitlines())     # context lines
    capstone = (CUDA_DIR / "09_capstone.cu").read_text()
    assert EDITS == SPLIT_EDITS + PAD_B_EDITS
    assert apply(apply(capstone, SPLIT_EDITS, "s"), PAD_B_EDITS, "p") == derive(capstone)


def test_the_profile_names_a_step_the_shape_makes_the_same_launch(rec):
    """Streaming loads exist only on the M == 1 path: at N == 1 the 'plain loads' step is
    the same launch as the streaming one and says so; at M == 1 it is not (negative
    control), nor is a launch with another split."""
    rows = [(r["shape"], r["launch"]) for r in c.profile_table("ch12_gemv", rec)]
    same = [(s, l) for s, l in rows if "the same launch as" in l]
    assert same == [("4096x1x4096", next(l for s, l in rows
                                         if s == "4096x1x4096" and "plain loads" in l))]
    ragged = [r["launch"] for r in c.profile_table("ch12_ragged_n", rec)]
    assert ["the same launch as" in l for l in ragged] == [False, False, False, True]
    # `drop` leaves those launches out and keeps the rest in order
    kept = [r["launch"] for r in c.profile_table("ch12_ragged_n", rec, drop=("the same launch",))]
    assert kept == ragged[:3]
    gemv = c.profile_table("ch12_gemv", rec, drop=("plain loads",))
    assert len(gemv) == 4 and not any("plain loads" in r["launch"] for r in gemv)


def test_rate_choice_never_reveals_the_fastest_without_reveal(rec):
    """The model's own pick is rated without the measured fastest (the exercise's answer);
    reveal=True shows it; a choice that is no candidate prints the model's ranking, best
    predicted first."""
    shape = (256, 384, 16384)
    ranking = c.ranked(shape, c.rules(rec), c._limits(rec))
    best = ranking[0][1]
    text = str(c.rate_choice(shape, *best, rec))
    assert "the fastest configuration is" not in text and "the model's best:" not in text
    assert "the fastest configuration is" in str(c.rate_choice(shape, *best, rec, reveal=True))
    bad = str(c.rate_choice(shape, 64, 128, 31, rec))
    listed = bad.split("predicted time over the best's): ")[1].split(", ")
    assert [x.split()[0] for x in listed] == [f"{a}x{b}/{s}" for _, (a, b, s) in ranking]
    assert listed[0].endswith("1.00x")


def test_splits_compared_names_the_fastest_and_cublas_spread(rec):
    shape = (777, 555, 333)
    rows = list(c.timed_here([shape], rec))
    text = str(c.splits_compared(shape, rec))
    best = max(rows, key=lambda r: r["GFLOP/s"])
    assert best["configuration"] in text
    ref = [r["cuBLAS beside it, GFLOP/s"] for r in rows]
    assert c.fmt_number(min(ref)) in text and c.fmt_number(max(ref)) in text
    assert f"median of those cuBLAS calls, {c.fmt_number(statistics.median(ref))}" in text
    assert "Nothing was timed" in str(c.splits_compared((3, 5, 7), rec))


def test_check_terms_accepts_the_models_terms_and_questions_a_wrong_one(rec):
    shape = (256, 384, 16384)
    t = c.model_terms(shape, 128, 128, 1, rec)
    right = {k: t[k] for k in ("blocks", "n", "q", "rounds")}
    assert "all right" in str(c.check_terms(shape, {(128, 128, 1): right}, rec))
    wrong = {**right, "n": right["n"] + 1}
    text = str(c.check_terms(shape, {(128, 128, 1): wrong}, rec))
    assert "all right" not in text and "busiest" in text and f"n = {right['n'] + 1}?" in text
    assert "fill in" in str(c.check_terms(shape, {(128, 128, 1): {"blocks": None}}, rec))


def test_part_1_grades_the_students_terms_and_hides_them_until_right(rec):
    """A fast choice passes only with its terms worked out right; before that the rating
    prints neither its blocks nor its waves (they would answer the terms), and a wrong
    value gets the question check_terms asks."""
    shape = (256, 384, 16384)
    rates = c._measured_rates(shape, rec)
    fastest = max(rates, key=rates.get)
    t = c.model_terms(shape, *fastest, rec)
    right = {k: t[k] for k in ("blocks", "n", "q", "rounds")}
    bare = str(c.rate_choice(shape, *fastest, rec))
    assert "Part 1: not yet" in bare and "fill in blocks, n, q, rounds" in bare
    assert f"{t['blocks']:,} blocks" not in bare
    wrong = str(c.rate_choice(shape, *fastest, rec, terms={**right, "q": right["q"] + 1}))
    assert "Part 1: not yet" in wrong and f"q = {right['q'] + 1}?" in wrong
    good = str(c.rate_choice(shape, *fastest, rec, terms=right))
    assert "Part 1: PASS" in good and f"{t['blocks']:,} blocks" in good
    slow = str(c.rate_choice(shape, 128, 128, 1, rec, terms={"blocks": 6, "n": 1, "q": 1,
                                                               "rounds": 1}))
    assert "Part 1: not yet" in slow


def test_the_opening_table_shows_few_columns(rec):
    table = c.last_mile_table(rec)
    assert table.columns == list(c.LAST_MILE_BRIEF) and "calibration shape" in table.columns


def test_a_shape_where_cublas_varies_is_quoted_against_its_median_call(rec):
    shape = (777, 555, 333)
    if not c._cublas_varies(shape, rec):
        pytest.skip("cuBLAS did not vary at this shape in this recording")
    row = next(r for r in c.bench_rows(rec) if r["shape"] == shape)
    mid = statistics.median(c._cublas_calls(shape, rec))
    note = f"against their median the plan is {100 * row['GFLOP/s'] / mid:.0f}%"
    assert note in str(c.shortfalls(rec, below=100.0)) and note in c.bench_table(rec).title


def test_plot_bench_marks_the_median_share_where_cublas_varies(rec):
    ax = c.plot_bench(rec)
    marked = any("median call" in t.get_text() for t in ax.get_legend().get_texts())
    assert marked == any(c._cublas_varies(r["shape"], rec) for r in c.bench_rows(rec)
                         if r["% of cuBLAS"] is not None)


def test_rate_choice_prints_the_whole_ranking_only_when_asked(rec):
    shape = (256, 384, 16384)
    plain = str(c.rate_choice(shape, 128, 128, 1, rec))
    full = str(c.rate_choice(shape, 128, 128, 1, rec, ranking=True))
    assert "fastest predicted first" not in plain and "fastest predicted first" in full
    n = len(c.ranked(shape, c.rules(rec), c._limits(rec)))
    assert full.split("fastest predicted first")[1].count("x, ") == n - 1


def test_predicted_times_set_a_lone_block_tile_beside_the_plan(rec):
    """At 1024^3, 128 x 64 without a split gives 128 blocks, one per busy SM; the plan
    (several blocks per SM) is predicted faster, and is the one configuration timed."""
    text = str(c.predicted_times((1024, 1024, 1024), [(128, 64, 1), (64, 128, 4)], rec))
    lone, plan = text.split("; ")
    assert "not timed here" in lone and "(the plan)" in plan and "timed" in plan
    t = {cfg: c.model_terms((1024, 1024, 1024), *cfg, rec)["total"]
         for cfg in ((128, 64, 1), (64, 128, 4))}
    assert t[(64, 128, 4)] < t[(128, 64, 1)]
    assert "gamma" not in text



def test_plot_last_block_gives_the_sum_to_the_block_that_counts_in_last():
    import matplotlib
    matplotlib.use("Agg")
    ax = c.plot_last_block((2, 3, 1))
    texts = [x.get_text() for x in ax.texts]
    assert sum("returns" in x for x in texts) == 2          # all but the last block
    assert sum(x.startswith("last:") for x in texts) == 1
    assert "fence\n3 of 3 in" in texts
    with pytest.raises(ValueError):
        c.plot_last_block((1, 1, 2))


def test_the_capstone_share_checks_the_idle_sms_without_the_model(rec):
    """At 1024^3 the measured rate per busy SM, times every SM, is printed with its share
    of cuBLAS, each product multiplying the factor as printed; where every SM has a block
    (4096^3, negative control) there is nothing idle to check."""
    row = c.row_of(rec, "capstone", (1024, 1024, 1024), {})
    sms = c.rules(rec).sm_count
    per = round(row["gflops"]["median"] / 64, 1)
    ref = row["reference"]["gflops"]["median"]
    text = c.capstone_share(1024, rec)
    assert f"{c.fmt_number(row['gflops']['median'])} / 64 = {per:,.1f} GFLOP/s" in text
    assert f"{sms} x {per:,.1f} = {c.fmt_number(sms * per)} GFLOP/s, {100 * sms * per / ref:.0f}%" in text
    assert text.index("Per busy SM") < text.index("Cross-check")   # the model comes second
    assert "Per busy SM" not in c.capstone_share(4096, rec)


def test_the_tile_table_shows_the_padded_build(rec):
    """The padded build's column: at 4097 x 1023 x 515 its 64 x 128 blocks per SM are the
    ones section 4's waves use, and with B padded that tile is back to the aligned
    build's registers and blocks."""
    rows = {r["tile"]: r for r in c.tile_table(rec)}
    r = rows["64x128"]
    padded = c.wave_layout((4097, 1023, 515), 64, 128, 1, rec, padded=True)
    assert r["blocks per SM, other N, B padded"] == padded["per_sm"]
    assert r["blocks per SM, other N, B padded"] == r["blocks per SM, N a multiple of 4"]
    assert r["blocks per SM, other N"] < r["blocks per SM, other N, B padded"]


def test_the_gemv_profile_names_streaming_loads_where_the_launch_uses_them(rec):
    """M == 1 launches with streaming loads say so, the plain ones do not; at N == 1,
    where the path has no streaming loads, no row claims them."""
    for r in c.profile_table("ch12_gemv", rec):
        streams = "streaming loads" in r["launch"]
        assert streams == (r["shape"] == "1x4096x4096" and "plain loads" not in r["launch"])
    assert all(r["launch"].count("streaming loads") == 1
               for r in c.profile_table("ch12_gemv_plan", rec))
