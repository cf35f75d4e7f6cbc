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
  recording has no row, the tables say so in words instead of showing a number.
"""
from __future__ import annotations

import re
from collections import Counter

from gemm_kernels.core import analysis, compiler, device
from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.core.table import Table
from gemm_kernels.exercises.cexpr import code_only, evaluate
# The chapter's checks read the same kernel: one brace matcher (the text inside the
# first {...} from a position) serves both.
from gemm_kernels.exercises.ch09_checks import braced
from gemm_kernels.measure import lookup, profile, records, studies
from gemm_kernels.memory import banks, ch07_09_patterns

NOT_RECORDED = "not recorded yet on this machine's recording"
LADDER = "ch09_ladder"
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


def zorder_grid(BM: int = 128, BN: int = 128):
    """Warp 0 of 09_zorder.cu in the grid of threads (each cell is one thread's place
    (qr, qc), i.e. its 2 x 2 sub-tiles of 4 x 4): row-major and z-order side by side."""
    from matplotlib.patches import Rectangle
    plt = _plt()
    fig, axes = plt.subplots(2, 1, figsize=(11, 6), layout="constrained",
                             gridspec_kw={"height_ratios": [2, 4]})
    titles = ("Row-major: warp 0 is 2 rows x 16 columns of the grid; a half-warp reads "
              "16 different B columns",
              "Z-order: warp 0 is a 4 x 8 block; lanes i and i^1 share a row (same A "
              "words),\nlanes i and i^2 share a column (same B words)")
    for ax, z, title in zip(axes, (False, True), titles):
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
        ax.set_title(title, fontsize=FONT + 1)
    return fig


# ------------------------------------------------------------------ the cp.async ring

def kernel_wait(stages: int) -> int:
    """The count of the capstone's `cp_async_wait<...>()` in its K loop, evaluated for
    `stages`: how many of a thread's copy groups may still be in flight after the wait."""
    code = code_only(KERNELS["capstone"].source_text())
    loop = braced(code, re.search(r"for\s*\(\s*int\s+tile\s*=", code).end())
    expr = re.search(r"cp_async_wait\s*<([^<>;]*)>", loop).group(1)
    return evaluate(expr, {"STAGES": stages})


