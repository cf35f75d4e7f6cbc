"""Chapter 07's ablation: chapter 06's kernel, then 16-byte global loads, then the
transposed A tile (the studies `ch07_ablation`, timed, and `ch07_ablation_counters`,
profiled), each step with its rate, its registers and what Nsight Compute counted; and
two controls: the third step's kernel forced to one block per SM (chapter 08's study
`ch08_one_block`, counted in `stalls`, same run), which keeps the transposed tile and
takes away the second block, and the second step's kernel promised two blocks per SM
(`__launch_bounds__(256, 2)`, timed in one run with the three steps: `timed_variants`),
which keeps the row-major tile and gives it the second block. Missing rows are drawn as empty bars marked "not
recorded". The control once more, profiled beside its two-block twin in one run with the
caches (`one_per_sm`): what else forcing one block per SM takes away. And chapter 06's
step that regroups the same 16 warps per SM from one block into two (`warps_or_blocks`).

Besides the recording, what the SASS compiled here says about the same kernels: the
instructions of each main loop and how long the values of each shared load stay in
registers (`sass_table`), where each warp's cycles go (`warp_time`, `stall_plot`), and
what ptxas does with the row-major kernel when it is promised two blocks per SM, as
`__launch_bounds__(256, 2)` would promise (`register_cap_table`), without editing the
kernel's source.
"""
from __future__ import annotations

import re

from gemm_kernels.core import analysis
from gemm_kernels.measure import studies, timing

TIMED, COUNTED = "ch07_ablation", "ch07_ablation_counters"
# Short names for the three steps, for the plot's rows; the studies' own labels name
# the instruction the step was meant to change ("LDS.128 of A"), which the counters
# show is not what changes, so the picture names only what the source changes.
STEP_NAMES = ("chapter 06:\nscalar loads,\nA row-major",
              "+ 16-byte global\nloads, shared\nstores (and C\nstores)",
              "+ transposed\nA tile",
              "control: transposed\nA tile, one block\nper SM forced\n(and less L1 cache)",
              "control: row-major\nA tile, two blocks\npromised by\n__launch_bounds__(256, 2)")
# Step 2 in the printed lines: it widens the copy's global loads and its shared stores
# (and the stores of C), and the counters' drop comes from the copy.
WIDE = "16-byte global loads and shared stores"
# (never break `__launch_bounds__(256, 2)` inside: a reader copies it from the label)
# The control's rows: (timed study, counted study, the step's label in both).
CONTROL = ("ch08_one_block", "stalls", "chapter 07, one block per SM")
# The other control: the row-major kernel promised two blocks per SM, timed at 4096^3 in
# one run with the three steps (`timed_variants`; not profiled).
PROMISED_SHAPE = (4096, 4096, 4096)           # timed there at K5 with the steps
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
               "blocks/SM": None, "run": None}
        if r is not None:
            row["GFLOP/s"] = r["gflops"]["median"]
            row["run"] = r.get("run")
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
    out.append(_promised(shape))
    return out


def _promised(shape) -> dict:
    """The row of float4_a_rows with `__launch_bounds__(NT, 2)` in the form of `steps`
    (counters None: not profiled)."""
    from gemm_kernels.measure import lookup
    from gemm_kernels.notebook.ch06_tiles import with_min_blocks
    r = lookup.variant_row(with_min_blocks("float4_a_rows", 2), shape, K5) \
        if tuple(shape) == PROMISED_SHAPE else None
    row = {"kernel": "float4_a_rows", "GFLOP/s": None, "share": None, "registers": None,
           "blocks/SM": None, "run": None, **{title: None for title in COUNTERS}}
    if r is not None:
        regs = r["binary"]["registers"]
        row["run"] = r.get("run")
        row.update({"GFLOP/s": r["gflops"]["median"], "share": timing.share(r),
                    "registers": regs, "spill bytes": r["binary"]["local_size_bytes"],
                    "blocks/SM": analysis.kernel_occupancy(
                        "float4_a_rows", r["params"], registers=regs).blocks_per_sm})
    return row


