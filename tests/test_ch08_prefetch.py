"""ch08_prefetch: the variants of chapter 08's kernel (textual changes), where their
compiled loops put the global loads, the PTX against the SASS, the recorded sweep grouped
by that, the recorded payoff where the loads stay in flight, the timing of what the
recording lacks (on a GPU), and the pictures."""
import matplotlib
import pytest


matplotlib.use("Agg")

from gemm_kernels.notebook import ch08_prefetch as c  # noqa: E402


def test_every_variant_applies_its_changes_to_the_kernel_file():
    base = c.variant_source("chapter 08's kernel")
    for name in c.VARIANTS:
        text = c.variant_source(name)
        assert (text == base) == (not c.VARIANTS[name])
    assert "if (more)" not in c.variant_source(c.WORKING)
    assert "(BN / TN), 2)" in c.variant_source(c.WORKING)


def test_the_branch_not_the_register_budget_decides_where_the_loads_go():
    rows = {r["kernel"]: r for r in c.variants_table()}
    shipped, bounded = rows["chapter 08's kernel"], rows[c.label(c.BUDGET)]
    free, working = rows["no if"], rows[c.label(c.WORKING)]
    per_step = shipped["FFMAs per step"]
    for r in (shipped, bounded):
        assert r["FFMAs between a global load and its use"] < per_step // 4
    for r in (free, working):
        assert r["FFMAs between a global load and its use"] >= per_step // 4
    assert working["registers"] <= 128 and working["spills (bytes)"] == 0
    assert working["blocks/SM"] == shipped["blocks/SM"] == 2
    assert all(r["barriers per step"] == 1 for r in rows.values())


def test_nvrtc_keeps_the_loads_first_and_ptxas_moves_them():
    order = c.ffma_before_loads()
    assert order["PTX"][0] == 0 and order["PTX"][1] == order["SASS"][1] > 0
    assert order["SASS"][0] > order["SASS"][1] // 2


def test_the_sweep_rows_pair_both_kernels_at_one_block_per_sm():
    rows = c.sweep_rows()
    assert rows and all(r["params"]["ONE_PER_SM"] for r in rows)
    assert any(r["loads in flight"] for r in rows) and not all(r["loads in flight"] for r in rows)
    for r in rows:
        assert r["ratio low"] <= r["ratio"] <= r["ratio high"]
    table = c.sweep_summary()
    assert [row["chapter 08's compiled loop"] for row in table] == \
        ["in flight for less than a quarter of the step",
             "in flight for a quarter of the step or more"]


def test_the_sweep_plot_labels_the_exceptions_of_the_failing_group():
    """The points the appendix names: well above chapter 07's kernel, or below it in
    every repetition."""
    import matplotlib.pyplot as plt
    fig = c.sweep_plot()
    labels = {t.get_text() for t in fig.axes[0].texts}
    for r in c.sweep_rows():
        if not r["loads in flight"]:
            named = r["ratio"] > c.OUTLIER or r["ratio high"] < 1
            assert (r["config"] in labels) == named, r["config"]
    plt.close(fig)


@pytest.mark.parametrize("draw", [lambda: c.timelines(), lambda: c.timelines(c.WORKING),
                                  lambda: c.loop_strip(["float4", "double_buffer"]),
                                  lambda: c.sweep_plot()])
def test_pictures_draw(draw):
    import matplotlib.pyplot as plt
    fig = draw()
    assert fig.axes
    plt.close(fig)


def test_staging_registers_of_the_default_tile():
    assert c.staging_registers() == (128 * 8 + 8 * 128) // 256


def test_other_sources_keep_the_loads_in_flight_at_this_tile_too():
    """With the exercise's budget: the if on the store only, the fetch after the
    compute, and the last tile peeled off the loop all keep the loads in flight at the
    default tile, at 128 registers, like the exercise's answer."""
    rows = {r["kernel"]: r for r in c.variants_table(list(c.ALTERNATIVES))}
    for name in c.ALTERNATIVES:
        r = rows[c.label(name)]
        assert r["FFMAs between a global load and its use"] >= r["FFMAs per step"] // 4, r
        assert r["registers"] <= 128 and r["spills (bytes)"] == 0 and r["barriers per step"] == 1


def test_the_fix_holds_for_one_tile_not_as_a_rule():
    """At BK = 16 this ptxas keeps the chapter's own kernel's loads in flight, branch and
    all, while the branch-free answer of the exercise falls short of a quarter step."""
    deep = {r["kernel"]: r for r in c.variants_table(["chapter 08's kernel", c.WORKING],
                                                      params=c.DEEP)}
    own, working = deep["chapter 08's kernel"], deep[c.label(c.WORKING)]
    assert own["FFMAs between a global load and its use"] == own["FFMAs per step"]
    assert working["FFMAs between a global load and its use"] < working["FFMAs per step"] // 4


