"""Chapter 00's tables and excerpts: cuBLAS against the FP32 peak, the two timing
pitfalls with their ratio, the core loop of l2_read, and (for the solution) what the
copy kernel reaches and how the number of rows per thread moves it.

Every number comes from the recording (or is measured now, live) through `lookup` and
`roofline`; nothing here is typed in.
"""
from __future__ import annotations

from gemm_kernels.core import device
from gemm_kernels.core.table import Table
from gemm_kernels.measure import lookup, records, roofline
from gemm_kernels.notebook.display import Text, source

COPY_SIZE = (8192, 8192)          # the copy exercise's timed shape (256 MiB each way)
COPY_PARAMS = {"T": "float", "TILE": 32, "ROWS": 4}   # the exercise's configuration


def cublas_table(sizes=(1024, 2048, 4096, 8192)) -> Table:
    """cuBLAS SGEMM at each size^3: TFLOP/s (median of the timed calls), the slowest and
    fastest call, the share of the theoretical FP32 peak, and the correctness check."""
    props = roofline.device_properties()
    peak = device.peak_fp32_gflops(props)
    rows = []
    for n in sizes:
        try:
            r = lookup.measure_or_lookup("cublas", (n, n, n))
        except LookupError:
            continue
        g = r["gflops"]
        rows.append({"size": f"{n:,}^3", "TFLOP/s": g["median"] / 1000,
                     "slowest to fastest call": f"{g['min'] / 1000:.1f} to {g['max'] / 1000:.1f}",
                     "% of FP32 peak": f"{100 * g['median'] / peak:.0f}%",
                     "error / bound": r.get("error_over_bound")})
    return Table(rows, list(rows[0]) if rows else ["size"],
                 title=f"cuBLAS SGEMM, {records.source()}")


def pitfalls() -> Table:
    """The two timing mistakes measured on cuBLAS at 4096^3, each next to the harness's
    time: the milliseconds to four significant digits and their ratio."""
    t = roofline.pitfalls_table()
    harness = next(r["ms"] for r in t if r["what"].startswith("CUDA events, random"))
    rows = [{"what": r["what"], "ms": f"{r['ms']:.4g}",
             "/ the harness's time": f"{r['ms'] / harness:.4f}"} for r in t]
    return Table(rows, ["what", "ms", "/ the harness's time"], title=t.title)


def l2_read_core() -> Text:
    """The part of l2_read that the measurement rests on: the index of the thread's
    16 bytes, and the PASSES loads of them combined into one store (the tail for sizes
    that are not a multiple of 4 words, and the inline PTX of load16, are in the
    appendix)."""
    text = source("l2_read", entry="l2_read")
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("template"))
    stop = next(i for i, ln in enumerate(lines) if "} else {" in ln)
    core = lines[start:stop] + ["    }", "    // ... (the last 1 to 3 words when rows * cols "
                                "is not a multiple of 4)", "}"]
    return Text("\n".join(core))


# ------------------------------------------------------------------ the copy's solution

def copy_result(params: dict = COPY_PARAMS, shape=COPY_SIZE) -> str:
    """The copy kernel at the exercise's configuration and shape, next to the device
    copy timed beside it in the same run."""
    r = lookup.measure_or_lookup("copy", shape, params)
    ref = r.get("reference", {}).get("gbps", {}).get("median")
    rate = r["gbps"]["median"]
    mib = shape[0] * shape[1] * 4 / (1 << 20)
    line = (f"copy, TILE={params['TILE']}, ROWS={params['ROWS']}, {params['T']}, "
            f"{shape[0]:,} x {shape[1]:,} ({mib:,.0f} MiB read and {mib:,.0f} MiB written): "
            f"{rate:,.0f} GB/s (slowest to fastest call {r['gbps']['min']:,.0f} to "
            f"{r['gbps']['max']:,.0f})")
    if ref:
        line += f"\ndevice-to-device copy timed beside it: {ref:,.0f} GB/s, so {rate / ref:.0%} of it"
    return line + f"\n({r['source']})"


