"""Group commit (store/group_commit.py): writes handed in together share one transaction, each still stands alone.

On both backends (a real SQLite file, a real PostgreSQL database): commits are counted as they succeed, and what
is on record is read from a second connection, as another process would see it.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable
from typing import Any, cast

import pytest

from aqven.store import group_commit
from aqven.store.db import Database, WriteSpoiled
from aqven.store.sqlite_db import SqliteDatabase

MakeDatabase = Callable[..., Database]


def _db(make_database: MakeDatabase) -> tuple[Database, list[str]]:
    db = make_database("g")
    with db.transaction() as cur:
        cur.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
    _reader(make_database)
    commits: list[str] = []
    commit = db._commit

    def counted(cur: Any) -> None:
        commit(cur)
        commits.append("COMMIT")

    db._commit = counted  # type: ignore[method-assign]
    return db, commits


def _put(db: Database, key: str, value: int) -> str:
    with db.transaction() as cur:
        cur.execute("INSERT INTO t VALUES (?, ?)", (key, value))
    return key


@functools.cache
def _reader(make_database: MakeDatabase) -> Database:
    """A second connection of the test's (opened once: opening one takes the writer lock on SQLite)."""
    return make_database("g")


def _on_record(make_database: MakeDatabase) -> dict[str, int]:
    with _reader(make_database).reading() as conn:
        return {r[0]: r[1] for r in conn.execute("SELECT k, v FROM t").fetchall()}


async def test_writes_handed_in_while_held_share_one_commit(make_database: MakeDatabase) -> None:
    db, commits = _db(make_database)
    busy = [True]
    db.group.hold = lambda: busy[0]
    tasks = [asyncio.ensure_future(db.grouped(functools.partial(_put, db, f"k{i}", i))) for i in range(10)]
    await asyncio.sleep(0)
    assert _on_record(make_database) == {}  # held: the CPU phases still run
    busy[0] = False
    assert await asyncio.gather(*tasks) == [f"k{i}" for i in range(10)]
    assert commits == ["COMMIT"]
    assert _on_record(make_database) == {f"k{i}": i for i in range(10)}


async def test_a_write_is_on_record_when_its_caller_goes_on(make_database: MakeDatabase) -> None:
    db, commits = _db(make_database)
    for i in range(3):
        await db.grouped(functools.partial(_put, db, f"k{i}", i))
        assert _on_record(make_database) == {f"k{j}": j for j in range(i + 1)}
    assert len(commits) == 3  # nothing joined them: one commit each, none held back


async def test_a_write_that_raises_is_undone_alone_and_raises_in_its_caller(make_database: MakeDatabase) -> None:
    db, commits = _db(make_database)

    def half_then_fail() -> None:
        _put(db, "half", 1)
        raise ValueError("second half")

    tasks = [
        asyncio.ensure_future(db.grouped(lambda: _put(db, "a", 1))),
        asyncio.ensure_future(db.grouped(half_then_fail)),
        asyncio.ensure_future(db.grouped(lambda: _put(db, "a", 2))),  # the primary key says no
        asyncio.ensure_future(db.grouped(lambda: _put(db, "b", 3))),
    ]
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[0] == "a" and results[3] == "b"
    assert isinstance(results[1], ValueError)
    assert isinstance(results[2], db.IntegrityError)
    assert _on_record(make_database) == {"a": 1, "b": 3}
    assert commits == ["COMMIT"]


class _Counting:
    """A writer cursor that notes each statement's first word."""

    def __init__(self, cur: Any, sent: list[str]) -> None:
        self._cur, self._sent = cur, sent

    def execute(self, sql: str, params: Any = (), /) -> _Counting:
        self._sent.append(sql.split()[0].upper())
        self._cur.execute(sql, params)
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


async def _one_group(db: Database, *writes: Callable[[], Any]) -> list[Any]:
    """`writes` handed in together, written as one group; what each answered or raised."""
    busy = [True]
    db.group.hold = lambda: busy[0]
    tasks = [asyncio.ensure_future(db.grouped(w)) for w in writes]
    await asyncio.sleep(0)
    busy[0] = False
    return await asyncio.gather(*tasks, return_exceptions=True)


def _sent(db: Database) -> list[str]:
    """The first word of every statement `db`'s writer sends from now on."""
    sent: list[str] = []
    writer = db._writer
    db._writer = lambda: cast(Any, _Counting(writer(), sent))  # type: ignore[method-assign]
    return sent


