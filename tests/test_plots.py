"""The pictures a student reads in a browser: legends clear of the data, a colour of its
own for every kernel, text that contrasts with its cell, labels of at least
style.MIN_LABEL_POINTS, titles in words that do not run into each other. Drawn with
Agg from small fake recordings whose numbers are test data, never measurements."""
import math

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from gemm_kernels.core import device, style  # noqa: E402
from gemm_kernels.core.kernels import get  # noqa: E402
from gemm_kernels.core.launch import problems  # noqa: E402
from gemm_kernels.core.table import Table  # noqa: E402
from gemm_kernels.measure import records  # noqa: E402
from gemm_kernels.memory import banks, ch01_02_sectors, ch05_06_thread_tiles  # noqa: E402
from gemm_kernels.notebook import widgets  # noqa: E402

GPU = {"name": "Test GPU", "compute_capability": "9.0", "sm_count": 100,
       "sm_clock_mhz": 2000.0, "fp32_lanes_per_sm": 128, "memory_clock_mhz": 3000.0,
       "memory_bus_bits": 4096}


def _rate(kernel, shape, value, params=None, unit="gflops"):
    k = get(kernel)
    return {"chapter": k.chapter, "kernel": kernel, "params": k.resolve(params),
            "shape": list(shape), unit: {"median": value, "min": value, "max": value},
            "source": k.source_hash(),
            "reference": {"kernel": "cublas", unit: {"median": 40000.0, "min": 40000.0,
                                                      "max": 40000.0}}}


def _reference(kernel, shape, key, value):
    return {"chapter": "00", "kernel": kernel, "params": {}, "shape": list(shape),
            key: {"median": value, "min": value, "max": value}}


@pytest.fixture
def recording(monkeypatch):
    """Install a fake recording of `rows` on GPU, in recorded mode."""
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    device._gpu_present.cache_clear()

    def install(rows):
        rec = records.Record(GPU, "2026-01-01T00:00:00Z", "abc", rows, runs={"r": {}})
        monkeypatch.setattr(records, "_LOADED", {"record": rec})
        return rec
    yield install
    plt.close("all")


