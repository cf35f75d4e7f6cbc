"""The one launcher: validate everything, then launch.

Every check happens before the GPU is touched, and every failure is a ValueError that
names the parameter and what would be valid.
"""
from __future__ import annotations

from gemm_kernels.core import compiler

from gemm_kernels.core import device
from gemm_kernels.core.kernels import get
from gemm_kernels.core.registry import Kernel, int_problem

# GEMM ops -> the dtype of C (and of alpha and beta). A and B have the same dtype,
# except in "hgemm" (the tensor-core chapters): FP16 inputs, FP32 accumulation and C.
DTYPES = {"sgemm": "float32", "dgemm": "float64", "hgemm": "float32"}
INPUT_DTYPES = {"hgemm": "float16"}
INT32_MAX = 2**31 - 1


def operand_dtypes(op: str) -> tuple[str, str, str]:
    """The dtypes of A, B and C of a GEMM op."""
    inputs = INPUT_DTYPES.get(op, DTYPES[op])
    return inputs, inputs, DTYPES[op]


def kernel_of(kernel: str | Kernel) -> Kernel:
    return kernel if isinstance(kernel, Kernel) else get(kernel)


def shape_problem(kernel: str | Kernel, shape) -> str | None:
    """A message when `shape` is not a shape this kernel's op takes, else None: three
    integers (M, N, K) for GEMM, two (rows, cols) for transpose and copy, each >= 1.
    The one shape check: the launcher, the checker, the widgets and the CLI use it."""
    k = kernel_of(kernel)
    dims = ("M", "N", "K") if k.op in DTYPES else ("rows", "cols")
    want = f"{len(dims)} integers ({', '.join(dims)})"
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__len__"):
        return f"{k.name} takes a shape of {want}, got {type(shape).__name__} {shape!r}"
    if len(shape) != len(dims):
        return (f"{k.name} is a {k.op} kernel: its shape is {want}, got {len(shape)} "
                f"value(s) {tuple(shape)}")
    for name, d in zip(dims, shape):
        bad = int_problem(name, d)
        if bad:
            return f"shape {tuple(shape)}: {bad}"
    return None


def problems(kernel: str | Kernel, params: dict | None = None,
             shape: tuple | None = None) -> list[str]:
    """Every reason this configuration cannot run at this shape (empty when it can).

    Needs no arrays and no GPU, so the widgets can ask before anything is allocated.
    The kernel's own rules (`Kernel.problems`) are checked on the GPU the analysis
    describes (`device.target_arch()`): a kernel this GPU cannot run is refused here,
    with the feature it needs, before anything is compiled.
    """
    k = kernel_of(kernel)
    out = k.problems(params)
    if out:
        return out
    p = k.resolve(params)
    lim = device.limits()
    if shape is not None:
        bad = shape_problem(k, shape)
        if bad:
            out.append(bad)
            return out
        # Python ints: numpy int32 dimensions would wrap in the products below
        shape = tuple(int(d) for d in shape)
        pairs = [(shape[0], shape[2]), (shape[2], shape[1]), (shape[0], shape[1])] \
            if len(shape) == 3 else [shape]
        if any(a * b > INT32_MAX for a, b in pairs):
            out.append(f"shape {shape}: a matrix with more than 2^31-1 elements "
                       "overflows the kernels' 32-bit indices")
        rule = k.shape_rule(p, shape)
        if rule:
            out.append(rule)
        grid = k.grid(p, shape)
        if grid[1] > lim["max_grid_y"] or grid[2] > 65535:
            out.append(f"grid {grid} exceeds the limit of 65535 blocks in y and z")
    return out


def _check_arrays(k: Kernel, p: dict, arrays) -> tuple:
    """The shape the kernel sees, after checking type, dtype, layout and agreement."""
    import cupy
    names = ("A", "B", "C") if k.op in DTYPES else ("in", "out")
    if len(arrays) != len(names):
        raise ValueError(f"{k.name} takes {len(names)} arrays ({', '.join(names)}), "
                         f"got {len(arrays)}")
    wants = operand_dtypes(k.op) if k.op in DTYPES else \
        ({"float": "float32", "double": "float64"}[p["T"]],) * 2
    for n, a, want in zip(names, arrays, wants):
        if not isinstance(a, cupy.ndarray):
            raise ValueError(f"{n} must be a cupy.ndarray on the GPU, got {type(a).__name__}")
        if a.ndim != 2:
            raise ValueError(f"{n} must be 2-D, got {a.ndim}-D with shape {a.shape}")
        if a.dtype != want:
            raise ValueError(f"{n} has dtype {a.dtype}; {k.name} needs {want}"
                             + (" (set T accordingly)" if "T" in p else ""))
        if not a.flags.c_contiguous:
            raise ValueError(f"{n} must be C-contiguous (row-major); "
                             f"use cupy.ascontiguousarray({n})")
        # CuPy's own allocations are 256-byte aligned: only an offset view can fail this.
        if k.align and a.data.ptr % k.align:
            raise ValueError(f"{n} starts {a.data.ptr % k.align} bytes past a {k.align}-byte "
                             f"boundary (an offset view?); {k.name} loads {k.align}-byte "
                             f"vectors: pass {n}.copy()")
    overlap = aliasing(names, arrays)
    if overlap:
        raise ValueError(overlap)
    if k.op in DTYPES:
        (M, K), (K2, N), (M2, N2) = (a.shape for a in arrays)
        if K2 != K:
            raise ValueError(f"A is {M}x{K} but B is {K2}x{N}: B needs {K} rows")
        if (M2, N2) != (M, N):
            raise ValueError(f"C is {M2}x{N2}; for A {M}x{K} and B {K}x{N} it must be {M}x{N}")
        return (M, N, K)
    (R, Cc), out_shape = arrays[0].shape, arrays[1].shape
    want_out = (Cc, R) if k.op == "transpose" else (R, Cc)
    if out_shape != want_out:
        raise ValueError(f"out is {out_shape[0]}x{out_shape[1]}; for in {R}x{Cc} "
                         f"it must be {want_out[0]}x{want_out[1]}")
    return (R, Cc)


