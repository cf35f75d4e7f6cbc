"""Chapter 01's notebook helpers: the launch's grid, the loop read off the
SASS (which loads read A, which read B), the occupancy in words, the prediction check."""
import pytest

from gemm_kernels.notebook import ch01_naive


@pytest.mark.parametrize("params", [None, {"MAPPING": "x->col"}, {"BLOCK": 8}])
def test_the_loop_reads_a_row_of_A_and_a_column_of_B(params):
    r = ch01_naive.loop_loads(params)
    assert r["FFMA"] == 16 and r["LDG"] == 32
    # A: one base, offsets k .. k+15; B: a chain of addresses, rows k .. k+15
    assert sorted(o for *_, o in r["A"]) == list(range(16))
    assert sorted(j for *_, j in r["B"]) == list(range(16))
    assert len({t.split("[")[2].split(".")[0] for _, t, _ in r["A"]}) == 1


def test_every_load_of_the_listing_is_named():
    text = ch01_naive.read_loop()
    loads = [line for line in text.splitlines() if "LDG" in line]
    assert loads and all("// A[row]" in line or "// B[k" in line for line in loads)
    assert "back to the loop's first instruction" in text


def test_the_loop_in_numbers_gives_the_intensity():
    text = ch01_naive.loop_in_numbers()
    assert "16 FFMA and 32 LDG" in text and "0.25 FLOP per byte delivered" in text
    assert "ridge" not in text          # bytes delivered by the L1 are not DRAM bytes
    assert "The cap:" not in text       # printed once, by cap_line in the main text


def test_the_cap_is_one_wavefront_per_load_instruction(recorded_mode):
    """2 load instructions per warp-step of 64 FLOP, one wavefront each at least: 32 FLOP
    per SM and clock, an eighth of the 256 an SM's FP32 lanes can do (2 x 128 lanes)."""
    from gemm_kernels.measure import records
    cap = ch01_naive.l1_cap()
    props = records.described_device()
    assert cap["loads_per_step"] == 2
    assert cap["cap_gflops"] == pytest.approx(
        32 * props["sm_count"] * props["sm_clock_mhz"] / 1e3)
    assert cap["cap_gflops"] / cap["peak_gflops"] == pytest.approx(0.125)


def test_the_uniform_register_moves_are_named():
    text = ch01_naive.read_loop()
    movs = [line for line in text.splitlines() if " MOV " in line and "UR" in line]
    assert movs and all("A's running pointer" in line and "uniform register" in line
                        for line in movs)


def test_the_loop_test_explains_its_constant():
    """The loop test compares the k left with 16 - 4 = 12 right after taking 16 off: the
    count is a multiple of 4, so "more than 12" is "at least 16", and the note says so."""
    text = ch01_naive.read_loop(head=200, tail=0)
    isetp, = [line for line in text.splitlines() if "ISETP" in line]
    assert "0xc" in isetp and "more than 12 means at least 16" in isetp


def test_the_occupancy_is_explained_by_the_register_file():
    text = ch01_naive.registers_in_words()
    assert "32 x 2,048 = 65,536" in text and "occupancy 100%" in text


def test_the_resources_table_has_no_shared_memory_columns():
    cols = ch01_naive.resources().columns
    assert not any("LDS" in c for c in cols) and "occupancy" in cols


def test_the_share_range_is_written_as_the_table_writes_it():
    rows = [{"naive: % of cuBLAS": v} for v in (0.974, 1.52, 0.981)]
    assert ch01_naive.share_range(rows) == "0.97% to 1.5%"


def test_the_guess_is_checked_against_the_recorded_ratio(capsys, recorded_mode):
    ch01_naive.check_guess(None)
    assert "Write your guess" in capsys.readouterr().out
    ch01_naive.check_guess(1.0)         # "the same" is refused, with the explanation
    out = capsys.readouterr().out
    assert "too low" in out and "'Why it is slow' draws them" in out
    ch01_naive.check_guess(3)           # "a little faster" too, with its own hint
    out = capsys.readouterr().out
    assert "too low" in out and "Faster, yes, but by more: count what a warp's step costs the L1" in out
    assert "The same instructions" not in out
    ch01_naive.check_guess(100)         # a wildly high ratio is refused
    out = capsys.readouterr().out
    assert "too high" in out and "Faster, but not that much" in out
    assert "every load instruction costs at least one L1 wavefront" in out
    assert "x->col's step still costs 2 wavefronts, against x->row's 33" in out
    ch01_naive.check_guess(13)
    out = capsys.readouterr().out
    assert "is right" in out and "The L1 wavefronts" not in out
    # the wavefront count's prediction (33 -> 2 per step) is accepted
    ch01_naive.check_guess(33 / 2)
    out = capsys.readouterr().out
    assert "is right" in out
    # it overshoots the measurement a little, and is told why
    assert "The L1 wavefronts, 33 against 2 per step, give 16.5 x. The measurement is a little lower" in out
    # the sector count (the hint's first estimate, 33 -> 5 per step) is told it is the
    # expected reasoning, and that the gap to the measurement is the chapter's subject
    ch01_naive.check_guess(33 / 5)
    out = capsys.readouterr().out
    assert "the expected first estimate" in out and "33 -> 5 per step" in out
    assert "This is the expected reasoning" in out and "what this chapter is about" in out
    assert "33 L1 wavefronts against 2 (16.5 x)" in out and "bank" not in out
    assert "Faster, yes" not in out


