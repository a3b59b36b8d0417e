"""The project database: `.aqven/aqven.sqlite`, WAL, one writer, a versioned schema.

All writes go through one connection guarded by a lock, so the server's threads and its event
loop never interleave half-written rows. Money columns are TEXT holding a Decimal.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from aqven.errors import DB_SCHEMA_NEWER, AqvenError
from aqven.store.group_commit import GroupCommit, is_busy

T = TypeVar("T")

SCHEMA_VERSION = 10

_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        flow_id TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        started_at TEXT,
        ended_at TEXT,
        request TEXT NOT NULL,
        output TEXT,
        error_code TEXT,
        error_message TEXT,
        outcome TEXT,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd TEXT NOT NULL DEFAULT '0',
        unpriced_calls INTEGER NOT NULL DEFAULT 0,
        model_calls INTEGER NOT NULL DEFAULT 0,
        simulated INTEGER NOT NULL DEFAULT 0,
        series_id TEXT,
        case_name TEXT,
        dataset_id TEXT
    );
    CREATE INDEX runs_created ON runs(created_at);
    CREATE INDEX runs_series ON runs(series_id);
    CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        ts TEXT NOT NULL,
        kind TEXT NOT NULL,
        node_id TEXT,
        data TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE human_answers (
        run_id TEXT NOT NULL,
        node_id TEXT NOT NULL,
        answer TEXT NOT NULL,
        answered_at TEXT NOT NULL,
        PRIMARY KEY (run_id, node_id)
    );
    """,
    2: """
    CREATE TABLE series (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        experiment_id TEXT,
        on_side TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        ended_at TEXT,
        client_op_id TEXT UNIQUE,
        plan TEXT NOT NULL,
        cap_usd TEXT NOT NULL,
        project_cap_usd TEXT NOT NULL,
        project_cap_source TEXT NOT NULL,
        pause TEXT,
        verdict TEXT,
        error TEXT,
        stop_reason TEXT,
        inputs_hash TEXT NOT NULL,
        inputs TEXT NOT NULL,
        simulated INTEGER NOT NULL DEFAULT 0,
        finding TEXT,
        active_seconds REAL NOT NULL DEFAULT 0,
        active_since REAL
    );
    CREATE INDEX series_experiment ON series(experiment_id, created_at);
    CREATE TABLE attempts (
        series_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        case_name TEXT NOT NULL,
        dataset_id TEXT NOT NULL,
        side TEXT NOT NULL,
        variant_id TEXT NOT NULL,
        rep INTEGER NOT NULL,
        seed INTEGER NOT NULL,
        status TEXT NOT NULL DEFAULT 'queued',
        run_id TEXT,
        outcome TEXT,
        value REAL,
        error_code TEXT,
        error_message TEXT,
        checks TEXT,
        cost_usd TEXT,
        unpriced INTEGER NOT NULL DEFAULT 0,
        reruns INTEGER NOT NULL DEFAULT 0,
        started_at TEXT,
        ended_at TEXT,
        active_at_end REAL,
        PRIMARY KEY (series_id, idx)
    );
    CREATE INDEX attempts_status ON attempts(series_id, status);
    """,
    # Everything a series snapshot adds up, in one covering index ordered as it groups (store/series_tally.py).
    3: """
    CREATE INDEX attempts_tally ON attempts(
        series_id, variant_id, case_name, status, outcome, value, reruns, unpriced, active_at_end, cost_usd
    );
    """,
    # Sealed evidence (issue 12): the run order's secret seed and the simulators' seed of a series, the coarse
    # view a held-out series shows while it runs, the inputs each attempt ran on, and the side every run ran on
    # (a run of a series takes its attempt's side; a run by hand stays unknown, which counts as held out).
    4: """
    ALTER TABLE series ADD COLUMN order_seed INTEGER;
    ALTER TABLE series ADD COLUMN sim_seed INTEGER;
    ALTER TABLE series ADD COLUMN sealed_view TEXT;
    ALTER TABLE attempts ADD COLUMN inputs_hash TEXT;
    ALTER TABLE runs ADD COLUMN side TEXT;
    UPDATE runs SET side = (
        SELECT a.side FROM attempts a WHERE a.series_id = runs.series_id AND a.case_name = runs.case_name LIMIT 1
    ) WHERE series_id IS NOT NULL;
    """,
    # Every approval and stop of a series, with the channel a person gave it through (store/approvals.py).
    5: """
    CREATE TABLE approvals (
        series_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        at TEXT NOT NULL,
        action TEXT NOT NULL,
        channel TEXT NOT NULL,
        confirmed TEXT,
        old_cap_usd TEXT NOT NULL,
        new_cap_usd TEXT,
        spent_usd TEXT,
        reason TEXT,
        PRIMARY KEY (series_id, seq)
    );
    """,
    # Studio's runs list shows each run's attempt outcome (a check can fail on a run that ended "ok").
    6: """
    CREATE INDEX attempts_run ON attempts(series_id, run_id);
    """,
    # A series' token cap (the smallest token_cap of its agents: a bound when nothing prices a model), and the
    # token caps an approval raised (issue 15).
    7: """
    ALTER TABLE series ADD COLUMN token_cap INTEGER;
    ALTER TABLE approvals ADD COLUMN old_token_cap INTEGER;
    ALTER TABLE approvals ADD COLUMN new_token_cap INTEGER;
    """,
    # A series' tallies kept as its attempts change (store/series_tally.py reads them instead of grouping the
    # attempts): one row per series, side, variant, case, status and outcome ('' for none), and the count of each
    # recorded cost (TEXT, added exactly in Python). The trigger sees every write to an attempt's tallied
    # columns; SeriesStore.create adds a new series' queued cells in one statement. The grouped scan's covering
    # index (version 3) goes: nothing reads it any more, and every attempt's writes paid for it.
    8: """
    CREATE TABLE series_cells (
        series_id TEXT NOT NULL,
        side TEXT NOT NULL,
        variant_id TEXT NOT NULL,
        case_name TEXT NOT NULL,
        status TEXT NOT NULL,
        outcome TEXT NOT NULL,
        n INTEGER NOT NULL,
        reruns INTEGER NOT NULL,
        v REAL NOT NULL,
        unpriced INTEGER NOT NULL,
        ends INTEGER NOT NULL,
        PRIMARY KEY (series_id, side, variant_id, case_name, status, outcome)
    ) WITHOUT ROWID;
    CREATE TABLE series_costs (
        series_id TEXT NOT NULL,
        side TEXT NOT NULL,
        variant_id TEXT NOT NULL,
        cost_usd TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (series_id, side, variant_id, cost_usd)
    ) WITHOUT ROWID;
    CREATE INDEX attempts_ends ON attempts(series_id, active_at_end, side);
    INSERT INTO series_cells
        SELECT series_id, side, variant_id, case_name, status, COALESCE(outcome, ''), COUNT(*), SUM(reruns),
            SUM(COALESCE(value, 0)), SUM(unpriced), COUNT(active_at_end)
        FROM attempts GROUP BY 1, 2, 3, 4, 5, 6;
    INSERT INTO series_costs
        SELECT series_id, side, variant_id, cost_usd, COUNT(*) FROM attempts WHERE cost_usd IS NOT NULL
        GROUP BY 1, 2, 3, 4;
    DROP INDEX attempts_tally;
    CREATE TRIGGER attempts_cells
    AFTER UPDATE OF series_id, side, variant_id, case_name, status, outcome, value, reruns, unpriced, cost_usd,
        active_at_end ON attempts
    BEGIN
    INSERT INTO series_cells VALUES (
        OLD.series_id, OLD.side, OLD.variant_id, OLD.case_name, OLD.status, COALESCE(OLD.outcome, ''),
        -1, -OLD.reruns, -COALESCE(OLD.value, 0), -OLD.unpriced, -(OLD.active_at_end IS NOT NULL)
    ) ON CONFLICT DO UPDATE SET n = n + excluded.n, reruns = reruns + excluded.reruns, v = v + excluded.v,
        unpriced = unpriced + excluded.unpriced, ends = ends + excluded.ends;
    INSERT INTO series_costs SELECT OLD.series_id, OLD.side, OLD.variant_id, OLD.cost_usd, -1
        WHERE OLD.cost_usd IS NOT NULL ON CONFLICT DO UPDATE SET n = n + excluded.n;
    INSERT INTO series_cells VALUES (
        NEW.series_id, NEW.side, NEW.variant_id, NEW.case_name, NEW.status, COALESCE(NEW.outcome, ''),
        1, NEW.reruns, COALESCE(NEW.value, 0), NEW.unpriced, (NEW.active_at_end IS NOT NULL)
    ) ON CONFLICT DO UPDATE SET n = n + excluded.n, reruns = reruns + excluded.reruns, v = v + excluded.v,
        unpriced = unpriced + excluded.unpriced, ends = ends + excluded.ends;
    INSERT INTO series_costs SELECT NEW.series_id, NEW.side, NEW.variant_id, NEW.cost_usd, 1
        WHERE NEW.cost_usd IS NOT NULL ON CONFLICT DO UPDATE SET n = n + excluded.n;
    END;
    """,
    # A change sequence on the kept tallies (store/series_tally.py KeptTally): every update of an attempt's
    # tallied columns takes the next number of its series' counter (series_seq), and the cells and costs rows it
    # changes carry it, so a reader that kept the tallies in memory reads only the rows changed since its last
    # read (along the seq indexes) instead of every cell of the series. The finished attempts that hit a rate
    # limit and run again at the end are indexed apart: a stop_early snapshot reads them (research/series/early.py).
    9: """
    CREATE TABLE series_seq (series_id TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
    ALTER TABLE series_cells ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE series_costs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX series_cells_seq ON series_cells(series_id, seq);
    CREATE INDEX series_costs_seq ON series_costs(series_id, seq);
    CREATE INDEX attempts_rate_limited ON attempts(series_id, case_name)
        WHERE status='done' AND error_code='PROVIDER_RATE_LIMITED' AND reruns=0;
    DROP TRIGGER attempts_cells;
    CREATE TRIGGER attempts_cells
    AFTER UPDATE OF series_id, side, variant_id, case_name, status, outcome, value, reruns, unpriced, cost_usd,
        active_at_end ON attempts
    BEGIN
    INSERT INTO series_seq VALUES (OLD.series_id, 1) ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO series_seq SELECT NEW.series_id, 1 WHERE NEW.series_id IS NOT OLD.series_id
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO series_cells VALUES (
        OLD.series_id, OLD.side, OLD.variant_id, OLD.case_name, OLD.status, COALESCE(OLD.outcome, ''),
        -1, -OLD.reruns, -COALESCE(OLD.value, 0), -OLD.unpriced, -(OLD.active_at_end IS NOT NULL),
        (SELECT n FROM series_seq WHERE series_id = OLD.series_id)
    ) ON CONFLICT DO UPDATE SET n = n + excluded.n, reruns = reruns + excluded.reruns, v = v + excluded.v,
        unpriced = unpriced + excluded.unpriced, ends = ends + excluded.ends, seq = excluded.seq;
    INSERT INTO series_costs SELECT OLD.series_id, OLD.side, OLD.variant_id, OLD.cost_usd, -1,
        (SELECT n FROM series_seq WHERE series_id = OLD.series_id)
        WHERE OLD.cost_usd IS NOT NULL ON CONFLICT DO UPDATE SET n = n + excluded.n, seq = excluded.seq;
    INSERT INTO series_cells VALUES (
        NEW.series_id, NEW.side, NEW.variant_id, NEW.case_name, NEW.status, COALESCE(NEW.outcome, ''),
        1, NEW.reruns, COALESCE(NEW.value, 0), NEW.unpriced, (NEW.active_at_end IS NOT NULL),
        (SELECT n FROM series_seq WHERE series_id = NEW.series_id)
    ) ON CONFLICT DO UPDATE SET n = n + excluded.n, reruns = reruns + excluded.reruns, v = v + excluded.v,
        unpriced = unpriced + excluded.unpriced, ends = ends + excluded.ends, seq = excluded.seq;
    INSERT INTO series_costs SELECT NEW.series_id, NEW.side, NEW.variant_id, NEW.cost_usd, 1,
        (SELECT n FROM series_seq WHERE series_id = NEW.series_id)
        WHERE NEW.cost_usd IS NOT NULL ON CONFLICT DO UPDATE SET n = n + excluded.n, seq = excluded.seq;
    END;
    """,
    # Who acted, and the proof that a person did (issue 27): the person's name, and for a passkey the assertion
    # with what it was bound to (people/passkeys.py), so the act can be verified again later. A human node's answer
    # records the same.
    10: """
    ALTER TABLE approvals ADD COLUMN person TEXT;
    ALTER TABLE approvals ADD COLUMN proof TEXT;
    ALTER TABLE human_answers ADD COLUMN channel TEXT;
    ALTER TABLE human_answers ADD COLUMN confirmed TEXT;
    ALTER TABLE human_answers ADD COLUMN person TEXT;
    ALTER TABLE human_answers ADD COLUMN proof TEXT;
    """,
}