async def test_on_postgresql_a_group_goes_whole_and_one_that_fails_goes_again_write_by_write(
    make_database: MakeDatabase,
) -> None:
    """PostgreSQL: a group is sent whole (no savepoint a write, one wait at its commit); when a write of it fails,
    nothing of the group is written and it goes again write by write, each in its savepoint, so that the failure is
    its write's alone: every write ran twice, the failed one raised once, in its own caller. SQLite writes each in
    its savepoint from the start, once."""
    db, commits = _db(make_database)
    sent = _sent(db)
    ran: list[str] = []

    def put(key: str, value: int) -> str:
        ran.append(key)
        return _put(db, key, value)

    async def group(*writes: tuple[str, int]) -> list[Any]:
        return await _one_group(db, *(functools.partial(put, *w) for w in writes))

    assert await group(("a", 1), ("b", 2), ("c", 3)) == ["a", "b", "c"]
    assert ran == ["a", "b", "c"] and commits == ["COMMIT"]
    # SQLite: a savepoint for each write and one for the transaction it nests; PostgreSQL's second pass: the write's
    savepoints = sent.count("SAVEPOINT")
    assert savepoints == (0 if db.pipelined_groups else 6), sent
    ran.clear()
    results = await group(("d", 4), ("a", 5), ("e", 6))  # "a" breaks the primary key
    assert results[0] == "d" and results[2] == "e" and isinstance(results[1], db.IntegrityError)
    assert ran == (["d", "a", "e"] * 2 if db.pipelined_groups else ["d", "a", "e"])
    assert sent.count("SAVEPOINT") - savepoints == (3 if db.pipelined_groups else 6)
    assert commits == ["COMMIT", "COMMIT"]
    assert _on_record(make_database) == {"a": 1, "b": 2, "c": 3, "d": 4, "e": 6}


async def test_a_statement_a_failed_group_skipped_is_never_taken_for_prepared(make_database: MakeDatabase) -> None:
    """psycopg prepares a statement at its sixth run, and counts it prepared once the Parse is sent. In a group of
    PostgreSQL that a failure aborted, that Parse was skipped with the rest: named later, the statement was not found
    (`InvalidSqlStatementName`), in the group's second pass and in every write after it."""
    db, _commits = _db(make_database)

    def put(key: str, value: int) -> str:  # a text of its own, counted from zero
        with db.transaction() as cur:
            cur.execute("INSERT INTO t (k, v) VALUES (?, ?)", (key, value))
        return key

    group = functools.partial(_one_group, db)
    await db.grouped(functools.partial(_put, db, "x", 0))
    for _ in range(2):  # failures before (psycopg forgets its prepared statements at the first ROLLBACK it sees)
        assert isinstance((await group(functools.partial(_put, db, "x", 0)))[0], db.IntegrityError)
    for i in range(5):  # five runs: the sixth prepares it
        assert await group(functools.partial(put, f"k{i}", i)) == [f"k{i}"]
    failed = await group(functools.partial(_put, db, "x", 0), functools.partial(put, "k5", 5))
    assert isinstance(failed[0], db.IntegrityError) and failed[1] == "k5", failed
    for i in range(6, 12):  # and after it
        assert await group(functools.partial(put, f"k{i}", i)) == [f"k{i}"]
    assert _on_record(make_database) == {"x": 0, **{f"k{i}": i for i in range(12)}}


async def test_a_grouped_write_s_later_answer_is_read_once_it_is_committed(make_database: MakeDatabase) -> None:
    """`query_one_later` (a run's end answers its record so): the row a write's statement answers, read by its
    caller once the group is committed; a group written again answers from its second pass."""
    db, _commits = _db(make_database)
    with db.transaction() as cur:
        cur.execute("INSERT INTO t VALUES ('a', 1), ('b', 2)")

    def bump(key: str) -> Any:
        with db.transaction():
            return db.query_one_later("UPDATE t SET v = v + 10 WHERE k = ? RETURNING k, v", (key,)).then(
                lambda row: None if row is None else (row["k"], row["v"])
            )

    for breaking in (False, True):
        tasks = [asyncio.ensure_future(db.grouped(functools.partial(bump, k))) for k in ("a", "nope", "b")]
        if breaking:
            tasks.append(asyncio.ensure_future(db.grouped(lambda: _put(db, "a", 0))))
        results = await asyncio.gather(*tasks, return_exceptions=True)
        n = 21 if breaking else 11
        assert results[:3] == [("a", n), None, ("b", n + 1)], results
        assert not breaking or isinstance(results[3], db.IntegrityError)
    assert _on_record(make_database) == {"a": 21, "b": 22}
    with db.transaction():  # outside a group it is read at once
        answer = db.query_one_later("UPDATE t SET v = 0 WHERE k = 'a' RETURNING v")
    row = answer.read()
    assert row is not None and row["v"] == 0


