"""Chapter 00's tables and excerpts (gemm_kernels.notebook.ch00_ceilings), on a small
fake recording whose numbers are test data; and the l2_read appendix, compiled here."""
import pytest

from conftest import stamp
from gemm_kernels.core import device
from gemm_kernels.measure import records
from gemm_kernels.notebook import ch00_ceilings

GPU = {"name": "Test GPU", "compute_capability": "9.0", "sm_count": 100,
       "sm_clock_mhz": 2000.0, "fp32_lanes_per_sm": 128, "memory_clock_mhz": 3000.0,
       "memory_bus_bits": 4096, "l2_bytes": 50 << 20}


def _spread(median, lo, hi):
    return {"median": median, "min": lo, "max": hi}


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    device._gpu_present.cache_clear()
    rows = [{"chapter": "00", "kernel": "cublas", "params": {}, "shape": [n, n, n],
             "gflops": _spread(1000.0 * n / 1024, 900.0, 1100.0), "error_over_bound": 0.01}
            for n in (1024, 2048)]
    rows.append({"chapter": "00", "kernel": "timing_pitfalls", "params": {},
                 "shape": [4096] * 3, "metrics": {"host_timer_without_sync_ms": 0.02,
                                                  "events_random_ms": 2.0,
                                                  "events_zeros_ms": 1.999}})
    from gemm_kernels.core.kernels import KERNELS
    for t in ("float", "double"):
        for r in (4, 32):
            rows.append({"chapter": "10", "kernel": "copy",
                         "params": KERNELS["copy"].resolve({"T": t, "TILE": 32, "ROWS": r}),
                         "shape": [8192, 8192], "gbps": _spread(100.0 * r, 90.0, 110.0),
                         "reference": {"kernel": "device_copy",
                                       "gbps": _spread(4000.0, 3900.0, 4100.0)}})
    rec = records.Record(GPU, "2026-01-01T00:00:00Z", "abc", stamp(rows), runs={"r": {}})
    monkeypatch.setattr(records, "_LOADED", {"record": rec})
    yield rec


def test_cublas_table_shows_the_spread_and_the_share_of_the_peak(fake):
    t = ch00_ceilings.cublas_table()
    assert [r["size"] for r in t] == ["1024^3", "2048^3"]      # 4096 and 8192 not recorded
    peak = device.peak_fp32_gflops(GPU)
    assert t[1]["% of FP32 peak"] == f"{100 * 2000.0 / peak:.0f}%"
    assert t[0]["slowest to fastest call"] == "0.9 to 1.1"
    assert "cuBLAS same run" not in t.columns and "% of cuBLAS" not in t.columns


def test_few_tiles_bound_sets_the_busy_sms_peak_against_cublas(fake):
    # 1024^3 with 128 x 128 tiles: 64 blocks on 64 of 100 SMs, 64 x 128 x 2 x 2 GHz
    # = 32.8 TFLOP/s; the fake cuBLAS runs at 1 TFLOP/s, within it
    text = str(ch00_ceilings.few_tiles_bound())
    assert "1024^2 / 128^2 = 64 blocks" in text and "64 of the 100 SMs" in text
    assert "64 x 128 x 2 x 2.000 GHz = 32.8 TFLOP/s" in text
    assert "1.0 TFLOP/s (median; fastest call 1.1)" in text
    assert "does not rule out" in text
    # 2048^3 (the fake cuBLAS: 2 TFLOP/s) in 1024 x 1024 tiles: 4 SMs, 2.048 TFLOP/s, just
    # within; in one 2048 x 2048 tile: 1 SM, 0.512 TFLOP/s, ruled out
    big = str(ch00_ceilings.few_tiles_bound(2048, 1024))
    assert "4 blocks" in big and "4 x 128 x 2 x 2.000 GHz = 2.0 TFLOP/s" in big
    assert "does not rule out" in big      # 2.0 is not above 2.048
    tiny = str(ch00_ceilings.few_tiles_bound(2048, 2048))
    assert "1 blocks" in tiny and "cuBLAS does not run 2048 x 2048 tiles" in tiny
    assert str(ch00_ceilings.few_tiles_bound(4096)).startswith("Not in this recording")