def aliasing(names, arrays) -> str | None:
    """A message when the output (the last array) shares GPU memory with an input: the
    kernels read their inputs while writing the output, so `launch("naive", A, A, A)` or
    an output that is a view of an input would give a silently wrong result. Compares
    the byte ranges [ptr, ptr + nbytes), which are exact for C-contiguous arrays."""
    *ins, out = arrays
    lo = out.data.ptr
    hi = lo + out.nbytes
    for n, a in zip(names, ins):
        if a.data.ptr < hi and lo < a.data.ptr + a.nbytes:
            same = a.data.ptr == lo and a.nbytes == out.nbytes
            return (f"{names[-1]} {'is' if same else 'overlaps'} {n} in GPU memory "
                    f"({'the same array' if same else 'a view of the same memory'}): the "
                    f"kernel would overwrite {n} while reading it; pass a separate "
                    f"output, e.g. cupy.empty_like({names[-1]})")
    return None


def operands(kernel: str | Kernel, arrays) -> tuple:
    """The arrays a kernel is launched with, from the ones its caller passes. As given,
    except for a GEMM kernel that reads A transposed (`Kernel.a_transposed`): (A^T, B, C)
    with A^T a new C-contiguous K x M copy of the caller's A (NumPy or CuPy alike). The
    launcher calls this once, when it is built, so A^T is made outside every launch it
    returns (and outside every timed call); the reference stays alpha*A@B + beta*C."""
    k = kernel_of(kernel)
    if k.a_transposed:
        A, B, C = arrays
        return (A.T.copy(), B, C)    # .copy() is C order in NumPy and CuPy
    return tuple(arrays)


def prepare(kernel: str | Kernel, arrays, params: dict | None = None):
    """Validate; return (kernel, params, shape) ready to launch, or raise ValueError."""
    k = kernel_of(kernel)
    bad = k.problems(params)
    if bad:
        raise ValueError(f"{k.name}: " + "; ".join(bad))
    p = k.resolve(params)
    shape = _check_arrays(k, p, arrays)
    bad = problems(k, p, shape)
    if bad:
        raise ValueError(f"{k.name}: " + "; ".join(bad))
    return k, p, shape


def launch(kernel: str | Kernel, *arrays, alpha: float = 1.0, beta: float = 0.0,
           params: dict | None = None, **kw):
    """Run one kernel: `launch("naive", A, B, C, alpha=1, beta=0, BLOCK=16)`.

    GEMM kernels take A, B, C; transpose and copy kernels take `in`, `out`.
    Tunables come as keywords or as a `params` dict.
    """
    return launcher(kernel, *arrays, params={**(params or {}), **kw})(alpha, beta)


def launcher(kernel: str | Kernel, *arrays, params: dict | None = None):
    """Validate once; return a function (alpha, beta) -> None that launches.

    The timing harness calls the returned function repeatedly, so validation and
    compilation stay out of the measured time, and so does the transpose of A for a
    kernel that reads A^T (see `operands`): its launches read the A^T made here, so
    build a new launcher after changing A. A kernel that reads a padded copy of B
    (`Kernel.padded_b`) gets it filled at every call, inside the measured time.
    """
    import numpy as np
    k, p, shape = prepare(kernel, arrays, params)
    fn = compiler.function(k, p, shape)
    grid, block = k.grid(p, shape), k.threads(p)
    dyn = k.dynamic_bytes(p)
    # A block gets 48 KiB of shared memory, static and dynamic together, unless the
    # kernel's dynamic limit is raised first (up to the GPU's opt-in limit).
    if k.smem(p) + dyn > device.limits()["smem_per_block"]:
        fn.max_dynamic_shared_size_bytes = dyn
    scalar = np.float64 if k.op == "dgemm" else np.float32
    ints = tuple(np.int32(d) for d in shape)

    if k.op in DTYPES:
        A, B, C = operands(k, arrays)
        row = k.padded_b(p, shape)
        if row is not None:
            fill, padded = _padded_copy(B, row)
            gemm = _gemm_run(k, p, fn, grid, block, dyn, scalar, ints, (A, padded, C))

            def run(alpha=1.0, beta=0.0):
                fill()
                gemm(alpha, beta)
            return run
        return _gemm_run(k, p, fn, grid, block, dyn, scalar, ints, (A, B, C))
    else:
        src, dst = arrays

        def run(alpha=None, beta=None):
            fn(grid, block, (*ints, src, dst), shared_mem=dyn)
    return run


