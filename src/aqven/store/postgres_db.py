"""The PostgreSQL backend: a team's shared record, with the same guarantees as the SQLite file.

The stores write the SQL both dialects share with `?` for parameters; here it becomes psycopg's (`%s`, a literal
`%` doubled), once per distinct text. Rows read as sqlite3.Row does (by name or position). There is no global
writer lock: each check-then-act of the stores is a constraint (`ON CONFLICT`), a conditional UPDATE or a row
lock (`for_update`), so several processes write side by side; a deadlock PostgreSQL breaks undoes a group of
grouped writes, which runs again (store/group_commit.py). A connection lost (the server restarted) is made anew
on the next use; the transaction it was in fails, as it would have on SQLite had the process died.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from decimal import Decimal
from typing import Any, TypeVar, cast

import psycopg
import psycopg.errors
from psycopg.adapt import Buffer, Loader
from psycopg.rows import RowMaker

from aqven.errors import STORE_HELD, STORE_UNAVAILABLE, AqvenError
from aqven.store.db import Cursor, Database, Params, Reader
from aqven.store.location import shown_dsn
from aqven.store.schema import postgres_statements

T = TypeVar("T")

CONNECT_WAIT_S = 30.0  # how long a lost connection is tried again (a PostgreSQL restart takes a few seconds)
_MIGRATION_LOCK = 0x6171_7665_6E00  # "aqven": one process migrates at a time


@functools.lru_cache(maxsize=4096)
def to_postgres(sql: str) -> str:
    """`sql` with psycopg's placeholders: `?` outside quotes becomes `%s`, every `%` is doubled."""
    out: list[str] = []
    quote: str | None = None
    for ch in sql:
        if ch == "%":
            out.append("%%")
        elif quote is not None:
            out.append(ch)
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        else:
            out.append(ch)
    return "".join(out)


_ROWS_PER_INSERT = 500  # rows of one multi-row INSERT (PostgreSQL takes at most 65,535 parameters)


@functools.lru_cache(maxsize=256)
def _many_values(sql: str, rows: int) -> str:
    """The one-row `INSERT … VALUES (?, …)` `sql` with its VALUES group repeated for `rows` rows."""
    head, _, group = sql.rpartition("VALUES")
    return f"{head}VALUES {', '.join([group.strip()] * rows)}"


class PgRow(tuple[Any, ...]):
    """A row by position or column name, as sqlite3.Row reads."""

    __slots__ = ()
    _index: dict[str, int]
    _names: list[str]

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


@functools.lru_cache(maxsize=1024)
def _row_class(names: tuple[str, ...]) -> type[PgRow]:
    return type("PgRow", (PgRow,), {"_index": {n: i for i, n in enumerate(names)}, "_names": list(names)})


def _rows(cursor: Any) -> RowMaker[Any]:
    # The field names from the result itself: `cursor.description` builds a Column (and looks up its type) per
    # field of every result, a fifth of a millisecond per attempt.
    result = cursor.pgresult
    if result is None or not result.nfields:
        return tuple
    return _row_class(tuple(bytes(result.fname(i) or b"").decode() for i in range(result.nfields)))


class _WholeNumeric(Loader):
    """NUMERIC as an int when whole: a SUM of integer columns is NUMERIC in PostgreSQL and an int in SQLite. No
    column of the schema is NUMERIC (money is TEXT), so nothing else reads through here."""

    def load(self, data: Buffer) -> Any:
        text = bytes(data).decode()
        if "." in text or "N" in text:  # a fraction, or NaN
            return Decimal(text)
        return int(text)


class _SharedAdaptersCursor(psycopg.Cursor[Any]):
    """psycopg's cursor, sharing its connection's adapters rather than copying them: no cursor here registers
    adapters of its own, and the copy (with the cold transformer it leaves) was a fifth of a pipelined statement's
    cost in this process (20 against 16 µs), at a cursor a statement."""

    __slots__ = ()

    def __init__(self, connection: psycopg.Connection[Any], *, row_factory: Any = None) -> None:
        self._conn = connection
        self.format = psycopg.pq.Format.TEXT
        self._pgconn = connection.pgconn
        self._adapters = connection.adapters
        self.arraysize = 1
        self._closed = False
        self._last_query = None
        self._reset()
        self._row_factory = row_factory or connection.row_factory


