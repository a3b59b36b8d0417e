"""The typed answers of the application layer: one model per thing, for the REST API, the MCP tools and the chat.

Every model here is `Open`: it allows extra keys, so a field the code adds later passes through instead of
breaking a client that validates results against the published output schema, and it dumps the fields that
were set, so an answer has the keys the code gave it (a field left unset is not sent as null). Records the
store keeps (`RunRecord`, `TraceEvent`), a dataset's `Case` and a `Diagnostic` are used as they are.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from aqven.project.diagnostics import Diagnostic
from aqven.project.schema import Case
from aqven.store.records import RunRecord, TraceEvent

SeriesStatus = Literal["running", "awaiting_approval", "waiting_human", "done", "cancelled", "failed"]


class Open(BaseModel):
    """A model that allows extra keys and dumps only the fields that were set (and the extra ones)."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        keep = self.model_fields_set | set(self.__pydantic_extra__ or {})
        return {k: v for k, v in data.items() if k in keep}


# ---- the project ----------------------------------------------------------------------------------------------


class ProjectOut(Open):
    """The project (GET /api/project): its name, the project cap and how it was confirmed, its files' ids."""

    root: str
    package: str | None = None
    name: str | None = None
    description: str | None = None
    spend_cap_usd: str
    spend_cap_source: str
    project_cap_confirmed_at: str | None = None
    project_cap_confirmed_by: str | None = Field(default=None, description="the channel that confirmed it")
    flows: list[str]
    agents: list[str]
    datasets: list[str]


class CheckOut(Open):
    """`aqven check`: the project's diagnostics (GET /api/check)."""

    ok: bool
    errors: int
    warnings: int
    diagnostics: list[Diagnostic]


class FlowItem(Open):
    id: str
    description: str | None = None
    nodes: list[str] = Field(description="top-level node ids, in order: the values start_node and end_node take")


class FlowsOut(Open):
    flows: list[FlowItem]


class FlowOut(Open):
    """One flow compiled (GET /api/flows/{flow_id}): its types and nodes, children of groups included."""

    id: str
    description: str | None = None
    file: str | None = None
    input_schema: Any = None
    output_schema: Any = None
    result: Any = None
    nodes: list[dict[str, Any]] = Field(default_factory=list)
    diagnostics: list[Diagnostic] = Field(default_factory=list)


class DatasetItem(Open):
    id: str
    description: str | None = None
    cases: int = Field(description="all cases of the dataset")
    dev: int = Field(description="working cases: explore on them")
    holdout: int = Field(description="held-out cases: only counted, never listed")


class DatasetsOut(Open):
    datasets: list[DatasetItem]


class DatasetOut(Open):
    """A dataset's working (dev) cases one by one; held-out cases are only counted (GET /api/datasets/{id})."""

    id: str
    description: str | None = None
    cases: list[Case]
    dev: int
    holdout: int
    hidden_cases: int


class WorkerItem(Open):
    """An `aqven worker` of the project's shared store (store/workers.py): where it runs, what it holds, its last
    heartbeat (its own clock), its state (live, lost, stopped, refused) and a refusal's code and message."""

    id: str
    name: str
    host: str
    pid: int
    slots: int
    running: int
    ran: int
    state: str
    started_at: str
    beat_at: str
    inputs_hash: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    ended_at: str | None = None


class WorkersOut(Open):
    cluster: bool  # whether this server hands attempts to workers (aqven serve --cluster)
    workers: list[WorkerItem]


class AgentItem(Open):
    id: str
    model: str
    description: str | None = None
    output_mode: str | None = None
    simulator: Any = None
    settings: dict[str, Any] = Field(default_factory=dict)


class AgentsOut(Open):
    agents: list[AgentItem]


class VariantItem(Open):
    id: str
    description: str | None = None  # the variant's description in its experiment's YAML
    nodes: dict[str, str] = Field(default_factory=dict)
    value: str = ""


class SeriesItem(Open):
    series_id: str
    kind: Literal["experiment", "look"]
    experiment_id: str | None = None
    on: str
    status: SeriesStatus
    created_at: str
    ended_at: str | None = None
    simulated: bool = False
    verdict: str | None = None
    text: str | None = None
    finding: str | None = None
    active: bool = False
    cap_usd: str | None = None
    spend_usd: str | None = None  # what an ended series spent (None while it is active: its snapshot says)
    spend_lower_bound: bool = False  # some of its attempts had no known price
    flow_id: str | None = None


