"""Interactive explorers for the notebooks. The logic lives in plain classes, tested
without a browser; `.widget()` wraps it in ipywidgets (imported only there)."""
from __future__ import annotations

from . import device, records
from .launch import kernel_of, problems

SIZES = {"gemm": (1024, 2048, 4096), "transpose": (4096, 8192)}
DEFAULT_SIZE = {"gemm": 2048, "transpose": 8192}   # the sizes sweeps are recorded at
CHECK_SHAPE = (257, 263, 129)  # ragged: every live widget run is also checked


def _label(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


class Explorer:
    """Choose a kernel's tunables, press Run, compare GFLOP/s with cuBLAS.

    Live: compiles (once per configuration), checks on a ragged shape, times at `size`.
    Recorded: looks the configuration up in the recorded sweep.
    """

    def __init__(self, kernel, size: int | None = None, fixed: dict | None = None):
        self.kernel = kernel_of(kernel)
        self.family = "gemm" if self.kernel.op in ("sgemm", "dgemm") else "transpose"
        self.size = size or DEFAULT_SIZE[self.family]
        self.fixed = dict(fixed or {})
        self.history: list[tuple[str, float]] = []
        self._cublas: dict[int, float | None] = {}

    @property
    def shape(self):
        return (self.size,) * 3 if self.kernel.op in ("sgemm", "dgemm") else (self.size,) * 2

    def cublas(self) -> float | None:
        if self.size not in self._cublas:
            name = {"sgemm": "cublas", "dgemm": "cublas_dgemm"}.get(self.kernel.op, "device_copy")
            try:
                row = records.measure_or_lookup(name, self.shape)
                self._cublas[self.size] = (row.get("gflops") or row["gbps"])["median"]
            except LookupError:
                self._cublas[self.size] = None
        return self._cublas[self.size]

    def evaluate(self, params: dict) -> dict:
        """{'ok', 'message', 'value'}; never raises for a bad choice."""
        p = {**params, **self.fixed}
        bad = problems(self.kernel, p, self.shape)
        if bad:
            return {"ok": False, "message": "Not a valid configuration: " + "; ".join(bad),
                    "value": None}
        if device.is_live():
            from .check import check
            shape = CHECK_SHAPE if self.kernel.op in ("sgemm", "dgemm") else CHECK_SHAPE[:2]
            c = check(self.kernel, shape, p)
            if c.ok is False:
                return {"ok": False, "message": f"Wrong result on {shape}: {c}", "value": None}
        try:
            row = records.measure_or_lookup(self.kernel.name, self.shape, p)
        except LookupError as e:
            return {"ok": False, "message": str(e), "value": None}
        unit = "GFLOP/s" if "gflops" in row else "GB/s"
        value = row.get("gflops", row.get("gbps"))["median"]
        self.history.append((_label(p), value))
        ref = self.cublas()
        pct = f", {100 * value / ref:.0f}% of the reference" if ref else ""
        return {"ok": True, "value": value,
                "message": f"{_label(p)}: {value:,.0f} {unit}{pct} ({row['source']})"}

    def plot(self, ax=None):
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 0.4 * max(3, len(self.history)) + 1))
        labels = [h[0] for h in self.history]
        ax.barh(range(len(labels)), [h[1] for h in self.history], color="tab:blue")
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ref = self.cublas()
        if ref:
            ax.axvline(ref, color="k", ls="--",
                       label="cuBLAS" if self.kernel.op != "transpose" else "device copy")
            ax.legend(loc="lower right")
        unit = "GB/s" if self.kernel.op in ("transpose", "copy") else "GFLOP/s"
        ax.set_xlabel(f"{unit} at {'x'.join(map(str, self.shape))} ({records.source()})")
        ax.invert_yaxis()
        return ax

    def widget(self, controls=None):
        import ipywidgets as W
        import matplotlib.pyplot as plt
        from IPython.display import display
        names = controls or [p.name for p in self.kernel.params if p.name not in self.fixed]
        specs = {p.name: p for p in self.kernel.params}
        boxes = {n: W.Dropdown(options=list(specs[n].values), value=specs[n].default,
                               description=n, layout=W.Layout(width="180px")) for n in names}
        size = W.Dropdown(options=SIZES[self.family] if device.is_live() else (self.size,),
                          value=self.size,
                          description="size", layout=W.Layout(width="180px"))
        button = W.Button(description="Run", button_style="primary")
        status, out = W.HTML(), W.Output()

        def on_click(_):
            self.size = size.value
            button.disabled = True
            status.value = "running..."
            try:
                res = self.evaluate({n: b.value for n, b in boxes.items()})
            finally:
                button.disabled = False
            color = "green" if res["ok"] else "crimson"
            status.value = f"<span style='color:{color}'>{res['message']}</span>"
            if res["ok"]:
                with out:
                    out.clear_output(wait=True)
                    self.plot()
                    plt.show()

        button.on_click(on_click)
        return W.VBox([W.HBox(list(boxes.values()) + [size, button]), status, out])


def sweep_grid(kernel, x: str, y: str, size: int | None = None, fixed: dict | None = None):
    """A (y values) x (x values) grid of the best recorded or live rate over the other
    tunables, with the reason for each invalid cell. Returns (xs, ys, values, reasons)."""
    import math
    k = kernel_of(kernel)
    size = size or DEFAULT_SIZE["gemm" if k.op in ("sgemm", "dgemm") else "transpose"]
    specs = {p.name: p for p in k.params}
    xs, ys = list(specs[x].values), list(specs[y].values)
    fixed = fixed or {}
    shape = (size,) * 3 if k.op in ("sgemm", "dgemm") else (size,) * 2
    values = [[math.nan] * len(xs) for _ in ys]
    reasons = [[""] * len(xs) for _ in ys]
    for c in k.configurations():
        if any(c[n] != v for n, v in fixed.items()):
            continue
        i, j = ys.index(c[y]), xs.index(c[x])
        bad = problems(k, c, shape)
        if bad:
            reasons[i][j] = reasons[i][j] or bad[0]
            continue
        try:
            row = records.measure_or_lookup(k.name, shape, c)
        except LookupError:
            continue
        v = row.get("gflops", row.get("gbps"))["median"]
        if math.isnan(values[i][j]) or v > values[i][j]:
            values[i][j] = v
            reasons[i][j] = ""
    return xs, ys, values, reasons


def heatmap(kernel, x: str, y: str, size: int | None = None, fixed: dict | None = None, ax=None):
    """Heat map of sweep_grid; invalid cells marked with an x."""
    import math
    import matplotlib.pyplot as plt
    import numpy as np
    xs, ys, values, reasons = sweep_grid(kernel, x, y, size, fixed)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.1 * len(xs) + 2, 0.8 * len(ys) + 1.5))
    data = np.array(values, dtype=float)
    im = ax.imshow(data, cmap="viridis", origin="lower")
    for i in range(len(ys)):
        for j in range(len(xs)):
            v = values[i][j]
            ax.text(j, i, "x" if reasons[i][j] else ("" if math.isnan(v) else f"{v / 1000:.1f}"),
                    ha="center", va="center", color="w" if reasons[i][j] else "k", fontsize=8)
    ax.set_xticks(range(len(xs)), xs)
    ax.set_yticks(range(len(ys)), ys)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    unit = "TB/s" if kernel_of(kernel).op in ("transpose", "copy") else "TFLOP/s"
    ax.set_title(f"{kernel_of(kernel).name}: best {unit} (x = invalid)\n{records.source()}",
                 fontsize=9)
    plt.colorbar(im, ax=ax)
    return ax
