"""Shared-memory wavefronts and bank conflicts of chapters 03 and 04, predicted per warp
instruction and totalled over a launch, next to what Nsight Compute recorded.

`smem_tiled` (chapter 03) and `bank_layout` (chapter 04) make one pass along K in steps
of BLOCK. Per step, every warp executes the same short list of shared-memory
instructions: one STS for the A tile, one for the B tile, and the loads of the inner
loop. This module writes that list from the kernels' index expressions; `wavefronts` prices
each instruction and multiplies by how often a launch executes it:

    instructions in the launch = blocks x steps along K x (instructions per warp and step)

The load width is the one ptxas emits for sm_90, not the 4 bytes the source reads.
Where one thread reads consecutive words (chapter 03's As[ty][k], chapter 04's
"conflict" layout) ptxas fuses them into one wide load when the row start is aligned:
LDS.128 (4 floats) when the row length S = BLOCK + PAD is a multiple of 4 words, LDS.64
when it is a multiple of 2, plain LDS otherwise. The "transposed" layout's reads and all
stores stay 32-bit. tests/test_bank_predict.py checks these counts against the SASS.

Only whole tiles are counted: M, N and K must be multiples of BLOCK (the profiled shape,
1024^3, is).
"""
from __future__ import annotations

from gemm_kernels.memory import banks

from gemm_kernels.memory import wavefronts
from gemm_kernels.memory.wavefronts import WarpInstr, as_int

KERNELS = ("smem_tiled", "bank_layout")
# The recorded counters, under the name chapter 04 reads them by.
measured = wavefronts.recorded


def _params(kernel, params):
    return wavefronts.resolve(kernel, params, KERNELS)


def row_length(kernel, params=None) -> int:
    """S: the row length of the shared tiles, in 4-byte words."""
    _, p = _params(kernel, params)
    return p["BLOCK"] + p.get("PAD", 0)


def read_width(kernel, params=None) -> tuple[int, int]:
    """(width of the A reads, width of the B reads) in bytes, as ptxas emits them."""
    k, p = _params(kernel, params)
    S = row_length(k, p)
    fused = 16 if S % 4 == 0 else 8 if S % 2 == 0 else 4
    if k.name == "smem_tiled":
        return fused, 4                  # As[ty][k..]: one thread's consecutive words
    if p["LAYOUT"] == "conflict":
        return fused, fused              # sA[ty][k..] and sB[tx][k..]
    return 4, 4                          # sA[k][ty], sB[k][tx]: S apart per k


def warp_instructions(kernel, params=None) -> list[WarpInstr]:
    """Every shared-memory instruction of every warp of one block, for one step along K."""
    k, p = _params(kernel, params)
    B = p["BLOCK"]
    S = row_length(k, p)
    b_base = B * S                       # words; the B tile follows A (banks do not care)
    wa, wb = read_width(k, p)
    layout = "smem" if k.name == "smem_tiled" else p["LAYOUT"]
    threads = B * B
    out: list[WarpInstr] = []
    for w in range(wavefronts.warps(threads)):
        addr = wavefronts.lane_addresses(threads, w, B, 4)

        def add(op, group, what, width, f, base=0):
            out.append(WarpInstr(op, what, w, width, addr(lambda tx, ty: base + f(tx, ty)),
                                 group=group))

        if layout in ("smem", "conflict"):
            a_name = "As[ty][tx]" if layout == "smem" else "sA[ty*S + tx]"
            add("st", "store a", a_name, 4, lambda tx, ty: ty * S + tx)
        else:
            add("st", "store a", "sA[tx*S + ty]", 4, lambda tx, ty: tx * S + ty)
        if layout == "conflict":
            add("st", "store b", "sB[tx*S + ty]", 4, lambda tx, ty: tx * S + ty, b_base)
        else:
            add("st", "store b", "Bs[ty][tx]" if layout == "smem" else "sB[ty*S + tx]", 4,
                lambda tx, ty: ty * S + tx, b_base)

        na, nb = wa // 4, wb // 4
        for kk in range(0, B, na):
            span = f"{kk}" if na == 1 else f"{kk}..{kk + na - 1}"
            if layout == "transposed":
                add("ld", "read A", f"sA[{kk}*S + ty]", wa, lambda tx, ty: kk * S + ty)
            else:
                nm = f"As[ty][{span}]" if layout == "smem" else f"sA[ty*S + {span}]"
                add("ld", "read A", nm, wa, lambda tx, ty: ty * S + kk)
        for kk in range(0, B, nb):
            span = f"{kk}" if nb == 1 else f"{kk}..{kk + nb - 1}"
            if layout == "conflict":
                add("ld", "read B", f"sB[tx*S + {span}]", wb, lambda tx, ty: tx * S + kk, b_base)
            else:
                nm = f"Bs[{kk}][tx]" if layout == "smem" else f"sB[{kk}*S + tx]"
                add("ld", "read B", nm, wb, lambda tx, ty: kk * S + tx, b_base)
    return out


