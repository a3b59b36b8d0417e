"""The MCP tools of a project, with the official `mcp` SDK (`MCPServer`).

Served two ways: over stdio by `aqven mcp` (a client of the project server's REST API, `HttpBackend`) and over
streamable HTTP at `/mcp` of the project server itself (`ServiceBackend`, calling `ProjectService` directly).
The tools, their JSON schemas and their rules are the same on both.

Rules this layer enforces for the agent on the other end:

* Held-out cases never reach the agent one by one. `series_get` lists working (dev) cases only; the run tools
  refuse a run of a held-out case with `HOLDOUT_HIDDEN` (its case name, inputs, outputs and trace stay on the
  server); `run_start` refuses to run one; `NOT_RUNNABLE` problems name a held-out case only by a label.
  `aqven.research.holdout` decides all of it, for the REST API (which the tools call) and here alike.
* No tool approves, continues or stops a paused series: a person does that in Studio or over REST.
* Errors are MCP tool errors (`isError`) whose text is ``{"error": {"code", "message", "hint", "details"}}``
  with the REST API's stable codes; arguments that break a tool's input schema give `VALIDATION_ERROR`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError
from pydantic_core import to_jsonable_python

from aqven import __version__
from aqven.errors import AqvenError
from aqven.research.experiments.schema import MAX_REPEATS
from aqven.research.holdout import check_run, series_error_view
from aqven.server.mcp_backend import Backend, HttpBackend, ServiceBackend
from aqven.server.mcp_models import (
    CheckOut,
    DatasetOut,
    DatasetsOut,
    ExperimentOut,
    ExperimentsOut,
    FindingsMdOut,
    FindingsOut,
    FlowOut,
    FlowsOut,
    NodeOut,
    RunEventsOut,
    RunRecord,
    SeriesListOut,
    SeriesOut,
    SeriesStartOut,
)
from aqven.server.security import HOST
from aqven.store.series_records import LookSpec

if TYPE_CHECKING:
    from fastapi import FastAPI

    from aqven.server.service import ProjectService

log = logging.getLogger("aqven.mcp")

MAX_WAIT_S = 50.0

INSTRUCTIONS = """\
AQVEN makes LLM flows reliable in rounds. Before you propose a change, read what the project already knows:
read_findings_md (FINDINGS.md). Then, round after round: aqven_check after every edit; series_start with a look
on a few named cases to see what a flow does; write the question as an experiment file
(experiments/<id>/experiment.yaml) and explore it on working cases (on: dev) as often as you need; wait with
series_get (wait_seconds up to 50) until the status settles; read the failing cases with include_cases and open
a run with run_get, run_events and run_get_node; confirm once on held-out cases (on: holdout) and quote
verdict.text as it is. Every attempt calls the models and costs money. No tool approves a paused series: tell
the user what it spent; they continue it in Studio. Held-out cases are never shown one by one.
"""


# ---- results and errors ---------------------------------------------------------------------------------------


def ok(data: Any) -> CallToolResult:
    structured = to_jsonable_python(data)
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(structured, ensure_ascii=False, separators=(",", ":")))],
        structured_content=structured,
    )


def error_result(error: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(to_jsonable_python({"error": error}), ensure_ascii=False))],
        is_error=True,
    )


def validation_error(exc: ValidationError) -> dict[str, Any]:
    problems = [{"loc": [str(p) for p in e.get("loc", ())], "message": e.get("msg", "")} for e in exc.errors()]
    first = problems[0] if problems else {"loc": [], "message": "invalid arguments"}
    where = ".".join(first["loc"])
    return {
        "code": "VALIDATION_ERROR",
        "message": f"{where}: {first['message']}" if where else str(first["message"]),
        "hint": "see the tool's input schema",
        "details": {"problems": problems},
    }


class AqvenTool(Tool):
    """A tool whose failures come back as tool errors carrying AQVEN's stable codes."""

    async def run(self, arguments: dict[str, Any], context: Context[Any, Any], convert_result: bool = False) -> Any:
        known = set(self.parameters.get("properties", {}))
        unknown = sorted(set(arguments) - known)
        if unknown:
            return error_result(
                {
                    "code": "VALIDATION_ERROR",
                    "message": f"unknown argument(s) of {self.name}: {', '.join(unknown)}",
                    "hint": f"arguments: {', '.join(sorted(known)) or 'none'}",
                    "details": {"problems": [{"loc": [u], "message": "unknown argument"} for u in unknown]},
                }
            )
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, AqvenError):
                return error_result(cause.to_dict())
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                return error_result(validation_error(cause))
            log.error("tool %s failed", self.name, exc_info=cause or exc)
            return error_result(
                {
                    "code": "INTERNAL_ERROR",
                    "message": f"{self.name} failed unexpectedly ({type(cause or exc).__name__})",
                    "hint": "see the project server's log (.aqven/server.log); the request may be retried",
                }
            )


