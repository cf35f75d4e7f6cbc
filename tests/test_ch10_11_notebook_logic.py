"""Package logic behind notebooks 10 and 11: the launch-wide bank-count model
(gemm_kernels.bank_counts), the bandwidth table (gemm_kernels.bandwidth) and
ladder.compare with the DGEMM reference. CPU only."""
import re
from collections import Counter

import pytest

from gemm_kernels import analysis, bandwidth, compiler, ladder, records
from gemm_kernels.memory import ch10_11_instructions as bc
from gemm_kernels.core.kernels import get

from conftest import stamp

FAMILIES = ("LDS", "STS")


def _sass_counts(name, params, loop):
    k = get(name)
    s = compiler.sass(k, k.resolve(params))
    ins = analysis.main_loop(s) if loop else analysis.instructions(s)
    return {f: n for f, n in Counter(f for _, f, _ in ins).items() if f.startswith(FAMILIES)}


# ------------------------------------------------------------------ model vs SASS

@pytest.mark.parametrize("name", bc.TILE_KERNELS)
@pytest.mark.parametrize("T", ["float", "double"])
def test_tile_kernels_model_matches_sass(name, T):
    # Fully unrolled stride loops (TILE/ROWS <= 16): the same instructions, one for one.
    # Longer loops stay rolled in SASS; the widths must still agree. (A sample of ROWS
    # keeps the compile time of this test short.)
    for c in get(name).valid_configurations():
        if c["T"] != T or c["ROWS"] not in (1, 8):
            continue
        model, sass = bc.instruction_counts(name, c), _sass_counts(name, c, False)
        if c["TILE"] // c["ROWS"] * c.get("STACK", 1) <= 16:   # stores per thread
            assert model == sass, c
        else:
            assert set(model) == set(sass), c


def test_fast_model_matches_sass_where_it_applies():
    checked = 0
    for c in get("transpose_fast").valid_configurations():
        if c["ROWS"] != 8:
            continue
        try:
            model = bc.instruction_counts("transpose_fast", c)
        except ValueError as e:
            assert "PAD" in str(e)
            continue
        vec = c["VEC_BYTES"] // {"float": 4, "double": 8}[c["T"]]
        sass = _sass_counts("transpose_fast", c, False)
        # vec > 1: the SASS holds the vector path and the scalar edge path, each with
        # the same shared accesses; vec == 1: only the scalar path exists.
        assert sass == ({f: 2 * n for f, n in model.items()} if vec > 1 else model), c
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("name", ["dgemm_tiled", "sgemm_tiled_vec"])
def test_gemm_model_matches_inner_loop(name):
    for c in get(name).valid_configurations():
        model, sass = bc.instruction_counts(name, c), _sass_counts(name, c, True)
        # ptxas may unroll the K loop once more (two tiles per iteration): proportional
        ratio = {sass[f] / model[f] for f in model} if set(model) == set(sass) else None
        assert ratio is not None and len(ratio) == 1 and ratio.pop() in (1, 2), (c, model, sass)


def test_dgemm_as_emitted_fuses_a_into_lds128():
    k = get("dgemm_tiled")
    loop = "\n".join(t for _, _, t in analysis.main_loop(compiler.sass(k, {})))
    assert re.search(r"LDS\.128", loop) and re.search(r"LDS\.64", loop)
    assert bc.instruction_counts("dgemm_tiled", {}) == {"STS.64": 2, "LDS.128": 8, "LDS.64": 16}


# ------------------------------------------------------------------ predictions

def test_transpose_smem_float_is_32_way():
    p = bc.predict("transpose_smem", {"T": "float"}, (2048, 2048))
    blocks, warps, iters = 64 * 64, 8, 4
    assert p["ld wavefronts"] == blocks * warps * iters * 32
    assert p["ld conflicts"] == blocks * warps * iters * 31
    assert p["st wavefronts"] == blocks * warps * iters and p["st conflicts"] == 0


def test_padding_removes_conflicts_float_and_double():
    for T, per in (("float", 1), ("double", 2)):
        p = bc.predict("transpose_padded", {"T": T, "PAD": 1}, (2048, 2048))
        assert p["ld conflicts"] == 0 and p["st conflicts"] == 0
        assert p["ld wavefronts"] == 64 * 64 * 8 * 4 * per


