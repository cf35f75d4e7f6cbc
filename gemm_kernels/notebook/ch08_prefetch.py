"""Chapter 08: where the compiler puts the loads of the next tile, and what that is worth.

Three kinds of evidence, none of them typed in:

* the SASS of the main loop, compiled here (no GPU needed): for every global load, the
  FFMAs issued before the first instruction that uses what it loaded
  (`exercises.ch08_checks.loop_loads`, the measure the exercise is graded on);
* variants of the chapter's kernel, made from 08_double_buffer.cu by one textual change
  each (`VARIANTS`), compiled the same way: which change keeps the loads in flight;
* the recorded sweep of chapters 07 and 08 at one block per SM: the configurations whose
  compiled loop keeps the loads in flight against those where they sink;
* the exercise's answer and the other sources that keep the loads in flight, timed in
  one run beside chapters 07 and 08 at one and at two blocks per SM (`payoff`, rows of
  `timed_variants`), at the chapter's tile and at 128 x 128 x 16, where the chapter's
  own kernel keeps its loads in flight too.

The pictures: the step as the source writes it and as the compiler built it, with the
position of the loads in the step read from the SASS.
"""
from __future__ import annotations

import functools
import re
from statistics import median

from gemm_kernels.core import analysis, compiler, device
from gemm_kernels.core.launch import kernel_of
from gemm_kernels.core.table import Table
from gemm_kernels.notebook.display import Text, loop_listing
from gemm_kernels.exercises.ch08_checks import (CHECK, LoopLoads, check_words,
                                                 in_flight_words, loop_loads, passes)
from gemm_kernels.exercises.ch09_checks import braced

KERNEL = "double_buffer"
FONT = 10

# Changes to 08_double_buffer.cu: (what is replaced, by what), or a function of the text.
_LB = ("__global__ void __launch_bounds__((BM / TM) * (BN / TN))\n",
       "__global__ void __launch_bounds__((BM / TM) * (BN / TN), 2)\n")
_FETCH_CALL = ("fetch_tiles<BM, BN, BK, NT, VEC>(ra, rb, A, B, M, N, K, row0, col0, "
               "(tile + 1) * BK);\n")
_FETCH_IF_HEAD = ("        if (more)   // issue the loads of the next tile now; they land "
                  "while we compute\n            ")
_FETCH_IF = (_FETCH_IF_HEAD + "fetch_tiles", "        fetch_tiles")
_STORE_IF = ("        if (more) store_tiles", "        store_tiles")
# compute first, then fetch, then store: the fetch leaves the top of the step
_FETCH_OUT = (_FETCH_IF_HEAD + _FETCH_CALL, "")
_FETCH_BEFORE_STORE = ("        if (more) store_tiles", "        " + _FETCH_CALL +
                       "        store_tiles")
# loop peeling: the loop runs over all tiles but the last, fetch and store in every step
_ALL_BUT_LAST = ("for (int tile = 0; tile < tiles; ++tile) {",
                 "for (int tile = 0; tile < tiles - 1; ++tile) {")
_NO_MORE = ("        const bool more = tile + 1 < tiles;\n", "")


def _peel_last_tile(text: str) -> str:
    """After the K loop, the last tile's compute (a copy of the loop's k loop, on the
    stage the last tile was stored to): the loop itself then ends with a fetch and a
    store in every step, and no step needs a branch."""
    start = text.index("for (int tile = 0;")
    body = braced(text, start)
    m = re.search(r"#pragma unroll\n\s*for \(int k = 0; k < BK; \+\+k\) \{", body)
    if m is None:
        raise ValueError("variant 'loop peeled': no k loop in the kernel's K loop")
    compute = body[m.start():m.end() + len(braced(body, m.end() - 1)) + 1]
    end = text.index(body, start) + len(body) + 1
    return (text[:end] + "\n    {   // the last tile, peeled off the loop: compute only\n"
            "        const int cur = (tiles - 1) & 1;\n" + compute + "\n    }" + text[end:])


# The chapter's kernel held to two blocks per SM (chapter 07's register budget): the same
# text as `ch06_tiles.with_min_blocks("double_buffer", 2)`, timed under that name.
BUDGET = "+ __launch_bounds__(256, 2)"
# The one the exercise asks for: the loads in flight, two blocks per SM.
WORKING = "without if (more), + __launch_bounds__(256, 2)"
# Other sources that keep the loads in flight at the default tile with this ptxas, all
# at the exercise's register budget.
STORE_ONLY = "if (more) on the store only, + __launch_bounds__(256, 2)"
COMPUTE_FIRST = "compute, then fetch, then store, + __launch_bounds__(256, 2)"
PEELED = "last tile peeled off the loop, + __launch_bounds__(256, 2)"
ALTERNATIVES = (WORKING, STORE_ONLY, COMPUTE_FIRST, PEELED)

# The short name each source goes by in the chapter's text, tables and pictures (the long
# names above are the names its compiled kernel and its recorded rows carry).
NO_IF = "fetch and store without if (more)"
LABELS = {BUDGET: "budget", NO_IF: "no if",
          WORKING: "no if + budget", STORE_ONLY: "if on store + budget",
          COMPUTE_FIRST: "fetch after compute + budget", PEELED: "peeled + budget"}


# Chapters 07's and 08's kernels go by their chapter in the text, tables and pictures,
# under their package names too.
CHAPTER_OF = {"float4": "chapter 07's kernel", KERNEL: "chapter 08's kernel"}


def label(name: str) -> str:
    """The short name of source `name`: chapter 07's and 08's kernels by their chapter
    (under their package names too, "float4" and "double_buffer"), a variant by its
    change."""
    return LABELS.get(name) or CHAPTER_OF.get(name, name)


VARIANTS = {
    "chapter 08's kernel": (),
    BUDGET: (_LB,),
    NO_IF: (_FETCH_IF, _STORE_IF),
    WORKING: (_FETCH_IF, _STORE_IF, _LB),
    STORE_ONLY: (_FETCH_IF, _LB),
    COMPUTE_FIRST: (_FETCH_OUT, _FETCH_BEFORE_STORE, _LB),
    PEELED: (_ALL_BUT_LAST, _NO_MORE, _FETCH_IF, _STORE_IF, _LB, _peel_last_tile),
}


def variant_source(name: str) -> str:
    """08_double_buffer.cu with the changes of variant `name`; each textual change must
    find its text exactly once (a change to the kernel file shows here, not as a silent
    no-op)."""
    text = kernel_of(KERNEL).source_text()
    for change in VARIANTS[name]:
        if callable(change):
            text = change(text)
            continue
        old, new = change
        if text.count(old) != 1:
            raise ValueError(f"variant {name!r}: {old.strip()!r} is not in "
                             f"{kernel_of(KERNEL).source} exactly once")
        text = text.replace(old, new)
    return text


@functools.lru_cache(maxsize=None)
def variant_kernel(name: str):
    """The registry's double_buffer around the variant's source (one object per variant,
    so the compiler's cache serves every call)."""
    if not VARIANTS[name]:
        return kernel_of(KERNEL)
    if name == BUDGET:      # the same text, under the name its timed rows carry
        from gemm_kernels.notebook.ch06_tiles import with_min_blocks
        return with_min_blocks(KERNEL, 2)
    return kernel_of(KERNEL).with_code(variant_source(name), name=f"{KERNEL}: {name}",
                                       source=kernel_of(KERNEL).source)


def _register_variants():
    """Each variant made here (the budget aside: its text is `ch06_tiles`') becomes one
    that a study's step may name (`measure.studies.Step.variant`), by the name its
    kernel and its timed rows carry: the payoff's profile launches these very texts."""
    from gemm_kernels.measure import studies
    for name, changes in VARIANTS.items():
        if changes and name != BUDGET:
            studies.register_variant(f"{KERNEL}: {name}",
                                     functools.partial(variant_kernel, name))


_register_variants()


def _params(kernel, params):
    return kernel_of(kernel).resolve(params)


EXERCISE = "08_double_buffer"


def answer_kernel():
    """The exercise's worked answer (the solution notebook's source, with
    `compute_stage`) as a kernel of the registry, as the grader builds it."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.solutions import solution_text
    from gemm_kernels.exercises.submission import submission_kernel
    return submission_kernel(EXERCISE, get(EXERCISE).kernel,
                             solution_text(EXERCISE[:2], EXERCISE))


def loads(kernel=KERNEL, params: dict | None = None, arch=None) -> LoopLoads:
    """The main loop's global loads and barriers of a kernel (a name, a Kernel, or the
    name of a variant), compiled here for `arch` (default: the GPU the static analysis
    describes). The answer (WORKING) is read from its exact source, the one the grader
    counts: its timed copy writes the FFMAs out instead of calling `compute_stage`, and
    ptxas schedules that copy a few FFMAs apart, so every count the chapter prints is the
    grader's."""
    k = _read(kernel)
    return loop_loads(compiler.sass(k, _params(k, params), arch))


def _read(name):
    """The kernel whose SASS the chapter reads for `name`: the answer's exact source for
    WORKING (see `loads`), a variant's text, or a kernel of the registry."""
    if name == WORKING:
        return answer_kernel()
    return variant_kernel(name) if name in VARIANTS else kernel_of(name)