def ring_schedule(stages: int, tiles: int = 6, wait: int | None = None) -> list[dict]:
    """The capstone's ring, step by step, for `tiles` tiles of K. Column 0 is the
    prologue, column t + 1 is loop step t. Each column: `stage` (per stage: (tile, state)
    or None, state one of 'requested' (issued in this column), 'in flight', 'landed',
    'computing', 'done'), `computes` (the tile computed, or None), `requests`
    ({tile: stage} issued in this column), `landed_before_compute` (has the tile computed
    here been waited for?), `stage_of_compute` and `tile_in_that_stage` (the stage the
    step reads and the tile it holds then), `wait_after` (the wait + barrier closing the
    column: the count, and the tiles certainly landed after it).

    The rule is the kernel's: before the loop tiles 0..STAGES-2 are requested, one
    commit group each; step t requests tile t+STAGES-1 into stage (t-1) % STAGES at
    k = 0 (an empty group once no tile is left), computes tile t in stage t % STAGES,
    and at its last k waits until at most `wait` groups are in flight (default: the
    kernel's own count), then meets the barrier."""
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
        col = {"label": f"step {t}", "computes": t, "requests": {}}
        nxt = t + stages - 1
        if nxt < tiles:
            request(nxt, (t - 1) % stages, col)
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
               show_count: bool = True):
    """The ring drawn over time: one row per shared-memory stage, one column per loop
    step (after the prologue); each cell says which tile the stage holds and what is
    happening to it. A black bar after each column marks the wait + __syncthreads();
    a tile computed before its copies were waited for is marked in red. `show_count`
    False leaves the wait's count out of the title (it is the chapter's exercise)."""
    from matplotlib.patches import Rectangle
    plt = _plt()
    cols = ring_schedule(stages, tiles, wait)
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
                text = f"tile {tile}\n" + ("computing,\nNOT LANDED" if race else
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
    last = tiles - stages + 1     # the first step with no tile left to request
    ax.set_title(f"The cp.async ring with {stages} stages, K = {tiles} tiles: tile t is "
                 f"requested {ahead} step{'s' if ahead > 1 else ''} before it is computed, "
                 "into the stage freed one step earlier\n"
                 + (f"(from step {last} on, K has no tile left to request: the ring drains)\n"
                    if 0 < last < tiles else "")
                 + (f"black bars: cp.async.wait_group {w} (at most {w} groups still in flight) "
                    "then __syncthreads()" if show_count else
                    "black bars: the wait for the next tile, then __syncthreads()"),
                 fontsize=FONT + 1)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ the ladder

def ladder_steps():
    """The steps of the `ch09_ladder` study: chapter 08's kernel, then one change each."""
    return studies.get(LADDER).steps


def _loop_counts(kernel: str, params: dict) -> dict:
    """Main-loop SASS of one configuration, in the families the chapter talks about."""
    s = analysis.summary(kernel, params)
    h = Counter(s["loop_histogram"])
    fam = lambda prefix: sum(v for f, v in h.items() if f == prefix or f.startswith(prefix + "."))
    shown = {"FFMA": h["FFMA"], "LDS.128": h["LDS.128"], "LDG": fam("LDG"), "STS": fam("STS"),
             "LDGSTS": h["LDGSTS"], "LDGDEPBAR": h["LDGDEPBAR"], "DEPBAR": h["DEPBAR"],
             "BAR": h["BAR"]}
    total = sum(h.values())
    occ = analysis.kernel_occupancy(kernel, params)
    return {"registers": s["registers"], "blocks/SM": occ.blocks_per_sm,
            "k per loop": s["params"]["BK"], **shown, "other": total - sum(shown.values()),
            "FFMA share": pct(100 * h["FFMA"] / total)}


# The copy and synchronisation instructions the ladder changes; everything else of the
# loop is FFMA, LDS.128 or address arithmetic.
COPY_SYNC = ("LDG", "STS", "LDGSTS", "LDGDEPBAR", "DEPBAR", "BAR")


def step_listing(kernel: str, params: dict, lds: int = 4) -> list[str]:
    """The main loop of one configuration, cut to what a ladder step changes: every
    copy and synchronisation instruction (`COPY_SYNC`) and the first `lds` LDS.128 (the
    reads of the first k), in program order; each run of instructions left out becomes
    one line that counts them, FFMAs apart, and names the most frequent others."""
    body = analysis.main_loop(compiler.sass(KERNELS[kernel], KERNELS[kernel].resolve(params)))
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
        shown = op.split(".")[0] in COPY_SYNC
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
    the steps it is set against) as a table, then the step's own loop cut to its copies,
    waits, barriers and first LDS.128 (`step_listing`)."""

    def __init__(self, table: Table, title: str, listing: list[str]):
        self.table, self.title, self.listing = table, title, listing

    def __repr__(self):
        return f"{self.table!r}\n\n{self.title}\n" + "\n".join(self.listing)

    def _repr_html_(self):
        import html
        return (self.table._repr_html_() + f"<p><b>{html.escape(self.title)}</b></p><pre>"
                + html.escape("\n".join(self.listing)) + "</pre>")


def step_sass(i: int, since: int | None = None) -> StepSass:
    """Ladder step `i` in the SASS (sm_90, ptxas here): the main loop's instruction
    counts (one trip: BK values of k), registers and blocks per SM of steps `since`..i
    (default: the step before and this one), then step i's loop cut to the instructions
    the ladder changes (`step_listing`)."""
    steps = ladder_steps()
    first = max(0, i - 1) if since is None else since
    rows = [{"step": f"{j}. {steps[j].label}", **_loop_counts(steps[j].kernel, steps[j].params)}
            for j in range(first, i + 1)]
    table = Table(rows, list(rows[0]), title=f"main loop, one trip (sm_90, ptxas "
                  f"{compiler.ptxas_version()} here): instruction counts")
    return StepSass(table, f"Step {i}'s main loop: copies, waits, barriers and the "
                    "LDS.128 of the first k", step_listing(steps[i].kernel, steps[i].params))


def _rate_cell(row) -> str:
    if row is None:
        return NOT_RECORDED
    share = lookup.share(row)
    return f"{count(row['gflops']['median'])}" + (f" ({pct(share)})" if share is not None
                                                 else " (no cuBLAS in its run)")


def _change(row, before) -> str:
    """+7.9%: the rate of a step against the step before it, both from the recording."""
    if row is None or before is None:
        return "-"
    return f"{100 * (row['gflops']['median'] / before['gflops']['median'] - 1):+.1f}%"


def two_blocks(step, row, blocks_per_sm: int, n: int):
    """The step's rate with two blocks per SM: its own row where it already has two,
    else the sweep's row of the same configuration with `MINB = 2` (ptxas held to 128
    registers; None where the sweep has no such row or the kernel has no MINB)."""
    if blocks_per_sm >= 2:
        return row
    if "MINB" not in step.params:
        return None
    try:
        return lookup.recorded(step.kernel, (n,) * 3, {**step.params, "MINB": 2})
    except LookupError:
        return None


def ladder_table(sizes=(2048, 4096), two_blocks_at: int | None = 4096) -> Table:
    """Every step of the ladder: registers and blocks per SM (ptxas here), the main
    loop's FFMA share, and per size the recorded GFLOP/s with its % of the cuBLAS
    measured beside it and the change against the step before. The runs that measured
    the rows are named in the caption (`run_note`).

    Steps that leave only one block per SM mix their change with the occupancy they
    lose; the last two columns (at `two_blocks_at`) set every step at two blocks per SM
    (`two_blocks`), so that a change's own effect can be read apart from the cliff."""
    steps = ladder_steps()
    by_size = {n: studies.results(LADDER, (n,) * 3) for n in sizes}
    rows, held_before = [], None
    for i, step in enumerate(steps):
        loop = _loop_counts(step.kernel, step.params)
        row = {"step": f"{i}. {step.label}", "registers": loop["registers"],
               "blocks/SM": loop["blocks/SM"], "FFMA share": loop["FFMA share"]}
        for n in sizes:
            r = by_size[n][i][1]
            row[f"{n}^3 GFLOP/s (% of cuBLAS)"] = _rate_cell(r)
            row[f"{n}^3 change"] = _change(r, by_size[n][i - 1][1]) if i else "-"
        if two_blocks_at:
            n = two_blocks_at
            held = two_blocks(step, by_size[n][i][1] if n in by_size else None,
                              loop["blocks/SM"], n)
            row[f"{n}^3 at 2 blocks/SM"] = NOT_RECORDED if held is None else \
                count(held["gflops"]["median"]) + ("" if loop["blocks/SM"] >= 2 else " (MINB = 2)")
            row[f"{n}^3 change at 2 blocks/SM"] = _change(held, held_before) if i else "-"
            held_before = held
        rows.append(row)
    note = run_note([p for n in sizes for p in by_size[n]]).replace("\n", "; ")
    return Table(rows, list(rows[0]), title=f"The ladder to the capstone, "
                 f"{records.source()}; registers, blocks/SM and FFMA share from ptxas here. "
                 f"{note[0].upper() + note[1:]}. At 2 blocks/SM: a step with one block per SM "
                 "is replaced by the sweep's row of the same kernel with MINB = 2")


