"""BankExplorer (gemm_kernels.widgets): its logic, without a browser."""
import pytest

from gemm_kernels import banks
from gemm_kernels.notebook.widgets import BankExplorer


@pytest.fixture
def bx():
    return BankExplorer()


def test_addresses_follow_stride_width_padding(bx):
    assert bx.addresses(stride=1, width=8)[:3] == [0, 8, 16]
    assert bx.addresses(stride=32, width=4, padding=1)[:3] == [0, 33 * 4, 66 * 4]
    assert bx.addresses(stride=2, width=16)[5] == 10 * 16


def test_sharing_patterns(bx):
    a = bx.addresses(stride=1, width=8, share="i^1")
    assert all(a[i] == a[i ^ 1] for i in range(32)) and len(set(a)) == 16
    b = bx.addresses(stride=1, width=8, share="i^2")
    assert all(b[i] == b[i ^ 2] for i in range(32)) and len(set(b)) == 16
    assert set(bx.addresses(stride=5, width=4, share="all")) == {0}


def test_inactive_lanes(bx):
    a = bx.addresses(stride=1, width=4, inactive="odd lanes")
    assert a[1] is None and a[0] == 0
    assert sum(x is None for x in bx.addresses(inactive="lanes 16-31")) == 16
    assert sum(x is None for x in bx.addresses(inactive="lanes 8-31")) == 24


def test_64bit_two_phases_then_merged(bx):
    plain = bx.evaluate(stride=1, width=8)["analysis"]
    assert plain.wavefronts == 2 and plain.merge is None
    merged = bx.evaluate(stride=1, width=8, share="i^1")["analysis"]
    assert merged.wavefronts == 1 and merged.merge == "i^1"
    # inactive odd lanes satisfy the i^1 rule too: one phase
    half = bx.evaluate(stride=1, width=8, inactive="odd lanes")["analysis"]
    assert half.merge == "i^1" and len(half.phases) == 1


def test_128bit_quarters_merge_inside_half_warps_only(bx):
    a = bx.evaluate(stride=1, width=16)["analysis"]
    assert len(a.phases) == 4 and a.wavefronts == 4
    m = bx.evaluate(stride=1, width=16, share="i^2")["analysis"]
    assert len(m.phases) == 2 and m.wavefronts == 2 and all(p.merged for p in m.phases)
    # a full broadcast still costs one wavefront per half-warp: halves never merge
    assert bx.evaluate(stride=1, width=16, share="all")["analysis"].wavefronts == 2


def test_column_read_conflicts_and_padding(bx):
    assert bx.evaluate(stride=32, width=4)["analysis"].wavefronts == 32
    assert bx.evaluate(stride=32, width=4, padding=1)["analysis"].wavefronts == 1
    assert bx.evaluate(stride=32, width=8)["analysis"].wavefronts == 32   # 16 per half
    assert bx.evaluate(stride=32, width=8, padding=1)["analysis"].wavefronts == 2


def test_agrees_with_banks_strided(bx):
    for stride in BankExplorer.STRIDES:
        for width in BankExplorer.WIDTHS:
            for pad in BankExplorer.PADDINGS:
                a = bx.addresses(stride=stride, width=width, padding=pad)
                assert a == banks.strided(stride, width, padding=pad)


def test_bad_choices_give_messages_not_tracebacks(bx):
    r = bx.evaluate(width=12)
    assert not r["ok"] and "width" in r["message"]
    with pytest.raises(ValueError, match="share"):
        bx.addresses(share="i^3")
    with pytest.raises(ValueError, match="inactive"):
        bx.addresses(inactive="some")


def test_describe_lists_phases(bx):
    msg = bx.evaluate(stride=1, width=16, inactive="lanes 8-31")["message"]
    assert "128-bit load, 8 active lanes" in msg
    assert "no active lane" in msg


