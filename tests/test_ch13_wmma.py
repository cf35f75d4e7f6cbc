"""Chapter 13 without a GPU: the WMMA kernels compile to tensor-core instructions for the
oldest and the newest GPU of the series, the registry's rules, the FP16 operand types,
and the tensor-core error bound with its negative controls (planted bugs of the kinds
the chapter shows are caught; a correct FP32 accumulation of FP16 inputs passes)."""
import re
import numpy as np
import pytest

from gemm_kernels.core import compiler
from gemm_kernels.core.kernels import get
from gemm_kernels.core.launch import operand_dtypes, problems
from gemm_kernels.exercises import cpu_step
from gemm_kernels.measure.check import (compare_gemm, gemm_bound, gemm_reference,
                                        random_normal, tensor_core_bound)


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
@pytest.mark.parametrize("name", ["wmma_naive", "wmma_tiled"])
def test_the_kernels_compile_to_tensor_core_instructions(name, arch):
    sass = compiler.sass(get(name), {}, arch)
    assert "HMMA" in sass
    assert compiler.resources(get(name), {}, arch)["spill_stores"] == 0 or arch == "sm_75"


def test_the_tiled_kernel_reads_fragments_from_shared_memory_with_ldmatrix():
    sass = compiler.sass(get("wmma_tiled"), {}, "sm_90")
    # 8 warps, each 64 x 32 of C per BK = 32: 4 A and 2 B fragments per 16-step (LDSM:
    # one ldmatrix of four 8 x 8 matrices each; B's transposed, .MT88), 8 mma of
    # m16n16k16 = 16 HMMA.16816 per step
    assert sass.count("LDSM.16.M88.4") == 8 and sass.count("LDSM.16.MT88.4") == 4
    assert sass.count("HMMA.16816.F32") == 32


def test_the_naive_kernel_reads_global_memory_only():
    sass = compiler.sass(get("wmma_naive"), {}, "sm_90")
    assert "LDG" in sass and "LDS" not in sass and "LDSM" not in sass


def test_the_naive_kernel_refuses_partial_tiles_with_the_reason():
    bad = problems("wmma_naive", None, (33, 64, 16))
    assert len(bad) == 1 and "multiples of 16" in bad[0] and "M=33" in bad[0]
    assert not problems("wmma_naive", None, (32, 64, 16))


def test_the_tiled_kernel_takes_any_shape():
    for shape in [(1, 1, 1), (7, 13, 5), (4097, 1023, 515)]:
        assert not problems("wmma_tiled", None, shape)


def test_every_configuration_is_accepted_on_every_architecture():
    k = get("wmma_tiled")
    for arch in ("sm_75", "sm_86", "sm_90"):
        assert len(k.valid_configurations(arch)) == len(k.configurations())


def test_only_the_big_tile_with_bk32_spills_and_only_before_sm_90():
    """The known spill of tests/test_arch_matrix.py: 128 x 128 with BK = 32 under the cap
    of 128 registers, on sm_75 (the oldest GPU of the series); nothing on sm_90."""
    k = get("wmma_tiled")
    for arch in ("sm_75", "sm_90"):
        spills = [c for c in k.valid_configurations(arch)
                  if compiler.resources(k, c, arch)["spill_stores"]]
        assert all(c["BM"] == c["BN"] == 128 and c["BK"] == 32 for c in spills), (arch, spills)
        assert bool(spills) == (arch == "sm_75")


def test_hgemm_takes_fp16_inputs_and_an_fp32_output():
    assert operand_dtypes("hgemm") == ("float16", "float16", "float32")
    assert operand_dtypes("sgemm") == ("float32",) * 3


# ------------------------------------------------------------------ the bound

def _inputs(M, N, K, seed=1):
    rng = np.random.default_rng(seed)
    return random_normal((M, K), "float16", rng), random_normal((K, N), "float16", rng)


def _fp32_product(A, B):
    """What a correct kernel may compute: exact products, FP32 sums."""
    return A.astype(np.float32) @ B.astype(np.float32)


def test_the_tensor_core_bound_is_the_deterministic_one_with_one_ulp_per_addition():
    K = 1000
    assert tensor_core_bound(K) == pytest.approx(1002 * 2.0 ** -23, rel=1e-3)
    # wider than the FP32 kernels' rule (round to nearest, errors of mean zero)
    assert tensor_core_bound(K) > 5 * gemm_bound(64, 64, K, "float32")
    assert gemm_bound(64, 64, K, "float32", "float16") == tensor_core_bound(K)


@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 65, 17), (127, 129, 255), (64, 64, 1024)])
def test_a_correct_fp32_accumulation_passes(shape):
    A, B = _inputs(*shape)
    assert compare_gemm(_fp32_product(A, B), A, B).ok


def test_alpha_and_beta_are_taken_in_fp32_for_fp16_inputs():
    A, B = _inputs(16, 16, 16)
    ref, _ = gemm_reference(A, B, None, alpha=1.1)
    want = float(np.float32(1.1)) * (A.astype(np.float64) @ B.astype(np.float64))
    assert np.array_equal(ref, want)


