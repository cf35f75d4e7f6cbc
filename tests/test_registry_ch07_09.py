"""Chapters 07-09 (float4, double_buffer, zorder, capstone) without a GPU: registry
rules, the shape-chosen code path, static analysis of the defaults. The bank model of
these chapters is checked against the kernels' source and the recorded Nsight Compute
counters in test_smem_patterns.py; their results on a GPU in test_gpu_kernels.py."""
import re

import pytest

from gemm_kernels import analysis, compiler
from gemm_kernels.core.kernels import get

NAMES = ("float4", "double_buffer", "zorder", "capstone")


# ------------------------------------------------------------------ static analysis

@pytest.mark.parametrize("name", NAMES)
def test_default_compiles_without_spills(name):
    k = get(name)
    res = compiler.resources(k, {})
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res["report"]
    assert res["stack_bytes"] == 0, res["report"]
    if name == "capstone":
        assert res["registers"] <= 255
    else:   # two blocks of 256 threads per SM: at most 128 registers per thread
        assert k.threads(k.defaults()) == (256, 1, 1)
        assert res["registers"] <= 128, res["report"]


@pytest.mark.parametrize("name", NAMES)
def test_default_sass_uses_wide_loads_and_ffma(name):
    s = analysis.summary(name)
    whole, loop = s["kernel_histogram"], s["loop_histogram"]
    assert loop.get("LDS.128", 0) > 0
    assert whole.get("LDL", 0) == 0 and whole.get("STL", 0) == 0
    assert loop.get("LDS", 0) <= 4   # no scalar shared loads in the inner loop
    if name == "capstone":
        assert loop.get("LDGSTS", 0) > 0       # cp.async
        assert whole.get("STS", 0) == 0 and whole.get("STS.128", 0) == 0
    else:
        assert loop.get("LDG.128", 0) > 0      # float4 global loads
        assert whole.get("STG.128", 0) > 0     # float4 stores of C
    assert loop["FFMA"] > 0.75 * sum(loop.values()), loop


@pytest.mark.parametrize("name", NAMES)
def test_edge_path_compiles_without_spills(name):
    k = get(name)
    expr = k.name_expression({}, (515, 515, 515))
    assert expr.endswith("false>")
    _, report, _ = compiler._cubin(k, expr, compiler.STATIC_ARCH)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert spill and spill.groups() == ("0", "0"), report


def test_capstone_alternative_two_blocks_per_sm_fits_128_registers():
    params = {"BN": 128, "WM": 32, "WN": 64, "MINB": 2}
    k = get("capstone")
    assert k.problems(params) == []
    res = compiler.resources(k, params)
    assert res["registers"] <= 128 and res["spill_stores"] == 0, res["report"]


@pytest.mark.parametrize("params", [{}, {"BN": 256, "BK": 8, "WM": 64, "WN": 64}])
def test_capstone_hoist_compiles_lean(params):
    # HOIST: no spills on either path, and the main loop sheds the per-tile address
    # arithmetic: a larger FFMA share than the same tile without it.
    k = get("capstone")
    hoisted, plain = {**params, "HOIST": True}, {**params, "HOIST": False}
    assert k.problems(hoisted) == [] and k.problems(plain) == []
    s = analysis.summary("capstone", hoisted)
    assert s["spill_stores"] == 0 and s["spill_loads"] == 0 and s["stack_bytes"] == 0
    share = lambda loop: loop["FFMA"] / sum(loop.values())
    assert share(s["loop_histogram"]) > share(analysis.summary("capstone", plain)["loop_histogram"])
    _, report, _ = compiler._cubin(k, k.name_expression(hoisted, (515, 515, 515)),
                                   compiler.STATIC_ARCH)
    assert "0 bytes spill stores, 0 bytes spill loads" in report, report


# ------------------------------------------------------------------ registry

@pytest.mark.parametrize("name", NAMES)
def test_shape_picks_the_code_path(name):
    k = get(name)
    assert k.name_expression({}).endswith("true>")                  # static analysis
    assert k.name_expression({}, (4096, 4096, 4096)).endswith("true>")
    assert k.name_expression({}, (1000, 512, 300)).endswith("true>")
    assert k.name_expression({}, (512, 515, 512)).endswith("false>")  # N % 4 != 0
    ragged_k = k.name_expression({}, (512, 512, 515))                  # K % 4 != 0
    # The capstone copies A 4 bytes at a time, so only N decides its path.
    assert ragged_k.endswith("true>" if name == "capstone" else "false>")


def test_instantiations():
    assert get("float4").name_expression({}) == "sgemm_float4<128, 128, 8, 8, 8, true>"
    assert get("zorder").name_expression({"ZORDER": False, "PAD": 0}, (7, 7, 7)) == \
        "sgemm_zorder<128, 128, 8, 0, false, false>"
    assert get("capstone").name_expression({}) == \
        "sgemm_capstone<128, 128, 16, 32, 64, 4, 1, 1, true, true>"
    assert get("capstone").name_expression({"HOIST": False, "BK": 8}, (7, 7, 7)) == \
        "sgemm_capstone<128, 128, 8, 32, 64, 4, 1, 1, false, false>"


def test_geometry():
    k = get("capstone")
    p = k.defaults()
    assert k.threads(p) == (256, 1, 1)
    assert k.grid(p, (4096, 4096, 4096)) == (32, 32, 1)
    assert k.grid(p, (1, 1, 1)) == (1, 1, 1)
    assert k.dynamic_bytes(p) == 4 * 16 * (128 + 4 + 128) * 4
    assert get("zorder").smem(get("zorder").defaults()) == 2 * 8 * (132 + 128) * 4


@pytest.mark.parametrize("name, params, word", [
    ("float4", {"TM": 3}, "TM=3"),                                    # not an allowed value
    ("float4", {"BN": 64, "TM": 4}, "BK*BN/4"),       # the B tile does not split over threads
    ("double_buffer", {"BM": 64, "BN": 64, "TM": 4, "TN": 4}, "BM*BK/4"),
    ("zorder", {"PAD": 1}, "PAD=1"),
    ("capstone", {"BN": 256, "WM": 64, "WN": 64, "BK": 8, "MINB": 2}, "MINB=2"),  # 8x16 per
    # thread needs more than 128 registers
    ("capstone", {"BN": 256, "WM": 64, "WN": 128}, "BN=256"),  # 128 threads cannot copy
    # 256-wide B rows
    ("capstone", {"BN": 128, "WM": 64, "WN": 128}, "WM*WN/32"),  # 16 x 16 per thread
])
def test_invalid_combinations_name_the_parameter(name, params, word):
    msgs = get(name).problems(params)
    assert msgs, f"{name} {params} should be invalid"
    assert any(word in m for m in msgs), msgs


@pytest.mark.parametrize("name", NAMES)
def test_valid_configurations_exist_and_include_default(name):
    k = get(name)
    valid = k.valid_configurations()
    assert k.defaults() in valid
