"""Every tool an agent has, declared once: the MCP server (`/mcp` and `aqven mcp`) and the Studio chat serve these.

Each tool is an async function over the project service that calls the application layer
(`aqven.server.operations`) and answers a typed model; its name, docstring (the description an agent reads),
parameters (the input schema) and return type (the output schema) are the declaration (`tool_registry`). To add
a tool, add a function here with `@TOOLS.tool(...)`, its test, and a row in the tool table of
docs/how-to/run-series-as-an-agent.md (docs/architecture.md, "How to add a tool").

Rules every agent gets from here, whatever the transport:

* Held-out cases never reach the agent one by one. `series_get` lists working (dev) cases only; the run tools
  refuse a run of a held-out case with `HOLDOUT_HIDDEN` (its case name, inputs, outputs and trace stay on the
  server); `run_start` refuses to run one; `NOT_RUNNABLE` problems name a held-out case only by a label.
  `aqven.research.holdout` decides all of it, for the REST API and here alike.
* No tool approves, continues or stops a paused series, or confirms a cap: a person does that in Studio or over
  REST with a person's key (`operations.series.approve` / `stop` have no tool; the server token is refused).
* A tool raises `AqvenError` with a stable code; the MCP server and the chat turn it into their error shape.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from pydantic import Field

from aqven.errors import AqvenError
from aqven.research.experiments.schema import MAX_REPEATS
from aqven.research.holdout import check_run, series_error_view
from aqven.research.series.start import SeriesStartBody
from aqven.server.operations import finish, project, research, runs, series
from aqven.server.operations.finish import FinishEstimate
from aqven.server.operations.models import (
    AgentsOut,
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
    RunsOut,
    SeriesListOut,
    SeriesOut,
    SeriesStartOut,
)
from aqven.server.service import ProjectService
from aqven.server.tool_registry import Registry
from aqven.store.series_records import LookSpec

MAX_WAIT_S = 50.0

TOOLS = Registry()


def agent_view(state: SeriesOut) -> SeriesOut:
    """A snapshot as an agent sees it: dev case rows only, no handle on a held-out attempt's run."""
    shown_error = series_error_view(state.error)
    if shown_error is not state.error:
        state.error = shown_error
    rows = state.cases
    if rows:
        shown = [r for r in rows if (r.model_extra or {}).get("side") == "dev"]  # the side each ran on
        if len(shown) != len(rows):
            state.cases = shown
            state.hidden_cases = int(state.hidden_cases or 0) + len(rows) - len(shown)
    return state


def _visible_run(svc: ProjectService, run_id: str) -> RunRecord:
    """The run, when it may be shown (HOLDOUT_HIDDEN for one that ran on the held-out side)."""
    record = svc.visible_run(run_id)
    check_run(run_id, record.side, record.case_name)  # the side it ran on
    return record


# ---- the project ----------------------------------------------------------------------------------------------


@TOOLS.tool("Check the project")
async def aqven_check(svc: ProjectService) -> CheckOut:
    """Validate the project's files, like `aqven check`: flows, agents, datasets, checks, and every
    experiment (its subject and range, the factor in varies and every variant's values, each variant
    assembled and compiled, the dataset and tag filter, the checks, metrics and validated_by). Run it after
    every edit and before series_start: a series refuses to start on a project with errors (NOT_RUNNABLE)."""
    return await asyncio.to_thread(project.check, svc)


@TOOLS.tool("List flows")
async def list_flows(svc: ProjectService) -> FlowsOut:
    """The project's flows, each with its top-level node ids in order (the values start_node and end_node
    of a look take)."""
    return FlowsOut(flows=project.flows(svc))


@TOOLS.tool("Read a flow")
async def get_flow(
    svc: ProjectService, flow_id: Annotated[str, Field(description="a flow id from list_flows")]
) -> FlowOut:
    """One flow compiled: its input and output types and its nodes (children of groups included), with the
    node ids run_get_node takes."""
    return await asyncio.to_thread(project.flow, svc, flow_id)


