"""Chapter 10's last question: would chapter 07's GEMM gain from an A transposed
beforehand with this chapter's transpose, and would the gain pay for the transpose?

The chapter keeps it to one paragraph of an appendix: the shared stores of the two
kernels' main loops (the SASS compiled here: four STS of A become one STS.128), and, from
the table of `evidence.pretransposed_a` (the study `ch10_pretransposed_a`), the saving
per GEMM next to the transpose's time, as a conclusion in words. Every
sentence is computed from the table, so a recording without the study says that the
measurement is missing instead of guessing.
"""
from __future__ import annotations

from gemm_kernels.measure import studies, timing

WITH_A, WITH_AT = "float4", "float4_at"
SAVING, TRANSPOSE = "saving per GEMM (µs)", "transpose of A (µs)"
GEMM_A, GEMM_AT, NET = "GEMM, A as is (µs)", "GEMM, A^T given (µs)", "net, one GEMM (µs)"


def table(shapes=None):
    """`evidence.pretransposed_a` (the study's table: both GEMMs, the saving, the
    transpose, the net) cut to what a reader can compare: only the shapes whose three
    times come from one run (their note says whether the timed calls overlap), with the
    recording's source in the title in place of the runs."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import records
    from gemm_kernels.notebook import evidence
    tab = evidence.pretransposed_a(shapes)
    head = tab.title.partition(" — ")[0]
    rows = _complete(tab)
    cols = [c for c in tab.columns if any(c in r for r in rows)] if rows else ["shape"]
    return Table(rows, cols, title=f"{head}, {records.source()}")


def _complete(tab) -> list[dict]:
    return [r for r in tab if r.get(NET) is not None]


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
                     + ("at least half the calls with A^T beat the fastest call with A)" if faster == WITH_AT
                        else "at least half the calls with A beat the fastest call with A^T)" if faster == WITH_A
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
