"""Chapter 01: where the naive kernel's bytes go at 4096^3 (its recorded study keeps the
name it was profiled under, `ch00_naive_dram`).

Why this exists: the roofline places a kernel by the bytes it moves through DRAM, and a
kernel at 1% of the FP32 peak invites the guess that DRAM is what holds it back. The
study `ch00_naive_dram` profiled the naive kernel (its default: BLOCK = 32, x->row) at
4096^3 with Nsight Compute. Here its counts become bytes at each level of the memory
hierarchy (what the warps asked of the L1, what the SMs asked of the L2, what crossed
DRAM), set beside two yardsticks: the three matrices once each, the least an SGEMM
moves, and the DRAM traffic that would make DRAM the limit in the kernel's timed run
(`roofline.dram_point`). Every number comes from the recording (or is measured now,
live); nothing here is typed in.
"""
from __future__ import annotations

from gemm_kernels.core import device
from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.core.table import Table, bytes_text, fmt_number
from gemm_kernels.measure import records, roofline, studies
from gemm_kernels.notebook.display import Text

STUDY = "ch00_naive_dram"
# Sectors of 32 bytes the warps' global loads and stores asked of the L1 (hits and misses).
L1_SECTORS = ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
              "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum")
DRAM_BUSY = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
L2_HIT = "lts__t_sector_hit_rate.pct"
LOAD_INSTRUCTIONS = "smsp__inst_executed_op_global_ld.sum"
LANES = 32
# Chapter 02's profile of the same kernel, with the stall reasons of its warps.
STALL_STUDY = "ch02_l1_lines"
# The same counters for the naive kernel's x->col loads, at 2048^3 and off the lines.
XCOL_STUDY = "ch01_xcol_l1"
# ... and for the one x->row configuration chapter 02's profile leaves out (BLOCK = 16).
XROW_STUDY = "ch01_xrow_l1"
ISSUED = "smsp__issue_active.avg.pct_of_peak_sustained_active"   # % of cycles with an issue
MEANING = {"lg throttle": "the queue of global loads in front of the L1 is full",
           "long scoreboard": "waiting for the value of a global load"}


def traffic(study: str = STUDY) -> dict | None:
    """The profiled kernel's bytes and the yardsticks they are read against, or None where
    the recording lacks the study's row or the kernel's rate at its size, or the row was
    profiled on another GPU than the live one:
    {'kernel', 'params', 'size', 'gflops', 'ms', 'bytes': {'L1', 'L2', 'DRAM'},
    'matrices' (A, B and C once each), 'dram_limit' (DRAM bytes that would make DRAM the
    limit: the DRAM ceiling, measured where it can be, x the timed run), 'dram_gbps'
    (that ceiling),
    'dram_how' (whose bandwidth it is: the device copy's, or the theoretical one),
    'flop_per_dram_byte', 'dram_roof' (GFLOP/s the DRAM ceiling allows at that
    intensity), 'peak' (FP32), 'peak_gbps' (theoretical DRAM bandwidth), 'dram_busy_pct',
    'dram_read', 'dram_written' (DRAM's bytes apart), 'l2_hit_pct' (Nsight Compute's L2
    hit rate: over every sector the L2 looked up, not only the SMs' requests of the L2
    bar, so not shown beside it), 'sectors_per_load', 'lane_bytes' (the bytes the L1
    delivered to the lanes: 32 lanes x 4 B per warp load, even where lanes share an address)}."""
    (step, row), = studies.results(study)
    props = records.described_device()
    if row is None or records.current().device.get("name") != props.get("name"):
        return None     # not profiled, or profiled on another GPU than the live one
    size = row["shape"][0]
    p = roofline.dram_point((step.kernel, step.params), size)
    if p is None or not p["limit_bytes"]:
        return None
    m = row["metrics"]
    moved = roofline.level_bytes(m)
    dram = moved["DRAM"][0]
    peak = device.peak_fp32_gflops(props)
    dram_gbps = p["limit_bytes"] / (p["ms"] * 1e-3) / 1e9
    # dram_point takes the device copy's bandwidth, or the theoretical one without it
    theoretical = abs(dram_gbps / device.peak_bandwidth_gbps(props) - 1) < 1e-9
    x = 2 * size ** 3 / dram
    params = KERNELS[step.kernel].resolve(step.params)
    return {"kernel": step.kernel, "params": params, "size": size,
            "gflops": p["gflops"], "ms": p["ms"],
            "bytes": {"L1": roofline.SECTOR_BYTES * sum(m.get(k, 0) for k in L1_SECTORS),
                      "L2": moved["L2"][0], "DRAM": dram},
            "matrices": 3 * size * size * 4, "dram_limit": p["limit_bytes"],
            "dram_gbps": dram_gbps, "flop_per_dram_byte": x,
            "dram_how": "the theoretical" if theoretical else "the device copy's",
            "dram_roof": dram_gbps * x, "peak": peak,
            "peak_gbps": device.peak_bandwidth_gbps(props),
            "dram_busy_pct": m.get(DRAM_BUSY), "l2_hit_pct": m.get(L2_HIT),
            "dram_read": m.get(roofline.DRAM_METRICS[0], 0),
            "dram_written": m.get(roofline.DRAM_METRICS[1], 0),
            "sectors_per_load": m[L1_SECTORS[0]] / m[LOAD_INSTRUCTIONS],
            # every lane of every warp load gets its 4-byte float (all 32 lanes are active
            # at this size), whether the warp's addresses share a sector or not
            "lane_bytes": m[LOAD_INSTRUCTIONS] * LANES * 4}


