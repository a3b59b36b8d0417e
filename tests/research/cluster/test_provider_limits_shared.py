"""A provider's rpm / tpm and outage clock shared by every process of a PostgreSQL store (store/provider_limits.py).

On a real PostgreSQL database: two real processes asking for the same provider together are let through no more
calls than its rpm in all (each alone would let through the whole rpm); a worker declared lost or a dead server's
calls in flight end; an outage one process found is the one another holds its calls for.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from aqven.models import outage, rate_limit
from aqven.project.schema import AgentSpec
from aqven.store.postgres_db import PostgresDatabase
from aqven.store.provider_limits import STALE_S, ProviderLimits
from aqven.store.workers import WorkerStore

pytest.importorskip("psycopg")

_ASKER = """
import asyncio, json, sys, time
from aqven.models import rate_limit
from aqven.store.postgres_db import PostgresDatabase
from aqven.store.provider_limits import share_limits

dsn, calls, rpm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
start_at, for_s = float(sys.argv[4]), float(sys.argv[5])
limits = share_limits(PostgresDatabase(dsn))
assert limits is not None

async def main() -> int:
    granted = []
    async def one() -> None:
        slot = await rate_limit.acquire("fakeai", rpm=rpm, tpm=None)
        granted.append(slot)
        rate_limit.record(slot, 10)
    await asyncio.sleep(max(0.0, start_at - time.time()))
    tasks = [asyncio.ensure_future(one()) for _ in range(calls)]
    await asyncio.wait(tasks, timeout=for_s)
    for t in tasks:
        t.cancel()
    return len(granted)

print(json.dumps({"granted": asyncio.run(main())}))
limits.close()
"""


@pytest.fixture
def dsn(pg_database: str) -> Iterator[str]:
    PostgresDatabase(pg_database).close()  # migrated
    yield pg_database


def test_two_processes_together_get_no_more_calls_than_the_rpm(dsn: str) -> None:
    start_at = time.time() + 4.0  # both processes ask at once, after their imports
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _ASKER, dsn, "15", "20", str(start_at), "2.0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    granted = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
        granted.append(json.loads(out)["granted"])
    # each process alone keeps the whole rpm (15 of 15 granted); together 20 of their 30, the rest wait a window
    assert sum(granted) == 20, granted
    assert all(g >= 5 for g in granted), granted  # both were served
    db = PostgresDatabase(dsn)
    rows = db.query("SELECT owner, ended FROM provider_calls WHERE provider = 'fakeai'")
    assert len(rows) == 20 and len({r["owner"] for r in rows}) == 2
    assert all(r["ended"] is not None for r in rows)  # each call's end was written
    db.close()


def test_tokens_of_another_process_count_against_the_tpm(dsn: str) -> None:
    a, b = ProviderLimits(dsn, "a"), ProviderLimits(dsn, "b")

    async def scenario() -> bool:
        slot = await a.acquire("fakeai", rpm=None, tpm=100)
        a.record(slot, 150)
        await asyncio.sleep(0.3)  # the end is written by a's thread a moment later
        try:
            await asyncio.wait_for(b.acquire("fakeai", rpm=None, tpm=100), timeout=1.0)
        except TimeoutError:
            return False
        return True

    try:
        assert asyncio.run(scenario()) is False  # b waits: a's 150 tokens are in the window
    finally:
        a.close()
        b.close()


def test_a_lost_worker_s_calls_in_flight_end_and_a_new_server_ends_a_dead_one_s(dsn: str) -> None:
    db = PostgresDatabase(dsn)
    workers = WorkerStore(db)
    workers.register("w1-abc", "w1", "host1", 1, 2)
    worker, server = ProviderLimits(dsn, "w1-abc"), ProviderLimits(dsn, "server-1")

    async def take(limits: ProviderLimits, n: int) -> None:
        for _ in range(n):
            await limits.acquire("fakeai", rpm=100, tpm=None)

    asyncio.run(take(worker, 3))
    asyncio.run(take(server, 2))

    def running(owner: str) -> int:
        row = db.query_one("SELECT COUNT(*) AS n FROM provider_calls WHERE owner = ? AND ended IS NULL", (owner,))
        assert row is not None
        return int(row["n"])

    assert running("w1-abc") == 3 and running("server-1") == 2
    assert workers.declare_lost("w1-abc", 0)
    assert running("w1-abc") == 0  # ended with its worker, in the same transaction
    assert running("server-1") == 2
    workers.register("w2-def", "w2", "host2", 2, 2)
    live = ProviderLimits(dsn, "w2-def")
    asyncio.run(take(live, 1))
    ProviderLimits(dsn, "server-2").settle_orphans()  # a new server's start
    assert running("server-1") == 0
    assert running("w2-def") == 1  # a live worker's call goes on
    for limits in (worker, server, live):
        limits.close()
    db.close()


def test_an_outage_found_by_one_process_is_the_one_another_holds_for(dsn: str) -> None:
    a, b = ProviderLimits(dsn, "a"), ProviderLimits(dsn, "b")
    key = "fakeai http://10.0.0.1/v1"
    assert a.failing(key) < 0.2
    time.sleep(0.4)
    assert b.failing(key) >= 0.4  # b's clock is a's
    a.reached(key)
    a.close()  # its end written
    assert b.failing(key) < 0.2  # a new outage
    db = PostgresDatabase(dsn)
    with db.transaction() as cur:  # its last failure long ago: an outage that ended unseen
        cur.execute(
            "UPDATE provider_outages SET down_since = down_since - 1000, last_failed = last_failed - ?", (STALE_S + 1,)
        )
    assert b.failing(key) < 0.2
    b.close()
    db.close()


def test_a_process_that_meets_an_outage_late_gets_no_new_hold(dsn: str) -> None:
    agent = AgentSpec.model_validate({"model": "openai:m", "base_url": "http://10.0.0.1/v1"})
    key = " ".join(outage.key_of(agent))
    other = ProviderLimits(dsn, "other")
    other.failing(key)
    db = PostgresDatabase(dsn)
    with db.transaction() as cur:  # the other process found it down 100 s ago, and still does
        cur.execute("UPDATE provider_outages SET down_since = down_since - 100")
    mine = ProviderLimits(dsn, "mine")
    outage.use(mine)
    rate_limit.use(mine)
    try:
        wait = outage.outage_wait(agent, 0, backoff_s=1.0, hold_s=120.0)
        assert wait is not None and wait <= 20.5  # what is left of the other's hold, not a new one of 120 s
        assert outage.outage_wait(agent, 0, backoff_s=1.0, hold_s=90.0) is None  # its hold is over
        outage.reached(agent)
    finally:
        outage.use(None)
        rate_limit.use(None)
        outage.reached(agent)
        mine.close()
        other.close()
    assert db.query("SELECT * FROM provider_outages") == []  # the process that saw it wrote its end
    db.close()