def variants_table(names=None, params: dict | None = None) -> Table:
    """Per variant: registers, spills, blocks per SM, and how long the compiled loop keeps
    its global loads in flight (fewest FFMAs between a load and the first use of its
    value, out of the FFMAs of one step), and whether that passes the quarter-step
    check."""
    rows = []
    for name in names or VARIANTS:
        k = _read(name)
        p = _params(k, params)
        res = compiler.resources(k, p)
        lp = loop_loads(compiler.sass(k, p))
        occ = analysis.kernel_occupancy(k, p)
        rows.append({"kernel": label(name), "registers": res["registers"],
                     "spills (bytes)": res["spill_stores"], "blocks/SM": occ.blocks_per_sm,
                     "FFMAs per step": lp.ffma,
                     "FFMAs between a global load and its use": lp.fewest,
                     CHECK: check_words(lp),
                     "barriers per step": lp.barriers})
    return Table(rows, list(rows[0]), title="The compiled main loop of each variant "
                 f"(SASS compiled here for {compiler.static_arch(kernel_of(KERNEL))} by "
                 f"ptxas {compiler.ptxas_version()}; fewest FFMAs over the step's global loads)")


# The compiler the chapter's prose describes, and the counts it read there: FFMAs between
# a global load of chapter 08's kernel and its first use, at the chapter's tile (the loads
# sink) and at DEEP (they stay in flight for the whole step). Another ptxas may schedule
# the loop otherwise; `text_check` then says so in one line.
TEXT_PTXAS = "12.9"
TEXT_IN_FLIGHT = {8: 2, 16: 1024}


def text_check(params: dict | None = None, counted: int | None = None,
               version: str | None = None) -> str:
    """One line: does the ptxas here give chapter 08's kernel the in-flight count the text
    describes (TEXT_IN_FLIGHT, ptxas TEXT_PTXAS) at the tile `params` (default: the
    chapter's)? `counted` and `version` stand in for the live count and version (tests)."""
    k = kernel_of(KERNEL)
    bk = k.resolve(params)["BK"]
    expected = TEXT_IN_FLIGHT[bk]
    got = loads(KERNEL, params).fewest if counted is None else counted
    ver = compiler.ptxas_version() if version is None else version
    if got == expected:
        return (f"Your ptxas ({ver}) places chapter 08's loads where the text describes "
                f"({got:,} FFMAs in flight at BK = {bk}).")
    return (f"Warning: your ptxas {ver} gives {got:,} FFMAs in flight at BK = {bk}, not "
            f"{expected:,}: the text describes ptxas {TEXT_PTXAS}; trust the cells.")


# ------------------------------------------------------------------ PTX against SASS

_PTX_KIND = (("ld.global", "global load"), ("fma.rn.f32", "FMA"), ("st.shared", "shared store"),
             ("ld.shared", "shared load"), ("bar.sync", "barrier"))


def _ptx_body(ptx: str) -> list[str]:
    """The kinds of instruction (global load, FMA, shared store, barrier) of the PTX
    between the prologue's barrier and the loop's, in order: one step as NVRTC hands it
    to ptxas."""
    kinds = []
    for line in ptx.splitlines():
        s = line.strip()
        if s.startswith("@"):
            s = s.split(None, 1)[1] if " " in s else s
        for prefix, kind in _PTX_KIND:
            if s.startswith(prefix):
                kinds.append(kind)
    bars = [i for i, k in enumerate(kinds) if k == "barrier"]
    return kinds[bars[0] + 1:bars[1]] if len(bars) >= 2 else kinds


def ffma_before_loads(kernel=KERNEL, params: dict | None = None) -> dict:
    """How many of one step's FMAs come before its first global load: in the PTX that
    NVRTC makes from the source (before ptxas schedules it) and in the SASS that ptxas
    makes from the PTX. {"PTX": (before, of), "SASS": (before, of)}."""
    k = variant_kernel(kernel) if kernel in VARIANTS else kernel_of(kernel)
    p = _params(k, params)
    body = _ptx_body(compiler.ptx(k, p)[0])
    fma = body.count("FMA")
    first = body.index("global load") if "global load" in body else len(body)
    out = {"PTX": (body[:first].count("FMA"), fma)}
    sass = analysis.main_loop(compiler.sass(k, p))
    first = next((i for i, (_, f, _) in enumerate(sass) if f.startswith("LDG")), len(sass))
    out["SASS"] = (sum(f == "FFMA" for _, f, _ in sass[:first]),
                   sum(f == "FFMA" for _, f, _ in sass))
    return out


def ptx_step(kernel=KERNEL, params: dict | None = None) -> str:
    """One trip of the K loop in the PTX that NVRTC hands to ptxas, condensed: from the
    loop's head label to its back branch, the global loads, the shared stores, the
    branches and their labels, the barrier, and the lines that set each branch's
    predicate; every run of other lines as one line that counts them (and the FMAs among
    them). Shows which branch guards which work."""
    k = variant_kernel(kernel) if kernel in VARIANTS else kernel_of(kernel)
    lines = [line.strip() for line in compiler.ptx(k, _params(k, params))[0].splitlines()]
    bars = [i for i, line in enumerate(lines) if line.startswith("bar.sync")]
    back = lines[bars[1] + 1]                       # the loop's back branch, after its barrier
    head = lines.index(back.split()[-1].rstrip(";") + ":")
    trip = lines[head:bars[1] + 2]
    preds = {m.group(1) for line in trip for m in [re.match(r"@!?(%p\d+) bra", line)] if m}
    out, skipped, fma = [], 0, 0
    for line in trip:
        parts = line.split(None, 1)
        sets_pred = len(parts) == 2 and any(parts[1].startswith(f"{p},") for p in preds)
        if sets_pred or line.endswith(":") or " bra" in f" {line}" or line.startswith(
                ("ld.global", "st.shared", "bar.sync")):
            if skipped:
                out.append(f"    ... {skipped} other line{'s' * (skipped > 1)}"
                           + (f", {fma} of them FMAs" if fma else ""))
            skipped = fma = 0
            out.append(line)
        elif line:
            skipped += 1
            fma += line.startswith("fma.rn.f32")
    return "\n".join(out)


# ------------------------------------------------------------------ pictures

_COLOURS = {"load": "#f6b26b", "flight": "#fce5cd", "compute": "#6aa84f",
            "store": "#6fa8dc", "wait": "#e06666"}


def _step_row(ax, where: float | None, steps: int, latency: float, title: str):
    """One warp's steps on one axes: the compute of each tile (green), its next tile's
    loads issued at fraction `where` of the compute (orange) and in flight for `latency`
    (pale), the store into the other stage (blue) once compute and loads are done, a
    wait (red hatch) where the store has to wait for the loads, and the barrier."""
    from matplotlib.patches import Rectangle
    compute, store = 1.0, 0.14
    lanes = {"load": 0, "compute": 1, "store": 2}

    def box(x0, w, lane, colour, text="", hatch=None, dark=False):
        ax.add_patch(Rectangle((x0, lanes[lane] + 0.15), w, 0.7, facecolor=colour,
                               edgecolor="0.4", hatch=hatch, lw=0.8))
        if text:
            ax.text(x0 + w / 2, lanes[lane] + 0.5, text, ha="center", va="center",
                    fontsize=FONT - 1, color="w" if dark else "k")

    x = 0.0
    for t in range(steps):
        issue = x + compute * where
        arrive = issue + latency
        box(x, compute, "compute", _COLOURS["compute"], f"tile {t}", dark=True)
        box(issue, 0.06, "load", _COLOURS["load"])
        box(issue + 0.06, latency - 0.06, "load", _COLOURS["flight"], f"tile {t + 1}\nin flight")
        end = x + compute
        if arrive > end:
            box(end, arrive - end, "store", _COLOURS["wait"], "wait", hatch="//")
            end = arrive
        box(end, store, "store", _COLOURS["store"], "STS")
        x = end + store + 0.03
        ax.plot([x, x], [0, 3], color="k", lw=2.5)
        x += 0.03
    ax.set_xlim(-0.05, x + 0.05)
    ax.set_ylim(3, 0)
    ax.set_yticks([0.5, 1.5, 2.5], ["global loads\n(LDG -> ra/rb)", "compute\n(LDS, FFMA)",
                                    "store\n(STS -> other stage)"], fontsize=FONT - 1)
    ax.set_xticks([])
    ax.set_title(title, fontsize=FONT, loc="left")
    for s in ("top", "right"):
        ax.spines[s].set_visible(False)
    return x


