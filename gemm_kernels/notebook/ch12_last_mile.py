"""Chapter 12: the last mile. Why a fast kernel is not fast at every shape (waves, wave
quantisation, too few tiles), what a tile choice and a split of K change, and the
evidence that `gemm_kernels.plan` picks well: its model against the calibration, and
sgemm's plan against cuBLAS at the benchmark shapes.

Chapter 12's rows may sit in another recording than the one the other chapters show
(an H100's beside the H200's): `recording()` finds the one that holds them (the first
cell names it in the banner, `first_cell.name_recording`), and every
prediction here uses that device's fitted rules and SM count, so that a picture, a
prediction and a measurement always describe the same GPU. The widget's logic
(`parse_shape`, `report`) is plain Python, tested without a browser.
"""
from __future__ import annotations

import statistics

from gemm_kernels.core import device
from gemm_kernels.core.kernels import get, slices
from gemm_kernels.core.launch import shape_problem
from gemm_kernels.core.registry import ceil_div
from gemm_kernels.core.table import Table, fmt_number
from gemm_kernels.measure import records, timing
from gemm_kernels.notebook.display import Text
from gemm_kernels.notebook.widgets import panel
from gemm_kernels.plan import calibrate, choose, model
from gemm_kernels.plan import waves as W

SPLIT, GEMV = model.SPLIT_KERNEL, model.GEMV_KERNEL


# ------------------------------------------------------------------ the data

# The profiles chapter 12's text reads: the ragged N, the two matrix-vector paths, and
# the M == 1 plan's own launch.
STUDIES = ("ch12_ragged_n", "ch12_gemv", "ch12_gemv_plan")
_RECORDING: dict = {}


def _holds_chapter(rec) -> bool:
    from gemm_kernels.measure import studies
    return bool(rec.find(SPLIT)) and all(
        row is not None for name in STUDIES for shape in studies.get(name).shapes
        for _, row in studies.results(name, shape, rec))


def recording():
    """The recording that holds chapter 12's rows and every profile its text reads, so
    that its timings and its profiles come from one GPU; else the first that holds its
    rows (`records.holding`). Looked up once per recording shown."""
    key = id(records.current())
    if key not in _RECORDING:
        _RECORDING[key] = records.first_holding(_holds_chapter) or records.holding(SPLIT)
    return _RECORDING[key]


def rules(rec=None) -> model.Rules | None:
    """The fitted rules of the recording's device (else whatever `model.load` finds)."""
    rec = rec or recording()
    return (model.for_device(rec.device["name"]) if rec else None) or model.load()


def _limits(rec):
    return device.limits_for(rec.arch) if rec and rec.arch else device.limits()


def ranked(shape, rules_, lim) -> list[tuple[float, tuple[int, int, int]]]:
    """Every candidate (BM, BN, split) for `shape` with the model's time, fastest first,
    on the rules' GPU."""
    return choose.ranked(tuple(shape), rules_, rules_.sm_count, lim)


def plan_for(shape, rec=None) -> choose.Plan:
    """The plan `choose.plan` makes for `shape`, under the rules of the recording's
    device (live: the plan sgemm runs here)."""
    if device.is_live():
        return choose.plan(shape)
    rec = rec or recording()
    return choose.plan(shape, rules=rules(rec), limits=_limits(rec))


def row_of(rec, kernel: str, shape, params: dict) -> dict | None:
    """The first timed row (one with a rate) of `kernel` at `shape` with `params`; a
    profile's row of the same launch has no rate and is never returned."""
    found = rec.find(kernel, list(shape), get(kernel).resolve(params)) if rec else []
    return next((r for r in found if "gflops" in r), None)


def _shape_text(shape) -> str:
    return "x".join(map(str, shape))


def _waves_text(n: int) -> str:
    return f"{n:,} wave" + ("" if n == 1 else "s")


# ------------------------------------------------------------------ waves

def wave_layout(shape, BM: int, BN: int, split: int = 1, rec=None,
                padded: bool | None = None) -> dict:
    """Tiles, blocks (tiles x slices), block slots (SMs x blocks per SM, from the
    registers the rules recorded for this tile and this shape's path: with B padded or
    not, by default the rules' choice, as `model.predict_us` takes it), waves and the
    filled share."""
    rec = rec or recording()
    r = rules(rec)
    p = model.split_params(BM, BN, split)
    z = slices(ceil_div(shape[2], p["BK"]), split)
    padded = model.pads(r, shape) if padded is None else padded
    regs = model.registers(r.tiles[model.tile_name(BM, BN)], shape[1], padded)
    slots = model.slots(p, regs, r.sm_count, _limits(rec))
    tiles = W.tiles(shape, BM, BN)
    return {"tiles": tiles, "slices": z, "blocks": tiles * z, "sms": r.sm_count,
            "per_sm": slots // r.sm_count, "slots": slots,
            "waves": W.waves(tiles * z, slots), "filled": W.filled(tiles * z, slots)}


def slot_grid(blocks: int, sms: int, per_sm: int, show: int = 3, values=None):
    """Rows of block slots (one row = one slot on every SM), wave by wave: the wave number
    (1, 2, ...) where a block runs, 0 where a slot of the last wave stays empty; with
    `values` (one per block, in launch order), that block's value instead and NaN where a
    slot stays empty. More than `show` waves: the first show - 1 and the last."""
    import numpy as np
    slots = sms * per_sm
    n_waves = W.waves(blocks, slots)
    keep = list(range(n_waves)) if n_waves <= show else [*range(show - 1), n_waves - 1]
    rows = []
    for w in keep:
        in_wave = min(slots, blocks - w * slots)
        if values is None:
            grid = np.zeros(slots, int)
            grid[:in_wave] = w + 1      # block b of the wave on SM b % sms, slot b // sms
        else:
            grid = np.full(slots, np.nan)
            grid[:in_wave] = values[w * slots:w * slots + in_wave]
        rows.append(grid.reshape(per_sm, sms))
    return np.vstack(rows), keep


def useful_shares(shape, BM: int, BN: int, slices: int = 1):
    """Per block, in launch order (blockIdx.x across N's tiles fastest, then y down M's
    tiles, then z over the slices): the share of its BM x BN tile that lies inside C. A
    block of the last row of tiles at M = 4097 with BM = 128 computes one row of C: 1/128."""
    import numpy as np
    M, N, _ = shape
    rows = np.minimum(BM, M - BM * np.arange(ceil_div(M, BM))) / BM
    cols = np.minimum(BN, N - BN * np.arange(ceil_div(N, BN))) / BN
    return np.tile(np.outer(rows, cols).ravel(), slices)


MOSTLY_IDLE = 0.5    # a block whose tile is less than half inside C is drawn hatched


def plot_waves(shape, BM: int | None = None, BN: int | None = None, split: int | None = None,
               rec=None, ax=None):
    """The GPU's block slots (SMs across, blocks per SM up), wave by wave, each block
    coloured by its wave; the last wave's empty slots stay white. Without a tile: the
    plan's."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    rec = rec or recording()
    if BM is None:
        p = plan_for(shape, rec).params
        BM, BN, split = p["BM"], p["BN"], p["SPLIT"]
    lay = wave_layout(shape, BM, BN, split or 1, rec)
    grid, keep = slot_grid(lay["blocks"], lay["sms"], lay["per_sm"])
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 0.35 * grid.shape[0] + 2.2), layout="constrained")
    colours = ["white"] + [plt.cm.tab10(i % 10) for i in range(max(keep) + 1)]
    ax.imshow(np.ma.masked_less(grid, 0), cmap=ListedColormap(colours), vmin=0,
              vmax=len(colours) - 1, aspect="auto", origin="lower", interpolation="nearest")
    ax.set_xticks(np.arange(-0.5, lay["sms"], 1), minor=True)
    ax.set_yticks(np.arange(-0.5, grid.shape[0], 1), minor=True)
    ax.grid(which="minor", color="0.8", linewidth=0.3)
    ax.tick_params(which="minor", length=0)
    for i in range(1, len(keep)):
        ax.axhline(i * lay["per_sm"] - 0.5, color="k", linewidth=1.5)
    ax.set_yticks([i * lay["per_sm"] + (lay["per_sm"] - 1) / 2 for i in range(len(keep))])
    ax.set_yticklabels([f"wave {w + 1}" for w in keep])
    right = ax.secondary_yaxis("right")         # each row: one block slot on every SM
    right.set_yticks(range(grid.shape[0]))
    right.set_yticklabels([f"slot {i % lay['per_sm'] + 1}" for i in range(grid.shape[0])],
                          fontsize=7)
    right.tick_params(length=0)
    share = useful_shares(shape, BM, BN, lay["slices"])
    idle, _ = slot_grid(lay["blocks"], lay["sms"], lay["per_sm"], values=share)
    ys, xs = np.nonzero(idle < MOSTLY_IDLE)
    if len(xs):
        from matplotlib.collections import PatchCollection
        from matplotlib.patches import Rectangle
        ax.add_collection(PatchCollection(
            [Rectangle((x - 0.5, y - 0.5), 1, 1) for x, y in zip(xs, ys)],
            facecolor="none", edgecolor="k", hatch="////", linewidth=0.3))
        ax.legend(handles=[Rectangle((0, 0), 1, 1, facecolor="none", edgecolor="k",
                                     hatch="////")],
                  labels=["a block whose tile is mostly outside C"],
                  loc="upper right", bbox_to_anchor=(1, -0.08), fontsize=8, frameon=False)
    ax.set_xlabel(f"SM (of {lay['sms']}); each row: one block slot on every SM, "
                  f"{lay['per_sm']} per SM")
    skipped = ("" if len(keep) == lay["waves"] else
               f" (waves {keep[-2] + 2} to {lay['waves'] - 1} not drawn: full)")
    split_text = f", K in {lay['slices']} slices" if lay["slices"] > 1 else ""
    useful = (f";\nthe tiles' multiply-adds inside C: {share.mean():.1%} of those computed"
              if share.mean() < 1 else "")
    ax.set_title(f"{_shape_text(shape)}, {BM}x{BN} tiles{split_text}: {lay['blocks']:,} blocks "
                 f"in {lay['slots']:,} slots = {_waves_text(lay['waves'])}, "
                 f"{lay['filled']:.0%} of the slots filled{skipped}{useful}\n"
                 f"(blocks per SM of {rec.device['name'] if rec else 'this GPU'})", fontsize=10)
    return ax


def ragged_waves(shape=(4097, 1023, 515), BM: int = 64, BN: int = 128,
                 study: str = "ch12_ragged_n", rec=None) -> Text:
    """The two builds of `study`'s ragged shape (B as it is, B padded), no split: each
    build's blocks per SM, slots, waves and the busiest SM's rounds; then the time the
    waves alone account for (each round priced at the blocks it holds, `round_by_round`,
    with the rules' gamma, its sum written out by `round_sum_text`) against the time the
    profile measured. The waves are the first cause of the gap; what they leave is the
    scalar path's own cost. Section 4 comes before section 6 defines the model's symbols:
    the sum uses only section 1's preview of the formula."""
    from gemm_kernels.measure import studies
    rec = rec or recording()
    r = rules(rec)
    shape = tuple(shape)
    lines, work, sums = [], {}, {}
    for padded, name in ((False, "B as it is (scalar loads)"), (True, "B padded")):
        lay = wave_layout(shape, BM, BN, 1, rec, padded=padded)
        n = ceil_div(lay["blocks"], lay["sms"])
        rounds = ceil_div(n, lay["per_sm"])
        full, last = divmod(n, lay["per_sm"])
        sizes = [lay["per_sm"]] * full + ([last] if last else [])
        work[padded] = round_by_round(n, lay["per_sm"], r.gamma)
        sums[padded] = round_sum_text(n, lay["per_sm"], r.gamma)
        lines.append(f"* {name}: {lay['per_sm']} blocks per SM, {lay['slots']:,} slots: "
                     f"{_waves_text(lay['waves'])}; the busiest SM runs its {n} blocks in "
                     f"{rounds} round{'s' if rounds > 1 else ''}"
                     + (f" ({' then '.join(map(str, sizes))})" if rounds > 1 else "") + ".")
    times = {bool(row["params"].get("PAD_B")): row["metrics"]["gpu__time_duration.sum"] / 1e3
             for _, row in studies.results(study, shape, rec) if row is not None}
    head = (f"{_shape_text(shape)}, {BM}x{BN} tiles, no split: {lay['blocks']:,} blocks on "
            f"{lay['sms']} SMs, so the busiest SM gets {n}.")
    tail = (f"From the waves alone (each round's blocks priced as blocks / blocks^{r.gamma:g}, "
            "the work term of section 1's preview): scalar "
            f"{sums[False]} against padded {sums[True]}: {work[False]:.2f} / {work[True]:.2f} = "
            f"{work[False] / work[True]:.2f}, so the scalar build should take "
            f"{work[False] / work[True] - 1:.0%} longer.")
    if False in times and True in times:
        tail += (f" The profile measured {times[False] / times[True] - 1:.0%} longer "
                 f"({fmt_number(times[False])} µs against {fmt_number(times[True])} µs).")
    return Text("\n".join([head, *lines, tail]))


# ------------------------------------------------------------------ split-K

def plot_split_k(split: int = 4, ax=None):
    """K cut into `split` slices: slice z of A's columns and B's rows gives a partial
    product plane; the reduction adds the planes in a fixed order into C."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, Rectangle
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 3.6))
    colours = [plt.cm.tab10(i) for i in range(split)]
    w = 4.0 / split
    for z in range(split):      # A: M x K, cut along K (columns)
        ax.add_patch(Rectangle((z * w, 0), w, 3, facecolor=colours[z], alpha=0.5, edgecolor="k"))
        ax.add_patch(Rectangle((5, 3 - (z + 1) * w * 0.75), 3, w * 0.75, facecolor=colours[z],
                               alpha=0.5, edgecolor="k"))     # B: K x N, cut along K (rows)
    ax.text(2, -0.4, "A (M x K): slices of K", ha="center")
    ax.text(6.5, -0.4, "B (K x N): the same slices", ha="center")
    for z in range(split):      # the partial products, one plane per slice
        x0 = 9.3 + 0.35 * z
        ax.add_patch(Rectangle((x0, 0.35 * z), 2.2, 2.2, facecolor=colours[z], alpha=0.6,
                               edgecolor="k"))
    ax.text(10.4 + 0.17 * split, -0.4, f"{split} partial products\n(blockIdx.z = slice)",
            ha="center", va="top")
    # the reduction: an arrow to C, its label under the arrow, clear of both boxes
    ax.add_patch(FancyArrowPatch((12.0 + 0.35 * split, 1.5), (14.4 + 0.35 * split, 1.5),
                                 arrowstyle="-|>", mutation_scale=18))
    ax.text(13.2 + 0.35 * split, 1.3, "reduce:\nC = P0 + P1 + ...\nalways this order",
            ha="center", va="top", fontsize=9)
    ax.add_patch(Rectangle((14.6 + 0.35 * split, 0.4), 2.2, 2.2, facecolor="0.85", edgecolor="k"))
    ax.text(15.7 + 0.35 * split, 1.5, "C", ha="center", va="center", fontsize=14)
    ax.set_xlim(-0.3, 17.3 + 0.35 * split)
    ax.set_ylim(-1.2, 3.6)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"Split-K with {split} slices: every slice is a GEMM of depth K/{split}, "
                 "then one deterministic reduction", fontsize=10)
    return ax



def plot_last_block(finish=(3, 1, 4, 2), ax=None):
    """The one-launch ending of split-K (`split_k_finish`), drawn for the blocks of one
    strip of outputs, one per slice z: each computes its partial sums, stores them in its
    plane, fences and counts itself in with an atomicAdd. `finish[z]` is the order in which
    block z counts in (any order: the hardware decides); the block that counts in last
    fences again and adds the planes in the order z = 0, 1, ..., so the result does not
    depend on which block was last. A picture of the pattern, not of a measured run."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    split = len(finish)
    if sorted(finish) != list(range(1, split + 1)):
        raise ValueError(f"finish must order the {split} blocks 1..{split}: {finish}")
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 0.9 * split + 1.2))
    colours = [plt.cm.tab10(i) for i in range(split)]
    last = finish.index(split)
    for z in range(split):
        y = split - 1 - z
        end = 7 + 1.5 * finish[z]          # a later count, a longer computation
        ax.add_patch(Rectangle((0, y + 0.15), end - 1, 0.7, facecolor=colours[z], alpha=0.5,
                               edgecolor="k"))
        ax.text((end - 1) / 2, y + 0.5, f"block z = {z}: partial sums, stored in plane {z}",
                ha="center", va="center", fontsize=8)
        ax.add_patch(Rectangle((end - 1, y + 0.15), 1, 0.7, facecolor="0.8", edgecolor="k"))
        ax.text(end - 0.5, y + 0.5, f"fence\n{finish[z]} of {split} in", ha="center", va="center",
                fontsize=7)
        if z != last:
            ax.text(end + 0.15, y + 0.5, "returns", va="center", fontsize=8, color="0.4")
    y, x0 = split - 1 - last, 7 + 1.5 * split
    ax.add_patch(Rectangle((x0, y + 0.15), 4.5, 0.7, facecolor="0.95", edgecolor="k"))
    ax.text(x0 + 2.25, y + 0.5, "last: fence, then C = P0 + P1 + ...\n(planes read in order z)",
            ha="center", va="center", fontsize=8)
    ax.annotate("", xy=(x0 + 4.5, -0.15), xytext=(0, -0.15),
                arrowprops={"arrowstyle": "->", "color": "0.4"})
    ax.text(x0 + 4.5, -0.3, "time", ha="right", va="top", fontsize=8, color="0.4")
    ax.set_xlim(-0.2, x0 + 4.8)
    ax.set_ylim(-0.7, split + 0.1)
    ax.axis("off")
    ax.set_title(f"One launch, {split} slices of K for one strip of outputs: the block that "
                 "counts in last adds the planes, always in the same order", fontsize=10)
    return ax

