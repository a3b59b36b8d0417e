"""Generated broken projects (hypothesis): random mutations of the valid base project.

For each: `check_project` never raises; a mutation known to break the project yields at least one error;
every diagnostic has a stable code, a severity, a message, a hint and a line inside its file.
"""

from __future__ import annotations

import copy
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aqven.engine.check import check_project
from aqven.errors import ProjectError
from aqven.project.bindings import BindingSyntaxError, parse_binding
from aqven.project.diagnostics import Diagnostic
from aqven.project.loader import load_project
from aqven.project.yaml_source import parse_yaml
from support.projects import BASE, Overrides, project_files, write_files

CODE_RE = re.compile(r"^[EW]_[A-Z_]+$")
YAML_FILES = [name for name in BASE if name.endswith(".yaml")]
OTHER_FILES = [name for name in BASE if not name.endswith(".yaml")]
DATA: dict[str, Any] = {name: yaml.safe_load(BASE[name]) for name in YAML_FILES}
MAIN, HELPER = "flows/main/flow.yaml", "flows/helper/flow.yaml"
MAIN_IDS = ["classify", "enrich", "panel", "judge_1", "judge_2", "merge", "draft", "review", "finish"]

# Seeded for CI; AQVEN_FUZZ_EXAMPLES=5000 AQVEN_FUZZ_RANDOM=1 pytest ... for a longer, random hunt.
EXAMPLES = int(os.environ.get("AQVEN_FUZZ_EXAMPLES", "120"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("AQVEN_FUZZ_RANDOM"),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Mappings whose keys are fixed by the schema: any new key there is an error.
STRICT_MAPPINGS: list[tuple[str, tuple[Any, ...]]] = [
    ("aqven.yaml", ()),
    ("aqven.yaml", ("research",)),
    ("aqven.yaml", ("engine",)),
    ("agents/a.yaml", ()),
    ("agents/a.yaml", ("settings",)),
    ("datasets/d.yaml", ()),
    ("datasets/d.yaml", ("cases", 0)),
    ("datasets/d.yaml", ("cases", 1)),
    (MAIN, ()),
    *[(MAIN, ("nodes", i)) for i in range(6)],
    *[(MAIN, ("nodes", 2, "nodes", i)) for i in range(3)],
    (HELPER, ()),
    (HELPER, ("nodes", 0)),
]
# Keys without which the file cannot load.
REQUIRED_KEYS: list[tuple[str, tuple[Any, ...]]] = [
    ("aqven.yaml", ("package",)),
    ("agents/a.yaml", ("model",)),
    ("datasets/d.yaml", ("cases",)),
    ("datasets/d.yaml", ("cases", 0, "name")),
    (MAIN, ("nodes",)),
    (MAIN, ("nodes", 0, "prompt")),
    (MAIN, ("nodes", 0, "agent")),
    (MAIN, ("nodes", 1, "code")),
    (MAIN, ("nodes", 3, "flow")),
    (MAIN, ("nodes", 4, "question")),
    *[(MAIN, ("nodes", i, key)) for i in range(6) for key in ("id", "kind")],
    (MAIN, ("nodes", 2, "nodes", 1, "kind")),
    (HELPER, ("nodes", 0, "code")),
]
# Values that must be text: a list or mapping there is an error.
TEXT_VALUES: list[tuple[str, tuple[Any, ...]]] = [
    ("aqven.yaml", ("package",)),
    ("agents/a.yaml", ("model",)),
    ("agents/a.yaml", ("simulator",)),
    ("datasets/d.yaml", ("cases", 1, "name")),
    (MAIN, ("nodes", 0, "agent")),
    (MAIN, ("nodes", 0, "prompt")),
    (MAIN, ("nodes", 1, "code")),
    (MAIN, ("nodes", 3, "flow")),
    (MAIN, ("nodes", 4, "question")),
    (MAIN, ("result",)),
    (HELPER, ("nodes", 0, "id")),
]
# Files the base project names; deleting one is an error.
REFERENCED_FILES = [
    "flows/main/classify.md",
    "flows/main/judge.md",
    "flows/main/enrich.py",
    "flows/helper/helper.py",
    "sim/agents.py",
    "flows/helper/flow.yaml",
    "agents/a.yaml",
    "aqven.yaml",
]
# Node inputs where a binding can be injected: (file, node path, input key, ids of the flow).
INPUT_SLOTS = [
    (MAIN, ("nodes", 0), "ticket", MAIN_IDS),
    (MAIN, ("nodes", 1), "label", MAIN_IDS),
    (MAIN, ("nodes", 2, "nodes", 0), "text", MAIN_IDS),
    (MAIN, ("nodes", 2, "nodes", 2), "a", MAIN_IDS),
    (MAIN, ("nodes", 4), "draft", MAIN_IDS),
    (MAIN, ("nodes", 5), "review", MAIN_IDS),
    (HELPER, ("nodes", 0), "text", ["shout"]),
]

identifiers = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=False), st.text(max_size=20)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
collections = st.one_of(st.lists(scalars, max_size=3), st.dictionaries(identifiers, scalars, min_size=1, max_size=3))
binding_texts = st.one_of(
    st.builds(lambda s: "$" + s, st.text(max_size=15)),
    st.builds(
        lambda n, f: f"${n}.out{f}",
        st.sampled_from([*MAIN_IDS, "shout", "nope", "input"]),
        st.sampled_from(["", ".x", ".label", ".0"]),
    ),
    st.builds(lambda s, f: f"${s}.{f}", st.sampled_from(["input", "context"]), st.text(max_size=8)),
    st.builds(lambda n: f"${n}.out", identifiers),
)
garble_alphabet = st.sampled_from(list("()[]{}:=,.'\"-?*&!|> \n\tabc#$%@`"))


@dataclass
class Mutation:
    kind: str
    overrides: Overrides
    breaks: bool  # known to break the project


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _with(file: str, path: tuple[Any, ...], change: Any) -> str:
    data = copy.deepcopy(DATA[file])
    parent = _get(data, path[:-1]) if path else None
    change(data if not path else parent, path[-1] if path else None)
    return _dump(data)


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            out.append((*prefix, key))
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.append((*prefix, i))
            out.extend(_paths(value, (*prefix, i)))
    return out


@st.composite
def insert_unknown_key(draw: st.DrawFn) -> Mutation:
    file, path = draw(st.sampled_from(STRICT_MAPPINGS))
    key = "zz_" + draw(identifiers)
    value = draw(values)
    data = copy.deepcopy(DATA[file])
    _get(data, path)[key] = value
    return Mutation("insert_unknown_key", {file: _dump(data)}, True)


@st.composite
def delete_required_key(draw: st.DrawFn) -> Mutation:
    file, path = draw(st.sampled_from(REQUIRED_KEYS))
    return Mutation("delete_required_key", {file: _with(file, path, lambda p, k: p.pop(k))}, True)


@st.composite
def delete_any_key(draw: st.DrawFn) -> Mutation:
    file = draw(st.sampled_from(YAML_FILES))
    path = draw(st.sampled_from(_paths(DATA[file])))
    return Mutation("delete_any_key", {file: _with(file, path, lambda p, k: p.pop(k))}, False)


@st.composite
def replace_value(draw: st.DrawFn) -> Mutation:
    file = draw(st.sampled_from(YAML_FILES))
    path = draw(st.sampled_from(_paths(DATA[file])))
    value = draw(values)

    def put(parent: Any, key: Any) -> None:
        parent[key] = value

    return Mutation("replace_value", {file: _with(file, path, put)}, False)


@st.composite
def text_becomes_collection(draw: st.DrawFn) -> Mutation:
    file, path = draw(st.sampled_from(TEXT_VALUES))
    value = draw(collections)

    def put(parent: Any, key: Any) -> None:
        parent[key] = value

    return Mutation("text_becomes_collection", {file: _with(file, path, put)}, True)


@st.composite
def garble_text(draw: st.DrawFn) -> Mutation:
    file = draw(st.sampled_from(list(BASE)))
    text = BASE[file]
    assert isinstance(text, str)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "insert", "duplicate_line", "swap_lines"]))
        lines = text.splitlines(keepends=True)
        if op == "delete" and text:
            i = draw(st.integers(0, len(text) - 1))
            j = draw(st.integers(i, min(len(text), i + 20)))
            text = text[:i] + text[j:]
        elif op == "insert":
            i = draw(st.integers(0, len(text)))
            text = text[:i] + "".join(draw(st.lists(garble_alphabet, min_size=1, max_size=6))) + text[i:]
        elif op == "duplicate_line" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            text = "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])
        elif op == "swap_lines" and len(lines) > 1:
            i = draw(st.integers(0, len(lines) - 2))
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
            text = "".join(lines)
    return Mutation("garble_text", {file: text}, False)


