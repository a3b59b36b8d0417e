"""Prompt templates: `{{ name }}` and `{{ name.field }}` filled from a node's inputs."""

from __future__ import annotations

import json
import re
from typing import Any

from aqven.project.bindings import pick

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_\-]+)*)\s*\}\}")


def placeholders(text: str) -> list[str]:
    """The names a template reads (the part before the first dot)."""
    return [m.group(1).split(".")[0] for m in PLACEHOLDER.finditer(text)]


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def render(text: str, values: dict[str, Any]) -> str:
    def sub(m: re.Match[str]) -> str:
        head, *rest = m.group(1).split(".")
        return _show(pick(values[head], tuple(rest)))

    return PLACEHOLDER.sub(sub, text)
