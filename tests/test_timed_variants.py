"""The code variants the chapters time: each builds under its own name, a variant's row
carries its own text's hash, a row of other text is never found for it, and the
chapters read back exactly what was timed."""
import pytest

from gemm_kernels.core.launch import kernel_of
from gemm_kernels.exercises.notebooks import solution_kernel
from gemm_kernels.measure import lookup, records, timing
from gemm_kernels.notebook import timed_variants as tv


def test_every_variant_builds_under_its_own_name():
    names = [t.name for t in tv.entries()]
    assert len(names) == len(set(names))
    for t in tv.entries():
        k = t.kernel()
        assert k.name == t.name
        for p in t.configurations():
            k.resolve(p)          # every configuration is one the kernel accepts
    # the worked solutions are variants of their chapters' kernels, with other text
    sol = tv.get("11_dgemm: worked solution").kernel()
    assert sol.code and sol.source_hash() != kernel_of("dgemm_tiled").source_hash()
    assert sol.source_hash() == solution_kernel("11_dgemm").source_hash()


def _row(kernel, shape, p):
    fake = timing.Timing(1.0, 0.9, 1.1, 5)
    return timing.row(kernel, shape, p, {"candidate": fake, "reference": fake}, {})


def test_a_variant_row_names_its_text_and_is_found_only_for_that_text(monkeypatch):
    t = tv.get("sgemm_tiled_vec:scalar_B")
    k = t.kernel()
    p = k.resolve(t.configurations()[0])
    row = _row(k, t.shape, p)
    assert row["kernel"] == t.name
    assert row["source"] == k.source_hash() != kernel_of("sgemm_tiled_vec").source_hash()
    assert row["reference"]["kernel"] == "cublas"
    rec = records.Record({"name": "Test GPU"}, "now", "abc", [row])
    monkeypatch.setattr(records, "current", lambda: rec)
    assert rec.find(k, t.shape, p) == [row]
    assert lookup.variant_row(k, t.shape, p) == row
    assert lookup.variant_row(k, (1024,) * 3, p) is None          # another shape
    stale = {**row, "source": "0" * 12}
    monkeypatch.setattr(records, "current",
                        lambda: records.Record({"name": "Test GPU"}, "now", "abc", [stale]))
    assert lookup.variant_row(k, t.shape, p) is None
    # a registry kernel's row keeps its registry name and its file's hash
    reg = _row("sgemm_tiled_vec", t.shape, p)
    assert reg["kernel"] == "sgemm_tiled_vec"
    assert reg["source"] == kernel_of("sgemm_tiled_vec").source_hash()


def test_an_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="no timed variant"):
        tv.get("nothing")


def test_chapter_04s_fifty_wavefront_layout_builds_and_says_when_it_is_not_recorded(
        monkeypatch):
    """The exercise's least-cost layout (A rows of BLOCK, B rows of BLOCK + 1) is a variant
    of the exercise's kernel with other text, timed beside it; before a recording has it,
    the chapter shows one sentence with the command, no rate."""
    from gemm_kernels.exercises.notebooks import solution_source
    from gemm_kernels.notebook import ch04_banks
    t = tv.get(ch04_banks.MIXED_TIMED)
    k = t.kernel()
    assert k.name == t.name and t.compare == ("bank_layout",)
    assert "word = n * (BLOCK + 1) + k;" in k.code and "word = m * BLOCK + k;" in k.code
    assert k.source_hash() != solution_kernel("04_tile_layout").source_hash()
    assert "n * (BLOCK + 1)" not in solution_source("04_tile_layout")
    monkeypatch.setattr(lookup, "variant_row", lambda *a, **kw: None)
    text = str(ch04_banks.mixed_against_solution())
    assert "has not been timed" in text and ch04_banks.MIXED_TIMED in text
