"""Chapters 07-09 (float4, double_buffer, zorder, capstone) without a GPU: registry
rules, the shape-chosen code path, static analysis of the defaults, the bank analysis
written in the kernels' comments (checked against the bank model), and the index
arithmetic of the capstone and the z-order layout (every element copied and computed
exactly once)."""
import re

import pytest

from gemm_kernels import analysis, banks, compiler
from gemm_kernels.core.kernels import get

NAMES = ("float4", "double_buffer", "zorder", "capstone")


# ------------------------------------------------------------------ static analysis

@pytest.mark.parametrize("name", NAMES)
def test_default_compiles_without_spills(name):
    k = get(name)
    res = compiler.resources(k, {})
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res["report"]
    assert res["stack_bytes"] == 0, res["report"]
    if name == "capstone":
        assert res["registers"] <= 255
    else:   # two blocks of 256 threads per SM: at most 128 registers per thread
        assert k.threads(k.defaults()) == (256, 1, 1)
        assert res["registers"] <= 128, res["report"]


@pytest.mark.parametrize("name", NAMES)
def test_default_sass_uses_wide_loads_and_ffma(name):
    s = analysis.summary(name)
    whole, loop = s["kernel_histogram"], s["loop_histogram"]
    assert loop.get("LDS.128", 0) > 0
    assert whole.get("LDL", 0) == 0 and whole.get("STL", 0) == 0
    assert loop.get("LDS", 0) <= 4   # no scalar shared loads in the inner loop
    if name == "capstone":
        assert loop.get("LDGSTS", 0) > 0       # cp.async
        assert whole.get("STS", 0) == 0 and whole.get("STS.128", 0) == 0
    else:
        assert loop.get("LDG.128", 0) > 0      # float4 global loads
        assert whole.get("STG.128", 0) > 0     # float4 stores of C
    assert loop["FFMA"] > 0.75 * sum(loop.values()), loop


@pytest.mark.parametrize("name", NAMES)
def test_edge_path_compiles_without_spills(name):
    k = get(name)
    expr = k.name_expression({}, (515, 515, 515))
    assert expr.endswith("false>")
    _, report, _ = compiler._cubin(k, expr, compiler.STATIC_ARCH)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert spill and spill.groups() == ("0", "0"), report


def test_capstone_alternative_two_blocks_per_sm_fits_128_registers():
    params = {"BN": 128, "WM": 32, "WN": 64, "MINB": 2}
    k = get("capstone")
    assert k.problems(params) == []
    res = compiler.resources(k, params)
    assert res["registers"] <= 128 and res["spill_stores"] == 0, res["report"]


@pytest.mark.parametrize("params", [{}, {"BN": 256, "BK": 8, "WM": 64, "WN": 64}])
def test_capstone_hoist_compiles_lean(params):
    # HOIST: no spills on either path, and the main loop sheds the per-tile address
    # arithmetic: a larger FFMA share than the same tile without it.
    k = get("capstone")
    hoisted, plain = {**params, "HOIST": True}, {**params, "HOIST": False}
    assert k.problems(hoisted) == [] and k.problems(plain) == []
    s = analysis.summary("capstone", hoisted)
    assert s["spill_stores"] == 0 and s["spill_loads"] == 0 and s["stack_bytes"] == 0
    share = lambda loop: loop["FFMA"] / sum(loop.values())
    assert share(s["loop_histogram"]) > share(analysis.summary("capstone", plain)["loop_histogram"])
    _, report, _ = compiler._cubin(k, k.name_expression(hoisted, (515, 515, 515)),
                                   compiler.STATIC_ARCH)
    assert "0 bytes spill stores, 0 bytes spill loads" in report, report


# ------------------------------------------------------------------ registry

@pytest.mark.parametrize("name", NAMES)
def test_shape_picks_the_code_path(name):
    k = get(name)
    assert k.name_expression({}).endswith("true>")                  # static analysis
    assert k.name_expression({}, (4096, 4096, 4096)).endswith("true>")
    assert k.name_expression({}, (1000, 512, 300)).endswith("true>")
    assert k.name_expression({}, (512, 515, 512)).endswith("false>")  # N % 4 != 0
    ragged_k = k.name_expression({}, (512, 512, 515))                  # K % 4 != 0
    # The capstone copies A 4 bytes at a time, so only N decides its path.
    assert ragged_k.endswith("true>" if name == "capstone" else "false>")


