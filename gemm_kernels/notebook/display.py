"""What the notebooks show: the mode banner, kernel sources, SASS excerpts."""
from __future__ import annotations

import html
import re

from gemm_kernels.core import analysis

from gemm_kernels.core import compiler

from gemm_kernels.core import device

from gemm_kernels.measure import records
from gemm_kernels.core.launch import kernel_of
from gemm_kernels.core.registry import CUDA_DIR


class Text(str):
    """A string that Jupyter shows as preformatted text (and as Markdown when asked)."""

    def __repr__(self):
        return str(self)


class Markdown(Text):
    def _repr_markdown_(self):
        return str(self)


def as_cell(source: str, exercise: str, lines=None) -> Text:
    """`source` as it would sit in the `%%exercise` cell of `exercise`, each line numbered
    as the grader's messages number a cell (the `%%exercise` line is line 1), so that a
    message's "line 18" can be found on the page. `lines=(first, last)`: only those."""
    cell = [f"%%exercise {exercise}", *source.rstrip("\n").split("\n")]
    first, last = lines or (1, len(cell))
    return Text("\n".join(f"{i:>3}  {cell[i - 1]}" for i in range(first, last + 1)))


class Folded:
    """A table (anything with `_repr_html_`), a matplotlib figure or a text shown closed
    under a summary line, so that a check placed under a question is not read before the
    answer is predicted."""

    def __init__(self, inner, summary: str):
        self.inner, self.summary = inner, summary
        if hasattr(inner, "savefig"):
            # drawn now and closed: left open, the inline backend would show it unfolded too
            import base64
            import io
            import matplotlib.pyplot as plt
            buf = io.BytesIO()
            inner.savefig(buf, format="png", bbox_inches="tight")
            plt.close(inner)
            self._html = (f'<img src="data:image/png;base64,'
                          f'{base64.b64encode(buf.getvalue()).decode()}"/>')
        elif hasattr(inner, "_repr_html_"):
            self._html = None
        else:
            self._html = f"<pre>{html.escape(str(inner))}</pre>"

    def _repr_html_(self):
        return (f"<details><summary>{self.summary}</summary>"
                f"{self._html or self.inner._repr_html_()}</details>")

    def __repr__(self):
        return f"{self.summary}\n{self.inner!r}"


class Beside:
    """Texts (SASS listings, sources) shown side by side under their titles, so that a
    reader compares them line against line; as plain text (a terminal, nbval) they come
    one after the other, each under its title."""

    def __init__(self, *titled):
        self.titled = titled            # (title, text) pairs

    def _repr_html_(self):
        cells = "".join(f"<td style='vertical-align:top;text-align:left'><b>{html.escape(t)}</b>"
                        f"<pre>{html.escape(str(x))}</pre></td>" for t, x in self.titled)
        return f"<table><tr>{cells}</tr></table>"

    def __repr__(self):
        return "\n\n".join(f"{t}\n{x}" for t, x in self.titled)


class Stacked:
    """Tables (anything with `_repr_html_`) shown one above the other as one display, so
    that a cell, or a `Folded`, can show several."""

    def __init__(self, *items):
        self.items = items

    def _repr_html_(self):
        return "".join(item._repr_html_() for item in self.items)

    def __repr__(self):
        return "\n\n".join(repr(item) for item in self.items)


