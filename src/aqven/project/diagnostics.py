"""Diagnostics of `aqven check`: a stable code, a severity, file:line, a message and a hint."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from aqven.errors import AqvenError

Severity = Literal["error", "warning"]


class Diagnostic(BaseModel):
    code: str
    severity: Severity
    file: str | None = None
    line: int | None = None
    message: str
    hint: str = ""

    def render(self) -> str:
        where = self.file or "project"
        if self.line is not None:
            where += f":{self.line}"
        hint = f"\n    hint: {self.hint}" if self.hint else ""
        return f"{where}: {self.severity} {self.code}: {self.message}{hint}"

    @classmethod
    def from_error(cls, err: AqvenError, severity: Severity = "error") -> Diagnostic:
        return cls(code=err.code, severity=severity, file=err.file, line=err.line, message=err.message, hint=err.hint)


def sort_key(d: Diagnostic) -> tuple[Any, ...]:
    return (d.severity != "error", d.file or "", d.line or 0, d.code)