def plot(shape=(4096, 4096, 4096)):
    """One row per step, three panels: the rate (with its share of cuBLAS), the
    registers per thread (with the 128 under which two blocks of 256 threads fit, and
    the blocks per SM), and the share of issue slots used (with the warps resident per
    SM). What does not change, the shared-load instructions, is said under the plot."""
    import matplotlib.pyplot as plt
    from gemm_kernels.measure import records
    rows = steps(shape)
    warps, issue = "warps resident per SM", "issue slots used (%)"
    panels = (f"TFLOP/s at {shape[0]}^3", "registers per thread (dashed: 128)",
              "issue slots used (%), Nsight Compute")
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 5.4), sharey=True)
    y = list(range(len(rows)))[::-1]
    colours = ["0.6", "tab:orange", "tab:blue", "tab:purple", "tab:olive"]
    for n, (ax, panel) in enumerate(zip(axes, panels)):
        if n == 0:
            vals = [r["GFLOP/s"] / 1e3 if r["GFLOP/s"] else None for r in rows]
        elif n == 1:
            vals = [r["registers"] for r in rows]
        else:
            vals = [r[issue] for r in rows]
        top = max([v for v in vals if v is not None] + [1])
        ax.barh(y, [v or 0 for v in vals], color=colours)
        for yi, v, r in zip(y, vals, rows):
            if v is None:
                text = "timed only,\nnot profiled" if n == 2 and r["GFLOP/s"] else "not recorded"
            elif n == 0:
                text = f"{v:.1f}" + (f"\n{r['share']:.0f}% of cuBLAS" if r["share"] else "")
            elif n == 1:
                b = r["blocks/SM"]
                text = f"{v}\n{b} block{'s' if b != 1 else ''}/SM"
            else:
                text = f"{v:.0f}%" + (f"\n{r[warps]:.0f} warps/SM" if r[warps] else "")
            # A white box: the registers' labels cross the dashed line at 128.
            ax.text(v or 0, yi, " " + text, va="center", fontsize=9,
                    bbox=dict(facecolor="white", edgecolor="none", pad=0.5))
        if n == 1:
            ax.axvline(128, color="k", ls="--", lw=1)
        ax.set_xlim(0, top * (1.75 if n == 0 else 1.6))
        ax.set_title(panel, fontsize=10)
        ax.tick_params(axis="x", labelsize=9)
    axes[0].set_yticks(y, STEP_NAMES, fontsize=9)
    loads = [r["shared-load instructions (M)"] for r in rows]
    same = (None not in loads and max(loads) - min(loads) < 0.5)
    fig.suptitle("Chapter 06's kernel to chapter 07's, one change at a time (K5 tile)",
                 fontsize=11)
    note = (f"Shared-load instructions (Nsight Compute): {loads[0]:,.0f} M in every row. "
            if same else "")
    fig.text(0.01, 0.01, note + f"Rates timed beside cuBLAS; counters at 4096^3 under "
             f"Nsight Compute's clocks ({records.source()}).", fontsize=9, color="0.25")
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    return fig


def verdict(shape=(4096, 4096, 4096)) -> str:
    """The ablation read in three sentences, every number from the recording; or why
    it cannot be read."""
    r = steps(shape)
    need = ("GFLOP/s", "registers", *COUNTERS)
    if any(x[k] is None for x in r[:3] for k in need):
        return "Not every step of the ablation is recorded; nothing to conclude."
    g = [x["GFLOP/s"] for x in r]

    def run_of(x):   # a control's ratio divides by step 2: say whether one run gave both
        same = x["run"] is not None and x["run"] == r[1]["run"]
        return "timed in the same run as the steps" if same else "timed in another run"
    sl = "shared-load instructions (M)"
    ls = "load + store instructions (M)"
    w, iss = "warps resident per SM", "issue slots used (%)"
    return "\n".join([
        f"{WIDE.capitalize()}: x{g[1] / g[0]:.2f}; load + store instructions "
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
            f"Control, the transposed tile at one block per SM ({r[3][w]:.1f} warps; "
            f"{run_of(r[3])}): x{r[3]['GFLOP/s'] / g[1]:.2f} over the {WIDE} alone, "
            f"issue slots used {r[3][iss]:.0f}%."])
        + ([] if r[4]["GFLOP/s"] is None else [
            f"Control, the row-major tile promised two blocks per SM ({r[4]['registers']} "
            f"registers, {r[4]['blocks/SM']} blocks per SM; {run_of(r[4])}): "
            f"x{g[4] / g[1]:.2f} over the "
            f"{WIDE} alone; the transposed tile adds x{g[2] / g[4]:.2f} to that."]))


def rates_line(shape=(2048, 2048, 2048)) -> str:
    """The three steps' rate ratios at another size, in one line (the counters were
    taken at 4096^3 only); or why they cannot be given."""
    g = [x["GFLOP/s"] for x in steps(shape)[:3]]
    if None in g:
        return f"{shape[0]}^3: not every step is recorded."
    return (f"{shape[0]}^3, the same steps: {WIDE} x{g[1] / g[0]:.2f}, "
            f"transposed A tile x{g[2] / g[1]:.2f}, in all x{g[2] / g[0]:.2f}.")


# ------------------------------------------------------------------ one table

K5 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
STORE_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"


def ladder_lines(table, sizes=None, against_default: int = 4096) -> str:
    """The ladder of chapter 07 in words: at each size of `table` (`ladder.compare` rows
    of `tile_2d_reg` at `K5` and `float4`), the rate of `float4` over chapter 06's at the
    same tile and both shares of cuBLAS; then, at `against_default`, `float4` over chapter
    06's kernel at its own default tile (the step a student meets on the ladder)."""
    from gemm_kernels.measure import ladder
    at = {(r["kernel"], r["size"]): r for r in table}
    sizes = sizes or sorted({n for _, n in at})
    lines = []
    for n in sizes:
        if ("tile_2d_reg", n) in at and ("float4", n) in at:
            f4, reg = at["float4", n], at["tile_2d_reg", n]
            lines.append(f"{n}: float4 / tile_2d_reg, both at K5 = "
                         f"{f4['GFLOP/s'] / reg['GFLOP/s']:.2f}  ({reg['% of cuBLAS']:.0f}% -> "
                         f"{f4['% of cuBLAS']:.0f}% of cuBLAS, same run)")
    f4, reg = ladder.share("float4", against_default), ladder.share("tile_2d_reg", against_default)
    p = _kernel("tile_2d_reg").resolve(None)
    lines.append(f"float4 (K5) / tile_2d_reg at its default ({p['BM']} x {p['BN']} x "
                 f"{p['BK']}, {p['TM']} x {p['TN']}), {against_default}: "
                 f"{f4['GFLOP/s'] / reg['GFLOP/s']:.2f}")
    return "\n".join(lines)


