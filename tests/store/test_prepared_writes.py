"""Writes made to run later (a run's held writes, group commit) do their Python work when they are made: the
transaction that runs them, which every other process waits for, only executes SQL. And the connections' settings
that keep a writer's commits short.

Against a real SQLite file: the JSON makers are broken between making a write and running it, so a write that still
made its JSON inside the transaction fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from aqven.store import runs as runs_module
from aqven.store import series as series_module
from aqven.store.db import Database
from aqven.store.records import RunError, RunRequest
from aqven.store.runs import RunStore
from aqven.store.series import SeriesStore
from aqven.store.series_records import SeriesPlan
from aqven.store.sqlite_db import WAL_CHECKPOINT_PAGES, SqliteDatabase
from support.series_rows import attempt_rows, create_series


def _broken(*_args: object, **_kwargs: object) -> str:
    raise AssertionError("JSON made inside the transaction")


def test_held_writes_make_their_json_when_made_not_when_written(
    make_database: Callable[..., Database], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = make_database("p")
    runs, series = RunStore(db), SeriesStore(db)
    plan = SeriesPlan(flow_id="f", dataset_id="d", cases=["c"], sides={"c": "dev"}, variants=["v"], repeats=1)
    sid = create_series(series, plan, attempt_rows(plan))
    assert series.claim(sid, 0, "run_a")
    request = RunRequest(flow_id="f", input={"text": "héllo"}, case_name="c", dataset_id="d", simulate=True)

    writes = [
        runs.creating(request, "run_a", series_id=sid, side="dev"),
        runs.event("run_a", "node_end", "n", {"output": {"answer": "ok"}, "duration_ms": 1.5}),
        runs.finishing("run_a", status="failed", output={"answer": "ok"}, error=RunError(code="X", message="m")),
        series.finishing_attempt(
            sid,
            0,
            outcome="pass",
            value=1.0,
            error_code=None,
            error_message="fine",
            checks=[{"check_id": "k", "passed": True, "cost_usd": Decimal("0.001")}],
            cost_usd="0.001",
            unpriced=False,
            inputs_hash="h2",
        ),
    ]
    for module in (runs_module, series_module):
        monkeypatch.setattr(module.json, "dumps", _broken)
    monkeypatch.setattr(runs_module, "_stored", _broken)
    monkeypatch.setattr(RunRequest, "model_dump_json", _broken)
    with db.transaction():
        for write in writes:
            write()
    monkeypatch.undo()

    run = runs.get("run_a")
    assert (run.status, run.output, run.error, run.request) == (
        "failed",
        {"answer": "ok"},
        RunError(code="X", message="m"),
        request,
    )
    (event,) = runs.events("run_a")
    assert (event.kind, event.node_id, event.data) == (
        "node_end",
        "n",
        {"output": {"answer": "ok"}, "duration_ms": 1.5},
    )
    row = series.attempt(sid, 0)
    assert (row.status, row.outcome, row.value, row.error_message, row.inputs_hash) == (
        "done",
        "pass",
        1.0,
        "fine",
        "h2",
    )
    assert json.loads(row.checks_json or "") == [{"check_id": "k", "passed": True, "cost_usd": "0.001"}]
    assert row.active_at_end is not None  # read from the series' clock when it was written


def test_a_held_event_keeps_the_data_it_was_made_with(make_database: Callable[..., Database]) -> None:
    runs = RunStore(make_database("p"))
    runs.create(RunRequest(flow_id="f"), run_id="run_b")
    data = {"output": "first"}
    write = runs.event("run_b", "node_end", "n", data)
    data["output"] = "changed after"  # what the run does next does not reach the event it held
    write()
    (event,) = runs.events("run_b")
    assert event.data == {"output": "first"}


@pytest.mark.sqlite_only  # SQLite's pragmas
def test_every_connection_keeps_commits_short(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "p.sqlite")
    with db.reading() as reader:
        for conn in (db._conn, reader):
            assert conn.execute("PRAGMA temp_store").fetchone()[0] == 2  # MEMORY: savepoint journals too
    assert db._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_CHECKPOINT_PAGES
    assert db._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
