"""REST: experiments, launch plans, series (start, get, cancel, approve, stop) and findings."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict

from aqven.project.local import simulate_enabled
from aqven.research.findings.records import is_intact, read_findings, read_findings_md
from aqven.research.findings.verify import Verifier
from aqven.research.launch.history import dev_estimates
from aqven.research.launch.plan import Side, launch_plan
from aqven.research.series.reads import planned_cases, rereads
from aqven.research.series.start import SeriesStartBody
from aqven.server.deps import service_of
from aqven.server.security import approver_of
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


class StopBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _experiment_json(svc: ProjectService, exp_id: str) -> dict[str, Any]:
    exp = svc.workspace().experiment(exp_id)
    spec = exp.spec
    varies = spec.varies
    caption = f"Varies: {varies.what} of {', '.join(varies.nodes)}" if varies else "Varies: nothing (one variant)"
    return {
        "id": exp_id,
        "failure_mode": spec.failure_mode,
        "description": spec.description.strip(),
        "subject": {"flow": spec.subject.flow, "from": spec.subject.from_, "to": spec.subject.to},
        "varies": varies.model_dump() if varies else None,
        "caption": caption,
        "variants": [
            {
                "id": v.id,
                "nodes": v.nodes,
                "value": ", ".join(f"{k}: {val}" for k, val in v.nodes.items()) or "as written",
            }
            for v in spec.variants
        ],
        "dataset": spec.dataset.model_dump(),
        "checks": [c.model_dump(exclude_none=True, by_alias=True) for c in spec.checks],
        "metrics": {k: m.model_dump() for k, m in spec.metrics.items()},
        "question": spec.question.model_dump(),
        "repeats": spec.repeats,
        "file": exp.file,
        "local_flows": sorted(exp.local_flows),
    }


@router.get("/experiments")
def list_experiments(svc: ProjectService = Depends(service_of)) -> list[dict[str, Any]]:
    return [_experiment_json(svc, e) for e in sorted(svc.workspace().experiments)]


@router.get("/experiments/{experiment_id}")
def get_experiment(experiment_id: str, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    out = _experiment_json(svc, experiment_id)
    out["series"] = svc.series.list_series(experiment_id=experiment_id)
    return out


@router.post("/experiments/{experiment_id}/launch-plan")
def post_launch_plan(
    experiment_id: str, body: LaunchPlanBody, svc: ProjectService = Depends(service_of)
) -> dict[str, Any]:
    ws = svc.workspace()
    exp = ws.experiment(experiment_id)
    # Plan with a dev series run in the mode this series would run in (simulated or live).
    simulated = simulate_enabled(ws.project.root, body.simulate)
    plan = launch_plan(
        ws,
        exp,
        on=body.on,
        cases=body.cases,
        repeats=body.repeats,
        cap_usd=body.cap_usd,
        estimates=dev_estimates(ws, svc.series.store, exp, simulated=simulated),
    )
    if body.on == "holdout":  # re-reads are visible: how many of these cases earlier held-out series read
        cases = planned_cases(ws, experiment_id, "holdout", body.cases)
        plan["earlier_reads"] = rereads(svc.series.store, experiment_id, cases)
    return plan


@router.post("/series", status_code=201)
async def start_series(body: SeriesStartBody, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    return await svc.series.start(body)


@router.get("/series")
def list_series(
    experiment_id: str | None = None, limit: int = Query(50, ge=1, le=500), svc: ProjectService = Depends(service_of)
) -> list[dict[str, Any]]:
    return svc.series.list_series(experiment_id=experiment_id, limit=limit)


@router.get("/series/{series_id}")
async def get_series(
    series_id: str,
    wait_seconds: float = Query(0, ge=0, le=50),
    include_cases: bool = False,
    svc: ProjectService = Depends(service_of),
) -> dict[str, Any]:
    return await svc.series.get(series_id, wait_seconds=wait_seconds, include_cases=include_cases)


@router.post("/series/{series_id}/cancel")
async def cancel_series(
    series_id: str, body: CancelBody | None = None, svc: ProjectService = Depends(service_of)
) -> dict[str, Any]:
    return await svc.series.cancel(series_id, body.reason if body else None)


@router.post("/series/{series_id}/approve")
async def approve_series(
    series_id: str, body: ApproveBody, request: Request, svc: ProjectService = Depends(service_of)
) -> dict[str, Any]:
    """A person continues a paused series; the approval is recorded with its channel (studio, terminal, rest)."""
    who = approver_of(request.state, request.headers)
    return await svc.series.approve(series_id, body.cap_usd, who)


@router.post("/series/{series_id}/stop")
async def stop_series(
    series_id: str, body: StopBody, request: Request, svc: ProjectService = Depends(service_of)
) -> dict[str, Any]:
    """A person stops a paused series; the stop is recorded with its channel."""
    return await svc.series.stop(series_id, approver_of(request.state, request.headers))


@router.get("/findings")
def list_findings(svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    root = svc.root
    items = []
    verifier = Verifier(root, svc.db)
    try:
        for path, data in read_findings(root):
            result = verifier.verify(path, data)
            items.append(
                {
                    "file": str(path.relative_to(root)),
                    "intact": bool(data and is_intact(data)),
                    "verifies": result.ok,
                    "problem": result.problem,
                    "experiment_id": (data or {}).get("experiment_id"),
                    "series_id": (data or {}).get("series_id"),
                    "verdict": ((data or {}).get("verdict") or {}).get("verdict"),
                    "text": ((data or {}).get("verdict") or {}).get("text"),
                }
            )
    finally:
        verifier.close()
    return {"findings": items, "findings_md": read_findings_md(root) or ""}
