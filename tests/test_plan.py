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