def tflops(gflops) -> str | None:
    """A rate in TFLOP/s with one decimal, for tables: "21.0" beside "21.5", not "21"."""
    return None if gflops is None else f"{gflops / 1e3:.1f}"


def ladder_rows(table):
    """The ladder's rows (`ladder.compare`) in TFLOP/s, the unit of the rest of the
    chapter: each kernel's median, min and max over the repeats, and the cuBLAS timed in
    the same run beside it, which the percentages divide by. The rows of cuBLAS timed in
    runs of its own are left out, so that one cuBLAS, the same-run one, is named."""
    from gemm_kernels.core.table import Table
    rows = [{"chapter": r["chapter"], "kernel": r["kernel"], "size": r["size"],
             "TFLOP/s": tflops(r["GFLOP/s"]), "min": tflops(r["min"]),
             "max": tflops(r["max"]),
             "cuBLAS, same run (TFLOP/s)": tflops(r.get("cuBLAS same run") or None),
             "% of cuBLAS, same run": r["% of cuBLAS"]}
            for r in table if not r["kernel"].startswith("cublas")]
    return Table(rows, ["chapter", "kernel", "size", "TFLOP/s", "min", "max",
                        "cuBLAS, same run (TFLOP/s)", "% of cuBLAS, same run"],
                 title=table.title.replace("GFLOP/s, ", "TFLOP/s, "))


def ladder_plot(table, ax=None):
    """The ladder of chapter 07 (`ladder.compare` rows) in TFLOP/s: one line per kernel,
    and cuBLAS as timed in the same run beside this chapter's kernel (the cuBLAS its
    percentages divide by), dashed. Returns the Axes."""
    import matplotlib.pyplot as plt
    from gemm_kernels.core import style
    from gemm_kernels.measure import ladder
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.5))
    rows = [r for r in table if not r["kernel"].startswith("cublas")]
    names = list(dict.fromkeys(r["kernel"] for r in rows))
    sizes = sorted({r["size"] for r in rows})
    for name, (colour, marker) in zip(names, style.series_styles(len(names))):
        mine = sorted((r for r in rows if r["kernel"] == name), key=lambda r: r["size"])
        ax.plot([r["size"] for r in mine], [r["GFLOP/s"] / 1e3 for r in mine],
                marker + "-", color=colour, label=f"{mine[0]['chapter']} · {name}", zorder=3)
    ref = sorted(((r["size"], r["cuBLAS same run"] / 1e3) for r in rows
                  if r["kernel"] == names[-1] and r.get("cuBLAS same run")))
    if ref:
        ax.plot(*zip(*ref), "kD--", lw=2, ms=5, label=f"cuBLAS, same run (beside {names[-1]})",
                zorder=2)
    ladder._readable_log_axes(ax, sizes)
    ax.set_xlabel("matrix size M = N = K")
    ax.set_ylabel("TFLOP/s (log scale)")
    ax.set_title(table.title.replace("GFLOP/s, ", "TFLOP/s, "))
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(True, which="both", alpha=0.3)
    return ax


