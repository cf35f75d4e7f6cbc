"""Chapter 15's notebook module (gemm_kernels.notebook.ch15_hopper), without a GPU: the
models (swizzle, descriptor, accumulator layout, block order, ring) against the kernel's
text and the PTX ISA's rules, the static analysis of the sm_90a SASS, and the tables
read from the recordings."""
import pytest

from gemm_kernels.core.kernels import get
from gemm_kernels.measure import studies
from gemm_kernels.notebook import ch13_wmma as ch13
from gemm_kernels.notebook import ch14_mma as ch14
from gemm_kernels.notebook import ch15_hopper as ch15


def test_the_128_byte_swizzle_is_chapter_14s_for_rows_of_8_chunks():
    for r in range(16):
        for c in range(8):
            assert ch15.swizzled(128 * r + 16 * c) == 128 * r + 16 * ch14.chunk_at(r, c, 8)
    assert ch15.swizzled(128 * 3 + 16 * 1 + 5) == 128 * 3 + 16 * 2 + 5


def test_the_descriptor_model_round_trips_and_matches_the_kernels_fields():
    text = get("wgmma_ws").path.read_text()
    assert "| 1ull << 62;" in text and "(addr & 0x3FFFF) >> 4" in text
    f = ch15.descriptor_fields(ch15.descriptor(0x1A400, 8192, 1024))
    assert f == {"start": 0x1A400, "leading byte offset": 8192, "stride byte offset": 1024,
                 "swizzle": "128 bytes"}


