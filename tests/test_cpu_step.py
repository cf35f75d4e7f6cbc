"""Step 3 without a GPU: a kernel run on the CPU, every thread emulated
(`gemm_kernels.exercises.cpu_step`). The kernels of the series pass; planted bugs of
each kind the step promises to find (a wrong index, an access outside an array, a
missing barrier, a kernel that never ends) fail, each with its own message."""
import re
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.exercises import cpu_step
from gemm_kernels.exercises.catalog import EXERCISES
from gemm_kernels.exercises.grader import FAIL, PASS, SKIPPED, grade

pytestmark = pytest.mark.skipif(cpu_step.host_compiler() is None,
                                reason="no C++ compiler here: the CPU step cannot run")


def planted(kernel: str, old: str, new: str, count: int = 1):
    """Registry kernel `kernel` with `old` replaced by `new` in its source."""
    k = KERNELS[kernel]
    text = k.source_text()
    assert text.count(old) == count, f"{old!r} occurs {text.count(old)} times in {kernel}"
    return k.with_code(text.replace(old, new), name=f"{kernel}:planted", source="exercise.cu")


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_every_exercise_kernel_of_the_series_passes_on_the_cpu(name):
    ex = EXERCISES[name]
    ok, detail = cpu_step.correct_on_cpu(KERNELS[ex.kernel], ex.params)
    if cpu_step.emulation_problem(KERNELS[ex.kernel].source_with_headers()):
        # inline PTX (ldmatrix, mma; cp.async only in the capstone's helpers, which are
        # emulated): GPU only, and it says so
        assert ok is None and "inline PTX" in detail, detail
        return
    assert ok is True, detail
    assert "every element right" in detail and "no data race" in detail, detail


def test_a_wrong_index_is_a_wrong_result():
    k = planted("naive", "A[row * K + k]", "A[row * K + k / 2]")
    ok, detail = cpu_step.correct_on_cpu(k, {"BLOCK": 8, "MAPPING": "x->col"})
    assert ok is False and detail.startswith("wrong at"), detail
    assert "elements wrong" in detail


def test_a_missing_bounds_check_is_an_access_outside_the_output():
    k = planted("naive", "if (row < M && col < N)", "if (row < M + 1 && col < N)")
    ok, detail = cpu_step.correct_on_cpu(k, {"BLOCK": 8, "MAPPING": "x->col"})
    assert ok is False and "AddressSanitizer" in detail, detail
    assert "outside" in detail and "line" in detail, detail


def test_a_float4_read_past_an_array_is_reported_with_its_16_bytes():
    # g++ at -O1 splits a float4 copy into four floats before AddressSanitizer sees it,
    # which reported the overrun as 'a read of 4 bytes'; the access is one of 16
    k = planted("float4", "if (row0 + m < M && k0 + k < K) v = load_float4(",
                "v = load_float4(")
    ok, detail = cpu_step.correct_on_cpu(k, KERNELS["float4"].defaults())
    # AddressSanitizer names A where it can attribute the read, else "invalid memory"
    assert ok is False and re.search(r"a read of 16 bytes (outside A|to invalid memory)",
                                     detail), detail
    # a scalar access keeps its own width
    k = planted("naive", "if (row < M && col < N)", "if (row < M + 1 && col < N)")
    ok, detail = cpu_step.correct_on_cpu(k, {"BLOCK": 8, "MAPPING": "x->col"})
    assert "of 4 bytes outside" in detail, detail


def test_a_misaligned_float4_is_named_as_a_gpu_would_name_it():
    # k without its * 4: the float4 starts at a float that is not a multiple of 4. An
    # x86 CPU reads it anyway (or faults with a bare SEGV); a GPU stops with 'misaligned
    # address', and so does the emulation, at the line of the load
    k = planted("float4", "k = f % (BK / 4) * 4;", "k = f % (BK / 4);")
    ok, detail = cpu_step.correct_on_cpu(k, KERNELS["float4"].defaults())
    assert ok is False and "a misaligned address: a read of a float4 (16 bytes)" in detail, \
        detail
    assert "line" in detail and "SEGV" not in detail and "bounds" not in detail, detail
    # the negative control: the kernel as written, every float4 aligned, passes
    ok, detail = cpu_step.correct_on_cpu(KERNELS["float4"], KERNELS["float4"].defaults())
    assert ok is True, detail


