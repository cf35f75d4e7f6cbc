"""A small runner for Nsight Compute (``ncu``): profile a command, get metrics per launch.

    profile([sys.executable, "-m", "some.module"], ["smsp__cycles_active.sum"], "my_kernel")
    -> [{"id": 0, "kernel": "void my_kernel<4>(const int *, float *)",
         "metrics": {"smsp__cycles_active.sum": 1234.0}}, ...]

ncu is run with ``--csv`` and its default "details" page, which prints one row per
(launch, metric):

    "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",
    "Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",
    "Metric Value"[, rule columns in newer versions]

The parser finds that header by name (the profiled program's own output and ncu's
``==PROF==`` lines may surround it), and also accepts the wide ``--page raw`` layout (one
row per launch, one column per metric, then a units row). Values such as ``"1,234.5"``
(thousands separators) are read as numbers; anything unreadable becomes NaN.
"""
from __future__ import annotations

import csv
import glob
import io
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

_FIXED_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
                  "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name",
                  "Metric Name", "Metric Unit", "Metric Value", "Rule Name", "Rule Type",
                  "Rule Description", "Estimated Speedup Type", "Estimated Speedup",
                  "Kernel Time", "Kernel Duration"}


def executable() -> str | None:
    """The path of ncu: on PATH, in /usr/local/cuda*/bin, or in /opt/nvidia/nsight-compute."""
    found = shutil.which("ncu")
    if found:
        return found
    candidates = ["/usr/local/cuda/bin/ncu", *sorted(glob.glob("/usr/local/cuda*/bin/ncu")),
                  *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)]
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def available() -> bool:
    """True when an ncu executable can be found (it may still lack counter permissions)."""
    return executable() is not None


def version() -> str:
    """ncu's version line, or '' when it cannot be run."""
    exe = executable()
    if not exe:
        return ""
    try:
        res = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [l.strip() for l in res.stdout.splitlines() if l.strip()]
    return lines[-1] if lines else ""


def number(text: str) -> float:
    """A metric value as ncu prints it: '12', '1,234', '1,234.50', 'n/a' (-> NaN)."""
    t = (text or "").strip().replace(",", "").replace("%", "")
    try:
        return float(t)
    except ValueError:
        return math.nan


def _rows(text: str) -> tuple[list[str], list[list[str]]]:
    """The header and data rows of ncu's CSV inside `text`, ignoring any other lines."""
    header: list[str] | None = None
    rows: list[list[str]] = []
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith('"'):
            continue                   # ==PROF== lines, program output, blank lines
        try:
            fields = next(csv.reader(io.StringIO(s)))
        except (csv.Error, StopIteration):
            continue
        if header is None:
            if fields and fields[0] == "ID" and "Kernel Name" in fields:
                header = fields
            continue
        if len(fields) != len(header):
            continue
        try:
            int(fields[0].replace(",", ""))
        except ValueError:
            continue                   # the units row of --page raw, or stray text
        rows.append(fields)
    if header is None:
        raise ValueError("no ncu CSV header (a line starting with \"ID\" and naming "
                         "\"Kernel Name\") found in the output")
    return header, rows


def parse_csv(text: str) -> list[dict]:
    """Parse ncu --csv output into one dict per profiled launch, in launch (ID) order:
    {"id": int, "kernel": str, "metrics": {name: float}}."""
    header, rows = _rows(text)
    col = {name: k for k, name in enumerate(header)}
    launches: dict[int, dict] = {}
    if "Metric Name" in col and "Metric Value" in col:
        for f in rows:
            lid = int(f[col["ID"]].replace(",", ""))
            entry = launches.setdefault(lid, {"id": lid, "kernel": f[col["Kernel Name"]],
                                              "metrics": {}})
            name = f[col["Metric Name"]]
            if name:
                entry["metrics"][name] = number(f[col["Metric Value"]])
    else:
        metric_cols = [(k, name) for k, name in enumerate(header) if name not in _FIXED_COLUMNS]
        for f in rows:
            lid = int(f[col["ID"]].replace(",", ""))
            launches[lid] = {"id": lid, "kernel": f[col["Kernel Name"]],
                             "metrics": {name: number(f[k]) for k, name in metric_cols}}
    return [launches[k] for k in sorted(launches)]


