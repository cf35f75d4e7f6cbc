"""A list of rows that prints as an aligned text table and renders as HTML in Jupyter."""
from __future__ import annotations

import math
import numbers


class Table(list):
    """Rows (dicts) that print as an aligned text table and render as HTML in Jupyter."""

    def __init__(self, rows, columns, title="", pct_decimals: int | None = None):
        """`columns`: the keys shown, in order (a row may hold more, for the code that
        computes with it); `pct_decimals`: a fixed number of decimals for every percentage
        column (default: `fmt_number`'s, which drops a trailing ".0")."""
        super().__init__(rows)
        self.columns = columns
        self.title = title
        self.pct_decimals = pct_decimals

    def _cells(self):
        return [[_fmt_column(c, r.get(c), self.pct_decimals) for c in self.columns] for r in self]

    def __repr__(self):
        cells = self._cells()
        widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(self.columns)]
        line = lambda vals: "  ".join(v.rjust(w) for v, w in zip(vals, widths))
        out = [self.title] if self.title else []
        out += [line(self.columns), line(["-" * w for w in widths])] + [line(r) for r in cells]
        return "\n".join(out)

    def _repr_html_(self):
        head = "".join(f"<th>{c}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{v}</td>" for v in r) + "</tr>" for r in self._cells())
        cap = f"<caption>{self.title}</caption>" if self.title else ""
        return f"<table>{cap}<tr>{head}</tr>{body}</table>"


def _fmt_column(column: str, v, pct_decimals: int | None = None) -> str:
    """A cell as people read it: a number in a percentage column ("% of cuBLAS",
    "bound % of peak") carries its % sign, at `pct_decimals` decimals where given; the
    row itself keeps the number, for the code that computes with it."""
    if "%" in column and _is_number(v) and v == v:
        return (f"{v:,.{pct_decimals}f}" if pct_decimals is not None else fmt_number(v)) + "%"
    return fmt_number(v) if _is_number(v) else _fmt(v)


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def bytes_text(n: float) -> str:
    """Bytes in powers of ten, as profilers give traffic: 201 MB, 8.53 GB, 2.27 TB."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            v = n / scale
            return f"{v:,.3g} {unit}" if v < 1000 else f"{v:,.0f} {unit}"
    return f"{n:,.0f} B"


def fmt_number(v) -> str:
    """A number as people read it: integers (and whole rates) with thousands separators,
    never "12.0" or "9.68e-01"; fractions to two significant digits, written out."""
    if isinstance(v, numbers.Integral):
        return f"{int(v):,}"
    v = float(v)
    if v != v or v in (float("inf"), float("-inf")):
        return str(v)
    if v == 0 or abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 1:
        text = f"{v:.1f}"
        return text[:-2] if text.endswith(".0") else text
    # Two significant digits without an exponent: 0.017, 0.0099, 0.00012.
    decimals = 1 - math.floor(math.log10(abs(v)))
    return f"{v:.{decimals}f}".rstrip("0").rstrip(".")


def _fmt(v):
    if v is None:
        return "-"
    if _is_number(v):
        return fmt_number(v)
    if isinstance(v, (list, tuple)):
        return "x".join(map(str, v))
    if isinstance(v, dict):
        return " ".join(f"{k}={x}" for k, x in v.items())
    return str(v)
