"""`record` on a GPU that cannot run a kernel (the capstone's cp.async on a T4) leaves
that kernel out with the reason instead of failing on it; no GPU needed: the arch is
named and nothing is measured."""
from gemm_kernels.core import device
from gemm_kernels.measure import record


def test_record_leaves_out_what_the_gpu_cannot_run(monkeypatch):
    monkeypatch.setattr(device, "target_arch", lambda: "sm_75")
    measured = []
    monkeypatch.setattr(record, "measure", lambda k, s, c=None: measured.append(
        getattr(k, "name", k)) or {"gflops": {"median": 1.0}})
    monkeypatch.setattr(record, "sweep_rows", lambda name, log=print: [])
    log = []
    record.plan_rows(chapters=["09"], log=log.append)
    assert "capstone" not in measured and "zorder" in measured
    assert any("capstone" in line and "left out" in line and "cp.async" in line
               for line in log)
