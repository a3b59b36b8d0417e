"""A provider's rpm / tpm and its outage clock, kept in a shared store for every process of the project (issue 31).

With `aqven worker`s on several machines, each provider's limits hold for all of them together: every call to a
limited provider is a row of `provider_calls` from its start until WINDOW_S after its end (the sliding window of
models/rate_limit.py, on the database's clock), and a call is let through only in a transaction that holds the
provider's advisory lock and finds it fits. Rows of a process that died mid-call end when the server declares its
worker lost or stopped (`end_calls_of`), when a server starts (`settle_orphans`: no process of a dead server is
left), and in any case LEASE_S after they began (no call outlives the longest timeout_s). Outages are one row per
provider and base URL: its first failure starts the clock, and a row whose last failure is older than STALE_S is an
outage that ended unseen (its end is written only by a process that saw it).

PostgreSQL only: a SQLite store has one process, whose windows are in memory. Every statement runs on a connection
of its own, on one thread of its own, so a limited call never waits for the store's group commit nor holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from aqven.models import outage, rate_limit
from aqven.store.db import Cursor, Database

log = logging.getLogger("aqven.limits")
T = TypeVar("T")

LEASE_S = 3600.0 + 60.0
"""A call still running this long after it began is not counted any more (timeout_s is at most 3600 s)."""
STALE_S = 2 * outage.MAX_WAIT_S
"""During an outage its calls fail at least every MAX_WAIT_S: a row not failed for twice that has ended."""
POLL_S = 0.25
"""While a provider's window is full of calls still running, how often its one waiter here looks again."""
PRUNE_EVERY_S = 10.0
_LOCK_CLASS = 0x41510001  # the advisory locks' first key: the providers' (the store's own lock is a one-key lock)
EPOCH = {
    "postgresql": "extract(epoch FROM clock_timestamp())::float8",
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}
"""The database's clock, in seconds, per dialect."""


def end_calls_of(db: Database, cur: Cursor, owner: str) -> None:
    """The calls in flight of a process that is gone end now (in the transaction that says it is gone)."""
    cur.execute(f"UPDATE provider_calls SET ended = {EPOCH[db.dialect]} WHERE owner = ? AND ended IS NULL", (owner,))


