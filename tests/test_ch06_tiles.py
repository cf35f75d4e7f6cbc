"""Chapter 06's tables: the dot-product order unrolled compiles to the register-cached
loop, the path from K5 to the default and its hypothesis check, the patches, and the
variants compiled for the static analysis only."""
import pytest

from gemm_kernels.core.kernels import get
from gemm_kernels.notebook import ch06_tiles
from gemm_kernels import records

K5 = ch06_tiles.K5
ISSUE = ch06_tiles.ISSUE


def test_the_unrolled_dot_product_compiles_to_the_register_cached_loop():
    v = ch06_tiles.unrolled_dot_product()
    assert v.name != "tile_2d" and "#pragma unroll 1" not in v.source_text().split(
        "sgemm_tile_2d(")[1].split("sgemm_tile_2d_reg")[0]
    rows = ch06_tiles.loop_orders([("rolled", "tile_2d", K5), ("unrolled", v, K5),
                                   ("reg", "tile_2d_reg", K5)])
    rolled, unrolled, reg = rows
    assert rolled["FFMAs per loaded register: fewest"] == rolled["most"] == 1
    for r in (unrolled, reg):
        assert (r["shared loads in the code"], r["of them LDS.128"], r["FFMA in the code"]) \
            == (32, 32, 512)
        assert r["FFMAs per loaded register: fewest"] == r["most"] == 8
        assert r["inner k loop runs"] == 1 and r["FFMA executed"] == "512"
    # the rolled k loop: its code runs BK times a trip, two shared loads per FFMA executed
    assert rolled["inner k loop runs"] == K5["BK"]
    assert rolled["FFMA executed"] == "512" and rolled["shared loads executed"] == "1,024"
    # the registry's kernel itself is untouched
    assert "#pragma unroll 1" in get("tile_2d").source_text()


def test_two_blocks_asked_for_caps_the_registers_at_128():
    v = ch06_tiles.with_min_blocks("tile_2d_reg", 2)
    row = ch06_tiles.static_rows([("capped", v, K5)])[0]
    assert row["registers"] <= 128 and row["blocks/SM"] == 2


def test_a_source_that_lost_its_pattern_is_refused(monkeypatch):
    k = get("tile_2d")
    monkeypatch.setattr(type(k), "source_text", lambda self: "no pragma here")
    with pytest.raises(ValueError, match="unroll 1"):
        ch06_tiles.unrolled_dot_product()


def test_path_is_one_change_per_step():
    rows = ch06_tiles.path_rows()
    assert [r["step"] for r in rows] == [label for label, _ in ch06_tiles.PATH]
    params = [dict(kv.split("=") for kv in r["params"].split()) for r in rows]
    for a, b in zip(params, params[1:]):
        assert sum(a[k] != b[k] for k in a) == 1, (a, b)
    assert [r["blocks/SM"] for r in rows[1:3]] == [1, 2]


def _row(step, barrier, long_sb, issue):
    return {"step": step, "barrier": barrier, "long scoreboard": long_sb,
            "issue share %": issue}


def test_path_check_names_what_is_missing_and_reads_the_counters_when_there():
    missing = ch06_tiles.path_check([_row("K5", .3, .9, 45), _row("patch 8x4", None, None, None),
                                     _row("BM 64", None, None, None), _row("BK 16", .1, .4, 62)])
    first, second = missing.splitlines()
    assert "not profiled: patch 8x4 and BM 64" in first
    assert "not profiled: BM 64" in second and "BK 16" not in second.split(":")[1]
    yes = ch06_tiles.path_check([_row("K5", .3, .9, 45), _row("a", .5, 1.0, 50),
                                 _row("b", .2, .5, 60), _row("c", .1, .4, 62)])
    assert yes.count("(falls)") == 2 and yes.count("(rises)") == 2
    assert "1.50 -> 0.70" in yes and "0.70 -> 0.50" in yes
    no = ch06_tiles.path_check([_row("K5", .3, .9, 45), _row("a", .2, .5, 60),
                                _row("b", .5, 1.0, 50), _row("c", .1, .4, 62)])
    first, second = no.splitlines()
    assert "0.70 -> 1.50 (rises)" in first and "60.0% -> 50.0% (falls)" in first
    assert "(falls)" in second and "(rises)" in second


def test_path_check_gives_one_step_on_request_and_refuses_an_unknown_one():
    rows = [_row("K5", .3, .9, 45), _row("a", .5, 1.0, 50), _row("b", .2, .5, 60),
            _row("c", .1, .4, 62)]
    only = ch06_tiles.path_check(rows, only="c")
    assert only.startswith("b -> c") and "\n" not in only
    with pytest.raises(ValueError, match="'K5'"):
        ch06_tiles.path_check(rows, only="K5")


def test_path_checks_the_recorded_steps_and_both_move_as_predicted():
    # The study ch06_path_stalls is recorded: the check reads it and does not say
    # "not profiled".
    text = ch06_tiles.path_check()
    assert "not profiled" not in text
    assert text.count("(falls)") == 2 and text.count("(rises)") == 2


def test_the_path_table_splits_into_what_changed_and_where_the_warps_wait():
    changed, waits = ch06_tiles.path_table(part="changed"), ch06_tiles.path_table(part="evidence")
    assert "TFLOP/s at 2048" in changed.columns and "barrier" not in changed.columns
    # the rates are the first half's: the second keeps only their step beside the issue's
    assert {"barrier", "x previous"} <= set(waits.columns)
    assert "TFLOP/s at 2048" not in waits.columns
    # the days of the runs are in the caption, not a column
    assert "timed on" not in waits.columns and "2026" in waits.title
    assert len(changed.columns) < len(ch06_tiles.path_table().columns) > len(waits.columns)
    # the chapter claims the unrolled dot product is within a few registers of the
    # register-cached kernel: the column it needs is on the page
    orders = ch06_tiles.loop_orders([("reg", "tile_2d_reg", K5)])
    assert "registers" in orders.columns and "inner k loop runs" not in orders.columns


