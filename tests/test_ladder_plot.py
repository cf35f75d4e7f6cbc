"""The series plot (`ladder.plot`): its log axes are labelled in plain numbers that a
reader can read off, not in powers (2^11, 10^4)."""
import matplotlib

matplotlib.use("Agg")

from gemm_kernels.core.table import Table          # noqa: E402
from gemm_kernels.measure import ladder            # noqa: E402


def _rows():
    rows = []
    for n, (slow, fast, ref) in {1024: (500.0, 20000.0, 33000.0),
                                 2048: (480.0, 48000.0, 50000.0),
                                 4096: (490.0, 50000.0, 51000.0)}.items():
        rows += [{"kernel": "naive", "size": n, "GFLOP/s": slow},
                 {"kernel": "capstone", "size": n, "GFLOP/s": fast},
                 {"kernel": "cublas", "size": n, "GFLOP/s": ref}]
    return Table(rows, ["kernel", "size", "GFLOP/s"], title="test data")


def test_log_axes_are_labelled_in_plain_numbers():
    ax = ladder.plot(_rows())
    ax.figure.canvas.draw()
    x = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    y = [t.get_text() for t in ax.get_yticklabels()
         if t.get_text() and ax.get_ylim()[0] <= float(t.get_text().replace(",", "")) <= ax.get_ylim()[1]]
    assert x == ["1,024", "2,048", "4,096"]
    assert "1,000" in y and "10,000" in y and "20,000" in y
    assert not any("^" in t or "$" in t for t in x + y)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert "M = N = K" in ax.get_xlabel() and "GFLOP/s" in ax.get_ylabel()
    matplotlib.pyplot.close(ax.figure)


def test_lines_are_named_by_chapter_and_a_short_line_says_where_it_stops():
    rows = list(_rows()) + [{"kernel": "zorder", "chapter": "09", "size": 1024, "GFLOP/s": 9000.0},
                            {"kernel": "zorder", "chapter": "09", "size": 2048, "GFLOP/s": 30000.0}]
    ax = ladder.plot(Table(rows, ["kernel", "chapter", "size", "GFLOP/s"], title="test data"))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "09 · zorder" in labels and "cublas, timed on its own" in labels
    assert [t.get_text() for t in ax.texts] == ["not recorded at 4,096"]
    matplotlib.pyplot.close(ax.figure)
