"""Chapter 12's plan without a GPU: slices never leave one empty, the waves arithmetic,
the candidates, the model's choice and its fit (recovering known constants), the
fallbacks, and sgemm's refusals before anything runs."""
import json

import pytest

from gemm_kernels.core import device
from gemm_kernels.core.kernels import SPLITS, get, slices
from gemm_kernels.core.registry import ceil_div
from gemm_kernels.plan import choose, model, waves


def _kernel_ranges(K, BK, z):
    """split_k_range (cuda/split_k.cuh) in Python: each slice's (begin, length)."""
    per = ceil_div(ceil_div(K, BK), z)
    out = []
    for i in range(z):
        begin = min(K, i * per * BK)
        out.append((begin, min(K, begin + per * BK) - begin))
    return out


@pytest.mark.parametrize("BK", [8, 16, 128])
def test_every_slice_has_work_and_the_slices_cover_k(BK):
    for K in list(range(1, 400)) + [4095, 65536, 65537]:
        for s in SPLITS:
            z = slices(ceil_div(K, BK), s)
            assert 1 <= z <= s
            r = _kernel_ranges(K, BK, z)
            assert all(n > 0 for _, n in r), (K, s, r)
            assert sum(n for _, n in r) == K and r[0][0] == 0
            assert all(b + n == r[i + 1][0] for i, (b, n) in enumerate(r[:-1]))


def test_waves_and_the_filled_share():
    assert waves.tiles((1024, 1024, 7), 128, 128) == 64
    assert waves.tiles((1025, 1, 7), 128, 128) == 9
    assert waves.waves(64, 264) == 1 and waves.waves(265, 264) == 2
    assert waves.filled(264, 264) == 1.0
    assert waves.filled(265, 264) == pytest.approx(265 / 528)


def test_candidates_leave_every_slice_four_steps():
    c = choose.candidates((256, 256, 65536))
    assert (128, 128, 64) in c and (64, 64, 1) in c
    short = choose.candidates((256, 256, 100))       # 7 steps of 16: no split
    assert {s for _, _, s in short} == {1}


def _rules(**over):
    tiles = {model.tile_name(BM, BN): {"registers": 127, "c0_us": 5.0,
                                         "c1_us_per_mfma": 1e-5 * (BM * BN / 16384) ** -0.1}
             for BM, BN in model.TILES}
    d = dict(device="Test GPU", sm_count=132, tiles=tiles, gamma=0.5, reduce_us=3.0,
             bandwidth_gbps=3000.0, gemv_warps_per_sm=32,
             gemv_warps={"rows": 8, "cols": 32}, provenance={})
    d.update(over)
    return model.Rules(**d)


def test_few_tiles_and_a_long_k_get_a_split(monkeypatch):
    monkeypatch.setattr(model, "load", lambda: _rules())
    p = choose.plan((256, 256, 65536))
    assert p.kernel == "capstone_split" and p.params["SPLIT"] > 1
    assert choose.plan((8192, 8192, 128)).params["SPLIT"] == 1
    assert choose.plan((1, 4096, 4096)).kernel == "gemv"
    assert choose.plan((4096, 1, 4096)).kernel == "gemv"


