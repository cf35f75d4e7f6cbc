"""Chapter 09's open question about the padded A tile, set up to be measured.

The capstone keeps part A's padded rows (LDA = BM + 4) for its 4-byte cp.async copies of
A: the bank model prices one such copy of a warp at 1 wavefront into rows of BM + 4
floats and 8 into rows of BM. But Nsight Compute counts 4 wavefronts for the padded copy
(`capstone_pictures.a_copy_cost`), so the model misses part of what these copies cost,
and what the pad buys them is not measured by the chapter's other studies. This module
builds the capstone with rows of BM floats (`unpadded_kernel`: one edit, since every
store into and load from the A tile indexes it through LDA) and sets it beside the
capstone as built (`unpadded_table`): its shared-memory counters (`ch09_unpadded`, ncu)
and its rate as a share of the cuBLAS timed beside it (`ch09_unpadded_time`).

The launcher still sizes the ring for rows of BM + 4 (`kernels._cap_smem`): the variant
gets 4 * BK * STAGES floats of shared memory it does not use, which changes no index. The
registers do change: unpadded, ptxas gives the capstone 129 registers, one block of 256
threads per SM where the capstone as built (127) runs two; so the variant is also timed
built with MINB = 2 (two blocks), and the table shows each row's registers and blocks.
"""
from __future__ import annotations

from gemm_kernels.core.analysis import occupancy
from gemm_kernels.core.kernels import get
from gemm_kernels.core.table import Table, fmt_number
from gemm_kernels.measure import records, studies

KERNEL = "capstone"
UNPADDED = "capstone: A tile unpadded"
STUDY = "ch09_unpadded"            # ncu: the capstone as built and unpadded, counted
TIME_STUDY = "ch09_unpadded_time"  # time: the unpadded variant alone (see studies.py)

# The one line that pads the A tile; every index into the tile uses LDA.
_EDITS = (
    ("    constexpr int LDA = BM + 4;                 // padded row of the k-major A tile\n",
     "    constexpr int LDA = BM;                     // unpadded row (chapter 09's measurement)\n"),
)

# The counters the table reads (all in studies.LDGSTS): the 4-byte copies of A (LDGSTS
# through L1, "cache access"), the wavefronts they write into shared memory and how many
# of those ncu books as bank conflicts; the fragment loads (LDS.128) beside them.
A_COPIES = "smsp__sass_inst_executed_op_ldgsts_cache_access.sum"
A_WAVEFRONTS = "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldgsts_cache_access.sum"
A_CONFLICTS = ("smsp__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts_cache_"
               "access.sum")
LOADS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
LOAD_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"


def unpadded_kernel():
    """The capstone with rows of BM floats in its A tile (LDA = BM)."""
    return get(KERNEL).edited(_EDITS, UNPADDED)


studies.register_variant(UNPADDED, unpadded_kernel)


def _per(m, num, den) -> str:
    if not m or m.get(num) is None or not m.get(den):
        return "-"
    return f"{m[num] / m[den]:.2f}"


def _share(row) -> str:
    if not row or "gflops" not in row or "reference" not in row:
        return "-"
    return f"{100 * row['gflops']['median'] / row['reference']['gflops']['median']:.1f}%"


def _blocks(row) -> tuple[str, str]:
    """The timed binary's registers and the blocks of 256 threads they let an SM hold."""
    regs = (row or {}).get("binary", {}).get("registers")
    if regs is None:
        return "-", "-"
    return str(regs), str(occupancy(256, regs, 0).limits["registers"])


def unpadded_table(rec=None) -> Table:
    """The capstone as built (rows of BM + 4) and with its A tile unpadded (rows of BM),
    each as built and with MINB = 2 (equal builds compare the pad alone): per 4-byte copy of A by a warp, the shared-memory
    wavefronts Nsight Compute counted and how many it booked as bank conflicts; the
    fragment loads' totals; the timed binary's registers and the blocks per SM they allow;
    at each timed size the rate as a share of the cuBLAS timed beside it (the as-built
    rows from another run than the variant's: compare the shares). A title that says
    "Not recorded yet" while the variant has neither row."""
    shape = tuple(studies.get(STUDY).shapes[0])
    rec = rec or studies.recording_of(STUDY, shape)
    counted = studies.results(STUDY, shape, rec) if rec else []
    sizes = [tuple(s) for s in studies.get(TIME_STUDY).shapes]
    trec = studies.recording_of(TIME_STUDY, sizes[0]) or rec
    timed = {s: ([r for _, r in studies.results(TIME_STUDY, s, trec)] if trec else [])
             for s in sizes}
    have_counts = len(counted) == 2 and counted[1][1] is not None
    if not have_counts and not any(any(v) for v in timed.values()):
        return Table([], ["A tile"], title=f"Not recorded yet: {UNPADDED}, counted at "
                     f"{shape[0]}³ and timed at {' and '.join(f'{s[0]}³' for s in sizes)}.")
    built = get(KERNEL)
    used = [r for _, r in counted if r]
    # (label, MINB of the as-built row or None for the variant's timed step i)
    builds = [("as built: rows of BM + 4", 1, None), ("unpadded: rows of BM", None, 0),
              ("as built, MINB = 2", 2, None), ("unpadded, MINB = 2", None, 1)]
    rows = []
    for i, (label, minb, step) in enumerate(builds):
        m = (counted[i][1] or {}).get("metrics") if have_counts and i < 2 else None
        row = {"A tile": label,
               "wavefronts per copy of A": _per(m, A_WAVEFRONTS, A_COPIES),
               "of them conflicts": _per(m, A_CONFLICTS, A_COPIES),
               "load wavefronts (total)": fmt_number(m[LOADS]) if m and LOADS in m else "-",
               "load conflicts (total)": (fmt_number(m[LOAD_CONFLICTS])
                                          if m and LOAD_CONFLICTS in m else "-")}
        found = []
        for s in sizes:
            # the capstone as built from the variant's own recording (same GPU), any run
            r = (next((x for x in (trec.find(KERNEL, s, built.resolve({"MINB": minb}))
                                   if trec else []) if "gflops" in x), None) if minb else
                 (timed[s][step] if len(timed[s]) > step else None))
            found += [r] if r else []
            row[f"% of cuBLAS at {s[0]}³"] = _share(r)
        row["registers"], row["blocks per SM"] = _blocks(found[-1] if found else None)
        used += found
        if i < 2 or found:
            rows.append(row)
    return Table(rows, list(rows[0]), title=f"counted at {shape[0]}³ by Nsight Compute and "
                 f"timed, {records.rows_label(used, trec or rec)}; the rows' rates may "
                 "come from different runs, each with its own cuBLAS: compare the shares")
