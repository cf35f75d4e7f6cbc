"""The ladder: every chapter's kernel next to cuBLAS, as a table and a plot."""
from __future__ import annotations

from pathlib import Path

from gemm_kernels.core import style
from gemm_kernels.core.table import Table
from gemm_kernels.measure import lookup, records
from gemm_kernels.measure.record import LADDER_SIZES, OWN_RECORDING
from gemm_kernels.core.kernels import KERNELS, get
from gemm_kernels.core.registry import runnable
from gemm_kernels.measure.timing import REFERENCE_KERNELS as REFERENCES, reference_of


# Kernels that exist to isolate one change inside a chapter (chapter 07's float4 loads
# without the transposed A tile; chapter 07's kernel on an A transposed beforehand, for
# chapter 10), not steps the series takes: left out of the ladder.
ABLATIONS = {"float4_a_rows", "float4_at"}


def ladder_kernels() -> list[str]:
    """The sgemm kernels in chapter order (one line each in the summary). Chapter 12's
    are left out: they are recorded at their own shapes, and at the ladder's squares its
    plan runs the capstone's kernel."""
    return [k.name for k in KERNELS.values() if k.op == "sgemm" and k.name not in ABLATIONS
            and k.chapter not in OWN_RECORDING]


def compare(kernels, sizes, params: dict | None = None, repeats: int | None = None,
            reference: str | None = None) -> Table:
    """GFLOP/s of `kernels` at square `sizes` (live or recorded). "% of cuBLAS" divides
    each row by its own reference, measured in the same process beside it: cuBLAS SGEMM
    for sgemm kernels, DGEMM for dgemm kernels; "-" where the row has none (recordings
    before schema 2). Per size, a row of each reference kernel timed on its own gives the
    plot its dashed line: `reference` ("cublas" or "cublas_dgemm"), by default those the
    kernels are compared with (cuBLAS SGEMM when there are none)."""
    refs = [reference] if reference else list(dict.fromkeys(
        reference_of(k) for k in kernels)) or ["cublas"]
    # A kernel this GPU cannot run (the capstone's cp.async before sm_80) is left out,
    # and the title says why.
    refused = {k: why for k in kernels for ok, why in [runnable(get(k))] if not ok}
    kernels = [k for k in kernels if k not in refused]
    rows = []
    for n in sizes:
        shape = (n, n, n)
        for name in kernels:
            try:
                r = lookup.measure_or_lookup(name, shape, (params or {}).get(name), repeats)
            except LookupError:
                continue
            same_run = r.get("reference", {}).get("gflops", {}).get("median")
            rows.append({"kernel": name, "chapter": r["chapter"], "size": n,
                         "GFLOP/s": r["gflops"]["median"], "min": r["gflops"]["min"],
                         "max": r["gflops"]["max"], "cuBLAS same run": same_run,
                         "% of cuBLAS": lookup.share(r), "error / bound": r.get("error_over_bound")})
        for ref in refs:
            try:
                r = lookup.measure_or_lookup(ref, shape, repeats=repeats)
            except LookupError:
                continue
            rows.append({"kernel": ref, "chapter": "00", "size": n,
                         "GFLOP/s": r["gflops"]["median"], "min": r["gflops"]["min"],
                         "max": r["gflops"]["max"], "% of cuBLAS": 100.0,
                         "error / bound": r.get("error_over_bound")})
    return Table(rows, ["chapter", "kernel", "size", "GFLOP/s", "min", "max",
                        "cuBLAS same run", "% of cuBLAS", "error / bound"],
                 title=f"GFLOP/s, {records.source()}"
                       + "".join(f"\nleft out: {why}" for why in refused.values()))


def share(kernel: str, size: int, params: dict | None = None) -> dict | None:
    """{'GFLOP/s', '% of cuBLAS', 'source'} of one configuration at size^3, measured
    (live) or recorded; None when the recording does not have it. '% of cuBLAS' is
    relative to the cuBLAS run beside it, None where the row has none."""
    try:
        g = lookup.measure_or_lookup(kernel, (size,) * 3, params)
    except LookupError:
        return None
    return {"GFLOP/s": g["gflops"]["median"], "% of cuBLAS": lookup.share(g),
            "source": g["source"]}