def test_pitfalls_give_times_for_people_and_the_share(fake):
    host, harness, zeros = ch00_ceilings.pitfalls()
    col = "% of the harness's time"
    assert host["time"] == "20 µs" and host[col] == "1%"
    assert harness["time"] == "2.000 ms" and harness[col] == "100%"
    assert zeros["time"] == "1.999 ms" and zeros[col] == "100%"


def test_copy_result_is_the_row_beside_its_device_copy(fake):
    text = ch00_ceilings.copy_result()
    assert "400 GB/s" in text and "4,000 GB/s" in text and "10% of it" in text


def test_column_writes_cost_sets_the_naive_transpose_beside_the_copy(fake):
    assert ch00_ceilings.column_writes_cost().startswith("Not in this recording")
    from gemm_kernels.core.kernels import KERNELS
    fake.results.append(stamp([{"chapter": "10", "kernel": "transpose_naive",
                             "params": KERNELS["transpose_naive"].resolve(
                                 ch00_ceilings.COPY_PARAMS),
                             "shape": [8192, 8192], "gbps": _spread(50.0, 45.0, 55.0),
                             "reference": {"kernel": "device_copy",
                                           "gbps": _spread(4000.0, 3900.0, 4100.0)}}])[0])
    text = ch00_ceilings.column_writes_cost()
    assert "400 GB/s, 10% of the device copy" in text
    assert "50 GB/s, 1% of the device copy" in text and "8.0 times slower" in text


def test_rows_per_thread_plot_draws_both_types(fake):
    ax = ch00_ceilings.rows_per_thread_plot()
    lines = {l.get_label(): list(l.get_xdata()) for l in ax.get_lines()}
    assert lines["copy of floats (4 bytes per lane)"] == [8, 1]
    assert lines["copy of doubles (8 bytes per lane)"] == [8, 1]


def test_l2_read_core_is_the_main_path_only():
    core = ch00_ceilings.l2_read_core()
    assert "load16(in + i)" in core and "asm volatile" not in core
    assert "for (size_t j = i; j < n; ++j)" not in core


def test_only_the_relaxed_load_keeps_one_load_per_pass():
    t = {r["load16 uses"].split()[0]: r for r in ch00_ceilings.l2_read_loads(passes=8)}
    assert t["ld.relaxed.gpu.global"]["16-byte loads in the SASS"] == 8
    assert t["ld.global.cg"]["16-byte loads in the SASS"] == 1
    assert t["ld.global"]["16-byte loads in the SASS"] == 1


A100 = {"sm_count": 108, "fp32_lanes_per_sm": 64, "sm_clock_mhz": 1410,
        "compute_capability": "8.0"}


def _a100(capsys, *guess):
    ch00_ceilings.check_a100(A100, 2039, *guess)
    return capsys.readouterr().out


def test_check_a100_accepts_the_right_numbers(capsys):
    # 108 x 64 x 2 x 1.41 GHz = 19,492 GFLOP/s; / 2039 GB/s = 9.56; 6 x 9.56 = 57.4 -> 58
    out = _a100(capsys, 19492, 9.56, 58)
    assert out.count("right") == 3 and "but" not in out, out


def test_check_a100_names_the_128_lanes_slip_once(capsys):
    out = _a100(capsys, 2 * 19492, 2 * 9.56, 115)
    assert "128 lanes" in out and "follows from your peak" in out
    assert "follows from your ridge" in out and "n = 58" in out


def test_check_a100_names_the_unit_slips(capsys):
    assert "TFLOP/s" in _a100(capsys, 19.49, 9.56, 58)
    assert "that is FLOP/s" in _a100(capsys, 19.492e12, 9.56, 58)
    assert "MB/s" in _a100(capsys, 19492, 0.00956, 58)
    assert "TB/s" in _a100(capsys, 19492, 9560, 58)


def test_check_a100_refuses_a_wrong_n(capsys):
    out = _a100(capsys, 19492, 9.56, 57)
    assert "first holds at n = 58" in out


