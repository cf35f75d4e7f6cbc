"""Chapter 02's helpers around the sector and line model (`memory.ch01_02_sectors`): the
width of the L1's data array (shared memory's 32 banks) in lines, the recorded counters under readable names, their
tables with every percentage to one decimal, the Nsight Compute command that counts
them again on the reader's GPU, the prediction check with a word on the usual slip, and
the alignment section's counts, tables and bank picture (the L1's two stages: the tag
stage's distinct lines, four per wavefront, and the data stage's words on the busiest
bank; the counters of both stages and the bank conflicts side by side, kept apart from
our own arithmetic on them); the pencil count's picture of a row of B at 2047, and
Appendix E's commands with the divisor and the counts to compare.

Why a module: the chapter's cells stay one call long, and every number they print comes
from the recording (or from the device's properties) through these functions.
"""
from __future__ import annotations


from gemm_kernels.core import device
from gemm_kernels.measure import records, studies
from gemm_kernels.core.kernels import get as get_kernel
from gemm_kernels.memory import ch01_02_sectors as model
from gemm_kernels.core.table import bytes_text
from gemm_kernels.notebook.display import Text

L1_STUDY, CACHES_STUDY = "ch02_l1_lines", "ch02_caches"
LINE_BYTES = device.SMEM_BANKS * device.SMEM_BANK_BYTES       # 32 banks x 4 bytes = 128


# ---------------------------------------------------------------- the L1's bandwidth

def l1_bandwidth(props: dict | None = None) -> Text:
    """The width of the data array the L1 shares with shared memory (its 32 banks of 4
    bytes, documented for shared memory) as bytes per clock, and the whole
    GPU's bandwidth at that width from the SM count and the clock."""
    props = records.described_device() if props is None else props
    gbps = device.smem_bandwidth_gbps(props)
    # A data-stage wavefront reads at most one word from each bank: the width is an upper
    # bound on its bytes, not one line (a bank-conflicted wavefront reads a single word).
    head = (f"One SM's L1: {device.SMEM_BANKS} banks x {device.SMEM_BANK_BYTES} bytes per "
            f"clock = {LINE_BYTES} bytes per clock at most (a data-stage wavefront reads at "
            f"most one word from each bank).")
    if not gbps:
        return Text(head)
    return Text(f"{head}\n{props.get('name', 'The GPU')}: {props['sm_count']} SMs x "
                f"{props['sm_clock_mhz']:,.0f} MHz x {LINE_BYTES} B = {gbps / 1e3:,.1f} TB/s.")


def naive_l1_bytes(params=None, size: int = 2048) -> Text:
    """The naive kernel that reads down a column (x->row, BLOCK = 32) at `size`^3: the
    bytes of the sectors its global loads asked of the L1 (counted by Nsight Compute in
    `L1_STUDY`) per second of the timed run, as a share of the L1's width: far below it,
    and about one sector per cycle, as one wavefront per line (each bringing one sector)
    at one wavefront per cycle gives."""
    from gemm_kernels.measure import lookup
    params = {"BLOCK": 32, "MAPPING": "x->row"} if params is None else params
    sectors = profiled("naive", params).get(model.SECTORS_LD)
    width = device.smem_bandwidth_gbps(records.described_device())
    if sectors is None or not width:
        return Text("The naive kernel's sector count is not in this recording.")
    gflops = lookup.measure_or_lookup("naive", (size,) * 3, params)["gflops"]["median"]
    rate = sectors * model.SECTOR / (2 * size ** 3 / (gflops * 1e9))
    lim = model.line_limit("naive", params)
    per_line = lim["sectors"] / lim["lines"]
    return Text(f"The naive kernel ({model.label('naive', params)}) at {size}^3 moved "
                f"{bytes_text(rate)}/s of load sectors through its L1: "
                f"{rate / (width * 1e9):.0%} of the "
                f"{bytes_text(width * 1e9)}/s above.\nEach line its warps "
                f"touch costs one data-stage wavefront here and brings {per_line:.0f} sector of "
                f"{model.SECTOR} bytes: at one wavefront per cycle, "
                f"{per_line * model.SECTOR / model.LINE:.0%} of the {model.LINE} bytes per clock.")


# ---------------------------------------------------------------- recorded counters

def profiled(kernel: str, params: dict, study: str = L1_STUDY) -> dict:
    """The counters Nsight Compute recorded for one configuration of a study of this
    chapter ({} when that step was not recorded)."""
    from gemm_kernels.measure import studies
    want = get_kernel(kernel).resolve(params)
    for step, row in studies.results(study):
        if step.kernel == kernel and get_kernel(kernel).resolve(step.params) == want:
            return (row or {}).get("metrics", {})
    return {}


def _one_decimal(table, columns):
    """Percent columns of a table written with one decimal each ("95.0%", not "95%"
    beside "87.6%")."""
    for row in table:
        for c in columns:
            if isinstance(row.get(c), (int, float)):
                row[c] = f"{row[c]:.1f}%"
    return table


def l1_table(study: str = L1_STUDY):
    """`ch01_02_sectors.l1_table`, its percentages to one decimal."""
    return _one_decimal(model.l1_table(study), ["busiest L1 stage (% of its peak)",
                                                "L1 hit rate (%)"])


FROM_L2 = "lts__t_sectors_srcunit_tex_op_read.sum"


def caches_table(study: str = CACHES_STUDY):
    """`ch01_02_sectors.caches_table`, its percentages to one decimal, with a column
    computed from two of its counters: the share of the requested sectors the L1 did
    not fetch from the L2 (1 - fetched / requested), next to its hit rate."""
    t = model.caches_table(study)
    for row, (step, rec) in zip(t, _results(study)):
        m = (rec or {}).get("metrics", {})
        got = m.get(FROM_L2), m.get(model.SECTORS_LD)
        row["1 - fetched / requested (%)"] = 100 * (1 - got[0] / got[1]) if all(got) else None
    cols = list(t.columns)
    cols.insert(cols.index("L1 hit rate (%)") + 1, "1 - fetched / requested (%)")
    t.columns = cols
    return _one_decimal(t, ["L1 hit rate (%)", "1 - fetched / requested (%)",
                            "L2 hit rate (%)"])


def _results(study: str):
    from gemm_kernels.measure import studies
    return studies.results(study)


def l2_count(size: int = 4096, blocks=(8, 32), study: str = CACHES_STUDY) -> Text:
    """The count of the DRAM appendix: a block of BLOCK x BLOCK threads fetches BLOCK / 4
    sectors from the L2 per step if blocks shared nothing (BLOCK / 8 for A, BLOCK / 8 for
    B), against the sectors Nsight Compute counted; then the small block's timed rate as a
    share of the large one's at `size` and at 2048^3, where everything fits in the L2 (the
    same share at both says the extra traffic does not make the gap)."""
    counted, fetched, lines = {}, {}, []
    for b in blocks:
        n_blocks = size * size // (b * b)
        counted[b] = n_blocks * size * b / 4
        fetched[b] = profiled("coalesced", {"BLOCK": b}, study).get(FROM_L2)
        lines.append(f"BLOCK = {b:2d}: {n_blocks:,} blocks of {b * b:,} threads; counted "
                     f"{counted[b] / 1e6:,.0f} million sectors from L2, measured "
                     + (f"{fetched[b] / 1e6:,.0f} million" if fetched[b] else "-"))
    lo, hi = blocks[0], blocks[-1]
    lines.append(f"The count says {counted[lo] / counted[hi]:.0f} times as many at BLOCK = "
                 f"{lo}" + (f"; the profiler measured {fetched[lo] / fetched[hi]:.1f} times "
                            "as many." if fetched[lo] and fetched[hi] else "."))
    from gemm_kernels.measure import lookup
    share = {n: lookup.measure_or_lookup("coalesced", (n,) * 3, {"BLOCK": lo})["gflops"]["median"]
             / lookup.measure_or_lookup("coalesced", (n,) * 3, {"BLOCK": hi})["gflops"]["median"]
             for n in (size, 2048)}
    lines.append(f"Timed: BLOCK = {lo} runs at {share[size]:.0%} of BLOCK = {hi}'s rate at "
                 f"{size}^3, and at {share[2048]:.0%} of it at 2048^3.")
    return Text("\n".join(lines))


