"""The Nsight Compute command that settles a question chapters 10 and 11 leave open.

Where the recording holds no counter for a claim, the chapters say so and pose the claim
as a question; this gives the reader with an NVIDIA GPU the exact command that answers
it: `ncu` profiling one launch of each kernel named, each launched by the package's own
timing code (`gemm_kernels.measure.timing.measure`), so that the kernel, its parameters
and its inputs are those of the chapter. Nothing here runs a GPU: it builds text.
"""
from __future__ import annotations

import shlex

from gemm_kernels.core.launch import kernel_of


def ncu_command(configs, shape, metrics) -> str:
    """The shell command, run from the repository's folder, that profiles one launch of
    each (kernel, params) of `configs` at `shape` with Nsight Compute and prints the
    `metrics` of each launch."""
    calls, entries = [], []
    for name, params in configs:
        k = kernel_of(name)
        p = k.resolve(params)
        literal = ", ".join(f'"{n}": ' + (f'"{v}"' if isinstance(v, str) else repr(v))
                            for n, v in p.items())
        calls.append(f'timing.measure("{name}", {tuple(shape)!r}, {{{literal}}}, '
                     "repeats=1, warmup=0)")
        entries.append(k.entry)
    script = "from gemm_kernels.measure import timing; " + "; ".join(calls)
    regex = "|".join(dict.fromkeys(entries))
    return " ".join(["ncu", "--target-processes", "all", "-k", shlex.quote(f"regex:{regex}"),
                     "--launch-count", str(len(configs)), "--metrics", ",".join(metrics),
                     "python", "-c", shlex.quote(script)])
