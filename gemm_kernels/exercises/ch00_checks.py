"""Chapter 00's static checks: the copy kernel computes its offsets in 64 bits, and the
lanes of a warp copy neighbouring elements of a row.

**64-bit offsets.**
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

**Coalesced lanes.** A copy that runs its lanes down a column is correct and only slow,
so no element-wise test refuses it. The check runs the kernel's text on the CPU (the
shim of the CPU step, `cuda_on_cpu.h`) with `T` a 4-byte probe type whose copies write
down the element of `in` read and of `out` written, thread by thread, for the first block
of a 64 x 64 matrix. The i-th read (write) of the 32 lanes of a warp is one warp-wide
load (store): the 32-byte sectors and 128-byte lines it touches (`ch01_02_sectors`) must
be no more than 32 neighbouring floats of a row touch, 4 sectors in 1 line. Silent where
no C++ compiler is installed or the text does not build against the probe type.
"""
from __future__ import annotations

import hashlib
import re
import subprocess
from typing import Callable

from gemm_kernels.core import compiler
from gemm_kernels.core.registry import CUDA_DIR
from gemm_kernels.exercises import cpu_step
from gemm_kernels.exercises.ch01_02_cstatements import cells_text
from gemm_kernels.exercises.stubs import STUB
from gemm_kernels.exercises.submission import SOURCE_NAME, submission_kernel
from gemm_kernels.memory.ch01_02_sectors import lines, sectors

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


# ------------------------------------------------------------------ coalesced lanes
PROBE_SIDE = 64          # the probed matrix: PROBE_SIDE x PROBE_SIDE, its first block
PROBE_DRIVER = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
static void note(const void* p, bool write);
// A float whose copies say where they read and wrote: T of the probed kernel.
struct Probe {
    float v;
    Probe() = default;
    Probe(const Probe& o) : v(o.v) { note(&o, false); }
    Probe& operator=(const Probe& o) { v = o.v; note(&o, false); note(this, true); return *this; }
};
#include "exercise.cu"

thread_local uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
BlockBarrier cpu_block_barrier;
static Probe *in_, *out_;
static long n_;
static std::vector<long>* trace_;      // this thread's accesses: +(i+1) read, -(i+1) write

static void note(const void* p, bool write) {
    const Probe* q = (const Probe*)p;
    const Probe* base = write ? out_ : in_;
    if (q >= base && q < base + n_) trace_->push_back(write ? -(q - base + 1) : q - base + 1);
}

int main(int argc, char** argv) {
    const int side = std::atoi(argv[1]), tx = std::atoi(argv[2]), ty = std::atoi(argv[3]);
    n_ = (long)side * side;
    in_ = new Probe[n_]();
    out_ = new Probe[n_]();
    blockDim = dim3(tx, ty, 1);
    gridDim = dim3((side + TILE_ - 1) / TILE_, (side + TILE_ - 1) / TILE_, 1);
    blockIdx = {0, 0, 0};
    cpu_block_barrier.live = 1;        // threads run one after another: no barrier waits
    for (int t = 0; t < tx * ty; ++t) {
        std::vector<long> trace;
        trace_ = &trace;
        threadIdx = {(unsigned)(t % tx), (unsigned)(t / tx), 0};
        KERNEL(side, side, in_, out_);
        for (long a : trace) std::printf("%ld ", a);
        std::printf("\n");
    }
    return 0;
}
"""


def probe_trace(source: str, tile: int, rows: int, side: int = PROBE_SIDE):
    """[(reads, writes)] per thread of block (0, 0), in thread order: the elements of `in`
    read and of `out` written (flat indices), in program order; None when the text cannot
    run here (no compiler, inline PTX, does not build with the probe type, fails)."""
    cxx = cpu_step.host_compiler()
    if cxx is None or cpu_step.emulation_problem(source):
        return None
    shim = cpu_step.SHIM.read_text()
    key = hashlib.sha1("\0".join([source, PROBE_DRIVER, shim, str(tile), str(rows)])
                       .encode()).hexdigest()[:16]

    def command(folder, out):
        return [cxx, "-std=c++20", "-O1", "-w", "-pthread", f"-I{folder}", f"-I{CUDA_DIR}",
                "-include", str(cpu_step.SHIM), f"-DKERNEL=copy<Probe, {tile}, {rows}>",
                f"-DTILE_={tile}", "probe.cpp", "-o", out]
    try:
        binary, _ = cpu_step.cached_binary(f"probe-{key}",
                                           {SOURCE_NAME: source, "probe.cpp": PROBE_DRIVER},
                                           command)
    except subprocess.TimeoutExpired:
        return None
    if binary is None:
        return None
    try:
        res = subprocess.run([str(binary), str(side), str(tile), str(rows)],
                             capture_output=True, text=True, timeout=cpu_step.RUN_LIMIT_S)
    except subprocess.TimeoutExpired:
        return None
    if res.returncode:
        return None
    out = []
    for line in res.stdout.splitlines():
        seq = [int(a) for a in line.split()]
        out.append(([a - 1 for a in seq if a > 0], [-a - 1 for a in seq if a < 0]))
    return out


def _where(indices, side: int) -> str:
    """Where the flat `indices` of a side x side matrix lie, in words."""
    return cells_text([divmod(i, side) for i in indices])


def lane_problems(trace, side: int = PROBE_SIDE) -> list[str]:
    """The check on a trace (`probe_trace`): one problem naming the first warp-wide load
    or store that touches more sectors or lines than as many neighbouring floats would."""
    for w in range(len(trace) // 32):
        lanes = trace[32 * w:32 * w + 32]
        for kind, what, pick in (("load", "in", 0), ("store", "out", 1)):
            steps = max(len(lane[pick]) for lane in lanes)
            for j in range(steps):
                idx = [lane[pick][j] for lane in lanes if j < len(lane[pick])]
                s, n = sectors(idx), lines(idx)
                s0, n0 = -(-4 * len(idx) // 32), -(-4 * len(idx) // 128)
                if s > s0 or n > n0:
                    return [f"warp {w} of block (0, 0) copies {_where(idx, side)} of a "
                            f"{side} x {side} matrix: its {j + 1}{_th(j + 1)} {kind} from "
                            f"`{what}` touches {s} sectors of 32 bytes in {n} lines of 128 "
                            f"bytes, against {s0} sector{'s' * (s0 > 1)} in {n0} "
                            f"line{'s' * (n0 > 1)} when its {len(idx)} lanes take "
                            f"{len(idx)} neighbouring columns of one row. The copy is "
                            "right, but memory moves whole sectors: neighbouring lanes "
                            "(threadIdx.x) must copy neighbouring elements of a row"]
    return []


def _th(n: int) -> str:
    return {1: "st", 2: "nd", 3: "rd"}.get(n if n < 20 else n % 10, "th")


def lanes_coalesced(params: dict) -> Callable[[str], list[str]]:
    """The static check that a warp's loads and stores are coalesced (see the module's
    docstring); silent while the source holds the stub or cannot run on the CPU here."""
    def check(source: str) -> list[str]:
        if STUB in source:
            return []
        trace = probe_trace(source, params["TILE"], params["ROWS"])
        return [] if trace is None else lane_problems(trace)
    check.__name__ = "lanes_coalesced"
    return check
