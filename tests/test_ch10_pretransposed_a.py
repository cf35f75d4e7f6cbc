"""Chapter 10's section on a pre-transposed A: the SASS difference of the two main loops,
and the conclusion drawn from `evidence.pretransposed_a` (CPU only; the
table itself is tested in test_float4_at.py)."""
import pytest

from gemm_kernels import records
from gemm_kernels.notebook import ch10_pretransposed_a as pa, evidence

from test_float4_at import NAME, STUDY, _record, _timed_row

SQUARE, NARROW = (2048,) * 3, STUDY.shapes[-1]


def _rows(at_square_ms, at_narrow_ms):
    """float4 at 0.5 ms (square) and 1 ms (narrow); float4_at as given; transposes of
    10 us and 70 us."""
    return [_timed_row("float4", SQUARE, 0.500, "r1", 0.001),
            _timed_row(NAME, SQUARE, at_square_ms, "r1", 0.001),
            _timed_row("transpose_fast", SQUARE[:2], 0.010, "r1"),
            _timed_row("float4", NARROW, 1.000, "r1", 0.001),
            _timed_row(NAME, NARROW, at_narrow_ms, "r1", 0.001),
            _timed_row("transpose_fast", (NARROW[0], NARROW[2]), 0.070, "r1")]


def test_the_store_of_a_is_the_difference():
    lines = pa.store_lines()
    assert lines.count("STS.128") == 3 and lines.count("STS ") == 4


def test_conclusion_from_the_numbers(monkeypatch):
    # square: saves 20 us per GEMM, transpose 10 us -> pays within one GEMM;
    # narrow: saves 30 us, transpose 70 us -> 3 GEMMs
    monkeypatch.setattr(records, "_LOADED", {"record": _record(_rows(0.480, 0.970))})
    tab = evidence.pretransposed_a([SQUARE, NARROW])
    square, narrow = pa.conclusion(tab).splitlines()
    assert "covers the transpose (10.0 µs) within one GEMM" in square
    assert "30.0 µs per GEMM" in narrow and "3 GEMMs or more" in narrow


def test_a_slower_gemm_never_pays(monkeypatch):
    monkeypatch.setattr(records, "_LOADED", {"record": _record(_rows(0.520, 1.010))})
    lines = pa.conclusion(evidence.pretransposed_a([SQUARE, NARROW])).splitlines()
    assert all("never pays" in l for l in lines)


@pytest.mark.parametrize("rec", [None, "float4 only"])
def test_missing_measurement_is_one_line(monkeypatch, rec):
    rec = rec and _record([_timed_row("float4", SQUARE, 0.5, "r1")])
    monkeypatch.setattr(records, "_LOADED", {"record": rec})
    tab = evidence.pretransposed_a()
    text = pa.conclusion(tab)
    assert "\n" not in text and "missing" in text
    assert "python -m" not in text and "one run" in text


def test_the_table_keeps_only_shapes_timed_in_one_run(monkeypatch):
    """A shape whose three times come from two runs leaves the table, with no run id in
    sight."""
    rows = _rows(0.480, 0.970)
    rows[0] = _timed_row("float4", SQUARE, 0.500, "r2", 0.001)
    monkeypatch.setattr(records, "_LOADED", {"record": _record(rows)})
    tab = pa.table([SQUARE, NARROW])
    assert [r["shape"] for r in tab] == ["8192 x 512 x 4096"]
    shown = repr(tab)
    assert "r1" not in shown and "r2" not in shown and "python -m" not in shown


def test_a_difference_counts_only_when_half_the_calls_beat_the_other_kernels_fastest():
    """One slow call of each makes the min..max ranges overlap; the medians decide. When
    the faster median is not below the other's fastest call, nothing is resolved."""
    calls = lambda a, at: {pa.WITH_A: a, pa.WITH_AT: at}
    a = {"median": 498.0, "min": 497.0, "max": 563.0}
    assert pa.resolved(calls(a, {"median": 457.0, "min": 456.0, "max": 567.0})) == pa.WITH_AT
    assert pa.resolved(calls(a, {"median": 497.5, "min": 480.0, "max": 520.0})) is None
    assert pa.resolved(calls({"median": 450.0, "min": 440.0, "max": 460.0}, a)) == pa.WITH_A
