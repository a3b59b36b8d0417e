"""REST: experiments, launch plans, series (start, get, cancel, approve, stop) and findings (answers from
`operations.research` and `operations.series`)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from aqven.research.launch.caps import parse_cap
from aqven.research.launch.plan import Side
from aqven.research.series.start import SeriesStartBody
from aqven.server.deps import person_acting, service_of
from aqven.server.operations import research, series
from aqven.server.operations.models import (
    ExperimentOut,
    FindingsOut,
    LaunchPlan,
    SeriesItem,
    SeriesOut,
    SeriesStartOut,
)
from aqven.server.principals import PasskeyProof, principal_of
from aqven.server.service import ProjectService

router = APIRouter(prefix="/api", tags=["research"])


class LaunchPlanBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    on: Side = "dev"
    cases: int | None = None
    repeats: int | None = None
    cap_usd: str | None = None
    simulate: bool = False


class CancelBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str | None = None


class ApproveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cap_usd: str | int | float | None = None  # read by research/caps.parse_cap: a plain decimal, ≤ 6 decimals
    token_cap: int | None = Field(default=None, ge=1, le=10_000_000_000)  # a series paused near its token cap
    passkey: PasskeyProof | None = None  # Studio: an assertion bound to this series and amount

    def amount(self) -> str:
        """What a passkey binds: the token cap, the dollar cap as a plain decimal, or "default" (double)."""
        if self.token_cap is not None:
            return f"{self.token_cap} tokens"
        cap = parse_cap(self.cap_usd)
        return str(cap) if cap is not None else "default"


class StopBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    passkey: PasskeyProof | None = None


@router.get("/experiments")
def list_experiments(svc: ProjectService = Depends(service_of)) -> list[ExperimentOut]:
    return research.experiments(svc)


@router.get("/experiments/{experiment_id}")
def get_experiment(experiment_id: str, svc: ProjectService = Depends(service_of)) -> ExperimentOut:
    return research.experiment_with_series(svc, experiment_id)


@router.post("/experiments/{experiment_id}/launch-plan")
def post_launch_plan(experiment_id: str, body: LaunchPlanBody, svc: ProjectService = Depends(service_of)) -> LaunchPlan:
    return research.plan_launch(
        svc,
        experiment_id,
        on=body.on,
        cases=body.cases,
        repeats=body.repeats,
        cap_usd=body.cap_usd,
        simulate=body.simulate,
    )


@router.post("/series", status_code=201)
async def start_series(body: SeriesStartBody, svc: ProjectService = Depends(service_of)) -> SeriesStartOut:
    return await series.start(svc, body)


@router.get("/series")
def list_series(
    experiment_id: str | None = None, limit: int = Query(50, ge=1, le=500), svc: ProjectService = Depends(service_of)
) -> list[SeriesItem]:
    return series.list_series(svc, experiment_id=experiment_id, limit=limit)


@router.get("/series/{series_id}")
async def get_series(
    series_id: str,
    wait_seconds: float = Query(0, ge=0, le=50),
    include_cases: bool = False,
    svc: ProjectService = Depends(service_of),
) -> SeriesOut:
    return await series.get(svc, series_id, wait_seconds=wait_seconds, include_cases=include_cases)


@router.post("/series/{series_id}/cancel")
async def cancel_series(
    series_id: str, request: Request, body: CancelBody | None = None, svc: ProjectService = Depends(service_of)
) -> SeriesOut:
    who = principal_of(request.state)
    by = {"kind": who.kind, "channel": who.channel, **({"person": who.name} if who.name else {})}
    return await series.cancel(svc, series_id, body.reason if body else None, by)


@router.post("/series/{series_id}/approve")
async def approve_series(
    series_id: str, body: ApproveBody, request: Request, svc: ProjectService = Depends(service_of)
) -> SeriesOut:
    """A person continues a paused series (never an agent); the approval is recorded with who and the proof."""
    who = person_acting(request, ("approve", series_id, body.amount()), body.passkey)
    return await series.approve(svc, series_id, body.cap_usd, who, body.token_cap)


@router.post("/series/{series_id}/stop")
async def stop_series(
    series_id: str, body: StopBody, request: Request, svc: ProjectService = Depends(service_of)
) -> SeriesOut:
    """A person stops a paused series (never an agent); the stop is recorded with who and the proof."""
    return await series.stop(svc, series_id, person_acting(request, ("stop", series_id, ""), body.passkey))


@router.get("/findings")
def list_findings(svc: ProjectService = Depends(service_of)) -> FindingsOut:
    return research.findings(svc)
