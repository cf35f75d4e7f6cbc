"""Interactive explorers for the notebooks. The logic lives in plain classes, tested
without a browser; `.widget()` wraps it in ipywidgets (imported only there)."""
from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from gemm_kernels.core import device, style

from gemm_kernels.measure import lookup, records
from gemm_kernels.core.launch import DTYPES, kernel_of, problems
from gemm_kernels.core.registry import int_problem

SIZES = {"gemm": (1024, 2048, 4096), "transpose": (4096, 8192)}
DEFAULT_SIZE = {"gemm": 2048, "transpose": 8192}   # the sizes sweeps are recorded at
CHECK_SHAPE = (257, 263, 129)  # ragged: every live widget run is also checked
SCALES = ("auto", "log", "linear")   # the explorer chart's rate axis (Explorer.log_axis)


def _label(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def _size(size, default: int) -> int:
    """`size` (None: `default`), refused unless a positive integer: 0 must not quietly
    become the default, and a float or a bool is a mistake, not a size."""
    if size is None:
        return default
    bad = int_problem("size", size)
    if bad:
        raise ValueError(bad)
    return int(size)


@cache
def _panel_class():
    import ipywidgets as W

    class Panel(W.VBox):
        """A VBox whose plain-text form is a sentence, not the widget's repr."""

        def __init__(self, children, about: str):
            super().__init__(children)
            self.about = about

        def _repr_mimebundle_(self, **kwargs):
            return {**super()._repr_mimebundle_(**kwargs), "text/plain": self.about}

    return Panel


def panel(children, about: str):
    """The widget of an explorer: a VBox of `children`. A notebook saved with its outputs
    shows a widget only where a kernel runs it; GitHub, nbviewer or a reader without
    Python show its text/plain form instead, which is `about` (what the widget does)
    rather than `VBox(children=(HBox(...`."""
    return _panel_class()(children, about=f"[interactive widget: run the notebook to use it] {about}")


class Explorer:
    """Choose a kernel's tunables, press Run, compare GFLOP/s with cuBLAS.

    Live: compiles (once per configuration), checks on a ragged shape, times at `size`.
    Recorded: looks the configuration up in the recorded sweep.
    """

    def __init__(self, kernel, size: int | None = None, fixed: dict | None = None,
                 note=None, rec=None):
        self.kernel = kernel_of(kernel)
        self.rec = rec     # recorded mode: the recording to read (default: the one shown)
        self.family = "gemm" if self.kernel.op in DTYPES else "transpose"
        self.size = _size(size, DEFAULT_SIZE[self.family])
        self.fixed = dict(fixed or {})
        self.note = note   # optional: params -> a line added to each result (e.g. counters)
        # (label, rate, the reference's rate measured beside it in the same run or None),
        # one entry per configuration, labelled with all its tunables: running one again
        # replaces its entry where it stands, so the chart never shows it twice.
        self.history: list[tuple[str, float, float | None]] = []

    @property
    def shape(self):
        return (self.size,) * 3 if self.kernel.op in DTYPES else (self.size,) * 2

    def evaluate(self, params: dict) -> dict:
        """{'ok', 'message', 'value'}; never raises for a bad choice: a wrong name, type
        or value comes back as the message, so a student's choice never stops the
        notebook."""
        if not isinstance(params, Mapping):
            return {"ok": False, "value": None,
                    "message": f"Choose the tunables as a dict, e.g. "
                               f"{self.kernel.defaults()}; got {params!r}"}
        p = {**params, **self.fixed}
        bad = problems(self.kernel, p, self.shape)
        if bad:
            return {"ok": False, "message": "Not a valid configuration: " + "; ".join(bad),
                    "value": None}
        if device.is_live():
            from gemm_kernels.measure.check import check
            shape = CHECK_SHAPE if self.kernel.op in DTYPES else CHECK_SHAPE[:2]
            c = check(self.kernel, shape, p)
            if c.ok is False:
                return {"ok": False, "message": f"Wrong result on {shape}: {c}", "value": None}
        try:
            row = lookup.measure_or_lookup(self.kernel.name, self.shape, p, rec=self.rec)
        except LookupError as e:
            return {"ok": False, "message": str(e), "value": None}
        unit = "GFLOP/s" if "gflops" in row else "GB/s"
        value = row.get("gflops", row.get("gbps"))["median"]
        ref = row.get("reference")
        # Live, the size can change between runs: a configuration at another size is
        # another bar, named with its size.
        label = _label(self.kernel.resolve(p)) + \
            ("" if self.size == DEFAULT_SIZE[self.family] else f" at {self.size}")
        entry = (label, value,
                 (ref.get("gflops") or ref.get("gbps"))["median"] if ref else None)
        same = [i for i, h in enumerate(self.history) if h[0] == entry[0]]
        if same:
            self.history[same[0]] = entry
        else:
            self.history.append(entry)
        share = lookup.share(row)
        pct = f", {share:.0f}% of {ref['kernel']} in the same run" if share is not None else \
            ", no reference measured in the same run"
        extra = f"; {self.note(p)}" if self.note else ""
        return {"ok": True, "value": value,
                "message": f"{_label(p)}: {value:,.0f} {unit}{pct} ({row['source']}){extra}"}

    def _rates(self) -> list[float]:
        """Every rate the chart shows: the bars and their references' marks."""
        return [r for h in self.history for r in h[1:] if r]

    def log_axis(self, scale: str = "auto") -> bool:
        """Whether the chart's rate axis is logarithmic: `scale` 'log' or 'linear', or
        'auto': log when the rates shown (bars and references) span more than a factor
        of 10, where a linear axis would shrink the slow configurations to slivers."""
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
        if scale != "auto":
            return scale == "log"
        rates = self._rates()
        return bool(rates) and max(rates) > 10 * min(rates)

    def plot(self, ax=None, scale: str = "auto"):
        """Horizontal bars of the configurations run so far, each with its reference's
        mark; the rate axis as `log_axis(scale)` says."""
        import matplotlib.pyplot as plt
        log = self.log_axis(scale)
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 0.4 * max(3, len(self.history)) + 1))
        labels = [h[0] for h in self.history]
        rates = self._rates()
        # On a log axis a bar cannot start at 0: all start a little left of the slowest
        # rate shown, so their lengths still order them.
        left = min(rates) / 2 if log and rates else 0
        ax.barh(range(len(labels)), [h[1] - left for h in self.history], left=left,
                color="tab:blue")
        if log:
            ax.set_xscale("log")
            ax.set_xlim(left, max(rates) * 1.5)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        # Each bar's own reference, measured beside it: a mark per bar, not one line.
        refs = [(i, h[2]) for i, h in enumerate(self.history) if h[2]]
        if refs:
            ax.scatter([r for _, r in refs], [i for i, _ in refs], marker="|", s=400,
                       color="k", label=("cuBLAS" if self.kernel.op in DTYPES
                                         else "device copy") + ", same run")
            # Above the axes, right-aligned: inside it would hide the marks of the
            # fastest bars.
            ax.legend(loc="lower right", bbox_to_anchor=(1, 1), borderaxespad=0.3, fontsize=8)
        unit = "GB/s" if self.kernel.op in ("transpose", "copy") else "GFLOP/s"
        where = self.rec.label if self.rec is not None and not device.is_live() \
            else records.source()
        ax.set_xlabel(f"{unit} at {'x'.join(map(str, self.shape))}, {'log' if log else 'linear'}"
                      f" axis ({where})")
        ax.invert_yaxis()
        return ax

    def widget(self, controls=None):
        import ipywidgets as W
        import matplotlib.pyplot as plt
        names = controls or [p.name for p in self.kernel.params if p.name not in self.fixed]
        specs = {p.name: p for p in self.kernel.params}
        boxes = {n: W.Dropdown(options=list(specs[n].values), value=specs[n].default,
                               description=n, layout=W.Layout(width="180px")) for n in names}
        size = W.Dropdown(options=SIZES[self.family] if device.is_live() else (self.size,),
                          value=self.size,
                          description="size", layout=W.Layout(width="180px"))
        scale = W.Dropdown(options=SCALES, value="auto", description="axis",
                           layout=W.Layout(width="180px"))
        button = W.Button(description="Run", button_style="primary")
        status, out = W.HTML(), W.Output()

        def draw(_=None):
            if not self.history:
                return
            with out:
                out.clear_output(wait=True)
                self.plot(scale=scale.value)
                plt.show()

        def on_click(_):
            self.size = size.value
            button.disabled = True
            status.value = "running..."
            try:
                res = self.evaluate({n: b.value for n, b in boxes.items()})
            except Exception as e:   # e.g. a live compile or launch failure: a message
                res = {"ok": False, "value": None,
                       "message": f"Could not run it: {type(e).__name__}: {e}"}
            finally:
                button.disabled = False
            color = "green" if res["ok"] else "crimson"
            status.value = f"<span style='color:{color}'>{res['message']}</span>"
            if res["ok"]:
                draw()

        button.on_click(on_click)
        scale.observe(draw, names="value")
        return panel([W.HBox(list(boxes.values()) + [size, scale, button]), status, out],
                     self.about(names))

    def about(self, names) -> str:
        """What the widget does, in one sentence (its text where no kernel runs it)."""
        unit, ref = ("GFLOP/s", "cuBLAS") if self.kernel.op in DTYPES else \
            ("GB/s", "the device copy")
        where = "timed live" if device.is_live() else "from the recorded measurements"
        return (f"{self.kernel.name} explorer: choose {', '.join(names)} and press Run; "
                f"each choice adds a bar of its {unit} ({where}) to a chart, with {ref}'s "
                f"rate beside it, or shows why the choice is not valid.")


