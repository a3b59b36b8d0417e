"""The line-aware YAML reader: lines of keys and items, and every failure as a ProjectError with a line."""

from __future__ import annotations

from pathlib import Path

import pytest

from aqven.errors import ProjectError
from aqven.project.yaml_source import parse_yaml, read_yaml


def test_lines_of_keys_and_items() -> None:
    doc = parse_yaml("a: 1\nb:\n  c: [x, y]\n  d:\n    - e: 2\n    - f\n", "t.yaml")
    assert doc.data == {"a": 1, "b": {"c": ["x", "y"], "d": [{"e": 2}, "f"]}}
    assert doc.line_of(("a",)) == 1
    assert doc.line_of(("b", "c")) == 3
    assert doc.line_of(("b", "d", 0, "e")) == 5
    assert doc.line_of(("b", "d", 1)) == 6
    assert doc.line_of(("b", "d", 1, "missing", "deeper")) == 6  # nearest known ancestor


def test_empty_text_is_none() -> None:
    assert parse_yaml("", "t.yaml").data is None
    assert parse_yaml("# only a comment\n", "t.yaml").data is None


def test_an_alias_used_twice_is_fine() -> None:
    doc = parse_yaml("base: &b {x: 1}\none: *b\ntwo: *b\n", "t.yaml")
    assert doc.data == {"base": {"x": 1}, "one": {"x": 1}, "two": {"x": 1}}


def test_number_keys_stay_numbers_and_other_keys_become_text() -> None:
    doc = parse_yaml("1: a\n2020-01-02: b\n~: c\n", "t.yaml")
    assert doc.data == {1: "a", "2020-01-02": "b", "None": "c"}


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ("a: 1\nb: 2\na: 3\n", "E_YAML_DUPLICATE_KEY", 3),
        ("a:\n  b: 1\n  b: 2\n", "E_YAML_DUPLICATE_KEY", 3),
        ("a: 1\n\tb: 2\n", "E_YAML_SYNTAX", 2),
        ("a: [1, 2\nb: 3\n", "E_YAML_SYNTAX", None),
        ("a: &x [*x]\n", "E_YAML_SYNTAX", 1),
        ("a: !!python/name:os.system x\n", "E_YAML_SYNTAX", 1),
        ("a: !!set {x, y}\n", "E_YAML_SYNTAX", 1),
        ("a: 1\n---\nb: 2\n", "E_YAML_SYNTAX", 2),
        ("a: 1\nb: x\x00y\n", "E_YAML_SYNTAX", 2),
        ("a: " + "[" * 100 + "]" * 100 + "\n", "E_YAML_SYNTAX", 1),
        ("? [a]\n: 1\n", "E_YAML_SYNTAX", 1),
    ],
)
def test_failures_are_project_errors_with_a_line(text: str, code: str, line: int | None) -> None:
    with pytest.raises(ProjectError) as info:
        parse_yaml(text, "t.yaml")
    assert info.value.code == code
    assert info.value.file == "t.yaml"
    assert info.value.hint
    if line is not None:
        assert info.value.line == line


def test_read_yaml_names_the_line_of_bad_bytes(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_bytes(b"a: 1\nb: 2\nc: \xff\n")
    with pytest.raises(ProjectError) as info:
        read_yaml(path, "x.yaml")
    assert (info.value.code, info.value.line) == ("E_FILE_UNREADABLE", 3)


def test_read_yaml_of_a_folder_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ProjectError) as info:
        read_yaml(tmp_path, "x.yaml")
    assert info.value.code == "E_FILE_UNREADABLE"