# A calibration shape with the capstone's problem at 1024^3 (fewer 128 x 128 tiles than
# SMs), where every tile and split was timed: the configurations of the ladder, from the
# capstone's tile without a split to the most blocks. The 1024^3 runs themselves hold only
# the capstone and the plan, which differ in the tile and the split at once.
LADDER_SHAPE = (640, 640, 2560)
LADDER = ((128, 128, 1), (64, 128, 1), (128, 128, 4), (64, 128, 4), (64, 128, 16))


def ladder_rows(shape=LADDER_SHAPE, configs=LADDER, rec=None) -> list[dict]:
    """Per (BM, BN, split) of `configs` recorded at `shape`: its blocks, the SMs that get
    one, the share of the slots they fill, its measured rate and cuBLAS's of the same run. Separates the two
    levers: the same tile with more slices (filling alone) and a smaller tile."""
    rec = rec or recording()
    out = []
    for BM, BN, split in configs:
        row = row_of(rec, SPLIT, shape, {"BM": BM, "BN": BN, "SPLIT": split})
        if row is None:
            continue
        lay = wave_layout(shape, BM, BN, split, rec)
        out.append({"configuration": f"{BM}x{BN}, " + (
                        "no split" if lay["slices"] == 1 else f"K in {lay['slices']} slices"),
                    "blocks": lay["blocks"], "SMs busy": min(lay["blocks"], lay["sms"]),
                    "waves": lay["waves"], "slots filled %": 100 * lay["filled"],
                    "GFLOP/s": row["gflops"]["median"],
                    "cuBLAS GFLOP/s": row["reference"]["gflops"]["median"]})
    return out


def plot_ladder(shape=LADDER_SHAPE, configs=LADDER, rec=None, ax=None):
    """The ladder's measured rates as bars, each labelled with its blocks, busy SMs and
    filled share, and cuBLAS's rate (the median over the same runs) as a line."""
    import statistics

    import matplotlib.pyplot as plt
    rec = rec or recording()
    rows = ladder_rows(shape, configs, rec)
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 4), layout="constrained")
    if not rows:
        ax.set_title(f"{_shape_text(shape)}: not in this recording ({rec.label})")
        return ax
    x, sms = range(len(rows)), rules(rec).sm_count
    ax.bar(x, [r["GFLOP/s"] for r in rows], color="tab:blue")
    for i, r in enumerate(rows):
        # past one wave, the share is of the slots of all the waves (as in the wave pictures)
        slots = (f"{_waves_text(r['waves'])},\n{r['slots filled %']:.0f}% of their slots"
                 if r["waves"] > 1 else f"{r['slots filled %']:.0f}% of the slots")
        ax.text(i, 0.97 * r["GFLOP/s"], f"{r['blocks']:,} blocks\n{r['SMs busy']} of "
                f"{sms} SMs busy\n{slots}",
                ha="center", va="top", fontsize=8, color="white")
    cublas = statistics.median(r["cuBLAS GFLOP/s"] for r in rows)
    ax.axhline(cublas, color="k", linestyle="--", linewidth=1,
               label=f"cuBLAS ({fmt_number(cublas)} GFLOP/s)")
    ax.set_xticks(list(x))
    ax.set_xticklabels([r["configuration"] for r in rows], fontsize=9)
    ax.set_xlabel("tile and split of this chapter's kernel")
    ax.set_ylabel("GFLOP/s (measured)")
    ax.set_ylim(0, max(cublas, *(r["GFLOP/s"] for r in rows)) * 1.15)
    ax.yaxis.set_major_formatter("{x:,.0f}")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(f"{_shape_text(shape)}: {W.tiles(shape, 128, 128)} tiles of 128 x 128 for "
                 f"{sms} SMs, each configuration measured\n{rec.label}",
                 fontsize=10)
    return ax


# ------------------------------------------------------------------ the benchmark

def bench_rows(rec=None) -> list[dict]:
    """Per benchmark shape: the plan, its recorded rate, cuBLAS's of the same run, the
    share; rates None where the shape was not recorded with that plan."""
    rec = rec or recording()
    out = []
    for shape in calibrate.bench_shapes():
        p = plan_for(shape, rec)
        row = row_of(rec, p.kernel, shape, p.params)
        out.append({"shape": shape, "plan": str(p),
                    "GFLOP/s": row["gflops"]["median"] if row else None,
                    "cuBLAS GFLOP/s": row["reference"]["gflops"]["median"] if row else None,
                    "% of cuBLAS": timing.share(row) if row else None})
    return out


def bench_table(rec=None) -> Table:
    """The benchmark rows; the title names the shapes where cuBLAS's own rate moved from
    call to call, with the plan's share of the median of those calls (`_varies_note`)."""
    rec = rec or recording()
    rows = bench_rows(rec)
    notes = [_varies_note(r, rec) for r in rows if r["% of cuBLAS"] is not None
             and _cublas_varies(r["shape"], rec)]
    return Table(rows, ["shape", "plan", "GFLOP/s", "cuBLAS GFLOP/s", "% of cuBLAS"],
                 title=f"sgemm's plan against cuBLAS (timed in the same process), {rec.label}"
                       + "".join(f"; {n}" for n in notes))


# The share of cuBLAS below which a benchmark shape counts as a shortfall: the plot's
# dashed line and the list under it use the same one.
SHORT_OF = 95.0


def plot_bench(rec=None, ax=None, below: float = SHORT_OF):
    """% of cuBLAS per benchmark shape (the squares first, in blue), a line at 100% and a dashed one at
    `below` (the line `shortfalls` draws); a diamond where cuBLAS varied from call to call,
    at the share of its median call there (`_varies_note`)."""
    import matplotlib.pyplot as plt
    rec = rec or recording()
    rows = [r for r in bench_rows(rec) if r["% of cuBLAS"] is not None]
    # the squares as one group, then the other shapes, so that each colour is one run of bars
    rows.sort(key=lambda r: len(set(r["shape"])) != 1)
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 4))
    colours = ["tab:blue" if len(set(r["shape"])) == 1 else "tab:orange" for r in rows]
    ax.bar(range(len(rows)), [r["% of cuBLAS"] for r in rows], color=colours)
    # where cuBLAS's own rate moved from call to call, the share of its median call too
    varies = [(i, r) for i, r in enumerate(rows) if _cublas_varies(r["shape"], rec)]
    if varies:
        ax.scatter([i for i, _ in varies],
                   [100 * r["GFLOP/s"] / statistics.median(_cublas_calls(r["shape"], rec))
                    for _, r in varies], marker="D", color="k", zorder=3,
                   label="against cuBLAS's median call (where cuBLAS varies)")
    ax.axhline(100, color="k", linewidth=1, label="cuBLAS (100%)")
    ax.axhline(below, color="k", linewidth=1, linestyle="--",
               label=f"{below:.0f}% (the shortfalls listed below)")
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color="tab:blue", label="squares"),
                       Patch(color="tab:orange", label="other shapes"),
                       *ax.get_legend_handles_labels()[0]], fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1))
    ax.set_xlabel("shape M x N x K")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([_shape_text(r["shape"]) for r in rows], rotation=60, ha="right",
                       fontsize=8)
    ax.set_ylabel("% of cuBLAS")
    ax.set_title(f"sgemm's plan against cuBLAS; {rec.label}", fontsize=10)
    return ax


def shortfalls(rec=None, below: float = SHORT_OF) -> Text:
    """The benchmark shapes where sgemm's plan is below `below` % of cuBLAS."""
    rows = [r for r in bench_rows(rec) if r["% of cuBLAS"] is not None
            and r["% of cuBLAS"] < below]
    if not rows:
        return Text(f"At every benchmark shape sgemm's plan reaches {below:.0f}% of cuBLAS.")
    return Text(f"Below {below:.0f}% of cuBLAS: " + "; ".join(
        f"{_shape_text(r['shape'])} ({r['plan']}): {r['% of cuBLAS']:.3g}%"
        + (f" ({_varies_note(r, rec)})" if _cublas_varies(r["shape"], rec) else "")
        for r in rows) + ".")


def _cublas_calls(shape, rec=None) -> list[float]:
    """cuBLAS's rate (GFLOP/s) in each call timed beside a configuration at `shape`."""
    return [r["cuBLAS beside it, GFLOP/s"] for r in timed_here([shape], rec)]


def _cublas_varies(shape, rec=None, spread: float = 1.2) -> bool:
    """Whether cuBLAS, timed beside each configuration at `shape`, moved by more than
    `spread` times from its slowest call to its fastest: its % there rests on one call."""
    ref = _cublas_calls(shape, rec)
    return len(ref) > 1 and max(ref) / min(ref) > spread


def _varies_note(row: dict, rec=None) -> str:
    """For a benchmark row where cuBLAS varies: how much, and the plan's rate as a share
    of the median cuBLAS call there, a sturdier yardstick than the one call beside it."""
    ref = _cublas_calls(row["shape"], rec)
    mid = statistics.median(ref)
    return (f"at {_shape_text(row['shape'])} cuBLAS varied {max(ref) / min(ref):.2f}x over "
            f"its {len(ref)} calls; against their median the plan is "
            f"{100 * row['GFLOP/s'] / mid:.0f}%")


def timing_method(rec=None) -> Text:
    """How the benchmark's rates were timed, read from the recording: the timed calls per
    rate and the statistic (each row's), the warm-up, the L2 flush and the interleaving
    (each row's run); and whether any benchmark shape is a calibration shape, where the
    model was fitted."""
    rec = rec or recording()
    rows = [row_of(rec, p.kernel, s, p.params)
            for s in calibrate.bench_shapes() for p in [plan_for(s, rec)]]
    rows = [r for r in rows if r is not None]
    how = {tuple(sorted(rec.runs[r["run"]]["timing"].items())) for r in rows}
    repeats = {r["repeats"] for r in rows}
    if len(how) != 1 or len(repeats) != 1:
        raise ValueError("the benchmark's rows were timed in different ways")
    t = dict(next(iter(how)))
    cal = {tuple(s) for _, _, s in calibrate.calibration_runs()}
    shapes = calibrate.bench_shapes()
    seen = [s for s in shapes if tuple(s) in cal]
    return Text(
        f"Each rate is the median of {repeats.pop()} timed calls, after {t['warmup']} "
        "warm-up calls"
        + (", each call starting from an empty L2 (a scratch buffer twice the L2's size "
           "written before it, outside the timing)" if t["flush_l2"] else "")
        + (", our calls and cuBLAS's alternating" if t["interleaved"] else "") + ".\n"
        + (f"None of the {len(shapes)} benchmark shapes is a calibration shape: the model "
           "was fitted without them." if not seen else
           f"{len(seen)} of the {len(shapes)} benchmark shapes are calibration shapes: "
           + ", ".join(map(_shape_text, seen)) + "."))


