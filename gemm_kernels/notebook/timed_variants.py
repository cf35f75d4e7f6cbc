"""The code variants the chapters time beside the registry's kernels: a registry kernel
around changed text (a `__launch_bounds__` promise added, a control that undoes one
change, the worked solution of an exercise), so that a chapter can answer its question
with a measured rate instead of a prediction.

`python -m gemm_kernels.notebook.timed_variants` (on a GPU) checks each variant on a
ragged shape, times it beside its reference (cuBLAS or the device copy) with the one
harness, and merges the rows into the device's recording, all in one run; a group's
registry kernels are timed in the same run, so the group compares like with like. A
variant's row carries its own name and the hash of its text: a changed variant is never
shown with an old rate. The chapters read the rows back with
`measure.lookup.variant_row(kernel, shape, params)` (worked solutions through
`worked_solutions.pair`): this module imports the chapters' modules, never the reverse.
Importing it imports every chapter module that makes variants; each registers its own
with `measure.studies` (chapter 08's: `ch08_prefetch`), so that a study's step can name
one (`Step.variant`) and be profiled like a registry kernel.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

from gemm_kernels.notebook import (ch03_evidence, ch05_down_column, ch06_tiles, ch07_ablation,
                                   ch08_prefetch, ch09_split, ch10_loads_first, ch10_transpose,
                                   ch11_wide)
from gemm_kernels.notebook import ch15_beyond  # noqa: F401 (registers its variant with the studies)
from gemm_kernels.notebook import ch13_no_overlap  # noqa: F401 (registers its variant with the studies)
from gemm_kernels.notebook import ch09_unpadded  # noqa: F401 (registers its variant with the studies)


@dataclass(frozen=True)
class Timed:
    name: str             # the row's kernel name: unique, readable
    chapter: str
    build: object         # () -> Kernel: the variant
    shape: tuple
    params: tuple = ()    # the configurations timed (dicts); () = the defaults
    compare: tuple = field(default=())   # kernels timed in the same run: registry names or Kernels
    also: tuple = ()      # further shapes, each timed the same way

    def shapes(self) -> tuple:
        return (self.shape, *self.also)

    def kernel(self):
        return self.build()

    def configurations(self) -> tuple:
        return self.params or ({},)


def _min_blocks(name: str, blocks: int):
    return lambda: ch06_tiles.with_min_blocks(name, blocks)


def _ladder_step(variant: str) -> dict:
    """The configuration at which chapter 09's ladder runs `variant` (its study's step)."""
    from gemm_kernels.measure import studies
    return next(s.params for s in studies.get("ch09_ladder").steps if s.variant == variant)


def _exercise_entries() -> list[Timed]:
    """One entry per exercise with a worked solution: the solution at the exercise's
    configuration and timing shape, beside the chapter's kernel at the same one."""
    from gemm_kernels.exercises.catalog import EXERCISES
    from gemm_kernels.exercises.notebooks import solution_kernel, solution_shape
    return [Timed(f"{ex.name}: worked solution", ex.chapter,
                  (lambda name=ex.name: solution_kernel(name)), solution_shape(ex.name),
                  (dict(ex.params),), (ex.kernel,)) for ex in EXERCISES.values()]


