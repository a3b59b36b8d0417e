"""Judge correction end to end (issue 10, item 3): a judge-agreement experiment's held-out finding records the
judge's sensitivity and specificity; a series deciding on that judge (validated_by) is corrected by it, and its
sentence says so and names the finding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from aqven.project.split import side_of
from aqven.research.diagnostics.workspace import check_workspace
from support.series_kit import PACKAGE, case_names, client_for, settle, start, write_tiny

JUDGE_AGENT = """\
model: openrouter:test/priced
settings: {temperature: 0, max_tokens: 100, timeout_s: 10}
output_mode: tool
output_retries: 0
simulator: sim/judge.py:judge
"""

JUDGE_SIM = '''\
"""A judge with sensitivity 0.9 and specificity 0.8: it passes a good item 9 times in 10, a bad one 2 in 10."""

from typing import Any

from aqven.models.simulator import SimReply, SimRequest


def _good(value: Any) -> bool:
    return "good" in str(value)


async def judge(req: SimRequest) -> SimReply:
    # A judge check reads the attempt's output; the agreement flow's node reads the labelled item's text.
    good = _good(req.inputs.get("output")) if req.node_id.startswith("check:") else _good(req.inputs.get("text"))
    right = req.rng().random() < (0.9 if good else 0.8)
    passed = good if right else not good
    return SimReply(output={"passed": passed, "reason": "looked at it"}, input_tokens=1000, output_tokens=0)
'''

GRADE_FLOW = """\
input: {text: string}
output: {passed: boolean}
nodes:
  - id: grade
    kind: llm
    agent: j
    prompt: grade.md
    inputs: {text: $input.text}
    output: {passed: boolean}
"""

AGREE_EXPERIMENT = """\
failure_mode: judge_error
description: The judge j agrees with people on more than 65% of the labelled items.
subject: {flow: grade}
dataset: {id: labelled}
checks:
  - id: agrees
    builtin: equals_expected
    field: passed
metrics:
  agrees: {check: agrees}
question: {kind: threshold, metric: agrees, bound: 0.6, margin: 0.05}
judge_agreement: {label: passed}
repeats: 3
"""

JUDGED_EXPERIMENT = """\
failure_mode: bad_reply
description: The judge j passes the writer's replies on more than 55% of the cases.
subject: {flow: answer}
dataset: {id: cases}
checks:
  - id: tone
    judge: {agent: j, rubric: rubric.md}
    validated_by: agree
metrics:
  tone: {check: tone}