def test_the_peeled_variant_runs_the_loop_to_the_last_tile_but_one():
    text = c.variant_source(c.PEELED)
    assert "tile < tiles - 1; ++tile" in text and "if (more)" not in text
    after = text[text.index("peeled off the loop"):]
    assert "const int cur = (tiles - 1) & 1;" in after and "acc[i][j] = fmaf" in after


def test_the_payoff_reads_every_kernel_of_one_run_at_both_settings():
    rows = c.payoff()
    assert [r["kernel"] for r in rows] == ["chapter 07's kernel", "chapter 08's kernel",
                                           *map(c.label, c.ALTERNATIVES)]
    assert rows[0]["own occupancy: / 07"] == rows[0]["one block per SM: / 07"] == "1.000"
    assert rows[1]["loads in flight (FFMAs)"].startswith("2 of 512")
    for r in rows[2:]:   # the exercise's answer and its alternatives: 128 registers, two blocks
        assert r["registers"] == 128 and r["own occupancy: blocks/SM"] == 2, r
    # the loads in flight pay at two blocks per SM too, and more at one
    assert 1 < c.payoff_gain() < c.payoff_gain(one_per_sm=True)
    # at BK = 16 chapter 08's own kernel takes 130 registers: one block per SM
    deep = c.payoff(c.DEEP)
    assert deep[1]["own occupancy: blocks/SM"] == 1
    # the forced one block per SM is not repeated as a column of its own
    assert "one block per SM: blocks/SM" not in deep.columns


def test_the_ratio_plot_and_the_labelled_figure(recorded_mode):
    import matplotlib.pyplot as plt
    from gemm_kernels.measure import ladder
    fig = c.ratio_plot(ladder.compare(["float4", "double_buffer"], (1024, 2048)))
    assert [t.get_text().split("\n")[0] for t in fig.axes[0].get_xticklabels()] == \
        ["1024^3", "2048^3"]
    assert "GFLOP/s" not in fig.axes[0].get_ylabel()     # a ratio has no unit
    assert "recorded on" in c.labelled(fig).texts[-1].get_text()
    plt.close(fig)


def test_the_loop_strip_shows_the_whole_of_the_longest_loop():
    import matplotlib.pyplot as plt
    fig = c.loop_strip(["chapter 08's kernel", c.WORKING])
    longest = max(c.loads(k).instructions for k in ("chapter 08's kernel", c.WORKING))
    for ax in fig.axes:
        assert ax.get_xlim()[1] > longest
    plt.close(fig)


def test_the_loop_strip_labels_every_arrow_with_its_ffmas():
    import matplotlib.pyplot as plt
    names = ["chapter 08's kernel", c.WORKING]
    fig = c.loop_strip(names)
    for ax, name in zip(fig.axes, names):
        lp = c.loads(name)
        texts = [t for t in ax.texts if t.get_text()]     # the arrows are empty annotations
        assert sorted(t.get_text() for t in texts) == \
            sorted(f"{ld.ffma:,} FFMAs" for ld in lp.loads if ld.use is not None)
        for t in texts:         # inside the strip's range, not cut at its edges
            assert -5 < t.get_position()[0] < lp.instructions + 5
    plt.close(fig)


def test_the_budget_variant_is_the_kernel_timed_with_two_blocks_per_sm():
    """The chapter's kernel under __launch_bounds__(256, 2) has the text of ch06's
    with_min_blocks and reads its timed rows: at BK = 16 in flight for the whole step,
    two blocks per SM, faster than chapter 07's kernel."""
    from gemm_kernels.notebook.ch06_tiles import with_min_blocks
    assert c.variant_source(c.BUDGET) == with_min_blocks("double_buffer", 2).source_text()
    rows = {r["kernel"]: r for r in c.payoff(c.DEEP, (c.BUDGET,))}
    budget = rows[c.label(c.BUDGET)]
    assert budget["own occupancy: blocks/SM"] == 2 and budget["registers"] <= 128
    assert budget["the quarter-step check"].startswith("passes")
    assert c.payoff_gain(c.DEEP, kernel=c.BUDGET) > 1 > \
        float(rows["chapter 08's kernel"]["own occupancy: / 07"])
    assert c.loads(c.BUDGET, c.DEEP).fewest == 1024   # in flight for the whole step


def test_every_source_has_one_short_label_used_in_every_table():
    """The text names the sources by short labels: one per variant, all different, and
    the tables show those, never the long names their recorded rows carry."""
    assert set(c.LABELS) == {n for n in c.VARIANTS if c.VARIANTS[n]}
    assert len(set(c.LABELS.values())) == len(c.LABELS)
    assert c.label("chapter 08's kernel") == "chapter 08's kernel"
    shown = [r["kernel"] for r in c.variants_table()]
    assert shown == [c.label(n) for n in c.VARIANTS] and c.WORKING not in shown
    assert c.WORKING not in [r["kernel"] for r in c.payoff()]


def test_the_one_block_summary_reads_the_study():
    text = c.one_block_summary()
    assert text.count("\n") == 3 and "wins back" in text and "% of its rate" in text