def table(shapes=((4096, 4096, 4096), (2048, 2048, 2048))):
    """The rows behind `plot`, one per step: the rate at each shape, the share of cuBLAS
    at the first, registers and blocks per SM of the timed binary, and the counters
    (M: millions over the whole launch)."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import records
    by_shape = [steps(s) for s in shapes]
    stores = [(c or {}).get("metrics", {}).get(STORE_CONFLICTS) for _, c in _counted()]
    out = []
    for i, label in enumerate(STEP_NAMES):
        first = by_shape[0][i]
        row = {"step": label.replace("\n", " "), "kernel": first["kernel"]}
        for s, rows in zip(shapes, by_shape):
            g = rows[i]["GFLOP/s"]
            row[f"TFLOP/s at {s[0]}^3"] = tflops(g or None)
        row["% of cuBLAS"] = first["share"]
        row["registers"], row["blocks/SM"] = first["registers"], first["blocks/SM"]
        row["shared loads (M)"] = first["shared-load instructions (M)"]
        row["loads + stores (M)"] = first["load + store instructions (M)"]
        row["store conflicts (M)"] = stores[i] / 1e6 if stores[i] is not None else None
        row["warps/SM"] = first["warps resident per SM"]
        row["issue slots used (%)"] = first["issue slots used (%)"]
        out.append(row)
    return Table(out, list(out[0]), title=f"The ablation's rows: timed beside cuBLAS, "
                 f"counted by Nsight Compute at 4096^3 ({records.recording_label()}; '-': not "
                 f"measured for that row)")


def _counted() -> list:
    """(step, profiled row or None) for the three steps and the two controls (the
    second was not profiled)."""
    counted = studies.results(COUNTED)
    counted.append(next(p for p in studies.results(CONTROL[1]) if p[0].label == CONTROL[2]))
    return counted + [(None, None)]


# ------------------------------------------------------------------ where the cycles go

# A warp's states, as the picture groups Nsight Compute's stall reasons (the names
# `evidence.stall_reasons` gives them); "other" is every reason not named here.
WARP_STATES = (
    ("issuing", ("selected",)),
    ("ready, but another warp issued", ("not selected",)),
    ("waiting on a global load\n(long scoreboard)", ("long scoreboard",)),
    ("waiting on shared memory\n(short scoreboard, MIO throttle)",
     ("short scoreboard", "mio throttle")),
    ("waiting at the barrier", ("barrier",)),
    ("other", None),
)
SCHEDULERS_PER_SM = 4    # sm_90: four sub-partitions, each with its warp scheduler


def warp_time(row) -> dict | None:
    """Where one warp's cycles go, as fractions that add up to 1 (within rounding).

    Nsight Compute gives, per reason, the warps in that state per cycle in which the
    scheduler issued (`..._per_issue_active.ratio`). Times the share of cycles with an
    issue, that is the warps in the state per cycle; divided by the warps per scheduler,
    the share of a warp's cycles. None when the row lacks a counter it needs."""
    from gemm_kernels.notebook.evidence import stall_reasons
    m = (row or {}).get("metrics") or {}
    issue = m.get("smsp__issue_active.avg.pct_of_peak_sustained_active")
    warps = m.get("sm__warps_active.avg.pct_of_peak_sustained_active")
    reasons = stall_reasons(row or {})
    if not issue or not warps or "selected" not in reasons:
        return None
    per_scheduler = warps / 100 * WARPS_PER_SM / SCHEDULERS_PER_SM
    scale = issue / 100 / per_scheduler
    out, named = {}, set()
    for state, names in WARP_STATES:
        if names is None:
            out[state] = scale * sum(v for k, v in reasons.items() if k not in named)
        else:
            named.update(names)
            out[state] = scale * sum(reasons.get(k, 0.0) for k in names)
    out["issue"] = issue / 100
    out["warps per scheduler"] = per_scheduler
    return out


def other_reasons(rows, least: float = 0.02) -> list[str]:
    """The stall reasons the grey "other" part of `stall_plot` holds, largest first:
    those that reach `least` of a warp's cycles in some bar of `rows` (profiled rows),
    each with its range over the bars ("dispatch stall 5-9%")."""
    from gemm_kernels.notebook.evidence import stall_reasons
    named = {n for _, names in WARP_STATES if names for n in names}
    shares = {}
    for row in rows:
        w = warp_time(row)
        scale = w["issue"] / w["warps per scheduler"]
        for reason, v in stall_reasons(row).items():
            if reason not in named:
                shares.setdefault(reason, []).append(100 * scale * v)
    big = sorted((r for r, v in shares.items() if max(v) >= 100 * least),
                 key=lambda r: -max(shares[r]))
    return [f"{r} {min(shares[r]):.0f}-{max(shares[r]):.0f}%" for r in big]


def stall_example(step: int = 2, state: str = WARP_STATES[2][0]) -> str:
    """One bar of `stall_plot` worked out from its three inputs, in a sentence: for the
    step at `step` of the ablation, Nsight Compute's cycles of `state` per issued
    instruction, the share of cycles with an issue and the warps per scheduler, and the
    share of a warp's cycles they give."""
    from gemm_kernels.notebook.evidence import stall_reasons
    _, row = _counted()[step]
    w = warp_time(row)
    names = dict(WARP_STATES)[state]
    per_issue = sum(stall_reasons(row).get(k, 0.0) for k in names)
    label = state.split("\n")[0]
    return (f"{STEP_NAMES[step].replace(chr(10), ' ')}, '{label}': {per_issue:.2f} warps in "
            f"that state per issued instruction x {100 * w['issue']:.0f}% of cycles with an "
            f"issue / {w['warps per scheduler']:.1f} warps per scheduler = "
            f"{100 * w[state]:.0f}% of one warp's cycles")


def stall_plot():
    """Per step (and the control), one bar of 100%: the share of a warp's cycles in
    each state (`warp_time`), with the scheduler's share of cycles that issued an
    instruction beside it. Returns the Figure."""
    import matplotlib.pyplot as plt
    from gemm_kernels.notebook.evidence import stall_colour
    from gemm_kernels.measure import records
    # only the rows that were profiled: the row-major control was timed, not profiled
    shown = [(name, r) for name, (_, r) in zip(STEP_NAMES, _counted())
             if warp_time(r) is not None]
    names, rows = [n for n, _ in shown], [warp_time(r) for _, r in shown]
    # the legend names what the grey part holds, from the same rows
    other = "other: " + ",\n".join(other_reasons([r for _, r in shown]))
    colours = {"issuing": "#2d7d3a", "ready, but another warp issued": stall_colour("not selected"),
               WARP_STATES[2][0]: stall_colour("long scoreboard"),
               WARP_STATES[3][0]: stall_colour("short scoreboard"),
               "waiting at the barrier": stall_colour("barrier"), "other": "0.8"}
    # one inch and more per row: the labels of the two controls run to five lines
    fig, ax = plt.subplots(figsize=(12, 1.25 * len(rows) + 1.8))
    y = list(range(len(rows)))[::-1]
    left = [0.0] * len(rows)
    for state, _ in WARP_STATES:
        vals = [100 * r[state] if r else 0 for r in rows]
        ax.barh(y, vals, left=left, color=colours[state], edgecolor="white",
                label=other if state == "other" else state)
        for yi, v, x0 in zip(y, vals, left):
            if v >= 6:
                ax.text(x0 + v / 2, yi, f"{v:.0f}%", ha="center", va="center", fontsize=9,
                        color="white" if state != "other" else "black")
        left = [a + b for a, b in zip(left, vals)]
    for yi, r, x in zip(y, rows, left):
        ax.text(max(x, 100) + 1.5, yi,
                f"{r['warps per scheduler']:.0f} warps per scheduler,\n"
                f"it issues in {100 * r['issue']:.0f}% of cycles", va="center", fontsize=9)
    ax.set_yticks(y, names, fontsize=9)
    ax.set_xlim(0, 135)
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("share of one warp's cycles (%)", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.42, -0.16), ncol=3, fontsize=9,
              frameon=False)
    ax.set_title("Where a warp's cycles go (Nsight Compute at 4096^3, "
                 f"{records.source()})", fontsize=10)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ the SASS

