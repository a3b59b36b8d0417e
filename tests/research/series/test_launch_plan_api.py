"""POST /api/experiments/{id}/launch-plan: the spec's example's keys, the cap's source, needs_approval.

Issue 28 changed two of the example's values on purpose: the expected half-width and the recommended cases
are now computed with the interval the series reports (simulated, `aqven.research.stats.plan_sim`), not with
a Wald approximation of it. At 2 cases × 2 repeats and a planning rate of 0.95 the reported interval is
±0.422, not ±0.244; and the plan recommends one number of cases, the cases that decide the question 80% of
the time at the planning rate (194, refuted), where the spec's example gave the Wald cases for a half-width
within the margin (1187). docs/how-to/run-a-series.md says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from aqven.project.init import init_project
from support.series_kit import case_names, client_for, write_tiny

# The response of the spec ("How to run experiments and series as an agent", Example), for package lumen.
SPEC_PLAN: dict[str, Any] = {
    "on": "dev",
    "cases": 2,
    "repeats": 2,
    "variants": 1,
    "attempts": 4,
    "available": 6,
    "half_width": 0.24352108850049436,
    "margin": 0.01,
    "recommended": {
        "cases": 1187,
        "repeats": 2,
        "reason": "short_of_cases",
        "text": "about 1187 cases are needed for a half-width within the 0.01 margin, but only 6 are available",
    },
    "below_recommended": True,
    "needs_approval": False,
    "project_cap_usd": "1.00",
    "project_cap_source": "project",
    "cap_usd": "1.00",
}
BODY: dict[str, Any] = {"on": "dev", "cases": 2, "repeats": 2}
# Issue 10: recommended.text reads as advice, not as a requirement. Issue 28: the half-width and the one number
# of cases are the reported interval's (simulated); every other key and value is the spec's.
ADVICE = "if the true rate is 0.95, about 194 cases would decide it (refuted) 80% of the time; only 6 are available"
HALF_WIDTH = 0.42210426413800817
# Keys the plan adds to the spec's (issue 10): how it was planned, at which level, power and the floor.
ADDED: dict[str, Any] = {
    "level": 0.95,
    "comparisons": 1,
    "planning": "defaults",
    "planning_rate": 0.95,
    "planning_rho": 0.3,
    "planning_series": None,
}


def spec_part(got: dict[str, Any]) -> dict[str, Any]:
    """The plan restricted to the spec example's keys, with the spec's recommended keys only."""
    out = {k: got[k] for k in SPEC_PLAN if k in got}
    if isinstance(out.get("recommended"), dict):
        out["recommended"] = {k: v for k, v in out["recommended"].items() if k in SPEC_PLAN["recommended"]}
    return out


def expected_spec() -> dict[str, Any]:
    return {
        **SPEC_PLAN,
        "half_width": HALF_WIDTH,
        "recommended": {**SPEC_PLAN["recommended"], "cases": 194, "text": ADVICE},
    }


def plan(client: TestClient, experiment: str = "reply_overpromise_risk", **body: Any) -> dict[str, Any]:
    r = client.post(f"/api/experiments/{experiment}/launch-plan", json=body or BODY)
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


def test_showcase_launch_plan_is_the_spec_example_with_the_reported_interval(tmp_path: Path) -> None:
    root = init_project(tmp_path / "lumen", "lumen")
    with client_for(root) as client:
        got = plan(client)
        assert spec_part(got) == expected_spec()
        assert set(SPEC_PLAN) <= set(got)  # no key of the spec's example is renamed or dropped
        assert got["half_width"] == HALF_WIDTH  # deterministic: a fixed seed
        assert {k: got[k] for k in ADDED} == ADDED
        assert got["recommended"]["by"] == "power"  # one number of cases: the power's
        assert got["power"]["cases"] == 194 and got["power"]["decides"] == "refuted"
        assert got["zero_failure_floor"]["cases"] == 183
        # Asking again (and with a cap equal to the project cap) changes nothing and needs no approval.
        assert plan(client, **BODY, cap_usd="1.00") == got
        # No launch plan carries a price.
        assert not any("price" in k or "cost" in k for k in got)


def test_local_override_wins_and_says_so(tmp_path: Path) -> None:
    root = init_project(tmp_path / "lumen", "lumen")
    (root / ".aqven").mkdir(exist_ok=True)
    (root / ".aqven" / "local.yaml").write_text('research:\n  spend_cap_usd: "0.40"\n')
    with client_for(root) as client:
        got = plan(client)
        assert got["project_cap_source"] == "override"
        assert got["project_cap_usd"] == "0.40" and got["cap_usd"] == "0.40"
        assert got["needs_approval"] is False
        # A cap between the override and aqven.yaml's cap is above the project cap on this computer.
        assert plan(client, **BODY, cap_usd="0.50")["needs_approval"] is True
        assert {k: v for k, v in spec_part(got).items() if not k.startswith(("project_cap", "cap_usd"))} == {
            k: v for k, v in expected_spec().items() if not k.startswith(("project_cap", "cap_usd"))
        }


def test_default_cap_when_aqven_yaml_has_no_research_block(tmp_path: Path) -> None:
    root = init_project(tmp_path / "lumen", "lumen")
    config = root / "aqven.yaml"
    text = config.read_text()
    assert 'research:\n  spend_cap_usd: "1.00"\n' in text
    config.write_text(text.replace('research:\n  spend_cap_usd: "1.00"\n', ""))
    with client_for(root) as client:
        got = plan(client)
        assert got["project_cap_source"] == "default"
        assert got["project_cap_usd"] == "1.00" and got["cap_usd"] == "1.00"
        assert spec_part(got) == {**expected_spec(), "project_cap_source": "default"}


def test_needs_approval_only_for_a_cap_above_the_project_cap(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(4, 4), cap="2.50")
    with client_for(root) as client:
        base = {"on": "dev", "cases": 2, "repeats": 1}
        above = plan(client, "rate", **base, cap_usd="2.51")
        assert above["needs_approval"] is True
        assert above["cap_usd"] == "2.51" and above["project_cap_usd"] == "2.50"
        assert above["project_cap_source"] == "project"
        assert plan(client, "rate", **base, cap_usd="2.50")["needs_approval"] is False
        below = plan(client, "rate", **base, cap_usd="0.30")
        assert below["needs_approval"] is False and below["cap_usd"] == "0.30"
        assert plan(client, "rate", **base)["cap_usd"] == "2.50"


def test_launch_plan_refuses_bad_counts_and_caps(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(4, 4))
    with client_for(root) as client:
        for body in ({"repeats": 21}, {"repeats": 0}, {"cases": 0}, {"cap_usd": "0"}, {"cap_usd": "-1"}):
            r = client.post("/api/experiments/rate/launch-plan", json=body)
            assert r.status_code == 422, (body, r.text)
            assert r.json()["error"]["code"] == "VALIDATION_ERROR"
        r = client.post("/api/experiments/nope/launch-plan", json={})
        assert r.status_code == 404 and r.json()["error"]["code"] == "EXPERIMENT_NOT_FOUND"
        # Holdout: the same counts, the other half of the split.
        got = plan(client, "rate", on="holdout")
        assert got["on"] == "holdout" and got["available"] == 4 and got["cases"] == 4
