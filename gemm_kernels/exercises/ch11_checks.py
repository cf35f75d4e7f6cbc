"""Chapter 11's static check: the wide-access bank rules on the student's tile of doubles.

The exercise is chapter 03's tiled multiply in double precision with the B tile stored
transposed: row c of `B_shared` holds column c of B's tile, so thread (tx, ty) stores
the element it loads, B(tile * BLOCK + ty, col), in row tx, and reads row tx in the inner
loop. The student chooses the row length of `B_shared` (its declaration) and the column
each element goes to. This module finds every `A_shared[..][..]` and `B_shared[..][..]`
in the code (comments aside), evaluates both indices for every lane of every warp of
the BLOCK x BLOCK block and every `k` of the inner loop, with the row length read from
the tile's declaration (a local name for a thread index, `const int tx = threadIdx.x;`,
is read as the index it names), and then:

* refuses a B layout that is not the transposed one (a row index other than
  threadIdx.x), that leaves the tile, puts two elements in one slot, or whose read at `k`
  does not find what the store put there for ty = k;
* prices every warp instruction with the bank model at the width ptxas gives it. A store
  of a double is an STS.64. A read is an LDS.64, unless every thread's elements of k and
  k + 1 (k even) sit in consecutive slots starting at a multiple of 16 bytes: then ptxas
  reads both with one LDS.128 (as it does for `A_shared[ty][k]`), and the read is priced
  per quarter-warp with 16-byte banks (tests/test_exercise_ch11.py checks this rule
  against the SASS for several row lengths). Where the submission's SASS is at hand, each
  read is priced at its own compiled width: the loop's LDS.128 go first to the reads
  that can pair, A's first (BLOCK / 2 per read of a tile step), and a read left without
  enough of them (an XOR-swizzled read that ptxas cannot prove pairs, say) is priced as
  the LDS.64 it compiled to, as chapter 04's check does per instruction;
* refuses an access that costs a warp more wavefronts than its phases before merging
  (2 for an 8-byte access, two half-warps; 4 for a 16-byte one, four quarter-warps): one
  wavefront per phase is conflict-free, and merging phases can only save one.

No GPU is needed: a student without one learns what the layout costs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gemm_kernels.exercises.cexpr import ExpressionError, code_only, compile_expression, evaluate
from gemm_kernels.exercises.stubs import stub_lines
from gemm_kernels.memory import banks

ELEMENT = 8                                   # a double
TILES = ("A_shared", "B_shared")
NAMES = ("threadIdx.x", "threadIdx.y", "k", "BLOCK")
PHASES = {8: 2, 16: 4}                        # phases of a full warp before merging
PHASE_NAME = {8: "half-warp (16 lanes, 16 banks of 8 bytes)",
              16: "quarter-warp (8 lanes, 8 banks of 16 bytes)"}
OPCODE = {("st", 8): "STS.64", ("ld", 8): "LDS.64", ("ld", 16): "LDS.128"}
# The form the check reads, shown where it cannot read a submission: the given A_shared
# accesses are the example (they give nothing of the B_shared layout away).
FORM = ("The check reads each access as TILE[row][col], both indices written inline in "
        "threadIdx.x, threadIdx.y, k and BLOCK (or a name set to threadIdx.x or .y), as the "
        "cell writes A_shared[threadIdx.y][threadIdx.x] and A_shared[threadIdx.y][k]; a "
        "flattened index or another helper variable is not read")

_DECL = re.compile(r"__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?double\s+"
                   r"(A_shared|B_shared)\s*\[([^\[\]]*)\]\s*\[([^\[\]]*)\]\s*;")
_ACCESS = re.compile(r"\b(A_shared|B_shared)\s*\[([^\[\]]+)\]\s*\[([^\[\]]+)\]")
_STORE = re.compile(r"\s*=(?!=)")
# `const int tx = threadIdx.x, ty = threadIdx.y;`: names for the thread indices, as
# chapters 05 on write them
_DECLARATION = re.compile(r"\b(?:const\s+)?(?:int|unsigned(?:\s+int)?|auto)\s+([^;{}()]+?);")
_NAMED_INDEX = re.compile(r"^\s*(\w+)\s*=\s*(threadIdx\.[xy])\s*$")


def aliases(code: str) -> dict[str, str]:
    """{name: 'threadIdx.x' or 'threadIdx.y'} for every local variable the code sets to a
    thread index and nothing else (`const int tx = threadIdx.x, ty = threadIdx.y;`)."""
    found = {}
    for d in _DECLARATION.finditer(code):
        for part in d.group(1).split(","):
            m = _NAMED_INDEX.match(part)
            if m:
                found[m.group(1)] = m.group(2)
    return found


def _unalias(expr: str, names: dict[str, str]) -> str:
    for name, index in names.items():
        expr = re.sub(rf"\b{re.escape(name)}\b", index, expr)
    return expr


@dataclass(frozen=True)
class Access:
    """One shared-memory access of the source: its tile, store or read, and its indices."""
    tile: str
    op: str                      # "st" or "ld"
    row: str
    col: str

    @property
    def what(self) -> str:
        return f"{'the store to' if self.op == 'st' else 'the read of'} " \
               f"{self.tile}[{self.row}][{self.col}]"


def threads(block: int, warp: int) -> list[tuple[int, int]]:
    """(tx, ty) of the 32 lanes of `warp` in a BLOCK x BLOCK block."""
    return [((warp * banks.WARP + lane) % block, (warp * banks.WARP + lane) // block)
            for lane in range(banks.WARP)]


def slot_function(access: Access, pitch: int, block: int):
    """(tx, ty, k) -> (row, col, slot) of the access, slot = row * pitch + col."""
    row = compile_expression(access.row, NAMES)
    col = compile_expression(access.col, NAMES)

    def slot(tx, ty, k):
        names = {"threadIdx.x": tx, "threadIdx.y": ty, "k": k, "BLOCK": block}
        r, c = row(names), col(names)
        return r, c, r * pitch + c
    return slot


def read_pairs(slot, block: int) -> bool:
    """True when every thread's elements of k and k + 1 (k even) lie in consecutive slots
    whose first starts at a multiple of 16 bytes: ptxas then reads both with one LDS.128."""
    for ty in range(block):
        for tx in range(block):
            for k in range(0, block - 1, 2):
                s = slot(tx, ty, k)[2]
                if s % 2 or slot(tx, ty, k + 1)[2] != s + 1:
                    return False
    return True


def cost(slot, block: int, op: str, width: int):
    """The costliest warp instruction of the access (over the warps of the block and the
    k of the inner loop, in pairs for a 16-byte read): (its banks.Analysis, warp, k)."""
    worst = None
    ks = range(0, block, width // ELEMENT) if op == "ld" else (0,)
    for warp in range(block * block // banks.WARP):
        lanes = threads(block, warp)
        for k in ks:
            an = banks.analyse([slot(tx, ty, k)[2] * ELEMENT for tx, ty in lanes], width)
            if worst is None or an.wavefronts > worst[0].wavefronts:
                worst = (an, warp, k)
    return worst


def layout_problems(accesses: list[Access], slots: dict, pitch: dict, block: int) -> list[str]:
    """Indices outside their tile; for B_shared, the transposed layout and the match of
    the read with the store."""
    problems = []
    for a in accesses:
        slot = slots[a]
        ks = range(block) if a.op == "ld" else (0,)
        for tx, ty, k in ((tx, ty, k) for ty in range(block) for tx in range(block) for k in ks):
            r, c, _ = slot(tx, ty, k)
            if not (0 <= r < block and 0 <= c < pitch[a.tile]):
                at = f"k = {k}, " if a.op == "ld" else ""
                problems.append(f"{a.what} is [{r}][{c}] for {at}threadIdx = ({tx}, {ty}), "
                                f"outside the tile's {block} rows of {pitch[a.tile]}")
                break
            if a.tile == "B_shared" and r != tx:
                at = f"at k = {k} " if a.op == "ld" else ""
                problems.append(f"{a.what} is row {r} {at}for threadIdx = ({tx}, {ty}): this "
                                "exercise stores B transposed, so a thread's row of B_shared "
                                "is the column of B it owns, threadIdx.x")
                break
    if problems:
        return problems
    stores = [a for a in accesses if a.tile == "B_shared" and a.op == "st"]
    reads = [a for a in accesses if a.tile == "B_shared" and a.op == "ld"]
    if len(stores) != 1:
        return [f"B_shared is stored {len(stores)} times: the check expects one store, "
                "B_shared[threadIdx.x][..] = b"] if stores else []
    store = slots[stores[0]]
    for tx in range(block):
        seen = {}
        for ty in range(block):
            c = store(tx, ty, 0)[1]
            if c in seen:
                return [f"{stores[0].what} puts the elements of threadIdx.y = {seen[c]} and "
                        f"{ty} (threadIdx.x = {tx}) in the same slot [{tx}][{c}]: every "
                        "element needs a slot of its own"]
            seen[c] = ty
    for a in reads:
        read = slots[a]
        for tx in range(block):
            for k in range(block):
                got, want = read(tx, 0, k)[1], store(tx, k, 0)[1]
                if got != want:
                    return [f"{a.what} at k = {k} reads [{tx}][{got}] for threadIdx.x = {tx}, "
                            f"but the store put B(tile * BLOCK + {k}, col) at [{tx}][{want}] "
                            f"(the thread with threadIdx.y = {k} stored it)"]
    return []


def widths(accesses: list[Access], slots: dict, block: int,
           loads_128: int | None = None) -> dict[Access, int]:
    """The width ptxas gives each access: 8 bytes, or 16 for a read whose k and k + 1 lie
    side by side, 16-byte aligned (`read_pairs`). `loads_128`, where the SASS is at hand:
    the LDS.128 of the loop (one tile step, BLOCK values of k). A read that pairs needs
    BLOCK / 2 of them; they go to A's reads first, then B's, and a read left without
    enough is priced as the LDS.64 it compiled to."""
    left = loads_128
    out = {}
    for a in sorted(accesses, key=lambda a: (a.op != "ld", a.tile != "A_shared")):
        wide = a.op == "ld" and read_pairs(slots[a], block)
        if wide and left is not None:
            wide, left = (True, left - block // 2) if left >= block // 2 else (False, left)
        out[a] = 16 if wide else ELEMENT
    return out


def price(accesses: list[Access], slots: dict, block: int,
          loads_128: int | None = None) -> list[str]:
    """The accesses that cost more than one wavefront per phase, each with its cost, each
    priced at its compiled width (`widths`)."""
    problems = []
    width_of = widths(accesses, slots, block, loads_128)
    for a in accesses:
        slot, width = slots[a], width_of[a]
        an, warp, k = cost(slot, block, a.op, width)
        if an.wavefronts > PHASES[width]:
            at = f" at k = {k}" if a.op == "ld" else ""
            how = (": your rows keep k and k + 1 side by side, 16-byte aligned, so ptxas "
                   "reads both at once") if width == 16 else ""
            problems.append(
                f"{a.what} ({OPCODE[(a.op, width)]}{how}) costs warp {warp}{at} "
                f"{an.wavefronts} wavefronts where {PHASES[width]} would do: "
                f"{_article(an.max_degree)}-way bank conflict in each {PHASE_NAME[width]}")
    return problems


def step_cost(accesses: list[Access], slots: dict, width_of: dict, block: int):
    """[(access, opcode, wavefronts of one warp instruction, instructions per tile step)]
    and their total: one warp's wavefronts per tile step (the costliest warp of each)."""
    rows = []
    for a in accesses:
        width = width_of[a]
        count = 1 if a.op == "st" else block * ELEMENT // width
        rows.append((a, OPCODE[(a.op, width)], cost(slots[a], block, a.op, width)[0].wavefronts,
                     count))
    return rows, sum(w * n for *_, w, n in rows)


