"""Chapter 02's stall-reason plot: `evidence.stall_plot` for the chapter's profiled study,
without the name of the recording run under it (the chapter names its source once),
with the total wait written at the end of each bar, and "not selected" hatched and named
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


# A reason drawn thinner than this share of the longest bar cannot be read off the plot.
LEGEND_SHARE = 0.01


def stall_plot(kernels=("naive", "coalesced"), study: str = "ch02_l1_lines"):
    """Stacked bars of the cycles a warp waits per issued instruction, by reason, for the
    steps of `study` (the chapter's profiled run) that run one of `kernels`, each bar's
    total at its end. A reason too thin to read on any bar (under LEGEND_SHARE of the
    longest: a pixel or two wide) is left out of the legend, and so out of `meanings`.
    Returns the figure."""
    from gemm_kernels.measure import studies
    fig = evidence.stall_plot(study, kernels=list(kernels))
    ax = fig.axes[0]
    steps = [s for s, r in studies.results(study) if s.kernel in kernels and r is not None]
    if len(steps) == len(ax.get_yticks()):      # name the kernel on every bar
        ax.set_yticklabels([s.label if s.label.startswith(s.kernel) else
                            f"{s.kernel}, {s.label}" for s in steps], fontsize=9)
    for t in list(fig.texts):
        if t.get_text().startswith("run "):
            t.remove()
    bars = [c for c in ax.containers if hasattr(c, "patches")]
    for c in bars:
        if c.get_label() == NOT_SELECTED:
            c.set_label(f"{NOT_SELECTED} (ready, another warp issued)")
            for p in c.patches:
                p.set_hatch("///")
                p.set_edgecolor(p.get_facecolor())
                p.set_facecolor("white")
    ends = {}
    for c in bars:
        for p in c.patches:
            y = round(p.get_y() + p.get_height() / 2, 3)
            ends[y] = max(ends.get(y, 0.0), p.get_x() + p.get_width())
    for y, end in ends.items():
        ax.text(end + 0.01 * max(ends.values()), y, f"{end:.0f} in all", va="center",
                fontsize=8)
    ax.set_xlim(0, max(ends.values()) * 1.2)           # room for the longest total
    for c in bars:
        if max(p.get_width() for p in c.patches) < LEGEND_SHARE * max(ends.values()):
            c.set_label("_" + c.get_label())            # invisible here: not in the legend
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=9, frameon=False)
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
