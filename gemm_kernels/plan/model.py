"""The time model that picks a plan, and the fit of its constants to recorded sweeps.

A capstone_split plan (tile BM x BN, K cut into z slices) launches tiles * z blocks;
spread over the SMs, the busiest SM gets n = ceil(blocks / SMs) of them and holds at most
`per_sm` at once (its registers and shared memory decide), so it runs them in
ceil(n / per_sm) rounds with q = min(n, per_sm) blocks side by side:

    time = c0 * ceil(n / per_sm) + c1 * BM * BN * Kz * n / q ** gamma
           [+ r0 + bytes / bandwidth   when z > 1]

Kz is the depth of one slice. c0 is a round's fixed cost (prologue, epilogue, filling
the pipeline); c1 the time of a multiply-add of a block running alone on its SM; gamma
says how much q blocks side by side gain over one: gamma = 0 none (the SM is already
busy with one), gamma = 1 each runs as fast as alone (the old picture of waves, every
block of a wave costing the same). c0 and c1 are fitted per tile by least squares on the
calibration rows without a split, for each gamma of GAMMAS; the reduction reads the z
partial products and writes C (and reads C when beta != 0) at the device copy's
bandwidth plus r0, the median of what the rows with a split leave unexplained. Of the
gammas, the fit keeps the one whose picks are fastest at the calibration shapes (the
mean of measured best / measured pick; of equals, the one nearest the measured times).
Where N % 4 != 0 the capstone copies B 4 bytes at a time (its rows are not 16-byte
aligned), unless B is first copied into rows padded to a multiple of 4 floats (PAD_B):
that copy costs r0 + its bytes at the copy's bandwidth, and the kernel then reads B 16
bytes at a time with the registers of the padded build. Whether to pad is one rule,
`pad_ragged_b`: the calibration times both at its shapes with N % 4 != 0, and the rule
is to pad when the padded plan was faster at more than half of those (shape, tile)
pairs. The padded rows are left out of the (c0, c1) fit (their time includes the copy).
A gemv plan takes, for its path (N == 1: "rows", M == 1: "cols"), the block size in
warps that was fastest most often in the calibration rows of that path (`gemv_warps`),
and the smallest split that gives every SM `gemv_warps_per_sm` warps, the median of the
fastest configurations; on the M == 1 path it reads B with streaming loads if
`gemv_stream`: the fastest streaming configuration beat the fastest plain one at more
than half of the calibration's M == 1 shapes.

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
GAMMAS = (0.0, 0.25, 0.5, 0.75, 1.0)
SPLIT_KERNEL, GEMV_KERNEL = "capstone_split", "gemv"


def tile_name(BM: int, BN: int) -> str:
    return f"{BM}x{BN}"


@dataclass(frozen=True)
class Rules:
    """The fitted constants (times in microseconds) and their provenance."""
    device: str
    sm_count: int
    tiles: dict            # "BMxBN" -> {"registers", "registers_scalar", "c0_us",
                           #             "c1_us_per_mfma"}
    gamma: float           # what blocks side by side on an SM gain (see the top)
    reduce_us: float       # r0
    bandwidth_gbps: float  # the device copy's rate, for the reduction's bytes
    gemv_warps_per_sm: int
    gemv_warps: dict       # "rows" / "cols" -> warps per block
    provenance: dict
    pad_ragged_b: bool = False   # N % 4 != 0: copy B into padded rows first (see the top)
    gemv_stream: bool = False    # M == 1: streaming loads of B (see the top)

    @classmethod
    def from_dict(cls, d: dict) -> "Rules":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def rules_path(device_name: str) -> Path:
    from gemm_kernels.measure.records import slug
    return RULES_DIR / f"{slug(device_name)}.json"


def for_device(device_name: str) -> Rules | None:
    """The rules fitted for the GPU named `device_name`, or None."""
    path = rules_path(device_name)
    return Rules.from_dict(json.loads(path.read_text())) if path.exists() else None


@lru_cache(maxsize=None)
def load() -> Rules | None:
    """The rules for this GPU (live), else for the recording shown, else any; None where
    none were fitted yet."""
    from gemm_kernels.measure import records
    rec = records.current()
    names = ([device.properties()["name"]] if device.is_live() else []) + \
        ([rec.device["name"]] if rec else [])
    paths = [rules_path(n) for n in names] + sorted(RULES_DIR.glob("*.json"))
    found = next((p for p in paths if p.exists()), None)
    return Rules.from_dict(json.loads(found.read_text())) if found else None


def split_params(BM: int, BN: int, split: int) -> dict:
    return get(SPLIT_KERNEL).resolve({"BM": BM, "BN": BN, "SPLIT": split})


def slots(params: dict, registers: int, sm_count: int, limits: dict) -> int:
    """Block slots of the GPU for one capstone_split configuration."""
    k = get(SPLIT_KERNEL)
    t = k.threads(params)
    return sm_count * W.per_sm(t[0] * t[1] * t[2], registers,
                               k.dynamic_smem(params, limits), limits)


def registers(tile: dict, N: int, padded: bool = False) -> int:
    """Registers per thread of a tile's build for N: the vector path (N % 4 == 0), the
    scalar one, which ptxas can allocate differently (and so fit fewer blocks per SM),
    or the padded one (B read 16 bytes at a time from padded rows, C scalar)."""
    if N % 4 == 0:
        return tile["registers"]
    if padded:
        return tile.get("registers_padded", tile["registers"])
    return tile.get("registers_scalar", tile["registers"])


def pads(rules: "Rules", shape) -> bool:
    """Whether the plan copies B into padded rows first at `shape` (the rules' choice)."""
    return shape[1] % 4 != 0 and rules.pad_ragged_b


def copy_us(rules: "Rules", shape) -> float:
    """The padded copy of B: r0 + reading K x N and writing K x N4 floats."""
    _, N, K = shape
    return rules.reduce_us + K * (N + (N + 3) // 4 * 4) * 4 / (rules.bandwidth_gbps * 1e3)


def terms(shape, BM: int, BN: int, split: int, registers: int, sm_count: int,
          limits: dict, gamma: float) -> tuple[list[float], int]:
    """([rounds, multiply-adds per block x n / q**gamma], z): the model's two terms for
    capstone_split (BM, BN, split) at `shape`, and its number of K slices."""
    p = split_params(BM, BN, split)
    chunks = ceil_div(shape[2], p["BK"])
    z = slices(chunks, split)
    depth = ceil_div(chunks, z) * p["BK"]
    per_sm = slots(p, registers, 1, limits)
    n = ceil_div(W.tiles(shape, BM, BN) * z, sm_count)
    q = min(n, per_sm)
    return [ceil_div(n, per_sm), BM * BN * depth * n / q ** gamma], z


def predict_us(rules: Rules, shape, BM: int, BN: int, split: int, beta_nonzero: bool = False,
               sm_count: int | None = None, limits: dict | None = None,
               padded: bool | None = None) -> float:
    """The model's time of capstone_split (BM, BN, split) at `shape`, in microseconds,
    with B copied into padded rows first if `padded` (default: the rules' choice)."""
    M, N, _ = shape
    padded = pads(rules, shape) if padded is None else padded and N % 4 != 0
    c = rules.tiles[tile_name(BM, BN)]
    (rounds, work), z = terms(shape, BM, BN, split, registers(c, N, padded),
                              sm_count or rules.sm_count, limits or device.limits(), rules.gamma)
    t = c["c0_us"] * rounds + c["c1_us_per_mfma"] * work
    if padded:
        t += copy_us(rules, shape)
    if z > 1:
        planes = z + 1 + (1 if beta_nonzero else 0)
        t += rules.reduce_us + planes * M * N * 4 / (rules.bandwidth_gbps * 1e3)
    return t


# ------------------------------------------------------------------ the fit

def _time_us(row: dict) -> float:
    M, N, K = row["shape"]
    return 2 * M * N * K / (row["gflops"]["median"] * 1e3)


def _fit_gamma(rows, sms: int, lim: dict, gamma: float, bandwidth_gbps: float,
               name: str) -> Rules:
    """Rules for one gamma: (c0, c1) per tile by least squares, then r0."""
    tiles = {}
    for BM, BN in TILES:
        own = [r for r in rows if r["kernel"] == SPLIT_KERNEL and r["params"]["BM"] == BM
               and r["params"]["BN"] == BN]
        padded = [r for r in own if _padded_row(r)]
        own = [r for r in own if not _padded_row(r)]
        plain = [r for r in own if r["params"]["SPLIT"] == 1]
        if len(plain) < 2:
            raise ValueError(f"tile {BM}x{BN}: {len(plain)} calibration rows without a split; "
                             "the fit needs at least 2")
        regs = {vec: max([r["binary"]["registers"] for r in own
                          if (r["shape"][1] % 4 == 0) == vec], default=None)
                for vec in (True, False)}
        tile = {"registers": regs[True] or regs[False],
                "registers_scalar": regs[False] or regs[True],
                "registers_padded": max([r["binary"]["registers"] for r in padded],
                                        default=regs[True] or regs[False])}
        c0, c1 = tile_line(plain, BM, BN, tile, sms, lim, gamma)
        # a negative c0 is set to 0 and c1 kept (not refitted): `tile_line` says how
        # little a refit through the origin would change c1
        tiles[tile_name(BM, BN)] = {**tile, "c0_us": max(c0, 0.0), "c1_us_per_mfma": c1}
    # the gemv's fields are fitted apart (in `fit`): placeholders here
    partial = Rules(name, sms, tiles, gamma, 0.0, bandwidth_gbps, 1, {}, {})
    left = [_time_us(r) - _predict_row(partial, r, sms, lim)
            for r in rows if r["kernel"] == SPLIT_KERNEL and r["params"]["SPLIT"] > 1
            and not _padded_row(r)]
    r0 = float(max(statistics.median(left), 0.0)) if left else 0.0
    return Rules(name, sms, tiles, gamma, r0, bandwidth_gbps, 1, {}, {})


def tile_line(plain: list[dict], BM: int, BN: int, tile: dict, sms: int, lim: dict,
              gamma: float, origin: bool = False) -> tuple[float, float]:
    """(c0, c1): least squares of the measured times of one tile's calibration rows
    without a split (`plain`) on the model's two terms, rounds and work (c0 unclamped);
    with `origin`, c0 is held at 0 and only c1 is fitted."""
    import numpy as np
    X = np.array([terms(r["shape"], BM, BN, 1, registers(tile, r["shape"][1]), sms, lim,
                        gamma)[0] for r in plain], float)
    y = np.array([_time_us(r) for r in plain])
    if origin:
        return 0.0, float(X[:, 1] @ y / (X[:, 1] @ X[:, 1]))
    (c0, c1), *_ = np.linalg.lstsq(X, y, rcond=None)
    return float(c0), float(c1)


def _padded_row(r: dict) -> bool:
    """A capstone_split row that ran with B copied into padded rows."""
    return bool(r["params"].get("PAD_B")) and r["shape"][1] % 4 != 0


def _predict_row(rules: Rules, r: dict, sms: int, lim: dict) -> float:
    p = r["params"]
    return predict_us(rules, r["shape"], p["BM"], p["BN"], p["SPLIT"], sm_count=sms, limits=lim,
                      padded=_padded_row(r))


def padding_pairs(rows: list[dict]) -> dict:
    """{(shape, BM, BN, split): {True: padded µs, False: unpadded µs}} for the
    configurations measured both with B padded and without (N % 4 != 0), the copy
    included in the padded time."""
    times: dict = {}
    for r in rows:
        if r["kernel"] == SPLIT_KERNEL and r["shape"][1] % 4 != 0:
            p = r["params"]
            key = (tuple(r["shape"]), p["BM"], p["BN"], p["SPLIT"])
            times.setdefault(key, {})[_padded_row(r)] = _time_us(r)
    return {k: t for k, t in times.items() if len(t) == 2}


def padding_wins(rows: list[dict]) -> tuple[int, int]:
    """(wins, pairs): of `padding_pairs`, how many ran faster padded."""
    pairs = padding_pairs(rows).values()
    return sum(t[True] < t[False] for t in pairs), len(pairs)


def pick_ratios(rules: Rules, rows: list[dict], sms: int, lim: dict) -> list[float]:
    """At each shape where rows of several capstone_split configurations were measured:
    the measured time of the best / that of the one the rules rank first (1 is a perfect
    pick)."""
    by_shape: dict = {}
    for r in rows:
        if r["kernel"] == SPLIT_KERNEL:
            by_shape.setdefault(tuple(r["shape"]), []).append(r)
    out = []
    for rs in by_shape.values():
        if len(rs) > 1:
            pick = min(rs, key=lambda r: _predict_row(rules, r, sms, lim))
            out.append(min(map(_time_us, rs)) / _time_us(pick))
    return out


def fit(rows: list[dict], props: dict, bandwidth_gbps: float, runs: list[str]) -> dict:
    """Rules from calibration rows measured on the device `props` describes: for each
    gamma of GAMMAS each tile's (c0, c1) and r0 (see the top), keeping the gamma whose
    picks are fastest at the calibration shapes (of equals, the one whose predictions are
    nearest the measured times, in relative terms); and the gemv's block size per path
    and warps per SM (see the top)."""
    lim = device.limits_for(device.arch_name(props["compute_capability"]))
    sms = props["sm_count"]
    scored = []
    for gamma in GAMMAS:
        rules = _fit_gamma(rows, sms, lim, gamma, bandwidth_gbps, props["name"])
        ratios = pick_ratios(rules, rows, sms, lim)
        misfit = sum((_predict_row(rules, r, sms, lim) / _time_us(r) - 1) ** 2
                     for r in rows if r["kernel"] == SPLIT_KERNEL)
        scored.append((-round(statistics.mean(ratios), 6) if ratios else 0.0, misfit, rules))
    score, _, rules = min(scored, key=lambda x: x[:2])
    wins, pairs = padding_wins(rows)
    s_wins, s_shapes = streaming_wins(rows)
    best = {}
    for r in rows:
        if r["kernel"] == GEMV_KERNEL:
            key = tuple(r["shape"])
            if key not in best or r["gflops"]["median"] > best[key]["gflops"]["median"]:
                best[key] = r
    per_sm = [gemv_warps(get(GEMV_KERNEL), r["params"], r["shape"]) / sms for r in best.values()]
    sizes = {path: [r["params"]["WARPS"] for r in best.values() if gemv_path(r["shape"]) == path]
             for path in GEMV_PATHS}
    return {"device": props["name"], "sm_count": sms, "tiles": rules.tiles,
            "gamma": rules.gamma, "reduce_us": rules.reduce_us,
            "bandwidth_gbps": bandwidth_gbps,
            "gemv_warps_per_sm": max(1, round(statistics.median(per_sm))) if per_sm else 32,
            "gemv_warps": {path: max(sorted(set(w)), key=w.count) if w else
                           get(GEMV_KERNEL).resolve({})["WARPS"] for path, w in sizes.items()},
            "pad_ragged_b": wins > pairs / 2 if pairs else False,
            "gemv_stream": s_wins > s_shapes / 2 if s_shapes else False,
            "provenance": {"runs": sorted(runs), "rows": len(rows),
                           "padded_b_faster": f"{wins} of {pairs}",
                           "gemv_streaming_faster": f"{s_wins} of {s_shapes}",
                           "calibration_pick_vs_best_pct": round(-100 * score, 2),
                           "rule": "fitted by gemm_kernels.plan.model.fit"}}


GEMV_PATHS = ("rows", "cols")


def streaming_wins(rows: list[dict]) -> tuple[int, int]:
    """(wins, shapes): of the M == 1 calibration shapes timed with both kinds of load of
    B, at how many the fastest streaming configuration beat the fastest plain one."""
    best: dict = {}
    for r in rows:
        if r["kernel"] == GEMV_KERNEL and gemv_path(r["shape"]) == "cols":
            key = (tuple(r["shape"]), bool(r["params"].get("STREAM")))
            best[key] = max(best.get(key, 0.0), r["gflops"]["median"])
    shapes = {s for s, _ in best if (s, True) in best and (s, False) in best}
    return sum(best[(s, True)] > best[(s, False)] for s in shapes), len(shapes)


def gemv_path(shape) -> str:
    """The gemv's path at `shape`: "cols" (M == 1, C = x B), else "rows" (N == 1)."""
    return "cols" if shape[0] == 1 and shape[1] > 1 else "rows"


def gemv_warps(k, params: dict, shape) -> int:
    """Warps of a gemv launch (all blocks of all slices)."""
    p = k.resolve(params)
    g = k.grid(p, tuple(shape))
    return g[0] * g[1] * g[2] * p["WARPS"]
