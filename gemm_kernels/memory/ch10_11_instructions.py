"""The shared-memory instructions of chapters 10 and 11's kernels, for `wavefronts`.

For the transposes, `dgemm_tiled` and `sgemm_tiled_vec` this module writes every
warp-wide shared-memory instruction one block executes (per step along K for the GEMMs)
from the kernels' index expressions, and how many times a launch repeats that list;
`wavefronts` prices and totals them.

The widths are those ptxas emits (sm_90), not those the source suggests: in
`dgemm_tiled` it fuses A_shared[ty][k] and A_shared[ty][k+1] into one LDS.128, and in
`sgemm_tiled_vec` four A values into one LDS.128 (tests/test_ch10_11_notebook_logic.py
checks every instruction count against the SASS). `transpose_fast` is modelled where
its shared accesses stay scalar (PAD = 1, or one element per vector); with other
paddings ptxas merges some stores into STS.64/STS.128 and the model declines.

Only whole tiles are counted: the shape must be a multiple of the tile (as the
profiled shapes, 2048 x 2048 and 1024^3, are).
"""
from __future__ import annotations

from gemm_kernels.memory import wavefronts
from gemm_kernels.core.launch import DTYPES, kernel_of
from gemm_kernels.memory.wavefronts import WarpInstr, lane_addresses, warps

_SIZE = {"float": 4, "double": 8}
TILE_KERNELS = ("copy_smem", "transpose_smem", "transpose_padded", "transpose_diagonal")
KERNELS = TILE_KERNELS + ("transpose_fast", "dgemm_tiled", "sgemm_tiled_vec")


def _tile_kernel(name, p):
    TILE, ROWS, size = p["TILE"], p["ROWS"], _SIZE[p["T"]]
    pitch = TILE + p.get("PAD", 0)
    threads = TILE * ROWS
    stack = p.get("STACK", 1)
    transpose = name != "copy_smem"
    out = []
    for w in range(warps(threads)):
        addr = lane_addresses(threads, w, TILE, size)
        for dy in range(0, TILE, ROWS):
            # transpose_padded with STACK = 2 stores and reads two tiles, one under the
            # other (rows s*TILE + ...); every other kernel has one (s = 0 only).
            for s in range(stack):
                out.append(WarpInstr("st", "tile[ty][tx]", w, size,
                                      addr(lambda tx, ty: (s * TILE + ty + dy) * pitch + tx)))
            if transpose:
                for s in range(stack):
                    out.append(WarpInstr("ld", "tile[tx][ty]", w, size,
                                          addr(lambda tx, ty: (s * TILE + tx) * pitch + ty + dy)))
            else:
                out.append(WarpInstr("ld", "tile[ty][tx]", w, size,
                                      addr(lambda tx, ty: (ty + dy) * pitch + tx)))
    return out


