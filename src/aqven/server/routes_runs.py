"""REST: start runs, read them, their trace events and one node, and answer human nodes.

Held-out cases are never shown one by one (`aqven.research.holdout`): a run of a held-out case is neither
started nor listed (the listing counts them in the `X-Hidden-Holdout-Runs` header), and reading one, its
events or a node, or answering its human node, is refused with 403 `HOLDOUT_HIDDEN`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from aqven.errors import NotFoundError
from aqven.research.holdout import HELD_OUT_RUN_SQL
from aqven.server.deps import service_of
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


class NodeView(BaseModel):
    run_id: str
    node_id: str
    status: str
    inputs: Any = None
    output: Any = None
    error: dict[str, Any] | None = None
    model_calls: list[dict[str, Any]] = []
    events: list[TraceEvent]


class HumanAnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: Any


@router.post("", status_code=201)
async def start_run(body: RunStartBody, svc: ProjectService = Depends(service_of)) -> RunRecord:
    payload = body.model_dump(exclude={"wait", "wait_seconds"}, exclude_unset=True)
    if "input" in body.model_fields_set or body.input is not None:
        payload["input"] = body.input
    request = svc.build_request(payload)
    run_id = svc.start_run(request)
    if body.wait:
        return await svc.wait_run(run_id, body.wait_seconds)
    return svc.runs.get(run_id)


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
    runs, hidden = svc.runs.list_runs_except(
        HELD_OUT_RUN_SQL, flow_id=flow_id, status=status, series_id=series_id, limit=limit, offset=offset
    )
    response.headers[HIDDEN_HEADER] = str(hidden)
    return runs


@router.get("/{run_id}")
async def get_run(
    run_id: str, wait_seconds: float = Query(0, ge=0, le=50), svc: ProjectService = Depends(service_of)
) -> RunRecord:
    record = svc.visible_run(run_id)  # refused before any wait
    if wait_seconds > 0:
        return await svc.wait_run(run_id, wait_seconds)
    return record


@router.get("/{run_id}/events")
def run_events(
    run_id: str,
    after: int = Query(0, ge=0, le=SQLITE_MAX_INT),
    limit: int = Query(1000, ge=1, le=5000),
    svc: ProjectService = Depends(service_of),
) -> list[TraceEvent]:
    svc.visible_run(run_id)
    return svc.runs.events(run_id, after=after, limit=limit)


@router.get("/{run_id}/nodes/{node_id:path}")
def run_node(run_id: str, node_id: str, svc: ProjectService = Depends(service_of)) -> NodeView:
    svc.visible_run(run_id)
    events = svc.runs.node_events(run_id, node_id)
    if not events:
        raise NotFoundError(
            f"run {run_id} has no node {node_id!r}",
            code="NODE_NOT_FOUND",
            hint="node ids of called flows are written call_node/inner_node",
        )
    view = NodeView(run_id=run_id, node_id=node_id, status="running", events=events)
    for e in events:
        if e.kind == "node_start":
            view.inputs = e.data.get("inputs")
        elif e.kind == "node_end":
            view.status, view.output = "done", e.data.get("output")
        elif e.kind == "node_error":
            view.status, view.error = "failed", e.data
        elif e.kind == "human_wait" and view.status == "running":
            view.status = "waiting_human"
        elif e.kind in ("model_response", "model_error"):
            view.model_calls.append({"kind": e.kind, **e.data})
    return view


@router.post("/{run_id}/human/{node_id:path}")
async def answer_human(
    run_id: str, node_id: str, body: HumanAnswerBody = Body(...), svc: ProjectService = Depends(service_of)
) -> RunRecord:
    svc.visible_run(run_id)  # its answer would show the run: a held-out one is answered in Studio
    svc.answer_human(run_id, node_id, body.answer)
    return svc.runs.get(run_id)
