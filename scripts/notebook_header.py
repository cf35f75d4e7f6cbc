"""Write the "Open in Colab" badges and the notebooks' first code cell from one setting.

The repository URL is `[project.urls] Repository` in pyproject.toml. From
it this script writes:

* in every notebook (notebooks/ and notebooks/solutions/), the badge line under the
  title of the first markdown cell, and the first code cell's bootstrap: find the
  repository above the notebook, or on Colab clone it, then `first_cell.prepare()`. The
  chapter's own imports in that cell are kept as they are; no other cell is touched;
* in README.md, a Colab column in the chapters table.

The first code cell is then run alone (its banner is the cell's committed output), unless
`--no-execute`. `--check` changes nothing and exits 1 when a file is out of date.

    .venv/bin/python scripts/notebook_header.py [--check] [--no-execute]
"""
from __future__ import annotations

import argparse
import copy
import re
import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("notebooks/solutions/*.ipynb")])
BRANCH = "main"   # the branch Colab opens the notebooks from
BADGE_SVG = "https://colab.research.google.com/assets/colab-badge.svg"


def repository_url() -> str:
    """The one setting, `[project.urls] Repository` in pyproject.toml. Not the git
    remote: a clone's remote is wherever it was cloned from (a local path in CI), and
    the badges must not change with it."""
    url = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    return re.sub(r"\.git$", "", url.rstrip("/"))


def colab_url(repo: str, notebook: Path) -> str:
    m = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)", repo)
    if not m:
        raise SystemExit(f"Colab opens notebooks from GitHub only; the repository is {repo}")
    return (f"https://colab.research.google.com/github/{m[1]}/blob/{BRANCH}/"
            f"{notebook.relative_to(ROOT).as_posix()}")


def badge(repo: str, notebook: Path) -> str:
    return f"[![Open In Colab]({BADGE_SVG})]({colab_url(repo, notebook)})"


BOOTSTRAP = '''\
import importlib.util, os, pathlib, subprocess, sys
# Make gemm_kernels importable: the repository above this notebook, or on Colab (where
# the notebook comes alone) a clone of it next to the notebook.
here = pathlib.Path.cwd()
root = next((p for p in [here, *here.parents] if (p / "gemm_kernels").is_dir()), None)
if root is None and importlib.util.find_spec("gemm_kernels") is None and (
        "COLAB_RELEASE_TAG" in os.environ or "google.colab" in sys.modules):
    root = here / "gemm-series"
    if not root.is_dir():
        url = os.environ.get("GEMM_SERIES_REPO", "{url}")
        subprocess.run(["git", "clone", "-q", "--depth", "1", url, str(root)], check=True)
if root:
    sys.path.insert(0, str(root))
%matplotlib inline
from gemm_kernels.notebook import first_cell
first_cell.prepare()   # on Colab: installs what is missing; the banner: which mode, and why'''

# Lines of the old or current bootstrap, dropped before the new one is written; the
# chapter's imports after `%matplotlib inline` stay.
_OLD_TAIL = re.compile(r"^(display\.banner\(\)|from gemm_kernels\.notebook import first_cell|"
                       r"first_cell\.prepare\(\).*)$")


def first_code_source(old: str, repo: str) -> str:
    lines = old.splitlines()
    start = lines.index("%matplotlib inline") + 1 if "%matplotlib inline" in lines else 0
    imports = [ln for ln in lines[start:] if not _OLD_TAIL.match(ln)]
    return "\n".join([BOOTSTRAP.replace("{url}", repo), *imports])


def header_source(old: str, line: str) -> str:
    """The header with `line` (the badge) under its title, a blank line on either side."""
    lines = [ln for ln in old.splitlines() if BADGE_SVG not in ln]
    title, rest = lines[0], "\n".join(lines[1:]).strip("\n")
    return "\n".join([title, "", line, *(["", rest] if rest else [])])


def rewrite(nb, notebook: Path, repo: str):
    """A copy of the notebook `nb` (nbformat's) with its header badge and first code cell
    written from `repo`."""
    nb = copy.deepcopy(nb)
    header = next(c for c in nb.cells if c.cell_type == "markdown")
    header.source = header_source(header.source, badge(repo, notebook))
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.source = first_code_source(code.source, repo)
    tags = code.metadata.setdefault("tags", [])
    if "nbval-ignore-output" not in tags:   # the banner names this machine's device
        tags.append("nbval-ignore-output")
    return nb


def run_first_cell(nb, notebook: Path) -> None:
    """Run the first code cell alone, in the notebook's folder, and keep its output."""
    from nbclient import NotebookClient
    code = next(c for c in nb.cells if c.cell_type == "code")
    one = copy.deepcopy(nb)
    one.cells = [copy.deepcopy(code)]
    NotebookClient(one, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(notebook.parent)}}).execute()
    ran = one.cells[0]
    code.outputs, code.execution_count = ran.outputs, 1
    code.metadata["execution"] = ran.metadata.get("execution", {})


def readme_text(text: str, repo: str) -> str:
    """The chapters table with a Colab column: one badge per chapter notebook."""
    out = []
    for ln in text.splitlines():
        m = re.match(r"^\| (\d\d) \| `(\d\d_\w+\.ipynb)` \|", ln)
        cells = ln.split(" | ")
        if ln.startswith("| # | notebook | idea |"):
            ln = "| # | notebook | idea | Colab |"
        elif ln == "| --- | --- | --- |":
            ln = "| --- | --- | --- | --- |"
        elif m:
            if BADGE_SVG in cells[-1]:
                ln = " | ".join(cells[:-1]) + " |"
            ln = f"{ln} {badge(repo, ROOT / 'notebooks' / m[2])} |"
        out.append(ln)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    ap.add_argument("--no-execute", action="store_true", help="leave the outputs as they are")
    args = ap.parse_args(argv)
    repo = repository_url()
    stale = []
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        new = rewrite(nb, path, repo)
        if [(c.source, c.metadata.get("tags")) for c in new.cells] == \
                [(c.source, c.metadata.get("tags")) for c in nb.cells]:
            continue
        stale.append(path)
        if not args.check:
            if not args.no_execute:
                run_first_cell(new, path)
            path.write_text(nbformat.writes(new) + "\n")
    readme = ROOT / "README.md"
    text = readme.read_text()
    if readme_text(text, repo) != text:
        stale.append(readme)
        if not args.check:
            readme.write_text(readme_text(text, repo))
    for p in stale:
        print(("stale: " if args.check else "wrote ") + str(p.relative_to(ROOT)))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
