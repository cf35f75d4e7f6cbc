"""Command line: python -m gemm_kernels {bench,check,record,sweep,profile,analyse,grade}.

Bad input is refused before anything runs: argparse-style (exit status 2, a one-line
error after the usage) for names, numbers and shapes; a plain message and exit status 1
for a command that needs a GPU where there is none. Nothing here writes a tracked file
unless asked to (`bench --plot PATH`, `bench --readme [PATH]`, and the recording
commands, which need a GPU).
"""
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
from gemm_kernels.core.launch import DTYPES, shape_problem
from gemm_kernels.core.registry import int_problem, runnable

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SANITIZE_SHAPE = "33x65x17"
BENCH_SIZES = [1024, 2048, 4096]


# ------------------------------------------------------------------ argument types
# argparse turns an ArgumentTypeError into "error: argument --x: <message>", exit 2.

def _count(text: str) -> int:
    """A positive integer (repeats, sizes)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    bad = int_problem("the value", value)
    if bad:
        raise argparse.ArgumentTypeError(bad)
    return value


def _kernel(ops: tuple[str, ...] | None = None):
    """A type for kernel names: a registered kernel (of one of `ops`, if given)."""
    allowed = [n for n, k in KERNELS.items() if ops is None or k.op in ops]

    def parse(name: str) -> str:
        if name not in allowed:
            what = "a kernel" if name not in KERNELS else f"a {'/'.join(ops)} kernel"
            raise argparse.ArgumentTypeError(
                f"{name!r} is not {what}; known: {', '.join(allowed)}")
        return name
    return parse


def _shape(text: str) -> tuple[int, ...]:
    """'MxNxK' or 'ROWSxCOLS': positive integers separated by 'x'. Whether the number
    of dimensions suits a kernel is `launch.shape_problem`'s to say."""
    parts = text.lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a shape; write MxNxK, e.g. 33x65x17") from None
    if len(dims) not in (2, 3) or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a shape; write MxNxK (or ROWSxCOLS for a transpose) with "
            "every dimension at least 1")
    return dims


def _chapter(text: str) -> str:
    chapters = sorted({k.chapter for k in KERNELS.values()})
    if text not in chapters:
        raise argparse.ArgumentTypeError(f"no chapter {text!r}; chapters: {', '.join(chapters)}")
    return text


def _need_gpu(command: str) -> None:
    if not device.is_live():
        sys.exit(f"{command} needs a GPU; there is none here (recorded mode)")


# ------------------------------------------------------------------ bench

def _recorded_sizes(names) -> dict[str, set[int]]:
    """kernel -> the square sizes at which the recording has it with its defaults."""
    rec = records.current()
    out = {}
    for n in names:
        rows = rec.find(n, None, get(n).defaults()) if rec else []
        out[n] = {r["shape"][0] for r in rows
                  if "gflops" in r and len(r["shape"]) == 3 and len(set(r["shape"])) == 1}
    return out


def cmd_bench(a):
    from gemm_kernels.measure.ladder import LADDER_SIZES, compare, ladder_kernels
    if a.readme is not None:
        if a.kernels or a.sizes or a.plot:
            a.parser.error("--readme writes the whole ladder at the README's sizes; "
                           "it takes no --kernels, --sizes or --plot")
        return _bench_readme(a, ladder_kernels(), LADDER_SIZES)
    names = a.kernels or ladder_kernels()
    sizes = a.sizes or BENCH_SIZES
    refused = {n: why for n in names for ok, why in [runnable(get(n))] if not ok}
    for n, why in refused.items():
        print(f"left out: {why}")
    names = [n for n in names if n not in refused]
    if not names:
        a.parser.error("none of the kernels runs on this GPU")
    if not device.is_live():
        print(f"No GPU here: showing the recording ({records.source()}).")
        sizes = _recorded_choice(a, names, sizes)
    # No reference is named: compare chooses cuBLAS SGEMM or DGEMM by each kernel's op.
    table = compare(names, sizes, repeats=a.repeats)
    print(table)
    if a.plot:
        from gemm_kernels.measure.ladder import plot
        plot(table, path=a.plot)
        print(f"plot: {a.plot}")


