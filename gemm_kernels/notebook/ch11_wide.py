"""Chapter 11's pictures and tables: wide shared-memory accesses (LDS.64, LDS.128).

* `phase_cases`, `merge_cases`: warp loads for `plot_phases`, the picture of which lanes
  share a phase;
* `plot_wide_banks`: one phase of a load drawn over shared memory cut into banks as wide
  as the load (16 banks of 8 bytes for a double, 8 of 16 bytes for a float4), the view in
  which the wide rules are chapter 04's rule again;
* `probe_wide`: chapter 04's hardware probe, its 8- and 16-byte loads;
* `smem_bound`, `bound_plot`: the rate shared memory alone allows (one wavefront per SM
  per clock) next to the recorded one;
* `vec_table`, `vec_plot`: `sgemm_tiled_vec` at one BLOCK with VEC = 1, 2, 4, and
  everything that changes with VEC;
* `scalar_or_vector`: one vector load of B against VEC scalar loads of the same floats.

Everything runs without a GPU: the bank model, the compiler here and the recording.
"""
from __future__ import annotations
import re

from gemm_kernels.core.source_edits import apply
from gemm_kernels.core.table import Table
from gemm_kernels.measure import records
from gemm_kernels.memory import banks
from gemm_kernels.memory import ch10_11_instructions as instr
from gemm_kernels.memory.wavefronts import WarpInstr
from gemm_kernels.exercises.notebooks import solution_source
from gemm_kernels.notebook.display import Text

WARP = banks.WARP
SIZE = 2048                       # the size of the recorded sweeps of both kernels


def _load(what: str, width: int, addresses) -> WarpInstr:
    return WarpInstr("ld", what, 0, width, tuple(addresses))


