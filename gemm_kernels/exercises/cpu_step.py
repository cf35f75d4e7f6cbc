"""Step 3 without a GPU: the student's kernel run on the CPU.

The kernel's own text is compiled by the host C++ compiler against `cuda_on_cpu.h`
(every thread of a block a host thread, __shared__ arrays static storage, blocks one
after another) and run on small ragged shapes; each output is judged element by element
by the checker the GPU step uses (`measure.check`). Two builds:

* AddressSanitizer: every read or write outside A, B, C (or a shared array) stops the
  run and is reported with the line of the cell that did it;
* ThreadSanitizer, once at the racecheck shape: two threads touching the same shared
  element, one of them writing, with no __syncthreads() between them, is a data race
  (what compute-sanitizer's racecheck finds on a GPU).

This decides whether the kernel computes the right numbers; it cannot time it. Dynamic
shared memory (`extern __shared__`) is one allocation of the launch's size, NaN at the
start of every block. Inline PTX (`asm`, in its cell or in a header it includes) runs
only on a GPU, but for chapter 09's cp.async helpers: the CPU build takes their asm
definitions out of the text it compiles (`emulated_text`; the student's text is not
changed) and the shim's emulation stands in, which lands a copy only at the
`cp_async_wait<N>()` that requires it, NaN until then, so that a wait that lets the
next tile still be in flight gives NaN on every run. Where no C++ compiler is installed
the step is skipped with that reason. Each run is a child process with a time limit, so
a kernel that never ends is a verdict, not a hung notebook.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from gemm_kernels.core.launch import DTYPES, operand_dtypes, problems
from gemm_kernels.core.cuda_text import comments_blanked
from gemm_kernels.core.registry import CUDA_DIR
from gemm_kernels.exercises.cexpr import code_only
from gemm_kernels.exercises.inputs import ALPHA_BETA, RACECHECK_SHAPE, launch_words
from gemm_kernels.exercises.submission import SOURCE_NAME
from gemm_kernels.measure.check import compare_exact, compare_gemm, random_normal

SHIM = Path(__file__).with_name("cuda_on_cpu.h")
# Empty stand-ins for <mma.h> and <cuda_fp16.h>: the shim defines what they would.
CPU_HEADERS = Path(__file__).with_name("cpu_headers")
# The GPU step's ragged shapes, kept small (every thread is a host thread): one and
# several tiles in each direction, a K remainder at every tile depth (8, 16, 32), K
# both a multiple of 4 and not (the vector paths), a single row; and a single column
# with K past one 128-float chunk (chapter 12's gemv, which takes M == 1 or N == 1 only);
# and whole 16 x 16 tiles (chapter 13's first WMMA kernel takes only those).
GEMM_SHAPES = [(1, 1, 1), (7, 13, 5), (33, 65, 17), (127, 129, 45), (1, 516, 3),
               (67, 260, 36), (67, 1, 260), (9, 1, 45), (32, 48, 64), (16, 80, 48)]
MOVE_SHAPES = [(1, 1), (7, 13), (33, 65), (127, 129), (65, 260)]
# The race check of a kernel that uses cp.async: as ragged as RACECHECK_SHAPE, but with
# N % 4 == 0 (the 16-byte copies of B) and K long enough for many trips round a ring
# of up to 4 stages of 8 or 16 (a wait's race shows only once tiles are read that the
# prologue did not wait for).
CP_ASYNC_RACECHECK_SHAPE = (33, 68, 129)
RUN_LIMIT_S = 60
BUILD_LIMIT_S = 120
CACHE = Path(tempfile.gettempdir()) / "gemm_kernels_cpu_step"

DRIVER = r"""
#include <cstdio>
#include <cstdlib>
#include "exercise.cu"
__attribute__((noinline)) static unsigned char* alloc_shared(size_t n) {
    void* p = nullptr;
    return posix_memalign(&p, 1024, n ? n : 1) ? nullptr : (unsigned char*)p;
}

thread_local uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
BlockBarrier cpu_block_barrier;

typedef ELEM T;          // C, alpha and beta
typedef ELEM_IN TI;      // A and B (FP16 in the tensor-core chapters)
static int dims[3];
static T alpha_, beta_;
static TI *A_, *B_;
static T *C_;
static int nthreads;
#if FINISHES_SPLIT
static T* W_;                  // the planes of a kernel that adds them itself
static unsigned* arrived_;     // its blocks' arrival counters, zero
#endif

