"""Chapter 07's kernel on a pre-transposed A (float4_at, 07_float4_at.cu) without a GPU:
the registry entry and its shape-chosen path, the launcher's A^T, the SASS that shows
what the kernel is for (the A tile stored with STS.128 instead of four STS.32), the
bank model of that store, the study that times it beside float4 and the transpose of A,
and the evidence table read from a recording. Results on a GPU: test_gpu_float4_at.py."""
import re
from collections import Counter

import numpy as np
import pytest

from conftest import stamp
from gemm_kernels import analysis, compiler, records
from gemm_kernels.core import launch
from gemm_kernels.core.kernels import get
from gemm_kernels.measure import ladder, studies, timing
from gemm_kernels.memory import banks, ch07_09_patterns
from gemm_kernels.notebook import evidence

NAME = "float4_at"
CONFIGS = get(NAME).valid_configurations()
# the launch setting ONE_PER_SM compiles to the same binary: one of each tile suffices
TILES = [c for c in CONFIGS if not c["ONE_PER_SM"]]


def _ids(p):
    return "{BM}x{BN}x{BK}-{TM}x{TN}".format(**p)


def _loop(name, params):
    sass = compiler.sass(get(name), get(name).resolve(params))
    return Counter(f for _, f, _ in analysis.main_loop(sass))


def _per_thread(p):
    """float4s of A and of B that each thread copies per tile."""
    nt = (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])
    return p["BM"] * p["BK"] // 4 // nt, p["BK"] * p["BN"] // 4 // nt


# ------------------------------------------------------------------ registry

def test_same_tunables_and_geometry_as_float4():
    a, f = get(NAME), get("float4")
    assert a.defaults() == f.defaults() and a.op == f.op == "sgemm"
    assert a.a_transposed and not f.a_transposed
    assert [c for c in a.configurations()] == [c for c in f.configurations()]
    assert a.valid_configurations() == f.valid_configurations()
    for c in CONFIGS:
        assert a.threads(c) == f.threads(c) and a.smem(c) == f.smem(c)
        assert a.grid(c, (1000, 300, 77)) == f.grid(c, (1000, 300, 77))
    assert a.align == f.align == 16


def test_vector_path_needs_m_and_n_multiples_of_4_any_k():
    k = get(NAME)
    assert k.name_expression({}) == "sgemm_float4_at<128, 128, 8, 8, 8, true>"
    assert k.name_expression({}, (4096, 4096, 4096)).endswith("true>")
    assert k.name_expression({}, (300, 1028, 515)).endswith("true>")     # K odd: still VEC
    assert k.name_expression({}, (515, 512, 512)).endswith("false>")     # M % 4 != 0
    assert k.name_expression({}, (512, 515, 512)).endswith("false>")     # N % 4 != 0
    # float4 decides on K and N instead
    assert get("float4").name_expression({}, (300, 1028, 515)).endswith("false>")
    assert get("float4").name_expression({}, (515, 512, 512)).endswith("true>")


def test_left_out_of_the_ladder():
    assert NAME not in ladder.ladder_kernels() and "float4" in ladder.ladder_kernels()


# ------------------------------------------------------------------ the launcher's A^T

def test_operands_give_a_transposed_copy_for_this_kernel_only():
    A = np.arange(12, dtype=np.float32).reshape(3, 4)
    B, C = np.ones((4, 5), np.float32), np.zeros((3, 5), np.float32)
    At, B2, C2 = launch.operands(NAME, (A, B, C))
    assert At.shape == (4, 3) and At.flags.c_contiguous and not np.shares_memory(At, A)
    assert np.array_equal(At, A.T) and B2 is B and C2 is C
    assert all(x is y for x, y in zip(launch.operands("float4", (A, B, C)), (A, B, C)))


def test_shape_rules_are_checked_on_the_callers_a():
    # the caller passes A (M x K): a 2^31 A^T is refused as A would be
    assert launch.problems(NAME, None, (33, 65, 17)) == []
    assert any("2^31" in m for m in launch.problems(NAME, None, (70000, 8, 70000)))


# ------------------------------------------------------------------ static analysis

@pytest.mark.parametrize("params", TILES, ids=_ids)
def test_vec_path_stores_the_a_tile_whole(params):
    loop = _loop(NAME, params)
    a4, b4 = _per_thread(params)
    assert loop.get("LDG.128", 0) == a4 + b4 and loop.get("LDG", 0) == 0, loop
    # A^T's float4 holds four consecutive m of one k: one STS.128, no scalar STS
    assert loop.get("STS.128", 0) == a4 + b4 and loop.get("STS", 0) == 0, loop
    k, tm, tn = params["BK"], params["TM"], params["TN"]
    assert loop.get("LDS.128", 0) == (tm + tn) * k // 4 and loop.get("LDS", 0) == 0, loop
    assert loop.get("FFMA", 0) == tm * tn * k, loop


