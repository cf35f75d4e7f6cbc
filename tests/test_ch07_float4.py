"""Chapter 07 without a GPU: its pictures, the ablation's SASS evidence, the warp states
read from a profiled row, and the register budget promised to ptxas."""
import re

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gemm_kernels.core.launch import kernel_of  # noqa: E402
from gemm_kernels.core.registry import CUDA_DIR  # noqa: E402
from gemm_kernels.notebook import ch07_ablation, ch07_pictures  # noqa: E402

K5 = ch07_ablation.K5


def test_fetch_indices_are_the_kernels():
    # BK = 8: thread t fetches row t / 2, k = 0 or 4; BK = 16: row t / 4, k = 0, 4, 8, 12
    assert [ch07_pictures.a_fetch(t) for t in range(4)] == [(0, 0), (0, 4), (1, 0), (1, 4)]
    assert [ch07_pictures.a_fetch(t, 16)[1] for t in range(5)] == [0, 4, 8, 12, 0]
    assert ch07_pictures.b_fetch(33) == (1, 4)


def test_pictures_draw_and_refuse_what_the_registry_refuses():
    for fig in (ch07_pictures.tile_stores(), ch07_pictures.tile_stores(BK=16, rows=4, b_tile=False),
                ch07_pictures.tile_reads()):
        assert all(ax.get_title() for ax in fig.axes) and fig.texts    # titled, with a suptitle
        plt.close(fig)
    fig = ch07_pictures.tile_stores()
    note = next(t.get_text() for ax in fig.axes for t in ax.texts if "wavefronts" in t.get_text())
    assert "2 wavefronts" in note          # the bank model's count, not typed
    plt.close(fig)
    with pytest.raises(ValueError, match="rows"):
        ch07_pictures.tile_stores(rows=1000)
    with pytest.raises(ValueError, match="float4"):
        ch07_pictures.tile_reads(TM=16)


def test_promised_ptx_is_what_launch_bounds_with_two_blocks_compiles_to():
    """The one line `__launch_bounds__(NT, 2)` adds, checked against NVRTC compiling the
    source with that second argument (in memory: the .cu file is not touched)."""
    from cupy_backends.cuda.libs import nvrtc
    from gemm_kernels.core import compiler
    k = kernel_of("float4_a_rows")
    p = k.resolve(K5)
    src = k.source_text().replace("__launch_bounds__((BM / TM) * (BN / TN))",
                                  "__launch_bounds__((BM / TM) * (BN / TN), 2)", 1)
    assert src != k.source_text()
    prog = nvrtc.createProgram(src, k.source, [], [])
    try:
        expr = k.name_expression(p)
        nvrtc.addNameExpression(prog, expr)
        arch = compiler.static_arch(k)
        nvrtc.compileProgram(prog, [*compiler.NVRTC_OPTIONS, f"-arch=compute_{arch.split('_')[1]}"])
        text = nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    text = (text.decode() if isinstance(text, bytes) else text).rstrip("\0")
    body = lambda t: [line for line in t.splitlines() if line.strip() and not line.startswith("//")]
    assert body(ch07_ablation.promised_ptx("float4_a_rows", K5)) == body(text)
    assert CUDA_DIR.joinpath("07_float4_a_rows.cu").read_text() == k.source_text()


def test_two_blocks_promised_fit_the_row_major_kernel_in_128_registers():
    c = ch07_ablation.promised("float4_a_rows", K5)
    assert c["registers"] <= 128 and c["blocks/SM"] == 2
    assert c["loop_histogram"]["LDS.128"] == 32 and c["loop_histogram"]["FFMA"] == 512
    t = ch07_ablation.register_cap_table()
    assert [r["__launch_bounds__"] for r in t] == ["(256)", "(256, 2)", "(256)", "(256, 2)", "(256)"]
    with pytest.raises(ValueError, match="minnctapersm"):
        ch07_ablation.promised_ptx("capstone", {"MINB": 2})


def test_row_major_reads_hold_values_over_several_steps_of_k():
    held, total = ch07_ablation.held_loads("float4", K5)
    assert (held, total) == (0, 32)
    held, total = ch07_ablation.held_loads("float4_a_rows", K5)
    assert total == 32 and held >= 8
    listing = ch07_ablation.memory_instructions("float4_a_rows", K5, limit=8)
    assert listing.splitlines()[0].split()[1].startswith("LDG") and "... " in listing


