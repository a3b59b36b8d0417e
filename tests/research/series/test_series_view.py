"""series_get: eta, spend of unpriced models, include_cases (dev only, failing first, at most 50)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from aqven.project.split import side_of
from support.series_kit import (
    PACKAGE,
    attempts,
    case_names,
    client_for,
    first_on,
    get,
    run_order,
    settle,
    start,
    wait_until,
    write_tiny,
)

# ---- eta ----------------------------------------------------------------------------------------------------


def test_eta_estimating_then_running_paused_and_null(
    tiny_env: Path,
    hold: Path,
    tmp_path: Path,
) -> None:
    names = case_names(8, 2)
    root = write_tiny(tmp_path / "tiny", names, concurrency=2)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        assert get(client, sid)["eta"] == {"state": "estimating"}
        dev = run_order(root, sid)  # the cases in the order the series runs them (its seed drew it)

        def finished(n: int) -> None:
            wait_until(lambda: get(client, sid)["progress"]["done"] == n)

        (hold / dev[0]).touch()
        finished(1)
        assert get(client, sid)["eta"] == {"state": "estimating"}
        (hold / dev[1]).touch()
        (hold / dev[2]).touch()
        finished(3)
        assert get(client, sid)["eta"] == {"state": "estimating"}  # 2 finished after the first: not yet 3
        (hold / dev[3]).touch()
        finished(4)
        eta = get(client, sid)["eta"]
        assert eta["state"] == "running"
        assert eta["attempts_per_minute"] > 0
        assert eta["remaining_seconds"] >= 0
        finish_at = datetime.fromisoformat(eta["finish_at"])
        assert finish_at.tzinfo is not None
        # 4 attempts left at the measured rate
        assert eta["remaining_seconds"] == pytest.approx(4 / eta["attempts_per_minute"] * 60, rel=0.05, abs=0.2)
        (hold / "open").touch()
        snap = settle(client, sid)
        assert snap["status"] == "done" and snap["eta"] is None

        # Paused while it awaits approval.
        paused = start(client, experiment_id="rate", simulate=True, cap_usd="9.00")["series"]
        assert paused["status"] == "awaiting_approval" and paused["eta"] == {"state": "paused"}
        assert get(client, paused["series_id"])["eta"] == {"state": "paused"}
        r = client.post(f"/api/series/{paused['series_id']}/cancel", json={})
        assert r.status_code == 200 and r.json()["eta"] is None


# ---- spend ----------------------------------------------------------------------------------------------------


def test_unpriced_attempts_make_the_spend_a_lower_bound(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(4, 2))
    with client_for(root) as client:
        priced = settle(client, start(client, experiment_id="rate", simulate=True)["series"]["series_id"])
        assert priced["spend"]["unpriced_attempts"] == 0 and priced["spend"]["lower_bound"] is False
        assert priced["spend"]["usd"] not in ("0", "0.00")

        snap = settle(client, start(client, experiment_id="pair", simulate=True)["series"]["series_id"])
        assert snap["status"] == "done"
        mystery = [a for a in attempts(root, snap["series_id"]) if a["variant_id"] == "m"]
        assert len(mystery) == 4 and all(a["unpriced"] for a in mystery)
        assert snap["spend"]["unpriced_attempts"] == 4
        assert snap["spend"]["lower_bound"] is True
        # What was priced is still counted: the 4 attempts of w, at $0.01 each.
        assert float(snap["spend"]["usd"]) == pytest.approx(0.04)
        by_variant = {m["variant"]: m for m in snap["matrix"]}
        assert float(by_variant["m"]["spend_usd"]) == 0.0


# ---- include_cases --------------------------------------------------------------------------------------------


def test_include_cases_shows_dev_cases_failing_first_at_most_fifty(tiny_env: Path, tmp_path: Path) -> None:
    good = case_names(56, 6)
    failing = [first_on("dev", "fail", i * 1000) for i in range(4)]
    names = good + failing  # the failing cases come last in the file
    root = write_tiny(tmp_path / "tiny", names, concurrency=8)
    dev = [n for n in names if side_of(PACKAGE, n) == "dev"]
    assert len(dev) == 60
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        settle(client, sid)
        snap = get(client, sid, include_cases=True)
        rows = snap["cases"]
        assert len(rows) == 50 and snap["hidden_cases"] == 10
        assert [r["case"] for r in rows[:4]] == failing
        assert all(r["failing"] for r in rows[:4]) and not any(r["failing"] for r in rows[4:])
        assert [r["case"] for r in rows[4:]] == [n for n in dev if n not in failing][:46]  # then in file order
        assert {r["case"] for r in rows} <= set(dev)
        by_run = {a["run_id"]: a for a in attempts(root, sid)}
        for row in rows:
            cell = row["variants"]["as_written"]
            assert set(cell) >= {"passes", "counted", "fails", "failed_checks", "attempts"}
            assert len(cell["attempts"]) == 1
            attempt = cell["attempts"][0]
            assert set(attempt) >= {"outcome", "error", "run_id"}
            stored = by_run[attempt["run_id"]]
            assert stored["case_name"] == row["case"]
            assert attempt["outcome"] == stored["outcome"] and attempt["error"] == stored["error_code"]
            if row["failing"]:
                assert cell == {**cell, "passes": 0, "counted": 1, "fails": 1, "failed_checks": ["ok"]}
                assert attempt["outcome"] == "fail" and attempt["error"] == "CHECK_FAILED"
            else:
                assert cell["passes"] == 1 and cell["fails"] == 0 and cell["failed_checks"] == []
                assert attempt["outcome"] == "pass" and attempt["error"] is None
        # The run of a listed attempt opens like any run.
        run = client.get(f"/api/runs/{rows[0]['variants']['as_written']['attempts'][0]['run_id']}").json()
        assert run["case_name"] == rows[0]["case"] and run["series_id"] == sid
        # Without include_cases, no rows.
        assert "cases" not in get(client, sid)


def test_a_holdout_series_lists_no_case(tiny_env: Path, tmp_path: Path) -> None:
    names = [*case_names(3, 6), first_on("holdout", "fail")]
    root = write_tiny(tmp_path / "tiny", names)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"]
        running = get(client, sid, include_cases=True)  # while it runs, too
        assert running["cases"] == []
        settle(client, sid)
        snap = get(client, sid, include_cases=True)
        assert snap["cases"] == [] and snap["hidden_cases"] == 7
        text = str(snap)
        assert not any(n in text for n in names if side_of(PACKAGE, n) == "holdout")


def test_a_look_naming_held_out_cases_lists_only_the_working_ones(tiny_env: Path, tmp_path: Path) -> None:
    names = case_names(3, 3)
    dev = [n for n in names if side_of(PACKAGE, n) == "dev"]
    held = [n for n in names if side_of(PACKAGE, n) == "holdout"]
    root = write_tiny(tmp_path / "tiny", names)
    with client_for(root) as client:
        look = {"flow_id": "answer", "dataset_id": "cases", "case_names": names}
        sid = start(client, look=look, simulate=True)["series"]["series_id"]
        settle(client, sid)
        snap = get(client, sid, include_cases=True)
        assert snap["status"] == "done" and snap["progress"]["done"] == 6  # every named case ran
        assert [r["case"] for r in snap["cases"]] == dev
        assert snap["hidden_cases"] == 3
        assert not any(n in str(snap) for n in held)
