"""The few C statements that place a thread of chapters 01-02's kernels, run on the CPU.

Chapters 01 and 02 ask the student for the element of C a thread computes: `row = ...;`
and `col = ...;` from the thread's coordinates, possibly under `X_TO_COL ? ... : ...`
or an `if (X_TO_COL) { ... } else { ... }`. The static checks run those statements for
every thread of a grid, so they need a little more than `cexpr` (arithmetic only):

* expressions: integer literals (a `u` suffix allowed), names (`threadIdx.x` and the like
  included), ( ), unary - + ! ~, casts `(int)` / `(unsigned)`, * / % + - << >>, < <= > >=
  == !=, & ^ |, && ||, and ?: ;
* statements: declarations (`const int x = ..., y = ...;`), assignments (= += -= *= /= %=),
  `if` / `if constexpr` with an optional `else`, braces, and empty statements.

C's integer division and remainder (truncation toward zero) are kept. Anything else is
an `Unsupported` error: the text of a cell is never executed, only read by this parser.
"""
from __future__ import annotations

import re

from gemm_kernels.exercises.cexpr import code_only


class Unsupported(ValueError):
    """Text the reader does not handle (or a division by zero while running it)."""


_TOKEN = re.compile(r"\s*(?:(?P<num>\d+)[uUlL]*|(?P<name>[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)"
                    r"|(?P<op><<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||\+=|-=|\*=|/=|%=|\+\+|--"
                    r"|[-+*/%<>=!~&|^?:;,(){}\[\]]))")
_TYPES = {"int", "unsigned", "signed", "long", "short", "size_t", "auto", "const",
          "constexpr", "static", "int32_t", "uint32_t", "int64_t"}


def tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: kind is "num", "name" or "op"."""
    out, at, text = [], 0, text.rstrip()
    while at < len(text):
        m = _TOKEN.match(text, at)
        if not m or m.end() == at:
            raise Unsupported(f"cannot read {text[at:at + 20].strip()!r}")
        kind = m.lastgroup
        out.append((kind, re.sub(r"\s+", "", m.group(kind))))
        at = m.end()
    return out


def _c_div(a: int, b: int) -> int:
    if b == 0:
        raise Unsupported("a division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _c_mod(a: int, b: int) -> int:
    return a - b * _c_div(a, b)


_BINARY = {
    "*": lambda a, b: a * b, "/": _c_div, "%": _c_mod, "+": lambda a, b: a + b,
    "-": lambda a, b: a - b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
    "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b), ">=": lambda a, b: int(a >= b),
    "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
    "&": lambda a, b: a & b, "^": lambda a, b: a ^ b, "|": lambda a, b: a | b,
}
# Binary operators by precedence, loosest first (C's order); && || and ?: are apart.
_LEVELS = (("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="), ("<<", ">>"),
           ("+", "-"), ("*", "/", "%"))


class _Parser:
    def __init__(self, text: str):
        self.toks = tokens(text)
        self.i = 0

    # ---------------------------------------------------------------- helpers
    def peek(self, k: int = 0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("end", "")

    def take(self, want: str | None = None):
        tok = self.peek()
        if tok[0] == "end" or (want is not None and tok[1] != want):
            raise Unsupported(f"expected {want!r}, found {tok[1] or 'the end'!r}")
        self.i += 1
        return tok

    def at(self, text: str) -> bool:
        return self.peek()[1] == text

    # ---------------------------------------------------------------- expressions
    def expression(self):
        cond = self.logical_or()
        if self.at("?"):
            self.take("?")
            yes = self.expression()
            self.take(":")
            no = self.expression()
            return lambda env: yes(env) if cond(env) else no(env)
        return cond

    def logical_or(self):
        left = self.logical_and()
        while self.at("||"):
            self.take()
            a, b = left, self.logical_and()
            left = (lambda a, b: lambda env: int(bool(a(env)) or bool(b(env))))(a, b)
        return left

    def logical_and(self):
        left = self.binary(0)
        while self.at("&&"):
            self.take()
            a, b = left, self.binary(0)
            left = (lambda a, b: lambda env: int(bool(a(env)) and bool(b(env))))(a, b)
        return left

    def binary(self, level: int):
        if level == len(_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in _LEVELS[level]:
            op = _BINARY[self.take()[1]]
            right = self.binary(level + 1)
            left = (lambda f, a, b: lambda env: f(a(env), b(env)))(op, left, right)
        return left

    def unary(self):
        kind, text = self.peek()
        if text in ("-", "+", "!", "~"):
            self.take()
            arg = self.unary()
            return {"-": lambda env: -arg(env), "+": arg,
                    "!": lambda env: int(not arg(env)), "~": lambda env: ~arg(env)}[text]
        if text == "(" and self.peek(1)[1] in _TYPES:          # a cast: (int) x
            self.take("(")
            while self.peek()[1] in _TYPES:
                self.take()
            self.take(")")
            return self.unary()
        if kind == "name" and text in ("static_cast", "int") and self.peek(1)[1] in ("<", "("):
            self.take()
            if self.at("<"):                                    # static_cast<int>(x)
                self.take("<")
                while self.peek()[1] in _TYPES:
                    self.take()
                self.take(">")
            self.take("(")
            inner = self.expression()
            self.take(")")
            return inner
        return self.primary()

    def primary(self):
        kind, text = self.take()
        if kind == "num":
            value = int(text)
            return lambda env: value
        if kind == "name":
            if text in _TYPES:
                raise Unsupported(f"a type ({text}) where a value was expected")

            def name(env, text=text):
                if text not in env:
                    raise Unsupported(f"{text!r} is not known here")
                return env[text]
            return name
        if text == "(":
            inner = self.expression()
            self.take(")")
            return inner
        raise Unsupported(f"cannot read {text!r} in an expression")

    # ---------------------------------------------------------------- statements
    def statements(self, until: str | None = None):
        body = []
        while self.peek()[0] != "end" and not (until and self.at(until)):
            body.append(self.statement())
        return body

    def statement(self):
        kind, text = self.peek()
        if text == ";":
            self.take()
            return lambda env: None
        if text == "{":
            self.take()
            body = self.statements("}")
            self.take("}")
            return lambda env: [s(env) for s in body] and None
        if text == "if":
            self.take()
            if self.at("constexpr"):
                self.take()
            self.take("(")
            cond = self.expression()
            self.take(")")
            yes = self.statement()
            no = None
            if self.at("else"):
                self.take()
                no = self.statement()
            return lambda env: yes(env) if cond(env) else (no(env) if no else None)
        if kind == "name" and text in _TYPES:
            while self.peek()[1] in _TYPES:
                self.take()
            decls = []
            while True:
                name = self.take()[1]
                value = None
                if self.at("="):
                    self.take()
                    value = self.expression()
                decls.append((name, value))
                if not self.at(","):
                    break
                self.take(",")
            self.take(";")

            def declare(env, decls=decls):
                for name, value in decls:
                    env[name] = value(env) if value else 0
            return declare
        if kind == "name":
            name = self.take()[1]
            op = self.take()[1]
            if op in ("++", "--"):
                self.take(";")
                step = 1 if op == "++" else -1
                return lambda env: env.__setitem__(name, env[name] + step)
            if op not in ("=", "+=", "-=", "*=", "/=", "%="):
                raise Unsupported(f"cannot read the statement starting {name} {op}")
            value = self.expression()
            self.take(";")
            if op == "=":
                return lambda env: env.__setitem__(name, value(env))
            f = _BINARY[op[0]]
            return lambda env: env.__setitem__(name, f(env[name], value(env)))
        raise Unsupported(f"cannot read the statement starting {text!r}")


def compile_statements(text: str):
    """A function env -> env that runs the C statements `text` (comments allowed) on a
    copy of `env` (a dict of names to integers) and returns it."""
    p = _Parser(code_only(text))
    body = p.statements()

    def run(env: dict) -> dict:
        env = dict(env)
        for s in body:
            s(env)
        return env
    return run


def compile_expression(text: str):
    """A function env -> int for one C expression (the `?:` and comparisons included)."""
    p = _Parser(code_only(text))
    f = p.expression()
    if p.peek()[0] != "end":
        raise Unsupported(f"cannot read past {p.peek()[1]!r} in {text.strip()!r}")
    return f


# ---------------------------------------------------------------- reading a kernel

def template_names(source: str) -> list[str]:
    """The names of the kernel's template parameters, in order (`BLOCK`, `X_TO_COL`)."""
    m = re.search(r"template\s*<([^<>]*)>", code_only(source))
    if not m:
        return []
    return [part.split()[-1] for part in m.group(1).split(",") if part.split()]


