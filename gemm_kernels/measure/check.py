"""Correctness: every element of the output against its own rounding-error bound.

`check` runs one kernel once on fresh random inputs, with its output inside a guarded
buffer, and judges what it wrote with the pure functions below. Those functions take
NumPy or CuPy arrays alike (CuPy is imported only when given CuPy arrays), so the CPU
tests drive exactly the code that judges the GPU's output.

    gemm_reference(A, B, C0, alpha, beta) -> (ref, scale)   float64 reference and
                                             |alpha|*(|A|@|B|) + |beta|*|C0|
    gemm_bound(M, N, K, dtype, inputs)    -> the factor: bound of element = factor * scale
    compare_within(out, ref, bound)       -> Verdict (each element within its own bound)
    compare_exact(out, ref)               -> Verdict (bit-for-bit: copies, transposes)
    compare_gemm(C, A, B, C0, alpha, beta)-> Verdict (the three above, composed)
    guarded(shape, dtype, xp), guard_writes(buf, size): the "no write outside C" check
"""
from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

from gemm_kernels.core.launch import DTYPES, kernel_of, launch, operand_dtypes, problems

# The shapes every kernel is checked on: tiny, prime-ish, ragged in every dimension.
RAGGED_SHAPES = [(1, 1, 1), (7, 13, 5), (33, 65, 17), (127, 129, 255),
                 (1000, 1000, 1000), (4097, 1023, 515),
                 # vector paths with ragged edges: N % 4 == 0 but K odd; a single row
                 (300, 1028, 515), (1, 516, 3)]
TRANSPOSE_SHAPES = [(1, 1), (7, 13), (33, 65), (127, 129), (1000, 999), (4097, 515)]

# Probability, per check, that the probabilistic bound below fails for a correct kernel
# (under its model). Fixed before any test was run; see `gemm_bound`.
P_FAIL = 1e-9

# Bit patterns that fill the guarded buffer: a quiet NaN with a payload no arithmetic
# produces (a computed NaN is the canonical 0x7FC00000), so even a kernel that writes a
# NaN past the end of C changes the guard.
SENTINEL_BITS = {4: 0x7FC5A5A5, 8: 0x7FF8A5A5A5A5A5A5}
UINT = {4: "uint32", 8: "uint64"}
# The largest tile of any kernel is 256 wide (capstone BN); a missing bounds check
# writes at most that many rows past the last one, and that many elements past the end.
GUARD_ROWS = 256


def array_module(*arrays):
    """cupy when any of `arrays` is a CuPy array, else numpy; CuPy is not imported
    for NumPy inputs (its ndarray type lives in the module named "cupy")."""
    if any(type(a).__module__ == "cupy" for a in arrays if a is not None):
        import cupy
        return cupy
    import numpy
    return numpy


def unit_roundoff(dtype) -> float:
    """u = 2^-24 for float32, 2^-53 for float64 (half the machine epsilon)."""
    import numpy as np
    return float(np.finfo(dtype).eps) / 2


def gamma(n: int, u: float) -> float:
    """Higham's gamma_n = n*u / (1 - n*u): the deterministic bound on |theta_n| for a
    product of n factors (1 + delta)^(+-1), |delta| <= u (Higham 2002, Lemma 3.1)."""
    return n * u / (1 - n * u)


