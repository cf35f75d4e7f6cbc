"""Chapter 14's notebook module (gemm_kernels.notebook.ch14_mma), without a GPU: the
m16n8k16 fragment map and ldmatrix's layout, the swizzle model against the kernel's
text, the bank model's predictions, the main loop's SASS, and the tables when the
recording lacks the chapter's rows."""
import re

import pytest

from gemm_kernels.core.kernels import get
from gemm_kernels.notebook import ch14_mma as ch14


def test_the_fragment_map_covers_every_element_once():
    m = ch14.fragment_map()
    for name, (rows, cols, per_lane) in {"A": (16, 16, 8), "B": (16, 8, 4),
                                         "C": (16, 8, 4)}.items():
        assert set(m[name]) == {(r, c) for r in range(rows) for c in range(cols)}
        assert len(set(m[name].values())) == rows * cols           # no (lane, i) twice
        assert {i for _, i in m[name].values()} == set(range(per_lane))


def test_the_accumulator_layout_is_the_documented_one():
    """Lane l holds rows l / 4 and l / 4 + 8, columns 2 (l % 4) and 2 (l % 4) + 1."""
    m = ch14.fragment_map()["C"]
    for lane in (0, 5, 31):
        held = sorted(rc for rc, (l, _) in m.items() if l == lane)
        g, t = lane // 4, lane % 4
        assert held == sorted((r, c) for r in (g, g + 8) for c in (2 * t, 2 * t + 1))


def test_ldmatrix_x4_gives_exactly_the_a_fragment_of_mma():
    assert ch14.a_from_ldmatrix() == ch14.fragment_map()["A"]


def test_ldmatrix_trans_gives_the_b_fragment_of_mma():
    """Two 8 x 8 matrices of an N-major B (rows of k: k 0-7 and 8-15), transposed by .trans:
    register i of lane l holds B's elements b(2i), b(2i+1) of the fragment."""
    got = {(8 * m + k, n): (lane, 2 * m + h)
           for (m, k, n), (lane, h) in ch14.ldmatrix_received(trans=True).items() if m < 2}
    assert got == ch14.fragment_map()["B"]


def test_the_swizzle_model_is_the_kernels_function():
    text = (get("mma_sync").path).read_text()
    assert "else if constexpr (CHUNKS == 4) return c ^ ((r >> 1) & 3);" in text
    assert "else return c ^ (r & 7);" in text
    assert ch14.chunk_at(2, 0, 4) == 1 and ch14.chunk_at(3, 5, 16) == 6


@pytest.mark.parametrize("chunks", [4, 8, 16])
def test_the_swizzle_permutes_each_row_and_repeats_every_8_rows(chunks):
    for r in range(16):
        assert sorted(ch14.chunk_at(r, c, chunks) for c in range(chunks)) == list(range(chunks))
        assert [ch14.chunk_at(r, c, chunks) for c in range(chunks)] == \
               [ch14.chunk_at(r + 8, c, chunks) for c in range(chunks)]


