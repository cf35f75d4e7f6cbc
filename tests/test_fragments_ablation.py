"""Chapter 06's register fragments in the SASS, and chapter 07's ablation picture."""
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gemm_kernels.notebook import ch07_ablation, fragments  # noqa: E402

K5 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}


def test_fragment_uses_counts_readers_until_overwritten():
    body = [(0, "LDS.128", "LDS.128 R4, [R0]"),
            (16, "FFMA", "FFMA R10, R4, R5, R10"),
            (32, "FFMA", "FFMA R11, R4, R6, R11"),
            (48, "MOV", "MOV R4, R1"),            # R4 overwritten: later reads are not its
            (64, "FFMA", "FFMA R12, R4, R7, R12")]
    uses = {reg: len(r) for _, reg, r in fragment_uses(body)}
    assert uses == {4: 2, 5: 1, 6: 1, 7: 1}


fragment_uses = fragments.fragment_uses


def test_outer_product_feeds_each_loaded_register_to_tn_ffmas():
    t = fragments.fragment_table([("tile_2d", K5), ("tile_2d_reg", K5)])
    inner, outer = t
    assert inner["FFMAs per loaded register: fewest"] == inner["most"] == 1
    assert outer["FFMAs per loaded register: fewest"] == outer["most"] == 8
    # every multiplicand of every FFMA comes from a register a shared load filled
    assert outer["registers they fill"] * 8 == 2 * outer["FFMA"]


def test_fragment_listing_follows_one_load():
    text = fragments.fragment_listing("tile_2d_reg", K5, 0)
    lines = text.splitlines()
    assert lines[0].split()[1] == "LDS.128" and len(lines) == 1 + 4 * 8
    with pytest.raises(ValueError, match="shared loads"):
        fragments.fragment_listing("tile_2d_reg", K5, 10_000)


def test_ablation_steps_and_plot_degrade_without_rows(monkeypatch):
    monkeypatch.setattr(ch07_ablation.studies, "results",
                        lambda name, shape=None: [(s, None) for s in
                                                  ch07_ablation.studies.get(name).steps])
    from gemm_kernels.measure import lookup
    monkeypatch.setattr(lookup, "variant_row", lambda kernel, shape, params=None: None)
    rows = ch07_ablation.steps()
    assert len(rows) == 5 and all(r["GFLOP/s"] is None for r in rows)   # 3 steps + 2 controls
    assert "Not every step" in ch07_ablation.verdict()
    fig = ch07_ablation.plot()
    assert any("not recorded" in t.get_text() for ax in fig.axes for t in ax.texts)
    plt.close(fig)


def test_ablation_verdict_reads_the_rows(monkeypatch):
    rec = {"tile_2d_reg": (20_000, 160, 8.0), "float4_a_rows": (22_000, 148, 8.0),
           "float4": (33_000, 120, 16.0)}

    def results(name, shape=None):
        out = []
        for s in ch07_ablation.studies.get(name).steps:
            g, regs, warps = rec.get(s.kernel, (10_000, 100, 8.0))
            out.append((s, {"params": {**K5}, "gflops": {"median": g}, "binary": {"registers": regs},
                            "metrics": {m: (warps * 100 / 64 if "warps" in m else 50.0)
                                        for m, _ in ch07_ablation.COUNTERS.values()}}))
        return out
    monkeypatch.setattr(ch07_ablation.studies, "results", results)
    text = ch07_ablation.verdict()
    assert "x1.10" in text and "x1.50" in text and "1 -> 2 blocks per SM" in text
    assert "8.0 -> 16.0" in text
