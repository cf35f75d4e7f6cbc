"""One measurement row, measured now (live) or read from the recording (recorded).

`measure_or_lookup` is what the notebooks call; either way the row says where its
number came from.
"""
from __future__ import annotations

from gemm_kernels.core import device
from gemm_kernels.measure import records


def measure_or_lookup(kernel: str, shape, params: dict | None = None,
                      repeats: int | None = None) -> dict:
    """One row: measured now (live) or read from the record (recorded).

    Raises LookupError in recorded mode when the configuration was not recorded.
    """
    from gemm_kernels.measure import timing
    from gemm_kernels.core.launch import kernel_of
    name = kernel if isinstance(kernel, str) else kernel.name
    if device.is_live():
        kw = {"repeats": repeats} if repeats else {}
        if name in ("cublas", "cublas_dgemm"):
            row = timing.measure_cublas(shape, "float32" if name == "cublas" else "float64", **kw)
        elif name == "device_copy":
            row = timing.measure_copy(shape, **kw)
        elif kernel_of(name).op in ("transpose", "copy"):
            row = timing.measure_transpose(name, shape, params, **kw)
        else:
            row = timing.measure_gemm(name, shape, params, **kw)
        return {**row, "source": records.source()}
    return recorded(name, shape, params)


def recorded(kernel: str, shape, params: dict | None = None) -> dict:
    """One row from the recording, live mode or not. Whole sweeps (heat maps, rankings)
    are read this way everywhere: measuring a parameter space takes minutes, which is
    the recording command's job, not a notebook cell's."""
    from gemm_kernels.core.launch import kernel_of
    rec = records.current()
    if rec is None:
        raise LookupError("no recording in figures/data/")
    full = kernel_of(kernel).resolve(params) if kernel not in (
        "cublas", "cublas_dgemm", "device_copy") else {}
    rows = [r for r in rec.find(kernel, shape, full) if "gflops" in r or "gbps" in r]
    if not rows:
        raise LookupError(f"{kernel} {params or {}} at {tuple(shape)} is not in the recording "
                          f"({rec.label}); run it on a GPU to measure it")
    return {**rows[0], "source": rec.label}
