"""The per-launch shared-memory prediction of chapters 03-04 (gemm_kernels.bank_predict).

The per-step wavefronts are the table in the comment of cuda/04_bank_conflicts.cu, worked
out by hand; the instruction widths are checked against the SASS (CPU toolchain)."""
from __future__ import annotations

import pytest

from gemm_kernels import analysis, compiler, kernels, records
from gemm_kernels.memory import ch03_04_tiles as bp
from gemm_kernels.measure.profile import SHARED

from conftest import stamp
from test_registry_ch03_06 import _toolchain_or_skip


def _per_step(name, params):
    """{group: wavefronts of one warp (warp 0) summed over one step along K}."""
    out = {}
    for i in bp.warp_instructions(name, params):
        if i.warp == 0:
            out[i.group] = out.get(i.group, 0) + i.analysis.wavefronts
    return out


# (read A, read B, store a, store b) per warp and step, from the kernel's comment
TABLE = {
    (32, "conflict"): {0: (16, 256, 1, 32), 1: (32, 32, 1, 1), 2: (16, 32, 1, 2),
                       3: (32, 32, 1, 1), 4: (16, 32, 1, 4)},
    (32, "transposed"): {0: (32, 32, 32, 1), 1: (32, 32, 1, 1), 2: (32, 32, 2, 1),
                         3: (32, 32, 1, 1), 4: (32, 32, 4, 1)},
    (16, "conflict"): {0: (8, 64, 1, 8), 1: (16, 16, 2, 2), 2: (8, 16, 2, 1),
                       3: (16, 16, 2, 2), 4: (8, 16, 2, 2)},
    (16, "transposed"): {0: (16, 16, 8, 1), 1: (16, 16, 2, 2), 2: (16, 16, 1, 2),
                         3: (16, 16, 2, 2), 4: (16, 16, 2, 2)},
}


@pytest.mark.parametrize("block,layout,pad", [(b, l, p) for (b, l) in TABLE for p in range(5)])
def test_per_step_wavefronts_match_the_kernel_comment(block, layout, pad):
    got = _per_step("bank_layout", {"BLOCK": block, "LAYOUT": layout, "PAD": pad})
    assert (got["read A"], got["read B"], got["store a"], got["store b"]) == \
        TABLE[(block, layout)][pad]


def test_every_warp_of_a_block_costs_the_same():
    for name, p in bp.variants():
        per_warp = {}
        for i in bp.warp_instructions(name, p):
            per_warp[i.warp] = per_warp.get(i.warp, 0) + i.analysis.wavefronts
        assert len(set(per_warp.values())) == 1, p


@pytest.mark.parametrize("pad,widths", [(0, (16, 16)), (1, (4, 4)), (2, (8, 8)), (3, (4, 4)),
                                        (4, (16, 16))])
def test_conflict_layout_read_width_follows_row_alignment(pad, widths):
    for block in (16, 32):
        assert bp.read_width("bank_layout", {"BLOCK": block, "LAYOUT": "conflict",
                                             "PAD": pad}) == widths
        assert bp.read_width("bank_layout", {"BLOCK": block, "LAYOUT": "transposed",
                                             "PAD": pad}) == (4, 4)
    assert bp.read_width("smem_tiled", {"BLOCK": 32}) == (16, 4)


def test_smem_tiled_is_conflict_free():
    for b in (8, 16, 32):
        pred = bp.predict("smem_tiled", {"BLOCK": b})
        assert pred["ld conflicts"] == 0 and pred["st conflicts"] == 0
    rows = {r["access"]: r for r in bp.per_instruction("smem_tiled", {"BLOCK": 32})}
    assert rows["read A"]["SASS"] == "LDS.128" and rows["read A"]["wavefronts each"] == 2
    assert rows["read B"]["SASS"] == "LDS" and rows["read B"]["per warp and step"] == 32


def test_launch_totals_multiply_out():
    p = {"BLOCK": 32, "LAYOUT": "conflict", "PAD": 0}
    assert bp.launch_steps("bank_layout", p) == 32 * 32 * 32          # blocks x K steps
    rows = {r["access"]: r for r in bp.per_instruction("bank_layout", p)}
    b = rows["read B"]
    assert b["SASS"] == "LDS.128" and b["per warp and step"] == 8
    assert b["in the launch"] == 8 * 32 * 32 ** 3                      # x 32 warps/block
    assert b["wavefronts"] == 32 * b["in the launch"]
    assert b["conflicts"] == 28 * b["in the launch"]                   # 4 phases ideal
    pred = bp.predict("bank_layout", p)
    assert pred["st wavefronts"] == (1 + 32) * 32 * 32 ** 3
    assert pred["ld wavefronts"] == (8 * 2 + 8 * 32) * 32 * 32 ** 3
    # BLOCK = 16: 64 x 64 blocks, 64 steps, 8 warps per block
    assert bp.launch_steps("bank_layout", {"BLOCK": 16}) == 64 ** 3


def test_ragged_shapes_are_refused():
    with pytest.raises(ValueError, match="multiples of BLOCK"):
        bp.predict("bank_layout", {"BLOCK": 32}, (1000, 1024, 1024))
    with pytest.raises(ValueError, match="models"):
        bp.predict("naive", {})
    with pytest.raises(ValueError, match="PAD"):
        bp.predict("bank_layout", {"PAD": 7})


