"""Chapter 08's static check, read from the submission's SASS: does the compiled main
loop keep the next tile's global loads in flight?

The source order of the calls in the K loop decides nothing: the compiler schedules the
loads where it likes. Chapter 08's own kernel issues them first in the source, and the
compiled loop issues them after all but two FFMAs of the step; a loop that computes
first and fetches afterwards can compile to loads near the top. So the check reads the
machine code: for every global load (LDG) of the main loop, how many FFMAs the warp
issues before the first instruction that reads the loaded registers (the store into
shared memory). It also counts the barriers: one BAR.SYNC per trip of the loop, and one
before the loop (after the prologue's store), as a double buffer needs.

The check is structural: it says whether a prefetch survived ptxas at the graded tile,
not how fast the kernel runs (the chapter times that). Its threshold, a quarter of the
step's FFMAs, is "the quarter-step check" wherever the chapter, its solution and this
grader name it.

What it cannot see: which stage a store writes (storing into the stage being read is a
race) and whether the indices are right. Those need the kernel to run (the grader's
step "correct").
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from gemm_kernels.core import analysis, compiler
from gemm_kernels.exercises.solutions import solution_text
from gemm_kernels.exercises.stubs import STUB
from gemm_kernels.exercises.submission import submission_sass

# The one definition of "in flight" the chapter, its solution and this grader share: a
# global load is in flight for the FFMAs the warp issues between the load and the first
# instruction that uses its value. The quarter-step check: at least a quarter of the
# step's FFMAs.
IN_FLIGHT_FRACTION = 4          # a quarter of the step
CHECK = "the quarter-step check"

_REG = re.compile(r"\bR(\d+)(\.64)?\b")
_NO_DEST = ("STS", "STG", "STL", "ST", "RED", "ATOM", "BAR", "BRA", "LDGSTS", "DEPBAR")


def regs_read(text: str) -> set[int]:
    """The registers an instruction ('OPCODE operands', no predicate) reads: every
    register operand but the first, which it writes (stores, barriers and branches
    write none); `.64` operands are register pairs."""
    op, _, operands = text.partition(" ")
    parts = operands.split(",")
    src = parts if op.split(".")[0] in _NO_DEST else parts[1:]
    out = set()
    for m in _REG.finditer(",".join(src)):
        n = int(m.group(1))
        out.update((n, n + 1) if m.group(2) else (n,))
    return out


def regs_loaded(family: str, text: str) -> set[int]:
    """The registers a load writes: R<n>, and the next ones for .64 and .128 loads."""
    m = re.match(r"\S+\s+R(\d+)", text)
    if not m:
        return set()
    width = {"64": 2, "128": 4}.get(family.rpartition(".")[2], 1)
    return set(range(int(m.group(1)), int(m.group(1)) + width))


@dataclass(frozen=True)
class Load:
    """One global load of the main loop: its position (instruction index in the loop),
    the position of the first instruction that reads what it loaded (None: none in the
    loop), and the FFMAs issued in between (the loop runs again after its last
    instruction, so a use may come in the next trip)."""
    at: int
    use: int | None
    ffma: int
    before: int = 0            # FFMAs of the trip issued before the load


@dataclass(frozen=True)
class LoopLoads:
    """What the main loop of one compiled kernel does with its global loads."""
    instructions: int          # in one trip
    ffma: int                  # FFMAs in one trip
    barriers: int              # BAR.SYNC in one trip
    barriers_before: int       # BAR.SYNC before the loop (the prologue's)
    loads: tuple[Load, ...]    # the LDGs that fill registers, in order

    @property
    def fewest(self) -> int | None:
        """The fewest FFMAs between a global load and its first use (None: no load)."""
        used = [ld.ffma for ld in self.loads if ld.use is not None]
        return min(used) if used else None

    @property
    def needed(self) -> int:
        """The FFMAs a load must stay in flight to count as prefetched."""
        return self.ffma // IN_FLIGHT_FRACTION


def passes(lp: LoopLoads) -> bool:
    """Whether every used global load of the loop passes the quarter-step check."""
    return lp.fewest is not None and lp.fewest >= lp.needed


def check_words(lp: LoopLoads) -> str:
    """'passes (128)' / 'fails (256)': the quarter-step check of a loop, for a table
    cell; the number is the FFMAs the check asks for."""
    return "-" if lp.fewest is None else \
        f"{'passes' if passes(lp) else 'fails'} ({lp.needed:,})"


def in_flight_words(lp: LoopLoads) -> str:
    """How long a compiled loop keeps its loads in flight, in the words the chapter, its
    solution and the grader all use: 'in flight for 163 of the step's 1,024 FFMAs (fails
    the quarter-step check: 256 or more)'."""
    if lp.fewest is None:
        return "no global load used in the loop"
    return (f"in flight for {lp.fewest:,} of the step's {lp.ffma:,} FFMAs "
            f"({'passes' if passes(lp) else 'fails'} {CHECK}: {lp.needed:,} or more)")


