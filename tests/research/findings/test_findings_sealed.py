"""Findings that verify (issue 12, item 4): a forged finding is caught, FINDINGS.md leaves it out, a clone says what
it could not check, and a judge-decided finding names its judge and what validates it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from aqven.research.diagnostics.workspace import check_workspace
from aqven.research.findings import records as findings
from aqven.research.findings.records import finding_key, integrity_of, seal_of
from aqven.research.findings.writing import render_findings_md
from support.commands import aqven, cli_env
from support.series_kit import SIM_PY, case_names, client_for, first_on, settle, start, write_tiny


def diagnostics(root: Path) -> dict[str, list[str]]:
    _ws, found = check_workspace(root)
    out: dict[str, list[str]] = {}
    for d in found:
        out.setdefault(d.code, []).append(d.message)
    return out


def tiny_holdout(tmp_path: Path) -> Path:
    good = case_names(2, 12)
    bad = [first_on("holdout", "fail", i * 1000) for i in range(4)]
    return write_tiny(tmp_path / "tiny", good + bad)


def forge(path: Path, *, key: bytes | None) -> dict[str, Any]:
    """What a forger does: a better estimate and sentence, the integrity hash recomputed (and, with the key read
    from .aqven/, the seal too)."""
    data = yaml.safe_load(path.read_text())
    data["cells"][0]["estimate"] = 0.99
    data["verdict"]["text"] = data["verdict"]["text"].replace("Inconclusive", "Confirmed")
    data["verdict"]["verdict"] = "confirmed"
    data["integrity"] = integrity_of(data)
    if key is not None:
        data["seal"] = seal_of(data, key)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))
    return data


def test_a_forged_finding_is_caught_and_left_out_of_findings_md(tiny_env: Path, tmp_path: Path) -> None:
    root = tiny_holdout(tmp_path)
    with client_for(root) as client:
        snap = settle(client, start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"])
        other = settle(client, start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"])
    assert snap["finding"] and other["finding"]
    assert "E_FINDING_TAMPERED" not in diagnostics(root) and "W_FINDING_UNVERIFIED" not in diagnostics(root)
    key = finding_key(root)
    assert key is not None and (root / ".aqven" / ".gitignore").read_text().strip().endswith("*")
    path = root / snap["finding"]
    original = path.read_text()

    # 1. the plain content hash recomputed: the seal gives it away
    forge(path, key=None)
    found = diagnostics(root)
    assert any("seal does not match" in m for m in found["E_FINDING_TAMPERED"]), found
    # 2. the seal recomputed too, with the key: the verdict recomputed from the stored attempts gives it away
    forge(path, key=key)
    found = diagnostics(root)
    assert any("differs from the verdict recomputed" in m for m in found["E_FINDING_TAMPERED"]), found
    env = cli_env(AQVEN_PRICES_FILE=str(tiny_env))
    checked = aqven("check", cwd=root, env=env)
    assert checked.returncode != 0 and "E_FINDING_TAMPERED" in checked.stdout + checked.stderr

    # The next server start regenerates FINDINGS.md from the findings that verify: the forged one is left out.
    with client_for(root) as client:
        listed = client.get("/api/findings").json()["findings"]
        assert {f["series_id"]: f["verifies"] for f in listed} == {snap["series_id"]: False, other["series_id"]: True}
    md = (root / "FINDINGS.md").read_text()
    assert snap["series_id"] not in md.split("## Held-out reads")[0] and other["series_id"] in md
    assert "0.99" not in md
    assert md == render_findings_md(root, findings.read_findings(root))

    # 3. a clone (no database, no key): only the content hash can be checked, and check says so
    path.write_text(original)
    clone = tmp_path / "clone"
    shutil.copytree(root, clone, ignore=shutil.ignore_patterns(".aqven"))
    found = diagnostics(clone)
    assert "E_FINDING_TAMPERED" not in found
    assert len(found["W_FINDING_UNVERIFIED"]) == 2
    assert all("not in this machine's database" in m for m in found["W_FINDING_UNVERIFIED"])
    # ... and an edit whose content hash was not recomputed is still caught there
    edited = yaml.safe_load(original)
    edited["cells"][0]["estimate"] = 0.99
    (clone / snap["finding"]).write_text(yaml.safe_dump(edited, sort_keys=False))
    assert "E_FINDING_TAMPERED" in diagnostics(clone)


JUDGE_AGENT = """\
model: openrouter:test/priced
settings: {temperature: 0, max_tokens: 100, timeout_s: 10}
output_retries: 0
simulator: sim/agents.py:judge
"""

JUDGE_SIM = (
    SIM_PY
    + """

def judge(req: SimRequest) -> SimReply:
    reply = req.inputs["output"]["reply"]
    return SimReply(output={"passed": reply == "good", "reason": "judged"}, input_tokens=10, output_tokens=0)
"""
)

JUDGED = """\
failure_mode: bad_reply
description: A judge finds the writer's answer good on more than 55% of the cases.
subject: {{flow: answer}}
dataset: {{id: cases}}
checks:
  - id: tone
    judge: {{agent: judge, rubric: prompts/tone.md}}
{validated}
metrics:
  tone: {{check: tone}}
question: {{kind: threshold, metric: tone, bound: 0.5, margin: 0.05}}
repeats: 1
"""


def test_a_judge_decided_finding_names_its_judge_and_what_validates_it(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(
        tmp_path / "tiny",
        case_names(2, 12),
        overrides={
            "agents/judge.yaml": JUDGE_AGENT,
            "sim/agents.py": JUDGE_SIM,
            "experiments/judged/experiment.yaml": JUDGED.format(validated="    validated_by: rate"),
            "experiments/judged/prompts/tone.md": "Is this reply good? {{ output.reply }}\n",
            "experiments/free/experiment.yaml": JUDGED.format(validated=""),
            "experiments/free/prompts/tone.md": "Is this reply good? {{ output.reply }}\n",
        },
    )

    def finding(snap: dict[str, Any]) -> dict[str, Any]:
        data: dict[str, Any] = yaml.safe_load((root / snap["finding"]).read_text())
        return data

    with client_for(root) as client:
        free = settle(client, start(client, experiment_id="free", on="holdout", simulate=True)["series"]["series_id"])
        early = settle(
            client, start(client, experiment_id="judged", on="holdout", simulate=True)["series"]["series_id"]
        )
        rate = settle(client, start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"])
        later = settle(
            client, start(client, experiment_id="judged", on="holdout", simulate=True)["series"]["series_id"]
        )
    # No validated_by: the sentence says so.
    assert free["verdict"]["verdict"] == "signal" and "judge without validated_by" in free["verdict"]["text"]
    assert finding(free)["judge"] == {
        "check": "tone",
        "agent": "judge",
        "model": "openrouter:test/priced",
        "validated_by": None,
        "validated_by_finding": None,
    }
    # validated_by before its experiment had a confirmed finding: the real reason, not "without validated_by".
    assert early["verdict"]["verdict"] == "signal"
    assert "judge whose validated_by rate has no confirmed finding yet" in early["verdict"]["text"]
    assert "without validated_by" not in early["verdict"]["text"]
    assert finding(early)["judge"]["validated_by"] == "rate"
    assert finding(early)["judge"]["validated_by_finding"] is None
    # Once rate has a confirmed finding, the judge is validated and the finding names the one it rests on.
    assert rate["verdict"]["verdict"] == "confirmed"
    assert later["verdict"]["verdict"] == "confirmed", later["verdict"]["text"]
    assert finding(later)["judge"]["validated_by_finding"] == rate["finding"]
    assert finding(later)["judge"]["model"] == "openrouter:test/priced"
