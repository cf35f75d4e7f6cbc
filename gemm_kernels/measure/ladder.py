"""The ladder: every chapter's kernel next to cuBLAS, as a table and a plot."""
from __future__ import annotations

from pathlib import Path

from gemm_kernels.core.table import Table
from gemm_kernels.measure import lookup, records
from gemm_kernels.core.kernels import KERNELS

LADDER_SIZES = (1024, 2048, 4096, 8192)


def ladder_kernels() -> list[str]:
    """The sgemm kernels in chapter order (one line each in the summary)."""
    return [k.name for k in KERNELS.values() if k.op == "sgemm"]


def compare(kernels, sizes, params: dict | None = None, repeats: int | None = None,
            reference: str = "cublas") -> Table:
    """GFLOP/s of `kernels` at square `sizes`, each with cuBLAS measured beside it
    (live) or read from the same recording (recorded). reference: "cublas" (SGEMM) or
    "cublas_dgemm" (DGEMM, for the float64 kernels)."""
    rows = []
    for n in sizes:
        shape = (n, n, n)
        try:
            ref = lookup.measure_or_lookup(reference, shape, repeats=repeats)
        except LookupError:
            ref = None
        for name in kernels:
            try:
                r = lookup.measure_or_lookup(name, shape, (params or {}).get(name), repeats)
            except LookupError:
                continue
            g = r["gflops"]["median"]
            rows.append({"kernel": name, "chapter": r["chapter"], "size": n,
                         "GFLOP/s": g, "min": r["gflops"]["min"], "max": r["gflops"]["max"],
                         "% of cuBLAS": 100 * g / ref["gflops"]["median"] if ref else None,
                         "rel. error": r.get("rel_error")})
        if ref:
            rows.append({"kernel": reference, "chapter": "00", "size": n,
                         "GFLOP/s": ref["gflops"]["median"], "min": ref["gflops"]["min"],
                         "max": ref["gflops"]["max"], "% of cuBLAS": 100.0,
                         "rel. error": ref.get("rel_error")})
    return Table(rows, ["chapter", "kernel", "size", "GFLOP/s", "min", "max", "% of cuBLAS",
                        "rel. error"], title=f"GFLOP/s, {records.source()}")


def share(kernel: str, size: int, params: dict | None = None) -> dict | None:
    """{'GFLOP/s', '% of cuBLAS', 'source'} of one configuration at size^3, measured
    (live) or recorded; None when the recording does not have it."""
    try:
        g = lookup.measure_or_lookup(kernel, (size,) * 3, params)
        ref = lookup.measure_or_lookup("cublas", (size,) * 3)
    except LookupError:
        return None
    m = g["gflops"]["median"]
    return {"GFLOP/s": m, "% of cuBLAS": 100 * m / ref["gflops"]["median"], "source": g["source"]}


def plot(table: Table, ax=None, path=None):
    """GFLOP/s by size, one line per kernel, cuBLAS dashed."""
    import matplotlib
    if path is not None and ax is None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 4.5))
    names = list(dict.fromkeys(r["kernel"] for r in table))
    colors = plt.get_cmap("tab20").colors      # one distinct colour per kernel
    for i, name in enumerate(names):
        pts = sorted((r["size"], r["GFLOP/s"]) for r in table if r["kernel"] == name)
        if name.startswith("cublas"):
            ax.plot(*zip(*pts), "k--", lw=2, label=name)
        else:
            ax.plot(*zip(*pts), "os^vD<>"[i % 7] + "-", color=colors[i % 20], label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(table.title)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(True, which="both", alpha=0.3)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        (fig or ax.figure).savefig(path, dpi=120, bbox_inches="tight")
    return ax


README_START, README_END = "<!-- results:start -->", "<!-- results:end -->"


def markdown(sizes=LADDER_SIZES) -> str:
    """The ladder as a Markdown table: GFLOP/s and % of cuBLAS per kernel and size."""
    table = compare(ladder_kernels(), sizes)
    by = {(r["kernel"], r["size"]): r for r in table}
    names = list(dict.fromkeys(r["kernel"] for r in table))
    head = "| ch | kernel | " + " | ".join(f"{n}^3" for n in sizes) + " |"
    lines = [f"GFLOP/s (% of cuBLAS), {records.source()}:", "", head,
             "|" + " --- |" * (len(sizes) + 2)]
    for name in names:
        cells = []
        for n in sizes:
            r = by.get((name, n))
            cells.append("-" if r is None else f"{r['GFLOP/s']:,.0f} ({r['% of cuBLAS']:.0f}%)")
        ch = next(r["chapter"] for r in table if r["kernel"] == name)
        lines.append(f"| {ch} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def update_readme(path) -> None:
    """Replace the results table between the README's markers with the recorded one."""
    text = Path(path).read_text()
    a, b = text.index(README_START) + len(README_START), text.index(README_END)
    Path(path).write_text(text[:a] + "\n" + markdown() + "\n" + text[b:])
