"""The error codes' catalogue (src/aqven/errors.py): every stable code raised in src/aqven is one of its constants.

A code is a string literal given as ``code=`` (or a class's ``code =``) anywhere in the package; the ``E_``/``W_``
codes of `aqven check` and a run's outcome codes have their own lists (docs/reference/diagnostics.md,
`aqven.models.outcomes`).
"""

from __future__ import annotations

import ast
from pathlib import Path

from aqven import errors
from aqven.models import outcomes

SRC = Path(errors.__file__).parent
OUTCOME_CODES = {v for k, v in vars(outcomes).items() if k.isupper() and isinstance(v, str) and k == v}


def _literal_codes() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        if "templates" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            values: list[ast.expr] = []
            if isinstance(node, ast.keyword) and node.arg == "code":
                values = [node.value]
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "code" for t in targets) and node.value is not None:
                    values = [node.value]
            for v in values:
                if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value.isupper():
                    found.setdefault(v.value, []).append(f"{path.relative_to(SRC)}:{v.lineno}")
    return found


def test_every_raised_code_is_in_the_catalogue() -> None:
    missing = {
        code: where
        for code, where in _literal_codes().items()
        if code not in errors.CODES and code not in OUTCOME_CODES and not code.startswith(("E_", "W_"))
    }
    assert not missing, f"add these codes to src/aqven/errors.py: {missing}"


def test_the_catalogue_names_each_code_once_and_by_itself() -> None:
    assert len(errors.CODES) >= 30
    for code in errors.CODES:
        assert getattr(errors, code) == code
    assert errors.NotFoundError.code == errors.NOT_FOUND
    assert not errors.CODES & OUTCOME_CODES
