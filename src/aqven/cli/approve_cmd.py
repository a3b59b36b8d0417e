"""`aqven approve`, `aqven stop` and `aqven cap confirm`: acts of a person at a terminal.

Each sends the person key (kept in the user's folder outside the project, never the agent's server token) and
asks at a TTY before it acts (the new cap in plain numbers); without a TTY it needs `--yes`, so a program that
runs the command says so in the record. The server records the channel `terminal`, the person's name and how it
was confirmed (`tty` or `--yes`). In a project that approves with a passkey, the server refuses them
(`PASSKEY_REQUIRED`) and says to act in Studio.
"""

from __future__ import annotations

import sys
from decimal import Decimal
from typing import Any

import typer

from aqven.cli.render import console
from aqven.errors import AqvenError
from aqven.server.client import Client
from aqven.server.principals import CONFIRMED_HEADER


def person_confirms(question: str, *, yes: bool) -> str:
    """'tty' when a person said yes at this terminal, '--yes' when the flag stood in; otherwise it stops."""
    if yes:
        return "--yes"
    if not sys.stdin.isatty():
        raise AqvenError(
            "this needs a person: there is no terminal to ask at",
            code="CONFIRMATION_REQUIRED",
            hint="run it at a terminal, or pass --yes (recorded as such)",
        )
    if not typer.confirm(question, default=False):
        console.print("nothing changed")
        raise typer.Exit(1)
    return "tty"


def terminal_headers(how: str) -> dict[str, str]:
    return {CONFIRMED_HEADER: how}


def approve_question(state: dict[str, Any], cap: str | None, token_cap: int | None = None) -> str:
    """What a person is asked before `aqven approve`: the old cap, the new one and what the series spent."""
    old = Decimal(state["spend"]["cap_usd"])
    pause = state.get("pause") or {}
    if pause.get("reason") == "tokens_near_cap":
        old_tokens = int(pause.get("token_cap") or 0)
        new_tokens = token_cap if token_cap is not None else old_tokens * 2
        return (
            f"Continue series {state['series_id']} (tokens_near_cap, {int(pause.get('tokens_used') or 0):,} tokens "
            f"used) under a token cap of {new_tokens:,} (was {old_tokens:,})?"
        )
    default = old if pause.get("reason") == "cap_above_project" else old * 2  # as the server decides
    new = cap if cap is not None else str(default)
    spent = pause.get("spent_usd") or state["spend"]["usd"]
    return (
        f"Continue series {state['series_id']} ({pause.get('reason')}, spent ${spent}) under a cap of ${new} "
        f"(was ${old})?"
    )


def approval_choices(series_id: str, est: dict[str, Any]) -> list[str]:
    """The two amounts a person weighs, each named with what it buys (as Studio offers them)."""
    out = []
    double, pauses = est.get("double_usd"), est.get("double_pauses_after")
    if double:
        buys = (
            "pauses again before another attempt can start"
            if pauses == 0
            else f"pauses again after about {pauses} more attempts"
            if pauses is not None
            else "is enough to finish"
        )
        out.append(f"  aqven approve {series_id}               ${double} (double): {buys}")
    if est.get("cap_to_finish_usd"):
        cap = est["cap_to_finish_usd"]
        out.append(f"  aqven approve {series_id} --cap {cap}    ${cap}: enough to finish")
    if est.get("decides"):
        out.append(f"  {est['decides']}")
    return out


def approve(
    client: Client, series_id: str, cap: str | None, *, yes: bool, token_cap: int | None = None
) -> dict[str, Any]:
    state: dict[str, Any] = client.get(f"/api/series/{series_id}")
    if state["status"] != "awaiting_approval":
        raise AqvenError(
            f"series {series_id} is not waiting for approval (status {state['status']})",
            code="SERIES_STATE_CONFLICT",
            hint="approve a series whose status is awaiting_approval",
        )
    if cap is None and token_cap is None:  # the person sees both amounts before saying yes to the default
        try:
            est: dict[str, Any] = client.get(f"/api/studio/series/{series_id}/finish")
        except AqvenError:
            est = {}
        for line in approval_choices(series_id, est):
            console.print(line, markup=False, soft_wrap=True)
    how = person_confirms(approve_question(state, cap, token_cap), yes=yes)
    body: dict[str, Any] = {"cap_usd": cap} if cap else {}
    if token_cap is not None:
        body["token_cap"] = token_cap
    out: dict[str, Any] = client.request(
        "POST", f"/api/series/{series_id}/approve", body, headers=terminal_headers(how), as_person=True
    )
    return out


def stop(client: Client, series_id: str, *, yes: bool) -> dict[str, Any]:
    state: dict[str, Any] = client.get(f"/api/series/{series_id}")
    question = (
        f"Stop series {state['series_id']} (status {state['status']}, spent ${state['spend']['usd']})? "
        "Its verdict will be invalid."
    )
    how = person_confirms(question, yes=yes)
    out: dict[str, Any] = client.request(
        "POST", f"/api/series/{series_id}/stop", {}, headers=terminal_headers(how), as_person=True
    )
    return out


def confirm_cap(client: Client, *, yes: bool) -> int:
    project: dict[str, Any] = client.get("/api/project")
    cap, asked = project["project_cap_usd"], project["project_cap_asked_usd"]
    if not project.get("project_cap_pending"):
        console.print(f"the project cap is ${cap}, as the files ask: nothing to confirm")
        return 0
    how = person_confirms(f"{project['project_cap_note']}. Confirm ${asked} as the project cap (now ${cap})?", yes=yes)
    out = client.request(
        "POST", "/api/project/cap/confirm", {"cap_usd": asked}, headers=terminal_headers(how), as_person=True
    )
    console.print(f"confirmed: new series get a project cap of ${out['project_cap_usd']}")
    return 0
