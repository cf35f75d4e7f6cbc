"""Chapter 09's ladder step 4 in three: the two intermediate kernels are text variants of
the registry's kernels (each edit applied exactly once), run as steps of the ladder's
studies under their own names, and their SASS shows the one change each step claims."""
import re
from collections import Counter
from itertools import groupby

import pytest

from gemm_kernels.core import analysis, compiler
from gemm_kernels.core.launch import kernel_of
from gemm_kernels.measure import records, studies, timing
from gemm_kernels.notebook import ch09_split as split
from gemm_kernels.notebook import timed_variants as tv

STEP3 = {"BM": 128, "BN": 128, "BK": 8, "PAD": 4, "ZORDER": True}
STEP4 = {"BM": 128, "BN": 128, "BK": 8, "WM": 32, "WN": 64, "STAGES": 2, "GROUP": 1,
         "MINB": 1, "HOIST": False}


@pytest.mark.parametrize("kernel, edits", [("zorder", split.ring_edits()),
                                           ("capstone", split.ONE_SET_EDITS)])
def test_every_edit_finds_its_text_exactly_once(kernel, edits):
    text = kernel_of(kernel).source_text()
    for old, _ in edits:
        assert text.count(old) == 1, old
    split.apply(text, edits, kernel)
    # a kernel file that lost an edit's text, or holds it twice, is an error, not a no-op
    old = edits[2][0]
    with pytest.raises(ValueError, match="applies 0 times"):
        split.apply(text.replace(old, ""), edits, kernel)
    with pytest.raises(ValueError, match="applies 2 times"):
        split.apply(text + old, edits, kernel)


def test_the_variants_are_registry_kernels_around_other_text():
    ring, one = split.ring_kernel(), split.one_set_kernel()
    assert (ring.name, one.name) == (split.ZORDER_RING, split.ONE_FRAGMENT_SET)
    assert ring.entry == "sgemm_zorder" and one.entry == "sgemm_capstone"
    assert ring.source_hash() != kernel_of("zorder").source_hash()
    assert one.source_hash() != kernel_of("capstone").source_hash()
    assert "cp.async" in ring.features and ring.min_arch >= 80
    assert "cp.async" in (ring.arch_problem("sm_75") or "")
    assert ring.resolve(STEP3) == kernel_of("zorder").resolve(STEP3)
    assert one.resolve(STEP4) == kernel_of("capstone").resolve(STEP4)
    # the z-order kernel no longer stages tiles in registers; the capstone keeps one set
    assert "fetch_tiles<" not in ring.source_text().split("sgemm_zorder(")[1]
    assert "float fa[TM], fb[TN];" in one.source_text()


def test_the_ladder_studies_run_the_variants_as_steps_4a_and_4b():
    for name in ("ch09_ladder", "ch09_step_stalls"):
        steps = studies.get(name).steps
        ran = [studies.step_kernel(s).name for s in steps]
        i = ran.index(split.ZORDER_RING)
        assert ran[i - 1:i + 3] == ["zorder", split.ZORDER_RING, split.ONE_FRAGMENT_SET,
                                    "capstone"]
        assert steps[i].params == steps[i - 1].params == STEP3      # 3 -> 4a: the text only
        assert steps[i + 1].params == steps[i + 2].params == STEP4  # 4b -> 4c: the text only
        assert studies.problems(studies.get(name)) == []
    # the timed variants run at the ladder's configurations
    assert tv.get(split.ZORDER_RING).configurations() == (STEP3,)
    assert tv.get(split.ONE_FRAGMENT_SET).configurations()[0] == STEP4


def test_a_study_finds_a_variant_row_only_for_the_variant_text(monkeypatch):
    k = split.one_set_kernel()
    fake = timing.Timing(1.0, 0.9, 1.1, 5)
    row = timing.row(k, (2048,) * 3, k.resolve(STEP4),
                     {"candidate": fake, "reference": fake}, {})
    assert row["kernel"] == split.ONE_FRAGMENT_SET
    rec = records.Record({"name": "Test GPU"}, "now", "abc", [row])
    got = {s.label: r for s, r in studies.results("ch09_ladder", (2048,) * 3, rec=rec)}
    assert [label for label, r in got.items() if r is not None] == \
        [s.label for s in studies.get("ch09_ladder").steps if s.variant == split.ONE_FRAGMENT_SET]
    stale = records.Record({"name": "Test GPU"}, "now", "abc", [{**row, "source": "0" * 12}])
    assert all(r is None for _, r in studies.results("ch09_ladder", (2048,) * 3, rec=stale))


def _sm90(kernel, params):
    try:
        compiler._tool("ptxas"), compiler._tool("nvdisasm")
    except RuntimeError as e:
        pytest.skip(str(e))
    k = kernel_of(kernel) if isinstance(kernel, str) else kernel
    p = k.resolve(params)
    return (compiler.resources(k, p, "sm_90")["registers"],
            [f for _, f, _ in analysis.main_loop(compiler.sass(k, p, "sm_90"))])