def test_the_short_payoff_keeps_the_medians_and_the_names_of_the_full_table():
    full, short = c.payoff(), c.payoff_short()
    assert short.columns == list(c.PAYOFF_SHORT.values())
    assert [r["kernel"] for r in short] == [r["kernel"] for r in full]   # one name each
    for f, s in zip(full, short):
        assert s["GFLOP/s"] == f["own occupancy: GFLOP/s"].split(" (")[0]
        assert s["x 07, 1 block/SM"] == f["one block per SM: / 07"]
    # at BK = 16 the chapter's kernel keeps its loads in flight: no such label there
    assert c.payoff_short(c.DEEP)[1]["kernel"] == "chapter 08's kernel"


def test_the_size_table_puts_each_ratio_beside_its_ranges(recorded_mode):
    from gemm_kernels.measure import ladder, records
    rows = c.size_table(ladder.compare(["float4", "double_buffer"], (1024, 4096)))
    assert [r["size"] for r in rows] == ["1024^3", "4096^3"]
    assert [r["blocks of 128 x 128"] for r in rows] == ["64", "1,024"]
    # at 1024^3 the grid leaves most of the recorded GPU's SMs idle
    sms = records.described_device()["sm_count"]
    assert [r["SMs with work"] for r in rows] == [f"64 of {sms}", f"{sms} of {sms}"]
    assert all(".." in r["chapter 07, GFLOP/s min..max"] and float(r["08 / 07"]) > 0
               for r in rows)
    # the ranges' overlap said in words (at 1024^3 they are apart, at 4096^3 not)
    assert [r["ranges"] for r in rows] == ["no overlap", "they overlap"]


def test_the_stall_summary_reads_both_block_counts(recorded_mode):
    text = c.stall_summary()
    assert text.startswith("Warp-cycles stalled per issued instruction, chapter 07 -> "
                           "chapter 08:\nWith two blocks per SM, ")
    assert "With one block per SM, both kernels' largest wait is 'long scoreboard'." in text
    assert text.count(" -> ") == 1 + 2 * len(c.STALL_READ)


def test_the_first_stall_bars_are_the_payoffs_profile_of_chapters_07_and_08(recorded_mode):
    """Cell 'Measured against chapter 07' draws the 2048^3 profile the grader's size and
    the payoff share: chapters 07 and 08 only, at both block counts, chapter 09's axis."""
    import matplotlib.pyplot as plt
    from gemm_kernels.notebook.capstone_pictures import STALL_AXIS
    rows = c.payoff_stalls(kernels=())
    assert [r["kernel"] for r in rows] == ["chapter 07's kernel", "chapter 08's kernel"] * 2
    fig = plt.gcf()
    assert fig.axes[0].get_xlabel() == STALL_AXIS
    assert "2048x2048x2048" in fig.axes[0].get_title()
    # the summary reads the same numbers
    assert f"long scoreboard: {rows[0]['long scoreboard']} -> " in c.stall_summary()
    plt.close(fig)


def test_the_worked_answer_note_is_the_grader_count():
    from gemm_kernels.exercises.ch08_checks import in_flight_words, loop_loads
    from gemm_kernels.exercises.solutions import solution_text
    from gemm_kernels.exercises.submission import submission_sass
    text = c.worked_answer_note()
    sass = submission_sass("08_double_buffer", "double_buffer", c.kernel_of("double_buffer")
                           .resolve({}) | {}, solution_text("08", "08_double_buffer"))
    assert in_flight_words(loop_loads(sass)) in text, text
    assert c.WORKING not in text          # no second build set beside it to reconcile


# ------------------------------------------------------------------ the payoff, profiled

def test_the_payoff_profile_holds_the_payoff_sources():
    """The study profiles what the payoff times: chapters 07 and 08 and every variant of
    ALTERNATIVES, at the payoff's shape, both tiles, two blocks per SM and one."""
    from gemm_kernels.measure import studies
    st = studies.get(c.PAYOFF_STALLS)
    assert st.kind == "ncu" and st.shapes == (c.PAYOFF_SHAPE,)
    assert {s.variant for s in st.steps} == {None} | {f"{c.KERNEL}: {v}" for v in c.ALTERNATIVES}
    assert {s.kernel for s in st.steps if not s.variant} == {"float4", c.KERNEL}
    for tile in (c.DEEP, {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}):
        for one in (False, True):
            at = [s for s in st.steps if {**tile, "ONE_PER_SM": one} == s.params]
            assert len(at) == 2 + len(c.ALTERNATIVES)
    # the variant a step names is the very kernel the payoff timed
    for s in st.steps:
        if s.variant:
            assert studies.step_kernel(s) is c.variant_kernel(s.variant.split(": ", 1)[1])


