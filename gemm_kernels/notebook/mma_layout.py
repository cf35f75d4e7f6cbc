"""Which lane of a warp holds which element of an mma.m16n8k16 tile (FP16 inputs, FP32
accumulators), as the PTX ISA documents it, and the drawing of such a map: chapter 14
explains the layout, chapter 13 shows where its naive kernel's global loads put their
lanes in the same layout.
"""
from __future__ import annotations


def fragment_map() -> dict[str, dict[tuple[int, int], tuple[int, int]]]:
    """For each operand of mma.m16n8k16 with FP16 inputs and FP32 accumulators, the lane
    and the element index (a0..a7, b0..b3, c0..c3) that hold each (row, column) of its
    tile, as the PTX ISA's "Matrix Fragments for mma.m16n8k16" gives them. With
    g = lane / 4 and t = lane % 4: A (16 x 16) rows g and g + 8, columns 2t, 2t + 1 and 8
    more; B (16 x 8, k x n) rows 2t, 2t + 1 and 8 more, column g; C (16 x 8) rows g and
    g + 8, columns 2t, 2t + 1."""
    out = {"A": {}, "B": {}, "C": {}}
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(8):
            out["A"][(g + 8 * ((i // 2) % 2), 2 * t + i % 2 + 8 * (i // 4))] = (lane, i)
        for i in range(4):
            out["B"][(2 * t + i % 2 + 8 * (i // 2), g)] = (lane, i)
            out["C"][(g + 8 * (i // 2), 2 * t + i % 2)] = (lane, i)
    return out


def lane_grid(ax, cells: dict, rows: int, cols: int, name: str, reg: str, title: str):
    """A rows x cols tile, each element coloured by its lane's group (lane / 4) and
    labelled with the lane and the element index."""
    import matplotlib.pyplot as plt
    colors = plt.get_cmap("tab10")
    from matplotlib.patches import Rectangle
    for (r, c), (lane, i) in cells.items():
        ax.add_patch(Rectangle((c, rows - 1 - r), 1, 1, facecolor=colors(lane // 4),
                               alpha=0.35 + 0.65 * (lane % 4) / 3, edgecolor="white", lw=0.8))
        ax.text(c + 0.5, rows - 0.5 - r, f"{lane}\n{reg}{i}", ha="center", va="center",
                fontsize=5.5)
    ax.set_xlim(0, cols)
    ax.set_ylim(0, rows)
    ax.set_aspect("equal")
    ax.set_xticks([c + 0.5 for c in range(cols)], [str(c) for c in range(cols)], fontsize=6)
    ax.set_yticks([rows - 0.5 - r for r in range(rows)], [str(r) for r in range(rows)],
                  fontsize=6)
    ax.tick_params(length=0)
    ax.set_title(title, fontsize=9)
