"""`aqven series` and `aqven look`: start a series, follow it with a progress bar, print the verdict."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from aqven.cli.approve_cmd import approval_choices
from aqven.cli.gate import exit_code, gate_hit, write_reports
from aqven.cli.render import approval_line, console, err_console, money
from aqven.cli.studio_cmd import studio_link
from aqven.errors import AqvenError
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
    """Poll the series until its status settles, showing progress, spend against the cap and time left.

    Ctrl-C stops the waiting, not the series: it says that the series keeps running on the server, what it spent,
    and how to follow or cancel it, and exits 130."""
    try:
        return _follow(client, series_id, quiet=quiet)
    except KeyboardInterrupt:
        left_running(client, series_id)
        raise typer.Exit(INTERRUPTED) from None


INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C (128 + SIGINT), as shells report it."""


def left_running(client: Client, series_id: str) -> None:
    """After Ctrl-C: the series goes on on the server; say so (its id, status, spend) and how to follow or cancel
    it. At a terminal, offer to cancel it (no by default; without a terminal nothing is asked)."""
    try:
        state: dict[str, Any] | None = client.request("GET", f"/api/series/{series_id}", timeout=5.0)
    except (AqvenError, KeyboardInterrupt):
        state = None
    err_console.print("")
    if state is None:
        err_console.print(
            f"interrupted: series {series_id} keeps running on the project server (its state could not be read)",
            markup=False,
        )
    else:
        status, spend = state["status"], state["spend"]
        lower = "≥" if spend.get("lower_bound") else ""
        where = (
            f"status {status}, spent {lower}{money(spend['usd'])} of its {money(spend['cap_usd'])} cap, "
            f"{state['progress']['done']} of {state['progress']['attempts']} attempts done"
        )
        if status in SETTLED and status not in ("waiting_human", "awaiting_approval"):
            err_console.print(f"interrupted: series {series_id} has ended ({where})", markup=False)
            return
        err_console.print(
            f"interrupted: series {series_id} keeps running on the project server ({where})", markup=False
        )
    err_console.print(f"  follow it: aqven series follow {series_id}", markup=False)
    err_console.print(f"  cancel it: aqven cancel {series_id}", markup=False)
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return
    try:
        cancel = typer.confirm(f"cancel series {series_id} now?", default=False, err=True)
    except (KeyboardInterrupt, EOFError, typer.Abort):
        cancel = False
    if not cancel:
        err_console.print(f"series {series_id} keeps running", markup=False)
        return
    try:
        done = client.post(f"/api/series/{series_id}/cancel", {"reason": "Ctrl-C at the terminal"})
    except AqvenError as err:
        err_console.print(f"not cancelled: {err.code}: {err.message}", markup=False)
        return
    err_console.print(
        f"cancelled: series {series_id} (status {done['status']}): queued attempts never start, running ones "
        "finish and are paid; no finding",
        markup=False,
    )


def _follow(client: Client, series_id: str, *, quiet: bool) -> dict[str, Any]:
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
            f"{money(pause.get('spent_usd') or spend['usd'])} of its {money(spend['cap_usd'])} cap, "
            f"{state['progress']['done']} of {state['progress']['attempts']} attempts done."
        )
        print_approvals(state)  # approved before and paused again: by whom
        to_finish = finish_line(client, sid, spend)
        if to_finish:
            console.print(to_finish, soft_wrap=True)
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
        print_approvals(state)
        if state.get("finding"):
            console.print(f"finding written: {state['finding']} (FINDINGS.md regenerated)")
    return EXIT_BY_STATUS.get(status, 1)


def print_approvals(state: dict[str, Any]) -> None:
    """Who approved or stopped the series, each act on a line (nothing when no one had to)."""
    for a in state.get("approvals") or []:
        console.print(approval_line(a), markup=False)


