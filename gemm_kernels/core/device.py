"""Which mode the series runs in, and what the GPU is.

Live mode: CuPy sees a GPU. Recorded mode: it does not (or GEMM_KERNELS_MODE=recorded),
and measurements come from `figures/data/`. Nothing here raises without a GPU.
"""
from __future__ import annotations

import functools
import os

# FP32 lanes (CUDA cores) per SM by compute capability (CUDA C Programming Guide,
# "arithmetic instructions" throughput table: 32-bit fused multiply-add per clock per SM).
FP32_LANES = {(6, 0): 64, (6, 1): 128, (7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128,
              (8, 7): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128, (12, 0): 128}

# Shared memory since compute capability 5.0: 32 banks, each delivering one 4-byte word
# per wavefront, and one wavefront per SM per clock (CUDA C++ Programming Guide, "shared
# memory"; the bank model in memory/banks.py builds on these).
SMEM_BANKS = 32
SMEM_BANK_BYTES = 4

# The limits of an sm_90 GPU (H100/H200), for the analysis when no GPU is there.
SM90_LIMITS = {
    "compute_capability": "9.0",
    "max_threads_per_block": 1024,
    "max_threads_per_sm": 2048,
    "max_blocks_per_sm": 32,
    "registers_per_sm": 65536,
    "max_registers_per_thread": 255,
    "smem_per_sm": 233472,             # 228 KiB
    "smem_per_block_optin": 232448,    # 227 KiB
    "smem_per_block": 49152,
    "smem_reserved_per_block": 1024,   # the runtime keeps 1 KiB of each block's share
    "warp_size": 32,
    "max_grid_y": 65535,
}


def mode() -> str:
    """'live' when CuPy can use a GPU (and GEMM_KERNELS_MODE does not say otherwise)."""
    forced = os.environ.get("GEMM_KERNELS_MODE", "").lower()
    if forced in ("live", "recorded"):
        return forced
    return "live" if _gpu_present() else "recorded"


def is_live() -> bool:
    return mode() == "live"


def recorded_reason() -> str | None:
    """Why this machine runs in recorded mode, in words for the banner; None when live."""
    if is_live():
        return None
    if os.environ.get("GEMM_KERNELS_MODE", "").lower() == "recorded":
        return "GEMM_KERNELS_MODE=recorded asks for it"
    return _why_no_gpu()


def _cuda(version: int) -> str:
    """12090 -> '12.9' (CUDA's encoding: 1000 * major + 10 * minor)."""
    return f"{version // 1000}.{version % 1000 // 10}"


@functools.lru_cache(maxsize=None)
def _gpu_present() -> bool:
    return _why_no_gpu() is None


def _why_no_gpu() -> str | None:
    """None when CuPy can use a GPU; otherwise which of the three usual causes it is."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install -r requirements.txt)"
    rt = cupy.cuda.runtime
    try:
        if rt.getDeviceCount() > 0:
            return None
        error = None
    except Exception as e:   # CUDARuntimeError: no driver, an old driver, no device
        error = e
    try:
        driver = rt.driverGetVersion()   # 0 when no NVIDIA driver is loaded
    except Exception:
        driver = 0
    runtime = rt.runtimeGetVersion()
    if driver == 0 or error is None or "NoDevice" in str(error):
        return "no NVIDIA GPU here"
    if driver < runtime and driver // 1000 < runtime // 1000:
        return (f"the NVIDIA driver here supports CUDA {_cuda(driver)}, older than the CUDA "
                f"{_cuda(runtime)} this CuPy was built for: update the driver (CUDA "
                f"{runtime // 1000} needs {_MIN_DRIVER.get(runtime // 1000, 'a newer one')})")
    return f"CuPy cannot use the GPU ({error})"


# The oldest Linux driver of each CUDA major version (CUDA Toolkit release notes, "CUDA
# minor version compatibility"): any driver of that branch runs every minor version.
_MIN_DRIVER = {12: "driver 525 or newer", 13: "driver 580 or newer"}


# cudaDeviceAttr numbers (driver_types.h); read one by one, since CUDA 13 dropped some
# fields (such as clockRate) from cudaDeviceProp.
_ATTR = {"max_threads_per_block": 1, "smem_per_block": 8, "clock_khz": 13, "sm_count": 16,
         "l2_bytes": 38, "max_threads_per_sm": 39, "memory_clock_khz": 36,
         "memory_bus_bits": 37, "cc_major": 75, "cc_minor": 76, "smem_per_sm": 81,
         "registers_per_sm": 82, "smem_per_block_optin": 97, "max_blocks_per_sm": 106,
         "max_grid_y": 6}


@functools.lru_cache(maxsize=None)
def properties() -> dict:
    """The live GPU's properties in the record's format. Requires live mode."""
    import cupy
    rt = cupy.cuda.runtime
    a = {}
    for key, attr in _ATTR.items():
        try:
            a[key] = rt.deviceGetAttribute(attr, 0)
        except Exception:
            a[key] = None
    name = rt.getDeviceProperties(0)["name"]
    props = {
        "name": name.decode() if isinstance(name, bytes) else name,
        "compute_capability": f"{a['cc_major']}.{a['cc_minor']}",
        "sm_count": a["sm_count"],
        "sm_clock_mhz": a["clock_khz"] / 1000 if a["clock_khz"] else None,
        "memory_clock_mhz": a["memory_clock_khz"] / 1000 if a["memory_clock_khz"] else None,
        "memory_bus_bits": a["memory_bus_bits"],
        "l2_bytes": a["l2_bytes"],
        "max_threads_per_block": a["max_threads_per_block"],
        "max_threads_per_sm": a["max_threads_per_sm"],
        "max_blocks_per_sm": a["max_blocks_per_sm"],
        "registers_per_sm": a["registers_per_sm"],
        "max_registers_per_thread": 255,
        "smem_per_sm": a["smem_per_sm"],
        "smem_per_block": a["smem_per_block"],
        "smem_per_block_optin": a["smem_per_block_optin"],
        "smem_reserved_per_block": 1024 if a["cc_major"] and a["cc_major"] >= 8 else 0,
        "warp_size": 32,
        "max_grid_y": a["max_grid_y"],
        "driver": rt.driverGetVersion(),
        "cuda_runtime": rt.runtimeGetVersion(),
        "cupy": cupy.__version__,
    }
    props["fp32_lanes_per_sm"] = fp32_lanes(props["compute_capability"])
    return props


def fp32_lanes(compute_capability: str) -> int | None:
    major, minor = (int(x) for x in compute_capability.split("."))
    return FP32_LANES.get((major, minor))


def peak_fp32_gflops(props: dict) -> float | None:
    """SMs x FP32 lanes per SM x 2 (an FMA is two flops) x clock, in GFLOP/s."""
    lanes = props.get("fp32_lanes_per_sm") or fp32_lanes(props["compute_capability"])
    if not (lanes and props.get("sm_count") and props.get("sm_clock_mhz")):
        return None
    return props["sm_count"] * lanes * 2 * props["sm_clock_mhz"] / 1000


def peak_bandwidth_gbps(props: dict) -> float | None:
    """Theoretical DRAM bandwidth: 2 transfers per clock (DDR) x bus width in bytes."""
    if not (props.get("memory_clock_mhz") and props.get("memory_bus_bits")):
        return None
    return 2 * props["memory_clock_mhz"] * 1e6 * props["memory_bus_bits"] / 8 / 1e9


def smem_bandwidth_gbps(props: dict) -> float | None:
    """Shared-memory bandwidth of all SMs together: each serves one wavefront
    (SMEM_BANKS x SMEM_BANK_BYTES bytes) per clock."""
    if not (props.get("sm_count") and props.get("sm_clock_mhz")):
        return None
    return props["sm_count"] * SMEM_BANKS * SMEM_BANK_BYTES * props["sm_clock_mhz"] / 1000


def limits() -> dict:
    """Resource limits for validation and occupancy: the live GPU's, or sm_90's."""
    if is_live():
        return {**SM90_LIMITS, **{k: v for k, v in properties().items() if v is not None}}
    return dict(SM90_LIMITS)
