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
from gemm_kernels.core.table import fmt_number
from gemm_kernels.measure import records, roofline, studies
from gemm_kernels.notebook.display import Text

STUDY = "ch00_naive_dram"
# Sectors of 32 bytes the warps' global loads and stores asked of the L1 (hits and misses).
L1_SECTORS = ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
              "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum")
DRAM_BUSY = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
L2_HIT = "lts__t_sector_hit_rate.pct"
LOAD_INSTRUCTIONS = "smsp__inst_executed_op_global_ld.sum"
# Chapter 02's profile of the same kernel, with the stall reasons of its warps.
STALL_STUDY = "ch02_l1_lines"
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
    bar, so not shown beside it), 'sectors_per_load'}."""
    (step, row), = studies.results(study)
    props = roofline.device_properties()
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
            "sectors_per_load": m[L1_SECTORS[0]] / m[LOAD_INSTRUCTIONS]}


def bytes_text(n: float) -> str:
    """Bytes in powers of ten, as profilers give traffic: 201 MB, 8.53 GB, 2.27 TB."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            v = n / scale
            return f"{v:,.3g} {unit}" if v < 1000 else f"{v:,.0f} {unit}"
    return f"{n:,.0f} B"


def _settings(t: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in t["params"].items())


def bytes_plot(study: str = STUDY, ax=None):
    """One bar per level on a log scale, top to bottom: A, B and C once each; the bytes
    that crossed DRAM; the sectors the SMs asked of the L2 and the warps asked of the L1
    (x 32 B); and, hatched, the DRAM traffic that would make DRAM the limit in the
    kernel's timed run, also drawn as a dashed line down the picture. The L1's bar has
    its own limit, a dotted red outline: its width (`l1_byte_rate`) over the same timed run,
    so that the L1's bytes are read against the L1, not against DRAM. Each bar says its
    bytes and its multiple of A, B and C, which the top axis also gives."""
    import matplotlib.pyplot as plt
    t = traffic(study)
    if t is None:
        print(f"Not in this recording: the {STUDY} study, or the naive kernel's rate.")
        return None
    mats = t["matrices"]
    bars = [("A, B and C, once each\n(the least any SGEMM moves)", mats, "0.75", None),
            ("DRAM: bytes read and written", t["bytes"]["DRAM"], "C0", None),
            ("L2: sectors the SMs asked for, x 32 B", t["bytes"]["L2"], "C0", None),
            ("L1: sectors the warps asked for, x 32 B", t["bytes"]["L1"], "C3", None),
            (f"DRAM bytes that would make DRAM its limit\n({t['ms']:,.0f} ms at "
             f"{t['dram_how']} {t['dram_gbps']:,.0f} GB/s)", t["dram_limit"], "white", "//")]
    rate = l1_byte_rate(t)
    # the L1's own yardstick: its width over the same timed run
    l1_limit = rate[1] * t["ms"] * 1e-3 if rate else None
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 3.8))
    ys = range(len(bars))[::-1]
    for i, (y, (label, b, colour, hatch)) in enumerate(zip(ys, bars)):
        ax.barh(y, b, color=colour, edgecolor="k", hatch=hatch, height=0.6, gid=label)
        text = f"{bytes_text(b)} ({fmt_number(b / mats)} x)"
        if i == 3 and l1_limit:      # inside the bar: its right is the L1 limit's label
            ax.text(b / 1.15, y, text, va="center", ha="right", fontsize=9, color="white")
        else:
            ax.text(b * 1.15, y, text, va="center", fontsize=9)
    # behind the bars: the L1's bar is read against its own limit, not against DRAM's
    ax.axvline(t["dram_limit"], color="k", ls="--", lw=1, zorder=0.5)
    if l1_limit:
        ax.barh(ys[3], l1_limit, fill=False, edgecolor="C3", ls=":", lw=1.5, height=0.8,
                zorder=0, gid="the L1's limit")
        ax.text(l1_limit * 1.15, ys[3], f"the L1's limit, {bytes_text(l1_limit)}\n"
                f"({bytes_text(rate[1])}/s x {t['ms']:,.0f} ms)", color="C3", fontsize=9,
                va="center", bbox=dict(fc="white", ec="none", pad=1))
    ax.set_yticks(list(ys), [b[0] for b in bars], fontsize=9)
    ax.set_xscale("log")
    ax.set_xlim(mats / 3, max(max(b[1] for b in bars) * 30, (l1_limit or 0) * 12))
    top = ax.secondary_xaxis("top", functions=(lambda b: b / mats, lambda m: m * mats))
    top.set_xlabel("times A, B and C (log scale)", fontsize=9)
    ax.set_xlabel("bytes (log scale)")
    ax.set_title(f"DRAM would need to move {t['dram_limit'] / t['bytes']['DRAM']:,.0f}x more "
                 f"to be the limit: the naive kernel ({_settings(t)}) at {t['size']}^3,\n"
                 f"its bytes at each level, counted by Nsight Compute; {records.source()}",
                 fontsize=10, pad=12)
    ax.grid(True, axis="x", which="major", alpha=0.3)
    return ax


