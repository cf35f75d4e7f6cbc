"""Chapter 10's tables and pictures: the loads a thread has in flight (read from the SASS)
next to the timed rates, Little's law worked out from the profiled counters, where a
warp's time goes, the DRAM and L2 counters of the block orders, and which tiles the
blocks resident at one time take in each block order.

Every number comes from the SASS compiled here, the static analysis or the recording
(`figures/data/`); nothing is typed in.
"""
from __future__ import annotations

import math

from gemm_kernels.core import analysis, compiler
from gemm_kernels.core.launch import kernel_of
from gemm_kernels.core.table import Table
from gemm_kernels.measure import lookup, records, studies
from gemm_kernels.notebook import display
from gemm_kernels.exercises.notebooks import solution_source

SQUARE, ODD = (8192, 8192), studies.ODD_TRANSPOSE
DRAM_STUDY = "ch10_dram"
WARP = 32
SECTOR = 32                     # bytes: the unit of traffic between the SMs and the L2
_BYTES = {"LDG": 4, "LDG.64": 8, "LDG.128": 16}
_ITEM = {"float": 4, "double": 8}
LONG = "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
BARRIER = "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
_STALL = ("smsp__average_warps_issue_stalled_", "_per_issue_active.ratio")
# The profiled study's step names, as this chapter's text calls them: at the study's odd
# shape the vector transpose runs its scalar path.
# The padded steps name their block order, since the chapter compares orders.
LABELS = {"vector loads and stores": "transpose_fast on its scalar path: a 64 x 64 tile, no vector aligned",
          "padded tile, one tile per block": "padded tile, one tile per block, x->row order",
          "padded tile, two tiles stacked per block":
              "padded tile, two tiles stacked per block, x->row order",
          "diagonal block order": "padded tile, one tile per block, diagonal order"}


# The kernels of section 4's chart: the ones the main path explains. Appendix A's chart
# adds the two whose stories are told in the appendices (block order, wider loads).
MAIN_KERNELS = ("copy", "copy_smem", "transpose_naive", "transpose_smem", "transpose_padded")
KERNELS = MAIN_KERNELS + ("transpose_diagonal", "transpose_fast")


def _label(step) -> str:
    return LABELS.get(step.label, step.label)


def _shape_text(shape) -> str:
    return " x ".join(map(str, shape))


# ------------------------------------------------------------------ sources

def kernel_source(name: str) -> display.Text:
    """A kernel's source without the comment block above it: the code alone (the
    chapter's text says what it does)."""
    lines = str(display.source(name)).splitlines()
    while lines and lines[0].lstrip().startswith("//"):
        lines.pop(0)
    return display.Text("\n".join(lines))


# The padded kernel as the lesson reads it: transpose_smem with a padded tile. In the
# file it is transpose_padded at ORDER = 0, STACK = 1, written with the two tuning knobs.
_SMEM_TILE = "__shared__ T tile[TILE][TILE];"
_PADDED_TILE = "__shared__ T tile[TILE][TILE + PAD];   // the one change: was tile[TILE][TILE]"


def padded_lesson_source() -> display.Text:
    """transpose_smem's source with the one change that pads its tile (and PAD among the
    template parameters): the padded kernel at one tile per block and the plain block
    order, without transpose_padded's tuning knobs."""
    text = str(kernel_source("transpose_smem"))
    if _SMEM_TILE not in text:
        raise ValueError(f"transpose_smem: no line {_SMEM_TILE!r}")
    text = text.replace(_SMEM_TILE, _PADDED_TILE)
    text = text.replace("int TILE, int ROWS>", "int TILE, int ROWS, int PAD>", 1)
    # the padded kernel's name, its parameter lines re-aligned under the longer name
    text = text.replace("void transpose_smem(", "void transpose_padded(", 1)
    return display.Text(text.replace("\n" + " " * 31 + "T*", "\n" + " " * 33 + "T*", 1))


def launch_defaults(name: str) -> Table:
    """The configuration this chapter runs `name` at wherever a table or a title names
    no other: the registry's defaults, one row per template parameter (the launcher
    passes every one of them, so these are the values the chapter's numbers belong to)."""
    k = kernel_of(name)
    rows = [{"parameter": prm.name,
             "value": f"{prm.default}" + (f" ({prm.cxx[prm.default]})" if prm.cxx else "")}
            for prm in k.params]
    return Table(rows, list(rows[0]), title=f"{name}: this chapter's configuration, "
                 "unless a table or a title names other values")


def source_without(name: str, paragraph: str) -> display.Text:
    """A kernel's source with one paragraph of its header comment left out: the comment
    lines from the one that contains `paragraph` to the next empty comment line (that one
    included). For a remark of the kernel file that is about the course's history, not
    about the code. A ValueError when no comment line contains `paragraph`."""
    lines = str(display.source(name)).splitlines()
    start = next((i for i, x in enumerate(lines)
                  if x.lstrip().startswith("//") and paragraph in x), None)
    if start is None:
        raise ValueError(f"{name}: no comment line contains {paragraph!r}")
    end = next((i for i in range(start, len(lines)) if lines[i].strip() == "//"
                or not lines[i].lstrip().startswith("//")), len(lines) - 1)
    if lines[end].strip() != "//":
        end -= 1
    return display.Text("\n".join(lines[:start] + lines[end + 1:]))


# ------------------------------------------------------------------ loads in flight

# What decides a round trip: the global loads, and the first instruction that needs a
# loaded value, which in these kernels is a store: to shared memory (STS) in a tiled
# kernel, to global memory (STG) in a copy. EXIT ends a path.
_ORDER = ("LDG", "STS", "STG", "EXIT")
_STORES = ("STS", "STG")


def accesses(kernel: str, params: dict | None = None) -> list[str]:
    """The global loads, the shared and global stores and the exits of a kernel in the
    order of its SASS (compiled here for sm_90): 'LDG', 'LDG.128', 'STS', 'STG', 'EXIT', ..."""
    return _sass_order(kernel_of(kernel), params)


def _sass_order(k, params: dict | None) -> list[str]:
    """`accesses` for a kernel object (the chapter's, or a submitted one)."""
    body = analysis.instructions(compiler.sass(k, k.resolve(params)))
    return [f for _, f, _ in body if f.split(".")[0] in _ORDER]


def sass_accesses(kernel: str = "copy", params: dict | None = None,
                  also: tuple = ()) -> display.Text:
    """A kernel's whole SASS (compiled here) cut to what decides its round trips: every
    global load, every shared or global store and every EXIT, each with its guard
    predicate (`@!P1 LDG`: sent only where P1 is false, a bounds test), and each run of
    other instructions (addresses, bounds tests) as one line that counts them. `also`:
    further instruction families to show (the barrier `BAR` and shared loads `LDS` of a
    kernel with a shared tile)."""
    k = kernel_of(kernel)
    sass = compiler.sass(k, k.resolve(params or {"T": "float"}))
    guard = {int(a, 16): g + " " for a, g in display._GUARD.findall(sass)}
    shown = _ORDER + tuple(also)
    lines, skipped = [], 0
    for a, op, text in analysis.instructions(sass):
        if op.split(".")[0] not in shown:
            skipped += 1
            continue
        if skipped:
            lines.append(f"    ... {skipped} instructions: addresses and bounds tests")
            skipped = 0
        lines.append(f"/*{a:04x}*/  {guard.get(a, '')}{text}")
    return display.Text("\n".join(lines))


def sass_beside(kernels=("copy", "copy_smem"), params: dict | None = None) -> display.Beside:
    """Each kernel's SASS cut as in `sass_accesses` (with its barrier and shared loads),
    side by side, each titled with its loads per round trip: the chapter's copy sends 3
    loads, then 1; copy_smem all 4 before its first shared store."""
    params = params or {"T": "float", "ROWS": 8}
    titled = []
    for name in kernels:
        trips = round_trips(accesses(name, params))
        titled.append((f"{name}: loads per round trip {', then '.join(map(str, trips))}",
                       sass_accesses(name, params, also=("BAR", "LDS"))))
    return display.Beside(*titled)


def _ptxas(kernel: str = "copy") -> str:
    """Which compiler and GPU the SASS here is for: the order of loads and stores is
    ptxas's choice for that architecture, and may differ on another GPU."""
    return f"ptxas {compiler.ptxas_version()} for {compiler.static_arch(kernel_of(kernel))}"


def _order_row(k, params: dict) -> dict:
    """One row of an access-order table: the order, compacted, and the first round trip."""
    order = _sass_order(k, params)
    trips = round_trips(order)
    return {"loads and stores, in SASS order": compact(order),
            "loads before the first store": trips[0] if trips else 0}


def round_trips(order: list[str], family: str | None = None) -> list[int]:
    """The loads a thread sends in each round trip to memory: the runs of loads
    (`family` only, e.g. "LDG.128", where a kernel has a vector and a scalar path)
    between stores. A store, shared (STS) or global (STG), ends the run: it stores a
    loaded value, so the thread waits there for its loads before it sends more.
    [3, 1]: three loads, then stores (which wait for them), then one."""
    out, n = [], 0
    for f in order:
        if f.startswith("LDG") and (family is None or f == family):
            n += 1
        elif f.split(".")[0] in _STORES and n:
            out.append(n)
            n = 0
    return out + ([n] if n else [])


def compact(order: list[str]) -> str:
    """An access order with repeats counted: '3 LDG, 3 STG, EXIT, LDG, STG, EXIT'."""
    out, i = [], 0
    while i < len(order):
        j = i
        while j < len(order) and order[j] == order[i]:
            j += 1
        out.append(order[i] if j - i == 1 else f"{j - i} {order[i]}")
        i = j
    return ", ".join(out)


