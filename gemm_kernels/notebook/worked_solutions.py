"""The worked solution of an exercise, timed: its rate next to the chapter's kernel at the
same configuration, both from the one run that timed them side by side (each with its
reference, cuBLAS or the device copy, in the same process), so that a solution notebook
says how fast a correct answer is instead of 'a GPU would tell'. The solution's row
carries the hash of its text: an edited solution shows 'not recorded', never an old rate.
And the usual mistakes, each made in the worked solution and graded like a submission,
so that an instructor sees what the grader catches, at which step, and what it says.
"""
from __future__ import annotations

from gemm_kernels.core.table import Table
from gemm_kernels.measure import lookup, records, timing


def pair(exercise: str, shape=None, rec=None) -> tuple[dict | None, dict | None]:
    """(the worked solution's row, the chapter's kernel's row of the same run) at the
    exercise's configuration and timing shape (or `shape`), from `rec` (default the
    recording shown); None where not recorded."""
    from gemm_kernels.core.launch import kernel_of
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.notebooks import solution_kernel, solution_shape
    ex = get(exercise)
    shape = tuple(shape or solution_shape(exercise))
    mine = lookup.variant_row(solution_kernel(exercise), shape, dict(ex.params), rec=rec)
    rec = rec or records.current()
    if mine is None or rec is None:
        return mine, None
    theirs = next((r for r in rec.find(ex.kernel, shape, kernel_of(ex.kernel).resolve(ex.params))
                   if r.get("run") == mine.get("run") and ("gflops" in r or "gbps" in r)), None)
    return mine, theirs


def _digits(q: dict, scale: float) -> int:
    """Decimals of a range's ends: one for rates under 100 in TFLOP/s, else none."""
    return 1 if scale > 1 and q["max"] / scale < 100 else 0


def worked_solution(exercise: str, shape=None, tflops: bool = False) -> Table:
    """Two rows: the worked solution and the chapter's kernel (the one the exercise's
    step 4 compares against), each with its rate (median and the range of the timed
    calls), its share of the reference timed beside it (cuBLAS or the device copy, which
    the column names) and the registers of the timed
    binary; the solution's rate over the kernel's where both come from one run. Both rows
    come from the recording that holds the solution's row (the one shown, else another
    GPU's, which the title names). `tflops`: rates in TFLOP/s, as the tensor-core
    chapters print them."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.notebooks import solution_kernel, solution_shape
    ex = get(exercise)
    shape = tuple(shape or solution_shape(exercise))
    rec = lookup.variant_recording(solution_kernel(exercise), shape, dict(ex.params)) \
        or records.current()
    mine, theirs = pair(exercise, shape, rec=rec)
    unit = "GB/s" if len(shape) == 2 else "TFLOP/s" if tflops else "GFLOP/s"
    scale = 1e3 if unit == "TFLOP/s" else 1
    reference = "the device copy" if unit == "GB/s" else \
        ("cuBLAS DGEMM" if ex.kernel.startswith("dgemm") else "cuBLAS")
    rows = []
    for label, r in (("worked solution", mine), (f"the chapter's kernel ({ex.kernel})", theirs)):
        q = (r.get("gflops") or r.get("gbps")) if r else None
        rows.append({"kernel": label, unit: q["median"] / scale if q else None,
                     # TFLOP/s under 100 keep a decimal: rounded, a range reads "31 .. 31"
                     "range": f"{q['min'] / scale:,.{_digits(q, scale)}f} .. "
                              f"{q['max'] / scale:,.{_digits(q, scale)}f}"
                     if q else "not recorded",
                     f"% of {reference}": timing.share(r) if r else None,
                     "registers": ((r or {}).get("binary") or {}).get("registers")})
    ratio = (rows[0][unit] / rows[1][unit]) if mine and theirs else None
    rows[0]["/ chapter's kernel"] = f"{ratio:.3f}" if ratio else "-"
    rows[1]["/ chapter's kernel"] = "1.000" if theirs else "-"
    conf = "".join(f", {k}={v}" for k, v in ex.params.items())
    when = "timed in one run, each beside " + reference if theirs else \
        "not recorded together for this text"
    return Table(rows, list(rows[0]), title=f"{exercise} at {'x'.join(map(str, shape))}{conf}: "
                 f"{when} ({rec.label if rec else 'no recording'})")


def graded_mistakes(exercise: str, mistakes, gpu: bool | None = None, hints: bool = False,
                    title: str | None = None) -> Table:
    """The worked solution of `exercise` with each of `mistakes` ((what, text of the
    solution, what replaces it)) made, graded like a submission: each step's verdict and
    what the first step that failed says (with `hints`, also the hint it gives)."""
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
        if hints:
            row["its hint"] = (bad.hint or "-") if bad else "-"
        rows.append(row)
    return Table(rows, list(rows[0]), title=title or "the solution with one mistake each, "
                 "graded as a submission (steps that cannot run here: 'not run')")
