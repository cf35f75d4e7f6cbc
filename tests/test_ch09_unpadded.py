"""Chapter 09's capstone with its A tile unpadded (LDA = BM): the variant's text (its one
edit applies, every index into the A tile goes through LDA), that it compiles (sm_90,
where ptxas is here) and stays the capstone's loop, its two studies, and the table that
sets it beside the capstone as built (rows stubbed: a GPU records them)."""
import re
from collections import Counter

import pytest

from gemm_kernels.core import analysis, compiler
from gemm_kernels.core.kernels import get
from gemm_kernels.measure import records, studies
from gemm_kernels.notebook import ch09_unpadded as c


def test_the_variant_sets_the_a_row_to_bm_and_every_index_uses_lda():
    k = c.unpadded_kernel()
    base = get(c.KERNEL).source_text()
    assert k.name == c.UNPADDED and k.source_hash() != get(c.KERNEL).source_hash()
    assert "constexpr int LDA = BM + 4;" in base and "LDA = BM + 4" not in k.code
    assert "constexpr int LDA = BM;" in k.code
    # the padding lives in LDA alone: no index into the A tile names BM + 4 or a pad
    body = k.code[k.code.index("sgemm_capstone("):]
    assert not re.search(r"BM\s*\+\s*4", body)
    assert len(re.findall(r"\bLDA\b", body)) >= 6
    for name in (c.STUDY, c.TIME_STUDY):
        st = studies.get(name)
        assert not studies.problems(st)
        assert any(studies.step_kernel(s).name == c.UNPADDED for s in st.steps)
    # the time study times the variant only (a capstone row would replace the ladder's)
    assert all(s.variant == c.UNPADDED for s in studies.get(c.TIME_STUDY).steps)
    assert studies.get(c.STUDY).kind == "ncu" and studies.get(c.TIME_STUDY).kind == "time"
    assert {c.A_COPIES, c.A_WAVEFRONTS, c.A_CONFLICTS} <= set(
        studies.pick_metrics(studies.get(c.STUDY).metrics, {c.A_COPIES, c.A_WAVEFRONTS,
                                                            c.A_CONFLICTS}))


def test_the_unpadded_variant_compiles_to_the_capstones_loop():
    try:
        compiler._tool("ptxas"), compiler._tool("nvdisasm")
    except RuntimeError as e:
        pytest.skip(str(e))
    base, var = get(c.KERNEL), c.unpadded_kernel()
    loops = [Counter(f for _, f, _ in analysis.main_loop(compiler.sass(k, k.resolve({}),
                                                                       "sm_90")))
             for k in (base, var)]
    for op in ("FFMA", "LDS.128", "LDGSTS", "BAR"):
        assert loops[0][op] == loops[1][op]


def test_unpadded_table_waits_for_data_then_reads_shares(monkeypatch):
    rec = records.current()
    ncu_steps = studies.get(c.STUDY).steps
    t_steps = studies.get(c.TIME_STUDY).steps
    monkeypatch.setattr(studies, "recording_of", lambda *a, **k: rec)

    def none(name, shape=None, rec=None):
        steps = ncu_steps if name == c.STUDY else t_steps
        return [(s, None) for s in steps]
    monkeypatch.setattr(studies, "results", none)
    assert "Not recorded yet" in c.unpadded_table(rec=rec).title

    m = {c.A_COPIES: 100.0, c.A_WAVEFRONTS: 800.0, c.A_CONFLICTS: 700.0, c.LOADS: 1000.0,
         c.LOAD_CONFLICTS: 0.0}
    timed = {"gflops": {"median": 45_000.0}, "reference": {"gflops": {"median": 50_000.0}},
             "run": "r", "time": "2026-01-01T00:00", "binary": {"registers": 129}}
    capped = {**timed, "gflops": {"median": 47_500.0}, "binary": {"registers": 128}}

    def some(name, shape=None, rec=None):
        if name == c.STUDY:
            return [(ncu_steps[0], {"metrics": {**m, c.A_WAVEFRONTS: 400.0}, "run": "r",
                                    "time": "2026-01-01T00:00"}),
                    (ncu_steps[1], {"metrics": m, "run": "r", "time": "2026-01-01T00:00"})]
        return [(t_steps[0], timed), (t_steps[1], capped)]
    monkeypatch.setattr(studies, "results", some)
    t = c.unpadded_table(rec=rec)
    rows = list(t)
    assert rows[0]["wavefronts per copy of A"] == "4.00"
    assert rows[1]["wavefronts per copy of A"] == "8.00"
    assert rows[1]["of them conflicts"] == "7.00"
    assert rows[1]["% of cuBLAS at 2048³"] == "90.0%"
    # 129 registers leave one block of 256 threads per SM; 128 (MINB = 2) two
    assert (rows[1]["registers"], rows[1]["blocks per SM"]) == ("129", "1")
    assert rows[3]["A tile"] == "unpadded, MINB = 2" and rows[3]["blocks per SM"] == "2"
    assert rows[3]["% of cuBLAS at 4096³"] == "95.0%" and rows[3]["wavefronts per copy of A"] == "-"
    assert rows[2]["A tile"] == "as built, MINB = 2"   # read from the recording itself
    assert "compare the shares" in t.title
