"""Chapter 10's closing experiment: the lesson of its copies (send every load before the
first store) applied to its best transpose, `transpose_padded` with two tiles per block.

Two variants of it, timed in one run beside the device copy at the chapter's two shapes
(`timed_variants`): the text as built, under its own name, and the text with the load loop
split in two, every load of a thread into registers first, then the shared stores. The
text as built runs under its own name so that timing it never replaces the registry
kernel's rows, which the chapter's other tables compare within their own runs.
"""
from __future__ import annotations

import functools

from gemm_kernels.core.launch import kernel_of
from gemm_kernels.core.table import Table
from gemm_kernels.measure import records

KERNEL = "transpose_padded"
AS_BUILT = "transpose_padded: as built, timed beside every-load-first"
LOADS_FIRST = "transpose_padded: every load first"
# The registry's defaults (TILE 32, ROWS 8, two tiles per block, x->row): a thread moves
# TILE / ROWS * STACK = 8 elements, so the split kernel has 8 loads in flight per thread.
PARAMS = {"T": "float"}

_HEADER = ("// Chapter 10: matrix transpose, a kernel that only moves data.\n",
           "// Chapter 10, closing experiment: transpose_padded below with its load loop split\n"
           "// in two, every load of a thread first (into registers), then the shared stores.\n"
           "//\n"
           "// Chapter 10: matrix transpose, a kernel that only moves data.\n")

_LOOP = """    for (int dy = 0; dy < TILE; dy += ROWS) {
#pragma unroll
        for (int s = 0; s < STACK; ++s) {              // row y of tile s
            const int y = s * TILE + threadIdx.y + dy;
            if (row0 + y < rows && col0 + tx < cols)
                tile[y][tx] = in[(size_t)(row0 + y) * cols + col0 + tx];
        }
    }
"""

# Both loops are unrolled, so v lives in registers; an element outside the matrix is
# neither loaded nor stored, so its register is never read.
_SPLIT = """    T v[TILE / ROWS][STACK];                          // every load first ...
#pragma unroll
    for (int i = 0; i < TILE / ROWS; ++i) {
#pragma unroll
        for (int s = 0; s < STACK; ++s) {
            const int y = s * TILE + threadIdx.y + i * ROWS;
            if (row0 + y < rows && col0 + tx < cols)
                v[i][s] = in[(size_t)(row0 + y) * cols + col0 + tx];
        }
    }
#pragma unroll
    for (int i = 0; i < TILE / ROWS; ++i) {           // ... then the shared stores
#pragma unroll
        for (int s = 0; s < STACK; ++s) {
            const int y = s * TILE + threadIdx.y + i * ROWS;
            if (row0 + y < rows && col0 + tx < cols)
                tile[y][tx] = v[i][s];
        }
    }
"""

EDITS = (_HEADER, (_LOOP, _SPLIT))


@functools.lru_cache(maxsize=None)
def loads_first_kernel():
    """`transpose_padded` around the edited text (its tunables, grid and checks unchanged)."""
    return kernel_of(KERNEL).edited(EDITS, LOADS_FIRST)


@functools.lru_cache(maxsize=None)
def as_built_kernel():
    """`transpose_padded`'s own text under another name (its rows never replace the
    registry kernel's)."""
    k = kernel_of(KERNEL)
    return k.with_code(k.source_text(), name=AS_BUILT, source=k.source)


STUDY = "ch10_loads_first"
# (row label, metric): the profiled counters that test the lesson. Did the warps wait less
# for their loads, more at the barrier, and did DRAM get busier? The stalls are turned
# into a warp's whole wait (stall per issue x instructions / warps, at the profiler's
# clock), as chapter 10's appendix A.2 does: per issue they would also move with the
# instruction count, which the split changes.
_BUSY = ("DRAM busy, % of peak", "dram__throughput.avg.pct_of_peak_sustained_elapsed")
_WAITS = (("a warp's wait for its global loads, µs", "long_scoreboard"),
          ("a warp's wait at the barrier, µs", "barrier"))


