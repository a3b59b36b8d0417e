"""The typed form of `experiments/<id>/experiment.yaml`, and an experiment as loaded from its folder."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from aqven.project.loader import FlowSource
from aqven.project.schema import ID_PATTERN
from aqven.research.stats.questions import QUESTION_KINDS, Direction, QuestionKind

Identifier = Annotated[str, Field(pattern=ID_PATTERN, max_length=80)]
Rate = Annotated[float, Field(ge=0, le=1)]
MAX_REPEATS = 20


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Subject(Strict):
    flow: Identifier
    from_: Identifier | None = Field(None, alias="from")
    to: Identifier | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


VariesWhat = Literal["agent", "prompt", "use", "flow"]
"""What a variant may change; each is one entry of `aqven.research.experiments.variants.VARIANT_KINDS`."""


class Varies(Strict):
    what: VariesWhat
    nodes: Annotated[list[Identifier], Field(min_length=1)]


class Variant(Strict):
    id: Identifier
    description: str | None = None
    nodes: dict[str, str] = Field(default_factory=dict)


class DatasetRef(Strict):
    id: Identifier
    tags: list[str] = Field(default_factory=list)


# ---- checks ---------------------------------------------------------------------------------------

BuiltinName = Literal[
    "equals_expected", "contains", "not_contains", "regex", "json_schema", "length", "no_refusal",
    "cost_at_most", "latency_at_most",
]  # fmt: skip
"""The built-in checks by name: each is registered with its scorer, parameters and problems in
`aqven.research.checks.builtin` (`@builtin`), which fails at import when the two differ."""
BUILTINS: Final[tuple[str, ...]] = get_args(BuiltinName)


class JudgeSpec(Strict):
    agent: Identifier
    rubric: str
    scale: Literal["pass_fail", "score"] = "pass_fail"


class CheckSpec(Strict):
    """One detector scored on every attempt: exactly one of builtin, function or judge."""

    id: Identifier
    description: str | None = None
    builtin: BuiltinName | None = None
    function: str | None = None
    judge: JudgeSpec | None = None
    validated_by: Identifier | None = None
    # parameters of built-ins
    field: str | None = None
    value: str | None = None
    pattern: str | None = None
    case_sensitive: bool = True
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    min: Annotated[int, Field(ge=0)] | None = None
    max: Annotated[int, Field(ge=0)] | None = None
    usd: Decimal | None = None
    seconds: Annotated[float, Field(gt=0)] | None = None
    pass_score: Rate = 0.5

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _one_kind(self) -> CheckSpec:
        kinds = [k for k in ("builtin", "function", "judge") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(
                f"check {self.id!r} needs exactly one of builtin, function or judge (has {kinds or 'none'})"
            )
        if self.validated_by and not self.judge:
            raise ValueError(f"check {self.id!r}: validated_by applies to judge checks only")
        if self.function and not _is_ref(self.function):
            raise ValueError(f"function must be 'file.py:function', not {self.function!r}")
        return self

    @field_validator("usd", mode="before")
    @classmethod
    def _money(cls, v: Any) -> Any:
        return Decimal(repr(v)) if isinstance(v, float) else v

    @property
    def kind(self) -> str:
        return "builtin" if self.builtin else ("function" if self.function else "judge")


def _is_ref(text: str) -> bool:
    path, sep, fn = text.rpartition(":")
    return bool(sep and path.endswith(".py") and fn.isidentifier())


class MetricSpec(Strict):
    check: Identifier


# ---- the question ---------------------------------------------------------------------------------


class Question(Strict):
    kind: QuestionKind
    metric: Identifier | None = None
    bound: Rate | None = None
    direction: Direction = "at_least"
    margin: Annotated[float, Field(ge=0, le=1)] = 0.0
    baseline: Identifier | None = None
    variant: Identifier | None = None

    @model_validator(mode="after")
    def _fits_kind(self) -> Question:
        spec = QUESTION_KINDS[self.kind]
        if spec.decides and not self.metric:
            raise ValueError(f"a {self.kind} question names the metric it decides on")
        if spec.needs_bound and self.bound is None:
            raise ValueError(f"a {self.kind} question needs a bound (the rate to clear), e.g. bound: 0.97")
        if spec.paired and not self.baseline:
            raise ValueError(f"a {self.kind} question needs a baseline variant")
        if spec.needs_margin and self.margin <= 0:
            raise ValueError(f"a {self.kind} question needs a margin above 0 (how much worse is still fine)")
        return self


class JudgeAgreement(Strict):
    """This experiment measures a judge against human labels (sensitivity and specificity, in its finding)."""

    label: Annotated[str, Field(min_length=1, max_length=200)]
    """The field of each case's ``expected_output`` that holds the human label."""
    positive: bool | int | str = True
    """The label value that means the person passed it; any other value means they failed it."""


class Experiment(Strict):
    id: str = ""
    failure_mode: Annotated[str, Field(min_length=1, max_length=120)]
    description: Annotated[str, Field(min_length=1)]
    subject: Subject
    varies: Varies | None = None
    variants: Annotated[list[Variant], Field(min_length=1)] = Field(default_factory=lambda: [Variant(id="as_written")])
    dataset: DatasetRef
    checks: list[CheckSpec] = Field(default_factory=list)
    metrics: dict[Identifier, MetricSpec] = Field(default_factory=dict)
    question: Question
    repeats: Annotated[int, Field(ge=1, le=MAX_REPEATS)] = 1
    judge_agreement: JudgeAgreement | None = None
    stop_early: bool = False
    """Declared before the data: series run their cases in a random order and decide on an anytime-valid
    confidence sequence, stopping as soon as the verdict is decided (aqven.research.stats.sequential)."""

    @property
    def variant_ids(self) -> list[str]:
        return [v.id for v in self.variants]


@dataclass
class ExperimentSource:
    """An experiment as loaded: its spec, its folder and file, and the flows local to it."""

    spec: Experiment
    folder: Path
    file: str
    local_flows: dict[str, FlowSource] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.spec.id
