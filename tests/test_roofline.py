"""Chapter 00's hierarchical roofline, drawn with Agg from small fake recordings whose
numbers are test data, never measurements; and the l2_read kernel behind its L2 ceiling
(compiled without a GPU)."""
import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from gemm_kernels.core import compiler, device  # noqa: E402
from gemm_kernels.core.kernels import L2_READ_SHAPE, get  # noqa: E402
from gemm_kernels.measure import records, roofline, timing  # noqa: E402

GPU = {"name": "Test GPU", "compute_capability": "9.0", "sm_count": 100,
       "sm_clock_mhz": 2000.0, "fp32_lanes_per_sm": 128, "memory_clock_mhz": 3000.0,
       "memory_bus_bits": 4096, "l2_bytes": 50 << 20}
SIZE = 1024
SHAPE = (SIZE,) * 3
KERNELS = ("naive", "smem_tiled", "capstone")


def _rate(kernel, shape, unit, value, params=None):
    k = get(kernel)
    return {"chapter": k.chapter, "kernel": kernel, "params": k.resolve(params),
            "shape": list(shape), unit: {"median": value, "min": value, "max": value},
            "source": k.source_hash()}


def _reference(kernel, shape, unit, value):
    return {"chapter": "00", "kernel": kernel, "params": {}, "shape": list(shape),
            unit: {"median": value, "min": value, "max": value}}


def _counters(kernel, metrics):
    k = get(kernel)
    return {"chapter": k.chapter, "kernel": kernel, "params": k.resolve(None),
            "shape": list(SHAPE), "source": k.source_hash(), "metrics": metrics}


def _l2_rows(gbps, fixed_ms=0.01):
    """l2_read timed at every PASSES, as a buffer read at `gbps` per pass would be."""
    k = get("l2_read")
    nbytes = timing.input_bytes("l2_read", L2_READ_SHAPE, k.defaults())
    rows = []
    for n in k.params[1].values:
        ms = fixed_ms + n * nbytes / (gbps * 1e9) * 1e3
        rate = timing.unit_and_rate("l2_read", L2_READ_SHAPE, k.resolve({"PASSES": n}))[1]
        rows.append(_rate("l2_read", L2_READ_SHAPE, "gbps", rate(ms), {"PASSES": n}))
    return rows