class ExperimentOut(Open):
    """An experiment as GET /api/experiments/{id} gives it (the list leaves out `series`)."""

    id: str
    failure_mode: str
    description: str
    subject: dict[str, Any]
    varies: dict[str, Any] | None = None
    caption: str
    variants: list[VariantItem]
    dataset: dict[str, Any]
    checks: list[dict[str, Any]] = Field(default_factory=list)
    metrics: dict[str, Any] = Field(default_factory=dict)
    question: dict[str, Any]
    repeats: int
    file: str | None = None
    local_flows: list[str] = Field(default_factory=list)
    series: list[SeriesItem] | None = None


class ExperimentsOut(Open):
    experiments: list[ExperimentOut]


class FindingItem(Open):
    file: str
    intact: bool
    verifies: bool | None = Field(
        default=None,
        description="its verdict was recomputed from its series stored on this machine and nothing differs "
        "(false also when it could not be checked here: see unchecked)",
    )
    problem: str | None = Field(default=None, description="why it does not verify")
    code: str | None = Field(default=None, description="the diagnostic of that problem (E_FINDING_*)")
    unchecked: str | None = Field(default=None, description="what could not be checked on this machine")
    experiment_id: str | None = None
    series_id: str | None = None
    verdict: str | None = None
    text: str | None = None


class FindingsOut(Open):
    findings: list[FindingItem]
    findings_md: str | None = Field(default=None, description="FINDINGS.md (GET /api/findings only)")


class FindingsMdOut(Open):
    path: str = "FINDINGS.md"
    exists: bool
    text: str


class SeriesListOut(Open):
    series: list[SeriesItem]


# ---- series ---------------------------------------------------------------------------------------------------


class Progress(Open):
    attempts: int
    done: int
    running: int
    queued: int
    counted: int
    model_failures: int
    infra_errors: int
    reruns: int = 0
    held_out_attempts: int | None = Field(
        default=None, description="a look that ran held-out cases: how many attempts were on them (not in the numbers)"
    )


class Spend(Open):
    usd: str = Field(description="dollars spent so far; a lower bound when lower_bound is true")
    cap_usd: str
    project_cap_usd: str
    project_cap_source: str
    unpriced_attempts: int = Field(description="attempts that ran on a model without a known price")
    lower_bound: bool = Field(description="true when unpriced_attempts > 0: say that usd is a lower bound")


class Eta(Open):
    """When an active series should finish; null once it ended."""

    state: Literal["estimating", "running", "paused"]
    attempts_per_minute: float | None = None
    remaining_seconds: float | None = None
    finish_at: str | None = None


class Recommended(Open):
    cases: int
    repeats: int
    reason: str
    text: str = Field(description="advice to pass on to the user, not a requirement")
    by: str | None = Field(
        default=None, description="half_width, or zero_failure_floor when the floor needs more cases"
    )


class PlanPower(Open):
    power: float
    truth: float = Field(description="the planning rate (threshold) or difference (paired) the power is for")
    line: float = Field(description="the decision line: b ± m, or ±m for a paired question")
    cases: int | None = Field(description="cases that decide 8 times in 10 at that truth; null on the line")
    decides: str | None = None
    text: str


class ZeroFailureFloor(Open):
    cases: int | None = Field(description="cases that must all pass (or all fail) before the interval can clear")
    line: float
    all: str
    text: str


class WhySoMany(Open):
    cases: int = Field(description="the recommended cases")
    oracle_cases: int = Field(description="cases a normal interval that knew the spread between cases would need")
    floor_binds: bool = Field(description="true when the zero-failure floor is the reason")
    text: str = Field(description="why the recommendation exceeds the oracle, in one sentence; pass it on")


class LaunchPlan(Open):
    """What a series runs and under which cap; it has no price."""

    on: str
    cases: int
    repeats: int
    variants: int
    attempts: int
    available: int | None = None
    half_width: float | None = None
    margin: float | None = None
    recommended: Recommended | None = None
    below_recommended: bool | None = None
    level: float | None = Field(default=None, description="the level the verdict decides at: 1 − 0.05/comparisons")
    comparisons: int | None = None
    planning: str | None = Field(
        default=None, description='"defaults", or "from series ser_…" (a dev series, same inputs)'
    )
    planning_rate: float | None = None
    planning_rho: float | None = None
    planning_series: dict[str, Any] | None = None
    power: PlanPower | None = None
    zero_failure_floor: ZeroFailureFloor | None = None
    why_so_many: WhySoMany | None = Field(
        default=None, description="when the recommended cases exceed what a normal (Wald) oracle needs: why"
    )
    earlier_reads: dict[str, Any] | None = Field(
        default=None,
        description="on holdout: how many of these cases earlier held-out series of the experiment read "
        "(earlier_series, read_cases, cases, text); pass text on",
    )
    needs_approval: bool
    project_cap_usd: str
    project_cap_source: str
    cap_usd: str


