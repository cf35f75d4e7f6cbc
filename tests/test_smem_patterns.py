from gemm_kernels import banks
from gemm_kernels.memory import ch07_09_patterns as sp


def test_a_store_conflicts_and_padding():
    assert banks.analyse(sp.a_store(PAD=0)).wavefronts == 2
    assert banks.analyse(sp.a_store(PAD=4)).wavefronts == 1
    # BK = 16: four lanes per row, PAD = 4 leaves a 2-way conflict (09_zorder.cu)
    assert banks.analyse(sp.a_store(BK=16, PAD=4)).wavefronts == 2


def test_reads_match_source_comments():
    # 07_float4.cu: 2 (A) + 8 (B) per LDS.128; 09_zorder.cu: rowmajor 2 + 4, zorder 2 + 2
    assert banks.analyse(sp.a_read("float4"), 16).wavefronts == 2
    assert banks.analyse(sp.b_read("float4"), 16).wavefronts == 8
    assert banks.analyse(sp.a_read("rowmajor"), 16).wavefronts == 2
    assert banks.analyse(sp.b_read("rowmajor"), 16).wavefronts == 4
    assert banks.analyse(sp.a_read("zorder", half=1), 16).wavefronts == 2
    assert banks.analyse(sp.b_read("zorder", half=1), 16).wavefronts == 2


def test_step_table():
    t = sp.step_table([("float4", "float4", 0), ("zorder", "zorder", 4)])
    assert t[0]["reads per k"] == 20 and t[1]["reads per k"] == 8
    assert t[0]["A STS.32 x4"] == 8 and t[1]["A STS.32 x4"] == 4
