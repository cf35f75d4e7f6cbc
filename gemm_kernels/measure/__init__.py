"""Measurement and its evidence: the correctness checker, the timing harness, the
recording (`figures/data/<device>.json`) and its lookup, the ladder of kernels next to
cuBLAS, the profiler (Nsight Compute), the studies behind the chapters' arguments (each
measured in one process) and the chapters' yardsticks (roofline, bandwidth, trade-offs).

May import `gemm_kernels.core`; nothing of `memory` or `notebook`.
"""
