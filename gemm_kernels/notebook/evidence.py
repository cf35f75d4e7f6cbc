"""The studies as a chapter shows them: one table per study (each step's rate, its share
of the reference measured beside it, the binary's registers and blocks per SM), a bar
plot of a timed study, and the stall reasons of a profiled one as stacked bars.

Every number comes from the recording (or is "not recorded"); the run that measured
the rows is named under each table and plot. One helper reads no recording: how many
FFMAs a kernel's main loop issues between a load and the first use of its value, from
the SASS compiled here.
"""
from __future__ import annotations

import math
import re

from gemm_kernels.core import analysis, device
from gemm_kernels.core.table import Table
from gemm_kernels.measure import records, studies, timing

_STALL_PREFIX = "smsp__average_warps_issue_stalled_"
_STALL_SUFFIX = "_per_issue_active.ratio"
NOT_RECORDED = "not recorded yet"
_REFERENCE_NAMES = {"cublas": "cuBLAS", "cublas_dgemm": "cuBLAS DGEMM",
                    "device_copy": "the device copy"}


def _reference(row) -> str:
    name = (row.get("reference") or {}).get("kernel", "the reference")
    return _REFERENCE_NAMES.get(name, name)


def _shape_text(shape) -> str:
    return " x ".join(map(str, shape))


def _runs_text(runs, rec=None) -> str:
    """How many processes measured the rows, in words for the student (the run ids
    themselves are provenance for the recording, not for the reader), and the recording
    (`rec`, default the one shown)."""
    if not runs:
        return "no run recorded"
    label = rec.label if rec is not None and not device.is_live() else records.recording_label()
    return ("measured in one run" if len(runs) == 1 else f"measured in {len(runs)} runs") \
        + f" ({label})"


def _runs_line(pairs, rec=None) -> str:
    missing = sum(1 for _, r in pairs if r is None)
    return _runs_text(studies.runs(pairs), rec) + (f"; {missing} step(s) {NOT_RECORDED}"
                                                   if missing else "")


def table(name: str, shape=None) -> Table:
    """A timed study at one shape: per step its rate, % of the reference timed beside it,
    registers of the binary that was timed, and the blocks per SM those allow."""
    st = studies.get(name)
    shape = tuple(shape or st.shapes[0])
    pairs = studies.results(name, shape)
    rows = []
    for step, r in pairs:
        row = {"step": step.label, "kernel": step.kernel}
        if r is None:
            row["rate"] = NOT_RECORDED
        else:
            unit = "GFLOP/s" if "gflops" in r else "GB/s"
            rate = r["gflops" if unit == "GFLOP/s" else "gbps"]["median"]
            share = timing.share(r)
            row["rate"] = f"{rate:,.0f} {unit}"
            row["share"] = analysis.percent(share / 100) if share is not None else "-"
            regs = (r.get("binary") or {}).get("registers")
            row["registers"] = regs
            if regs is not None:
                row["blocks/SM"] = analysis.kernel_occupancy(step.kernel, r["params"],
                                                             registers=regs).blocks_per_sm
        rows.append(row)
    cols = ["step", "kernel", "rate", "share", "registers", "blocks/SM"]
    refs = list(dict.fromkeys(_reference(r) for _, r in pairs if r and r.get("reference")))
    ref = refs[0] if len(refs) == 1 else \
        f"each step's own reference ({' or '.join(refs)})" if refs else "the reference"
    title = (f"{st.question} ({_shape_text(shape)}; share = % of {ref} "
             f"timed in the same process) — {_runs_line(pairs)}")
    return Table([{c: row.get(c) for c in cols} for row in rows], cols, title=title)


