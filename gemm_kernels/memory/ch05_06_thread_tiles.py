"""Thread tiles of chapters 05-06: which outputs a thread owns, the shared-memory loads
its inner loop issues, what they cost in wavefronts, and how a warp stores C.

Kernels modelled: `tile_1d` (TM outputs down one column), `tile_2d` (a TM x TN patch,
inner-product order), `tile_2d_reg` (the same patch, outer product with register
caching) and `tile_2d_strided` (outer product, the thread's outputs spread across the
tile with strides BM/TM and BN/TN, the strided layout of the notes' matrixMul_2_1).

For one step along K (one BM x BK tile of A and one BK x BN tile of B in shared
memory), a thread reads a fixed pattern of words, shifted by a base that depends on its
position (tr, tc) in the block's thread grid:

    tile_1d, tile_2d, tile_2d_reg:  A: (tr*TM + i)*BK + k       B: k*BN + tc*TN + j
    tile_2d_strided:                A: (tr + i*BM/TM)*BK + k    B: k*BN + tc + j*BN/TN

(tile_1d has TN = 1 and tc = t % BN.) With the loops fully unrolled, ptxas loads each
distinct word once and fuses consecutive words into wide loads when it can prove the
address aligned: four words into an LDS.128 when the first word's offset is a multiple
of 4 for every thread, two into an LDS.64 when it is a multiple of 2. `loads` applies
exactly that rule. `tile_2d` keeps its k loop rolled (`#pragma unroll 1`), so it loads
both operands of every FMA with a plain LDS: 2*TM*TN*BK loads per step.
tests/test_thread_tiles.py checks the counts against the SASS.

`warp_instructions` turns each load into one instruction per warp for `wavefronts` to
price, and adds the tile copies (one STS per element a thread copies, consecutive lanes
on consecutive words), so the launch totals compare with Nsight Compute's shared-memory
counters. The As tile starts at byte 0 and Bs right after it; both sizes are multiples
of 128 bytes, so the banks do not depend on the order.
"""
from __future__ import annotations

from dataclasses import dataclass

from gemm_kernels.memory import wavefronts
from gemm_kernels.memory.wavefronts import SASS_NAME, WARP, WarpInstr

KERNELS = ("tile_1d", "tile_2d", "tile_2d_reg", "tile_2d_strided")


# ------------------------------------------------------------------ geometry

@dataclass(frozen=True)
class Geometry:
    """A kernel's thread grid and each thread's share of one step along K."""
    kernel: str
    params: dict
    threads: int
    a_offsets: tuple      # words of As one thread reads in one step, relative to a_base
    b_offsets: tuple      # words of Bs, relative to b_base

    def position(self, t: int) -> tuple[int, int]:
        """(tr, tc): the thread's row and column in the block's thread grid."""
        p = self.params
        cols = p["BN"] if self.kernel == "tile_1d" else p["BN"] // p["TN"]
        return t // cols, t % cols

    def a_base(self, t: int) -> int:
        tr, _ = self.position(t)
        p = self.params
        return (tr if self.kernel == "tile_2d_strided" else tr * p["TM"]) * p["BK"]

    def b_base(self, t: int) -> int:
        _, tc = self.position(t)
        return tc if self.kernel in ("tile_1d", "tile_2d_strided") else tc * self.params["TN"]

    def outputs(self, t: int) -> list[tuple[int, int]]:
        """The (row, col) of C, inside the block's BM x BN tile, that thread t computes."""
        p = self.params
        tr, tc = self.position(t)
        tm, tn = p["TM"], p.get("TN", 1)
        if self.kernel == "tile_2d_strided":
            rs, cs = p["BM"] // tm, p["BN"] // tn
            return [(tr + i * rs, tc + j * cs) for i in range(tm) for j in range(tn)]
        return [(tr * tm + i, tc * tn + j) for i in range(tm) for j in range(tn)]


def geometry(kernel, params=None) -> Geometry:
    k, p = wavefronts.resolve(kernel, params, KERNELS)
    BM, BN, BK, TM = p["BM"], p["BN"], p["BK"], p["TM"]
    TN = p.get("TN", 1)
    threads = BM * BN // (TM * TN)
    rs = BM // TM if k.name == "tile_2d_strided" else 1
    cs = BN // TN if k.name == "tile_2d_strided" else 1
    a = tuple(sorted(i * rs * BK + kk for i in range(TM) for kk in range(BK)))
    b = tuple(sorted(kk * BN + j * cs for kk in range(BK) for j in range(TN)))
    return Geometry(k.name, p, threads, a, b)


