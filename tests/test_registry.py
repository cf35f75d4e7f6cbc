"""The registry and the checks before launch (no GPU needed)."""
import pytest

from gemm_kernels.core import launch
from gemm_kernels.core.kernels import KERNELS, get


def test_unknown_kernel_lists_known_ones():
    with pytest.raises(ValueError, match="known kernels: .*naive"):
        get("nonesuch")


def test_unknown_parameter_is_named():
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['TILE'\]"):
        get("naive").resolve({"TILE": 4})


def test_value_outside_allowed_set_lists_choices():
    msg = get("naive").problems({"BLOCK": 12})
    assert msg and "BLOCK=12" in msg[0] and "4, 8, 16, 32, 64" in msg[0]


def test_too_many_threads_names_parameter():
    msg = launch.problems("coalesced", {"BLOCK": 64})
    assert msg and "BLOCK" in msg[0] and "1024" in msg[0]


def test_shape_must_be_positive():
    assert any("at least 1" in m for m in launch.problems("naive", None, (0, 4, 4)))


def test_int32_overflow_is_refused():
    assert any("2^31" in m for m in launch.problems("naive", None, (70000, 70000, 8)))


@pytest.mark.parametrize("name", list(KERNELS))
def test_every_kernel_has_a_valid_default_and_source(name):
    k = KERNELS[name]
    assert k.problems(k.defaults()) == [], k.problems(k.defaults())
    assert k.path.is_file()
    assert k.entry in k.source_with_headers()
    assert k.valid_configurations()


def test_mapping_changes_the_instantiation():
    k = get("naive")
    assert k.name_expression({"MAPPING": "x->row"}) == "sgemm_naive<32, 0>"
    assert k.name_expression({"MAPPING": "x->col", "BLOCK": 16}) == "sgemm_naive<16, 1>"