def submission_orders(source: str, exercise: str = "10_in_flight", rows=(8, 4, 2)) -> Table:
    """The copy exercise: for each ROWS, the global accesses of the submitted source and of
    the chapter's copy in SASS order, and the loads each sends before its first store."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.submission import submission_kernel
    ex = get(exercise)
    mine = submission_kernel(ex.name, ex.kernel, source)
    out = []
    for r in rows:
        p = {**ex.params, "ROWS": r}
        for who, k in (("the chapter's copy", kernel_of(ex.kernel)), ("the submitted copy", mine)):
            out.append({"ROWS": r, "elements a thread": p["TILE"] // r, "kernel": who,
                        **_order_row(k, p)})
    return Table(out, list(out[0]), title=f"TILE = {ex.params['TILE']}, T = {ex.params['T']}, "
                 f"SASS compiled here by {_ptxas()}")


def your_orders(exercise: str = "10_in_flight", rows=(8, 4)):
    """`submission_orders` of the student's last submission, once part 1 passes; until
    then a sentence that says what to do first (an unwritten copy has no loads to count)."""
    from gemm_kernels.exercises.magic import submitted, verdict
    try:
        report, source = verdict(exercise), submitted(exercise)
    except AssertionError as e:
        return display.Text(str(e))
    if not report.passed:
        return display.Text(f"Pass part 1 first: write your copy in the %%exercise {exercise} "
                            "cell and run it until its report shows no FAIL, then run this "
                            "cell again. It prints your copy's loads and stores beside the "
                            "chapter's copy.")
    return submission_orders(source, exercise, rows)


def copy_orders(kernel: str = "copy", rows=(8, 4, 2), t: str = "float") -> Table:
    """The chapter's copy at several ROWS: how many loads ptxas sends before the first store
    is its own choice, and it changes with ROWS. This is why the exercise asks for a source
    that sends them all first, whatever ROWS is."""
    k = kernel_of(kernel)
    out = []
    for r in rows:
        p = k.resolve({"T": t, "ROWS": r})
        out.append({"ROWS": r, "elements a thread": p["TILE"] // r, **_order_row(k, p)})
    return Table(out, list(out[0]), title=f"{kernel}, {t}, TILE = {k.resolve({'T': t})['TILE']}: "
                 f"global loads, shared and global stores, exits in SASS order "
                 f"({_ptxas(kernel)}, compiled here)")


IN_FLIGHT_BYTES = "bytes in flight per warp: average (per round trip)"
TRIPS = "loads per round trip"
# (label, kernel, parameters, load family counted where a kernel has two paths)
IN_FLIGHT = (
    ("copy", "copy", {"T": "float"}, None),
    ("copy through a shared tile", "copy_smem", {"T": "float"}, None),
    ("padded transpose, one tile per block, x->row order", "transpose_padded",
     {"T": "float", "STACK": 1}, None),
    ("padded transpose, two tiles per block, x->row order", "transpose_padded",
     {"T": "float", "STACK": 2}, None),
    ("copy, double", "copy", {"T": "double"}, None),
)


def _share(kernel, shape, params):
    try:
        return lookup.share(lookup.recorded(kernel, shape, params))
    except LookupError:
        return None


def in_flight_table(rows=IN_FLIGHT) -> Table:
    """Per kernel: the loads a thread sends in each round trip (read from the SASS), the
    bytes a warp has in flight averaged over its round trips (what Little's law needs;
    each round trip's in brackets where they differ), next to the timed rate at both
    shapes as a share of the device copy timed beside it. Short headers, so that it reads
    at a glance; the copy's full SASS order is `copy_orders`. (The warps resident, where
    the profiler ran, are in `little_table`.) The title says so where the SASS here has other
    registers than the binaries timed."""
    out, regs = [], []
    for label, name, p, family in rows:
        order = accesses(name, p)
        trips = round_trips(order, family)
        width = _BYTES[family] if family else _ITEM[kernel_of(name).resolve(p)["T"]]
        per_trip = [n * width * WARP for n in trips]
        per_warp = round(sum(per_trip) / max(len(trips), 1))
        # the average hides an uneven split (two tiles: 128, then 896): print each trip too
        each = f" ({', then '.join(f'{b:,}' for b in per_trip)})" if len(trips) > 1 else ""
        out.append({"kernel": label, TRIPS: ", then ".join(map(str, trips)),
                    IN_FLIGHT_BYTES: f"{per_warp:,}{each}",
                    f"% copy {_shape_text(SQUARE)}": _share(name, SQUARE, p),
                    f"% copy {_shape_text(ODD)}": _share(name, ODD, p)})
        timed = (lookup.binary(name, p) or {}).get("registers")
        regs.append((label, timed, analysis.summary(name, p)["registers"]))
    differ = [f"{l} ({t} timed, {h} here)" for l, t, h in regs if t is not None and t != h]
    unknown = [l for l, t, _ in regs if t is None]
    note = ("; registers of the SASS here differ from the timed binaries': " + "; ".join(differ)
            if differ else "" if not unknown else
            "; the timed binary's registers are not recorded for " + ", ".join(unknown))
    return Table(out, list(out[0]), title=f"SASS compiled here by "
                 f"{_ptxas()}{note}; rates {records.source()}", pct_decimals=1)


SOLUTION = "10_in_flight: worked solution"


def solution_rates(shape=SQUARE) -> Table:
    """The exercise's payoff, measured: the worked solution (every load before the first
    store), timed beside the chapter's copy and the device copy in one run, with
    `copy_smem` (the other kernel with all its loads first, timed in its own run) and
    their loads before the first store in the SASS here. Empty where the solution's row
    is not recorded."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.submission import submission_kernel
    from gemm_kernels.notebook.worked_solutions import pair
    ex = get("10_in_flight")
    sol = pair(ex.name, shape)[0]
    if sol is None:
        return Table([], ["kernel"], title=f"{SOLUTION}: not recorded at {_shape_text(shape)}")
    same_run = [r for r in records.current().find(ex.kernel, shape, dict(ex.params))
                if r.get("run") == sol.get("run")]
    mine = submission_kernel(ex.name, ex.kernel, solution_source(ex.name))
    out = []
    for label, k, row, run in (
            ("the chapter's copy", kernel_of(ex.kernel), same_run[0] if same_run else None,
             "same run"),
            ("the worked solution: every load first", mine, sol, "same run"),
            ("copy through a shared tile", kernel_of("copy_smem"),
             _recorded("copy_smem", shape, dict(ex.params)), "its own run")):
        trips = round_trips(_sass_order(k, ex.params))
        out.append({"kernel": label, "loads before the first store": trips[0] if trips else 0,
                    "GB/s (median)": row["gbps"]["median"] if row else None,
                    "device copy beside it, GB/s": row["reference"]["gbps"]["median"]
                    if row else None,
                    "% of device copy": lookup.share(row) if row else None,
                    "timed": run if row else "not recorded"})
    return Table(out, list(out[0]), title=f"float, {_shape_text(shape)}, TILE = "
                 f"{ex.params['TILE']}, ROWS = {ex.params['ROWS']}; rates {records.recording_label()}",
                 pct_decimals=1)


def solution_gap(shape=SQUARE) -> str:
    """One line: how much of the gap between the chapter's copy and the device copy the
    worked solution closes, both timed in one run ('' where not recorded)."""
    rows = {r["kernel"]: r for r in solution_rates(shape)}
    copy, sol = rows.get("the chapter's copy"), rows.get("the worked solution: every load first")
    if not copy or not sol or copy["% of device copy"] is None or sol["% of device copy"] is None:
        return ""
    a, b = copy["% of device copy"], sol["% of device copy"]
    return (f"{_shape_text(shape)}, one run: the chapter's copy at {a:.1f}% of the device "
            f"copy, the worked solution at {b:.1f}%: it closes {100 * (b - a) / (100 - a):.0f}% "
            "of the gap")


WARPS_SM = "warps per SM (occupancy calculator, from the compiled kernel's registers)"


def copy_smem_by_rows(shape=SQUARE, rows=(4, 8, 16)) -> Table:
    """`copy_smem` in float at TILE = 32 and each ROWS: the loads a thread sends before
    its first store (SASS here), the bytes a warp then has in flight, and the timed rate
    (a share of the device copy timed beside it, and a ratio to ROWS = 8), the warps an SM
    holds (`analysis.kernel_occupancy` with the timed binary's registers), and the latency
    Little's law then implies, against ROWS = 8: latency = bytes in flight per SM / rate, so
    its ratio is the ratio of (warps per SM x bytes a warp has in flight) over the rate
    ratio. The law itself predicts no change of latency; this column shows how the latency
    the rates imply moved with the load."""
    out = []
    for r in rows:
        p = {"T": "float", "TILE": 32, "ROWS": r}
        trips = round_trips(accesses("copy_smem", p))
        row = _recorded("copy_smem", shape, p)
        # the block size (TILE x ROWS threads) and the registers change with ROWS, and so
        # can the warps an SM holds: the bytes in flight per SM need them
        timed = (lookup.binary("copy_smem", p) or {}).get("registers")
        out.append({"ROWS": r, "loads before the first store": trips[0] if trips else 0,
                    "bytes a warp has in flight": (trips[0] if trips else 0) * 4 * WARP,
                    WARPS_SM: analysis.kernel_occupancy("copy_smem", p,
                                                        registers=timed).warps_per_sm,
                    "GB/s (median)": row["gbps"]["median"] if row else None,
                    "% of device copy": lookup.share(row) if row else None})
    base = next((o for o in out if o["ROWS"] == 8), None)
    rate0 = base["GB/s (median)"] if base else None
    for o in out:
        rate = o["GB/s (median)"]
        o["rate / rate at ROWS = 8"] = f"{rate / rate0:.2f}" if rate0 and rate else "-"
        more_bytes = (o[WARPS_SM] * o["bytes a warp has in flight"]
                      / (base[WARPS_SM] * base["bytes a warp has in flight"]))
        o["implied latency vs ROWS = 8"] = (f"{more_bytes / (rate / rate0):.2f}"
                                            if rate0 and rate else "-")
    return Table(out, list(out[0]), title=f"copy_smem, float, TILE = 32, {_shape_text(shape)}; "
                 f"rates {records.recording_label()}", pct_decimals=1)


def _recorded(kernel, shape, params):
    try:
        return lookup.recorded(kernel, shape, params)
    except LookupError:
        return None


# ------------------------------------------------------------------ section 3's prediction

# The four column reads of section 3's *Predict*: the student's wavefronts for one column
# read of warp 0 in each case, checked against the bank model (the same model, on the same
# addresses, as the folded table that reveals them).
COLUMN_CASES = {
    "a": ("float, TILE = 32, PAD = 1", {"T": "float", "PAD": 1, "STACK": 1}),
    "b": ("float, TILE = 32, PAD = 2", {"T": "float", "PAD": 2, "STACK": 1}),
    "c": ("float, TILE = 16, PAD = 1, ROWS = 8", {"T": "float", "TILE": 16, "PAD": 1, "STACK": 1}),
    "d": ("double, TILE = 32, PAD = 1", {"T": "double", "PAD": 1, "STACK": 1}),
}
_COLUMN_HINTS = {
    "a": "lane tx reads word 33 * tx + ty: which bank is that, for lanes 0 to 31?",
    "b": "lane tx reads word 34 * tx + ty: find two lanes whose words differ by a multiple of 32",
    "c": "warp 0 is two rows of 16 threads; lane tx of the first row and of the second read "
         "rows tx of the tile: which two words share bank 0?",
    "d": "a 64-bit read goes in two phases of 16 lanes; count the passes in one phase, "
         "then add the other",
}
_COLUMN_TRIES: dict = {}


def _cases_table():
    from gemm_kernels.memory import ch10_11_instructions
    return ch10_11_instructions.per_instruction(
        [("transpose_padded", params) for _, params in COLUMN_CASES.values()])


def column_read_key() -> dict:
    """The bank model's wavefronts for one column read (`tile[tx][ty]`, a shared load) of
    warp 0 in each case of COLUMN_CASES."""
    reads = [r for r in _cases_table() if r["op"] == "ld"]
    return {case: r["wavefronts"] for case, r in zip(COLUMN_CASES, reads)}


def check_column_reads(mine: dict | None) -> None:
    """Section 3's prediction, graded: a wrong number is answered with a question, not the
    number; the folded reveals below give the answers. Prints nothing but what to do while
    `mine` is unanswered."""
    if not mine or all(mine.get(k) is None for k in COLUMN_CASES):
        print("write your four predictions in `my_wavefronts` (cases a to d), then run this cell")
        return
    key, wrong = column_read_key(), []
    for case, (what, _) in COLUMN_CASES.items():
        got = mine.get(case)
        if got is None:
            wrong.append(f"({case}) {what}: not predicted")
        elif not _same(got, key[case]):
            wrong.append(f"({case}) {what}: {got!r} is not it ({_COLUMN_HINTS[case]})")
    if not wrong:
        print("right: all four match the bank model (the reveals below draw (a) and (c))")
        return
    tries = _COLUMN_TRIES["n"] = _COLUMN_TRIES.get("n", 0) + 1
    print("not yet:\n  " + "\n  ".join(wrong))
    print("correct your numbers and run the cell again" if tries < 2 else
          "the answers are in the folded reveals below")


