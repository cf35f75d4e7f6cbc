"""The C integer expressions the static checks read from a student's source (a
shared-memory index, a tile's row length, a lane's place), evaluated safely.

Accepted: integer literals, the names the caller binds (a dotted name such as
`threadIdx.x` included), + - * / % & | ^ << >>, unary - and +, and parentheses. Python
parses these operators with C's relative precedence (* / % over + - over << >> over &
over ^ over |), so the tree is C's; / and % are C's on the only values allowed here, a
non-negative number by a positive one (where C's truncation is Python's floor). Anything
else is an ExpressionError, so no text from a cell is ever executed.

With `conditionals=True` (a check whose natural answer picks between two formulas, such
as chapter 14's swizzle for two row widths) it also accepts C's comparisons (== != < <=
> >=, each worth 1 or 0), && || and `cond ? a : b`. C ranks comparisons above & ^ |,
Python below them, so a comparison with an unparenthesised & ^ | beside it is refused
(parenthesise it), as is a chain such as a < b < c.
"""
from __future__ import annotations

import ast
import operator
import re
from typing import Callable

from gemm_kernels.core import cuda_text

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift,
           ast.Div: operator.floordiv, ast.Mod: operator.mod}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_ALLOWED = "digits, the names {names}, + - * / % & | ^ << >>, unary minus and parentheses"
_ALLOWED_IF = ("digits, the names {names}, + - * / % & | ^ << >>, unary minus, parentheses, "
               "== != < <= > >=, && || and ?:")
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
_BITWISE = (ast.BitAnd, ast.BitOr, ast.BitXor)


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


def _split_ternary(text: str) -> tuple[str, str, str] | None:
    """(condition, then, else) of the outermost `?:` of `text` (outside parentheses), or
    None. C's `?:` binds loosest and groups to the right."""
    depth, q = 0, None
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and ch == "?" and q is None:
            q = i
    if q is None:
        return None
    depth, nested = 0, 0
    for i in range(q + 1, len(text)):
        ch = text[i]
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and ch == "?":
            nested += 1
        elif depth == 0 and ch == ":":
            if nested == 0:
                return text[:q], text[q + 1:i], text[i + 1:]
            nested -= 1
    raise ExpressionError(f"cannot read {text.strip()!r}: a '?' without its ':'")


def _c_to_python(text: str) -> str:
    """C's ?: && || written as Python's `if else`, `and`, `or` (parentheses
    kept, so C's grouping is kept), for `ast` to parse."""
    out, i = [], 0
    while i < len(text):                      # each parenthesised part on its own
        if text[i] == "(":
            depth = 0
            for j in range(i, len(text)):
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0:
                    break
            else:
                raise ExpressionError(f"cannot read {text.strip()!r}: a '(' without its ')'")
            out.append("(" + _c_to_python(text[i + 1:j]) + ")")
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    flat = "".join(out)
    parts = _split_ternary(flat)
    if parts:
        cond, then, other = (_c_to_python(x) for x in parts)
        return f"(({then}) if ({cond}) else ({other}))"
    return flat.replace("&&", " and ").replace("||", " or ")


def compile_expression(text: str, names, conditionals: bool = False) -> Callable[..., int]:
    """A function of the bound names (a dict, or keywords for plain names) that evaluates
    the C integer expression `text`; an ExpressionError for anything else.
    `conditionals`: also C's comparisons, && || ! and ?: (see the module's comment)."""
    text = text.strip()
    allowed = (_ALLOWED_IF if conditionals else _ALLOWED).format(names=", ".join(names))
    if not conditionals and re.search(r"[?<>=!]=?|&&|\|\|", re.sub(r"<<|>>", "", text)):
        allowed += " (no comparisons, && || ! or ?:)"
    py = _c_to_python(text) if conditionals else text
    if conditionals and re.search(r"\b(and|or|not|if|else|is|in|lambda)\b", text):
        raise ExpressionError(f"cannot read {text!r}: write it with {allowed}")
    try:
        tree = ast.parse(py, mode="eval").body
    except SyntaxError:
        raise ExpressionError(f"cannot read {text!r}: write it with {allowed}") from None

    def parenthesised(node) -> bool:
        before = py[:node.col_offset].rstrip()
        after = py[node.end_col_offset:].lstrip()
        return before.endswith("(") and after.startswith(")")

    def check(node):
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            check(node.left)
            check(node.right)
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            check(node.operand)
        elif conditionals and isinstance(node, ast.Compare):
            if len(node.ops) != 1 or type(node.ops[0]) not in _COMPARE:
                raise ExpressionError(f"cannot read {text!r}: compare two values at a time "
                                      "(no chains such as a < b < c)")
            for side in (node.left, node.comparators[0]):
                if (isinstance(side, ast.BinOp) and isinstance(side.op, _BITWISE)
                        and not parenthesised(side)):
                    raise ExpressionError(
                        f"in {text!r}, C compares before it applies & ^ |: put the "
                        "& ^ | part in parentheses to say which you mean")
                check(side)
        elif conditionals and isinstance(node, ast.BoolOp):
            for v in node.values:
                check(v)
        elif conditionals and isinstance(node, ast.IfExp):
            for part in (node.test, node.body, node.orelse):
                check(part)
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            pass
        elif _dotted(node) not in names:
            part = ast.get_source_segment(text, node) or type(node).__name__
            raise ExpressionError(f"{part!r} in {text!r}: the check reads only {allowed}")

    def value(node, env):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Compare):
            return int(_COMPARE[type(node.ops[0])](value(node.left, env),
                                                   value(node.comparators[0], env)))
        if isinstance(node, ast.BoolOp):
            vals = (value(v, env) != 0 for v in node.values)
            return int(all(vals) if isinstance(node.op, ast.And) else any(vals))
        if isinstance(node, ast.IfExp):
            return value(node.body if value(node.test, env) else node.orelse, env)
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
    return cuda_text.without_comments(source)


_DECLARATION = r"\b(?:unsigned|int|uint32_t|auto|const)\s+(?:int\s+)?{name}\s*=([^;]*);"


def initializers(code: str, name: str) -> list[str]:
    """The expressions that declarations of `name` start it with (`int name = <e>;`)."""
    return [e.strip() for e in re.findall(_DECLARATION.format(name=name), code)]


def assignments(code: str, name: str) -> tuple[list[str], bool]:
    """The expressions of the lines `name = <expression>;` in `code` (C code without its
    comments; a declaration such as `int name = 0;` is not one of them), and whether
    `name` is also changed another way (a compound assignment, ++ or --): what an
    exercise that asks for one line `name = <expression>;` reads."""
    body = re.sub(_DECLARATION.format(name=name), " ", code)
    found = [e.strip() for e in re.findall(rf"\b{name}\s*=(?!=)([^;]+);", body)]
    changed = re.search(rf"\b{name}\s*(<<|>>|[-+*/%&|^])=|\+\+\s*{name}\b|--\s*{name}\b|"
                        rf"\b{name}\s*(\+\+|--)", body) is not None
    return found, changed