def test_the_evidence_table_puts_rates_and_counters_at_one_size():
    """At 4096^3, the counters' size, every step has a rate's step, the day it was timed,
    and its issue share over the step before's beside the rate's."""
    t = ch06_tiles.path_table(4096, part="bookkeeping")
    rows = list(t)
    assert "4096³" in t.title
    assert all(r["TFLOP/s at 4096"] is not None and r["timed on"] for r in rows)
    assert rows[0]["issue x previous"] is None and rows[0]["profiled x previous"] is None
    for before, after in zip(rows, rows[1:]):
        assert float(after["issue x previous"]) == pytest.approx(
            after["issue share %"] / before["issue share %"], abs=0.005)


def test_the_evidence_table_sets_the_profiled_speed_up_beside_the_timed_one():
    """'profiled x previous' is the profiled time of the step before over this step's,
    from the same counters as the stalls: a speed-up, read beside the timed `x previous`."""
    t = ch06_tiles.path_table(4096, part="bookkeeping")
    cols = t.columns
    assert cols.index("x previous") + 1 == cols.index("profiled x previous")
    rows = ch06_tiles.path_rows(4096)
    times = [ch06_tiles._stall_row("tile_2d_reg", ch06_tiles._params("tile_2d_reg", p),
                                   (4096,) * 3)["metrics"][ch06_tiles._TIME]
             for _, p in ch06_tiles.PATH]
    for i in range(1, len(rows)):
        assert float(rows[i]["profiled x previous"]) == pytest.approx(
            times[i - 1] / times[i], abs=0.005)
    # the tile step: the timed rate rose more than the profiled speed, as the chapter says
    tile = rows[ch06_tiles.TILE_STEP[1]]
    assert float(tile["x previous"]) > float(tile["profiled x previous"])


def test_the_path_plot_draws_every_step_from_the_rows():
    """Three panels, one bar per step of PATH in each; the stall panel stacks barrier on
    long scoreboard; a step without a profile has no stall or issue bar (height 0)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = ch06_tiles.path_rows()
    fig = ch06_tiles.path_plot(rows=rows)
    rate, issue, stalls = fig.axes[:3]
    assert [round(b.get_height(), 1) for b in rate.patches] == \
        [float(r["TFLOP/s at 2048"]) for r in rows]
    assert [round(b.get_height(), 1) for b in issue.patches] == \
        [round(r["issue share %"], 1) for r in rows]
    tops = [b.get_y() + b.get_height() for b in stalls.patches[len(rows):]]
    assert tops == pytest.approx([r["barrier"] + r["long scoreboard"] for r in rows])
    # stalls compare only at equal warps per SM: the other steps' bars are hatched
    assert [bool(b.get_hatch()) for b in stalls.patches[:len(rows)]] == \
        [r["warps/SM"] != rows[-1]["warps/SM"] for r in rows]
    # the legend: solid swatches for the two stalls, one hatched swatch for the hatching
    swatches = stalls.get_legend().get_patches()
    assert [bool(p.get_hatch()) for p in swatches] == [False, False, True]
    plt.close(fig)
    missing = [{**r, "barrier": None, "long scoreboard": None, "issue share %": None}
               if r["step"] == "K5" else r for r in rows]
    fig = ch06_tiles.path_plot(rows=missing)
    assert fig.axes[1].patches[0].get_height() == 0 and fig.axes[2].patches[0].get_height() == 0
    plt.close(fig)


def test_the_path_plot_draws_a_selection_of_panels_in_order():
    """The chapter shows the rates before its predictions and the counters after them:
    path_plot draws only the panels asked for, in the order rate, issue, stalls."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = ch06_tiles.path_rows()
    fig = ch06_tiles.path_plot(rows=rows, panels=("stalls", "issue"))
    issue, stalls = fig.axes
    assert issue.get_title().startswith("issue share")
    assert [round(b.get_height(), 1) for b in issue.patches] == \
        [round(r["issue share %"] or 0.0, 1) for r in rows]
    assert len(stalls.patches) == 2 * len(rows) and stalls.get_legend() is not None
    plt.close(fig)
    fig = ch06_tiles.path_plot(rows=rows, panels=("rate",))
    assert len(fig.axes) == 1 and fig.axes[0].get_title().startswith("rate at")
    plt.close(fig)
    with pytest.raises(ValueError):
        ch06_tiles.path_plot(rows=rows, panels=("rates",))


def test_grader_note_agrees_in_number():
    from gemm_kernels.exercises.ch06_checks import widths_words
    assert "1 is LDS.128 and 8 narrower" in widths_words({"LDS.128": 1, "LDS": 8})
    assert "2 are LDS.128" in widths_words({"LDS.128": 2, "LDS": 8})


def test_patches_carry_ffma_per_wavefront():
    rows = {r["patch"]: r for r in ch06_tiles.patch_rows()}
    assert set(rows) == {"8x8", "8x4", "4x8", "4x4"}
    # one quantity throughout: the warp's FFMAs (32 x a thread's) per wavefront
    assert [rows[p]["FMAs per wavefront"] for p in ("8x4", "8x8", "4x4", "4x8")] == \
        [128, 102, 85, 57]
    assert "FFMA per wavefront" not in rows["8x4"]


def test_patch_table_keeps_the_chosen_patches_in_order():
    table = ch06_tiles.patch_table(patches=("8x4", "4x8"))
    assert [r["patch"] for r in table] == ["8x4", "4x8"]
    assert "with the patches 8x4 and 4x8:" in table.title
    assert len(list(ch06_tiles.patch_table())) == 4


def test_the_capped_contiguous_patch_closes_most_of_the_gap_to_the_strided_one():
    from gemm_kernels.notebook import ch06_tiles
    rows = {r["kernel"]: r for r in ch06_tiles.capped_split()}
    capped = rows["K5, two blocks"]
    assert capped["registers"] == 128 and capped["blocks/SM"] == 2
    assert rows["K5"]["blocks/SM"] == 1 and rows["strided"]["share of the gap closed"] == "100%"
    assert int(capped["share of the gap closed"].rstrip("%")) > 50
    assert float(capped["% of FP32 peak"]) > float(rows["K5"]["% of FP32 peak"])