class _PgCursor:
    """A psycopg cursor that takes the stores' SQL. In pipeline mode a row count is known once the pipeline is
    synced: asking for it syncs (`sync`)."""

    __slots__ = ("_cur", "_sync")

    def __init__(self, cur: psycopg.Cursor[Any], sync: Callable[[], None] | None = None) -> None:
        self._cur = cur
        self._sync = sync

    @property
    def rowcount(self) -> int:
        if self._cur.rowcount < 0 and self._sync is not None:
            self._sync()
        return self._cur.rowcount

    @property
    def description(self) -> Any:
        return self._cur.description

    def execute(self, sql: str, params: Params = (), /) -> _PgCursor:
        self._cur.execute(to_postgres(sql), params)
        return self

    def executemany(self, sql: str, params: Any, /) -> _PgCursor:
        self._cur.executemany(to_postgres(sql), params)
        return self

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cur)

    def close(self) -> None:
        self._cur.close()


class _PgReader:
    __slots__ = ("_conn",)

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Params = (), /) -> _PgCursor:
        return _PgCursor(self._conn.cursor()).execute(sql, params)

    def tuples(self) -> _PgCursor:
        return _PgCursor(self._conn.cursor())  # its rows are tuples already


def connect(dsn: str) -> psycopg.Connection[Any]:
    """A connection in autocommit (transactions are begun by hand, as on SQLite), or STORE_UNAVAILABLE."""
    try:
        conn = psycopg.connect(dsn, autocommit=True, row_factory=_rows, connect_timeout=10, application_name="aqven")
    except psycopg.Error as exc:
        raise AqvenError(
            f"cannot reach the store {shown_dsn(dsn)}: {_first_line(exc)}",
            code=STORE_UNAVAILABLE,
            hint="is PostgreSQL running there, and may this user connect? (a password goes in ~/.pgpass or"
            " PGPASSWORD, not in the project folder)",
        ) from None
    conn.adapters.register_loader("numeric", _WholeNumeric)
    conn.cursor_factory = _SharedAdaptersCursor  # after the loader: the cursors share the connection's adapters
    return conn


def _forget_prepared(conn: psycopg.Connection[Any]) -> None:
    """After a failure in a pipeline: psycopg takes a statement for prepared once it has sent its Parse, and does not
    learn that the failure made PostgreSQL skip that Parse with the rest of the pipeline; the statement's name would
    be sent later and not be found (`InvalidSqlStatementName`). So psycopg forgets every statement it prepared (its
    names are never used twice) and deallocates the server's with the next statement it sends. psycopg has no public
    call for this: its own `clear()`, which it runs at a DEALLOCATE ALL or a ROLLBACK it has not seen before."""
    prepared = getattr(conn, "_prepared", None)
    if prepared is not None:
        prepared.clear()


def _first_line(exc: BaseException) -> str:
    """The error without the DSN it may quote: its first line, the password masked."""
    return shown_dsn(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)


