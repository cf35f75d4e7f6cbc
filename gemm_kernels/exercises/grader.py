"""Grade a submission step by step: compile, static, correct, speed.

Each step gives a verdict and, when it fails, what went wrong and a hint; a step that
cannot run here says so and how to get a GPU. The GPU steps run in a child process with
a time limit (`gpu_step`), so a kernel that hangs or faults ends that process, not the
notebook. Without a GPU, step 3 runs the kernel on the CPU instead (`cpu_step`, every
thread emulated, each run a child process with a time limit); step 4 needs a GPU.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from gemm_kernels.core import compiler, device
from gemm_kernels.exercises.catalog import Exercise, get
from gemm_kernels.exercises.cpu_step import correct_on_cpu
from gemm_kernels.exercises.stubs import STUB, stub_lines
from gemm_kernels.exercises.submission import SOURCE_NAME, submission_kernel

GPU_TIME_LIMIT_S = 120            # a correct submission grades in seconds; a hang does not
RACECHECK_TIME_LIMIT_S = 90       # one small launch under racecheck, sanitizer start included
# The folder holding gemm_kernels/: the child process imports the package from there, as
# the notebook did, whatever its working directory (a notebook folder, nbgrader's copies).
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
def get_a_gpu(k) -> str:
    """How to get a GPU that runs kernel `k` (Colab's T4 unless its features need a
    newer one; None: any kernel of the course)."""
    if k is not None and k.arch_suffix:     # a feature of one architecture (wgmma: Hopper alone)
        return (f"open this notebook on a machine with an sm_{k.min_arch} NVIDIA GPU (an "
                "H100, H200 or GH200: this kernel runs on no other)")
    if k is not None and k.min_arch > device.OLDEST:
        return (f"open this notebook on a machine with an sm_{k.min_arch} or newer NVIDIA "
                "GPU (an A100, L4 or H100; Colab's T4 is too old for it)")
    return ("open this notebook in Google Colab (Runtime > Change runtime type > T4 GPU) "
            "or on any machine with an NVIDIA GPU")
PASS, FAIL, SKIPPED = "pass", "FAIL", "not run"


@dataclass
class Step:
    name: str
    status: str
    detail: str = ""
    hint: str = ""


@dataclass(repr=False)
class Report:
    exercise: str
    steps: list[Step] = field(default_factory=list)
    seconds: float = 0.0
    # where to get a GPU that runs this exercise's kernel (`get_a_gpu`): a cp.async
    # kernel needs sm_80, so "Colab's T4" would send the student to a GPU that refuses it
    gpu_advice: str = ""

    @property
    def passed(self) -> bool:
        """Every step that could run here passed."""
        return all(s.status != FAIL for s in self.steps)

    @property
    def complete(self) -> bool:
        """Every step ran (a GPU was there)."""
        return all(s.status != SKIPPED for s in self.steps)

    def assert_passed(self):
        """Raise on the first failed step. Where steps were skipped (no GPU), the cell
        passes on what ran here but says plainly that it is not a full grade: a kernel
        that compiles and looks right can still compute the wrong numbers."""
        bad = [s for s in self.steps if s.status == FAIL]
        if bad:
            s = bad[0]
            raise AssertionError(f"{self.exercise}: step '{s.name}' failed: {s.detail}"
                                 + (f" (hint: {s.hint})" if s.hint else ""))
        if not self.complete:
            skipped = [s.name for s in self.steps if s.status == SKIPPED]
            if "correct" in skipped:
                print(f"{self.exercise}: NOT FULLY GRADED. Steps 1-2 passed here, but "
                      f"{' and '.join(skipped)} did not run, so nothing has checked yet that "
                      "your kernel computes the right numbers. Run this cell on a GPU "
                      "(step 3 says which will do) for the full grade.")
            else:
                advice = self.gpu_advice or get_a_gpu(None)
                print(f"{self.exercise}: NOT FULLY GRADED. Your kernel computes the right "
                      "numbers (checked on the CPU, every thread emulated), but how fast it "
                      f"runs needs a GPU. For the full grade, {advice}, then run the "
                      "exercise cell and this one again.")

    def __repr__(self):
        return str(self)

    def __str__(self):
        lines = [f"{self.exercise}: " + ("passed" if self.passed and self.complete else
                                         "passed what runs here" if self.passed else
                                         "not yet") + f" ({self.seconds:.1f} s)"]
        for i, s in enumerate(self.steps, 1):
            lines.append(f"  {i}. {s.name:<8} {s.status:<8} {s.detail}")
            if s.status == FAIL and s.hint:
                lines.append(f"     hint: {s.hint}")
        return "\n".join(lines)

    def _repr_html_(self):
        color = {PASS: "green", FAIL: "crimson", SKIPPED: "gray"}
        rows = "".join(
            f"<tr><td>{i}</td><td>{s.name}</td><td style='color:{color[s.status]}'>"
            f"<b>{s.status}</b></td><td style='text-align:left'>{_html(s.detail)}"
            + (f"<br><i>hint: {_html(s.hint)}</i>" if s.status == FAIL and s.hint else "")
            + "</td></tr>" for i, s in enumerate(self.steps, 1))
        return (f"<table><caption>{self.exercise} ({self.seconds:.1f} s)</caption>"
                f"{rows}</table>")


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") \
        .replace("\n", "<br>")


def student_kernel(exercise: Exercise, source: str):
    """The registry kernel of the exercise around the student's source."""
    return submission_kernel(exercise.name, exercise.kernel, source)