def gemm_bound(M: int, N: int, K: int, dtype="float32", inputs=None) -> float:
    """The factor f such that every element of a correct C satisfies
    |C_ij - ref_ij| <= f * scale_ij, scale = |alpha|*(|A|@|B|) + |beta|*|C0|.
    `inputs`: the dtype of A and B where it differs from C's (FP16 on tensor cores,
    see `tensor_core_bound`).

    The rule, fixed before any test was run:

    * Each term alpha*a_ik*b_kj of C_ij passes through at most n = K + 2 roundings in
      the kernel's precision (unit roundoff u): the product and at most K - 1 additions
      in any order of summation, the multiplication by alpha and the final addition of
      beta*c0 (beta*c0 itself sees two). So |C_ij - ref_ij| <= |theta_n| * scale_ij.
    * Deterministically |theta_n| <= gamma_n (Higham, Accuracy and Stability of
      Numerical Algorithms, 2nd ed. 2002, Lemma 3.1 and eq. (3.13) for |AB - fl(AB)|).
      At K = 1000 that is 6e-5 times scale: loose, since it assumes every rounding error
      is maximal and of the same sign.
    * Probabilistically (Higham & Mary, "A new approach to probabilistic rounding error
      analysis", SIAM J. Sci. Comput. 41(5), 2019, Theorem 2.4 with their inner-product
      Theorem 3.1): if the rounding errors are independent with mean zero, each product
      of n factors has |theta_n| <= gamma~_n(lam) = exp(lam*sqrt(n)*u + n*u^2/(1-u)) - 1
      except with probability 2*exp(-lam^2*(1-u)^2/2). A union bound over the M*N*n
      products in C makes the chance that any element exceeds it at most P_FAIL when
      lam = sqrt(2*ln(2*M*N*n / P_FAIL)) / (1 - u): lam is 6.7 at 1x1x1 and 9.3 at
      4097x1023x515. The model suits `check`, whose inputs are independent standard
      normal numbers (signed products, no cancellation pattern, no overflow/underflow).
    * f takes the smaller of the two (the deterministic one always holds, and is the
      smaller for K below about lam^2), so at K = 1000 the bound is 1.7e-5 * scale,
      3.5x tighter than gamma_n, and it scales like sqrt(K), not K.
    * The float64 reference and float64 scale carry their own rounding, at most
      gamma_n(2^-53) relative (eq. (3.13) again): f adds it for the reference and divides
      by 1 - gamma_n(2^-53) for the scale. This matters only for float64 kernels, whose
      bound is then set by the reference's worst case.
    """
    if str(inputs) in ("float16", "bfloat16") and str(dtype) == "float32":
        return tensor_core_bound(K)
    n = K + 2
    u = unit_roundoff(dtype)
    lam = math.sqrt(2 * math.log(2 * M * N * n / P_FAIL)) / (1 - u)
    probabilistic = math.expm1(lam * math.sqrt(n) * u + n * u * u / (1 - u))
    g64 = gamma(n, unit_roundoff("float64"))
    return (min(gamma(n, u), probabilistic) + g64) / (1 - g64)


def tensor_core_bound(K: int) -> float:
    """The factor f of `gemm_bound` for FP16 (or BF16) inputs with FP32 accumulation on
    tensor cores. The reference is computed from the 16-bit inputs themselves (exact in
    float64), so the rounding of the inputs is not an error of the kernel. Then (BF16's
    8-bit significands make the products exact too):

    * a product of two FP16 numbers (11-bit significands) is exact in FP32 (24 bits);
    * the accumulation is not IEEE round-to-nearest: Fasi, Higham, Mikaitis and Pranesh,
      "Numerical behavior of NVIDIA tensor cores" (PeerJ Comput. Sci. 7:e330, 2021)
      found that the tensor cores of the V100, T4 and A100 align the addends of each
      block sum to the largest exponent and truncate (round toward zero), so each
      addition loses up to one unit in the last place, 2^-23 relative, not half of it;
    * truncation errors all have the same sign, so the probabilistic argument of
      `gemm_bound` (independent errors of mean zero) does not hold. The rule takes the
      deterministic bound gamma_n(2^-23) with n = K + 2 (K - 1 additions, alpha, beta),
      which holds whatever the order of the additions, plus the float64 reference's
      own rounding.
    """
    n = K + 2
    g64 = gamma(n, unit_roundoff("float64"))
    return (gamma(n, 2.0 ** -23) + g64) / (1 - g64)


def gemm_reference(A, B, C0=None, alpha=1.0, beta=0.0):
    """(ref, scale) in float64: ref = alpha*A@B + beta*C0 and scale = |alpha|*(|A|@|B|)
    + |beta|*|C0|, with alpha and beta first rounded to the precision the launcher passes
    them in: A's, and at least FP32 (FP16 inputs accumulate in FP32). With beta == 0,
    C0 is not read (it may be NaN)."""
    import numpy as np
    xp = array_module(A, B, C0)
    scalar = np.promote_types(A.dtype, np.float32).type
    a = scalar(alpha).item()
    b = scalar(beta).item()
    A64, B64 = A.astype(xp.float64), B.astype(xp.float64)
    ref = a * (A64 @ B64)
    scale = abs(a) * (xp.abs(A64) @ xp.abs(B64))
    if b:
        C064 = C0.astype(xp.float64)
        ref += b * C064
        scale += abs(b) * xp.abs(C064)
    return ref, scale