def summary(study: str = STUDY) -> Text:
    """The recorded counts behind the verdict, in words: what DRAM moved (read and
    written apart) and how busy that kept it over the timed run (against the device copy,
    as chapter 00 reads it), the L2's bytes beside
    DRAM's, the roof its counted bytes allow, and how many 32-byte sectors a warp's load
    instruction asked of the L1 (chapter 02 explains why that, not DRAM, sets the pace),
    and the L1's bytes over the timed run against its width, far below it.
    The profiler's own DRAM-busy figure and the L2 hit rate are left out: the first is
    over the profiled run, at a lower clock than the timed one; the second counts every
    sector the L2 looked up, not only the SMs' requests of the L2 bar."""
    t = traffic(study)
    if t is None:
        return Text(f"Not in this recording: the {STUDY} study, or the naive kernel's rate.")
    b = t["bytes"]
    roof, roof_name = min((t["peak"], "the FP32 peak"), (t["dram_roof"], "DRAM's"))
    lines = [
        f"The naive kernel ({_settings(t)}) at {t['size']}^3, {t['gflops']:,.0f} GFLOP/s "
        f"({records.source()}):",
        f"  DRAM moved {bytes_text(b['DRAM'])} ({bytes_text(t['dram_read'])} read, "
        f"{bytes_text(t['dram_written'])} written), 1/{t['dram_limit'] / b['DRAM']:,.0f} "
        f"of the {bytes_text(t['dram_limit'])} that would make DRAM its limit",
        f"  DRAM busy: those bytes over the timed {t['ms']:,.0f} ms are "
        f"{b['DRAM'] / (t['ms'] * 1e-3) / (t['dram_gbps'] * 1e9):.1%} of "
        f"{t['dram_how']} {t['dram_gbps']:,.0f} GB/s"
        + (" (chapter 00's measured device-to-device copy)"
           if t["dram_how"] == "the device copy's" else ""),
        f"  the SMs asked the L2 for {bytes_text(b['L2'])} (read and written); DRAM moved "
        f"{b['DRAM'] / b['L2']:.0%} as much",
        f"  {t['flop_per_dram_byte']:.1f} FLOP per DRAM byte: the lower roof there is "
        f"{roof_name}, {roof / 1000:.1f} TFLOP/s, {roof / t['gflops']:,.0f} times its rate",
        f"  the L1 was asked for {bytes_text(b['L1'])}, {b['L1'] / b['DRAM']:,.0f} times "
        f"DRAM's bytes: {t['sectors_per_load']:.1f} sectors of 32 bytes per load "
        f"instruction of a warp, whose 32 lanes load 4 bytes each",
    ]
    rate = l1_byte_rate(t)
    if rate:
        # bytes over time, against the L1's width (chapter 02): far below it, so the
        # L1's limit is not bytes
        lines.append(f"  the L1's bytes over the timed run: {bytes_text(rate[0])}/s, "
                     f"{rate[0] / rate[1]:.0%} of the {bytes_text(rate[1])}/s its 128 bytes "
                     "per SM and clock allow")
    return Text("\n".join(lines))


