"""Architectures: the limits table, kernels that need a newer GPU, occupancy as
cuda_occupancy.h computes it, the analysis's architecture, and the default recording."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_kernels.core import analysis, compiler, device, launch
from gemm_kernels.core.kernels import KERNELS, get
from gemm_kernels.core.registry import FEATURES, runnable
from gemm_kernels.measure import records

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def on(monkeypatch):
    """Recorded mode whose recording was made on a GPU of the given compute capability."""
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")

    def use(cc):
        monkeypatch.setattr(device, "_RECORDED", {"compute_capability": cc})
    return use


# ------------------------------------------------------------------ the table

@pytest.mark.parametrize("text,sm", [("sm_75", 75), ("sm86", 86), ("compute_90", 90),
                                     ("8.9", 89), ("12.0", 120), (100, 100), ((12, 1), 121)])
def test_architectures_are_read_in_every_usual_form(text, sm):
    assert device.sm_number(text) == sm


@pytest.mark.parametrize("bad", ["ampere", "sm_", "9", None, "9.0.1"])
def test_a_word_that_is_no_architecture_is_a_value_error_naming_the_forms(bad):
    with pytest.raises(ValueError, match="sm_75, sm_86"):
        device.sm_number(bad)


def test_every_row_of_the_table_describes_an_sm():
    for sm, row in device.ARCH_LIMITS.items():
        lim = device.limits_for(sm)
        assert lim["arch"] == f"sm_{sm}" and lim["limits_note"] is None
        assert lim["smem_per_block_optin"] + lim["smem_reserved_per_block"] <= lim["smem_per_sm"]
        assert lim["max_threads_per_sm"] % lim["warp_size"] == 0
        assert lim["smem_reserved_per_block"] == (1024 if sm >= 80 else 0)
    # the numbers the chapters lean on: a T4 holds 32 warps, an RTX 30xx/40xx/50xx 48
    assert device.limits_for("sm_75")["max_threads_per_sm"] == 1024
    assert {device.limits_for(a)["max_threads_per_sm"] for a in (86, 89, 120)} == {1536}


@pytest.mark.parametrize("cc,near", [("10.3", "sm_100"), ("11.0", "sm_100"),
                                     ("12.1", "sm_120"), ("8.7", "sm_86")])
def test_an_unknown_compute_capability_takes_the_nearest_older_row_and_says_so(cc, near):
    lim = device.limits_for(cc)
    assert lim["arch"] == device.arch_name(cc)
    assert near in lim["limits_note"] and lim["arch"] in lim["limits_note"]
    assert lim["smem_per_sm"] == device.ARCH_LIMITS[device.sm_number(near)]["smem_per_sm"]


def test_a_gpu_older_than_the_series_is_a_clear_value_error():
    with pytest.raises(ValueError, match=r"6\.1 \(sm_61\) is older than the oldest .* sm_75"):
        device.limits_for("6.1")


def test_fp32_lanes_of_an_unknown_compute_capability_is_none_not_a_type_error():
    assert device.fp32_lanes("10.3") is None
    assert device.peak_fp32_gflops({"compute_capability": "11.0", "sm_count": 1,
                                    "sm_clock_mhz": 1000.0}) is None


# ------------------------------------------------------------------ kernels and archs

def test_the_capstone_needs_cp_async_and_says_so_before_anything_is_compiled(on, monkeypatch):
    on("7.5")
    def no_nvrtc(*a):
        raise AssertionError("NVRTC ran for a kernel this GPU cannot run")
    monkeypatch.setattr(compiler, "_ptx", no_nvrtc)
    cap = get("capstone")
    assert cap.min_arch == 80 and get("naive").min_arch == device.OLDEST
    assert runnable(cap) == (False, "capstone needs cp.async, sm_80 or newer; "
                                    "this GPU is sm_75")
    assert launch.problems("capstone", None, (64, 64, 64)) == [runnable(cap)[1]]
    assert cap.valid_configurations() == []
    with pytest.raises(ValueError, match="needs cp.async, sm_80 or newer; this GPU is sm_75"):
        analysis.summary("capstone")
    with pytest.raises(ValueError, match="capstone needs cp.async"):
        launch.prepare("capstone", (), None)
    assert runnable(cap, "sm_80") == (True, "")


_ARCH_GUARD = re.compile(r"#if __CUDA_ARCH__ >= (\d+)\n(.*?)(?:#else\n(.*?))?#endif", re.S)


def _older_gpus_compile(code: str, arch: int) -> str:
    """The code as a GPU older than sm_`arch` compiles it: where a block is guarded by
    `#if __CUDA_ARCH__ >= NN` (NN >= arch), only its `#else` part (or nothing)."""
    return _ARCH_GUARD.sub(lambda m: (m.group(3) or "") if int(m.group(1)) // 10 >= arch
                           else m.group(0), code)


def test_a_feature_guarded_by_the_architecture_with_a_fallback_is_not_required():
    code = "#if __CUDA_ARCH__ >= 800\n cp.async x;\n#else\n plain;\n#endif\n"
    assert "cp.async" not in _older_gpus_compile(code, 80)
    assert "cp.async" in _older_gpus_compile("cp.async x;", 80)
    assert "cp.async" not in _older_gpus_compile("#if __CUDA_ARCH__ >= 800\ncp.async;\n#endif", 80)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_kernel_declares_the_features_its_source_uses(name):
    """A feature appears in the source's code (not only in comments) exactly when the
    kernel declares it; every entry of a shared file is held to what that file uses."""
    k = KERNELS[name]
    code = re.sub(r"//[^\n]*|/\*.*?\*/", "", k.source_with_headers(), flags=re.S)
    used = {f for f in FEATURES if f in _older_gpus_compile(code, FEATURES[f][0])}
    assert set(k.features) == used, f"{name}: declares {k.features}, its code uses {used}"


def test_the_analysis_compiles_for_the_recordings_gpu_and_says_which(on):
    on("8.6")
    assert device.target_arch() == "sm_86"
    s = analysis.summary("naive")
    assert s["arch"] == "sm_86"
    occ = analysis.kernel_occupancy("naive")
    assert occ.arch == "sm_86" and occ.max_warps_per_sm == 48
    assert analysis.summary("naive", arch="sm_75")["arch"] == "sm_75"


def test_a_toolchain_that_cannot_compile_for_an_arch_says_so(monkeypatch):
    monkeypatch.setattr(compiler, "supported_archs", lambda: (75, 80, 90))
    with pytest.raises(ValueError, match=r"cannot compile for sm_110; it compiles for sm_75"):
        compiler.resources(get("naive"), {}, "11.0")


def test_the_capstones_shared_memory_rule_uses_the_architectures_sm():
    """Two blocks of 65 KiB of stages (STAGES=4, BK=16) fit in an H100's 228 KiB, not in
    an RTX 4090's 100 KiB; the message names that architecture's SM."""
    cap = get("capstone")
    p = {"MINB": 2, "STAGES": 4}
    assert not [m for m in cap.problems(p, "sm_90") if "shared memory" in m]
    bad = cap.problems(p, "sm_89")
    assert any("do not fit in the 100 KiB of an sm_89 SM" in m for m in bad), bad


# ------------------------------------------------------------------ occupancy

SM90 = device.limits_for("sm_90")


def test_registers_are_allocated_per_sub_partition_as_cuda_occupancy_h_does():
    # one warp of 200 registers: 6400 per warp, 2 per sub-partition (16384 each), so 8
    # blocks; the whole register file alone would hold 10
    assert analysis.occupancy(32, 200, 0, SM90).limits["registers"] == 8
    # 1024 threads at 72 registers: 32 warps x 2304 > 65536 per block, it cannot launch
    occ = analysis.occupancy(1024, 72, 0, SM90)
    assert occ.blocks_per_sm == 0 and "registers" in occ.limiter


def test_shared_memory_is_rounded_to_the_allocation_unit_with_the_reserve():
    # sm_80: 1000 + 1024 reserved -> 2048 (128-byte units): 82 blocks' worth of 164 KiB
    assert analysis.occupancy(32, 32, 1000, device.limits_for("sm_80")).limits[
        "shared memory"] == 167936 // 2048
    # sm_75: no reserve, 256-byte units: 1000 -> 1024, 64 of them in 64 KiB
    assert analysis.occupancy(32, 32, 1000, device.limits_for("sm_75")).limits[
        "shared memory"] == 64


def test_the_capstone_fits_one_block_per_sm_on_a_consumer_gpu():
    """65 KiB of stages per block: three on an H100's SM, one on an RTX 30xx/40xx/50xx."""
    assert analysis.kernel_occupancy("capstone", arch="sm_90").limits["shared memory"] == 3
    occ = analysis.kernel_occupancy("capstone", arch="sm_86")
    assert occ.blocks_per_sm == 1 and occ.limiter == "shared memory"