def _recorded_choice(a, names, sizes) -> list[int]:
    """The sizes to show from the recording. Refused (exit 2, with what is recorded) when
    a size the user asked for, or a kernel the user named, has no row there; default
    sizes the recording lacks are dropped. Single missing cells are listed, not hidden."""
    have = _recorded_sizes(names)
    recorded = sorted(set().union(*have.values()))
    where = f"the recording ({records.recording_label()})"
    if not a.sizes:
        sizes = [s for s in sizes if s in recorded]
    missing = [s for s in sizes if not any(s in have[n] for n in names)]
    if missing or not sizes:
        a.parser.error(f"size(s) {', '.join(map(str, missing)) or 'requested'} not in {where}; "
                       f"recorded sizes: {', '.join(map(str, recorded)) or 'none'}")
    for n in a.kernels or []:
        if not have[n] & set(sizes):
            a.parser.error(f"{n} is not in {where} at {', '.join(map(str, sizes))}; recorded "
                           f"at: {', '.join(map(str, sorted(have[n]))) or 'no size'}")
    gaps = [f"{n} at {s}" for n in names for s in sizes if s not in have[n]]
    if gaps:
        print("Not in the recording, left out:", ", ".join(gaps))
    return sizes


def _bench_readme(a, names, sizes) -> None:
    """Rewrite the block between the README's markers; refuse, leaving the file as it
    was, when the markers are missing or there is nothing to put between them."""
    from gemm_kernels.measure.ladder import README_END, README_START, markdown
    path = Path(a.readme)
    try:
        text = path.read_text()
    except OSError as e:
        sys.exit(f"bench --readme: cannot read {path}: {e.strerror}")
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        sys.exit(f"bench --readme: {path} has no '{README_START}' ... '{README_END}' "
                 "block to replace; left unchanged")
    if not device.is_live() and not any(_recorded_sizes(names)[n] & set(sizes) for n in names):
        sys.exit(f"bench --readme: the recording ({records.recording_label()}) has none of "
                 f"the ladder kernels at {list(sizes)}; {path} left unchanged")
    try:
        block = markdown(sizes)
    except LookupError as e:
        sys.exit(f"bench --readme: {e}; {path} left unchanged")
    start += len(README_START)
    path.write_text(text[:start] + "\n" + block + "\n" + text[end:])
    print(f"{path}: results table written from {records.source()}")


# ------------------------------------------------------------------ check

def _shapes_for(a, names) -> dict[str, list[tuple]]:
    """kernel -> its --shapes, each checked against the kernel's op. A transpose or copy
    kernel reads an MxNxK shape as MxN, so one list serves every kernel (as in
    `--sanitize`)."""
    out = {}
    for n in names:
        k = get(n)
        shapes = [s if k.op in DTYPES else s[:2] for s in a.shapes]
        for s in shapes:
            bad = shape_problem(k, s)
            if bad:
                a.parser.error(f"--shapes: {bad}")
        out[n] = shapes
    return out


def cmd_check(a):
    names = a.kernels or list(KERNELS)
    shapes = _shapes_for(a, names) if a.shapes else None
    _need_gpu("check")
    if a.sanitize:
        return _sanitize(names)
    from gemm_kernels.measure.check import check, check_all
    failed = 0
    for n in names:
        if shapes:
            gemm = get(n).op in DTYPES
            results = [check(n, s, alpha=1.5 if gemm else 1.0, beta=-0.5 if gemm else 0.0)
                       for s in shapes[n]]
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


# ------------------------------------------------------------------ the others

def cmd_record(a):
    _need_gpu("record")
    from gemm_kernels.measure.record import main_record
    main_record(a.chapters)


