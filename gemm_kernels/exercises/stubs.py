"""Solution regions and their stubs, nbgrader's way: in a solution, the lines between a
`// BEGIN SOLUTION` line and an `// END SOLUTION` line are the answer; the student's
version has each region replaced by one stub line at the same indentation (what
`nbgrader generate_assignment` writes, given `STUB` as the code stub).

Every skeleton compiles (variables the regions assign are declared outside them), and
the grader's static step refuses a source that still holds a stub, naming its line.
"""
from __future__ import annotations

import re

BEGIN, END = "BEGIN SOLUTION", "END SOLUTION"
STUB = "// YOUR CODE HERE"


def skeleton(solution: str) -> str:
    """The student's version of a solution: each solution region becomes `STUB`."""
    out, inside = [], False
    for line in solution.split("\n"):
        if BEGIN in line:
            if inside:
                raise ValueError(f"'{BEGIN}' inside a solution region: {line.strip()!r}")
            inside = True
            out.append(line[:len(line) - len(line.lstrip())] + STUB)
        elif END in line:
            if not inside:
                raise ValueError(f"'{END}' without a '{BEGIN}' before it")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"a solution region is not closed with '{END}'")
    return "\n".join(out)


def stub_lines(source: str, first_line: int = 2) -> list[int]:
    """Cell line numbers of the stubs still in `source` (line 1 of the cell is the
    `%%exercise` line, so the source's line 1 is the cell's `first_line`)."""
    return [i + first_line for i, line in enumerate(source.split("\n"))
            if re.search(re.escape(STUB), line)]
