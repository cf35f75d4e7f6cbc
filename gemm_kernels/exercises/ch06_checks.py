"""Chapter 06's static note: which widths the inner loop's shared loads have.

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

from gemm_kernels.exercises.ch05_checks import between_barriers, opcodes
from gemm_kernels.exercises.stubs import STUB
from gemm_kernels.exercises.submission import submission_sass


def load_widths(sass: str) -> dict[str, int]:
    """The shared loads between the two barriers, by opcode: {'LDS.128': 48, 'LDS': 0}."""
    ops = [op for op in between_barriers(opcodes(sass)) if re.fullmatch(r"LDS(\.\w+)*", op)]
    return {"LDS.128": ops.count("LDS.128"),
            "LDS": sum(op != "LDS.128" for op in ops)}


def widths_words(widths: dict[str, int]) -> str:
    """The note of the static step, from `load_widths`."""
    wide, narrow = widths["LDS.128"], widths["LDS"]
    if not narrow:
        return f"the loop's {wide} shared loads are all LDS.128 (four values each)"
    return (f"of the loop's {wide + narrow} shared loads, {wide} are LDS.128 and {narrow} "
            "narrower (one or two values each): one operand is read a value at a time, as "
            "a k loop left rolled reads A; step 2 bounds the loads per FFMA only, and "
            "whether the narrow loads cost time is for the speed step (4) to judge")


def shared_load_widths(exercise: str, kernel: str, params: dict) -> Callable[[str], list[str]]:
    """A static check that refuses nothing and notes the widths of the loop's shared
    loads (see the module's docstring)."""
    def check(source: str) -> list[str]:
        return []

    def note(source: str) -> str:
        if STUB in source:
            return ""
        sass = submission_sass(exercise, kernel, params, source)
        return "" if sass is None else widths_words(load_widths(sass))

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
