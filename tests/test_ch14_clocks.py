"""Chapter 14's clock evidence (`notebook.ch14_clocks`): what it says from a recording
of the clocks study (and the profile), and what it says without one."""
import matplotlib

matplotlib.use("Agg")

from gemm_kernels.core.kernels import KERNELS  # noqa: E402
from gemm_kernels.measure import records, studies  # noqa: E402
from gemm_kernels.notebook import ch14_clocks as c  # noqa: E402

K = KERNELS["mma_sync"]


def _run(tflops, mhz, watts, held=None):
    return {"gflops": tflops * 1e3, "launches": 100, "sm_mhz": {"median": mhz, "max": mhz},
            "power_w": {"median": watts}, "samples": 50, "held_down": held or {}}


def _rec(with_profile=True):
    rows = []
    clocks = {2048: (1900, 1950), 4096: (1750, 1900), 8192: (1500, 1850)}
    for shape in studies.get(c.STUDY).shapes:
        n = shape[0]
        mine, theirs = clocks[n]
        for step in studies.get(c.STUDY).steps:
            rows.append({"kernel": "mma_sync", "params": K.resolve(step.params),
                         "shape": list(shape), "source": K.source_hash(), "study": c.STUDY,
                         "power_limit_w": 700, "time": "2026-11-27T05:00:00Z", "run": "r",
                         "sustained": _run(mine / 4, mine, 690, {"power cap": 0.9}),
                         "reference": {"kernel": "cublas_hgemm",
                                       "sustained": _run(theirs / 2.5, theirs, 680)}})
    if with_profile:
        for shape in studies.get(c.PROFILE).shapes:
            for step in studies.get(c.PROFILE).steps:
                rows.append({"kernel": "mma_sync", "params": K.resolve(step.params),
                             "shape": list(shape), "source": K.source_hash(),
                             "study": c.PROFILE, "run": "p", "time": "2026-11-27T05:00:00Z",
                             "metrics": {c.CYCLES: 2 * shape[0] ** 3 / 4096 / 132}})
    return records.Record({"name": "Test GPU", "sm_count": 132}, "2026-11-27T05:00:00Z", "x", rows)


def test_the_summary_gives_each_size_and_the_fall_in_clock_and_rate():
    text = str(c.clock_summary(_rec()))
    assert "Test GPU (power limit 700 W)" in text
    assert "* 8192³: the kernel at 375 TFLOP/s, 51% of cuBLAS (740)" in text
    assert "its clock 1,500 MHz at 690 W, cuBLAS's 1,850 MHz at 680 W" in text
    assert "held down by: power cap 90% of the time" in text
    assert "From 2048³ to 8192³ the kernel's clock changed by -21% and its rate by -21%" in text
    # 690 W / 375 TFLOP/s against 680 W / 740 TFLOP/s
    assert "the kernel 1.84 pJ, cuBLAS 0.92 pJ; the kernel spends 2.0 times" in text
    assert "4,096 FLOP per SM cycle at 4096³ and 4,096 at 8192³ (+0%)" in text


def test_without_the_profile_the_summary_says_so():
    text = str(c.clock_summary(_rec(with_profile=False)))
    assert "not in this GPU's recording" in text and "FLOP per SM cycle" not in text


def test_without_the_study_the_chapter_says_how_to_record_it():
    empty = records.Record({"name": "Test GPU"}, "2026-11-27T05:00:00Z", "x", [])
    assert "not in this recording yet" in str(c.clock_summary(empty))
    ax = c.plot_clocks(empty)
    assert "not in this recording" in ax.texts[0].get_text()


def test_the_picture_has_two_bars_per_size_with_clock_and_power():
    ax = c.plot_clocks(_rec())
    assert len(ax.patches) == 2 * len(studies.get(c.STUDY).shapes)
    labels = [t.get_text() for t in ax.texts]
    assert "1,500 MHz\n690 W" in labels and "1,850 MHz\n680 W" in labels
    assert "power limit 700 W" in ax.get_title()


def _with_memory(rec):
    """`rec` with DRAM counters in its profile rows: 4096³ reads 1 byte per FLOP, 8192³ 2."""
    for r in rec.results:
        if r.get("study") == c.PROFILE:
            n = r["shape"][0]
            r["metrics"].update({c.DRAM_READ: (1 if n == 4096 else 2) * 2 * n ** 3,
                                 c.L2_HIT: 80.0 if n == 4096 else 60.0, c.TIME: 1e6})
    return rec


def test_the_profile_by_size_gives_the_dram_bytes_per_flop_of_the_swizzled_steps():
    t = c.profile_by_size(_with_memory(_rec()))
    steps = studies.get(c.PROFILE).steps
    assert [r["step"] for r in t] == [s.label for s in steps[1:]] * 2   # not the plain rows
    by = {(r["step"], r["size"]): r for r in t}
    big = by[(steps[-1].label, "8192³")]
    assert big["DRAM bytes per 1,000 FLOP"] == 2000 and big["L2 hit rate %"] == 60.0
    assert big["FLOP per SM cycle"] == 4096
    assert "Test GPU" in t.title


def test_the_profile_by_size_says_when_the_dram_is_not_recorded():
    assert "not recorded" in c.profile_by_size(_rec()).title


def test_clocks_by_config_sets_both_configurations_side_by_side():
    rec = _rec()
    t = c.clocks_by_config(rec, prof=rec)
    steps = [s.label for s in studies.get(c.STUDY).steps]
    assert [r["configuration"] for r in t] == steps * len(studies.get(c.STUDY).shapes)
    assert t[0]["SM clock (MHz)"] == 1900 and t[0]["power (W)"] == 690
    # the test recording's profile has no DRAM counter: said in words, not left blank
    assert all(r["DRAM read (GB, profiled)"] == "not profiled" for r in t)
    empty = records.Record({"name": "x"}, "t", "x", [])
    assert "not in this recording" in c.clocks_by_config(empty, prof=empty).title
