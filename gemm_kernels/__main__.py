"""Command line: python -m gemm_kernels {bench,check,record,sweep,analyse}."""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from gemm_kernels.core import device

from gemm_kernels.measure import records
from gemm_kernels.core.kernels import KERNELS, get

FIGURES = Path(__file__).resolve().parent.parent / "figures"
SANITIZE_SHAPE = "33x65x17"


def _shape(text: str) -> tuple:
    return tuple(int(x) for x in text.lower().split("x"))


def cmd_bench(a):
    from gemm_kernels.measure.ladder import compare, ladder_kernels, plot
    sizes = a.sizes or [1024, 2048, 4096]
    names = a.kernels or ladder_kernels()
    if not device.is_live():
        print(f"No GPU here: showing the recording ({records.source()}).")
    if a.readme:
        from gemm_kernels.measure.ladder import update_readme
        update_readme(FIGURES.parent / "README.md")
        print("README.md results table updated from", records.source())
        return
    table = compare(names, sizes, repeats=a.repeats)
    print(table)
    out = FIGURES / "ladder.png"
    plot(table, path=out)
    print(f"plot: {out}")


def cmd_check(a):
    names = a.kernels or list(KERNELS)
    if a.sanitize:
        return _sanitize(names)
    if not device.is_live():
        sys.exit("check needs a GPU; there is none here")
    from gemm_kernels.measure.check import check, check_all
    failed = 0
    for n in names:
        if a.shapes:
            gemm = get(n).op in ("sgemm", "dgemm")
            results = [check(n, _shape(s)[:3 if gemm else 2], alpha=1.5 if gemm else 1.0,
                             beta=-0.5 if gemm else 0.0) for s in a.shapes]
        else:
            results = check_all(n)
        for r in results:
            print(r, flush=True)
            failed += r.ok is False
    print(f"{failed} wrong result(s)")
    sys.exit(1 if failed else 0)


def _sanitize(names) -> None:
    """Every kernel once at a small ragged shape under memcheck, then under racecheck:
    one sanitizer process per tool, since each start costs seconds."""
    tool = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not Path(tool).exists():
        print("compute-sanitizer not found: skipped (it comes with the CUDA toolkit)")
        return
    bad = 0
    for t in ("memcheck", "racecheck"):
        cmd = [tool, "--tool", t, "--error-exitcode", "3", sys.executable, "-m",
               "gemm_kernels", "check", "--shapes", SANITIZE_SHAPE, "--kernels", *names]
        res = subprocess.run(cmd, capture_output=True, text=True)
        lines = res.stdout.splitlines()
        summary = [l for l in lines if "ERROR SUMMARY" in l or "RACECHECK SUMMARY" in l]
        checked = [l for l in lines if SANITIZE_SHAPE in l or "33x65" in l]
        ok = res.returncode == 0
        bad += not ok
        print(f"{t:<9} {len(checked)} launches checked: {'clean' if ok else 'FAILED'}  "
              f"{' '.join(summary)}", flush=True)
        if not ok:
            print(res.stdout[-6000:], res.stderr[-2000:])
    sys.exit(1 if bad else 0)


def cmd_record(a):
    from gemm_kernels.measure.record import main_record
    main_record(a.chapters)


def cmd_sweep(a):
    from gemm_kernels.measure.record import merge, sweep_rows
    if not device.is_live():
        sys.exit("sweep needs a GPU; there is none here")
    rows = sweep_rows(a.kernel, _shape(a.shape) if a.shape else None)
    rec = merge(rows)
    print(f"{len(rows)} configurations of {a.kernel} merged into {rec.path}")


def cmd_profile(a):
    from gemm_kernels.measure.profile import main as profile_main
    profile_main()


def cmd_analyse(a):
    from gemm_kernels.core.analysis import kernel_occupancy, summary
    for n in a.kernels or list(KERNELS):
        s = summary(n)
        print(json.dumps({k: v for k, v in s.items() if k != "kernel_histogram"}))
        print("  ", kernel_occupancy(n).explain())


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m gemm_kernels")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench", help="GFLOP/s and %% of cuBLAS; writes figures/ladder.png")
    b.add_argument("--kernels", nargs="+")
    b.add_argument("--sizes", nargs="+", type=int)
    b.add_argument("--repeats", type=int, default=20)
    b.add_argument("--readme", action="store_true",
                   help="write the recorded ladder into README.md's results table")
    b.set_defaults(fn=cmd_bench)
    c = sub.add_parser("check", help="correctness over ragged shapes")
    c.add_argument("--kernels", nargs="+")
    c.add_argument("--shapes", nargs="+", help="e.g. 33x65x17 (alpha=1.5, beta=-0.5)")
    c.add_argument("--sanitize", action="store_true",
                   help="run each kernel under compute-sanitizer memcheck and racecheck")
    c.set_defaults(fn=cmd_check)
    r = sub.add_parser("record", help="measure everything and write figures/data/<device>.json")
    r.add_argument("--chapters", nargs="+")
    r.set_defaults(fn=cmd_record)
    s = sub.add_parser("sweep", help="measure one kernel's valid space and record it")
    s.add_argument("kernel")
    s.add_argument("--shape")
    s.set_defaults(fn=cmd_sweep)
    pr = sub.add_parser("profile", help="Nsight Compute counters (bank conflicts, sectors) "
                        "for every chapter, merged into the record")
    pr.set_defaults(fn=cmd_profile)
    an = sub.add_parser("analyse", help="registers, spills, SASS histogram, occupancy (no GPU)")
    an.add_argument("--kernels", nargs="+")
    an.set_defaults(fn=cmd_analyse)
    a = ap.parse_args(argv)
    a.fn(a)


if __name__ == "__main__":
    main()
