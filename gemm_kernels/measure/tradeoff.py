"""Registers, occupancy and speed of a kernel's configurations side by side.

More outputs per thread means more accumulators in registers, so fewer warps fit on an
SM. Whether that costs speed is a measurement: `ranked` orders the configurations of a
recorded sweep by rate, and `table` puts the registers of the binary that was timed
(and of ptxas here, which can differ), the occupancy they allow, next to the rate.
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
    from gemm_kernels.measure import lookup
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


def table(kernel, configs, size: int = 2048, extra: dict | None = None,
          one_registers_column: bool = False):
    """A Table: per configuration, the registers of the binary whose rate is shown
    (recorded at size^3) and of ptxas here, spills, threads per block, resident blocks
    and warps per SM (and what limits them: from the timed binary's registers where the
    recording has them), and GFLOP/s at size^3 ('-' where not recorded). `extra`: more
    columns, {title: function of the params}. A note under the title names any
    configuration whose timed binary has another register count than ptxas here.
    `one_registers_column`: where the two counts agree in every row, show them as one
    column, "registers" (two identical columns teach nothing); where any differ, both."""
    from gemm_kernels.core import analysis
    from gemm_kernels.core import compiler
    from gemm_kernels.measure import lookup, records
    from gemm_kernels.core.table import Table
    k = kernel_of(kernel)
    here = analysis.local_registers_column()
    rows, pairs = [], []
    for c in configs:
        p = k.resolve(c)
        res = compiler.resources(k, p)
        try:
            r = lookup.recorded(k.name, (size,) * 3, p)
        except LookupError:
            r = None
        g = _rate(r) if r else None
        timed = (r or {}).get("binary", {}).get("registers")
        occ = analysis.kernel_occupancy(k, p, registers=timed)
        label = " ".join(f"{n}={v}" for n, v in p.items())
        pairs.append((label, timed, res["registers"]))
        rows.append({"params": label, analysis.TIMED_REGISTERS: timed, here: res["registers"],
                     "spills": res["spill_stores"],
                     "threads": occ.threads_per_block, "blocks/SM": occ.blocks_per_sm,
                     "warps/SM": occ.warps_per_sm, "occupancy": analysis.percent(occ.occupancy),
                     "limited by": occ.limiter,
                     **{t: f(p) for t, f in (extra or {}).items()},
                     f"GFLOP/s at {size}": None if g is None or math.isnan(g) else g})
    note = analysis.registers_note(pairs)
    columns = list(rows[0]) if rows else ["params"]
    if one_registers_column and rows and note is None and all(t == h for _, t, h in pairs):
        for r in rows:
            r["registers"] = r[here]
        columns = [("registers" if c == analysis.TIMED_REGISTERS else c)
                   for c in columns if c != here]
    return Table(rows, columns,
                 title=f"{k.name}: ptxas -v (sm_90) and occupancy; rates "
                       f"{records.recording_label()}" + (f"\n{note}" if note else ""))
