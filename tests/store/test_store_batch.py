"""Database.batch: the writes of a stretch are one transaction; a failing inner write undoes only itself."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from aqven.store.db import Database


@pytest.fixture
def db(make_database: Callable[..., Database]) -> Database:
    d = make_database("a")
    with d.transaction() as cur:
        cur.execute("CREATE TABLE t (x INTEGER)")
    return d


def seen(db: Database) -> list[int]:
    with db.reading() as conn:  # another connection: sees committed data only
        return [r[0] for r in conn.execute("SELECT x FROM t ORDER BY x")]


def write(db: Database, x: int) -> None:
    with db.transaction() as cur:
        cur.execute("INSERT INTO t VALUES (?)", (x,))


def test_a_batch_commits_once_at_its_end(db: Database) -> None:
    with db.batch():
        write(db, 1)
        write(db, 2)
        assert seen(db) == []  # nothing committed yet: one transaction
        assert [r[0] for r in db.query("SELECT x FROM t ORDER BY x")] == [1, 2]  # the writer sees its writes
    assert seen(db) == [1, 2]


def test_an_error_in_the_batch_undoes_all_of_it(db: Database) -> None:
    with pytest.raises(RuntimeError), db.batch():
        write(db, 1)
        raise RuntimeError("boom")
    assert seen(db) == []
    write(db, 3)  # the connection is usable afterwards
    assert seen(db) == [3]


def test_a_caught_failure_of_an_inner_write_undoes_only_that_write(db: Database) -> None:
    with db.batch():
        write(db, 1)
        with pytest.raises(RuntimeError), db.transaction() as cur:
            cur.execute("INSERT INTO t VALUES (2)")
            raise RuntimeError("inner")
        with db.batch():  # batches nest
            write(db, 4)
    assert seen(db) == [1, 4]
