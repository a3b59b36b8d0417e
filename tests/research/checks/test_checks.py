"""Checks scored on attempts: every built-in (pass and fail), custom functions (every return form, crashes),
and the showcase's promises check."""

from __future__ import annotations

import textwrap
from decimal import Decimal
from typing import Any

import pytest

from aqven.project.loader import Project, load_project
from aqven.project.schema import Case
from aqven.research.checks.scoring import (
    AttemptView,
    CheckResult,
    judge_is_validated,
    refusal_in,
    score_check,
    score_checks,
)
from aqven.research.experiments.schema import CheckSpec, Experiment, ExperimentSource
from support.projects import write_files

CASE = Case(
    name="late_refund",
    input={"ticket": "My order is late; I want a refund.", "tier": "gold"},
    context={"order_total": "49.90"},
    expected_output={"label": "refund", "ok": True, "tags": ["a", "b"]},
)
OUTPUT: dict[str, Any] = {
    "reply": "Hi Dana, your refund is on its way.",
    "label": "refund",
    "ok": True,
    "tags": ["a", "b"],
    "promises": ["Refund within 5-10 business days"],
}


def view(output: Any = ..., **kw: Any) -> AttemptView:
    data: dict[str, Any] = {
        "output": OUTPUT if output is ... else output,
        "status": "done",
        "error_code": None,
        "outcome": "ok",
        "case": CASE,
        "cost_usd": Decimal("0.0021"),
        "latency_s": 1.5,
        "run_id": "run-1",
    }
    data.update(kw)
    return AttemptView(**data)


def spec(**kw: Any) -> CheckSpec:
    return CheckSpec.model_validate({"id": "c", **kw})


