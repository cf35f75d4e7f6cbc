"""The plan for a shape, and `sgemm`, the one call that runs it.

A plan is a registry kernel and its parameters. M == 1 or N == 1 is a matrix-vector
product (gemv, memory-bound); every other shape runs the capstone's kernel with the
tile and the split of K for which the time model (model.py) predicts the shortest
time. A GPU without cp.async (Colab's T4) runs chapter 09's z-order kernel instead.
"""
from __future__ import annotations

from dataclasses import dataclass

from gemm_kernels.core import device
from gemm_kernels.core.kernels import SPLITS, get, slices
from gemm_kernels.core.launch import launch, shape_problem
from gemm_kernels.core.registry import ceil_div, runnable
from gemm_kernels.plan import model

# A slice of K shorter than this many BK steps spends more on filling the pipeline
# (4 stages) than on computing: splits that would leave less are not considered.
MIN_STEPS_PER_SLICE = 4
FALLBACK = "zorder"      # the fastest kernel of the series without cp.async


@dataclass(frozen=True)
class Plan:
    kernel: str
    params: dict
    predicted_us: float | None = None

    def __str__(self) -> str:
        p = self.params
        split = "no split" if p.get("SPLIT", 1) == 1 else f"K in {p['SPLIT']} slices"
        if self.kernel == model.SPLIT_KERNEL:
            return f"{p['BM']}x{p['BN']} tiles, {split}" + (", B padded" if p.get("PAD_B") else "")
        if self.kernel == model.GEMV_KERNEL:
            loads = ", streaming loads" if p.get("STREAM") else ""
            return f"matrix-vector product, {p['WARPS']} warps per block, {split}{loads}"
        return f"{self.kernel} (defaults)"


def candidates(shape) -> list[tuple[int, int, int]]:
    """(BM, BN, split) for every tile and every split that leaves each slice at least
    MIN_STEPS_PER_SLICE steps of K (split 1 always)."""
    chunks = ceil_div(shape[2], model.split_params(128, 128, 1)["BK"])
    out = []
    for BM, BN in model.TILES:
        for s in SPLITS:
            if s == 1 or (slices(chunks, s) == s and chunks // s >= MIN_STEPS_PER_SLICE):
                out.append((BM, BN, s))
    return out


def gemv_params(shape, rules) -> dict:
    """The rules' block size for the shape's path, the smallest split that gives every
    SM the rules' gemv warps per SM, and the rules' kind of load of B (M == 1)."""
    k = get(model.GEMV_KERNEL)
    sms = _sm_count(rules)
    warps = rules.gemv_warps[model.gemv_path(shape)]
    splits = next(q for q in k.params if q.name == "SPLIT").values
    stream = rules.gemv_stream and model.gemv_path(shape) == "cols"
    for s in splits:
        p = {"SPLIT": s, "WARPS": warps, "STREAM": stream}
        if model.gemv_warps(k, p, shape) >= rules.gemv_warps_per_sm * sms:
            return p
    return {"SPLIT": splits[-1], "WARPS": warps, "STREAM": stream}


def ranked(shape, rules, sm_count: int, limits: dict | None = None,
           beta_nonzero: bool = False) -> list[tuple[float, tuple[int, int, int]]]:
    """Every candidate (BM, BN, split) for `shape` that the registry accepts, with the
    model's time under `rules`, fastest first."""
    from gemm_kernels.core.launch import problems
    k = get(model.SPLIT_KERNEL)
    return sorted((model.predict_us(rules, shape, BM, BN, s, beta_nonzero, sm_count=sm_count,
                                    limits=limits), (BM, BN, s))
                  for BM, BN, s in candidates(shape)
                  if not problems(k, {"BM": BM, "BN": BN, "SPLIT": s}, shape))


def plan(shape, beta_nonzero: bool = False, rules=None, limits: dict | None = None) -> Plan:
    """The plan for a GEMM of `shape` (M, N, K) on this GPU (or the recorded one), under
    `rules` (default `model.load()`) and the GPU `limits` describe (default this one)."""
    bad = shape_problem(model.SPLIT_KERNEL, shape)
    if bad:
        raise ValueError(bad)
    shape = tuple(int(d) for d in shape)
    rules = rules or model.load()
    if 1 in shape[:2]:
        k = get(model.GEMV_KERNEL)
        return Plan(k.name, k.resolve(gemv_params(shape, rules) if rules else {}))
    k = get(model.SPLIT_KERNEL)
    if not runnable(k)[0]:
        return Plan(FALLBACK, get(FALLBACK).defaults())
    if rules is None:
        return Plan(k.name, k.defaults())
    t, (BM, BN, s) = ranked(shape, rules, _sm_count(rules), limits, beta_nonzero)[0]
    return Plan(k.name, {**model.split_params(BM, BN, s), "PAD_B": model.pads(rules, shape)}, t)


def _sm_count(rules) -> int:
    """The SMs of the GPU that runs the plan: the live one, else the rules' device."""
    return device.properties()["sm_count"] if device.is_live() else rules.sm_count


def sgemm(A, B, C=None, alpha: float = 1.0, beta: float = 0.0):
    """C = alpha * A @ B + beta * C in float32 on the GPU, with the kernel, tile and
    split of K that `plan` picks for the shape; returns C. Without C, a new M x N array
    (beta must then be 0). A, B (and C) are C-contiguous float32 CuPy arrays; anything
    else gets the launcher's message before anything runs."""
    import cupy
    if C is None:
        if beta != 0:
            raise ValueError(f"beta={beta} needs a C to scale: pass C, or beta=0")
        if not (isinstance(A, cupy.ndarray) and isinstance(B, cupy.ndarray)
                and A.ndim == 2 and B.ndim == 2):
            raise ValueError("A and B must be 2-D cupy.ndarrays (float32, C-contiguous)")
        C = cupy.empty((A.shape[0], B.shape[1]), dtype=cupy.float32)
    shape = (A.shape[0], B.shape[1], A.shape[1]) if getattr(A, "ndim", 0) == 2 \
        and getattr(B, "ndim", 0) == 2 else None
    p = plan(shape, beta != 0) if shape and shape_problem(model.SPLIT_KERNEL, shape) is None \
        else Plan(model.SPLIT_KERNEL, {})
    launch(p.kernel, A, B, C, alpha=alpha, beta=beta, params=p.params)
    return C
