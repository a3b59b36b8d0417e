"""Approvals and stops of paused series, each with the person who acted and the proof of it.

A series waits in `awaiting_approval` until a person acts; the act and its record are one transaction, so a
series never runs on under a cap that no approval row explains. The channel comes from the credential the server
checked, never from a header: `studio` (a Studio session, `confirmed: passkey` with the assertion as `proof`),
`terminal` (the person key outside the project folder, `confirmed: tty` or `--yes`). `rest` is kept for records
written before agents and people held different keys (the server token then approved). The snapshot, Studio and
the finding show the rows, the proof included, so a passkey's approval can be verified again later. `person` names
who acted: the person key's name (the user's login name) at a terminal and in a bare Studio session, the name the
signing passkey was registered under with a passkey.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from aqven.store.db import SERIES_CHANNEL, Database

Channel = Literal["studio", "terminal", "rest"]
CHANNELS: tuple[str, ...] = ("studio", "terminal", "rest")


@dataclass(frozen=True)
class Approver:
    """Who acted, as the server proved it: the channel, how it was confirmed (tty, --yes, passkey, session), the
    person's name, and a passkey's assertion with its binding (`proof`)."""

    channel: Channel
    confirmed: str | None = None
    person: str | None = None
    proof: dict[str, Any] | None = None


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
        db.announce(cur, SERIES_CHANNEL, series_id)
        row = cur.execute("SELECT COALESCE(MAX(seq), 0) + 1 AS n FROM approvals WHERE series_id=?", (series_id,))
        seq = row.fetchone()["n"]
        cur.execute(
            "INSERT INTO approvals (series_id, seq, at, action, channel, confirmed, old_cap_usd, new_cap_usd,"
            " spent_usd, reason, old_token_cap, new_token_cap, person, proof)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                series_id,
                seq,
                datetime.now(UTC).isoformat(timespec="milliseconds"),
                action,
                who.channel,
                who.confirmed,
                old_cap_usd,
                new_cap_usd,
                spent_usd,
                reason,
                old_token_cap,
                new_token_cap,
                who.person,
                json.dumps(who.proof, sort_keys=True) if who.proof is not None else None,
            ),
        )
        return True


def approvals_of(db: Database, series_id: str) -> list[dict[str, Any]]:
    """The approvals and stops of a series in order, as the snapshot and the finding show them."""
    rows = db.query(
        "SELECT at, action, channel, confirmed, old_cap_usd, new_cap_usd, spent_usd, reason, old_token_cap,"
        " new_token_cap, person, proof FROM approvals WHERE series_id=? ORDER BY seq",
        (series_id,),
    )
    out = []
    for r in rows:
        row = dict(r)
        if row["old_token_cap"] is None and row["new_token_cap"] is None:
            del row["old_token_cap"], row["new_token_cap"]  # a dollar approval reads as it always did
        for key in ("person", "proof"):  # records from before people were named read as they always did
            if row[key] is None:
                del row[key]
        if "proof" in row:
            row["proof"] = json.loads(row["proof"])
        out.append(row)
    return out


def recent_approvals(db: Database, limit: int = 10) -> list[dict[str, Any]]:
    """The latest approvals and stops across series, newest first, in brief (Studio's overview): the series and its
    experiment, when, what, who and how; the proofs stay with each series (`approvals_of`)."""
    rows = db.query(
        "SELECT a.series_id, s.experiment_id, a.at, a.action, a.channel, a.confirmed, a.old_cap_usd, a.new_cap_usd,"
        " a.old_token_cap, a.new_token_cap, a.person FROM approvals a JOIN series s ON s.id = a.series_id"
        " ORDER BY a.at DESC, a.series_id, a.seq DESC LIMIT ?",
        (limit,),
    )
    out = []
    for r in rows:
        row = dict(r)
        for key in ("old_token_cap", "new_token_cap", "person"):
            if row[key] is None:
                del row[key]
        out.append(row)
    return out