def plot(name: str, shape=None, ax=None, run_line: bool = True):
    """The timed study at one shape as horizontal bars, each labelled with its share of
    the reference; steps not recorded are drawn as empty rows saying so. `run_line`:
    name the run that measured the rows under the plot."""
    import matplotlib.pyplot as plt
    from gemm_kernels.core.launch import DTYPES, kernel_of
    st = studies.get(name)
    if len({kernel_of(s.kernel).op in DTYPES for s in st.steps}) > 1:
        raise ValueError(f"{name} times GEMMs (FLOP/s) and copies or transposes (bytes/s): "
                         "one axis cannot show both; use table() for its rows")
    shape = tuple(shape or st.shapes[0])
    pairs = studies.results(name, shape)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.5 * len(pairs) + 1.5))
    labels = [s.label for s, _ in pairs]
    rates = [(r["gflops"]["median"] / 1e3 if "gflops" in r else r["gbps"]["median"])
             if r else 0 for _, r in pairs]
    unit = next(("TFLOP/s" if "gflops" in r else "GB/s" for _, r in pairs if r), "")
    y = range(len(pairs))[::-1]
    ax.barh(list(y), rates, color="tab:blue")
    for yi, (step, r), v in zip(y, pairs, rates):
        share = timing.share(r) if r else None
        text = NOT_RECORDED if r is None else \
            f"{v:,.1f} {unit}" + (f"  ({share:.0f}% of {_reference(r)})"
                                  if share is not None else "")
        ax.text(v, yi, " " + text, va="center", fontsize=9)
    ax.set_yticks(list(y), labels, fontsize=9)
    ax.set_xlabel(unit)
    ax.set_xlim(0, max(rates + [1]) * 1.6)
    ax.set_title(f"{st.question} ({_shape_text(shape)})", fontsize=10)
    if run_line:
        ax.figure.text(0.01, 0.005, _runs_line(pairs), fontsize=8, color="0.35")
    ax.figure.tight_layout(rect=(0, 0.03 if run_line else 0, 1, 1))
    return ax.figure


def profile_elsewhere(rec, prof, where: str) -> str:
    """The sentence a chapter adds to its banner when its Nsight Compute study (`prof`)
    was recorded on another GPU than its timings (`rec`): `where` names the sections
    that show it. "" when both come from one recording (or there is no study)."""
    if prof is None or prof is rec:
        return ""
    return (f" Its Nsight Compute study ({where}): {prof.label}, another GPU of the same "
            f"architecture; it is named wherever it is shown.")


def profiled_and_timed(name: str, shape=None, rec=None) -> list[dict]:
    """Per profiled step of study `name` at `shape` (default its first): its label
    ("label"), its time under Nsight Compute in ms ("profiled_ms"), the SM clock it ran
    at in MHz, its cycles over its time to 10 MHz ("clock_mhz", None without the cycle
    counter), and the time the rate timed at the same configuration and shape implies
    ("timed_ms", None where that was not timed), from `rec` (default the one shown)."""
    from gemm_kernels.measure import lookup
    st = studies.get(name)
    shape = tuple(shape or st.shapes[0])
    out = []
    for step, r in studies.results(name, shape, rec):
        m = (r or {}).get("metrics", {})
        ns, cycles = m.get("gpu__time_duration.sum"), m.get("sm__cycles_elapsed.avg")
        if not ns:
            continue
        try:
            timed = lookup.recorded(studies.step_kernel(step).name, shape, step.params, rec)
            ms = 2 * math.prod(shape) / (timed["gflops"]["median"] * 1e9) * 1e3
        except LookupError:
            ms = None
        out.append({"label": step.label, "profiled_ms": ns / 1e6, "timed_ms": ms,
                    # to 10 MHz: what the check needs
                    "clock_mhz": round(cycles / ns * 1e3, -1) if cycles else None})
    return out


def profiled_against_timed(name: str, shape=None, rec=None) -> str:
    """Why a profiled study's times are longer than its timed rates imply: Nsight Compute
    holds the SM clock low while it measures (its default --clock-control base). Per step
    of study `name` (`profiled_and_timed`): the clock it ran at (its cycles over its
    time), its time, and the time the rate timed at the same configuration and shape
    implies, where that was timed (in `rec`, default the one shown)."""
    steps = profiled_and_timed(name, shape, rec)
    clocks = [s["clock_mhz"] for s in steps if s["clock_mhz"]]
    said = [f"{s['label']}: {s['profiled_ms']:.3g} ms profiled, {s['timed_ms']:.3g} ms at the "
            f"timed rate" if s["timed_ms"] is not None else
            f"{s['label']}: {s['profiled_ms']:.3g} ms profiled (not timed at this size)"
            for s in steps]
    if not said:
        return f"study {name}: not recorded"
    gpu = ((rec or records.current()).device or {})
    top = gpu.get("sm_clock_mhz")
    held = (f"at {min(clocks):,.0f} to {max(clocks):,.0f} MHz (its cycles over its time)"
            if clocks else "at a lower clock")
    if clocks and min(clocks) == max(clocks):
        held = f"at {clocks[0]:,.0f} MHz (its cycles over its time)"
    return (f"On the {gpu.get('name', 'recorded GPU')}, Nsight Compute held the SM clock "
            f"{held} while it measured"
            + (f", below the {top:,.0f} MHz the GPU reports as its top clock" if top else "")
            + ", so its times are longer than the timed runs': " + "; ".join(said)
            + ". Compare profiled times with each other, not with timed rates.")