// Each operand in an allocation of its own, exactly its size: AddressSanitizer names
// the function that made the block it finds an access outside of.
__attribute__((noinline)) static TI* alloc_A(size_t n) { return (TI*)std::malloc(n * sizeof(TI)); }
__attribute__((noinline)) static TI* alloc_B(size_t n) { return (TI*)std::malloc(n * sizeof(TI)); }
__attribute__((noinline)) static T* alloc_C(size_t n) { return (T*)std::malloc(n * sizeof(T)); }

// All threads finish a block before any starts the next (its shared arrays are reused).
static BlockBarrier end_barrier;
static void end_of_block() {
    unsigned g;
    {
        std::lock_guard<std::mutex> lock(end_barrier.m);
        g = end_barrier.generation.load();
        if (++end_barrier.arrived == end_barrier.live) {
            cpu_block_barrier.live = nthreads;     // every thread has left it
            if (cpu_dynamic_bytes) std::memset(cpu_dynamic_shared, 0xff, cpu_dynamic_bytes);
            end_barrier.release();
            return;
        }
    }
    end_barrier.generation.wait(g);
}

static void* worker(void* arg) {
    const unsigned t = (unsigned)(size_t)arg;
    threadIdx = {t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y)};
    for (unsigned z = 0; z < gridDim.z; ++z)
        for (unsigned y = 0; y < gridDim.y; ++y)
            for (unsigned x = 0; x < gridDim.x; ++x) {
                blockIdx = {x, y, z};
#if FINISHES_SPLIT
                KERNEL(dims[0], dims[1], dims[2], alpha_, A_, B_, beta_, C_, W_, arrived_);
#elif GEMM
                KERNEL(dims[0], dims[1], dims[2], alpha_, A_, B_, beta_, C_);
#else
                KERNEL(dims[0], dims[1], A_, C_);
#endif
                cpu_cp_async_block_end();
                cpu_block_barrier.leave();
                end_of_block();
            }
    return nullptr;
}

template <typename E>
static void read_into(FILE* f, E* p, size_t n) {
    if (std::fread(p, sizeof(E), n, f) != n) { std::fprintf(stderr, "short input\n"); std::exit(2); }
}