def count(n: int, noun: str) -> str:
    """`n` things as a reader says it: "1 element", "1,536 elements"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class Verdict:
    """What a comparison found.

    ok: no element is bad. bad: elements whose |err|/bound exceeds 1 (for a bit-exact
    comparison: elements whose bits differ). nan: NaN in the output where the reference
    is not NaN (left unwritten, or poisoned). worst: the index of the element with the
    largest |err|/bound, with its `value` and `reference`; `ratio` is that largest
    |err|/bound over all elements (inf where the bound is 0 and the element differs, or
    the element is NaN, or a non-finite reference is not matched)."""
    ok: bool
    bad: int
    nan: int
    worst: tuple
    value: float
    reference: float
    ratio: float

    def __str__(self):
        # an infinite ratio (a bound of 0: an exact comparison) says nothing to a reader;
        # a large one is read as a whole number ("113,142"), not as "1.13e+05"
        big = math.isfinite(self.ratio) and self.ratio >= 1000
        ratio = (f" (|err|/bound {self.ratio:,.0f})" if big else
                 f" (|err|/bound {self.ratio:.3g})" if math.isfinite(self.ratio) else "")
        # four significant digits: enough to see how far off an element is, readable
        where = f"worst at {self.worst}: {self.value:.4g} against {self.reference:.4g}{ratio}"
        if self.ok:
            return f"ok, max |err|/bound {self.ratio:.3g}"
        return (f"{count(self.bad, 'element')} wrong" + (f", {self.nan:,} NaN" if self.nan else "")
                + f"; {where}")


def _verdict(xp, out, ref, ratio) -> Verdict:
    import numpy as np
    flat = int(xp.argmax(ratio))              # the first of the largest
    idx = tuple(int(i) for i in np.unravel_index(flat, out.shape))
    bad = int(xp.count_nonzero(ratio > 1))
    return Verdict(ok=bad == 0, bad=bad,
                   nan=int(xp.count_nonzero(xp.isnan(out) & ~xp.isnan(ref))), worst=idx,
                   value=float(out[idx]), reference=float(ref[idx]),
                   ratio=float(ratio.ravel()[flat]))


def compare_within(out, ref, bound) -> Verdict:
    """Each element of `out` against its own `bound` (an array like `ref`, or a number)
    around the float64 `ref`.

    Where ref is finite: bad when |out - ref| / bound > 1; a NaN in `out` is always bad
    (an element never written keeps the NaN it was poisoned with), and where the bound
    is 0 only an exact element passes. Where ref is NaN or +-Inf (NaN or Inf in the
    inputs), out must match it: NaN where NaN, the same signed Inf where Inf.
    """
    import numpy as np
    xp = array_module(out, ref, bound)
    # 0/0, Inf-Inf and x/0 occur on purpose below and are resolved right after.
    with np.errstate(invalid="ignore", divide="ignore"):
        err = xp.abs(out.astype(xp.float64) - ref)
        ratio = err / bound
        xp.putmask(ratio, err == 0, 0.0)          # exact, even where the bound is 0
        xp.putmask(ratio, xp.isnan(ratio), xp.inf)  # NaN in out where ref is finite
        nonfinite = ~xp.isfinite(ref)
        if nonfinite.any():
            matches = xp.where(xp.isnan(ref), xp.isnan(out), out == ref)
            xp.putmask(ratio, nonfinite, xp.where(matches, 0.0, xp.inf))
    return _verdict(xp, out, ref, ratio)


def compare_exact(out, ref) -> Verdict:
    """Bit-for-bit equality of `out` with `ref` (same dtype): a copy or a transpose
    moves bits, so even -0.0 for 0.0, another NaN payload or one ulp is wrong."""
    xp = array_module(out, ref)
    if out.shape != ref.shape or out.dtype != ref.dtype:
        raise ValueError(f"out is {out.dtype}{out.shape}, ref {ref.dtype}{ref.shape}: "
                         "a bit-exact comparison needs both alike")
    uint = UINT[out.dtype.itemsize]
    differ = xp.ascontiguousarray(out).view(uint) != xp.ascontiguousarray(ref).view(uint)
    return _verdict(xp, out, ref, xp.where(differ, xp.inf, 0.0))


def compare_gemm(C, A, B, C0=None, alpha=1.0, beta=0.0, inputs=None) -> Verdict:
    """C = alpha*A@B + beta*C0, judged element by element in the precision of C.

    Each element must lie within gemm_bound(M, N, K, C.dtype) * scale of the float64
    reference (see `gemm_bound` for the rule and its sources); NaN and Inf in the
    inputs must reach the output as in the reference. NumPy or CuPy arrays. `inputs`:
    the format the GEMM read A and B in, where their dtype does not say it ("bfloat16"
    for BF16 values held in float32 arrays).
    """
    ref, scale = gemm_reference(A, B, C0, alpha, beta)
    (M, K), N = A.shape, B.shape[1]
    inputs = inputs or (A.dtype if A.dtype != C.dtype else None)
    return compare_within(C, ref, gemm_bound(M, N, K, C.dtype, inputs) * scale)


def guard_length(cols: int) -> int:
    """Guard elements after a `cols`-wide output: GUARD_ROWS rows and GUARD_ROWS more."""
    return GUARD_ROWS * (cols + 1)


def guarded(shape, dtype, xp):
    """(buf, out): `out` is a C-contiguous `shape` view of the first rows*cols elements of
    the 1-D `buf` (so it starts where buf does, with its alignment), followed by
    guard_length(cols) guard elements. Every element holds the sentinel NaN, so `out`
    is also NaN-poisoned. xp: numpy or cupy."""
    import numpy as np
    rows, cols = shape
    size = rows * cols
    buf = xp.empty(size + guard_length(cols), dtype)
    itemsize = np.dtype(dtype).itemsize
    buf.view(UINT[itemsize])[...] = SENTINEL_BITS[itemsize]
    return buf, buf[:size].reshape(shape)


def guard_writes(buf, size: int) -> int:
    """How many guard elements (past the first `size` of `buf`) no longer hold the
    sentinel's exact bits: writes outside the output."""
    itemsize = buf.dtype.itemsize
    xp = array_module(buf)
    return int(xp.count_nonzero(buf[size:].view(UINT[itemsize]) != SENTINEL_BITS[itemsize]))