def l1_byte_rate(t: dict | None = None) -> tuple[float, float] | None:
    """The sector bytes the profiled kernel asked of its L1 per second of the timed run,
    and the L1's width in bytes per second (128 bytes per SM and clock, chapter 02), from
    `traffic` (None where it or the width is missing)."""
    t = traffic() if t is None else t
    width = device.smem_bandwidth_gbps(roofline.device_properties())
    if t is None or not width:
        return None
    return t["bytes"]["L1"] / (t["ms"] * 1e-3), width * 1e9


def line_pace(study: str = STUDY) -> Text:
    """Why the L1's bytes reach only a fraction of its width: the profiled run's rate
    turned into 128-byte lines per SM and clock (a warp's step k is 2 FLOP per lane, and
    touches the lines counted from the index expressions), and the bytes a warp takes
    from each line it touches, against the line's 128. Chapter 02 derives the limit."""
    from gemm_kernels.memory import ch01_02_sectors
    t = traffic(study)
    props = roofline.device_properties()
    if t is None or not props.get("sm_count") or not props.get("sm_clock_mhz"):
        return Text(f"Not in this recording: the {STUDY} study, or the GPU's SMs and clock.")
    row, = ch01_02_sectors.sector_table([("naive", t["params"])])
    lanes, lines = row["active lanes"], row["128-byte lines (A + B)"]
    sectors = row["sectors per step (A + B)"]
    steps = t["gflops"] * 1e9 / (2 * lanes)                   # warp steps per second
    per_sm = steps * lines / props["sm_count"]
    per_clock = per_sm / (props["sm_clock_mhz"] * 1e6)
    line_bytes = 4 * roofline.SECTOR_BYTES
    used = sectors * roofline.SECTOR_BYTES / (lines * line_bytes)
    return Text(
        f"In lines, at {t['gflops']:,.0f} GFLOP/s: a warp's step k is {2 * lanes} FLOP "
        f"({lanes} lanes x 2), so the GPU makes {steps / 1e9:.2f} billion warp steps per "
        f"second. Each touches {lines} lines: {steps * lines / 1e9:,.0f} billion lines per "
        f"second, {per_sm / 1e9:.2f} billion per SM ({props['sm_count']} SMs), "
        f"{per_clock:.2f} per clock at {props['sm_clock_mhz']:,.0f} MHz.\n"
        f"Each line gives the warp {sectors / lines:g} sector of {roofline.SECTOR_BYTES} "
        f"bytes out of its {line_bytes}, so the L1 delivers "
        f"{sectors * roofline.SECTOR_BYTES / lines:g} / {line_bytes} = {used:.0%} of the "
        "bytes it could: the share of its width printed above.")


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
                           f"), Nsight Compute at {'x'.join(map(str, shape))}{rate}")
    return Text(f"Not in this recording: the naive kernel's stall reasons ({study}).")


def issue_pace(params: dict | None = None, study: str = STALL_STUDY) -> Text:
    """The stall table's total read as a pace: a warp issues once every (cycles waiting +
    1) cycles; the warps that share a scheduler (warps active / 4 schedulers) then keep
    it issuing in that many of its cycles, set beside Nsight Compute's own count of the
    cycles in which a scheduler issued (chapter 02 prints the same counter)."""
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
        return Text(f"A warp issues one instruction every {pace:,.0f} cycles (the {pace - 1:,.0f} "
                    f"it waits, and the one it issues). {warps:.1f} warps share each of the "
                    f"SM's {SCHEDULERS_PER_SM} schedulers (Nsight Compute measured an achieved "
                    f"occupancy of {active:.1f}%: {WARPS_PER_SM} warp slots x {active:.1f}% / "
                    f"{SCHEDULERS_PER_SM}), so a scheduler has an "
                    f"instruction to issue in about {warps:.1f} / {pace:,.0f} = "
                    f"{warps / pace:.1%} of its cycles; Nsight Compute counted "
                    f"{issued / 100:.1%}. The schedulers sit idle almost all the time.")
    return Text(f"Not in this recording: the naive kernel's issue counters ({study}).")