def stall_reasons(row: dict) -> dict[str, float]:
    """Warps stalled per issued instruction, by reason (ncu's warp state), from a
    profiled row; reasons named in plain words (long_scoreboard -> long scoreboard)."""
    out = {}
    for k, v in (row.get("metrics") or {}).items():
        if k.startswith(_STALL_PREFIX) and k.endswith(_STALL_SUFFIX):
            out[k[len(_STALL_PREFIX):-len(_STALL_SUFFIX)].replace("_", " ")] = v
    return out


# One colour per stall reason in every chapter's plot, so "long scoreboard" looks the
# same wherever the student meets it; reasons not listed share a neutral grey.
STALL_ORDER = ("long scoreboard", "short scoreboard", "mio throttle", "lg throttle",
               "barrier", "not selected", "wait", "dispatch stall", "math pipe throttle",
               "branch resolving", "no instruction", "membar", "drain", "tex throttle")


def stall_colour(reason: str):
    """The reason's colour (the same in every plot); grey for "other" and the rest."""
    from gemm_kernels.core.style import series_styles
    if reason not in STALL_ORDER:
        return "0.75"
    return series_styles(len(STALL_ORDER))[STALL_ORDER.index(reason)][0]


def stall_bars(ax, got, top: int = 6, fontsize: int = 9, fixed_order: bool = False):
    """Stacked bars on `ax`, one per (label, stall reasons) pair of `got`: the cycles a
    warp waits per issued instruction by reason, the `top` largest over all bars in
    their own colours and the rest as "other". The segments stack largest first, or
    with `fixed_order` in the order of STALL_ORDER (long scoreboard first), so that
    several figures of one chapter stack their reasons alike."""
    totals = {}
    for _, st in got:
        for k, v in st.items():
            if k != "selected":    # the issuing warp itself, not a wait
                totals[k] = totals.get(k, 0) + v
    keys = sorted(totals, key=totals.get, reverse=True)[:top]
    if fixed_order:
        keys.sort(key=lambda k: STALL_ORDER.index(k) if k in STALL_ORDER else len(STALL_ORDER))
    y = list(range(len(got)))[::-1]
    left = [0.0] * len(got)
    for k in keys + ["other"]:
        vals = [st.get(k, 0) if k != "other" else
                sum(v for kk, v in st.items() if kk not in keys and kk != "selected")
                for _, st in got]
        ax.barh(y, vals, left=left, color=stall_colour(k), label=k)
        left = [a + b for a, b in zip(left, vals)]
    ax.set_yticks(y, [label for label, _ in got], fontsize=fontsize)
    ax.set_xlabel("cycles a warp waits per issued instruction, by reason")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=9, frameon=False)


def stall_plot(name: str = "stalls", kernels=None, top: int = 6, ax=None,
               run_line: bool = True, rec=None, fixed_order: bool = False):
    """Stacked bars: per step of a profiled study, the cycles a warp waits per issued
    instruction, split by reason (the `top` largest over the steps shown, the rest
    together). `kernels` keeps only the steps of those kernels; `run_line`: name the
    run that profiled them under the plot; `rec`: the recording (default the one shown);
    `fixed_order`: stack the reasons in STALL_ORDER's order (`stall_bars`)."""
    import matplotlib.pyplot as plt
    pairs = [(s, r) for s, r in studies.results(name, rec=rec)
             if kernels is None or s.kernel in kernels]
    got = [(s, stall_reasons(r)) for s, r in pairs if r is not None]
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.55 * max(len(pairs), 1) + 1.8))
    if not got:
        ax.text(0.5, 0.5, f"stall reasons {NOT_RECORDED}", ha="center", va="center")
        ax.set_axis_off()
        return ax.figure
    stall_bars(ax, [(s.label, st) for s, st in got], top, fontsize=9,
               fixed_order=fixed_order)
    ax.set_title(f"Where the warps wait ({_shape_text(studies.get(name).shapes[0])}, "
                 "Nsight Compute)", fontsize=10)
    if run_line:
        ax.figure.text(0.01, 0.005, _runs_line(pairs, rec), fontsize=8, color="0.35")
    ax.figure.tight_layout(rect=(0, 0.03 if run_line else 0, 1, 1))
    return ax.figure


