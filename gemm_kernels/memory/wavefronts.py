"""Shared-memory wavefronts and bank conflicts of a launch, predicted without a GPU.

The chapter modules (bank_predict, thread_tiles, bank_counts) write, from each kernel's
index expressions, the list of warp-wide shared-memory instructions one block executes
per step (per tile for a transpose): 32 lane addresses and the width ptxas emits. This
module prices them with `banks.analyse`, multiplies by how often a launch repeats the
list, and sets the totals next to what Nsight Compute counts in
`l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum` and, beyond the ideal of one
wavefront per active phase, in `l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum`.

Lanes: warp w holds threads 32w .. 32w+31 of the block, threadIdx.x fastest.
"""
from __future__ import annotations

from dataclasses import dataclass

from gemm_kernels.memory import banks
from gemm_kernels.core.launch import kernel_of

WARP = 32
SASS_NAME = {("ld", 4): "LDS", ("ld", 8): "LDS.64", ("ld", 16): "LDS.128",
             ("st", 4): "STS", ("st", 8): "STS.64", ("st", 16): "STS.128"}
COUNTERS = ("ld wavefronts", "st wavefronts", "ld conflicts", "st conflicts")   # profile.SHARED order


@dataclass(frozen=True)
class WarpInstr:
    """One warp-wide shared-memory instruction of one warp of a block."""
    op: str            # "ld" or "st"
    what: str          # the source expression, e.g. "tile[tx][ty]"
    warp: int          # warp index inside the block
    width: int         # bytes per lane the SASS instruction moves: 4, 8 or 16
    addresses: tuple   # 32 byte offsets (None: inactive lane)
    group: str = ""    # what the chapter groups by, e.g. the operand "A" or "store a"

    @property
    def sass(self) -> str:
        return SASS_NAME[(self.op, self.width)]

    @property
    def analysis(self) -> banks.Analysis:
        return banks.analyse(self.addresses, self.width)


def warps(threads: int) -> int:
    """Warps of a block of `threads` threads (the last one may be partial)."""
    return -(-threads // WARP)


def lanes(threads: int, warp: int) -> list:
    """The thread ids of warp `warp`'s 32 lanes; None past the block's last thread."""
    return [32 * warp + lane if 32 * warp + lane < threads else None for lane in range(WARP)]


def lane_addresses(threads: int, warp: int, cols: int, scale: int = 1):
    """addr(f): the 32 lanes' f(tx, ty) * scale (None: inactive lane), for a block
    `cols` threads wide; f is a kernel's index expression."""
    tids = lanes(threads, warp)
    return lambda f: tuple(None if t is None else f(t % cols, t // cols) * scale for t in tids)


def resolve(kernel, params, modelled):
    """(kernel, full params) after checking that `modelled` covers the kernel and the
    configuration is valid."""
    k = kernel_of(kernel)
    if k.name not in modelled:
        raise ValueError(f"{k.name}: no shared-memory model; this one models {', '.join(modelled)}")
    p = k.resolve(params)
    bad = k.problems(p)
    if bad:
        raise ValueError("; ".join(bad))
    return k, p


def whole_tiles(shape, tile, names) -> int:
    """How many tiles of size `tile` cover `shape` (the launch repeats a block's list once
    per tile); partial tiles are refused, the model does not count them."""
    if any(s % t for s, t in zip(shape, tile)):
        need = ", ".join(dict.fromkeys(f"{n}={t}" for n, t in zip(names, tile)))
        raise ValueError(f"{tuple(shape)}: the model counts whole tiles; the sides must be "
                         f"multiples of {need}")
    n = 1
    for s, t in zip(shape, tile):
        n *= s // t
    return n


def sass_counts(instrs, warp: int = 0) -> dict:
    """{'STS': 2, 'LDS.128': 16, ...}: the instructions of warp `warp`, by SASS name."""
    out: dict = {}
    for i in instrs:
        if i.warp == warp:
            out[i.sass] = out.get(i.sass, 0) + 1
    return out


def totals(instrs, repeats: int) -> dict:
    """Predicted counters of a launch that runs the block's list `repeats` times:
    {'ld wavefronts', 'ld conflicts', 'st wavefronts', 'st conflicts'}."""
    out = {"ld wavefronts": 0, "ld conflicts": 0, "st wavefronts": 0, "st conflicts": 0}
    for i in instrs:
        a = i.analysis
        out[f"{i.op} wavefronts"] += repeats * a.wavefronts
        out[f"{i.op} conflicts"] += repeats * a.conflicts
    return out


def distinct(instrs, key) -> list:
    """[(first instruction, its analysis, how many share its key)] in order of first
    appearance; key(instr, analysis) says which instructions behave the same."""
    seen: dict = {}
    for i in instrs:
        a = i.analysis
        kk = key(i, a)
        if kk in seen:
            seen[kk][2] += 1
        else:
            seen[kk] = [i, a, 1]
    return [tuple(v) for v in seen.values()]


def recorded(kernel, params=None) -> dict | None:
    """The recorded ncu counters as {'ld wavefronts', ...} (floats) plus 'shape', or None."""
    from gemm_kernels.measure import profile
    k = kernel_of(kernel)
    rec = profile.counters(k.name, k.resolve(params))
    if rec is None:
        return None
    m = rec["metrics"]
    return {**{n: m.get(s) for n, s in zip(COUNTERS, profile.SHARED)},
            "shape": tuple(rec["shape"])}


def as_int(v):
    """A recorded counter as an int (None stays None)."""
    return None if v is None else int(round(v))


def comparison(configs, predict, label, title: str = "model vs Nsight Compute",
               exact: bool = True):
    """A Table, per (kernel, params): the launch's shared ld/st wavefronts and conflicts,
    predict(kernel, params, shape) at the recorded shape next to the recorded counters
    ('-': none recorded). label(kernel, params): the params column; exact: show the
    recorded counters as ints rather than ncu's floats."""
    from gemm_kernels.measure import records
    from gemm_kernels.core.table import Table
    rows = []
    for name, params in configs:
        k = kernel_of(name)
        p = k.resolve(params)
        meas = recorded(k, p)
        pred = predict(k.name, p, meas["shape"] if meas else None)
        meas = meas or {}
        row = {"kernel": k.name, "params": label(k.name, p)}
        for op in ("ld", "st"):
            for short, long in (("wf", "wavefronts"), ("conf", "conflicts")):
                ncu = meas.get(f"{op} {long}")
                row[f"{op} {short} model"] = pred[f"{op} {long}"]
                row[f"{op} {short} ncu"] = as_int(ncu) if exact else ncu
        rows.append(row)
    rec = records.current()
    src = f"{title} ({rec.label})" if rec else "model only: no recording"
    return Table(rows, list(rows[0]) if rows else ["kernel"], title=src)