def test_the_gemv_split_fills_the_sms(monkeypatch):
    monkeypatch.setattr(model, "load", lambda: _rules(gemv_warps_per_sm=32))
    k = get("gemv")
    p = choose.plan((1, 4096, 4096))
    assert p.params["WARPS"] == 32 and choose.plan((4096, 1, 4096)).params["WARPS"] == 8
    assert model.gemv_warps(k, p.params, (1, 4096, 4096)) >= 32 * 132
    half = dict(p.params, SPLIT=p.params["SPLIT"] // 2)
    assert model.gemv_warps(k, half, (1, 4096, 4096)) < 32 * 132


def test_the_fit_takes_each_gemv_paths_fastest_block_size():
    props = {"name": "Test GPU", "compute_capability": "9.0", "sm_count": 132}
    k = get("gemv")
    rows = []
    for shape, fast in (((1, 3000, 3000), 32), ((1, 500, 20000), 32), ((3000, 1, 3000), 8)):
        for p in k.valid_configurations():
            gf = 100.0 + (50 if p["WARPS"] == fast else 0) + (10 if p["SPLIT"] == 8 else 0)
            rows.append({"kernel": "gemv", "shape": list(shape), "params": p,
                         "gflops": {"median": gf}, "binary": {"registers": 32}, "run": "r"})
    for s in ((384, 384, 128), (1280, 1280, 2560)):
        for BM, BN in model.TILES:
            rows.append({"kernel": "capstone_split", "shape": list(s),
                         "params": {"BM": BM, "BN": BN, "SPLIT": 1},
                         "gflops": {"median": 1000.0 + BM}, "binary": {"registers": 127},
                         "run": "r"})
    fitted = model.fit(rows, props, 3000.0, ["r"])
    assert fitted["gemv_warps"] == {"rows": 8, "cols": 32}
    best = [k.resolve({"SPLIT": 8, "WARPS": w}) for w in (32, 32, 8)]
    warps = sorted(model.gemv_warps(k, p, s) / 132 for p, s in
                   zip(best, ((1, 3000, 3000), (1, 500, 20000), (3000, 1, 3000))))
    assert fitted["gemv_warps_per_sm"] == max(1, round(warps[1]))


def test_no_cp_async_means_the_fallback(monkeypatch):
    monkeypatch.setattr(choose, "runnable", lambda k: (False, "no cp.async"))
    assert choose.plan((512, 512, 512)).kernel == choose.FALLBACK
    assert choose.plan((1, 512, 512)).kernel == "gemv"


def test_without_rules_the_defaults(monkeypatch):
    monkeypatch.setattr(model, "load", lambda: None)
    p = choose.plan((300, 300, 300))
    assert p.kernel == "capstone_split" and p.params == get("capstone_split").defaults()


@pytest.mark.parametrize("bad", [(0, 5, 5), (5, 5), (2.0, 3, 4), "4x4x4"])
def test_bad_shapes_are_refused_before_anything(bad):
    with pytest.raises(ValueError):
        choose.plan(bad)


def test_the_fit_recovers_known_constants():
    truth = _rules()
    lim = device.limits_for("sm_90")
    props = {"name": "Test GPU", "compute_capability": "9.0", "sm_count": 132}
    rows = []
    for s in [(m, m, k) for m in (384, 1280, 4608) for k in (128, 2560, 10240)]:
        for BM, BN in model.TILES:
            for split in (1, 4):
                t = model.predict_us(truth, s, BM, BN, split, sm_count=132, limits=lim)
                rows.append({"kernel": "capstone_split", "shape": list(s),
                             "params": {"BM": BM, "BN": BN, "SPLIT": split},
                             "gflops": {"median": 2 * s[0] * s[1] * s[2] / (t * 1e3)},
                             "binary": {"registers": 127}, "run": "r"})
    fitted = model.fit(rows, props, 3000.0, ["r"])
    for name, c in truth.tiles.items():
        assert fitted["tiles"][name]["c0_us"] == pytest.approx(c["c0_us"], rel=1e-6)
        assert fitted["tiles"][name]["c1_us_per_mfma"] == pytest.approx(
            c["c1_us_per_mfma"], rel=1e-6)
    assert fitted["reduce_us"] == pytest.approx(3.0, rel=1e-6)
    assert fitted["gamma"] == 0.5
    rows[0]["gflops"]["median"] *= 2      # the fit answers the rows, not a stored truth
    assert model.fit(rows, props, 3000.0, ["r"])["tiles"] != fitted["tiles"]


def test_sgemm_refuses_bad_input_before_the_gpu():
    np = pytest.importorskip("numpy")
    pytest.importorskip("cupy")
    a = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match="cupy.ndarray"):
        choose.sgemm(a, a)
    with pytest.raises(ValueError, match="beta"):
        choose.sgemm(a, a, beta=1.0)