def _loop(kernel, params):
    from gemm_kernels.core import compiler
    from gemm_kernels.core.launch import kernel_of
    k = kernel_of(kernel)
    return analysis.main_loop(compiler.sass(k, k.resolve(params)))


def held_loads(kernel, params=None, steps_of_k: int = 2) -> tuple[int, int]:
    """(shared loads of the main loop whose values are still read more than
    `steps_of_k` values of k after the load, all shared loads). One value of k is TM*TN
    FFMAs of one thread; counted in the SASS compiled here."""
    from gemm_kernels.core.launch import kernel_of
    from gemm_kernels.notebook.fragments import fragment_uses
    p = kernel_of(kernel).resolve(params)
    body, n = _loop(kernel, p), None
    n = len(body)
    readers = {}
    for pos, _, rs in fragment_uses(body):
        readers.setdefault(pos, []).extend(rs)
    limit, held = steps_of_k * p["TM"] * p["TN"], 0
    for pos, rs in readers.items():
        last = max(((r - pos) % n for r in rs), default=0)
        ffma = sum(1 for j in range(1, last + 1) if body[(pos + j) % n][1] == "FFMA")
        held += ffma > limit
    return held, len(readers)


def sass_table(kernels=("tile_2d_reg", "float4_a_rows", "float4"), params=None):
    """Per kernel at the K5 tile: registers (ptxas here) and the blocks of 256 threads
    they let onto an SM, the main loop's memory instructions and FFMAs per trip (one
    tile of BK = 8), how many of its shared loads fill registers that are still read
    more than two values of k later, and the stores of C in the whole kernel (every
    path the compiler emitted)."""
    from gemm_kernels.core import compiler
    from gemm_kernels.core.table import Table
    p = params or K5
    rows = []
    for name in kernels:
        s = analysis.summary(name, p)
        h = s["loop_histogram"]
        held, total = held_loads(name, p)
        rows.append({"kernel": name, "A tile": "As[k][m]" if name == "float4" else "As[m][k]",
                     "registers": s["registers"],
                     "blocks/SM": analysis.kernel_occupancy(name, p).blocks_per_sm,
                     **{op: h.get(op, 0) for op in ("LDG", "LDG.128", "STS", "STS.128",
                                                    "LDS.128", "FFMA")},
                     "LDS whose values live > 2 values of k": f"{held} of {total}",
                     "C stores (whole kernel)": ", ".join(
                         f"{n} {op}" for op, n in sorted(s["kernel_histogram"].items())
                         if op.startswith("STG"))})
    return Table(rows, list(rows[0]), title="main loop, one trip per tile (BK = 8), K5 tile: "
                 f"SASS compiled here for {compiler.static_arch(_kernel('float4'))} by "
                 f"ptxas {compiler.ptxas_version()}")


def memory_instructions(kernel, params=None, start: str = "LDG", limit: int = 14):
    """The main loop's memory instructions and barriers (LDG, STS, LDS, BAR), from the
    first whose opcode starts with `start`, at most `limit` lines (SASS compiled here)."""
    from gemm_kernels.notebook.display import Text
    body = _loop(kernel, _kernel(kernel).resolve(params))
    first = next((i for i, (_, _, t) in enumerate(body) if t.startswith(start)), 0)
    keep = [f"/*{a:04x}*/  {t}" for a, f, t in body[first:]
            if f.split(".")[0] in ("LDG", "STS", "LDS", "BAR")]
    more = len(keep) - limit
    return Text("\n".join(keep[:limit] + ([f"... {more} more"] if more > 0 else [])))


def _kernel(name):
    from gemm_kernels.core.launch import kernel_of
    return kernel_of(name)


# The float4 read of A at one k in 07_float4.cu, and the same read a float at a time.
_FLOAT4_A_READ = re.compile(
    r"for \(int i = 0; i < TM; i \+= 4\) \{\s*"
    r"const float4 v = \*reinterpret_cast<const float4\*>\(&As\[k\]\[tr \* TM \+ i\]\);\s*"
    r"a\[i\] = v\.x; a\[i \+ 1\] = v\.y; a\[i \+ 2\] = v\.z; a\[i \+ 3\] = v\.w;\s*\}")
