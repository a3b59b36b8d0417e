"""The cap holds (issue 12, item 6): attempts waiting for a person keep their reserve, uneven costs overshoot the
cap by at most one attempt's cost, a variant without a simulator is refused before any call, a case that does
not fit its flow is named by `aqven check`, and the CLI says why a series failed."""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path

from support.commands import aqven, cli_env
from support.person import person_headers
from support.series_kit import (
    AGENT_MYSTERY,
    AQVEN_YAML,
    attempts,
    case_names,
    client_for,
    first_on,
    get,
    rows,
    runs_of,
    settle,
    start,
    wait_until,
    write_tiny,
)


def spent_by_runs(root: Path, series_id: str) -> Decimal:
    """What the series' runs spent, finished or not (a run waiting for a person has paid its calls)."""
    return sum((Decimal(r["cost_usd"]) for r in runs_of(root, series_id)), Decimal(0))


def test_attempts_waiting_for_a_person_keep_their_reserve(tiny_env: Path, tmp_path: Path) -> None:
    """The attack: a flow with a human node under a $0.05 cap; every attempt spends $0.01 and then waits. Before,
    waiting attempts counted in neither the spend nor the reserve, so every attempt started ($0.12 here)."""
    root = write_tiny(tmp_path / "tiny", case_names(12, 0))
    with client_for(root) as client:
        sid = start(client, experiment_id="reviewed", simulate=True, cap_usd="0.05")["series"]["series_id"]
        most_waiting = 0
        for _ in range(20):
            snap = settle(client, sid)
            if snap["status"] != "waiting_human":
                break
            waiting = client.get("/api/runs", params={"series_id": sid, "status": "waiting_human"}).json()
            most_waiting = max(most_waiting, len(waiting))
            assert spent_by_runs(root, sid) <= Decimal("0.05")
            time.sleep(0.2)  # nothing more starts while they wait
            assert len(client.get("/api/runs", params={"series_id": sid, "status": "waiting_human"}).json()) == len(
                waiting
            )
            for run in waiting:
                r = client.post(
                    f"/api/runs/{run['id']}/human/approve", json={"answer": {"ok": True}}, headers=person_headers()
                )
                assert r.status_code == 200, r.text
            answered = {run["id"] for run in waiting}
            wait_until(lambda a=answered: all(r["status"] == "done" for r in runs_of(root, sid) if r["id"] in a))  # type: ignore[misc]
        snap = settle(client, sid)
    assert snap["status"] == "awaiting_approval" and snap["pause"]["reason"] == "spend_near_cap"
    assert spent_by_runs(root, sid) <= Decimal("0.05")
    assert Decimal(snap["spend"]["usd"]) == spent_by_runs(root, sid) == Decimal("0.04")
    assert most_waiting == 3  # $0.01 spent + 3 waiting x $0.01 reserve + the next one would reach 90% of $0.05
    assert len(runs_of(root, sid)) == 4


def test_uneven_costs_overshoot_the_cap_by_at_most_one_attempt(
    tiny_env: Path, file_order: None, tmp_path: Path
) -> None:
    """The attack: the first attempt is cheap ($0.01), every other one costs $0.05, concurrency 8, cap $0.20.
    Before, the cheap first attempt set the reserve and a whole batch of 8 started: $0.41 spent (205%). Now the
    side-by-side attempts ramp up (2, then 4, ...) while the reserve is learned."""
    cheap = case_names(1, 0)
    pricey = [first_on("dev", "pricey", i * 1000) for i in range(16)]
    root = write_tiny(tmp_path / "tiny", cheap + pricey, cap="0.20", concurrency=8)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        snap = settle(client, sid)
    assert snap["status"] == "awaiting_approval" and snap["pause"]["reason"] == "spend_near_cap"
    spent = Decimal(snap["spend"]["usd"])
    most = max(Decimal(a["cost_usd"]) for a in attempts(root, sid) if a["status"] == "done")
    assert most == Decimal("0.05") and spent <= Decimal("0.20") + most, spent
    assert spent == spent_by_runs(root, sid)
    # The ramp: at most two ran side by side while only the cheap attempt's cost was known.
    done = sorted((a for a in attempts(root, sid) if a["status"] == "done"), key=lambda a: a["started_at"])
    first_end = done[0]["ended_at"]
    second_round = [a for a in done[1:] if a["started_at"] < min(b["ended_at"] for b in done[1:])]
    assert all(a["started_at"] >= first_end for a in done[1:]) and len(second_round) <= 2


def test_a_cap_far_away_runs_at_full_width_after_the_first_attempt(
    tiny_env: Path, hold: Path, file_order: None, tmp_path: Path
) -> None:
    """The ramp costs a latency-bound series one round trip per doubling (issue 16). With a $5.00 cap and $0.01
    attempts, even eight attempts side by side at 20 times the dearest seen stay under 90% of the cap, so all eight
    start once the first has a price; under a $0.20 cap (the test above) they ramp."""
    names = case_names(12, 0)
    root = write_tiny(tmp_path / "tiny", names, cap="5.00", concurrency=8)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]

        def running() -> list[str]:
            return [a["case_name"] for a in attempts(root, sid) if a["status"] == "running"]

        first = wait_until(running)
        time.sleep(0.3)
        assert len(running()) == 1  # the first attempt runs alone: nothing has a price yet
        (hold / first[0]).touch()
        wait_until(lambda: len(running()) == 8)
        (hold / "open").touch()
        snap = settle(client, sid)
    assert snap["status"] == "done" and snap["progress"]["counted"] == 12


