"""An attempt queued wakes the workers in the transaction that queued it (queue.migrate's trigger on DBOS's table):
enqueued by the server's DBOSClient, or put back on the queue by a recovery, a notification on queue.WAKE arrives,
on a real PostgreSQL database; a workflow of another queue wakes nobody."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("dbos")

from aqven.research.cluster import queue


def _heard(conn: object, timeout: float) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + timeout
    for note in conn.notifies(timeout=timeout, stop_after=None):  # type: ignore[attr-defined]
        got.append(note.channel)
        if time.monotonic() > deadline:
            break
    return got


def test_enqueueing_and_resuming_an_attempt_wake_the_workers(pg_database: str) -> None:
    import psycopg
    from dbos import DBOSClient

    queue.migrate(pg_database)
    queue.migrate(pg_database)  # a second server or worker migrating again changes nothing
    client = DBOSClient(system_database_url=queue.sa_url(pg_database), application_name=queue.APP)
    client.register_queue(queue.QUEUE, polling_interval_sec=1.0, on_conflict="always_update")
    client.register_queue("another", polling_interval_sec=1.0, on_conflict="always_update")
    with psycopg.connect(pg_database, autocommit=True) as listener:
        listener.execute(f"LISTEN {queue.WAKE}")
        options = {"queue_name": queue.QUEUE, "workflow_name": queue.WORKFLOW, "workflow_id": "s:1:r"}
        client.enqueue(options, "s", 1, "r")  # type: ignore[arg-type]
        assert _heard(listener, 2.0) == [queue.WAKE]
        client.enqueue({**options, "queue_name": "another", "workflow_id": "x"}, "s", 2, "r")  # type: ignore[arg-type]
        assert _heard(listener, 1.0) == []
        with psycopg.connect(pg_database, autocommit=True) as conn:  # dequeued by a worker, which then was lost
            conn.execute("UPDATE dbos.workflow_status SET status = 'PENDING' WHERE workflow_uuid = 's:1:r'")
        assert _heard(listener, 1.0) == []
        client.resume_workflow("s:1:r", queue_name=queue.QUEUE)  # the server puts a lost worker's back
        assert _heard(listener, 2.0) == [queue.WAKE]
    client.destroy()
