"""The shared-memory bank model, the hardware probe's patterns, and the ncu CSV reader.

The unit cases are worked out by hand from the rules in gemm_kernels/banks.py. The last
test compares the model with Nsight Compute measurements in tests/data/bank_probe.json,
written on a GPU host by `python -m gemm_kernels.memory.probe --out tests/data/bank_probe.json`.
"""
import json
import math
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from gemm_kernels import banks
from gemm_kernels.measure import ncu
from gemm_kernels.memory import probe as bank_probe
from gemm_kernels.memory.banks import analyse, broadcast, strided, tile, wavefronts

DATA = Path(__file__).parent / "data"
OFF = None


# ------------------------------------------------------------------ 32-bit

@pytest.mark.parametrize("stride, expected", [(1, 1), (2, 2), (4, 4), (8, 8), (16, 16),
                                              (32, 32), (33, 1), (3, 1), (64, 32)])
def test_width4_strides(stride, expected):
    assert wavefronts(strided(stride)) == expected


def test_width4_stride_is_byte_offsets():
    assert strided(1)[:3] == [0, 4, 8]
    assert wavefronts([4 * i for i in range(32)]) == 1


def test_broadcast_one_word():
    a = analyse(broadcast(40))
    assert (a.wavefronts, a.ideal, a.conflicts) == (1, 1, 0)
    assert a.phases[0].words_per_bank[10] == 1


def test_two_word_broadcast_different_banks():
    assert wavefronts([0] * 16 + [4] * 16) == 1


def test_two_word_broadcast_same_bank():
    a = analyse([0, 128] * 16)           # words 0 and 32, both bank 0
    assert (a.wavefronts, a.conflicts) == (2, 1)
    assert a.phases[0].words_per_bank[0] == 2
    assert a.phases[0].bank_words() == {0: (0, 32)}


def test_degree_counts_distinct_words_not_lanes():
    # 16 lanes read word 0 and 16 read word 32: still a 2-way conflict, not 16-way.
    assert wavefronts([0] * 16 + [128] * 16) == 2
    # three words in bank 5
    assert wavefronts([20] * 10 + [148] * 10 + [276] * 12) == 3


def test_inactive_lanes_width4():
    # stride 32 but only 4 lanes active -> 4 words in bank 0
    addrs = [i * 128 if i < 4 else OFF for i in range(32)]
    assert wavefronts(addrs) == 4
    assert wavefronts([None] * 31 + [128]) == 1
    a = analyse([None] * 32)
    assert (a.wavefronts, a.ideal, a.conflicts) == (0, 0, 0)


def test_none_means_inactive_and_negative_is_refused():
    assert analyse([None] * 16 + [0] * 16).active_lanes == tuple(range(16, 32))
    with pytest.raises(ValueError, match="negative"):
        analyse([-4] * 16 + [0] * 16)


def test_padding_rows():
    # column of float[32][32]: 32-way; float[32][33]: conflict-free
    assert strided(32, padding=1)[:3] == [0, 33 * 4, 66 * 4]
    assert wavefronts(strided(32)) == 32
    assert wavefronts(strided(32, padding=1)) == 1
    # float[32][34] (+2): lanes i and i+16 collide -> 2-way
    assert wavefronts(strided(32, padding=2)) == 2
    # padding applies per row_elems elements: a row read is unaffected
    assert strided(1, padding=1, row_elems=32) == [4 * i for i in range(32)]
    # rows of 16 floats + 1: lane 16 lands on word 17, lane 31 on word 32 (bank 0, like lane 0)
    assert wavefronts(strided(1, padding=1, row_elems=16)) == 2


def test_tile_helper():
    addrs = tile(lambda i: i, lambda i: 2, 33)
    assert addrs == strided(32, padding=1, base=8)
    assert tile([None] * 32, list(range(32)), 32) == [None] * 32


# ------------------------------------------------------------------ 64-bit

