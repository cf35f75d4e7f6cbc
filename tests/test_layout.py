"""The package's layout is its architecture: each subpackage imports only the layers its
`__init__` allows, and no module imports itself back through others (no import circle).
Read from the sources with `ast`, so deferred imports inside functions count too."""
import ast
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "gemm_kernels"
# What each layer may import besides itself.
ALLOWED = {"core": set(), "measure": {"core"}, "memory": {"core", "measure"},
           "exercises": {"core", "measure", "memory"}, "plan": {"core", "measure"},
           "notebook": {"core", "measure", "memory", "exercises", "plan"}}


def _modules():
    return {".".join(p.relative_to(PKG.parent).with_suffix("").parts): p
            for p in PKG.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """Every gemm_kernels module `path` imports (a package name counts as its __init__)."""
    mods = _modules()
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("gemm_kernels"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.add(sub if sub in mods else node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; use gemm_kernels.<layer>.<module>")
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("gemm_kernels")}
    return out


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in ALLOWED else None


@pytest.mark.parametrize("module", sorted(m for m in _modules() if _layer(m)))
def test_layer_imports_only_what_it_may(module):
    layer = _layer(module)
    for imp in _imports(_modules()[module]):
        other = _layer(imp)
        assert other is None or other == layer or other in ALLOWED[layer], \
            f"{module} ({layer}) imports {imp} ({other})"
        assert imp != "gemm_kernels", \
            f"{module} imports from the top-level package; name the layer's module"


def test_no_import_circle():
    mods = _modules()
    graph = {m: {i if i in mods else i + ".__init__" for i in _imports(p)} & set(mods)
             for m, p in mods.items()}
    state = {}

    def visit(m, path):
        if state.get(m) == "open":
            raise AssertionError("import circle: " + " -> ".join(path[path.index(m):] + [m]))
        if state.get(m) == "done":
            return
        state[m] = "open"
        for n in sorted(graph[m]):
            visit(n, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        visit(m, [])


def test_every_subpackage_says_what_it_holds_and_may_import():
    for layer in ALLOWED:
        doc = ast.get_docstring(ast.parse((PKG / layer / "__init__.py").read_text()))
        assert doc and "import" in doc, f"{layer}/__init__.py must say what it may import"


def test_the_circle_detector_catches_one(tmp_path, monkeypatch):
    """Negative control: two modules importing each other are reported."""
    fake = tmp_path / "gemm_kernels"
    (fake / "core").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "core" / "__init__.py").write_text('"""may import nothing"""')
    (fake / "core" / "a.py").write_text("from gemm_kernels.core import b\n")
    (fake / "core" / "b.py").write_text("def f():\n    from gemm_kernels.core import a\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", fake)
    with pytest.raises(AssertionError, match="import circle"):
        test_no_import_circle()