def test_warp_time_adds_up_and_needs_its_counters():
    pre, post = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    row = {"metrics": {"smsp__issue_active.avg.pct_of_peak_sustained_active": 50.0,
                       "sm__warps_active.avg.pct_of_peak_sustained_active": 12.5,
                       **{pre + k + post: v for k, v in (("selected", 1.0), ("not_selected", 0.5),
                                                          ("long_scoreboard", 1.5),
                                                          ("barrier", 0.5), ("wait", 0.5))}}}
    w = ch07_ablation.warp_time(row)
    assert w["warps per scheduler"] == 2 and w["issuing"] == 0.25
    assert sum(w[s] for s, _ in ch07_ablation.WARP_STATES) == pytest.approx(1.0)
    assert w["other"] == pytest.approx(0.125)
    assert ch07_ablation.warp_time({"metrics": {}}) is None


def test_other_reasons_names_what_the_grey_part_holds():
    pre, post = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    def row(wait, dispatch):
        return {"metrics": {"smsp__issue_active.avg.pct_of_peak_sustained_active": 50.0,
                            "sm__warps_active.avg.pct_of_peak_sustained_active": 12.5,
                            **{pre + k + post: v for k, v in (
                                ("selected", 1.0), ("long_scoreboard", 1.5), ("wait", wait),
                                ("dispatch_stall", dispatch), ("drain", 0.01))}}}
    # a warp's share = ratio x 50% / 2 warps per scheduler: wait 0.4 -> 10%, 0.2 -> 5%
    assert ch07_ablation.other_reasons([row(0.4, 0.2), row(0.2, 0.8)]) == \
        ["dispatch stall 5-20%", "wait 5-10%"]    # drain (0.25%) too small to name


def test_depth_table_counts_per_1024_ffma():
    t = ch07_ablation.depth_table((8, 16))
    assert [r["loop trips"] for r in t] == [2, 1] and [r["BAR"] for r in t] == [4, 2]
    assert t[0]["LDS.128"] == t[1]["LDS.128"] == 64
    assert "shared stores (STS + STS.128)" in t[0]


def test_store_wavefronts_of_the_transposed_a_store():
    t = ch07_ablation.store_wavefronts((8, 16))
    assert [(r["BK"], r["wavefronts"], r["ideal"]) for r in t] == [(8, 2, 1), (16, 4, 1)]


def test_one_per_sm_reads_both_settings_of_its_study(monkeypatch):
    # Made-up rows: each column shows its metric divided as declared (ns -> ms, % of 64
    # warps -> warps, bytes -> MB), and a row the study lacks shows '-'.
    def results(name, shape=None, rec=None):
        assert name == ch07_ablation.ONE_PER_SM
        two, one = ch07_ablation.studies.get(name).steps
        metrics = {"gpu__time_duration.sum": 5e6, "lts__t_sector_hit_rate.pct": 94.0,
                   "sm__warps_active.avg.pct_of_peak_sustained_active": 25.0,
                   "dram__bytes_read.sum": 3.5e8}
        return [(two, {"run": "r1", "metrics": metrics}), (one, None)]
    monkeypatch.setattr(ch07_ablation.studies, "results", results)
    t = ch07_ablation.one_per_sm()
    assert [r["step"] for r in t] == ["two blocks per SM", "one block per SM"]
    two, one = t
    assert (two["time (ms)"], two["warps/SM"], two["L2 hit (%)"], two["DRAM read (MB)"]) == \
        (5.0, 16.0, 94.0, 350.0)
    assert two["L1 hit (%)"] is None and one["L2 hit (%)"] is None
    assert "\n one block per SM" in repr(t) and " -" in repr(t).splitlines()[-1]


def test_one_per_sm_study_holds_the_same_kernel_at_one_and_two_blocks():
    two, one = ch07_ablation.studies.get(ch07_ablation.ONE_PER_SM).steps
    assert two.kernel == one.kernel == "float4"
    assert {**two.params, "ONE_PER_SM": True} == one.params
    wanted = {m if isinstance(m, str) else m[0] for m in ch07_ablation.ONE_PER_SM_COLUMNS.values()}
    recorded = set()
    for _, r in ch07_ablation.studies.results(ch07_ablation.ONE_PER_SM):
        recorded |= set((r or {}).get("metrics", {}))
    assert wanted <= recorded, wanted - recorded


def test_warps_or_blocks_keeps_the_warps_and_changes_the_blocks():
    one, two = ch07_ablation.warps_or_blocks()
    assert one["warps/SM"] == two["warps/SM"] == 16
    assert one["FMAs per wavefront"] == two["FMAs per wavefront"] == 128
    assert (one["warps grouped as"], two["warps grouped as"]) == \
        ("1 block of 16 warps", "2 blocks of 8 warps")