def cmd_sweep(a):
    shape = None
    if a.shape:
        bad = shape_problem(a.kernel, a.shape)
        if bad:
            a.parser.error(f"--shape: {bad}")
        shape = a.shape
    _need_gpu("sweep")
    from gemm_kernels.measure.record import merge, sweep_rows
    rows = sweep_rows(a.kernel, shape)
    rec = merge(rows)
    print(f"{len(rows)} configurations of {a.kernel} merged into {rec.path}")


def cmd_profile(a):
    _need_gpu("profile")
    from gemm_kernels.measure.profile import main as profile_main
    profile_main()


def cmd_study(a):
    from gemm_kernels.measure import studies
    names = list(studies.STUDIES) if a.all else a.names
    if not names:
        a.parser.error("name one or more studies, or --all")
    for n in names:
        try:
            studies.get(n)
        except ValueError as e:     # the registry's own message, argparse-style
            a.parser.error(str(e))
    # the chapters' variants, registered so that a study's step can name one
    from gemm_kernels.notebook import timed_variants
    for v in a.variants:
        try:
            timed_variants.get(v)
        except ValueError as e:
            a.parser.error(str(e))
    _need_gpu("study")
    from gemm_kernels.measure.record import merge
    from gemm_kernels.measure.study_run import check_steps, study_rows
    if a.check_only:
        wrong = [w for n in names for w in check_steps(n, a.shapes)]
        sys.exit(1 if wrong else 0)
    failed = []
    for n in names:
        try:
            rows = study_rows(n)
        except (RuntimeError, ValueError) as e:     # one failed study does not stop the rest
            print(f"{n}: FAILED\n{e}")
            failed.append(n)
            continue
        rec = merge(rows)
        print(f"{n}: {len(rows)} rows merged into {rec.path}")
    if a.variants:
        # in this process, so that they share the studies' run
        timed_variants.record(a.variants)
    sys.exit(1 if failed else 0)