def test_counting_and_the_step_table_give_one_ffma_per_wavefront_the_warps():
    row = ch06_tiles.counting([("reg", "tile_2d_reg", K5)])[0]
    assert row["FMAs per wavefront"] == 102 and "FFMA per wavefront" not in row
    step = ch06_tiles.step_table([("tile_2d_reg", K5)])
    assert "FFMA per wavefront" not in step.columns
    assert step[0]["FMAs per wavefront"] == 102 and step[0]["LDS.128"] == 32
    # the measure is per tile; "step" names only the path from K5 to the default
    assert step.title.startswith("one tile (one BK slice of K)")


def test_the_counter_table_and_the_heat_maps_are_written_for_people():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = ch06_tiles.counter_table([("tile_2d", "tile_2d", K5)])
    assert t[0]["ld wf model"].count(",") >= 2
    fig = ch06_tiles.sweep_heatmaps()
    assert [a.get_ylabel() for a in fig.axes[2:]] == ["best TFLOP/s at 2048³"] * 2
    plt.close(fig)


def test_the_ladder_plot_names_cublas_as_timed_on_its_own():
    import matplotlib
    matplotlib.use("Agg")
    from gemm_kernels.memory import ch05_06_thread_tiles as tiles
    table = tiles.ladder_table(["tile_1d", "tile_2d"], [], [2048])
    ax = ch06_tiles.ladder_plot(table)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "cuBLAS (timed on its own at each size)" in labels
    assert any(l.endswith("tile_2d (k loop kept rolled: the counter-example)") for l in labels)
    assert not any(l.startswith("cublas") for l in labels)


def test_the_b_load_picture_labels_words_by_their_place_in_the_b_tile():
    """K5's first B load: lane tc reads columns 8*tc .. 8*tc+3 of row 0 of Bs, float4
    number 2*tc; the labels count within the B tile, not from the start of shared memory
    (where the A tile's 1,024 words come first)."""
    import matplotlib
    matplotlib.use("Agg")
    from gemm_kernels.notebook import ch06_tiles
    k5 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
    ax = ch06_tiles.b_load_picture(k5)
    labels = {t.get_text() for t in ax.texts if t.get_text().isdigit()}
    assert labels == {str(2 * tc) for tc in range(16)}, labels
    assert "float4 f of Bs" in ax.get_xlabel()