def test_the_ablation_sets_the_promised_row_major_kernel_beside_the_steps():
    rows = ch07_ablation.steps()
    assert len(rows) == len(ch07_ablation.STEP_NAMES) == 5
    # the promise stays whole in the label, so that it can be copied
    assert "__launch_bounds__(256, 2)" in ch07_ablation.STEP_NAMES[4].split("\n")
    promised, rows_only, transposed = rows[4], rows[1], rows[2]
    assert promised["registers"] == 128 and promised["blocks/SM"] == 2
    assert promised["spill bytes"] == 0 and promised["issue slots used (%)"] is None
    # the second block pays most of the way, the transposed tile a little more
    assert rows_only["GFLOP/s"] < promised["GFLOP/s"] < transposed["GFLOP/s"]
    assert "two blocks per SM" in ch07_ablation.verdict().splitlines()[-1]
    assert ch07_ablation.steps((2048,) * 3)[4]["GFLOP/s"] is None   # timed at 4096^3 only
    line = ch07_ablation.rates_line((2048,) * 3)
    assert line.startswith("2048^3, the same steps") and line.count(" x") == 3


def test_the_sass_table_counts_the_stores_of_c_of_every_kernel():
    t = ch07_ablation.sass_table()
    stores = {r["kernel"]: r["C stores (whole kernel)"] for r in t}
    assert "STG.128" not in stores["tile_2d_reg"] and "STG" in stores["tile_2d_reg"]
    assert "STG.128" in stores["float4_a_rows"] and "STG.128" in stores["float4"]


def test_the_one_per_sm_caption_names_the_recording_not_a_run():
    title = ch07_ablation.one_per_sm().title
    assert "run 2" not in title and "recorded on" in title and "one run" in title


def test_the_depth_study_reads_both_depths_of_one_run():
    rows = list(ch07_ablation.depth_stalls())
    assert [r["step"] for r in rows] == ["BK = 8", "BK = 16"]
    assert "run 2" not in ch07_ablation.depth_stalls().title
    text = ch07_ablation.depth_check()
    assert "-> 1.12 (falls)" in text and "(rises), mio throttle" in text
    assert text.endswith("(rises).") and "predicted" not in text


def test_the_usual_mistakes_fail_at_the_step_the_solution_says():
    rows = {r["mistake"]: r for r in ch07_ablation.mistakes(gpu=False)}
    assert [r["static"] for r in rows.values()] == ["FAIL", "pass", "pass"]
    assert all(r["correct"] == "FAIL" for r in list(rows.values())[1:])
    assert "BK = 16" in rows["the float4 -> (m, k) mapping written for BK = 8"]["what the grader says"]


def test_the_stall_example_works_one_bar_out_from_its_three_inputs():
    import re
    text = ch07_ablation.stall_example()
    per, issue, warps, share = map(float, re.search(
        r": ([\d.]+) warps .* x (\d+)% of cycles .* / ([\d.]+) warps per scheduler = (\d+)%",
        text).groups())
    assert abs(per * issue / warps - share) < 1.5, text
    assert text.startswith("+ transposed A tile, 'waiting on a global load'")


def test_the_stall_plot_leaves_out_the_row_that_was_not_profiled():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = ch07_ablation.stall_plot()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(labels) == len(ch07_ablation.STEP_NAMES) - 1
    assert not any("promised" in l for l in labels)
    assert not any(t.get_text() == "not recorded" for t in fig.axes[0].texts)
    # the legend says what "other" holds
    other = [t.get_text() for t in fig.axes[0].get_legend().get_texts()][-1]
    assert other.startswith("other: ") and "dispatch stall" in other, other
    plt.close(fig)


def test_the_ladder_lines_compare_at_k5_then_against_chapter_06s_default(monkeypatch):
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    from gemm_kernels.measure import ladder
    table = ladder.compare(["tile_2d_reg", "float4"], (2048, 4096),
                           params={"tile_2d_reg": ch07_ablation.K5})
    lines = ch07_ablation.ladder_lines(table).splitlines()
    assert [l.split(":")[0] for l in lines[:2]] == ["2048", "4096"]
    assert all("float4 / tile_2d_reg, both at K5 = " in l and "of cuBLAS" in l for l in lines[:2])
    assert lines[2].startswith("float4 (K5) / tile_2d_reg at its default (64 x 128 x 16, 8 x 4), 4096: ")