# ------------------------------------------------------------------ the copy, worked out

def _device():
    from gemm_kernels.measure import records
    return records.described_device()


def copy_rates(shape=ODD) -> str:
    """The GPU, and the copy kernel's rate in float at `shape` against the device copy
    timed beside it and against the DRAM peak."""
    from gemm_kernels.core import device
    props = _device()
    peak = device.peak_bandwidth_gbps(props)
    r = lookup.measure_or_lookup("copy", shape, {"T": "float"})
    rate, ref = r["gbps"]["median"], r["reference"]["gbps"]["median"]
    return (f"{props['name']}: {props['sm_count']} SMs, at most "
            f"{props['max_threads_per_sm'] // WARP} warps per SM, DRAM peak {peak:,.0f} GB/s "
            f"(memory clock x bus width)\ncopy kernel, float, {_shape_text(shape)}: "
            f"{rate:,.0f} GB/s = {lookup.share(r):.1f}% of the device copy ({ref:,.0f} GB/s) "
            f"and {100 * rate / peak:.0f}% of the DRAM peak\nthe device copy itself reaches "
            f"{100 * ref / peak:.0f}% of the DRAM peak at {_shape_text(shape)}: a practical yardstick, not a ceiling "
            "(a kernel can come out a little above it)")


# The study that profiled the float copy at each shape: its warps resident feed the chain.
_COPY_PROFILE = {SQUARE: "ch10_naive_store", ODD: DRAM_STUDY}


def _copy_row(shape=ODD):
    """The float copy's profiled row at `shape`, None where the recording lacks it."""
    return next((r for s, r in studies.results(_COPY_PROFILE[tuple(shape)], shape)
                 if s.kernel == "copy" and kernel_of("copy").resolve(s.params)["T"] == "float"),
                None)


def _copy_chain(shape=ODD) -> dict:
    # the warps resident are the recording's counter at this shape: its SMs and its timed
    # rate go with them
    props, row = records.recorded_device(), _copy_row(shape)
    trips = round_trips(accesses("copy", {"T": "float"}))
    r = lookup.recorded("copy", shape, {"T": "float"})
    warps = row["metrics"]["sm__warps_active.avg.pct_of_peak_sustained_active"] / 100 * 64
    per_warp = 4 * WARP * sum(trips) / len(trips)
    in_flight = warps * per_warp * props["sm_count"]
    read = r["gbps"]["median"] / 2 * 1e9                  # half of the bytes are reads
    return {"sms": props["sm_count"], "trips": trips, "warps": warps, "per_warp": per_warp,
            "in_flight": in_flight, "read": read, "latency": in_flight / read}


def copy_little(shape=SQUARE) -> Table:
    """Little's law for the copy kernel at `shape`, piece by piece, each piece with where
    it comes from: warps resident (a counter), loads per round trip (the SASS), bytes in flight
    (a model: every resident warp always in one of its round trips, both as long), the
    timed read rate, and the latency per round trip that these imply."""
    c = _copy_chain(shape)
    trips = c["trips"]
    rows = [("warps resident per SM", f"{c['warps']:.1f}", "counter: warps active % x 64"),
            ("loads per thread in each round trip", ", then ".join(map(str, trips)), "SASS"),
            ("bytes per load of a warp", f"{4 * WARP}", "4 bytes x 32 lanes"),
            ("bytes a warp has in flight, averaged over its round trips",
             f"{c['per_warp']:.0f}",
             "model: " + " in the first round trip, ".join(str(4 * WARP * n) for n in trips)
             + f" in the {'second' if len(trips) == 2 else 'last'}; "
             f"{4 * WARP * sum(trips)} bytes over {len(trips)} round trips"),
            ("bytes in flight per SM, averaged over the round trips", f"{c['warps'] * c['per_warp'] / 1e3:.1f} KB",
             "warps x bytes per warp"),
            ("bytes in flight, whole GPU", f"{c['in_flight'] / 1e6:.2f} MB", f"x {c['sms']} SMs"),
            ("read bandwidth, timed (not under the profiler)", f"{c['read'] / 1e9:,.0f} GB/s", "timed rate / 2"),
            ("latency this implies", f"{c['latency'] * 1e6:.2f} µs per round trip",
             "Little's law: in flight / bandwidth")]
    return Table([dict(zip(("quantity", "value", "from"), x)) for x in rows],
                 ["quantity", "value", "from"],
                 title=f"Little's law for the copy kernel, float, {_shape_text(shape)}")


def plot_round_trips(rows: int = 8):
    """One warp's loads and stores over time, drawn before the Little's-law tables: the
    chapter's copy (its SASS order: a first round trip, then a second), copy_smem and the
    exercise's goal (every load sent first, one round trip). Time has no unit: every round
    trip is drawn one latency long, whatever it carries, so the picture shows how many
    times a warp waits, not how long (a round trip with more in flight waits longer, and
    no measurement here gives each its own length). Issuing is drawn wider than it is."""
    import matplotlib.pyplot as plt
    lat = 1.0                                            # one latency: the unit of the axis
    want = kernel_of("copy").resolve({"T": "float", "ROWS": rows})["TILE"] // rows
    lanes = [("copy (this chapter's)", round_trips(accesses("copy", {"T": "float", "ROWS": rows}))),
             ("copy_smem", round_trips(accesses("copy_smem", {"T": "float", "ROWS": rows}))),
             ("the exercise: every load first", [want])]
    fig, ax = plt.subplots(figsize=(10, 2.9))
    tick = lat / 25
    end = 0.0
    for y, (name, trips) in zip((2, 1, 0), lanes):
        t = 0.0
        for n in trips:
            ax.broken_barh([(t, n * tick)], (y - 0.3, 0.6), color="tab:blue")
            ax.broken_barh([(t + n * tick, lat)], (y - 0.3, 0.6), color="tab:blue", alpha=0.25)
            ax.text(t + n * tick + lat / 2, y, f"{n} load{'s' * (n > 1)} in flight: "
                    f"{n * WARP * _ITEM['float']} B a warp", ha="center", va="center", fontsize=8)
            t += n * tick + lat
            ax.broken_barh([(t, n * tick)], (y - 0.3, 0.6), color="tab:orange")
            t += n * tick
        ax.text(t + tick, y, f"{len(trips)} round trip{'s' * (len(trips) > 1)}",
                va="center", fontsize=9)
        end = max(end, t)
    ax.set_yticks([2, 1, 0], [n for n, _ in lanes], fontsize=9)
    ax.set_xlim(0, end + 0.35 * lat)                   # room for the last "round trips" label
    ax.set_xticks([])                                  # no unit: the lengths are not measured
    ax.set_xlabel("time, no unit: every round trip drawn one latency long, whatever it carries "
                  "(the picture counts the waits; it does not time them)")
    ax.set_title(f"One warp of a float copy, TILE = 32, ROWS = {rows} (SASS order; schematic)\n"
                 "dark blue: loads (LDG) sent; light: waiting for them; orange: stores (STG; "
                 "for copy_smem, STS)",
                 fontsize=10)
    fig.tight_layout()
    return fig


def _copy_wait(shape=ODD) -> dict | None:
    """The float copy's row of `warp_times` from the study that profiled it at `shape`
    (`_COPY_PROFILE`), None where the recording lacks its counters."""
    return next((w for w in warp_times(_COPY_PROFILE[tuple(shape)])
                 if w["kernel"] == "copy" and w["params"]["T"] == "float"), None)


def _stall_latency(shape=ODD) -> float | None:
    """The copy's wait per round trip, µs, from the profiler's long-scoreboard stall at
    its own clock; None where the recording lacks the copy's counters at `shape`."""
    w = _copy_wait(shape)
    return None if w is None else w["loads"] / len(w["trips"]) / w["clock"] / 1e3


def copy_wait_check(shape=ODD) -> str:
    """The latency of the copy's round trips as the profiler measured it (the warps'
    long-scoreboard stall), next to what Little's law implies from the timed rate."""
    w = _copy_wait(shape)
    if w is None:
        return "the copy's profiled counters are not in this recording"
    props = records.recorded_device()      # the GPU profiled, whose clock is compared
    row = _copy_row(shape)
    warps = _warps("copy", {"T": "float"}, shape)
    loads = row["metrics"]["smsp__inst_executed_op_global_ld.sum"] / warps
    trips = len(w["trips"])
    implied = _copy_chain(shape)["latency"] * 1e6
    return (f"{warps:,} warps launched, {loads:.2f} global loads each (the SASS has "
            f"{sum(w['trips'])})\nwaiting for global loads: {w['loads']:,.0f} cycles per warp, "
            f"{w['loads'] / trips:,.0f} per round trip\nat the profiler's clock of "
            f"{w['clock']:.2f} GHz (the GPU's own: {props['sm_clock_mhz'] / 1e3:.2f} GHz): "
            f"{_stall_latency(shape):.2f} µs per round trip, against "
            f"{implied:.2f} µs from Little's law")


# ------------------------------------------------------------------ Little's law, counted

def _warps(kernel: str, params: dict, shape) -> int:
    k = kernel_of(kernel)
    p = k.resolve(params)
    threads, grid = math.prod(k.threads(p)), math.prod(k.grid(p, tuple(shape)))
    return grid * threads // WARP


def _stalls(m: dict) -> dict:
    return {k[len(_STALL[0]):-len(_STALL[1])]: v for k, v in m.items()
            if k.startswith(_STALL[0]) and k.endswith(_STALL[1])}


def _path_family(step) -> str | None:
    """The loads that run at the study's odd shape: transpose_fast takes its scalar path
    there (no vector is aligned when rows and cols are odd)."""
    return "LDG" if step.kernel == "transpose_fast" else None


def warp_times(study: str = DRAM_STUDY) -> list[dict]:
    """Per profiled step of the study: a warp's cycles (over its life, summed over the
    stall reasons of Nsight Compute, the issuing cycle included) waiting for global loads,
    at the barrier and on everything else; its round trips; the bytes it reads; the
    warps resident per SM; the profiler's clock (GHz); and the DRAM read rate (GB/s)."""
    out = []
    for step, r in studies.results(study):
        if r is None:
            continue
        m = r["metrics"]
        shape = tuple(r["shape"])
        warps = _warps(step.kernel, step.params, shape)
        inst = m["smsp__inst_executed.sum"]
        per_warp = {k: v * inst / warps for k, v in _stalls(m).items()}
        total = sum(per_warp.values())
        loads, barrier = per_warp.get("long_scoreboard", 0.0), per_warp.get("barrier", 0.0)
        # a variant step (the exercise's worked solution) launches like its registry
        # kernel, but its round trips are read in its own SASS
        k = studies.step_kernel(step)
        p = k.resolve(step.params)
        trips = round_trips(_sass_order(k, p), _path_family(step))
        family = _path_family(step)
        width = _BYTES[family] if family else _ITEM[p["T"]]
        out.append({"step": _label(step), "kernel": step.kernel, "params": p,
                    "cycles": total, "loads": loads, "barrier": barrier,
                    "issue": per_warp.get("selected", 0.0), "reasons": per_warp,
                    "other": total - loads - barrier, "trips": trips,
                    "bytes": sum(trips) * width * WARP,
                    "resident": m["sm__warps_active.avg.pct_of_peak_sustained_active"] / 100 * 64,
                    "clock": m["sm__cycles_elapsed.avg"] / m["gpu__time_duration.sum"],
                    "read GB/s": m["dram__bytes_read.sum"] / m["gpu__time_duration.sum"],
                    "timed": None if step.variant else _share(step.kernel, shape, step.params)})
    return out


