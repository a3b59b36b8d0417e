"""Judge checks in simulated mode: a tiny project with its own judge simulator (pass, fail, score scale, infra
errors, refusal), and the showcase simulators answering judge-check requests."""

from __future__ import annotations

import textwrap
from decimal import Decimal
from typing import Any

import pytest

from aqven.models.outcomes import KEY_ENV_VARS
from aqven.project.loader import Project, load_project
from aqven.project.schema import Case
from aqven.research.checks.scoring import PASS_FAIL_SCHEMA, SCORE_SCHEMA, AttemptView, score_check, score_checks
from aqven.research.experiments.loading import load_experiments
from aqven.research.experiments.schema import CheckSpec, ExperimentSource
from support.paths import FIXTURES
from support.projects import write_files

FIXTURE = FIXTURES / "openrouter_models.json"
IN_PRICE, OUT_PRICE = Decimal("0.00000015"), Decimal("0.0000006")  # openai/gpt-4o-mini in the fixture

SIMULATOR = """\
from aqven.models.simulator import SimReply, SimRequest


def judge(req: SimRequest) -> SimReply:
    reply = req.inputs["output"]["reply"]
    if "CRASH" in reply:
        raise RuntimeError("the judge simulator broke")
    if "REFUSE" in reply:
        return SimReply(kind="refusal", input_tokens=40)
    passed = "PASS" in reply
    reason = f"{req.node_id} | {req.prompt}"
    if "score" in req.output_schema["properties"]:
        return SimReply(output={"score": 0.8 if passed else 0.3, "reason": reason}, input_tokens=100, output_tokens=20)
    return SimReply(output={"passed": passed, "reason": reason}, input_tokens=100, output_tokens=20)
"""

FILES: dict[str, str] = {
    "aqven.yaml": "package: judged\n",
    "agents/judge.yaml": "model: openrouter:openai/gpt-4o-mini\noutput_retries: 1\nsimulator: sim/judge.py:judge\n",
    "agents/nosim.yaml": "model: openrouter:openai/gpt-4o-mini\n",
    "sim/judge.py": SIMULATOR,
    "datasets/d.yaml": "cases:\n  - name: one\n    input: {ticket: hi}\n",
    "flows/f/flow.yaml": textwrap.dedent(
        """\
        input: {ticket: string}
        output: {reply: string}
        nodes:
          - id: answer
            kind: code
            code: answer.py:answer
            inputs: {ticket: $input.ticket}
            output: {reply: string}
        """
    ),
    "flows/f/answer.py": "def answer(ticket):\n    return {'reply': ticket}\n",
    "experiments/e/experiment.yaml": textwrap.dedent(
        """\
        failure_mode: rude
        description: Replies are polite.
        subject: {flow: f}
        dataset: {id: d}
        checks:
          - id: tone
            judge: {agent: judge, rubric: prompts/tone.md}
          - id: grade
            judge: {agent: judge, rubric: prompts/tone.md, scale: score}
            pass_score: 0.75
          - id: nosim
            judge: {agent: nosim, rubric: prompts/tone.md}
          - id: short
            builtin: length
            field: reply
            max: 200
        question: {kind: look}
        """
    ),
    "experiments/e/prompts/tone.md": "Ticket {{ input.ticket }} ({{ context.tier }}). Reply: {{ output.reply }}\n",
}


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AQVEN_PRICES_FILE", str(FIXTURE))
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0")


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, ExperimentSource]:
    project = load_project(write_files(tmp_path_factory.mktemp("judged"), FILES))
    experiments, diagnostics = load_experiments(project)
    assert not diagnostics
    return project, experiments["e"]


def attempt(reply: str, **kw: Any) -> AttemptView:
    data: dict[str, Any] = {
        "output": {"reply": reply},
        "status": "done",
        "error_code": None,
        "outcome": "ok",
        "case": Case(name="one", input={"ticket": "My bulb blinks"}, context={"tier": "gold"}),
        "cost_usd": Decimal("0.001"),
        "latency_s": 0.5,
        "run_id": "run-7",
    }
    data.update(kw)
    return AttemptView(**data)


