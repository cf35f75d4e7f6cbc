"""Chapter 09's pictures and tables: who owns which outputs, the cp.async ring, the
ladder from chapter 08's kernel to the capstone, and the evidence behind each step.

Everything is derived, nothing typed twice:

* the lane mappings are read from the kernels' own sources (09_capstone.cu, 09_zorder.cu)
  and evaluated with the exercises' C-expression evaluator, so a picture cannot drift
  from the code it describes;
* the ring follows the capstone's rule (tile t in stage t % STAGES, STAGES-1 tiles in
  flight) with the wait count read from the kernel;
* SASS counts come from the static analysis here (no GPU needed), rates from the
  recording through `studies.results`, counters from the recorded ncu studies. Where the
  recording has no row, the tables say so in words instead of showing a number;
* registers and blocks per SM beside a rate are those of the binary that was timed (the
  row's `binary`), ptxas here only where the recording names none, and then said so;
* how large a difference must be to mean something comes from the same rows: the spread
  of the cuBLAS timed beside them (`cublas_spread`), and what a MINB = 2 build does where
  it leaves the occupancy alone (`minb_pairs`).

The chapter's code excerpts (`code`), its folded answers (`Reveal`, `answer`) and the K-axis
picture of HOIST (`hoist_picture`) are here too.
"""
from __future__ import annotations

import re
from collections import Counter

from gemm_kernels.core import analysis, compiler, device
from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.core.launch import kernel_of
from gemm_kernels.core.table import Table
from gemm_kernels.exercises.cexpr import code_only, evaluate
# The chapter's checks read the same kernel: one brace matcher (the text inside the
# first {...} from a position) serves both.
from gemm_kernels.exercises.ch09_checks import _assignments, braced, zorder_lanes
from gemm_kernels.measure import lookup, profile, records, studies, tradeoff
from gemm_kernels.memory import banks, ch07_09_patterns
from gemm_kernels.notebook import ch09_split   # registers the ladder's variants (4a, 4b)
from gemm_kernels.notebook.display import Folded, Markdown, Stacked, Text, source

NOT_RECORDED = "not recorded yet on this machine's recording"
NOT_TIMED = "not timed: the recording has no run of it"   # a worked solution
AS_BUILT = "as built"     # a ladder step without a MINB switch, in the MINB = 2 column
MINB2_FIT = "MINB = 2 build (ptxas here): registers, spills"
LADDER = "ch09_ladder"
BUILT_WITH = "built with"   # step_changes' column: the MINB of the build that was timed
LADDER_MINB2 = "ch09_ladder_minb2"   # the same steps built with MINB = 2, same run
FONT = 10          # every label of these figures; titles one point larger


# ------------------------------------------------------------------ formatting

def pct(x: float | None) -> str:
    """98%: a share in whole percent, as people quote it; '-' when there is none."""
    return "-" if x is None else f"{x:.0f}%"


def count(n: float | None) -> str:
    """1,234,567: a count with thousands separators; '-' when there is none."""
    return "-" if n is None else f"{n:,.0f}"


# ------------------------------------------------------------------ reading the sources

def _assigned(code: str, name: str) -> str:
    """The expression first assigned to `name` in `code` (`name = <expr>` up to the next
    comma or semicolon): the kernels write their index arithmetic that way."""
    m = re.search(rf"\b{name}\s*=(?!=)\s*([^,;]+)[,;]", code)
    if not m:
        raise ValueError(f"no assignment to {name!r} found in the kernel source")
    return m.group(1).strip()


def _capstone_threads(params: dict) -> tuple[dict, list[dict]]:
    """(block constants, per thread: lane, warp, qr, qc, am, bn and the coordinates of
    its copies a_k, a_m, b_k, b_n), every expression read from 09_capstone.cu, for the
    VEC path (the one timed)."""
    code = code_only(KERNELS["capstone"].source_text())
    c = {n: params[n] for n in ("BM", "BN", "BK", "WM", "WN", "STAGES")}
    c["BW"] = 4     # the float4 (VEC) path: B copied 16 bytes at a time
    for n in ("WARPS_N", "NT", "MI", "NJ", "TM", "LDA", "A_PER", "A_STEP", "B_CPR",
              "B_PER", "B_STEP"):
        c[n] = evaluate(_assigned(code, n), c)
    per_thread = {n: _assigned(code, n) for n in ("lane", "warp", "qr", "qc", "am", "bn",
                                                   "a_k", "a_m", "b_k", "b_n")}
    threads = []
    for t in range(c["NT"]):
        env = {**c, "t": t}
        for n, expr in per_thread.items():     # in source order: each uses the ones before
            env[n] = evaluate(expr, env)
        threads.append(env)
    return c, threads


def lane_outputs(params: dict | None = None) -> list[list[tuple[int, int]]]:
    """For every thread of a capstone block, the (row, column) of each C element it
    stores, within the block's BM x BN tile: the epilogue's own index expressions
    (after the last FFMA of the source), evaluated with row0 = col0 = 0."""
    p = KERNELS["capstone"].resolve(params)
    code = code_only(KERNELS["capstone"].source_text())
    epilogue = code[code.rindex("fmaf("):]
    row, col = _assigned(epilogue, "r"), _assigned(epilogue, "c")
    c, threads = _capstone_threads(p)
    return [[(evaluate(row, {**env, "row0": 0, "i": i}),
              evaluate(col, {**env, "col0": 0, "j": j}) + jj)
             for i in range(c["TM"]) for j in range(c["NJ"]) for jj in range(4)]
            for env in threads]


def zorder_places(zorder: bool = True, BM: int = 128, BN: int = 128) -> list[tuple[int, int]]:
    """(qr, qc) of every thread of a 09_zorder.cu block: its place in the (BM/8) x (BN/8)
    grid, from the kernel's ZORDER branch (or the row-major `else` branch)."""
    code = code_only(KERNELS["zorder"].source_text())
    m = re.search(r"if\s+constexpr\s*\(\s*ZORDER\s*\)", code)
    # the ZORDER branch, or the `else` that follows it (the branch has no `else` inside)
    branch = braced(code, code.index("else", m.end()) if not zorder else m.end())
    consts = {"BM": BM, "BN": BN}
    consts["NT"] = evaluate(_assigned(code, "NT"), consts)
    if zorder:
        consts["WARPS_N"] = evaluate(_assigned(branch, "WARPS_N"), consts)
    names = ("warp", "lane") if zorder else ()
    exprs = {n: _assigned(branch, n) for n in names + ("qr", "qc")}
    out = []
    for t in range(consts["NT"]):
        env = {**consts, "t": t}
        for n, expr in exprs.items():
            env[n] = evaluate(expr, env)
        out.append((env["qr"], env["qc"]))
    return out


# ------------------------------------------------------------------ pictures: who owns what

def _plt():
    """pyplot, imported only when a picture is drawn (importing this module stays cheap)."""
    import matplotlib.pyplot as plt
    return plt


def _grid_axes(ax, rows: int, cols: int):
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.tick_params(labelsize=FONT)


HALF_COLOURS = ("#cfe2f3", "#fde9c9")     # lanes 0-15, lanes 16-31
HIGHLIGHT = "#e06666"                      # the sub-tiles of lane 0