def test_check_a100_asks_for_the_numbers_first(capsys):
    assert "Write your three numbers first" in _a100(capsys, None, None, None)


def test_copy_block_picture_shows_where_the_block_starts_and_not_the_loop():
    fig = ch00_ceilings.copy_block_picture(32, 4)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert sum(t.startswith("threadIdx.y = ") for t in texts) == 4     # ROWS warps
    assert any("which threads copy them?" in t for t in texts)
    assert not any("pass" in t or "rows apart" in t for t in texts)   # the loop is asked
    assert not [l for l in ax.lines if l.get_marker() == "o"]


def test_two_gpus_shows_only_what_chapter_00_taught(monkeypatch):
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import gpus
    cols = ["GPU", "SMs", "FP32 peak, TFLOP/s", "device copy, GB/s",
            "capstone, % of its cuBLAS", "recording"]
    monkeypatch.setattr(gpus, "summary", lambda size: Table(
        [dict(zip(cols, ["H200", 132, 66.9, 4224, "99%", "x"])),
         dict(zip(cols, ["H100", 132, 52.0, 3005, "98%", "y"]))], cols, "t"))
    rec = lambda l2: type("Rec", (), {"device": {"l2_bytes": l2}})()
    monkeypatch.setattr(gpus, "recordings", lambda: [rec(60 << 20), rec(50 << 20)])
    t = ch00_ceilings.two_gpus()
    assert t.columns == [*cols[:4], "L2, MiB"] and t[0] == {
        "GPU": "H200", "SMs": 132, "FP32 peak, TFLOP/s": "66.9", "device copy, GB/s": 4224,
        "L2, MiB": "60"}
    assert t[1]["L2, MiB"] == "50"
    assert t[1]["FP32 peak, TFLOP/s"] == "52.0"          # one decimal in every row


def test_naive_dram_gap_states_moved_bytes_as_dram_time(monkeypatch):
    from gemm_kernels.measure import roofline
    # 1,165 GB in 276 ms: a measured DRAM ceiling of 4,221 GB/s
    monkeypatch.setattr(roofline, "dram_point", lambda k, size: {
        "how": "ncu", "bytes": 8.53e9, "limit_bytes": 1165e9, "gflops": 498.0, "ms": 276.0})
    text = str(ch00_ceilings.naive_dram_gap())
    assert "DRAM moved 8.5 GB" in text and "4,221 GB/s" in text
    assert "takes 2.0 ms" in text and "took 276 ms" in text and "0.7% of it" in text
    assert "move 137 times the bytes it moved" in text      # 276 ms / 2.02 ms
    monkeypatch.setattr(roofline, "dram_point", lambda k, size: None)
    assert str(ch00_ceilings.naive_dram_gap()).startswith("Not in this recording")