def command(argv: list[str], metrics: list[str], kernel_regex: str,
            extra: list[str] | None = None) -> list[str]:
    """The ncu command line that `profile` runs."""
    exe = executable()
    if exe is None:
        raise RuntimeError("Nsight Compute (ncu) not found: looked on PATH, in "
                           "/usr/local/cuda/bin and in /opt/nvidia/nsight-compute/*/")
    if not metrics:
        raise ValueError("give at least one metric")
    return [exe, "--csv", "--print-units", "base", "--target-processes", "all",
            "-k", f"regex:{kernel_regex}", "--metrics", ",".join(metrics),
            *(extra or []), *argv]


def profile(argv: list[str], metrics: list[str], kernel_regex: str, *,
            extra: list[str] | None = None, timeout: float = 1800,
            env: dict | None = None, cwd: str | Path | None = None) -> list[dict]:
    """Run `argv` under ncu and return, per profiled launch in launch order,
    {"id", "kernel" (demangled name), "metrics": {name: float}}.

    Only kernels whose name matches `kernel_regex` are profiled. Raises RuntimeError,
    with ncu's stderr and the end of its stdout, when ncu fails, reports an error, or
    profiles nothing; a requested metric missing from a launch is also an error.
    """
    cmd = command(argv, metrics, kernel_regex, extra)
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                             env=env, cwd=cwd)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"ncu timed out after {timeout} s: {' '.join(cmd)}") from e

    def details() -> str:
        out = res.stdout[-4000:]
        return (f"command: {' '.join(cmd)}\nreturn code: {res.returncode}\n"
                f"--- stderr ---\n{res.stderr.strip()}\n--- stdout (end) ---\n{out.strip()}")

    if res.returncode != 0:
        raise RuntimeError(f"ncu failed.\n{details()}")
    errors = [l for l in (res.stdout + "\n" + res.stderr).splitlines() if "==ERROR==" in l]
    if errors:
        raise RuntimeError("ncu reported errors (ERR_NVGPUCTRPERM means no permission for "
                           f"GPU performance counters: run as root or enable them).\n{details()}")
    try:
        launches = parse_csv(res.stdout)
    except ValueError as e:
        raise RuntimeError(f"could not read ncu's CSV: {e}\n{details()}") from e
    if not launches:
        raise RuntimeError(f"ncu profiled no launch matching regex:{kernel_regex}\n{details()}")
    for launch in launches:
        missing = [m for m in metrics if m not in launch["metrics"]]
        if missing:
            raise RuntimeError(f"launch {launch['id']} ({launch['kernel']}) lacks metrics "
                               f"{missing}\n{details()}")
    return launches


_METRIC_NAME = re.compile(r"^([a-z0-9]+__[A-Za-z0-9_.]+)\s")


def parse_metric_list(text: str) -> set[str]:
    """The metric names in `ncu --query-metrics --query-metrics-mode all` output: the
    first word of every line that looks like a metric (unit__counter[.rollup])."""
    return {m.group(1) for m in map(_METRIC_NAME.match, text.splitlines()) if m}


def known_metrics(timeout: float = 300) -> set[str] | None:
    """Every metric name this ncu can collect on this GPU, or None when ncu cannot be
    asked (not installed, no GPU, an error)."""
    exe = executable()
    if exe is None:
        return None
    try:
        res = subprocess.run([exe, "--query-metrics", "--query-metrics-mode", "all"],
                             capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = parse_metric_list(res.stdout)
    return names if res.returncode == 0 and names else None
