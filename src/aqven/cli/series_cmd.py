"""`aqven series` and `aqven look`: start a series, follow it with a progress bar, print the verdict."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from aqven.cli.gate import exit_code, gate_hit, write_reports
from aqven.cli.render import console, err_console, money
from aqven.cli.studio_cmd import studio_link
from aqven.server.client import Client

EXIT_BY_STATUS = {"done": 0, "cancelled": 1, "failed": 1, "awaiting_approval": 3, "waiting_human": 4}
SETTLED = set(EXIT_BY_STATUS)


def _eta_text(eta: dict[str, Any] | None) -> str:
    if not eta:
        return ""
    if eta.get("state") == "running":
        secs = int(eta.get("remaining_seconds") or 0)
        return f"about {secs // 60}m{secs % 60:02d}s left"
    return str(eta.get("state", ""))


def follow(client: Client, series_id: str, *, quiet: bool) -> dict[str, Any]:
    """Poll the series until its status settles, showing progress, spend against the cap and time left."""
    state: dict[str, Any] = client.get(f"/api/series/{series_id}")
    if quiet:
        while state["status"] not in SETTLED:
            state = client.get(f"/api/series/{series_id}", wait_seconds=20)
        return state
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[spend]}"),
        TextColumn("{task.fields[eta]}"),
        console=console,
        transient=False,
    ) as bar:
        task = bar.add_task("attempts", total=state["progress"]["attempts"], spend="", eta="")
        while True:
            spend = state["spend"]
            lower = "≥" if spend.get("lower_bound") else ""
            bar.update(
                task,
                completed=state["progress"]["done"],
                spend=f"spent {lower}{money(spend['usd'])} of {money(spend['cap_usd'])}",
                eta=_eta_text(state.get("eta")),
            )
            if state["status"] in SETTLED:
                break
            state = client.get(f"/api/series/{series_id}", wait_seconds=1)
    return state


def report(client: Client, state: dict[str, Any]) -> int:
    status = state["status"]
    spend = state["spend"]
    sid = state["series_id"]
    if status == "awaiting_approval" and (state.get("pause") or {}).get("reason") == "tokens_near_cap":
        pause = state["pause"]
        console.print(
            f"series {sid} is waiting for approval (tokens_near_cap): used {int(pause.get('tokens_used') or 0):,} "
            f"of its {int(pause.get('token_cap') or 0):,}-token cap."
        )
        console.print(
            f"continue it in Studio: {studio_link(client, f'series/{sid}')}  or  aqven approve {sid} "
            f"[--token-cap N]  (stop it: aqven stop {sid})",
            soft_wrap=True,
        )
    elif status == "awaiting_approval":
        pause = state.get("pause") or {}
        console.print(
            f"series {sid} is waiting for approval ({pause.get('reason')}): spent "
            f"{money(pause.get('spent_usd') or spend['usd'])} of its {money(spend['cap_usd'])} cap."
        )
        console.print(
            f"continue it in Studio: {studio_link(client, f'series/{sid}')}  or  aqven approve {sid} "
            f"[--cap USD]  (stop it: aqven stop {sid})",
            soft_wrap=True,
        )
    elif status == "waiting_human":
        console.print(
            f"series {sid} waits for a person to answer a human node; open {studio_link(client, f'series/{sid}')}",
            soft_wrap=True,
        )
    else:
        verdict = state.get("verdict")
        err = state.get("error")
        if err:
            # A failed series says why first (a missing key names its variable), not only "Invalid: ...".
            err_console.print(f"series {status}: {err.get('code')}: {err.get('message')}", markup=False)
        if verdict:
            console.print(verdict["text"])
        elif not err:
            console.print(f"series {status}")
        lower = " (a lower bound: some attempts had no known price)" if spend.get("lower_bound") else ""
        console.print(
            f"spent {money(spend['usd'])} of {money(spend['cap_usd'])}{lower} · "
            f"{state['progress']['done']} attempts · {'simulated · ' if state.get('simulated') else ''}"
            f"series {sid}"
        )
        if state.get("finding"):
            console.print(f"finding written: {state['finding']} (FINDINGS.md regenerated)")
    return EXIT_BY_STATUS.get(status, 1)


def plan_lines(plan: dict[str, Any]) -> list[str]:
    """The launch plan in a few plain lines: how it was planned, the advice, power and the floor."""
    if plan.get("half_width") is None:
        return []
    level = plan.get("level")
    at = f" at {level * 100:.1f}".removesuffix(".0") + "%" if level else ""
    lines = [
        f"plan: expected half-width ±{plan['half_width']:.3f}{at} against the {plan.get('margin')} margin"
        f" (planning: {plan.get('planning', 'defaults')}, rate {plan.get('planning_rate', 0):.3g},"
        f" intra-case correlation {plan.get('planning_rho', 0):.2g})"
    ]
    rec = plan.get("recommended") or {}
    if plan.get("below_recommended") and rec.get("text"):
        lines.append(f"advice: {rec['text']}")
    power = plan.get("power") or {}
    if power.get("text"):
        lines.append(f"power: {power['text']}")
    floor = plan.get("zero_failure_floor") or {}
    if floor.get("text") and plan.get("cases", 0) < (floor.get("cases") or 0):
        lines.append(f"floor: {floor['text']}")
    return lines


@dataclass(frozen=True)
class Gate:
    """What `aqven series` does for CI: the verdicts that fail it, and the reports it writes."""

    fail_on: frozenset[str] = field(default_factory=frozenset)
    junit: Path | None = None
    summary: Path | None = None

    @property
    def reports(self) -> bool:
        return self.junit is not None or self.summary is not None or bool(os.environ.get("GITHUB_STEP_SUMMARY"))


def finish(client: Client, state: dict[str, Any], gate: Gate, code: int) -> int:
    """Apply the gate to a settled series and write its reports (with the dev cases that failed)."""
    code = exit_code(state, gate.fail_on, code)
    if gate.reports:
        full = client.get(f"/api/series/{state['series_id']}", include_cases="true")
        write_reports(full, gate.fail_on, code, junit=gate.junit, summary=gate.summary)
    hit = gate_hit(state, gate.fail_on)
    if hit and code != 0:
        err_console.print(f"gate: the verdict is {hit}, which --fail-on lists: exit {code}", markup=False)
    return code


def start_and_follow(client: Client, body: dict[str, Any], *, as_json: bool, gate: Gate | None = None) -> int:
    gate = gate or Gate()
    started = client.post("/api/series", body)
    plan = started.get("launch_plan") or {}
    series = started["series"]
    bound = (plan.get("bounds") or {}).get("text")
    if bound:  # before anything runs, even with --json (on stderr): the cap cannot stop this series
        err_console.print(f"warning: {bound}", markup=False)
    if not as_json:
        for line in plan_lines(plan):
            err_console.print(line, markup=False)
        reread = (plan.get("earlier_reads") or {}).get("text")
        if reread:
            err_console.print(f"[yellow]warning[/yellow]: {reread}")
        console.print(
            f"series {series['series_id']}: {plan.get('attempts')} attempts ({plan.get('cases')} cases × "
            f"{plan.get('repeats')} repeats × {plan.get('variants')} variants) on {series['on']}, "
            f"cap {money(Decimal(plan.get('cap_usd') or '0'))}" + (" · simulated" if series.get("simulated") else "")
        )
    state = follow(client, series["series_id"], quiet=as_json)
    if as_json:
        print(json.dumps(state))
        return finish(client, state, gate, EXIT_BY_STATUS.get(state["status"], 1))
    return finish(client, state, gate, report(client, state))


def print_look(state: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(show_edge=False)
    for col in ("case", "outcome", "error", "run"):
        table.add_column(col)
    for row in state.get("cases", []):
        for v in row["variants"].values():
            for a in v["attempts"]:
                table.add_row(row["case"], a["outcome"] or a["status"], a.get("error") or "", a.get("run_id") or "")
    console.print(table)
    if state.get("hidden_cases"):
        console.print(f"{state['hidden_cases']} held-out case(s) ran but are not listed one by one")