def finish_line(client: Client, series_id: str, spend: dict[str, Any]) -> str:
    """What finishing a paused series would cost at its cost per attempt so far, and the cap that lets it finish
    beside the cap it has ('' when nothing has a price yet: a series paused before its first attempt)."""
    try:
        est: dict[str, Any] = client.get(f"/api/studio/series/{series_id}/finish")
    except AqvenError:
        return ""
    if not est.get("more_usd") or not est.get("cap_to_finish_usd"):
        return ""
    lower = " (at least: some attempts had no known price)" if spend.get("lower_bound") else ""
    lines = [
        f"finishing its {est['left']} attempts left would cost about {money(est['more_usd'])} more, "
        f"{money(est['total_usd'])} in all{lower}, at {money(est['per_attempt_usd'])} an attempt so far: "
        f"a cap of ${est['cap_to_finish_usd']} lets it finish (its cap is {money(spend['cap_usd'])})",
        *approval_choices(series_id, est),
    ]
    return "\n".join(lines)


def price_line(client: Client, body: dict[str, Any], series: dict[str, Any]) -> str:
    """An estimate of what the series will cost, from earlier attempts (the plan itself has no dollars)."""
    experiment = body.get("experiment_id")
    if not experiment:
        return ""
    query = {k: body[k] for k in ("cases", "repeats") if body.get(k) is not None}
    try:
        est: dict[str, Any] = client.get(
            f"/api/studio/experiments/{experiment}/price",
            on=series.get("on", "dev"),
            simulate=str(bool(series.get("simulated"))).lower(),
            **query,
        )
    except AqvenError:
        return ""
    return f"price: {est['text']}"


def plan_lines(plan: dict[str, Any]) -> list[str]:
    """The launch plan in a few plain lines: how it was planned, the advice, power, the floor and why so many."""
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
    why = plan.get("why_so_many") or {}
    if why.get("text"):
        lines.append(f"why so many: {why['text']}")
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
        price = price_line(client, body, series)
        if price:
            err_console.print(price, markup=False, soft_wrap=True)
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


def print_look(client: Client, state: dict[str, Any]) -> None:
    """Every working case of a look with its outcome, then each attempt's short trace (each node with its model,
    tokens and cost) and its checks where it had any (pass/fail, score, reason). Held-out cases are only counted:
    the server shows neither their checks nor their traces."""
    from rich.table import Table

    table = Table(show_edge=False)
    for col in ("case", "outcome", "error", "run"):
        table.add_column(col)
    attempts: list[tuple[str, dict[str, Any]]] = []
    for row in state.get("cases", []):
        for v in row["variants"].values():
            for a in v["attempts"]:
                table.add_row(row["case"], a["outcome"] or a["status"], a.get("error") or "", a.get("run_id") or "")
                attempts.append((row["case"], a))
    console.print(table)
    for case, a in attempts:
        if a.get("run_id"):
            for line in attempt_lines(client, case, a["run_id"]):
                console.print(line, markup=False, soft_wrap=True)
    if state.get("hidden_cases"):
        console.print(f"{state['hidden_cases']} held-out case(s) ran but are not listed one by one")


def attempt_lines(client: Client, case: str, run_id: str) -> list[str]:
    """A case's checks and its run's nodes, in a few lines (what the server shows of a working case's run)."""
    lines = [f"case {case} · run {run_id}"]
    try:
        attempt = (client.get(f"/api/studio/runs/{run_id}/attempt") or {}).get("attempt") or {}
        trace: dict[str, Any] = client.get(f"/api/studio/runs/{run_id}/trace")
    except AqvenError as exc:  # HOLDOUT_HIDDEN, a run gone: say why instead of showing nothing
        return [*lines, f"  ({exc.code}: {exc.message})"]
    for c in attempt.get("checks") or []:  # a look has none (checks belong to an experiment)
        mark = "error" if c.get("error") else {True: "pass", False: "fail"}.get(c.get("passed"), "score")
        score = f" {c['score']:.3g}" if isinstance(c.get("score"), int | float) else ""
        why = c.get("error") or c.get("reason") or ""
        lines.append(f"  check {c.get('check_id')}: {mark}{score}" + (f" — {why}" if why else ""))
    for n in trace.get("nodes") or []:
        calls = n.get("calls") or []
        models = sorted(
            {str((c.get("response") or c.get("request") or {}).get("model_name") or "") for c in calls} - {""}
        )
        costs = [(c.get("response") or c.get("error") or {}).get("cost_usd") for c in calls]
        cost = (
            ""
            if not calls
            else " · "
            + (
                "cost unknown"
                if any(v is None for v in costs)
                else money(sum((Decimal(str(v)) for v in costs), Decimal(0)))
            )
        )
        tokens = n.get("tokens") or {}
        used = f" · {tokens.get('input', 0)}/{tokens.get('output', 0)} tokens" if calls else ""
        ms = f" {n['duration_ms']:.0f} ms" if isinstance(n.get("duration_ms"), int | float) else ""
        err = f" · {n['error'].get('code')}" if n.get("error") else ""
        lines.append(
            f"  {'  ' * int(n.get('depth') or 0)}node {n['id']} ({n.get('kind') or '?'}) {n.get('status')}{ms}"
            + (f" · {', '.join(models)}" if models else "")
            + used
            + cost
            + err
        )
    return lines


