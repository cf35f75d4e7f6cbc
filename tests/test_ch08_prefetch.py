"""ch08_prefetch: the variants of chapter 08's kernel (one textual change each), where
their compiled loops put the global loads, the PTX against the SASS, the recorded sweep
grouped by that, and the pictures."""
import matplotlib
import pytest

matplotlib.use("Agg")

from gemm_kernels.notebook import ch08_prefetch as c  # noqa: E402


def test_every_variant_applies_its_changes_to_the_kernel_file():
    base = c.variant_source("chapter 08's kernel")
    for name in c.VARIANTS:
        text = c.variant_source(name)
        assert (text == base) == (not c.VARIANTS[name])
    assert "if (more)" not in c.variant_source(c.WORKING)
    assert "(BN / TN), 2)" in c.variant_source(c.WORKING)


def test_the_branch_not_the_register_budget_decides_where_the_loads_go():
    rows = {r["kernel"]: r for r in c.variants_table()}
    shipped, bounded = rows["chapter 08's kernel"], rows["+ __launch_bounds__(256, 2)"]
    free, working = rows["fetch and store without if (more)"], rows[c.WORKING]
    per_step = shipped["FFMAs per step"]
    for r in (shipped, bounded):
        assert r["FFMAs between a global load and its use"] < per_step // 4
    for r in (free, working):
        assert r["FFMAs between a global load and its use"] >= per_step // 4
    assert working["registers"] <= 128 and working["spills (bytes)"] == 0
    assert working["blocks/SM"] == shipped["blocks/SM"] == 2
    assert all(r["barriers per step"] == 1 for r in rows.values())


def test_nvrtc_keeps_the_loads_first_and_ptxas_moves_them():
    order = c.ffma_before_loads()
    assert order["PTX"][0] == 0 and order["PTX"][1] == order["SASS"][1] > 0
    assert order["SASS"][0] > order["SASS"][1] // 2


def test_the_sweep_rows_pair_both_kernels_at_one_block_per_sm():
    rows = c.sweep_rows()
    assert rows and all(r["params"]["ONE_PER_SM"] for r in rows)
    assert any(r["loads in flight"] for r in rows) and not all(r["loads in flight"] for r in rows)
    for r in rows:
        assert r["ratio low"] <= r["ratio"] <= r["ratio high"]
    table = c.sweep_summary()
    assert [row["chapter 08's compiled loop"] for row in table] == \
        ["loads sunk to the store", "loads in flight"]


@pytest.mark.parametrize("draw", [lambda: c.timelines(), lambda: c.timelines(c.WORKING),
                                  lambda: c.loop_strip(["float4", "double_buffer"]),
                                  lambda: c.sweep_plot()])
def test_pictures_draw(draw):
    import matplotlib.pyplot as plt
    fig = draw()
    assert fig.axes
    plt.close(fig)


def test_staging_registers_of_the_default_tile():
    assert c.staging_registers() == (128 * 8 + 8 * 128) // 256
