"""The pictures of chapters 03, 05 and 06 draw what the kernels do.

What a thread copies, owns and reads is taken here from the .cu sources themselves (the
index expressions, read with a regular expression and evaluated by `cexpr`), not from
the model the pictures use, and compared with what the Figure holds: the rectangles of
the tile walk, the colours of the ownership map, the labels of the reads.
"""
import re

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.text import Text
import numpy as np
import pytest
from matplotlib.colors import to_rgb

from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.exercises.cexpr import code_only, compile_expression, evaluate
from gemm_kernels.notebook import pictures

TILE_KERNELS = ("tile_1d", "tile_2d", "tile_2d_reg", "tile_2d_strided")
WARP = 32


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _function(text: str, name: str) -> str:
    """The text of function `name` of a .cu file: from its name to the next template
    or the end of the file, comments removed."""
    text = code_only(text)
    start = re.search(rf"\b{name}\(", text).start()
    end = text.find("\ntemplate <", start)
    return text[start:] if end < 0 else text[start:end]


def _one(pattern: str, text: str) -> str:
    found = set(re.findall(pattern, text))
    assert len(found) == 1, f"{pattern!r}: {found or 'no match'}"
    return found.pop().strip()


# ------------------------------------------------------------------ chapter 03

def _walk_from_source(BLOCK, tile_row, tile_col, t):
    """(rows of A, columns of A, rows of B, columns of B, rows of C, columns of C) that
    block (tile_row, tile_col) touches at step t, from 03_smem_tiled.cu's checked path."""
    k = KERNELS["smem_tiled"]
    body = _function(k.source_text(), k.entry)
    env = {"BLOCK": BLOCK, "tile_row": tile_row, "tile_col": tile_col}
    env["k0"] = evaluate(_one(r"k0 \+= ([^)]+)\)", body), env) * t
    row, col = _one(r"const int row = ([^;]+);", body), _one(r"const int col = ([^;]+);", body)
    ka, kb = _one(r"const int ka = ([^;]+);", body), _one(r"const int kb = ([^;]+);", body)
    cells = {name: set() for name in ("row", "col", "ka", "kb")}
    for ty in range(BLOCK):
        for tx in range(BLOCK):
            e = {**env, "tx": tx, "ty": ty}
            for name, expr in (("row", row), ("col", col), ("ka", ka), ("kb", kb)):
                cells[name].add(evaluate(expr, e))
    return cells["row"], cells["ka"], cells["kb"], cells["col"], cells["row"], cells["col"]


def _span(ax, gid, origin):
    """(rows, columns) a rectangle `gid` covers, relative to rectangle `origin`."""
    by = {p.get_gid(): p for p in ax.patches}
    r, o = by[gid], by[origin]
    x, y = r.get_x() - o.get_x(), r.get_y() - o.get_y()
    return (set(range(round(y), round(y + r.get_height()))),
            set(range(round(x), round(x + r.get_width()))))


@pytest.mark.parametrize("BLOCK", [b for b in KERNELS["smem_tiled"].params[0].values
                                   if not KERNELS["smem_tiled"].problems({"BLOCK": b})])
@pytest.mark.parametrize("where", [(1, 2), (0, 0), (3, 3)])
def test_tile_walk_draws_the_tiles_the_kernel_copies(BLOCK, where):
    tile_row, tile_col = where
    fig = pictures.tile_walk(BLOCK=BLOCK, tile_row=tile_row, tile_col=tile_col)
    assert len(fig.axes) == 3
    for t, ax in enumerate(fig.axes):
        a_rows, a_cols, b_rows, b_cols, c_rows, c_cols = _walk_from_source(BLOCK, *where, t)
        assert _span(ax, f"A tile {t}", "A") == (a_rows, a_cols)
        assert _span(ax, f"B tile {t}", "B") == (b_rows, b_cols)
        assert _span(ax, "C tile", "C") == (c_rows, c_cols)
        faces = {p.get_gid(): to_rgb(p.get_facecolor()) for p in ax.patches}
        # Only this step's pair is in the colour of the shared-memory tiles.
        now = {g for g, f in faces.items() if g and " tile " in g and f == faces["As"]}
        assert now == {f"A tile {t}", f"B tile {t}"}
        assert ax.get_aspect() == 1.0
        assert f"k = {t * BLOCK} to {(t + 1) * BLOCK - 1}" in ax.get_title()


