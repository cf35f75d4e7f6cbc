"""Static analysis from pip wheels: NVRTC -> PTX -> ptxas -> nvdisasm, no GPU."""
import pytest

from gemm_kernels import analysis, compiler
from gemm_kernels.core.kernels import KERNELS


@pytest.mark.parametrize("name", list(KERNELS))
def test_default_compiles_without_spills(name):
    res = compiler.resources(KERNELS[name], {})
    assert res["registers"] > 0
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res["report"]


@pytest.mark.parametrize("name", [n for n, k in KERNELS.items() if k.op == "sgemm"])
def test_gemm_main_loop_is_ffma(name):
    s = analysis.summary(name)
    assert s["loop_histogram"].get("FFMA", 0) > 0
    assert s["kernel_histogram"].get("LDL", 0) == 0


def test_naive_loop_loads_from_global_not_shared():
    s = analysis.summary("naive")
    assert s["loop_histogram"]["LDG"] > 0 and s["fma_per_lds"] is None


def test_occupancy_register_limit():
    occ = analysis.occupancy(256, 128, 0, analysis.device.limits_for("sm_90"))
    # 128 regs x 256 threads = 32768 registers: two blocks fill 65536.
    assert occ.blocks_per_sm == 2 and "registers" in occ.limiter


def test_occupancy_shared_memory_limit():
    occ = analysis.occupancy(128, 32, 100 * 1024, analysis.device.limits_for("sm_90"))
    assert occ.blocks_per_sm == 2 and occ.limiter == "shared memory"


def test_occupancy_thread_limit():
    occ = analysis.occupancy(1024, 32, 0, analysis.device.limits_for("sm_90"))
    assert occ.blocks_per_sm == 2 and occ.occupancy == 1.0
