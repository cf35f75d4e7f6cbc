"""Chapter 08: double buffering against chapter 07, configuration by configuration, with
the waves each launch needs.

A launch of `blocks` blocks on a GPU of `sms` SMs that each hold `per_sm` of them runs
in waves: ceil(blocks / (sms * per_sm)) rounds, the last one possibly partly empty. When
double buffering costs a block per SM (more registers or shared memory), the wave count
can jump (0.97 waves become 1.29, so two rounds instead of one), and the ratio of the two
rates then measures the tail of the last wave as much as the prefetch. `waves` gives the
fractional count, so the table shows where that happens.
"""
from __future__ import annotations

from statistics import median

from gemm_kernels.core.analysis import kernel_occupancy
from gemm_kernels.core.table import Table


def waves(blocks: int, per_sm: int, sms: int) -> float:
    """Blocks over the blocks the GPU holds at once: 1.29 means a full wave and a 29% one."""
    return blocks / (per_sm * sms)


def _blocks(params: dict, shape) -> int:
    M, N, _ = shape
    return -(-M // params["BM"]) * -(-N // params["BN"])


def rows(size: int = 2048, sms: int | None = None) -> list[dict]:
    """Every configuration recorded for both `float4` and `double_buffer` at size^3: the
    two rates, their ratio, blocks per SM and waves of each, sorted by ratio."""
    from gemm_kernels.measure import tradeoff
    from gemm_kernels.measure import records
    if sms is None:
        rec = records.current()
        sms = rec.device["sm_count"] if rec else 132
    f4 = {tuple(sorted(c.items())): g for c, g in tradeoff.ranked("float4", size)}
    db = {tuple(sorted(c.items())): g for c, g in tradeoff.ranked("double_buffer", size)}
    shape = (size,) * 3
    out = []
    for key in sorted(set(f4) & set(db)):
        p = dict(key)
        blocks = _blocks(p, shape)
        b7 = kernel_occupancy("float4", p).blocks_per_sm
        b8 = kernel_occupancy("double_buffer", p).blocks_per_sm
        out.append({"BM": p["BM"], "BN": p["BN"], "BK": p["BK"], "TM": p["TM"], "TN": p["TN"],
                    "one per SM": p["ONE_PER_SM"], "blocks": blocks,
                    "blocks/SM 07": b7, "blocks/SM 08": b8,
                    "waves 07": f"{waves(blocks, b7, sms):.2f}",
                    "waves 08": f"{waves(blocks, b8, sms):.2f}",
                    "GFLOP/s 07": f4[key], "GFLOP/s 08": db[key],
                    "08 / 07": f"{db[key] / f4[key]:.3f}"})
    return sorted(out, key=lambda r: float(r["08 / 07"]))


def _group(r) -> str:
    same_blocks = r["blocks/SM 07"] == r["blocks/SM 08"]
    rounds = lambda w: max(1, -(-float(w) // 1))
    same_rounds = rounds(r["waves 07"]) == rounds(r["waves 08"])
    if same_blocks:
        return "same blocks per SM"
    return ("other blocks per SM, same rounds" if same_rounds
            else "other blocks per SM, other rounds")


def summary(size: int = 2048, sms: int | None = None) -> Table:
    """One row per group of configurations: the same blocks per SM in both kernels; other
    blocks per SM but the same number of rounds (waves rounded up); other blocks per SM
    and another number of rounds. Count, median and range of the ratio."""
    groups: dict[str, list[float]] = {}
    for r in rows(size, sms):
        groups.setdefault(_group(r), []).append(float(r["08 / 07"]))
    out = [{"configurations": name, "how many": len(v), "median 08 / 07": f"{median(v):.3f}",
            "lowest": f"{min(v):.3f}", "highest": f"{max(v):.3f}"} for name, v in sorted(groups.items())]
    return Table(out, ["configurations", "how many", "median 08 / 07", "lowest", "highest"],
                 title=f"double_buffer / float4 at {size}^3, grouped by blocks per SM and rounds")


def extremes(size: int = 2048, n: int = 3, sms: int | None = None) -> Table:
    """The `n` lowest and `n` highest ratios, with blocks per SM and waves of each kernel."""
    r = rows(size, sms)
    pick = r[:n] + r[-n:]
    return Table(pick, list(pick[0]), title=f"lowest and highest double_buffer / float4 at {size}^3"
                                            " (waves: blocks over what the GPU holds at once)")
