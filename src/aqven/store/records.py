"""What a run is: the request that starts it and the record the store keeps."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

RunStatus = Literal["queued", "running", "waiting_human", "done", "failed"]
Outcome = Literal["ok", "model_failure", "infra"]


class RunRequest(BaseModel):
    """Everything needed to (re)start a run; stored with it so a run can resume after a restart."""

    flow_id: str
    input: Any = None
    context: dict[str, Any] = Field(default_factory=dict)
    node_outputs: dict[str, Any] = Field(default_factory=dict)
    case_name: str | None = None
    dataset_id: str | None = None
    from_node: str | None = None
    to_node: str | None = None
    simulate: bool = False
    seed: int = 0
    experiment_id: str | None = None
    variant_id: str | None = None


class RunError(BaseModel):
    code: str
    message: str
    node_id: str | None = None


class RunRecord(BaseModel):
    id: str
    flow_id: str
    status: RunStatus
    created_at: str
    started_at: str | None = None
    ended_at: str | None = None
    request: RunRequest
    output: Any = None
    error: RunError | None = None
    outcome: Outcome | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: str = "0"
    unpriced_calls: int = 0
    cost_is_lower_bound: bool = False
    model_calls: int = 0
    simulated: bool = False
    series_id: str | None = None
    case_name: str | None = None
    dataset_id: str | None = None
    side: str | None = None  # the side of the split the run ran on (dev | holdout), stored when it was created
    waiting_node: str | None = None


class TraceEvent(BaseModel):
    run_id: str
    seq: int
    ts: str
    kind: str
    node_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
