"""Every command of `python -m gemm_kernels`, run as a reader without a GPU would run it
(recorded mode, a subprocess): exit status, message, and no tracked file changed."""
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
START, END = "<!-- results:start -->", "<!-- results:end -->"


def run(*args, **env):
    res = subprocess.run([sys.executable, "-m", "gemm_kernels", *map(str, args)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT),
                              "GEMM_KERNELS_MODE": "recorded", **env})
    assert "Traceback" not in res.stderr, res.stderr
    return res


def _tracked_state() -> str:
    """`git status` of the tracked files plus their hashes (a file already modified
    before the test must not change either)."""
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    dirty = [line[3:] for line in status.splitlines()]
    return status + "".join(hashlib.sha1((ROOT / f).read_bytes()).hexdigest()
                            for f in dirty if (ROOT / f).is_file())


@pytest.fixture(autouse=True)
def no_tracked_file_changes():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout to see tracked files")
    before = _tracked_state()
    yield
    assert _tracked_state() == before, "a CLI command changed a tracked file"


def _block(text: str) -> str:
    return text[text.index(START):text.index(END)]


# ---------------------------------------------------------------- bench

def test_bench_prints_the_table_and_writes_nothing():
    res = run("bench")       # it used to rewrite the tracked figures/ladder.png
    assert res.returncode == 0, res.stderr
    assert "recorded on" in res.stdout and "capstone" in res.stdout and "cublas" in res.stdout
    assert "plot:" not in res.stdout


def test_bench_plot_goes_where_asked(tmp_path):
    out = tmp_path / "sub" / "ladder.png"
    res = run("bench", "--kernels", "capstone", "--sizes", "2048", "--plot", out)
    assert res.returncode == 0, res.stderr
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_bench_dgemm_is_accepted():
    res = run("bench", "--kernels", "dgemm_tiled")
    assert res.returncode == 0, res.stderr
    assert "dgemm_tiled" in res.stdout


@pytest.mark.parametrize("args,needle", [
    (["--kernels", "nonesuch"], "argument --kernels: 'nonesuch' is not a kernel; known: naive"),
    (["--kernels", "transpose_naive"], "'transpose_naive' is not a sgemm/dgemm/hgemm kernel"),
    (["--repeats", "0"], "argument --repeats: the value must be at least 1, got 0"),
    (["--repeats", "-5"], "at least 1, got -5"),
    (["--repeats", "2.5"], "'2.5' is not an integer"),
    (["--sizes", "0"], "argument --sizes: the value must be at least 1, got 0"),
    (["--sizes", "-1024"], "at least 1, got -1024"),
    (["--sizes", "1000"], "size(s) 1000 not in the recording"),
    (["--kernels", "dgemm_tiled", "--sizes", "1024"], "recorded sizes: 2048, 4096"),
    (["--readme", "x.md", "--sizes", "1024"], "--readme writes the whole ladder"),
])
def test_bench_refuses_bad_input(args, needle):
    res = run("bench", *args)
    assert res.returncode == 2
    assert needle in res.stderr


def test_bench_size_not_recorded_lists_recorded_sizes():
    res = run("bench", "--sizes", "1000", "1024")
    assert res.returncode == 2
    # every square size the recording holds (a study may add one, e.g. chapter 02's 2047)
    listed = res.stderr.split("recorded sizes: ")[1].split()[0:]
    sizes = {int(x.strip(",")) for x in listed if x.strip(",").isdigit()}
    assert {1024, 2048, 4096, 8192} <= sizes and 1000 not in sizes


# ---------------------------------------------------------------- bench --readme

def test_readme_table_is_what_bench_readme_writes(tmp_path):
    copy = tmp_path / "README.md"
    shutil.copy(README, copy)
    res = run("bench", "--readme", copy)
    assert res.returncode == 0, res.stderr
    assert _block(copy.read_text()) == _block(README.read_text()), \
        "README.md's results table is not the committed recording's; run bench --readme"


def test_readme_without_markers_is_left_alone(tmp_path):
    path = tmp_path / "README.md"
    path.write_text("# no results block here\n")
    res = run("bench", "--readme", path)
    assert res.returncode == 1 and "no '<!-- results:start -->'" in res.stderr
    assert path.read_text() == "# no results block here\n"


