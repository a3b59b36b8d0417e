"""The project database, on one of two backends: a SQLite file (the default) or a PostgreSQL database (a team's).

`Database` holds what both share: one writer connection behind a lock, so the server's threads and its event loop
never interleave half-written rows; transactions that nest as savepoints; group commit (store/group_commit.py);
reads on a per-thread connection that see one committed state. The SQL the stores write is the subset both
dialects share, with `?` for parameters; `store/sqlite_db.py` and `store/postgres_db.py` hold what differs.
Money columns are TEXT holding a Decimal.
"""

from __future__ import annotations

import functools
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Literal, Protocol, TypeVar

from aqven.store.group_commit import GroupCommit, Later
from aqven.store.schema import SCHEMA_VERSION, check_version

T = TypeVar("T")

Params = Sequence[Any] | dict[str, Any]
#: Where a change of a series' status is announced to other processes (`Database.announce`), with its id.
SERIES_CHANNEL = "aqven_series"
Dialect = Literal["sqlite", "postgresql"]


class Row(Protocol):
    """A result row: by column name or position, `keys()`, and `tuple(row)` / `dict(row)` as sqlite3.Row gives."""

    def __getitem__(self, key: Any, /) -> Any: ...

    def keys(self) -> list[str]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class Cursor(Protocol):
    """What the stores use of a DB-API cursor."""

    @property
    def rowcount(self) -> int: ...

    @property
    def description(self) -> Any: ...

    def execute(self, sql: str, params: Params = ..., /) -> Cursor: ...

    def executemany(self, sql: str, params: Any, /) -> Cursor: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def close(self) -> None: ...

    def __iter__(self) -> Iterator[Any]: ...


class Reader(Protocol):
    """A read-only connection inside one read transaction (`Database.reading`)."""

    def execute(self, sql: str, params: Params = ..., /) -> Cursor: ...

    def tuples(self) -> Cursor:
        """A cursor whose rows are plain tuples (a lookup by name costs, in a read of many rows)."""
        ...


class WriteSpoiled(Exception):
    """A grouped write caught the failure of a write nested in it, which had no savepoint (`transaction`)."""


