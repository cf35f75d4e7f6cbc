"""Chapters 10 (transpose) and 11 (64-bit shared memory): registry, static compile, the
shared-memory model against the recorded counters, the tile map against the kernel source.

CPU only: NVRTC -> ptxas -> nvdisasm from the pip wheels, no GPU.
"""
import re

import pytest

from gemm_kernels import compiler
from gemm_kernels.core.kernels import by_chapter, get
from gemm_kernels.memory import ch10_11_instructions as bc
from gemm_kernels.memory.ch11_tile_map import shared_tile_contents

from test_bank_predict import check_against_recorded

CH10 = ["copy", "copy_smem", "transpose_naive", "transpose_smem", "transpose_padded",
        "transpose_diagonal", "transpose_fast"]
CH11 = ["dgemm_tiled", "sgemm_tiled_vec"]


def _ops(sass: str) -> set[str]:
    return set(re.findall(r"\b((?:LDS|STS|LDG|STG)(?:\.[\w]+)*)", sass))


def test_chapter_entries_are_registered():
    assert {k.name for k in by_chapter("10")} >= set(CH10)
    assert {k.name for k in by_chapter("11")} >= set(CH11)
    assert {get(n).op for n in CH10} == {"copy", "transpose"}
    assert get("dgemm_tiled").op == "dgemm" and get("sgemm_tiled_vec").op == "sgemm"


@pytest.mark.parametrize("name", CH10)
@pytest.mark.parametrize("T", ["float", "double"])
def test_ch10_defaults_compile_for_both_types(name, T):
    k = get(name)
    p = k.resolve({"T": T})
    assert k.problems(p) == []
    res = compiler.resources(k, p)
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res["report"]
    assert res["smem_bytes"] == k.smem(p)


@pytest.mark.parametrize("name", CH11)
def test_ch11_defaults_compile(name):
    k = get(name)
    res = compiler.resources(k, {})
    assert res["spill_stores"] == 0 and res["smem_bytes"] == k.smem(k.resolve({}))


def test_dgemm_inner_loop_uses_64_bit_shared_loads():
    ops = _ops(compiler.sass(get("dgemm_tiled"), {}))
    assert "LDS.64" in ops            # B_shared[k][threadIdx.x]: one double per lane
    assert "DFMA" in compiler.sass(get("dgemm_tiled"), {})


@pytest.mark.parametrize("vec,op", [(2, "LDS.64"), (4, "LDS.128")])
def test_sgemm_tiled_vec_reads_b_as_vectors(vec, op):
    assert op in _ops(compiler.sass(get("sgemm_tiled_vec"), {"VEC": vec}))


def test_transpose_fast_uses_16_byte_global_accesses():
    ops = _ops(compiler.sass(get("transpose_fast"), {}))
    assert "LDG.E.128.CONSTANT" in ops and "STG.E.128" in ops


def test_transpose_fast_scalar_edge_path_compiles():
    k = get("transpose_fast")
    expr = k.name_expression({}, (8191, 4097))
    assert expr.endswith("false, false>")
    _, report, _ = compiler._cubin(k, expr, compiler.STATIC_ARCH)
    assert "0 bytes spill stores" in report and "0 bytes spill loads" in report


# ------------------------------------------------------------------ shapes and geometry

def test_fast_vector_paths_follow_the_shape():
    k = get("transpose_fast")
    p = k.resolve({})
    assert k.shape_params(p, (8192, 8192)) == {"VEC_LOAD": True, "VEC_STORE": True}
    assert k.shape_params(p, (8191, 4097)) == {"VEC_LOAD": False, "VEC_STORE": False}
    # cols % 4 == 0 allows float4 loads; rows = 4097 forbids float4 stores
    assert k.shape_params(p, (4097, 8192)) == {"VEC_LOAD": True, "VEC_STORE": False}
    d = k.resolve({"T": "double"})     # 16 bytes = 2 doubles
    assert k.shape_params(d, (6, 7)) == {"VEC_LOAD": False, "VEC_STORE": True}
    # TILE=64, ROWS=16 by default: 64*4/16 = 16 float4 columns; 64*8/16 = 32 double2
    assert k.threads(p) == (16, 16, 1) and k.threads(d) == (32, 16, 1)


