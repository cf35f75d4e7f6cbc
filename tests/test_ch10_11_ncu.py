"""The Nsight Compute command chapters 10 and 11 give for the questions their recording
leaves open (gemm_kernels.notebook.ch10_11_ncu): one launch per configuration, the
registry's entry names in the kernel filter, the chapter's parameters, valid shell."""
import shlex

from gemm_kernels.notebook import ch10_11_ncu, ch11_wide


def test_the_command_profiles_one_launch_of_each_configuration():
    cmd = ch10_11_ncu.ncu_command([("dgemm_tiled", {"BLOCK": 8}), ("dgemm_tiled", {"BLOCK": 16})],
                                  (2048,) * 3, ["m1", "m2"])
    argv = shlex.split(cmd)
    assert argv[:2] == ["ncu", "--target-processes"]
    assert argv[argv.index("-k") + 1] == "regex:dgemm_tiled"
    assert argv[argv.index("--launch-count") + 1] == "2"
    assert argv[argv.index("--metrics") + 1] == "m1,m2"
    script = argv[argv.index("-c") + 1]
    assert script.count("timing.measure(") == 2
    assert '{"BLOCK": 8}' in script and '{"BLOCK": 16}' in script
    compile(script, "<ncu script>", "exec")               # valid Python


def test_the_chapters_commands_name_their_kernels_and_counters():
    cmd = ch11_wide.stall_command([("sgemm_tiled_vec", {"BLOCK": 32, "VEC": v}) for v in (2, 4)])
    assert '"VEC": 2' in cmd and '"VEC": 4' in cmd and "(2048, 2048, 2048)" in cmd
    assert all(m in cmd for m in ch11_wide.STALL_METRICS)
