"""Chapter 02's notebook helpers: the L1's bandwidth in lines, the recorded counters under
readable names, tables with one decimal per percentage, the ncu command, the prediction
check's word on the usual slip, and the figures' finishing touches."""
import matplotlib
import pytest

matplotlib.use("Agg")

from gemm_kernels.memory import ch01_02_sectors as model   # noqa: E402
from gemm_kernels.notebook import ch02_coalescing, ch02_stalls   # noqa: E402

H200 = {"name": "NVIDIA H200", "sm_count": 132, "sm_clock_mhz": 1980.0}


def test_the_l1_moves_one_line_per_clock():
    text = ch02_coalescing.l1_bandwidth(H200)
    assert "128 bytes per clock" in text and "33.5 TB/s" in text


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


def test_the_l2_count_compares_the_two_block_sizes():
    text = ch02_coalescing.l2_count()
    assert "262,144 blocks of 64 threads" in text and "times as many at BLOCK = 8" in text


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
    assert float(b32["loads per SM and cycle"]) == pytest.approx(max(shares) / 100, abs=0.05)


def test_the_ncu_command_profiles_the_study_with_every_counter():
    text = ch02_coalescing.ncu_command()
    for metric in ch02_coalescing.TABLE_METRICS:
        assert metric in text
    assert "--target ch02_l1_lines" in text and "sgemm_coalesced|sgemm_naive" in text


def test_the_prediction_check_names_the_half_warp(capsys):
    lim = model.line_limit(*model.PREDICT)["GFLOP/s"]
    ch02_coalescing.check_prediction(2 * lim, 900)
    out = capsys.readouterr().out
    assert "did you count 32 lanes" in out and "the model gives" in out
    ch02_coalescing.check_prediction(lim, 900)
    assert "did you count" not in capsys.readouterr().out


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


def test_your_lines_asks_first_then_checks_the_count_before_the_table(capsys):
    ch02_coalescing.your_lines(None)
    assert "write your configuration in `mine`" in capsys.readouterr().out
    mine = ("naive", {"BLOCK": 8, "MAPPING": "x->col"})
    ch02_coalescing.your_lines(mine)
    assert "my_lines" in capsys.readouterr().out
    lim = model.line_limit(*mine)
    # a wrong count is answered with a question, not with the table or the number
    ch02_coalescing.your_lines(mine, lim["lines"] + 1, lim["GFLOP/s"])
    out = capsys.readouterr().out
    assert "not what this warp touches" in out and f"{lim['GFLOP/s']:,.0f}" not in out
    assert "measured" not in out
    # the right count with a wrong limit asks for the division
    ch02_coalescing.your_lines(mine, lim["lines"], lim["GFLOP/s"] * 2)
    out = capsys.readouterr().out
    assert "is right" in out and "divide it by your lines" in out and "measured" not in out
    # both right: the line table with the measured rate
    ch02_coalescing.your_lines(mine, lim["lines"], round(lim["GFLOP/s"] * 1.01))
    out = capsys.readouterr().out
    assert out.startswith("Right:") and "naive, BLOCK = 8, MAPPING = x->col" in out
    assert "measured" in out


def test_the_stall_plot_names_every_reason_that_is_visible_on_some_bar():
    """The legend threshold is per bar: a reason thin on the long naive bars but a
    visible part of a short coalesced bar (dispatch stall, wait) is named; the second
    panel draws every bar as shares of its own wait."""
    fig = ch02_stalls.stall_plot()
    ax, ax2 = fig.axes[:2]
    longest = max(p.get_x() + p.get_width() for c in ax.containers for p in c.patches)
    shown = {t.get_text().split(" (")[0] for t in ax2.get_legend().get_texts()}
    for c in ax2.containers:
        ends = [p.get_x() + p.get_width() for p in c.patches]
        assert all(e <= 100 + 1e-6 for e in ends)
        visible = max(p.get_width() for p in c.patches) >= 100 * ch02_stalls.LEGEND_SHARE
        assert (c.get_label().lstrip("_").split(" (")[0] in shown) == visible
    assert set(ch02_stalls.reasons(fig)) == shown
    assert {"dispatch stall", "wait"} <= shown, shown
    assert ax.get_xlim()[1] >= 1.2 * longest - 1e-9       # room for "N in all"