def timelines(kernel=KERNEL, params: dict | None = None, steps: int = 3,
              latency: float = 0.6, compiled_title: str | None = None):
    """The step as the source writes it (loads first, in flight during the compute) and
    as compiled (the loads issued where the SASS issues them, measured in FFMAs of the
    step): one warp's view, same scale for both. The latency is drawn as `latency` of a
    step's compute, a schematic width, not a measurement: only the position of the loads
    comes from the SASS."""
    import matplotlib.pyplot as plt
    lp = loads(kernel, params)
    k = _read(kernel)
    p = _params(k, params)
    first = next((i for i, (_, f, _) in enumerate(analysis.main_loop(compiler.sass(k, p)))
                  if f.startswith("LDG")), None)
    body = analysis.main_loop(compiler.sass(k, p))
    before = sum(f == "FFMA" for _, f, _ in body[:first]) if first is not None else lp.ffma
    where = before / lp.ffma if lp.ffma else 1.0
    fig, axes = plt.subplots(2, 1, figsize=(11, 4.6), sharex=True)
    ends = [_step_row(axes[0], 0.0, steps, latency,
                      "As the source writes it: the loads of the next tile are issued "
                      "before the compute, and arrive while it runs"),
            _step_row(axes[1], where, steps, latency, compiled_title or
                      f"As compiled: the loads are issued after {before} of the step's "
                      f"{lp.ffma} FFMAs, " + ("and the store waits for them"
                                             if where + latency > 1 else
                                             "and arrive while the rest of them run"))]
    for ax in axes:
        ax.set_xlim(-0.05, max(ends) + 0.05)
    fig.text(0.01, 0.01, "One warp, three steps. Black bars: __syncthreads(). The position "
             "of the loads in the step comes from the SASS; the width of 'in flight' "
             "(a global load's latency) is schematic.", fontsize=FONT - 2, color="0.3")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def loop_strip(kernels=(KERNEL,), params: dict | None = None):
    """The compiled main loop of each kernel (names of kernels or of variants, or
    (title, SASS) pairs for a loop compiled elsewhere, e.g. the student's) as a strip:
    one tick per instruction in program order (FFMA green, shared loads grey, global loads
    orange, shared stores blue, barriers black), and an arrow from each global load to
    the first instruction that uses its value, labelled with the FFMAs in between."""
    import matplotlib.pyplot as plt
    colour = {"FFMA": "#6aa84f", "LDS": "0.55", "LDG": "#e69138", "STS": "#3d85c6",
              "BAR": "k"}
    fig, axes = plt.subplots(len(kernels), 1, figsize=(11, 2.2 * len(kernels) + 0.7),
                             squeeze=False, sharex=True)
    longest = 0
    for ax, name in zip(axes[:, 0], kernels):
        if isinstance(name, tuple):      # (title, SASS): a loop compiled elsewhere
            name, sass = name
        else:
            k = _read(name)
            sass = compiler.sass(k, _params(k, params))
        body = analysis.main_loop(sass)
        lp = loop_loads(sass)
        longest = max(longest, len(body))
        for i, (_, f, _) in enumerate(body):
            base = f.split(".")[0]
            if base in colour:        # barriers a little taller, drawn over the rest
                height = {"BAR": 1.12, "LDG": 1.0, "STS": 1.0}.get(base, 0.55)
                ax.plot([i, i], [0, height], color=colour[base],
                        lw=0.8 if height < 1 else 2.2, zorder=3 if base == "BAR" else 2)
        used = [ld for ld in lp.loads if ld.use is not None]
        for n, ld in enumerate(used):
            end = ld.use if ld.use > ld.at else ld.use + len(body)
            y = 1.2 + 0.3 * n
            ax.annotate("", xy=(min(end, len(body)), y), xytext=(ld.at, y),
                        arrowprops={"arrowstyle": "-|>", "color": "#b45f06", "lw": 2.4,
                                    "mutation_scale": 18})
            ax.plot([ld.at, ld.at], [1.0, y], color="#b45f06", lw=1.2, ls=":")
            # the count beside each arrow: beside a short one (two arrows of a few
            # FFMAs would hide a label on them), above the middle of a long one
            words = f"{ld.ffma:,} FFMA{'' if ld.ffma == 1 else 's'}"
            if end - ld.at < len(body) // 8:      # on the side with room
                left = ld.at > len(body) // 2
                ax.text(ld.at - 3 if left else min(end, len(body)) + 6, y, words,
                        ha="right" if left else "left", va="center", fontsize=FONT - 1,
                        color="#b45f06")
            else:
                ax.text((ld.at + min(end, len(body))) / 2, y + 0.04, words, ha="center",
                        va="bottom", fontsize=FONT - 1, color="#b45f06")
        ax.set_ylim(-0.1, 1.45 + 0.3 * len(used))
        ax.set_yticks([])
        bars = f"{lp.barriers} barrier" + ("" if lp.barriers == 1 else "s")
        fewest = (f"; fewest FFMAs between a global load and its use: "
                  f"{lp.fewest} ({CHECK}: {lp.needed} or more)"
                  if lp.fewest is not None else "")
        ax.set_title(f"{label(name)}: {lp.ffma} FFMAs, {len(lp.loads)} global loads, {bars} per "
                     f"step{fewest}", fontsize=FONT, loc="left")
        for s in ("top", "right", "left"):
            ax.spines[s].set_visible(False)
    # the axes share x: the longest loop decides, or a shorter strip's limits would
    # cut the last instructions (its barrier) off a longer one
    axes[-1, 0].set_xlim(-5, longest + 5)
    axes[-1, 0].set_xlabel("instructions of one trip around the compiled loop, in issue "
                           "order (green: FFMA, grey: LDS, orange: LDG, blue: STS, black: "
                           "BAR)", fontsize=FONT - 1)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ the recorded sweep

def sweep_rows(size: int = 2048, one_per_sm: bool = True) -> list[dict]:
    """Every configuration recorded for both chapter 07's and chapter 08's kernel at
    size^3 with ONE_PER_SM = `one_per_sm`: the two rates (median, min, max), their
    ratio, and how long chapter 08's compiled loop keeps its global loads in flight
    (compiled here for the recording's GPU, whatever GPU this machine has)."""
    from gemm_kernels.measure import lookup, records
    from gemm_kernels.measure import tradeoff
    shape = (size,) * 3
    arch = records.arch()
    f4 = {tuple(sorted(c.items())) for c, _ in tradeoff.ranked("float4", size,
                                                            {"ONE_PER_SM": one_per_sm})}
    db = {tuple(sorted(c.items())) for c, _ in tradeoff.ranked(KERNEL, size,
                                                            {"ONE_PER_SM": one_per_sm})}
    out = []
    for key in sorted(f4 & db):
        p = dict(key)
        r7 = lookup.recorded("float4", shape, p)
        r8 = lookup.recorded(KERNEL, shape, p)
        lp = loads(KERNEL, p, arch)
        g7, g8 = r7["gflops"], r8["gflops"]
        out.append({"config": f"{p['BM']}x{p['BN']}x{p['BK']} {p['TM']}x{p['TN']}",
                    "params": p, "FFMAs per step": lp.ffma, "in flight (FFMAs)": lp.fewest,
                    "loads in flight": passes(lp),
                    "GFLOP/s 07": g7["median"], "GFLOP/s 08": g8["median"],
                    "ratio": g8["median"] / g7["median"],
                    "ratio low": g8["min"] / g7["max"], "ratio high": g8["max"] / g7["min"]})
    return sorted(out, key=lambda r: r["ratio"])


_GROUPS = {True: "in flight for a quarter of the step or more",
           False: "in flight for less than a quarter of the step"}


def sweep_summary(size: int = 2048, one_per_sm: bool = True) -> Table:
    """The sweep's ratio chapter 08 / chapter 07, grouped by whether chapter 08's compiled
    loop keeps its loads in flight: how many configurations, median, lowest, highest."""
    rows = sweep_rows(size, one_per_sm)
    out = []
    for flag in (False, True):
        v = [r["ratio"] for r in rows if r["loads in flight"] == flag]
        if v:
            out.append({"chapter 08's compiled loop": _GROUPS[flag], "configurations": len(v),
                        "median 08 / 07": f"{median(v):.3f}", "lowest": f"{min(v):.3f}",
                        "highest": f"{max(v):.3f}"})
    where = "one block per SM (ONE_PER_SM)" if one_per_sm else "as many blocks per SM as fit"
    return Table(out, list(out[0]) if out else [],
                 title=f"Chapter 08 / chapter 07 at {size}^3, {where}, by where the compiler "
                       f"put chapter 08's loads")


def deeper_tile(shallow: str = "128x128x8 8x8", deep: str = "128x128x16 8x8",
                size: int = 2048) -> str:
    """What each kernel gains from `shallow` to `deep` in the recorded sweep (one block per
    SM, the explorer's recordings): the two median rates and the gain, chapter 07's kernel
    and chapter 08's."""
    rows = {r["config"]: r for r in sweep_rows(size, True)}
    lines = []
    for who, key in (("chapter 07's kernel", "GFLOP/s 07"), ("chapter 08's kernel", "GFLOP/s 08")):
        a, b = rows[shallow][key], rows[deep][key]
        lines.append(f"{who}: {a:,.0f} GFLOP/s at {shallow}, {b:,.0f} at {deep}: "
                     f"{b / a - 1:+.0%}")
    return "\n".join([f"{size}^3, one block per SM, medians:", *lines])


# Failing the quarter-step check, a ratio above this is an exception the chapter's text names: the plot
# labels those points, and those slower than chapter 07's kernel in every repetition (the
# lowest, which the text names too).
OUTLIER = 1.1