def test_the_misaligned_report_is_read_from_the_sanitizer_text():
    text = ("vec4.cuh:3:12: runtime error: load of misaligned address 0x6040 for type "
            "'const struct float4', which requires 16 byte alignment\n"
            "    #0 0x1 in load_float4(float const*) vec4.cuh:3\n"
            f"    #1 0x2 in sgemm {cpu_step.SOURCE_NAME}:37\n")
    said = cpu_step.sanitizer_message(text, 1)
    assert said.startswith("a misaligned address: a read of a float4 (16 bytes)"), said
    assert "at line 38 of your cell" in said, said    # line 1 of the cell is %%exercise
    # an overrun is still an overrun
    assert "misaligned" not in cpu_step.sanitizer_message(
        "ERROR: AddressSanitizer: heap-buffer-overflow\nREAD of size 16\n", 1)


def test_a_kernel_of_whole_tiles_only_does_not_claim_ragged_shapes():
    ok, detail = cpu_step.correct_on_cpu(KERNELS["wmma_naive"], {})
    assert ok is True and "ragged" not in detail, detail
    assert "the small shapes it takes (32x48x64, 16x80x48)" in detail, detail
    ok, detail = cpu_step.correct_on_cpu(KERNELS["naive"], {"BLOCK": 8, "MAPPING": "x->col"})
    assert "small ragged shapes" in detail, detail


def test_a_missing_barrier_is_a_data_race_on_shared_memory():
    k = planted("smem_tiled", "__syncthreads();", "", count=4)
    ok, detail = cpu_step.correct_on_cpu(k, {"BLOCK": 8})
    assert ok is False and "data race" in detail, detail


def test_a_kernel_that_never_ends_is_a_time_out(monkeypatch):
    monkeypatch.setattr(cpu_step, "RUN_LIMIT_S", 3)
    k = planted("naive", "for (int k = 0; k < K; ++k)", "for (int k = 0; k < K; k += 0)")
    ok, detail = cpu_step.correct_on_cpu(k, {"BLOCK": 8, "MAPPING": "x->col"})
    assert ok is False and "never finished" in detail, detail


def test_inline_ptx_is_refused_with_its_reason():
    # the capstone's cp.async helpers are emulated (test_cpu_step_cp_async.py); the
    # tensor-core kernels' ldmatrix and mma are not
    ok, detail = cpu_step.correct_on_cpu(KERNELS["mma_sync"], {})
    assert ok is None and "inline PTX (cp.async, ldmatrix.sync, mma.sync) has no CPU " \
        "emulation" in detail, detail


def test_the_grader_runs_step_3_on_the_cpu_without_a_gpu():
    ex = EXERCISES["01_index"]
    src = KERNELS[ex.kernel].source_text()
    report = grade(ex.name, src, gpu=False)
    steps = {s.name: s.status for s in report.steps}
    assert steps == {"compile": PASS, "static": PASS, "correct": PASS, "speed": SKIPPED}, report


def _writer(delay: float, fail: bool = False):
    """A stand-in compiler: writes its output after `delay` seconds (or fails)."""
    def command(folder, out):
        body = "import sys; sys.exit(1)" if fail else \
            f"import time; time.sleep({delay}); open({out!r}, 'w').write(open('in.txt').read())"
        return [sys.executable, "-c", body]
    return command


def test_builds_of_one_key_at_the_same_moment_share_one_whole_binary(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_step, "CACHE", tmp_path)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda d: cpu_step.cached_binary(
            "k", {"in.txt": "whole"}, _writer(d)), [0.3, 0.2, 0.1, 0.0]))
    assert {b for b, _ in results} == {tmp_path / "k" / "run"}
    assert (tmp_path / "k" / "run").read_text() == "whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k"]   # no build folder left


def test_a_failed_build_caches_nothing_and_returns_the_compiler_run(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_step, "CACHE", tmp_path)
    binary, res = cpu_step.cached_binary("k", {"in.txt": "x"}, _writer(0, fail=True))
    assert binary is None and res.returncode == 1
    assert list(tmp_path.iterdir()) == []