def sweep_grid(kernel, x: str, y: str, size: int | None = None, fixed: dict | None = None):
    """A (y values) x (x values) grid of the best recorded or live rate over the other
    tunables, with the reason for each invalid cell. Returns (xs, ys, values, reasons)."""
    import math
    k = kernel_of(kernel)
    size = _size(size, DEFAULT_SIZE["gemm" if k.op in DTYPES else "transpose"])
    specs = {p.name: p for p in k.params}
    for axis in (x, y):
        if axis not in specs:
            raise ValueError(f"{k.name} has no tunable {axis!r}; tunables are {sorted(specs)}")
    xs, ys = list(specs[x].values), list(specs[y].values)
    k.resolve(fixed)     # unknown names and wrong types are refused here, not skipped
    fixed = fixed or {}
    shape = (size,) * 3 if k.op in DTYPES else (size,) * 2
    values = [[math.nan] * len(xs) for _ in ys]
    reasons = [[""] * len(xs) for _ in ys]
    for c in k.configurations():
        if any(c[n] != v for n, v in fixed.items()):
            continue
        i, j = ys.index(c[y]), xs.index(c[x])
        bad = problems(k, c, shape)
        if bad:
            # A cell is invalid only while no configuration of it has a rate.
            if math.isnan(values[i][j]):
                reasons[i][j] = reasons[i][j] or bad[0]
            continue
        try:
            row = lookup.recorded(k.name, shape, c)
        except LookupError:
            continue
        v = row.get("gflops", row.get("gbps"))["median"]
        if math.isnan(values[i][j]) or v > values[i][j]:
            values[i][j] = v
            reasons[i][j] = ""
    return xs, ys, values, reasons


