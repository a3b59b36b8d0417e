"""Races that SQLite's one writer hid, on both backends: each check-then-act of the store is a constraint or a
conditional write, so many connections at once (as several server processes' would be) still make one series per
client_op_id, one run per attempt, one approval per pause and a gapless event sequence."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from aqven.store.approvals import Approver, transition_recorded
from aqven.store.db import Database
from aqven.store.location import StoreLocation
from aqven.store.open import open_database
from aqven.store.records import RunRequest
from aqven.store.runs import RunStore
from aqven.store.series import SeriesStore
from aqven.store.series_records import SeriesPlan
from support.series_rows import attempt_rows, create_series

T = TypeVar("T")
CONNECTIONS = 20
PLAN = SeriesPlan(
    flow_id="f", dataset_id="d", cases=["a", "b"], sides={"a": "dev", "b": "dev"}, variants=["v"], repeats=2
)


@pytest.fixture
def connect(store_url: str | None, tmp_path: Path) -> Iterator[Callable[[], Database]]:
    """A new connection to one fresh store (SQLite file or PostgreSQL database) per call."""
    location = (
        StoreLocation("sqlite", path=tmp_path / "race.sqlite")
        if store_url is None
        else StoreLocation("postgresql", dsn=store_url)
    )
    opened: list[Database] = []

    def new() -> Database:
        db = open_database(location)
        opened.append(db)
        return db

    yield new
    for db in opened:
        db.close()


def at_once(calls: list[Callable[[], T]]) -> list[T]:
    """Run every call on a thread of its own, released together."""
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = calls[i]()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return out


def _start(db: Database) -> tuple[str, bool]:
    return SeriesStore(db).create(
        kind="experiment",
        experiment_id="e",
        on="dev",
        status="running",
        plan=PLAN,
        cap_usd="1",
        project_cap_usd="10",
        project_cap_source="default",
        inputs_hash="h",
        inputs={},
        simulated=True,
        client_op_id="op-race",
        pause=None,
        attempts=attempt_rows(PLAN),
        active_since=None,
    )


def test_twenty_starts_with_one_client_op_id_make_one_series(connect: Callable[[], Database]) -> None:
    dbs = [connect() for _ in range(CONNECTIONS)]
    results = at_once([functools.partial(_start, db) for db in dbs])
    assert len({sid for sid, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    rows = dbs[0].query("SELECT COUNT(*) AS n FROM series")
    assert rows[0]["n"] == 1
    assert dbs[0].query_one("SELECT COUNT(*) AS n FROM attempts")["n"] == len(attempt_rows(PLAN))  # type: ignore[index]


def test_two_claims_of_one_attempt_make_one_run(connect: Callable[[], Database]) -> None:
    first = connect()
    sid = create_series(SeriesStore(first), PLAN, attempt_rows(PLAN))
    for round_ in range(10):
        stores = [SeriesStore(connect()) for _ in range(2)]
        won = at_once([functools.partial(s.claim, sid, 0, f"run_{round_}_{i}") for i, s in enumerate(stores)])
        assert sorted(won) == [False, True]
        row = first.query_one("SELECT status, run_id FROM attempts WHERE series_id=? AND idx=0", (sid,))
        assert row is not None and row["status"] == "running"
        assert row["run_id"] == f"run_{round_}_{won.index(True)}"
        with first.transaction() as cur:  # queued again for the next round
            cur.execute("UPDATE attempts SET status='queued', run_id=NULL WHERE series_id=? AND idx=0", (sid,))


def test_one_pause_is_approved_once_however_many_approve_it(connect: Callable[[], Database]) -> None:
    first = connect()
    sid = create_series(SeriesStore(first), PLAN, attempt_rows(PLAN), status="awaiting_approval")
    dbs = [connect() for _ in range(8)]

    def approve(db: Database, i: int) -> bool:
        return transition_recorded(
            db,
            sid,
            ("awaiting_approval",),
            {"status": "running", "cap_usd": "2"},
            action="approve",
            who=Approver("terminal", "tty", f"person{i}"),
            old_cap_usd="1",
            new_cap_usd="2",
            spent_usd="0.9",
            reason=None,
        )

    won = at_once([functools.partial(approve, db, i) for i, db in enumerate(dbs)])
    assert won.count(True) == 1
    rows = first.query("SELECT seq, person FROM approvals WHERE series_id=?", (sid,))
    assert [r["seq"] for r in rows] == [1] and rows[0]["person"] == f"person{won.index(True)}"


def test_events_of_one_run_from_many_connections_take_every_seq_once(connect: Callable[[], Database]) -> None:
    first = connect()
    runs = RunStore(first)
    run_id = runs.create(RunRequest(flow_id="f", input={}))
    writers = [RunStore(connect()) for _ in range(8)]

    def five(writer: RunStore, i: int) -> None:
        for k in range(5):
            writer.append_event(run_id, "note", None, {"w": i, "k": k})

    at_once([functools.partial(five, w, i) for i, w in enumerate(writers)])
    seqs = [int(r["seq"]) for r in first.query("SELECT seq FROM events WHERE run_id=? ORDER BY seq", (run_id,))]
    assert seqs == list(range(1, 41))


async def test_a_grouped_claim_of_a_taken_attempt_fails_alone(connect: Callable[[], Database]) -> None:
    """In a group (pipelined on PostgreSQL, where a claim cannot wait for its row count), a claim of an attempt
    another connection took answers False, and the writes grouped with it are written all the same."""
    first, other = connect(), connect()
    store = SeriesStore(first)
    sid = create_series(store, PLAN, attempt_rows(PLAN))
    assert SeriesStore(other).claim(sid, 0, "run_other")
    runs = RunStore(first)
    results = await asyncio.gather(
        first.grouped(functools.partial(store.claim, sid, 1, "run_mine")),
        first.grouped(functools.partial(store.claim, sid, 0, "run_late")),
        first.grouped(runs.creating(RunRequest(flow_id="f", input={}), "run_mine")),
    )
    assert list(results) == [True, False, None]
    rows = {r["idx"]: r["run_id"] for r in first.query("SELECT idx, run_id FROM attempts WHERE series_id=?", (sid,))}
    assert rows[0] == "run_other" and rows[1] == "run_mine"
    assert runs.exists("run_mine")
