"""Chapter 07's same-tile ablation, float4_a_rows, without a GPU: its SASS shows what
the kernel is for. It has chapter 07's 16-byte global loads (LDG.E.128 of A and B) but
keeps chapter 06's row-major A tile, so A's float4 is stored whole (STS.128, no scalar
STS: a transposed A store would be four STS.32 per float4, as in float4). Its shared
reads are chapter 07's in number: the scalar reads of A are merged along k into
LDS.128, so no scalar LDS is left in the main loop."""
import re
from collections import Counter

import pytest

from gemm_kernels import analysis, compiler
from gemm_kernels.core.kernels import get

NAME = "float4_a_rows"
CONFIGS = get(NAME).valid_configurations()


def _ids(p):
    return "{BM}x{BN}x{BK}-{TM}x{TN}".format(**p)


def _loop(name, params):
    """Main-loop histogram and instruction texts of the VEC path (the static default)."""
    sass = compiler.sass(get(name), get(name).resolve(params))
    loop = analysis.main_loop(sass)
    return Counter(f for _, f, _ in loop), [text for _, _, text in loop]


def _per_thread(p):
    """float4s of A and of B that each thread copies per tile."""
    nt = (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])
    return p["BM"] * p["BK"] // 4 // nt, p["BK"] * p["BN"] // 4 // nt


@pytest.mark.parametrize("params", CONFIGS, ids=_ids)
def test_vec_path_sass(params):
    loop, texts = _loop(NAME, params)
    a4, b4 = _per_thread(params)
    # 16-byte global loads of A and B, one per float4, and no 4-byte ones
    assert loop.get("LDG.128", 0) == a4 + b4 and loop.get("LDG", 0) == 0, loop
    assert sum(t.startswith("LDG.E.128") for t in texts) == a4 + b4, texts
    # both tiles stored a float4 at a time: a transposed A store would add 4 STS per float4
    assert loop.get("STS.128", 0) == a4 + b4 and loop.get("STS", 0) == 0, loop
    # per tile TM*BK/4 LDS.128 of A (four consecutive k of one row) and BK*TN/4 of B
    k, tm, tn = params["BK"], params["TM"], params["TN"]
    assert loop.get("LDS.128", 0) == (tm + tn) * k // 4, loop
    assert loop.get("LDS", 0) == 0 and loop.get("LDS.64", 0) == 0, loop
    assert loop.get("FFMA", 0) == tm * tn * k, loop


@pytest.mark.parametrize("params", CONFIGS, ids=_ids)
def test_no_spills_on_either_path(params):
    k = get(NAME)
    res = compiler.resources(k, params)
    assert 0 < res["registers"] <= 255, res["report"]
    assert res["spill_stores"] == res["spill_loads"] == res["stack_bytes"] == 0, res["report"]
    expr = k.name_expression(params, (515, 515, 515))
    assert expr.endswith("false>")
    _, report, _ = compiler._cubin(k, expr, compiler.STATIC_ARCH)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert spill and spill.groups() == ("0", "0"), report


def test_differs_from_float4_only_in_the_a_store():
    """At the default tile: float4 stores A with 4 STS.32 per float4 (its transposed
    tile) where float4_a_rows uses one STS.128; global loads, shared reads and FFMA
    are the same in number."""
    p = get(NAME).defaults()
    # the tile tunables are the same (float4 alone has chapter 08's ONE_PER_SM switch)
    assert {k: v for k, v in get("float4").defaults().items() if k != "ONE_PER_SM"} == p
    rows, _ = _loop(NAME, p)
    cols, _ = _loop("float4", p)
    a4, b4 = _per_thread(p)
    assert cols.get("STS", 0) == 4 * a4 and cols.get("STS.128", 0) == b4, cols
    assert rows.get("STS", 0) == 0 and rows.get("STS.128", 0) == a4 + b4, rows
    for f in ("LDG.128", "LDS.128", "LDS", "FFMA"):
        assert rows.get(f, 0) == cols.get(f, 0), (f, rows, cols)


def test_differs_from_tile_2d_reg_only_in_the_global_copy():
    """At chapter 06's 128 x 128 x 8, 8 x 8 tile: the same shared reads and FFMA as
    tile_2d_reg; the copy into shared memory moves a float4 per instruction instead of
    a float (a quarter of the LDG and STS)."""
    p = get(NAME).defaults()
    tile = {n: p[n] for n in ("BM", "BN", "BK", "TM", "TN")}
    assert get("tile_2d_reg").problems(tile) == []
    rows, _ = _loop(NAME, p)
    scalar, _ = _loop("tile_2d_reg", tile)
    for f in ("LDS.128", "LDS", "FFMA"):
        assert rows.get(f, 0) == scalar.get(f, 0), (f, rows, scalar)
    assert scalar.get("LDG.128", 0) == 0 and scalar.get("STS.128", 0) == 0, scalar
    assert scalar["LDG"] == 4 * rows["LDG.128"] and scalar["STS"] == 4 * rows["STS.128"]