def chapter_cost(block: int) -> int:
    """One warp's wavefronts per tile step in the chapter's own kernel (B not transposed,
    A read with the fused LDS.128), priced with the same model."""
    given = [Access("A_shared", "st", "threadIdx.y", "threadIdx.x"),
             Access("A_shared", "ld", "threadIdx.y", "k"),
             Access("B_shared", "st", "threadIdx.y", "threadIdx.x"),
             Access("B_shared", "ld", "k", "threadIdx.x")]
    slots = {a: slot_function(a, block, block) for a in given}
    return step_cost(given, slots, widths(given, slots, block), block)[1]


def step_cost_note(accesses: list[Access], slots: dict, width_of: dict, block: int) -> str:
    """The grader's report on a passing layout: what each access of B_shared costs and the
    step's total, next to the chapter's kernel, so that the student can check the price
    they worked out."""
    rows, total = step_cost(accesses, slots, width_of, block)
    parts = [f"{a.what} {op}, {w} wavefront{'s' * (w != 1)}"
             + ("" if n == 1 else f" per instruction, {n} per tile step")
             for a, op, w, n in rows if a.tile == "B_shared"]
    given = chapter_cost(block)
    same = ("the same as" if total == given else
            f"{'more' if total > given else 'fewer'} than the {given} of")
    return (f"your layout's price: {'; '.join(parts)}; in all {total} wavefronts per warp "
            f"and tile step, {same} the chapter's kernel"
            + ("" if total != given else f" ({given})"))