@st.composite
def random_bytes(draw: st.DrawFn) -> Mutation:
    file = draw(st.sampled_from(YAML_FILES))
    raw = draw(st.binary(max_size=60))
    try:
        loaded = yaml.safe_load(raw.decode("utf-8"))
        still_whole = isinstance(loaded, dict) and len(loaded) >= 2
    except (UnicodeDecodeError, yaml.YAMLError):
        still_whole = False
    return Mutation("random_bytes", {file: raw}, not still_whole)


@st.composite
def delete_referenced_file(draw: st.DrawFn) -> Mutation:
    return Mutation("delete_referenced_file", {draw(st.sampled_from(REFERENCED_FILES)): None}, True)


@st.composite
def inject_binding(draw: st.DrawFn) -> Mutation:
    file, node_path, key, ids = draw(st.sampled_from(INPUT_SLOTS))
    text = draw(binding_texts)
    data = copy.deepcopy(DATA[file])
    _get(data, node_path)["inputs"][key] = text
    try:
        b = parse_binding(text) if text.startswith("$") and not text.startswith("$$") else None
        breaks = b is not None and b.source == "node" and b.node not in ids
    except BindingSyntaxError:
        breaks = True
    return Mutation("inject_binding", {file: _dump(data)}, breaks)


@st.composite
def rename_node(draw: st.DrawFn) -> Mutation:
    old = draw(st.sampled_from(MAIN_IDS))
    new = draw(identifiers.filter(lambda s: s not in MAIN_IDS and s not in ("input", "context")))
    text = BASE[MAIN]
    assert isinstance(text, str)
    return Mutation("rename_node", {MAIN: text.replace(f"id: {old}\n", f"id: {new}\n")}, True)


