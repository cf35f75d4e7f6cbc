"""Chapter 07's ablation in one picture: chapter 06's kernel, then 16-byte global loads,
then the transposed A tile (the studies `ch07_ablation`, timed, and
`ch07_ablation_counters`, profiled), each step with its rate, its registers and what
Nsight Compute counted, side by side so that what changes and what does not is seen at
once; and a control: the third step's kernel forced to one block per SM (chapter 08's
study `ch08_one_block`, counted in `stalls`, same run), which keeps the transposed tile
and takes away the second block. Missing rows are drawn as empty bars marked "not
recorded".
"""
from __future__ import annotations

from gemm_kernels.core import analysis
from gemm_kernels.measure import studies, timing

TIMED, COUNTED = "ch07_ablation", "ch07_ablation_counters"
# Short names for the three steps, for the plot's rows; the studies' own labels name
# the instruction the step was meant to change ("LDS.128 of A"), which the counters
# show is not what changes, so the picture names only what the source changes.
STEP_NAMES = ("chapter 06:\nscalar loads,\nA row-major", "+ 16-byte\nglobal loads",
              "+ transposed\nA tile", "control: transposed\nA tile, one block\nper SM forced")
# The control's rows: (timed study, counted study, the step's label in both).
CONTROL = ("ch08_one_block", "stalls", "chapter 07, one block per SM")
WARPS_PER_SM = 64   # H100/H200 (sm_90): the denominator of sm__warps_active's percentage
COUNTERS = {   # panel title -> (metric, scale)
    "shared-load instructions (M)": ("smsp__inst_executed_op_shared_ld.sum", 1e-6),
    "load + store instructions (M)": ("smsp__inst_executed_pipe_lsu.sum", 1e-6),
    "warps resident per SM": ("sm__warps_active.avg.pct_of_peak_sustained_active",
                              WARPS_PER_SM / 100),
    "issue slots used (%)": ("smsp__issue_active.avg.pct_of_peak_sustained_active", 1.0),
}


def steps(shape=(4096, 4096, 4096)) -> list[dict]:
    """Per step: the rate (GFLOP/s) and share of cuBLAS timed beside it, the timed
    binary's registers and the blocks per SM they allow, and the counters of
    `COUNTERS` (None where not recorded)."""
    timed = studies.results(TIMED, shape)
    counted = studies.results(COUNTED)
    t_name, c_name, label = CONTROL
    # The control was timed at 4096^3 only.
    timed.append(next((p for p in studies.results(t_name) if p[0].label == label), None)
                 if tuple(shape) == (4096, 4096, 4096) else (studies.get(t_name).steps[0], None))
    counted.append(next(p for p in studies.results(c_name) if p[0].label == label))
    out = []
    for (step, r), (_, c) in zip(timed, counted):
        row = {"kernel": step.kernel, "GFLOP/s": None, "share": None, "registers": None,
               "blocks/SM": None}
        if r is not None:
            row["GFLOP/s"] = r["gflops"]["median"]
            row["share"] = timing.share(r)
            regs = (r.get("binary") or {}).get("registers")
            if regs is not None:
                row["registers"] = regs
                row["blocks/SM"] = analysis.kernel_occupancy(
                    step.kernel, r["params"], registers=regs).blocks_per_sm
        metrics = (c or {}).get("metrics") or {}
        for title, (metric, scale) in COUNTERS.items():
            row[title] = metrics[metric] * scale if metric in metrics else None
        out.append(row)
    return out