async def test_deferred_rows_are_all_written_and_a_broken_one_fails_its_own_write_alone(
    make_database: MakeDatabase,
) -> None:
    # PostgreSQL writes a grouped write's deferred rows (as the runs' events are) as multi-row INSERTs of at most
    # 500 rows each: 1,201 rows take three, and a duplicate key in the last one undoes that write, not its
    # neighbours'. SQLite, which defers nothing, inserts them one by one, with the same outcome.
    db, commits = _db(make_database)
    insert = "INSERT INTO t (k, v) VALUES (?, ?)"

    def rows(prefix: str, n: int, duplicate: str | None = None) -> int:
        with db.transaction() as cur:
            values = [(f"{prefix}{i:05d}", i) for i in range(n)] + ([(duplicate, -1)] if duplicate else [])
            for row in values:
                if db.pipelined:
                    db.defer(insert, row)
                else:
                    cur.execute(insert, row)
        return n

    busy = [True]
    db.group.hold = lambda: busy[0]
    tasks = [
        asyncio.ensure_future(db.grouped(functools.partial(rows, "a", 1201))),
        asyncio.ensure_future(db.grouped(functools.partial(rows, "b", 700, duplicate="a00007"))),
        asyncio.ensure_future(db.grouped(functools.partial(rows, "c", 3))),
    ]
    await asyncio.sleep(0)
    busy[0] = False
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[0] == 1201 and results[2] == 3
    assert isinstance(results[1], db.IntegrityError)
    assert _on_record(make_database) == {
        **{f"a{i:05d}": i for i in range(1201)},
        **{f"c{i:05d}": i for i in range(3)},
    }
    assert commits == ["COMMIT"]


async def test_a_row_count_checked_when_answered_undoes_its_whole_write_alone(make_database: MakeDatabase) -> None:
    # A claim's way (store/series.py claim_in_write): a conditional UPDATE, then writes that follow from it, and
    # the row count looked at once the write is answered. One that changed no row undoes everything of its write.
    db, commits = _db(make_database)
    with db.transaction() as cur:
        cur.execute("INSERT INTO t VALUES ('a', 0), ('b', 0)")
    seen: list[int] = []

    class Taken(Exception):
        pass

    def claim_then_write(key: str, then: str) -> str:
        with db.transaction() as cur:
            cur.execute("UPDATE t SET v = 1 WHERE k = ? AND v = 0", (key,))

            def check() -> None:
                seen.append(cur.rowcount)
                if cur.rowcount != 1:
                    raise Taken(key)

            db.when_answered(check)
            _put(db, then, 7)
        return then

    busy = [True]
    db.group.hold = lambda: busy[0]
    tasks = [
        asyncio.ensure_future(db.grouped(functools.partial(claim_then_write, "a", "a-run"))),
        asyncio.ensure_future(db.grouped(functools.partial(claim_then_write, "a", "a-again"))),  # taken just before
        asyncio.ensure_future(db.grouped(functools.partial(claim_then_write, "b", "b-run"))),
    ]
    await asyncio.sleep(0)
    busy[0] = False
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[0] == "a-run" and results[2] == "b-run"
    assert isinstance(results[1], Taken)
    # On PostgreSQL the group is written whole first, its checks at its end: the second one's refusal undoes it
    # all, and it is written again write by write, as on SQLite.
    assert seen == ([1, 0] if db.pipelined_groups else []) + [1, 0, 1]
    assert _on_record(make_database) == {"a": 1, "b": 1, "a-run": 7, "b-run": 7}
    assert commits == ["COMMIT", "COMMIT"]  # the rows' own, then the group's


