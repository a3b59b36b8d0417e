"""A run's trace events are numbered 1, 2, 3 … without a gap or a repeat, though a store numbers them from what it
wrote last instead of reading the largest number each time: another process that wrote the run's events since
(a worker that resumed it), or a rolled-back batch, must not leave two events with one number or a hole."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from aqven.store.db import Database
from aqven.store.records import RunRequest
from aqven.store.runs import RunStore

MakeDatabase = Callable[..., Database]


def seqs(db: Database, run_id: str) -> list[int]:
    return [int(r["seq"]) for r in db.query("SELECT seq FROM events WHERE run_id=? ORDER BY seq", (run_id,))]


def kinds(store: RunStore, run_id: str) -> list[str]:
    return [e.kind for e in store.events(run_id)]


def test_two_processes_writing_one_runs_events_in_turn_number_them_densely(make_database: MakeDatabase) -> None:
    server, worker = RunStore(make_database("a")), RunStore(make_database("a"))  # two connections, as two processes
    run_id = server.create(RunRequest(flow_id="f", input={}))
    server.append_event(run_id, "a")
    server.append_event(run_id, "b")
    worker.append_event(run_id, "c")  # the worker resumed the run: it reads the number
    worker.append_event(run_id, "d")
    server.append_event(run_id, "e")  # the server's own count is stale now: its insert collides, it reads again
    worker.append_event(run_id, "f")
    assert seqs(server.db, run_id) == [1, 2, 3, 4, 5, 6]
    assert kinds(server, run_id) == ["a", "b", "c", "d", "e", "f"]


def test_a_rolled_back_batch_leaves_no_hole_in_the_numbers(make_database: MakeDatabase) -> None:
    store = RunStore(make_database("a"))
    run_id = store.create(RunRequest(flow_id="f", input={}))
    store.append_event(run_id, "a")
    with pytest.raises(RuntimeError), store.db.batch():
        store.append_event(run_id, "lost-1")
        store.append_event(run_id, "lost-2")
        raise RuntimeError("the batch fails after its events")
    store.append_event(run_id, "b")
    assert seqs(store.db, run_id) == [1, 2]
    assert kinds(store, run_id) == ["a", "b"]


def test_a_failed_inner_write_of_a_batch_leaves_no_hole_either(make_database: MakeDatabase) -> None:
    store = RunStore(make_database("a"))
    run_id = store.create(RunRequest(flow_id="f", input={}))
    with store.db.batch():
        store.append_event(run_id, "a")
        with pytest.raises(RuntimeError), store.db.transaction():
            store.append_event(run_id, "undone")
            raise RuntimeError("inner")
        store.append_event(run_id, "b")
    assert seqs(store.db, run_id) == [1, 2]
    assert kinds(store, run_id) == ["a", "b"]