def sweep_plot(size: int = 2048, one_per_sm: bool = True, ax=None):
    """The ratio of each configuration, one column per group (loads sunk, loads in
    flight), with the range from the repetitions (slowest 08 over fastest 07 to fastest
    08 over slowest 07) and the group's median."""
    import matplotlib.pyplot as plt
    rows = sweep_rows(size, one_per_sm)
    if ax is None:
        _, ax = plt.subplots(figsize=(8.5, 4.2))
    for x, flag in enumerate((False, True)):
        group = sorted((r for r in rows if r["loads in flight"] == flag),
                       key=lambda r: r["ratio"])
        colour = "#e69138" if flag else "0.45"
        label_y = -1.0
        for i, r in enumerate(group):
            xi = x + (i - (len(group) - 1) / 2) * 0.035
            ax.plot([xi, xi], [r["ratio low"], r["ratio high"]], color=colour, lw=1, zorder=2)
            ax.plot(xi, r["ratio"], "o", color=colour, ms=6, mec="white", mew=0.6, zorder=3)
            if flag:            # labels to the right, kept apart, a line to their point
                label_y = max(r["ratio"], label_y + 0.03)
                ax.plot([xi + 0.03, x + 0.33], [r["ratio"], label_y], color="0.7", lw=0.6)
                ax.text(x + 0.35, label_y, r["config"], va="center", fontsize=FONT - 2)
            elif r["ratio"] > OUTLIER or r["ratio high"] < 1:   # the few the text names
                ax.text(xi - 0.04, r["ratio"], r["config"], ha="right", va="center",
                        fontsize=FONT - 2)
        if group:
            m = median(r["ratio"] for r in group)
            # behind the points (zorder), light, so that no point on the median hides
            ax.plot([x - 0.25, x + 0.12], [m, m], color=colour, lw=2.5, alpha=0.45, zorder=1)
            ax.text(x - 0.27, m, f"median {m:.3f}", ha="right", va="center",
                    fontsize=FONT - 1)
    ax.axhline(1, color="k", lw=0.8, ls=":")
    ax.set_xticks([0, 1], [f"{_GROUPS[False]}\n(fails {CHECK})",
                           f"{_GROUPS[True]}\n(passes {CHECK})"], fontsize=FONT - 1)
    ax.set_xlim(-0.9, 1.85)
    ax.set_ylabel("chapter 08 / chapter 07", fontsize=FONT)
    where = "one block per SM" if one_per_sm else "as many blocks per SM as fit"
    ax.set_title(f"Every configuration of the recorded sweep at {size}^3, {where}:\n"
                 "does the prefetch pay where chapter 08's loads stay in flight long enough?",
                 fontsize=FONT + 1)
    ax.figure.tight_layout()
    return ax.figure


# ------------------------------------------------------------------ did it pay?

# The one tile of the recorded sweep where the chapter's own kernel keeps its loads in
# flight for a whole step (with ptxas 12.9), at chapter 07's and 08's width.
DEEP = {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8}
# The payoff's runs (`timed_variants`): 2048^3, at the chapter's tile and at DEEP.
PAYOFF_SHAPE = (2048, 2048, 2048)


# The columns of the payoff the main text shows: how long the loads stay in flight, and
# each rate (median) with its ratio to chapter 07's at the same setting. The appendix
# shows every column (ranges, registers, blocks, shares of cuBLAS).
PAYOFF_SHORT = {"kernel": "kernel", "loads in flight (FFMAs)": "loads in flight (FFMAs)",
                "own occupancy: blocks/SM": "blocks/SM",
                "own occupancy: GFLOP/s": "GFLOP/s", "own occupancy: / 07": "x 07",
                "one block per SM: GFLOP/s": "GFLOP/s, 1 block/SM",
                "one block per SM: / 07": "x 07, 1 block/SM"}


def payoff_short(params: dict | None = None, kernels=ALTERNATIVES,
                 ranges: bool = False, settings=(False, True)) -> Table:
    """`payoff` cut to the main text's seven columns (PAYOFF_SHORT): the loads in flight,
    the blocks per SM the registers allow, and at that occupancy and at one block per SM
    the median rate (with its range if `ranges`) and its ratio to chapter 07's. The full
    table: `payoff`. `settings`: the ONE_PER_SM values whose columns are shown (False: the
    kernel's own occupancy, True: one block per SM)."""
    full = payoff(params, kernels)
    shown = {old: new for old, new in PAYOFF_SHORT.items()
             if True in settings or not old.startswith("one block per SM")
             if False in settings or not old.startswith("own occupancy")}
    rows = [{new: (r[old].split(" (")[0] if old.endswith("GFLOP/s") and not ranges
                   else r[old])
             for old, new in shown.items()} for r in full]
    what = "medians (lowest..highest)" if ranges else "medians"
    return Table(rows, list(shown.values()), title=full.title.replace(
        "all timed in one run", f"{what}, all timed in one run"))


def payoff(params: dict | None = None, kernels=ALTERNATIVES) -> Table:
    """Did the prefetch pay, with two blocks per SM and with one? Chapter 07's kernel,
    chapter 08's and each of `kernels` (names of `VARIANTS`: by default the exercise's
    answer and the other sources that keep the loads in flight) at the tile `params`
    (default: the chapter's), as recorded in one run at 2048^3 with cuBLAS timed in the
    same process (`timed_variants`): per kernel, how long its compiled loop keeps the
    loads in flight (SASS compiled here), the registers of the binary that was timed,
    and at its own occupancy and at one block per SM (ONE_PER_SM) the blocks per SM, the
    rate with its range, and the ratio to chapter 07's at the same setting."""
    from gemm_kernels.measure import records, timing
    from gemm_kernels.measure import lookup
    p = {k: v for k, v in kernel_of(KERNEL).resolve(params).items()
         if k in ("BM", "BN", "BK", "TM", "TN")}
    shape = PAYOFF_SHAPE

    def recorded(name: str, one: bool) -> dict:
        q = {**p, "ONE_PER_SM": one}
        if name in ("float4", KERNEL):
            found = records.current().find(name, shape, kernel_of(name).resolve(q))
            return found[0] if found else None
        return lookup.variant_row(variant_kernel(name), shape, q)

    shown = [("chapter 07's kernel", "float4"), ("chapter 08's kernel", KERNEL),
             *((name, name) for name in kernels)]
    rate = {(who, one): recorded(name, one) for who, name in shown for one in (False, True)}
    missing = [f"{who} ({'one' if one else 'own'})" for (who, one), r in rate.items() if r is None]
    if missing:
        raise LookupError("not in the recording: " + ", ".join(missing))
    rows = []
    for who, name in shown:
        lp = None if name == "float4" else loads(name, p)
        regs = (rate[who, False].get("binary") or {}).get("registers")
        k = kernel_of(name) if name in ("float4", KERNEL) else variant_kernel(name)
        blocks = analysis.kernel_occupancy(k, {**p, "ONE_PER_SM": False},
                                           registers=regs).blocks_per_sm
        row = {"kernel": label(who),
               "loads in flight (FFMAs)": "-" if lp is None else f"{lp.fewest:,} of {lp.ffma:,}",
               CHECK: "-" if lp is None else check_words(lp),
               "registers": regs}
        for one, setting in ((False, "own occupancy"), (True, "one block per SM")):
            g = rate[who, one]["gflops"]
            ref = rate["chapter 07's kernel", one]["gflops"]["median"]
            row[f"{setting}: blocks/SM"] = 1 if one else blocks
            row[f"{setting}: GFLOP/s"] = f"{g['median']:,.0f} ({g['min']:,.0f}..{g['max']:,.0f})"
            row[f"{setting}: % of cuBLAS"] = f"{timing.share(rate[who, one]):.1f}"
            row[f"{setting}: / 07"] = f"{g['median'] / ref:.3f}"
        rows.append(row)
    # one block per SM is what that setting forces, so its blocks/SM column stays in the
    # rows but is not shown: it would only repeat 1 down the table
    shown_columns = [c for c in rows[0] if c != "one block per SM: blocks/SM"]
    return Table(rows, shown_columns, title=(
        f"Chapters 07 and 08 and variants of chapter 08's kernel, "
        f"{p['BM']} x {p['BN']} x {p['BK']}, {p['TM']} x {p['TN']} per thread, "
        f"{'x'.join(map(str, shape))}, all timed in one run with cuBLAS in the same "
        f"process (loads in flight: SASS compiled here by ptxas {compiler.ptxas_version()}; "
        f"{records.recording_label()})"))


def payoff_gain(params: dict | None = None, one_per_sm: bool = False,
                kernel: str = WORKING) -> float:
    """`kernel`'s rate over chapter 07's, as `payoff` shows it (the ratio)."""
    row = next(r for r in payoff(params, (kernel,)) if r["kernel"] == label(kernel))
    return float(row[f"{'one block per SM' if one_per_sm else 'own occupancy'}: / 07"])


# The sizes at which chapters 07 and 08 and the exercise's answer were each timed beside
# cuBLAS (study ch08_payoff_sizes adds the answer at the sizes other than the payoff's).
PAYOFF_SIZES = (1024, 2048, 4096, 8192)


def payoff_sizes(kernel: str = WORKING, sizes=PAYOFF_SIZES) -> Table:
    """Does the exercise's answer gain at every size? Per cube size, chapter 07's kernel,
    chapter 08's and `kernel` at the chapter's tile with two blocks per SM, each as a
    share of the cuBLAS timed beside it in its own run (the three rows of a size are not
    all from one run, so the table compares shares of cuBLAS, never one rate over
    another), and in how many runs they were timed (the runs' ids stay in each row)."""
    from gemm_kernels.measure import lookup, records, timing
    p = {k: v for k, v in kernel_of(KERNEL).resolve(None).items()
         if k in ("BM", "BN", "BK", "TM", "TN")}
    # short column heads, so that the table stays narrow; the title names each kernel
    shown = (("chapter 07", "float4"), ("chapter 08", KERNEL), ("the answer", kernel))
    rows = []
    for n in sizes:
        row, runs = {"size": f"{n}^3"}, []
        for who, name in shown:
            k = kernel_of(name) if name in ("float4", KERNEL) else variant_kernel(name)
            r = lookup.variant_row(k, (n, n, n), {**p, "ONE_PER_SM": False})
            if r is None:
                raise LookupError(f"not in the recording: {who} at {n}^3")
            row[who] = f"{timing.share(r):.1f}%"
            runs.append(r["run"])
        ids = list(dict.fromkeys(runs))
        row["timed in"] = "one run" if len(ids) == 1 else f"{len(ids)} runs"
        row["run ids"] = ", ".join(ids)     # kept in the row, for whoever traces a number
        rows.append(row)
    return Table(rows, [c for c in rows[0] if c != "run ids"], title=(
        f"% of cuBLAS: each median rate over the cuBLAS timed beside it, {p['BM']} x "
        f"{p['BN']} x {p['BK']}; the answer: {label(kernel)} ({records.recording_label()})"))


