"""Chapter 00's two recorded GPUs side by side, from two small fake recordings whose
numbers are test data, never measurements."""
import json

import matplotlib
import pytest

matplotlib.use("Agg")

from gemm_kernels.core.kernels import get  # noqa: E402
from gemm_kernels.measure import gpus, records  # noqa: E402

SHAPE = [4096] * 3


def _row(kernel, value, ref=None, unit="gflops", shape=SHAPE):
    # cuBLAS and the device copy are references, not registry kernels: no params, no source
    k = get(kernel) if kernel == "capstone" else None
    row = {"chapter": k.chapter if k else "00", "kernel": kernel,
           "params": k.resolve(None) if k else {}, "shape": list(shape),
           unit: {"median": value, "min": value, "max": value},
           "source": k.source_hash() if k else None, "time": "2026-01-02T00:00:00Z"}
    if ref is not None:
        row["reference"] = {"kernel": "cublas", unit: {"median": ref}}
    return row


def _recording(name, blas, capstone, copy):
    props = {"name": name, "compute_capability": "9.0", "sm_count": 100,
             "sm_clock_mhz": 2000.0, "fp32_lanes_per_sm": 128, "memory_clock_mhz": 3000.0,
             "memory_bus_bits": 4096}
    return {"schema": 2, "device": props, "created": "2026-01-02T00:00:00Z",
            "commit": "abc", "runs": {},
            "results": [_row("cublas", blas), _row("capstone", capstone, ref=blas),
                        _row("device_copy", copy, unit="gbps", shape=gpus.COPY_SHAPE)]}


@pytest.fixture
def two_gpus(data_dir):
    (data_dir / records.DEFAULT).write_text(json.dumps(_recording("NVIDIA A1", 40000, 30000, 2000)))
    (data_dir / "b.json").write_text(json.dumps(_recording("NVIDIA B2 80GB", 50000, 49000, 3000)))


def test_each_gpu_is_one_row_and_each_share_uses_its_own_cublas(two_gpus):
    rows = list(gpus.summary())
    assert [r["GPU"] for r in rows] == ["A1", "B2"]          # the default first
    assert [r["capstone, % of its cuBLAS"] for r in rows] == ["75%", "98%"]
    assert [r["device copy, GB/s"] for r in rows] == [2000, 3000]
    assert rows[0]["FP32 peak, TFLOP/s"] == 51.2              # 100 x 128 x 2 x 2 GHz


def test_the_ladder_plot_draws_one_bar_per_gpu_and_kernel(two_gpus):
    ax = gpus.plot_ladder(kernels=["capstone"])
    heights = sorted(round(p.get_height()) for p in ax.patches)
    assert heights == [75, 98]
    assert len(ax.get_legend().get_texts()) == 2