def follow_again(client: Client, series_id: str, *, as_json: bool, gate: Gate) -> int:
    """`aqven series follow`: wait for a series that runs on the server, as `aqven series` waits, and end as it ends."""
    state: dict[str, Any] = client.get(f"/api/series/{series_id}")  # SERIES_NOT_FOUND before any progress bar
    if not as_json:
        what = state.get("experiment_id") or f"a look at {(state.get('plan') or {}).get('flow_id') or 'a flow'}"
        console.print(
            f"series {series_id}: {what} on {state['on']}, {state['status']}, "
            f"{state['progress']['done']} of {state['progress']['attempts']} attempts done"
            + (" · simulated" if state.get("simulated") else "")
        )
    state = follow(client, series_id, quiet=as_json)
    if as_json:
        print(json.dumps(state))
        return finish(client, state, gate, EXIT_BY_STATUS.get(state["status"], 1))
    return finish(client, state, gate, report(client, state))


def series_rows(client: Client, experiment: str | None, limit: int) -> list[dict[str, Any]]:
    """The project's series, newest first, each with its spend of its cap (an active one's from its snapshot)."""
    items: list[dict[str, Any]] = client.get("/api/series", experiment_id=experiment, limit=limit)
    rows = []
    for it in items:
        spend, cap, lower = it.get("spend_usd"), it.get("cap_usd"), bool(it.get("spend_lower_bound"))
        if spend is None:  # active, or cancelled while attempts finish: its snapshot has the spend as it moves
            try:
                snap = client.get(f"/api/series/{it['series_id']}")
                spend, cap = snap["spend"]["usd"], snap["spend"]["cap_usd"]
                lower = bool(snap["spend"].get("lower_bound"))
            except AqvenError:
                spend = None
        rows.append(
            {
                "series_id": it["series_id"],
                "experiment_id": it.get("experiment_id"),
                "kind": it.get("kind"),
                "flow_id": it.get("flow_id"),
                "on": it.get("on"),
                "status": it.get("status"),
                "verdict": it.get("verdict"),
                "spend_usd": spend,
                "cap_usd": cap,
                "spend_lower_bound": lower,
                "simulated": bool(it.get("simulated")),
                "created_at": it.get("created_at"),
            }
        )
    return rows


def print_series_list(client: Client, rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    if not rows:
        console.print("no series yet: `aqven series EXPERIMENT` starts one")
        return
    table = Table(show_edge=False, pad_edge=False)
    for col in ("series", "experiment", "on", "status", "verdict", "spend of cap", "created"):
        table.add_column(col, justify="right" if col == "spend of cap" else "left")
    for r in rows:
        what = r["experiment_id"] or f"(look: {r.get('flow_id') or '?'})"
        spend = "?" if r["spend_usd"] is None else ("≥" if r["spend_lower_bound"] else "") + money(r["spend_usd"])
        table.add_row(
            r["series_id"],
            what + (" · sim" if r["simulated"] else ""),
            r["on"] or "",
            r["status"] or "",
            r["verdict"] or "",
            f"{spend} of {money(r['cap_usd'])}",
            str(r["created_at"] or "")[:19].replace("T", " "),
        )
    console.print(table)
    named = {"list", "follow"} & {e["id"] for e in _experiments(client)}
    for name in sorted(named):
        err_console.print(
            f"note: experiment {name!r} runs with -- before its name: aqven series -- {name}", markup=False
        )


def _experiments(client: Client) -> list[dict[str, Any]]:
    try:
        out: list[dict[str, Any]] = client.get("/api/experiments")
    except AqvenError:
        return []
    return out