def test_plot_runs(bx):
    import matplotlib
    matplotlib.use("Agg")
    ax = bx.plot(bx.evaluate(stride=33, width=4)["analysis"])
    assert "wavefront" in ax.get_title()


# ---- chapter 04's cases, the widget itself, and the Explorer's note hook

@pytest.mark.parametrize("kw,wavefronts,phases", [
    ({"stride": 32, "padding": 2}, 2, 1),               # float[32][34]: banks 0,2,4..
    ({"stride": 32, "padding": 3}, 1, 1),
    ({"stride": 32, "padding": 4}, 4, 1),
    ({"stride": 8, "width": 16}, 32, 4),                # LDS.128 of sB[tx*32 + k..k+3]
    ({"stride": 9, "width": 16}, 4, 4),                 # the same with PAD 4 (36 words)
    ({"stride": 17, "width": 8}, 2, 2),                 # LDS.64, PAD 2 (34 words)
    ({"stride": 0, "width": 16}, 2, 2),                 # LDS.128 broadcast: halves apart
])
def test_chapter04_cases(bx, kw, wavefronts, phases):
    res = bx.evaluate(**kw)
    assert res["ok"], res["message"]
    assert res["analysis"].wavefronts == wavefronts
    assert sum(p.active for p in res["analysis"].phases) == phases
    assert f"{wavefronts} wavefront(s)" in res["message"]


def test_explorer_pattern_is_bank_layouts_read_of_b(bx):
    from gemm_kernels.memory import ch03_04_tiles as bank_predict
    for pad, (stride, width) in {0: (8, 16), 2: (17, 8), 4: (9, 16), 1: (33, 4)}.items():
        p = {"BLOCK": 32, "LAYOUT": "conflict", "PAD": pad}
        first_b = next(i for i in bank_predict.warp_instructions("bank_layout", p)
                       if i.group == "read B")
        assert bx.evaluate(stride=stride, width=width)["analysis"].wavefronts == \
            first_b.analysis.wavefronts, pad


def test_widget_updates_without_printing(bx, capsys):
    pytest.importorskip("ipywidgets")
    import matplotlib
    matplotlib.use("Agg")
    w = bx.widget(stride=32, padding=1)
    text, image = w.children[2], w.children[3]
    assert "1 wavefront(s)" in text.value and image.value[:4] == b"\x89PNG"
    w.children[0].children[2].value = 0                   # padding 0: the 32-way column
    assert "32 wavefront(s)" in text.value
    assert capsys.readouterr().out == ""


def test_explorer_note_is_appended(monkeypatch):
    from gemm_kernels import kernels, records, widgets
    from gemm_kernels.memory import ch03_04_tiles as bank_predict
    from gemm_kernels.measure.profile import SHARED
    p = kernels.get("bank_layout").resolve({"BLOCK": 32, "LAYOUT": "conflict", "PAD": 0})
    pred = bank_predict.predict("bank_layout", p)
    from conftest import stamp
    rec = records.Record({"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc", stamp([
        {"chapter": "04", "kernel": "bank_layout", "params": p, "shape": [2048] * 3,
         "gflops": {"median": 500.0, "min": 490.0, "max": 510.0}},
        {"chapter": "04", "kernel": "bank_layout", "params": p, "shape": [1024] * 3,
         "metrics": {SHARED[0]: 1.0, SHARED[1]: 2.0, SHARED[2]: 3.0, SHARED[3]: 4.0}}]))
    monkeypatch.setitem(records._LOADED, "record", rec)
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    ex = widgets.Explorer("bank_layout", note=bank_predict.note("bank_layout"))
    res = ex.evaluate({"BLOCK": 32, "LAYOUT": "conflict", "PAD": 0})
    assert res["ok"], res["message"]
    assert f"model: loads {pred['ld conflicts']:,}" in res["message"]
    assert "ncu: loads 3, stores 4" in res["message"]
    bad = ex.evaluate({"BLOCK": 8})
    assert not bad["ok"] and "BLOCK" in bad["message"]