def _article(n: int) -> str:
    """'a 2', 'an 8', 'an 11', 'an 18'."""
    return f"{'an' if str(n).startswith('8') or n in (11, 18) else 'a'} {n}"


def tiles_64bit(block: int, exercise: str = "", kernel: str = "", params: dict | None = None):
    """The static check of exercise 11 with BLOCK = `block`: a callable source -> problems.
    With `exercise`, `kernel` and `params` it also reads the submission's SASS and prices
    each read at the width it compiled to (`widths`)."""

    cache: dict[str, tuple] = {}

    def assess(source: str) -> tuple[list[str], tuple | None]:
        """(problems, (accesses, slots, widths) of a layout that passes, else None)."""
        if source not in cache:
            cache.clear()
            cache[source] = _assess(source)
        return cache[source]

    def _assess(source: str) -> tuple[list[str], tuple | None]:
        code = code_only(source)
        todo = bool(stub_lines(source))
        names = {"BLOCK": block}
        pitch = {}
        for tile, _, length in _DECL.findall(code):
            try:
                pitch[tile] = evaluate(length, names)
            except ValueError as e:
                return [f"cannot read the row length `{length.strip()}` of {tile}: {e}"], None
        missing = [t for t in TILES if t not in pitch]
        if missing:
            return ([] if todo else [
                f"no declaration `__shared__ double {missing[0]}[BLOCK][..];` found (the "
                "bank check reads the row length from it)"]), None
        if pitch["B_shared"] < block:
            return [f"B_shared's rows hold {pitch['B_shared']} doubles: they need at least "
                    f"BLOCK = {block}, one per k"], None
        declarations = [d.span() for d in _DECL.finditer(code)]
        alias = aliases(code)
        accesses, problems = [], []
        for m in _ACCESS.finditer(code):
            if any(s <= m.start() < e for s, e in declarations):
                continue
            accesses.append(Access(m.group(1), "st" if _STORE.match(code, m.end()) else "ld",
                                   _unalias(m.group(2).strip(), alias),
                                   _unalias(m.group(3).strip(), alias)))
        slots = {}
        for a in dict.fromkeys(accesses):
            try:
                slots[a] = slot_function(a, pitch[a.tile], block)
                slots[a](0, 0, 0)
            except (ExpressionError, ValueError, KeyError) as e:
                problems.append(f"cannot evaluate {a.what} (write the indices with "
                                f"{', '.join(NAMES)}): {e}. {FORM}")
        if problems:
            return problems, None
        accesses = list(dict.fromkeys(accesses))
        if not todo:
            problems += [f"no {'store to' if op == 'st' else 'read of'} {t} found: stage the "
                         f"tile and read it in the inner loop. {FORM}"
                         for t in TILES for op in ("st", "ld")
                         if not any(a.tile == t and a.op == op for a in accesses)]
        problems += layout_problems(accesses, slots, pitch, block)
        if problems:
            return problems, None
        loads_128 = None
        if exercise:
            from gemm_kernels.core import analysis
            from gemm_kernels.exercises.submission import submission_sass
            sass = submission_sass(exercise, kernel, params or {}, source)
            if sass is not None:
                loads_128 = sum(op == "LDS.128" for _, op, _ in analysis.main_loop(sass))
        problems = price(accesses, slots, block, loads_128)
        return problems, (None if problems or todo else
                          (accesses, slots, widths(accesses, slots, block, loads_128)))

    def check(source: str) -> list[str]:
        return assess(source)[0]

    def note(source: str) -> str:
        priced = assess(source)[1]
        return "" if priced is None else step_cost_note(*priced, block)


    check.__name__ = f"tiles_64bit_{block}"
    check.note = note
    return check
