"""Inputs changed during a series (invalid, no finding); a human node (waiting_human, then answered, done)."""

from __future__ import annotations

import time
from pathlib import Path

from support.person import person_headers
from support.series_kit import (
    attempts,
    case_names,
    client_for,
    get,
    runs_of,
    settle,
    start,
    wait_until,
    write_tiny,
)


def test_a_prompt_edited_while_the_series_runs_makes_it_invalid_without_a_finding(
    tiny_env: Path,
    hold: Path,
    tmp_path: Path,
) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(2, 12))
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"]
        first = wait_until(lambda: [a for a in attempts(root, sid) if a["status"] == "running"])[0]
        (hold / first["case_name"]).touch()
        wait_until(lambda: sum(a["status"] == "done" for a in attempts(root, sid)) >= 1)
        prompt = root / "flows" / "answer" / "answer.md"
        prompt.write_text("Answer this, and be brief: {{ text }}\n")
        (hold / "open").touch()
        snap = settle(client, sid)
        assert snap["status"] == "done"
        assert snap["progress"]["done"] == 12
        assert snap["verdict"]["verdict"] == "invalid"
        assert snap["verdict"]["reason"] == "inputs_changed"
        assert snap["finding"] is None
    assert not (root / "experiments" / "rate" / "findings").exists()
    assert not (root / "FINDINGS.md").exists()


def test_the_same_series_without_an_edit_writes_its_finding(tiny_env: Path, tmp_path: Path) -> None:
    """The control of the test above: the invalid verdict came from the edit, not from the setup."""
    root = write_tiny(tmp_path / "tiny", case_names(2, 12))
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"]
        snap = settle(client, sid)
        assert snap["verdict"]["verdict"] == "confirmed" and snap["verdict"]["reason"] is None
        assert snap["finding"] == f"experiments/rate/findings/{sid}.yaml"
    assert (root / snap["finding"]).is_file()


def test_a_human_node_pauses_the_series_until_a_person_answers(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(3, 1))
    with client_for(root) as client:
        sid = start(client, experiment_id="reviewed", simulate=True)["series"]["series_id"]
        snap = settle(client, sid)
        assert snap["status"] == "waiting_human"
        assert snap["eta"] == {"state": "paused"}
        # The first attempt waits alone (its cost is not known before it ends); once answered, the others run.
        first = client.get("/api/runs", params={"series_id": sid, "status": "waiting_human"}).json()
        assert len(first) == 1 and first[0]["series_id"] == sid
        time.sleep(0.2)
        assert get(client, sid)["status"] == "waiting_human"
        assert get(client, sid)["progress"]["running"] == 1 and get(client, sid)["progress"]["queued"] == 2
        r = client.post(
            f"/api/runs/{first[0]['id']}/human/approve", json={"answer": {"ok": True}}, headers=person_headers()
        )
        assert r.status_code == 200, r.text
        waiting = wait_until(
            lambda: (
                len(w := client.get("/api/runs", params={"series_id": sid, "status": "waiting_human"}).json()) == 2
                and w
            )
        )
        assert settle(client, sid)["status"] == "waiting_human"
        for run, ok in zip(waiting, [True, False], strict=True):
            r = client.post(
                f"/api/runs/{run['id']}/human/approve", json={"answer": {"ok": ok}}, headers=person_headers()
            )
            assert r.status_code == 200, r.text
        snap = settle(client, sid, include_cases=True)
        assert snap["status"] == "done"
        assert snap["progress"]["done"] == 3 and snap["progress"]["counted"] == 3
        assert snap["matrix"][0]["passes"] == 2
        assert snap["eta"] is None
        runs = runs_of(root, sid)
        assert len(runs) == 3 and {r["status"] for r in runs} == {"done"}
        # A wrong answer is refused and the run keeps waiting: see the runs API tests.


def test_one_answer_resumes_the_series_while_others_still_wait(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(3, 1))
    with client_for(root) as client:
        sid = start(client, experiment_id="reviewed", simulate=True)["series"]["series_id"]
        assert settle(client, sid)["status"] == "waiting_human"
        first = client.get("/api/runs", params={"series_id": sid, "status": "waiting_human"}).json()
        assert len(first) == 1  # the first attempt waits alone
        r = client.post(
            f"/api/runs/{first[0]['id']}/human/approve", json={"answer": {"ok": True}}, headers=person_headers()
        )
        assert r.status_code == 200, r.text
        waiting = wait_until(
            lambda: (
                len(w := client.get("/api/runs", params={"series_id": sid, "status": "waiting_human"}).json()) == 2
                and w
            )
        )
        r = client.post(
            f"/api/runs/{waiting[0]['id']}/human/approve", json={"answer": {"ok": True}}, headers=person_headers()
        )
        assert r.status_code == 200, r.text
        wait_until(lambda: get(client, sid)["progress"]["done"] == 2)
        snap = get(client, sid, wait=2)
        assert snap["status"] == "waiting_human" and snap["progress"]["done"] == 2
        r = client.post(
            f"/api/runs/{waiting[1]['id']}/human/approve", json={"answer": {"ok": True}}, headers=person_headers()
        )
        assert r.status_code == 200, r.text
        snap = settle(client, sid)
        assert snap["status"] == "done" and snap["matrix"][0]["passes"] == 3
