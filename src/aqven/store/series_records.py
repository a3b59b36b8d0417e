"""What a series and its attempts are, as the store keeps them."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

SeriesStatus = Literal["running", "awaiting_approval", "waiting_human", "done", "cancelled", "failed"]
ENDED = ("done", "cancelled", "failed")
AttemptOutcome = Literal["pass", "fail", "model_failure", "infra"]
MAX_LOOK_CASES: Final = 500
"""The most cases one look may run (a look names each of them)."""


class LookSpec(BaseModel):
    flow_id: str
    dataset_id: str
    case_names: list[str] = Field(min_length=1, max_length=MAX_LOOK_CASES)
    start_node: str | None = None
    end_node: str | None = None


class SeriesPlan(BaseModel):
    """What the series runs, fixed at its start."""

    flow_id: str
    from_node: str | None = None
    to_node: str | None = None
    dataset_id: str
    cases: list[str]
    sides: dict[str, str] = Field(default_factory=dict)  # case -> dev | holdout
    variants: list[str]
    repeats: int
    question: dict[str, Any] = Field(default_factory=dict)
    deciding_check: str | None = None
    judge_unvalidated: bool = False
    judge_correction: dict[str, Any] | None = None
    """The deciding judge's accuracy from its validated_by finding (judge_correction.JudgeAccuracy.to_json())."""
    # When a judge decides: its check, agent and model, its validated_by and the confirmed finding that validates
    # it (None when there is none yet), as they were at the start.
    judge: dict[str, Any] | None = None
    launch_plan: dict[str, Any] = Field(default_factory=dict)
    look: LookSpec | None = None
    simulate: bool = False
    stop_early: bool = False
    """The experiment declared stop_early: the series decides on the confidence sequence and may stop early."""


class SeriesRow(BaseModel):
    """A series as stored. Frozen: the store hands the same object out again while the row is unchanged."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: Literal["experiment", "look"]
    experiment_id: str | None
    on: str
    status: SeriesStatus
    created_at: str
    ended_at: str | None
    client_op_id: str | None
    plan: SeriesPlan
    cap_usd: str
    project_cap_usd: str
    project_cap_source: str
    pause: dict[str, Any] | None
    verdict: dict[str, Any] | None
    error: dict[str, Any] | None
    stop_reason: str | None
    inputs_hash: str
    inputs: dict[str, str]
    simulated: bool
    finding: str | None
    active_seconds: float
    active_since: float | None
    # The seed of the run order (cases shuffled, run case by case): a secret of the series, never shown, so the
    # order of a held-out series' attempts cannot be derived (`exclude`: no dump of the row carries it).
    order_seed: int | None = Field(default=None, exclude=True, repr=False)
    # The simulators' seed, drawn at the start (or given, to replay a series on purpose).
    sim_seed: int | None = None
    # What a held-out series shows while it runs: its numbers as of the last coarse step (series_view.py).
    sealed_view: dict[str, Any] | None = Field(default=None, exclude=True, repr=False)
    # The most tokens the series may use (the smallest token_cap of its agents; an approval raises it), or None.
    token_cap: int | None = None


DECIDED_EARLY: Final[str] = "decided_early"
"""The series' stop_reason once a look of its confidence sequence decided the verdict."""


def active_now(s: SeriesRow) -> float:
    """Seconds the series has spent running (pauses and server downtime excluded)."""
    return s.active_seconds + (time.time() - s.active_since if s.active_since is not None else 0.0)


@dataclass(slots=True)
class AttemptRow:
    """One attempt as stored. A plain dataclass: a snapshot of a 10,000-attempt series reads every row."""

    series_id: str
    idx: int
    case_name: str
    dataset_id: str
    side: str
    variant_id: str
    rep: int
    seed: int
    status: Literal["queued", "running", "done"]
    run_id: str | None
    outcome: AttemptOutcome | None
    value: float | None
    error_code: str | None
    error_message: str | None
    checks_json: str | None  # parsed on demand by `checks`: most readers never look at it
    cost_usd: str | None
    unpriced: bool
    reruns: int
    started_at: str | None
    ended_at: str | None
    active_at_end: float | None
    inputs_hash: str | None = None  # the hash of the inputs the attempt ran on (research/experiments/inputs.py)
    worker: str | None = None  # the `aqven worker` that ran it last (store/workers.py), when one did

    @property
    def checks(self) -> list[dict[str, Any]] | None:
        return None if self.checks_json is None else list(json.loads(self.checks_json))
