"""The studies as a chapter shows them: one table per study (each step's rate, its share
of the reference measured beside it, the binary's registers and blocks per SM), a bar
plot of a timed study, and the stall reasons of a profiled one as stacked bars.

Every number comes from the recording (or is "not recorded"); the run that measured
the rows is named under each table and plot.
"""
from __future__ import annotations

from gemm_kernels.core import analysis
from gemm_kernels.core.table import Table
from gemm_kernels.measure import studies, timing

_STALL_PREFIX = "smsp__average_warps_issue_stalled_"
_STALL_SUFFIX = "_per_issue_active.ratio"
NOT_RECORDED = "not recorded yet"
_REFERENCE_NAMES = {"cublas": "cuBLAS", "cublas_dgemm": "cuBLAS DGEMM",
                    "device_copy": "the device copy"}


def _reference(row) -> str:
    name = (row.get("reference") or {}).get("kernel", "the reference")
    return _REFERENCE_NAMES.get(name, name)


def _shape_text(shape) -> str:
    return " x ".join(map(str, shape))


def _runs_line(pairs) -> str:
    runs = studies.runs(pairs)
    missing = sum(1 for _, r in pairs if r is None)
    text = f"run {', '.join(runs)}" if runs else "no run recorded"
    return text + (f"; {missing} step(s) {NOT_RECORDED}" if missing else "")


def table(name: str, shape=None) -> Table:
    """A timed study at one shape: per step its rate, % of the reference timed beside it,
    registers of the binary that was timed, and the blocks per SM those allow."""
    st = studies.get(name)
    shape = tuple(shape or st.shapes[0])
    pairs = studies.results(name, shape)
    rows = []
    for step, r in pairs:
        row = {"step": step.label, "kernel": step.kernel}
        if r is None:
            row["rate"] = NOT_RECORDED
        else:
            unit = "GFLOP/s" if "gflops" in r else "GB/s"
            rate = r["gflops" if unit == "GFLOP/s" else "gbps"]["median"]
            share = timing.share(r)
            row["rate"] = f"{rate:,.0f} {unit}"
            row["share"] = analysis.percent(share / 100) if share is not None else "-"
            regs = (r.get("binary") or {}).get("registers")
            row["registers"] = regs
            if regs is not None:
                row["blocks/SM"] = analysis.kernel_occupancy(step.kernel, r["params"],
                                                             registers=regs).blocks_per_sm
        rows.append(row)
    cols = ["step", "kernel", "rate", "share", "registers", "blocks/SM"]
    ref = next((_reference(r) for _, r in pairs if r and r.get("reference")), None)
    title = (f"{st.question} ({_shape_text(shape)}; share = % of {ref or 'the reference'} "
             f"timed in the same process) — {_runs_line(pairs)}")
    return Table([{c: row.get(c) for c in cols} for row in rows], cols, title=title)


def plot(name: str, shape=None, ax=None):
    """The timed study at one shape as horizontal bars, each labelled with its share of
    the reference; steps not recorded are drawn as empty rows saying so."""
    import matplotlib.pyplot as plt
    st = studies.get(name)
    shape = tuple(shape or st.shapes[0])
    pairs = studies.results(name, shape)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.5 * len(pairs) + 1.5))
    labels = [s.label for s, _ in pairs]
    rates = [(r["gflops"]["median"] / 1e3 if "gflops" in r else r["gbps"]["median"])
             if r else 0 for _, r in pairs]
    unit = next(("TFLOP/s" if "gflops" in r else "GB/s" for _, r in pairs if r), "")
    y = range(len(pairs))[::-1]
    ax.barh(list(y), rates, color="tab:blue")
    for yi, (step, r), v in zip(y, pairs, rates):
        share = timing.share(r) if r else None
        text = NOT_RECORDED if r is None else \
            f"{v:,.1f} {unit}" + (f"  ({share:.0f}% of {_reference(r)})"
                                  if share is not None else "")
        ax.text(v, yi, " " + text, va="center", fontsize=9)
    ax.set_yticks(list(y), labels, fontsize=9)
    ax.set_xlabel(unit)
    ax.set_xlim(0, max(rates + [1]) * 1.6)
    ax.set_title(f"{st.question} ({_shape_text(shape)})", fontsize=10)
    ax.figure.text(0.01, 0.005, _runs_line(pairs), fontsize=8, color="0.35")
    ax.figure.tight_layout(rect=(0, 0.03, 1, 1))
    return ax.figure


def stall_reasons(row: dict) -> dict[str, float]:
    """Warps stalled per issued instruction, by reason (ncu's warp state), from a
    profiled row; reasons named in plain words (long_scoreboard -> long scoreboard)."""
    out = {}
    for k, v in (row.get("metrics") or {}).items():
        if k.startswith(_STALL_PREFIX) and k.endswith(_STALL_SUFFIX):
            out[k[len(_STALL_PREFIX):-len(_STALL_SUFFIX)].replace("_", " ")] = v
    return out


def stall_plot(name: str = "stalls", kernels=None, top: int = 6, ax=None):
    """Stacked bars: per step of a profiled study, the cycles a warp waits per issued
    instruction, split by reason (the `top` largest over the steps shown, the rest
    together). `kernels` keeps only the steps of those kernels."""
    import matplotlib.pyplot as plt
    pairs = [(s, r) for s, r in studies.results(name)
             if kernels is None or s.kernel in kernels]
    got = [(s, stall_reasons(r)) for s, r in pairs if r is not None]
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.55 * max(len(pairs), 1) + 1.8))
    if not got:
        ax.text(0.5, 0.5, f"stall reasons {NOT_RECORDED}", ha="center", va="center")
        ax.set_axis_off()
        return ax.figure
    totals = {}
    for _, st in got:
        for k, v in st.items():
            if k != "selected":    # the issuing warp itself, not a wait
                totals[k] = totals.get(k, 0) + v
    keys = sorted(totals, key=totals.get, reverse=True)[:top]
    colours = plt.get_cmap("tab10").colors
    y = list(range(len(got)))[::-1]
    left = [0.0] * len(got)
    for i, k in enumerate(keys + ["other"]):
        vals = [st.get(k, 0) if k != "other" else
                sum(v for kk, v in st.items() if kk not in keys and kk != "selected")
                for _, st in got]
        ax.barh(y, vals, left=left, color=colours[i % 10] if k != "other" else "0.75",
                label=k)
        left = [a + b for a, b in zip(left, vals)]
    ax.set_yticks(y, [s.label for s, _ in got], fontsize=9)
    ax.set_xlabel("cycles a warp waits per issued instruction, by reason")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=9, frameon=False)
    ax.set_title(f"Where the warps wait ({_shape_text(studies.get(name).shapes[0])}, "
                 "Nsight Compute)", fontsize=10)
    ax.figure.text(0.01, 0.005, _runs_line(pairs), fontsize=8, color="0.35")
    ax.figure.tight_layout(rect=(0, 0.03, 1, 1))
    return ax.figure


def counters(name: str, columns: dict[str, str], shape=None) -> Table:
    """A profiled study's counters per step: `columns` maps a heading to a metric name
    (values as recorded; a metric the row lacks shows as '-')."""
    st = studies.get(name)
    shape = tuple(shape or st.shapes[0])
    pairs = studies.results(name, shape)
    rows = []
    for step, r in pairs:
        row = {"step": step.label}
        for head, metric in columns.items():
            row[head] = None if r is None else r["metrics"].get(metric)
        rows.append(row)
    return Table(rows, ["step", *columns], title=f"{st.question} ({_shape_text(shape)}, "
                                                  f"Nsight Compute) — {_runs_line(pairs)}")