def instruction_counts(kernel, params=None) -> dict:
    """{'STS': 2, 'LDS.128': 16, ...}: one warp's shared instructions per step along K
    (compare with the SASS of the inner loop, which is one step, or two when unrolled)."""
    return wavefronts.sass_counts(warp_instructions(kernel, params))


def launch_steps(kernel, params=None, shape=None) -> int:
    """Blocks x steps along K of a launch at `shape` (default: the profiled 1024^3):
    how many times each warp of a block runs its list."""
    from gemm_kernels.measure.profile import GEMM_SHAPE
    _, p = _params(kernel, params)
    return wavefronts.whole_tiles(shape or GEMM_SHAPE, (p["BLOCK"],) * 3, ("BLOCK",) * 3)


def per_instruction(kernel, params=None, shape=None) -> list[dict]:
    """One row per instruction group (store a, store b, read A, read B): the SASS
    instruction, how many each warp issues per step, the wavefronts one of them costs
    (model; the mean over the block's warps when they differ), the ideal, and the totals
    of a launch at `shape` (default 1024^3)."""
    k, p = _params(kernel, params)
    n = launch_steps(k, p, shape)
    warps = wavefronts.warps(p["BLOCK"] ** 2)
    rows: dict = {}
    for i in warp_instructions(k, p):
        a = i.analysis
        r = rows.setdefault(i.group, {"access": i.group, "op": i.op, "SASS": i.sass,
                                      "example": i.what, "per warp and step": 0,
                                      "_wf": 0, "_ideal": 0, "_instr": 0})
        if i.warp == 0:
            r["per warp and step"] += 1
        r["_wf"] += a.wavefronts
        r["_ideal"] += a.ideal
        r["_instr"] += 1
    out = []
    for g in ("store a", "store b", "read A", "read B"):
        r = rows[g]
        wf, ideal, cnt = r.pop("_wf"), r.pop("_ideal"), r.pop("_instr")
        per = wf / cnt
        r["wavefronts each"] = int(per) if per == int(per) else round(per, 2)
        r["ideal each"] = ideal / cnt if ideal % cnt else ideal // cnt
        r["in the launch"] = cnt * n
        r["wavefronts"] = wf * n
        r["conflicts"] = (wf - ideal) * n
        assert cnt == warps * r["per warp and step"]
        out.append(r)
    return out


def predict(kernel, params=None, shape=None) -> dict:
    """Predicted ncu counters of one launch: {'ld wavefronts', 'ld conflicts',
    'st wavefronts', 'st conflicts'}."""
    return wavefronts.totals(warp_instructions(kernel, params), launch_steps(kernel, params, shape))


