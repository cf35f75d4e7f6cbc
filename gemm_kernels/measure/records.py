"""Recorded measurements: `figures/data/<device-slug>.json`, written on a real GPU by
`python -m gemm_kernels record`, read wherever there is none.

`measure_or_lookup` is what the notebooks call: live, it measures; recorded, it finds
the recorded row. Either way the row says where its number came from.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from gemm_kernels.core import device

DATA_DIR = Path(__file__).resolve().parents[2] / "figures" / "data"
SCHEMA = 1


def slug(device_name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")


@dataclass
class Record:
    device: dict
    created: str
    commit: str
    results: list = field(default_factory=list)
    path: Path | None = None

    @property
    def label(self) -> str:
        return f"recorded on {self.device['name']}, {self.created[:10]}"

    def find(self, kernel: str, shape=None, params: dict | None = None) -> list[dict]:
        """Rows of `kernel`, at `shape` if given, whose params include `params`, measured
        on the kernel's current source (rows of older code are left out)."""
        from gemm_kernels.core.kernels import KERNELS
        current = KERNELS[kernel].source_hash() if kernel in KERNELS else None
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
                "commit": self.commit, "results": self.results}


def files() -> list[Path]:
    return sorted(DATA_DIR.glob("*.json"))


def load(path: str | Path | None = None) -> Record | None:
    """The record named by `path`, by $GEMM_KERNELS_RECORD, or the newest in figures/data."""
    path = path or os.environ.get("GEMM_KERNELS_RECORD")
    if path is None:
        found = files()
        if not found:
            return None
        path = max(found, key=lambda p: json.loads(p.read_text()).get("created", ""))
    data = json.loads(Path(path).read_text())
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {data.get('schema')!r}, expected {SCHEMA}")
    return Record(data["device"], data["created"], data["commit"], data["results"], Path(path))


_LOADED: dict = {}


def current() -> Record | None:
    """The record the notebooks read in recorded mode (loaded once per process)."""
    if "record" not in _LOADED:
        _LOADED["record"] = load()
    return _LOADED["record"]


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


def source() -> str:
    """Where numbers come from right now, for banners and plot titles."""
    if device.is_live():
        return f"live on {device.properties()['name']}"
    rec = current()
    return rec.label if rec else "no GPU and no recording"


def recording_label() -> str:
    rec = current()
    return rec.label if rec else "no recording"
