"""Chapter 02's notebook helpers: the L1's bandwidth in lines, the recorded counters under
readable names, tables with one decimal per percentage, the ncu command, the prediction
check's word on the usual slip, and the figures' finishing touches."""
import matplotlib
import pytest

from gemm_kernels.measure import lookup, records, studies

matplotlib.use("Agg")

from gemm_kernels.memory import ch01_02_sectors as model   # noqa: E402
from gemm_kernels.notebook import ch02_coalescing, ch02_stalls   # noqa: E402

H200 = {"name": "NVIDIA H200", "sm_count": 132, "sm_clock_mhz": 1980.0}


def test_the_l1_width_is_an_upper_bound_of_one_word_per_bank():
    text = ch02_coalescing.l1_bandwidth(H200)
    assert "128 bytes per clock at most" in text and "33.5 TB/s" in text
    assert "one word from each bank" in text and "line" not in text


def test_profiled_counters_by_configuration():
    m = ch02_coalescing.profiled("coalesced", {"BLOCK": 32})
    assert model.WAVEFRONTS in m
    assert ch02_coalescing.profiled("coalesced", {"BLOCK": 4}) == {}


def test_percentages_have_one_decimal_each():
    t = ch02_coalescing.l1_table()
    assert all(r["L1 hit rate (%)"].endswith("%") and "." in r["L1 hit rate (%)"] for r in t)


def test_the_caches_table_sets_fetched_over_requested_beside_the_hit_rate():
    t = ch02_coalescing.caches_table()
    col = "1 - fetched / requested (%)"
    assert t.columns.index(col) == t.columns.index("L1 hit rate (%)") + 1
    for r in t:
        m = ch02_coalescing.profiled("coalesced", {"BLOCK": int(r["configuration"].split()[-1])},
                                     ch02_coalescing.CACHES_STUDY)
        want = 100 * (1 - m[ch02_coalescing.FROM_L2] / m[model.SECTORS_LD])
        assert r[col] == f"{want:.1f}%"


def test_the_l2_count_compares_the_two_block_sizes(recorded_mode):
    text = ch02_coalescing.l2_count()
    assert "262,144 blocks of 64 threads" in text and "times as many at BLOCK = 8" in text
    # the timed share at 4096^3 beside the one at 2048^3, both from the recorded rates
    rate = {(n, b): lookup.measure_or_lookup("coalesced", (n,) * 3, {"BLOCK": b})["gflops"]["median"]
            for n in (4096, 2048) for b in (8, 32)}
    assert (f"runs at {rate[4096, 8] / rate[4096, 32]:.0%} of BLOCK = 32's rate at 4096^3, "
            f"and at {rate[2048, 8] / rate[2048, 32]:.0%} of it at 2048^3.") in text


def test_the_stages_table_sets_every_stage_of_the_load_path_side_by_side():
    t = ch02_coalescing.stages_table()
    rows = {r["configuration"]: r for r in t}
    assert set(rows) == {"naive, BLOCK = 32, MAPPING = x->row", "coalesced, BLOCK = 8",
                         "coalesced, BLOCK = 32"}
    pct = lambda r, c: float(r[c].rstrip("%"))
    # on the limit the data stage is full; at BLOCK = 32 every stage sits at one share
    assert pct(rows["coalesced, BLOCK = 8"], "L1 data stage (%)") > 95
    b32 = rows["coalesced, BLOCK = 32"]
    shares = [pct(b32, c) for c in ch02_coalescing.STAGES]
    assert max(shares) < 90 and max(shares) - min(shares) < 2
    # two loads per step: one load per line at BLOCK = 32
    assert b32["lines per step"] == 2
    # every share has one base (active cycles): no rate per elapsed cycle beside them
    assert "loads per SM and cycle" not in b32


def test_the_ncu_command_profiles_the_study_with_every_counter():
    text = ch02_coalescing.ncu_command()
    for metric in ch02_coalescing.TABLE_METRICS:
        assert metric in text
    assert "--target ch02_l1_lines" in text and "sgemm_coalesced|sgemm_naive" in text


def test_the_ncu_command_writes_a_pattern_as_ncu_reads_it():
    """ncu knows a regular expression by its prefix regex: (the studies' own re: is
    expanded in Python before ncu runs); the pattern is quoted for the shell."""
    pattern = "re:^l1tex__[a-z_]+\\.sum$"
    text = str(ch02_coalescing.ncu_command(metrics=(pattern, model.CYCLES)))
    assert "'regex:^l1tex__[a-z_]+\\.sum$'," in text and "'re:" not in text
    assert model.CYCLES in text


def test_the_prediction_check_names_the_half_warp(capsys):
    lim = model.line_limit(*model.PREDICT)["GFLOP/s"]
    ch02_coalescing.check_prediction(2 * lim, 900)
    out = capsys.readouterr().out
    assert "did you count 32 lanes" in out and "Not yet" in out
    ch02_coalescing.check_prediction(lim, 900)
    assert "did you count" not in capsys.readouterr().out