def test_committed_rules_name_recorded_runs():
    from gemm_kernels.measure import records
    files = sorted(model.RULES_DIR.glob("*.json"))
    assert files, "no fitted rules in the package"
    for f in files:
        r = json.loads(f.read_text())
        rec = records.load(records.DATA_DIR / f"{records.slug(r['device'])}.json")
        assert rec is not None, f"{f.name}: no recording of {r['device']}"
        assert set(r["provenance"]["runs"]) <= set(rec.runs), f"{f.name}: runs not recorded"
        assert r["provenance"]["rows"] > 0
        assert set(r["tiles"]) == {model.tile_name(BM, BN) for BM, BN in model.TILES}


def test_sgemm_is_one_short_name_away():
    import gemm_kernels as gk
    assert gk.sgemm is choose.sgemm and "sgemm" in gk.__all__


# ------------------------------------------------------------- B padded (N % 4 != 0)

def test_padded_b_is_chosen_by_the_shape_and_changes_only_ragged_n():
    k = get("capstone_split")
    pad = k.resolve({"BM": 64, "BN": 128, "PAD_B": True})
    assert k.padded_b(pad, (4097, 1023, 515)) == 1024
    assert k.padded_b(pad, (4096, 1024, 515)) is None          # already aligned
    assert k.padded_b(k.resolve({"PAD_B": False}), (4097, 1023, 515)) is None
    ragged = k.name_expression(pad, (4097, 1023, 515))
    assert ragged.endswith("false, true>")                     # VEC off, PAD_B on
    # at N % 4 == 0 the flag is ignored: the same instantiation as without it
    assert k.name_expression(pad, (4096, 1024, 515)) == \
        k.name_expression(k.resolve({"BM": 64, "BN": 128}), (4096, 1024, 515))


def test_the_padded_kernel_reads_b_with_its_padded_stride():
    import re
    code = get("capstone_split").code
    # every B address of the kernel uses LDB (the slice's start, the two first-tile
    # sources, the hoisted pointer, its step and the rows between copies); N remains a
    # row stride only in C's addresses
    assert code.count("* LDB") == 6 and "B_STEP * LDB" in code
    assert all("C" in line for line in code.splitlines() if re.search(r"\* N\b", line))
    assert "const int LDB = PAD_B ? (N + 3) / 4 * 4 : N;" in code
    assert "cp_async_16" in code and code.count("if constexpr (VEC || PAD_B) cp_async_16") == 3


def test_the_model_charges_the_copy_and_uses_the_padded_registers():
    r = _rules(pad_ragged_b=True)
    lim = device.limits_for("sm_90")
    ragged = (4097, 1023, 515)
    plain = model.predict_us(r, ragged, 64, 128, 1, sm_count=132, limits=lim, padded=False)
    padded = model.predict_us(r, ragged, 64, 128, 1, sm_count=132, limits=lim, padded=True)
    vec = model.predict_us(r, (4097, 1024, 515), 64, 128, 1, sm_count=132, limits=lim)
    # padded: the vector build's registers (more blocks per SM than the scalar one here)
    # plus the copy; the rules' choice is the default
    assert padded == pytest.approx(vec + model.copy_us(r, ragged))
    assert model.predict_us(r, ragged, 64, 128, 1, sm_count=132, limits=lim) == padded
    assert plain != padded
    assert model.copy_us(r, ragged) > r.reduce_us
    assert not model.pads(r, (4096, 1024, 515)) and model.pads(r, ragged)
    assert not model.pads(_rules(), ragged)


def test_the_plan_pads_b_only_where_the_rules_say(monkeypatch):
    monkeypatch.setattr(model, "load", lambda: _rules(pad_ragged_b=True))
    p = choose.plan((4097, 1023, 515))
    assert p.params["PAD_B"] and "B padded" in str(p)
    assert not choose.plan((4096, 1024, 515)).params["PAD_B"]
    monkeypatch.setattr(model, "load", lambda: _rules(pad_ragged_b=False))
    assert not choose.plan((4097, 1023, 515)).params["PAD_B"]


def _ragged_rows(pad_time: float, plain_time: float, shapes=((3001, 999, 1500), (700, 2003, 700))):
    rows = []
    for s in shapes:
        for BM, BN in model.TILES:
            for pad, t in ((True, pad_time), (False, plain_time)):
                rows.append({"kernel": "capstone_split", "shape": list(s),
                             "params": {"BM": BM, "BN": BN, "SPLIT": 1, "PAD_B": pad},
                             "gflops": {"median": 2 * s[0] * s[1] * s[2] / (t * 1e3)},
                             "binary": {"registers": 120 if pad else 150}, "run": "r"})
    return rows