def side_by_side(kernel, params=None):
    """A Table for one variant: per instruction group the model's wavefronts per warp
    instruction, times the instructions of the 1024^3 launch, gives the predicted totals;
    the last two rows compare the load and store totals with Nsight Compute's."""
    from gemm_kernels.measure import records
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure.profile import GEMM_SHAPE
    k, p = _params(kernel, params)
    meas = measured(k, p) or {}
    shape = meas["shape"] if meas else GEMM_SHAPE
    rows = per_instruction(k, p, shape)
    cols = ["access", "SASS", "example", "per warp and step", "wavefronts each", "ideal each",
            "in the launch", "wavefronts", "conflicts", "ncu wavefronts", "ncu conflicts"]
    for op, label in (("st", "all stores"), ("ld", "all loads")):
        mine = [r for r in rows if r["op"] == op]
        rows.append({"access": label, "op": op, "SASS": "", "example": "",
                     "in the launch": sum(r["in the launch"] for r in mine),
                     "wavefronts": sum(r["wavefronts"] for r in mine),
                     "conflicts": sum(r["conflicts"] for r in mine),
                     "ncu wavefronts": as_int(meas.get(f"{op} wavefronts")),
                     "ncu conflicts": as_int(meas.get(f"{op} conflicts"))})
    src = (f"model vs Nsight Compute ({records.current().label})" if meas
           else "model only (no recorded counters for this configuration)")
    label = " ".join(f"{n}={v}" for n, v in p.items())
    return Table(rows, cols, title=f"{k.name} {label} at {'x'.join(map(str, shape))}: {src}")


def variants(blocks=(32, 16)) -> list[tuple[str, dict]]:
    """The chapter's variants: conflict (PAD 0), transposed (PAD 0), and the padded
    versions of both layouts, for each BLOCK."""
    out = []
    for b in blocks:
        for layout in ("conflict", "transposed"):
            for pad in range(5):
                out.append(("bank_layout", {"BLOCK": b, "LAYOUT": layout, "PAD": pad}))
    return out


def _loads_per_step(k, p) -> str:
    """'16 LDS.128 + 32 LDS': one warp's shared loads per step along K."""
    return " + ".join(f"{v} {n}" for n, v in instruction_counts(k, p).items() if n.startswith("LDS"))


def _recorded(configs):
    """(kernel, params, recorded counters, prediction at 1024^3) of each configuration
    (default: `variants()`) that has recorded counters."""
    for name, params in configs if configs is not None else variants():
        k, p = _params(name, params)
        meas = measured(k, p)
        if meas:
            yield k, p, meas, predict(k, p)


def disagreements(configs=None) -> list[str]:
    """Short lines for every recorded counter that differs from the model (empty when the
    model matches every recorded counter)."""
    out = []
    for k, p, meas, pred in _recorded(configs):
        for key in ("ld wavefronts", "ld conflicts", "st wavefronts", "st conflicts"):
            got = as_int(meas.get(key))
            if got is not None and got != pred[key]:
                label = " ".join(f"{n}={v}" for n, v in p.items())
                out.append(f"{k.name} {label}: {key} model {pred[key]:,} ncu {got:,} "
                           f"(ratio {got / pred[key]:.3f})" if pred[key] else
                           f"{k.name} {label}: {key} model 0 ncu {got:,}")
    return out


def describe(kernel, params=None) -> str:
    """One line for a widget: the model's and ncu's shared load/store conflicts of a
    1024^3 launch of this configuration."""
    k, p = _params(kernel, params)
    pred, meas = predict(k, p), measured(k, p)
    line = (f"bank conflicts at 1024^3, model: loads {pred['ld conflicts']:,}, "
            f"stores {pred['st conflicts']:,}")
    if meas:
        line += (f"; ncu: loads {as_int(meas.get('ld conflicts')):,}, "
                 f"stores {as_int(meas.get('st conflicts')):,}")
    return line


def note(kernel):
    """`describe` bound to a kernel, for `widgets.Explorer(kernel, note=...)`."""
    return lambda params: describe(kernel, params)