def test_ladder_plot_names_every_bar_in_words():
    """Every bar of the ladder has a plain label (no registry identifier), chapter first;
    chapter 11's float control kernel is left off; the variants measured on purpose are
    hatched, and the legend names them and the 100% line as cuBLAS."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from gemm_kernels.measure.ladder import ladder_kernels
    assert set(ladder_kernels()) <= set(ch00_ceilings.LADDER_LABELS)
    ax = ch00_ceilings.ladder_plot()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    hatched = {labels[i] for c in ax.containers for i, b in enumerate(c) if b.get_hatch()}
    title = ax.get_title()
    # every bar carries its share, one decimal below 10% (the naive kernel's is under 1%)
    written = [t.get_text() for t in ax.texts]
    heights = [b.get_height() for c in ax.containers for b in c]
    plt.close("all")
    assert len(written) == len(heights) and all(
        t == (f"{h:.1f}" if h < 10 else f"{h:.0f}") for t, h in zip(written, heights))
    assert len(labels) == len(ladder_kernels()) - len(ch00_ceilings.LADDER_LEFT_OFF)
    assert not any("_" in t for t in labels), labels
    assert not any(t.startswith("11 ") for t in labels), labels
    assert hatched == {"04 colliding shared reads", "06 2D tiles, shared read per FMA",
                       "06 2D tiles, strided outputs"}, hatched
    assert "cuBLAS on the same GPU (100%)" in legend and "a variant measured on purpose" in legend
    assert "chapters 01 to 09" in title


def test_the_chapter_roofline_draws_dram_roofs_only_and_the_gap_to_the_roof():
    """Every kernel on chapter 00's roofline is placed by DRAM bytes, so no L2 roof is
    drawn on that axis; the naive kernel, counted by Nsight Compute, gets an arrow that
    says how far below the roof it runs."""
    import matplotlib
    matplotlib.use("Agg")
    from gemm_kernels.measure import roofline
    from gemm_kernels.notebook import ch00_ceilings
    fig = ch00_ceilings.roofline_plot()
    ax = fig.axes[0]
    assert not any(l.get_label().startswith("L2") for l in ax.get_lines())
    assert not any(t.get_text().startswith("L2") for t in ax.get_legend().get_texts())
    assert "L2" not in ax.get_xlabel()
    p = roofline.dram_point("naive", roofline.GROWING_SIZE)
    if p is None or p["how"] != "ncu":
        pytest.skip("the naive kernel's DRAM bytes are not recorded here")
    notes = [t.get_text() for t in ax.texts if "below the roof" in t.get_text()]
    assert len(notes) == 1 and notes[0].endswith("x below the roof")


def test_littles_law_sets_bytes_needed_against_one_float_per_thread(monkeypatch):
    from gemm_kernels.measure import roofline
    monkeypatch.setattr(records, "described_device", lambda: dict(GPU))
    monkeypatch.setattr(roofline, "ceilings", lambda props: [
        {"level": "DRAM", "gbps": None, "kind": "measured", "how": "-"},
        {"level": "DRAM", "gbps": device.peak_bandwidth_gbps(GPU), "kind": "theoretical",
         "how": "bus width x data rate / 8"}])
    read = device.peak_bandwidth_gbps(GPU) / 2       # a copy's rate counts reads and writes
    text = str(ch00_ceilings.littles_law(latency_ns=1000))
    assert f"/ 2 = {read:,.0f} GB/s" in text and "bus width x data rate / 8" in text
    assert f"{read * 1e3 / 1e6:.1f} MB in flight" in text and "assumed" in text
    assert "not measured here" in text
    assert f"{read * 1e3 / 100 / 1e3:,.1f} KB for each of 100 SMs" in text
    assert "8.2 KB in flight per SM" in text      # powers of ten, as the KB above
    assert "one double per thread x 2,048 threads per SM = 16.4 KB in flight per SM" in text


def test_littles_law_halves_the_measured_copy_and_tests_the_ratio(monkeypatch):
    from gemm_kernels.measure import roofline
    monkeypatch.setattr(records, "described_device", lambda: dict(GPU))
    monkeypatch.setattr(roofline, "ceilings", lambda props: [
        {"level": "L2", "gbps": 9000.0, "kind": "measured", "how": "-"},
        {"level": "DRAM", "gbps": 2000.0, "kind": "measured", "how": "device copy of 1 GiB"},
        {"level": "DRAM", "gbps": 3000.0, "kind": "theoretical", "how": "-"}])
    rates = {"float": 500.0, "double": 800.0}
    monkeypatch.setattr(ch00_ceilings.lookup, "measure_or_lookup", lambda kind, shape, p: {
        "gbps": {"median": rates[p["T"]]}, "reference": {"gbps": {"median": 1000.0}}})
    text = str(ch00_ceilings.littles_law(latency_ns=1000))
    assert text.startswith("read bandwidth: 2,000 GB/s (device copy of 1 GiB: reads plus "
                           "writes) / 2 = 1,000 GB/s")
    assert "measured: 50% of the device copy timed beside it" in text
    assert text.endswith("measured shares 80% / 50% = 1.6 times")


def test_add_one_on_the_cpu_is_what_the_gpu_computes():
    blocks, x = ch00_ceilings.add_one_on_cpu(1000, 256)
    assert blocks == 4 and x.shape == (1000,)
    assert (x == 1).all()                 # every element once, none past n