def _transposed_blocks(B):
    """B with each 16 x 16 block transposed in place: a col_major fragment loaded from
    row-major data."""
    out = B.copy()
    for r in range(0, B.shape[0], 16):
        for c in range(0, B.shape[1], 16):
            out[r:r + 16, c:c + 16] = B[r:r + 16, c:c + 16].T
    return out


def test_a_fragment_of_b_read_in_the_wrong_layout_is_caught():
    A, B = _inputs(64, 64, 64)
    v = compare_gemm(_fp32_product(A, _transposed_blocks(B)), A, B)
    assert not v.ok and v.bad > 0.9 * 64 * 64


def test_a_missing_last_step_of_k_is_caught():
    A, B = _inputs(64, 64, 528)
    v = compare_gemm(_fp32_product(A[:, :512], B[:512]), A, B)
    assert not v.ok and v.bad > 0.9 * 64 * 64


def test_one_slightly_wrong_element_is_caught():
    A, B = _inputs(64, 64, 512)
    C = _fp32_product(A, B)
    _, scale = gemm_reference(A, B)
    C[10, 20] += 20 * tensor_core_bound(512) * scale[10, 20]
    v = compare_gemm(C, A, B)
    assert not v.ok and v.bad == 1 and v.worst == (10, 20)


def test_fp32_data_reinterpreted_as_fp16_is_caught():
    """The notes' `reinterpret_cast<half*>(A)` on FP32 data: the kernel reads the first
    M*K halves of A's bytes as A."""
    M, N, K = 32, 32, 32
    rng = np.random.default_rng(3)
    A32 = random_normal((M, K), "float32", rng)
    B32 = random_normal((K, N), "float32", rng)
    seen_a = A32.view(np.float16).ravel()[:M * K].reshape(M, K)
    seen_b = B32.view(np.float16).ravel()[:K * N].reshape(K, N)
    with np.errstate(all="ignore"):
        C = _fp32_product(seen_a, seen_b)
    assert not compare_gemm(C, A32.astype(np.float16), B32.astype(np.float16)).ok


# ------------------------------------------------------------------ on the CPU

needs_cxx = pytest.mark.skipif(cpu_step.host_compiler() is None, reason="no C++ compiler here")

NOTES_WARPS = ("const int warp_m = threadIdx.y / WN, warp_n = threadIdx.y % WN;",
               "const int warp_m = threadIdx.y / 8, warp_n = threadIdx.x / 8;")
NOTES_LAYOUT = ("wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;",
                "wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;")


def _with(edit):
    k = get("wmma_naive")
    assert edit[0] in k.source_text()
    return k.with_code(k.source_text().replace(*edit), name="wmma_naive (edited)",
                       source="13_wmma.cu")


@needs_cxx
@pytest.mark.parametrize("name", ["wmma_naive", "wmma_tiled"])
def test_both_kernels_run_right_in_the_cpu_emulation(name):
    ok, what = cpu_step.correct_on_cpu(get(name), {})
    assert ok, what


@needs_cxx
def test_the_emulation_stops_a_warp_whose_lanes_pass_different_pointers():
    ok, what = cpu_step.correct_on_cpu(_with(NOTES_WARPS), {})
    assert ok is False and "wmma::load_matrix_sync" in what and "lane 0 of its warp" in what
    # The message names the block's lowest disagreeing thread, the same at every run: with
    # the 8 x 8 warp index, lane 8 of warp 0 is the first whose tile is not lane 0's.
    assert "lane 8 of warp 0 (thread (8, 0, 0))" in what


@needs_cxx
def test_the_emulation_catches_b_read_as_col_major():
    ok, what = cpu_step.correct_on_cpu(_with(NOTES_LAYOUT), {})
    assert ok is False and "wrong at" in what


def test_the_warp_map_does_not_print_the_exercises_rule():
    import matplotlib
    matplotlib.use("Agg")
    from gemm_kernels.notebook import ch13_wmma
    titles = " ".join(a.get_title() for a in ch13_wmma.plot_warp_map())
    assert "threadIdx.y / WN" not in titles and "threadIdx.y % WN" not in titles


def test_the_profiler_times_are_said_to_run_at_locked_clocks():
    import re
    from gemm_kernels.notebook import ch13_wmma
    text = str(ch13_wmma.profiler_clocks())
    if "not recorded" in text:
        import pytest
        pytest.skip("the profile is not recorded")
    pairs = re.findall(r"([\d.]+) ms profiled, ([\d.]+) ms at the timed rate", text)
    assert "held the SM clock" in text and pairs
    assert all(float(p) > float(t) for p, t in pairs), text