class ProviderLimits:
    """The limits and outage clocks of one process, kept with every other process's in the store's database."""

    def __init__(self, dsn: str, owner: str) -> None:
        self.dsn, self.owner = dsn, owner
        self._conn: Any = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="aqven-limits")
        self._waiting: dict[str, asyncio.Lock] = {}  # one waiter a provider in this process asks the database
        self._pruned = 0.0

    # ---- the connection ----

    def _run(self, step: Callable[[Any], T]) -> T:
        """`step` on this process's limits connection (its thread), made again once when it broke."""
        from aqven.store.postgres_db import connect

        for tries in (1, 2):
            if self._conn is None or self._conn.closed:
                self._conn = connect(self.dsn)
            try:
                return step(self._conn)
            except Exception as exc:
                if tries == 2 or not _broken(exc):
                    raise
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None
        raise AssertionError("unreachable")

    def _submit(self, step: Callable[[Any], Any]) -> Future[Any]:
        future = self._thread.submit(self._run, step)
        future.add_done_callback(_log_failure)
        return future

    # ---- rpm / tpm (rate_limit.SharedWindows) ----

    async def acquire(self, provider: str, *, rpm: int | None, tpm: int | None) -> object:
        slot = secrets.token_hex(8)
        loop = asyncio.get_running_loop()
        async with self._waiting.setdefault(provider, asyncio.Lock()):
            while True:
                try:
                    wait = await loop.run_in_executor(
                        self._thread, self._run, partial(self._take, provider, rpm, tpm, slot)
                    )
                except Exception as exc:  # the database is unreachable: the call waits for it
                    log.warning("the shared rate limit of %s cannot be read: %s", provider, type(exc).__name__)
                    wait = 0.5
                if wait is None:
                    return slot
                await asyncio.sleep(wait)

    def _take(self, provider: str, rpm: int | None, tpm: int | None, slot: str, conn: Any) -> float | None:
        """Take a place in `provider`'s window if the call fits (None), or how long to wait before looking again."""
        window = rate_limit.WINDOW_S
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_CLASS, provider))
            now = conn.execute(f"SELECT {EPOCH['postgresql']}").fetchone()[0]
            if time.monotonic() - self._pruned > PRUNE_EVERY_S:
                self._pruned = time.monotonic()
                old = now - window
                conn.execute("DELETE FROM provider_calls WHERE provider = %s AND ended < %s", (provider, old))
            rows = conn.execute(
                "SELECT ended, tokens FROM provider_calls WHERE provider = %s"
                " AND (ended > %s OR (ended IS NULL AND started > %s))",
                (provider, now - window, now - LEASE_S),
            ).fetchall()
            over_rpm = rpm is not None and len(rows) >= rpm
            over_tpm = tpm is not None and sum(r[1] for r in rows) >= tpm
            if not (over_rpm or over_tpm):
                conn.execute(
                    "INSERT INTO provider_calls (id, provider, owner, started, ended, tokens)"
                    " VALUES (%s, %s, %s, %s, NULL, 0) ON CONFLICT (id) DO NOTHING",
                    (slot, provider, self.owner, now),
                )
                return None
        ended = [r[0] for r in rows if r[0] is not None]
        # the call that ended first leaves the window first; one still running may end any moment
        return max(min(min(ended) + window - now, POLL_S), 0.01) if ended else POLL_S

    def record(self, slot: object, tokens: int) -> None:
        def end(conn: Any) -> None:
            conn.execute(
                f"UPDATE provider_calls SET ended = {EPOCH['postgresql']}, tokens = %s WHERE id = %s",
                (tokens, slot),
            )

        self._submit(end)  # written a moment later: a later end only counts the call a little longer

    # ---- outages (outage.SharedOutages) ----

    def failing(self, key: str) -> float:
        def fail(conn: Any) -> float:
            now = EPOCH["postgresql"]
            row = conn.execute(
                f"INSERT INTO provider_outages (provider_key, down_since, last_failed) VALUES (%s, {now}, {now})"
                " ON CONFLICT (provider_key) DO UPDATE SET"
                " down_since = CASE WHEN provider_outages.last_failed < excluded.last_failed - %s"
                " THEN excluded.down_since ELSE provider_outages.down_since END,"
                " last_failed = excluded.last_failed"
                " RETURNING last_failed - down_since",
                (key, STALE_S),
            ).fetchone()
            return float(row[0])

        result: float = self._submit(fail).result(timeout=10)
        return result

    def reached(self, key: str) -> None:
        self._submit(lambda conn: conn.execute("DELETE FROM provider_outages WHERE provider_key = %s", (key,)))

    # ---- a server's start ----

    def settle_orphans(self) -> None:
        """At a server's start: the calls in flight of every process that is not a live worker end now (no process
        of an earlier server is left)."""

        def settle(conn: Any) -> None:
            conn.execute(
                f"UPDATE provider_calls SET ended = {EPOCH['postgresql']} WHERE ended IS NULL"
                " AND owner NOT IN (SELECT id FROM workers WHERE state = 'live')"
            )

        self._submit(settle).result(timeout=30)

    def close(self) -> None:
        """Stop (this process keeps its limits in memory again, if these were its)."""
        if rate_limit.current() is self:
            rate_limit.use(None)
        if outage.current() is self:
            outage.use(None)
        self._thread.shutdown(wait=True)
        with contextlib.suppress(Exception):
            if self._conn is not None:
                self._conn.close()


def _broken(exc: BaseException) -> bool:
    import psycopg

    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


def _log_failure(future: Future[Any]) -> None:
    exc = future.exception()
    if exc is not None:
        log.warning("a shared provider limit was not written: %s", type(exc).__name__)


def share_limits(db: Database, owner: str | None = None) -> ProviderLimits | None:
    """On a shared store (PostgreSQL), this process keeps its providers' limits and outage clocks with every other
    process's (models/rate_limit.py, models/outage.py); None on SQLite, whose one process keeps them in memory."""
    dsn = getattr(db, "dsn", None)
    if db.dialect != "postgresql" or not isinstance(dsn, str):
        rate_limit.use(None)
        outage.use(None)
        return None
    limits = ProviderLimits(dsn, owner or f"process-{os.getpid()}-{secrets.token_hex(3)}")
    rate_limit.use(limits)
    outage.use(limits)
    return limits