def _settings(t: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in t["params"].items())


def _size(shape) -> str:
    """A profile's shape as the chapter writes it: 2048^3 for a cube."""
    return f"{shape[0]}^3" if len(set(shape)) == 1 else " x ".join(map(str, shape))


def bytes_plot(study: str = STUDY, ax=None):
    """One bar per level on a log scale, top to bottom: A, B and C once each; the bytes
    that crossed DRAM; the sectors the SMs asked of the L2 (x 32 B); the L1's two counts,
    the sector bytes it looked up (sectors x 32 B) and the bytes it delivered to the lanes
    (32 x 4 B per warp load); and, hatched, the DRAM traffic that would make DRAM the
    limit in the kernel's timed run (read against the DRAM bar only). Under the delivered
    bytes, dotted, the L1's byte width over the same timed run (`l1_byte_rate`: 128 B per
    SM and clock), for comparison only: the delivered bytes count a shared word once per
    lane. The L1's pace in lines is counted by `counts_per_step` and `l1_pace`, not drawn
    here, since lines are not bytes. Each bar says its bytes and its multiple of A, B and
    C (no second axis: the labels carry the multiple)."""
    import matplotlib.pyplot as plt
    t = traffic(study)
    if t is None:
        print(f"Not in this recording: the {STUDY} study, or the naive kernel's rate.")
        return None
    mats = t["matrices"]
    bars = [("A, B and C, once each\n(the least any SGEMM moves)", mats, "0.75", None),
            ("DRAM: bytes read and written", t["bytes"]["DRAM"], "C0", None),
            ("L2: sectors the SMs asked for, x 32 B", t["bytes"]["L2"], "C0", None),
            ("L1: sector bytes looked up\n(sectors x 32 B)", t["bytes"]["L1"], "C2", None),
            ("L1: bytes delivered to the lanes, derived\n(requests x 32 lanes x 4 B, shared or not)",
             t["lane_bytes"], "C1", None),
            (f"what DRAM could move in {t['ms']:,.0f} ms\n(at "
             f"{t['dram_how']} {t['dram_gbps']:,.0f} GB/s)", t["dram_limit"], "white", "//")]
    rate = l1_byte_rate(t)
    if rate:   # the L1's byte width over the same timed run, under the delivered bytes
        bars.insert(5, ("L1: its byte width in the same time\n(128 B per SM per clock; "
                        "for comparison)", rate[1] * t["ms"] * 1e-3, "white", ".."))
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 5))
    ys = range(len(bars))[::-1]
    for y, (label, b, colour, hatch) in zip(ys, bars):
        ax.barh(y, b, color=colour, edgecolor="k", hatch=hatch, height=0.6, gid=label)
        ax.text(b * 1.15, y, f"{bytes_text(b)} ({fmt_number(b / mats)} x)", va="center",
                fontsize=9)
    ax.set_yticks(list(ys), [b[0] for b in bars], fontsize=9)
    ax.set_xscale("log")
    ax.set_xlim(mats / 3, max(b[1] for b in bars) * 30)
    ax.set_xlabel("bytes (log scale)")
    ax.set_title(f"The naive kernel ({_settings(t)}) at {t['size']}^3: DRAM at "
                 f"{t['bytes']['DRAM'] / t['dram_limit']:.1%} of its limit, the L1 looking up "
                 f"{t['bytes']['L1'] / t['bytes']['DRAM']:,.0f} x DRAM's bytes;\n"
                 f"each level's bytes counted by Nsight Compute (the lanes' bytes derived: "
                 f"requests x 128 B); {records.source()}",
                 fontsize=10, pad=12)
    ax.grid(True, axis="x", which="major", alpha=0.3)
    return ax