def heatmap(kernel, x: str, y: str, size: int | None = None, fixed: dict | None = None, ax=None,
            vmin: float | None = None, vmax: float | None = None, invalid: str = "x"):
    """Heat map of sweep_grid; invalid cells marked with an x (`invalid="x"`) or hatched
    grey (`invalid="hatch"`). `vmin`, `vmax` (in the colour bar's unit) give several maps
    one colour scale."""
    import math
    import matplotlib.pyplot as plt
    import numpy as np
    xs, ys, values, reasons = sweep_grid(kernel, x, y, size, fixed)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.1 * len(xs) + 2, 0.8 * len(ys) + 1.5))
    # Cells and colour bar in the same unit (TFLOP/s or TB/s); an invalid cell, left
    # blank by imshow, gets a dark "x" on the white background. A rate's text is white
    # or black by the luminance of the colour under it.
    data = np.array(values, dtype=float) / 1000
    im = ax.imshow(data, cmap="viridis", origin="lower", vmin=vmin, vmax=vmax)
    for i in range(len(ys)):
        for j in range(len(xs)):
            v = data[i][j]
            if reasons[i][j] and invalid == "hatch":
                from matplotlib.patches import Rectangle
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="0.85",
                                       hatch="///", edgecolor="0.55", linewidth=0))
            elif reasons[i][j]:
                ax.text(j, i, "x", ha="center", va="center", fontsize=9, color="0.3")
            elif not math.isnan(v):
                ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=9,
                        color=style.text_colour(im.cmap(im.norm(v))))
    ax.set_xticks(range(len(xs)), xs)
    ax.set_yticks(range(len(ys)), ys)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    unit = "TB/s" if kernel_of(kernel).op in ("transpose", "copy") else "TFLOP/s"
    # The key to the invalid cells' mark only where the map has one.
    mark = "hatched" if invalid == "hatch" else "x"
    key = f" ({mark} = invalid)" if any(any(r) for r in reasons) else ""
    ax.set_title(f"{kernel_of(kernel).name}: best {unit}{key}\n{records.recording_label()}",
                 fontsize=9)
    plt.colorbar(im, ax=ax, label=f"best {unit}")
    return ax