def test_the_ladder_rows_and_plot_are_in_tflops_with_one_cublas_named(monkeypatch):
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    import matplotlib
    matplotlib.use("Agg")
    from gemm_kernels.measure import ladder
    table = ladder.compare(["tile_2d_reg", "float4"], (2048, 4096),
                           params={"tile_2d_reg": ch07_ablation.K5})
    if not len(table):
        pytest.skip("the ladder is not recorded")
    rows = ch07_ablation.ladder_rows(table)
    assert "GFLOP/s" not in rows.title and all(not r["kernel"].startswith("cublas") for r in rows)
    g = {(r["kernel"], r["size"]): r["GFLOP/s"] for r in table}
    # one decimal, as read: "21.0" beside "21.5", not "21"
    assert all(abs(float(r["TFLOP/s"]) - g[r["kernel"], r["size"]] / 1e3) < 0.05 for r in rows)
    assert all(r[c] is None or r[c].split(".")[1].isdigit() and len(r[c].split(".")[1]) == 1
               for r in rows for c in ("TFLOP/s", "min", "max"))
    ax = ch07_ablation.ladder_plot(table)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "TFLOP/s" in ax.get_ylabel() and any(l.startswith("cuBLAS, same run") for l in labels)
    assert not any("timed on its own" in l or l.startswith("cublas") for l in labels)
    assert "same run" in ch07_ablation.ladder_lines(table)


def test_the_sweep_table_is_in_tflops():
    from gemm_kernels.notebook import ch07_pictures
    t = ch07_pictures.sweep_table(top=3)
    if not len(t) or "TFLOP/s" not in t[0]:
        pytest.skip("the sweep is not recorded")
    rates = [float(r["TFLOP/s"]) for r in t]
    assert rates == sorted(rates, reverse=True) and all(1 < v < 1000 for v in rates)


def test_the_promise_table_sets_chapter_06s_kernel_with_and_without_it_beside_float4():
    """One run: chapter 06's kernel as written (1 block per SM), promised two blocks
    (128 registers, a little local memory), and float4; rates over the first."""
    rows = ch07_ablation.promise_table()
    assert [r["blocks/SM"] for r in rows] == [1, 2, 2]
    assert rows[0]["x chapter 06"] == "1.00" and rows[1]["registers"] == 128
    assert rows[1]["local memory (bytes)"] > 0 and rows[2]["kernel"] == "float4"
    assert 1 < float(rows[1]["x chapter 06"]) < float(rows[2]["x chapter 06"])
    assert "TFLOP/s" in rows[0] and "alignment" in rows.title


def test_tile_stores_without_the_fetched_panels_draws_the_transposed_tile_alone():
    fig = ch07_pictures.tile_stores(BK=16, rows=4, b_tile=False, fetched=False)
    assert len(fig.axes) == 1 and fig.axes[0].get_title().startswith("transposed tile")
    plt.close(fig)


def test_tile_stores_title_counts_the_float4s_each_thread_stores():
    one = ch07_pictures.tile_stores()
    two = ch07_pictures.tile_stores(BK=16, rows=4, b_tile=False)
    assert "each one float4 of A and one float4 of B" in one.texts[0].get_text()
    assert "each two float4s of A per tile" in two.texts[0].get_text()
    plt.close(one)
    plt.close(two)


def test_scalar_reads_of_the_transposed_tile_merge_in_the_ptx():
    from gemm_kernels.notebook import display
    k = ch07_ablation.scalar_a_reads()
    assert "a[i] = As[k][tr * TM + i];" in k.source_text()
    assert "reinterpret_cast<const float4*>(&As[k]" not in k.source_text()
    line = str(display.ptx_shared_loads(k, ch07_ablation.K5)).splitlines()[0]
    assert line.endswith("32 x ld.shared.v4.f32")   # no scalar ld.shared.f32 left


def test_the_verdict_says_which_run_each_control_was_timed_in():
    lines = ch07_ablation.verdict().splitlines()
    assert "timed in the same run as the steps" in lines[-1]    # timed_variants, one run
    assert all(r["run"] for r in ch07_ablation.steps()[:3])


def test_step_two_is_named_for_the_copy_it_widens():
    """Step 2 widens the copy's global loads and its shared stores (the counters' drop):
    the printed lines and the plot's row say both, not the global loads alone."""
    assert ch07_ablation.verdict().splitlines()[0].startswith(ch07_ablation.WIDE.capitalize())
    assert "shared" in ch07_ablation.STEP_NAMES[1]
