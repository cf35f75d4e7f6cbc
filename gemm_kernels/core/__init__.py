"""The kernels and what runs them: the registry (each kernel's source, tunables,
constraints and launch geometry, its source read as code: `cuda_text`), the compiler (NVRTC for the GPU; ptxas and nvdisasm
for the static analysis), the launcher, the device and its limits, the static analysis,
and the pictures' common style (distinct series, readable labels).

May import nothing else of `gemm_kernels`: everything else builds on it.
"""
