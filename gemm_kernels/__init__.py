"""GEMM optimisation series: the package the notebooks call.

    core/      registry, compiler, launcher, device, static analysis (imports nothing here)
    measure/   checker, timing harness, recording and lookup, ladder, profiler
    memory/    bank model and each chapter's memory-access patterns
    plan/      the kernel, tile and split of K for a shape (chapter 12), and sgemm()
    notebook/  banner, sources, SASS excerpts, widgets

The notebooks' short names (`gk.banks`, `gk.launch`, `from gemm_kernels import display`)
are resolved here lazily, so `import gemm_kernels` stays cheap and imports no CuPy.
"""
import importlib
import os

# cuBLAS must run in true float32 (no TF32) to be a fair reference for FP32 kernels.
os.environ.setdefault("CUPY_TF32", "0")

_MODULES = {
    "registry": "core.registry", "kernels": "core.kernels", "compiler": "core.compiler",
    "device": "core.device", "analysis": "core.analysis", "table": "core.table",
    "check": "measure.check", "timing": "measure.timing", "records": "measure.records",
    "lookup": "measure.lookup", "ladder": "measure.ladder", "profile": "measure.profile",
    "bandwidth": "measure.bandwidth", "roofline": "measure.roofline",
    "tradeoff": "measure.tradeoff", "banks": "memory.banks",
    "display": "notebook.display", "widgets": "notebook.widgets",
}
# Functions and classes a notebook reaches for directly.
_NAMES = {"launch": ("core.launch", "launch"), "problems": ("core.launch", "problems"),
          "sgemm": ("plan.choose", "sgemm"),
          "KERNELS": ("core.kernels", "KERNELS"), "Table": ("core.table", "Table")}

__all__ = sorted([*_MODULES, *_NAMES, "core", "measure", "memory", "notebook", "plan"])


def __getattr__(name):
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{_MODULES[name]}")
    if name in _NAMES:
        mod, attr = _NAMES[name]
        return getattr(importlib.import_module(f"{__name__}.{mod}"), attr)
    if name in ("core", "measure", "memory", "notebook", "plan"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