def copy_against_gap(shape=(4097, 1023, 515), rec=None) -> Text:
    """At a ragged shape whose plan pads B: the plan's timed call against cuBLAS's (the
    time of the median rate of each), their gap, and the model's time for the copy of B
    that the GEMM's profile leaves out."""
    rec = rec or recording()
    shape = tuple(shape)
    p = plan_for(shape, rec)
    row = row_of(rec, p.kernel, shape, p.params)
    t = model_terms(shape, p.params["BM"], p.params["BN"], p.params["SPLIT"], rec)
    if row is None or not t["padded"]:
        raise ValueError(f"{_shape_text(shape)}: no timed plan that pads B")
    ours = _time_us(row)
    theirs = _time_us({"shape": row["shape"], "gflops": row["reference"]["gflops"]})
    gap, copy = ours - theirs, t["copy of B"]
    size = ("about the size of the gap" if 0.75 < copy / gap < 1.33 else
            f"{copy / gap:.1f} times the gap")
    return Text(f"At {_shape_text(shape)} ({p}): the plan's timed call {ours:.1f} µs, "
                f"cuBLAS's {theirs:.1f} µs, a gap of {gap:.1f} µs.\n"
                f"The model's time for the copy of B into padded rows alone: {copy:.1f} µs, "
                f"{size}.")


def timed_here(shapes, rec=None, disturbed: float = 3.0) -> Table:
    """Every configuration of the split kernel timed at each of `shapes` (benchmark shapes
    below cuBLAS, say): which is the plan, the model's time and the timed call's, the
    rate, and cuBLAS's rate timed beside it. Two configurations that ran alike, each
    beside a cuBLAS at its usual rate, say the shortfall is cuBLAS's speed there, not the
    pick; a cuBLAS more than `disturbed` times slower than beside the others says that
    run was disturbed, and its row is marked so."""
    rec = rec or recording()
    r, lim = rules(rec), _limits(rec)
    rows = []
    for shape in map(tuple, shapes):
        plan = plan_for(shape, rec).params
        timed = [row for row in rec.find(SPLIT, list(shape)) if "gflops" in row]
        for row in timed:
            others = [o["reference"]["gflops"]["median"] for o in timed if o is not row]
            upset = bool(others) and \
                disturbed * row["reference"]["gflops"]["median"] < statistics.median(others)
            p = row["params"]
            pad = model._padded_row(row)
            mine = all(plan.get(k) == p[k] for k in ("BM", "BN", "SPLIT")) and \
                bool(plan.get("PAD_B")) == pad
            rows.append({"shape": shape,
                         "configuration": _config({**p, "PAD_B": pad}) + (" (the plan)" if mine else "")
                         + (" (a disturbed run)" if upset else ""),
                         "predicted (µs)": model.predict_us(r, shape, p["BM"], p["BN"], p["SPLIT"],
                                                            sm_count=r.sm_count, limits=lim,
                                                            padded=pad),
                         "timed call (µs)": _time_us(row),
                         "GFLOP/s": row["gflops"]["median"],
                         "cuBLAS beside it, GFLOP/s": row["reference"]["gflops"]["median"],
                         "% of cuBLAS": timing.share(row)})
    return Table(rows, list(rows[0]) if rows else ["shape"],
                 title=f"Every configuration timed at these shapes, each beside cuBLAS; "
                       f"{rec.label}")


def splits_compared(shape, rec=None) -> Text:
    """The configurations timed at `shape` compared with each other, not each with its own
    cuBLAS call: the fastest, the plan's rate beside it, and the spread of cuBLAS's rate
    over the calls timed beside them in the same run (at a shape that runs for
    microseconds that spread can exceed the gaps between the kernels)."""
    rows = list(timed_here([shape], rec))
    if not rows:
        return Text(f"Nothing was timed at {_shape_text(shape)}.")
    best = max(rows, key=lambda r: r["GFLOP/s"])
    plan = next((r for r in rows if r["configuration"].endswith("(the plan)")), None)
    ref = sorted(r["cuBLAS beside it, GFLOP/s"] for r in rows)
    text = (f"At {_shape_text(shape)}, of the {len(rows)} configurations timed, the fastest: "
            f"{best['configuration']}, {fmt_number(best['GFLOP/s'])} GFLOP/s.")
    if plan is not None and plan is not best:
        text += (f" The plan ({plan['configuration'].removesuffix(' (the plan)')}): "
                 f"{fmt_number(plan['GFLOP/s'])} GFLOP/s, "
                 f"{100 * plan['GFLOP/s'] / best['GFLOP/s']:.0f}% of the fastest.")
    text += (f"\ncuBLAS, timed beside each of them in the same run, ran between "
             f"{fmt_number(ref[0])} and {fmt_number(ref[-1])} GFLOP/s "
             f"({ref[-1] / ref[0]:.2f}x from its slowest call to its fastest).")
    # Against the median of those calls, not one call: a sturdier % of cuBLAS there.
    mid = statistics.median(ref)
    text += (f"\nAgainst the median of those cuBLAS calls, {fmt_number(mid)} GFLOP/s: "
             + (f"the plan {100 * plan['GFLOP/s'] / mid:.0f}%, " if plan is not None else "")
             + f"the fastest {100 * best['GFLOP/s'] / mid:.0f}%.")
    return Text(text)


def capstone_share(n: int = 1024, rec=None) -> Text:
    """Chapter 09's capstone (its defaults, one block per tile, no split) at n^3 against
    cuBLAS, with its tiles and the block slots it leaves empty. Where some SMs idle, the
    check that needs no model: the measured rate per busy SM, and what every SM would
    give at that rate against cuBLAS; then the model's one-block rate as a cross-check."""
    rec = rec or recording()
    row = row_of(rec, "capstone", (n, n, n), {})
    p = get("capstone").resolve({})
    lay = wave_layout((n, n, n), p["BM"], p["BN"], 1, rec)
    shared = row is not None and timing.share(row)
    rate = (f"{fmt_number(row['gflops']['median'])} GFLOP/s, {timing.share(row):.0f}% of "
            f"cuBLAS ({fmt_number(row['reference']['gflops']['median'])} GFLOP/s in the same run)"
            if shared else "not recorded here")
    busy = min(lay["blocks"], lay["sms"])
    text = (f"Chapter 09's capstone at {n}^3 ({rec.label}): {rate}.\nIts {p['BM']}x{p['BN']} "
            f"tiles make {lay['tiles']} blocks for {lay['slots']} block slots "
            f"({lay['sms']} SMs x {lay['per_sm']}): {lay['filled']:.0%} of the slots are "
            f"filled, and {busy} of the {lay['sms']} SMs ({busy / lay['sms']:.0%}) have a "
            f"block.")
    if busy < lay["sms"] and shared:
        # each product multiplies the factor as printed (one decimal), so it checks by hand
        per = round(row["gflops"]["median"] / busy, 1)
        every = lay["sms"] * per
        ref = row["reference"]["gflops"]["median"]
        text += (f"\nPer busy SM: {fmt_number(row['gflops']['median'])} / {busy} = {per:,.1f} "
                 f"GFLOP/s. All {lay['sms']} SMs at that rate: {lay['sms']} x {per:,.1f} = "
                 f"{fmt_number(every)} GFLOP/s, {100 * every / ref:.0f}% of cuBLAS's "
                 f"{fmt_number(ref)}.")
    # the cross-check: the busy SMs, each running one block alone, at the one-block rate
    # section 6's model fits for this tile (as `rules_summary` prints it)
    c = rules(rec).tiles.get(model.tile_name(p["BM"], p["BN"]))
    alone = round(2 / c["c1_us_per_mfma"] / 1e3, 1) if c else None
    if alone and lay["blocks"] <= lay["sms"]:
        text += (f"\nCross-check with the one-block rate section 6 fits for this tile: "
                 f"{busy} x {alone:,.1f} = {fmt_number(busy * alone)} GFLOP/s.")
    return Text(text)


def tile_table(rec=None) -> Table:
    """Each tile's block: threads, registers per thread on the vector path (N % 4 == 0),
    on the scalar one (other N, B as it is) and on the padded one (other N, B copied into
    padded rows), shared memory, and the blocks an SM holds with each."""
    rec = rec or recording()
    r, lim = rules(rec), _limits(rec)
    k = get(SPLIT)
    rows = []
    for BM, BN in model.TILES:
        p = model.split_params(BM, BN, 1)
        t = r.tiles[model.tile_name(BM, BN)]
        threads = k.threads(p)[0]
        paths = {"N a multiple of 4": (4, False), "other N": (3, False),
                 "other N, B padded": (3, True)}
        regs = {name: model.registers(t, n, pad) for name, (n, pad) in paths.items()}
        blocks = {name: model.slots(p, v, 1, lim) for name, v in regs.items()}
        rows.append({"tile": f"{BM}x{BN}", "threads": threads,
                     "shared memory (KiB)": k.dynamic_smem(p, lim) / 1024,
                     **{f"registers, {name}": v for name, v in regs.items()},
                     **{f"blocks per SM, {name}": v for name, v in blocks.items()},
                     # what the table shows: one column per path, both numbers in it
                     **{name: f"{regs[name]} registers: {blocks[name]} blocks per SM"
                        for name in paths}})
    return Table(rows, ["tile", "threads", "shared memory (KiB)", *paths],
                 title=f"Each tile's block on {r.device}, for each path of B: registers per "
                       "thread (as compiled for the recorded runs) and the blocks an SM holds")


def slot_counts(shape, rec=None) -> Table:
    """Per tile at `shape` without a split: the tiles of C, the blocks per SM (the tile
    table's, for this shape's path) and the block slots of the GPU, the first questions
    of the plan exercise."""
    rec = rec or recording()
    rows = []
    for BM, BN in model.TILES:
        lay = wave_layout(shape, BM, BN, 1, rec)
        rows.append({"tile": f"{BM}x{BN}", "tiles of C": lay["tiles"],
                     "blocks per SM": lay["per_sm"], "block slots": lay["slots"],
                     "slots filled %": 100 * lay["filled"]})
    return Table(rows, list(rows[0]), title=f"{_shape_text(shape)} without a split, on "
                                            f"{rules(rec).device} ({rules(rec).sm_count} SMs)")


TILE_SHAPES = ((4608, 4608, 2560), (2560, 2560, 2560))   # calibration shapes, no split


def tile_evidence(shapes=TILE_SHAPES, rec=None) -> Table:
    """128 x 128 against 64 x 128 tiles, both measured without a split at calibration
    shapes where every SM is busy: the blocks, the work of the busiest SM and of the
    average one (in 128 x 128 tiles' worth, so that the two tiles compare), and the
    measured rate. Where the work divides evenly the two run alike; where it does not,
    the smaller tile's finer pieces leave the busiest SM less extra work."""
    rec = rec or recording()
    sms = rules(rec).sm_count
    rows = []
    for shape in shapes:
        for BM, BN in ((128, 128), (64, 128)):
            row = row_of(rec, SPLIT, shape, {"BM": BM, "BN": BN, "SPLIT": 1})
            if row is None:
                continue
            lay = wave_layout(shape, BM, BN, 1, rec)
            unit = BM * BN / (128 * 128)
            rows.append({"shape": _shape_text(shape), "tile": f"{BM}x{BN}",
                         "blocks": lay["blocks"],
                         "busiest SM's work (128x128 tiles)": ceil_div(lay["blocks"], sms) * unit,
                         "average SM's work (128x128 tiles)": lay["blocks"] * unit / sms,
                         "GFLOP/s": row["gflops"]["median"]})
    if not rows:
        return Text(f"These shapes are not in this recording ({rec.label}).")
    return Table(rows, list(rows[0]), title=f"Two tiles without a split, measured; {rec.label}")


def _top_stalls(m: dict, top: int = 2) -> str:
    """The `top` reasons a warp waits most per issued instruction (the issuing warp and
    a ready warp not picked left out: neither waits on anything)."""
    from gemm_kernels.notebook.evidence import stall_reasons
    st = {k: v for k, v in stall_reasons({"metrics": m}).items()
          if k not in ("selected", "not selected")}
    return ", ".join(f"{k} {v:.1f}" for k, v in sorted(st.items(), key=lambda kv: -kv[1])[:top])


# What tells the launches of a study apart, besides the columns every study shows. The
# ragged-N pair waits little on anything (every stall reason is small in both), so its
# stalls explain nothing; what differs is the work issued: all instructions and those of
# the load/store unit (the scalar path copies B and C one float at a time). The GEMV
# launches wait on memory, so their two largest stall reasons say how much.
_EXTRA = {
    "ch12_ragged_n": lambda m: {
        "instructions (millions)": m["smsp__inst_executed.sum"] / 1e6,
        "load/store instructions (millions)": m["smsp__inst_executed_pipe_lsu.sum"] / 1e6},
    "ch12_gemv": lambda m: {"two largest stalls (cycles per instruction)": _top_stalls(m)},
}
_EXTRA["ch12_gemv_plan"] = _EXTRA["ch12_gemv"]