def summary(study: str = STUDY, label: bool = True):
    """The recorded counts behind the chart, as a small table: each level's bytes, the
    same bytes per second of the timed run, the limit they are read against and the
    share of it. DRAM (read and written apart) against the device copy, as chapter 00
    reads it; the L2's bytes with DRAM's limit as a floor under its own (none is measured
    here); the bytes the L1 delivered to the lanes (32 x 4 B per warp load) against its
    byte width, for comparison only (the delivered bytes count a shared word once per
    lane). The sector bytes the L1 looked up get a row too, the chart's
    green bar, but no byte limit of their own (the L1's pace is counted in wavefronts,
    `counts_per_step`).
    The profiler's own DRAM-busy figure and the L2 hit rate are left out: the first is
    over the profiled run, at a lower clock than the timed one; the second counts every
    sector the L2 looked up, not only the SMs' requests of the L2 bar.
    `label` False leaves out where the numbers come from, for a table right under the
    chart, whose title says it."""
    from gemm_kernels.core.table import Table
    t = traffic(study)
    if t is None:
        return Text(f"Not in this recording: the {STUDY} study, or the naive kernel's rate.")
    b, sec = t["bytes"], t["ms"] * 1e-3
    per_s = lambda n: f"{bytes_text(n / sec)}/s"      # noqa: E731 -- over the timed run
    rows = [{"level": f"DRAM ({bytes_text(t['dram_read'])} read, "
                      f"{bytes_text(t['dram_written'])} written)",
             "bytes": bytes_text(b["DRAM"]), "per second": per_s(b["DRAM"]),
             "limit": f"{t['dram_gbps']:,.0f} GB/s ({t['dram_how']} bandwidth"
                      + (", chapter 00)" if t["dram_how"] == "the device copy's" else ")"),
             "share of the limit": f"{_dram_share(t):.1%}"},
            {"level": "L2 (what the SMs asked for)", "bytes": bytes_text(b["L2"]),
             "per second": per_s(b["L2"]),
             # no L2 bandwidth was measured, so no share of it is printed; the L2 is
             # faster than DRAM, whose share is already small
             "limit": "not measured; above DRAM's, so not a limit here",
             "share of the limit": "-"}]
    rows.append({"level": "L1, sector bytes looked up (sectors x 32 B)",
                 "bytes": bytes_text(b["L1"]), "per second": per_s(b["L1"]),
                 "limit": "none in bytes: its pace is counted in wavefronts (section D)",
                 "share of the limit": "-"})
    rate = l1_byte_rate(t)
    if rate:
        rows.append({"level": "L1, bytes delivered to the lanes (32 lanes x 4 B per "
                              "load, even where lanes share an address)",
                     "bytes": bytes_text(t["lane_bytes"]), "per second": per_s(t["lane_bytes"]),
                     "limit": f"{bytes_text(rate[1])}/s: its byte width (32 banks x 4 B "
                              "per SM per clock), for comparison",
                     "share of the limit": f"{rate[0] / rate[1]:.0%}"})
    return Table(rows, list(rows[0]),
                 title=f"the naive kernel ({_settings(t)}) at {t['size']}^3, "
                       f"{t['gflops']:,.0f} GFLOP/s, timed run {t['ms']:,.0f} ms: each "
                       f"level's bytes against its limit"
                       + (f" ({records.source()})" if label else ""))


