"""Steps 3-4 of the grader, run as `python -m gemm_kernels.exercises.gpu_step JOB.json`
in a child process: a kernel that hangs or faults ends this process, and the notebook
that started it reads the way it ended as the verdict.

Prints one JSON line per step: {"name", "status", "detail"}.

With `--once` it only runs the submission once at RACECHECK_SHAPE: what the racecheck of
an exercise with `racecheck` set runs under compute-sanitizer, in a process of its own.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from gemm_kernels.core.launch import DTYPES, operand_dtypes
from gemm_kernels.exercises.inputs import ALPHA_BETA, RACECHECK_SHAPE, launch_words


def _emit(name: str, status: str, detail: str) -> None:
    print(json.dumps({"name": name, "status": status, "detail": detail}), flush=True)


def main(job_path: str) -> None:
    from gemm_kernels.core.kernels import get as get_kernel
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.grader import FAIL, PASS, student_kernel
    from gemm_kernels.measure import timing
    from gemm_kernels.measure.check import check

    job = json.loads(open(job_path).read())
    ex = get(job["exercise"])
    k, ref = student_kernel(ex, job["source"]), get_kernel(ex.kernel)

    ran = 0
    gemm = k.op in DTYPES
    for shape in ex.shapes:
        for alpha, beta in (ALPHA_BETA if gemm else ((1.0, 0.0),)):
            r = check(k, shape, ex.params, alpha, beta)
            if r.ok is None:          # the registry refuses this shape for this kernel
                continue
            ran += 1
            if not r.ok:
                dims = "x".join(map(str, shape))
                wrong = f"wrong at {dims} with alpha={alpha}, beta={beta}: {r.message}"
                # A race usually shows as a wrong result first: name it when racecheck can
                race = racecheck(job_path)[0] if ex.racecheck else None
                _emit("correct", FAIL, f"{race} ({wrong})" if race else wrong)
                return
    if not ran:
        _emit("correct", FAIL, "every shape was refused: " + r.message)
        return
    for change, shape, alpha, beta in ex.also:
        r = check(k, shape, {**ex.params, **change}, alpha, beta)
        if not r.ok:
            _emit("correct", FAIL, f"wrong at {launch_words(change, shape, alpha, beta)}: "
                                   f"{r.message}")
            return
    race, note = racecheck(job_path) if ex.racecheck else (None, "")
    if race:
        _emit("correct", FAIL, race)
        return
    _emit("correct", PASS, f"every element right on {ran} checks (ragged shapes"
                           + (", alpha/beta 1/0 and 1.5/-0.5" if gemm else "")
                           + ")" + "".join(f"; right at {launch_words(*a)} too"
                                           for a in ex.also)
                           + ", nothing written outside the output" + note)

    fns, shape, unit_rate = _timed_calls(k, ref, ex)
    t = timing.time_gpu(fns)
    rate = {name: unit_rate(x.median_ms) for name, x in t.items()}
    unit = "GFLOP/s" if k.op in DTYPES else "GB/s"
    lib = "cuBLAS" if unit == "GFLOP/s" else "the device copy"
    share = rate["yours"] / rate["chapter"]
    dims = "x".join(map(str, shape))
    detail = (f"{rate['yours']:,.0f} {unit} at {dims}: {share:.0%} of the chapter's kernel "
              f"({rate['chapter']:,.0f}), {rate['yours'] / rate['library']:.0%} of {lib} "
              f"({rate['library']:,.0f}), timed together; asked: {ex.speed:.0%} of the "
              "chapter's kernel")
    _emit("speed", PASS if share >= ex.speed else FAIL, detail)


def sanitizer() -> str | None:
    """compute-sanitizer's path, or None where the CUDA toolkit does not provide it."""
    tool = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    return tool if Path(tool).exists() else None


