"""Chapter 00's count of the naive kernel's bytes per level
(gemm_kernels.notebook.ch01_naive_dram), on a small fake recording whose numbers are
test data, never measurements."""
import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gemm_kernels.core import device  # noqa: E402
from gemm_kernels.core.kernels import get  # noqa: E402
from gemm_kernels.core.table import bytes_text  # noqa: E402
from gemm_kernels.measure import records, roofline  # noqa: E402
from gemm_kernels.notebook import ch01_naive_dram as ch  # noqa: E402

GPU = {"name": "Test GPU", "compute_capability": "9.0", "sm_count": 100,
       "sm_clock_mhz": 2000.0, "fp32_lanes_per_sm": 128, "memory_clock_mhz": 3000.0,
       "memory_bus_bits": 4096, "l2_bytes": 50 << 20}
N = 4096
SHAPE = [N, N, N]
METRICS = {"dram__bytes_read.sum": 4e9, "dram__bytes_write.sum": 1e9,
           "dram__throughput.avg.pct_of_peak_sustained_elapsed": 0.5,
           "lts__t_sector_hit_rate.pct": 60.0,
           "lts__t_sectors_srcunit_tex_op_read.sum": 3e8,
           "lts__t_sectors_srcunit_tex_op_write.sum": 1e8,
           "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 4e10,
           "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 1e10,
           "smsp__inst_executed_op_global_ld.sum": 2e9}
GFLOPS, COPY_GBPS = 500.0, 3000.0


def _spread(v):
    return {"median": v, "min": v, "max": v}


@pytest.fixture
def recording(monkeypatch):
    """A fake recording: the naive kernel's rate and its study row, and a device copy."""
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    device._gpu_present.cache_clear()

    def install(with_study=True):
        k = get("naive")
        base = {"chapter": k.chapter, "kernel": "naive", "params": k.resolve(None),
                "shape": SHAPE, "source": k.source_hash()}
        rows = [{"chapter": "00", "kernel": "device_copy", "params": {},
                 "shape": list(roofline.COPY_SHAPE), "gbps": _spread(COPY_GBPS)},
                {**base, "gflops": _spread(GFLOPS)}]
        if with_study:
            rows.append({**base, "metrics": dict(METRICS), "study": ch.STUDY, "run": "r"})
        rec = records.Record(GPU, "2026-01-01T00:00:00Z", "abc", rows, runs={"r": {}})
        monkeypatch.setattr(records, "_LOADED", {"record": rec})
    yield install
    plt.close("all")


def ax_labels(ax):
    return " ".join(t.get_text() for t in ax.get_yticklabels())


def test_traffic_turns_counts_into_bytes_and_yardsticks(recording):
    recording()
    t = ch.traffic()
    assert t["bytes"] == {"L1": 32 * 5e10, "L2": 32 * 4e8, "DRAM": 5e9}
    assert t["matrices"] == 3 * N * N * 4
    ms = 2 * N ** 3 / (GFLOPS * 1e9) * 1e3
    assert t["ms"] == pytest.approx(ms)
    assert t["dram_limit"] == pytest.approx(COPY_GBPS * 1e9 * ms * 1e-3)
    assert t["dram_gbps"] == pytest.approx(COPY_GBPS)
    assert t["flop_per_dram_byte"] == pytest.approx(2 * N ** 3 / 5e9)
    assert t["dram_roof"] == pytest.approx(COPY_GBPS * 2 * N ** 3 / 5e9)
    assert t["sectors_per_load"] == 20.0
    assert t["lane_bytes"] == 2e9 * 32 * 4      # every lane of every load gets 4 B
    assert t["dram_busy_pct"] == 0.5 and t["l2_hit_pct"] == 60.0


def test_summary_is_a_table_of_each_level_against_its_limit(recording):
    """One row per level: DRAM against the device copy over the timed run (as chapter 00
    reads the same bytes), the L2 with DRAM's limit as a floor under its own (none is
    measured), and the bytes the L1 delivered to the lanes beside its byte width. The
    sector bytes it looked up get a row but no byte limit: the L1's pace is counted in
    wavefronts."""
    recording()
    table = ch.summary()
    t = ch.traffic()
    assert [r["level"].split(" ")[0] for r in table] == ["DRAM", "L2", "L1,", "L1,"]
    dram, l2, looked, width = table
    assert looked["bytes"] == bytes_text(t["bytes"]["L1"]) and looked["share of the limit"] == "-"
    assert "wavefronts" in looked["limit"]
    assert "delivered to the lanes" in width["level"]
    # under the chart, which names the recording, the table can leave it out
    assert table.title.endswith(f"({ch.records.source()})")
    assert ch.summary(label=False).title.endswith("each level's bytes against its limit")
    timed = 5e9 / (t["ms"] * 1e-3) / (t["dram_gbps"] * 1e9)
    assert dram["share of the limit"] == f"{timed:.1%}"
    assert "(4 GB read, 1 GB written)" in dram["level"]
    assert l2["bytes"] == "12.8 GB" and "not a limit here" in l2["limit"]
    assert l2["share of the limit"] == "-"
    assert "32 banks x 4 B" in width["limit"] and width["limit"].endswith("for comparison")
    lanes = 2e9 * 128 / (t["ms"] * 1e-3)
    assert width["share of the limit"] == f"{lanes / (device.smem_bandwidth_gbps(GPU) * 1e9):.0%}"


