"""What finishing a series costs: the attempts left at the cost per attempt so far, a cap that lets it finish, what
double the cap buys and what finishing can decide. Studio's approval panel and the chat's `series_finish_cost` tool
read it. A held-out series that still runs is priced as of its last coarse step, and a look's held-out attempts are
counted as of theirs (`research/holdout.py`)."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from aqven.research.holdout import held_out_attempts, reads_held_out, sealed_now, shown_attempt_count
from aqven.research.series.runner import PAUSE_AT  # the one place the pause point is set
from aqven.server.service import ProjectService


class FinishEstimate(BaseModel):
    """What the attempts left would cost at the cost per attempt so far, and a cap that lets the series finish."""

    done: int
    left: int
    per_attempt_usd: str | None  # money as strings, like everywhere
    more_usd: str | None
    total_usd: str | None
    cap_to_finish_usd: str | None  # covers the total plus the reserves the runner holds for attempts side by side
    double_usd: str | None = (
        None  # what Approve sets by default: double the cap (the cap asked for, above the project's)
    )
    double_pauses_after: int | None = None  # about how many more attempts the default runs before it pauses again
    decides: str | None = None  # what finishing can decide, in one sentence (None when nothing is known to say)


def _cents_up(x: Decimal) -> Decimal:
    """Round a dollar amount up to two significant digits below $1 and to cents above: a cap a person types."""
    if x >= 1:
        return x.quantize(Decimal("0.01"), rounding="ROUND_CEILING")
    exp = x.adjusted() - 1  # two significant digits
    return x.scaleb(-exp).to_integral_value(rounding="ROUND_CEILING").scaleb(exp)


def finish_estimate(svc: ProjectService, series_id: str) -> FinishEstimate:
    s = svc.series.store.get(series_id)
    working = " AND side='dev'" if reads_held_out(s) else ""  # a look prices from its working attempts only
    row = svc.db.query_one(
        "SELECT COUNT(*) AS n, SUM(CASE WHEN status='done' THEN 1 ELSE 0 END) AS d FROM attempts"
        f" WHERE series_id=?{working}",
        (series_id,),
    )
    total, done = (row["n"] or 0, row["d"] or 0) if row else (0, 0)
    if working:  # a look's held-out attempts: counted as of their last coarse step, never one by one
        total += held_out_attempts(s)
        done += shown_attempt_count(s, status="done")
    costs = [
        Decimal(r["cost_usd"])
        for r in svc.db.query(
            f"SELECT cost_usd FROM attempts WHERE series_id=? AND status='done' AND cost_usd IS NOT NULL{working}",
            (series_id,),
        )
    ]
    left = total - done
    spent = sum(costs, Decimal(0))
    double = Decimal(s.cap_usd) if (s.pause or {}).get("reason") == "cap_above_project" else Decimal(s.cap_usd) * 2
    priced = len(costs)
    if sealed_now(s):
        # A held-out series that still runs: the cost per attempt as of its last coarse step, never the exact
        # spend (which would price each attempt as it ends and tell an output retry, a failure, apart).
        view = s.sealed_view or {}
        done = priced = int(view.get("done", 0))
        left = total - done
        spent = Decimal(str((view.get("spend") or {}).get("usd", "0")))
        costs = [spent] if priced else []
    if not costs or spent <= 0:
        return FinishEstimate(
            done=done,
            left=left,
            per_attempt_usd=None,
            more_usd=None,
            total_usd=None,
            cap_to_finish_usd=None,
            double_usd=str(double),
        )
    per = spent / priced
    more = per * left
    # The runner holds the dearest attempt's cost for each attempt side by side; a held-out series that still
    # runs shows no single attempt's cost, so it plans with twice the mean instead. The cap it offers ("enough
    # to finish") prices every attempt left at that reserve, not at the mean: the attempts left may be the dear
    # ones, and a cap offered as enough must not pause the series again unless an attempt costs more than any so far.
    reserve = per * 2 if sealed_now(s) else max(costs)
    side_by_side = max(1, min(svc.project().config.concurrency, left))
    cap = (spent + reserve * left + reserve * side_by_side) / PAUSE_AT
    # Under the doubled cap the attempts cost about the mean each, while the runner still holds a reserve for
    # each one side by side: it pauses again once those reach 90% of it.
    fits = int(max(Decimal(0), (double * PAUSE_AT - spent - reserve * side_by_side) / per))
    return FinishEstimate(
        done=done,
        left=left,
        per_attempt_usd=str(per.quantize(Decimal("0.0000001"))),
        more_usd=str(more.quantize(Decimal("0.0000001"))),
        total_usd=str((spent + more).quantize(Decimal("0.0000001"))),
        cap_to_finish_usd=str(_cents_up(cap)) if left else None,
        double_usd=str(double),
        double_pauses_after=fits if left and fits < left else None,
    )


def what_finishing_decides(snap: dict[str, Any]) -> str | None:
    """One sentence on what finishing a paused series can decide, from its (provisional) verdict: None when the
    verdict has nothing to say about its size."""
    verdict = snap.get("verdict") or {}
    needed = verdict.get("cases_to_decide")
    cases = int((snap.get("plan") or {}).get("cases") or 0)
    side = "held-out" if snap.get("on") == "holdout" else "working"
    if isinstance(needed, int) and cases and needed > cases:
        return (
            f"finishing cannot settle the margin with {cases} {side} case{'' if cases == 1 else 's'}: "
            f"about {needed} are needed"
        )
    return None


async def finish(svc: ProjectService, series_id: str) -> FinishEstimate:
    """The estimate with what finishing can decide (from the series' snapshot)."""
    snap = await svc.series.get(series_id)
    est = await asyncio.to_thread(finish_estimate, svc, series_id)
    est.decides = what_finishing_decides(snap)
    return est