int main(int argc, char** argv) {
    // in out d0 d1 d2 gx gy gz bx by bz alpha beta [planes: C holds that many M x N
    // planes, the workspace of a split-K launch; with FINISHES_SPLIT, C is C and the
    // workspace W_ holds them] [dynamic shared memory in bytes]
    FILE* in = std::fopen(argv[1], "rb");
    cpu_dynamic_bytes = argc > 15 ? (size_t)std::atoll(argv[15]) : 0;
    if (cpu_dynamic_bytes) {
        cpu_dynamic_shared = alloc_shared(cpu_dynamic_bytes);
        std::memset(cpu_dynamic_shared, 0xff, cpu_dynamic_bytes);    // NaN
    }
    const size_t planes = argc > 14 ? (size_t)std::atoi(argv[14]) : 1;
    for (int i = 0; i < 3; ++i) dims[i] = std::atoi(argv[3 + i]);
    gridDim = dim3(std::atoi(argv[6]), std::atoi(argv[7]), std::atoi(argv[8]));
    blockDim = dim3(std::atoi(argv[9]), std::atoi(argv[10]), std::atoi(argv[11]));
    alpha_ = (T)std::atof(argv[12]);
    beta_ = (T)std::atof(argv[13]);
#if FINISHES_SPLIT
    const size_t na = (size_t)dims[0] * dims[2], nb = (size_t)dims[2] * dims[1],
                 nc = (size_t)dims[0] * dims[1], nw = nc * planes;
    A_ = alloc_A(na); B_ = alloc_B(nb); C_ = alloc_C(nc);
    read_into(in, A_, na); read_into(in, B_, nb); read_into(in, C_, nc);
    W_ = alloc_C(nw);
    for (size_t i = 0; i < nw; ++i) W_[i] = (T)NAN;     // no plane may be read unwritten
    arrived_ = (unsigned*)std::calloc((size_t)gridDim.x * gridDim.y, sizeof(unsigned));
#elif GEMM
    const size_t na = (size_t)dims[0] * dims[2], nb = (size_t)dims[2] * dims[1],
                 nc = (size_t)dims[0] * dims[1] * planes;
    A_ = alloc_A(na); B_ = alloc_B(nb); C_ = alloc_C(nc);
    read_into(in, A_, na); read_into(in, B_, nb); read_into(in, C_, nc);
#else
    const size_t na = (size_t)dims[0] * dims[1], nc = na;
    A_ = alloc_A(na); C_ = alloc_C(nc);
    read_into(in, A_, na); read_into(in, C_, nc);
#endif
    std::fclose(in);
    nthreads = blockDim.x * blockDim.y * blockDim.z;
    cpu_block_barrier.live = end_barrier.live = nthreads;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 21);
    pthread_t* threads = new pthread_t[nthreads];
    for (int t = 0; t < nthreads; ++t)
        if (pthread_create(&threads[t], &attr, worker, (void*)(size_t)t)) {
            std::fprintf(stderr, "could not start %d threads\n", nthreads); return 2;
        }
    for (int t = 0; t < nthreads; ++t) pthread_join(threads[t], nullptr);
    FILE* out = std::fopen(argv[2], "wb");
    std::fwrite(C_, sizeof(T), nc, out);
    std::fclose(out);
    cpu_cp_async_note();
    return 0;
}
"""


class Unavailable(Exception):
    """The emulation cannot run this kernel here (no compiler, inline PTX, ...)."""


def host_compiler() -> str | None:
    return shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")


def ptx_instructions(source: str) -> list[str]:
    """The PTX instructions of the inline assembly in `source`, by the first two parts of
    their names (cp.async, ldmatrix.sync, mma.sync), in order of first use. Plain loads
    and stores (ld.*, st.*: an older GPU's fallback) are named only where nothing else
    is."""
    found = [".".join(op.split(".")[:2]) for op in
             re.findall(r'\basm\s*(?:volatile\s*)?\(\s*"\s*([a-z][\w.]*)', code_only(source))]
    found = list(dict.fromkeys(found))
    return [op for op in found if op.split(".")[0] not in ("ld", "st")] or found


# The cp.async helpers the shim emulates (cuda_on_cpu.h), each with the PTX its asm
# definition must hold to be taken for the helper: a helper whose asm says something
# else (another size) is left in, and its asm refuses the kernel.
CP_ASYNC_HELPERS = {
    "cp_async_4": r"cp\.async\.c[ag]\.shared\.global\s*\[%0\]\s*,\s*\[%1\]\s*,\s*4\b",
    "cp_async_16": r"cp\.async\.c[ag]\.shared\.global\s*\[%0\]\s*,\s*\[%1\]\s*,\s*16\b",
    "cp_async_commit": r"cp\.async\.commit_group\s*;",
    "cp_async_wait": r"cp\.async\.wait_group\s+%0\s*;",
}
_HELPER = re.compile(r"(?:template\s*<\s*int\s+\w+\s*>\s*)?(?:__device__\s+|__forceinline__\s+|"
                     r"static\s+|inline\s+)+void\s+(cp_async_\w+)\s*\(")
_EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+((?:[\w:]+\s*(?:\(\s*\d+\s*\))?\s+)+?)"
                            r"(\w+)\s*\[\s*\]\s*;")


def _blank(text: str, start: int, end: int) -> str:
    """`text` with [start, end) made spaces, its line breaks kept (so that every line
    number of the rest stays what the student sees)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def _emulation(source: str) -> tuple[str, set[str]]:
    """(the text the CPU build compiles for `source`, the cp.async helpers whose asm
    definitions it took out): see `emulated_text`."""
    text = comments_blanked(source)
    out, taken = source, set()
    for m in reversed(list(_HELPER.finditer(text))):
        name = m.group(1)
        body_at = text.find("{", m.end())
        close = text.find(";", m.end())
        if name not in CP_ASYNC_HELPERS or body_at < 0 or 0 <= close < body_at:
            continue                    # another function, or a declaration only
        depth = 0
        for end in range(body_at, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        body = text[body_at:end + 1]
        if re.search(r"\basm\b", body) and re.search(CP_ASYNC_HELPERS[name], body):
            out = _blank(out, m.start(), end + 1)
            text = _blank(text, m.start(), end + 1)
            taken.add(name)
    for m in reversed(list(_EXTERN_SHARED.finditer(text))):
        kind = re.sub(r"__align__\s*\(\s*\d+\s*\)", " ", m.group(1)).strip()
        out = (out[:m.start()] + f"{kind}* const {m.group(2)} = "
               f"reinterpret_cast<{kind}*>(cpu_dynamic_shared);" + out[m.end():])
    return out, taken


def emulated_text(source: str) -> str:
    """The text the CPU build compiles for `source`: the asm definitions of the cp.async
    helpers (CP_ASYNC_HELPERS) blanked out, the shim's emulation standing in for them,
    and each `extern __shared__ T name[];` made a pointer to the dynamic shared memory.
    Line numbers are kept; the student's text itself is never changed."""
    return _emulation(source)[0]


def uses_cp_async(source: str) -> bool:
    """Whether the CPU build of `source` runs the shim's cp.async emulation."""
    return bool(_emulation(source)[1])


def emulation_problem(source: str) -> str | None:
    """Why this source cannot run on the CPU, or None. A kernel's is read with the
    headers it includes (`Kernel.source_with_headers`): its body may sit in one. The
    cp.async helpers that the shim emulates do not count as inline PTX."""
    code = code_only(emulated_text(source))
    if re.search(r"\basm\b", code):
        names = ", ".join(ptx_instructions(code)) or "asm"
        return f"the kernel's inline PTX ({names}) has no CPU emulation"
    return None


C_TYPES = {"float32": "float", "float64": "double", "float16": "_Float16"}


def _element(k) -> str:
    """The C type of C (and alpha, beta): of the op, or the kernel's T."""
    return C_TYPES[DTYPES[k.op]] if k.op in DTYPES else k.resolve({})["T"]


def _input_element(k) -> str:
    """The C type of A and B: FP16 (the compiler's _Float16) in the tensor-core chapters."""
    return C_TYPES[operand_dtypes(k.op)[0]] if k.op in DTYPES else _element(k)


def _whole_vector_flags(cxx: str) -> list[str]:
    """Flags that keep a float4 (or any vector struct) read one access of its full
    width. g++ at -O1 splits a struct copy into its fields before AddressSanitizer
    instruments it, so a float4 read past A was reported as 'a read of 4 bytes';
    without scalar replacement of aggregates it is the 16-byte read the cell wrote."""
    return ["-fno-tree-sra"] if "clang" not in Path(cxx).name else []


def build(k, name_expression: str, sanitizer: str) -> Path:
    """The emulation binary of kernel `k`'s text at one instantiation, with
    `sanitizer` ("address", "thread" or "none"); cached by everything that goes into
    it."""
    cxx = host_compiler()
    if cxx is None:
        raise Unavailable("no C++ compiler (g++ or clang++) is installed here")
    text = emulated_text(k.source_text())
    # With AddressSanitizer, UndefinedBehaviorSanitizer's alignment check too: a float4
    # read at an address that is not a multiple of 16 bytes, which a GPU refuses with
    # 'misaligned address', stops the run there, named (the x86 CPU would read it).
    wanted = {"none": [], "address": ["-fsanitize=address,alignment",
                                      "-fno-sanitize-recover=alignment"]}
    flags = ["-std=c++20", "-O1", "-g", "-fno-strict-aliasing", "-pthread",
             *wanted.get(sanitizer, [f"-fsanitize={sanitizer}"]),
             *_whole_vector_flags(cxx), "-fno-omit-frame-pointer", "-w"]
    key = hashlib.sha1("\0".join([text, name_expression, sanitizer, _element(k), k.op,
                                  SHIM.read_text(), DRIVER, *flags]).encode()).hexdigest()[:16]

    def command(folder: Path, out: str) -> list:
        return [cxx, *flags,
                f"-I{folder}", f"-I{CUDA_DIR}", f"-I{CPU_HEADERS}", "-include", str(SHIM),
                f"-DKERNEL={name_expression}", f"-DELEM={_element(k)}",
                f"-DELEM_IN={_input_element(k)}",
                f"-DGEMM={1 if k.op in DTYPES else 0}",
                f"-DFINISHES_SPLIT={1 if k.finishes_split else 0}", "driver.cpp", "-o", out]
    binary, res = cached_binary(key, {SOURCE_NAME: text, "driver.cpp": DRIVER}, command)
    if binary is None:
        if re.search(r"fsanitize|libasan|libtsan|libubsan|cannot find -l", res.stderr):
            raise Unavailable(f"this compiler has no {sanitizer} sanitizer")
        first = next((l for l in res.stderr.splitlines() if "error" in l), res.stderr[-300:])
        raise Unavailable("the CPU emulation could not compile it: " + first.strip())
    return binary


def cached_binary(key: str, files: dict, command):
    """(the binary, None) built from `files` by `command(folder, output name)`, or
    (None, the compiler's CompletedProcess) when it fails; cached as CACHE/key/run.
    The build runs in a private folder and its binary moves into place with one
    rename: processes that build the same key at the same moment (notebooks and tests
    run side by side) never see or overwrite each other's half-written files."""
    binary = CACHE / key / "run"
    if binary.exists():
        return binary, None
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=CACHE))
    try:
        for name, text in files.items():
            (work / name).write_text(text)
        res = subprocess.run(command(work, "run"), cwd=work, capture_output=True, text=True,
                             timeout=BUILD_LIMIT_S)
        if res.returncode:
            return None, res
        binary.parent.mkdir(exist_ok=True)
        (work / "run").replace(binary)
        return binary, None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _dynamic_bytes(k, p: dict) -> int:
    """The launch's dynamic shared memory, for a kernel that declares some (a kernel
    that only asks for it to limit its blocks per SM gets none here)."""
    if not re.search(r"extern\s+__shared__", code_only(k.source_text())):
        return 0
    return int(k.dynamic_bytes(p))


