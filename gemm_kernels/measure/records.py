"""Recorded measurements: `figures/data/<device-slug>.json`, written on a real GPU by
`python -m gemm_kernels record` (and `sweep`, `profile`), read wherever there is none.

Schema 2: {"schema": 2, "device", "created", "commit",
 "runs": {RUN_ID: {"started", "command", "commit", "toolchain", "timing"}},
 "results": [rows]}. Every row names the run (one measuring process) and the UTC time
it was measured in; kernel rows add "binary" (what the timed binary used: registers,
local/shared/constant bytes, ...) and "reference" (cuBLAS or the device copy, measured
in the same process, interleaved, at the same shape). Schema 1 files still load; their
rows have no provenance and no reference, so no ratio is shown for them.

Which recording recorded mode shows: the file $GEMM_KERNELS_RECORD names, else DEFAULT
(the H200's, figures/data/nvidia-h200.json), whatever else figures/data holds (an H100's
recording sits beside it). Only when DEFAULT is missing or unreadable does the newest
good file there stand in (with a warning when there are several). `available()` lists
the recordings with their labels; `arch()` gives the architecture of the one shown (its
device's compute capability), which the static analysis then compiles for.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from gemm_kernels.core import device

DATA_DIR = Path(__file__).resolve().parents[2] / "figures" / "data"
# Schema 2 added provenance: the top-level "runs" and, in every row, "run" and "time";
# kernel rows carry "binary" and "reference". Schema 1 rows have none of them.
SCHEMA = 2
READABLE = (1, 2)


def slug(device_name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")


TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"     # UTC, as in "created", "started" and "time"


def utc_now() -> str:
    return f"{datetime.datetime.now(datetime.timezone.utc):{TIME_FORMAT}}"


@dataclass
class Record:
    device: dict
    created: str
    commit: str
    results: list = field(default_factory=list)
    path: Path | None = None
    runs: dict = field(default_factory=dict)    # run id -> how that process measured

    @property
    def label(self) -> str:
        """'recorded on <device>, <day>', or '<first day> to <last day>' where the rows
        come from runs on several days (a later study merged into the file does not make
        the older rows look newer)."""
        days = sorted({r["time"][:10] for r in self.results if r.get("time")})
        when = self.created[:10] if not days else (
            days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}")
        return f"recorded on {self.device['name']}, {when}"

    @property
    def arch(self) -> str | None:
        """"sm_90" from the device's compute capability; None when it has none (or one
        this code cannot read)."""
        try:
            return device.arch_name(self.device["compute_capability"])
        except (KeyError, ValueError):
            return None

    def find(self, kernel, shape=None, params: dict | None = None) -> list[dict]:
        """Rows of `kernel` (a name, or a Kernel: a registry kernel or a variant of one),
        at `shape` if given, whose params include `params`, measured on the kernel's
        current source (rows of older code are left out)."""
        from gemm_kernels.core.kernels import KERNELS
        if isinstance(kernel, str):
            current = KERNELS[kernel].source_hash() if kernel in KERNELS else None
        else:
            kernel, current = kernel.name, kernel.source_hash()
        out = []
        for r in self.results:
            if r["kernel"] != kernel or r.get("source") != current:
                continue
            if shape is not None and list(r["shape"]) != list(shape):
                continue
            if params and any(r["params"].get(k) != v for k, v in params.items()):
                continue
            out.append(r)
        return out

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "device": self.device, "created": self.created,
                "commit": self.commit, "runs": self.runs, "results": self.results}


DEFAULT = "nvidia-h200.json"


def files() -> list[Path]:
    return sorted(DATA_DIR.glob("*.json"))


def available() -> list[dict]:
    """The readable recordings in figures/data: {'path', 'label', 'arch', 'default'}
    each, the default first; a file that cannot be read is skipped with a warning.
    Point $GEMM_KERNELS_RECORD at one's path to show it instead of the default."""
    out = []
    for p in files():
        try:
            rec = read(p)
        except ValueError as e:
            warnings.warn(f"skipped {e}", stacklevel=2)
            continue
        out.append({"path": p, "label": rec.label, "arch": rec.arch,
                    "default": p.name == DEFAULT})
    return sorted(out, key=lambda r: not r["default"])


def parse(data, path) -> Record:
    """A Record from the decoded JSON of `path`; ValueError naming the file and what is
    wrong when it is not a recording this code reads."""
    def bad(why):
        return ValueError(f"{path}: {why}")
    if not isinstance(data, dict):
        raise bad(f"not a recording (a JSON {type(data).__name__}, expected an object)")
    if data.get("schema") not in READABLE:
        raise bad(f"schema {data.get('schema')!r}, expected one of {list(READABLE)}")
    for key, kind in (("device", dict), ("created", str), ("commit", str), ("results", list)):
        if not isinstance(data.get(key), kind):
            raise bad(f"no {key!r} ({kind.__name__}) at the top level")
    if not isinstance(data["device"].get("name"), str):
        raise bad("the device has no 'name'")
    for i, r in enumerate(data["results"]):
        if not (isinstance(r, dict) and isinstance(r.get("kernel"), str)
                and isinstance(r.get("params"), dict) and isinstance(r.get("shape"), list)):
            raise bad(f"result {i} is not a row with 'kernel', 'params' and 'shape'")
    runs = data.get("runs", {})
    if not isinstance(runs, dict):
        raise bad("'runs' is not an object")
    return Record(data["device"], data["created"], data["commit"], data["results"], Path(path),
                  runs)


