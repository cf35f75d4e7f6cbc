"""Chapter 10's static check: the bank model on the student's shared tile.

The student declares the transpose's shared tile, `__shared__ T tile[ROWS_EXPR][LEN_EXPR];`.
The check reads that line, evaluates its two sizes with the exercise's parameters (TILE,
PAD, ...), and prices the two shared accesses every tiled transpose makes, for each warp
instruction of warp 0: the store of a tile row (`tile[y][tx]`) and the read down a tile
column (`tile[x][ty]`). A problem when an access costs more wavefronts than the bank model's
ideal, that is when the layout has a bank conflict.

Also the small C integer-expression evaluator the chapter checks share (`c_int`,
`parse_c_int`): digits, names bound to values, + - * / % & | ^ << >>, unary + and -, and
parentheses, with C's precedence; / and % only on non-negative values (where C's
truncating division is Python's //). Nothing else is accepted, so no text from a cell is
ever executed.
"""
from __future__ import annotations

import re

from gemm_kernels.exercises.stubs import stub_lines
from gemm_kernels.memory import banks

# ------------------------------------------------------------------ the evaluator

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_]\w*(?:\.[xyz])?)|(<<|>>|[-+*/%&|^()]))")
# Binary operators by C precedence, loosest first.
_LEVELS = (("|",), ("^",), ("&",), ("<<", ">>"), ("+", "-"), ("*", "/", "%"))


def _tokens(expr: str) -> list[tuple[str, str]]:
    out, i = [], 0
    while i < len(expr):
        if expr[i:].strip() == "":
            break
        m = _TOKEN.match(expr, i)
        if not m:
            raise ValueError(f"`{expr[i:].strip()[0]}` in `{expr.strip()}` is not part of an "
                             "integer expression (digits, names, + - * / % & | ^ << >>, "
                             "parentheses)")
        kind = "int" if m.group(1) else "name" if m.group(2) else "op"
        out.append((kind, m.group(m.lastindex)))
        i = m.end()
    return out


class _Parser:
    def __init__(self, expr: str):
        self.expr, self.toks, self.i = expr.strip(), _tokens(expr), 0

    def _peek(self):
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def _next(self):
        if self.i >= len(self.toks):
            raise ValueError(f"`{self.expr}` ends too early")
        self.i += 1
        return self.toks[self.i - 1]

    def parse(self):
        tree = self._binary(0)
        if self.i != len(self.toks):
            raise ValueError(f"unexpected `{self.toks[self.i][1]}` in `{self.expr}`")
        return tree

    def _binary(self, level):
        if level == len(_LEVELS):
            return self._unary()
        tree = self._binary(level + 1)
        while self._peek() in _LEVELS[level]:
            op = self._next()[1]
            tree = (op, tree, self._binary(level + 1))
        return tree

    def _unary(self):
        kind, text = self._next()
        if kind == "op" and text in "+-":
            return ("neg" if text == "-" else "pos", self._unary())
        if text == "(":
            tree = self._binary(0)
            if self._peek() != ")":
                raise ValueError(f"a `(` in `{self.expr}` is not closed")
            self._next()
            return tree
        if kind == "int":
            return ("int", int(text))
        if kind == "name":
            return ("name", text)
        raise ValueError(f"unexpected `{text}` in `{self.expr}`")


def parse_c_int(expr: str):
    """The expression tree of a C integer expression (ValueError when it is not one)."""
    return _Parser(expr).parse()


_ARITH = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
          "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b}


def _binop(op: str, a: int, b: int) -> int:
    if op in "/%":
        if a < 0 or b <= 0:
            raise ValueError(f"{a} {op} {b}: division is evaluated only for a value >= 0 "
                             "by a value > 0")
        return a // b if op == "/" else a % b
    if op in ("<<", ">>"):
        if not 0 <= b < 64:
            raise ValueError(f"a shift by {b}")
        return a << b if op == "<<" else a >> b
    return _ARITH[op](a, b)


