"""Chapter 02's stall-reason plot: `evidence.stall_plot` for the chapter's profiled study,
without the name of the recording run under it (the chapter names its source once),
with the total wait written at the end of each bar, and "not selected" hatched and named
apart: a warp that was ready but not picked costs its SM nothing, so it is drawn as
time spent, not as time lost."""
from __future__ import annotations

from gemm_kernels.notebook import evidence

NOT_SELECTED = "not selected"


def stall_plot(study: str = "ch02_l1_lines", kernels=("coalesced",)):
    """Stacked bars of the cycles a warp waits per issued instruction, by reason, for the
    steps of `study` that run one of `kernels`, each bar's total at its end. Returns the
    figure."""
    fig = evidence.stall_plot(study, kernels=list(kernels))
    for t in list(fig.texts):
        if t.get_text().startswith("run "):
            t.remove()
    ax = fig.axes[0]
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
    ax.set_xlim(0, max(ends.values()) * 1.12)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=9, frameon=False)
    fig.tight_layout()
    return fig