def entries() -> list[Timed]:
    """Every variant the chapters time (built lazily: nothing compiles here). Shapes,
    tiles and the kernels compared are the chapters' own constants: what a chapter
    reads back is what was timed."""
    payoff = tuple({**p, "ONE_PER_SM": one}
                   for p in (ch06_tiles.K5, ch08_prefetch.DEEP) for one in (False, True))
    out = [
        # 03: the course notes' question, tx and ty swapped, beside the kernel as written
        Timed(ch03_evidence.SWAPPED, "03", ch03_evidence.swapped_kernel, (2048,) * 3,
              ({"BLOCK": 32},), (ch03_evidence.KERNEL,)),
        # 05: the exercise's question, the default tile with its threads down the column
        # first, beside the kernel as written
        Timed(ch05_down_column.DOWN_COLUMN, "05", ch05_down_column.down_column_kernel,
              ch05_down_column.SHAPE, (), (ch05_down_column.KERNEL,)),
        # 06: the contiguous 8x8 patch held to two blocks per SM (spilling a little):
        # is the strided kernel's gain its second block or its conflict-free reads?
        Timed("tile_2d_reg, __launch_bounds__(NT, 2)", "06", _min_blocks("tile_2d_reg", 2),
              ch06_tiles.CAPPED_SHAPE, (ch06_tiles.CAPPED_PARAMS,), ch06_tiles.CAPPED_COMPARE),
        # 07: the row-major A tile with the register budget of two blocks per SM: does
        # the transposed tile buy anything that a register budget does not?
        Timed("float4_a_rows, __launch_bounds__(NT, 2)", "07", _min_blocks("float4_a_rows", 2),
              ch07_ablation.PROMISED_SHAPE, (ch07_ablation.K5,), ("float4_a_rows", "float4")),
        # 08: chapter 08's own kernel (loads sunk to the store) held to two blocks per SM:
        # at BK = 16 it needs 130 registers and so loses its second block
        Timed("double_buffer, __launch_bounds__(NT, 2)", "08", _min_blocks("double_buffer", 2),
              ch08_prefetch.PAYOFF_SHAPE, payoff, ("float4", "double_buffer")),
    ]
    # 08: the double buffer whose loads stay in flight, and its alternatives, at two
    # blocks per SM and at one, beside chapters 07 and 08
    for v in ch08_prefetch.ALTERNATIVES:
        out.append(Timed(f"double_buffer: {v}", "08", (lambda v=v: ch08_prefetch.variant_kernel(v)), ch08_prefetch.PAYOFF_SHAPE,
                         payoff, ("float4", "double_buffer")))
    # 11: the vector kernel with B read one float at a time again (the control)
    out.append(Timed("sgemm_tiled_vec:scalar_B", "11", ch11_wide.control_kernel,
                     (ch11_wide.SIZE,) * 3,
                     tuple({"BLOCK": 16, "VEC": v} for v in (1, 2, 4)), ("sgemm_tiled_vec",)))
    # 09: the ladder's step 4 in three (ch09_split): the z-order kernel with the capstone's
    # cp.async copies, and the capstone with one fragment set (as built, and held to two
    # blocks per SM), each beside the kernel it changes. The ch09_ladder study times them
    # with the rest of the ladder in one run; this is the same configuration.
    cube = (4096,) * 3
    out.append(Timed(ch09_split.ZORDER_RING, "09", ch09_split.ring_kernel, cube,
                     (_ladder_step(ch09_split.ZORDER_RING),), ("zorder",)))
    one_set = _ladder_step(ch09_split.ONE_FRAGMENT_SET)
    out.append(Timed(ch09_split.ONE_FRAGMENT_SET, "09", ch09_split.one_set_kernel, cube,
                     (one_set, {**one_set, "MINB": 2}), ("capstone",)))
    # 04: the exercise's 50-wavefront layout (A rows of BLOCK, B rows of BLOCK + 1) beside
    # the chapter's fastest layout (51): does one wavefront less pay for 8 more loads?
    from gemm_kernels.exercises.catalog import get as exercise
    from gemm_kernels.exercises.notebooks import solution_shape
    from gemm_kernels.notebook import ch04_banks
    out.append(Timed(ch04_banks.MIXED_TIMED, "04", ch04_banks.mixed_kernel,
                     solution_shape(ch04_banks.EXERCISE),
                     (dict(exercise(ch04_banks.EXERCISE).params),),
                     (exercise(ch04_banks.EXERCISE).kernel,)))
    # 10: the best transpose with every load sent before its first shared store, beside
    # its own text as built (under another name), at the chapter's two shapes
    out.append(Timed(ch10_loads_first.LOADS_FIRST, "10", ch10_loads_first.loads_first_kernel,
                     ch10_transpose.SQUARE, (ch10_loads_first.PARAMS,),
                     (ch10_loads_first.as_built_kernel(),), also=(ch10_transpose.ODD,)))
    return out + _exercise_entries()


def get(name: str) -> Timed:
    found = [t for t in entries() if t.name == name]
    if not found:
        raise ValueError(f"no timed variant named {name!r}")
    return found[0]


# Shapes to check a variant on before timing it: the first one the kernel takes. Ragged,
# except the last: whole 16 x 16 tiles, the only shapes chapter 13's naive WMMA kernel
# takes (its grid still ends in a partial block: 112 columns are 3.5 blocks of 32).
RAGGED = {3: ((127, 129, 45), (127, 1, 1031), (4096, 112, 528)), 2: ((127, 129),)}


def record(names=None, log=print) -> list[dict]:
    """On a GPU: each variant (all, or `names`) checked on a ragged shape and timed at its
    shapes and configurations, with its group's registry kernels, in this process; the
    rows merged into the device's recording. A variant that fails the check is reported
    and not timed."""
    from gemm_kernels.core.launch import problems
    from gemm_kernels.measure import record as rec
    from gemm_kernels.measure.check import check
    rows, done = [], set()
    for t in entries():
        if names and t.name not in names:
            continue
        k = t.kernel()
        for p in t.configurations():
            # a ragged shape the kernel takes (a matrix-vector kernel takes only N == 1)
            ragged = next((s for s in RAGGED[len(t.shape)] if not problems(k, p, s)),
                          RAGGED[len(t.shape)][0])
            verdict = check(k, ragged, p)
            if not verdict.ok:
                log(f"  {t.name} {p}: NOT timed, {'refused' if verdict.ok is None else 'wrong'}"
                    f" on {ragged}: {verdict.message}")
                continue
            for shape in t.shapes():
                for who in (k, *t.compare):
                    key = (who if isinstance(who, str) else who.name, shape, repr(sorted(p.items())))
                    if key in done:          # a registry kernel shared by several variants
                        continue
                    done.add(key)
                    rows.append(rec.measure(who, shape, p))
                    log(f"  {rows[-1]['kernel']} {shape} {p}: {rec.rate_text(rows[-1])}")
    rec.merge(rows, log=log)
    return rows


if __name__ == "__main__":
    record(sys.argv[1:] or None)