def grade(name: str, source: str, gpu: bool | None = None, emulate: bool = True) -> Report:
    """All steps for `source` (the student's CUDA text). gpu: run the GPU steps (None:
    when this machine has a GPU). Without them, step 3 runs on the CPU unless `emulate`
    is False (then steps 3-4 are left not run: what a test of steps 1-2 alone wants)."""
    ex = get(name)
    start = time.perf_counter()
    report = Report(ex.name)
    k = student_kernel(ex, source)
    report.gpu_advice = get_a_gpu(k)
    steps = report.steps
    steps.append(_compile(ex, k))
    steps.append(_static(ex, k, source) if steps[-1].status == PASS else
                 Step("static", SKIPPED, "needs a kernel that compiles"))
    gpu = device.is_live() if gpu is None else gpu
    if steps[-1].status != PASS:
        steps += [Step("correct", SKIPPED, "needs steps 1-2 to pass"),
                  Step("speed", SKIPPED, "needs a correct kernel")]
    elif not gpu:
        steps += [cpu_correct(ex, k) if emulate else
                  Step("correct", SKIPPED, "not run: steps 1-2 only were asked for"),
                  Step("speed", SKIPPED, "needs a GPU: to time your kernel, " + get_a_gpu(k))]
    else:
        steps += run_gpu_steps(ex, source)
    report.seconds = time.perf_counter() - start
    return report


# ------------------------------------------------------------------ steps 1-2

_NVRTC_LINE = re.compile(re.escape(SOURCE_NAME) + r"\((\d+)\): (error|warning)[^:]*: (.*)")


def compile_messages(log: str, first_line: int = 2) -> list[str]:
    """NVRTC's errors as 'line N: message', N counted in the student's cell, whose line 1
    is the `%%exercise` line (`first_line`: the cell line of the source's line 1)."""
    found = [f"line {int(m.group(1)) + first_line - 1}: {m.group(3).strip()}"
             for m in _NVRTC_LINE.finditer(log) if m.group(2) == "error"]
    return found or [log.strip().splitlines()[-1] if log.strip() else "NVRTC failed"]


def hint(ex: Exercise, step: str, detail: str) -> str:
    """The exercise's hint for a failed step: a fixed text, or a function of the failure's
    detail, so that a hint can answer what went wrong rather than every possible slip."""
    h = ex.hints.get(step, "")
    return h(detail) if callable(h) else h


def _compile(ex: Exercise, k) -> Step:
    try:
        compiler.ptx(k, ex.params)
    except RuntimeError as e:
        detail = "; ".join(compile_messages(str(e))[:5])
        return Step("compile", FAIL, detail, hint(ex, "compile", detail))
    return Step("compile", PASS, "NVRTC compiled it")