def test_the_sector_estimate_note_calls_it_the_expected_reasoning():
    """The note names both counts and their ratios, calls the sector count the expected
    reasoning and its gap the chapter's subject, in the chapter's one statement of the
    cost: 33 L1 wavefronts per step against 2, with no cause given."""
    note = ch01_naive.sector_estimate_note({"x->row": 33, "x->col": 5}, {"x->row": 33, "x->col": 2})
    assert note.startswith("Counting 32-byte sectors, as the hint asks, gives 33 -> 5 per step, 6.6 x.")
    assert "This is the expected reasoning" in note
    assert "The gap between that estimate and the measurement is what this chapter is about" in note
    assert "a step costs 33 L1 wavefronts against 2 (16.5 x)" in note
    assert "bank" not in note and "line" not in note


def test_the_guess_tolerance_is_the_factor_the_prompt_states(capsys, recorded_mode):
    """The prompt promises "within a factor of 1.6 either way": the reply prints that
    range, and guesses just inside and just outside it are graded accordingly."""
    from gemm_kernels.measure import lookup
    rate = {m: lookup.measure_or_lookup("naive", (2048,) * 3, {"BLOCK": 32, "MAPPING": m})
            ["gflops"]["median"] for m in ("x->row", "x->col")}
    ratio = rate["x->col"] / rate["x->row"]
    for guess, verdict in [(ratio / 1.6 * 1.01, "is right"), (ratio / 1.6 * 0.99, "the expected first estimate"),
                           (ratio * 1.6 * 0.99, "is right"), (ratio * 1.6 * 1.01, "too high")]:
        ch01_naive.check_guess(guess)
        out = capsys.readouterr().out
        assert verdict in out and f"from {ratio / 1.6:.1f} to {ratio * 1.6:.1f}" in out


def test_the_launch_names_grid_and_block():
    text = ch01_naive.launch_naive((1000, 700, 300))
    assert "32 x 22 blocks of 32 x 32 threads" in text
    assert "32 x 22 x 1,024 = 720,896 threads for the 700,000 elements" in text


def test_the_cuda_launch_fills_in_the_registry_grid_for_both_mappings():
    """The plain CUDA form of the launch: x over the rows of C (M) with x->row, over its
    columns (N) with x->col, the numbers being the registry's grid."""
    row = ch01_naive.cuda_launch((1000, 700, 300), {"BLOCK": 32})
    assert "dim3 block(32, 32);" in row
    assert "dim3 grid(ceil_div(M, 32), ceil_div(N, 32));" in row and "= (32, 22)" in row
    assert "sgemm_naive<32, 0><<<grid, block>>>(M, N, K, alpha, A, B, beta, C);" in row
    col = ch01_naive.cuda_launch((1000, 700, 300), {"BLOCK": 16, "MAPPING": "x->col"})
    assert "dim3 grid(ceil_div(N, 16), ceil_div(M, 16));" in col and "= (44, 63)" in col
    assert "sgemm_naive<16, 1><<<" in col


def test_the_sweep_table_has_both_mappings_and_leaves_block_4_to_chapter_02():
    t = ch01_naive.sweep_table()
    assert [r["BLOCK"] for r in t] == [8, 16, 32]   # BLOCK = 4: chapter 02's prediction
    assert all(r["x->row (GFLOP/s)"] > 0 and r["x->col (GFLOP/s)"] > 0 for r in t)


