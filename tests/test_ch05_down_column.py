"""Chapter 05's exercise question measured: the mapping down the column as a variant of
the chapter's kernel, its study and its timed entry, and the tables that read them."""
import pytest

from gemm_kernels.measure import studies
from gemm_kernels.notebook import ch05_down_column as dc
from gemm_kernels.notebook.ch05_tile_1d import MAPPINGS


def test_the_variant_maps_its_threads_by_the_column_mapping_and_changes_nothing_else():
    base = dc.get(dc.KERNEL).source_text().splitlines()
    text = dc.down_column_kernel().source_text().splitlines()
    changed = [(a, b) for a, b in zip(base, text) if a != b]
    tc, tr = MAPPINGS[dc._COLUMN]
    assert len(base) == len(text) and len(changed) == 2
    assert f"const int tc = {tc};" in changed[0][1] and f"const int tr = {tr};" in changed[1][1]
    assert dc.down_column_kernel().name == dc.DOWN_COLUMN


def test_a_kernel_without_the_mapping_lines_is_refused_by_name(monkeypatch):
    k = dc.get(dc.KERNEL)
    monkeypatch.setattr(type(k), "source_text", lambda self: "no mapping here")
    with pytest.raises(ValueError, match="edit applies 0 times, not once"):
        dc.down_column_kernel()


def test_the_study_and_the_timed_entry_launch_the_variant_beside_the_kernel():
    from gemm_kernels.notebook import timed_variants
    st = studies.get(dc.STUDY)
    assert st.kind == "ncu" and not studies.problems(st)
    assert [s.variant for s in st.steps] == [None, dc.DOWN_COLUMN]
    assert studies.step_kernel(st.steps[1]).source_text() == dc.down_column_kernel().source_text()
    t = timed_variants.get(dc.DOWN_COLUMN)
    assert t.compare == (dc.KERNEL,) and t.shape == dc.SHAPE


def test_the_measured_table_sets_the_model_beside_the_counts_and_rates():
    t = dc.measured()
    assert [r["mapping"] for r in t] == list(MAPPINGS)
    row, col = t
    assert col["wavefronts per step (model, costliest warp)"] > \
        row["wavefronts per step (model, costliest warp)"]
    line = dc.factors()
    model = col["wavefronts per step (model, costliest warp)"] / \
        row["wavefronts per step (model, costliest warp)"]
    assert line.startswith(f"down the column against along the row: the model prices the "
                           f"column mapping {model:.1f}x")
    if row["GFLOP/s"] == "-" or col["GFLOP/s"] == "-":
        assert "it was not timed" in line and "not timed yet" in t.title
    else:
        assert f"it runs {row['GFLOP/s'] / col['GFLOP/s']:.1f}x slower" in line
        assert "in one run" in t.title


def test_the_bound_lines_add_the_stores_and_explain_the_time_by_the_two_shares():
    from gemm_kernels.notebook.ch05_tile_1d import smem_bound, step_wavefronts
    text = dc.bound_lines().splitlines()
    assert len(text) == 4
    assert text[0].startswith("at 2048^3, one warp")
    step = step_wavefronts(dc.KERNEL, dc.get(dc.KERNEL).resolve(None))
    totals = [r["wavefronts per step (model, costliest warp)"] + step["stores"]
              for r in dc.measured()]
    for line, total in zip(text[1:3], totals):
        assert f"= {total:,g} wavefronts" in line
        assert f"bound {smem_bound(total / step['FFMA']):,.0f} GFLOP/s" in line
    assert text[3].startswith(f"{totals[1] / totals[0]:.1f}x the wavefronts")
    rates = [r["GFLOP/s"] for r in dc.measured()]
    if "-" not in rates:
        shares = [g / smem_bound(t / step["FFMA"]) for g, t in zip(rates, totals)]
        assert text[3].endswith(
            f"= {totals[1] / totals[0] * shares[0] / shares[1]:.1f}x the time")