# ---------------------------------------------------------------- below the limit

STAGES_STUDY = "ch02_l1_stages"
# The stages of the load path, in the order a load meets them, as % of each one's peak
# over the cycles the SM was active: the SM's load pipe, the L1's input of load
# instructions, its data stage (one wavefront per line), the write-back of loaded data
# to the registers; then the busiest of every L1 stage Nsight Compute measures.
_PCT = ".avg.pct_of_peak_sustained_active"
STAGES = {"load pipe of the SM (%)": "sm__inst_executed_pipe_lsu" + _PCT,
          "L1 input of loads (%)": "l1tex__lsuin_requests" + _PCT,
          "L1 data stage (%)": "l1tex__data_pipe_lsu_wavefronts" + _PCT,
          "write-back to registers (%)": "l1tex__lsu_writeback_active" + _PCT,
          "busiest L1 stage (%)": model.L1_BUSY}
ISSUED = "smsp__issue_active" + _PCT


def stages_table(study: str = STAGES_STUDY):
    """Every stage of the load path as a share of its peak, for the steps of `study`:
    which one (if any) was at its peak, and beside them the share of cycles in which a
    scheduler issued. (Every share is over the cycles the SM was active, so that the
    columns compare with each other.)"""
    from gemm_kernels.core.table import Table
    rows = []
    for step, rec in _results(study):
        if rec is None:
            continue
        m = rec["metrics"]
        row = {"configuration": model.label(step.kernel, step.params),
               "lines per step": model.line_limit(step.kernel, step.params)["lines"]}
        row.update({name: m.get(metric) for name, metric in STAGES.items()})
        row["scheduler issued (% of cycles)"] = m.get(ISSUED)
        rows.append(row)
    cols = ["configuration", "lines per step", *STAGES, "scheduler issued (% of cycles)"]
    return _one_decimal(Table(rows, cols, title=f"the load path at {rec['shape'][0]}^3, "
                                                 "counted by Nsight Compute"),
                        [*STAGES, "scheduler issued (% of cycles)"])


# ---------------------------------------------------------------- counting it again

TABLE_METRICS = (model.REQUESTS_LD, model.SECTORS_LD, model.WAVEFRONTS, model.L1_BUSY,
                 model.L1_HIT, model.CYCLES, model.DURATION)


def ncu_command(study: str = L1_STUDY, metrics=TABLE_METRICS) -> Text:
    """The Nsight Compute command line for a study of this chapter (`studies.ncu_command`)
    with `metrics`, by default those of the L1 table; `metrics=None` asks for every
    counter the study recorded."""
    return Text(studies.ncu_command(study, metrics))


# ---------------------------------------------------------------- predict, then check

def check_prediction(line_model, occupancy_model, size: int = 2048) -> None:
    """`ch01_02_sectors.check_prediction`, after a word on the usual slips: a line
    limit for 32 lanes (the block of 16 threads fills half a warp), or BLOCK = 8's rate
    not halved."""
    if line_model is not None and occupancy_model is not None:
        lim = model.line_limit(*model.PREDICT)
        if lim["GFLOP/s"] and abs(line_model / (lim["GFLOP/s"] * 32 / lim["lanes"]) - 1) <= 0.02:
            print(f"(a): did you count 32 lanes? A block of 4 x 4 threads fills half a warp: "
                  f"{lim['lanes']} lanes are active, and {32 - lim['lanes']} idle.")
        whole = model._rate(*model.PREDICT_FROM, size)["gflops"]["median"]
        if abs(occupancy_model / whole - 1) <= 0.02:
            print("(b): that is BLOCK = 8's rate itself; the occupancy model halves it.")
    model.check_prediction(line_model, occupancy_model, size)


def prediction_drop(size: int = 2048) -> Text:
    """The prediction's naive BLOCK = 4 against BLOCK = 8 (`model.PREDICT`,
    `model.PREDICT_FROM`): the ratio of their line limits (active lanes over lines per
    step) beside the ratio of their timed rates, so that "the lanes are the whole drop"
    reads as two printed numbers."""
    (kernel, small), (_, big) = model.PREDICT, model.PREDICT_FROM
    lim = {b: model.line_limit(kernel, p) for b, p in (("small", small), ("big", big))}
    rate = {b: model._rate(kernel, p, size)["gflops"]["median"]
            for b, p in (("small", small), ("big", big))}
    s, b = lim["small"], lim["big"]
    return Text(f"Line limit, BLOCK = {small['BLOCK']} over BLOCK = {big['BLOCK']}: "
                f"({s['lanes']} lanes / {s['lines']} lines) / ({b['lanes']} lanes / "
                f"{b['lines']} lines) = {(s['lanes'] / s['lines']) / (b['lanes'] / b['lines']):.2f}.\n"
                f"Timed at {size}^3: {rate['small']:,.0f} / {rate['big']:,.0f} GFLOP/s = "
                f"{rate['small'] / rate['big']:.2f}.")


# ---------------------------------------------------------------- alignment

# A row of B that is not a whole number of lines long: row k starts (k x N) mod 32 floats
# into a line, and over 32 steps an odd N visits every start once.
MISALIGNED_N, MISALIGNED_STEPS = 2047, 32
MISALIGNED_TASK = ("coalesced", {"BLOCK": 16})     # the count the student makes


def _mean(x) -> str:
    return f"{x:.2f}" if isinstance(x, float) else str(x)


ALIGNMENT_L1 = "ch02_alignment_l1"


NAIVE_ALIGNMENT, NAIVE_ALIGNMENT_L1 = "ch02_naive_alignment", "ch02_naive_alignment_l1"


def _profiled_steps(study: str, rec):
    """Each step of a profile study on and off the lines, aligned size first: (shape,
    step, its counters, `line_limit` at the misaligned steps, and a function that prints
    a launch total per warp and step). The limits are those of the GPU profiled."""
    props = records.recorded_device(rec)
    for shape in sorted(studies.get(study).shapes, reverse=True):     # aligned first
        for step, row in studies.results(study, shape, rec):
            lim = model.line_limit(step.kernel, step.params, props, shape=shape,
                                   steps=MISALIGNED_STEPS)
            _, warp_steps = model._warp_steps(step.kernel, step.params, shape)

            def per(x, warp_steps=warp_steps):
                return f"{round(x / warp_steps, 2) + 0.0:.2f}" if x is not None else "-"
            yield shape, step, (row or {}).get("metrics", {}), lim, per


