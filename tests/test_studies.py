"""The studies behind the chapters' arguments: every step runs as written, counter
patterns resolve against what ncu knows, and a study's rows keep to themselves in the
record."""
import pytest

from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.measure import ncu, record, studies
import gemm_kernels.notebook.timed_variants  # noqa: F401,E402  (registers the chapters' variants)


@pytest.mark.parametrize("name", list(studies.STUDIES))
def test_every_step_names_a_kernel_and_valid_parameters(name):
    assert studies.problems(studies.get(name)) == []


def test_a_broken_step_is_named():
    bad = studies.Study("x", "00", "?", "time",
                        (studies.Step("one", "float4", {"BM": 3}),
                         studies.Step("two", "nonesuch", {})), ((64, 64, 64),))
    found = studies.problems(bad)
    assert len(found) == 2
    assert "step 'one'" in found[0] and "BM" in found[0]
    assert "names no kernel 'nonesuch'" in found[1]


def test_unknown_study_is_refused_with_the_list():
    with pytest.raises(ValueError, match="known studies: ch09_ladder"):
        studies.get("nonesuch")


def test_ladder_steps_change_one_thing_each():
    """Chapter 09's capstone rungs differ from the rung before in exactly one tunable
    (the variants of step 4 change the text instead: tests/test_ch09_split.py)."""
    caps = [s.params for s in studies.get("ch09_ladder").steps
            if s.kernel == "capstone" and s.variant is None]
    assert len(caps) >= 4
    for a, b in zip(caps, caps[1:]):
        assert len({k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}) == 1, (a, b)


def test_launches_are_every_step_at_every_shape_in_order():
    st = studies.get("ch09_ladder")
    got = studies.launches(st)
    assert len(got) == len(st.steps) * len(st.shapes)
    assert [s.label for s, _, shape in got if shape == st.shapes[0]] == \
        [s.label for s in st.steps]
    for step, full, _ in got:
        assert full == KERNELS[step.kernel].resolve(step.params)


def test_one_block_per_sm_is_what_the_occupancy_says():
    from gemm_kernels.core import analysis
    for name in ("float4", "double_buffer"):
        assert analysis.kernel_occupancy(name, {"ONE_PER_SM": True}).blocks_per_sm == 1
        assert analysis.kernel_occupancy(name).blocks_per_sm > 1


def test_patterns_pick_known_names_and_unknown_names_drop():
    known = {"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
             "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
             "smsp__issue_active.avg.pct_of_peak_sustained_active",
             "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"}
    got = studies.pick_metrics([studies.STALLS, *studies.ISSUE], known)
    assert got == sorted(n for n in known if "stalled" in n) + \
        ["smsp__issue_active.avg.pct_of_peak_sustained_active"]
    # without a list from ncu, names pass as given and patterns give nothing
    assert studies.pick_metrics([studies.STALLS, "a__b.sum"], None) == ["a__b.sum"]


def test_ncu_metric_list_is_read_from_its_query_output():
    text = ("Device NVIDIA H200 (GH100)\n"
            "------------------------------------------ ------------\n"
            "Metric Name                                Metric Description\n"
            "dram__bytes_read.sum                       # of bytes read from DRAM\n"
            "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio   ratio of ...\n")
    assert ncu.parse_metric_list(text) == {
        "dram__bytes_read.sum",
        "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"}


def test_a_study_profile_does_not_replace_the_chapter_profile():
    base = {"kernel": "zorder", "params": {"BM": 128}, "shape": [1024] * 3,
            "metrics": {"x": 1.0}}
    assert record._key(base) != record._key({**base, "study": "stalls"})
    assert record._key({**base, "study": "stalls"}) != record._key({**base, "study": "other"})
    timed = {**base, "gflops": {"median": 1.0}}
    assert record._key(timed) != record._key(base)


def test_results_pair_every_step_with_its_row_or_none():
    for name, st in studies.STUDIES.items():
        pairs = studies.results(name)
        assert [s.label for s, _ in pairs] == [s.label for s in st.steps]
        for step, row in pairs:
            if row is not None:
                assert row["kernel"] == studies.step_kernel(step).name
                assert (row.get("study") == name) == (st.kind in ("ncu", "clocks"))


