"""Chapter 11's pictures and tables (gemm_kernels.notebook.ch11_wide), CPU only: the phase
and wide-bank cases cost what the chapter says, the bound is the chapter's arithmetic, the
VEC table and the answers table hold what the text reads from them."""
import pytest

from gemm_kernels.core.kernels import get
from gemm_kernels.measure import records
from gemm_kernels.memory import ch10_11_instructions as instr
from gemm_kernels.notebook import ch11_wide as w

from conftest import stamp


def _costs(cases):
    return [(c.width, c.analysis.wavefronts) for _, c in cases]


def test_phase_cases_cost_one_wavefront_per_phase():
    assert _costs(w.phase_cases()) == [(4, 1), (8, 2), (16, 4)]


def test_merge_cases():
    """i^1 pairs of doubles: 1; halves that repeat each other: 2; an LDS.128 broadcast per
    half-warp and chapter 09's i^2 pairs: 2; one double per half-warp, 128 bytes apart:
    merged, yet 2 against an ideal of 1 (section 3's A_shared[ty][k] as an LDS.64)."""
    cases = w.merge_cases()
    assert _costs(cases) == [(8, 1), (8, 2), (16, 2), (16, 2), (8, 2)]
    assert [c.analysis.merge for _, c in cases] == ["i^1", None, "i^1", "i^2", "i^1"]
    apart = cases[-1][1].analysis
    assert apart.ideal == 1 and len({a // 8 % 16 for a in apart.addresses}) == 1   # one bank
    assert not any("_shared" in label for label, _ in cases)   # section 3's prediction stays open


def test_column_cases_are_16_and_8_way_in_the_first_phase():
    row, col, col128 = (c.analysis.phases[0] for _, c in w.column_cases())
    assert (row.wavefronts, col.wavefronts, col128.wavefronts) == (1, 16, 8)


@pytest.mark.parametrize("pitch, store, read", [(16, 16, 8), (17, 1, 1), (18, 2, 1), (20, 4, 2)])
def test_transposed_cases_match_the_rules(pitch, store, read):
    (_, st), (_, ld) = w.transposed_cases(pitch)
    assert st.width == 8 and ld.width == (16 if pitch % 2 == 0 else 8)
    assert (st.analysis.phases[0].wavefronts, ld.analysis.phases[0].wavefronts) == (store, read)


def test_plot_wide_banks_draws_one_panel_per_case():
    import matplotlib
    matplotlib.use("Agg")
    axes = w.plot_wide_banks(w.transposed_cases(17) + w.transposed_cases(18), ncols=2)
    assert len(axes) == 4 and "2 wavefronts" in axes[2].get_title()
    matplotlib.pyplot.close(axes[0].figure)


def test_step_wavefronts_of_the_chapter():
    d = w.step_wavefronts("dgemm_tiled", {"BLOCK": 16})
    assert (d["ld"], d["st"], d["fma"]) == (48, 4, 16)
    got = [w.step_wavefronts("sgemm_tiled_vec", {"BLOCK": 16, "VEC": v}) for v in (1, 2, 4)]
    assert [(g["total"], g["fma"]) for g in got] == [(26, 16), (45, 32), (81, 64)]


def test_scalar_or_vector():
    t = w.scalar_or_vector(16)
    assert [r["VEC scalar LDS"] for r in t] == ["1 x 1 = 1", "2 x 1 = 2", "4 x 2 = 8"]
    assert t[2]["one vector load"] == "LDS.128: 4"


def _fake(data_dir):
    """A recording with dgemm_tiled BLOCK=16 and sgemm_tiled_vec BLOCK=16 at 2048^3."""
    import json
    dev = {"name": "Test GPU", "compute_capability": "9.0", "sm_count": 100,
           "sm_clock_mhz": 2000.0}

    def row(kernel, params, g):
        return {"chapter": "11", "kernel": kernel, "params": get(kernel).resolve(params),
                "shape": [2048] * 3, "gflops": {"median": g, "min": g, "max": g},
                "error_over_bound": 0.0, "repeats": 20, "binary": {"registers": 32}}
    rows = [row("dgemm_tiled", {"BLOCK": 16}, 4000.0)] + \
        [row("sgemm_tiled_vec", {"BLOCK": 16, "VEC": v}, g)
         for v, g in ((1, 8000.0), (2, 9000.0), (4, 10000.0))]
    (data_dir / "test-gpu.json").write_text(json.dumps(
        {"schema": 2, "device": dev, "created": "2026-01-01T00:00:00Z", "commit": "abc",
         "results": stamp(rows)}))
    records._LOADED.clear()


def test_bound_is_the_chapters_arithmetic(data_dir):
    _fake(data_dir)
    b = w.smem_bound("dgemm_tiled", {"BLOCK": 16})
    # 100 SMs x 2 GHz x (16 DFMA x 32 lanes x 2 flops) / 52 wavefronts per step
    assert b["bound"] == pytest.approx(100 * 2.0 * 16 * 64 / 52)
    t = w.bound_table([("dgemm_tiled", {"BLOCK": 16})])
    assert t[0]["% of bound"] == pytest.approx(100 * 4000 / b["bound"])


def test_float_and_double_compare_the_same_tiling(data_dir):
    _fake(data_dir)
    text = w.float_and_double(16)
    # 26 wavefronts per 16 FFMA in float, 52 per 16 DFMA in double: half the bound
    assert "float  (sgemm_tiled_vec, BLOCK = 16): 26 wavefronts per 16 FMA" in text
    assert "double (dgemm_tiled, BLOCK = 16): 52 wavefronts per 16 FMA" in text
    assert "wavefronts x 2.0, bound x 0.50, recorded rate x 0.50" in text


def test_control_gains_put_both_kernels_on_one_scale():
    from gemm_kernels.core.table import Table
    rate = "GFLOP/s at 2048, median"
    t = [{"VEC": v, "kernel": k, rate: g} for v, k, g in (
        (1, "vector load", 100.0), (1, "control: scalar loads", 100.0),
        (4, "vector load", 135.0), (4, "control: scalar loads", 125.0))]
    out = w.control_gains(Table(t, list(t[0])))
    assert out == "VEC = 1 to 4: the vector kernel x 1.35, the control x 1.25; the wide load adds x 1.08 on top"
    t[3][rate] = None
    assert w.control_gains(Table(t, list(t[0]))) == "VEC = 1 to 4: not recorded"


def test_vec_table_and_reading(data_dir):
    _fake(data_dir)
    t = w.vec_table(16)
    assert [r["B read"] for r in t] == ["LDS", "LDS.64", "LDS.128"]
    assert [r["shared loads/step"] for r in t] == [20, 20, 20]
    assert [r["B store conflict"] for r in t] == ["none", "2-way", "2-way"]
    assert [r["blocks in grid"] for r in t] == [16384, 8192, 4096]
    # the section's table shows what it reads; appendix C's detailed one shows every column
    assert not set(w.VEC_DETAIL) & set(t.columns)
    assert set(w.VEC_DETAIL) <= set(w.vec_table(16, detail=True).columns)
    assert "VEC = 4 against VEC = 1: bound x 1.28, recorded rate x 1.25" in w.vec_reading(t)


def test_probe_wide_keeps_the_wide_loads():
    t = w.probe_wide()
    assert t is not None and all(r["bytes/lane"] in (8, 16) for r in t)
    assert all(r["agree"] == "yes" for r in t)
    assert "Version" not in t.title and "Nsight Compute" in t.title   # the tool is named
    assert t.title.endswith(f"model and measurement agree on all {len(t)} wide loads")


def test_answers_table_grades_each_layout():
    t = w.answers()
    verdicts = {r["answer"]: r["step 2"] for r in t}
    assert verdicts == {
        "rows of 16 doubles, no padding": "FAIL",
        "rows of 18: padded, and still 16-byte aligned": "FAIL",
        "rows of 20": "FAIL",
        "rows of 16, column swizzled: [tx][ty ^ tx], read [tx][k ^ tx]": "pass",
        "rows of 17, read one element late: [tx][k + 1]": "FAIL",
        "B not transposed: [ty][tx], read [k][tx]": "FAIL"}


# ------------------------------------------------------------------ the control, the exercise's trade

def test_the_control_changes_three_lines_and_only_the_b_instructions():
    src = w.control_source()
    assert src.count("\n- ") + src.startswith("- ") == 3 and src.count("\n+ ") == 2
    t = {(r["VEC"], r["kernel"]): r for r in w.control_table(block=16)}
    for vec, want in ((2, "32 LDS, 4 LDS.128"), (4, "64 LDS, 4 LDS.128")):
        assert t[(vec, "control: scalar loads")]["shared loads in the loop"] == want
        assert t[(vec, "control: scalar loads")]["FFMA in the loop"] == \
            t[(vec, "vector load")]["FFMA in the loop"] == 16 * vec
        assert t[(vec, "control: scalar loads")]["B wavefronts per warp and k"] == f"{vec} x 1 = {vec}"
        assert t[(vec, "vector load")]["B wavefronts per warp and k"] == f"{vec}"


def test_without_a_gpu_the_control_is_read_from_the_recording():
    from gemm_kernels.core import device
    if device.is_live():
        pytest.skip("a GPU is here: the live path is tested by the notebook")
    t = w.control_timing()
    assert [(r["VEC"], r["kernel"]) for r in t] == [
        (v, k) for v in (1, 2, 4) for k in ("vector load", "control: scalar loads")]
    rate = next(c for c in t.columns if c.startswith("GFLOP/s at"))
    if any(r[rate] is None for r in t):
        pytest.skip("the recording has no control")
    # the same bound for both kernels of a VEC: the shares of it keep the rates' ratio
    for a, b in zip(t[::2], t[1::2]):
        assert a["% of bound"] / b["% of bound"] == pytest.approx(a[rate] / b[rate])
        assert a["slowest call"] <= a[rate] <= a["fastest call"]
    # one spread column shown; the share of cuBLAS and the registers only in detail
    assert "slowest to fastest call" in t.columns and "registers" not in t.columns
    detail = w.control_recorded(detail=True)
    assert {"registers", "blocks/SM"} <= set(detail.columns) and "blocks/SM" not in t.columns
    # the control keeps the vector kernel's registers, so its blocks per SM too
    for a, b in zip(detail[::2], detail[1::2]):
        assert (a["registers"], a["blocks/SM"]) == (b["registers"], b["blocks/SM"])
    lines = w.control_reading(t).splitlines()
    assert len(lines) == 3 and lines[0].startswith("VEC = 1: the control runs at")


def test_control_reading_tells_overlapping_ranges_apart():
    rate = "GFLOP/s at 2048, median"
    t = [{"VEC": 2, "kernel": "vector load", rate: 100.0, "fastest call": 101.0,
          "slowest call": 99.0},
         {"VEC": 2, "kernel": "control: scalar loads", rate: 90.0, "fastest call": 98.0,
          "slowest call": 89.0}]
    from gemm_kernels.core.table import Table
    out = w.control_reading(Table(t, list(t[0])))
    assert "90.0% of the vector kernel" in out and "do not overlap" in out
    t[1]["fastest call"] = 99.5
    assert "ranges overlap" in w.control_reading(Table(t, list(t[0])))


def test_the_dgemm_stalls_are_per_warp_dfma():
    """One LDS.128 of A per two k and one LDS.64 of B per k: 1.5 shared loads per DFMA at
    every BLOCK; the load/store pipe has more at BLOCK = 8 (its global loads and stores)."""
    t = w.dgemm_stalls()
    assert [r["BLOCK"] for r in t] == [8, 16, 32]
    if "profiled" in t[0]:
        pytest.skip("the recording has no profile of the tiled DGEMM")
    for r in t:
        assert 0 < r["shared pipe, % of peak"] <= 100 and r["instructions per warp DFMA"] > 1
        assert 0 < r["of them shared loads"] < r["LSU instructions per warp DFMA"] < \
            r["instructions per warp DFMA"]
        assert all(r[c] >= 0 for c in ("long scoreboard", "barrier", "MIO throttle",
                                       "short scoreboard"))
    assert [round(r["of them shared loads"], 2) for r in t] == [1.5] * 3
    assert t[0]["LSU instructions per warp DFMA"] > t[1]["LSU instructions per warp DFMA"]


def test_the_stall_scale_is_every_warp_cycle_per_dfma_and_exceeds_the_columns():
    t = w.dgemm_stalls()
    if "profiled" in t[0]:
        pytest.skip("the recording has no profile of the tiled DGEMM")
    lines = w.stall_scale().splitlines()
    assert len(lines) == 3
    for r, line in zip(t, lines):
        total = float(line.split(": ")[1].split(" warp-cycles")[0].replace(",", ""))
        shown = sum(r[c] for c in ("long scoreboard", "barrier", "MIO throttle", "short scoreboard"))
        assert shown < total + 0.5
        assert f"{r['MIO throttle']:,.1f} of them ({r['MIO throttle'] / total:.1%})" in line


def test_stall_growth_is_the_difference_of_the_stall_rows_largest_first():
    t = w.dgemm_stalls()
    if "profiled" in t[0]:
        pytest.skip("the recording has no profile of the tiled DGEMM")
    rows = {r["BLOCK"]: r for r in t}
    line = w.stall_growth(8, 16)
    parts = line.split("; of them ")[1].split(", ")
    deltas = [float(x.rsplit(" ", 1)[1].replace(",", "")) for x in parts]
    assert deltas == sorted(deltas, reverse=True) and len(parts) == 4
    mio = rows[8]["MIO throttle"] - rows[16]["MIO throttle"]
    assert f"MIO throttle {mio:+,.1f}" in line
    assert "no profile" in w.stall_growth(8, 64)


def test_the_transposed_store_picture_outlines_one_phase_in_one_bank():
    ax = w.plot_transposed_store()
    assert "lanes 0-15 of warp 0" in ax.get_title() and "16 wavefronts" in ax.get_title()
    assert ax.texts[0].get_text() == "w0\nl0" and ax.texts[1].get_text() == "w0\nl16"
    # colour is the bank: 16 colours, and the two columns a warp writes differ in hue
    import colorsys
    row0 = [p.get_facecolor()[:3] for p in ax.patches[:16]]
    assert len(set(row0)) == 16
    hue = [colorsys.rgb_to_hsv(*c)[0] for c in row0]
    assert all(abs(hue[2 * i] - hue[2 * i + 1]) > 0.02 for i in range(8))


@pytest.mark.skipif(__import__("shutil").which("g++") is None, reason="no C++ compiler here")
def test_the_control_computes_the_product():
    from gemm_kernels.exercises.cpu_step import correct_on_cpu
    ok, detail = correct_on_cpu(w.control_kernel(), {"BLOCK": 16, "VEC": 4})
    assert ok, detail


def test_no_row_length_gives_a_fused_conflict_free_read_and_store():
    t = w.pitch_table()
    assert all(r["both conflict-free, read fused"] == "no" for r in t)
    assert [r["P"] for r in t if r["both conflict-free"] == "yes"] == [17, 19, 21, 23]
    assert all(r["read"] == ("LDS.64" if r["P"] % 2 else "LDS.128") for r in t)


def test_the_exercise_costs_what_the_chapters_kernel_costs():
    text = w.exercise_step(17)
    assert "= 52 wavefronts per warp and step; the chapter's dgemm_tiled: 52" in text
    chapter, mine = text.splitlines()[1].split(": ", 1)[1].split("; ")
    assert chapter.split(": ")[1] == mine.split(": ")[1]          # the same loop, instruction for instruction
    # rows of 18: the fused read, one LDS.128 per two k, and the store's 2-way conflict
    both = w.exercise_step(17, 18).splitlines()
    assert both[0] == text.splitlines()[0]
    assert both[1].startswith("rows of 18: stores 2 (A) + 4 (B), reads 16 (A, 8 LDS.128) + "
                              "8 x 4 (B, 8 LDS.128) = 54 wavefronts per warp and step")


def test_the_phase_picture_writes_its_counts_and_its_unit_out():
    ax = w.plot_phases(w.merge_cases())
    texts = [t.get_text() for t in ax.texts]
    assert not any("(s)" in t for t in texts)
    assert any(t.startswith("1 phase, 1 wavefront,") for t in texts)
    assert "units of the load's width" in ax.get_xlabel()


def test_the_dgemm_reading_uses_the_sweeps_size():
    if records.current() is None:
        pytest.skip("no recording")
    text = w.dgemm_reading()
    assert f"dgemm_tiled at {w.SIZE}^3" in text


def test_the_model_agreement_is_printed_to_two_significant_digits():
    if records.current() is None:
        pytest.skip("no recording")
    import re
    text = w.ncu_agreement([("dgemm_tiled", {"BLOCK": b}) for b in (8, 16, 32)])
    shares = re.findall(r"within ([0-9.e+-]+)%", text)
    assert len(shares) == 2, text
    for s in shares:
        assert len(s.replace(".", "").lstrip("0")) <= 2, text
    assert "of all the shared wavefronts counted" in text


def test_part2_is_graded_from_the_bank_model():
    assert w.part2_facts() == {"banks": 8, "store_wavefronts": 4}
    assert "not answered yet" in str(w.check_part2())
    assert "right" in str(w.check_part2(banks=8, store_wavefronts=4))
    wrong = str(w.check_part2(banks=16, store_wavefronts=2))
    assert "banks = 16: not yet" in wrong and "store_wavefronts = 2: not yet" in wrong
    assert "right" not in str(w.check_part2(banks=8, store_wavefronts=2))


def test_part2_hides_the_banks_while_they_are_wrong():
    both_wrong = str(w.check_part2(banks=16, store_wavefronts=2))
    assert "on 8 banks" not in both_wrong and "your first answer" in both_wrong
    assert "on 8 banks" in str(w.check_part2(banks=8, store_wavefronts=2))


def test_the_transposed_step_prices_rows_of_17_and_18():
    odd, even = w.transposed_step(17), w.transposed_step(18)
    assert (odd["total"], odd["B read"], odd["B reads per step"]) == (52, "LDS.64", 16)
    assert (even["total"], even["B read"], even["B reads per step"]) == (54, "LDS.128", 8)
    assert w.transposed_step(16)["total"] == 306


def test_part3_is_graded_from_the_bank_model():
    assert "not answered yet" in str(w.check_step())
    assert "not answered yet" in str(w.check_step(rows17=52))
    right = str(w.check_step(rows17=52, rows18=54))
    assert right.startswith("Part 3: right") and "8 instructions" in right
    wrong = str(w.check_step(rows17=68, rows18=52))
    assert "rows17 = 68: not yet" in wrong and "rows18 = 52: not yet" in wrong
    assert "right" not in wrong and "52 wavefronts" not in wrong and "54" not in wrong
    one_wrong = str(w.check_step(rows17=52, rows18=56))
    assert "rows18 = 56: not yet" in one_wrong and "rows17" not in one_wrong


def test_swapped_halves_escape_the_parity_argument_at_the_cost_of_rows_of_17():
    text = str(w.swapped_halves())
    assert "the store (STS.64) costs 2 wavefronts (least 2)" in text
    assert "(LDS.128 per two k) 4 at worst over k (least 4)" in text
    assert "52 wavefronts per warp and step, as rows of 17 (52)" in text
    # the plain swizzle read as double2: lanes tx and tx ^ 1 share a 16-byte bank
    assert ("plain k ^ tx, read as double2: the store (STS.64) costs 2 wavefronts (least 2), "
            "the read (LDS.128 per two k) 8 at every k (least 4)") in text
    with pytest.raises(ValueError):
        w.swapped_halves(block=8)


def test_fusing_a_halves_its_wavefronts_in_dgemm_tiled():
    text = w.fused_a_reading()
    # as written, the merged phase of the LDS.64 holds two addresses in one bank: 2x ideal
    assert ("A read as written: 16 LDS.64 x 2 = 32 wavefronts per warp and step "
            "(ideal 1 per LDS.64); the whole step: 68") in text
    assert ("A read fused: 8 LDS.128 x 2 = 16 wavefronts per warp and step "
            "(ideal 2 per LDS.128); the whole step: 52") in text
    assert w.step_wavefronts("dgemm_tiled", {"BLOCK": 16}, as_written=True)["total"] == 68
    if records.described_device():
        assert "(1.31 x)" in text


def test_padding_a_by_one_double_saves_what_fusing_saves_without_an_lds128():
    # rows of 17: the merged LDS.64's two doubles, k and 17 + k, sit in different banks
    text = w.fused_a_reading()
    assert ("A read as written, rows of 17: 16 LDS.64 x 1 = 16 wavefronts per warp and step "
            "(ideal 1 per LDS.64); the whole step: 52") in text
    assert w.step_wavefronts("dgemm_tiled", {"BLOCK": 16}, a_pad=1)["total"] == 52
    padded = instr.block_accesses("dgemm_tiled", {"BLOCK": 16}, a_pad=1)
    assert not [a for a in padded if a.sass == "LDS.128"]
    # an even padding keeps the rows 16-byte aligned, and ptxas's fused read with them
    assert any(a.sass == "LDS.128" for a in instr.block_accesses("dgemm_tiled", {"BLOCK": 16}, a_pad=2))


def test_fusing_a_saves_nothing_where_the_whole_warp_reads_one_address():
    text = w.fused_a_reading(32)
    assert ("A read as written: 32 LDS.64 x 1 = 32 wavefronts per warp and step "
            "(ideal 1 per LDS.64)") in text
    assert ("A read fused: 16 LDS.128 x 2 = 32 wavefronts per warp and step "
            "(ideal 2 per LDS.128)") in text
    if records.described_device():
        assert "(1.00 x)" in text


def test_the_worked_solution_is_read_from_the_recording_that_timed_its_text():
    """worked_solution reads the recording that timed the solution's current text, even
    where it is not the one shown, and sets the chapter's kernel of that run beside it."""
    from gemm_kernels.exercises.notebooks import solution_kernel
    from gemm_kernels.measure import lookup
    from gemm_kernels.notebook.worked_solutions import worked_solution
    rec = lookup.variant_recording(solution_kernel("11_dgemm"), (2048, 2048, 2048), {"BLOCK": 16})
    if rec is None:
        pytest.skip("no recording timed the worked solution's text")
    t = worked_solution("11_dgemm")
    assert "timed in one run" in t.title and rec.label in t.title
    assert all(r["GFLOP/s"] for r in t)


def test_transposed_loads_show_where_ptxas_fuses_the_b_read():
    lines = w.transposed_loads().splitlines()
    # A's reads are 8 LDS.128 at every pitch; B's join them only where k, k + 1 stay aligned
    assert lines[1:] == ["rows of 16: 16 LDS.128", "rows of 17: 8 LDS.128, 16 LDS.64",
                         "rows of 18: 16 LDS.128"]


def test_the_swapped_halves_kernel_is_the_solution_with_its_lines_changed():
    diff = w.swapped_halves_source().splitlines()
    assert diff[0] == "- __shared__ double B_shared[BLOCK][BLOCK + 1];"
    assert sum(line.startswith("-") for line in diff) == len(w.SWAPPED)
    assert any("double2" in line for line in diff if line.startswith("+"))


def test_the_swapped_halves_kernel_compiles_to_lds128_and_computes_right():
    text = w.swapped_halves_checked()
    if "not run" in text:
        pytest.skip(text.splitlines()[-1])
    swapped, solution, cpu = text.splitlines()[1:]
    assert "16 LDS.128" in swapped and "LDS.64" not in swapped     # the read is fused
    count = lambda line: int(line.split(": ")[1].split()[0])
    assert count(swapped) > count(solution)                       # the swap costs instructions
    assert "every element right" in cpu
