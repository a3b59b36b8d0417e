"""Studio: the web UI at /studio, its live streams (server-sent events) and the aggregated reads it needs.

Every read here is aggregated or paginated on the server, so a page costs the same with 10,000 attempts as
with 10: the series snapshot already sums per variant and caps its case rows at 50; attempts and runs come a
page at a time. A live page holds one event stream; the server pushes a new snapshot when something changed
(at most a few per second), never on a client's timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse

from aqven.engine.compile import FlowCompiler
from aqven.errors import AqvenError, NotFoundError
from aqven.project.local import simulate_enabled
from aqven.research.experiments.inputs import plan_manifest, series_manifest, without_cases
from aqven.research.findings.records import is_intact, read_findings, read_findings_md
from aqven.research.findings.verify import verified_findings
from aqven.research.holdout import (
    HELD_OUT_RUN_SQL,
    SEALED_ATTEMPT_SQL,
    SEALED_RUN_SQL,
    run_held_out,
    sealed_run_count,
    sealed_run_groups,
    sealed_side,
    shown_attempt_count,
    shown_curve,
)
from aqven.research.series.view import snapshot
from aqven.server import chat, studio_views
from aqven.server.deps import person_acting, service_of
from aqven.server.operations import project, research
from aqven.server.principals import PasskeyProof, answer_digest
from aqven.server.service import ProjectService
from aqven.store.approvals import recent_approvals
from aqven.store.runs import RUN_OUTCOME_SQL
from aqven.store.series_records import ENDED
from aqven.store.series_tally import finished_costs

router = APIRouter(tags=["studio"])

STUDIO_DIR = Path(__file__).parent / "studio"
ASSETS = {"app.css": "text/css; charset=utf-8"}
# Studio's ES modules, loaded by the browser without a build step: only the files that ship are served.
MODULES = frozenset(p.name for p in (STUDIO_DIR / "js").glob("*.js"))
JS_MEDIA = "text/javascript; charset=utf-8"  # a module script must come with a JavaScript type (nosniff)
NO_CACHE = {"Cache-Control": "no-cache"}

STREAM_MAX_S = 300.0  # a stream closes after this; the browser's EventSource reconnects by itself
STREAM_MIN_GAP_S = 0.25  # at most four pushes a second, however fast attempts finish
STREAM_REFRESH_S = 5.0  # a running series is re-sent this often even unchanged (its eta moves)
RUN_POLL_S = 0.3
CURVE_POINTS = 120
MAX_TRACE_EVENTS = 5000
MAX_PAGE = 1_000_000  # a larger page would overflow SQLite's OFFSET (a 500): refused as a 422 instead


# ---- the pages ----


@router.get("/studio", include_in_schema=False)
def studio_root() -> RedirectResponse:
    return RedirectResponse("/studio/")


@router.get("/studio/{name}", include_in_schema=False)
def studio_asset(name: str) -> Response:
    if name not in ASSETS:
        raise NotFoundError(f"no Studio file {name!r}", code="NOT_FOUND", hint="open /studio/")
    return FileResponse(STUDIO_DIR / name, media_type=ASSETS[name], headers=NO_CACHE)


@router.get("/studio/js/{name}", include_in_schema=False)
def studio_module(name: str) -> Response:
    if name not in MODULES:
        raise NotFoundError(f"no Studio module {name!r}", code="NOT_FOUND", hint="open /studio/")
    return FileResponse(STUDIO_DIR / "js" / name, media_type=JS_MEDIA, headers=NO_CACHE)


# ---- overview ----


@router.get("/api/studio/status")
def status(svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    """What every page's header needs: the project's name and whether simulated mode is on."""
    project = svc.project()
    return {"name": project.config.name, "package": project.package, "simulate": simulate_enabled(svc.root)}


@router.get("/api/studio/overview")
def overview(svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    """The project and counts that link into every page (`aqven check` is GET /api/check, slower, read apart)."""
    db = svc.db
    # The runs of a held-out series that still runs are counted by status as of its last coarse step.
    runs = {
        r["status"]: r["n"]
        for r in db.query(f"SELECT status, COUNT(*) AS n FROM runs WHERE NOT {SEALED_RUN_SQL} GROUP BY status")
    }
    for group in sealed_run_groups(db):
        if group["status"] is not None:  # a look's held-out runs before its first step have none to show
            runs[group["status"]] = runs.get(group["status"], 0) + int(group["n"])
    runs = {status: n for status, n in runs.items() if n}
    # What a reader takes "failed" for: the attempts' outcomes (a run can end "done" while a check failed). Sealed
    # attempts (a held-out series that still runs, a look's held-out ones) are left out: they are only counted.
    outcomes = {
        r["outcome"]: r["n"]
        for r in db.query(
            "SELECT outcome, COUNT(*) AS n FROM attempts WHERE status='done' AND outcome IS NOT NULL"
            f" AND NOT {SEALED_ATTEMPT_SQL} GROUP BY outcome"
        )
    }
    simulated_runs = db.query_one("SELECT COUNT(*) AS n FROM runs WHERE simulated=1")
    series = {r["status"]: r["n"] for r in db.query("SELECT status, COUNT(*) AS n FROM series GROUP BY status")}
    waiting = [
        {"id": r["id"], "flow_id": r["flow_id"], "series_id": r["series_id"]}
        for r in db.query("SELECT id, flow_id, series_id FROM runs WHERE status='waiting_human' LIMIT 20")
    ]
    paused = svc.series.list_series(limit=200)
    findings = read_findings(svc.root)
    return {
        "project": project.project_info(svc).model_dump(mode="json"),
        "simulate": simulate_enabled(svc.root),
        "attempts_by_outcome": outcomes,
        "runs": {
            "by_status": runs,
            "total": sum(runs.values()),
            "simulated": simulated_runs["n"] if simulated_runs else 0,
        },
        "series": {"by_status": series, "total": sum(series.values())},
        "awaiting_approval": [s for s in paused if s["status"] == "awaiting_approval"],
        "recent_series": paused[:8],
        "recent_approvals": recent_approvals(db, 8),  # who approved or stopped what, across series
        "waiting_human": waiting,
        "experiments": len(svc.workspace().experiments),
        "findings": len(findings),
        "chat": chat.describe(svc)["responder"],
    }


# ---- runs ----


RUN_COLUMNS = (
    "id, flow_id, status, created_at, started_at, ended_at, outcome, error_code, input_tokens, output_tokens,"
    " cost_usd, unpriced_calls, model_calls, simulated, series_id, case_name, dataset_id, side,"
    f" {RUN_OUTCOME_SQL} AS attempt_outcome"
)


@router.get("/api/studio/runs")
def runs_page(
    flow_id: str | None = None,
    status: str | None = None,
    series_id: str | None = None,
    case: str | None = None,
    source: str | None = Query(None, pattern="^(series|hand)$"),
    outcome: str | None = Query(None, pattern="^(pass|fail|model_failure|infra|ok)$"),
    page: int = Query(1, ge=1, le=MAX_PAGE),
    per_page: int = Query(50, ge=1, le=200),
    svc: ProjectService = Depends(service_of),
) -> dict[str, Any]:
    """Runs newest first, a page at a time, with the total and the values the filters offer."""
    clauses: list[str] = []
    params: list[Any] = []
    for col, val in (("flow_id", flow_id), ("status", status), ("series_id", series_id)):
        if val:
            clauses.append(f"{col}=?")
            params.append(val)
    if case:
        clauses.append("case_name LIKE ?")
        params.append(f"%{case}%")
    if outcome:
        clauses.append(f"{RUN_OUTCOME_SQL} = ?")
        params.append(outcome)
    if source == "series":
        clauses.append("series_id IS NOT NULL")
    elif source == "hand":
        clauses.append("series_id IS NULL")
    # Runs that ran on the held-out side are never listed one by one (their side is stored with them): they are
    # only counted, apart from the filters' total, so neither a page nor a search by case name tells one apart.
    # Those of a held-out series that still runs are counted as of its last coarse step (research/holdout.py).
    counted = [*clauses, HELD_OUT_RUN_SQL, f"NOT {SEALED_RUN_SQL}"]
    hidden_row = svc.db.query_one(f"SELECT COUNT(*) AS n FROM runs WHERE {' AND '.join(counted)}", tuple(params))
    hidden = hidden_row["n"] if hidden_row else 0
    if source != "hand":
        hidden += sealed_run_count(svc.db, series_id=series_id, flow_id=flow_id, status=status, outcome=outcome)
    clauses.append(f"NOT {HELD_OUT_RUN_SQL}")
    where = f"WHERE {' AND '.join(clauses)}"
    total_row = svc.db.query_one(f"SELECT COUNT(*) AS n FROM runs {where}", tuple(params))
    total = total_row["n"] if total_row else 0
    rows = svc.db.query(
        f"SELECT {RUN_COLUMNS} FROM runs {where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
        (*params, per_page, (page - 1) * per_page),
    )
    items = [dict(r) for r in rows]
    for r in items:
        r["simulated"] = bool(r["simulated"])
        r["held_out"] = False
    return {
        "items": items,
        "total": total,
        "page": page,
        "per_page": per_page,
        "pages": max(1, -(-total // per_page)),
        "held_out_hidden": 0 if case else hidden,  # a search by case name does not count them either
        "flows": sorted(svc.project().flows),
        "statuses": ["queued", "running", "waiting_human", "done", "failed"],
        "outcomes": ["pass", "fail", "model_failure", "infra", "ok"],
    }


def _parents(svc: ProjectService, flow_id: str) -> dict[str, str]:
    """Child id -> group id for the flow as written (alternative nodes keep their slot's id)."""
    out: dict[str, str] = {}
    try:
        flow = FlowCompiler(svc.project(), load_code=False).compile(flow_id)
    except AqvenError:
        return out
    if flow is None:
        return out

    def walk(nodes: Any, parent: str | None) -> None:
        for n in nodes:
            if parent:
                out[n.id] = parent
            if n.children:
                walk(n.children, n.id)

    walk(flow.nodes, None)
    return out


def build_trace(svc: ProjectService, run_id: str) -> dict[str, Any]:
    """A run's trace as a timeline of nodes: inputs, output, model calls with tokens and cost, errors."""
    record = svc.runs.get(run_id)
    events = svc.runs.events(run_id, limit=MAX_TRACE_EVENTS)
    parents = _parents(svc, record.flow_id)
    nodes: dict[str, dict[str, Any]] = {}
    run_events: list[dict[str, Any]] = []

    def node(path: str) -> dict[str, Any]:
        if path not in nodes:
            parent = path.rpartition("/")[0] if "/" in path else parents.get(path)
            nodes[path] = {
                "id": path,
                "parent": parent,
                "depth": 0,
                "kind": None,
                "status": "running",
                "start": None,
                "end": None,
                "duration_ms": None,
                "inputs": None,
                "output": None,
                "error": None,
                "calls": [],
                "retries": [],
                "human": None,
            }
        return nodes[path]

    for e in events:
        if e.node_id is None:
            run_events.append({"kind": e.kind, "ts": e.ts, "data": e.data})
            continue
        n = node(e.node_id)
        d = e.data
        if e.kind == "node_start":
            n["kind"] = d.get("kind", n["kind"])
            n["start"] = n["start"] or e.ts
            if "inputs" in d:
                n["inputs"] = d["inputs"]
        elif e.kind == "node_end":
            n.update(status="done", end=e.ts, output=d.get("output"), duration_ms=d.get("duration_ms"))
        elif e.kind == "node_error":
            n.update(status="failed", end=e.ts, error={"code": d.get("code"), "message": d.get("message")})
        elif e.kind == "model_request":
            n["calls"].append({"request": d, "ts": e.ts, "response": None, "error": None, "output_retries": []})
        elif e.kind in ("model_response", "model_error"):
            if not n["calls"]:
                n["calls"].append({"request": {}, "ts": e.ts, "response": None, "error": None, "output_retries": []})
            n["calls"][-1]["response" if e.kind == "model_response" else "error"] = d
            n["calls"][-1]["end"] = e.ts
        elif e.kind == "output_retry":
            if n["calls"]:
                n["calls"][-1]["output_retries"].append(d)
        elif e.kind == "retry":
            n["retries"].append(d)
        elif e.kind == "human_wait":
            n["status"] = "waiting_human"
            n["human"] = {
                "question": d.get("question"),
                "inputs": d.get("inputs"),
                "output_schema": d.get("output_schema"),
            }
            n["start"] = n["start"] or e.ts
        elif e.kind == "human_answer":
            by = d.get("by") if isinstance(d.get("by"), dict) else None  # who answered, as the server proved it
            n["human"] = {
                **(n["human"] or {}),
                "answer": d.get("answer"),
                **({"by": {k: by[k] for k in ("channel", "confirmed", "person") if k in by}} if by else {}),
            }
        else:
            n.setdefault("other", []).append({"kind": e.kind, "data": d})
    for n in nodes.values():
        depth, p = 0, n["parent"]
        while p and depth < 20:
            depth += 1
            p = nodes[p]["parent"] if p in nodes else None
        n["depth"] = depth
        tokens_in = sum(int((c.get("response") or c.get("error") or {}).get("input_tokens") or 0) for c in n["calls"])
        tokens_out = sum(int((c.get("response") or c.get("error") or {}).get("output_tokens") or 0) for c in n["calls"])
        n["tokens"] = {"input": tokens_in, "output": tokens_out}
        if record.status in ("done", "failed") and n["status"] == "running":
            n["status"] = "not finished"
    source: dict[str, Any] = {"kind": "hand"}
    if record.series_id:
        source = {
            "kind": "series",
            "series_id": record.series_id,
            "experiment_id": record.request.experiment_id,
            "variant_id": record.request.variant_id,
        }
        side = svc.db.query_one("SELECT side FROM attempts WHERE series_id=? AND run_id=?", (record.series_id, run_id))
        source["side"] = side["side"] if side else None
    waiting = None
    if record.status == "waiting_human" and record.waiting_node in nodes:
        waiting = {"node_id": record.waiting_node, **(nodes[record.waiting_node]["human"] or {})}
    return {
        "run": record.model_dump(mode="json"),
        "source": source,
        "nodes": list(nodes.values()),
        "run_events": run_events,
        "events": len(events),
        "events_capped": len(events) >= MAX_TRACE_EVENTS,
        "last_seq": events[-1].seq if events else 0,
        "waiting": waiting,
    }


@router.get("/api/studio/runs/{run_id}/trace")
async def run_trace(run_id: str, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    svc.visible_run(run_id)  # HOLDOUT_HIDDEN for a run of a held-out case
    return await asyncio.to_thread(build_trace, svc, run_id)


def _sse(event: str, data: Any) -> dict[str, str]:
    return {"event": event, "data": json.dumps(data, default=str, separators=(",", ":"))}


@router.get("/api/runs/{run_id}/stream")
async def run_stream(run_id: str, request: Request, svc: ProjectService = Depends(service_of)) -> EventSourceResponse:
    """Server-sent events: `trace` (the whole trace) each time the run moves on, then `end` once it stops."""
    svc.visible_run(run_id)  # HOLDOUT_HIDDEN for a run of a held-out case

    async def events() -> AsyncIterator[dict[str, str]]:
        started = time.monotonic()
        last: tuple[Any, ...] | None = None
        while time.monotonic() - started < STREAM_MAX_S:
            if await request.is_disconnected():
                return
            row = svc.db.query_one(
                "SELECT r.status, r.cost_usd, (SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id=r.id) AS seq"
                " FROM runs r WHERE r.id=?",
                (run_id,),
            )
            version = tuple(row) if row else None
            if version != last:
                last = version
                yield _sse("trace", await asyncio.to_thread(build_trace, svc, run_id))
                if row and row["status"] in ("done", "failed"):
                    yield _sse("end", {"status": row["status"]})
                    return
            await asyncio.sleep(RUN_POLL_S)

    return EventSourceResponse(events(), ping=15, headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


class HumanAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: Any
    passkey: PasskeyProof | None = None


@router.post("/api/studio/runs/{run_id}/human/{node_id:path}")
async def studio_answer_human(
    run_id: str, node_id: str, body: HumanAnswer, request: Request, svc: ProjectService = Depends(service_of)
) -> dict[str, Any]:
    """Answer a waiting human node (as POST /api/runs/{id}/human/{node}), on the server's event loop: the run
    resumes as an asyncio task, which a worker thread cannot start. A person's act, with its proof."""
    who = person_acting(request, ("human_answer", f"{run_id}/{node_id}", answer_digest(body.answer)), body.passkey)
    svc.answer_human(run_id, node_id, body.answer, who)
    record = svc.runs.get(run_id)
    if run_held_out(record.side, record.case_name):  # answered, but its case is not shown back
        return {"id": record.id, "status": record.status, "held_out": True}
    return record.model_dump(mode="json")


# ---- series ----


def _series_version(svc: ProjectService, series_id: str) -> tuple[Any, ...]:
    s = svc.db.query_one(
        "SELECT status, cap_usd, pause, verdict IS NOT NULL AS decided, finding, stop_reason FROM series WHERE id=?",
        (series_id,),
    )
    if s is None:
        svc.series.store.get(series_id)  # raises SERIES_NOT_FOUND
    a = svc.db.query_one(
        "SELECT COUNT(*) AS n, SUM(CASE WHEN status='done' THEN 1 ELSE 0 END) AS d,"
        " SUM(CASE WHEN status='running' THEN 1 ELSE 0 END) AS r, MAX(ended_at) AS e"
        " FROM attempts WHERE series_id=?",
        (series_id,),
    )
    return (*tuple(s or ()), *tuple(a or ()))


def spend_curve(done: list[tuple[str, str | None]], created_at: str) -> list[dict[str, Any]]:
    """Cumulative spend of the finished attempts (ended_at, cost) in the order they finished, at most CURVE_POINTS
    points: seconds since the start, and dollars (a string, like all money)."""
    t0 = datetime.fromisoformat(created_at)
    total = Decimal(0)
    points: list[dict[str, Any]] = []
    step = max(1, len(done) // CURVE_POINTS)
    for i, (ended, cost) in enumerate(done):
        total += Decimal(cost or "0")
        if i % step == 0 or i == len(done) - 1:
            seconds = (datetime.fromisoformat(str(ended)) - t0).total_seconds()
            points.append({"t": round(seconds, 3), "usd": str(total)})
    return points


def _experiment_brief(svc: ProjectService, experiment_id: str | None) -> dict[str, Any] | None:
    if experiment_id is None:
        return None
    try:
        e = research.experiment(svc, experiment_id).model_dump(mode="json")
    except AqvenError:
        return None
    return {k: e[k] for k in ("id", "failure_mode", "description", "caption", "variants", "question", "subject")}


class _SeriesCache:
    """The last payload of each series and the version it was built for: many viewers, one computation."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[tuple[Any, ...], float, dict[str, Any]]] = {}
        self.locks: dict[str, asyncio.Lock] = {}

    async def get(self, svc: ProjectService, series_id: str, version: tuple[Any, ...]) -> dict[str, Any]:
        lock = self.locks.setdefault(series_id, asyncio.Lock())
        async with lock:
            hit = self.items.get(series_id)
            now = time.monotonic()
            if hit is not None and hit[0] == version and (version[0] in ENDED or now - hit[1] < STREAM_REFRESH_S):
                return hit[2]
            payload = await asyncio.to_thread(series_payload, svc, series_id)
            if len(self.items) > 64:
                old = next(iter(self.items))
                self.items.pop(old)
                self.locks.pop(old, None)
            self.items[series_id] = (version, now, payload)
            return payload


def series_payload(svc: ProjectService, series_id: str) -> dict[str, Any]:
    """The series page in one answer: the snapshot (dev cases, failing first, at most 50), spend over time, and
    the experiment's factor caption and variant values."""
    s = svc.series.store.get(series_id)
    out = snapshot(s, svc.series.store, svc.runs, include_cases=True)
    # A running held-out series: one point per coarse step (a point per attempt would price each one).
    curve = shown_curve(s)
    out["spend_curve"] = curve if curve is not None else spend_curve(finished_costs(svc.db, series_id), s.created_at)
    out["experiment"] = _experiment_brief(svc, s.experiment_id)
    out["stop_reason"] = s.stop_reason
    out["project_cap"] = svc.series.project_cap_fields()  # whether aqven.yaml asks for more than was confirmed
    return out


def _cache(request: Request) -> _SeriesCache:
    cache = getattr(request.app.state, "studio_series_cache", None)
    if cache is None:
        cache = _SeriesCache()
        request.app.state.studio_series_cache = cache
    return cache


@router.get("/api/studio/series/{series_id}")
async def studio_series(series_id: str, request: Request, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    version = await asyncio.to_thread(_series_version, svc, series_id)
    return await _cache(request).get(svc, series_id, version)


@router.get("/api/series/{series_id}/stream")
async def series_stream(
    series_id: str, request: Request, svc: ProjectService = Depends(service_of)
) -> EventSourceResponse:
    """Server-sent events: `snapshot` whenever the series changed (at most 4 a second), `end` once it ended."""
    svc.series.store.get(series_id)
    cache = _cache(request)
    changed = svc.series.runner.changed

    async def events() -> AsyncIterator[dict[str, str]]:
        started = time.monotonic()
        last: tuple[Any, ...] | None = None
        sent = 0.0
        while time.monotonic() - started < STREAM_MAX_S:
            if await request.is_disconnected():
                return
            version = await asyncio.to_thread(_series_version, svc, series_id)
            now = time.monotonic()
            if version != last or (version[0] == "running" and now - sent >= STREAM_REFRESH_S):
                payload = await cache.get(svc, series_id, version)
                yield _sse("snapshot", payload)
                last, sent = version, now
                if payload["status"] in ENDED:
                    yield _sse("end", {"status": payload["status"]})
                    return
                await asyncio.sleep(STREAM_MIN_GAP_S)
            async with changed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), 1.0)

    return EventSourceResponse(events(), ping=15, headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


@router.get("/api/studio/series/{series_id}/attempts")
def series_attempts(
    series_id: str,
    variant: str | None = None,
    outcome: str | None = None,
    status: str | None = None,
    page: int = Query(1, ge=1, le=MAX_PAGE),
    per_page: int = Query(50, ge=1, le=200),
    svc: ProjectService = Depends(service_of),
) -> dict[str, Any]:
    """A series' working (dev) attempts a page at a time. Held-out attempts are never listed one by one, not
    even without their case: an attempt's index, outcome or tokens would tell its case apart. They are only
    counted (`held_out`: how many match the filters), and the series page shows their aggregated table."""
    s = svc.series.store.get(series_id)
    clauses, params = ["series_id=?"], [series_id]
    for col, val in (("variant_id", variant), ("outcome", outcome), ("status", status)):
        if val:
            clauses.append(f"{col}=?")
            params.append(val)
    where = " AND ".join(clauses)
    if sealed_side(s) is not None:  # a held-out series that still runs, a look's held-out attempts: as of a step
        held = shown_attempt_count(s, variant_id=variant, outcome=outcome, status=status)
    else:
        held_row = svc.db.query_one(f"SELECT COUNT(*) AS n FROM attempts WHERE {where} AND side!='dev'", tuple(params))
        held = held_row["n"] if held_row else 0
    where += " AND side='dev'"
    total_row = svc.db.query_one(f"SELECT COUNT(*) AS n FROM attempts WHERE {where}", tuple(params))
    total = total_row["n"] if total_row else 0
    rows = svc.db.query(
        "SELECT idx, case_name, side, variant_id, rep, status, outcome, error_code, error_message, cost_usd, run_id,"
        f" started_at, ended_at, reruns FROM attempts WHERE {where} ORDER BY idx LIMIT ? OFFSET ?",
        (*params, per_page, (page - 1) * per_page),
    )
    return {
        "items": [dict(r) for r in rows],
        "total": total,
        "held_out": held,
        "page": page,
        "per_page": per_page,
        "pages": max(1, -(-total // per_page)),
    }


router.include_router(studio_views.router)  # an attempt's checks, the case grid, a diff, distributions


# ---- findings ----


def freshness(svc: ProjectService, data: dict[str, Any]) -> dict[str, Any]:
    """Whether a finding's input hashes still match what its series ran on, as the project has it now: the
    files of its subject, variants, agents and checks, and (when this machine holds the series) its cases."""
    files: dict[str, str] = ((data.get("inputs") or {}).get("files")) or {}
    scope = data.get("scope") or {}
    ws = svc.workspace()
    try:
        series = svc.series.store.get(str(data.get("series_id")))
    except AqvenError:
        series = None
    try:
        if series is not None:
            current = plan_manifest(ws, series.plan, series.experiment_id, simulated=series.simulated)
        else:  # a clone without the series: its cases cannot be named here, the files still can
            current = series_manifest(
                ws,
                flow_id=str((scope.get("subject") or {}).get("flow")),
                variants=[str(v.get("id")) for v in data.get("variants") or [] if isinstance(v, dict)],
                experiment_id=data.get("experiment_id"),
                simulated=bool(scope.get("simulated")),
            )
            files = without_cases(files)
    except (AqvenError, OSError) as exc:
        return {"matches": False, "error": str(exc), "changed": [], "added": [], "removed": []}
    changed = sorted(f for f in files if f in current and current[f] != files[f])
    removed = sorted(f for f in files if f not in current)
    added = sorted(f for f in current if f not in files)
    return {
        "matches": not (changed or removed or added),
        "changed": changed,
        "added": added,
        "removed": removed,
        "files": len(files),
    }


@router.get("/api/studio/findings")
def studio_findings(svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    """FINDINGS.md, and each finding file with its cells and whether its input hashes still match."""
    root = svc.root
    items = []
    for path, data, result in verified_findings(root, svc.db):
        rel = str(path.relative_to(root))
        if not data:
            items.append({"file": rel, "readable": False, "intact": False, "verifies": False})
            continue
        items.append(
            {
                "file": rel,
                "readable": True,
                "intact": is_intact(data),
                "verifies": result.verifies,
                "problem": result.problem,
                "code": None if result.ok else result.code,
                "unchecked": result.unchecked,
                "judge": data.get("judge"),
                "reads": data.get("reads"),
                **{
                    k: data.get(k)
                    for k in (
                        "experiment_id",
                        "series_id",
                        "failure_mode",
                        "description",
                        "question",
                        "verdict",
                        "cells",
                        "comparisons",
                        "variants",
                        "varies",
                        "scope",
                        "spend",
                        "infra_errors",
                    )
                },
                "inputs_hash": (data.get("inputs") or {}).get("hash"),
                "freshness": freshness(svc, data),
            }
        )
    return {"findings": items, "findings_md": read_findings_md(root) or ""}


@router.get("/api/studio/findings/{experiment_id}/{series_id}/freshness")
def finding_freshness(experiment_id: str, series_id: str, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    """Compare one finding's inputs.files hashes with the current files."""
    for path, data in read_findings(svc.root):
        if data and path.parent.parent.name == experiment_id and path.stem == series_id:
            return {"file": str(path.relative_to(svc.root)), "intact": is_intact(data), **freshness(svc, data)}
    raise NotFoundError(
        f"no finding {experiment_id}/{series_id}",
        code="FINDING_NOT_FOUND",
        hint="findings are listed by GET /api/studio/findings",
    )


# ---- chat ----


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str = Field(pattern="^(user|assistant)$")
    content: str = Field(max_length=20_000)


class ChatBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: list[ChatMessage] = Field(min_length=1, max_length=100)


@router.get("/api/chat")
def chat_info(svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    """Who answers the chat, the files it read first, and its tools (no approval among them)."""
    return chat.describe(svc)


@router.post("/api/chat")
async def chat_post(body: ChatBody, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    return await chat.reply(svc, [m.model_dump() for m in body.messages])