def profile_table(study: str, rec=None, drop=()) -> Table:
    """An Nsight Compute study of chapter 12 (ch12_ragged_n, ch12_gemv): per launch its
    time, issue activity, FMA pipe, DRAM throughput, warps resident, and what tells the
    study's launches apart (`_EXTRA`). `drop`: launches whose label contains any of these
    words are left out (the main text shows the launches its argument needs; an appendix
    shows the rest)."""
    from gemm_kernels.measure import studies
    rec = rec or recording()
    rows = []
    for shape in studies.get(study).shapes:
        built: dict = {}      # a launch's parameters, as the shape sets them -> its label
        for step, row in studies.results(study, shape, rec):
            if row is None:
                continue
            m = row["metrics"]
            fma = m.get("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active")
            warps = row.get("params", {}).get("WARPS")
            # a matrix-vector launch says its block size (the plan's differs by path)
            label = step.label if not warps or "warps per block" in step.label else \
                f"{step.label}, {warps} warps per block"
            # a parameter the shape overrides (STREAM where N == 1) can make two steps one
            # launch: say so, so that the pair reads as a repeat, not as a comparison
            k = get(row["kernel"])
            p = {**k.resolve(row.get("params", {})), **k.fixed}
            key = (row["kernel"], tuple(sorted({**p, **k.shape_params(p, tuple(shape))}.items())))
            if key in built:
                label += f" (at this shape the same launch as \"{built[key]}\")"
            built.setdefault(key, label)
            # streaming loads exist only where the shape keeps them (M == 1): say so there,
            # so that such a row does not read as the plain loads' launch
            if dict(key[1]).get("STREAM") and "streaming" not in label:
                label = label.replace(f", {warps} warps per block",
                                      f", streaming loads, {warps} warps per block")
            if any(word in label for word in drop):
                continue
            rows.append({"shape": _shape_text(shape), "launch": label,
                         "time (µs)": m["gpu__time_duration.sum"] / 1e3,
                         "issue active %": m["smsp__issue_active.avg.pct_of_peak_sustained_active"],
                         "FMA pipe %": fma if fma is not None else "-",
                         "DRAM % of peak": m["dram__throughput.avg.pct_of_peak_sustained_elapsed"],
                         "warps resident %": m["sm__warps_active.avg.pct_of_peak_sustained_active"],
                         **_EXTRA.get(study, lambda _: {})(m)})
    if not rows:
        return Text(f"The profile {study} is not in this recording ({rec.label}).")
    cols = [c for c in rows[0] if any(r[c] != "-" for r in rows)]   # no FMA in a GEMV
    return Table(rows, cols, title=f"Nsight Compute, one launch each; {rec.label}")


def reduction_us(shape, planes: int, rec=None) -> float:
    """The model's time of the split's reduction: its fixed cost r0 plus reading the
    `planes` partial products and writing C at the copy's bandwidth."""
    r = rules(rec or recording())
    return r.reduce_us + (planes + 1) * shape[0] * shape[1] * 4 / (r.bandwidth_gbps * 1e3)


def reduction_share(shape, rec=None) -> Text:
    """The model's reduction at the plan's split of `shape` and its share of the
    predicted time; the matrix-vector product adds its slices in its own launch."""
    rec = rec or recording()
    r, lim = rules(rec), _limits(rec)
    p = plan_for(shape, rec)
    z = get(p.kernel).grid(p.params, tuple(shape))[2]
    if z == 1:
        return Text(f"At {_shape_text(shape)} the plan has no split: no reduction.")
    if p.kernel != SPLIT:
        return Text(f"At {_shape_text(shape)} ({p}): the last block of each range of outputs "
                    f"adds the {z} slices' partial sums in the same launch: no second kernel.")
    red = reduction_us(shape, z, rec)
    mb = (z + 1) * shape[0] * shape[1] * 4 / 1e6
    whole = model.predict_us(r, shape, p.params["BM"], p.params["BN"], p.params["SPLIT"],
                             sm_count=r.sm_count, limits=lim)
    return Text(f"At {_shape_text(shape)} ({p}): the model predicts {fmt_number(whole)} µs, of "
                f"which the reduction takes {fmt_number(red)} µs ({red / whole:.0%}): the "
                f"reduction reads the {z} partial products and writes C, {mb:.1f} MB in all "
                f"(the first kernel wrote the partial products).")


GEMV_STUDIES = STUDIES[1:]   # the second: the M == 1 plan's own launch


def gemv_account(shape=(1, 4096, 4096), studies_=GEMV_STUDIES, rec=None) -> Text:
    """What the recording says about the plan's matrix-vector call at `shape`: its timed
    call (one launch) beside cuBLAS's in the same run, and the plan's own launch profiled
    (its time and how busy DRAM was); while that launch is not in the recording, that it
    was not profiled, and each profiled launch at that shape with a split instead."""
    from gemm_kernels.measure import studies
    rec = rec or recording()
    p = plan_for(shape, rec)
    row = row_of(rec, p.kernel, shape, p.params)
    if row is None:
        return Text(f"{_shape_text(shape)} with {p}: not in this recording ({rec.label}).")
    flop = 2 * shape[0] * shape[1] * shape[2]
    call, ref = (flop / (g * 1e3) for g in (row["gflops"]["median"],
                                            row["reference"]["gflops"]["median"]))
    z = get(p.kernel).grid(p.params, tuple(shape))[2]
    lines = [f"At {_shape_text(shape)} the plan is the {p}, in one launch. Its timed call "
             f"takes {fmt_number(call)} µs ({fmt_number(row['gflops']['median'])} GFLOP/s); "
             f"cuBLAS's, in the same run, {fmt_number(ref)} µs."]
    profiled = [(step, r) for name in studies_ if tuple(shape) in studies.get(name).shapes
                for step, r in studies.results(name, tuple(shape), rec) if r is not None]
    own = lambda step: get(step.kernel).resolve(step.params) == p.params
    if any(own(step) for step, _ in profiled):     # the others are in the profile table
        profiled = [(step, r) for step, r in profiled if own(step)]
    for step, r in profiled:
        zs = get(step.kernel).grid(get(step.kernel).resolve(step.params), tuple(shape))[2]
        if zs > 1 or own(step):
            m = r["metrics"]
            who = "the plan's own launch" if own(step) else step.label
            lines.append(f"Nsight Compute, {who}, the whole launch: "
                         f"{fmt_number(m['gpu__time_duration.sum'] / 1e3)} µs, DRAM busy "
                         f"{m['dram__throughput.avg.pct_of_peak_sustained_elapsed']:.0f}% of it.")
    if not any(own(step) for step, _ in profiled):
        lines.append(f"The plan's own launch (K in {z} slices) was not profiled" +
                     ("" if profiled else ", nor any launch at this shape") + ".")
    return Text("\n".join(lines))


def gemv_gap(shapes=((1, 4096, 4096), (4096, 1, 4096)), time_shape=None, rec=None) -> Table:
    """How far the matrix-vector calls are from reading their operands once at the device
    copy's rate: per shape, the timed call, the time that reading (and writing) its bytes
    once would take at that rate, and the share. The plan's call at each of `shapes`, and
    the exercise's reference kernel at the shape where the grader times the student's
    (`time_shape`, the catalog's): four times the bytes; the time above the bound shows
    how little of the cost grows with them."""
    from gemm_kernels.exercises.catalog import get as exercise
    rec = rec or recording()
    bw = rules(rec).bandwidth_gbps
    ex = exercise("12_gemv")
    time_shape = tuple(time_shape or ex.time_shape)
    runs = [(s, "the plan: " + str(plan_for(s, rec)), row_of(rec, plan_for(s, rec).kernel, s,
                                                           plan_for(s, rec).params))
            for s in shapes]
    runs.append((time_shape, f"the exercise's reference (the grader times yours here), "
                             f"K in {ex.params['SPLIT']} slices",
                 row_of(rec, ex.kernel, time_shape, ex.params)))
    rows = []
    for s, who, row in runs:
        if row is None:
            continue
        M, N, K = s
        nbytes = 4 * (M * K + K * N + M * N)
        call = 2 * M * N * K / (row["gflops"]["median"] * 1e3)
        once = nbytes / (bw * 1e3)
        rows.append({"shape": s, "launch": who, "MiB read and written": nbytes / 2**20,
                     "timed call (µs)": call, "bytes once at the copy's rate (µs)": once,
                     "above the bound (µs)": call - once, "% of the bound": 100 * once / call})
    return Table(rows, ["shape", "launch", "MiB read and written", "timed call (µs)",
                        "bytes once at the copy's rate (µs)", "above the bound (µs)",
                        "% of the bound"],
                 title=f"Matrix-vector calls against reading their bytes once at "
                       f"{fmt_number(bw)} GB/s (the device copy's rate); {rec.label}")


def streaming_gains(rec=None) -> Text:
    """At each M == 1 calibration shape timed with both kinds of load of B: the fastest
    configuration of each kind, the gain of streaming over plain, and at how many
    configurations (same split and block size) streaming was the faster."""
    rec = rec or recording()
    cal = {tuple(s) for n, _, s in calibrate.calibration_runs() if n == GEMV}
    rates: dict = {}
    for r in rec.results:
        shape = tuple(r["shape"])
        if r.get("kernel") == GEMV and "study" not in r and shape in cal \
                and model.gemv_path(shape) == "cols":
            p = r["params"]
            key = (shape, p["SPLIT"], p["WARPS"])
            rates.setdefault(key, {})[bool(p.get("STREAM"))] = r["gflops"]["median"]
    lines = []
    for shape in sorted({k[0] for k in rates}):
        pairs = [v for k, v in rates.items() if k[0] == shape and len(v) == 2]
        if not pairs:
            continue
        plain, stream = max(v[False] for v in pairs), max(v[True] for v in pairs)
        wins = sum(v[True] > v[False] for v in pairs)
        lines.append(f"{_shape_text(shape)}: fastest plain {fmt_number(plain)} GFLOP/s, fastest "
                     f"streaming {fmt_number(stream)} GFLOP/s ({stream / plain - 1:+.0%}); "
                     f"streaming faster in {wins} of {len(pairs)} configurations")
    return Text("Timed calls, M == 1 calibration shapes, both kinds of load of B:\n"
                + "\n".join(lines) if lines else
                "No M == 1 shape was timed with both kinds of load.")


def gemv_split_cost(shape=(4096, 1, 4096), study: str = "ch12_gemv", rec=None) -> Table | Text:
    """Why a split of K slows the N == 1 path: per profiled launch of `study` at `shape`,
    the warps launched, the float4 steps each warp takes through its slice of the row,
    the instructions and global loads executed (all warps), the instructions per warp and
    the time. The loads stay the same; the instructions grow with the warps, because
    every warp pays the same fixed work (its start, the shuffle sum, the split's fence,
    barriers and counter) however short its slice."""
    from gemm_kernels.measure import studies
    rec = rec or recording()
    k = get(GEMV)
    rows = []
    for step, r in studies.results(study, tuple(shape), rec):
        if r is None or step.params.get("STREAM") is False:   # the kind of load of B
            continue                                          # matters on M == 1 only
        p, m = k.resolve(step.params), r["metrics"]
        z = k.grid(p, tuple(shape))[2]
        warps = model.gemv_warps(k, p, shape)
        inst = m["smsp__inst_executed.sum"]
        rows.append({"launch": step.label, "warps": warps,
                     "float4 steps per warp": ceil_div(ceil_div(shape[2], z), 128),
                     "instructions (millions)": inst / 1e6,
                     "global loads (millions)": m["smsp__inst_executed_op_global_ld.sum"] / 1e6,
                     "instructions per warp": inst / warps,
                     "time (µs)": m["gpu__time_duration.sum"] / 1e3})
    if not rows:
        return Text(f"The profile {study} at {_shape_text(shape)} is not in this recording "
                    f"({rec.label}).")
    return Table(rows, list(rows[0]), title=f"The N == 1 path at {_shape_text(shape)}, per "
                                            f"launch (Nsight Compute); {rec.label}")


def model_walkthrough(shape=(1024, 1024, 1024), rec=None) -> Text:
    """The model's formula worked through, step by step, for the plan at `shape`, with
    the fitted constants (`model_terms`); its total is `model.predict_us`'s, the function
    the plan uses, so the walk and the prediction cannot disagree."""
    rec = rec or recording()
    r = rules(rec)
    p = plan_for(shape, rec).params
    BM, BN = p["BM"], p["BN"]
    t = model_terms(shape, BM, BN, p["SPLIT"], rec)
    n, per_sm, q, z = t["n"], t["per_sm"], t["q"], t["z"]
    split = "no split" if z == 1 else f"K in {z} slices"
    path = (", B copied into padded rows first" if t["padded"] else "")
    steps = [
        f"The plan at {_shape_text(shape)}: {BM}x{BN} tiles, {split}{path}; {r.device}, "
        f"{r.sm_count} SMs, gamma = {t['gamma']:g}.",
        f"1. blocks = {t['tiles']} tiles x {z} {'slice' if z == 1 else 'slices'} = {t['blocks']}",
        f"2. n = ceil({t['blocks']} / {r.sm_count}) = {n} blocks on the busiest SM",
        f"3. per_sm = {per_sm} ("
        + ("B padded, section 4" if t["padded"] else "the tile table of section 2")
        + f"), so rounds = ceil({n} / {per_sm}) = "
        f"{t['rounds']} and q = min({n}, {per_sm}) = {q}",
        f"4. K_slice = {t['depth']} (each slice's depth, in whole steps of {t['BK']})",
        f"5. c0 x rounds = {t['c0']:.2f} µs x {t['rounds']} = {t['rounds term']:.2f} µs",
        f"6. c1 x BM x BN x K_slice x n / q^gamma = {t['c1'] * 1e6:.2f} µs per million "
        f"multiply-adds x {BM} x {BN} x {t['depth']} x {n} / {q}^{t['gamma']:g} = "
        f"{t['work term']:.1f} µs",
    ]
    extra = []
    if t["padded"]:
        steps.append(f"{len(steps)}. the copy of B into padded rows: r0 + B read and "
                     f"written ({shape[2]} x ({shape[1]} + {(shape[1] + 3) // 4 * 4}) floats) at "
                     f"{fmt_number(r.bandwidth_gbps)} GB/s = {r.reduce_us:.1f} + "
                     f"{t['copy of B'] - r.reduce_us:.1f} = {t['copy of B']:.1f} µs")
        extra.append(t["copy of B"])
    if z > 1:
        steps.append(f"{len(steps)}. the reduction: r0 + ({z} partial products read + C written) x "
                     f"{shape[0]} x {shape[1]} floats at {fmt_number(r.bandwidth_gbps)} GB/s "
                     f"= {r.reduce_us:.1f} + {t['reduction'] - r.reduce_us:.1f} = "
                     f"{t['reduction']:.1f} µs")
        extra.append(t["reduction"])
    steps.append(f"time = {t['rounds term']:.2f} + {t['work term']:.1f}"
                 + "".join(f" + {e:.1f}" for e in extra) + f" = {fmt_number(t['total'])} µs")
    return Text("\n".join(steps))


