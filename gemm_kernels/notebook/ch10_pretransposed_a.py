"""Chapter 10's last question: would chapter 07's GEMM gain from an A transposed
beforehand with this chapter's transpose, and would the gain pay for the transpose?

Three views of one answer: what the SASS of the two kernels' main loops differs in (no
GPU needed), and, from the table of `evidence.pretransposed_a` (the study
`ch10_pretransposed_a`), a picture of the saving per GEMM next to the transpose's time and
the conclusion in words. Every sentence is computed from the table, so a recording
without the study says that the measurement is missing instead of guessing. Two things
the instruction count leaves out are priced too: the shared stores' wavefronts (the bank
model, and float4's as Nsight Compute counted them) and the share of float4's time spent
in the waits of its tile copy, which nothing overlaps within a block.
"""
from __future__ import annotations

from gemm_kernels.core import analysis
from gemm_kernels.core.launch import kernel_of
from gemm_kernels.measure import studies, timing

WITH_A, WITH_AT = "float4", "float4_at"
SAVING, TRANSPOSE = "saving per GEMM (µs)", "transpose of A (µs)"
GEMM_A, GEMM_AT, NET = "GEMM, A as is (µs)", "GEMM, A^T given (µs)", "net, one GEMM (µs)"
STORES = ("STS", "STS.128")


def _loop(name: str) -> dict:
    k = kernel_of(name)
    return analysis.summary(k, k.resolve(None))["loop_histogram"]


def loop_difference() -> str:
    """What one trip of the main loop issues to store the tiles, and how many
    instructions the trip has in all, for both kernels (SASS compiled here)."""
    a, at = _loop(WITH_A), _loop(WITH_AT)

    def stores(h):
        return ", ".join(f"{h.get(f, 0)} {f}" for f in STORES)

    total_a, total_at = sum(a.values()), sum(at.values())
    return (f"one trip of the main loop (one BK-deep tile of A and of B): "
            f"{WITH_A} stores with {stores(a)}, {WITH_AT} with {stores(at)}; "
            f"the trip has {total_a:,} instructions in {WITH_A} and {total_at:,} in "
            f"{WITH_AT}: {total_a - total_at:,} fewer, "
            f"{100 * (total_a - total_at) / total_a:.1f}% of the trip")