CH08 = "chapter 08's kernel"


def one_block_plot(study: str = "ch08_one_block"):
    """The timed study of one block per SM (`evidence.plot`), with a black tick on each
    row at the cuBLAS rate timed beside that row, named, and each rate written inside its
    bar: the axis ends just past cuBLAS."""
    from gemm_kernels.measure import studies
    from gemm_kernels.notebook import evidence
    fig = evidence.plot(study, run_line=False)
    ax = fig.axes[0]
    pairs = studies.results(study)
    refs = [(r.get("reference") or {}).get("gflops", {}).get("median") if r else None
            for _, r in pairs]
    for t in ax.texts:          # each rate inside its bar, so that the ticks stay clear
        t.set_text(t.get_text().strip() + "  ")
        t.set_horizontalalignment("right")
        t.set_color("w")
    for yi, ref in zip(range(len(pairs))[::-1], refs):
        if ref:
            ax.plot([ref / 1e3] * 2, [yi - 0.4, yi + 0.4], color="k", lw=2.5)
            ax.text(ref / 1e3, yi, "  cuBLAS", va="center", fontsize=FONT - 1)
    if any(refs):      # room for the names right of the ticks
        ax.set_xlim(0, max(r for r in refs if r) / 1e3 * 1.2)
    return labelled(fig)


def one_block_summary(study: str = "ch08_one_block") -> str:
    """What the recorded study of one block per SM says, in sentences: the change double
    buffering makes at two blocks and at one (with whether the ranges of the runs
    overlap), what losing the second block costs each kernel, and the share of chapter
    07's loss that double buffering wins back. Computed from the study's rows."""
    from gemm_kernels.measure import studies
    runs = {s.label: r for s, r in studies.results(study)}
    rate = {label: r["gflops"] for label, r in runs.items()}

    def change(new, old):
        return 100 * (rate[new]["median"] / rate[old]["median"] - 1)

    def overlap(a, b):
        return rate[a]["min"] <= rate[b]["max"] and rate[b]["min"] <= rate[a]["max"]

    lines = []
    for n in ("two blocks", "one block"):
        f4, db = f"chapter 07, {n} per SM", f"chapter 08, {n} per SM"
        noise = ("their ranges overlap, so this is within the noise" if overlap(f4, db)
                 else "their ranges do not overlap")
        lines.append(f"{n[0].upper() + n[1:]} per SM: double buffering changes the rate by "
                     f"{change(db, f4):+.1f}% ({runs[db]['repeats']} runs each, {noise}).")
    lost = {k: -change(f"chapter {k}, one block per SM", f"chapter {k}, two blocks per SM")
            for k in ("07", "08")}
    lines.append(f"Going from two blocks per SM to one costs chapter 07's kernel "
                 f"{lost['07']:.1f}% of its rate, and chapter 08's {lost['08']:.1f}%.")
    one7, two7 = rate["chapter 07, one block per SM"], rate["chapter 07, two blocks per SM"]
    back = (rate["chapter 08, one block per SM"]["median"] - one7["median"]) \
        / (two7["median"] - one7["median"])
    lines.append(f"Of what chapter 07's kernel loses with its second block, double "
                 f"buffering wins back {back:.0%}.")
    return "\n".join(lines)


def size_table(table) -> Table:
    """One row per size of `table` (`ladder.compare` rows of chapters 07 and 08): the
    blocks of the launch, chapter 08's rate over chapter 07's, and both ranges of the
    repetitions, so that a difference can be read against the noise beside it, and
    whether those ranges overlap (said in words: the reader need not compare them). The
    SMs with work: a grid with fewer blocks than SMs leaves the others idle."""
    from gemm_kernels.measure import records
    at = {(r["kernel"], r["size"]): r for r in table}
    p = kernel_of(KERNEL).resolve(None)
    sms = records.described_device().get("sm_count")
    rows = []
    for n in sorted(n for k, n in at if k == KERNEL and ("float4", n) in at):
        f, d = at["float4", n], at[KERNEL, n]
        blocks = (n // p['BM']) * (n // p['BN'])
        rows.append({"size": f"{n}^3",
                     f"blocks of {p['BM']} x {p['BN']}": f"{blocks:,}",
                     "SMs with work": f"{min(blocks, sms)} of {sms}" if sms else "-",
                     "08 / 07": f"{d['GFLOP/s'] / f['GFLOP/s']:.3f}",
                     "chapter 07, GFLOP/s min..max": f"{f['min']:,.0f}..{f['max']:,.0f}",
                     "chapter 08, GFLOP/s min..max": f"{d['min']:,.0f}..{d['max']:,.0f}",
                     "ranges": ("they overlap" if d['min'] <= f['max'] and f['min'] <= d['max']
                                else "no overlap")})
    return Table(rows, list(rows[0]) if rows else [],
                 title="Chapter 08 over chapter 07 at each size, medians, with the range of "
                       "each kernel's repetitions")


STALL_READ = ("long scoreboard", "short scoreboard", "barrier")


def stall_summary(settings=(False, True)) -> str:
    """The first stall bars in words (the payoff's profile at 2048^3, the size the grader
    times): for chapter 07's and chapter 08's kernels at each ONE_PER_SM value of
    `settings` (two blocks per SM, one), each kernel's largest wait, and the three waits
    the chapter reads (stall cycles per issued instruction), chapter 07 -> chapter 08."""
    from gemm_kernels.measure import studies
    rec = studies.complete_recording(PAYOFF_STALLS)
    got = _payoff_profiles(None, PAYOFF_STALLS, rec)

    def largest(st):
        return max((k for k in st if k != "selected"), key=st.get)

    lines = ["Warp-cycles stalled per issued instruction, chapter 07 -> chapter 08:"]
    for one in settings:
        st = {source: reasons for source, reasons, _ in got[one]}
        a, b = st["chapter 07's kernel"], st["chapter 08's kernel"]
        la, lb = largest(a), largest(b)
        # one name when both kernels agree, so the line does not read like a template
        which = (f"both kernels' largest wait is '{la}'" if la == lb
                 else f"the largest wait is '{la}' in chapter 07, '{lb}' in chapter 08")
        lines.append(f"With {_SETTINGS[one]}, {which}.")
        lines += [f"    {r}: {a.get(r, 0):.2f} -> {b.get(r, 0):.2f}" for r in STALL_READ]
    return "\n".join(lines)


# The payoff's sources profiled (`measure.studies`, `python -m gemm_kernels study
# ch08_payoff_stalls` on a GPU with Nsight Compute): chapters 07 and 08 and the variants
# whose loads stay in flight, with two blocks per SM and with one, at 2048^3.
PAYOFF_STALLS = "ch08_payoff_stalls"
PAYOFF_NOT_PROFILED = ("This recording holds no Nsight Compute profile of the payoff's "
                       "variants yet, so the picture of where their warps wait cannot be "
                       "drawn here.")
_PAYOFF_WAITS = ("long scoreboard", "barrier", "short scoreboard")
_SETTINGS = {False: "two blocks per SM", True: "one block per SM"}


def _payoff_profiles(params: dict | None, study: str, rec=None) -> dict[bool, list]:
    """The recorded profile of each payoff source at the tile `params` (default: the
    chapter's), by ONE_PER_SM: [(source, stall reasons, row)], sources in the study's
    order, from `rec`; steps the recording lacks are left out."""
    from gemm_kernels.measure import studies
    from gemm_kernels.notebook import evidence
    tile = {k: v for k, v in kernel_of(KERNEL).resolve(params).items()
            if k in ("BM", "BN", "BK", "TM", "TN")}
    out = {False: [], True: []}
    for step, row in studies.results(study, rec=rec):
        if row is None or any(step.params.get(k) != v for k, v in tile.items()):
            continue
        source = step.label.rsplit(", ", 2)[0]     # "<source>, <blocks> per SM, BK = <n>"
        out[bool(step.params.get("ONE_PER_SM"))].append(
            (source, evidence.stall_reasons(row), row))
    return out


def _own_blocks(source: str, params: dict | None, row: dict | None = None) -> int:
    """The blocks per SM that the registers of payoff source `source` allow at the tile
    `params` (those of the profiled binary where its row names them)."""
    k = _built(source)
    regs = ((row or {}).get("binary") or {}).get("registers")
    return analysis.kernel_occupancy(k, {**_params(k, params), "ONE_PER_SM": False},
                                     registers=regs).blocks_per_sm


def payoff_stalls(params: dict | None = None, study: str = PAYOFF_STALLS, top: int = 6,
                  kernels=ALTERNATIVES, settings=(False, True)):
    """Where the warps of the payoff's sources wait (Nsight Compute): two panels, two
    blocks per SM and one, a stacked bar per source of the warp-cycles stalled per issued
    instruction by reason (chapter 09's axis), drawn; returned, the table of the waits the
    chapter reads, per source and setting, with chapter 07's beside them. Without a
    recorded profile: one sentence that says so (no picture, no numbers). `kernels` picks
    which of `ALTERNATIVES` are shown (chapters 07's and 08's kernels always are);
    `settings`, which ONE_PER_SM values (False: two blocks per SM, True: one)."""
    import matplotlib.pyplot as plt
    from gemm_kernels.measure import records, studies
    from gemm_kernels.notebook import evidence
    from gemm_kernels.notebook.capstone_pictures import STALL_AXIS
    # the recording that holds the whole profile (one run: its bars compare), named below
    rec = studies.complete_recording(study)
    got = _payoff_profiles(params, study, rec)
    got = {one: [g for g in rows if one in settings
                 and (g[0] not in ALTERNATIVES or g[0] in kernels)]
           for one, rows in got.items()}
    if not any(got.values()):
        return Text(PAYOFF_NOT_PROFILED)
    shown = [one for one in (False, True) if got[one]]
    # a source whose registers allow one block only runs one in the first group too: its
    # name says so, and the group is "own occupancy" then (as in `payoff`)
    setting = dict(_SETTINGS)
    name = {(one, source): label(source) for one in shown for source, _, _ in got[one]}
    for source, _, row in got[False]:
        blocks = _own_blocks(source, params, row)
        if blocks != 2:
            name[False, source] = f"{label(source)} ({blocks} block{'s' * (blocks > 1)} per SM)"
            setting[False] = "own occupancy"
    bars = [(name[one, source], st) for one in shown for source, st, _ in got[one]]
    # one axes, so that every bar stacks its reasons in one order, with one legend; the
    # settings one above the other, a line between them, each named at the right
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(bars) + 2.0))
    evidence.stall_bars(ax, bars, top, fontsize=FONT - 1, fixed_order=True)
    ax.set_xlim(0, ax.get_xlim()[1] * 1.3)
    ax.set_xlabel(STALL_AXIS, fontsize=FONT)
    top_y = len(bars) - 1
    for one in shown:
        n = len(got[one])
        ax.text(0.995, top_y - (n - 1) / 2, setting[one].replace(" per", "\nper"),
                transform=ax.get_yaxis_transform(), ha="right", va="center",
                fontsize=FONT, fontweight="bold")
        if top_y - n >= 0:
            ax.axhline(top_y - n + 0.5, color="k", lw=0.8)
        top_y -= n
    p = kernel_of(KERNEL).resolve(params)
    ax.set_title(f"Where the warps wait, {p['BM']} x {p['BN']} x "
                 f"{p['BK']}, {'x'.join(map(str, studies.get(study).shapes[0]))} "
                 "(Nsight Compute)", fontsize=FONT + 1)
    where = records.source() if rec is None or device.is_live() else rec.label
    fig.text(0.01, 0.005, where, fontsize=FONT - 2, color="0.35")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    rows = []
    for one in shown:
        ref = got[one][0][1] if got[one][0][0] == "chapter 07's kernel" else None
        for source, st, _ in got[one]:
            row = {"setting": setting[one], "kernel": name[one, source]}
            for w in _PAYOFF_WAITS:
                row[w] = f"{st.get(w, 0):.2f}" + (
                    f" ({st.get(w, 0) - ref.get(w, 0):+.2f})"
                    # no bracket for a source that runs another block count than ch. 07
                    if ref is not None and source != got[one][0][0]
                    and name[one, source] == label(source) else "")
            row["all waits"] = f"{sum(v for k, v in st.items() if k != 'selected'):.2f}"
            rows.append(row)
    return Table(rows, list(rows[0]), title=(
        "Warp-cycles stalled per issued instruction, by reason (in brackets: the "
        f"change from chapter 07's kernel at the same blocks per SM); {where}"))