# ------------------------------------------------------------------ recordings

def _write(path: Path, name: str, cc: str, created: str):
    path.write_text(json.dumps({"schema": 2, "device": {"name": name, "compute_capability": cc},
                                "created": created, "commit": "x", "runs": {}, "results": []}))


def test_the_default_recording_is_the_h200s_whatever_is_newer(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "DATA_DIR", tmp_path)
    monkeypatch.delenv("GEMM_KERNELS_RECORD", raising=False)
    _write(tmp_path / records.DEFAULT, "NVIDIA H200", "9.0", "2026-11-22T00:00:00Z")
    _write(tmp_path / "nvidia-h100.json", "NVIDIA H100", "9.0", "2027-01-01T00:00:00Z")
    _write(tmp_path / "tesla-t4.json", "Tesla T4", "7.5", "2027-02-01T00:00:00Z")
    assert records.load().device["name"] == "NVIDIA H200"
    listed = records.available()
    assert [r["path"].name for r in listed][0] == records.DEFAULT and listed[0]["default"]
    assert {r["label"] for r in listed} >= {"recorded on Tesla T4, 2027-02-01"}
    assert {r["path"].name: r["arch"] for r in listed}["tesla-t4.json"] == "sm_75"
    monkeypatch.setenv("GEMM_KERNELS_RECORD", str(tmp_path / "tesla-t4.json"))
    assert records.load().arch == "sm_75"