def test_a_wrong_prediction_gets_a_question_not_the_answer(capsys, recorded_mode):
    lim = model.line_limit(*model.PREDICT)["GFLOP/s"]
    half = model._rate(*model.PREDICT_FROM, 2048)["gflops"]["median"] / 2
    measured = model._rate(*model.PREDICT, 2048)["gflops"]["median"]
    for a, b in ((2 * lim, 2 * half), (lim, 2 * half), (2 * lim, half)):
        ch02_coalescing.check_prediction(a, b)
        out = capsys.readouterr().out
        assert "Not yet" in out and "Measured" not in out
        assert f"{measured:,.0f}" not in out
        for right, given in ((lim, a), (half, b)):
            if given != right:      # the model's number appears only where it was written
                assert f"{right:,.0f}" not in out
    ch02_coalescing.check_prediction(lim, half)
    out = capsys.readouterr().out
    assert "Not yet" not in out and f"Measured at 2048^3: {measured:,.0f}" in out


def test_the_wavefront_table_keeps_the_counters_apart_from_our_subtraction():
    t = list(ch02_coalescing.wavefront_parts_table())
    if studies.recording_of(ch02_coalescing.ALIGNMENT_L1) is None:
        return
    assert (t[0]["M = N = K"], t[0]["configuration"]) == (2048, "coalesced, BLOCK = 8")
    # negative control: a launch whose conflicts were not recorded (the naive kernel's)
    # is left out, not shown with holes
    assert not any(r["configuration"].startswith("naive") for r in t)
    assert all("not recorded" not in str(v) and v != "-" for r in t for v in r.values())
    sub = "data stage: wavefronts - conflicts (computed)"
    for r in t:
        data, bank, rest = (float(r[c]) for c in (
            "data stage: wavefronts", "data stage: bank conflicts", sub))
        assert data == pytest.approx(bank + rest, abs=0.011)
        if r["M = N = K"] == 2048:
            # without its conflicts the data stage spends about one wavefront per request
            assert rest == pytest.approx(float(r["load requests"]), abs=0.05)


def test_bank_conflicts_prefer_the_sum_and_need_both_shares():
    wf = model.WAVEFRONTS
    pct = ch02_coalescing.BANK_CONFLICTS + ch02_coalescing._PCT
    assert ch02_coalescing.bank_conflicts(
        {ch02_coalescing.BANK_CONFLICTS + ".sum": 7, pct: 50, wf: 100}) == 7
    assert ch02_coalescing.bank_conflicts(
        {pct: 30, ch02_coalescing.DATA_PIPE_PCT: 60, wf: 100}) == pytest.approx(50)
    # negative controls: a missing share is no count, not a zero
    assert ch02_coalescing.bank_conflicts({pct: 30, wf: 100}) is None
    assert ch02_coalescing.bank_conflicts({ch02_coalescing.DATA_PIPE_PCT: 60, wf: 100}) is None