def test_double_pad2_conflicts_but_pad1_does_not():
    # pitch 34 doubles = 68 words: lanes 8 apart meet in one bank again
    assert bc.predict("transpose_padded", {"T": "double", "PAD": 2}, (2048, 2048))["ld conflicts"] > 0
    assert bc.predict("transpose_padded", {"T": "double", "PAD": 1}, (2048, 2048))["ld conflicts"] == 0


def test_diagonal_has_the_same_shared_traffic_as_padded():
    for T in ("float", "double"):
        assert bc.predict("transpose_diagonal", {"T": T}) == bc.predict("transpose_padded", {"T": T})


def test_copy_smem_conflict_free():
    p = bc.predict("copy_smem", {})
    assert p["ld conflicts"] == p["st conflicts"] == 0


def test_fast_float_32x8_is_conflict_free():
    # the configuration the kernel's comment works through: a warp is 8 x 4 threads
    p = bc.predict("transpose_fast", {"T": "float", "TILE": 32, "ROWS": 8, "PAD": 1})
    assert p["ld conflicts"] == 0 and p["st conflicts"] == 0


def test_fast_declines_pad0_vectors():
    with pytest.raises(ValueError, match="PAD=0"):
        bc.block_accesses("transpose_fast", {"PAD": 0})


def test_dgemm_prediction_at_profile_shape():
    # 1024^3, BLOCK 16: 64x64 blocks, 64 steps, 8 warps; per warp and step:
    # 8 LDS.128 (A, broadcast, one merged phase per half-warp: 2 wf) and 16 LDS.64 (B, 2 wf)
    p = bc.predict("dgemm_tiled", {})
    n = 64 * 64 * 64 * 8
    assert p["ld wavefronts"] == n * (8 * 2 + 16 * 2)
    assert p["ld conflicts"] == 0
    assert p["st wavefronts"] == n * 2 * 2
    # as written: 16 LDS.64 for A. Every lane reads the same address as lane i^1, so
    # the two half-warps merge into one phase, which then asks bank pair (2k, 2k+1)
    # for two words (rows ty and ty+1): 2 wavefronts, one counted as a conflict
    w = bc.predict("dgemm_tiled", {}, as_written=True)
    assert w["ld wavefronts"] == n * (16 * 2 + 16 * 2) and w["ld conflicts"] == n * 16


def test_dgemm_block8_b_reads_conflict_free():
    # BLOCK 8: a half-warp holds two rows of 8 threads; B_shared[k][tx] is 8 words x 2
    # rows reading the same 8 doubles: broadcast, no conflict
    assert bc.predict("dgemm_tiled", {"BLOCK": 8})["ld conflicts"] == 0


@pytest.mark.parametrize("vec,per_load", [(1, 1), (2, 2), (4, 4)])
def test_sgemm_vec_b_load_phases(vec, per_load):
    acc = [a for a in bc.block_accesses("sgemm_tiled_vec", {"VEC": vec})
           if a.warp == 0 and a.what.startswith("B_shared[0]")]
    assert len(acc) == 1 and acc[0].width == 4 * vec
    an = acc[0].analysis
    assert an.wavefronts == per_load and an.conflicts == 0


def test_repeats_rejects_partial_tiles():
    with pytest.raises(ValueError, match="whole tiles"):
        bc.predict("transpose_padded", {}, (8191, 4097))
    with pytest.raises(ValueError, match="whole tiles"):
        bc.predict("sgemm_tiled_vec", {"VEC": 4, "BLOCK": 16}, (1024, 1000, 1024))


def test_unknown_kernel_and_bad_params():
    with pytest.raises(ValueError, match="no shared-memory model"):
        bc.block_accesses("transpose_naive", {})
    with pytest.raises(ValueError, match="ROWS"):
        bc.block_accesses("transpose_padded", {"TILE": 16, "ROWS": 32})


def test_per_instruction_table_is_deterministic_and_groups():
    t = bc.per_instruction([("transpose_smem", {}), ("transpose_padded", {})])
    smem_ld = [r for r in t if r["kernel"] == "transpose_smem" and r["op"] == "ld"]
    assert len(smem_ld) == 1 and smem_ld[0]["count"] == 4 and smem_ld[0]["wavefronts"] == 32
    assert repr(t) == repr(bc.per_instruction([("transpose_smem", {}), ("transpose_padded", {})]))


def test_comparison_without_counters(monkeypatch):
    monkeypatch.setattr(records, "_LOADED", {"record": None})
    t = bc.comparison([("transpose_smem", {}), ("dgemm_tiled", {})])
    assert t[0]["ld wf ncu"] is None and t[0]["ld wf model"] == 4194304
    assert bc.agreement(t) == []