FILES: dict[str, str] = {
    "aqven.yaml": "package: checks_demo\n",
    "agents/a.yaml": "model: openrouter:openai/gpt-4o-mini\nsimulator: sim.py:answer\n",
    "sim.py": "def answer(req):\n    return {'reply': 'hi'}\n",
    "datasets/d.yaml": "cases:\n  - name: one\n    input: {ticket: hi}\n",
    "flows/f/flow.yaml": textwrap.dedent(
        """\
        input: {ticket: string}
        output: {reply: string}
        nodes:
          - id: answer
            kind: llm
            agent: a
            prompt: p.md
            inputs: {ticket: $input.ticket}
            output: {reply: string}
        """
    ),
    "flows/f/p.md": "Answer {{ ticket }}\n",
    "checks/forms.py": textwrap.dedent(
        """\
        import asyncio

        from checks.helper import explode


        def as_bool(output):
            return output["reply"].startswith("Hi")


        def as_score(output):
            return 0.7


        def as_low_score(output):
            return 0.2


        def as_tuple(output, case):
            return (False, f"case {case.name} is not fine")


        def as_score_tuple(output):
            return (0.9, "nice")


        def as_dict(output, expected):
            return {"passed": output["label"] == expected["label"], "reason": "labels compared"}


        def as_score_dict(output):
            return {"score": 0.4}


        async def as_async(output, attempt):
            await asyncio.sleep(0)
            return attempt.run_id == "run-1", f"run {attempt.run_id}"


        def uses_all(output, case, expected, input, context, attempt):
            ok = input["tier"] == "gold" and context["order_total"] == "49.90" and expected["ok"] is True
            return ok and case.name == "late_refund" and attempt.status == "done"


        def kwargs_only(**kw):
            return sorted(kw) == ["attempt", "case", "context", "expected", "input", "output"]


        def mutates(output, case):
            output["reply"] = "changed"
            case.name = "renamed"
            return True


        def crash(output):
            return 1 / 0


        def crash_in_helper(output):
            return explode(output)


        def bad_type(output):
            return "yes"


        def bad_score(output):
            return 1.5


        def nan_score(output):
            return float("nan")


        def bad_dict(output):
            return {"pass": True}


        def bad_tuple(output):
            return (True, "a", "b")


        def unknown_param(reply):
            return True
        """
    ),
    "checks/__init__.py": "",
    "checks/helper.py": "def explode(output):\n    raise ValueError(f'no good: {output[\"label\"]}')\n",
    "checks/broken.py": "def fine(output):\n    return True\n\n\nraise RuntimeError('broken at import')\n",
    "experiments/e/experiment.yaml": textwrap.dedent(
        """\
        failure_mode: wrong
        description: A test experiment.
        subject: {flow: f}
        dataset: {id: d}
        question: {kind: look}
        """
    ),
    "experiments/e/local_checks.py": "def local(output):\n    return {'passed': True, 'reason': 'local file'}\n",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    root = write_files(tmp_path_factory.mktemp("checks_demo"), FILES)
    return load_project(root)


def experiment(project: Project, *checks: CheckSpec) -> ExperimentSource:
    folder = project.root / "experiments" / "e"
    data: dict[str, Any] = {
        "id": "e",
        "failure_mode": "wrong",
        "description": "A test experiment.",
        "subject": {"flow": "f"},
        "dataset": {"id": "d"},
        "question": {"kind": "look"},
    }
    exp = Experiment.model_validate(data)
    exp.checks = list(checks)
    return ExperimentSource(spec=exp, folder=folder, file="experiments/e/experiment.yaml")


async def score(project: Project, check: CheckSpec, attempt: AttemptView | None = None) -> CheckResult:
    exp = experiment(project, check)
    return await score_check(project, exp, check, attempt or view(), simulate=True, seed=1)


def builtin(name: str, **kw: Any) -> CheckSpec:
    return spec(builtin=name, **kw)


# ---- built-ins ------------------------------------------------------------------------------------------


PASS_FAIL: list[tuple[str, CheckSpec, AttemptView, bool]] = [
    ("equals whole", builtin("equals_expected"), view(output=dict(CASE.expected_output)), True),
    ("equals whole, differs", builtin("equals_expected"), view(), False),
    ("equals field", builtin("equals_expected", field="label"), view(), True),
    ("equals field, differs", builtin("equals_expected", field="label"), view(output={"label": "other"}), False),
    ("equals list field", builtin("equals_expected", field="tags"), view(), True),
    ("equals: True is not 1", builtin("equals_expected", field="ok"), view(output={"ok": 1}), False),
    ("equals: output lacks field", builtin("equals_expected", field="label"), view(output={"x": 1}), False),
    ("contains", builtin("contains", value="refund"), view(), True),
    ("contains, field", builtin("contains", value="Refund", field="promises"), view(), True),
    ("contains, missing", builtin("contains", value="credit"), view(), False),
    ("contains, case", builtin("contains", value="HI DANA"), view(), False),
    ("contains, no case", builtin("contains", value="HI DANA", case_sensitive=False), view(), True),
    ("contains, string output", builtin("contains", value="plain"), view(output="a plain answer"), True),
    ("not_contains", builtin("not_contains", value="guarantee"), view(), True),
    ("not_contains, found", builtin("not_contains", value="refund", field="reply"), view(), False),
    ("regex", builtin("regex", pattern=r"\brefund\b", field="reply"), view(), True),
    ("regex, no match", builtin("regex", pattern=r"^Hello"), view(output="Hi there"), False),
    ("regex, no case", builtin("regex", pattern=r"^hi", case_sensitive=False), view(output="Hi there"), True),
    ("json_schema", builtin("json_schema", schema={"type": "object", "required": ["reply"]}), view(), True),
    (
        "json_schema, broken",
        builtin("json_schema", field="tags", schema={"type": "array", "maxItems": 1}),
        view(),
        False,
    ),
    ("length of text", builtin("length", field="reply", min=10, max=100), view(), True),
    ("length, too short", builtin("length", field="reply", min=100), view(), False),
    ("length, too long", builtin("length", max=3), view(output="four"), False),
    ("length of list", builtin("length", field="tags", min=2, max=2), view(), True),
    ("length of list, too many", builtin("length", field="tags", max=1), view(), False),
    ("length of a number", builtin("length", field="ok", max=1), view(), False),
    ("no_refusal", builtin("no_refusal"), view(), True),
    ("no_refusal, polite sorry", builtin("no_refusal"), view(output="I'm sorry about the flicker."), True),
    ("no_refusal, refusal text", builtin("no_refusal"), view(output="I'm sorry, but I can't help with that."), False),
    ("no_refusal, cannot assist", builtin("no_refusal"), view(output={"reply": "I cannot assist you."}), False),
    (
        "no_refusal, MODEL_REFUSAL",
        builtin("no_refusal"),
        view(output=None, status="failed", error_code="MODEL_REFUSAL", outcome="model_failure"),
        False,
    ),
    (
        "no_refusal, other failure",
        builtin("no_refusal"),
        view(output=None, status="failed", error_code="MODEL_INVALID_JSON", outcome="model_failure"),
        True,
    ),
    ("cost_at_most", builtin("cost_at_most", usd="0.01"), view(), True),
    ("cost_at_most, exactly", builtin("cost_at_most", usd="0.0021"), view(), True),
    ("cost_at_most, above", builtin("cost_at_most", usd="0.001"), view(), False),
    ("latency_at_most", builtin("latency_at_most", seconds=2), view(), True),
    ("latency_at_most, above", builtin("latency_at_most", seconds=1), view(), False),
]


@pytest.mark.parametrize(("check", "attempt", "passed"), [c[1:] for c in PASS_FAIL], ids=[c[0] for c in PASS_FAIL])
async def test_builtin_pass_and_fail(project: Project, check: CheckSpec, attempt: AttemptView, passed: bool) -> None:
    result = await score(project, check, attempt)
    assert result.passed is passed, result.reason
    assert result.score == (1.0 if passed else 0.0)
    assert result.error is None and result.reason
    assert result.cost_usd == Decimal(0) and result.judge is None


@pytest.mark.parametrize(
    ("check", "attempt"),
    [
        (builtin("equals_expected"), view(case=CASE.model_copy(update={"expected_output": None}))),
        (builtin("equals_expected", field="missing"), view()),
        (builtin("cost_at_most", usd="1"), view(cost_usd=None)),
        (builtin("latency_at_most", seconds=1), view(latency_s=None)),
    ],
    ids=["no expected_output", "expected lacks field", "unpriced", "no latency"],
)
async def test_builtin_not_applicable_is_unscored_without_error(
    project: Project, check: CheckSpec, attempt: AttemptView
) -> None:
    result = await score(project, check, attempt)
    assert result.passed is None and result.score is None and result.error is None and result.reason


async def test_output_checks_fail_on_a_failed_run_and_attempt_checks_still_score(project: Project) -> None:
    failed = view(output=None, status="failed", error_code="MODEL_RETRIES_EXHAUSTED", outcome="model_failure")
    for check in (builtin("contains", value="x"), spec(function="checks/forms.py:crash")):
        result = await score(project, check, failed)
        assert (result.passed, result.error) == (False, None)
        assert "MODEL_RETRIES_EXHAUSTED" in result.reason
    assert (await score(project, builtin("cost_at_most", usd="1"), failed)).passed is True


def test_refusal_detection() -> None:
    assert refusal_in("As an AI language model, I cannot do that.")
    assert refusal_in("I’m unable to help with this request.")
    assert refusal_in("I must decline.")
    assert refusal_in("We can’t assist with that.")
    for text in (
        "I can't wait to hear how the new strip works!",
        "I'm sorry about the trouble; I've set up a replacement.",
        "We can't offer a refund past 30 days, but a credit is fine.",
    ):
        assert refusal_in(text) is None, text


# ---- custom functions -----------------------------------------------------------------------------------


def fn(name: str, **kw: Any) -> CheckSpec:
    return spec(function=f"checks/forms.py:{name}", **kw)


@pytest.mark.parametrize(
    ("name", "passed", "score", "reason"),
    [
        ("as_bool", True, 1.0, "passed"),
        ("as_score", True, 0.7, None),
        ("as_low_score", False, 0.2, None),
        ("as_tuple", False, 0.0, "case late_refund is not fine"),
        ("as_score_tuple", True, 0.9, "nice"),
        ("as_dict", True, 1.0, "labels compared"),
        ("as_score_dict", False, 0.4, None),
        ("as_async", True, 1.0, "run run-1"),
        ("uses_all", True, 1.0, "passed"),
        ("kwargs_only", True, 1.0, "passed"),
    ],
)
async def test_function_return_forms(
    project: Project, name: str, passed: bool, score: float, reason: str | None
) -> None:
    result = await score_check(project, experiment(project), fn(name), view(), simulate=True, seed=1)
    assert (result.passed, result.score, result.error) == (passed, score, None)
    assert result.cost_usd == Decimal(0)
    if reason is not None:
        assert result.reason == reason
    else:
        assert "pass score 0.5" in result.reason


async def test_pass_score_decides_a_returned_score(project: Project) -> None:
    assert (await score(project, fn("as_score", pass_score=0.8))).passed is False
    assert (await score(project, fn("as_low_score", pass_score=0.2))).passed is True


async def test_function_cannot_change_what_other_checks_see(project: Project) -> None:
    attempt = view(output=dict(OUTPUT))
    exp = experiment(project, fn("mutates"), builtin("contains", value="Dana", field="reply"))
    results = await score_checks(project, exp, attempt, simulate=True, seed=1)
    assert [r.passed for r in results] == [True, True]
    assert attempt.output["reply"] == OUTPUT["reply"] and attempt.case.name == "late_refund"


async def test_function_file_is_found_in_the_experiment_folder_first(project: Project) -> None:
    result = await score(project, spec(function="local_checks.py:local"))
    assert (result.passed, result.reason) == (True, "local file")


async def test_crash_is_a_code_error_with_file_and_line(project: Project) -> None:
    result = await score(project, fn("crash"))
    assert result.passed is None and result.score is None and result.error is not None
    assert result.error["code"] == "CODE_ERROR"
    lines = FILES["checks/forms.py"].splitlines()
    line = lines.index("    return 1 / 0") + 1
    assert result.error["file"] == "checks/forms.py" and result.error["line"] == str(line)
    assert "ZeroDivisionError" in result.error["message"] and f"checks/forms.py:{line}" in result.error["message"]


async def test_crash_in_a_helper_points_at_the_helper(project: Project) -> None:
    result = await score(project, fn("crash_in_helper"))
    assert result.error is not None
    assert (result.error["file"], result.error["line"]) == ("checks/helper.py", "2")
    assert "ValueError: no good: refund" in result.error["message"]


@pytest.mark.parametrize(
    ("check", "words"),
    [
        (fn("bad_type"), "got str"),
        (fn("bad_score"), "in [0, 1]"),
        (fn("nan_score"), "in [0, 1]"),
        (fn("bad_dict"), "pass"),
        (fn("bad_tuple"), "3 items"),
        (fn("unknown_param"), "'reply'"),
        (fn("no_such_function"), "no function"),
        (spec(function="checks/nowhere.py:f"), "neither"),
        (spec(function="checks/broken.py:fine"), "broken at import"),
        (spec(function="../../../outside.py:f"), "leaves the project"),
    ],
    ids=["type", "score", "nan", "dict", "tuple", "param", "missing fn", "missing file", "import", "outside"],
)
async def test_unusable_function_is_a_code_error(project: Project, check: CheckSpec, words: str) -> None:
    result = await score(project, check)
    assert result.passed is None and result.error is not None
    assert result.error["code"] == "CODE_ERROR"
    assert words in result.error["message"]


async def test_results_serialise_money_as_strings(project: Project) -> None:
    result = await score(project, fn("as_score"))
    data = result.to_json()
    assert data["cost_usd"] == "0" and data["score"] == 0.7 and data["passed"] is True
    assert CheckResult.from_json(data) == result


async def test_score_checks_keeps_the_experiment_order(project: Project) -> None:
    checks = [fn("as_async", id="one"), builtin("contains", id="two", value="nope"), fn("crash", id="three")]
    exp = experiment(project, *checks)
    results = await score_checks(project, exp, view(), simulate=True, seed=3)
    assert [(r.check_id, r.passed) for r in results] == [("one", True), ("two", False), ("three", None)]


def test_judge_is_validated(project: Project) -> None:
    judge = {"agent": "a", "rubric": "r.md"}
    exp = experiment(project)
    assert judge_is_validated(exp, builtin("no_refusal"), lambda _e: False)
    assert not judge_is_validated(exp, spec(judge=judge), lambda _e: True)
    assert not judge_is_validated(exp, spec(judge=judge, validated_by="agree"), lambda _e: False)
    assert judge_is_validated(exp, spec(judge=judge, validated_by="agree"), lambda e: e == "agree")


# ---- the showcase's promises check ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def showcase(tmp_path_factory: pytest.TempPathFactory) -> Project:
    from aqven.project.init import init_project

    return load_project(init_project(tmp_path_factory.mktemp("showcase") / "lumen", "lumen"))


@pytest.mark.parametrize(
    ("output", "passed", "words"),
    [
        (
            {"reply": "Hi Dana,\n\nI've added a goodwill credit of €12.48.", "promises": ["Goodwill credit"]},
            True,
            "within policy",
        ),
        (
            {"reply": "Hi Marco,\n\nSorry! I can guarantee a full refund today.", "promises": []},
            False,
            'a guarantee: "I can guarantee a full refund today."',
        ),
        (
            {"reply": "Hello,\n\nA label is on its way.", "promises": ["I promise this will never happen again."]},
            False,
            "never happens again",
        ),
        ("Hey there, as a thank-you I'll give you a free upgrade to the Hub Pro.", False, "a free upgrade"),
    ],
    ids=["within policy", "guarantee", "in promises", "string output"],
)
async def test_showcase_promises_check(showcase: Project, output: Any, passed: bool, words: str) -> None:
    from aqven.research.experiments.loading import load_experiments

    experiments, _ = load_experiments(showcase)
    exp = experiments["reply_noninferior_mistral"]
    check = next(c for c in exp.spec.checks if c.function == "checks/promises.py:no_unkeepable_promise")
    result = await score_check(showcase, exp, check, view(output=output), simulate=True, seed=1)
    assert (result.passed, result.error) == (passed, None)
    assert words in result.reason
