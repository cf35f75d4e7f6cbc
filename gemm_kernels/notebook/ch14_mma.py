"""Chapter 14: below WMMA. The mma.sync kernel of cuda/14_mma.cu explained with pictures
and numbers the package computes: which lane holds which element of an m16n8k16 tile
(the PTX ISA's documented layout), where ldmatrix takes its rows from and where their
values land, the bank model of those loads on plain and on XOR-swizzled shared rows,
the cp.async ring, the main loop's instructions, registers and occupancy, and the
recorded measurements (the ladder beside cuBLAS FP16, Nsight Compute's counters, the
sweep behind the explorer).

Chapter 14's rows may sit in another recording than the one the other chapters show:
`recording()` finds the one that holds them (chapter 13's when this chapter's are not
recorded yet), and every number here is read from it, so that a plot never mixes GPUs.
Every function that reads the recording says in words what is missing instead of failing.
"""
from __future__ import annotations

import re
from collections import Counter

from gemm_kernels.core import analysis, compiler
from gemm_kernels.core.kernels import get
from gemm_kernels.core.table import Table, fmt_number
from gemm_kernels.measure import records, studies, timing
from gemm_kernels.notebook import ch13_wmma as ch13
from gemm_kernels.notebook import evidence
from gemm_kernels.notebook.mma_layout import fragment_map, lane_grid
from gemm_kernels.notebook.display import Text

KERNEL = "mma_sync"
BIG_K = {"BK": 64, "STAGES": 3}      # the deeper stage the ladder also shows
SIZES = ch13.SIZES
STUDY = "ch14_mma"
PROFILED = (4096, 4096, 4096)   # the study's size whose counts the loop table reads
ISSUED = "smsp__inst_executed.sum"
LADDER = (("cublas_hgemm", "cuBLAS FP16 (tensor cores)", "k", "-"),
          (KERNEL, "14 mma_sync, BK 64, 3 stages", "tab:red", "-", BIG_K),
          (KERNEL, "14 mma_sync (default)", "tab:purple", "-", {}),
          (ch13.TILED, "13 wmma_tiled", "tab:blue", "-"),
          (ch13.NAIVE, "13 wmma_naive", "tab:cyan", "-"),
          ("cublas", "cuBLAS FP32", "0.4", "--"),
          ("capstone", "09 capstone (FP32)", "tab:orange", "--"))


def recording():
    """The recording that holds this chapter's rows, else chapter 13's (its WMMA rows
    and cuBLAS FP16 still draw the ladder)."""
    return records.holding(KERNEL) or ch13.recording()


def which_recording() -> Text:
    rec = recording()
    if rec is None:
        return Text("This chapter's measurements are not in any recording here.")
    if not rec.find(KERNEL):
        return Text(f"The mma.sync kernel's measurements are not recorded yet; chapter "
                    f"13's rows shown beside it: {rec.label}.")
    cur = records.current()
    if cur is not None and cur is not rec and not cur.find(KERNEL):
        return Text(f"This chapter's measurements: {rec.label}. The banner's recording "
                    f"({cur.label.removeprefix('recorded on ')}) holds no rows of this "
                    f"chapter's kernel, so every number below, chapter 13's and cuBLAS's "
                    f"included, comes from this one GPU.")
    return Text(f"This chapter's measurements: {rec.label}."
                + evidence.profile_elsewhere(rec, study_recording(), "section 7"))


def _label(rec) -> str:
    return rec.label if rec is not None else "no recording"


def _row(kernel: str, n: int, params: dict | None = None, rec=None) -> dict | None:
    return ch13._row(kernel, n, params, rec=rec or recording())


# ------------------------------------------------------------------ 2. m16n8k16

def plot_fragments(axes=None):
    """Who holds what in one mma.m16n8k16: each element of A, B and C labelled with its
    lane and its element index, coloured by lane / 4 (shade: lane % 4)."""
    import matplotlib.pyplot as plt
    if axes is None:
        fig, axes = plt.subplots(1, 3, figsize=(15, 6.2),
                                 gridspec_kw={"width_ratios": [16, 8, 8]})
    m = fragment_map()
    lane_grid(axes[0], m["A"], 16, 16, "A", "a", "A, 16 x 16 (rows m, columns k): "
              "a0-a7 per lane")
    lane_grid(axes[1], m["B"], 16, 8, "B", "b", "B, 16 x 8 (rows k, columns n): "
              "b0-b3 per lane")
    lane_grid(axes[2], m["C"], 16, 8, "C", "c", "C, 16 x 8 (rows m, columns n): "
              "c0-c3 per lane")
    axes[0].figure.suptitle("mma.m16n8k16: each cell is 'lane' over 'element'; colour: "
                            "lane / 4 (shade: lane % 4)", fontsize=10)
    axes[0].figure.tight_layout()
    return axes


# ------------------------------------------------------------------ 3. ldmatrix

def ldmatrix_rows(lane: int) -> tuple[int, int]:
    """(matrix, row) whose 16-byte row address lane `lane` gives to ldmatrix.x4."""
    return lane // 8, lane % 8


def ldmatrix_received(trans: bool = False) -> dict[tuple[int, int, int], tuple[int, int]]:
    """What ldmatrix.x4 leaves where: (matrix, row, column) of each 8 x 8 matrix as
    read from memory -> (lane, half) that receives it, register `matrix` of the lane.
    Plain: lane l gets row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1. `.trans`: the
    matrix transposed: lane l gets rows 2 (l % 4) and 2 (l % 4) + 1 of column l / 4."""
    out = {}
    for m in range(4):
        for lane in range(32):
            for h in range(2):
                r, c = lane // 4, 2 * (lane % 4) + h
                out[(m, c, r) if trans else (m, r, c)] = (lane, h)
    return out


