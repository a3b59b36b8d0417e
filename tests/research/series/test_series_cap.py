"""The scheduler's spend rules: the first attempt alone, the 90% pause, approve, stop, a cap above the project's.

Every call of the tiny project costs exactly $0.01 (priced from a price-list file), so the cap arithmetic is exact.
"""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path

from support.person import person_headers
from support.series_kit import (
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


def test_first_attempt_runs_alone_then_side_by_side(
    tiny_env: Path,
    hold: Path,
    tmp_path: Path,
) -> None:
    names = case_names(10, 2)
    # A $0.50 cap keeps the ramp on (four attempts at 20 x $0.01 would pass its 90% point); far from the cap
    # there is none (test_series_cap_holds.py).
    root = write_tiny(tmp_path / "tiny", names, concurrency=4, cap="0.50")
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        wait_until(lambda: any(a["status"] == "running" for a in attempts(root, sid)))
        time.sleep(0.4)  # time enough for a scheduler that would start more
        now = attempts(root, sid)
        assert [a["idx"] for a in now if a["status"] == "running"] == [0]
        assert len(runs_of(root, sid)) == 1
        first_case = now[0]["case_name"]
        (hold / first_case).touch()  # the first attempt may finish now

        # Then attempts run side by side, ramping up while the reserve is learned (they wait at the hold): two
        # while one attempt's cost is known, four (the concurrency limit) once three are.
        def running() -> list[str]:
            return [a["case_name"] for a in attempts(root, sid) if a["status"] == "running"]

        wait_until(lambda: len(running()) == 2)
        time.sleep(0.2)
        assert len(running()) == 2
        for case in running():
            (hold / case).touch()
        wait_until(lambda: len(running()) == 4)
        time.sleep(0.2)
        assert len(running()) == 4
        (hold / "open").touch()
        assert settle(client, sid)["status"] == "done"
    done = attempts(root, sid)
    first = done[0]
    assert first["idx"] == 0
    others = done[1:]
    assert all(a["started_at"] >= first["ended_at"] for a in others)
    run_rows = {r["id"]: r for r in runs_of(root, sid)}
    assert all(run_rows[a["run_id"]]["created_at"] >= run_rows[first["run_id"]]["ended_at"] for a in others)


def test_pause_near_cap_then_approve_doubles_then_a_given_cap_finishes(
    tiny_env: Path,
    tmp_path: Path,
) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(20, 2), cap="0.10", concurrency=4)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        snap = settle(client, sid)
        assert snap["status"] == "awaiting_approval", snap["status"]
        pause = snap["pause"]
        assert pause["reason"] == "spend_near_cap"
        spent = Decimal(pause["spent_usd"])
        cap = Decimal(snap["spend"]["cap_usd"])
        assert cap == Decimal("0.10")
        assert Decimal(snap["spend"]["usd"]) == spent
        done = [a for a in attempts(root, sid) if a["status"] == "done"]
        reserve = max(Decimal(a["cost_usd"]) for a in done)
        assert reserve == Decimal("0.01")
        assert spent == sum((Decimal(a["cost_usd"]) for a in done), Decimal(0))
        assert spent < cap
        assert spent + reserve >= Decimal("0.9") * cap  # one more attempt would have reached 90% of the cap
        assert spent == Decimal("0.08")  # the exact arithmetic: 8 attempts of $0.01 under a $0.10 cap
        assert snap["progress"]["running"] == 0 and snap["progress"]["queued"] == 12
        assert snap["eta"] == {"state": "paused"}
        time.sleep(0.3)
        assert get(client, sid)["progress"]["done"] == 8  # paused means nothing more starts

        r = client.post(
            f"/api/series/{sid}/approve", json={}, headers=person_headers()
        )  # no cap given: double the old one
        assert r.status_code == 200, r.text
        assert r.json()["spend"]["cap_usd"] == "0.20"
        snap = settle(client, sid)
        assert snap["status"] == "awaiting_approval"
        assert snap["pause"]["reason"] == "spend_near_cap"
        assert Decimal(snap["pause"]["spent_usd"]) == Decimal("0.17")

        # A typed cap must be above the old one.
        r = client.post(f"/api/series/{sid}/approve", json={"cap_usd": "0.19"}, headers=person_headers())
        assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION_ERROR"
        assert get(client, sid)["status"] == "awaiting_approval"
        r = client.post(f"/api/series/{sid}/approve", json={"cap_usd": "0.40"}, headers=person_headers())
        assert r.status_code == 200 and r.json()["spend"]["cap_usd"] == "0.40"
        snap = settle(client, sid)
        assert snap["status"] == "done" and Decimal(snap["spend"]["usd"]) == Decimal("0.20")
        assert snap["progress"]["done"] == 20


