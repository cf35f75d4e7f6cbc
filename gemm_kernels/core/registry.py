"""The data model of the kernel registry: tunables, constraints, launch geometry.

Every kernel of the series is one `Kernel` entry (see `kernels.py`). Everything the
launcher, the static analysis, the widgets and the sweeps need to know about a kernel is
declared here as data, so a parameter combination is checked before anything runs.
"""
from __future__ import annotations

import numbers
import re
from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Callable, Mapping

from gemm_kernels.core import cuda_text, device, source_edits

CUDA_DIR = Path(__file__).resolve().parents[1] / "cuda"

Params = Mapping[str, object]


@dataclass(frozen=True)
class Param:
    """A tunable: its allowed values and the default the chapter uses."""
    name: str
    values: tuple
    default: object
    doc: str = ""
    cxx: Mapping[object, object] | None = None   # value -> template argument, if not itself

    @property
    def kind(self) -> type:
        """bool, int or str: the type every allowed value has."""
        return type(self.default)

    def type_problem(self, value) -> str | None:
        """A message when `value` has the wrong type, else None. Type-strict because
        Python's `32.0 == 32`, `True == 1` and `1 == True` would let a float or a bool
        pass the `in values` test and be looked up or compiled as another value."""
        if self.kind is bool:
            ok = isinstance(value, bool)
        elif self.kind is int:   # numpy integers too; a bool is not a count
            ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        else:
            ok = isinstance(value, self.kind)
        if ok:
            return None
        return (f"{self.name}={value!r} is a {type(value).__name__}, but {self.name} takes "
                f"a {self.kind.__name__}: choose one of {self.choices()}")

    def problem(self, value) -> str | None:
        """A message when `value` has the wrong type or is not one of the allowed
        values, else None."""
        wrong = self.type_problem(value)
        if wrong or value in self.values:
            return wrong
        return f"{self.name}={value!r} is not allowed; choose one of {self.choices()}"

    def choices(self) -> str:
        return ", ".join(map(repr if self.kind is str else str, self.values))


# Hardware features a kernel's source may use beyond what every supported GPU has
# (device.OLDEST, sm_75): the oldest architecture that has each, and what it is. A kernel
# lists the ones it uses in `Kernel.features`; tests/test_arch.py checks the sources.
FEATURES = {
    "cp.async": (80, "asynchronous global->shared copies (PTX cp.async, SASS LDGSTS)"),
    "wgmma": (90, "warpgroup MMA from shared memory and TMA tensor copies (PTX wgmma, "
                  "cp.async.bulk.tensor; SASS HGMMA, UTMALDG)"),
}
# Features that exist on one architecture only, compiled for its arch-specific target
# (sm_90a: the "a" code does not run on any later GPU): the architecture of each.
ONLY_ON = {"wgmma": 90}


@dataclass(frozen=True)
class Constraint:
    """A rule between tunables. `message` is formatted with the parameters.

    per_arch: the rule depends on the GPU's limits: `check(params, limits)`, and the
    message may also name the limits (`device.limits_for` keys, e.g. {arch},
    {smem_per_sm}, and {smem_per_sm_kib}, the same in KiB).
    """
    check: Callable[..., bool]
    message: str
    per_arch: bool = False

    def holds(self, p: Params, lim: Mapping) -> bool:
        return self.check(p, lim) if self.per_arch else self.check(p)

    def explain(self, p: Params, lim: Mapping) -> str:
        if not self.per_arch:
            return self.message.format(**p)
        kib = {f"{k}_kib": v // 1024 for k, v in lim.items()
               if k.startswith("smem") and isinstance(v, int)}
        return self.message.format(**{**lim, **kib, **p})