# Test data: DRAM bytes for every kernel, shared wavefronts for the two tiled ones, L2
# sectors only where a test adds them.
DRAM = {"dram__bytes_read.sum": 8e6, "dram__bytes_write.sum": 1e5}
SMEM = {"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 4e7,
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": 1e7}


@pytest.fixture
def recording(monkeypatch):
    """Install a fake recording of `rows` on GPU, in recorded mode."""
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    device._gpu_present.cache_clear()

    def install(extra=(), l2=False):
        rows = [_reference("cublas", SHAPE, "gflops", 40000.0),
                _reference("device_copy", roofline.COPY_SHAPE, "gbps", 3000.0)]
        rows += [_rate(k, SHAPE, "gflops", 1000.0 * (i + 1)) for i, k in enumerate(KERNELS)]
        rows.append(_counters("naive", dict(DRAM)))
        for k in KERNELS[1:]:
            rows.append(_counters(k, {**DRAM, **SMEM, **(dict(l2) if l2 else {})}))
        rows += list(extra)
        rec = records.Record(GPU, "2026-01-01T00:00:00Z", "abc", rows, runs={"r": {}})
        monkeypatch.setattr(records, "_LOADED", {"record": rec})
        return rec
    yield install
    plt.close("all")


def _points(ax):
    """(kernel, level) -> the Line2D of that point."""
    return {tuple(line.get_gid().split("|")): line for line in ax.get_lines()
            if line.get_gid()}


def test_each_kernel_sits_at_its_measured_bytes_per_level(recording):
    recording(l2={"lts__t_sectors_srcunit_tex_op_read.sum": 1e6,
                  "lts__t_sectors_srcunit_tex_op_write.sum": 2.5e5})
    ax = roofline.plot(KERNELS, size=SIZE)
    pts = _points(ax)
    flops = 2 * SIZE ** 3
    assert pts[("naive", "DRAM")].get_xdata()[0] == pytest.approx(flops / 8.1e6)
    assert ("naive", "shared memory") not in pts and ("naive", "L2") not in pts
    x = {lv: pts[("capstone", lv)].get_xdata()[0] for lv in roofline.LEVELS}
    assert x["L2"] == pytest.approx(flops / (32 * 1.25e6))
    assert x["shared memory"] == pytest.approx(flops / (128 * 5e7))
    assert {pts[("capstone", lv)].get_ydata()[0] for lv in roofline.LEVELS} == {3000.0}
    # cuBLAS was not profiled: the model's n/6, hollow
    cublas = pts[("cublas", "DRAM")]
    assert cublas.get_xdata()[0] == pytest.approx(roofline.intensity(*SHAPE))
    assert cublas.get_markerfacecolor() == "none"


def test_every_kernel_has_its_own_colour_and_the_legend_sits_outside(recording):
    recording()
    ax = roofline.plot(KERNELS, size=SIZE)
    colour = {}
    for (kernel, _), line in _points(ax).items():
        colour.setdefault(kernel, set()).add(to_rgba(line.get_markeredgecolor()))
    assert all(len(c) == 1 for c in colour.values())          # one colour per kernel
    assert len({c.pop() for c in colour.values()}) == len(KERNELS) + 1
    ax.figure.canvas.draw()
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1


def test_ridge_labels_name_measured_and_theoretical_and_collide_with_nothing(recording):
    recording()
    ax = roofline.plot(KERNELS, size=SIZE)
    ax.figure.canvas.draw()
    labels = [t for t in ax.texts if "ridge" in t.get_text()]
    assert sorted(t.get_text().split(":")[0].strip() for t in labels) == \
        ["DRAM ridge (measured)", "DRAM ridge (theoretical)"]
    boxes = [t.get_window_extent() for t in labels]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not (a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1)
    for line in _points(ax).values():
        x, y = ax.transData.transform((line.get_xdata()[0], line.get_ydata()[0]))
        r = line.get_markersize()
        for box in boxes:
            assert not (box.x0 - r < x < box.x1 + r and box.y0 - r < y < box.y1 + r)


def test_missing_l2_is_said_in_one_line_and_the_rest_is_drawn(recording, capsys):
    recording()
    ax = roofline.plot(KERNELS, size=SIZE)
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "L2 ceiling" in out[0] and "L2 bytes" in out[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("shared memory, theoretical") for t in labels)
    assert any(t.startswith("DRAM, measured: 3.0 TB/s") for t in labels)
    assert not any(t.startswith("L2") for t in labels)


def test_l2_ceiling_is_the_slope_of_time_over_passes(recording, capsys):
    recording(extra=_l2_rows(9000.0), l2={"lts__t_sectors_srcunit_tex_op_read.sum": 1e6})
    l2 = roofline.l2_ceiling()
    assert l2["gbps"] == pytest.approx(9000.0) and l2["fixed_ms"] == pytest.approx(0.01)
    ax = roofline.plot(KERNELS, size=SIZE)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("L2, measured: 9.0 TB/s") for t in labels)
    assert "L2" not in capsys.readouterr().out


def test_table_names_the_lowest_roof(recording):
    recording()
    t = {r["kernel"]: r for r in roofline.table(KERNELS, size=SIZE)}
    smem_roof = device.smem_bandwidth_gbps(GPU) * 2 * SIZE ** 3 / (128 * 5e7)
    assert t["smem_tiled"]["lowest roof"] == "shared memory"
    assert t["smem_tiled"]["its TFLOP/s"] == pytest.approx(smem_roof / 1000)
    # no shared-memory point: its loads go through the L1, which has no ceiling drawn
    assert t["naive"]["lowest roof"] == roofline.L1_NOT_DRAWN
    assert t["naive"]["% of it"] is None