@pytest.mark.parametrize("name", CH10)
def test_ch10_grid_covers_ragged_shapes(name):
    k = get(name)
    plain = {"ORDER": "x->col", "STACK": 1} if name == "transpose_padded" else {}
    p = k.resolve({"TILE": 32, "ROWS": 8, **plain})
    assert k.grid(p, (8191, 4097)) == (-(-4097 // 32), -(-8191 // 32), 1)
    assert k.grid(p, (1, 1)) == (1, 1, 1)


def test_dgemm_geometry():
    k = get("dgemm_tiled")
    assert k.threads(k.resolve({})) == (16, 16, 1)
    assert k.grid(k.resolve({}), (256, 256, 256)) == (16, 16, 1)
    v = get("sgemm_tiled_vec")
    assert v.grid(v.resolve({}), (100, 130, 7)) == (3, 7, 1)   # 16*4 = 64 columns per block


# ------------------------------------------------------------------ messages

def test_rows_must_divide_tile_message_names_both():
    msg = get("transpose_padded").problems({"TILE": 16, "ROWS": 32})
    assert msg and "ROWS=32" in msg[0] and "TILE=16" in msg[0]


def test_thread_limit_message_names_tile_and_rows():
    msg = get("transpose_naive").problems({"TILE": 64, "ROWS": 32})
    assert msg and "TILE=64" in msg[0] and "ROWS=32" in msg[0] and "1024" in msg[0]


def test_fast_vec_bytes_too_small_for_double():
    msg = get("transpose_fast").problems({"T": "double", "VEC_BYTES": 4})
    assert msg and "VEC_BYTES=4" in msg[0] and "double" in msg[0]


def test_fast_rows_multiple_of_vec():
    msg = get("transpose_fast").problems({"ROWS": 2})      # float4: VEC = 4
    assert msg and "ROWS=2" in msg[0] and "VEC_BYTES=16" in msg[0]


def test_disallowed_value_lists_choices():
    msg = get("transpose_fast").problems({"PAD": 3})
    assert msg and "PAD=3" in msg[0] and "0, 1, 2" in msg[0]
    msg = get("dgemm_tiled").problems({"BLOCK": 64})
    assert msg and "BLOCK=64" in msg[0] and "8, 16, 32" in msg[0]


def test_shape_rules():
    k = get("transpose_padded")
    p = k.resolve({"TILE": 16, "ORDER": "x->col", "STACK": 1})   # tile rows on grid y
    assert "gridDim.y" in k.shape_rule(p, (16 * 65536, 2))
    assert k.shape_rule(p, (8191, 4097)) is None
    d = get("dgemm_tiled")
    assert "2^31" in d.shape_rule(d.resolve({}), (70000, 70000, 8))


# ------------------------------------------------------------------ bank counts

def test_model_matches_the_recorded_counters():
    """The shared-memory model of chapters 10-11 (ch10_11_instructions.predict) against
    every recorded Nsight Compute row of its kernels: the tile kernels' column reads of
    tile[tx][ty] (32-way in float, 32 in double, PAD = 1 conflict-free), dgemm's
    A_shared[ty][k] / B_shared[k][tx] LDS.64 and sgemm_tiled_vec's vector reads."""
    rows = check_against_recorded(bc.KERNELS, bc.predict, ld_excess=0.5, declined=ValueError)
    assert {r["kernel"] for _, r in rows} == set(bc.KERNELS)
    assert len(rows) >= 50


# ------------------------------------------------------------------ chapter 11, question 1

def test_tile_map_block_1_1_tile_1():
    t = shared_tile_contents(block=(1, 1), tile=1, BLOCK=16, dim=256)
    A, B = t["A_shared"], t["B_shared"]
    # A_shared[ty][tx] = A[(16 + ty) * 256 + 16 + tx]
    assert A.offset[0][0] == 16 * 256 + 16 == 4112
    assert A.offset[0][15] == 16 * 256 + 31
    assert A.offset[15][15] == 31 * 256 + 31 == 7967
    assert A.offset[3][5] == 19 * 256 + 21
    # B_shared[ty][tx] = B[(16 + ty) * 256 + 16 + tx]: for block (1, 1) at tile 1 the same
    assert B.offset == A.offset
    assert A.expression(3, 5, 256) == "A[19*256 + 21]"
    # 8-byte slots, 16 per 128-byte row: a row spans all 32 banks
    assert A.address[0][1] == 8 and A.bank[0][1] == 2 and A.banks_of(0, 1) == (2, 3)
    assert A.address[1][0] == 128 and A.bank[1][0] == 0
    assert A.bank[0][15] == 30 and A.banks_of(0, 15) == (30, 31)


def _dgemm_load_offsets(bx, by, tile, BLOCK, dim):
    """The flat offsets dgemm_tiled's threads load into A_shared / B_shared, by the
    expressions written in cuda/11_dgemm_tiled.cu (row, col, j, i and the two loads)."""
    src = get("dgemm_tiled").source_text()
    expr = {v: re.search(rf"const int {v} = ([^;]+);", src).group(1) for v in ("row", "col", "j", "i")}
    loads = {m: re.search(rf"{m}_shared\[threadIdx.y\]\[threadIdx.x\] = \([^)]*\) \? "
                          rf"{m}\[([^\]]+)\]", src).group(1) for m in ("A", "B")}

    def ev(e, **names):
        e = e.replace("threadIdx.", "t_").replace("blockIdx.", "b_").replace("blockDim.", "d_")
        assert re.fullmatch(r"[\w\s()+*]+", e), e
        return eval(e, {}, names)

    out = {"A": [[0] * BLOCK for _ in range(BLOCK)], "B": [[0] * BLOCK for _ in range(BLOCK)]}
    for ty in range(BLOCK):
        for tx in range(BLOCK):
            names = dict(t_x=tx, t_y=ty, b_x=bx, b_y=by, d_x=BLOCK, d_y=BLOCK, tile=tile,
                         BLOCK=BLOCK, M=dim, N=dim, K=dim)
            names.update({v: ev(e, **names) for v, e in expr.items()})
            for m in ("A", "B"):
                out[m][ty][tx] = ev(loads[m], **names)
    return out


@pytest.mark.parametrize("block,tile", [((1, 1), 1), ((2, 0), 3), ((15, 7), 15)])
def test_tile_map_is_what_the_kernel_loads(block, tile):
    t = shared_tile_contents(block=block, tile=tile, BLOCK=16, dim=256)
    want = _dgemm_load_offsets(*block, tile, 16, 256)
    assert t["A_shared"].offset == want["A"]
    assert t["B_shared"].offset == want["B"]


def test_tile_map_rejects_outside_grid():
    with pytest.raises(ValueError, match="block"):
        shared_tile_contents(block=(16, 0))
    with pytest.raises(ValueError, match="tile"):
        shared_tile_contents(tile=16)


def test_the_exercise_payoff_prices_the_unpadded_layout_far_above_the_padded_one():
    """Rows of 16 doubles conflict on the store and the read; rows of 17 cost exactly what
    the chapter's kernel costs; rows of 18 keep the LDS.128 and pay two wavefronts more."""
    from gemm_kernels.notebook import ch11_wide
    t = ch11_wide.exercise_payoff()
    rows = {r["layout"]: r["wavefronts per warp and step"] for r in t}
    chapter = next(v for k, v in rows.items() if k.startswith("the chapter's"))
    assert rows["B transposed, rows of 17"] == chapter
    assert rows["B transposed, rows of 18"] == chapter + 2
    assert rows["B transposed, rows of 16"] > 4 * chapter
    bound = [r["shared-memory bound, GFLOP/s"] for r in t]
    if bound[0] is not None:
        assert bound[2] == pytest.approx(bound[0]) and bound[1] < bound[0] / 4


def test_the_exercise_payoffs_b_columns_say_they_price_one_instruction():
    """The B store and read columns count one warp instruction's wavefronts, beside a
    per-step total: their headers must name the unit (a bare "B read: wavefronts" was read
    as per step)."""
    from gemm_kernels.notebook import ch11_wide
    t = ch11_wide.exercise_payoff()
    b_counts = [c for c in t.columns if c.startswith("B ") and "wavefronts" in c]
    assert len(b_counts) == 2 and all(c.endswith("per warp instruction") for c in b_counts)
    assert "wavefronts per warp and step" in t.columns
    # the chapter's kernel prices its B store and read too (conflict-free), so the rows compare
    chapter = next(iter(t))
    assert [chapter[c] for c in b_counts] == [2, 2]


def test_excess_line_gives_the_range_of_every_recorded_count():
    cfg = [("transpose_padded", {"T": "float", "TILE": t, "PAD": p}) for t in (16, 32) for p in (0, 1, 2)]
    t = bc.comparison(cfg)
    got = [r[f"{op} ncu vs model, %"] for r in t for op in ("ld", "st")
           if r[f"{op} ncu vs model, %"] is not None]
    line = bc.excess_line(cfg)
    if not got:
        assert line.startswith("no Nsight Compute counts")
        return
    assert f"{min(got):.1f}% to {max(got):.1f}%" in line
    assert f"{len(got)} counts" in line
    assert ("counts every one" in line) == bc.excess_is_conflicts(t)
