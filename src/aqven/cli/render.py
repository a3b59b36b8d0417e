"""How the CLI shows runs, traces and diagnostics in a terminal."""

from __future__ import annotations

import os
import sys
from decimal import Decimal
from typing import Any

from rich.console import Console
from rich.table import Table


def _width() -> int | None:
    # Piped output (tests, logs) gets a wide page instead of rich's 80-column default.
    return None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "140"))


# Lines of text are never broken by the console (soft wrap): a `file:line:` of a diagnostic stays on one line for
# the tools that read it, whatever the width; tables still fit the width.
console = Console(highlight=False, width=_width(), soft_wrap=True)
err_console = Console(stderr=True, highlight=False, width=_width(), soft_wrap=True)


def money(value: str | Decimal | None) -> str:
    if value is None:
        return "unknown"
    d = Decimal(str(value))
    return f"${d:.6f}" if d < 1 else f"${d:.2f}"


#: How an approval or stop was given, as the server recorded its channel (store/approvals.py), in the CLI's words.
APPROVAL_HOW: dict[tuple[Any, Any], str] = {
    ("studio", "passkey"): "with a passkey in Studio",
    ("studio", "session"): "in Studio",
    ("terminal", "tty"): "at a terminal",
    ("terminal", "--yes"): "at a terminal with --yes (no person asked)",
    ("terminal", None): "at a terminal",
    ("rest", None): "with the server token (no person asked)",
}


def approval_line(a: dict[str, Any]) -> str:
    """One approval or stop of a series: what it did, who (the passkey's or the person key's name), how and when."""
    if a.get("action") == "stop":
        what = "stopped"
    elif a.get("new_token_cap") is not None:
        what = f"approved {int(a['new_token_cap']):,} tokens (was {int(a.get('old_token_cap') or 0):,})"
    else:
        what = f"approved a cap of {money(a.get('new_cap_usd'))} (was {money(a.get('old_cap_usd'))})"
    how = APPROVAL_HOW.get((a.get("channel"), a.get("confirmed")), f"via {a.get('channel')}")
    when = str(a.get("at") or "")[:16].replace("T", " ")
    return f"{what} by {a.get('person') or 'someone (before people were named)'} {how}, {when} UTC"


def show_error(err: dict[str, Any]) -> None:
    where = ""
    if err.get("file"):
        where = f"{err['file']}" + (f":{err['line']}" if err.get("line") else "") + ": "
    err_console.print(f"[red]error[/red] {where}{err.get('code')}: {err.get('message')}")
    if err.get("hint"):
        err_console.print(f"  hint: {err['hint']}")


def run_summary(run: dict[str, Any], events: list[dict[str, Any]]) -> None:
    sim = " [yellow](simulated)[/yellow]" if run.get("simulated") or run["request"].get("simulate") else ""
    status = run["status"]
    color = {"done": "green", "failed": "red", "waiting_human": "yellow"}.get(status, "white")
    case = f" case {run['case_name']}" if run.get("case_name") else ""
    rng = ""
    req = run["request"]
    if req.get("from_node") or req.get("to_node"):
        rng = f" range {req.get('from_node') or '(start)'}..{req.get('to_node') or '(end)'}"
    console.print(f"run {run['id']} · flow {run['flow_id']}{case}{rng} · [{color}]{status}[/{color}]{sim}")

    table = Table(show_edge=False, pad_edge=False)
    for col in ("node", "kind", "status", "ms", "model", "tokens in/out", "cost", "source"):
        table.add_column(col, justify="right" if col in ("ms", "tokens in/out", "cost") else "left")
    nodes: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for e in events:
        nid = e.get("node_id")
        if not nid:
            continue
        if nid not in nodes:
            nodes[nid] = {"kind": "", "status": "running", "ms": "", "calls": []}
            order.append(nid)
        n = nodes[nid]
        data = e.get("data", {})
        if e["kind"] == "node_start":
            n["kind"] = data.get("kind", "")
        elif e["kind"] == "node_end":
            n["status"], n["ms"] = "done", f"{data.get('duration_ms', 0):.0f}"
        elif e["kind"] == "node_error":
            n["status"] = f"failed: {data.get('code')}"
        elif e["kind"] == "human_wait":
            n["status"] = "waiting_human"
        elif e["kind"] == "model_response":
            n["calls"].append(data)
        elif e["kind"] == "retry":
            n["status"] += f" (retry {data.get('attempt')})"
    for nid in order:
        n = nodes[nid]
        calls = n["calls"]
        if calls:
            c = calls[-1]
            tin = sum(x.get("input_tokens", 0) for x in calls)
            tout = sum(x.get("output_tokens", 0) for x in calls)
            costs = [x.get("cost_usd") for x in calls]
            cost = None if any(v is None for v in costs) else sum((Decimal(v) for v in costs), Decimal(0))
            table.add_row(
                nid,
                n["kind"],
                n["status"],
                n["ms"],
                c.get("model_name", ""),
                f"{tin}/{tout}",
                money(cost),
                c.get("cost_source", ""),
            )
        else:
            table.add_row(nid, n["kind"], n["status"], n["ms"], "", "", "", "")
    console.print(table)
    lower = " (lower bound: some calls had no known price)" if run.get("cost_is_lower_bound") else ""
    console.print(
        f"total: {run['model_calls']} model calls · {run['input_tokens']} in / {run['output_tokens']} out "
        f"tokens · {money(run['cost_usd'])}{lower}"
    )
    if run.get("error"):
        e = run["error"]
        outcome = run.get("outcome")
        kind = {"infra": "infrastructure error", "model_failure": "counted model failure"}.get(outcome or "", "error")
        console.print(
            f"[red]{kind}[/red] {e['code']}"
            + (f" at node {e['node_id']}" if e.get("node_id") else "")
            + f": {e['message']}"
        )
    if status == "waiting_human":
        console.print(
            f"waiting for a person at node {run.get('waiting_node')}: answer with "
            f"POST /api/runs/{run['id']}/human/{run.get('waiting_node')} or in Studio"
        )
