"""The explorer's chart: one bar per configuration (and size), and a failure of any kind
in a run shown as a message in the widget, never as a traceback."""
import html

import pytest

from gemm_kernels.notebook import widgets

from test_plots import _rate, naive_recording, recording  # noqa: F401  (fixtures)


def test_same_configuration_twice_is_one_bar(naive_recording):
    ex = widgets.Explorer("naive")
    for _ in range(2):
        assert ex.evaluate({"BLOCK": 32, "MAPPING": "x->row"})["ok"]
    assert len(ex.history) == 1 and len(ex.plot().patches) == 1


def test_same_configuration_at_another_size_is_another_bar(recording):
    recording([_rate("naive", (n,) * 3, 400.0, {"BLOCK": 32, "MAPPING": "x->row"})
               for n in (1024, 2048)])
    ex = widgets.Explorer("naive")
    ex.evaluate({"BLOCK": 32, "MAPPING": "x->row"})
    ex.size = 1024
    ex.evaluate({"BLOCK": 32, "MAPPING": "x->row"})
    assert [h[0] for h in ex.history] == ["BLOCK=32 MAPPING=x->row",
                                          "BLOCK=32 MAPPING=x->row at 1024"]


def test_log_axis_shows_slow_bars(naive_recording):
    ex = widgets.Explorer("naive")
    ex.evaluate({"BLOCK": 32, "MAPPING": "x->row"})   # 400 beside cuBLAS
    ax = ex.plot()
    assert ax.get_xscale() == "log" and "log axis" in ax.get_xlabel()
    left, _ = ax.get_xlim()
    assert left < 400   # the slow bar has a visible length


@pytest.mark.parametrize("choice", [{"BLOCK": 64}, {"BLOCK": 4}])
def test_invalid_or_unrecorded_choice_is_a_message_in_the_widget(naive_recording, choice):
    ex = widgets.Explorer("naive")
    controls, status, _ = ex.widget().children
    by = {getattr(c, "description", ""): c for c in controls.children}
    by["BLOCK"].value = choice["BLOCK"]
    by["Run"].click()
    assert "crimson" in status.value and ex.history == []


def test_a_failing_run_is_a_message_not_a_traceback(naive_recording, monkeypatch):
    ex = widgets.Explorer("naive")
    monkeypatch.setattr(ex, "evaluate", lambda p: (_ for _ in ()).throw(
        RuntimeError("NVRTC: out of memory")))
    controls, status, _ = ex.widget().children
    by = {getattr(c, "description", ""): c for c in controls.children}
    by["Run"].click()
    assert "crimson" in status.value and "NVRTC: out of memory" in html.unescape(status.value)
    assert not by["Run"].disabled


@pytest.mark.parametrize("make", [lambda: widgets.Explorer("naive").widget(),
                                  lambda: widgets.BankExplorer().widget(stride=32)])
def test_saved_widget_reads_as_a_sentence(naive_recording, make):
    """Where no kernel runs the widget (a saved notebook on GitHub), its text/plain form
    is what it does, not `VBox(children=(HBox(...`; the live view is still offered."""
    pytest.importorskip("ipywidgets")
    bundle = make()._repr_mimebundle_()
    text = bundle["text/plain"]
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert text.startswith("[interactive widget: run the notebook to use it]")
    assert "VBox" not in text and "…" not in text
    assert "explorer: choose" in text


def test_the_planner_widget_reads_as_a_sentence_too():
    pytest.importorskip("ipywidgets")
    from gemm_kernels.notebook import ch12_last_mile
    text = ch12_last_mile.widget()._repr_mimebundle_()["text/plain"]
    assert text.startswith("[interactive widget") and "press Plan" in text


def test_explorer_sentence_names_its_controls(naive_recording):
    pytest.importorskip("ipywidgets")
    text = widgets.Explorer("naive").widget()._repr_mimebundle_()["text/plain"]
    assert "BLOCK, MAPPING" in text and "cuBLAS" in text
