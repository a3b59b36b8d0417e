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
MAX_DEPTH = 64  # nesting levels; deeper documents are refused rather than overflowing the stack
MAX_VALUES = 2_000_000  # values a document may hold (about 100,000 cases of a dataset); past it, JSONL
MAX_EXPANDED = 100_000  # values reached again through aliases (*name); refuses "billion laughs" documents
_SEQ_TAG, _MAP_TAG = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"


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


# libyaml's parser when present: large datasets load about ten times faster than with the pure-Python one.
_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """SafeLoader that refuses duplicate keys instead of silently keeping the last."""


class _Walker:
    def __init__(self, loader: yaml.SafeLoader, file: str) -> None:
        self.loader, self.file = loader, file
        self.lines: dict[PathKey, int] = {}
        self.count = 0
        self.expanded = 0  # values walked again because an alias (*name) points at them
        self.seen: set[int] = set()
        self.active: set[int] = set()

    def _fail(self, message: str, node: yaml.Node, hint: str, code: str = "E_YAML_SYNTAX") -> ProjectError:
        return ProjectError(message, code=code, file=self.file, line=node.start_mark.line + 1, hint=hint)

    def walk(self, node: yaml.Node, path: PathKey) -> Any:
        self.count += 1
        if id(node) in self.seen:
            self.expanded += 1
            if self.expanded > MAX_EXPANDED:
                raise self._fail(
                    f"aliases (*name) expand to more than {MAX_EXPANDED:,} values",
                    node,
                    "use fewer aliases (*name), or write the values out",
                )
        else:
            self.seen.add(id(node))
        if self.count > MAX_VALUES:
            raise self._fail(
                f"the document holds more than {MAX_VALUES:,} values",
                node,
                "for a large dataset write datasets/<id>.jsonl, one case a line (aqven dataset import converts a "
                "YAML, CSV or JSONL file), or split it into several datasets",
                code="E_DATASET_TOO_LARGE",
            )
        if len(path) > MAX_DEPTH:
            raise self._fail(f"values are nested more than {MAX_DEPTH} levels deep", node, "flatten the structure")
        if id(node) in self.active:
            raise self._fail("an alias refers to a value that contains it", node, "remove the recursive alias (*name)")
        self.lines.setdefault(path, node.start_mark.line + 1)
        if not isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            return self.loader.construct_object(node, deep=True)  # type: ignore[no-untyped-call]
        if node.tag not in (_SEQ_TAG, _MAP_TAG):
            raise self._fail(f"unsupported YAML tag {node.tag!r}", node, "remove the tag (the part that starts with !)")
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.walk(item, (*path, i)) for i, item in enumerate(node.value)]
            out: dict[Any, Any] = {}
            self.loader.flatten_mapping(node)
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise self._fail(
                        "a key must be a plain value, not a list or mapping", key_node, "use a name as key"
                    )
                key = self.loader.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
                if not isinstance(key, str | int) or isinstance(key, bool):
                    key = str(key)
                if key in out:
                    raise self._fail(
                        f"duplicate key {key!r}",
                        key_node,
                        "each key may appear once in a mapping; remove or rename one of them",
                        code="E_YAML_DUPLICATE_KEY",
                    )
                self.lines[(*path, key)] = key_node.start_mark.line + 1
                out[key] = self.walk(value_node, (*path, key))
            return out
        finally:
            self.active.discard(id(node))


def _syntax_hint(problem: str, context: str, line_text: str) -> str:
    if "\\t" in problem or "\t" in problem or "\t" in line_text[: len(line_text) - len(line_text.lstrip())]:
        return "indent with spaces; YAML does not allow tab characters here"
    if "'?'" in problem and "flow mapping" in context:
        return 'inside {...} quote a type that ends in "?", for example {tier: "string?"}, or use block style'
    if "mapping values are not allowed" in problem:
        return "a value that contains ': ' must be quoted"
    return "check indentation, colons and quotes near this line"


def parse_yaml(text: str, file: str) -> YamlDoc:
    """Parse YAML text; syntax errors become `E_YAML_SYNTAX` with the line. Never raises anything else."""
    try:
        loader = _UniqueKeyLoader(text)
    except yaml.reader.ReaderError as exc:
        raise _reader_error(exc, text, file) from None
    try:
        node = loader.get_single_node()
        walker = _Walker(loader, file)
        data = None if node is None else walker.walk(node, ())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem, context = str(exc.problem or ""), str(exc.context or "")
        lines = text.splitlines()
        line_text = lines[mark.line] if mark and 0 <= mark.line < len(lines) else ""
        raise ProjectError(
            f"YAML syntax error: {problem or context or 'cannot parse'}",
            code="E_YAML_SYNTAX",
            file=file,
            line=min(mark.line + 1, text.count("\n") + 1) if mark else None,  # the end of the stream is past the text
            hint=_syntax_hint(problem, context, line_text),
        ) from None
    except yaml.reader.ReaderError as exc:
        raise _reader_error(exc, text, file) from None
    except yaml.YAMLError as exc:
        raise ProjectError(
            f"YAML error: {exc}".splitlines()[0], code="E_YAML_SYNTAX", file=file, hint="fix the YAML syntax"
        ) from None
    except RecursionError:
        raise ProjectError(
            "YAML syntax error: the document is nested too deeply",
            code="E_YAML_SYNTAX",
            file=file,
            hint="flatten the structure",
        ) from None
    finally:
        loader.dispose()  # type: ignore[no-untyped-call]
    return YamlDoc(file=file, data=data, lines=walker.lines)


def _reader_error(exc: yaml.reader.ReaderError, text: str, file: str) -> ProjectError:
    position = max(0, min(int(exc.position), len(text)))
    return ProjectError(
        f"the file contains a character YAML does not allow (code point {exc.character:#x})",
        code="E_YAML_SYNTAX",
        file=file,
        line=text.count("\n", 0, position) + 1,
        hint="remove control characters such as NUL from the file",
    )


def read_yaml(path: Path, rel: str) -> YamlDoc:
    """Read and parse a YAML file; unreadable files become `E_FILE_UNREADABLE`."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raw = exc.object if isinstance(exc.object, bytes) else b""
        raise ProjectError(
            "file is not UTF-8 text",
            code="E_FILE_UNREADABLE",
            file=rel,
            line=raw.count(b"\n", 0, exc.start) + 1,
            hint="save the file as UTF-8",
        ) from None
    except (OSError, ValueError) as exc:
        raise ProjectError(
            f"cannot read file: {getattr(exc, 'strerror', None) or exc}",
            code="E_FILE_UNREADABLE",
            file=rel,
            hint="check the path and its permissions",
        ) from None
    return parse_yaml(text, rel)
