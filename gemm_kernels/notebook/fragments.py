"""Register fragments in the SASS (chapter 06): which registers the shared loads of a
main loop fill, and how many FFMAs read each of them before it is overwritten.

An outer product loads a thread's `TM` values of `A` and `TN` values of `B` once per
`k` and feeds every one of them to several FFMAs; an inner product feeds each loaded
value to one. The compiled loop says which of the two a kernel is: count the FFMAs that
read each register an `LDS` filled. Everything here reads the SASS compiled here for
sm_90 (no GPU needed).
"""
from __future__ import annotations

import re

from gemm_kernels.core import analysis, compiler
from gemm_kernels.core.launch import kernel_of
from gemm_kernels.core.table import Table
from gemm_kernels.notebook.evidence import regs_loaded, regs_read

_DEST = re.compile(r"\S+\s+R(\d+)")
_NO_DEST = ("STS", "STG", "STL", "ST", "RED", "ATOM", "BAR", "BRA", "LDGSTS", "DEPBAR",
            "EXIT", "ISETP", "FSETP", "NOP")


def _regs_written(family: str, text: str) -> set[int]:
    """The registers an instruction writes: its first operand (two for a wide IMAD,
    two or four for a 64- or 128-bit load); none for stores, branches, barriers and
    compares (these write predicates)."""
    if family.split(".")[0] in _NO_DEST:
        return set()
    if family.startswith(("LDS", "LDG", "LDL")):
        return regs_loaded(family, text)
    m = _DEST.match(text)
    if not m:
        return set()
    first = int(m.group(1))
    return {first, first + 1} if ".WIDE" in text.split(" ")[0] else {first}


def _main_loop(kernel, params):
    k = kernel_of(kernel)
    return analysis.main_loop(compiler.sass(k, k.resolve(params)))


def fragment_uses(body) -> list[tuple[int, int, list[int]]]:
    """For a loop body ((address, family, text) per instruction, as
    `analysis.main_loop` gives it): per register filled by a shared load, (the load's
    position, the register, the positions of the FFMAs that read it before anything
    overwrites it). The scan wraps around once: the loop runs again after its last
    instruction."""
    n, out = len(body), []
    for i, (_, family, text) in enumerate(body):
        if not family.startswith("LDS"):
            continue
        for reg in sorted(regs_loaded(family, text)):
            readers = []
            for j in range(1, n):
                pos = (i + j) % n
                _, f2, t2 = body[pos]
                if f2 == "FFMA" and reg in regs_read(t2):
                    readers.append(pos)
                if reg in _regs_written(f2, t2):
                    break
            out.append((i, reg, readers))
    return out


def fragment_table(configs) -> Table:
    """Per (kernel, params): the main loop's shared loads, the registers they fill, its
    FFMAs, and how many FFMAs read each loaded register (fewest and most): 1 for an
    inner product, `TN` or `TM` for a register-cached outer product."""
    rows = []
    for name, params in configs:
        p = kernel_of(name).resolve(params)
        body = _main_loop(name, p)
        uses = fragment_uses(body)
        counts = [len(r) for _, _, r in uses]
        rows.append({"kernel": name, "params": " ".join(f"{k}={v}" for k, v in p.items()),
                     "shared loads": sum(f.startswith("LDS") for _, f, _ in body),
                     "registers they fill": len(uses),
                     "FFMA": sum(f == "FFMA" for _, f, _ in body),
                     "FFMAs per loaded register: fewest": min(counts) if counts else None,
                     "most": max(counts) if counts else None})
    return Table(rows, list(rows[0]), title="main loop, one trip per tile: the registers "
                 "filled by shared loads and the FFMAs that read them (SASS compiled here "
                 "for sm_90)")


def fragment_listing(kernel, params=None, load: int = 0) -> str:
    """The `load`-th shared load of the main loop and every FFMA that reads one of the
    registers it filled, each FFMA tagged with the register(s) it takes from the load:
    one fragment followed through the compiled code."""
    body = _main_loop(kernel, params)
    loads = [i for i, (_, f, _) in enumerate(body) if f.startswith("LDS")]
    if not 0 <= load < len(loads):
        raise ValueError(f"the main loop of {kernel_of(kernel).name} has {len(loads)} "
                         f"shared loads; load must be 0..{len(loads) - 1}, got {load}")
    i = loads[load]
    readers: dict[int, list[int]] = {}
    for pos, reg, rs in fragment_uses(body):
        if pos == i:
            for r in rs:
                readers.setdefault(r, []).append(reg)
    addr, _, text = body[i]
    lines = [f"/*{addr:04x}*/  {text}"]
    for r in sorted(readers, key=lambda r: (r - i) % len(body)):
        a, _, t = body[r]
        lines.append(f"/*{a:04x}*/  {t:<40s} <- " + ", ".join(f"R{x}" for x in readers[r]))
    return "\n".join(lines)