def test_a_study_is_read_from_the_recording_that_holds_all_of_it(tmp_path, monkeypatch):
    """complete_recording: the one shown when it holds every step, else another that
    does (a study is compared within one run), else the one shown."""
    from gemm_kernels.measure import records
    st = studies.get("ch09_ladder_minb2")

    def rec_with(steps, name):
        rows = []
        for shape in st.shapes:
            for s in steps:
                k = studies.step_kernel(s)
                rows.append({"chapter": "09", "kernel": k.name, "params": k.resolve(s.params),
                             "shape": list(shape), "gflops": {"median": 1.0, "min": 1.0, "max": 1.0},
                             "source": k.source_hash(), "run": "r"})
        rec = records.Record({"name": name, "sm_count": 1}, "2026-01-01T00:00:00Z", "abc",
                             rows, runs={"r": {"command": "study"}})
        return records.save(rec, tmp_path / f"{name}.json")
    part, whole = rec_with(st.steps[:2], "part"), rec_with(st.steps, "whole")
    monkeypatch.setattr(records, "available", lambda: [{"path": str(part)}, {"path": str(whole)}])
    monkeypatch.setenv("GEMM_KERNELS_RECORD", str(part))
    records._LOADED.clear()
    try:
        assert studies.complete_recording(st.name).device["name"] == "whole"
        monkeypatch.setattr(records, "available", lambda: [{"path": str(part)}])
        assert studies.complete_recording(st.name).device["name"] == "part"
        monkeypatch.setenv("GEMM_KERNELS_RECORD", str(whole))
        records._LOADED.clear()
        assert studies.complete_recording(st.name).device["name"] == "whole"
    finally:
        records._LOADED.clear()


def test_a_step_can_name_a_timed_variant():
    """A step with `variant` launches the chapter's timed variant (built where the
    chapters build it), at its kernel's parameters; a wrong name is a problem."""
    st = studies.get("ch08_payoff_stalls")
    named = [s for s in st.steps if s.variant]
    assert named and studies.problems(st) == []
    for step in named:
        k = studies.step_kernel(step)
        assert k.name == step.variant and k.entry == KERNELS[step.kernel].entry
        assert k.source_hash() != KERNELS[step.kernel].source_hash()
    plain = next(s for s in st.steps if not s.variant)
    assert studies.step_kernel(plain) is KERNELS[plain.kernel]
    bad = studies.Study("x", "08", "?", "ncu", (
        studies.Step("no such", "double_buffer", {}, variant="double_buffer: nonesuch"),
        studies.Step("other kernel's", "float4", {}, variant=named[0].variant)),
        ((64, 64, 64),), ("a__b.sum",))
    found = studies.problems(bad)
    assert len(found) == 2
    assert "no variant named 'double_buffer: nonesuch' is registered" in found[0]
    assert "is not a variant of 'float4'" in found[1]


def test_a_plan_file_rebuilds_each_variant_from_the_kernel_it_was_made_from():
    """Chapter 09's step stalls profile variants of the capstone, whose entry and file
    chapter 12's capstone_split shares, and a z-order variant with cp.async added to its
    features: the child rebuilds each from its own registry kernel, features included."""
    import os
    from dataclasses import fields
    import gemm_kernels.notebook.timed_variants  # noqa: F401  registers the variants
    from gemm_kernels.measure import profile
    todo = profile.launch_plan("ch09_step_stalls")
    variants = [k for k, _, _ in todo if not isinstance(k, str)]
    assert {k.base for k in variants} == {"capstone", "zorder"}
    path = profile.plan_file(todo)
    try:
        back = profile.read_plan(path)
    finally:
        os.unlink(path)
    for (k, p, s), (b, pb, sb) in zip(todo, back):
        assert (p, s) == (pb, sb)
        if isinstance(k, str):
            assert b == k
            continue
        for f in fields(k):
            if f.name not in ("threads", "grid", "smem", "dynamic_smem", "shape_rule",
                              "shape_params", "splits", "padded_b", "extra_args"):
                assert getattr(b, f.name) == getattr(k, f.name), (k.name, f.name)