# ------------------------------------------------------------------ the vector end

def split_k_edits(part: str = "split") -> Text:
    """What chapter 12's kernel changes in the capstone's source (core/split_k_source.py),
    as a diff with one line of context around each change and "..." between changes
    (comment lines left out: the code is the point here). `part="split"`: split-K's
    edits, against cuda/09_capstone.cu; `part="pad_b"`: the padded B's, against the
    capstone with split-K (section 4 shows them after section 3 has shown the split)."""
    import difflib
    from gemm_kernels.core.registry import CUDA_DIR
    from gemm_kernels.core.source_edits import apply
    from gemm_kernels.core.split_k_source import PAD_B_EDITS, SPLIT_EDITS
    capstone = (CUDA_DIR / "09_capstone.cu").read_text()
    split = apply(capstone, SPLIT_EDITS, "split-K")
    before, after, names = {"split": (capstone, split, ("09_capstone.cu", "with split-K")),
                            "pad_b": (split, apply(split, PAD_B_EDITS, "padded B"),
                                      ("with split-K", "with split-K and PAD_B"))}[part]

    def code(text):
        return [l for l in text.splitlines() if l.strip() and not l.lstrip().startswith("//")]

    lines = difflib.unified_diff(code(before), code(after), *names, n=1, lineterm="")
    return Text("\n".join("..." if l.startswith("@@") else l for l in lines))


# ------------------------------------------------------------------ the matrix-vector warp

LANES = 32

def plot_gemv_warp(warps: int = 8, rows: int = 3, ax=None):
    """Top: the M == 1 path's block strip of 128 columns of B (32 lanes x a float4). At each
    step one warp reads one row of the strip, lane l the 16 bytes at column 4l, 512
    contiguous bytes in all; warp w takes rows w, w + WARPS, ... Bottom: 32 lanes adding
    their partial sums with `__shfl_xor_sync` in 5 rounds, d = 16, 8, 4, 2, 1: in each
    round lane l adds the value of lane l ^ d, so every lane ends with the whole sum."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    if ax is None:
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 8.6), layout="constrained",
                                          gridspec_kw={"height_ratios": [1, 1.55]})
    else:
        top, bottom = ax
    # the strip: rows k of B, warps by colour, the lanes' float4 cells in warp 0's rows
    shown = [w + r * warps for r in range(rows) for w in (0, 1)]
    warp_colour = {0: plt.cm.tab10(0), 1: plt.cm.tab10(1)}
    for y, k in enumerate(sorted(shown)):
        w = k % warps
        for lane in range(LANES):
            top.add_patch(Rectangle((4 * lane, y), 4, 0.8, facecolor=warp_colour[w],
                                    alpha=0.35 + 0.5 * (lane % 2), edgecolor="white", lw=0.5))
            if y == 0:
                top.text(4 * lane + 2, y + 0.4, str(lane), ha="center", va="center", fontsize=7)
        top.text(-1, y + 0.4, f"k = {k} (warp {w})", ha="right", va="center", fontsize=8)
    top.annotate("", xy=(128, -0.35), xytext=(0, -0.35),
                 arrowprops={"arrowstyle": "<->"})
    top.text(64, -0.55, "one step of one warp: 32 lanes x one float4 (16 bytes) = 512 "
             "contiguous bytes of one row", ha="center", va="bottom", fontsize=9)
    top.set_xlim(-16, 130)
    top.set_ylim(len(shown) + 0.2, -1.6)
    top.set_xticks(range(0, 129, 16))
    top.set_xlabel("column of the block's 128-column strip of B (lane l reads columns 4l to 4l + 3; "
                   "the number is the lane)")
    top.set_yticks([])
    for side in ("top", "right", "left"):
        top.spines[side].set_visible(False)
    top.set_title(f"M == 1: a block of {warps} warps (the plan's blocks have "
                  f"{rules().gemv_warps['cols']}) reads its strip row by row: warp w takes rows "
                  f"k = w, w + {warps}, w + {2 * warps}, ... (warps 0 and 1 shown)", fontsize=10)
    # the shuffle tree: lane positions across, rounds down; a line from each lane to the
    # lane whose value it adds
    rounds = [16, 8, 4, 2, 1]
    for r, d in enumerate(rounds):
        colour = plt.cm.tab10(r + 2)
        for lane in range(LANES):
            bottom.plot([lane, lane], [r, r + 1], color="0.8", lw=0.6)     # its own value
            bottom.plot([lane ^ d, lane], [r, r + 1], color=colour, lw=0.8, alpha=0.8)
        bottom.text(LANES + 0.3, r + 0.5, f"round {r + 1}: d = {d}\nlane l adds lane l ^ {d}",
                    va="center", fontsize=8, color=colour)
    for r in range(len(rounds) + 1):
        held = 2 ** r
        bottom.scatter(range(LANES), [r] * LANES, s=22, zorder=3, color="0.2")
        bottom.text(-0.8, r, f"{held} partial sum{'s' if held > 1 else ''}\nper lane",
                    ha="right", va="center", fontsize=8)
    bottom.set_xlim(-4.5, LANES + 4.5)
    bottom.set_ylim(len(rounds) + 0.4, -0.4)
    bottom.set_xticks(range(0, LANES, 4))
    bottom.set_xlabel("lane")
    bottom.set_yticks([])
    for side in ("top", "right", "left"):
        bottom.spines[side].set_visible(False)
    bottom.set_title("A warp's 32 partial sums without shared memory: __shfl_xor_sync(0xffffffff, "
                     "v, d) in 5 rounds", fontsize=10)
    return top, bottom


def gemv_bound_gflops(shape, bandwidth_gbps: float) -> float:
    """The roofline of a matrix-vector product: its FLOPs (2 per element of the matrix)
    over the time to read the matrix and the vector and write the result at
    `bandwidth_gbps`."""
    M, N, K = shape
    nbytes = 4 * (M * K + K * N + M * N)      # one of the operands is the vector
    return 2 * M * N * K / (nbytes / bandwidth_gbps)


THIN = 4     # M or N this small: the product reads far more than it computes


def gemv_table(rec=None) -> Table:
    """The benchmark's vector (and nearly vector) shapes: the rate, cuBLAS's, and the
    bandwidth bound (the device copy's rate recorded for the rules, times the FLOPs per
    byte read and written)."""
    rec = rec or recording()
    bw = rules(rec).bandwidth_gbps
    rows = [{**{k: r[k] for k in ("shape", "plan", "GFLOP/s", "cuBLAS GFLOP/s")},
             "bound GFLOP/s": gemv_bound_gflops(r["shape"], bw),
             "% of the bound": 100 * r["GFLOP/s"] / gemv_bound_gflops(r["shape"], bw)
             if r["GFLOP/s"] else None}
            for r in bench_rows(rec) if min(r["shape"][:2]) <= THIN]
    return Table(rows, ["shape", "plan", "GFLOP/s", "cuBLAS GFLOP/s", "bound GFLOP/s",
                        "% of the bound"],
                 title=f"The matrix-vector (and nearly so: M or N at most {THIN}) shapes against "
                       f"their roofline ({fmt_number(bw)} GB/s, the device copy's rate); "
                       f"{rec.label}")


def sgemm_demo(shape=(777, 555, 333)) -> Text:
    """Live: `choose.sgemm` on random inputs, checked against CuPy's product. Recorded
    mode: a note saying it needs a GPU."""
    if not device.is_live():
        return Text("sgemm runs kernels, so it needs a GPU: in recorded mode this cell only "
                    "says so. On a GPU it multiplies random matrices of this shape with the "
                    "plan below and compares the result with CuPy's product.\n"
                    f"The plan it would run at {_shape_text(shape)}: {plan_for(shape)}.")
    import cupy as cp
    M, N, K = shape
    A = cp.random.rand(M, K, dtype=cp.float32)
    B = cp.random.rand(K, N, dtype=cp.float32)
    C = choose.sgemm(A, B)
    err = float(cp.abs(C - A @ B).max() / cp.abs(A @ B).max())
    return Text(f"sgemm at {_shape_text(shape)} ran {choose.plan(shape)}; largest difference "
                f"from CuPy's product, relative to its largest element: {err:.1e}.")


# ------------------------------------------------------------------ the model's evidence

def _time_us(row) -> float:
    M, N, K = row["shape"]
    return 2 * M * N * K / (row["gflops"]["median"] * 1e3)


def fit_points(rec=None) -> list[dict]:
    """Per calibration row of the split kernel: the configuration (PAD_B: B copied into
    padded rows first), predicted and measured time (microseconds). Each row is predicted
    as it ran, padded or not, so the two runs of one tile at a ragged shape differ."""
    rec = rec or recording()
    r, lim = rules(rec), _limits(rec)
    out = []
    for kernel, params, shape in calibrate.calibration_runs():
        row = row_of(rec, kernel, shape, params) if kernel == SPLIT else None
        if row is None:
            continue
        pad = model._padded_row(row)
        out.append({"shape": tuple(shape), "BM": params["BM"], "BN": params["BN"],
                    "SPLIT": params["SPLIT"], "PAD_B": pad, "measured_us": _time_us(row),
                    "predicted_us": model.predict_us(r, shape, params["BM"], params["BN"],
                                                     params["SPLIT"], sm_count=r.sm_count,
                                                     limits=lim, padded=pad)})
    return out


def rules_summary(rec=None) -> Text:
    """The fitted constants of the recording's device, in the chapter's words, with what
    they make of a full SM: q blocks side by side do q times the work in q^(1 - gamma)
    times the time (the model's c1 x work x q / q^gamma), so the SM computes alone x
    q^gamma."""
    rec = rec or recording()
    r = rules(rec)
    pts = fit_points(rec)
    plain = sum(1 for p in pts if p["SPLIT"] == 1)
    lines = [f"Fitted on {r.device}: c0 and c1 of each tile from {plain} measurements without "
             f"a split, r0 from {len(pts) - plain} with one; gamma = {r.gamma:g}; the "
             f"reduction's fixed cost r0 = {r.reduce_us:.1f} µs"]
    lim = _limits(rec)
    for (BM, BN), (name, c) in zip(model.TILES, r.tiles.items()):
        alone = 2 / c["c1_us_per_mfma"] / 1e3
        q = model.slots(model.split_params(BM, BN, 1), model.registers(c, 4), 1, lim)
        lines.append(f"  {name} tile: c0 = {c['c0_us']:.1f} µs per round; one block alone on "
                     f"an SM: {fmt_number(alone)} GFLOP/s; {q} side by side (a full SM, N a "
                     f"multiple of 4): {fmt_number(alone)} x {q}^{r.gamma:g} = "
                     f"{fmt_number(alone * q ** r.gamma)} GFLOP/s per SM")
    lines.append(f"  matrix-vector products: blocks of {r.gemv_warps['cols']} warps where "
                 f"M == 1, {r.gemv_warps['rows']} where N == 1, and the smallest split that "
                 f"gives every SM {r.gemv_warps_per_sm} warps")
    both = r.provenance.get("padded_b_faster")
    if both:
        lines.append(f"  N % 4 != 0: B {'padded' if r.pad_ragged_b else 'not padded'} (padding was "
                     f"faster at {both} calibration shapes and tiles timed both ways)")
    both = r.provenance.get("gemv_streaming_faster")
    if both:
        lines.append(f"  M == 1: {'streaming' if r.gemv_stream else 'plain'} loads of B (streaming "
                     f"was faster at {both} calibration shapes timed both ways)")
    return Text("\n".join(lines))


def gemv_rule(shapes=((1, 4096, 4096), (4096, 1, 4096)), rec=None) -> Text:
    """Where the matrix-vector plan's numbers come from (`model.fit`, recomputed here
    from the calibration rows): per path, how often each block size was the fastest; the
    warps per SM of the fastest configuration at each calibration shape (the launch's
    warps, all blocks of all slices, over the SMs) and their median; then, at each of
    `shapes`, the warps each split launches until one reaches that median x SMs, as
    `choose.gemv_params` decides."""
    import statistics
    from collections import Counter
    rec = rec or recording()
    r, k = rules(rec), get(GEMV)
    best: dict = {}
    for row in calibrate.calibration_rows(rec):
        if row["kernel"] == GEMV:
            key = tuple(row["shape"])
            if key not in best or row["gflops"]["median"] > best[key]["gflops"]["median"]:
                best[key] = row
    if not best:
        return Text(f"No matrix-vector calibration run in this recording ({rec.label}).")
    names = {"cols": "M == 1", "rows": "N == 1"}
    lines = [f"Where the matrix-vector plan's numbers come from: at each of {len(best)} "
             f"calibration shapes every block size, split and kind of load was timed, and the "
             f"fastest at each shape counts ({rec.label})."]
    for path in model.GEMV_PATHS[::-1]:
        wins = Counter(row["params"]["WARPS"] for s, row in best.items()
                       if model.gemv_path(s) == path)
        shapes_ = sum(wins.values())
        lines.append(f"* Block size, {names[path]}: " + "; ".join(
            f"{w} warps fastest at {n} of {shapes_} shapes" for w, n in wins.most_common())
            + f": the plan takes {r.gemv_warps[path]}.")
    per_sm = {s: model.gemv_warps(k, row["params"], s) / r.sm_count for s, row in best.items()}
    med = statistics.median(per_sm.values())
    lines.append("* Warps per SM of the fastest launch (its warps over the "
                 f"{r.sm_count} SMs): " + ", ".join(
                     f"{_shape_text(s)} {w:.1f}" for s, w in sorted(per_sm.items()))
                 + f"; median {med:.1f}, rounded: {r.gemv_warps_per_sm} per SM, "
                 f"{r.gemv_warps_per_sm} x {r.sm_count} = {r.gemv_warps_per_sm * r.sm_count:,} "
                 "warps a launch must reach.")
    splits = next(q for q in k.params if q.name == "SPLIT").values
    need = r.gemv_warps_per_sm * r.sm_count
    for shape in map(tuple, shapes):
        chosen = choose.gemv_params(shape, r)
        p1 = k.resolve({**chosen, "SPLIT": 1})
        g = k.grid(p1, shape)
        steps = []
        for z in splits:
            warps = model.gemv_warps(k, {**chosen, "SPLIT": z}, shape)
            steps.append(("no split" if z == 1 else f"K in {z} slices") + f" {warps:,}")
            if z == chosen["SPLIT"]:
                break
        lines.append(f"* {_shape_text(shape)} ({names[model.gemv_path(shape)]}): "
                     f"{g[0] * g[1]:,} blocks x {p1['WARPS']} warps = "
                     f"{g[0] * g[1] * p1['WARPS']:,} warps per slice of K. Warps launched: "
                     + ", ".join(steps) + f"; the first to reach {need:,}: "
                     + ("no split." if chosen["SPLIT"] == 1 else
                        f"K in {chosen['SPLIT']} slices."))
    return Text("\n".join(lines))


def c0_clamp(rec=None) -> Text:
    """For each tile whose least-squares c0 came out negative: that c0, the c1 fitted with
    it (the one the model keeps, c0 being set to 0), and the c1 of a fit with c0 held at
    0: how much clamping without a refit moves the model's predictions."""
    rec = rec or recording()
    r, lim = rules(rec), _limits(rec)
    rows = [row for row in calibrate.calibration_rows(rec) if row["kernel"] == SPLIT
            and row["params"]["SPLIT"] == 1 and not model._padded_row(row)]
    lines = []
    for BM, BN in model.TILES:
        name = model.tile_name(BM, BN)
        plain = [row for row in rows if (row["params"]["BM"], row["params"]["BN"]) == (BM, BN)]
        tile = r.tiles[name]
        c0, c1 = model.tile_line(plain, BM, BN, tile, r.sm_count, lim, r.gamma)
        if c0 >= 0:
            continue
        _, c1_0 = model.tile_line(plain, BM, BN, tile, r.sm_count, lim, r.gamma, origin=True)
        lines.append(f"{name} tile: least squares gives c0 = {c0:.1f} µs and c1 = "
                     f"{c1 * 1e6:.3f} µs per million multiply-adds; the model uses c0 = 0 "
                     f"with that c1, so it predicts {-c0:.1f} µs per round more than the "
                     f"fitted line. Refitted with c0 held at 0, c1 would be {c1_0 * 1e6:.3f} "
                     f"({c1_0 / c1 - 1:+.1%}).")
    return Text("\n".join(lines) or "No tile's least-squares c0 came out negative.")