# ------------------------------------------------------------------ why a quarter

# The quarter-step check in cycles. A load must stay in flight for about a load's latency.
# Chapter 07's kernel uses each loaded value right after its load, so its warps wait about
# that latency once per step: its long-scoreboard wait per step (long scoreboard per
# issued instruction x the loop's instructions per step) measures it. A warp issues one
# instruction per cycle of its scheduler at most, and shares the scheduler with the other
# resident warps: while they all have work, it gets one issue slot in (warps per
# scheduler), so the instructions of a load's flight span at least that many cycles each
# (Nsight Compute measures the actual pace: the warp's cycles per issued instruction, the
# sum of its states, the issuing one included).
_KERNEL_OF = {chapter: package for package, chapter in CHAPTER_OF.items()}


def _built(name: str):
    name = _KERNEL_OF.get(name, name)
    return variant_kernel(name) if name in VARIANTS else kernel_of(name)


def instructions_in_flight(lp: LoopLoads) -> int | None:
    """The loop's instructions from the load in flight for the fewest FFMAs to the first
    instruction that uses its value (the next trip's, if the use comes there)."""
    used = [ld for ld in lp.loads if ld.use is not None]
    if not used:
        return None
    ld = min(used, key=lambda ld: ld.ffma)
    return (ld.use - ld.at) % lp.instructions


def warps_per_scheduler(name: str, params: dict | None = None, one_per_sm: bool = False,
                        row: dict | None = None) -> float:
    """Resident warps per warp scheduler of kernel `name` (a registry name, a variant's,
    or a payoff label): its blocks per SM (1 with ONE_PER_SM; else what the registers of
    the profiled binary of `row`, or of ptxas here, allow) x warps per block / 4."""
    from gemm_kernels.notebook.ch07_ablation import SCHEDULERS_PER_SM
    k = _built(name)
    p = _params(k, params)
    blocks = 1 if one_per_sm else _own_blocks(name, params, row)
    threads = 1
    for n in k.threads(p):
        threads *= n
    return blocks * threads / 32 / SCHEDULERS_PER_SM


def cycles_per_instruction(stalls: dict) -> float:
    """One warp's cycles per issued instruction: Nsight Compute's warps per issued
    instruction in each state, summed over every state, the issuing one included."""
    return sum(stalls.values())


def _latency(params: dict | None, study: str):
    """(chapter 07's stall reasons, its compiled loop, the recording's label) at the tile
    `params`, with two blocks per SM, from the payoff's profile `study`."""
    from gemm_kernels.measure import studies
    lp = loads("float4", params)
    rec = studies.complete_recording(study)
    got = _payoff_profiles(params, study, rec)[False]
    if not got:
        return None, lp, None
    return got[0][1], lp, rec.label


def _cube(study: str) -> str:
    """The study's shape in words: '4096^3' for a cube, else '2048x1024x512'."""
    from gemm_kernels.measure import studies
    shape = studies.get(study).shapes[0]
    return f"{shape[0]}^3" if len(set(shape)) == 1 else "x".join(map(str, shape))


NO_LATENCY = "This recording holds no profile of chapter 07's kernel at this tile."


def _quarter(params: dict | None, study: str):
    """The numbers behind the quarter-step check, or None without a profile: chapter 07's
    stalls, its loop, the recording's label, its wait per step in cycles (one latency),
    the warps per scheduler (the fastest pace), the answer's loop (whose check it is) and
    the FFMAs of chapter 07's own mix that issue over that latency at that pace."""
    st07, lp07, where = _latency(params, study)
    if st07 is None:
        return None
    wait = st07.get("long scoreboard", 0.0) * lp07.instructions
    lp = loads(WORKING, params)
    w = warps_per_scheduler("float4", params)
    cover = wait / w * lp07.ffma / lp07.instructions   # FFMAs issued while the load travels
    return st07, lp07, where, wait, w, lp, cover


def quarter_line(params: dict | None = None, study: str = PAYOFF_STALLS) -> str:
    """Three numbered lines, the result of `why_a_quarter` in short and numbered like its
    steps: the latency chapter 07's warps wait out per step, the instructions that span it
    at a warp's fastest pace, and the FFMAs among them against the check's count. The
    chapter's markdown says the same three sentences in words."""
    q = _quarter(params, study)
    if q is None:
        return NO_LATENCY
    st07, lp07, _, wait, w, lp, cover = q
    ls, n07 = st07.get("long scoreboard", 0.0), lp07.instructions
    return (f"1. {ls:.2f} stall cycles per issued instruction (long scoreboard) x {n07:,} "
            f"instructions per step = {wait:,.0f} stall cycles per warp per step: "
            f"about one load latency.\n"
            f"2. {wait:,.0f} cycles / {w:.0f} cycles per instruction (a warp's fastest pace "
            f"on average) = {wait / w:,.0f} instructions.\n"
            f"3. {wait / w:,.0f} instructions x {lp07.ffma:,} FFMAs / {n07:,} instructions "
            f"= {cover:,.0f} FFMAs, {cover / lp07.ffma:.2f} of the step's {lp07.ffma:,} "
            f"(the check asks for {lp.needed:,}).")


