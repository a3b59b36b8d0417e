"""Every error AQVEN raises on purpose, in one place.

An `AqvenError` carries a stable code, a message, a hint and, where there is one, the file and line.
Every surface (CLI, REST, MCP, Studio) shows these fields and never a traceback.
"""

from __future__ import annotations

from typing import Any


class AqvenError(Exception):
    """A failure with a stable code that a user or an agent can act on."""

    code: str = "AQVEN_ERROR"
    http_status: int = 400

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        hint: str = "",
        file: str | None = None,
        line: int | None = None,
        details: dict[str, Any] | None = None,
        http_status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if http_status is not None:
            self.http_status = http_status
        self.hint = hint
        self.file = file
        self.line = line
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        if self.file:
            out["file"] = self.file
        if self.line is not None:
            out["line"] = self.line
        if self.details:
            out["details"] = self.details
        return out

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file and self.line else (f"{self.file}: " if self.file else "")
        hint = f"\n  hint: {self.hint}" if self.hint else ""
        return f"{where}{self.code}: {self.message}{hint}"


class ProjectError(AqvenError):
    """The project's files cannot be loaded or used."""

    code = "PROJECT_INVALID"


class NotFoundError(AqvenError):
    """A named thing (flow, run, series, case...) does not exist."""

    code = "NOT_FOUND"
    http_status = 404


class StateConflictError(AqvenError):
    """The thing exists but is in a state that forbids the request."""

    code = "STATE_CONFLICT"
    http_status = 409


class RunInputError(AqvenError):
    """A run cannot start with the inputs it was given (missing node_outputs, bad range...)."""

    code = "RUN_INPUT_INVALID"
    http_status = 422


class ServerError(AqvenError):
    """The project server could not be started, found or reached."""

    code = "SERVER_UNAVAILABLE"
    http_status = 503


class AttemptError(AqvenError):
    """A run or model call ended on an error with an outcome code (see `aqven.models.outcomes`)."""

    code = "PROVIDER_ERROR"