@pytest.mark.parametrize("params", TILES, ids=_ids)
def test_no_spills_on_either_path(params):
    k = get(NAME)
    res = compiler.resources(k, params)
    assert 0 < res["registers"] <= 255, res["report"]
    assert res["spill_stores"] == res["spill_loads"] == res["stack_bytes"] == 0, res["report"]
    expr = k.name_expression(params, (515, 515, 515))
    assert expr.endswith("false>")
    _, report, _ = compiler._cubin(k, expr, compiler.STATIC_ARCH)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert spill and spill.groups() == ("0", "0"), report


def test_differs_from_float4_only_in_the_a_store():
    """At the default tile: float4 stores each float4 of A with 4 STS.32; float4_at with
    one STS.128. Global loads, shared reads and FFMAs are the same in number, and the
    default still fits two blocks of 256 threads per SM (at most 128 registers)."""
    p = get(NAME).defaults()
    at, f4 = _loop(NAME, p), _loop("float4", p)
    a4, b4 = _per_thread(p)
    assert f4.get("STS", 0) == 4 * a4 and f4.get("STS.128", 0) == b4, f4
    assert at.get("STS", 0) == 0 and at.get("STS.128", 0) == a4 + b4, at
    for fam in ("LDG.128", "LDS.128", "LDS", "FFMA", "BAR"):
        assert at.get(fam, 0) == f4.get(fam, 0), (fam, at, f4)
    assert compiler.resources(get(NAME), p)["registers"] <= 128


def test_loop_instructions_table_shows_the_store_difference():
    t = evidence.loop_instructions(["float4", NAME])
    rows = {r["kernel"]: r for r in t}
    assert rows["float4"]["STS"] == 4 and rows["float4"]["STS.128"] == 1
    assert rows[NAME]["STS"] == 0 and rows[NAME]["STS.128"] == 2
    assert rows[NAME]["registers"] > 0 and "sm_90" in t.title


# ------------------------------------------------------------------ bank model

def test_the_whole_float4_store_is_conflict_free():
    """Warp 0 writes one row of As, 512 contiguous bytes: 4 wavefronts, the minimum,
    where float4's four STS.32 take 2 each (8 for the same 512 bytes)."""
    assert ch07_09_patterns.a_store_at() == [16 * lane for lane in range(32)]
    st = banks.analyse(ch07_09_patterns.a_store_at(), 16)
    assert st.wavefronts == st.ideal == 4 and st.conflicts == 0
    assert banks.analyse(ch07_09_patterns.a_store_at(BK=16), 16).wavefronts == 4
    assert sum(banks.analyse(ch07_09_patterns.a_store(s=s), 4).wavefronts
               for s in range(4)) == 8


def test_the_model_follows_the_kernel_source():
    src = get(NAME).source_text()
    assert "const int k = f / (BM / 4), m = f % (BM / 4) * 4;" in src
    assert "*reinterpret_cast<float4*>(&As[k][m]) = v;" in src


# ------------------------------------------------------------------ the study

STUDY = studies.get(studies.PRETRANSPOSED_A)


def test_study_is_well_formed():
    assert studies.problems(STUDY) == []
    assert STUDY.kind == "time" and STUDY.chapter == "10"
    assert [s.kernel for s in STUDY.steps] == ["float4", NAME, "transpose_fast"]
    assert STUDY.steps[0].params == STUDY.steps[1].params      # the same tile
    assert {(2048,) * 3, (4096,) * 3} <= set(STUDY.shapes)
    assert any(len(set(s)) > 1 for s in STUDY.shapes)           # and a non-square one
    got = studies.launches(STUDY)
    assert len(got) == len(STUDY.steps) * len(STUDY.shapes)
    for (step, full, shape), gemm in zip(got, [s for s in STUDY.shapes for _ in STUDY.steps]):
        M, N, K = gemm
        assert shape == ((M, K) if step.kernel == "transpose_fast" else gemm)
        assert launch.shape_problem(step.kernel, shape) is None
    assert got[2][1]["T"] == "float"                             # A is float32


def test_a_step_at_the_wrong_shape_is_named():
    bad = studies.Study("x", "10", "?", "time", (
        studies.Step("gemm", "float4", {}),
        studies.Step("no operand", "transpose_fast", {}),
        studies.Step("bad operand", "transpose_fast", {}, operand="D")), ((64, 64, 64),))
    found = studies.problems(bad)
    assert len(found) == 2
    assert "step 'no operand'" in found[0] and "2 integers" in found[0]
    assert "step 'bad operand'" in found[1] and "'D'" in found[1]
    with pytest.raises(ValueError, match="GEMM shape"):
        studies.step_shape(studies.Step("t", "transpose_fast", {}, operand="A"), (64, 64))
    assert studies.step_shape(studies.Step("t", "transpose_fast", {}, operand="B"),
                              (2, 3, 5)) == (5, 3)


def test_results_refuse_a_shape_the_study_did_not_measure():
    with pytest.raises(ValueError, match="its shapes are"):
        studies.results(STUDY.name, (100, 100, 100))


