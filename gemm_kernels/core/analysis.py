"""Static analysis that needs no GPU: SASS instruction histograms and occupancy."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from gemm_kernels.core import compiler

from gemm_kernels.core import device
from gemm_kernels.core.launch import kernel_of

_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)\s*([^;]*);")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_BRANCH = re.compile(r"BRA(?:\.\w+)*\s+(?:!?U?P\w+,\s*)?`?\(?(\.L_x_\d+)")

# Opcode families worth showing in a GEMM course; the rest are counted as "other".
SHOWN = ("FFMA", "LDS", "LDS.64", "LDS.128", "STS", "STS.64", "STS.128", "LDG", "LDG.64",
         "LDG.128", "LDGSTS", "STG", "STG.128", "BAR", "LDL", "STL", "DFMA")


def _family(opcode: str, operands: str) -> str:
    """FFMA, LDS.128, LDG.128, ... from a SASS opcode, ignoring cache/type modifiers."""
    parts = opcode.split(".")
    base = parts[0]
    if base in ("LDS", "STS", "LDG", "STG", "LDL", "STL", "LDSM"):
        width = next((p for p in parts[1:] if p in ("64", "128")), None)
        return f"{base}.{width}" if width else base
    return base


def instructions(sass: str) -> list[tuple[int, str, str]]:
    """(address, family, full text) for each instruction in the SASS listing."""
    out = []
    for m in _INSTR.finditer(sass):
        out.append((int(m.group(1), 16), _family(m.group(2), m.group(3)),
                    f"{m.group(2)} {m.group(3)}".strip()))
    return out


def histogram(sass: str) -> Counter:
    return Counter(f for _, f, _ in instructions(sass))


def loops(sass: str) -> list[tuple[int, int]]:
    """Every loop of the listing as (address of its first instruction, address of the
    branch back to it), in the order the branches appear: a loop is the range from a
    label to a later branch back to that label."""
    label_addr, found = {}, []
    for line in sass.splitlines():
        m = _LABEL.match(line)
        if m:
            label_addr[m.group(1)] = None   # address of the next instruction
            continue
        mi = _INSTR.search(line)
        if not mi:
            continue
        addr = int(mi.group(1), 16)
        for lab, a in label_addr.items():
            if a is None:
                label_addr[lab] = addr
        b = _BRANCH.search(line)
        if b and label_addr.get(b.group(1)) is not None and label_addr[b.group(1)] <= addr:
            found.append((label_addr[b.group(1)], addr))
    return found


def main_loop(sass: str, work=("FFMA", "DFMA")) -> list[tuple[int, str, str]]:
    """The instructions of the loop with the most FFMA/DFMA (the GEMM inner loop; `work`:
    other families to count instead, e.g. ("HMMA",) for a tensor-core kernel), branch
    included; all instructions when the listing has no loop.

    When loops nest and tie on `work`, the smallest one wins (the innermost).
    """
    ins = instructions(sass)
    found = loops(sass)
    if not found:
        return ins

    def score(loop):
        body = [i for i in ins if loop[0] <= i[0] <= loop[1]]
        fma = sum(1 for _, f, _ in body if f in work)
        return (fma, -(loop[1] - loop[0]))
    lo, hi = max(found, key=score)
    return [i for i in ins if lo <= i[0] <= hi]


def summary(kernel, params=None, arch=None) -> dict:
    """Registers, shared memory, spills, whole-kernel and main-loop histograms, and the
    architecture they were compiled for ("arch": `arch`, or by default the GPU the
    analysis describes, see `compiler.static_arch`)."""
    k = kernel_of(kernel)
    p = k.resolve(params)
    res = compiler.resources(k, p, arch)
    sass = compiler.sass(k, p, res["arch"])
    loop = Counter(f for _, f, _ in main_loop(sass))
    lds = sum(v for f, v in loop.items() if f.startswith("LDS"))
    fma = loop.get("FFMA", 0) + loop.get("DFMA", 0)
    return {"kernel": k.name, "params": p, "arch": res["arch"], **{x: res[x] for x in (
        "registers", "smem_bytes", "stack_bytes", "spill_stores", "spill_loads")},
            "kernel_histogram": dict(histogram(sass)), "loop_histogram": dict(loop),
            "fma_per_lds": fma / lds if lds else None}


@dataclass
class Occupancy:
    threads_per_block: int
    registers_per_thread: int
    smem_per_block: int
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    limiter: str
    limits: dict      # blocks per SM allowed by each resource
    arch: str = device.DEFAULT_ARCH

    @property
    def occupancy(self) -> float:
        return self.warps_per_sm / self.max_warps_per_sm

    def explain(self) -> str:
        parts = ", ".join(f"{k} allows {v}" for k, v in self.limits.items())
        return (f"{self.threads_per_block} threads, {self.registers_per_thread} registers/thread, "
                f"{self.smem_per_block} B shared/block -> {parts}; "
                f"{self.blocks_per_sm} block{'' if self.blocks_per_sm == 1 else 's'} = "
                f"{self.warps_per_sm} of {self.max_warps_per_sm} "
                f"warps per SM ({percent(self.occupancy)}), limited by {self.limiter}")


def occupancy(threads: int, registers: int, smem: int, limits: dict | None = None) -> Occupancy:
    """Resident blocks per SM from threads, registers and shared memory per block, as
    cuda_occupancy.h computes them, with `limits` (default `device.limits()`, the GPU
    the analysis describes; `device.limits_for(arch)` for another architecture).

    Registers: each warp gets registers x 32 rounded up to the allocation unit (256),
    from one of the SM's sub-partitions (4, each a quarter of the register file); a
    block whose warps, rounded up to a multiple of 4, would need more than the
    registers a block may have does not launch (0 blocks). Shared memory: each block
    takes its bytes plus the runtime's reserve (1 KiB from sm_80 on), rounded up to the
    allocation unit (128 or 256 bytes); with none the reserve alone never limits before
    the block count does, so it is not listed.
    """
    lim = limits or device.limits()
    warp = lim["warp_size"]
    warps = -(-threads // warp)
    unit = lim["register_allocation_unit"]
    regs_per_warp = -(-max(registers, 1) * warp // unit) * unit
    parts = lim["register_subpartitions"]
    launchable = (registers <= lim["max_registers_per_thread"]
                  and regs_per_warp * (-(-warps // parts) * parts) <= lim["registers_per_block"])
    by_regs = ((lim["registers_per_sm"] // parts) // regs_per_warp * parts // warps
               if launchable else 0)
    by = {
        "threads": lim["max_threads_per_sm"] // (warps * warp),
        "registers": by_regs,
        "blocks": lim["max_blocks_per_sm"],
    }
    if smem:
        alloc = lim["smem_allocation_unit"]
        per_block = -(-(smem + lim["smem_reserved_per_block"]) // alloc) * alloc
        by["shared memory"] = (lim["smem_per_sm"] // per_block
                               if smem <= lim["smem_per_block_optin"] else 0)
    blocks = min(by.values())
    limiter = " and ".join(k for k in by if by[k] == blocks)
    max_warps = lim["max_threads_per_sm"] // warp
    return Occupancy(threads, registers, smem, blocks, blocks * warps, max_warps, limiter, by,
                     lim.get("arch", device.DEFAULT_ARCH))


def kernel_occupancy(kernel, params=None, registers: int | None = None,
                     arch=None) -> Occupancy:
    """Occupancy of one configuration on `arch` (default: the GPU the analysis
    describes), with the registers per thread that `ptxas -v` reports here for it, or
    `registers` when given: beside a recorded rate, those of the binary that was timed
    (another ptxas can allocate differently)."""
    k = kernel_of(kernel)
    p = k.resolve(params)
    res = compiler.resources(k, p, arch)
    t = k.threads(p)
    regs = res["registers"] if registers is None else registers
    return occupancy(t[0] * t[1] * t[2], regs, res["smem_bytes"] + k.dynamic_bytes(p, res["arch"]),
                     device.limits(res["arch"]))


# ------------------------------------------------------------------ timed vs here

TIMED_REGISTERS = "registers (timed binary)"


def local_registers_column() -> str:
    return f"registers (ptxas {compiler.ptxas_version()} here)"


def registers_note(pairs) -> str | None:
    """One line naming the configurations whose timed binary used another number of
    registers than ptxas reports here; pairs: (label, timed or None, here). None when
    they agree (or nothing was timed)."""
    diff = [f"{label}: {timed} timed vs {here} here" for label, timed, here in pairs
            if timed is not None and timed != here]
    if not diff:
        return None
    return (f"note: the timed binaries' registers differ from ptxas {compiler.ptxas_version()} "
            f"here ({'; '.join(diff)}); occupancy uses the timed binary's")


def percent(fraction: float) -> str:
    """12.5%, 25%, 100%: occupancy as people write it (no rounding 12.5 to 12)."""
    return f"{fraction:.1%}".replace(".0%", "%")