def test_the_profile_names_stalls_in_words_and_counts_l2_hits():
    """The table's stall reasons read as in chapter 14 ('long scoreboard', not the raw
    metric's long_scoreboard), and the summary says the naive kernel's re-reads mostly hit
    in L2 before giving its DRAM bytes."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    t = ch13.profile_table()
    stalls = [r.get("largest stalls (cycles per issue)") for r in t]
    if not any(stalls):
        pytest.skip("the profile is not recorded")
    assert all("_" not in s for s in stalls if s)
    assert "long scoreboard" in stalls[0]
    assert "L2 hits" in str(ch13.naive_deeper_look())


def test_the_pace_table_ties_the_warps_to_the_registers():
    """The tiled kernel's warps per SM are set by its registers: the occupancy model
    says so, and the summary says it in words with the register file's size."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    t = ch13.pace_table()
    if not any(r.get("warps per scheduler") for r in t):
        pytest.skip("the profile is not recorded")
    assert "registers" in t[-1]["blocks per SM (limited by)"]
    assert all(isinstance(r["issue active %"], int) for r in t)
    # the GPU is named once in the section, by the profile table's caption
    gpu = ch13._gpu(ch13.study_recording())
    assert gpu not in t.title and gpu in ch13.profile_table().title
    text = str(ch13.pace_summary())
    regs = t[-1]["registers per thread"]
    assert "registers set the number of warps" in text
    assert f"The table's {regs} registers per thread leave room for 2 blocks" in text
    assert isinstance(ch13.pace_summary(), ch13.Markdown)


def test_the_pace_per_hmma_is_counted_from_the_recorded_counters():
    """Instructions and tensor-pipe cycles per HMMA are ratios of recorded counters, shown
    in the pace table, and they account for the padded kernel's pipe-busy share."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    assert ch13.hmma_pace({"sm__inst_executed_pipe_tensor_op_hmma.sum": 10,
                           "sm__pipe_tensor_op_hmma_cycles_active.sum": 60,
                           "smsp__inst_executed.sum": 58}) == (5.8, 6.0)
    assert ch13.hmma_pace({}) == (None, None)
    rows = [m for _, m in ch13.profile_rows() if m]
    if not rows:
        pytest.skip("the profile is not recorded")
    padded = rows[-1]
    every, per_hmma = ch13.hmma_pace(padded)
    _, _, issue = ch13.warp_pace(padded)
    busy = padded["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"]
    assert abs(issue / every * per_hmma - busy) <= 0.1 * busy
    assert all(r[c] for r in ch13.pace_table() for c in ch13.PER_HMMA)
    assert "At full issue" in str(ch13.pace_summary())


def test_the_naive_to_tiled_evidence_reads_the_profile():
    from gemm_kernels.notebook import ch13_wmma as ch13
    text = str(ch13.naive_to_tiled_evidence())
    if "not in the recording" in text:
        pytest.skip("the profile is not recorded")
    assert "DRAM read" in text and "long scoreboard" in text and " ms (x" in text


def test_the_first_loads_of_a_read_half_of_each_of_8_sectors():
    """The naive kernel's first LDG.E of A: 32 lanes x 4 bytes in rows 0-7, 16 bytes of
    each row, so half of 8 sectors of 32 bytes; the load at +0x10 reads the other half.
    The lane of each address is the one the compiled code computes (row lane / 4, column
    2 (lane % 4))."""
    import matplotlib
    matplotlib.use("Agg")
    from gemm_kernels.notebook import ch13_wmma as ch13
    cells = ch13.naive_a_loads()
    first = {rc: lane for rc, (lane, e) in cells.items() if e in (0, 1)}
    partner = {rc: lane for rc, (lane, e) in cells.items() if e in (4, 5)}
    assert len(first) == len(partner) == 64
    assert all(first[(lane // 4, 2 * (lane % 4) + h)] == lane
               for lane in range(32) for h in (0, 1))
    assert {(r, c + 8) for r, c in first} == set(partner)
    sector = lambda r, c: (r, 2 * c // 32)   # a tile row is 32 bytes, one sector
    assert {sector(*rc) for rc in first} == {sector(*rc) for rc in partner} == {
        (r, 0) for r in range(8)}
    ax = ch13.plot_naive_a_loads()
    outlined = [p for p in ax.patches if not p.get_fill()]
    assert len(outlined) == 8 and "sectors" in ax.get_title()


def test_the_naive_loads_show_the_transposes_of_b():
    """B is row-major, so its loaded pairs run along N; MOVM transposes them in registers
    before the HMMA that wants them along K."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    text = str(ch13.naive_loads())
    assert "MOVM." in text and text.index("MOVM.") < text.index("HMMA.")
    # each load is marked with the operand its register feeds in the first HMMA
    _, a, b, _ = map(int, re.search(r"HMMA\.16816\.F32 R(\d+), R(\d+), R(\d+), R(\d+)",
                                    text).groups())
    marks = re.findall(r"LDG\.E R(\d+),.*// ([AB])", text)
    assert len(marks) == 8 and {m for _, m in marks} == {"A", "B"}
    assert all(a <= int(r) < a + 4 for r, m in marks if m == "A")
    moved = set(re.findall(r"MOVM\.\S+ R(\d+),", text))
    assert moved == {r for r, m in marks if m == "B"}


def test_small_numbers_are_written_as_powers_of_ten():
    from gemm_kernels.notebook import ch13_wmma as ch13
    assert ch13._scientific(0.00012) == "1.2 x 10⁻⁴"
    assert ch13._scientific(2.9e-7) == "2.9 x 10⁻⁷"


