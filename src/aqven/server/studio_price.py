"""What a series would cost before it runs: an estimate, never part of the launch plan itself (the spec's plan has no
dollars: what an attempt costs is known from attempts as they finish).

From the cost per attempt of each variant in the experiment's newest series that has priced attempts on working
cases; else from the runs of the subject flow (every variant priced alike); else no estimate. Studio's Launch panel
and `aqven series` show it beside the plan, flagged as an estimate, with what the cap will do about it.
"""

from __future__ import annotations

from decimal import Decimal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from aqven.project.money import shown_usd
from aqven.research.launch.plan import Side
from aqven.research.series.runner import PAUSE_AT  # the one place the pause point is set
from aqven.server.deps import service_of
from aqven.server.operations.research import plan_launch
from aqven.server.service import ProjectService

router = APIRouter(tags=["studio"])


class PriceEstimate(BaseModel):
    estimate: bool = True  # always: the spend is what the attempts cost as they finish
    usd: str | None  # None: nothing of this experiment or flow has run with a price yet
    attempts: int
    per_attempt_usd: dict[str, str]  # by variant
    basis: str
    cap_usd: str
    text: str


def _series_costs(svc: ProjectService, experiment_id: str) -> tuple[str, dict[str, Decimal]] | None:
    """(series id, mean cost per attempt by variant) of the newest series of the experiment with priced working
    attempts."""
    row = svc.db.query_one(
        "SELECT s.id FROM series s WHERE s.experiment_id=? AND EXISTS (SELECT 1 FROM attempts a WHERE"
        " a.series_id = s.id AND a.side='dev' AND a.status='done' AND a.cost_usd IS NOT NULL)"
        " ORDER BY s.created_at DESC LIMIT 1",
        (experiment_id,),
    )
    if row is None:
        return None
    costs: dict[str, list[Decimal]] = {}
    for r in svc.db.query(
        "SELECT variant_id, cost_usd FROM attempts WHERE series_id=? AND side='dev' AND status='done'"
        " AND cost_usd IS NOT NULL",
        (row["id"],),
    ):
        costs.setdefault(r["variant_id"], []).append(Decimal(r["cost_usd"]))
    return str(row["id"]), {v: sum(c, Decimal(0)) / len(c) for v, c in costs.items()}


def _flow_costs(svc: ProjectService, flow_id: str) -> tuple[int, Decimal] | None:
    """(runs, mean cost) of the finished runs of a flow on working cases or plain inputs."""
    rows = svc.db.query(
        "SELECT cost_usd FROM runs WHERE flow_id=? AND status='done' AND cost_usd IS NOT NULL"
        " AND COALESCE(side, 'dev') = 'dev' ORDER BY created_at DESC LIMIT 200",
        (flow_id,),
    )
    costs = [Decimal(r["cost_usd"]) for r in rows]
    return (len(costs), sum(costs, Decimal(0)) / len(costs)) if costs else None


def price_estimate(
    svc: ProjectService, experiment_id: str, *, on: Side, cases: int | None, repeats: int | None, simulate: bool
) -> PriceEstimate:
    plan = plan_launch(svc, experiment_id, on=on, cases=cases, repeats=repeats, cap_usd=None, simulate=simulate)
    per_variant_attempts = plan.cases * plan.repeats
    variants = [v.id for v in svc.workspace().experiment(experiment_id).spec.variants]
    cap = Decimal(plan.cap_usd)
    per: dict[str, Decimal] = {}
    basis = ""
    found = _series_costs(svc, experiment_id)
    if found is not None and all(v in found[1] for v in variants):
        per, basis = found[1], f"the cost per attempt of each variant in series {found[0]} (working cases)"
    else:
        flow = _flow_costs(svc, svc.workspace().experiment(experiment_id).spec.subject.flow)
        if flow is not None:
            per = dict.fromkeys(variants, flow[1])
            basis = f"the mean cost of {flow[0]} runs of its flow (every variant priced alike)"
    if not per:
        return PriceEstimate(
            usd=None,
            attempts=plan.attempts,
            per_attempt_usd={},
            basis="",
            cap_usd=str(cap),
            text="no estimate yet: nothing of this experiment or its flow has run with a price; the cap holds the "
            "spend, and near 90% of it the series pauses for you",
        )
    total = sum((per[v] * per_variant_attempts for v in variants), Decimal(0))
    says = f"about {shown_usd(total)} for {plan.attempts:,} attempts (an estimate from {basis})" + (
        f": above its {shown_usd(cap)} cap, it will pause near {shown_usd(cap * PAUSE_AT)} for your approval"
        if total > cap * PAUSE_AT
        else f": within its {shown_usd(cap)} cap"
    )
    return PriceEstimate(
        usd=str(total.quantize(Decimal("0.000001"))),
        attempts=plan.attempts,
        per_attempt_usd={v: str(per[v].quantize(Decimal("0.0000001"))) for v in variants},
        basis=basis,
        cap_usd=str(cap),
        text=says,
    )


@router.get("/api/studio/experiments/{experiment_id}/price")
def get_price(
    experiment_id: str,
    on: Side = "dev",
    cases: int | None = Query(None, ge=1),
    repeats: int | None = Query(None, ge=1, le=20),
    simulate: bool = False,
    svc: ProjectService = Depends(service_of),
) -> PriceEstimate:
    """An estimate of what a series would cost, beside its launch plan (which has no dollars)."""
    return price_estimate(svc, experiment_id, on=on, cases=cases, repeats=repeats, simulate=simulate)