def plot(table: Table, ax=None, path=None):
    """GFLOP/s by size, one line per kernel named by its chapter ("09 · capstone"),
    later chapters on top, cuBLAS dashed; a line that stops before the largest size
    says so at its end. Writes a PNG only when given `path`."""
    import matplotlib
    if path is not None and ax is None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 4.5))
    names = list(dict.fromkeys(r["kernel"] for r in table))
    sizes = sorted({r["size"] for r in table})
    chapter = {r["kernel"]: r.get("chapter") for r in table}
    for i, (name, (colour, marker)) in enumerate(zip(names, style.series_styles(len(names)))):
        pts = sorted((r["size"], r["GFLOP/s"]) for r in table if r["kernel"] == name)
        if name.startswith("cublas"):
            ax.plot(*zip(*pts), "kD--", lw=2, ms=5, label=f"{name}, timed on its own",
                    zorder=2)
        else:
            # later chapters drawn on top: the fastest kernels are not hidden under
            # cuBLAS or the kernels before them
            ax.plot(*zip(*pts), marker + "-", color=colour, label=f"{chapter[name]} · {name}" if chapter[name] else name,
                    zorder=3 + i)
        if pts[-1][0] < sizes[-1]:
            ax.annotate(f"not recorded at {sizes[-1]:,}", pts[-1], xytext=(6, 0),
                        textcoords="offset points", va="center", fontsize=7, color=colour)
    _readable_log_axes(ax, sizes)
    ax.set_xlabel("matrix size M = N = K")
    ax.set_ylabel("GFLOP/s (log scale)")
    ax.set_title(table.title)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(True, which="both", alpha=0.3)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        (fig or ax.figure).savefig(path, dpi=120, bbox_inches="tight")
    return ax


def _readable_log_axes(ax, sizes):
    """Log axes labelled in plain numbers: the rates span decades (a log axis), but
    '2^11' and '10^4' make a reader convert; ticks at the measured sizes (2,048) and at
    1, 2, 5 x 10^n GFLOP/s (20,000) can be read off directly."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter
    plain = FuncFormatter(lambda v, _: f"{v:,.0f}")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sizes))
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(NullFormatter())


README_START, README_END = "<!-- results:start -->", "<!-- results:end -->"


def markdown(sizes=LADDER_SIZES) -> str:
    """The ladder as a Markdown table: GFLOP/s and % of cuBLAS (same run) per kernel and
    size. LookupError when there is nothing to put in it: no ladder rows (no recording,
    a foreign one) or none with a cuBLAS measured beside it (a schema-1 recording)."""
    table = compare(ladder_kernels(), sizes)
    kernels = [r for r in table if r["kernel"] not in REFERENCES]
    if not kernels:
        raise LookupError(f"no GFLOP/s of the ladder kernels at {list(sizes)} in "
                          f"{records.source()}: record them on a GPU first")
    if all(r["% of cuBLAS"] is None for r in kernels):
        raise LookupError(f"the ladder rows of {records.source()} have no cuBLAS measured "
                          "in the same run (a recording before schema 2): re-record them")
    by = {(r["kernel"], r["size"]): r for r in table}
    names = list(dict.fromkeys(r["kernel"] for r in table))
    head = "| ch | kernel | " + " | ".join(f"{n}^3" for n in sizes) + " |"
    lines = [f"GFLOP/s (% of cuBLAS measured in the same run), {records.source()}:", "", head,
             "|" + " --- |" * (len(sizes) + 2)]
    for name in names:
        cells = []
        for n in sizes:
            r = by.get((name, n))
            pct = "-" if r is None or r["% of cuBLAS"] is None else f"{r['% of cuBLAS']:.0f}%"
            cells.append("-" if r is None else f"{r['GFLOP/s']:,.0f} ({pct})")
        ch = next(r["chapter"] for r in table if r["kernel"] == name)
        lines.append(f"| {ch} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