@dataclass
class CheckResult:
    kernel: str
    shape: tuple
    params: dict
    alpha: float
    beta: float
    ok: bool | None          # None: rejected by validation before launch
    message: str
    seed: int
    verdict: Verdict | None = None     # None when rejected
    guard_writes: int | None = None    # guard elements changed (writes outside C)

    def __str__(self):
        dims = "x".join(map(str, self.shape)) if isinstance(self.shape, (tuple, list)) \
            else repr(self.shape)
        head = f"{self.kernel:<16} {dims:>16}  "
        if self.ok is None:
            return head + f"rejected: {self.message}"
        if self.ok:
            return head + f"max |err|/bound {self.verdict.ratio:.2g}  ok"
        return head + f"WRONG: {self.message} (seed {self.seed})"


def random_normal(shape, dtype, rng):
    """Standard normal numbers drawn in float64 and rounded to `dtype`. `rng`: a NumPy
    or a CuPy Generator (each has its own stream: a seed reproduces a draw on the same
    array module only)."""
    import numpy as np
    return rng.standard_normal(shape, dtype=np.float64).astype(dtype)


def check(kernel, shape, params=None, alpha=1.0, beta=0.0, seed=None) -> CheckResult:
    """Run one kernel once on fresh random data and judge every element it wrote.

    The output lies in a guarded buffer (see `guarded`); with beta == 0 it stays
    NaN-poisoned, since C must not be read, and with beta != 0 it holds random C0.
    GEMM output is judged by `compare_gemm`, copies and transposes by `compare_exact`,
    and any change to the guard is a write outside the output.
    """
    import cupy
    k = kernel_of(kernel)
    seed = secrets.randbits(32) if seed is None else seed
    # Validation first, on the arguments as given: a mistyped tunable or a malformed
    # shape comes back as a rejection with its reason, like any other invalid choice.
    bad = problems(k, params, shape)
    if bad:
        return CheckResult(k.name, shape, dict(params or {}), alpha, beta, None,
                           "; ".join(bad), seed)
    p = k.resolve(params)
    rng = cupy.random.default_rng(seed)
    if k.op in DTYPES:
        a_type, b_type, dtype = operand_dtypes(k.op)
        M, N, K = shape
        A, B = random_normal((M, K), a_type, rng), random_normal((K, N), b_type, rng)
        buf, out = guarded((M, N), dtype, cupy)
        C0 = None
        if beta:
            C0 = random_normal((M, N), dtype, rng)
            out[...] = C0
        launch(k, A, B, out, alpha=alpha, beta=beta, params=p)
        cupy.cuda.runtime.deviceSynchronize()
        verdict = compare_gemm(out, A, B, C0, alpha, beta)
    else:
        dtype = {"float": "float32", "double": "float64"}[p["T"]]
        src = random_normal(shape, dtype, rng)
        buf, out = guarded(shape[::-1] if k.op == "transpose" else shape, dtype, cupy)
        launch(k, src, out, params=p)
        cupy.cuda.runtime.deviceSynchronize()
        verdict = compare_exact(out, src.T if k.op == "transpose" else src)
    writes = guard_writes(buf, out.size)
    problems_found = ([] if verdict.ok else [str(verdict)]) + \
        ([f"{count(writes, 'element')} written past the end of the output"] if writes else [])
    return CheckResult(k.name, tuple(shape), p, alpha, beta, not problems_found,
                       "; ".join(problems_found), seed, verdict, writes)


def check_all(kernel, params=None, shapes=None, alphas_betas=((1.0, 0.0), (1.5, -0.5))):
    """Check a kernel over the ragged shapes, with plain and general alpha/beta."""
    k = kernel_of(kernel)
    shapes = shapes or (RAGGED_SHAPES if k.op in DTYPES else TRANSPOSE_SHAPES)
    if k.op not in DTYPES:
        alphas_betas = ((1.0, 0.0),)
    return [check(k, s, params, a, b) for s in shapes for a, b in alphas_betas]