def run_case(k, p: dict, shape, alpha: float, beta: float, sanitizer: str, seed: int):
    """Run once on fresh random inputs: (Verdict or None, the sanitizer's or the
    process's complaint or None, what the run says of a wrong result or ''). The last
    is for a kernel whose copies are cp.async (`cp_async_words`)."""
    rng = np.random.default_rng(seed)
    gemm = k.op in DTYPES
    dtype = np.dtype(DTYPES[k.op] if gemm else {"float": "float32",
                                                 "double": "float64"}[p["T"]])
    in_dtype = np.dtype(operand_dtypes(k.op)[0]) if gemm else dtype
    # A split-K launch (Kernel.splits) writes z partial products into a workspace of z
    # planes with alpha = 1, beta = 0; the sum and the epilogue are then done here, in
    # plane order, as split_k_reduce does on the GPU. A kernel that finishes its own
    # split writes C itself: the driver gives it the planes (see DRIVER).
    planes = k.splits(p, shape) if gemm else 1
    host_sum = planes > 1 and not k.finishes_split
    if gemm:
        M, N, K = shape
        A, B = random_normal((M, K), in_dtype, rng), random_normal((K, N), in_dtype, rng)
        C0 = random_normal((M, N), dtype, rng) if beta else np.full((M, N), np.nan, dtype)
        work = C0 if not host_sum else np.full((planes, M, N), np.nan, dtype)
        inputs, out_shape, dims = (A, B, work), work.shape, (M, N, K)
    else:
        src = random_normal(shape, dtype, rng)
        out_shape = shape[::-1] if k.op == "transpose" else shape
        inputs, dims = (src, np.full(out_shape, np.nan, dtype)), (*shape, 1)
    binary = build(k, k.name_expression(p, shape), sanitizer)
    with tempfile.TemporaryDirectory() as d:
        fin, fout = Path(d) / "in.bin", Path(d) / "out.bin"
        fin.write_bytes(b"".join(np.ascontiguousarray(a).tobytes() for a in inputs))
        argv = [str(binary), str(fin), str(fout), *map(str, dims),
                *map(str, k.grid(p, shape)), *map(str, k.threads(p)),
                *map(repr, (1.0, 0.0) if host_sum else (float(alpha), float(beta))),
                str(planes), str(_dynamic_bytes(k, p))]
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_LIMIT_S,
                                 # redzone: a read up to 2 KiB past an array lands in its
                                 # own red zone, never nearer the next array's, whichever
                                 # host thread reaches it first (the report names the array)
                                 env={"ASAN_OPTIONS": "detect_leaks=0 redzone=2048",
                                      "UBSAN_OPTIONS": "print_stacktrace=1",
                                      "TSAN_OPTIONS": "halt_on_error=1 report_signal_unsafe=0"})
        except subprocess.TimeoutExpired:
            return None, (f"it never finished within {RUN_LIMIT_S} s: a loop that does not "
                          "end, or threads of a block waiting at different __syncthreads()"), ""
        if res.returncode or "Sanitizer" in res.stderr:
            return None, sanitizer_message(res.stderr, res.returncode, move=not gemm), ""
        out = np.fromfile(fout, dtype).reshape(out_shape)
    note = cp_async_words(out, res.stderr) if uses_cp_async(k.source_text()) else ""
    if gemm:
        if host_sum:
            total = out[0].copy()
            for plane in out[1:]:
                total += plane
            out = dtype.type(alpha) * total + (dtype.type(beta) * C0 if beta else 0)
        return compare_gemm(out, A, B, C0 if beta else None, alpha, beta), None, note
    return compare_exact(out, src.T if k.op == "transpose" else src), None, note