def test_the_payoff_profile_kernels_build():
    from gemm_kernels.core import compiler
    from gemm_kernels.measure import studies
    st = studies.get(c.PAYOFF_STALLS)
    for s in st.steps:
        if s.params.get("ONE_PER_SM"):
            continue
        k = studies.step_kernel(s)
        res = compiler.resources(k, k.resolve(s.params))
        assert res["registers"] > 0 and res["spill_stores"] == 0, s.label


def _profile_rec(tmp_path, monkeypatch, steps):
    """A recording holding the payoff profile of `steps` only, with made-up stall
    counters (test data: they exercise what is drawn, never shown as measurements)."""
    from gemm_kernels.core import device
    from gemm_kernels.measure import records, studies
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    device._gpu_present.cache_clear()
    wait = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
    rows = []
    for i, s in enumerate(steps):
        k = studies.step_kernel(s)
        rows.append({"chapter": "08", "kernel": k.name, "params": k.resolve(s.params),
                     "shape": list(c.PAYOFF_SHAPE), "source": k.source_hash(),
                     "study": c.PAYOFF_STALLS, "run": "r", "time": "2026-01-02T03:04:05Z",
                     "metrics": {wait.format("long_scoreboard"): 2.0 - 0.25 * i,
                                 wait.format("barrier"): 0.5, wait.format("selected"): 1.0,
                                 wait.format("short_scoreboard"): 1.0 + 0.1 * i}})
    rec = records.Record({"name": "Test GPU 9000", "sm_count": 100}, "2026-01-02T03:04:05Z",
                         "abc", rows, runs={"r": {}})
    path = records.save(rec, tmp_path / "test-gpu-9000.json")
    monkeypatch.setenv("GEMM_KERNELS_RECORD", str(path))
    # the only recording there is (the profile would otherwise be read from a committed
    # one that holds all of it)
    monkeypatch.setattr(records, "available", lambda: [{"path": str(path)}])
    records._LOADED.clear()


