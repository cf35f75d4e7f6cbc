"""Chapter 05's exercise question measured: the chapter's kernel with its threads laid
down a column of the tile first (`ch05_tile_1d.MAPPINGS`' second mapping) instead of
along a row, timed beside the kernel as written and counted by Nsight Compute, so that
the bank model's price of the two mappings can be set against the hardware.
"""
from __future__ import annotations

from gemm_kernels.core.kernels import get
from gemm_kernels.core.table import Table
from gemm_kernels.measure import lookup, records, studies, timing
from gemm_kernels.notebook.ch05_tile_1d import (MAPPINGS, mapping_prices, smem_bound,
                                               step_wavefronts)

KERNEL = "tile_1d"
DOWN_COLUMN = "tile_1d: threads down the column first"
STUDY = "ch05_down_column"
SHAPE = (2048,) * 3
SHARED_LOADS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
_ROW, _COLUMN = MAPPINGS                    # the two mappings' labels, row first
# the kernel's two lines that map a thread to its piece, and the same lines for the
# mapping down the column (the expressions of MAPPINGS, in the kernel's names)
_EDITS = tuple(
    (f"const int {name} = {row};", f"const int {name} = {col};")
    for name, row, col in zip(("tc", "tr"), MAPPINGS[_ROW], MAPPINGS[_COLUMN]))


def down_column_kernel():
    """The chapter's kernel with tc and tr of the mapping down the column."""
    return get(KERNEL).edited(_EDITS, DOWN_COLUMN)


studies.register_variant(DOWN_COLUMN, down_column_kernel)


def measured(shape=SHAPE) -> Table:
    """Both mappings at the default tile and `shape`: the bank model's wavefronts per
    step of the costliest warp (the exercise's price), the shared-load wavefronts per
    warp and step that Nsight Compute counted (the average warp), and the rate of each,
    timed in one run beside cuBLAS. '-' where not recorded."""
    p = get(KERNEL).resolve(None)
    M, N, K = shape
    warp_steps = (M // p["BM"]) * (N // p["BN"]) * (p["BM"] * p["BN"] // p["TM"] // 32) \
        * (K // p["BK"])
    model = {r["mapping"]: r["wavefronts per step"] for r in mapping_prices()}
    variant = down_column_kernel()
    rec = lookup.variant_recording(variant, shape, {})
    profiled = studies.results(STUDY, shape, studies.recording_of(STUDY))
    rows, got = [], []
    for label, kernel in ((_ROW, KERNEL), (_COLUMN, variant)):
        timed = lookup.variant_row(kernel, shape, {}, rec=rec) if rec else None
        got.append(timed)
        name = getattr(kernel, "name", kernel)
        m = next(((r or {}).get("metrics") for st, r in profiled
                  if (st.variant or st.kernel) == name), None)
        rows.append({"mapping": label,
                     "wavefronts per step (model, costliest warp)": model[label],
                     "wavefronts per step, Nsight Compute (average warp)":
                         round(m[SHARED_LOADS] / warp_steps, 1) if m else "-",
                     "GFLOP/s": round(timed["gflops"]["median"]) if timed else "-",
                     "% of cuBLAS": f"{timing.share(timed):.0f}%" if timed else "-"})
    when = (records.rows_label(got, rec) if all(got)
            else "not timed yet")
    return Table(rows, list(rows[0]),
                 title=f"the default tile at {'x'.join(map(str, shape))}, shared-memory loads: "
                       f"{when}")


def factors(shape=SHAPE) -> str:
    """One line from `measured`: how many times the counted wavefronts and the time
    rise from the mapping along the row to the mapping down the column, beside the
    model's factor."""
    row, col = measured(shape)
    model = col["wavefronts per step (model, costliest warp)"] / \
        row["wavefronts per step (model, costliest warp)"]
    parts = [f"the model prices the column mapping {model:.1f}x"]
    counted = [r["wavefronts per step, Nsight Compute (average warp)"] for r in (row, col)]
    parts.append(f"Nsight Compute counts {counted[1] / counted[0]:.1f}x the wavefronts"
                 if "-" not in counted else "the wavefronts were not counted")
    rates = [r["GFLOP/s"] for r in (row, col)]
    parts.append(f"it runs {rates[0] / rates[1]:.1f}x slower" if "-" not in rates
                 else "it was not timed")
    return "down the column against along the row: " + ", ".join(parts)



def bound_lines(shape=SHAPE) -> str:
    """Why the time grows by less than the load wavefronts, at `shape`: each mapping's
    wavefronts per warp and step with the tile copies' stores (the same for both), the
    shared-memory bound they give at the recorded GPU's SMs and top clock, and each
    measured rate's share of its bound. The time ratio is the wavefront ratio times the
    ratio of the two shares."""
    p = get(KERNEL).resolve(None)
    step = step_wavefronts(KERNEL, p)
    stores, ffma = step["stores"], step["FFMA"]
    props = records.described_device()
    lines = [f"at {shape[0]}^3, one warp, one step along K ({ffma} FFMA); "
             f"bound at {props['sm_count']} SMs x {props['sm_clock_mhz']:,.0f} MHz x 64 flops "
             f"/ wavefronts per FFMA:"]
    totals, shares = [], []
    for r in measured(shape):
        loads = r["wavefronts per step (model, costliest warp)"]
        total = loads + stores
        bound = smem_bound(total / ffma)
        totals.append(total)
        text = (f"{r['mapping']}: {loads:,} + {stores:g} stores = {total:,g} wavefronts, "
                f"bound {bound:,.0f} GFLOP/s")
        if r["GFLOP/s"] != "-":
            shares.append(r["GFLOP/s"] / bound)
            text += f", measured {r['GFLOP/s']:,} = {100 * shares[-1]:.0f}% of it"
        lines.append(text)
    ratio = totals[1] / totals[0]
    last = f"{ratio:.1f}x the wavefronts"
    if len(shares) == 2:
        last += (f" x {100 * shares[0]:.0f}% / {100 * shares[1]:.0f}% = "
                 f"{ratio * shares[0] / shares[1]:.1f}x the time")
    return "\n".join(lines + [last])
