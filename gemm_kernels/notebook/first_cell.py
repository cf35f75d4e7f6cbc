"""What every notebook's first cell runs once `gemm_kernels` is importable.

The cell itself only makes the package importable (the repository above the notebook, or
on Colab a clone of it: `scripts/notebook_header.py` writes that bootstrap into every
notebook). Then `prepare()`: on Colab, install what the runtime lacks, and show the
banner that names the mode and why, with the way to a GPU where Colab has none attached.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

from IPython.display import Markdown, display, update_display

from gemm_kernels.core import compiler, device
from gemm_kernels.notebook import display as shown

# Set to 1 to list what would be installed instead of running pip (the Colab test, a
# machine without network access).
NO_INSTALL = "GEMM_SERIES_NO_INSTALL"


def in_colab() -> bool:
    return "COLAB_RELEASE_TAG" in os.environ or "google.colab" in sys.modules


def _module(name: str):
    return lambda: importlib.util.find_spec(name) is not None


def _tool(name: str):
    def found() -> bool:
        try:
            return bool(compiler._tool(name))
        except RuntimeError:
            return False
    return found


def _nvrtc() -> bool:
    try:
        from cupy_backends.cuda.libs import nvrtc
        nvrtc.getVersion()
        return True
    except Exception:   # no CuPy, or CuPy finds no libnvrtc
        return False


# What the series needs, how to tell it is there, and the wheel that brings it. Colab
# already has CuPy 13 (cupy-cuda12x), NumPy, Matplotlib, ipywidgets and a CUDA 12 toolkit
# (NVRTC, ptxas, nvdisasm): there nothing is installed, and nothing it has is upgraded.
NEEDS = [
    ("CuPy", _module("cupy"), "cupy-cuda12x"),
    ("NumPy", _module("numpy"), "numpy"),
    ("Matplotlib", _module("matplotlib"), "matplotlib"),
    ("ipywidgets", _module("ipywidgets"), "ipywidgets"),
    ("NVRTC", _nvrtc, "nvidia-cuda-nvrtc-cu12"),
    ("ptxas", _tool("ptxas"), "nvidia-cuda-nvcc-cu12"),
    ("nvdisasm", _tool("nvdisasm"), "nvidia-cuda-nvdisasm"),
]


def missing() -> list[str]:
    """The wheels for whatever the series needs and this Python lacks."""
    return [wheel for _, here, wheel in NEEDS if not here()]


def install(wheels: list[str]) -> str | None:
    """pip-install `wheels` into this kernel's Python; what was done, in words."""
    if not wheels:
        return None
    if os.environ.get(NO_INSTALL) == "1":
        return f"{NO_INSTALL}=1: not installing {', '.join(wheels)}"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *wheels], check=True)
    importlib.invalidate_caches()
    return f"installed {', '.join(wheels)}"


# The banner's display id: a chapter's first cell may name its own recording after
# `prepare` (`name_recording`), which redraws the banner in place.
BANNER_ID = "gemm-series-mode-banner"

COLAB_GPU = ("To run the kernels here, attach Colab's free GPU: *Runtime > Change runtime "
             "type > T4 GPU*, then run the notebook again from the top. Until then the "
             "notebook continues in recorded mode.")


def prepare() -> None:
    """On Colab, install what is missing; then show the mode banner (and on a Colab
    runtime without a GPU, how to attach one)."""
    if in_colab():
        done = install(missing())
        if done:
            print(done)
    display(shown.banner(), display_id=BANNER_ID)
    if in_colab() and not device.is_live():
        display(Markdown(COLAB_GPU))


def name_recording(rec) -> None:
    """For a chapter whose measurements come from another recording than the default
    (chapter 12's, from the GPU that holds all its profiles): the banner `prepare` showed
    is replaced by one that names `rec`'s GPU, so the notebook shows one banner, and the
    right one. `rec` None (no recording holds the chapter): the banner stays."""
    if rec is not None:
        update_display(shown.banner(rec), display_id=BANNER_ID)