def banner(rec=None) -> Markdown:
    """Which mode this notebook runs in, and the device its numbers describe. `rec`: the
    recording a chapter's numbers come from where it is not the one recorded mode reads
    by default (`records.current()`): the banner then names that GPU."""
    if device.is_live():
        p = device.properties()
        mine = f" This chapter's recorded tables: {rec.label}." if rec is not None else ""
        return Markdown(f"**Live mode**: kernels run here, on {p['name']} "
                        f"(compute capability {p['compute_capability']}, {p['sm_count']} SMs)."
                        + mine)
    why = f"**Recorded mode** ({device.recorded_reason()})"
    rec = rec or records.current()
    if rec is None:
        return Markdown(f"{why}, but figures/data/ holds no recording: "
                        "measurements are unavailable; the static analysis still runs.")
    older = "" if rec.runs else (
        " This recording predates per-row provenance: its rows name no run and carry no "
        "reference measured beside them, so no percentage of cuBLAS or of the device copy "
        "is shown (\"-\").")
    return Markdown(f"{why}: measurements were "
                    f"{rec.label}; what needs no GPU (compiling, reading the machine "
                    "code, occupancy, the models) runs live here." + older)


def source(name: str, entry: str | None = None, whole: bool = False,
           between=None, fold: bool = False, omit=(), stub=()) -> Text:
    """A kernel's CUDA source (a registry name or a file in cuda/), or one function of it.

    `whole=True`: the file as it is (its header comment, the helpers, the kernel), then
    each function of the included headers that the file calls, under the header's name,
    so that every line the kernel runs is on the page.

    `between=(first, last)`: only the lines of the file from the first line that
    contains `first` to the next line (that one included) that contains `last`,
    dedented: the few lines an argument is about. A list of such pairs gives several
    excerpts, in the file's order, joined by a line "...". A ValueError names a marker
    the file does not contain.

    `fold=True`: long operand lists (`{%0, %1, ..., %127}`, `"+f"(d[0]), ...`) shortened
    to their first and last items (`fold_operands`), so that an inline `asm` with a
    hundred registers reads as one instruction.

    `omit=[(first, upto), ...]`: with `whole`, the lines from the first that contains
    `first` up to (not including) the next one that contains `upto` are left out: a
    file shown whole without the part that answers an exercise. A ValueError names a
    marker the file does not contain.

    `stub=[(marker, note), ...]`: the body of the block that the first line containing
    `marker` opens is replaced by one comment line `// ... note`, at the body's
    indentation; the braces around it stay, so the excerpt keeps the code's structure
    (an exercise's branch left out of a kernel shown otherwise as it is)."""
    try:
        k = kernel_of(name)
        text, entry = k.source_text(), entry or k.entry
    except ValueError:
        text = (CUDA_DIR / name).read_text()
    for first, upto in omit:
        text = _without(text, first, upto, name)
    for marker, note in stub:
        text = _stubbed(text, marker, note, name)
    if between is not None:
        pairs = [between] if isinstance(between[0], str) else list(between)
        text = "\n...\n".join(lines_between(text, first, last, name)
                               for first, last in pairs)
        return Text(fold_operands(text) if fold else text)
    if whole:
        return Text("\n\n".join([text.rstrip(), *_included_helpers(text)]))
    if entry:
        text = _function_text(text, entry)
    return Text(text.rstrip())


def numbered(text: str) -> Text:
    """`text` with each line numbered from 1, so that prose can point at its lines."""
    lines = str(text).split("\n")
    width = len(str(len(lines)))
    return Text("\n".join(f"{i:>{width}}  {l}" for i, l in enumerate(lines, 1)))


def line_of(text: str, marker: str, start: int = 1) -> int:
    """The number (from 1) of the first line of `text` at or after line `start` that
    contains `marker`; a ValueError names a marker not found."""
    for i, l in enumerate(str(text).split("\n")[start - 1:], start):
        if marker in l:
            return i
    raise ValueError(f"{marker!r} not found after line {start}")


def kernel_diff(before: str, after: str, names: tuple[str, str], entry: str,
                upto: str) -> Text:
    """The difference between two kernel texts (a registry kernel and a variant of it,
    `Kernel.edited`) from the line holding `entry` (the kernel's name, or the first line
    of the part shown) to the first line holding `upto` after it (what lies outside is
    shown elsewhere), as a unified diff with one line of context, "..." between the
    changes."""
    import difflib

    def body(text):
        lines = text.splitlines()
        start = next(i for i, l in enumerate(lines) if entry in l)
        end = next(i for i in range(start, len(lines)) if upto in lines[i])
        return lines[start:end]

    diff = difflib.unified_diff(body(before), body(after), *names, n=1, lineterm="")
    return Text("\n".join("..." if l.startswith("@@") else l for l in diff))


