"""Dollar caps: how one is read from a request, and the project cap a person last confirmed.

A cap is a plain decimal string ("2.00") or a JSON number, with at most 6 decimals, above 0 and at most
`CAP_CEILING_USD`; anything else (exponents, underscores, non-ASCII digits, NaN, 1e999999999) is a
`VALIDATION_ERROR` with a hint, never an exception deeper down.

The project cap new series get is the one a person last confirmed, kept in the person folder outside the project
(`aqven.people.records`: an agent that edits `.aqven/` cannot raise it). A project without a record there starts
confirmed at what its files ask for; where no record can be kept, at no more than the default $1.00. When
`aqven.yaml` (or the local override) asks for more, new series still get the confirmed cap, and every surface says
that the file asks for more until a person confirms it in Studio or with `aqven cap confirm`. Asking for less
takes effect at once.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from aqven.errors import VALIDATION_ERROR, AqvenError
from aqven.people import ConfirmedCap, load, updating
from aqven.project.local import spend_cap

CAP_CEILING_USD = Decimal("1000000")
CAP_DECIMALS = 6
DEFAULT_CAP_USD = Decimal("1.00")  # the spec's project cap when nothing a person confirmed can be read
_PLAIN = re.compile(r"[0-9]{1,7}(?:\.[0-9]{1,20})?")  # ASCII digits only: no "1_000", "٣", "1e3"


def _bad(cap_usd: Any, why: str) -> AqvenError:
    shown = repr(cap_usd)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return AqvenError(
        f"cap_usd {why}, not {shown}",
        code=VALIDATION_ERROR,
        hint=f'give dollars as a plain decimal, e.g. "2.00": above 0, at most {CAP_DECIMALS} decimals, '
        f"at most ${CAP_CEILING_USD:,}",
        http_status=422,
    )


def parse_cap(cap_usd: Any) -> Decimal | None:
    """A cap from a request (a string or a JSON number), or None when none was given."""
    if cap_usd is None:
        return None
    if isinstance(cap_usd, bool) or not isinstance(cap_usd, str | int | float | Decimal):
        raise _bad(cap_usd, "must be a decimal string or a number")
    if isinstance(cap_usd, float):
        text = repr(cap_usd)  # the shortest text of the number, never its binary value
    elif isinstance(cap_usd, Decimal):
        text = format(cap_usd, "f") if cap_usd.is_finite() else "nan"
    else:
        text = str(cap_usd).strip()
    if not _PLAIN.fullmatch(text):
        raise _bad(cap_usd, "must be a plain amount in dollars")
    if "." in text and len(text.split(".", 1)[1].rstrip("0")) > CAP_DECIMALS:
        raise _bad(cap_usd, f"has more than {CAP_DECIMALS} decimals")
    cap = Decimal(text)
    if cap <= 0:
        raise _bad(cap_usd, "must be above 0")
    check_ceiling(cap, cap_usd)
    return cap


def check_ceiling(cap: Decimal, given: Any = None) -> None:
    if cap > CAP_CEILING_USD:
        raise _bad(given if given is not None else str(cap), f"is above the ceiling of ${CAP_CEILING_USD:,}")


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


def confirmed_project_cap(root: Path, file_cap: Decimal | None) -> ProjectCap:
    """The project cap new series get, given what aqven.yaml says (`file_cap`) and the local override."""
    asked, source = spend_cap(root, file_cap)
    record = load(root).cap
    if record is None:  # a new project (or a new clone, a new user): confirmed at what its files say
        try:
            _write(root, asked, "initial")
        except (OSError, AqvenError, TimeoutError):
            # No person folder to write (or one inside the project): nothing a person confirmed can be read,
            # so no more than the spec's default until a person can confirm.
            return ProjectCap(min(asked, DEFAULT_CAP_USD), asked, source, None, None)
        record = load(root).cap
        if record is None:
            return ProjectCap(min(asked, DEFAULT_CAP_USD), asked, source, None, None)
    confirmed = Decimal(record.cap_usd)
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
