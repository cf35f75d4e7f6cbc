"""Counters recorded on one GPU are read against that GPU's SMs, clock and L2
(`records.recorded_device`), never against a live GPU's: on a student's T4 in live mode,
what a recorded profile says must read exactly as it does without a GPU. (The live GPU
here is an A100, not a T4: chapter 09's capstone, whose SASS one of these reads, needs
sm_80.)"""
import pytest

from gemm_kernels.core import device
from gemm_kernels.measure import lookup, records

# A live GPU unlike every recorded one: fewer SMs, another clock, another L2.
LIVE = {"name": "NVIDIA A100-SXM4-40GB", "sm_count": 108, "sm_clock_mhz": 1410,
        "fp32_lanes_per_sm": 64, "l2_bytes": 40 << 20, "compute_capability": "8.0",
        "max_threads_per_sm": 2048, "memory_clock_mhz": 1215, "memory_bus_bits": 5120}


@pytest.fixture
def shown(monkeypatch):
    """The recording the notebooks show, in recorded mode; `live()` then turns on a live
    A100 whose timings are the recording's (nothing is measured)."""
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    device._gpu_present.cache_clear()
    records._LOADED.clear()
    assert records.current() is not None

    def live():
        monkeypatch.setattr(device, "is_live", lambda: True)
        monkeypatch.setattr(device, "properties", lambda: dict(LIVE))
        monkeypatch.setattr(lookup, "measure_or_lookup",
                            lambda kernel, shape, params=None, **_: lookup.recorded(
                                kernel, shape, params))
    yield live
    records._LOADED.clear()


def test_recorded_device_is_the_recordings(shown):
    rec = records.current()
    assert records.recorded_device() == rec.device
    shown()
    assert records.recorded_device() == rec.device
    assert records.recorded_device(rec) is not rec.device      # a copy, safe to change


def test_described_device_is_the_live_gpu_when_there_is_one(shown):
    # What is measured now is described by the GPU that measures it; without one, by
    # the GPU the recording was made on.
    rec = records.current()
    assert records.described_device() == rec.device
    shown()
    assert records.described_device() == LIVE
    assert records.recorded_device() == rec.device


def test_described_device_is_empty_without_gpu_or_recording(monkeypatch):
    monkeypatch.setattr(device, "is_live", lambda: False)
    monkeypatch.setattr(records, "current", lambda: None)
    assert records.described_device() == {}


def _calls():
    from gemm_kernels.memory import ch01_02_sectors
    from gemm_kernels.notebook import capstone_pictures, ch02_coalescing, ch10_transpose
    return {"l1_table": lambda: repr(ch01_02_sectors.l1_table()),
            "counting_guide": lambda: str(ch02_coalescing.counting_guide()),
            "alignment_table": lambda: repr(ch02_coalescing.alignment_table("naive")),
            "coalescing_gain": lambda: str(ch02_coalescing.coalescing_gain()),
            "issue_evidence": lambda: str(capstone_pictures.issue_evidence()),
            "copy_little": lambda: repr(ch10_transpose.copy_little()),
            "copy_wait_check": lambda: str(ch10_transpose.copy_wait_check()),
            "unwritten_text": lambda: str(ch10_transpose.unwritten_text())}


@pytest.mark.parametrize("name", ["l1_table", "counting_guide", "alignment_table",
                                  "coalescing_gain", "issue_evidence",
                                  "copy_little", "copy_wait_check", "unwritten_text"])
def test_recorded_counters_read_the_same_on_a_live_gpu(shown, name):
    call = _calls()[name]
    recorded = call()
    shown()
    assert call() == recorded


def test_little_table_splits_the_read_rate_over_the_profiled_sms(shown):
    from gemm_kernels.notebook import ch10_transpose as ch
    sms = records.current().device["sm_count"]
    before = ch.little_table()
    shown()
    after = ch.little_table()
    assert [r[ch.DRAM_RATE] for r in after] == [r[ch.DRAM_RATE] for r in before]
    assert f", {sms} SMs;" in after.title and f", {LIVE['sm_count']} SMs;" not in after.title
