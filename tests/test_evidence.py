"""How the chapters show a study: rows not recorded say so, stall reasons read by name."""
import matplotlib

matplotlib.use("Agg")

from gemm_kernels.measure import studies  # noqa: E402
from gemm_kernels.notebook import evidence  # noqa: E402
from gemm_kernels.notebook import timed_variants  # noqa: F401,E402 (registers the chapters' variants)


def test_table_has_a_row_per_step_and_says_what_is_missing():
    t = evidence.table("ch09_ladder", (4096,) * 3)
    assert [r["step"] for r in t] == [s.label for s in studies.get("ch09_ladder").steps]
    for (step, row), shown in zip(studies.results("ch09_ladder", (4096,) * 3), t):
        if row is None:
            assert shown["rate"] == evidence.NOT_RECORDED and shown["share"] is None
        else:
            assert shown["rate"].endswith("GFLOP/s") and shown["share"].endswith("%")
    assert "not recorded" in t.title or "measured in" in t.title


def test_stall_reasons_are_named_in_words():
    row = {"metrics": {
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 2.5,
        "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": 0.5,
        "smsp__issue_active.avg.pct_of_peak_sustained_active": 70.0}}
    assert evidence.stall_reasons(row) == {"long scoreboard": 2.5, "barrier": 0.5}


def test_pictures_draw_with_or_without_recorded_rows():
    for fig in (evidence.plot("ch09_ladder", (4096,) * 3), evidence.stall_plot(),
                evidence.plot("ch08_one_block")):
        assert fig.axes
        matplotlib.pyplot.close(fig)


def test_counters_divide_and_keep_the_steps_of_the_kernels_asked_for():
    plain = evidence.counters("stalls", {"ns": "gpu__time_duration.sum"})
    scaled = evidence.counters("stalls", {"ms": ("gpu__time_duration.sum", 1e6)},
                               kernels=("float4", "double_buffer"))
    kept = [s.label for s in studies.get("stalls").steps
            if s.kernel in ("float4", "double_buffer")]
    assert [r["step"] for r in scaled] == kept
    by_step = {r["step"]: r["ns"] for r in plain}
    for r in scaled:
        if by_step[r["step"]] is None:
            assert r["ms"] is None
        else:
            assert abs(r["ms"] * 1e6 - by_step[r["step"]]) < 1e-6 * by_step[r["step"]]


def test_load_to_use_counts_the_ffmas_before_a_loaded_register_is_read():
    body = [(0x00, "LDS.128", "LDS.128 R4, [R2]"),
            (0x10, "FFMA", "FFMA R33, R40, R21, R33"),            # uses the LDS at 0x80
            (0x20, "FFMA", "FFMA R10, R20.reuse, R21, R10"),
            (0x30, "FFMA", "FFMA R11, R7, R21, R11"),            # reads R7: 2 FFMAs later
            (0x40, "LDG.128", "LDG.E.128.CONSTANT R12, desc[UR4][R2.64]"),
            (0x50, "FFMA", "FFMA R12, R20, R21, R30"),            # writes R12, reads none
            (0x60, "FFMA", "FFMA R31, R20, R21, R31"),
            (0x70, "STS", "STS [R3], R13"),                       # reads R13: 2 later
            (0x80, "LDS", "LDS R40, [R3]"),                       # used in the next trip
            (0x90, "FFMA", "FFMA R32, R20, R21, R32"),
            (0xa0, "BRA", "BRA `(.L_x_1)")]
    assert evidence.load_to_use(body) == {"LDS": [2, 1], "LDG": [2]}


def test_load_to_use_table_sees_the_capstone_fragments_loaded_ahead():
    t = evidence.load_to_use_table(["float4", "capstone"])
    got = {(r["kernel"], r["loads from"]): r for r in t}
    assert got["capstone", "global memory"]["loads per trip"] == 0     # cp.async only
    assert got["capstone", "shared memory"]["FFMAs before first use: fewest"] > \
        got["float4", "shared memory"]["FFMAs before first use: fewest"]
    assert "ptxas" in t.title


def test_loads_before_first_store_stops_at_the_first_store():
    assert evidence.loads_before_first_store(["LDG", "LDG", "LDG", "STG", "STG", "EXIT",
                                              "LDG", "STG"]) == 3
    assert evidence.loads_before_first_store(["LDG.128", "STG.128"]) == 1
    assert evidence.loads_before_first_store(["EXIT"]) == 0


def test_global_accesses_of_the_copy_kernel_load_before_they_store():
    order = evidence.global_accesses("copy", {"T": "float"})
    assert order and set(order) <= {"LDG", "STG", "EXIT"}
    assert order.count("LDG") == order.count("STG")
    assert evidence.loads_before_first_store(order) >= 1


def test_device_properties_name_the_gpu_in_recorded_mode(monkeypatch):
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    from gemm_kernels.measure import records
    props = records.described_device()
    rec = records.current()
    assert props == ({} if rec is None else rec.device)


def test_a_stall_reason_has_one_colour_in_every_plot():
    a = evidence.stall_plot("stalls", kernels=["smem_tiled"])
    b = evidence.stall_plot("ch02_caches")
    colour = {}
    for fig in (a, b):
        for bars in fig.axes[0].containers:
            label = bars.get_label()
            rgba = tuple(bars.patches[0].get_facecolor())
            assert colour.setdefault(label, rgba) == rgba, label
        matplotlib.pyplot.close(fig)
    assert len({c for k, c in colour.items() if k != "other"}) == \
        len([k for k in colour if k != "other"])


def test_stall_bars_can_stack_in_one_fixed_order():
    """By default the largest reason stacks first; with fixed_order every figure stacks
    its reasons in STALL_ORDER's order, whatever their sizes."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    got = [("a", {"barrier": 3.0, "long scoreboard": 1.0, "short scoreboard": 2.0,
                  "selected": 1.0})]
    for fixed, want in ((False, ["barrier", "short scoreboard", "long scoreboard"]),
                        (True, ["long scoreboard", "short scoreboard", "barrier"])):
        fig, ax = plt.subplots()
        evidence.stall_bars(ax, got, top=3, fixed_order=fixed)
        labels = [c.get_label() for c in ax.containers]
        assert labels == want + ["other"], labels
        plt.close(fig)


def test_profiled_and_timed_gives_what_profiled_against_timed_prints():
    """profiled_and_timed: per profiled step its times and clock; profiled_against_timed
    prints the same steps (one implementation of the reading)."""
    steps = evidence.profiled_and_timed("ch05_outputs_stalls")
    text = evidence.profiled_against_timed("ch05_outputs_stalls")
    for s in steps:
        assert f"{s['label']}: {s['profiled_ms']:.3g} ms profiled" in text
        assert s["clock_mhz"] is None or s["clock_mhz"] % 10 == 0
