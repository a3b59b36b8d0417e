"""Experiment checks: what a check sees of an attempt and how built-in, function and judge checks score it."""

from __future__ import annotations

from aqven.research.checks.builtin import ATTEMPT_BUILTINS, BUILTIN_CHECKS, BUILTIN_PARAMS, builtin
from aqven.research.checks.problems import check_spec_problems
from aqven.research.checks.scoring import (
    PASS_FAIL_SCHEMA,
    SCORE_SCHEMA,
    AttemptView,
    CheckResult,
    judge_is_validated,
    refusal_in,
    score_check,
    score_checks,
)

__all__ = [
    "ATTEMPT_BUILTINS",
    "BUILTIN_CHECKS",
    "BUILTIN_PARAMS",
    "PASS_FAIL_SCHEMA",
    "SCORE_SCHEMA",
    "AttemptView",
    "CheckResult",
    "builtin",
    "check_spec_problems",
    "judge_is_validated",
    "refusal_in",
    "score_check",
    "score_checks",
]