def a_from_ldmatrix() -> dict[tuple[int, int], tuple[int, int]]:
    """A 16 x 16 tile read by ldmatrix.x4 with matrices 0-3 at its top-left,
    bottom-left, top-right and bottom-right 8 x 8 (the kernel's order): (row, column)
    -> (lane, element) with element = 2 * register + half, as in `fragment_map()`."""
    return {(8 * (m % 2) + r, 8 * (m // 2) + c): (lane, 2 * m + h)
            for (m, r, c), (lane, h) in ldmatrix_received().items()}


def plot_ldmatrix(axes=None):
    """Left: the 16 x 16 tile of A in shared memory, each 16-byte row (8 halves) marked
    with the lane that gives its address. Right: where ldmatrix.x4 puts the values,
    each element labelled with the lane and register that receive it."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(13, 6.3))
    colors = plt.get_cmap("tab10")
    ax = axes[0]
    for lane in range(32):
        m, r = ldmatrix_rows(lane)
        row, col = 8 * (m % 2) + r, 8 * (m // 2)
        ax.add_patch(Rectangle((col, 15 - row), 8, 1, facecolor=colors(m), alpha=0.5,
                               edgecolor="white"))
        ax.text(col + 4, 15.5 - row, f"lane {lane}: matrix {m}, row {r}", ha="center",
                va="center", fontsize=7)
    ax.set_title("where the lanes point: lanes 8i to 8i+7 give the\n8 row addresses "
                 "(16 bytes each) of matrix i", fontsize=9)
    ax2 = axes[1]
    for (row, col), (lane, e) in a_from_ldmatrix().items():
        m = e // 2
        ax2.add_patch(Rectangle((col, 15 - row), 1, 1, facecolor=colors(m),
                                alpha=0.3 + 0.7 * (lane % 4) / 3, edgecolor="white", lw=0.6))
        ax2.text(col + 0.5, 15.5 - row, f"{lane}\nr{m}", ha="center", va="center", fontsize=5.5)
    ax2.set_title("where the values land: lane l receives row l / 4, columns 2(l % 4)\n"
                  "and 2(l % 4) + 1 of matrix i in its register r_i: A's fragment for "
                  "mma", fontsize=9)
    for a in axes:
        a.set_xlim(0, 16)
        a.set_ylim(0, 16)
        a.set_aspect("equal")
        a.set_xticks([0, 8, 16], ["k 0", "k 8", "k 16"], fontsize=7)
        a.set_yticks([16, 8, 0], ["m 0", "m 8", "m 16"], fontsize=7)
        a.tick_params(length=0)
    plt.tight_layout()
    return axes


# ------------------------------------------------------------------ 4. banks and swizzle

def chunk_at(r: int, c: int, chunks: int, swizzle: bool = True) -> int:
    """The 16-byte chunk where chunk `c` of row `r` is stored, in a tile whose rows are
    `chunks` chunks long: the model of `chunk_at<CHUNKS, SWIZZLE>` in cuda/14_mma.cu (the
    pictures and the bank model below run it; the tests hold it to the kernel's text)."""
    if not swizzle:
        return c
    return c ^ ((r >> 1) & 3) if chunks == 4 else c ^ (r & 7)


def placer(expression: str | None = None):
    """place(r, c, chunks, swizzle): the chapter's `chunk_at`, or, given `expression` (a
    student's line `chunk = <expression>;` in r, c and CHUNKS), that expression swizzled."""
    if expression is None:
        return chunk_at
    from gemm_kernels.exercises.cexpr import compile_expression
    f = compile_expression(expression, ("r", "c", "CHUNKS"), conditionals=True)
    return lambda r, c, chunks, swizzle=True: f(r=r, c=c, CHUNKS=chunks) if swizzle else c


def ldmatrix_addresses(row_bytes: int, swizzle: bool, row0: int = 0,
                       chunk0: int = 0, expression: str | None = None) -> list[int]:
    """Byte addresses the 32 lanes give one of the kernel's ldmatrix.x4 in a shared
    tile with rows of `row_bytes`: lane l reads row row0 + l % 16, chunk chunk0 + l / 16
    (for A: rows of the warp's region, chunk kk / 8; for B, rows kk..kk+15 of the tile,
    which is N-major: row-major K x N, each row one k, contiguous along n; the chunk of
    the warp's columns), where `chunk_at` stores it."""
    chunks, place = row_bytes // 16, placer(expression)
    return [(row0 + lane % 16) * row_bytes
            + 16 * place(row0 + lane % 16, chunk0 + lane // 16, chunks, swizzle)
            for lane in range(32)]


def ldmatrix_analysis(row_bytes: int, swizzle: bool, row0: int = 0, chunk0: int = 0,
                      expression: str | None = None):
    """Chapter 04's bank model at 16 bytes per lane (four phases of 8 lanes) for one
    ldmatrix.x4 of the kernel (with `expression`: a student's swizzle instead)."""
    from gemm_kernels.memory import banks
    return banks.analyse(ldmatrix_addresses(row_bytes, swizzle, row0, chunk0, expression),
                         width=16)


def _loads_per_step(p: dict) -> tuple[int, int, int]:
    """(A loads, B loads, mma) of one warp per 16-step of K: ldmatrix.x4 of a 16 x 16 A
    fragment per 16 rows, .x4.trans of 16 k x 16 n of B per 16 columns, one mma per
    16 x 8 tile of the warp's region."""
    wm, wn = p["BM"] // p["WARPS_M"], p["BN"] // p["WARPS_N"]
    return wm // 16, wn // 16, (wm // 16) * (wn // 8)


def study_recording():
    """The recording that holds this chapter's Nsight Compute study (it may be another
    GPU's than the rates': the tables name it), or None."""
    return studies.recording_of(STUDY)


def _study_rows(rec=None) -> list[tuple[str, dict | None]]:
    rec = rec or study_recording()
    return [(step.label, row["metrics"] if row else None)
            for step, row in studies.results(STUDY, rec=rec)]


WAVES = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
LDSM = "smsp__inst_executed_op_ldsm.sum"
BUSY = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
WARPS = "sm__warps_active.avg.pct_of_peak_sustained_active"
TIME = "gpu__time_duration.sum"
PIPE_CYCLES = "sm__pipe_tensor_op_hmma_cycles_active.sum"
HMMA = "sm__inst_executed_pipe_tensor_op_hmma.sum"
HMMA_FLOP = ch13.HMMA_FLOP


def bank_table(rec=None) -> Table:
    """Predicted wavefronts per ldmatrix of the default tile, plain and swizzled (A: rows
    of BK halves, B: rows of BN halves), their mean over one 16-step of a warp, and what
    Nsight Compute measured at 4096³: shared-load wavefronts and bank conflicts, and
    wavefronts per LDSM instruction."""
    p = get(KERNEL).resolve({})
    fa, fb, _ = _loads_per_step(p)
    measured = dict(_study_rows(rec))
    rows = []
    steps = studies.get(STUDY).steps
    for swz, label in ((False, steps[0].label), (True, steps[1].label)):
        a = ldmatrix_analysis(2 * p["BK"], swz).wavefronts
        b = ldmatrix_analysis(2 * p["BN"], swz).wavefronts
        m = measured.get(label)
        rows.append({"layout": label, "per A load": a, "per B load": b,
                     "predicted per ldmatrix": (fa * a + fb * b) / (fa + fb),
                     "measured per LDSM": m[WAVES] / m[LDSM] if m and m.get(LDSM) else None,
                     "wavefronts (M)": m[WAVES] / 1e6 if m else None,
                     "of them conflicts (M)": m[CONFLICTS] / 1e6 if m else None})
    got = (f"Nsight Compute at 4096³ ({_label(rec or study_recording())})"
           if any(measured.values()) else "Nsight Compute's counters are not recorded here")
    return Table(rows, ["layout", "per A load", "per B load", "predicted per ldmatrix",
                        "measured per LDSM", "wavefronts (M)", "of them conflicts (M)"],
                 title=f"Wavefronts per load at the {p['BM']}x{p['BN']} tile, BK={p['BK']} "
                       f"(A rows {2 * p['BK']} bytes, B rows {2 * p['BN']}; the least: 4); "
                       f"measured: {got}")


def plot_bank_model(axes=None, swizzled: bool = True, expression: str | None = None):
    """The bank model's picture of one A load (64-byte rows), plain and swizzled; plain
    only with `swizzled=False` (before the exercise, which asks for the swizzle); with
    `expression`, swizzled by a student's `chunk = <expression>;`."""
    import matplotlib.pyplot as plt
    from gemm_kernels.memory import banks
    layouts = (False, True) if swizzled else (False,)
    if axes is None:
        _, axes = plt.subplots(1, len(layouts), figsize=(6 * len(layouts), 4.2),
                               squeeze=False)
        axes = axes[0]
    row_bytes = 2 * get(KERNEL).resolve({})["BK"]
    for a, swz in zip(axes, layouts):
        an = ldmatrix_analysis(row_bytes, swz, expression=expression)
        banks.plot_banks(an, ax=a, title=f"A rows of {row_bytes} bytes, "
                                         f"{_layout_name(swz, expression)}: "
                                         f"{an.wavefronts} wavefronts")
        a.set_xlabel("bank (each bar: one lane's 16 bytes, 4 banks;\n"
                     "black outline: a bank asked for more than one row in one phase, a conflict)")
    plt.tight_layout()
    return axes


def _layout_name(swizzled: bool, expression: str | None) -> str:
    return ("your swizzle" if expression else "swizzled") if swizzled else "plain"


def plot_swizzle(axes=None, swizzled: bool = True, expression: str | None = None):
    """The 16-byte chunks of 8 rows of each tile as stored, plain and swizzled: each
    cell is one stored chunk, labelled with the chunk of the row it holds and coloured by
    its group of 4 banks (its place in a 128-byte line). The outlined cells hold chunk 0
    of each row: the 8 rows one phase of an ldmatrix reads. Plain, they share few bank
    groups (a conflict); swizzled, all 8 groups. `swizzled=False`: the plain rows only
    (before the exercise, whose answer the swizzled rows would show). With `expression`
    (a student's `chunk = <expression>;`), the rows as that swizzle stores them."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    place = placer(expression)
    p = get(KERNEL).resolve({})
    tiles = ((f"A (rows of {2 * p['BK']} bytes)", 2 * p["BK"]),
             (f"B (rows of {2 * p['BN']} bytes)", 2 * p["BN"]))
    layouts = (True,) if expression else (False, True) if swizzled else (False,)
    if axes is None:
        _, axes = plt.subplots(len(layouts), 2, figsize=(15, 3.5 * len(layouts) + 0.4),
                               gridspec_kw={"width_ratios": [6, 16]}, squeeze=False)
    colors = plt.get_cmap("Set2")
    for j, (name, row_bytes) in enumerate(tiles):
        chunks = row_bytes // 16
        for i, swz in enumerate(layouts):
            ax = axes[i][j]
            for r in range(8):
                for c in range(chunks):
                    at = place(r, c, chunks, swz)
                    group = (r * row_bytes // 16 + at) % 8
                    ax.add_patch(Rectangle((at, 7 - r), 1, 1, facecolor=colors(group),
                                           edgecolor="k" if c == 0 else "white",
                                           lw=2.2 if c == 0 else 0.6))
                    ax.text(at + 0.5, 7.5 - r, str(c), ha="center", va="center", fontsize=8,
                            fontweight="bold" if c == 0 else "normal")
            groups = {(r * row_bytes // 16 + place(r, 0, chunks, swz)) % 8 for r in range(8)}
            ax.set_xlim(0, chunks)
            ax.set_ylim(0, 8)
            ax.set_xticks([c + 0.5 for c in range(chunks)], [str(c) for c in range(chunks)],
                          fontsize=7)
            ax.set_yticks([7.5 - r for r in range(8)], [f"row {r}" for r in range(8)],
                          fontsize=7)
            ax.tick_params(length=0)
            ax.set_xlabel("place in the row (16-byte chunks)", fontsize=7)
            ax.set_title(f"{name}, {_layout_name(swz, expression)}:\nchunk 0 of rows 0-7 "
                         f"in {len(groups)} bank group{'s' if len(groups) > 1 else ''}",
                         fontsize=9)
    axes[0][0].figure.suptitle("Each cell: the chunk of its row stored there; colour: its "
                               "group of 4 banks (of 8)", fontsize=10)
    plt.tight_layout()
    return axes


def your_swizzle(name: str = "14_swizzle") -> Text:
    """The student's own swizzle, once it passes: the eight rows of both tiles as it
    stores them (the picture of section 3) and the bank model's wavefronts for one A and
    one B load, read from the last `%%exercise` submission of this session."""
    from gemm_kernels.exercises import ch14_checks
    from gemm_kernels.exercises.magic import submitted, verdict
    try:
        report, source = verdict(name), submitted(name)
    except AssertionError as e:
        return Text(str(e))
    expression, _ = ch14_checks.chunk_expression(source)
    if not (report.passed and expression):
        return Text("Your chunk_at does not pass yet: once the grade above passes, this "
                    "cell draws your swizzle and prices its loads.")
    p = get(KERNEL).resolve({})
    a = ldmatrix_analysis(2 * p["BK"], True, expression=expression).wavefronts
    b = ldmatrix_analysis(2 * p["BN"], True, expression=expression).wavefronts
    plot_swizzle(expression=expression)
    return Text(f"Your line: chunk = {expression};\nThe bank model: {a} wavefronts per A load "
                f"and {b} per B load (4 is the least), against "
                f"{ldmatrix_analysis(2 * p['BK'], False).wavefronts} and "
                f"{ldmatrix_analysis(2 * p['BN'], False).wavefronts} on plain rows: the "
                f"numbers of section 3's table, now from your function.")


# ------------------------------------------------------------------ 6. the ring, the loop

def kernel_wait() -> str:
    """The count the kernel's K loop gives cp.async.wait_group (`copy_wait<...>`), as
    written in cuda/14_mma_kernel.cuh."""
    text = get(KERNEL).source_with_headers()
    loop = text[text.index("for (int t = 0; t < tiles; ++t)"):]
    return re.search(r"copy_wait<([^<>;]*)>\(\)", loop).group(1)


def plot_ring(stages: int | None = None, tiles: int = 8):
    """Chapter 09's picture of the cp.async ring, with this kernel's stages and wait."""
    from gemm_kernels.exercises.cexpr import evaluate
    from gemm_kernels.notebook.capstone_pictures import stage_ring
    stages = stages or get(KERNEL).resolve({})["STAGES"]
    return stage_ring(stages, tiles, wait=evaluate(kernel_wait(), {"STAGES": stages}))


def loop_table(configs=({}, BIG_K)) -> Table:
    """The main loop's SASS (the loop with the HMMA), per configuration: tensor-core
    mma, ldmatrix, cp.async copies, the waits and the barrier, and the rest; and what a
    thread's share of one tile is (16-byte chunks it copies)."""
    rec = study_recording()
    profiled = {repr(sorted(get(KERNEL).resolve(step.params).items())): row["metrics"]
                for step, row in (studies.results(STUDY, PROFILED, rec=rec) if rec else [])
                if row}
    rows = []
    for params in configs:
        p = get(KERNEL).resolve(params)
        sass = compiler.sass(get(KERNEL), p)
        h = Counter(f for _, f, _ in analysis.main_loop(sass, work=("HMMA",)))
        fam = lambda prefix: sum(v for f, v in h.items() if f.split(".")[0] == prefix)
        shown = {"HMMA": fam("HMMA"), "LDSM": fam("LDSM"), "LDGSTS": fam("LDGSTS"),
                 "waits and barrier": fam("LDGDEPBAR") + fam("DEPBAR") + fam("BAR")}
        threads = 32 * p["WARPS_M"] * p["WARPS_N"]
        rows.append({"configuration": _config(p), **shown,
                     "the rest": sum(h.values()) - sum(shown.values()),
                     "chunks a thread copies per tile": (p["BM"] * p["BK"] + p["BK"] * p["BN"])
                     // 8 // threads})
        # What a warp issues per pass, from the profile: all its instructions over its
        # HMMA, times the HMMA of one pass. The loop body holds both copy paths; this
        # says how much of it an average warp runs.
        m = profiled.get(repr(sorted(p.items())))
        rows[-1]["issued per pass (profile)"] = round(
            m[ISSUED] / m[HMMA] * shown["HMMA"]) if m else "not profiled"
    cube = "x".join(map(str, PROFILED[:1])) + "³"
    return Table(rows, ["configuration", "HMMA", "LDSM", "LDGSTS", "waits and barrier",
                        "the rest", "issued per pass (profile)",
                        "chunks a thread copies per tile"],
                 title=f"One pass of the K loop in SASS ({compiler.static_arch(get(KERNEL))}); "
                       f"issued per pass: from the profile at {cube} "
                       f"({rec.label if rec else 'no recording'})")


def _config(p: dict) -> str:
    d = get(KERNEL).resolve({})
    diff = {k: v for k, v in p.items() if d[k] != v}
    return "default" if not diff else ", ".join(f"{k} {v}" for k, v in diff.items())


# ------------------------------------------------------------------ 7. warp tiles

def warp_regions(regions=((64, 64), (64, 32), (32, 32))) -> Table:
    """Per warp region (rows x columns of C per warp): the mma per 16-step, the bytes
    of fragments ldmatrix brings per mma, and the FP32 accumulators each thread keeps."""
    rows = []
    for wm, wn in regions:
        fa, fb, mma = _loads_per_step({"BM": wm, "BN": wn, "WARPS_M": 1, "WARPS_N": 1})
        rows.append({"warp region": f"{wm} x {wn}", "mma per 16-step": mma,
                     "ldmatrix per 16-step": fa + fb,
                     "shared bytes per mma": 512 * (fa + fb) / mma,
                     "accumulators per thread": wm * wn // 32})
    return Table(rows, ["warp region", "mma per 16-step", "ldmatrix per 16-step",
                        "shared bytes per mma", "accumulators per thread"],
                 title="A warp's region of C: larger regions feed more mma per byte loaded, "
                       "and keep more accumulators in registers")


def occupancy_table(configs=({}, BIG_K)) -> Table:
    """Registers per thread (ptxas here), shared memory per block, and the blocks and
    warps an SM holds, with what limits them, per configuration."""
    rows = []
    for params in configs:
        o = analysis.kernel_occupancy(KERNEL, params)
        rows.append({"configuration": _config(get(KERNEL).resolve(params)),
                     "threads": o.threads_per_block, "registers": o.registers_per_thread,
                     "shared KiB per block": o.smem_per_block / 1024,
                     "blocks per SM": o.blocks_per_sm,
                     "warps per SM": f"{o.warps_per_sm} of {o.max_warps_per_sm}",
                     "limited by": o.limiter})
    return Table(rows, ["configuration", "threads", "registers", "shared KiB per block",
                        "blocks per SM", "warps per SM", "limited by"],
                 title=f"Occupancy on {compiler.static_arch(get(KERNEL))} "
                       f"(ptxas {compiler.ptxas_version()})")


# ------------------------------------------------------------------ 8. measured

ERROR_COLUMN = "largest |error| / bound"


def rates_table(rec=None) -> Table:
    """The two configurations of the ladder at each size, each beside cuBLAS FP16
    timed in the same run, with the checker's verdict on the timed run's own output
    (its largest error over the bound: below 1 is right)."""
    rec = rec or recording()
    rows = []
    for n in SIZES:
        for params in ({}, BIG_K):
            r = _row(KERNEL, n, params, rec=rec)
            if r:
                rows.append({"size": f"{n}³", "configuration": _config(get(KERNEL).resolve(params)),
                             "TFLOP/s": r["gflops"]["median"] / 1000,
                             "cuBLAS FP16 TFLOP/s": r["reference"]["gflops"]["median"] / 1000,
                             "% of cuBLAS FP16": timing.share(r),
                             ERROR_COLUMN: r.get("error_over_bound", "-")})
    title = (f"mma_sync, each row's cuBLAS FP16 timed beside it ({_label(rec)})" if rows else
             "The mma.sync kernel's timings are not recorded yet")
    return Table(rows, ["size", "configuration", "TFLOP/s", "cuBLAS FP16 TFLOP/s",
                        "% of cuBLAS FP16", ERROR_COLUMN], title=title)


def plot_ladder(rec=None, ax=None):
    """Chapter 13's ladder with this chapter's two configurations added."""
    return ch13.plot_ladder(rec=rec or recording(), ax=ax, series=LADDER)


def ladder_summary(n: int = 4096, rec=None) -> Text:
    """This chapter's kernel at n³ against chapter 13's and cuBLAS FP16, in words."""
    rec = rec or recording()
    mine, big, wmma = (_row(KERNEL, n, {}, rec), _row(KERNEL, n, BIG_K, rec),
                       _row(ch13.TILED, n, rec=rec))
    if not (mine and big and wmma):
        return Text(f"The mma.sync rows at {n}³ are not all in the recording yet.")
    pct = lambda r: f"{timing.share(r):.0f}%"
    return Text(f"At {n}³ the mma.sync kernel runs at {mine['gflops']['median'] / 1e3:,.0f} "
                f"TFLOP/s by default ({pct(mine)} of cuBLAS FP16 timed beside it) and "
                f"{big['gflops']['median'] / 1e3:,.0f} TFLOP/s with BK = 64 and 3 stages "
                f"({pct(big)}); that is x{mine['gflops']['median'] / wmma['gflops']['median']:.2f} "
                f"and x{big['gflops']['median'] / wmma['gflops']['median']:.2f} the rate of "
                f"chapter 13's tiled WMMA kernel ({pct(wmma)} of cuBLAS FP16).")


def profile_table(rec=None) -> Table:
    """The study's counters per step at 4096³: time, the tensor pipe's busy share, the
    warps resident (share of the SM's maximum), shared-load wavefronts and their bank
    conflicts, and the three largest waits per issued instruction."""
    rows = []
    for label, m in _study_rows(rec):
        if m is None:
            rows.append({"step": label, "largest waits (cycles per instruction)":
                         "not recorded yet"})
            continue
        st = evidence.stall_reasons({"metrics": m})
        top = sorted(((v, k) for k, v in st.items() if k != "selected"), reverse=True)[:3]
        rows.append({"step": label, "time (µs)": m.get(TIME, 0) / 1e3,
                     "tensor pipe busy %": m.get(BUSY), "warps active %": m.get(WARPS),
                     "shared wavefronts (M)": m.get(WAVES, 0) / 1e6,
                     "bank conflicts (M)": m.get(CONFLICTS, 0) / 1e6,
                     "largest waits (cycles per instruction)":
                         ", ".join(f"{k} {fmt_number(v)}" for v, k in top)})
    return Table(rows, ["step", "time (µs)", "tensor pipe busy %", "warps active %",
                        "shared wavefronts (M)", "bank conflicts (M)",
                        "largest waits (cycles per instruction)"],
                 title=f"Nsight Compute at 4096³ ({_label(rec or study_recording())})")


def plot_profile(rec=None, ax=None):
    """Where the warps wait, per step of the study (chapter 06's stacked bars)."""
    import matplotlib.pyplot as plt
    got = [(label, evidence.stall_reasons({"metrics": m})) for label, m in _study_rows(rec) if m]
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.6 * max(len(got), 1) + 1.8))
    if not got:
        ax.text(0.5, 0.5, "Nsight Compute's counters for this chapter are not recorded yet",
                ha="center", va="center")
        ax.set_axis_off()
        return ax
    evidence.stall_bars(ax, got, top=6)
    ax.set_title(f"Where the warps wait, 4096³ ({_label(rec or study_recording())})",
                 fontsize=10)
    ax.figure.tight_layout()
    return ax


# What each wait means, in the words of Nsight Compute's profiling guide.
MEANING = {
    "long scoreboard": "waiting for data from global memory",
    "short scoreboard": "waiting for a shared-memory result (ldmatrix)",
    "mio throttle": "the queue of shared-memory instructions is full",
    "math pipe throttle": "the math pipe it needs (here the tensor pipe) is busy",
    "barrier": "waiting at __syncthreads() for the other warps of the block",
    "wait": "a fixed number of cycles the compiler makes the warp wait after an "
            "instruction",
    "not selected": "ready, but another warp was issued",
    "dispatch stall": "the dispatcher could not issue",
    "lg throttle": "the queue of global-memory instructions is full",
    "no instruction": "waiting for instructions to be fetched",
    "branch resolving": "waiting for a branch to resolve",
}


def profile_summary(rec=None) -> Text:
    """What the profile says, in sentences built from the study's rows."""
    rows = dict(_study_rows(rec))
    plain, swz, big = (rows.get(s.label) for s in studies.get(STUDY).steps)
    if not (plain and swz and big):
        return Text("Nsight Compute's counters for this chapter's kernel are not in the "
                    "recording yet.")
    out = [f"* The swizzle: bank conflicts of shared loads fall from "
           f"{plain[CONFLICTS] / 1e6:,.1f} million to {swz[CONFLICTS] / 1e6:.3f} million, "
           f"the time at 4096³ from {plain[TIME] / 1e6:.2f} ms to {swz[TIME] / 1e6:.2f} ms, "
           f"and the tensor pipe is busy {swz[BUSY]:.0f}% of the time instead of "
           f"{plain[BUSY]:.0f}%."]
    for label, m in ((studies.get(STUDY).steps[1].label, swz),
                     (studies.get(STUDY).steps[2].label, big)):
        st = evidence.stall_reasons({"metrics": m})
        top = sorted(((v, k) for k, v in st.items() if k != "selected"), reverse=True)[:2]
        waits = "; then ".join(f"'{k}', {v:.1f} cycles per issued instruction "
                               f"({MEANING.get(k, 'see the profiling guide')})"
                               for v, k in top)
        out.append(f"* {label}: tensor pipe busy {m[BUSY]:.0f}%, {m[WARPS]:.0f}% of the "
                   f"SM's warp slots in use. The largest wait is {waits}.")
    return Text("\n".join(out))


def profiler_clocks(n: int = 4096, rec=None) -> Text:
    """Why the profiler's times are longer than the timed rates (Nsight Compute holds
    the clock low while it measures): `evidence.profiled_against_timed` for this
    chapter's study at n³, on the GPU that holds it."""
    return Text(evidence.profiled_against_timed(STUDY, (n, n, n), rec or study_recording()))


def what_is_left(n: int = 4096, rec=None) -> Text:
    """The kernel and cuBLAS FP16 against the GPU's dense FP16 tensor-core peak
    (`ch13_wmma.fp16_peak`)."""
    rec = rec or recording()
    peak = ch13.fp16_peak(rec)
    big = _row(KERNEL, n, BIG_K, rec)
    if not (peak and big):
        return Text("The FP16 peak of the recorded GPU is not known here.")
    peak, said = peak
    mine, ref = big["gflops"]["median"] / 1e3, big["reference"]["gflops"]["median"] / 1e3
    return Text(f"{said} At {n}³: cuBLAS FP16 {ref:,.0f} TFLOP/s "
                f"({100 * ref / peak:.0f}% of it), this chapter's kernel (BK 64, 3 stages) "
                f"{mine:,.0f} TFLOP/s ({100 * mine / peak:.0f}%).")


# ------------------------------------------------------------------ 9. explore

def explorer():
    """The kernel's tunables -> its rate beside cuBLAS FP16 (live: compiled, checked and
    timed; recorded: the sweep at 2048³)."""
    from gemm_kernels.notebook.widgets import Explorer
    return Explorer(KERNEL, rec=recording()).widget()


def one_decimal(table: Table) -> Table:
    """The table with every number of its percentage columns written with one decimal
    ("60.0%" beside "63.3%", not "60%"), for tables whose shares are compared."""
    for row in table:
        for c in table.columns:
            if "%" in c and isinstance(row.get(c), float):
                row[c] = f"{row[c]:.1f}%"
    return table


def sweep_table(rec=None, top: int = 8) -> Table:
    """The recorded sweep at 2048³, fastest first (chapter 13's table)."""
    return one_decimal(ch13.sweep_table(rec=rec or recording(), top=top, kernel=KERNEL))


def swizzle_effect(rec=None) -> Text:
    """Every configuration recorded both ways at 2048³: the swizzle's gain, in words."""
    rec = rec or recording()
    k = get(KERNEL)
    gains = []
    for c in k.valid_configurations():
        if not c["SWIZZLE"]:
            continue
        pair = [[r for r in (rec.find(KERNEL, (2048,) * 3, {**c, "SWIZZLE": s}) if rec else [])
                 if "gflops" in r] for s in (False, True)]
        if all(pair):
            gains.append(pair[1][0]["gflops"]["median"] / pair[0][0]["gflops"]["median"])
    if not gains:
        return Text("The sweep with and without the swizzle is not recorded yet.")
    gains.sort()
    return Text(f"Over the {len(gains)} tiles recorded both ways at 2048³, the swizzle makes "
                f"the kernel x{gains[len(gains) // 2]:.1f} faster (median; from "
                f"x{gains[0]:.1f} to x{gains[-1]:.1f}), {_label(rec)}.")


# ------------------------------------------------------------------ 10. the T4 path

def t4_table(arches=("sm_75", "sm_90")) -> Table:
    """The kernel compiled for a T4 (sm_75) and for the recorded GPU: its tensor-core
    instructions by shape, its copies into shared memory, whole kernel."""
    rows = []
    for arch in arches:
        sass = compiler.sass(get(KERNEL), {}, arch)
        ops = [f for _, f, _ in analysis.instructions(sass)]
        full = [t.split()[0] for _, _, t in analysis.instructions(sass)]
        rows.append({"architecture": arch,
                     "HMMA shapes": ", ".join(sorted({o for o in full if o.startswith("HMMA")})),
                     "HMMA": ops.count("HMMA"), "LDSM": ops.count("LDSM"),
                     "LDGSTS (cp.async)": ops.count("LDGSTS"),
                     "STS.128 (plain stores)": ops.count("STS.128")})
    return Table(rows, ["architecture", "HMMA shapes", "HMMA", "LDSM", "LDGSTS (cp.async)",
                        "STS.128 (plain stores)"],
                 title="The same source, two GPUs (SASS, whole kernel: each instruction "
                       "counted once wherever it sits, not per pass of the loop)")


# ------------------------------------------------------------------ the solution's evidence

def slot_table(expression: str = "c ^ ((r >> (4 / CHUNKS)) & (CHUNKS - 1) & 7)") -> Table:
    """For rows 0-7 of the A and B tiles: where `expression` puts chunk 0, and which
    16-byte slot of its 128-byte line that is ((r * CHUNKS + place) % 8): eight different
    slots per tile is a conflict-free ldmatrix phase."""
    from gemm_kernels.exercises.cexpr import compile_expression
    p = get(KERNEL).resolve({})
    f = compile_expression(expression, ("r", "c", "CHUNKS"), conditionals=True)
    rows = []
    for r in range(8):
        row = {"row r": r}
        for name, chunks in (("A", p["BK"] // 8), ("B", p["BN"] // 8)):
            place = f(r=r, c=0, CHUNKS=chunks)
            row[f"{name}: place of chunk 0"] = place
            row[f"{name}: slot in its line"] = (r * chunks + place) % 8
        rows.append(row)
    return Table(rows, list(rows[0]), title=f"chunk = {expression}: chunk 0 of rows 0-7 "
                                            f"(A: CHUNKS = {p['BK'] // 8}, B: CHUNKS = "
                                            f"{p['BN'] // 8})")


COMMON_MISTAKES = ("c ^ (r & 7)", "c ^ (r & (CHUNKS - 1))", "c ^ (r & 3)")


def grader_says(expressions, title: str) -> Table:
    """What exercise 14's step 2 answers to each of `expressions` (run here, on the
    exercise's own cell with each line filled in)."""
    from gemm_kernels.exercises import ch14_checks
    rows = []
    for e in expressions:
        source = ("template <int CHUNKS, bool SWIZZLE>\n__device__ __forceinline__ int "
                  "chunk_at(int r, int c) {\n    int chunk = c;\n    chunk = " + e +
                  ";\n    if constexpr (!SWIZZLE) return c;\n    return chunk;\n}\n")
        problems = ch14_checks.assess(source).problems
        rows.append({"answer": e, "step 2 says": problems[0] if problems else "pass",
                     "hint": ch14_checks.swizzle_hint(problems[0]) if problems else ""})
    return Table(rows, ["answer", "step 2 says", "hint"], title=title)


def common_mistakes(expressions=COMMON_MISTAKES) -> Table:
    """What exercise 14's step 2 answers to the usual wrong swizzles."""
    return grader_says(expressions, "The usual wrong swizzles and what the grader answers")


OTHER_ANSWERS = ("CHUNKS == 4 ? (c + ((r >> 1) & 3)) % 4 : (c + (r & 7)) % CHUNKS",
                 "CHUNKS == 4 ? c ^ (3 - ((r >> 1) & 3)) : c ^ (7 - (r & 7))")


def other_answers(expressions=OTHER_ANSWERS) -> Table:
    """Right answers in other forms: a rotation instead of the XOR, and an XOR with the
    row's bits complemented (another permutation of the same slots)."""
    return grader_says(expressions, "Other answers, and what the grader answers")


def solution_on_gpu(exercise: str = "14_swizzle"):
    """What a GPU adds to a worked solution's grade: its rate beside the chapter's kernel,
    both from the one run that checked the solution on a ragged shape and timed them
    side by side (`worked_solutions.worked_solution`); until that run is recorded, one
    sentence saying what it will show. Chapter 15's solution uses it too."""
    from gemm_kernels.notebook import worked_solutions
    mine, theirs = worked_solutions.pair(exercise)
    if mine and theirs:
        return worked_solutions.worked_solution(exercise, tflops=True)
    return Text("The run that checks this solution on a GPU and times it beside the "
                "chapter's kernel is not recorded yet; once it is, this cell shows both "
                "rates.")


# ------------------------------------------------------------------ what the numbers imply

def hmma_run(limit: int = 12) -> Text:
    """The main loop's SASS (sm_90) from its first run of back-to-back HMMA: which
    registers each one writes, whether any reads the accumulators the one before it wrote
    (a data dependency), and the stall count ptxas wrote into each instruction's control
    bits (`compiler.control_bits`): the cycles the warp waits before its next instruction,
    counted over the whole loop for the HMMA that another HMMA follows."""
    sass = compiler.sass(get(KERNEL), get(KERNEL).resolve({}), "sm_90", encoding=True)
    bits = compiler.control_bits(sass)
    body = analysis.main_loop(sass, work=("HMMA",))
    hmma = [t for _, f, t in body if f == "HMMA"]
    dest = [t.split()[1].rstrip(",") for t in hmma]
    acc_in = [t.split()[-1] for t in hmma]
    dependent = sum(acc_in[i] == dest[i - 1] for i in range(1, len(hmma)))
    first = next(i for i, (_, f, _) in enumerate(body)
                 if f == "HMMA" and i + 3 < len(body)
                 and all(g == "HMMA" for _, g, _ in body[i:i + 4]))
    width = max(len(t) for _, _, t in body[first:first + limit])
    lines = [f"/*{a:04x}*/  {t:<{width}}  stall {bits[a]['stall']}"
             for a, _, t in body[first:first + limit]]
    pairs = Counter(bits[a]["stall"] for (a, f, _), (_, g, _) in zip(body, body[1:])
                    if f == "HMMA" and g == "HMMA")
    stalls = ", ".join(f"{n} of them {c} cycles" for c, n in pairs.most_common())
    return Text("\n".join(lines) + f"\n... ({len(hmma)} HMMA in one pass of the loop; "
                f"{dependent} of them read the accumulators the HMMA just before wrote. "
                f"Stall counts of the {sum(pairs.values())} HMMA that another HMMA "
                f"follows: {stalls})")


def wave_line(n: int = 1024, rec=None) -> Text:
    """Why the smallest size stays far from cuBLAS: the default tile's blocks against the
    recorded GPU's SMs and the blocks an SM holds (one wave or less)."""
    rec = rec or recording()
    p = get(KERNEL).resolve({})
    blocks = (n // p["BM"]) * (n // p["BN"])
    sms = rec.device.get("sm_count") if rec else None
    per_sm = analysis.kernel_occupancy(KERNEL, {}).blocks_per_sm
    if not sms:
        return Text(f"At {n}³ the {p['BM']} x {p['BN']} tile gives {blocks} blocks.")
    busy = min(blocks, sms)
    return Text(f"At {n}³ the {p['BM']} x {p['BN']} tile gives ({n} / {p['BM']}) x "
                f"({n} / {p['BN']}) = {blocks} blocks for {sms} SMs, which hold {per_sm} "
                f"blocks each ({sms * per_sm} slots): {sms - busy} SMs "
                f"({100 * (sms - busy) / sms:.0f}%) get no block at all, and the busy ones "
                f"run one block where they could run {per_sm}. That alone explains much of "
                f"the gap at this size. The remedy is more pieces of work than tiles: split-K "
                f"(chapter 12: blocks share the K dimension and add their parts), or "
                f"stream-K, its persistent form (Osama et al., 2023).")


def pipe_ceiling(n: int = 4096, rec=None) -> Text:
    """What the profile implies about the tensor pipe: the profiler's own clock (its SM
    cycles over its time), the dense FP16 peak at that clock, and the rate a pipe busy all
    the time would give at this instruction mix (the profiled rate over the busy share),
    all on the GPU of the profile."""
    rec = rec or study_recording()
    rows = dict(_study_rows(rec))
    swz = rows.get(studies.get(STUDY).steps[1].label)
    props = rec.device if rec else {}
    per_sm = ch13.FP16_FLOP_PER_CLOCK_SM.get(props.get("compute_capability"))
    cycles = "sm__cycles_elapsed.avg"
    if not (swz and swz.get(TIME) and swz.get(BUSY) and swz.get(cycles) and per_sm):
        return Text("The profile's time, clock and tensor-pipe share are not all recorded.")
    rate = 2 * n ** 3 / swz[TIME] / 1e3                              # TFLOP/s
    full = rate / (swz[BUSY] / 100)
    clock = swz[cycles] / swz[TIME]                                  # GHz (cycles per ns)
    peak = per_sm * props["sm_count"] * clock / 1e3
    busy = {label: m.get(PIPE_CYCLES) for label, m in rows.items() if m}
    same = len(set(busy.values())) == 1 and None not in busy.values()
    per_hmma = swz[PIPE_CYCLES] / swz[HMMA] if swz.get(PIPE_CYCLES) and swz.get(HMMA) else None
    at_peak = HMMA_FLOP / (per_sm / 4)          # each of the SM's 4 sub-partitions: 1/4
    return Text(f"All on the profile's GPU, the {props['name']} ({props['sm_count']} SMs).\n"
                f"* Its clock under the profiler: {fmt_number(swz[cycles])} SM "
                f"cycles in {swz[TIME] / 1e6:.3f} ms = {clock:.2f} GHz, so its dense FP16 "
                f"peak there is {per_sm:,} x {props['sm_count']} x {clock:.2f} GHz = "
                f"{peak:,.0f} TFLOP/s.\n"
                f"* The swizzled kernel ran at {rate:,.0f} TFLOP/s with the tensor pipe "
                f"busy {swz[BUSY]:.0f}% of the time; at the same mix of instructions a pipe "
                f"busy all the time would give {rate:,.0f} / {swz[BUSY] / 100:.2f} = "
                f"{full:,.0f} TFLOP/s, {100 * full / peak:.0f}% of that peak.\n"
                + (f"* The counter's busy cycles are the same in all three profiles "
                   f"({fmt_number(next(iter(busy.values())))}): it charges each HMMA a fixed "
                   f"number of cycles, however fast its operands arrive.\n" if same else "")
                + (f"* Per instruction: {fmt_number(swz[PIPE_CYCLES])} busy cycles for "
                   f"{fmt_number(swz[HMMA])} HMMA is {per_hmma:.1f} cycles each, where the "
                   f"peak rate ({per_sm:,} FLOP per cycle per SM, a quarter in each of its 4 "
                   f"sub-partitions) would finish an m16n8k16's {HMMA_FLOP:,} FLOP in "
                   f"{at_peak:.0f}.\n" if per_hmma else "")
                + f"So the profile charges each HMMA.16816 about {1 / (full / peak):.1f} times "
                f"the tensor-pipe cycles the peak rate needs for its FLOP. If that charge is "
                f"what the hardware spends, the tensor-pipe time alone caps this kernel near "
                f"{100 * full / peak:.0f}% of the peak however busy the pipe is, and two losses "
                f"multiply: {100 * full / peak:.0f}% times the busy share ({swz[BUSY]:.0f}%) is "
                f"{full / peak * swz[BUSY]:.0f}% of the peak, the profiled rate ({rate:,.0f} of "
                f"{peak:,.0f} TFLOP/s). The idle time the profile does not split out; in view: "
                f"few warps to issue while one waits (section 6) and the instructions between "
                f"the HMMA (a warp issues {swz[ISSUED] / swz[HMMA]:.1f} instructions per HMMA here).")


def cute_swizzle(address: int, bits: int, base: int, shift: int) -> int:
    """CuTe's `Swizzle<B, M, S>` on a byte address: bits [M + S, M + S + B) are XORed
    into bits [M, M + B) (cute/swizzle.hpp)."""
    return address ^ ((address >> shift) & (((1 << bits) - 1) << base))


def cute_swizzles(widths=(4, 8, 16, 32), rows: int = 64) -> Table:
    """For each row width: the CuTe swizzle on byte addresses that stores chunk c of row
    r where the chapter's `chunk_at` does, checked on every chunk of `rows` rows."""
    out = []
    for chunks in widths:
        row_bytes = 16 * chunks
        bits, shift = (2, 3) if chunks == 4 else (3, row_bytes.bit_length() - 1 - 4)
        same = all(cute_swizzle(r * row_bytes + 16 * c, bits, 4, shift)
                   == r * row_bytes + 16 * chunk_at(r, c, chunks)
                   for r in range(rows) for c in range(chunks))
        out.append({"CHUNKS": chunks, "row bytes": row_bytes,
                    "chunk_at": "c ^ ((r >> 1) & 3)" if chunks == 4 else "c ^ (r & 7)",
                    "CuTe, on byte addresses": f"Swizzle<{bits}, 4, {shift}>",
                    f"same place, all chunks of {rows} rows": "yes" if same else "no"})
    return Table(out, list(out[0]), title="The chapter's chunk_at as CuTe's Swizzle<B, M, S> "
                                          "(bits M+S.. of the address XORed into bits M..)")