IN_FLIGHT_BITS = 0x7FC0CA5A      # CPU_IN_FLIGHT of cuda_on_cpu.h: a copy not landed yet
POISON_BITS = 0x7FFFFFFF         # dynamic shared memory at the start of a block (sign off)


def cp_async_words(out: np.ndarray, stderr: str) -> str:
    """What the output of a cp.async kernel says when it is wrong: NaN elements that
    carry the emulation's in-flight NaN were computed from shared memory read before
    the copy that fills it had landed (a wait that came too early or left too many
    groups in flight, or a group never committed); NaN that carries the block's
    poison, from shared memory no copy ever wrote. With the copies that blocks ended
    with, never waited for (the shim's note). '' when neither shows."""
    if out.dtype != np.float32:
        return ""
    bits = out.view(np.uint32) & np.uint32(0x7FFFFFFF)
    flying = int(np.count_nonzero(bits == IN_FLIGHT_BITS))
    never = int(np.count_nonzero(bits == POISON_BITS))
    m = re.search(r"cp\.async note: (\d+) copies committed but never waited for, (\d+) never "
                  r"committed", stderr)
    unwaited, uncommitted = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    words = []
    if flying:
        words.append(
            f"{flying} element{'s' * (flying != 1)} of C came out NaN because a tile was "
            "read from shared memory before its cp.async copies had landed: on the CPU a "
            "copy lands only when the cp_async_wait<count>() of the thread that issued it "
            "requires it (the wait completes every committed group but the count most "
            "recent ones), and its place reads NaN until then. So no wait before that "
            "read completed the tile's group: check that the K loop waits before the next "
            "tile is read, that the wait's count leaves in flight only groups newer than "
            "that tile's (count the groups committed when the wait runs), and that every "
            "step commits one group")
    if never:
        words.append(
            f"{never} element{'s' * (never != 1)} of C came out NaN because shared memory "
            "was read that no copy had written in this block (it starts as NaN): a tile "
            "that was never requested, or a read of the wrong stage")
    if (flying or never) and (unwaited or uncommitted):
        words.append("when the blocks ended, "
                     + " and ".join(x for x in (
                         f"{unwaited} cp.async copies had been committed but never waited for"
                         if unwaited else "",
                         f"{uncommitted} had never been committed (no cp_async_commit() "
                         "after them)" if uncommitted else "") if x))
    return "; ".join(words)


