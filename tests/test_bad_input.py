"""Bad input gets a message naming the problem: never a traceback from deep inside, a
hang, or a silent result. Library level (registry, launcher, bank model, widgets); the
command line is tests/test_cli.py. No GPU needed."""
from types import SimpleNamespace

import numpy as np
import pytest

from gemm_kernels.core import device, launch
from gemm_kernels.core.kernels import get
from gemm_kernels.memory import banks
from gemm_kernels.notebook.widgets import BankExplorer, Explorer, sweep_grid


# ---------------------------------------------------------------- tunables

@pytest.mark.parametrize("kernel,params,name,typ", [
    ("naive", {"BLOCK": 32.0}, "BLOCK", "float"),          # 32.0 == 32
    ("naive", {"BLOCK": True}, "BLOCK", "bool"),           # True == 1
    ("bank_layout", {"PAD": True}, "PAD", "bool"),
    ("capstone", {"HOIST": 1}, "HOIST", "int"),            # 1 == True
    ("naive", {"MAPPING": 0}, "MAPPING", "int"),
    ("naive", {"BLOCK": "32"}, "BLOCK", "str"),
    ("naive", {"BLOCK": None}, "BLOCK", "NoneType"),
])
def test_wrong_type_is_refused_everywhere(kernel, params, name, typ):
    k = get(kernel)
    value = params[name]
    for msgs in (k.problems(params), launch.problems(kernel, params, (64, 64, 64))):
        assert len(msgs) == 1
        assert f"{name}={value!r} is a {typ}" in msgs[0]
        assert "choose one of" in msgs[0]
    with pytest.raises(ValueError, match=f"{name}="):
        k.resolve(params)          # lookups and instantiation names go through resolve
    with pytest.raises(ValueError, match=f"{name}="):
        launch.prepare(kernel, (), params)       # before any array is looked at


def test_right_types_still_pass():
    assert get("naive").problems({"BLOCK": np.int64(16)}) == []
    assert get("capstone").problems({"HOIST": False}) == []
    assert get("naive").problems({"MAPPING": "x->col"}) == []


def test_params_must_be_a_mapping():
    msg = get("naive").problems([("BLOCK", 16)])
    assert msg and "params must be a dict" in msg[0]


def test_message_lists_string_choices_quoted():
    msg = get("naive").problems({"MAPPING": "x"})[0]
    assert "'x->row'" in msg and "'x->col'" in msg


# ---------------------------------------------------------------- shapes

@pytest.mark.parametrize("kernel,shape,needle", [
    ("naive", (10, 10), "3 integers (M, N, K), got 2"),
    ("naive", (10, 10, 10, 10), "got 4"),
    ("naive", (10.5, 3, 3), "M must be an integer, got float 10.5"),
    ("naive", ("4", 4, 4), "M must be an integer, got str '4'"),
    ("naive", (4, True, 4), "N must be an integer, got bool"),
    ("naive", (4, 0, 4), "N must be at least 1"),
    ("naive", "444", "got str"),
    ("naive", 4, "got int 4"),
    ("transpose_naive", (4, 4, 4), "2 integers (rows, cols), got 3"),
    ("transpose_naive", (4,), "got 1"),
])
def test_bad_shapes(kernel, shape, needle):
    assert needle in launch.shape_problem(kernel, shape)
    msgs = launch.problems(kernel, None, shape)
    assert any(needle in m for m in msgs), msgs


def test_numpy_integer_shapes_are_accepted():
    assert launch.problems("naive", None, tuple(np.int64(d) for d in (33, 65, 17))) == []
    assert launch.problems("transpose_naive", None, np.array([33, 65])) == []


# ---------------------------------------------------------------- aliasing

def _fake(ptr, nbytes):
    return SimpleNamespace(data=SimpleNamespace(ptr=ptr), nbytes=nbytes)


def test_output_sharing_memory_with_an_input_is_refused():
    names = ("A", "B", "C")
    a, b = _fake(0, 400), _fake(1024, 400)
    assert launch.aliasing(names, (a, b, _fake(2048, 400))) is None
    assert launch.aliasing(names, (a, a, _fake(400, 400))) is None   # adjacent, A twice: fine
    msg = launch.aliasing(names, (a, b, a))
    assert "C is A" in msg and "the same array" in msg
    msg = launch.aliasing(names, (a, b, _fake(1100, 40)))          # C a view inside B
    assert "C overlaps B" in msg and "empty_like" in msg
    assert "out overlaps in" in launch.aliasing(("in", "out"), (a, _fake(200, 400)))


@pytest.mark.skipif(not device.is_live(), reason="needs a GPU")
def test_aliasing_refused_before_launch_on_gpu():
    import cupy
    A = cupy.ones((64, 64), cupy.float32)
    with pytest.raises(ValueError, match="C is A"):
        launch.launch("naive", A, A, A)
    X, B = cupy.ones((64, 64), cupy.float32), cupy.ones((64, 64), cupy.float32)
    with pytest.raises(ValueError, match="C overlaps A"):
        launch.launch("naive", X[:32], B, X[16:48])     # C a view reaching into A
    T = cupy.ones((64, 64), cupy.float32)
    with pytest.raises(ValueError, match="out is in"):
        launch.launch("transpose_naive", T, T)


