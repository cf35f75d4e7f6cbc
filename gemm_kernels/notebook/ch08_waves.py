"""Chapter 08's appendix: double buffering against chapter 07, configuration by
configuration, with the blocks per SM and the rounds of blocks each launch needs.

A launch of `blocks` blocks on a GPU of `sms` SMs that each hold `per_sm` of them runs
in rounds: full rounds of sms * per_sm blocks, then a last, partly filled one in which
each SM holds at most ceil(rest / sms) blocks. When double buffering costs (or gains) a
block per SM, the two launches have rounds of another shape, and the ratio of their rates
then measures that as much as the prefetch. `rounds` spells the shape out.
"""
from __future__ import annotations

from statistics import median

from gemm_kernels.core.analysis import kernel_occupancy
from gemm_kernels.core.table import Table


def waves(blocks: int, per_sm: int, sms: int) -> float:
    """Blocks over the blocks the GPU holds at once: 1.29 means a full wave and a 29% one."""
    return blocks / (per_sm * sms)


def rounds(blocks: int, per_sm: int, sms: int) -> str:
    """The rounds of a launch, as blocks per SM in each: '1 x 3 + 1 x 1' is one full
    round of 3 blocks on every SM, then a last round with at most 1 block per SM."""
    full, rest = divmod(blocks, per_sm * sms)
    parts = [f"{full} x {per_sm}"] if full else []
    if rest:
        parts.append(f"1 x {-(-rest // sms)}")
    return " + ".join(parts)


def _blocks(params: dict, shape) -> int:
    M, N, _ = shape
    return -(-M // params["BM"]) * -(-N // params["BN"])


def rows(size: int = 2048, sms: int | None = None, one_per_sm: bool | None = None) -> list[dict]:
    """Every configuration recorded for both `float4` and `double_buffer` at size^3 (with
    ONE_PER_SM = `one_per_sm`, or both settings when None): the two rates, their ratio,
    blocks per SM, waves and rounds of each, sorted by ratio."""
    from gemm_kernels.measure import tradeoff
    from gemm_kernels.measure import records
    if sms is None:
        rec = records.current()
        sms = rec.device["sm_count"] if rec else 132
    fixed = None if one_per_sm is None else {"ONE_PER_SM": one_per_sm}
    f4 = {tuple(sorted(c.items())): g for c, g in tradeoff.ranked("float4", size, fixed)}
    db = {tuple(sorted(c.items())): g for c, g in tradeoff.ranked("double_buffer", size, fixed)}
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
                    "rounds 07": rounds(blocks, b7, sms), "rounds 08": rounds(blocks, b8, sms),
                    "GFLOP/s 07": f4[key], "GFLOP/s 08": db[key],
                    "08 / 07": f"{db[key] / f4[key]:.3f}"})
    return sorted(out, key=lambda r: float(r["08 / 07"]))


def _group(r) -> str:
    b7, b8 = r["blocks/SM 07"], r["blocks/SM 08"]
    return ("same blocks per SM" if b7 == b8 else
            "double buffering fits fewer blocks" if b8 < b7 else
            "double buffering fits more blocks")


def more_blocks_note(size: int = 2048) -> str:
    """Why double buffering fits more blocks per SM in some configuration, although it
    holds twice the shared memory: per configuration of that group, both kernels'
    registers per thread (ptxas here) and threads per block, which decide it there."""
    from gemm_kernels.core import compiler
    from gemm_kernels.core.launch import kernel_of
    out = []
    for r in rows(size, one_per_sm=False):
        if r["blocks/SM 08"] <= r["blocks/SM 07"]:
            continue
        p = {k: r[k] for k in ("BM", "BN", "BK", "TM", "TN")}
        threads = (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])
        regs = {k: compiler.resources(kernel_of(k), kernel_of(k).resolve(p))["registers"]
                for k in ("float4", "double_buffer")}
        out.append(f"{p['BM']}x{p['BN']}x{p['BK']}, {p['TM']}x{p['TN']} per thread "
                   f"({threads} threads per block): chapter 07's kernel takes "
                   f"{regs['float4']} registers per thread and fits {r['blocks/SM 07']} "
                   f"block per SM, chapter 08's takes {regs['double_buffer']} and fits "
                   f"{r['blocks/SM 08']}. Registers, not shared memory, limit both here: "
                   "a few registers fewer let a second block of this many threads fit.")
    return "\n".join(out)


def summary(size: int = 2048, sms: int | None = None) -> Table:
    """At the occupancy each kernel gets by itself (ONE_PER_SM off): one row per group of
    configurations (the same blocks per SM in both kernels, fewer with double buffering,
    more with it), with the count, median and range of the ratio."""
    groups: dict[str, list[float]] = {}
    for r in rows(size, sms, one_per_sm=False):
        groups.setdefault(_group(r), []).append(float(r["08 / 07"]))
    order = ("same blocks per SM", "double buffering fits fewer blocks",
             "double buffering fits more blocks")
    out = [{"configurations": name, "how many": len(groups[name]),
            "median 08 / 07": f"{median(groups[name]):.3f}",
            "lowest": f"{min(groups[name]):.3f}", "highest": f"{max(groups[name]):.3f}"}
           for name in order if name in groups]
    return Table(out, ["configurations", "how many", "median 08 / 07", "lowest", "highest"],
                 title=f"double_buffer / float4 at {size}^3, as many blocks per SM as fit, "
                       "grouped by blocks per SM")