def kernel_body(source: str, entry: str) -> str | None:
    """The text between the braces of `__global__ void entry(...) { ... }`, comments
    removed; None when it is not there."""
    text = code_only(source)
    m = re.search(rf"\b{re.escape(entry)}\s*\(", text)
    if not m:
        return None
    start = text.find("{", m.end())
    if start < 0:
        return None
    depth = 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            return text[start + 1:end]
    return None


GUARD = re.compile(r"if\s*\(\s*row\s*<\s*M\s*&&\s*col\s*<\s*N\s*\)")


def placement(source: str, entry: str):
    """(run, rest) for a chapter 01-02 kernel: `run(env)` runs the kernel's statements
    before the guard `if (row < M && col < N)` and returns the names they leave, `rest`
    is the text from the guard on. An Unsupported error when either is not there or
    cannot be read."""
    body = kernel_body(source, entry)
    if body is None:
        raise Unsupported(f"the kernel {entry}(...) {{ ... }} is not there any more")
    m = GUARD.search(body)
    if not m:
        raise Unsupported("the line 'if (row < M && col < N) {' is not there any more")
    return compile_statements(body[:m.start()]), body[m.start():]


def thread_names(block: tuple[int, int, int], thread: tuple[int, int, int],
                 dims: tuple[int, int, int], grid: tuple[int, int, int]) -> dict:
    """The built-in names a thread sees, for the environment of `placement`."""
    env = {"warpSize": 32}
    for prefix, values in (("blockIdx", block), ("threadIdx", thread), ("blockDim", dims),
                           ("gridDim", grid)):
        for axis, v in zip("xyz", values):
            env[f"{prefix}.{axis}"] = v
    return env


def readable(source: str, entry: str):
    """(run, the first two template names) of a chapter 01-02 kernel whose statements
    before the guard can be read (see `placement`), or None: a check that cannot read
    the source says nothing, and the run on the CPU or GPU judges it."""
    try:
        run, _ = placement(source, entry)
    except Unsupported:
        return None
    names = template_names(source)[:2]
    return (run, names) if len(names) == 2 else None


def _spans(values) -> str:
    """Sorted distinct integers in words, by runs of consecutive ones: '0 to 31',
    '0 and 16', '0 to 3 and 16 to 19'; more than four runs: 'from 0 to 124 (32 in all)'."""
    runs = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    if len(runs) > 4:
        return f"from {values[0]} to {values[-1]} ({len(values)} in all)"
    words = [f"{a}" if a == b else f"{a} and {b}" if b == a + 1 and len(runs) == 1
             else f"{a} to {b}" for a, b in runs]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def cells_text(elements) -> str:
    """Where the (row, col) `elements` of C lie, in words: 'rows 0 to 31 of column 5',
    'rows 0 and 16, columns 0 to 15' (rows that are not consecutive are named apart)."""
    rows = sorted({r for r, _ in elements})
    cols = sorted({c for _, c in elements})
    def some(word, values):
        return f"{word} {values[0]}" if len(values) == 1 else f"{word}s {_spans(values)}"
    if len(cols) == 1:
        return f"{some('row', rows)} of column {cols[0]}"
    if len(rows) == 1:
        return f"{some('column', cols)} of row {rows[0]}"
    return f"{some('row', rows)}, {some('column', cols)}"