def table(shapes=None):
    """`evidence.pretransposed_a` (the study's table: both GEMMs, the saving, the
    transpose, the net) cut to what a reader can compare: only the shapes whose three
    times come from one run (their note says whether the timed calls overlap), with the
    recording's source in the title in place of the runs. `not_compared` names the shapes left out."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import records
    from gemm_kernels.notebook import evidence
    tab = evidence.pretransposed_a(shapes)
    head = tab.title.partition(" — ")[0]
    rows = _complete(tab)
    cols = [c for c in tab.columns if any(c in r for r in rows)] if rows else ["shape"]
    out = Table(rows, cols, title=f"{head}, {records.source()}")
    out.left_out = [r["shape"] for r in tab if r.get(NET) is None]
    return out


def not_compared(tab) -> str:
    """One sentence naming the shapes `table` left out, in a reader's words: their GEMMs
    and transpose were not timed in one run (or not at all), and times of different runs
    are not compared. Empty when nothing was left out."""
    left = getattr(tab, "left_out", [])
    if not left:
        return ""
    return (f"Left out: {' and '.join(left)}. The three times of "
            f"{'each of these shapes' if len(left) > 1 else 'this shape'} were not recorded "
            "in one run, and times from different runs are not compared here (a GPU's "
            "clock and temperature differ from one run to the next), so the recording "
            "does not answer the question at "
            f"{'these shapes' if len(left) > 1 else 'this shape'}.")


def _complete(tab) -> list[dict]:
    return [r for r in tab if r.get(NET) is not None]


def plot(tab, ax=None):
    """Per shape with all three times from one run: the time one GEMM saves with A^T
    given, next to the time of the transpose that makes A^T, in microseconds. Returns
    the Axes, or None (and draws nothing) when no shape is complete."""
    rows = _complete(tab)
    if not rows:
        return None
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.9 * len(rows) + 1.6))
    h = 0.38
    ys = range(len(rows))
    ax.barh([y - h / 2 for y in ys], [r[SAVING] for r in rows], height=h,
            color="tab:green", label="time one GEMM saves with A^T given")
    ax.barh([y + h / 2 for y in ys], [r[TRANSPOSE] for r in rows], height=h,
            color="tab:red", label="time of the transpose that makes A^T")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(list(ys), [r["shape"] for r in rows])
    ax.invert_yaxis()
    ax.set_ylabel("M x N x K")
    ax.set_xlabel("microseconds (median of the timed calls)")
    from gemm_kernels.measure import records
    ax.set_title("What one GEMM saves with A^T given, next to what the transpose costs\n"
                 f"({records.source()})", fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.figure.tight_layout()
    return ax


def _calls(shape_text: str) -> dict | None:
    """{kernel: {'median', 'min', 'max'} in µs} of the two GEMMs of the study's shape
    written as `shape_text` ("2048 x 2048 x 2048"); None when either is not recorded."""
    for shape in studies.get(studies.PRETRANSPOSED_A).shapes:
        if " x ".join(map(str, shape)) == shape_text:
            got = {s.kernel: r for s, r in studies.results(studies.PRETRANSPOSED_A, shape)}
            if got.get(WITH_A) is None or got.get(WITH_AT) is None:
                return None
            return {k: {q: 1e3 * v for q, v in timing.times_ms(got[k]).items()}
                    for k in (WITH_A, WITH_AT)}
    return None


def resolved(calls: dict) -> str | None:
    """Which GEMM is faster by more than the noise of its timed calls, or None. The
    min..max ranges of 20 calls overlap as soon as one call of each is slow (the first
    call, a clock change), so the test is the median: if half of one kernel's calls or
    more beat the fastest call of the other, the difference is real."""
    a, at = calls[WITH_A], calls[WITH_AT]
    if at["median"] < a["min"]:
        return WITH_AT
    if a["median"] < at["min"]:
        return WITH_A
    return None


def conclusion(tab) -> str:
    """The answer in words, one line per shape, from the numbers of the table and the
    spread of the timed calls (`resolved`); one line saying what is missing when the
    recording has no complete shape."""
    rows = _complete(tab)
    if not rows:
        return ("The measurement is missing from this recording: no shape has both "
                "GEMMs and the transpose timed in one run.")
    out = []
    for r in rows:
        calls = _calls(r["shape"])
        faster = resolved(calls) if calls else None
        head = f"{r['shape']}: {r[GEMM_A]:,.0f} µs with A, {r[GEMM_AT]:,.0f} µs with A^T given"
        if calls:
            a, at = calls[WITH_A], calls[WITH_AT]
            head += (f" (fastest call {a['min']:,.0f} and {at['min']:,.0f} µs; "
                     + ("half the calls with A^T or more beat every call with A)" if faster == WITH_AT
                        else "half the calls with A or more beat every call with A^T)" if faster == WITH_A
                        else "the calls overlap beyond their medians)"))
        if calls and faster is None:
            out.append(f"{head}; no difference these calls can resolve, so the transpose "
                       f"({r[TRANSPOSE]:,.1f} µs) is not shown to pay.")
        elif r[SAVING] <= 0:
            out.append(f"{head}; A^T does not make the GEMM faster, so the transpose "
                       f"({r[TRANSPOSE]:,.0f} µs) never pays.")
        elif r[NET] >= 0:
            out.append(f"{head}; the saving, {r[SAVING]:,.1f} µs, covers the transpose "
                       f"({r[TRANSPOSE]:,.1f} µs) within one GEMM.")
        else:
            out.append(f"{head}; the saving, {r[SAVING]:,.1f} µs per GEMM, is smaller than "
                       f"the transpose ({r[TRANSPOSE]:,.1f} µs): it pays only when "
                       f"{r['GEMMs to repay']:,} GEMMs or more reuse the same A^T.")
    return "\n".join(out)


def store_lines(limit: int = 400) -> str:
    """The shared stores (STS*) of each kernel's main loop, as the SASS compiled here
    writes them: where the four 32-bit stores of a float4 of A become one STS.128."""
    from gemm_kernels.notebook import display
    out = []
    for name in (WITH_A, WITH_AT):
        lines = [l.strip() for l in str(display.sass_loop(name, limit=limit)).splitlines()
                 if " STS" in l]
        out.append(f"{name}:\n  " + "\n  ".join(lines))
    return "\n".join(out)


# ---- what else differs: the stores' wavefronts, and the copy phase's share of the time

COUNTED = "ch07_ablation_counters"      # float4 profiled at 4096^3 with shared-memory counters
STALLED = "stalls"                      # and with every stall reason


def _warp_tiles(params: dict, shape) -> int:
    """Warp-instructions of one kind per launch over the warps x tiles of the launch:
    blocks x warps per block x tiles along K."""
    M, N, K = shape
    blocks = -(-M // params["BM"]) * -(-N // params["BN"])
    warps = (params["BM"] // params["TM"]) * (params["BN"] // params["TN"]) // 32
    return blocks * warps * -(-K // params["BK"])


def store_wavefronts():
    """The shared stores of one tile copy, per warp, for both kernels: the bank model on
    warp 0's addresses (float4: four 4-byte stores of A down columns of As, then B's
    STS.128; float4_at: one STS.128 each), and for float4 the wavefronts Nsight Compute
    counted per warp and tile at 4096^3 (stores and, for scale, the loads of the
    products)."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.memory import banks
    from gemm_kernels.memory.ch07_09_patterns import a_store, a_store_at
    b_row = [16 * lane for lane in range(32)]      # 32 consecutive float4 of one row of Bs
    b = banks.analyse(b_row, 16).wavefronts
    a4 = [banks.analyse(a_store(s=s)) for s in range(4)]
    at = banks.analyse(a_store_at(), 16)
    counted = {s.kernel: r for s, r in studies.results(COUNTED)}.get(WITH_A)
    rows = []
    for name, a_instr, a_wf, a_ideal in (
            (WITH_A, "4 STS (4 bytes)", sum(a.wavefronts for a in a4), sum(a.ideal for a in a4)),
            (WITH_AT, "1 STS.128", at.wavefronts, at.ideal)):
        row = {"kernel": name, "stores of A per float4": a_instr,
               "A: wavefronts (ideal)": f"{a_wf} ({a_ideal})", "B: wavefronts": b,
               "all stores, model": a_wf + b}
        if name == WITH_A and counted is not None:
            n = _warp_tiles(counted["params"], counted["shape"])
            m = counted["metrics"]
            row["all stores, Nsight Compute"] = (
                m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"] / n)
            row["loads of the products, Nsight Compute"] = (
                m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] / n)
        rows.append(row)
    cols = list(dict.fromkeys(k for r in rows for k in r))
    return Table(rows, cols, title="shared-memory wavefronts of one warp per tile (BK = 8): "
                 "bank model on warp 0, and float4 as profiled at 4096 x 4096 x 4096")