def padding_table(rec=None) -> Table:
    """The calibration configurations timed both with B padded and without (N % 4 != 0):
    each time, the padded one with its copy of B, and which was faster: the evidence
    behind the padding rule of `rules_summary`."""
    rec = rec or recording()
    rows = [row for kernel, params, shape in calibrate.calibration_runs()
            if kernel == SPLIT and (row := row_of(rec, kernel, shape, params)) is not None]
    out = [{"shape": key[0], "tile": model.tile_name(key[1], key[2]),
            "split": "no split" if key[3] == 1 else f"K in {key[3]}",
            "B as it is (µs)": t[False], "B padded, copy included (µs)": t[True],
            "faster": "padded" if t[True] < t[False] else "as it is",
            "padded / as it is time %": 100 * t[True] / t[False]}
           for key, t in sorted(model.padding_pairs(rows).items())]
    wins = sum(r["faster"] == "padded" for r in out)
    # One decimal: a near tie would round to 100% and read as no difference.
    return Table(out, list(out[0]) if out else ["shape"], pct_decimals=1,
                 title=f"Ragged N, timed both ways: padding was faster at {wins} of {len(out)}; "
                       f"{rec.label}")


def plot_fit(rec=None, ax=None):
    """Predicted against measured time on the calibration rows, log-log, y = x."""
    import matplotlib.pyplot as plt
    rec = rec or recording()
    pts = fit_points(rec)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 6))
    for split, marker in ((False, "o"), (True, "^")):
        sel = [p for p in pts if (p["SPLIT"] > 1) == split]
        ax.scatter([p["measured_us"] for p in sel], [p["predicted_us"] for p in sel], s=14,
                   marker=marker, alpha=0.7,
                   label="with a split of K" if split else "no split (the rows fitted)")
    lo = min(min(p["measured_us"], p["predicted_us"]) for p in pts) * 0.8
    hi = max(max(p["measured_us"], p["predicted_us"]) for p in pts) * 1.2
    ax.plot([lo, hi], [lo, hi], "k-", linewidth=1, label="predicted = measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured time (µs)")
    ax.set_ylabel("predicted time (µs)")
    ax.legend(fontsize=8)
    ax.set_title(f"The model on its {len(pts)} calibration rows\n{rec.label}", fontsize=10)
    return ax


def fit_summary(rec=None, bands=(20.0, 100.0, 1000.0)) -> Text:
    """The median ratio of predicted to measured time on the calibration rows, in bands of
    measured time (split at `bands`, in microseconds)."""
    import statistics
    pts = fit_points(rec)
    edges = [0.0, *bands, float("inf")]
    parts = []
    for lo, hi in zip(edges, edges[1:]):
        name = (f"under {fmt_number(hi)} µs" if lo == 0 else f"over {fmt_number(lo)} µs"
                if hi == float("inf") else f"{fmt_number(lo)} µs to {fmt_number(hi)} µs")
        r = [p["predicted_us"] / p["measured_us"] for p in pts if lo <= p["measured_us"] < hi]
        if r:
            parts.append(f"{name}: {len(r)} rows, median {statistics.median(r):.2f}")
    return Text(f"Predicted / measured time on the {len(pts)} calibration rows, by measured "
                "time (1 is exact, above 1 the model predicts too long a time): "
                + "; ".join(parts) + ".")


def fit_outliers(rec=None, factor: float = 3.0) -> Text:
    """The calibration rows measured more than `factor` times their prediction, each with
    the spread of its repeats and cuBLAS's rate timed beside it against cuBLAS's beside
    the other rows at the same shape: a run disturbed as a whole slows both."""
    import statistics
    rec = rec or recording()
    lines = []
    for p in fit_points(rec):
        if p["measured_us"] < factor * p["predicted_us"]:
            continue
        params = {k: p[k] for k in ("BM", "BN", "SPLIT", "PAD_B")}
        row = row_of(rec, SPLIT, p["shape"], params)
        others = [r["reference"]["gflops"]["median"] for r in rec.results
                  if r.get("kernel") == SPLIT and tuple(r["shape"]) == p["shape"]
                  and r is not row and "reference" in r]
        g = row["gflops"]
        fitted = "was" if p["SPLIT"] == 1 else "was not"
        lines.append(
            f"{_shape_text(p['shape'])}, {_config(params)}: measured {p['measured_us']:.0f} µs, "
            f"predicted {p['predicted_us']:.1f} µs. Its {row['repeats']} repeats ranged from "
            f"{fmt_number(g['min'])} to {fmt_number(g['max'])} GFLOP/s, and cuBLAS, timed beside "
            f"it, ran at {fmt_number(row['reference']['gflops']['median'])} GFLOP/s"
            + (f", against {fmt_number(statistics.median(others))} beside the other "
               f"configurations at this shape" if others else "")
            + f". The fit of this tile's constants {fitted} given this row"
            + (_refit_without(row, rec) if p["SPLIT"] == 1 else "") + ".")
    return Text("\n".join(lines) or f"No calibration row took more than {factor:g} times "
                "its predicted time.")


def _refit_without(row: dict, rec) -> str:
    """How far the least-squares (c0, c1) of `row`'s tile move when the fit leaves that
    row out: how much one disturbed row weighs in the model."""
    r, lim = rules(rec), _limits(rec)
    BM, BN = row["params"]["BM"], row["params"]["BN"]
    plain = [x for x in calibrate.calibration_rows(rec) if x["kernel"] == SPLIT
             and x["params"]["SPLIT"] == 1 and not model._padded_row(x)
             and (x["params"]["BM"], x["params"]["BN"]) == (BM, BN)]
    tile = r.tiles[model.tile_name(BM, BN)]
    fit = [model.tile_line(rows, BM, BN, tile, r.sm_count, lim, r.gamma)
           for rows in (plain, [x for x in plain if x is not row])]
    (c0, c1), (d0, d1) = fit
    return (f": left out, the tile's least-squares c0 goes from {c0:.1f} to {d0:.1f} µs and "
            f"c1 from {c1 * 1e6:.3f} to {d1 * 1e6:.3f} µs per million multiply-adds "
            f"({d1 / c1 - 1:+.1%})")


def pick_rows(rec=None) -> list[dict]:
    """At each calibration shape, among the configurations recorded there that the plan
    would run (B padded or not as the rules say, as in `_measured_rates`): the one the
    model ranks first, its measured rate, and the best measured one (the model's pick need
    not be the best; the loss is what it costs), and how much longer the model predicted
    the best measured one to take than its pick."""
    rec = rec or recording()
    r = rules(rec)
    by_shape: dict = {}
    for p in fit_points(rec):
        by_shape.setdefault(p["shape"], []).append(p)
    out = []
    for shape, pts in by_shape.items():
        runnable = [p for p in pts if p["PAD_B"] == model.pads(r, shape)]
        if len(runnable) < 2:
            continue
        pick = min(runnable, key=lambda p: p["predicted_us"])
        best = min(runnable, key=lambda p: p["measured_us"])
        out.append({"shape": shape, "configurations": len(runnable),
                    "model's pick": _config(pick), "best measured": _config(best),
                    "predicted gap": best["predicted_us"] / pick["predicted_us"] - 1,
                    "best's predicted time vs the pick's":
                        f"{100 * (best['predicted_us'] / pick['predicted_us'] - 1):+.1f}%",
                    "pick / best rate %": 100 * (best["measured_us"] / pick["measured_us"])})
    return out


def _config(p) -> str:
    split = "no split" if p["SPLIT"] == 1 else f"K in {p['SPLIT']}"
    return f"{p['BM']}x{p['BN']}, {split}" + (", B padded" if p.get("PAD_B") else "")


def pick_table(rec=None, misses_only: bool = False) -> Table:
    """The model's pick against the best measured at each calibration shape; with
    `misses_only`, only the shapes where the pick is not the best measured (the rows that
    teach: what a wrong pick costs), the others counted in the title, and how many of the
    misses the model put within its typical error (`model_error`) of its pick."""
    rec = rec or recording()
    rows = pick_rows(rec)
    shown = [r for r in rows if r["model's pick"] != r["best measured"]] if misses_only else rows
    err = model_error(rec)
    close = sum(r["predicted gap"] <= err for r in shown)
    what = (f"the {len(shown)} of {len(rows)} calibration shapes where the model's pick is not "
            f"the best one measured; at {close} of them the model predicted the best within "
            f"its typical error ({err:.0%}) of its pick" if misses_only else
            "At the calibration shapes (several configurations timed at each): the model's "
            "pick against the best one measured")
    cols = ["shape", "configurations", "model's pick", "best measured",
            *(["best's predicted time vs the pick's"] if misses_only else []), "pick / best rate %"]
    return Table(shown, cols, title=f"{what[0].upper()}{what[1:]}; {rec.label}")


# ------------------------------------------------------------------ choose the plan

# Part 1 passes a choice whose measured rate is within this share of the fastest measured:
# about the spread of the repeats of one configuration, so a pass is a choice a rerun could
# place first.
PASS_WITHIN = 0.05


def _measured_rates(shape, rec) -> dict:
    """{(BM, BN, split): median GFLOP/s} of the capstone_split configurations recorded at
    `shape`, with B padded or not as the plan would run them there."""
    pad = model.pads(rules(rec), shape)
    return {(r["params"]["BM"], r["params"]["BN"], r["params"]["SPLIT"]): r["gflops"]["median"]
            for r in rec.find(SPLIT, list(shape))
            if "gflops" in r and bool(r["params"].get("PAD_B")) == pad}


def choice_passes(shape, BM: int, BN: int, split: int, rec=None) -> bool:
    """Part 1's pass rule, on measurements: (BM, BN, split) was timed at `shape` and ran
    within PASS_WITHIN of the fastest configuration timed there. False for a choice that
    was not timed (so not a candidate either)."""
    rates = _measured_rates(tuple(shape), rec or recording())
    mine = rates.get((BM, BN, split))
    return mine is not None and mine >= max(rates.values()) * (1 - PASS_WITHIN)


def top_measured(shape, top: int = 5, rec=None) -> Table:
    """The model's `top` fastest candidates at `shape` with what each measured there (B
    padded or not as the plan runs it) and Part 1's verdict on it; the title counts the
    configurations timed there that pass: the model narrows the field, the measurement
    picks among the few it cannot separate."""
    rec = rec or recording()
    shape = tuple(shape)
    rates = _measured_rates(shape, rec)
    fastest = max(rates.values())
    rows = [{"model's rank": i, "tile, slices": f"{c[0]}x{c[1]}, K in {c[2]}",
             "predicted (µs)": t, "measured GFLOP/s": rates.get(c),
             "% of the fastest measured": 100 * rates[c] / fastest if c in rates else None,
             "Part 1": "pass" if choice_passes(shape, *c, rec) else "fail"}
            for i, (t, c) in enumerate(ranked(shape, rules(rec), _limits(rec))[:top], 1)]
    passing = [c for c in rates if choice_passes(shape, *c, rec)]
    names = ", ".join(f"{c[0]}x{c[1]} with K in {c[2]}" for c in sorted(passing))
    return Table(rows, list(rows[0]),
                 title=f"The model's {top} fastest candidates at {_shape_text(shape)}, measured: "
                       f"{len(passing)} of the {len(rates)} configurations timed here pass "
                       f"(within {PASS_WITHIN:.0%} of the fastest): {names}; {rec.label}")