def test_the_descriptor_table_steps_as_the_kernel_does():
    t = ch15.descriptor_table()
    a = [r["start (bytes from the tile)"] for r in t if r["operand"] == "A"]
    b = [r["start (bytes from the tile)"] for r in t if r["operand"] == "B"]
    assert a == [0, 32, 64, 96] and b == [0, 2048, 4096, 6144]
    assert {r["leading byte offset"] for r in t if r["operand"] == "B"} == {64 * 256 * 2 // 4}


def test_the_accumulator_layout_repeats_mma_sync_per_warp():
    m = ch15.accumulator_map(16)
    assert len(m) == 64 * 16 and len(set(m.values())) == 64 * 16
    c = ch14.fragment_map()["C"]
    for w in range(4):
        for (r, col), (lane, i) in c.items():
            assert m[(16 * w + r, col)] == (32 * w + lane, i)
            assert m[(16 * w + r, col + 8)] == (32 * w + lane, 4 + i)


@pytest.mark.parametrize("group", [1, 8, 16])
def test_block_order_is_a_permutation_of_the_tiles(group):
    gx, gy = 32, 64
    tiles = [ch15.block_tile(pid, gx, gy, group) for pid in range(gx * gy)]
    assert sorted(tiles) == sorted((x, y) for x in range(gx) for y in range(gy))


def test_block_order_model_is_the_kernels():
    text = get("wgmma_ws").path.read_text()
    assert "return make_int2(in_group / rows, first + in_group % rows);" in text
    assert ch15.block_tile(17, 32, 64, 16) == (1, 1)
    assert ch15.block_tile(17, 32, 64, 1) == (17, 0)


def test_grouping_shrinks_what_a_wave_reads():
    one, sixteen = ch15.wave_footprint(8192, 1, 132), ch15.wave_footprint(8192, 16, 132)
    assert one["tile columns"] == 32 and sixteen["tile rows"] == 16
    assert sixteen["A bytes"] + sixteen["B bytes"] < 0.6 * (one["A bytes"] + one["B bytes"])


def test_the_ring_never_reads_early_nor_overwrites():
    tl = ch15.ring_timeline(stages=3, tiles=12, copy=4, compute=1)
    for e in tl:
        assert e["start"] >= e["full"] >= e["issue"]
        if e["t"] >= 3:
            assert e["issue"] >= tl[e["t"] - 3]["done"]


def test_the_phase_table_puts_the_producer_one_phase_behind():
    for r in ch15.phase_table(stages=4, tiles=12):
        if r["tile t"] >= 4:
            assert r["empty[s]: phase awaited"] == r["full[s]: phase"] - 1
            assert r["empty parity"] != r["full parity"]
        assert r["full parity"] == (r["tile t"] // 4) & 1


def test_the_stage_layout_fills_the_kernels_shared_memory():
    from gemm_kernels.core.kernels import _ws_smem
    p = get("wgmma_ws").resolve({})
    lay = ch15.stage_layout()
    assert all(at % 1024 == 0 for _, at, _ in lay)
    stage = sum(b for _, _, b in lay)
    assert p["STAGES"] * stage + 1024 == _ws_smem(p)
    # the kernel's order: all A tiles first, then all B tiles (Bs = base + STAGES * A_BYTES)
    first = ch15.stage_layout(stage=0)
    assert first[0][1] == 0 and first[1][1] == p["STAGES"] * first[0][2]
    assert lay[0][1] == lay[0][2] and lay[1][1] == first[1][1] + stage - lay[0][2]


def test_the_sass_has_the_hopper_instructions_and_no_ldmatrix():
    t = ch15.sass_table()
    for r in t:
        assert r["HGMMA (wgmma)"] > 0 and r["UTMALDG (TMA copy)"] > 0
        assert r["LDSM (ldmatrix)"] == 0 and r["LDGSTS (cp.async)"] == 0
    assert t[0]["USETMAXREG (setmaxnreg)"] == 0 and t[1]["USETMAXREG (setmaxnreg)"] > 0
    assert t[1]["HGMMA shape"] == "HGMMA.64x256x16"


def test_the_register_budget_fits_the_sm():
    t = ch15.register_budget()
    assert t[2]["registers"] == 40 * 128 + 232 * 256 <= 65536
    assert t[3]["registers"] <= 65536


def test_the_kernels_are_refused_elsewhere():
    assert "sm_90" in ch15.arch_refusal("sm_80") and "wgmma_ws" in ch15.arch_refusal("sm_80")


def test_measured_tables_name_their_recordings():
    rec, prof = ch15.recording(), ch15.study_recording()
    if rec is None or prof is None:
        pytest.skip("the chapter's recordings are not here")
    assert rec.label in ch15.rates_table().title
    assert prof.label in ch15.roles_busy()
    order = ch15.order_recording()
    if order is not None:
        assert order.label in ch15.study_table().title
        assert order.device["name"] in ch15.study_summary()


def test_grouping_cuts_dram_traffic_in_the_study():
    rows = dict(ch15._study(8192))
    plain, grouped = rows["warp-specialised, 4 stages, row order"], rows[
        "warp-specialised, 3 stages, groups of 16 rows"]
    if not (plain and grouped):
        pytest.skip("the study is not recorded")
    assert plain[ch15.DRAM_READ] > 2 * grouped[ch15.DRAM_READ]
    assert grouped[ch15.L2_HIT] > plain[ch15.L2_HIT]
    assert grouped[ch15.TIME] < plain[ch15.TIME]


def test_tables_say_what_is_missing_without_a_recording():
    class Empty:
        label, device = "nothing", {}

        def find(self, *a, **k):
            return []
    assert "not recorded" in ch15.rates_table(rec=Empty()).title
    assert "not in the recording" in ch15.ladder_summary(rec=Empty()).title
    assert ch15.orders(rec=Empty()) == {} and "not in the recording" in str(
        ch15.orders_summary(rec=Empty()))


def test_the_one_role_kernel_fits_two_blocks_per_sm_with_three_stages_not_four():
    occ = {st: ch15.analysis.kernel_occupancy("wgmma_tma", {"STAGES": st}, arch="sm_90")
           for st in (4, 3)}
    assert occ[4].blocks_per_sm == 1 and occ[4].limiter == "shared memory"
    assert occ[3].blocks_per_sm == 2 and occ[3].smem_per_block < occ[4].smem_per_block


def test_the_occupancy_table_sets_the_recorded_rates_beside_blocks_per_sm():
    t = ch15.occupancy_table()
    if not t:
        pytest.skip("the sweep at 2048³ is not recorded")
    tma = [r for r in t if r["kernel"] == "wgmma_tma"]
    assert [r["TFLOP/s"] for r in tma] == sorted((r["TFLOP/s"] for r in tma), reverse=True)
    assert all(r["cuBLAS FP16 beside it"] > 0 for r in t)
    assert t[-1]["kernel"] == "wgmma_ws" and t[-1]["tile of C"] == "128 x 256"
    assert "warps per SM" in str(ch15.occupancy_summary())


def test_the_size_waves_table_shows_the_idle_sms_at_1024():
    t = {(r["size"], r["kernel"]): r for r in ch15.size_waves_table()}
    ws, tma = t[("1024³", "wgmma_ws")], t[("1024³", "wgmma_tma")]
    assert ws["tile of C"] == "128 x 256" and ws["blocks"] == 32
    assert tma["blocks"] == 64
    if "slots" in ws:
        assert ws["SMs with no block"] == ws["slots"] - 32 > tma["SMs with no block"]


def test_the_study_table_has_no_issue_rate_column_and_a_profiled_rate():
    t = ch15.study_table()
    if not t or "TFLOP/s (profiled)" not in t[0]:
        pytest.skip("the study is not recorded")
    assert not any("issue % of peak" in k for k in t[0])
    r = t[0]
    assert abs(r["TFLOP/s (profiled)"] - 2 * 8192 ** 3 / (r["time (ms)"] * 1e9)) \
        < 0.01 * r["TFLOP/s (profiled)"]


def test_the_accumulator_figure_shows_one_warp_large_enough_to_read():
    import matplotlib
    matplotlib.use("Agg")
    ax = ch15.plot_accumulators()
    labels = [t for t in ax.texts if t.get_text().startswith("lane")]
    assert len(labels) == 16 * 8 and min(t.get_fontsize() for t in labels) >= 7
    assert "l/4" in ax.get_title()


def test_the_ladder_shows_each_cublas_rate_beside_the_share():
    t = ch15.ladder_summary()
    if not t:
        pytest.skip("the ladder is not recorded")
    assert all("% of " in v for r in t for k, v in r.items() if k != "size" and v != "-")


def test_the_common_mistakes_are_the_graders_own_answers():
    t = ch15.common_mistakes()
    assert all(r["step 2 says"] != "pass" and r["hint"] for r in t)
    says = " ".join(r["step 2 says"] for r in t)
    assert "overwrites data not yet read" in says and "stale data" in says and "a hang" in says


def test_what_is_left_gives_the_datasheet_peak_too():
    assert "989 TFLOP/s" in ch13.datasheet_peak({"compute_capability": "9.0", "sm_count": 132})
    assert ch13.datasheet_peak({"compute_capability": "8.0", "sm_count": 108}) == ""
    text = str(ch15.what_is_left())
    if "not known" not in text:
        assert "datasheet" in text and " to " in text


def test_the_study_says_how_busy_the_tensor_pipe_was():
    if ch15.study_recording() is None:
        pytest.skip("the chapter's study is not here")
    one_role, split = (m[ch15.TENSOR_BUSY] for _, m in ch15._study(4096)[:2])
    assert 0 < one_role < split <= 100
    if ch15.order_recording() is not None:
        t = ch15.study_table()
        assert all(0 < r["tensor pipe busy %"] <= 100 for r in t[1:])
        assert "tensor pipe busy" in ch15.study_summary()


def test_the_rates_table_shows_each_timed_run_was_right():
    """Both kernels, every size: the checker's verdict on the timed run's output, below 1."""
    t = ch15.rates_table()
    if not t:
        pytest.skip("the chapter's timings are not recorded")
    assert ch14.ERROR_COLUMN in t.columns
    assert {row["kernel"] for row in t} == {ch15.TMA, ch15.WS}
    assert all(0 <= row[ch14.ERROR_COLUMN] < 1 for row in t)
    grouped = ch15.rates_table(configs=[(ch15.WS, ch15.GROUPED)])
    assert all(0 <= row[ch14.ERROR_COLUMN] < 1 for row in grouped)


def test_roles_busy_reads_both_kernels_from_the_study():
    rows = dict(ch15._study(4096))
    one, ws = rows["one role: TMA + wgmma, __syncthreads per step"], rows[
        "warp-specialised, 4 stages, row order"]
    if not (one and ws and ch15.TENSOR_BUSY in one):
        pytest.skip("the study is not recorded")
    s = str(ch15.roles_busy())
    assert f"{one[ch15.TENSOR_BUSY]:.0f}%" in s and f"{ws[ch15.TENSOR_BUSY]:.0f}%" in s
    assert one[ch15.TENSOR_BUSY] < ws[ch15.TENSOR_BUSY]


def test_roles_busy_says_what_is_missing(monkeypatch):
    monkeypatch.setattr(ch15, "_study", lambda n, rec=None: [("a", None), ("b", None)])
    assert "not recorded" in str(ch15.roles_busy())


def test_the_ring_hides_a_copy_that_stages_minus_one_wgmma_cover():
    assert ch15.tensor_cores_fed(ch15.ring_timeline(stages=4, tiles=12, copy=2.5))
    assert not ch15.tensor_cores_fed(ch15.ring_timeline(stages=4, tiles=12, copy=5))
    assert not ch15.tensor_cores_fed(ch15.ring_timeline(stages=2, tiles=12, copy=2.5))


def test_the_one_run_study_sets_cublas_beside_every_configuration():
    data = ch15.orders()
    if not data:
        pytest.skip("the run of the five configurations is not recorded")
    assert all(len(rows) == 5 for rows in data.values())
    text = str(ch15.orders_summary())
    assert text.count("cuBLAS FP16, timed beside each of the five rows") == len(data)
    # a ratio no larger than cuBLAS's own spread is said to be within it
    assert "within cuBLAS's spread" in text
    import matplotlib
    matplotlib.use("Agg")
    assert len(ch15.plot_orders()) == len(data)


def test_versus_says_within_the_spread_only_where_it_is():
    rows = {"a": {"gflops": {"median": 1100.0}}, "b": {"gflops": {"median": 1000.0}}}
    assert ch15._versus(rows, "a", "b", 1.05) == "x1.10"
    assert ch15._versus(rows, "a", "b", 1.15) == "x1.10 (within cuBLAS's spread)"
    assert ch15._versus(rows, "b", "a", 1.15).endswith("(within cuBLAS's spread)")


def test_verdict_words_sort_the_sizes_by_verdict(monkeypatch):
    def rows(a, b, ref, a_reps=None, b_reps=None):
        a_reps, b_reps = a_reps or (a, a), b_reps or (b, b)
        return [("a", {"gflops": {"median": a, "min": a_reps[0], "max": a_reps[1]},
                       "reference": {"gflops": {"median": ref[0]}}}),
                ("b", {"gflops": {"median": b, "min": b_reps[0], "max": b_reps[1]},
                       "reference": {"gflops": {"median": ref[-1]}}})]
    data = {1024: rows(800.0, 1000.0, (1000.0, 1010.0)),      # slower, beyond a 1% spread
            2048: rows(1005.0, 1000.0, (1000.0, 1050.0),      # within a 5% spread,
                       (990.0, 1010.0), (980.0, 1020.0)),     # repetitions overlapping
            4096: rows(1100.0, 1000.0, (1000.0, 1020.0)),     # faster, beyond a 2% spread
            8192: rows(1100.0, 1000.0, (1000.0, 1150.0),      # within a 15% spread, but
                       (1080.0, 1120.0), (990.0, 1030.0))}    # the repetitions lie apart
    monkeypatch.setattr(ch15, "orders", lambda rec=None: data)
    said = ch15.verdict_words("a", "b")
    assert said == ("faster by more than cuBLAS's spread at 4096³ (x1.10); "
                    f"{ch15.UNSETTLED} at 8192³ (x1.10); {ch15.OVERLAP} at 2048³ (x1.00); "
                    "slower by more than cuBLAS's spread at 1024³ (x0.80)")
    assert "cannot settle" in ch15.UNSETTLED


def test_the_host_side_of_tma_is_the_packages_driver_call():
    text = str(ch15.tensor_map_call())
    assert "SWIZZLE_128B = 3" in text and "def half_matrix(" in text
    assert "# innermost first" in text and "_encode()(" in text


def test_the_ring_busy_share_is_stages_over_a_stage_round_trip():
    assert ch15.ring_busy_share(4, copy=5) == pytest.approx(4 / 6)
    assert ch15.ring_busy_share(4, copy=2.5) == 1.0
    # the model agrees once it runs steadily: 4 tiles per 6 units
    tl = ch15.ring_timeline(stages=4, tiles=40, copy=5)
    assert (tl[-1]["done"] - tl[-5]["done"]) == pytest.approx(6, abs=0.7)


def test_the_order_profile_changes_one_thing_at_a_time():
    steps = studies.get(ch15.ORDER_PROFILE).steps
    full = [get(ch15.WS).resolve(s.params) for s in steps]
    pairs = {(p["STAGES"], p["GROUP"]) for p in full}
    assert pairs == {(4, 1), (3, 1), (4, 16), (3, 16)}
    t = ch15.study_table()
    assert [r["configuration"] for r in t] == [studies.get(ch15.STUDY).steps[0].label] + [
        s.label for s in steps]
    if ch15.order_recording() is None:
        assert "not recorded yet" in t.title


def test_the_order_profile_reads_every_row_from_one_recording(monkeypatch):
    """The one-role row and the four warp-specialised rows come from the recording that
    holds the order profile, even where another recording (another GPU) holds the
    chapter's study."""
    seen = []
    real = studies.results
    order = ch15.order_recording()

    def spy(name, shape=None, rec=None):
        seen.append((name, rec))
        return real(name, shape, rec=rec)
    monkeypatch.setattr(studies, "results", spy)
    monkeypatch.setattr(studies, "recording_of", lambda name, shape=None: order)
    ch15.study_table()
    assert {name for name, _ in seen} == {ch15.STUDY, ch15.ORDER_PROFILE}
    assert all(rec is order for _, rec in seen)


def test_the_one_run_verdicts_compare_the_stages_of_both_kernels():
    if not ch15.orders():
        pytest.skip("the run of the five configurations is not recorded")
    text = str(ch15.orders_verdicts())
    assert "One role, 3 stages against 4" in text
    assert "Warp-specialised, 3 stages against 4 (row order)" in text


def test_gpus_compared_names_both_gpus_and_their_dram_bandwidth():
    from types import SimpleNamespace
    h100 = SimpleNamespace(device={"name": "H100", "memory_clock_mhz": 2619.0,
                                   "memory_bus_bits": 5120, "l2_bytes": 50 * 2 ** 20,
                                   "sm_count": 132})
    h200 = SimpleNamespace(device={"name": "H200", "memory_clock_mhz": 3201.0,
                                   "memory_bus_bits": 6016, "l2_bytes": 60 * 2 ** 20,
                                   "sm_count": 132})
    s = str(ch15.gpus_compared(rec=h200, prof=h100))
    assert "H100: DRAM 3,352 GB/s, L2 50 MiB" in s and "H200: DRAM 4,814 GB/s (1.44 times" in s
    assert "one GPU" in str(ch15.gpus_compared(rec=h100, prof=h100))


def test_block_order_draws_only_the_rows_the_first_wave_reaches():
    import matplotlib
    matplotlib.use("Agg")
    axes = ch15.plot_block_order()
    deepest = 1 + max(y for g in (1, 16) for _, y in ch15.wave_footprint(8192, g)["tiles"])
    assert all(ax.get_images()[0].get_array().shape[0] == deepest for ax in axes)
    assert deepest < 8192 // 128


def test_per_cycle_against_mma_divides_flop_by_the_sms_cycles():
    rec = ch15.study_recording()
    n = 8192
    m = dict(ch15._study(n, rec)).get("warp-specialised, 3 stages, groups of 16 rows")
    if not (m and "sm__cycles_elapsed.avg" in m):
        pytest.skip("the study is not recorded")
    ws = 2 * n ** 3 / m["sm__cycles_elapsed.avg"] / rec.device["sm_count"]
    s = str(ch15.per_cycle_against_mma(rec))
    assert f"{ws:,.0f} FLOP per SM cycle" in s and "4,096 per cycle" in s
    # a wgmma kernel cannot exceed the tensor cores' peak per cycle
    assert ws < 4096
