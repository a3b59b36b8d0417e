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
    def of(
        cls,
        code: str,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        hint: str = "",
        severity: Severity = "error",
    ) -> Diagnostic:
        """The one way a diagnostic is built (every sink and check step goes through it)."""
        return cls(code=code, severity=severity, file=file, line=line, message=message, hint=hint)

    @classmethod
    def from_error(cls, err: AqvenError, severity: Severity = "error") -> Diagnostic:
        return cls(code=err.code, severity=severity, file=err.file, line=err.line, message=err.message, hint=err.hint)


class Diagnostics(list[Diagnostic]):
    """The sink `aqven check` steps append to: a list of diagnostics with `error` and `warning` that build them
    (`unique`: skip one already listed, as a module that fails to import is named by every node using it)."""

    def add(
        self,
        code: str,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        hint: str = "",
        severity: Severity = "error",
        unique: bool = False,
    ) -> Diagnostic:
        d = Diagnostic.of(code, message, file=file, line=line, hint=hint, severity=severity)
        if not (unique and d in self):
            self.append(d)
        return d

    def error(
        self, code: str, message: str, *, file: str | None = None, line: int | None = None, hint: str = ""
    ) -> Diagnostic:
        return self.add(code, message, file=file, line=line, hint=hint)

    def warning(
        self, code: str, message: str, *, file: str | None = None, line: int | None = None, hint: str = ""
    ) -> Diagnostic:
        return self.add(code, message, file=file, line=line, hint=hint, severity="warning")


def sort_key(d: Diagnostic) -> tuple[Any, ...]:
    return (d.severity != "error", d.file or "", d.line or 0, d.code)