@pytest.mark.parametrize("row_bytes,plain", [(64, 16), (256, 32)])
def test_plain_rows_conflict_and_swizzled_rows_do_not(row_bytes, plain):
    assert ch14.ldmatrix_analysis(row_bytes, False).wavefronts == plain > 4
    # every ldmatrix of the kernel: each chunk column, rows 16 apart (A's i, B's kk)
    for row0 in (0, 16, 32):
        for chunk0 in range(0, row_bytes // 16, 2):
            assert ch14.ldmatrix_analysis(row_bytes, True, row0, chunk0).wavefronts == 4


def test_the_bank_table_predicts_24_then_4_per_ldmatrix():
    t = ch14.bank_table(rec=type("R", (), {"label": "none", "find": lambda *a: []})())
    assert [r["predicted per ldmatrix"] for r in t] == [24, 4]


def test_the_kernels_wait_leaves_stages_minus_2_groups_in_flight():
    assert ch14.kernel_wait().replace(" ", "") == "STAGES-2"


def test_the_main_loop_is_the_hmma_loop():
    t = ch14.loop_table()
    default, big = t
    # 32 mma of 16x8x16 per 16-step, two 16-steps per BK = 32; 8 ldmatrix per 16-step
    assert default["HMMA"] == 64 and default["LDSM"] == 16
    assert big["HMMA"] == 128 and big["LDSM"] == 32
    # both copy paths are in the loop: twice a thread's chunks of a tile
    assert default["LDGSTS"] == 2 * default["chunks a thread copies per tile"]


def test_a_warp_issues_the_short_copy_path_only(recorded_mode, monkeypatch):
    """The issued column is the profile's instructions over its HMMA, times one pass's
    HMMA: at 4096^3 (no ragged tile) more than the HMMA, ldmatrix and a thread's chunks of
    one pass, less than the whole body that holds both copy paths; and said to be missing
    where no profile is recorded."""
    t = ch14.loop_table()
    rec = ch14.study_recording()
    if rec is None:
        pytest.skip("no recording of the chapter's profile here")
    for row in t:
        body = sum(row[c] for c in ("HMMA", "LDSM", "LDGSTS", "waits and barrier", "the rest"))
        issued = row["issued per pass (profile)"]
        assert row["HMMA"] + row["LDSM"] + row["chunks a thread copies per tile"] < issued < body
    monkeypatch.setattr(ch14, "study_recording", lambda: None)
    assert {r["issued per pass (profile)"] for r in ch14.loop_table()} == {"not profiled"}


def test_a_64_by_64_warp_region_loads_the_fewest_bytes_per_mma():
    t = ch14.warp_regions()
    assert [r["shared bytes per mma"] for r in t] == [128, 192, 256]


def test_the_t4_build_uses_two_m16n8k8_and_no_cp_async():
    sm75, sm90 = ch14.t4_table()
    assert sm75["HMMA shapes"] == "HMMA.1688.F32" and sm75["LDGSTS (cp.async)"] == 0
    assert sm90["HMMA shapes"] == "HMMA.16816.F32" and sm75["HMMA"] == 2 * sm90["HMMA"]


def test_missing_rows_are_said_in_words():
    empty = type("R", (), {"label": "an empty recording", "find": lambda *a, **k: [],
                           "results": []})()
    assert "not" in str(ch14.ladder_summary(rec=empty))
    assert "not recorded" in ch14.rates_table(rec=empty).title
    assert "not recorded" in str(ch14.swizzle_effect(rec=empty))


def test_before_the_exercise_the_pictures_show_the_plain_rows_only():
    import matplotlib
    matplotlib.use("Agg")
    axes = ch14.plot_bank_model(swizzled=False)
    assert len(axes) == 1 and "plain" in axes[0].get_title()
    axes = ch14.plot_swizzle(swizzled=False)
    titles = [a.get_title() for row in axes for a in row]
    assert len(titles) == 2 and not any("swizzled" in t for t in titles)
    assert any("swizzled" in a.get_title() for row in ch14.plot_swizzle() for a in row)


@pytest.mark.parametrize("expression", ["c ^ ((r >> (4 / CHUNKS)) & (CHUNKS - 1) & 7)",
                                        "CHUNKS == 4 ? c ^ ((r >> 1) & 3) : c ^ (r & 7)"])
def test_the_solutions_slots_are_eight_different_in_each_tile(expression):
    t = ch14.slot_table(expression)
    for tile in ("A", "B"):
        assert sorted(row[f"{tile}: slot in its line"] for row in t) == list(range(8))


def test_the_usual_mistakes_all_fail_step_2_with_a_hint():
    t = ch14.common_mistakes()
    assert len(t) == 3 and all(row["step 2 says"] != "pass" and row["hint"] for row in t)


def test_the_profiler_times_are_said_to_run_at_locked_clocks():
    text = str(ch14.profiler_clocks())
    if "not recorded" in text:
        pytest.skip("the profile is not recorded")
    pairs = re.findall(r"([\d.]+) ms profiled, ([\d.]+) ms at the timed rate", text)
    assert "held the SM clock" in text and pairs
    assert all(float(p) > float(t) for p, t in pairs), text


def test_what_is_left_puts_cublas_below_the_tensor_peak():
    text = str(ch14.what_is_left())
    if "not known" in text:
        pytest.skip("no recording of an sm_90 GPU with the chapter's rows")
    shares = [int(x) for x in re.findall(r"\((\d+)% of it\)|\((\d+)%\)", text)[0] if x]
    assert "peak" in text and all(0 < s < 100 for s in shares)
    empty = type("R", (), {"label": "an empty recording", "find": lambda *a, **k: [],
                           "results": [], "device": {}})()
    assert "not known" in str(ch14.what_is_left(rec=empty))


def test_which_recording_names_the_study_when_it_is_another_gpus():
    rec, prof = ch14.recording(), ch14.study_recording()
    if rec is None or prof is None or prof is rec:
        pytest.skip("the study and the rates are not in two recordings here")
    text = str(ch14.which_recording())
    assert rec.label in text and prof.label in text


def test_profiler_clocks_names_the_gpu_it_compares_on():
    prof = ch14.study_recording()
    text = str(ch14.profiler_clocks())
    if prof is None or "not recorded" in text:
        pytest.skip("the study is not recorded")
    assert prof.device["name"] in text


def test_the_t4_table_says_it_counts_the_whole_kernel():
    assert "whole kernel" in ch14.t4_table().title


def test_a_students_swizzle_is_priced_by_the_same_model():
    xor = "CHUNKS == 4 ? c ^ ((r >> 1) & 3) : c ^ (r & 7)"
    rot = "CHUNKS == 4 ? (c + ((r >> 1) & 3)) % 4 : (c + (r & 7)) % CHUNKS"
    for e in (xor, rot):
        assert ch14.ldmatrix_analysis(64, True, expression=e).wavefronts == 4
        assert ch14.ldmatrix_analysis(256, True, expression=e).wavefronts == 4
    assert ch14.ldmatrix_analysis(64, True, expression="c ^ (r & 3)").wavefronts == 8
    assert ch14.placer(None) is ch14.chunk_at


def test_your_swizzle_draws_the_last_passing_submission(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    from gemm_kernels.exercises import magic
    from gemm_kernels.exercises.grader import Report
    monkeypatch.setattr(magic, "_LAST", {})
    monkeypatch.setattr(magic, "_SOURCES", {})
    assert "has not been run yet" in str(ch14.your_swizzle())
    src = ("template <int CHUNKS, bool SWIZZLE>\n__device__ __forceinline__ int chunk_at(int r, "
           "int c) {\n    int chunk = c;\n    chunk = c ^ (r & 3);\n    if constexpr "
           "(!SWIZZLE) return c;\n    return chunk;\n}\n")
    magic._LAST["14_swizzle"], magic._SOURCES["14_swizzle"] = Report("14_swizzle"), src
    text = str(ch14.your_swizzle())
    assert "chunk = c ^ (r & 3)" in text and "8 wavefronts per A load" in text


def test_hmma_run_shows_back_to_back_independent_hmma():
    text = str(ch14.hmma_run())
    assert text.count("HMMA.16816.F32") >= 4
    assert "64 HMMA in one pass of the loop; 0 of them read" in text
    # ptxas's stall count, decoded from the encoding: 6 cycles between two HMMA
    assert "stall 6" in text and "of the 58 HMMA that another HMMA follows: 58 of them 6 cycles" in text


def test_control_bits_are_decoded_where_the_listing_says_so():
    """The decoding checked against what nvdisasm prints itself: an operand-reuse flag is
    set exactly where the listing writes `.reuse`."""
    from gemm_kernels.core import analysis, compiler
    sass = compiler.sass(get("mma_sync"), get("mma_sync").resolve({}), "sm_90", encoding=True)
    bits = compiler.control_bits(sass)
    ins = analysis.instructions(sass)
    assert len(bits) == len(ins) > 100
    assert all((bits[a]["reuse"] != 0) == (".reuse" in t) for a, _, t in ins)
    assert all(0 <= b["stall"] <= 15 and b["write"] <= 7 for b in bits.values())


def test_pipe_ceiling_uses_the_profilers_own_clock():
    text = str(ch14.pipe_ceiling())
    if "not all recorded" in text:
        pytest.skip("the study is not recorded here")
    # the profile's own GPU and clock, never the top clock of the rates' GPU (1.98 GHz)
    assert ch14.study_recording().device["name"] in text
    assert "GHz" in text and "1.98" not in text
    assert "of that peak" in text
    # the busy cycles per HMMA against the peak's, and the two losses multiplied
    assert "6.0 cycles each" in text and "in 4." in text and "two losses multiply" in text


def test_the_chapters_swizzle_is_cutes():
    t = ch14.cute_swizzles()
    assert [r["CuTe, on byte addresses"] for r in t] == [
        "Swizzle<2, 4, 3>", "Swizzle<3, 4, 3>", "Swizzle<3, 4, 4>", "Swizzle<3, 4, 5>"]
    assert all(r["same place, all chunks of 64 rows"] == "yes" for r in t)
    assert ch14.cute_swizzle(0b1_0000_0000, 3, 4, 4) == 0b1_0001_0000


def test_other_answers_pass_and_mistakes_do_not():
    assert all(r["step 2 says"] == "pass" for r in ch14.other_answers())
    assert all(r["step 2 says"] != "pass" for r in ch14.common_mistakes())


def test_the_rates_table_shows_each_timed_run_was_right():
    """Every timed row carries the checker's verdict on its own output, below 1."""
    t = ch14.rates_table()
    if not t:
        pytest.skip("the chapter's timings are not recorded")
    assert ch14.ERROR_COLUMN in t.columns
    assert all(0 <= row[ch14.ERROR_COLUMN] < 1 for row in t)


def test_shares_are_written_with_one_decimal():
    from gemm_kernels.core.table import Table
    t = ch14.one_decimal(Table([{"x": 1.0, "% of cuBLAS FP16": 60.0}], ["x", "% of cuBLAS FP16"]))
    assert t[0]["% of cuBLAS FP16"] == "60.0%" and t[0]["x"] == 1.0
    assert "60.0%" in repr(t)


def test_solution_on_gpu_shows_the_recorded_pair_or_says_it_is_not_recorded(monkeypatch):
    from gemm_kernels.notebook import worked_solutions
    monkeypatch.setattr(worked_solutions, "pair", lambda ex: (None, None))
    assert "not recorded yet" in str(ch14.solution_on_gpu("15_phases"))
    monkeypatch.setattr(worked_solutions, "pair", lambda ex: ({"x": 1}, {"y": 2}))
    monkeypatch.setattr(worked_solutions, "worked_solution",
                        lambda ex, tflops=False: f"table of {ex} in {'TFLOP/s' if tflops else 'GFLOP/s'}")
    assert ch14.solution_on_gpu("14_swizzle") == "table of 14_swizzle in TFLOP/s"