def run_note(pairs) -> str:
    """'measured in run X (command, start time)' for the runs behind these rows; one
    line per run, since rows of different runs each have their own cuBLAS."""
    rec = records.current()
    ids = studies.runs(pairs)
    if not ids:
        return f"no step is recorded yet ({records.source()})"
    info = rec.runs if rec else {}
    lines = [f"run {r}: {info.get(r, {}).get('command', '?')}, started "
             f"{info.get(r, {}).get('started', '?')}" for r in ids]
    head = "measured in one run" if len(ids) == 1 else \
        f"measured in {len(ids)} runs, each step against the cuBLAS of its own run"
    return head + "\n" + "\n".join(lines)


def ladder_plot(sizes=(2048, 4096)):
    """One horizontal bar per step and size, labelled with its % of cuBLAS; each bar's
    own cuBLAS (same run) as a black tick; the runs named under the plot. A step without
    a recorded row gets no bar but the words `NOT_RECORDED`."""
    from matplotlib.ticker import FuncFormatter
    plt = _plt()
    steps = ladder_steps()
    res = {n: studies.results(LADDER, (n,) * 3) for n in sizes}
    rows = [r for n in sizes for _, r in res[n] if r]
    top = max([r["gflops"]["median"] for r in rows]
              + [r["reference"]["gflops"]["median"] for r in rows if r.get("reference")]
              + [1.0])
    fig, ax = plt.subplots(figsize=(12, 0.5 * len(steps) * len(sizes) + 1.5),
                           layout="constrained")
    height = 0.8 / len(sizes)
    colours = ("#9fc5e8", "#3d85c6")
    for k, n in enumerate(sizes):
        for i, (_, row) in enumerate(res[n]):
            y = i + (k - (len(sizes) - 1) / 2) * height
            if row is None:
                ax.text(0.01 * top, y, f"{n}^3: {NOT_RECORDED}", va="center",
                        fontsize=FONT, color="0.3")
                continue
            g = row["gflops"]["median"]
            ax.barh(y, g, height * 0.95, color=colours[k % 2], label=f"{n}^3")
            share = lookup.share(row)
            ax.text(g - 0.01 * top, y, f"{n}^3: " + (f"{pct(share)} of cuBLAS" if share is not None
                                                     else "no cuBLAS in its run"),
                    va="center", ha="right", fontsize=FONT, color="k" if k == 0 else "w")
            if row.get("reference"):
                ax.plot([row["reference"]["gflops"]["median"]] * 2,
                        [y - height / 2, y + height / 2], color="k", lw=2)
            # a step left with one block per SM: where it runs with two (MINB = 2)
            blocks = _loop_counts(steps[i].kernel, steps[i].params)["blocks/SM"]
            held = two_blocks(steps[i], row, blocks, n) if blocks < 2 else None
            if held is not None:
                ax.plot(held["gflops"]["median"], y, marker="D", ms=7, mfc="#e69138",
                        mec="k", ls="none", label="the same step at 2 blocks/SM (MINB = 2)")

    def label(i, step):
        # a step slower than the one before at every size is a negative result
        slower = all(r and b and r["gflops"]["median"] < b["gflops"]["median"]
                     for n in sizes for (_, r), (_, b) in [(res[n][i], res[n][i - 1])]) if i else False
        return f"{i}. {step.label}" + (" (slower here)" if slower else "")
    ax.set_yticks(range(len(steps)), [label(i, s) for i, s in enumerate(steps)],
                  fontsize=FONT)
    ax.set_ylim(len(steps) - 0.5, -0.5)          # first step on top
    ax.set_xlim(0, top * 1.05)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("GFLOP/s (black tick: cuBLAS, measured in the same run as the bar)",
                  fontsize=FONT)
    ax.tick_params(axis="x", labelsize=FONT)
    ax.set_title("From chapter 08's kernel to the capstone, one change per step\n"
                 f"({records.source()})", fontsize=FONT + 1)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        keep = dict(zip(labels, handles))          # one entry per size and marker
        ax.legend(keep.values(), keep.keys(), fontsize=FONT, loc="upper left",
                  bbox_to_anchor=(1.01, 1))
    ax.annotate(run_note([p for n in sizes for p in res[n]]), xy=(0, 0),
                xycoords="axes fraction", xytext=(0, -42), textcoords="offset points",
                va="top", fontsize=FONT - 1)
    return fig


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


