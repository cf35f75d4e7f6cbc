"""The C integer-expression evaluator the exercises' static checks read students' index
expressions with: C's precedence and division, and nothing else is ever evaluated."""
import pytest

from gemm_kernels.exercises.cexpr import ExpressionError, code_only, compile_expression, evaluate


@pytest.mark.parametrize("expr, value", [
    ("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("-4 + 10", 6), ("7 / 2", 3), ("7 % 3", 1),
    ("1 << 4 | 1", 17), ("5 ^ 1 & 3", 4), ("TILE * (TILE + 1) >> 1", 528),
    ("7 / 2 + (1 << 3) ^ 5 % 3", 9), ("(threadIdx.x >> 3) & 2", 2)])
def test_c_precedence_and_division(expr, value):
    assert evaluate(expr, {"TILE": 32, "threadIdx.x": 29}) == value


def test_a_compiled_expression_takes_keywords_or_a_dict():
    f = compile_expression("a + b * c << 1 ^ a & 3 | 8 / 3 % 2", ("a", "b", "c"))
    a, b, c = 5, 6, 7
    want = (((a + b * c) << 1) ^ (a & 3)) | ((8 // 3) % 2)
    assert f(a=a, b=b, c=c) == want and f({"a": a, "b": b, "c": c}) == want


@pytest.mark.parametrize("bad", ["m ** 2", "m // 2", "f(m)", "m.x", "m[0]", "1.5 * m",
                                 "m if k else 1", "m == k", "m < k", "~m", "4u", "(1", "1 +",
                                 "sizeof(T)", "__import__('os')", "q + 1", "m ? 1 : 2"])
def test_anything_else_is_refused(bad):
    with pytest.raises(ExpressionError):
        compile_expression(bad, ("m", "k"))


@pytest.mark.parametrize("expr", ["-7 / 2", "(m - 4) / 2", "m % 0", "1 << -1"])
def test_c_division_and_shifts_only_where_c_and_python_agree(expr):
    with pytest.raises(ExpressionError):
        evaluate(expr, {"m": 1})


def test_comments_are_not_code():
    assert code_only("a = 1; // b = 2\n/* c = 3 */ d = 4;").split() == ["a", "=", "1;", "d",
                                                                       "=", "4;"]


@pytest.mark.parametrize("expr, value", [
    ("k == 4 ? m ^ 1 : m ^ 2", 6), ("k != 4 ? 1 : k < 8 ? 2 : 3", 2), ("(k == 4) + (m > 3)", 2),
    ("m ^ ((k == 4 ? (m >> 1) : m) & 7)", 4), ("(m & 4) == 4 && k >= 4 || 0", 1),
    ("k <= 3 ? 1 : (m ? 2 : 3)", 2)])
def test_conditionals_when_asked_follow_c(expr, value):
    assert compile_expression(expr, ("m", "k"), conditionals=True)(m=7, k=4) == value


@pytest.mark.parametrize("bad", ["m & 4 == 4", "1 < m < 3", "m ? 1", "!m", "m and k",
                                 "m if k else 1", "(m ? 1 : 2"])
def test_conditionals_refuse_what_c_and_python_read_differently(bad):
    with pytest.raises(ExpressionError):
        compile_expression(bad, ("m", "k"), conditionals=True)


def test_without_conditionals_the_refusal_says_comparisons_are_out():
    with pytest.raises(ExpressionError, match=r"no comparisons, && \|\| ! or \?:"):
        compile_expression("m == 4 ? 1 : 2", ("m", "k"))
