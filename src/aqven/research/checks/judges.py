"""Judge checks: a model reads a rubric filled with the attempt and answers passed (or a score) and a reason.

The rubric is a file relative to the experiment folder (inside the project) with the placeholders
``{{ output }}``, ``{{ input }}``, ``{{ expected_output }}`` and ``{{ context }}`` (and dotted fields of them,
``{{ output.reply }}``). The agent is called through `call_model` as node ``check:<check id>``, so its simulator
can tell a judge-check request from a flow node.

A judge whose model failed in a way that counts (a refusal, output retries exhausted) fails the check; a judge
that could not be asked (no key, provider down, no simulator) is an infrastructure error of the attempt.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from aqven.engine.template import render
from aqven.errors import ProjectError
from aqven.models.call import CallResult, ModelCall, call_model
from aqven.models.outcomes import CODE_ERROR, ModelCallError
from aqven.project.loader import Project
from aqven.research.checks.result import ZERO, AttemptView, CheckResult, error_result
from aqven.research.experiments.files import rubric_file
from aqven.research.experiments.schema import CheckSpec, ExperimentSource

#: The names a rubric may read.
RUBRIC_NAMES: Final = ("output", "input", "expected_output", "context")

PASS_FAIL_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"passed": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["passed", "reason"],
}
SCORE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}, "reason": {"type": "string"}},
    "required": ["score", "reason"],
}


def judge_schema(scale: str) -> dict[str, Any]:
    return dict(SCORE_SCHEMA if scale == "score" else PASS_FAIL_SCHEMA)


def judge_node_id(check_id: str) -> str:
    return f"check:{check_id}"


def judge_seed(seed: int, check_id: str) -> int:
    """The seed of a judge call: the attempt's seed mixed with the check id (as the engine does per node)."""
    return int(hashlib.sha256(f"{seed}:check:{check_id}".encode()).hexdigest()[:12], 16)


def rubric_values(attempt: AttemptView) -> dict[str, Any]:
    case = attempt.case
    return {
        "output": attempt.output,
        "input": case.input,
        "expected_output": case.expected_output,
        "context": case.context,
    }


def _judge_info(check: CheckSpec, **more: Any) -> dict[str, Any]:
    assert check.judge is not None
    return {
        "agent": check.judge.agent,
        "scale": check.judge.scale,
        "validated_by": check.validated_by,
        **more,
    }


async def score_judge(
    project: Project, exp: ExperimentSource, check: CheckSpec, attempt: AttemptView, *, simulate: bool, seed: int
) -> CheckResult:
    """Ask the check's judge about one attempt."""
    judge = check.judge
    assert judge is not None
    agent = project.agents.get(judge.agent)
    if agent is None:
        return error_result(check.id, CODE_ERROR, f"check {check.id!r}: judge agent {judge.agent!r} does not exist")
    try:
        path = rubric_file(project, exp, judge.rubric)
        text = path.read_text(encoding="utf-8")
    except ProjectError as exc:
        return error_result(check.id, CODE_ERROR, f"check {check.id!r}: {exc.message}")
    except (OSError, UnicodeDecodeError) as exc:
        return error_result(check.id, CODE_ERROR, f"check {check.id!r}: cannot read rubric {judge.rubric!r}: {exc}")
    values = rubric_values(attempt)
    try:
        prompt = render(text, values)
    except (KeyError, IndexError, TypeError) as exc:
        return error_result(
            check.id,
            CODE_ERROR,
            f"check {check.id!r}: rubric {judge.rubric!r} reads {exc}, which this attempt does not have",
        )
    call = ModelCall(
        agent=agent,
        prompt=prompt,
        output_schema=judge_schema(judge.scale),
        simulate=simulate,
        seed=judge_seed(seed, check.id),
        node_id=judge_node_id(check.id),
        project_root=project.root,
        inputs=values,
        case_name=attempt.case.name,
    )
    try:
        result = await call_model(call)
    except ModelCallError as exc:
        return _failed_call(check, exc)
    return _verdict(check, result)


def _failed_call(check: CheckSpec, exc: ModelCallError) -> CheckResult:
    info = _judge_info(
        check,
        model_name=exc.model_name,
        simulated=exc.simulated,
        cost_source=exc.cost_source,
        requests=exc.requests,
        output_retries=exc.output_retries,
        error_code=exc.code,
    )
    message = f"the judge {check.judge.agent if check.judge else ''!r} failed: {exc.code}: {exc.message}"
    # A call that failed before any request (no key, no simulator) spent nothing.
    cost = exc.cost_usd if exc.cost_usd is not None or exc.requests else ZERO
    if exc.outcome == "infra":
        return CheckResult(
            check.id,
            None,
            None,
            message,
            error={"code": exc.code, "message": exc.message},
            cost_usd=cost,
            input_tokens=exc.input_tokens,
            output_tokens=exc.output_tokens,
            judge=info,
        )
    return CheckResult(
        check.id,
        False,
        0.0,
        message,
        cost_usd=cost,
        input_tokens=exc.input_tokens,
        output_tokens=exc.output_tokens,
        judge=info,
    )


def _verdict(check: CheckSpec, result: CallResult) -> CheckResult:
    judge = check.judge
    assert judge is not None
    out = result.output if isinstance(result.output, dict) else {}
    info = _judge_info(
        check,
        model_name=result.model_name,
        provider=result.provider,
        simulated=result.simulated,
        cost_source=result.cost_source,
        requests=result.requests,
        output_retries=result.output_retries,
        latency_ms=round(result.latency_ms, 1),
    )
    reason = str(out.get("reason") or "")
    if judge.scale == "score":
        score = float(out.get("score", 0.0))
        passed = score >= check.pass_score
    else:
        passed = bool(out.get("passed"))
        score = 1.0 if passed else 0.0
    return CheckResult(
        check.id,
        passed,
        score,
        reason or ("the judge passed it" if passed else "the judge failed it"),
        cost_usd=result.cost_usd,
        input_tokens=result.input_tokens,
        output_tokens=result.output_tokens,
        judge=info,
    )
