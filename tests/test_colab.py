"""The notebooks on Colab, simulated: a notebook alone in an empty folder, COLAB_RELEASE_TAG
set, its first cell cloning the repository from a local file:// URL (GEMM_SERIES_REPO)
and installing nothing over the network (GEMM_SERIES_NO_INSTALL=1, and pip pointed at no
index). Also the pieces: what `first_cell` installs, why the banner says recorded mode,
and the badges and bootstrap that scripts/notebook_header.py writes."""
import importlib.util
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

from gemm_kernels.core import device
from gemm_kernels.notebook import first_cell

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("notebook_header", ROOT / "scripts" / "notebook_header.py")
header = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(header)


# ------------------------------------------------------------------ the simulation

def _source_repo(dest: Path) -> Path:
    """A git repository holding the working tree's files as they are now: the tracked
    ones and those git would track (not ignored), since the GPU host's copy of the tree
    can carry an older index than its files."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:      # a copy of the tree without .git (the GPU host's)
        pytest.skip("the simulated clone needs a git checkout of this repository")
    files = sorted(set(listed.stdout.split()))
    for f in files:
        src = ROOT / f
        if src.is_file() and not src.is_symlink():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "snapshot"]):
        subprocess.run([*git, *cmd], cwd=dest, check=True)
    return dest


@pytest.fixture
def colab(tmp_path, monkeypatch):
    """An empty Colab-like folder, and the environment Colab's kernel would see."""
    src = _source_repo(tmp_path / "src")
    content = tmp_path / "content"
    content.mkdir()
    monkeypatch.setenv("COLAB_RELEASE_TAG", "simulated")
    monkeypatch.setenv("GEMM_SERIES_REPO", src.as_uri())
    monkeypatch.setenv(first_cell.NO_INSTALL, "1")
    monkeypatch.setenv("PIP_NO_INDEX", "1")        # a pip that slips through fails offline
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    # The package must come from the clone, not from this checkout; other entries stay
    # (the GPU host's Jupyter stack is itself on PYTHONPATH).
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and Path(p).resolve() != ROOT]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(kept))
    return content


def _run(nb_path: Path, n_code: int):
    """Execute the first `n_code` code cells of the notebook, in its folder."""
    from nbclient import NotebookClient
    nb = nbformat.read(nb_path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"][:n_code]
    nb.cells = code + [nbformat.v4.new_code_cell(
        "import gemm_kernels; print(gemm_kernels.__file__)")]
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(nb_path.parent)}}).execute()
    return nb.cells


def _text(cell) -> str:
    out = []
    for o in cell.outputs:
        out.append(o.get("text", ""))
        out += [str(v) for v in o.get("data", {}).values()]
        if o.output_type == "error":
            out.append("ERROR " + o.ename + ": " + o.evalue)
    return "\n".join(out)


@pytest.mark.parametrize("name", ["01_naive.ipynb", "solutions/04_solution.ipynb"])
def test_notebook_alone_on_colab_clones_and_runs(colab, name):
    nb = colab / Path(name).name
    shutil.copy(ROOT / "notebooks" / name, nb)
    cells = _run(nb, 2)
    texts = [_text(c) for c in cells]
    assert not any("ERROR" in t for t in texts), texts
    clone = colab / "gemm-series"
    assert (clone / "gemm_kernels" / "__init__.py").is_file()
    assert texts[-1].strip() == str(clone / "gemm_kernels" / "__init__.py")
    assert "Recorded mode" in texts[0]
    assert "Runtime > Change runtime type" in texts[0]   # no GPU here: the way to the T4


def test_second_run_reuses_the_clone(colab):
    nb = colab / "01_naive.ipynb"
    shutil.copy(ROOT / "notebooks" / "01_naive.ipynb", nb)
    _run(nb, 1)
    marker = colab / "gemm-series" / "marker"
    marker.write_text("kept")
    cells = _run(nb, 1)
    assert marker.read_text() == "kept" and "ERROR" not in _text(cells[0])


# ------------------------------------------------------------------ what is installed

def test_missing_lists_only_the_wheels_for_what_is_absent(monkeypatch):
    monkeypatch.setattr(first_cell, "NEEDS", [("CuPy", lambda: True, "cupy-cuda12x"),
                                              ("ptxas", lambda: False, "nvidia-cuda-nvcc-cu12")])
    assert first_cell.missing() == ["nvidia-cuda-nvcc-cu12"]


def test_this_environment_lacks_nothing():
    assert first_cell.missing() == []