def rows_per_thread_plot(tile: int = 32, shape=COPY_SIZE, ax=None):
    """The copy at TILE = `tile`: GB/s against ROWS (so TILE / ROWS elements per thread),
    float and double, each with the device copy timed beside it."""
    import matplotlib.pyplot as plt
    from gemm_kernels.core.kernels import KERNELS
    rows_values = next(p.values for p in KERNELS["copy"].params if p.name == "ROWS")
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4))
    refs = []
    for t, colour, marker in (("float", "C0", "o"), ("double", "C1", "s")):
        xs, ys = [], []
        for rows in rows_values:
            try:
                r = lookup.measure_or_lookup("copy", shape, {"T": t, "TILE": tile, "ROWS": rows})
            except LookupError:
                continue
            xs.append(tile // rows)
            ys.append(r["gbps"]["median"])
            ref = r.get("reference", {}).get("gbps", {}).get("median")
            if ref:
                refs.append(ref)
        ax.plot(xs, ys, marker=marker, color=colour,
                label=f"copy of {t}s ({4 if t == 'float' else 8} bytes per lane)")
        if t == COPY_PARAMS["T"] and tile == COPY_PARAMS["TILE"] and \
                tile // COPY_PARAMS["ROWS"] in xs:
            i = xs.index(tile // COPY_PARAMS["ROWS"])
            ax.annotate(f"the exercise: ROWS = {COPY_PARAMS['ROWS']}", (xs[i], ys[i]),
                        xytext=(0, -28), textcoords="offset points", ha="center",
                        fontsize=8, color=colour, arrowprops={"arrowstyle": "->",
                                                              "color": colour})
    if refs:
        ax.axhspan(min(refs), max(refs), color="0.8", alpha=0.6,
                   label=f"device copy timed beside each ({min(refs):,.0f} to {max(refs):,.0f})")
    from matplotlib.ticker import FixedLocator, ScalarFormatter
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([tile // r for r in rows_values]))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel(f"elements per thread = TILE / ROWS (TILE = {tile}; "
                  f"a block is {tile} x ROWS threads)")
    ax.set_ylabel("GB/s (bytes read + written)")
    ax.set_ylim(0, None)
    ax.set_title(f"The copy at {shape[0]:,} x {shape[1]:,}, {records.source()}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, alpha=0.3)
    return ax


# ------------------------------------------------------------------ the appendix

L2_LOADS = ("ld.relaxed.gpu.global", "ld.global.cg", "ld.global")


def l2_read_loads(passes: int = 16) -> Table:
    """l2_read compiled here with each of three PTX loads in load16 (the kernel's own,
    ld.relaxed.gpu, first) at PASSES = `passes`: how many 16-byte loads (LDG.E.128...)
    the SASS keeps in the main path. ptxas merges the repeated loads of one address
    unless the load is ld.relaxed.gpu."""
    import re
    from gemm_kernels.core import compiler
    from gemm_kernels.core.kernels import KERNELS
    k = KERNELS["l2_read"]
    text = k.source_text()
    vector = re.compile(r"\b(LDG\.E\.128(?:\.[A-Z]+)*)")
    rows = []
    for load in L2_LOADS:
        variant = k if load == L2_LOADS[0] else k.with_code(
            text.replace(L2_LOADS[0], load), name=f"l2_read:{load}", source="l2_read.cu")
        found = vector.findall(compiler.sass(variant, {"PASSES": passes}))
        rows.append({"load16 uses": f"{load}" + (" (l2_read)" if load == L2_LOADS[0] else ""),
                     "16-byte loads in the SASS": len(found),
                     "as": ", ".join(sorted(set(found))) or "-"})
    return Table(rows, list(rows[0]),
                 title=f"l2_read at PASSES = {passes}, compiled here: {passes} loads asked for")