def excess(configs=None):
    """A Table: per configuration, what Nsight Compute counted beyond the model, for loads
    and stores, in wavefronts and as wavefronts per executed instruction."""
    from gemm_kernels.core.table import Table
    rows = []
    for k, p, meas, pred in _recorded(configs):
        instr = {"ld": 0, "st": 0}
        for r in per_instruction(k, p, meas["shape"]):
            instr[r["op"]] += r["in the launch"]
        row = {"kernel": k.name, **{n: p[n] for n in ("BLOCK", "LAYOUT", "PAD") if n in p}}
        for op in ("ld", "st"):
            extra = as_int(meas.get(f"{op} wavefronts")) - pred[f"{op} wavefronts"]
            row[f"{op} extra wf"] = extra
            row[f"{op} extra conf"] = as_int(meas.get(f"{op} conflicts")) - pred[f"{op} conflicts"]
            row[f"{op} extra per instr"] = f"{extra / instr[op]:.4f}"
        rows.append(row)
    cols = ["kernel", "BLOCK", "LAYOUT", "PAD"] + [f"{op} extra {w}" for op in ("ld", "st")
                                                   for w in ("wf", "conf", "per instr")]
    return Table(rows, cols,
                 title="Nsight Compute minus model (launch totals at 1024^3)")


def scope_independent(configs=None) -> bool:
    """True when every instruction of `configs` costs the same under both readings of the
    128-bit merge rule (per half-warp, or warp-wide: banks.analyse's quarter_merge_scope)."""
    configs = configs if configs is not None else variants()
    for name, params in configs:
        for i in warp_instructions(name, params):
            if i.width == 16 and (banks.analyse(i.addresses, 16, quarter_merge_scope="half").wavefronts
                                  != banks.analyse(i.addresses, 16, quarter_merge_scope="warp").wavefronts):
                return False
    return True


def probe_table(path=None):
    """The hardware probe (tests/data/bank_probe.json, written by
    `python -m gemm_kernels.memory.probe --out ...` on a GPU host) as a Table: each pattern's
    width, Nsight Compute's wavefronts and conflicts, and the model's, computed now (the
    model of `banks` as it stands, not the predictions stored in the file). None if absent."""
    import json
    from pathlib import Path
    from gemm_kernels.core.table import Table
    path = Path(path) if path else Path(__file__).resolve().parents[2] / "tests" / "data" / "bank_probe.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    rows = []
    for r in data["results"]:
        an = banks.analyse(r["addresses"], r["width"])
        rows.append({"pattern": r["name"], "bytes/lane": r["width"],
                     "model wf": an.wavefronts, "ncu wf": r["measured_wavefronts"],
                     "model conf": an.conflicts, "ncu conf": r["measured_conflicts"],
                     "agree": "yes" if (an.wavefronts, an.conflicts) ==
                              (r["measured_wavefronts"], r["measured_conflicts"]) else "NO"})
    agree = sum(r["agree"] == "yes" for r in rows)
    return Table(rows, list(rows[0]), title=f"bank probe, one warp, one load per launch: "
                 f"{data['device']['name']}, {data['ncu'].split(' (')[0]}, "
                 f"{data['created'][:10]}; model and ncu agree on {agree} of {len(rows)}")


def wavefronts_per_step(kernel, params=None) -> int:
    """Shared-memory wavefronts (loads and stores) one warp costs per step along K."""
    return sum(i.analysis.wavefronts for i in warp_instructions(kernel, params) if i.warp == 0)


def step_sum(kernel, params=None) -> str:
    """One warp's price of one step along K, access by access, the sum the exercises ask
    for: 'per warp and step: 1 STS x 1 (sA[ty*S + tx]) + ... = 305 wavefronts'."""
    parts = [f"{r['per warp and step']} {r['SASS']} x {r['wavefronts each']} ({r['example']})"
             for r in per_instruction(kernel, params)]
    return (f"per warp and step: {' + '.join(parts)}\n"
            f"  = {wavefronts_per_step(kernel, params)} wavefronts")


