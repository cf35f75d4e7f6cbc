"""Chapter 00's static check: the copy kernel computes its offsets in 64 bits.

`r * cols + c` in `int` wraps around past 2^31 elements (a 46,341 x 46,341 float
matrix), and the kernel then reads and writes the wrong places. No test shape catches it
(the largest is 8192 x 8192 = 2^26 elements), so the check reads the compiled code
instead: in the PTX that NVRTC makes of the submission, a 32-bit multiplication
(`mul.lo.s32`, `mad.lo.u32`, ...) of the `rows` or `cols` parameter by another register
is an offset computed in 32 bits. A 64-bit one is `mul.lo.s64` or `mul.wide.s32` (a
32 x 32 -> 64-bit product), whichever way the source wrote it: a `(size_t)` cast on a
factor, a `size_t` variable, a pointer moved by a 64-bit step. Casting the product,
`(size_t)(r * cols + c)`, comes too late: the PTX still multiplies in 32 bits, and the
check says so. A multiplication by a constant (`ROWS * cols`, a pointer's step) is not
flagged: it would wrap only for rows of more than 2^29 elements.
"""
from __future__ import annotations

import re
from typing import Callable

from gemm_kernels.core import compiler
from gemm_kernels.exercises.stubs import STUB
from gemm_kernels.exercises.submission import submission_kernel

# `ld.param.u32 %r7, [_Z4copy..._param_1];`: the register that holds parameter 1
_PARAM = re.compile(r"ld\.param\.[us]32\s+(%r\d+),\s*\[\w+_param_(\d+)\]")
_MOVE = re.compile(r"mov\.[bus]32\s+(%r\d+),\s*(%r\d+);")
# a 32-bit product of two operands: mul.lo / mad.lo (and the 24-bit forms) on .s32/.u32
_MUL32 = re.compile(r"\b(mul|mad)(24)?\.lo\.[su]32\s+%r\d+,\s*([^,;]+),\s*([^,;]+)[,;]")

SHAPE_PARAMS = (0, 1)     # copy(int rows, int cols, const T* in, T* out)


def shape_registers(ptx: str, params=SHAPE_PARAMS) -> set[str]:
    """The PTX registers that hold the kernel's shape parameters (and plain copies)."""
    regs = {reg for reg, i in _PARAM.findall(ptx) if int(i) in params}
    for dst, src in _MOVE.findall(ptx):
        if src in regs:
            regs.add(dst)
    return regs


def products_32bit(ptx: str, params=SHAPE_PARAMS) -> list[str]:
    """The 32-bit multiplications of a shape parameter by another register, as PTX
    lines: offsets (or sizes) that wrap around past 2^31."""
    shape = shape_registers(ptx, params)
    found = []
    for line in ptx.splitlines():
        m = _MUL32.search(line)
        if not m:
            continue
        a, b = m.group(3).strip(), m.group(4).strip()
        if (a in shape and b.startswith("%r")) or (b in shape and a.startswith("%r")):
            found.append(line.strip())
    return found


def offset_problems(ptx: str) -> list[str]:
    """The check on PTX text: one problem naming the first 32-bit product, or none."""
    found = products_32bit(ptx)
    if not found:
        return []
    first = " ".join(found[0].rstrip(";").split())
    times = "once" if len(found) == 1 else f"{len(found)} times"
    return [f"the offset r * cols + c is computed in 32 bits: the compiled code multiplies "
            f"rows or cols by a 32-bit register {times} (the first: `{first}`). Past 2^31 "
            "elements (a 46,341 x 46,341 matrix; 2^32 for unsigned) the offset wraps "
            "around and the copy reads and writes the wrong places. Make a factor 64-bit "
            "before the multiplication, (size_t)r * cols + c; a cast of the result, "
            "(size_t)(r * cols + c), comes too late"]


def offsets_64bit(exercise: str, kernel: str, params: dict) -> Callable[[str], list[str]]:
    """The static check of the copy exercise (see the module's docstring); silent while
    the source still holds the stub or does not compile (the grader reports those)."""
    def check(source: str) -> list[str]:
        if STUB in source:
            return []
        try:
            ptx, _ = compiler.ptx(submission_kernel(exercise, kernel, source), params)
        except RuntimeError:
            return []
        return offset_problems(ptx)
    check.__name__ = f"offsets_64bit_{exercise}"
    return check