def eval_tree(tree, names: dict[str, int]) -> int:
    """The value of a tree from `parse_c_int`, its names bound by `names`."""
    kind = tree[0]
    if kind == "int":
        return tree[1]
    if kind == "name":
        if tree[1] not in names:
            raise ValueError(f"`{tree[1]}` has no value here (known: {', '.join(names)})")
        return names[tree[1]]
    if kind == "neg":
        return -eval_tree(tree[1], names)
    if kind == "pos":
        return eval_tree(tree[1], names)
    return _binop(kind, eval_tree(tree[1], names), eval_tree(tree[2], names))


def c_int(expr: str, names: dict[str, int]) -> int:
    """The value of the C integer expression `expr` with `names` bound."""
    return eval_tree(parse_c_int(expr), names)


def code_only(source: str) -> str:
    """`source` without its comments (each replaced by a space), so that the example
    expressions in comments are never read as code."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", source, flags=re.S)


# ------------------------------------------------------------------ the tile check

_DECL = re.compile(r"__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?(\w+)\s+tile\s*"
                   r"\[([^\[\]]*)\]\s*\[([^\[\]]*)\]\s*;")
_ITEMSIZE = {"float": 4, "double": 8}


def tile_accesses(pitch: int, params: dict) -> dict[str, list[banks.Analysis]]:
    """The bank model on the shared accesses of warp 0 (threads (l % TILE, l // TILE) of
    the TILE x ROWS block), one analysis per instruction of the stride loop, for a tile
    whose rows start `pitch` elements apart."""
    tile, rows, size = params["TILE"], params["ROWS"], _ITEMSIZE[params["T"]]
    lanes = [(l % tile, l // tile) for l in range(banks.WARP)]
    out = {"the store of a tile row (tile[y][tx])": [],
           "the read down a tile column (tile[x][ty])": []}
    for dy in range(0, tile, rows):
        row_store = [((ty + dy) * pitch + tx) * size for tx, ty in lanes]
        column_read = [(tx * pitch + ty + dy) * size for tx, ty in lanes]
        for what, addrs in zip(out, (row_store, column_read)):
            out[what].append(banks.analyse(addrs, size))
    return out


def padded_tile(params: dict):
    """The static check of the padded-transpose exercise at `params` (all of the kernel's
    parameters, T TILE ROWS PAD ORDER STACK): a callable source -> problems."""
    names = {"TILE": params["TILE"], "ROWS": params["ROWS"], "PAD": params["PAD"],
             "STACK": params["STACK"], "H": params["STACK"] * params["TILE"]}

    def check(source: str) -> list[str]:
        decls = _DECL.findall(code_only(source))
        if not decls:
            return [] if stub_lines(source) else [
                "no shared tile found: declare it on one line as "
                "`__shared__ T tile[rows][row length];` (the bank check reads that line)"]
        if len(decls) > 1:
            return [f"{len(decls)} shared arrays named tile: declare one"]
        _, rows_expr, len_expr = decls[0]
        try:
            n_rows, pitch = c_int(rows_expr, names), c_int(len_expr, names)
        except ValueError as e:
            return [f"cannot read the size of the tile `[{rows_expr}][{len_expr}]`: {e}"]
        if n_rows < names["H"] or pitch < names["TILE"]:
            return [f"the tile is {n_rows} x {pitch} elements: it must hold H = "
                    f"{names['H']} rows of at least TILE = {names['TILE']} elements"]
        problems = []
        for what, found in tile_accesses(pitch, params).items():
            worst = max(found, key=lambda a: a.wavefronts - a.ideal)
            if worst.wavefronts > worst.ideal:
                problems.append(
                    f"with rows of {pitch} elements ({pitch * _ITEMSIZE[params['T']]} bytes), "
                    f"{what} costs {worst.wavefronts} wavefronts per warp instead of "
                    f"{worst.ideal}: a {worst.max_degree}-way bank conflict (pad each row "
                    "so that the next row starts in another bank)")
        return problems

    return check
