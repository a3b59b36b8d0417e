"""Findings written by real series: the showcase's known truth, every field, FINDINGS.md, tampering, repair."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from aqven import ENGINE_VERSION
from aqven.project.init import init_project
from aqven.research.diagnostics.workspace import check_workspace
from aqven.research.findings import records as findings
from aqven.research.findings.records import is_intact
from aqven.research.findings.writing import render_findings_md, write_finding
from support.commands import aqven, cli_env
from support.series_kit import (
    attempts,
    case_names,
    client_for,
    first_on,
    get,
    rows,
    settle,
    start,
    wait_until,
    write_tiny,
)

# DESIGN §8: what a finding holds.
FINDING_KEYS = {
    "experiment_id",
    "series_id",
    "failure_mode",
    "question",
    "verdict",
    "cells",
    "variants",
    "scope",
    "spend",
    "infra_errors",
    "inputs",
    "integrity",
}
SCOPE_KEYS = {"cases", "repeats", "started_at", "ended_at", "engine_version", "simulated", "on", "dataset"}


def finding_codes(root: Path) -> list[str]:
    _ws, diagnostics = check_workspace(root)
    return [d.code for d in diagnostics if d.code in ("E_FINDING_TAMPERED", "W_FINDINGS_STALE")]


# Once, on SQLite: it is the demo's 8,700-attempt series, and the held-out finding's path on PostgreSQL is the next
# two tests' (written, counted in FINDINGS.md, checked for tampering); its PostgreSQL copy took 41-53 s of the suite.
@pytest.mark.sqlite_only
def test_showcase_noninferior_mistral_on_holdout_is_confirmed_and_writes_its_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The simulators' true difference is -0.003 against a 0.02 margin, with 6 repeats: confirmed.

    A real series through the scheduler on all 725 held-out refund cases: an interval valid for every
    population of cases needs several hundred of them to clear a 2-point margin (tests/test_verdict.py:
    test_noninferior_and_compare shows 212 cases failing to). The series is deterministic: the same seeds
    give the same verdict.
    """
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0")
    root = init_project(tmp_path / "lumen", "lumen")
    # About 8,700 attempts cost about $2 at the simulated prices: this computer's cap is raised, as a
    # person would (the local override), so the series runs through.
    (root / ".aqven").mkdir(exist_ok=True)
    (root / ".aqven" / "local.yaml").write_text('research: {spend_cap_usd: "4.00"}\n')
    with client_for(root) as client:
        out = start(client, experiment_id="reply_noninferior_mistral", on="holdout", simulate=True, seed=SEED)
        sid = out["series"]["series_id"]
        assert out["series"]["status"] == "running"
        snap = settle(client, sid, timeout=600)
        assert snap["status"] == "done", snap.get("error")
        assert snap["progress"]["done"] == 725 * 6 * 2 and snap["progress"]["infra_errors"] == 0
        verdict = snap["verdict"]
        assert verdict["verdict"] == "confirmed", verdict["text"]
        assert verdict["text"].startswith(
            "Confirmed on 725 held-out cases × 6 repeats (simulated): mistral is not worse"
        )
        (decided,) = verdict["decided"]
        assert decided["variant"] == "mistral" and decided["baseline"] == "gpt"
        assert decided["low"] > -0.02  # the rule of a noninferior question: L > -m
        assert snap["finding"] == f"experiments/reply_noninferior_mistral/findings/{sid}.yaml"
        listed = client.get("/api/findings").json()
        assert [(f["series_id"], f["intact"], f["verdict"]) for f in listed["findings"]] == [(sid, True, "confirmed")]
        assert listed["findings_md"] == (root / "FINDINGS.md").read_text()
        spent = snap["spend"]["usd"]

    path = root / snap["finding"]
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    assert set(data) >= FINDING_KEYS, FINDING_KEYS - set(data)
    assert is_intact(data) and data["integrity"].startswith("sha256:")
    assert data["experiment_id"] == "reply_noninferior_mistral" and data["series_id"] == sid
    assert data["failure_mode"] == "overpromise"
    assert data["verdict"]["verdict"] == "confirmed" and data["verdict"]["text"] == verdict["text"]
    assert {c["variant"] for c in data["cells"]} == {"gpt", "mistral"}
    for cell in data["cells"]:
        assert {"estimate", "low", "high"} <= set(cell) and cell["low"] <= cell["estimate"] <= cell["high"]
    assert [c["variant"] for c in data["comparisons"]] == ["mistral"]
    models = {v["id"]: v["models"] for v in data["variants"]}
    assert models == {
        "gpt": ["openai/gpt-4.1-mini"],
        "mistral": ["mistralai/mistral-small-3.2-24b-instruct"],
    }
    scope = data["scope"]
    assert set(scope) >= SCOPE_KEYS
    assert scope["cases"] == 725 and scope["repeats"] == 6 and scope["on"] == "holdout"
    assert scope["simulated"] is True and scope["engine_version"] == ENGINE_VERSION
    assert scope["started_at"] <= scope["ended_at"]
    assert data["spend"]["usd"] == spent and data["spend"]["lower_bound"] is False
    assert data["infra_errors"]["count"] == 0
    files = data["inputs"]["files"]
    assert re.fullmatch(r"[0-9a-f]{64}", data["inputs"]["hash"])
    for needed in (
        "experiments/reply_noninferior_mistral/experiment.yaml",
        "datasets/support_case_bulk#cases",  # the content of its own cases, not the whole dataset file
        "flows/support_case/revise.md",
        "agents/mistral.yaml",
        "checks/promises.py",
        "sim/agents.py",
    ):
        assert needed in files, needed
    # Only what the series ran: no flow, agent or dataset it never used.
    assert not [f for f in files if f.startswith(("flows/judge_panel", "agents/qwen", "datasets/support_case_cases"))]
    assert data["seal"].startswith("hmac-sha256:") and data["evidence"]["attempts"] == 725 * 6 * 2
    assert data["evidence"]["inputs_hashes"] == [data["inputs"]["hash"]]  # every attempt ran on one set of inputs
    assert [(r["series_id"], r["status"], r["cases"]) for r in data["reads"]] == [(sid, "done", 725)]
    assert data["split"].startswith("sha256:") and data["scope"]["seed"] == SEED

    md = (root / "FINDINGS.md").read_text()
    assert "## overpromise" in md and "### On holdout cases" in md
    line = next(x for x in md.splitlines() if x.startswith("- **reply_noninferior_mistral**"))
    assert f"“{verdict['text']}”" in line
    assert "*(simulated)*" in line and "725 cases × 6 repeats of `support_case_bulk`" in line
    assert f"({snap['finding']})" in line
    assert finding_codes(root) == []

    # Editing the finding is caught; so is an edited FINDINGS.md.
    path.write_text(path.read_text().replace("verdict: confirmed", "verdict: refuted"))
    assert "E_FINDING_TAMPERED" in finding_codes(root)