def _alignment_rows(studies_=(NAIVE_ALIGNMENT_L1, ALIGNMENT_L1), kernels=None):
    """The alignment section's evidence, per kernel, size (aligned first) and BLOCK: the
    slower of the L1's two stages in the model (`line_limit`: the tag stage's
    ceil(lines / 4) per load, the data stage's words on the busiest bank), its wavefronts
    per warp and step, modelled and counted (the larger of the two stages' counts by
    Nsight Compute, `TAG_WAVEFRONTS` and `ch01_02_sectors.WAVEFRONTS`, as printed to two
    decimals), the limit each sets at one wavefront per cycle, and the rate timed without
    the profiler (`_alignment_rate`); with the recordings' labels. `kernels` keeps only
    those kernels' rows. Numbers stay numbers here: `alignment_table` formats them."""
    rows, where = [], set()
    for study in studies_:
        if kernels is not None and studies.get(study).steps[0].kernel not in kernels:
            continue
        rec = studies.recording_of(study)
        if rec:
            where.add(rec.label)
        for shape, step, m, lim, per in _profiled_steps(study, rec):
            limit = lim["stage GFLOP/s"]
            slower = max(lim["tags"], lim["banks"])
            tag, data = per(m.get(TAG_WAVEFRONTS)), per(m.get(model.WAVEFRONTS))
            # the same rule with the slower stage's counted wavefronts in place of the
            # model's: one wavefront per cycle, whatever the count
            counted = max(float(tag), float(data)) if "-" not in (tag, data) else None
            rows.append({"kernel": step.kernel,
                         "configuration": model.label(step.kernel, step.params),
                         "M = N = K": shape[0],
                         "slower stage": "tag" if lim["tags"] > lim["banks"]
                         else "data" if lim["banks"] > lim["tags"] else "both",
                         "wavefronts": slower, "counted wavefronts": counted,
                         "data counted": data, "tag counted": tag,
                         "limit": limit,
                         "counted limit": limit * slower / counted
                         if limit and counted else None,
                         "timed": _alignment_rate(step.kernel, step.params, shape[0])})
    return rows, "; ".join(sorted(where)) or "not recorded"


# Each stage's counted wavefronts in a column of its own (the evidence for the two-stage
# rule: off the lines the naive kernel's data stage falls below its tag stage), and the
# limit of the model's and of the counted slower stage side by side
ALIGNMENT_COUNTED = ("data stage, counted", "tag stage, counted")
ALIGNMENT_LIMITS = ("limit, model (GFLOP/s)", "limit, counted (GFLOP/s)")
ALIGNMENT_COLUMNS = ("configuration", "M = N = K", "slower stage (model)",
                     "wavefronts, model", *ALIGNMENT_COUNTED, *ALIGNMENT_LIMITS,
                     "timed (GFLOP/s)", "timed / counted limit")


# The two halves of the alignment table, shown one above the other: ten columns side by
# side are too wide to read.
ALIGNMENT_PARTS = {
    "wavefronts": ALIGNMENT_COLUMNS[:6],
    "limits": ("configuration", "M = N = K", *ALIGNMENT_COLUMNS[6:]),
}


def alignment_table(kernel: str, part: str | None = None,
                    studies_=(NAIVE_ALIGNMENT_L1, ALIGNMENT_L1)):
    """One kernel's rows of `_alignment_rows` at both sizes, in one table: the slower
    modelled stage and its wavefronts per warp and step, each stage's counted wavefronts,
    the limit the model's and the counted slower stage set, the timed rate, and its share
    of the counted limit (`stage_rule_fit` prints the shares of the model's limit). The
    counted columns tell a wrong count from a wrong rate per cycle. `part` ("wavefronts"
    or "limits", `ALIGNMENT_PARTS`) keeps only that half's columns."""
    from gemm_kernels.core.table import Table

    def share(limit, r):
        return f"{r['timed'] / limit:.0%}" if r["timed"] is not None and limit else "-"

    def gflops(x):
        return f"{x:,.0f}" if x else "-"
    rows, where = _alignment_rows(studies_, (kernel,))
    (data_c, tag_c), (lim_m, lim_c) = ALIGNMENT_COUNTED, ALIGNMENT_LIMITS
    # the title names the kernel: each row keeps only its settings, so rows stay short
    table = [{"configuration": r["configuration"].split(", ", 1)[1].replace("MAPPING = ", ""),
              "M = N = K": r["M = N = K"],
              "slower stage (model)": r["slower stage"],
              "wavefronts, model": _mean(r["wavefronts"]),
              data_c: r["data counted"], tag_c: r["tag counted"],
              lim_m: gflops(r["limit"]), lim_c: gflops(r["counted limit"]),
              "timed (GFLOP/s)": r["timed"] if r["timed"] is not None else "not timed",
              "timed / counted limit": share(r["counted limit"], r)}
             for r in rows]
    if part is None:
        return Table(table, list(ALIGNMENT_COLUMNS),
                     title=f"{kernel}: the L1 stages' wavefronts per warp and step, the limit "
                           f"the slower stage sets at one per SM and cycle, and the timed rate "
                           f"({where})")
    columns = list(ALIGNMENT_PARTS[part])
    title = (f"{kernel}: the L1 stages' wavefronts per warp and step, modelled and counted ({where})"
             if part == "wavefronts" else
             f"{kernel}: the limit the slower stage sets at one wavefront per SM and cycle, "
             f"and the timed rate ({where})")
    return Table([{c: r[c] for c in columns} for r in table], columns, title=title)


def alignment_tables(kernel: str):
    """`alignment_table`'s two halves, wavefronts above limits, as one display."""
    from gemm_kernels.notebook.display import Stacked
    return Stacked(*(alignment_table(kernel, part) for part in ALIGNMENT_PARTS))


def naive_off_lines(params=None, sizes=(2048, MISALIGNED_N)) -> Text:
    """The naive kernel that reads down a column (x->row, BLOCK = 32): its timed rate at
    both sizes, and at the misaligned size the limits its line count, its data stage alone
    (the banks) and its slower stage allow: it runs above the line limit, so lines alone
    cannot be what the L1 counts, and the banks spread, yet it stays near the tag limit."""
    params = {"BLOCK": 32, "MAPPING": "x->row"} if params is None else params
    big, small = sizes
    rate = {n: _alignment_rate("naive", params, n) for n in sizes}
    if None in rate.values():
        return Text("The naive kernel's rates at both sizes were not timed.")
    lim = model.line_limit("naive", params, shape=(small,) * 3, steps=MISALIGNED_STEPS)
    if lim["bank GFLOP/s"] is None:
        return Text("The limits need the GPU's SM count and clock.")
    return Text(f"{model.label('naive', params)}: timed {rate[big]:,.0f} GFLOP/s at {big}^3 "
                f"and {rate[small]:,.0f} GFLOP/s at {small}^3.\nAt {small}^3 the line count "
                f"({lim['lines']} lines per warp and step) would allow "
                f"{lim['GFLOP/s']:,.0f} GFLOP/s: the timed rate is "
                f"{rate[small] / lim['GFLOP/s']:.1f} x that, so the line count fails.\n"
                f"The banks alone would allow {lim['bank GFLOP/s']:,.0f} GFLOP/s; the tag stage "
                f"(the line look-up) allows {lim['stage GFLOP/s']:,.0f}.")


def stage_rule_fit(size: int = MISALIGNED_N) -> Text:
    """How well the two-stage rule holds, in one sentence from `_alignment_rows`: whether
    any timed rate breaks its limit, and at the misaligned size the range of timed / limit
    with the model's wavefronts (a loose bound) and with the counted ones (tighter: about
    half the looseness is in the model's count, the rest below one wavefront per cycle)."""
    rows = [r for r in _alignment_rows()[0] if r["timed"] is not None and r["limit"]]
    if not rows:
        return Text("The rates were not timed.")
    above = [r for r in rows for lim in (r["limit"], r["counted limit"])
             if lim and r["timed"] > lim]
    off = [r for r in rows if r["M = N = K"] == size]
    model_ = [r["timed"] / r["limit"] for r in off]
    counted = [r["timed"] / r["counted limit"] for r in off if r["counted limit"]]
    if not off or not counted:
        return Text(f"The rates at {size}^3 were not both timed and counted.")
    verdict = ("No timed rate exceeds its limit" if not above
               else f"{len(above)} timed rates exceed a limit")
    return Text(f"{verdict}; at {size}^3 the "
                f"rates run at {min(model_):.0%} to {max(model_):.0%} of the model's limit "
                f"and at {min(counted):.0%} to {max(counted):.0%} of the counted one.")


