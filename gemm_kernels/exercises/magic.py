"""The `%%exercise NAME` cell magic: the cell's text is the student's CUDA source; the
magic grades it and shows the report. `verdict(NAME)` returns the last report, for the
autograded test cell (`verdict("01_index").assert_passed()`), and `submitted(NAME)` the
last source."""
from __future__ import annotations

from gemm_kernels.exercises.catalog import get
from gemm_kernels.exercises.grader import Report, grade

_LAST: dict[str, Report] = {}
_SOURCES: dict[str, str] = {}


def submit(name: str, source: str, gpu: bool | None = None) -> Report:
    """Grade `source` for exercise `name` and keep the report for `verdict`."""
    get(name)                       # an unknown name is a clear error before any work
    report = grade(name, source, gpu)
    _LAST[name] = report
    _SOURCES[name] = source
    return report


def submitted(name: str) -> str:
    """The source of the last submission of exercise `name` in this session (a solution
    notebook reads its SASS with it)."""
    get(name)
    if name not in _SOURCES:
        raise AssertionError(f"exercise {name} has not been run yet: run its "
                             f"%%exercise {name} cell first")
    return _SOURCES[name]


def verdict(name: str) -> Report:
    """The last report of exercise `name` in this session."""
    get(name)
    if name not in _LAST:
        raise AssertionError(f"exercise {name} has not been run yet: run its "
                             f"%%exercise {name} cell first")
    return _LAST[name]


def register(ipython) -> None:
    from IPython.core.magic import register_cell_magic
    from IPython.display import display

    @register_cell_magic
    def exercise(line, cell):
        name = line.strip()
        try:
            report = submit(name, cell)
        except ValueError as e:          # an unknown exercise name: a message, no traceback
            print(e)
            return
        display(report)
