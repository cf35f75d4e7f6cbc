"""The time model that picks a plan, and the fit of its constants to recorded sweeps.

A capstone_split plan (tile BM x BN, K cut into z slices) runs blocks = tiles * z
blocks in w = waves(blocks, slots) rounds, each round as long as one block's work:

    time = w * (c0 + c1 * BM * BN * Kz)   [+ r0 + bytes / bandwidth   when z > 1]

Kz is the depth of one slice; c0 (a block's fixed cost: prologue, epilogue, the
pipeline filling) and c1 (time per multiply-add of a block while the SM is full) are
fitted per tile (least squares on relative errors) from the calibration rows without a
split; the reduction reads the z partial products and writes C (and reads C when beta != 0), at the device copy's
bandwidth plus a fixed r0 fitted from the rows with a split. A gemv plan takes the
smallest split that gives every SM `gemv_blocks_per_sm` blocks, the count that was
fastest in the calibration rows.

rules/<device>.json holds one GPU's fitted constants with where they come from (runs,
rows); `python -m gemm_kernels.plan fit` writes it from that GPU's recording (never by
hand). A GPU without its own rules uses those of the recording the notebooks show (or
any other): the model's shape (tiles, waves, splits) is the same everywhere, and the
SM count and occupancy are the GPU's own.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from gemm_kernels.core import device
from gemm_kernels.core.kernels import get, slices
from gemm_kernels.core.registry import ceil_div
from gemm_kernels.plan import waves as W

RULES_DIR = Path(__file__).with_name("rules")
TILES = ((128, 128), (64, 128), (128, 64), (64, 64))
SPLIT_KERNEL, GEMV_KERNEL = "capstone_split", "gemv"


def tile_name(BM: int, BN: int) -> str:
    return f"{BM}x{BN}"


@dataclass(frozen=True)
class Rules:
    """The fitted constants (times in microseconds) and their provenance."""
    device: str
    sm_count: int
    tiles: dict            # "BMxBN" -> {"registers", "c0_us", "c1_us_per_mfma"}
    reduce_us: float       # r0
    bandwidth_gbps: float  # the device copy's rate, for the reduction's bytes
    gemv_blocks_per_sm: int
    provenance: dict

    @classmethod
    def from_dict(cls, d: dict) -> "Rules":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})


def rules_path(device_name: str) -> Path:
    from gemm_kernels.measure.records import slug
    return RULES_DIR / f"{slug(device_name)}.json"


@lru_cache(maxsize=None)
def load() -> Rules | None:
    """The rules for this GPU (live), else for the recording shown, else any; None where
    none were fitted yet."""
    from gemm_kernels.measure import records
    want = []
    if device.is_live():
        want.append(rules_path(device.properties()["name"]))
    rec = records.current()
    if rec:
        want.append(rules_path(rec.device["name"]))
    want += sorted(RULES_DIR.glob("*.json"))
    for path in want:
        if path.exists():
            return Rules.from_dict(json.loads(path.read_text()))
    return None


def split_params(BM: int, BN: int, split: int) -> dict:
    return get(SPLIT_KERNEL).resolve({"BM": BM, "BN": BN, "SPLIT": split})


def slots(params: dict, registers: int, sm_count: int, limits: dict) -> int:
    """Block slots of the GPU for one capstone_split configuration."""
    k = get(SPLIT_KERNEL)
    t = k.threads(params)
    return sm_count * W.per_sm(t[0] * t[1] * t[2], registers,
                               k.dynamic_smem(params, limits), limits)


def predict_us(rules: Rules, shape, BM: int, BN: int, split: int, beta_nonzero: bool = False,
               sm_count: int | None = None, limits: dict | None = None) -> float:
    """The model's time of capstone_split (BM, BN, split) at `shape`, in microseconds."""
    M, N, K = shape
    p = split_params(BM, BN, split)
    c = rules.tiles[tile_name(BM, BN)]
    chunks = ceil_div(K, p["BK"])
    z = slices(chunks, split)
    depth = ceil_div(chunks, z) * p["BK"]
    n_slots = slots(p, c["registers"], sm_count or rules.sm_count, limits or device.limits())
    w = W.waves(W.tiles(shape, BM, BN) * z, n_slots)
    t = w * (c["c0_us"] + c["c1_us_per_mfma"] * BM * BN * depth)
    if z > 1:
        planes = z + 1 + (1 if beta_nonzero else 0)
        t += rules.reduce_us + planes * M * N * 4 / (rules.bandwidth_gbps * 1e3)
    return t