@dataclass(frozen=True, eq=False)   # hashed by identity: one object per kernel
class Kernel:
    """One kernel of the series.

    op: "sgemm" (float32 C = alpha*A@B + beta*C), "dgemm" (the same in float64),
        "transpose" (out = in.T), "copy" (out = in) or "read" (out = in after reading
        `in` PASSES times: chapter 00's L2 probe); the launcher's signature follows it.
    template: the order of the template arguments of `entry` in the .cu file.
    threads/grid: block and grid dimensions from the parameters (and the shape).
    smem: static shared memory per block in bytes, for the check before launch.
    dynamic_smem: dynamic shared memory per block in bytes, from the parameters and the
        GPU's limits (`device.limits`); passed at launch (above 48 KiB with the static
        part, the launcher raises the kernel's limit first). Read it with
        `dynamic_bytes`.
    shape_rule: returns a message when a shape cannot be handled, else None.
    shape_params: template arguments chosen from the shape, not by the user (for
        example a vectorised path when K % 4 == 0 and a scalar edge path otherwise).
        Called with shape=None for the static analysis: return the main path then.
    fixed: template arguments that never change for this entry.
    align: bytes the data pointers must be aligned to (kernels whose vector path
        trusts the pointers; 0 when nothing is assumed).
    features: hardware features the source uses (keys of FEATURES, e.g. "cp.async"):
        they set the oldest architecture the kernel runs on (`min_arch`); on an older
        GPU the registry refuses it (`runnable`), before anything is compiled.
    code: the CUDA source itself, for a kernel that has no file (a student's exercise
        submission, see `with_code`); None reads `source` from cuda/.
    a_transposed: a GEMM kernel that reads A^T (K x M, row-major) where the others read
        A. It computes the same C = alpha*A@B + beta*C and its callers pass the same A
        (M x K): the launcher makes A^T once, when it is built, outside the calls it
        returns (see `launch.operands`), so a timed call runs the GEMM alone.
    splits: for a split-K GEMM kernel (cuda/split_k.cuh), the number of K slices, which
        is also the grid's z: with more than one, each slice writes its partial product
        into a plane of a workspace the launcher allocates when it is built, and the
        source's `split_k_reduce` sums the planes into C (see `launch.launcher`).
    finishes_split: a split-K kernel that adds its slices' planes into C itself, in the
        same launch (`split_k_finish`): it takes the workspace and one arrival counter
        per block of its grid's x, y after C, and the launcher starts no second kernel.
    extra_args: for a kernel that takes more than M, N, K, alpha, A, B, beta, C: a
        function (params, A, B, C) -> the further arguments, made when the launcher is
        built (e.g. chapter 15's TMA tensor maps, which describe A and B).
    padded_b: for a GEMM kernel that can read B from a copy with padded rows: a
        function (params, shape) -> the copy's row length in elements, or None to read
        B as it is. The launcher allocates the copy once and fills it at every call
        (inside the call: the copy is part of the product's cost, and B may change).
    """
    name: str
    chapter: str
    title: str
    source: str
    entry: str
    op: str
    params: tuple[Param, ...]
    template: tuple[str, ...]
    threads: Callable[[Params], tuple[int, int, int]]
    grid: Callable[[Params, tuple], tuple[int, int, int]]
    smem: Callable[[Params], int] = lambda p: 0
    constraints: tuple[Constraint, ...] = ()
    dynamic_smem: Callable[[Params, Mapping], int] = lambda p, lim: 0
    shape_rule: Callable[[Params, tuple], str | None] = lambda p, shape: None
    shape_params: Callable[[Params, tuple], dict] = lambda p, shape: {}
    fixed: Mapping[str, object] = field(default_factory=dict)
    align: int = 0
    features: tuple[str, ...] = ()
    code: str | None = None
    a_transposed: bool = False
    splits: Callable[[Params, tuple], int] = lambda p, shape: 1
    finishes_split: bool = False
    extra_args: Callable | None = None
    padded_b: Callable[[Params, tuple], int | None] = lambda p, shape: None
    base: str | None = None

    @property
    def path(self) -> Path:
        return CUDA_DIR / self.source

    def source_text(self) -> str:
        return self.path.read_text() if self.code is None else self.code

    def with_code(self, code: str, name: str, source: str) -> "Kernel":
        """This kernel's tunables, constraints and geometry around other source text
        (a student's version of it): launched, checked and timed like the original.
        `source` names the text in compiler messages."""
        return replace(self, name=name, source=source, code=code, base=self.base or self.name)

    def edited(self, edits, name: str) -> "Kernel":
        """This kernel around its own text with `edits` applied (`source_edits.apply`:
        each edit exactly once), named `name`: a chapter's variant of it."""
        text = source_edits.apply(self.source_text(), edits, f"{name} ({self.source})")
        return self.with_code(text, name=name, source=self.source)

    def source_with_headers(self) -> str:
        """The source followed by the course's headers it includes ("common.cuh", a
        kernel's body kept apart from what an exercise replaces)."""
        text, seen = self.source_text(), set()
        while True:    # headers that headers include too, each once
            names = sorted(set(re.findall(r'#include\s+"([^"]+)"', text)) - seen)
            if not names:
                return text
            seen.update(names)
            text += "".join((CUDA_DIR / name).read_text() for name in names)

    def source_hash(self) -> str:
        """A short hash of the code of the source and the headers it includes (comments
        and spacing left out): a recorded row whose hash differs was measured on other
        code, and is not shown as this kernel's."""
        return cuda_text.code_digest(self.source_with_headers())

    @property
    def arch_suffix(self) -> str:
        """"a" for a kernel that uses a feature of one architecture only (compiled for
        sm_90a rather than sm_90), else ""."""
        return "a" if any(f in ONLY_ON for f in self.features) else ""

    @property
    def min_arch(self) -> int:
        """The oldest architecture (sm number) this kernel runs on: what its features
        need, or the oldest the series supports."""
        return max([device.OLDEST] + [FEATURES[f][0] for f in self.features])

    def arch_problem(self, arch=None) -> str | None:
        """Why this kernel cannot run on `arch` (default: the GPU the analysis
        describes, `device.target_arch()`), naming the feature and both
        architectures; None when it can."""
        sm = device.sm_number(arch if arch is not None else device.target_arch())
        # a feature of one architecture says the most (it rules out newer GPUs too)
        for f in sorted(self.features, key=lambda f: f not in ONLY_ON):
            only = ONLY_ON.get(f)
            if only is not None and sm != only:
                return (f"{self.name} needs {f}, which only sm_{only} GPUs have (Hopper: "
                        f"H100, H200, GH200); " + ("this GPU is" if arch is None else "not")
                        + f" sm_{sm}")
            need = FEATURES[f][0]
            if sm < need:
                return (f"{self.name} needs {f}, sm_{need} or newer; this GPU is sm_{sm}"
                        if arch is None else
                        f"{self.name} needs {f}, sm_{need} or newer; sm_{sm} is older")
        if sm < device.OLDEST:
            return (f"sm_{sm} is older than the oldest GPU this series supports, "
                    f"sm_{device.OLDEST}")
        return None

    def dynamic_bytes(self, params: Params, arch=None) -> int:
        """Dynamic shared memory per block of resolved `params` on `arch` (default
        `device.target_arch()`)."""
        return self.dynamic_smem(params, device.limits(arch))

    def defaults(self) -> dict:
        return {p.name: p.default for p in self.params}

    def resolve(self, params: Params | None = None) -> dict:
        """Defaults overlaid by `params` (None: the defaults). Unknown names and values
        of the wrong type are a ValueError here, since everything that reads params
        (lookups in the recording, instantiation names) goes through this."""
        p, bad = self._overlay(params)
        if bad:
            raise ValueError(f"{self.name}: " + "; ".join(bad))
        return p

    def _overlay(self, params) -> tuple[dict, list[str]]:
        """(defaults overlaid by params, what is wrong with the names and types)."""
        if params is not None and not isinstance(params, Mapping):
            return {}, [f"params must be a dict of tunable -> value, "
                        f"got {type(params).__name__} {params!r}"]
        params = dict(params or {})
        known = {p.name for p in self.params}
        unknown = set(params) - known
        if unknown:
            return {}, [f"unknown parameter(s) {sorted(unknown)}; "
                        f"tunables are {sorted(known) or 'none'}"]
        wrong = [m for spec in self.params if spec.name in params
                 for m in [spec.type_problem(params[spec.name])] if m]
        return {**self.defaults(), **params}, wrong

    def problems(self, params: Params | None = None, arch=None) -> list[str]:
        """Every reason the parameters are invalid on `arch` (default: the GPU the
        analysis describes, `device.target_arch()`), as a user would read them (what
        `resolve` refuses comes back as a message too). A kernel the architecture
        cannot run is that one reason."""
        why = self.arch_problem(arch)
        if why:
            return [why]
        lim = device.limits(arch)
        p, out = self._overlay(params)
        if out:
            return out
        out = [m for spec in self.params for m in [spec.problem(p[spec.name])] if m]
        if out:
            return out
        for c in self.constraints:
            if not c.holds(p, lim):
                out.append(c.explain(p, lim))
        if out:
            return out
        threads = _prod(self.threads(p))
        if threads > lim["max_threads_per_block"]:
            out.append(f"{threads} threads per block is more than the limit of "
                       f"{lim['max_threads_per_block']} (threads = {self.threads(p)})")
        if self.smem(p) > lim["smem_per_block"]:
            out.append(f"{self.smem(p)} bytes of static shared memory per block is more "
                       f"than the {lim['smem_per_block']} bytes a block may declare "
                       "statically")
        smem = self.smem(p) + self.dynamic_smem(p, lim)
        if smem > lim["smem_per_block_optin"]:
            out.append(f"{smem} bytes of shared memory per block is more than the "
                       f"{lim['smem_per_block_optin']} bytes a block may have on "
                       f"{lim['arch']}")
        return out

    def name_expression(self, params: Params, shape: tuple | None = None) -> str:
        """The C++ name of the instantiation, e.g. `sgemm_naive<32, 0>`. Without a
        shape, shape-chosen arguments take their first declared value (for analysis)."""
        p = self.resolve(params)
        p = {**p, **self.fixed, **self.shape_params(p, shape)}
        for spec in self.params:
            if spec.cxx is not None:
                p[spec.name] = spec.cxx[p[spec.name]]
        return f"{self.entry}<{', '.join(_cxx(p[n]) for n in self.template)}>"

    def configurations(self) -> list[dict]:
        """Every combination of allowed values, valid or not (for sweeps and heat maps)."""
        names = [p.name for p in self.params]
        return [dict(zip(names, vals)) for vals in product(*(p.values for p in self.params))]

    def valid_configurations(self, arch=None) -> list[dict]:
        """The configurations valid on `arch` (default `device.target_arch()`)."""
        return [c for c in self.configurations() if not self.problems(c, arch)]


def runnable(kernel: Kernel, arch=None) -> tuple[bool, str]:
    """(True, "") when `kernel` runs on `arch` (default: the GPU the analysis describes,
    `device.target_arch()`), else (False, the reason, e.g. "capstone needs cp.async,
    sm_80 or newer; this GPU is sm_75"). Callers that go through several kernels (the
    ladder, the roofline, bench) skip the ones it refuses and print the reason."""
    why = kernel.arch_problem(arch)
    return (why is None, why or "")


def int_problem(name: str, value, minimum: int = 1) -> str | None:
    """A message unless `value` is an integer (numpy integers count, bool does not) of
    at least `minimum`: the one check behind sizes, shape dimensions and counts."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return f"{name} must be an integer, got {type(value).__name__} {value!r}"
    if value < minimum:
        return f"{name} must be at least {minimum}, got {value}"
    return None


def _cxx(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
