"""Checks: every check of an experiment is scored on every attempt, and the results are stored with it.

A check is one of

* a built-in (`aqven.research.checks.builtin`): equals_expected, contains, not_contains, regex, json_schema,
  length, no_refusal, cost_at_most, latency_at_most;
* a function of the project, ``function: file.py:fn`` (`aqven.research.checks.functions`);
* a model as judge, ``judge: {agent, rubric, scale}`` (`aqven.research.checks.judges`), optionally
  ``validated_by`` an experiment whose held-out finding shows the judge agrees with people.

`score_checks` never raises for a problem of the project: a crashing function or a judge whose provider failed
becomes a `CheckResult` with ``error`` set (the attempt is then an infrastructure error). `check_spec_problems`
is what `aqven check` reports about a check before anything runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aqven.models.outcomes import CODE_ERROR
from aqven.project.loader import Project
from aqven.research.checks.builtin import BUILTIN_PARAMS, no_output_result, refusal_in, score_builtin
from aqven.research.checks.functions import ARGUMENTS, interpret, score_function
from aqven.research.checks.judges import PASS_FAIL_SCHEMA, RUBRIC_NAMES, SCORE_SCHEMA, judge_schema, score_judge
from aqven.research.checks.problems import check_spec_problems, subject_output_schema
from aqven.research.checks.result import AttemptView, CheckResult, error_result
from aqven.research.experiments.schema import CheckSpec, ExperimentSource

__all__ = [
    "ARGUMENTS",
    "BUILTIN_PARAMS",
    "PASS_FAIL_SCHEMA",
    "RUBRIC_NAMES",
    "SCORE_SCHEMA",
    "AttemptView",
    "CheckResult",
    "check_spec_problems",
    "interpret",
    "judge_is_validated",
    "judge_schema",
    "refusal_in",
    "score_check",
    "score_checks",
    "subject_output_schema",
]


async def score_check(
    project: Project, exp: ExperimentSource, check: CheckSpec, attempt: AttemptView, *, simulate: bool, seed: int
) -> CheckResult:
    """Score one check on one attempt.

    On a run that ended without an output, checks of the output (functions, judges and the built-ins that read
    the output) fail without being run: the attempt already counts as the model's failure, or as an
    infrastructure error, by its own outcome. `cost_at_most`, `latency_at_most` and `no_refusal` read the
    attempt and are scored as usual.
    """
    try:
        if check.builtin is not None:
            return score_builtin(check, attempt)
        if attempt.failed:
            return no_output_result(check, attempt)
        if check.function is not None:
            return await score_function(project, exp, check, attempt)
        return await score_judge(project, exp, check, attempt, simulate=simulate, seed=seed)
    except Exception as exc:  # a bug in AQVEN: one broken check must not lose the attempt
        return error_result(
            check.id, CODE_ERROR, f"check {check.id!r} could not be scored: {type(exc).__name__}: {exc}"
        )


async def score_checks(
    project: Project, exp: ExperimentSource, attempt: AttemptView, *, simulate: bool, seed: int
) -> list[CheckResult]:
    """Every check of the experiment on one attempt, in the experiment's order (judges are asked concurrently)."""
    return list(
        await asyncio.gather(
            *(score_check(project, exp, c, attempt, simulate=simulate, seed=seed) for c in exp.spec.checks)
        )
    )


def judge_is_validated(exp: ExperimentSource, check: CheckSpec, validated: Callable[[str], bool]) -> bool:
    """Whether the check's verdicts count as evidence: True for a check that is not a judge; for a judge, True when
    it names `validated_by` and `validated(that experiment id)` says its evidence holds (for example a held-out
    finding of that experiment that confirmed the judge's agreement with people).

    A series whose deciding check is an unvalidated judge gives a signal, never a verdict.
    """
    if check.judge is None:
        return True
    return check.validated_by is not None and bool(validated(check.validated_by))
