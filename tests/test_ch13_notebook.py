"""Chapter 13's notebook logic (gemm_kernels.notebook.ch13_wmma), without a GPU: the bank
model of the fragment loads, the warp maps, the notes' reinterpretation, the numerics,
and that every table reads one recording (rows of one run where it compares them)."""
import pytest

from gemm_kernels.notebook import ch13_wmma as ch13


def test_ldmatrix_addresses_are_8_rows_of_16_bytes_per_matrix():
    addrs = ch13.ldmatrix_addresses(row_bytes=80)
    assert len(addrs) == 32
    assert addrs[:8] == [80 * r for r in range(8)]            # matrix 0: rows 0-7
    assert addrs[8] == 8 * 80 and addrs[16] == 16             # matrix 1: rows 8-; 2: +16 B


@pytest.mark.parametrize("row_halves,wavefronts", [(32, 16), (40, 4), (128, 32), (136, 4)])
def test_the_bank_model_prices_a_fragment_load(row_halves, wavefronts):
    """64-byte rows: 4 of a matrix's 8 rows on the same banks; 256-byte rows: all 8;
    16 bytes of padding: none (4 wavefronts, one per 8 x 8 matrix)."""
    assert ch13.ldmatrix_analysis(row_halves).wavefronts == wavefronts


def test_the_warp_maps():
    mine, notes = ch13.warp_map(False), ch13.warp_map(True)
    assert all(len(set(row)) == 1 for row in mine)            # one tile per warp
    assert len({row[0] for row in mine}) == 4                 # four different tiles
    assert all(len(set(row)) == 4 for row in notes)           # a warp spans four tiles
    assert len({tuple(row) for row in notes}) == 1            # and every warp the same


def test_swapped_wm_and_wn_write_tiles_twice_and_leave_columns_unwritten():
    """The solution's index gives each tile of two 2 x 4 blocks one warp; with WM and WN
    swapped, the first block's lower warps write the second block's rows and the right
    half of the columns is left unwritten."""
    import matplotlib
    matplotlib.use("Agg")
    right, swapped = ch13.warp_tile_writers(False), ch13.warp_tile_writers(True)
    assert len(right) == 16 and all(len(w) == 1 for w in right.values())
    assert right[1, 3] == ["b0 w7"] and right[2, 0] == ["b1 w0"]
    assert all(swapped[r, c] == [] for r in range(4) for c in (2, 3))
    assert swapped[2, 0] == ["b0 w4", "b1 w0"] and swapped[1, 1] == ["b0 w3"]
    ax = ch13.plot_swapped_warps()
    assert "unwritten" in [t.get_text() for t in ax[1].texts]
    assert "unwritten" not in [t.get_text() for t in ax[0].texts]


def test_reinterpreting_fp32_as_fp16_wrongs_every_element():
    t = ch13.reinterpret_demo()
    assert "1,024 of 1,024 elements of C wrong" in t.title
    assert all(float(r["the FP32 value"]) != r["what a half* reads there"] for r in t)
    # the FP32 column keeps two decimals so it lines up
    assert all(len(r["the FP32 value"].split(".")[1]) == 2 for r in t)
    # the column that says where each half's bytes come from: two halves per float
    assert [r["its bytes come from"] for r in t][:2] == [
        "the low half of float A[0][0]", "the high half of float A[0][0]"]


def test_rounding_the_inputs_costs_more_than_the_accumulation():
    rounding, accumulation, bound = (r["value"] for r in ch13.numerics(128))
    assert rounding > 50 * accumulation
    assert accumulation < bound < rounding


def test_the_notes_bugs_are_edits_of_the_chapter_kernel():
    for bug in ch13.NOTES_BUGS:
        k = ch13.notes_kernel(bug)
        assert k.source_text() != ch13.get(ch13.NAIVE).source_text()


def test_the_gain_table_compares_only_rows_of_one_run(monkeypatch):
    """cuBLAS FP32 and FP16 rows of different runs are not set side by side."""
    rows = {("cublas", 4096): {"gflops": {"median": 50e3}, "run": "a"},
            ("cublas_hgemm", 4096): {"gflops": {"median": 700e3}, "run": "b"},
            ("cublas", 8192): {"gflops": {"median": 50e3}, "run": "c"},
            ("cublas_hgemm", 8192): {"gflops": {"median": 750e3}, "run": "c"}}
    monkeypatch.setattr(ch13, "_row", lambda k, n, params=None, rec=None: rows.get((k, n)))
    rec = type("Rec", (), {"label": "a recording", "device": {"name": "a GPU"}})()
    t = ch13.tensor_core_gain(rec=rec)
    assert [r["size"] for r in t] == ["8192³"] and t[0]["FP16 / FP32"] == 15


