"""Compile kernels: to a loaded CuPy module (live), or to PTX, cubin and SASS (no GPU needed).

Both paths start from the same `.cu` file and the same name expression, so what the
static analysis shows is what runs.
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gemm_kernels.core import device
from gemm_kernels.core.registry import CUDA_DIR, Kernel

NVRTC_OPTIONS = ("-std=c++17", f"-I{CUDA_DIR}")
# What the static analysis compiles for when neither a GPU nor a recording says otherwise.
STATIC_ARCH = device.DEFAULT_ARCH


_CUDART_VERSION = re.compile(r"#define\s+CUDART_VERSION\s+(\d+)")


@functools.lru_cache(maxsize=None)
def cuda_include_dirs() -> tuple[str, ...]:
    """Folders of the CUDA toolkit's headers for NVRTC, which has none of its own beyond
    the basics: the tensor-core chapters include <mma.h> and <cuda_fp16.h>. The headers
    of NVRTC's own CUDA major version where there are several: a CUDA install has them
    in one folder; the pip wheels split them (mma.h in nvidia-cuda-runtime, the crt/mma.h
    it includes in nvidia-cuda-nvcc). Empty when there are none: a kernel that includes
    them then fails to compile, with NVRTC's message naming the header."""
    from cupy_backends.cuda.libs import nvrtc
    major = nvrtc.getVersion()[0]
    groups = []          # folders that serve together: one install, or the pip wheels
    try:
        import nvidia
        groups += [sorted(Path(root).glob("*/include")) for root in nvidia.__path__]
    except ImportError:
        pass
    groups += [[f] for f in sorted(Path("/usr/local").glob("cuda*/include"))]
    found = []
    for group in groups:
        top = next((f for f in group if (f / "mma.h").is_file()
                    and (f / "cuda_runtime_api.h").is_file()), None)
        crt = next((f for f in group if (f / "crt" / "mma.h").is_file()), None)
        if top and crt:
            m = _CUDART_VERSION.search((top / "cuda_runtime_api.h").read_text(errors="replace"))
            same = m is not None and int(m.group(1)) // 1000 == major
            found.append((same, tuple(dict.fromkeys([str(top), str(crt)]))))
    return max(found, key=lambda x: x[0])[1] if found else ()


def nvrtc_options() -> tuple[str, ...]:
    return NVRTC_OPTIONS + tuple(f"-I{d}" for d in cuda_include_dirs())


@functools.lru_cache(maxsize=None)
def _function(kernel: Kernel, expr: str):
    import cupy
    # a Hopper-only kernel names its arch-specific target; CuPy's own -arch would
    # compile it for sm_90, where wgmma does not exist
    arch = (f"-arch=sm_{device.sm_number(device.target_arch())}a",) if kernel.arch_suffix else ()
    mod = cupy.RawModule(code=kernel.source_text(), options=(*nvrtc_options(), *arch),
                         name_expressions=[expr])
    return mod.get_function(expr)


def function(kernel: Kernel, params: dict, shape: tuple | None = None):
    """The loaded kernel for one configuration (and the shape's path), compiled once
    per process; CuPy also keeps the binary in its on-disk cache."""
    return _function(kernel, kernel.name_expression(params, shape))


def entry(kernel: Kernel, expr: str):
    """Another kernel of the same source, by its C++ name expression (e.g. the split-K
    reduction beside a GEMM: `split_k_reduce<float, true>`), compiled once per process."""
    return _function(kernel, expr)


# Row key -> attribute of the loaded kernel (cupy.RawKernel, which RawModule.get_function
# returns; the values come from cuFuncGetAttribute).
BINARY_ATTRIBUTES = {"registers": "num_regs", "local_size_bytes": "local_size_bytes",
                     "shared_size_bytes": "shared_size_bytes",
                     "const_size_bytes": "const_size_bytes",
                     "max_threads_per_block": "max_threads_per_block",
                     "ptx_version": "ptx_version", "binary_version": "binary_version"}