def test_instantiations():
    assert get("float4").name_expression({}) == "sgemm_float4<128, 128, 8, 8, 8, true>"
    assert get("zorder").name_expression({"ZORDER": False, "PAD": 0}, (7, 7, 7)) == \
        "sgemm_zorder<128, 128, 8, 0, false, false>"
    assert get("capstone").name_expression({}) == \
        "sgemm_capstone<128, 128, 16, 32, 64, 4, 1, 1, true, true>"
    assert get("capstone").name_expression({"HOIST": False, "BK": 8}, (7, 7, 7)) == \
        "sgemm_capstone<128, 128, 8, 32, 64, 4, 1, 1, false, false>"


def test_geometry():
    k = get("capstone")
    p = k.defaults()
    assert k.threads(p) == (256, 1, 1)
    assert k.grid(p, (4096, 4096, 4096)) == (32, 32, 1)
    assert k.grid(p, (1, 1, 1)) == (1, 1, 1)
    assert k.dynamic_smem(p) == 4 * 16 * (128 + 4 + 128) * 4
    assert get("zorder").smem(get("zorder").defaults()) == 2 * 8 * (132 + 128) * 4


@pytest.mark.parametrize("name, params, word", [
    ("float4", {"TM": 3}, "TM=3"),                                    # not an allowed value
    ("float4", {"BN": 64, "TM": 4}, "BK*BN/4"),       # the B tile does not split over threads
    ("double_buffer", {"BM": 64, "BN": 64, "TM": 4, "TN": 4}, "BM*BK/4"),
    ("zorder", {"PAD": 1}, "PAD=1"),
    ("capstone", {"BN": 256, "WM": 64, "WN": 64, "BK": 8, "MINB": 2}, "MINB=2"),  # 8x16 per
    # thread needs more than 128 registers
    ("capstone", {"BN": 256, "WM": 64, "WN": 128}, "BN=256"),  # 128 threads cannot copy
    # 256-wide B rows
    ("capstone", {"BN": 128, "WM": 64, "WN": 128}, "WM*WN/32"),  # 16 x 16 per thread
])
def test_invalid_combinations_name_the_parameter(name, params, word):
    msgs = get(name).problems(params)
    assert msgs, f"{name} {params} should be invalid"
    assert any(word in m for m in msgs), msgs


@pytest.mark.parametrize("name", NAMES)
def test_valid_configurations_exist_and_include_default(name):
    k = get(name)
    valid = k.valid_configurations()
    assert k.defaults() in valid


# ------------------------------------------------------------------ bank analysis

def _zorder_lane(lane):
    """(qr, qc) of a lane inside its warp's 4 x 8 block (09_zorder.cu, 09_capstone.cu)."""
    return ((lane >> 1) & 1) | ((lane >> 3) & 2), (lane & 1) | ((lane >> 1) & 6)


def _wf(words, width=16):
    return banks.analyse([4 * w for w in words], width)


def test_zorder_lane_layout_is_a_permutation():
    assert sorted(_zorder_lane(l) for l in range(32)) == [(r, c) for r in range(4)
                                                          for c in range(8)]


