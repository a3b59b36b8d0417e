"""A PostgreSQL crash and restart between two uses of the store: the first use after it works.

A connection whose server went away is found dead only when it is next used. Where that first use is the BEGIN of a
write transaction (plain, or a group of grouped writes in a pipeline), a read outside a transaction, or the BEGIN of
a read snapshot, nothing of it has run yet: it runs on a new connection instead of failing. Before this, the first
grouped write after a restart failed the whole group, and the attempts waiting on it ended as infrastructure errors
(`bench/soak/soak_kill.py --store postgres`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aqven.store.postgres_db import PostgresDatabase
from support import postgres


def _fresh(cluster: postgres.Cluster) -> PostgresDatabase:
    db = PostgresDatabase(postgres.create_database(cluster.dsn))
    with db.transaction() as cur:
        cur.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)")
    return db


def test_the_first_uses_after_a_restart_work(pg_cluster: postgres.Cluster) -> None:
    db = _fresh(pg_cluster)
    with db.reading() as r:  # this thread's read connection exists before the crash
        assert r.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0
    pg_cluster.restart_immediate()
    assert db.query("SELECT COUNT(*) AS n FROM t")[0]["n"] == 0  # a read outside a transaction
    with db.reading() as r:
        assert r.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0
    pg_cluster.restart_immediate()
    with db.transaction() as cur:  # a plain write transaction
        cur.execute("INSERT INTO t (n) VALUES (?)", (1,))
    assert db.query("SELECT n FROM t")[0]["n"] == 1
    db.close()


def test_a_group_of_grouped_writes_after_a_restart_is_written(pg_cluster: postgres.Cluster) -> None:
    db = _fresh(pg_cluster)
    pg_cluster.restart_immediate()

    def insert(n: int) -> Callable[[], None]:
        def write() -> None:
            with db.transaction() as cur:
                cur.execute("INSERT INTO t (n) VALUES (?)", (n,))

        return write

    async def group() -> None:
        await asyncio.gather(*(db.grouped(insert(n)) for n in range(5)))

    asyncio.run(group())  # one group, in a pipeline: its BEGIN finds the connection dead
    assert [r["n"] for r in db.query("SELECT n FROM t ORDER BY n")] == [0, 1, 2, 3, 4]
    db.close()
