"""series_cancel: queued attempts never start, running ones finish and are paid, verdict invalid, no finding."""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path

from support.person import person_headers
from support.series_kit import (
    attempts,
    case_names,
    client_for,
    get,
    rows,
    runs_of,
    settle,
    start,
    wait_until,
    write_tiny,
)


def test_cancel_lets_running_attempts_finish_and_starts_nothing_more(
    tiny_env: Path,
    hold: Path,
    tmp_path: Path,
) -> None:
    # A $0.50 cap keeps the ramp on (three attempts at 20 x $0.01 would pass its 90% point).
    root = write_tiny(tmp_path / "tiny", case_names(2, 12), concurrency=3, cap="0.50")
    with client_for(root) as client:
        # On held-out cases, so that a finished series would write a finding.
        sid = start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"]
        first = wait_until(lambda: [a for a in attempts(root, sid) if a["status"] == "running"])[0]
        (hold / first["case_name"]).touch()
        # Two side by side: the ramp while one attempt's cost is known (concurrency 3).
        wait_until(lambda: sum(a["status"] == "running" for a in attempts(root, sid)) == 2)
        running = {a["idx"] for a in attempts(root, sid) if a["status"] == "running"}
        assert len(running) == 2 and 0 not in running

        r = client.post(f"/api/series/{sid}/cancel", json={"reason": "enough"})
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "cancelled"
        # The running attempts are still running (their model calls wait at the hold), nothing new started.
        time.sleep(0.3)
        now = attempts(root, sid)
        assert {a["idx"] for a in now if a["status"] == "running"} == running
        assert sum(a["status"] == "done" for a in now) == 1

        # Cancelling again already conflicts, even before the running attempts finished.
        again = client.post(f"/api/series/{sid}/cancel", json={})
        assert again.status_code == 409
        assert again.json()["error"]["code"] == "SERIES_STATE_CONFLICT"

        (hold / "open").touch()
        snap = wait_until(lambda: (s := get(client, sid, wait=1))["ended_at"] is not None and s)
        assert snap["status"] == "cancelled"
        assert snap["verdict"]["verdict"] == "invalid" and snap["verdict"]["reason"] == "cancelled"
        assert snap["finding"] is None and snap["eta"] is None

        final = attempts(root, sid)
        done = [a for a in final if a["status"] == "done"]
        assert {a["idx"] for a in done} == running | {0}  # the running ones finished ...
        assert all(a["outcome"] == "pass" for a in done)
        queued = [a for a in final if a["status"] == "queued"]
        assert len(queued) == 12 - 3 and all(a["run_id"] is None for a in queued)  # ... the queued never started
        runs = runs_of(root, sid)
        assert sorted(r["id"] for r in runs) == sorted(a["run_id"] for a in done)
        assert all(r["status"] == "done" and Decimal(r["cost_usd"]) == Decimal("0.01") for r in runs)  # and paid
        assert Decimal(snap["spend"]["usd"]) == Decimal("0.03")
        assert snap["progress"]["done"] == 3 and snap["progress"]["queued"] == 9

        again = client.post(f"/api/series/{sid}/cancel", json={})
        assert again.status_code == 409 and again.json()["error"]["code"] == "SERIES_STATE_CONFLICT"
    assert not (root / "experiments" / "rate" / "findings").exists()
    assert not (root / "FINDINGS.md").exists()


def test_approve_on_a_running_series_conflicts(
    tiny_env: Path,
    hold: Path,
    tmp_path: Path,
) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(4, 2))
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        for action, body in (("approve", {}), ("approve", {"cap_usd": "9.00"}), ("stop", {})):
            r = client.post(f"/api/series/{sid}/{action}", json=body, headers=person_headers())
            assert r.status_code == 409, (action, r.text)
            assert r.json()["error"]["code"] == "SERIES_STATE_CONFLICT"
        assert get(client, sid)["spend"]["cap_usd"] == "1.00"
        (hold / "open").touch()
        assert settle(client, sid)["status"] == "done"
        r = client.post(f"/api/series/{sid}/cancel", json={})
        assert r.status_code == 409 and r.json()["error"]["code"] == "SERIES_STATE_CONFLICT"
        r = client.post("/api/series/ser_nope/cancel", json={})
        assert r.status_code == 404 and r.json()["error"]["code"] == "SERIES_NOT_FOUND"


def test_cancel_a_series_awaiting_approval_ends_it_at_once(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(3, 3))
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True, cap_usd="3.00")["series"]["series_id"]
        r = client.post(f"/api/series/{sid}/cancel", json={})
        assert r.status_code == 200, r.text
        snap = r.json()
        assert snap["status"] == "cancelled" and snap["verdict"]["reason"] == "cancelled"
        assert snap["pause"] is None and snap["eta"] is None
        assert runs_of(root, sid) == []
        r = client.post(f"/api/series/{sid}/approve", json={}, headers=person_headers())
        assert r.status_code == 409 and r.json()["error"]["code"] == "SERIES_STATE_CONFLICT"


def test_a_series_cancelled_while_attempts_ran_is_decided_after_a_restart(
    tiny_env: Path,
    hold: Path,
    tmp_path: Path,
) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(8, 2), concurrency=2)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        first = wait_until(lambda: [a for a in attempts(root, sid) if a["status"] == "running"])[0]
        (hold / first["case_name"]).touch()
        wait_until(lambda: sum(a["status"] == "running" for a in attempts(root, sid)) == 2)
        assert client.post(f"/api/series/{sid}/cancel", json={}).json()["status"] == "cancelled"
    # The server stopped with two attempts still running: they finish after the next start.
    assert get_ended(root, sid) is None
    (hold / "open").touch()
    with client_for(root) as client:
        snap = wait_until(lambda: (s := get(client, sid, wait=1))["ended_at"] is not None and s)
        assert snap["status"] == "cancelled" and snap["verdict"]["reason"] == "cancelled"
        assert snap["progress"]["done"] == 3 and snap["progress"]["running"] == 0 and snap["progress"]["queued"] == 5
    assert len(runs_of(root, sid)) == 3


def get_ended(root: Path, series_id: str) -> str | None:
    value: str | None = rows(root, "SELECT ended_at FROM series WHERE id=?", (series_id,))[0]["ended_at"]
    return value