@TOOLS.tool("List datasets")
async def list_datasets(svc: ProjectService) -> DatasetsOut:
    """The project's datasets with their counts of cases: working (dev) and held-out. Held-out cases are
    only counted."""
    return DatasetsOut(datasets=project.datasets(svc))


@TOOLS.tool("Read a dataset's working cases")
async def get_dataset(
    svc: ProjectService, dataset_id: Annotated[str, Field(description="a dataset id from list_datasets")]
) -> DatasetOut:
    """A dataset's working (dev) cases one by one, with their inputs and expected outputs; held-out cases
    are only counted (hidden_cases)."""
    return project.dataset(svc, dataset_id)


@TOOLS.tool("List agents")
async def list_agents(svc: ProjectService) -> AgentsOut:
    """The project's agents (agents/<id>.yaml): each one's model, output mode, simulator and settings."""
    return AgentsOut(agents=project.agents(svc))


@TOOLS.tool("List experiments")
async def list_experiments(svc: ProjectService) -> ExperimentsOut:
    """The experiments of the project (experiments/<id>/experiment.yaml): the question, the factor that
    varies and its variants, the dataset, the checks. No tool writes an experiment: it is a file."""
    return ExperimentsOut(experiments=research.experiments(svc))


@TOOLS.tool("Read an experiment")
async def get_experiment(
    svc: ProjectService,
    experiment_id: Annotated[str, Field(description="an experiment id from list_experiments")],
) -> ExperimentOut:
    """One experiment, with the series that ran it (newest first)."""
    return research.experiment_with_series(svc, experiment_id)


@TOOLS.tool("List findings")
async def list_findings(svc: ProjectService) -> FindingsOut:
    """Every finding file (experiments/<id>/findings/<series_id>.yaml): its verdict and sentence, and
    whether it is intact."""
    return FindingsOut(findings=research.findings(svc).findings)


@TOOLS.tool("Read FINDINGS.md")
async def read_findings_md(svc: ProjectService) -> FindingsMdOut:
    """FINDINGS.md: what the project knows, one section per failure mode. Read it before you propose a
    change. It is generated from the finding files; never edit it."""
    text = research.findings(svc).findings_md or ""
    return FindingsMdOut(path="FINDINGS.md", exists=bool(text), text=text)


# ---- series ---------------------------------------------------------------------------------------------------


@TOOLS.tool("List series")
async def series_list(
    svc: ProjectService,
    experiment_id: Annotated[str | None, Field(description="only the series of this experiment")] = None,
    limit: Annotated[int, Field(ge=1, le=500, description="at most this many, newest first")] = 20,
) -> SeriesListOut:
    """The series of the project, newest first, with their status and verdict."""
    return SeriesListOut(series=series.list_series(svc, experiment_id, limit))


@TOOLS.tool("Start a series", effect="spends")
async def series_start(
    svc: ProjectService,
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
) -> SeriesStartOut:
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
    # NOT_RUNNABLE names held-out cases by a label only
    return await series.start(svc, SeriesStartBody.model_validate(body))


@TOOLS.tool("Read a series")
async def series_get(
    svc: ProjectService,
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
) -> SeriesOut:
    """A series now: status, progress, spend against the cap (spend.lower_bound: some attempts ran on a
    model without a price, so spend.usd is a lower bound), eta (estimating, running with remaining_seconds,
    paused; null once it ended), the per-variant matrix with 95% intervals, the verdict (provisional while
    it runs; once done, quote verdict.text as it is) and, when failed, the first infrastructure error. Call
    it again until the status settles."""
    wait = min(max(wait_seconds, 0.0), MAX_WAIT_S)
    return agent_view(await series.get(svc, series_id, wait_seconds=wait, include_cases=include_cases))


@TOOLS.tool("What finishing a series costs")
async def series_finish_cost(
    svc: ProjectService,
    series_id: Annotated[str, Field(description="from series_start or series_list")],
) -> FinishEstimate:
    """What the attempts left of a series would cost at the cost per attempt so far: done, left, per_attempt_usd,
    more_usd, total_usd (null before any attempt had a cost), cap_to_finish_usd (a cap that lets it finish without
    another pause), double_usd and double_pauses_after (what approving double the cap buys: about how many more
    attempts before it pauses again), and decides (what finishing can decide). Money is in dollars as strings.
    Only a person approves a cap: tell them these amounts. A held-out series still running is priced as of its
    last coarse step."""
    return await finish.finish(svc, series_id)