def test_reason_trend_gives_each_block_and_the_share_of_the_last():
    text = str(ch02_stalls.reason_trend("dispatch stall"))
    if text.startswith("Not in"):
        pytest.skip("chapter 02's profile is not recorded here")
    assert "at BLOCK = 8" in text and "at BLOCK = 32" in text and "% of its wait" in text


def test_block_order_gap_names_both_orders_and_the_largest_difference(monkeypatch):
    from gemm_kernels.measure import lookup
    rates = {"x->col": 100.0, "x->row": 103.0}
    monkeypatch.setattr(lookup, "recorded", lambda k, shape, p: {
        "gflops": {"median": rates[p["GRID"]] * p["BLOCK"]}})
    text = str(ch02_coalescing.block_order_gap(blocks=(8, 32)))
    assert "GRID = 0, blocks numbered along the rows of tiles: 800 GFLOP/s" in text
    assert "GRID = 1, blocks numbered down the columns of tiles (default): 3,296" in text
    assert text.endswith("by 3.0% at most.")


def test_the_explorer_fixes_the_default_block_order(monkeypatch):
    """Appendix G's widget keeps GRID = 1 without the notebook writing the registry's
    name of it (x->row, which reads like a thread mapping of chapter 01)."""
    from gemm_kernels.notebook import widgets
    seen = {}

    class Fake:
        def __init__(self, kernel, fixed=None):
            seen.update(kernel=kernel, fixed=fixed)

        def widget(self):
            return "w"
    monkeypatch.setattr(widgets, "Explorer", Fake)
    assert ch02_coalescing.explorer() == "w"
    assert seen == {"kernel": "coalesced", "fixed": {"GRID": "x->row"}}
    assert ch02_coalescing.BLOCK_ORDERS["x->row"].startswith("GRID = 1")


def test_loop_mix_counts_a_named_variant_of_a_kernel_beside_the_registry_one():
    """A variant of the coalesced kernel's source (its `/` and `%` swapped) is named by
    its label and compiles to the very loop of the naive kernel with x->row."""
    from gemm_kernels.core.kernels import get
    from gemm_kernels.memory import ch01_02_sectors
    text = get("coalesced").source_text()
    swapped = (text.replace("threadIdx.x / BLOCK", "SLASH")
               .replace("threadIdx.x % BLOCK", "threadIdx.x / BLOCK")
               .replace("SLASH", "threadIdx.x % BLOCK"))
    variant = get("coalesced").with_code(swapped, name="swapped", source="swapped.cu")
    t = ch01_02_sectors.loop_mix([("swapped", variant, {"BLOCK": 32}),
                                  ("naive", {"BLOCK": 32, "MAPPING": "x->row"})])
    assert t[0]["configuration"] == "swapped"
    assert t[1]["configuration"] == "naive, BLOCK = 32, MAPPING = x->row"
    assert {k: v for k, v in t[0].items() if k != "configuration"} == \
        {k: v for k, v in t[1].items() if k != "configuration"}


def test_alignment_table_counts_more_lines_where_rows_of_b_are_misaligned():
    rows = ch02_coalescing.alignment_table()
    assert [r["lines per step (mean of 32 steps)"] for r in rows] == ["2", "2.97"]
    # B's 32 floats stay in one line only where its row starts a line: 1 + 31 x 2 of 32
    assert rows[1]["sectors per step (mean of 32 steps)"] == "5.88"


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
    ch02_coalescing.misaligned_lines(3.47, lim["GFLOP/s"] * 2)
    assert "is right" in capsys.readouterr().out
    ch02_coalescing.misaligned_lines(111 / 32, round(lim["GFLOP/s"] * 1.01))
    out = capsys.readouterr().out
    assert out.startswith("Right: 3.47 lines") and "No rate was recorded at N = 2047" in out
