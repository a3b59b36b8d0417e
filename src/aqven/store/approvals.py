"""Approvals and stops of paused series, each with the channel it came through (studio, terminal, rest).

A series waits in `awaiting_approval` until a person acts; the act and its record are one transaction, so a
series never runs on under a cap that no approval row explains. The snapshot, Studio and the finding show the
rows: an approval that came over REST with the server token rather than from Studio or a terminal is visible.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from aqven.store.db import Database

Channel = Literal["studio", "terminal", "rest"]
CHANNELS: tuple[str, ...] = ("studio", "terminal", "rest")


@dataclass(frozen=True)
class Approver:
    """Who acted, as the server saw it: the channel, and for the terminal how it was confirmed (tty, --yes)."""

    channel: Channel
    confirmed: str | None = None


def transition_recorded(
    db: Database,
    series_id: str,
    expect: tuple[str, ...],
    fields: dict[str, Any],
    *,
    action: Literal["approve", "stop"],
    who: Approver,
    old_cap_usd: str,
    new_cap_usd: str | None,
    spent_usd: str | None,
    reason: str | None,
    old_token_cap: int | None = None,
    new_token_cap: int | None = None,
) -> bool:
    """Update the series only when its status is one of `expect`, and record the act in the same transaction."""
    cols = ", ".join(f"{k}=?" for k in fields)
    marks = ",".join("?" for _ in expect)
    with db.transaction() as cur:
        cur.execute(
            f"UPDATE series SET {cols} WHERE id=? AND status IN ({marks})", (*fields.values(), series_id, *expect)
        )
        if cur.rowcount != 1:
            return False
        row = cur.execute("SELECT COALESCE(MAX(seq), 0) + 1 AS n FROM approvals WHERE series_id=?", (series_id,))
        seq = row.fetchone()["n"]
        cur.execute(
            "INSERT INTO approvals (series_id, seq, at, action, channel, confirmed, old_cap_usd, new_cap_usd,"
            " spent_usd, reason, old_token_cap, new_token_cap) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                series_id,
                seq,
                datetime.now(UTC).isoformat(timespec="seconds"),
                action,
                who.channel,
                who.confirmed,
                old_cap_usd,
                new_cap_usd,
                spent_usd,
                reason,
                old_token_cap,
                new_token_cap,
            ),
        )
        return True


def approvals_of(db: Database, series_id: str) -> list[dict[str, Any]]:
    """The approvals and stops of a series in order, as the snapshot and the finding show them."""
    rows = db.query(
        "SELECT at, action, channel, confirmed, old_cap_usd, new_cap_usd, spent_usd, reason, old_token_cap,"
        " new_token_cap FROM approvals WHERE series_id=? ORDER BY seq",
        (series_id,),
    )
    out = []
    for r in rows:
        row = dict(r)
        if row["old_token_cap"] is None and row["new_token_cap"] is None:
            del row["old_token_cap"], row["new_token_cap"]  # a dollar approval reads as it always did
        out.append(row)
    return out


def as_dict(who: Approver) -> dict[str, Any]:
    return asdict(who)