def _static(ex: Exercise, k, source: str) -> Step:
    try:
        res = compiler.resources(k, ex.params)
        text = compiler.sass(k, ex.params) if ex.sass else ""
    except RuntimeError as e:
        detail = str(e).splitlines()[0]
        return Step("static", FAIL, detail, hint(ex, "static", detail))
    problems = []
    todo = stub_lines(source)
    if todo:
        problems.append(f"write the part marked '{STUB}' (line "
                        f"{', '.join(map(str, todo))} of the cell), then delete the marker "
                        "line: while it is there, the grader takes that part as not written")
    if res["spill_stores"] or res["spill_loads"] or res["stack_bytes"]:
        # the finding first, its evidence after: a table that keeps only a message's
        # gist (the text before its first colon) then says what is wrong
        problems.append(f"values live in slow local memory, {res['stack_bytes']} bytes of "
                        f"stack and {res['spill_stores']} bytes of spill stores: either an "
                        "array indexed by a value the compiler cannot resolve or more live "
                        "values than registers")
    if res["registers"] > ex.max_registers:
        problems.append(f"{res['registers']} registers per thread, more than the "
                        f"{ex.max_registers} this exercise allows")
    for op in ex.sass:
        if not re.search(rf"\b{re.escape(op)}\b", text):
            problems.append(f"no {op} in the SASS")
    for check in ex.static_checks:
        problems += check(source)
    detail = "; ".join(problems) if problems else \
        f"{res['registers']} registers, no spills" + \
        (f", {', '.join(ex.sass)} present" if ex.sass else "") + \
        "".join(f"; {n}" for n in (c.note(source) for c in ex.static_checks
                                   if getattr(c, "note", None)) if n)
    return Step("static", FAIL if problems else PASS, detail,
                hint(ex, "static", detail) if problems else "")


# ------------------------------------------------------------------ steps 3-4

def cpu_correct(ex: Exercise, k) -> Step:
    """Step 3 without a GPU: the kernel run on the CPU, every thread emulated
    (`cpu_step`); skipped with the reason where that cannot run."""
    ok, detail = correct_on_cpu(k, ex.params, also=ex.also)
    if ok is None:
        return Step("correct", SKIPPED, f"{detail}, so step 2 checked what it could without "
                                        f"running it; to run it, {get_a_gpu(k)}")
    return Step("correct", PASS if ok else FAIL, detail,
                "" if ok else hint(ex, "correct", detail))


def run_gpu_steps(ex: Exercise, source: str, time_limit: float = GPU_TIME_LIMIT_S) -> list[Step]:
    """Steps 3-4 in a child process: its verdicts, or the way it ended (a time-out, an
    illegal address) as the verdict of the step it was in."""
    if ex.racecheck:   # the racecheck runs inside, with its own limit
        time_limit += RACECHECK_TIME_LIMIT_S
    with tempfile.TemporaryDirectory() as d:
        job = Path(d) / "job.json"
        job.write_text(json.dumps({"exercise": ex.name, "source": source}))
        try:
            path = [str(PACKAGE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
            res = subprocess.run([sys.executable, "-m", "gemm_kernels.exercises.gpu_step",
                                  str(job)], capture_output=True, text=True,
                                 timeout=time_limit,
                                 env={**os.environ, "PYTHONPATH": os.pathsep.join(path)})
        except subprocess.TimeoutExpired:
            detail = (f"timed out after {time_limit:.0f} s: the kernel never finished (a loop "
                      "that does not end, or a __syncthreads() some threads of the block "
                      "never reach)")
            return [Step("correct", FAIL, detail, hint(ex, "correct", detail)),
                    Step("speed", SKIPPED, "needs a correct kernel")]
    steps = []
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            steps.append(Step(d["name"], d["status"], d["detail"],
                              hint(ex, d["name"], d["detail"]) if d["status"] == FAIL else ""))
    if res.returncode and len(steps) < 2:
        detail = crash_message(res.stderr)
        steps.append(Step("correct" if not steps else "speed", FAIL, detail,
                          hint(ex, "correct", detail)))
    while len(steps) < 2:
        steps.append(Step(("correct", "speed")[len(steps)], SKIPPED, "needs a correct kernel"))
    return steps


def crash_message(stderr: str) -> str:
    """What ended the child process, in a student's words."""
    if re.search(r"illegal (memory )?address|ILLEGAL_ADDRESS|IllegalAddress", stderr):
        return ("illegal address: a thread read or wrote outside the arrays (check the "
                "bounds of every load and store)")
    if re.search(r"misaligned address|MISALIGNED", stderr):
        return "misaligned address: a vector load or store at an address not a multiple of its width"
    last = [l for l in stderr.strip().splitlines() if l.strip()]
    return "the GPU step failed: " + (last[-1] if last else "no message")