def test_width8_consecutive_two_phases():
    a = analyse(strided(1, 8), 8)
    assert (a.wavefronts, a.ideal, a.conflicts, a.merge) == (2, 2, 0, None)
    assert [p.lanes for p in a.phases] == [tuple(range(16)), tuple(range(16, 32))]
    lane3 = a.phases[0].accesses[3]
    assert lane3.words == (6, 7) and lane3.banks == (6, 7)


def test_width8_all_same_merges():
    a = analyse(broadcast(0, 8), 8)
    assert (a.wavefronts, a.ideal, a.merge) == (1, 1, "i^1")
    assert len(a.phases) == 1 and a.phases[0].merged


def test_width8_pairs_merge():
    xor1 = [(i // 2) * 8 for i in range(32)]              # 0,0,8,8,...
    xor2 = [((i // 4) * 2 + i % 2) * 8 for i in range(32)]  # 0,8,0,8,16,24,16,24,...
    assert analyse(xor1, 8).merge == "i^1" and wavefronts(xor1, 8) == 1
    assert analyse(xor2, 8).merge == "i^2" and wavefronts(xor2, 8) == 1


def test_width8_merged_phase_can_conflict():
    # i^1 pairs, doubles 0,2,4,...,30: double 16 (words 32,33) shares banks 0,1 with
    # double 0 in the single merged phase.
    a = analyse([(i // 2) * 16 for i in range(32)], 8)
    assert (a.wavefronts, a.ideal, a.conflicts) == (2, 1, 1)


def test_width8_one_different_pair_breaks_merge():
    addrs = [(i // 2) * 8 for i in range(32)]
    addrs[31] = 512                                        # lane 31 != lane 30
    a = analyse(addrs, 8)
    assert a.merge is None and a.wavefronts == 2


def test_width8_inactive_partner_allows_merge():
    # only even lanes: for every active i, i^1 is inactive -> merged, 16 doubles fit
    addrs = [(i // 2) * 8 if i % 2 == 0 else OFF for i in range(32)]
    a = analyse(addrs, 8)
    assert (a.merge, a.wavefronts) == ("i^1", 1)
    # without the merge rule the two halves would each cost one
    assert analyse(strided(1, 8, active=lambda i: i < 16), 8).wavefronts == 1


def test_width8_identical_halves_do_not_merge():
    # i^16 equality is not one of the rules: two phases
    assert wavefronts([(i % 16) * 8 for i in range(32)], 8) == 2


def test_width8_stride2_and_column():
    assert wavefronts(strided(2, 8), 8) == 4
    assert wavefronts(strided(32, 8), 8) == 32      # 16 words in banks 0/1 per half
    assert wavefronts(strided(32, 8, padding=1), 8) == 2


def test_width8_seed003_double_tile():
    # double A_shared[16][16], B_shared[16][16], block (16, 16): a warp is ty = 0, 1.
    a_row = tile(lambda i: i // 16, lambda i: 3, 16, elem_bytes=8)   # A_shared[ty][k]
    b_col = tile(lambda i: 3, lambda i: i % 16, 16, elem_bytes=8)    # B_shared[k][tx]
    assert wavefronts(b_col, 8) == 2 and analyse(b_col, 8).conflicts == 0
    a = analyse(a_row, 8)          # merged (i^1), but words 6,7 and 38,39 share banks
    assert (a.wavefronts, a.conflicts) == (2, 1)


# ------------------------------------------------------------------ 128-bit

def test_width16_consecutive_four_phases():
    a = analyse(strided(1, 16), 16)
    assert (a.wavefronts, a.ideal, a.conflicts) == (4, 4, 0)
    assert [len(p.lanes) for p in a.phases] == [8, 8, 8, 8]
    assert a.phases[1].accesses[0].banks == (0, 1, 2, 3)


def test_width16_quarters_merge():
    xor1 = [(i // 2) * 16 for i in range(32)]
    a = analyse(xor1, 16)
    assert (a.wavefronts, a.ideal, a.merge) == (2, 2, "i^1")
    assert [p.lanes for p in a.phases] == [tuple(range(16)), tuple(range(16, 32))]
    xor2 = [((i // 4) * 2 + i % 2) * 16 for i in range(32)]
    assert wavefronts(xor2, 16) == 2


def test_width16_half_warps_never_merge():
    a = analyse(broadcast(0, 16), 16)
    assert (a.wavefronts, a.ideal, a.conflicts) == (2, 2, 0)
    # only half-warp 1 active: one phase of cost 1, the other empty
    b = analyse([OFF] * 16 + [0] * 16, 16)
    assert b.wavefronts == 1 and [p.wavefronts for p in b.phases] == [0, 1]


def test_width16_merge_rule_is_warp_wide():
    # Only half-warp 0 meets the pair rule. Measured on the H200 (bank_probe.json,
    # w16_merge_first_half_only): 4 wavefronts, so the rule is checked warp-wide.
    addrs = [(i // 2) * 16 if i < 16 else (32 + i) * 16 for i in range(32)]
    assert analyse(addrs, 16).wavefronts == 4
    assert analyse(addrs, 16, quarter_merge_scope="half").wavefronts == 3


def test_width16_conflicts():
    assert wavefronts(strided(2, 16), 16) == 8        # 2-way in every quarter
    assert wavefronts(strided(32, 16), 16) == 32      # 8 lanes on banks 0-3 per quarter
    assert wavefronts(strided(32, 16, padding=1), 16) == 4
    assert wavefronts(strided(1, 16, active=lambda i: i < 8), 16) == 1


def test_width16_gemm_fragments():
    # BM = BN = 128, TM = TN = 8, 16 threads along a row of threads
    a = tile(lambda i: 5, lambda i: (i // 16) * 8, 128)
    b_tn8 = tile(lambda i: 5, lambda i: (i % 16) * 8, 128)
    b_split = tile(lambda i: 5, lambda i: (i % 16) * 4, 128)
    assert wavefronts(a, 16) == 2
    assert (wavefronts(b_tn8, 16), analyse(b_tn8, 16).conflicts) == (8, 4)
    assert (wavefronts(b_split, 16), analyse(b_split, 16).conflicts) == (4, 0)


def test_gemm_transposed_store_padding():
    store = tile(lambda i: (i % 2) * 4, lambda i: i // 2, 128)
    padded = tile(lambda i: (i % 2) * 4, lambda i: i // 2, 132)
    assert wavefronts(store) == 2 and wavefronts(padded) == 1


def test_ideal_and_distinct_bytes():
    a = analyse(strided(1, 16), 16)
    assert a.distinct_bytes == 512 and a.ideal == 4
    b = analyse(broadcast(0, 16), 16)
    assert b.distinct_bytes == 16 and b.ideal == 2
    assert "2 wavefront(s)" in b.summary()


# ------------------------------------------------------------------ errors

def test_bad_lane_count():
    with pytest.raises(ValueError, match="exactly 32"):
        wavefronts([0] * 31)
    with pytest.raises(ValueError, match="exactly 32"):
        wavefronts([0] * 33)


def test_bad_width():
    with pytest.raises(ValueError, match="width must be 4, 8 or 16"):
        wavefronts([0] * 32, 2)
    with pytest.raises(ValueError, match="width"):
        strided(1, width=12)


def test_misaligned_address():
    with pytest.raises(ValueError, match=r"lane 5: address 20 is not aligned .* 8"):
        wavefronts([0, 8, 16, 24, 32, 20] + [0] * 26, 8)
    with pytest.raises(ValueError, match="not aligned"):
        wavefronts([2] + [0] * 31)
    with pytest.raises(ValueError, match="not aligned"):
        wavefronts(strided(33, 4, base=0)[:31] + [8], 16)


def test_bad_address_type():
    with pytest.raises(ValueError, match="integer"):
        wavefronts([1.5] + [0] * 31)
    with pytest.raises(ValueError, match="sequence"):
        wavefronts(5)


def test_bad_helper_arguments():
    with pytest.raises(ValueError, match="padding"):
        strided(1, padding=-1)
    with pytest.raises(ValueError, match="32 flags"):
        strided(1, active=[True] * 3)


def test_plot_banks_runs():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ax = banks.plot_banks(analyse(strided(2, 16), 16))
    assert "8 wavefront(s)" in ax.get_title()
    plt.close(ax.figure)


# ------------------------------------------------------------------ probe patterns

def test_probe_patterns_cover_the_brief():
    names = [p.name for p in bank_probe.PATTERNS]
    assert len(names) >= 24 and len(set(names)) == len(names)
    assert {p.width for p in bank_probe.PATTERNS} == {4, 8, 16}
    for s in (1, 2, 4, 8, 16, 32, 33):
        assert f"w4_stride{s}" in names
    for p in bank_probe.PATTERNS:
        assert len(p.offsets()) == 32
        assert max(p.offsets()) + p.width <= bank_probe.SMEM_BYTES


def test_probe_expected_output():
    p = bank_probe.by_name("w16_consecutive")
    assert bank_probe.expected_output(p)[1] == float(4 + 5 + 6 + 7)
    assert bank_probe.expected_output(bank_probe.by_name("w4_all_inactive")) == [-1.0] * 32


def test_probe_list_cli(capsys):
    assert bank_probe.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "w16_gemm_Bs_fragment_tn8" in out


def test_probe_kernel_has_exactly_one_shared_load():
    """The probe must issue exactly one LDS / LDS.64 / LDS.128, so ncu measures only it."""
    from gemm_kernels import compiler
    try:
        ptxas, nvdisasm = compiler._tool("ptxas"), compiler._tool("nvdisasm")
    except RuntimeError as e:
        pytest.skip(str(e))
    from cupy_backends.cuda.libs import nvrtc
    src = bank_probe.SOURCE.read_text()
    for width, op in ((4, "LDS"), (8, "LDS.64"), (16, "LDS.128")):
        expr = f"bank_probe<{width}>"
        prog = nvrtc.createProgram(src, "bank_probe.cu", [], [])
        try:
            nvrtc.addNameExpression(prog, expr)
            nvrtc.compileProgram(prog, ["-std=c++17", "-arch=compute_90"])
            text = nvrtc.getPTX(prog)
        finally:
            nvrtc.destroyProgram(prog)
        text = (text.decode() if isinstance(text, bytes) else text).rstrip("\0")
        with tempfile.TemporaryDirectory() as d:
            Path(d, "k.ptx").write_text(text)
            subprocess.run([ptxas, "-arch=sm_90", "-o", f"{d}/k.cubin", f"{d}/k.ptx"],
                           check=True, capture_output=True)
            sass = subprocess.run([nvdisasm, "-c", f"{d}/k.cubin"], check=True,
                                  capture_output=True, text=True).stdout
        ops = [tok for l in sass.splitlines() for tok in l.replace(";", " ").split()
               if tok.startswith("LDS")]
        assert ops == [op], f"{expr}: shared loads in SASS {ops}"


# ------------------------------------------------------------------ ncu CSV reader

# A made-up sample in ncu's --csv "details" layout (format only, not a measurement),
# with ncu's ==PROF== lines and a line of program output around it.
NCU_DETAILS = '''==PROF== Connected to process 4242 (/usr/bin/python3.11)
==PROF== Profiling "bank_probe" - 0: 0%....50%....100% - 1 pass
program output, not CSV
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"
"1","4242","python3.11","127.0.0.1","void bank_probe<16>(const int *, float *)","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum","","1,234","","","","",""
"0","4242","python3.11","127.0.0.1","void bank_probe<4>(const int *, float *)","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","","31","","","","",""
"0","4242","python3.11","127.0.0.1","void bank_probe<4>(const int *, float *)","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum","","32","","","","",""
"1","4242","python3.11","127.0.0.1","void bank_probe<16>(const int *, float *)","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","","n/a","","","","",""
==PROF== Disconnected from process 4242
'''

NCU_RAW = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
"","","","","","","","","","","",""
"0","7","python3.11","h","bank_probe","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","4"
"1","7","python3.11","h","bank_probe","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","2,048.5"
'''


def test_ncu_number():
    assert ncu.number("1,234") == 1234.0
    assert ncu.number("1,234,567.25") == 1234567.25
    assert ncu.number(" 7 ") == 7.0
    assert math.isnan(ncu.number("n/a"))


def test_ncu_parse_details_page():
    launches = ncu.parse_csv(NCU_DETAILS)
    assert [l["id"] for l in launches] == [0, 1]
    assert launches[0]["kernel"] == "void bank_probe<4>(const int *, float *)"
    assert launches[0]["metrics"] == {
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 31.0,
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 32.0}
    assert launches[1]["metrics"]["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] == 1234.0
    assert math.isnan(launches[1]["metrics"]["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"])


def test_ncu_parse_raw_page():
    launches = ncu.parse_csv(NCU_RAW)
    assert [l["metrics"] for l in launches] == [
        {"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 4.0},
        {"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 2048.5}]


def test_ncu_parse_without_header():
    with pytest.raises(ValueError, match="header"):
        ncu.parse_csv("==ERROR== ERR_NVGPUCTRPERM\n")


def _fake_ncu(tmp_path, stdout: str, rc: int = 0, stderr: str = "") -> str:
    (tmp_path / "out.txt").write_text(stdout)
    (tmp_path / "err.txt").write_text(stderr)
    script = tmp_path / "ncu"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/args.txt\n"
                      f"cat {tmp_path}/out.txt\ncat {tmp_path}/err.txt >&2\nexit {rc}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_ncu_profile_with_fake_ncu(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu, "executable", lambda: _fake_ncu(tmp_path, NCU_DETAILS))
    launches = ncu.profile(["python", "x.py"], bank_probe.METRICS, "bank_probe")
    assert len(launches) == 2
    args = (tmp_path / "args.txt").read_text().split()
    assert args[-2:] == ["python", "x.py"]
    assert "--csv" in args and "regex:bank_probe" in args
    assert args[args.index("--target-processes") + 1] == "all"
    assert args[args.index("--metrics") + 1] == ",".join(bank_probe.METRICS)


def test_ncu_profile_failure_reports_stderr(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu, "executable",
                        lambda: _fake_ncu(tmp_path, "", rc=3, stderr="boom: no device"))
    with pytest.raises(RuntimeError, match="(?s)return code: 3.*boom: no device"):
        ncu.profile(["true"], ["a.sum"], "k")


def test_ncu_profile_missing_metric(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu, "executable", lambda: _fake_ncu(tmp_path, NCU_RAW))
    with pytest.raises(RuntimeError, match="lacks metrics"):
        ncu.profile(["true"], bank_probe.METRICS, "bank_probe")


def test_ncu_profile_nothing_profiled(tmp_path, monkeypatch):
    header = NCU_DETAILS.splitlines()[3] + "\n"
    monkeypatch.setattr(ncu, "executable", lambda: _fake_ncu(tmp_path, header))
    with pytest.raises(RuntimeError, match="no launch"):
        ncu.profile(["true"], ["a.sum"], "k")


def test_ncu_missing(monkeypatch):
    monkeypatch.setattr(ncu, "executable", lambda: None)
    assert ncu.available() is False
    with pytest.raises(RuntimeError, match="not found"):
        ncu.profile(["true"], ["a.sum"], "k")


def test_probe_profile_assembles_record(tmp_path, monkeypatch):
    """profile()/main() with ncu replaced: launch order, JSON layout, the agreement table.
    The 'measurements' here are the model's own numbers, so this checks plumbing only."""
    pats = bank_probe.PATTERNS

    def fake_profile(argv, metrics, kernel_regex, **kw):
        assert argv[1:4] == ["-m", "gemm_kernels.memory.probe", "--launch"]
        manifest = argv[argv.index("--manifest") + 1]
        Path(manifest).write_text(json.dumps({
            "device": {"name": "TEST DEVICE", "compute_capability": "9.0"},
            "launched": [{"name": p.name, "ok": True, "mismatched_lanes": []} for p in pats]}))
        return [{"id": k, "kernel": f"void bank_probe<{p.width}>(const int *, float *)",
                 "metrics": {metrics[0]: float(p.analysis().wavefronts),
                             metrics[1]: float(p.analysis().conflicts)}}
                for k, p in enumerate(pats)]

    monkeypatch.setattr(ncu, "profile", fake_profile)
    monkeypatch.setattr(ncu, "available", lambda: True)
    monkeypatch.setattr(ncu, "version", lambda: "fake ncu")
    out = tmp_path / "probe.json"
    assert bank_probe.main(["--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert rec["device"]["name"] == "TEST DEVICE" and rec["created"].endswith("Z")
    assert [r["name"] for r in rec["results"]] == [p.name for p in pats]
    r0 = rec["results"][0]
    assert set(r0) >= {"name", "width", "addresses", "measured_wavefronts",
                       "measured_conflicts", "model_wavefronts", "model_conflicts"}


def test_probe_profile_detects_order_mismatch(monkeypatch):
    def fake_profile(argv, metrics, kernel_regex, **kw):
        manifest = argv[argv.index("--manifest") + 1]
        Path(manifest).write_text(json.dumps({"device": {"name": "X"}, "launched": []}))
        return [{"id": k, "kernel": "void bank_probe<16>(const int *, float *)",
                 "metrics": {m: 1.0 for m in metrics}} for k in range(len(bank_probe.PATTERNS))]

    monkeypatch.setattr(ncu, "profile", fake_profile)
    monkeypatch.setattr(ncu, "available", lambda: True)
    with pytest.raises(RuntimeError, match="launch order mismatch"):
        bank_probe.profile()


# ------------------------------------------------------------------ hardware

def test_model_matches_hardware_measurements():
    path = DATA / "bank_probe.json"
    if not path.exists():
        pytest.skip(f"{path.relative_to(Path(__file__).parent.parent)} is missing: no "
                    "hardware measurements to compare with. Produce it on a GPU host with "
                    "Nsight Compute: python -m gemm_kernels.memory.probe --out "
                    "tests/data/bank_probe.json")
    record = json.loads(path.read_text())
    results = record["results"]
    assert results, "bank_probe.json has no results"
    wrong = []
    for r in results:
        a = analyse(r["addresses"], r["width"])
        if (a.wavefronts, a.conflicts) != (r["measured_wavefronts"], r["measured_conflicts"]):
            wrong.append(f"{r['name']} (width {r['width']}): model {a.wavefronts} wavefronts / "
                         f"{a.conflicts} conflicts, measured {r['measured_wavefronts']} / "
                         f"{r['measured_conflicts']}")
    device = record.get("device", {}).get("name", "?")
    assert not wrong, f"model disagrees with {device} on:\n" + "\n".join(wrong)


def test_phase_label_names_the_hardware_phases_a_merge_covers():
    # a broadcast per half-warp (LDS.128): lanes 0-15 one address, 16-31 another, so
    # hardware phases 0+1 and 2+3 are each served as one
    half = analyse([0] * 16 + [64 * 4] * 16, 16)
    assert [banks.phase_label(p, 16) for p in half.phases] == [
        "phases 0+1 merged: 1 wf", "phases 2+3 merged: 1 wf"]
    plain = analyse(strided(2, 16), 16)
    assert banks.phase_label(plain.phases[2], 16).startswith("phase 2: ")
