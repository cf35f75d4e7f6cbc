"""Chapter 09's explorer: the capstone's tunables, what ptxas makes of them, and their
rate next to cuBLAS.

`CapstoneExplorer` is the series' `widgets.Explorer` (validation against the registry,
the rate from `lookup.measure_or_lookup` with its same-run cuBLAS, the history plot)
with the static analysis added to every answer: the registers ptxas gives the
configuration, the blocks that fit on an SM with them, and the main loop's FFMA share.
The warp tile is one control of valid (WM, WN) pairs, since the two only make sense
together. The logic is plain Python, tested without a browser; `widget()` wraps it.
"""
from __future__ import annotations

from collections.abc import Mapping

from gemm_kernels.core import analysis, device
from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.core.launch import problems
from gemm_kernels.measure import lookup, records
from gemm_kernels.notebook.widgets import SIZES, Explorer, panel

KERNEL = "capstone"


def warp_pairs() -> list[tuple[int, int]]:
    """The (WM, WN) pairs that some valid configuration uses."""
    return sorted({(c["WM"], c["WN"]) for c in KERNELS[KERNEL].valid_configurations()})


def recorded_sizes() -> tuple[int, ...]:
    """Square sizes at which the recording holds capstone rates (the recorded sweeps)."""
    rec = records.current()
    if rec is None:
        return ()
    return tuple(sorted({r["shape"][0] for r in rec.find(KERNEL) if "gflops" in r
                         and len(set(r["shape"])) == 1}))


class CapstoneExplorer(Explorer):
    """Choose the capstone's tunables; see registers, blocks per SM and FFMA share from
    the static analysis here, and GFLOP/s with % of cuBLAS (live, or from the recorded
    sweep)."""

    def __init__(self, size: int | None = None):
        super().__init__(KERNEL, size)

    def static(self, params: dict) -> str:
        """Registers (of the binary that was timed, where the recording has it; else
        ptxas here), the resident blocks they allow and what limits them, and the FFMA
        share of the main loop, for a valid configuration."""
        p = self.kernel.resolve(params)
        s = analysis.summary(self.kernel, p)
        timed = (lookup.binary(self.kernel, p, self.shape) or {}).get("registers")
        occ = analysis.kernel_occupancy(self.kernel, p, registers=timed)
        loop = s["loop_histogram"]
        share = loop.get("FFMA", 0) / max(1, sum(loop.values()))
        regs = (f"{timed} registers (in the compiled kernel that was timed; ptxas here "
                f"gives {s['registers']})"
                if timed is not None and timed != s["registers"] else
                f"{occ.registers_per_thread} registers")
        blocks = f"{occ.blocks_per_sm} block{'s' if occ.blocks_per_sm != 1 else ''}"
        return (f"{regs}, {occ.threads_per_block} threads: {blocks} per SM "
                f"(limited by {occ.limiter}); main loop {share:.0%} FFMA")

    def evaluate(self, params: dict) -> dict:
        """{'ok', 'message', 'value', 'static'}: the explorer's answer with the static
        analysis in front of it whenever the configuration is valid, recorded or not.
        A configuration the registry refuses gets the registry's message and no static
        part; nothing raises for a choice made in the controls."""
        if not isinstance(params, Mapping) or problems(self.kernel, dict(params), self.shape):
            return {**super().evaluate(params), "static": None}
        p = self.kernel.resolve(params)     # the answer names every tunable, defaults too
        res = super().evaluate(p)
        static = self.static(p)
        return {**res, "static": static, "message": f"{static}. {res['message']}"}

    def widget(self):
        import html
        import io

        import ipywidgets as W
        import matplotlib.pyplot as plt
        specs = {p.name: p for p in self.kernel.params}
        lay = W.Layout(width="170px")
        boxes = {n: W.Dropdown(options=list(specs[n].values), value=specs[n].default,
                               description=n, layout=lay)
                 for n in ("BN", "BK", "STAGES", "GROUP", "MINB", "HOIST")}
        default = (specs["WM"].default, specs["WN"].default)
        warp = W.Dropdown(options=[(f"{wm} x {wn}", (wm, wn)) for wm, wn in warp_pairs()],
                          value=default, description="WM x WN", layout=lay)
        sizes = SIZES["gemm"] if device.is_live() else (recorded_sizes() or (self.size,))
        size = W.Dropdown(options=sizes, value=self.size if self.size in sizes else sizes[-1],
                          description="size", layout=lay)
        button = W.Button(description="Run", button_style="primary")
        # Text and picture go into HTML and Image widgets (nothing printed), so a
        # headless run sees no stray output.
        status, image = W.HTML(), W.Image(format="png")

        def on_click(_):
            self.size = size.value
            button.disabled = True
            try:
                wm, wn = warp.value
                res = self.evaluate({**{n: b.value for n, b in boxes.items()},
                                     "WM": wm, "WN": wn})
            finally:
                button.disabled = False
            colour = "green" if res["ok"] else "crimson"
            status.value = f"<span style='color:{colour}'>{html.escape(res['message'])}</span>"
            if self.history:
                ax = self.plot()
                buf = io.BytesIO()
                ax.figure.savefig(buf, format="png", dpi=80, bbox_inches="tight")
                plt.close(ax.figure)
                image.value = buf.getvalue()

        button.on_click(on_click)
        controls = [boxes["BN"], warp, boxes["BK"], boxes["STAGES"], boxes["GROUP"],
                    boxes["MINB"], boxes["HOIST"], size]
        return panel([W.HBox(controls[:4]), W.HBox(controls[4:] + [button]), status, image],
                     self.about([c.description for c in controls]))


def capstone_explorer(size: int | None = None):
    """The capstone explorer as a widget (see `CapstoneExplorer`)."""
    return CapstoneExplorer(size).widget()
