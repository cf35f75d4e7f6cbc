"""Chapter 10's closing experiment: its best transpose with every load sent before the
first shared store. The edit applies to the kernel's text exactly once, the split text
sends all of a thread's loads before its first store in the SASS compiled here while
the text as built does not, the text as built keeps the registry kernel's hash under
another name, and (on a GPU) the split kernel writes every element right on ragged
shapes in float and double, with nothing outside its output."""
import pytest

from gemm_kernels.core.launch import kernel_of
from gemm_kernels.core.source_edits import apply
from gemm_kernels.measure.check import TRANSPOSE_SHAPES, check
from gemm_kernels.notebook import ch10_loads_first as lf
from gemm_kernels.notebook import ch10_transpose as ch10
from gemm_kernels.notebook import timed_variants as tv

from gpu import needs_gpu


def test_the_split_is_one_edit_of_the_kernels_own_text():
    k, text = lf.loads_first_kernel(), kernel_of(lf.KERNEL).source_text()
    assert k.name == lf.LOADS_FIRST and k.base == lf.KERNEL
    assert k.code.count("T v[TILE / ROWS][STACK];") == 1
    assert "tile[y][tx] = in[" not in k.code.split("transpose_padded(")[1].split("__global__")[0]
    with pytest.raises(ValueError, match="applies 0 times"):   # a changed original is an error
        apply(text.replace("// row y of tile s", "// row y"), lf.EDITS, "test")


def test_the_text_as_built_is_the_registry_kernels_under_its_own_name():
    b = lf.as_built_kernel()
    assert b.name == lf.AS_BUILT != lf.KERNEL
    assert b.source_hash() == kernel_of(lf.KERNEL).source_hash()
    assert lf.loads_first_kernel().source_hash() != b.source_hash()


def test_every_load_comes_before_the_first_store_only_in_the_split_text():
    p = kernel_of(lf.KERNEL).resolve(lf.PARAMS)
    loads = p["TILE"] // p["ROWS"] * p["STACK"]
    split = ch10.round_trips(ch10._sass_order(lf.loads_first_kernel(), lf.PARAMS))
    built = ch10.round_trips(ch10._sass_order(lf.as_built_kernel(), lf.PARAMS))
    assert split == [loads]
    assert built[0] < loads and sum(built) == loads


def test_both_are_timed_in_one_run_at_the_chapters_two_shapes():
    t = tv.get(lf.LOADS_FIRST)
    assert t.shapes() == (ch10.SQUARE, ch10.ODD)
    assert [k.name for k in t.compare] == [lf.AS_BUILT]


@needs_gpu
@pytest.mark.parametrize("t", ["float", "double"])
@pytest.mark.parametrize("shape", TRANSPOSE_SHAPES + [(8191, 4097)], ids=str)
def test_the_split_kernel_is_right_on_ragged_shapes(t, shape):
    v = check(lf.loads_first_kernel(), shape, {"T": t})
    assert v.ok, v.message


def test_the_profile_launches_these_very_texts():
    from gemm_kernels.measure import studies
    st = studies.get("ch10_loads_first")
    assert studies.problems(st) == []
    assert [studies.step_kernel(s).source_hash() for s in st.steps] == [
        lf.as_built_kernel().source_hash(), lf.loads_first_kernel().source_hash()]


def test_the_comparison_prints_the_sass_the_timed_rates_and_the_counters_of_both():
    t = lf.comparison()
    assert t.columns == ["quantity", "shape", "as built", "every load first"]
    rows = {(r["quantity"], r["shape"]): r for r in t}
    trips = rows["loads per round trip (SASS)", "any"]
    assert trips["as built"] == "1, then 7" and trips["every load first"] == "8"
    shapes = [r["shape"] for r in t if r["quantity"].startswith("% of the device copy")]
    assert shapes == ["8192 x 8192", "8191 x 4097"]          # both shapes, one run each
    for r in t:   # every cell a fixed format or '-' where a recording lacks it
        for who in ("as built", "every load first"):
            assert r[who] == "-" or r[who][0].isdigit(), r
    profiled = [r["quantity"] for r in t if r["quantity"].startswith("profiled")]
    assert any("global loads" in q for q in profiled) and any("barrier" in q for q in profiled)


def test_the_split_loop_shown_is_the_text_the_edit_puts_in():
    shown = str(lf.split_loop())
    assert "T v[TILE / ROWS][STACK];" in shown and shown in lf.loads_first_kernel().code


def test_the_row_groups_pick_rows_of_the_full_table_in_its_order():
    short, full = lf.comparison(rows=("round trips", "timed")), lf.comparison()
    assert [r["quantity"] for r in short] == ["loads per round trip (SASS)"] + [
        "% of the device copy, timed in one run"] * 2
    assert all(r in list(full) for r in short)     # the same rows as the full table's
    assert "profiled" not in short.title


def test_section_5_4s_groups_drop_the_registers_and_kernel_times():
    waits = lf.comparison(rows=("round trips", "timed", "dram", "waits"))
    full = list(lf.comparison())
    quantities = [r["quantity"] for r in waits]
    assert not any("registers" in q or "kernel time" in q for q in quantities)
    assert sum("barrier" in q for q in quantities) == 2       # one per shape
    assert [r for r in full if r in list(waits)] == list(waits)   # the full table's order


def test_section_5_4_prints_the_timed_rows_and_the_waits_at_the_ragged_shape_only():
    t = lf.comparison(rows=("timed", "waits"), profiled_at=((8191, 4097),))
    full = list(lf.comparison())
    timed = [r for r in t if r["quantity"].startswith("% of the device copy")]
    waits = [r for r in t if r["quantity"].startswith("profiled")]
    assert len(timed) == 2 and len(waits) == 2 and len(list(t)) == 4
    assert {r["shape"] for r in waits} == {"8191 x 4097"}
    assert [r for r in full if r in list(t)] == list(t)   # the full table's rows, in its order


def test_an_unknown_row_group_is_refused():
    with pytest.raises(ValueError, match="unknown row groups"):
        lf.comparison(rows=("timed", "wait"))


def test_rows4_margin_says_plainly_when_the_lead_is_within_the_move_between_runs(monkeypatch):
    """copy_smem at ROWS = 4 against the worked solution: a lead no larger than the move
    between runs is 'not established'; a larger one is not called certain either."""
    from gemm_kernels.notebook import ch10_loads_first as lf
    from gemm_kernels.notebook import ch10_transpose as ch10
    monkeypatch.setattr(lf, "run_shifts", lambda: [1.0, 2.9])
    monkeypatch.setattr(ch10, "solution_rates", lambda shape: [
        {"kernel": "the worked solution: every load first", "% of device copy": 96.0}])
    monkeypatch.setattr(ch10, "_share", lambda k, s, p: 98.5)
    text = lf.rows4_margin()
    assert "+2.5 points" in text and "2.9 points" in text and "not established" in text
    monkeypatch.setattr(ch10, "_share", lambda k, s, p: 100.0)
    assert "not established" not in lf.rows4_margin() and "another run" in lf.rows4_margin()
    monkeypatch.setattr(lf, "run_shifts", lambda: [])
    assert lf.rows4_margin() == ""