def racecheck(job_path: str) -> tuple[str | None, str]:
    """(the race, when racecheck reported a hazard; a note for the verdict): the job run
    once (`--once`) under `compute-sanitizer --tool racecheck`, in its own process with
    its own time limit. Only a reported hazard is a failure: a missing tool, a time-out
    or a sanitizer that could not start leave the element-wise check to decide."""
    from gemm_kernels.exercises.grader import RACECHECK_TIME_LIMIT_S
    tool = sanitizer()
    if tool is None:
        return None, "; racecheck was not available (no compute-sanitizer here), so only " \
                     "the element-wise check decided"
    cmd = [tool, "--tool", "racecheck", "--error-exitcode", "3", sys.executable, "-m",
           "gemm_kernels.exercises.gpu_step", job_path, "--once"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=RACECHECK_TIME_LIMIT_S)
    except subprocess.TimeoutExpired:
        return None, f"; racecheck did not finish within {RACECHECK_TIME_LIMIT_S} s, so " \
                     "only the element-wise check decided"
    return race_report(res.stdout + "\n" + res.stderr, res.returncode)


_HAZARDS = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?")


def race_report(output: str, returncode: int) -> tuple[str | None, str]:
    """racecheck's output read as (the race or None, a note)."""
    dims = "x".join(map(str, RACECHECK_SHAPE))
    summary = _HAZARDS.search(output)
    errors = int(summary.group(2)) if summary else 0
    if errors:
        lines = [re.sub(r"^=+\s*", "", l).strip() for l in output.splitlines()]
        # a race is reported on two lines: "... between Write access at X" "and Read ..."
        found = [l + (" " + nxt if nxt.startswith("and ") else "")
                 for l, nxt in zip(lines, lines[1:] + [""])
                 if re.search(r"Race reported|hazard detected", l, re.I)]
        what = found[0] if found else f"{errors} hazard(s)"
        return (f"a data race on shared memory at {dims}: racecheck reported {what}"
                + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")
                + ". Some threads read or wrote a shared tile while others were still "
                  "using it: a __syncthreads() is missing or in the wrong place", "")
    if summary is None or returncode:
        last = [l for l in output.strip().splitlines() if l.strip()]
        return None, ("; racecheck could not run (" + (last[-1].strip() if last else
                      "no message") + "), so only the element-wise check decided")
    return None, f"; racecheck at {dims}: no shared-memory hazard"


def once(job_path: str) -> None:
    """The submission once at RACECHECK_SHAPE, alpha/beta 1.5/-0.5 (what racecheck
    watches)."""
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.grader import student_kernel
    from gemm_kernels.measure.check import check
    job = json.loads(open(job_path).read())
    ex = get(job["exercise"])
    k = student_kernel(ex, job["source"])
    gemm = k.op in DTYPES
    check(k, RACECHECK_SHAPE if gemm else RACECHECK_SHAPE[:2], ex.params,
          *(ALPHA_BETA[1] if gemm else ALPHA_BETA[0]))


def _timed_calls(k, ref, ex):
    """({"yours", "chapter", "library"}: callables on shared random inputs, the shape,
    ms -> rate): the submission, the chapter's kernel and cuBLAS (or the device copy)."""
    import cupy
    from gemm_kernels.core.launch import launcher
    from gemm_kernels.measure import timing
    from gemm_kernels.measure.check import random_normal
    from gemm_kernels.exercises.notebooks import solution_shape
    rng = cupy.random.default_rng()
    shape = solution_shape(ex.name)
    p = ref.resolve(ex.params)
    if k.op in DTYPES:
        (M, N, K), (a_type, b_type, dtype) = shape, operand_dtypes(k.op)
        A, B = random_normal((M, K), a_type, rng), random_normal((K, N), b_type, rng)
        C1, C2, C3 = (cupy.empty((M, N), dtype) for _ in range(3))
        fns = {"yours": launcher(k, A, B, C1, params=p),
               "chapter": launcher(ref, A, B, C2, params=p),
               "library": timing.cublas_call(A, B, C3)}
    else:
        src = random_normal(shape, {"float": "float32", "double": "float64"}[p["T"]], rng)
        out1, out2 = cupy.empty_like(src), cupy.empty_like(src)
        fns = {"yours": launcher(k, src, out1, params=p),
               "chapter": launcher(ref, src, out2, params=p),
               "library": timing.copy_call(src)}
    return fns, shape, timing.unit_and_rate(ref.name, shape, p)[1]


if __name__ == "__main__":
    once(sys.argv[1]) if sys.argv[2:] == ["--once"] else main(sys.argv[1])
