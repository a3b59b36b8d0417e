"""Bindings: `$input.x`, `$<node>.out`, `$<node>.out.field`, `$context.x`.

A binding is a string that starts with `$`. Any other value of an `inputs` mapping is a literal;
a literal text that starts with `$` is written with two: `$$5.00` is the text `$5.00`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

_BINDING = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_\-]*)((?:\.[A-Za-z0-9_\-]+)*)$")


@dataclass(frozen=True)
class Binding:
    """A parsed binding: where the value comes from and the field path below it."""

    source: Literal["input", "context", "node"]
    node: str | None
    fields: tuple[str, ...]
    text: str


class BindingSyntaxError(ValueError):
    pass


def is_binding(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("$") and not value.startswith("$$")


def parse_binding(text: str) -> Binding:
    m = _BINDING.match(text.strip())
    if not m:
        raise BindingSyntaxError(
            f"{text!r} is not a binding; write $input.field, $context.field, $<node>.out or $<node>.out.field"
        )
    head, rest = m.group(1), [p for p in m.group(2).split(".") if p]
    if head == "input":
        return Binding("input", None, tuple(rest), text)
    if head == "context":
        return Binding("context", None, tuple(rest), text)
    if not rest or rest[0] != "out":
        raise BindingSyntaxError(f"{text!r}: a node's value is read as ${head}.out or ${head}.out.field")
    return Binding("node", head, tuple(rest[1:]), text)


def bindings_in(value: Any) -> list[Binding]:
    """Every binding inside an inputs value (mappings and lists are searched)."""
    found: list[Binding] = []
    if is_binding(value):
        found.append(parse_binding(value))
    elif isinstance(value, dict):
        for v in value.values():
            found.extend(bindings_in(v))
    elif isinstance(value, list):
        for v in value:
            found.extend(bindings_in(v))
    return found


def pick(value: Any, fields: tuple[str, ...]) -> Any:
    """Follow a field path into nested mappings (and list indexes); KeyError when absent."""
    current = value
    for name in fields:
        if isinstance(current, dict):
            current = current[name]
        elif isinstance(current, list) and name.isdigit():
            current = current[int(name)]
        else:
            raise KeyError(name)
    return current


def resolve(value: Any, scope: dict[str, Any]) -> Any:
    """Replace every binding inside `value` by its value from `scope`.

    scope: {"input": ..., "context": ..., "nodes": {node_id: output}}. A field that is absent at run time
    (an optional input field, a context key the case lacks) reads as None; `aqven check` has already
    refused fields that the declared types rule out.
    """
    if is_binding(value):
        b = parse_binding(value)
        base = scope["nodes"][b.node] if b.source == "node" else scope.get(b.source) or {}
        try:
            return pick(base, b.fields)
        except (KeyError, IndexError):
            return None
    if isinstance(value, dict):
        return {k: resolve(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, scope) for v in value]
    if isinstance(value, str) and value.startswith("$$"):
        return value[1:]
    return value
