"""Chapters 04 and 09 in a real browser: JupyterLab on a free port with a token, Debian's
chromium driven by Playwright (the system browser, no browser download). Run all cells,
change a widget value, click Run: the widget's output changes and no error appears
beyond the "Your grade" cell's expected one. A screenshot is kept on failure.

Needs `apt-get install chromium` and `pip install playwright` (requirements-dev.txt);
skips, with the reason, where either is absent. The notebooks are copies in a temporary
folder (beside a link to the package), so JupyterLab saves nothing into the repository."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
if not Path(CHROMIUM).is_file():
    pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright: pip install -r requirements-dev.txt")

TOKEN = "gemm-series-browser-test"
# JupyterLab settings for the test: every cell in the page (no windowing), no autosave,
# no news prompt over the notebook.
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(base URL, folder) of a JupyterLab serving copies of the notebooks."""
    work = tmp_path_factory.mktemp("lab")
    (work / "gemm_kernels").symlink_to(ROOT / "gemm_kernels")
    shutil.copytree(ROOT / "notebooks", work / "notebooks")
    settings = work / "settings"
    for name, value in SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(value))
    port = _free_port()
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "MPLBACKEND": "Agg",
           "JUPYTER_RUNTIME_DIR": str(work / "runtime")}
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}",
           f"--ServerApp.root_dir={work}", f"--LabApp.workspaces_dir={work / 'workspaces'}",
           "--allow-root"]
    log = open(work / "lab.log", "w")
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"JupyterLab did not start: {(work / 'lab.log').read_text()[-2000:]}")
        yield base, work
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield b
        b.close()


def _expected_errors(nb: Path) -> int:
    """Cells that are meant to raise (the "Your grade" cell of a chapter)."""
    cells = json.loads(nb.read_text())["cells"]
    return sum("nbval-raises-exception" in c.get("metadata", {}).get("tags", []) for c in cells)


ERRORS = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr'], " \
         ".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']"


def _menu(page, *items: str) -> None:
    """Click the first of `items` that the Run menu offers enabled."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    for item in items:
        entry = page.locator("li.lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel") \
            .get_by_text(item, exact=True)
        if entry.count():
            entry.click()
            return
    raise AssertionError(f"the Run menu offers none of {items}")


def _run_all(page, timeout_s: float) -> None:
    """Run every cell. A "Your grade" cell raises on purpose and JupyterLab stops a run
    at an error, so the run goes on from the first cell not yet run, until none is left."""
    deadline = time.time() + timeout_s
    _menu(page, "Run All Cells")
    for _ in range(10):
        page.wait_for_timeout(1000)
        page.wait_for_function("""() => ![...document.querySelectorAll('.jp-InputPrompt')]
            .some(p => p.textContent.includes('*'))""",
                               timeout=max(1, deadline - time.time()) * 1000, polling=500)
        waiting = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell",
                               has=page.locator(".jp-InputPrompt", has_text="[ ]"))
        if waiting.count() == 0:
            return
        cell = waiting.first
        cell.locator(".jp-InputPrompt").click()
        page.wait_for_function("c => c.classList.contains('jp-mod-active')",
                               arg=cell.element_handle(), timeout=10_000)
        # the last cell has nothing below it; "Do not Advance" adds no empty cell after it
        _menu(page, "Run Selected Cell and All Below",
              "Run Selected Cell and Do not Advance")
    raise AssertionError("cells still not run after 10 runs")


@pytest.mark.parametrize("name", ["04_bank_conflicts.ipynb", "09_zorder_capstone.ipynb"])
def test_run_all_then_a_widget_run_changes_its_output(lab, browser, name, tmp_path):
    base, work = lab
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    shot = tmp_path / f"{name}.png"
    try:
        page.goto(f"{base}/lab/tree/notebooks/{name}?token={TOKEN}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", state="attached", timeout=60_000)
        page.wait_for_function("() => document.querySelector('#jp-main-statusbar')"
                               "?.textContent.includes('Idle')", timeout=60_000)
        _run_all(page, timeout_s=150)
        expected = _expected_errors(work / "notebooks" / name)
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        errors = panel.locator(ERRORS)
        assert errors.count() <= expected, errors.all_inner_texts()

        # the first explorer: its dropdowns, its Run button, and what it shows
        button = panel.locator(".widget-button", has_text="Run").first
        box = button.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
        box.scroll_into_view_if_needed()
        select = box.locator("select").first
        options = select.locator("option").all_inner_texts()
        current = select.input_value()
        values = select.locator("option").evaluate_all("os => os.map(o => o.value)")
        select.select_option(next(v for v in values if v != current))
        before = box.inner_html()
        button.click()
        page.wait_for_function(
            "([el, before]) => el.innerHTML !== before && !el.textContent.includes('running...')",
            arg=[box.element_handle(), before], timeout=60_000, polling=250)
        page.wait_for_timeout(500)
        assert box.inner_html() != before, f"the output did not change ({options})"
        assert errors.count() <= expected, errors.all_inner_texts()
        assert box.locator(ERRORS).count() == 0
    except Exception as e:
        page.screenshot(path=str(shot), full_page=False)
        raise AssertionError(f"{name}: {e}; screenshot at {shot}") from e
    finally:
        page.close()
