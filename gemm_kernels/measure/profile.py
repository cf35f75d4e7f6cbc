"""Profiler counters for the chapters' evidence, measured with Nsight Compute.

`python -m gemm_kernels profile` launches each configuration below once, under a single
ncu run, and merges the counters into the record as rows with a `metrics` map, stamped
with the profiling process's run and time like every other row.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import replace

from gemm_kernels.measure import ncu
from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.core.launch import DTYPES, kernel_of, operand_dtypes

GLOBAL = ["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
          "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
          "dram__bytes_read.sum", "dram__bytes_write.sum"]
SHARED = ["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
          "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
          "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
          "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"]
# The hierarchical roofline's bytes per level (chapter 00): the L2 sectors (32 bytes)
# that the SMs' loads and stores asked of the L2, and every shared-memory wavefront
# (cp.async's stores into shared memory included, which the op_ld/op_st pair misses).
ROOFLINE = ["lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_write.sum",
      "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]
METRICS = GLOBAL + SHARED + ROOFLINE
GEMM_SHAPE = (1024, 1024, 1024)
TRANSPOSE_SHAPE = (2048, 2048)
# Chapters whose every configuration is profiled (their story is the counters).
SWEPT = {"04", "10", "11"}
# Kernels whose layouts are compared at a fixed tile: every configuration matching this.
SUBSETS = {"zorder": {"BM": 128, "BN": 128, "BK": 8},
           "tile_2d_reg": {"BM": 128, "BN": 128, "BK": 8},
           "tile_2d_strided": {"BM": 128, "BN": 128, "BK": 8}}


def plan() -> list[tuple[str, dict, tuple]]:
    """(kernel, params, shape) for every launch to profile, in launch order; only the
    kernels named in $PROFILE_KERNELS when it is set (to re-profile kernels whose source
    changed without profiling the rest again; the variable reaches ncu's child too)."""
    only = os.environ.get("PROFILE_KERNELS", "").split()
    out = []
    for k in KERNELS.values():
        if only and k.name not in only:
            continue
        shape = GEMM_SHAPE if k.op in DTYPES else TRANSPOSE_SHAPE
        configs = k.valid_configurations() if k.chapter in SWEPT else [k.defaults()]
        if k.name in SUBSETS:
            configs = [k.defaults()] + [c for c in k.valid_configurations()
                                        if all(c[n] == v for n, v in SUBSETS[k.name].items())
                                        and c != k.defaults()]
        if k.op in ("transpose", "copy"):   # the tile-size sweep in float32 only
            configs = [c for c in configs if c.get("T") == "float" and c.get("ROWS") in
                       (None, k.defaults().get("ROWS"))] + [{**k.defaults(), "T": "double"}]
        out += [(k.name, c, shape) for c in configs]
    return out


def launch_plan(study: str | None) -> list[tuple[object, dict, tuple]]:
    """The launches of the chapters' profile (None) or of one ncu study: (kernel, params,
    shape), the kernel a registry name or, for a study's step that names a timed
    variant, that variant's Kernel."""
    if study is None:
        return plan()
    from gemm_kernels.measure import studies
    return [(studies.step_kernel(step) if step.variant else step.kernel, full, shape)
            for step, full, shape in studies.launches(studies.get(study))]


def target(todo: list[tuple[str, dict, tuple]]):
    """Launch every configuration exactly once (ncu profiles each launch)."""
    import cupy
    from gemm_kernels.core.launch import launch
    rng = cupy.random.default_rng(0)
    for name, params, shape in todo:
        k = kernel_of(name)
        if k.op in DTYPES:
            a, b, c = operand_dtypes(k.op)
            M, N, K = shape
            arrays = (rng.standard_normal((M, K)).astype(a), rng.standard_normal((K, N)).astype(b),
                      cupy.zeros((M, N), c))
        else:
            dt = "float32" if params.get("T", "float") == "float" else "float64"
            src = rng.standard_normal(shape).astype(dt)
            arrays = (src, cupy.empty(shape[::-1] if k.op == "transpose" else shape, dt))
        launch(k, *arrays, params=params)
    cupy.cuda.runtime.deviceSynchronize()


def _launchable(study: str | None) -> list[tuple[str, dict, tuple]]:
    from gemm_kernels.core.launch import problems
    return [(n, p, s) for n, p, s in launch_plan(study) if not problems(n, p, s)]


def run(study: str | None = None, metrics: list[str] = METRICS) -> list[dict]:
    """One row per launch with its counters, stamped with this process's run (and the
    study's name, which keeps its rows apart from the chapters' profile)."""
    from gemm_kernels.measure.record import stamp
    todo = _launchable(study)
    entries = sorted({kernel_of(n).entry for n, _, _ in todo})
    argv = [sys.executable, "-m", "gemm_kernels.measure.profile", "--target"]
    if all(isinstance(n, str) for n, _, _ in todo):
        launches = ncu.profile(argv + ([study] if study else []), metrics,
                               "^(" + "|".join(entries) + ")")
    else:     # variants: the child launches their texts from a file (see `plan_file`)
        path = plan_file(todo)
        try:
            launches = ncu.profile(argv + ["--plan", path], metrics,
                                   "^(" + "|".join(entries) + ")")
        finally:
            os.unlink(path)
    if len(launches) != len(todo):
        raise RuntimeError(f"expected {len(todo)} profiled launches, ncu reported {len(launches)}")
    rows = []
    for (name, params, shape), l in zip(todo, launches):
        k = kernel_of(name)
        if k.entry not in l["kernel"]:
            raise RuntimeError(f"launch order mismatch: expected {k.name}, ncu saw {l['kernel']}")
        rows.append(stamp({"chapter": k.chapter, "kernel": k.name, "params": params,
                           "shape": list(shape), "metrics": l["metrics"], "tool": ncu.version(),
                           "source": k.source_hash(),
                           **({"study": study} if study else {})}))
    return rows


def plan_file(todo) -> str:
    """The launches `todo` written to a temporary JSON file for the profiled child, the
    text of each variant included: a variant (a changed copy of a registry kernel's
    source, `studies.Step.variant`) is built by the layer that registered it, which the
    child, in this layer, does not import; it rebuilds each one from its registry kernel
    and its text (`Kernel.with_code`). Returns the file's path."""
    import tempfile
    out = []
    for kernel, params, shape in todo:
        if isinstance(kernel, str):
            out.append({"kernel": kernel, "params": params, "shape": list(shape)})
            continue
        if kernel.base not in KERNELS:
            raise ValueError(f"variant {kernel.name!r}: not made from a registry kernel")
        out.append({"kernel": kernel.base, "variant": kernel.name, "code": kernel.code,
                    "features": list(kernel.features), "params": params,
                    "shape": list(shape)})
    fd, path = tempfile.mkstemp(suffix=".json", prefix="profile-plan-")
    with os.fdopen(fd, "w") as f:
        json.dump(out, f)
    return path


def read_plan(path: str) -> list[tuple[object, dict, tuple]]:
    """The launches of a `plan_file`, each variant rebuilt around its text."""
    with open(path) as f:
        items = json.load(f)
    return [(replace(KERNELS[d["kernel"]].with_code(d["code"], name=d["variant"],
                                                    source=KERNELS[d["kernel"]].source),
                     features=tuple(d["features"]))
             if "variant" in d else d["kernel"], d["params"], tuple(d["shape"]))
            for d in items]


def main():
    if "--target" in sys.argv:
        rest = sys.argv[sys.argv.index("--target") + 1:]
        if rest[:1] == ["--plan"]:
            return target(read_plan(rest[1]))
        return target(_launchable(rest[0] if rest else None))
    from gemm_kernels.measure.record import merge
    rows = run()
    rec = merge(rows)
    for r in rows:
        m = r["metrics"]
        print(f"{r['kernel']:<18} {json.dumps(r['params']):<48} "
              f"ld wf {m[SHARED[0]]:>12,.0f} conf {m[SHARED[2]]:>12,.0f}  "
              f"st wf {m[SHARED[1]]:>10,.0f} conf {m[SHARED[3]]:>10,.0f}  "
              f"sectors/req {m[GLOBAL[0]] / max(m[GLOBAL[1]], 1):.1f}")
    print(f"{len(rows)} profiled configurations merged into {rec.path}")


if __name__ == "__main__":
    main()


def counters(kernel: str, params: dict | None = None, shape=None) -> dict | None:
    """The recorded ncu counters of one configuration (defaults if params is None), at
    `shape` if given, else at whichever shape it was profiled."""
    from gemm_kernels.measure import records
    rec = records.current()
    if rec is None:
        return None
    full = KERNELS[kernel].resolve(params)
    rows = [r for r in rec.find(kernel, shape, full)
            if "metrics" in r and "gflops" not in r and "study" not in r]
    return rows[0] if rows else None


def counter_table(kernels, params: dict | None = None, shared: bool = False):
    """Per kernel: sectors per global load request and DRAM bytes; with `shared`, the
    shared-memory wavefronts and bank conflicts of loads and stores. Recorded counters."""
    from gemm_kernels.measure import records
    from gemm_kernels.core.table import Table
    rows = []
    for name in kernels:
        r = counters(name, (params or {}).get(name))
        if r is None:
            continue
        m = r["metrics"]
        row = {"kernel": name, "params": r["params"], "shape": r["shape"]}
        if shared:
            row |= {"ld wavefronts": m[SHARED[0]], "ld conflicts": m[SHARED[2]],
                    "st wavefronts": m[SHARED[1]], "st conflicts": m[SHARED[3]]}
        else:
            row |= {"sectors/request": m[GLOBAL[0]] / max(m[GLOBAL[1]], 1),
                    "load requests": m[GLOBAL[1]], "DRAM MB read": m[GLOBAL[2]] / 1e6}
        rows.append(row)
    rec = records.current()
    src = f"Nsight Compute, {rec.label}" if rec else "no recording"
    return Table(rows, list(rows[0]) if rows else ["kernel"], title=src)