class BankExplorer:
    """One warp-wide shared-memory load, drawn lane by bank: choose the address pattern
    (stride in elements, which lanes share an address, padding), the access width (4, 8
    or 16 bytes per lane) and which lanes are inactive; see the phases, the merging
    rule that applies, and the wavefront count. Pure CPU: the bank model of
    `gemm_kernels.banks`.

    Lane i reads element e(i) * stride of an array of `width`-byte elements, where e(i)
    is i ("none" shared), i // 2 ("i^1": lanes i and i^1 share an address),
    (i & 1) | (i >> 2) << 1 ("i^2": lanes i and i^2 share), or 0 ("all": a broadcast).
    With padding, every `row_elems` elements are followed by `padding` unused ones.
    """

    SHARES = ("none", "i^1", "i^2", "all")
    INACTIVE = {"none": lambda i: True, "odd lanes": lambda i: i % 2 == 0,
                "lanes 16-31": lambda i: i < 16, "lanes 8-31": lambda i: i < 8,
                "lanes 1, 3 of each 4": lambda i: i % 4 in (0, 2)}
    WIDTHS = (4, 8, 16)
    STRIDES = (0, 1, 2, 3, 4, 8, 9, 16, 17, 32, 33)
    PADDINGS = (0, 1, 2, 3, 4)

    def __init__(self, row_elems: int = 32):
        bad = int_problem("row_elems", row_elems)
        if bad:
            raise ValueError(bad)
        self.row_elems = row_elems

    @staticmethod
    def element(lane: int, share: str) -> int:
        if share == "none":
            return lane
        if share == "i^1":
            return lane // 2
        if share == "i^2":
            return (lane & 1) | ((lane >> 2) << 1)
        if share == "all":
            return 0
        raise ValueError(f"share must be one of {BankExplorer.SHARES}, got {share!r}")

    def addresses(self, stride: int = 1, width: int = 4, padding: int = 0,
                  share: str = "none", inactive: str = "none") -> list:
        from gemm_kernels.memory import banks
        if not isinstance(inactive, str) or inactive not in self.INACTIVE:
            raise ValueError(f"inactive must be one of {tuple(self.INACTIVE)}, got {inactive!r}")
        banks.check_width(width)
        for bad in (int_problem("stride", stride, 0), int_problem("padding", padding, 0)):
            if bad:
                raise ValueError(bad)
        out = []
        for i in range(banks.WARP):
            e = self.element(i, share) * stride
            e += (e // self.row_elems) * padding
            out.append(e * width if self.INACTIVE[inactive](i) else None)
        return out

    def evaluate(self, stride: int = 1, width: int = 4, padding: int = 0,
                 share: str = "none", inactive: str = "none") -> dict:
        """{'ok', 'message', 'analysis'}; a bad choice gives a message, never a traceback."""
        from gemm_kernels.memory import banks
        try:
            an = banks.analyse(self.addresses(stride, width, padding, share, inactive), width)
        except ValueError as e:
            return {"ok": False, "message": str(e), "analysis": None}
        return {"ok": True, "message": self.describe(an), "analysis": an}

    @staticmethod
    def describe(an) -> str:
        lines = [an.summary()]
        for k, ph in enumerate(an.phases):
            if not ph.active:
                lines.append(f"  phase {k}: lanes {ph.lanes[0]}-{ph.lanes[-1]}, no active lane")
                continue
            worst = max(range(len(ph.words_per_bank)), key=lambda b: ph.words_per_bank[b])
            lines.append(f"  phase {k}: lanes {ph.lanes[0]}-{ph.lanes[-1]}"
                         f"{' (merged)' if ph.merged else ''}, {ph.wavefronts} wavefront(s); "
                         f"busiest bank {worst} serves {ph.degree} distinct word(s)")
        return "\n".join(lines)

    def plot(self, an, ax=None):
        from gemm_kernels.memory import banks
        return banks.plot_banks(an, ax=ax)

    def widget(self, stride: int = 1, width: int = 4, padding: int = 0,
               share: str = "none", inactive: str = "none"):
        import ipywidgets as W
        import matplotlib.pyplot as plt
        lay = W.Layout(width="190px")
        c = {"stride": W.Dropdown(options=self.STRIDES, value=stride, description="stride", layout=lay),
             "width": W.Dropdown(options=self.WIDTHS, value=width, description="bytes/lane", layout=lay),
             "padding": W.Dropdown(options=self.PADDINGS, value=padding, description="padding", layout=lay),
             "share": W.Dropdown(options=self.SHARES, value=share, description="shared by", layout=lay),
             "inactive": W.Dropdown(options=list(self.INACTIVE), value=inactive,
                                    description="inactive", layout=lay)}
        # The message and the picture go into HTML and Image widgets, not through an
        # Output widget: nothing is printed, so headless runs (nbval) see no stray output.
        import html
        import io
        text, image = W.HTML(), W.Image(format="png")

        def draw(_=None):
            res = self.evaluate(**{k: w.value for k, w in c.items()})
            text.value = f"<pre>{html.escape(res['message'])}</pre>"
            if not res["ok"]:
                image.value = b""
                return
            ax = self.plot(res["analysis"])
            buf = io.BytesIO()
            ax.figure.savefig(buf, format="png", dpi=80, bbox_inches="tight")
            plt.close(ax.figure)
            image.value = buf.getvalue()

        for w in c.values():
            w.observe(draw, names="value")
        draw()
        return panel([W.HBox(list(c.values())[:3]), W.HBox(list(c.values())[3:]), text, image],
                     "bank explorer: choose the stride, bytes per lane, padding, which lanes "
                     "share an address and which are inactive; it draws one warp's "
                     "shared-memory load lane by bank and counts its phases and wavefronts.")