def test_the_lds128_pictures_set_the_a_broadcast_beside_the_conflicting_b_load():
    """At K5 the A load is a broadcast in each half-warp (2 wavefronts, the least an
    LDS.128 costs) and the B load conflicts 2-way (8): the titles say so."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from gemm_kernels.notebook import ch06_tiles
    fig = ch06_tiles.lds128_pictures({"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8})
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0] == "the A load of warp 0: 2 wavefronts"
    assert titles[1].startswith("the B load of warp 0: 8 wavefronts")
    plt.close(fig)


def test_block_timeline_is_a_labelled_model():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = ch06_tiles.block_timeline()
    ax = fig.axes[0]
    assert "model" in ax.get_title() and "schematic" in ax.get_xlabel()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "one block of 16 warps" and "block 1 (8 warps)" in labels
    plt.close(fig)


def test_block_timeline_draws_chapter_07s_one_block_of_8_warps():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = ch06_tiles.block_timeline(one_block_warps=8, copy_label="LDG, STS")
    ax = fig.axes[0]
    assert "one block of 8 warps (top) or two blocks of 8" in ax.get_title()
    assert [t.get_text() for t in ax.get_yticklabels()][0] == "one block of 8 warps"
    assert "LDG, STS" in [t.get_text() for t in ax.texts]
    plt.close(fig)


def test_the_tile_step_keeps_the_waves_and_lowers_the_reuse():
    # BM 128 -> 64 doubles the grid but also the blocks per SM, so the waves stay; each
    # block copies more words per FFMA (64*128/(64+128) against 128*128/(128+128)).
    before, after = ch06_tiles.tile_step_rows()
    assert (before["step"], after["step"]) == ("patch 8x4", "BM 64")
    assert (before["blocks/SM"], after["blocks/SM"]) == (1, 2)
    assert before["waves"] == after["waves"]
    assert float(after["FMAs per word copied"]) < float(before["FMAs per word copied"])


def test_per_instruction_counts_per_tile_not_per_step():
    from gemm_kernels.memory import ch05_06_thread_tiles as tiles
    t = tiles.per_instruction([("tile_2d_reg", {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8})])
    assert "per tile" in t.columns and "per step" not in t.columns
    assert "one tile" in t.title and "step" not in t.title


def test_path_check_sets_the_two_stalls_beside_the_total_where_rows_carry_it():
    rows = [{**_row(s, b, l, i), ch06_tiles.ALL_STALLS: t}
            for s, b, l, i, t in (("K5", .3, .9, 45, 5.0), ("a", .5, 1.0, 50, 8.0),
                                  ("b", .2, .5, 60, 7.0), ("c", .1, .4, 62, 6.5))]
    first, second = ch06_tiles.path_check(rows).splitlines()
    assert "8.00 -> 7.00" in first and "fall by 0.80, the total by 1.00" in first
    assert "fall by 0.20, the total by 0.50" in second
    assert "all stall reasons" not in ch06_tiles.path_check([_row("K5", .3, .9, 45),
        _row("a", .5, 1.0, 50), _row("b", .2, .5, 60), _row("c", .1, .4, 62)])


def test_path_check_divides_warps_per_scheduler_by_the_issue_share_where_rows_carry_warps():
    rows = [{**_row(s, b, l, i), ch06_tiles.ALL_STALLS: t, "warps/SM": 16}
            for s, b, l, i, t in (("K5", .3, .9, 45, 5.0), ("a", .5, 1.0, 50, 8.0),
                                  ("b", .2, .5, 64, 6.3), ("c", .1, .4, 80, 5.0))]
    first, second = ch06_tiles.path_check(rows).splitlines()
    assert "4 / 0.500 = 8.00 -> 4 / 0.640 = 6.25" in first
    assert "4 / 0.800 = 5.00" in second


def test_standing_ratios_divides_each_pair_and_names_a_missing_rate():
    rows = [{"kernel": "K5", "TFLOP/s": 20.0},
            {"kernel": "ch05 kernel-4 tile", "TFLOP/s": 16.0},
            {"kernel": "ch06 default", "TFLOP/s": None},
            {"kernel": "ch05 default", "TFLOP/s": 22.0}]
    first, second = ch06_tiles.standing_ratios(rows=rows).splitlines()
    assert first.endswith("20.0 / 16.0 TFLOP/s at 4096³ = x1.25") and "kernel-4 tile" in first
    assert second.endswith("not measured")


def test_standing_ratios_says_which_runs_timed_the_pair_and_can_give_one_line():
    rows = [{"kernel": "K5", "TFLOP/s": 20.0, "run": "r2", "timed on": "2026-11-26"},
            {"kernel": "ch05 kernel-4 tile", "TFLOP/s": 16.0, "run": "r1",
             "timed on": "2026-11-23"},
            {"kernel": "ch06 default", "TFLOP/s": 30.0, "run": "r1", "timed on": "2026-11-23"},
            {"kernel": "ch05 default", "TFLOP/s": 20.0, "run": "r1", "timed on": "2026-11-23"}]
    line = ch06_tiles.standing_ratios(rows=rows, only="K5")
    assert "\n" not in line and line.startswith("K5 / ch05 kernel-4 tile")
    assert line.endswith("x1.25, timed in two runs (2026-11-26 and 2026-11-23)")
    assert ch06_tiles.standing_ratios(rows=rows, only="ch06 default").endswith(
        "x1.50, timed in one run")
    rows[0]["timed on"] = "2026-11-23"
    assert ch06_tiles.standing_ratios(rows=rows, only="K5").endswith(
        "timed in two runs (both on 2026-11-23)")


def test_boehm_step_sets_each_gpus_ratio_of_its_own_rates_and_the_capped_step():
    rows = [{"kernel": "K5", "TFLOP/s": 20.0},
            {"kernel": "ch05 kernel-4 tile", "TFLOP/s": 16.0}]
    lines = ch06_tiles.boehm_step(rows=rows, capped=28.0).splitlines()
    # his README: 15,971.7 / 8,474.7 GFLOP/s; here 20 / 16, and 28 / 16 held to two blocks
    assert lines[1].endswith("x1.88") and "4092x4092" in lines[1]
    assert lines[2].endswith("16.0 -> 20.0 TFLOP/s = x1.25")
    assert "K5, two blocks" in lines[3] and lines[3].endswith("16.0 -> 28.0 TFLOP/s = x1.75")
    assert len(ch06_tiles.boehm_step(rows=rows).splitlines()) == 3


def test_boehm_table_sets_each_rate_against_its_gpus_peak_and_its_cublas():
    rows = [{"kernel": "K5", "TFLOP/s": 20.0},
            {"kernel": "ch05 kernel-4 tile", "TFLOP/s": 16.0}]
    props = {"sm_count": 100, "fp32_lanes_per_sm": 128, "sm_clock_mhz": 2000,
             "compute_capability": "9.0"}
    table = ch06_tiles.boehm_table(rows=rows, props=props)
    got = {(r["GPU"], r["kernel"]): r for r in table}
    # A6000: 84 x 128 x 2 x 1.8 GHz = 38.7 TFLOP/s; kernel 5 is 41% of it, 68.7% of cuBLAS
    assert "38.7 TFLOP/s peak" in table.title and "51.2 TFLOP/s peak" in table.title
    assert got[("Boehm", "kernel 5")]["% of FP32 peak"] == "41"
    assert got[("Boehm", "kernel 5")]["% of that GPU's cuBLAS"] == "68.7"
    # here: 100 x 128 x 2 x 2 GHz = 51.2 TFLOP/s; K5 at 20 is 39%
    assert got[("here", "K5")]["% of FP32 peak"] == "39"
    assert ch06_tiles.share_of_peak(25600, props) == 50.0


def test_issue_table_reads_the_profilers_clock_from_its_elapsed_cycles_over_the_time():
    rows = ch06_tiles.issue_table()
    assert all(r["profiler clock (GHz)"] is not None for r in rows)
    first = rows[0]
    # sm__cycles_elapsed.avg over gpu__time_duration.sum (ns) is cycles per ns: GHz
    assert 0.5 < float(first["profiler clock (GHz)"]) < 3.0


def test_path_check_table_sets_each_step_before_and_after_and_leaves_unprofiled_ones_blank():
    rows = [{**_row(s, b, l, i), ch06_tiles.ALL_STALLS: t, "warps/SM": 16}
            for s, b, l, i, t in (("K5", .3, .9, 45, 5.0), ("a", .5, 1.0, 50, 8.0),
                                  ("b", .2, .5, 64, 6.3), ("c", .1, .4, 80, 5.0))]
    first, second = ch06_tiles.path_check_table(rows)
    assert first["step"] == "a -> b" and first["barrier + long scoreboard"] == "1.50 -> 0.70"
    assert first["issue share"] == "50.0% -> 64.0%"
    # the column names what is divided: warps per scheduler (warps per SM ÷ 4), not per SM
    assert "warps per scheduler" in ch06_tiles.ALL_EXPECTED
    assert first[ch06_tiles.ALL_EXPECTED] == "8.00 -> 6.25"
    assert first["fall of the two"] == "0.80"
    assert first["fall of all stalls"] == "1.70"
    # the two are 1.50 of 8.00 stalls (19%) before, and carry 0.80 of the 1.70 fall (47%)
    assert first["the two: share of all stalls"] == "1.50 / 8.00 = 19%"
    assert first["the two: share of the fall"] == "0.80 / 1.70 = 47%"
    gap = ch06_tiles.path_check_table([_row("K5", .3, .9, 45), _row("a", None, None, None),
                                       _row("b", .2, .5, 60), _row("c", .1, .4, 62)])
    assert gap[0]["barrier + long scoreboard"] is None and gap[0]["all stalls"] is None
    assert gap[1]["barrier + long scoreboard"] == "0.70 -> 0.50"


def test_fall_shares_gives_each_steps_two_falls_and_the_table_its_shares():
    rows = [{**_row(s, b, l, i), ch06_tiles.ALL_STALLS: t, "warps/SM": 16}
            for s, b, l, i, t in (("K5", .3, .9, 45, 5.0), ("a", .5, 1.0, 50, 8.0),
                                  ("b", .2, .5, 64, 6.3), ("c", .1, .4, 80, 5.0))]
    first, first_shares, second, _ = ch06_tiles.fall_shares(rows).splitlines()[1:]
    assert first == ("  a -> b: all stalls 8.00 -> 6.30, a fall of 1.70; "
                     "barrier + long scoreboard 1.50 -> 0.70, a fall of 0.80")
    # both shares the prediction compares, on the line under their step
    assert first_shares == ("    barrier + long scoreboard: 1.50 / 8.00 = 19% of all stalls "
                            "before the step; 0.80 / 1.70 = 47% of the fall")
    assert second.startswith("  b -> c: ")
    table = ch06_tiles.path_check_table(rows)
    # each share reads off its numerator and denominator
    assert table[0]["the two: share of all stalls"] == "1.50 / 8.00 = 19%"
    assert table[0]["the two: share of the fall"] == "0.80 / 1.70 = 47%"
    # the recorded steps: the share of the fall above the share of all stalls, both times
    for r in ch06_tiles.path_check_table():
        of_all, of_fall = (int(r[c].split("= ")[1].rstrip("%")) for c in
                           ("the two: share of all stalls", "the two: share of the fall"))
        assert of_fall > of_all


def test_the_bound_table_prices_each_kernel_with_chapter_05s_bound():
    from gemm_kernels.notebook import ch05_tile_1d
    t = ch06_tiles.bound_table([("K5", "tile_2d_reg", K5)])
    w = ch05_tile_1d.step_wavefronts("tile_2d_reg", K5)
    assert w["loads"] == 160 and w["FFMA"] == 512          # Counting's 160 load wavefronts
    # the chapter's one shared-memory measure: a warp's lane FMAs per wavefront, stores included
    assert t[0]["FMAs per wavefront, loads and stores"] == round(32 * w['FFMA'] / w['total'])
    assert t[0]["bound TFLOP/s"] == f"{ch05_tile_1d.smem_bound(w['total'] / w['FFMA']) / 1e3:.1f}"
    assert "SMs x" in t.title and "GHz" in t.title


def test_contiguous_vs_strided_gives_the_ranges_and_counts_where_they_are_apart():
    t = ch06_tiles.contiguous_vs_strided(4, 4)
    assert "min..max" in t.columns and "min..max " in t.columns
    lo, hi = (float(x) for x in t[0]["min..max"].split(".."))
    assert lo <= float(t[0]["contiguous"]) <= hi
    assert "ranges apart in" in t.title
    # at 4x4 every shape's ranges are apart: the title says so rather than "8 of 8"
    assert f"apart in all {len(t)};" in t.title
    assert "of them" in ch06_tiles.contiguous_vs_strided(8, 4).title   # 6 of 8 apart


def test_issue_summary_keeps_what_the_identity_needs_and_names_the_warps_achieved():
    t = ch06_tiles.issue_summary()
    rows = list(t)
    assert [r["kernel"] for r in rows] == [r["kernel"] for r in ch06_tiles.issue_table()]
    assert all(r["issue share"].endswith("%") for r in rows)
    assert "warps per SM, achieved" in rows[0]
    # the profiler's clock, beside the times it makes longer than the timed runs'
    assert [r["profiler clock (GHz)"] for r in rows] == [
        r["profiler clock (GHz)"] for r in ch06_tiles.issue_table()]


def test_issue_rule_divides_instructions_by_issue_share_and_prints_each_division():
    # 2 billion instructions at 40% against 4 billion at 50%: 0.5 / 0.8 = 0.62 of the
    # time; alone, 2 / (100 x 4 x 0.4 x 1.5 GHz) = 8.3 ms
    counters = {
        "fast": {"smsp__inst_executed.sum": 2e9, ISSUE: 40.0,
                 "gpu__time_duration.sum": 9e6, "sm__cycles_elapsed.avg": 1.35e7},
        "slow": {"smsp__inst_executed.sum": 4e9, ISSUE: 50.0,
                 "gpu__time_duration.sum": 12e6, "sm__cycles_elapsed.avg": 1.8e7}}
    text = ch06_tiles.issue_rule("fast", "slow", counters, sm_count=100)
    assert "instructions 2.000 / 4.000 billion = 0.500" in text
    assert "issue share 40.00% / 50.00% = 0.800" in text
    assert "time 0.500 / 0.800 = 0.62 (profiled: 9.00 / 12.00 ms = 0.75)" in text
    assert "(100 x 4 x 0.4000 x 1.50 GHz) = 8.3 ms (profiled: 9.00 ms)" in text


def test_issue_rule_reads_the_recorded_profile_by_the_chapters_names():
    text = ch06_tiles.issue_rule()
    assert text.startswith("time ≈ instructions / (SMs x 4 schedulers x issue share x clock)")
    assert "K5 over ch05 kernel-4 tile:" in text and "K5 alone:" in text


def test_the_stall_table_lists_every_reason_and_its_fall_at_the_two_predicted_steps():
    rows = list(ch06_tiles.stall_table())
    by = {r["stall reason"]: r for r in rows}
    assert rows[-1]["stall reason"] == ch06_tiles.ALL_WITH_SELECTED
    assert {"short scoreboard", "long scoreboard", "barrier", "selected"} <= set(by)
    tile = "fall, patch 8x4 -> BM 64"
    # each fall is the column before minus the column after, and the reasons add up
    for r in rows:
        assert abs(float(r["patch 8x4"]) - float(r["BM 64"]) - float(r[tile])) < 0.011
    parts = sum(float(r[tile]) for r in rows[:-1])
    assert abs(parts - float(by[ch06_tiles.ALL_WITH_SELECTED][tile])) < 0.1


def test_the_b_load_picture_says_when_every_bank_read_is_outlined():
    # K5's B load: every bank a phase reads serves two words; TN = 4's: none does
    assert ch06_tiles.lds128_pictures(K5).axes[1].get_title().endswith("serves two distinct words: outlined)")
    assert ch06_tiles.lds128_pictures({**K5, "TN": 4}).axes[1].get_title().endswith("words)")


def test_fmas_per_wavefront_keep_a_decimal_below_ten():
    # tile_2d's 16/3: a whole 5 would move its bound by several percent
    assert ch06_tiles.fmas_shown(16 / 3) == 5.3 and ch06_tiles.fmas_shown(102.4) == 102
    row = ch06_tiles.counting([("dot", "tile_2d", K5)])[0]
    assert row["FMAs per wavefront"] == 5.3


def test_the_capped_split_gives_its_rates_in_tflops():
    row = ch06_tiles.capped_split()[0]
    assert "GFLOP/s" not in row and "." in row["TFLOP/s"] and float(row["TFLOP/s"]) < 100


def test_the_ladder_plot_and_its_table_are_in_tflops():
    """The chapter speaks TFLOP/s: the ladder's plot and its table say so, with the
    rates of the GFLOP/s table over 1000."""
    import matplotlib
    matplotlib.use("Agg")
    from gemm_kernels.memory import ch05_06_thread_tiles as tiles
    table = tiles.ladder_table(["tile_1d"], [], [2048])
    ax = ch06_tiles.ladder_plot(table)
    assert ax.get_ylabel().startswith("TFLOP/s") and "GFLOP" not in ax.get_title()
    rows = ch06_tiles.ladder_rows(table)
    assert "TFLOP/s" in rows.columns and "GFLOP/s" not in rows.columns
    for g, t in zip(table, rows):
        assert t["TFLOP/s"] == f"{g['GFLOP/s'] / 1e3:.1f}"
    line = next(l for l in ax.get_lines() if l.get_label().startswith("05"))
    assert abs(line.get_ydata()[0] - table[0]["GFLOP/s"] / 1e3) < 1e-9


def test_the_configurations_table_has_every_named_configuration_and_the_swept_values():
    from gemm_kernels.core.kernels import get
    default = get("tile_2d_reg").defaults()
    t = ch06_tiles.configurations(dict(BM=128, BN=128, BK=8, TM=8, TN=8), default)
    assert t.columns == ["name", "kernel", "BM", "BN", "BK", "TM", "TN", "where it is used"]
    by = {r["name"]: r for r in t}
    assert set(by) == {n for n, *_ in ch06_tiles.NAMES} | {"values swept"}
    assert by["K5"]["BM"] == 128 and {k: by["ch06 default"][k] for k in default} == default
    assert by["ch05 default"]["TN"] == "-" and by["strided"]["kernel"] == "tile_2d_strided"
    assert (by["BM 64"]["BM"], by["BM 64"]["TN"]) == (64, 4)
    assert by["values swept"]["TM"] == "4, 8" and t[-1]["name"] == "values swept"


def test_the_folded_configurations_show_the_main_path_first_and_fold_the_rest():
    from gemm_kernels.core.kernels import get
    shown = ch06_tiles.configurations(ch06_tiles.K5, get("tile_2d_reg").defaults(),
                                      fold_rest=True)
    main, folded = shown.items
    names = [n for n, *_ in ch06_tiles.NAMES]
    assert [r["name"] for r in main] == names[:ch06_tiles.MAIN_NAMES]
    assert [r["name"] for r in folded.inner] == names[ch06_tiles.MAIN_NAMES:] + ["values swept"]
    html = shown._repr_html_()
    assert html.index("ch06 default") < html.index("<details>") < html.index("K5, two blocks")
    assert html.index("<details>") < html.index("dot-product order")
    # up front only the names needed before the first section: the kernel to beat,
    # Boehm's tile and the exercise's; the others are introduced where they are used
    assert [r["name"] for r in main] == ["ch05 default", "K5", "ch06 default"]


def test_the_capped_split_places_each_rate_in_the_gap_from_k5_to_strided():
    t = ch06_tiles.capped_split()
    assert [r["kernel"] for r in t] == ["K5", "strided", "K5, two blocks"]
    assert [r["share of the gap closed"] for r in t][:2] == ["0%", "100%"]


def test_the_misplaced_b_column_doubles_the_loads_but_stays_under_the_static_limit():
    sol, wrong = ch06_tiles.mistake_loads()
    assert (sol["LDS.128"], sol["LDS"]) == (48, 0) and sol["FFMA"] == wrong["FFMA"] == 512
    # tc + j is not a multiple of 4: B's four words no longer fuse into one LDS.128
    assert wrong["LDS"] > 0 and wrong["LDS.128"] < sol["LDS.128"]
    per = "shared loads per 32 FFMA"
    assert float(wrong[per]) == 2 * float(sol[per])
    assert float(wrong[per]) <= wrong["the static step allows"] == 12


def test_each_configuration_has_one_name_in_every_table():
    # the chapter's prose calls each configuration by one short name: the tables too
    names = {"K5", "ch06 default", "ch05 default", "ch05 kernel-4 tile"}
    issue = {r["kernel"] for r in ch06_tiles.issue_table()}
    assert issue == {"K5", "ch05 default", "ch05 kernel-4 tile"}
    assert [r["step"] for r in ch06_tiles.path_rows()][::3] == ["K5", "ch06 default"]
    assert {label for label, _, _ in ch06_tiles.STORY} == {"K5", "ch06 default", "ch05 default"}
    assert names >= {r["kernel"] for r in ch06_tiles.bound_table()} - {"tile_2d"}
    assert {r["kernel"] for r in ch06_tiles.capped_split()} == {"K5", "strided", "K5, two blocks"}


def test_the_counter_table_names_each_row_by_its_label():
    t = ch06_tiles.counter_table([("K5", "tile_2d_reg", ch06_tiles.K5), ("ch06 default", "tile_2d_reg", None)])
    assert [r["kernel"] for r in t] == ["K5", "ch06 default"]
    assert t[0]["ld wf model"] == "10,485,760"   # 1024^3 at K5: the bank model's load wavefronts


def test_the_untouched_exercise_gets_a_short_hint():
    from gemm_kernels.exercises.catalog import _tile_2d_static_hint
    untouched = _tile_2d_static_hint("write the part marked '// YOUR CODE HERE' (line 61 of "
                                     "the cell), then delete the marker line; no LDS.128")
    written = _tile_2d_static_hint("no LDS.128 in the SASS")
    assert "Hint 1" in untouched and len(untouched) < len(written)


def test_register_blocks_does_the_occupancy_arithmetic():
    lines = ch06_tiles.register_blocks([("K5", "tile_2d_reg", ch06_tiles.K5)]).splitlines()
    occ = ch06_tiles.analysis.kernel_occupancy(
        "tile_2d_reg", ch06_tiles.K5,
        registers=(ch06_tiles.lookup.binary("tile_2d_reg", ch06_tiles.K5) or {}).get("registers"))
    assert lines[0].startswith("an SM has 65,536 registers")
    rounded = -(-occ.registers_per_thread // 8) * 8
    assert f"counted as {rounded}" in lines[1]
    assert f"{rounded} x 256 = {rounded * 256:,}" in lines[1]
    n = occ.limits["registers"]
    assert lines[1].split(": ")[-1].startswith(f"{n} block")
    assert n * rounded * 256 <= 65536 < (n + 1) * rounded * 256


def test_tile_step_line_states_the_waves_and_instructions():
    before, after = ch06_tiles.tile_step_rows()
    line = ch06_tiles.tile_step_line()
    assert f"waves {before['waves']} -> {after['waves']}" in line
    assert f"{before['instructions (M, ncu)']} M -> {after['instructions (M, ncu)']} M" in line
    assert (f"FMAs per word copied from global memory {before['FMAs per word copied']} -> "
            f"{after['FMAs per word copied']}") in line


def test_both_path_tables_give_each_rate_its_min_max():
    for size, part in ((2048, "changed"), (4096, "changed")):
        t = ch06_tiles.path_table(size, part=part)
        assert t.columns.index("min..max") == t.columns.index(f"TFLOP/s at {size}") + 1
        for r in t:
            lo, hi = (float(x) for x in r["min..max"].split(".."))
            assert lo <= float(r[f"TFLOP/s at {size}"]) <= hi


def test_standings_labels_each_bar_with_its_share_and_draws_no_second_cublas():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = ch06_tiles.standings(2048, ch06_tiles.STORY)
    ax = fig.axes[0]
    assert not ax.lines   # no dashed cuBLAS line beside the shares
    labels = [t.get_text() for t in ax.texts]
    assert len(labels) == len(ch06_tiles.STORY)
    assert all("% of cuBLAS" in x for x in labels)
    # the colours say which chapter a kernel is from
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "earlier chapters' kernels", "this chapter's kernels"]
    plt.close(fig)


def test_the_mistakes_give_the_verdicts_in_a_table_and_each_message_in_a_list():
    shown = ch06_tiles.mistakes(gpu=False)
    verdicts, says = shown.items
    assert ch06_tiles.SAYS not in verdicts.columns and "static" in verdicts.columns
    assert [what for what, _ in says] == [r["mistake"] for r in verdicts]
    assert all(message for _, message in says)
    assert shown._repr_html_().count("<li>") == len(verdicts)


def test_the_control_lines_give_both_rows_the_changed_line_and_both_ways_to_16_warps():
    from gemm_kernels.notebook import ch06_tiles
    lines = ch06_tiles.control_lines().splitlines()
    rows = {r["kernel"]: r for r in ch06_tiles.capped_split()}
    for label, line in (("K5", lines[0]), ("K5, two blocks", lines[1])):
        r = rows[label]
        assert line.startswith(f"{label}: {r['TFLOP/s']} TFLOP/s, {r['registers']} registers")
    assert "1 block of 8 warps" in lines[0] and "2 blocks of 8 warps" in lines[1]
    assert lines[3].endswith("(BM / TM) * (BN / TN))") and lines[4].endswith("(BN / TN), 2)")
    patch = next(r for r in ch06_tiles.path_rows(4096) if r["step"] == "patch 8x4")
    ratio = float(rows["K5, two blocks"]["TFLOP/s"]) / float(rows["K5"]["TFLOP/s"])
    one, two = lines[5].split("; ")
    assert "in one block (patch 8x4" in one and "in two blocks (K5, two blocks" in two
    assert one.endswith(f"x{patch['x previous']}")
    assert abs(float(two.rsplit("x", 1)[1]) - ratio) < 0.01


def test_the_capped_split_names_the_fp32_peak_its_column_divides_by():
    t = ch06_tiles.capped_split()
    peak = ch06_tiles._peak_line(records.described_device(), "")[0]
    assert f"FP32 peak: {peak / 1e3:.1f} TFLOP/s" in t.title
    row = t[0]
    assert float(row["% of FP32 peak"]) == pytest.approx(
        100 * float(row["TFLOP/s"]) * 1e3 / peak, abs=1)


def test_fall_shares_sets_the_two_stalls_against_all_other_reasons_on_request():
    rows = [{**_row(s, b, l, i), ch06_tiles.ALL_STALLS: t, "warps/SM": 16}
            for s, b, l, i, t in (("K5", .3, .9, 45, 5.0), ("a", .5, 1.0, 50, 8.0),
                                  ("b", .2, .5, 64, 6.3), ("c", .1, .4, 80, 6.3))]
    _, first, second = ch06_tiles.fall_shares(rows, others=True).splitlines()
    # 8.00 - 6.30 = 1.70 in all, 0.80 of it the two: the other reasons 0.90
    assert first == ("  a -> b: barrier + long scoreboard fall by 0.80; "
                     "all other reasons together fall by 0.90")
    # the total stays while the two fall: the others rise by as much
    assert second == ("  b -> c: barrier + long scoreboard fall by 0.20; "
                      "all other reasons together rise by 0.20")
    gap = [{**r, ch06_tiles.ALL_STALLS: None} for r in rows]
    assert "together -" in ch06_tiles.fall_shares(gap, others=True)


def test_the_evidence_table_sets_the_instructions_beside_the_issue_share():
    rows = ch06_tiles.path_rows(4096)
    assert ch06_tiles.path_table(4096, part="bookkeeping").columns.index("instructions (M)") \
        == ch06_tiles.path_table(4096, part="bookkeeping").columns.index("issue x previous") + 1
    assert rows[0]["instructions x previous"] is None
    for before, after in zip(rows, rows[1:]):
        n0, n1 = (float(r["instructions (M)"].replace(",", "")) for r in (before, after))
        assert after["instructions x previous"] == f"{n1 / n0:.2f}"


def test_the_main_path_evidence_keeps_the_rate_step_the_issue_share_and_three_waits():
    """The main path's evidence table holds only the timed step, the issue share and the
    three waits; the profiled step and the instruction counts are the appendix's."""
    main = ch06_tiles.path_table(4096, part="evidence")
    assert main.columns == ["step", "blocks x warps", "x previous", "issue share %",
                            "barrier", "long scoreboard", "short scoreboard"]
    book = ch06_tiles.path_table(4096, part="bookkeeping")
    assert {"profiled x previous", "instructions (M)", "instructions x previous",
            "issue x previous"} <= set(book.columns)
    assert not {"barrier", "long scoreboard"} & set(book.columns)


