"""The grader's own machinery, without a GPU: NVRTC messages on the cell's lines, the
child process's endings (time-out, crash, verdicts) with `subprocess.run` replaced, the
report, the solution regions, the magic, and `python -m gemm_kernels grade`."""
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gemm_kernels.exercises import grader, magic
from gemm_kernels.exercises.catalog import get
from gemm_kernels.exercises.grader import (FAIL, PASS, SKIPPED, Report, Step,
                                           compile_messages, crash_message, run_gpu_steps)
from gemm_kernels.exercises.stubs import STUB, skeleton, stub_lines
from exercise_helpers import solution

ROOT = Path(__file__).resolve().parent.parent
NAME = "01_index"


# ------------------------------------------------------------------ messages

def test_compile_messages_are_on_the_cells_lines():
    log = ('exercise.cu(12): error: identifier "xx" is undefined\n'
           "exercise.cu(3): warning #177-D: variable \"y\" was declared but never referenced\n"
           "exercise.cu(20): error: expected a \";\"\n"
           "2 errors detected in the compilation of \"exercise.cu\".")
    # source line 12 is cell line 13: line 1 of the cell is `%%exercise NAME`
    assert compile_messages(log) == ['line 13: identifier "xx" is undefined',
                                     'line 21: expected a ";"']
    assert compile_messages(log, first_line=1)[0].startswith("line 12:")


def test_compile_messages_without_a_located_error():
    assert compile_messages("") == ["NVRTC failed"]
    assert compile_messages("something odd\nNVRTC_ERROR_INVALID_OPTION\n") == \
        ["NVRTC_ERROR_INVALID_OPTION"]


@pytest.mark.parametrize("stderr, expected", [
    ("cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an "
     "illegal memory access was encountered", "illegal address"),
    ("cupy.cuda.runtime.CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory "
     "access was encountered", "illegal address"),
    ("CUDA_ERROR_MISALIGNED_ADDRESS: misaligned address", "misaligned address"),
    ("Traceback (most recent call last):\n  ...\nMemoryError: out of memory\n\n",
     "the GPU step failed: MemoryError: out of memory"),
    ("", "the GPU step failed: no message"),
])
def test_crash_message(stderr, expected):
    assert crash_message(stderr).startswith(expected)


# ------------------------------------------------------------------ the child process

def fake_run(monkeypatch, returncode=0, stdout="", stderr="", raises=None):
    """Replace subprocess.run for the grader; returns the list of calls' kwargs."""
    calls = []

    def run(cmd, **kw):
        calls.append({"cmd": cmd, **kw})
        if raises:
            raise raises(cmd, kw.get("timeout"))
        return subprocess.CompletedProcess(cmd, returncode, stdout, stderr)
    monkeypatch.setattr(grader.subprocess, "run", run)
    return calls


def step(name, status, detail):
    return json.dumps({"name": name, "status": status, "detail": detail})


def test_a_time_out_is_a_timed_out_failure_of_step_correct(monkeypatch):
    calls = fake_run(monkeypatch, raises=subprocess.TimeoutExpired)
    steps = run_gpu_steps(get(NAME), "src", time_limit=7)
    assert [(s.name, s.status) for s in steps] == [("correct", FAIL), ("speed", SKIPPED)]
    assert "timed out after 7 s" in steps[0].detail
    assert calls[0]["timeout"] == 7
    # the child imports the package the notebook did, whatever its working directory
    assert str(grader.PACKAGE_ROOT) in calls[0]["env"]["PYTHONPATH"].split(os.pathsep)
    assert (grader.PACKAGE_ROOT / "gemm_kernels").is_dir()


def test_a_silent_crash_is_a_failure_with_the_crash_message(monkeypatch):
    fake_run(monkeypatch, returncode=1,
             stderr="Traceback ...\nCUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal "
                    "memory access was encountered\n")
    steps = run_gpu_steps(get(NAME), "src")
    assert [(s.name, s.status) for s in steps] == [("correct", FAIL), ("speed", SKIPPED)]
    assert steps[0].detail.startswith("illegal address")
    assert steps[0].hint == get(NAME).hints.get("correct", "")


def test_a_crash_after_step_correct_fails_step_speed(monkeypatch):
    fake_run(monkeypatch, returncode=-9, stdout=step("correct", PASS, "right") + "\n",
             stderr="Killed\n")
    steps = run_gpu_steps(get(NAME), "src")
    assert [(s.name, s.status) for s in steps] == [("correct", PASS), ("speed", FAIL)]
    assert steps[1].detail == "the GPU step failed: Killed"