@st.composite
def random_type(draw: st.DrawFn) -> Mutation:
    file, path = draw(st.sampled_from([(MAIN, ("input",)), (MAIN, ("nodes", 0, "output")), (HELPER, ("output",))]))
    spec = draw(st.one_of(st.text(max_size=10), values))

    def put(parent: Any, key: Any) -> None:
        parent[key] = spec

    known = ("string", "integer", "number", "boolean", "any", "null")
    breaks = isinstance(spec, str) and spec.strip().rstrip("?").strip() not in known
    return Mutation("random_type", {file: _with(file, path, put)}, breaks)


single_mutations = st.one_of(
    insert_unknown_key(),
    delete_required_key(),
    delete_any_key(),
    replace_value(),
    text_becomes_collection(),
    garble_text(),
    random_bytes(),
    delete_referenced_file(),
    inject_binding(),
    rename_node(),
    random_type(),
)


@st.composite
def two_mutations(draw: st.DrawFn) -> Mutation:
    """Two mutations at once; when both touch one file, the second one's version of it stands."""
    first, second = draw(single_mutations), draw(single_mutations)
    overlap = set(first.overrides) & set(second.overrides)
    breaks = second.breaks or (first.breaks and not overlap)
    return Mutation("two_mutations", {**first.overrides, **second.overrides}, breaks)