def _fmt(v, spec: str) -> str:
    """A cell at a fixed number of decimals, so that the two kernels' columns line up;
    '-' where the recording lacks it."""
    return "-" if v is None else spec.format(v)


# The comparison's row groups, in the order they print: the SASS's loads per round trip,
# the registers (timed binary), the timed rates; then, under the profiler, per shape, the
# kernel's time, how busy DRAM was and a warp's two waits.
ROW_GROUPS = ("round trips", "registers", "timed", "kernel time", "dram", "waits")
_PROFILED = {"kernel time", "dram", "waits"}


def comparison(rows: tuple[str, ...] = ROW_GROUPS, profiled_at: tuple | None = None) -> Table:
    """The closing experiment in one table: the two-tile padded transpose as built and
    with every load first, one column each. `rows` picks the row groups of `ROW_GROUPS`
    to print (chapter 10's appendix A.2 prints all), and `profiled_at` the shapes of the profiled rows (None: every
    profiled shape): the loads per round trip (the SASS compiled here); the registers (the timed
    binary); at both shapes, the rate as a share of the device copy timed beside it (the
    two kernels in one run); and, under Nsight Compute at each shape, the kernel's time,
    how busy DRAM was, and a warp's wait for its loads and at the barrier."""
    from gemm_kernels.measure import lookup, studies
    from gemm_kernels.notebook import ch10_transpose as ch10
    unknown = set(rows) - set(ROW_GROUPS)
    if unknown:
        raise ValueError(f"unknown row groups {sorted(unknown)}: choose from {ROW_GROUPS}")
    kernels = (("as built", as_built_kernel()), ("every load first", loads_first_kernel()))
    shapes = studies.get(STUDY).shapes
    out = []
    if "round trips" in rows:
        out.append({"quantity": "loads per round trip (SASS)", "shape": "any",
                    **{who: ", then ".join(map(str, ch10.round_trips(ch10._sass_order(k, PARAMS))))
                       for who, k in kernels}})
    timed = {(who, tuple(sh)): lookup.variant_row(k, tuple(sh), PARAMS)
             for who, k in kernels for sh in shapes}
    if "registers" in rows:
        out.append({"quantity": "registers per thread (timed binary)", "shape": "any",
                    **{who: _fmt((timed[who, tuple(shapes[0])] or {}).get("binary", {}).get("registers"),
                                 "{}") for who, _ in kernels}})
    for sh in shapes if "timed" in rows else ():
        out.append({"quantity": "% of the device copy, timed in one run", "shape": ch10._shape_text(sh),
                    **{who: _fmt(timed[who, tuple(sh)] and lookup.share(timed[who, tuple(sh)]),
                                 "{:.1f}%") for who, _ in kernels}})
    profiled = _PROFILED & set(rows)
    wanted = None if profiled_at is None else {tuple(s) for s in profiled_at}
    for sh in shapes if profiled else ():
        if wanted is not None and tuple(sh) not in wanted:
            continue
        got = dict((s.label, r) for s, r in studies.results(STUDY, tuple(sh)))
        warps = ch10._warps(KERNEL, PARAMS, tuple(sh))
        text = ch10._shape_text(sh)

        def per_warp(m, reason):   # µs a warp spends in one stall reason, profiler's clock
            clock = m["sm__cycles_elapsed.avg"] / m["gpu__time_duration.sum"]     # GHz
            return ch10._stalls(m)[reason] * m["smsp__inst_executed.sum"] / warps / clock / 1e3
        metrics = {who: (got.get(who) or {}).get("metrics") for who, _ in kernels}
        if "kernel time" in rows:
            out.append({"quantity": "profiled: kernel time, µs", "shape": text,
                        **{who: _fmt(m and m["gpu__time_duration.sum"] / 1e3, "{:.1f}")
                           for who, m in metrics.items()}})
        if "dram" in rows:
            out.append({"quantity": f"profiled: {_BUSY[0]}", "shape": text,
                        **{who: _fmt(m and m[_BUSY[1]], "{:.1f}%") for who, m in metrics.items()}})
        for label, reason in _WAITS if "waits" in rows else ():
            out.append({"quantity": f"profiled: {label}", "shape": text,
                        **{who: _fmt(m and per_warp(m, reason), "{:.2f}")
                           for who, m in metrics.items()}})
    return Table(out, ["quantity", "shape", *(who for who, _ in kernels)],
                 title=f"transpose_padded, float, TILE = 32, ROWS = 8, two tiles per block, "
                       f"x->row: as built, and with every load first "
                       f"({'timed and profiled' if profiled else 'timed'}; {records.source()})")


