"""Chapter 09's pictures and tables (CPU only): the lane mappings read from the kernels
agree with the mapping their headers document, the figures draw exactly that, the
cp.async ring keeps the kernel's promises, and recorded rows are shown (or said to be
missing) as they are."""
import re
import matplotlib
import pytest

matplotlib.use("Agg")

from gemm_kernels.core import device                              # noqa: E402
from gemm_kernels.core.kernels import KERNELS, get                 # noqa: E402
from gemm_kernels.measure import records, studies                  # noqa: E402
from gemm_kernels.notebook import capstone_pictures as cp          # noqa: E402

WARP_SHAPES = [{}, {"BN": 256, "BK": 8, "WN": 128}, {"WM": 64, "WN": 64}]


def _documented(params):
    """The capstone's outputs per thread as its header describes them: lane bits
    b4 b3 b2 b1 b0, qr = (b4 b1), qc = (b3 b2 b0); the warp's region at
    (warp / WARPS_N) * WM, (warp % WARPS_N) * WN; sub-tiles 16 rows and 32 columns apart."""
    p = KERNELS["capstone"].resolve(params)
    warps_n = p["BN"] // p["WN"]
    out = []
    for t in range(32 * (p["BM"] // p["WM"]) * warps_n):
        lane, warp = t % 32, t // 32
        b = [(lane >> i) & 1 for i in range(5)]
        qr, qc = 2 * b[4] + b[1], 4 * b[3] + 2 * b[2] + b[0]
        r0 = warp // warps_n * p["WM"] + 4 * qr
        c0 = warp % warps_n * p["WN"] + 4 * qc
        out.append({(r0 + 16 * i + di, c0 + 32 * j + dj) for i in range(p["WM"] // 16)
                    for j in range(p["WN"] // 32) for di in range(4) for dj in range(4)})
    return out


@pytest.mark.parametrize("params", WARP_SHAPES)
def test_lane_outputs_are_the_documented_mapping(params):
    got = cp.lane_outputs(params)
    assert [set(cells) for cells in got] == _documented(params)


@pytest.mark.parametrize("params", WARP_SHAPES)
def test_every_output_of_the_tile_is_owned_once(params):
    p = KERNELS["capstone"].resolve(params)
    cells = [c for per_thread in cp.lane_outputs(params) for c in per_thread]
    assert len(cells) == len(set(cells)) == p["BM"] * p["BN"]
    assert set(cells) == {(r, c) for r in range(p["BM"]) for c in range(p["BN"])}


def _numbers(ax):
    """{(row, col) of the cell a number is drawn in: the number}."""
    return {(int(t.get_position()[1]), int(t.get_position()[0])): int(t.get_text())
            for t in ax.texts if t.get_text().isdigit()}


@pytest.mark.parametrize("params", WARP_SHAPES)
def test_warp_picture_draws_each_lane_where_the_kernel_puts_it(params):
    p = KERNELS["capstone"].resolve(params)
    fig = cp.warp_tiles(params)
    drawn = _numbers(fig.axes[1])
    expected = {}
    for lane, cells in enumerate(_documented(params)[:32]):
        for r, c in cells:
            expected[(r // 4, c // 4)] = lane
    assert drawn == expected
    assert len(drawn) == p["WM"] // 4 * p["WN"] // 4         # every sub-tile, once
    warps = [t.get_text() for t in fig.axes[0].texts]
    assert warps == [f"warp {w}" for w in range(len(_documented(params)) // 32)]
    matplotlib.pyplot.close(fig)


def test_zorder_places_follow_the_lane_bits():
    places = cp.zorder_places()
    assert len(set(places)) == len(places) == 256
    for lane, (qr, qc) in enumerate(places[:32]):
        b = [(lane >> i) & 1 for i in range(5)]
        assert (qr, qc) == (2 * b[4] + b[1], 4 * b[3] + 2 * b[2] + b[0])
    assert cp.zorder_places(zorder=False)[:32] == [(t // 16, t % 16) for t in range(32)]


def test_zorder_picture_draws_both_layouts():
    fig = cp.zorder_grid()
    for ax, z in zip(fig.axes, (False, True)):
        assert _numbers(ax) == {pl: lane for lane, pl in enumerate(cp.zorder_places(z)[:32])}
    matplotlib.pyplot.close(fig)


# ------------------------------------------------------------------ the ring

STAGES = (2, 3, 4)
TILES = (1, 2, 3, 5, 9)


def test_the_ring_uses_the_kernels_wait():
    """The header's argument: wait_group STAGES-2 leaves exactly the tiles after t+1 in
    flight. The count is read from the kernel; this pins it to the argument."""
    assert [cp.kernel_wait(s) for s in STAGES] == [s - 2 for s in STAGES]


@pytest.mark.parametrize("stages", STAGES)
@pytest.mark.parametrize("tiles", TILES)
def test_the_ring_computes_only_landed_tiles_requested_stages_minus_1_steps_before(stages, tiles):
    cols = cp.ring_schedule(stages, tiles)
    requested = {tile: x for x, col in enumerate(cols) for tile in col["requests"]}
    assert sorted(requested) == list(range(tiles))               # each tile requested once
    computed = [col["computes"] for col in cols[1:]]
    assert computed == list(range(tiles))
    for x, col in enumerate(cols[1:], start=1):
        t = col["computes"]
        assert col["landed_before_compute"], f"tile {t} computed before its copies landed"
        assert col["tile_in_that_stage"] == t and col["stage_of_compute"] == t % stages
        # column 0 is the prologue; step t is column t + 1
        assert requested[t] == (0 if t < stages - 1 else t - (stages - 1) + 1)


@pytest.mark.parametrize("stages", STAGES)
@pytest.mark.parametrize("tiles", TILES)
def test_the_ring_never_overwrites_a_stage_still_being_read(stages, tiles):
    cols = cp.ring_schedule(stages, tiles)
    for x, col in enumerate(cols):
        for tile, stage in col["requests"].items():
            assert stage != col.get("stage_of_compute"), "copy into the stage being computed"
            if x:
                before = cols[x - 1]["stage"][stage]
                # the previous tile of that stage was computed by the end of the last
                # column, and a wait + barrier closes every column
                assert before is None or before[1] in ("computing", "done"), \
                    f"tile {tile} overwrites tile {before[0]} ({before[1]}) in stage {stage}"


def test_a_wait_too_lax_is_caught():
    """Negative control: waiting for one group fewer lets a tile be computed before it
    has landed, and the schedule says so."""
    for stages in STAGES:
        cols = cp.ring_schedule(stages, 5, wait=stages - 1)
        assert not all(c["landed_before_compute"] for c in cols[1:])


def test_the_ring_picture_draws_the_schedule():
    cols = cp.ring_schedule(3, 4)
    fig = cp.stage_ring(3, tiles=4)
    drawn = {(int(t.get_position()[1]), int(t.get_position()[0])): t.get_text()
             for t in fig.axes[0].texts}
    for x, col in enumerate(cols):
        for s, cell in enumerate(col["stage"]):
            text = drawn[(s, x)]
            assert text == "empty" if cell is None else text.startswith(f"tile {cell[0]}\n")
    matplotlib.pyplot.close(fig)


def test_the_ring_names_its_columns_iterations_not_steps():
    """A column is one pass of the main loop; chapter 09 keeps "step" for the ladder's
    steps, so the picture's labels and title must not say "step"."""
    cols = cp.ring_schedule(4, 8)
    assert [c["label"] for c in cols] == ["before the loop"] + [f"iteration {t}" for t in range(8)]
    for empty_groups in (True, False):
        fig = cp.stage_ring(4, empty_groups=empty_groups)
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels == [c["label"] for c in cols]
        assert "step" not in ax.get_title() and "iteration 5 on" in ax.get_title()
        matplotlib.pyplot.close(fig)


# ------------------------------------------------------------------ recorded rows

def _timed(step, shape, gflops, run):
    k = studies.step_kernel(step)       # a registry kernel, or the variant a step names
    return {"chapter": k.chapter, "kernel": k.name, "params": k.resolve(step.params),
            "shape": list(shape), "gflops": {"median": gflops, "min": gflops, "max": gflops},
            "source": k.source_hash(), "run": run, "time": "2026-01-02T03:04:05Z",
            "reference": {"kernel": "cublas", "gflops": {"median": 1000.0, "min": 1000.0,
                                                          "max": 1000.0}}}


def _profiled(step, study, shape, metrics):
    k = get(step.kernel)
    return {"chapter": k.chapter, "kernel": step.kernel, "params": k.resolve(step.params),
            "shape": list(shape), "metrics": metrics, "source": k.source_hash(),
            "study": study, "run": "run-b", "time": "2026-01-02T03:04:05Z"}


@pytest.fixture
def record(tmp_path, monkeypatch):
    """A recording with only some of the chapter's rows. Its numbers are test data,
    never shown as measurements: they exercise what is shown and what is said missing."""
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    device._gpu_present.cache_clear()
    ladder = studies.get("ch09_ladder").steps
    ldgsts = studies.get("ch09_ldgsts").steps
    rows = [_timed(ladder[cp.position(7)], (4096,) * 3, 900.0, "run-a"),
            _profiled(ldgsts[1], "ch09_ldgsts", (1024,) * 3,
                      {"smsp__inst_executed_op_ldgsts.sum": 1234567.0,
                       "smsp__sass_inst_executed_op_ldgsts_cache_access.sum": 262144.0,
                       "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": 0.0})]
    rec = records.Record({"name": "Test GPU 9000", "sm_count": 100}, "2026-01-02T03:04:05Z",
                         "abc1234", rows, runs={"run-a": {"command": "study ch09_ladder",
                                                          "started": "2026-01-02T03:00:00Z"},
                                                "run-b": {"command": "study ch09_ldgsts",
                                                          "started": "2026-01-02T03:01:00Z"}})
    path = records.save(rec, tmp_path / "test-gpu-9000.json")
    monkeypatch.setenv("GEMM_KERNELS_RECORD", str(path))
    # the only recording there is (the ladder's section would otherwise read a committed
    # one that holds every step)
    monkeypatch.setattr(records, "available", lambda: [{"path": str(path)}])
    records._LOADED.clear()
    yield
    records._LOADED.clear()


def test_ladder_plot_shows_recorded_steps_and_says_which_are_missing(record):
    fig = cp.ladder_plot((4096,))
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "4096^3: 900 GFLOP/s, 90% of cuBLAS" in texts
    assert texts.count(f"4096^3: {cp.NOT_RECORDED}") == len(studies.get("ch09_ladder").steps) - 1
    # no run ids on the page: the caption names the recording
    assert not any("run-a" in t.get_text() for ax in fig.axes for t in ax.texts + [ax.title])
    matplotlib.pyplot.close(fig)


def test_ladder_table_gives_rate_share_change_and_no_run_ids(record):
    rows = cp.ladder_table((4096,))
    seven = cp.position(7)
    assert rows[seven]["step"].startswith("7. ")
    assert rows[seven]["4096^3 GFLOP/s (% of cuBLAS)"] == "900 (90%)"
    assert all(r["4096^3 GFLOP/s (% of cuBLAS)"] == cp.NOT_RECORDED
               for i, r in enumerate(rows) if i != seven)
    assert rows[seven]["4096^3 change"] == "-"          # step 6 is not recorded: no change
    assert "run" not in rows.columns and "run-a" not in rows.title


def test_ladder_registers_are_those_of_the_binary_that_was_timed(record, monkeypatch):
    """The timed binary's registers decide the occupancy, not ptxas here: a row that
    says 129 registers gives one block per SM whatever the compiler here makes of it."""
    row = records.current().results[0]
    monkeypatch.setitem(row, "binary", {"registers": 129})
    seven = cp.position(7)
    rung = cp.ladder((4096,))[seven]
    assert rung.timed and rung.registers == 129 and rung.blocks == 1
    table = cp.ladder_table((4096,), two_blocks_at=None)
    assert (table[seven]["registers"], table[seven]["blocks/SM"]) == (129, 1)
    assert "step 7: " in table.title and "the timed binary had 129" in table.title
    monkeypatch.setitem(row, "binary", {"registers": 127})
    assert cp.ladder((4096,))[seven].blocks == 2


def test_ladder_table_sets_the_capstone_steps_at_two_blocks_by_their_minb_2_builds():
    """Every capstone step's 'MINB = 2' cell is the sweep's row of the same kernel built
    with MINB = 2 (steps 7 and 8 too, which already have two blocks); steps 0-3 have no
    MINB and stand there with their own rates; the change is between those cells."""
    rows = cp.ladder_table()
    rungs = cp.ladder((4096,))
    at = cp.position
    assert rows[at("4c")]["blocks/SM"] == 1 and rows[at(7)]["blocks/SM"] == 2
    for i in map(at, ("4c", 7, 8)):
        assert rungs[i].held[4096]["params"]["MINB"] == 2
        assert rows[i]["4096^3, MINB = 2 builds"] == cp.count(rungs[i].held[4096]["gflops"]["median"])
    assert rows[at(3)]["4096^3, MINB = 2 builds"] == cp.AS_BUILT   # no repeated rate
    assert rows[at(3)]["4096^3 change, MINB = 2"] == "-"   # its change is the as-built one
    if rungs[at("4b")].held[4096] is None:
        pytest.skip("the recording has no step 4b")
    held = rungs[at("4c")].held[4096]["gflops"]["median"]
    own = rungs[at("4b")].held[4096]["gflops"]["median"]
    assert rows[at("4c")]["4096^3 change, MINB = 2"] == f"{100 * (held / own - 1):+.1f}%"


def test_minb_pairs_keep_the_occupancy_and_differ_only_by_minb():
    pairs = cp.minb_pairs()
    assert pairs
    for p in pairs:
        r1, r2 = p["rows"]
        assert r1["params"]["MINB"] == 1 and r2["params"]["MINB"] == 2
        assert {k: v for k, v in r1["params"].items() if k != "MINB"} == \
               {k: v for k, v in r2["params"].items() if k != "MINB"}
        assert all(r1["params"][k] == v for k, v in cp._LADDER_TILE.items())
        assert cp._row_blocks("capstone", r1) == cp._row_blocks("capstone", r2) \
            == p["blocks/SM"]
    # the timed binary's blocks per SM, from the row alone, agree with the occupancy
    # computed here for the same registers
    r1 = pairs[0]["rows"][0]
    assert cp._row_blocks("capstone", r1) == \
        cp._blocks("capstone", r1["params"], r1["binary"]["registers"])
    lines = str(cp.yardsticks()).splitlines()
    assert any("MINB = 2 against 1 at unchanged occupancy" in l for l in lines)
    assert any("cuBLAS timed beside" in l for l in lines)
    # one threshold per size, the one the rule applies
    for n, shift in cp.recompile_shift().items():
        assert any(l.startswith(f"{n}^3: MINB code shift") and
                   l.endswith(f"the rule's threshold: ±{shift:.1f}%") for l in lines), lines


def test_cublas_spread_is_the_range_of_the_references():
    rows = [{"reference": {"gflops": {"median": g}}} for g in (100.0, 103.0, 101.0)] + [None]
    assert cp.cublas_spread(rows) == (100.0, 103.0)
    assert cp.cublas_spread([None, {}]) is None


def test_change_plot_draws_both_bands_and_every_step():
    fig = cp.change_plot()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(l.startswith("timing noise") for l in labels)
    # the band is the larger spread: beside the MINB = 2 builds when that one is larger
    rungs = cp.ladder()
    larger = max(cp._spread_pct(cp.cublas_spread(rows)) for n in (2048, 4096)
                 for rows in ([r.rows[n] for r in rungs], [r.held[n] for r in rungs if r.has_minb]))
    assert any(f"up to {larger:.1f}%" in l for l in labels), labels
    for n, shift in cp.recompile_shift().items():
        assert any(l.startswith(f"{n}^3: within ±{shift:.1f}%, the MINB code shift")
                   for l in labels), labels
    assert len(fig.axes[0].get_yticklabels()) == len(cp.ladder_steps()) - 1
    matplotlib.pyplot.close(fig)


def test_ladder_change_is_against_the_step_before():
    assert cp._change({"gflops": {"median": 108.0}}, {"gflops": {"median": 100.0}}) == "+8.0%"
    assert cp._change(None, {"gflops": {"median": 100.0}}) == "-"


def test_step_listing_keeps_copies_waits_and_barriers_and_counts_the_rest():
    """Steps 4a and 4c (cp.async, 2 stages) and step 0 (chapter 08): the listing shows
    what the step is about, in program order, and every instruction of the loop is
    either shown or counted on a 'left out' line."""
    rungs = cp.ladder((4096,))
    cp_async = (("LDGSTS", "LDGDEPBAR", "DEPBAR.LE SB0, 0x0", "BAR.SYNC"), ("STS", "LDG"))
    for number, must, never in ((0, ("LDG.E.128", "STS.128", "BAR.SYNC"), ("LDGSTS", "DEPBAR", "LDGDEPBAR")),
                                ("4a", *cp_async), ("4c", *cp_async)):
        r = rungs[cp.position(number)]
        i, k, params = number, r.kernel, r.step.params
        listing = cp.step_listing(k, params)
        text = "\n".join(listing)
        ops = {l.split("*/")[1].split()[0].split(".")[0] for l in listing if "*/" in l}
        assert all(m in text for m in must) and not ops & set(never), i
        assert sum(1 for l in listing if "LDS.128" in l and "left out" not in l) == 4
        shown = sum(1 for l in listing if "left out" not in l)
        counted = sum(int(l.split("...")[1].split()[0]) for l in listing if "left out" in l)
        total = sum(cp._loop_counts(k, params)[f]
                    for f in ("FFMA", "LDS.128", "LDG", "STS", "LDGSTS", "LDGDEPBAR",
                              "DEPBAR", "BAR", "other"))
        assert shown + counted == total, i


def test_step_sass_sets_the_step_against_the_one_before_or_a_range():
    number = lambda r: r["step"].split(".")[0]
    assert [number(r) for r in cp.step_sass(5).table] == ["4c", "5"]
    assert [number(r) for r in cp.step_sass(3, since=0).table] == ["0", "1", "2", "3"]
    assert [number(r) for r in cp.step_sass("4c", since=3).table] == ["3", "4a", "4b", "4c"]
    with pytest.raises(ValueError, match="no step 4;"):
        cp.step_sass(4)
    assert "DEPBAR.LE SB0, 0x2" in cp.step_sass(5)._repr_html_()    # wait_group STAGES - 2


def test_step_sass_leaves_out_the_columns_of_zeros_and_says_so():
    """Step 3 still loads through registers (LDG, STS); from step 4a on neither is left."""
    with_step3 = cp.step_sass("4c", since=3).table
    assert {"LDG", "STS"} <= set(with_step3.columns) and "no LDG" not in with_step3.title
    later = cp.step_sass(5).table
    assert not {"LDG", "STS"} & set(later.columns)
    assert later.title.endswith("; no LDG and no STS in these loops")


def test_ldgsts_counters_per_step_or_the_words(record):
    rows = {r["counter"]: r for r in cp.ldgsts_counters()}
    z, cap = (s.label for s in studies.get("ch09_ldgsts").steps)
    assert rows["smsp__sass_inst_executed_op_ldgsts_cache_access.sum"][cap] == "262,144"
    assert rows["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"][cap] == "0"
    assert rows["smsp__sass_inst_executed_op_ldgsts_cache_access.sum"][z] == cp.NOT_RECORDED
    # a counter the chapter does not read is not shown, even when recorded
    assert "smsp__inst_executed_op_ldgsts.sum" not in rows
    # a counter it reads but the recording lacks says so with a dash
    assert rows["smsp__sass_inst_executed_op_ldgsts_cache_bypass.sum"][cap] == "-"


def test_capstone_counters_set_each_count_beside_its_model(record):
    rows = {r["access"]: r for r in cp.capstone_counters()}
    a = rows["LDGSTS (A, 4-byte copies): instructions"]
    assert a["counted"] == "262,144" and a["bank model"] == "262,144"   # 512 warps x 64 tiles x 8
    assert rows["STS: wavefronts (op_st)"]["counted"] == "0"
    assert rows["LDS.128 (fragments): wavefronts"]["counted"] == "-"   # not in this row


def test_the_a_copy_cost_sets_the_count_beside_the_model(record, monkeypatch):
    """The main text's line on the 4-byte copies of A: the model's 1 wavefront per copy
    beside the count per instruction, both read (never typed), and the recording named;
    a counter the recording lacks is said missing."""
    row = next(r for r in records.current().results if r.get("study") == "ch09_ldgsts")
    monkeypatch.setitem(row["metrics"], "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_"
                        "shared_op_ldgsts_cache_access.sum", 4 * 262144.0)
    lines = str(cp.a_copy_cost()).split("\n")
    assert "Test GPU 9000" in lines[0]
    assert lines[1].startswith("copies of A, 4 bytes a lane: 8 per thread and tile") \
        and "bank model 1, counted 4 (1,048,576 for 262,144 instructions)" in lines[1], lines
    assert "bank model 4" in lines[2] and cp.NOT_RECORDED in lines[2], lines


def test_the_issue_evidence_names_the_one_recording_it_reads(record):
    assert str(cp.issue_evidence()).split("\n")[0] == \
        f"profile, FP32 peak and timed rate: {records.recording_label()}"


def test_an_unrecorded_study_is_said_missing(record, monkeypatch):
    monkeypatch.setattr(records.current(), "results", [])
    assert cp.NOT_RECORDED in cp.ldgsts_counters().title
    assert {r["counted"] for r in cp.capstone_counters()} == {cp.NOT_RECORDED}


def test_waves_use_the_recorded_device(record):
    rows = cp.waves(sizes=(4096,))
    slots = 100 * rows[0]["blocks/SM"]
    assert rows[0]["SMs"] == 100 and rows[0]["waves"] == -(-1024 // slots)
    assert "the 100 SMs of Test GPU 9000" in rows.title, rows.title


def test_capstone_model_matches_its_bank_analysis():
    """Every LDS.128 of the z-order warp tile and every cp.async of the default costs
    the least it can: 2 wavefronts per 128-bit load, 1 per 4-byte copy of a warp,
    4 per 16-byte copy of a warp (512 bytes)."""
    m = cp.capstone_model()
    p = KERNELS["capstone"].resolve(None)
    mi, nj = p["WM"] // 16, p["WN"] // 32
    threads = 32 * (p["BM"] // p["WM"]) * (p["BN"] // p["WN"])
    a_copies, b_copies = p["BM"] * p["BK"] // threads, p["BK"] * p["BN"] // 4 // threads
    assert m["read_per_k"] == 2 * (mi + nj)
    assert (m["a_copies"], m["a_copy_wavefronts"]) == (a_copies, a_copies)
    assert (m["b_copies"], m["b_copy_wavefronts"]) == (b_copies, 4 * b_copies)


def test_prefetch_schedule_alternates_stages_with_one_barrier():
    """Chapter 08's pipeline: step t computes tile t in stage t % 2 and stores tile t+1,
    loaded into registers at the top of the same step, into the other stage."""
    cols = cp.prefetch_schedule(4)
    assert cols[0]["stores"] == 0 and cols[0]["store_stage"] == 0
    for t, c in enumerate(cols[1:]):
        assert c["computes"] == t and c["compute_stage"] == t % 2 and c["barriers"] == 1
        if t + 1 < 4:
            assert c["loads"] == c["stores"] == t + 1
            assert c["store_stage"] != c["compute_stage"]
        else:
            assert c["loads"] is None and c["stores"] is None


def test_prefetch_timeline_draws():
    fig = cp.prefetch_timeline(3)
    assert len(fig.axes) == 1 and len(fig.axes[0].patches) > 0


# ------------------------------------------------------------------ the chapter's new pictures

def test_without_empty_groups_the_ring_computes_tiles_that_have_not_landed():
    """The classic race: commits only in the steps that request a tile. From the first
    step with nothing to request, the groups fall behind and the wait no longer covers
    the next tile."""
    for stages in (3, 4):
        cols = cp.ring_schedule(stages, 8, empty_groups=False)
        unguarded = [c["computes"] for c in cols[1:] if not c["landed_before_compute"]]
        assert unguarded and min(unguarded) == 8 - stages + 2, (stages, unguarded)
        assert all(c["landed_before_compute"] for c in cp.ring_schedule(stages, 8)[1:])


@pytest.mark.parametrize("K", [1, 16, 17, 72, 100])
def test_hoist_tiles_put_the_remainder_in_tile_0_and_cover_k_once(K):
    for hoist in (False, True):
        tiles = cp.hoist_tiles(K, 16, hoist)
        inside = [k for t in tiles for k in range(t["first"], t["last"] + 1) if 0 <= k < K]
        assert inside == list(range(K))                    # every k once, in order
        assert [t["checked"] for t in tiles] == ([True] * len(tiles) if not hoist else
                                                 [True] + [False] * (len(tiles) - 1))
        assert all(not t["outside"] for t in tiles if not t["checked"])   # whole tiles
    assert cp.hoist_tiles(72, 16)[0]["outside"] == list(range(-8, 0))


def test_code_shows_the_pieces_asked_for_with_their_lines():
    one = str(cp.code("capstone", ("int rs = 0;", "ws = ws + 1")))
    assert one.startswith("*09_capstone.cu, lines ") and "```cpp" in one
    assert "cp_async_wait<STAGES - 2>();" in one and one.rstrip().endswith("```")
    block = str(cp.code("zorder", "if constexpr (ZORDER) {"))
    assert "} else {" in block and "qc = t % (BN / 8);" in block
    two = str(cp.code("capstone", ("void cp_async_commit()", "}"), ("template <int N>", "}")))
    assert "// ..." in two and "commit_group" in two and "wait_group" in two
    with pytest.raises(ValueError):
        cp.code("capstone", "no such line anywhere")


def test_reveal_folds_its_answer_away():
    html = cp.Reveal("open me", cp.part_a_table())._repr_html_()
    assert html.startswith("<details><summary><b>open me</b></summary>")
    assert "<table" in html and html.endswith("</details>")


def test_reveal_folds_text_code_and_figures_too():
    fig = cp.zorder_grid()
    answer = cp.Reveal("the answer", "`qr` takes **two** bits, *not* three; a < b.",
                       cp.code("zorder", "if constexpr (ZORDER) {"), fig)
    html = answer._repr_html_()
    assert "<p><code>qr</code> takes <b>two</b> bits, <i>not</i> three; a &lt; b.</p>" in html
    assert "<pre>if constexpr (ZORDER) {" in html and "<i>09_zorder.cu, lines" in html
    assert '<img src="data:image/png;base64,' in html
    assert not matplotlib.pyplot.fignum_exists(fig.number)   # shown in the fold only


def test_reveal_shows_markdown_lists_as_lists():
    html = cp.Reveal("steps", "Two steps:\n\n1. **one**\n2. two\n\n* a\n* `b`\n\n* a\nnot a list")._repr_html_()
    assert "<p>Two steps:</p><ol><li><b>one</b></li><li>two</li></ol>" in html
    assert "<ul><li>a</li><li><code>b</code></li></ul>" in html
    assert "<p>* a\nnot a list</p>" in html


def test_part_a_pictures_and_tables():
    fig = cp.b_reads()
    titles = [ax.get_title() for ax in fig.axes]
    assert "8 wavefronts: 4 phases x 2 (a 2-way conflict in each)" in titles[0]
    assert "4 wavefronts" in titles[1] and "no conflict" in titles[1]
    assert "2 wavefronts" in titles[2] and "no conflict" in titles[2]
    matplotlib.pyplot.close(fig)
    rows = cp.part_a_table()
    assert [r["read conflicts"] for r in rows] == [8, 0, 0, 0, 0]
    assert [r["reads per k"] for r in rows] == [20, 12, 8, 12, 8]


def test_zorder_lane_table_checks_the_two_rules():
    for r in cp.zorder_lane_table(range(32)):
        assert r["qr of lane ^ 1"] == r["qr"] and r["qc of lane ^ 2"] == r["qc"]


def test_stages_and_group_tables_read_the_timed_binaries():
    rows = cp.stages_table()
    assert [(r["STAGES"], r["MINB"]) for r in rows] == [(s, m) for s in (2, 3, 4) for m in (1, 2)]
    assert rows[4]["against the default"] == "+0.0%"
    groups = cp.group_table()
    assert [(r["STAGES"], r["MINB"]) for r in groups] == [(s, m) for s in (2, 3, 4) for m in (1, 2)]


def test_exercise_references_are_the_recorded_kernels_at_the_graded_configuration():
    rows = cp.exercise_references()
    assert [r["exercise"] for r in rows] == ["09_zorder", "09_capstone_step"]
    for r in rows:
        rate = float(r["GFLOP/s at 2048^3 (% of cuBLAS)"].split()[0].replace(",", ""))
        asked = float(r["an answer must reach"].split()[0].replace(",", ""))
        assert rate > 0 and abs(asked - 0.9 * rate) <= 1
    assert rows[1]["registers (timed)"] == 127 and rows[1]["blocks/SM"] == 2


def test_the_step_profile_holds_steps_3_to_7_in_ladder_order():
    t = cp.step_counters()
    assert [r["step"].split(".")[0] for r in t] == ["3", "4a", "4b", "4c", "5", "6", "7"]
    assert t[0]["step"] == "3. + z-order lanes" and t[3]["step"] == "4c. + double-buffered fragments"
    if t[0]["warps resident, %"] is None:
        pytest.skip("the recording has no profile of the steps")
    assert "run 2" not in t.title                      # no run id in the student's table
    # step 4c runs one block per SM where step 3 runs two: half the warps resident
    assert t[3]["warps resident, %"] == pytest.approx(t[0]["warps resident, %"] / 2, rel=0.1)
    ax = cp.step_stall_plot().axes[0]
    profiled = [r["step"].split(".")[0] for r in t if r["warps resident, %"] is not None]
    ticks = [x.get_text() for x in ax.get_yticklabels()]
    assert [x.split("\n")[0] for x in ticks] == [f"step {n}" for n in profiled]
    # each bar says its blocks per SM: 4c runs one, step 3 two (the ladder's registers)
    assert ticks[0].endswith("2 blocks/SM") and ticks[3].endswith("1 block/SM"), ticks
    assert "math pipe throttle" in ax.get_legend_handles_labels()[1]
    # steps with one and two blocks per SM share the axis: it says the value is per warp
    assert "one warp's average" in ax.get_xlabel() and "summed" not in ax.get_xlabel()


def test_the_step_profile_shows_the_waits_as_recorded():
    """Nsight Compute's stall-per-issue value is already one warp's average (stalled
    warp-cycles over the instructions those warps issued): the table shows it as recorded,
    not divided again by the warps resident, and its title says what it is."""
    from gemm_kernels.notebook import evidence
    t = cp.step_counters()
    if t[0]["warps resident, %"] is None:
        pytest.skip("the recording has no profile of the steps")
    raw = evidence.counters(cp.STEP_STALLS, {"long": cp._WAIT.format("long_scoreboard"),
                                             "barrier": cp._WAIT.format("barrier")},
                            rec=studies.complete_recording(cp.STEP_STALLS))
    assert not any("per warp" in c or c == "warps resident" for c in t.columns)
    for row, r in zip(t, raw):
        assert row["long scoreboard"] == f"{r['long']:.2f}"
        assert row["barrier"] == f"{r['barrier']:.2f}"
    assert "one warp's average" in t.title and "divided" not in t.title


def test_stages_reading_is_the_tables_rounding():
    """The solution's sentences quote the same changes as stages_table prints."""
    source, *lines = cp.stages_reading().splitlines()
    assert source.startswith("(recorded on ")          # its GPU, named first
    for size in (4096, 2048):
        rows = {(r["STAGES"], r["MINB"]): r["against the default"] for r in cp.stages_table(size)}
        assert f"{rows[(3, 1)]} at {size}^3" in lines[0]
        assert f"{rows[(2, 1)]} at {size}^3" in lines[1]
        # the recompile's shift from the same table, so on the same GPU as the losses
        assert f"{rows[(4, 2)]} at {size}^3" in lines[3]
    assert cp.numbered("+ BK = 16") == "6. + BK = 16" and cp.numbered("x") == "x"


@pytest.mark.parametrize("ladder_gpu", [False, True])
def test_the_worked_solutions_sit_beside_the_kernels_of_their_run(ladder_gpu):
    """From the recording shown, or from the ladder's (the answers beside the ladder's
    GPU): each answer with the kernel of its own run, the title naming that GPU."""
    rec = cp.ladder_recording() if ladder_gpu else None
    t = cp.exercise_references(rec=rec)
    if ladder_gpu:
        assert rec.device["name"] in t.title
    assert [r["exercise"] for r in t] == ["09_zorder", "09_capstone_step"]
    for r in t:
        assert r["worked solution (% of cuBLAS)"] != cp.NOT_RECORDED   # no placeholder
        if r["worked solution (% of cuBLAS)"] == cp.NOT_TIMED:
            pytest.skip("the recording has no worked solution")
        assert r["solution / kernel"].endswith("%")


def test_step_changes_are_the_numbers_of_the_change_plot():
    t = cp.step_changes()
    assert cp.ladder_source() in t.title and cp._RULE in t.title
    assert t.columns == ["step", "built with", "2048^3", "4096^3", "MINB = 2 (2048^3 / 4096^3)",
                         "verdict"]
    assert len(t) == len(cp.ladder_steps()) - 1
    full = cp.ladder((2048, 4096))
    c, held = cp._step_change(full[1], full[0], 2048)
    if c is None:
        pytest.skip("the ladder is not recorded")
    assert t[0]["step"] == full[1].label and t[0]["2048^3"] == cp.signed(c)
    assert t[0]["MINB = 2 (2048^3 / 4096^3)"] == "-" and "two blocks" not in t[0]["verdict"]
    five = t[cp.position(5) - 1]
    assert " / " in five["verdict"] and "/" in five["MINB = 2 (2048^3 / 4096^3)"]
    assert t.title.endswith("verdict: as built / at two blocks")
    # one step's row alone, as part B prints it beside its reading
    assert list(cp.step_changes(steps=("5",))) == [five]


def test_a_change_within_the_recompile_shift_is_not_credited():
    shift = {2048: 3.3, 4096: 4.1}
    assert cp.verdict([(2048, 2.1), (4096, 1.0)], shift) == "within the code shift, not credited"
    assert cp.verdict([(2048, -3.3), (4096, 4.1)], shift) == "within the code shift, not credited"
    assert cp.verdict([(2048, 6.5), (4096, 6.8)], shift) == "a gain"
    assert cp.verdict([(2048, -9.7), (4096, -8.7)], shift) == "a loss"
    # past the shift at one size only: the rule's own words, never a fourth verdict
    assert cp.verdict([(2048, 2.9), (4096, 5.4)], shift) == "not credited"
    assert cp.verdict([(2048, None), (4096, 1.0)], shift) == ""
    # the shift is the largest MINB = 2 change at unchanged occupancy, per size
    pairs = cp.minb_pairs()
    if not pairs:
        pytest.skip("the ladder is not recorded")
    got = cp.recompile_shift()
    for n in got:
        assert got[n] == max(abs(p["change"]) for p in pairs if p["size"] == n)
    # the printed rows carry the verdict: step 5 between the MINB = 2 builds
    row = cp.step_changes(steps=("5",))[0]
    assert row["verdict"].split(" / ")[1] in ("gain", "loss", "not credited")
    assert cp.short_verdict("within the code shift, not credited") == "not credited"
    assert cp.short_verdict("not credited") == "not credited"


def test_step_1_splits_each_threads_outputs_into_sub_tiles_half_a_tile_apart():
    from gemm_kernels.memory import ch07_09_patterns as pat
    for lay in ("float4", "rowmajor"):
        every = [pat.owned(lay, t) for t in range(256)]
        assert all(len(o) == 64 for o in every)
        assert set().union(*every) == {(r, c) for r in range(128) for c in range(128)}
    assert pat.owned("float4", 1) == {(r, c) for r in range(8) for c in range(8, 16)}
    halves = [0, 1, 2, 3, 64, 65, 66, 67]
    assert pat.owned("rowmajor", 0) == {(r, c) for r in halves for c in halves}
    assert pat.owned("rowmajor", 16) == {(r + 4, c) for r in halves for c in halves}
    fig = cp.owners()
    assert len(fig.axes) == 2 and all(len(ax.patches) == 3 * 4 for ax in fig.axes)


def test_listings_before_the_pipeline_exercise_hide_the_waits_count():
    shown = cp.step_sass(7, hide_wait=True).listing
    waits = [ln for ln in shown if "DEPBAR.LE" in ln]
    assert waits and all(ln.rstrip().endswith("0x?") for ln in waits), waits
    plain = [ln for ln in cp.step_sass(7).listing if "DEPBAR.LE" in ln]
    assert plain and not any("0x?" in ln for ln in plain), plain
    # the MINB code shift's two loops, shown in the optional section, hide it the same way
    for _, lines in cp.minb_loops(hide_wait=True).listings:
        waits = [ln for ln in lines if "DEPBAR.LE" in ln]
        assert waits and all(ln.rstrip().endswith("0x?") for ln in waits), waits


def test_the_ladder_plot_draws_the_minb_diamonds_only_when_asked():
    """The chapter's first figure has no MINB = 2 diamonds; the Yardsticks section asks
    for them (one per capstone step and size with a MINB = 2 build)."""
    def diamonds(fig):
        return sum(1 for line in fig.axes[0].lines if line.get_marker() == "D")
    plain, full = cp.ladder_plot(), cp.ladder_plot(minb=True)
    held = sum(1 for r in cp.ladder() for n in (2048, 4096) if r.has_minb and r.held[n])
    assert diamonds(plain) == 0 and diamonds(full) == held > 0
    # the legend names the steps without a MINB switch (not "without a diamond": steps
    # 7 and 8 have diamonds and fit two blocks as well)
    labels = full.axes[0].get_legend_handles_labels()[1]
    plain_steps = [r.number for r in cp.ladder() if not r.has_minb]
    assert any(f"steps {plain_steps[0]}-{plain_steps[-1]} have no MINB switch" in l
               for l in labels), labels
    assert not any("without a diamond" in l for l in labels), labels
    matplotlib.pyplot.close(plain); matplotlib.pyplot.close(full)


def test_step_4_is_numbered_4a_4b_4c_and_the_rest_keep_their_numbers():
    assert cp.step_numbers() == ["0", "1", "2", "3", "4a", "4b", "4c", "5", "6", "7", "8"]
    assert [r.label.split(".")[0] for r in cp.ladder((4096,))] == cp.step_numbers()
    assert cp.numbered("+ double-buffered fragments") == "4c. + double-buffered fragments"


def test_the_stall_plot_names_steps_by_number_and_says_which_are_not_recorded(record):
    fig = cp.step_stall_plot()
    # the test recording profiles none of the steps: the figure says so in words
    assert any("stall reasons" in t.get_text() for ax in fig.axes for t in ax.texts) \
        or any("Not in this recording" in t.get_text() for t in fig.texts)
    matplotlib.pyplot.close(fig)


def test_the_stall_plot_key_lists_the_steps_shown():
    fig = cp.step_stall_plot()
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    if not ticks:
        pytest.skip("the recording has no profile of the ladder's steps")
    steps = [t.split("\n")[0] for t in ticks]
    assert all(t.startswith("step ") and len(t) <= len("step 4c") for t in steps), ticks
    assert all(t.endswith("/SM") for t in ticks), ticks
    key = " ".join(t.get_text() for t in fig.texts)
    assert all(f"{t.removeprefix('step ')}: " in key for t in steps), key
    matplotlib.pyplot.close(fig)


def _recording(rows, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")
    device._gpu_present.cache_clear()
    rec = records.Record({"name": "Test GPU 9000", "sm_count": 100}, "2026-01-02T03:04:05Z",
                         "abc1234", rows, runs={"run-a": {"command": "study ch09_ladder",
                                                          "started": "2026-01-02T03:00:00Z"}})
    path = records.save(rec, tmp_path / "t.json")
    monkeypatch.setenv("GEMM_KERNELS_RECORD", str(path))
    monkeypatch.setattr(records, "available", lambda: [{"path": str(path)}])
    records._LOADED.clear()


def test_step4_reading_says_in_one_sentence_that_the_split_steps_are_missing(record):
    lines = str(cp.step4_reading((4096,))).splitlines()
    assert lines[1] == ("Steps 4a, 4b and 4c are not in this recording, so it cannot yet "
                        "say which of the three changes brings step 4's gain.")
    # no change is printed for a step whose row is missing, nor against one
    assert [l.split(".")[0] for l in lines[2:5]] == ["4a", "4b", "4c"]
    assert not any("as timed" in l for l in lines[2:5])
    records._LOADED.clear()


def test_step4_reading_gives_each_split_step_against_the_one_before(tmp_path, monkeypatch):
    steps = cp.ladder_steps()
    rates = {"3": 500.0, "4a": 550.0, "4b": 660.0, "4c": 693.0}
    rows = [_timed(steps[cp.position(n)], (4096,) * 3, g, "run-a") for n, g in rates.items()]
    _recording(rows, tmp_path, monkeypatch)
    lines = str(cp.step4_reading((4096,))).splitlines()
    assert not any("not in this recording" in l for l in lines)
    assert lines[1].startswith("4a. ") and "+10.0% as timed" in lines[1]
    assert lines[2].startswith("4b. ") and "+20.0% as timed" in lines[2]
    assert lines[3].startswith("4c. ") and "+5.0% as timed" in lines[3]
    assert lines[4].startswith("4c against 3, the three changes together: +38.6% as timed")
    # the variants' rows are found under their own names, and the table shows them
    table = cp.ladder_table((4096,), two_blocks_at=None)
    assert table[cp.position("4a")]["4096^3 GFLOP/s (% of cuBLAS)"] == "550 (55%)"
    assert table[cp.position("4b")]["4096^3 change"] == "+20.0%"
    records._LOADED.clear()


def test_rows_label_names_the_rows_own_gpu_runs_and_days():
    rec = records.Record(device={"name": "GPU X"}, created="2026-01-09T00:00:00Z", commit="c")
    one = [{"run": "a", "time": "2026-01-02T00:00:00Z"}, {"run": "a", "time": "2026-01-02T01:00:00Z"}]
    assert records.rows_label(one, rec) == "recorded on GPU X in one run, 2026-01-02"
    two = one + [None, {"run": "b", "time": "2026-01-05T00:00:00Z"}]
    assert records.rows_label(two, rec) == "recorded on GPU X in 2 runs, 2026-01-02 to 2026-01-05"
    assert records.rows_label([None], rec) == "no recorded rows"


def test_signed_never_prints_minus_zero():
    assert cp.signed(-0.04) == "+0.0%" and cp.signed(7.94) == "+7.9%" and cp.signed(None) == "-"


def test_the_ladder_and_its_yardsticks_come_from_one_run_and_say_whose(recorded_mode):
    rec = cp.ladder_recording()
    runs = {r["run"] for r in cp._ladder_rows() if r}
    assert len(runs) == 1
    for p in cp.minb_pairs():
        assert {r["run"] for r in p["rows"]} == runs
    name = rec.device["name"]
    assert f"recorded on {name} in one run" in cp.ladder_source()
    assert cp.ladder_source() in str(cp.yardsticks()) and cp.ladder_source() in str(cp.step_changes())
    start = str(cp.ladder_start())
    assert cp.ladder_source() in start and "worked answer" in start


def test_the_gpus_line_names_each_gpu_the_chapter_reads_once(recorded_mode):
    line = str(cp.gpus())
    assert "\n" not in line
    lad, shown = cp.ladder_recording().device["name"], records.current().device["name"]
    assert lad in line and shown in line
    if lad != shown:
        # only what the chapter uses: the DRAM peaks are read nowhere in it
        assert line.count(lad) == 1 and line.count(shown) == 1 and "GB/s" not in line

def test_the_step_profile_prints_times_to_the_hundredth_and_its_clock():
    """The profile's kernel times are written to 0.01 ms (0.1 ms would merge steps the
    ladder separates), beside the SM clock the profiler ran at: cycles over time."""
    t = cp.step_counters()
    if t[0]["warps resident, %"] is None:
        pytest.skip("the recording has no profile of the steps")
    from gemm_kernels.notebook import evidence
    raw = evidence.counters(
        cp.STEP_STALLS, {"ms": ("gpu__time_duration.sum", 1e6), "cycles": "sm__cycles_elapsed.avg"},
        rec=studies.complete_recording(cp.STEP_STALLS))
    for row, r in zip(t, raw):
        assert row["kernel time, ms"] == f"{r['ms']:.2f}"
        assert row["SM clock, MHz"] == f"{r['cycles'] / r['ms'] / 1e3:,.0f}"
    assert t.columns[-2:] == ["kernel time, ms", "SM clock, MHz"]


def test_the_step_profile_writes_each_column_at_one_precision():
    """Percentages to one decimal, waits to two, on every row: no 24% beside 23.8%."""
    t = cp.step_counters()
    if t[0]["warps resident, %"] is None:
        pytest.skip("the recording has no profile of the steps")
    for row in t._cells():
        for column, cell in zip(t.columns, row):
            if "%" in column:
                assert re.fullmatch(r"\d+\.\d%", cell), (column, cell)
            elif column in ("long scoreboard", "barrier", "short scoreboard"):
                assert re.fullmatch(r"\d+\.\d\d", cell), (column, cell)


def test_the_sass_tables_call_one_pass_of_the_loop_an_iteration():
    """The chapter's prose calls one pass of the main loop an iteration: the SASS tables
    and the copy-wait lines say the same, never 'trip'."""
    texts = [cp.step_sass(7).table.title, cp.minb_loops().table.title, cp.copy_waits()]
    assert "one iteration" in texts[0] and "one iteration" in texts[1]
    assert all("trip" not in x for x in texts)
    assert "on this machine" in texts[0]


def test_copy_waits_finds_the_stores_wait_in_step_3_and_none_in_4a():
    """Step 3's loop reads the registers its LDGs filled a few FFMAs later (at the STS);
    step 4a's loop has no LDG, and its one wait for the copies, the DEPBAR, comes most of
    a step after its last LDGSTS."""
    first, second, note = cp.copy_waits().splitlines()
    assert first.startswith("3. ") and "an STS" in first and "there the warp waits" in first
    assert second.startswith("4a. ") and "no LDG per iteration" in second
    ffma = int(re.search(r"\((\d+) FFMAs\) after the last", second).group(1))
    assert ffma > 256                         # more than half of the step's 512 FFMAs
    assert int(re.search(r"\((\d+) FFMAs\) after it", first).group(1)) < 16
    assert note.startswith("(main loops compiled by ptxas") and "on this machine" in note


def test_step_4a_gain_stands_beside_chapter_08s_answer_from_one_run(recorded_mode):
    text = str(cp.cp_async_against_prefetch())
    assert cp.ladder_source() in text
    assert "step 4a (cp.async copies) over step 3: +" in text
    assert "chapter 08's worked answer" in text and text.count("%") == 2


def test_minb2_builds_fit_under_the_cap_without_spills():
    """Every MINB = 2 build of the ladder, as ptxas here compiles it: at most 128
    registers (two blocks of 256 threads per SM) and no spill, so the ladder's second
    reading compares the steps, not local-memory traffic."""
    text = str(cp.minb2_fit()).splitlines()
    assert text[0].startswith("(ptxas ")
    steps = [r for r in cp.ladder() if r.has_minb]
    assert len(text) - 1 == len(steps)
    for line, r in zip(text[1:], steps):
        assert line.startswith(r.label)
        regs = int(line.split(": ")[-1].split()[0])
        assert regs <= 128 and line.endswith("no spills"), line
    printed = {r.label: line.split("MINB = 2: ")[1] for line, r in zip(text[1:], steps)}
    assert [row[cp.MINB2_FIT] for row in cp.ladder_table()] == \
        [printed.get(r.label, cp.AS_BUILT) for r in cp.ladder()]


def test_fit_names_spills_where_ptxas_reports_them(monkeypatch):
    fake = {"registers": 128, "spill_stores": 24, "spill_loads": 16, "stack_bytes": 40}
    monkeypatch.setattr(cp.compiler, "resources", lambda k, p: fake)
    assert cp.fit("capstone", {}) == ("128 registers, 24 bytes spill stores, "
                                      "16 bytes spill loads, 40 bytes stack")
    monkeypatch.setattr(cp.compiler, "resources", lambda k, p: {**fake, "spill_stores": 0,
                                                                 "spill_loads": 0,
                                                                 "stack_bytes": 0})
    assert cp.fit("capstone", {}) == "128 registers, no spills"


def test_rule_example_reads_a_step_as_the_step_lines_do():
    shift = cp.recompile_shift((2048,))[2048]
    for step in ("2", "7"):
        full = cp.ladder((2048,))
        r = full[cp.position(step)]
        c, _ = cp._step_change(r, full[r.index - 1], 2048)
        text = str(cp.rule_example(step))
        assert text.startswith(f"step {step} moved the rate by {cp.signed(c)} at 2048^3")
        assert f"±{shift:.1f}%" in text
        assert text.endswith(cp.short_verdict(cp.verdict([(2048, c)], {2048: shift})) + ".")


def test_rule_line_prints_the_largest_spread_and_the_thresholds(recorded_mode):
    text = str(cp.rule_line())
    source, *lines = text.splitlines()
    assert cp.ladder_source() in source and [l[:2] for l in lines] == ["1.", "2.", "3."]
    spread = max(cp._spread_pct(cp.cublas_spread([r.rows[n] for r in cp.ladder()]))
                 for n in (2048, 4096))
    assert f"at most {spread:.1f}%" in lines[0]
    for n, shift in cp.recompile_shift().items():
        assert f"{shift:.1f}% apart at {n}^3" in lines[0]
    # the worked number is step 2's change, read against the 2048^3 threshold
    full = cp.ladder((2048,))
    c, _ = cp._step_change(full[cp.position("2")], full[cp.position("2") - 1], 2048)
    assert f"step 2 moved the rate by {cp.signed(c)} at 2048^3" in lines[2]
    assert f"±{cp.recompile_shift()[2048]:.1f}%" in lines[2]


def test_rule_line_short_gives_the_thresholds_and_the_worked_number(recorded_mode):
    """The main path's form: the threshold at each size and step 2's reading, no MINB."""
    source, line = str(cp.rule_line(full=False)).splitlines()
    assert cp.ladder_source() in source and "MINB" not in line
    for n, shift in cp.recompile_shift().items():
        assert f"±{shift:.1f}% at {n}^3" in line
    assert str(cp.rule_example("2")) in line


def test_step4_code_shows_each_step_as_its_own_diff():
    one = cp.step4_code(("4b",))
    html = one._repr_html_()
    assert "Step 4b against step 4a" in html and "Step 4a against" not in html
    both = cp.step4_code()._repr_html_()
    assert "Step 4a against step 3" in both and "Step 4c against step 4b" in both


def test_stages_registers_match_the_stages_table_and_print_no_rate(recorded_mode):
    regs = cp.stages_registers()
    full = [row for row in cp.stages_table() if row["MINB"] == 1]
    assert [r["registers (timed)"] for r in regs] == [r["registers"] for r in full]
    assert [r["blocks/SM"] for r in regs] == [r["blocks/SM"] for r in full]
    assert not any("GFLOP" in c for c in regs.columns)
    assert cp.stages_registers(predict=True).columns == ["STAGES", "registers (timed)"]


def test_padding_reading_judges_by_the_same_gpus_recompile(recorded_mode):
    shift = cp.default_recompile(2048)
    assert f"{shift:+.1f}% at 2048^3" in cp.stages_reading()
    text = str(cp.padding_reading())
    assert "row-major lanes, PAD = 4" in text and "z-order lanes, PAD = 4" in text
    assert text.splitlines()[-1].endswith(cp.signed(shift))


def test_zorder_counters_name_the_ladder_step_of_each_layout():
    got = {(row["PAD"], row["ZORDER"]): row["ladder step"] for row in cp.zorder_counters()}
    assert got == {(0, False): "1", (0, True): "-", (4, False): "2", (4, True): "3"}


def test_step_listing_shows_every_32_bit_lds():
    """A scalar LDS in a main loop is never a fragment read: the listing shows it rather
    than folding it into a 'left out' count."""
    r = cp.ladder((4096,))[cp.position("7")]
    listing = cp.step_listing(r.kernel, r.step.params)
    assert not any("left out" in l and re.search(r"\bLDS x", l) for l in listing)


def test_the_capstone_default_is_marked_in_the_ladder():
    labels = [r.label for r in cp.ladder((4096,))]
    marked = [l for l in labels if "the capstone's default" in l]
    assert len(marked) == 1 and marked[0].startswith("7.")
    assert not any("the capstone, one fragment set" in l for l in labels)


def test_part_a_counts_match_the_bank_model_and_name_the_ladders_gpu():
    """Steps 0 to 3 as Nsight Compute counted them: one row per step in ladder order;
    where recorded, the load wavefronts per LDS.128 are the bank model's reads per k over
    the 4 LDS.128 of a k (20, 12, 12 and 8 wavefronts), and only step 0 has conflicts."""
    t = cp.part_a_counts()
    assert t.title.startswith("(Nsight Compute at 4096^3")
    assert t.title.endswith("short scoreboard in warp-cycles per issued instruction)")
    assert [r["step"].split(".")[0] for r in t] == ["0", "1", "2", "3"]
    if any(r["load wavefronts per LDS.128"] == cp.NOT_RECORDED for r in t):
        pytest.skip("the recording has no profile of part A")
    assert "NVIDIA H100" in t.title
    assert [float(r["load wavefronts per LDS.128"]) for r in t] == [5.0, 3.0, 3.0, 2.0]
    assert [float(r["of them conflicts"]) for r in t] == [2.0, 0.0, 0.0, 0.0]
    short = [float(r["short scoreboard"]) for r in t]
    assert short[1] < short[0]
    assert str(t).splitlines()[0] == t.title   # the caption the banner's days are read from


def test_minb_loops_set_the_two_builds_of_one_source_one_above_the_other():
    """The MINB code shift's two builds: the same work per trip (FFMA, LDS.128, copies,
    waits, barrier), the same blocks per SM, and a listing for each, MINB = 1 first."""
    s = cp.minb_loops()
    a, b = list(s.table)
    assert a["build"].endswith("MINB = 1") and b["build"].endswith("MINB = 2")
    for col in ("FFMA", "LDS.128", "LDGSTS", "LDGDEPBAR", "DEPBAR", "BAR", "blocks/SM"):
        assert a[col] == b[col]
    (t1, one), (t2, two) = s.listings
    assert "MINB = 1" in t1 and "MINB = 2" in t2
    assert sum("LDGSTS" in l for l in one) == a["LDGSTS"] == sum("LDGSTS" in l for l in two)
    # the MINB = 1 loop is step 7's, listed in part B: it can be left out here
    only = cp.minb_loops(listed=(2,))
    assert [t for t, _ in only.listings] == [t2] and only.listing == two
    assert list(only.table) == list(s.table)
    assert cp.step_sass(7).listing == one


def test_step7_choices_set_each_undone_choice_against_step_7_in_the_ladders_run():
    """Step 7 at BK = 8 and with one fragment set, each against step 7 itself, as built
    (with the registers and blocks per SM of each binary) and between the MINB = 2
    builds, read by the ladder's rule; nothing compared across runs."""
    lines = str(cp.step7_choices()).splitlines()
    assert lines[0] == f"(step 7 and two of its choices undone, {cp.ladder_source()})"
    assert lines[-1].startswith("the rule's threshold (the ladder's MINB code shift): ±")
    built = lines.index("as built (MINB = 1):")
    held = lines.index("built with MINB = 2 (two blocks per SM each):")
    rec = cp.ladder_recording()
    timed = {r["run"] for n in (2048, 4096) for _, r in
             cp.studies.results(cp.STEP7_CHOICES, (n,) * 3, rec) if r} == \
        {r["run"] for r in cp._ladder_rows() if r}
    if not timed:
        assert lines[built + 1] == lines[held + 1] == "  not timed in the ladder's run"
        return
    seven, bk8, one = lines[built + 1:held]
    assert seven.startswith("  step 7: 2048^3 ") and "/SM)" in seven
    for line, what in ((bk8, "at BK = 8"), (one, "with one fragment set")):
        assert line.startswith(f"  {what}: 2048^3 ") and "registers" in line
        assert line.rsplit(", ", 1)[1] in ("a gain", "a loss", "not credited",
                                           "within the code shift, not credited")
    assert all("registers" not in l for l in lines[held + 1:-1])


def test_built_with_is_the_minb_each_steps_source_asks_for():
    """The 'built with' column reads each build's PTX: chapter 08's kernel asks for no
    minimum (1), the z-order kernel and step 4a for two blocks, the capstone's steps for
    their MINB parameter (1 as built); a MINB = 2 build of a capstone step reads 2."""
    t = cp.step_changes()
    assert [row["built with"] for row in t] == \
        [f"MINB = {r.minb}" for r in cp.ladder()[1:]]
    minb = {r.number: r.minb for r in cp.ladder()}
    assert minb["0"] == 1 and all(minb[n] == 2 for n in ("1", "2", "3", "4a"))
    assert all(minb[n] == 1 for n in ("4b", "4c", "5", "6", "7", "8"))
    seven = cp.ladder()[cp.position(7)]
    assert cp.built_minb(seven.kernel, {**seven.step.params, "MINB": 2}) == 2
    # part A's table, without a MINB = 2 column, still says how each step was built
    assert cp.step_changes(steps=("1",)).columns[:2] == ["step", "built with"]


def test_step_changes_for_the_main_path_give_one_verdict_per_step():
    """two_blocks=False: no MINB = 2 column, no 'built with', one verdict (as timed), the
    same numbers and verdict as the full table's 'as built' half."""
    full, main = cp.step_changes(), cp.step_changes(two_blocks=False)
    assert main.columns == ["step", "blocks/SM", "2048^3", "4096^3", "verdict"]
    assert cp.ladder_source() in main.title and cp._RULE in main.title
    for f, m, r in zip(full, main, cp.ladder()[1:]):
        assert m["step"] == f["step"] and m["blocks/SM"] == r.blocks
        assert m["2048^3"] == f["2048^3"] and m["4096^3"] == f["4096^3"]
        assert m["verdict"] in ("gain", "loss", "not credited", "-")
        assert m["verdict"] == f["verdict"].split(" / ")[0]
    assert [m["step"] for m in cp.step_changes(steps=("4c", "5"), two_blocks=False)] == \
        [r.label for r in cp.ladder() if r.number in ("4c", "5")]


def test_step_changes_without_minb2_builds_has_no_minb2_column():
    t = cp.step_changes(steps=("1", "2", "3"))
    assert all(not any(k.startswith("MINB = 2") for k in row) for row in t)
    assert any(k.startswith("MINB = 2") for k in cp.step_changes(steps=("4b",))[0])


def test_warp_tile_code_is_the_kernels_own_index_lines():
    """The lines printed beside the warp-tile picture come from the capstone's source:
    the lane's place in the z-order grid, then the warp region's first row and column."""
    text = str(cp.warp_tile_code())
    assert "09_capstone.cu" in text
    body = [ln for ln in text.splitlines() if "=" in ln]
    assert any("qr =" in ln for ln in body) and any("qc =" in ln for ln in body)
    assert "am = (warp / WARPS_N) * WM + 4 * qr" in text
    assert "bn = (warp % WARPS_N) * WN + 4 * qc" in text
    assert "16*i" in text and "32*j" in text


def test_the_gpus_line_gives_the_days_its_captions_give(recorded_mode):
    """The banner's days for the ladder and for the profiles are those that the ladder's
    tables and the two profiles' captions print, so a student who checks finds them."""
    import re
    line = str(cp.gpus())
    day = re.compile(r"\d{4}-\d\d-\d\d")
    captions = [str(cp.part_a_counts()).splitlines()[0], cp.step_counters().title,
                str(cp.step_changes().title)]
    for caption in captions:
        for d in day.findall(caption):
            assert d in line, (d, caption)
    if day.findall(captions[0]) != day.findall(captions[2]):
        assert "the steps' profiles" in line


def test_h200_rule_names_the_gpu_and_its_own_threshold():
    """The threshold printed is that GPU's own MINB code shift, the one the stages
    reading quotes, at both sizes."""
    line = str(cp.h200_rule())
    assert line.startswith("This section only: recorded on ")
    # the days printed are the threshold's own, not the section's
    assert "names its own runs" in line and "on that GPU, in " in line
    for n in (4096, 2048):
        assert f"±{abs(cp.default_recompile(n)):.1f}% at {n}^3" in line


def test_best_per_depth_is_the_fastest_ranked_row_with_its_timed_registers(recorded_mode):
    """Each row is tradeoff's fastest configuration of its depth, and its registers and
    blocks per SM are those of the binary that was timed (the solution reads depth
    against occupancy from them)."""
    from gemm_kernels.measure import lookup, tradeoff
    t = cp.best_per_depth((4096,))
    assert [r["STAGES"] for r in t] == [2, 3, 4]
    for r in t:
        c, g = tradeoff.ranked("capstone", 4096, fixed={"STAGES": r["STAGES"]})[0]
        row = lookup.recorded("capstone", (4096,) * 3, c)
        assert r["registers"] == row["binary"]["registers"]
        assert r["blocks/SM"] == cp._row_blocks("capstone", row)
        assert r["GFLOP/s"] == cp.count(g) and r["MINB"] == c["MINB"]


def test_the_a_copy_padding_prices_both_row_lengths():
    """Why the capstone keeps the pad: lane 8 * row + k writes word k * LDA + m, so rows
    of 128 floats put 8 lanes on each of 4 banks, rows of 132 spread them over 32."""
    line = str(cp.a_copy_padding())
    assert "1 into rows of 132 floats (as built), 8 into rows of 128 (no pad)" in line, line


def test_ring_bytes_prints_the_registrys_bytes_and_says_when_the_launch_must_raise_its_limit():
    k = KERNELS["capstone"]
    d = k.resolve(None)
    text = cp.ring_bytes()
    assert f"{k.dynamic_bytes({**d, 'STAGES': 1}):,} bytes" in text
    assert f"{d['STAGES']} stages: {k.dynamic_bytes(d):,} bytes" in text
    assert k.dynamic_bytes(d) > device.limits()["smem_per_block"]
    assert "must raise the kernel's limit" in text
    small = {"STAGES": 2, "BK": 8}
    assert k.dynamic_bytes(k.resolve(small)) <= device.limits()["smem_per_block"]
    assert "no raise is needed" in cp.ring_bytes(small)


def test_capstone_at_a_glance_gathers_the_default_the_static_analysis_and_the_ladders_rates():
    from gemm_kernels.core import analysis
    from gemm_kernels.measure import lookup
    d = KERNELS["capstone"].resolve(None)
    text = cp.capstone_at_a_glance()
    occ = analysis.kernel_occupancy("capstone", d)
    assert f"{d['BM']} x {d['BN']} x {d['BK']}" in text
    assert f"WM x WN = {d['WM']} x {d['WN']}" in text
    assert f"STAGES = {d['STAGES']}" in text and f"MINB = {d['MINB']}" in text
    assert (f"{occ.registers_per_thread} registers, {occ.smem_per_block:,} bytes of shared "
            f"memory per block: {occ.blocks_per_sm} blocks per SM") in text
    row = lookup.recorded("capstone", (2048,) * 3, d, rec=cp.ladder_recording())
    assert f"{row['gflops']['median']:,.0f} ({lookup.share(row):.0f}%) at 2048^3" in text


def test_chapter_and_solution_print_the_same_ptxas_registers_for_each_stage_depth():
    """The chapter's F.1 answer and the solution's 2048^3 table call the same function;
    their saved 'ptxas here' columns must agree (a stale output would not)."""
    import json
    from pathlib import Path
    root = Path(__file__).resolve().parents[1] / "notebooks"

    def column(path):
        for cell in json.loads(path.read_text())["cells"]:
            for out in cell.get("outputs", []):
                html = "".join(out.get("data", {}).get("text/html", ""))
                if "the capstone&#x27;s default with 2, 3 or 4 stages" in html or \
                        "the capstone's default with 2, 3 or 4 stages" in html:
                    if " here</th>" in html and "against the default" in html:
                        return re.findall(r"<td>(\d+: \d blocks?/SM)</td>", html)
        return None

    chapter = column(root / "09_zorder_capstone.ipynb")
    solution = column(root / "solutions" / "09_solution.ipynb")
    assert chapter and solution and chapter == solution


def test_zorder_wrong_mapping_prices_a_mapping_as_the_grader_does():
    from gemm_kernels.exercises.ch09_checks import _assignments
    wrong = cp.zorder_wrong_mapping()
    assert "grader: the A read" in wrong and "passes" not in wrong
    right = _assignments(KERNELS["zorder"].source_text())
    assert cp.zorder_wrong_mapping(*right).endswith("grader: passes the bank model")


def test_each_answer_of_the_chapter_renders_folded():
    """Every named answer is a <details> with a summary, and its text stays out of the
    notebook: the cells that show an answer only call `answer`."""
    assert set(cp.ANSWER_NAMES) == {"zorder", "4c", "pipeline", "stages"}
    for name in cp.ANSWER_NAMES:
        html = cp.answer(name)._repr_html_()
        assert html.startswith("<details><summary><b>") and html.endswith("</details>")
    assert "STAGES - 2" in repr(cp.answer("pipeline"))
    with pytest.raises(KeyError):
        cp.answer("no such answer")


def test_the_chapters_code_cells_hold_no_answer_text():
    """The answers live in the package: no code cell of the student notebook spells the
    wait's count or an answer's words, except the exercise cells the student edits."""
    import json
    from pathlib import Path
    nb = json.loads((Path(__file__).parents[1] / "notebooks/09_zorder_capstone.ipynb").read_text())
    code = ["".join(c["source"]) for c in nb["cells"]
            if c["cell_type"] == "code" and not "".join(c["source"]).startswith("%%exercise")]
    assert sum('cp.answer("' in s for s in code) == 4
    for s in code:
        assert "Reveal(" not in s and "STAGES - 2" not in s and "DEPBAR.LE SB0, 0x" not in s


def test_minb_reason_reads_the_defaults_two_builds(recorded_mode):
    got = [p for p in cp.minb_pairs() if p["configuration"] == "the default"]
    text = str(cp.minb_reason())
    if len(got) != 2:
        assert cp.NOT_RECORDED in text
        return
    assert f"{got[0]['registers'][0]} / {got[0]['registers'][1]} registers" in text
    for p in got:
        assert f"{cp.signed(p['change'])} at {p['size']}^3" in text
    assert cp.ladder_source() in text


def test_the_capstone_listing_is_the_whole_kernel_to_its_epilogue_folded():
    f = cp.capstone_listing()
    text = str(f.inner)
    for line in ("issue_next = [&](int stage)", "issue_first();", "cp_async_wait<STAGES - 2>();",
                 "for (int tile = 0; tile < tiles; ++tile)", "float fa[2][TM], fb[2][TN];",
                 "issue_tile(s, s)", "auto issue_tile = [&](int tile, int stage)"):
        assert line in text
    # every name the copies use is defined in the listing itself
    for name in ("a_m", "a_k", "a_off", "b_col", "A_PER", "B_PER", "A_STAGE", "B_STAGE", "LDA"):
        assert re.search(rf"\b{name}( = |\[A_PER\];)", text), name
    # the epilogue is left to the file, and the listing is folded
    assert "gemm_epilogue" not in text and "<details>" in f._repr_html_()


def test_the_ffma_share_has_one_decimal():
    share = cp._loop_counts("capstone", cp.KERNELS["capstone"].resolve(None))["FFMA share"]
    assert re.fullmatch(r"\d+\.\d%", share)


def test_rule_line_names_the_spread_beside_the_minb2_builds(recorded_mode):
    rungs = cp.ladder()
    held = [cp._spread_pct(cp.cublas_spread([r.held[n] for r in rungs if r.has_minb]))
            for n in (2048, 4096)]
    if any(h is None for h in held):
        pytest.skip("no MINB = 2 builds recorded")
    assert f"({max(held):.1f}% beside the MINB = 2 builds)" in str(cp.rule_line())