def _dram_share(t: dict) -> float:
    """DRAM's bytes over what it could move in the timed run, from `traffic`."""
    return t["bytes"]["DRAM"] / (t["ms"] * 1e-3) / (t["dram_gbps"] * 1e9)


def l1_byte_rate(t: dict | None = None) -> tuple[float, float] | None:
    """The bytes the profiled kernel's L1 delivered to the lanes per second of the timed
    run (32 x 4 B per warp load), and the L1's width in bytes per second (128 bytes per
    SM and clock, chapter 02), to set them against, from `traffic` (None
    where it or the width is missing)."""
    t = traffic() if t is None else t
    width = device.smem_bandwidth_gbps(records.described_device())
    if t is None or not width:
        return None
    return t["lane_bytes"] / (t["ms"] * 1e-3), width * 1e9


def _profiled(params: dict, study: str):
    """The recorded profile rows of the naive kernel at `params` in `study`."""
    return [row for step, row in studies.results(study)
            if row is not None and step.kernel == "naive" and dict(step.params) == params]


def stall_table(params: dict | None = None, study: str = STALL_STUDY):
    """Where the naive kernel's warps wait, as a small table (reason, cycles a warp waits
    per issued instruction, share of the wait), from chapter 02's profile of the same
    settings: the direct evidence that its loads, not its arithmetic or DRAM, hold it
    back. The caption gives the profile's size and the kernel's rate there. A Text saying
    so where the recording lacks the row."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import lookup
    from gemm_kernels.notebook.evidence import stall_reasons
    params = dict(params or KERNELS["naive"].resolve(None))
    for row in _profiled(params, study):
        # "selected" is the issuing warp itself, not a wait: left out, as chapter 02's
        # stall plot leaves it out, so that both give the same total
        reasons = {k: v for k, v in stall_reasons(row).items() if k != "selected"}
        total = sum(reasons.values())
        if not total:
            break
        shape = tuple(studies.get(study).shapes[0])
        try:
            rate = f", {lookup.recorded('naive', shape, params)['gflops']['median']:,.0f} GFLOP/s"
        except LookupError:
            rate = ""
        top = sorted(reasons.items(), key=lambda kv: -kv[1])
        big = [(k, v) for k, v in top if v >= 0.02 * total]
        rows = [{"reason": k + (f" ({MEANING[k]})" if k in MEANING else ""),
                 "cycles per issued instruction": round(v, 1), "share": f"{v / total:.0%}"}
                for k, v in big]
        rest = total - sum(v for _, v in big)
        if rest > 0:
            rows.append({"reason": "the other reasons together",
                         "cycles per issued instruction": round(rest, 1),
                         "share": f"{rest / total:.0%}"})
        rows.append({"reason": "in all", "cycles per issued instruction": round(total, 1),
                     "share": "100%"})
        return Table(rows, list(rows[0]),
                     title=f"where the naive kernel's warps wait ({_settings({'params': params})}"
                           f"), Nsight Compute at {_size(shape)}{rate} "
                           f"({records.recording_label()})")
    return Text(f"Not in this recording: the naive kernel's stall reasons ({study}).")


def counts_per_step(params: dict | None = None, study: str = STALL_STUDY) -> Table:
    """One warp's step k of the naive kernel in chapter 02's profile, counted four ways:
    the 128-byte lines, the 32-byte sectors and the words on the busiest L1 bank of A's
    load and of B's, from the index expressions, and beside their sum the sectors and L1
    wavefronts Nsight Compute counted per step (per load request x the step's 2 loads;
    it counts both loads together). The wavefronts stand on the lines' row, so that a
    reader sees the two side by side. At the power-of-two size profiled all four are
    equal, so the wavefronts alone cannot say which the L1 pays for (chapter 02 tells
    lines and banks apart)."""
    from gemm_kernels.memory import ch01_02_sectors as sec
    params = dict(params or KERNELS["naive"].resolve(None))
    for row in _profiled(params, study):
        m = row["metrics"]
        req, wf = m.get(sec.REQUESTS_LD), m.get(sec.WAVEFRONTS)
        if not req or not wf or not m.get(sec.SECTORS_LD):
            break
        shape = tuple(row["shape"])
        lanes = sec.warp_elements("naive", params, *shape)
        loads = {x: [l[x] for l in lanes] for x in ("A", "B")}
        nsight = lambda count: f"{2 * count / req:.2f}"   # 2 load requests per step
        rows = []
        for name, count, counted in (
                ("128-byte lines (Nsight Compute: L1 wavefronts)",
                 sec.lines, wf),
                ("32-byte sectors", sec.sectors, m[sec.SECTORS_LD]),
                ("words on the busiest L1 bank", sec.bank_words, None)):
            a, b = count(loads["A"]), count(loads["B"])
            rows.append({"count": name, "A's load": a, "B's load": b,
                         "per step (A + B), from the indices": a + b,
                         "per step, Nsight Compute": "-" if counted is None else nsight(counted)})
        return Table(rows, list(rows[0]), title=f"{sec.label('naive', params)} at "
                     f"{' x '.join(map(str, shape))}: one warp's step k, counted four ways "
                     f"(Nsight Compute counts A's and B's loads together; "
                     f"{records.recording_label()})")
    return Text(f"Not in this recording: the naive kernel's wavefront counters ({study}).")


def _naive_rows(study: str, size: int):
    """(params, row) of every naive step `study` recorded at size^3 (on the GPU that
    recorded the study), the rows it lacks left out; none if it was not run there."""
    shape = (size,) * 3
    if shape not in map(tuple, studies.get(study).shapes):
        return []
    rec = studies.recording_of(study, shape)
    if rec is None:
        return []
    return [(dict(step.params), row) for step, row in studies.results(study, shape, rec)
            if row is not None and step.kernel == "naive"]


def xcol_counted(blocks=(32, 16), study: str = XCOL_STUDY) -> Text:
    """Nsight Compute's count for the naive kernel's x->col loads at 2048^3 (`study`),
    the size at which the index expressions' lines hold (a power of two): per warp and
    step (the profiler's count per load request x the step's 2 loads), its sectors and
    its L1 wavefronts, beside the lines the index expressions give. Where sectors and
    lines differ, the wavefronts follow the lines. A Text saying so where the recording
    lacks a row."""
    from gemm_kernels.memory import ch01_02_sectors
    size = 2048
    rows = {p.get("BLOCK"): row for p, row in _naive_rows(study, size)
            if p.get("MAPPING") == "x->col"}
    parts = []
    for block in blocks:
        m = (rows.get(block) or {}).get("metrics", {})
        req = m.get(ch01_02_sectors.REQUESTS_LD)
        if not req or not m.get(ch01_02_sectors.WAVEFRONTS) or not m.get(ch01_02_sectors.SECTORS_LD):
            return Text(f"Not in this recording: x->col's wavefront counters at "
                        f"BLOCK = {block} ({study}).")
        model, = ch01_02_sectors.sector_table([("naive", {"BLOCK": block, "MAPPING": "x->col"})])
        parts.append(f"BLOCK = {block}: {2 * m[ch01_02_sectors.SECTORS_LD] / req:.2f} sectors, "
                     f"{model['128-byte lines (A + B)']} lines, "
                     f"{2 * m[ch01_02_sectors.WAVEFRONTS] / req:.2f} wavefronts")
    return Text(f"x->col, per warp and step at {size}^3 (sectors and wavefronts counted by "
                "Nsight Compute, lines from the index expressions): " + "; ".join(parts) + ".")


def wavefronts_per_step(size: int = 2048) -> dict:
    """Nsight Compute's L1 wavefronts per warp and step (per load request x the step's 2
    load requests) at size^3, keyed by the naive kernel's (MAPPING, BLOCK): x->row from
    chapter 02's profile (`STALL_STUDY`) and its own (`XROW_STUDY`), x->col from its own
    (`XCOL_STUDY`). Those not profiled are absent."""
    from gemm_kernels.memory import ch01_02_sectors
    out = {}
    for study in (STALL_STUDY, XROW_STUDY, XCOL_STUDY):
        for p, row in _naive_rows(study, size):
            m = row["metrics"]
            req, wf = m.get(ch01_02_sectors.REQUESTS_LD), m.get(ch01_02_sectors.WAVEFRONTS)
            if req and wf:
                out[(p.get("MAPPING", "x->row"), p.get("BLOCK"))] = 2 * wf / req
    return out


def l1_pace(params: dict | None = None, study: str = STALL_STUDY,
            part: str = "both") -> Text:
    """The same profile's wavefronts per SM and cycle, over the profiler's own count of
    each SM's cycles (`sm__cycles_elapsed.avg`), so no clock is assumed; and the bytes a
    load request looks up against those it delivers (why the chart of the chapter's
    section C shows the L1 looking up several times the bytes it delivers to the lanes). The SMs are those of
    the GPU profiled, the recording's, whatever GPU runs the notebook. `part`: "pace"
    for the wavefronts per SM and cycle only (the main text's one line), "bytes" for the
    bytes per request only (section D, after the main text printed the pace), "both"."""
    from gemm_kernels.memory import ch01_02_sectors
    params = dict(params or KERNELS["naive"].resolve(None))
    gpu = records.recorded_device()
    sms = gpu.get("sm_count")
    for row in _profiled(params, study):
        m = row["metrics"]
        req, wf = m.get(ch01_02_sectors.REQUESTS_LD), m.get(ch01_02_sectors.WAVEFRONTS)
        cycles, sectors = m.get(ch01_02_sectors.CYCLES), m.get(ch01_02_sectors.SECTORS_LD)
        if not req or not wf or not cycles or not sms or not sectors:
            break
        per_cycle = (f"Per SM and cycle: {wf / 1e9:.2f} billion wavefronts / {sms} SMs "
                     f"(the {gpu.get('name', 'GPU')} profiled) / "
                     f"{cycles / 1e6:.1f} million cycles (the profiler's count of each SM's "
                     f"cycles) = {wf / sms / cycles:.2f} wavefronts")
        per_request = (f"Bytes per load request: {sectors / req:.2f} sectors x 32 B = "
                       f"{32 * sectors / req:,.0f} B looked up, to deliver 32 lanes x 4 B = 128 B")
        return Text({"pace": per_cycle, "bytes": per_request}.get(
            part, f"{per_cycle}\n{per_request}"))
    return Text(f"Not in this recording: the naive kernel's wavefront counters ({study}).")


def issue_pace(params: dict | None = None, study: str = STALL_STUDY,
               label: bool = True) -> Text:
    """The stall table's total read as a pace: a warp issues once every (cycles waiting +
    1) cycles; the warps that share a scheduler (warps active / 4 schedulers) then keep
    it issuing in that many of its cycles, set beside Nsight Compute's own count of the
    cycles in which a scheduler issued (chapter 02 prints the same counter). `label`
    False leaves out the recording's name, for a fold under the stall table, which gives it."""
    from gemm_kernels.notebook.ch07_ablation import SCHEDULERS_PER_SM, WARPS_PER_SM
    from gemm_kernels.notebook.evidence import stall_reasons
    params = dict(params or KERNELS["naive"].resolve(None))
    for row in _profiled(params, study):
        m = row["metrics"]
        active, issued = (m.get("sm__warps_active.avg.pct_of_peak_sustained_active"),
                          m.get(ISSUED))
        pace = sum(stall_reasons(row).values())      # the waiting states and "selected"
        if not active or not issued or not pace:
            break
        warps = active / 100 * WARPS_PER_SM / SCHEDULERS_PER_SM
        return Text((f"Nsight Compute, {records.recording_label()}.\n" if label else "")
                    + f"A warp issues one instruction every {pace:,.0f} cycles (the {pace - 1:,.0f} "
                    f"it waits, and the one it issues). {warps:.1f} warps share each of the "
                    f"SM's {SCHEDULERS_PER_SM} schedulers (Nsight Compute measured an achieved "
                    f"occupancy, the share of the warp slots filled on average over the run, "
                    f"of {active:.1f}%: {WARPS_PER_SM} warp slots x {active:.1f}% / "
                    f"{SCHEDULERS_PER_SM}), so a scheduler has an "
                    f"instruction to issue in about {warps:.1f} / {pace:,.0f} = "
                    f"{warps / pace:.1%} of its cycles; Nsight Compute counted "
                    f"{issued / 100:.1%}. The schedulers sit idle almost all the time."
                    + _l1_pace(params, active / 100 * WARPS_PER_SM, pace))
    return Text(f"Not in this recording: the naive kernel's issue counters ({study}).")


