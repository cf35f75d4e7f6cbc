"""The package logic behind chapters 04 and 05 (gemm_kernels.notebook.ch04_banks,
ch05_tile_1d): the lower bounds the chapters argue from, the layouts and mappings as the
exercises' checks price them, the loop orders as compiled, the tile copy, and that the
pictures draw. Static: no GPU; the recording only where a test says so."""
import pytest

from gemm_kernels.memory import banks, ch03_04_tiles
from gemm_kernels.notebook import ch04_banks, ch05_tile_1d
from exercise_helpers import solution


# ------------------------------------------------------------------ chapter 04

def test_layout_names_are_the_kernels_values():
    """One name per layout across the chapter: the tiles it stands for, then the kernel's
    LAYOUT value, which keys its recorded measurements (the name alone says little:
    `conflict`, padded, is the fastest layout)."""
    assert ch04_banks.layout_name({"BLOCK": 32, "LAYOUT": "conflict", "PAD": 2}) == \
        'sA[m][k], sB[n][k] ("conflict"), PAD=2, reads conflict-free'
    assert ch04_banks.layout_name({"BLOCK": 32, "LAYOUT": "conflict", "PAD": 0}) == \
        'sA[m][k], sB[n][k] ("conflict"), PAD=0'
    assert ch04_banks.layout_name({"BLOCK": 32, "LAYOUT": "transposed", "PAD": 0}) == \
        'sA[k][m], sB[k][n] ("transposed"), PAD=0'
    assert ch04_banks.layout_name({"BLOCK": 32, "EDGES": "always"}) == \
        "chapter 03 (sA[m][k], sB[k][n]), every tile checked"


def test_a_label_says_reads_conflict_free_exactly_where_the_model_finds_none():
    for name, p in ch03_04_tiles.variants():
        reads = [r for r in ch03_04_tiles.per_instruction(name, p) if r["op"] == "ld"]
        free = all(r["conflicts"] == 0 for r in reads)
        says = ch03_04_tiles.label(name, p).endswith("reads conflict-free")
        assert says == (free and p["LAYOUT"] == "conflict"), (p, free)


def test_the_lower_bound_at_one_output_per_thread_is_chapter_03s_cost():
    rows = {n: w for n, w, _ in ch04_banks.lower_bound(32)}
    assert rows == {"read A": 16, "read B": 32, "stores": 2, "total": 50}
    # chapter 03's layout reaches it; no bank_layout configuration goes below it
    assert ch03_04_tiles.wavefronts_per_step("smem_tiled", {"BLOCK": 32}) == 50
    assert min(ch03_04_tiles.wavefronts_per_step(n, p)
               for n, p in ch03_04_tiles.variants(blocks=(32,))) == 51


def test_under_the_exercises_rule_50_is_the_least_and_a_wide_a_narrow_b_layout_reaches_it():
    bound = {(r["reads of A"], r["reads of B"]): r["total"]
             for r in ch04_banks.exercise_lower_bound(32)}
    assert len(bound) == 9
    assert bound[("64-bit", "64-bit")] == 51 and bound[("128-bit", "128-bit")] == 53
    assert bound[("32-bit", "32-bit")] == 66
    # the least: A wide, B 32-bit; chapter 03's cost, so no layout under the rule beats it
    assert min(bound.values()) == 50 == ch03_04_tiles.wavefronts_per_step(
        "smem_tiled", {"BLOCK": 32})
    assert {k for k, v in bound.items() if v == 50} == {("64-bit", "32-bit"),
                                                        ("128-bit", "32-bit")}
    layouts = {k: ch04_banks.EXERCISE_LAYOUTS[k]
               for k in ("rows of BLOCK + 2", ch04_banks.MIXED, "rows of BLOCK, XOR swizzle")}
    rows = {r["layout"]: r for r in ch04_banks.exercise_layouts(solution("04_tile_layout"),
                                                                layouts)}
    assert rows["rows of BLOCK + 2"]["wavefronts per step"] == 51
    assert rows["rows of BLOCK + 2"]["loads of one step (SASS)"] == "32 LDS.64"
    mixed = rows[ch04_banks.MIXED]
    assert mixed["wavefronts per step"] == min(bound.values())
    assert mixed["loads of one step (SASS)"] == "32 LDS + 8 LDS.128"
    assert (mixed["a_word(m, k)"], mixed["b_word(k, n)"]) == ("m * BLOCK + k",
                                                            "n * (BLOCK + 1) + k")
    assert mixed["within the budget"] == "yes"
    # the swizzle as the kernel reads it, one float per k: mostly scalar loads, refused
    swz = rows["rows of BLOCK, XOR swizzle"]
    assert swz["within the budget"] == "no" and swz["wavefronts per step"] > 140
    assert "LDS +" in swz["loads of one step (SASS)"]


def test_a_float4_swizzle_compiles_to_lds_128_and_passes_every_step_without_a_gpu():
    # steps 1-3 (step 3 emulated): the speed step would time it, which no test asserts
    report, loop = ch04_banks.float4_swizzle(solution("04_tile_layout"), gpu=False)
    assert report.passed, report
    assert "LDS.128" in loop and "FFMA" in loop


def test_the_bank_grid_colours_a_padded_column_through_every_bank():
    fig = ch04_banks.bank_grid()
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert "32 wavefronts" in titles[0] and "all in bank 0" in titles[0]
    assert "1 wavefront" in titles[1] and "32 different banks" in titles[1]


