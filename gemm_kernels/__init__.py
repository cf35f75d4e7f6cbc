"""GEMM optimisation series: kernels, launcher, checks, timing, records and analysis."""
import os

# cuBLAS must run in true float32 (no TF32) to be a fair reference for FP32 kernels.
os.environ.setdefault("CUPY_TF32", "0")