# ---- the tools ------------------------------------------------------------------------------------------------


class AqvenTools:
    """The tools over one backend. Every method raises `AqvenError`; `AqvenTool` turns it into a tool error."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    # -- held-out guard --

    async def _visible_run(self, run_id: str) -> dict[str, Any]:
        """The run, when it may be shown (the backend refuses a held-out one with HOLDOUT_HIDDEN; so does this)."""
        record = await self.backend.run_get(run_id, 0)
        check_run(run_id, record.get("side"), record.get("case_name"))  # the side it ran on
        return record

    async def _series_view(self, state: dict[str, Any]) -> dict[str, Any]:
        """A snapshot as the agent sees it: dev case rows only, no handle on a held-out attempt's run."""
        error = state.get("error")
        shown_error = series_error_view(error)
        if shown_error is not error:
            state = {**state, "error": shown_error}
        rows = state.get("cases")
        if isinstance(rows, list) and rows:
            shown = [r for r in rows if isinstance(r, dict) and r.get("side") == "dev"]  # the side each ran on
            if len(shown) != len(rows):
                hidden = int(state.get("hidden_cases") or 0) + len(rows) - len(shown)
                state = {**state, "cases": shown, "hidden_cases": hidden}
        return state

    # -- the project --

    async def aqven_check(self) -> Annotated[CallToolResult, CheckOut]:
        """Validate the project's files, like `aqven check`: flows, agents, datasets, checks, and every
        experiment (its subject and range, the factor in varies and every variant's values, each variant
        assembled and compiled, the dataset and tag filter, the checks, metrics and validated_by). Run it after
        every edit and before series_start: a series refuses to start on a project with errors (NOT_RUNNABLE)."""
        return ok(await self.backend.check())

    async def list_flows(self) -> Annotated[CallToolResult, FlowsOut]:
        """The project's flows, each with its top-level node ids in order (the values start_node and end_node
        of a look take)."""
        return ok({"flows": await self.backend.list_flows()})

    async def get_flow(
        self, flow_id: Annotated[str, Field(description="a flow id from list_flows")]
    ) -> Annotated[CallToolResult, FlowOut]:
        """One flow compiled: its input and output types and its nodes (children of groups included), with the
        node ids run_get_node takes."""
        return ok(await self.backend.get_flow(flow_id))

    async def list_datasets(self) -> Annotated[CallToolResult, DatasetsOut]:
        """The project's datasets with their counts of cases: working (dev) and held-out. Held-out cases are
        only counted."""
        return ok({"datasets": await self.backend.list_datasets()})

    async def get_dataset(
        self, dataset_id: Annotated[str, Field(description="a dataset id from list_datasets")]
    ) -> Annotated[CallToolResult, DatasetOut]:
        """A dataset's working (dev) cases one by one, with their inputs and expected outputs; held-out cases
        are only counted (hidden_cases)."""
        return ok(await self.backend.get_dataset(dataset_id))

    async def list_experiments(self) -> Annotated[CallToolResult, ExperimentsOut]:
        """The experiments of the project (experiments/<id>/experiment.yaml): the question, the factor that
        varies and its variants, the dataset, the checks. No tool writes an experiment: it is a file."""
        return ok({"experiments": await self.backend.list_experiments()})

    async def get_experiment(
        self, experiment_id: Annotated[str, Field(description="an experiment id from list_experiments")]
    ) -> Annotated[CallToolResult, ExperimentOut]:
        """One experiment, with the series that ran it (newest first)."""
        return ok(await self.backend.get_experiment(experiment_id))

    async def list_findings(self) -> Annotated[CallToolResult, FindingsOut]:
        """Every finding file (experiments/<id>/findings/<series_id>.yaml): its verdict and sentence, and
        whether it is intact."""
        data = await self.backend.findings()
        return ok({"findings": data.get("findings", [])})

    async def read_findings_md(self) -> Annotated[CallToolResult, FindingsMdOut]:
        """FINDINGS.md: what the project knows, one section per failure mode. Read it before you propose a
        change. It is generated from the finding files; never edit it."""
        data = await self.backend.findings()
        text = data.get("findings_md") or ""
        return ok({"path": "FINDINGS.md", "exists": bool(text), "text": text})

    # -- series --

    async def series_list(
        self,
        experiment_id: Annotated[str | None, Field(description="only the series of this experiment")] = None,
        limit: Annotated[int, Field(ge=1, le=500, description="at most this many, newest first")] = 20,
    ) -> Annotated[CallToolResult, SeriesListOut]:
        """The series of the project, newest first, with their status and verdict."""
        return ok({"series": await self.backend.series_list(experiment_id, limit)})

    async def series_start(
        self,
        experiment_id: Annotated[
            str | None, Field(description="the experiment to run (experiments/<id>/experiment.yaml)")
        ] = None,
        look: Annotated[
            LookSpec | None,
            Field(
                description="instead of an experiment: run a flow once on each named case (up to 500), no "
                "verdict, no finding; start_node and end_node narrow it to a range of top-level nodes"
            ),
        ] = None,
        on: Annotated[
            Literal["dev", "holdout"],
            Field(description="dev: working cases, to explore (a signal at most); holdout: once, to decide"),
        ] = "dev",
        cases: Annotated[int | None, Field(ge=1, description="the first N cases of that half")] = None,
        repeats: Annotated[
            int | None, Field(ge=1, le=MAX_REPEATS, description="runs per case and variant (default: the file's)")
        ] = None,
        cap_usd: Annotated[
            str | float | None,
            Field(
                description='the series\' own spend cap in dollars, e.g. "2.00" (default: the project cap); '
                "above the project cap the series waits for a person before anything runs"
            ),
        ] = None,
        client_op_id: Annotated[
            str | None,
            Field(min_length=1, max_length=200, description="idempotency key: the same key returns the same series"),
        ] = None,
        simulate: Annotated[
            bool, Field(description="answer with the agents' simulators instead of the models (no cost)")
        ] = False,
    ) -> Annotated[CallToolResult, SeriesStartOut]:
        """Start a series: exactly one of experiment_id or look. It returns at once with the series summary
        (status running, or awaiting_approval when cap_usd is above the project cap) and the launch plan
        (attempts, expected half-width at the verdict's level, recommended cases with advice to pass on in
        recommended.text, planning: "defaults" or "from series ser_…", power, zero_failure_floor, cap; no price:
        every attempt calls the models and is paid as it finishes). A project with errors, or a case that cannot
        run for a variant, fails with NOT_RUNNABLE (one problem per case and variant) before any model call.
        Follow it with series_get."""
        body: dict[str, Any] = {"on": on, "simulate": simulate}
        if experiment_id is not None:
            body["experiment_id"] = experiment_id
        if look is not None:
            body["look"] = look.model_dump(mode="json")
        if cases is not None:
            body["cases"] = cases
        if repeats is not None:
            body["repeats"] = repeats
        if cap_usd is not None:
            body["cap_usd"] = cap_usd if isinstance(cap_usd, str) else format(cap_usd, "f")
        if client_op_id is not None:
            body["client_op_id"] = client_op_id
        if (experiment_id is None) == (look is None):
            raise AqvenError(
                "give exactly one of experiment_id or look",
                code="VALIDATION_ERROR",
                hint='{"experiment_id": "..."} or {"look": {"flow_id", "dataset_id", "case_names"}}',
                http_status=422,
            )
        return ok(await self.backend.series_start(body))  # NOT_RUNNABLE names held-out cases by a label only

    async def series_get(
        self,
        series_id: Annotated[str, Field(description="from series_start or series_list")],
        wait_seconds: Annotated[
            float,
            Field(
                ge=0,
                le=MAX_WAIT_S,
                description="hold the answer until the series is done, cancelled, failed, awaiting_approval or "
                "waiting_human, or until this many seconds passed",
            ),
        ] = 0,
        include_cases: Annotated[
            bool,
            Field(
                description="add per-case rows of working (dev) cases: failing first, at most 50, the rest "
                "counted in hidden_cases; held-out cases are never listed"
            ),
        ] = False,
    ) -> Annotated[CallToolResult, SeriesOut]:
        """A series now: status, progress, spend against the cap (spend.lower_bound: some attempts ran on a
        model without a price, so spend.usd is a lower bound), eta (estimating, running with remaining_seconds,
        paused; null once it ended), the per-variant matrix with 95% intervals, the verdict (provisional while
        it runs; once done, quote verdict.text as it is) and, when failed, the first infrastructure error. Call
        it again until the status settles."""
        state = await self.backend.series_get(series_id, min(max(wait_seconds, 0.0), MAX_WAIT_S), include_cases)
        return ok(await self._series_view(state))

    async def series_cancel(
        self,
        series_id: Annotated[str, Field(description="the series to cancel")],
        reason: Annotated[str | None, Field(max_length=500, description="why, for the record")] = None,
    ) -> Annotated[CallToolResult, SeriesOut]:
        """Cancel a series: queued attempts never start, model calls already running finish and are paid for,
        the verdict is invalid (cancelled) and no finding is written. A series that already stopped fails with
        SERIES_STATE_CONFLICT."""
        return ok(await self._series_view(await self.backend.series_cancel(series_id, reason)))

    # -- runs --

    async def run_start(
        self,
        flow_id: Annotated[str, Field(description="the flow to run")],
        case: Annotated[
            str | None, Field(description="a working (dev) case to run on; its input, context and node_outputs")
        ] = None,
        dataset_id: Annotated[str | None, Field(description="the dataset of case, when names repeat")] = None,
        input: Annotated[Any, Field(description="the flow's input, instead of a case")] = None,
        context: Annotated[dict[str, Any] | None, Field(description="with input: the run's context")] = None,
        node_outputs: Annotated[
            dict[str, Any] | None, Field(description="with input: outputs of the nodes above from_node")
        ] = None,
        from_node: Annotated[str | None, Field(description="first top-level node to run")] = None,
        to_node: Annotated[str | None, Field(description="last top-level node to run")] = None,
        simulate: Annotated[bool, Field(description="answer with the agents' simulators (no cost)")] = False,
        seed: Annotated[int | None, Field(description="seed for the simulators")] = None,
        wait_seconds: Annotated[
            float, Field(ge=0, le=MAX_WAIT_S, description="hold the answer until the run ends, up to this long")
        ] = 0,
    ) -> Annotated[CallToolResult, RunRecord]:
        """Start one run of a flow on a case or an input (a range with from_node/to_node). It calls the models
        (unless simulate) and costs money. A held-out case is refused with HOLDOUT_HIDDEN: run it inside a
        series, whose numbers you read with series_get."""
        body: dict[str, Any] = {"flow_id": flow_id, "simulate": simulate}
        for key, value in (
            ("case", case),
            ("dataset_id", dataset_id),
            ("input", input),
            ("context", context),
            ("node_outputs", node_outputs),
            ("from_node", from_node),
            ("to_node", to_node),
            ("seed", seed),
        ):
            if value is not None:
                body[key] = value
        return ok(await self.backend.run_start(body, wait_seconds))

    async def run_get(
        self,
        run_id: Annotated[str, Field(description="a run id, e.g. from a case row's attempts")],
        wait_seconds: Annotated[
            float, Field(ge=0, le=MAX_WAIT_S, description="hold the answer until the run ends, up to this long")
        ] = 0,
    ) -> Annotated[CallToolResult, RunRecord]:
        """One run: status, output, error (error.node_id is the node that failed), tokens, cost, the case it
        ran. Runs of held-out cases are refused with HOLDOUT_HIDDEN."""
        record = await self._visible_run(run_id)
        if wait_seconds > 0:
            record = await self.backend.run_get(run_id, wait_seconds)
        return ok(record)

    async def run_events(
        self,
        run_id: Annotated[str, Field(description="the run")],
        after: Annotated[int, Field(ge=0, le=2**63 - 1, description="only events after this seq")] = 0,
        limit: Annotated[int, Field(ge=1, le=5000, description="at most this many events")] = 1000,
    ) -> Annotated[CallToolResult, RunEventsOut]:
        """A run's trace events in order (node_start, model_request, model_response, node_end, node_error,
        ...), with first_failed_node: the first node that failed. Runs of held-out cases are refused with
        HOLDOUT_HIDDEN."""
        record = await self._visible_run(run_id)
        events = await self.backend.run_events(run_id, after, limit)
        failed = next((e.get("node_id") for e in events if e.get("kind") == "node_error"), None)
        error = record.get("error")
        if isinstance(error, dict) and error.get("node_id"):
            failed = error["node_id"]
        return ok(
            {
                "run_id": run_id,
                "events": events,
                "first_failed_node": failed,
                "next_after": events[-1]["seq"] if len(events) >= limit else None,
            }
        )

    async def run_get_node(
        self,
        run_id: Annotated[str, Field(description="the run")],
        node_id: Annotated[str, Field(description="a node id; inside a called flow: call_node/inner_node")],
    ) -> Annotated[CallToolResult, NodeOut]:
        """One node of a run: its status, inputs, output or error, its model calls and its events. Runs of
        held-out cases are refused with HOLDOUT_HIDDEN."""
        await self._visible_run(run_id)
        return ok(await self.backend.run_node(run_id, node_id))


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
TOOLS: list[tuple[str, str, ToolAnnotations]] = [
    ("aqven_check", "Check the project", READ_ONLY),
    ("list_flows", "List flows", READ_ONLY),
    ("get_flow", "Read a flow", READ_ONLY),
    ("list_datasets", "List datasets", READ_ONLY),
    ("get_dataset", "Read a dataset's working cases", READ_ONLY),
    ("list_experiments", "List experiments", READ_ONLY),
    ("get_experiment", "Read an experiment", READ_ONLY),
    ("list_findings", "List findings", READ_ONLY),
    ("read_findings_md", "Read FINDINGS.md", READ_ONLY),
    ("series_list", "List series", READ_ONLY),
    (
        "series_start",
        "Start a series",
        ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True),
    ),
    ("series_get", "Read a series", READ_ONLY),
    (
        "series_cancel",
        "Cancel a series",
        ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False),
    ),
    (
        "run_start",
        "Start a run",
        ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True),
    ),
    ("run_get", "Read a run", READ_ONLY),
    ("run_events", "Read a run's trace", READ_ONLY),
    ("run_get_node", "Read one node of a run", READ_ONLY),
]