_LINE = re.compile(re.escape(SOURCE_NAME) + r":(\d+)")


def _cell_line(text: str, first_line: int = 2) -> str:
    """'line N' of the student's cell for the first frame in their source (line 1 of
    the cell is the %%exercise line), or '' when the report names none."""
    m = _LINE.search(text)
    return f"line {int(m.group(1)) + first_line - 1}" if m else ""


def sanitizer_message(stderr: str, returncode: int, move: bool = False) -> str:
    """What a sanitizer (or the end of the process) said, in a student's words. `move`:
    a copy or transpose, whose kernel reads only `in` and writes only `out`; an access
    past an array is named by its kind there (AddressSanitizer names the allocation
    nearest to the address, which past the end of `in` can be `out`)."""
    odd = re.search(r"runtime error: (load of|store to|reference binding to|member access "
                    r"within) misaligned address \S+ for type '(?:const )?(?:struct )?"
                    r"([^']+)', which requires (\d+) byte alignment", stderr)
    if odd:
        n, line = int(odd.group(3)), _cell_line(stderr[odd.start():])
        return (f"a misaligned address: {'a write' if odd.group(1) == 'store to' else 'a read'}"
                f" of a {odd.group(2)} ({n} bytes) at an address that is not a multiple of "
                f"{n} bytes" + (f", at {line} of your cell" if line else "")
                + f" (found by UndefinedBehaviorSanitizer); a GPU stops such a kernel with "
                  f"'misaligned address': check where each {odd.group(2)} starts")
    m = re.search(r"AddressSanitizer: ([\w-]+)", stderr)
    if m:
        access = re.search(r"\b(READ|WRITE) of size (\d+)", stderr)
        owner = re.search(r"\balloc_([ABC])\b", stderr)
        var = re.search(r"global variable '([^']+)'", stderr)
        if re.search(r"\balloc_shared\b", stderr):
            owner = var = None
            var_words = "outside the dynamic shared memory (extern __shared__)"
        else:
            var_words = f"outside the shared array {var.group(1).split('::')[-1]}" if var else ""
        what = (f"{'a read' if access.group(1) == 'READ' else 'a write'} of {access.group(2)} "
                "bytes" if access else "an access")
        where = (("outside the input `in`" if access.group(1) == "READ" else
                  "outside the output `out`") if move and access and owner else
                 f"outside {'A' if owner.group(1) == 'A' else 'B' if owner.group(1) == 'B' else 'the output'}"
                 if owner else var_words or f"to invalid memory ({m.group(1)})")
        line = _cell_line(stderr[m.start():])
        return f"{what} {where}" + (f", at {line} of your cell" if line else "") + \
            " (found by AddressSanitizer): check the bounds of every load and store"
    if "ThreadSanitizer: data race" in stderr:
        body = stderr[stderr.index("ThreadSanitizer: data race"):]
        parts = re.split(r"\n\s*\n", body)
        first, second = _cell_line(parts[0]), _cell_line(parts[1] if len(parts) > 1 else "")
        var = re.search(r"global '([^']+)'", body)
        lines = " and ".join(x for x in (first, second) if x)
        copy = _cp_async_race(parts)
        if copy:
            return copy
        if var is None and re.search(r"heap block.*\n.*\n\s*#1 alloc_C\b", body):
            lines = " and ".join(dict.fromkeys(x for x in (first, second) if x))
            both = re.search(r"^\s*Write of size", parts[0], re.M) and "Previous write" in body
            return (f"a data race on the output: two threads {'wrote' if both else 'touched'} "
                    "the same element" + ("" if both else ", one of them writing")
                    + (f" (at {lines} of your cell)" if lines else "")
                    + ": each element must belong to exactly one thread, so check which "
                      "elements each thread's indices reach (found by ThreadSanitizer)")
        dynamic = re.search(r"heap block.*\n.*\n\s*#1 alloc_shared\b", body)
        return ("a data race" + (f" on the shared array {var.group(1).split('::')[-1]}"
                                 if var else " on the dynamic shared memory (extern "
                                 "__shared__)" if dynamic else "")
                + (f" between {lines} of your cell" if lines else "")
                + ": two threads touched the same element, one writing, with no "
                  "__syncthreads() between them (found by ThreadSanitizer)")
    wmma = re.search(r"^(wmma::|cp\.async: ).*$", stderr, re.M)   # the shim's own checks
    if wmma:
        return wmma.group(0)
    last = [l for l in stderr.strip().splitlines() if l.strip()]
    return f"the run ended with code {returncode}" + (f": {last[-1]}" if last else "")