class PostgresDatabase(Database):
    """The project database in a PostgreSQL database."""

    dialect = "postgresql"
    for_update = " FOR UPDATE"
    pipelined_groups = True
    IntegrityError = psycopg.errors.IntegrityError

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self.dsn = dsn
        self._pipeline: psycopg.Pipeline | None = None  # the open group's (`_begin`)
        self._piping: AbstractContextManager[psycopg.Pipeline] | None = None
        self._conn = connect(dsn)
        self._migrate()
        self._readers = threading.local()
        self._reader_conns: list[psycopg.Connection[Any]] = []

    @property
    def location(self) -> str:
        return shown_dsn(self.dsn)

    # ---- connections ----

    def _live(self) -> psycopg.Connection[Any]:
        """The writer connection, made anew when it was lost (PostgreSQL restarted, a network cut)."""
        if self._conn.closed or self._conn.broken:
            self._conn = _reconnect(self.dsn)
        return self._conn

    def _writer(self) -> Cursor:
        pipeline = self._pipeline
        return cast(Cursor, _PgCursor(self._live().cursor(), None if pipeline is None else pipeline.sync))

    def _begin(self, cur: Cursor, *, wait: bool) -> Cursor:
        try:
            return self._begin_on(cur)
        except psycopg.OperationalError:
            # The connection died since its last use (PostgreSQL restarted) and is found dead only here, at the
            # BEGIN, before anything of the transaction ran: it begins again on a new one.
            if not self._conn.broken:
                raise
            with contextlib.suppress(psycopg.Error):
                self._end_pipeline()
            with contextlib.suppress(psycopg.Error):
                cur.close()
            return self._begin_on(self._writer())

    def _begin_on(self, cur: Cursor) -> Cursor:
        if self._pipelined:
            # A group of grouped writes is sent in one pipeline: its statements go out without waiting for each
            # one's answer; a row count or a read waits, and so does the end of each write (`_settle`).
            self._piping = self._conn.pipeline()
            self._pipeline = self._piping.__enter__()
            cur.close()
            cur = self._writer()
        cur.execute("BEGIN")
        return cur

    def _commit(self, cur: Cursor) -> None:
        if self._pipeline is not None:
            # Sent with the rest: after a failed statement PostgreSQL skips what follows in the pipeline, the COMMIT
            # included, and leaving the pipeline raises that failure (one round trip for the whole group).
            cur.execute("COMMIT")
            self._end_pipeline()
            return
        # A COMMIT of a transaction a failed statement spoiled is a ROLLBACK that reports no error: a write that
        # swallowed its own failure must not make the others look written.
        if self._conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
            raise psycopg.errors.InFailedSqlTransaction("a statement failed in this transaction: nothing was written")
        cur.execute("COMMIT")

    def _end_pipeline(self) -> None:
        """Leave pipeline mode (its last results are read: an error among them is raised)."""
        piping, self._piping, self._pipeline = self._piping, None, None
        if piping is not None:
            piping.__exit__(None, None, None)

    def _undo(self, cur: Cursor, outer: bool) -> None:
        if self._pipeline is not None:
            _forget_prepared(self._conn)
        if outer and self._pipeline is not None:
            with contextlib.suppress(psycopg.Error):
                self._end_pipeline()
        if self._conn.broken:  # the connection is gone, and the transaction with it
            return
        if not outer and self._pipeline is not None:
            with contextlib.suppress(psycopg.Error):
                self._pipeline.sync()  # what failed in the pipeline is answered: it takes statements again
        if outer and self._conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            return  # nothing open any more (a pipeline's failure ended it)
        self._conn.cursor().execute("ROLLBACK" if outer else "ROLLBACK TO nested")
        if not outer:
            self._conn.cursor().execute("RELEASE nested")

    def _read(self, step: Callable[[], T]) -> T:
        try:
            return step()
        except psycopg.OperationalError:
            # Outside a transaction a read that found the connection dead (PostgreSQL restarted) reads again on a
            # new one; inside one, the transaction is lost with the connection and the failure stands.
            if self._depth or not self._conn.broken:
                raise
            return step()

    def is_lost(self, exc: BaseException) -> bool:
        # A lost connection, a deadlock or serialization failure (TransactionRollbackError is one), or no connection
        # to be had again within CONNECT_WAIT_S.
        return isinstance(exc, psycopg.OperationalError) or (
            isinstance(exc, AqvenError) and exc.code == STORE_UNAVAILABLE
        )

    def is_undone(self, exc: BaseException) -> bool:
        # A transaction that failed on a connection still up ended without its COMMIT (a failed statement makes
        # PostgreSQL skip what follows it, the COMMIT included). One whose connection broke may have committed.
        conn = self._conn
        return not conn.closed and not conn.broken and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE

    def announce(self, cur: Cursor, channel: str, payload: str) -> None:
        cur.execute("SELECT pg_notify(?, ?)", (channel, payload))  # delivered at the commit, or never

    def listen(self, channel: str, heard: Callable[[str], None]) -> Callable[[], None]:
        stop = threading.Event()
        thread = threading.Thread(
            target=_listen, args=(self.dsn, channel, heard, stop), name=f"listen-{channel}", daemon=True
        )
        thread.start()

        def stop_listening() -> None:
            stop.set()
            thread.join(timeout=2)

        return stop_listening

    def json_field(self, column: str, key: str) -> str:
        return f"({column}::json ->> '{key}')"

    def _insert_rows(self, cur: Cursor, sql: str, rows: list[tuple[Any, ...]]) -> None:
        # One statement of many VALUES rather than a statement a row: each is a message both ways.
        for start in range(0, len(rows), _ROWS_PER_INSERT):
            chunk = rows[start : start + _ROWS_PER_INSERT]
            cur.execute(_many_values(sql, len(chunk)), [value for row in chunk for value in row])

    def _settle(self) -> None:
        pipeline = self._pipeline
        # Nothing sent is unanswered (the write ended with a read): every answer, a failure included, is in.
        if pipeline is not None and (pipeline.result_queue or pipeline.command_queue):
            pipeline.sync()

    def _reader(self) -> psycopg.Connection[Any]:
        """This thread's read connection, made anew when it was lost."""
        conn: psycopg.Connection[Any] | None = getattr(self._readers, "conn", None)
        if conn is None or conn.closed or conn.broken:
            fresh = _reconnect(self.dsn)
            self._readers.conn = fresh
            with self._lock:
                if conn is not None and conn in self._reader_conns:
                    self._reader_conns.remove(conn)
                self._reader_conns.append(fresh)
            return fresh
        return conn

    @contextmanager
    def reading(self) -> Iterator[Reader]:
        conn = self._reader()
        # One snapshot for the whole read, as a WAL read transaction gives on SQLite. A connection that died since
        # its last use (PostgreSQL restarted) is found dead only here: nothing of the read has run, so it begins
        # again on a new one.
        try:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        except psycopg.OperationalError:
            if not conn.broken:
                raise
            conn = self._reader()
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield cast(Reader, _PgReader(conn))
        finally:
            if not conn.broken:
                conn.execute("COMMIT")

    _version_type = "BIGINT"
    _version_hint = "upgrade AQVEN, or point store: at a database of this version"

    def _lock_migrations(self, cur: Cursor) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))

    def _migration_statements(self, version: int) -> list[str]:
        return postgres_statements(version)

    def close(self) -> None:
        self._close_connections(self._conn, self._reader_conns)


