"""One measurement row, measured now (live) or read from the recording (recorded).

`measure_or_lookup` is what the notebooks call; either way the row says where its
number came from, and `share` gives its percentage of the reference measured with it.
"""
from __future__ import annotations

from gemm_kernels.core import device
from gemm_kernels.measure import records
# share(row): percent of the row's same-run reference, defined with the rows in timing.
from gemm_kernels.measure.timing import REFERENCE_KERNELS, share  # noqa: F401


def measure_or_lookup(kernel: str, shape, params: dict | None = None,
                      repeats: int | None = None, rec=None) -> dict:
    """One row: measured now with its reference interleaved (live) or read from the
    record (recorded: `rec`, default the one shown).

    Raises LookupError in recorded mode when the configuration was not recorded.
    """
    name = kernel if isinstance(kernel, str) else kernel.name
    if device.is_live():
        from gemm_kernels.measure import record
        row = record.measure(name, shape, params, **({"repeats": repeats} if repeats else {}))
        return {**row, "source": records.source()}
    return recorded(name, shape, params, rec)


def recorded(kernel: str, shape, params: dict | None = None, rec=None) -> dict:
    """One row from the recording, live mode or not. Whole sweeps (heat maps, rankings)
    are read this way everywhere: measuring a parameter space takes minutes, which is
    the recording command's job, not a notebook cell's."""
    from gemm_kernels.core.launch import kernel_of
    rec = rec or records.current()
    if rec is None:
        raise LookupError("no usable recording in figures/data/ (a file there that cannot "
                          "be read is skipped with a warning naming it)")
    full = {} if kernel in REFERENCE_KERNELS else kernel_of(kernel).resolve(params)
    rows = [r for r in rec.find(kernel, shape, full) if "gflops" in r or "gbps" in r]
    if not rows:
        raise LookupError(f"{kernel} {params or {}} at {tuple(shape)} is not in the recording "
                          f"({rec.label}); run it on a GPU to measure it")
    return {**rows[0], "source": rec.label}


def binary(kernel, params: dict | None = None, shape=None) -> dict | None:
    """Attributes of the binary that is timed for this configuration (registers, local
    and shared bytes, ...): live, of the module loaded here; recorded, of the binary the
    recording timed at `shape`, or when no shape is given at any shape that selects the
    same instantiation as the static analysis. None when the recording has none."""
    from gemm_kernels.core.launch import kernel_of
    k = kernel_of(kernel)
    p = k.resolve(params)
    if device.is_live():
        from gemm_kernels.core import compiler
        return compiler.binary_attributes(compiler.function(k, p, shape))
    rec = records.current()
    if rec is None:
        return None
    want = k.name_expression(p, shape)
    for r in rec.find(k.name, shape, p):
        if r.get("binary") and k.name_expression(p, tuple(r["shape"])) == want:
            return r["binary"]
    return None


def variant_row(kernel, shape, params: dict | None = None, rec=None) -> dict | None:
    """The recorded timing of `kernel` (a registry kernel or a variant of one: a control,
    a worked solution) at `shape` and `params`, measured on its current text; None where
    the recording (`rec`, default the one shown) has none."""
    from gemm_kernels.core.launch import kernel_of
    rec = rec or records.current()
    if rec is None:
        return None
    k = kernel_of(kernel)
    rows = [r for r in rec.find(k, shape, k.resolve(params)) if "gflops" in r or "gbps" in r]
    return rows[0] if rows else None


def variant_recording(kernel, shape, params: dict | None = None):
    """The recording that holds `variant_row(kernel, shape, params)`: the one shown if it
    does, else the first other one that does, else None. A variant is timed in one run
    beside what it is compared with, so the comparison reads both from there."""
    return records.first_holding(lambda r: variant_row(kernel, shape, params, rec=r))
