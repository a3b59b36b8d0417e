"""Runs: start, list, read, their trace events and one node, and a person's answer to a human node.

Held-out cases are never shown one by one (`aqven.research.holdout`): a run of a held-out case is neither
started nor listed (only counted), and reading one, its events or a node is refused with `HOLDOUT_HIDDEN`.
"""

from __future__ import annotations

from typing import Any

from aqven.errors import NotFoundError
from aqven.research.holdout import HELD_OUT_RUN_SQL, SEALED_RUN_SQL, sealed_run_count
from aqven.server.operations.models import NodeOut, RunsOut
from aqven.server.service import ProjectService
from aqven.store.approvals import Approver
from aqven.store.records import RunRecord, TraceEvent


async def start(svc: ProjectService, body: dict[str, Any], wait_seconds: float = 0) -> RunRecord:
    """Start a run (on the event loop: it runs as an asyncio task); with `wait_seconds`, hold until it ends."""
    run_id = svc.start_run(svc.build_request(body))
    if wait_seconds > 0:
        return await svc.wait_run(run_id, wait_seconds)
    return svc.runs.get(run_id)


def list_runs(
    svc: ProjectService,
    *,
    flow_id: str | None = None,
    status: str | None = None,
    series_id: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> RunsOut:
    """Runs newest first, without the runs that ran on the held-out side (only counted; those of a held-out series
    that still runs as of its last coarse step, so no count by status tells how one attempt ended)."""
    runs, hidden = svc.runs.list_runs_except(
        HELD_OUT_RUN_SQL,
        counted_sql=f"({HELD_OUT_RUN_SQL} AND NOT {SEALED_RUN_SQL})",
        flow_id=flow_id,
        status=status,
        series_id=series_id,
        limit=limit,
        offset=offset,
    )
    hidden += sealed_run_count(svc.db, series_id=series_id, flow_id=flow_id, status=status)
    return RunsOut(runs=runs, hidden_holdout_runs=hidden)


async def get(svc: ProjectService, run_id: str, wait_seconds: float = 0) -> RunRecord:
    record = svc.visible_run(run_id)  # refused before any wait
    if wait_seconds > 0:
        return await svc.wait_run(run_id, wait_seconds)
    return record


def events(svc: ProjectService, run_id: str, *, after: int = 0, limit: int = 1000) -> list[TraceEvent]:
    svc.visible_run(run_id)
    return svc.runs.events(run_id, after=after, limit=limit)


def node(svc: ProjectService, run_id: str, node_id: str) -> NodeOut:
    """One node of a run: its status, inputs, output or error, its model calls and its events."""
    svc.visible_run(run_id)
    trace = svc.runs.node_events(run_id, node_id)
    if not trace:
        raise NotFoundError(
            f"run {run_id} has no node {node_id!r}",
            code="NODE_NOT_FOUND",
            hint="node ids of called flows are written call_node/inner_node",
        )
    status, inputs, output, error = "running", None, None, None
    calls: list[dict[str, Any]] = []
    for e in trace:
        if e.kind == "node_start":
            inputs = e.data.get("inputs")
        elif e.kind == "node_end":
            status, output = "done", e.data.get("output")
        elif e.kind == "node_error":
            status, error = "failed", e.data
        elif e.kind == "human_wait" and status == "running":
            status = "waiting_human"
        elif e.kind in ("model_response", "model_error"):
            calls.append({"kind": e.kind, **e.data})
    return NodeOut(
        run_id=run_id,
        node_id=node_id,
        status=status,
        inputs=inputs,
        output=output,
        error=error,
        model_calls=calls,
        events=trace,
    )


def answer_human(svc: ProjectService, run_id: str, node_id: str, answer: Any, who: Approver) -> RunRecord:
    """A person's answer to a waiting human node (on the event loop: the run resumes as an asyncio task)."""
    svc.visible_run(run_id)  # its answer would show the run: a held-out one is answered in Studio
    svc.answer_human(run_id, node_id, answer, who)
    return svc.runs.get(run_id)