mutations = st.one_of(single_mutations, two_mutations())


@contextmanager
def isolated_imports() -> Iterator[None]:
    """Project modules are imported by file; forget them (and their folders on sys.path) afterwards."""
    path, modules = list(sys.path), set(sys.modules)
    try:
        yield
    finally:
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            if name.startswith("aqven_project_"):
                del sys.modules[name]


def assert_well_formed(root: Path, diagnostics: list[Diagnostic]) -> None:
    for d in diagnostics:
        assert CODE_RE.match(d.code), d
        assert d.code != "E_INTERNAL", d.render()
        assert d.severity in ("error", "warning"), d
        assert d.message.strip() and d.hint.strip(), d
        if d.line is not None:
            assert d.line >= 1, d
            path = root / d.file if d.file else None
            if path is not None and path.is_file():
                text = path.read_bytes().decode("utf-8", errors="replace")
                assert d.line <= len(text.splitlines()) + 1, d.render()


def run_check(files: dict[str, str | bytes]) -> tuple[Path, list[Diagnostic]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = write_files(Path(tmp) / "p", files)
        _, diagnostics = check_project(root)
        assert_well_formed(root, diagnostics)
        return root, diagnostics


@SETTINGS
@given(mutations)
def test_generated_broken_project_yields_diagnostics_never_a_traceback(mutation: Mutation) -> None:
    event(mutation.kind)
    event("known to break" if mutation.breaks else "may or may not break")
    with isolated_imports():
        _, diagnostics = run_check(project_files(mutation.overrides))
    if mutation.breaks:
        assert any(d.severity == "error" for d in diagnostics), (mutation.kind, mutation.overrides)
    event("has errors" if any(d.severity == "error" for d in diagnostics) else "no errors")


@SETTINGS
@given(st.text(max_size=200))
def test_parse_yaml_of_any_text_returns_or_raises_a_project_error(text: str) -> None:
    try:
        doc = parse_yaml(text, "x.yaml")
    except ProjectError as exc:
        assert exc.code in ("E_YAML_SYNTAX", "E_YAML_DUPLICATE_KEY")
        assert exc.file == "x.yaml" and exc.hint
        assert exc.line is None or 1 <= exc.line <= text.count("\n") + 2
    else:
        assert doc.file == "x.yaml"
        assert all(line >= 1 for line in doc.lines.values())


yaml_like = st.one_of(
    st.text(max_size=120),
    st.builds(_dump, values),
    st.lists(
        st.sampled_from(
            [
                "package: x\n",
                "  - a\n",
                "nodes:\n",
                "- id: a\n",
                "  kind: llm\n",
                "? x\n",
                ": y\n",
                "&a [*a]\n",
                "{",
                "}",
                "\t",
                "'",
                '"',
                "---\n",
                "key: value\n",
                "!!str x\n",
            ]
        ),
        max_size=8,
    ).map("".join),
)


@settings(
    max_examples=max(150, EXAMPLES // 2),
    deadline=None,
    derandomize=not os.environ.get("AQVEN_FUZZ_RANDOM"),
    database=None,
)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "aqven.yaml",
                "agents/b.yaml",
                "datasets/e.yaml",
                "flows/f/flow.yaml",
                ".aqven/local.yaml",
                "flows/main/flow.yaml",
                "agents/a.yaml",
            ]
        ),
        st.one_of(yaml_like, st.binary(max_size=40)),
        min_size=1,
    )
)
def test_load_project_and_check_of_arbitrary_files_never_raise(files: dict[str, str | bytes]) -> None:
    with isolated_imports(), tempfile.TemporaryDirectory() as tmp:
        root = write_files(Path(tmp) / "p", files)
        project = load_project(root)
        assert all(CODE_RE.match(d.code) for d in project.diagnostics)
        _, diagnostics = check_project(root)
        assert_well_formed(root, diagnostics)