class SeriesSummary(Open):
    series_id: str
    kind: Literal["experiment", "look"]
    experiment_id: str | None = None
    on: str
    status: SeriesStatus
    simulated: bool
    created_at: str
    progress: Progress
    spend: Spend
    pause: dict[str, Any] | None = None
    eta: Eta | None = None


class SeriesStartOut(Open):
    series: SeriesSummary
    launch_plan: LaunchPlan
    created: bool = Field(description="false when client_op_id had already started this series")


class MatrixRow(Open):
    variant: str
    attempts: int
    done: int
    counted: int
    passes: float
    model_failures: int
    infra_errors: int
    spend_usd: str
    estimate: float | None = None
    low: float | None = None
    high: float | None = None


class Verdict(Open):
    """Quote `text` as it is once the series is done; while it runs the verdict is provisional."""

    verdict: Literal["confirmed", "refuted", "inconclusive", "signal", "invalid"]
    text: str
    reason: str | None = None
    below_mde: bool = False
    provisional: bool = False
    judge_corrected_by: str | None = Field(
        default=None, description="the judge-agreement finding whose sensitivity and specificity corrected this verdict"
    )


class AttemptOut(Open):
    repeat: int
    status: str
    outcome: str | None = None
    error: str | None = None
    message: str | None = None
    run_id: str | None = None


class CaseVariant(Open):
    passes: float
    counted: int
    fails: int
    failed_checks: list[str]
    attempts: list[AttemptOut]


class CaseRow(Open):
    case: str
    failing: bool
    variants: dict[str, CaseVariant]


class SeriesOut(SeriesSummary):
    """series_get: progress, spend against the cap, eta, the per-variant matrix, the verdict and, with
    include_cases, the working (dev) cases: failing first, at most 50; the rest counted in hidden_cases."""

    ended_at: str | None = None
    matrix: list[MatrixRow]
    verdict: Verdict | None = None
    error: dict[str, Any] | None = None
    finding: str | None = None
    plan: dict[str, Any]
    launch_plan: LaunchPlan | dict[str, Any]
    as_of: float
    seed: int | None = Field(default=None, description="the simulators' seed the series drew at its start")
    ran_on: list[dict[str, Any]] | None = Field(
        default=None,
        description="where its attempts ran, when `aqven worker`s ran them: per worker (id, name, host) the attempts "
        "it ran last (with include_cases, or once the series ended)",
    )
    coarse: dict[str, Any] | None = Field(
        default=None,
        description="a running held-out series: its matrix and verdict are as of as_of_done finished attempts "
        "(they move every `step` attempts only)",
    )
    cases: list[CaseRow] | None = None
    hidden_cases: int | None = None


# ---- runs -----------------------------------------------------------------------------------------------------


class RunsOut(Open):
    """Runs newest first; runs of held-out cases are not listed, only counted."""

    runs: list[RunRecord]
    hidden_holdout_runs: int = Field(description="runs the filters match that ran held-out cases (not listed)")


class RunEventsOut(Open):
    run_id: str
    events: list[TraceEvent]
    first_failed_node: str | None = Field(
        default=None, description="the first node with a node_error event (null when no node failed)"
    )
    next_after: int | None = Field(default=None, description="pass as `after` to read on; null when nothing more")


class NodeOut(Open):
    """One node of a run (GET /api/runs/{run_id}/nodes/{node_id}); ids in called flows are call_node/inner."""

    run_id: str
    node_id: str
    status: str
    inputs: Any = None
    output: Any = None
    error: dict[str, Any] | None = None
    model_calls: list[dict[str, Any]] = Field(default_factory=list)
    events: list[TraceEvent]


__all__ = [
    "AgentItem",
    "AgentsOut",
    "Case",
    "CheckOut",
    "DatasetOut",
    "DatasetsOut",
    "ExperimentOut",
    "ExperimentsOut",
    "FindingsMdOut",
    "FindingsOut",
    "FlowOut",
    "FlowsOut",
    "NodeOut",
    "ProjectOut",
    "RunEventsOut",
    "RunRecord",
    "RunsOut",
    "SeriesItem",
    "SeriesListOut",
    "SeriesOut",
    "SeriesStartOut",
]