def test_blocks_x_warps_reads_blocks_per_sm_times_warps_per_block():
    assert ch06_tiles.blocks_x_warps(2, 16) == "2 x 8"
    assert ch06_tiles.blocks_x_warps(1, 16) == "1 x 16"
    rows = ch06_tiles.path_rows(4096)
    assert [r["blocks x warps"] for r in rows] == ["1 x 8", "1 x 16", "2 x 8", "2 x 8"]


def test_the_rate_bars_say_blocks_x_warps():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = ch06_tiles.path_rows(4096)
    fig = ch06_tiles.path_plot(4096, rows=rows, panels=("rate",))
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert [l.split("\n")[1] for l in labels] == [f"{r['blocks x warps']} warps" for r in rows]
    plt.close(fig)


def test_static_rows_compile_for_another_architecture_and_count_the_whole_loop():
    row = ch06_tiles.static_rows([("K5", "tile_2d_reg", K5)], arch="sm_86")
    assert "sm_86" in row.title
    assert row[0]["registers"] > 0 and row[0]["loop FFMA"] == 512
    p = dict(K5, TM=4, TN=4)
    both = ch06_tiles.static_rows([("c", "tile_2d_reg", p), ("s", "tile_2d_strided", p)],
                                  instructions=True)
    for r in both:
        # every instruction of the loop: at least its shared loads and FFMAs
        assert r["loop instructions, all"] >= r["loop shared loads"] + r["loop FFMA"]
    assert "loop instructions, all" not in ch06_tiles.static_rows([("K5", "tile_2d_reg", K5)])[0]


