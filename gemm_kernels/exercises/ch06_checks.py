"""Chapter 06's static checks: the products followed, and a note on the widths of the
inner loop's shared loads.

`product_problems` follows the outer product before anything runs, with chapter 05's
trace (`ch05_checks.trace_products`): acc[i][j] of thread (tc, tr) is row tr*TM + i,
column tc*TN + j of the C tile, and must add As[that row][k] * Bs[k][that column] once
for every k; a wrong index is named with its thread, the element it read and the one it
needed, as in chapters 03 and 05.

The note: which widths the inner loop's shared loads have.

The grader's static step asks for LDS.128 somewhere in the SASS and bounds the shared
loads per FFMA (`ch05_checks.shared_loads_per_ffma`). Neither says which operand reads
128 bits at a time: with the k loop left rolled, B's TN values still come as LDS.128
while A's TM values come one 32-bit LDS each, and the bound still holds (TM + TN loads
per TM * TN FFMA). So the report says what the loop holds, per width, and that the speed
step is the one that judges a rolled loop; it refuses nothing itself.
"""
from __future__ import annotations

import re
from typing import Callable

from gemm_kernels.exercises import ch05_checks
from gemm_kernels.exercises.ch05_checks import between_barriers, opcodes
from gemm_kernels.exercises.stubs import STUB
from gemm_kernels.exercises.submission import submission_sass


def load_widths(sass: str) -> dict[str, int]:
    """The shared loads between the two barriers, by opcode: {'LDS.128': 48, 'LDS': 0}."""
    ops = [op for op in between_barriers(opcodes(sass)) if re.fullmatch(r"LDS(\.\w+)*", op)]
    return {"LDS.128": ops.count("LDS.128"),
            "LDS": sum(op != "LDS.128" for op in ops)}


ROLLED_K = re.compile(r"#pragma\s+unroll\s+1\s*\n\s*for\s*\(\s*int\s+k\b")


def widths_words(widths: dict[str, int], rolled: bool = False) -> str:
    """The note of the static step, from `load_widths`. `rolled`: the submission keeps
    its k loop rolled (`#pragma unroll 1`), which explains narrow reads of A; otherwise
    the narrow reads come from an index the compiler cannot prove aligned, and the note
    points at the indices rather than at a loop."""
    wide, narrow = widths["LDS.128"], widths["LDS"]
    if not narrow:
        return f"the loop's {wide} shared loads are all LDS.128 (four values each)"
    head = (f"of the loop's {wide + narrow} shared loads, {wide} "
            f"{'is' if wide == 1 else 'are'} LDS.128 and {narrow} "
            "narrower (one or two values each): ")
    why = ("one operand is read a value at a time, as your k loop, left rolled, reads A"
           if rolled else
           "one operand is read 32 bits at a time although your k loop is unrolled: the "
           "compiler could not prove 4 neighbouring, 16-byte-aligned words for it; check "
           "the column index of your Bs reads and the row index of your As reads")
    return (head + why + "; step 2 bounds the loads per FFMA only, and whether the narrow "
            "loads cost time is for the speed step (4) to judge")


def shared_load_widths(exercise: str, kernel: str, params: dict) -> Callable[[str], list[str]]:
    """A static check that refuses nothing and notes the widths of the loop's shared
    loads (see the module's docstring)."""
    def check(source: str) -> list[str]:
        return []

    def note(source: str) -> str:
        if STUB in source:
            return ""
        sass = submission_sass(exercise, kernel, params, source)
        return ("" if sass is None else
                widths_words(load_widths(sass), rolled=bool(ROLLED_K.search(source))))

    check.__name__ = f"shared_load_widths_{exercise}"
    check.note = note
    return check


def correct_hint(detail: str) -> str:
    """06_tile_2d_reg's hint for a failed step 3, by the kind of failure: an access
    outside an array (on the CPU AddressSanitizer, or a crash; on a GPU an illegal
    address), or wrong numbers."""
    if re.search(r"invalid memory|SEGV|outside the shared array|illegal address|ended with code",
                 detail):
        return ("the kernel read or wrote outside an array, most likely an index into As or "
                "Bs past the end of the tile: check the line the message names, which of "
                "tr and tc goes with As (rows, times TM) and which with Bs (columns, times TN)")
    return ("the message names a shape and its worst element. Find that element's place in "
            "a thread's TM x TN patch: a whole row of the patch wrong points at the read of "
            "a[], a whole column at b[], everything wrong (even at 1x1x1) at the k index or "
            "the accumulation")


def _consts(params: dict) -> dict:
    p = params
    return {"BM": p["BM"], "BN": p["BN"], "BK": p["BK"], "TM": p["TM"], "TN": p["TN"],
            "NT": (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])}


def product_problems(source: str, params: dict) -> list[str]:
    """The first output of the patch whose products are wrong, named with its thread,
    what it read and what it needed (see the module's docstring); empty when every output
    adds each k of the tile once, or when the source says something the trace does not
    read (step 3 then compares the numbers). The thread's place (tc, tr) is read from the
    kernel's own lines `tr = ...;` and `tc = ...;`. Traced: the first row and the first
    column of the thread grid and the last thread, which meet every index that is linear
    in tr and tc, at a fraction of the time of every thread."""
    from gemm_kernels.exercises.cexpr import (ExpressionError, code_only, compile_expression,
                                              initializers)
    if STUB in source:
        return []
    code, consts = code_only(source), _consts(params)
    found = [initializers(code, name) for name in ("tc", "tr")]
    if any(len(f) != 1 for f in found):
        return []
    try:
        f_tc, f_tr = (compile_expression(f[0], ("threadIdx.x", *consts)) for f in found)
        places = [(f_tc({"threadIdx.x": t, **consts}), f_tr({"threadIdx.x": t, **consts}))
                  for t in range(consts["NT"])]
    except (ExpressionError, ZeroDivisionError):
        return []
    TM, TN = params["TM"], params["TN"]
    threads = [t for t, (tc, tr) in enumerate(places) if tc == 0 or tr == 0]
    threads.append(len(places) - 1)
    try:
        return ch05_checks.trace_products(
            source, consts, places, (TM, TN),
            lambda index, tc, tr: (tr * TM + index[0], tc * TN + index[1]), threads)
    except (ch05_checks.Unread, KeyError, ZeroDivisionError):
        return []


def products_followed(exercise: str, params: dict) -> Callable[[str], list[str]]:
    """Exercise 06's check of the outer product (see `product_problems`)."""
    return ch05_checks.products_followed(exercise, params, product_problems)
