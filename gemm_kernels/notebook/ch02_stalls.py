"""Chapter 02's stall-reason plot: `evidence.stall_plot` for the chapter's profiled study,
without the name of the recording run under it (the chapter names its source once)."""
from __future__ import annotations

from gemm_kernels.notebook import evidence


def stall_plot(study: str = "ch02_l1_lines", kernels=("coalesced",)):
    """Stacked bars of the cycles a warp waits per issued instruction, by reason, for the
    steps of `study` that run one of `kernels`. Returns the figure."""
    fig = evidence.stall_plot(study, kernels=list(kernels))
    for t in list(fig.texts):
        if t.get_text().startswith("run "):
            t.remove()
    return fig