def test_a_variant_without_a_simulator_is_not_runnable_before_any_call(tiny_env: Path, tmp_path: Path) -> None:
    """The attack: variant m's agent has no simulator; before, the other variant spent money and the series
    ended invalid. The spec: NOT_RUNNABLE, one problem per case and variant, before a single model call."""
    no_sim = AGENT_MYSTERY.replace("simulator: sim/agents.py:writer\n", "")
    # Its provider (127.0.0.1:9) refuses: with no outage hold, the live series below ends at once.
    config = AQVEN_YAML.format(cap="1.00", concurrency=4, workers=1) + "  outage_hold_s: 0\n"
    overrides: dict[str, str | None] = {"agents/mystery.yaml": no_sim, "aqven.yaml": config}
    root = write_tiny(tmp_path / "tiny", case_names(4, 4), overrides=overrides)
    with client_for(root) as client:
        for on in ("dev", "holdout"):
            r = client.post("/api/series", json={"experiment_id": "pair", "on": on, "simulate": True})
            assert r.status_code == 422, r.text
            err = r.json()["error"]
            assert err["code"] == "NOT_RUNNABLE" and "nothing was spent" in err["hint"]
            problems = err["details"]["problems"]
            assert len(problems) == 4 and {p["variant"] for p in problems} == {"m"}
            assert {p["code"] for p in problems} == {"SIMULATOR_MISSING"}
            assert "mystery" in problems[0]["message"]
        assert rows(root, "SELECT COUNT(*) AS n FROM runs")[0]["n"] == 0
        assert rows(root, "SELECT COUNT(*) AS n FROM series")[0]["n"] == 0
        # Without --simulate the variant is runnable (it would call its provider).
        live = client.post("/api/series", json={"experiment_id": "pair", "on": "dev", "cases": 1})
        assert live.status_code == 201, live.text
        sid = live.json()["series"]["series_id"]
        assert settle(client, sid, timeout=30)["status"] != "running"
        tried = [a for a in attempts(root, sid) if a["variant_id"] == "m"]
        assert tried and all(a["error_code"] and a["error_code"].startswith("PROVIDER_") for a in tried), tried


BAD_CASES = """\
cases:
  - name: {good}
    input: {{text: "a ticket"}}
  - name: {bad}
    input: {{text: 42}}
"""


def test_aqven_check_names_a_case_that_does_not_fit_its_flow(tiny_env: Path, tmp_path: Path) -> None:
    """The attack: a case whose input does not fit the flow passed `aqven check` and failed the series later."""
    good, bad = case_names(1, 0)[0], first_on("dev", "wrongtype")
    root = write_tiny(
        tmp_path / "tiny", case_names(2, 0), overrides={"datasets/cases.yaml": BAD_CASES.format(good=good, bad=bad)}
    )
    checked = aqven("check", cwd=root, env=cli_env(AQVEN_PRICES_FILE=str(tiny_env)))
    out = checked.stdout + checked.stderr
    assert checked.returncode == 1, out
    assert "E_CASE_INPUT" in out and f"case {bad!r}" in out and "datasets/cases.yaml:4" in out, out
    # The range experiment's case without the node_outputs it needs is named too.
    assert "E_CASE_NODE_OUTPUTS" in out and "case 'without_draft'" in out and "datasets/ranged_cases.yaml:5" in out
    with client_for(root) as client:
        refused = client.post("/api/series", json={"experiment_id": "rate", "simulate": True})
        assert refused.status_code == 422
        (problem,) = refused.json()["error"]["details"]["problems"]
        assert problem["case"] == bad and problem["code"] == "RUN_INPUT_INVALID"
        assert rows(root, "SELECT COUNT(*) AS n FROM runs")[0]["n"] == 0
        # Another experiment's bad case does not block this one: the look runs a good case of `cases`.
        look = {"flow_id": "answer", "dataset_id": "cases", "case_names": [good]}
        started = client.post("/api/series", json={"look": look, "simulate": True})
        assert started.status_code == 201, started.text
        assert settle(client, started.json()["series"]["series_id"])["status"] == "done"


def test_the_cli_says_a_keyless_series_failed_and_why(showcase: Path) -> None:
    """The attack: without a provider key the CLI printed only "Invalid: infrastructure errors …"."""
    r = aqven("series", "reply_overpromise_risk", "--cases", "1", "--repeats", "1", cwd=showcase)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "series failed: PROVIDER_KEY_MISSING: OPENROUTER_API_KEY is not set" in " ".join(out.split()), out
    assert "Traceback" not in out


def test_a_series_under_its_cap_ramps_up_and_runs_to_the_end(tiny_env: Path, tmp_path: Path) -> None:
    """Control: a series far under its cap runs to the end with the ramp (1, 2, 4, 8) and loses no attempt."""
    root = write_tiny(tmp_path / "tiny", case_names(30, 0), concurrency=8)
    with client_for(root) as client:
        snap = settle(client, start(client, experiment_id="rate", simulate=True)["series"]["series_id"])
        assert snap["status"] == "done" and snap["progress"]["done"] == 30
        assert Decimal(get(client, snap["series_id"])["spend"]["usd"]) == Decimal("0.30")
