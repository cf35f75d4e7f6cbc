"""Every kernel on every architecture the series runs on (Colab's T4 to Blackwell), with
the pip toolchain and no GPU: each configuration compiles for the architecture, or the
registry refuses it there with its reason. The default configurations run by default
(about 20 seconds on 2 cores); every valid configuration is the `slow` test:
`pytest -m slow tests/test_arch_matrix.py -s` (it prints, per architecture and kernel,
how many configurations the registry refuses and accepts, and how many of those spill)."""
import os
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import pytest

from gemm_kernels.core import analysis, compiler, device
from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.core.registry import runnable

ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_120")


def _compile(kernel, params, arch) -> dict:
    """ptxas's resources for one configuration, or {"refused": reason} when the
    registry refuses the kernel on `arch` (then nothing may be compiled)."""
    ok, why = runnable(kernel, arch)
    if not ok:
        with pytest.raises(ValueError, match="needs"):
            compiler.resources(kernel, params, arch)
        return {"refused": why}
    return compiler.resources(kernel, params, arch)


def _in_parallel(jobs):
    # ptxas runs as a subprocess: one job per core keeps the runner busy (2 on a 2-core one)
    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        return list(pool.map(lambda job: (job, _compile(*job)), jobs))


def test_every_default_configuration_compiles_or_is_refused_on_every_arch():
    jobs = [(k, k.defaults(), a) for k in KERNELS.values() for a in ARCHS]
    refused = {}
    for (k, _, arch), res in _in_parallel(jobs):
        if "refused" in res:
            refused[(k.name, arch)] = res["refused"]
        else:
            assert res["arch"] == arch + k.arch_suffix and res["registers"] > 0, (k.name, arch)
            # the per-arch rules (registers, shared memory) accept every default
            assert k.problems(None, arch) == [], (k.name, arch)
    # the capstone's cp.async (and chapter 12's kernel, the capstone with split-K) needs
    # sm_80: refused on the T4 alone, with its reason; chapter 15's wgmma exists on sm_90
    # alone: refused everywhere else
    hopper = ("wgmma_tma", "wgmma_ws", "wgmma_persistent", "wgmma_cluster")
    assert refused == {
        **{(n, "sm_75"): f"{n} needs cp.async, sm_80 or newer; sm_75 is older"
           for n in ("capstone", "capstone_split")},
        **{(n, a): f"{n} needs wgmma, which only sm_90 GPUs have (Hopper: H100, H200, "
                   f"GH200); not {a}" for n in hopper for a in ARCHS if a != "sm_90"}}


@dataclass(frozen=True)
class KnownSpill:
    """Configurations the registry accepts although ptxas 12.9 spills some of them on
    `archs`: facts of that compiler that no rule on the tile sizes captures (`why`)."""
    kernel: str
    archs: tuple[str, ...]
    which: Callable[[dict], bool]     # of the resolved parameters
    why: str

    def covers(self, name: str, params: dict, arch: str) -> bool:
        return name == self.kernel and arch in self.archs and self.which(params)