def test_the_dot_product_picture_marks_one_row_of_a_one_column_of_b_and_one_element():
    """One thread's work: K cells of row `row` of A and K cells of column `col` of B,
    numbered by k, and the one element of C it writes; nothing else is coloured."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = ch01_naive.dot_product_picture(M=4, N=5, K=3, row=2, col=1)
    marked = sorted(p.get_gid() for p in fig.axes[0].patches if p.get_gid())
    texts = [t.get_text() for t in fig.axes[0].texts]
    plt.close(fig)
    assert marked == sorted(["A[2][0]", "A[2][1]", "A[2][2]", "B[0][1]", "B[1][1]",
                             "B[2][1]", "C[2][1]"]), marked
    assert texts.count("k=0") == 2 and texts.count("2") == 2 and "C[row][col]" in texts


def test_the_doubling_ratios_divide_each_row_by_the_one_above():
    table = [{"BLOCK": 8, "x->row (GFLOP/s)": 400.0, "x->col (GFLOP/s)": 100.0},
             {"BLOCK": 16, "x->row (GFLOP/s)": 200.0, "x->col (GFLOP/s)": 150.0}]
    text = str(ch01_naive.doubling_ratios(table)).splitlines()
    assert text == ["x->row, each time BLOCK doubles: 8 -> 16: x0.50",
                    "x->col, each time BLOCK doubles: 8 -> 16: x1.50",
                    "At BLOCK = 16, x->col / x->row = 0.8: compare it with your guess."]


def test_rate_times_lines_multiplies_the_recorded_rate_by_the_lines_per_step(recorded_mode):
    from gemm_kernels.core.table import fmt_number
    t = ch01_naive.rate_times_lines()
    assert [r["settings"] for r in t][:1] == ["BLOCK = 8, MAPPING = x->row"]
    assert [r["128-byte lines per step (from the indices)"] for r in t] == [9, 17, 33, 5, 3, 2]
    sweep = ch01_naive.sweep_table()
    rate = sweep[0]["x->row (GFLOP/s)"]
    assert t[0]["rate x lines"] == fmt_number(rate * 9)
    # the sectors stand beside the lines: x->col at BLOCK = 8 and 32 touches 5 of each
    assert [r["32-byte sectors per step (from the indices)"] for r in t] == [9, 17, 33, 5, 4, 5]
    assert "64 FLOP x" not in t.title
    # the chapter matches MAPPING to the source's X_TO_COL once, in its own table, not in captions
    assert "X_TO_COL" not in t.title


def test_pace_line_writes_out_the_arithmetic(recorded_mode):
    text = str(ch01_naive.pace_line())
    assert text.startswith("At one L1 cycle per SM and clock, rate x lines would be 64 FLOP x ")
    assert text.endswith("GFLOP/s for every row.")


def test_pace_line_works_one_example(recorded_mode):
    """With `example`, a second line: the pace over the configuration's 33 lines per step,
    the rate it predicts, beside the recorded rate at 2048^3."""
    first, second = str(ch01_naive.pace_line(
        example={"BLOCK": 32, "MAPPING": "x->row"})).split("\n")
    assert first == str(ch01_naive.pace_line())
    pace = float(first.split("= ")[-1].split(" GFLOP/s")[0].replace(",", ""))
    assert second == (f"BLOCK = 32, MAPPING = x->row: {pace:,.0f} / 33 lines per step = "
                      f"{pace / 33:,.0f} GFLOP/s predicted; measured at 2048^3: 486 GFLOP/s.")


def test_which_count_sets_both_counts_beside_the_rate_ratio():
    """x->row to x->col at BLOCK = 32: 33 -> 2 lines (16.5x), 33 -> 5 sectors per step
    (6.6x), counted from the index expressions; the rate ratio is the
    recording's."""
    text = ch01_naive.which_count()
    assert "128-byte lines per step 33 -> 2: 16.5 times fewer" in text
    assert "sectors per step        33 -> 5: 6.6 times fewer" in text
    assert "times faster" in text
    assert "wavefront" not in text


def test_which_count_closes_the_block_8_prediction(recorded_mode):
    """At BLOCK = 8 the lines predict 9 -> 5 (1.8x), and the recorded rates agree."""
    text = ch01_naive.which_count(block=8)
    assert "128-byte lines per step 9 -> 5: 1.8 times fewer" in text
    assert "1.8 times faster" in text


def test_cap_line_gives_the_bytes_per_multiply_add_and_the_cap(recorded_mode):
    """2 loads of 4 B per multiply-add, one instruction each per warp, then the cap."""
    text = str(ch01_naive.cap_line())
    assert text.startswith("2 loads of 4 B per multiply-add (2 FLOP), one load instruction "
                           "each per warp.\nThe cap:")
    assert "chapter 03" in text and "chapters 05-06" in text
    assert "The cap: at least one L1 wavefront per scalar load instruction, 2 per warp-step" in text
    assert "for this loop of 4-byte loads" in text and "however" not in text
    # what lifts the cap is fewer wavefronts per multiply-add, by two distinct means:
    # wide loads (more values per wavefront) and register reuse (fewer loads)
    assert "What lifts it: fewer L1 wavefronts per multiply-add" in text
    assert "wide loads that bring several values per wavefront" in text
    assert "LDS.128, in chapter 03" in text and "float4 global loads in chapter 07" in text
    assert "reuse of loaded values in registers" in text and "wide or not" not in text
    assert "Wider loads" not in text


