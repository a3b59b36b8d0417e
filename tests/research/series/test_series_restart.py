"""A real project server killed (SIGKILL) mid-series resumes it on restart: nothing lost, nothing run twice.

The series runs on the showcase simulators, whose answers depend on each attempt's seed, and the seeds depend
only on the experiment, case and repeat: the interrupted series must reach the same verdict as an uninterrupted
one with the same selection.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from aqven.project.init import init_project
from support.commands import cli_env, stop_server
from support.live_server import LiveServer
from support.series_kit import attempts, rows, wait_until

ATTEMPTS = 12 * 2 * 2
# One simulators' seed for both series: the killed one must reproduce the uninterrupted one (a replay on purpose).
BODY = {"experiment_id": "reply_noninferior_mistral", "cases": 12, "repeats": 2, "simulate": True, "seed": 4242}


def wait_done(server: LiveServer, series_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        snap: dict[str, Any] = server.get(f"/api/series/{series_id}?wait_seconds=5")
        if snap["status"] != "running" or time.monotonic() > deadline:
            return snap


@pytest.fixture
def lumen(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    root = init_project(tmp_path / "lumen", "lumen")
    env = cli_env(AQVEN_SIM_LATENCY_SCALE="0.2")  # simulated latency: the series takes a few seconds
    yield root, env
    stop_server(root)


def test_a_killed_server_resumes_its_series_without_losing_or_repeating_attempts(
    lumen: tuple[Path, dict[str, str]],
) -> None:
    root, env = lumen
    server = LiveServer(root, env)
    server.start()
    try:
        whole = server.post("/api/series", BODY)["series"]["series_id"]
        reference = wait_done(server, whole)
        assert reference["status"] == "done" and reference["progress"]["done"] == ATTEMPTS

        sid = server.post("/api/series", BODY)["series"]["series_id"]
        wait_until(
            lambda: sum(a["status"] == "done" for a in attempts(root, sid)) >= ATTEMPTS // 4, timeout=60, step=0.01
        )
        server.kill()
        before = {a["idx"]: dict(a) for a in attempts(root, sid)}
        finished = {i: a for i, a in before.items() if a["status"] == "done"}
        in_flight = [i for i, a in before.items() if a["status"] == "running"]
        assert ATTEMPTS // 4 <= len(finished) < ATTEMPTS and in_flight, "kill the server mid-series"
        status = rows(root, "SELECT status FROM series WHERE id=?", (sid,))[0]["status"]
        assert status == "running"

        server.start()
        snap = wait_done(server, sid)
    finally:
        server.stop()

    assert snap["status"] == "done"
    after = {a["idx"]: dict(a) for a in attempts(root, sid)}
    assert len(after) == ATTEMPTS and all(a["status"] == "done" for a in after.values())
    # No finished attempt lost or run again: same run, same result, same cost, same end.
    for idx, a in finished.items():
        b = after[idx]
        for key in ("run_id", "outcome", "value", "cost_usd", "ended_at", "error_code"):
            assert b[key] == a[key], (idx, key)
    # One run per attempt, ever.
    runs = rows(root, "SELECT id, status, cost_usd FROM runs WHERE series_id=?", (sid,))
    assert len(runs) == ATTEMPTS
    assert sorted(r["id"] for r in runs) == sorted(a["run_id"] for a in after.values())
    assert {r["status"] for r in runs} == {"done"}
    starts = rows(
        root,
        "SELECT run_id, COUNT(*) AS n FROM events WHERE kind='run_start' AND run_id IN"
        " (SELECT id FROM runs WHERE series_id=?) GROUP BY run_id",
        (sid,),
    )
    assert {r["run_id"] for r in starts} == {a["run_id"] for a in after.values()} and {r["n"] for r in starts} == {1}
    resumed = rows(
        root,
        "SELECT DISTINCT run_id FROM events WHERE kind='run_resume'"
        " AND run_id IN (SELECT id FROM runs WHERE series_id=?)",
        (sid,),
    )
    assert {r["run_id"] for r in resumed} <= {before[i]["run_id"] for i in in_flight}
    # The spend is the sum of what the attempts cost, which is what their runs cost.
    total = sum((Decimal(a["cost_usd"]) for a in after.values()), Decimal(0))
    assert Decimal(snap["spend"]["usd"]) == total
    assert sum((Decimal(r["cost_usd"]) for r in runs), Decimal(0)) == total
    # The same seeds give the same verdict as the uninterrupted series.
    assert snap["verdict"]["text"] == reference["verdict"]["text"]
    assert [(m["variant"], m["counted"], m["passes"]) for m in snap["matrix"]] == [
        (m["variant"], m["counted"], m["passes"]) for m in reference["matrix"]
    ]
    assert Decimal(snap["spend"]["usd"]) == Decimal(reference["spend"]["usd"])
