"""An attempt is claimed and finished where it runs (research/series/attempt.py `run_owned`).

Its claim (queued → running) is one transaction with its run's creation and first writes, so a claim that finds
the attempt taken writes nothing of the run; with workers on, the server process writes nothing per attempt: each
worker claims, runs and finishes its attempts, and the server only decides and counts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Any, cast

import pytest

from aqven.research.series.attempt import dec, run_owned
from aqven.research.series.start import SeriesStartBody
from aqven.research.series.workers import WorkerDied
from aqven.server.service import ProjectService
from aqven.store.runs import new_id
from aqven.store.sqlite_db import SqliteDatabase
from support.series_kit import case_names, write_tiny

RATE = SeriesStartBody.model_validate({"experiment_id": "rate", "on": "dev", "simulate": True})


async def _settle(svc: ProjectService, series_id: str) -> dict[str, Any]:
    state = await svc.series.get(series_id, wait_seconds=20)
    while state["status"] not in ("done", "failed", "cancelled", "awaiting_approval"):
        state = await svc.series.get(series_id, wait_seconds=20)
    return state


async def _done_series(svc: ProjectService) -> str:
    """A rate series on dev cases, run to its end: its id."""
    out = await svc.series.start(RATE)
    sid: str = out["series"]["series_id"]
    assert (await _settle(svc, sid))["status"] == "done"
    return sid


def test_a_claim_that_finds_the_attempt_taken_writes_nothing_of_its_run(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(4, 0))

    async def main() -> None:
        svc = ProjectService(root)
        try:
            sid = await _done_series(svc)
            store, runner = svc.series.store, svc.series.runner
            done = store.attempts(sid)[0]
            # As a second driver with a stale queue would try: the row says queued, the database says done.
            stale = dataclasses.replace(done, status="queued", run_id=None)
            run_id = new_id("run")
            got = await run_owned(runner._ws, runner._engine, runner.runs, store, store.get(sid), stale, run_id)
            assert got is None
            assert store.db.query("SELECT id FROM runs WHERE id=?", (run_id,)) == []
            assert store.db.query("SELECT seq FROM events WHERE run_id=?", (run_id,)) == []
            again = store.attempt(sid, done.idx)
            assert (again.status, again.run_id, again.outcome) == ("done", done.run_id, done.outcome)
        finally:
            await svc.shutdown()

    asyncio.run(main())


WRITES = re.compile(r"^\s*(INSERT|UPDATE|DELETE)\s+(INTO\s+)?(attempts|runs|events)\b", re.IGNORECASE)


@pytest.mark.sqlite_only  # counts statements with SQLite's trace hook
def test_with_workers_the_server_writes_nothing_per_attempt(
    tiny_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINY_WORKERS", "2")
    root = write_tiny(tmp_path / "tiny", case_names(20, 0), concurrency=4)
    assert "workers: 2" in (root / "aqven.yaml").read_text()

    async def main() -> None:
        svc = ProjectService(root)
        written: list[str] = []
        try:
            assert await svc.series.runner.warm()  # the two worker processes are up
            out = await svc.series.start(RATE)
            sid = out["series"]["series_id"]
            # From here on every statement of the server's own connection is seen.
            cast(SqliteDatabase, svc.db)._conn.set_trace_callback(
                lambda sql: written.append(sql) if WRITES.match(sql) else None
            )
            state = await _settle(svc, sid)
            cast(SqliteDatabase, svc.db)._conn.set_trace_callback(None)
            assert state["status"] == "done" and state["progress"]["done"] == 20
            attempts = svc.series.store.attempts(sid)
            assert all(a.status == "done" and a.run_id for a in attempts)
            runs = svc.db.query("SELECT id, status FROM runs WHERE series_id=?", (sid,))
            assert sorted(r["id"] for r in runs) == sorted(a.run_id or "" for a in attempts)
            assert all(r["status"] == "done" for r in runs)
        finally:
            await svc.shutdown()
        # 20 attempts claimed, run and finished, and not one write of an attempt, a run or an event here.
        assert written == [], written[:3]

    asyncio.run(main())


def test_a_worker_that_dies_after_it_wrote_an_attempts_end_leaves_that_end(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(3, 0))

    async def main() -> None:
        svc = ProjectService(root)
        try:
            sid = await _done_series(svc)
            store, runner = svc.series.store, svc.series.runner
            first = store.attempts(sid)[0]
            store.requeue_for_rerun(sid, first.idx, first.cost_usd or "0")  # queued again, as a re-run is
            queued = store.attempt(sid, first.idx)
            calls: list[str] = []

            class DiesAfterTheEnd:
                """A worker that claims, runs and ends the attempt, then is killed before it answers."""

                async def run(self, s: Any, a: Any, run_id: str) -> None:
                    calls.append(a.status)
                    await run_owned(runner._ws, runner._engine, runner.runs, store, s, a, run_id)
                    raise WorkerDied("killed after it wrote the end")

            run_id = new_id("run")
            got = await runner._in_worker(DiesAfterTheEnd(), store.get(sid), queued, run_id)  # type: ignore[arg-type]
            row = store.attempt(sid, first.idx)
            assert calls == ["queued"]  # handed to a worker once: the end it wrote is taken, nothing runs again
            assert got is not None and row.status == "done" and row.run_id == run_id
            assert (got.outcome, got.value, got.cost) == (row.outcome, row.value, dec(row.cost_usd))
            assert len(store.db.query("SELECT id FROM runs WHERE id=?", (run_id,))) == 1
        finally:
            await svc.shutdown()

    asyncio.run(main())


@pytest.mark.sqlite_only  # counts statements with SQLite's trace hook
def test_attempts_side_by_side_share_their_commits(tiny_env: Path, tmp_path: Path) -> None:
    """An attempt's three writes that must be on record before it goes on (its claim with its model request, its
    run's end, its row's end) join what the other attempts of its process write meanwhile (store/group_commit.py):
    half the commits or fewer of three per attempt, which is what they took without grouping (one at a time, or
    grouping off: 121 commits for 40 attempts). 160 attempts, so that the first ones, which run alone and then two
    by two (the cost ramp), weigh little; about 0.65 commits per attempt on this tiny flow."""
    root = write_tiny(tmp_path / "tiny", case_names(160, 0), concurrency=8, cap="100.00")

    async def main() -> tuple[int, int]:
        svc = ProjectService(root)
        commits: list[str] = []
        try:
            out = await svc.series.start(RATE)
            sid = out["series"]["series_id"]
            cast(SqliteDatabase, svc.db)._conn.set_trace_callback(
                lambda sql: commits.append(sql) if sql == "COMMIT" else None
            )
            state = await _settle(svc, sid)
            cast(SqliteDatabase, svc.db)._conn.set_trace_callback(None)
            assert state["status"] == "done"
            return state["progress"]["done"], len(commits)
        finally:
            await svc.shutdown()

    done, commits = asyncio.run(main())
    assert done == 160 and commits < 1.5 * done, (commits, done)
