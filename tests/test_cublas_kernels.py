"""Which kernels cuBLAS launched (measure.cublas_kernels), without a GPU: the launches of
one ncu run split into calls at the marks, the second call of each shape kept, and a
run whose marks do not split it as expected refused."""
import pytest

from gemm_kernels.measure import cublas_kernels as ck
from gemm_kernels.measure import ncu, records


def launch(name, t=10_000.0, grid=64, block=256, regs=128):
    return {"id": 0, "kernel": name, "metrics": {
        "gpu__time_duration.sum": t, "launch__grid_size": grid, "launch__block_size": block,
        "launch__registers_per_thread": regs}}


MARK = launch(ck.MARK)


def test_the_second_call_of_each_shape_is_kept():
    seq = [MARK, launch("warm_a"), MARK, launch("gemm_a"), launch("reduce_a"),
           MARK, launch("warm_b"), MARK, launch("gemv_b"), MARK]
    got = ck.calls(seq, 2)
    assert [[l["kernel"] for l in c] for c in got] == [["gemm_a", "reduce_a"], ["gemv_b"]]


@pytest.mark.parametrize("seq", [
    [launch("x"), MARK, launch("a"), MARK],                    # a launch before any mark
    [MARK, launch("w"), MARK, launch("a"), MARK],              # one call short of two shapes
    [MARK, launch("w"), MARK, MARK, launch("w"), MARK, launch("b"), MARK],  # an empty call
])
def test_marks_that_do_not_split_the_run_are_refused(seq):
    with pytest.raises(ValueError):
        ck.calls(seq, 2)


def test_a_launch_row_in_people_units():
    row = ck.launch_row(launch("sm90_gemm", t=12_500.0, grid=132, block=384, regs=168))
    assert row == {"name": "sm90_gemm", "grid": 132, "block": 384, "registers": 168,
                   "time_us": 12.5}


@pytest.mark.parametrize("text", ["1024x1024", "axbxc", "0x4x4", "4x4x4x4"])
def test_a_bad_shape_is_refused(text):
    with pytest.raises(ValueError):
        ck.parse_shape(text)


def test_a_run_gives_one_row_per_shape_found_again_by_shape(monkeypatch):
    seq = [MARK, launch("w"), MARK, launch("gemm_a"), MARK, launch("w"), MARK,
           launch("gemv_b", t=3_000.0), MARK]
    seen = {}

    def fake_profile(argv, metrics, regex):
        seen["argv"] = argv
        return seq
    monkeypatch.setattr(ncu, "profile", fake_profile)
    monkeypatch.setattr(ncu, "version", lambda: "test")
    rows = ck.run([(1024, 1024, 1024), (1, 4096, 4096)])
    assert seen["argv"][-2:] == ["1024x1024x1024", "1x4096x4096"]
    assert [r["kernel"] for r in rows] == [ck.KERNEL] * 2
    rec = records.Record({"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc", rows)
    assert [l["name"] for l in ck.recorded((1, 4096, 4096), rec)] == ["gemv_b"]
    assert ck.recorded((2, 2, 2), rec) is None
    # never met by a lookup of cuBLAS's timings
    assert rec.find("cublas") == []
