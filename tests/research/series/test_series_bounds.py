"""Every model priced or bounded: a series on a model nothing prices says so before it starts, a price the
agent file declares makes the spend cap stop it, and a token cap pauses it like the spend cap, approved the
same way. Real series through the scheduler on the tiny project (simulated, 1,000 input tokens a call)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from support.person import person_headers
from support.series_kit import case_names, client_for, get, settle, start, tiny_environment, wait_until, write_tiny

LOCAL = """\
model: openai-compatible:gemma-3-270m
base_url: http://127.0.0.1:9/v1
settings: {temperature: 0, max_tokens: 100, timeout_s: 10}
output_mode: tool
output_retries: 0
simulator: sim/agents.py:writer
"""
# The writer on a local model: nothing prices it, unless its file declares a price or a token cap.
EXTRA = {
    "priced": 'price: {input: "10", output: "0"}\n',  # $10 per million input tokens: $0.01 a call
    "bounded": "token_cap: 5000\n",  # 1,000 tokens a call: pauses once 4 calls + 1 reserve reach 4,500
    "bare": "",
}


@pytest.fixture
def tiny_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return tiny_environment(monkeypatch, tmp_path)


def project(tmp_path: Path, kind: str, *, cap: str = "1.00") -> Path:
    return write_tiny(
        tmp_path / kind, case_names(20, 4), cap=cap, concurrency=1, overrides={"agents/w.yaml": LOCAL + EXTRA[kind]}
    )


def test_an_unpriced_series_says_its_cap_cannot_stop_it(tiny_env: Path, tmp_path: Path) -> None:
    with client_for(project(tmp_path, "bare")) as client:
        r = client.post("/api/experiments/rate/launch-plan", json={"on": "dev", "simulate": True})
        assert r.status_code == 200, r.text
        bound = r.json()["bounds"]
        assert bound["cap_binds"] is False and bound["unpriced_agents"] == ["w"] and bound["token_cap"] is None
        assert bound["text"].startswith("the spend cap cannot stop this series: nothing prices w")
        assert "declare a price" in bound["text"]
        snap = settle(client, start(client, experiment_id="rate", on="dev", simulate=True)["series"]["series_id"])
        assert snap["status"] == "done" and snap["spend"]["lower_bound"] and snap["spend"]["usd"] == "0"


def test_a_declared_price_stops_the_series_at_its_cap(tiny_env: Path, tmp_path: Path) -> None:
    with client_for(project(tmp_path, "priced", cap="0.05")) as client:
        started = start(client, experiment_id="rate", on="dev", simulate=True)
        assert started["launch_plan"]["bounds"] == {
            "unpriced_agents": [],
            "token_cap": None,
            "cap_binds": True,
            "text": None,
        }
        snap = settle(client, started["series"]["series_id"])
        assert snap["status"] == "awaiting_approval" and snap["pause"]["reason"] == "spend_near_cap"
        # $0.01 a call: the fifth start would reach 90% of $0.05 with its reserve, so four ran.
        assert snap["progress"]["done"] == 4 and Decimal(snap["spend"]["usd"]) == Decimal("0.04")
        assert not snap["spend"]["lower_bound"]


def test_a_token_cap_pauses_the_series_and_an_approval_raises_it(tiny_env: Path, tmp_path: Path) -> None:
    root = project(tmp_path, "bounded")
    with client_for(root) as client:
        started = start(client, experiment_id="rate", on="dev", simulate=True)
        bound = started["launch_plan"]["bounds"]
        assert bound["token_cap"] == 5000 and "its token cap of 5,000 tokens bounds it instead" in bound["text"]
        sid = started["series"]["series_id"]
        snap = settle(client, sid)
        assert snap["status"] == "awaiting_approval", snap["status"]
        pause = snap["pause"]
        assert pause["reason"] == "tokens_near_cap" and pause["token_cap"] == 5000 and pause["tokens_used"] == 4000
        assert snap["progress"]["done"] == 4 and snap["spend"]["tokens_used"] == 4000

        r = client.post(f"/api/series/{sid}/approve", json={"token_cap": 3000}, headers=person_headers())
        assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION_ERROR"
        r = client.post(f"/api/series/{sid}/approve", json={}, headers=person_headers())  # double it: 10,000
        assert r.status_code == 200, r.text
        snap = wait_until(lambda: (s := get(client, sid, wait=5))["status"] != "running" and s)
        assert snap["status"] == "awaiting_approval" and snap["pause"]["token_cap"] == 10_000
        assert snap["progress"]["done"] == 8  # 8,000 used + a 1,000 reserve reaches 90% of 10,000
        (approval,) = snap["approvals"]
        assert approval["reason"] == "tokens_near_cap" and approval["channel"] == "terminal"
        assert (approval["old_token_cap"], approval["new_token_cap"]) == (5000, 10_000)
