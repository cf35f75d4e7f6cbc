"""BankExplorer (gemm_kernels.widgets): its logic, without a browser."""
import pytest

from gemm_kernels import banks
from gemm_kernels.widgets import BankExplorer


@pytest.fixture
def bx():
    return BankExplorer()


def test_addresses_follow_stride_width_padding(bx):
    assert bx.addresses(stride=1, width=8)[:3] == [0, 8, 16]
    assert bx.addresses(stride=32, width=4, padding=1)[:3] == [0, 33 * 4, 66 * 4]
    assert bx.addresses(stride=2, width=16)[5] == 10 * 16


def test_sharing_patterns(bx):
    a = bx.addresses(stride=1, width=8, share="i^1")
    assert all(a[i] == a[i ^ 1] for i in range(32)) and len(set(a)) == 16
    b = bx.addresses(stride=1, width=8, share="i^2")
    assert all(b[i] == b[i ^ 2] for i in range(32)) and len(set(b)) == 16
    assert set(bx.addresses(stride=5, width=4, share="all")) == {0}


def test_inactive_lanes(bx):
    a = bx.addresses(stride=1, width=4, inactive="odd lanes")
    assert a[1] is None and a[0] == 0
    assert sum(x is None for x in bx.addresses(inactive="lanes 16-31")) == 16
    assert sum(x is None for x in bx.addresses(inactive="lanes 8-31")) == 24


def test_64bit_two_phases_then_merged(bx):
    plain = bx.evaluate(stride=1, width=8)["analysis"]
    assert plain.wavefronts == 2 and plain.merge is None
    merged = bx.evaluate(stride=1, width=8, share="i^1")["analysis"]
    assert merged.wavefronts == 1 and merged.merge == "i^1"
    # inactive odd lanes satisfy the i^1 rule too: one phase
    half = bx.evaluate(stride=1, width=8, inactive="odd lanes")["analysis"]
    assert half.merge == "i^1" and len(half.phases) == 1


def test_128bit_quarters_merge_inside_half_warps_only(bx):
    a = bx.evaluate(stride=1, width=16)["analysis"]
    assert len(a.phases) == 4 and a.wavefronts == 4
    m = bx.evaluate(stride=1, width=16, share="i^2")["analysis"]
    assert len(m.phases) == 2 and m.wavefronts == 2 and all(p.merged for p in m.phases)
    # a full broadcast still costs one wavefront per half-warp: halves never merge
    assert bx.evaluate(stride=1, width=16, share="all")["analysis"].wavefronts == 2


def test_column_read_conflicts_and_padding(bx):
    assert bx.evaluate(stride=32, width=4)["analysis"].wavefronts == 32
    assert bx.evaluate(stride=32, width=4, padding=1)["analysis"].wavefronts == 1
    assert bx.evaluate(stride=32, width=8)["analysis"].wavefronts == 32   # 16 per half
    assert bx.evaluate(stride=32, width=8, padding=1)["analysis"].wavefronts == 2


def test_agrees_with_banks_strided(bx):
    for stride in BankExplorer.STRIDES:
        for width in BankExplorer.WIDTHS:
            for pad in BankExplorer.PADDINGS:
                a = bx.addresses(stride=stride, width=width, padding=pad)
                assert a == banks.strided(stride, width, padding=pad)


def test_bad_choices_give_messages_not_tracebacks(bx):
    r = bx.evaluate(width=12)
    assert not r["ok"] and "width" in r["message"]
    with pytest.raises(ValueError, match="share"):
        bx.addresses(share="i^3")
    with pytest.raises(ValueError, match="inactive"):
        bx.addresses(inactive="some")


def test_describe_lists_phases(bx):
    msg = bx.evaluate(stride=1, width=16, inactive="lanes 8-31")["message"]
    assert "128-bit load, 8 active lanes" in msg
    assert "no active lane" in msg


def test_plot_runs(bx):
    import matplotlib
    matplotlib.use("Agg")
    ax = bx.plot(bx.evaluate(stride=33, width=4)["analysis"])
    assert "wavefront" in ax.get_title()