def smem_ceiling(kernel, params=None, props: dict | None = None) -> dict:
    """The GFLOP/s that shared-memory bandwidth alone allows: an SM serves one wavefront
    per clock, and each warp needs `wavefronts_per_step` of them for BLOCK FFMA
    instructions (BLOCK * 32 * 2 flops). An upper bound: it ignores the global loads,
    the barriers and everything else. props: the device's properties (sm_count,
    sm_clock_mhz, compute_capability), e.g. `records.current().device` or
    `device.properties()`; default: the live GPU's, else the recording's."""
    from gemm_kernels.core import device
    from gemm_kernels.measure import records
    k, p = _params(kernel, params)
    if props is None:
        props = records.described_device()
    if not props or not props.get("sm_count") or not props.get("sm_clock_mhz"):
        raise ValueError("smem_ceiling needs the device's sm_count and sm_clock_mhz")
    wf = wavefronts_per_step(k, p)
    flops = p["BLOCK"] * 32 * 2
    bound = props["sm_count"] * props["sm_clock_mhz"] * 1e6 * flops / wf / 1e9
    peak = device.peak_fp32_gflops(props)
    return {"wavefronts/step": wf, "FFMA/step": p["BLOCK"], "smem bound GFLOP/s": bound,
            "peak GFLOP/s": peak, "bound % of peak": 100 * bound / peak if peak else None}


# Where k runs in each layout's two tiles, printed before its name: the LAYOUT values
# key the recorded measurements, and a name alone ("conflict", once padded the fastest)
# does not say what the layout is.
TILES = {"conflict": "sA[m][k], sB[n][k]", "transposed": "sA[k][m], sB[k][n]",
         "smem_tiled": "sA[m][k], sB[k][n]"}


def label(kernel, p) -> str:
    """'sA[m][k], sB[n][k] ("conflict"), PAD=2, reads conflict-free' for a bank_layout
    variant: the tiles first, since they say what the layout is, then the LAYOUT value a
    student types in parentheses. The layout named `conflict` has its column conflicts
    only unpadded, and the
    label says so where padding removed them (the bank model prices every read of every
    padded `conflict` variant at its ideal). For chapter 03's kernel its tiles and which
    loop it runs: 'every tile checked' (EDGES='always', as every bank_layout variant) or
    its check-free 'interior loop'."""
    if "LAYOUT" in p:
        padded = ", reads conflict-free" if p["LAYOUT"] == "conflict" and p["PAD"] else ""
        return f"{TILES[p['LAYOUT']]} (\"{p['LAYOUT']}\"), PAD={p['PAD']}{padded}"
    loop = "every tile checked" if p.get("EDGES", "auto") == "always" else "interior loop"
    return f"chapter 03 ({TILES['smem_tiled']}), {loop}"


def summary(configs=None, size: int = 2048, props: dict | None = None):
    """Chapter 04 in one Table, one row per configuration: the shared loads one warp
    issues per step along K (as the SASS has them), the wavefronts and conflicts per warp
    and step from the bank model next to the same from Nsight Compute (its launch totals
    at 1024^3 divided by the warp-steps of that launch; '-' where none were recorded),
    the shared-memory bound (`smem_ceiling`) and the GFLOP/s at size^3 as a share of it."""
    from gemm_kernels.measure import lookup, records
    from gemm_kernels.core.table import Table
    rows = []
    for name, params in configs if configs is not None else variants():
        k, p = _params(name, params)
        c = smem_ceiling(k, p, props)
        model = wavefronts.totals([i for i in warp_instructions(k, p) if i.warp == 0], 1)
        meas = measured(k, p)
        if meas:
            warp_steps = launch_steps(k, p, meas["shape"]) * wavefronts.warps(p["BLOCK"] ** 2)
            ncu = {key: (meas[f"ld {key}"] + meas[f"st {key}"]) / warp_steps
                   for key in ("wavefronts", "conflicts")}
        try:
            g = lookup.recorded(k.name, (size,) * 3, p)["gflops"]["median"]
        except LookupError:
            g = None
        rows.append({
            "kernel": k.name, "BLOCK": p["BLOCK"], "layout": label(k.name, p),
            "loads per step": _loads_per_step(k, p),
            "wavefronts, model": model["ld wavefronts"] + model["st wavefronts"],
            "wavefronts, ncu": round(ncu["wavefronts"], 1) if meas else None,
            "conflicts, model": model["ld conflicts"] + model["st conflicts"],
            "conflicts, ncu": round(ncu["conflicts"], 1) if meas else None,
            "bound GFLOP/s": c["smem bound GFLOP/s"], "GFLOP/s": g,
            "% of bound": round(100 * g / c["smem bound GFLOP/s"]) if g else None})
    return Table(rows, ["BLOCK", "layout", "loads per step", "wavefronts, model",
                        "wavefronts, ncu", "conflicts, model", "conflicts, ncu",
                        "bound GFLOP/s", "GFLOP/s", "% of bound"],
                 title=f"per warp and step along K: bank model and Nsight Compute (1024^3); "
                       f"shared-memory bound and GFLOP/s at {size}^3 ({records.recording_label()})")