def _capstone_cap(p) -> int:
    return min(255, 65536 // (p["MINB"] * 32 * (p["BM"] // p["WM"]) * (p["BN"] // p["WN"])))


KNOWN_SPILLS = (
    KnownSpill("zorder", ("sm_120",), lambda p: p["BM"] * p["BN"] == 128 * 128,
               "the source's __launch_bounds__(256, 2) leaves the 128 x 128 tile 128 "
               "registers per thread; ptxas for sm_120 needs more in 7 of its 8 builds (the "
               "other architectures take 125-128 without spilling). The chapter's default "
               "is one of them and must stay accepted, so no rule can refuse them"),
    KnownSpill("capstone", ("sm_80", "sm_86", "sm_89", "sm_90"),
               lambda p: (p["WM"], p["WN"]) == (32, 64) and _capstone_cap(p) == 128,
               "8 x 8 outputs per thread at a cap of 128 registers (MINB=2 with BN=128, or "
               "BN=256): ptxas takes 120-128 and spills 4-32 bytes in 3-7 of these ~48 "
               "builds per architecture, which ones depending on BK, STAGES, GROUP and "
               "HOIST in no pattern (see the capstone's register rule in kernels.py)"),
    KnownSpill("tile_2d", ("sm_90",),
               lambda p: p == {"BM": 128, "BN": 128, "BK": 16, "TM": 4, "TN": 8},
               "ptxas for sm_90 gives this 512-thread block 64 registers where 128 are "
               "allowed (two blocks per SM instead of one) and spills 20 bytes: its own "
               "trade, not a lack of registers (the H200's recorded binary does the same: "
               "64 registers, 24 bytes of local memory)"),
    KnownSpill("tile_1d", ("sm_120",),
               lambda p: p in ({"BM": 64, "BN": 64, "BK": 8, "TM": 16},
                               {"BM": 128, "BN": 32, "BK": 16, "TM": 8}),
               "ptxas for sm_120 holds these to 80 of 255 and 64 of 128 registers, the most "
               "that lets one more block share the SM, and spills 8-12 bytes: its own "
               "trade, not a lack of registers (the same TM, BK and thread count at other "
               "BM, BN fit)"),
    KnownSpill("wmma_tiled", ("sm_75", "sm_80", "sm_86", "sm_89"),
               lambda p: p["BM"] == p["BN"] == 128 and p["BK"] == 32,
               "the source's __launch_bounds__(256, 2) leaves the 128 x 128 tile 128 "
               "registers per thread: 8 accumulator fragments (64 registers) and, at BK = "
               "32, the next tile's loads in flight; ptxas for sm_75 to sm_89 spills 4-24 "
               "bytes (sm_90 and newer fit it). The chapter's default is one of them and "
               "must stay accepted on a T4"),
    KnownSpill("mma_sync", ("sm_75",),
               lambda p: p["BM"] == 64 and p["WARPS_M"] * p["WARPS_N"] == 8,
               "64-row tiles shared by 8 warps: ptxas 12.9 for sm_75 spills 4-12 bytes in "
               "one or two of these builds (which ones changes with small edits of the "
               "source, at 128-242 of 255 registers): its own trade, not a lack of "
               "registers"),
)


def _known(name, params, arch) -> KnownSpill | None:
    return next((s for s in KNOWN_SPILLS if s.covers(name, params, arch)), None)


def test_known_spills_name_accepted_configurations():
    """A known spill is about configurations the registry accepts there (else a rule
    has taken it over and the entry is stale), and says why."""
    for s in KNOWN_SPILLS:
        k = KERNELS[s.kernel]
        for arch in s.archs:
            assert arch in ARCHS and s.why
            assert any(s.which(k.resolve(c)) for c in k.valid_configurations(arch)), \
                (s.kernel, arch)


@pytest.mark.parametrize("name, params, refused_on, accepted_on", [
    # TM*BK = 128 values of A per thread at 1024 threads (64 registers each)
    ("tile_1d", {"BM": 64, "BN": 128, "BK": 16, "TM": 8},
     ("sm_75", "sm_80", "sm_86", "sm_89", "sm_120"), ("sm_90", "sm_100")),
    ("tile_1d", {"BM": 128, "BN": 64, "BK": 16, "TM": 8},
     ("sm_75", "sm_86", "sm_120"), ("sm_90",)),
    # 4x4 outputs with BK=8 at 1024 threads, register caching
    ("tile_2d_reg", {"BM": 128, "BN": 128, "BK": 8, "TM": 4, "TN": 4},
     ("sm_75", "sm_80", "sm_86", "sm_89"), ("sm_90", "sm_100", "sm_120")),
])
def test_register_rules_per_arch_refuse_what_spills_there(name, params, refused_on,
                                                          accepted_on):
    k = KERNELS[name]
    for arch in refused_on:
        why = k.problems(params, arch)
        assert len(why) == 1 and "64 registers" in why[0] and arch in why[0] \
            and "1024 threads" in why[0], (arch, why)
    for arch in accepted_on:
        assert k.problems(params, arch) == [], arch


def test_register_rules_per_arch_leave_the_neighbours_alone():
    """One step away (BK=8, 512 threads, the strided kernel at the same tile), the
    per-arch rules accept: they refuse what spills, not the whole region."""
    for arch in ARCHS:
        assert KERNELS["tile_1d"].problems({"BM": 64, "BN": 128, "BK": 8, "TM": 8}, arch) == []
        assert KERNELS["tile_1d"].problems({"BM": 64, "BN": 64, "BK": 16, "TM": 8}, arch) == []
        for bk in (8, 16):
            tile = {"BM": 128, "BN": 128, "BK": bk, "TM": 4, "TN": 4}
            assert KERNELS["tile_2d_strided"].problems(tile, arch) == [], arch
        assert KERNELS["tile_2d_reg"].problems({**tile, "BK": 16}, arch) == [], arch


@pytest.mark.slow
def test_every_valid_configuration_on_every_arch_keeps_the_register_rules():
    """Every configuration the registry accepts on an architecture compiles there with
    no spills (the register rules' promise; KNOWN_SPILLS says where ptxas breaks it and
    why) and fits on an SM (at least one resident block: registers per block and shared
    memory within that architecture's limits). Prints per architecture and kernel: the
    configurations refused, accepted, and of those spilled (known ones in brackets)."""
    count = defaultdict(lambda: defaultdict(int))     # (kernel, arch) -> what -> n
    broken, known_seen = [], set()
    for k in KERNELS.values():
        jobs = []
        for a in ARCHS:
            valid = k.valid_configurations(a)
            count[(k.name, a)]["refused"] = len(k.configurations()) - len(valid)
            count[(k.name, a)]["accepted"] = len(valid)
            jobs += [(k, c, a) for c in valid]
        for (_, c, arch), res in _in_parallel(jobs):
            assert "refused" not in res, (k.name, c, arch)   # valid: runnable there
            p = k.resolve(c)
            t = k.threads(p)
            occ = analysis.occupancy(t[0] * t[1] * t[2], res["registers"],
                                     res["smem_bytes"] + k.dynamic_bytes(p, arch),
                                     device.limits_for(arch))
            if res["spill_stores"] or res["spill_loads"]:
                count[(k.name, arch)]["spilled"] += 1
                known = _known(k.name, p, arch)
                if known:
                    count[(k.name, arch)]["known"] += 1
                    known_seen.add((known, arch))
                else:
                    broken.append(f"{k.name} {c} on {arch}: spills "
                                  f"{res['spill_stores']} B with {res['registers']} registers")
            if occ.blocks_per_sm < 1:
                broken.append(f"{k.name} {c} on {arch}: no block fits ({occ.explain()})")
        compiler._cubin.cache_clear()      # thousands of cubins: keep memory flat
        compiler._ptx.cache_clear()
    print(_table(count))
    stale = [f"{s.kernel} on {a}: listed as a known spill, but nothing it covers spills"
             for s in KNOWN_SPILLS for a in s.archs if (s, a) not in known_seen]
    assert not broken and not stale, "\n".join(broken + stale)


def _table(count) -> str:
    """Per architecture, then per kernel that spills or is refused anything there:
    configurations refused / accepted / spilled (known spills in brackets)."""
    def cell(c):
        spilled = f"{c['spilled']}" + (f" ({c['known']} known)" if c["known"] else "")
        return f"{c['refused']:8d} {c['accepted']:9d}   {spilled}"

    head = f"{'':18s}{'refused':>8s} {'accepted':>9s}   spilled"
    lines = ["", "configurations per architecture (all kernels):", head]
    for a in ARCHS:
        total = defaultdict(int)
        for (name, arch), c in count.items():
            if arch == a:
                for what, n in c.items():
                    total[what] += n
        lines.append(f"  {a:16s}{cell(total)}")
    lines += ["", "per kernel, where a configuration spills:", head]
    for (name, a), c in count.items():
        if c["spilled"]:
            lines.append(f"  {name + ' ' + a:16s}{cell(c)}")
    return "\n".join(lines)
