"""Chapter 15: Hopper's own tensor-core path (cuda/15_wgmma.cu). Pictures and numbers the
package computes for the two kernels: what a TMA tensor map describes and where one
stage's boxes land in shared memory, the ring of "full" and "empty" mbarriers as a
timeline (what the exercise is about), the wgmma descriptors walking a 128-byte-swizzled
tile, the warpgroup's accumulator layout, the SASS and the register budget of the
warp-specialised kernel, the footprint of the blocks that run together in row order and
in groups of rows, and the recorded measurements (rates beside cuBLAS FP16, the Nsight
Compute study, the sweeps behind the explorer).

The rates come from the recording that holds the chapter's kernels (`recording()`); the
Nsight Compute study may sit in another one, on another GPU (`study_recording()`), and the
profile of the stages and the block order at 8192³ in a third (`order_recording()`, which
supplies every row of that comparison): every table and sentence names the recording it
reads, so that no number mixes GPUs unsaid.
"""
from __future__ import annotations

import re
from collections import Counter

from gemm_kernels.core import analysis, compiler, device
from gemm_kernels.core.kernels import WGMMA_BK, WGMMA_BN, get
from gemm_kernels.core.table import Table
from gemm_kernels.measure import records, studies, timing
from gemm_kernels.notebook import ch13_wmma as ch13
from gemm_kernels.notebook import ch14_clocks
from gemm_kernels.notebook import ch14_mma as ch14
from gemm_kernels.notebook import evidence
from gemm_kernels.notebook.display import Text

TMA, WS = "wgmma_tma", "wgmma_ws"
GROUPED = {"STAGES": 3, "GROUP": 16}          # the grouped configuration the ladder shows
SIZES = ch13.SIZES
STUDY = "ch15_hopper"
CONFIGS = ((TMA, {}), (WS, {}), (WS, GROUPED))
LADDER = (("cublas_hgemm", "cuBLAS FP16 (tensor cores)", "k", "-"),
          (WS, "15 wgmma_ws, 3 stages, groups of 16", "tab:green", "-", GROUPED),
          (WS, "15 wgmma_ws, 4 stages, row order", "tab:purple", "-", {}),
          (TMA, "15 wgmma_tma", "tab:brown", "-", {}),
          (ch14.KERNEL, "14 mma_sync, BK 64, 3 stages", "tab:red", "-", ch14.BIG_K),
          (ch13.TILED, "13 wmma_tiled", "tab:blue", "-"),
          (ch13.NAIVE, "13 wmma_naive", "tab:cyan", "-"),
          ("cublas", "cuBLAS FP32", "0.4", "--"),
          ("capstone", "09 capstone (FP32)", "tab:orange", "--"))


def recording():
    """The recording that holds this chapter's timed rows (see `records.holding`)."""
    return records.holding(WS)


def study_recording():
    """The recording that holds this chapter's Nsight Compute study, or None."""
    return studies.recording_of(STUDY)


def _label(rec) -> str:
    return rec.label if rec is not None else "no recording"


def which_recording() -> Text:
    rec, prof, order = recording(), study_recording(), order_recording()
    if rec is None:
        return Text("This chapter's measurements are not in any recording here.")
    if order is prof:
        return Text(f"This chapter's timed measurements: {rec.label}."
                    + evidence.profile_elsewhere(rec, prof, "section 6 and Appendix A"))
    # Name the GPU of every profile: with only Appendix A's named, the profiles of
    # sections 6 and 8 would read as if they came from that GPU too.
    same = (f" Its Nsight Compute profiles in sections 6 and 8: {prof.label}."
            if prof is rec and prof is not None else "")
    return Text(f"This chapter's timed measurements: {rec.label}." + same
                + evidence.profile_elsewhere(rec, prof, "sections 6 and 8")
                + evidence.profile_elsewhere(rec, order, "Appendix A"))


def _row(kernel: str, n: int, params: dict | None = None, rec=None) -> dict | None:
    return ch13._row(kernel, n, params, rec=rec or recording())


def _config(kernel: str, params: dict) -> str:
    d, p = get(kernel).resolve({}), get(kernel).resolve(params)
    diff = {k: v for k, v in p.items() if d[k] != v}
    return "default" if not diff else ", ".join(f"{k} {v}" for k, v in diff.items())


def _full_config(kernel: str, params: dict) -> str:
    """Every parameter, defaults included, so that two tables of the same configurations
    label each alike ("BM 64, STAGES 4", never "BM 64" in one and the full name in the
    other)."""
    full = get(kernel).resolve(params)
    return ", ".join(f"{k} {v}" for k, v in full.items()) + (
        " (default)" if full == get(kernel).resolve({}) else "")


# ------------------------------------------------------------------ 2. TMA

def tensor_map_table(n: int = 4096, kernel: str = WS) -> Table:
    """What the host gives cuTensorMapEncodeTiled for A and B of an n x n x n product
    (as `core/tensor_map.half_matrix` does for the kernel's launcher): the sizes, the row
    stride, the box one copy moves, the swizzle and the fill outside the matrix."""
    rows_a = tile_shape(kernel)[0]
    rows = []
    for name, box in (("A", (rows_a, WGMMA_BK)), ("B", (WGMMA_BK, 64))):
        rows.append({"matrix": name, "sizes (columns, rows)": f"{n:,} x {n:,}",
                     "row stride (bytes)": 2 * n, "box (rows x columns)": f"{box[0]} x {box[1]}",
                     "box bytes": 2 * box[0] * box[1],
                     "swizzle": "128 bytes", "outside the matrix": "zeros"})
    return Table(rows, list(rows[0]), title=f"The two tensor maps of {kernel} at {n:,}³, "
                                            f"FP16")


def tensor_map_call() -> Text:
    """The host side of TMA, as the package does it (`core/tensor_map.py`): the driver's
    enumeration values it uses and the function that calls `cuTensorMapEncodeTiled`,
    where people get stuck (the sizes innermost first, the strides without the
    innermost one, the box, the element steps, the swizzle and the fill)."""
    import inspect
    from gemm_kernels.core import tensor_map
    from gemm_kernels.notebook.display import lines_between
    text = inspect.getsource(tensor_map)
    return Text("\n...\n".join(lines_between(text, first, last, "core/tensor_map.py")
                                for first, last in (("FLOAT16 = ", "INTERLEAVE_NONE = "),
                                                    ("def half_matrix(", "return raw[at:")))
                )


def tile_shape(kernel: str = WS, params: dict | None = None) -> tuple[int, int]:
    """(BM, BN) of the kernel's tile of C (the registry's rules: 64 CONSUMERS x 256 for
    the warp-specialised kernel, BM x 128 for the other)."""
    p = get(kernel).resolve(params or {})
    return (64 * p["CONSUMERS"], 256) if kernel == WS else (p["BM"], WGMMA_BN)


