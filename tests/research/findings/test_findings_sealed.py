"""Findings that verify (issue 12, item 4): a forged finding is caught, FINDINGS.md leaves it out, a clone says what
it could not check, and a judge-decided finding names its judge and what validates it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from aqven.research.diagnostics.workspace import check_workspace
from aqven.research.experiments.workspace import Workspace
from aqven.research.findings import records as findings
from aqven.research.findings.records import finding_key, integrity_of, seal_of
from aqven.research.findings.writing import render_findings_md
from aqven.research.series.start import _validating_finding
from support.commands import aqven, cli_env
from support.series_kit import SIM_PY, case_names, client_for, first_on, settle, start, write_tiny


def diagnostics(root: Path) -> dict[str, list[str]]:
    if root.name == "clone":  # a colleague's clone: the project's files, none of this machine's settings or store
        saved = os.environ.pop("AQVEN_STORE", None)
        try:
            _ws, found = check_workspace(root)
        finally:
            if saved is not None:
                os.environ["AQVEN_STORE"] = saved
    else:
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


MADE_UP = "ser_ffffffffffffffff"


def made_up_finding(root: Path, template: Path) -> Path:
    """What an agent that read `.aqven/finding.key` writes: a confirmed finding of `rate` for a series that never
    ran, its integrity hash and seal computed as the server would."""
    key = finding_key(root)
    assert key is not None
    data = yaml.safe_load(template.read_text())
    data["experiment_id"] = "rate"
    data["series_id"] = MADE_UP
    data["verdict"]["verdict"] = "confirmed"
    data["verdict"]["text"] = "Confirmed: the writer answers well on more than 55% of the cases."
    data["verdict"]["reason"] = None
    data.pop("seal", None)
    path = findings.finding_path(root, "rate", MADE_UP)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(findings.dump_finding(findings.seal(data, key)))
    return path


@pytest.mark.sqlite_only  # its colleague's machine has a database file of its own
def test_a_made_up_finding_for_a_series_that_never_ran_is_an_error_and_never_confirmed(
    tiny_env: Path, tmp_path: Path
) -> None:
    """Sealed with the key the agent read, a finding of a series this machine's database never held said
    W_FINDING_UNVERIFIED only, `verifies: true` over REST, confirmed in FINDINGS.md, and counted for a judge's
    validated_by."""
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
    with client_for(root) as client:
        real = settle(client, start(client, experiment_id="free", on="holdout", simulate=True)["series"]["series_id"])
    assert real["finding"]
    path = made_up_finding(root, root / real["finding"])
    series_line = next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith("series_id:"))

    # aqven check (the real command): an error with its file and line, message and hint
    env = cli_env(AQVEN_PRICES_FILE=str(tiny_env))
    checked = aqven("check", "--json", cwd=root, env=env)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    found = [d for d in json.loads(checked.stdout)["diagnostics"] if d["code"] == "E_FINDING_SERIES_MISSING"]
    assert [(d["file"], d["line"], d["severity"]) for d in found] == [
        (f"experiments/rate/findings/{MADE_UP}.yaml", series_line, "error")
    ]
    assert MADE_UP in found[0]["message"] and "never ran here" in found[0]["message"] and found[0]["hint"]

    with client_for(root) as client:  # its start regenerates FINDINGS.md
        listed = {f["series_id"]: f for f in client.get("/api/findings").json()["findings"]}
        assert listed[MADE_UP]["intact"] is True and listed[MADE_UP]["verifies"] is False
        assert listed[MADE_UP]["code"] == "E_FINDING_SERIES_MISSING"
        assert listed[real["series_id"]]["verifies"] is True and listed[real["series_id"]]["code"] is None
        studio = {f["series_id"]: f for f in client.get("/api/studio/findings").json()["findings"]}
        assert studio[MADE_UP]["verifies"] is False and studio[MADE_UP]["code"] == "E_FINDING_SERIES_MISSING"
        # While it is there, no series starts (an error of the project); and it validates no judge.
        r = client.post("/api/series", json={"experiment_id": "judged", "on": "holdout", "simulate": True})
        assert r.status_code == 422 and r.json()["error"]["code"] == "NOT_RUNNABLE", r.text
        assert "E_FINDING_SERIES_MISSING" in {p["code"] for p in r.json()["error"]["details"]["problems"]}
    assert _validating_finding(Workspace.load(root), "rate") is None
    md = (root / "FINDINGS.md").read_text()
    shelves, unverified = md.split("## Could not be verified")
    assert MADE_UP not in shelves and "Confirmed: the writer" not in md
    assert MADE_UP in unverified and real["series_id"] in shelves and real["series_id"] not in unverified
    assert md == render_findings_md(root, findings.read_findings(root))

    # A clone (no database): today's warning, and FINDINGS.md there shelves no finding it cannot verify either.
    clone = tmp_path / "clone"
    shutil.copytree(root, clone, ignore=shutil.ignore_patterns(".aqven"))
    found_clone = diagnostics(clone)
    assert "E_FINDING_SERIES_MISSING" not in found_clone and "E_FINDING_TAMPERED" not in found_clone
    assert len(found_clone["W_FINDING_UNVERIFIED"]) == 2
    saved = os.environ.pop("AQVEN_STORE", None)
    try:
        cloned_md = render_findings_md(clone, findings.read_findings(clone))
    finally:
        if saved is not None:
            os.environ["AQVEN_STORE"] = saved
    shelves, unverified = cloned_md.split("## Could not be verified")
    assert "### On holdout cases" not in shelves and "### Signals" not in shelves and MADE_UP in unverified
    assert "W_FINDINGS_STALE" in found_clone  # the FINDINGS.md it got shelves what cannot be verified here

    # A colleague's machine: its own database (a series of its own), no finding key yet. Findings written elsewhere
    # are not errors there (nothing of this machine's sealed them): they warn, block no series, and shelve nothing.
    other = tmp_path / "colleague"
    shutil.copytree(root, other, ignore=shutil.ignore_patterns(".aqven"))
    with client_for(other) as client:
        assert client.get("/api/project").status_code == 200  # its database now exists
    assert (other / ".aqven" / "aqven.sqlite").is_file() and not (other / ".aqven" / "finding.key").exists()
    found_other = diagnostics(other)
    assert "E_FINDING_SERIES_MISSING" not in found_other and len(found_other["W_FINDING_UNVERIFIED"]) == 2
    other_md = render_findings_md(other, findings.read_findings(other))
    shelves, unverified = other_md.split("## Could not be verified")
    assert MADE_UP in unverified and MADE_UP not in shelves