def test_bytes_plot_draws_six_bars_in_order_and_the_dram_limit(recording):
    recording()
    ax = ch.bytes_plot()
    widths = [p.get_width() for p in ax.patches]
    t = ch.traffic()
    l1_limit = device.smem_bandwidth_gbps(GPU) * 1e9 * t["ms"] * 1e-3
    # the L1's sector bytes, the bytes it delivered to the lanes, then the byte width as
    # its own dotted bar, for comparison, then DRAM's limit
    assert widths == [t["matrices"], 5e9, 32 * 4e8, 32 * 5e10, 2e9 * 128,
                      pytest.approx(l1_limit), pytest.approx(t["dram_limit"])]
    labels = ax_labels(ax)
    assert "sector bytes looked up" in labels and "bytes delivered to the lanes" in labels
    assert ax.patches[5].get_gid().startswith("L1: its byte width")
    assert ax.patches[5].get_hatch() == ".." and ax.patches[6].get_hatch() == "//"
    # the sector bytes get no byte limit (the L1's pace is in lines)
    assert not ax.get_lines()
    assert ax.get_xscale() == "log"
    # one axis of bytes: the bar labels carry each multiple of A, B and C
    assert len(ax.child_axes) == 0
    assert not [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    # DRAM's limit is the hatched bar alone: no line runs through the L1's bars
    assert not any(x.get_text().strip() == "DRAM limit" for x in ax.texts)


def test_without_the_study_nothing_is_invented(recording, capsys):
    recording(with_study=False)
    assert ch.traffic() is None
    assert str(ch.summary()).startswith("Not in this recording")
    assert ch.bytes_plot() is None
    assert "Not in this recording" in capsys.readouterr().out


@pytest.mark.parametrize("n, text", [(201326592, "201 MB"), (8.526e9, "8.53 GB"),
                                     (2.268e12, "2.27 TB"), (1165e9, "1.17 TB"),
                                     (999.0, "999 B"), (2.5e15, "2,500 TB")])
def test_bytes_text_uses_powers_of_ten(n, text):
    assert bytes_text(n) == text


def test_without_a_device_copy_the_limit_uses_the_theoretical_bandwidth(recording, monkeypatch):
    recording()
    monkeypatch.setattr(roofline, "ceilings", lambda props: [
        {"level": "DRAM", "gbps": device.peak_bandwidth_gbps(props), "kind": "theoretical",
         "how": ""}])
    t = ch.traffic()
    assert t["dram_how"] == "the theoretical"
    assert t["dram_gbps"] == pytest.approx(device.peak_bandwidth_gbps(GPU))
    assert "the theoretical" in ax_labels(ch.bytes_plot())


def test_a_row_profiled_on_another_gpu_is_not_used(recording, monkeypatch):
    recording()
    assert ch.traffic()["dram_how"] == "the device copy's"
    monkeypatch.setattr(records, "described_device", lambda: {**GPU, "name": "Other GPU"})
    assert ch.traffic() is None


def test_the_stall_table_gives_the_reasons_of_the_recorded_profile():
    """The direct evidence that the loads hold the naive kernel back: chapter 02's
    profile of the same settings, each large reason with its cycles and share."""
    t = ch.stall_table({"BLOCK": 32, "MAPPING": "x->row"})
    if not hasattr(t, "columns"):
        pytest.skip("chapter 02's profile is not recorded here")
    assert "lg throttle" in t[0]["reason"] and "queue of global loads" in t[0]["reason"]
    assert t[-1]["reason"] == "in all" and "Nsight Compute at 2048^3," in t.title
    assert t.title.endswith(f"({ch.records.recording_label()})")
    assert str(ch.stall_table({"BLOCK": 3, "MAPPING": "x->row"})).startswith("Not in")


def test_the_bytes_plot_title_states_the_verdict(recording):
    """The figure stands alone: its title gives DRAM's share of its limit as a percentage
    (the table's form) and how many times DRAM's bytes the L1 looked up."""
    recording()
    t = ch.traffic()
    ax = ch.bytes_plot()
    ax = ax if hasattr(ax, "get_title") else ax.axes[0]
    assert f"DRAM at {5e9 / t['dram_limit']:.1%} of its limit" in ax.get_title()
    assert "the L1 looking up 320 x DRAM's bytes" in ax.get_title()     # 1.6 TB / 5 GB
    # the lanes' bytes are computed from the requests, not counted: the title says so
    assert "the lanes' bytes derived" in ax.get_title()


def test_the_stall_table_leaves_out_the_issuing_warp_as_the_stall_plot_does(monkeypatch):
    """Chapter 02's stall plot sums every reason but "selected" (the warp that issues);
    the table must give the same total, or the two chapters print different numbers.
    Reasons under 2% of the wait are summed in one row."""
    from types import SimpleNamespace
    from gemm_kernels.notebook import evidence
    params = {"BLOCK": 32, "MAPPING": "x->row"}
    step = SimpleNamespace(kernel="naive", params=params)
    monkeypatch.setattr(ch.studies, "results", lambda study: [(step, {"row": 1})])
    monkeypatch.setattr(ch.studies, "get", lambda study: SimpleNamespace(shapes=[(8, 8, 8)]))
    monkeypatch.setattr(evidence, "stall_reasons", lambda row: {
        "lg throttle": 89.0, "long scoreboard": 10.0, "wait": 1.0, "selected": 1.0})
    t = ch.stall_table(params)
    assert [r["share"] for r in t] == ["89%", "10%", "1%", "100%"]
    assert t[2]["reason"] == "the other reasons together"
    assert t[-1]["cycles per issued instruction"] == 100.0


def test_the_issue_pace_reads_the_stall_total_as_cycles_between_issues(monkeypatch):
    """Warps per issue (every state, "selected" included) is a warp's cycles between two
    instructions; the warps per scheduler over it is the share of cycles a scheduler
    issues, set beside the profiler's own count."""
    from types import SimpleNamespace
    params = {"BLOCK": 32, "MAPPING": "x->row"}
    step = SimpleNamespace(kernel="naive", params=params)
    row = {"metrics": {
        "sm__warps_active.avg.pct_of_peak_sustained_active": 100.0,
        ch.ISSUED: 4.0,
        "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": 399.0,
        "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio": 1.0}}
    monkeypatch.setattr(ch.studies, "results", lambda study: [(step, row)])
    text = str(ch.issue_pace(params))
    assert text.startswith(f"Nsight Compute, {ch.records.recording_label()}.\n")
    assert "every 400 cycles (the 399 it waits" in text
    assert "16.0 / 400 = 4.0% of its cycles; Nsight Compute counted 4.0%" in text
    # the L1's side: 64 warps x 33 L1 cycles per step over the loop's instructions per step
    assert "64.0 x 33 / 4.56 = 463 cycles, against the 400 above" in text
    # folded under the stall table, which names the recording, it can leave it out
    assert str(ch.issue_pace(params, label=False)) == text.split("\n", 1)[1]
    monkeypatch.setattr(ch.studies, "results", lambda study: [])
    assert str(ch.issue_pace(params)).startswith("Not in this recording")


def _one_profiled_request(monkeypatch):
    """A recording whose profile of naive x->row (BLOCK = 32) has one million load
    requests of 16.5 sectors and wavefronts each, over 2.5 million cycles per SM."""
    from types import SimpleNamespace
    from gemm_kernels.memory import ch01_02_sectors
    params = {"BLOCK": 32, "MAPPING": "x->row"}
    step = SimpleNamespace(kernel="naive", params=params)
    row = {"shape": [64, 64, 64], "metrics": {
        ch01_02_sectors.REQUESTS_LD: 1e6, ch01_02_sectors.WAVEFRONTS: 16.5e6,
        ch01_02_sectors.SECTORS_LD: 16.5e6, ch01_02_sectors.CYCLES: 2.5e6}}
    monkeypatch.setattr(ch.studies, "results", lambda study: [(step, row)])
    return params, row


def test_counts_per_step_splits_a_and_b_beside_nsight_compute(monkeypatch):
    """Per step: the lines, sectors and busiest bank's words of A's and B's loads from
    the index expressions (32 + 1 = 33 each), beside the sectors and wavefronts Nsight
    Compute counted for both loads together."""
    params, row = _one_profiled_request(monkeypatch)
    t = ch.counts_per_step(params)
    assert [r["count"].split(" (")[0] for r in t] == ["128-byte lines", "32-byte sectors",
                                                      "words on the busiest L1 bank"]
    assert [(r["A's load"], r["B's load"], r["per step (A + B), from the indices"])
            for r in t] == [(32, 1, 33)] * 3
    # the wavefronts stand on the lines' row, beside the lines they equal
    assert "Nsight Compute: L1 wavefronts" in t[0]["count"]
    assert [r["per step, Nsight Compute"] for r in t] == ["33.00", "33.00", "-"]
    assert "at 64 x 64 x 64" in t.title
    # a recorded profile names the GPU it was recorded on, whatever GPU runs the notebook
    assert t.title.endswith(f"{ch.records.recording_label()})")
    monkeypatch.setattr(ch.studies, "results", lambda study: [])
    assert str(ch.counts_per_step(params)).startswith("Not in this recording")


def test_l1_pace_is_over_the_profilers_cycles(monkeypatch):
    """Per SM and cycle, the wavefronts over the SMs of the GPU profiled (the
    recording's, not a live GPU with another SM count) and the profiler's own count of
    each SM's cycles, so that no clock is assumed; then the bytes looked up per request."""
    from types import SimpleNamespace
    from gemm_kernels.memory import ch01_02_sectors
    params, row = _one_profiled_request(monkeypatch)
    monkeypatch.setattr(records, "described_device",
                        lambda: {"name": "Live GPU", "sm_count": 40})
    monkeypatch.setattr(ch.records, "current", lambda: SimpleNamespace(
        device={"name": "Profiled GPU", "sm_count": 10}))
    text = str(ch.l1_pace(params))
    assert "0.02 billion wavefronts / 10 SMs (the Profiled GPU profiled) / 2.5 million cycles" in text
    assert f"= {16.5e6 / 10 / 2.5e6:.2f} wavefronts\n" in text
    assert text.endswith("16.50 sectors x 32 B = 528 B looked up, to deliver 32 lanes x 4 B = 128 B")
    # the main text's one line, the wavefronts per SM and cycle; section D's, the bytes
    assert str(ch.l1_pace(params, part="pace")) == text.split("\n")[0]
    assert str(ch.l1_pace(params, part="bytes")) == text.split("\n")[1]
    del row["metrics"][ch01_02_sectors.CYCLES]
    assert str(ch.l1_pace(params)).startswith("Not in this recording")


def test_ncu_commands_profile_the_bytes_the_stall_and_both_wavefront_studies():
    text = str(ch.ncu_commands())
    assert text.count("ncu --target-processes all") == 4
    assert f"--target {ch.STUDY}" in text and f"--target {ch.STALL_STUDY}" in text
    # the x->row profile comes before x->col's, as section H describes them
    assert text.index(f"--target {ch.XROW_STUDY}") < text.index(f"--target {ch.XCOL_STUDY}")
    assert "dram__bytes_read.sum" in text
    # a pattern is written as ncu reads it (regex:), quoted so that the line runs in a shell
    assert "'regex:^smsp__average_warps_issue_stalled_" in text and "'re:" not in text


def test_xcol_counted_sets_wavefronts_beside_sectors_and_lines(monkeypatch):
    """For the naive kernel's x->col loads, per load request: the sectors and wavefronts
    Nsight Compute counted, and the lines of the index expressions."""
    from gemm_kernels.memory import ch01_02_sectors
    row = {"shape": [2048] * 3, "metrics": {
        ch01_02_sectors.REQUESTS_LD: 1e6, ch01_02_sectors.WAVEFRONTS: 1e6,
        ch01_02_sectors.SECTORS_LD: 2.5e6}}
    monkeypatch.setattr(ch, "_naive_rows", lambda study, size:
                        [({"BLOCK": 32, "MAPPING": "x->col"}, row)])
    text = str(ch.xcol_counted(blocks=(32,)))
    # which counts are the profiler's and which the index expressions'
    assert text.startswith("x->col, per warp and step at 2048^3 (sectors and wavefronts "
                           "counted by Nsight Compute, lines from the index expressions)")
    assert text.endswith("BLOCK = 32: 5.00 sectors, 2 lines, 2.00 wavefronts.")
    assert str(ch.xcol_counted(blocks=(32, 16))).startswith("Not in this recording")


def test_wavefronts_per_step_reads_x_col_from_its_own_profile(recorded_mode):
    """x->col's wavefronts come from the naive kernel's own profile: 5, 3, 2 per step
    at BLOCK = 8, 16, 32, as its lines."""
    counted = ch.wavefronts_per_step()
    assert [round(counted[("x->col", b)]) for b in (8, 16, 32)] == [5, 3, 2]