def _l1_pace(params: dict, warps: float, pace: float) -> str:
    """The same pace from the L1's side: every warp of the SM queues its L1 cycles per
    step k (= lines = words on one bank, at a power-of-two size) for one L1 that does
    about one a clock, so a warp gets a step every warps x cycles clocks and issues its
    instructions for that step (one pass of the loop over its FFMAs, one per step) in
    them. The sentence ties the stall table to the line count."""
    from gemm_kernels.core import analysis
    from gemm_kernels.memory.ch01_02_sectors import sector_table
    loop = analysis.summary("naive", params)["loop_histogram"]
    n, steps = sum(loop.values()), loop["FFMA"]
    cycles = sector_table([("naive", params)])[0]["128-byte lines (A + B)"]
    per_step = n / steps
    return (f"\nThe L1 gives the same pace: one pass of the loop issues {n} instructions for "
            f"{steps} steps k ({per_step:.2f} per step), and each step of a warp costs "
            f"{cycles} L1 cycles. With {warps:.1f} warps per SM in line for one L1 at about "
            f"one cycle a clock, a warp issues about every {warps:.1f} x {cycles} / "
            f"{per_step:.2f} = {warps * cycles / per_step:,.0f} cycles, against the "
            f"{pace:,.0f} above.")


def ncu_commands() -> Text:
    """The Nsight Compute command lines that recorded this chapter's bytes table, its
    stall table and the wavefronts of all six configurations (x->row at BLOCK = 16 and
    x->col have their own profiles), each study with its own metrics: what to run to
    count them again on another GPU."""
    return Text("\n".join(studies.ncu_command(s)
                           for s in (STUDY, STALL_STUDY, XROW_STUDY, XCOL_STUDY)))