# A run of at least 8 items of one form, separated by ", ": PTX operands (%12) or
# inline-asm bindings ("+f"(d[12])).
_OPERAND_RUN = re.compile(r'(%\d+|"\+f"\(d\[\d+\]\))(?:, (?:%\d+|"\+f"\(d\[\d+\]\))){7,}')


def fold_operands(text: str, keep: int = 2) -> str:
    """`text` with every long run of operands (`%0, %1, ..., %127`, or the bindings
    `"+f"(d[0]), ...`) cut to its first `keep` items, "...", and its last: the
    instruction stays readable, and the numbers still say how many there are."""
    def cut(m):
        items = m.group(0).split(", ")
        return ", ".join(items[:keep] + ["...", items[-1]])
    return _OPERAND_RUN.sub(cut, text)


def lines_between(text: str, first: str, last: str, name: str) -> str:
    """The lines of `text` from the first that contains `first` to the next one (from
    that line on) that contains `last`, dedented (a `#pragma` at column 0 does not
    count)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if first in line), None)
    if start is None:
        raise ValueError(f"{name}: no line contains {first!r}")
    end = next((i for i in range(start, len(lines)) if last in lines[i]), None)
    if end is None:
        raise ValueError(f"{name}: no line after {first!r} contains {last!r}")
    part = lines[start:end + 1]
    indent = min((len(x) - len(x.lstrip(" ")) for x in part
                  if x.strip() and not x.startswith("#")), default=0)
    return "\n".join(x[indent:] if x[:indent].isspace() else x for x in part)


def _stubbed(text: str, marker: str, note: str, name: str) -> str:
    """`text` with the body of the block opened on the first line containing `marker`
    (counted by braces, to the line where that block closes) replaced by `// ... note`."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if marker in line), None)
    if start is None or "{" not in lines[start]:
        raise ValueError(f"{name}: no line contains {marker!r} and opens a block")
    depth = 0
    for end in range(start, len(lines)):
        for ch in lines[end]:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if depth == 0 and end > start:
                break
        else:
            continue
        break
    else:
        raise ValueError(f"{name}: the block opened after {marker!r} does not close")
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip(" "))] + "    "
    return "".join(lines[:start + 1] + [f"{indent}// ... {note}\n"] + lines[end:])


