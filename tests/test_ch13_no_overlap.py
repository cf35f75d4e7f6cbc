"""Chapter 13's tiled kernel without its loads in flight during the mma: the variant's
text (both edits apply once, the loads move after the mma), its study, and the table
that sets it beside the kernel as built (rows stubbed: a GPU records them)."""
from gemm_kernels.core.kernels import get
from gemm_kernels.measure import studies
from gemm_kernels.notebook import ch13_no_overlap as c


def test_the_variant_moves_the_loads_after_the_mma():
    k = c.no_overlap_kernel()
    base = get(c.KERNEL).source_text()
    assert k.name == c.NO_OVERLAP and k.source_hash() != get(c.KERNEL).source_hash()
    assert "const int cur = t & 1;" in base and "const int cur = 0;" in k.code
    body = k.code[k.code.index("const int cur = 0;"):k.code.index("// Epilogue")]
    # the loads now come after the mma loop, between two barriers
    assert body.index("mma_sync") < body.index("a_next.load") < body.index("As[0]")
    assert body.count("__syncthreads()") == 2
    assert studies.step_kernel(studies.get(c.STUDY).steps[0]).name == c.NO_OVERLAP


def test_overlap_table_compares_shares_of_each_runs_cublas(monkeypatch):
    from gemm_kernels.measure import records
    rec = records.current()
    step = studies.get(c.STUDY).steps[0]
    monkeypatch.setattr(studies, "results", lambda *a, **k: [(step, None)])
    assert "Not recorded yet" in c.overlap_table(rec=rec).title
    row = {"gflops": {"median": 100_000.0}, "reference": {"gflops": {"median": 400_000.0}},
           "run": "r", "time": "2026-01-01T00:00"}
    monkeypatch.setattr(studies, "results", lambda *a, **k: [(step, row)])
    t = c.overlap_table(rec=rec)
    last = list(t)[-1]
    assert last["% of cuBLAS FP16"] == "25%" and last["TFLOP/s at 4096³"] == "100"
    assert "compare the shares" in t.title


def test_the_no_overlap_diff_moves_the_next_tiles_loads_after_the_mma():
    """no_overlap_diff: the tiled kernel's main loop as built against the variant, as
    display.kernel_diff shows it: the loads leave the top of the loop, and come back
    after a barrier, with their stores into the one buffer."""
    from gemm_kernels.notebook import ch13_no_overlap as c
    text = str(c.no_overlap_diff())
    removed = [l for l in text.splitlines() if l.startswith("-") and not l.startswith("---")]
    added = [l for l in text.splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert any("const int cur = t & 1;" in l for l in removed)
    assert any("const int cur = 0;" in l for l in added)
    assert sum("a_next.load(A" in l for l in removed) == 1 == sum("a_next.load(A" in l for l in added)
    assert any("As[0]" in l for l in added) and any("As[cur ^ 1]" in l for l in removed)
    assert "Epilogue" not in text and text.startswith("--- as built")