def _contrast(a, b) -> float:
    la, lb = sorted((style.luminance(to_rgba(a)), style.luminance(to_rgba(b))), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


# ------------------------------------------------------------------ shared style

def test_series_styles_give_every_series_its_own_colour_and_look():
    looks = style.series_styles(140)
    assert len({c for c, _ in looks[:20]}) == 20
    assert len(set(looks)) == 140


def test_text_colour_contrasts_with_every_background():
    """White on dark, black on light, and never below WCAG's 4.5:1 for normal text."""
    assert style.text_colour(plt.get_cmap("viridis")(0.0)) == "white"
    assert style.text_colour(plt.get_cmap("viridis")(1.0)) == "black"
    for cmap in ("viridis", "tab10", "tab20"):
        for i in range(64):
            cell = plt.get_cmap(cmap)(i / 63)
            assert _contrast(style.text_colour(cell), cell) >= 4.5, (cmap, i)


def test_percent_columns_print_a_percent_sign_and_keep_the_number():
    t = Table([{"kernel": "a", "% of cuBLAS": 12.5}, {"kernel": "b", "% of cuBLAS": None}],
              ["kernel", "% of cuBLAS"])
    lines = repr(t).splitlines()
    assert lines[-2].endswith("12.5%") and lines[-1].endswith("-")
    assert "<td>12.5%</td>" in t._repr_html_()
    assert t[0]["% of cuBLAS"] == 12.5


# The roofline's pictures are tested in test_roofline.py.

# ------------------------------------------------------------------ heat maps

def test_heatmap_colour_bar_has_the_cells_unit_and_text_contrasts(recording):
    """Rates between 20 and 31 TFLOP/s: the darkest cell is far from zero, where a
    threshold on the value instead of the colour put black text on dark purple."""
    k = get("tile_2d_reg")
    configs = [c for c in k.valid_configurations() if not problems(k, c, (2048,) * 3)]
    recording([_rate(k.name, (2048,) * 3, 20000.0 + 11000.0 * i / (len(configs) - 1), c)
               for i, c in enumerate(configs)])
    ax = widgets.heatmap("tile_2d_reg", x="TN", y="TM")
    bar = next(a for a in ax.figure.axes if a is not ax)
    assert bar.get_ylabel().endswith("TFLOP/s")
    im = ax.images[0]
    data = im.get_array()
    cells = [t for t in ax.texts if t.get_text() != "x"]
    assert cells
    for t in cells:
        x, y = t.get_position()
        v = data[round(y), round(x)]
        assert float(t.get_text()) == pytest.approx(v, abs=0.05)     # TFLOP/s, like the bar
        assert im.norm.vmin <= v <= im.norm.vmax
        assert _contrast(t.get_color(), im.cmap(im.norm(v))) >= 4.5


def test_heatmap_marks_a_cell_invalid_only_where_no_configuration_has_a_rate(recording):
    """Chapter 07's map: some configurations of a (TM, TN) cell are invalid, others were
    recorded; the cell shows the best rate, not an 'x' over it."""
    k = get("float4")
    shape = (2048,) * 3
    valid = [c for c in k.configurations() if not problems(k, c, shape)]
    recording([_rate(k.name, shape, 1000.0 + i, c) for i, c in enumerate(valid)])
    xs, ys, values, reasons = widgets.sweep_grid("float4", x="TM", y="TN")
    cells = [(v, why) for row, whys in zip(values, reasons) for v, why in zip(row, whys)]
    assert any(not math.isnan(v) for v, _ in cells)
    assert all(math.isnan(v) or not why for v, why in cells)


# ------------------------------------------------------------------ chapters 01, 05, 06

def _labels(ax):
    return [t for t in ax.texts if t.get_text().strip().isdigit()]


def test_lane_picture_has_a_sentence_for_a_title_and_readable_square_cells():
    ax = ch01_02_sectors.lane_picture("naive", {"BLOCK": 32, "MAPPING": "x->row"},
                                      rows=34, cols=4)
    title = ax.get_title()
    assert "{" not in title and "'" not in title
    assert "MAPPING = x->row" in title and "rows 0 to 31 of column 0" in " ".join(title.split())
    w, h = style.cell_points(ax, 4, 34)
    assert w == pytest.approx(h, rel=0.01) and h >= 12
    labels = _labels(ax)
    assert len(labels) == 32
    im = ax.images[0]
    for t in labels:
        assert t.get_fontsize() >= style.MIN_LABEL_POINTS
        assert _contrast(t.get_color(), im.cmap(im.norm(int(t.get_text())))) >= 4.5


def test_owner_pictures_side_by_side_keep_titles_apart_and_labels_readable():
    """Chapter 06's pair of pictures, as the notebook draws them."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    tile = {"BM": 128, "BN": 128, "BK": 8, "TM": 4, "TN": 4}
    ch05_06_thread_tiles.owner_picture("tile_2d_reg", tile, warps=(0, 1), ax=axes[0])
    ch05_06_thread_tiles.owner_picture("tile_2d_strided", tile, warps=(0, 1), ax=axes[1])
    plt.tight_layout()
    fig.canvas.draw()
    a, b = (ax.title.get_window_extent() for ax in axes)
    assert not _overlap(a, b)
    for ax in axes:
        assert "{" not in ax.get_title()
        assert all(t.get_fontsize() >= style.MIN_LABEL_POINTS for t in ax.texts)
        assert ax.get_legend() is not None       # which colour is which warp


def test_owner_picture_labels_each_lane_once_and_readably():
    ax = ch05_06_thread_tiles.owner_picture(
        "tile_2d_reg", {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}, warps=(0, 1),
        rows=32, cols=128)
    labels = _labels(ax)
    assert sorted(int(t.get_text()) for t in labels) == sorted(list(range(32)) * 2)
    assert all(t.get_fontsize() >= style.MIN_LABEL_POINTS for t in labels)


# ------------------------------------------------------------------ banks

def test_bank_picture_labels_are_readable_at_the_default_size():
    an = banks.analyse(banks.strided(2, 16), 16)
    ax = banks.plot_banks(an)
    labels = _labels(ax)
    assert len(labels) == banks.WARP             # one per lane's 16-byte run of banks
    assert all(t.get_fontsize() >= style.MIN_LABEL_POINTS for t in ax.texts)


def test_bank_picture_too_small_to_label_draws_no_labels():
    """Word labels below the readable size are left out (the axis still says what it
    shows), never drawn too small to read."""
    _, ax = plt.subplots(figsize=(3, 2))
    banks.plot_banks(banks.analyse(banks.strided(1, 4), 4), ax=ax)
    assert not _labels(ax) and ax.get_xlabel() == "bank"


# ------------------------------------------------------------------ explorer

@pytest.fixture
def naive_recording(recording):
    recording([_rate("naive", (2048,) * 3, 400.0, {"BLOCK": 32, "MAPPING": "x->row"}),
               _rate("naive", (2048,) * 3, 6000.0, {"BLOCK": 32, "MAPPING": "x->col"})])


def test_explorer_keeps_one_bar_per_configuration(naive_recording):
    ex = widgets.Explorer("naive")
    for mapping in ("x->row", "x->col", "x->row"):
        assert ex.evaluate({"BLOCK": 32, "MAPPING": mapping})["ok"]
    assert [h[0] for h in ex.history] == ["BLOCK=32 MAPPING=x->row", "BLOCK=32 MAPPING=x->col"]
    ax = ex.plot()
    assert len(ax.patches) == 2


def test_explorer_axis_is_log_when_rates_span_decades(naive_recording):
    ex = widgets.Explorer("naive")
    ex.evaluate({"BLOCK": 32, "MAPPING": "x->col"})
    assert not ex.log_axis()                     # 6000 beside cuBLAS's 40000
    ex.evaluate({"BLOCK": 32, "MAPPING": "x->row"})
    assert ex.log_axis()                         # 400 beside 40000
    assert ex.plot().get_xscale() == "log"
    assert ex.plot(scale="linear").get_xscale() == "linear"
    with pytest.raises(ValueError, match="scale"):
        ex.log_axis("sideways")
    bars = ex.plot(scale="log").patches
    assert all(math.isclose(b.get_x() + b.get_width(), h[1]) for b, h in zip(bars, ex.history))


def test_explorer_widget_redraws_on_the_axis_choice(naive_recording, monkeypatch):
    ex = widgets.Explorer("naive")
    drawn = []
    monkeypatch.setattr(ex, "plot", lambda scale="auto": drawn.append(scale))
    controls, _, _ = ex.widget().children
    by = {getattr(c, "description", ""): c for c in controls.children}
    by["axis"].value = "log"                     # nothing run yet: nothing to draw
    by["Run"].click()
    by["axis"].value = "linear"
    assert drawn == ["log", "linear"]


@pytest.mark.parametrize("block, a_sectors, b_sectors", [(32, 1, 4), (8, 4, 1)])
def test_sector_picture_counts_the_sectors_of_the_sector_table(block, a_sectors, b_sectors):
    fig = ch01_02_sectors.sector_picture("coalesced", {"BLOCK": block})
    _, ax_a, ax_b = fig.axes[:3]
    assert f"in {a_sectors} sector" in ax_a.get_title()
    assert f"in {b_sectors} sector" in ax_b.get_title()
    # lanes per element, summed over the elements drawn, is the warp's 32 lanes
    assert sum(int(t.get_text()) for t in ax_b.texts) == 32
    plt.close(fig)


def test_table_numbers_read_like_people_write_them():
    # Integers get thousands separators, whole floats lose ".0", small fractions are
    # written out (no exponent), percentage columns carry their sign.
    import numpy as np
    t = Table([{"n": 1048576, "big": np.int64(33554432), "x": 4.0, "r": 17.25,
                "f": 0.00012, "% small": 0.0042, "rate": 10705.3}],
              ["n", "big", "x", "r", "f", "% small", "rate"])
    cells = t._cells()[0]
    assert cells == ["1,048,576", "33,554,432", "4", "17.2", "0.00012", "0.0042%", "10,705"]
    assert "e-" not in repr(t)