def _without(text: str, first: str, upto: str, name: str) -> str:
    """`text` less its lines from the first that contains `first` to the line before the
    next one that contains `upto`."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if first in line), None)
    end = None if start is None else next(
        (i for i in range(start + 1, len(lines)) if upto in lines[i]), None)
    if end is None:
        raise ValueError(f"{name}: no line contains {first!r} followed by one with {upto!r}")
    return "".join(lines[:start] + lines[end:])


_INCLUDE = re.compile(r'#include\s+"([^"]+)"')
_DEFINED = re.compile(r"__device__[^{;(]*?\b(\w+)\s*\(")


def _included_helpers(text: str) -> list[str]:
    """'// from <header>:' and the function (with its comment) for every function
    defined in a header that `text` includes, directly or through another header, and
    calls; in include order, each once."""
    headers, todo = [], _INCLUDE.findall(text)
    while todo:
        h = todo.pop(0)
        if h not in headers:
            headers.append(h)
            todo += _INCLUDE.findall((CUDA_DIR / h).read_text())
    out = []
    for h in headers:
        header = (CUDA_DIR / h).read_text()
        for fn in dict.fromkeys(_DEFINED.findall(header)):
            if re.search(rf"\b{fn}\s*\(", text):
                out.append(f"// from {h}:\n" + _function_text(header, fn))
    return out


def _function_text(text: str, entry: str) -> str:
    """The template line and body of `entry`, found by brace matching."""
    m = re.search(rf"(template\s*<[^>]*>\s*)?(__global__|__device__)[^{{;]*\b{entry}\s*\(", text)
    if not m:
        return text
    start = text.rfind("\n", 0, m.start()) + 1
    # keep the comment block directly above the function
    lines = text[:start].splitlines(keepends=True)
    while lines and lines[-1].lstrip().startswith("//"):
        start -= len(lines.pop())
    depth, i = 0, text.index("{", m.end())
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[start:j + 1]
    return text[start:]


_GUARD = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+)\s")


def sass_loop(kernel, params=None, limit: int = 60, start: str | None = None,
              tail: int = 0, keep: tuple[str, ...] | None = None,
              labels: bool = False) -> Text:
    """The main loop's SASS (the loop with the most FFMA) of `kernel`, compiled here:
    `loop_listing` of it."""
    k = kernel_of(kernel)
    return loop_listing(compiler.sass(k, k.resolve(params)), limit, start, tail, keep,
                        labels)


# a branch target: the label line and the address of the instruction after it
_LABEL = re.compile(r"^(\.L_x_\d+):\s*\n\s*/\*([0-9a-f]{4,})\*/", re.M)


def loop_listing(sass: str, limit: int = 60, start: str | None = None, tail: int = 0,
                 keep: tuple[str, ...] | None = None, labels: bool = False) -> Text:
    """The main loop of the SASS text `sass`, at most `limit` lines; with `start` (an
    opcode prefix such as "LDS"), from the first such instruction on; with `tail`, the
    first `limit` lines and the loop's last `tail` (its branch back). With `keep` (opcode
    prefixes), only the instructions that start so are listed, each run of the others
    folded into one line that counts it and its FFMAs, so that a reader sees the lines
    that matter and how much lies between them. With `labels`, the branch targets
    (`.L_x_2:`) stay on their own lines, so a reader can see what each branch skips."""
    body = analysis.main_loop(sass)
    # the guard predicate of each instruction (`@P1 BRA`: taken only where P1 is true)
    guard = {int(a, 16): g + " " for a, g in _GUARD.findall(sass)}
    target = {int(a, 16): name for name, a in _LABEL.findall(sass)} if labels else {}
    skip = next((n for n, (_, _, t) in enumerate(body) if t.startswith(start)), 0) if start else 0

    def folded(run, what):
        ffma = sum(t.startswith("FFMA") for t in run)
        if keep and ffma == len(run) and what.startswith("other"):
            return f"... {ffma} FFMA" + "s" * (ffma > 1)
        what = what.replace("instructions", "instruction") if len(run) == 1 else what
        return f"... {len(run)} {what}" + (f", {ffma} of them FFMA" if ffma and keep else "")

    lines = [folded([t for _, _, t in body[:skip]], "earlier instructions of the loop")] \
        if skip else []
    run = []
    for a, _, t in body[skip:]:
        if a in target:   # a run of other instructions ends where a branch lands
            if run:
                lines.append("    " + folded(run, "other instructions"))
                run = []
            lines.append(f"{target[a]}:")
        if keep and not t.startswith(keep):
            run.append(t)
            continue
        if run:
            lines.append("    " + folded(run, "other instructions"))
            run = []
        lines.append(f"/*{a:04x}*/  {guard.get(a, '')}{t}")
    if run:
        lines.append("    " + folded(run, "other instructions"))
    more = len(lines) - limit
    if tail and more > tail:
        return Text("\n".join(lines[:limit] + [f"... {more - tail} instructions not shown"]
                              + lines[-tail:]))
    return Text("\n".join(lines[:limit] + ([f"... {more} more"] if more > 0 else [])))


_PTX_SHARED_LOAD = re.compile(r"^\s*(ld\.shared\.(v[24]\.)?f32)\b.*$", re.M)


def ptx_shared_loads(kernel, params=None) -> Text:
    """How the PTX (NVRTC's output, before ptxas) of `kernel` reads shared memory: the
    count of each kind of 32-bit-float shared load, and the first 128-bit one as written.
    It shows whether the front end, not ptxas, merged neighbouring reads into one."""
    k = kernel_of(kernel)
    text, _ = compiler.ptx(k, k.resolve(params))
    found = _PTX_SHARED_LOAD.findall(text)
    kinds = {}
    for op, _ in found:
        kinds[op] = kinds.get(op, 0) + 1
    counts = ", ".join(f"{n} x {op}" for op, n in sorted(kinds.items())) or "no shared loads"
    first = next((m.group(0).strip() for m in _PTX_SHARED_LOAD.finditer(text)
                  if ".v4." in m.group(1)), None)
    return Text(f"PTX of {k.name} (NVRTC here, before ptxas): {counts}"
                + (f"\n    e.g. {' '.join(first.split())}" if first else ""))


def resources(kernels, params: dict | None = None, one_register_column: bool = False,
              loads_per_ffma: bool = False):
    """Registers, spills, shared memory, occupancy and FFMA:LDS of several kernels.

    Where the binary that is timed (live: loaded here; recorded: the recording's) is
    known, its registers stand beside those of ptxas here, the occupancy uses them, and
    a note under the title names any configuration where the two differ.
    `one_register_column`: where the two agree for every kernel, show them as one column,
    "registers", for a reader who need not tell the binaries apart.
    `loads_per_ffma`: give the ratio as shared loads per FFMA ("LDS/FFMA"), the direction
    of a text that prices everything per FFMA, instead of FFMA per shared load."""
    from gemm_kernels.core.table import Table
    from gemm_kernels.measure import lookup
    rows, pairs = [], []
    here = analysis.local_registers_column()
    for name in kernels:
        p = (params or {}).get(name)
        s = analysis.summary(name, p)
        timed = (lookup.binary(name, p) or {}).get("registers")
        occ = analysis.kernel_occupancy(name, p, registers=timed)
        h = s["loop_histogram"]
        pairs.append((name, timed, s["registers"]))
        rows.append({"kernel": name, analysis.TIMED_REGISTERS: timed, here: s["registers"],
                     "spills": s["spill_stores"],
                     "smem B": s["smem_bytes"], "threads": occ.threads_per_block,
                     "blocks/SM": occ.blocks_per_sm, "occupancy": analysis.percent(occ.occupancy),
                     "loop FFMA": h.get("FFMA", 0) + h.get("DFMA", 0),
                     "loop LDS": sum(v for f, v in h.items() if f.startswith("LDS")),
                     "loop LDG": sum(v for f, v in h.items() if f.startswith("LDG")),
                     "FFMA/LDS": round(s["fma_per_lds"], 2) if s["fma_per_lds"] else None})
        if loads_per_ffma:   # as a string: the table writes 1.25 as "1.2"
            r = rows[-1]
            del r["FFMA/LDS"]
            r["LDS/FFMA"] = (f"{r['loop LDS'] / r['loop FFMA']:.2f}"
                             if r["loop LDS"] and r["loop FFMA"] else None)
    columns = list(rows[0])
    if all(t is None for _, t, _ in pairs):      # nothing timed to compare with
        columns.remove(analysis.TIMED_REGISTERS)
    elif one_register_column and all(t == h for _, t, h in pairs):
        for r in rows:
            r["registers"] = r.pop(here)
        columns = [c if c != here else "registers" for c in columns
                   if c != analysis.TIMED_REGISTERS]
    title = "static analysis (ptxas -v, nvdisasm; sm_90)"
    note = analysis.registers_note(pairs)
    return Table(rows, columns, title=title + (f"\n{note}" if note else ""))