# ------------------------------------------------------------------ loads

@dataclass(frozen=True)
class Load:
    """One shared-memory load of one thread in one step: `width` bytes from word
    `offset` (relative to the thread's base) of operand "A" or "B"."""
    operand: str
    offset: int
    width: int

    @property
    def sass(self) -> str:
        return SASS_NAME[("ld", self.width)]


def _fuse(offsets, bases) -> list[tuple[int, int]]:
    """(offset, width in bytes) of the loads ptxas makes of one thread's distinct words:
    runs of consecutive words, cut into 4-word (then 2-word) pieces whose first word is
    aligned for every thread."""
    have = set(offsets)
    out, ordered, i = [], sorted(have), 0
    while i < len(ordered):
        r = ordered[i]
        for n in (4, 2, 1):
            if all(r + d in have for d in range(n)) and all((b + r) % n == 0 for b in bases):
                out.append((r, 4 * n))
                i += n
                break
    return out


def loads(kernel, params=None) -> list[Load]:
    """The shared-memory loads one thread issues in one step along K (see the module
    docstring for the rule). The list is the same for every thread; only the base moves."""
    g = geometry(kernel, params)
    p = g.params
    if g.kernel == "tile_2d":   # rolled dot products: both operands of every FMA
        TM, TN, BK, BN = p["TM"], p["TN"], p["BK"], p["BN"]
        out = []
        for i in range(TM):
            for j in range(TN):
                for kk in range(BK):
                    out += [Load("A", i * BK + kk, 4), Load("B", kk * BN + j, 4)]
        return out
    a_bases = {g.a_base(t) for t in range(g.threads)}
    b_bases = {g.b_base(t) for t in range(g.threads)}
    return ([Load("A", o, w) for o, w in _fuse(g.a_offsets, a_bases)] +
            [Load("B", o, w) for o, w in _fuse(g.b_offsets, b_bases)])


def fma_per_step(kernel, params=None) -> int:
    """FFMA one thread executes per step along K: TM*TN*BK."""
    p = geometry(kernel, params).params
    return p["TM"] * p.get("TN", 1) * p["BK"]


def instruction_counts(kernel, params=None) -> dict:
    """{'LDS.128': n, 'LDS': n, 'FFMA': n} one thread issues per step along K."""
    out: dict = {}
    for ld in loads(kernel, params):
        out[ld.sass] = out.get(ld.sass, 0) + 1
    out["FFMA"] = fma_per_step(kernel, params)
    return out


# ------------------------------------------------------------------ warp instructions

def _what(g: Geometry, ld: Load) -> str:
    p = g.params
    n = ld.width // 4
    if ld.operand == "A":
        row, k = divmod(ld.offset, p["BK"])
        span = f"{k}" if n == 1 else f"{k}..{k + n - 1}"
        r0 = "tr" if g.kernel == "tile_2d_strided" else "tr*TM"
        return f"As[{r0} + {row}][{span}]"
    k, col = divmod(ld.offset, p["BN"])
    span = f"{col}" if n == 1 else f"{col}..{col + n - 1}"
    c0 = "tc" if g.kernel in ("tile_1d", "tile_2d_strided") else "tc*TN"
    return f"Bs[{k}][{c0} + {span}]"