def test_the_childs_two_steps_are_the_verdicts(monkeypatch):
    out = "\n".join(["some noise from a library",
                     step("correct", PASS, "every element right"),
                     step("speed", FAIL, "50% of the chapter's kernel")]) + "\n"
    fake_run(monkeypatch, stdout=out)
    steps = run_gpu_steps(get(NAME), "src")
    assert [(s.name, s.status, s.detail) for s in steps] == [
        ("correct", PASS, "every element right"), ("speed", FAIL, "50% of the chapter's kernel")]
    assert steps[0].hint == "" and steps[1].hint == get(NAME).hints.get("speed", "")


def test_a_wrong_result_leaves_speed_not_run(monkeypatch):
    fake_run(monkeypatch, stdout=step("correct", FAIL, "wrong at 33x65x17") + "\n")
    steps = run_gpu_steps(get(NAME), "src")
    assert [(s.name, s.status) for s in steps] == [("correct", FAIL), ("speed", SKIPPED)]


def test_a_hint_may_answer_the_failures_detail(monkeypatch):
    ex = dataclasses.replace(get(NAME), hints={
        "correct": lambda d: "look at the edge" if "33x65x17" in d else "look elsewhere"})
    fake_run(monkeypatch, stdout=step("correct", FAIL, "wrong at 33x65x17") + "\n")
    assert run_gpu_steps(ex, "src")[0].hint == "look at the edge"
    fake_run(monkeypatch, stdout=step("correct", FAIL, "wrong at 1x1x1") + "\n")
    assert run_gpu_steps(ex, "src")[0].hint == "look elsewhere"
    assert grader.hint(ex, "speed", "anything") == ""


# ------------------------------------------------------------------ the report

def report(*statuses):
    return Report("x", [Step(n, s) for n, s in zip(("compile", "static", "correct", "speed"),
                                                   statuses)])


def test_report_passed_and_complete():
    every = report(PASS, PASS, PASS, PASS)
    assert every.passed and every.complete
    here = report(PASS, PASS, SKIPPED, SKIPPED)
    assert here.passed and not here.complete
    assert "passed what runs here" in str(here)
    bad = report(PASS, FAIL, SKIPPED, SKIPPED)
    assert not bad.passed and not bad.complete and "not yet" in str(bad)
    every.assert_passed()
    here.assert_passed()


def test_a_grade_without_the_gpu_steps_says_it_is_not_a_full_grade(capsys):
    report(PASS, PASS, PASS, PASS).assert_passed()
    assert capsys.readouterr().out == ""
    report(PASS, PASS, SKIPPED, SKIPPED).assert_passed()
    out = capsys.readouterr().out
    assert "NOT FULLY GRADED" in out and "correct and speed" in out and "GPU" in out
    report(PASS, PASS, PASS, SKIPPED).assert_passed()     # step 3 ran on the CPU
    out = capsys.readouterr().out
    assert "NOT FULLY GRADED" in out and "checked on the CPU" in out and "GPU" in out


def test_the_not_fully_graded_message_names_a_gpu_that_runs_the_exercise(capsys):
    """A cp.async kernel (sm_80) must not send the student to Colab's T4 (sm_75): the
    message takes its advice from the exercise's own kernel."""
    cpasync = grader.student_kernel(get("09_capstone_step"), "")
    assert cpasync.min_arch >= 80
    r = report(PASS, PASS, PASS, SKIPPED)
    r.gpu_advice = grader.get_a_gpu(cpasync)
    r.assert_passed()
    out = capsys.readouterr().out
    assert "sm_80" in out and "T4 GPU)" not in out and "too old" in out
    report(PASS, PASS, PASS, SKIPPED).assert_passed()    # no kernel known: any GPU
    assert "T4 GPU" in capsys.readouterr().out


def test_assert_passed_names_the_first_failing_step():
    r = Report("x", [Step("compile", PASS), Step("static", FAIL, "no LDS.128", "use float4"),
                     Step("correct", FAIL, "wrong")])
    with pytest.raises(AssertionError, match=r"x: step 'static' failed: no LDS.128 "
                                             r"\(hint: use float4\)"):
        r.assert_passed()


# ------------------------------------------------------------------ solution regions

