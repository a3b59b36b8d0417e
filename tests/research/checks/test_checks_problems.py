"""`check_spec_problems`: what `aqven check` reports about a check before anything runs."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from aqven.project.loader import Project, load_project
from aqven.research.checks.problems import check_spec_problems
from aqven.research.diagnostics.experiments import check_experiment
from aqven.research.experiments.loading import load_experiments
from aqven.research.experiments.schema import CheckSpec, ExperimentSource, Subject
from support.projects import write_files

EXPERIMENT = """\
failure_mode: rude
description: Replies are polite.
subject: {flow: f}
dataset: {id: d}
checks:
  - id: fine
    builtin: no_refusal
question: {kind: look}
"""

FILES: dict[str, str] = {
    "aqven.yaml": "package: problems\n",
    "agents/judge.yaml": "model: openrouter:openai/gpt-4o-mini\nsimulator: sim.py:judge\n",
    "sim.py": "def judge(req):\n    return {'passed': True, 'reason': 'ok'}\n",
    "datasets/d.yaml": textwrap.dedent(
        """\
        cases:
          - name: one
            input: {ticket: hi}
            expected_output: {reply: hello, promises: [], count: 1}
          - name: two
            input: {ticket: yo}
        """
    ),
    "flows/f/flow.yaml": textwrap.dedent(
        """\
        input: {ticket: string}
        output: {reply: string, promises: [string], count: integer}
        nodes:
          - id: draft
            kind: code
            code: steps.py:draft
            inputs: {ticket: $input.ticket}
            output: {reply: string}
          - id: finish
            kind: code
            code: steps.py:finish
            inputs: {reply: $draft.out.reply}
            output: {reply: string, promises: [string], count: integer}
        """
    ),
    "flows/f/steps.py": textwrap.dedent(
        """\
        def draft(ticket):
            return {"reply": ticket}


        def finish(reply):
            return {"reply": reply, "promises": [], "count": 0}
        """
    ),
    "checks/good.py": "def ok(output, case=None):\n    return True\n\n\ndef needs_reply(reply):\n    return True\n",
    "checks/broken.py": "def ok(output):\n    return True\n\n\nraise RuntimeError('nope')\n",
    "experiments/e/experiment.yaml": EXPERIMENT,
    "experiments/e/prompts/rubric.md": "Is {{ output.reply }} polite, given {{ input.ticket }} and {{ context }}?\n",
    "experiments/e/prompts/unbound.md": "Is {{ output }} polite for {{ ticket }}?\n",
    "experiments/e/prompts/blind.md": "Is the reply to {{ input }} polite?\n",
    "experiments/e/prompts/wrong_field.md": "Is {{ output.subject }} polite?\n",
    "experiments/agreement/experiment.yaml": EXPERIMENT,
}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, dict[str, ExperimentSource]]:
    project = load_project(write_files(tmp_path_factory.mktemp("problems"), FILES))
    experiments, diagnostics = load_experiments(project)
    assert not diagnostics and not project.diagnostics
    return project, experiments


def problems(
    loaded: tuple[Project, dict[str, ExperimentSource]], check: dict[str, Any], subject: dict[str, Any] | None = None
) -> list[tuple[str, str, str]]:
    project, experiments = loaded
    exp = experiments["e"]
    if subject is not None:
        exp = ExperimentSource(
            spec=exp.spec.model_copy(update={"subject": Subject.model_validate(subject)}),
            folder=exp.folder,
            file=exp.file,
            local_flows=exp.local_flows,
        )
    return check_spec_problems(project, exp, CheckSpec.model_validate({"id": "c", **check}), experiments)


JUDGE = {"agent": "judge", "rubric": "prompts/rubric.md"}
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    # functions
    ("function ok", {"function": "checks/good.py:ok"}, set()),
    ("function file missing", {"function": "checks/none.py:ok"}, {"E_FILE_MISSING"}),
    ("function import fails", {"function": "checks/broken.py:ok"}, {"E_CODE_IMPORT"}),
    ("function missing", {"function": "checks/good.py:absent"}, {"E_CODE_FUNCTION_MISSING"}),
    ("function outside", {"function": "../../../elsewhere.py:ok"}, {"E_PATH_OUTSIDE_PROJECT"}),
    ("function signature", {"function": "checks/good.py:needs_reply"}, {"E_CODE_SIGNATURE"}),
    # judges
    ("judge validated", {"judge": JUDGE, "validated_by": "agreement"}, set()),
    ("judge unvalidated", {"judge": JUDGE}, {"W_JUDGE_UNVALIDATED"}),
    ("judge unknown experiment", {"judge": JUDGE, "validated_by": "nobody"}, {"E_UNKNOWN_EXPERIMENT"}),
    (
        "judge unknown agent",
        {"judge": {**JUDGE, "agent": "ghost"}, "validated_by": "agreement"},
        {"E_UNKNOWN_AGENT"},
    ),
    (
        "rubric missing",
        {"judge": {**JUDGE, "rubric": "prompts/none.md"}, "validated_by": "agreement"},
        {"E_FILE_MISSING"},
    ),
    (
        "rubric outside",
        {"judge": {**JUDGE, "rubric": "../../../r.md"}, "validated_by": "agreement"},
        {"E_PATH_OUTSIDE_PROJECT"},
    ),
    (
        "rubric unbound",
        {"judge": {**JUDGE, "rubric": "prompts/unbound.md"}, "validated_by": "agreement"},
        {"E_PROMPT_UNBOUND"},
    ),
    (
        "rubric blind",
        {"judge": {**JUDGE, "rubric": "prompts/blind.md"}, "validated_by": "agreement"},
        {"W_RUBRIC_WITHOUT_OUTPUT"},
    ),
    (
        "rubric wrong field",
        {"judge": {**JUDGE, "rubric": "prompts/wrong_field.md"}, "validated_by": "agreement"},
        {"E_CHECK_FIELD"},
    ),
    (
        "pass_fail judge with pass_score",
        {"judge": JUDGE, "validated_by": "agreement", "pass_score": 0.7},
        {"W_CHECK_PARAM_UNUSED"},
    ),
    (
        "score judge with pass_score",
        {"judge": {**JUDGE, "scale": "score"}, "validated_by": "agreement", "pass_score": 0.7},
        set(),
    ),
    # built-in parameters
    ("contains ok", {"builtin": "contains", "value": "x"}, set()),
    ("contains without value", {"builtin": "contains"}, {"E_CHECK_PARAMS"}),
    ("not_contains without value", {"builtin": "not_contains", "value": ""}, {"E_CHECK_PARAMS"}),
    ("regex ok", {"builtin": "regex", "pattern": r"^\w+"}, set()),
    ("regex without pattern", {"builtin": "regex"}, {"E_CHECK_PARAMS"}),
    ("regex invalid", {"builtin": "regex", "pattern": "(unclosed"}, {"E_CHECK_PARAMS"}),
    ("regex with a lookahead (not RE2)", {"builtin": "regex", "pattern": "(?=refund)re"}, {"E_CHECK_PARAMS"}),
    ("regex with a backreference (not RE2)", {"builtin": "regex", "pattern": r"(a)\1"}, {"E_CHECK_PARAMS"}),
    ("json_schema ok", {"builtin": "json_schema", "schema": {"type": "object"}}, set()),
    ("json_schema without schema", {"builtin": "json_schema"}, {"E_CHECK_PARAMS"}),
    ("json_schema invalid", {"builtin": "json_schema", "schema": {"type": "nope"}}, {"E_CHECK_PARAMS"}),
    ("length ok", {"builtin": "length", "field": "reply", "max": 10}, set()),
    ("length without bounds", {"builtin": "length", "field": "reply"}, {"E_CHECK_PARAMS"}),
    ("length min above max", {"builtin": "length", "field": "reply", "min": 5, "max": 2}, {"E_CHECK_PARAMS"}),
    ("cost ok", {"builtin": "cost_at_most", "usd": "0.01"}, set()),
    ("cost without usd", {"builtin": "cost_at_most"}, {"E_CHECK_PARAMS"}),
    ("cost negative", {"builtin": "cost_at_most", "usd": "-1"}, {"E_CHECK_PARAMS"}),
    ("latency without seconds", {"builtin": "latency_at_most"}, {"E_CHECK_PARAMS"}),
    ("unused parameter", {"builtin": "contains", "value": "x", "pattern": "y"}, {"W_CHECK_PARAM_UNUSED"}),
    ("function with field", {"function": "checks/good.py:ok", "field": "reply"}, {"W_CHECK_PARAM_UNUSED"}),
    # fields
    ("field ok", {"builtin": "contains", "value": "x", "field": "promises.0"}, set()),
    ("field absent", {"builtin": "contains", "value": "x", "field": "subject"}, {"E_CHECK_FIELD"}),
    ("field inside a string", {"builtin": "regex", "pattern": "x", "field": "reply.text"}, {"E_CHECK_FIELD"}),
    ("field syntax", {"builtin": "no_refusal", "field": "reply..x"}, {"E_CHECK_FIELD"}),
    ("length of an integer", {"builtin": "length", "field": "count", "max": 3}, {"E_CHECK_FIELD"}),
    ("length of the whole object", {"builtin": "length", "max": 3}, {"E_CHECK_FIELD"}),
    ("equals_expected, one case lacks it", {"builtin": "equals_expected", "field": "reply"}, {"W_CHECK_NO_EXPECTED"}),
]


@pytest.mark.parametrize(("check", "codes"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_problem_codes(
    loaded: tuple[Project, dict[str, ExperimentSource]], check: dict[str, Any], codes: set[str]
) -> None:
    found = problems(loaded, check)
    assert {code for code, _, _ in found} == codes, found
    for code, message, hint in found:
        assert message and hint, code
        assert "'c'" in message


def test_field_is_checked_against_the_range_end(loaded: tuple[Project, dict[str, ExperimentSource]]) -> None:
    check = {"builtin": "contains", "value": "x", "field": "promises"}
    assert problems(loaded, check, {"flow": "f"}) == []
    assert problems(loaded, check, {"flow": "f", "to": "finish"}) == []
    [(code, message, _)] = problems(loaded, check, {"flow": "f", "to": "draft"})
    assert code == "E_CHECK_FIELD" and "node 'draft'" in message
    assert problems(loaded, {**check, "field": "reply"}, {"flow": "f", "to": "draft"}) == []


def test_import_error_names_file_and_line(loaded: tuple[Project, dict[str, ExperimentSource]]) -> None:
    [(code, message, _)] = problems(loaded, {"function": "checks/broken.py:ok"})
    assert code == "E_CODE_IMPORT" and "checks/broken.py:5" in message and "RuntimeError" in message


def test_aqven_check_reports_warnings_as_warnings(tmp_path: Path) -> None:
    experiment = EXPERIMENT.replace(
        "  - id: fine\n    builtin: no_refusal\n",
        "  - id: fine\n    builtin: no_refusal\n"
        "  - id: tone\n    judge: {agent: judge, rubric: prompts/rubric.md}\n"
        "  - id: broken\n    builtin: contains\n",
    )
    project = load_project(write_files(tmp_path, {**FILES, "experiments/e/experiment.yaml": experiment}))
    experiments, _ = load_experiments(project)
    found = {d.code: d for d in check_experiment(project, experiments["e"], experiments)}
    unvalidated, params = found["W_JUDGE_UNVALIDATED"], found["E_CHECK_PARAMS"]
    lines = experiment.splitlines()
    assert unvalidated.severity == "warning" and unvalidated.file == "experiments/e/experiment.yaml"
    assert unvalidated.line == lines.index("  - id: tone") + 1
    assert params.severity == "error" and params.line == lines.index("  - id: broken") + 1


def test_showcase_checks_are_clean(tmp_path: Path) -> None:
    from aqven.project.init import init_project

    project = load_project(init_project(tmp_path / "lumen", "lumen"))
    experiments, _ = load_experiments(project)
    assert experiments
    for exp in experiments.values():
        for check in exp.spec.checks:
            assert check_spec_problems(project, exp, check, experiments) == [], (exp.id, check.id)
