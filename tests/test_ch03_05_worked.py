"""The worked solutions of chapters 03-05, timed: the solution's row next to the chapter's
kernel of the same run, and 'not recorded' (never an old rate) where there is no row."""
import pytest

from gemm_kernels.notebook import ch03_05_worked, timed_variants


@pytest.mark.parametrize("exercise", ["03_tile_loop", "04_tile_layout", "05_tile_1d"])
def test_the_solution_is_shown_beside_the_chapters_kernel_of_the_same_run(exercise):
    ours = timed_variants.row(f"{exercise}: worked solution")
    if ours is None:
        pytest.skip("no recording of this worked solution here")
    table = ch03_05_worked.worked_solution(exercise)
    assert [r["kernel"].split(" ")[0] for r in table] == ["worked", timed_variants.get(
        f"{exercise}: worked solution").compare[0]]
    assert table[0]["GFLOP/s"] == ours["gflops"]["median"]
    ratio = table[0]["GFLOP/s"] / table[1]["GFLOP/s"]
    assert table[0]["note"] == f"{ratio:.3f}x the chapter's kernel"


def test_without_a_row_of_its_text_nothing_is_compared(monkeypatch):
    monkeypatch.setattr(timed_variants, "row", lambda *a, **k: None)
    table = ch03_05_worked.worked_solution("05_tile_1d")
    assert table[0]["GFLOP/s"] is None and table[0]["note"] == "not recorded for this text"
    assert table[1]["GFLOP/s"] is None     # no run to compare within
