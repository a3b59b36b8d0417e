"""The package keeps the layers of docs/architecture.md: imports go only downwards, and no modules import
each other in a circle — counting imports inside functions and under TYPE_CHECKING, which hide a cycle
but do not remove it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Bottom to top, as docs/architecture.md draws them. A layer may import its own and any lower layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("aqven", "aqven.errors", "aqven.heap"),
    ("aqven.project",),
    ("aqven.people",),
    ("aqven.models", "aqven.templates"),
    ("aqven.store",),
    ("aqven.engine",),
    ("aqven.research",),
    ("aqven.server",),
    ("aqven.cli", "aqven.__main__"),
)


@dataclass(frozen=True)
class Import:
    """One import statement of one module: which module it names, and where."""

    source: str
    target: str
    line: int


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_under(root: Path, package: str = "aqven") -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> Iterator[Import]:
    """Every aqven module `name` imports, wherever the statement sits (module level, functions, TYPE_CHECKING)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _resolve(name, alias.name, (), node.lineno, known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            yield from _resolve(name, base, tuple(a.name for a in node.names), node.lineno, known)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "__import__"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield from _resolve(name, node.args[0].value, (), node.lineno, known)


def _resolve(source: str, base: str, names: tuple[str, ...], line: int, known: set[str]) -> Iterator[Import]:
    if base != "aqven" and not base.startswith("aqven."):
        return
    # `from pkg import mod` imports the module pkg.mod; `from mod import thing` imports mod.
    submodules = [f"{base}.{n}" for n in names if f"{base}.{n}" in known]
    if submodules:
        yield from (Import(source, s, line) for s in submodules)
        if len(submodules) == len(names):
            return
    target = base
    while target not in known and "." in target:
        target = target.rpartition(".")[0]
    yield Import(source, target, line)


def layer_of(module: str) -> int:
    best, level = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), index
    if level < 0:
        raise AssertionError(f"{module} is in no layer of LAYERS: add it (and to docs/architecture.md)")
    return level


def upward_imports(root: Path) -> list[str]:
    modules = modules_under(root)
    found = []
    for name, path in modules.items():
        for imp in imports_of(name, path, set(modules)):
            if layer_of(imp.target) > layer_of(imp.source):
                found.append(f"{path.relative_to(root)}:{imp.line} {imp.source} imports {imp.target} (a higher layer)")
    return found


def _runs(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules importing `name` runs: what it imports, and the packages around each (importing a.b.c runs
    a/__init__ and a/b/__init__ first, so a package's __init__ that imports back makes a cycle too) other than
    the packages `name` itself is in, which are running already."""
    out: set[str] = set()
    for imp in imports_of(name, path, known):
        parts = imp.target.split(".")
        out.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
    return {m for m in out if m in known and m != name and not name.startswith(m + ".")}


def import_cycles(root: Path) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each as a list of names."""
    modules = modules_under(root)
    graph = {n: sorted(_runs(n, p, set(modules))) for n, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, []):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in graph:
        if name not in index:
            visit(name)
    return cycles


def test_no_module_imports_a_higher_layer() -> None:
    assert upward_imports(SRC) == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert import_cycles(SRC) == []


def test_every_module_is_in_a_layer() -> None:
    for name in modules_under(SRC):
        layer_of(name)


# The checks above must see what they are for: an upward import and a cycle, even inside a function.
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / "aqven" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    "statement",
    [
        "from aqven.cli.main import main\n",
        "def f():\n    from aqven.server import app\n",
        "import aqven.server.app\n",
        "from ..server import app\n",
        "x = __import__('aqven.cli.main')\n",
    ],
)
def test_an_upward_import_is_caught_wherever_it_is_written(tmp_path: Path, statement: str) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "cli/__init__.py": "",
            "cli/main.py": "def main(): ...\n",
            "server/__init__.py": "",
            "server/app.py": "from aqven.research import stats\n",
            "research/__init__.py": "",
            "research/stats.py": statement,
        },
    )
    found = upward_imports(root)
    assert len(found) == 1 and found[0].startswith("aqven/research/stats.py:")


def test_a_cycle_hidden_in_a_function_is_caught(tmp_path: Path) -> None:
    files = {
        "__init__.py": "",
        "research/__init__.py": "",
        "research/a.py": "from aqven.research.b import thing\n",
        "research/b.py": "def thing():\n    from aqven.research import a\n",
        "research/c.py": "from aqven.research import a, b\n",
    }
    assert import_cycles(_tree(tmp_path, files)) == [["aqven.research.a", "aqven.research.b"]]
    files["research/b.py"] = "def thing(): ...\n"
    assert import_cycles(_tree(tmp_path, files)) == []


def test_a_cycle_through_a_package_s_init_is_caught(tmp_path: Path) -> None:
    """Importing a.b runs a/__init__ first: a module of another package that imports a.b, while a/__init__ imports
    (through a.c) that module, fails at import when it is imported first."""
    files = {
        "__init__.py": "",
        "research/__init__.py": "",
        "research/series/__init__.py": "from aqven.research.series.runner import Runner\n",
        "research/series/attempt.py": "class Result: ...\n",
        "research/series/runner.py": "from aqven.research.cluster import Pool\n",
        "research/cluster.py": "from aqven.research.series.attempt import Result\n",
    }
    cycles = import_cycles(_tree(tmp_path, files))
    assert cycles == [["aqven.research.cluster", "aqven.research.series", "aqven.research.series.runner"]]
    files["research/series/runner.py"] = "class Runner: ...\n"
    assert import_cycles(_tree(tmp_path, files)) == []