def counters(name: str, columns: dict, shape=None, kernels=None, rec=None) -> Table:
    """A profiled study's counters per step: `columns` maps a heading to a metric name,
    or to a (metric name, divisor) pair to show the value divided (bytes as GB: 1e9).
    Values as recorded (in `rec`, default the one shown); a metric the row lacks shows as
    '-'. `kernels` keeps only the steps of those kernels."""
    st = studies.get(name)
    shape = tuple(shape or st.shapes[0])
    pairs = [(s, r) for s, r in studies.results(name, shape, rec)
             if kernels is None or s.kernel in kernels]
    rows = []
    for step, r in pairs:
        row = {"step": step.label}
        for head, spec in columns.items():
            metric, divisor = (spec, None) if isinstance(spec, str) else spec
            v = None if r is None else r["metrics"].get(metric)
            row[head] = v / divisor if v is not None and divisor else v
        rows.append(row)
    return Table(rows, ["step", *columns], title=f"{st.question} ({_shape_text(shape)}, "
                                                  f"Nsight Compute) — {_runs_line(pairs, rec)}")


# ---- chapter 10: chapter 07's kernel on a pre-transposed A

_WITH_A, _WITH_AT, _TRANSPOSE = "float4", "float4_at", "transpose_fast"


def pretransposed_a(shapes=None) -> Table:
    """Chapter 10's question about chapter 07's kernel, one row per shape of the study
    `studies.PRETRANSPOSED_A` (or of `shapes`, some of them): the GEMM's time with A as
    it is (float4) and with A^T given (float4_at), what the second saves per GEMM, the
    time of the transpose that makes A^T (transpose_fast on the M x K matrix), the net
    saving when one GEMM uses the A^T (saving - transpose), and how many GEMMs on the
    same A^T repay the transpose. Times are the medians of the timed calls, in
    microseconds, from the recorded rates. A row is worked out only when its three
    rows come from one run; otherwise its note says why not (not recorded, several runs)."""
    st = studies.get(studies.PRETRANSPOSED_A)
    us = "µs"
    cols = ["shape", f"GEMM, A as is ({us})", f"GEMM, A^T given ({us})",
            f"saving per GEMM ({us})", f"transpose of A ({us})", f"net, one GEMM ({us})",
            "GEMMs to repay", "note"]
    rows, seen, incomplete = [], [], False
    for shape in shapes or st.shapes:
        pairs = studies.results(st.name, shape)
        got = {s.kernel: r for s, r in pairs}
        runs = studies.runs(pairs)
        seen += runs
        row = {"shape": _shape_text(shape)}
        missing = [k for k in (_WITH_A, _WITH_AT, _TRANSPOSE) if got.get(k) is None]
        if missing or len(runs) > 1:
            incomplete = True
            row["note"] = (f"{', '.join(missing)} {NOT_RECORDED}" if missing else
                           f"rows from {len(runs)} different runs: not compared")
            rows.append(row)
            continue
        a, at, tr = (timing.times_ms(got[k]) for k in (_WITH_A, _WITH_AT, _TRANSPOSE))
        saving, transpose = 1e3 * (a["median"] - at["median"]), 1e3 * tr["median"]
        row.update({cols[1]: 1e3 * a["median"], cols[2]: 1e3 * at["median"],
                    cols[3]: saving, cols[4]: transpose, cols[5]: saving - transpose,
                    cols[6]: math.ceil(transpose / saving) if saving > 0 else "never"})
        overlap = a["min"] <= at["max"] and at["min"] <= a["max"]
        row["note"] = ("the timed calls of the two GEMMs overlap (min..max)" if overlap else
                       "every timed call of the faster GEMM beat every call of the other")
        rows.append(row)
    src = _runs_text(list(dict.fromkeys(seen)))
    if incomplete:
        src += "; not every row recorded"
    return Table(rows, cols, title=f"{st.question} (median times of the timed calls) — {src}")


def loop_instructions(kernels, params: dict | None = None,
                      families=("LDG.128", "STS", "STS.128", "LDS.128", "FFMA")) -> Table:
    """Per kernel, the main loop's instructions of each family (one trip: one tile of
    A and B copied and multiplied) and the registers of a thread, from the SASS compiled
    here for sm_90 (no GPU needed). `params`: {kernel: its parameters}."""
    from gemm_kernels.core.launch import kernel_of
    rows = []
    for name in kernels:
        k = kernel_of(name)
        s = analysis.summary(k, k.resolve((params or {}).get(name)))
        h = s["loop_histogram"]
        rows.append({"kernel": name, "registers": s["registers"],
                     **{f: h.get(f, 0) for f in families}})
    return Table(rows, ["kernel", "registers", *families],
                 title="main loop, one trip per tile, SASS compiled here for sm_90")