async def test_a_grouped_write_that_swallows_a_nested_failure_is_undone_whole_where_nothing_undoes_it_alone(
    make_database: MakeDatabase,
) -> None:
    """On PostgreSQL a write nested in a grouped write has no savepoint: a grouped write that catches its failure
    fails whole (nothing of it written), the others stand. With `undoable` the caught failure is undone alone and
    the write goes on, on both backends. On SQLite every nesting keeps its savepoint, as before."""
    db, commits = _db(make_database)

    def swallow(key: str, *, undoable: bool) -> str:
        _put(db, key, 1)
        try:
            with db.transaction(undoable=undoable) as cur:
                cur.execute("INSERT INTO t VALUES (?, ?)", (f"{key}-inner", 2))
                raise ValueError("nested")
        except ValueError:
            pass
        return key

    tasks = [
        asyncio.ensure_future(db.grouped(lambda: _put(db, "a", 1))),
        asyncio.ensure_future(db.grouped(functools.partial(swallow, "light", undoable=False))),
        asyncio.ensure_future(db.grouped(functools.partial(swallow, "kept", undoable=True))),
        asyncio.ensure_future(db.grouped(lambda: _put(db, "b", 3))),
    ]
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[0] == "a" and results[2] == "kept" and results[3] == "b"
    if db.pipelined_groups:
        assert isinstance(results[1], WriteSpoiled)
        assert _on_record(make_database) == {"a": 1, "kept": 1, "b": 3}
    else:
        assert results[1] == "light"
        assert _on_record(make_database) == {"a": 1, "light": 1, "kept": 1, "b": 3}
    assert commits == ["COMMIT"]


async def test_a_plain_transaction_writes_what_was_handed_in_before_it_first(make_database: MakeDatabase) -> None:
    db, _ = _db(make_database)
    db.group.hold = lambda: True
    order: list[str] = []

    def first_write() -> str:
        order.append("grouped")
        return _put(db, "first", 1)

    first = asyncio.ensure_future(db.grouped(first_write))
    await asyncio.sleep(0)  # queued, held
    with db.transaction():
        order.append("plain")
        assert _on_record(make_database) == {"first": 1}  # committed before this transaction began
    assert order == ["grouped", "plain"]
    assert await first == "first"


async def test_a_cancelled_caller_s_write_is_not_written(make_database: MakeDatabase) -> None:
    db, _ = _db(make_database)
    busy = [True]
    db.group.hold = lambda: busy[0]
    gone = asyncio.ensure_future(db.grouped(lambda: _put(db, "gone", 1)))
    kept = asyncio.ensure_future(db.grouped(lambda: _put(db, "kept", 2)))
    await asyncio.sleep(0)
    gone.cancel()
    busy[0] = False
    assert await kept == "kept"
    assert gone.cancelled()
    assert _on_record(make_database) == {"kept": 2}


async def test_a_write_held_by_a_phase_that_never_ends_waits_at_most_wait_s(
    make_database: MakeDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, commits = _db(make_database)
    db.group.hold = lambda: True  # a phase that forgot to release the CPU gate must not stall its writes
    monkeypatch.setattr(group_commit, "WAIT_S", 0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await db.grouped(lambda: _put(db, "late", 1)) == "late"
    assert 0.04 <= loop.time() - started < 1.0
    assert commits == ["COMMIT"]


async def test_a_group_is_written_at_once_when_it_is_full(
    make_database: MakeDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, commits = _db(make_database)
    db.group.hold = lambda: True
    monkeypatch.setattr(group_commit, "WAIT_S", 30.0)
    n = group_commit.MAX_WRITES
    writes = [db.grouped(functools.partial(_put, db, f"k{i}", i)) for i in range(n)]
    done = await asyncio.wait_for(asyncio.gather(*writes), 5)
    assert len(done) == n and commits == ["COMMIT"]


@pytest.mark.sqlite_only  # SQLite's one writer lock; PostgreSQL has none to find taken
async def test_a_group_that_finds_the_writer_lock_taken_lets_the_loop_run_and_commits_once_it_is_free(
    make_database: MakeDatabase,
) -> None:
    """Another process writing: the group does not sleep on the lock (the loop would stop with it); the attempts'
    other work goes on, and the write lands once the lock is free."""
    db, commits = _db(make_database)
    other = sqlite3.connect(cast(SqliteDatabase, db).path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t VALUES ('other', 0)")
    write = asyncio.ensure_future(db.grouped(lambda: _put(db, "mine", 1)))
    turns = 0
    loop = asyncio.get_running_loop()
    until = loop.time() + 0.1
    while loop.time() < until:  # the loop turns while the group waits for the lock
        await asyncio.sleep(0)
        turns += 1
    assert not write.done() and turns > 100
    other.execute("COMMIT")
    other.close()
    assert await asyncio.wait_for(write, 5) == "mine"
    assert _on_record(make_database) == {"other": 0, "mine": 1}
    assert commits == ["COMMIT"]