def copy_phase() -> dict | None:
    """float4 at 4096^3 (the profiled `stalls` study): the share of its warps' stall
    cycles spent waiting for global loads (long scoreboard) and at the barrier, the two
    waits of a tile copy that nothing overlaps; None when not recorded."""
    from gemm_kernels.notebook.evidence import stall_reasons
    row = next((r for s, r in studies.results(STALLED)
                if s.kernel == WITH_A and not s.params.get("ONE_PER_SM")), None)
    if row is None:
        return None
    st = stall_reasons(row)
    total = sum(st.values())
    return {"shape": tuple(row["shape"]), "long scoreboard": st.get("long scoreboard", 0) / total,
            "barrier": st.get("barrier", 0) / total,
            "short scoreboard": st.get("short scoreboard", 0) / total}


def copy_phase_text() -> str:
    """Where float4's warps wait at 4096^3 (the copy phase's waits as shares of their
    cycles), and the blocks per SM of both kernels (the occupancy calculator, with the
    registers of the binaries that were timed where the recording has them)."""
    from gemm_kernels.core.analysis import kernel_occupancy
    from gemm_kernels.measure import lookup
    c = copy_phase()
    blocks = {}
    for name in (WITH_A, WITH_AT):
        regs = (lookup.binary(name) or {}).get("registers")
        blocks[name] = (regs, kernel_occupancy(name, registers=regs).blocks_per_sm)
    occ = "; ".join(f"{n}: {r if r is not None else '?'} registers, {b} blocks of 256 "
                    "threads per SM" for n, (r, b) in blocks.items())
    if c is None:
        return f"float4's stall reasons are not in this recording. {occ}"
    shape = " x ".join(map(str, c["shape"]))
    return (f"float4 at {shape}: {100 * c['long scoreboard']:.1f}% of its warps' cycles "
            f"waiting for global loads, {100 * c['barrier']:.1f}% at barriers "
            f"({100 * c['short scoreboard']:.1f}% waiting on shared-memory loads)\n{occ}")