def test_rate_times_lines_two_rows_for_the_main_text(recorded_mode):
    """BLOCK = 32 only, without the product: x->row then x->col, the sectors, lines,
    profiled wavefronts and rate."""
    t = ch01_naive.rate_times_lines(blocks=(32,), product=False)
    assert [r["settings"] for r in t] == ["BLOCK = 32, MAPPING = x->row",
                                          "BLOCK = 32, MAPPING = x->col"]
    assert [r["32-byte sectors per step (from the indices)"] for r in t] == [33, 5]
    assert [r["128-byte lines per step (from the indices)"] for r in t] == [33, 2]
    assert [r["wavefronts per step, Nsight Compute"] for r in t] == ["33.00", "2.00"]
    assert all("rate x lines" not in r for r in t)


def test_size_gap_prints_the_factor_at_2048_and_at_2047(recorded_mode):
    """Both mappings at both sizes, x->col at 2047^3 from its own timed study, each as a
    share of the cuBLAS timed beside it; the factor, the plain ratio of the rates, is
    smaller off the power of two. At 2047^3, x->row's rate x its 33 lines passes the
    pace of one L1 cycle per SM and clock."""
    import re
    text = str(ch01_naive.size_gap())
    big, odd = (float(m) for m in re.findall(r"x->col / x->row: ([0-9]+\.[0-9]) x\.", text))
    assert text.startswith("At 2048^3: x->col 6,381 GFLOP/s, 12.8% of cuBLAS; x->row 486")
    assert "At 2047^3: x->col 6,438 GFLOP/s" in text and "coalesced" not in text
    assert odd < big
    # the factor is the rates' own ratio, the one the six-configuration sweep prints
    assert f"x->col / x->row: {6381 / 486:.1f} x." in text
    assert text.splitlines()[-1] == str(ch01_naive.implied_cycles())


def test_implied_cycles_at_2047_are_far_fewer_than_the_lines(recorded_mode):
    """At 2047^3, x->row's rate implies about 10 L1 cycles per step (the pace of one L1
    cycle per SM and clock over the rate), against the 33 lines its loads touch; at
    2048^3 the same arithmetic gives about the lines."""
    import re
    pace = str(ch01_naive.pace_line()).split("= ")[-1].split(" GFLOP/s")[0]
    text = str(ch01_naive.implied_cycles())
    assert text.startswith(f"At 2047^3, x->row: {pace} / 1,637 GFLOP/s = ")
    assert text.endswith("its loads touch 33 lines per step.")
    cycles = float(re.search(r"= ([0-9.]+) L1 cycles per warp and step", text).group(1))
    assert 9 < cycles < 11
    at_2048 = str(ch01_naive.implied_cycles(2048))
    assert 33 <= float(re.search(r"= ([0-9.]+) L1 cycles", at_2048).group(1)) < 36


def test_size_gap_row_only_gives_x_row_at_both_sizes(recorded_mode):
    """The main text's short version: x->row's rate and share of cuBLAS at 2048^3 and
    2047^3, then how many times as fast it runs off the power of two."""
    assert str(ch01_naive.size_gap(row_only=True)).splitlines() == [
        "x->row, BLOCK = 32, at 2048^3: 486 GFLOP/s, 0.98% of cuBLAS",
        "x->row, BLOCK = 32, at 2047^3: 1,637 GFLOP/s, 3.3% of cuBLAS",
        f"At 2047^3 it runs {1637 / 486:.1f} times as fast as at 2048^3."]


def test_the_sector_count_is_ruled_out_by_the_pace(recorded_mode):
    """Counted in sectors, x->col at BLOCK = 16 and 32 would pass one L1 cycle per SM and
    clock; no x->row configuration does (its sectors equal its lines)."""
    text = str(ch01_naive.per_sector_products())
    assert "BLOCK = 16, MAPPING = x->col" in text and "BLOCK = 32, MAPPING = x->col" in text
    assert "x->row" not in text and "the L1's cycles are not sectors" in text
    # x->col's own count: the wavefronts are the lines, not the sectors
    assert ("BLOCK = 32: 5.00 sectors, 2 lines, 2.00 wavefronts; "
            "BLOCK = 16: 4.00 sectors, 3 lines, 3.00 wavefronts." in text)


