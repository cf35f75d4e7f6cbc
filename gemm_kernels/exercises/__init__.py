"""The students' kernels: each chapter's exercise (`catalog`), the grader that compiles,
inspects, checks and times a submission step by step (`grader`, with the GPU steps in a
child process, `gpu_step`, and the CPU emulation, `cpu_step`, both run with `inputs`), the `%%exercise` cell magic (`magic`) and the grading of a
whole notebook for an instructor (`notebooks`).

May import `gemm_kernels.core`, `gemm_kernels.measure` and `gemm_kernels.memory`;
`gemm_kernels.notebook` may import it.

In a notebook: `%load_ext gemm_kernels.exercises`, then a cell starting with
`%%exercise NAME` holding the CUDA source.
"""


def load_ipython_extension(ipython):
    from gemm_kernels.exercises.magic import register
    register(ipython)


def verdict(name: str):
    """The last grading report of exercise `name` (see `magic.verdict`)."""
    from gemm_kernels.exercises.magic import verdict as last
    return last(name)