class Database(ABC):
    """A thread-safe handle on the project database."""

    dialect: Dialect
    #: Appended to a SELECT that reads a row in order to write it: a row lock where rows are locked (PostgreSQL);
    #: SQLite's writer holds the whole database already.
    for_update: str = ""
    #: The error a broken constraint raises (a duplicate key).
    IntegrityError: type[Exception] = Exception

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0  # open transactions of the lock's holder (a batch and what it groups)
        self.generation = 0  # counts rollbacks: what a store remembers of its own writes is good within one
        self._pipelined = False  # the open transaction is a pipelined group (`transaction`)
        self._cursor: Cursor | None = None  # the open outer transaction's cursor
        self._deferred: dict[str, list[tuple[Any, ...]]] = {}  # rows to insert at its end (`defer`)
        self._checks: list[Callable[[], None]] = []  # to run once its grouped write is answered (`when_answered`)
        self._spoiled = False  # a failure inside the open grouped write that only its own undo can undo
        self._whole = False  # the open group is undone whole (its grouped writes have no savepoints)
        self.group = GroupCommit(
            self.transaction, busy=self.is_busy, undone=self.is_undone, whole_first=self.pipelined_groups
        )

    # ---- what a backend provides ----

    @abstractmethod
    def _writer(self) -> Cursor:
        """A new cursor on the writer connection (the lock is held)."""

    @abstractmethod
    def _begin(self, cur: Cursor, *, wait: bool) -> Cursor:
        """Begin the outer write transaction; the cursor it is to be written with."""

    @abstractmethod
    def reading(self) -> AbstractContextManager[Reader]:
        """A read-only view of the last committed state, on this thread's own connection.

        Long reads (a snapshot of a big series) go here: they neither hold the writers' lock nor see half of a
        change."""

    @abstractmethod
    def _read(self, step: Callable[[], T]) -> T:
        """Run a read on the writer connection (the lock is held), waiting out another process's lock."""

    @abstractmethod
    def close(self) -> None: ...

    def _close_connections(self, writer: Any, readers: list[Any]) -> None:
        """Close the readers' connections and the writer's (the backends' `close`)."""
        with self._lock:
            for conn in readers:
                conn.close()
            readers.clear()
            writer.close()

    # The schema's migrations in this backend's terms (`_migrate`).
    _version_type = "INTEGER"
    _version_hint = "upgrade AQVEN"

    @abstractmethod
    def _migration_statements(self, version: int) -> list[str]:
        """Migration `version` (store/schema.py) as this backend's statements."""

    def _lock_migrations(self, cur: Cursor) -> None:
        """Keep another process from migrating at the same time (SQLite's writer lock already does)."""
        return None

    def _migrate(self) -> None:
        """Bring the schema to SCHEMA_VERSION, or refuse a database of a newer AQVEN."""
        with self.transaction() as cur:
            self._lock_migrations(cur)
            cur.execute(f"CREATE TABLE IF NOT EXISTS schema_version (version {self._version_type} NOT NULL)")
            row = cur.execute("SELECT MAX(version) AS v FROM schema_version").fetchone()
            current = check_version(row["v"] or 0, hint=self._version_hint)
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in self._migration_statements(version):
                    cur.execute(statement)
                cur.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the database is, as it may be shown: a file's path, or a PostgreSQL DSN without its password."""

    @abstractmethod
    def json_field(self, column: str, key: str) -> str:
        """The SQL for the text of `key` in the JSON object of `column`."""

    def announce(self, cur: Cursor, channel: str, payload: str) -> None:
        """Tell other processes that something on `channel` changed, when the transaction of `cur` commits. On
        SQLite nothing crosses processes: a reader there looks again by itself (every 0.5 s)."""
        return None

    def listen(self, channel: str, heard: Callable[[str], None]) -> Callable[[], None]:
        """Call `heard(payload)` (on another thread) for each announcement on `channel` by any process; the answer
        stops listening. On SQLite no process announces anything."""
        return lambda: None

    def is_lost(self, exc: BaseException) -> bool:
        """Whether `exc` says the store lost the transaction it was in, through no fault of what it wrote (the
        connection to PostgreSQL was lost, the server broke a deadlock): nothing of it was written, and running it
        again from what is on record is safe. Never on SQLite, whose file does not go away under a transaction."""
        return False

    def is_undone(self, exc: BaseException) -> bool:
        """Whether a group whose transaction failed with `exc` is certainly not written, on a connection that takes
        statements again (store/group_commit.py writes it again, write by write)."""
        return True

    def is_busy(self, exc: BaseException) -> bool:
        """Whether `exc` says another connection holds the lock a transaction needs to begin."""
        return False

    # ---- shared ----

    #: Whether a group of grouped writes is sent in one pipeline (store/group_commit.py): where each statement is a
    #: round trip to a server (PostgreSQL), not a function call (SQLite).
    pipelined_groups = False

    @contextmanager
    def transaction(
        self, *, wait: bool = True, pipelined: bool = False, undoable: bool = False, whole: bool = False
    ) -> Iterator[Cursor]:
        """One write transaction; inside a `batch` it is a savepoint of the batch's (same all-or-nothing). With
        `wait` off, it fails at once while another process holds the writer lock (SQLite).

        `pipelined` (group commit's transaction, where the backend has `pipelined_groups`): its statements go out
        without waiting for their answers. Each transaction nested directly in it (one grouped write) still has its
        savepoint, and waits for its statements' answers before it is released (`_settle`): a statement that failed
        fails that write alone, as on SQLite. What a grouped write nests in turn has no savepoint of its own (two
        statements fewer each, a dozen per attempt), unless `undoable`: a failure inside it fails the grouped
        write even where the write catches it (`_spoiled`), since nothing could undo it alone.

        `whole` (with `pipelined`): the group is undone whole when any of its writes fails, and its writes have no
        savepoints either; nothing waits for answers until the commit, where the writes' checks (`when_answered`)
        run after one wait for all of them. Group commit writes a group so first, and a group that failed again
        write by write (store/group_commit.py)."""
        with self._lock:
            outer = self._depth == 0
            if outer:
                self.group.drain()  # what was handed in earlier is written first (store/group_commit.py)
                self._pipelined = pipelined and self.pipelined_groups
                self._whole = self._pipelined and whole
            grouped_write = self._pipelined and self._depth == 1
            light = (self._pipelined and self._depth >= 2 and not undoable) or (grouped_write and self._whole)
            cur = self._writer()
            if outer:
                cur = self._begin(cur, wait=wait)
                self._cursor = cur
            elif not light:
                cur.execute("SAVEPOINT nested")
            if grouped_write:
                self._spoiled = False
            self._depth += 1
            try:
                yield cur
                if outer:  # a COMMIT that fails (a pipeline's error) is undone as the block's failure is
                    self._write_deferred(cur)
                    if self._checks:  # a whole group's: what they read is answered first
                        self._answer_checks()
                    self._commit(cur)
                elif grouped_write:  # one grouped write: its failure is its own
                    if self._spoiled:
                        raise WriteSpoiled("a write nested in this grouped write failed, and it cannot be undone alone")
                    if self._whole:  # answered, and undone if need be, with its group
                        return
                    self._write_deferred(cur)
                    self._answer_checks()
                    cur.execute("RELEASE nested")
                elif not light:
                    cur.execute("RELEASE nested")
            except BaseException:
                self.generation += 1
                if light:
                    self._spoiled = True  # undone with the grouped write it is part of
                    raise
                self._deferred.clear()
                self._checks.clear()
                self._undo(cur, outer)
                raise
            finally:
                self._depth -= 1
                if outer:
                    self._pipelined = self._whole = False
                cur.close()

    def _settle(self) -> None:
        """Wait for the answers to what was sent in a pipeline; raise the error of a statement that failed."""
        return None

    def defer(self, sql: str, row: tuple[Any, ...]) -> None:
        """Insert `row` with `sql` at the end of the grouped write (or transaction) it is made in, with the others of
        its kind in one statement (an insert nothing in the write reads back: a trace event). Only while
        `pipelined`."""
        assert self._pipelined
        self._deferred.setdefault(sql, []).append(row)

    def _answer_checks(self) -> None:
        """Wait for the answers to what was sent, then run the checks that read them (`when_answered`)."""
        self._settle()
        checks, self._checks = self._checks, []
        for check in checks:
            check()

    def when_answered(self, check: Callable[[], None]) -> None:
        """Run `check` (which reads what was sent, a row count) once what was sent is answered: at once, except in a
        grouped write of a pipelined group, whose statements are answered together at its end (`_settle`); then
        before its savepoint is released (in a group sent whole, before the group's COMMIT), and what it raises
        undoes the write as a failure of the write would. A write that must see a row count (a claim) so costs no
        round trip of its own."""
        if self._pipelined and self._depth >= 2:
            self._checks.append(check)
        else:
            check()

    def _write_deferred(self, cur: Cursor) -> None:
        for sql, rows in self._deferred.items():
            self._insert_rows(cur, sql, rows)
        self._deferred.clear()

    def _insert_rows(self, cur: Cursor, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """Insert `rows` with the one-row INSERT `sql` (a function call a row, on SQLite)."""
        cur.executemany(sql, rows)

    @property
    def pipelined(self) -> bool:
        """Whether the open transaction is group commit's pipelined one (`transaction`)."""
        return self._pipelined

    def undoable(self) -> AbstractContextManager[Any]:
        """Around one statement that may fail (a duplicate key) inside a transaction, so that its failure undoes
        it alone and the transaction goes on: a savepoint where a failed statement spoils the transaction."""
        return self.transaction(undoable=True)

    def _before_read(self) -> None:
        """A read inside a transaction sees its deferred rows."""
        if self._deferred and self._cursor is not None and self._depth:
            self._write_deferred(self._cursor)

    def _commit(self, cur: Cursor) -> None:
        cur.execute("COMMIT")

    def _undo(self, cur: Cursor, outer: bool) -> None:
        cur.execute("ROLLBACK" if outer else "ROLLBACK TO nested")
        if not outer:
            cur.execute("RELEASE nested")

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group the writes of the block into one transaction (one commit instead of one per write).

        For synchronous stretches only (an attempt's writes between two waits): the lock is held throughout,
        so it must never span an `await`.
        """
        with self.transaction():
            yield

    async def grouped(self, write: Callable[[], T | Later[T]]) -> T:
        """Run `write` in a transaction shared with the writes other tasks of this process hand in meanwhile, and
        answer once it is committed (store/group_commit.py). Its own failure rolls back only its own writes. An
        answer it gives as `Later` is read then (`query_one_later`)."""
        answer = await self.group.write(write)
        return answer.read() if isinstance(answer, Later) else answer

    def query(self, sql: str, params: Params = ()) -> list[Row]:
        """Rows read on the writer connection: inside a transaction of this thread, they include its writes."""
        with self._lock:
            self._before_read()
            return self._read(lambda: _fetch_all(self._writer(), sql, params))

    def query_one(self, sql: str, params: Params = ()) -> Row | None:
        with self._lock:
            self._before_read()
            row: Row | None = self._read(lambda: _fetch_one(self._writer(), sql, params))
            return row

    def query_one_later(self, sql: str, params: Params = ()) -> Later[Row | None]:
        """A write that answers a row (`UPDATE … RETURNING`), the row read once the write is committed: in a whole
        group (`transaction`), from the answers that come with its commit, so that the write waits for none of its
        own; elsewhere, now. Not for a read of what the transaction deferred (`defer`): that goes later."""
        with self._lock:
            if not (self._whole and self._depth >= 2):
                row = self.query_one(sql, params)
                return Later(lambda: row)
            cur = self._writer()
            cur.execute(sql, params)
            return Later(functools.partial(_fetch_sent, cur))


def _fetch_all(cur: Cursor, sql: str, params: Params) -> list[Row]:
    try:
        return cur.execute(sql, params).fetchall()
    finally:
        cur.close()


def _fetch_sent(cur: Cursor) -> Row | None:
    try:
        row: Row | None = cur.fetchone()
        return row
    finally:
        cur.close()


def _fetch_one(cur: Cursor, sql: str, params: Params) -> Row | None:
    try:
        row: Row | None = cur.execute(sql, params).fetchone()
        return row
    finally:
        cur.close()