def test_plot_banks_labels_words_by_the_row_it_is_given():
    an = banks.analyse(banks.words_to_bytes([33 * lane for lane in range(32)]), 4)
    ax = banks.plot_banks(an, row_of=lambda w: w // 33, row_name="the tile row")
    assert "the tile row" in ax.get_xlabel()
    assert {t.get_text() for t in ax.texts} >= {str(i) for i in range(32)}


def test_main_table_has_chapter_03_both_loops_and_six_layouts():
    """Chapter 03's kernel first with every tile checked, as every layout of the chapter
    is (the fair comparison), then with its interior loop."""
    t = ch04_banks.summary()
    names = [r["layout"] for r in t]
    assert names[0].endswith("every tile checked") and names[1].endswith("interior loop")
    assert [n.split('"')[1] + n.split(")")[-1] for n in names[2:]] == [
        "conflict, PAD=0", "conflict, PAD=1, reads conflict-free",
        "conflict, PAD=2, reads conflict-free", "conflict, PAD=4, reads conflict-free",
        "transposed, PAD=0", "transposed, PAD=1"]
    assert "BLOCK" not in t.columns and "BLOCK" in ch04_banks.summary(ch04_banks.ALL).columns


# ------------------------------------------------------------------ chapter 05

def test_the_two_unrolled_loop_orders_compile_to_the_same_loads():
    rows = {r["loop"]: r for r in ch05_tile_1d.loop_orders()}
    kernel, dot, rolled = rows.values()
    keys = ("registers", "LDS.128", "LDS", "FFMA")
    assert [kernel[k] for k in keys] == [dot[k] for k in keys] == [80, 64, 16, 256]
    assert rolled["LDS.128"] == 0 and rolled["loads per FFMA"] == "2"
    assert rolled["loop"].endswith("(counts: one k)")


def test_mappings_priced_as_the_exercise_prices_them():
    rows = {r["mapping"]: r for r in ch05_tile_1d.mapping_prices()}
    kernel, down = rows["along the row (the kernel's)"], rows["down the column first"]
    assert (kernel["wavefronts per step"], kernel["without conflicts"]) == (144, 144)
    assert (down["wavefronts per step"], down["values of tr in one warp"]) == (1040, 4)
    ratio = "cost / along-the-row cost"
    assert (kernel[ratio], down[ratio]) == ("1.0x", "7.2x")
    halves = ch05_tile_1d.mapping_prices(mappings=ch05_tile_1d.HALVES)[0]
    assert halves["wavefronts per step"] == 144 and halves["values of tr in one warp"] == 2


def test_copy_map_walks_each_tile_row_by_row_in_passes():
    cm = ch05_tile_1d.copy_map()          # the default: 256 threads, tiles of 1,024
    assert cm["threads"] == 256 and cm["A"]["passes"] == cm["B"]["passes"] == 4
    assert cm["A"]["idle"] == cm["B"]["idle"] == 0
    assert cm["A"]["thread"][1, 0] == 16 and cm["A"]["pass"][16, 0] == 1
    small = ch05_tile_1d.copy_map({"BM": 32, "BN": 32, "BK": 8, "TM": 2})
    assert small["threads"] == 512 and small["A"]["passes"] == 1 and small["A"]["idle"] == 256


def test_bk_table_compiles_bk_32_outside_the_tunables():
    rows = {r["BK"]: r for r in ch05_tile_1d.bk_table()}
    assert rows[32]["spills (bytes)"] == 0 and rows[32]["registers"] > rows[16]["registers"]
    assert rows[32]["FFMA per barrier"] == 2 * rows[16]["FFMA per barrier"]
    assert rows[32]["GFLOP/s at 2048^3"] == "not a tunable, not timed"


def test_the_loop_counts_are_a_fixed_part_plus_a_part_per_bk():
    """The loop's instructions lie on one line in BK (checked by bk_instructions); the
    barriers are part of the fixed part; the printed ratio for the same FFMA is the one
    the two counts give."""
    c = ch05_tile_1d.bk_instructions()
    assert c["bar"] == 2 and c["fixed"] > c["bar"] and c["per_bk"] > c["ffma_per_bk"]
    n = {r["BK"]: r["loop instructions"] for r in c["rows"]}
    line = ch05_tile_1d.bk_instructions_line()
    assert f"2 x {n[8]} = {2 * n[8]}" in line and f"{2 * n[8] / n[16]:.3f}x" in line
    assert f"{c['fixed']:.0f} instructions whatever its depth" in line


def test_pair_counts_tell_ties_from_wins():
    pairs = [({"TM": 2}, 100.0, 120.0), ({"TM": 2}, 100.0, 100.2), ({"TM": 4}, 100.0, 99.0)]
    lines = ch05_tile_1d.pair_counts(pairs).splitlines()
    assert lines[0] == "BK = 16 is faster in 1 of 3 pairs, slower in 1, level (within 0.5%) in 1"
    assert lines[1].startswith("TM =  2: 2 pairs") and lines[2].startswith("TM =  4: 1 pairs")


def test_the_refused_register_hungry_tile_spills_when_compiled_anyway():
    import re
    line = ch05_tile_1d.register_cap_line()
    cap, regs, stores = (int(x) for x in re.search(
        r"at most (\d+) registers; .*?: (\d+) registers, (\d+) bytes of spill stores", line).groups())
    assert cap == 65536 // 1024 and regs <= cap and stores > 0, line


@pytest.mark.parametrize("picture", [ch05_tile_1d.one_thread, ch05_tile_1d.copy_picture])
def test_pictures_draw_and_refuse_what_the_registry_refuses(picture):
    assert picture().axes
    with pytest.raises(ValueError):
        picture({"BM": 128, "BN": 128, "BK": 8, "TM": 2})


def test_heatmap_can_hatch_invalid_cells_and_evidence_plots_can_leave_the_run_out():
    from matplotlib.patches import Rectangle
    from gemm_kernels.notebook import evidence, widgets
    ax = widgets.heatmap("tile_1d", x="BN", y="BM", invalid="hatch")
    assert any(isinstance(p, Rectangle) and p.get_hatch() == "///" for p in ax.patches)
    assert not any(t.get_text() == "x" for t in ax.texts)
    fig = evidence.plot("ch05_outputs", run_line=False)
    assert not any(t.get_text().startswith("run ") for t in fig.texts)
    fig = evidence.stall_plot("ch05_outputs_stalls", run_line=False)
    assert not any(t.get_text().startswith("run ") for t in fig.texts)


def test_the_bound_line_names_the_constants_that_give_chapter_03s_bound():
    line = ch04_banks.bound_line()
    from gemm_kernels.measure import records
    props = records.described_device()
    assert f"{props['sm_count']} SMs x {props['sm_clock_mhz']:,.0f} MHz" in line
    bound = ch03_04_tiles.smem_ceiling("smem_tiled", {"BLOCK": 32}, props)["smem bound GFLOP/s"]
    assert line.endswith(f"50 wavefronts: {bound:,.0f} GFLOP/s")


def test_the_wide_loads_picture_shows_a_merge_that_is_not_a_broadcast():
    titles = [ax.get_title() for ax in ch04_banks.wide_loads().axes if ax.get_title()]
    assert len(titles) == 3
    assert "2 wavefronts" in titles[0] and "2j + 1" in titles[1] and "2 wavefronts" in titles[1]
    assert "4 wavefronts" in titles[2]


def test_the_wide_loads_picture_can_add_chapter_05s_conflict_of_four_groups():
    fig = ch04_banks.wide_loads(("broadcast", "pairs", "diagonal", "groups"))
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert len(titles) == 4 and "16 wavefronts, ideal 4" in titles[3]
    assert fig.axes[0].get_gridspec().get_geometry() == (2, 2)


def test_the_outputs_table_puts_executed_instructions_beside_the_static_count():
    """Nsight Compute's executed instructions per FFMA for every tile of the study: below
    the static count where part of the warps skip a tile copy (2 and 4 outputs), equal
    where every thread copies (the kernel-4 tile and the default)."""
    rows = list(ch05_tile_1d.outputs_table())
    static = [float(r["instructions per FFMA, SASS"]) for r in rows]
    run = [float(r["instructions per FFMA, executed"]) for r in rows]
    assert run[1] < static[1] and run[2] < static[2]
    assert run[3] == static[3] and run[4] == static[4]


def test_with_layout_rewrites_both_functions_and_the_loop():
    src = ch04_banks.with_layout(solution("04_tile_layout"), ch04_banks.SWIZZLE, float4=True)
    assert "word = m * BLOCK + (k ^ ((m & 7) << 2));" in src
    assert "word = n * BLOCK + (k ^ ((n & 7) << 2));" in src
    assert ch04_banks.FLOAT4_LOOP in src and ch04_banks.SCALAR_LOOP not in src
    assert "__shared__ __align__(16) float sA" in src
    with pytest.raises(ValueError):
        ch04_banks.with_layout("int main() {}", "x * BLOCK + k")


# ------------------------------------------------------------------ chapter 05, continued

def test_the_inner_loop_shows_one_b_value_feeding_tm_ffma():
    loop, reuse = ch05_tile_1d.inner_loop()
    assert "LDS.128" in loop and "FFMA" in loop and loop.splitlines()[1].split()[1] == "LDS"
    b, a = reuse.splitlines()
    assert "is read by 16 FFMA before it is loaded again (TM = 16)" in b
    assert a.endswith("read by 1, 1, 1, 1 FFMA")
    _, reuse8 = ch05_tile_1d.inner_loop(ch05_tile_1d.K4)
    assert "is read by 8 FFMA" in reuse8


def test_chapter_03s_loads_as_compiled():
    assert ch05_tile_1d.chapter_03_loads() == \
        "chapter 03's kernel as compiled: 8 LDS.128 and 32 LDS for 32 FFMA, 0.80 FFMA per load"


def test_the_outputs_plot_sets_the_five_tiles_beside_the_best_tile_for_each():
    left, right = ch05_tile_1d.outputs_plot().axes
    labels = [t.get_text() for t in left.get_yticklabels()]
    assert sorted(labels) == sorted(["1 output per thread (chapter 03)"] + [
        f"{tm} outputs per thread" for tm in (2, 4, 8, 16)])
    assert len(left.patches) == len(right.patches) == 5
    said = [t.get_text() for t in left.texts]
    assert any("64 x 64 x 16 tile, 256 threads" in t and "2.5x chapter 03" in t for t in said)
    best = list(ch05_tile_1d.best_per_tm())
    for r, t in zip(best, [t.get_text() for t in right.texts]):
        assert f"({r['vs chapter 03']} chapter 03)" in t
        assert f"{r['BM x BN x BK']} tile, {r['threads']:,} threads" in t
    assert left.get_xlim() == right.get_xlim()


def test_the_outputs_diagnosis_names_one_cause_per_slow_tile():
    two, four = ch05_tile_1d.outputs_diagnosis().splitlines()
    table = {r["tile"]: r for r in ch05_tile_1d.outputs_stalls()}
    assert two.startswith("2 outputs per thread: 16 FFMA per thread between two barriers")
    assert two.endswith(f"{table['2 outputs per thread']['at the barrier'].split('(')[1][:-1]} "
                        "of its warps' waits")
    assert four.startswith("4 outputs per thread: 1 block per SM")
    assert four.endswith(f"issue on {table['4 outputs per thread']['schedulers busy']} of cycles")


def test_every_printed_rate_names_its_size():
    *rates, peak = ch05_tile_1d.shares_4096().splitlines()
    assert rates and all("4096^3" in line for line in rates)
    assert "GFLOP/s" in peak and "4096^3" not in peak


def test_the_shares_place_each_tile_against_the_fp32_peak_they_print():
    from gemm_kernels.core import device
    from gemm_kernels.measure import ladder, records
    peak = device.peak_fp32_gflops(records.described_device())
    lines = ch05_tile_1d.shares_4096().splitlines()
    assert lines[-1].endswith(f"= {peak:,.0f} GFLOP/s")
    g = ladder.share("tile_1d", 4096, ch05_tile_1d.K4)["GFLOP/s"]
    assert lines[0].endswith(f", {g / peak:.0%} of the FP32 peak")


def test_the_bk_loop_counts_show_the_fixed_barriers_and_the_copy_growing_with_bk():
    rows = {r["BK"]: r for r in ch05_tile_1d.bk_loop_counts()}
    assert set(rows) == {8, 16, 32}
    assert {r["BAR"] for r in rows.values()} == {2}              # fixed per step
    assert rows[16]["LDG (copy)"] == 2 * rows[8]["LDG (copy)"]   # the copy grows with BK
    assert rows[16]["FFMA"] == 2 * rows[8]["FFMA"] == 256
    assert rows[16]["FFMA per BAR"] == 2 * rows[8]["FFMA per BAR"]
    assert float(rows[8]["per FFMA"]) > float(rows[16]["per FFMA"]) > float(rows[32]["per FFMA"])


def test_the_bk_model_falls_with_tm_and_is_fitted_to_the_pairs():
    pairs = ch05_tile_1d.bk_pairs()
    if not pairs:
        pytest.skip("no sweep recorded here")
    f, table = ch05_tile_1d.bk_model()
    model = [float(r["model"].rstrip("x")) for r in table]
    assert model == sorted(model, reverse=True) and all(m > 1 for m in model)
    assert sum(r["pairs"] for r in table) == len(pairs)
    # the fitted constant is the best of its range: one off either side fits worse
    def err(f):
        return sum((2 * (f + 8 * c["TM"]) / (f + 16 * c["TM"]) - g16 / g8) ** 2
                   for c, g8, g16 in pairs)
    assert err(f) <= err(f + 1) and (f == 0 or err(f) <= err(f - 1))


def test_step_2s_problems_are_shown_whole():
    from gemm_kernels.notebook.ch05_tile_1d import _whole_problems
    assert _whole_problems("aaa; bbb; ccc", 8) == "aaa; bbb (and 1 more)"
    assert _whole_problems("a very long first problem", 5) == "a very long first problem"


def test_the_predict_cells_show_no_answer_until_a_value_is_chosen(capsys):
    from gemm_kernels.notebook import ch03_evidence
    assert "set BLOCK" in ch03_evidence.check_prediction(None)
    assert "GFLOP/s" in ch03_evidence.check_prediction(16) or "no rate" in \
        ch03_evidence.check_prediction(16)
    assert ch04_banks.check_prediction(None) is None
    assert "set PAD" in capsys.readouterr().out
    assert ch04_banks.check_prediction(2) is None          # a PAD but no prediction
    assert "`mine`" in capsys.readouterr().out
    right = {"B read": 2, "store of b": 1, "per step": 27}
    table = ch04_banks.check_prediction(2, right)
    out = capsys.readouterr().out
    assert "right:" in out and "27 wavefronts per warp and step" in out
    assert [r["access"] for r in table][:4] == ["store a", "store b", "read A", "read B"]


def test_a_wrong_prediction_gets_a_question_first_and_the_answer_after_a_second_try(capsys):
    ch04_banks._TRIES.clear()
    wrong = {"B read": 4, "store of b": 1, "per step": 27}     # 128-bit phases at PAD = 2
    assert ch04_banks.check_prediction(2, wrong) is None
    out = capsys.readouterr().out
    assert "B read: count again" in out and "store of b" not in out and "27 wavefronts" not in out
    assert ch04_banks.check_prediction(2, wrong) is not None
    assert "27 wavefronts per warp and step" in capsys.readouterr().out
    assert ch04_banks.predicted_key(0) == {"B read": 16, "store of b": 8, "per step": 81,
                                           "B read width": "LDS.128"}


def test_the_prediction_table_counts_81_36_27_at_block_16():
    rows = ch04_banks.prediction_table()
    assert [r["per step"] for r in rows] == [81, 36, 27]
    assert rows[0]["B read"] == "4 LDS.128 x 16"


def test_the_probe_table_speaks_in_words_and_names_nsight_compute():
    t = ch04_banks.probe_table()
    if t is None:
        pytest.skip("no probe recording here")
    assert "Version" not in t.title and "Nsight Compute" in t.title
    assert not any(r["pattern"].startswith("w16_merge") for r in t)


def test_chapter_03s_l2_line_gives_sizes_not_adjectives():
    from gemm_kernels.notebook import ch03_evidence
    line = ch03_evidence.l2_line()
    assert "A 64 MiB, B 64 MiB, C 64 MiB" in line


def test_the_copy_bug_counts_the_wrong_elements():
    from gemm_kernels.memory import ch03_copies
    got = ch03_copies.copy_bug()
    assert got["correct"]["wrong elements"] == 0 and got["buggy"]["wrong elements"] > 0


def test_chapter_05s_prediction_check_shows_nothing_until_bk_is_set():
    from gemm_kernels.notebook import ch05_tile_1d
    assert "set BK to 8 or 16" in ch05_tile_1d.check_prediction(None)
    eight, sixteen = (ch05_tile_1d.check_prediction(bk) for bk in (8, 16))
    # the same two barriers per step, twice the FFMA between them at BK = 16
    assert "2 barriers for 128 FFMA" in eight and "2 barriers for 256 FFMA" in sixteen
    assert "tiles with BK = 8" in eight and "tiles with BK = 16" in sixteen
    # the clean pair (this tile at each BK) comes before the sweep's confounded best/median
    assert "this tile" in eight and "this tile" in sixteen
    # both depths in one output, the chosen one first
    mine, other = eight.split("the other depth, for comparison:")
    assert "BK = 8," in mine and "BK = 16," in other and "BK = 16," not in mine


def test_chapter_04_prints_its_default_against_its_fastest_layout():
    from gemm_kernels.notebook import ch04_banks
    text = ch04_banks.default_against_fastest()
    assert 'sA[m][k], sB[n][k] ("conflict"), PAD=0' in text and ", PAD=2" in text and "x the default" in text


def test_the_clean_bk_pair_splits_its_time_into_instructions_and_cycles(capsys):
    table = ch05_tile_1d.depth_stalls()
    line = capsys.readouterr().out
    rows = {r["step"]: r for r in table}
    assert set(rows) == {"BK = 8", "BK = 16"}
    assert line.startswith("BK = 8 against BK = 16:") and "SM cycles per issued instruction" in line
    # three decimals, so that the product printed is the product of the factors printed
    import re
    inst, cpi, time = (float(x) for x in re.findall(r"(\d\.\d{3})x", line)[:3])
    assert abs(inst * cpi - time) < 0.0015, line
    # the deeper tile keeps fewer warps resident (3 blocks of 8 warps against 4)
    assert rows["BK = 16"]["warps active %"] < rows["BK = 8"]["warps active %"]


def test_the_clean_bk_pair_with_shares_compares_each_wait_with_the_warps(capsys):
    """With shares: an "all waits" column, each wait with its share of it, and a line
    that sets each wait's change against the change fewer warps alone imply."""
    table = ch05_tile_1d.depth_stalls(shares=True)
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("warps active, BK = 16 against BK = 8:") and "all waits changed" in line
    assert "fell by more: " in line and "short scoreboard -" in line and "rose: mio throttle +" in line
    cols = table.columns
    assert cols.index("all waits") == cols.index("barrier") - 1
    for r in table:
        shares = [float(r[k].split("(")[1].rstrip("%)")) for k in ch05_tile_1d._DEPTH_REASONS]
        assert 0 < sum(shares) < 100 and float(r["all waits"]) > 0
    plain = ch05_tile_1d.depth_stalls()
    assert "all waits" not in plain.columns
    assert all(len(r["instructions (billions)"].split(".")[1]) == 2 for r in plain)


def test_the_default_tiles_ffma_issue_share_is_its_issue_share_over_instructions_per_ffma():
    import re
    line = ch05_tile_1d.ffma_issue_line()
    issue, per, ffma, pipe = (float(x) for x in re.findall(r"(\d+(?:\.\d+)?)(?:%| instructions)", line))
    assert abs(issue / per - ffma) <= 1 and 1.5 < per < 2, line
    assert abs(ffma - pipe) < 5, line


def test_the_default_tiles_ceilings_are_shares_of_the_peak_and_the_lower_one_binds():
    from gemm_kernels.core import device
    from gemm_kernels.measure import records
    c = ch05_tile_1d.ceilings()
    if not c:
        pytest.skip("the default tile's profile is not recorded")
    assert abs(c["issue"] * c["instructions per FFMA"] - 1) < 1e-9
    peak = device.peak_fp32_gflops(records.described_device())
    bound = [r for r in ch05_tile_1d.bound_table() if r["kernel"] == "chapter 05, default"][0]
    assert abs(c["shared memory"] - bound["bound GFLOP/s"] / peak) < 1e-9
    assert c["measured"] < min(c["issue"], c["shared memory"])
    assert c[c["binds"]] == min(c["issue"], c["shared memory"])
    lines = ch05_tile_1d.ceilings_line().splitlines()
    assert len(lines) == 3 and all("of the FP32 peak" in line for line in lines)
    assert lines[-1].endswith(f"{c['binds']}, the one that binds")


def test_the_owner_of_the_drawn_piece_is_the_thread_each_mapping_gives_it():
    """Along the row t = tr*BN + tc; down the column t = tc*(BM/TM) + tr."""
    lines = ch05_tile_1d.owner_line(tr=1, tc=40).splitlines()
    assert lines[0].startswith("rows 16-31 of column 40")
    assert "t = 104 " in lines[1] and "t = 161 " in lines[2], lines


def test_the_sweep_maps_share_one_colour_bar():
    """Both maps use one colour scale, so the figure draws one bar, not two identical."""
    import matplotlib
    matplotlib.use("Agg")
    fig = ch05_tile_1d.heatmaps()
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(fig.axes) == 3 and len(bars) == 1, [ax.get_label() for ax in fig.axes]


def test_the_bk_model_shows_its_residuals_and_says_it_is_a_fit():
    if not ch05_tile_1d.bk_pairs():
        pytest.skip("no sweep recorded here")
    f, table = ch05_tile_1d.bk_model()
    assert "fit" in table.title and "not a prediction" in table.title
    for r in table:
        median = float(r["measured gain, median"].rstrip("x"))
        assert abs(float(r["median / model"]) - median / float(r["model"].rstrip("x"))) < 0.02


def test_the_merge_scope_line_is_a_sentence_and_follows_the_check(monkeypatch):
    line = ch04_banks.merge_scope_line()
    assert line.startswith("all ") and "23 configurations" in line and "True" not in line
    # the count differs from the tables' own: the line says by which configurations
    # the tables' two chapter 03 rows (edges checked or not) share one layout
    assert f"the {len(ch04_banks.ALL) - 1} layouts of the chapter's tables" in line
    assert "BLOCK = 8 and 16" in line
    monkeypatch.setattr(ch03_04_tiles, "scope_independent", lambda configs: False)
    assert "the reading matters" in ch04_banks.merge_scope_line()


def test_the_ladder_table_groups_each_kernels_sizes_with_cublas_last():
    from gemm_kernels.core.table import Table
    rows = [{"chapter": c, "kernel": k, "size": n} for n in (1024, 2048)
            for c, k in (("03", "smem_tiled"), ("05", "tile_1d"), ("00", "cublas"))]
    out = ch05_tile_1d.ladder_by_kernel(Table(rows, ["chapter", "kernel", "size"], title="t"))
    assert [(r["kernel"], r["size"]) for r in out] == [
        ("smem_tiled", 1024), ("smem_tiled", 2048), ("tile_1d", 1024), ("tile_1d", 2048),
        ("cuBLAS", 1024), ("cuBLAS", 2048)]
    assert [r["chapter"] for r in out][-2:] == ["-", "-"]
    assert out.title == "t" and out.columns == ["chapter", "kernel", "size"]


def test_chapter_05_counts_wavefronts_as_chapter_04_loads_and_stores():
    """One convention for the chapter: loads and the tile copies' stores, by the bank
    model. Chapter 03's kernel comes out at chapter 04's 50 per step; the default tile at
    the exercise's 144 load wavefronts plus its copies' stores, one wavefront per STS."""
    ch03 = ch05_tile_1d.step_wavefronts("smem_tiled", {"BLOCK": 32})
    assert ch03["total"] == ch03_04_tiles.wavefronts_per_step("smem_tiled", {"BLOCK": 32}) == 50
    default = {"BM": 64, "BN": 64, "BK": 16, "TM": 16}
    w = ch05_tile_1d.step_wavefronts("tile_1d", default)
    assert (w["loads"], w["stores"], w["total"], w["FFMA"]) == (144, 8, 152, 256)
    loads = ch05_tile_1d.loads_table([("tile_1d", default)])[0]
    assert (loads["FFMA"], loads["LDS"], loads["LDS.128"]) == (256, 16, 64)
    assert "load wavefronts" not in loads
    row = ch05_tile_1d.wavefront_table([("tile_1d", default)])[0]
    assert row["load wavefronts"] == 144 and row["store wavefronts (average per warp)"] == 8
    assert row["wavefronts per FFMA"] == f"{152 / 256:.3f}"


def test_the_stores_are_the_blocks_average_where_a_copy_leaves_warps_idle():
    """At TM = 4 (1,024 threads, 512 elements per tile) half the warps store both tiles'
    elements and half none: 1 wavefront per warp on average."""
    row = ch05_tile_1d.wavefront_table([("tile_1d", {**ch05_tile_1d.K4, "TM": 4})])[0]
    assert row["store wavefronts (average per warp)"] == 1
    assert row["wavefronts per FFMA"] == f"{25 / 32:.3f}"


def test_chapter_05s_bound_is_the_models_with_nsight_as_the_check():
    """The bound uses the model's wavefronts per FFMA; Nsight Compute's count sits beside
    it, within 1% in every profiled row (recording)."""
    t = ch05_tile_1d.bound_table()
    if not len(t):
        pytest.skip("no profile recorded")
    for r in t:
        model, ncu = float(r["wavefronts per FFMA, model"]), float(r["wavefronts per FFMA, Nsight Compute"])
        assert abs(model - ncu) / ncu < 0.01, r
        assert r["bound GFLOP/s"] == pytest.approx(ch05_tile_1d.smem_bound(model), rel=1e-3)


def test_the_mistakes_table_refuses_bm_where_bn_belongs_with_the_non_square_tile():
    """The solution's table of mistakes lists the mapping that is right only at the
    square graded tile; step 2 refuses it, naming the tile where it fails."""
    rows = {r["submission"]: r for r in ch05_tile_1d.mistakes()}
    row = rows["tc = t % BM: BM where BN belongs"]
    assert row["step 2 (static)"] == "FAIL", row
    assert "BM = 32, BN = 128" in row["what step 2 says"], row
    assert row["tc = ..., tr = ..."] == "t % BM, t / BM"
    assert rows["the chapter's kernel"]["tc = ..., tr = ..."] == "t % BN, t / BN"


def test_the_b_read_pictures_before_the_exercise_leave_its_answers_out():
    """Chapter 04 draws the B read at PAD = 0 and 1 before the exercise; the paddings
    that pass its budget (2 and 4) are left for 'Check your answer'."""
    import inspect
    assert inspect.signature(ch04_banks.read_b).parameters["pads"].default == (0, 1)


def test_profiled_times_are_set_beside_the_timed_rates_with_the_profilers_clock():
    """Recorded: Nsight Compute's clock (cycles over time) is below the GPU's top clock,
    and every profiled time it prints is longer than the time its timed rate implies."""
    import re
    from gemm_kernels.notebook import evidence
    text = evidence.profiled_against_timed("ch05_outputs_stalls")
    if "not recorded" in text:
        pytest.skip("no recording of ch05_outputs_stalls")
    held, top = (float(x.replace(",", "")) for x in re.findall(r"([\d,]+) MHz", text)[:2])
    assert held < top, text
    pairs = re.findall(r"([\d.]+) ms profiled, ([\d.]+) ms at the timed rate", text)
    assert len(pairs) == 2 and all(float(p) > float(t) for p, t in pairs), text


def test_chapter_05s_counter_table_spells_out_its_counters(capsys):
    t = ch05_tile_1d.counter_table()
    assert [r["counter"] for r in t][:2] == ["load wavefronts", "load bank conflicts"]
    assert t.columns == ["counter", "bank model", "Nsight Compute"]
    out = capsys.readouterr().out
    assert not out or ("of the stores" in out and "of all shared-memory wavefronts" in out)


def test_warm_up_check_never_prints_the_count_until_it_is_right():
    """The warm-up's LDS.64 (lane i at word 4i) costs 4 wavefronts: 2 phases, lanes i and
    i + 8 of a phase in one bank. A wrong count gets a question without the number; the
    right one gets the phase-by-phase count; no count only says what to do."""
    assert "4 wavefront" not in ch04_banks.check_warm_up(None)
    for wrong in (1, 2, 3, 8):
        msg = ch04_banks.check_warm_up(wrong)
        assert msg.startswith("not yet") and "4" not in msg.replace("4i", "").replace("64-bit", "")
    assert ch04_banks.check_warm_up(2).startswith("not yet (low)")
    assert ch04_banks.check_warm_up(8).startswith("not yet (high)")
    right = ch04_banks.check_warm_up(4)
    assert right.startswith("right") and "2 phase(s): 4 wavefront(s)" in right


def test_plot_names_break_after_the_layout_name_only_when_asked():
    """Chapter 04's bound plot writes each name on two lines (tiles and LAYOUT, then the
    padding), so that the bars keep the width; other callers keep one line."""
    row = {"BLOCK": 32, "layout": ch03_04_tiles.label(
        "bank_layout", {"BLOCK": 32, "LAYOUT": "conflict", "PAD": 2})}
    assert ch03_04_tiles.tick_label(row) == \
        'BLOCK=32  sA[m][k], sB[n][k] ("conflict"), PAD=2, reads conflict-free'
    assert ch03_04_tiles.tick_label(row, two_lines=True) == \
        'BLOCK=32  sA[m][k], sB[n][k] ("conflict")\nPAD=2, reads conflict-free'
    ch03 = {"BLOCK": 32, "layout": ch03_04_tiles.label("smem_tiled", {"BLOCK": 32})}
    assert ch03_04_tiles.tick_label(ch03, two_lines=True) == \
        "BLOCK=32  chapter 03 (sA[m][k], sB[k][n])\ninterior loop"


def test_the_fixed_rest_fit_recovers_one_constant_per_block(monkeypatch):
    """Rows built as t = w + c (c = 10 at BLOCK = 32, 7 at 16): the fit finds c, predicts
    every share exactly, and leaves chapter 03's interior loop out of the fit."""
    def row(block, layout, w, c):
        bound = 1000.0 / w
        return {"BLOCK": block, "layout": layout, "wavefronts, model": w,
                "bound GFLOP/s": bound, "GFLOP/s": bound * w / (w + c),
                "% of bound": round(100 * w / (w + c))}
    rows = [row(32, "a", 50, 10), row(32, "b", 300, 10), row(32, "chapter 03, interior loop", 50, 2),
            row(16, "a", 30, 7), row(16, "b", 80, 7)]
    monkeypatch.setattr(ch04_banks, "summary", lambda configs=None, size=2048: rows)
    t = ch04_banks.fixed_rest()
    assert "BLOCK = 32: 10.0, BLOCK = 16: 7.0" in t.title
    assert "within 0 points" in t.title
    fitted = {(r["BLOCK"], r["layout"]): r["% of bound, fitted"] for r in t}
    assert fitted[32, "b"] > fitted[32, "a"]      # the cheaper layout sits further below
    assert fitted[32, "chapter 03, interior loop"] == round(100 * 50 / 60)
    assert {r["layout"]: r["in the fit"] for r in t}["chapter 03, interior loop"].startswith("no")


def test_the_recorded_shares_follow_the_fixed_rest_within_a_few_points():
    t = ch04_banks.fixed_rest()
    assert all(abs(r["% of bound"] - r["% of bound, fitted"]) <= 3
               for r in t if "interior" not in r["layout"])


def test_chapter_05_names_both_rates_of_its_default_and_what_each_size_is_for():
    line = ch05_tile_1d.rates_by_size()
    assert "at 2048^3 (the sweep" in line and "at 4096^3 (the bound" in line


def test_the_probe_table_shows_the_64_bit_broadcast_the_pad_2_reads_rest_on():
    t = ch04_banks.probe_table()
    if t is None:
        pytest.skip("no probe recording here")
    row = [r for r in t if r["pattern"].startswith("64-bit, every lane the same address")]
    assert len(row) == 1 and row[0]["ncu wf"] == row[0]["model wf"] == 1


def test_the_shares_print_chapter_03s_own_share_of_cublas():
    """The comparison with Boehm's kernel 3 to 4 ratio needs the base of the ratios."""
    from gemm_kernels.measure import ladder
    t03 = ladder.share("smem_tiled", 4096)
    line = ch05_tile_1d.shares_4096().splitlines()[2]
    assert line.startswith("smem_tiled (chapter 03) at 4096^3")
    assert line.endswith(f"= {t03['% of cuBLAS']:.0f}% of cuBLAS")


def test_the_mistakes_table_can_show_the_gist_of_each_message():
    full = {r["submission"]: r["what step 2 says"] for r in ch05_tile_1d.mistakes()}
    short = {r["submission"]: r["what step 2 says"]
             for r in ch05_tile_1d.mistakes(key_phrases=True)}
    assert set(short) == set(full)
    for label, text in short.items():
        assert len(text) <= len(full[label]) and len(text) < 240, (label, text)
        assert ": " not in text, text
    assert short["the chapter's kernel"] == full["the chapter's kernel"]
    assert "BM = 32, BN = 128" in short["tc = t % BM: BM where BN belongs"]
    assert short["threads down the column first"].endswith("(and 1 more)")
    # the finding leads the gist, its evidence after it
    assert short["the i loop kept rolled (acc[i] with i not known)"].startswith(
        "values live in slow local memory, 64 bytes of stack"), short


def test_the_boehm_line_sets_both_ratios_of_shares_side_by_side():
    from gemm_kernels.measure import ladder
    line, base = ch05_tile_1d.boehm_line().splitlines()
    k4 = ladder.share("tile_1d", 4096, ch05_tile_1d.K4)["% of cuBLAS"]
    t03 = ladder.share("smem_tiled", 4096)["% of cuBLAS"]
    assert f"= {k4 / t03:.1f}x;" in line
    assert line.endswith("36.5% / 12.8% = 2.9x")      # Boehm's README: kernels 4 and 3
    assert base.endswith(f"{k4:.0f}% / 12.8% = {k4 / 12.8:.1f}x")


def test_the_bk_prediction_check_closes_with_the_reason():
    assert "set BK" in ch05_tile_1d.check_prediction(None)
    last = ch05_tile_1d.check_prediction(16).splitlines()[-1]
    assert last == ("every step meets 2 barriers whatever its depth: BK = 16 "
                    "spreads them over 256 FFMA per thread, BK = 8 over 128")


def test_the_bk_pairs_of_the_slow_tiles_print_warps_and_the_sweeps_rates():
    pairs = {tuple(sorted(c.items())): (g8, g16) for c, g8, g16 in ch05_tile_1d.bk_pairs()}
    if not pairs:
        pytest.skip("no sweep recorded here")
    tile = {"BM": 64, "BN": 32, "TM": 2}
    lines = ch05_tile_1d.bk_pair_lines([tile]).splitlines()
    assert lines[0] == "2 outputs per thread, 64 x 32 tile, 2048^3:"
    g8, g16 = pairs[tuple(sorted({**tile, "BK": 8}.items()))]
    assert lines[1].startswith("  BK = 8 :") and lines[1].endswith(f"{g8:,.0f} GFLOP/s")
    assert lines[2].endswith(f"{g16:,.0f} GFLOP/s ({g16 / g8:.2f}x)")
    for line, bk in zip(lines[1:], (8, 16)):
        occ = ch05_tile_1d.analysis.kernel_occupancy("tile_1d", {**tile, "BK": bk})
        assert f"({occ.warps_per_sm} warps) per SM" in line


def test_the_lanes_line_gives_each_half_warp_its_own_row_group():
    line = ch05_tile_1d.lanes_line()
    assert line.endswith("lanes 0-15: tr = 0, tc = 0..15; lanes 16-31: tr = 1, tc = 0..15")
    assert ch05_tile_1d.lanes_line("t % BN", "t / BN").endswith("lanes 0-31: tr = 0, tc = 0..31")
    down = ch05_tile_1d.lanes_line("t / (BM / TM)", "t % (BM / TM)")
    assert "lanes 0-0: tr = 0, tc = 0..0; lanes 1-1: tr = 1, tc = 0..0" in down
