"""Registers, occupancy and speed of a kernel's configurations side by side.

More outputs per thread means more accumulators in registers, so fewer warps fit on an
SM. Whether that costs speed is a measurement: `ranked` orders the configurations of a
recorded sweep by rate, and `table` puts the static analysis
(registers from ptxas, the occupancy they allow) next to the rate.
"""
from __future__ import annotations

import math

from gemm_kernels.core.launch import kernel_of, problems


def _rate(row) -> float:
    return (row.get("gflops") or row.get("gbps"))["median"]


def ranked(kernel, size: int = 2048, fixed: dict | None = None) -> list[tuple[dict, float]]:
    """(params, GFLOP/s) of every valid configuration at size^3 that matches `fixed`,
    fastest first, from the recorded sweep (in either mode); configurations missing from
    the recording are left out."""
    from gemm_kernels.measure import lookup, records
    k = kernel_of(kernel)
    shape = (size,) * 3
    out = []
    for c in k.valid_configurations():
        if any(c[n] != v for n, v in (fixed or {}).items()) or problems(k, c, shape):
            continue
        try:
            out.append((c, _rate(lookup.recorded(k.name, shape, c))))
        except LookupError:
            continue
    return sorted(out, key=lambda x: -x[1])


def table(kernel, configs, size: int = 2048, extra: dict | None = None):
    """A Table: per configuration, registers, spills, threads per block, resident
    blocks and warps per SM (and what limits them), and GFLOP/s at size^3 ('-' where
    not recorded). `extra`: more columns, {title: function of the params}."""
    from gemm_kernels.core import analysis
    from gemm_kernels.core import compiler
    from gemm_kernels.measure import lookup, records
    from gemm_kernels.core.table import Table
    k = kernel_of(kernel)
    rows = []
    for c in configs:
        p = k.resolve(c)
        res = compiler.resources(k, p)
        occ = analysis.kernel_occupancy(k, p)
        try:
            g = _rate(lookup.recorded(k.name, (size,) * 3, p))
        except LookupError:
            g = None
        rows.append({"params": " ".join(f"{n}={v}" for n, v in p.items()),
                     "registers": res["registers"], "spills": res["spill_stores"],
                     "threads": occ.threads_per_block, "blocks/SM": occ.blocks_per_sm,
                     "warps/SM": occ.warps_per_sm, "occupancy": f"{occ.occupancy:.0%}",
                     "limited by": occ.limiter,
                     **{t: f(p) for t, f in (extra or {}).items()},
                     f"GFLOP/s at {size}": None if g is None or math.isnan(g) else g})
    return Table(rows, list(rows[0]) if rows else ["params"],
                 title=f"{k.name}: ptxas -v (sm_90) and occupancy; rates {records.recording_label()}")
