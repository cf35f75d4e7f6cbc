"""Which global element sits in which shared-memory slot: chapter 11, appendix D (chapter
03's index arithmetic, in double precision).

`dgemm_tiled` (cuda/11_dgemm_tiled.cu) stages, for each step `tile` along K,

    A_shared[threadIdx.y][threadIdx.x] = A[row * dim + j]
    B_shared[threadIdx.y][threadIdx.x] = B[i * dim + col]

with
    row = blockIdx.y * blockDim.y + threadIdx.y      col = blockIdx.x * blockDim.x + threadIdx.x
    j   = tile * BLOCK + threadIdx.x                 i   = tile * BLOCK + threadIdx.y

for square dim x dim matrices and blockDim = (BLOCK, BLOCK). This module evaluates those
same expressions in Python, without a GPU, and lays the result out slot by slot, with
each slot's shared-memory byte address (from the start of its array) and bank.
"""
from __future__ import annotations

from dataclasses import dataclass

from gemm_kernels.memory.banks import BANKS, WORD as BANK_BYTES


@dataclass(frozen=True)
class SharedTile:
    """One shared array after the loads of one step. Every table is indexed [ty][tx]."""
    name: str              # "A_shared" or "B_shared"
    matrix: str            # "A" or "B"
    offset: list           # global element offset: A[offset] (row-major, dim columns)
    row: list              # offset // dim: the global row
    col: list              # offset % dim: the global column
    address: list          # byte address in the shared array, (ty * BLOCK + tx) * elem_bytes
    bank: list             # bank of the element's first 4-byte word: (address / 4) % 32
    elem_bytes: int

    def banks_of(self, ty: int, tx: int) -> tuple[int, ...]:
        """Every bank the element occupies (two for an 8-byte double)."""
        first = self.address[ty][tx] // BANK_BYTES
        return tuple((first + w) % BANKS for w in range(self.elem_bytes // BANK_BYTES))

    def expression(self, ty: int, tx: int, dim: int) -> str:
        """The slot's source in the kernel's own notation, e.g. 'A[17*256 + 18]'."""
        return f"{self.matrix}[{self.row[ty][tx]}*{dim} + {self.col[ty][tx]}]"


def shared_tile_contents(block=(1, 1), tile=1, BLOCK=16, dim=256, elem_bytes=8):
    """A_shared and B_shared of thread block `block` = (blockIdx.x, blockIdx.y) right
    after the loads of step `tile` (the __syncthreads that follows them).

    Returns {"A_shared": SharedTile, "B_shared": SharedTile}.
    """
    bx, by = block
    if not (0 <= bx < dim // BLOCK and 0 <= by < dim // BLOCK):
        raise ValueError(f"block={block} is outside the {dim // BLOCK} x {dim // BLOCK} grid "
                         f"of dim={dim}, BLOCK={BLOCK}")
    if not 0 <= tile < dim // BLOCK:
        raise ValueError(f"tile={tile}: the steps along K are 0 .. {dim // BLOCK - 1}")

    def table(f):
        return [[f(ty, tx) for tx in range(BLOCK)] for ty in range(BLOCK)]

    def row_of(ty):            # row = blockIdx.y * blockDim.y + threadIdx.y
        return by * BLOCK + ty

    def col_of(tx):            # col = blockIdx.x * blockDim.x + threadIdx.x
        return bx * BLOCK + tx

    def j_of(tx):              # j = tile * BLOCK + threadIdx.x
        return tile * BLOCK + tx

    def i_of(ty):              # i = tile * BLOCK + threadIdx.y
        return tile * BLOCK + ty

    address = table(lambda ty, tx: (ty * BLOCK + tx) * elem_bytes)
    bank = [[(a // BANK_BYTES) % BANKS for a in r] for r in address]

    a_off = table(lambda ty, tx: row_of(ty) * dim + j_of(tx))
    b_off = table(lambda ty, tx: i_of(ty) * dim + col_of(tx))

    def make(name, matrix, off):
        return SharedTile(name=name, matrix=matrix, offset=off,
                          row=[[o // dim for o in r] for r in off],
                          col=[[o % dim for o in r] for r in off],
                          address=[r[:] for r in address], bank=[r[:] for r in bank],
                          elem_bytes=elem_bytes)

    return {"A_shared": make("A_shared", "A", a_off), "B_shared": make("B_shared", "B", b_off)}


def as_table(t: SharedTile, field: str = "expression", dim: int = 256, title: str = "",
             rows: int | None = None):
    """One of a SharedTile's 16 x 16 tables as a Table, a row per threadIdx.y (the
    first `rows` of them, default all) and a column per threadIdx.x. field: "expression"
    (e.g. 'A[17*256 + 18]'), "offset", "address", "bank" or "banks" (both banks of an
    8-byte slot)."""
    from gemm_kernels.core.table import Table
    n = len(t.offset)

    def cell(ty, tx):
        if field == "expression":
            return t.expression(ty, tx, dim)
        if field == "banks":
            return "/".join(map(str, t.banks_of(ty, tx)))
        return getattr(t, field)[ty][tx]
    out = [{"ty": ty, **{str(tx): cell(ty, tx) for tx in range(n)}}
           for ty in range(n if rows is None else min(rows, n))]
    return Table(out, ["ty"] + [str(tx) for tx in range(n)],
                 title=title or f"{t.name}[ty][tx]: {field}")


def plot_tiles(block=(2, 1), tile=1, BLOCK=16, dim=256, ax=None):
    """The two tiles of one step over their matrices: A (dim x dim) with the rows of the
    block (blockIdx.y) and the columns of the step (`tile`) that A_shared holds, B with
    the rows of the step and the columns of the block (blockIdx.x) that B_shared holds,
    and C with the block's outputs; a pale band marks what the block reads over all its
    steps. Every rectangle comes from `shared_tile_contents`,
    i.e. from the kernel's own index expressions. Returns the array of three Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    t = shared_tile_contents(block, tile, BLOCK, dim)
    if ax is None:
        _, ax = plt.subplots(1, 3, figsize=(13, 4.6))
    bx, by = block
    out_rows = (by * BLOCK, by * BLOCK + BLOCK - 1)
    out_cols = (bx * BLOCK, bx * BLOCK + BLOCK - 1)
    panels = [("A", t["A_shared"], "A_shared", "tab:blue"),
              ("B", t["B_shared"], "B_shared", "tab:orange"),
              ("C", None, f"block ({bx}, {by})'s outputs", "tab:green")]
    for a, (name, s, what, colour) in zip(ax, panels):
        if s is None:
            (r0, r1), (c0, c1) = out_rows, out_cols
        else:
            r0, r1, c0, c1 = s.row[0][0], s.row[-1][-1], s.col[0][0], s.col[-1][-1]
        a.add_patch(Rectangle((0, 0), dim, dim, facecolor="0.95", edgecolor="0.4"))
        a.add_patch(Rectangle((c0, r0), c1 - c0 + 1, r1 - r0 + 1, facecolor=colour,
                              edgecolor="k"))
        # the band the block walks over all steps: A's rows of the block, B's columns
        if name == "A":
            a.add_patch(Rectangle((0, r0), dim, BLOCK, facecolor=colour, alpha=0.2, lw=0))
        elif name == "B":
            a.add_patch(Rectangle((c0, 0), BLOCK, dim, facecolor=colour, alpha=0.2, lw=0))
        a.set_xlim(0, dim)
        a.set_ylim(dim, 0)
        a.set_aspect("equal")
        a.set_title(f"{name} ({dim} x {dim}): {what}\nrows {r0}..{r1}, columns {c0}..{c1}",
                    fontsize=10)
        a.set_xlabel("column")
        a.set_ylabel("row")
    ax[0].figure.suptitle(f"Step tile = {tile} of the block blockIdx = ({bx}, {by}), "
                          f"BLOCK = {BLOCK}: what the two tiles hold (pale: what the "
                          "block reads over all its steps)", fontsize=11)
    ax[0].figure.tight_layout()
    return ax