# What the L1's stages counted for global loads (the `ch02_alignment_l1` study): the tag
# stage's output wavefronts (one per request when a load needs no more), and the data
# stage's bank conflicts, which Nsight Compute counts as the data stage's extra cycles.
TAG_WAVEFRONTS = "l1tex__t_output_wavefronts_pipe_lsu_mem_global_op_ld.sum"
BANK_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_gds_op_ld"
DATA_PIPE_PCT = "l1tex__data_pipe_lsu_wavefronts_mem_lgds_cmd_read" + _PCT
# what Appendix E's commands count again for these tables
ALIGNMENT_METRICS = (model.REQUESTS_LD, model.WAVEFRONTS, TAG_WAVEFRONTS,
                     BANK_CONFLICTS + ".sum", model.CYCLES, model.DURATION)


def bank_conflicts(m: dict) -> float | None:
    """The bank conflicts of a profiled launch's global loads: their `.sum` where it was
    recorded, else their share of the L1's peak over the data stage's share, times the
    data stage's wavefronts (both shares are of the same cycles, so their ratio is the
    ratio of the counts)."""
    if m.get(BANK_CONFLICTS + ".sum") is not None:
        return m[BANK_CONFLICTS + ".sum"]
    share, data = m.get(BANK_CONFLICTS + _PCT), m.get(DATA_PIPE_PCT)
    if share is None or not data or m.get(model.WAVEFRONTS) is None:
        return None
    return share / data * m[model.WAVEFRONTS]


def wavefront_parts_table(studies_=(ALIGNMENT_L1, NAIVE_ALIGNMENT_L1)):
    """Three of the L1's counters side by side, per warp and step, on and off 128-byte
    lines, for the launches whose bank conflicts were recorded: the data stage's
    wavefronts, its bank conflicts, the difference of the two (the data stage's
    wavefronts without conflicts, computed: the profiler does not split its count), the
    load requests, and the tag stage's wavefronts. Launches
    without the conflict counter are left out rather than shown with holes."""
    from gemm_kernels.core.table import Table
    rows, where = [], set()
    for study in studies_:
        rec = studies.recording_of(study)
        if rec:
            where.add(rec.label)
        for shape, step, m, lim, per in _profiled_steps(study, rec):
            data, tag, bank = m.get(model.WAVEFRONTS), m.get(TAG_WAVEFRONTS), bank_conflicts(m)
            if bank is None:        # a launch without its conflicts has nothing to show here
                continue
            rows.append({"configuration": model.label(step.kernel, step.params),
                         "M = N = K": shape[0],
                         "load requests": per(m.get(model.REQUESTS_LD)),
                         "data stage: wavefronts": per(data),
                         "data stage: bank conflicts": per(bank),
                         "data stage: wavefronts - conflicts (computed)": per(data - bank)
                         if data is not None else "-",
                         "tag stage: wavefronts": per(tag)})
    columns = ["configuration", "M = N = K", "load requests", "data stage: wavefronts",
               "data stage: bank conflicts",
               "data stage: wavefronts - conflicts (computed)", "tag stage: wavefronts"]
    return Table(rows, columns, title="the L1's counters per warp and step (Nsight Compute, "
                 f"{'; '.join(sorted(where)) or 'not recorded'})")


