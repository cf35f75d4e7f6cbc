"""Chapter 14: why the mma.sync kernel falls further behind cuBLAS as the GEMM grows.

Two recorded measurements answer it together. The Nsight Compute study (`ch14_mma`)
gives the kernel's work per SM cycle at 4096^3 and 8192^3, the clock locked by the
profiler. The clocks study (`ch14_clocks`, `measure.clocks`) runs the kernel, then
cuBLAS, for seconds each at every size, with the SM clock, the board's power and the
reasons the clock is held down sampled: the clock each really ran at. Each function
reads one recording (the one that holds the clocks study) and names its GPU; where a
study is missing it says so in words.
"""
from __future__ import annotations

from gemm_kernels.measure import studies
from gemm_kernels.notebook import ch13_wmma as ch13
from gemm_kernels.notebook.display import Text

STUDY = "ch14_clocks"
PROFILE = "ch14_mma"
STEP = 1                     # the study's BK = 64, 3-stage step: the chapter's best
TIME, CYCLES = "gpu__time_duration.sum", "sm__cycles_elapsed.avg"


def recording():
    """The recording that holds the clocks study, or None."""
    return studies.recording_of(STUDY)


def _runs(rec) -> list[tuple[int, dict]]:
    """(size, row) of the chapter's best configuration at every size the study ran."""
    out = []
    for shape in studies.get(STUDY).shapes:
        row = studies.results(STUDY, shape, rec)[STEP][1]
        if row is not None:
            out.append((shape[0], row))
    return out


def per_cycle(rec) -> dict[int, float]:
    """{size: the kernel's FLOP per cycle of one SM under the profiler} for the
    profile's BK = 64, 3-stage step in `rec` (empty where `rec` does not hold the
    profile or does not know its SM count)."""
    best = studies.get(PROFILE).steps[-1]
    out = {}
    for shape in studies.get(PROFILE).shapes:
        row = dict((s.label, r) for s, r in studies.results(PROFILE, shape, rec)).get(best.label)
        m = (row or {}).get("metrics", {})
        if m.get(CYCLES) and rec.device.get("sm_count"):
            out[shape[0]] = 2 * shape[0] ** 3 / m[CYCLES] / rec.device["sm_count"]
    return out


def plot_clocks(rec=None, ax=None):
    """The SM clock the kernel and cuBLAS ran at, each for seconds, at every size; the
    power each drew above its bar."""
    import matplotlib.pyplot as plt
    rec = rec or recording()
    runs = _runs(rec) if rec else []
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 3.6))
    if not runs:
        ax.text(0.5, 0.5, "the clocks study is not in this recording", ha="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return ax
    width = 0.38
    for i, (n, row) in enumerate(runs):
        for j, (name, run, colour) in enumerate(
                (("mma.sync kernel", row["sustained"], "tab:red"),
                 ("cuBLAS FP16", row["reference"]["sustained"], "0.3"))):
            x = i + (j - 0.5) * width
            mhz = run["sm_mhz"]["median"]
            ax.bar(x, mhz, width, color=colour, label=name if i == 0 else None)
            ax.text(x, mhz + 15, f"{mhz:,.0f} MHz\n{run['power_w']['median']:,.0f} W",
                    ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(runs)), [f"{n}³" for n, _ in runs])
    top = max(r[k]["sm_mhz"]["max"] for _, row in runs
              for r, k in ((row, "sustained"), (row["reference"], "sustained")))
    ax.set_ylim(0, top * 1.4)
    ax.set_ylabel("SM clock (MHz), median")
    ax.set_title(f"Each kernel run back to back for {_seconds(runs)} s ({rec.device['name']}; "
                 f"power limit {runs[0][1]['power_limit_w']:,.0f} W)", fontsize=10)
    ax.legend(loc="upper right", ncol=2, fontsize=8)
    return ax