def _cp_async_race(parts: list[str]) -> str | None:
    """The words for a ThreadSanitizer race (`parts`: its report split at blank lines,
    the access found first, then the one before it) in which one side is the cp.async
    emulation writing shared memory: a copy landing at a thread's wait, or the NaN a
    copy leaves where it will land, written when it is issued. None for other races."""
    sides = parts[:2]
    for i, part in enumerate(sides):
        for shim, what in (("cpu_cp_async_land", "land"), ("cpu_cp_async_issue", "issue")):
            if shim not in part:
                continue
            own = _cell_line(part)
            other = _cell_line(sides[1 - i]) if len(sides) > 1 else ""
            by = f" at {other} of your cell" if other else ""
            if what == "land":
                return ("a data race on shared memory: a cp.async copy landed at the "
                        f"cp_async_wait{f' of {own}' if own else ''} while another thread "
                        f"read the same place{by}, with no __syncthreads() between that "
                        "wait and the read (found by ThreadSanitizer; on the CPU a copy "
                        "lands at the wait that requires it). A wait covers only its own "
                        "thread's copies, and the barrier after it makes everyone's visible: "
                        "so either the wait's count let the group of the tile being read "
                        "stay in flight, or the barrier does not come between the wait and "
                        "the reads of the next tile")
            return ("a data race on shared memory: a cp.async copy was issued"
                    f"{f' at {own}' if own else ''} into a place that another thread reads"
                    f"{by}, with no __syncthreads() between them (found by ThreadSanitizer): "
                    "a copy may land at any time after it is issued, so it must go into a "
                    "stage that no thread reads until the copy has been waited for")
    return None