# ------------------------------------------------------------------ the fit

def _time_us(row: dict) -> float:
    M, N, K = row["shape"]
    return 2 * M * N * K / (row["gflops"]["median"] * 1e3)


def fit(rows: list[dict], props: dict, bandwidth_gbps: float, runs: list[str]) -> dict:
    """Rules from calibration rows measured on the device `props` describes: each tile's
    (c0, c1) by least squares over its rows without a split, r0 as the median of what
    the rows with a split leave unexplained, and the gemv blocks per SM that were
    fastest most often."""
    import numpy as np
    lim = device.limits_for(device.arch_name(props["compute_capability"]))
    sms = props["sm_count"]
    tiles = {}
    for BM, BN in TILES:
        own = [r for r in rows if r["kernel"] == SPLIT_KERNEL and r["params"]["BM"] == BM
               and r["params"]["BN"] == BN]
        plain = [r for r in own if r["params"]["SPLIT"] == 1]
        if len(plain) < 2:
            raise ValueError(f"tile {BM}x{BN}: {len(plain)} calibration rows without a split; "
                             "the fit needs at least 2")
        regs = max(r["binary"]["registers"] for r in own)
        n_slots = slots(split_params(BM, BN, 1), regs, sms, lim)
        X, y = [], []
        for r in plain:
            M, N, K = r["shape"]
            w = W.waves(W.tiles(r["shape"], BM, BN), n_slots)
            X.append([w, w * BM * BN * ceil_div(K, 16) * 16])
            y.append(_time_us(r))
        # Relative errors, not microseconds: each row divided by its own time, so that a
        # 10 us run counts as much as a 10 ms one (the plan must rank configurations at
        # every size, and the short runs are where c0, the fixed cost, shows).
        X, y = np.array(X, float), np.array(y)
        (c0, c1), *_ = np.linalg.lstsq(X / y[:, None], np.ones_like(y), rcond=None)
        tiles[tile_name(BM, BN)] = {"registers": regs, "c0_us": float(max(c0, 0.0)),
                                    "c1_us_per_mfma": float(c1)}
    partial = Rules(props["name"], sms, tiles, 0.0, bandwidth_gbps, 1, {})
    left = [_time_us(r) - predict_us(partial, r["shape"], r["params"]["BM"], r["params"]["BN"],
                                     r["params"]["SPLIT"], sm_count=sms, limits=lim)
            for r in rows if r["kernel"] == SPLIT_KERNEL and r["params"]["SPLIT"] > 1]
    best = {}
    for r in rows:
        if r["kernel"] == GEMV_KERNEL:
            key = tuple(r["shape"])
            if key not in best or r["gflops"]["median"] > best[key]["gflops"]["median"]:
                best[key] = r
    per_sm = [gemv_blocks(get(GEMV_KERNEL), r["params"], r["shape"]) / sms for r in best.values()]
    return {"device": props["name"], "sm_count": sms, "tiles": tiles,
            "reduce_us": float(max(statistics.median(left), 0.0)) if left else 0.0,
            "bandwidth_gbps": bandwidth_gbps,
            "gemv_blocks_per_sm": max(1, round(statistics.median(per_sm))) if per_sm else 4,
            "provenance": {"runs": sorted(runs), "rows": len(rows),
                           "rule": "fitted by gemm_kernels.plan.model.fit"}}


def gemv_blocks(k, params: dict, shape) -> int:
    """Blocks of a gemv launch (all slices)."""
    g = k.grid(k.resolve(params), tuple(shape))
    return g[0] * g[1] * g[2]