def plot(shape=(4096, 4096, 4096)):
    """One row per step, one panel per quantity: the rate, the registers per thread
    (with the 128 under which two blocks of 256 threads fit), then the counters."""
    import matplotlib.pyplot as plt
    rows = steps(shape)
    panels = ["TFLOP/s", "registers per thread", *COUNTERS]
    fig, axes = plt.subplots(1, len(panels), figsize=(16, 4), sharey=True)
    y = list(range(len(rows)))[::-1]
    colours = ["0.6", "tab:orange", "tab:blue", "tab:purple"]
    for ax, panel in zip(axes, panels):
        if panel == "TFLOP/s":
            vals = [r["GFLOP/s"] / 1e3 if r["GFLOP/s"] else None for r in rows]
        elif panel == "registers per thread":
            vals = [r["registers"] for r in rows]
        else:
            vals = [r[panel] for r in rows]
        top = max([v for v in vals if v is not None] + [1])
        ax.barh(y, [v or 0 for v in vals], color=colours)
        for yi, v, r in zip(y, vals, rows):
            if v is None:
                text = "not recorded"
            elif panel == "TFLOP/s":
                text = f"{v:.1f}" + (f"\n{r['share']:.0f}% of cuBLAS" if r["share"] else "")
            elif panel == "registers per thread":
                text = f"{v}\n{r['blocks/SM']} block{'s' if r['blocks/SM'] != 1 else ''}/SM"
            else:
                text = f"{v:,.1f}" if v < 100 else f"{v:,.0f}"
            # A white box: the registers' labels cross the dashed line at 128.
            ax.text(v or 0, yi, " " + text, va="center", fontsize=8,
                    bbox=dict(facecolor="white", edgecolor="none", pad=0.5))
        if panel == "registers per thread":
            ax.axvline(128, color="k", ls="--", lw=1)
        ax.set_xlim(0, top * (1.9 if panel == "TFLOP/s" else 1.55))
        ax.set_title(panel + ("\n(dashed: 128, two blocks of 256 fit below)"
                              if panel == "registers per thread" else ""), fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
    axes[0].set_yticks(y, STEP_NAMES, fontsize=8)
    timed, counted = studies.results(TIMED, shape), studies.results(COUNTED)
    timed, counted = timed + studies.results(CONTROL[0]), counted + studies.results(CONTROL[1])
    fig.suptitle(f"Chapter 06's kernel to chapter 07's, one change at a time (K5 tile): "
                 f"timed at {' x '.join(map(str, shape))}, counted by Nsight Compute at "
                 f"4096^3 under its own clocks", fontsize=10)
    runs = list(dict.fromkeys(studies.runs(timed) + studies.runs(counted)))
    fig.text(0.01, 0.01, f"run {', '.join(runs)}" if runs else "not recorded yet",
             fontsize=7, color="0.35")
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    return fig


def verdict(shape=(4096, 4096, 4096)) -> str:
    """The ablation read in three sentences, every number from the recording; or why
    it cannot be read."""
    r = steps(shape)
    need = ("GFLOP/s", "registers", *COUNTERS)
    if any(x[k] is None for x in r[:3] for k in need):
        return "Not every step of the ablation is recorded; nothing to conclude."
    g = [x["GFLOP/s"] for x in r]
    sl = "shared-load instructions (M)"
    ls = "load + store instructions (M)"
    w, iss = "warps resident per SM", "issue slots used (%)"
    return "\n".join([
        f"16-byte global loads: x{g[1] / g[0]:.2f}; load + store instructions "
        f"{r[0][ls]:,.0f}M -> {r[1][ls]:,.0f}M, shared loads {r[0][sl]:,.0f}M -> "
        f"{r[1][sl]:,.0f}M, warps per SM {r[0][w]:.1f} -> {r[1][w]:.1f}.",
        f"Transposed A tile: x{g[2] / g[1]:.2f}; shared loads {r[1][sl]:,.0f}M -> "
        f"{r[2][sl]:,.0f}M, registers {r[1]['registers']} -> {r[2]['registers']} "
        f"({r[1]['blocks/SM']} -> {r[2]['blocks/SM']} blocks per SM), warps per SM "
        f"{r[1][w]:.1f} -> {r[2][w]:.1f}, issue slots used {r[1][iss]:.0f}% -> "
        f"{r[2][iss]:.0f}%.",
        f"In all x{g[2] / g[0]:.2f}, of which x{g[2] / g[1]:.2f} came with the step that "
        f"doubled the warps per SM and left the shared loads as they were."]
        + ([] if r[3]["GFLOP/s"] is None or r[3][w] is None else [
            f"Control, the transposed tile at one block per SM ({r[3][w]:.1f} warps): "
            f"x{r[3]['GFLOP/s'] / g[1]:.2f} over the 16-byte loads alone, issue slots used "
            f"{r[3][iss]:.0f}%."]))