def test_without_the_default_the_newest_stands_in_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "DATA_DIR", tmp_path)
    monkeypatch.delenv("GEMM_KERNELS_RECORD", raising=False)
    _write(tmp_path / "nvidia-h100.json", "NVIDIA H100", "9.0", "2027-01-01T00:00:00Z")
    _write(tmp_path / "tesla-t4.json", "Tesla T4", "7.5", "2027-02-01T00:00:00Z")
    with pytest.warns(UserWarning, match="no nvidia-h200.json"):
        assert records.load().device["name"] == "Tesla T4"


def test_the_recording_shown_sets_the_analysis_arch(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    _write(tmp_path / "t4.json", "Tesla T4", "7.5", "2027-02-01T00:00:00Z")
    monkeypatch.setenv("GEMM_KERNELS_RECORD", str(tmp_path / "t4.json"))
    monkeypatch.setattr(records, "_LOADED", {})
    monkeypatch.setattr(device, "_RECORDED", {})
    assert records.arch() == "sm_75" and device.target_arch() == "sm_75"
    assert device.limits()["max_threads_per_sm"] == 1024


def test_the_committed_recording_is_an_sm_90_one():
    assert records.read(records.DATA_DIR / records.DEFAULT).arch == "sm_90"


# ------------------------------------------------------------------ the command line

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "gemm_kernels", *args], cwd=ROOT,
                          capture_output=True, text=True,
                          env={"GEMM_KERNELS_MODE": "recorded", "PATH": "/usr/bin:/bin"})


def test_analyse_compiles_for_the_arch_asked_and_refuses_what_it_cannot_run():
    res = _cli("analyse", "--arch", "sm_75", "--kernels", "naive", "capstone")
    assert res.returncode == 0, res.stderr
    lines = [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]
    assert lines[0]["kernel"] == "naive" and lines[0]["arch"] == "sm_75"
    assert lines[1] == {"kernel": "capstone", "arch": "sm_75",
                        "refused": "capstone needs cp.async, sm_80 or newer; sm_75 is older"}
    assert res.stdout.startswith("analysis for sm_75")


def test_analyse_refuses_a_word_that_is_no_architecture():
    res = _cli("analyse", "--arch", "turing")
    assert res.returncode == 2 and "not an architecture" in res.stderr


def test_a_hopper_only_kernel_sends_the_student_to_a_hopper_gpu():
    from gemm_kernels.exercises.grader import get_a_gpu
    text = get_a_gpu(get("wgmma_ws"))
    assert "sm_90 NVIDIA GPU" in text and "H100" in text and "or newer" not in text
    assert "or newer" in get_a_gpu(get("capstone")) and "T4" in get_a_gpu(get("naive"))
