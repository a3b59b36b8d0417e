"""Every error AQVEN raises on purpose, in one place: the classes and the catalogue of their stable codes.

An `AqvenError` carries a stable code, a message, a hint and, where there is one, the file and line.
Every surface (CLI, REST, MCP, Studio) shows these fields and never a traceback. The codes are constants
here, next to the class that carries them; `CODES` lists them all (a test keeps every code raised in
`src/aqven` in it). Two families live elsewhere, each in one place too: the ``E_``/``W_`` codes of
`aqven check` (docs/reference/diagnostics.md) and the outcome codes of a run (`aqven.models.outcomes`).
"""

from __future__ import annotations

from typing import Any, Final

# ---- the catalogue ------------------------------------------------------------------------------------
# AqvenError (400 unless said otherwise)
AQVEN_ERROR: Final = "AQVEN_ERROR"
VALIDATION_ERROR: Final = "VALIDATION_ERROR"  # a request's field is out of range or malformed (often 422)
CASE_AMBIGUOUS: Final = "CASE_AMBIGUOUS"
INIT_BAD_PACKAGE: Final = "INIT_BAD_PACKAGE"
INIT_TARGET_EXISTS: Final = "INIT_TARGET_EXISTS"
PRICES_UNAVAILABLE: Final = "PRICES_UNAVAILABLE"
DB_SCHEMA_NEWER: Final = "DB_SCHEMA_NEWER"
STORE_UNAVAILABLE: Final = "STORE_UNAVAILABLE"  # the store named by `store:` cannot be reached (store/location.py)
STORE_INVALID: Final = "STORE_INVALID"  # a `store:` setting that names no backend AQVEN has
STORE_NOT_EMPTY: Final = "STORE_NOT_EMPTY"  # a copy's target already holds a record (store/copy.py)
STORE_HELD: Final = "STORE_HELD"  # another server holds the project on this store (store/postgres_db.py)
WORKER_INPUTS_MISMATCH: Final = "WORKER_INPUTS_MISMATCH"  # an `aqven worker`'s files are not a series' inputs
CLUSTER_NEEDS_POSTGRES: Final = "CLUSTER_NEEDS_POSTGRES"  # `aqven worker` / cluster mode on a store that is not shared
CLUSTER_UNAVAILABLE: Final = "CLUSTER_UNAVAILABLE"  # the extra aqven[cluster] (DBOS) is not installed
NOT_RUNNABLE: Final = "NOT_RUNNABLE"  # a series that cannot run as asked (research/series/start.py)
HOLDOUT_HIDDEN: Final = "HOLDOUT_HIDDEN"  # a held-out case or run asked for one by one (research/holdout.py)
SERIES_NOT_COMPARABLE: Final = "SERIES_NOT_COMPARABLE"
CONFIRMATION_REQUIRED: Final = "CONFIRMATION_REQUIRED"
PERSON_REQUIRED: Final = "PERSON_REQUIRED"  # an agent's credential on a person's route (403, server/principals.py)
PASSKEY_REQUIRED: Final = "PASSKEY_REQUIRED"  # money moves on a passkey in this project (403)
PASSKEY_REFUSED: Final = "PASSKEY_REFUSED"  # an assertion that does not prove this act (403, people/passkeys.py)
PERSON_KEY_UNSAFE: Final = "PERSON_KEY_UNSAFE"  # the person folder lies inside the project (403)
PERSON_KEY_MISSING: Final = "PERSON_KEY_MISSING"  # no person key can be read or made for the terminal path
UNAUTHORIZED: Final = "UNAUTHORIZED"
DEMO_SERIES_STOPPED: Final = "DEMO_SERIES_STOPPED"
CHAT_FAILED: Final = "CHAT_FAILED"
CHAT_TIMEOUT: Final = "CHAT_TIMEOUT"
# ProjectError
PROJECT_INVALID: Final = "PROJECT_INVALID"
# NotFoundError (404)
NOT_FOUND: Final = "NOT_FOUND"
PROJECT_NOT_FOUND: Final = "PROJECT_NOT_FOUND"
FLOW_NOT_FOUND: Final = "FLOW_NOT_FOUND"
NODE_NOT_FOUND: Final = "NODE_NOT_FOUND"
DATASET_NOT_FOUND: Final = "DATASET_NOT_FOUND"
CASE_NOT_FOUND: Final = "CASE_NOT_FOUND"
EXPERIMENT_NOT_FOUND: Final = "EXPERIMENT_NOT_FOUND"
SERIES_NOT_FOUND: Final = "SERIES_NOT_FOUND"
ATTEMPT_NOT_FOUND: Final = "ATTEMPT_NOT_FOUND"
RUN_NOT_FOUND: Final = "RUN_NOT_FOUND"
FINDING_NOT_FOUND: Final = "FINDING_NOT_FOUND"
# StateConflictError (409)
STATE_CONFLICT: Final = "STATE_CONFLICT"
SERIES_STATE_CONFLICT: Final = "SERIES_STATE_CONFLICT"
RUN_NOT_WAITING: Final = "RUN_NOT_WAITING"
# RunInputError (422)
RUN_INPUT_INVALID: Final = "RUN_INPUT_INVALID"
RANGE_INVALID: Final = "RANGE_INVALID"
NODE_OUTPUTS_MISSING: Final = "NODE_OUTPUTS_MISSING"
# ServerError (503)
SERVER_UNAVAILABLE: Final = "SERVER_UNAVAILABLE"
SERVER_ALREADY_RUNNING: Final = "SERVER_ALREADY_RUNNING"
SERVER_START_FAILED: Final = "SERVER_START_FAILED"
SERVER_STOP_FAILED: Final = "SERVER_STOP_FAILED"
PORT_IN_USE: Final = "PORT_IN_USE"
# AttemptError: a run's outcome codes, listed in aqven.models.outcomes (PROVIDER_ERROR, CODE_ERROR, ...)


class AqvenError(Exception):
    """A failure with a stable code that a user or an agent can act on."""

    code: str = AQVEN_ERROR
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

    code = PROJECT_INVALID


class NotFoundError(AqvenError):
    """A named thing (flow, run, series, case...) does not exist."""

    code = NOT_FOUND
    http_status = 404


class StateConflictError(AqvenError):
    """The thing exists but is in a state that forbids the request."""

    code = STATE_CONFLICT
    http_status = 409


class RunInputError(AqvenError):
    """A run cannot start with the inputs it was given (missing node_outputs, bad range...)."""

    code = RUN_INPUT_INVALID
    http_status = 422


class ServerError(AqvenError):
    """The project server could not be started, found or reached."""

    code = SERVER_UNAVAILABLE
    http_status = 503


class AttemptError(AqvenError):
    """A run or model call ended on an error with an outcome code (see `aqven.models.outcomes`)."""

    code = "PROVIDER_ERROR"


CODES: Final[frozenset[str]] = frozenset(
    value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str) and name == value
)
"""Every code of the catalogue (a constant's name is its code)."""