def _seconds(runs) -> str:
    """The length of the runs, from their launches and rates, to one decimal."""
    n, row = runs[0]
    run = row["sustained"]
    return f"{run['launches'] * 2 * n ** 3 / (run['gflops'] * 1e9):.1f}"


def clock_summary(rec=None) -> Text:
    """What the two studies say together: per size, the kernel's share of cuBLAS run for
    seconds, both clocks and powers and what held the clock down; the same configuration's
    rates in the ladder's short timed calls, where the recording has them; then from the
    smallest to the largest size, the kernel's fall in clock beside its fall in rate,
    the energy each spends per FLOP at the largest size (power over rate), and the
    kernel's work per cycle under the profiler at both sizes."""
    rec = rec or recording()
    runs = _runs(rec) if rec else []
    if not runs:
        return Text("The run that samples the clock is not in this recording yet: "
                    "`python -m gemm_kernels study ch14_clocks` on a GPU records it.")
    step = studies.get(STUDY).steps[STEP]
    out = [f"On the {rec.device['name']} (power limit {runs[0][1]['power_limit_w']:,.0f} W), "
           f"the kernel ({step.label}) and cuBLAS FP16, each run for seconds:"]
    for n, row in runs:
        ours, theirs = row["sustained"], row["reference"]["sustained"]
        held = ", ".join(f"{k} {v:.0%} of the time" for k, v in ours["held_down"].items()
                         if k != "idle") or "nothing"
        out.append(f"* {n}³: the kernel at {ours['gflops'] / 1e3:,.0f} TFLOP/s, "
                   f"{ours['gflops'] / theirs['gflops']:.0%} of cuBLAS "
                   f"({theirs['gflops'] / 1e3:,.0f}); its clock {ours['sm_mhz']['median']:,.0f} "
                   f"MHz at {ours['power_w']['median']:,.0f} W, cuBLAS's "
                   f"{theirs['sm_mhz']['median']:,.0f} MHz at "
                   f"{theirs['power_w']['median']:,.0f} W. The kernel's clock was held "
                   f"down by: {held}.")
    short = [(n, ch13._row(step.kernel, n, step.params, rec=rec)) for n, _ in runs]
    if all(row for _, row in short):
        out.append(f"The same configuration in the ladder's short timed calls: "
                   + ", ".join(f"{n}³ {row['gflops']['median'] / 1e3:,.0f}" for n, row in short)
                   + " TFLOP/s.")
    (n0, a), (n1, b) = runs[0], runs[-1]
    fall = lambda x, y: f"{(y / x - 1):+.0%}"
    out.append(f"From {n0}³ to {n1}³ the kernel's clock changed by "
               f"{fall(a['sustained']['sm_mhz']['median'], b['sustained']['sm_mhz']['median'])}"
               f" and its rate by {fall(a['sustained']['gflops'], b['sustained']['gflops'])}.")
    pj = lambda run: run["power_w"]["median"] / (run["gflops"] * 1e9) * 1e12
    ours, theirs = pj(b["sustained"]), pj(b["reference"]["sustained"])
    out.append(f"Energy per FLOP at {n1}³: the kernel {ours:.2f} pJ, cuBLAS {theirs:.2f} pJ; "
               f"the kernel spends {ours / theirs:.1f} times as much on each FLOP, so at "
               f"one power it does {theirs / ours:.0%} of cuBLAS's work.")
    per = per_cycle(rec)
    if len(per) >= 2:
        (p0, x), (p1, y) = sorted(per.items())[0], sorted(per.items())[-1]
        out.append(f"Under the profiler, whose clock is locked, the kernel did {x:,.0f} FLOP "
                   f"per SM cycle at {p0}³ and {y:,.0f} at {p1}³ ({fall(x, y)}).")
    else:
        prof = studies.recording_of(PROFILE)
        out.append("The profile of section 7 is not in this GPU's recording"
                   + (f" (it is in {prof.label}): its work per cycle is not compared here."
                      if prof else "."))
    return Text("\n".join(out))


