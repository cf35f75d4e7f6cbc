"""Chapter 02's stall-reason plot: `evidence.stall_plot` for the chapter's profiled study,
without the name of the recording run under it (the chapter names its source once),
with the total wait written at the end of each bar, a second panel with each bar as
shares of its own wait (the coalesced kernel's bars are short), and "not selected"
hatched and named
apart: a warp that was ready but not picked costs its SM nothing, so it is drawn as
time spent, not as time lost. Each bar names its kernel, and `meanings` explains exactly
the reasons the plot's legend shows (which the recording decides), so the appendix and
the legend cannot drift apart."""
from __future__ import annotations

from gemm_kernels.notebook import evidence

NOT_SELECTED = "not selected"

# What each stall reason means, in the words of Nsight Compute's Kernel Profiling Guide
# ("Warp Stall Reasons"), for the reasons these kernels' plots can show.
MEANING = {
    "long scoreboard": "the warp needs a value that a global-memory load has not "
                       "delivered yet.",
    "lg throttle": "the queue for local and global memory instructions is full, so the "
                   "warp cannot even hand in its load.",
    "mio throttle": "the queue of the memory input/output unit (shared memory, special "
                    "math functions, some branches) is full.",
    "short scoreboard": "the warp needs a value from the memory input/output unit, "
                        "such as a shared-memory load, that has not arrived yet.",
    "dispatch stall": "the instruction was picked but could not be dispatched to its "
                      "unit in that cycle.",
    "wait": "a short, fixed pause the compiler places between dependent instructions.",
    "math pipe throttle": "the arithmetic unit the instruction needs is busy.",
    "barrier": "the warp waits at __syncthreads() for the other warps of its block.",
    NOT_SELECTED: "the warp was ready, but another warp got the scheduler's slot this "
                  "cycle. The SM loses nothing by it (hatched).",
    "other": "every remaining reason, together.",
}


# A reason is named in the legend (and so in `meanings`) when it takes at least this share
# of some bar's own wait: the short bars of the coalesced kernel must not lose a reason
# that the long naive bars dwarf.
LEGEND_SHARE = 0.01
# The reasons drawn in their own colours (the largest over the bars); the rest are summed
# as "other". The same on both panels, so that one legend serves both.
TOP = 5


def _steps(kernels, study):
    from gemm_kernels.measure import studies
    from gemm_kernels.notebook.evidence import stall_reasons
    return [(s, stall_reasons(r)) for s, r in studies.results(study)
            if s.kernel in kernels and r is not None]


def stall_plot(kernels=("naive", "coalesced"), study: str = "ch02_l1_lines"):
    """Stacked bars of the cycles a warp waits per issued instruction, by reason, for the
    steps of `study` (the chapter's profiled run) that run one of `kernels`, each bar's
    total at its end (left panel); the same bars as shares of each bar's own wait (right
    panel), so that the reasons of the short coalesced bars can be read. The reasons are
    stacked in the series' fixed order on both panels. A reason is named in the legend,
    and so in `meanings`, when it takes at least LEGEND_SHARE of some bar. Returns the
    figure."""
    import matplotlib.pyplot as plt
    got = _steps(kernels, study)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 0.55 * max(len(got), 1) + 1.8),
                                  sharey=True, gridspec_kw={"width_ratios": [3, 2]})
    evidence.stall_plot(study, kernels=list(kernels), ax=ax, top=TOP, run_line=False,
                        fixed_order=True)
    if not got:
        ax2.set_axis_off()
        return fig
    shares = []
    for s, st in got:
        total = sum(v for k, v in st.items() if k != "selected")
        shares.append((s.label, {k: 100 * v / total for k, v in st.items()} if total else st))
    evidence.stall_bars(ax2, shares, TOP, fixed_order=True)
    ax2.set_xlabel("% of each bar's wait")
    ax2.set_xlim(0, 100)
    fig.suptitle(ax.get_title(), fontsize=10)
    ax.set_title("in cycles", fontsize=9)
    ax2.set_title("the same bars, as shares of each bar's wait", fontsize=9)
    ax.set_yticklabels([s.label if s.label.startswith(s.kernel) else f"{s.kernel}, {s.label}"
                        for s, _ in got], fontsize=9)           # name the kernel on every bar
    for a in (ax, ax2):
        for c in [c for c in a.containers if hasattr(c, "patches")]:
            if c.get_label() == NOT_SELECTED:
                for p in c.patches:
                    p.set_hatch("///")
                    p.set_edgecolor(p.get_facecolor())
                    p.set_facecolor("white")
            elif c.get_label() == "other":      # dotted: its light grey is close to
                for p in c.patches:              # dispatch stall's darker grey
                    p.set_hatch("..")
                    p.set_edgecolor("0.45")
    ends = {}
    bars = [c for c in ax.containers if hasattr(c, "patches")]
    for c in bars:
        for p in c.patches:
            y = round(p.get_y() + p.get_height() / 2, 3)
            ends[y] = max(ends.get(y, 0.0), p.get_x() + p.get_width())
    for y, end in ends.items():
        ax.text(end + 0.01 * max(ends.values()), y, f"{end:.0f} in all", va="center",
                fontsize=8)
    ax.set_xlim(0, max(ends.values()) * 1.2)           # room for the longest total
    share_bars = [c for c in ax2.containers if hasattr(c, "patches")]
    for c, c2 in zip(bars, share_bars):
        shown = max(p.get_width() for p in c2.patches) >= 100 * LEGEND_SHARE
        label = c.get_label()
        if label == NOT_SELECTED:
            label = f"{NOT_SELECTED} (ready, another warp issued)"
        c.set_label(label if shown else "_" + label)   # "_": not in the legend
        c2.set_label("_" + label)
    for a in (ax, ax2):
        if a.get_legend():
            a.get_legend().remove()
    ax2.legend(*ax.get_legend_handles_labels(), loc="upper left", bbox_to_anchor=(1.02, 1),
               fontsize=9, frameon=False)
    fig.tight_layout()
    return fig


def reasons(fig) -> list[str]:
    """The stall reasons drawn in a figure of `stall_plot`, in the legend's order."""
    return [c.get_label().split(" (")[0] for c in fig.axes[0].containers
            if hasattr(c, "patches") and not c.get_label().startswith("_")]


def meanings(fig):
    """The meaning of each reason the figure's legend shows, one line each, and of the
    one it leaves out ("selected": the cycle the warp issues)."""
    from gemm_kernels.notebook.display import Text
    lines = [f"{r}: {MEANING.get(r, 'see the Kernel Profiling Guide, Warp Stall Reasons.')}"
             for r in reasons(fig)]
    lines.append("selected (not drawn): the cycle in which the warp does issue its "
                 "instruction.")
    return Text("\n".join(lines))