def test_a_too_high_or_non_number_guess_gets_its_own_message(capsys, recorded_mode):
    """A too-high guess (32: "32 loads against 1") is told that every load instruction
    costs at least one wavefront, not told "not the sectors"; a guess typed as text gets
    a message, not a TypeError."""
    ch01_naive.check_guess(32)
    out = capsys.readouterr().out
    assert "too high" in out and "Faster, but not that much" in out
    assert "sectors" not in out and "at least one L1 wavefront" in out
    ch01_naive.check_guess("13")
    assert "'13' is not a number" in capsys.readouterr().out


def test_gap_bars_draw_both_mappings_the_cap_and_cublas_on_a_log_axis(recorded_mode):
    """Four bars, top to bottom x->row, x->col, the cap, cuBLAS, each as long as its
    rate; x->col's label gives its factor over x->row, the cap's the share x->col
    reaches."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from gemm_kernels.measure import lookup
    fig = ch01_naive.gap_bars()
    ax = fig.axes[0]
    bars = {p.get_gid(): p.get_width() for p in ax.patches if p.get_gid()}
    texts = [t.get_text() for t in ax.texts]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    scale = ax.get_xscale()
    plt.close(fig)
    run = {m: lookup.measure_or_lookup("naive", (2048,) * 3, {"BLOCK": 32, "MAPPING": m})
           for m in ("x->row", "x->col")}
    row, col = (run[m]["gflops"]["median"] for m in ("x->row", "x->col"))
    cap = ch01_naive.l1_cap({"BLOCK": 32, "MAPPING": "x->row"})["cap_gflops"]
    assert labels == ["x->row", "x->col", "the cap of this loop", "cuBLAS"]
    assert scale == "log"
    assert bars["x->row"] == row and bars["x->col"] == col
    assert bars["the cap of this loop"] == cap
    assert bars["cuBLAS"] == run["x->row"]["reference"]["gflops"]["median"]
    assert f"{col:,.0f}  ({col / row:.1f} x x->row: the addresses)" in texts
    assert f"{cap:,.0f}  (x->col reaches {col / cap:.0%} of it)" in texts


def test_rate_times_lines_takes_a_subset_of_block_sizes(recorded_mode):
    """The main text shows BLOCK = 8 and 32 only: four rows, each mapping in turn."""
    t = ch01_naive.rate_times_lines(blocks=(8, 32))
    assert [r["settings"] for r in t] == [
        "BLOCK = 8, MAPPING = x->row", "BLOCK = 32, MAPPING = x->row",
        "BLOCK = 8, MAPPING = x->col", "BLOCK = 32, MAPPING = x->col"]
    assert [r["128-byte lines per step (from the indices)"] for r in t] == [9, 33, 5, 2]


def test_rate_times_lines_shows_the_profiled_wavefronts_beside_the_lines(recorded_mode):
    from gemm_kernels.notebook import ch01_naive_dram
    t = ch01_naive.rate_times_lines()
    counted = ch01_naive_dram.wavefronts_per_step()
    # x->col's own profile holds all three blocks
    assert ("x->row", 32) in counted and all(("x->col", b) in counted for b in (8, 16, 32))
    for r in t:
        b = int(r["settings"].split(",")[0].split("= ")[1])
        m = r["settings"].split("MAPPING = ")[1]
        wf = r["wavefronts per step, Nsight Compute"]
        assert wf == ("not profiled" if (m, b) not in counted else f"{counted[(m, b)]:.2f}")
    # where profiled, the wavefronts equal the lines the index expressions give
    for r in t:
        if r["wavefronts per step, Nsight Compute"] != "not profiled":
            assert round(float(r["wavefronts per step, Nsight Compute"])) == \
                r["128-byte lines per step (from the indices)"]


def test_same_loop_compares_the_mappings_instruction_by_instruction():
    """x->row and x->col compile to one loop, operand for operand."""
    text = ch01_naive.same_loop()
    assert text == ("The compiled loops at BLOCK = 32, x->row against x->col: the same 73 "
                    "instructions, operand for operand.")


def test_rate_times_lines_brief_keeps_lines_rate_and_product(recorded_mode):
    """The main text's six-row test: settings, lines, wavefronts, rate, rate x lines."""
    t = ch01_naive.rate_times_lines(brief=True)
    assert list(t[0]) == ["settings", "128-byte lines per step (from the indices)",
                          "wavefronts per step, Nsight Compute", "rate at 2048^3 (GFLOP/s)",
                          "rate x lines"]
    assert [r["128-byte lines per step (from the indices)"] for r in t] == [9, 17, 33, 5, 3, 2]