def split_loop():
    """The only lines the every-load-first text changes: its load loop, split in two."""
    from gemm_kernels.notebook import display
    return display.Text(_SPLIT.rstrip("\n"))


def _register_variants():
    """Both texts become variants that a study's step may name (`ch10_loads_first`, the
    profile of the two), by the names their rows carry."""
    from gemm_kernels.measure import studies
    studies.register_variant(LOADS_FIRST, loads_first_kernel)
    studies.register_variant(AS_BUILT, as_built_kernel)


_register_variants()


def solution_margin(shape=None) -> str:
    """Three short sentences: how far the worked solution lies above `copy_smem` (timed in another
    run), set against how far one kernel moved between two runs: the two-tile padded
    transpose as built, timed in appendix A.2's run and in A.1's, at each shape of
    appendix A.2's study. '' where a rate is not recorded."""
    from gemm_kernels.notebook import ch10_transpose as ch10
    shape = shape or ch10.SQUARE
    rows = {r["kernel"]: r["% of device copy"] for r in ch10.solution_rates(shape)}
    sol, smem = rows.get("the worked solution: every load first"), \
        rows.get("copy through a shared tile")
    shifts = run_shifts()
    if sol is None or smem is None or not shifts:
        return ""
    margin, shift = sol - smem, max(shifts)
    verdict = ("so its lead is probably real, though not certain" if margin > shift
               else "so its lead is within that move, and may not be real")
    return (f"copy_smem was timed in another run. One kernel, timed in two runs at "
            f"{len(shifts)} shapes, moved by {shift:.1f} points at most. The worked solution is {margin:.1f} points "
            f"ahead of copy_smem, {verdict}.")


def run_shifts() -> list[float]:
    """How far one kernel moved between two runs, in points of the device copy: the
    two-tile padded transpose as built, timed in appendix A.2's run and in A.1's, at each
    shape of A.2's study where both are recorded."""
    from gemm_kernels.measure import lookup, studies
    from gemm_kernels.notebook import ch10_transpose as ch10
    shifts = []
    for sh in studies.get(STUDY).shapes:
        again = lookup.variant_row(as_built_kernel(), tuple(sh), PARAMS)
        first = ch10._share(KERNEL, tuple(sh), PARAMS)
        if again and first is not None:
            shifts.append(abs(lookup.share(again) - first))
    return shifts


def rows4_margin(shape=None) -> str:
    """One sentence: copy_smem at ROWS = 4 (its own run) against the worked solution at
    ROWS = 8, set against the move between runs (`run_shifts`): where the lead is smaller
    than that move, it says plainly that the difference is not established. '' where a
    rate is not recorded."""
    from gemm_kernels.notebook import ch10_transpose as ch10
    shape = shape or ch10.SQUARE
    rows = {r["kernel"]: r["% of device copy"] for r in ch10.solution_rates(shape)}
    sol = rows.get("the worked solution: every load first")
    r4 = ch10._share("copy_smem", shape, {"T": "float", "TILE": 32, "ROWS": 4})
    shifts = run_shifts()
    if sol is None or r4 is None or not shifts:
        return ""
    lead, shift = r4 - sol, max(shifts)
    verdict = ("smaller than the move between runs: the difference is not established" if lead <= shift
               else "larger than the move between runs, though timed in another run")
    return (f"copy_smem at ROWS = 4: {r4:.1f}% of the device copy, {lead:+.1f} points against "
            f"the worked solution at ROWS = 8 ({sol:.1f}%); one kernel moved by {shift:.1f} "
            f"points between two runs, so the lead is {verdict}.")