def rate_choice(shape, BM: int, BN: int, split: int, rec=None, reveal: bool = False,
                terms: dict | None = None, ranking: bool = False) -> Text:
    """How the model rates (BM, BN, split) at `shape`: predicted time, the recorded rate
    where that configuration was recorded there, its place among the candidates, and
    Part 1's grade. The grade needs both the student's own work and the measurement:
    `terms` (blocks, n, q, rounds of this choice, worked by hand) checked as `check_terms`
    checks them, and `choice_passes` (on the measured rates). The choice's blocks, waves
    and filled share are printed only once the terms are right, so the output does not
    answer them. The model's best and the fastest measured are shown only with `reveal`:
    the exercise's answer is not printed under a try, not even under the model's own
    pick. `ranking=True` adds the model's whole ranking, the tool Part 1's method needs; a
    choice that is no candidate prints it instead of a rating."""
    rec = rec or recording()
    r, lim = rules(rec), _limits(rec)
    shape = tuple(shape)
    order = ranked(shape, r, lim)
    whole = ("The model's candidates, fastest predicted first (tile / slices of K: "
             "predicted time over the best's): "
             + ", ".join(f"{a}x{b}/{s} {t / order[0][0]:.2f}x" for t, (a, b, s) in order) + ".")
    mine = next((t for t, c in order if c == (BM, BN, split)), None)
    if mine is None:
        return Text(f"{BM}x{BN} with K in {split} slices is not a candidate at "
                    f"{_shape_text(shape)}: tiles are "
                    f"{', '.join(model.tile_name(*t) for t in model.TILES)}, "
                    f"and each slice needs at least {choose.MIN_STEPS_PER_SLICE} steps of K. "
                    + whole)
    best_t, best = order[0]
    place = [c for _, c in order].index((BM, BN, split)) + 1

    def line(who, t, c, counts=True):
        lay = wave_layout(shape, *c, rec)
        row = row_of(rec, SPLIT, shape, {"BM": c[0], "BN": c[1], "SPLIT": c[2],
                                         "PAD_B": model.pads(r, shape)})
        rec_text = (f"recorded {fmt_number(row['gflops']['median'])} GFLOP/s"
                    if row else "not recorded at this shape")
        split = "no split" if lay["slices"] == 1 else f"K in {lay['slices']} slices"
        split += ", B padded" if model.pads(r, shape) else ""
        return (f"{who}: {c[0]}x{c[1]}, {split}: predicted "
                f"{fmt_number(t)} µs ({fmt_number(2 * shape[0] * shape[1] * shape[2] / (t * 1e3))}"
                f" GFLOP/s), "
                + (f"{lay['blocks']:,} blocks, {_waves_text(lay['waves'])}, "
                   f"{lay['filled']:.0%} of the slots filled; " if counts else "")
                + rec_text)
    verdict = ("the model's best" if place == 1 else
               f"number {place} of {len(order)}, predicted {mine / best_t:.2f}x the best's time")
    show = reveal     # the model's best and the fastest measured: the exercise's answer
    err = model_error(rec)
    rates = _measured_rates(shape, rec)
    mine_rate = rates.get((BM, BN, split))
    timed = (f"measured {fmt_number(mine_rate)} GFLOP/s, "
             f"{100 * mine_rate / max(rates.values()):.0f}% of the fastest configuration "
             "timed here" if mine_rate else "not timed at this shape")
    fast = choice_passes(shape, BM, BN, split, rec)
    terms_ok, terms_text = _terms_verdict(shape, (BM, BN, split), terms or {}, rec)
    if fast and terms_ok:
        grade = f"PASS: {timed}, and your terms are right"
    elif not fast:
        grade = (f"not yet: {timed}; to pass, a choice must run within {PASS_WITHIN:.0%} "
                 "of the fastest measured, and its terms must be right")
    else:
        grade = f"not yet: {timed}, fast enough; now its terms (the line above)"
    lines = [f"{_shape_text(shape)} under the rules of {r.device}:",
             line("your choice", mine, (BM, BN, split), counts=terms_ok),
             f"Your terms: {terms_text}",
             *([line("the model's best", best_t, best)] if show else []),
             f"Your choice is {verdict}. The model's predictions are off by "
             f"{err:.0%} or less for half of its calibration measurements: "
             "choices it predicts within that of each other, only a measurement tells apart.",
             f"Part 1: {grade}.",
             *([whole] if ranking else [])]
    measured = measured_best(shape, rec)
    if measured and show:
        lines.append(f"Measured at this shape: the fastest configuration is {measured}.")
    elif not show:
        lines.append(("" if fast else "Try another choice; ")
                     + "`reveal=True` shows the model's best and the fastest measured.")
    return Text("\n".join(lines))


def model_terms(shape, BM: int, BN: int, split: int, rec=None) -> dict:
    """Every quantity of the model's formula for (BM, BN, split) at `shape`, on the
    recording's device: tiles, slices z, blocks, n on the busiest SM, per_sm, rounds, q,
    the slice's depth, the constants, the two GEMM terms, the reduction and the total
    (`model.predict_us`'s, the function the plan uses)."""
    rec = rec or recording()
    r, lim = rules(rec), _limits(rec)
    c = r.tiles[model.tile_name(BM, BN)]
    padded = model.pads(r, shape)       # as the plan and `model.predict_us` take it
    regs = model.registers(c, shape[1], padded)
    (rounds, work), z = model.terms(shape, BM, BN, split, regs, r.sm_count, lim, r.gamma)
    p = model.split_params(BM, BN, split)
    per_sm = model.slots(p, regs, 1, lim)
    tiles = W.tiles(shape, BM, BN)
    n = ceil_div(tiles * z, r.sm_count)
    total = model.predict_us(r, shape, BM, BN, split, sm_count=r.sm_count, limits=lim)
    t0, t1 = c["c0_us"] * rounds, c["c1_us_per_mfma"] * work
    copy = model.copy_us(r, shape) if padded else 0.0
    return {"tiles": tiles, "z": z, "blocks": tiles * z, "n": n, "per_sm": per_sm,
            "rounds": rounds, "q": min(n, per_sm), "BK": p["BK"],
            "depth": ceil_div(ceil_div(shape[2], p["BK"]), z) * p["BK"],
            "c0": c["c0_us"], "c1": c["c1_us_per_mfma"], "gamma": r.gamma,
            "rounds term": t0, "work term": t1, "padded": padded, "copy of B": copy,
            "reduction": total - t0 - t1 - copy, "total": total}


def plan_terms(shape, configs, rec=None) -> Table:
    """The model's terms for each (BM, BN, split) of `configs` at `shape`: the busiest
    SM's blocks n, how many it holds at once, rounds, the work term n / q^gamma per
    block's multiply-adds, the reduction, and the predicted time."""
    rec = rec or recording()
    rows = []
    for BM, BN, split in configs:
        t = model_terms(shape, BM, BN, split, rec)
        rows.append({"tile, slices": f"{BM}x{BN}, {t['z']}", "blocks": t["blocks"],
                     "n on the busiest SM": t["n"], "held at once": t["q"],
                     "rounds": t["rounds"], "n / q^gamma": t["n"] / t["q"] ** t["gamma"],
                     "depth of a slice": t["depth"],
                     "GEMM (µs)": t["rounds term"] + t["work term"],
                     **({"copy of B (µs)": t["copy of B"]} if t["padded"] else {}),
                     "reduction (µs)": t["reduction"], "predicted (µs)": t["total"]})
    return Table(rows, list(rows[0]), title=f"The model's terms at {_shape_text(shape)} "
                                             f"(gamma = {rules(rec).gamma:g}; {rules(rec).device})")


def predicted_times(shape, configs, rec=None) -> Text:
    """The model's predicted time of each (BM, BN, split) of `configs` at `shape`, and the
    recorded time where that configuration was timed there: one line, for a comparison
    the text makes before section 6 explains the model (so no terms, only the totals)."""
    rec = rec or recording()
    r = rules(rec)
    pp = plan_for(shape, rec).params
    parts = []
    for BM, BN, split in configs:
        t = model_terms(shape, BM, BN, split, rec)
        row = row_of(rec, SPLIT, shape, {"BM": BM, "BN": BN, "SPLIT": split,
                                         "PAD_B": t["padded"]})
        mine = " (the plan)" if (pp.get("BM"), pp.get("BN"), pp.get("SPLIT")) == \
            (BM, BN, split) else ""
        what = "no split" if t["z"] == 1 else f"K in {t['z']} slices"
        parts.append(f"{BM}x{BN}, {what}{mine}: predicted {fmt_number(t['total'])} µs, "
                     + (f"timed {fmt_number(_time_us(row))} µs" if row else "not timed here"))
    return Text(f"At {_shape_text(shape)}, section 6's model ({r.device}): "
                + "; ".join(parts) + ".")


def check_terms(shape, answers: dict, rec=None) -> Text:
    """Part 1's worked terms checked against the model's (`model_terms`, as `plan_terms`
    prints them): `answers` maps (BM, BN, split) to a dict of blocks, n, rounds and q
    worked out by hand. A wrong value is answered with a question, not the number."""
    lines = []
    for (BM, BN, split), mine in answers.items():
        head = f"{BM}x{BN}, {split} slice{'s' if split > 1 else ''}"
        lines.append(f"{head}: {_terms_verdict(shape, (BM, BN, split), mine, rec)[1]}")
    return Text("\n".join(lines))


TERM_HINTS = {"blocks": "how many tiles does C have, times the slices of K?",
              "n": "spread the blocks evenly over the SMs: how many does the busiest get?",
              "q": "how many of those n can one SM hold at once (section 2's table)?",
              "rounds": "n blocks, q at a time: how many rounds, counting a partly filled one?"}


def _terms_verdict(shape, config, mine: dict, rec=None) -> tuple[bool, str]:
    """Whether `mine` (blocks, n, q, rounds, worked by hand) matches the model's terms for
    `config` at `shape`, and what to say: the missing names, or a question for each wrong
    value (never the number)."""
    t = model_terms(shape, *config, rec or recording())
    missing = [k for k in TERM_HINTS if mine.get(k) is None]
    wrong = [k for k in TERM_HINTS if k not in missing and mine[k] != t[k]]
    if missing:
        return False, f"fill in {', '.join(missing)}."
    if wrong:
        return False, " ".join(f"{k} = {mine[k]}? {TERM_HINTS[k]}" for k in wrong)
    return True, "blocks, n, q and rounds all right."


def round_by_round(n: int, per_sm: int, gamma: float) -> float:
    """The work term n / q^gamma priced round by round: each round's blocks at the speed
    of as many side by side as that round holds (a partly filled last round holds fewer).
    The model (`model.terms`) prices every round at q = min(n, per_sm)."""
    full, last = divmod(n, per_sm)
    return full * per_sm ** (1 - gamma) + (last ** (1 - gamma) if last else 0.0)


def round_sum_text(n: int, per_sm: int, gamma: float) -> str:
    """`round_by_round(n, per_sm, gamma)` written out round by round, e.g. "3 / 3^0.25 +
    1 / 1^0.25 = 3.28": each round's blocks over their count to the power gamma."""
    full, last = divmod(n, per_sm)
    terms = [f"{per_sm} / {per_sm}^{gamma:g}"] * full + ([f"{last} / {last}^{gamma:g}"] if last else [])
    return f"{' + '.join(terms)} = {round_by_round(n, per_sm, gamma):.2f}"


def last_round_table(shape, configs, rec=None) -> Table:
    """For each (BM, BN, split) of `configs` at `shape`: the model's work term and
    prediction, the same with each round priced at its own number of blocks
    (`round_by_round`), and the measured time where it was recorded. It shows where the
    model's q = min(n, per_sm) flatters a plan whose last round is partly filled."""
    rec = rec or recording()
    r = rules(rec)
    rows = []
    for BM, BN, split in configs:
        t = model_terms(shape, BM, BN, split, rec)
        own = round_by_round(t["n"], t["per_sm"], t["gamma"])
        alt = t["total"] - t["work term"] + t["work term"] * own / (t["n"] / t["q"] ** t["gamma"])
        row = row_of(rec, SPLIT, shape, {"BM": BM, "BN": BN, "SPLIT": split,
                                         "PAD_B": model.pads(r, shape)})
        rows.append({"tile, slices": f"{BM}x{BN}, {t['z']}", "n on the busiest SM": t["n"],
                     "blocks per SM at most": t["per_sm"], "rounds": t["rounds"],
                     "n / q^gamma (the model)": t["n"] / t["q"] ** t["gamma"],
                     "each round at its own q": own,
                     "predicted (µs)": t["total"],
                     "predicted, each round at its own q (µs)": alt,
                     "measured (µs)": _time_us(row) if row else None})
    return Table(rows, list(rows[0]),
                 title=f"A partly filled last round at {_shape_text(shape)} (gamma = "
                       f"{r.gamma:g}); {rec.label}")


def close_candidates(shape, top: int = 5, rec=None) -> Text:
    """The model's `top` fastest candidates at `shape` with their predicted times, how far
    apart they are against the model's typical error, and how many configurations were
    timed there: where the first few lie within that error, the plan's pick among them is
    a tie-break of the model, not a measured gain."""
    rec = rec or recording()
    r, lim = rules(rec), _limits(rec)
    ranking = ranked(tuple(shape), r, lim)[:top]
    best = ranking[0][0]
    names = [f"{BM}x{BN}, " + ("no split" if s == 1 else f"K in {s} slices")
             + f": {fmt_number(t)} µs" + ("" if t == best else f" (+{t / best - 1:.1%})")
             for t, (BM, BN, s) in ranking]
    spread, err = ranking[-1][0] / best - 1, model_error(rec)
    timed = len([x for x in rec.find(SPLIT, list(shape)) if "gflops" in x])
    verdict = (f"all within {spread:.1%} of each other, far inside the model's typical "
               f"error ({err:.0%}): which of them is fastest, the model cannot tell, and "
               "the first is picked by a hair" if spread < err else
               f"{spread:.1%} apart, more than the model's typical error ({err:.0%})")
    measured = ("only the plan's configuration was timed at this shape" if timed == 1 else
                f"{timed} configurations were timed at this shape")
    return Text(f"The model's {len(ranking)} fastest candidates at {_shape_text(shape)}: "
                + "; ".join(names) + f". They are {verdict}; {measured}.")


