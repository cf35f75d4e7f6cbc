"""What every exercise kernel is run with, on the GPU (`gpu_step`) and on the CPU
(`cpu_step`): its own module so that the checks, which may run the CPU emulation, and
the catalog, which names the checks, do not import each other."""

# Every GEMM check runs with plain and general alpha/beta.
ALPHA_BETA = ((1.0, 0.0), (1.5, -0.5))
# Small and ragged, but several BK steps deep and wider than a warp, so that every
# barrier of the K loop is crossed; one block at the usual tile sizes keeps racecheck,
# which serialises and instruments every shared-memory access, to seconds.
RACECHECK_SHAPE = (33, 65, 17)


def launch_words(change: dict, shape, alpha: float, beta: float) -> str:
    """'96x144x32 with WM=2, WN=4, alpha=2.0, beta=0.0': one of `Exercise.also`'s
    launches, as the verdicts name it."""
    return ("x".join(map(str, shape)) + " with "
            + ", ".join([f"{n}={v}" for n, v in change.items()]
                        + [f"alpha={alpha}", f"beta={beta}"]))
