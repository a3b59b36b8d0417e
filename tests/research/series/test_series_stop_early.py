"""Series of a stop_early experiment: decided on the confidence sequence, stopped as soon as decided.

A real series through the scheduler on the tiny project (simulated writer, priced at $0.01 a call): every
case passes, or every case fails, far from the bound of 0.5 + 0.05. With one attempt per case the exact
design decides at the first look (5% of the cases: 20 passes of 20 have a chance 0.55^20 ≈ 6e-6 at the line,
within the 0.025·0.05^0.1 = 0.0185 spent by then); with five attempts per case the union-bound sequence, at the
first look that spends error (25% of the cases). The series then starts nothing more, ends done, and its
snapshot, sentence and finding say how many attempts it ran of how many and what it did not spend. Without
stop_early the same series runs to the end.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from aqven.research.diagnostics.workspace import check_workspace
from aqven.research.findings.verify import Verifier
from aqven.research.stats import plan_sim
from support.series_kit import (
    RATE_EXPERIMENT,
    case_names,
    client_for,
    settle,
    start,
    tiny_environment,
    write_tiny,
)

STOP_EARLY = RATE_EXPERIMENT.replace("repeats: 1\n", "repeats: 1\nstop_early: true\n")


@pytest.fixture
def tiny_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return tiny_environment(monkeypatch, tmp_path)


def project(root: Path, names: list[str], experiment: str = STOP_EARLY) -> Path:
    return write_tiny(root, names, cap="20.00", overrides={"experiments/rate/experiment.yaml": experiment})


def run(root: Path, on: str) -> dict[str, Any]:
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on=on, simulate=True)["series"]["series_id"]
        return settle(client, sid, timeout=120)


def test_a_decided_series_stops_early_and_says_so(tiny_env: Path, tmp_path: Path) -> None:
    root = project(tmp_path / "p", case_names(400, 10))
    snap = run(root, "dev")
    assert snap["status"] == "done" and snap["stop_early"] is True
    done, planned = snap["progress"]["done"], snap["progress"]["attempts"]
    # One attempt per case: the exact design's first look (20 cases) decides; running attempts finish.
    assert planned == 400 and 20 <= done < 60
    early = snap["early_stop"]
    assert early["stopped"] and early["attempts_run"] == done and early["never_ran"] == planned - done
    assert early["spend_saved_usd"] == f"{0.01 * (planned - done):.6f}"
    verdict = snap["verdict"]
    assert verdict["verdict"] == "signal" and verdict["would_be"] == "confirmed"
    assert f"stopped early at {done} of 400 attempts: decided" in verdict["text"]
    assert not verdict["provisional"]


def test_a_series_of_five_attempts_per_case_stops_at_the_first_look_that_spends_error(
    tiny_env: Path, tmp_path: Path
) -> None:
    """Several attempts per case keep the union-bound sequence: looks 1–4 cannot decide, look 5 (20 cases of 80,
    100 attempts) does: all-pass cases put its lower bound at 0.005^(1/20) = 0.77, above 0.55."""
    five = STOP_EARLY.replace("repeats: 1\n", "repeats: 5\n")
    snap = run(project(tmp_path / "p", case_names(80, 10), experiment=five), "dev")
    done, planned = snap["progress"]["done"], snap["progress"]["attempts"]
    assert planned == 400 and 100 <= done < 140
    assert snap["verdict"]["would_be"] == "confirmed" and snap["early_stop"]["stopped"]


def test_a_refuted_series_stops_early_too(tiny_env: Path, tmp_path: Path) -> None:
    names = [n.replace("c", "fail", 1) for n in case_names(300, 10)]
    snap = run(project(tmp_path / "p", names), "dev")
    assert snap["verdict"]["would_be"] == "refuted"
    assert snap["early_stop"]["stopped"] and snap["progress"]["done"] < 60


def test_a_held_out_series_that_stops_early_writes_its_finding(tiny_env: Path, tmp_path: Path) -> None:
    root = project(tmp_path / "p", case_names(10, 400))
    snap = run(root, "holdout")
    assert snap["verdict"]["verdict"] == "confirmed" and snap["early_stop"]["stopped"]
    data = yaml.safe_load((root / snap["finding"]).read_text())
    assert data["scope"]["stop_early"] is True
    assert data["scope"]["early_stop"]["attempts_run"] == snap["progress"]["done"]
    assert "stopped early at" in data["verdict"]["text"]
    with Verifier(root) as verifier:  # recomputed on the sequence it was decided on, not a fixed-size interval
        assert verifier.verify(root / snap["finding"], data).verifies


def test_without_stop_early_the_series_runs_to_the_end(tiny_env: Path, tmp_path: Path) -> None:
    root = project(tmp_path / "p", case_names(100, 10), experiment=RATE_EXPERIMENT)
    snap = run(root, "dev")
    assert snap["progress"]["done"] == 100 and snap["early_stop"] is None and snap["stop_early"] is False


def test_aqven_check_refuses_stop_early_on_a_judge_decided_metric(tiny_env: Path, tmp_path: Path) -> None:
    judged = STOP_EARLY.replace(
        "  - id: ok\n    function: checks/ok.py:reply_ok\n",
        "  - id: ok\n    judge: {agent: w, rubric: rubric.md}\n",
    )
    root = project(tmp_path / "p", case_names(10, 10), experiment=judged)
    (root / "experiments/rate/rubric.md").write_text("Is {{ output }} a good reply?\n")
    _ws, diagnostics = check_workspace(root)
    codes = [d.code for d in diagnostics]
    assert "E_STOP_EARLY_JUDGE" in codes, codes
    bad_type = STOP_EARLY.replace("stop_early: true", 'stop_early: "sometimes"')
    root2 = project(tmp_path / "q", case_names(10, 10), experiment=bad_type)
    _ws, diagnostics = check_workspace(root2)
    assert any(d.severity == "error" and "stop_early" in d.message for d in diagnostics), diagnostics


def test_the_launch_plan_of_a_stop_early_experiment_expects_fewer_attempts(tiny_env: Path, tmp_path: Path) -> None:
    root = project(tmp_path / "p", case_names(400, 10))
    with client_for(root) as client:
        dev = start(client, experiment_id="rate", on="dev", simulate=True)["series"]["series_id"]
        settle(client, dev, timeout=120)
        plan = client.post("/api/experiments/rate/launch-plan", json={"on": "dev", "simulate": True}).json()
    early = plan["stop_early"]
    assert plan["planning"] == f"from series {dev}"  # every case passed there: far above 0.55
    # One attempt per case: the exact design's own chances at the planning rate (most series stop at look 1).
    exact = plan_sim.exact_sequential_outcome(plan["planning_rate"], 400, 0.95, 0.55, True)
    assert early["expected_attempts"] == math.ceil(exact.expected_cases) and 20 <= early["expected_attempts"] < 25
    assert early["attempts"] == 400 and early["stops_early_share"] == round(exact.stops_early, 3) > 0.9
    assert early["median_saving"] == round(exact.median_saving, 3) == 0.95  # half stop at look 1: 20 of 400 cases
    assert "a median saving of 95%" in early["text"]
    assert early["text"].startswith("stop_early: about")