def why_a_quarter(params: dict | None = None, study: str = PAYOFF_STALLS) -> str:
    """The quarter-step check in cycles, from the recording and the SASS: its assumption,
    then three steps numbered like `quarter_line`'s lines (the latency to cover, the
    instructions that span it at a warp's fastest pace, the same in FFMAs of chapter 07's
    own loop), then why the fastest pace errs on the safe side (the same instructions at
    the pace measured). `study`: the payoff's profile (2048^3, the size the payoff was
    timed at, at the tile `params`)."""
    q = _quarter(params, study)
    if q is None:
        return NO_LATENCY
    st07, lp07, where, wait, w, lp, cover = q
    ls, n07 = st07.get("long scoreboard", 0.0), lp07.instructions
    # the last product multiplies the numbers as printed, so the reader's product is the same
    ins, cpi = round(wait / w), round(cycles_per_instruction(st07), 1)
    # a product that rounds to the instruction count reads as derived from it
    same = (f"   The two {n07:,}s match only because the wait is {ls:.2f} cycles per "
            f"instruction.\n" if f"{wait:,.0f}" == f"{n07:,}" else "")
    return (f"The assumption: chapter 07's kernel uses each loaded value right after its "
            f"load.\nSo once per step its warps wait out about one whole load latency.\n"
            f"1. The latency, in cycles.\n"
            f"   Chapter 07's warps wait {ls:.2f} cycles for global loads (long scoreboard) "
            f"per instruction issued.\n"
            f"   Its loop issues {n07:,} instructions per step.\n"
            f"   {ls:.2f} x {n07:,} = {wait:,.0f} cycles of waiting per step: one latency.\n"
            f"{same}"
            f"   It is the latency under load, at the base clock Nsight Compute holds,\n"
            f"   not the latency of a lone load.\n"
            f"2. The instructions that span it, at a warp's fastest pace.\n"
            f"   {w:.0f} warps share each scheduler, and a scheduler issues one instruction "
            f"per cycle.\n"
            f"   So on average a warp issues at most once every {w:.0f} cycles.\n"
            f"   It may issue twice in a row while the others stall, but a latency lasts\n"
            f"   many turns, so such bursts even out.\n"
            f"   {wait:,.0f} cycles / {w:.0f} cycles per instruction = {wait / w:,.0f} instructions.\n"
            f"3. The same in FFMAs. Chapter 07's loop has {lp07.ffma:,} FFMAs among its "
            f"{n07:,} instructions per step.\n"
            f"   {wait / w:,.0f} x {lp07.ffma:,} / {n07:,} = {cover:,.0f} FFMAs, "
            f"{cover / lp07.ffma:.2f} of the step.\n"
            f"   The check asks for a quarter: {lp.needed:,} FFMAs.\n"
            f"Why the fastest pace is the safe side.\n"
            f"   Chapter 07's warps issued once every {cpi:.1f} cycles, not {w:.0f}.\n"
            f"   At that pace the same instructions last {ins:,} x {cpi:.1f} = "
            f"{ins * cpi:,.0f} cycles, more than {wait:,.0f}.\n"
            f"   The faster a warp issues, the more instructions it needs to cover the\n"
            f"   latency, so loads in flight this long cover it at any slower pace.\n"
            f"What must be covered is a time: step 1's latency. At this tile it is a quarter\n"
            f"of the step. A deeper tile doubles the FFMAs per step but not the latency, so there\n"
            f"the same time is a smaller part of the step.\n"
            f"(Nsight Compute at {_cube(study)}, two blocks per SM, {where}; instructions: "
            f"SASS compiled here.)")


def _blocks_words(got, params) -> str:
    """The blocks per SM that the sources of `got` run at on their own, in the text's
    words ("two blocks per SM"), or "as many blocks per SM as fit" where they differ."""
    blocks = {_own_blocks(source, params, row) for source, _, row in got}
    words = {1: "one block per SM", 2: "two blocks per SM"}
    return words.get(blocks.pop(), "as many blocks per SM as fit") if len(blocks) == 1 \
        else "as many blocks per SM as fit"


def latency_cover(params: dict | None = None, one_per_sm: bool = False,
                  study: str = PAYOFF_STALLS) -> Table:
    """Per source of the payoff's profile at the tile `params` and the setting
    `one_per_sm`: its warps per scheduler, how long its loads stay in flight (FFMAs and
    instructions, SASS compiled here), the warp's cycles per instruction (measured), the
    cycles in flight these give, and the cycles per step its warps waited for global
    loads (long scoreboard x instructions per step). Chapter 07's row gives the latency
    to cover: it waits for its loads right after issuing them."""
    from gemm_kernels.measure import studies
    rec = studies.complete_recording(study)
    got = _payoff_profiles(params, study, rec)[one_per_sm]
    if not got:
        return Text(PAYOFF_NOT_PROFILED)
    rows = []
    for source, st, row in got:
        lp = loads(_KERNEL_OF.get(source, source), params)
        n, pace = instructions_in_flight(lp), cycles_per_instruction(st)
        w = warps_per_scheduler(source, params, one_per_sm, row)
        rows.append({"kernel": label(source), "warps per scheduler": f"{w:.0f}",
                     "in flight (FFMAs)": f"{lp.fewest:,}",
                     "in flight (instructions)": f"{n:,}",
                     "a warp's cycles per instruction": f"{pace:.1f}",
                     "in flight (cycles)": f"{n * pace:,.0f}",
                     "wait for global loads (cycles per step)":
                         f"{st.get('long scoreboard', 0.0) * lp.instructions:,.0f}"})
    p = kernel_of(KERNEL).resolve(params)
    return Table(rows, list(rows[0]), title=(
        f"How long the loads travel, in cycles, {p['BM']} x {p['BN']} x {p['BK']}, "
        f"{_SETTINGS[one_per_sm] if one_per_sm else _blocks_words(got, params)} (in flight: SASS "
        f"compiled here by ptxas {compiler.ptxas_version()}, times the pace Nsight Compute "
        f"measured; {rec.label})"))


def cover_line(kernel=WORKING, params: dict | None = None,
               study: str = PAYOFF_STALLS) -> str:
    """One line: at the tile `params`, the latency to cover (chapter 07's wait for global
    loads per step, in cycles) against how long `kernel` keeps its loads in flight, at
    least (its instructions in flight at the fastest pace, warps per scheduler)."""
    st07, lp07, _ = _latency(params, study)
    if st07 is None:
        return NO_LATENCY
    ls = st07.get("long scoreboard", 0.0)
    wait = ls * lp07.instructions
    lp = loads(kernel, params)
    ins = instructions_in_flight(lp)
    w = warps_per_scheduler(kernel, params)
    side = "longer" if w * ins >= wait else "shorter"
    return (f"Latency: chapter 07's wait for global loads, {ls:.2f} cycles per instruction, "
            f"x {lp07.instructions:,} instructions = {wait:,.0f} cycles; "
            f"{label(kernel)}: {lp.fewest:,} FFMAs = {ins:,} instructions in flight x at "
            f"least {w:.0f} cycles = {w * ins:,.0f} cycles or more, {side} than the latency.")


def latency_words(params: dict | None = None, study: str = PAYOFF_STALLS) -> str:
    """Why sources that fail the quarter-step check at the tile `params` can still leave
    almost no wait for global loads: the check's quarter in cycles against the latency
    (chapter 07's wait per step), and the cycles the failing sources keep their loads in
    flight, at least (warps per scheduler) and at the pace measured, with the
    long-scoreboard waits of the profile. From the payoff's profile, two blocks per SM."""
    from gemm_kernels.measure import studies
    rec = studies.complete_recording(study)
    got = {s: st for s, st, _ in _payoff_profiles(params, study, rec)[False]}
    if "chapter 07's kernel" not in got:
        return PAYOFF_NOT_PROFILED
    st07, lp07 = got["chapter 07's kernel"], loads("float4", params)
    wait = st07.get("long scoreboard", 0.0) * lp07.instructions
    lp = loads(WORKING, params)
    w = warps_per_scheduler(WORKING, params)
    quarter = round(lp.needed * lp.instructions / lp.ffma)
    p, d = kernel_of(KERNEL).resolve(params), kernel_of(KERNEL).resolve(None)
    tile = lambda q: f"{q['BM']} x {q['BN']} x {q['BK']}"      # noqa: E731
    at_default = ""
    if tile(p) != tile(d):      # the same measure at the chapter's tile, same profile
        st = next((st for s, st, _ in _payoff_profiles(None, study, rec)[False]
                   if s == "chapter 07's kernel"), None)
        if st is not None:      # the arithmetic written out: the chapter's latency
            ls, n = st.get("long scoreboard", 0.0), loads("float4").instructions
            at_default = (f"\n   (at the chapter's tile, {tile(d)}, the same profile "
                          f"gives {ls:.2f} x {n:,} instructions = {ls * n:,.0f} cycles, "
                          f"the chapter's 'Your turn'; here x{wait / (ls * n):.2f} that)")
    lines = [f"1. The latency to cover, at {tile(p)}: chapter 07's warps wait "
             f"{st07.get('long scoreboard', 0.0):.2f} cycles per instruction for global loads\n"
             f"   x {lp07.instructions:,} instructions per step = {wait:,.0f} cycles"
             f"{at_default}.",
             f"2. The quarter-step check asks for {lp.needed:,} of the step's {lp.ffma:,} "
             f"FFMAs: in the answer's loop, with the other instructions between them, "
             f"about {quarter:,} instructions.\n"
             f"   At {w:.0f} warps per scheduler, at least {quarter:,} instructions x {w:.0f} "
             f"cycles = {w * quarter:,.0f} cycles, {w * quarter / wait:.1f} times that latency."]
    fail = [s for s in ALTERNATIVES if s in got and not passes(loads(s, params))]
    if fail:
        lps = {s: loads(s, params) for s in fail}
        ffma = [lps[s].fewest for s in fail]
        ins = [instructions_in_flight(lps[s]) for s in fail]
        least = [warps_per_scheduler(s, params) * i for s, i in zip(fail, ins)]
        paced = [cycles_per_instruction(got[s]) * i for s, i in zip(fail, ins)]
        ls = [got[s].get("long scoreboard", 0.0) for s in fail]
        side = "more" if min(least) >= wait else "less"
        lines.append(
            f"3. The {len(fail)} variants that fail it keep their loads in flight for "
            f"{min(ffma):,} to {max(ffma):,} FFMAs, {min(ins):,} to {max(ins):,} "
            f"instructions:\n   at least {min(least):,.0f} cycles, {min(paced):,.0f} to "
            f"{max(paced):,.0f} at the pace measured, {side} than the latency.\n"
            f"4. Their warps wait {min(ls):.2f} to {max(ls):.2f} cycles per instruction for "
            f"global loads, against chapter 07's {st07.get('long scoreboard', 0.0):.2f}.")
    lines.append(f"(Nsight Compute at {_cube(study)}, {rec.label}; instructions: SASS "
                 "compiled here.)")
    return "\n".join(lines)