def _listen(dsn: str, channel: str, heard: Callable[[str], None], stop: threading.Event) -> None:
    """LISTEN on a connection of its own until `stop`; a lost connection is made again (announcements made while
    it was gone are missed: a listener also looks by itself, as on SQLite)."""
    while not stop.is_set():
        try:
            conn = connect(dsn)
        except AqvenError:
            stop.wait(1.0)
            continue
        try:
            conn.execute(f"LISTEN {channel}")
            while not stop.is_set():
                for note in conn.notifies(timeout=0.5):
                    heard(note.payload)
        except psycopg.Error:
            stop.wait(0.5)
        finally:
            conn.close()


_SERVER_LOCK = 0x6171_7665_6E01  # one AQVEN server per store database


# How often a holding server looks at its lock's session (lost with a PostgreSQL restart); a test slows it down to
# take the lock first itself.
HOLD_CHECK_S = float(os.environ.get("AQVEN_STORE_HOLD_CHECK_S") or 2.0)


def _take_store(dsn: str, holder: str) -> psycopg.Connection[Any]:
    """A session holding the store's advisory lock, or STORE_HELD naming who holds it."""
    conn = connect(dsn)
    conn.execute("SELECT set_config('application_name', %s, false)", (holder[:63],))
    row = conn.execute("SELECT pg_try_advisory_lock(%s) AS held", (_SERVER_LOCK,)).fetchone()
    if row is not None and row[0]:
        return conn
    other = conn.execute(
        "SELECT a.application_name, a.client_addr, a.backend_start FROM pg_locks l"
        " JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted"
        " AND l.classid = %s AND l.objid = %s"
        # an advisory lock is the database's own: the other stores of the same PostgreSQL server have theirs
        " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        ((_SERVER_LOCK >> 32) & 0xFFFFFFFF, _SERVER_LOCK & 0xFFFFFFFF),
    ).fetchone()
    conn.close()
    who = "another AQVEN server" if other is None else f"{other[0] or 'another AQVEN server'}"
    since = "" if other is None else f" (connected from {other[1] or 'this host'} since {other[2]:%Y-%m-%d %H:%M})"
    raise AqvenError(
        f"the store {shown_dsn(dsn)} is held by {who}{since}: one server decides for a project",
        code=STORE_HELD,
        hint="stop that server first (aqven server stop, on its host); another project needs a database of its own",
    )


def hold_store(dsn: str, holder: str, lost: Callable[[AqvenError], None] | None = None) -> Callable[[], None]:
    """Hold the store for one server, for as long as the answer is not called: a session advisory lock on a
    connection of its own, which PostgreSQL lets go when the server's process dies. `holder` (host, pid, project)
    is what a second server is told. Raises STORE_HELD while another server holds it.

    A PostgreSQL restart ends the session and its lock with it: a thread looks every HOLD_CHECK_S and takes the
    lock again on a new session. Should another server have taken it meanwhile, `lost` is told (the server stops:
    two servers must never decide for one store)."""
    held = [_take_store(dsn, holder)]
    stop = threading.Event()

    def keep() -> None:
        while not stop.wait(HOLD_CHECK_S):
            try:
                held[0].execute("SELECT 1")
                continue
            except psycopg.Error:
                pass
            with contextlib.suppress(psycopg.Error):
                held[0].close()
            while not stop.is_set():
                try:
                    held[0] = _take_store(dsn, holder)
                    break
                except AqvenError as exc:
                    if exc.code == STORE_HELD:
                        if lost is not None:
                            lost(exc)
                        return
                    stop.wait(0.5)  # PostgreSQL not back yet

    keeper = threading.Thread(target=keep, name="hold-store", daemon=True)
    keeper.start()

    def release() -> None:
        stop.set()
        keeper.join(timeout=5)
        with contextlib.suppress(psycopg.Error):
            held[0].close()  # the lock goes with the session

    return release


def _reconnect(dsn: str) -> psycopg.Connection[Any]:
    """A new connection, tried for up to CONNECT_WAIT_S while the server comes back."""
    deadline = time.monotonic() + CONNECT_WAIT_S
    while True:
        try:
            return connect(dsn)
        except AqvenError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
