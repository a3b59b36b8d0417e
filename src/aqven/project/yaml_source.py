"""Read YAML into plain data while remembering the line of every key and item.

Diagnostics name file:line, so the loader keeps a map from a path inside the document
(a tuple of keys and indexes) to the 1-based line where that value starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from aqven.errors import ProjectError

PathKey = tuple[str | int, ...]


@dataclass
class YamlDoc:
    """A parsed YAML file: its data and the line of each node."""

    file: str
    data: Any
    lines: dict[PathKey, int] = field(default_factory=dict)

    def line_of(self, path: PathKey) -> int | None:
        """The line of `path`, or of its nearest ancestor that has one."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return self.lines.get((), 1)


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys instead of silently keeping the last."""


def _walk(node: yaml.Node, path: PathKey, lines: dict[PathKey, int], loader: yaml.SafeLoader, file: str) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        loader.flatten_mapping(node)
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            if not isinstance(key, str | int | bool | float) or isinstance(key, bool):
                key = str(key)
            if key in out:
                raise ProjectError(
                    f"duplicate key {key!r}",
                    code="E_YAML_DUPLICATE_KEY",
                    file=file,
                    line=key_node.start_mark.line + 1,
                    hint="each key may appear once in a mapping; remove or rename one of them",
                )
            lines[(*path, key)] = key_node.start_mark.line + 1
            out[key] = _walk(value_node, (*path, key), lines, loader, file)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_walk(item, (*path, i), lines, loader, file) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)  # type: ignore[no-untyped-call]


def parse_yaml(text: str, file: str) -> YamlDoc:
    """Parse YAML text; syntax errors become `E_YAML_SYNTAX` with the line."""
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[PathKey, int] = {}
        data = None if node is None else _walk(node, (), lines, loader, file)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ProjectError(
            f"YAML syntax error: {exc.problem or exc.context or 'cannot parse'}",
            code="E_YAML_SYNTAX",
            file=file,
            line=(mark.line + 1) if mark else None,
            hint="check indentation, colons and quotes near this line",
        ) from None
    except yaml.YAMLError as exc:
        raise ProjectError(f"YAML error: {exc}", code="E_YAML_SYNTAX", file=file, hint="fix the YAML syntax") from None
    finally:
        loader.dispose()  # type: ignore[no-untyped-call]
    return YamlDoc(file=file, data=data, lines=lines)


def read_yaml(path: Path, rel: str) -> YamlDoc:
    """Read and parse a YAML file; unreadable files become `E_FILE_UNREADABLE`."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ProjectError(
            "file is not UTF-8 text", code="E_FILE_UNREADABLE", file=rel, hint="save the file as UTF-8"
        ) from None
    except OSError as exc:
        raise ProjectError(
            f"cannot read file: {exc.strerror}", code="E_FILE_UNREADABLE", file=rel, hint="check the path"
        ) from None
    return parse_yaml(text, rel)