def test_the_tables_read_the_chapter_recording():
    rec = ch13.recording()
    if rec is None:
        pytest.skip("no recording holds chapter 13's rows")
    assert rec.find(ch13.TILED)
    rates = ch13.rates_table(rec=rec)
    assert rates and all(0 < r["% of cuBLAS FP16"] < 100 for r in rates)
    sweep = ch13.sweep_table(rec=rec)
    assert [r["TFLOP/s"] for r in sweep[:8]] == sorted((r["TFLOP/s"] for r in sweep[:8]),
                                                      reverse=True)


def test_the_notes_diff_shows_the_three_bugs_and_the_plain_store():
    diff = str(ch13.notes_diff())
    added = [l for l in diff.splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert any("reinterpret_cast<const half*>" in l for l in added)
    assert any("threadIdx.y / 8" in l for l in added)
    assert any("col_major" in l for l in added)
    # the early return without the chapter's comment (the tutorial's lanes do not leave
    # together), and the tutorial's epilogue: C = A B, a plain store (two lines)
    assert len(added) == 9 and "+++ the tutorial kernel" in diff


def test_the_tutorial_kernel_is_shown_whole_without_the_exercises_epilogue():
    text = str(ch13.tutorial_kernel())
    assert text.startswith("template <int WM, int WN>") and text.rstrip().endswith("}")
    assert "threadIdx.y / 8" in text and "col_major" in text and "A32" in text
    assert "beta" not in text.split("{", 1)[1] and "num_elements" not in text


def test_the_profile_is_read_from_the_recording_that_holds_it():
    prof = ch13.study_recording()
    if prof is None:
        pytest.skip("no recording holds chapter 13's profile")
    assert all(m for _, m in ch13.profile_rows())
    assert ch13._gpu(prof) in str(ch13.profile_table().title)
    if prof is not ch13.recording():
        assert prof.label in str(ch13.which_recording())


def test_the_kernels_are_set_against_the_fp16_peak():
    import re
    from gemm_kernels.notebook.ch13_wmma import FP16_FLOP_PER_CLOCK_SM
    rec = ch13.recording()
    if rec is None:
        pytest.skip("no recording holds chapter 13's rows")
    text = str(ch13.against_peak(rec=rec))
    d = rec.device
    peak = FP16_FLOP_PER_CLOCK_SM[d["compute_capability"]] * d["sm_count"] * d["sm_clock_mhz"] / 1e6
    assert f"= {peak:,.0f} TFLOP/s" in text, text
    shares = re.findall(r"([\d,]+) TFLOP/s \((\d+)%", text)
    assert len(shares) == 3, text
    for rate, pct in shares:
        assert abs(100 * float(rate.replace(",", "")) / peak - int(pct)) <= 1, text


def test_the_solutions_usual_mistakes_each_fail_with_a_hint_and_the_permuted_map_passes():
    table = ch13.mistakes(gpu=False)
    assert len(table) == len(ch13.MISTAKES)
    assert all(r["correct"] == "FAIL" and r["its hint"] not in ("", "-") for r in table)
    # every mistake fails at the same step, so the step is said once, in the title
    assert table.columns == ["mistake", "what shows it"] and "step 'correct'" in table.title
    assert all(r["failed at"] == "correct" for r in table)
    assert all(len(r["what shows it"]) < 90 for r in table), [r["what shows it"] for r in table]
    assert ch13.mistake_hints(table).columns == ["mistake", "what the grader says", "its hint"]
    stride = next(r for r in table if "leading dimension" in r["mistake"])
    assert "leading dimension" in stride["its hint"]
    assert ch13.permuted_warps(gpu=False)[0]["correct"] == "pass"


def test_the_verdicts_before_the_exercise_do_not_name_the_fix():
    names = " ".join(ch13.BUG_NAMES.values())
    assert "col_major" not in names and "row_major" not in names and "/ 8" not in names


def test_the_block_tile_picture_marks_one_warps_fragments_of_a_and_b():
    import matplotlib
    matplotlib.use("Agg")
    ax = ch13.plot_block_tile()
    p = ch13.get(ch13.TILED).resolve({})
    fm, fn = p["BM"] // p["WARPS_M"] // 16, p["BN"] * p["WARPS_M"] // 8 // 16
    orange = [r for r in ax.patches if r.get_facecolor()[:3] == matplotlib.colors.to_rgb("gold")]
    assert len(orange) == fm + fn


def test_the_naive_kernels_loads_are_four_narrow_ones_per_fragment():
    """Section 4: the SASS's LDG.E count is 8 per step (4 per fragment of A and of B),
    the steps read from the HMMA count (2 per mma_sync)."""
    import re
    text = str(ch13.naive_loads())
    hmma, steps, narrow = map(int, re.search(r"(\d+) HMMA, that is (\d+) steps.*?(\d+) LDG\.E =",
                                             text, re.S).groups())
    assert hmma == 2 * steps and narrow == 8 * steps
    assert text.count("LDG.E ") >= 8 and text.count("HMMA.") >= 2


def test_the_bk16_check_asks_until_right_and_agrees_with_the_bank_model():
    """Section 11's question: A's wavefronts at BK = 16 from the bank model, and padding
    gains less there because A's unpadded rows conflict less than at BK = 32."""
    assert "write your predictions" in ch13.check_bk16_prediction(
        {"A, PAD 0": 8, "A, PAD 8": 4, "padding gains": None})
    assert ch13.ldmatrix_analysis(16).wavefronts < ch13.ldmatrix_analysis(32).wavefronts
    right = ch13.check_bk16_prediction({"A, PAD 0": ch13.ldmatrix_analysis(16).wavefronts,
                                        "A, PAD 8": ch13.ldmatrix_analysis(24).wavefronts,
                                        "padding gains": "Less"})
    assert right.endswith("3 of 3 right.") and "gain less" in right
    wrong = ch13.check_bk16_prediction({"A, PAD 0": 16, "A, PAD 8": 4,
                                        "padding gains": "more"})
    assert "1 of 3 right" in wrong and "A, PAD 0: not yet" in wrong and "?" in wrong
    assert "8 wavefronts" not in wrong and "A, PAD 8" not in wrong


def test_padding_by_depth_reads_the_pairs_of_the_sweep():
    """The measured answer to section 11's question: each depth's pair is the sweep's
    PAD 0 and PAD 8 rows, and the default depth's pair is padding_effect's."""
    import re
    text = str(ch13.padding_by_depth())
    if "not in the recording" in text:
        pytest.skip("the sweep is not recorded")
    pairs = re.findall(r"BK = (\d+): ([\d,.]+) TFLOP/s without padding, ([\d,.]+) with it, "
                       r"x([\d.]+)", text)
    assert [bk for bk, *_ in pairs] == ["16", "32"]
    rates = {int(bk): (float(a), float(b), float(x)) for bk, a, b, x in pairs}
    for a, b, x in rates.values():
        assert abs(b / a - x) < 0.06      # one decimal, of the rates as printed
    # one precision for the same pair in both places
    assert f"{rates[32][0]:,.0f} TFLOP/s without padding" in str(ch13.padding_effect())
    assert f"x{rates[32][2]:.1f} " in str(ch13.padding_effect())
    # the model's prediction holds: padding gains less at BK = 16
    assert rates[16][2] < rates[32][2]


def test_the_ldsm_prediction_check_waits_for_four_numbers_and_asks_until_right():
    assert "write your four predictions" in ch13.check_ldsm_prediction(
        {"A, PAD 0": 16, "B, PAD 0": None, "A, PAD 8": 4, "B, PAD 8": 4})
    right = ch13.check_ldsm_prediction({"A, PAD 0": 16, "B, PAD 0": 32, "A, PAD 8": 4,
                                        "B, PAD 8": 4})
    assert right.endswith("4 of 4 right.") and "(you said" not in right
    wrong = ch13.check_ldsm_prediction({"A, PAD 0": 8, "B, PAD 0": 32, "A, PAD 8": 4,
                                        "B, PAD 8": 4})
    # a wrong guess is answered with a question, never with the model's number
    assert "3 of 4 right" in wrong and "A, PAD 0: not yet" in wrong
    assert "16 wavefronts" not in wrong and "?" in wrong
    assert "B, PAD 0" not in wrong  # the right ones are not repeated before all are right


def test_the_ladder_summary_names_the_largest_size_and_the_epilogue_is_not_asserted():
    text = str(ch13.ladder_summary())
    if "not all in the recording" in text:
        pytest.skip("no recording")
    assert "At 8192³ it runs at" in text
    assert "epilogue" not in str(ch13.profile_waits()) + str(ch13.pace_summary())


def test_global_bytes_per_hmma_counted_from_the_tiles():
    naive, tiled = ch13.global_bytes_per_hmma()
    assert naive["bytes per HMMA"] == 512                     # 2 fragments of 512 B, 2 HMMA
    assert tiled["bytes per HMMA"] == 64 and tiled["x fewer"] == "8x"   # 128 x 128 x 32
    assert ch13.global_bytes_per_hmma({"BM": 64})[1]["bytes per HMMA"] == 96


def test_the_naive_kernel_is_set_against_the_fp32_capstone_and_the_tiled_one():
    text = str(ch13.naive_against_capstone())
    assert "chapter 09's FP32 capstone" in text and "x the rate of" in text
    assert "the naive kernel's rate" in str(ch13.tiled_against_naive())


def test_the_global_loads_are_counted_by_width():
    """Section 6: the tiled kernel's 16-byte tile loads and its epilogue's 4-byte reads of
    C are told apart, widest first."""
    assert ch13.ldg_by_width(["LDG.E.128.CONSTANT", "LDG.E", "LDG.E", "LDS", "LDG.E.64"]) \
        == "1 x 16 B, 1 x 8 B, 2 x 4 B"
    assert ch13.ldg_by_width(["LDS.128"]) == "0"
    row = ch13.sass_counts(ch13.TILED)[0]
    assert row[ch13.LDG_BY_WIDTH].startswith("8 x 16 B")


def test_a_warps_pace_accounts_for_the_issue_share():
    """Warps per scheduler over the cycles between one warp's instructions is the share of
    cycles with an issue (Little's law), which the summary states for the padded kernel."""
    rows = [m for _, m in ch13.profile_rows() if m]
    if not rows:
        pytest.skip("the profile is not recorded")
    for m in rows:
        warps, cycles, issue = ch13.warp_pace(m)
        assert abs(100 * warps / cycles - issue) <= 0.1 * issue, (warps, cycles, issue)
    table = ch13.pace_table()
    assert all(r[c] for r in table for c in ch13.PACE)
    assert "warps to switch between" in str(ch13.pace_summary())
    assert "store wavefronts" in str(ch13.padding_store_cost())


def test_the_bank_picture_draws_a_and_b_without_and_with_padding():
    import matplotlib
    matplotlib.use("Agg")
    ax = ch13.plot_ldmatrix_banks()
    titles = [a.get_title() for a in ax]
    assert [t[0] for t in titles] == ["A", "A", "B", "B"]
    assert titles[2].endswith("32 wavefronts") and titles[3].endswith("4 wavefronts")


def test_the_sweep_shows_whole_percents():
    table = ch13.sweep_table()
    if not table:
        pytest.skip("no recorded sweep")
    assert all(isinstance(r["% of cuBLAS FP16"], int) for r in table)


def test_off_power_of_two_sets_each_kernel_beside_its_own_cublas(monkeypatch):
    """The 4112³ study's rows (stubbed: a GPU records them) beside the chapter's 4096³
    rows, each rate as a share of the cuBLAS of its own precision."""
    from gemm_kernels.measure import records, studies
    rec = ch13.recording()
    if rec is None:
        pytest.skip("no recording")
    study = studies.get(ch13.SIZE_STUDY)
    assert [s.kernel for s in study.steps] == [ch13.NAIVE, ch13.TILED, "capstone"]
    assert [tuple(s) for s in study.shapes] == [(4112, 4112, 4112)]   # never 4096: see studies
    monkeypatch.setattr(studies, "recording_of", lambda *a, **k: rec)
    fake = [(s, {"gflops": {"median": 1000.0 * (i + 1)}, "run": "r", "time": "2026-01-01T00:00",
                 "reference": {"gflops": {"median": 4000.0}}})
            for i, s in enumerate(study.steps)]
    monkeypatch.setattr(studies, "results", lambda *a, **k: fake)
    t = ch13.off_power_of_two()
    assert [r["compared with"] for r in t] == ["cuBLAS FP16", "cuBLAS FP16", "cuBLAS FP32"]
    assert [r["4112³ % of its cuBLAS"] for r in t] == ["25%", "50%", "75%"]
    assert [r["4112³ TFLOP/s"] for r in t] == ["1", "2", "3"]
    naive = ch13._row(ch13.NAIVE, 4096, rec=rec)
    if naive:
        assert t[0]["4096³ TFLOP/s"] == ch13.fmt_number(ch13._tflops(naive))
    some = ch13.off_power_of_two(kernels=(ch13.NAIVE, "capstone"))
    assert [r["kernel"] for r in some] == [t[0]["kernel"], t[2]["kernel"]]
    assert [r["kernel"] for r in ch13.off_power_of_two(kernels=(ch13.TILED,))] == [t[1]["kernel"]]
    monkeypatch.setattr(studies, "results", lambda *a, **k: [(study.steps[0], None)])
    assert "Not recorded yet" in ch13.off_power_of_two().title


def test_the_tiled_kernels_waves_at_4112_leave_a_fifth_round_nearly_empty():
    """Section 6's dip at 4112³: 33 x 33 blocks of 128 x 128 need a fifth round of the
    GPU's slots, where 4096³'s 32 x 32 fill four (chapter 09's waves, for this kernel)."""
    from gemm_kernels.notebook import capstone_pictures as cp
    t = cp.waves(kernel=ch13.TILED, sizes=(4096, 4112))
    assert t.title.startswith(f"{ch13.TILED} 128 x 128 tiles")
    on, off = list(t)
    assert on["blocks (tiles)"] == "1,024" and off["blocks (tiles)"] == "1,089"
    if on.get("waves") is not None and on["slots"] == "264":     # 132 SMs, 2 blocks each
        assert (on["waves"], off["waves"], off["blocks in the last wave"]) == (4, 5, "33")