def _arch(text: str) -> str:
    """An architecture: sm_86, 8.6, ... (see `device.sm_number`)."""
    try:
        return device.arch_name(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def cmd_analyse(a):
    """For --arch, the GPU here, or in recorded mode the recording's architecture; a
    kernel that architecture cannot run is listed with the reason, not compiled."""
    from gemm_kernels.core.analysis import kernel_occupancy, summary
    from gemm_kernels.core.compiler import static_arch
    arch = a.arch or (None if device.is_live() else records.arch())
    lim = device.limits(arch)
    print(f"analysis for {lim['arch']}" + (f" ({lim['limits_note']})" if lim["limits_note"] else ""))
    for n in a.kernels or list(KERNELS):
        try:
            static_arch(get(n), arch)
        except ValueError as e:     # needs a newer GPU, or a toolchain that knows the arch
            print(json.dumps({"kernel": n, "arch": lim["arch"], "refused": str(e)}))
            continue
        s = summary(n, arch=arch)
        print(json.dumps({k: v for k, v in s.items() if k != "kernel_histogram"}))
        print("  ", kernel_occupancy(n, arch=arch).explain())


def cmd_grade(a):
    """Every exercise cell of each notebook: one table per notebook, exit 1 if any fails."""
    from gemm_kernels.exercises.notebooks import grade_notebook
    from gemm_kernels.core.table import Table
    failed = 0
    for path in a.notebooks:
        try:
            reports = grade_notebook(path)
        except ValueError as e:
            a.parser.error(str(e))
        rows = [{"exercise": r.exercise, **{s.name: s.status for s in r.steps},
                 "seconds": round(r.seconds, 1),
                 "first problem": next((f"{s.name}: {s.detail}" for s in r.steps
                                        if s.status == "FAIL"), "")} for r in reports]
        print(Table(rows, ["exercise", "compile", "static", "correct", "speed", "seconds",
                           "first problem"], title=str(path)))
        failed += sum(not r.passed for r in reports)
    if not device.is_live():
        print("No GPU here: correctness (step 3) was checked on the CPU, every thread "
              "emulated, where a C++ compiler is installed; speed (step 4) was not graded.")
    sys.exit(1 if failed else 0)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m gemm_kernels")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench", help="GFLOP/s and %% of cuBLAS per kernel and size")
    b.add_argument("--kernels", nargs="+", type=_kernel(tuple(DTYPES)))
    b.add_argument("--sizes", nargs="+", type=_count,
                   help=f"square sizes (default {' '.join(map(str, BENCH_SIZES))})")
    b.add_argument("--repeats", type=_count, default=20)
    b.add_argument("--plot", metavar="PATH", help="also draw the table into this file")
    b.add_argument("--readme", nargs="?", const=str(README), metavar="PATH",
                   help="write the ladder into the results block of PATH "
                        "(default README.md)")
    b.set_defaults(fn=cmd_bench)
    c = sub.add_parser("check", help="correctness over ragged shapes (needs a GPU)")
    c.add_argument("--kernels", nargs="+", type=_kernel())
    c.add_argument("--shapes", nargs="+", type=_shape,
                   help="e.g. 33x65x17 (alpha=1.5, beta=-0.5); transposes use 33x65")
    c.add_argument("--sanitize", action="store_true",
                   help="run each kernel under compute-sanitizer memcheck and racecheck")
    c.set_defaults(fn=cmd_check)
    r = sub.add_parser("record", help="measure everything and write "
                       "figures/data/<device>.json (needs a GPU)")
    r.add_argument("--chapters", nargs="+", type=_chapter)
    r.set_defaults(fn=cmd_record)
    s = sub.add_parser("sweep", help="measure one kernel's valid space and record it "
                       "(needs a GPU)")
    s.add_argument("kernel", type=_kernel())
    s.add_argument("--shape", type=_shape, help="MxNxK, or ROWSxCOLS for a transpose")
    s.set_defaults(fn=cmd_sweep)
    pr = sub.add_parser("profile", help="Nsight Compute counters (bank conflicts, sectors) "
                        "for every chapter, merged into the record (needs a GPU)")
    pr.set_defaults(fn=cmd_profile)
    st = sub.add_parser("study", help="the measurements behind the chapters' arguments, "
                        "each in one process, merged into the record (needs a GPU)")
    st.add_argument("names", nargs="*", metavar="STUDY")
    st.add_argument("--all", action="store_true", help="every study")
    st.add_argument("--variants", nargs="+", metavar="VARIANT", default=[],
                    help="then time these variants the chapters time (their names in "
                    "gemm_kernels.notebook.timed_variants) in the same run")
    st.add_argument("--check-only", action="store_true", help="only check each "
                    "configuration of the studies (on the ragged shapes, or --shapes); "
                    "time nothing, record nothing")
    st.add_argument("--shapes", nargs="+", type=_shape, metavar="MxNxK",
                    help="the shapes --check-only checks on")
    st.set_defaults(fn=cmd_study)
    an = sub.add_parser("analyse", help="registers, spills, SASS histogram, occupancy (no GPU)")
    an.add_argument("--kernels", nargs="+", type=_kernel())
    an.add_argument("--arch", type=_arch, metavar="sm_XX",
                    help="compile for this architecture (default: the GPU here, or the "
                         "recording's in recorded mode), e.g. sm_75 for a T4")
    an.set_defaults(fn=cmd_analyse)
    g = sub.add_parser("grade", help="grade the exercise cells of students' notebooks "
                       "(steps 3-4 need a GPU)")
    g.add_argument("notebooks", nargs="+", metavar="NOTEBOOK")
    g.set_defaults(fn=cmd_grade)
    for p in (b, c, r, s, pr, st, an, g):
        p.set_defaults(parser=p)     # so a command can refuse its input argparse-style
    a = ap.parse_args(argv)
    a.fn(a)


if __name__ == "__main__":
    main()
