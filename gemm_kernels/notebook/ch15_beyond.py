"""Chapter 15's last section: two further steps past the warp-specialised kernel, each
timed beside it in one run at every size.

* `wgmma_persistent` (cuda/15_wgmma_persistent.cu): one block per SM walks the tiles, so
  the copies of its next tile land while its consumers write C.
* `wgmma_cluster` (cuda/15_wgmma_cluster.cu): clusters of 2 blocks one above the other,
  each copying half of the B tile they share and TMA-multicasting it into both.

The cluster kernel's first version released every consumer's arrival on the partner's
barrier at cluster scope (`mbarrier.arrive.release.cluster`); that text is kept as a
variant (`RELEASE_CLUSTER`), timed in the same study, so the chapter shows what the
stronger ordering cost, measured. Every number is read from the recording that holds the
studies; a missing study is said in words. Last, cuBLAS's own BF16 GEMM beside its FP16
one (`bf16_summary`): the other 16-bit input format of the same tensor cores.
"""
from __future__ import annotations

import functools

from gemm_kernels.core.launch import kernel_of
from gemm_kernels.measure import studies, timing
from gemm_kernels.notebook.display import Text

PERSISTENT, CLUSTER, LADDER = "ch15_persistent", "ch15_cluster", "ch13_15_ladder"
RELEASE_CLUSTER = "wgmma_cluster: arrivals released at cluster scope"
_RELEASE_EDITS = (('asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\\n"',
                   'asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\\n"'),)


@functools.lru_cache(maxsize=None)
def release_cluster_kernel():
    """The cluster kernel whose remote arrivals carry .release.cluster: every arrival on
    the partner's barrier first makes the thread's earlier memory operations visible to
    the whole cluster."""
    return kernel_of("wgmma_cluster").edited(_RELEASE_EDITS, RELEASE_CLUSTER)


def _register_variants():
    studies.register_variant(RELEASE_CLUSTER, release_cluster_kernel)


_register_variants()


def recording():
    """The recording that holds both studies (the one shown if it does), or None."""
    rec = studies.complete_recording(PERSISTENT)
    return rec if any(r for _, r in studies.results(PERSISTENT, rec=rec)) else None


def _shares(name: str, rec) -> dict[str, list[tuple[int, float | None, float | None]]]:
    """{step label: [(size, % of cuBLAS, TFLOP/s)]} of study `name` in `rec`."""
    out = {}
    for shape in studies.get(name).shapes:
        for step, row in studies.results(name, shape, rec):
            share = timing.share(row) if row else None
            rate = row["gflops"]["median"] / 1e3 if row else None
            out.setdefault(step.label, []).append((shape[0], share, rate))
    return out


def plot_beyond(rec=None, axes=None):
    """Per size, each step of the two studies in % of cuBLAS FP16 timed beside it: the
    per-tile kernel, the persistent ones, the clusters (and the first cluster version)."""
    import matplotlib.pyplot as plt
    rec = rec or recording()
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    for ax, name, title in ((axes[0], PERSISTENT, "one block per SM walking the tiles"),
                            (axes[1], CLUSTER, "clusters of 2 blocks sharing B")):
        data = _shares(name, rec) if rec else {}
        if not any(s is not None for pts in data.values() for _, s, _ in pts):
            ax.text(0.5, 0.5, "not in this recording", ha="center", transform=ax.transAxes)
            ax.set_axis_off()
            continue
        for label, pts in data.items():
            xs = [n for n, s, _ in pts if s is not None]
            ys = [s for _, s, _ in pts if s is not None]
            style = "k--" if label.startswith("one block per tile") else "-o"
            ax.plot(xs, ys, style, label=label, markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_xticks([n for n, _, _ in next(iter(data.values()))],
                      [f"{n}³" for n, _, _ in next(iter(data.values()))])
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("size")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    axes[0].set_ylabel("% of cuBLAS FP16 (timed beside it)")
    if rec:
        axes[0].figure.suptitle(f"Each line in one run ({rec.device['name']})", fontsize=10)
    return axes


def _cublas_spread(rec) -> dict[int, tuple[float, float]]:
    """{size: (lowest, highest) cuBLAS rate in TFLOP/s} over the rows of both studies."""
    out = {}
    for shape in studies.get(PERSISTENT).shapes:
        refs = [r["reference"]["gflops"]["median"] / 1e3
                for name in (PERSISTENT, CLUSTER)
                for _, r in studies.results(name, shape, rec) if r]
        if refs:
            out[shape[0]] = (min(refs), max(refs))
    return out


def beyond_summary(rec=None) -> Text:
    """Each study's steps against the per-tile kernel, per size, in percentage points of
    cuBLAS; a difference larger than cuBLAS's own spread across the run's rows at that
    size (in per cent of its lowest rate) is marked, the others are what the run itself
    moves."""
    rec = rec or recording()
    missing = Text("The persistent and cluster kernels are not in this recording yet.")
    if rec is None:
        return missing
    spread = _cublas_spread(rec)
    moves = {n: 100 * (hi / lo - 1) for n, (lo, hi) in spread.items()}
    out = []
    for name in (PERSISTENT, CLUSTER):
        data = _shares(name, rec)
        base = data.pop(studies.get(name).steps[0].label)
        for label, pts in data.items():
            diffs = [f"{n}³ {round(s - b):+d}" + ("*" if abs(s - b) > moves.get(n, 0) else "")
                     for (n, s, _), (_, b, _) in zip(pts, base)
                     if s is not None and b is not None]
            if diffs:
                out.append(f"* {label}: {', '.join(diffs)} points of cuBLAS against one "
                           f"block per tile.")
    if not out:
        return missing
    out.append("cuBLAS itself, across the rows of the run: " + "; ".join(
        f"{n}³ {lo:,.0f} to {hi:,.0f} TFLOP/s ({moves[n]:.1f}%)"
        for n, (lo, hi) in spread.items()) + ". * marks a difference larger than that.")
    return Text("\n".join(out))


def bf16_summary(rec=None) -> Text:
    """cuBLAS with BF16 inputs beside cuBLAS FP16, at each size of the one-run ladder:
    the other 16-bit format of the tensor cores, same FP32 accumulation."""
    rec = rec or studies.complete_recording(LADDER)
    out = []
    for shape in studies.get(LADDER).shapes:
        rows = rec.find(timing.CUBLAS_BF16, shape) if rec else []
        if rows and timing.share(rows[0]) is not None:
            r = rows[0]
            out.append(f"{shape[0]}³: cuBLAS BF16 {r['gflops']['median'] / 1e3:,.0f} TFLOP/s, "
                       f"{timing.share(r):.0f}% of cuBLAS FP16 timed beside it "
                       f"({r['reference']['gflops']['median'] / 1e3:,.0f})")
    if not out:
        return Text("cuBLAS BF16 is not in this recording.")
    return Text(f"On the {rec.device['name']}, in the ladder's run: " + "; ".join(out) + ".")