DRAM_READ, L2_HIT = "dram__bytes_read.sum", "lts__t_sector_hit_rate.pct"
BUSY = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"


def profile_by_size(rec=None):
    """The profile's swizzled steps at each size it was taken (4096³ and 8192³), the
    clock locked: time, work per SM cycle, the tensor pipe's busy share, the bytes read
    from DRAM (in all, and per 1,000 FLOP) and the L2 hit rate. It says whether the
    memory grows faster than the work as the GEMM grows, which the clock study's power
    cannot say."""
    from gemm_kernels.core.table import Table
    rec = rec or studies.recording_of(PROFILE)
    rows = []
    for shape in studies.get(PROFILE).shapes:
        n = shape[0]
        flops = 2 * n ** 3
        for step, row in studies.results(PROFILE, shape, rec)[1:]:      # the swizzled steps
            m = (row or {}).get("metrics", {})
            if not m.get(DRAM_READ):
                continue
            sms = rec.device.get("sm_count")
            rows.append({"step": step.label, "size": f"{n}³",
                         "time (ms)": m[TIME] / 1e6 if m.get(TIME) else None,
                         "FLOP per SM cycle": (round(flops / m[CYCLES] / sms)
                                               if m.get(CYCLES) and sms else None),
                         "tensor pipe busy %": m.get(BUSY),
                         "DRAM read (GB)": m[DRAM_READ] / 1e9,
                         "DRAM bytes per 1,000 FLOP": 1e3 * m[DRAM_READ] / flops,
                         "L2 hit rate %": m.get(L2_HIT)})
    title = (f"Nsight Compute, clock locked, by size ({rec.label})" if rows else
             "The profile's DRAM counters are not recorded")
    return Table(rows, ["step", "size", "time (ms)", "FLOP per SM cycle", "tensor pipe busy %",
                        "DRAM read (GB)", "DRAM bytes per 1,000 FLOP", "L2 hit rate %"],
                 title=title)


def clocks_by_config(rec=None, prof=None):
    """Both configurations of the clocks study side by side at every size: the rate, SM
    clock and board power of each run for seconds, beside the DRAM bytes the profile
    (clock locked; `prof`, by default the recording that holds it) read for the same
    configuration where it was profiled. At the power
    limit a configuration that moves more bytes through HBM has less power left for the
    SMs, so its clock is the place to look for what its misses cost."""
    from gemm_kernels.core.kernels import get
    from gemm_kernels.core.table import Table
    rec = rec or recording()
    prof = prof or studies.recording_of(PROFILE)
    profiled_at = {tuple(s) for s in studies.get(PROFILE).shapes}
    rows = []
    for shape in (studies.get(STUDY).shapes if rec else []):
        n = shape[0]
        profiled = {}
        for step, row in (studies.results(PROFILE, shape, prof)
                          if prof and tuple(shape) in profiled_at else []):
            m = (row or {}).get("metrics", {})
            if m.get(DRAM_READ):
                profiled[tuple(sorted(get(step.kernel).resolve(step.params).items()))] = m
        for step, row in studies.results(STUDY, shape, rec):
            if row is None:
                continue
            run = row["sustained"]
            m = profiled.get(tuple(sorted(get(step.kernel).resolve(step.params).items())))
            rows.append({"size": f"{n}³", "configuration": step.label,
                         "TFLOP/s (for seconds)": run["gflops"] / 1e3,
                         "SM clock (MHz)": run["sm_mhz"]["median"],
                         "power (W)": run["power_w"]["median"],
                         "DRAM read (GB, profiled)": m[DRAM_READ] / 1e9 if m else "not profiled"})
    title = (f"Each configuration run for seconds, and its DRAM bytes under the profiler "
             f"({rec.label})" if rows else "The clocks study is not in this recording")
    return Table(rows, ["size", "configuration", "TFLOP/s (for seconds)", "SM clock (MHz)",
                        "power (W)", "DRAM read (GB, profiled)"], title=title)