LITTLE_RATE = "bytes in flight / load wait, GB/s per SM"
DRAM_RATE = "DRAM read, GB/s per SM"


# little_table's two parts, so that each prints narrow: the law, and a warp's life.
LITTLE_PARTS = {"law": ("warps per SM", "B a warp reads (trips)", "load wait / trip, µs",
                        LITTLE_RATE, DRAM_RATE, "% copy, timed"),
                "life": ("warp life, µs", "load wait, % of life")}


def little_table(study: str = DRAM_STUDY, part: str | None = None) -> Table:
    """Little's law per profiled kernel, from the profiler's counters: with the wait for
    global loads as the latency, bytes in flight per SM (warps resident x the bytes a
    warp has in flight in a round trip) over that wait, in GB/s per SM at the profiler's
    clock, beside the DRAM read rate the profiler measured per SM and the timed rate (not
    under the profiler). And a warp's life, with the share of it spent waiting for its
    loads: the rest (barrier, stores, issuing) is what the law leaves out. (Warps x
    bytes / life would only restate the read rate: in a steady state it is that rate.)
    `part` ("law" or "life", `LITTLE_PARTS`) prints only those columns beside the kernel."""
    if part is not None and part not in LITTLE_PARTS:
        raise ValueError(f"part must be one of {sorted(LITTLE_PARTS)}, not {part!r}")
    sms = records.recorded_device()["sm_count"]     # the profiled GPU's, as its read rate
    out = []
    for w in warp_times(study):
        trips = len(w["trips"]) or 1
        wait = w["loads"] / trips / w["clock"] / 1e3           # µs per round trip
        life = w["cycles"] / w["clock"] / 1e3                   # µs
        out.append({"kernel": w["step"],
                    "warps per SM": f"{w['resident']:.1f}",
                    "B a warp reads (trips)": f"{w['bytes']:,} ({trips})",
                    "load wait / trip, µs": f"{wait:.2f}",
                    LITTLE_RATE: f"{w['resident'] * w['bytes'] / trips / wait / 1e3:.1f}",
                    "warp life, µs": f"{life:.2f}",
                    "load wait, % of life": f"{100 * w['loads'] / w['cycles']:.0f}%",
                    DRAM_RATE: f"{w['read GB/s'] / sms:.1f}",
                    "% copy, timed": w["timed"]})
    shape = studies.get(study).shapes[0] if out else ODD
    columns = list(out[0]) if out else ["kernel"]
    if part and out:
        columns = ["kernel", *LITTLE_PARTS[part]]
    what = {"law": "Little's law", "life": "a warp's life"}.get(part, "Little's law and a warp's life")
    return Table(out, columns,
                 title=f"{what} ({_shape_text(shape)}, float; Nsight "
                       f"Compute at the profiler's base clock{_clock_text(study)}, {sms} SMs; "
                       f"{'' if part == 'life' else '% copy: the timed rate, '}{records.source()})",
                 pct_decimals=1)


def _clock_text(study: str = DRAM_STUDY) -> str:
    """', X GHz': the profiler's clock in the study's first profiled run (cycles /
    duration), or nothing where the recording lacks it."""
    ws = warp_times(study)
    return f", {ws[0]['clock']:.2f} GHz" if ws else ""


def queueing(study: str = DRAM_STUDY) -> str:
    """The copy's wait per round trip against the one-tile padded transpose's, which has
    twice the bytes in flight per round trip: near the DRAM limit, more requests in
    flight mostly lengthen the queue, so the wait grows and the rate grows less."""
    ws = {w["step"]: w for w in warp_times(study)
          if w["kernel"] == "copy"
          or (w["kernel"] == "transpose_padded" and w["params"].get("STACK", 1) == 1)}
    copy = next((w for w in ws.values() if w["kernel"] == "copy"), None)
    tile = next((w for w in ws.values() if w["kernel"] == "transpose_padded"), None)
    if copy is None or tile is None:
        return "the profiled counters of this comparison are not in this recording"

    def per_trip(w):
        trips = len(w["trips"]) or 1
        return w["bytes"] / trips, w["loads"] / trips / w["clock"] / 1e3

    (cb, cw), (tb, tw) = per_trip(copy), per_trip(tile)
    shape = studies.get(study).shapes[0]
    return (f"under the profiler, float, {_shape_text(shape)}: the copy has {cb:,.0f} bytes a "
            f"warp in flight per round trip (on average) and waits {cw:.2f} µs a round trip; "
            f"the one-tile padded transpose has {tb:,.0f} bytes ({tb / cb:.1f} times as many) "
            f"and waits {tw:.2f} µs ({tw / cw:.1f} times as long)")


def plot_warp_time(study: str = DRAM_STUDY, ax=None):
    """A warp's life per profiled step, in microseconds at the profiler's clock, split
    into waiting for its global loads, waiting at the barrier and everything else (issuing
    included), with the bytes it reads and in how many round trips."""
    import matplotlib.pyplot as plt
    from gemm_kernels.notebook.evidence import stall_colour
    ws = warp_times(study)
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 0.6 * max(len(ws), 1) + 1.6))
    if not ws:
        ax.text(0.5, 0.5, "the profiled counters are not in this recording", ha="center")
        ax.set_axis_off()
        return ax.figure
    y = list(range(len(ws)))[::-1]
    left = [0.0] * len(ws)
    parts = (("loads", "waiting for its global loads", stall_colour("long scoreboard")),
             ("barrier", "waiting at __syncthreads()", stall_colour("barrier")),
             ("issue", "issuing instructions", "0.45"),
             ("rest", "every other wait", "0.8"))
    ws = [{**w, "rest": w["other"] - w["issue"]} for w in ws]
    for key, label, colour in parts:
        vals = [w[key] / w["clock"] / 1e3 for w in ws]
        ax.barh(y, vals, left=left, color=colour, label=label)
        left = [a + b for a, b in zip(left, vals)]
    for yy, w, end in zip(y, ws, left):
        trips = " + ".join(map(str, w["trips"]))
        ax.text(end + 0.05, yy, f"reads {w['bytes']:,} B, loads {trips}", va="center", fontsize=8)
    ax.set_yticks(y, [w["step"] for w in ws], fontsize=9)
    ax.set_xlim(0, max(left) * 1.2)
    ax.set_xlabel("one warp's life, µs at the profiler's clock (from the stall counters)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    ax.set_title(f"Where a warp's time goes ({_shape_text(studies.get(study).shapes[0])}, "
                 "float, Nsight Compute)", fontsize=10)
    ax.figure.tight_layout()
    return ax.figure


# ------------------------------------------------------------------ DRAM and L2

def dram_table(study: str = DRAM_STUDY) -> Table:
    """Per profiled step: DRAM bytes read and written, each over the bytes of one
    matrix, the L2 hit rate, the instructions executed relative to the padded kernel with
    one tile per block, and the timed rate as a share of the device copy."""
    pairs = [(s, r) for s, r in studies.results(study) if r is not None]
    base = next((r["metrics"]["smsp__inst_executed.sum"] for s, r in pairs
                 if s.kernel == "transpose_padded" and s.params.get("STACK") == 1), None)
    rows = []
    for step, r in pairs:
        m, shape = r["metrics"], tuple(r["shape"])
        matrix = shape[0] * shape[1] * _ITEM[kernel_of(step.kernel).resolve(step.params)["T"]]
        rows.append({"step": _label(step),
                     "DRAM read / matrix": m["dram__bytes_read.sum"] / matrix,
                     "DRAM written / matrix": m["dram__bytes_write.sum"] / matrix,
                     "L2 hit rate (%)": m.get("lts__t_sector_hit_rate.pct"),
                     "instructions, relative to the one-tile padded kernel":
                         m["smsp__inst_executed.sum"] / base if base else None,
                     "timed % of device copy": _share(step.kernel, shape, step.params)})
    return Table(rows, list(rows[0]) if rows else ["step"],
                 title=f"DRAM, L2 and instructions ({_shape_text(studies.get(study).shapes[0])}, "
                       f"float, Nsight Compute; {records.recording_label()})", pct_decimals=1)


def unwritten_text(study: str = DRAM_STUDY) -> str:
    """How much less than one matrix the profiled kernels wrote to DRAM, next to the L2
    cache's size (the recorded GPU's device attribute)."""
    pairs = [(s, r) for s, r in studies.results(study) if r is not None]
    if not pairs:
        return "the profiled counters are not in this recording"
    shape = tuple(pairs[0][1]["shape"])
    matrix = shape[0] * shape[1] * 4
    short = [(matrix - r["metrics"]["dram__bytes_write.sum"]) / 1e6 for _, r in pairs]
    l2 = records.recorded_device()["l2_bytes"]
    return (f"one float matrix: {matrix / 1e6:.1f} MB; written to DRAM by the kernels: "
            f"{min(short):.0f} to {max(short):.0f} MB less than that; L2 cache: "
            f"{l2 / 1e6:.1f} MB ({l2 / 2**20:.0f} MiB, from cudaDevAttrL2CacheSize)")


def ruled_out(study: str = DRAM_STUDY) -> Table:
    """Appendix A's checks in one table, each with the printed evidence and a one-line
    reading: section 5's latency against the stall counter, whether a round trip waits
    longer with more in flight, whether bytes in flight predict two tiles' gain, whether
    the kernels differ in DRAM bytes or L2 hits, and where partial sectors can apply."""
    ws = warp_times(study)
    rows = []

    def add(question, evidence, reading):
        rows.append({"question": question, "evidence (printed from the recording)": evidence,
                     "reading": reading})

    def per_trip(w):
        trips = len(w["trips"]) or 1
        wait = w["loads"] / trips / w["clock"] / 1e3                 # µs per round trip
        return w["bytes"] / trips, wait, w["resident"] * w["bytes"] / trips / wait / 1e3

    copy = next((w for w in ws if w["kernel"] == "copy"), None)
    tiles = {w["params"].get("STACK"): w for w in ws if w["kernel"] == "transpose_padded"
             and w["params"].get("ORDER") == "x->row"}
    shape = _shape_text(studies.get(study).shapes[0])
    if copy is not None:
        add("Is the latency from Little's law plausible?",
            latency_check(studies.get(study).shapes[0], check=True),
            "yes: both a good part of a microsecond")
    if copy is not None and 1 in tiles:
        (cb, cw, _), (tb, tw, _) = per_trip(copy), per_trip(tiles[1])
        add("Does a round trip wait longer with more bytes in flight?",
            f"copy: {cb:,.0f} B a warp, {cw:.2f} µs; one-tile transpose: {tb:,.0f} B, "
            f"{tw:.2f} µs",
            "yes: more in flight, a longer wait, as in section 5.3's ROWS sweep")
    if 1 in tiles and 2 in tiles:
        (_, _, one), (_, _, two) = per_trip(tiles[1]), per_trip(tiles[2])
        add("Do bytes in flight predict two tiles' gain?",
            f"two tiles over one, the law's rate per SM (warps x bytes a round trip / load "
            f"wait a round trip, GB/s per SM at the profiler's clock) {two:.1f} / {one:.1f} = "
            f"{two / one:.2f}; timed: {tiles[2]['timed']:.1f}% / "
            f"{tiles[1]['timed']:.1f}% = {tiles[2]['timed'] / tiles[1]['timed']:.2f}",
            "no: about the same prediction, yet two tiles run faster")
    dram = list(dram_table(study))
    if dram:
        read = [r["DRAM read / matrix"] for r in dram]
        written = [r["DRAM written / matrix"] for r in dram]
        add("Do the kernels move different DRAM bytes?",
            f"DRAM read: {min(read):.2f} to {max(read):.2f} matrix; written: "
            f"{min(written):.2f} to {max(written):.2f} matrix",
            "no: each reads about one matrix and writes a little less than one")
        hits = [r["L2 hit rate (%)"] for r in dram if r["L2 hit rate (%)"] is not None]
        if hits:
            add("Does the L2 hit rate differ between them?",
                f"{min(hits):.1f}% to {max(hits):.1f}%",
                "no: about the same for every profiled kernel")
    sectors = {r["shape"]: r["sectors per warp access, reading in"]
               for r in sectors_per_access(types=("float",))}
    add("Can partial sectors explain the gains at 8192 x 8192?",
        "; ".join(f"{k}: {v} sectors a warp read" for k, v in sectors.items()),
        "no: at 8192 x 8192 every access fills its sectors; they can matter only at the "
        "ragged shape")
    return Table(rows, ["question", "evidence (printed from the recording)", "reading"],
                 title=f"What was checked, and what it rules out (float; counters: Nsight "
                       f"Compute at {shape}; {records.source()})")