SOLUTION = """\
int row = 0;
    // TODO: the row
    // BEGIN SOLUTION
    row = y;
    // END SOLUTION
return row;"""


def test_skeleton_replaces_each_region_by_the_stub_at_its_indentation():
    assert skeleton(SOLUTION) == f"int row = 0;\n    // TODO: the row\n    {STUB}\nreturn row;"
    assert skeleton("no region\n") == "no region\n"


def test_stub_lines_are_cell_lines():
    src = skeleton(SOLUTION + "\n" + SOLUTION)
    assert stub_lines(src) == [4, 8]
    assert stub_lines(src, first_line=1) == [3, 7]
    assert stub_lines(SOLUTION) == []


@pytest.mark.parametrize("text, message", [
    ("// BEGIN SOLUTION\n// BEGIN SOLUTION\n// END SOLUTION\n", "inside a solution region"),
    ("a\n// BEGIN SOLUTION\nb\n", "not closed"),
    ("a\n// END SOLUTION\n", "without a"),
])
def test_malformed_regions_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        skeleton(text)


# ------------------------------------------------------------------ the magic

def test_the_magic_with_an_unknown_name_prints_a_message(capsys):
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gemm_kernels.exercises")
    assert shell.run_cell_magic("exercise", "no_such_exercise", "__global__ void k() {}\n") \
        is None
    out = capsys.readouterr().out
    assert "no exercise named 'no_such_exercise'" in out and NAME in out


def test_verdict_before_a_run_says_which_cell_to_run(monkeypatch):
    monkeypatch.setattr(magic, "_LAST", {})
    with pytest.raises(AssertionError, match=f"run its %%exercise {NAME} cell first"):
        magic.verdict(NAME)


def test_static_grading_time_of_the_solution():
    """Steps 1-2 of chapter 01's solution without a GPU (asked: under 3 s); printed, since
    the time depends on the machine."""
    took = []
    for _ in range(2):               # the first may load NVRTC and ptxas in this process
        start = time.perf_counter()
        r = grader.grade(NAME, solution(NAME), gpu=False, emulate=False)
        took.append(time.perf_counter() - start)
        assert r.passed, str(r)
    print(f"\nstatic grading of {NAME}'s solution: {took[0]:.2f} s, again {took[1]:.2f} s")


# ------------------------------------------------------------------ python -m gemm_kernels grade

def grade_cli(*paths):
    return subprocess.run([sys.executable, "-m", "gemm_kernels", "grade", *map(str, paths)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "GEMM_KERNELS_MODE": "recorded"})


def test_grade_cli_refuses_the_student_version():
    res = grade_cli(ROOT / "notebooks" / "01_naive.ipynb")
    assert res.returncode == 1, res.stdout + res.stderr
    row = next(l for l in res.stdout.splitlines() if l.lstrip().startswith(NAME))
    assert row.split()[1:3] == [PASS, FAIL], res.stdout          # compile, static
    assert "static: " in row and STUB in row


def test_grade_cli_passes_the_solution_and_says_what_needs_a_gpu():
    res = grade_cli(ROOT / "notebooks" / "solutions" / "01_solution.ipynb")
    assert res.returncode == 0, res.stdout + res.stderr
    row = next(l for l in res.stdout.splitlines() if l.lstrip().startswith(NAME))
    assert row.split()[1:3] == [PASS, PASS], res.stdout
    assert "speed (step 4) was not graded" in res.stdout


def test_grade_cli_refuses_a_file_that_is_not_a_notebook(tmp_path):
    bad = tmp_path / "kernel.cu"
    bad.write_text("__global__ void k() {}\n")
    res = grade_cli(bad)
    assert res.returncode == 2 and "not a readable notebook" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_grade_cli_refuses_a_notebook_without_an_exercise_cell(tmp_path):
    nb = tmp_path / "empty.ipynb"
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                                         "source": ["print(1)\n"]}],
                              "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    res = grade_cli(nb)
    assert res.returncode == 2 and "no %%exercise cell to grade" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_a_marker_left_above_a_written_part_says_to_delete_it():
    # the student wrote the part under the marker and left the marker line in
    src = solution("06_tile_2d_reg").replace("// BEGIN SOLUTION", STUB, 1)
    static = {s.name: s for s in grader.grade("06_tile_2d_reg", src, gpu=False,
                                              emulate=False).steps}["static"]
    assert static.status == FAIL and "delete the marker line" in static.detail, static