@TOOLS.tool("Cancel a series", effect="destroys")
async def series_cancel(
    svc: ProjectService,
    series_id: Annotated[str, Field(description="the series to cancel")],
    reason: Annotated[str | None, Field(max_length=500, description="why, for the record")] = None,
) -> SeriesOut:
    """Cancel a series: queued attempts never start, model calls already running finish and are paid for,
    the verdict is invalid (cancelled) and no finding is written. A series that already stopped fails with
    SERIES_STATE_CONFLICT."""
    return agent_view(await series.cancel(svc, series_id, reason, {"kind": "agent", "channel": "mcp"}))


# ---- runs -----------------------------------------------------------------------------------------------------


@TOOLS.tool("Start a run", effect="spends")
async def run_start(
    svc: ProjectService,
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
) -> RunRecord:
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
    return await runs.start(svc, body, wait_seconds)


@TOOLS.tool("List runs")
async def list_runs(
    svc: ProjectService,
    flow_id: Annotated[str | None, Field(description="only the runs of this flow")] = None,
    status: Annotated[str | None, Field(description="only runs in this status, e.g. failed")] = None,
    series_id: Annotated[str | None, Field(description="only the attempts' runs of this series")] = None,
    limit: Annotated[int, Field(ge=1, le=100, description="at most this many, newest first")] = 20,
) -> RunsOut:
    """Runs, newest first, with their status, outcome, tokens and cost. Runs of held-out cases are never
    listed, only counted (hidden_holdout_runs)."""
    return runs.list_runs(svc, flow_id=flow_id, status=status, series_id=series_id, limit=limit)


@TOOLS.tool("Read a run")
async def run_get(
    svc: ProjectService,
    run_id: Annotated[str, Field(description="a run id, e.g. from a case row's attempts")],
    wait_seconds: Annotated[
        float, Field(ge=0, le=MAX_WAIT_S, description="hold the answer until the run ends, up to this long")
    ] = 0,
) -> RunRecord:
    """One run: status, output, error (error.node_id is the node that failed), tokens, cost, the case it
    ran. Runs of held-out cases are refused with HOLDOUT_HIDDEN."""
    record = _visible_run(svc, run_id)
    if wait_seconds > 0:
        record = await runs.get(svc, run_id, wait_seconds)
    return record


@TOOLS.tool("Read a run's trace")
async def run_events(
    svc: ProjectService,
    run_id: Annotated[str, Field(description="the run")],
    after: Annotated[int, Field(ge=0, le=2**63 - 1, description="only events after this seq")] = 0,
    limit: Annotated[int, Field(ge=1, le=5000, description="at most this many events")] = 1000,
) -> RunEventsOut:
    """A run's trace events in order (node_start, model_request, model_response, node_end, node_error,
    ...), with first_failed_node: the first node that failed. Runs of held-out cases are refused with
    HOLDOUT_HIDDEN."""
    record = _visible_run(svc, run_id)
    events = runs.events(svc, run_id, after=after, limit=limit)
    failed = next((e.node_id for e in events if e.kind == "node_error"), None)
    if record.error is not None and record.error.node_id:
        failed = record.error.node_id
    return RunEventsOut(
        run_id=run_id,
        events=events,
        first_failed_node=failed,
        next_after=events[-1].seq if len(events) >= limit else None,
    )


@TOOLS.tool("Read one node of a run")
async def run_get_node(
    svc: ProjectService,
    run_id: Annotated[str, Field(description="the run")],
    node_id: Annotated[str, Field(description="a node id; inside a called flow: call_node/inner_node")],
) -> NodeOut:
    """One node of a run: its status, inputs, output or error, its model calls and its events. Runs of
    held-out cases are refused with HOLDOUT_HIDDEN."""
    _visible_run(svc, run_id)
    return runs.node(svc, run_id, node_id)