def records_source() -> str:
    """Where the numbers come from (the live GPU, or the recording), for titles."""
    from gemm_kernels.measure import records
    return records.source()


def labelled(fig):
    """A figure of recorded numbers with the recording's device and dates under it."""
    fig.text(0.01, 0.005, records_source(), fontsize=FONT - 2, color="0.35")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def ratio_plot(table, ax=None):
    """Chapter 08's rate over chapter 07's at each size of `table` (`ladder.compare` rows
    of both kernels), on a linear axis: the ratio of the medians, and a bar from the
    slowest repetition of one over the fastest of the other to the reverse; each size
    labelled with its blocks of BM x BN."""
    import matplotlib.pyplot as plt
    at = {(r["kernel"], r["size"]): r for r in table}
    sizes = sorted(n for k, n in at if k == KERNEL and ("float4", n) in at)
    p = kernel_of(KERNEL).resolve(None)
    if ax is None:
        _, ax = plt.subplots(figsize=(8.5, 3.8))
    for i, n in enumerate(sizes):
        f, d = at["float4", n], at[KERNEL, n]
        ratio = d["GFLOP/s"] / f["GFLOP/s"]
        ax.plot([i, i], [d["min"] / f["max"], d["max"] / f["min"]], color="0.45", lw=1.5)
        ax.plot(i, ratio, "o", color="#e69138", ms=8)
        ax.text(i + 0.08, ratio, f"{ratio:.3f}", va="center", fontsize=FONT - 1)
    ax.axhline(1, color="k", lw=0.8, ls=":")
    ax.set_xticks(range(len(sizes)), [f"{n}^3\n{(n // p['BM']) * (n // p['BN']):,} blocks"
                                      for n in sizes], fontsize=FONT - 1)
    ax.set_xlim(-0.5, len(sizes) - 0.3)
    ax.set_ylabel("chapter 08 / chapter 07", fontsize=FONT)
    ax.set_title(f"The chapter's kernel (the attempt whose loads ptxas sank) against "
                 f"chapter 07, {p['BM']} x {p['BN']} x {p['BK']}: "
                 "median ratio (dot) and error bar (slowest over fastest run to fastest "
                 "over slowest)\n"
                 f"({records_source()})", fontsize=FONT)
    ax.figure.tight_layout()
    return ax.figure


# ------------------------------------------------------------------ the exercise, peeled

# Loop peeling, the textbook form of a software pipeline (CUTLASS's main loop has this
# shape): the loop runs over every tile but the last with an unconditional fetch and
# store, and the last tile's compute follows the loop. Written in the exercise's terms.
PEELED_LOOP = """\
    for (int tile = 0; tile < tiles - 1; ++tile) {   // every tile but the last
        const int cur = tile & 1;
        fetch_tiles<BM, BN, BK, NT, VEC>(ra, rb, A, B, M, N, K, row0, col0, (tile + 1) * BK);
        compute_stage<BM, BN, BK, TM, TN>(As[cur], Bs[cur], tr, tc, acc);
        store_tiles<BM, BN, BK, NT, VEC>(ra, rb, As[cur ^ 1], Bs[cur ^ 1]);
        __syncthreads();
    }
    // the last tile, peeled off the loop: nothing left to fetch, only its compute
    // (with K = 0 there is no tile: a kernel that allows it must skip this line, since
    // stage (tiles - 1) & 1 = 1 was never written)
    compute_stage<BM, BN, BK, TM, TN>(As[(tiles - 1) & 1], Bs[(tiles - 1) & 1], tr, tc, acc);
"""


def with_k_loop(source: str, loop: str = PEELED_LOOP) -> str:
    """The exercise's `source` with its K loop (`for (int tile = 0; ...) { ... }`, the
    first one) replaced by `loop`: another answer, graded the same way."""
    start = source.find("for (int tile = 0;")
    body = braced(source, start) if start >= 0 else None
    if body is None:
        raise ValueError("no K loop 'for (int tile = 0; ...) { ... }' in the source")
    line = source.rfind("\n", 0, start) + 1
    end = source.index(body, start) + len(body) + 1
    return source[:line] + loop.rstrip("\n") + source[end:]


# ------------------------------------------------------------------ small helpers

def staging_registers(params: dict | None = None) -> int:
    """Floats of the next tile each thread holds in ra/rb: (BM*BK + BK*BN) / threads."""
    p = kernel_of(KERNEL).resolve(params)
    nt = (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])
    return (p["BM"] * p["BK"] + p["BK"] * p["BN"]) // nt


def worked_answer_note(exercise: str = "08_double_buffer") -> str:
    """How long the worked answer (the solution notebook's source, compiled here) keeps
    its loads in flight, in the grader's words, so that a student can set their own
    report beside it."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.solutions import solution_text
    from gemm_kernels.exercises.submission import submission_sass
    ex = get(exercise)
    worked = loop_loads(submission_sass(exercise, ex.kernel, ex.params,
                                        solution_text(exercise[:2], exercise)) or "")
    return f"The answer, compiled here, keeps its loads {in_flight_words(worked)}."


# The instructions a reader of the loop needs to see where the loads went: the global loads,
# the shared stores that use them, the barrier and the branches (`loop_listing`).
KEY_LINES = ("LDG", "STS", "BAR", "BRA")


def your_loop(exercise: str = "08_double_buffer"):
    """The compiled main loop of the student's last `%%exercise` submission, drawn as
    `loop_strip` draws the chapter's, with the grader's words on its loads; a sentence
    instead while there is no loop to draw (not run yet, markers left, no compile)."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.magic import submitted
    from gemm_kernels.exercises.submission import submission_sass
    try:
        source = submitted(exercise)
    except AssertionError as e:
        return Text(str(e))
    if "YOUR CODE HERE" in source:
        return Text("Your kernel still has '// YOUR CODE HERE' lines: write the prologue "
                    "and the K loop, run the exercise cell, then this one draws your loop.")
    ex = get(exercise)
    sass = submission_sass(exercise, ex.kernel, ex.params, source)
    if sass is None or not analysis.main_loop(sass):
        return Text("Your kernel has no compiled K loop to draw yet (it does not compile, "
                    "or has no loop): see the exercise's report.")
    loop_strip([("your kernel", sass)])
    return Text(f"The lines of your compiled loop that matter (the FFMAs between them "
                f"counted):\n{loop_listing(sass, limit=40, keep=KEY_LINES)}\n\n"
                f"Your kernel keeps its loads {in_flight_words(loop_loads(sass))}.")


def pace_to_rate(params: dict | None = None, kernel: str = WORKING) -> str:
    """From waits to rate, with two blocks per SM: a scheduler issues one instruction per
    cycle, so a warp that takes c cycles per instruction, with w warps per scheduler,
    keeps the scheduler busy w / c of the time; the FFMA rate follows that share times the
    loop's FFMAs per instruction. Chapter 07's kernel and `kernel` from the payoff's
    profile, the predicted ratio against the ratio timed (`payoff_gain`)."""
    from gemm_kernels.measure import studies
    rec = studies.complete_recording(PAYOFF_STALLS)
    got = {s: (st, row) for s, st, row in _payoff_profiles(params, PAYOFF_STALLS, rec)[False]}
    if "chapter 07's kernel" not in got or kernel not in got:
        return PAYOFF_NOT_PROFILED
    lines, rate = [], {}
    for who, name in (("chapter 07's kernel", "float4"), (kernel, kernel)):
        st, row = got[who]
        w, c = warps_per_scheduler(who, params, False, row), cycles_per_instruction(st)
        lp = loads(name, params)
        share = min(1.0, w / c)
        rate[who] = share * lp.ffma / lp.instructions
        lines.append(f"{label(who)}: {w:.0f} warps per scheduler / {c:.1f} cycles per "
                     f"instruction = issuing {share:.0%} of the cycles; x {lp.ffma:,} FFMAs / "
                     f"{lp.instructions:,} instructions per step = {rate[who]:.3f} FFMAs per cycle per scheduler")
    predicted = rate[kernel] / rate["chapter 07's kernel"]
    timed = payoff_gain(params, False, kernel)
    lines.append(f"From the profile, {label(kernel)} / chapter 07's kernel: x{predicted:.2f}; timed: "
                 f"x{timed:.2f}")
    gap = predicted / timed - 1
    lines.append("The two agree to within 1%." if round(gap, 2) == 0 else
                 f"The profile's ratio is {abs(gap):.0%} {'above' if gap > 0 else 'below'} "
                 f"the timed one.")
    lines.append(f"(Nsight Compute at {_cube(PAYOFF_STALLS)}, two blocks per SM, {rec.label}; "
                 f"instructions: SASS compiled here.)")
    return "\n".join(lines)