def test_approve_with_a_typed_cap_finishes_the_series(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(20, 2), cap="0.10", concurrency=4)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        assert settle(client, sid)["status"] == "awaiting_approval"
        r = client.post(f"/api/series/{sid}/approve", json={"cap_usd": "1.00"}, headers=person_headers())
        assert r.status_code == 200, r.text
        snap = settle(client, sid)
        assert snap["status"] == "done"
        assert snap["spend"]["cap_usd"] == "1.00"
        assert Decimal(snap["spend"]["usd"]) == Decimal("0.20")
        assert snap["progress"]["done"] == 20 and snap["pause"] is None
        assert snap["verdict"]["verdict"] == "signal"
        # A finished series cannot be approved or stopped.
        for action in ("approve", "stop"):
            r = client.post(f"/api/series/{sid}/{action}", json={}, headers=person_headers())
            assert r.status_code == 409 and r.json()["error"]["code"] == "SERIES_STATE_CONFLICT"


def test_stop_at_the_cap_ends_invalid_without_a_finding(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(2, 20), cap="0.10", concurrency=4)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"]
        assert settle(client, sid)["status"] == "awaiting_approval"
        r = client.post(f"/api/series/{sid}/stop", json={}, headers=person_headers())
        assert r.status_code == 200, r.text
        snap = settle(client, sid)
        assert snap["status"] in ("done", "cancelled")
        assert snap["verdict"]["verdict"] == "invalid"
        assert snap["verdict"]["reason"] == "stopped_at_cap"
        assert snap["eta"] is None and snap["finding"] is None
        assert snap["progress"]["done"] == 8 and snap["progress"]["queued"] == 12
        time.sleep(0.2)
        assert get(client, sid)["progress"]["done"] == 8
    assert not (root / "experiments" / "rate" / "findings").exists()
    assert not (root / "FINDINGS.md").exists()


def test_a_cap_above_the_project_cap_waits_before_anything_runs(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(4, 2), cap="1.00")
    with client_for(root) as client:
        out = start(client, experiment_id="rate", simulate=True, cap_usd="5.00")
        assert out["launch_plan"]["needs_approval"] is True
        sid = out["series"]["series_id"]
        assert out["series"]["status"] == "awaiting_approval"
        pause = out["series"]["pause"]
        assert pause["reason"] == "cap_above_project"
        assert out["series"]["spend"]["cap_usd"] == "5.00"
        time.sleep(0.4)
        snap = get(client, sid, wait=1)
        assert snap["status"] == "awaiting_approval" and snap["progress"]["done"] == 0
        assert snap["eta"] == {"state": "paused"}
        assert runs_of(root, sid) == []
        assert {a["status"] for a in attempts(root, sid)} == {"queued"}
        r = client.post(f"/api/series/{sid}/approve", json={}, headers=person_headers())
        assert r.status_code == 200, r.text
        snap = settle(client, sid)
        assert snap["status"] == "done" and snap["spend"]["cap_usd"] == "5.00"
        assert snap["progress"]["done"] == 4
        # A cap at or below the project cap starts at once.
        out = start(client, experiment_id="rate", simulate=True, cap_usd="0.50")
        assert out["series"]["status"] == "running" and out["series"]["spend"]["cap_usd"] == "0.50"
        settle(client, out["series"]["series_id"])
    assert len(rows(root, "SELECT id FROM runs")) == 8


def test_once_near_the_cap_nothing_more_starts_even_if_the_running_ones_cost_less(
    tiny_env: Path,
    file_order: None,
    tmp_path: Path,
) -> None:
    """The first attempt costs $0.05 (the reserve), the others $0.01, under a $0.20 cap (90%: $0.18).

    The rule fires as soon as spent + reserve x (running + 1) reaches $0.18 with an attempt still running, at a
    spend of $0.08 or $0.09; then nothing more starts, and the series pauses once the running one finished. A
    scheduler that decided again after it finished would go on to about $0.13 first.
    """
    pricey = first_on("dev", "pricey")
    root = write_tiny(tmp_path / "tiny", [pricey, *case_names(20, 0)], cap="0.20", concurrency=2)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        snap = settle(client, sid)
        assert snap["status"] == "awaiting_approval" and snap["pause"]["reason"] == "spend_near_cap"
        spent = Decimal(snap["pause"]["spent_usd"])
        assert Decimal("0.09") <= spent <= Decimal("0.10"), spent
        done = [a for a in attempts(root, sid) if a["status"] == "done"]
        assert done[0]["case_name"] == pricey and Decimal(done[0]["cost_usd"]) == Decimal("0.05")
        assert spent == sum((Decimal(a["cost_usd"]) for a in done), Decimal(0))
        # The rule fired when the last attempt started before it would have been reached.
        last_start = max(a["started_at"] for a in done)
        before = [a for a in done if a["ended_at"] <= last_start]
        spent_then = sum((Decimal(a["cost_usd"]) for a in before), Decimal(0))
        running_then = len(done) - len(before)
        assert spent_then + Decimal("0.05") * running_then < Decimal("0.18")
