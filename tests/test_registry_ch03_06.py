"""Registry entries of chapters 03-06: static compilation, constraints, geometry (CPU only)."""
from __future__ import annotations

import re

import pytest

from gemm_kernels import compiler, kernels
from gemm_kernels.core.registry import ceil_div

NAMES = ("smem_tiled", "bank_layout", "tile_1d", "tile_2d", "tile_2d_reg", "tile_2d_strided")


def _toolchain_or_skip():
    try:
        from cupy_backends.cuda.libs import nvrtc  # noqa: F401
        compiler._tool("ptxas")
        compiler._tool("nvdisasm")
    except (ImportError, RuntimeError) as e:
        pytest.skip(f"no NVRTC/ptxas/nvdisasm: {e}")


_OP = re.compile(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def _opcodes(sass: str) -> list[str]:
    return _OP.findall(sass)


def _ffma_per_lds(name, params=None) -> float:
    ops = _opcodes(compiler.sass(kernels.get(name), params or {}))
    ffma = sum(o == "FFMA" for o in ops)
    lds = sum(o.startswith("LDS") for o in ops)
    return ffma / lds


@pytest.mark.parametrize("name", NAMES)
def test_registered_with_valid_default(name):
    k = kernels.get(name)
    assert k.chapter in ("03", "04", "05", "06")
    assert k.problems() == []
    assert k.valid_configurations()
    assert k.defaults() in k.valid_configurations()


@pytest.mark.parametrize("name", NAMES)
def test_default_compiles_without_spills(name):
    _toolchain_or_skip()
    k = kernels.get(name)
    r = compiler.resources(k, {})
    assert 0 < r["registers"] <= 255
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0, r["report"]
    assert r["smem_bytes"] == k.smem(k.defaults())
    ops = _opcodes(compiler.sass(k, {}))
    assert not any(o.startswith(("LDL", "STL")) for o in ops)


@pytest.mark.parametrize("name", NAMES)
def test_some_other_valid_configurations_compile(name):
    _toolchain_or_skip()
    k = kernels.get(name)
    valid = k.valid_configurations()
    for cfg in {0, len(valid) // 2, len(valid) - 1}:
        params = valid[cfg]
        r = compiler.resources(k, params)
        assert r["registers"] > 0
        assert r["smem_bytes"] == k.smem(params), (params, r["report"])


@pytest.mark.parametrize("params", [
    {"BLOCK": 16, "LAYOUT": "transposed", "PAD": 1},
    {"BLOCK": 32, "LAYOUT": "conflict", "PAD": 3},
])
def test_bank_layout_other_configurations_compile(params):
    _toolchain_or_skip()
    k = kernels.get("bank_layout")
    assert compiler.resources(k, params)["spill_stores"] == 0


def test_bank_layout_maps_layout_names_to_template_integers():
    k = kernels.get("bank_layout")
    assert k.name_expression({"LAYOUT": "conflict", "PAD": 0}) == "sgemm_smem_layout<32, 0, 0>"
    assert k.name_expression({"BLOCK": 16, "LAYOUT": "transposed", "PAD": 1}) == \
        "sgemm_smem_layout<16, 1, 1>"
    assert len(k.valid_configurations()) == 2 * 2 * 5


# (kernel, params, the parameter names the message must mention)
INVALID = [
    ("smem_tiled", {"BLOCK": 64}, ["BLOCK"]),
    ("smem_tiled", {"BLOCK": 12}, ["BLOCK"]),
    ("bank_layout", {"PAD": 5}, ["PAD"]),
    ("bank_layout", {"LAYOUT": "padded"}, ["LAYOUT"]),
    ("bank_layout", {"BLOCK": 8}, ["BLOCK"]),
    ("tile_1d", {"BM": 16, "TM": 32}, ["TM", "BM"]),
    ("tile_1d", {"BM": 128, "BN": 128, "TM": 4}, ["BM", "BN", "TM"]),     # 4096 threads
    ("tile_1d", {"BM": 256, "BN": 256, "BK": 32, "TM": 32}, ["BK"]),      # 64 KiB of tiles
    ("tile_1d", {"BM": 128, "BN": 128, "TM": 16}, ["TM", "BK"]),          # registers
    ("tile_2d_reg", {"TN": 16, "BN": 32, "BM": 32, "TM": 16}, ["TM", "TN"]),  # 4 threads
    ("tile_2d_reg", {"TM": 2, "TN": 2}, ["TM", "TN"]),                    # 4096 threads
    ("tile_2d_reg", {"TM": 16, "TN": 16}, ["TM", "TN"]),                  # registers
    ("tile_2d_reg", {"BM": 256, "BN": 256, "BK": 32}, ["BK"]),            # 64 KiB of tiles
    ("tile_2d_strided", {"BN": 32, "TN": 64}, ["TN"]),                    # not allowed
    ("tile_2d_strided", {"BK": 64}, ["BK"]),
]


@pytest.mark.parametrize("name,params,mentions", INVALID)
def test_invalid_combinations_are_reported(name, params, mentions):
    k = kernels.get(name)
    problems = k.problems(params)
    assert problems, f"{name} {params} should be rejected"
    text = " ".join(problems)
    for m in mentions:
        assert m in text, (m, problems)
    assert k.resolve(params) not in k.valid_configurations()


@pytest.mark.parametrize("name,params", [
    ("tile_1d", {"BM": 128, "BN": 32, "BK": 16, "TM": 4}),     # 1024 threads
    ("tile_1d", {"BM": 32, "BN": 64, "TM": 16}),                # 128 threads
    ("tile_2d", {"BM": 64, "BN": 64, "TM": 8, "TN": 4}),        # 128 threads
    ("tile_2d_reg", {"BM": 64, "BN": 64, "TM": 4, "TN": 4}),    # 256 threads
    ("tile_2d_strided", {"BM": 128, "BN": 128, "TM": 8, "TN": 8}),
])
def test_small_and_unusual_legal_blocks_are_accepted(name, params):
    assert kernels.get(name).problems(params) == []


def test_unknown_parameter_is_an_error():
    with pytest.raises(ValueError, match="BLOCK"):
        kernels.get("tile_1d").resolve({"BLOCK": 32})


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (129, 67, 33), (4096, 4096, 4096), (7, 1000, 3)])
def test_geometry_covers_c(name, shape):
    k = kernels.get(name)
    p = k.defaults()
    M, N, K = shape
    gx, gy, gz = k.grid(p, shape)
    threads = k.threads(p)
    assert gz == 1 and threads[0] * threads[1] * threads[2] <= 1024
    if name in ("smem_tiled", "bank_layout"):
        bm = bn = p["BLOCK"]
        assert threads == (bm, bm, 1)
    else:
        bm, bn = p["BM"], p["BN"]
        per_thread = p["TM"] * p.get("TN", 1)
        assert threads == (bm * bn // per_thread, 1, 1)
    assert (gx, gy) == (ceil_div(N, bn), ceil_div(M, bm))


@pytest.mark.parametrize("name", ("tile_1d", "tile_2d", "tile_2d_reg", "tile_2d_strided"))
def test_every_valid_configuration_respects_launch_limits(name):
    k = kernels.get(name)
    for p in k.valid_configurations():
        n = k.threads(p)[0]
        assert 32 <= n <= 1024
        assert k.smem(p) <= 48 * 1024


def test_ffma_per_shared_load_rises_from_chapter_03_to_06():
    _toolchain_or_skip()
    ch03 = _ffma_per_lds("smem_tiled")
    ch05 = _ffma_per_lds("tile_1d")
    inner = _ffma_per_lds("tile_2d")
    outer = _ffma_per_lds("tile_2d_reg")
    assert ch03 < ch05 < outer
    assert inner < ch05          # two shared loads per FMA in the rolled dot product
    assert outer >= 8            # 8x8 register-cached outer product: 512 FFMA, 32 LDS.128


def test_contiguous_4x4_uses_wide_loads_and_strided_does_not():
    _toolchain_or_skip()
    p = {"BM": 128, "BN": 128, "BK": 8, "TM": 4, "TN": 4}
    contiguous = _opcodes(compiler.sass(kernels.get("tile_2d_reg"), p))
    strided = _opcodes(compiler.sass(kernels.get("tile_2d_strided"), p))
    count = lambda ops, op: sum(o == op for o in ops)   # noqa: E731
    assert count(contiguous, "LDS") == 0 and count(contiguous, "LDS.128") > 0
    assert count(strided, "LDS") > 0
    lds = lambda ops: sum(o.startswith("LDS") for o in ops)   # noqa: E731
    assert lds(contiguous) < lds(strided)
    assert count(contiguous, "FFMA") == count(strided, "FFMA")
