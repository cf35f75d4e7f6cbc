"""The exercises: for each chapter, which registry kernel the student's source stands in
for, the configuration graded, what the static step looks for, the speed asked for.

The student's source keeps the kernel's name and template parameters, so the registry's
tunables, validation, launch geometry, checker and timing harness serve it unchanged.
Its solution lives in `notebooks/solutions/`, inside nbgrader's solution markers; the
chapter's notebook holds the same cell with those regions replaced by TODO comments.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from gemm_kernels.exercises import ch06_checks
from gemm_kernels.exercises import (ch00_checks, ch01_checks, ch02_checks, ch03_checks,
                                    ch04_checks, ch10_checks, ch11_checks, ch14_checks,
                                    ch15_checks)
from gemm_kernels.exercises.ch05_checks import (products_followed, shared_loads_per_ffma,
                                                thread_mapping)
from gemm_kernels.exercises.ch07_checks import all_loads_128, right_at
from gemm_kernels.exercises.ch08_checks import prefetch_in_flight, race_hint
from gemm_kernels.exercises.ch09_checks import pipeline_hint, zorder_hint, zorder_lanes
from gemm_kernels.measure.check import RAGGED_SHAPES, TRANSPOSE_SHAPES



@dataclass(frozen=True)
class Exercise:
    """One graded kernel.

    kernel: the registry entry the submission replaces (and the reference it is timed
        against: the chapter's own kernel, at the same configuration).
    params: the configuration graded.
    sass: opcodes that must appear in the submission's SASS (the chapter's point).
    max_registers: registers per thread allowed; spills are never allowed.
    speed: the fraction of the reference kernel's rate the submission must reach,
        both timed in one process, interleaved with cuBLAS.
    static_checks: further checks of the source without a GPU (e.g. the bank model on
        the student's shared-memory index); each returns problems, empty when fine.
    hints: a hint per step ("compile", "static", "correct", "speed"), shown on failure: a
        text, or a function of the failure's detail returning the text.
    time_size / time_shape: step 4 times at time_size cubed (a GEMM) or squared (a copy),
        or at time_shape where the kernel takes only some shapes (a matrix-vector product).
    racecheck: also run the submission once under compute-sanitizer's racecheck (where
        the CUDA toolkit provides it); a shared-memory hazard fails step "correct" even
        when the numbers came out right this time.
    also: further launches step 3 checks after the graded ones, each (a change of
        params, shape, alpha, beta): a configuration other than the graded one (a slip
        that one configuration hides) or an alpha/beta pair the usual ones miss.
    """
    name: str
    chapter: str
    title: str
    kernel: str
    params: dict
    sass: tuple[str, ...] = ()
    max_registers: int = 255
    speed: float = 0.9
    static_checks: tuple[Callable[[str], list[str]], ...] = ()
    shapes: tuple = tuple(RAGGED_SHAPES)
    time_size: int = 2048
    time_shape: tuple = ()
    hints: dict = field(default_factory=dict)
    racecheck: bool = False
    also: tuple = ()


EXERCISES: dict[str, Exercise] = {}


def register(e: Exercise) -> Exercise:
    if e.name in EXERCISES:
        raise ValueError(f"exercise {e.name!r} registered twice")
    EXERCISES[e.name] = e
    return e


def get(name: str) -> Exercise:
    try:
        return EXERCISES[name]
    except KeyError:
        raise ValueError(f"no exercise named {name!r}; the exercises are "
                         f"{', '.join(sorted(EXERCISES))}") from None


# ---------------------------------------------------------------- chapter 01
register(Exercise(
    name="01_index", chapter="01", title="the thread -> (row, col) index",
    kernel="naive", params={"BLOCK": 32, "MAPPING": "x->col"},
    # Both mappings, without a GPU: each covers C once and runs the way it says, and the
    # dot product uses each matrix's own row stride.
    static_checks=(ch01_checks.index_check,),
    hints={"compile": "keep the kernel's name and template parameters as given; row and col "
                      "are declared already: assign them (row = ...;), do not declare them "
                      "again",
           # Step 2 has checked the mapping, the subscripts and the loop where it could
           # read them: the hint names what is left.
           "correct": "step 2 checks row, col, the subscripts and the loop over k where it "
                      "can read them; what is left: acc starts at 0 and gets one product "
                      "per k, and C is written once, inside if (row < M && col < N)",
           "speed": "with X_TO_COL = 1, neighbouring lanes (threadIdx.x) must get "
                    "neighbouring columns, so that a warp reads B in one piece"},
))


# ---------------------------------------------------------------- chapter 00

# A copy moves bytes and nothing else, so its rate is the memory's: timed at 8192 x 8192
# floats (256 MiB each way, far beyond the L2) next to the chapter's copy and the device
# copy, in one run on one GPU. No test shape reaches 2^31 elements, so the 64-bit offsets
# the exercise asks for are checked in the compiled code (ch00_checks).
_COPY = {"T": "float", "TILE": 32, "ROWS": 4}


def _copy_correct_hint(detail: str, tile: int = _COPY["TILE"]) -> str:
    """Exercise 00's step-3 hint, for the failure found: a read or write outside the
    arrays asks for the bound; a race asks how far a thread's row moves per pass;
    elements left unwritten (NaN) are placed in their block and tile, as a question,
    so that no failure is answered with the whole index."""
    if "outside" in detail:
        return ("the tiles at the right and bottom edges stick out of the matrix: a thread "
                "whose element (r, c) is outside it must copy nothing. Which two "
                "comparisons say that (r, c) is inside a rows x cols matrix?")
    if "data race" in detail:
        return (f"each element must be copied by one thread only. A block has {tile} x "
                f"ROWS threads for a {tile} x {tile} tile: while one row of threads copies "
                "tile row j, the other rows of threads copy other tile rows. By how many "
                "rows must a thread move between two of its copies so that it lands on "
                "a row no other thread takes?")
    offset = ("A row of `in` and of `out` is `cols` elements long, whatever the tile and "
              "the block; the input and the output use the same offset.")
    found = re.search(r"([\d,]+) elements? wrong, ([\d,]+) NaN", detail)
    counts = [None, *(int(g.replace(",", "")) for g in found.groups())] if found else None
    moved = (f" {counts[1] - counts[2]:,} other elements hold a value that belongs "
             "elsewhere: the offset went wrong for them too." if counts
             and counts[1] > counts[2] else "")
    m = re.search(r"worst at \((\d+), (\d+)\)", detail)
    unwritten = counts[2] > 0 if counts else "NaN" in detail
    if m and unwritten:
        r, c = int(m[1]), int(m[2])
        return (f"NaN: element ({r}, {c}) of the output was never written. It lies in the "
                f"tile of the block with blockIdx = ({c // tile}, {r // tile}), at row "
                f"{r % tile}, column {c % tile} of that tile. Which thread of that block "
                f"should copy it, on which pass of its loop, and which offset did that "
                f"thread use? {offset}{moved}")
    return f"the values landed in the wrong places: which offset did your threads use? {offset}"


register(Exercise(
    name="00_copy", chapter="00", title="the tiled copy kernel",
    kernel="copy", params=_COPY,
    # Without a GPU: the offsets are 64-bit (read from the PTX), and a warp's loads and
    # stores touch no more sectors than 32 neighbouring floats (the text run on the CPU).
    static_checks=(ch00_checks.offsets_64bit("00_copy", "copy", _COPY),
                   ch00_checks.lanes_coalesced(_COPY)),
    shapes=tuple(TRANSPOSE_SHAPES), time_size=8192,
    hints={"compile": "keep the kernel's name and template parameters as given",
           "correct": _copy_correct_hint,
           "speed": "neighbouring lanes (threadIdx.x) must copy neighbouring elements of "
                    "a row, so that a warp reads and writes 128 consecutive bytes"},
))


# ---------------------------------------------------------------- chapter 02
register(Exercise(
    name="02_coalesced", chapter="02", title="the coalesced thread -> element mapping",
    kernel="coalesced", params={"BLOCK": 32, "GRID": "x->row"},
    # Without a GPU: the mapping covers C once, and no warp's loads touch more 128-byte
    # lines than the chapter's mapping (the swapped mapping touches 33 instead of 2).
    static_checks=(ch02_checks.coalesced_check,),
    hints={"correct": "row = the tile's first row + threadIdx.x / BLOCK and col = the "
                      "tile's first column + threadIdx.x % BLOCK cover every element of "
                      "the tile once",
           "speed": "consecutive threadIdx.x must give consecutive columns (col from "
                    "threadIdx.x % BLOCK): then a warp reads one A element and 32 "
                    "neighbouring B elements per k"},
))


# ---------------------------------------------------------------- chapter 03
_TILE_LOOP = {"BLOCK": 32, "GRID": "x->col", "EDGES": "always"}
def _tile_loop_correct_hint(detail: str) -> str:
    """Exercise 03's step-3 hint, for the failure found: a read outside A or B asks which
    of the element's two indices the copy leaves unchecked; a race points at the
    barriers; a wrong value places the element of C in its block and thread."""
    bounds = {"A": ("its row must be below M", "its column (along K) below K"),
              "B": ("its row (along K) must be below K", "its column below N")}
    m = re.search(r"outside ([ABC])\b", detail)
    if m and m[1] in bounds:
        first, second = bounds[m[1]]
        return (f"an element of {m[1]} exists only where {first} and {second}. On this "
                "small shape the tile sticks out of the matrix, and the last step along K "
                f"runs past K: which of the two does your copy from {m[1]} not check "
                "before it reads?")
    if m:
        return ("only threads whose (row, col) lies inside C may store: the store after "
                "the loop is given, so look at what your loop writes")
    if "race" in detail:
        return ("a barrier is missing or skipped: every thread of the block, inside C or "
                "not, must reach both __syncthreads() of every step (no early return)")
    if "worst at" in detail:
        return ("'worst at (r, c)' is C[r][c], computed by thread tx = c % 32, ty = r % 32 "
                "of the block blockIdx = (c / 32, r / 32), and |err|/bound above 1 is a "
                "wrong value, not rounding. Step 2 has followed every product of an "
                "interior block, so look at what differs at the edges of this small shape: "
                "which elements of the tiles that thread's block fills there, with 0.f "
                "where the element lies outside the matrix. Did threads outside C skip "
                "their copies or a barrier?")
    return ("step 2 has followed every product of an interior block: look at the edges of "
            "this small shape, where the tiles stick out of the matrices")


register(Exercise(
    name="03_tile_loop", chapter="03", title="the tile loop and its two barriers",
    kernel="smem_tiled", params=_TILE_LOOP,
    sass=("BAR.SYNC",),
    static_checks=(ch03_checks.two_barriers("03_tile_loop", "smem_tiled", _TILE_LOOP),
                   ch03_checks.copies_priced(_TILE_LOOP["BLOCK"]), ch03_checks.early_exit,
                   ch03_checks.divergent_barrier),
    # Step 2's checks each end their message with what to look at, so the step has no
    # hint of its own: one text for all of them would point at the wrong thing.
    hints={"correct": _tile_loop_correct_hint,
           "speed": "copy with threadIdx.x along a row of A and of B, so a warp's loads "
                    "are consecutive addresses; read As[ty][k] and Bs[k][tx]"},
))


# ---------------------------------------------------------------- chapter 04

# Graded against the chapter's fastest layout: `conflict` (k along the rows of both
# tiles), PAD = 2.
_LAYOUT = {"BLOCK": 32, "LAYOUT": "conflict", "PAD": 2}
register(Exercise(
    name="04_tile_layout", chapter="04",
    title="choose the layout of the dot-product tiles",
    kernel="bank_layout", params=_LAYOUT,
    static_checks=(ch04_checks.tile_layout_check(32, "04_tile_layout", "bank_layout",
                                                 _LAYOUT),),
    hints={"static": ch04_checks.tile_layout_hint,
           "speed": "the reads run at every k: the fewer wavefronts they cost together, "
                    "the faster the step; a conflict-free layout whose reads stay 32-bit "
                    "costs more than a wide one with a 2-way conflicted store"},
))


# ---------------------------------------------------------------- chapter 05

# graded at the registry's default configuration
_TILE_1D = {"BM": 64, "BN": 64, "BK": 16, "TM": 16}

# What step 2 says when the compiled loop, not the mapping, is at fault.
_SASS_FAILURES = ("no LDS.128", "spill", "shared loads (LDS)", "no FFMA between",
                  "registers per thread")


def _tile_1d_static_hint(detail: str) -> str:
    """Exercise 05's step-2 hint: the advice to unroll, only where the failure is about
    the compiled loop; the mapping's and the products' messages say what to change."""
    if not any(s in detail for s in _SASS_FAILURES):
        return ""
    # Two reasons, one per loop: a rolled k loop alone keeps acc[] in registers (the
    # chapter's appendix G), so "both loops for acc[]" would be false.
    return ("unroll the i loop (#pragma unroll) so that every index of acc[] is known and "
            "acc[] stays in registers; unroll the k loop so that the reads of A along k "
            "merge into LDS.128 and each value of B is loaded once for TM products")

register(Exercise(
    name="05_tile_1d", chapter="05", title="which outputs each thread computes",
    kernel="tile_1d", params=_TILE_1D,
    sass=("LDS.128",),
    static_checks=(
        # The mapping (tc, tr): every output to one thread; one step of every warp priced
        # with the bank model (A read as a broadcast, B conflict-free: 144 wavefronts at
        # this configuration); the stores of C in as few sectors as a warp can use.
        thread_mapping("05_tile_1d", _TILE_1D),
        # The loop of products followed for every thread with its own (tc, tr): the first
        # output that adds a wrong product, or misses a k, named with its thread.
        products_followed("05_tile_1d", _TILE_1D),
        # The loop: per k, one value of B and TM values of A for TM FFMA, (TM + 1) / TM
        # loads per FFMA at most. Once both loops are unrolled the compiler keeps B's
        # value in a register whichever loop is outside; a k loop left rolled inside the
        # i loop reads both operands for every FFMA (2 per FFMA).
        shared_loads_per_ffma(
            "05_tile_1d", "tile_1d", _TILE_1D, 17, 16,
            "per k, one value of B and TM values of A for TM FFMA"),),
    # The mapping's and the products' messages carry their own guidance; the hint answers
    # only what the SASS shows (no LDS.128, spills, too many shared loads per FFMA).
    hints={"static": _tile_1d_static_hint,
           "correct": "'worst at (r, c)' is C[r][c]: row r % 64, column c % 64 of the C tile "
                      "of block blockIdx = (c / 64, r / 64), i.e. acc[r % 16] of the thread "
                      "whose tc is c % 64 and tr is (r % 64) / 16; |err|/bound is its error "
                      "over the rounding error a right sum of K products may have (above 1: "
                      "a wrong value, not rounding). Step 2 has followed the products of every "
                      "thread where it could read your loop; if it could not (a helper, a "
                      "pointer, an fmaf), write the loop as acc[..] += <read> * <read>; and "
                      "run the cell again to have that output's products named",
           "speed": "unroll both loops; the mapping passed the bank check, so look for "
                    "extra work in the loop"},
))


# ---------------------------------------------------------------- chapter 06
def _tile_2d_static_hint(detail: str) -> str:
    """Exercise 06's step-2 hint: for a cell still holding its marker, where to start; for
    a wrong product, where to look in the message; for the compiled loop, what to count."""
    if "delete the marker" in detail:
        # nothing written yet: the rest of the message describes an empty loop
        return ("write the work on one pair of tiles first; Hint 1 above is about the order "
                "of the loops")
    if "of the C tile is acc" in detail:
        return ("the message names one output of the thread's patch, the two values its "
                "product read and the two it needed: compare the index of the read it says "
                "is wrong with that output's row and column (the stores of C at the end of "
                "the kernel say which output acc[i][j] is)")
    if "kept rolled" in detail:
        return ("a loop whose counter the compiler knows only at run time cannot index an "
                "array held in registers: find the loop of your products that is not "
                "unrolled (a #pragma unroll 1, or a bound that is not a constant)")
    return ("the message says what the compiled loop lacks. Count the values of As and Bs "
            "one k needs (TM and TN) against the shared loads it names; an array keeps to "
            "registers only where the compiler knows every index when it compiles")


# graded at the registry's default configuration
_TILE_2D_REG = {"BM": 64, "BN": 128, "BK": 16, "TM": 8, "TN": 4}
register(Exercise(
    name="06_tile_2d_reg", chapter="06", title="register caching of the A and B fragments",
    kernel="tile_2d_reg", params=_TILE_2D_REG,
    sass=("LDS.128",),
    static_checks=(
        # The outer product followed with chapter 05's trace: the first output that adds
        # a wrong product, or misses a k, named with its thread, what it read and what
        # it needed.
        ch06_checks.products_followed("06_tile_2d_reg", _TILE_2D_REG),
        # Per k, TM + TN values read for TM * TN FFMA: 12 for 32 at 8 x 4. The
        # inner-product order (each output's dot product on its own) reads 2 per FFMA.
        shared_loads_per_ffma(
            "06_tile_2d_reg", "tile_2d_reg", _TILE_2D_REG,
            8 + 4, 8 * 4, "per k, TM + TN values read into registers, then TM*TN FFMA"),
        ch06_checks.shared_load_widths("06_tile_2d_reg", "tile_2d_reg", _TILE_2D_REG)),
    # The hints point at what the message found, not at the answer (the chapter leaves
    # the loop order and the unrolling to the student).
    hints={"static": _tile_2d_static_hint,
           "correct": ch06_checks.correct_hint,
           "speed": "step 2 passed, so the loads per FFMA are right: look at what the loop "
                    "does besides them (a loop left rolled keeps its counter, compare and "
                    "branch, and step 2's note says whether some shared loads are narrower "
                    "than LDS.128)"},
))


# ---------------------------------------------------------------- chapter 07


def _float4_correct_hint(detail: str) -> str:
    """07_float4's hint for a failed step 3, by the kind of failure: a misaligned float4
    (on a GPU, or UndefinedBehaviorSanitizer on the CPU), an access outside an array
    (AddressSanitizer on the CPU, an illegal address on a GPU) or
    wrong numbers with nothing outside (a value in the wrong place of As or Bs)."""
    if "misaligned" in detail:
        return ("a float4 at an address that is not a multiple of 16 bytes: the float4's "
                "first element must start a group of four (k and n multiples of 4)")
    # AddressSanitizer names the array when it can tell which one the read ran past,
    # else it says "invalid memory"
    if re.search(r"of 16 bytes (outside [AB]\b|to invalid memory)", detail):
        return ("a float4 read ran past the end of the array. Two causes: the bounds "
                "test leaves out the row (a row of A at or beyond M, of B at or beyond K is "
                "read), or it lets a group of four start too close to the end of its row. "
                "(A group that does not start at a multiple of 4, a first k or n without its "
                "* 4, is reported as a misaligned address instead, on a GPU and on the CPU)")
    if "outside" in detail or "illegal address" in detail or "invalid memory" in detail:
        return ("the message names the array and, on the CPU, the line of your cell: check "
                "that line's index and its bounds test, for all four floats of the float4")
    return ("nothing was read or written outside the arrays, so a value lands in the wrong "
            "place of As or Bs, or is read from the wrong one: compare your stores with the "
            "layout comments at their declarations (which of v.x .. v.w goes to which k?), "
            "and your reads with the patch of the thread (rows tr*TM.., columns tc*TN..)")


def _float4_static_hint(detail: str) -> str:
    """07_float4's hint for a failed step 2: only the parts that fit what failed (a
    mapping right at the graded BK alone, loads narrower than 128 bits, or else)."""
    parts = []
    if "but wrong with BK" in detail:
        parts.append("check your m and k by hand at BK = 16: a row of the A tile then holds "
                     "four float4s, so float4 number f = 5 lies in row m = 1 and starts at "
                     "k = 4")
    if "narrower than 128 bits" in detail:
        parts.append("a float4 read from global memory is one 128-bit load only where the "
                     "compiler can prove its address 16-byte aligned; four floats read from "
                     "shared memory become one LDS.128 only where they are neighbours, read "
                     "together")
    return "; ".join(parts) or "each problem above says what failed and what to change"


# graded at the registry's default configuration
_FLOAT4 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
register(Exercise(
    name="07_float4", chapter="07", title="float4 loads and the transposed A store",
    kernel="float4", params=_FLOAT4,
    # A and B arrive by 128-bit read-only loads, B's float4 is stored whole, the
    # operands leave shared memory 128 bits at a time.
    sass=("LDG.E.128.CONSTANT", "LDS.128", "STS.128"),
    # Also at BK = 16 (the sweep's best depth): a float4 -> (m, k) mapping written for
    # BK = 8 alone must not pass.
    static_checks=(all_loads_128("07_float4", "float4", _FLOAT4),
                   right_at("07_float4", "float4", _FLOAT4, {**_FLOAT4, "BK": 16})),
    hints={"static": _float4_static_hint,
           "correct": _float4_correct_hint,
           "speed": "every shared-memory read of the inner loop should be an LDS.128"},
))


# ---------------------------------------------------------------- chapter 08

def _double_buffer_static_hint(detail: str) -> str:
    """08_double_buffer's hint for a failed step 2, by what the check found: a missing
    prologue barrier, loads that sank to their store, or anything else."""
    if "between the prologue and the K loop" in detail:
        return ("after the prologue's store into stage 0, every thread must wait until all "
                "others have stored their part: one __syncthreads() before the loop starts")
    if "not in flight long enough" in detail:
        return ("the strip above is your loop as compiled: L marks your global loads, u their "
                "first use. L next to u at the end of the trip means ptxas moved the loads "
                "down to the store; the chapter's listing under 'Where the compiler put the "
                "loads' shows the same thing for its own kernel. Still stuck: the section "
                "'Why the loads sank', after the exercise, takes that kernel apart one "
                "change at a time")
    return ("each problem above says what failed in the compiled loop and what to change; "
            "the chapter's listing under 'Where the compiler put the loads' shows how to "
            "find the LDGs and their first use in the SASS")


# The chapter's default tile. 128 registers per thread let two blocks of 256 threads
# share an SM (65,536 registers), as chapter 07's kernel and chapter 08's own do.
_DOUBLE_BUFFER = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
register(Exercise(
    name="08_double_buffer", chapter="08", title="a double buffer whose loads stay in flight",
    kernel="double_buffer", params=_DOUBLE_BUFFER,
    sass=("LDG.E.128", "LDS.128", "BAR.SYNC"), max_registers=128,
    static_checks=(prefetch_in_flight("08_double_buffer", "double_buffer", _DOUBLE_BUFFER),),
    racecheck=True,
    hints={"compile": "keep the kernel's name, template parameters and the given helpers; "
                      "call them with their template arguments, e.g. "
                      "fetch_tiles<BM, BN, BK, NT, VEC>(...)",
           "static": _double_buffer_static_hint,
           "correct": race_hint,
           "speed": "timed against the chapter's kernel at the same tile: keep the loads "
                    "in flight (step 2) and the two blocks per SM that 128 registers allow"},
))


# ---------------------------------------------------------------- chapter 09
register(Exercise(
    name="09_zorder", chapter="09", title="the z-order lane mapping",
    kernel="zorder", params={"BM": 128, "BN": 128, "BK": 8, "PAD": 4, "ZORDER": True},
    sass=("LDS.128",), static_checks=(zorder_lanes,),
    hints={"compile": "keep the kernel's name and template parameters; write qr and qc "
                      "as plain integer expressions",
           "static": zorder_hint,
           "correct": "every thread needs its own (qr, qc): 4 rows per warp down the grid "
                      "(warp / WARPS_N), 8 columns across (warp % WARPS_N)",
           "speed": "the bank check passed, so look for extra work in qr and qc"},
))

from gemm_kernels.exercises.ch09_checks import (pipeline_correct_hint,  # noqa: E402
                                                 pipeline_step)

# graded at the registry's default configuration (the sweep's fastest on the H200)
register(Exercise(
    name="09_capstone_step", chapter="09", title="one iteration of the cp.async pipeline",
    kernel="capstone",
    params={"BM": 128, "BN": 128, "BK": 16, "WM": 32, "WN": 64, "STAGES": 4, "GROUP": 1,
            "MINB": 1, "HOIST": True},
    # the copies bypass the registers (LDGSTS), close groups (LDGDEPBAR), are waited for
    # (DEPBAR) and shared by the barrier
    sass=("LDGSTS", "LDGDEPBAR", "DEPBAR", "BAR.SYNC"),
    static_checks=(pipeline_step,),
    hints={"compile": "keep the kernel's name, template parameters and the given helpers "
                      "(issue_next, issue_tile, cp_async_commit, cp_async_wait<count>)",
           "static": pipeline_hint,
           "correct": pipeline_correct_hint,
           "speed": "issue the copies at k == 0 so that they fly during the whole "
                    "iteration, and let the wait hold up only for the next tile"},
))


# ---------------------------------------------------------------- chapter 10

# The chapter's copy kernel sends three of a thread's four loads before its first store,
# and the fourth after it: two round trips to memory where one would do. The student's
# copy must send all TILE / ROWS loads first, read from the SASS at the graded ROWS and
# at ROWS = 4 (eight loads), so that no count is written in by hand. Timed at 8192 x 8192
# floats beside the chapter's copy: no slower than it (the GPU it runs on may already
# reach its memory's rate with fewer loads in flight, so more is not asked for).
_IN_FLIGHT = {"T": "float", "TILE": 32, "ROWS": 8}
_IN_FLIGHT_ORDER = ("a store (STG) needs the value it writes, so a thread stops at its first "
                    "store until that value has come back: only the loads sent before it "
                    "travel together. Read the order in the message: which loads come after "
                    "a store?")
_IN_FLIGHT_PLACE = ("element i of the thread is row blockIdx.y * TILE + threadIdx.y + "
                    "i * ROWS, column blockIdx.x * TILE + threadIdx.x; load and store only "
                    "where both lie inside the matrix")


_IN_FLIGHT_VALUES = ("no access left the matrix, but values landed in the wrong place: each "
                     "value stored at (r, c) of `out` must be the one loaded from (r, c) of "
                     "`in`, and element i of the thread is in row r0 + i * ROWS")
_IN_FLIGHT_PTXAS = ("the order of your source is right; the SASS is ptxas's schedule of it, and "
                    "ptxas moves a store ahead of the last loads when it computes the addresses "
                    "its own way: give every access the offset (size_t)r * cols + c, as the "
                    "chapter's copy does")


def _in_flight_hint(detail: str) -> str:
    """Step 2 of 10_in_flight: a kernel that is wrong as well as out of order is reported
    as wrong (the CPU emulation's finding), so its hint is about the elements and the
    bounds, not about the order of loads and stores; a source whose order is right but
    whose SASS is not (ptxas moved a store up) gets the hint about its offsets; the order
    hint only comes with a message about the order."""
    if "does not copy yet" in detail:
        return _IN_FLIGHT_PLACE
    if "ptxas moved a store up" in detail:
        return _IN_FLIGHT_PTXAS
    # the order hint only where the message is about the order (not under the unwritten
    # stub, nor under spills, whose message says what is wrong)
    return _IN_FLIGHT_ORDER if "before its first store" in detail else ""


def _in_flight_correct_hint(detail: str) -> str:
    """Step 3 of 10_in_flight: an access outside the matrix gets the hint about the bounds;
    wrong values with every access inside get the hint about which value goes where (the
    bounds hint would send the student the wrong way)."""
    return _IN_FLIGHT_PLACE if "outside" in detail else _IN_FLIGHT_VALUES


register(Exercise(
    name="10_in_flight", chapter="10", title="a copy with all its loads in flight",
    kernel="copy", params=_IN_FLIGHT, speed=0.97,
    static_checks=(ch10_checks.loads_in_flight("10_in_flight", "copy", _IN_FLIGHT,
                                               also=({"ROWS": 4},)),),
    shapes=tuple(TRANSPOSE_SHAPES), time_size=8192,
    hints={"compile": "keep the kernel's name and template parameters as given",
           "static": _in_flight_hint,
           "correct": _in_flight_correct_hint,
           "speed": "neighbouring lanes (threadIdx.x) must take neighbouring columns, so "
                    "that each load and store of a warp is 128 consecutive bytes"},
))


# ---------------------------------------------------------------- chapter 11

_DGEMM_BANKS = ("in each phase (16 lanes of an LDS.64 or STS.64, 8 lanes of an LDS.128) the "
                "lanes must use different banks as wide as the access (byte address / width, "
                "modulo 128 / width) or share an element; ptxas reads k and k + 1 with one "
                "LDS.128 where your rows keep them side by side and 16-byte aligned")
_DGEMM_PLACE = ("B_shared[threadIdx.x][c] must hold B[tile * BLOCK + threadIdx.y][col], and the "
                "read at k must find the element the thread with threadIdx.y = k stored; 0.0 "
                "outside the matrices")


def _dgemm_hint(detail: str) -> str:
    """Step 2 of 11_dgemm: a layout that puts elements in the wrong place (not the row of
    threadIdx.x, two in one slot, a read that misses the store, outside the tile) gets the
    mapping hint; one that is placed right but conflicts gets the banks hint."""
    where = ("stores B transposed", "in the same slot", "but the store put", "outside the tile")
    return _DGEMM_PLACE if any(w in detail for w in where) else _DGEMM_BANKS


register(Exercise(
    name="11_dgemm", chapter="11", title="a transposed tile of doubles without bank conflicts",
    kernel="dgemm_tiled", params={"BLOCK": 16},
    static_checks=(ch11_checks.tiles_64bit(16, "11_dgemm", "dgemm_tiled", {"BLOCK": 16}),),
    hints={"compile": "keep the kernel's name and template parameters as given",
           "static": _dgemm_hint,
           "correct": _DGEMM_PLACE,
           "speed": "keep the two barriers and the unrolled inner loop"},
))


# ---------------------------------------------------------------- chapter 12

# The N == 1 path of chapter 12's matrix-vector product: a warp per row of A, float4
# loads along the row, a shuffle reduction. Graded on matrix-vector shapes only (the
# kernel takes no other), ragged K included (the scalar path) and both paths (M == 1 runs
# the given COLS path), with K in up to 4 slices where K is long enough, so that a loop
# over all of K instead of the block's slice fails; timed at 8192 x 1 x 8192: a 256 MiB
# matrix, far beyond the L2.
GEMV_SHAPES = ((1, 1, 1), (7, 1, 13), (1, 13, 5), (33, 1, 517), (127, 1, 1024),
               (1000, 1, 1000), (4097, 1, 515), (1, 1023, 515), (2049, 1, 20000))

# The plain (non-VEC) N == 1 path at a K that is not a multiple of 4 and spans several
# 128-element chunks, so that it is split: the CPU's own shapes run that path only with
# one slice, where a scalar loop over all of K instead of KS would not show.
GEMV_ALSO = (({}, (5, 1, 261), 1.0, 0.0),)


def _gemv_hint(detail: str) -> str:
    """Step 2 of 12_gemv: a nudge toward what the compiled code lacks, never the answer
    (nothing while the part is not written yet: the message says so)."""
    if "YOUR CODE HERE" in detail:
        return ""
    if "SHFL" in detail:
        return ("the 32 partial sums must meet without shared memory: a warp shuffle hands "
                "a lane the value another lane holds")
    if "LDG.E.128" in detail:
        return "on the VEC path a lane can read 4 consecutive floats of its row at once"
    return ""


def _gemv_correct_hint(detail: str) -> str:
    """Step 3 of 12_gemv: what the failure's kind points at."""
    m = re.search(r"at (\d+)x(\d+)x(\d+)", detail)
    if m and m.group(1) == "1" and m.group(2) != "1":
        return "at M == 1 the given path runs: look at what your part changed outside its branch"
    if "outside" in detail:
        return ("an access past the row or the vector: the block's slice starts at a and x "
                "and is KS elements long, not K")
    return ("either some elements are added twice or missed (does each lane's step match how "
            "many elements a warp reads at once?), or the 32 partial sums are not all "
            "combined (after your rounds, does lane 0 hold every lane's share?)")


register(Exercise(
    name="12_gemv", chapter="12", title="a warp per row: the matrix-vector product",
    kernel="gemv", params={"SPLIT": 4}, sass=("SHFL", "LDG.E.128"), speed=0.9,
    shapes=GEMV_SHAPES, time_shape=(8192, 1, 8192), also=GEMV_ALSO,
    hints={"compile": "keep the kernel's name and template parameters as given",
           "static": _gemv_hint,
           "correct": _gemv_correct_hint,
           "speed": "a warp should read 512 contiguous bytes per step (a float4 per lane) "
                    "and keep several loads in flight (the loop is unrolled by 4)"},
))


# Chapter 13: whole 16 x 16 tiles only (the naive WMMA kernel's shape rule); several
# blocks in each direction, a warp past N, one deep K.
WMMA_SHAPES = ((16, 16, 16), (32, 48, 64), (48, 80, 32), (64, 16, 1024), (1024, 1024, 1024),
               (4096, 112, 528))
# Graded at 2 x 2 warps, where WM and WN swapped in the warp's index give the same
# tiles, and with alpha = 1 wherever beta == 0. Also launched with alpha != 1 at
# beta == 0 (the path that must scale the product without reading C), then with 2 x 4
# and 4 x 1 warps at shapes of several blocks each way, the last one past the edge.
WMMA_ALSO = (({}, (48, 80, 32), 2.0, 0.0),
             ({"WM": 2, "WN": 4}, (96, 144, 32), 1.5, -0.5),
             ({"WM": 4, "WN": 1}, (144, 48, 32), 1.0, 0.0))


def _wmma_correct_hint(detail: str) -> str:
    """Step 3 of 13_wmma: what the failure's kind points at."""
    if re.search(r"WM=(\d+), WN=(?!\1,)", detail):
        return ("right with 2 x 2 warps, wrong with " + re.search(r"WM=\d+, WN=\d+", detail)
                .group(0) + ": a block is WM warps along M (rows of C) by WN along N "
                "(columns); check which of the two each use of WM and WN in your tile "
                "index stands for")
    if re.search(r"alpha=(?!1\.0)[\d.]+, beta=0\.0", detail):
        return ("wrong only where alpha != 1 and beta == 0: on the path that does not read "
                "C, the product must still be scaled by alpha")
    if "lane 0 of its warp" in detail:
        return ("a fragment belongs to the whole warp, so its 32 lanes must compute the same "
                "row and col: which threads of a (32, WM * WN) block form one warp?")
    if "outside" in detail:
        return ("an access past A, B or C: is each load's leading dimension (ldm) the row "
                "length of its matrix in memory, K for A and N for B and C? Does every warp "
                "that goes on own a tile inside C, and does the walk along K stop at K?")
    if "data race" in detail:
        return ("two warps stored the same elements of C: does every tile of C get a warp of "
                "its own (do the warps of a block compute different tiles)?")
    if "NaN" in detail:
        return ("NaN in C, where the check poisons C with NaN before the launch: either some "
                "elements were never written (does every tile of C get a warp? do the warps "
                "of a block compute different tiles?), or C was read although beta == 0")
    return ("look at the layout you gave B's fragment (B is row-major in memory), the "
            "leading dimensions (A's rows are K long, B's and C's N), where each step starts "
            "in A and in B, and alpha and beta")


register(Exercise(
    name="13_wmma", chapter="13", title="a warp of tensor cores",
    kernel="wmma_naive", params={}, sass=("HMMA",), speed=0.9, shapes=WMMA_SHAPES,
    time_size=2048, also=WMMA_ALSO,
    hints={"compile": "keep the kernel's name and template parameters as given; the wmma "
                      "names live in nvcuda::wmma (the `using` line is given). An "
                      "accumulator fragment has no layout in its type: load_matrix_sync "
                      "takes it as a fourth argument, wmma::mem_row_major, as the store "
                      "does",
           "static": "the tensor cores are reached through wmma::mma_sync: without it the "
                     "SASS has no HMMA instruction",
           "correct": _wmma_correct_hint,
           "speed": "each step along K should be one load of each fragment and one "
                    "mma_sync, nothing more"},
))


# ---------------------------------------------------------------- chapter 14

def _mma_correct_hint(detail: str) -> str:
    """Step 3 of 14_swizzle (on a GPU: the kernel's PTX has no CPU emulation)."""
    return ("the kernel around chunk_at is given, so wrong numbers come from the swizzle: "
            "two chunks of a row sent to one place (not a permutation), or rows r and r + 8 "
            "permuted differently, so that the reads find other chunks than the copies "
            "stored. Step 2 checks both for CHUNKS = 4 and 16: keep the line "
            "`if constexpr (!SWIZZLE) return c;` and `return chunk;` as given")


# The shapes mma_sync takes (K and N multiples of 8: whole 16-byte chunks), with M, N and
# K past the tile's edges, a single row, one 8-deep K, and blocks partly inside the
# matrix with whole tiles along K and a ragged last one (the kernel copies the tiles
# inside the matrix and those across an edge by different code).
MMA_SHAPES = ((1, 8, 8), (7, 16, 24), (33, 72, 40), (127, 136, 264), (1000, 1000, 1000),
              (4097, 1024, 520), (300, 1032, 8), (264, 272, 200), (256, 256, 128))

# Graded at the registry's default tile (128 x 128 x 32, 2 x 2 warps, 4 stages): A rows
# of 4 chunks, B rows of 16; the student's one expression must serve both.
register(Exercise(
    name="14_swizzle", chapter="14", title="the XOR swizzle that feeds ldmatrix",
    kernel="mma_sync", params={}, sass=("HMMA", "LDSM"), shapes=MMA_SHAPES,
    static_checks=(ch14_checks.swizzle_check({}),),
    hints={"compile": "keep chunk_at's name, its template parameters <int CHUNKS, bool "
                      "SWIZZLE> and (int r, int c), and the #include of the kernel's body; "
                      "the swizzle is one line `chunk = <expression>;`",
           "static": ch14_checks.swizzle_hint,
           "correct": _mma_correct_hint,
           "speed": "timed against the chapter's kernel at the same tile: a swizzle that "
                    "passes step 2 reads without bank conflicts like the chapter's, so "
                    "look for extra work in your expression (CHUNKS is a constant the "
                    "compiler folds: prefer shifts and masks of r)"},
))


# ---------------------------------------------------------------- chapter 15

def _phases_correct_hint(detail: str) -> str:
    """Step 3 of 15_phases (on a Hopper GPU: the kernel's PTX has no CPU emulation)."""
    if "timed out" in detail:
        return ("a wait that never passes: the grader's time limit stopped the kernel. Step 2 "
                "played your two parities through the ring and found no such wait, so look "
                "at what else changed in the kernel: every consumer must arrive on empty[s] "
                "after each tile, and the producer must copy every tile")
    return ("step 2 played your two parities through the ring and found no stage read early "
            "and none overwritten, so wrong numbers come from another change to the kernel: "
            "keep the rest of it as the chapter wrote it, the two parity lines aside")


# Graded at the registry's default configuration (2 consumer warpgroups, 4 stages): the
# cell includes the chapter's file, its kernel renamed, and defines its own
# hgemm_wgmma_ws with the two parities to write; the static step plays the ring for
# STAGES = 2, 3 and 4.
register(Exercise(
    name="15_phases", chapter="15", title="the mbarrier phases of a producer/consumer ring",
    kernel="wgmma_ws", params={}, sass=("HGMMA", "UTMALDG"), shapes=MMA_SHAPES,
    static_checks=(ch15_checks.phases_check({}),),
    hints={"compile": "keep the three lines before the kernel (#define, #include, #undef), "
                      "the kernel's name hgemm_wgmma_ws, its template parameters <int "
                      "CONSUMERS, int STAGES, int GROUP> and its parameters; each parity is "
                      "one line `full_parity = <expression>;`, `empty_parity = <expression>;`",
           "static": ch15_checks.phases_hint,
           "correct": _phases_correct_hint,
           "speed": "timed against the chapter's kernel at the same configuration: the "
                    "parities cost a shift and a mask, so look for other changes to the "
                    "kernel (the register split, the arrival right after wgmma_wait)"},
))