def binary_attributes(fn) -> dict:
    """What the loaded binary uses: registers per thread, local (spill) and static
    shared bytes, ...; None for an attribute that cannot be read (an older CuPy, a
    driver that refuses it: the measurement goes on without it)."""
    out = {}
    for key, attr in BINARY_ATTRIBUTES.items():
        try:
            value = getattr(fn, attr)
        except Exception:
            value = None
        # CuPy reports -1 for an attribute this CUDA version does not have
        out[key] = value if isinstance(value, int) and value >= 0 else None
    return out


# ------------------------------------------------------------------ static path

def _tool(name: str) -> str:
    """A CUDA tool from the pip wheels first, then from PATH or a CUDA install."""
    site = Path(sys.prefix) / "lib"
    candidates = sorted(site.glob(f"python3*/site-packages/nvidia/*/bin/{name}"))
    try:
        import nvidia
        for root in nvidia.__path__:
            candidates += sorted(Path(root).glob(f"*/bin/{name}"))
    except ImportError:
        pass
    for c in candidates:
        if c.is_file():
            return str(c)
    found = shutil.which(name) or next(
        (str(p) for p in Path("/usr/local").glob(f"cuda*/bin/{name}") if p.is_file()), None)
    if not found:
        raise RuntimeError(f"{name} not found: install the requirements "
                           "(nvidia-cuda-nvcc-cu12 gives ptxas, nvidia-cuda-nvdisasm gives nvdisasm)")
    return found


_PTXAS_RELEASE = re.compile(r"release (\d+\.\d+)|V(\d+\.\d+)")


def parse_ptxas_version(text: str) -> str | None:
    """'12.9' from `ptxas --version` ("Cuda compilation tools, release 12.9, V12.9.86")."""
    m = _PTXAS_RELEASE.search(text)
    return (m.group(1) or m.group(2)) if m else None


@functools.lru_cache(maxsize=None)
def ptxas_version() -> str:
    """The version of the ptxas the static analysis runs here ("unknown" if it says
    none): its register counts can differ from the binary a GPU host timed."""
    res = subprocess.run([_tool("ptxas"), "--version"], capture_output=True, text=True)
    return parse_ptxas_version(res.stdout + res.stderr) or "unknown"


@functools.lru_cache(maxsize=None)
def supported_archs() -> tuple[int, ...]:
    """The sm numbers NVRTC here compiles for (the pip wheels of CUDA 12.9: 50 to 121,
    without 110, which CUDA 13 added; ptxas takes the same)."""
    from cupy_backends.cuda.libs import nvrtc
    try:
        return tuple(nvrtc.getSupportedArchs())
    except Exception:     # an NVRTC older than 11.2 cannot say: let it try
        return ()


def static_arch(kernel: Kernel, arch=None) -> str:
    """The architecture to compile `kernel` for: `arch`, or the GPU the analysis
    describes (`device.target_arch()`: the live GPU, else the recording's). ValueError,
    before NVRTC runs, when the kernel needs a newer GPU (the feature and both
    architectures named) or when this toolchain cannot compile for it."""
    name = device.arch_name(arch) if arch is not None else device.target_arch()
    why = kernel.arch_problem(arch)     # None: the message says "this GPU"
    if why:
        raise ValueError(why)
    sm = device.sm_number(name)
    known = supported_archs()
    if known and sm not in known:
        from cupy_backends.cuda.libs import nvrtc
        version = ".".join(map(str, nvrtc.getVersion()))
        raise ValueError(f"this toolchain (NVRTC {version}) cannot compile for {name}; "
                         f"it compiles for {', '.join(f'sm_{a}' for a in known)}")
    return name + kernel.arch_suffix


def ptx(kernel: Kernel, params: dict, arch=None) -> tuple[str, str]:
    """(PTX text, lowered function name), through NVRTC."""
    return _ptx(kernel, kernel.name_expression(params), static_arch(kernel, arch))