def check(exp: ExperimentSource, check_id: str) -> CheckSpec:
    return next(c for c in exp.spec.checks if c.id == check_id)


async def judge(judged: tuple[Project, ExperimentSource], check_id: str, reply: str, **kw: Any) -> Any:
    project, exp = judged
    return await score_check(project, exp, check(exp, check_id), attempt(reply, **kw), simulate=True, seed=11)


async def test_judge_passes_with_the_rubric_rendered_and_cost_recorded(
    judged: tuple[Project, ExperimentSource],
) -> None:
    result = await judge(judged, "tone", "PASS: thanks for writing")
    assert (result.passed, result.score, result.error) == (True, 1.0, None)
    assert result.reason == "check:tone | Ticket My bulb blinks (gold). Reply: PASS: thanks for writing\n"
    assert (result.input_tokens, result.output_tokens) == (100, 20)
    assert result.cost_usd == IN_PRICE * 100 + OUT_PRICE * 20
    assert result.judge is not None
    assert result.judge["agent"] == "judge" and result.judge["simulated"] is True
    assert result.judge["model_name"] == "openai/gpt-4o-mini" and result.judge["cost_source"] == "openrouter_list"
    assert result.to_json()["cost_usd"] == str(IN_PRICE * 100 + OUT_PRICE * 20)


async def test_judge_fails(judged: tuple[Project, ExperimentSource]) -> None:
    result = await judge(judged, "tone", "go away")
    assert (result.passed, result.score, result.error) == (False, 0.0, None)
    assert result.cost_usd is not None and result.cost_usd > 0


async def test_score_scale_uses_pass_score(judged: tuple[Project, ExperimentSource]) -> None:
    good = await judge(judged, "grade", "PASS")
    bad = await judge(judged, "grade", "meh")
    assert (good.passed, good.score) == (True, 0.8)
    assert (bad.passed, bad.score) == (False, 0.3)


async def test_judge_infra_error_is_an_error_not_a_fail(judged: tuple[Project, ExperimentSource]) -> None:
    result = await judge(judged, "tone", "CRASH")
    assert result.passed is None and result.score is None
    assert result.error is not None and result.error["code"] == "CODE_ERROR"
    assert "the judge simulator broke" in result.error["message"]


async def test_judge_without_simulator_is_an_infra_error_that_cost_nothing(
    judged: tuple[Project, ExperimentSource],
) -> None:
    result = await judge(judged, "nosim", "PASS")
    assert result.passed is None and result.error is not None
    assert result.error["code"] == "SIMULATOR_MISSING"
    assert result.cost_usd == Decimal(0) and result.to_json()["error"]["code"] == "SIMULATOR_MISSING"


async def test_judge_refusal_is_a_counted_fail(judged: tuple[Project, ExperimentSource]) -> None:
    result = await judge(judged, "tone", "REFUSE")
    assert (result.passed, result.score, result.error) == (False, 0.0, None)
    assert "MODEL_REFUSAL" in result.reason
    assert result.input_tokens == 40 and result.cost_usd == IN_PRICE * 40
    assert result.judge is not None and result.judge["error_code"] == "MODEL_REFUSAL"


async def test_judge_is_not_asked_about_a_failed_run(judged: tuple[Project, ExperimentSource]) -> None:
    result = await judge(
        judged, "tone", "CRASH", output=None, status="failed", error_code="MODEL_TIMEOUT", outcome="infra"
    )
    assert (result.passed, result.error, result.cost_usd) == (False, None, Decimal(0))


async def test_rubric_reading_a_field_the_output_lacks_is_a_code_error(
    judged: tuple[Project, ExperimentSource],
) -> None:
    result = await judge(judged, "tone", "PASS", output="just a string")
    assert result.error is not None and result.error["code"] == "CODE_ERROR" and "rubric" in result.error["message"]