_SCALAR_A_READ = "for (int i = 0; i < TM; ++i) a[i] = As[k][tr * TM + i];"


def scalar_a_reads():
    """`float4` with one change: its reads of A at one k written a float at a time,
    `a[i] = As[k][tr * TM + i]`, as a student may write them in the transposed tile.
    For the static analysis only (its PTX: does the front end merge them into 128-bit
    loads?): compiled here, never timed."""
    k = _kernel("float4")
    text, n = _FLOAT4_A_READ.subn(_SCALAR_A_READ, k.source_text())
    if n != 1:
        raise ValueError(f"{k.source}: expected one float4 read of As[k][tr * TM + i], found {n}")
    return k.with_code(text, name="float4, A read a float at a time", source=k.source)


# ------------------------------------------------------------------ a register budget

def promised_ptx(kernel, params=None, min_blocks: int = 2) -> str:
    """The kernel's PTX as NVRTC compiles it from its source, with the promise that
    `__launch_bounds__(threads, min_blocks)` adds: a `.minnctapersm min_blocks` line
    after the entry's `.maxntid` (the source's `__launch_bounds__(threads)`). ptxas then
    keeps each thread to the registers that let `min_blocks` blocks share an SM."""
    from gemm_kernels.core import compiler
    k = _kernel(kernel)
    text, _ = compiler.ptx(k, k.resolve(params))
    lines = text.splitlines()
    at = [i for i, line in enumerate(lines) if line.strip().startswith(".maxntid")]
    if len(at) != 1 or any(".minnctapersm" in line for line in lines):
        raise ValueError(f"{k.name}: expected one .maxntid and no .minnctapersm in its PTX")
    lines.insert(at[0] + 1, f".minnctapersm {min_blocks}")
    return "\n".join(lines) + "\n"


_CAPPED: dict = {}


def promised(kernel, params=None, min_blocks: int = 2) -> dict:
    """ptxas -v and the SASS of `promised_ptx`: registers, spill bytes, the main loop's
    instruction histogram, and the blocks per SM those registers allow."""
    import re
    import subprocess
    import tempfile
    from collections import Counter
    from pathlib import Path
    from gemm_kernels.core import compiler
    k = _kernel(kernel)
    p = k.resolve(params)
    key = (k.name, tuple(sorted(p.items())), min_blocks)
    if key in _CAPPED:
        return _CAPPED[key]
    arch = compiler.static_arch(k)
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(promised_ptx(k.name, p, min_blocks))
        res = subprocess.run([compiler._tool("ptxas"), "-v", f"-arch={arch}", "-o", str(out),
                              str(src)], capture_output=True, text=True)
        if res.returncode:
            raise RuntimeError(f"ptxas failed:\n{res.stderr}")
        sass = subprocess.run([compiler._tool("nvdisasm"), "-c", "-g", str(out)],
                              capture_output=True, text=True, check=True).stdout
    regs = int(re.search(r"Used (\d+) registers", res.stderr).group(1))
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", res.stderr)
    loop = Counter(f for _, f, _ in analysis.main_loop(sass))
    _CAPPED[key] = {"registers": regs, "spill_stores": int(spill.group(1)) if spill else 0,
                    "spill_loads": int(spill.group(2)) if spill else 0,
                    "loop_histogram": dict(loop),
                    "blocks/SM": analysis.kernel_occupancy(k.name, p,
                                                           registers=regs).blocks_per_sm}
    return _CAPPED[key]


def register_cap_table(kernels=("float4_a_rows", "tile_2d_reg"), params=None,
                       min_blocks: int = 2):
    """Per kernel at the K5 tile, compiled as it is and with the promise of
    `min_blocks` blocks per SM (`promised_ptx`); `float4` as it is, for comparison:
    registers, spill bytes, local-memory instructions and shared loads in the main loop,
    FFMAs, and the blocks per SM the registers allow."""
    from gemm_kernels.core import compiler
    from gemm_kernels.core.table import Table
    p = params or K5
    rows = []

    def row(name, promise, regs, spills, h, blocks):
        return {"kernel": name, "__launch_bounds__": promise, "registers": regs,
                "spill bytes": spills, "loop LDL + STL": h.get("LDL", 0) + h.get("STL", 0),
                "loop LDS.128": h.get("LDS.128", 0), "loop FFMA": h.get("FFMA", 0),
                "blocks/SM": blocks}
    for name in (*kernels, "float4"):
        k = _kernel(name)
        threads = k.threads(k.resolve(p))[0]
        s = analysis.summary(name, p)
        rows.append(row(name, f"({threads})", s["registers"], s["spill_stores"],
                        s["loop_histogram"], analysis.kernel_occupancy(name, p).blocks_per_sm))
        if name in kernels:
            c = promised(name, p, min_blocks)
            rows.append(row(name, f"({threads}, {min_blocks})", c["registers"],
                            c["spill_stores"], c["loop_histogram"], c["blocks/SM"]))
    return Table(rows, list(rows[0]), title=f"K5 tile, compiled here for "
                 f"{compiler.static_arch(_kernel('float4'))} by ptxas "
                 f"{compiler.ptxas_version()}: as written, and promised {min_blocks} "
                 f"blocks per SM")


