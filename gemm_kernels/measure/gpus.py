"""Two recorded GPUs side by side (chapter 00): what the formulas give, what was
measured, and how far each chapter's kernel gets next to the cuBLAS of its own GPU.

Every number comes from one recording in figures/data/ (`records.available`); every
percentage divides a row by the cuBLAS (or device copy) timed beside it in the same
process on that GPU, never by another GPU's.
"""
from __future__ import annotations

from gemm_kernels.core import device, style
from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.core.table import Table
from gemm_kernels.measure import records
from gemm_kernels.measure.timing import share

COPY_SHAPE = (1 << 30,)     # the device copy of 1 GiB that chapter 00 calls the DRAM ceiling


def recordings() -> list[records.Record]:
    """Every readable recording, the default first."""
    return [records.read(a["path"]) for a in records.available()]


def _row(rec: records.Record, kernel: str, shape, params=None, unit="gflops"):
    """The recorded row of `kernel` (default configuration unless `params`) at `shape`,
    or None where that recording has none."""
    full = KERNELS[kernel].resolve(params) if kernel in KERNELS else None
    rows = [r for r in rec.find(kernel, shape, full) if unit in r]
    return rows[-1] if rows else None


def _short(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100': the model, as people name it."""
    words = name.replace("NVIDIA", "").split()
    return words[0] if words else name


def summary(size: int = 4096) -> Table:
    """One row per recorded GPU: the peaks from the formulas of this chapter, the
    measured ceilings (device copy, cuBLAS at size^3) and the capstone's share of its
    own GPU's cuBLAS."""
    rows = []
    for rec in recordings():
        props = rec.device
        copy = _row(rec, "device_copy", COPY_SHAPE, unit="gbps")
        blas = _row(rec, "cublas", (size,) * 3)
        cap = _row(rec, "capstone", (size,) * 3)
        rows.append({
            "GPU": _short(props["name"]),
            "SMs": props.get("sm_count"),
            "FP32 peak, TFLOP/s": round(device.peak_fp32_gflops(props) / 1000, 1),
            "DRAM, formula, GB/s": round(device.peak_bandwidth_gbps(props)),
            "device copy, GB/s": round(copy["gbps"]["median"]) if copy else "-",
            f"cuBLAS {size}^3, TFLOP/s": round(blas["gflops"]["median"] / 1000, 1)
            if blas else "-",
            "capstone, % of its cuBLAS": f"{share(cap):.0f}%" if cap else "-",
            "recording": rec.label.removeprefix("recorded on "),
        })
    return Table(rows, list(rows[0]) if rows else [],
                 f"The recorded GPUs side by side ({size}^3; each % against the cuBLAS "
                 "timed beside it on the same GPU)")


def plot_ladder(size: int = 4096, kernels=None, ax=None):
    """Each chapter's kernel (default configuration) as % of its own GPU's cuBLAS at
    size^3, one bar per recorded GPU: the same code on two GPUs of one architecture."""
    import matplotlib.pyplot as plt
    import numpy as np
    from gemm_kernels.measure.ladder import ladder_kernels
    kernels = kernels or ladder_kernels()
    recs = recordings()
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / max(len(recs), 1)
    x = np.arange(len(kernels))
    for i, (rec, (colour, _)) in enumerate(zip(recs, style.series_styles(len(recs)))):
        shares = []
        for k in kernels:
            row = _row(rec, k, (size,) * 3)
            shares.append(share(row) if row and share(row) is not None else np.nan)
        ax.bar(x + (i - (len(recs) - 1) / 2) * width, shares, width, color=colour,
               label=rec.label.removeprefix("recorded on "))
    ax.set_xticks(x, [f"{KERNELS[k].chapter} {k}" for k in kernels], rotation=30,
                  ha="right")
    ax.set_ylabel("% of cuBLAS on the same GPU")
    ax.axhline(100, color="k", lw=1, ls="--")
    ax.set_title(f"Each chapter's kernel at {size}^3 on each recorded GPU", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, axis="y", alpha=0.3)
    return ax