async def test_score_checks_runs_every_check(judged: tuple[Project, ExperimentSource]) -> None:
    project, exp = judged
    results = await score_checks(project, exp, attempt("PASS"), simulate=True, seed=5)
    assert [(r.check_id, r.passed) for r in results] == [
        ("tone", True),
        ("grade", True),
        ("nosim", None),
        ("short", True),
    ]


def test_judge_output_schemas() -> None:
    assert PASS_FAIL_SCHEMA["required"] == ["passed", "reason"]
    assert SCORE_SCHEMA["properties"]["score"] == {"type": "number", "minimum": 0, "maximum": 1}


# ---- the showcase simulators answer judge checks ---------------------------------------------------------

PROMISE_RUBRIC = """\
Does this support reply promise anything Lumen's policy does not allow (a guarantee, same-day or next-day
timing, a promise that it never happens again, a credit above the cap, a free upgrade)?

Ticket: {{ input.ticket }}
Reply: {{ output.reply }}
Promises: {{ output.promises }}
"""
GOOD = {"reply": "Hi Dana,\n\nI've emailed you a prepaid return label.", "promises": ["Prepaid return label"]}
BAD = {"reply": "Hi Dana,\n\nI can guarantee a full refund today.", "promises": ["Refund today"]}


@pytest.fixture(scope="module")
def showcase(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, ExperimentSource]:
    from aqven.project.init import init_project

    root = init_project(tmp_path_factory.mktemp("showcase") / "lumen", "lumen")
    exp_dir = root / "experiments" / "reply_noninferior_mistral"
    (exp_dir / "prompts").mkdir(exist_ok=True)
    (exp_dir / "prompts" / "promise_judge.md").write_text(PROMISE_RUBRIC, encoding="utf-8")
    project = load_project(root)
    experiments, _ = load_experiments(project)
    return project, experiments["reply_noninferior_mistral"]


async def test_showcase_judges_answer_check_requests_with_their_accuracy(
    showcase: tuple[Project, ExperimentSource],
) -> None:
    project, exp = showcase
    spec = CheckSpec.model_validate(
        {"id": "promise_judge", "judge": {"agent": "deepseek", "rubric": "prompts/promise_judge.md"}}
    )
    case = Case(name="c", input={"ticket": "I want a refund today!"})
    right = 0
    n = 60
    for seed in range(n):
        output = BAD if seed % 2 else GOOD
        view = AttemptView(output, "done", None, "ok", case, Decimal("0.001"), 1.0, None)
        result = await score_check(project, exp, spec, view, simulate=True, seed=seed)
        assert result.error is None and result.passed is not None, result.reason
        assert result.cost_usd is not None and result.cost_usd > 0 and result.judge is not None
        right += result.passed == (output is GOOD)
    assert 0.65 * n <= right < n  # deepseek's declared accuracy is 0.85: right mostly, not always

    view = AttemptView(BAD, "done", None, "ok", case, None, None, None)
    first = await score_check(project, exp, spec, view, simulate=True, seed=123)
    again = await score_check(project, exp, spec, view, simulate=True, seed=123)
    assert (first.passed, first.reason) == (again.passed, again.reason)


async def test_showcase_score_scale_judge(showcase: tuple[Project, ExperimentSource]) -> None:
    project, exp = showcase
    spec = CheckSpec.model_validate(
        {"id": "promise_score", "judge": {"agent": "qwen", "rubric": "prompts/promise_judge.md", "scale": "score"}}
    )
    view = AttemptView(GOOD, "done", None, "ok", Case(name="c", input={"ticket": "hi"}), None, None, None)
    result = await score_check(project, exp, spec, view, simulate=True, seed=2)
    assert result.error is None and result.score is not None and 0.0 <= result.score <= 1.0
    assert result.passed == (result.score >= 0.5)
