"""The C integer expressions the static checks read from a student's source (a
shared-memory index, a tile's row length, a lane's place), evaluated safely.

Accepted: integer literals, the names the caller binds (a dotted name such as
`threadIdx.x` included), + - * / % & | ^ << >>, unary - and +, and parentheses. Python
parses these operators with C's relative precedence (* / % over + - over << >> over &
over ^ over |), so the tree is C's; / and % are C's on the only values allowed here, a
non-negative number by a positive one (where C's truncation is Python's floor). Anything
else is an ExpressionError, so no text from a cell is ever executed.
"""
from __future__ import annotations

import ast
import operator
import re
from typing import Callable

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift,
           ast.Div: operator.floordiv, ast.Mod: operator.mod}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_ALLOWED = "digits, the names {names}, + - * / % & | ^ << >>, unary minus and parentheses"


class ExpressionError(ValueError):
    """An expression the evaluator does not accept, or one with no C meaning here."""


def _dotted(node) -> str | None:
    """`threadIdx.x` for the attribute chain Python reads it as, a plain name as itself."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def compile_expression(text: str, names) -> Callable[..., int]:
    """A function of the bound names (a dict, or keywords for plain names) that evaluates
    the C integer expression `text`; an ExpressionError for anything else."""
    text = text.strip()
    allowed = _ALLOWED.format(names=", ".join(names))
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise ExpressionError(f"cannot read {text!r}: write it with {allowed}") from None

    def check(node):
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            check(node.left)
            check(node.right)
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            check(node.operand)
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            pass
        elif _dotted(node) not in names:
            part = ast.get_source_segment(text, node) or type(node).__name__
            raise ExpressionError(f"{part!r} in {text!r}: the check reads only {allowed}")

    def value(node, env):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](value(node.operand, env))
        if not isinstance(node, ast.BinOp):
            return env[_dotted(node)]
        a, b = value(node.left, env), value(node.right, env)
        if isinstance(node.op, (ast.Div, ast.Mod)) and (a < 0 or b <= 0):
            raise ExpressionError(f"{text!r} divides {a} by {b}: only a non-negative value "
                                  "by a positive one is allowed")
        if isinstance(node.op, (ast.LShift, ast.RShift)) and not 0 <= b < 64:
            raise ExpressionError(f"{text!r} shifts by {b}")
        return _BINARY[type(node.op)](a, b)

    check(tree)
    return lambda env=None, **kw: value(tree, {**(env or {}), **kw})


def evaluate(text: str, env: dict) -> int:
    """The value of the C integer expression `text` with the names of `env` bound."""
    return compile_expression(text, tuple(env))(env)


def code_only(source: str) -> str:
    """`source` without its comments (each replaced by a space), so that example
    expressions in comments are never read as code."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", source, flags=re.S)