# ---- the SASS of a main loop: how long a loaded value waits before it is used

_REG = re.compile(r"\bR(\d+)(\.64)?\b")
_NO_DEST = ("STS", "STG", "STL", "ST", "RED", "ATOM", "BAR", "BRA", "LDGSTS", "DEPBAR")


def regs_read(text: str) -> set[int]:
    """The registers an instruction reads (its first operand is written, except for
    stores, barriers and branches, which write no register)."""
    op, _, operands = text.partition(" ")
    parts = operands.split(",")
    src = parts if op.split(".")[0] in _NO_DEST else parts[1:]
    out = set()
    for m in _REG.finditer(",".join(src)):
        out.update((int(m.group(1)), int(m.group(1)) + 1) if m.group(2) else
                   (int(m.group(1)),))
    return out


def regs_loaded(family: str, text: str) -> set[int]:
    """The registers a load writes: R<n> and the next ones for .64 / .128 loads."""
    m = re.match(r"\S+\s+R(\d+)", text)
    if not m:
        return set()
    width = {"64": 2, "128": 4}.get(family.rpartition(".")[2], 1)
    return set(range(int(m.group(1)), int(m.group(1)) + width))


def load_to_use(body) -> dict[str, list[int]]:
    """For a loop body ((address, family, text) per instruction, as
    `analysis.main_loop` gives it): per kind of load that fills registers ("LDS" from
    shared memory, "LDG" from global memory), the FFMAs issued between each load and the
    first instruction that reads what it loaded. The loop runs again after its last
    instruction, so a use may come in the next trip."""
    out = {"LDS": [], "LDG": []}
    n = len(body)
    for i, (_, family, text) in enumerate(body):
        kind = family.split(".")[0]
        dest = regs_loaded(family, text) if kind in out else set()
        if not dest:
            continue
        ffma = 0
        for j in range(1, n + 1):
            _, f2, t2 = body[(i + j) % n]
            if regs_read(t2) & dest:
                break
            ffma += f2 == "FFMA"
        out[kind].append(ffma)
    return out


def load_to_use_table(kernels, params: dict | None = None) -> Table:
    """Per kernel (its main loop, compiled here for sm_90) and kind of load (from shared
    memory, from global memory into registers): how many there are, and how many FFMAs
    the warp issues before it first uses a loaded value (fewest, and the middle one)."""
    import statistics

    from gemm_kernels.core import compiler
    from gemm_kernels.core.launch import kernel_of
    rows = []
    for name in kernels:
        k = kernel_of(name)
        body = analysis.main_loop(compiler.sass(k, k.resolve((params or {}).get(name))))
        for kind, gaps in load_to_use(body).items():
            rows.append({"kernel": name,
                         "loads from": "shared memory" if kind == "LDS" else "global memory",
                         "loads per trip": len(gaps),
                         "FFMAs before first use: fewest": min(gaps) if gaps else None,
                         "median": statistics.median_low(gaps) if gaps else None})
    return Table(rows, list(rows[0]), title="FFMAs issued between a load into registers "
                 "and the first use of what it loaded (main loop, SASS compiled here for "
                 f"sm_90 by ptxas {compiler.ptxas_version()})")


# ---- the GPU the rows were measured on, and the order of a kernel's global accesses

def global_accesses(kernel, params: dict | None = None) -> list[str]:
    """The global loads (LDG), global stores (STG) and exits of a kernel in the order
    of its SASS (compiled here for sm_90), as 'LDG', 'LDG.128', 'STG', 'EXIT', ..."""
    from gemm_kernels.core import compiler
    from gemm_kernels.core.launch import kernel_of
    k = kernel_of(kernel)
    body = analysis.instructions(compiler.sass(k, k.resolve(params)))
    return [f for _, f, _ in body if f.split(".")[0] in ("LDG", "STG", "EXIT")]


def loads_before_first_store(accesses) -> int:
    """How many global loads come before the first global store in a list of accesses
    (as `global_accesses` gives it): the loads a thread has in flight at once before
    it must wait for one of them."""
    n = 0
    for f in accesses:
        if f.startswith("STG"):
            break
        n += f.startswith("LDG")
    return n