def stage_layout(kernel: str = WS, params: dict | None = None,
                 stage: int = 1) -> list[tuple[str, int, int]]:
    """(what, first byte, bytes) of each box that stage `stage` receives, at its offset in
    the kernel's ring of shared memory: the kernel keeps all STAGES tiles of A first, then
    all STAGES tiles of B (`Bs = base + STAGES * A_BYTES` in cuda/15_wgmma.cu), so one
    stage's A box and its B boxes are not neighbours. A: BM rows of 128 bytes; B: BN / 64
    boxes of 64 x 64."""
    bm, bn = tile_shape(kernel, params)
    stages = get(kernel).resolve(params or {})["STAGES"]
    a_bytes, b_bytes = bm * WGMMA_BK * 2, WGMMA_BK * bn * 2
    box = b_bytes // (bn // 64)
    out = [(f"A: {bm} x 64", stage * a_bytes, a_bytes)]
    out += [(f"B: columns {64 * h}-{64 * h + 63}", stages * a_bytes + stage * b_bytes + h * box,
             box) for h in range(bn // 64)]
    return out


def plot_stage(kernel: str = WS, ax=None, stage: int = 1):
    """Top: the block's tiles of A and B in the matrices, and the boxes of one step of K
    (one TMA copy each). Bottom: the whole ring of shared memory (all the A tiles, then
    all the B tiles) with the boxes of one stage coloured where they land."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    if ax is None:
        _, ax = plt.subplots(2, 1, figsize=(11, 6.2), gridspec_kw={"height_ratios": [3, 1]})
    lay = stage_layout(kernel, stage=stage)
    colors = ["tab:blue"] + ["tab:orange", "tab:red", "tab:purple", "tab:green"][:len(lay) - 1]
    top = ax[0]
    bm = tile_shape(kernel)[0]
    nb = len(lay) - 1
    # A: a K-long strip of the block's rows; B: a K-long strip of its columns (units: 64)
    steps = 6
    top.add_patch(Rectangle((0, 0), steps, bm / 64, facecolor="moccasin", edgecolor="k"))
    top.add_patch(Rectangle((2, 0), 1, bm / 64, facecolor=colors[0], edgecolor="k"))
    top.text(steps / 2, bm / 64 + 0.15, f"A: the block's {bm} rows, all of K", ha="center",
             fontsize=9)
    top.text(2.5, bm / 64 / 2, "box\nstep t", ha="center", va="center", color="white",
             fontsize=8)
    x0 = steps + 1.5
    top.add_patch(Rectangle((x0, -steps + bm / 64), nb, steps, facecolor="moccasin",
                            edgecolor="k"))
    for h in range(nb):
        top.add_patch(Rectangle((x0 + h, -steps + bm / 64 + steps - 3), 1, 1,
                                facecolor=colors[1 + h], edgecolor="k"))
        top.text(x0 + h + 0.5, -steps + bm / 64 + steps - 2.5, f"box {h}", ha="center",
                 va="center", color="white", fontsize=8)
    top.text(x0 + nb / 2, bm / 64 + 0.15, f"B: the block's {64 * nb} columns, all of K",
             ha="center", fontsize=9)
    top.set_xlim(-0.5, x0 + nb + 0.5)
    top.set_ylim(-steps + bm / 64 - 0.3, bm / 64 + 0.6)
    top.set_aspect("equal")
    top.axis("off")
    top.set_title(f"{kernel}: one step t of K moves {len(lay)} boxes (each square: 64 x 64 "
                  f"halves, 8 KiB)", fontsize=10)
    bot = ax[1]
    stages = get(kernel).resolve({})["STAGES"]
    a_bytes, b_bytes = lay[0][2], sum(b for _, _, b in lay[1:])
    # every stage's slot, outlined; the chosen stage's boxes coloured on top
    for s in range(stages):
        for at, size, name in ((s * a_bytes, a_bytes, "A"),
                               (stages * a_bytes + s * b_bytes, b_bytes, "B")):
            bot.add_patch(Rectangle((at / 1024, 0), size / 1024, 1, facecolor="0.92",
                                    edgecolor="k"))
            if s != stage:
                bot.text((at + size / 2) / 1024, 0.5, f"{name}, stage {s}", ha="center",
                         va="center", fontsize=7)
    for i, ((_, at, size), c) in enumerate(zip(lay, colors)):
        bot.add_patch(Rectangle((at / 1024, 0), size / 1024, 1, facecolor=c, edgecolor="k"))
        bot.text((at + size / 2) / 1024, 0.5, f"{'A' if i == 0 else f'box {i - 1}'}\n"
                 f"{size // 1024} KiB", ha="center", va="center", color="white", fontsize=7)
    total = stages * (a_bytes + b_bytes)
    bot.set_xlim(0, total / 1024)
    bot.set_ylim(0, 1)
    bot.set_yticks([])
    bot.set_xticks([s * a_bytes / 1024 for s in range(stages + 1)]
                   + [(stages * a_bytes + s * b_bytes) / 1024 for s in range(1, stages + 1)])
    bot.tick_params(axis="x", labelsize=7)
    bot.set_xlabel("byte offset in the block's shared memory (KiB); every box starts on a "
                   "1024-byte boundary", fontsize=8)
    bot.set_title(f"the ring in shared memory: all {stages} A tiles, then all {stages} B "
                  f"tiles ({total // 1024} KiB); coloured: stage {stage}'s boxes",
                  fontsize=10)
    plt.tight_layout()
    return ax


def swizzled(offset: int) -> int:
    """Where the 128-byte swizzle puts byte `offset` of a tile: the 16-byte chunk number
    within its 128-byte row (bits 4-6) XOR the row number modulo 8 (bits 7-9). It is
    chapter 14's `chunk_at` for rows of 8 chunks, done by the copy engine; the tile must
    start on a 1024-byte boundary for the two to agree (the kernel rounds up to one)."""
    return offset ^ (((offset >> 7) & 7) << 4)


# ------------------------------------------------------------------ 3. mbarriers

def ring_timeline(stages: int = 4, tiles: int = 10, copy: float = 5.0,
                  compute: float = 1.0) -> list[dict]:
    """A model of the warp-specialised kernel's ring, one dict per tile t: when the
    producer issues its copy (after the stage's "empty" barrier completes the phase that
    tile t - STAGES released), when the copy's bytes complete the "full" barrier's phase,
    and when the consumers start and finish it (then arrive on "empty"). `copy`: the time
    a copy takes, `compute`: the time the consumers take per tile (same units)."""
    out, busy_until = [], 0.0
    for t in range(tiles):
        s = t % stages
        free = 0.0 if t < stages else out[t - stages]["done"]
        issue = max(free, out[-1]["issue"] + 0.15 if out else 0.0)
        full = issue + copy
        start = max(full, busy_until)
        busy_until = start + compute
        out.append({"t": t, "stage": s, "phase": t // stages, "issue": issue, "full": full,
                    "start": start, "done": busy_until, "waited": t >= stages})
    return out


def ring_busy_share(stages: int, copy: float, compute: float = 1.0) -> float:
    """The share of the time the consumers of a `ring_timeline` are busy once it runs
    steadily: a stage goes round (copy, then the wgmma of its tile) in copy + compute, and
    the ring holds STAGES of them, so at most STAGES x compute / (copy + compute)."""
    return min(1.0, stages * compute / (copy + compute))


def tensor_cores_fed(timeline: list[dict]) -> bool:
    """Whether, after the first tile, the consumers of a `ring_timeline` start each tile
    the moment they finish the one before (the ring hides the copies: a copy of length L
    is hidden when (STAGES - 1) x the wgmma of a tile covers it)."""
    return all(b["start"] <= a["done"] + 1e-9 for a, b in zip(timeline, timeline[1:]))


def plot_ring(stages: int | None = None, tiles: int = 11, copy: float = 5.0,
              compute: float = 1.0, ax=None):
    """The ring as a timeline: the producer's copies, each stage's life (copy in flight,
    then full until the consumers release it) with the phase of its barriers, and the
    consumers' wgmma. Arrows: the waits on "empty" (the producer) and on "full"."""
    import matplotlib.pyplot as plt
    stages = stages or get(WS).resolve({})["STAGES"]
    tl = ring_timeline(stages, tiles, copy, compute)
    if ax is None:
        _, ax = plt.subplots(figsize=(13, 1.2 + 0.8 * (stages + 2)))
    # ten colours, then eight others: no two tiles of the picture share a colour
    colors = ([plt.get_cmap("tab10")(i) for i in range(10)]
              + [plt.get_cmap("Dark2")(i) for i in range(8)])
    y_prod, y_cons = stages + 1, 0
    for e in tl:
        y = stages - e["stage"]
        c = colors[e["t"] % len(colors)]
        ax.barh(y, e["full"] - e["issue"], left=e["issue"], height=0.5, color=c, alpha=0.3,
                edgecolor=c)
        ax.barh(y, e["done"] - e["full"], left=e["full"], height=0.5, color=c, alpha=0.85)
        ax.text(e["issue"] + 0.1, y, f"tile {e['t']}: copy", va="center", fontsize=8.5)
        ax.text(e["full"] + 0.05, y + 0.3, f"full[{e['stage']}] phase {e['phase']}",
                fontsize=7.5, va="bottom")
        ax.plot([e["issue"]], [y_prod], marker="v", color=c, ms=9)
        ax.text(e["issue"], y_prod + 0.35, str(e["t"]), ha="center", fontsize=7.5)
        ax.barh(y_cons, e["done"] - e["start"], left=e["start"], height=0.6, color=c)
        ax.text((e["start"] + e["done"]) / 2, y_cons, str(e["t"]), ha="center", va="center",
                fontsize=8, color="white")
        if e["waited"]:
            prev = tl[e["t"] - stages]
            ax.annotate("", xy=(e["issue"], y_prod - 0.15), xytext=(prev["done"], y_cons + 0.3),
                        arrowprops={"arrowstyle": "->", "color": "0.5", "lw": 0.7})
            ax.text(prev["done"] - 0.05, y - 0.3, f"empty[{e['stage']}] phase {prev['phase']}",
                    fontsize=7.5, color="0.3", va="top", ha="right")
    ax.set_yticks([y_prod] + [stages - s for s in range(stages)] + [y_cons],
                  ["producer:\nissues copy"] + [f"stage {s}" for s in range(stages)]
                  + ["consumers:\nwgmma"], fontsize=9)
    ax.set_xlabel(f"time (model: a copy takes {copy:g} units, the wgmma of a tile "
                  f"{compute:g}; a picture of the mechanism, not of the measured kernel)",
                  fontsize=9)
    ax.set_xlim(0, tl[-1]["done"] + 0.5)
    ax.set_ylim(-0.6, stages + 1.9)
    fed = tensor_cores_fed(tl)
    ax.set_title(f"A ring of {stages} stages, a copy {copy:g} x the wgmma of a tile: "
                 f"{'at most' if copy <= (stages - 1) * compute else 'more than'} "
                 f"(STAGES - 1) x wgmma = {(stages - 1) * compute:g}, so the tensor cores "
                 + ("never wait after the first copy" if fed else
                    f"wait for the copies: busy {stages} x {compute:g} of every {copy:g} + "
                    f"{compute:g} units, {ring_busy_share(stages, copy, compute):.0%} of the "
                    f"time")
                 + ".\nLight: the copy in flight (the stage's 'full' barrier waits for its "
                 "bytes); dark: full, until the consumers arrive on 'empty'", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    plt.tight_layout()
    return ax


def phase_table(stages: int | None = None, tiles: int = 12) -> Table:
    """Per tile t: its stage, the phase of full[s] that its copy completes (the
    consumers wait for it), and the phase of empty[s] the producer waits for before the
    copy (the consumers' release of tile t - STAGES), with each phase's parity, the
    number mbarrier.try_wait.parity is given."""
    stages = stages or get(WS).resolve({})["STAGES"]
    rows = []
    for t in range(tiles):
        rows.append({"tile t": t, "stage s": t % stages,
                     "full[s]: phase": t // stages, "full parity": (t // stages) & 1,
                     "empty[s]: phase awaited": "no wait" if t < stages else t // stages - 1,
                     "empty parity": "-" if t < stages else (t // stages - 1) & 1})
    return Table(rows, list(rows[0]), title=f"STAGES = {stages}: the phases each side "
                                            f"waits for")


# ------------------------------------------------------------------ 4. wgmma

def descriptor(addr: int, lead: int, stride: int) -> int:
    """The kernel's shared-memory descriptor (`descriptor()` in cuda/15_wgmma.cu): bits
    0-13 the start address / 16, 16-29 the leading byte offset / 16, 32-45 the stride
    byte offset / 16, bits 62-63 the swizzle mode (1: 128 bytes)."""
    return (((addr & 0x3FFFF) >> 4) | (lead >> 4) << 16 | (stride >> 4) << 32 | 1 << 62)


def descriptor_fields(desc: int) -> dict:
    """The fields of a descriptor, in bytes, as the PTX ISA's "Matrix Descriptor Format"
    defines them."""
    return {"start": (desc & 0x3FFF) << 4, "leading byte offset": ((desc >> 16) & 0x3FFF) << 4,
            "stride byte offset": ((desc >> 32) & 0x3FFF) << 4,
            "swizzle": {0: "none", 1: "128 bytes", 2: "64 bytes", 3: "32 bytes"}[desc >> 62]}


def descriptor_table() -> Table:
    """The descriptors a consumer of the warp-specialised kernel gives its four wgmma of
    one 64-deep tile (offsets from the stage's A and B tiles), decoded."""
    p = get(WS).resolve({})
    b_bytes = WGMMA_BK * 256 * 2
    rows = []
    for kk in range(0, WGMMA_BK, 16):
        for name, addr, lead, stride in (("A", 2 * kk, 16, 1024),
                                         ("B", 128 * kk, b_bytes // 4, 1024)):
            f = descriptor_fields(descriptor(addr, lead, stride))
            rows.append({"k step": f"{kk}-{kk + 15}", "operand": name,
                         "start (bytes from the tile)": f["start"],
                         "leading byte offset": f["leading byte offset"],
                         "stride byte offset": f["stride byte offset"], "swizzle": f["swizzle"]})
    return Table(rows, list(rows[0]), title=f"{WS}: the four wgmma of one tile (A: "
                                            f"{64 * p['CONSUMERS']} x 64, K-major; B: 64 x "
                                            f"256, MN-major)")


def plot_descriptor_walk(axes=None):
    """Left: the first 8 rows of A's tile (128 bytes each) as stored, each 16-byte chunk
    labelled with the chunk of the row it holds and coloured by the wgmma (k step) that
    reads it. Right: B's stage, four boxes of 64 k-rows, in groups of 8 rows coloured by
    the k step that reads them; the descriptor's offsets are the distances marked."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(14, 4.8), gridspec_kw={"width_ratios": [1, 1.1]})
    colors = plt.get_cmap("Set2")
    ax = axes[0]
    for r in range(8):
        for c in range(8):
            at = (swizzled(r * 128 + 16 * c) % 128) // 16
            ax.add_patch(Rectangle((at, 7 - r), 1, 1, facecolor=colors(c // 2), edgecolor="white"))
            ax.text(at + 0.5, 7.5 - r, f"k {8 * c}-{8 * c + 7}", ha="center", va="center",
                    fontsize=6.5)
    ax.set_xlim(0, 8)
    ax.set_ylim(0, 8)
    ax.set_xticks([c + 0.5 for c in range(8)], [f"{16 * c}" for c in range(8)], fontsize=7)
    ax.set_yticks([7.5 - r for r in range(8)], [f"row {r}" for r in range(8)], fontsize=7)
    ax.set_xlabel("byte in the row (where the copy engine put it)", fontsize=8)
    ax.set_title("A, K-major, 128-byte swizzle: colour = the wgmma that reads it\n"
                 "step j: start + 32 j bytes; rows 8-15: + 1024 (stride byte offset)",
                 fontsize=9)
    ax = axes[1]
    for box in range(4):
        for g in range(8):
            ax.add_patch(Rectangle((box, 7 - g), 1, 1, facecolor=colors(g // 2),
                                   edgecolor="white"))
            ax.text(box + 0.5, 7.5 - g, f"k {8 * g}-{8 * g + 7}", ha="center", va="center",
                    fontsize=6.5)
    ax.set_xlim(0, 4)
    ax.set_ylim(0, 8)
    ax.set_xticks([b + 0.5 for b in range(4)], [f"box {b}: n {64 * b}-{64 * b + 63}\n"
                                                f"at {8 * b} KiB" for b in range(4)], fontsize=7)
    ax.set_yticks([7.5 - g for g in range(8)], [f"{1024 * g} B" for g in range(8)], fontsize=7)
    ax.set_title("B, MN-major (rows of 64 n, 128 bytes): groups of 8 k-rows\n"
                 "step j: start + 2048 j; next 8 k-rows: + 1024 (stride); next 64 n: + "
                 "8192 (leading)", fontsize=9)
    plt.tight_layout()
    return axes


def accumulator_map(n: int = 256) -> dict[tuple[int, int], tuple[int, int]]:
    """The 64 x n accumulators of one wgmma.m64nNk16 with FP32 results: (row, column) ->
    (thread of the warpgroup, index in its array d), as the PTX ISA's "Register
    Fragments" for wgmma give it: thread t = 32 w + l holds rows 16 w + l / 4 and 8 more,
    columns 8 j + 2 (l % 4) and the next, in d[4 j + 2 h + e]: mma.sync's 16 x 8 pattern
    repeated over the warp's 16 rows and the n columns."""
    out = {}
    for thread in range(128):
        w, lane = divmod(thread, 32)
        for j in range(n // 8):
            for h in range(2):
                for e in range(2):
                    out[(16 * w + lane // 4 + 8 * h, 8 * j + 2 * (lane % 4) + e)] = \
                        (thread, 4 * j + 2 * h + e)
    return out


def plot_accumulators(warp: int = 0, ax=None):
    """One warp's share of the warpgroup's accumulators, the first 8 columns (the pattern
    repeats every 8 columns and, shifted by 16 rows, for each of the 4 warps): each cell
    labelled with its lane and its element of d, shaded by lane / 4."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import to_rgb
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 7))
    base = to_rgb(("tab:blue", "tab:orange", "tab:green", "tab:purple")[warp])
    img = np.ones((16, 8, 3))
    for (r, c), (thread, i) in accumulator_map(8).items():
        if thread // 32 != warp:
            continue
        lane = thread % 32
        shade = 0.25 + 0.5 * (lane // 4) / 7
        img[r - 16 * warp, c] = [1 - shade * (1 - v) for v in base]
        ax.text(c, r - 16 * warp, f"lane {lane}\nd[{i}]", ha="center", va="center",
                fontsize=8)
    ax.imshow(img, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(8))
    ax.set_yticks(range(16), [str(16 * warp + r) for r in range(16)])
    ax.set_xlabel("column n (columns 8j to 8j + 7 hold d[4j] to d[4j + 3] the same way)")
    ax.set_ylabel("row m")
    ax.set_title(f"wgmma m64nNk16, FP32 accumulators of warp {warp} (rows {16 * warp} to "
                 f"{16 * warp + 15}):\nlane l holds rows 16w + l/4 and 16w + l/4 + 8, columns "
                 "8j + 2(l % 4) and 8j + 2(l % 4) + 1, in d[4j + 2h + e]\n(h = 1: the row 8 below, e = 1: the next column)", fontsize=10)
    plt.tight_layout()
    return ax


# ------------------------------------------------------------------ 5, 6. SASS, registers

def arch_refusal(arch: str = "sm_80") -> Text:
    """What the package says when asked to run the chapter's kernels on another GPU."""
    return Text("\n".join(f"{k}: {get(k).arch_problem(arch)}" for k in (TMA, WS)))


SASS_FAMILIES = (("HGMMA", "HGMMA (wgmma)"), ("UTMALDG", "UTMALDG (TMA copy)"),
                 ("SYNCS", "SYNCS (mbarrier)"), ("WARPGROUP", "WARPGROUP (fence, wait)"),
                 ("USETMAXREG", "USETMAXREG (setmaxnreg)"), ("BAR", "BAR (__syncthreads)"),
                 ("LDSM", "LDSM (ldmatrix)"), ("LDGSTS", "LDGSTS (cp.async)"))


def sass_table(configs=CONFIGS) -> Table:
    """The Hopper instructions in each kernel's SASS (whole kernel, compiled here for
    sm_90a), the shape of its HGMMA, and its registers per thread at launch (ptxas)."""
    rows = []
    for kernel, params in configs:
        sass = compiler.sass(get(kernel), params, "sm_90")
        full = [t.split()[0] for _, _, t in analysis.instructions(sass)]
        fams = Counter(t.split(".")[0] for t in full)
        row = {"kernel": f"{kernel} ({_config(kernel, params)})"}
        row.update({label: fams.get(f, 0) for f, label in SASS_FAMILIES})
        row["HGMMA shape"] = ", ".join(sorted({re.sub(r"\s+", "", m.group(0)) for _, _, t in
                                               analysis.instructions(sass)
                                               for m in [re.match(r"HGMMA\.[\dx ]+", t)] if m}))
        row["registers"] = compiler.resources(get(kernel), params)["registers"]
        rows.append(row)
    return Table(rows, list(rows[0]), title="SASS for sm_90a, whole kernel (each instruction "
                                            "counted once, wherever it sits)")


def sass_excerpt(kernel: str = TMA, families=("HGMMA", "UTMALDG", "SYNCS", "WARPGROUP",
                                              "BAR", "USETMAXREG")) -> Text:
    """The kernel's SASS lines of the Hopper families, in program order."""
    sass = compiler.sass(get(kernel), {}, "sm_90")
    lines = [f"{addr:05x}  {text}" for addr, fam, text in analysis.instructions(sass)
             if fam.split(".")[0] in families]
    return Text("\n".join(lines))


def register_budget(rec=None) -> Table:
    """The warp-specialised kernel's register arithmetic: what each warpgroup keeps after
    setmaxnreg (read from the kernel's text), times its threads, against the SM's
    register file (the recorded GPU's); and ptxas's count at launch, times all threads."""
    text = get(WS).source_text()
    down = int(re.search(r"registers_down<(\d+)>", text).group(1))
    up = int(re.search(r"registers_up<(\d+)>", text).group(1))
    p = get(WS).resolve({})
    rec = rec or recording()
    per_sm = (rec.device if rec is not None else {}).get("registers_per_sm", 65536)
    launch = compiler.resources(get(WS), {})["registers"]
    threads = 128 * (p["CONSUMERS"] + 1)
    rows = [{"warpgroup": "producer (1)", "registers per thread": down, "threads": 128,
             "registers": down * 128},
            {"warpgroup": f"consumers ({p['CONSUMERS']})", "registers per thread": up,
             "threads": 128 * p["CONSUMERS"], "registers": up * 128 * p["CONSUMERS"]},
            {"warpgroup": "after setmaxnreg, total", "registers per thread": "",
             "threads": threads, "registers": down * 128 + up * 128 * p["CONSUMERS"]},
            {"warpgroup": "at launch (ptxas), total", "registers per thread": launch,
             "threads": threads, "registers": launch * threads}]
    return Table(rows, ["warpgroup", "registers per thread", "threads", "registers"],
                 title=f"One block of {WS} per SM; the SM has {per_sm:,} registers. The "
                       f"accumulators alone: 64 x 256 floats per consumer = "
                       f"{64 * 256 // 128} per thread")


# ------------------------------------------------------------------ 5-7. measured

def rates_table(rec=None, configs=CONFIGS) -> Table:
    """The chapter's configurations at each size, each beside cuBLAS FP16 timed in the
    same run, with the checker's verdict on the timed run's own output (its largest
    error over the bound: below 1 is right)."""
    rec = rec or recording()
    rows = []
    for n in SIZES:
        for kernel, params in configs:
            r = _row(kernel, n, params, rec)
            if r:
                rows.append({"size": f"{n}³", "kernel": kernel,
                             "configuration": _config(kernel, params),
                             "TFLOP/s": r["gflops"]["median"] / 1000,
                             "cuBLAS FP16 TFLOP/s": r["reference"]["gflops"]["median"] / 1000,
                             "% of cuBLAS FP16": timing.share(r),
                             ch14.ERROR_COLUMN: r.get("error_over_bound", "-")})
    title = (f"Each row's cuBLAS FP16 timed beside it ({_label(rec)})" if rows else
             "The chapter's timings are not recorded yet")
    return ch14.one_decimal(Table(rows, ["size", "kernel", "configuration", "TFLOP/s",
                                         "cuBLAS FP16 TFLOP/s", "% of cuBLAS FP16",
                                         ch14.ERROR_COLUMN], title=title))


def kernel_summary(kernel: str, params: dict | None = None, n: int = 4096, rec=None) -> Text:
    """One configuration at n³ beside cuBLAS FP16 and chapter 14's best, in words."""
    rec = rec or recording()
    mine, mma = _row(kernel, n, params or {}, rec), _row(ch14.KERNEL, n, ch14.BIG_K, rec)
    if not (mine and mma):
        return Text(f"The rows at {n}³ are not all in the recording.")
    return Text(f"At {n}³, {kernel} ({_config(kernel, params or {})}) runs at "
                f"{mine['gflops']['median'] / 1e3:,.0f} TFLOP/s, {timing.share(mine):.0f}% of "
                f"cuBLAS FP16 timed beside it: x{mine['gflops']['median'] / mma['gflops']['median']:.2f} "
                f"chapter 14's mma.sync kernel (BK 64, 3 stages; {timing.share(mma):.0f}% of "
                f"cuBLAS FP16) ({_label(rec)}).")


def plot_ladder(rec=None, ax=None):
    """The whole ladder, FP16 (chapters 13 to 15) beside FP32, from one recording."""
    return ch13.plot_ladder(rec=rec or recording(), ax=ax, series=LADDER)


def ladder_summary(rec=None) -> Table:
    """The best kernel of each chapter (13, 14, 15) in one run (the study
    `ch13_15_ladder`), at each of its sizes: its rate, its share of the cuBLAS FP16 timed
    beside it, and that cuBLAS rate (cuBLAS itself moves between rows of one run)."""
    rec = rec or studies.complete_recording(CHAPTERS)
    rows = []
    for shape in studies.get(CHAPTERS).shapes:
        got = studies.results(CHAPTERS, shape, rec=rec)
        if any(row for _, row in got):
            rows.append({"size": f"{shape[0]}³", **{
                step.label: (f"{_rates(r)[0]:,.0f} ({timing.share(r):.1f}% of "
                             f"{_rates(r, 'reference')[0]:,.0f})" if r else "-")
                for step, r in got}})
    labels = [s.label for s in studies.get(CHAPTERS).steps]
    return Table(rows, ["size"] + labels,
                 title="The run of the three chapters' best kernels is not in the recording"
                 if not rows else
                 f"The best kernel of each chapter, one run: TFLOP/s (in brackets: the "
                 f"share of the cuBLAS FP16 TFLOP/s timed beside it) ({_label(rec)})")


# The counters the study reads (Nsight Compute's names).
TIME = "gpu__time_duration.sum"
GMMA = "sm__inst_executed_pipe_tensor_op_gmma.sum"
SHARED = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_gmma.sum"
CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
L2_HIT = "lts__t_sector_hit_rate.pct"
# how busy the tensor pipe was (its HMMA/HGMMA cycles, % of the cycles the SMs were
# active): recorded in the study's later runs only
TENSOR_BUSY = ("sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active"
               ".avg.pct_of_peak_sustained_active")


def _study(n: int, rec=None) -> list[tuple[str, dict | None]]:
    rec = rec or study_recording()
    if rec is None:
        return [(s.label, None) for s in studies.get(STUDY).steps]
    return [(step.label, row["metrics"] if row else None)
            for step, row in studies.results(STUDY, (n, n, n), rec=rec)]


ORDER_PROFILE = "ch15_order_profile"   # stages and order one at a time, under the profiler


def order_recording():
    """The recording that holds the profile of the stages and the order at 8192³: the
    appendix reads its whole comparison (the one-role kernel's row too) from it, so that
    the rows set side by side come from one GPU."""
    return studies.recording_of(ORDER_PROFILE)


def _order_profile(rec=None) -> list[tuple[str, dict | None]]:
    """At the order profile's size: the one-role kernel (the study `ch15_hopper`), then
    the warp-specialised kernel with the stages and the order changed one at a time (the
    study `ch15_order_profile`), every row from the one recording `rec`."""
    rec = rec or order_recording()
    shape = studies.get(ORDER_PROFILE).shapes[0]
    steps = [studies.get(STUDY).steps[0]] + list(studies.get(ORDER_PROFILE).steps)
    if rec is None:
        return [(s.label, None) for s in steps]
    got = studies.results(STUDY, shape, rec=rec)[:1] + studies.results(ORDER_PROFILE, shape,
                                                                          rec=rec)
    return [(step.label, row["metrics"] if row else None) for step, row in got]


def study_table(rec=None) -> Table:
    """The order profile (`_order_profile`) as a table: the profiled time and the rate it
    gives (at the profiler's locked clocks), how busy the tensor pipe was, the DRAM bytes
    read and their throughput, the L2 hit rate. A step not in the recording says so."""
    rec = rec or order_recording()
    n = studies.get(ORDER_PROFILE).shapes[0][0]
    rows = []
    for label, m in _order_profile(rec):
        rows.append({"configuration": label} | (
            {"time (ms)": m[TIME] / 1e6, "TFLOP/s (profiled)": 2 * n ** 3 / m[TIME] / 1e3,
             "tensor pipe busy %": m.get(TENSOR_BUSY, "not recorded"),
             "DRAM read (GB)": m[DRAM_READ] / 1e9, "DRAM % of peak": m[DRAM_PCT],
             "L2 hit %": m[L2_HIT]} if m else {"time (ms)": "not recorded yet"}))
    where = _label(rec) if any(m for _, m in _order_profile(rec)) else "not recorded yet"
    return Table(rows, ["configuration", "time (ms)", "TFLOP/s (profiled)",
                        "tensor pipe busy %", "DRAM read (GB)", "DRAM % of peak", "L2 hit %"],
                 title=f"At {n}³ under Nsight Compute, one change at a time ({where}; "
                       f"clocks locked at base by the profiler)")


def study_summary(rec=None) -> Text:
    """The order profile in words: each change of the warp-specialised kernel's default
    (4 stages, row order) against it, in time, DRAM bytes and tensor-pipe share, on the
    GPU that recorded it."""
    rec = rec or order_recording()
    rows = _order_profile(rec)
    base = rows[1][1]
    if rec is None or base is None or not all(m for _, m in rows[2:]):
        return Text("The profile of the stages and the order is not recorded yet.")

    def said(m):
        busy = (f", tensor pipe busy {m[TENSOR_BUSY]:.0f}%" if TENSOR_BUSY in m else "")
        return f"{m[TIME] / 1e6:.2f} ms, {m[DRAM_READ] / 1e9:.1f} GB from DRAM{busy}"
    changes = "; ".join(f"{label}: {said(m)} (x{base[TIME] / m[TIME]:.2f} faster)"
                        for label, m in rows[2:])
    one = rows[0][1]
    return Text(f"On the {rec.device['name']} at {studies.get(ORDER_PROFILE).shapes[0][0]}³, "
                f"the warp-specialised kernel's default ({rows[1][0]}) takes {said(base)}; "
                f"{changes}." + (f" The one-role kernel (4 stages, row order) takes "
                                 f"{one[TIME] / 1e6:.2f} ms." if one else ""))


def gpus_compared(rec=None, prof=None) -> Text:
    """The two GPUs behind Appendix A's reading, side by side: the one its profile ran on
    (`order_recording()`) and the one the chapter was timed on (`recording()`), by what
    decides how DRAM-bound a GEMM whose blocks reread B is: the DRAM bandwidth (from the
    recorded memory clock and bus width) and the L2, with the SMs they feed."""
    rec, prof = rec or recording(), prof or order_recording()
    if rec is None or prof is None:
        return Text("The profile and the timed runs are not both recorded here.")

    def said(r, than=""):
        d = r.device
        return (f"{d['name']}: DRAM {device.peak_bandwidth_gbps(d):,.0f} GB/s{than}, "
                f"L2 {d['l2_bytes'] / 2 ** 20:.0f} MiB, {d['sm_count']} SMs")
    if prof.device["name"] == rec.device["name"]:
        return Text(f"The profile and the timed runs come from one GPU, {said(rec)}.")
    ratio = device.peak_bandwidth_gbps(rec.device) / device.peak_bandwidth_gbps(prof.device)
    return Text(f"Profiled (this appendix): {said(prof)}. Timed (sections 5 and 6): "
                f"{said(rec, f' ({ratio:.2f} times the profiled GPU)')}.")


def roles_busy(n: int = 4096, rec=None) -> Text:
    """What splitting the roles changed under the profiler at n³: the tensor pipe's busy
    share in the one-role kernel and in the warp-specialised one (row order), from the
    study (the solution's conclusion). Both are the defaults, so the line says what else
    differs between them: the tile."""
    rec = rec or study_recording()
    one, ws = (m for _, m in _study(n, rec)[:2])
    if not (one and ws and TENSOR_BUSY in one and TENSOR_BUSY in ws):
        return Text(f"The study's tensor-pipe shares at {n}³ are not recorded.")
    return Text(f"Under Nsight Compute at {n}³ ({_label(rec)}): the tensor pipe was busy "
                f"{one[TENSOR_BUSY]:.0f}% of the time in the one-role kernel and "
                f"{ws[TENSOR_BUSY]:.0f}% in the warp-specialised kernel. Default against "
                f"default: both 4 stages, one block per SM; tiles of "
                f"{' x '.join(map(str, tile_shape(TMA)))} and "
                f"{' x '.join(map(str, tile_shape(WS)))}.")


def per_cycle_against_mma(rec=None) -> Text:
    """Chapter 14's open question, the work per SM cycle: the FLOP each SM did per cycle
    under the profiler (2 n^3 / (SMs x sm__cycles_elapsed)), for the warp-specialised
    kernel in groups of 16 rows and chapter 14's mma.sync kernel (BK 64, 3 stages), at
    every size both were profiled in one recording, beside the dense FP16 peak per SM
    cycle. The clock cancels: both counts are in the cycles the SMs really ran."""
    rec = rec or study_recording()
    per_sm = ch13.FP16_FLOP_PER_CLOCK_SM.get((rec.device if rec else {}).get("compute_capability"))
    mma = ch14_clocks.per_cycle(rec) if rec is not None else {}
    lines = []
    for shape in studies.get(STUDY).shapes:
        n = shape[0]
        m = _study(n, rec)[-1][1]
        if m and m.get(ch14_clocks.CYCLES) and n in mma:
            ws = 2 * n ** 3 / m[ch14_clocks.CYCLES] / rec.device["sm_count"]
            lines.append(f"* {n}³: wgmma_ws {ws:,.0f} FLOP per SM cycle, mma.sync {mma[n]:,.0f}: "
                         f"x{ws / mma[n]:.2f}, {100 * ws / per_sm:.0f}% and "
                         f"{100 * mma[n] / per_sm:.0f}% of the peak.")
    if not (per_sm and lines):
        return Text("The two kernels' SM cycles are not both recorded in one profile here.")
    return Text(f"Under Nsight Compute ({_label(rec)}), the FLOP each SM did per cycle it "
                f"ran, against the dense FP16 peak of {per_sm:,} per cycle; wgmma_ws in "
                f"groups of 16 rows (3 stages), chapter 14's mma.sync kernel at BK 64, 3 "
                f"stages:\n" + "\n".join(lines))


def block_tile(pid: int, grid_x: int, grid_y: int, group: int) -> tuple[int, int]:
    """(tile column, tile row) of the block numbered pid = blockIdx.y * gridDim.x +
    blockIdx.x: the model of `block_tile<GROUP>` in cuda/15_wgmma.cu."""
    if group == 1:
        return pid % grid_x, pid // grid_x
    per_group = group * grid_x
    first = pid // per_group * group
    rows = min(grid_y - first, group)
    in_group = pid % per_group
    return in_group // rows, first + in_group % rows


def wave_footprint(n: int, group: int, blocks: int | None = None, rec=None) -> dict:
    """What the first `blocks` blocks (default: one per SM of the recorded GPU) of the
    warp-specialised kernel at n³ read: their tile rows and columns, and the bytes of A
    and B behind them (all of K)."""
    bm, bn = tile_shape(WS)
    gx, gy = -(-n // bn), -(-n // bm)
    rec = rec or recording()
    blocks = blocks or (rec.device["sm_count"] if rec is not None else 132)
    tiles = [block_tile(pid, gx, gy, group) for pid in range(blocks)]
    rows, cols = {y for _, y in tiles}, {x for x, _ in tiles}
    return {"tiles": tiles, "tile rows": len(rows), "tile columns": len(cols),
            "A bytes": len(rows) * bm * n * 2, "B bytes": len(cols) * bn * n * 2,
            "grid": (gx, gy)}


def footprint_table(n: int = 8192, groups=(1, 8, 16), rec=None) -> Table:
    """Per GROUP: the rows of A and columns of B that one wave of blocks (one per SM)
    reads at n³, against the L2's size (the recorded GPU's)."""
    rec = rec or recording()
    l2 = rec.device["l2_bytes"] if rec is not None else None
    rows = []
    for g in groups:
        f = wave_footprint(n, g, rec=rec)
        rows.append({"GROUP": g, "tile rows": f["tile rows"], "tile columns": f["tile columns"],
                     "A read (MB)": f["A bytes"] / 1e6, "B read (MB)": f["B bytes"] / 1e6,
                     "together (MB)": (f["A bytes"] + f["B bytes"]) / 1e6})
    sms = rec.device["sm_count"] if rec is not None else 132
    # Appendix A's profile may come from another GPU: give its L2 too
    prof = order_recording()
    other = (f"; the profile's {prof.device['name']}: L2 "
             f"{prof.device['l2_bytes'] / 2 ** 20:.0f} MiB"
             if prof is not None and prof.device.get("l2_bytes") not in (None, l2) else "")
    return Table(rows, list(rows[0]), title=f"The first {sms} blocks at {n:,}³ (one per SM); "
                                            f"L2: {l2 / 2 ** 20:.0f} MiB ({l2 / 1e6:.0f} MB) "
                                            f"({_label(rec)}){other}")


def plot_block_order(n: int = 8192, groups=(1, 16), rec=None, axes=None):
    """The tiles of C computed by the first wave of blocks (one per SM), coloured by
    launch order, in row order and in groups of rows. Only the tile rows some first wave
    reaches are drawn: the rest of C would be empty space."""
    import matplotlib.pyplot as plt
    import numpy as np
    waves = [(g, wave_footprint(n, g, rec=rec)) for g in groups]
    rows = 1 + max(y for _, f in waves for _, y in f["tiles"])
    bm, bn = tile_shape(WS)
    if axes is None:
        gx = waves[0][1]["grid"][0]
        # one above the other, each the page's width: side by side, a wave a few tile
        # rows deep and 32 tiles wide is drawn as a thin strip
        height = 1.1 + 10 * rows * bm / (gx * bn)
        _, axes = plt.subplots(len(groups), 1, figsize=(10, height * len(groups)),
                               layout="constrained")
    for ax, (g, f) in zip(axes, waves):
        gx, gy = f["grid"]
        img = np.full((rows, gx), np.nan)
        for pid, (x, y) in enumerate(f["tiles"]):
            img[y, x] = pid
        ax.imshow(img, cmap="viridis", aspect=bm / bn, interpolation="nearest")
        ax.set_title(f"GROUP {g}: {f['tile rows']} tile rows x {f['tile columns']} tile "
                     f"columns,\nA {f['A bytes'] / 1e6:.0f} MB + B {f['B bytes'] / 1e6:.0f} MB "
                     f"read", fontsize=9)
        ax.set_xlabel(f"tile column (256 wide), {gx} in all", fontsize=8)
        ax.set_ylabel(f"tile row (128 tall):\nthe first {rows} of {gy}", fontsize=8)
    axes[0].figure.suptitle(f"{n:,}³: the first {len(waves[0][1]['tiles'])} blocks (colour: "
                            f"launch order)", fontsize=10)
    return axes


ORDERS = "ch15_orders"            # one role and two at equal stages, and the order: one run
CHAPTERS = "ch13_15_ladder"       # the best kernel of chapters 13, 14 and 15: one run


def _rates(row: dict, key: str = "gflops") -> tuple[float, float, float]:
    """(median, min, max) TFLOP/s of a timed row (`key`: "gflops" for the kernel, or
    "reference" for the cuBLAS timed beside it)."""
    g = row["reference"]["gflops"] if key == "reference" else row[key]
    return g["median"] / 1e3, g.get("min", g["median"]) / 1e3, g.get("max", g["median"]) / 1e3


def orders(rec=None) -> dict[int, list[tuple[str, dict]]]:
    """The study `ch15_orders`: n -> [(step label, timed row)] at each size, every row
    of one run with cuBLAS FP16 timed beside it; sizes with a step missing are left out."""
    rec = rec or studies.complete_recording(ORDERS)
    out = {}
    for shape in studies.get(ORDERS).shapes:
        got = studies.results(ORDERS, shape, rec=rec)
        if got and all(row for _, row in got):
            out[shape[0]] = [(step.label, row) for step, row in got]
    return out


def plot_orders(rec=None, axes=None):
    """Per size, the five configurations of one run: each kernel's median TFLOP/s (bar;
    whiskers: its fastest and slowest repetition) and the cuBLAS FP16 timed beside that
    row (black: median, whiskers the same), so that cuBLAS's own spread within one run
    is in sight beside the differences between configurations."""
    import matplotlib.pyplot as plt
    data = orders(rec)
    if not data:
        return None
    if axes is None:
        _, axes = plt.subplots(1, len(data), figsize=(3.6 * len(data), 4.2))
    colours = ("tab:brown", "sandybrown", "tab:purple", "mediumpurple", "tab:green")
    for ax, (n, rows) in zip(axes, data.items()):
        for i, (label, row) in enumerate(rows):
            med, lo, hi = _rates(row)
            ax.bar(i - 0.18, med, width=0.36, color=colours[i % len(colours)],
                   yerr=[[med - lo], [hi - med]], capsize=2, label=label)
            cm, cl, ch = _rates(row, "reference")
            ax.errorbar(i + 0.18, cm, yerr=[[cm - cl], [ch - cm]], fmt="_", color="k",
                        ms=12, capsize=2, label="cuBLAS FP16 beside it" if i == 0 else None)
        ref = [_rates(r, "reference")[0] for _, r in rows]
        ax.axhspan(min(ref), max(ref), color="0.85", zorder=0)
        ax.set_xticks(range(len(rows)), ["1 role\n4 st.", "1 role\n3 st.", "WS 4 st.\nrows",
                                         "WS 3 st.\nrows", "WS 3 st.\ngroups"][:len(rows)],
                      fontsize=7)
        ax.set_title(f"{n}³", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel("TFLOP/s (median; whiskers: slowest, fastest repetition)", fontsize=8)
    axes[0].figure.legend(*axes[0].get_legend_handles_labels(), fontsize=7, ncol=3,
                          loc="lower center", bbox_to_anchor=(0.5, -0.12))
    axes[0].figure.suptitle("One run: one role against warp-specialised (WS) at equal "
                            "stages, and row order against groups of 16 rows. Grey band: "
                            "the medians of cuBLAS FP16 across the five rows of the run",
                            fontsize=9)
    plt.tight_layout()
    return axes


def _versus(rows: dict, a: str, b: str, spread: float) -> str:
    """'x1.10' for the rate of step a over step b, said to be within cuBLAS's spread
    (max over min of its medians in the same run) where it is."""
    r = _rates(rows[a])[0] / _rates(rows[b])[0]
    return f"x{r:.2f}" + (" (within cuBLAS's spread)" if max(r, 1 / r) <= spread else "")


def verdicts(a: str, b: str, rec=None) -> list[tuple[int, float, bool, bool]]:
    """(size, rate of step a over step b, whether that is within cuBLAS's spread of the
    same run, whether the two steps' own repetitions lie apart: a's slowest above b's
    fastest or a's fastest below b's slowest) at each size of the study `ch15_orders`
    (steps named by their labels)."""
    out = []
    for n, got in orders(rec).items():
        rows = dict(got)
        ref = [_rates(r, "reference")[0] for r in rows.values()]
        (ma, lo_a, hi_a), (mb, lo_b, hi_b) = _rates(rows[a]), _rates(rows[b])
        r = ma / mb
        out.append((n, r, max(r, 1 / r) <= max(ref) / min(ref), lo_a > hi_b or hi_a < lo_b))
    return out


UNSETTLED = "apart in their own repetitions but within cuBLAS's spread (one run cannot settle it)"
OVERLAP = "within cuBLAS's spread, their repetitions overlapping"


def verdict_words(a: str, b: str, rec=None) -> str:
    """Step a against step b in words, the sizes grouped by the verdict: 'faster by more
    than cuBLAS's spread at 4096³ (x1.11); <UNSETTLED> at 8192³ (x1.10); within cuBLAS's
    spread at 2048³ (x1.01); slower at 1024³ (x0.81)'. A difference within cuBLAS's
    spread whose repetitions still lie apart is told apart from one lost in both: the
    kernel did change, but cuBLAS moved as much across the run, so the GPU may have."""
    groups = {"faster by more than cuBLAS's spread": [], UNSETTLED: [],
              OVERLAP: [],
              "slower by more than cuBLAS's spread": []}
    for n, r, within, apart in verdicts(a, b, rec):
        key = (UNSETTLED if within and apart else
               OVERLAP if within else
               "faster by more than cuBLAS's spread" if r > 1 else
               "slower by more than cuBLAS's spread")
        groups[key].append(f"{n}³ (x{r:.2f})")
    said = [f"{k} at {' and '.join(v) if len(v) < 3 else ', '.join(v[:-1]) + ' and ' + v[-1]}"
            for k, v in groups.items() if v]
    return "; ".join(said) if said else "not recorded"


def orders_verdicts(rec=None) -> Text:
    """The four comparisons of the one run, each with its sizes grouped by verdict."""
    if not orders(rec):
        return Text("The run that times the five configurations side by side is not in "
                    "the recording yet.")
    one4, one3, ws4, ws3, grouped = (s.label for s in studies.get(ORDERS).steps)
    return Text(f"* Warp-specialised against one role, both at 3 stages: "
                f"{verdict_words(ws3, one3, rec)}.\n"
                f"* One role, 3 stages against 4: {verdict_words(one3, one4, rec)}.\n"
                f"* Warp-specialised, 3 stages against 4 (row order): "
                f"{verdict_words(ws3, ws4, rec)}.\n"
                f"* Groups of 16 rows against row order (warp-specialised, 3 stages): "
                f"{verdict_words(grouped, ws3, rec)}.")


def orders_summary(rec=None) -> Text:
    """The study `ch15_orders` in words, per size: how far cuBLAS moved across the rows
    of the run, then the four comparisons (warp-specialised against one role at 3
    stages; 3 stages against 4 for each kernel; groups of 16 rows against row order at 3
    stages), each said to be within cuBLAS's spread where it is."""
    data = orders(rec)
    if not data:
        return Text("The run that times the five configurations side by side is not in "
                    "the recording yet.")
    one4, one3, ws4, ws3, grouped = (s.label for s in studies.get(ORDERS).steps)
    out = []
    for n, got in data.items():
        rows = dict(got)
        ref = [_rates(r, "reference")[0] for r in rows.values()]
        spread = max(ref) / min(ref)
        out.append(f"* {n}³: cuBLAS FP16, timed beside each of the five rows, ran at "
                   f"{min(ref):,.0f} to {max(ref):,.0f} TFLOP/s (x{spread:.2f}). "
                   f"Warp-specialised against one role, both at 3 stages: "
                   f"{_versus(rows, ws3, one3, spread)}; one role at 3 stages against 4: "
                   f"{_versus(rows, one3, one4, spread)}; warp-specialised at 3 stages against "
                   f"4 (row order): {_versus(rows, ws3, ws4, spread)}; groups of 16 against row order "
                   f"(3 stages): {_versus(rows, grouped, ws3, spread)}.")
    rec = rec or studies.complete_recording(ORDERS)
    return Text("\n".join(out) + f"\n({_label(rec)}; each row the median of its "
                f"repetitions.)")


def what_is_left(n: int = 8192, rec=None) -> Text:
    """The best configuration and cuBLAS FP16 against the GPU's dense FP16 tensor-core
    peak (chapter 14's arithmetic), with every cuBLAS rate timed at that size (they
    differ from run to run)."""
    rec = rec or recording()
    props = rec.device if rec is not None else {}
    per_sm = ch13.FP16_FLOP_PER_CLOCK_SM.get(props.get("compute_capability"))
    best = _row(WS, n, GROUPED, rec)
    if not (per_sm and best):
        return Text("The FP16 peak of the recorded GPU is not known here.")
    peak = per_sm * props["sm_count"] * props["sm_clock_mhz"] / 1e6
    mine, ref = best["gflops"]["median"] / 1e3, best["reference"]["gflops"]["median"] / 1e3
    refs = [_rates(r, "reference")[0] for _, r in orders().get(n, [])] or [ref]
    return Text(f"{props['name']}: dense FP16 peak {peak:,.0f} TFLOP/s at its top clock"
                f"{ch13.datasheet_peak(props)}. At {n}³: wgmma_ws in groups of 16 rows "
                f"{mine:,.0f} TFLOP/s ({100 * mine / peak:.0f}% of the peak); cuBLAS FP16 "
                f"{ref:,.0f} TFLOP/s beside it ({100 * ref / peak:.0f}%), and "
                f"{min(refs):,.0f} to {max(refs):,.0f} beside the five rows of section 6's "
                f"one run at that size. Both are taken against the top clock: at the power "
                f"limit the GPU runs below it (chapter 14's clock study), so these shares "
                f"of the peak are lower bounds on the shares at the clock it ran.")


# ------------------------------------------------------------------ 10. explore

def explorer(kernel: str = WS):
    """The kernel's tunables -> its rate beside cuBLAS FP16 (live: compiled, checked and
    timed; recorded: the sweep at 2048³)."""
    from gemm_kernels.notebook.widgets import Explorer
    return Explorer(kernel, rec=recording()).widget()


def sweep_table(kernel: str = WS, rec=None, top: int = 8) -> Table:
    """The recorded sweep at 2048³, fastest first (chapter 13's table)."""
    return ch14.one_decimal(ch13.sweep_table(rec=rec or recording(), top=top, kernel=kernel))


COMMON_MISTAKES = (("(t / STAGES) & 1", "(t / STAGES) & 1"),
                   ("t & 1", "(t - STAGES) & 1"),
                   ("(t / STAGES) & 1", "0"),
                   ("t / STAGES", "t / STAGES - 1"))


def common_mistakes(pairs=COMMON_MISTAKES) -> Table:
    """What exercise 15's step 2 answers to the usual wrong parities (full_parity,
    empty_parity), run here through the grader's own check and hint."""
    from gemm_kernels.exercises import ch15_checks
    rows = []
    for full, empty in pairs:
        source = f"full_parity = {full};\nempty_parity = {empty};\n"
        problems = ch15_checks.assess(source)
        rows.append({"full_parity": full, "empty_parity": empty,
                     "step 2 says": problems[0] if problems else "pass",
                     "hint": ch15_checks.phases_hint(problems[0]) if problems else ""})
    return Table(rows, ["full_parity", "empty_parity", "step 2 says", "hint"],
                 title="The usual wrong parities and what the grader answers")


# ------------------------------------------------------------------ 5. occupancy

TMA_CONFIGS = tuple({"BM": bm, "STAGES": st} for bm in (128, 64) for st in (4, 3, 2))


def occupancy_table(n: int = 2048, rec=None) -> Table:
    """Every recorded configuration of the one-role kernel at n³, and the warp-specialised
    default, with what differs between them: the tile of C (its width is the wgmma's N),
    the roles, and the blocks (and warps) that fit on one SM with what limits them
    (computed here, for sm_90, by `analysis.kernel_occupancy`), beside the rate and the
    cuBLAS FP16 rate timed beside it."""
    rec = rec or recording()
    rows = []
    for kernel, params in [(TMA, c) for c in TMA_CONFIGS] + [(WS, {})]:
        r = _row(kernel, n, params, rec)
        if not r:
            continue
        occ = analysis.kernel_occupancy(kernel, params, arch="sm_90")
        bm, bn = tile_shape(kernel, params)
        n_wg = occ.threads_per_block // 128
        rows.append({"kernel": kernel, "configuration": _full_config(kernel, params),
                     "tile of C": f"{bm} x {bn}",
                     "warpgroups": ("1 producer + 2 consumers" if kernel == WS else
                                    f"{n_wg}, one role"),
                     "blocks per SM (limited by)": f"{occ.blocks_per_sm} ({occ.limiter})",
                     "warps per SM": occ.warps_per_sm,
                     "TFLOP/s": r["gflops"]["median"] / 1e3,
                     "cuBLAS FP16 beside it": r["reference"]["gflops"]["median"] / 1e3})
    rows.sort(key=lambda x: (x["kernel"] != TMA, -x["TFLOP/s"]))
    return Table(rows, list(rows[0]) if rows else ["kernel"],
                 title=f"At {n}³: what differs between the configurations (occupancy for "
                       f"sm_90, computed here) and their rates ({_label(rec)})")


def occupancy_summary(n: int = 2048, rec=None) -> Text:
    """The one-role kernel's rates at n³ grouped by the warps that fit on an SM, and the
    best of them against the warp-specialised default, in words."""
    rec = rec or recording()
    by_warps: dict[int, list[float]] = {}
    best = None
    for c in TMA_CONFIGS:
        r = _row(TMA, n, c, rec)
        if r:
            rate = r["gflops"]["median"] / 1e3
            w = analysis.kernel_occupancy(TMA, c, arch="sm_90").warps_per_sm
            by_warps.setdefault(w, []).append(rate)
            if best is None or rate > best[1]:
                best = (c, rate, r)
    ws = _row(WS, n, {}, rec)
    if not (by_warps and ws):
        return Text(f"The one-role kernel's configurations at {n}³ are not recorded.")
    # one rate where the range rounds to one number ("421", not "421 to 421")
    span = lambda v: f"{min(v):,.0f}" + ("" if round(min(v)) == round(max(v))
                                         else f" to {max(v):,.0f}")
    parts = [f"{w} warps per SM: {span(v)} TFLOP/s"
             for w, v in sorted(by_warps.items(), reverse=True)]
    wr = ws["gflops"]["median"] / 1e3
    return Text(f"The one-role kernel (wgmma_tma) at {n}³, by the warps resident on an SM: "
                + "; ".join(parts) + f". Its best ({_config(TMA, best[0])}) ran at "
                f"{best[1]:,.0f} TFLOP/s beside cuBLAS FP16 at "
                f"{best[2]['reference']['gflops']['median'] / 1e3:,.0f}; the warp-specialised "
                f"kernel at {wr:,.0f} beside cuBLAS at "
                f"{ws['reference']['gflops']['median'] / 1e3:,.0f} "
                f"(x{wr / best[1]:.2f} the one-role kernel's best).")



# ------------------------------------------------------------------ waves of the one-role kernel

WAVE_CONFIGS = ({}, {"STAGES": 3}, {"BM": 64, "STAGES": 2}, {"BM": 64, "STAGES": 3},
                {"BM": 64})


def _waves(kernel: str, params: dict, n: int, sms: int | None) -> dict:
    """The blocks of one configuration at n³ against the slots of a GPU of `sms` SMs (SMs x
    blocks an SM holds, ptxas here): waves, and how many blocks the last wave runs."""
    k = get(kernel)
    p = k.resolve(params)
    gx, gy, _ = k.grid(p, (n, n, n))
    o = analysis.kernel_occupancy(kernel, params)
    row = {"blocks": gx * gy, "blocks per SM": o.blocks_per_sm, "warps per SM": o.warps_per_sm}
    if sms:
        slots = sms * o.blocks_per_sm
        rest = (gx * gy) % slots
        row |= {"slots": slots, "waves": f"{gx * gy / slots:.2f}",
                "blocks in the last wave": rest or slots}
    return row


def waves_table(kernel: str = TMA, configs=WAVE_CONFIGS, n: int = 2048, rec=None) -> Table:
    """The blocks of each configuration at n³ against the slots of the recorded GPU (SMs x
    blocks an SM holds, ptxas here): waves, and how many blocks the last wave runs. A last
    wave of a few blocks leaves most SMs idle while it runs (tail-wave quantisation); the
    rate is the recorded sweep's, where it has the configuration."""
    rec = rec or recording()
    sms = rec.device.get("sm_count") if rec else None
    rows = []
    for params in configs:
        row = {"configuration": _full_config(kernel, params),
               **_waves(kernel, params, n, sms)}
        r = _row(kernel, n, params, rec)
        row["TFLOP/s"] = r["gflops"]["median"] / 1e3 if r else None
        rows.append(row)
    return Table(rows, list(rows[0]), title=f"{kernel} at {n}³ on {sms or 'an unknown number of'} "
                 f"SMs ({_label(rec)})")


def size_waves_table(configs=((TMA, {}), (WS, {})), sizes=SIZES, rec=None) -> Table:
    """The two kernels' default configurations at every size: the tile of C, the blocks
    against the slots of the recorded GPU, and the recorded rate. At 1024³ the
    warp-specialised kernel's 128 x 256 tiles make fewer blocks than the GPU has SMs, so
    most SMs have nothing to do: that, not the roles, is why it is slower there."""
    rec = rec or recording()
    sms = rec.device.get("sm_count") if rec else None
    rows = []
    for n in sizes:
        for kernel, params in configs:
            bm, bn = tile_shape(kernel, params)
            row = {"size": f"{n}³", "kernel": kernel, "tile of C": f"{bm} x {bn}",
                   **_waves(kernel, params, n, sms)}
            if sms:
                row["SMs with no block"] = max(sms - row["blocks"], 0)
            r = _row(kernel, n, params, rec)
            row["TFLOP/s"] = r["gflops"]["median"] / 1e3 if r else None
            rows.append(row)
    return Table(rows, list(rows[0]), title=f"The default configurations on "
                 f"{sms or 'an unknown number of'} SMs ({_label(rec)})")