def test_a_profiled_variant_is_recorded_under_its_own_name(monkeypatch):
    """The one profiling path (`profile.run`) launches a study's variants and stamps
    their rows with the variant's name and text hash, so `results` finds them."""
    from gemm_kernels.core.launch import kernel_of
    from gemm_kernels.measure import profile, records
    st = studies.get("ch08_payoff_stalls")
    todo = profile._launchable(st.name)
    assert len(todo) == len(st.steps) * len(st.shapes)
    seen = {}

    def fake_profile(argv, metrics, kernel_filter):
        seen["argv"], seen["filter"] = argv, kernel_filter
        # the child reads its launches from the plan file, each variant rebuilt from text
        seen["plan"] = profile.read_plan(argv[argv.index("--plan") + 1])
        return [{"kernel": f"{studies.step_kernel(s).entry}<...>", "metrics": {"m": i}}
                for i, (s, _, _) in enumerate(studies.launches(st))]
    monkeypatch.setattr(ncu, "profile", fake_profile)
    monkeypatch.setattr(ncu, "version", lambda: "test")
    rows = profile.run(st.name, ["m"])
    assert "sgemm_double_buffer" in seen["filter"]
    for (k, p, shape), (step, full, at) in zip(seen["plan"], studies.launches(st)):
        want = studies.step_kernel(step)
        assert (k if isinstance(k, str) else k.name) == want.name and (p, shape) == (full, at)
        assert kernel_of(k).source_hash() == want.source_hash()
    assert [r["kernel"] for r in rows] == [studies.step_kernel(s).name for s in st.steps]
    for step, r in zip(st.steps, rows):
        assert r["source"] == studies.step_kernel(step).source_hash()
        assert r["study"] == st.name
    rec = records.Record({"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc", rows)
    got = studies.results(st.name, rec=rec)
    assert [r["metrics"]["m"] for _, r in got] == list(range(len(st.steps)))


def test_step_7s_choices_undo_one_choice_each_at_the_ladders_shapes():
    """ch09_step7_choices: step 7's own parameters with BK = 8, or the capstone with one
    fragment set, each as built and with MINB = 2, timed at the ladder's shapes (in its
    run: the reading compares them with step 7's rows)."""
    import gemm_kernels.notebook.ch09_split  # noqa: F401  (registers the variant)
    st, ladder = studies.get("ch09_step7_choices"), studies.get("ch09_ladder")
    seven = next(s for s in ladder.steps if s.params.get("HOIST") and s.params["GROUP"] == 1)
    assert st.kind == "time" and st.shapes == ladder.shapes and not studies.problems(st)
    changed = [({k for k in s.params if s.params[k] != seven.params[k]}, s.variant)
               for s in st.steps]
    assert changed == [({"BK"}, None), ({"BK", "MINB"}, None),
                       (set(), "capstone: one fragment set"),
                       ({"MINB"}, "capstone: one fragment set")]
    assert [s.params["MINB"] for s in st.steps] == [1, 2, 1, 2]


def test_a_timed_study_checks_each_configuration_once_and_refuses_a_wrong_one(monkeypatch):
    """study_run.check_steps checks every distinct configuration of a study (check_all);
    study_rows refuses to time a study with a wrong result, naming the step and shape."""
    from types import SimpleNamespace
    from gemm_kernels.measure import check, record, study_run
    import gemm_kernels.notebook.ch09_split  # noqa: F401  (registers the variants)
    seen = []

    def fake_check_all(kernel, params, shapes=None):
        seen.append((kernel.name, repr(sorted(params.items()))))
        bad = kernel.name == "capstone" and params["BK"] == 8
        return [SimpleNamespace(ok=not bad, shape=(7, 13, 5), message="element 3 wrong")]
    monkeypatch.setattr(check, "check_all", fake_check_all)
    monkeypatch.setattr(record, "measure", lambda *a, **k: pytest.fail("timed a wrong kernel"))
    monkeypatch.setattr(record, "warm", lambda configs: None)
    st = studies.get("ch09_step7_choices")
    wrong = study_run.check_steps(st.name, log=lambda *a: None)
    assert len(seen) == len(set(seen)) == len(st.steps)      # each configuration once
    assert len(wrong) == 2 and all("step 7 at BK = 8" in w and "(7, 13, 5)" in w for w in wrong)
    with pytest.raises(ValueError, match="not timed, wrong results"):
        study_run.study_rows(st.name, log=lambda *a: None)
