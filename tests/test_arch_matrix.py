"""Every kernel on every architecture the series runs on (Colab's T4 to Blackwell), with
the pip toolchain and no GPU: each configuration compiles for the architecture, or the
registry refuses it there with its reason. The default configurations run by default
(about 20 seconds on 2 cores); every valid configuration is the `slow` test:
`pytest -m slow tests/test_arch_matrix.py -s` (it prints the spills per architecture)."""
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

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
    # ptxas runs as a subprocess: two at a time keeps a 2-core runner busy
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda job: (job, _compile(*job)), jobs))


def test_every_default_configuration_compiles_or_is_refused_on_every_arch():
    jobs = [(k, k.defaults(), a) for k in KERNELS.values() for a in ARCHS]
    refused = {}
    for (k, _, arch), res in _in_parallel(jobs):
        if "refused" in res:
            refused[(k.name, arch)] = res["refused"]
        else:
            assert res["arch"] == arch and res["registers"] > 0, (k.name, arch)
    # the capstone's cp.async needs sm_80: refused on the T4 alone, with its reason
    assert refused == {("capstone", "sm_75"):
                       "capstone needs cp.async, sm_80 or newer; sm_75 is older"}


# Configurations the registry accepts although ptxas spills them on one architecture:
# (kernel, arch) -> why. Found by the slow test below; each is a fact of that ptxas, not
# of the rules, which estimate registers from the tile sizes alone.
KNOWN_SPILLS = {
    ("zorder", "sm_120"): "ptxas 12.9 for sm_120 needs more than the 128 registers that "
                          "256 threads x 2 blocks (__launch_bounds__) leave it",
}


@pytest.mark.slow
def test_every_valid_configuration_on_every_arch_keeps_the_register_rules():
    """Every configuration the registry accepts on an architecture compiles there with
    no spills (the register rules' promise) and fits on an SM (at least one resident
    block: registers per block and shared memory within that architecture's limits)."""
    spills = defaultdict(lambda: defaultdict(int))
    broken = []
    for k in KERNELS.values():
        jobs = [(k, c, a) for a in ARCHS for c in k.valid_configurations(a)]
        for (_, c, arch), res in _in_parallel(jobs):
            if "refused" in res:
                continue
            t = k.threads(k.resolve(c))
            occ = analysis.occupancy(t[0] * t[1] * t[2], res["registers"],
                                     res["smem_bytes"] + k.dynamic_bytes(k.resolve(c), arch),
                                     device.limits_for(arch))
            if res["spill_stores"] or res["spill_loads"]:
                spills[k.name][arch] += 1
                if (k.name, arch) not in KNOWN_SPILLS:
                    broken.append(f"{k.name} {c} on {arch}: spills "
                                  f"{res['spill_stores']} B with {res['registers']} registers")
            if occ.blocks_per_sm < 1:
                broken.append(f"{k.name} {c} on {arch}: no block fits ({occ.explain()})")
        compiler._cubin.cache_clear()      # thousands of cubins: keep memory flat
        compiler._ptx.cache_clear()
    print("\nconfigurations that spill, per kernel and architecture:")
    for name, per in spills.items():
        print(f"  {name}: " + ", ".join(f"{a}: {n}" for a, n in per.items()))
    assert not broken, "\n".join(broken)