@pytest.mark.parametrize("name,params", [("smem_tiled", {"BLOCK": b}) for b in (8, 16, 32)] +
                         bp.variants())
def test_instruction_counts_match_the_sass(name, params):
    _toolchain_or_skip()
    k = kernels.get(name)
    loop = analysis.main_loop(compiler.sass(k, k.resolve(params)))
    seen = {}
    for _, fam, _ in loop:
        if fam.startswith(("LDS", "STS")):
            seen[fam] = seen.get(fam, 0) + 1
    want = bp.instruction_counts(name, params)
    unroll = seen.get("STS", 0) // want["STS"]
    assert unroll >= 1
    assert seen == {op: n * unroll for op, n in want.items()}, (seen, want)


def _fake_record(monkeypatch, rows):
    rec = records.Record({"name": "Test GPU"}, "2026-01-01T00:00:00Z", "abc", stamp(rows))
    monkeypatch.setitem(records._LOADED, "record", rec)
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")


def test_side_by_side_reads_the_recorded_counters(monkeypatch):
    p = kernels.get("bank_layout").resolve({"BLOCK": 32, "LAYOUT": "transposed", "PAD": 1})
    pred = bp.predict("bank_layout", p)
    metrics = {SHARED[0]: float(pred["ld wavefronts"]), SHARED[1]: float(pred["st wavefronts"]),
               SHARED[2]: 0.0, SHARED[3]: 12.0}
    _fake_record(monkeypatch, [
        {"chapter": "04", "kernel": "bank_layout", "params": p, "shape": [1024] * 3,
         "metrics": metrics},
        {"chapter": "04", "kernel": "bank_layout", "params": p, "shape": [2048] * 3,
         "gflops": {"median": 1000.0, "min": 900.0, "max": 1100.0}}])
    t = bp.side_by_side("bank_layout", p)
    total = {r["access"]: r for r in t}
    assert total["all loads"]["ncu wavefronts"] == pred["ld wavefronts"]
    assert total["all stores"]["ncu conflicts"] == 12
    assert "Test GPU" in t.title
    assert bp.disagreements([("bank_layout", p)]) == [
        "bank_layout BLOCK=32 LAYOUT=transposed PAD=1: st conflicts model 0 ncu 12"]
    ov = bp.overview([("bank_layout", p)])
    assert ov[0]["GFLOP/s"] == 1000.0 and ov[0]["st conf ncu"] == 12
    assert ov[0]["loads/step"] == "64 LDS"


def test_without_a_recording_the_model_still_prints(monkeypatch):
    _fake_record(monkeypatch, [])
    t = bp.side_by_side("bank_layout", {"BLOCK": 16})
    assert "model only" in t.title
    assert [r["access"] for r in t][-2:] == ["all stores", "all loads"]
    assert t[-1]["ncu wavefronts"] is None


def test_ceiling_and_excess_tables(monkeypatch):
    p = kernels.get("bank_layout").resolve({"BLOCK": 32, "LAYOUT": "transposed", "PAD": 0})
    pred = bp.predict("bank_layout", p)
    metrics = {SHARED[0]: pred["ld wavefronts"] + 1000.0, SHARED[1]: float(pred["st wavefronts"]),
               SHARED[2]: 1000.0, SHARED[3]: float(pred["st conflicts"])}
    _fake_record(monkeypatch, [
        {"chapter": "04", "kernel": "bank_layout", "params": p, "shape": [1024] * 3,
         "metrics": metrics},
        {"chapter": "04", "kernel": "bank_layout", "params": p, "shape": [2048] * 3,
         "gflops": {"median": 2000.0, "min": 1900.0, "max": 2100.0}}])
    records._LOADED["record"].device.update(sm_count=100, sm_clock_mhz=1000.0,
                                            compute_capability="9.0")
    c = bp.smem_ceiling("bank_layout", p)
    assert c["wavefronts/step"] == 64 + 32 + 1          # reads, 32-way store, store
    assert c["smem bound GFLOP/s"] == pytest.approx(100 * 1e9 * 32 * 64 / 97 / 1e9)
    row = bp.ceiling_table([("bank_layout", p)])[0]
    assert row["conflicts/step"] == 31 and row["GFLOP/s"] == 2000.0
    assert row["% of bound"] == pytest.approx(100 * 2000.0 / c["smem bound GFLOP/s"])
    ex = bp.excess([("bank_layout", p)])[0]
    assert ex["ld extra wf"] == 1000 and ex["st extra wf"] == 0 and ex["LAYOUT"] == "transposed"
    with pytest.raises(ValueError, match="sm_count"):
        bp.smem_ceiling("bank_layout", p, props={})


def test_scope_and_probe_table(tmp_path):
    assert bp.scope_independent()
    path = tmp_path / "probe.json"
    import json
    path.write_text(json.dumps({"device": {"name": "X"}, "ncu": "Version 1 (b)",
                                "created": "2026-01-01T00:00:00Z", "results": [
        {"name": "col", "width": 4, "addresses": [128 * i for i in range(32)],
         "measured_wavefronts": 32, "measured_conflicts": 31,
         "model_wavefronts": 0, "model_conflicts": 0}]}))
    t = bp.probe_table(path)
    assert t[0]["model wf"] == 32 and t[0]["agree"] == "yes"      # computed now, not read
    assert "agree on 1 of 1" in t.title
    assert bp.probe_table(tmp_path / "absent.json") is None
