"""REST: start runs, read them, their trace events and one node, and answer human nodes.

Held-out cases are never shown one by one (`aqven.research.holdout`): a run of a held-out case is neither
started nor listed (the listing counts them in the `X-Hidden-Holdout-Runs` header), and reading one, its
events or a node, or answering its human node, is refused with 403 `HOLDOUT_HIDDEN`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from aqven.server.deps import person_acting, service_of
from aqven.server.operations import runs
from aqven.server.operations.models import NodeOut
from aqven.server.principals import PasskeyProof, answer_digest
from aqven.server.service import ProjectService
from aqven.store.records import RunRecord, TraceEvent

router = APIRouter(prefix="/api/runs", tags=["runs"])
HIDDEN_HEADER = "X-Hidden-Holdout-Runs"  # how many runs the filters match that ran held-out cases (not listed)
SQLITE_MAX_INT = 2**63 - 1  # a larger offset or sequence number cannot reach the database (it would be a 500)


class RunStartBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    flow_id: str
    case: str | None = None
    dataset_id: str | None = None
    input: Any = None
    context: dict[str, Any] | None = None
    node_outputs: dict[str, Any] | None = None
    from_node: str | None = None
    to_node: str | None = None
    simulate: bool = False
    seed: int | None = None
    wait: bool = Field(False, description="hold the answer until the run ends or waits for a person")
    wait_seconds: float = Field(120.0, ge=0, le=600)


class HumanAnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: Any
    passkey: PasskeyProof | None = None  # Studio: an assertion bound to this run's node and this answer


@router.post("", status_code=201)
async def start_run(body: RunStartBody, svc: ProjectService = Depends(service_of)) -> RunRecord:
    payload = body.model_dump(exclude={"wait", "wait_seconds"}, exclude_unset=True)
    if "input" in body.model_fields_set or body.input is not None:
        payload["input"] = body.input
    return await runs.start(svc, payload, body.wait_seconds if body.wait else 0)


@router.get("")
def list_runs(
    response: Response,
    flow_id: str | None = None,
    status: str | None = None,
    series_id: str | None = None,
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=SQLITE_MAX_INT),
    svc: ProjectService = Depends(service_of),
) -> list[RunRecord]:
    """Runs newest first, without the runs that ran on the held-out side: their number is in the X-Hidden-Holdout-Runs
    header (offset and limit count the listed runs)."""
    out = runs.list_runs(svc, flow_id=flow_id, status=status, series_id=series_id, limit=limit, offset=offset)
    response.headers[HIDDEN_HEADER] = str(out.hidden_holdout_runs)
    return out.runs


@router.get("/{run_id}")
async def get_run(
    run_id: str, wait_seconds: float = Query(0, ge=0, le=50), svc: ProjectService = Depends(service_of)
) -> RunRecord:
    return await runs.get(svc, run_id, wait_seconds)


@router.get("/{run_id}/events")
def run_events(
    run_id: str,
    after: int = Query(0, ge=0, le=SQLITE_MAX_INT),
    limit: int = Query(1000, ge=1, le=5000),
    svc: ProjectService = Depends(service_of),
) -> list[TraceEvent]:
    return runs.events(svc, run_id, after=after, limit=limit)


@router.get("/{run_id}/nodes/{node_id:path}")
def run_node(run_id: str, node_id: str, svc: ProjectService = Depends(service_of)) -> NodeOut:
    return runs.node(svc, run_id, node_id)


@router.post("/{run_id}/human/{node_id:path}")
async def answer_human(
    run_id: str,
    node_id: str,
    request: Request,
    body: HumanAnswerBody = Body(...),
    svc: ProjectService = Depends(service_of),
) -> RunRecord:
    """A person's answer to a waiting human node (never an agent's), recorded with who and the proof."""
    who = person_acting(request, ("human_answer", f"{run_id}/{node_id}", answer_digest(body.answer)), body.passkey)
    return runs.answer_human(svc, run_id, node_id, body.answer, who)