def loop_strip_text(lp: LoopLoads, width: int = 64) -> str:
    """The chapter's loop strip in text, for the grader's message: one trip of the
    compiled loop drawn `width` characters wide ('L': a global load, 'u': the first
    instruction that uses one, '-': the rest), then one line per load saying where it
    sits among the step's FFMAs and how many FFMAs later its value is first used."""
    if not lp.loads or not lp.instructions:
        return ""
    cells = ["-"] * width
    cell = lambda i: min(width - 1, i * width // lp.instructions)   # noqa: E731
    for ld in lp.loads:
        if ld.use is not None and cells[cell(ld.use)] != "L":
            cells[cell(ld.use)] = "u"
    for ld in lp.loads:
        cells[cell(ld.at)] = "L"
    lines = [f"your compiled loop, one trip ({lp.instructions:,} instructions, "
             f"{lp.ffma:,} FFMAs), start to end: |{''.join(cells)}|"]
    for n, ld in enumerate(lp.loads, 1):
        used = ("never used in the loop" if ld.use is None else
                f"first used {ld.ffma:,} FFMAs later")
        lines.append(f"  global load {n}: issued after {ld.before:,} of the step's "
                     f"{lp.ffma:,} FFMAs, {used}")
    return "\n".join(lines)


def loop_loads(sass: str) -> LoopLoads:
    """The main loop's global loads and barriers, from nvdisasm's text of one kernel."""
    body = analysis.main_loop(sass)
    start = body[0][0] if body else 0
    before = [f for a, f, _ in analysis.instructions(sass) if a < start]
    n = len(body)
    loads = []
    for i, (_, family, text) in enumerate(body):
        if family.split(".")[0] != "LDG":
            continue
        dest = regs_loaded(family, text)
        if not dest:
            continue
        ffma, use = 0, None
        for j in range(1, n + 1):
            _, f2, t2 = body[(i + j) % n]
            if regs_read(t2) & dest:
                use = (i + j) % n
                break
            ffma += f2 == "FFMA"
        loads.append(Load(i, use, ffma, sum(f == "FFMA" for _, f, _ in body[:i])))
    return LoopLoads(instructions=n, ffma=sum(f == "FFMA" for _, f, _ in body),
                     barriers=sum(f.startswith("BAR") for _, f, _ in body),
                     barriers_before=sum(f.startswith("BAR") for f in before),
                     loads=tuple(loads))


def prefetch_problems(sass: str, agreement=lambda: "") -> list[str]:
    """What keeps a compiled kernel from being a double buffer whose loads are in
    flight: empty when the main loop has its global loads, every one of them used at
    least a quarter of a step's FFMAs later, one barrier per trip and one before.
    `agreement()`: a sentence on whether this ptxas keeps the worked answer in flight."""
    lp = loop_loads(sass)
    problems = []
    if lp.barriers_before == 0:
        problems.append("no __syncthreads() between the prologue and the K loop: the first "
                        "step could read stage 0 before every thread has stored its part")
    if lp.barriers != 1:
        problems.append(
            "no __syncthreads() in the compiled K loop: a step would read the stage that "
            "other warps are still storing" if lp.barriers == 0 else
            f"{lp.barriers} __syncthreads() per step in the compiled K loop: a second "
            "barrier is not wrong (the results can still be right), but this exercise asks "
            "for one per step, and with two stages one is enough: the store writes the "
            "stage that nobody reads any more")
    if not lp.loads:
        problems.append("no global load in the compiled K loop: each step loads the next "
                        "tile (fetch_tiles) while it computes on the current one")
        return problems
    if any(ld.use is None for ld in lp.loads):
        problems.append("the compiled K loop loads values from global memory that no "
                        "instruction of the loop uses: store the next tile into the other "
                        "stage inside the loop, in every step")
    fewest = lp.fewest
    if fewest is not None and fewest < lp.needed:
        note = agreement()
        problems.append(
            f"your loads are not in flight long enough: {in_flight_words(lp)}, counted from "
            "a global load of the next tile to the first instruction that uses it. The "
            f"compiler moved the loads down towards the store that uses them. "
            + (note + " " if note else "")
            + "This is a verdict on the schedule ptxas made, not on your results. Where "
            "do your loads sit in the strip below, and what in your source could have let "
            "ptxas move them there?\n" + loop_strip_text(lp))
    if re.search(r"\bSTL\b", sass):
        problems.append("the compiled kernel stores registers to local memory (STL). Of "
                        "the two causes a spill can have, at the cap of 128 registers the "
                        "likely one here is register pressure rather than an indexed array: "
                        "simplify the step's index arithmetic (a clamped "
                        "min(tile + 1, tiles - 1) index, for one, costs registers)")
    return problems


_DEVICE_FN = re.compile(r"__device__[^(]*?\b(\w+)\s*\(")


def helpers_at(detail: str, exercise: str = "08_double_buffer") -> list[tuple[int, str]]:
    """For a message naming lines of the student's cell ('between line 95 and line 75 of
    your cell'), the given helper each line sits in: [(95, 'compute_stage'), ...]. A race
    found inside a helper is reported at the helper's line; the student's own line is the
    call of that helper in the K loop. The helpers stand above the part the student
    writes, so their lines are those of the worked answer's cell (line 1 of the cell is
    the %%exercise line); lines outside a helper are left out."""
    text = solution_text(exercise[:2], exercise).splitlines()
    out = []
    for n in dict.fromkeys(int(m) for m in re.findall(r"\bline (\d+)", detail)):
        for line in reversed(text[:max(n - 1, 0)]):
            if "__global__" in line:
                break
            m = _DEVICE_FN.search(line)
            if m:
                out.append((n, m.group(1)))
                break
    return out


def race_hint(detail: str, exercise: str = "08_double_buffer") -> str:
    """Exercise 08's hint for a failed step 3: for a race, the given helpers its lines
    sit in and the question to ask of the calls in the K loop; else what to check."""
    if "data race" not in detail:
        return ("wrong numbers with no race: check the k0 of each fetch and what the last "
                "step fetches and stores")
    where = helpers_at(detail, exercise)
    named = " and ".join(f"line {n} is in {fn}" for n, fn in where)
    calls = " and ".join(dict.fromkeys(f"{fn}(...)" for _, fn in where))
    return ((f"{named} (the given helpers): the race comes from your "
             f"call{'s' if len(calls.split(' and ')) > 1 else ''} of {calls} in the K loop. "
             if where else "the race is between the two lines named above. ")
            + "In one step, which stage does each call use? The store must write the "
              "stage that nobody reads in that step")


def compiler_agreement(exercise: str, kernel: str, params: dict) -> str:
    """Whether the ptxas installed here schedules as the chapter's did: the exercise's
    worked answer compiled here, and how long it keeps its loads in flight. One sentence
    for the grader's message (a failing source is then the source, not the compiler)."""
    worked = solution_text(exercise[:2], exercise)   # an exercise's name starts with its chapter
    lp = loop_loads(submission_sass(exercise, kernel, params, worked) or "")
    version = compiler.ptxas_version()
    if lp.fewest is not None and lp.fewest >= lp.needed:
        return (f"The ptxas installed here ({version}) schedules as the chapter's did: "
                f"the chapter's worked answer compiled with it keeps its loads "
                f"{in_flight_words(lp)}.")
    return (f"Note: with the ptxas installed here ({version}) even the chapter's worked "
            f"answer fails this check ({in_flight_words(lp)}): this compiler schedules "
            "differently from the one the chapter used, so compare with the chapter's "
            "tables, which this notebook compiles here too.")


def prefetch_in_flight(exercise: str, kernel: str, params: dict) -> Callable[[str], list[str]]:
    """The static check of exercise 08 (see the module's docstring); silent while the
    source still holds the stub, which the grader reports itself."""
    def check(source: str) -> list[str]:
        if STUB in source:
            return []
        sass = submission_sass(exercise, kernel, params, source)
        return [] if sass is None else prefetch_problems(
            sass, lambda: compiler_agreement(exercise, kernel, params))

    def note(source: str) -> str:
        """On a pass, the measured number: how long the loads stay in flight."""
        sass = None if STUB in source else submission_sass(exercise, kernel, params, source)
        return "" if not sass else f"your loads are {in_flight_words(loop_loads(sass))}"
    check.__name__ = f"prefetch_in_flight_{exercise}"
    check.note = note
    return check
