"""What the worked solutions of chapters 06 to 08 measured: each solution was timed at
its exercise's configuration and timing size beside the chapter's own kernel, in one run
with cuBLAS in the same process (`timed_variants`). The solution notebooks show the pair,
so that an instructor sees the rate a correct answer reaches, not only that it passes;
and the usual mistakes, each made in the worked solution and graded like a submission,
so that the instructor sees what the grader catches, at which step, and what it says.
"""
from __future__ import annotations

from gemm_kernels.core.table import Table


def rate(exercise: str) -> Table:
    """The worked solution of `exercise` and the chapter's kernel, as recorded: rate
    (median, with the range of the timed calls), share of the cuBLAS timed beside it,
    registers of the timed binary, and the solution's rate over the kernel's."""
    from gemm_kernels.core.launch import kernel_of
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.measure import records, timing
    from gemm_kernels.notebook import timed_variants
    ex = get(exercise)
    t = timed_variants.get(f"{exercise}: worked solution")
    mine = timed_variants.row(t.name)
    found = records.current().find(ex.kernel, t.shape, kernel_of(ex.kernel).resolve(ex.params))
    theirs = next((r for r in found if mine and r.get("run") == mine.get("run")), None)
    if mine is None or theirs is None:
        raise LookupError(f"{t.name} and {ex.kernel} are not recorded in one run")
    rows = []
    for label, r in (("worked solution", mine), (f"the chapter's kernel ({ex.kernel})", theirs)):
        g = r["gflops"]
        rows.append({"kernel": label, "GFLOP/s": f"{g['median']:,.0f}",
                     "range": f"{g['min']:,.0f}..{g['max']:,.0f}",
                     "% of cuBLAS": f"{timing.share(r):.1f}",
                     "registers": (r.get("binary") or {}).get("registers"),
                     "/ chapter's kernel": f"{g['median'] / theirs['gflops']['median']:.3f}"})
    shape = "x".join(map(str, t.shape))
    params = " ".join(f"{k}={v}" for k, v in ex.params.items())
    return Table(rows, list(rows[0]), title=f"{exercise}: the worked solution and the chapter's "
                 f"kernel at {params}, {shape}, timed in one run with cuBLAS in the same "
                 f"process ({records.source()})")


def graded_mistakes(exercise: str, mistakes, gpu: bool | None = None) -> Table:
    """The worked solution of `exercise` with each of `mistakes` ((what, text of the
    solution, what replaces it)) made, graded like a submission: each step's verdict and
    what the first step that failed says."""
    from gemm_kernels.exercises.grader import FAIL, grade
    from gemm_kernels.exercises.notebooks import solution_source
    src = solution_source(exercise)
    rows = []
    for what, old, new in mistakes:
        if old not in src:
            raise ValueError(f"the solution no longer holds {old!r}")
        report = grade(exercise, src.replace(old, new, 1), gpu)
        row = {"mistake": what, **{s.name: s.status for s in report.steps}}
        bad = next((s for s in report.steps if s.status == FAIL), None)
        row["what the grader says"] = bad.detail if bad else "no step that ran here failed"
        rows.append(row)
    return Table(rows, list(rows[0]), title=f"the solution with one mistake each, graded "
                 "as a submission (steps that cannot run here: 'not run')")