_PROPS = {"name": "Test GPU", "compute_capability": "9.0", "sm_count": 132}


def _square_rows():
    """Calibration rows of every tile at two squares without a split (a fit needs them)."""
    return [{"kernel": "capstone_split", "shape": [m, m, 1024],
             "params": {"BM": BM, "BN": BN, "SPLIT": 1},
             "gflops": {"median": 1000.0 + m}, "binary": {"registers": 127}, "run": "r"}
            for m in (384, 1280) for BM, BN in model.TILES]


def test_the_fit_pads_when_the_padded_rows_were_faster():
    props, square = _PROPS, _square_rows()
    faster = model.fit(square + _ragged_rows(90.0, 100.0), props, 3000.0, ["r"])
    assert faster["pad_ragged_b"] and faster["provenance"]["padded_b_faster"] == "8 of 8"
    assert faster["tiles"]["64x128"]["registers_padded"] == 120
    assert faster["tiles"]["64x128"]["registers_scalar"] == 150
    slower = model.fit(square + _ragged_rows(110.0, 100.0), props, 3000.0, ["r"])
    assert not slower["pad_ragged_b"] and slower["provenance"]["padded_b_faster"] == "0 of 8"
    # rules fitted before the padded path read as "never pad"
    old = {**faster}
    del old["pad_ragged_b"]
    assert model.Rules.from_dict(old).pad_ragged_b is False


def test_the_calibration_times_the_padded_path_at_its_ragged_shapes():
    from gemm_kernels.plan.calibrate import calibration_runs
    padded = [(p, s) for n, p, s in calibration_runs() if p.get("PAD_B")]
    assert padded and all(s[1] % 4 for _, s in padded)
    assert {(p["BM"], p["BN"]) for p, _ in padded} == set(model.TILES)


# ------------------------------------------------------- streaming loads of the gemv

def _gemv_rows(stream_gf: float, plain_gf: float):
    shapes = ((1, 3000, 3000), (1, 12000, 1500), (3000, 1, 3000))
    return [{"kernel": "gemv", "shape": list(s), "params": {"SPLIT": 8, "WARPS": 32, "STREAM": st},
             "gflops": {"median": stream_gf if st else plain_gf}, "binary": {"registers": 32},
             "run": "r"} for s in shapes for st in (True, False)]


def test_the_fit_streams_where_streaming_was_faster_on_the_m1_path():
    assert model.streaming_wins(_gemv_rows(900.0, 800.0)) == (2, 2)   # N == 1 not counted
    assert model.streaming_wins(_gemv_rows(700.0, 800.0)) == (0, 2)
    props, square = _PROPS, _square_rows()
    fitted = model.fit(square + _gemv_rows(900.0, 800.0), props, 3000.0, ["r"])
    assert fitted["gemv_stream"] and fitted["provenance"]["gemv_streaming_faster"] == "2 of 2"
    assert not model.fit(square + _gemv_rows(700.0, 800.0), props, 3000.0, ["r"])["gemv_stream"]


def test_the_gemv_streams_only_on_the_m1_path_and_only_if_the_rules_say(monkeypatch):
    monkeypatch.setattr(model, "load", lambda: _rules(gemv_stream=True))
    cols, rows = choose.plan((1, 4096, 4096)), choose.plan((4096, 1, 4096))
    assert cols.params["STREAM"] and "streaming loads" in str(cols)
    assert not rows.params["STREAM"] and "streaming" not in str(rows)
    k = get("gemv")
    assert k.name_expression(cols.params, (1, 4096, 4096)).endswith("true>")
    assert k.name_expression({"STREAM": True}, (4096, 1, 4096)).endswith("false>")
    monkeypatch.setattr(model, "load", lambda: _rules(gemv_stream=False))
    assert not choose.plan((1, 4096, 4096)).params["STREAM"]
