"""The timing harness without a GPU: a fake clock whose time advances only by the
scripted durations of the callables, and a log of every call in order."""
import pytest

from gemm_kernels.measure import timing


class FakeClock:
    """Events are readings of a clock that the callables advance; flush() and
    synchronize() are logged, and take no time."""

    def __init__(self):
        self.now = 0.0
        self.log = []

    def event(self):
        return self.now

    def elapsed_ms(self, start, stop):
        return stop - start

    def synchronize(self):
        self.log.append("sync")

    def flush(self):
        self.log.append("flush")


def scripted(clock, name, durations):
    """A callable that logs its name and takes the next of `durations` (ms)."""
    it = iter(durations)

    def fn():
        clock.log.append(name)
        clock.now += next(it)
    return fn


def test_warmup_runs_before_timing_and_is_not_timed():
    clock = FakeClock()
    fn = scripted(clock, "k", [100.0] * 3 + [1.0, 2.0, 3.0])
    t = timing.harness({"k": fn}, clock, repeats=3, warmup=3, flush_l2=False)["k"]
    assert clock.log[:4] == ["k", "k", "k", "sync"]
    assert (t.min_ms, t.max_ms, t.repeats) == (1.0, 3.0, 3)


def test_interleaved_order_with_a_flush_before_each_timed_call():
    clock = FakeClock()
    fns = {"candidate": scripted(clock, "c", [1.0] * 4), "reference": scripted(clock, "r", [2.0] * 4)}
    timing.harness(fns, clock, repeats=3, warmup=1)
    assert clock.log == ["c", "r", "sync"] + ["flush", "c", "flush", "r"] * 3 + ["sync"]


def test_not_interleaved_and_no_flush():
    clock = FakeClock()
    fns = {"candidate": scripted(clock, "c", [1.0] * 2), "reference": scripted(clock, "r", [2.0] * 2)}
    timing.harness(fns, clock, repeats=2, warmup=0, flush_l2=False, interleave=False)
    assert clock.log == ["sync", "c", "c", "r", "r", "sync"]


def test_median_min_max_per_callable():
    clock = FakeClock()
    fns = {"candidate": scripted(clock, "c", [5.0, 1.0, 3.0, 9.0, 2.0]),
           "reference": scripted(clock, "r", [4.0, 4.0, 6.0, 4.0, 8.0])}
    t = timing.harness(fns, clock, repeats=5, warmup=0)
    assert t["candidate"] == timing.Timing(3.0, 1.0, 9.0, 5)
    assert t["reference"] == timing.Timing(4.0, 4.0, 8.0, 5)


@pytest.mark.parametrize("repeats", [0, -1, 2.5, None])
def test_repeats_below_one_are_refused(repeats):
    with pytest.raises(ValueError, match="repeats must be a whole number >= 1"):
        timing.harness({"k": lambda: None}, FakeClock(), repeats=repeats)


def test_negative_warmup_is_refused():
    with pytest.raises(ValueError, match="warmup must be a whole number >= 0"):
        timing.harness({"k": lambda: None}, FakeClock(), warmup=-1)


def test_defaults():
    assert (timing.WARMUP, timing.REPEATS, timing.FLUSH_L2, timing.INTERLEAVE) == (3, 20, True, True)


def test_flush_writes_twice_the_l2():
    assert timing.flush_bytes(60 << 20) == 120 << 20
    assert timing.flush_bytes(None) >= 2 * (126 << 20)     # larger than any L2 today


def test_rates():
    assert timing.gflops((1000, 2000, 500), 2.0) == pytest.approx(2 * 1000 * 2000 * 500 / 2e-3 / 1e9)
    assert timing.gbps(8e9, 4.0) == pytest.approx(2000.0)
    # the fastest repeat gives the highest rate
    s = timing.spread(timing.Timing(2.0, 1.0, 4.0, 20), lambda ms: 100 / ms)
    assert s == {"median": 50.0, "min": 25.0, "max": 100.0}


def test_bytes_moved_count_the_input_read_and_written():
    unit, rate = timing.unit_and_rate("transpose_naive", (1000, 500), {"T": "double"})
    assert unit == "gbps" and rate(1.0) == pytest.approx(2 * 1000 * 500 * 8 / 1e-3 / 1e9)
    assert timing.input_bytes("device_copy", (1 << 30,), {}) == 1 << 30
    assert timing.input_bytes("device_copy", (8192, 8192), {}) == 8192 * 8192 * 4
    unit, rate = timing.unit_and_rate("dgemm_tiled", (64, 64, 64), {})
    assert unit == "gflops" and rate(1.0) == timing.gflops((64, 64, 64), 1.0)


def test_each_kernel_has_its_reference():
    assert timing.reference_of("naive") == "cublas"
    assert timing.reference_of("dgemm_tiled") == "cublas_dgemm"
    assert timing.reference_of("transpose_padded") == "device_copy"
    assert timing.reference_of("copy") == "device_copy"
    assert timing.reference_of("cublas") is None
