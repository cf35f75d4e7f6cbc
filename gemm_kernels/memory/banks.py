"""The shared-memory bank model: what one warp-wide shared-memory load costs.

Shared memory is 32 banks, each 4 bytes wide; 4-byte word ``w`` lives in bank ``w % 32``.
In one *wavefront* every bank can deliver one word, so a wavefront moves at most 128
bytes. A warp instruction is split into *phases*:

* 32-bit loads (``LDS``, width 4): one phase of all 32 lanes;
* 64-bit loads (``LDS.64``, float2/double, width 8): two half-warp phases, lanes 0-15
  and 16-31 (16 lanes x 8 bytes = 128 bytes);
* 128-bit loads (``LDS.128``, float4, width 16): four quarter-warp phases of 8 lanes.

Lanes that read the same 4-byte word share it (broadcast): that costs nothing extra.
Two phases *merge* into one when the warp reads few enough distinct addresses for them
to fit together: if, for every active lane ``i``, lane ``i ^ 1`` is inactive or reads the
same address, or, for every active lane ``i``, lane ``i ^ 2`` is inactive or reads the same
address. For 64-bit loads that merges the two half-warps into one phase; for 128-bit
loads it merges the two quarter-warps inside a half-warp, but the two half-warps of a
128-bit load are never merged.

Each (possibly merged) phase then costs as many wavefronts as the largest number of
*distinct* words any single bank has to deliver in it (its conflict degree); a phase
whose lanes are all inactive costs nothing.

``ideal`` in :class:`Analysis` is the number of phases that have an active lane: a phase
never asks for more than 32 distinct words (16 lanes x 2 words, 8 lanes x 4 words, or a
merged phase with only half as many distinct addresses), so without bank conflicts every
active phase costs exactly one wavefront and no layout of the same request could do
better. ``conflicts = wavefronts - ideal`` is then the sum over phases of (degree - 1).
Nsight Compute's ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum`` is meant to
count the same thing, wavefronts beyond the minimum, next to
``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum`` for the wavefronts themselves
(see ``gemm_kernels.memory.probe``, which checks this model against the hardware).

Addresses are byte offsets into shared memory, one per lane, lane 0 first: exactly 32
non-negative integers (numpy integers too), with ``None`` and only ``None`` marking an
inactive lane (a lane that does not load). Anything else (a negative offset, a float,
a bool, a nested array, another lane count) is a ValueError that names the lane and
the problem, so a mistake is never counted as some other access.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from gemm_kernels.core.device import SMEM_BANK_BYTES, SMEM_BANKS
from gemm_kernels.core.registry import int_problem

BANKS = SMEM_BANKS
WORD = SMEM_BANK_BYTES      # bytes per bank per wavefront
WARP = 32
WIDTHS = (4, 8, 16)

_PHASE_LANES = {4: 32, 8: 16, 16: 8}   # lanes per phase before merging
MERGE_RULES = ("i^1", "i^2")


# ------------------------------------------------------------------ data classes

@dataclass(frozen=True)
class LaneAccess:
    """What one active lane reads: its byte address and the words and banks it touches."""
    lane: int
    address: int
    words: tuple[int, ...]
    banks: tuple[int, ...]


@dataclass(frozen=True)
class Phase:
    """One (possibly merged) phase of a warp access.

    lanes: every lane the phase covers, active or not.
    accesses: the active lanes of the phase, in lane order.
    words_per_bank: for each of the 32 banks, the number of distinct words it delivers.
    degree: the conflict degree, max(words_per_bank) (a 2-way conflict has degree 2).
    wavefronts: what the phase costs: its degree, or 0 if no lane of it is active.
    merged: True when two hardware phases were merged into this one.
    """
    lanes: tuple[int, ...]
    accesses: tuple[LaneAccess, ...]
    words_per_bank: tuple[int, ...]
    degree: int
    wavefronts: int
    merged: bool

    @property
    def active(self) -> bool:
        return bool(self.accesses)

    def bank_words(self) -> dict[int, tuple[int, ...]]:
        """bank -> the distinct words it delivers in this phase (sorted)."""
        out: dict[int, set[int]] = {}
        for a in self.accesses:
            for w, b in zip(a.words, a.banks):
                out.setdefault(b, set()).add(w)
        return {b: tuple(sorted(ws)) for b, ws in sorted(out.items())}


@dataclass(frozen=True)
class Analysis:
    """The full picture of one warp access (see the module docstring for the rules).

    merge: which rule merged phases ("i^1" or "i^2"), or None.
    wavefronts: the total cost, the sum over phases.
    ideal: the number of active phases, the least this request can cost.
    conflicts: wavefronts - ideal, comparable to ncu's bank-conflict counter.
    distinct_bytes: the bytes of distinct words the warp asks for.
    """
    width: int
    addresses: tuple[int | None, ...]
    phases: tuple[Phase, ...]
    merge: str | None
    wavefronts: int
    ideal: int
    conflicts: int
    distinct_bytes: int

    @property
    def active_lanes(self) -> tuple[int, ...]:
        return tuple(a.lane for p in self.phases for a in p.accesses)

    @property
    def max_degree(self) -> int:
        return max((p.degree for p in self.phases), default=0)

    def summary(self) -> str:
        kind = {4: "32-bit", 8: "64-bit", 16: "128-bit"}[self.width]
        merged = f", phases merged ({self.merge} rule)" if self.merge else ""
        return (f"{kind} load, {len(self.active_lanes)} active lanes, "
                f"{sum(p.active for p in self.phases)} phase(s){merged}: "
                f"{self.wavefronts} wavefront(s), ideal {self.ideal}, "
                f"{self.conflicts} extra from bank conflicts")


# ------------------------------------------------------------------ the model

def _normalise(addresses, width: int) -> tuple[int | None, ...]:
    check_width(width)
    if getattr(addresses, "ndim", 1) != 1:     # a (32, 1) array iterates as 32 arrays
        raise ValueError(f"addresses must be a flat sequence of 32 byte offsets, got an "
                         f"array of shape {addresses.shape}")
    if isinstance(addresses, (str, bytes)):
        raise ValueError(f"addresses must be a sequence of 32 byte offsets, got {addresses!r}")
    try:
        addrs = list(addresses)
    except TypeError:
        raise ValueError("addresses must be a sequence of 32 byte offsets, one per lane, "
                         f"got {type(addresses).__name__}") from None
    if len(addrs) != WARP:
        raise ValueError(f"expected exactly 32 addresses (one per lane), got {len(addrs)}")
    out: list[int | None] = []
    for lane, a in enumerate(addrs):
        if a is None:
            out.append(None)
            continue
        if isinstance(a, bool) or not isinstance(a, numbers.Integral):
            raise ValueError(f"lane {lane}: address must be an integer byte offset or None "
                             f"(inactive), got {type(a).__name__} {a!r}")
        a = int(a)
        if a < 0:
            raise ValueError(f"lane {lane}: address {a} is negative; shared-memory offsets "
                             "start at 0, and an inactive lane is marked with None")
        if a % width:
            raise ValueError(f"lane {lane}: address {a} is not aligned to the access width "
                             f"{width} (a {width}-byte load needs a multiple of {width})")
        else:
            out.append(a)
    return tuple(out)


def _pair_rule(addrs: Sequence[int | None], lanes: Iterable[int], xor: int) -> bool:
    """For every active lane i in `lanes`, lane i^xor is inactive or reads the same address."""
    for i in lanes:
        a = addrs[i]
        if a is not None:
            b = addrs[i ^ xor]
            if b is not None and b != a:
                return False
    return True


def phase_label(phase: Phase, width: int) -> str:
    """The phase's name in the hardware's numbering and its cost, e.g. "phase 2: 2 wf" or,
    for two hardware phases served as one, "phases 0+1 merged: 1 wf" (a phase of a
    `width`-byte load is WARP * WORD // width lanes: 8 for LDS.128, 16 for LDS.64)."""
    n = WARP * WORD // width
    first, last = min(phase.lanes) // n, max(phase.lanes) // n
    name = (f"phase {first}" if first == last else
            "phases " + "+".join(str(i) for i in range(first, last + 1))
            + (" merged" if phase.merged else ""))
    return f"{name}: {phase.wavefronts} wf"


def _merge_rule(addrs, lanes) -> str | None:
    if _pair_rule(addrs, lanes, 1):
        return "i^1"
    if _pair_rule(addrs, lanes, 2):
        return "i^2"
    return None


def _phase(addrs, lanes: tuple[int, ...], width: int, merged: bool) -> Phase:
    per_bank: list[set[int]] = [set() for _ in range(BANKS)]
    accesses = []
    for i in lanes:
        a = addrs[i]
        if a is None:
            continue
        first = a // WORD
        words = tuple(range(first, first + width // WORD))
        banks = tuple(w % BANKS for w in words)
        for w, b in zip(words, banks):
            per_bank[b].add(w)
        accesses.append(LaneAccess(i, a, words, banks))
    counts = tuple(len(s) for s in per_bank)
    degree = max(counts)
    return Phase(lanes, tuple(accesses), counts, degree, degree if accesses else 0, merged)


def analyse(addresses, width: int = 4, *, quarter_merge_scope: str = "warp") -> Analysis:
    """Analyse one warp-wide shared-memory load of `width` bytes per lane.

    addresses: 32 byte offsets, lane 0 first; None = inactive lane.
    quarter_merge_scope: for 128-bit loads, where the merging rule is evaluated:
        "warp" (default): once over all 32 lanes, the way the 64-bit rule is stated;
        "half": separately for each half-warp. The hardware probe
        (``gemm_kernels.memory.probe``, pattern w16_merge_first_half_only) tells them apart:
        on the H200 the quarters did not merge when only one half-warp met the rule, so
        the rule is warp-wide.
    Raises ValueError for a wrong lane count, an unsupported width, or an address that
    is not a non-negative integer (or None) aligned to the width.
    """
    if quarter_merge_scope not in ("half", "warp"):
        raise ValueError(f"quarter_merge_scope must be 'half' or 'warp', got {quarter_merge_scope!r}")
    addrs = _normalise(addresses, width)
    n = _PHASE_LANES[width]
    groups = [tuple(range(s, s + n)) for s in range(0, WARP, n)]
    phases: list[Phase] = []
    rules = set()
    if width == 4:
        phases.append(_phase(addrs, groups[0], width, False))
    elif width == 8:
        rule = _merge_rule(addrs, range(WARP))
        if rule:
            rules.add(rule)
            phases.append(_phase(addrs, tuple(range(WARP)), width, True))
        else:
            phases += [_phase(addrs, g, width, False) for g in groups]
    else:
        warp_rule = _merge_rule(addrs, range(WARP)) if quarter_merge_scope == "warp" else None
        for half in (0, 1):
            q0, q1 = groups[2 * half], groups[2 * half + 1]
            rule = warp_rule if quarter_merge_scope == "warp" else _merge_rule(addrs, q0 + q1)
            if rule:
                rules.add(rule)
                phases.append(_phase(addrs, q0 + q1, width, True))
            else:
                phases += [_phase(addrs, q0, width, False), _phase(addrs, q1, width, False)]
    total = sum(p.wavefronts for p in phases)
    ideal = sum(1 for p in phases if p.active)
    words = {w for p in phases for a in p.accesses for w in a.words}
    merge = "i^1" if "i^1" in rules else ("i^2" if rules else None)
    return Analysis(width, addrs, tuple(phases), merge, total, ideal, total - ideal,
                    len(words) * WORD)


def wavefronts(addresses, width: int = 4) -> int:
    """The number of shared-memory wavefronts one warp's load costs (see the module doc)."""
    return analyse(addresses, width).wavefronts


def conflicts(addresses, width: int = 4) -> int:
    """Wavefronts beyond the ideal (the number of active phases)."""
    return analyse(addresses, width).conflicts


# ------------------------------------------------------------------ pattern builders

def check_width(width: int) -> None:
    """ValueError unless width is the int 4, 8 or 16 (4.0 or True would pass `in WIDTHS`)."""
    if isinstance(width, bool) or not isinstance(width, numbers.Integral) \
            or width not in WIDTHS:
        raise ValueError(f"width must be 4, 8 or 16 bytes per lane, "
                         f"got {type(width).__name__} {width!r}")


def _apply_active(addrs: list[int | None], active) -> list[int | None]:
    if active is None:
        return addrs
    if callable(active):
        mask = [bool(active(i)) for i in range(WARP)]
    else:
        mask = [bool(x) for x in active]
        if len(mask) != WARP:
            raise ValueError(f"active must give 32 flags (one per lane), got {len(mask)}")
    return [a if m else None for a, m in zip(addrs, mask)]


def strided(stride: int, width: int = 4, padding: int = 0, row_elems: int = 32,
            base: int = 0, active=None) -> list[int | None]:
    """Lane i reads element i*stride of an array of `width`-byte elements.

    Units are elements of `width` bytes (a float for 4, a float2/double for 8, a float4
    for 16), which keeps every address aligned. With `padding`, the array is a 2D tile
    whose rows hold `row_elems` elements followed by `padding` unused ones, so logical
    element e sits at e + (e // row_elems) * padding. A column read of a 32 x 32 float
    tile is ``strided(32)``; the padded tile ``[32][33]`` is ``strided(32, padding=1)``.
    base: a byte offset added to every address (must keep it aligned).
    active: None (all lanes), 32 booleans, or a function lane -> bool.
    """
    check_width(width)
    for bad in (int_problem("row_elems", row_elems), int_problem("padding", padding, 0),
                int_problem("stride", stride, 0), int_problem("base", base, 0)):
        if bad:
            raise ValueError(bad)
    out = []
    for i in range(WARP):
        e = i * stride
        out.append(base + (e + (e // row_elems) * padding) * width)
    return _apply_active(out, active)


def broadcast(address: int = 0, width: int = 4, active=None) -> list[int | None]:
    """Every lane reads the same address."""
    check_width(width)
    return _apply_active([address] * WARP, active)


def tile(rows: Sequence[int | None] | Callable[[int], int | None],
         cols: Sequence[int | None] | Callable[[int], int | None],
         pitch: int, elem_bytes: int = 4, base: int = 0) -> list[int | None]:
    """Lane l reads element (rows[l], cols[l]) of a row-major tile whose elements are
    `elem_bytes` wide (4 for float, 8 for double) and whose rows start `pitch` elements
    apart (row length plus padding). The element size is that of the array, not of the
    load: a float4 read of a float tile is ``tile(..., elem_bytes=4)`` analysed at width
    16. rows/cols may be 32-long sequences or functions of the lane; a None row or column
    makes the lane inactive."""
    if elem_bytes < 1:
        raise ValueError(f"elem_bytes must be >= 1, got {elem_bytes}")

    def get(src, lane):
        return src(lane) if callable(src) else src[lane]

    if (not callable(rows) and len(rows) != WARP) or (not callable(cols) and len(cols) != WARP):
        raise ValueError("rows and cols must give one value per lane (32)")
    out: list[int | None] = []
    for lane in range(WARP):
        r, c = get(rows, lane), get(cols, lane)
        out.append(None if r is None or c is None else base + (r * pitch + c) * elem_bytes)
    return out


def words_to_bytes(words: Sequence[int | None]) -> list[int | None]:
    """Word indices (4-byte units) to byte offsets, keeping None."""
    return [None if w is None else w * WORD for w in words]


# ------------------------------------------------------------------ picture

def plot_banks(analysis: Analysis, ax=None, title: str | None = None,
               row_of: Callable[[int], int] | None = None,
               row_name: str = "word row = word index // 32"):
    """Draw the access as a lane x bank grid: a cell (lane, bank) is filled when the lane
    reads a word from that bank, coloured by phase and labelled with the word's row
    (word // 32), one box and label per run of neighbouring banks a lane reads in the
    same row. Banks serving more than one distinct word in a phase are outlined in
    black. Labels too small to read at the axes' size are left out (the x label then
    names only the bank). `row_of` (word index -> label number) and `row_name` (what the x label
    calls it) label the words otherwise, e.g. by the row of a tile. Returns the
    matplotlib Axes."""
    row_of = row_of or (lambda w: w // BANKS)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    from gemm_kernels.core import style

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 6.5))
    cmap = plt.get_cmap("tab10")
    ax.set_xlim(-0.5, BANKS - 0.5)
    ax.set_ylim(WARP - 0.5, -0.5)
    cell_w, cell_h = style.cell_points(ax, BANKS, WARP)
    runs = []       # (lane, first bank, last bank, word row, phase colour)
    for k, phase in enumerate(analysis.phases):
        colour = cmap(k % 10)
        lo, hi = min(phase.lanes), max(phase.lanes)
        ax.add_patch(Rectangle((-0.5, lo - 0.5), BANKS, hi - lo + 1, facecolor=colour,
                               alpha=0.07, edgecolor="none"))
        hot = {b for b, n in enumerate(phase.words_per_bank) if n > 1}
        for acc in phase.accesses:
            for w, b in zip(acc.words, acc.banks):
                if b in hot:
                    ax.add_patch(Rectangle((b - 0.45, acc.lane - 0.45), 0.9, 0.9, zorder=2,
                                           fill=False, edgecolor="black", linewidth=1.5))
                last = runs[-1] if runs else None
                if last and last[0] == acc.lane and last[2] + 1 == b and last[3] == row_of(w):
                    runs[-1] = (*last[:2], b, *last[3:])
                else:
                    runs.append((acc.lane, b, b, row_of(w), colour))
        ax.text(BANKS - 0.3, (lo + hi) / 2, phase_label(phase, analysis.width),
                va="center", fontsize=9, color=colour)
    # A run is one filled box, so its label sits on solid colour, not across a gap.
    for lane, b0, b1, _, colour in runs:
        ax.add_patch(Rectangle((b0 - 0.45, lane - 0.45), b1 - b0 + 0.9, 0.9, facecolor=colour))
    # One size for every label, the largest the narrowest run fits.
    size = min((style.label_points((b1 - b0 + 1) * cell_w, cell_h, len(str(row)))
                for _, b0, b1, row, _ in runs), default=0)
    readable = size >= style.MIN_LABEL_POINTS
    for lane, b0, b1, row, colour in runs if readable else []:
        # On a patch of the run's colour: a conflict's outline between two banks of the
        # run would otherwise cross the digits (and pass between them).
        ax.text((b0 + b1) / 2, lane, str(row), ha="center", va="center_baseline",
                fontsize=size, color=style.text_colour(colour), zorder=4,
                bbox={"boxstyle": "square,pad=0", "facecolor": colour, "edgecolor": "none"})
    for a, lane in zip(analysis.addresses, range(WARP)):
        if a is None:
            ax.text(-0.9, lane, "off", ha="right", va="center", fontsize=8, color="grey")
    ax.set_xticks(range(0, BANKS, 4))
    ax.set_yticks(range(0, WARP, 4))
    ax.set_xlabel(f"bank (label: {row_name})" if readable else "bank")
    ax.set_ylabel("lane")
    kind = {4: "32-bit", 8: "64-bit", 16: "128-bit"}[analysis.width]
    ax.set_title(title or f"{kind} load: {analysis.wavefronts} wavefront(s), ideal "
                 f"{analysis.ideal}, {analysis.conflicts} from conflicts")
    return ax