SEED = 12  # the simulators' seed of the showcase series: a replay on purpose, so its verdict is known


def tiny_holdout(tmp_path: Path) -> tuple[Path, list[str]]:
    good = case_names(2, 12)
    bad = [first_on("holdout", "fail", i * 1000) for i in range(12)]
    return write_tiny(tmp_path / "tiny", good + bad), good + bad


def test_findings_md_counts_the_held_out_series_of_an_experiment_on_the_same_cases(
    tiny_env: Path,
    tmp_path: Path,
) -> None:
    root, _names = tiny_holdout(tmp_path)
    with client_for(root) as client:
        dev = settle(client, start(client, experiment_id="rate", simulate=True)["series"]["series_id"])
        assert dev["status"] == "done" and dev["verdict"]["verdict"] == "signal" and dev["finding"] is None
        assert not (root / "FINDINGS.md").exists()
        assert not (root / "experiments" / "rate" / "findings").exists()  # a dev series never writes a finding

        first = settle(
            client, start(client, experiment_id="rate", on="holdout", cases=12, simulate=True)["series"]["series_id"]
        )
        assert first["verdict"]["verdict"] == "confirmed" and first["finding"]
        md = (root / "FINDINGS.md").read_text()
        assert "series of this experiment" not in md  # one series: no tally
        second = settle(
            client, start(client, experiment_id="rate", on="holdout", cases=12, simulate=True)["series"]["series_id"]
        )
        assert second["verdict"]["verdict"] == "confirmed" and second["finding"] != first["finding"]
        wider = settle(client, start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"])
        assert wider["verdict"]["verdict"] == "inconclusive" and wider["finding"]
        again = settle(client, start(client, experiment_id="rate", simulate=True)["series"]["series_id"])
        assert again["finding"] is None

    md = (root / "FINDINGS.md").read_text()
    lines = [x for x in md.splitlines() if x.startswith("- **rate**")]
    assert len(lines) == 3
    on_same = [x for x in lines if "12 cases × 1 repeat of `cases`" in x]
    assert len(on_same) == 2
    assert all("2 of 2 held-out series of this experiment on these cases confirmed." in x for x in on_same)
    (other,) = [x for x in lines if "24 cases" in x]
    assert "series of this experiment" not in other  # other cases: not counted with them
    sections = md.split("### ")
    assert any(s.startswith("On holdout cases") and first["series_id"] in s for s in sections)
    assert any(s.startswith("Inconclusive") and wider["series_id"] in s for s in sections)
    assert "## bad_reply" in md
    assert md == render_findings_md(root, findings.read_findings(root))
    assert finding_codes(root) == []


def test_aqven_check_reports_a_tampered_finding_and_a_stale_findings_md(
    tiny_env: Path,
    tmp_path: Path,
) -> None:
    root, _names = tiny_holdout(tmp_path)
    with client_for(root) as client:
        snap = settle(
            client, start(client, experiment_id="rate", on="holdout", cases=12, simulate=True)["series"]["series_id"]
        )
    finding = root / snap["finding"]
    original = finding.read_text()
    env = cli_env(AQVEN_PRICES_FILE=str(tiny_env))

    assert finding_codes(root) == []
    finding.write_text(original.replace("estimate: 1.0", "estimate: 0.99"))
    tampered = aqven("check", cwd=root, env=env)
    assert tampered.returncode != 0
    assert "E_FINDING_TAMPERED" in tampered.stdout + tampered.stderr
    assert snap["finding"] in tampered.stdout + tampered.stderr
    # A series refuses to start on a project with an error, and the tampered finding is one.
    with client_for(root) as client:
        r = client.post("/api/series", json={"experiment_id": "rate", "simulate": True})
        assert r.status_code == 422 and r.json()["error"]["code"] == "NOT_RUNNABLE"
        assert "E_FINDING_TAMPERED" in {p["code"] for p in r.json()["error"]["details"]["problems"]}
    finding.write_text(original)

    md = root / "FINDINGS.md"
    md.write_text(md.read_text().replace("Confirmed", "Refuted"))
    assert finding_codes(root) == ["W_FINDINGS_STALE"]  # what `aqven check` reports (check_workspace)
    # The server rewrites it on start.
    with client_for(root):
        pass
    assert "Confirmed" in md.read_text() and finding_codes(root) == []
    # A finding is written once: writing it again keeps the file as it is.
    data = yaml.safe_load(original)
    data.pop("integrity")
    data["verdict"]["text"] = "something else"
    assert write_finding(root, data) == finding and finding.read_text() == original


class SimulatedCrash(BaseException):
    """The process dies here: no `except Exception` of the driver sees it (a kill, as seen from the files)."""


def test_a_crash_between_the_two_renames_is_repaired_on_the_next_start(
    tiny_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, _names = tiny_holdout(tmp_path)
    real_replace = os.replace

    def crash_before_findings_md(src: Any, dst: Any) -> None:
        if Path(dst).name == "FINDINGS.md":
            raise SimulatedCrash("the server died here")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_before_findings_md)  # what findings.py renames with
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on="holdout", cases=12, simulate=True)["series"]["series_id"]
        finding = root / "experiments" / "rate" / "findings" / f"{sid}.yaml"
        wait_until(finding.exists)
        wait_until(lambda: (root / ".FINDINGS.md.tmp").exists())
        wait_until(lambda: all(a["status"] == "done" for a in attempts(root, sid)))
        assert get(client, sid)["status"] == "running"  # the end was never stored
    monkeypatch.setattr(os, "replace", real_replace)
    written = finding.read_text()
    assert not (root / "FINDINGS.md").exists()
    assert "W_FINDINGS_STALE" in finding_codes(root)

    with client_for(root) as client:  # the next start
        md = (root / "FINDINGS.md").read_text()
        assert sid in md and "Confirmed on 12 held-out cases" in md
        snap = settle(client, sid)
        assert snap["status"] == "done" and snap["verdict"]["verdict"] == "confirmed"
        assert snap["finding"] == f"experiments/rate/findings/{sid}.yaml"
    assert finding.read_text() == written  # written once
    assert not list(root.glob(".*.tmp")) and not list(finding.parent.glob(".*.tmp"))  # no leftovers
    assert finding_codes(root) == []
    assert len(rows(root, "SELECT id FROM runs WHERE series_id=?", (sid,))) == 12  # nothing ran twice