def test_spec_table_corrects_the_3090_figure():
    rtx3090 = {"compute_capability": "8.6", "sm_count": 82, "sm_clock_mhz": 1695,
               "memory_clock_mhz": 9750, "memory_bus_bits": 384}
    rows = {r[""]: r["3090"] for r in roofline.spec_table({"3090": rtx3090})}
    assert rows["peak FP32 = SMs x lanes x 2 x clock"].endswith("= 35.6 TFLOP/s")
    assert rows["DRAM = bus width x data rate / 8"] == "384 bit x 19.5 Gbit/s / 8 = 936 GB/s"
    assert rows["data rate per pin = 2 x reported memory clock"] == "2 x 9,750 MHz = 19.5 Gbit/s"


def test_l2_read_rate_counts_every_pass_and_the_write():
    p = get("l2_read").resolve({"PASSES": 8})
    unit, rate = timing.unit_and_rate("l2_read", (2048, 2048), p)
    assert unit == "gbps" and rate(1.0) == pytest.approx(9 * 2048 * 2048 * 4 / 1e6)


@pytest.mark.parametrize("passes", [2, 16])
def test_l2_read_keeps_one_l1_bypassing_load_per_pass(passes):
    """ptxas merges repeated plain loads of one address; the strong loads must stay."""
    sass = compiler.sass(get("l2_read"), {"PASSES": passes})
    assert sass.count("LDG.E.128.STRONG.GPU") == passes


def test_no_shared_memory_point_for_a_kernel_without_shared_loads_or_stores():
    # Chapter 01's kernel, as profiled on the H200: the total counts 2 wavefronts per
    # warp although the kernel issues no LDS/STS; it must not be placed on that level.
    ld, st = roofline.SMEM_LD_ST
    metrics = {roofline.SMEM_TOTAL: 65536.0, ld: 0.0, st: 0.0,
               roofline.DRAM_METRICS[0]: 8394240.0}
    assert "shared memory" not in roofline.level_bytes(metrics)
    metrics[ld] = 10.0
    assert roofline.level_bytes(metrics)["shared memory"][0] == 128 * 65536


# ------------------------------------------------------------------ the growing roofline

def test_chapter_plot_puts_counted_kernels_filled_and_the_rest_at_n_over_6(recording):
    recording()
    ax = roofline.chapter_plot(["naive"], size=SIZE)
    pts = _points(ax)
    assert set(pts) == {("cublas", "DRAM"), ("naive", "DRAM")}
    naive, cublas = pts[("naive", "DRAM")], pts[("cublas", "DRAM")]
    assert naive.get_xdata()[0] == pytest.approx(2 * SIZE ** 3 / 8.1e6)   # counted bytes
    assert naive.get_markerfacecolor() != "none"
    assert cublas.get_xdata()[0] == pytest.approx(roofline.intensity(*SHAPE))
    assert cublas.get_markerfacecolor() == "none"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("L2") for t in labels) is False      # no l2_read rows here
    assert any(t.startswith("DRAM, measured: 3.0 TB/s") for t in labels)
    # each kernel's legend marker is drawn as its point is: filled or hollow
    legend = {h.get_label().split(":")[0]: h for h in ax.get_legend().legend_handles}
    assert legend["cuBLAS"].get_markerfacecolor() == "none"
    assert legend["01 naive"].get_markerfacecolor() != "none"
    assert not [t for t in ax.texts if "ridge" in t.get_text()]   # ridges: legend only


def test_dram_point_says_what_dram_would_have_to_carry(recording):
    recording()
    p = roofline.dram_point("naive", SIZE)
    assert p["gflops"] == 1000.0 and p["how"] == "ncu"
    assert p["limit_x"] == pytest.approx(1000.0 / 3000.0)       # rate / measured DRAM
    ms = 2 * SIZE ** 3 / 1000.0e9 * 1e3
    assert p["ms"] == pytest.approx(ms)
    assert p["limit_bytes"] == pytest.approx(3000e9 * ms * 1e-3)


def test_a_kernel_without_a_rate_is_left_out(recording):
    recording()
    assert roofline.dram_point("coalesced", SIZE) is None