def tick_label(row: dict, two_lines: bool = False) -> str:
    """A `summary` row's name on a plot axis: 'BLOCK=32  ' and its label; with two_lines,
    broken after the tiles and the layout's name (at the first '), '), so that long names
    leave the bars most of the figure's width."""
    text = f"BLOCK={row['BLOCK']}  {row['layout']}"
    if two_lines and "), " in text:
        head, tail = text.split("), ", 1)
        text = f"{head})\n{tail}"
    return text


def ceiling_plot(table, size: int = 2048, ax=None, title: str | None = None,
                 two_lines: bool = False,
                 bound_label: str = "shared-memory bound (bank model)"):
    """Each configuration of a `summary` table as a pair of bars: its bound (pale; what
    it counts: `bound_label`) and its measured rate (dark, coloured by BLOCK), in GFLOP/s
    as every table, fastest bound at the top; rows without a rate are left out. `title`
    replaces the default title's first part; `two_lines` writes each name on two lines
    (`tick_label`). Returns the Axes."""
    import matplotlib.pyplot as plt
    rows = sorted((r for r in table if r["GFLOP/s"]), key=lambda r: r["bound GFLOP/s"])
    if ax is None:
        per_row = 0.48 if two_lines else 0.32
        _, ax = plt.subplots(figsize=(10, per_row * len(rows) + 1.4))
    colours = {32: "tab:blue", 16: "tab:orange", 8: "tab:green", 4: "tab:purple"}
    y = range(len(rows))
    top = max(r["bound GFLOP/s"] for r in rows)
    ax.barh(y, [r["bound GFLOP/s"] for r in rows], height=0.8, color="0.85",
            edgecolor="0.6", label=bound_label)
    ax.barh(y, [r["GFLOP/s"] for r in rows], height=0.45,
            color=[colours.get(r["BLOCK"], "tab:gray") for r in rows])
    for i, r in zip(y, rows):
        ax.text(r["bound GFLOP/s"] + top / 100, i, f"{r['% of bound']:.0f}% of bound",
                va="center", fontsize=8)
    ax.set_yticks(list(y), [tick_label(r, two_lines) for r in rows], fontsize=8)
    from matplotlib.ticker import FuncFormatter
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("GFLOP/s")
    ax.set_xlim(0, top * 1.18)
    from matplotlib.patches import Patch
    handles = [Patch(facecolor="0.85", edgecolor="0.6", label=bound_label)]
    handles += [Patch(color=c, label=f"measured, BLOCK={b}") for b, c in colours.items()
                if any(r["BLOCK"] == b for r in rows)]
    # Outside the axes, right of the "% of bound" labels: inside it would hide bars.
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    from gemm_kernels.measure import records
    title = title or f"GEMM {size}^3: each layout's rate inside its shared-memory bound"
    ax.set_title(f"{title} ({records.recording_label()})", fontsize=10)
    return ax