def _gemm_run(k: Kernel, p: dict, fn, grid, block, dyn, scalar, ints, arrays):
    """The launch of a GEMM kernel on `arrays` (A, B, C as the kernel reads them)."""
    M, N, K = ints
    A, B, C = arrays
    slices = k.splits(p, tuple(int(d) for d in ints))
    if k.finishes_split:
        return _split_in_one_launch(fn, grid, block, dyn, scalar, ints, arrays, slices)
    if slices > 1:
        return _split_k(k, fn, grid, block, dyn, scalar, ints, arrays, slices)
    extra = tuple(k.extra_args(p, A, B, C)) if k.extra_args else ()

    def run(alpha=1.0, beta=0.0):
        fn(grid, block, (M, N, K, scalar(alpha), A, B, scalar(beta), C, *extra),
           shared_mem=dyn)
    return run


def _padded_copy(B, row: int):
    """(fill, padded): a zeroed K x `row` array allocated here, once, and a function
    that copies B (K x N, N <= row) into its first N columns with one 2-D copy (the
    padding stays zero)."""
    import cupy
    K, N = B.shape
    padded = cupy.zeros((K, row), dtype=B.dtype)
    size = B.dtype.itemsize

    def fill():
        cupy.cuda.runtime.memcpy2DAsync(padded.data.ptr, row * size, B.data.ptr, N * size,
                                        N * size, K, cupy.cuda.runtime.memcpyDeviceToDevice,
                                        cupy.cuda.get_current_stream().ptr)
    return fill, padded


# The reduction of a split-K launch: blocks of 256 threads, at most 8 per SM (each
# thread then walks the planes in steps of the whole grid).
REDUCE_THREADS = 256
REDUCE_BLOCKS_PER_SM = 8


def _split_k(k: Kernel, fn, grid, block, dyn, scalar, ints, arrays, slices: int):
    """The launch of a split-K configuration (cuda/split_k.cuh): the GEMM over `slices`
    slices of K into a workspace of `slices` M x N planes (alpha = 1, beta = 0), then
    `split_k_reduce`: C = alpha * (sum of the planes, in plane order) + beta * C. The
    workspace is allocated here, once, like A^T in `operands`: a timed call runs the two
    kernels and allocates nothing."""
    import cupy
    import numpy as np
    M, N, K = ints
    A, B, C = arrays
    elements = int(M) * int(N)
    work = cupy.empty((slices, elements), dtype=C.dtype)
    vec = C.dtype == cupy.float32 and elements % 4 == 0
    reduce = compiler.entry(k, f"split_k_reduce<{'float' if C.dtype == cupy.float32 else 'double'}, "
                               f"{'true' if vec else 'false'}>")
    per_block = REDUCE_THREADS * (4 if vec else 1)
    blocks = min(-(-elements // per_block), REDUCE_BLOCKS_PER_SM * device.properties()["sm_count"])
    one, zero, S = scalar(1), scalar(0), np.int32(slices)

    def run(alpha=1.0, beta=0.0):
        fn(grid, block, (M, N, K, one, A, B, zero, work), shared_mem=dyn)
        reduce((blocks, 1, 1), (REDUCE_THREADS, 1, 1),
               (M, N, S, scalar(alpha), work, scalar(beta), C))
    return run


def _split_in_one_launch(fn, grid, block, dyn, scalar, ints, arrays, slices: int):
    """The launch of a kernel that finishes its own split (`Kernel.finishes_split`):
    the workspace of `slices` planes and the blocks' arrival counters, zero, are made
    here, once; the kernel sets each counter back to zero as it finishes, so every call
    finds them so. (Two calls of one launcher must then not run at once, on two
    streams: they would share the counters.)"""
    import cupy
    M, N, K = ints
    A, B, C = arrays
    work = cupy.empty((slices, int(M) * int(N)) if slices > 1 else (1,), dtype=C.dtype)
    arrived = cupy.zeros(grid[0] * grid[1], dtype=cupy.uint32)

    def run(alpha=1.0, beta=0.0):
        fn(grid, block, (M, N, K, scalar(alpha), A, B, scalar(beta), C, work, arrived),
           shared_mem=dyn)
    return run