def _fast(p):
    size = _SIZE[p["T"]]
    vec = max(1, p["VEC_BYTES"] // size)
    if vec > 1 and p["PAD"] != 1:
        raise ValueError(f"transpose_fast with PAD={p['PAD']} and {vec} elements per vector: "
                         "ptxas merges some shared stores into STS.64/STS.128 there; the "
                         "model covers PAD=1 (all shared accesses scalar) or VEC_BYTES = sizeof(T)")
    TILE, ROWS = p["TILE"], p["ROWS"]
    pitch = TILE + p["PAD"]
    lanes_x = TILE // vec
    threads = lanes_x * ROWS
    out = []
    for w in range(warps(threads)):
        addr = lane_addresses(threads, w, lanes_x, size)
        for i in range(TILE // ROWS):
            for j in range(vec):
                out.append(WarpInstr("st", f"tile[ty+{i * ROWS}][VEC*tx+{j}]", w, size,
                                      addr(lambda tx, ty: (ty + i * ROWS) * pitch + vec * tx + j)))
        for i in range(TILE // ROWS):
            for j in range(vec):
                out.append(WarpInstr("ld", f"tile[VEC*tx+{j}][ty+{i * ROWS}]", w, size,
                                      addr(lambda tx, ty: (vec * tx + j) * pitch + ty + i * ROWS)))
    return out


def _dgemm(p, as_written=False, a_pad=0):
    B = p["BLOCK"]
    A = B + a_pad                  # the length of a row of A_shared, in doubles
    threads = B * B
    b_base = B * A * 8
    out = []
    for w in range(warps(threads)):
        addr = lane_addresses(threads, w, B)
        out.append(WarpInstr("st", "A_shared[ty][tx]", w, 8, addr(lambda tx, ty: (ty * A + tx) * 8)))
        out.append(WarpInstr("st", "B_shared[ty][tx]", w, 8,
                              addr(lambda tx, ty: b_base + (ty * B + tx) * 8)))
        # an odd row length leaves k and k + 1 unaligned in every other row: no LDS.128
        if as_written or A % 2:
            for k in range(B):
                out.append(WarpInstr("ld", f"A_shared[ty][{k}]", w, 8,
                                      addr(lambda tx, ty: (ty * A + k) * 8)))
        else:
            for k in range(0, B, 2):
                out.append(WarpInstr("ld", f"A_shared[ty][{k}..{k + 1}]", w, 16,
                                      addr(lambda tx, ty: (ty * A + k) * 8)))
        for k in range(B):
            out.append(WarpInstr("ld", f"B_shared[{k}][tx]", w, 8,
                                  addr(lambda tx, ty: b_base + (k * B + tx) * 8)))
    return out


def _sgemm_vec(p):
    B, V = p["BLOCK"], p["VEC"]
    width = B * V
    threads = B * B
    b_base = B * B * 4
    out = []
    for w in range(warps(threads)):
        addr = lane_addresses(threads, w, B)
        out.append(WarpInstr("st", "A_shared[ty][tx]", w, 4, addr(lambda tx, ty: (ty * B + tx) * 4)))
        for j in range(V):
            out.append(WarpInstr("st", f"B_shared[ty][tx+{j * B}]", w, 4,
                                  addr(lambda tx, ty: b_base + (ty * width + tx + j * B) * 4)))
        for k in range(0, B, 4):
            out.append(WarpInstr("ld", f"A_shared[ty][{k}..{k + 3}]", w, 16,
                                  addr(lambda tx, ty: (ty * B + k) * 4)))
        for k in range(B):
            out.append(WarpInstr("ld", f"B_shared[{k}][{V}*tx..]", w, 4 * V,
                                  addr(lambda tx, ty: b_base + (k * width + V * tx) * 4)))
    return out


def block_accesses(kernel, params=None, as_written: bool = False,
                   a_pad: int = 0) -> list[WarpInstr]:
    """Every shared-memory instruction of one block (of one step along K for GEMMs).

    as_written: for dgemm_tiled, one LDS.64 per A_shared[ty][k] as the source reads,
    instead of the LDS.128 pairs ptxas emits. a_pad: for dgemm_tiled, a variant whose
    rows of A_shared are padded by that many doubles (the timed kernel has none)."""
    k, p = wavefronts.resolve(kernel, params, KERNELS)
    if k.name in TILE_KERNELS:
        return _tile_kernel(k.name, p)
    if k.name == "transpose_fast":
        return _fast(p)
    if k.name == "dgemm_tiled":
        return _dgemm(p, as_written, a_pad)
    return _sgemm_vec(p)


def repeats(kernel, params, shape) -> int:
    """How many times a launch at `shape` runs one block's list: blocks (x steps along K)."""
    k = kernel_of(kernel)
    p = k.resolve(params)
    if k.op in DTYPES:
        B = p["BLOCK"]
        return wavefronts.whole_tiles(shape, (B, B * p.get("VEC", 1), B),
                                      ("BLOCK", "BLOCK*VEC", "BLOCK"))
    if p.get("STACK", 1) > 1:   # transpose_padded: a block covers STACK*TILE rows
        return wavefronts.whole_tiles(shape, (p["STACK"] * p["TILE"], p["TILE"]),
                                      ("STACK*TILE", "TILE"))
    return wavefronts.whole_tiles(shape, (p["TILE"],) * 2, ("TILE",) * 2)


def predict(kernel, params=None, shape=None, as_written: bool = False) -> dict:
    """Predicted counters of one launch at `shape` (default: the profiled shape):
    {'ld wavefronts', 'ld conflicts', 'st wavefronts', 'st conflicts'}."""
    from gemm_kernels.measure.profile import GEMM_SHAPE, TRANSPOSE_SHAPE
    k = kernel_of(kernel)
    shape = shape or (GEMM_SHAPE if k.op in DTYPES else TRANSPOSE_SHAPE)
    return wavefronts.totals(block_accesses(k, params, as_written), repeats(k, params, shape))


def instruction_counts(kernel, params=None) -> dict:
    """{'LDS': n, 'LDS.64': n, ...}: one warp's shared instructions per block (per step
    along K for GEMMs), for comparison with the SASS."""
    return wavefronts.sass_counts(block_accesses(kernel, params))


def per_instruction(configs, warp: int = 0):
    """A Table: for each (kernel, params) and each distinct access of warp `warp`, the
    width, the phases, the wavefronts the bank model predicts and the ideal."""
    from gemm_kernels.core.table import Table
    rows = []
    for name, params in configs:
        p = kernel_of(name).resolve(params)
        mine = [a for a in block_accesses(name, params) if a.warp == warp]
        # the array is part of the key: A's and B's stores cost the same, yet are two rows
        for a, an, n in wavefronts.distinct(mine, lambda a, an: (a.what.split("[")[0], a.op,
                                                                 a.width, an.wavefronts, an.ideal)):
            rows.append({"kernel": name, "params": _short(name, p), "access": a.what,
                         "op": a.op, "bytes/lane": a.width, "count": n,
                         "phases": len([ph for ph in an.phases if ph.active]),
                         "wavefronts": an.wavefronts, "ideal": an.ideal})
    return Table(rows, ["kernel", "params", "access", "op", "bytes/lane", "count", "phases",
                        "wavefronts", "ideal"],
                 title=f"bank model, warp {warp}, one instruction each (count: how many of "
                       "the warp's instructions behave the same)")


def _short(name, p):
    """The parameters that matter for the shared accesses."""
    keep = [n for n in ("T", "TILE", "ROWS", "PAD", "VEC_BYTES", "BLOCK", "VEC") if n in p]
    if p.get("STACK", 1) != 1:        # transpose_padded: shown only where it is not 1
        keep.append("STACK")
    return {n: p[n] for n in keep}


# The columns a short comparison keeps: the wavefronts and how far Nsight Compute's lie
# from the model's (the conflicts are the wavefronts above one a request).
BRIEF = ("params", "ld wf model", "ld wf ncu", "st wf model", "st wf ncu",
         "ld ncu vs model, %", "st ncu vs model, %")


def comparison(configs, as_written: bool = False, brief: bool = False):
    """A Table, per (kernel, params): the launch's shared ld/st wavefronts and bank
    conflicts predicted by the model next to those Nsight Compute recorded ('-' where
    the recording has no counters for that configuration), and their ratio. `brief`:
    only the wavefronts and the two percentages (`BRIEF`), at one decimal."""
    from gemm_kernels.core.table import Table
    t = wavefronts.comparison(configs, lambda n, p, shape: predict(n, p, shape, as_written),
                              _short, exact=False)
    for row in t:
        for op in ("ld", "st"):
            # Counts as floats, so that the table prints them with thousands separators
            # like the recorded ones beside them.
            for col in (f"{op} wf model", f"{op} conf model"):
                row[col] = float(row[col])
            model, ncu = row[f"{op} wf model"], row[f"{op} wf ncu"]
            # A percentage difference reads at a glance where a ratio near 1 prints as "1".
            row[f"{op} ncu vs model, %"] = (100 * (ncu / model - 1) if model else None) \
                if ncu is not None else None
    # The counts are whole launches: the title names the shape they were profiled at.
    shapes = {m["shape"] for m in (wavefronts.recorded(n, p) for n, p in configs) if m}
    at = (f"whole launches at {' x '.join(map(str, shapes.pop()))}" if len(shapes) == 1
          else "whole launches, each at its profiled shape" if shapes else "")
    title = t.title.replace(" (", f", {at} (", 1) if at else t.title
    if brief:
        return Table(t, list(BRIEF), title=title, pct_decimals=1)
    return Table(t, list(t[0]) if t else t.columns, title=title)


def agreement(table, tolerance: float = 0.1) -> list[str]:
    """The rows of a `comparison` table where the recorded wavefronts differ from the
    model's by more than `tolerance` (a fraction), as short lines; empty when every
    recorded count is within it."""
    out = []
    for r in table:
        for op in ("ld", "st"):
            ncu, model = r[f"{op} wf ncu"], r[f"{op} wf model"]
            if ncu is None:
                continue
            if (model == 0 and ncu > 0) or (model and abs(ncu / model - 1) > tolerance):
                out.append(f"{r['kernel']} {r['params']}: {op} wavefronts model {model:,.0f} "
                           f"ncu {ncu:,.0f}")
    return out


def excess_is_conflicts(table) -> bool:
    """True when, in every recorded row, ncu's wavefronts exceed the model's by exactly
    the difference of the conflict counts (ncu counts a conflict for every wavefront
    beyond one per phase, whatever caused it)."""
    for r in table:
        for op in ("ld", "st"):
            if r[f"{op} wf ncu"] is None:
                continue
            if round(r[f"{op} wf ncu"] - r[f"{op} wf model"]) != \
                    round(r[f"{op} conf ncu"] - r[f"{op} conf model"]):
                return False
    return True


def excess_line(configs) -> str:
    """One line for a `comparison` of `configs`: the range, over every recorded row and
    both ops, of how far Nsight Compute's wavefronts lie above the model's (in per cent),
    and whether its conflict counter counts exactly those extra wavefronts as conflicts."""
    t = comparison(configs)
    got = [r[f"{op} ncu vs model, %"] for r in t for op in ("ld", "st")
           if r[f"{op} ncu vs model, %"] is not None]
    if not got:
        return "no Nsight Compute counts recorded for these configurations"
    lo, hi = min(got), max(got)
    side = "more" if lo >= 0 else "more or fewer"
    filed = ("its conflict counter counts every one of those extra wavefronts as a conflict"
             if excess_is_conflicts(t) else
             "its conflict counter does not match those extra wavefronts one for one")
    return (f"Nsight Compute counts {lo:.1f}% to {hi:.1f}% {side} wavefronts than the model, "
            f"in every one of its {len(got)} counts (loads and stores); {filed}")


def access(kernel, params=None, op: str = "ld", index: int = 0, warp: int = 0,
           as_written: bool = False) -> WarpInstr:
    """The `index`-th shared `op` ("ld" or "st") instruction of warp `warp` in one block,
    e.g. the first column read of a transpose tile: access("transpose_smem")."""
    found = [a for a in block_accesses(kernel, params, as_written) if a.op == op and a.warp == warp]
    if not 0 <= index < len(found):
        raise ValueError(f"warp {warp} has {len(found)} shared {op} instructions; index={index}")
    return found[index]


# ------------------------------------------------------------------ chapter 11: phases

def plot_phases(cases, ax=None):
    """Which lanes share a phase: one row per (label, WarpInstr), one cell per lane,
    coloured by the phase that serves it (merged phases span both halves); the number in
    a cell is the element the lane reads, counted in elements of the access width from the
    lowest address of the warp, so lanes that read the same element show the same number.
    At the right: phases and wavefronts."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    from gemm_kernels.core import style
    from gemm_kernels.memory.banks import WARP

    if ax is None:
        _, ax = plt.subplots(figsize=(12, 0.62 * len(cases) + 1.3))
    cmap = plt.get_cmap("tab10")
    for row, (label, instr) in enumerate(cases):
        an = instr.analysis
        low = min(a for a in an.addresses if a is not None)
        for n, phase in enumerate(an.phases):
            colour = cmap(n % 10)
            for lane in phase.lanes:
                a = an.addresses[lane]
                ax.add_patch(Rectangle((lane - 0.45, row - 0.4), 0.9, 0.8,
                                       facecolor=colour if a is not None else "0.85"))
                if a is not None:
                    ax.text(lane, row, str((a - low) // instr.width), ha="center", va="center",
                            fontsize=7, color=style.text_colour(colour))
        what = "the two half-warps merged" if instr.width == 8 else "quarters merged in each half"
        merged = f"\n{what} ({an.merge} rule)" if an.merge else ""
        ax.text(WARP, row, f"{sum(p.active for p in an.phases)} phase(s), {an.wavefronts} "
                f"wavefront(s), ideal {an.ideal}{merged}", va="center", fontsize=8)
    ax.set_xlim(-0.6, WARP + 9)
    ax.set_ylim(len(cases) - 0.5, -0.5)
    ax.set_xticks(range(0, WARP, 4))
    ax.set_yticks(range(len(cases)), [label for label, _ in cases], fontsize=9)
    ax.set_xlabel("lane (colour: the phase that serves it; number: the element it reads, "
                  "counted from the warp's lowest address)")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title("Which lanes share a phase: 4-byte loads in one, 8-byte in two half-warps, "
                 "16-byte in four quarter-warps, unless lanes pair up", fontsize=10)
    ax.figure.tight_layout()
    return ax
