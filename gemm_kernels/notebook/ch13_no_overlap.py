"""Chapter 13's open question about the tiled kernel's gain, one part measured: the
tiled kernel with its next tile loaded only after the tensor cores are done with the
current one (one buffer in use, the loads no longer in flight during the mma), timed
beside cuBLAS FP16, so that its share of cuBLAS can be set beside the kernel as built.
"""
from __future__ import annotations

from gemm_kernels.core.kernels import get
from gemm_kernels.core.table import Table, fmt_number
from gemm_kernels.measure import records, studies

KERNEL = "wmma_tiled"
NO_OVERLAP = "wmma_tiled: next tile loaded after the mma"
STUDY = "ch13_no_overlap"
# The loads of tile t+1 leave the top of iteration t (where they fly during the mma)
# and go, with their stores, between two barriers after it, into the one buffer.
_EDITS = (
    ("        const int cur = t & 1;\n"
     "        if (t + 1 < tiles) {               // the next tile's loads fly during the mma\n"
     "            a_next.load(A, M, K, K, row0, (t + 1) * BK);\n"
     "            b_next.load(B, K, N, N, (t + 1) * BK, col0);\n"
     "        }\n",
     "        const int cur = 0;\n"),
    ("        if (t + 1 < tiles) {   // the other buffer: its last readers passed the barrier below\n"
     "            a_next.template store<PAD>(As[cur ^ 1]);\n"
     "            b_next.template store<PAD>(Bs[cur ^ 1]);\n"
     "        }\n"
     "        __syncthreads();\n",
     "        __syncthreads();   // every warp is done with the one buffer\n"
     "        if (t + 1 < tiles) {\n"
     "            a_next.load(A, M, K, K, row0, (t + 1) * BK);\n"
     "            b_next.load(B, K, N, N, (t + 1) * BK, col0);\n"
     "            a_next.template store<PAD>(As[0]);\n"
     "            b_next.template store<PAD>(Bs[0]);\n"
     "        }\n"
     "        __syncthreads();\n"),
)


def no_overlap_kernel():
    """The tiled kernel with the next tile's loads after the mma, into the one buffer."""
    return get(KERNEL).edited(_EDITS, NO_OVERLAP)


studies.register_variant(NO_OVERLAP, no_overlap_kernel)


def no_overlap_diff():
    """What the variant changes in the tiled kernel's main loop (`display.kernel_diff`):
    the loads of the next tile move from the top of the loop to after the mma, between
    two barriers, into the one buffer."""
    from gemm_kernels.notebook.display import kernel_diff
    built = get(KERNEL).source_text()
    return kernel_diff(built, no_overlap_kernel().code, ("as built", "next tile after the mma"),
                       "for (int t = 0; t < tiles; ++t)", "// Epilogue")


def overlap_table(rec=None) -> Table:
    """The tiled kernel as built (the chapter's row) and without the overlap (this
    study's run) at the study's size, each as TFLOP/s and as a share of the cuBLAS FP16
    timed beside it: the two rows come from two runs, so compare the shares."""
    shape = tuple(studies.get(STUDY).shapes[0])
    rec = rec or studies.recording_of(STUDY, shape)
    found = studies.results(STUDY, shape, rec) if rec else []
    if not found or found[0][1] is None:
        return Table([], ["kernel"], title=f"Not recorded yet: {NO_OVERLAP} at {shape[0]}³.")
    built = rec.find(KERNEL, shape, get(KERNEL).resolve({}))
    built = next((r for r in built if "gflops" in r), None)
    rows = []
    for label, r in (("as built: the next tile's loads fly during the mma", built),
                     ("next tile loaded after the mma", found[0][1])):
        if r is None:
            continue
        share = 100 * r["gflops"]["median"] / r["reference"]["gflops"]["median"]
        rows.append({"tiled kernel": label,
                     f"TFLOP/s at {shape[0]}³": fmt_number(r["gflops"]["median"] / 1000),
                     "% of cuBLAS FP16": f"{share:.0f}%",
                     "run": records.rows_label([r], rec, gpu=False)})
    return Table(rows, list(rows[0]),
                 title=f"{records.rows_label([r for r in (built, found[0][1]) if r], rec)}; "
                       "two runs, each with its own cuBLAS FP16: compare the shares")