def test_step_4a_copies_with_ldgsts_where_step_3_used_ldg_and_sts():
    _, before = _sm90("zorder", STEP3)
    _, after = _sm90(split.ring_kernel(), STEP3)
    b, a = Counter(before), Counter(after)
    assert b["LDG.128"] and b["STS"] and not b["LDGSTS"]
    assert a["LDGSTS"] and a["LDGDEPBAR"] and a["DEPBAR"]
    assert not any(f.startswith(("LDG.", "STS")) for f in after)
    # the reads and the FFMAs are the z-order kernel's
    assert (a["LDS.128"], a["FFMA"], a["BAR"]) == (b["LDS.128"], b["FFMA"], b["BAR"])


def _after_barrier(loop):
    """The FFMAs the main loop issues after its barrier (the wait for the next tile)."""
    return loop[loop.index("BAR"):].count("FFMA")


def test_step_4b_has_one_fragment_set_and_4c_two():
    regs_b, loop_b = _sm90(split.one_set_kernel(), STEP4)
    regs_c, loop_c = _sm90("capstone", STEP4)
    assert Counter(loop_b)["FFMA"] == Counter(loop_c)["FFMA"]
    assert Counter(loop_b)["LDS.128"] == Counter(loop_c)["LDS.128"]
    assert regs_b < regs_c
    # 4c reads the next tile's first fragments before the last FFMAs of this one, so FFMAs
    # follow the barrier; 4b waits after its last FFMA, and each tile starts with its reads
    assert _after_barrier(loop_c) > 0
    assert _after_barrier(loop_b) == 0
    first = [f for f, _ in groupby(x for x in loop_b if x in ("FFMA", "LDS.128"))][0]
    assert first == "LDS.128"


def test_the_study_runners_launch_the_variants_under_their_own_names(monkeypatch):
    """The timed study measures a variant step as its Kernel (a registry step by name,
    compiled ahead in parallel); the profiled study launches the variant's Kernel under
    ncu, matched to the variant's entry point."""
    from gemm_kernels.measure import profile, record, study_run
    warmed, measured = [], []
    monkeypatch.setattr(record, "warm", lambda configs: warmed.extend(configs))
    monkeypatch.setattr(record, "measure", lambda k, shape, p: measured.append((k, shape)) or
                        {"kernel": getattr(k, "name", k), "gflops": {"median": 1.0}})
    monkeypatch.setattr(record, "rate_text", lambda row: "")
    # the correctness check before timing needs a GPU (tested in test_studies.py)
    monkeypatch.setattr(study_run, "check_steps", lambda name, shapes=None, log=None: [])
    study_run.study_rows("ch09_ladder", log=lambda *_: None)
    names = [getattr(k, "name", k) for k, _ in measured]
    assert names.count(split.ZORDER_RING) == names.count(split.ONE_FRAGMENT_SET) == 2
    assert all(not isinstance(k, str) for k, _ in measured
               if getattr(k, "name", k) in (split.ZORDER_RING, split.ONE_FRAGMENT_SET))
    assert {n for n, _ in warmed} <= {"double_buffer", "zorder", "capstone"}
    plan = profile.launch_plan("ch09_step_stalls")
    kernels = [k if isinstance(k, str) else k.name for k, _, _ in plan]
    assert kernels[:4] == ["zorder", split.ZORDER_RING, split.ONE_FRAGMENT_SET, "capstone"]
    assert hash(plan[1][0]) == hash(split.ring_kernel())       # the compiler caches by it


def test_the_diffs_show_what_steps_4a_and_4c_change_with_the_wait_count_hidden():
    a = str(split.step4a_diff())
    assert "-    fetch_tiles<BM, BN, BK, NT, VEC>(ra, rb, A, B, M, N, K, row0, col0, 0);" in a
    assert "+            issue_tile((tile + 1) * BK, cur ^ 1);" in a
    assert "+        cp_async_wait<?>();" in a and "issue_tile, in full:" in a
    c = str(split.step4c_diff())
    assert "+    float fa[2][TM], fb[2][TN];" in c and "-    float fa[TM], fb[TN];" in c
    # the pipeline exercise asks for the wait's count: no diff gives it away
    assert "cp_async_wait<?>" in c and not re.search(r"cp_async_wait<[^?]", a + c)


def test_the_4b_diff_sets_step_4as_placement_beside_the_warp_tiles():
    d = str(split.step4b_diff())
    lines = d.splitlines()
    assert lines[0].startswith("--- step 4a") and lines[1].startswith("+++ step 4b")
    # 4a: sub-tiles half the block's tile apart; 4b: inside the warp's WM x WN tile
    assert any(l.startswith("-") and "BM / 2 + am" in l for l in lines)
    assert any(l.startswith("+") and "(warp / WARPS_N) * WM" in l for l in lines)
    assert any(l.startswith("+") and "as + 16 * i" in l for l in lines)
    # only removed or added lines: the two kernels are different files
    assert all(l[:1] in "-+" for l in lines)
