"""Static checks read from the submission's SASS (chapters 05-07): what the compiled
inner loop issues, which no reading of the source can tell for sure, since the compiler
merges, hoists and widens loads on its own.

Chapter 05 and 06 ask for the shared-memory operands of the inner loop to be read once
and reused from registers: `shared_loads_per_ffma` bounds the number of shared load
instructions (LDS of any width) per FFMA by what register reuse gives with one float
per load. The compiled kernel is the one the grader's static step has just built (same
kernel, name and configuration), so the SASS comes from the compiler's cache.
"""
from __future__ import annotations

import re
from fractions import Fraction
from typing import Callable

from gemm_kernels.exercises.submission import submission_sass

_OPCODE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", re.M)


def opcodes(sass: str) -> list[str]:
    """The opcode (with its modifiers, e.g. LDS.128, LDG.E.128.CONSTANT) of every
    instruction in nvdisasm's text, in order; predicates are skipped."""
    return _OPCODE.findall(sass)


def count(sass: str, pattern: str) -> int:
    """How many instructions' opcodes match the regular expression `pattern` whole."""
    rx = re.compile(pattern)
    return sum(1 for op in opcodes(sass) if rx.fullmatch(op))


def between_barriers(ops: list[str]) -> list[str]:
    """The instructions between the first two barriers (BAR.SYNC): in the tiled kernels,
    the work on one pair of tiles, without the copies before it or the epilogue after
    the k loop (whose FFMAs, alpha * acc + beta * C, are not the inner loop's). All of
    them when there are fewer than two barriers."""
    bars = [i for i, op in enumerate(ops) if op.startswith("BAR.SYNC")]
    return ops[bars[0] + 1:bars[1]] if len(bars) >= 2 else ops


def load_ratio(sass: str) -> tuple[int, int]:
    """(shared load instructions of any width, FFMA instructions) between the barriers.
    A loop the compiler kept rolled counts once, as its body: the ratio is still the
    loop's loads per FFMA."""
    ops = between_barriers(opcodes(sass))
    return (sum(1 for op in ops if re.fullmatch(r"LDS(\.\w+)*", op)),
            sum(1 for op in ops if re.fullmatch(r"FFMA(\.\w+)*", op)))


def shared_loads_per_ffma(exercise: str, kernel: str, params: dict,
                          loads: int, per_ffma: int, why: str) -> Callable[[str], list[str]]:
    """A static check: at most `loads` shared load instructions per `per_ffma` FFMA in
    the submission's SASS; `why` says where the bound comes from."""
    bound = Fraction(loads, per_ffma)
    def check(source: str) -> list[str]:
        sass = submission_sass(exercise, kernel, params, source)
        if sass is None:
            return []
        lds, ffma = load_ratio(sass)
        if not ffma:
            return ["no FFMA between the two __syncthreads(): the loop that multiplies "
                    "and adds is missing"]
        if Fraction(lds, ffma) > bound:
            return [f"the inner loop issues {lds} shared loads (LDS) for {ffma} FFMA, "
                    f"{lds / ffma:.2f} per FFMA; "
                    f"at most {float(bound):.2f} expected ({why})"]
        return []
    check.__name__ = f"shared_loads_per_ffma_{exercise}"
    return check