def model_error(rec=None) -> float:
    """The median of |predicted / measured - 1| over the calibration rows."""
    import statistics
    pts = fit_points(rec or recording())
    return statistics.median(abs(p["predicted_us"] / p["measured_us"] - 1) for p in pts)


def measured_best(shape, rec=None) -> str | None:
    """The fastest capstone_split configuration recorded at `shape`, as text."""
    rec = rec or recording()
    rows = [r for r in rec.find(SPLIT, list(shape)) if "gflops" in r]
    if not rows:
        return None
    b = max(rows, key=lambda r: r["gflops"]["median"])
    p = b["params"]
    split = "no split" if p["SPLIT"] == 1 else f"K in {p['SPLIT']} slices"
    pad = ", B padded" if p.get("PAD_B") and shape[1] % 4 else ""
    timed = "the only configuration timed" if len(rows) == 1 else \
        f"of {len(rows)} configurations timed"
    return (f"{p['BM']}x{p['BN']}, {split}{pad}: {fmt_number(b['gflops']['median'])} GFLOP/s "
            f"({timing.share(b):.0f}% of cuBLAS), {timed}")


# ------------------------------------------------------------------ the widget

def parse_shape(M, N, K):
    """(M, N, K) as ints, or a message saying what is wrong (never an exception)."""
    out = []
    for name, v in (("M", M), ("N", N), ("K", K)):
        text = str(v).strip()
        try:
            n = int(text)
        except ValueError:
            return f"{name} = {text!r} is not a whole number: give M, N and K as integers."
        if n < 1:
            return f"{name} = {n}: every dimension must be at least 1."
        out.append(n)
    bad = shape_problem(SPLIT, tuple(out))
    return bad or tuple(out)


def report(M, N, K, rec=None) -> tuple[str, tuple | None]:
    """The widget's answer for M, N, K: (markdown text, the shape to draw or None). The
    plan, the model's prediction, and the recorded rate with cuBLAS's where this shape
    was recorded with this plan; live, the plan timed here."""
    shape = parse_shape(M, N, K)
    if isinstance(shape, str):
        return f"**Cannot plan this shape.** {shape}", None
    rec = rec or recording()
    p = plan_for(shape, rec)
    flops = 2 * shape[0] * shape[1] * shape[2]
    lines = [f"**{_shape_text(shape)}**: plan {p}."]
    if p.predicted_us:
        lines.append(f"The model's **prediction** ({rules(rec).device}): "
                     f"{fmt_number(p.predicted_us)} µs, "
                     f"{fmt_number(flops / (p.predicted_us * 1e3))}"
                     " GFLOP/s.")
    if device.is_live():
        row = timing.measure(p.kernel, shape, p.params)
        lines.append(f"Timed here, live on {device.properties()['name']}: "
                     f"{fmt_number(row['gflops']['median'])} GFLOP/s, cuBLAS "
                     f"{fmt_number(row['reference']['gflops']['median'])}: "
                     f"{timing.share(row):.0f}% of cuBLAS.")
        return "\n\n".join(lines), shape
    row = row_of(rec, p.kernel, shape, p.params)
    if row is None and not p.predicted_us:
        lines.append(f"Not recorded at this shape ({rec.label if rec else 'no recording'}), "
                     "and the model predicts no time for a matrix-vector product (it only "
                     "picks the split): nothing measured to show.")
    elif row is None:
        lines.append(f"Not recorded at this shape ({rec.label if rec else 'no recording'}): "
                     "only the model's prediction above, no measurement.")
    else:
        lines.append(f"Recorded ({rec.label}): {fmt_number(flops / (row['gflops']['median'] * 1e3))}"
                     f" µs, {fmt_number(row['gflops']['median'])} GFLOP/s, "
                     f"cuBLAS {fmt_number(row['reference']['gflops']['median'])} in the same "
                     f"run: {timing.share(row):.0f}% of cuBLAS.")
    return "\n\n".join(lines), (shape if p.kernel == SPLIT else None)


def widget(M: int = 1024, N: int = 1024, K: int = 1024):
    """M, N, K boxes and a button; the answer of `report` and the plan's waves picture."""
    import io

    import ipywidgets as Wd
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display
    boxes = [Wd.Text(value=str(v), description=n, layout=Wd.Layout(width="160px"))
             for n, v in (("M", M), ("N", N), ("K", K))]
    button = Wd.Button(description="Plan", button_style="primary")
    text, image = Wd.Output(), Wd.Image(format="png")

    def on_click(_):
        answer, shape = report(*(b.value for b in boxes))
        text.clear_output()
        with text:
            display(Markdown(answer))
        image.layout.display = "none"
        if shape is not None:
            ax = plot_waves(shape)
            buf = io.BytesIO()
            ax.figure.savefig(buf, format="png", dpi=80, bbox_inches="tight")
            plt.close(ax.figure)
            image.value = buf.getvalue()
            image.layout.display = None
    button.on_click(on_click)
    on_click(None)
    return panel([Wd.HBox([*boxes, button]), text, image],
                 "planner: enter M, N and K and press Plan; it gives the plan sgemm() picks "
                 "for that shape, the model's prediction and the measured rate beside "
                 "cuBLAS's where there is one, and draws the plan's waves.")


# ------------------------------------------------------------------ the chapter at a glance

# One recorded shape of each kind the capstone meets, with the section that treats it.
LAST_MILE = (("a large square: the capstone's home", (4096, 4096, 4096), "-"),
             ("few tiles of C, short K", (640, 640, 640), "1 and 3: split K"),
             ("few tiles of C, deep K", (1280, 1280, 10240), "1 and 3: split K"),
             ("skinny: few columns of C", (6000, 200, 3000), "2 and 3: tile and split"),
             ("ragged: N not a multiple of 4", (3001, 999, 1500), "4: pad B"),
             ("small: everything short", (384, 384, 128), "7: small shapes, still short"),
             ("a matrix times a vector", (1, 4096, 4096), "5: a kernel of its own"))


def last_mile_rows(cases=LAST_MILE, rec=None) -> list[dict]:
    """Per case: the capstone's tile without a split (chapter 09's launch, in chapter 12's
    kernel) and the plan, each as a share of cuBLAS timed beside it at that shape; and
    whether the model was fitted at that shape (a calibration shape, where the capstone's
    tile was timed too), or never saw it."""
    rec = rec or recording()
    fitted = {tuple(s) for _, _, s in calibrate.calibration_runs()}
    out = []
    for kind, shape, where in cases:
        cap = row_of(rec, SPLIT, shape, {"BM": 128, "BN": 128, "SPLIT": 1})
        p = plan_for(shape, rec)
        own = row_of(rec, p.kernel, shape, p.params)
        out.append({"kind of shape": kind, "shape": _shape_text(shape),
                    "capstone % of cuBLAS": timing.share(cap) if cap else None,
                    "plan % of cuBLAS": timing.share(own) if own else None,
                    "calibration shape": "yes" if tuple(shape) in fitted else "no",
                    "section": where})
    return out


# The opening table's columns: few, so that the table reads at a glance.
LAST_MILE_BRIEF = ("kind of shape", "shape", "capstone % of cuBLAS", "plan % of cuBLAS",
                   "calibration shape", "section")


def last_mile_table(rec=None) -> Table:
    rec = rec or recording()
    rows = last_mile_rows(rec=rec)
    return Table(rows, list(LAST_MILE_BRIEF),
                 title="Where the capstone falls short, and the plan "
                 "at the same shape, each timed beside cuBLAS (a dash: not timed); "
                 f"{rec.label}")


def plot_planner(shape=(640, 640, 640), rec=None):
    """The planner in one picture. Left: its rules, with the constants fitted on the
    recording's GPU. Right: at `shape`, every candidate tile and split with the model's
    predicted time, the time measured where that candidate was timed, and the pick."""
    import matplotlib.pyplot as plt
    rec = rec or recording()
    r, lim = rules(rec), _limits(rec)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2), layout="constrained",
                                      gridspec_kw={"width_ratios": [1, 1.5]})
    left.axis("off")
    steps = [("M == 1 or N == 1?", "yes: the matrix-vector kernel (section 5):\n"
              f"{r.gemv_warps['cols']} warps per block (M == 1), {r.gemv_warps['rows']} (N == 1);"
              f"\nthe smallest split that gives every SM {r.gemv_warps_per_sm} warps"),
             ("N % 4 != 0?", "yes: " + ("copy B into padded rows first" if r.pad_ragged_b
                                       else "B read one float at a time") + " (section 4)"),
             ("every tile x every split of K", f"{len(model.TILES)} tiles, splits that leave "
              f"each slice {choose.MIN_STEPS_PER_SLICE}+ steps of K"),
             ("predict each one's time", "the model of this section:\nc0, c1 per tile, "
              f"gamma = {r.gamma:g}, r0 = {r.reduce_us:.1f} µs, fitted on {r.device}"),
             ("run the shortest", "")]
    for i, (box, note) in enumerate(steps):
        y = 0.92 - i * 0.21
        left.text(0.02, y, box, fontsize=10, va="center", ha="left", weight="bold",
                  bbox={"boxstyle": "round", "fc": "lightyellow", "ec": "0.4"})
        if note:
            left.text(0.02, y - 0.085, note, fontsize=8, va="center", ha="left", color="0.25")
        if i < len(steps) - 1:
            left.annotate("", (0.0, y - 0.17), (0.0, y - 0.02),
                          arrowprops={"arrowstyle": "->", "color": "0.4"})
    left.set_xlim(-0.05, 1)
    left.set_ylim(0, 1)
    left.set_title("The planner's rules (the constants fitted on the calibration runs)",
                   fontsize=10)
    ranking = ranked(tuple(shape), r, lim)
    measured = {}
    for row in rec.find(SPLIT, list(shape)):
        if "gflops" in row:
            q = row["params"]
            measured[(q["BM"], q["BN"], q["SPLIT"])] = _time_us(row)
    x = range(len(ranking))
    right.bar(x, [t for t, _ in ranking], color=["tab:orange"] + ["tab:blue"] * (len(ranking) - 1),
              label="predicted (the pick in orange)")
    hit = [(i, measured[c]) for i, (_, c) in enumerate(ranking) if c in measured]
    right.plot([i for i, _ in hit], [t for _, t in hit], "kD", markersize=5,
               label="measured")
    right.set_xticks(list(x))
    right.set_xticklabels([f"{BM}x{BN} / {s}" for _, (BM, BN, s) in ranking], fontsize=8,
                          rotation=90)
    right.set_xlabel("candidate: tile / slices of K, by predicted time")
    right.set_ylabel("time (µs)")
    right.legend(fontsize=8, loc="upper left")
    right.set_title(f"At {_shape_text(shape)}: {len(ranking)} candidates, {len(hit)} of them "
                    f"timed\n{rec.label}", fontsize=10)
    return fig


# ------------------------------------------------------------------ what cuBLAS ran

# Substrings of cuBLAS's kernel names, first match wins, and what a reader calls them.
_CUBLAS_NAMES = (("splitKreduce", "split-K reduction"), ("scal_kernel", "scal (BLAS: scale a vector)"),
                 ("sgemm_largek", "sgemm_largek (a kernel for large K)"),
                 ("gemv", "gemv (matrix-vector)"), ("Gemv", "gemv (matrix-vector)"))


def cublas_kernel_name(name: str) -> str:
    """A short readable name for one of cuBLAS's kernels: its family and its tile, as the
    full name spells them (e.g. "xmma GEMM, 64x64x8 tiles")."""
    import re
    for part, short in _CUBLAS_NAMES:
        if part in name:
            return short
    if m := re.search(r"xmma_gemm_.*?tilesize(\d+x\d+x\d+)", name):
        kind = "xmma split-K kernel" if "split_k" in name else "xmma GEMM"
        return f"{kind}, {m.group(1)} tiles"
    if m := re.search(r"simt_sgemm_(\d+x\d+)", name):
        return f"CUTLASS SIMT SGEMM, {m.group(1)} tiles"
    return name[:60]


CUBLAS_SHAPES = ((1024, 1024, 1024), (640, 640, 640), (8192, 8192, 128), (3, 4096, 4096),
                 (1, 4096, 4096), (8192, 128, 8192), (128, 8192, 8192), (256, 256, 65536),
                 (100, 100, 100),
                 (777, 555, 333))


def cublas_launches(shapes=CUBLAS_SHAPES, rec=None) -> Table | Text:
    """Per shape: the plan's share of cuBLAS and its configuration, then each kernel
    cuBLAS launched for one call there (Nsight Compute, one row a launch)."""
    from gemm_kernels.measure import cublas_kernels
    rec = rec or recording()
    rows = []
    for shape in shapes:
        launches = cublas_kernels.recorded(shape, rec)
        if not launches:
            continue
        p = plan_for(shape, rec)
        row = row_of(rec, p.kernel, shape, p.params)
        for i, l in enumerate(launches):
            rows.append({"shape": _shape_text(shape) if i == 0 else "",
                         "the plan": str(p) if i == 0 else "",
                         "plan % of cuBLAS": timing.share(row) if row and i == 0 else "",
                         "cuBLAS's kernel": cublas_kernel_name(l["name"]),
                         "blocks": l["grid"], "threads per block": l["block"],
                         "time (µs)": l["time_us"]})
    if not rows:
        return Text("This recording does not hold the kernels cuBLAS launched.")
    return Table(rows, ["shape", "the plan", "plan % of cuBLAS", "cuBLAS's kernel", "blocks",
                        "threads per block", "time (µs)"],
                 title="The kernels cuBLAS launched for one call at each shape (Nsight "
                       f"Compute, one row a launch, in launch order); {rec.label}")