# ---------------------------------------------------------------- bank model

LINE = [4 * i for i in range(32)]


@pytest.mark.parametrize("addresses,width,needle", [
    (LINE, 4.0, "width must be 4, 8 or 16 bytes per lane, got float 4.0"),
    (LINE, True, "got bool True"),
    (LINE, 12, "got int 12"),
    (np.array(LINE).reshape(32, 1), 4, "flat sequence of 32 byte offsets, got an array of "
                                       "shape (32, 1)"),
    (LINE[:31], 4, "exactly 32 addresses (one per lane), got 31"),
    (LINE + [0], 4, "got 33"),
    ([-1] + LINE[1:], 4, "lane 0: address -1 is negative"),
    ([-4] + LINE[1:], 4, "inactive lane is marked with None"),
    ([4.0] + LINE[1:], 4, "lane 0: address must be an integer byte offset or None"),
    ([True] + LINE[1:], 4, "got bool True"),
    ("0" * 32, 4, "sequence of 32 byte offsets"),
    (7, 4, "got int"),
    ([2] + LINE[1:], 4, "not aligned"),
])
def test_bank_model_refuses_bad_lanes(addresses, width, needle):
    for fn in (banks.analyse, banks.wavefronts, banks.conflicts):
        with pytest.raises(ValueError) as e:
            fn(addresses, width)
        assert needle in str(e.value)


def test_none_is_the_inactive_marker():
    assert banks.wavefronts([None] * 31 + [128]) == 1
    assert banks.analyse([None] * 16 + LINE[16:]).active_lanes == tuple(range(16, 32))
    assert banks.wavefronts(np.array(LINE, dtype=np.int64)) == 1


@pytest.mark.parametrize("kw,needle", [
    ({"stride": 1.5}, "stride must be an integer"),
    ({"stride": -1}, "stride must be at least 0"),
    ({"row_elems": 0}, "row_elems must be at least 1"),
    ({"padding": True}, "padding must be an integer, got bool"),
    ({"base": -4}, "base must be at least 0"),
    ({"width": 8.0}, "width must be 4, 8 or 16"),
])
def test_pattern_builders_refuse_bad_numbers(kw, needle):
    with pytest.raises(ValueError, match=needle):
        banks.strided(**{"stride": 1, **kw})


# ---------------------------------------------------------------- widgets

@pytest.fixture
def recorded(monkeypatch):
    monkeypatch.setenv("GEMM_KERNELS_MODE", "recorded")


@pytest.mark.parametrize("params,needle", [
    (None, "Choose the tunables as a dict"),
    ([32], "Choose the tunables as a dict"),
    ("BLOCK=32", "Choose the tunables as a dict"),
    ({"BLOCK": None}, "BLOCK=None is a NoneType"),
    ({"BLOCK": 32.0}, "BLOCK=32.0 is a float"),
    ({"TILE": 4}, "unknown parameter(s) ['TILE']"),
    ({"BLOCK": 12}, "BLOCK=12 is not allowed"),
])
def test_explorer_evaluate_gives_messages(recorded, params, needle):
    res = Explorer("naive").evaluate(params)
    assert res["ok"] is False and res["value"] is None
    assert needle in res["message"]


@pytest.mark.parametrize("size", [0, -1024, 2048.0, "2048", True])
def test_explorer_size_is_refused(size):
    with pytest.raises(ValueError, match="size must be"):
        Explorer("naive", size=size)
    with pytest.raises(ValueError, match="size must be"):
        sweep_grid("naive", "BLOCK", "MAPPING", size=size)


def test_sweep_grid_refuses_unknown_axes_and_fixed():
    with pytest.raises(ValueError, match="no tunable 'TILE'"):
        sweep_grid("naive", "TILE", "MAPPING")
    with pytest.raises(ValueError, match="BLOCK=32.0 is a float"):
        sweep_grid("naive", "MAPPING", "MAPPING", fixed={"BLOCK": 32.0})


@pytest.mark.parametrize("row_elems", [0, -32, 32.0, None])
def test_bank_explorer_row_elems_is_refused(row_elems):
    with pytest.raises(ValueError, match="row_elems must be"):
        BankExplorer(row_elems=row_elems)


@pytest.mark.parametrize("kw,needle", [
    ({"stride": None}, "stride must be an integer, got NoneType"),
    ({"stride": 1.5}, "stride must be an integer"),
    ({"stride": -1}, "stride must be at least 0"),
    ({"padding": "1"}, "padding must be an integer"),
    ({"width": None}, "width must be 4, 8 or 16"),
    ({"width": "4"}, "width must be 4, 8 or 16"),
    ({"width": 4.0}, "width must be 4, 8 or 16"),
    ({"share": None}, "share must be one of"),
    ({"share": ["none"]}, "share must be one of"),
    ({"inactive": None}, "inactive must be one of"),
    ({"inactive": ["none"]}, "inactive must be one of"),
])
def test_bank_explorer_evaluate_gives_messages(kw, needle):
    res = BankExplorer().evaluate(**kw)
    assert res["ok"] is False and res["analysis"] is None
    assert needle in res["message"]