def test_comparison_and_agreement_with_a_recording(monkeypatch):
    from gemm_kernels import profile
    pred = bc.predict("transpose_smem", {})
    metrics = {profile.SHARED[0]: pred["ld wavefronts"] + 5, profile.SHARED[1]: pred["st wavefronts"],
               profile.SHARED[2]: pred["ld conflicts"] + 5, profile.SHARED[3]: 0}
    row = {"chapter": "10", "kernel": "transpose_smem", "params": get("transpose_smem").resolve({}),
           "shape": [2048, 2048], "metrics": metrics}
    rec = records.Record({"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc", stamp([row]))
    monkeypatch.setattr(records, "_LOADED", {"record": rec})
    t = bc.comparison([("transpose_smem", {})])
    assert t[0]["ld wf ncu"] == pred["ld wavefronts"] + 5
    assert t[0]["ld ncu vs model, %"] == pytest.approx(100 * 5 / pred["ld wavefronts"])
    assert bc.agreement(t) == []                        # within 10 %
    brief = bc.comparison([("transpose_smem", {})], brief=True)
    assert brief.columns == list(bc.BRIEF) and brief[0]["ld wf ncu"] == t[0]["ld wf ncu"]
    assert "ld conf ncu" not in repr(brief)
    diff = bc.agreement(t, tolerance=0.0)
    assert len(diff) == 1 and "ld wavefronts" in diff[0]
    assert bc.excess_is_conflicts(t)                    # 5 more wavefronts, 5 more conflicts
    metrics[profile.SHARED[2]] += 1
    assert not bc.excess_is_conflicts(bc.comparison([("transpose_smem", {})]))


# ------------------------------------------------------------------ bandwidth table

def _fake_record():
    def row(kernel, shape, gbps, params=None, copy=None):
        r = {"chapter": "10", "kernel": kernel, "params": params or {}, "shape": list(shape),
             "gbps": {"median": gbps, "min": gbps - 10, "max": gbps + 10}, "repeats": 20}
        if copy:    # the device copy timed beside the kernel, in its run
            r["reference"] = {"kernel": "device_copy", "gbps": {"median": copy, "min": copy,
                                                                 "max": copy}}
        return r
    res = [row("device_copy", (64, 64), 1000.0)]
    for T, g, copy in (("float", 900.0, 1000.0), ("double", 950.0, 1900.0)):
        res.append(row("transpose_padded", (64, 64), g,
                       get("transpose_padded").resolve({"T": T}), copy))
    # a row of a recording without same-run references (schema 1)
    res.append(row("transpose_naive", (64, 64), 300.0, get("transpose_naive").resolve({})))
    return records.Record({"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc", stamp(res))


def test_bandwidth_table_percent_and_missing(monkeypatch):
    monkeypatch.setattr(records, "_LOADED", {"record": _fake_record()})
    monkeypatch.setattr(records.device, "is_live", lambda: False)
    t = bandwidth.table(["transpose_naive", "transpose_padded", "transpose_fast"],
                        shapes=((64, 64),), types=("float", "double"))
    kinds = [(r["kernel"], r["T"]) for r in t]
    assert kinds == [("device_copy", "float"), ("transpose_naive", "float"),
                     ("transpose_padded", "float"), ("transpose_padded", "double")]
    assert t[2]["% of device copy"] == pytest.approx(90.0)
    assert t[3]["% of device copy"] == pytest.approx(50.0)     # its own copy, not t[0]'s
    assert t[1]["% of device copy"] is None and "  -" in repr(t).splitlines()[3]
    assert bandwidth.best(t, (64, 64))["kernel"] == "transpose_padded"
    assert bandwidth.best(t, (64, 64), "double")["GB/s"] == 950.0
    assert "recorded on Test GPU" in t.title


def test_bandwidth_table_labels_a_configuration(monkeypatch):
    """A (label, kernel, parameters) entry times the kernel in that configuration and
    names its row by the label; a configuration not recorded is left out."""
    monkeypatch.setattr(records, "_LOADED", {"record": _fake_record()})
    monkeypatch.setattr(records.device, "is_live", lambda: False)
    t = bandwidth.table([("padded, its defaults", "transpose_padded", {}),
                         ("padded, PAD = 2", "transpose_padded", {"PAD": 2})],
                        shapes=((64, 64),))
    assert [r["kernel"] for r in t] == ["device_copy", "padded, its defaults"]
    assert t[1]["GB/s"] == 900.0


def test_bandwidth_plot_runs(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    monkeypatch.setattr(records, "_LOADED", {"record": _fake_record()})
    monkeypatch.setattr(records.device, "is_live", lambda: False)
    t = bandwidth.table(["transpose_naive", "transpose_padded"], shapes=((64, 64),),
                        types=("float", "double"))
    ax = bandwidth.plot(t)
    assert len(ax.get_yticklabels()) == 2
    assert ax.xaxis.get_major_formatter()(4000, 0) == "4,000"      # thousands separated


def test_compare_with_dgemm_reference(monkeypatch):
    def row(kernel, g, params=None, ref=None):
        r = {"chapter": "11", "kernel": kernel, "params": params or {}, "shape": [64, 64, 64],
             "gflops": {"median": g, "min": g, "max": g}, "error_over_bound": 0.05, "repeats": 20}
        return {**r, "reference": {"kernel": "cublas_dgemm", "gflops": {"median": ref}}} \
            if ref else r
    rec = records.Record({"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc",
                         stamp([row("cublas_dgemm", 400.0), row("cublas", 9000.0),
                                row("dgemm_tiled", 100.0, get("dgemm_tiled").resolve({}), 200.0)]))
    monkeypatch.setattr(records, "_LOADED", {"record": rec})
    monkeypatch.setattr(records.device, "is_live", lambda: False)
    # the DGEMM kernel is compared with cuBLAS DGEMM without being told
    t = ladder.compare(["dgemm_tiled"], (64,))
    assert [r["kernel"] for r in t] == ["dgemm_tiled", "cublas_dgemm"]
    assert t[0]["% of cuBLAS"] == pytest.approx(50.0)     # its own run's DGEMM, not 400
    assert t[0]["cuBLAS same run"] == 200.0
    t = ladder.compare(["dgemm_tiled"], (64,), reference="cublas_dgemm")
    assert [r["kernel"] for r in t] == ["dgemm_tiled", "cublas_dgemm"]


def test_access_picks_the_column_read():
    a = bc.access("transpose_smem", {"T": "float"})
    assert a.what == "tile[tx][ty]" and a.analysis.wavefronts == 32
    assert bc.access("transpose_padded", {"T": "float", "PAD": 1}).analysis.wavefronts == 1
    with pytest.raises(ValueError, match="index"):
        bc.access("transpose_smem", {}, index=99)


def test_sweep_best_reads_the_recording(monkeypatch):
    monkeypatch.setattr(records, "_LOADED", {"record": _fake_record()})
    monkeypatch.setattr(records.device, "is_live", lambda: False)
    assert bandwidth.sweep_best("transpose_padded", (64, 64), "double")["gbps"]["median"] == 950.0
    assert bandwidth.sweep_best("transpose_fast", (64, 64)) is None


def test_tile_map_as_table():
    from gemm_kernels.memory.ch11_tile_map import as_table, shared_tile_contents
    t = shared_tile_contents()
    tab = as_table(t["A_shared"], "offset")
    assert tab[0]["0"] == 4112 and tab[15]["15"] == 7967 and len(tab.columns) == 17
    assert as_table(t["B_shared"], "banks")[3]["1"] == "2/3"
    assert [r["ty"] for r in as_table(t["B_shared"], "banks", rows=2)] == [0, 1]
    assert as_table(t["A_shared"])[3]["5"] == "A[19*256 + 21]"


def test_plot_tiles_draws_the_rows_and_columns_of_each_tile():
    """Block (2, 1), step 1: A_shared holds rows 16..31 (blockIdx.y = 1) and columns
    16..31 (tile 1) of A; B_shared rows 16..31 (tile 1) and columns 32..47 (blockIdx.x = 2)
    of B; the block writes rows 16..31, columns 32..47 of C."""
    import matplotlib
    matplotlib.use("Agg")
    from gemm_kernels.memory.ch11_tile_map import plot_tiles
    ax = plot_tiles(block=(2, 1), tile=1)
    rects = [[p for p in a.patches][1] for a in ax]
    assert [(r.get_x(), r.get_y(), r.get_width(), r.get_height()) for r in rects] == \
        [(16, 16, 16, 16), (32, 16, 16, 16), (32, 16, 16, 16)]
    assert "rows 16..31, columns 16..31" in ax[0].get_title()
    assert "rows 16..31, columns 32..47" in ax[1].get_title()
    matplotlib.pyplot.close(ax[0].figure)