@pytest.mark.parametrize("row_start", [0, 132 * 3, 128 * 5])
def test_bank_model_ch09_reads(row_start):
    # One LDS.128 of A at word 4*qr (+ warp row offset) and of B at 4*qc (+ warp col).
    for warp_row, warp_col in [(0, 0), (3, 1)]:
        a = [row_start + 16 * warp_row + 4 * _zorder_lane(l)[0] for l in range(32)]
        b = [row_start + 32 * warp_col + 4 * _zorder_lane(l)[1] for l in range(32)]
        for words in (a, b, [w + 64 for w in a], [w + 64 for w in b]):
            res = _wf(words)
            assert res.wavefronts == 2 and res.conflicts == 0, res
    # ZORDER = false, BN = 128: a warp is two grid rows of 16 threads.
    b_rowmajor = [row_start + 4 * (l % 16) for l in range(32)]
    a_rowmajor = [row_start + 4 * (l // 16) for l in range(32)]
    assert _wf(b_rowmajor).wavefronts == 4
    assert _wf(a_rowmajor).wavefronts == 2


def test_bank_model_ch07_reads():
    # 8 x 8 per thread, contiguous: lane tc = lane % 16 reads word 8*tc (B),
    # tr = lane // 16 reads word 8*tr (A).
    b = [8 * (l % 16) for l in range(32)]
    a = [8 * (l // 16) for l in range(32)]
    assert _wf(b).wavefronts == 8 and _wf(b).conflicts == 4
    assert _wf(a).wavefronts == 2


@pytest.mark.parametrize("pad, wavefronts", [(0, 2), (4, 1)])
def test_bank_model_transposed_a_store(pad, wavefronts):
    # 07-09 VEC path: lane l holds A[m0 + l//2][4*(l%2) .. +3]; store s writes
    # As[4*(l%2) + s][m0 + l//2], rows of BM + PAD = 128 + PAD words.
    for m0 in (0, 16, 112):
        for s in range(4):
            words = [(4 * (l % 2) + s) * (128 + pad) + m0 + l // 2 for l in range(32)]
            assert banks.analyse([4 * w for w in words], 4).wavefronts == wavefronts


def test_bank_model_capstone_a_copy_store():
    # 4-byte cp.async of A: lane l writes As[l % 8][m0 + l // 8], rows of BM + 4 words.
    for bm in (64, 128, 256):
        for m0 in (0, 4, 32, bm - 4):
            words = [(l % 8) * (bm + 4) + m0 + l // 8 for l in range(32)]
            assert banks.analyse([4 * w for w in words], 4).wavefronts == 1


# ------------------------------------------------------------------ index arithmetic

def _capstone_maps(p, vec=True):
    """The capstone's copy and output maps, written as in 09_capstone.cu."""
    BM, BN, BK, WM, WN = (p[x] for x in ("BM", "BN", "BK", "WM", "WN"))
    warps_n = BN // WN
    nt = 32 * (BM // WM) * warps_n
    a_per, a_step = BM * BK // nt, nt // 8
    bw = 4 if vec else 1
    b_cpr = BN // bw
    b_per, b_step = BK * b_cpr // nt, nt // b_cpr
    a_cells, b_cells, out_cells = [], [], []
    for t in range(nt):
        lane, warp = t % 32, t // 32
        a_k, a_m = t % 8, t // 8
        for i in range(a_per):
            a_cells.append((a_m + (i * a_step) % BM, a_k + 8 * ((i * a_step) // BM)))
        b_k, b_n = t // b_cpr, t % b_cpr * bw
        for i in range(b_per):
            b_cells += [(b_k + i * b_step, b_n + x) for x in range(bw)]
        qr, qc = _zorder_lane(lane)
        am = (warp // warps_n) * WM + 4 * qr
        bn = (warp % warps_n) * WN + 4 * qc
        for i in range(WM // 4):
            for j in range(WN // 8):
                out_cells.append((am + 16 * (i // 4) + i % 4, bn + 32 * (j // 4) + j % 4))
    return (BM, BN, BK), a_cells, b_cells, out_cells


@pytest.mark.parametrize("params", [
    {}, {"BN": 128, "WN": 64, "MINB": 2}, {"BK": 16}, {"WM": 64, "WN": 64},
    {"BN": 128, "WM": 64, "WN": 64},
    # outside the registry's sweep space, but allowed by the kernel's static_asserts
    {"BM": 64, "BN": 64, "WM": 32, "WN": 32}, {"BM": 256, "BN": 128, "WM": 64, "WN": 64},
])
@pytest.mark.parametrize("vec", [True, False])
def test_capstone_copies_and_outputs_cover_each_element_once(params, vec):
    k = get("capstone")
    p = {**k.defaults(), **params}
    (BM, BN, BK), a, b, out = _capstone_maps(p, vec)
    assert sorted(a) == [(m, kk) for m in range(BM) for kk in range(BK)]
    assert sorted(b) == [(kk, n) for kk in range(BK) for n in range(BN)]
    assert sorted(out) == [(m, n) for m in range(BM) for n in range(BN)]


@pytest.mark.parametrize("zorder", [True, False])
@pytest.mark.parametrize("bm, bn", [(128, 128), (64, 128), (128, 64), (256, 128)])
def test_zorder_outputs_cover_each_element_once(zorder, bm, bn):
    nt = bm * bn // 64
    cells = []
    for t in range(nt):
        if zorder:
            qr_l, qc_l = _zorder_lane(t % 32)
            warp, warps_n = t // 32, bn // 64
            qr, qc = (warp // warps_n) * 4 + qr_l, (warp % warps_n) * 8 + qc_l
        else:
            qr, qc = t // (bn // 8), t % (bn // 8)
        rows = [4 * qr + i for i in range(4)] + [bm // 2 + 4 * qr + i for i in range(4)]
        cols = [4 * qc + j for j in range(4)] + [bn // 2 + 4 * qc + j for j in range(4)]
        cells += [(r, c) for r in rows for c in cols]
    assert sorted(cells) == [(m, n) for m in range(bm) for n in range(bn)]


@pytest.mark.parametrize("gx, gy", [(1, 1), (16, 32), (7, 5), (3, 17), (32, 8)])
@pytest.mark.parametrize("group", [1, 4, 8, 16])
def test_capstone_rasterisation_is_a_permutation(gx, gy, group):
    tiles = []
    for pid in range(gx * gy):
        bx, by = pid % gx, pid // gx
        if group > 1:
            per_group = group * gx
            first = pid // per_group * group
            rows = min(gy - first, group)
            in_group = pid % per_group
            by, bx = first + in_group % rows, in_group // rows
        tiles.append((by, bx))
    assert sorted(tiles) == [(y, x) for y in range(gy) for x in range(gx)]


def _capstone_hoist_block(p, M, N, K, by, bx, vec, rng):
    """One block of the HOIST path, written as in 09_capstone.cu (issue_first,
    issue_next with advancing pointers), on flat copies of A and B: every address read
    lies inside A or B, and the tiles it assembles give the block's part of A @ B."""
    import numpy as np
    BM, BN, BK, WM, WN = (p[x] for x in ("BM", "BN", "BK", "WM", "WN"))
    nt = 32 * (BM // WM) * (BN // WN)
    a_per, a_step = BM * BK // nt, nt // 8
    a_rows = BM // a_step
    bw = 4 if vec else 1
    b_cpr = BN // bw
    b_per, b_step = BK * b_cpr // nt, nt // b_cpr
    A = rng.standard_normal(M * K)
    B = rng.standard_normal(K * N)
    row0, col0 = by * BM, bx * BN
    tiles = -(-K // BK)
    kb = K - tiles * BK
    acc = np.zeros((BM, BN))
    a_ptr = [None] * nt
    b_ptr = [None] * nt
    for tile in range(tiles):
        As = np.full((BK, BM), np.nan)
        Bs = np.full((BK, BN), np.nan)
        for t in range(nt):
            a_k, a_m = t % 8, t // 8
            a_off = [min(row0 + a_m + (i * a_step) % BM, M - 1) * K for i in range(a_per)]
            b_k, b_n = t // b_cpr, t % b_cpr * bw
            b_col = col0 + b_n if col0 + b_n < N else 0
            if tile == 0:      # issue_first
                for i in range(a_per):
                    m = a_m + (i * a_step) % BM
                    k = kb + a_k + 8 * ((i * a_step) // BM)
                    src = a_off[i] + max(k, 0)
                    assert 0 <= src < M * K
                    As[k - kb, m] = A[src] if k >= 0 else 0.0
                a_ptr[t] = [a_off[r] + kb + a_k + BK for r in range(a_rows)]
                for i in range(b_per):
                    k = kb + b_k + i * b_step
                    src = max(k, 0) * N + b_col
                    assert 0 <= src and src + bw <= K * N
                    Bs[k - kb, b_n:b_n + bw] = B[src:src + bw] if k >= 0 else 0.0
                b_ptr[t] = (kb + b_k + BK) * N + b_col
            else:              # issue_next
                for i in range(a_per):
                    m = a_m + (i % a_rows) * a_step
                    k = a_k + 8 * (i // a_rows)
                    src = a_ptr[t][i % a_rows] + 8 * (i // a_rows)
                    assert 0 <= src < M * K
                    As[k, m] = A[src]
                a_ptr[t] = [x + BK for x in a_ptr[t]]
                for i in range(b_per):
                    k = b_k + i * b_step
                    src = b_ptr[t] + i * b_step * N
                    assert 0 <= src and src + bw <= K * N
                    Bs[k, b_n:b_n + bw] = B[src:src + bw]
                b_ptr[t] += BK * N
        assert not np.isnan(As).any() and not np.isnan(Bs).any()   # every cell written
        acc += As.T @ Bs
    rows, cols = min(BM, M - row0), min(BN, N - col0)
    ref = A.reshape(M, K)[row0:row0 + rows] @ B.reshape(K, N)[:, col0:col0 + cols]
    np.testing.assert_allclose(acc[:rows, :cols], ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("params", [{}, {"BK": 16}, {"WM": 32, "WN": 128},
                                    {"BN": 128, "WN": 64, "MINB": 2}])
@pytest.mark.parametrize("mnk", [(1, 4, 1), (130, 260, 7), (129, 257, 8), (128, 256, 33),
                                 (5, 3, 17), (200, 300, 16)])
def test_capstone_hoist_copies_assemble_the_product(params, mnk):
    import numpy as np
    M, N, K = mnk
    p = {**get("capstone").defaults(), **params, "HOIST": True}
    vec = N % 4 == 0
    rng = np.random.default_rng(0)
    gy, gx = -(-M // p["BM"]), -(-N // p["BN"])
    for by, bx in {(0, 0), (gy - 1, gx - 1)}:
        _capstone_hoist_block(p, M, N, K, by, bx, vec, rng)
