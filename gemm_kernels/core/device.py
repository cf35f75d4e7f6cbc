"""Which mode the series runs in, and what the GPU is.

Live mode: CuPy sees a GPU. Recorded mode: it does not (or GEMM_KERNELS_MODE=recorded),
and measurements come from `figures/data/`. Nothing here raises without a GPU.
"""
from __future__ import annotations

import functools
import os
import re

# FP32 lanes (CUDA cores) per SM by compute capability (CUDA C Programming Guide,
# "arithmetic instructions" throughput table: 32-bit fused multiply-add per clock per SM).
FP32_LANES = {(6, 0): 64, (6, 1): 128, (7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128,
              (8, 7): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128, (12, 0): 128}

# Shared memory since compute capability 5.0: 32 banks, each delivering one 4-byte word
# per wavefront, and one wavefront per SM per clock (CUDA C++ Programming Guide, "shared
# memory"; the bank model in memory/banks.py builds on these).
SMEM_BANKS = 32
SMEM_BANK_BYTES = 4

# Resource limits per architecture (CUDA C++ Programming Guide, "Technical
# Specifications per Compute Capability"; the allocation units and the per-block
# reserve as cuda_occupancy.h uses them). Keys are sm numbers: 75 is compute capability
# 7.5. Shared memory: per SM and per block (opt-in, above the 48 KiB a block gets
# without asking) in bytes; the runtime reserves 1 KiB of shared memory per block from
# sm_80 on. Registers are allocated per warp in units of 256 (cuda_occupancy.h:
# cudaOccRegAllocationGranularity), in each of the SM's 4 sub-partitions; shared memory
# in units of 256 bytes on sm_7x and 128 bytes from sm_80 on
# (cudaOccSMemAllocationGranularity).
KIB = 1024
ARCH_LIMITS = {
    75: {"gpus": "Turing: T4 (Colab, Kaggle), RTX 20xx", "max_threads_per_sm": 1024,
         "max_blocks_per_sm": 16, "smem_per_sm": 64 * KIB, "smem_per_block_optin": 64 * KIB,
         "smem_reserved_per_block": 0, "smem_allocation_unit": 256},
    80: {"gpus": "Ampere: A100, A30", "max_threads_per_sm": 2048, "max_blocks_per_sm": 32,
         "smem_per_sm": 164 * KIB, "smem_per_block_optin": 163 * KIB,
         "smem_reserved_per_block": KIB, "smem_allocation_unit": 128},
    86: {"gpus": "Ampere: RTX 30xx, A10, A40", "max_threads_per_sm": 1536,
         "max_blocks_per_sm": 16, "smem_per_sm": 100 * KIB, "smem_per_block_optin": 99 * KIB,
         "smem_reserved_per_block": KIB, "smem_allocation_unit": 128},
    89: {"gpus": "Ada: RTX 40xx, L4, L40S", "max_threads_per_sm": 1536,
         "max_blocks_per_sm": 24, "smem_per_sm": 100 * KIB, "smem_per_block_optin": 99 * KIB,
         "smem_reserved_per_block": KIB, "smem_allocation_unit": 128},
    90: {"gpus": "Hopper: H100, H200", "max_threads_per_sm": 2048, "max_blocks_per_sm": 32,
         "smem_per_sm": 228 * KIB, "smem_per_block_optin": 227 * KIB,
         "smem_reserved_per_block": KIB, "smem_allocation_unit": 128},
    100: {"gpus": "Blackwell: B200, GB200", "max_threads_per_sm": 2048,
          "max_blocks_per_sm": 32, "smem_per_sm": 228 * KIB, "smem_per_block_optin": 227 * KIB,
          "smem_reserved_per_block": KIB, "smem_allocation_unit": 128},
    120: {"gpus": "Blackwell: RTX 50xx, RTX PRO 6000", "max_threads_per_sm": 1536,
          "max_blocks_per_sm": 32, "smem_per_sm": 100 * KIB, "smem_per_block_optin": 99 * KIB,
          "smem_reserved_per_block": KIB, "smem_allocation_unit": 128},
}
# The same on every architecture of the table.
COMMON_LIMITS = {
    "max_threads_per_block": 1024,
    "registers_per_sm": 65536,
    "registers_per_block": 65536,
    "max_registers_per_thread": 255,
    "register_allocation_unit": 256,   # registers, per warp
    "register_subpartitions": 4,
    "smem_per_block": 48 * KIB,        # without opting in (and the static limit)
    "warp_size": 32,
    "max_grid_y": 65535,
}
OLDEST = min(ARCH_LIMITS)
# What the static analysis and the limits describe when neither a GPU nor a recording
# says otherwise: the recordings' GPUs (H100, H200).
DEFAULT_ARCH = "sm_90"


def sm_number(arch) -> int:
    """90 from "sm_90", "sm90", "compute_90", "sm_90a" (the arch-specific target of
    Hopper-only instructions), "9.0", 90 or (9, 0); ValueError naming the forms it takes
    otherwise."""
    if isinstance(arch, tuple) and len(arch) == 2:
        return int(arch[0]) * 10 + int(arch[1])
    if isinstance(arch, int) and not isinstance(arch, bool):
        return arch
    text = str(arch).strip().lower()
    m = re.fullmatch(r"(?:sm_?|compute_)?(\d{2,3})a?", text)
    if m:
        return int(m.group(1))
    m = re.fullmatch(r"(\d{1,2})\.(\d)", text)
    if m:
        return int(m.group(1)) * 10 + int(m.group(2))
    raise ValueError(f"{arch!r} is not an architecture; write sm_75, sm_86, ... or a "
                     "compute capability such as 8.6")


def arch_name(arch) -> str:
    """"sm_86" for any form `sm_number` reads."""
    return f"sm_{sm_number(arch)}"


def table_arch(arch) -> tuple[int, str | None]:
    """(the row of ARCH_LIMITS that describes `arch`, a note or None). An architecture
    the table does not list (8.7, 10.3, 11.0, 12.1, ...) takes the newest row not newer
    than it, and the note says so; one older than the table is a ValueError."""
    sm = sm_number(arch)
    if sm in ARCH_LIMITS:
        return sm, None
    older = [a for a in ARCH_LIMITS if a <= sm]
    if not older:
        raise ValueError(f"compute capability {sm // 10}.{sm % 10} (sm_{sm}) is older than "
                         f"the oldest GPU this series supports, sm_{OLDEST} (Turing, such as "
                         "Colab's T4)")
    near = max(older)
    return near, (f"sm_{sm} is not in this series' table of limits; using sm_{near}'s, the "
                  "newest it lists below it")


def limits_for(arch) -> dict:
    """The limits of an architecture (see ARCH_LIMITS), with "arch" naming it and
    "limits_note" saying when another row stands in for it (None otherwise)."""
    sm = sm_number(arch)
    row, note = table_arch(sm)
    lim = {**COMMON_LIMITS, **ARCH_LIMITS[row]}
    lim.update(arch=f"sm_{sm}", compute_capability=f"{sm // 10}.{sm % 10}",
               limits_note=note)
    return lim


_RECORDED: dict = {}


def use_recording(device_props: dict | None) -> None:
    """Declare the device of the recording that recorded mode shows (measure.records
    calls this when it loads one): its architecture is then the one the static analysis
    compiles for and whose limits occupancy uses, so both describe the GPU the numbers
    were measured on."""
    _RECORDED.clear()
    if device_props:
        _RECORDED.update(device_props)


def target_arch() -> str:
    """The architecture the analysis describes: the live GPU's; in recorded mode the
    recording's device's; else DEFAULT_ARCH."""
    if is_live():
        return arch_name(properties()["compute_capability"])
    cc = _RECORDED.get("compute_capability")
    return arch_name(cc) if cc else DEFAULT_ARCH


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


def limits(arch=None) -> dict:
    """Resource limits for validation and occupancy on `arch` (default `target_arch()`):
    the table's row for it, overlaid with what the device itself reports where it is
    that architecture (the live GPU's attributes; in recorded mode the recording's)."""
    arch = arch_name(arch) if arch is not None else target_arch()
    lim = limits_for(arch)
    if is_live():
        reported = properties()
    else:
        reported = _RECORDED
    cc = reported.get("compute_capability")
    if cc and arch_name(cc) == arch:
        lim.update({k: v for k, v in reported.items() if k in lim and v is not None})
    return lim