def test_the_main_loop_is_the_backward_branch_with_the_most_hmma():
    """`main_loop` takes the K loop, not a small loop of the prologue or epilogue, and
    `loop_opcodes` counts it by group: every opcode in exactly one group."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    sass = "\n".join([".L_x_1:", "        /*0000*/ IADD3 R1, R1, 0x1, RZ ;",
                      "        /*0010*/ @P0 BRA `(.L_x_1) ;",
                      ".L_x_2:", "        /*0020*/ LDSM.16.M88.4 R4, [R2] ;",
                      "        /*0030*/ HMMA.16816.F32 R8, R4, R6, R8 ;",
                      "        /*0040*/ @P1 BRA `(.L_x_2) ;"])
    assert ch13.main_loop(sass) == ["LDSM.16.M88.4", "HMMA.16816.F32", "BRA"]
    from gemm_kernels.core import analysis
    assert analysis.loops(sass) == [(0x0, 0x10), (0x20, 0x40)]
    assert ch13.main_loop(sass.replace("HMMA.16816.F32", "FFMA")) == []
    text = str(ch13.loop_opcodes())
    import re
    total, hmma = map(int, re.search(r"(\d+) instructions for (\d+) HMMA", text).groups())
    groups = [int(n) for n in re.findall(r"^\* [^:]+: (\d+)", text, re.M)]
    assert hmma == 32 and sum(groups) == total and "LDSM" in text and "IMAD" in text


def test_the_naive_kernel_waits_on_narrow_loads_with_dram_far_from_busy():
    """The naive kernel's DRAM is busy a small share of its peak (the recorded counter),
    so the summary rules out bandwidth; its per-step wait is the product of the printed
    columns, each load touches 8 sectors (the L1's counters), and the MOVM account for
    the shared-pipe wavefronts; the evidence of the tiles counts global load
    instructions per HMMA from the counters."""
    import re
    from gemm_kernels.notebook import ch13_wmma as ch13
    rows = [m for _, m in ch13.profile_rows() if m]
    if not rows:
        pytest.skip("the profile is not recorded")
    assert rows[0]["dram__throughput.avg.pct_of_peak_sustained_elapsed"] < 20
    assert "DRAM bandwidth does not hold it back" in str(ch13.profile_waits())
    text = str(ch13.naive_deeper_look()).replace("\n", " ")
    assert "latency of its" not in text and "L2 bandwidth" not in text
    assert "8.0 sectors (256 bytes) per instruction" in text and "one per MOVM" in text
    assert "not shown" not in text and "suggests" not in text
    # each load uses half of every sector, and the L1 serves the rest: its share is
    # what the L2 did not see, from the two sector counts as printed
    assert "half of each sector" in text
    m = re.search(r"asked for ([\d,]+) M sectors .* passes only ([\d,]+) M .* serves (\d+)%",
                  text)
    l1, l2, share = (int(g.replace(",", "")) for g in m.groups())
    assert abs(100 * (1 - l2 / l1) - share) < 1
    assert "global load instructions per HMMA 4 -> 0.125" in str(ch13.naive_to_tiled_evidence())


def test_the_percent_of_cublas_is_computed_from_the_printed_rates():
    from gemm_kernels.notebook import ch13_wmma as ch13
    rows = ch13.rates_table()
    if not rows:
        pytest.skip("the rates are not recorded")
    for r in rows:
        assert r["TFLOP/s"] == float(f"{r['TFLOP/s']:.3g}")
        assert r["% of cuBLAS FP16"] == 100 * r["TFLOP/s"] / r["cuBLAS FP16 TFLOP/s"]


def test_the_timed_errors_share_one_format_and_the_loop_unroll_is_read():
    from gemm_kernels.notebook import ch13_wmma as ch13
    cells = [v for r in ch13.timed_errors() for k, v in r.items() if k != "kernel"]
    assert cells and all(re.fullmatch(r"\d\.\d{4}", v) for v in cells)
    assert "unrolled 4 times, and a 1-step copy of the body for the 0 to 3 trips left over" in " ".join(str(ch13.naive_loads()).split())


def test_the_pace_arithmetic_uses_the_printed_values_and_states_the_pipe_ceiling():
    import re
    from gemm_kernels.notebook import ch13_wmma as ch13
    text = str(ch13.pace_summary())
    if "not in the recording" in text:
        pytest.skip("the profile is not recorded")
    for a, b, c, pct in re.findall(r"([\d.]+) / ([\d.]+) x ([\d.]+) = (\d+)%", text):
        assert round(100 * float(a) / float(b) * float(c)) == int(pct)
    a, b, pct = re.search(r"at most (\d+) / ([\d.]+) = (\d+)% of the peak", text).groups()
    assert round(100 * int(a) / float(b)) == int(pct)


def test_the_ratio_and_the_errors_read_as_printed():
    """The FP16 / FP32 column is the ratio of the printed rates; the error table has one
    row per kernel and one column per size."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    for r in ch13.tensor_core_gain():
        got = float(f"{r['FP16 (FP32 accumulate) TFLOP/s']:.3g}") / float(f"{r['FP32 TFLOP/s']:.3g}")
        assert abs(r["FP16 / FP32"] - got) < 1e-9
    t = ch13.timed_errors()
    if len(t):
        assert [r["kernel"] for r in t] == ["wmma_naive", "wmma_tiled", "cublas_hgemm"]


def test_the_naive_loads_ask_the_data_stage_for_its_cycles_as_printed():
    """naive_data_stage: loads per cycle per SM times data-stage wavefronts per load,
    plus the MOVM's share, each rounded as printed, so the printed product and sum
    check; None where a counter is missing."""
    import re
    from gemm_kernels.notebook import ch13_wmma as ch13
    m = {"smsp__inst_executed_op_global_ld.sum": 400.0, "sm__cycles_elapsed.avg": 1000.0}
    l1 = {"waves": 8.0, "movm": 6.0}
    assert ch13.naive_data_stage(m, None, 4) is None
    assert ch13.naive_data_stage({}, l1, 4) is None
    assert ch13.naive_data_stage(m, l1, 4) == (0.1, 8.0, 0.8, 0.06, 0.86)
    if not [m for _, m in ch13.profile_rows() if m] or ch13.naive_l1_stages() is None:
        pytest.skip("the profile is not recorded")
    text = repr(ch13.naive_at_powers_of_two())
    rate, waves, asked = map(float, re.search(
        r"ask for ([\d.]+) x ([\d.]+) = ([\d.]+) of its cycles", text).groups())
    assert round(rate * waves, 2) == asked
    movm, total = map(float, re.search(r"for ([\d.]+) more: ([\d.]+) in all", text).groups())
    assert round(asked + movm, 2) == total
    assert "Little's law" not in text


def test_the_pace_is_a_numbered_derivation_with_its_conclusion_apart():
    """The padded kernel's pipe-busy share as five numbered steps, then the conclusion
    in its own paragraph."""
    import re
    from gemm_kernels.notebook import ch13_wmma as ch13
    text = str(ch13.pace_summary())
    if "not in the recording" in text:
        pytest.skip("the profile is not recorded")
    assert re.findall(r"^(\d)\. ", text, re.M) == ["1", "2", "3", "4", "5"]
    conclusion = text.split("\n\n")[2]
    assert conclusion.startswith("No scheduler sustains issue in every cycle")


def test_the_naive_loads_queue_at_the_l1s_data_stage_when_its_stages_are_recorded():
    """naive_l1_stages: the L1's stages in % of their peaks and data-stage wavefronts per
    load, from the study of their own; data_stage_queue states the queue with them, and the
    deeper look the other stages."""
    import re
    from gemm_kernels.notebook import ch13_wmma as ch13
    if not [m for _, m in ch13.profile_rows() if m]:
        pytest.skip("the profile is not recorded")
    l1 = ch13.naive_l1_stages()
    text = str(ch13.data_stage_queue())
    if l1 is None:
        assert "data stage" not in text
        return
    assert all(0 <= l1[k] <= 105 for k in ("data", "movm", "tag", "back"))
    assert l1["label"].startswith("recorded on") and l1["movm"] < l1["data"]
    # one data-stage wavefront per sector: the 8 rows a load touches
    assert l1["waves"] == pytest.approx(
        ch13.naive_sectors_per_load(ch13.profile_rows()[0][1]), rel=0.01)
    said = re.search(r"measured the data stage busy ([\d.]+)% of its peak", text)
    assert said and float(said.group(1)) == round(l1["data"], 1)
    # the bank reason: rows a multiple of 128 bytes apart, and most of the stage's
    # cycles are the loads' bank conflicts
    assert l1["row_bytes"] % 128 == 0 and f"{l1['waves']:.1f} wavefronts per load" in text
    assert 50 < l1["conflicts"] < l1["data"]
    assert f"bank conflicts {l1['conflicts']:.1f}% of that peak" in repr(
        ch13.naive_at_powers_of_two())
    # the queue is claimed only where the data stage is the busiest and near its peak
    assert "wait their turn there" in text and l1["data"] > max(l1["tag"], l1["back"]) > 0
    assert l1["data"] > 90
    assert "Is the data stage the only busy part" in str(ch13.naive_deeper_look())
    table = ch13.naive_l1_table()
    busy = {r["L1 stage"].split(" (")[0]: r["busy, % of peak"] for r in table}
    assert busy["data stage"] == round(l1["data"], 1) == max(busy.values())
    assert busy["tag stage"] == round(l1["tag"], 1) and l1["gpu"] in table.title


def test_the_power_of_two_fold_holds_the_control_and_the_deeper_look():
    """naive_at_powers_of_two: one fold under its question, with the control at both
    sizes and the naive kernel's counters in detail; section 8's main bullets keep only
    the data stage's verdict."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    fold = ch13.naive_at_powers_of_two()
    assert fold.summary == "Why the naive kernel is so slow at power-of-two sizes"
    text = repr(fold)
    assert str(ch13.stride_control()) in text and str(ch13.naive_deeper_look()) in text
    assert fold._repr_html_().startswith("<details>")
    assert "in all" not in str(ch13.profile_waits())


def test_the_stride_control_reads_both_sizes_of_one_profile():
    """stride_control: one line per size of the study (rows on and off a multiple of
    128 bytes), each with its wavefronts per load, its busy shares and its rate; until
    the study is recorded, one line that says so."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    from gemm_kernels.measure import studies
    text = str(ch13.stride_control())
    shapes = studies.get(ch13.STRIDE_STUDY).shapes
    assert [s[2] * 2 % 128 for s in shapes] == [0, 32]
    if "not recorded yet" in text:
        assert text.count("\n") == 0
        return
    lines = text.splitlines()
    assert lines[0].startswith("the naive kernel under Nsight Compute, recorded on")
    for line, shape in zip(lines[1:], shapes):
        assert line.startswith(f"  {shape[0]}³, rows {2 * shape[2]:,} bytes apart")
        assert f"(chapter 04's bank model: {ch13.bank_model_words(2 * shape[2])})" in line
        assert "data-stage wavefronts per load" in line and line.endswith("under the profiler")


def test_the_stride_ratio_sets_the_wavefronts_beside_the_rates():
    """stride_ratio: with the data stage full at both sizes, 1 / wavefronts per load
    predicts the rate; the sentence gives both ratios, each from the values
    stride_control prints; section 8's fold carries it, and its bullet on the data stage
    the rate ratio."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    sizes, _ = ch13.stride_sizes()
    text = ch13.stride_ratio()
    if sizes is None:
        assert text == ""
        return
    on, off = sizes
    w = [round(s["waves"], 1) for s in sizes]
    r = [round(s["rate"], 1) for s in sizes]
    assert f"{w[0]:.1f} / {w[1]:.1f} = {w[0] / w[1]:.1f} times" in text
    assert f"{r[1]:.1f} / {r[0]:.1f} = {r[1] / r[0]:.1f} times" in text
    assert f"({on['busy']:.1f}% and {off['busy']:.1f}%)" in text
    control = str(ch13.stride_control())
    assert f"{w[1]:.1f} data-stage wavefronts" in control and f"{r[1]:.1f} TFLOP/s" in control
    assert text in repr(ch13.naive_at_powers_of_two())
    assert f"{r[1] / r[0]:.1f} times as fast under the profiler" in str(ch13.data_stage_queue())
    assert "data stage" not in str(ch13.profile_waits())


def test_register_budget_asks_for_two_blocks_and_counts_the_accumulators():
    """register_budget: the tiled kernel asks for 2 blocks of 256 threads, so up to 128
    registers a thread (65,536 / 512); 3 blocks would allow at most 80 (65,536 / 768 =
    85, in the allocation unit's steps); 8 fragments of 16 x 16 FP32 over 32 lanes are
    64 registers; the pace summary says so."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    from gemm_kernels.measure import studies
    assert ch13.register_budget(studies.get(ch13.STUDY).steps[2]) == (2, 128, 80, 64)
    text = str(ch13.pace_summary())
    if "not in the recording" not in text:
        assert "asks for 2 blocks per SM" in text and "at most 80" in text


def test_the_bank_model_counts_words_on_the_busiest_bank():
    """bank_model_words: 8 rows of 16 bytes a multiple of 128 bytes apart share four
    banks (8 wavefronts); 32 bytes past one, rows r and r + 4 share theirs (2); 80 bytes
    apart (a padded row of A) they share none (1)."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    assert ch13.bank_model_words(8192) == 8
    assert ch13.bank_model_words(8224) == 2
    assert ch13.bank_model_words(80) == 1


def test_the_pace_analysis_folds_the_table_its_arithmetic_and_the_loop():
    """pace_analysis: one fold holding the pace table, its arithmetic (numbered steps
    as an ordered list) and the main loop's opcode groups (a list)."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    html = ch13.pace_analysis()._repr_html_()
    assert html.startswith("<details><summary>") and html.count("<details>") == 1
    assert ch13.pace_table()._repr_html_() in html
    assert "<ol><li>" in html and "<ul><li>" in html and "issue active" in html
    assert "Branches and address arithmetic together" in html


def test_the_deeper_look_is_paragraphs_each_under_its_question():
    """naive_deeper_look: Markdown paragraphs, each opened by a bold question, no
    preformatted block; the fold shows them as paragraphs."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    text = str(ch13.naive_deeper_look())
    if "not in the recording" in text:
        pytest.skip("the profile is not recorded")
    paragraphs = text.split("\n\n")
    assert len(paragraphs) >= 4
    assert all(p.startswith("**") and "?**" in p for p in paragraphs)
    html = ch13.naive_at_powers_of_two()._repr_html_()
    assert "Who serves the re-reads?</b>" in html and "Re-reads." not in html


def test_the_tiled_kernels_helpers_are_shown_folded_with_it():
    """tiled_helpers: TileLoader (its 16-byte loads and padded stores) and
    gemm_epilogue (the beta == 0 branch), under one fold."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    fold = ch13.tiled_helpers()
    text = str(fold.inner)
    assert text.startswith("// Copy one BR x BC tile") and "struct TileLoader" in text
    assert "void store(half (*tile)[BC + PAD])" in text
    assert "// from common.cuh:" in text and "gemm_epilogue(T acc" in text
    assert "hgemm_wmma_tiled" not in text
    assert fold._repr_html_().startswith("<details>")


def test_the_ncu_command_asks_for_the_profile_tables_counters():
    """ncu_command: the study's kernels and every counter of PROFILE_METRICS, each one
    the study records."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    from gemm_kernels.measure import studies
    text = str(ch13.ncu_command().inner)
    assert text.startswith("ncu ") and "hgemm_wmma_naive|hgemm_wmma_tiled" in text
    import re
    recorded = [r for w in studies.get(ch13.STUDY).metrics
                for r in ([w] if isinstance(w, str) else w)]
    for m in ch13.PROFILE_METRICS:
        assert m in text
        assert any(m == r or r.startswith("re:") and re.search(r[3:], m) for r in recorded)


def test_the_chapters_captions_name_the_gpu_alone():
    """The chapter's own captions give the GPU only (the banner gives the days); the
    ladder plot, shared with chapters 14 and 15, keeps the whole label."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    rec = ch13.recording()
    if rec is None:
        pytest.skip("no recording holds chapter 13's rows")
    title = str(ch13.rates_table(rec=rec).title)
    assert f"({ch13._gpu(rec)})" in title and "recorded on" not in title
    assert not ch13._gpu(rec).startswith("NVIDIA ")
    assert "recorded on" in str(ch13.which_recording())


def test_the_swizzle_task_is_graded_by_the_bank_model():
    """check_swizzle: the identity costs what an unpadded tile costs (the model of
    ldmatrix_analysis), a map that is not one-to-one is refused by row, r & 3 halves the
    cost without reaching 4, and c ^ ((r >> 1) & 3) reaches the least, 4."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    plain = ch13.ldmatrix_analysis(32).wavefronts
    assert ch13.swizzled_ldsm_wavefronts(lambda r, c: c) == [plain, plain] == [16, 16]
    assert "row 0" in str(ch13.check_swizzle(lambda r, c: 0))
    assert ch13.swizzled_ldsm_wavefronts(lambda r, c: c ^ (r & 3)) == [8, 8]
    assert "?" in str(ch13.check_swizzle(lambda r, c: c ^ (r & 3)))
    assert str(ch13.check_swizzle(lambda r, c: c ^ ((r >> 1) & 3))).startswith("right")
    assert "write your" in str(ch13.check_swizzle(None))


def test_the_excess_off_the_stride_is_read_from_the_conflict_share():
    """At the off-stride size the conflicts' share of the busy stage, as wavefronts per
    load, is at most the model's conflicts: the excess over the model is not conflicts."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    sizes, _ = ch13.stride_sizes()
    if sizes is None:
        pytest.skip("stride study not recorded")
    off = sizes[-1]
    share = off["conflicts"] / off["busy"]
    model = ch13.bank_model_words(2 * off["shape"][2])
    text = ch13.stride_excess()
    assert f"{share:.0%} of its busy cycles" in text
    assert f"about {share * off['waves']:.1f} of a load's {off['waves']:.1f}" in text
    assert round(share * off["waves"], 1) <= model - 1 < off["waves"] - model
    assert "not bank conflicts" in text and text in repr(ch13.naive_at_powers_of_two())


def test_the_stride_bank_table_gives_the_model_per_offset_and_the_measure_where_profiled():
    """stride_bank_table: one row per offset past a multiple of 128 bytes, the bank
    model's wavefronts (8, 1, 2, 1, 4 for 0, 16, 32, 48, 64 bytes: not a straight line)
    beside the measured ones at the sizes the stride study profiled, "-" elsewhere."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    t = ch13.stride_bank_table()
    assert [r["past a multiple of 128"] for r in t] == [0, 16, 32, 48, 64]
    assert [r["wavefronts per load, the model"] for r in t] == [8, 1, 2, 1, 4]
    assert [r["size"] for r in t] == ["4096³", "4104³", "4112³", "4120³", "4128³"]
    assert t[0]["where each row starts"] == "on the same 4 banks as the one before"
    assert t[2]["where each row starts"] == "8 banks after the one before"
    sizes, _ = ch13.stride_sizes()
    if sizes is None:
        assert all(r["measured"] == "-" for r in t) and "not recorded" in t.title
        return
    got = {r["rows apart (bytes)"]: r["measured"] for r in t}
    for s in sizes:
        assert got.pop(f"{2 * s['shape'][2]:,}") == f"{s['waves']:.1f}"
    assert set(got.values()) == {"-"}


def test_the_profiled_times_over_the_timed_beside_the_clock_ratio():
    """profiler_ratios: per kernel profiled and timed, its profiled time over its timed
    one beside the top clock over the profiler's, each from the values as printed by
    profiler_clocks (evidence.profiled_and_timed, which profiled_against_timed prints)."""
    import re
    from gemm_kernels.notebook import ch13_wmma as ch13, evidence
    steps = evidence.profiled_and_timed(ch13.STUDY, (4096,) * 3, ch13.study_recording())
    text = str(ch13.profiler_ratios())
    if not [s for s in steps if s["timed_ms"]]:
        assert "not both recorded" in text
        return
    clocks = str(ch13.profiler_clocks())
    lines = text.splitlines()
    assert len(lines) == len([s for s in steps if s["timed_ms"] and s["clock_mhz"]])
    for line in lines:
        p, t, r = map(float, re.search(r"= ([\d.]+) / ([\d.]+) = ([\d.]+);", line).groups())
        assert f"{p:g} ms profiled, {t:g} ms at the timed rate" in clocks
        assert round(p / t, 2) == r
        top, held, c = (float(x.replace(",", "")) for x in re.search(
            r"top clock / the profiler's = ([\d,]+) / ([\d,]+) = ([\d.]+)$", line).groups())
        assert round(top / held, 2) == c and c > r


def test_the_data_stage_sentences_follow_the_bank_table():
    """data_stage_queue: the data stage's busy share and wavefronts per load at 4096³ and
    the off-stride size's wavefronts and rate ratio; profile_waits no longer names the
    data stage (it is defined after it)."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    text = str(ch13.data_stage_queue())
    if ch13.naive_l1_stages() is None:
        return
    assert text.startswith("At 4096³ Nsight Compute measured the data stage busy")
    assert "wavefronts" not in str(ch13.profile_waits())


def test_the_tiled_kernel_reading_guide_points_at_its_numbered_lines():
    """tiled_where_to_look: each range it names starts and ends on the lines of
    tiled_listing that hold what it says (the double buffer's loads and stores, the
    fragment loads, the epilogue)."""
    import re
    from gemm_kernels.notebook import ch13_wmma as ch13
    listing = str(ch13.tiled_listing()).split("\n")
    guide = str(ch13.tiled_where_to_look())
    ranges = [tuple(map(int, m)) for m in re.findall(r"lines (\d+)-(\d+)", guide)]
    assert len(ranges) == 6

    def line(n):
        number, text = listing[n - 1].split("  ", 1)
        assert int(number) == n
        return text
    tiles, first, top, bottom, frags, epilogue = ranges
    assert "A_BYTES" in line(tiles[0]) and "auto Bs" in line(tiles[1])
    assert "row0, 0)" in line(first[0]) and "__syncthreads" in line(first[1])
    assert "cur = t & 1" in line(top[0]) and "(t + 1) * BK" in line(top[0] + 2)
    assert "As[cur ^ 1]" in line(bottom[0] + 1) and "__syncthreads" in line(bottom[1])
    assert "for (int kk = 0" in line(frags[0]) and frags[1] == bottom[0] - 1
    assert "Epilogue" in line(epilogue[0]) and epilogue[1] == len(listing)


def test_the_ldsm_model_gives_fewer_wavefronts_per_hmma_for_bigger_warp_tiles():
    """A 4 x 2 warp tile loads 6 fragments (4 wavefronts each) for 16 HMMA: 1.5 per HMMA;
    a 4 x 4 tile loads 8 for 32: 1.0."""
    from gemm_kernels.notebook import ch13_wmma as ch13
    assert ch13.ldsm_wavefronts_per_hmma(4, 2) == 1.5
    assert ch13.ldsm_wavefronts_per_hmma(4, 4) == 1.0
    assert ch13.ldsm_wavefronts_per_hmma(1, 1) == 4.0


def test_the_shared_stage_ceiling_is_computed_from_the_profile_as_printed():
    """The ceiling shared memory sets: wavefronts per HMMA from the padded kernel's
    counters, the full pipe's HMMA per cycle, their product against one wavefront per
    cycle; each printed step redoes from the printed values."""
    import re
    from gemm_kernels.notebook import ch13_wmma as ch13
    text = str(ch13.shared_stage_ceiling())
    if "not in the recording" in text:
        pytest.skip("the profile is not recorded")
    ld, st, other, total, hmma, per = map(float, re.search(
        r"([\d.]+) M loads \+ ([\d.]+) M stores \+ ([\d.]+) M other = ([\d.]+) M, for "
        r"([\d.]+) M HMMA: ([\d.]+) per HMMA", text).groups())
    assert abs(ld + st + other - total) <= 0.11 and abs(total / hmma - per) <= 0.01
    full, waves, asked = map(float, re.search(
        r"would have to pass ([\d.]+) x ([\d.]+) = ([\d.]+) wavefronts", text).groups())
    assert waves == per and abs(full * waves - asked) <= 0.005
    one, a, pct = re.search(r"caps the pipe at (\d+) / ([\d.]+) = (\d+)% busy", text).groups()
    assert round(100 * int(one) / float(a)) == int(pct) and int(pct) < 100
    # the stage's busy share and the pipe's agree through the wavefronts per HMMA
    stage = int(re.search(r"The stage is already (\d+)% busy", text).group(1))
    b, a2, c = map(float, re.search(r"asks ([\d.]+) x ([\d.]+) = ([\d.]+) of the stage",
                                    text).groups())
    assert a2 == float(a) and abs(b * a2 - c) <= 0.005 and abs(100 * c - stage) <= 5


def test_the_padding_store_cost_says_how_much_the_stores_grow():
    import re
    from gemm_kernels.notebook import ch13_wmma as ch13
    text = str(ch13.padding_store_cost())
    if "not in the recording" in text:
        pytest.skip("the profile is not recorded")
    before, after = map(float, re.search(r"of ([\d.]+) M store wavefronts are conflicts "
                                         r"without padding, [\d.]+ M of ([\d.]+) M", text).groups())
    added, pct = re.search(r"adds ([\d.]+) M store wavefronts, (\d+)% more", text).groups()
    assert abs(after - before - float(added)) <= 0.05
    assert round(100 * float(added) / before) == int(pct)