def _fake_alignment_recording(monkeypatch, names):
    """A recording whose timed rows are 1000 x BLOCK GFLOP/s (plus 1 at the odd size),
    cuBLAS beside each at 50,000, for the steps of the alignment studies in `names`."""
    from gemm_kernels.core.kernels import KERNELS
    from gemm_kernels.measure import records
    k = KERNELS["coalesced"]
    rows = [{"chapter": "02", "kernel": "coalesced", "params": k.resolve(step.params),
             "shape": list(shape), "source": k.source_hash(), "run": "r",
             "gflops": {"median": 1000.0 * step.params["BLOCK"] + shape[0] % 2},
             "reference": {"kernel": "cublas", "gflops": {"median": 50000.0}}}
            for name in names for shape in studies.get(name).shapes
            for step in studies.get(name).steps]
    rec = records.Record({"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc", rows)
    monkeypatch.setattr(studies, "recording_of", lambda name, shape=None: rec)


def test_the_alignment_gap_compares_the_timed_block_sizes_at_both_sizes(monkeypatch):
    _fake_alignment_recording(monkeypatch, (ch02_coalescing.ALIGNMENT,
                                            ch02_coalescing.ALIGNMENT_BLOCK8))
    assert str(ch02_coalescing.alignment_gap()) == (
        f"Timed: BLOCK = 8 runs at {8000 / 32000:.0%} of BLOCK = 32's rate at 2048^3, "
        f"and at {8001 / 32001:.0%} of it at 2047^3.")
    # negative control: without BLOCK = 8's own run there is no gap to print
    _fake_alignment_recording(monkeypatch, (ch02_coalescing.ALIGNMENT,))
    assert "not timed" in str(ch02_coalescing.alignment_gap())


def test_the_tag_stage_takes_four_lines_per_wavefront():
    naive = ("naive", {"BLOCK": 32, "MAPPING": "x->row"})
    odd = model.line_limit(*naive, H200, (2047,) * 3, steps=32)
    # A: 32 lanes in 32 lines = 8 tag wavefronts, B: one line, one wavefront
    assert (odd["lines"], odd["tags"], odd["banks"]) == (33, 9, 2)
    assert odd["stage GFLOP/s"] == pytest.approx(odd["bank GFLOP/s"] * 2 / 9)
    aligned = model.line_limit(*naive, H200, (2048,) * 3)
    # negative control: on the lines the banks are the slower stage, the tags do not matter
    assert aligned["tags"] == 9 and aligned["stage GFLOP/s"] == aligned["bank GFLOP/s"]


def test_the_bank_picture_stacks_aligned_rows_on_one_bank():
    fig = ch02_coalescing.bank_picture()
    aligned, misaligned = (ax.get_title() for ax in fig.axes[:2])
    assert "4 words on 1 bank: 4 L1 cycles" in aligned
    assert "4 words on 4 banks: 1 L1 cycle" in misaligned
    # the boxes drawn: all on bank 0 at 2048, on four banks at 2047
    xs = [{round(p.get_x() + 0.45) for p in ax.patches} for ax in fig.axes[:2]]
    assert xs == [{0}, {0, 29, 30, 31}]


def test_the_alignment_ncu_command_counts_the_bank_conflicts():
    text = str(ch02_coalescing.ncu_command(ch02_coalescing.ALIGNMENT_L1,
                                           ch02_coalescing.ALIGNMENT_METRICS))
    assert "--target ch02_alignment_l1" in text
    assert ch02_coalescing.BANK_CONFLICTS + ".sum" in text
    assert ch02_coalescing.TAG_WAVEFRONTS in text


def test_the_stall_plot_hatches_not_selected_and_writes_totals():
    fig = ch02_stalls.stall_plot(kernels=["coalesced"])
    ax = fig.axes[0]
    hatched = [c for c in ax.containers if c.get_label().startswith(ch02_stalls.NOT_SELECTED)]
    assert hatched and all(p.get_hatch() == "///" for p in hatched[0].patches)
    assert sum(t.get_text().endswith("in all") for t in ax.texts) == 3


def test_the_stall_plot_names_each_kernel_and_explains_each_reason_it_draws():
    fig = ch02_stalls.stall_plot()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels and all(l.startswith(("naive", "coalesced")) for l in labels)
    drawn = ch02_stalls.reasons(fig)
    text = str(ch02_stalls.meanings(fig))
    assert [line.split(":")[0] for line in text.splitlines()[:-1]] == drawn
    assert all(r in ch02_stalls.MEANING for r in drawn)


def test_the_limit_plot_writes_thousands_separators():
    fig = ch02_coalescing.limit_plot([("coalesced", {"BLOCK": 32})])
    fmt = fig.axes[0].xaxis.get_major_formatter()
    assert fmt(2000, 0) == "2,000"


def test_the_limit_plot_ends_just_past_its_longest_label():
    fig = ch02_coalescing.limit_plot([("naive", {"BLOCK": 32, "MAPPING": "x->row"}),
                                      ("coalesced", {"BLOCK": 32})])
    ax = fig.axes[0]
    fig.canvas.draw()
    right = max(ax.transData.inverted().transform(t.get_window_extent().corners())[:, 0].max()
                for t in ax.texts)
    assert right <= ax.get_xlim()[1] <= right * 1.05


def test_a_warp_down_a_column_keeps_only_its_columns_of_c():
    fig = ch02_coalescing.sector_picture("naive", {"BLOCK": 32, "MAPPING": "x->row"})
    assert fig.axes[0].get_xlim() == (-0.5, 0.5)
    a, b = fig.axes[1].get_position(), fig.axes[2].get_position()
    assert abs(a.x0 - b.x0) < 1e-6 and abs(a.width - b.width) < 1e-6


def test_a_half_warp_on_four_columns_draws_only_those_columns():
    fig = ch02_coalescing.sector_picture("naive", {"BLOCK": 4, "MAPPING": "x->row"})
    assert fig.axes[0].get_xlim() == (-0.5, 3.5)


def test_bank_words_count_the_busiest_bank_and_part_from_lines_off_powers_of_two():
    rows = lambda stride: [r * stride for r in range(32)]       # one float per row
    # a power-of-two stride puts every row on one bank: the two counts agree
    assert model.bank_words(rows(2048)) == model.lines(rows(2048)) == 32
    # an odd stride spreads the rows over the 32 banks: one cycle, still 32 lines
    assert (model.bank_words(rows(2047)), model.lines(rows(2047))) == (1, 32)
    # 32 floats across a line boundary: two lines, but each bank delivers one word
    assert (model.bank_words(range(5, 37)), model.lines(range(5, 37))) == (1, 2)
    # negative control: two words of one bank are two cycles, a broadcast is one
    assert model.bank_words([0, 32] + [None] * 30) == 2
    assert model.bank_words([7] * 32) == 1


def test_misaligned_lines_hides_the_answer_until_it_is_found(capsys):
    ch02_coalescing.misaligned_lines()
    assert "Pencil first" in capsys.readouterr().out
    n = ch02_coalescing.MISALIGNED_N
    lim = model.line_limit(*ch02_coalescing.MISALIGNED_TASK, shape=(n, n, n), steps=32)
    assert lim["lines"] == 2 + 47 / 32        # A: 2 rows; B: 16 floats fit 17 starts of 32
    # negative controls: the aligned count and another wrong count reveal nothing
    for wrong in (3, 2.5):
        ch02_coalescing.misaligned_lines(wrong, lim["GFLOP/s"])
        out = capsys.readouterr().out
        assert "3.47" not in out and f"{lim['GFLOP/s']:,.0f}" not in out
        assert not out.startswith("Right")
    ch02_coalescing.misaligned_lines(3, 1)
    assert "every row of B starts a line" in capsys.readouterr().out
    # one crossing start off (16 or 14 of 32 instead of 15): a question on the boundary
    for off_by_one in (3.5, 3.4375, 3.44):
        ch02_coalescing.misaligned_lines(off_by_one, 16727 / off_by_one)
        out = capsys.readouterr().out
        assert "floats 16..31 fit in one line?" in out and not out.startswith("Right")
        assert "3.47" not in out
    ch02_coalescing.misaligned_lines(3.46, lim["GFLOP/s"])
    assert capsys.readouterr().out.startswith("Right: 3.47 lines")
    ch02_coalescing.misaligned_lines(3.47, lim["GFLOP/s"] * 2)
    assert "is right" in capsys.readouterr().out
    ch02_coalescing.misaligned_lines(111 / 32, round(lim["GFLOP/s"] * 1.01))
    out = capsys.readouterr().out
    assert out.startswith("Right: 3.47 lines")
    # the rates of the alignment study where it is recorded, else the limit is a prediction
    assert ("Measured in one run" in out) == (
        studies.recording_of(ch02_coalescing.ALIGNMENT) is not None)
    from unittest import mock
    with mock.patch.object(studies, "recording_of", lambda name, shape=None: None):
        ch02_coalescing.misaligned_lines(111 / 32, round(lim["GFLOP/s"] * 1.01))
    assert "No rate was recorded at N = 2047" in capsys.readouterr().out


def test_misaligned_lines_leaves_the_bank_count_to_the_second_half(capsys):
    n = ch02_coalescing.MISALIGNED_N
    lim = model.line_limit(*ch02_coalescing.MISALIGNED_TASK, shape=(n, n, n), steps=32)
    ch02_coalescing.misaligned_lines(111 / 32, lim["GFLOP/s"])
    out = capsys.readouterr().out
    # the second half asks for the banks: the first must not give them away
    assert "bank" not in out and f"{lim['bank GFLOP/s']:,.0f}" not in out
    if studies.recording_of(ch02_coalescing.ALIGNMENT) is not None:
        assert "of your line limit" in out and "next cell" in out


def test_misaligned_rule_checks_both_stages_and_the_limit(capsys):
    n = ch02_coalescing.MISALIGNED_N
    lim = model.line_limit(*ch02_coalescing.MISALIGNED_TASK, shape=(n, n, n), steps=32)
    # A: 2 lines in one look-up; B: 1 or 2 lines in one look-up; no bank holds two words
    assert (lim["tags"], lim["banks"]) == (2, 2)
    ch02_coalescing.misaligned_rule()
    assert "Count first" in capsys.readouterr().out
    limit = f"{lim['stage GFLOP/s']:,.0f}"
    # negative controls: the aligned bank count (3), the lines in place of the look-ups,
    # and a wrong limit reveal neither the counts nor the limit
    for tag, banks, guess in ((2, 3, 1), (111 / 32, 2, 1), (2, 2, lim["GFLOP/s"])):
        ch02_coalescing.misaligned_rule(tag, banks, guess)
        out = capsys.readouterr().out
        assert not out.startswith("Right") and limit not in out
    ch02_coalescing.misaligned_rule(2, 3, 1)
    out = capsys.readouterr().out
    assert "banks 3" in out and "tag stage" not in out
    ch02_coalescing.misaligned_rule(2, 2, round(lim["stage GFLOP/s"] * 1.01))
    out = capsys.readouterr().out
    assert out.startswith(f"Right: tag stage 2, banks 2, so 2 L1 cycles") and limit in out
    if studies.recording_of(ch02_coalescing.ALIGNMENT_L1) is not None:
        # the counted wavefronts run above the model: the rule is a bound, not an equality
        assert "lower bound on the cycles" in out and "Timed at N = 2047" in out
    from unittest import mock
    with mock.patch.object(ch02_coalescing, "_alignment_rows", lambda **kw: ([], "")):
        ch02_coalescing.misaligned_rule(2, 2, lim["stage GFLOP/s"])
    assert "your limit is a prediction" in capsys.readouterr().out


def test_the_naive_kernels_l1_bytes_are_a_share_of_the_l1s_width(monkeypatch):
    from gemm_kernels.measure import lookup
    # 2 x 2048^3 FLOP at 1,000 GFLOP/s take 17.2 ms; 4.295e9 sectors of 32 bytes in that
    # time are 8 TB/s
    seconds = 2 * 2048 ** 3 / 1e12
    monkeypatch.setattr(ch02_coalescing, "profiled",
                        lambda kernel, params, study=None: {model.SECTORS_LD: 8e12 * seconds / 32})
    monkeypatch.setattr(lookup, "measure_or_lookup",
                        lambda kernel, shape, params: {"gflops": {"median": 1000.0}})
    monkeypatch.setattr(records, "described_device", lambda: H200)
    text = str(ch02_coalescing.naive_l1_bytes())
    assert "at 2048^3 moved 8 TB/s" in text
    assert f"{8e12 / (132 * 1.98e9 * 128):.0%} of the 33.5 TB/s" in text
    # x->row: 33 sectors in 33 lines, one 32-byte sector in each 128-byte line
    assert "MAPPING = x->row" in text and "1 sector of 32 bytes" in text
    assert "25% of the 128 bytes per clock" in text
    # negative control: no count, no number
    monkeypatch.setattr(ch02_coalescing, "profiled", lambda kernel, params, study=None: {})
    assert "not in this recording" in str(ch02_coalescing.naive_l1_bytes())


def test_a_pitch_of_whole_sectors_but_not_whole_lines_keeps_sectors_and_spreads_banks():
    t = {(r["row pitch (floats)"], r["configuration"]): r for r in ch02_coalescing.padded_pitch()}
    for b in (8, 16, 32):
        c = f"coalesced, BLOCK = {b}"
        aligned, odd, padded = t[2048, c], t[2047, c], t[2056, c]
        assert padded["sectors/step"] == aligned["sectors/step"]       # no sector more
        assert float(odd["sectors/step"]) > float(aligned["sectors/step"])
        assert padded["bank words/step"] == odd["bank words/step"] == "2"
    assert t[2048, "coalesced, BLOCK = 8"]["bank words/step"] == "5"   # whole lines: one bank


def test_a_pitch_of_8_mod_32_spreads_only_4_rows_so_a_column_of_32_still_conflicts():
    t = {(r["row pitch (floats)"], r["configuration"]): r for r in ch02_coalescing.padded_pitch()}
    naive = "naive, BLOCK = 32, MAPPING = x->row"
    assert t[2056, naive]["rows spread over the banks"] == 4
    assert t[2047, naive]["rows spread over the banks"] == 32
    # 32 rows of A on 4 banks: 8 words on each, plus B's one broadcast word
    assert t[2056, naive]["bank words/step"] == "9"
    assert t[2047, naive]["bank words/step"] == "2"
    # an odd pitch spreads the banks, but the tag stage then sets a warp's time
    assert t[2047, naive]["slower stage/step"] == t[2047, naive]["tag wavefronts/step"] == "9"


def test_the_kernel_skeleton_hides_the_two_index_lines():
    text = str(ch02_coalescing.kernel_skeleton())
    assert "threadIdx.x / BLOCK" not in text and "threadIdx.x % BLOCK" not in text
    assert "acc += A[row * K + k] * B[k * N + col];" in text
    # declared as the exercise cell declares them, so that the two texts agree
    assert "int row = 0, col = 0;" in text and "row = ...;" in text and "const int row" not in text


def test_naive_off_lines_prints_both_rates_and_the_bank_only_limit():
    text = str(ch02_coalescing.naive_off_lines())
    assert "2048^3" in text and "2047^3" in text and "banks alone" in text
    assert "the line count fails" in text
    above = float(text.split("the timed rate is ")[1].split(" x")[0])
    assert above > 1


def test_the_two_stage_picture_shows_the_slower_stage_at_each_size():
    fig = ch02_coalescing.two_stage_picture()
    titles = [ax.get_title() for ax in fig.axes]
    # 2048: 32 lines in 8 tag wavefronts, 32 words stacked on one bank
    assert "32 lines = 8 wavefronts" in titles[0]
    assert "32 words on the busiest bank = 32 wavefronts; the data stage" in titles[1]
    # 2047: the same 8 tag wavefronts, one word per bank
    assert "32 lines = 8 wavefronts" in titles[2]
    assert "1 word on the busiest bank = 1 wavefront; the tag stage" in titles[3]
    assert [len(ax.patches) for ax in fig.axes] == [32, 32, 32, 32]
    # one scale for both sizes, so the same 8 tag wavefronts look the same height
    assert len({ax.get_ylim() for ax in fig.axes}) == 1


def test_the_bank_panels_alone_show_lines_and_bank_words_equal_at_2048_only():
    fig = ch02_coalescing.two_stage_picture(stages=("data",))
    assert len(fig.axes) == 2 and [len(ax.patches) for ax in fig.axes] == [32, 32]
    top, bottom = (ax.get_title() for ax in fig.axes)
    assert top == "N = K = 2048: 32 words of A in 32 lines; 32 on the busiest bank = 32 L1 cycles"
    # at 2047 the banks' one cycle is not the load's cost: the title points to the look-up
    assert bottom == ("N = K = 2047: 32 words of A in 32 lines; 1 on the busiest bank = 1 cycle "
                      "of the banks\n(the line look-up needs 32 / 4 = 8: see the rule below)")
    assert "L1 cycle" not in bottom
    assert "tag" not in fig._suptitle.get_text()


def test_the_requests_table_writes_every_sectors_per_request_to_one_decimal():
    for r in model.requests_table():
        for c in ("sectors per request, counted", "sectors per request, model"):
            assert len(r[c].split(".")[1]) == 1
    # the counted and the modelled sectors per request agree, row by row
    assert all(r["sectors per request, counted"] == r["sectors per request, model"]
               for r in model.requests_table())


def test_coalescing_gains_far_less_when_the_rows_are_not_a_power_of_two_apart():
    text = str(ch02_coalescing.coalescing_gain())
    gain = {n: float(text.split(f"at {n}^3: ")[1].split("= ")[1].split(" x")[0])
            for n in (2048, 2047)}
    # the chapter's 13x is partly the power-of-two stride (the naive kernel's banks)
    assert gain[2048] > 2 * gain[2047] > 2
    # each ratio is the two printed rates divided
    line = text.split("at 2047^3: ")[1]
    coal, naive = (float(x.replace(",", "")) for x in line.split(" GFLOP/s")[0].split(" / "))
    assert f"{coal / naive:.1f} x" in line
    # the limits behind the gains: 33 bank cycles at 2048, 9 look-up cycles at 2047
    limits = text.split("with the L1 cycles of the rule:\n")[1]
    assert "at 2048^3: naive 33 cycles" in limits and "at 2047^3: naive 9 cycles" in limits
    assert limits.count("coalesced 2 = ") == 2
    # the conversion from cycles to GFLOP/s is printed, and gives the printed limits
    per_cycle = float(text.split("(L1 cycles per warp and step)\n         = ")[1]
                      .split(" GFLOP/s")[0].replace(",", ""))
    assert f"naive 33 cycles = {per_cycle / 33:,.0f} GFLOP/s" in limits
    # each timed gain falls short of its limits' ratio, as the notebook says
    ratio = {n: float(limits.split(f"at {n}^3: ")[1].split(": ")[1].split(" x")[0])
             for n in (2048, 2047)}
    assert all(gain[n] < ratio[n] for n in (2048, 2047))


def test_coalescing_gain_says_so_when_a_rate_is_missing(monkeypatch):
    monkeypatch.setattr(ch02_coalescing, "_alignment_rate", lambda kernel, params, n: None)
    assert "not both timed" in str(ch02_coalescing.coalescing_gain())


def test_prediction_drop_sets_the_lanes_per_line_beside_the_timed_ratio(monkeypatch, recorded_mode):
    # recorded mode: on a GPU the rates would be timed again (and moved by other work)
    monkeypatch.setattr(records, "described_device", lambda: H200)
    text = str(ch02_coalescing.prediction_drop())
    # 16 lanes over 5 lines against 32 over 9
    assert "(16 lanes / 5 lines) / (32 lanes / 9 lines) = 0.90" in text
    timed = float(text.rsplit("= ", 1)[1].rstrip("."))
    assert abs(timed - 0.90) < 0.03


def _pair(row, what):
    """The model's and the counted value of `what` in a row of the alignment table, as
    two strings: the wavefronts of the slower stage (counted: the larger of the two
    stages' counts), the limit they set, or the timed rate's share of that limit."""
    data, tag = (row[c] for c in ch02_coalescing.ALIGNMENT_COUNTED)
    counted = "-" if "-" in (data, tag) else f"{max(float(data), float(tag)):.2f}"
    if what == "wavefronts":
        return [str(row["wavefronts, model"]), counted]
    if what == "limit":
        return [str(row[c]) for c in ch02_coalescing.ALIGNMENT_LIMITS]
    def share(limit):
        return "-" if limit == "-" else f"{row['timed (GFLOP/s)'] / float(limit.replace(',', '')):.0%}"
    lim_m, lim_c = _pair(row, "limit")
    assert share(lim_c) == row["timed / counted limit"]
    return [share(lim_m), row["timed / counted limit"]]


def test_the_alignment_table_holds_one_kernel_at_both_sizes_aligned_first():
    for kernel in ("naive", "coalesced"):
        t = list(ch02_coalescing.alignment_table(kernel))
        assert list(t[0]) == list(ch02_coalescing.ALIGNMENT_COLUMNS)
        # the title names the kernel, the rows only their settings
        assert t and all(r["configuration"].startswith("BLOCK = ") for r in t)
        assert all(("x->row" in r["configuration"]) == (kernel == "naive") for r in t)
        sizes = [r["M = N = K"] for r in t]
        assert sizes == sorted(sizes, reverse=True) and set(sizes) == {2048, 2047}
    # the coalesced rows at 2048 in BLOCK order
    t = list(ch02_coalescing.alignment_table("coalesced"))
    assert [r["configuration"] for r in t[:3]] == [f"BLOCK = {b}" for b in (8, 16, 32)]


def test_the_alignment_table_sets_each_rate_against_the_limit_of_both_counts(monkeypatch):
    monkeypatch.setattr(ch02_coalescing, "_alignment_rate", lambda kernel, params, n: 4182.0)
    monkeypatch.setattr(records, "described_device", lambda: H200)
    for kernel in ("naive", "coalesced"):
        for r in ch02_coalescing.alignment_table(kernel):
            modelled, counted = _pair(r, "wavefronts")
            lim_m, lim_c = (float(x.replace(",", "")) for x in
                            _pair(r, "limit"))
            # the full warp's 16,727 GFLOP/s over the slower stage's wavefronts, either count
            assert lim_m == pytest.approx(132 * 1980 * 64 / 1e3 / float(modelled), abs=0.5)
            assert lim_c == pytest.approx(132 * 1980 * 64 / 1e3 / float(counted), abs=0.5)
            share_m, share_c = _pair(r, "share")
            assert share_m == f"{4182.0 / (132 * 1980 * 64 / 1e3 / float(modelled)):.0%}"
            assert share_c == f"{4182.0 / (132 * 1980 * 64 / 1e3 / float(counted)):.0%}"


def test_the_alignment_table_matches_the_model_on_the_lines_and_counts_more_off_them():
    if studies.recording_of(ch02_coalescing.NAIVE_ALIGNMENT_L1) is None:
        return
    for kernel in ("naive", "coalesced"):
        for r in ch02_coalescing.alignment_table(kernel):
            modelled, counted = (float(x) for x in
                                 _pair(r, "wavefronts"))
            if r["M = N = K"] == 2048:       # on the lines the count is the model's
                assert counted == pytest.approx(modelled, abs=0.01)
            else:                            # off them it rises, so the share can only rise
                assert counted >= modelled
                share_m, share_c = (int(x[:-1]) for x in
                                    _pair(r, "share"))
                assert share_m <= share_c <= 100
    # off the lines the naive kernel's slower stage is the tag stage, and its timed rate
    # sits far below what the banks alone would allow (negative control on the banks)
    naive = {r["M = N = K"]: r for r in ch02_coalescing.alignment_table("naive")
             if r["configuration"] == "BLOCK = 32, x->row"}
    assert naive[2047]["slower stage (model)"] == "tag" and naive[2048]["slower stage (model)"] == "data"
    data, tag = ch02_coalescing.ALIGNMENT_COUNTED
    assert float(naive[2048][data]) > float(naive[2048][tag])
    assert float(naive[2047][data]) < float(naive[2047][tag]) < float(naive[2048][data]) / 3
    lim = model.line_limit("naive", {"BLOCK": 32, "MAPPING": "x->row"},
                           shape=(2047,) * 3, steps=32)
    assert naive[2047]["timed (GFLOP/s)"] < lim["bank GFLOP/s"] / 2


def test_the_alignment_table_leaves_a_dash_where_a_launch_was_not_counted(monkeypatch):
    steps = ch02_coalescing._profiled_steps
    monkeypatch.setattr(ch02_coalescing, "_profiled_steps", lambda study, rec: [
        (shape, step, {}, lim, per) for shape, step, m, lim, per in steps(study, rec)])
    for r in ch02_coalescing.alignment_table("coalesced"):
        assert _pair(r, "wavefronts")[1] == "-"
        assert _pair(r, "limit")[1] == "-"
        assert _pair(r, "share")[1] == "-"


def test_stage_rule_fit_is_one_sentence_with_both_ranges_at_2047():
    text = str(ch02_coalescing.stage_rule_fit())
    assert text.count(".") == 1 and text.startswith("No timed rate exceeds its limit")
    (ml, mh), (cl, ch) = (
        [int(x) for x in part.split(" of the")[0].replace("%", "").split(" to ")]
        for part in text.split("run at ")[1].split(" and at "))
    # tighter with the counted wavefronts: the looseness lies in the model's counts
    assert ml < cl <= ch <= 100 and ml <= mh
    # the same ranges as the two tables' last column at 2047
    shares = [_pair(r, "share")
              for k in ("naive", "coalesced") for r in ch02_coalescing.alignment_table(k)
              if r["M = N = K"] == 2047]
    assert (ml, mh) == (min(int(a[:-1]) for a, _ in shares), max(int(a[:-1]) for a, _ in shares))
    assert (cl, ch) == (min(int(b[:-1]) for _, b in shares), max(int(b[:-1]) for _, b in shares))


def test_stage_rule_fit_counts_a_rate_above_its_limit(monkeypatch):
    # negative control: a rate far above every limit is reported, not hidden
    monkeypatch.setattr(ch02_coalescing, "_alignment_rate", lambda kernel, params, n: 1e6)
    assert "timed rates exceed a limit" in str(ch02_coalescing.stage_rule_fit())


def test_the_line_boxes_down_a_column_share_their_edges_inside_the_frame():
    from matplotlib.patches import Rectangle
    fig = ch02_coalescing.sector_picture("naive", {"BLOCK": 32, "MAPPING": "x->row"})
    a_ax = fig.axes[1]
    boxes = sorted((p.get_y(), p.get_y() + p.get_height()) for p in a_ax.patches
                   if isinstance(p, Rectangle) and not p.get_fill())
    assert len(boxes) == 32          # one 128-byte line per row of A
    lo, hi = sorted(a_ax.get_ylim())
    # one dashed edge between two rows, not two: each box ends where the next begins
    assert all(b[1] == pytest.approx(n[0]) for b, n in zip(boxes, boxes[1:]))
    # the outer edges stay inside the frame, where the panel's spine cannot hide them
    assert lo < boxes[0][0] and boxes[-1][1] < hi


def test_ncu_command_without_metrics_asks_for_every_counter_the_study_recorded():
    text = str(ch02_coalescing.ncu_command(ch02_coalescing.CACHES_STUDY, None))
    assert "--target ch02_caches" in text and "dram__bytes_read.sum" in text
    # a recorded pattern reaches ncu in its regex: form, quoted for the shell
    assert "'regex:^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\\.ratio$'" in text
    assert "re:^" not in text.replace("regex:^", "")
    # negative control: the default keeps the L1 table's own short list
    assert "issue_stalled" not in str(ch02_coalescing.ncu_command())


def test_the_b_row_picture_shows_a_misaligned_row_straddling_two_lines():
    fig = ch02_coalescing.b_row_picture(16, 2047, ks=(0, 8))
    titles = [ax.get_title() for ax in fig.axes]
    assert "k = 0: row k of B starts 0 floats into a line" in titles[0]
    assert "16 floats touch 2 sectors in 1 line" in titles[0]
    assert "k = 8: row k of B starts 24 floats into a line" in titles[1]
    assert "16 floats touch 2 sectors in 2 lines" in titles[1]
    # one dashed box per line touched: 1 at k = 0, 2 at k = 8
    assert [len(ax.patches) for ax in fig.axes] == [1, 2]


def test_the_counting_guide_gives_one_command_the_divisor_and_the_counts_per_table():
    text = str(ch02_coalescing.counting_guide())
    assert text.count("ncu --target-processes") == len(ch02_coalescing.CHECKS)
    for _, study, _ in ch02_coalescing.CHECKS:
        assert f"--target {study}" in text
    # 2048^3 / 32 lanes, exact; 2047^3 is not a multiple of 32
    assert f"{2048 ** 3 // 32:,} at 2048^3 (32 lanes)" in text
    assert "about 268.04 million at 2047^3" in text
    # the L1 table's counts: the data stage's wavefronts equal the lines at 2048
    l1 = text.split("The naive kernel's")[0]
    for n in ("9.00", "33.00", "5.00", "3.00", "2.00"):
        assert f"data stage {n}" in l1
    assert "tag stage" not in l1 and "tag stage 9.85" in text


def test_appendix_b_commands_name_each_run_once():
    text = str(ch02_coalescing.appendix_b_commands())
    assert text.count("ncu --target-processes") == 3
    for what, study in ch02_coalescing.APPENDIX_B_RUNS:
        assert f"{what} of Appendix B:" in text and f"--target {study}" in text


def test_the_alignment_tables_split_the_columns_in_two_halves_with_the_same_rows():
    full = list(ch02_coalescing.alignment_table("naive"))
    halves = ch02_coalescing.alignment_tables("naive")
    wave, lim = halves.items
    assert list(wave[0]) == list(ch02_coalescing.ALIGNMENT_COLUMNS[:6])
    assert list(lim[0])[:2] == ["configuration", "M = N = K"]
    # every column of the full table is in one half, and the rows are the same
    assert set(wave[0]) | set(lim[0]) == set(full[0])
    assert [{**w, **l} for w, l in zip(wave, lim)] == full
    assert halves._repr_html_().count("<table>") == 2
