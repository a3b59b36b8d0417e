"""What `series_get` shows: progress, spend against the cap, eta, the matrix, the verdict, dev cases."""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from aqven.research.series_end import COUNTED, compute_verdict, spend_of
from aqven.research.series_runner import active_now
from aqven.store.runs import RunStore
from aqven.store.series_records import ENDED, AttemptRow, SeriesRow

ETA_WINDOW_S = 300.0
MAX_CASE_ROWS = 50


def eta(s: SeriesRow, attempts: list[AttemptRow]) -> dict[str, Any] | None:
    """From the attempts finished per minute over the last 5 minutes of running time."""
    if s.status in ENDED:
        return None
    if s.status in ("awaiting_approval", "waiting_human"):
        return {"state": "paused"}
    ends = sorted(a.active_at_end for a in attempts if a.status == "done" and a.active_at_end is not None)
    if len(ends) < 4:  # estimating until 3 attempts finished after the first one
        return {"state": "estimating"}
    now = active_now(s)
    after_first = ends[1:]
    span = min(ETA_WINDOW_S, max(now - ends[0], 1e-6))
    recent = [t for t in after_first if t >= now - ETA_WINDOW_S]
    if not recent:
        return {"state": "estimating"}
    per_minute = len(recent) / span * 60
    left = sum(a.status != "done" for a in attempts)
    remaining = left / per_minute * 60
    finish = datetime.now(UTC) + timedelta(seconds=remaining)
    return {
        "state": "running",
        "attempts_per_minute": round(per_minute, 3),
        "remaining_seconds": round(remaining, 1),
        "finish_at": finish.isoformat(timespec="seconds"),
    }


def matrix(s: SeriesRow, attempts: list[AttemptRow], verdict: dict[str, Any] | None) -> list[dict[str, Any]]:
    cells = {c.get("variant"): c for c in (verdict or {}).get("cells", [])}
    out = []
    for v in s.plan.variants:
        mine = [a for a in attempts if a.variant_id == v]
        done = [a for a in mine if a.status == "done"]
        counted = [a for a in done if a.outcome in COUNTED]
        row: dict[str, Any] = {
            "variant": v,
            "attempts": len(mine),
            "done": len(done),
            "counted": len(counted),
            "passes": round(sum(a.value or 0.0 for a in counted), 6),
            "model_failures": sum(a.outcome == "model_failure" for a in done),
            "infra_errors": sum(a.outcome == "infra" for a in done),
            "spend_usd": str(sum((Decimal(a.cost_usd or "0") for a in mine), Decimal(0))),
        }
        cell = cells.get(v)
        if cell:
            row.update({k: cell.get(k) for k in ("estimate", "low", "high") if k in cell})
        out.append(row)
    return out


def case_rows(s: SeriesRow, attempts: list[AttemptRow]) -> tuple[list[dict[str, Any]], int]:
    """Dev cases only, failing first, at most 50; the rest (and every held-out case) are counted as hidden."""
    by_case: dict[str, list[AttemptRow]] = defaultdict(list)
    for a in attempts:
        by_case[a.case_name].append(a)
    dev = [c for c in s.plan.cases if s.plan.sides.get(c) == "dev"]
    rows = []
    for case in dev:
        mine = by_case.get(case, [])
        variants = {}
        failing = False
        for v in s.plan.variants:
            va = [a for a in mine if a.variant_id == v]
            counted = [a for a in va if a.status == "done" and a.outcome in COUNTED]
            failed_checks = sorted({c["check_id"] for a in va for c in (a.checks or []) if c.get("passed") is False})
            fails = sum(a.outcome in ("fail", "model_failure") for a in va)
            failing = failing or fails > 0
            variants[v] = {
                "passes": round(sum(a.value or 0.0 for a in counted), 6),
                "counted": len(counted),
                "fails": fails,
                "failed_checks": failed_checks,
                "attempts": [
                    {
                        "repeat": a.rep,
                        "status": a.status,
                        "outcome": a.outcome,
                        "error": a.error_code,
                        "message": a.error_message,
                        "run_id": a.run_id,
                    }
                    for a in sorted(va, key=lambda x: x.rep)
                ],
            }
        rows.append({"case": case, "failing": failing, "variants": variants})
    order = {c: i for i, c in enumerate(dev)}
    rows.sort(key=lambda r: (not r["failing"], order[str(r["case"])]))
    shown = rows[:MAX_CASE_ROWS]
    return shown, len(s.plan.cases) - len(shown)


def snapshot(
    s: SeriesRow, attempts: list[AttemptRow], runs: RunStore, *, include_cases: bool = False
) -> dict[str, Any]:
    done = [a for a in attempts if a.status == "done"]
    spent, unpriced = spend_of(attempts, runs)
    verdict = s.verdict if s.status in ENDED else compute_verdict(s, attempts, provisional=True)
    if s.status == "cancelled" and s.ended_at is None:
        # Cancelled while attempts still finish: the verdict is already invalid (cancelled), not missing.
        verdict = compute_verdict(s, attempts, provisional=False)
    out: dict[str, Any] = {
        "series_id": s.id,
        "kind": s.kind,
        "experiment_id": s.experiment_id,
        "on": s.on,
        "status": s.status,
        "simulated": s.simulated,
        "created_at": s.created_at,
        "ended_at": s.ended_at,
        "progress": {
            "attempts": len(attempts),
            "done": len(done),
            "running": sum(a.status == "running" for a in attempts),
            "queued": sum(a.status == "queued" for a in attempts),
            "counted": sum(a.outcome in COUNTED for a in done),
            "model_failures": sum(a.outcome == "model_failure" for a in done),
            "infra_errors": sum(a.outcome == "infra" for a in done),
            "reruns": sum(a.reruns for a in attempts),
        },
        "spend": {
            "usd": str(spent),
            "cap_usd": s.cap_usd,
            "project_cap_usd": s.project_cap_usd,
            "project_cap_source": s.project_cap_source,
            "unpriced_attempts": unpriced,
            "lower_bound": unpriced > 0,
        },
        "pause": s.pause if s.status == "awaiting_approval" else None,
        "eta": eta(s, attempts),
        "matrix": matrix(s, attempts, verdict),
        "verdict": verdict,
        "error": s.error,
        "finding": s.finding,
        "plan": {
            "flow_id": s.plan.flow_id,
            "from": s.plan.from_node,
            "to": s.plan.to_node,
            "dataset_id": s.plan.dataset_id,
            "cases": len(s.plan.cases),
            "repeats": s.plan.repeats,
            "variants": s.plan.variants,
            "question": s.plan.question,
        },
        "launch_plan": s.plan.launch_plan,
        "as_of": time.time(),
    }
    if include_cases:
        rows, hidden = case_rows(s, attempts)
        out["cases"] = rows
        out["hidden_cases"] = hidden
    return out