def test_install_runs_pip_for_the_missing_wheels_only(monkeypatch):
    calls = []
    monkeypatch.delenv(first_cell.NO_INSTALL, raising=False)
    monkeypatch.setattr(first_cell.subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    assert first_cell.install([]) is None and calls == []
    first_cell.install(["nvidia-cuda-nvdisasm"])
    assert calls == [[sys.executable, "-m", "pip", "install", "-q", "nvidia-cuda-nvdisasm"]]


def test_install_can_be_switched_off(monkeypatch):
    monkeypatch.setenv(first_cell.NO_INSTALL, "1")
    monkeypatch.setattr(first_cell.subprocess, "run", lambda *a, **k: pytest.fail("pip ran"))
    assert "not installing cupy-cuda12x" in first_cell.install(["cupy-cuda12x"])


def test_outside_colab_nothing_is_installed_and_no_colab_hint(monkeypatch, capsys):
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setattr(first_cell, "missing", lambda: pytest.fail("checked for installs"))
    shown = []
    monkeypatch.setattr(first_cell, "display", lambda obj, **kw: shown.append(obj))
    first_cell.prepare()
    assert len(shown) == 1 and "mode" in str(shown[0])


def test_a_chapter_names_its_recording_in_the_one_banner(monkeypatch):
    """A chapter measured on another GPU than the default recording names its recording
    after `prepare`: the banner is redrawn in place (same display id), naming that GPU;
    with no recording to name (None) it stays as it was."""
    from gemm_kernels.measure import records
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    shown, redrawn = [], []
    monkeypatch.setattr(first_cell, "display", lambda obj, **kw: shown.append((str(obj), kw)))
    monkeypatch.setattr(first_cell, "update_display",
                        lambda obj, **kw: redrawn.append((str(obj), kw)))
    other = records.Record(device={"name": "NVIDIA Other GPU"}, created="2026-01-02T00:00:00Z",
                           commit="x", runs={"r": {}})
    first_cell.prepare()
    first_cell.name_recording(None)
    assert redrawn == []
    first_cell.name_recording(other)
    (first, kw0), = shown
    (again, kw1), = redrawn
    assert kw0 == kw1 == {"display_id": first_cell.BANNER_ID}
    assert "Recorded mode" in again and "recorded on NVIDIA Other GPU, 2026-01-02" in again
    assert "NVIDIA Other GPU" not in first


# ------------------------------------------------------------------ why recorded mode

class _CudaError(Exception):
    pass


def _fake_cupy(monkeypatch, count=None, error=None, driver=0, runtime=12090):
    def get_count():
        if error:
            raise _CudaError(error)
        return count
    rt = types.SimpleNamespace(getDeviceCount=get_count, driverGetVersion=lambda: driver,
                               runtimeGetVersion=lambda: runtime)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=rt)))
    monkeypatch.delenv("GEMM_KERNELS_MODE", raising=False)
    device._gpu_present.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_probe():
    device._gpu_present.cache_clear()
    yield
    device._gpu_present.cache_clear()


def test_reason_no_gpu(monkeypatch):
    _fake_cupy(monkeypatch, error="cudaErrorInsufficientDriver", driver=0)
    assert device.recorded_reason() == "no NVIDIA GPU here"
    _fake_cupy(monkeypatch, error="cudaErrorNoDevice: no CUDA-capable device", driver=12080)
    assert device.recorded_reason() == "no NVIDIA GPU here"


def test_reason_old_driver(monkeypatch):
    _fake_cupy(monkeypatch, error="cudaErrorInsufficientDriver", driver=11040)
    why = device.recorded_reason()
    assert "CUDA 11.4" in why and "CUDA 12.9" in why and "525" in why


def test_minor_version_behind_is_not_called_too_old(monkeypatch):
    """CUDA 12.2's driver runs CuPy's 12.9 runtime (minor version compatibility): an
    error there is some other failure, reported as it is."""
    _fake_cupy(monkeypatch, error="cudaErrorUnknown", driver=12020)
    assert device.recorded_reason() == "CuPy cannot use the GPU (cudaErrorUnknown)"


def test_reason_cupy_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)   # `import cupy` raises ImportError
    monkeypatch.delenv("GEMM_KERNELS_MODE", raising=False)
    assert "CuPy is not installed" in device.recorded_reason()


def test_live_has_no_reason(monkeypatch):
    _fake_cupy(monkeypatch, count=1)
    assert device.is_live() and device.recorded_reason() is None


def test_forced_recorded_mode_says_so(monkeypatch):
    _fake_cupy(monkeypatch, count=1)
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    assert "GEMM_KERNELS_MODE=recorded" in device.recorded_reason()


# ------------------------------------------------------------------ badges and bootstrap

def test_notebooks_and_readme_follow_the_repository_setting():
    """Every notebook's badge and bootstrap, and the README's badges, are what
    scripts/notebook_header.py writes from pyproject.toml (run it after changing them)."""
    assert header.main(["--check"]) == 0


def test_badge_points_at_the_notebook_on_github():
    nb = ROOT / "notebooks" / "04_bank_conflicts.ipynb"
    assert header.badge("https://github.com/o/r", nb).endswith(
        "(https://colab.research.google.com/github/o/r/blob/main/notebooks/04_bank_conflicts.ipynb)")


def test_rewriting_is_idempotent_and_keeps_the_chapters_imports():
    old = ('import sys, pathlib\nsys.path.insert(0, "x")\n%matplotlib inline\n'
           'import gemm_kernels as gk\nfrom gemm_kernels import banks\ndisplay.banner()')
    once = header.first_code_source(old, "https://github.com/o/r")
    assert once.endswith("first_cell.prepare()   # on Colab: installs what is missing; the "
                         "banner: which mode, and why\nimport gemm_kernels as gk\n"
                         "from gemm_kernels import banks")
    assert '"GEMM_SERIES_REPO", "https://github.com/o/r"' in once
    assert header.first_code_source(once, "https://github.com/o/r") == once
    title = header.header_source("# 04 · Title\n\nText.", "BADGE")
    assert title == "# 04 · Title\n\nBADGE\n\nText."
    badge = header.badge("https://github.com/o/r", ROOT / "notebooks" / "x.ipynb")
    twice = header.header_source(header.header_source("# T\n\nText.", badge), badge)
    assert twice == f"# T\n\n{badge}\n\nText."