def test_tile_walk_ragged_k_ends_the_walk_early_and_names_the_zeros():
    fig = pictures.tile_walk(BLOCK=16, K=40, M=50, N=70, tile_row=3, tile_col=4, steps=5)
    assert len(fig.axes) == 3                           # ceil(40 / 16) steps
    assert fig.axes[-1].get_title() == "Step 2: k = 32 to 39"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "outside the matrix: copied as zeros" in labels
    assert "copied as zeros" not in " ".join(
        t.get_text() for t in pictures.tile_walk(BLOCK=16).legends[0].get_texts())


@pytest.mark.parametrize("kwargs", [{"BLOCK": 64}, {"BLOCK": 7}, {"BLOCK": 32.0}])
def test_tile_walk_refuses_what_the_registry_refuses(kwargs):
    problems = KERNELS["smem_tiled"].problems(kwargs)
    assert problems
    with pytest.raises(ValueError) as e:
        pictures.tile_walk(**kwargs)
    for m in problems:
        assert m in str(e.value)


@pytest.mark.parametrize("kwargs, words", [
    ({"K": 0}, "K must be at least 1"),
    ({"tile_row": 4}, "tile_row=4"),
    ({"tile_col": -1}, "tile_col must be at least 0"),
    ({"steps": 0}, "steps must be at least 1"),
])
def test_tile_walk_refuses_impossible_pictures(kwargs, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        pictures.tile_walk(**kwargs)


# ------------------------------------------------------------------ chapters 05-06

def _from_source(name, p):
    """From the kernel's source: owner[t] = the (row, col) of the C tile thread t
    stores, and reads(t, k) = (rows of As, columns of Bs, shared reads per k)."""
    k = KERNELS[name]
    text = k.source_text()
    body = _function(text, k.entry)
    env = {**p, "TN": p.get("TN", 1)}
    consts = re.search(r"constexpr int RSTEP = ([^,;]+), CSTEP = ([^;]+);", body)
    if consts:
        env["RSTEP"], env["CSTEP"] = (evaluate(c, env) for c in consts.groups())
    tr = _one(r"const int tr = ([^;]+);", body)
    tc = _one(r"const int tc = ([^;]+);", body)
    store = re.search(r"store_patch<TM, TN, (\w+), (\w+)>\(acc, C, M, N, row0 \+ ([^,]+), "
                      r"col0 \+ ([^,]+),", body)
    if store:              # chapter 06: the patch store's row and column expressions
        rstep, cstep, row, col = store.groups()
        patch = code_only(text)[code_only(text).index("void store_patch("):]
        env["RSTEP"], env["CSTEP"] = evaluate(rstep, env), evaluate(cstep, env)
        r_step = _one(r"const int r = row \+ ([^;]+);", patch)
        c_step = _one(r"const int c = col \+ ([^;]+);", patch)
        r_expr, c_expr = f"({row}) + {r_step}", f"({col}) + {c_step}"
    else:                  # chapter 05: the store loop's row and column
        r_expr = _one(r"const int row = row0 \+ ([^;]+);", body)
        c_expr = _one(r"const int col = col0 \+ ([^;]+);", body)
    a_expr = _one(r"As\[([^\]]+)\]\[k\]", body)
    b_expr = _one(r"Bs\[k\]\[([^\]]+)\]", body)
    threads = (p["BM"] // p["TM"]) * (p["BN"] // env["TN"])

    # Compiled once: every configuration of every kernel evaluates them for each output.
    names = [*env, "t", "threadIdx.x", "tr", "tc", "i", "j", "k"]
    tr, tc, row, col = (compile_expression(x, names) for x in (tr, tc, r_expr, c_expr))

    def place(t):
        e = {**env, "t": t, "threadIdx.x": t}
        return {**e, "tr": tr(e), "tc": tc(e)}

    owner = {}
    for t in range(threads):
        e = place(t)
        owner[t] = {(row(e, i=i, j=j), col(e, i=i, j=j))
                    for i in range(p["TM"]) for j in range(env["TN"])}

    # A read in the FMA's own statement happens once per FMA; one outside it once per value.
    fma = _one(r"([^;{}]*\+=[^;]*\*[^;]*);", body)
    per_k = sum(p["TM"] * env["TN"] if re.search(pat, fma) else n
                for pat, n in ((r"As\[", p["TM"]), (r"Bs\[", env["TN"])))

    def reads(t, k):
        e = {**place(t), "k": k}
        return ({evaluate(a_expr, {**e, "i": i}) for i in range(p["TM"])},
                {evaluate(b_expr, {**e, "j": j}) for j in range(env["TN"])}, per_k)

    return owner, reads


def _configs(name, n=4):
    """The defaults and a spread of other valid configurations."""
    valid = KERNELS[name].valid_configurations()
    step = max(1, len(valid) // n)
    return [None] + valid[::step]


CASES = [(name, p) for name in TILE_KERNELS for p in _configs(name)]


@pytest.mark.parametrize("name", TILE_KERNELS)
def test_every_output_belongs_to_exactly_one_thread_as_in_the_source(name):
    for p in KERNELS[name].valid_configurations():
        full = KERNELS[name].resolve(p)
        owner, _ = _from_source(name, full)
        grid = np.full((full["BM"], full["BN"]), -1)
        for t, cells in owner.items():
            for r, c in cells:
                assert grid[r, c] == -1, f"{name} {p}: ({r}, {c}) stored by two threads"
                grid[r, c] = t
        assert (grid >= 0).all(), f"{name} {p}: outputs no thread stores"
        np.testing.assert_array_equal(pictures.owners(name, p), grid)


def _colours(fig):
    """{legend label: RGB} of the figure's legend."""
    leg = fig.legends[0]
    return {t.get_text(): to_rgb(h.get_facecolor()) for t, h in zip(leg.get_texts(),
                                                                   leg.legend_handles)}


def _axes(fig, gid):
    return next((ax for ax in fig.axes if ax.get_gid() == gid), None)


@pytest.mark.parametrize("name, params", CASES)
def test_thread_map_colours_each_thread_s_outputs_from_the_source(name, params):
    full = KERNELS[name].resolve(params)
    owner, _ = _from_source(name, full)
    fig = pictures.thread_map(name, params)
    colours = _colours(fig)
    threads = {int(re.match(r"thread (\d+)", label).group(1)): rgb
               for label, rgb in colours.items() if label.startswith("thread ")}
    assert sorted(threads) == [0, 1, 2, WARP]
    warp0 = next(rgb for label, rgb in colours.items() if "warp 0" in label)
    views = [ax for ax in (_axes(fig, "owners"), _axes(fig, "zoom")) if ax]
    for ax in views:
        image = np.asarray(ax.images[0].get_array())
        rows, cols = image.shape[:2]
        window = {(r, c) for r in range(rows) for c in range(cols)}
        for t, rgb in threads.items():
            drawn = {tuple(rc) for rc in np.argwhere(np.all(np.isclose(image, rgb), axis=2))}
            assert drawn == owner[t] & window, f"thread {t}"
        rest0 = set().union(*(owner[t] for t in range(WARP) if t not in threads))
        drawn = {tuple(rc) for rc in np.argwhere(np.all(np.isclose(image, warp0), axis=2))}
        assert drawn == rest0 & window
        assert ax.get_aspect() == 1.0
    assert views[0].images[0].get_array().shape[:2] == (full["BM"], full["BN"])


@pytest.mark.parametrize("name, params", CASES)
@pytest.mark.parametrize("k", [0, 3])
def test_thread_map_shows_the_reads_of_the_source(name, params, k):
    full = KERNELS[name].resolve(params)
    _, reads = _from_source(name, full)
    t = 2
    fig = pictures.thread_map(name, params, threads=(t, 0), k=k)
    holder = _axes(fig, "reads")
    ax = next(a for a in holder.child_axes if a.get_gid() == "schematic")
    texts = [x.get_text() for x in ax.texts]
    a = {int(m.group(1)) for x in texts for m in [re.fullmatch(rf"As\[(\d+)\]\[{k}\]", x)] if m}
    b = {int(m.group(1)) for x in texts for m in [re.fullmatch(rf"Bs\[{k}\]\[(\d+)\]", x)] if m}
    a_src, b_src, per_k = reads(t, k)
    assert (a, b) == (a_src, b_src)
    assert sum(p.get_gid() == "FMA" for p in ax.patches) == len(a_src) * len(b_src)
    # one value of k, not "one step" (which the chapters use for one tile of BK values)
    assert f"at one value of k (k = {k})" in holder.get_title() and "step" not in holder.get_title()
    caption = holder.get_xlabel()
    assert f"{per_k} shared-memory reads" in caption
    assert f"{len(a_src) * len(b_src)} FMAs" in caption
    assert ax.get_aspect() == 1.0


@pytest.mark.parametrize("name, params", [
    ("tile_2d_reg", {"TM": 3}), ("tile_2d_reg", {"BM": 96}),
    ("tile_1d", {"BM": 64, "BN": 128, "BK": 8, "TM": 4}),
    ("tile_1d", {"BM": 128, "BN": 128, "BK": 8, "TM": 16}), ("tile_1d", {"TN": 4}),
    ("tile_2d_strided", {"BK": "8"}), ("tile_2d", [("BM", 64)]),
])
def test_thread_map_refuses_what_the_registry_refuses(name, params):
    problems = KERNELS[name].problems(params)
    assert problems
    with pytest.raises(ValueError) as e:
        pictures.thread_map(name, params)
    for m in problems:
        assert m in str(e.value)


@pytest.mark.parametrize("args, kwargs, words", [
    (("smem_tiled",), {}, "thread_map draws tile_1d"),
    (("tile_2d_reg",), {"threads": (0, 256)}, "thread 256: the block has 256 threads"),
    (("tile_2d_reg",), {"threads": (1, 1)}, "different thread numbers"),
    (("tile_2d_reg",), {"threads": ()}, "different thread numbers"),
    (("tile_2d_reg",), {"k": 16}, "k=16: the tiles are BK=16 deep"),
    (("tile_2d_reg",), {"k": -1}, "k must be at least 0"),
])
def test_thread_map_refuses_impossible_pictures(args, kwargs, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        pictures.thread_map(*args, **kwargs)


# ------------------------------------------------------------------ readability

FIGURES = [("tile_walk", lambda: pictures.tile_walk()),
           ("tile_walk ragged", lambda: pictures.tile_walk(BLOCK=16, K=40, M=50, N=70,
                                                           tile_row=3, tile_col=4))]
FIGURES += [(f"thread_map {name} {p}", lambda name=name, p=p: pictures.thread_map(name, p))
            for name, p in CASES]


@pytest.mark.parametrize("label, draw", FIGURES, ids=[f[0] for f in FIGURES])
def test_pictures_are_readable(label, draw):
    fig = draw()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    # Labels of ticks outside an axis's view, or of an axis turned off, exist but are
    # not drawn.
    hidden = {id(label) for ax in fig.findobj(Axes) for axis in (ax.xaxis, ax.yaxis)
              for tick in axis.get_major_ticks()
              if not ax.axison or not min(axis.get_view_interval()) <= tick.get_loc()
              <= max(axis.get_view_interval())
              for label in (tick.label1, tick.label2)}
    texts = [t for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip() and id(t) not in hidden]
    for t in texts:
        assert t.get_fontsize() >= 9, f"{t.get_text()!r} at {t.get_fontsize()} pt"
    titles = [t for t in texts if t.get_text() == fig.get_suptitle()]
    titles += [ax.title for ax in fig.axes]
    for t in titles:
        # A sentence, not a printed dict of parameters.
        assert t.get_text() and not re.search(r"[{}]|': ", t.get_text()), t.get_text()
    boxes = {id(t): t.get_window_extent(renderer) for t in texts}
    for t in titles:
        for other in texts:
            if other is not t:
                assert not boxes[id(t)].overlaps(boxes[id(other)]), \
                    f"{t.get_text()!r} overlaps {other.get_text()!r}"
    width, height = fig.get_size_inches() * fig.dpi
    for t in texts:
        box = boxes[id(t)]
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= width and box.y1 <= height, \
            f"{t.get_text()!r} is cut off by the edge of the figure"


# ------------------------------------------------------------------ chapter 00

_PROPS = {"name": "Test GPU", "compute_capability": "8.0", "sm_count": 108,
          "sm_clock_mhz": 1410.0, "memory_clock_mhz": 1215.0, "memory_bus_bits": 5120,
          "l2_bytes": 40 * 2**20, "max_threads_per_block": 1024, "max_threads_per_sm": 2048,
          "registers_per_sm": 65536, "smem_per_sm": 167936, "warp_size": 32}


def test_gpu_hierarchy_shows_the_device_numbers():
    fig = pictures.gpu_hierarchy(_PROPS)
    text = " ".join(t.get_text() for t in fig.findobj(Text))
    for words in ("Test GPU", "108 SMs", "40 MiB", "164 KiB", "65,536", "2048 threads",
                  "64 warps", "1024 threads", "32 warps", "16 FP32", "warp = 32 threads"):
        assert words in text, words
    gids = {p.get_gid() for p in fig.findobj() if hasattr(p, "get_gid")}
    assert {"grid", "block", "warp 0", "SM", "L2", "DRAM", "registers", "shared memory",
            "scheduler 3", "thread 0.31"} <= gids


def test_gpu_hierarchy_refuses_missing_properties():
    with pytest.raises(ValueError, match="l2_bytes"):
        pictures.gpu_hierarchy({k: v for k, v in _PROPS.items() if k != "l2_bytes"})


def test_gpu_hierarchy_is_readable():
    test_pictures_are_readable("gpu_hierarchy", lambda: pictures.gpu_hierarchy(_PROPS))
    test_pictures_are_readable("gpu_hierarchy recorded", pictures.gpu_hierarchy)