def test_mixed_units_are_not_plotted_on_one_axis():
    with pytest.raises(ValueError, match="one axis cannot show both"):
        evidence.plot(STUDY.name)


# ------------------------------------------------------------------ times and evidence

def _timed_row(kernel, shape, ms, run, spread=0.02):
    """A recorded row as `timing.row` writes it, for a call of `ms` milliseconds."""
    params = get(kernel).resolve({"T": "float"} if kernel == "transpose_fast" else
                                 STUDY.steps[0].params)
    unit, rate = timing.unit_and_rate(kernel, shape, params)
    t = timing.Timing(ms, ms * (1 - spread), ms * (1 + spread), 20)
    return {"chapter": get(kernel).chapter, "kernel": kernel, "params": params,
            "shape": list(shape), unit: timing.spread(t, rate), "repeats": 20, "run": run,
            "time": "2026-01-01T00:00:00Z"}


def _record(rows):
    return records.Record({"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc", stamp(rows))


def test_times_undo_the_rates():
    for kernel, shape in (("float4", (2048,) * 3), ("transpose_fast", (8192, 4096))):
        row = _timed_row(kernel, shape, 1.25, "r1")
        ms = timing.times_ms(row)
        assert ms["median"] == pytest.approx(1.25)
        assert ms["min"] == pytest.approx(1.25 * 0.98) and ms["max"] == pytest.approx(1.25 * 1.02)


def test_evidence_table_from_one_run(monkeypatch):
    square, narrow = (2048,) * 3, STUDY.shapes[-1]
    rows = [_timed_row("float4", square, 0.500, "r1", 0.05),
            _timed_row(NAME, square, 0.480, "r1", 0.05),
            _timed_row("transpose_fast", square[:2], 0.010, "r1"),
            # the narrow shape: A^T slower; the transpose never pays
            _timed_row("float4", narrow, 1.000, "r1", 0.001),
            _timed_row(NAME, narrow, 1.010, "r1", 0.001),
            _timed_row("transpose_fast", (narrow[0], narrow[2]), 0.070, "r1")]
    monkeypatch.setattr(records, "_LOADED", {"record": _record(rows)})
    t = evidence.pretransposed_a([square, narrow])
    a, b = t
    assert a["GEMM, A as is (µs)"] == pytest.approx(500)
    assert a["GEMM, A^T given (µs)"] == pytest.approx(480)
    assert a["saving per GEMM (µs)"] == pytest.approx(20)
    assert a["transpose of A (µs)"] == pytest.approx(10)
    assert a["net, one GEMM (µs)"] == pytest.approx(10)
    assert a["GEMMs to repay"] == 1
    assert "overlap" in a["note"]                         # 500 +- 5% and 480 +- 5%
    assert b["saving per GEMM (µs)"] == pytest.approx(-10)
    assert b["net, one GEMM (µs)"] == pytest.approx(-80)
    assert b["GEMMs to repay"] == "never"
    assert "beat" in b["note"]
    assert "measured in one run" in t.title and "r1" not in t.title   # no run id shown
    assert "500" in repr(t) and "never" in repr(t)


def test_evidence_table_repay_count_rounds_up(monkeypatch):
    s = (4096,) * 3
    rows = [_timed_row("float4", s, 4.00, "r1"), _timed_row(NAME, s, 3.997, "r1"),
            _timed_row("transpose_fast", s[:2], 0.010, "r1")]
    monkeypatch.setattr(records, "_LOADED", {"record": _record(rows)})
    (row,) = evidence.pretransposed_a([s])
    assert row["GEMMs to repay"] == 4                     # 10 us / 3 us per GEMM


def test_evidence_table_refuses_rows_of_several_runs(monkeypatch):
    s = (2048,) * 3
    rows = [_timed_row("float4", s, 0.5, "r1"), _timed_row(NAME, s, 0.48, "r2"),
            _timed_row("transpose_fast", s[:2], 0.01, "r2")]
    monkeypatch.setattr(records, "_LOADED", {"record": _record(rows)})
    (row,) = evidence.pretransposed_a([s])
    assert row.get("net, one GEMM (µs)") is None
    assert "2 different runs" in row["note"] and "not compared" in row["note"]
    assert "r1" not in row["note"]                         # no run id shown


@pytest.mark.parametrize("rec", [None, "partial"])
def test_evidence_table_says_what_is_not_recorded(monkeypatch, rec):
    if rec:
        rec = _record([_timed_row("float4", (2048,) * 3, 0.5, "r1")])
    monkeypatch.setattr(records, "_LOADED", {"record": rec})
    t = evidence.pretransposed_a()
    assert len(t) == len(STUDY.shapes)
    assert all(r.get("net, one GEMM (µs)") is None for r in t)
    assert f"{NAME}, transpose_fast {evidence.NOT_RECORDED}" in t[0]["note"]
    assert "python -m" not in t.title and ("not every row recorded" in t.title)
    assert ("no run recorded" in t.title) == (rec is None)
    repr(t)                                               # prints without error
