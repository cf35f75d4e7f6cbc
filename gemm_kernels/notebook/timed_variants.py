"""The code variants the chapters time beside the registry's kernels: a registry kernel
around changed text (a `__launch_bounds__` promise added, a control that undoes one
change, the worked solution of an exercise), so that a chapter can answer its question
with a measured rate instead of a prediction.

`python -m gemm_kernels.notebook.timed_variants` (on a GPU) checks each variant on a
ragged shape, times it beside its reference (cuBLAS or the device copy) with the one
harness, and merges the rows into the device's recording, all in one run; a group's
registry kernels are timed in the same run, so the group compares like with like. A
variant's row carries its own name and the hash of its text: a changed variant is never
shown with an old rate. The chapters read the rows back with `row(name, ...)`.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

from gemm_kernels.core.launch import kernel_of


@dataclass(frozen=True)
class Timed:
    name: str             # the row's kernel name: unique, readable
    chapter: str
    build: object         # () -> Kernel (a variant), or a registry kernel's name
    shape: tuple
    params: tuple = ()    # the configurations timed (dicts); () = the defaults
    compare: tuple = field(default=())   # registry kernels timed in the same run

    def kernel(self):
        return kernel_of(self.build) if isinstance(self.build, str) else self.build()

    def configurations(self) -> tuple:
        return self.params or ({},)


def _solution(exercise: str):
    """The worked solution of `exercise` as a kernel named for it."""
    def build():
        from gemm_kernels.exercises.catalog import get
        from gemm_kernels.exercises.notebooks import solution_source
        from gemm_kernels.exercises.submission import submission_kernel
        ex = get(exercise)
        k = submission_kernel(exercise, ex.kernel, solution_source(exercise))
        return k.with_code(k.code, name=f"{exercise}: worked solution", source=k.source)
    return build


def _min_blocks(name: str, blocks: int):
    def build():
        from gemm_kernels.notebook.ch06_tiles import with_min_blocks
        return with_min_blocks(name, blocks)
    return build


def _prefetch(variant: str):
    def build():
        from gemm_kernels.notebook.ch08_prefetch import variant_kernel
        return variant_kernel(variant)
    return build


def _control():
    from gemm_kernels.notebook.ch11_wide import control_kernel
    return control_kernel()


def _exercise_entries() -> list[Timed]:
    """One entry per exercise with a worked solution: the solution at the exercise's
    configuration and timing size, beside the chapter's kernel at the same one."""
    from gemm_kernels.core.launch import DTYPES
    from gemm_kernels.exercises.catalog import EXERCISES
    out = []
    for ex in EXERCISES.values():
        n = ex.time_size
        shape = (n, n, n) if kernel_of(ex.kernel).op in DTYPES else (n, n)
        out.append(Timed(f"{ex.name}: worked solution", ex.chapter, _solution(ex.name), shape,
                         (dict(ex.params),), (ex.kernel,)))
    return out


K5 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
DEEP = {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8}
_PAYOFF = tuple({**p, "ONE_PER_SM": one} for p in (K5, DEEP) for one in (False, True))
_CUBE_2048, _CUBE_4096 = (2048, 2048, 2048), (4096, 4096, 4096)


def entries() -> list[Timed]:
    """Every variant the chapters time (built lazily: nothing compiles here)."""
    from gemm_kernels.notebook import ch08_prefetch
    out = [
        # 06: the contiguous 8x8 patch held to two blocks per SM (spilling a little):
        # is the strided kernel's gain its second block or its conflict-free reads?
        Timed("tile_2d_reg, __launch_bounds__(NT, 2)", "06", _min_blocks("tile_2d_reg", 2),
              _CUBE_4096, (K5,), ("tile_2d_reg", "tile_2d_strided")),
        # 07: the row-major A tile with the register budget of two blocks per SM: does
        # the transposed tile buy anything that a register budget does not?
        Timed("float4_a_rows, __launch_bounds__(NT, 2)", "07", _min_blocks("float4_a_rows", 2),
              _CUBE_4096, (K5,), ("float4_a_rows", "float4")),
    ]
    # 08: chapter 08's own kernel (loads sunk to the store) held to two blocks per SM:
    # at BK = 16 it needs 130 registers and so loses its second block
    out.append(Timed("double_buffer, __launch_bounds__(NT, 2)", "08",
                     _min_blocks("double_buffer", 2), _CUBE_2048, _PAYOFF,
                     ("float4", "double_buffer")))
    # 08: the double buffer whose loads stay in flight, and its alternatives, at two
    # blocks per SM and at one, beside chapters 07 and 08
    for v in ch08_prefetch.ALTERNATIVES:
        out.append(Timed(f"double_buffer: {v}", "08", _prefetch(v), _CUBE_2048, _PAYOFF,
                         ("float4", "double_buffer")))
    # 11: the vector kernel with B read one float at a time again (the control)
    out.append(Timed("sgemm_tiled_vec:scalar_B", "11", _control, _CUBE_2048,
                     tuple({"BLOCK": 16, "VEC": v} for v in (1, 2, 4)), ("sgemm_tiled_vec",)))
    return out + _exercise_entries()


def get(name: str) -> Timed:
    found = [t for t in entries() if t.name == name]
    if not found:
        raise ValueError(f"no timed variant named {name!r}")
    return found[0]


def row(name: str, params: dict | None = None, shape=None) -> dict | None:
    """The recorded row of variant `name` at `params` (its first configuration by
    default), measured on the variant's current text; None where there is none."""
    from gemm_kernels.measure import records
    t = get(name)
    k = t.kernel()
    p = k.resolve(params if params is not None else t.configurations()[0])
    rows = records.current().find(k, shape or t.shape, p)
    return rows[0] if rows else None


def record(names=None, log=print) -> list[dict]:
    """On a GPU: each variant (all, or `names`) checked on a ragged shape and timed at its
    shape and configurations, with its group's registry kernels, in this process; the
    rows merged into the device's recording. A variant that fails the check is reported
    and not timed."""
    from gemm_kernels.measure import record as rec
    from gemm_kernels.measure.check import check
    rows, done = [], set()
    for t in entries():
        if names and t.name not in names:
            continue
        k = t.kernel()
        ragged = (127, 129, 45) if len(t.shape) == 3 else (127, 129)
        for p in t.configurations():
            verdict = check(k, ragged, p)
            if not verdict.ok:
                log(f"  {t.name} {p}: NOT timed, {'refused' if verdict.ok is None else 'wrong'}"
                    f" on {ragged}: {verdict.message}")
                continue
            for who in (k, *t.compare):
                key = (who if isinstance(who, str) else who.name, t.shape, repr(sorted(p.items())))
                if key in done:          # a registry kernel shared by several variants
                    continue
                done.add(key)
                rows.append(rec.measure(who, t.shape, p))
                log(f"  {rows[-1]['kernel']} {p}: {rec.rate_text(rows[-1])}")
    rec.merge(rows, log=log)
    return rows


if __name__ == "__main__":
    record(sys.argv[1:] or None)