def read(path) -> Record:
    """The recording in `path`; ValueError naming the file when it cannot be read,
    is not JSON (empty, truncated) or is not a recording."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot be read ({e})") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from e
    return parse(data, path)


def load(path: str | Path | None = None) -> Record | None:
    """The record named by `path` or $GEMM_KERNELS_RECORD (ValueError if it is not a
    readable recording), else DEFAULT in figures/data; if that is missing or unreadable,
    the one good recording there, or the newest of several with a warning naming it
    (None if there is none). A file there that
    cannot be read is skipped with a warning naming it."""
    path = path or os.environ.get("GEMM_KERNELS_RECORD")
    if path is not None:
        # A notebook runs in notebooks/: a relative path is also looked for from the
        # repository root, and a bare file name in figures/data.
        for candidate in (Path(path), DATA_DIR.parents[1] / path, DATA_DIR / path):
            if candidate.exists():
                return read(candidate)
        return read(path)
    default = DATA_DIR / DEFAULT
    if default.exists():
        try:
            return read(default)
        except ValueError as e:
            warnings.warn(f"skipped the default recording: {e}", stacklevel=2)
    good = []
    for p in files():
        try:
            good.append(read(p))
        except ValueError as e:
            warnings.warn(f"skipped {e}", stacklevel=2)
    rec = max(good, key=lambda r: r.created, default=None)
    if len(good) > 1:       # a choice between several: say which was made
        warnings.warn(f"no {DEFAULT} in {DATA_DIR}: showing {rec.path.name} ({rec.label})",
                      stacklevel=2)
    return rec


_LOADED: dict = {}


def current() -> Record | None:
    """The record the notebooks read in recorded mode (loaded once per process). Its
    device becomes the one the static analysis describes in recorded mode
    (`device.use_recording`)."""
    if "record" not in _LOADED:
        _LOADED["record"] = load()
        device.use_recording(_LOADED["record"].device if _LOADED["record"] else None)
    return _LOADED["record"]


def recorded_device(rec: Record | None = None) -> dict:
    """The properties of the GPU `rec` (default the recording shown) was made on, whatever
    GPU runs the notebook: counters recorded there are read against its SMs, clock and
    caches, never a live GPU's. {} without a recording."""
    rec = rec or current()
    return dict(rec.device) if rec else {}


def described_device() -> dict:
    """The properties of the GPU the notebook's numbers describe: the live one where a
    GPU runs the notebook (its numbers are measured there), else the one the recording
    was made on. {} with neither. Counters read from a recording use `recorded_device`
    instead, whatever GPU runs the notebook."""
    if device.is_live():
        return device.properties()
    return recorded_device()


def arch() -> str | None:
    """The architecture of the recording recorded mode shows ("sm_90"), None without one."""
    rec = current()
    return rec.arch if rec else None


def git_commit() -> str:
    """The commit measured; $GEMM_KERNELS_COMMIT where the tree has no .git (GPU host)."""
    if os.environ.get("GEMM_KERNELS_COMMIT"):
        return os.environ["GEMM_KERNELS_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=DATA_DIR.parent.parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def save(record: Record, path: Path | None = None) -> Path:
    path = path or DATA_DIR / f"{slug(record.device['name'])}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.to_json(), indent=1) + "\n")
    return path


def first_holding(holds) -> Record | None:
    """The recording for which `holds(rec)` is true: the one shown if it is, else the
    first of the others that is; None when none is. A chapter or study measured on
    another GPU than the rest reads all of it from that one recording, so its numbers
    never mix devices."""
    cur = current()
    if cur is not None and holds(cur):
        return cur
    return next((r for r in (load(e["path"]) for e in available())
                 if r is not None and holds(r)), None)


def holding(kernel: str) -> Record | None:
    """`first_holding` for rows of `kernel` (chapters 12 and 13, recorded on another GPU
    than the rest). Reading every file takes a tenth of a second or more, and a chapter
    asks on every table: once per process (and per recording shown)."""
    key = ("holding", kernel, id(current()))
    if key not in _LOADED:
        _LOADED[key] = first_holding(lambda rec: bool(rec.find(kernel)))
    return _LOADED[key]


def source() -> str:
    """Where numbers come from right now, for banners and plot titles."""
    if device.is_live():
        return f"live on {device.properties()['name']}"
    rec = current()
    return rec.label if rec else "no GPU and no recording"


def rows_label(rows, rec: Record | None = None, gpu: bool = True) -> str:
    """Where these rows come from, for a title: 'recorded on <device> in one run,
    <day>' (or 'in N runs, <first day> to <last day>'), from the rows' own runs and days,
    not the whole file's (a file holds runs of several days). `rec`: the recording that
    holds them (default the one shown); 'no recorded rows' when none has a row. `gpu`
    False: only 'in one run, <day>', for a sentence that has named the GPU already."""
    rows = [r for r in rows if r]
    rec = rec or current()
    if not rows or rec is None:
        return "no recorded rows"
    runs = list(dict.fromkeys(r.get("run") for r in rows if r.get("run")))
    days = sorted({r["time"][:10] for r in rows if r.get("time")})
    when = rec.created[:10] if not days else (
        days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}")
    how = "" if not runs else " in one run" if len(runs) == 1 else f" in {len(runs)} runs"
    if not gpu:
        return f"{how.strip() or 'recorded'}, {when}"
    return f"recorded on {rec.device['name']}{how}, {when}"


def recording_label() -> str:
    rec = current()
    return rec.label if rec else "no recording"
