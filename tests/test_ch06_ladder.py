"""ch05_06_thread_tiles.ladder_table: one kernel at two configurations, one cuBLAS row per size."""
from gemm_kernels.measure import ladder
from gemm_kernels.memory import ch05_06_thread_tiles

K5 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}


def test_two_configurations_of_one_kernel_are_two_lines():
    t = ch05_06_thread_tiles.ladder_table(
        ["tile_2d"], [("reg K5", "tile_2d_reg", K5), ("reg default", "tile_2d_reg", None)],
        ladder.LADDER_SIZES)
    names = {r["kernel"] for r in t}
    assert {"tile_2d", "reg K5", "reg default", "cublas"} <= names
    for n in {r["size"] for r in t}:
        at = [r for r in t if r["size"] == n]
        assert sum(r["chapter"] == "00" for r in at) == 1 and at[-1]["chapter"] == "00"
    k5 = {r["size"]: r["GFLOP/s"] for r in t if r["kernel"] == "reg K5"}
    default = {r["size"]: r["GFLOP/s"] for r in t if r["kernel"] == "reg default"}
    assert k5 and k5 != default