def warp_instructions(kernel, params=None) -> list[WarpInstr]:
    """Every shared-memory instruction of every warp of one block in one step along K:
    the STS of the tile copies, then the loads of the inner loop."""
    g = geometry(kernel, params)
    p = g.params
    BM, BN, BK, NT = p["BM"], p["BN"], p["BK"], g.threads
    b_start = BM * BK * 4
    lds = loads(g.kernel, p)
    out: list[WarpInstr] = []
    for w in range(wavefronts.warps(NT)):
        tids = wavefronts.lanes(NT, w)
        for name, size, start in (("A", BM * BK, 0), ("B", BK * BN, b_start)):
            for i in range(-(-size // NT)):
                addr = tuple(None if t is None or t + i * NT >= size
                             else start + 4 * (t + i * NT) for t in tids)
                what = f"{'As' if name == 'A' else 'Bs'} element t + {i}*{NT}"
                out.append(WarpInstr("st", what, w, 4, addr, group=name))
        for ld in lds:
            base = g.a_base if ld.operand == "A" else g.b_base
            start = 0 if ld.operand == "A" else b_start
            addr = tuple(None if t is None else start + 4 * (base(t) + ld.offset) for t in tids)
            out.append(WarpInstr("ld", _what(g, ld), w, ld.width, addr, group=ld.operand))
    return out


def first(kernel, params=None, operand: str = "B", warp: int = 0, op: str = "ld") -> WarpInstr:
    """The first load (or store) of `operand` by `warp` in a step: for plotting banks."""
    for i in warp_instructions(kernel, params):
        if i.warp == warp and i.group == operand and i.op == op:
            return i
    raise ValueError(f"no {op} of {operand} by warp {warp}")


def conflicts(kernel, params=None, warp: int = 0) -> int:
    """Load wavefronts beyond the ideal that warp `warp` spends in one step along K."""
    return sum(i.analysis.conflicts for i in warp_instructions(kernel, params)
               if i.warp == warp and i.op == "ld")


def _short(kernel, p) -> str:
    return " ".join(f"{n}={p[n]}" for n in ("BM", "BN", "BK", "TM", "TN") if n in p)


def per_instruction(configs, warp: int = 0):
    """A Table: per configuration and operand, the loads one warp (`warp`) issues per
    tile (one BK slice of K), grouped by SASS instruction and cost: count, wavefronts each, ideal each."""
    from gemm_kernels.core.table import Table
    rows = []
    for name, params in configs:
        g = geometry(name, params)
        mine = [i for i in warp_instructions(name, params) if i.warp == warp and i.op == "ld"]
        for i, a, n in wavefronts.distinct(mine, lambda i, a: (i.group, i.sass, a.wavefronts, a.ideal)):
            rows.append({"kernel": g.kernel, "params": _short(g.kernel, g.params),
                         "operand": i.group, "SASS": i.sass, "example": i.what,
                         "per tile": n, "wavefronts each": a.wavefronts, "ideal each": a.ideal})
    return Table(rows, ["kernel", "params", "operand", "SASS", "example", "per tile",
                        "wavefronts each", "ideal each"],
                 title=f"shared loads of warp {warp} in one tile (one BK slice of K; bank model)")


def step_summary(configs):
    """A Table: per configuration, one thread's FFMA and load instructions per step, and
    one warp's load wavefronts per step (the block's mean), with the ideal."""
    from gemm_kernels.core.table import Table
    rows = []
    for name, params in configs:
        g = geometry(name, params)
        counts = instruction_counts(name, params)
        ins = [i for i in warp_instructions(name, params) if i.op == "ld"]
        warps = wavefronts.warps(g.threads)
        wf = sum(i.analysis.wavefronts for i in ins) / warps
        ideal = sum(i.analysis.ideal for i in ins) / warps
        n_ld = sum(v for k, v in counts.items() if k.startswith("LDS"))
        rows.append({"kernel": g.kernel, "params": _short(g.kernel, g.params),
                     "threads": g.threads, "FFMA": counts["FFMA"],
                     "LDS": counts.get("LDS", 0), "LDS.64": counts.get("LDS.64", 0),
                     "LDS.128": counts.get("LDS.128", 0),
                     "FFMA per load": f"{counts['FFMA'] / n_ld:.2f}",
                     "wavefronts": _num(wf), "ideal": _num(ideal),
                     "FFMA per wavefront": f"{counts['FFMA'] / wf:.2f}"})
    return Table(rows, list(rows[0]), title="one step along K: per thread (FFMA, loads) "
                                            "and per warp (wavefronts, bank model)")


def _num(x):
    return int(x) if x == int(x) else round(x, 2)


# ------------------------------------------------------------------ launch totals

def launch_steps(kernel, params=None, shape=None) -> int:
    """Blocks x steps along K of a launch at `shape` (default: the profiled 1024^3)."""
    from gemm_kernels.measure.profile import GEMM_SHAPE
    p = geometry(kernel, params).params
    return wavefronts.whole_tiles(shape or GEMM_SHAPE, (p["BM"], p["BN"], p["BK"]),
                                  ("BM", "BN", "BK"))


def predict(kernel, params=None, shape=None) -> dict:
    """Predicted Nsight Compute counters of one launch: {'ld wavefronts', 'ld conflicts',
    'st wavefronts', 'st conflicts'}."""
    return wavefronts.totals(warp_instructions(kernel, params), launch_steps(kernel, params, shape))


def counter_table(configs):
    """A Table: per configuration, the launch's shared-memory wavefronts and bank
    conflicts, predicted next to the recorded Nsight Compute counters ('-': none)."""
    return wavefronts.comparison(configs, predict, _short,
                                 title="model vs Nsight Compute at 1024^3")


# ------------------------------------------------------------------ stores of C

SECTOR = 32


# ------------------------------------------------------------------ picture

def owner_picture(kernel, params=None, warps=(0, 1), ax=None, rows: int | None = None,
                  cols: int | None = None):
    """Which outputs of the block's C tile the lanes of `warps` compute, drawn on the
    top-left rows x cols corner of the tile: colour = warp (legend), label = lane, one
    label per rectangle of a lane's outputs (each output where they are scattered).
    Labels too small to read are left out, and the title says so."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Patch, Rectangle
    from gemm_kernels.core import style
    g = geometry(kernel, params)
    p = g.params
    rows, cols = rows or p["BM"], cols or p["BN"]
    grid = np.full((rows, cols), np.nan)
    owned = {}      # (warp, lane) -> its outputs inside the corner
    for w in warps:
        for lane in range(WARP):
            t = 32 * w + lane
            if t >= g.threads:
                continue
            cells = [(r, c) for r, c in g.outputs(t) if r < rows and c < cols]
            for r, c in cells:
                grid[r, c] = w
            if cells:
                owned[(w, lane)] = cells
    if ax is None:
        _, ax = plt.subplots(figsize=(min(14, 0.2 * cols + 1), min(8, 0.2 * rows + 1)))
    im = ax.imshow(grid, cmap="tab10", vmin=0, vmax=9, interpolation="nearest")
    cell_w, cell_h = style.cell_points(ax, cols, rows)
    boxes = []      # (rows r0..r1, columns c0..c1, warp, lane, font size, rotation)
    for (w, lane), cells in owned.items():
        r0, r1 = min(r for r, _ in cells), max(r for r, _ in cells)
        c0, c1 = min(c for _, c in cells), max(c for _, c in cells)
        # One box per lane where its outputs fill a rectangle, else one per output.
        spans = ([(r0, r1, c0, c1)] if len(cells) == (r1 - r0 + 1) * (c1 - c0 + 1)
                 else [(r, r, c, c) for r, c in cells])
        for b0, b1, a0, a1 in spans:
            wide, tall = (a1 - a0 + 1) * cell_w, (b1 - b0 + 1) * cell_h
            # Written along the longer side: a TM x 1 column of outputs reads upwards.
            size, turn = max((style.label_points(wide, tall, len(str(lane))), 0),
                             (style.label_points(tall, wide, len(str(lane))), 90))
            boxes.append((b0, b1, a0, a1, w, lane, size, turn))
    # One size for every label of the picture, the largest all of them fit; none when
    # that is too small to read.
    size = min((b[6] for b in boxes), default=0)
    readable = size >= style.MIN_LABEL_POINTS
    for b0, b1, a0, a1, w, lane, _, turn in boxes if readable else []:
        # A thin white frame separates neighbouring lanes of the same warp colour.
        ax.add_patch(Rectangle((a0 - 0.5, b0 - 0.5), a1 - a0 + 1, b1 - b0 + 1,
                               fill=False, edgecolor="white", linewidth=0.6))
        ax.text((a0 + a1) / 2, (b0 + b1) / 2, lane, ha="center", va="center", fontsize=size,
                rotation=turn, color=style.text_colour(im.cmap(im.norm(w))))
    note = "; label: lane" if readable else "; lanes too small to label here"
    style.fit_title(ax, f"{g.kernel} {_short(g.kernel, p)}\noutputs of warps "
                        f"{', '.join(map(str, warps))}{note}", fontsize=9)
    ax.legend(handles=[Patch(color=im.cmap(im.norm(w)), label=f"warp {w}") for w in warps],
              loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0, fontsize=8)
    ax.set_xlabel("column in the C tile")
    ax.set_ylabel("row in the C tile")
    return ax


# ------------------------------------------------------------------ the ladder

def ladder_table(kernels, configs, sizes):
    """ladder.compare of `kernels` in their defaults, plus one line per (label, kernel,
    params) of `configs`, its rows named by the label: so that one kernel can appear at
    two configurations (the K5 tile and its default) in one plot next to cuBLAS."""
    from gemm_kernels.measure import ladder
    table = ladder.compare(list(kernels), sizes)
    for label, name, params in configs:
        table += [dict(r, kernel=label) for r in ladder.compare([name], sizes, params={name: params})
                  if r["kernel"] == name]
    # by size, cuBLAS last in each size (one reference row per size: compare adds one per call)
    refs = {r["size"]: r for r in table if r["chapter"] == "00"}
    table[:] = sorted([r for r in table if r["chapter"] != "00"] + list(refs.values()),
                      key=lambda r: (r["size"], r["chapter"] == "00"))
    return table
