"""For authors: write a chapter's exercise cells into its notebook and its solution.

    python scripts/exercise_cells.py NAME SOLUTION.cu INTRO.md [SOLUTION_INTRO.md]

The chapter notebook gets the skeleton (each solution region replaced by the stub), the
solution notebook the solution; both get the intro, `%load_ext` and the `%%exercise` cell
(an nbgrader solution cell, which shows the grading report without raising), followed
right away by a "Your grade" heading and the autograded test cell (which raises on the
skeleton: tagged nbval-raises-exception there), so that the student sees the verdict
next to the exercise; "Run All" stops there until the kernel passes, and the chapter's
"Check your answer" section comes after it. Cells of an earlier run are replaced where
they were (new ones: at the end). Execute both notebooks afterwards (jupyter nbconvert
--execute --inplace --allow-errors).
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from gemm_kernels.exercises.catalog import get          # noqa: E402
from gemm_kernels.exercises.stubs import skeleton       # noqa: E402


def _lines(s):
    src = s.split("\n")
    return [l + "\n" for l in src[:-1]] + ([src[-1]] if src[-1] else [])


def _md(text, cid):
    return {"cell_type": "markdown", "id": cid, "metadata": {}, "source": _lines(text)}


def _code(text, cid, tags=(), nbgrader=None):
    meta = {"tags": list(tags)} if tags else {}
    if nbgrader:
        meta["nbgrader"] = {"schema_version": 3, **nbgrader}
    return {"cell_type": "code", "execution_count": None, "id": cid, "metadata": meta,
            "outputs": [], "source": _lines(text)}


# Told to the student under every exercise: the saved notebook shows the report failing.
EXPECTED_FAIL = ("Until your kernel is written and passes, the report says FAIL: that is "
                 "expected. The cell under *Your grade*, right below it, turns the report "
                 "into a pass or a fail; it stops with an `AssertionError` (and *Run All* "
                 "with it) until your kernel passes: run the cells after it by hand until "
                 "then.")


def cells(name, intro, solution_src, student):
    """(the exercise's cells, the grade cells that close the notebook)."""
    src = skeleton(solution_src) if student else solution_src
    if student and EXPECTED_FAIL not in intro:
        intro = intro + "\n\n" + EXPECTED_FAIL
    exercise = [_md(intro, f"ex-{name}-intro"),
                _code("%load_ext gemm_kernels.exercises", f"ex-{name}-load"),
                _code(f"%%exercise {name}\n" + src, f"ex-{name}-kernel",
                      ("nbval-ignore-output",),
                      {"grade": False, "solution": True, "locked": False,
                       "grade_id": f"ex{name}_kernel"})]
    grade = [_md(f"## Your grade: {get(name).title}\n\nThe report of your last run of the "
                 f"`%%exercise {name}` cell, as a pass or a fail.", f"ex-{name}-grade"),
             _code(f'from gemm_kernels.exercises import verdict\nverdict("{name}").assert_passed()',
                   # The solution's cell passes everywhere, but prints "NOT FULLY GRADED"
                   # only where there is no GPU: its output depends on the machine.
                   f"ex-{name}-test", ("nbval-raises-exception",) if student
                   else ("nbval-ignore-output",),
                   {"grade": True, "solution": False, "locked": True, "points": 1,
                    "grade_id": f"ex{name}_test"})]
    return exercise, grade


def put(path, exercise, grade):
    """The exercise where its cells were (else at the end), its grade cells right after."""
    nb = json.loads(Path(path).read_text())
    prefix = exercise[0]["id"].rsplit("-", 1)[0] + "-"
    old = [i for i, c in enumerate(nb["cells"]) if str(c.get("id", "")).startswith(prefix)]
    kept = [c for c in nb["cells"] if not str(c.get("id", "")).startswith(prefix)]
    at = old[0] if old else len(kept)
    nb["cells"] = kept[:at] + exercise + grade + kept[at:]
    Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def main(name, solution_file, intro_file, solution_intro_file=None):
    ch = get(name).chapter
    sol = Path(solution_file).read_text()
    intro = Path(intro_file).read_text().strip()
    sol_intro = Path(solution_intro_file).read_text().strip() if solution_intro_file else \
        "## Write the kernel: a solution"
    put(next((ROOT / "notebooks").glob(f"{ch}_*.ipynb")), *cells(name, intro, sol, True))
    put(ROOT / "notebooks" / "solutions" / f"{ch}_solution.ipynb",
        *cells(name, sol_intro, sol, False))


if __name__ == "__main__":
    main(*sys.argv[1:])