def _statements(script: str) -> list[str]:
    """The statements of a migration script; a trigger's body (with its own semicolons) stays one statement."""
    out: list[str] = []
    buffer = ""
    for piece in script.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            if buffer.strip(" \n;"):
                out.append(buffer)
            buffer = ""
    if buffer.strip(" \n;"):
        out.append(buffer)
    return out


WAL_CHECKPOINT_PAGES = 10_000
BUSY_WAIT_S = 30.0  # the longest a statement waits for another process's write before it fails


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


class Database:
    """A thread-safe handle on the project database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.RLock()
        self._depth = 0  # open transactions of the lock's holder (a batch and what it groups)
        self.generation = 0  # counts rollbacks: what a store remembers of its own writes is good within one
        self.group = GroupCommit(self.transaction)
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

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
        conn.row_factory = sqlite3.Row
        # A savepoint's undo journal (every grouped write has one: store/group_commit.py) stays in memory; with the
        # default it went to a temporary file past 64 KB, created, written and unlinked: half a worker's writes.
        conn.execute("PRAGMA temp_store=MEMORY")
        return conn

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A read-only view of the last committed state, on this thread's own connection.

        Long reads (a snapshot of a big series) go here: they neither hold the writers' lock nor see half of a
        change, since WAL gives every read transaction one consistent snapshot.
        """
        conn: sqlite3.Connection | None = getattr(self._readers, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only=ON")
            self._readers.conn = conn
            with self._lock:
                self._reader_conns.append(conn)
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def _migrate(self) -> None:
        with self.transaction() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = cur.execute("SELECT MAX(version) AS v FROM schema_version").fetchone()
            current = row["v"] or 0
            if current > SCHEMA_VERSION:
                raise AqvenError(
                    f"the project database has schema version {current}; this AQVEN knows {SCHEMA_VERSION}",
                    code=DB_SCHEMA_NEWER,
                    hint="upgrade AQVEN, or move .aqven/aqven.sqlite aside",
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _statements(_MIGRATIONS[version]):
                    cur.execute(statement)
                cur.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))

    @contextmanager
    def transaction(self, *, wait: bool = True) -> Iterator[sqlite3.Cursor]:
        """One write transaction; inside a `batch` it is a savepoint of the batch's (same all-or-nothing). With
        `wait` off, it fails at once (sqlite3.OperationalError) while another process holds the writer lock."""
        with self._lock:
            outer = self._depth == 0
            if outer:
                self.group.drain()  # what was handed in earlier is written first (store/group_commit.py)
            cur = self._conn.cursor()
            if outer and wait:
                _patient(lambda: cur.execute("BEGIN IMMEDIATE"))
            elif outer:
                cur.execute("BEGIN IMMEDIATE")
            else:
                cur.execute("SAVEPOINT nested")
            self._depth += 1
            try:
                yield cur
            except BaseException:
                self.generation += 1
                cur.execute("ROLLBACK" if outer else "ROLLBACK TO nested")
                if not outer:
                    cur.execute("RELEASE nested")
                raise
            else:
                cur.execute("COMMIT" if outer else "RELEASE nested")
            finally:
                self._depth -= 1
                cur.close()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group the writes of the block into one transaction (one commit instead of one per write).

        For synchronous stretches only (an attempt's writes between two waits): the lock is held throughout,
        so it must never span an `await`.
        """
        with self.transaction():
            yield

    async def grouped(self, write: Callable[[], T]) -> T:
        """Run `write` in a transaction shared with the writes other tasks of this process hand in meanwhile, and
        answer once it is committed (store/group_commit.py). Its own failure rolls back only its own writes."""
        return await self.group.write(write)

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return _patient(lambda: self._conn.execute(sql, params).fetchall())

    def query_one(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> sqlite3.Row | None:
        with self._lock:
            row: sqlite3.Row | None = _patient(lambda: self._conn.execute(sql, params).fetchone())
            return row

    def close(self) -> None:
        with self._lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()
            self._conn.close()