@functools.lru_cache(maxsize=None)
def _ptx(kernel: Kernel, expr: str, arch: str) -> tuple[str, str]:
    from cupy_backends.cuda.libs import nvrtc
    prog = nvrtc.createProgram(kernel.source_text(), kernel.source, [], [])
    try:
        nvrtc.addNameExpression(prog, expr)
        opts = [*nvrtc_options(), f"-arch=compute_{arch.split('_')[1]}"]
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError as e:
            raise RuntimeError(f"NVRTC failed for {expr}:\n{nvrtc.getProgramLog(prog)}") from e
        text = nvrtc.getPTX(prog)
        return (text.decode() if isinstance(text, bytes) else text).rstrip("\0"), \
            nvrtc.getLoweredName(prog, expr)
    finally:
        nvrtc.destroyProgram(prog)


@functools.lru_cache(maxsize=None)
def _cubin(kernel: Kernel, expr: str, arch: str) -> tuple[bytes, str, str]:
    text, lowered = _ptx(kernel, expr, arch)
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(text)
        res = subprocess.run([_tool("ptxas"), "-v", f"-arch={arch}", "-o", str(out), str(src)],
                             capture_output=True, text=True)
        if res.returncode:
            raise RuntimeError(f"ptxas failed:\n{res.stderr}")
        return out.read_bytes(), res.stderr, lowered


def cubin(kernel: Kernel, params: dict, arch=None) -> tuple[bytes, str, str]:
    """(cubin bytes, ptxas -v report, lowered name) for `arch` (see `static_arch`)."""
    return _cubin(kernel, kernel.name_expression(params), static_arch(kernel, arch))


def sass(kernel: Kernel, params: dict, arch=None, encoding: bool = False) -> str:
    """The SASS of one configuration, from nvdisasm (`encoding`: each instruction's two
    64-bit words in hex after it, as `nvdisasm -hex` prints them: the second holds the
    control bits, see `control_bits`)."""
    data, _, _ = cubin(kernel, params, arch)
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.cubin"
        f.write_bytes(data)
        res = subprocess.run([_tool("nvdisasm"), "-c", "-g", *(["-hex"] if encoding else []),
                              str(f)],
                             capture_output=True, text=True)
        if res.returncode:
            raise RuntimeError(f"nvdisasm failed:\n{res.stderr}")
        return res.stdout


_ENCODED = re.compile(r"/\*([0-9a-f]{4,})\*/[^\n]*;\s*/\* 0x[0-9a-f]{16} \*/\s*\n"
                      r"\s*/\* 0x([0-9a-f]{16}) \*/")


def control_bits(encoded_sass: str) -> dict[int, dict]:
    """address -> the control bits ptxas wrote into each instruction (Volta and later:
    bits 105-125 of the 128-bit instruction, the top of its second word), from a listing
    made with `sass(..., encoding=True)`: "stall", the cycles the warp waits before it
    issues its next instruction (what Nsight Compute's 'wait' stall counts); "yield";
    the scoreboards it sets ("write", "read"; 7 = none) and waits on ("wait_mask"); and
    the operand-reuse flags. Layout: Jia et al., "Dissecting the NVIDIA Volta GPU
    Architecture via Microbenchmarking" (2018)."""
    out = {}
    for m in _ENCODED.finditer(encoded_sass):
        c = int(m.group(2), 16) >> 41
        out[int(m.group(1), 16)] = {"stall": c & 0xF, "yield": (c >> 4) & 1,
                                    "write": (c >> 5) & 7, "read": (c >> 8) & 7,
                                    "wait_mask": (c >> 11) & 0x3F, "reuse": (c >> 17) & 0xF}
    return out


_RESOURCE = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def resources(kernel: Kernel, params: dict, arch=None) -> dict:
    """Registers per thread, static shared memory, stack and spills, from `ptxas -v`,
    and the architecture compiled for ("arch")."""
    arch = static_arch(kernel, arch)
    _, report, _ = cubin(kernel, params, arch)
    regs = _RESOURCE.search(report)
    smem = _SMEM.search(report)
    spill = _SPILL.search(report)
    return {"registers": int(regs.group(1)) if regs else 0,
            "smem_bytes": int(smem.group(1)) if smem else 0,
            "stack_bytes": int(spill.group(1)) if spill else 0,
            "spill_stores": int(spill.group(2)) if spill else 0,
            "spill_loads": int(spill.group(3)) if spill else 0,
            "arch": arch, "report": report.strip()}
