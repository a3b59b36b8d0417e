"""Dollar caps: how one is read from a request, and the project cap a person last confirmed.

A cap is a plain decimal string ("2.00") or a JSON number, with at most 6 decimals, above 0 and at most
$1,000,000, nothing around it (`aqven.project.money`, the one grammar); anything else (whitespace,
exponents, underscores, non-ASCII digits, NaN, 1e999999999) is a `VALIDATION_ERROR` with a hint, never an
exception deeper down.

The project cap new series get is the one a person last confirmed, kept in the person folder outside the project
(`aqven.people.records`: an agent that edits `.aqven/` cannot raise it). A project without a record there starts
confirmed at what its files ask for; where no record can be kept, at no more than the default $1.00. When
`aqven.yaml` (or the local override) asks for more, new series still get the confirmed cap, and every surface says
that the file asks for more until a person confirms it in Studio or with `aqven cap confirm`. Asking for less
takes effect at once.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from aqven.errors import VALIDATION_ERROR, AqvenError
from aqven.people import ConfirmedCap, load, updating
from aqven.project.local import spend_cap
from aqven.project.money import CAP_HINT, BadCap, plain_cap, within_ceiling

DEFAULT_CAP_USD = Decimal("1.00")  # the spec's project cap when nothing a person confirmed can be read


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


def _write(root: Path, cap: Decimal, channel: str, confirmed: str | None = None, person: str | None = None) -> None:
    with updating(root) as record:
        record.cap = ConfirmedCap(
            cap_usd=str(cap),
            at=datetime.now(UTC).isoformat(timespec="seconds"),
            channel=channel,
            confirmed=confirmed,
            person=person,
        )


def _confirmed(record: ConfirmedCap | None) -> Decimal | None:
    """The confirmed cap of a person's record, read with the one cap grammar (None when unreadable)."""
    if record is None:
        return None
    try:
        return plain_cap(record.cap_usd)
    except BadCap:
        return None


def confirmed_project_cap(root: Path, file_cap: Decimal | None) -> ProjectCap:
    """The project cap new series get, given what aqven.yaml says (`file_cap`) and the local override."""
    asked, source = spend_cap(root, file_cap)
    record = load(root).cap
    confirmed = _confirmed(record)
    if record is None or confirmed is None:  # a new project (or a new clone, a new user): confirmed as it asks
        try:
            _write(root, asked, "initial")
        except (OSError, AqvenError, TimeoutError):
            # No person folder to write (or one inside the project): nothing a person confirmed can be read,
            # so no more than the spec's default until a person can confirm.
            return ProjectCap(min(asked, DEFAULT_CAP_USD), asked, source, None, None)
        record = load(root).cap
        confirmed = _confirmed(record)
        if record is None or confirmed is None:
            return ProjectCap(min(asked, DEFAULT_CAP_USD), asked, source, None, None)
    if asked < confirmed:  # lowering takes effect at once, and is what a later raise is measured against
        with contextlib.suppress(OSError, AqvenError, TimeoutError):
            _write(root, asked, "lowered")
        confirmed = asked
    return ProjectCap(confirmed, asked, source, record.at, record.channel)


def confirm_project_cap(
    root: Path, file_cap: Decimal | None, cap_usd: Any, channel: str, how: str | None, person: str | None = None
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
    _write(root, asked, channel, how, person)
    return confirmed_project_cap(root, file_cap)
