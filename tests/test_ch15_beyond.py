"""Chapter 15's further steps (`notebook.ch15_beyond`): the first cluster version kept as a
variant, and the figure and summary read from a recording of the two studies."""
import matplotlib

matplotlib.use("Agg")

from gemm_kernels.core.kernels import KERNELS  # noqa: E402
from gemm_kernels.measure import records, studies  # noqa: E402
from gemm_kernels.notebook import ch15_beyond as b  # noqa: E402


def test_the_first_cluster_version_differs_only_in_the_arrivals_ordering():
    mine, theirs = b.release_cluster_kernel().source_text(), KERNELS["wgmma_cluster"].source_text()
    assert mine != theirs and mine.count("release.cluster.shared::cluster") == 1
    assert mine.replace("arrive.release.cluster.shared", "arrive.shared") == theirs
    assert studies.problems(studies.get(b.CLUSTER)) == []


def _rec(share_of_step):
    rows = []
    for name in (b.PERSISTENT, b.CLUSTER):
        for shape in studies.get(name).shapes:
            for i, step in enumerate(studies.get(name).steps):
                k = studies.step_kernel(step)
                ref = 700.0 + shape[0] / 1024     # cuBLAS varies a little across rows
                rows.append({"kernel": k.name, "params": k.resolve(step.params),
                             "shape": list(shape), "source": k.source_hash(), "run": "r",
                             "time": "2026-11-27T05:00:00Z",
                             "gflops": {"median": ref * share_of_step(name, i) * 10},
                             "reference": {"kernel": "cublas_hgemm",
                                           "gflops": {"median": ref * 1e3}}})
    return records.Record({"name": "Test GPU"}, "2026-11-27T05:00:00Z", "x", rows)


def test_the_summary_gives_each_step_against_one_block_per_tile_and_cublas_spread():
    rec = _rec(lambda name, i: 95 - 25 * (name == b.CLUSTER and i == 3) + (i == 1) * 2)
    text = str(b.beyond_summary(rec))
    # cuBLAS does not move within a size here, so every difference is marked
    assert "* persistent, groups of 16 rows: 1024³ +2*, 2048³ +2*, 4096³ +2*, 8192³ +2*" in text
    assert "* clusters of 2, arrivals released at cluster scope: 1024³ -25*" in text
    assert "1024³ 701 to 701 TFLOP/s (0.0%); 2048³ 702 to 702 TFLOP/s (0.0%)" in text


def test_a_difference_within_cublas_spread_is_not_marked():
    moving = _rec(lambda name, i: 95 + (i == 1))
    rows = [r for r in moving.results if r["shape"][0] == 8192]
    for j, r in enumerate(rows):             # cuBLAS moves 5% across the 8192^3 rows
        r["reference"]["gflops"]["median"] *= 1 + 0.05 * (j % 2)
    text = str(b.beyond_summary(moving))
    assert "8192³ " in text and "(5.0%)" in text
    line = next(l for l in text.splitlines() if l.startswith("* persistent, groups"))
    assert "4096³ +1*" in line and "8192³" in line and "8192³ +1*" not in line


def test_the_figure_draws_every_step_and_says_what_is_missing():
    axes = b.plot_beyond(_rec(lambda name, i: 90 + i))
    assert [len(ax.lines) for ax in axes] == [len(studies.get(n).steps)
                                             for n in (b.PERSISTENT, b.CLUSTER)]
    assert "Test GPU" in axes[0].figure._suptitle.get_text()
    empty = records.Record({"name": "X"}, "2026-11-27T05:00:00Z", "x", [])
    assert "not in this recording" in b.plot_beyond(empty)[0].texts[0].get_text()
    assert "not in this recording yet" in str(b.beyond_summary(empty))


def test_bf16_is_read_beside_fp16_from_the_ladders_run():
    shapes = studies.get(b.LADDER).shapes
    rows = [{"kernel": "cublas_bf16", "params": {}, "shape": list(s), "run": "r",
             "time": "2026-11-27T05:00:00Z", "gflops": {"median": 770e3},
             "reference": {"kernel": "cublas_hgemm", "gflops": {"median": 740e3}}}
            for s in shapes]
    rec = records.Record({"name": "Test GPU"}, "2026-11-27T05:00:00Z", "x", rows)
    text = str(b.bf16_summary(rec))
    assert "4096³: cuBLAS BF16 770 TFLOP/s, 104% of cuBLAS FP16 timed beside it (740)" in text
    empty = records.Record({"name": "X"}, "2026-11-27T05:00:00Z", "x", [])
    assert "not in this recording" in str(b.bf16_summary(empty))
