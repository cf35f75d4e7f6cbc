import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MPLBACKEND", "Agg")


def stamp(rows):
    """Fake record rows marked as measured on the kernels' current sources, so that
    `records` does not drop them as stale (rows of reference kernels carry no source)."""
    from gemm_kernels.core.kernels import KERNELS
    return [{**r, "source": KERNELS[r["kernel"]].source_hash()} if r["kernel"] in KERNELS else r
            for r in rows]


@pytest.fixture
def recorded_mode(monkeypatch):
    """Recorded mode even on a GPU host: for tests of what a machine without a GPU shows."""
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """An empty figures/data in tmp_path, read in recorded mode with no recording named:
    what a test writes there is all the package can find."""
    from gemm_kernels.core import device
    from gemm_kernels.measure import records
    monkeypatch.setattr(records, "DATA_DIR", tmp_path)
    monkeypatch.delenv("GEMM_KERNELS_RECORD", raising=False)
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    device._gpu_present.cache_clear()
    records._LOADED.clear()
    yield tmp_path
    records._LOADED.clear()