def bank_picture(block: int = 8, sizes=(2048, MISALIGNED_N)):
    """The words of A one warp of the coalesced kernel loads at step k = 0, placed on the
    L1's 32 banks (word w on bank w mod 32), one panel per size: at 2048 its rows of A
    are a multiple of 32 words apart and stack on one bank, one cycle each; at 2047 each
    lies on a bank of its own. The depth of the deepest stack is `bank_words`."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    banks = device.SMEM_BANKS
    fig, axes = plt.subplots(len(sizes), 1, figsize=(10, 2.0 * len(sizes) + 0.9))
    for ax, n in zip(axes, sizes):
        warp = model.warp_elements("coalesced", {"BLOCK": block}, n, n, n)
        words = sorted({l["A"] for l in warp if l["active"]})
        depth = {}
        for w in words:
            bank = w % banks
            level = depth.get(bank, 0)
            depth[bank] = level + 1
            ax.add_patch(Rectangle((bank - 0.45, level + 0.05), 0.9, 0.9, color="#f2a541"))
            ax.text(bank, level + 0.5, str(w // n), ha="center", va="center", fontsize=8)
        cycles = model.bank_words([l["A"] for l in warp])
        assert cycles == max(depth.values())        # the picture is the count it shows
        ax.set_xlim(-0.6, banks - 0.4)
        ax.set_ylim(0, max(len(words), 1) + 0.2)
        ax.set_xticks(range(0, banks, 4))
        ax.set_yticks([i + 0.5 for i in range(len(words))], range(1, len(words) + 1))
        ax.set_ylabel("L1 cycle")
        for b in range(banks + 1):
            ax.axvline(b - 0.5, color="0.85", lw=0.5, zorder=0)
        ax.set_title(f"N = K = {n}: rows of A {n} words apart; {len(words)} words on "
                     f"{len(depth)} bank{'s' if len(depth) > 1 else ''}: "
                     f"{cycles} L1 cycle{'s' if cycles > 1 else ''}", fontsize=10)
    axes[-1].set_xlabel("bank (word w lies on bank w mod 32)")
    fig.suptitle(f"coalesced, BLOCK = {block}: the load of A of warp 0 at step k = 0 "
                 "(each box is the word A[r][0], labelled with its row r)", fontsize=11)
    fig.tight_layout()
    return fig


def two_stage_picture(kernel: str = "naive", params=None, sizes=(2048, MISALIGNED_N),
                      stages=("tag", "data")):
    """One load (of A, at step k = 0) of a warp that reads down a column (naive x->row,
    BLOCK = 32) passing the L1's two stages, one row of panels per size. Left, the tag
    stage: the load's distinct lines, `TAG_LINES` to a wavefront, one wavefront per row of
    boxes. Right, the data stage: its words on the 32 banks, one word per bank and
    wavefront, so a bank's stack is its wavefronts. Both panels of a size share the
    wavefront axis, and all rows one scale: the taller one is the slower stage, and it
    sets the load's time; the same count looks the same height at either size.
    `stages=("data",)` draws the data stage's panels alone: the banks, before the tag
    stage is introduced."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    params = {"BLOCK": 32, "MAPPING": "x->row"} if params is None else params
    banks, per = device.SMEM_BANKS, model.TAG_LINES
    both = "tag" in stages
    fig, axes = plt.subplots(len(sizes), 2 if both else 1, squeeze=False,
                             figsize=(11 if both else 8.5, 3.2 * len(sizes) + 0.6),
                             gridspec_kw={"width_ratios": [1, 3] if both else [1]})
    loads = {n: [l["A"] for l in model.warp_elements(kernel, params, n, n, n) if l["active"]]
             for n in sizes}
    top = max(max(-(-model.lines(i) // per) if both else 0, model.bank_words(i))
              for i in loads.values())
    top = top * 1.2 + 0.5          # one scale for every row
    box = {"edgecolor": "white", "lw": 0.8}     # each box stays visible at any height
    for row, n in zip(axes, sizes):
        tag_ax, data_ax = row if both else (None, row[0])
        idx = loads[n]
        line_of = sorted({i * 4 // model.LINE for i in idx})
        n_tags = -(-len(line_of) // per) if both else 0
        for j, line in enumerate(line_of if both else ()):
            tag_ax.add_patch(Rectangle((j % per + 0.05, j // per + 0.05), 0.9, 0.9,
                                       facecolor="#7fb3d5", **box))
        depth = {}
        for w in sorted(set(idx)):
            level = depth.get(w % banks, 0)
            depth[w % banks] = level + 1
            data_ax.add_patch(Rectangle((w % banks - 0.45, level + 0.05), 0.9, 0.9,
                                        facecolor="#f2a541", **box))
        n_data = model.bank_words(idx)
        assert n_data == max(depth.values()) and len(line_of) == model.lines(idx)
        data_ax.set_xlim(-0.6, banks - 0.4)
        for ax in row:
            ax.set_ylim(0, top)
            # "wavefront" is defined with the two-stage picture, not before it
            ax.set_ylabel("wavefront (L1 cycle)" if both else "L1 cycle")
            ax.axhline(max(n_tags, n_data), color="crimson", ls="--", lw=1)
        # the line is drawn in both panels; the label names the stage it belongs to, which
        # at 2047 is not the data stage it is written in
        slower = "tag" if n_tags > n_data else "data" if n_data > n_tags else "either"
        data_ax.text(banks - 0.6, max(n_tags, n_data), f"the slower stage ({slower}): "
                     f"{max(n_tags, n_data)} cycles" if both else f"{n_data} cycle"
                     f"{'s' if n_data > 1 else ''}", color="crimson", ha="right",
                     va="bottom", fontsize=9)
        if n_data == 1:
            # one row of boxes is a sliver on a scale made for 32: name what it holds
            data_ax.text((banks - 1) / 2, 2.5, f"{len(set(idx))} words, one on each bank",
                         ha="center", va="bottom", fontsize=10, color="#b5651d")
        data_ax.set_xticks(range(0, banks, 4))
        data_ax.set_xlabel("bank (word w lies on bank w mod 32)")
        data_title = (f"N = K = {n}, data stage: {n_data} word{'s' if n_data > 1 else ''} "
                      f"on the busiest bank = {n_data} wavefront{'s' if n_data > 1 else ''}")
        if both:
            tag_ax.set_xlim(0, per)
            tag_ax.set_xticks([i + 0.5 for i in range(per)], range(1, per + 1))
            tag_ax.set_xlabel(f"line slot ({per} lines per wavefront)")
            slower = "tag" if n_tags > n_data else "data" if n_data > n_tags else "either"
            tag_ax.set_title(f"N = K = {n}, tag stage: {len(line_of)} lines = {n_tags} "
                             "wavefronts", fontsize=10)
            data_title += f"; the {slower} stage sets the time"
        else:
            # where the line look-up is the slower stage, the banks' count is not the
            # load's cost: say so, or the picture contradicts the tag stage's
            look_up = -(-len(line_of) // per)
            cost = (f"{n_data} L1 cycle{'s' if n_data > 1 else ''}" if n_data >= look_up
                    else f"{n_data} cycle{'s' if n_data > 1 else ''} of the banks\n(the line "
                         f"look-up needs {len(line_of)} / {per} = {look_up}: see the rule below)")
            data_title = (f"N = K = {n}: {len(set(idx))} words of A in {len(line_of)} lines; "
                          f"{n_data} on the busiest bank = {cost}")
        data_ax.set_title(data_title, fontsize=10)
    fig.suptitle(f"{model.label(kernel, params)}: warp 0's load of A at step k = 0 "
                 + ("in the L1's two stages\n(a box: one line, left; one word, right)" if both
                    else "on the L1's 32 banks\n(a box: one word; each bank hands out "
                         "one word per cycle)"), fontsize=11)
    fig.tight_layout()
    return fig


# The timed comparison on and off lines: BLOCK = 16 and 32 in one run, BLOCK = 8 in a run
# of its own (each row with the cuBLAS timed beside it).
ALIGNMENT, ALIGNMENT_BLOCK8 = "ch02_alignment", "ch02_alignment_block8"


def _alignment_row(kernel: str, params: dict, n: int) -> dict | None:
    """The timed row of this kernel and configuration at n^3 from the alignment study that
    times it (None where none recorded it)."""
    want = get_kernel(kernel).resolve(params)
    for name in (ALIGNMENT, ALIGNMENT_BLOCK8, NAIVE_ALIGNMENT):
        rec = studies.recording_of(name)
        if rec is None or (n, n, n) not in studies.get(name).shapes:
            continue
        for step, row in studies.results(name, (n, n, n), rec):
            if (step.kernel == kernel and get_kernel(kernel).resolve(step.params) == want
                    and row):
                return row
    return None


def _alignment_rate(kernel: str, params: dict, n: int) -> float | None:
    """The median rate of `_alignment_row`."""
    row = _alignment_row(kernel, params, n)
    return row["gflops"]["median"] if row else None


def coalescing_gain(params=None, best=None, sizes=(2048, MISALIGNED_N)) -> Text:
    """What coalescing gains at both sizes, from the timed rates of the alignment studies:
    the coalesced kernel's rate over the naive x->row kernel's (both BLOCK = 32). With
    rows a power of two apart the naive kernel's rows of A also stack on one L1 bank, so
    the gain there is not the gain at other sizes. Below them, the limits the L1's slower
    stage sets (`model.line_limit`) at each size on the GPU that timed them, and their
    ratio, which each gain follows."""
    params = {"BLOCK": 32, "MAPPING": "x->row"} if params is None else params
    best = {"BLOCK": 32} if best is None else best
    out = []
    for n in sizes:
        naive, coal = _alignment_rate("naive", params, n), _alignment_rate("coalesced", best, n)
        if naive is None or coal is None:
            return Text(f"The two kernels were not both timed at {n}^3.")
        out.append(f"at {n}^3: {coal:,.0f} / {naive:,.0f} GFLOP/s = {coal / naive:.1f} x")
    limits = []
    props = records.recorded_device(studies.recording_of(ALIGNMENT))    # the rates' GPU
    for n in sizes:
        lim = {k: model.line_limit(k, p, props, shape=(n,) * 3, steps=MISALIGNED_STEPS)
               for k, p in (("naive", params), ("coalesced", best))}
        if None in (lim["naive"]["stage GFLOP/s"], lim["coalesced"]["stage GFLOP/s"]):
            break
        cycles = {k: max(l["tags"], l["banks"]) for k, l in lim.items()}
        limits.append(f"at {n}^3: naive {cycles['naive']:g} cycles = "
                      f"{lim['naive']['stage GFLOP/s']:,.0f} "
                      f"GFLOP/s, coalesced {cycles['coalesced']:g} = "
                      f"{lim['coalesced']['stage GFLOP/s']:,.0f} GFLOP/s: "
                      f"{lim['coalesced']['stage GFLOP/s'] / lim['naive']['stage GFLOP/s']:.1f} x")
    def settings(kernel, p):
        return model.label(kernel, p).split(", ", 1)[1]
    text = (f"The coalesced kernel ({settings('coalesced', best)}) over the naive one "
            f"({settings('naive', params)}):\n" + "\n".join(out))
    if len(limits) == len(sizes):
        sms, mhz = props["sm_count"], props["sm_clock_mhz"]
        # the conversion behind every limit below, so a reader can redo it by hand
        text += (f"\nThe limit: {sms} SMs x {mhz:,.0f} MHz x 64 FLOP / (L1 cycles per warp "
                 f"and step)\n         = {sms * mhz * 64 / 1e3:,.0f} GFLOP/s / (L1 cycles per "
                 "warp and step).")
        text += "\nThe limits, with the L1 cycles of the rule:\n" + "\n".join(limits)
    return Text(text)


def alignment_gap(block: int = 8, best: int = 32, sizes=(2048, MISALIGNED_N)) -> Text:
    """How far the small block trails the large one on and off 128-byte lines, from the
    timed rates of the alignment studies: how much of the block-shape gap the stride of
    the rows makes."""
    rate = {(n, b): _alignment_rate("coalesced", {"BLOCK": b}, n) for n in sizes for b in (block, best)}
    if None in rate.values():
        return Text("The rates at both sizes were not timed.")
    big, small = sizes
    return Text(f"Timed: BLOCK = {block} runs at {rate[big, block] / rate[big, best]:.0%} of "
                f"BLOCK = {best}'s rate at {big}^3, and at "
                f"{rate[small, block] / rate[small, best]:.0%} of it at {small}^3.")


def padded_pitch(pitches=(2048, MISALIGNED_N, 2056),
                 configs=(("coalesced", {"BLOCK": 8}), ("coalesced", {"BLOCK": 16}),
                          ("coalesced", {"BLOCK": 32}),
                          ("naive", {"BLOCK": 32, "MAPPING": "x->row"}))) -> "Table":
    """The model's counts (no measurement) with rows `pitch` floats apart, mean of 32
    steps: a pitch of whole 128-byte lines (2048) stacks a warp's rows of A on one bank;
    an odd pitch (2047) spreads them but shifts rows off the sectors; a pitch of whole
    32-byte sectors that is not whole lines (2056 = 8 mod 32 floats) keeps the aligned
    sector count, but spreads only 32 / gcd(pitch mod 32, 32) rows over the banks: enough
    for the coalesced kernel's few rows, not for the 32 rows of naive x->row."""
    from math import gcd
    from gemm_kernels.core.table import Table
    rows = []
    for n in pitches:
        for kernel, params in configs:
            lim = model.line_limit(kernel, params, shape=(n, n, n), steps=MISALIGNED_STEPS)
            rows.append({"row pitch (floats)": n,
                         "rows spread over the banks": LINE_FLOATS // gcd(n % LINE_FLOATS,
                                                                         LINE_FLOATS),
                         "configuration": model.label(kernel, params),
                         "BLOCK": params["BLOCK"],
                         "sectors/step": _mean(lim["sectors"]),
                         "lines/step": _mean(lim["lines"]),
                         "bank words/step": _mean(lim["banks"]),
                         "tag wavefronts/step": _mean(lim["tags"]),
                         "slower stage/step": _mean(max(lim["tags"], lim["banks"]))})
    return Table(rows, [c for c in rows[0] if c != "BLOCK"],
                 title="the model's counts per warp and step (mean of "
                 f"{MISALIGNED_STEPS} steps) for three row pitches; computed, not measured")


def kernel_skeleton() -> Text:
    """The chapter's coalesced kernel with its two index lines replaced by a comment that
    says what they compute, not how: shown before the chapter times the kernel, while
    the exercise still asks for those two lines."""
    from gemm_kernels.notebook import display
    lines = str(display.source("coalesced")).splitlines()
    i = next(i for i, line in enumerate(lines) if "const int row" in line)
    pad = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
    # declared as in the exercise cell, so the student's two lines fit either text
    lines[i:i + 2] = [pad + "int row = 0, col = 0;",
                      pad + "row = ...;   // the exercise below: the row of C this thread computes,",
                      pad + "col = ...;   // and its column"]
    return Text("\n".join(lines))


# 111/32 = 3.469 lines: 3.47 and 3.46 count as right, but not 3.5 or 3.4375, the counts
# one crossing start off (16 or 14 starts crossing into the next line instead of 15)
LINES_TOLERANCE = 0.01


def misaligned_lines(lines=None, limit=None) -> None:
    """The counting task, checked: the coalesced kernel at BLOCK = 16 with M = N = K =
    2047, before any table of the chapter shows it. The student enters the mean lines
    per step over 32 steps and the limit (GFLOP/s) they give. A wrong count gets a
    question, not the number; the aligned count (3) gets a word on where the rows of B
    start, a count one crossing start off a question on the boundary start; once both are
    right (the count within `LINES_TOLERANCE`, the limit within 3%), the aligned case and
    the rates measured at both sizes against the line limit. The two stages' counts are
    left to the second half of the task (`misaligned_rule`)."""
    if lines is None or limit is None:
        print("Pencil first, then write your mean lines per step in `my_lines` and your "
              "limit (GFLOP/s) in `my_limit`, and run this cell again.")
        return
    kernel, params = MISALIGNED_TASK
    n = MISALIGNED_N
    lim = model.line_limit(kernel, params, shape=(n, n, n), steps=MISALIGNED_STEPS)
    aligned = model.line_limit(kernel, params)
    if abs(float(lines) - lim["lines"]) > LINES_TOLERANCE:
        one_off = [lim["lines"] + d / MISALIGNED_STEPS for d in (-1, 1)]
        if any(abs(float(lines) - x) <= LINES_TOLERANCE for x in one_off):
            print(f"{lines} lines per step: close, but one of the 32 starts is counted on "
                  "the wrong side. Look again at the boundary: a row that starts 16 floats "
                  "into a line, do its floats 16..31 fit in one line? And one that starts 17 "
                  "floats in?")
        elif abs(float(lines) - aligned["lines"]) <= LINES_TOLERANCE:
            print(f"{lines} lines per step is the count when every row of B starts a line "
                  f"(N = 2048). At N = {n}, row k of B starts (k x {n}) mod 32 floats into "
                  "a line: over 32 steps, once at each of the 32 places. At how many of "
                  "them do the warp's 16 floats of B stay inside one line?")
        else:
            print(f"{lines} lines per step: not what this warp touches. Count A and B "
                  "apart. A: how many rows of C does the warp cover, and can two of their "
                  "elements of A share a line? B: for each of the 32 places a row can start "
                  "in a line, do the 16 floats stay in one line or cross into the next? "
                  "Average over the 32 steps and add A's lines.")
        return
    if lim["GFLOP/s"] and abs(float(limit) / lim["GFLOP/s"] - 1) > 0.03:
        print(f"{lines} lines per step is right; {float(limit):,.0f} GFLOP/s is not what "
              "they allow. Take the full-warp figure printed in *One wavefront per cycle* and "
              "divide it by your mean lines per step (all 32 lanes are active).")
        return
    rec = studies.recording_of(ALIGNMENT)
    at_n, at_2048 = _alignment_rate(kernel, params, n), _alignment_rate(kernel, params, 2048)
    said = (f"Right: {_mean(lim['lines'])} lines per step on average, a limit of "
            f"{lim['GFLOP/s']:,.0f} GFLOP/s; with aligned rows (N = 2048) {aligned['lines']} "
            f"lines and {aligned['GFLOP/s']:,.0f} GFLOP/s.")
    if at_n is None or at_2048 is None:
        print(said + f" No rate was recorded at N = {n}: your limit is a prediction.")
        return
    print(said + f"\nMeasured in one run ({rec.device['name']}): {at_2048:,.0f} GFLOP/s at "
          f"N = 2048, {at_n:,.0f} at N = {n}: {at_n / lim['GFLOP/s']:.0%} of your line "
          "limit. " + ("The rate breaks it: one line per cycle is not the L1's limit here. "
                       "Now count the rule's two stages (next cell)." if at_n > lim["GFLOP/s"]
                       else "Now count the rule's two stages (next cell)."))


def misaligned_rule(tag=None, banks=None, limit=None) -> None:
    """The second half of the counting task: the same warp (`MISALIGNED_TASK` at
    `MISALIGNED_N`) through the rule of *Why lines*. The student enters the tag stage's
    cycles per step (ceil(lines / 4) per load, summed), the data stage's (words on the
    busiest bank per load, summed) and the limit the larger of the two sets. A wrong count
    gets a question, not the number; once all three are right (the limit within 3%), the
    rate timed at that size and the wavefronts Nsight Compute counted there, against the
    limit (a bound: the counts may run above the model's)."""
    if tag is None or banks is None or limit is None:
        print("Count first, then write the tag stage's cycles in `my_tag`, the banks' in "
              "`my_banks` and the rule's limit (GFLOP/s) in `my_rule_limit`, and run this "
              "cell again.")
        return
    kernel, params = MISALIGNED_TASK
    n = MISALIGNED_N
    lim = model.line_limit(kernel, params, shape=(n, n, n), steps=MISALIGNED_STEPS)
    wrong = []
    if abs(float(tag) - lim["tags"]) > LINES_TOLERANCE:
        wrong.append(f"tag stage {tag}: per load, how many lines does it touch (A: one per "
                     "row of the warp; B: one or two), and how many look-ups of 4 lines do "
                     "they need? Sum over the two loads.")
    if abs(float(banks) - lim["banks"]) > LINES_TOLERANCE:
        wrong.append(f"banks {banks}: at N = {n}, do the warp's elements of A share a bank "
                     "(word w sits in bank w mod 32)? Can 16 consecutive floats of B put two "
                     "words on one bank? Sum the busiest bank's words over the two loads.")
    if wrong:
        print("Not yet. " + " ".join(wrong))
        return
    cycles = max(lim["tags"], lim["banks"])
    if lim["stage GFLOP/s"] and abs(float(limit) / lim["stage GFLOP/s"] - 1) > 0.03:
        print(f"Both counts are right; {float(limit):,.0f} GFLOP/s is not the rule's limit. "
              "Take the larger of the two stages and divide the full-warp figure by it.")
        return
    said = (f"Right: tag stage {_mean(lim['tags'])}, banks {_mean(lim['banks'])}, so "
            f"{_mean(cycles)} L1 cycles per warp and step at least, and a limit of "
            f"{lim['stage GFLOP/s']:,.0f} GFLOP/s.")
    row = next((r for r in _alignment_rows(kernels=(kernel,))[0]
                if r["M = N = K"] == n and r["configuration"] == model.label(kernel, params)),
               None)
    if row is None or row["timed"] is None:
        print(said + " No rate was recorded at this size: your limit is a prediction.")
        return
    said += (f"\nTimed at N = {n}: {row['timed']:,.0f} GFLOP/s, {row['timed'] / row['limit']:.0%} "
             "of that limit.")
    if row["counted wavefronts"]:
        said += (f" Nsight Compute counted {row['data counted']} data-stage and "
                 f"{row['tag counted']} tag-stage wavefronts per warp and step, more "
                 f"than your {_mean(cycles)}: with misaligned rows the counts run above the model. With "
                 f"the counted ones the limit is {row['counted limit']:,.0f} GFLOP/s, and "
                 f"the rate is {row['timed'] / row['counted limit']:.0%} of it. So the rule "
                 "is a lower bound on the cycles, an upper bound on the rate.")
    print(said)


# ---------------------------------------------------------------- figures

def limit_plot(configs, size: int = 2048):
    """`ch01_02_sectors.limit_plot`, its rate axis with thousands separators as in the
    tables ("2,000"), and cut just past the end of the longest label on the bars, so that
    no empty stretch of axis suggests rates that nothing reaches."""
    from matplotlib.ticker import FuncFormatter
    fig = model.limit_plot(configs, size)
    ax = fig.axes[0]
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    fig.canvas.draw()
    to_data = ax.transData.inverted()
    right = max(to_data.transform(t.get_window_extent().corners())[:, 0].max()
                for t in ax.texts)
    ax.set_xlim(0, right * 1.02)
    return fig


LINE_FLOATS = 32   # a 128-byte cache line: 4 sectors of 8 floats


def _outline_lines(ax, cells) -> None:
    """A dashed box around each 128-byte line (32 aligned floats) that holds one of
    `cells` (row, column) of a panel: the unit the chapter's limit counts, drawn over the
    sectors the panel shades."""
    from matplotlib.patches import Rectangle
    width = ax.get_xlim()[1] + 0.5
    lo, hi = sorted(ax.get_ylim())
    for r, c0 in sorted({(r, c - c % LINE_FLOATS) for r, c in cells}):
        # thin and half transparent, a row high: 32 boxes stacked down a column share
        # their edges (one dashed line between rows, not two) and do not hide the shading;
        # an edge on the panel's frame moves just inside it, where it stays visible
        y0, y1 = max(r - 0.5, lo + 0.08), min(r + 0.5, hi - 0.08)
        ax.add_patch(Rectangle((c0 - 0.5, y0), min(LINE_FLOATS, width - c0), y1 - y0,
                               fill=False, ls=(0, (4, 3)), lw=0.7, ec="#1f4e79", alpha=0.6,
                               zorder=3))


def sector_picture(kernel: str, params: dict):
    """`ch01_02_sectors.sector_picture` over a whole 128-byte line of A and B (32 floats,
    not 16), each line the warp touches drawn as a dashed box around its shaded sectors,
    so that a count of lines can be read off the picture, not only one of sectors. The
    stacked panels have room between them, so that no axis label runs into the title of
    the panel below. A warp down a column of C (the tall layout), or one narrower than a
    sector, keeps only the columns of C its lanes own, and its strip of B is lined up under the panel of A."""
    fig = model.sector_picture(kernel, params, k_cols=LINE_FLOATS)
    c_ax, a_ax, b_ax = fig.axes[:3]
    lanes = [l for l in model.warp_elements(kernel, params, 4096, 4096, 4096) if l["active"]]
    _outline_lines(a_ax, [divmod(l["A"], 4096) for l in lanes])
    _outline_lines(b_ax, [(0, l["B"] % 4096) for l in lanes])
    a_ax.set_title(a_ax.get_title().replace("15", str(LINE_FLOATS - 1), 1), fontsize=9)
    for ax in (a_ax, b_ax):
        ax.set_xticks([*range(0, LINE_FLOATS, 8), LINE_FLOATS - 1])
    b_ax.set_xlabel("column of B (dashed box: a 128-byte line, 32 floats)")
    tall = max(l["row"] for l in lanes) + 1 > 8
    width = max(l["col"] for l in lanes) + 1
    if tall or width < LINE_FLOATS // 4:       # narrower than a sector: no empty columns
        c_ax.set_xlim(-0.5, width - 0.5)
        c_ax.set_xticks(range(width))
    fig.tight_layout(h_pad=2.0)
    if tall:
        a, b = a_ax.get_position(), b_ax.get_position()
        b_ax.set_position([a.x0, b.y0, a.width, b.height])
    return fig


# The block orders of the coalesced kernel in the chapter's words, by the registry's value
# of GRID (whose names, x->col and x->row, read like chapter 01's thread mappings).
BLOCK_ORDERS = {"x->col": "GRID = 0, blocks numbered along the rows of tiles",
                "x->row": "GRID = 1, blocks numbered down the columns of tiles (default)"}


def explorer():
    """Appendix D's widget for the coalesced kernel at the default block order (GRID = 1),
    so that the registry's name of that order, which reads like one of chapter 01's thread
    mappings, never reaches the student's screen."""
    from gemm_kernels.notebook import widgets
    default = next(g for g, words in BLOCK_ORDERS.items() if words.endswith("(default)"))
    return widgets.Explorer("coalesced", fixed={"GRID": default}).widget()


def block_order_gap(size: int = 2048, blocks=(8, 16, 32)) -> Text:
    """Appendix C: the coalesced kernel's rate at each BLOCK under both block orders, from
    the recording, and the largest relative difference between them."""
    from gemm_kernels.measure import lookup
    rows, gap = [], 0.0
    for b in blocks:
        rate = {g: lookup.recorded("coalesced", (size,) * 3, {"BLOCK": b, "GRID": g})
                ["gflops"]["median"] for g in BLOCK_ORDERS}
        # from the rates as printed, so a reader who divides them gets the same gap
        gap = max(gap, abs(round(rate["x->row"]) / round(rate["x->col"]) - 1))
        rows.append(f"BLOCK = {b}: " + "; ".join(f"{BLOCK_ORDERS[g]}: {r:,.0f} GFLOP/s"
                                                  for g, r in rate.items()))
    return Text("\n".join(rows) + f"\nAt {size}^3 the block order moves the rate by "
                f"{gap:.2%} at most.")


def b_row_picture(block: int = 16, n: int = MISALIGNED_N, ks=(0, 8)):
    """The pencil count's crux, drawn as `sector_picture` draws a load of B (the same
    shades, sector boundaries and dashed line boxes), but by address, since at N = 2047 a
    row of B no longer starts on a line: for each step k of `ks`, the floats of B that
    warp 0 of the coalesced kernel loads, on the two lines from the one holding
    B[k][0]. Row k starts (k x n) mod 32 floats into its line; the title of each strip
    gives that place and the sectors and lines the load touches (`model.sectors`,
    `model.lines`)."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    per, width = model.SECTOR // 4, 2 * LINE_FLOATS
    fig, axes = plt.subplots(len(ks), 1, figsize=(10, 1.3 * len(ks) + 0.6))
    for ax, k in zip(np.atleast_1d(axes), ks):
        lanes = [l["B"] for l in model.warp_elements("coalesced", {"BLOCK": block}, n, n, n, k=k)
                 if l["active"]]
        base = (k * n) // LINE_FLOATS * LINE_FLOATS        # first float of B[k][0]'s line
        counts = {}
        for w in lanes:
            counts[w - base] = counts.get(w - base, 0) + 1
        grid = np.zeros((1, width))
        for c in counts:
            grid[0, c - c % per:c - c % per + per] = 1
        for c, m in counts.items():
            grid[0, c] = 2
            ax.text(c, 0, m, ha="center", va="center", fontsize=8)
        ax.imshow(grid, cmap=ListedColormap(["white", "#fdd9b5", "#f28e2b"]), vmin=0, vmax=2,
                  aspect="equal")
        for x in range(per, width, per):
            ax.axvline(x - 0.5, color="0.4", lw=0.8)
        # the line boundary, bold: a load that straddles it touches two lines
        ax.axvline(LINE_FLOATS - 0.5, color="crimson", lw=2.5, zorder=4)
        _outline_lines(ax, [(0, c) for c in counts])
        n_lines = model.lines(lanes)
        ax.set_yticks([])
        ax.set_xticks([*range(0, width, 8), width - 1])
        ax.set_title(f"k = {k}: row k of B starts {(k * n) % LINE_FLOATS} floats into a line; "
                     f"the warp's {len(counts)} floats touch {model.sectors(lanes)} sectors "
                     f"in {n_lines} line{'s' if n_lines > 1 else ''}", fontsize=10)
    ax.set_xlabel("float, counted from the start of the line that holds B[k][0] "
                  "(dashed box: a 128-byte line; red: the boundary between two lines)")
    fig.suptitle(f"coalesced, BLOCK = {block}, N = {n}: the load of B of warp 0 (the number "
                 "in a box: how many lanes load that float)", fontsize=11)
    fig.tight_layout()
    return fig


# The tables Appendix E counts again: for each, its heading, its study and the counters its
# command asks for.
CHECKS = (("The L1 table of *One wavefront per cycle*", L1_STUDY, TABLE_METRICS),
          ("The naive kernel's table of *Two stages, not one*", NAIVE_ALIGNMENT_L1,
           ALIGNMENT_METRICS),
          ("The coalesced kernel's table of *Two stages, not one*", ALIGNMENT_L1,
           ALIGNMENT_METRICS))


def counting_guide(checks=CHECKS) -> Text:
    """Appendix E: for each table of `checks`, the one Nsight Compute command that counts
    it again, the divisor that turns a launch's totals into counts per warp and step (its
    warp-steps, M x N x K / active lanes, as the tables divide), and what the recording
    counted, to compare: the data stage's wavefronts (and the tag stage's, where the
    command asks for them) per warp and step, and the data stage's per SM and cycle."""
    out = []
    for heading, study, metrics in checks:
        rec = studies.recording_of(study)
        sms = records.recorded_device(rec).get("sm_count")     # the SMs of the GPU profiled
        rows, divisors = [], {}
        for shape, step, m, _, per in _profiled_steps(study, rec):
            lanes, warp_steps = model._warp_steps(step.kernel, step.params, shape)
            exact = shape[0] * shape[1] * shape[2] == lanes * warp_steps
            divisors[(shape[0], lanes)] = (f"{warp_steps:,}" if exact
                                           else f"about {warp_steps / 1e6:,.2f} million")
            wf = m.get(model.WAVEFRONTS)
            got = f"wavefronts per warp and step: data stage {per(wf)}"
            if TAG_WAVEFRONTS in metrics:
                got += f", tag stage {per(m.get(TAG_WAVEFRONTS))}"
            if wf and sms and m.get(model.CYCLES):
                got += f"; data stage per SM and cycle: {wf / sms / m[model.CYCLES]:.2f}"
            rows.append(f"  {model.label(step.kernel, step.params)} at {shape[0]}^3: {got}")
        out += [f"{heading}:", str(ncu_command(study, metrics)),
                "Divide each .sum by the warp-steps, M x N x K / active lanes: "
                + "; ".join(f"{d} at {n}^3 ({lanes} lanes)"
                            for (n, lanes), d in divisors.items()) + ".",
                "To compare, what the recording counted on "
                f"{rec.device['name'] if rec else 'no GPU (not recorded)'}:", *rows, ""]
    return Text("\n".join(out).rstrip())


# Appendix B's studies: each had a recorded run of its own (the stall plot's counters
# came with the L1 table's run, which recorded more than the table needs).
APPENDIX_B_RUNS = (("The stall plot", L1_STUDY), ("The cache table", CACHES_STUDY),
                   ("The stage table", STAGES_STUDY))


def appendix_b_commands(runs=APPENDIX_B_RUNS) -> Text:
    """For each picture and table of Appendix B, the Nsight Compute command that asks for
    every counter its recorded run holds (`ncu_command` with `metrics=None`)."""
    return Text("\n\n".join(f"{what} of Appendix B:\n{ncu_command(study, metrics=None)}"
                            for what, study in runs))