def correct_on_cpu(k, params: dict, seed: int = 0, also=()) -> tuple[bool | None, str]:
    """(True, what ran) when every check passed, (False, the first failure), or
    (None, why the emulation cannot run here). also: further launches, each (a change
    of params, shape, alpha, beta), checked after the usual ones (`Exercise.also`)."""
    why = emulation_problem(k.source_with_headers())
    if why:
        return None, f"cannot run on the CPU: {why}"
    p = k.resolve(params)
    gemm = k.op in DTYPES
    shapes = [s for s in (GEMM_SHAPES if gemm else MOVE_SHAPES) if not problems(k, p, s)]
    bounds, note = "address", ", nothing read or written outside the arrays"
    try:
        build(k, k.name_expression(p, shapes[0]), bounds)
    except Unavailable as e:
        if "sanitizer" not in str(e):
            return None, f"cannot run on the CPU: {e}"
        bounds, note = "none", f" (accesses outside the arrays not checked: {e})"
    ran = 0
    try:
        for i, shape in enumerate(shapes):
            for alpha, beta in (ALPHA_BETA if gemm else ALPHA_BETA[:1]):
                verdict, trouble, note = run_case(k, p, shape, alpha, beta, bounds, seed + i)
                where = "at " + "x".join(map(str, shape)) + \
                    (f" with alpha={alpha}, beta={beta}" if gemm else "")
                if trouble:
                    return False, f"{where}: {trouble}"
                if not verdict.ok:
                    # a race usually shows as a wrong result first: name it if it is one
                    race, _ = race_check(k, p, gemm, seed)
                    return False, (f"{race} (wrong {where})" if race else
                                   f"wrong {where}: {verdict}" + (f"; {note}" if note else ""))
                ran += 1
        for i, (change, shape, alpha, beta) in enumerate(also):
            verdict, trouble, note = run_case(k, k.resolve({**params, **change}), shape,
                                              alpha, beta, bounds, seed + len(shapes) + i)
            if trouble or not verdict.ok:
                where = launch_words(change, shape, alpha, beta)
                return False, (f"{'' if trouble else 'wrong '}at {where}: {trouble or verdict}"
                               + (f"; {note}" if note and not trouble else ""))
    except Unavailable as e:
        return None, f"cannot run on the CPU: {e}"
    race, race_note = race_check(k, p, gemm, seed)
    if race:
        return False, race
    extra = "".join(f"; right at {launch_words(*a)} too" for a in also)
    return True, _passed(ran, gemm, shapes) + extra + note + race_note


def racecheck_shape(k, p: dict, gemm: bool) -> tuple:
    """The shape the race check runs: RACECHECK_SHAPE (CP_ASYNC_RACECHECK_SHAPE for a
    kernel whose copies are cp.async), or for a kernel that does not take
    it (whole tiles only, a matrix-vector product) the one of GEMM_SHAPES with the most
    multiply-adds among those it takes, so that several warps (and blocks, and slices of
    K) are at work when ThreadSanitizer watches."""
    shape = RACECHECK_SHAPE if gemm else RACECHECK_SHAPE[:2]
    if gemm and uses_cp_async(k.source_text()) and not problems(k, p, CP_ASYNC_RACECHECK_SHAPE):
        return CP_ASYNC_RACECHECK_SHAPE
    if not problems(k, p, shape):
        return shape
    taken = [s for s in GEMM_SHAPES if not problems(k, p, s)]
    return max(taken, key=lambda s: s[0] * s[1] * s[2]) if taken else shape


def race_check(k, p: dict, gemm: bool, seed: int) -> tuple[str | None, str]:
    """(the data race ThreadSanitizer found at the racecheck shape, or None; a note for
    the verdict)."""
    shape = racecheck_shape(k, p, gemm)
    try:
        _, trouble, _ = run_case(k, p, shape, *ALPHA_BETA[-1 if gemm else 0], "thread", seed)
    except Unavailable as e:
        return None, f"; the race check could not run ({e})"
    if trouble and "data race" in trouble:
        return trouble, ""
    if trouble:     # the sanitizer's build stopped for another reason: say so, claim nothing
        return None, f"; the race check did not finish ({trouble})"
    return None, "; no data race at " + "x".join(map(str, shape))


def _passed(ran: int, gemm: bool, shapes: list) -> str:
    """The verdict of a kernel right on every check; `shapes`: those it was run on (a
    kernel that takes whole tiles only is not run on ragged ones, and says so)."""
    every = GEMM_SHAPES if gemm else MOVE_SHAPES
    which = ("small ragged shapes" if len(shapes) == len(every) else
             "the small shapes it takes (" + ", ".join("x".join(map(str, s)) for s in shapes)
             + ")")
    return (f"on the CPU (every thread emulated): every element right on {ran} checks of "
            + which + (", alpha/beta 1/0 and 1.5/-0.5" if gemm else ""))