question: {kind: threshold, metric: tone, bound: 0.5, margin: 0.05}
repeats: 2
"""


def labelled(names: list[str]) -> str:
    rows = []
    for i, name in enumerate(names):
        good = i % 2 == 0
        text = "good" if good else "bad"
        rows.append(
            f"  - name: {name}\n    input: {{text: {text}}}\n    expected_output: {{passed: {str(good).lower()}}}\n"
        )
    return "cases:\n" + "".join(rows)


def project(tmp_path: Path) -> Path:
    names = case_names(10, 30) + [f"fail_{i:03d}" for i in range(30)]
    return write_tiny(
        tmp_path / "tiny",
        names,
        cap="50.00",
        overrides={
            "agents/j.yaml": JUDGE_AGENT,
            "sim/judge.py": JUDGE_SIM,
            "flows/grade/flow.yaml": GRADE_FLOW,
            "flows/grade/grade.md": "Is this good? {{ text }}\n",
            "datasets/labelled.yaml": labelled(case_names(10, 60, prefix="lab")),
            "experiments/agree/experiment.yaml": AGREE_EXPERIMENT,
            "experiments/judged/experiment.yaml": JUDGED_EXPERIMENT,
            "experiments/judged/rubric.md": "Pass a good reply: {{ output }}\n",
        },
    )


def run(client: Any, experiment: str, on: str = "holdout") -> dict[str, Any]:
    # A fixed simulators' seed: the intervals below are 95% ones, so a series drawing its own seed would miss
    # the truth now and then (1 in 40 for each bound); replayed, the test asserts the same series every time.
    sid = start(client, experiment_id=experiment, on=on, simulate=True, seed=20261201)["series"]["series_id"]
    snap = settle(client, sid, timeout=120)
    assert snap["status"] == "done", snap
    return snap


def test_agreement_finding_records_accuracy_and_the_judged_series_is_corrected(tiny_env: Path, tmp_path: Path) -> None:
    root = project(tmp_path)
    _ws, diagnostics = check_workspace(root)
    # (the tiny kit's `ranged` dataset lacks a case's node_outputs on purpose: E_CASE_NODE_OUTPUTS)
    assert not [d for d in diagnostics if d.severity == "error" and not d.code.startswith("E_CASE_")], diagnostics
    with client_for(root) as client:
        before = run(client, "judged")
        # Not validated yet (no confirmed agreement finding): a signal, and nothing corrected.
        assert before["verdict"]["verdict"] == "signal" and before["verdict"]["judge_corrected_by"] is None

        agree = run(client, "agree")
        assert agree["verdict"]["verdict"] == "confirmed", agree["verdict"]["text"]
        finding = yaml.safe_load((root / agree["finding"]).read_text())
        block = finding["judge_agreement"]
        assert block["variant"] == "as_written" and block["label"] == "passed" and block["positive"] is True
        sens, spec = block["sensitivity"], block["specificity"]
        assert sens["cases"] + spec["cases"] == finding["scope"]["cases"]
        assert sens["low"] < 0.9 < sens["high"] and spec["low"] < 0.8 < spec["high"]
        # The per-case tallies are unnamed and sorted: no held-out case can be told from its place.
        assert block["tallies"]["positive"] == sorted(block["tallies"]["positive"])
        assert sum(r for _y, r in block["tallies"]["positive"]) == sens["attempts"]

        after = run(client, "judged")
        verdict = after["verdict"]
        assert verdict["judge_corrected_by"] == agree["finding"]
        assert verdict["verdict"] in ("confirmed", "refuted", "inconclusive")
        assert f"corrected for the judge's errors by finding {agree['finding']} (Rogan–Gladen;" in verdict["text"]
        decided = verdict["decided"][0]
        fix = decided["judge_correction"]
        assert fix["method"] == "rogan_gladen" and fix["series_id"] == agree["series_id"]
        assert fix["observed"]["level"] == 0.975 and fix["sensitivity"]["level"] == 0.9875
        # The corrected estimate is the Rogan–Gladen inverse of what the judge decided.
        se, sp, q = fix["sensitivity"]["estimate"], fix["specificity"]["estimate"], fix["observed"]["estimate"]
        assert abs(decided["estimate"] - (q + sp - 1) / (se + sp - 1)) < 1e-9
        # The truth: the share of held-out cases whose reply is good (names without "fail").
        held = [n for n in yaml.safe_load((root / "datasets/cases.yaml").read_text())["cases"]]
        names = [c["name"] for c in held if side_of(PACKAGE, c["name"]) == "holdout"]
        truth = sum("fail" not in n for n in names) / len(names)
        assert decided["low"] <= truth <= decided["high"]
        assert decided["high"] - decided["low"] > fix["observed"]["high"] - fix["observed"]["low"]
        cell = verdict["cells"][0]
        assert cell["judge_corrected"]["estimate"] == decided["estimate"]
        # The judged series' finding carries the corrected interval too, and names the agreement finding.
        judged = yaml.safe_load((root / after["finding"]).read_text())
        assert judged["verdict"]["text"] == verdict["text"]
        assert judged["cells"][0]["judge_corrected"] == cell["judge_corrected"]
        assert judged["judge_corrected_by"] == agree["finding"]
        assert judged["decided"][0]["estimate"] == decided["estimate"]
        assert judged["decided"][0]["judge_correction"]["sensitivity"] == fix["sensitivity"]


def test_aqven_check_knows_judge_agreement(tiny_env: Path, tmp_path: Path) -> None:
    root = project(tmp_path)
    exp = root / "experiments" / "agree" / "experiment.yaml"
    exp.write_text(
        AGREE_EXPERIMENT.replace(
            "question: {kind: threshold, metric: agrees, bound: 0.6, margin: 0.05}",
            "variants: [{id: a}, {id: b}]\nquestion: {kind: compare, metric: agrees, baseline: a, margin: 0.05}",
        )
    )
    (root / "datasets" / "labelled.yaml").write_text(
        labelled(case_names(3, 3, prefix="lab")).replace("passed: false", "passed: true")
    )
    _ws, diagnostics = check_workspace(root)
    got = {d.code: d for d in diagnostics if d.file == "experiments/agree/experiment.yaml"}
    assert got["E_AGREEMENT_QUESTION"].severity == "error"
    assert got["W_AGREEMENT_LABELS"].severity == "warning"
    assert "6 selected case(s) labelled passing and 0 failing" in got["W_AGREEMENT_LABELS"].message
    exp.write_text(AGREE_EXPERIMENT.replace("judge_agreement: {label: passed}", "judge_agreement: {lable: passed}"))
    _ws, diagnostics = check_workspace(root)
    assert any(d.severity == "error" and d.file == "experiments/agree/experiment.yaml" for d in diagnostics)
