"""Chapter 10's yardstick: GB/s of copies and transposes next to the device copy.

GB/s = (bytes read + bytes written) / time. Every kernel is timed interleaved with the
device-to-device copy (cudaMemcpyAsync) of the same bytes as its input, in the same
process (live, or when the recording was made), and shown as a percentage of that copy.
"""
from __future__ import annotations

from gemm_kernels.measure import lookup, records

REFERENCE = "device_copy"


def reference(shape) -> float | None:
    """The device copy's GB/s for a float32 matrix of `shape`, timed on its own (the
    plot's dashed line; None if unavailable). Percentages use each row's own reference
    instead (`lookup.share`)."""
    try:
        return lookup.measure_or_lookup(REFERENCE, tuple(shape))["gbps"]["median"]
    except LookupError:
        return None


def table(kernels, shapes=((8192, 8192), (8191, 4097)), types=("float",),
          params: dict | None = None):
    """A Table: per shape, the device copy timed on its own, then each kernel (and
    type) with its GB/s (median, min, max over the repeats), the device copy of the same
    bytes timed beside it, and the kernel's % of that copy ('-' where the row has none,
    as in recordings before schema 2). Configurations missing from the recording are
    left out."""
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
        for name in kernels:
            for t in types:
                p = {**(params or {}).get(name, {}), "T": t}
                try:
                    r = lookup.measure_or_lookup(name, tuple(shape), p)
                except LookupError:
                    continue
                g = r["gbps"]
                rows.append({"kernel": name, "T": t, "shape": list(shape), "GB/s": g["median"],
                             "min": g["min"], "max": g["max"],
                             "copy same run": r.get("reference", {}).get("gbps", {}).get("median"),
                             "% of device copy": lookup.share(r)})
    return Table(rows, ["kernel", "T", "shape", "GB/s", "min", "max", "copy same run",
                        "% of device copy"],
                 title=f"GB/s = (bytes read + bytes written) / time, {records.source()}")


def best(tab, shape, T="float", op_kernels=None) -> dict | None:
    """The fastest row of `tab` at `shape` and type T among `op_kernels` (default: every
    kernel whose name starts with 'transpose')."""
    rows = [r for r in tab if list(r["shape"]) == list(shape) and r["T"] == T
            and (r["kernel"] in op_kernels if op_kernels else r["kernel"].startswith("transpose"))]
    return max(rows, key=lambda r: r["GB/s"]) if rows else None


def plot(tab, ax=None):
    """Horizontal bars of GB/s, one group per shape and type, the device copy dashed."""
    import matplotlib.pyplot as plt
    groups = list(dict.fromkeys((tuple(r["shape"]), r["T"]) for r in tab
                                if r["kernel"] != REFERENCE))
    names = list(dict.fromkeys(r["kernel"] for r in tab if r["kernel"] != REFERENCE))
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.35 * len(names) * len(groups) + 1.5))
    h = 0.8 / max(len(groups), 1)
    cmap = plt.get_cmap("tab10")
    for g, (shape, t) in enumerate(groups):
        vals = {r["kernel"]: r["GB/s"] for r in tab
                if tuple(r["shape"]) == shape and r["T"] == t}
        ys = [i + g * h for i, n in enumerate(names) if n in vals]
        ax.barh(ys, [vals[n] for n in names if n in vals], height=h, color=cmap(g),
                label=f"{'x'.join(map(str, shape))} {t}")
        ref = next((r["GB/s"] for r in tab if r["kernel"] == REFERENCE
                    and tuple(r["shape"]) == shape), None)
        if ref:
            ax.axvline(ref, color=cmap(g), ls="--", lw=1)
    ax.set_yticks([i + h * (len(groups) - 1) / 2 for i in range(len(names))], names)
    ax.invert_yaxis()
    ax.set_xlabel("GB/s (dashed: device copy of the float32 matrix)")
    ax.set_title(tab.title, fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
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