def zorder_counters() -> Table:
    """The four layouts of 09_zorder.cu at 128 x 128 x 8: shared-memory wavefronts the
    bank model predicts for the whole launch, next to Nsight Compute's counts of the
    recorded profile (1024^3)."""
    rows = []
    for pad in (0, 4):
        for z in (False, True):
            p = KERNELS["zorder"].resolve({"BM": 128, "BN": 128, "BK": 8, "PAD": pad, "ZORDER": z})
            r = profile.counters("zorder", p)
            shape = tuple(r["shape"]) if r else profile.GEMM_SHAPE
            warps, K = _warps("zorder", p, shape), shape[2]
            per_k, per_tile = _zorder_model(pad, z)
            m = r["metrics"] if r else {}
            rows.append({"PAD": pad, "ZORDER": z,
                         "loads: model": count(warps * K * per_k),
                         "loads: counted": count(m.get(profile.SHARED[0])),
                         "load conflicts": count(m.get(profile.SHARED[2])),
                         "stores: model": count(warps * -(-K // p["BK"]) * per_tile),
                         "stores: counted": count(m.get(profile.SHARED[1])),
                         "store conflicts": count(m.get(profile.SHARED[3]))})
    rec = records.current()
    return Table(rows, list(rows[0]), title="shared-memory wavefronts at 1024^3: bank model "
                 f"(live) and Nsight Compute ({rec.label if rec else 'no recording'})")


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
    a_wf = sum(banks.analyse([4 * (evaluate(a_k, {**e, "i": i}) * c["LDA"]
                                   + evaluate(a_m, {**e, "i": i})) for e in warp], 4).wavefronts
               for i in range(c["A_PER"]))
    b_wf = sum(banks.analyse([4 * (b_base + evaluate(b_k, {**e, "i": i}) * c["BN"] + e["b_n"])
                              for e in warp], 16).wavefronts for i in range(c["B_PER"]))
    return {"read_per_k": reads, "a_copies": c["A_PER"], "a_copy_wavefronts": a_wf,
            "b_copies": c["B_PER"], "b_copy_wavefronts": b_wf}


def _study_metrics(name: str, shape=None) -> dict:
    """{step label: recorded metrics or None} of one ncu study."""
    return {s.label: (r["metrics"] if r else None) for s, r in studies.results(name, shape)}


# The capstone copies A 4 bytes at a time with cp.async.ca (through L1: "cache access")
# and B 16 bytes at a time with cp.async.cg (L2 only: "cache bypass"), so Nsight
# Compute's per-instruction LDGSTS counters split cleanly into the copies of A and of B.
_SASS_LDGSTS = "smsp__sass_{}_op_ldgsts_cache_{}.sum"
_LD = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
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
    rows.append({"access": "STS: wavefronts (op_st)", "bank model": "0", "counted": got(_ST),
                 "counter": _ST})
    return Table(rows, list(rows[0]), title=f"capstone at {'x'.join(map(str, shape))}: "
                 f"bank model (live) and Nsight Compute ({records.recording_label()})")


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

def sm_count() -> int | None:
    """SMs of the GPU the numbers describe: the live one, else the recording's."""
    if device.is_live():
        return device.properties()["sm_count"]
    rec = records.current()
    return rec.device.get("sm_count") if rec else None


def waves(params: dict | None = None, sizes=(1024, 2048, 4096, 8192)) -> Table:
    """How the blocks of a square problem fill the GPU: tiles (blocks), resident slots
    (SMs x blocks per SM, from the registers of the binary that was timed where the
    recording has it, else ptxas here), waves, and how full the last one is."""
    k = KERNELS["capstone"]
    p = k.resolve(params)
    sms = sm_count()
    timed = (lookup.binary("capstone", p) or {}).get("registers")
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
    return Table(rows, list(rows[0]), title=f"capstone {p['BM']} x {p['BN']} tiles on "
                 f"{sms or 'an unknown number of'} SMs, {occ.blocks_per_sm} blocks per SM "
                 f"({'timed binary' if timed else 'ptxas here'}: "
                 f"{occ.registers_per_thread} registers)")


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
    BK = 16, from the recording (measured live with a GPU): GFLOP/s and % of cuBLAS."""
    rows = []
    for bk in (8, 16):
        for pad in (0, 4):
            for z in (False, True):
                c = {"BM": 128, "BN": 128, "BK": bk, "PAD": pad, "ZORDER": z}
                try:
                    r = lookup.measure_or_lookup("zorder", (size,) * 3, c)
                except LookupError:
                    r = None
                rows.append({"BK": bk, "PAD": pad, "ZORDER": z,
                             "GFLOP/s": NOT_RECORDED if r is None else count(r["gflops"]["median"]),
                             "% of cuBLAS": "-" if r is None else pct(lookup.share(r))})
    return Table(rows, list(rows[0]), title=f"09_zorder.cu, 128 x 128 tiles, at {size}^3, "
                 + records.source())
