"""Per-lane shared-memory addresses of chapters 07-09 (warp 0, one k), for the bank model.

The index expressions follow the kernels' sources (07_float4.cu, 07_float4_at.cu,
09_zorder.cu):

* ``a_store``: the transposed A store of the VEC path. Lane l of warp 0 fetched the
  float4 of tile row m = l // (BK/4) at k = 4 * (l % (BK/4)); its store number s writes
  As[k + s][m], word (k + s) * (BM + PAD) + m.
* ``a_store_at``: the same tile stored from a pre-transposed A (07_float4_at.cu): lane l
  fetched four consecutive m of one k and writes them with one STS.128.
* ``a_read`` / ``b_read``: one LDS.128 of the A column or B row piece a lane needs at one
  k, for ``layout`` "float4" (chapter 07/08: thread (tr, tc) = (t / (BN/TN), t % (BN/TN))
  reads words TM*tr + 4h and TN*tc + 4h), "rowmajor" or "zorder" (chapter 09: 4 x 4
  sub-tiles; (qr, qc) row-major in a (BM/8) x (BN/8) grid, or from the lane bits,
  qr = (b4 b1), qc = (b3 b2 b0) for warp 0).
"""
from __future__ import annotations

from gemm_kernels.memory import banks
from gemm_kernels.core.table import Table
from gemm_kernels.memory.wavefronts import WARP


def _lane_grid(layout: str, lane: int, BN: int, TN: int = 8) -> tuple[int, int]:
    if layout == "float4":
        return lane // (BN // TN), lane % (BN // TN)
    if layout == "rowmajor":
        return lane // (BN // 8), lane % (BN // 8)
    if layout == "zorder":
        b = [(lane >> i) & 1 for i in range(5)]
        return 2 * b[4] + b[1], 4 * b[3] + 2 * b[2] + b[0]
    raise ValueError(f"unknown layout {layout!r}")


def owned(layout: str, thread: int, BM: int = 128, BN: int = 128, TM: int = 8,
          TN: int = 8) -> set[tuple[int, int]]:
    """The (row, column) of every C element of the block's tile that `thread` (of warp 0
    for "zorder") computes: "float4" one TM x TN block at (TM tr, TN tc); "rowmajor" and
    "zorder" four 4 x 4 sub-tiles at rows 4 qr and BM/2 + 4 qr, columns 4 qc and
    BN/2 + 4 qc, the same offsets `_read` reads them from."""
    tr, tc = _lane_grid(layout, thread, BN, TN)
    if layout == "float4":
        rows, cols = range(TM * tr, TM * tr + TM), range(TN * tc, TN * tc + TN)
    else:
        rows = [h * BM // 2 + 4 * tr + i for h in (0, 1) for i in range(4)]
        cols = [h * BN // 2 + 4 * tc + j for h in (0, 1) for j in range(4)]
    return {(r, c) for r in rows for c in cols}


def a_store(BM: int = 128, BK: int = 8, PAD: int = 0, s: int = 0) -> list[int]:
    """Byte addresses of store number s (0..3) of the transposed A tile, warp 0."""
    lda = BM + PAD
    out = []
    for lane in range(WARP):
        m, k = lane // (BK // 4), 4 * (lane % (BK // 4))
        out.append(((k + s) * lda + m) * 4)
    return out


def a_store_at(BM: int = 128, BK: int = 8, PAD: int = 0) -> list[int]:
    """Byte addresses of the STS.128 of the A tile in 07_float4_at.cu (A^T given), warp
    0: lane l fetched float4 number f = l of the tile, four consecutive m of one k
    (k = f // (BM/4), m = 4 * (f % (BM/4))), and stores it whole at As[k][m]."""
    lda = BM + PAD
    out = []
    for lane in range(WARP):
        k, m = lane // (BM // 4), 4 * (lane % (BM // 4))
        out.append((k * lda + m) * 4)
    return out


def _read(layout: str, side: int, BN: int, TN: int, per_thread: int, extent: int,
          half: int) -> list[int]:
    """Byte addresses of LDS.128 number `half` of the A (side 0: the lane's row) or B
    (side 1: its column) piece at one k, warp 0."""
    out = []
    for lane in range(WARP):
        q = _lane_grid(layout, lane, BN, TN)[side]
        w = per_thread * q + 4 * half if layout == "float4" else 4 * q + half * extent // 2
        out.append(w * 4)
    return out


def a_read(layout: str, BM: int = 128, BN: int = 128, TM: int = 8, TN: int = 8,
           half: int = 0) -> list[int]:
    """Byte addresses of the A LDS.128 number `half` (0 or 1) in row k of As, warp 0."""
    return _read(layout, 0, BN, TN, TM, BM, half)


def b_read(layout: str, BM: int = 128, BN: int = 128, TM: int = 8, TN: int = 8,
           half: int = 0) -> list[int]:
    """Byte addresses of the B LDS.128 number `half` (0 or 1) in row k of Bs, warp 0."""
    return _read(layout, 1, BN, TN, TN, BN, half)


def step_table(configs, title: str = "bank model, warp 0, 128 x 128 x 8 tile") -> Table:
    """Bank-model wavefronts of warp 0 for one k (reads) and one tile copy (A stores).

    configs: (label, layout, PAD) triples at the default 128 x 128 x 8 tile."""
    rows = []
    for label, layout, pad in configs:
        st = [banks.analyse(a_store(PAD=pad, s=s)) for s in range(4)]
        ar = [banks.analyse(a_read(layout, half=h), 16) for h in (0, 1)]
        br = [banks.analyse(b_read(layout, half=h), 16) for h in (0, 1)]
        rows.append({"kernel": label, "A STS.32 x4": sum(a.wavefronts for a in st),
                     "A LDS.128 x2": sum(a.wavefronts for a in ar),
                     "B LDS.128 x2": sum(a.wavefronts for a in br),
                     "reads per k": sum(a.wavefronts for a in ar + br),
                     "read conflicts": sum(a.conflicts for a in ar + br),
                     "store conflicts": sum(a.conflicts for a in st)})
    return Table(rows, list(rows[0]), title=title)