def warp_tiles(params: dict | None = None):
    """Two panels: the block's C tile split into warp regions; warp 0's region split
    into its lanes' 4 x 4 sub-tiles, each numbered with the lane that computes it.
    Drawn from `lane_outputs`, i.e. from the kernel's own index expressions."""
    from matplotlib.patches import Rectangle
    p = KERNELS["capstone"].resolve(params)
    c, _ = _capstone_threads(p)
    outs = lane_outputs(p)
    plt = _plt()
    sub_rows, sub_cols = c["WM"] // 4, c["WN"] // 4
    if sub_cols > 16:        # a wide warp region: the two panels one above the other
        fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(13, 3.5 + 0.42 * sub_rows + 1.2),
                                       layout="constrained",
                                       gridspec_kw={"height_ratios": [3.5, 0.42 * sub_rows]})
    else:
        fig, (ax0, ax1) = plt.subplots(
            1, 2, figsize=(4 + 0.55 * sub_cols, max(4.5, 0.5 * sub_rows + 2)),
            layout="constrained",
            gridspec_kw={"width_ratios": [4 * p["BN"] / p["BM"], sub_cols / sub_rows * 4]})
    # Left: each warp's region, the bounding box of what its threads store.
    _grid_axes(ax0, p["BM"], p["BN"])
    for w in range(c["NT"] // 32):
        cells = [rc for t in range(32 * w, 32 * w + 32) for rc in outs[t]]
        r0, c0 = min(r for r, _ in cells), min(col for _, col in cells)
        h = max(r for r, _ in cells) + 1 - r0
        wd = max(col for _, col in cells) + 1 - c0
        ax0.add_patch(Rectangle((c0, r0), wd, h, facecolor="#d9ead3" if w else HIGHLIGHT,
                                edgecolor="k", lw=1.5))
        ax0.text(c0 + wd / 2, r0 + h / 2, f"warp {w}", ha="center", va="center", fontsize=FONT)
    ax0.set_title(f"The block's {p['BM']} x {p['BN']} tile of C:\n{c['NT'] // 32} warps, "
                  f"each a {c['WM']} x {c['WN']} region", fontsize=FONT + 1)
    ax0.set_xlabel("column in the tile", fontsize=FONT)
    ax0.set_ylabel("row in the tile", fontsize=FONT)
    # Right: warp 0's region in units of 4 x 4 sub-tiles, each with its lane.
    _grid_axes(ax1, sub_rows, sub_cols)
    starts = [sorted({x // 4 * 4 for x in axis}) for axis in zip(*outs[0])]
    gaps = [s[1] - s[0] if len(s) > 1 else None for s in starts]
    for t in range(32):
        for r, col in sorted({(r // 4, col // 4) for r, col in outs[t]}):
            colour = HIGHLIGHT if t == 0 else HALF_COLOURS[t // 16]
            ax1.add_patch(Rectangle((col, r), 1, 1, facecolor=colour, edgecolor="0.4"))
            ax1.text(col + 0.5, r + 0.5, str(t), ha="center", va="center", fontsize=FONT)
    ax1.set_xticks(range(0, sub_cols + 1, 2), [4 * x for x in range(0, sub_cols + 1, 2)])
    ax1.set_yticks(range(0, sub_rows + 1, 2), [4 * y for y in range(0, sub_rows + 1, 2)])
    apart = " and ".join(f"{g} {what} apart" for g, what in zip(gaps, ("rows", "columns")) if g)
    n = c["MI"] * c["NJ"]
    title = [f"Warp 0's {c['WM']} x {c['WN']} region: each lane computes "
             f"{n} sub-tile{'s' if n > 1 else ''} of 4 x 4" + ("," if apart else ""),
             apart, "(lane 0 in red; blue: lanes 0-15, orange: lanes 16-31)"]
    ax1.set_title("\n".join(line for line in title if line), fontsize=FONT + 1)
    ax1.set_xlabel("column in the warp's region", fontsize=FONT)
    ax1.set_ylabel("row in the warp's region", fontsize=FONT)
    return fig


def zorder_grid(BM: int = 128, BN: int = 128, layouts=(False, True)):
    """Warp 0 of 09_zorder.cu in the grid of threads (each cell is one thread's place
    (qr, qc), i.e. its 2 x 2 sub-tiles of 4 x 4): row-major (False) and z-order (True),
    one above the other, as `layouts` asks. Blue: lanes 0-15, orange: lanes 16-31."""
    from matplotlib.patches import Patch, Rectangle
    plt = _plt()
    heights = {False: 2.3, True: 3.7}          # inches: the cells are square
    fig, axes = plt.subplots(len(layouts), 1, figsize=(11, 0.5 + sum(heights[z] for z in layouts)),
                             layout="constrained", squeeze=False,
                             gridspec_kw={"height_ratios": [heights[z] for z in layouts]})
    titles = {False: "Threads row-major: warp 0 is 2 rows x 16 columns of the grid; the 16 "
                     "lanes of a half-warp read 16 different B chunks",
              True: "Z-order: warp 0 is a 4 x 8 block; lanes i and i^1 share a row (same A "
                    "words),\nlanes i and i^2 share a column (same B words)"}
    for ax, z in zip(axes[:, 0], layouts):
        places = zorder_places(z, BM, BN)[:32]
        rows = max(r for r, _ in places) + 1
        cols = max(q for _, q in places) + 1
        _grid_axes(ax, rows, 16)
        for lane, (qr, qc) in enumerate(places):
            ax.add_patch(Rectangle((qc, qr), 1, 1, facecolor=HALF_COLOURS[lane // 16],
                                   edgecolor="0.4"))
            ax.text(qc + 0.5, qr + 0.5, str(lane), ha="center", va="center", fontsize=FONT)
        ax.set_xticks([x + 0.5 for x in range(cols)], range(cols))
        ax.set_yticks([y + 0.5 for y in range(rows)], range(rows))
        ax.set_xlabel("qc (column of the thread in the grid)", fontsize=FONT)
        ax.set_ylabel("qr", fontsize=FONT)
        ax.set_title(titles[z], fontsize=FONT + 1)
    fig.legend([Patch(facecolor=c, edgecolor="0.4") for c in HALF_COLOURS],
               ["lanes 0-15 (first half-warp)", "lanes 16-31 (second half-warp)"],
               loc="outside lower center", ncol=2, fontsize=FONT)
    return fig


# ------------------------------------------------------------------ the cp.async ring

def kernel_wait(stages: int) -> int:
    """The count of the capstone's `cp_async_wait<...>()` in its K loop, evaluated for
    `stages`: how many of a thread's copy groups may still be in flight after the wait."""
    code = code_only(KERNELS["capstone"].source_text())
    loop = braced(code, re.search(r"for\s*\(\s*int\s+tile\s*=", code).end())
    expr = re.search(r"cp_async_wait\s*<([^<>;]*)>", loop).group(1)
    return evaluate(expr, {"STAGES": stages})


def ring_schedule(stages: int, tiles: int = 6, wait: int | None = None,
                  empty_groups: bool = True) -> list[dict]:
    """The capstone's ring, iteration by iteration, for `tiles` tiles of K. Column 0 is
    the prologue, column t + 1 is loop iteration t (an iteration, not a step, so that it
    is not read as one of the chapter's ladder steps). Each column: `stage` (per stage:
    (tile, state) or None, state one of 'requested' (issued in this column), 'in flight', 'landed',
    'computing', 'done'), `computes` (the tile computed, or None), `requests`
    ({tile: stage} issued in this column), `landed_before_compute` (has the tile computed
    here been waited for?), `stage_of_compute` and `tile_in_that_stage` (the stage the
    iteration reads and the tile it holds then), `wait_after` (the wait + barrier closing the
    column: the count, and the tiles certainly landed after it).

    The rule is the kernel's: before the loop tiles 0..STAGES-2 are requested, one
    commit group each; iteration t requests tile t+STAGES-1 into stage (t-1) % STAGES at
    k = 0 (an empty group once no tile is left), computes tile t in stage t % STAGES,
    and at its last k waits until at most `wait` groups are in flight (default: the
    kernel's own count), then meets the barrier. `empty_groups=False`: the classic
    mistake, a commit only in the iterations that request a tile (no empty groups at
    the end of K), so that the groups fall behind the iterations."""
    wait = kernel_wait(stages) if wait is None else wait
    groups: list[int | None] = []           # committed groups, oldest first
    landed: set[int] = set()
    held: list[tuple[int, str] | None] = [None] * stages
    computed: set[int] = set()
    cols = []

    def do_wait():
        for g in groups[:max(0, len(groups) - wait)]:
            if g is not None:
                landed.add(g)

    def request(tile, stage, col):
        held[stage] = (tile, "requested")
        col["requests"][tile] = stage

    def snapshot(col, computing):
        states = []
        for s, h in enumerate(held):
            if h is None:
                states.append(None)
            elif h[0] == computing:
                states.append((h[0], "computing"))
            elif h[0] in computed:
                states.append((h[0], "done"))
            elif h[1] == "requested" and h[0] in col["requests"]:
                states.append(h)
            else:
                states.append((h[0], "landed" if h[0] in landed else "in flight"))
        col["stage"] = states

    prologue = {"label": "before the loop", "computes": None, "requests": {}}
    for s in range(stages - 1):
        if s < tiles:
            request(s, s, prologue)
        groups.append(s if s < tiles else None)
    snapshot(prologue, None)
    do_wait()
    prologue["wait_after"] = (wait, sorted(landed))
    prologue["landed_before_compute"] = None
    cols.append(prologue)
    for t in range(tiles):
        col = {"label": f"iteration {t}", "computes": t, "requests": {}}
        nxt = t + stages - 1
        if nxt < tiles:
            request(nxt, (t - 1) % stages, col)
        if nxt < tiles or empty_groups:
            groups.append(nxt if nxt < tiles else None)
        col["landed_before_compute"] = t in landed
        held_stage = t % stages
        col["stage_of_compute"] = held_stage
        col["tile_in_that_stage"] = held[held_stage][0] if held[held_stage] else None
        snapshot(col, t)
        computed.add(t)
        do_wait()
        col["wait_after"] = (wait, sorted(landed))
        cols.append(col)
    return cols


_RING_COLOURS = {"requested": "#f6b26b", "in flight": "#fce5cd", "landed": "#b6d7a8",
                 "computing": "#6aa84f", "done": "#eeeeee"}


def stage_ring(stages: int = 4, tiles: int = 8, wait: int | None = None,
               show_count: bool = True, empty_groups: bool = True):
    """The ring drawn over time: one row per shared-memory stage, one column per loop
    iteration (after the prologue); each cell says which tile the stage holds and what is
    happening to it. A black bar after each column marks the wait + __syncthreads();
    a tile computed before its copies were waited for is marked in red. `show_count`
    False leaves the wait's count out of the title (it is the chapter's exercise)."""
    from matplotlib.patches import Rectangle
    plt = _plt()
    cols = ring_schedule(stages, tiles, wait, empty_groups)
    w = cols[0]["wait_after"][0]
    fig, ax = plt.subplots(figsize=(1.45 * len(cols) + 1.5, 0.95 * stages + 2.2))
    ax.set_xlim(0, len(cols))
    ax.set_ylim(stages, -0.05)
    for x, col in enumerate(cols):
        for s, cell in enumerate(col["stage"]):
            if cell is None:
                text, colour = "empty", "white"
            else:
                tile, state = cell
                race = state == "computing" and not col["landed_before_compute"]
                colour = "#cc0000" if race else _RING_COLOURS[state]
                text = f"tile {tile}\n" + ("computing,\nNOT\nGUARANTEED" if race else
                                           "done: free" if state == "done" else state)
            ax.add_patch(Rectangle((x, s), 1, 1, facecolor=colour, edgecolor="0.5"))
            dark = cell is not None and cell[1] == "computing"
            ax.text(x + 0.5, s + 0.5, text, ha="center", va="center", fontsize=FONT,
                    color="w" if dark else "k")
        ax.plot([x + 1, x + 1], [0, stages], color="k", lw=3)
    ax.set_xticks([x + 0.5 for x in range(len(cols))], [c["label"] for c in cols],
                  fontsize=FONT)
    ax.set_yticks([s + 0.5 for s in range(stages)], [f"stage {s}" for s in range(stages)],
                  fontsize=FONT)
    ax.tick_params(length=0)
    ahead = stages - 1
    last = tiles - stages + 1     # the first iteration with no tile left to request
    ax.set_title(f"The cp.async ring with {stages} stages, K = {tiles} tiles: tile t is "
                 f"requested {ahead} iteration{'s' if ahead > 1 else ''} before it is computed, "
                 "into the stage computed in the iteration before (in iteration 0, the one "
                 "still empty)\n"
                 + (f"(from iteration {last} on, K has no tile left to request: the ring drains"
                    + (", and these iterations commit no group" if not empty_groups else "")
                    + ")\n" if 0 < last < tiles else "")
                 + (f"black bars: cp.async.wait_group {w} (every group complete but the {w} newest) "
                    "then __syncthreads()" if show_count else
                    "black bars: the wait for the next tile, then __syncthreads()")
                 # a wrong count is drawn in the prologue's wait too: say so, since tile 0
                 # is red only because of that (a prologue that waits for all is safe)
                 + ("\n(the prologue waits with this wrong count too, so tile 0 is not "
                    "guaranteed either; a prologue with cp.async.wait_group 0 would make it safe)"
                    if wait is not None and wait != kernel_wait(stages) else ""),
                 fontsize=FONT + 1)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ the ladder

def ladder_steps():
    """The steps of the `ch09_ladder` study: chapter 08's kernel, then one change each."""
    return studies.get(LADDER).steps


def step_numbers() -> list[str]:
    """The ladder's step numbers as the chapter writes them: 0, 1, 2, ..., except that the
    steps which split one change of the kernel into one change each (the variants of
    `ch09_split`, and the registry step that follows them) share one number with letters:
    4a, 4b, 4c."""
    steps, out, n, letter = ladder_steps(), [], 0, None
    for i, s in enumerate(steps):
        if s.variant is None and not (i and steps[i - 1].variant is not None):
            out.append(str(n))
            n += 1
            continue
        letter = 0 if letter is None else letter + 1
        out.append(f"{n}{'abcdefgh'[letter]}")
        if s.variant is None:         # the last of the split
            n, letter = n + 1, None
    return out


def position(number) -> int:
    """Where step `number` (3, "4a", ...) is in the ladder."""
    numbers = step_numbers()
    if str(number) not in numbers:
        raise ValueError(f"the ladder has no step {number}; its steps are {', '.join(numbers)}")
    return numbers.index(str(number))


def _blocks(kernel, params: dict, registers: int | None = None) -> int:
    """Blocks per SM of one configuration: with `registers` (those of the binary that
    was timed) where given, else with the registers ptxas gives it here."""
    return analysis.kernel_occupancy(kernel, params, registers=registers).blocks_per_sm


def _row_blocks(kernel: str, row: dict) -> int | None:
    """Blocks per SM of the binary that was timed for `row`, from its own registers and
    static shared memory (plus the configuration's dynamic shared memory), without
    compiling anything here; None when the row names no binary."""
    b = row.get("binary") or {}
    if b.get("registers") is None or b.get("shared_size_bytes") is None:
        return None
    k = KERNELS[kernel]
    t = k.threads(row["params"])
    return analysis.occupancy(t[0] * t[1] * t[2], b["registers"],
                              b["shared_size_bytes"] + k.dynamic_bytes(row["params"])).blocks_per_sm


def _here_registers(kernel, params: dict) -> int:
    """Registers per thread that ptxas here gives one configuration (no disassembly)."""
    k = kernel_of(kernel)
    return compiler.resources(k, k.resolve(params))["registers"]


def fit(kernel, params: dict) -> str:
    """'128 registers, no spills': what ptxas here gives one configuration, with its
    spill stores, spill loads and stack frame (all from `ptxas -v`), so that a build
    squeezed under a register cap shows whether the squeeze cost local memory."""
    k = kernel_of(kernel)
    r = compiler.resources(k, k.resolve(params))
    if not (r["spill_stores"] or r["spill_loads"] or r["stack_bytes"]):
        return f"{r['registers']} registers, no spills"
    return (f"{r['registers']} registers, {r['spill_stores']} bytes spill stores, "
            f"{r['spill_loads']} bytes spill loads, {r['stack_bytes']} bytes stack")


def ring_bytes(params: dict | None = None) -> str:
    """What the capstone's ring of stages costs in shared memory, for one configuration
    (default: the capstone's): the bytes of one stage and of a block (all of it dynamic,
    `extern __shared__`), whether a launch must first raise the kernel's limit above the
    default a block gets, and how many blocks the SM's shared memory would hold beside
    the number its registers allow (the static analysis, ptxas here)."""
    k = KERNELS["capstone"]
    p = k.resolve(params)
    total = k.dynamic_bytes(p)
    stage = k.dynamic_bytes({**p, "STAGES": 1})
    occ = analysis.kernel_occupancy("capstone", p)
    lim = device.limits()
    cap = lim["smem_per_block"]
    need = ("more than that, so the launch must raise the kernel's limit first"
            if occ.smem_per_block > cap else "no more than that, so no raise is needed")
    return "\n".join([
        f"one stage, A tile with rows of BM + 4 and B tile, BK = {p['BK']}: {count(stage)} bytes",
        f"{p['STAGES']} stages: {count(total)} bytes of dynamic shared memory per block",
        f"a block gets {count(cap)} bytes ({cap // 1024} KiB) unless its kernel's limit is "
        f"raised. {p['STAGES']} stages need {need}",
        f"an SM ({lim['gpus']}) has {count(lim['smem_per_sm'])} bytes: shared memory would "
        f"allow {occ.limits['shared memory']} such blocks, the registers (ptxas "
        f"{compiler.ptxas_version()} here) allow {occ.limits['registers']}"])


def capstone_at_a_glance(sizes=(2048, 4096)) -> str:
    """The capstone's default configuration in one place: its settings from the
    registry, the registers, shared memory and blocks per SM of the static analysis
    (ptxas here), and its recorded rate and % of cuBLAS at `sizes` from the ladder's
    recording (the run the chapter's ladder reads)."""
    k = KERNELS["capstone"]
    p = k.resolve(None)
    occ = analysis.kernel_occupancy("capstone", p)
    threads = occ.threads_per_block
    per_thread = p["BM"] * p["BN"] // threads
    rec = ladder_recording()
    rows = []
    for n in sizes:
        try:
            rows.append((n, lookup.recorded("capstone", (n,) * 3, p, rec=rec)))
        except LookupError:
            rows.append((n, None))
    rates = ", ".join(f"{_rate_cell(r)} at {n}^3" for n, r in rows)
    got = [r for _, r in rows if r is not None]
    return "\n".join([
        f"{k.source}, its default (step 7):",
        f"* block tile BM x BN x BK = {p['BM']} x {p['BN']} x {p['BK']}; {threads} threads, "
        f"{threads // 32} warps, each a WM x WN = {p['WM']} x {p['WN']} warp tile",
        f"* each thread: {per_thread} outputs, as {per_thread // 16} sub-tiles of 4 x 4",
        f"* STAGES = {p['STAGES']}, HOIST {'on' if p['HOIST'] else 'off'}, "
        f"GROUP = {p['GROUP']}, MINB = {p['MINB']}",
        f"* ptxas {compiler.ptxas_version()} here: {occ.registers_per_thread} registers, "
        f"{count(occ.smem_per_block)} bytes of shared memory per block: "
        f"{occ.blocks_per_sm} blocks per SM",
        f"* GFLOP/s (% of cuBLAS): {rates}"
        + (f" ({records.rows_label(got, rec)})" if got else "")])


# A tempting wrong answer to the z-order exercise: qr from the two low lane bits (b1 b0),
# qc from the three high ones, a 4 x 8 block filled column by column.
WRONG_ZORDER = ("(warp / WARPS_N) * 4 + (lane & 3)", "(warp % WARPS_N) * 8 + (lane >> 2)")


def zorder_wrong_mapping(qr: str = WRONG_ZORDER[0], qc: str = WRONG_ZORDER[1]) -> str:
    """What the z-order exercise's grader says of one lane mapping: 09_zorder.cu with
    its qr and qc replaced by `qr` and `qc`, priced by the same bank model."""
    text = KERNELS["zorder"].source_text()
    for name, old, new in zip(("qr", "qc"), _assignments(text), (qr, qc)):
        text = text.replace(f"{name} = {old};", f"{name} = {new};", 1)
    problems = zorder_lanes(text)
    return "\n".join([f"qr = {qr}", f"qc = {qc}",
                       *(f"grader: {p}" for p in problems or ["passes the bank model"])])


def built_minb(kernel, params: dict) -> int:
    """The MINB a configuration is built with: the blocks per SM its `__launch_bounds__`
    asks ptxas to fit, read from the `.minnctapersm` line of its PTX here (none: 1). Read
    from the compiled source, not the step's name: chapter 08's kernel asks for nothing,
    the z-order kernel asks for two through an expression, the capstone through MINB."""
    k = kernel_of(kernel)
    text, _ = compiler.ptx(k, k.resolve(params))
    found = re.findall(r"^\s*\.minnctapersm\s+(\d+)", text, flags=re.M)
    return int(found[0]) if found else 1


def _timed_registers(*rows) -> int | None:
    """Registers of the binary that was timed, from the first of `rows` that has one."""
    return next((r["binary"]["registers"] for r in rows
                 if r and (r.get("binary") or {}).get("registers") is not None), None)


def _loop_counts(kernel, params: dict, registers: int | None = None, arch=None) -> dict:
    """Main-loop SASS of one configuration, in the families the chapter talks about.
    `registers`: those of the binary that was timed (registers and blocks per SM then
    describe it); by default ptxas's here. `arch`: the GPU compiled for, by default the
    one the analysis describes."""
    s = analysis.summary(kernel, params, arch)
    h = Counter(s["loop_histogram"])
    fam = lambda prefix: sum(v for f, v in h.items() if f == prefix or f.startswith(prefix + "."))
    shown = {"FFMA": h["FFMA"], "LDS.128": h["LDS.128"], "LDG": fam("LDG"), "STS": fam("STS"),
             "LDGSTS": h["LDGSTS"], "LDGDEPBAR": h["LDGDEPBAR"], "DEPBAR": h["DEPBAR"],
             "BAR": h["BAR"]}
    total = sum(h.values())
    regs = s["registers"] if registers is None else registers
    return {"registers": regs, "blocks/SM": _blocks(kernel, params, regs),
            "k per loop": s["params"]["BK"], **shown, "other": total - sum(shown.values()),
            # one decimal, so that a product with it (issue_evidence) checks by hand
            "FFMA share": f"{100 * h['FFMA'] / total:.1f}%"}


class Rung:
    """One step of the ladder as recorded: `rows` {size: its row or None}, `registers`
    and `blocks` of the binary that was timed (ptxas here where the recording has
    none: `timed` says which), `here` (ptxas's registers here), and `held` {size: the
    row of the same step built with MINB = 2, or None}: for the capstone's steps the
    build that ptxas must fit in 128 registers, so that two blocks share an SM. Steps
    without a MINB switch are their own `held` rows (the z-order kernel always asks
    for two blocks per SM; chapter 08's fits two as it is)."""

    def __init__(self, index, step, rows, held, number=None):
        self.index, self.step, self.rows, self.held = index, step, rows, held
        self.kernel = studies.step_kernel(step)     # a registry kernel or a variant of one
        self.here = _here_registers(self.kernel, step.params)
        timed = _timed_registers(*rows.values())
        self.timed = timed is not None
        self.registers = timed if self.timed else self.here
        self.blocks = _blocks(self.kernel, step.params, self.registers)
        self.has_minb = "MINB" in step.params
        self.minb = built_minb(self.kernel, step.params)   # as built, for `step_changes`
        self.number = str(index) if number is None else number
        self.label = f"{self.number}. {step.label}"


def ladder_recording():
    """The recording the ladder's section reads (its steps, their MINB = 2 builds, the
    yardsticks, the steps' profile): the one that holds every step of the ladder, timed
    in one run (`studies.complete_recording`), so that its changes are compared on one
    GPU."""
    return studies.complete_recording(LADDER)


def _ladder_rows() -> list[dict]:
    """Every row of the ladder and of its MINB = 2 builds, from `ladder_recording`."""
    rec = ladder_recording()
    return [row for name in (LADDER, LADDER_MINB2) for shape in studies.get(name).shapes
            for _, row in studies.results(name, shape, rec)]


def ladder_source() -> str:
    """Where the ladder's numbers come from, for titles: its GPU, and its runs and days
    (those of the ladder's own rows, not of the whole file)."""
    if device.is_live():
        return records.source()
    return records.rows_label(_ladder_rows(), ladder_recording())


def gpus() -> Markdown:
    """One line under the mode banner (which names the ladder's GPU): which GPU each
    part of the chapter comes from. The main path (the ladder, its MINB = 2 builds, their
    profile and the yardsticks) is one run on its own GPU (`ladder_recording`); the other
    tables, all in the optional section, come from the default recording. Where the two
    GPUs differ, what they share (SMs, clock), from each recording's own device entry;
    where they are the same, one clause."""
    shown, lad = records.current(), ladder_recording()
    if lad is None or shown is None:
        return Markdown("")
    d1 = lad.device
    if lad is shown or (shown.device["name"] == d1["name"]):
        return Markdown(f"**This chapter's GPU:** every table comes from the {d1['name']}.")
    d2 = shown.device

    same = (f"Both have {d1.get('sm_count')} SMs at {count(d1.get('sm_clock_mhz'))} MHz. "
            if (d1.get("sm_count"), d1.get("sm_clock_mhz")) ==
               (d2.get("sm_count"), d2.get("sm_clock_mhz")) else "")
    main = (f"everything before *What to remember* (the ladder, its profile, every step's "
            f"verdict) {ladder_source()}")
    prof, prof_rec = _profile_rows(), studies.complete_recording(STEP_STALLS)
    # the profiles were run on their own day: say so, as their captions do
    if not device.is_live() and prof_rec is not None and (
            records.rows_label(prof, prof_rec, gpu=False) !=
            records.rows_label(_ladder_rows(), lad, gpu=False)):
        main = (f"everything before *What to remember* was recorded on the {d1['name']}: "
                f"the ladder and every step's verdict "
                f"{records.rows_label(_ladder_rows(), lad, gpu=False)}; the steps' profiles "
                f"{records.rows_label(prof, prof_rec, gpu=False)}")
    return Markdown(
        f"**This chapter's GPU:** {main}. Only the optional section at the end, under "
        f"a heading of its own, and on the main path the table of the capstone with its "
        f"`A` tile unpadded (part B) and the explorer after the recap, also read another "
        f"GPU, the {d2['name']}. "
        f"{same}No comparison crosses "
        "from one GPU to the other, and every table and printed measurement names its GPU.")


def ladder_start() -> Text:
    """Where the ladder starts, against chapter 08's exercise: step 0 (chapter 08's
    kernel as its source file has it) and chapter 08's worked answer at 2048^3, both
    from the ladder's run (one GPU), and why the ladder starts from the slower one."""
    from gemm_kernels.notebook.worked_solutions import pair
    n = 2048
    step0 = ladder((n,))[0].rows[n]
    answer = pair("08_double_buffer", (n,) * 3, rec=ladder_recording())[0]
    same = answer is not None and step0 is not None and answer.get("run") == step0.get("run")
    rates = (f"chapter 08's kernel (step 0) {count(_rate(step0))} GFLOP/s, chapter 08's "
             f"worked answer {count(_rate(answer))}" if same else
             f"chapter 08's worked answer: {NOT_TIMED} beside step 0")
    return Text(f"At {n}^3, {ladder_source()}: {rates}.\n"
                "The ladder starts from the first on purpose: part A changes the "
                "shared-memory layout and keeps chapter 08's copy code, so its gains owe "
                "nothing to a better copy; part B replaces the copy (cp.async) and passes "
                "the worked answer.")


def cp_async_against_prefetch(n: int = 2048) -> Text:
    """Step 4a's gain (cp.async copies, over step 3) beside the gain of chapter 08's worked
    answer (a register prefetch that stays in flight, over chapter 08's kernel), both from
    the ladder's run at n^3 (one GPU), so that the two can be set side by side."""
    from gemm_kernels.notebook.worked_solutions import pair
    full = ladder((n,))
    step0 = full[0].rows[n]
    a4 = next((r for r in full if r.number == "4a"), None)
    answer = pair("08_double_buffer", (n,) * 3, rec=ladder_recording())[0]
    if a4 is None or answer is None or step0 is None or answer.get("run") != step0.get("run"):
        return Text(f"At {n}^3, {ladder_source()}: chapter 08's worked answer or step 4a "
                    f"was {NOT_TIMED} in this run, so the two gains cannot be set side by side.")
    before = full[a4.index - 1]
    gain_4a = 100 * (_rate(a4.rows[n]) / _rate(before.rows[n]) - 1)
    gain_08 = 100 * (_rate(answer) / _rate(step0) - 1)
    return Text(f"At {n}^3, {ladder_source()}:\n"
                f"  step 4a (cp.async copies) over step {before.number}: {signed(gain_4a)}\n"
                f"  chapter 08's worked answer (a register prefetch that stays in flight) "
                f"over chapter 08's kernel: {signed(gain_08)}")


def ladder(sizes=(2048, 4096)) -> list[Rung]:
    """The recorded ladder at `sizes` (each step's row, and its MINB = 2 build)."""
    steps, numbers = ladder_steps(), step_numbers()
    rec = ladder_recording()
    by_size = {n: studies.results(LADDER, (n,) * 3, rec) for n in sizes}
    out = []
    for i, step in enumerate(steps):
        rows = {n: by_size[n][i][1] for n in sizes}
        held = {}
        for n in sizes:
            if "MINB" not in step.params:
                held[n] = rows[n]
                continue
            try:
                held[n] = lookup.recorded(studies.step_kernel(step), (n,) * 3,
                                          {**step.params, "MINB": 2}, rec=rec)
            except LookupError:
                held[n] = None
        out.append(Rung(i, step, rows, held, numbers[i]))
    return out


def _no_switch(rungs) -> str:
    """"steps 0-4a": the steps without a MINB switch, as the ladder numbers them."""
    plain = [r.index for r in rungs if not r.has_minb]
    if len(plain) > 1 and plain == list(range(plain[0], plain[-1] + 1)):
        return f"steps {rungs[plain[0]].number}-{rungs[plain[-1]].number}"
    return "steps " + ", ".join(rungs[i].number for i in plain)


def _capstone_row(size: int, params: dict):
    """The capstone's recorded timing at size^3 with `params`, or None where the
    recording has none (the stage tables show such rows as not recorded)."""
    try:
        return lookup.recorded("capstone", (size,) * 3, params)
    except LookupError:
        return None


def _rate(row) -> float | None:
    return None if row is None else row["gflops"]["median"]


def _rate_cell(row) -> str:
    if row is None:
        return NOT_RECORDED
    share = lookup.share(row)
    return f"{count(row['gflops']['median'])}" + (f" ({pct(share)})" if share is not None
                                                 else " (no cuBLAS in its run)")


def signed(v: float | None) -> str:
    """+7.9%: a change in per cent with its sign, to one decimal; '-' when there is none.
    A change that rounds to zero reads +0.0%, never -0.0%."""
    return "-" if v is None else f"{(round(v, 1) or 0.0):+.1f}%"


def _change(row, before) -> str:
    """+7.9%: the rate of a step against the step before it, both from the recording."""
    if row is None or before is None:
        return "-"
    return signed(100 * (row['gflops']['median'] / before['gflops']['median'] - 1))


def _registers_note(rungs) -> str:
    """Where ptxas here gives another register count than the binary that was timed,
    one clause per step, with the blocks per SM that count would leave."""
    diff = [f"step {r.number}: {r.here} (the timed binary had {r.registers}"
            + (f"; {_blocks(r.kernel, r.step.params, r.here)} block(s)/SM with "
               f"{r.here})" if _blocks(r.kernel, r.step.params, r.here) != r.blocks
               else ")")
            for r in rungs if r.timed and r.here != r.registers]
    return (f"ptxas {compiler.ptxas_version()} here allocates differently for "
            + "; ".join(diff)) if diff else ""


def ladder_table(sizes=(2048, 4096), two_blocks_at: int | None = 4096) -> Table:
    """Every step of the ladder: registers and blocks per SM of the binary that was
    timed, and per size the recorded GFLOP/s with its % of the cuBLAS measured beside
    it and the change against the step before. The last two columns (at
    `two_blocks_at`) set every step at two blocks per SM: the capstone's steps by their
    MINB = 2 builds, the others by their own rows (see `Rung`)."""
    rungs = ladder(tuple(dict.fromkeys([*sizes, *([two_blocks_at] if two_blocks_at else [])])))
    rows = []
    for r in rungs:
        before = rungs[r.index - 1] if r.index else None
        row = {"step": r.label, "registers": r.registers, "blocks/SM": r.blocks}
        for n in sizes:
            row[f"{n}^3 GFLOP/s (% of cuBLAS)"] = _rate_cell(r.rows[n])
            row[f"{n}^3 change"] = _change(r.rows[n], before.rows[n]) if before else "-"
        if two_blocks_at:
            n = two_blocks_at
            held = r.held[n]
            row[f"{n}^3, MINB = 2 builds"] = NOT_RECORDED if held is None else \
                (count(_rate(held)) if r.has_minb else AS_BUILT)
            # A step with no MINB switch has no two-block build of its own: its change
            # stands in the as-built column already.
            row[f"{n}^3 change, MINB = 2"] = (_change(held, before.held[n])
                                             if before and r.has_minb else "-")
            row[MINB2_FIT] = (fit(r.kernel, {**r.step.params, "MINB": 2}) if r.has_minb
                              else AS_BUILT)
        rows.append(row)
    timed = all(r.timed for r in rungs)
    note = _registers_note(rungs)
    title = (f"The ladder to the capstone, {ladder_source()}. Registers and blocks/SM: "
             + ("of the compiled kernel that was timed" if timed else
                f"ptxas {compiler.ptxas_version()} here (the recording names no binary "
                "for some steps)")
             + (f" ({note})" if note else "") + ".")
    if two_blocks_at:
        title += (" MINB = 2 builds: the capstone's steps compiled to fit two blocks per "
                  f"SM. {_no_switch(rungs).capitalize()} have no such switch and already run two blocks "
                  f"per SM, so they stand there '{AS_BUILT}', with their own rates.")
    return Table(rows, list(rows[0]), title=title)


def cublas_spread(rows) -> tuple[float, float] | None:
    """(lowest, highest) median of the cuBLAS timed beside each of `rows`: how much the
    same cuBLAS call moved from row to row of one recording. None without references."""
    refs = [r["reference"]["gflops"]["median"] for r in rows if r and r.get("reference")]
    return (min(refs), max(refs)) if refs else None


def _spread_pct(lo_hi) -> float | None:
    return None if lo_hi is None else 100 * (lo_hi[1] / lo_hi[0] - 1)


def minb_pairs(sizes=(2048, 4096)) -> list[dict]:
    """Where the capstone at the ladder's tile (128 x 128, warps of 32 x 64) was
    recorded both as it is (MINB = 1) and built with MINB = 2 in the ladder's run, and
    both binaries allow the same blocks per SM: per such configuration and size, what differs from the
    default, both register counts, the blocks per SM, both rates and the change. Since
    the occupancy is the same, the change is what MINB = 2 does to the code ptxas
    emits, nothing else."""
    k = KERNELS["capstone"]
    d = k.resolve(None)
    rec = ladder_recording()
    if rec is None:
        return []
    # only the ladder's own run(s): the yardstick then comes from the rows it judges
    runs = {r.get("run") for r in _ladder_rows() if r}
    out = []
    for n in sizes:
        for r1 in rec.find("capstone", (n,) * 3, {**_LADDER_TILE, "MINB": 1}):
            if "gflops" not in r1 or r1.get("run") not in runs:
                continue
            r2 = next((r for r in rec.find("capstone", (n,) * 3, {**r1["params"], "MINB": 2})
                       if "gflops" in r and r.get("run") == r1.get("run")), None)
            if r2 is None:
                continue
            g1, g2 = _timed_registers(r1), _timed_registers(r2)
            b1, b2 = _row_blocks("capstone", r1), _row_blocks("capstone", r2)
            if None in (b1, b2) or b1 != b2:
                continue
            changed = ", ".join(f"{p} = {v}" for p, v in r1["params"].items()
                                if p != "MINB" and v != d[p]) or "the default"
            out.append({"size": n, "configuration": changed, "params": r1["params"],
                        "registers": (g1, g2), "blocks/SM": b1, "rows": (r1, r2),
                        "change": 100 * (_rate(r2) / _rate(r1) - 1)})
    return out


_LADDER_TILE = {"BM": 128, "BN": 128, "WM": 32, "WN": 64}


def recompile_shift(sizes=(2048, 4096)) -> dict[int, float]:
    """Per size, the largest change (either sign) that building with MINB = 2 alone made
    where the occupancy stayed the same (`minb_pairs`): how far a recompile alone moved
    the rate. The chapter does not credit a step with a change no larger than this."""
    out = {}
    for p in minb_pairs(sizes):
        out[p["size"]] = max(out.get(p["size"], 0.0), abs(p["change"]))
    return out


def verdict(changes, shift: dict[int, float]) -> str:
    """The chapter's reading of one comparison, [(size, change in %)], by its rule: a
    change no larger than the recompile shift at its size is not credited to the change
    (a rebuild alone moves the rate that much, even past the timing noise); a larger one,
    the same way at every size, is a gain or a loss; a change past the shift at some sizes
    only is not credited either. '' where a change or the shift is missing."""
    if not changes or any(c is None or n not in shift for n, c in changes):
        return ""
    past = [abs(c) > shift[n] for n, c in changes]
    if not any(past):
        return "within the code shift, not credited"
    if all(past) and len({c > 0 for _, c in changes}) == 1:
        return "a gain" if changes[0][1] > 0 else "a loss"
    # The rule credits only a change past the shift the same way at every size; anything
    # else is, in its own words, not credited.
    return "not credited"


def minb_table(sizes=(2048, 4096)) -> Table:
    """`minb_pairs` as a table, one row per configuration, the sizes side by side."""
    pairs = minb_pairs(sizes)
    rows = {}
    for p in pairs:
        row = rows.setdefault(p["configuration"], {"configuration": p["configuration"]})
        row["registers (MINB = 1 / 2)"] = f"{p['registers'][0]} / {p['registers'][1]}"
        row["blocks/SM"] = p["blocks/SM"]
        r1, r2 = p["rows"]
        row[f"{p['size']}^3: MINB = 1 -> 2"] = f"{count(_rate(r1))} -> {count(_rate(r2))}"
        row[f"{p['size']}^3 change"] = signed(p["change"])
    cols = ["configuration", "registers (MINB = 1 / 2)", "blocks/SM"] + \
        [c for n in sizes for c in (f"{n}^3: MINB = 1 -> 2", f"{n}^3 change")]
    table = list(rows.values())
    for row in table:
        for c in cols:
            row.setdefault(c, "-")
    return Table(table, cols, title="The capstone at the ladder's tile (128 x 128, warps of "
                 "32 x 64), built as it is and with MINB = 2, where both builds fit the same "
                 f"blocks per SM; GFLOP/s {ladder_source()}")


def minb_reason(sizes=(2048, 4096)) -> Text:
    """Why the capstone is built with MINB = 1 from step 4b on, in one line: its default
    built both ways (`minb_pairs`, the default's rows) has the same registers and blocks
    per SM, and the MINB = 2 build ran slower at each size."""
    got = [p for p in minb_pairs(sizes) if p["configuration"] == "the default"]
    if len(got) != len(sizes):
        return Text(f"the default built with MINB = 1 and 2: {NOT_RECORDED}")
    p = got[0]
    regs = " / ".join(str(g) for g in p["registers"])
    ran = " and ".join(f"{signed(q['change'])} at {q['size']}^3" for q in got)
    return Text(f"the default built with MINB = 1 and with MINB = 2: {regs} registers, "
                f"{p['blocks/SM']} blocks per SM both ways; MINB = 2 changed the rate by "
                f"{ran} ({ladder_source()})")


def capstone_listing() -> Folded:
    """The capstone's kernel body in one folded listing, from the file itself and complete
    from its template line to the end of the main loop: its constants (LDA, A_STAGE,
    A_PER, ...), the block's tile, the thread's outputs (warp tile, z-order lanes), the
    copies' layout (a_m, a_k, a_off, b_col, `issue_tile`), the fragment loads and their
    two sets, the hoisted copies (`issue_first`, `issue_next`), both prologues (with and
    without HOIST) and the main loop with its ring, wait, commit and barrier. Only the
    epilogue (C = alpha * acc + beta * C) is left to the file, so that every name the
    listing uses is defined in it."""
    text = source("capstone", between=("template <int BM, int BN, int BK, int WM",
                                        "filled; they are never used"))
    return Folded(text, f"{KERNELS['capstone'].source}: the whole kernel up to its "
                        "epilogue (click to open)")


def yardsticks(sizes=(2048, 4096)) -> Text:
    """Two yardsticks for the ladder's changes, both from the recorded rows: how much
    the cuBLAS timed beside each ladder row (and beside each MINB = 2 build) moved from
    row to row, and how far MINB = 2 alone moved the capstone where it did not change
    the occupancy (`minb_pairs`)."""
    rungs = ladder(sizes)
    lines = [f"({ladder_source()})"]
    for n in sizes:
        own = cublas_spread([r.rows[n] for r in rungs])
        held = cublas_spread([r.held[n] for r in rungs if r.has_minb])
        if own is None:
            lines.append(f"{n}^3: no cuBLAS rows beside the ladder ({NOT_RECORDED})")
            continue
        line = (f"{n}^3: cuBLAS timed beside the {sum(1 for r in rungs if r.rows[n])} "
                f"ladder rows: {count(own[0])} to {count(own[1])} GFLOP/s, a spread of "
                f"{_spread_pct(own):.1f}%")
        if held:
            line += (f"; beside the MINB = 2 builds: {count(held[0])} to {count(held[1])}, "
                     f"{_spread_pct(held):.1f}%")
        lines.append(line)
    pairs = minb_pairs(sizes)
    shift = recompile_shift(sizes)
    for n in sizes:
        ch = [p["change"] for p in pairs if p["size"] == n]
        if ch:
            # the rule uses one figure per size, the largest shift either way: say which
            lines.append(f"{n}^3: MINB code shift, MINB = 2 against 1 at unchanged occupancy "
                         f"({len(ch)} configurations): {signed(min(ch))} to {signed(max(ch))}; "
                         f"the rule's threshold: ±{shift[n]:.1f}%")
    return Text("\n".join(lines))


def ladder_plot(sizes=(2048, 4096), minb: bool = False):
    """One horizontal bar per step and size, labelled with its % of cuBLAS; each bar's
    own cuBLAS (same run) as a black tick; with `minb`, for the capstone's steps, the
    MINB = 2 build as an orange diamond (off by default: the chapter's first figure
    shows the ladder alone, the section that explains MINB = 2 draws them). A step
    without a recorded row gets no bar but the words `NOT_RECORDED`."""
    from matplotlib.ticker import FuncFormatter
    plt = _plt()
    rungs = ladder(sizes)
    rows = [r.rows[n] for r in rungs for n in sizes if r.rows[n]]
    top = max([_rate(r) for r in rows]
              + [r["reference"]["gflops"]["median"] for r in rows if r.get("reference")]
              + [1.0])
    fig, ax = plt.subplots(figsize=(11, 0.5 * len(rungs) * len(sizes) + 2.2),
                           layout="constrained")
    height = 0.8 / len(sizes)
    colours = ("#9fc5e8", "#3d85c6")
    # The steps before the capstone have no MINB switch (they ask for two blocks as
    # built): the diamonds' legend names them, from the ladder itself.
    no_switch = _no_switch(rungs)
    for k, n in enumerate(sizes):
        for r in rungs:
            row = r.rows[n]
            y = r.index + (k - (len(sizes) - 1) / 2) * height
            if row is None:
                ax.text(0.01 * top, y, f"{n}^3: {NOT_RECORDED}", va="center",
                        fontsize=FONT, color="0.3")
                continue
            g = _rate(row)
            ax.barh(y, g, height * 0.95, color=colours[k % 2], label=f"{n}^3")
            share = lookup.share(row)
            ax.text(0.01 * top, y, f"{n}^3: {count(g)} GFLOP/s, " + (
                        f"{pct(share)} of cuBLAS" if share is not None else "no cuBLAS in its run"),
                    va="center", ha="left", fontsize=FONT, color="k" if k == 0 else "w")
            if row.get("reference"):
                ax.plot([row["reference"]["gflops"]["median"]] * 2,
                        [y - height / 2, y + height / 2], color="k", lw=2)
            if minb and r.has_minb and r.held[n] is not None:
                ax.plot(_rate(r.held[n]), y, marker="D", ms=7, mfc="#e69138", mec="k",
                        ls="none", label="the same step built with MINB = 2 "
                        f"(two blocks per SM; {no_switch} have no MINB switch)")
    ax.set_yticks(range(len(rungs)), [f"{r.label}\n({r.registers} registers, "
                                      f"{r.blocks} block{'s' * (r.blocks != 1)}/SM)"
                                      for r in rungs], fontsize=FONT)
    ax.set_ylim(len(rungs) - 0.5, -0.5)          # first step on top
    ax.set_xlim(0, top * 1.05)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("GFLOP/s (black tick: the cuBLAS timed beside the bar)", fontsize=FONT)
    ax.tick_params(axis="x", labelsize=FONT)
    ax.set_title("From chapter 08's kernel to the capstone, step by step\n"
                 f"({ladder_source()})",
                 fontsize=FONT + 1)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        keep = dict(zip(labels, handles))          # one entry per size and marker
        fig.legend(keep.values(), keep.keys(), fontsize=FONT, loc="outside lower center",
                   ncol=3)
    return fig


def _step_change(r, before, n):
    """(change as timed, change between the MINB = 2 builds) of ladder step `r` against
    the step `before` at n^3, in %; None where a row is missing (or, for the second, where
    neither step has a MINB = 2 build)."""
    held = None
    if r.held[n] and before.held[n] and (r.has_minb or before.has_minb):
        held = 100 * (_rate(r.held[n]) / _rate(before.held[n]) - 1)
    c = (100 * (_rate(r.rows[n]) / _rate(before.rows[n]) - 1)
         if r.rows[n] and before.rows[n] else None)
    return c, held


def step_changes(sizes=(2048, 4096), steps=None, two_blocks: bool = True) -> Table:
    """One row per step of the ladder: its change against the step before at each size
    as timed, the same change between the MINB = 2 builds where one exists (both sizes in
    one cell), and the chapter's verdict on both (`short_verdict`): the numbers of
    `change_plot`, for the reading under it. `steps` (step numbers, such as ("5",)) keeps
    those rows only, to print a step's numbers where the text reads them.
    `two_blocks=False`: the main path's table, one verdict per step (as timed), beside the
    blocks per SM of the binary timed, which the reading of each step needs; the MINB = 2
    builds and the MINB each step was built with are left to the full table."""
    if not two_blocks:
        return _timed_changes(sizes, steps)
    full = ladder(sizes)
    shift = recompile_shift(sizes)
    held_col = f"MINB = 2 ({' / '.join(f'{n}^3' for n in sizes)})"
    rows = []
    for r in full[1:]:
        if steps is not None and r.number not in steps:
            continue
        before = full[r.index - 1]
        got = [_step_change(r, before, n) for n in sizes]
        timed = [c for c, _ in got]
        held = [h for _, h in got] if (r.has_minb or before.has_minb) else []
        row = {"step": r.label, BUILT_WITH: f"MINB = {r.minb}"}
        for n, c in zip(sizes, timed):
            row[f"{n}^3"] = signed(c) if c is not None else NOT_RECORDED
        has_held = any(h is not None for h in held)
        row[held_col] = (" / ".join(signed(h) if h is not None else "-"
                                                   for h in held) if has_held else "-")
        v = short_verdict(verdict(list(zip(sizes, timed)), shift))
        if has_held:
            # both verdicts in one short cell; the title says which is which
            v += " / " + short_verdict(verdict(list(zip(sizes, held)), shift))
        row["verdict"] = v
        rows.append(row)
    # Rows with no MINB = 2 build (part A's steps) print without that column: a column of
    # '-' only would ask the student to read a build that part A does not need.
    if all(row[held_col] == "-" for row in rows):
        cols = ["step", BUILT_WITH, *(f"{n}^3" for n in sizes), "verdict"]
        return Table([{c: row[c] for c in cols} for row in rows], cols,
                     title=f"each step against the one before, {ladder_source()}; {_RULE}")
    cols = ["step", BUILT_WITH, *(f"{n}^3" for n in sizes), held_col, "verdict"]
    return Table(rows, cols, title=f"each step against the one before, as timed and between "
                 f"the MINB = 2 builds (two blocks per SM), {ladder_source()}; {_RULE}; "
                 "verdict: as built / at two blocks")


def _timed_changes(sizes, steps) -> Table:
    """`step_changes(two_blocks=False)`: per step, its blocks per SM, its change as timed
    at each size and the verdict on that change alone."""
    full = ladder(sizes)
    shift = recompile_shift(sizes)
    rows = []
    for r in full[1:]:
        if steps is not None and r.number not in steps:
            continue
        timed = [_step_change(r, full[r.index - 1], n)[0] for n in sizes]
        row = {"step": r.label, "blocks/SM": r.blocks}
        for n, c in zip(sizes, timed):
            row[f"{n}^3"] = signed(c) if c is not None else NOT_RECORDED
        row["verdict"] = short_verdict(verdict(list(zip(sizes, timed)), shift))
        rows.append(row)
    cols = ["step", "blocks/SM", *(f"{n}^3" for n in sizes), "verdict"]
    return Table(rows, cols, title=f"each step against the one before, as timed, "
                 f"{ladder_source()}; {_RULE}")


def short_verdict(v: str) -> str:
    """`verdict`'s words as a table cell: gain, loss or not credited."""
    return {"a gain": "gain", "a loss": "loss", "": "-"}.get(v, "not credited")


# How step_changes and step4_reading read a change, said once in their first line.
_RULE = ("a change no larger than the code shift is not credited")


def minb2_fit(steps=None) -> Text:
    """What ptxas here gives each of the capstone's steps built with MINB = 2 (the
    ladder's second column): registers and spills, one step a line (`steps`: those step
    numbers only). A spill would make the MINB = 2 column compare local-memory traffic,
    not the steps, so the chapter prints this where it first leans on that column."""
    lines = [f"{r.label}, built with MINB = 2: {fit(r.kernel, {**r.step.params, 'MINB': 2})}"
             for r in ladder() if r.has_minb and (steps is None or r.number in steps)]
    return Text(f"(ptxas {compiler.ptxas_version()} on this machine)\n" + "\n".join(lines))


def rule_line(sizes=(2048, 4096), full: bool = True) -> Text:
    """The chapter's rule in three plain lines with its numbers: how far a recompile
    alone moved the capstone (`recompile_shift`, the threshold) beside how far cuBLAS
    moved, what is credited, and the rule worked once (`rule_example`, step 2).
    `yardsticks` gives the ranges behind both. `full=False`: the main path's two lines,
    the threshold and the worked example only (how it was measured is the full form's)."""
    if not full:
        shift = recompile_shift(sizes)
        if any(n not in shift for n in sizes):
            return Text(f"the ladder's threshold: {NOT_RECORDED}")
        at = " and ".join(f"±{shift[n]:.1f}% at {n}^3" for n in sizes)
        return Text(f"({ladder_source()})\n"
                    f"A step counts as a gain or a loss only if it moves the rate by more than "
                    f"{at}, the same way at both sizes (the code shift); otherwise: not "
                    f"credited. For example, {rule_example('2', sizes[0])}")
    rungs = ladder(sizes)
    spreads = [_spread_pct(cublas_spread([r.rows[n] for r in rungs])) for n in sizes]
    held = [_spread_pct(cublas_spread([r.held[n] for r in rungs if r.has_minb]))
            for n in sizes]
    shift = recompile_shift(sizes)
    if any(s is None for s in spreads) or any(n not in shift for n in sizes):
        return Text(f"the ladder's yardsticks: {NOT_RECORDED}")
    moved = " and ".join(f"{shift[n]:.1f}% apart at {n}^3" for n in sizes)
    # the cuBLAS beside the MINB = 2 builds is a second set of rows (yardsticks)
    beside = ([h for h in held if h is not None] or [None])
    beside = (f" ({max(beside):.1f}% beside the MINB = 2 builds)"
              if beside[0] is not None else "")
    return Text(f"({ladder_source()})\n"
                f"1. The same kernel compiled twice (MINB = 1 and 2, same blocks per SM) ran "
                f"up to {moved} (the MINB code shift); cuBLAS, timed beside every step, moved at most "
                f"{max(spreads):.1f}%{beside}.\n"
                "2. So a step counts as a gain or a loss only if it moves the rate by more "
                "than that, the same way at both sizes; otherwise: not credited.\n"
                f"3. For example, {rule_example('2', sizes[0])}")


def rule_example(step="2", n: int = 2048) -> Text:
    """The chapter's rule worked once, on step `step` at n^3, in one short sentence: its
    change as timed, the rule's threshold at that size, and the reading."""
    full = ladder((n,))
    r = full[position(step)]
    c, _ = _step_change(r, full[r.index - 1], n)
    shift = recompile_shift((n,))[n]
    return Text(f"step {r.number} moved the rate by {signed(c)} at {n}^3, "
                f"{'inside' if abs(c) <= shift else 'outside'} ±{shift:.1f}%: "
                f"{short_verdict(verdict([(n, c)], {n: shift}))}.")


def _read(got, sizes, shift, minb: bool) -> str:
    """'+x% and +y% as timed: verdict' and, where a MINB = 2 build exists, the same
    between the two-block builds; `got` is [(as timed, between the MINB = 2 builds)] per
    size of `sizes`."""
    def one(values, what):
        v = verdict(list(zip(sizes, values)), shift)
        return f"{' and '.join(signed(c) for c in values)} {what}" + (f": {v}" if v else "")
    out = one([c for c, _ in got], "as timed")
    if minb and any(h is not None for _, h in got):
        out += "; " + one([h for _, h in got], "between the MINB = 2 builds")
    return out


def step4_reading(sizes=(2048, 4096), each: bool = True) -> Text:
    """Step 4 one change at a time: for 4a, 4b and 4c their change against the step
    before at each size, as timed and between the MINB = 2 builds where there are any,
    with registers and blocks per SM (of the timed binary, or ptxas here where the
    recording has none, said so); then 4c against step 3, the three changes together.
    Where the recording lacks a split step, one sentence says so instead of its line.
    `each=False`: the last line alone (the steps one by one were printed before)."""
    full = ladder(sizes)
    split = [r for r in full if r.number[-1:].isalpha()]
    at = " and ".join(f"{n}^3" for n in sizes)
    shift = recompile_shift(sizes)

    def line(r, before, name):
        got = [_step_change(r, before, n) for n in sizes]
        return f"{name}: " + _read(got, sizes, shift, r.has_minb or before.has_minb)

    def occupancy(r):
        whose = "timed binary" if r.timed else f"ptxas {compiler.ptxas_version()} here"
        return f"{r.registers} registers ({whose}), {r.blocks} block{'s' * (r.blocks != 1)}/SM"

    lines = [f"(at {at}, {ladder_source()}; {_RULE})"]
    missing = [r.number for r in split if any(r.rows[n] is None for n in sizes)]
    if missing:
        named = " and ".join(filter(None, [", ".join(missing[:-1]), missing[-1]]))
        lines.append(f"Step{'s' * (len(missing) > 1)} {named} "
                     f"{'are' if len(missing) > 1 else 'is'} not in this recording, so it "
                     "cannot yet say which of the three changes brings step 4's gain.")
    for r in split if each else ():
        before = full[r.index - 1]
        text = f"{r.label}: {occupancy(r)}"
        if r.number not in missing and before.number not in missing:
            text += "; " + line(r, before, "against the step before").split(": ", 1)[1]
        lines.append(text)
    if split:
        three = full[split[0].index - 1]
        lines.append(line(split[-1], three, f"{split[-1].number} against {three.number}, "
                          "the three changes together"))
    return Text("\n".join(lines))


def change_plot(sizes=(2048, 4096)):
    """Each step's change against the step before, in %, as timed (bars, one per size)
    and between the MINB = 2 builds (diamonds), on top of two yardsticks from the same
    recording: the row-to-row spread of the cuBLAS timed beside the ladder (grey: timing
    noise) and, behind each size's bars, the band of changes the chapter does not credit,
    from minus to plus
    the recompile shift at that size (`recompile_shift`)."""
    plt = _plt()
    rungs = ladder(sizes)[1:]
    full = ladder(sizes)
    fig, ax = plt.subplots(figsize=(11, 0.5 * len(rungs) * len(sizes) + 3),
                           layout="constrained")
    # the larger of the two spreads, beside the ladder rows and beside the MINB = 2 builds
    noise = max((_spread_pct(cublas_spread(rows)) or 0) for n in sizes
                for rows in ([r.rows[n] for r in full],
                             [r.held[n] for r in full if r.has_minb]))
    # The chapter's rule, per size: a change no larger than the recompile shift at that
    # size, either way, is not credited. Each size's bars sit on their own band.
    shift = recompile_shift(sizes)
    bands = ("#fce5cd", "#f9cb9c")
    ax.axvspan(-noise, noise, color="0.8", zorder=1,
               label=f"timing noise: cuBLAS rows up to {noise:.1f}% apart, either way")
    ax.axvline(0, color="k", lw=0.8, zorder=2)
    height = 0.8 / len(sizes)
    colours = ("#9fc5e8", "#3d85c6")
    for k, n in enumerate(sizes):
        for i, r in enumerate(rungs):
            y = i + (k - (len(sizes) - 1) / 2) * height
            before = full[r.index - 1]
            c, held = _step_change(r, before, n)
            if n in shift:
                ax.fill_betweenx([y - height / 2, y + height / 2], -shift[n], shift[n],
                                 color=bands[k % 2], lw=0, zorder=0,
                                 label=f"{n}^3: within ±{shift[n]:.1f}%, the MINB code "
                                       "shift: not credited")
            if held is not None:
                ax.plot(held, y, marker="D", ms=7, mfc="#e69138", mec="k", ls="none",
                        zorder=5, label="between the MINB = 2 builds (two blocks per SM)")
            if c is not None:
                ax.barh(y, c, height * 0.95, color=colours[k % 2], zorder=3,
                        label=f"{n}^3, as timed")
                # the label beyond the bar, and beyond a diamond just past its end
                end = max(c, held) if held is not None and c >= 0 and held - c < 1.5 else c
                if c < 0 and held is not None and c - held < 1.5:
                    end = min(c, held)
                ax.text(end + (0.45 if c >= 0 else -0.45), y, f"{c:+.1f}%", va="center",
                        ha="left" if c >= 0 else "right", fontsize=FONT - 1, zorder=4)
    ax.set_yticks(range(len(rungs)), [r.label for r in rungs], fontsize=FONT)
    ax.set_ylim(len(rungs) - 0.5, -0.5)
    ax.set_xlabel("change against the step before (%)", fontsize=FONT)
    ax.tick_params(axis="x", labelsize=FONT)
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo - 2, hi + 2)
    ax.set_title("What each step changed, against the timing noise and each size's "
                 "MINB code shift\n"
                 f"({ladder_source()})", fontsize=FONT + 1)
    handles, labels = ax.get_legend_handles_labels()
    keep = dict(zip(labels, handles))
    fig.legend(keep.values(), keep.keys(), fontsize=FONT, loc="outside lower center", ncol=2)
    return fig


# The copy and synchronisation instructions the ladder changes; everything else of the
# loop is FFMA, LDS.128 or address arithmetic.
COPY_SYNC = ("LDG", "STS", "LDGSTS", "LDGDEPBAR", "DEPBAR", "BAR")


def step_listing(kernel, params: dict, lds: int = 4) -> list[str]:
    """The main loop of one configuration, cut to what a ladder step changes: every
    copy and synchronisation instruction (`COPY_SYNC`), every 32-bit LDS, and the first
    `lds` LDS.128 (the reads of the first k), in program order; each run of instructions left out becomes
    one line that counts them, FFMAs apart, and names the most frequent others."""
    k = kernel_of(kernel)
    body = analysis.main_loop(compiler.sass(k, k.resolve(params)))
    out, skipped, seen_lds = [], Counter(), 0

    def flush():
        if skipped:
            n = sum(skipped.values())
            ffma = skipped.pop("FFMA", 0)
            rest = ", ".join(f"{k} x{v}" for k, v in skipped.most_common(3))
            parts = [f"{ffma} FFMA"] if ffma else []
            parts += [rest] if rest else []
            out.append(f"      ... {n} instruction{'s' if n > 1 else ''} left out: "
                       + "; ".join(parts) + (", ..." if len(skipped) > 3 else ""))
            skipped.clear()

    for addr, _, text in body:
        op = text.split()[0]
        # a 32-bit LDS in these loops is never a fragment read: show it, so the text can
        # say what it is
        shown = op.split(".")[0] in COPY_SYNC or op == "LDS"
        if op == "LDS.128" and seen_lds < lds:
            seen_lds += 1
            shown = True
        if shown:
            flush()
            out.append(f"/*{addr:04x}*/  {text}")
        else:
            # LDS.128 keeps its width (the fragments); other opcodes count by family
            skipped[op if op == "LDS.128" else op.split(".")[0]] += 1
    flush()
    return out


class StepSass:
    """One ladder step's evidence: the main-loop instruction counts of the step (and of
    the steps it is set against) as a table, then listings of loops cut to their
    copies, waits, barriers and first LDS.128 (`step_listing`): (title, lines) each."""

    def __init__(self, table: Table, listings: list[tuple[str, list[str]]]):
        self.table, self.listings = table, listings

    @property
    def listing(self) -> list[str]:
        """The lines of the last listing (the step's own)."""
        return self.listings[-1][1] if self.listings else []

    def __repr__(self):
        return "\n\n".join([repr(self.table)] + [f"{t}\n" + "\n".join(lines)
                                                 for t, lines in self.listings])

    def _repr_html_(self):
        import html
        return self.table._repr_html_() + "".join(
            f"<p><b>{html.escape(t)}</b></p><pre>{html.escape(chr(10).join(lines))}</pre>"
            for t, lines in self.listings)


def minb_loops(hide_wait: bool = False, listed=(1, 2)) -> StepSass:
    """What the MINB code shift is made of: the capstone's default built with MINB = 1 and
    with MINB = 2 (the same source; both fit two blocks per SM), their main loops' counts
    (registers of the binaries timed in the ladder's run) and the two loops cut as
    `step_listing` cuts them, one above the other (whole lines, none cut off), from ptxas
    here. `hide_wait`: the wait's count masked (`hide_wait_count`), as in `step_sass`.
    `listed`: the MINB of the builds whose loops are listed (the MINB = 1 build's loop is
    step 7's, which `step_sass(7)` lists already)."""
    d = KERNELS["capstone"].resolve(None)
    timed = {m: _timed_registers(*(p["rows"][i] for p in minb_pairs()
                                   if p["configuration"] == "the default"))
             for i, m in enumerate((1, 2))}
    rows = [{"build": f"the default, MINB = {m}",
             **_loop_counts("capstone", {**d, "MINB": m}, timed[m])} for m in (1, 2)]
    table = Table(rows, list(rows[0]), title="the capstone's default, main loop, one iteration: "
                  f"instruction counts from the SASS of ptxas {compiler.ptxas_version()} on this machine "
                  f"(sm_90); registers and blocks/SM of the binaries timed ({ladder_source()})")
    mask = hide_wait_count if hide_wait else list
    why = " (the wait's count hidden: the pipeline exercise asks for it)" if hide_wait else ""
    return StepSass(table, [(f"The main loop built with MINB = {m}: copies, waits, barriers "
                             f"and the LDS.128 of the first k{why}",
                             mask(step_listing("capstone", {**d, "MINB": m}))) for m in listed])


def hide_wait_count(lines: list[str]) -> list[str]:
    """A listing with the count of each `DEPBAR.LE SB0, n` replaced by `0x?`: the
    pipeline exercise asks for that count, so listings shown before it must not give it."""
    return [re.sub(r"(DEPBAR\.LE\s+SB0,\s*)0x[0-9a-fA-F]+", r"\g<1>0x?", ln) for ln in lines]


def step_sass(step, since=None, listing=True, hide_wait: bool = False) -> StepSass:
    """Ladder step `step` (its number: 3, "4a", ...) in the SASS (sm_90, ptxas here): the
    main loop's instruction counts (one iteration: BK values of k) of steps `since`..`step`
    (default: the step before and this one), with the registers and blocks per SM of the
    binary that was timed, then loops cut to the instructions the ladder changes
    (`step_listing`): this step's (`listing=True`), none (False), or those of the steps
    numbered in a tuple. `hide_wait`: the wait's count masked (`hide_wait_count`), for
    listings shown before the exercise."""
    rungs = ladder((4096,))
    i = position(step)
    first = max(0, i - 1) if since is None else position(since)
    rows = [{"step": r.label, **_loop_counts(r.kernel, r.step.params, r.registers)}
            for r in rungs[first:i + 1]]
    note = _registers_note(rungs[first:i + 1])
    here = [r.number for r in rungs[first:i + 1] if not r.timed]
    # From step 4a on the loop has no LDG and no STS: columns of zeros only, left out.
    gone = [c for c in ("LDG", "STS") if not any(r[c] for r in rows)]
    table = Table(rows, [c for c in rows[0] if c not in gone],
                  title="main loop, one iteration: instruction counts from "
                  f"the SASS of ptxas {compiler.ptxas_version()} on this machine (sm_90); registers and "
                  f"blocks/SM of the compiled kernel that was timed ({ladder_source()})"
                  + (f" (of ptxas on this machine for step{'s' * (len(here) > 1)} {', '.join(here)}, "
                     "not in the recording)" if here else "")
                  + (f"\n{note}" if note else "")
                  + (f"; no {' and no '.join(gone)} in these loops" if gone else ""))
    shown = (i,) if listing is True else () if listing is False else tuple(map(position, listing))
    mask = hide_wait_count if hide_wait else list
    why = " (the wait's count hidden: the pipeline exercise asks for it)" if hide_wait else ""
    return StepSass(table, [(f"Step {rungs[j].number}'s main loop: copies, waits, barriers "
                             f"and the LDS.128 of the first k{why}",
                             mask(step_listing(rungs[j].kernel, rungs[j].step.params)))
                            for j in shown])


def step4_code(steps=("4a", "4c")) -> Stacked:
    """Steps 4a, 4b and 4c as code, each folded, each as its difference from the step
    before (`ch09_split`, from the very texts that were timed; the wait's count shown as
    `?`): 4a from step 3's kernel (the copies), 4b from 4a (where a thread's outputs lie,
    and its fragment reads), 4c from 4b (the end of its loop). `steps`: which of them,
    in that order, so that each step's unit on the main path shows its own."""
    diffs = {
        "4a": lambda: Folded(ch09_split.step4a_diff(), "<b>Step 4a against step 3</b>: the "
                             "copies by cp.async (lines with - are step 3's, lines with + "
                             "step 4a's)"),
        "4b": lambda: Folded(ch09_split.step4b_diff(), "<b>Step 4b against step 4a</b>: where "
                             "a thread's outputs lie, and its fragment reads (lines with - "
                             "are step 4a's, lines with + step 4b's)"),
        "4c": lambda: Folded(ch09_split.step4c_diff(), "<b>Step 4c against step 4b</b>: the "
                             "second set of fragments, and the wait and barrier moved to the "
                             "last k"),
    }
    return Stacked(*(diffs[s]() for s in steps))


def warp_tile_code() -> Code:
    """Step 4b's warp tiles in the capstone's source: the lines that place a thread's
    outputs (its warp's region, then the z-order lane grid inside it), to read beside
    `warp_tiles`, which is drawn from the same expressions (`lane_outputs`)."""
    return code("capstone", ("const int t = threadIdx.x", "const int bn ="))


def copy_waits(steps=("3", "4a")) -> str:
    """Where the warps of each ladder step wait for the tiles they copy, read from the
    SASS of its main loop (ptxas here). LDG + STS (step 3): the first instruction that
    reads a register an LDG filled, and the instructions and FFMAs since that LDG; the
    warp stalls there (long scoreboard) until the load has arrived. cp.async (step 4a):
    no LDG in the loop, so no register waits for global memory; the one wait for the
    copies is the DEPBAR, and the instructions and FFMAs from the step's last LDGSTS to
    it (with 2 stages it waits for this very step's copies)."""
    from gemm_kernels.exercises.ch08_checks import loop_loads
    rungs = ladder((4096,))
    lines = []
    for step in steps:
        r = rungs[position(step)]
        k = kernel_of(r.kernel)
        sass = compiler.sass(k, k.resolve(r.step.params))
        ops = [f for _, f, _ in analysis.main_loop(sass)]
        n = len(ops)
        used = [ld for ld in loop_loads(sass).loads if ld.use is not None]
        if used:
            ld = min(used, key=lambda ld: ld.ffma)
            lines.append(f"{r.label}: {len(used)} LDG per iteration. The first instruction that "
                         f"reads what one loaded, an {ops[ld.use]}, comes "
                         f"{(ld.use - ld.at) % n} instructions ({ld.ffma} FFMAs) after it: "
                         "there the warp waits for global memory.")
            continue
        copies = [i for i, f in enumerate(ops) if f.startswith("LDGSTS")]
        waits = [i for i, f in enumerate(ops) if f.startswith("DEPBAR")]
        if not copies or not waits:
            lines.append(f"{r.label}: no LDG and no cp.async wait in the main loop.")
            continue
        last, wait = copies[-1], next((w for w in waits if w > copies[-1]), waits[0] + n)
        ffma = sum(ops[i % n] == "FFMA" for i in range(last + 1, wait))
        lines.append(f"{r.label}: no LDG per iteration, so no instruction reads a register "
                     f"filled from global memory. The copies ({len(copies)} LDGSTS) go "
                     f"straight to shared memory; the one wait for them, the DEPBAR, comes "
                     f"{wait - last} instructions ({ffma} FFMAs) after the last of them.")
    return "\n".join(lines) + f"\n(main loops compiled by ptxas {compiler.ptxas_version()} on this machine)"


# ------------------------------------------------------------------ bank model vs counters

def _zorder_model(pad: int, zorder: bool) -> tuple[int, int]:
    """Bank-model wavefronts of one warp of 09_zorder.cu at 128 x 128 x 8: (reads per k,
    writes per tile: the four STS.32 of A and the STS.128 of B)."""
    layout = "zorder" if zorder else "rowmajor"
    reads = sum(banks.analyse(f(layout, half=h), 16).wavefronts
                for f in (ch07_09_patterns.a_read, ch07_09_patterns.b_read) for h in (0, 1))
    a = sum(banks.analyse(ch07_09_patterns.a_store(PAD=pad, s=s)).wavefronts for s in range(4))
    b = banks.analyse([16 * lane for lane in range(banks.WARP)], 16).wavefronts
    return reads, a + b


def _warps(kernel: str, params: dict, shape) -> int:
    """Warps in the whole launch of one configuration at `shape` (the registry's grid)."""
    k = KERNELS[kernel]
    gx, gy, gz = k.grid(params, shape)
    tx, ty, tz = k.threads(params)
    return gx * gy * gz * tx * ty * tz // banks.WARP


def _zorder_step(params: dict) -> str:
    """The ladder's step number that runs 09_zorder.cu at `params` as it is (not as a
    variant), or '-' where no step does."""
    for number, step in zip(step_numbers(), ladder_steps()):
        if (step.kernel == "zorder" and step.variant is None
                and KERNELS["zorder"].resolve(step.params) == params):
            return number
    return "-"


def zorder_counters() -> Table:
    """The four layouts of 09_zorder.cu at 128 x 128 x 8 (with the ladder step each one
    is): shared-memory wavefronts the bank model predicts for the whole launch, next to
    Nsight Compute's counts of the recorded profile (1024^3)."""
    rows, seen = [], []
    for pad in (0, 4):
        for z in (False, True):
            p = KERNELS["zorder"].resolve({"BM": 128, "BN": 128, "BK": 8, "PAD": pad, "ZORDER": z})
            r = profile.counters("zorder", p)
            seen.append(r)
            shape = tuple(r["shape"]) if r else profile.GEMM_SHAPE
            warps, K = _warps("zorder", p, shape), shape[2]
            per_k, per_tile = _zorder_model(pad, z)
            m = r["metrics"] if r else {}
            rows.append({"PAD": pad, "ZORDER": z, "ladder step": _zorder_step(p),
                         "loads: model": count(warps * K * per_k),
                         "loads: counted": count(m.get(profile.SHARED[0])),
                         "load conflicts": count(m.get(profile.SHARED[2])),
                         "stores: model": count(warps * -(-K // p["BK"]) * per_tile),
                         "stores: counted": count(m.get(profile.SHARED[1])),
                         "store conflicts": count(m.get(profile.SHARED[3]))})
    return Table(rows, list(rows[0]), title="shared-memory wavefronts at 1024^3: bank model "
                 f"(live) and Nsight Compute ({records.rows_label(seen)})")


def _a_copy_wavefronts(c: dict, warp: list[dict], a_k: str, a_m: str, lda: int) -> int:
    """Bank-model wavefronts of a warp's 4-byte copies of A into one tile, each float
    to word a_k * lda + a_m of the transposed tile."""
    return sum(banks.analyse([4 * (evaluate(a_k, {**e, "i": i}) * lda
                                   + evaluate(a_m, {**e, "i": i})) for e in warp], 4).wavefronts
               for i in range(c["A_PER"]))


def a_copy_padding(params: dict | None = None) -> Text:
    """Why the capstone keeps part A's padded rows: the bank model's wavefronts for one
    4-byte cp.async copy of A by warp 0, into rows of LDA = BM + 4 floats (as built) and
    into rows of BM floats (no pad)."""
    p = KERNELS["capstone"].resolve(params)
    c, threads = _capstone_threads(p)
    code = code_only(KERNELS["capstone"].source_text())
    lam = braced(code, code.index("issue_tile"))
    a_k, a_m = _assigned(lam, "k"), _assigned(lam, "m")
    per = {lda: _a_copy_wavefronts(c, threads[:32], a_k, a_m, lda) / c["A_PER"]
           for lda in (c["LDA"], c["BM"])}
    return Text("one 4-byte copy of A by a warp, wavefronts in the bank model: "
                f"{per[c['LDA']]:g} into rows of {c['LDA']} floats (as built), "
                f"{per[c['BM']]:g} into rows of {c['BM']} (no pad)")


def capstone_model(params: dict | None = None) -> dict:
    """Bank-model wavefronts of capstone warp 0 (stage 0, k = 0): `read_per_k`, its
    LDS.128 of one k (for every sub-tile, the 4 A values of its rows and the 4 B values
    of its columns: the rows and columns `lane_outputs` gives the lane), and for the
    cp.async copies of one tile, with the destinations of the kernel's `issue_tile`,
    `a_copies` / `a_copy_wavefronts` (A transposed to As[k][m], 4 bytes a lane) and
    `b_copies` / `b_copy_wavefronts` (B to Bs[k][n], 16 bytes a lane): instructions
    and the wavefronts of their writes into shared memory."""
    p = KERNELS["capstone"].resolve(params)
    c, threads = _capstone_threads(p)
    warp = threads[:32]
    outs = lane_outputs(p)[:32]
    b_base = c["STAGES"] * c["BK"] * c["LDA"]       # Bs follows every stage of As
    firsts = [[sorted(set(axis))[::4] for axis in zip(*cells)] for cells in outs]
    reads = sum(banks.analyse([4 * f[0][i] for f in firsts], 16).wavefronts
                for i in range(c["MI"]))
    reads += sum(banks.analyse([4 * (b_base + f[1][j]) for f in firsts], 16).wavefronts
                 for j in range(c["NJ"]))
    code = code_only(KERNELS["capstone"].source_text())
    lam = braced(code, code.index("issue_tile"))
    a_m, a_k = _assigned(lam, "m"), _assigned(lam, "k")
    b_k = re.findall(r"\bk\s*=(?!=)\s*([^,;]+);", lam)[1]      # the B loop's k
    a_wf = _a_copy_wavefronts(c, warp, a_k, a_m, c["LDA"])
    b_wf = sum(banks.analyse([4 * (b_base + evaluate(b_k, {**e, "i": i}) * c["BN"] + e["b_n"])
                              for e in warp], 16).wavefronts for i in range(c["B_PER"]))
    return {"read_per_k": reads, "a_copies": c["A_PER"], "a_copy_wavefronts": a_wf,
            "b_copies": c["B_PER"], "b_copy_wavefronts": b_wf}


def _study_metrics(name: str, shape=None) -> dict:
    """{step label: recorded metrics or None} of one ncu study."""
    return {s.label: (r["metrics"] if r else None) for s, r in studies.results(name, shape)}


def _study_source(name: str) -> str:
    """The GPU, runs and days of one study's own rows in the recording shown."""
    return records.rows_label([r for _, r in studies.results(name)])


# The capstone copies A 4 bytes at a time with cp.async.ca (through L1: "cache access")
# and B 16 bytes at a time with cp.async.cg (L2 only: "cache bypass"), so Nsight
# Compute's per-instruction LDGSTS counters split cleanly into the copies of A and of B.
_SASS_LDGSTS = "smsp__sass_{}_op_ldgsts_cache_{}.sum"
_LD = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
_A_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access.sum"
_ST = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"


def capstone_counters() -> Table:
    """The capstone's shared memory at 1024^3 (the `ch09_ldgsts` study): the bank model
    for each kind of access next to Nsight Compute's count of it. The fragment loads
    (LDS.128: once before the loop and once per k), the cp.async copies of A and of B
    (LDGSTS: instructions, and the wavefronts of their writes into shared memory, with
    what ncu counts as bank conflicts) and STS (none: op_st does not see LDGSTS)."""
    study = studies.get("ch09_ldgsts")
    step = next(s for s in study.steps if s.kernel == "capstone")
    p = KERNELS["capstone"].resolve(step.params)
    mod = capstone_model(p)
    shape = study.shapes[0]
    warps, tiles = _warps("capstone", p, shape), -(-shape[2] // p["BK"])
    m = _study_metrics(study.name).get(step.label)

    def got(name):
        return NOT_RECORDED if m is None else count(m.get(name))

    rows = [{"access": "LDS.128 (fragments): wavefronts",
             "bank model": count(warps * (1 + tiles * p["BK"]) * mod["read_per_k"]),
             "counted": got(_LD), "counter": _LD}]
    for operand, cache, what in (("a", "access", "A, 4-byte copies"),
                                 ("b", "bypass", "B, 16-byte copies")):
        inst = _SASS_LDGSTS.format("inst_executed", cache)
        wf = _SASS_LDGSTS.format("l1tex_data_pipe_lsu_wavefronts_mem_shared", cache)
        conf = _SASS_LDGSTS.format("l1tex_data_bank_conflicts_pipe_lsu_mem_shared", cache)
        rows += [{"access": f"LDGSTS ({what}): instructions",
                  "bank model": count(warps * tiles * mod[f"{operand}_copies"]),
                  "counted": got(inst), "counter": inst},
                 {"access": f"LDGSTS ({what}): wavefronts",
                  "bank model": count(warps * tiles * mod[f"{operand}_copy_wavefronts"]),
                  "counted": got(wf), "counter": wf},
                 {"access": f"LDGSTS ({what}): bank conflicts", "bank model": "0",
                  "counted": got(conf), "counter": conf}]
        if operand == "a":      # what a 4-byte copy of a warp reads: 4 rows of 8 floats
            rows.append({"access": "LDGSTS (A, 4-byte copies): 32-byte sectors read",
                         "bank model": "-", "counted": got(_A_SECTORS),
                         "counter": _A_SECTORS})
    rows.append({"access": "STS: wavefronts (op_st)", "bank model": "0", "counted": got(_ST),
                 "counter": _ST})
    return Table(rows, list(rows[0]), title=f"capstone at {'x'.join(map(str, shape))}: "
                 f"bank model (live) and Nsight Compute ({_study_source(study.name)})")


def a_copy_cost() -> Text:
    """What the capstone's copies cost shared memory, per warp instruction, printed beside
    `capstone_counters` (every counter): its 4-byte cp.async copies of
    A against its 16-byte copies of B, per thread and tile, then the wavefronts of one
    copy as the bank model prices it and as Nsight Compute counted it (the `ch09_ldgsts`
    study at 1024^3)."""
    study = studies.get("ch09_ldgsts")
    step = next(s for s in study.steps if s.kernel == "capstone")
    p = KERNELS["capstone"].resolve(step.params)
    mod = capstone_model(p)
    m = _study_metrics(study.name).get(step.label)
    lines = [f"the capstone at {'x'.join(map(str, study.shapes[0]))}, Nsight Compute "
             f"({_study_source(study.name)})"]
    for operand, cache, what in (("a", "access", "A, 4 bytes a lane"),
                                 ("b", "bypass", "B, 16 bytes a lane")):
        copies = mod[f"{operand}_copies"]
        model = mod[f"{operand}_copy_wavefronts"] / copies
        line = (f"copies of {what}: {copies} per thread and tile; wavefronts per warp "
                f"instruction: bank model {model:g}")
        inst = (m or {}).get(_SASS_LDGSTS.format("inst_executed", cache))
        wf = (m or {}).get(_SASS_LDGSTS.format("l1tex_data_pipe_lsu_wavefronts_mem_shared",
                                               cache))
        line += (f", counted {wf / inst:g} ({count(wf)} for {count(inst)} instructions)"
                 if inst and wf is not None else f", counted: {NOT_RECORDED}")
        lines.append(line)
    return Text("\n".join(lines))


# The counters the chapter reads, with what each says. Nsight Compute records dozens
# more for LDGSTS; some of them (the l1tex__ totals of bank conflicts and the
# smsp__sass_data_bytes of shared memory) do not add up with the per-instruction
# counters below, and nothing in the chapter rests on them, so they are left out.
LDGSTS_READ = (
    ("smsp__sass_inst_executed_op_ldgsts_cache_access.sum", "A: 4-byte copies (warp instructions)"),
    ("smsp__sass_inst_executed_op_ldgsts_cache_bypass.sum", "B: 16-byte copies (warp instructions)"),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access.sum",
     "A: 32-byte sectors read from global memory"),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access_lookup_hit.sum",
     "A: of those, found in L1"),
    ("smsp__sass_l1tex_t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_bypass.sum",
     "B: 32-byte sectors read from global memory"),
    ("smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldgsts_cache_access.sum",
     "A: shared-memory wavefronts written"),
    ("smsp__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts_cache_access.sum",
     "A: of those, booked as bank conflicts"),
    ("smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldgsts_cache_bypass.sum",
     "B: shared-memory wavefronts written"),
    (_ST, "STS: shared-memory wavefronts written"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "STS: of those, booked as bank conflicts"),
)


def ldgsts_counters() -> Table:
    """The `ch09_ldgsts` study (1024^3): the counters of cp.async's LDGSTS that the
    chapter reads (`LDGSTS_READ`), and the shared-store (op_st) ones beside them, for
    chapter 09's z-order kernel (LDG + STS) and the capstone (LDGSTS)."""
    study = _study_metrics("ch09_ldgsts")
    if not any(study.values()):
        return Table([{"what it counts": NOT_RECORDED, **{label: "-" for label in study},
                       "counter": "-"}], ["what it counts", *study, "counter"],
                     title="cp.async (LDGSTS) counters at 1024^3: the "
                     f"ch09_ldgsts study is {NOT_RECORDED}")
    rows = [{"what it counts": what,
             **{label: count((m or {}).get(n)) if m else NOT_RECORDED
                for label, m in study.items()}, "counter": n} for n, what in LDGSTS_READ]
    return Table(rows, ["what it counts", *study, "counter"], title="cp.async (LDGSTS) and "
                 f"shared-store counters at 1024^3, Nsight Compute ({records.recording_label()})")


# ------------------------------------------------------------------ waves

def waves(params: dict | None = None, sizes=(1024, 2048, 4096, 8192),
          kernel: str = "capstone") -> Table:
    """How the blocks of a square problem fill the GPU: tiles (blocks), resident slots
    (SMs x blocks per SM, from the registers of the binary that was timed where the
    recording has it, else ptxas here), waves, and how full the last one is. `kernel`:
    the capstone (chapter 09) or another tiled kernel (chapter 13's wmma_tiled)."""
    k = KERNELS[kernel]
    p = k.resolve(params)
    described = records.described_device()
    sms, gpu = described.get("sm_count"), described.get("name") or "an unnamed GPU"
    timed = (lookup.binary(kernel, p) or {}).get("registers")
    occ = analysis.kernel_occupancy(k, p, registers=timed)
    slots = sms * occ.blocks_per_sm if sms else None
    rows = []
    for n in sizes:
        gx, gy, _ = k.grid(p, (n, n, n))
        blocks = gx * gy
        row = {"size": f"{n}^3", "blocks (tiles)": count(blocks), "SMs": sms or "-",
               "blocks/SM": occ.blocks_per_sm, "slots": count(slots)}
        if slots:
            full, rest = divmod(blocks, slots)
            row |= {"waves": full + (rest > 0),
                    "blocks in the last wave": count(rest or slots),
                    "slots busy over all waves": pct(100 * blocks / (slots * (full + (rest > 0))))}
        rows.append(row)
    return Table(rows, list(rows[0]), title=f"{kernel} {p['BM']} x {p['BN']} tiles on "
                 f"the {sms or 'unknown number of'} SMs of {gpu}, {occ.blocks_per_sm} blocks per SM "
                 f"({occ.registers_per_thread} registers, "
                 f"{'of the compiled kernel that was timed' if timed else 'from ptxas here'})")


# ------------------------------------------------------------------ chapter 08's pipeline

def prefetch_schedule(tiles: int = 4) -> list[dict]:
    """Chapter 08's double buffering as its source writes it, step by step: column 0 is
    the prologue (tile 0 loaded, stored to stage 0, barrier), column t + 1 is loop step t.
    Each step: `loads` (the tile whose global loads go to the registers ra/rb at the top
    of the step, or None after the last tile), `computes` and `compute_stage` (the tile
    and stage the FFMAs read), `stores` and `store_stage` (the tile written from the
    registers into the other stage after the compute), `barriers` (one per step)."""
    cols = [{"label": "before the loop", "loads": 0, "computes": None, "compute_stage": None,
             "stores": 0, "store_stage": 0, "barriers": 1}]
    for t in range(tiles):
        nxt = t + 1 if t + 1 < tiles else None
        cols.append({"label": f"step {t}", "loads": nxt, "computes": t,
                     "compute_stage": t % 2, "stores": nxt,
                     "store_stage": None if nxt is None else nxt % 2, "barriers": 1})
    return cols


def prefetch_timeline(tiles: int = 4):
    """Chapter 08's pipeline over time, as the source intends it: in each step the
    global loads of tile t+1 go to the registers ra/rb first, stay in flight in those
    registers while the FFMAs of tile t read one shared stage, and are stored to the
    other stage afterwards; one __syncthreads() (black bar) closes the step."""
    from matplotlib.patches import Rectangle
    plt = _plt()
    cols = prefetch_schedule(tiles)
    lanes = ["global loads\n(LDG -> ra/rb)", "compute\n(FFMA from shared)",
             "store\n(STS ra/rb -> shared)"]
    colours = {"load": "#f6b26b", "flight": "#fce5cd", "compute": "#6aa84f",
               "store": "#6fa8dc"}
    fig, ax = plt.subplots(figsize=(2.6 * len(cols) + 1.5, 3.6))
    ax.set_xlim(0, len(cols))
    ax.set_ylim(len(lanes), 0)

    def box(x0, w, lane, colour, text, dark=False):
        ax.add_patch(Rectangle((x0, lane + 0.12), w, 0.76, facecolor=colour, edgecolor="0.4"))
        ax.text(x0 + w / 2, lane + 0.5, text, ha="center", va="center", fontsize=FONT - 1,
                color="w" if dark else "k")

    for x, c in enumerate(cols):
        if c["computes"] is None:                        # prologue: load, wait, store
            box(x + 0.03, 0.45, 0, colours["load"], f"tile {c['loads']}")
            box(x + 0.52, 0.42, 2, colours["store"], f"tile {c['stores']}\n-> stage 0")
        else:
            if c["loads"] is not None:
                box(x + 0.03, 0.17, 0, colours["load"], "LDG")
                box(x + 0.20, 0.55, 0, colours["flight"],
                    f"tile {c['loads']} in flight\nin ra/rb")
            box(x + 0.20, 0.55, 1, colours["compute"],
                f"tile {c['computes']}\nstage {c['compute_stage']}", dark=True)
            if c["stores"] is not None:
                box(x + 0.77, 0.20, 2, colours["store"],
                    f"tile {c['stores']}\n-> st. {c['store_stage']}")
        ax.plot([x + 1, x + 1], [0, len(lanes)], color="k", lw=3)
    ax.set_xticks([x + 0.5 for x in range(len(cols))], [c["label"] for c in cols],
                  fontsize=FONT)
    ax.set_yticks([i + 0.5 for i in range(len(lanes))], lanes, fontsize=FONT)
    ax.tick_params(length=0)
    ax.set_title("Chapter 08's double buffering as the source writes it: 2 shared stages, "
                 "the next tile staged in registers\nblack bars: one __syncthreads() per "
                 "step (the store writes the stage everyone finished reading before the "
                 "previous bar)", fontsize=FONT + 1)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ part A at two depths

def zorder_depths(size: int = 2048) -> Table:
    """The four variants of 09_zorder.cu (PAD 0 or 4, ZORDER off or on) at BK = 8 and
    BK = 16, from the recording (measured live with a GPU): GFLOP/s and % of cuBLAS, with
    the registers and spills ptxas here gives each (`fit`)."""
    rows, seen = [], []
    for bk in (8, 16):
        for pad in (0, 4):
            for z in (False, True):
                c = {"BM": 128, "BN": 128, "BK": bk, "PAD": pad, "ZORDER": z}
                try:
                    r = lookup.measure_or_lookup("zorder", (size,) * 3, c)
                except LookupError:
                    r = None
                seen.append(r)
                rows.append({"BK": bk, "PAD": pad, "ZORDER": z,
                             f"ptxas {compiler.ptxas_version()} here": fit("zorder", c),
                             "GFLOP/s": NOT_RECORDED if r is None else count(r["gflops"]["median"]),
                             "% of cuBLAS": "-" if r is None else pct(lookup.share(r))})
    return Table(rows, list(rows[0]), title=f"09_zorder.cu, 128 x 128 tiles, at {size}^3, "
                 + (records.source() if device.is_live() else records.rows_label(seen)))


# ------------------------------------------------------------------ part A's bank pictures

_LAYOUT_NAMES = {"float4": "chapter 08: 8 x 8 outputs in one block",
                 "rowmajor": "2 x 2 sub-tiles of 4 x 4, threads row-major",
                 "zorder": "2 x 2 sub-tiles of 4 x 4, z-order lanes"}


def b_reads(layouts=("float4", "rowmajor", "zorder")):
    """The first B LDS.128 of one k, warp 0, lane by bank, in each of `layouts` (the
    bank model of chapter 04 on the addresses of `ch07_09_patterns.b_read`): wavefronts,
    and how many of them are conflicts (beyond one wavefront per quarter-warp phase)."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(layouts), figsize=(6.3 * len(layouts), 6),
                             layout="constrained", squeeze=False)
    for ax, lay in zip(axes[0], layouts):
        a = banks.analyse(ch07_09_patterns.b_read(lay), 16)
        banks.plot_banks(a, ax=ax, title=f"{_LAYOUT_NAMES.get(lay, lay)}\nB LDS.128: "
                         + cost_words(a))
    return fig


OWNER_COLOURS = (HIGHLIGHT, "#3d85c6", "#6aa84f")   # the threads `owners` marks, in order


def owners(threads=(0, 1, 16), BM: int = 128, BN: int = 128):
    """The block's BM x BN tile of C twice, chapter 08's layout ("float4": one 8 x 8
    block per thread) beside step 1's ("rowmajor": four 4 x 4 sub-tiles half a tile
    apart), with the outputs of `threads` filled, each 4 x 4 piece numbered with its
    thread (from `ch07_09_patterns.owned`, the layouts the bank pictures read)."""
    from matplotlib.patches import Patch, Rectangle
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 6.4), layout="constrained")
    titles = {"float4": "Chapter 08: each thread one 8 x 8 block;\nthreads 0 and 1 "
                        "side by side, 8 columns apart",
              "rowmajor": "Step 1: each thread four 4 x 4 sub-tiles, half a tile apart;\n"
                          "threads 0 and 1 now 4 columns apart"}
    for ax, lay in zip(axes, ("float4", "rowmajor")):
        _grid_axes(ax, BM, BN)
        for x in range(0, BN + 1, 8):
            ax.axvline(x, color="0.9", lw=0.5, zorder=0)
        for y in range(0, BM + 1, 8):
            ax.axhline(y, color="0.9", lw=0.5, zorder=0)
        ax.axvline(BN / 2, color="0.5", lw=1, ls="--")
        ax.axhline(BM / 2, color="0.5", lw=1, ls="--")
        for t, colour in zip(threads, OWNER_COLOURS):
            for r, c in sorted({(r // 4 * 4, c // 4 * 4)
                                for r, c in ch07_09_patterns.owned(lay, t, BM, BN)}):
                ax.add_patch(Rectangle((c, r), 4, 4, facecolor=colour, edgecolor="k", lw=0.5))
                ax.text(c + 2, r + 2, str(t), ha="center", va="center", fontsize=FONT - 2,
                        color="white")
        ax.set_xticks(range(0, BN + 1, 16))
        ax.set_yticks(range(0, BM + 1, 16))
        ax.set_xlabel("column in the tile", fontsize=FONT)
        ax.set_ylabel("row in the tile", fontsize=FONT)
        ax.set_title(titles[lay], fontsize=FONT + 1)
    fig.legend([Patch(facecolor=c, edgecolor="k") for c in OWNER_COLOURS[:len(threads)]],
               [f"outputs of thread {t}" for t in threads], loc="outside lower center",
               ncol=len(threads), fontsize=FONT)
    return fig


def cost_words(a) -> str:
    """A warp access's cost in words: '8 wavefronts: 4 phases x 2 (a 2-way conflict in
    each)', '4 wavefronts: 4 phases, no conflict', or the conflicts' total where the
    phases differ."""
    n = len(a.phases)
    phases = f"{n} phase{'s' * (n != 1)}"
    degrees = {p.degree for p in a.phases}
    if a.wavefronts == n:
        return f"{a.wavefronts} wavefronts: {phases}, no conflict"
    if len(degrees) == 1:
        d = degrees.pop()
        return f"{a.wavefronts} wavefronts: {phases} x {d} (a {d}-way conflict in each)"
    return f"{a.wavefronts} wavefronts: {phases}, {a.wavefronts - n} more from conflicts"


def a_stores(pads=(0, 4)):
    """One of the four STS.32 of the transposed A store, warp 0, lane by bank, for rows
    of 128 + PAD floats."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(pads), figsize=(6.5 * len(pads), 5.5),
                             layout="constrained", squeeze=False)
    for ax, pad in zip(axes[0], pads):
        a = banks.analyse(ch07_09_patterns.a_store(PAD=pad))
        banks.plot_banks(a, ax=ax, title=f"A store, rows of {128 + pad} floats: "
                         f"{a.wavefronts} wavefront{'s' * (a.wavefronts != 1)}")
    return fig


# ------------------------------------------------------------------ HOIST along K

def hoist_tiles(K: int, BK: int = 16, hoist: bool = True) -> list[dict]:
    """The tiles of one block's walk along K, as the capstone cuts it: per tile its
    first and last k, whether its copies test k against K (`checked`), and the k it
    covers outside 0..K-1 (`outside`, zero-filled). Without HOIST tile t is k = t*BK..,
    and every copy tests k < K; with HOIST (the kernel's `kb`, read from its source)
    tile t is k = kb + t*BK.., kb = K - tiles*BK, so only tile 0 (which takes the
    remainder) is checked and every later tile is whole."""
    tiles = -(-K // BK)
    code = code_only(KERNELS["capstone"].source_text())
    kb = evaluate(_assigned(code, "kb"), {"K": K, "tiles": tiles, "BK": BK}) if hoist else 0
    out = []
    for t in range(tiles):
        lo = kb + t * BK
        hi = lo + BK - 1
        out.append({"tile": t, "first": lo, "last": hi, "checked": t == 0 if hoist else True,
                    "outside": [k for k in range(lo, hi + 1) if not 0 <= k < K]})
    return out


def hoist_picture(K: int = 72, BK: int = 16):
    """Both walks along K of `hoist_tiles`, one above the other: tiles as boxes on the k
    axis, k outside 0..K-1 hatched (their copies write zeros), tiles whose copies are
    checked against K in orange, whole tiles (no test, no clamp) in green."""
    from matplotlib.patches import Rectangle
    plt = _plt()
    fig, ax = plt.subplots(figsize=(12, 3.6), layout="constrained")
    lanes = (("without HOIST", False), ("with HOIST", True))
    lo = min(t["first"] for h in (False, True) for t in hoist_tiles(K, BK, h))
    hi = max(t["last"] for h in (False, True) for t in hoist_tiles(K, BK, h)) + 1
    for y, (name, h) in enumerate(lanes):
        for t in hoist_tiles(K, BK, h):
            colour = "#f6b26b" if t["checked"] else "#93c47d"
            ax.add_patch(Rectangle((t["first"], y + 0.15), BK, 0.7, facecolor=colour,
                                   edgecolor="k"))
            for k in t["outside"]:
                ax.add_patch(Rectangle((k, y + 0.15), 1, 0.7, facecolor="white",
                                       edgecolor="0.5", hatch="///", lw=0))
            inside = [k for k in range(t["first"], t["last"] + 1) if 0 <= k < K]
            ax.text((inside[0] + inside[-1] + 1) / 2, y + 0.5, f"tile {t['tile']}\n"
                    + ("checked" if t["checked"] else "whole: no test"),
                    ha="center", va="center", fontsize=FONT - 1)
    for x in (0, K):
        ax.axvline(x, color="crimson", lw=2)
    ax.text(0.5, -0.05, "k = 0", color="crimson", ha="left", va="bottom", fontsize=FONT)
    ax.text(K + 0.5, -0.05, f"k = K = {K}", color="crimson", ha="left", va="bottom",
            fontsize=FONT)
    ax.set_xlim(lo - 2, hi + 2)
    ax.set_ylim(len(lanes) + 0.05, -0.35)
    ax.set_yticks([y + 0.5 for y in range(len(lanes))], [n for n, _ in lanes], fontsize=FONT)
    ax.set_xlabel(f"k (BK = {BK}); hatched: k outside the matrix, copied as zeros",
                  fontsize=FONT)
    ax.tick_params(axis="x", labelsize=FONT)
    ax.set_title(f"One block's walk along K = {K}: HOIST moves the remainder K % BK = "
                 f"{K % BK} into tile 0, so only tile 0 tests k; every later tile is whole",
                 fontsize=FONT + 1)
    return fig


# ------------------------------------------------------------------ code excerpts

class Code(Markdown):
    """A piece of CUDA source shown with syntax highlighting (a Markdown code block)."""

    def __new__(cls, text: str, caption: str = ""):
        body = f"```cpp\n{text.rstrip()}\n```"
        return super().__new__(cls, (f"*{caption}*\n\n" if caption else "") + body)


def _lines_of(text: list[str], start: str, end: str | None, name: str) -> tuple[int, int]:
    """First and last line (0-based) of the piece of `text` from the first line holding
    `start` to the next line holding `end`, or, without `end`, to the end of the brace
    block that the start line opens (the start line alone if it opens none)."""
    first = next((i for i, l in enumerate(text) if start in l), None)
    if first is None:
        raise ValueError(f"{start!r} is not in {name}")
    if end is not None:
        last = next((i for i in range(first, len(text)) if end in text[i]), None)
        if last is None:
            raise ValueError(f"{end!r} is not in {name} after {start!r}")
        return first, last
    depth, opened = 0, False
    for i in range(first, len(text)):
        line = re.sub(r"//.*", "", text[i])
        depth += line.count("{") - line.count("}")
        opened = opened or "{" in line
        if depth <= 0 and (opened or i == first):
            return first, i
    return first, len(text) - 1


def code(kernel: str, *pieces) -> Code:
    """Pieces of `kernel`'s source (a registry name), each a start string (to the end of
    the brace block its line opens) or a (start, end) pair of strings (from the first
    line holding start to the next line holding end); shown one after the other, with
    '// ...' between pieces that are not adjacent. The caption names the file and the
    line numbers."""
    k = KERNELS[kernel]
    text = k.source_text().split("\n")
    spans = [_lines_of(text, *(p if isinstance(p, tuple) else (p, None)), k.source)
             for p in pieces]
    out, prev = [], None
    for first, last in spans:
        chunk = text[first:last + 1]
        indent = min((len(l) - len(l.lstrip()) for l in chunk if l.strip()), default=0)
        if prev is not None and first != prev + 1:
            out.append("// ...")
        out += [l[indent:] for l in chunk]
        prev = last
    where = ", ".join(f"{a + 1}-{b + 1}" for a, b in spans)
    return Code("\n".join(out), f"{k.source}, line{'s' if spans else ''} {where}")


# ------------------------------------------------------------------ predict, then check

class Reveal:
    """An answer folded away under a line that says what it is: shown (HTML) as a
    <details> element the reader opens after writing a prediction down, or after trying
    an exercise. Its parts: tables (anything with HTML), pieces of source (`code`),
    figures (drawn into the fold, and closed so that they show only there) and text in
    the notebooks' Markdown (paragraphs, lists, `code`, **bold**, *italic*)."""

    def __init__(self, summary: str, *parts):
        self.summary = summary
        self.parts = tuple(_figure_html(p) if hasattr(p, "savefig") else p for p in parts)

    def _repr_html_(self):
        import html
        return (f"<details><summary><b>{html.escape(self.summary)}</b></summary>"
                f"{''.join(map(_part_html, self.parts))}</details>")

    def __repr__(self):
        return f"{self.summary}\n" + "\n".join(map(str, self.parts))


class _Html(str):
    """Ready HTML (a figure already drawn): shown as it is."""

    def _repr_html_(self):
        return str(self)


def _figure_html(fig) -> _Html:
    """A matplotlib figure as an inline PNG, the figure closed (a notebook would also
    show it outside the fold)."""
    import base64
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=90)
    _plt().close(fig)
    data = base64.b64encode(buf.getvalue()).decode()
    return _Html(f'<img src="data:image/png;base64,{data}" style="max-width:100%"/>')


def _inline_html(text: str) -> str:
    """One paragraph of Markdown: `code`, **bold** and *italic* (the text HTML-escaped)."""
    import html
    out = []
    for i, piece in enumerate(text.split("`")):
        piece = html.escape(piece)
        if i % 2:
            out.append(f"<code>{piece}</code>")
        else:
            piece = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", piece, flags=re.S)
            out.append(re.sub(r"\*(.+?)\*", r"<i>\1</i>", piece, flags=re.S))
    return "".join(out)


def _part_html(part) -> str:
    """One part of a Reveal as HTML: its own HTML where it has some, else its text read
    as Markdown, fenced code blocks as preformatted text."""
    import html
    if hasattr(part, "_repr_html_"):
        return part._repr_html_()
    out = []
    for i, chunk in enumerate(re.split(r"```\w*\n(.*?)\n```", str(part), flags=re.S)):
        if i % 2:
            out.append(f"<pre>{html.escape(chunk)}</pre>")
        else:
            out += [_paragraph_html(p.strip()) for p in chunk.split("\n\n") if p.strip()]
    return "".join(out)


_LIST_ITEM = re.compile(r"(\* |\d+\. )")


def _paragraph_html(text: str) -> str:
    """One paragraph of Markdown as HTML: a list where every line starts with "* " or
    "1. " (numbered ones kept in order), else one <p>."""
    lines = text.split("\n")
    marks = [_LIST_ITEM.match(line) for line in lines]
    if not all(marks):
        return f"<p>{_inline_html(text)}</p>"
    tag = "ol" if text[0].isdigit() else "ul"
    items = "".join(f"<li>{_inline_html(line[m.end():])}</li>" for line, m in zip(lines, marks))
    return f"<{tag}>{items}</{tag}>"


# ------------------------------------------------------------------ the chapter's answers

# The answers of the chapter's exercise and predict prompts, kept here so that the
# notebook's cells show only a call, and nothing of the answer before it is opened.
# Each entry: the fold's summary line, then a function giving its parts (the pictures
# and tables inside are drawn only when the answer is asked for).
_TRIED = "open it once you have tried the exercise"

_ANSWERS = {
    "zorder": (f"The chapter's answer: {_TRIED}", lambda: ("""
In `09_zorder.cu`, `qr` takes lane bits `b4 b1` and `qc` takes `b3 b2 b0`. Other answers
pass too: any other assignment of the three free bits, and the mirrored pairing, `qr` from
`b0` and `qc` from `b1`, where lanes `i` and `i^1` share a chunk of `B` and lanes `i` and
`i^2` a chunk of `A`. Either pairing merges the quarter-warps of every `LDS.128`. The
branch, then warp 0 in both layouts, read from these index expressions:""",
        code("zorder", "if constexpr (ZORDER) {"), zorder_grid(), b_reads())),

    "4c": ("Step 4c: open once you have written your answer down", lambda: ("""
1. *Warps resident* falls to about half of step 4b's: one block of 8 warps per SM instead of two. Step 4c's registers in the ladder are past 128, the most at which two blocks of 256 threads fit.
2. The *barrier* and *short scoreboard* waits shrink. With half the warps, each warp shares its scheduler and the shared-memory pipe with fewer others. The other warps of its block reach the barrier sooner, and its shared-memory loads queue less. So these waits shrink by themselves.
3. No. The share of cycles that issue an instruction falls a little, and the ladder shows step 4c losing rate.

Step 4c's SASS row and its verdict follow below.""",)),

    "pipeline": (f"The answer: {_TRIED}", lambda: ("""
* **The count.** When the wait runs, at the last `k` of iteration `t`, this thread has committed `t + STAGES` groups: `STAGES - 1` before the loop and one in each iteration `0 .. t`. Tile `t + 1`'s group is group `t + 1`. The groups after it, those of tiles `t + 2 .. t + STAGES - 1`, number `STAGES - 2`. The wait leaves only the newest groups in flight, so `cp_async_wait<STAGES - 2>()` returns exactly when tile `t + 1` (and every older tile) has landed, and the later tiles keep flying.
* **The commit.** Commit one group in every iteration, outside the request's `if`: an empty one once `K` has no tile left, so that the count holds to the end.
* **The request** is made when the tile exists: `if (tile + STAGES - 1 < tiles)`.
* **The pointers.** `issue_next` moves `a_src[r]` on by `BK` and `b_src` by `BK * N`.

The capstone's main loop, then the ring with that count:""",
        code("capstone", ("int rs = 0;", "ws = ws + 1")), stage_ring(4), """
Two ways to get the wait wrong. First, `cp.async.wait_group 3`: one group too many left in
flight, so every tile is computed before anything guarantees that its copies have landed.
Second, the right count, but a commit only in the iterations that request a tile: from iteration 5 on,
`K` has no tile left to request, the groups fall behind the iterations, and tiles 6 and 7 are
computed unguarded. Both races usually go unseen, because the copies usually arrive in
time. (The first picture applies the wrong count to the prologue's wait too, as the capstone
would, so tile 0 is not guaranteed either; after the exercise's `cp_async_wait<0>()`
prologue tile 0 would have landed.)""", stage_ring(4, wait=3), stage_ring(4, empty_groups=False), """
Three notes, for after the pictures:

* In the SASS the count shows as `DEPBAR.LE SB0, 0x0` at the 2 stages of steps 4a to 4c, and `0x2` at the 4 of step 5.
* Step 4a's commit inside `if (more)` is safe. With `STAGES = 2` the count is 0, and `wait_group 0` waits for every group committed so far, so an iteration that commits nothing changes nothing.
* The capstone's prologue waits with `STAGES - 2` too, for tile 0 alone. Tiles 1 .. `STAGES - 2` are waited for by the loop's own wait, before anyone reads them, so the block can start on tile 0 while they fly. The exercise's prologue waits for everything: also correct, only a little later to start, once per block.

CUTLASS's multistage mainloop waits with the same count, `cp_async_wait<Stages - 2>()`
(the references).""")),

    "stages": ("The answer: open it once your prediction is written down", lambda: (
        stages_table(here=True), """
Three stages runs slowest: its kernel
needs more registers than two blocks allow, so only one block fits on an SM, and a block
alone has nothing to run while its copies travel. Built with `MINB = 2`, every depth keeps
two blocks, and the three rates lie close together (the lines below): the lost block, not
the depth of the ring, made 3 stages slow.

Two stages, at two blocks per SM, ran below the default by more than the
`MINB` code shift of this GPU at both sizes (the second and last lines). Read it with both
builds, as section A does for step 4c. As built, a loss. Between the `MINB = 2` builds, none: two stages even ran a
little ahead of four (the table). So the ring's depth costs nothing at two blocks; the loss
comes from the code ptxas made for that build.

These registers are those of the binaries that were timed, compiled on the machine
that timed them by its own CUDA. The ptxas on your machine may
give the two-stage `MINB = 1` build one register more, over the line (the column *ptxas
here* of the table above); then two stages also runs one block per SM, and slowly, when you run it live.""",
        "```\n" + stages_reading() + "\n```")),
}


def answer(name: str) -> Reveal:
    """The chapter's folded answer `name` (one of `ANSWER_NAMES`): the exercise answers
    "zorder" and "pipeline", the predict answers "4c" and "stages"."""
    summary, parts = _ANSWERS[name]
    return Reveal(summary, *parts())


ANSWER_NAMES = tuple(_ANSWERS)


def exercise_references(names=("09_zorder", "09_capstone_step"), rec=None) -> Table:
    """For each exercise of the chapter, the kernel its answer reproduces and is timed
    against (the chapter's own, at the graded configuration), as recorded at the size the
    speed step times: registers of the binary that was timed, blocks per SM, the rate
    with its share of the cuBLAS timed beside it, and the rate an answer must reach; then
    the worked solution, timed with the kernel in one run: its rate, its share of the
    kernel's ('-' where the two rows come from different runs) and its registers. `rec`:
    the recording read (default the one shown; `ladder_recording()` sets the answers
    beside the ladder's GPU)."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.notebook.worked_solutions import pair
    rows, seen = [], []
    for name in names:
        ex = get(name)
        k = KERNELS[ex.kernel]
        p = k.resolve(ex.params)
        try:
            r = lookup.recorded(ex.kernel, (ex.time_size,) * 3, p, rec=rec)
        except LookupError:
            r = None
        regs = ((r or {}).get("binary") or {}).get("registers")
        sol = pair(name, (ex.time_size,) * 3, rec=rec)[0]
        seen += [r, sol]
        rows.append({"exercise": name,
                     "timed against": f"{k.source}, the exercise's configuration",
                     "registers (timed)": regs if regs is not None else "-",
                     "blocks/SM": analysis.kernel_occupancy(k, p, registers=regs).blocks_per_sm,
                     f"GFLOP/s at {ex.time_size}^3 (% of cuBLAS)": _rate_cell(r),
                     "an answer must reach": "-" if r is None else
                     f"{count(ex.speed * _rate(r))} ({ex.speed:.0%})",
                     "worked solution (% of cuBLAS)": NOT_TIMED if sol is None
                     else _rate_cell(sol),
                     "solution / kernel": "-" if sol is None or r is None or
                     sol.get("run") != r.get("run") else f"{100 * _rate(sol) / _rate(r):.1f}%",
                     "solution's registers": ((sol or {}).get("binary") or {}).get("registers",
                                                                                   "-")})
    return Table(rows, list(rows[0]), title="The kernels the exercises are timed against, and "
                 f"the worked solutions timed beside them ({records.rows_label(seen, rec)})")


def stages_table(size: int = 4096, here: bool = False) -> Table:
    """The capstone's default with 2, 3 and 4 stages, as it is and built with MINB = 2:
    registers and blocks per SM of the binary that was timed (`here`: also the registers
    ptxas gives each here, and the blocks per SM they would allow), the recorded rate at
    size^3 and its change against the default."""
    d = KERNELS["capstone"].resolve(None)
    base = _rate(lookup.recorded("capstone", (size,) * 3, d))
    rows, got = [], []
    for st in (2, 3, 4):
        for minb in (1, 2):
            p = {**d, "STAGES": st, "MINB": minb}
            r = _capstone_row(size, p)
            got.append(r)
            regs = _timed_registers(r)
            extra = {}
            if here:
                local = _here_registers("capstone", p)
                nb = _blocks("capstone", p, local)
                extra = {f"ptxas {compiler.ptxas_version()} here":
                         f"{local}: {nb} block{'s' * (nb != 1)}/SM"}
            rows.append({"STAGES": st, "MINB": minb,
                         "registers": regs if regs is not None else "-",
                         "blocks/SM": _blocks("capstone", p, regs), **extra,
                         f"{size}^3 GFLOP/s": NOT_RECORDED if r is None else count(_rate(r)),
                         "against the default": "-" if r is None else
                         f"{100 * (_rate(r) / base - 1):+.1f}%"})
    return Table(rows, list(rows[0]), title=f"the capstone's default with 2, 3 or 4 stages "
                 f"(registers of the compiled kernel that was timed), {records.rows_label(got)}")


def best_per_depth(sizes=(2048, 4096)) -> Table:
    """The fastest recorded configuration of the capstone with 2, 3 and 4 stages at each
    size, the other tunables free: its tile, warp tile, GROUP and MINB, then the
    registers of the binary that was timed and the blocks per SM they allow (a depth's
    best may win by its tile or its occupancy, not by its depth), and its rate."""
    rows, got = [], []
    for n in sizes:
        for st in (2, 3, 4):
            best = tradeoff.ranked("capstone", n, fixed={"STAGES": st})
            if not best:
                continue
            c, g = best[0]
            r = _capstone_row(n, c)
            got.append(r)
            rows.append({"size": f"{n}^3", "STAGES": st,
                         "tile": f"{c['BM']} x {c['BN']} x {c['BK']}",
                         "warp tile": f"{c['WM']} x {c['WN']}", "GROUP": c["GROUP"],
                         "MINB": c["MINB"], "registers": _timed_registers(r) or "-",
                         "blocks/SM": _row_blocks("capstone", r) or "-", "GFLOP/s": count(g)})
    return Table(rows, list(rows[0]) if rows else ["size"],
                 title=f"the fastest configuration of each depth (registers and blocks/SM of "
                       f"the compiled kernel that was timed), {records.rows_label(got)}")


def stages_registers(size: int = 4096, predict: bool = False) -> Table:
    """What to predict the stage depths from, before their rates: the default with 2, 3
    and 4 stages as built (MINB = 1), the registers of the binary that was timed at
    size^3 and the blocks per SM they allow, and what ptxas here gives each. No rates:
    `stages_table` adds them. `predict`: the registers alone, so that the blocks per SM
    are the reader's to work out (the rest belongs to the answer)."""
    d = KERNELS["capstone"].resolve(None)
    rows, got = [], []
    for st in (2, 3, 4):
        p = {**d, "STAGES": st, "MINB": 1}
        r = _capstone_row(size, p)
        got.append(r)
        regs = _timed_registers(r)
        local = _here_registers("capstone", p)
        nb = _blocks("capstone", p, local)
        rows.append({"STAGES": st, "registers (timed)": regs if regs is not None else "-",
                     "blocks/SM": _blocks("capstone", p, regs),
                     f"ptxas {compiler.ptxas_version()} here":
                     f"{local}: {nb} block{'s' * (nb != 1)}/SM"})
    cols = ["STAGES", "registers (timed)"] if predict else list(rows[0])
    return Table(rows, cols, title=f"the capstone's default with 2, 3 or 4 stages, "
                 f"MINB = 1: registers of the kernel timed at {size}^3, "
                 f"{records.rows_label(got)}")


def default_recompile(size: int) -> float | None:
    """The capstone's default built with MINB = 2 against itself at size^3, in %, from
    the main recording (both builds keep two blocks per SM): the shift a recompile alone
    caused on that GPU, the yardstick for its own tables. None where either is missing."""
    d = KERNELS["capstone"].resolve(None)
    try:
        base, r = (_rate(lookup.recorded("capstone", (size,) * 3, {**d, "MINB": m}))
                   for m in (d["MINB"], 2))
    except LookupError:
        return None
    return 100 * (r / base - 1) if base and r else None


def padding_reading(size: int = 2048, bk: int = 16) -> Text:
    """`zorder_depths` at BK = `bk` read by the chapter's rule: PAD = 4 against PAD = 0
    for each lane order, against the recompile shift of the same GPU
    (`default_recompile`)."""
    shift = default_recompile(size)
    lines = [f"(09_zorder.cu at {size}^3, BK = {bk}: {records.source()})"]
    for z, name in ((False, "row-major lanes"), (True, "z-order lanes")):
        try:
            a, b = (lookup.recorded("zorder", (size,) * 3, {"BM": 128, "BN": 128, "BK": bk,
                                                            "PAD": pad, "ZORDER": z})
                    for pad in (0, 4))
        except LookupError:
            lines.append(f"{name}: {NOT_RECORDED}")
            continue
        c = 100 * (_rate(b) / _rate(a) - 1)
        lines.append(f"{name}, PAD = 4 against PAD = 0: {signed(c)}" +
                     (f": {verdict([(size, c)], {size: abs(shift)})}" if shift is not None else ""))
    if shift is not None:
        lines.append(f"the rule's threshold on this GPU: the default built with MINB = 2 "
                     f"against itself (the MINB code shift) moved by {signed(shift)}")
    return Text("\n".join(lines))


def stages_reading(sizes=(4096, 2048)) -> str:
    """The numbers the solution's reading of `stages_table` rests on, from the recording
    (so that the text and the table round alike): the change against the default of the
    2- and 3-stage builds at MINB = 1, how far apart the three MINB = 2 builds lie, and
    the default built with MINB = 2 against itself: the shift a recompile alone caused at
    unchanged occupancy, from the same runs, so on the same GPU as the losses it judges
    (the ladder's band may come from another GPU)."""
    d = KERNELS["capstone"].resolve(None)

    def rate(size, st, minb):
        try:
            return _rate(lookup.recorded("capstone", (size,) * 3,
                                         {**d, "STAGES": st, "MINB": minb}))
        except LookupError:
            return None

    rows = [lookup.recorded("capstone", (n,) * 3, {**d, "STAGES": st, "MINB": m})
            for n in sizes for st in (2, 3, 4) for m in (1, 2)
            if rate(n, st, m) is not None]
    lines = [f"({records.rows_label(rows)})"]
    for st in (3, 2):
        parts = []
        for n in sizes:
            base, r = rate(n, d["STAGES"], d["MINB"]), rate(n, st, 1)
            parts.append(f"{100 * (r / base - 1):+.1f}% at {n}^3" if base and r else
                         f"{NOT_RECORDED} at {n}^3")
        lines.append(f"{st} stages, MINB = 1, against the default: " + ", ".join(parts))
    parts = []
    for n in sizes:
        rs = [rate(n, st, 2) for st in (2, 3, 4)]
        parts.append(f"{100 * (max(rs) / min(rs) - 1):.1f}% apart at {n}^3" if all(rs) else
                     f"{NOT_RECORDED} at {n}^3")
    lines.append("the three MINB = 2 builds (2, 3 and 4 stages): " + ", ".join(parts))
    parts = []
    for n in sizes:
        c = default_recompile(n)
        parts.append(f"{c:+.1f}% at {n}^3" if c is not None else f"{NOT_RECORDED} at {n}^3")
    lines.append(f"the default ({d['STAGES']} stages) built with MINB = 2, same blocks per SM, "
                 "against itself (the MINB code shift): " + ", ".join(parts))
    return "\n".join(lines)


def h200_rule(sizes=(4096, 2048)) -> Text:
    """The line that opens a section whose tables come from the main recording, not the
    ladder's run: the GPU they were recorded on, and the threshold they are read against
    there, the default built with MINB = 2 against itself on that GPU
    (`default_recompile`), so that no table is judged by another GPU's yardstick."""
    d = KERNELS["capstone"].resolve(None)
    rows = []
    for n in sizes:
        for m in (d["MINB"], 2):
            try:
                rows.append(lookup.recorded("capstone", (n,) * 3, {**d, "MINB": m}))
            except LookupError:
                pass
    shifts = [(n, default_recompile(n)) for n in sizes]
    rule = ", ".join(f"±{abs(c):.1f}% at {n}^3" for n, c in shifts if c is not None)
    rec = records.current()
    if rec is None:
        return Text(f"This section only: {NOT_RECORDED}")
    return Text(f"This section only: recorded on {rec.device['name']}, not "
                "the ladder's GPU; each measurement below names its own runs. Its own "
                f"threshold (the MINB code shift on that GPU, "
                f"{records.rows_label(rows, gpu=False)}): {rule or NOT_RECORDED}")


STEP7_CHOICES = "ch09_step7_choices"   # step 7 at BK = 8 and with one fragment set


def step7_choices(sizes=(2048, 4096)) -> Text:
    """Why the capstone keeps BK = 16 and its second fragment set although neither step
    was credited: step 7 (the capstone's default) against itself at BK = 8 and with one
    fragment set, all from the ladder's run (`STEP7_CHOICES` is timed with it), as built
    (registers and blocks per SM of each binary timed) and between the MINB = 2 builds
    (two blocks each), read by the ladder's rule (`recompile_shift`)."""
    rec = ladder_recording()
    seven = ladder(sizes)[position(7)]
    by_size = {n: studies.results(STEP7_CHOICES, (n,) * 3, rec) for n in sizes}
    shift = recompile_shift(sizes)
    lines = [f"(step 7 and two of its choices undone, {ladder_source()})"]
    for m, how in ((1, "as built (MINB = 1)"), (2, "built with MINB = 2 (two blocks per SM each)")):
        base = seven.rows if m == 1 else seven.held
        others = [(step, {n: row for n in sizes
                          for s, row in by_size[n] if s == step})
                  for step, _ in by_size[sizes[0]] if step.params["MINB"] == m]
        runs = {r.get("run") if r else None for rows in (base, *(o for _, o in others))
                for r in rows.values()}
        lines.append(f"{how}:")
        if len(runs) != 1 or None in runs:
            lines.append("  not timed in the ladder's run")
            continue

        def held(step, rows):
            # As built, the registers decide the blocks per SM: say both.
            regs = _timed_registers(*rows.values())
            if m != 1 or regs is None:
                return ""
            nb = _blocks(studies.step_kernel(step), step.params, regs)
            return f" ({regs} registers, {nb} block{'s' * (nb != 1)}/SM)"

        rates = lambda rows: ", ".join(f"{n}^3 {count(_rate(rows[n]))}" for n in sizes)
        lines.append(f"  step 7: {rates(base)} GFLOP/s{held(seven.step, base)}")
        for step, rows in others:
            changes = [(n, 100 * (_rate(rows[n]) / _rate(base[n]) - 1)) for n in sizes]
            v = verdict(changes, shift)
            lines.append(f"  {step.label.split(', MINB')[0].removeprefix('step 7 ')}: "
                         f"{rates(rows)}{held(step, rows)}: "
                         + " / ".join(signed(c) for _, c in changes) + (f", {v}" if v else ""))
    if shift:
        lines.append("the rule's threshold (the ladder's MINB code shift): "
                     + ", ".join(f"±{shift[n]:.1f}% at {n}^3" for n in sizes if n in shift))
    return Text("\n".join(lines))


# ------------------------------------------------------------------ evidence

def stall_plot(kernels=("zorder", "capstone")):
    """`evidence.stall_plot` of the `stalls` study for `kernels`, without the line that
    names the recording run under it (the caption of the chapter names the recording)."""
    from gemm_kernels.notebook import evidence
    fig = evidence.stall_plot("stalls", kernels=kernels)
    for t in list(fig.texts):
        if t.get_text().startswith("run ") or "no run recorded" in t.get_text():
            t.remove()
    return fig


STEP_STALLS = "ch09_step_stalls"


def numbered(label: str) -> str:
    """A step's label with its number on the ladder ("3. + z-order lanes"), as the
    ladder's tables and pictures write it; the label itself where it is not a step."""
    labels = [st.label for st in ladder_steps()]
    return f"{step_numbers()[labels.index(label)]}. {label}" if label in labels else label


def step_stall_plot(top: int = 7):
    """Where the warps wait at step 3 (z-order), at the three steps of step 4 and at steps
    5 to 7, at 4096^3: `evidence.stall_plot` of the study, each bar named by its step
    number and its blocks per SM ("step 4c / 1 block/SM", on two lines) with a key under the plot (the labels in full would squeeze
    the bars), and without its run line (the chapter's caption names the recording). A
    step the recording has no profile of gets no bar; the key says which. `top` = 7 keeps
    *math pipe throttle* in a colour of its own."""
    import textwrap
    from gemm_kernels.notebook import evidence
    rec = studies.complete_recording(STEP_STALLS)
    fig = evidence.stall_plot(STEP_STALLS, top=top, run_line=False, rec=rec)
    if not fig.axes or not fig.axes[0].get_yticklabels():
        return fig
    ax = fig.axes[0]
    ax.set_title(f"{ax.get_title()}\n({_stalls_source(rec)})", fontsize=ax.title.get_fontsize())
    number = dict(zip((s.label for s in ladder_steps()), step_numbers()))
    shown = [t.get_text() for t in ax.get_yticklabels()]
    # Waits that grow with the warps resident compare only between steps of equal blocks
    # per SM: each bar says how many of its blocks shared an SM (those of the binary timed
    # on the ladder at the profile's size).
    blocks = {r.step.label: r.blocks for r in ladder((4096,))}
    ax.set_yticks(ax.get_yticks(), [
        f"step {number.get(s, s)}" + (f"\n{blocks[s]} block{'s' * (blocks[s] != 1)}/SM"
                                      if s in blocks else "") for s in shown])
    # The value is one warp's average (stalled warp-cycles over the instructions those
    # warps issued); the label says so, as evidence.stall_plot's does.
    ax.set_xlabel(STALL_AXIS)
    key = "; ".join(f"{number.get(s, s)}: {s.removeprefix('+ ')}" for s in shown)
    missing = [number.get(s.label, s.label) for s, r in studies.results(STEP_STALLS, rec=rec)
               if r is None]
    if missing:
        key += (f". Not in this recording: step{'s' * (len(missing) > 1)} "
                f"{', '.join(missing)}")
    lines = textwrap.wrap(key, 120)
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=FONT - 1, va="bottom")
    fig.tight_layout(rect=(0, 0.035 * len(lines) + 0.01, 1, 1))
    return fig


def _profile_rows() -> list[dict]:
    """The rows of the main path's two profiles (part A counted, and the steps' stalls),
    each from its own recording, for the chapter's banner."""
    return [r for name in (PART_A_STALLS, STEP_STALLS)
            for _, r in studies.results(name, rec=studies.complete_recording(name))]


def _stalls_source(rec) -> str:
    """The GPU, runs and days of the step profile's own rows in `rec`."""
    return records.rows_label([r for _, r in studies.results(STEP_STALLS, rec=rec)], rec)


STALL_AXIS = ("warp-cycles stalled per issued instruction: one warp's average wait between "
              "two of its instructions, by reason")

_WAIT = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def _fixed(value, spec: str):
    """`value` written with `spec`, or None where it was not recorded."""
    return None if value is None else spec.format(value)


def step_counters() -> Table:
    """The same steps' occupancy and busy-ness: warps resident (% of the SM's slots),
    issue slots used, FMA pipe busy and the shared-memory pipe busy (all % of peak); then
    the waits for global memory (long scoreboard), at barriers and for shared memory
    (short scoreboard) per issued instruction, as recorded. Each is already one warp's
    average (stalled warp-cycles over the instructions those warps issued), so it is not
    divided again by the warps resident: the waits a warp sees alone (long scoreboard,
    barrier) compare across the steps, those that grow with contention (short scoreboard,
    not selected) only between steps of equal warps resident."""
    from gemm_kernels.notebook import evidence
    waits = {"long scoreboard": "long_scoreboard", "barrier": "barrier",
             "short scoreboard": "short_scoreboard"}
    t = evidence.counters(STEP_STALLS, rec=studies.complete_recording(STEP_STALLS), columns={
        "warps resident, %": "sm__warps_active.avg.pct_of_peak_sustained_active",
        "issue slots used, %": "smsp__issue_active.avg.pct_of_peak_sustained_active",
        "FMA pipe busy, %": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
        "shared pipe busy, %": "l1tex__data_pipe_lsu_wavefronts_mem_shared"
                               ".avg.pct_of_peak_sustained_elapsed",
        **{name: _WAIT.format(key) for name, key in waits.items()},
        "kernel time, ms": ("gpu__time_duration.sum", 1e6),
        "SM clock, MHz": "sm__cycles_elapsed.avg"})
    # the clock Nsight Compute ran the SMs at: cycles elapsed over the kernel's time
    # one precision per column, so that a column reads down without jumps
    rows = [{**r, "step": numbered(r["step"]),
             **{name: _fixed(r[name], "{:.2f}") for name in waits},
             "kernel time, ms": _fixed(r["kernel time, ms"], "{:.2f}"),
             "SM clock, MHz": None if None in (r["SM clock, MHz"], r["kernel time, ms"])
             else f"{r['SM clock, MHz'] / r['kernel time, ms'] / 1e3:,.0f}"} for r in t]
    return Table(rows, list(t.columns), pct_decimals=1,
                 title="Steps 3 to 7 at 4096^3, Nsight Compute at its "
                 "own clock; the waits in warp-cycles per issued instruction (one warp's "
                 f"average); {_stalls_source(studies.complete_recording(STEP_STALLS))}")


PART_A_STALLS = "ch09_part_a_stalls"
_LD_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
_ST_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
_LD_INSTRUCTIONS = "smsp__inst_executed_op_shared_ld.sum"


def part_a_counts() -> Table:
    """Steps 0 to 3 counted by Nsight Compute at 4096^3 on the ladder's GPU, one row per
    step: per shared-load instruction of a warp, the wavefronts it took and how many of
    them were bank conflicts (the bank model's `reads per k` and `read conflicts`, divided
    by the 4 LDS.128 of a k); the share of the shared stores' wavefronts that were
    conflicts; the wait for shared memory (short scoreboard, one warp's average per issued
    instruction, comparable here: all four steps run two blocks per SM), the shared pipe
    busy and the kernel's time under the profiler (at its own clock: the ladder gives the
    rates). A table, so that each quantity reads down its column, step against step."""
    rec = studies.complete_recording(PART_A_STALLS)
    pairs = studies.results(PART_A_STALLS, rec=rec)
    title = (f"(Nsight Compute at 4096^3, {records.rows_label([r for _, r in pairs], rec)}; "
             "short scoreboard in warp-cycles per issued instruction)")
    columns = ["step", "load wavefronts per LDS.128", "of them conflicts",
               "store conflicts", "short scoreboard", "shared pipe busy", "kernel time"]
    rows = []
    for number, (step, row) in zip(step_numbers(), pairs):
        m = (row or {}).get("metrics")
        if not m:
            rows.append({"step": f"{number}. {step.label}",
                         "load wavefronts per LDS.128": NOT_RECORDED})
            continue
        lds = m[_LD_INSTRUCTIONS]
        busy = m["l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"]
        rows.append({
            "step": f"{number}. {step.label}",
            "load wavefronts per LDS.128": f"{m[_LD] / lds:.1f}",
            "of them conflicts": f"{m[_LD_CONFLICTS] / lds:.1f}",
            "store conflicts": pct(100 * m[_ST_CONFLICTS] / m[_ST]),
            "short scoreboard": f"{m[_WAIT.format('short_scoreboard')]:.2f}",
            "shared pipe busy": f"{busy:.0f}%",
            "kernel time": f"{m['gpu__time_duration.sum'] / 1e6:.2f} ms"})
    return Table(rows, columns, title=title)


def issue_evidence() -> Text:
    """What the `stalls` study says about the z-order kernel and the capstone at 4096^3:
    issue slots used, FMA pipe busy, the FFMA share of the capstone's main loop, and what
    they imply for the clock of the timed runs (which the recording does not hold). The
    profile, the device's peak and the rate all come from the recording shown (its label
    is the first line), never the ladder's, which may be another GPU's."""
    rec = {s.label: r for s, r in studies.results("stalls")}
    # the profile, the peak and the rate all from the recording shown, so on one GPU
    lines = [f"profile, FP32 peak and timed rate: {records.recording_label()}"]
    issue_key = "smsp__issue_active.avg.pct_of_peak_sustained_active"
    fma_key = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
    for label in ("chapter 09, z-order", "capstone"):
        m = (rec.get(label) or {}).get("metrics")
        if not m:
            lines.append(f"{label}: {NOT_RECORDED}")
            continue
        lines.append(f"{label:20s} issue slots used {m[issue_key]:.0f}%, FMA pipe busy "
                     f"{m[fma_key]:.0f}%")
    m = (rec.get("capstone") or {}).get("metrics")
    props = records.recorded_device()
    try:
        r = lookup.recorded("capstone", (4096,) * 3)
    except LookupError:
        r = None
    if not (m and props and r):
        return Text("\n".join(lines))
    peak = device.peak_fp32_gflops(props)
    lanes = props["sm_count"] * props["fp32_lanes_per_sm"]
    g, ref = _rate(r), r["reference"]["gflops"]["median"]
    # the SASS of the GPU profiled, whose issue slots the share multiplies
    share = _loop_counts("capstone", KERNELS["capstone"].resolve(None),
                         arch=records.arch())["FFMA share"]
    fma = m[fma_key] / 100
    lines += [
        f"FP32 peak of the {props['name']}: {props['sm_count']} SMs x "
        f"{props['fp32_lanes_per_sm']} lanes x 2 FLOP x {props['sm_clock_mhz']:,.0f} MHz = "
        f"{peak:,.0f} GFLOP/s",
        f"at 4096^3: capstone {g:,.0f} GFLOP/s = {100 * g / peak:.0f}% of it, cuBLAS "
        f"{ref:,.0f} = {100 * ref / peak:.0f}%",
        # one decimal, so that the product can be checked by hand against its factors
        f"capstone: issue slots used {m[issue_key]:.1f}% x FFMA share of its loop {share} "
        f"= {m[issue_key] * float(share.rstrip('%')) / 100:.1f}% of the cycles start an FFMA",
        f"clock of the timed runs: at least {g * 1e3 / (2 * lanes):,.0f} MHz (the FMA pipe "
        # the busy share with one decimal, so that the clock checks by hand: rate / (2 x lanes x share)
        f"busy in every cycle); {g * 1e3 / (2 * lanes * fma):,.0f} MHz if it was busy in "
        f"{100 * fma:.1f}% of them, as in the profile; Nsight Compute itself ran it at "
        f"{1e3 * m['sm__cycles_elapsed.avg'] / m['gpu__time_duration.sum']:,.0f} MHz"]
    return Text("\n".join(lines))


def group_table(size: int = 4096) -> Table:
    """GROUP = 1 against GROUP = 8 at each ring depth of the default (HOIST on,
    BK = 16), as it is and built with MINB = 2: registers and blocks per SM of the
    binaries that were timed, and the rates at size^3."""
    d = KERNELS["capstone"].resolve(None)
    rows, seen = [], []
    for st in (2, 3, 4):
        for minb in (1, 2):
            row = {"STAGES": st, "MINB": minb}
            got = {}
            for g in (1, 8):
                p = {**d, "STAGES": st, "MINB": minb, "GROUP": g}
                r = _capstone_row(size, p)
                regs = _timed_registers(r)
                got[g] = r
                seen.append(r)
                row[f"GROUP = {g}: registers, blocks/SM"] = \
                    f"{regs}, {_blocks('capstone', p, regs)}" if regs else "-"
                row[f"GROUP = {g}: GFLOP/s"] = NOT_RECORDED if r is None else count(_rate(r))
            row["GROUP 8 vs 1"] = _change(got[8], got[1])
            rows.append(row)
    return Table(rows, list(rows[0]), title=f"grouped block order at {size}^3 (HOIST on, "
                 f"BK = 16), {records.rows_label(seen)}")


def part_a_table() -> Table:
    """The bank model's wavefronts per k and warp (reads) and per tile copy (the four
    STS.32 of the A store) for chapter 08's layout and the four variants of part A."""
    return ch07_09_patterns.step_table([
        ("chapter 08", "float4", 0), ("step 1: sub-tiles, row-major", "rowmajor", 0),
        ("sub-tiles, z-order, no padding", "zorder", 0), ("step 2: + padding", "rowmajor", 4),
        ("step 3: + z-order", "zorder", 4)],
        # the columns mix two units of time: say which is which where the table is read
        title="bank model, warp 0, 128 x 128 x 8 tile, in wavefronts of the warp: the A "
              "store (4 STS.32) once per tile, the reads (2 + 2 LDS.128) once per k")


def zorder_lane_table(lanes=range(16)) -> Table:
    """The z-order place of `lanes` of warp 0 (09_zorder.cu's own expressions): the lane's
    bits b4..b0, its qr and qc, and whether its neighbours lane^1 (same qr: the same A
    chunk) and lane^2 (same qc: the same B chunk) share them."""
    places = zorder_places(True)[:32]
    rows = []
    for lane in lanes:
        qr, qc = places[lane]
        rows.append({"lane": lane, "b4 b3 b2 b1 b0": " ".join(str((lane >> b) & 1)
                                                             for b in range(4, -1, -1)),
                     "qr": qr, "qc": qc,
                     "qr of lane ^ 1": places[lane ^ 1][0], "qc of lane ^ 2": places[lane ^ 2][1]})
    return Table(rows, list(rows[0]), title="warp 0 of 09_zorder.cu: qr from lane bits b4 b1, "
                 "qc from b3 b2 b0")
