"""How the threads of a warp touch memory, predicted without a GPU: the shared-memory
bank model (`banks`), the wavefront count of a whole launch (`wavefronts`), and each
chapter's access patterns in a module named by its chapters (`ch01_02_sectors` for the
global-memory sectors of chapters 01-02, `ch03_04_tiles`, ...); `probe` checks the bank
model against Nsight Compute on a GPU.

May import `gemm_kernels.core` and `gemm_kernels.measure`; nothing of `notebook`.
"""
