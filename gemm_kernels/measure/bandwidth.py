"""Chapter 10's yardstick: GB/s of copies and transposes next to the device copy.

GB/s = (bytes read + bytes written) / time. Every kernel is timed interleaved with the
device-to-device copy (cudaMemcpyAsync) of the same bytes as its input, in the same
process (live, or when the recording was made), and shown as a percentage of that copy.
"""
from __future__ import annotations

from gemm_kernels.measure import lookup, records

REFERENCE = "device_copy"


def table(kernels, shapes=((8192, 8192), (8191, 4097)), types=("float",),
          params: dict | None = None):
    """A Table: per shape, the device copy timed on its own, then each kernel (and
    type) with its GB/s (median, min, max over the repeats), the device copy of the same
    bytes timed beside it, and the kernel's % of that copy ('-' where the row has none,
    as in recordings before schema 2). Configurations missing from the recording are
    left out. An entry of `kernels` is a kernel's name, or (label, name, parameters) to
    time one kernel in several configurations: the row's 'kernel' is then the label."""
    from gemm_kernels.core.table import Table
    rows = []
    for shape in shapes:
        try:
            r = lookup.measure_or_lookup(REFERENCE, tuple(shape))
            rows.append({"kernel": REFERENCE, "T": "float", "shape": list(shape),
                         "GB/s": r["gbps"]["median"], "min": r["gbps"]["min"],
                         "max": r["gbps"]["max"], "% of device copy": 100.0})
        except LookupError:
            pass
        for entry in kernels:
            label, name, extra = entry if isinstance(entry, tuple) else (entry, entry, {})
            for t in types:
                p = {**(params or {}).get(name, {}), **extra, "T": t}
                try:
                    r = lookup.measure_or_lookup(name, tuple(shape), p)
                except LookupError:
                    continue
                g = r["gbps"]
                rows.append({"kernel": label, "T": t, "shape": list(shape), "GB/s": g["median"],
                             "min": g["min"], "max": g["max"],
                             "copy same run": r.get("reference", {}).get("gbps", {}).get("median"),
                             "% of device copy": lookup.share(r)})
    return Table(rows, ["kernel", "T", "shape", "GB/s", "min", "max", "copy same run",
                        "% of device copy"],
                 title=f"GB/s = (bytes read + bytes written) / time, {records.source()}",
                 pct_decimals=1)


def best(tab, shape, T="float", op_kernels=None) -> dict | None:
    """The fastest row of `tab` at `shape` and type T among `op_kernels` (default: every
    kernel whose name starts with 'transpose')."""
    rows = [r for r in tab if list(r["shape"]) == list(shape) and r["T"] == T
            and (r["kernel"] in op_kernels if op_kernels else r["kernel"].startswith("transpose"))]
    return max(rows, key=lambda r: r["GB/s"]) if rows else None


def plot(tab, ax=None):
    """Horizontal bars of GB/s, one per kernel, shape and type. Each bar carries a black
    tick at the device copy timed beside it (its own reference, not one line for all) and
    its % of that copy. Colours: one hue per shape, light for float and dark for double."""
    import matplotlib.pyplot as plt
    groups = list(dict.fromkeys((tuple(r["shape"]), r["T"]) for r in tab
                                if r["kernel"] != REFERENCE))
    shapes = list(dict.fromkeys(shape for shape, _ in groups))
    names = list(dict.fromkeys(r["kernel"] for r in tab if r["kernel"] != REFERENCE))
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.32 * len(names) * len(groups) + 1.6))
    h = 0.8 / max(len(groups), 1)
    # tab20 holds pairs of a dark and a light shade of one hue: a hue per shape.
    cmap = plt.get_cmap("tab20")
    top = max((max(r["GB/s"], r.get("copy same run") or 0) for r in tab), default=1)
    for g, (shape, t) in enumerate(groups):
        pair = 2 * (shapes.index(shape) % 10)
        colour = cmap(pair if t == "double" else pair + 1)
        rows = {r["kernel"]: r for r in tab if tuple(r["shape"]) == shape and r["T"] == t}
        ys = [i + g * h for i, n in enumerate(names) if n in rows]
        got = [rows[n] for n in names if n in rows]
        ax.barh(ys, [r["GB/s"] for r in got], height=h, color=colour,
                label=f"{'x'.join(map(str, shape))} {t}")
        for y, r in zip(ys, got):
            ref = r.get("copy same run")
            if ref:
                ax.plot([ref, ref], [y - h / 2, y + h / 2], color="black", lw=1.5)
            pct = r.get("% of device copy")
            if pct is not None:
                ax.text(max(r["GB/s"], ref or 0) + 0.01 * top, y, f"{pct:.0f}%",
                        va="center", fontsize=8, color="0.25")
    ax.plot([], [], color="black", lw=1.5, label="device copy timed beside the bar")
    ax.set_yticks([i + h * (len(groups) - 1) / 2 for i in range(len(names))], names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.12 * top)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:,.0f}"))   # 4,000 GB/s
    ax.set_xlabel("GB/s = (bytes read + bytes written) / time; "
                  "label: % of the device copy timed beside it")
    ax.set_title(tab.title, fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.figure.tight_layout()
    return ax


def sweep_best(kernel, shape=(8192, 8192), T="float") -> dict | None:
    """The fastest configuration of `kernel` with element type T at `shape`: from the
    recorded sweep (in either mode)."""
    from gemm_kernels.core.launch import kernel_of, problems
    k = kernel_of(kernel)
    best_row = None
    for c in k.valid_configurations():
        if c.get("T") != T or problems(k, c, tuple(shape)):
            continue
        try:
            r = lookup.recorded(k.name, tuple(shape), c)
        except LookupError:
            continue
        if best_row is None or r["gbps"]["median"] > best_row["gbps"]["median"]:
            best_row = r
    return best_row