def promise_table() -> Table:
    """Chapter 06's kernel at K5 as written and promised two blocks per SM
    (`__launch_bounds__(256, 2)`, spilling a little), beside `float4`, all timed in one
    run at 4096^3 (chapter 06's capped study): the rate and its range in TFLOP/s, the registers and
    local memory of the timed binary, the blocks per SM they allow, and the rate over
    chapter 06's kernel as written."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import records
    from gemm_kernels.notebook import ch06_tiles
    capped, got = ch06_tiles.capped_run(("tile_2d_reg", "float4"), K5)
    base = got["tile_2d_reg"]["gflops"]["median"]
    rows = [{**ch06_tiles.run_row(label, kernel, r, tflops=True),
             "x chapter 06": f"{r['gflops']['median'] / base:.2f}"}
            for label, kernel, r in (
                ("tile_2d_reg (chapter 06)", "tile_2d_reg", got["tile_2d_reg"]),
                ("tile_2d_reg, __launch_bounds__(256, 2)", "tile_2d_reg", capped),
                ("float4", "float4", got["float4"]))]
    return Table(rows, list(rows[0]), title=(
        f"K5 tile, {'x'.join(map(str, ch06_tiles.CAPPED_SHAPE))}, the three timed in one run "
        f"with cuBLAS in the same process ({records.recording_label()}); local memory: "
        f"what the timed binary reserves per thread, the spilled values with their alignment"))


# ------------------------------------------------------------------ warps or blocks

def warps_or_blocks(size: int = 2048):
    """More warps in one block, or a second block? Chapter 06's kernel at the two steps
    of its path (`ch06_tiles.PATH`, profiled in `ch06_path_stalls`) that keep the patch,
    the FMAs per wavefront and the 16 warps per SM, and group them as one block of 16
    warps (128 x 128 x 8 tile) or two blocks of 8 (64 x 128 x 8): the recorded rate at
    size^3, and at 4096^3 the issue slots used and the barrier and long-scoreboard
    stalls per issued instruction."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import records
    from gemm_kernels.notebook import ch06_tiles
    rate = f"TFLOP/s at {size}"
    rows = []
    for r in ch06_tiles.path_table(size)[1:3]:
        blocks = r["blocks/SM"]
        rows.append({"warps grouped as": f"{blocks} block{'s' if blocks > 1 else ''} of "
                                         f"{r['warps/SM'] // blocks} warps",
                     "params": r["params"], "warps/SM": r["warps/SM"],
                     ch06_tiles.WARP_FFMA: r[ch06_tiles.WARP_FFMA], rate: r[rate],
                     "issue slots used %": r["issue share %"],
                     "barrier": r["barrier"], "long scoreboard": r["long scoreboard"]})
    return Table(rows, list(rows[0]), title=f"chapter 06's kernel, the same 16 warps per SM "
                 f"in one block or two: rates at {size}^3, issue slots and stalls (cycles "
                 f"per issued instruction) at 4096^3 under Nsight Compute; "
                 f"{records.recording_label()}")


# ------------------------------------------------------------------ one block per SM, counted

ONE_PER_SM = "ch07_one_per_sm_caches"
# The columns of `one_per_sm`: heading -> metric, or (metric, divisor). Stalls: cycles a
# warp waits per instruction it issues.
ONE_PER_SM_COLUMNS = {
    "time (ms)": ("gpu__time_duration.sum", 1e6),
    "warps/SM": ("sm__warps_active.avg.pct_of_peak_sustained_active", 100 / WARPS_PER_SM),
    "issue slots used (%)": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "long scoreboard / instr.":
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "not selected / instr.":
        "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio",
    "L1 hit (%)": "l1tex__t_sector_hit_rate.pct",
    "L2 hit (%)": "lts__t_sector_hit_rate.pct",
    "DRAM read (MB)": ("dram__bytes_read.sum", 1e6),
}


def one_per_sm():
    """Chapter 07's kernel at the K5 tile with two blocks per SM and forced to one
    (ONE_PER_SM), profiled one after the other in one run (`ch07_one_per_sm_caches`):
    time under the profiler, warps per SM, issue slots used, the long-scoreboard and
    not-selected stalls per issued instruction, the L1 and L2 hit rates and the bytes
    read from DRAM. The control takes the second block away; this says what else it
    takes (the caches) and what the missing warps cost (idle issue slots)."""
    from gemm_kernels.notebook import evidence
    return _one_run(evidence.counters(ONE_PER_SM, ONE_PER_SM_COLUMNS))