@pytest.mark.parametrize("results", [[], "foreign"])
def test_readme_from_an_empty_or_foreign_recording_is_refused(tmp_path, results):
    import json
    rows = [] if results == [] else [
        {"chapter": "09", "kernel": "capstone", "params": {}, "shape": [2048] * 3,
         "source": "000000000000", "gflops": {"median": 1.0, "min": 1.0, "max": 1.0}}]
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps({"schema": 1, "device": {"name": "Other GPU"},
                               "created": "2026-01-01T00:00:00Z", "commit": "x",
                               "results": rows}))
    path = tmp_path / "README.md"
    shutil.copy(README, path)
    before = path.read_text()
    res = run("bench", "--readme", path, GEMM_KERNELS_RECORD=str(rec))
    assert res.returncode == 1
    assert "has none of the ladder kernels" in res.stderr and "left unchanged" in res.stderr
    assert path.read_text() == before


# ---------------------------------------------------------------- GPU commands

@pytest.mark.parametrize("args,needle", [
    (["check"], "check needs a GPU"),
    (["check", "--kernels", "naive", "--shapes", "33x65x17"], "check needs a GPU"),
    (["check", "--sanitize"], "check needs a GPU"),
    (["record"], "record needs a GPU"),
    (["sweep", "naive"], "sweep needs a GPU"),
    (["sweep", "transpose_naive", "--shape", "64x32"], "sweep needs a GPU"),
    (["profile"], "profile needs a GPU"),
    (["study", "--all"], "study needs a GPU"),
    (["study", "ch09_ladder"], "study needs a GPU"),
    (["study", "ch09_step7_choices", "--check-only", "--shapes", "33x65x17"], "study needs a GPU"),
    (["study", "ch09_ladder", "--variants", "09_zorder: worked solution"], "study needs a GPU"),
])
def test_gpu_commands_say_they_need_a_gpu(args, needle):
    res = run(*args)
    assert res.returncode == 1
    assert needle in res.stderr


@pytest.mark.parametrize("args,needle", [
    (["check", "--kernels", "nonesuch"], "argument --kernels: 'nonesuch' is not a kernel"),
    (["check", "--shapes", "4x4"], "naive is a sgemm kernel: its shape is 3 integers"),
    (["check", "--shapes", "axbxc"], "'axbxc' is not a shape; write MxNxK"),
    (["check", "--shapes", "0x1x1"], "every dimension at least 1"),
    (["check", "--shapes", "4x4x4x4"], "'4x4x4x4' is not a shape"),
    (["check", "--shapes", "4.5x4x4"], "'4.5x4x4' is not a shape"),
    (["record", "--chapters", "99"], "no chapter '99'; chapters: 00, 01"),
    (["sweep", "nonesuch"], "argument kernel: 'nonesuch' is not a kernel"),
    (["sweep", "naive", "--shape", "64x64"], "its shape is 3 integers (M, N, K)"),
    (["sweep", "transpose_naive", "--shape", "64x64x64"], "2 integers (rows, cols)"),
    (["analyse", "--kernels", "naive", "nonesuch"], "'nonesuch' is not a kernel"),
    (["study"], "name one or more studies, or --all"),
    (["study", "nonesuch"], "no study named 'nonesuch'; known studies: ch09_ladder"),
    (["study", "ch09_ladder", "--variants", "nonesuch"], "no timed variant named 'nonesuch'"),
    (["study", "ch09_ladder", "--check-only", "--shapes", "0x1x1"], "every dimension at least 1"),
])
def test_bad_arguments_come_before_the_gpu(args, needle):
    res = run(*args)
    assert res.returncode == 2
    assert needle in res.stderr
    assert "needs a GPU" not in res.stderr


def test_check_reads_a_gemm_shape_as_rows_cols_for_transposes():
    res = run("check", "--kernels", "transpose_naive", "--shapes", "33x65x17")
    assert res.returncode == 1 and "check needs a GPU" in res.stderr


def test_analyse_runs_without_a_gpu():
    res = run("analyse", "--kernels", "naive")
    assert res.returncode == 0, res.stderr
    assert '"kernel": "naive"' in res.stdout and "warps per SM" in res.stdout
