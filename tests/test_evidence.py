"""How the chapters show a study: rows not recorded say so, stall reasons read by name."""
import matplotlib

matplotlib.use("Agg")

from gemm_kernels.measure import studies  # noqa: E402
from gemm_kernels.notebook import evidence  # noqa: E402


def test_table_has_a_row_per_step_and_says_what_is_missing():
    t = evidence.table("ch09_ladder", (4096,) * 3)
    assert [r["step"] for r in t] == [s.label for s in studies.get("ch09_ladder").steps]
    for (step, row), shown in zip(studies.results("ch09_ladder", (4096,) * 3), t):
        if row is None:
            assert shown["rate"] == evidence.NOT_RECORDED and shown["share"] is None
        else:
            assert shown["rate"].endswith("GFLOP/s") and shown["share"].endswith("%")
    assert "not recorded" in t.title or "run " in t.title


def test_stall_reasons_are_named_in_words():
    row = {"metrics": {
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 2.5,
        "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": 0.5,
        "smsp__issue_active.avg.pct_of_peak_sustained_active": 70.0}}
    assert evidence.stall_reasons(row) == {"long scoreboard": 2.5, "barrier": 0.5}


def test_pictures_draw_with_or_without_recorded_rows():
    for fig in (evidence.plot("ch09_ladder", (4096,) * 3), evidence.stall_plot(),
                evidence.plot("ch08_one_block")):
        assert fig.axes
        matplotlib.pyplot.close(fig)
