"""The worked solution of an exercise, timed: its rate next to the chapter's kernel at the
same configuration, both from the one run that timed them side by side (each with cuBLAS
in the same process), so a solution notebook can say how fast its answer is instead of
'a GPU would tell'. The row of the solution carries the hash of its text: an edited
solution shows 'not recorded' rather than an old rate."""
from __future__ import annotations

from gemm_kernels.core.table import Table
from gemm_kernels.measure import records, timing
from gemm_kernels.notebook import timed_variants


def worked_solution(exercise: str) -> Table:
    """Two rows at the exercise's configuration and size: the worked solution and the
    chapter's kernel (the one the exercise's step 4 compares against), each with GFLOP/s
    and its share of the cuBLAS run timed beside it; the solution's row also gives its
    rate over the kernel's (only a row of the same run is compared)."""
    name = f"{exercise}: worked solution"
    t = timed_variants.get(name)
    params = t.configurations()[0]
    n = t.shape[0]
    ours = timed_variants.row(name)
    rows = []
    ref_rows = {k: records.current().find(k, t.shape, params) for k in t.compare}
    for label, r in [("worked solution", ours),
                     *((f"{k} (the chapter's kernel)", next(
                         (x for x in rows_k if ours and x.get("run") == ours.get("run")),
                         None)) for k, rows_k in ref_rows.items())]:
        rows.append({"kernel": label,
                     "GFLOP/s": r["gflops"]["median"] if r else None,
                     "% of cuBLAS": timing.share(r) if r else None,
                     "note": "" if r else "not recorded for this text"})
    if ours and rows[1]["GFLOP/s"]:
        rows[0]["note"] = f"{rows[0]['GFLOP/s'] / rows[1]['GFLOP/s']:.3f}x the chapter's kernel"
    conf = " ".join(f"{k}={v}" for k, v in params.items())
    return Table(rows, ["kernel", "GFLOP/s", "% of cuBLAS", "note"],
                 title=f"{exercise} at {n}^3, {conf}: timed in one run, each with cuBLAS "
                       f"beside it ({records.current().label})")
