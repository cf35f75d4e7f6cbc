"""The worked solutions, timed: the solution's row next to the chapter's kernel of the
same run, and 'not recorded' (never an old rate, never a row of another run) otherwise."""
import pytest

from gemm_kernels.measure import lookup, records
from gemm_kernels.notebook import worked_solutions as ws

EXERCISES = ["00_copy", "01_index", "02_coalesced", "03_tile_loop", "04_tile_layout",
             "05_tile_1d", "06_tile_2d_reg", "07_float4", "08_double_buffer", "10_in_flight",
             "11_dgemm"]


def holding(exercise):
    """The recording that holds the worked solution's row (another GPU's if the one
    shown has none)."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.notebooks import solution_kernel, solution_shape
    return lookup.variant_recording(solution_kernel(exercise), solution_shape(exercise),
                                    dict(get(exercise).params))


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_solution_is_shown_beside_the_chapters_kernel_of_the_same_run(exercise,
                                                                        recorded_mode):
    rec = holding(exercise)
    if rec is None:
        pytest.skip("no recording of this worked solution's text here")
    mine, theirs = ws.pair(exercise, rec=rec)
    assert theirs is not None and theirs["run"] == mine["run"]
    table = ws.worked_solution(exercise)
    unit = "GB/s" if "gbps" in mine else "GFLOP/s"
    assert table[0][unit] == mine[unit.replace("GFLOP/s", "gflops").replace("GB/s", "gbps")][
        "median"]
    assert table[0]["/ chapter's kernel"] == f"{table[0][unit] / table[1][unit]:.3f}"
    assert "one run" in table.title and rec.label in table.title
    # the share's column names what it is a share of (not the chapter's kernel)
    assert any(c.startswith("% of cuBLAS") or c == "% of the device copy" for c in table.columns)


def test_the_double_buffer_that_keeps_its_loads_in_flight_beats_the_chapters_kernel(
        recorded_mode):
    if holding("08_double_buffer") is None:
        pytest.skip("no recording of this worked solution's text here")
    assert float(ws.worked_solution("08_double_buffer")[0]["/ chapter's kernel"]) > 1.05


def test_without_a_row_of_its_text_nothing_is_compared(monkeypatch):
    monkeypatch.setattr(lookup, "variant_row", lambda *a, **k: None)
    table = ws.worked_solution("05_tile_1d")
    assert table[0]["GFLOP/s"] is None and table[0]["range"] == "not recorded"
    assert table[1]["GFLOP/s"] is None     # no run to compare within
    assert table[0]["/ chapter's kernel"] == "-" and "not recorded" in table.title


def test_the_title_has_no_empty_configuration():
    """An exercise without parameters gives 'NAME at SHAPE: ...', not 'SHAPE, :'."""
    from gemm_kernels.exercises.catalog import get
    for exercise in ("15_phases", "05_tile_1d"):
        title = ws.worked_solution(exercise).title
        assert ", :" not in title
        for k, v in get(exercise).params.items():
            assert f", {k}={v}" in title


def test_the_tensor_core_chapters_read_their_pair_in_tflops():
    """Chapters 14 and 15 print rates in TFLOP/s; their solutions' pair does too, with the
    same ratio as in GFLOP/s."""
    giga = ws.worked_solution("15_phases")
    tera = ws.worked_solution("15_phases", tflops=True)
    if giga[0].get("GFLOP/s") is None:
        pytest.skip("the pair is not recorded")
    assert tera[0]["TFLOP/s"] == pytest.approx(giga[0]["GFLOP/s"] / 1e3)
    assert tera[0]["/ chapter's kernel"] == giga[0]["/ chapter's kernel"]


def test_a_range_in_tflops_keeps_a_decimal():
    """Rounded to whole TFLOP/s, a narrow range would read '31 .. 31'."""
    tera = ws.worked_solution("06_tile_2d_reg", tflops=True)
    if tera[0].get("TFLOP/s") is None:
        pytest.skip("the pair is not recorded")
    low, high = tera[0]["range"].split(" .. ")
    assert "." in low and "." in high and float(low) <= tera[0]["TFLOP/s"] <= float(high)
