"""What a check sees of one attempt (`AttemptView`) and what it says about it (`CheckResult`).

A result is one of three things:

* scored: ``passed`` is True or False and ``score`` is in [0, 1] (1.0 / 0.0 for pass/fail checks);
* not applicable: ``passed`` and ``score`` are None and ``error`` is None (a case without the expected output
  an ``equals_expected`` check compares with, an attempt whose cost nothing priced); left out of the metric;
* broken: ``passed`` and ``score`` are None and ``error`` is ``{"code": ..., "message": ...}`` (a check function
  that crashed, a judge whose provider failed). The attempt is then an infrastructure error.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from aqven.project.schema import Case

ZERO = Decimal(0)


@dataclass
class CheckResult:
    check_id: str
    passed: bool | None  # None when the check could not be scored
    score: float | None  # in [0, 1]; 1.0 / 0.0 for pass/fail checks
    reason: str
    error: dict[str, str] | None = None  # {"code": "CODE_ERROR", "message": ...} when the check itself failed
    cost_usd: Decimal | None = None  # a judge's model cost (None when unpriced), Decimal("0") for other checks
    input_tokens: int = 0
    output_tokens: int = 0
    judge: dict[str, Any] | None = None  # agent, model_name, simulated, cost_source, ... of a judge check

    @property
    def is_error(self) -> bool:
        return self.error is not None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; money is a string (or null when unknown)."""
        return {
            "check_id": self.check_id,
            "passed": self.passed,
            "score": self.score,
            "reason": self.reason,
            "error": dict(self.error) if self.error is not None else None,
            "cost_usd": None if self.cost_usd is None else str(self.cost_usd),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "judge": dict(self.judge) if self.judge is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckResult:
        """The inverse of `to_json`."""
        cost = data.get("cost_usd")
        score = data.get("score")
        error = data.get("error")
        judge = data.get("judge")
        return cls(
            check_id=str(data["check_id"]),
            passed=data.get("passed"),
            score=None if score is None else float(score),
            reason=str(data.get("reason") or ""),
            error={str(k): str(v) for k, v in error.items()} if isinstance(error, dict) else None,
            cost_usd=None if cost is None else Decimal(str(cost)),
            input_tokens=int(data.get("input_tokens") or 0),
            output_tokens=int(data.get("output_tokens") or 0),
            judge=dict(judge) if isinstance(judge, dict) else None,
        )


@dataclass
class AttemptView:
    """What a check sees of one attempt."""

    output: Any  # the run's output (None if the run failed)
    status: str  # "done" | "failed"
    error_code: str | None
    outcome: str | None  # "ok" | "model_failure" | "infra"
    case: Case
    cost_usd: Decimal | None  # None when some call of the run was not priced
    latency_s: float | None
    run_id: str | None = None

    @property
    def failed(self) -> bool:
        return self.status != "done"


def passed_result(check_id: str, passed: bool, reason: str) -> CheckResult:
    """A scored pass/fail result of a check that costs nothing."""
    return CheckResult(check_id, passed, 1.0 if passed else 0.0, reason, cost_usd=ZERO)


def scored_result(check_id: str, passed: bool, score: float, reason: str) -> CheckResult:
    return CheckResult(check_id, passed, score, reason, cost_usd=ZERO)


def unscored_result(check_id: str, reason: str) -> CheckResult:
    """Not applicable to this attempt: left out of the metric, not an error."""
    return CheckResult(check_id, None, None, reason, cost_usd=ZERO)


def error_result(check_id: str, code: str, message: str, **extra: str) -> CheckResult:
    """The check itself failed (its code crashed, its judge could not be asked): an infrastructure error."""
    return CheckResult(check_id, None, None, message, error={"code": code, "message": message, **extra}, cost_usd=ZERO)
