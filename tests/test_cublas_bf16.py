"""cuBLAS with BF16 inputs, timed beside cuBLAS FP16 (`timing.CUBLAS_BF16`): the rounding
to BF16 and its bits on a CPU, the bound it is judged by, a study that times it, and a
real run on a GPU."""
import numpy as np
import pytest

from gemm_kernels.measure import check, record, studies, study_run, timing
from tests.gpu import needs_gpu


def test_values_round_to_the_nearest_bf16_ties_to_even():
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-9, 1 + 2**-7 + 2**-9, -2.5],
                 np.float32)
    want = np.array([1.0, 1.0, 1 + 2**-6, 1.0, 1 + 2**-7, -2.5], np.float32)
    assert np.array_equal(timing.bf16_values(x), want)
    assert timing.bf16_values(x).dtype == np.float32


def test_bits_are_the_upper_half_of_the_float32():
    v = timing.bf16_values(np.array([1.0, -2.5, 1 + 2**-7], np.float32))
    assert timing.bf16_bits(v).tolist() == [0x3F80, 0xC020, 0x3F81]
    # and back: the bits shifted up are the value again
    assert np.array_equal((timing.bf16_bits(v).astype(np.uint32) << 16).view(np.float32), v)


def test_bf16_is_judged_by_the_tensor_core_bound_and_timed_beside_fp16():
    assert check.gemm_bound(64, 64, 300, "float32", "bfloat16") == check.tensor_core_bound(300)
    assert timing.reference_of(timing.CUBLAS_BF16) == "cublas_hgemm"
    assert timing.unit_and_rate(timing.CUBLAS_BF16, (2, 2, 2), {})[0] == "gflops"


def test_a_study_names_only_references_it_can_time():
    bad = studies.Study("x", "15", "?", "ncu", (), ((64, 64, 64),), ("m",), ("nonesuch",))
    found = studies.problems(bad)
    assert any("'nonesuch' is not a reference" in f for f in found)
    assert any("only a timed study" in f for f in found)


def test_the_ladder_study_times_bf16_at_each_shape_in_its_run(monkeypatch):
    seen = []
    monkeypatch.setattr(record, "warm", lambda configs: None)
    monkeypatch.setattr(record, "measure", lambda k, shape, p=None: seen.append(
        (k if isinstance(k, str) else k.name, tuple(shape))) or
        {"gflops": {"median": 1.0}, "reference": {"kernel": "r", "gflops": {"median": 2.0}}})
    # the correctness check before timing needs a GPU (tested in test_studies.py)
    monkeypatch.setattr(study_run, "check_steps", lambda name, shapes=None, log=None: [])
    st = studies.get("ch13_15_ladder")
    study_run.study_rows("ch13_15_ladder", log=lambda *a: None)
    assert [s for s in seen if s[0] == timing.CUBLAS_BF16] == \
        [(timing.CUBLAS_BF16, tuple(shape)) for shape in st.shapes]


@needs_gpu
def test_cublas_bf16_is_right_and_timed_beside_fp16():
    row = timing.measure(timing.CUBLAS_BF16, (300, 200, 500), repeats=3)
    assert row["error_over_bound"] < 1
    assert row["reference"]["kernel"] == "cublas_hgemm" and row["gflops"]["median"] > 0