def _lanes(block: int):
    """(tx, ty) of the 32 lanes of warp 0 in a BLOCK x BLOCK block."""
    return [(lane % block, lane // block) for lane in range(WARP)]


def tile_read(row, col, pitch: int, block: int = 16, width: int = 8, elem: int = 8):
    """Warp 0's byte addresses of tile[row(tx, ty)][col(tx, ty)], rows `pitch` elements of
    `elem` bytes long, for a load `width` bytes wide."""
    return tuple((row(tx, ty) * pitch + col(tx, ty)) * elem for tx, ty in _lanes(block))


# ------------------------------------------------------------------ which lanes share a phase

def phase_cases() -> list[tuple[str, WarpInstr]]:
    """A warp reading consecutive elements 4, 8 and 16 bytes wide: one phase of 32 lanes,
    two half-warps, four quarter-warps."""
    return [("LDS: 32 consecutive floats", _load("floats", 4, banks.strided(1, 4))),
            ("LDS.64: 32 consecutive doubles", _load("doubles", 8, banks.strided(1, 8))),
            ("LDS.128: 32 consecutive float4", _load("float4", 16, banks.strided(1, 16)))]


def merge_cases(k: int = 3) -> list[tuple[str, WarpInstr]]:
    """Loads whose lanes pair up on one address, and one whose halves repeat each other:
    which phases merge and which do not. The last one merges, but its two doubles sit in
    one 8-byte bank: a merged phase can still conflict. The labels say what the lanes read, not which
    tile: section 3 asks the student to price those tile reads."""
    half = tile_read(lambda tx, ty: k, lambda tx, ty: tx, 16)       # B_shared[k][tx]
    a128 = tile_read(lambda tx, ty: ty, lambda tx, ty: k - k % 2, 16, width=16)
    xor2 = [((lane // 4) * 2 + lane % 2) * 16 for lane in range(WARP)]  # lanes i, i^2 share
    apart = tile_read(lambda tx, ty: ty, lambda tx, ty: k, 16)         # one 8-byte bank
    return [("LDS.64: lanes i and i^1 on one double",
             _load("pairs", 8, [(lane // 2) * 8 for lane in range(WARP)])),
            ("LDS.64: both half-warps read the same 16 doubles",
             _load("B", 8, half)),
            ("LDS.128: each half-warp reads one address",
             _load("A", 16, a128)),
            ("LDS.128: lanes i and i^2 on one float4 (chapter 09's z-order)",
             _load("zorder", 16, xor2)),
            ("LDS.64: each half-warp reads one double, 128 bytes apart",
             _load("apart", 8, apart))]


def plot_phases(cases):
    """`ch10_11_instructions.plot_phases` for this chapter: the number in a cell said in
    the load's own unit (an element of 4, 8 or 16 bytes: for an LDS.128 a 16-byte pair
    of doubles or a float4), and the counts at the right written out ("1 phase, 2
    wavefronts")."""
    import re
    ax = instr.plot_phases(cases)
    for t in ax.texts:
        t.set_text(re.sub(r"(\d+) (phase|wavefront)\(s\)",
                          lambda m: f"{m.group(1)} {m.group(2)}" + ("" if m.group(1) == "1" else "s"),
                          t.get_text()))
    ax.set_xlabel("lane (colour: the phase that serves it; number: the element it reads, in "
                  "units of the load's width, 4, 8 or 16 bytes,\ncounted from the warp's lowest "
                  "address: lanes with the same number read the same bytes)")
    ax.figure.tight_layout()
    return ax


# ------------------------------------------------------------------ the wide-bank view

def column_cases(k: int = 3) -> list[tuple[str, WarpInstr]]:
    """A 16 x 16 tile of doubles (rows of 128 bytes) read along a row and down a column,
    as LDS.64, and down a column two doubles at a time, as LDS.128."""
    return [(f"LDS.64 along a row: tile[{k}][tx]",
             _load("row", 8, tile_read(lambda tx, ty: k, lambda tx, ty: tx, 16))),
            (f"LDS.64 down a column: tile[tx][{k}]",
             _load("column", 8, tile_read(lambda tx, ty: tx, lambda tx, ty: k, 16))),
            (f"LDS.128 down a column: tile[tx][{k - k % 2}..{k - k % 2 + 1}]",
             _load("column128", 16, tile_read(lambda tx, ty: tx, lambda tx, ty: k - k % 2, 16,
                                              width=16)))]


def plot_wide_banks(cases, phase: int = 0, axes=None, ncols: int | None = None):
    """For each (label, WarpInstr): the lanes of one phase (default the first) drawn over
    shared memory cut into banks as wide as the load (128 / width banks of `width` bytes),
    one row per 128 bytes of memory (the same rows in every panel: all those the phases
    shown touch, and those between); a cell holds the lanes that read it. A bank asked
    for more than one different element is outlined in red, and the phase costs as many
    wavefronts as the most different elements one bank holds."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if axes is None:
        ncols = ncols or len(cases)
        nrows = -(-len(cases) // ncols)
        _, grid = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 5.4 * nrows), squeeze=False)
        axes = grid.ravel()
    colour = plt.get_cmap("tab10")(0)
    phases = [ins.analysis.phases[phase] for _, ins in cases]
    touched = [acc.address // 128 for ph in phases for acc in ph.accesses]
    lines = list(range(min(touched), max(touched) + 1))
    for ax in axes[len(cases):]:
        ax.set_axis_off()
    for ax, (label, ins), ph in zip(axes, cases, phases):
        width = ins.width
        nbanks = 128 // width
        cells: dict[tuple[int, int], list[int]] = {}
        for acc in ph.accesses:
            cells.setdefault((acc.address // 128, (acc.address % 128) // width), []).append(acc.lane)
        per_bank: dict[int, int] = {}
        for _, bank in cells:
            per_bank[bank] = per_bank.get(bank, 0) + 1
        for y in range(len(lines)):
            for bank in range(nbanks):
                ax.add_patch(Rectangle((bank - 0.45, y - 0.42), 0.9, 0.84, facecolor="0.94",
                                       edgecolor="none", zorder=0))
        for (line, bank), lanes in cells.items():
            y = lines.index(line)
            hot = per_bank[bank] > 1
            ax.add_patch(Rectangle((bank - 0.45, y - 0.42), 0.9, 0.84, facecolor=colour,
                                   edgecolor="crimson" if hot else "none",
                                   linewidth=2 if hot else 0, zorder=1))
            text = str(lanes[0]) if len(lanes) == 1 else f"{lanes[0]}-{lanes[-1]}"
            ax.text(bank, y, text, ha="center", va="center", color="white", zorder=2,
                    fontsize=8 if len(text) < 4 else 6.5)
        ax.set_xlim(-0.6, nbanks - 0.4)
        ax.set_ylim(len(lines) - 0.5, -0.5)
        ax.set_xticks(range(0, nbanks, max(1, nbanks // 8)))
        ax.set_yticks(range(len(lines)), [str(line) for line in lines], fontsize=8)
        ax.set_xlabel(f"{width}-byte bank (128 bytes = {nbanks} banks)")
        ax.set_ylabel("128-byte row of shared memory")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        lo, hi = min(ph.lanes), max(ph.lanes)
        ax.set_title(f"{label}\nphase {phase} (lanes {lo}-{hi}): {ph.wavefronts} "
                     f"wavefront{'s' if ph.wavefronts != 1 else ''}", fontsize=10)
    axes[0].figure.suptitle("One phase over banks as wide as the load: one wavefront when its "
                            "lanes use different banks (red: a bank asked for several elements)",
                            fontsize=11)
    axes[0].figure.tight_layout()
    return axes


# ------------------------------------------------------------------ the probe

def probe_wide():
    """Chapter 04's bank probe (Nsight Compute, one warp, one load per launch), its 8- and
    16-byte loads: what each pattern is, the model's wavefronts and the measured ones."""
    from gemm_kernels.memory import ch03_04_tiles
    full = ch03_04_tiles.probe_table()
    if full is None:
        return None
    import json
    from pathlib import Path
    path = Path(ch03_04_tiles.__file__).resolve().parents[2] / "tests" / "data" / "bank_probe.json"
    notes = {r["name"]: r.get("note", "") for r in json.loads(path.read_text())["results"]}
    rows = [{"bytes/lane": r["bytes/lane"], "load": notes.get(r["pattern"]) or r["pattern"],
             "model wf": r["model wf"], "measured wf": r["ncu wf"], "agree": r["agree"]}
            for r in full if r["bytes/lane"] > 4]
    agree = sum(r["agree"] == "yes" for r in rows)
    # The recording names the profiler as ncu prints it ("Version 2025.3.1.0"): say which tool.
    source = re.sub(r"Version (\d+\.\d+\.\d+)(\.\d+)?", r"Nsight Compute \1", full.title.split(";")[0])
    agreed = f"all {agree}" if agree == len(rows) else f"{agree} of {len(rows)}"
    return Table(rows, list(rows[0]), title=f"{source}: model and measurement agree on "
                 f"{agreed} wide loads")


# ------------------------------------------------------------------ the shared-memory bound

def _rate(kernel, params, size):
    from gemm_kernels.measure import lookup
    try:
        return lookup.measure_or_lookup(kernel, (size,) * 3, params)["gflops"]["median"]
    except LookupError:
        return None


def step_wavefronts(kernel, params, as_written: bool = False, a_pad: int = 0) -> dict:
    """One warp's shared-memory wavefronts per step along K (the model of what ptxas
    emits, averaged over the warps of the block): loads, stores, and the FMA
    instructions of the step (BLOCK * VEC per warp). as_written: dgemm_tiled's A read
    as the source writes it, one LDS.64 per k; a_pad: its rows of A_shared padded
    (`block_accesses`)."""
    from gemm_kernels.core.launch import kernel_of
    p = kernel_of(kernel).resolve(params)
    acc = instr.block_accesses(kernel, p, as_written, a_pad)
    nw = max(a.warp for a in acc) + 1
    out = {op: sum(a.analysis.wavefronts for a in acc if a.op == op) / nw for op in ("ld", "st")}
    return {**out, "total": out["ld"] + out["st"], "fma": p["BLOCK"] * p.get("VEC", 1)}


def recorded_step_wavefronts(kernel, params) -> float | None:
    """Nsight Compute's shared wavefronts (loads and stores) per warp and step, from the
    recorded launch totals; None where the recording has none."""
    from gemm_kernels.core.launch import kernel_of
    from gemm_kernels.memory import wavefronts
    k = kernel_of(kernel)
    p = k.resolve(params)
    m = wavefronts.recorded(k, p)
    if not m or m.get("ld wavefronts") is None:
        return None
    warps = p["BLOCK"] * p["BLOCK"] // WARP
    return (m["ld wavefronts"] + m["st wavefronts"]) / (instr.repeats(k, p, m["shape"]) * warps)


def smem_bound(kernel, params, as_written: bool = False) -> dict:
    """The rate shared memory alone allows: each SM serves one wavefront per clock (the
    device's clock as it reports it), and a warp's step costs `step_wavefronts` of them
    for BLOCK * VEC FMA instructions of 32 lanes (2 flops each). An upper bound: it
    leaves out the global loads, the barriers and everything else."""
    props = records.described_device()
    if not props or not props.get("sm_count") or not props.get("sm_clock_mhz"):
        raise ValueError("the bound needs the device's sm_count and sm_clock_mhz")
    w = step_wavefronts(kernel, params, as_written)
    bound = props["sm_count"] * props["sm_clock_mhz"] * 1e6 * w["fma"] * WARP * 2 / w["total"] / 1e9
    return {**w, "recorded": recorded_step_wavefronts(kernel, params), "bound": bound,
            "clock GHz": props["sm_clock_mhz"] / 1e3, "SMs": props["sm_count"]}


def fused_a_reading(block: int = 16) -> str:
    """What ptxas's fusing of A_shared[ty][k] and A_shared[ty][k + 1] into one LDS.128 is
    worth in dgemm_tiled: A's read wavefronts per warp and step, the step's total and the
    shared-memory bound, as the source reads A (one LDS.64 per k) and as ptxas emits it.
    Each line gives the ideal of one instruction next to its wavefronts: at BLOCK = 16 the
    LDS.64 merges both half-warps into one phase, whose two addresses share a bank, so it
    pays twice its ideal; the LDS.128 serves each half-warp's address in its own phase at
    its ideal. At BLOCK = 32 the warp reads one address and fusing saves nothing.
    The third line pads A_shared's rows by one double: the LDS.64 stays, but its two
    addresses fall in different banks, so it costs its ideal without any LDS.128."""
    p = {"BLOCK": block}
    lines = []
    for as_written, pad, how in ((True, 0, "as written"), (False, 0, "fused"),
                                 (True, 1, f"as written, rows of {block + 1}")):
        a = [x for x in instr.block_accesses("dgemm_tiled", p, as_written, pad)
             if x.op == "ld" and x.warp == 0 and x.what.startswith("A_shared")]
        lines.append((how, a, step_wavefronts("dgemm_tiled", p, as_written, pad)["total"]))
    out = [f"BLOCK = {block}, A read {how}: {len(a)} {a[0].sass} x {a[0].analysis.wavefronts} = "
           f"{sum(x.analysis.wavefronts for x in a)} wavefronts per warp and step "
           f"(ideal {a[0].analysis.ideal} per {a[0].sass}); "
           f"the whole step: {total:.0f}" for how, a, total in lines]
    try:
        slow, fast = (smem_bound("dgemm_tiled", p, w)["bound"] for w in (True, False))
    except ValueError:           # no device described: the wavefronts alone
        return "\n".join(out)
    return "\n".join(out + [f"shared-memory bound: {slow:,.0f} GFLOP/s as written, "
                            f"{fast:,.0f} fused ({fast / slow:.2f} x)"])


def _label(kernel, p) -> str:
    return " ".join(f"{n}={v}" for n, v in p.items() if n in ("BLOCK", "VEC"))


def bound_table(configs, size: int = SIZE):
    """Per (kernel, params): wavefronts per warp and step (model, and Nsight Compute's
    where recorded), FMA per step, the shared-memory bound, the
    recorded rate and its share of the bound."""
    from gemm_kernels.core.launch import kernel_of
    rows = []
    for name, params in configs:
        p = kernel_of(name).resolve(params)
        b = smem_bound(name, p)
        g = _rate(name, p, size)
        rows.append({"kernel": name, "params": _label(name, p),
                     "wavefronts/step": b["total"], "Nsight wavefronts/step": b["recorded"],
                     "FMA/step": b["fma"],
                     "bound GFLOP/s": b["bound"], f"GFLOP/s at {size}": g,
                     "% of bound": None if g is None else 100 * g / b["bound"]})
    b = smem_bound(*configs[0])
    return Table(rows, list(rows[0]),
                 title=f"shared-memory bound: {b['SMs']} SMs x 1 wavefront per clock x "
                       f"{b['clock GHz']:.2f} GHz; rates {records.recording_label()}")


def bound_plot(table, ax=None, title: str = ""):
    """Bars of a `bound_table`: the bound (pale) and the recorded rate (solid), with the
    share of the bound written on each bar."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(8.5, 0.55 * len(table) + 1.6))
    rate_col = next(c for c in table.columns if c.startswith("GFLOP/s at"))
    labels = [f"{r['kernel']} {r['params']}" for r in table]
    y = list(range(len(table)))[::-1]
    ax.barh(y, [r["bound GFLOP/s"] for r in table], color="tab:blue", alpha=0.25,
            label="shared-memory bound")
    ax.barh(y, [r[rate_col] or 0 for r in table], height=0.5, color="tab:blue",
            label=f"recorded, {rate_col.replace('GFLOP/s at ', '')}^3")
    for yy, r in zip(y, table):
        if r[rate_col]:
            ax.text(r[rate_col], yy, f" {r['% of bound']:.0f}% of bound", va="center", fontsize=9)
    ax.set_yticks(y, labels, fontsize=9)
    ax.set_xlabel("GFLOP/s")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18 - 0.3 / len(table)), ncol=2,
              fontsize=8, frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title(title or "Recorded rate against the rate shared memory alone allows",
                 fontsize=10)
    ax.figure.tight_layout()
    return ax


# ------------------------------------------------------------------ float: VEC = 1, 2, 4

def b_read_opcode(vec: int) -> str:
    return {1: "LDS", 2: "LDS.64", 4: "LDS.128"}[vec]


def store_conflict(kernel, params) -> int:
    """The worst conflict degree of the block's shared stores (model)."""
    return max((a.analysis.max_degree for a in instr.block_accesses(kernel, params)
                if a.op == "st"), default=0)


def vec_table(block: int = 16, size: int = SIZE, detail: bool = False):
    """`sgemm_tiled_vec` at BLOCK = `block`, VEC = 1, 2, 4: what changes with VEC. Per
    configuration, for one warp and one step along K: the width of the B read, the FFMA
    instructions (BLOCK * VEC: each A value feeds VEC of them), the shared loads (the
    model's, which the tests check against the SASS) and their wavefronts; then the
    registers of the timed binary and blocks per SM, blocks in the grid at size^3, the
    worst conflict of the B stores, the shared-memory bound and the recorded rate. Every
    row holds all of them; the table shows `VEC_MAIN` (the columns section 5 reads) unless
    `detail`."""
    import math
    from gemm_kernels.core import analysis
    from gemm_kernels.core.launch import kernel_of
    from gemm_kernels.measure import lookup
    k = kernel_of("sgemm_tiled_vec")
    rows = []
    for vec in (1, 2, 4):
        p = k.resolve({"BLOCK": block, "VEC": vec})
        loads = sum(n for f, n in instr.instruction_counts(k, p).items() if f.startswith("LDS"))
        b = smem_bound(k, p)
        binary = lookup.binary(k, p, (size,) * 3) or {}
        occ = analysis.kernel_occupancy(k, p, registers=binary.get("registers"))
        g = _rate(k.name, p, size)
        rows.append({"VEC": vec, "B read": b_read_opcode(vec), "FFMA/step": b["fma"],
                     "shared loads/step": loads, "wavefronts/step": b["total"],
                     "registers": binary.get("registers"), "blocks/SM": occ.blocks_per_sm,
                     "blocks in grid": math.prod(k.grid(p, (size,) * 3)),
                     "B store conflict": (lambda d: "none" if d <= 1 else f"{d}-way")(
                         store_conflict(k, p)),
                     "bound GFLOP/s": b["bound"], f"GFLOP/s at {size}": g,
                     "% of bound": None if g is None else 100 * g / b["bound"]})
    shown = list(rows[0]) if detail else [c for c in rows[0] if c not in VEC_DETAIL]
    return Table(rows, shown, title=f"sgemm_tiled_vec, BLOCK = {block}: one parameter, "
                 f"VEC; rates{' and registers' if detail else ''} {records.recording_label()}")


# The columns of `vec_table` that only its detailed form shows (appendix C): section 5's
# text names what they say in one line.
VEC_DETAIL = ("shared loads/step", "registers", "blocks in grid", "B store conflict")


def vec_plot(table, ax=None):
    """Recorded rate and shared-memory bound against VEC (a `vec_table`), each relative to
    VEC = 1: if shared memory sets the pace, the two lines rise together."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4))
    rate_col = next(c for c in table.columns if c.startswith("GFLOP/s at"))
    vecs = [r["VEC"] for r in table]
    r0, b0 = table[0][rate_col], table[0]["bound GFLOP/s"]
    ax.plot(vecs, [r["bound GFLOP/s"] / b0 for r in table], "o--", color="tab:blue",
            label="shared-memory bound (1 / wavefronts per FFMA)")
    if r0:
        ax.plot(vecs, [r[rate_col] / r0 for r in table], "s-", color="tab:orange",
                label=f"recorded rate, {rate_col.replace('GFLOP/s at ', '')}^3")
        for v, r in zip(vecs, table):
            ax.annotate(f"{r[rate_col]:,.0f} GFLOP/s", (v, r[rate_col] / r0),
                        textcoords="offset points", xytext=(6, -12), fontsize=8)
    ax.set_xticks(vecs, [f"VEC={v}\n{r['B read']}" for v, r in zip(vecs, table)])
    ax.set_ylabel("relative to VEC = 1")
    ax.margins(x=0.15, y=0.15)   # room for the rate labels, which sit below their points
    ax.legend(fontsize=8, loc="upper left")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title("sgemm_tiled_vec: the bound rises with VEC, the rate a little more",
                 fontsize=10)
    ax.figure.tight_layout()
    return ax


def scalar_or_vector(block: int = 16, k: int = 0):
    """Warp 0 reading its VEC neighbouring floats of row k of the B tile, B_shared[k][VEC
    * tx + j]: with one VEC-wide load (what the kernel does), or with VEC scalar LDS of
    the same floats. Wavefronts per warp for all VEC floats."""
    rows = []
    for vec in (1, 2, 4):
        width = block * vec

        def addr(j, w=4, vec=vec, width=width):
            return tile_read(lambda tx, ty: k, lambda tx, ty: vec * tx + j, width, block,
                             width=w, elem=4)
        one = banks.analyse(addr(0, 4 * vec), 4 * vec)
        scalar = [banks.analyse(addr(j), 4) for j in range(vec)]
        rows.append({"VEC": vec, "one vector load": f"{b_read_opcode(vec)}: {one.wavefronts}",
                     f"{vec} scalar LDS": f"{vec} x {scalar[0].wavefronts} = "
                                          f"{sum(a.wavefronts for a in scalar)}"})
    return Table([{"VEC": r["VEC"], "one vector load": r["one vector load"],
                   "VEC scalar LDS": next(v for c, v in r.items() if c.endswith("scalar LDS"))}
                  for r in rows], ["VEC", "one vector load", "VEC scalar LDS"],
                 title=f"B_shared[k][VEC*tx + j], BLOCK = {block}: wavefronts per warp for all "
                       "VEC floats (bank model)")


# ------------------------------------------------------------------ the chapter's readings

def ncu_agreement(configs) -> str:
    """How far Nsight Compute's recorded shared wavefronts are from the model's, over a
    launch at the profiled shape, for loads and for stores."""
    t = instr.comparison(configs)
    lines = []
    for op, what in (("ld", "loads"), ("st", "stores")):
        got = [r[f"{op} ncu vs model, %"] for r in t if r[f"{op} ncu vs model, %"] is not None]
        if not got:
            return "no Nsight Compute counters recorded for these kernels"
        worst = max(abs(x) for x in got) / 100
        extra = "" if op == "ld" else ", all of it booked as bank conflicts" \
            if instr.excess_is_conflicts(t) else ""
        if op == "st":   # the stores' excess set against all the shared traffic counted
            share = max((r["st wf ncu"] - r["st wf model"]) / (r["ld wf ncu"] + r["st wf ncu"])
                        for r in t if r["st wf ncu"] is not None)
            extra += f"; the extra store wavefronts are at most {100 * share:.2g}% of all " \
                     "the shared wavefronts counted"
        lines.append(f"{what}: Nsight Compute's wavefronts are within {100 * worst:.2g}% of "
                     f"the model's{extra}")
    return "\n".join(lines)


def dgemm_reading(block: int = 16, size: int = SIZE, cublas_sizes=(SIZE, 4096)) -> str:
    """dgemm_tiled at `block`: its shared-memory bound, the recorded rate at size^3, the
    FP64 FMA peak (64 FP64 FMA per SM per clock on compute capability 9.0: CUDA C++
    Programming Guide, throughput of arithmetic instructions) and cuBLAS DGEMM at the
    first of `cublas_sizes` the recording has (it has DGEMM at 4096^3 only)."""
    props = records.described_device()
    b = smem_bound("dgemm_tiled", {"BLOCK": block})
    peak = props["sm_count"] * 64 * 2 * props["sm_clock_mhz"] / 1e3
    g = _rate("dgemm_tiled", {"BLOCK": block}, size)
    cub, csize = next(((r, n) for n in cublas_sizes
                       for r in [_rate("cublas_dgemm", None, n)] if r), (None, None))
    lines = [f"BLOCK = {block}: {b['total']:.0f} wavefronts per {b['fma']} DFMA per warp and step "
             f"-> shared-memory bound {b['bound']:,.0f} GFLOP/s",
             f"FP64 FMA peak: {props['sm_count']} SMs x 64 x 2 x {props['sm_clock_mhz'] / 1e3:.2f} "
             f"GHz = {peak:,.0f} GFLOP/s; the bound is {100 * b['bound'] / peak:.0f}% of it"]
    if g:
        lines.append(f"dgemm_tiled at {size}^3: {g:,.0f} GFLOP/s = {100 * g / b['bound']:.0f}% of "
                     f"the bound, {100 * g / peak:.0f}% of the FP64 FMA peak")
    if cub:
        lines.append(f"cuBLAS DGEMM at {csize}^3: {cub:,.0f} GFLOP/s, {cub / peak:.1f} x the "
                     "FP64 FMA peak")
    return "\n".join(lines)


def float_and_double(block: int = 16, size: int = SIZE) -> str:
    """The same tiling in float (sgemm_tiled_vec, VEC = 1) and in double (dgemm_tiled) at
    `block`: wavefronts per warp and step for the same FMA, the shared-memory bound and
    the recorded rate at size^3, then double's ratio to float for each. An 8-byte element
    fills a wavefront with half as many values as a 4-byte one."""
    got, lines = [], []
    for name, p, what in (("sgemm_tiled_vec", {"BLOCK": block, "VEC": 1}, "float "),
                          ("dgemm_tiled", {"BLOCK": block}, "double")):
        b, g = smem_bound(name, p), _rate(name, p, size)
        got.append((b, g))
        rate = f"; recorded at {size}^3: {g:,.0f} GFLOP/s" if g else ""
        lines.append(f"{what} ({name}, BLOCK = {block}): {b['total']:.0f} wavefronts per "
                     f"{b['fma']} FMA per warp and step -> bound {b['bound']:,.0f} GFLOP/s{rate}")
    (bf, gf), (bd, gd) = got
    rate = f", recorded rate x {gd / gf:.2f}" if gf and gd else ""
    lines.append(f"double against float: wavefronts x {bd['total'] / bf['total']:.1f}, "
                 f"bound x {bd['bound'] / bf['bound']:.2f}{rate}")
    return "\n".join(lines)


def vec_steps(block: int = 16) -> str:
    """Per VEC: one warp's wavefronts and FFMA per step of `sgemm_tiled_vec` (model)."""
    out = []
    for vec in (1, 2, 4):
        w = step_wavefronts("sgemm_tiled_vec", {"BLOCK": block, "VEC": vec})
        out.append(f"VEC = {vec}: {w['total']:.0f} wavefronts ({w['ld']:.0f} loads, {w['st']:.0f} "
                   f"stores) for {w['fma']} FFMA per warp and step")
    return "\n".join(out)


def vec_reading(table) -> str:
    """How much VEC = 2 and 4 gain over VEC = 1 in a `vec_table`: the bound and the rate."""
    rate_col = next(c for c in table.columns if c.startswith("GFLOP/s at"))
    r0, b0 = table[0][rate_col], table[0]["bound GFLOP/s"]
    return "\n".join(
        f"VEC = {r['VEC']} against VEC = 1: bound x {r['bound GFLOP/s'] / b0:.2f}, recorded rate "
        f"x {r[rate_col] / r0:.2f}" for r in table[1:] if r0 and r[rate_col])


# ------------------------------------------------------------------ the exercise, for the solution

EXERCISE = "11_dgemm"


def transposed_cases(pitch: int, block: int = 16, k: int = 0) -> list[tuple[str, WarpInstr]]:
    """Warp 0's store B_shared[tx][ty] (an STS.64) and read B_shared[tx][k] of a transposed
    B tile with rows of `pitch` doubles; the read as ptxas emits it: one LDS.128 for k and
    k + 1 where the rows keep them 16-byte aligned (even pitch), else an LDS.64."""
    store = tile_read(lambda tx, ty: tx, lambda tx, ty: ty, pitch, block)
    wide = pitch % 2 == 0
    kk = k - k % 2 if wide else k
    read = tile_read(lambda tx, ty: tx, lambda tx, ty: kk, pitch, block, width=16 if wide else 8)
    what = f"B_shared[tx][{kk}..{kk + 1}]" if wide else f"B_shared[tx][{kk}]"
    return [(f"rows of {pitch}: STS.64 B_shared[tx][ty]",
             WarpInstr("st", "store", 0, 8, store)),
            (f"rows of {pitch}: {'LDS.128' if wide else 'LDS.64'} {what}",
             WarpInstr("ld", "read", 0, 16 if wide else 8, read))]


def plot_transposed_store(block: int = 16, ax=None):
    """The exercise's store B_shared[tx][ty] = b with rows of `block` doubles (no padding),
    drawn as the tile: the cell in row tx, column ty is written by thread (tx, ty), named
    by its warp and lane, and coloured by its 8-byte bank. Outlined: the 16 lanes of one
    STS.64 phase (warp 0's first half-warp: ty = 0, tx = 0 to 15), which all write one
    column, so one bank; the title gives that phase's wavefronts from the bank model."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 10.5), layout="constrained")
    nbanks = 128 // 8
    # tab20 comes in pairs of one hue; taking its dark colours first keeps neighbouring
    # banks (the two columns of one warp) in different hues, so colour does not read as warp
    tab20 = plt.get_cmap("tab20")
    colours = lambda bank: tab20(2 * bank if bank < 10 else 2 * (bank - 10) + 1)
    for tx in range(block):
        for ty in range(block):
            thread = ty * block + tx
            bank = (tx * block + ty) % nbanks
            ax.add_patch(Rectangle((ty, tx), 1, 1, facecolor=colours(bank), alpha=0.55,
                                   edgecolor="white"))
            ax.text(ty + 0.5, tx + 0.5, f"w{thread // WARP}\nl{thread % WARP}", ha="center",
                    va="center", fontsize=8.5)
    store = transposed_cases(block, block)[0][1]
    phase = store.analysis.phases[0]
    ax.add_patch(Rectangle((0, 0), 1, block, facecolor="none", edgecolor="crimson", lw=2.5))
    ax.set_xlim(0, block)
    ax.set_ylim(block, 0)
    ax.set_xticks([c + 0.5 for c in range(block)], [str(c) for c in range(block)])
    ax.set_yticks([r + 0.5 for r in range(block)], [str(r) for r in range(block)])
    ax.set_xlabel(f"column of B_shared = ty (colour: its 8-byte bank; rows of {block} doubles "
                  f"are 128 bytes, so the bank is the column)")
    ax.set_ylabel("row of B_shared = tx")
    ax.set_title(f"STS.64 B_shared[tx][ty], rows of {block}: cell = the thread that writes it "
                 f"(w: warp, l: lane).\nOutlined: one store phase, lanes {min(phase.lanes)}-"
                 f"{max(phase.lanes)} of warp 0 (ty = 0): one column, one bank, "
                 f"{phase.wavefronts} wavefronts", fontsize=10)
    return ax


DECLARATION = "__shared__ double B_shared[BLOCK][BLOCK + 1];"
STORE = "B_shared[threadIdx.x][threadIdx.y] = b;"
READ = "B_shared[threadIdx.x][k];"
# (answer, [(text of the solution, replacement), ...])
ANSWERS = (
    ("rows of 16 doubles, no padding",
     [(DECLARATION, "__shared__ double B_shared[BLOCK][BLOCK];")]),
    ("rows of 18: padded, and still 16-byte aligned",
     [(DECLARATION, "__shared__ double B_shared[BLOCK][BLOCK + 2];")]),
    ("rows of 20",
     [(DECLARATION, "__shared__ double B_shared[BLOCK][BLOCK + 4];")]),
    ("rows of 16, column swizzled: [tx][ty ^ tx], read [tx][k ^ tx]",
     [(DECLARATION, "__shared__ double B_shared[BLOCK][BLOCK];"),
      (STORE, "B_shared[threadIdx.x][threadIdx.y ^ threadIdx.x] = b;"),
      (READ, "B_shared[threadIdx.x][k ^ threadIdx.x];")]),
    ("rows of 17, read one element late: [tx][k + 1]",
     [(READ, "B_shared[threadIdx.x][k + 1];")]),
    ("B not transposed: [ty][tx], read [k][tx]",
     [(STORE, "B_shared[threadIdx.y][threadIdx.x] = b;"), (READ, "B_shared[k][threadIdx.x];")]),
)


def answers() -> Table:
    """The solution changed into each of ANSWERS, through the grader's steps 1 and 2 (the
    compiler and the layout check, which need no GPU): the verdict of step 2, and what it
    says, or the registers where it passes."""
    from gemm_kernels.exercises.grader import grade
    src = solution_source(EXERCISE)
    rows = []
    for what, changes in ANSWERS:
        text = src
        for old, new in changes:
            if old not in text:
                raise ValueError(f"the solution no longer holds {old!r}")
            text = text.replace(old, new, 1)
        report = grade(EXERCISE, text, gpu=False, emulate=False)
        static = report.steps[1]
        rows.append({"answer": what, "step 2": static.status, "what the grader says": static.detail})
    return Table(rows, ["answer", "step 2", "what the grader says"],
                 title="the solution changed into other answers, through steps 1-2 of the grader")


# ------------------------------------------------------------------ the wide load alone

# sgemm_tiled_vec with the same tile and the same stores, where each thread owns the
# columns tx + j * BLOCK instead of VEC * tx + j: it reads its VEC floats of B with VEC
# scalar LDS, as many wavefronts as the one vector load (lanes on consecutive words),
# VEC times as many instructions. The pair isolates what the width of the load buys.
CONTROL = (
    ("            const V b = reinterpret_cast<const V*>(&B_shared[k][0])[tx];\n", ""),
    ("for (int j = 0; j < VEC; ++j) acc[j] += a * lane<VEC>(b, j);",
     "for (int j = 0; j < VEC; ++j) acc[j] += a * B_shared[k][tx + j * BLOCK];"),
    ("const int c = col0 + tx * VEC + j;", "const int c = col0 + tx + j * BLOCK;"),
)


def control_kernel():
    """The control of `CONTROL` as a kernel: `sgemm_tiled_vec`'s tunables, launch and
    checks around the changed source."""
    from gemm_kernels.core.launch import kernel_of
    k = kernel_of("sgemm_tiled_vec")
    text = k.source_text()
    for old, new in CONTROL:
        if text.count(old) != 1:
            raise ValueError(f"sgemm_tiled_vec's source no longer holds {old.strip()!r} once")
        text = text.replace(old, new)
    return k.with_code(text, name="sgemm_tiled_vec:scalar_B", source=k.source)


def control_source() -> str:
    """The lines of the control that differ from `sgemm_tiled_vec`, as a diff would show
    them ('-' the kernel's, '+' the control's)."""
    out = []
    for old, new in CONTROL:
        out.append("- " + old.strip())
        if new:
            out.append("+ " + new.strip())
    return "\n".join(out)


def _loop_counts(k, p) -> dict:
    from gemm_kernels.core import analysis, compiler
    loop = analysis.main_loop(compiler.sass(k, p))
    count = lambda f: sum(1 for _, op, _ in loop if op == f)
    return {"LDS": count("LDS"), "LDS.64": count("LDS.64"), "LDS.128": count("LDS.128"),
            "FFMA": count("FFMA")}


def control_table(block: int = 16) -> Table:
    """The vector kernel against its control at each VEC: the shared loads and FFMA of the
    compiled main loop (SASS compiled here), and one warp's wavefronts for the B read of
    one k (bank model). The control has the wavefronts of the vector load and VEC times
    as many B instructions."""
    from gemm_kernels.core import compiler
    from gemm_kernels.core.launch import kernel_of
    vec_k, ctl = kernel_of("sgemm_tiled_vec"), control_kernel()
    rows = []
    for vec in (1, 2, 4):
        p = vec_k.resolve({"BLOCK": block, "VEC": vec})
        width = block * vec                                  # floats in a row of the B tile
        one = banks.analyse(tile_read(lambda tx, ty: 0, lambda tx, ty: vec * tx, width, block,
                                      width=4 * vec, elem=4), 4 * vec).wavefronts
        scalar = [banks.analyse(tile_read(lambda tx, ty: 0, lambda tx, ty, j=j: tx + j * block,
                                          width, block, width=4, elem=4), 4).wavefronts
                  for j in range(vec)]
        for who, k, wf in (("vector load", vec_k, f"{one}"),
                           ("control: scalar loads", ctl, f"{vec} x {scalar[0]} = {sum(scalar)}")):
            c = _loop_counts(k, p)
            rows.append({"VEC": vec, "kernel": who,
                         "shared loads in the loop": ", ".join(f"{n} {f}" for f, n in c.items()
                                                               if f.startswith("LDS") and n),
                         "FFMA in the loop": c["FFMA"], "B wavefronts per warp and k": wf})
    return Table(rows, list(rows[0]), title=f"BLOCK = {block}: the vector kernel and its control, "
                 f"main loop compiled here by ptxas {compiler.ptxas_version()}; wavefronts: "
                 "bank model, warp 0")


def control_recorded(block: int = 16, size: int = SIZE, detail: bool = False) -> Table:
    """The control as recorded: at each VEC, the vector kernel and its control timed in
    one run (each beside cuBLAS in the same process): GFLOP/s median and range (the
    slowest and fastest call, shown as one column), the share of the shared-memory bound
    (the same bound for both: the same wavefronts); with `detail`, also the share of cuBLAS,
    the registers of the binaries timed and the blocks per SM they allow. Rows without a
    recording say so."""
    from gemm_kernels.core import analysis
    from gemm_kernels.measure import timing
    from gemm_kernels.measure import lookup
    regs = lambda r: (r.get("binary") or {}).get("registers") if r else None
    rows = []
    for vec in (1, 2, 4):
        p = {"BLOCK": block, "VEC": vec}
        ctl = lookup.variant_row(control_kernel(), (size,) * 3, p)
        vec_rows = [r for r in records.current().find("sgemm_tiled_vec", (size,) * 3, p)
                    if ctl is None or r.get("run") == ctl.get("run")]
        bound = smem_bound("sgemm_tiled_vec", p)["bound"]
        for who, kernel, r in (
                ("vector load", "sgemm_tiled_vec", vec_rows[0] if vec_rows else None),
                ("control: scalar loads", control_kernel(), ctl)):
            g = r["gflops"] if r else None
            rows.append({"VEC": vec, "kernel": who,
                         f"GFLOP/s at {size}, median": g["median"] if g else None,
                         "fastest call": g["max"] if g else None,
                         "slowest call": g["min"] if g else None,
                         "slowest to fastest call": f"{g['min']:,.0f} to {g['max']:,.0f}"
                         if g else None,
                         "% of cuBLAS": timing.share(r) if r else None,
                         "% of bound": 100 * g["median"] / bound if g else None,
                         "registers": regs(r),
                         "blocks/SM": analysis.kernel_occupancy(
                             kernel, p, registers=regs(r)).blocks_per_sm if regs(r) else None})
    shown = [c for c in rows[0] if c not in ("fastest call", "slowest call")
             and (detail or c not in ("% of cuBLAS", "registers", "blocks/SM"))]
    return Table(rows, shown, title=f"BLOCK = {block}: the vector kernel and its "
                 f"control, timed in one run; {records.recording_label()}")


def control_reading(table) -> str:
    """Per VEC: the control's rate as a share of the vector kernel's, and whether their
    ranges of timed calls overlap."""
    rate = next(c for c in table.columns if c.startswith("GFLOP/s at"))
    out = []
    for vec in sorted({r["VEC"] for r in table}):
        v, c = (next(r for r in table if r["VEC"] == vec and r["kernel"].startswith(w))
                for w in ("vector", "control"))
        if v[rate] is None or c[rate] is None:
            out.append(f"VEC = {vec}: not recorded")
            continue
        lo_v, hi_c = v["slowest call"], c["fastest call"]
        out.append(f"VEC = {vec}: the control runs at {100 * c[rate] / v[rate]:.1f}% of the "
                   f"vector kernel; " + ("their ranges do not overlap" if hi_c < lo_v else
                                         "their ranges overlap"))
    return "\n".join(out)


def control_gains(table) -> str:
    """From VEC = 1 to each larger VEC of a `control_recorded` table, on one scale: the
    rate gain of the vector kernel, that of its control (the same wavefronts and reuse
    of A, scalar loads of B), and the factor the wide load adds on top of the control."""
    rate = next(c for c in table.columns if c.startswith("GFLOP/s at"))
    r = {(x["VEC"], x["kernel"].split(":")[0].split()[0]): x[rate] for x in table}
    out = []
    for vec in sorted({x["VEC"] for x in table} - {1}):
        v0, c0, v, c = r[1, "vector"], r[1, "control"], r[vec, "vector"], r[vec, "control"]
        if None in (v0, c0, v, c):
            out.append(f"VEC = 1 to {vec}: not recorded")
            continue
        out.append(f"VEC = 1 to {vec}: the vector kernel x {v / v0:.2f}, the control "
                   f"x {c / c0:.2f}; the wide load adds x {(v / v0) / (c / c0):.2f} on top")
    return "\n".join(out)


def control_timing(block: int = 16, size: int = SIZE):
    """On a GPU: the vector kernel and its control at each VEC, checked on a ragged shape
    and timed together at size^3 (GFLOP/s, medians). Without a GPU, the recorded timing
    (`control_recorded`)."""
    from gemm_kernels.core import device
    if not device.is_live():
        return control_recorded(block, size)
    import cupy
    from gemm_kernels.core.launch import kernel_of, launcher
    from gemm_kernels.measure import timing
    from gemm_kernels.measure.check import check, random_normal
    vec_k, ctl = kernel_of("sgemm_tiled_vec"), control_kernel()
    rng = cupy.random.default_rng()
    A, B = (random_normal((size, size), "float32", rng) for _ in range(2))
    rows = []
    for vec in (1, 2, 4):
        p = vec_k.resolve({"BLOCK": block, "VEC": vec})
        verdict = check(ctl, (127, 129, 45), p)
        if not verdict.ok:
            raise RuntimeError(f"the control is wrong at VEC = {vec}: {verdict.message}")
        C1, C2 = cupy.empty((size, size), "float32"), cupy.empty((size, size), "float32")
        t = timing.time_gpu({"vector load": launcher(vec_k, A, B, C1, params=p),
                             "control: scalar loads": launcher(ctl, A, B, C2, params=p)})
        rows += [{"VEC": vec, "kernel": who,
                  f"GFLOP/s at {size}": timing.gflops((size,) * 3, x.median_ms)}
                 for who, x in t.items()]
    return Table(rows, list(rows[0]), title=f"BLOCK = {block}, timed together on "
                 f"{device.properties()['name']}")


# ------------------------------------------------------------------ what the exercise trades

def pitch_table(block: int = 16, pitches=range(16, 24)) -> Table:
    """The transposed B tile with rows of P doubles, for each P: the store B_shared[tx][ty]
    (STS.64) and the read B_shared[tx][k] as ptxas emits it (one LDS.128 for k and k + 1
    where P is even, else one LDS.64 per k), each with warp 0's wavefronts and its least.
    No P gives both a conflict-free store and a fused, conflict-free read."""
    rows = []
    for pitch in pitches:
        (_, st), (_, ld) = transposed_cases(pitch, block)
        s, r = st.analysis, ld.analysis
        rows.append({"P": pitch, "store (STS.64): wavefronts": s.wavefronts,
                     "read": ld.sass, "read: wavefronts": r.wavefronts,
                     "least, store / read": f"{s.ideal} / {r.ideal}",
                     "both conflict-free": "yes" if (s.wavefronts, r.wavefronts) ==
                     (s.ideal, r.ideal) else "no",
                     "both conflict-free, read fused": "yes" if ld.width == 16 and
                     (s.wavefronts, r.wavefronts) == (s.ideal, r.ideal) else "no"})
    return Table(rows, list(rows[0]), title=f"B_shared[BLOCK][P], BLOCK = {block}: warp 0, bank "
                 "model (per k for an LDS.64, per k and k + 1 for an LDS.128)")


def swapped_halves(block: int = 16) -> Text:
    """The layout that escapes Part 2's parity argument by not keeping k in the low half of
    its slot: rows of 16 doubles, element k of row tx in 16-byte slot (k >> 1) ^ (tx & 7),
    in half (k & 1) ^ (tx >> 3). Warp 0's STS.64 store and LDS.128 read of the pair
    (k, k + 1), priced by the bank model at every k, and the step they give. A thread with
    tx >= 8 gets its pair back swapped, so the read needs hand-written double2 code and a
    per-thread swap: ptxas does not fuse it from plain indexing. The second line prices
    the plain XOR swizzle, element k of row tx at column k ^ tx, read the same way as a
    double2 at column (k ^ tx) & ~1: lanes tx and tx ^ 1 of a quarter-warp then share a
    16-byte bank, a 2-way conflict."""
    if block != 16:
        raise ValueError("swapped_halves is written for rows of 16 doubles (8 slots, tx < 16)")
    slot = lambda k, tx: (k >> 1) ^ (tx & 7)
    st = WarpInstr("st", "B_shared[tx][2 * slot + half]", 0, 8, tuple(
        (block * tx + 2 * slot(ty, tx) + ((ty & 1) ^ (tx >> 3))) * 8 for tx, ty in _lanes(block)))
    reads = [_load("B_shared[tx][2 * slot]", 16, tuple((block * tx + 2 * slot(k, tx)) * 8
                                                       for tx, _ in _lanes(block)))
             for k in range(0, block, 2)]
    ld = max(r.analysis.wavefronts for r in reads)
    acc = instr.block_accesses("dgemm_tiled", {"BLOCK": block})
    a = sum(x.analysis.wavefronts for x in acc if x.warp == 0 and x.what.startswith("A_shared"))
    total = a + st.analysis.wavefronts + len(reads) * ld
    xor_st = WarpInstr("st", "B_shared[tx][ty ^ tx]", 0, 8, tuple(
        (block * tx + (ty ^ tx)) * 8 for tx, ty in _lanes(block)))
    xor_reads = [_load("B_shared[tx][(k ^ tx) & ~1]", 16, tuple(
        (block * tx + ((k ^ tx) & ~1)) * 8 for tx, _ in _lanes(block))) for k in range(0, block, 2)]
    xor_ld = sorted({r.analysis.wavefronts for r in xor_reads})
    xor_ld = f"{xor_ld[0]} at every k" if len(xor_ld) == 1 else f"{xor_ld[-1]} at worst over k"
    return Text(f"slot (k >> 1) ^ (tx & 7), half (k & 1) ^ (tx >> 3): the store (STS.64) costs "
                f"{st.analysis.wavefronts} wavefronts (least {st.analysis.ideal}), the read "
                f"(LDS.128 per two k) {ld} at worst over k (least {reads[0].analysis.ideal}); "
                f"{total} wavefronts per warp and step, as rows of {block + 1} "
                f"({transposed_step(block + 1, block)['total']})\n"
                f"plain k ^ tx, read as double2: the store (STS.64) costs "
                f"{xor_st.analysis.wavefronts} wavefronts (least {xor_st.analysis.ideal}), the "
                f"read (LDS.128 per two k) {xor_ld} (least {xor_reads[0].analysis.ideal})")


# The worked solution changed into the swapped-halves layout of `swapped_halves`: B rows of
# 16 doubles, element k of row tx in 16-byte slot (k >> 1) ^ (tx & 7), half
# (k & 1) ^ (tx >> 3), read as one double2 per two k with the pair swapped back for
# tx >= 8. The grader reads plain indices only, so this text is compiled and run here.
SWAPPED = (
    ("    __shared__ double B_shared[BLOCK][BLOCK + 1];\n",
     "    static_assert(BLOCK == 16, \"tx & 7 and tx >> 3 split 16 columns into two halves\");\n"
     "    __shared__ __align__(16) double B_shared[BLOCK][BLOCK];\n"),
    ("        B_shared[threadIdx.x][threadIdx.y] = b;\n",
     "        const int tx = threadIdx.x, ty = threadIdx.y;\n"
     "        B_shared[tx][2 * ((ty >> 1) ^ (tx & 7)) + ((ty & 1) ^ (tx >> 3))] = b;\n"),
    ("        for (int k = 0; k < BLOCK; ++k) {\n",
     "        for (int k = 0; k < BLOCK; k += 2) {\n"),
    ("            acc += A_shared[threadIdx.y][k] * B_shared[threadIdx.x][k];\n",
     "            const double2 p = reinterpret_cast<const double2*>(B_shared[tx])[(k >> 1) ^ (tx & 7)];\n"
     "            const bool swapped = tx >= 8;   // this thread's pair is stored high half first\n"
     "            acc += A_shared[ty][k] * (swapped ? p.y : p.x);\n"
     "            acc += A_shared[ty][k + 1] * (swapped ? p.x : p.y);\n"),
)


def _swapped_text() -> str:
    return apply(solution_source(EXERCISE), SWAPPED, "the swapped-halves kernel")


def swapped_halves_source() -> str:
    """The lines of the swapped-halves kernel that differ from the worked solution, as a
    diff would show them ('-' the solution's, '+' the swapped-halves kernel's)."""
    out = []
    for old, new in SWAPPED:
        out += ["- " + line.strip() for line in old.splitlines()]
        out += ["+ " + line.strip() for line in new.splitlines()]
    return "\n".join(out)


def swapped_halves_checked(block: int = 16) -> str:
    """The swapped-halves kernel compiled here (its main loop next to the worked
    solution's) and run on the CPU, every thread emulated, on the grader's shapes."""
    import collections
    from gemm_kernels.core import analysis, compiler
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.cpu_step import correct_on_cpu
    from gemm_kernels.exercises.submission import submission_kernel
    out = []
    for who, text in (("the swapped-halves kernel", _swapped_text()),
                      ("the worked solution (rows of 17)", solution_source(EXERCISE))):
        loop = analysis.main_loop(compiler.sass(submission_kernel(EXERCISE, "dgemm_tiled", text),
                                                {"BLOCK": block}))
        n = collections.Counter(op for _, op, _ in loop)
        kinds = ", ".join(f"{n[f]} {f}" for f in ("STS.64", "LDS.128", "LDS.64", "DFMA") if n[f])
        out.append(f"{who}: {len(loop)} instructions, among them {kinds}")
    ok, detail = correct_on_cpu(submission_kernel(EXERCISE, "dgemm_tiled", _swapped_text()),
                                get(EXERCISE).params)
    out.append(f"the swapped-halves kernel, run {detail}" if ok else
               f"the swapped-halves kernel on the CPU: {'WRONG' if ok is False else 'not run'}: {detail}")
    return "main loop compiled here, one trip per tile:\n" + "\n".join(out)


def exercise_step(*pitches: int, block: int = 16) -> str:
    """One warp's shared wavefronts per step along K of the exercise's kernel with B rows
    of each of `pitches` doubles (default 17), part by part (`transposed_step`), next to
    the chapter's dgemm_tiled; then both kernels' compiled main loops."""
    chapter = step_wavefronts("dgemm_tiled", {"BLOCK": block})["total"]
    lines = []
    for pitch in pitches or (17,):
        t = transposed_step(pitch, block)
        lines.append(f"rows of {pitch}: stores {t['A store']} (A) + {t['B store']} (B), reads "
                     f"{t['A reads']} (A, {block // 2} LDS.128) + {t['B reads per step']} x "
                     f"{t['B read wavefronts']} (B, {t['B reads per step']} {t['B read']}) = "
                     f"{t['total']} wavefronts per warp and step; the chapter's dgemm_tiled: "
                     f"{chapter:.0f}")
    return "\n".join(lines + [solution_loop(block)])


def transposed_step(pitch: int, block: int = 16) -> dict:
    """One warp's shared wavefronts per step along K of the exercise's kernel with B stored
    transposed in rows of `pitch` doubles: A's store and reads as in the chapter's kernel,
    B's STS.64 store, and B's read as ptxas emits it (an LDS.128 per two k where the rows
    keep k and k + 1 16-byte aligned, an LDS.64 per k where they do not)."""
    acc = instr.block_accesses("dgemm_tiled", {"BLOCK": block})
    a = {op: sum(x.analysis.wavefronts for x in acc
                 if x.op == op and x.warp == 0 and x.what.startswith("A_shared"))
         for op in ("st", "ld")}
    (_, st), (_, ld) = transposed_cases(pitch, block)
    reads = block // 2 if ld.width == 16 else block
    return {"A store": a["st"], "A reads": a["ld"], "B store": st.analysis.wavefronts, "B read": ld.sass,
            "B reads per step": reads, "B read wavefronts": ld.analysis.wavefronts,
            "total": a["st"] + st.analysis.wavefronts + a["ld"] + reads * ld.analysis.wavefronts}


def exercise_payoff(block: int = 16, pitches=(16, 17, 18)) -> Table:
    """What the exercise's layout buys, priced by the bank model: the kernel with B stored
    transposed in rows of P doubles, per P one warp's shared wavefronts per step along K
    (`transposed_step`) and the shared-memory bound that implies (`smem_bound`'s
    arithmetic). The chapter's kernel comes first. Rows of 16 are the transposed layout
    nobody padded: why padding pays."""
    props = records.described_device()
    clock = props["sm_count"] * props["sm_clock_mhz"] * 1e6 if props else None
    bound = lambda total: clock * block * WARP * 2 / total / 1e9 if clock else None
    chapter = step_wavefronts("dgemm_tiled", {"BLOCK": block})["total"]
    b = {x.op: x.analysis.wavefronts for x in instr.block_accesses("dgemm_tiled", {"BLOCK": block})
         if x.warp == 0 and x.what.startswith("B_shared")}
    # The B columns price one warp instruction (STS.64 or the LDS of the read), not a step:
    # their headers say so, since the step's total sits beside them.
    st_col, ld_col = ("B store (STS.64): wavefronts per warp instruction",
                      "B read: wavefronts per warp instruction")
    rows = [{"layout": "the chapter's kernel: B as it is, rows of 16",
             st_col: b["st"], "B read": "LDS.64 per k", ld_col: b["ld"],
             "wavefronts per warp and step": chapter, "shared-memory bound, GFLOP/s": bound(chapter)}]
    for pitch in pitches:
        t = transposed_step(pitch, block)
        rows.append({"layout": f"B transposed, rows of {pitch}", st_col: t["B store"],
                     "B read": f"{t['B read']} per {'two k' if t['B read'] == 'LDS.128' else 'k'}",
                     ld_col: t["B read wavefronts"],
                     "wavefronts per warp and step": t["total"],
                     "shared-memory bound, GFLOP/s": bound(t["total"])})
    return Table(rows, list(rows[0]), title=f"BLOCK = {block}: bank model (sm_90 rules), warp 0; "
                 "the bound: one wavefront per SM and clock" +
                 (f", {props['sm_count']} SMs at {props['sm_clock_mhz'] / 1e3:.2f} GHz" if props else ""))


def check_step(rows17: int | None = None, rows18: int | None = None, block: int = 16):
    """Part 3 of exercise 11, graded here: the student's wavefronts per warp and step for
    the transposed kernel with rows of 17 and with rows of 18 doubles, against
    `transposed_step`; a hint per wrong number that names the parts to count, not the sum."""
    if rows17 is None or rows18 is None:
        return Text("Part 3: not answered yet. Write your two numbers in this cell, "
                    "check_step(rows17=..., rows18=...), and run it.")
    odd, even = transposed_step(block + 1, block), transposed_step(block + 2, block)
    out = []
    parts = (f"Add four parts: the A store and the B store (one STS.64 each), the A reads "
             f"({block // 2} LDS.128, as in the chapter's kernel) and the B reads")
    if rows17 != odd["total"]:
        out.append(f"rows17 = {rows17}: not yet. {parts}. With rows of {block + 1}, "
                   f"ptxas reads B with one {odd['B read']} per k, {odd['B reads per step']} "
                   "of them; "
                   "price each with the rules of sections 1 and 2.")
    if rows18 != even["total"]:
        out.append(f"rows18 = {rows18}: not yet. {parts}. With rows of {block + 2}, "
                   f"ptxas reads B with one {even['B read']} per two k, "
                   f"{even['B reads per step']} of them; the store is the one of Part 2.")
    if out:
        return Text("Part 3: " + "\n".join(out))
    return Text(f"Part 3: right. Rows of {block + 1}: {odd['total']} wavefronts per warp and "
                f"step; rows of {block + 2}: {even['total']}. The fused read saves "
                f"{odd['B reads per step'] - even['B reads per step']} instructions per step "
                f"and no wavefronts; its store conflict costs {even['total'] - odd['total']} "
                "wavefronts more.")


def solution_loop(block: int = 16) -> str:
    """The main loop of the chapter's dgemm_tiled and of the exercise's solution as
    compiled here: how many instructions, and the shared accesses and DFMA among them."""
    import collections
    from gemm_kernels.core import analysis, compiler
    from gemm_kernels.core.launch import kernel_of
    from gemm_kernels.exercises.submission import submission_kernel
    out = []
    for who, k in (("the chapter's dgemm_tiled", kernel_of("dgemm_tiled")),
                   ("the solution", submission_kernel(EXERCISE, "dgemm_tiled", solution_source(EXERCISE)))):
        loop = analysis.main_loop(compiler.sass(k, {"BLOCK": block}))
        n = collections.Counter(op for _, op, _ in loop)
        kinds = ", ".join(f"{n[f]} {f}" for f in ("STS.64", "LDS.128", "LDS.64", "DFMA") if n[f])
        out.append(f"{who}: {len(loop)} instructions, among them {kinds}")
    return "main loop compiled here, one trip per tile: " + "; ".join(out)


def transposed_loads(pitches=(16, 17, 18), block: int = 16) -> str:
    """The worked solution compiled here with B rows of each pitch: the shared loads of its
    main loop as ptxas emits them, which shows where it fuses B's reads of k and k + 1
    into one LDS.128 (A's reads are 8 LDS.128 at every pitch)."""
    import collections
    from gemm_kernels.core import analysis, compiler
    from gemm_kernels.exercises.submission import submission_kernel
    src, padded = solution_source(EXERCISE), "B_shared[BLOCK][BLOCK + 1]"
    if padded not in src:
        raise ValueError(f"the solution no longer declares {padded}")
    out = []
    for pitch in pitches:
        k = submission_kernel(EXERCISE, "dgemm_tiled", src.replace(padded, f"B_shared[BLOCK][{pitch}]"))
        n = collections.Counter(op for _, op, _ in analysis.main_loop(compiler.sass(k, {"BLOCK": block})))
        out.append(f"rows of {pitch}: " + ", ".join(f"{n[f]} {f}" for f in ("LDS.128", "LDS.64") if n[f]))
    return ("shared loads in the main loop, compiled here, one trip per tile:\n" + "\n".join(out))


DGEMM_STALLS = "ch11_dgemm_stalls"
_STALL_REASONS = (("long_scoreboard", "long scoreboard"), ("barrier", "barrier"),
                  ("mio_throttle", "MIO throttle"), ("short_scoreboard", "short scoreboard"))


def _per_warp_dfma(row) -> tuple[dict, float, float]:
    """A profiled row's metrics, its warp DFMA and its instructions issued per warp DFMA."""
    import math
    dfma = math.prod(row["shape"]) / WARP
    return row["metrics"], dfma, row["metrics"]["smsp__inst_executed.sum"] / dfma


def dgemm_stalls(study: str = DGEMM_STALLS) -> Table:
    """The tiled DGEMM at each BLOCK as Nsight Compute profiled it: how busy the
    shared-memory pipe was and, per warp DFMA (the same number of DFMA at every BLOCK),
    the instructions issued, those of the load/store pipe (shared and global loads and
    stores, which queue for the MIO) and the shared loads among them, and the cycles warps
    spent stalled for each main reason (the per-issue stall ratio x the instructions
    issued / the warp DFMA)."""
    from gemm_kernels.measure import studies
    rows = []
    for step, row in studies.results(study):
        if row is None:
            rows.append({"BLOCK": step.params.get("BLOCK"), "profiled": "not recorded"})
            continue
        m, dfma, per = _per_warp_dfma(row)
        out = {"BLOCK": step.params["BLOCK"],
               "shared pipe, % of peak": m["l1tex__data_pipe_lsu_wavefronts_mem_shared"
                                           ".avg.pct_of_peak_sustained_elapsed"],
               "instructions per warp DFMA": per,
               "LSU instructions per warp DFMA": m["smsp__inst_executed_pipe_lsu.sum"] / dfma,
               "of them shared loads": m["smsp__inst_executed_op_shared_ld.sum"] / dfma}
        for key, label in _STALL_REASONS:
            ratio = m[f"smsp__average_warps_issue_stalled_{key}_per_issue_active.ratio"]
            out[label] = ratio * per
        rows.append(out)
    return Table(rows, list(rows[0]), title=f"dgemm_tiled at {studies.get(study).shapes[0][0]}^3, "
                 "Nsight Compute; the last four columns: cycles warps spent stalled for that "
                 f"reason, summed over warps, per warp DFMA; {records.recording_label()}")


def _stall_totals(study: str) -> dict:
    """{BLOCK: (every cycle of every resident warp per warp DFMA, the MIO throttle's part)}:
    each stall reason and the cycles it issued, the per-issue ratios of all reasons summed,
    times the instructions per warp DFMA."""
    from gemm_kernels.measure import studies
    out = {}
    for step, row in studies.results(study):
        if row is None:
            continue
        m, _, per = _per_warp_dfma(row)
        prefix = "smsp__average_warps_issue_stalled_"
        out[step.params["BLOCK"]] = (per * sum(v for k, v in m.items() if k.startswith(prefix)),
                                     per * m[f"{prefix}mio_throttle_per_issue_active.ratio"])
    return out


def stall_scale(study: str = DGEMM_STALLS) -> str:
    """What the stall columns are a share of: per BLOCK, every cycle of every resident warp
    per warp DFMA, and the share of it the MIO throttle takes."""
    # one decimal, so that the share can be checked against the cycles printed beside it
    lines = [f"BLOCK = {b}: {total:,.1f} warp-cycles per warp DFMA in all; MIO throttle "
             f"{mio:,.1f} of them ({mio / total:.1%})"
             for b, (total, mio) in _stall_totals(study).items()]
    return "\n".join(lines) if lines else "The recording has no profile of the tiled DGEMM."


def stall_growth(small: int = 8, base: int = 16, study: str = DGEMM_STALLS) -> str:
    """Where the extra cycles of BLOCK = `small` go, against BLOCK = `base`: per warp DFMA,
    the growth of the total and of each stall column of `dgemm_stalls`, largest first."""
    totals = _stall_totals(study)
    rows = {r["BLOCK"]: r for r in dgemm_stalls(study) if "profiled" not in r}
    if small not in totals or base not in totals:
        return "The recording has no profile of the tiled DGEMM at both block sizes."
    (t_s, _), (t_b, _) = totals[small], totals[base]
    grow = sorted(((rows[small][label] - rows[base][label], label) for _, label in _STALL_REASONS),
                  reverse=True)
    return (f"From BLOCK = {base} to BLOCK = {small}, per warp DFMA: all cycles {t_s - t_b:+,.0f} "
            f"({t_s / t_b:.2f} x); of them " +
            ", ".join(f"{label} {d:+,.1f}" for d, label in grow))


def part2_facts(block: int = 16, pitches=range(16, 33, 2)) -> dict:
    """The answers of the exercise's part 2, from the bank model: over the layouts that
    keep k and k + 1 side by side and 16-byte aligned (even row lengths, the fused
    LDS.128 read), the most 8-byte banks one store phase reaches (its 16 lanes share ty)
    and the least wavefronts of a warp's STS.64 store."""
    banks_8 = 128 // 8
    reach = max(len({(tx * p + ty) % banks_8 for tx in range(banks_8)})
                for p in pitches for ty in range(block))
    least = min(transposed_cases(p, block)[0][1].analysis.wavefronts for p in pitches)
    return {"banks": reach, "store_wavefronts": least}


def check_part2(banks: int | None = None, store_wavefronts: int | None = None,
                block: int = 16):
    """Part 2 of exercise 11, graded here: the student's two numbers (how many of the 16
    eight-byte banks a store phase can reach while the read stays a fused LDS.128, and
    the least wavefronts of a warp's store then) against `part2_facts`; a hint per wrong
    number."""
    if banks is None or store_wavefronts is None:
        return Text("Part 2: not answered yet. Write your two numbers in this cell, "
                "check_part2(banks=..., store_wavefronts=...), and run it.")
    facts, out = part2_facts(block), []
    if banks != facts["banks"]:
        out.append(f"banks = {banks}: not yet. The 16 lanes of a store phase share ty, so "
                   "each stores element ty of its own row. If k and k + 1 share a 16-byte slot "
                   "in every row, element ty sits in the same half of every slot: how many of "
                   "the 16 eight-byte banks are first halves of a slot?")
    if store_wavefronts != facts["store_wavefronts"]:
        # While the banks are wrong too, the hint must not give them away.
        reach = (f"{facts['banks']} banks put at least {16 // facts['banks']} on one bank, "
                 f"so each phase costs at least {16 // facts['banks']} wavefronts"
                 if banks == facts["banks"] else
                 "the banks of your first answer put at least 16 / banks on one bank, and "
                 "each phase costs that many wavefronts")
        out.append(f"store_wavefronts = {store_wavefronts}: not yet. 16 doubles on {reach}; "
                   "a warp's STS.64 has two phases (its half-warps).")
    if out:
        return Text("Part 2: " + "\n".join(out))
    odd = transposed_cases(block + 1, block)[0][1].analysis.wavefronts
    return Text(f"Part 2: right. With the read fused, a store phase reaches only "
            f"{facts['banks']} of the 16 eight-byte banks, so a warp's store costs at least "
            f"{facts['store_wavefronts']} wavefronts, where rows of {block + 1} pay {odd}; "
            f"rows of {block + 2} reach that least.")
