"""The workers of a shared store (`aqven worker`, issue 31): who runs attempts, where, and whether they still beat.

One row per worker process's life. Its `id` is the DBOS executor id it runs under, new at each start, so a worker
declared lost can never come back under the same id: the attempts it held are handed to the others (DBOS recovery
of that executor's workflows), and if it was only cut off, its next heartbeat finds its row `lost` and it stops.

The heartbeat is a counter (`beats`), not a time compared across machines: the server notes when it last saw the
counter move, on its own monotonic clock, and declares a worker lost when it has not moved for long enough
(`declare_lost`, conditional on the counter it saw, so a beat that lands meanwhile wins). `beat_at` is the worker's
own wall time, for people to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aqven.store.db import Database
from aqven.store.provider_limits import end_calls_of
from aqven.store.runs import now_iso

LIVE, LOST, REFUSED, STOPPED = "live", "lost", "refused", "stopped"
_COLUMNS = (
    "id, name, host, pid, slots, running, state, started_at, beat_at, beats, ran, inputs_hash, error_code,"
    " error_message, ended_at"
)


@dataclass
class WorkerRow:
    id: str
    name: str
    host: str
    pid: int
    slots: int
    running: int
    state: str
    started_at: str
    beat_at: str
    beats: int
    ran: int
    inputs_hash: str | None
    error_code: str | None
    error_message: str | None
    ended_at: str | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _row(r: Any) -> WorkerRow:
    return WorkerRow(*(r[i] for i in range(15)))


class WorkerStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def register(self, worker_id: str, name: str, host: str, pid: int, slots: int) -> None:
        now = now_iso()
        with self.db.transaction() as cur:
            cur.execute(
                f"INSERT INTO workers ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, 0, 0, NULL, NULL, NULL, NULL)",
                (worker_id, name, host, pid, slots, LIVE, now, now),
            )

    def beat(self, worker_id: str, *, running: int, ran: int) -> bool:
        """One heartbeat; False when the row is not live any more (declared lost, or refused): stop working."""
        with self.db.transaction() as cur:
            cur.execute(
                "UPDATE workers SET beats = beats + 1, beat_at = ?, running = ?, ran = ? WHERE id = ? AND state = ?",
                (now_iso(), running, ran, worker_id, LIVE),
            )
            return cur.rowcount == 1

    def verified(self, worker_id: str, inputs_hash: str) -> None:
        """The inputs hash the worker last found equal to a series' (shown beside it)."""
        with self.db.transaction() as cur:
            cur.execute(
                "UPDATE workers SET inputs_hash = ? WHERE id = ? AND (inputs_hash IS NULL OR inputs_hash <> ?)",
                (inputs_hash, worker_id, inputs_hash),
            )

    def refuse(self, worker_id: str, code: str, message: str, inputs_hash: str | None) -> None:
        """The worker refuses to run (its files are not what a series was planned on): it takes no more work."""
        with self.db.transaction() as cur:
            cur.execute(
                "UPDATE workers SET state = ?, error_code = ?, error_message = ?, inputs_hash = ?, ended_at = ?"
                " WHERE id = ? AND state = ?",
                (REFUSED, code, message, inputs_hash, now_iso(), worker_id, LIVE),
            )

    def stop(self, worker_id: str) -> None:
        with self.db.transaction() as cur:
            cur.execute(
                "UPDATE workers SET state = ?, running = 0, ended_at = ? WHERE id = ? AND state = ?",
                (STOPPED, now_iso(), worker_id, LIVE),
            )
            end_calls_of(self.db, cur, worker_id)

    def declare_lost(self, worker_id: str, beats: int) -> bool:
        """Declare a worker lost if its heartbeat counter is still `beats`; True when this call did."""
        with self.db.transaction() as cur:
            cur.execute(
                "UPDATE workers SET state = ?, ended_at = ? WHERE id = ? AND state = ? AND beats = ?",
                (LOST, now_iso(), worker_id, LIVE, beats),
            )
            if cur.rowcount != 1:
                return False
            end_calls_of(self.db, cur, worker_id)  # its calls in flight leave the providers' windows a window later
            return True

    def get(self, worker_id: str) -> WorkerRow | None:
        r = self.db.query_one(f"SELECT {_COLUMNS} FROM workers WHERE id = ?", (worker_id,))
        return None if r is None else _row(r)

    def listing(self, *, ended: bool = False, limit: int = 200) -> list[WorkerRow]:
        """The live workers (and, with `ended`, the last ones that ended too), newest first."""
        where = "" if ended else f"WHERE state = '{LIVE}' OR state = '{REFUSED}'"
        rows = self.db.query(f"SELECT {_COLUMNS} FROM workers {where} ORDER BY started_at DESC, id LIMIT ?", (limit,))
        return [_row(r) for r in rows]

    def live(self) -> list[WorkerRow]:
        return [_row(r) for r in self.db.query(f"SELECT {_COLUMNS} FROM workers WHERE state = ?", (LIVE,))]

    def ran_where(self, series_id: str) -> list[dict[str, Any]]:
        """Where a series' attempts ran: per worker (its name and host), how many attempts it ran last."""
        if self.db.query_one("SELECT 1 AS one FROM workers LIMIT 1") is None:
            return []  # no worker ever registered with this store: nothing ran elsewhere
        rows = self.db.query(
            "SELECT a.worker AS id, w.name AS name, w.host AS host, COUNT(*) AS n FROM attempts a"
            " LEFT JOIN workers w ON w.id = a.worker WHERE a.series_id = ? AND a.worker IS NOT NULL"
            " GROUP BY a.worker, w.name, w.host ORDER BY a.worker",
            (series_id,),
        )
        return [{"worker": r["id"], "name": r["name"], "host": r["host"], "attempts": int(r["n"])} for r in rows]