def _one_run(t):
    """A study's counter table with the device and dates of the recording in its caption
    in place of the run's id (the rows of one study come from one run)."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import records
    return Table(list(t), t.columns, title=t.title.split(" — ")[0].rstrip(")")
                 + f"; all rows profiled in one run, {records.recording_label()})")


DEPTH_STALLS = "ch07_depth_stalls"
_STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
DEPTH_COLUMNS = {
    "barrier / instr.": _STALL.format("barrier"),
    "long scoreboard / instr.": _STALL.format("long_scoreboard"),
    "short scoreboard / instr.": _STALL.format("short_scoreboard"),
    "mio throttle / instr.": _STALL.format("mio_throttle"),
    "not selected / instr.": _STALL.format("not_selected"),
    "issue slots used (%)": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "FMA pipe busy (%)": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "shared wavefronts (% of peak)":
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed",
}


def depth_stalls():
    """`float4` at the K5 tile with BK = 8 and BK = 16, profiled in one run
    (`ch07_depth_stalls`): where a warp waits, per issued instruction, the share of
    issue slots used and how busy the FMA pipe and shared memory are. Both depths keep
    two blocks per SM, so the stalls compare directly."""
    from gemm_kernels.notebook import evidence
    return _one_run(evidence.counters(DEPTH_STALLS, DEPTH_COLUMNS))


def depth_check() -> str:
    """The three quantities the model's prediction for BK 8 -> 16 is about (half the
    copies and barriers per FFMA: barrier and long-scoreboard stalls fall, issue slots
    used rise; more conflicts: the mio-throttle wait may grow), before and after, each
    with the direction it moved; the reader's text draws the conclusion."""
    rows = list(depth_stalls())
    if len(rows) != 2 or any(r[c] is None for r in rows for c in DEPTH_COLUMNS):
        return "The depth study is not fully recorded; nothing to conclude."
    a, b = rows
    wait = lambda r: r["barrier / instr."] + r["long scoreboard / instr."]  # noqa: E731
    way = lambda x, y: "falls" if y < x else "rises" if y > x else "stays"  # noqa: E731
    issue, mio = "issue slots used (%)", "mio throttle / instr."
    return (f"{a['step']} -> {b['step']}: barrier + long scoreboard per issued instruction "
            f"{wait(a):.2f} -> {wait(b):.2f} ({way(wait(a), wait(b))}), issue slots used "
            f"{a[issue]:.1f}% -> {b[issue]:.1f}% ({way(a[issue], b[issue])}), mio throttle "
            f"{a[mio]:.2f} -> {b[mio]:.2f} ({way(a[mio], b[mio])}).")


# ------------------------------------------------------------------ the usual mistakes

EXERCISE = "07_float4"
# Three mistakes students make, as (what, text of the solution, what replaces it).
MISTAKES = (
    ("the float4 -> (m, k) mapping written for BK = 8",
     "const int m = f / (BK / 4), k = f % (BK / 4) * 4;", "const int m = f / 2, k = f % 2 * 4;"),
    ("k of a float4 without the * 4",
     "const int m = f / (BK / 4), k = f % (BK / 4) * 4;", "const int m = f / (BK / 4), k = f % (BK / 4);"),
    ("v.y and v.z swapped in the transposed store",
     "As[k + 1][m] = v.y;\n                As[k + 2][m] = v.z;",
     "As[k + 1][m] = v.z;\n                As[k + 2][m] = v.y;"),
)


def mistakes(gpu: bool | None = None):
    """The solution with each of MISTAKES made, graded like a submission."""
    from gemm_kernels.notebook.worked_solutions import graded_mistakes
    return graded_mistakes(EXERCISE, MISTAKES, gpu)


# ------------------------------------------------------------------ the tile's depth

def store_wavefronts(bks=(8, 16), BM: int = 128):
    """The bank model of one 32-bit store of the transposed A tile by warp 0 at each BK
    (no padding): its wavefronts and the least it could cost."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.memory import banks, ch07_09_patterns
    rows = []
    for bk in bks:
        st = banks.analyse(ch07_09_patterns.a_store(BM=BM, BK=bk, PAD=0, s=0))
        rows.append({"BK": bk, "wavefronts": st.wavefronts, "ideal": st.ideal})
    return Table(rows, list(rows[0]), title=f"one STS.32 of the transposed A tile "
                 f"({BM} rows), warp 0, bank model")


def depth_table(bks=(8, 16), size: int = 2048, params=None):
    """`float4` at the K5 tile with only BK changed: registers and blocks per SM, and
    per 1,024 FFMAs of a thread (the same work at every depth) the main loop's trips,
    barriers, global loads, shared stores and other instructions (address arithmetic,
    compares, branches), from the SASS compiled here; then the recorded rate."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import lookup, records
    memory = ("LDG", "STS", "LDS", "BAR")
    rows = []
    for bk in bks:
        p = {**(params or K5), "BK": bk}
        s = analysis.summary("float4", p)
        h = s["loop_histogram"]
        trips = 1024 / h["FFMA"]
        per = lambda fam: trips * sum(v for f, v in h.items() if f.split(".")[0] == fam)
        row = {"BK": bk, "registers": s["registers"],
               "blocks/SM": analysis.kernel_occupancy("float4", p).blocks_per_sm,
               "loop trips": trips, "BAR": per("BAR"), "LDG.128": per("LDG"),
               "shared stores (STS + STS.128)": per("STS"), "LDS.128": per("LDS"),
               "other instructions": trips * sum(v for f, v in h.items() if f != "FFMA"
                                                 and f.split(".")[0] not in memory)}
        try:
            row["TFLOP/s"] = tflops(lookup.recorded("float4", (size,) * 3, p)["gflops"]["median"])
        except LookupError:
            row["TFLOP/s"] = "not recorded"
        rows.append(row)
    return Table(rows, list(rows[0]), title=f"float4, 128 x 128 tile, 8 x 8 per thread: per "
                 f"1,024 FFMAs of a thread (SASS compiled here), and the rate at {size}^3 "
                 f"({records.source()})")