def test_payoff_stalls_draws_each_source_at_each_setting(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    from gemm_kernels.measure import records, studies
    steps = [s for s in studies.get(c.PAYOFF_STALLS).steps if s.params["BK"] == 8]
    _profile_rec(tmp_path, monkeypatch, steps)
    try:
        plt.close("all")
        table = c.payoff_stalls()
        fig = plt.gcf()
    finally:
        records._LOADED.clear()
    per = len(steps) // 2
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["two blocks\nper SM", "one block\nper SM"]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == 2 * ["chapter 07's kernel", "chapter 08's kernel", *map(c.label, c.ALTERNATIVES)]
    assert "warp-cycles stalled" in ax.get_xlabel()
    assert len(table) == len(steps)
    first, answer = table[0], table[2]
    assert first["long scoreboard"] == "2.00" and answer["long scoreboard"] == "1.50 (-0.50)"
    assert first["all waits"] == "3.50"      # "selected" (the issuing warp) is no wait
    assert table[per]["setting"] == "one block per SM"
    assert "Test GPU 9000" in table.title


def test_payoff_stalls_shows_only_the_kernels_asked_for(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    from gemm_kernels.measure import records, studies
    steps = [s for s in studies.get(c.PAYOFF_STALLS).steps if s.params["BK"] == 8]
    _profile_rec(tmp_path, monkeypatch, steps)
    try:
        plt.close("all")
        table = c.payoff_stalls(kernels=(c.WORKING, c.PEELED))
    finally:
        records._LOADED.clear()
    kernels = [r["kernel"] for r in table]
    assert kernels == 2 * ["chapter 07's kernel", "chapter 08's kernel",
                           c.label(c.WORKING), c.label(c.PEELED)]


def test_payoff_stalls_says_so_without_a_profile(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    from gemm_kernels.measure import records, studies
    deep_only = [s for s in studies.get(c.PAYOFF_STALLS).steps if s.params["BK"] == 16]
    _profile_rec(tmp_path, monkeypatch, deep_only)
    try:
        plt.close("all")
        got = c.payoff_stalls()        # the chapter's tile: not in this recording
        assert not plt.get_fignums()
    finally:
        records._LOADED.clear()
    assert got == c.PAYOFF_NOT_PROFILED and not any(ch.isdigit() for ch in got)


def test_the_one_block_plot_marks_cublas_on_every_row(recorded_mode):
    from gemm_kernels.measure import studies
    fig = c.one_block_plot()
    ax = fig.axes[0]
    ticks = [l for l in ax.lines if l.get_color() == "k" and len(l.get_xdata()) == 2]
    refs = [r["reference"]["gflops"]["median"] / 1e3 for _, r in studies.results("ch08_one_block")]
    assert sorted(t.get_xdata()[0] for t in ticks) == sorted(refs)
    assert max(refs) < ax.get_xlim()[1]
    assert [t.get_text() for t in ax.texts].count("  cuBLAS") == len(refs)


# ------------------------------------------------------------------ why a quarter, in cycles

def test_instructions_in_flight_follow_the_load_with_the_fewest_ffmas():
    from gemm_kernels.exercises.ch08_checks import Load, LoopLoads
    lp = LoopLoads(instructions=100, ffma=80, barriers=1, barriers_before=1,
                   loads=(Load(at=10, use=60, ffma=40), Load(at=90, use=5, ffma=12),
                          Load(at=20, use=None, ffma=0)))
    assert c.instructions_in_flight(lp) == 15          # 90 -> 5, across the loop's end
    assert c.instructions_in_flight(LoopLoads(10, 8, 1, 1, ())) is None


def test_a_warps_pace_is_the_sum_of_its_states_and_its_warps_per_scheduler():
    assert c.cycles_per_instruction({"selected": 1.0, "long scoreboard": 2.5,
                                     "not selected": 0.5}) == 4.0
    # 256 threads, two blocks per SM at the chapter's tile, one with ONE_PER_SM
    assert c.warps_per_scheduler("float4") == 4
    assert c.warps_per_scheduler("chapter 07's kernel", one_per_sm=True) == 2
    assert c.warps_per_scheduler("chapter 08's kernel", c.DEEP) == 2   # 130 registers


def test_why_a_quarter_is_read_from_chapter_07s_profile(recorded_mode):
    """The chapter's quarter comes from the payoff's profile (2048^3, two blocks per SM),
    the size the working prefetch was timed at, its assumption first, each loop's
    instruction count named."""
    text = c.why_a_quarter()
    st = next(st for s, st, _ in c._payoff_profiles(None, c.PAYOFF_STALLS,
                                                    None)[False] if s == "chapter 07's kernel")
    ls = st["long scoreboard"]
    n = c.loads("float4").instructions
    assert text.startswith("The assumption: chapter 07's kernel uses each loaded value")
    assert f"wait {ls:.2f} cycles for global loads" in text
    assert f"Its loop issues {n:,} instructions per step." in text
    assert f"{ls:.2f} x {n:,} = {ls * n:,.0f} cycles of waiting per step" in text
    assert "4 warps share each scheduler" in text
    assert f"Chapter 07's loop has 512 FFMAs among its {n:,} instructions" in text
    assert "The check asks for a quarter: 128 FFMAs" in text and "Nsight Compute at 2048^3" in text
    assert max(map(len, text.splitlines()[1:-1])) <= 100       # short lines, one step each
    assert "on average a warp issues at most once every 4 cycles" in text
    # numbered like the three printed lines: 1 latency, 2 instructions, 3 FFMAs
    steps = [ln for ln in text.splitlines() if ln[:1].isdigit()]
    assert [ln[:3] for ln in steps] == ["1. ", "2. ", "3. "]
    assert steps[1].startswith("2. The instructions that span it")
    # the safe side comes after the count, unnumbered, with the pace measured
    assert ("Why the fastest pace is the safe side.\n"
            "   Chapter 07's warps issued once every 6.3 cycles, not 4.\n"
            "   At that pace the same instructions last 144 x 6.3 = 907 cycles, more than 577.") in text
    assert "What must be covered is a time" in text      # not a share of the step
    assert "cycles per instruction = " in text


def test_quarter_line_is_the_counts_result(recorded_mode):
    """The three lines beside the check give the latency, the instructions that span it
    and the FFMAs among them, against the check's 128, numbered like the fold's steps."""
    line, text = c.quarter_line(), c.why_a_quarter()
    first, second, third = line.split("\n")
    assert first.startswith("1. ") and second.startswith("2. ") and third.startswith("3. ")
    # each line's numbers are those of the fold's step with the same number
    assert "577 cycles / 4 cycles per instruction = 144 instructions" in text.split("3. ")[0]
    assert "144 x 512 / 577 = 128 FFMAs" in text.split("3. ")[1]
    cycles = first.split("= ")[1].split(" stall cycles")[0]
    assert f"= {cycles} cycles of waiting per step" in text
    ffma = third.split("= ")[1].split(" FFMAs")[0]
    assert f"= {ffma} FFMAs" in text
    # one worked block with units: the stall metric is per issued instruction, not a CPI
    assert first.startswith("1. 1.00 stall cycles per issued instruction (long scoreboard) "
                            "x 577 instructions per step = 577 stall cycles per warp per step")
    assert "cycles per instruction (a warp's fastest pace on average) = 144 instructions" in second
    # said once, in the fold
    assert "match" not in line and "The two 577s match only because the wait is 1.00" in text
    assert "the latency under load, at the base clock Nsight Compute holds" in text
    assert third.endswith("(the check asks for 128).")
    # the same share as the long count's: the wait per instruction / warps per scheduler
    st = next(st for s, st, _ in c._payoff_profiles(None, c.PAYOFF_STALLS,
                                                    None)[False] if s == "chapter 07's kernel")
    assert f"FFMAs, {st['long scoreboard'] / 4:.2f} of the step's 512" in third


def test_cover_line_counts_the_flight_against_the_latency(recorded_mode):
    """At BK = 16 the answer's loads, below the quarter, still travel longer than the
    latency: the one line of the chapter's answer, from the numbers of the count."""
    line = c.cover_line(params=c.DEEP)
    words = c.latency_words(c.DEEP)
    wait = line.split("instructions = ")[1].split(" cycles")[0]
    assert f"= {wait} cycles" in words and "\n" not in line
    assert f"{c.loads(c.WORKING, c.DEEP).fewest:,} FFMAs" in line
    assert line.endswith("longer than the latency.")
    assert line.startswith("Latency: chapter 07's wait for global loads, ")


def test_the_quarter_in_cycles_is_written_as_instructions_times_pace(recorded_mode):
    """At BK = 16 the quarter's cycles read 'N instructions x 4 cycles = M cycles', so the
    quarter's instructions and the step's instruction count are not the same number."""
    lp = c.loads(c.WORKING, c.DEEP)
    n = round(lp.needed * lp.instructions / lp.ffma)
    w = c.warps_per_scheduler(c.WORKING, c.DEEP)
    assert (f"at least {n:,} instructions x {w:.0f} cycles = {n * w:,.0f} cycles"
            in c.latency_words(c.DEEP))


def test_the_failing_sources_at_bk16_cover_the_latency(recorded_mode):
    """At BK = 16 the sources that fail the quarter-step check still keep their loads in
    flight longer than chapter 07's wait per step: the sentence says 'more', and the
    table's cycles in flight exceed chapter 07's wait for every one of them."""
    text = c.latency_words(c.DEEP)
    assert "The 4 variants that fail it" in text and "more than the latency" in text
    assert "(at the chapter's tile, 128 x 128 x 8, the same profile gives " in text
    rows = {r["kernel"]: r for r in c.latency_cover(c.DEEP)}
    num = lambda s: float(s.replace(",", ""))      # noqa: E731
    latency = num(rows["chapter 07's kernel"]["wait for global loads (cycles per step)"])
    for name in c.ALTERNATIVES:
        assert num(rows[c.label(name)]["in flight (cycles)"]) > latency, name
    assert rows["chapter 08's kernel"]["warps per scheduler"] == "2"
    # at the chapter's tile every source passes: no sentence about failing ones
    assert "fail it" not in c.latency_words()


def test_the_deep_profile_names_the_kernel_that_runs_one_block(recorded_mode):
    import matplotlib.pyplot as plt
    plt.close("all")
    table = c.payoff_stalls(c.DEEP)
    ax = plt.gcf().axes[0]
    assert "chapter 08's kernel (1 block per SM)" in [t.get_text() for t in ax.get_yticklabels()]
    assert [t.get_text() for t in ax.texts][0] == "own occupancy"
    assert table[1]["kernel"] == "chapter 08's kernel (1 block per SM)"
    # one block against chapter 07's two: no change in brackets
    assert "(" not in table[1]["long scoreboard"] and "(" in table[2]["long scoreboard"]
    assert {r["setting"] for r in table} == {"own occupancy", "one block per SM"}
    plt.close("all")


def test_the_package_names_of_chapters_07_and_08_read_as_their_chapters():
    # the tables and pictures name them as the prose does
    assert c.label("float4") == "chapter 07's kernel"
    assert c.label(c.KERNEL) == "chapter 08's kernel" == c.label("chapter 08's kernel")
    assert c.label(c.NO_IF) == "no if"


def test_payoff_sizes_gives_each_kernel_its_own_share_of_cublas(recorded_mode):
    """One row per size; each share is the row's rate over the cuBLAS timed beside it (at
    2048^3 the payoff's own rows), and each row names the runs it comes from."""
    from gemm_kernels.measure import lookup, timing
    rows = c.payoff_sizes()
    assert [r["size"] for r in rows] == [f"{n}^3" for n in c.PAYOFF_SIZES]
    at_2048 = rows[c.PAYOFF_SIZES.index(2048)]
    payoff = {r["kernel"]: r for r in c.payoff(None, (c.WORKING,))}
    assert at_2048["chapter 07"] == payoff["chapter 07's kernel"][
        "own occupancy: % of cuBLAS"] + "%"
    assert c.label(c.WORKING) in rows.title and "% of cuBLAS" in rows.title
    r = lookup.variant_row(c.variant_kernel(c.WORKING), (8192,) * 3,
                           {**c.kernel_of(c.KERNEL).resolve(None), "ONE_PER_SM": False})
    assert rows[-1]["the answer"] == f"{timing.share(r):.1f}%"
    assert r["run"] in rows[-1]["run ids"]
    assert at_2048["timed in"] == "one run"


def test_payoff_sizes_names_what_the_recording_lacks(recorded_mode):
    with pytest.raises(LookupError, match="at 3000\\^3"):
        c.payoff_sizes(sizes=(3000,))


def test_pace_to_rate_predicts_the_gain_from_the_issue_share(recorded_mode):
    text = c.pace_to_rate()
    lines = text.splitlines()
    assert lines[0].startswith("chapter 07's kernel: 4 warps per scheduler")
    assert lines[1].startswith(f"{c.label(c.WORKING)}: 4 warps per scheduler")
    predicted = float(lines[2].split("x")[1].split(";")[0])
    timed = float(lines[2].rsplit("x", 1)[1])
    assert timed == round(c.payoff_gain(), 2)
    assert predicted > 1 and timed > 1       # the faster issue goes with the faster rate


def test_your_loop_draws_the_students_loop_or_says_why_not(monkeypatch):
    from gemm_kernels.exercises import magic
    from gemm_kernels.exercises.solutions import solution_text
    monkeypatch.setattr(magic, "_SOURCES", {})
    assert "has not been run yet" in c.your_loop()
    answer = solution_text("08", "08_double_buffer")
    magic._SOURCES["08_double_buffer"] = answer.replace("__syncthreads();\n    }",
                                                        "// YOUR CODE HERE\n    }", 1)
    assert "YOUR CODE HERE" in c.your_loop()
    magic._SOURCES["08_double_buffer"] = answer
    assert "passes the quarter-step check" in c.your_loop()
    assert "LDG.E.128" in c.your_loop() and "BAR.SYNC" in c.your_loop()
    import matplotlib.pyplot as plt
    assert plt.gcf().axes[0].get_title(loc="left").startswith(
        "your kernel: 512 FFMAs")


def test_ptx_step_shows_one_predicate_around_the_fetch_and_the_stores():
    """In the PTX of the chapter's kernel the fetch and the stores sit in two blocks
    skipped by branches on one predicate, with the step's FMAs between them."""
    import re
    text = c.ptx_step()
    lines = text.splitlines()
    assert lines[0].endswith(":") and "bar.sync" in lines[-2] and " bra" in lines[-1]
    first_load = next(i for i, line in enumerate(lines) if line.startswith("ld.global"))
    first_store = next(i for i, line in enumerate(lines) if line.startswith("st.shared"))
    fma = next(i for i, line in enumerate(lines) if "512 of them FMAs" in line)
    assert first_load < fma < first_store
    # the first branch of the trip skips the fetch; a branch on its predicate, after the
    # FMAs, skips the stores
    pred = next(re.match(r"@(%p\d+) bra", line).group(1) for line in lines
                if re.match(r"@%p\d+ bra", line))
    assert any(line.startswith(f"@{pred} bra") for line in lines[fma:first_store])


def test_every_count_of_the_answer_is_its_exact_source():
    """One count for the answer everywhere: the tables read the solution notebook's
    source, the one the grader counts, not the timed copy with its FFMAs written out."""
    table = {r["kernel"]: r for r in c.variants_table([c.WORKING])}
    fewest = table[c.label(c.WORKING)]["FFMAs between a global load and its use"]
    assert f"for {fewest:,} of the step's" in c.worked_answer_note()
    assert c.loads(c.WORKING).fewest == fewest


def test_the_short_payoff_with_ranges_shows_one_kernel_beside_chapters_07_and_08():
    full = c.payoff(None, (c.WORKING,))
    short = c.payoff_short(kernels=(c.WORKING,), ranges=True)
    assert [r["kernel"] for r in short] == [r["kernel"] for r in full]
    assert len(short) == 3 and "lowest..highest" in short.title
    for f, s in zip(full, short):
        assert s["GFLOP/s"] == f["own occupancy: GFLOP/s"] and ".." in s["GFLOP/s"]


def test_the_text_check_is_quiet_when_the_counts_match_the_text():
    for params, bk in ((None, 8), (c.DEEP, 16)):
        line = c.text_check(params, counted=c.TEXT_IN_FLIGHT[bk], version="12.9")
        assert line.startswith("Your ptxas (12.9) places chapter 08's loads where")
        assert f"({c.TEXT_IN_FLIGHT[bk]:,} FFMAs in flight at BK = {bk})" in line
        assert "Warning" not in line


def test_the_text_check_names_the_ptxas_when_the_counts_differ():
    line = c.text_check(counted=300, version="13.1")   # a planted difference
    assert line.count("\n") == 0
    assert line.startswith("Warning: your ptxas 13.1 gives 300 FFMAs in flight at BK = 8, "
                           "not 2") and f"ptxas {c.TEXT_PTXAS}" in line
    assert "not 1,024" in c.text_check(c.DEEP, counted=176, version="13.1")


def test_the_text_check_reads_the_live_count():
    # with the ptxas the text describes, the live count is the text's
    from gemm_kernels.core import compiler
    if compiler.ptxas_version() != c.TEXT_PTXAS:
        pytest.skip("another ptxas: the warning is the expected output")
    assert "Warning" not in c.text_check() and "Warning" not in c.text_check(c.DEEP)


def test_the_latency_table_names_the_blocks_per_sm_as_the_text_does(recorded_mode):
    title = c.latency_cover().title
    assert "two blocks per SM" in title and "own occupancy" not in title


def test_deeper_tile_gives_each_kernel_its_two_rates_and_gain():
    text = c.deeper_tile()
    lines = text.splitlines()
    assert lines[1].startswith("chapter 07's kernel") and lines[2].startswith("chapter 08's kernel")
    rows = {r["config"]: r for r in c.sweep_rows()}
    gain = rows["128x128x16 8x8"]["GFLOP/s 08"] / rows["128x128x8 8x8"]["GFLOP/s 08"] - 1
    assert lines[2].endswith(f"{gain:+.0%}")


def test_pace_to_rate_words_a_gap_that_rounds_to_nothing_as_agreement():
    text = c.pace_to_rate(c.DEEP, c.PEELED)
    assert "-0%" not in text and "0% above" not in text


def test_each_payoff_view_can_show_one_setting_only(recorded_mode):
    """The chapter's main path shows two blocks per SM only (how the kernel runs); its
    appendix shows one block per SM: each view draws or lists only the settings asked for."""
    import matplotlib.pyplot as plt
    short = c.payoff_short(kernels=(c.WORKING,), settings=(False,))
    assert short.columns == ["kernel", "loads in flight (FFMAs)", "blocks/SM", "GFLOP/s", "x 07"]
    alone = c.payoff_short(kernels=(c.WORKING,), settings=(True,))
    assert alone.columns == ["kernel", "loads in flight (FFMAs)", "GFLOP/s, 1 block/SM",
                             "x 07, 1 block/SM"]
    assert alone[2]["x 07, 1 block/SM"] == c.payoff()[2]["one block per SM: / 07"]
    text = c.stall_summary(settings=(False,))
    assert "With two blocks per SM" in text and "one block" not in text
    assert text.count(" -> ") == 1 + len(c.STALL_READ)
    plt.close("all")
    rows = c.payoff_stalls(kernels=(c.WORKING,), settings=(True,))
    assert {r["setting"] for r in rows} == {"one block per SM"} and len(rows) == 3
    assert [t.get_text() for t in plt.gcf().axes[0].texts] == ["one block\nper SM"]
    plt.close("all")


def test_the_loop_listing_keeps_the_lines_asked_for_and_counts_the_rest():
    """The chapter's key listing: from the first branch, the loads, the FFMAs, the stores
    and the barrier, each run of other instructions folded into one counted line."""
    from gemm_kernels.core import analysis, compiler
    from gemm_kernels.core.launch import kernel_of
    from gemm_kernels.notebook import display
    keep = ("BRA", "LDG", "FFMA", "STS", "BAR")
    text = str(display.sass_loop(c.KERNEL, start="BRA", keep=keep))
    lines = text.splitlines()
    k = kernel_of(c.KERNEL)
    body = analysis.main_loop(compiler.sass(k, k.resolve(None)))
    skipped = next(n for n, (_, _, t) in enumerate(body) if t.startswith("BRA"))
    assert lines[0].startswith(f"... {skipped} earlier instructions of the loop, ")
    shown = [line for line in lines if line.startswith("/*")]
    assert all(any(op in line for op in keep) for line in shown)
    assert sum(" LDG" in line for line in shown) == 2 and "BAR.SYNC" in text
    # every instruction after the first branch is either listed or counted
    folded = sum(int(line.split()[1]) for line in lines[1:] if line.strip().startswith("..."))
    assert len(shown) + folded == len(body) - skipped
    # the student's loop, read by KEY_LINES: every FFMA between the lines is counted
    answer = str(display.sass_loop(c.answer_kernel(), keep=c.KEY_LINES))
    assert "FFMA" in answer and not any(" FFMA R" in line for line in answer.splitlines())


def test_the_loop_listing_can_keep_the_branch_targets():
    """With labels, the listing shows where each branch lands (`.L_x_2:` before the
    instruction it names), so a reader can see what the branch skips; without, none."""
    from gemm_kernels.notebook import display
    keep = ("BRA", "LDG", "FFMA", "STS", "BAR")
    plain = str(display.sass_loop(c.KERNEL, start="BRA", keep=keep)).splitlines()
    lines = str(display.sass_loop(c.KERNEL, start="BRA", keep=keep, labels=True)).splitlines()
    labels = [line for line in lines if line.startswith(".L_x_")]
    assert labels and not any(line.startswith(".L_x_") for line in plain)
    # every branch of the listing but the loop's branch back lands on a label shown
    targets = [line.split("(")[1].rstrip(")") for line in lines if " BRA " in line]
    assert all(f"{t}:" in labels for t in targets[:-1])
    # a label is followed by an instruction (the one it names), never by a folded run
    assert all(lines[n + 1].startswith("/*") for n, line in enumerate(lines)
               if line.startswith(".L_x_"))
    # the instructions shown and counted are the same with or without the labels
    assert [line for line in lines if not line.startswith(".L_x_")] == plain