def build_server(backend: Backend) -> MCPServer[Any]:
    """The MCP server of a project over `backend`."""
    tools = AqvenTools(backend)
    registered: list[Tool] = []
    for name, title, hints in TOOLS:
        fn: Callable[..., Awaitable[CallToolResult]] = getattr(tools, name)
        tool = AqvenTool.from_function(fn, name=name, title=title, annotations=hints)
        tool.parameters["additionalProperties"] = False
        registered.append(tool)
    return MCPServer(
        "aqven",
        title="AQVEN",
        instructions=INSTRUCTIONS,
        version=__version__,
        tools=registered,
        log_level="WARNING",
    )


def tool_names() -> list[str]:
    return [name for name, _title, _annotations in TOOLS]


# ---- transports -----------------------------------------------------------------------------------------------


def mount_mcp(app: FastAPI, service: ProjectService) -> MCPServer[Any]:
    """Serve the tools over streamable HTTP at `/mcp` of the project server, calling `service` directly."""
    server = build_server(ServiceBackend(service))
    http_app = server.streamable_http_app(streamable_http_path="/mcp", host=HOST)
    app.router.routes[0:0] = http_app.routes  # before any catch-all route of Studio
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state, server.session_manager.run():
            yield state

    app.router.lifespan_context = lifespan
    app.state.mcp = server
    return server


async def serve_stdio(root: Path) -> None:
    """`aqven mcp`: the tools over stdio, answered by the project server (started when none runs)."""
    await build_server(HttpBackend(root)).run_stdio_async()