# ------------------------------------------------------------------ block orders

def first_wave(order: str, shape=ODD, params: dict | None = None, sms: int | None = None):
    """(tile rows, tile columns, {(tile row, tile column) of `in`: launch number}) for the
    blocks the GPU holds at once (blocks per SM from the occupancy calculator x SMs), in
    one of three block orders of the one-tile padded transpose: "x->col", "x->row" or
    "diagonal" (transpose_diagonal's renumbering)."""
    name = "transpose_diagonal" if order == "diagonal" else "transpose_padded"
    p = {"T": "float", **(params or {})}
    if order != "diagonal":
        p = {**p, "ORDER": order, "STACK": 1}
    k = kernel_of(name)
    full = k.resolve(p)
    if sms is None:
        rec = records.current()
        sms = rec.device["sm_count"] if rec else 132
    at_once = analysis.kernel_occupancy(name, full).blocks_per_sm * sms
    tile = full["TILE"]
    ty, tx = math.ceil(shape[0] / tile), math.ceil(shape[1] / tile)
    gx, gy, _ = k.grid(full, tuple(shape))
    taken = {}
    for b in range(min(at_once, gx * gy)):
        x, y = b % gx, b // gx
        if order == "x->col":
            tile_rc = (y, x)
        elif order == "x->row":
            tile_rc = (x, y)
        else:                                  # transpose_diagonal's map
            tile_y = b % gy
            tile_rc = (tile_y, (b // gy + tile_y) % gx)
        taken[tile_rc] = b
    return ty, tx, taken


def pieces(taken: dict, tile: int, shape, item: int = 4) -> dict:
    """What the blocks of `taken` ({(tile row, tile column) of `in`: ...}) read and
    write, as pieces of matrix rows (contiguous stretches of memory): for "in" and for
    "out", how many pieces and their mean length in bytes (the last tile of a row or
    column cut at the matrix's edge)."""
    out = {}
    for what, tiles, (rows, cols) in (("in", taken, shape),
                                      ("out", {(c, r) for r, c in taken}, shape[::-1])):
        runs = {}
        for r, c in sorted(tiles):
            runs.setdefault(r, []).append(c)
        n, total = 0, 0
        for r, cs in runs.items():
            height = min(tile, rows - r * tile)
            start = prev = cs[0]
            for c in cs[1:] + [None]:
                if c is not None and c == prev + 1:
                    prev = c
                    continue
                width = min((prev + 1) * tile, cols) - start * tile
                n += height
                total += height * width * item
                if c is not None:
                    start = prev = c
        out[what] = {"pieces": n, "bytes": total / n if n else 0}
    return out


def plot_block_orders(shape=ODD, params: dict | None = None,
                      orders=("x->col", "x->row", "diagonal")):
    """For each block order (a column), the tiles of `in` that the blocks resident at one
    time read (top) and the tiles of `out` they write (bottom), one square per tile
    (drawn at least a few points wide, so that a single tile shows) coloured by launch
    number, with how many pieces of rows (contiguous stretches of memory) that makes and
    how long they are."""
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(4.3 * len(orders), 9.5))     # 13 wide for the three orders
    gs = fig.add_gridspec(2, len(orders), height_ratios=[shape[0], shape[1]], hspace=0.35,
                          wspace=0.12)
    tile = kernel_of("transpose_padded").resolve(params)["TILE"]
    dots = None
    for col, order in enumerate(orders):
        ty, tx, taken = first_wave(order, shape, params)
        got = pieces(taken, tile, shape)
        for row, (what, dims) in enumerate((("in", shape), ("out", shape[::-1]))):
            ax = fig.add_subplot(gs[row, col])
            h, w = (ty, tx) if what == "in" else (tx, ty)
            ax.add_patch(plt.Rectangle((-0.5, -0.5), w, h, facecolor="0.93", edgecolor="0.6"))
            cells = sorted(taken.items(), key=lambda x: -x[1])       # first launched on top
            ys, xs = zip(*[(r, c) if what == "in" else (c, r) for (r, c), _ in cells])
            dots = ax.scatter(xs, ys, c=[b for _, b in cells], cmap="viridis", marker="s",
                              s=14, linewidths=0, vmin=0, vmax=len(taken))
            ax.set_xlim(-0.5, w - 0.5)
            ax.set_ylim(h - 0.5, -0.5)
            ax.set_aspect("equal")
            verb = "read" if what == "in" else "written"
            ax.set_title(f"{order}: {what}, {verb}", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
            g = got[what]
            ax.set_xlabel(f"{dims[0]:,} x {dims[1]:,}: {g['pieces']:,} pieces of rows,\n"
                          f"{g['bytes']:,.0f} bytes each on average", fontsize=8)
    fig.subplots_adjust(left=0.03, right=0.88)
    bar = fig.colorbar(dots, cax=fig.add_axes([0.91, 0.3, 0.012, 0.4]))
    bar.set_label("launch number of the block (dark: launched first)", fontsize=8)
    fig.suptitle(f"Which tiles the {len(taken):,} blocks resident at one time take, "
                 f"{_shape_text(shape)}, float (one tile each; grey: tiles not yet taken)",
                 fontsize=10)
    return fig


def block_order_pieces(shape=ODD, params: dict | None = None,
                       orders=("x->col", "x->row", "diagonal")) -> Table:
    """`plot_block_orders`'s captions as a table, so that they read at full size: per
    block order, the pieces of rows that the blocks resident at one time read of `in` and
    write of `out`, and their mean length in bytes."""
    tile = kernel_of("transpose_padded").resolve(params)["TILE"]
    out = []
    for order in orders:
        got = pieces(first_wave(order, shape, params)[2], tile, shape)
        out.append({"block order": order,
                    "in, read: pieces of rows": got["in"]["pieces"],
                    "in: bytes a piece": round(got["in"]["bytes"]),
                    "out, written: pieces of rows": got["out"]["pieces"],
                    "out: bytes a piece": round(got["out"]["bytes"])})
    return Table(out, list(out[0]), title=f"the picture's numbers: blocks resident at one "
                 f"time, {_shape_text(shape)}, float, one tile each")


def out_pieces_line(shape=ODD) -> str:
    """A.3's one line at another shape than its table (the main path's square one): in
    how many pieces of rows, and how long, the blocks resident at one time write `out`
    under `x->col` and under `x->row`."""
    rows = {r["block order"]: r for r in block_order_pieces(shape, orders=("x->col", "x->row"))}
    parts = [f"{o}: {r['out, written: pieces of rows']:,} pieces of about "
             f"{r['out: bytes a piece']:,} bytes" for o, r in rows.items()]
    return (f"out written by the blocks resident at one time, {_shape_text(shape)}, float, "
            f"one tile each: " + "; ".join(parts))


def latency_check(shape=SQUARE, check: bool = False) -> str:
    """The copy's latency measured at `shape`: its long-scoreboard stall cycles per warp,
    over its round trips (from the SASS), over the profiler's clock (the measurement);
    then the latency Little's law implies and the share of a warp's life spent waiting
    for its loads (the law's model counts all of it). With `check`, a third line: the
    law's latency times that share, a check of the arithmetic, not a second measurement
    (the share comes from the same counter)."""
    w = _copy_wait(shape)
    if w is None:
        return "the copy's profiled counters are not in this recording"
    trips = len(w["trips"])
    law, waiting = _copy_chain(shape)["latency"] * 1e6, w["loads"] / w["cycles"]
    lines = [f"copy, {_shape_text(shape)}, measured by the stall counter: {w['loads']:,.0f} cycles a "
             f"warp waits for its loads / {trips} round trips / {w['clock']:.2f} GHz (the "
             f"profiler's clock) = {_stall_latency(shape):.2f} µs a round trip.",
             f"Little's law's estimate from the table above: {law:.2f} µs. The warps wait for "
             f"their loads {100 * waiting:.0f}% of their life, not all of it as the law's model assumes."]
    if check:
        lines.append(f"The law's latency x that share: {law:.2f} µs x {100 * waiting:.0f}% = "
                     f"{law * waiting:.2f} µs, beside the stall counter's {_stall_latency(shape):.2f} µs.")
    return "\n".join(lines)


# ------------------------------------------------------------------ the exercise, profiled

SOLUTION_STUDY = "ch10_solution_profile"


def _register_solution():
    """The worked solution becomes a variant that a study's step may name (its profile,
    `SOLUTION_STUDY`), by the name its timed row carries."""
    from gemm_kernels.exercises.notebooks import solution_kernel
    studies.register_variant(SOLUTION, lambda: solution_kernel(EXERCISE))


def solution_profile(shape=SQUARE, study: str = SOLUTION_STUDY) -> Table:
    """The worked solution profiled beside the chapter's copy (one run, same counters as
    the copy's latency argument): warps resident per SM, a warp's long-scoreboard stall
    cycles, its round trips and the bytes it has in flight in each (SASS), and the wait
    per round trip at the profiler's clock. A table titled 'Not recorded yet' until the
    study's rows exist."""
    found = [w for w in warp_times(study)]
    if len(found) < len(studies.get(study).steps):
        return Table([], ["kernel"], title=f"Not recorded yet: the worked solution profiled "
                                           f"beside the copy at {_shape_text(shape)}.")
    rows = []
    for w in found:
        trips = w["trips"]
        rows.append({"kernel": w["step"],
                     "warps resident per SM": f"{w['resident']:.1f}",
                     "round trips (SASS)": len(trips),
                     "bytes a warp has in flight, per round trip":
                         ", then ".join(f"{n * 4 * WARP:,}" for n in trips),
                     "cycles a warp waits for its loads": f"{w['loads']:,.0f}",
                     "share of a warp's life waiting for loads": f"{100 * w['loads'] / w['cycles']:.0f}%",
                     "wait per round trip, µs": f"{w['loads'] / len(trips) / w['clock'] / 1e3:.2f}"})
    return Table(rows, list(rows[0]),
                 title=f"float, {_shape_text(shape)}, Nsight Compute, one run; "
                       f"{records.source()}")


def solution_profile_reading(shape=SQUARE, study: str = SOLUTION_STUDY) -> str:
    """`solution_profile`'s two rows read side by side, in three lines: the round trips
    and the bytes a warp has in flight in each; the wait per round trip (stall cycles /
    round trips / that row's profiler clock) and the whole wait of a warp in µs; the share
    of a warp's life spent waiting for loads. Each ratio is worked out from the rows, so
    that the text above the lines needs no number of its own. '' until both rows exist."""
    found = warp_times(study)
    if len(found) < len(studies.get(study).steps) or len(found) < 2:
        return ""
    copy, sol = found[0], found[1]

    def each(w):   # µs per round trip, µs in all, share of life, bytes per round trip
        trips = len(w["trips"])
        total = w["loads"] / w["clock"] / 1e3
        return total / trips, total, w["loads"] / w["cycles"], w["bytes"] / trips
    (c_trip, c_all, c_life, c_bytes), (s_trip, s_all, s_life, s_bytes) = each(copy), each(sol)
    return "\n".join([
        f"round trips: {len(copy['trips'])} (copy) -> {len(sol['trips'])} (worked solution); "
        f"bytes a warp has in flight per round trip, on average: {c_bytes:,.0f} -> "
        f"{s_bytes:,.0f} ({s_bytes / c_bytes:.1f} x)",
        f"wait per round trip: {c_trip:.2f} -> {s_trip:.2f} µs ({s_trip / c_trip:.2f} x); "
        f"a warp's whole wait for its loads: {c_all:.2f} -> {s_all:.2f} µs "
        f"({100 * (s_all / c_all - 1):+.0f}%)",
        f"share of a warp's life spent waiting for its loads: {100 * c_life:.0f}% -> "
        f"{100 * s_life:.0f}%"])


# ------------------------------------------------------------------ chapter 04's bound

def smem_bound(kernel: str, params: dict | None = None) -> dict:
    """Chapter 04's shared-memory bound applied to a tiled transpose: an SM serves one
    wavefront per clock (the device's clock as it reports it), and one block of the kernel
    costs the bank model's wavefronts (every shared store and load of all its warps) for
    its TILE x TILE x STACK elements, each read once and written once in global memory. So
    shared memory alone allows at most SMs x clock x elements per wavefront x (2 x the
    element's bytes) of the GB/s the chapter counts. An upper bound: it leaves out global
    memory, the barrier and everything else. {"wavefronts", "elements", "per element",
    "bound GB/s"}."""
    from gemm_kernels.memory import ch10_11_instructions
    p = kernel_of(kernel).resolve(params or {})
    props = records.described_device()
    if not props or not props.get("sm_count") or not props.get("sm_clock_mhz"):
        raise ValueError("the bound needs the device's sm_count and sm_clock_mhz")
    wf = sum(a.analysis.wavefronts for a in ch10_11_instructions.block_accesses(kernel, p))
    elements = p["TILE"] * p["TILE"] * p.get("STACK", 1)
    per_byte = elements / wf * 2 * _ITEM[p["T"]]
    return {"wavefronts": wf, "elements": elements, "per element": wf / elements,
            "bound GB/s": props["sm_count"] * props["sm_clock_mhz"] * 1e6 * per_byte / 1e9}


# (label, kernel, parameters) of the bound's table: the shared tile before and after its
# padding, one tile per block, in both types.
BOUND_ROWS = (
    ("shared tile, no padding", "transpose_smem", {}),
    ("padded tile, PAD = 1", "transpose_padded", {"PAD": 1, "ORDER": "x->col", "STACK": 1}),
)


def smem_bound_table(shape=SQUARE, types=("float", "double"), rows=BOUND_ROWS) -> Table:
    """Per kernel and type: the bank model's wavefronts per element (a block's shared
    stores and loads over its elements), the shared-memory bound they allow
    (`smem_bound`) and the rate timed at `shape`, as GB/s and as a share of that bound."""
    out, seen = [], []
    for label, kernel, change in rows:
        for t in types:
            p = {"T": t, **change}
            b = smem_bound(kernel, p)
            r = _recorded(kernel, shape, p)
            seen.append(r)
            rate = r["gbps"]["median"] if r else None
            out.append({"kernel": label, "T": t,
                        "shared wavefronts per element (bank model)": f"{b['per element']:.2f}",
                        "shared-memory bound, GB/s": round(b["bound GB/s"]),
                        "timed, GB/s": rate,
                        "timed, % of the bound": f"{100 * rate / b['bound GB/s']:.0f}%"
                        if rate else "-"})
    props = records.described_device()
    return Table(out, list(out[0]), title=f"{_shape_text(shape)}, TILE = 32, ROWS = 8: bound = "
                 f"{props['sm_count']} SMs x {props['sm_clock_mhz'] / 1e3:.2f} GHz x one "
                 f"wavefront per SM per clock; {records.rows_label(seen)}")


def padded_heatmap(shape=SQUARE, t: str = "float", pad: int = 1):
    """transpose_padded's recorded sweep at `shape` as a heat map over ROWS and TILE, each
    cell the best rate over ORDER and STACK (the sweep's other tunables)."""
    from gemm_kernels.notebook import widgets
    ax = widgets.heatmap("transpose_padded", x="ROWS", y="TILE", fixed={"T": t, "PAD": pad})
    ax.set_title(f"transpose_padded, {t}, PAD = {pad}, {_shape_text(shape)}\nTB/s, each cell "
                 "the best over ORDER and STACK", fontsize=10)
    return ax


def plot_column_read(kernel: str, params: dict):
    """Warp 0's column read of the shared tile (the load after the barrier) drawn over the
    32 banks, with the kernel's element type, TILE and PAD in the title; a bank asked for
    more than one word is outlined in red (chapter 11's picture)."""
    from gemm_kernels.memory import ch10_11_instructions
    from gemm_kernels.notebook import ch11_wide
    import matplotlib.pyplot as plt
    p = kernel_of(kernel).resolve(params)
    ins = ch10_11_instructions.access(kernel, params)
    rows = len({a // 128 for a in ins.addresses if a is not None})
    label = (f"{kernel}, {p['T']}, TILE = {p['TILE']}, ROWS = {p['ROWS']}, "
             f"PAD = {p.get('PAD', 0)}: column read {ins.what}")
    _, ax = plt.subplots(figsize=(11, 0.2 * max(rows, 8) + 1.8))
    ax = ch11_wide.plot_wide_banks([(label, ins)], axes=[ax])[0]
    # chapter 11's title speaks of wide banks; a 4- or 8-byte read here needs only the 32 banks
    ax.figure.suptitle("One warp's column read over the 32 shared-memory banks: one wavefront "
                       "when its lanes use different banks (red: a bank asked for several "
                       "words; box label: lane)", fontsize=11)
    return ax


def warp_store_sectors(naive: bool, t: str = "float", tile: int = 32, shape=SQUARE) -> int:
    """The 32-byte sectors of `out` that one store instruction of warp 0 of block (0, 0)
    touches: the naive transpose writes its 32 lanes down a column of `out` (32 rows,
    one sector each), the tiled transposes along a row (the lanes' bytes side by side).
    Addresses as the kernels compute them, with the warp's row ty = 0."""
    rows = shape[0]
    item = _ITEM[t]
    # naive: out[c * rows + r] with c = lane, r = 0; tiled: out[(col0 + ty) * rows + row0 + tx]
    offsets = [(lane * rows if naive else lane) * item for lane in range(min(WARP, tile))]
    return len({o // SECTOR for o in offsets})


def _row_piece_sectors(rows: int, cols: int, item: int, tile: int):
    """(sectors touched, fewest possible) summed over every warp access along a row of a
    rows x cols row-major matrix tiled by `tile`: the warp's lanes cover up to `tile`
    consecutive elements of one row, the last tile column only what is left of it."""
    import numpy as np
    starts = np.arange(0, cols, tile)
    lanes = np.minimum(tile, cols - starts)                       # per tile column
    first = (np.arange(rows)[:, None] * cols + starts[None, :]) * item
    last = first + lanes[None, :] * item - 1
    touched = (last // SECTOR - first // SECTOR + 1).sum()
    fewest = rows * (-(-lanes * item // SECTOR)).sum()
    return int(touched), int(fewest), rows * len(starts)


def sectors_per_access(shapes=(SQUARE, ODD), types=("float", "double"), tile: int = 32) -> Table:
    """Why a ragged shape is harder, from the index arithmetic alone: the bytes of a row
    of `in` (rows x cols) and of `out` (cols x rows), and the 32-byte sectors a warp's
    access along a row touches on average, reading `in` and writing `out`, against the
    fewest its bytes could fill. A row whose bytes are not a multiple of 32 starts at a
    different place in a sector on every row, so most accesses straddle one sector more,
    and a tile's edge shares its sector with the neighbouring tile."""
    out = []
    for t in types:
        item = _ITEM[t]
        for rows, cols in shapes:
            row = {"T": t, "shape": _shape_text((rows, cols)),
                   "bytes per row: in, out": f"{cols * item:,}, {rows * item:,}"}
            for side, (r, c) in (("reading in", (rows, cols)), ("writing out", (cols, rows))):
                touched, fewest, n = _row_piece_sectors(r, c, item, tile)
                row[f"sectors per warp access, {side}"] = f"{touched / n:.2f} (fewest {fewest / n:.2f})"
            out.append(row)
    return Table(out, ["T", "shape", "bytes per row: in, out", "sectors per warp access, reading in",
                       "sectors per warp access, writing out"],
                 title=f"32-byte sectors touched by one warp access along a row, TILE = {tile}, "
                       f"averaged over every access (index arithmetic)")


def plot_tile_transpose(t: str = "float", tile: int = 32):
    """What one block does, on one TILE x TILE tile: a warp reads a row of the tile of
    `in` (coalesced) into the shared tile; after the barrier it reads a column of the
    shared tile and writes it as a row of the tile of `out` (coalesced). The naive
    transpose writes that row of `in` straight down a column of `out` instead, one sector
    per lane (the sector counts under the panels come from `warp_store_sectors`)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    fig, axes = plt.subplots(1, 3, figsize=(11, 4.8))
    blue, orange, red = "tab:blue", "tab:orange", "tab:red"
    coalesced = warp_store_sectors(False, t, tile)
    naive = warp_store_sectors(True, t, tile)
    panels = [
        ("tile (by, bx) of in", [(0, None, blue)],
         f"a warp reads row 0: {tile} consecutive {t}s,\n{coalesced} sectors of 32 bytes"),
        ("the shared tile", [(0, None, blue), (None, 0, orange)],
         "blue: stored as it was read (row 0)\norange: read back down column 0"),
        ("tile (bx, by) of out", [(0, None, orange), (None, 0, red)],
         f"tiled: column 0 written as row 0, {coalesced} sectors\n"
         f"red: the naive store of in's row 0, {naive} sectors"),
    ]
    for ax, (title, marks, note) in zip(axes, panels):
        ax.add_patch(Rectangle((0, 0), tile, tile, fill=False, lw=1.5))
        for r, c, colour in marks:
            if r is not None:
                ax.add_patch(Rectangle((0, r), tile, 1, color=colour, alpha=0.85))
            else:
                ax.add_patch(Rectangle((c, 0), 1, tile, color=colour,
                                       alpha=0.85 if colour != red else 0.6,
                                       hatch="//" if colour == red else None))
        ax.set_xlim(-1, tile + 1)
        ax.set_ylim(tile + 1, -1)                         # row 0 at the top, as in memory
        ax.set_aspect("equal")
        ax.set_xticks([0, tile - 1])
        ax.set_yticks([0, tile - 1])
        # sector boundaries along a row: 32 bytes of consecutive elements each
        for x in range(0, tile + 1, 32 // _ITEM[t]):
            ax.plot([x, x], [-0.8, 0], color="k", lw=0.8)
        ax.set_xlabel(f"column (ticks: 32-byte sectors)\n\n{note}",
                      fontsize=8.5)
        ax.set_ylabel("row", fontsize=8)
        ax.set_title(title, fontsize=10)
    fig.suptitle(f"One block's tile, {t}, TILE = {tile}: read from in row by row, read back "
                 "column by column (after __syncthreads) and written as rows of out",
                 fontsize=10)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ smaller pieces

def order_table(shapes=(SQUARE, ODD), types=("float", "double")) -> Table:
    """transpose_padded at its default TILE, ROWS, PAD in each ORDER and STACK: the timed
    share of the device copy at each shape."""
    p = kernel_of("transpose_padded").resolve({})
    rows = []
    for t in types:
        for order in ("x->col", "x->row"):
            for stack in (1, 2):
                c = {"T": t, "ORDER": order, "STACK": stack}
                rows.append({**c, **{f"% of device copy, {_shape_text(s)}":
                                     _share("transpose_padded", s, {**p, **c}) for s in shapes}})
    return Table(rows, list(rows[0]), title=f"transpose_padded, TILE = {p['TILE']}, ROWS = "
                 f"{p['ROWS']}, PAD = {p['PAD']} ({records.source()})", pct_decimals=1)


def memory_families(kernel: str, params: dict | None = None) -> list[str]:
    """The kinds of global and shared accesses in a kernel's SASS (LDG.128, STS, ...)."""
    k = kernel_of(kernel)
    body = analysis.instructions(compiler.sass(k, k.resolve(params)))
    return sorted({f for _, f, _ in body if f.split(".")[0] in ("LDG", "STG", "LDS", "STS")})


def tile_rates(kernel: str = "transpose_fast", tiles=(64, 32), shape=SQUARE,
               t: str = "float") -> Table:
    """The recorded rate of `kernel` at each TILE, every other parameter at its default:
    for the vector transpose, the default TILE = 64 (a 2-way conflict in the bank model)
    against TILE = 32 (none). The two differ in more than the conflict (the tile, a
    block's threads), so the table bounds the conflict's cost; it does not isolate it."""
    k = kernel_of(kernel)
    rows = []
    for tile in tiles:
        p = k.resolve({"T": t, "TILE": tile})
        r = _recorded(kernel, shape, p)
        rows.append({"TILE": tile, "threads a block": k.threads(p)[0] * k.threads(p)[1],
                     "GB/s": r["gbps"]["median"] if r else None,
                     "% of device copy": lookup.share(r) if r else None})
    return Table(rows, list(rows[0]),
                 title=f"{kernel}, {t}, {_shape_text(shape)}, other parameters at their defaults "
                       f"({records.source()})", pct_decimals=1)


def naive_sector_bound(shape=SQUARE, types=("float", "double")) -> Table:
    """The naive transpose against what its sectors allow. Per element the device copy
    moves the element's bytes in and out, in whole 32-byte sectors; the naive kernel reads
    its element coalesced but stores it as one element in a sector of its own
    (`warp_store_sectors`), so between the SMs and the L2 it moves the element's bytes
    plus a whole sector. Moving sectors as fast as the device copy, it would reach
    2 x element / (element + sector) of the copy's rate; beside that, what it reached."""
    rows = []
    for t in types:
        item = _ITEM[t]
        rows.append({"T": t,
                     "32-byte sectors per warp store instruction: naive": warp_store_sectors(True, t),
                     "coalesced": warp_store_sectors(False, t),
                     "sector bound, % of device copy": 100 * 2 * item / (item + SECTOR),
                     "timed, % of device copy": _share("transpose_naive", shape, {"T": t})})
    return Table(rows, list(rows[0]),
                 title=f"transpose_naive, {_shape_text(shape)}: sectors against the timed rate "
                       f"({records.source()})", pct_decimals=1)


NAIVE_STORE_STUDY = "ch10_naive_store"


def naive_store_l2(study: str = NAIVE_STORE_STUDY) -> Table:
    """What the naive store costs the L2, profiled beside the copy and the padded
    transpose (8192 x 8192, float and double): the write requests the L2 receives per
    warp store instruction, how busy the crossbar into the L2 and the L2's tag lookups
    are (each a share of its peak over the kernel's time), how busy DRAM is, and the
    kernel's time under the profiler."""
    pairs = [(s, r) for s, r in studies.results(study) if r is not None]
    rows = []
    for step, r in pairs:
        m = r["metrics"]
        rows.append({
            "kernel": step.label,
            "L2 write requests per warp store": (
                m["lts__t_requests_srcunit_tex_op_write.sum"]
                / m["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"]),
            "crossbar into the L2, % busy":
                m["lts__xbar2lts_cycles_active.avg.pct_of_peak_sustained_elapsed"],
            "L2 tag lookups, % busy": m["lts__t_tag_requests.avg.pct_of_peak_sustained_elapsed"],
            "DRAM, % busy": m["dram__throughput.avg.pct_of_peak_sustained_elapsed"],
            "time under the profiler (µs)": m["gpu__time_duration.sum"] / 1e3})
    shape = studies.get(study).shapes[0]
    return Table(rows, list(rows[0]) if rows else ["kernel"],
                 title=f"The L2 under each store ({_shape_text(shape)}, Nsight Compute, "
                       f"one launch each; {records.recording_label()})", pct_decimals=1)


# ------------------------------------------------------------------ the exercise, for the solution

EXERCISE = "10_in_flight"


LOAD = "if (r < rows && c < cols) v[i] = in[(size_t)r * cols + c];"
STORE = "if (r < rows && c < cols) out[(size_t)r * cols + c] = v[i];"
# (answer, [(text of the solution, replacement), ...]); None: the chapter's own copy
_BODY = """    T v[N];                                              // registers: the loops are unrolled
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int r = r0 + i * ROWS;
        if (r < rows && c < cols) v[i] = in[(size_t)r * cols + c];
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int r = r0 + i * ROWS;
        if (r < rows && c < cols) out[(size_t)r * cols + c] = v[i];
    }
"""
POINTERS = """    T v[N];
    const bool inside = c < cols;
    const T* src = in + (size_t)r0 * cols + c;
    T* dst = out + (size_t)r0 * cols + c;
#pragma unroll
    for (int i = 0; i < N; ++i)
        if (inside && r0 + i * ROWS < rows) v[i] = src[(size_t)i * ROWS * cols];
#pragma unroll
    for (int i = 0; i < N; ++i)
        if (inside && r0 + i * ROWS < rows) dst[(size_t)i * ROWS * cols] = v[i];
"""
MISTAKES = (
    ("the chapter's loop with #pragma unroll", None),
    ("all loads first, offsets in int", [(LOAD, "if (r < rows && c < cols) v[i] = in[r * cols + c];"),
                                         (STORE, "if (r < rows && c < cols) out[r * cols + c] = v[i];")]),
    ("all loads first, a transposing store out[c * rows + r]",
     [(STORE, "if (r < rows && c < cols) out[(size_t)c * rows + r] = v[i];")]),
    ("rows r0 + i instead of r0 + i * ROWS",
     [("const int r = r0 + i * ROWS;", "const int r = r0 + i;")] * 2),
    ("a load that tests only its column", [(LOAD, "if (c < cols) v[i] = in[(size_t)r * cols + c];")]),
    # right at ROWS = 8 by luck: why the grader also compiles ROWS = 4
    ("a count written in by hand, constexpr int N = 4",
     [("constexpr int N = TILE / ROWS;", "constexpr int N = 4;")]),
    # the right order in the source, and ptxas moves a store up at ROWS = 4: a pass with a note
    ("all loads first, through pointers (size_t)", [(_BODY, POINTERS)]),
)


def _mistake_source(changes) -> str:
    if changes is None:
        text = kernel_of("copy").source_text()
        loop = "    for (int dy = 0; dy < TILE; dy += ROWS) {"
        at = text.find(loop, text.index("__global__ void copy("))
        if at < 0:
            raise ValueError("the chapter's copy no longer holds its loop")
        return text[:at] + "#pragma unroll\n" + text[at:]
    text = solution_source(EXERCISE)
    for old, new in changes:
        if old not in text:
            raise ValueError(f"the solution no longer holds {old!r}")
        text = text.replace(old, new, 1)
    return text


STEPS = ("compile", "static", "correct", "speed")     # the grader's steps 1 to 4


def _first_clause(detail: str, about: str | None = None) -> str:
    """The clause of a grader message that names the problem, so that a table cell stays
    a line: its first sentence's first '; '-separated part (or the first that mentions
    `about`), cut before the advice that follows a second ': '."""
    parts = detail.split(". ")[0].split("; ")
    part = next((x for x in parts if about and about in x), parts[0])
    head, *rest = part.split(": ", 2)
    return ": ".join([head, *rest[:1]])


def mistakes() -> Table:
    """The solution changed into natural mistakes and two rewrites (right in the source's order,
    which ptxas changes in the SASS), each graded without a GPU (step 3 on the CPU, every thread
    emulated): the first step that fails and what it says, or step 2's note."""
    from gemm_kernels.exercises.grader import FAIL, grade
    rows = []
    for what, changes in MISTAKES:
        report = grade(EXERCISE, _mistake_source(changes), gpu=False)
        bad = next((s for s in report.steps if s.status == FAIL), None)
        static = next((s for s in report.steps if s.name == "static"), None)
        rows.append({"answer": what,
                     "fails at step": f"{STEPS.index(bad.name) + 1} ({bad.name})" if bad else "-",
                     "what the grader says (first clause)": _first_clause(bad.detail) if bad else
                     "passes; step 2 notes: " + _first_clause(static.detail if static else "",
                                                              "ROWS = 4")})
    return Table(rows, ["answer", "fails at step", "what the grader says (first clause)"],
                 title="the solution changed into common mistakes, graded without a GPU "
                       f"(SASS order read from {_ptxas()})")


# ------------------------------------------------------------------ part 2 of the exercise
# Reasoning, graded: the loads a thread of copy_smem has in flight at other ROWS (the
# barrier after the shared stores waits for every load anyway, so ptxas sends them all
# first), the bytes a warp has in flight, and Little's law per SM: how many warps a
# smaller ROWS would need to keep the same bytes in flight, against the warp slots an SM
# has. The answers are worked out here from the SASS and the GPU, never typed in.

PREDICTED = "copy_smem"
PREDICT_ROWS = (4, 16)
BASE_ROWS = 8
ANSWER_KEYS = tuple([f"loads, ROWS={r}" for r in PREDICT_ROWS]
                    + [f"bytes a warp, ROWS={r}" for r in PREDICT_ROWS]
                    + ["warps needed, ROWS=16"])
# Asked in part 2 and worked out in its answers, not graded (the warps at ROWS = 16 follow
# from it).
SM_BYTES = f"bytes an SM keeps in flight, ROWS={BASE_ROWS}"


def _first_trip(rows: int) -> int:
    return round_trips(accesses(PREDICTED, {"T": "float", "TILE": 32, "ROWS": rows}))[0]


def in_flight_key() -> dict:
    """The answers of part 2: for copy_smem in float, TILE = 32, the loads before the first
    store at each ROWS of PREDICT_ROWS and the bytes a warp has in flight then (SASS
    compiled here), and the warps an SM would need at ROWS = 16 to keep in flight what
    ROWS = 8 keeps with every warp slot of the SM full (Little's law, the same latency)."""
    slots = _device()["max_threads_per_sm"] // WARP
    per_warp = {r: _first_trip(r) * WARP * _ITEM["float"] for r in (*PREDICT_ROWS, BASE_ROWS)}
    key = {f"loads, ROWS={r}": _first_trip(r) for r in PREDICT_ROWS}
    key.update({f"bytes a warp, ROWS={r}": per_warp[r] for r in PREDICT_ROWS})
    key["warps needed, ROWS=16"] = slots * per_warp[BASE_ROWS] // per_warp[16]
    key["warp slots per SM"] = slots
    key[SM_BYTES] = slots * per_warp[BASE_ROWS]
    return key


def in_flight_problems(answer: dict | None) -> list[str]:
    """What is wrong in the student's answers to part 2, one line each (empty: all
    right); a missing or unanswered key is a problem of its own."""
    if not answer or all(answer.get(k) is None for k in ANSWER_KEYS):
        return ["not answered yet: fill in my_answer, then run the cell again"]
    key, out = in_flight_key(), []
    load_bytes = WARP * _ITEM["float"]
    for k in ANSWER_KEYS:
        got = answer.get(k)
        if got is None:
            out.append(f"{k}: not answered")
        elif not _same(got, key[k]):
            loads = answer.get(k.replace("bytes a warp", "loads"))
            follows = (k.startswith("bytes") and isinstance(loads, (int, float))
                       and _same(got, loads * load_bytes))
            hint = ("the barrier after the shared stores waits for every load, so what "
                    "does ptxas lose by sending all of a thread's TILE / ROWS loads first?"
                    if k.startswith("loads") else
                    f"it follows from your {loads!r} loads ({WARP} lanes x {_ITEM['float']} "
                    "bytes each): your multiplication is right, the load count is what is off"
                    if follows else
                    f"a load of a warp moves {WARP} lanes x {_ITEM['float']} bytes"
                    if k.startswith("bytes") else
                    "bytes in flight per SM = warps x bytes a warp; keep that product "
                    f"with {key['warp slots per SM']} warps at ROWS = {BASE_ROWS}")
            out.append(f"{k}: {got!r} is not it ({hint})")
    return out


def _same(got, want) -> bool:
    return isinstance(got, (int, float)) and abs(got - want) <= 1e-9 * max(1, want)


def check_in_flight(answer: dict | None) -> None:
    """Prints the verdict on part 2; once every answer is right, the reading of the last
    one against the warp slots an SM has."""
    problems = in_flight_problems(answer)
    if problems:
        print("part 2: not yet\n  " + "\n  ".join(problems))
        return
    key = in_flight_key()
    need, slots = key["warps needed, ROWS=16"], key["warp slots per SM"]
    print(f"part 2: all right. At ROWS = 16 an SM would need {need} warps to keep the bytes "
          f"in flight of ROWS = {BASE_ROWS} with every slot full, and it has {slots} warp "
          "slots: with more rows of threads a thread has fewer loads, and the SM cannot "
          "hold the warps that would make up for it." if need > slots else
          f"part 2: all right: {need} warps, within the {slots} warp slots of an SM.")


def worked_solution() -> display.Text:
    """The worked solution's kernel, for the chapter's folded reveal under *Check your
    answer*."""
    return display.Text(solution_source(EXERCISE))


def in_flight_answers() -> Table:
    """Part 2's answers, each with how it follows (worked out as `in_flight_key` does:
    from the SASS compiled here and the GPU's warp slots), for the chapter's folded
    reveal."""
    key = in_flight_key()
    how = {"loads": "loads before the first store in the SASS (copy_smem, float, TILE = 32)",
           "bytes": f"loads x {WARP} lanes x {_ITEM['float']} bytes",
           "warps": f"the SM's bytes at ROWS = {BASE_ROWS}, over the bytes a warp at ROWS = 16"}
    rows = [{"question": k, "answer": key[k], "how": how[k.split()[0].rstrip(",")]}
            for k in ANSWER_KEYS]
    rows.insert(len(ANSWER_KEYS) - 1, {
        "question": SM_BYTES, "answer": key[SM_BYTES],
        "how": f"{key['warp slots per SM']} warps x the bytes a warp at ROWS = {BASE_ROWS}"})
    return Table(rows, ["question", "answer", "how"],
                 title="part 2: the answers (SASS compiled here by "
                       f"{_ptxas()})")


def assert_in_flight(answer: dict | None) -> None:
    """The grade of part 2: raises AssertionError with what is wrong."""
    problems = in_flight_problems(answer)
    if problems:
        raise AssertionError("10_in_flight, part 2: " + "; ".join(problems))


# From transpose_smem to the padded kernel's defaults, one change per row: the picture of
# section 4 sets the two side by side, and they differ in three things, not only padding.
PADDING_STEPS = (
    ("transpose_smem: no padding, x->col, one tile per block", "transpose_smem", {}),
    ("+ PAD = 1 (padding alone)", "transpose_padded", {"PAD": 1, "ORDER": "x->col", "STACK": 1}),
    ("+ x->row block order", "transpose_padded", {"PAD": 1, "ORDER": "x->row", "STACK": 1}),
    ("+ two tiles per block (STACK = 2): this chapter's configuration", "transpose_padded",
     {"PAD": 1, "ORDER": "x->row", "STACK": 2}),
)


# The three block orders of section 4's picture, one tile per block (the kernels of
# section 5's evidence table): the same loads, which tiles run together changed.
BLOCK_ORDERS = (
    ("x->col", "transpose_padded", {"PAD": 1, "ORDER": "x->col", "STACK": 1}),
    ("x->row", "transpose_padded", {"PAD": 1, "ORDER": "x->row", "STACK": 1}),
    ("diagonal (transpose_diagonal)", "transpose_diagonal", {"PAD": 1}),
)


def _shares_table(steps, first: str, what: str, shapes, types) -> Table:
    """One row per (label, kernel, parameters) of `steps`: the timed share of the device
    copy (timed beside each row) at each type and shape; the title says `what` the rows
    are and names the GPU and the runs. A star marks a rate timed in another run than the
    rest of its column, and the title says so."""
    rows, seen, runs = [], [], {}      # runs: column -> the run of each of its rows
    for label, kernel, change in steps:
        row = {first: label}
        for t in types:
            for s in shapes:
                try:
                    r = lookup.recorded(kernel, s, {"T": t, **change})
                except LookupError:
                    r = None
                seen.append(r)
                share = lookup.share(r) if r else None
                row[f"{t}, {_shape_text(s)}"] = "-" if share is None else f"{share:.1f}%"
                runs.setdefault(f"{t}, {_shape_text(s)}", []).append(r and r.get("run"))
        rows.append(row)
    odd = _other_run_rows(runs)
    for col, i in odd:
        rows[i][col] += "*"
    note = "; *: timed in another run than the rest of its column" if odd else ""
    return Table(rows, list(rows[0]), title="% of the device copy timed beside each row, "
                 f"TILE = 32, ROWS = 8, {what} ({records.rows_label(seen)}{note})")


def _other_run_rows(runs: dict) -> list[tuple[str, int]]:
    """(column, row index) of each rate timed in another run than most of its column,
    since rates drift between runs by as much as some of the differences read down a
    column; empty when every column is one run."""
    odd = []
    for col, got in runs.items():
        known = [x for x in got if x]
        most = max(known, key=known.count) if known else None
        odd += [(col, i) for i, x in enumerate(got) if x and x != most]
    return odd


def padding_steps(shapes=(SQUARE, ODD), types=("float", "double")) -> Table:
    """`PADDING_STEPS` at the default TILE and ROWS, so that the padding's own effect is
    read apart from the block order and the stacked tiles."""
    return _shares_table(PADDING_STEPS, "step", "one change per row", shapes, types)


def block_orders(shapes=(SQUARE, ODD), types=("float", "double")) -> Table:
    """`BLOCK_ORDERS`: the padded tile, one tile per block, in each of the three orders."""
    return _shares_table(BLOCK_ORDERS, "block order", "PAD = 1, one tile per block",
                         shapes, types)


# (label, kernel, parameters) of the chapter's bottom line: where it starts, the shared
# tile before its padding, then the padded kernel twice: the lesson (padding alone), and
# this chapter's configuration, with the two knobs (ORDER, STACK) on top.
BOTTOM_LINE = (
    ("naive", "transpose_naive", {}),
    ("shared tile, no padding", "transpose_smem", {}),
    ("padded tile, PAD = 1 alone (one tile per block, section 3's kernel)", "transpose_padded",
     PADDING_STEPS[1][2]),
    ("padded tile + x->row order + two tiles per block (the chapter's configuration)", "transpose_padded",
     PADDING_STEPS[-1][2]),
)

# Section 4's chart: the main kernels, with the padded kernel both as the lesson (padding
# alone) and in this chapter's configuration (x->row, STACK = 2), each bar labelled as which.
MAIN_CHART = MAIN_KERNELS[:-1] + (
    ("padded, PAD = 1 (lesson)", "transpose_padded", PADDING_STEPS[1][2]),
    ("padded + x->row + STACK = 2\n(gain measured, not explained)", "transpose_padded", PADDING_STEPS[-1][2]),
)


def bottom_line(t: str = "float", shapes=(SQUARE, ODD), knobs: bool = True) -> str:
    """The chapter's result in a few lines: each step of `BOTTOM_LINE` as a share of the
    device copy timed beside it at both shapes, then what the block order alone adds (the
    one-tile padded kernel, x->row against x->col), in percentage points. Without `knobs`,
    the main path's lines only: up to the padded tile alone, no block order, no stacked
    tiles (the appendix's)."""
    def share(kernel, shape, change):
        got = _share(kernel, shape, {"T": t, **change})
        return "-" if got is None else f"{got:.1f}%"
    at = " and ".join(_shape_text(s) for s in shapes)
    lines = [f"{t}, % of the device copy at {at}:"]
    steps = BOTTOM_LINE if knobs else BOTTOM_LINE[:3]
    lines += [f"  {label}: {' and '.join(share(k, s, ch) for s in shapes)}"
              for label, k, ch in steps]
    if not knobs:
        return "\n".join(lines)
    gains = []
    for s in shapes:
        row, col = (_share("transpose_padded", s, {"T": t, "STACK": 1, "ORDER": o})
                    for o in ("x->row", "x->col"))
        gains.append("-" if row is None or col is None else f"{row - col:+.1f} points")
    lines.append(f"block order alone (padded, one tile per block), x->row instead of x->col: "
                 f"{' and '.join(gains)}")
    return "\n".join(lines)


_register_solution()
