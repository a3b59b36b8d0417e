"""Dollar caps: how one is read from a request, and the project cap a person last confirmed.

A cap is a plain decimal string ("2.00") or a JSON number, with at most 6 decimals, above 0 and at most
$1,000,000, nothing around it (`aqven.project.money`, the one grammar); anything else (whitespace,
exponents, underscores, non-ASCII digits, NaN, 1e999999999) is a `VALIDATION_ERROR` with a hint, never an
exception deeper down.

The project cap new series get is the one a person last confirmed, kept in `.aqven/project_cap.json` (not in
git). A project without that file starts confirmed at what its files ask for. When `aqven.yaml` (or the local
override) asks for more, new series still get the confirmed cap, and every surface says that the file asks for
more until a person confirms it in Studio or with `aqven cap confirm`. Asking for less takes effect at once.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from aqven.errors import VALIDATION_ERROR, AqvenError
from aqven.project.local import spend_cap
from aqven.project.money import CAP_HINT, BadCap, plain_cap, within_ceiling
from aqven.project.paths import state_dir

CONFIRMED_FILE = "project_cap.json"


def _bad(error: BadCap) -> AqvenError:
    return AqvenError(str(error), code=VALIDATION_ERROR, hint=CAP_HINT, http_status=422)


def parse_cap(cap_usd: Any) -> Decimal | None:
    """A cap from a request (a string or a JSON number), or None when none was given (the grammar:
    `aqven.project.money`)."""
    if cap_usd is None:
        return None
    try:
        return plain_cap(cap_usd)
    except BadCap as exc:
        raise _bad(exc) from None


def check_ceiling(cap: Decimal, given: Any = None) -> None:
    try:
        within_ceiling(cap, given)
    except BadCap as exc:
        raise _bad(exc) from None


# ---- the confirmed project cap ----


@dataclass(frozen=True)
class ProjectCap:
    """What new series get (`cap`), what the files ask for (`asked`) and where that came from."""

    cap: Decimal
    asked: Decimal
    source: str
    confirmed_at: str | None
    channel: str | None

    @property
    def pending(self) -> bool:
        return self.asked > self.cap

    def fields(self) -> dict[str, Any]:
        """The fields of a launch plan, a snapshot and GET /api/project."""
        where = {"project": "aqven.yaml", "override": ".aqven/local.yaml"}.get(self.source, "the default cap")
        return {
            "project_cap_usd": str(self.cap),
            "project_cap_source": self.source,
            "project_cap_asked_usd": str(self.asked),
            "project_cap_pending": self.pending,
            "project_cap_note": (
                f"{where} asks for a project cap of ${self.asked}; new series get the confirmed ${self.cap} until "
                "a person confirms the new one in Studio or with `aqven cap confirm`"
            )
            if self.pending
            else None,
        }


def _path(root: Path) -> Path:
    return state_dir(root) / CONFIRMED_FILE


def _read(root: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(_path(root).read_text(encoding="utf-8"))
        plain_cap(data["cap_usd"])
    except (OSError, ValueError, KeyError, TypeError, InvalidOperation):
        return None
    return data if isinstance(data, dict) else None


def _write(root: Path, cap: Decimal, channel: str, confirmed: str | None = None) -> dict[str, Any]:
    record = {
        "cap_usd": str(cap),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "channel": channel,
        "confirmed": confirmed,
    }
    path = _path(root)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(record))
    os.replace(tmp, path)
    return record


def confirmed_project_cap(root: Path, file_cap: Decimal | None) -> ProjectCap:
    """The project cap new series get, given what aqven.yaml says (`file_cap`) and the local override."""
    asked, source = spend_cap(root, file_cap)
    record = _read(root)
    if record is None:  # a new project (or a new clone): confirmed at what its files say
        with contextlib.suppress(OSError):
            record = _write(root, asked, "initial")
        if record is None:
            return ProjectCap(asked, asked, source, None, None)
    confirmed = Decimal(str(record["cap_usd"]))
    if asked < confirmed:  # lowering takes effect at once, and is what a later raise is measured against
        with contextlib.suppress(OSError):
            record = _write(root, asked, "lowered")
        confirmed = asked
    return ProjectCap(confirmed, asked, source, record.get("at"), record.get("channel"))


def confirm_project_cap(
    root: Path, file_cap: Decimal | None, cap_usd: Any, channel: str, how: str | None
) -> ProjectCap:
    """A person confirms the project cap the files ask for; `cap_usd` must be that amount (what they saw)."""
    given = parse_cap(cap_usd)
    asked, _source = spend_cap(root, file_cap)
    if given is None or given != asked:
        raise AqvenError(
            f"the files ask for a project cap of ${asked}, not ${given}",
            code=VALIDATION_ERROR,
            hint=f'confirm the amount the files ask for: {{"cap_usd": "{asked}"}}; edit aqven.yaml for another',
            http_status=422,
        )
    check_ceiling(asked)
    _write(root, asked, channel, how)
    return confirmed_project_cap(root, file_cap)
