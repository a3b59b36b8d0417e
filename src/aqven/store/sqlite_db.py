"""The SQLite backend: `.aqven/aqven.sqlite`, WAL, one writer at a time across processes (`BEGIN IMMEDIATE`)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

from aqven.store.db import Cursor, Database, Params, Reader
from aqven.store.schema import MIGRATIONS, sqlite_statements

T = TypeVar("T")

WAL_CHECKPOINT_PAGES = 10_000
BUSY_WAIT_S = 30.0  # the longest a statement waits for another process's write before it fails


def is_busy(exc: BaseException) -> bool:
    """Whether SQLite said another connection holds the lock."""
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


def _patient(step: Callable[[], T]) -> T:
    """Run `step`, again while another connection holds the write lock: after 0.1 ms, then doubling up to 2 ms.

    A write transaction here lasts well under a millisecond, so short steps keep two processes writing side by
    side close to one writing alone; SQLite's own busy handler would sleep 1 ms at the first conflict."""
    delay, deadline = 0.0001, time.monotonic() + BUSY_WAIT_S
    while True:
        try:
            return step()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.002)


class SqliteDatabase(Database):
    """The project database in one SQLite file."""

    dialect = "sqlite"
    IntegrityError = sqlite3.IntegrityError

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._conn = self._connect()
        self._conn.execute("PRAGMA journal_mode=WAL")
        # Held-out inputs and outputs live here: only this user reads them (SQLite gives -wal/-shm the same mode).
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                Path(f"{path}{suffix}").chmod(0o600)
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        # A checkpoint copies the WAL's pages into the database and syncs it, on the thread of the commit that
        # passes the mark: at 10,000 pages (40 MB) it runs a tenth as often as at SQLite's 1,000, and writes each
        # page that changed meanwhile once (an attempt rewrites the same index and tally pages). Seen in a worker:
        # 124 commits of 3 ms or more in 15 s (0.7 s in all) at 1,000 pages; 16 (0.3 s) at 10,000.
        self._conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        self._migrate()
        # Another process may write too (the server's workers, research/series/workers.py): this connection waits
        # for it in short steps of its own (`_patient`) instead of SQLite's, which sleeps 1, 2, 5, 10 ... 100 ms.
        self._conn.execute("PRAGMA busy_timeout=0")
        self._readers = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []

    @property
    def location(self) -> str:
        return str(self.path)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
        conn.row_factory = sqlite3.Row
        # A savepoint's undo journal (every grouped write has one: store/group_commit.py) stays in memory; with the
        # default it went to a temporary file past 64 KB, created, written and unlinked: half a worker's writes.
        conn.execute("PRAGMA temp_store=MEMORY")
        return conn

    def _writer(self) -> Cursor:
        return cast(Cursor, self._conn.cursor())

    def _begin(self, cur: Cursor, *, wait: bool) -> Cursor:
        if wait:
            _patient(lambda: cur.execute("BEGIN IMMEDIATE"))
        else:
            cur.execute("BEGIN IMMEDIATE")
        return cur

    def _read(self, step: Callable[[], T]) -> T:
        return _patient(step)

    def is_busy(self, exc: BaseException) -> bool:
        return is_busy(exc)

    def undoable(self) -> AbstractContextManager[Any]:
        return contextlib.nullcontext()  # SQLite undoes a failed statement alone already

    def json_field(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"

    @contextmanager
    def reading(self) -> Iterator[Reader]:
        conn: sqlite3.Connection | None = getattr(self._readers, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only=ON")
            self._readers.conn = conn
            with self._lock:
                self._reader_conns.append(conn)
        conn.execute("BEGIN")  # WAL gives every read transaction one consistent snapshot
        try:
            yield _SqliteReader(conn)
        finally:
            conn.execute("COMMIT")

    _version_hint = "upgrade AQVEN, or move .aqven/aqven.sqlite aside"

    def _migration_statements(self, version: int) -> list[str]:
        return sqlite_statements(MIGRATIONS[version])

    def close(self) -> None:
        self._close_connections(self._conn, self._reader_conns)


class _SqliteReader:
    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Params = (), /) -> Cursor:
        return cast(Cursor, self._conn.execute(sql, params))

    def tuples(self) -> Cursor:
        cur = self._conn.cursor()
        cur.row_factory = None
        return cast(Cursor, cur)