def test_shared_pressure_reads_the_counters_and_leaves_an_unprofiled_kernel_blank():
    counters = {"A": {ch06_tiles.SHARED_PRESSURE[0][1]: 80.58,
                      ch06_tiles.SHARED_PRESSURE[1][1]: 1.456}}
    rows = ch06_tiles.shared_pressure(("A", "B"), counters)
    assert rows[0]["shared-memory pipe busy, % of peak"] == "80.6%"
    assert rows[0][ch06_tiles.SHARED_PRESSURE[1][0]] == "1.46"
    assert rows[0][ch06_tiles.SHARED_PRESSURE[2][0]] is None
    assert rows[1]["MIO throttle (queue to shared memory full)"] is None
    recorded = {r["kernel"]: r for r in ch06_tiles.shared_pressure()}
    # chapter 05's default keeps the shared pipe busier than K5 does
    busy = lambda n: float(recorded[n]["shared-memory pipe busy, % of peak"].rstrip("%"))  # noqa: E731
    assert busy("ch05 default") > busy("K5")


def test_the_practice_key_reads_the_strided_kernels_counts_and_the_timed_winner():
    key = ch06_tiles.practice_key()
    row = ch06_tiles.step_table([("tile_2d_strided", K5)])[0]
    assert key["wavefronts"] == row["wavefronts"]
    assert key["conflicts"] == row["wavefronts"] - row["ideal"]
    assert key["load instructions"] == row["LDS"] + row["LDS.64"] + row["LDS.128"]
    assert key["winner"] in ("K5", "strided")


def test_check_practice_hints_first_and_answers_after_a_second_try(monkeypatch):
    monkeypatch.setitem(ch06_tiles._PRACTICE_TRIES, "n", 0)
    key = {"load instructions": 80, "wavefronts": 96, "conflicts": 0, "winner": "strided"}
    assert "write your four predictions" in ch06_tiles.check_practice(None, key)
    first = ch06_tiles.check_practice({**key, "wavefronts": 160}, key)
    assert "not yet" in first and "96" not in first and "scalar LDS" in first
    second = ch06_tiles.check_practice({**key, "wavefronts": 160}, key)
    assert "wavefronts: 96 (you wrote 160)" in second
    assert ch06_tiles.check_practice(key, key).startswith("right")
