"""Series and their attempts in the project database."""

from __future__ import annotations

import functools
import json
import time
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from aqven.errors import ATTEMPT_NOT_FOUND, SERIES_NOT_FOUND, NotFoundError
from aqven.models.outcomes import redact
from aqven.store.db import SERIES_CHANNEL, Cursor, Database, Row
from aqven.store.runs import new_id, now_iso
from aqven.store.series_records import AttemptRow, SeriesPlan, SeriesRow


def _j(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str, ensure_ascii=False)


def _l(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _insert_attempts(cur: Cursor, series_id: str, attempts: list[dict[str, Any]], *, or_ignore: bool = False) -> None:
    cur.executemany(
        "INSERT INTO attempts (series_id, idx, case_name, dataset_id, side, variant_id, rep, seed)"
        f" VALUES (?, ?, ?, ?, ?, ?, ?, ?){' ON CONFLICT DO NOTHING' if or_ignore else ''}",
        [
            (series_id, a["idx"], a["case_name"], a["dataset_id"], a["side"], a["variant_id"], a["rep"], a["seed"])
            for a in attempts
        ],
    )


# Every column of a series but its plan: the largest (a 5,000-case series' is about 0.3 MB) and fixed at its start.
_COLUMNS = (
    "id, kind, experiment_id, on_side, status, created_at, ended_at, client_op_id, cap_usd, project_cap_usd,"
    " project_cap_source, pause, verdict, error, stop_reason, inputs_hash, inputs, simulated, finding,"
    " active_seconds, active_since, order_seed, sim_seed, sealed_view, token_cap"
)
_ROWS_KEPT = 1000  # series whose plan and last row a store keeps


class SeriesStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        # A plan is fixed at the start (only `create` writes it), but the driver reads its series after every
        # attempt and a snapshot on every poll: each plan is read and parsed once, and a row whose other columns
        # did not change gives the same SeriesRow.
        self._plans: dict[str, SeriesPlan] = {}
        self._rows: dict[str, tuple[tuple[Any, ...], SeriesRow]] = {}
        self._orders: dict[str, list[str]] = {}  # case_order of series whose attempt rows are all written

    # ---- series ----

    def create(
        self,
        *,
        kind: str,
        experiment_id: str | None,
        on: str,
        status: str,
        plan: SeriesPlan,
        cap_usd: str,
        project_cap_usd: str,
        project_cap_source: str,
        inputs_hash: str,
        inputs: dict[str, str],
        simulated: bool,
        client_op_id: str | None,
        pause: dict[str, Any] | None,
        attempts: list[dict[str, Any]],
        active_since: float | None,
        order_seed: int | None = None,
        sim_seed: int | None = None,
        token_cap: int | None = None,
        cells: list[tuple[str, str, str, int]] | None = None,
    ) -> tuple[str, bool]:
        """Create a series with its attempts queued; (id, created). A known client_op_id returns its series.

        `cells` ((side, variant, case, queued attempts) of the whole series) is given when `attempts` holds only
        the series' first rows: `add_attempts` writes the rest (research/series/fill.py). Without it the tallies
        are counted from `attempts`.

        Two starts with one client_op_id make one series whichever backend, however many processes: the UNIQUE
        constraint decides (`ON CONFLICT DO NOTHING`), and the one that lost reads the winner's id."""
        with self.db.transaction() as cur:
            if client_op_id is not None:
                row = cur.execute("SELECT id FROM series WHERE client_op_id=?", (client_op_id,)).fetchone()
                if row is not None:
                    return row["id"], False
            sid = new_id("ser")
            cur.execute(
                "INSERT INTO series (id, kind, experiment_id, on_side, status, created_at, client_op_id, plan, cap_usd,"
                " project_cap_usd, project_cap_source, pause, inputs_hash, inputs, simulated, active_since, order_seed,"
                " sim_seed, token_cap) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (client_op_id) DO NOTHING",
                (
                    sid,
                    kind,
                    experiment_id,
                    on,
                    status,
                    now_iso(),
                    client_op_id,
                    plan.model_dump_json(),
                    cap_usd,
                    project_cap_usd,
                    project_cap_source,
                    _j(pause),
                    inputs_hash,
                    _j(inputs),
                    int(simulated),
                    active_since,
                    order_seed,
                    sim_seed,
                    token_cap,
                ),
            )
            if cur.rowcount == 0:  # another start with this client_op_id committed first
                row = cur.execute("SELECT id FROM series WHERE client_op_id=?", (client_op_id,)).fetchone()
                return row["id"], False
            _insert_attempts(cur, sid, attempts)
            # Its tallies (store/db.py migrations 8, 9): all queued, at seq 0; later changes reach them through the
            # trigger.
            if cells is None:
                counted = Counter((a["side"], a["variant_id"], a["case_name"]) for a in attempts)
                cells = [(side, variant, case, n) for (side, variant, case), n in counted.items()]
            cur.executemany(
                "INSERT INTO series_cells VALUES (?, ?, ?, ?, 'queued', '', ?, 0, 0, 0, 0, 0)",
                [(sid, side, variant, case, n) for side, variant, case, n in cells],
            )
            return sid, True

    def add_attempts(self, series_id: str, attempts: list[dict[str, Any]]) -> None:
        """Write more queued attempt rows of a series created with its first ones, in one transaction. Their
        queued tallies were written with the series; a row already there stays as it is."""
        with self.db.transaction() as cur:
            _insert_attempts(cur, series_id, attempts, or_ignore=True)

    def attempt_count(self, series_id: str) -> int:
        """How many attempt rows the series has (its rows are written in index order, from 0)."""
        row = self.db.query_one("SELECT MAX(idx) AS last FROM attempts WHERE series_id=?", (series_id,))
        return 0 if row is None or row["last"] is None else int(row["last"]) + 1

    def get(self, series_id: str) -> SeriesRow:
        row = self.db.query_one(f"SELECT {_COLUMNS} FROM series WHERE id=?", (series_id,))
        if row is None:
            raise NotFoundError(
                f"no series {series_id!r}",
                code=SERIES_NOT_FOUND,
                hint="series ids come from series_start / POST /api/series",
            )
        key = tuple(row)
        hit = self._rows.get(series_id)
        if hit is not None and hit[0] == key:
            return hit[1]
        s = self._series(row)
        if len(self._rows) >= _ROWS_KEPT:
            self._rows.clear()
        self._rows[series_id] = (key, s)
        return s

    def list_series(
        self, *, experiment_id: str | None = None, status: str | None = None, limit: int = 50
    ) -> list[SeriesRow]:
        clauses, params = [], []
        if experiment_id is not None:
            clauses.append("experiment_id=?")
            params.append(experiment_id)
        if status is not None:
            clauses.append("status=?")
            params.append(status)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self.db.query(
            f"SELECT * FROM series {where} ORDER BY created_at DESC, id DESC LIMIT ?", (*params, limit)
        )
        return [self._series(r, r["plan"]) for r in rows]

    def spent(self, series_ids: list[str]) -> dict[str, tuple[Decimal, int]]:
        """Per series: (dollars its attempts spent, attempts not running with an unpriced call), from the tallies
        the trigger keeps (`series_costs`, `series_cells`), for series that have ended (a running series' spend
        also counts its running attempts: read its snapshot)."""
        out: dict[str, tuple[Decimal, int]] = {sid: (Decimal(0), 0) for sid in series_ids}
        if not series_ids:
            return out
        marks = ",".join("?" for _ in series_ids)
        for r in self.db.query(
            f"SELECT series_id, cost_usd, n FROM series_costs WHERE series_id IN ({marks}) AND n != 0",
            tuple(series_ids),
        ):
            spent, unpriced = out[r["series_id"]]
            out[r["series_id"]] = (spent + Decimal(r["cost_usd"] or "0") * int(r["n"]), unpriced)
        for r in self.db.query(
            f"SELECT series_id, SUM(unpriced) AS u FROM series_cells WHERE series_id IN ({marks})"
            " AND status != 'running' GROUP BY series_id",
            tuple(series_ids),
        ):
            spent, _ = out[r["series_id"]]
            out[r["series_id"]] = (spent, int(r["u"] or 0))
        return out

    def ids_with_status(self, *statuses: str) -> list[str]:
        marks = ",".join("?" for _ in statuses)
        return [r["id"] for r in self.db.query(f"SELECT id FROM series WHERE status IN ({marks})", statuses)]

    def update(self, series_id: str, **fields: Any) -> None:
        """Set columns; dict/list values are stored as JSON."""
        if not fields:
            return
        cols = ", ".join(f"{k}=?" for k in fields)
        values = [_j(v) if isinstance(v, dict | list) else v for v in fields.values()]
        with self.db.transaction() as cur:
            cur.execute(f"UPDATE series SET {cols} WHERE id=?", (*values, series_id))
            if "status" in fields:
                self.db.announce(cur, SERIES_CHANNEL, series_id)

    def transition(self, series_id: str, expect: tuple[str, ...], **fields: Any) -> bool:
        """Update only when the status is one of `expect` (atomic compare-and-set); True when it was."""
        cols = ", ".join(f"{k}=?" for k in fields)
        values = [_j(v) if isinstance(v, dict | list) else v for v in fields.values()]
        marks = ",".join("?" for _ in expect)
        with self.db.transaction() as cur:
            cur.execute(f"UPDATE series SET {cols} WHERE id=? AND status IN ({marks})", (*values, series_id, *expect))
            if cur.rowcount != 1:
                return False
            self.db.announce(cur, SERIES_CHANNEL, series_id)
            return True

    def _plan(self, series_id: str, text: str | None = None) -> SeriesPlan:
        hit = self._plans.get(series_id)
        if hit is not None:
            return hit
        if text is None:
            row = self.db.query_one("SELECT plan FROM series WHERE id=?", (series_id,))
            assert row is not None, series_id
            text = str(row["plan"])
        plan = SeriesPlan.model_validate_json(text)
        if len(self._plans) >= _ROWS_KEPT:
            self._plans.clear()
        self._plans[series_id] = plan
        return plan

    def _series(self, row: Row, plan_text: str | None = None) -> SeriesRow:
        return SeriesRow(
            id=row["id"],
            kind=row["kind"],
            experiment_id=row["experiment_id"],
            on=row["on_side"],
            status=row["status"],
            created_at=row["created_at"],
            ended_at=row["ended_at"],
            client_op_id=row["client_op_id"],
            plan=self._plan(row["id"], plan_text),
            cap_usd=row["cap_usd"],
            project_cap_usd=row["project_cap_usd"],
            project_cap_source=row["project_cap_source"],
            pause=_l(row["pause"]),
            verdict=_l(row["verdict"]),
            error=_l(row["error"]),
            stop_reason=row["stop_reason"],
            inputs_hash=row["inputs_hash"],
            inputs=_l(row["inputs"]) or {},
            simulated=bool(row["simulated"]),
            finding=row["finding"],
            active_seconds=row["active_seconds"],
            active_since=row["active_since"],
            order_seed=row["order_seed"],
            sim_seed=row["sim_seed"],
            sealed_view=_l(row["sealed_view"]),
            token_cap=row["token_cap"],
        )

    # ---- attempts ----

    def attempts(self, series_id: str, *, status: str | None = None, reader: bool = False) -> list[AttemptRow]:
        """The series' attempts (with `status`, only those), by index. With `reader`, read on this thread's own
        reading connection, without the writers' lock (a thread reading many rows must not hold it)."""
        params: tuple[str, ...] = (series_id,) if status is None else (series_id, status)
        if status is None:
            sql = "SELECT * FROM attempts WHERE series_id=? ORDER BY idx"
        else:
            # Sorted here, not by SQL: an ORDER BY idx makes SQLite walk every attempt of the series along the
            # primary key instead of the few with this status along attempts_status (the driver asks for the
            # running ones after every attempt: 19 ms a call at 100,000 attempts).
            sql = "SELECT * FROM attempts WHERE series_id=? AND status=?"
        if reader:
            with self.db.reading() as conn:
                rows = conn.execute(sql, params).fetchall()
        else:
            rows = self.db.query(sql, params)
        if status is not None:
            rows.sort(key=lambda r: int(r["idx"]))
        return [self._attempt(r) for r in rows]

    def attempts_of_cases(self, series_id: str, cases: list[str]) -> list[AttemptRow]:
        """The attempts of the named cases only (the case rows of a snapshot show at most 50 cases)."""
        out: list[AttemptRow] = []
        for start in range(0, len(cases), 500):  # under SQLite's limit on bound parameters
            chunk = cases[start : start + 500]
            marks = ",".join("?" for _ in chunk)
            rows = self.db.query(
                f"SELECT * FROM attempts WHERE series_id=? AND case_name IN ({marks}) ORDER BY idx", (series_id, *chunk)
            )
            out.extend(self._attempt(r) for r in rows)
        return out

    def attempt(self, series_id: str, idx: int) -> AttemptRow:
        row = self.db.query_one("SELECT * FROM attempts WHERE series_id=? AND idx=?", (series_id, idx))
        if row is None:
            raise NotFoundError(f"series {series_id} has no attempt {idx}", code=ATTEMPT_NOT_FOUND)
        return self._attempt(row)

    def case_order(self, series_id: str) -> list[str]:
        """The series' case names in the order they run: attempts are created case block by case block in the
        order the series' secret seed drew (research/series/order.py), so the first attempt index of each case
        orders them. The longest fully finished prefix of this order is a random sample of the cases. Read once
        per series (a snapshot of a stop_early series asks every time) once all its rows are written."""
        kept = self._orders.get(series_id)
        if kept is not None:
            return kept
        with self.db.reading() as conn:  # ~5,000 rows at 100,000 attempts: not under the writers' lock
            rows = conn.execute(
                "SELECT case_name, MIN(idx) AS first, COUNT(*) AS n FROM attempts WHERE series_id=?"
                " GROUP BY case_name ORDER BY first",
                (series_id,),
            ).fetchall()
        order = [r["case_name"] for r in rows]
        plan = self.get(series_id).plan
        if sum(r["n"] for r in rows) == len(plan.cases) * len(plan.variants) * plan.repeats:
            if len(self._orders) >= 16:
                self._orders.pop(next(iter(self._orders)))
            self._orders[series_id] = order
        return order

    def next_queued(self, series_id: str) -> AttemptRow | None:
        row = self.db.query_one(
            "SELECT * FROM attempts WHERE series_id=? AND status='queued' ORDER BY reruns, idx LIMIT 1", (series_id,)
        )
        return None if row is None else self._attempt(row)

    def claim(
        self, series_id: str, idx: int, run_id: str, inputs_hash: str | None = None, worker: str | None = None
    ) -> bool:
        """Mark a queued attempt running with its run, atomically; False if it was not queued. `inputs_hash`: the
        hash of the inputs it starts on, when none is recorded yet (`set_attempt_inputs` in the same statement);
        `worker`: the `aqven worker` that runs it (store/workers.py), when one does."""
        sql, params = _claim_statement(series_id, idx, run_id, inputs_hash, worker)
        with self.db.transaction() as cur:
            cur.execute(sql, params)
            return cur.rowcount == 1

    def claim_in_write(
        self,
        series_id: str,
        idx: int,
        run_id: str,
        inputs_hash: str | None,
        worker: str | None,
        *,
        taken: Callable[[], None],
    ) -> None:
        """`claim` as the first write of a run's transaction: `taken()`, which raises, where the attempt was not
        queued, once the claim is answered (`Database.when_answered`, at the end of a grouped write), so that the
        whole write is undone."""
        sql, params = _claim_statement(series_id, idx, run_id, inputs_hash, worker)
        with self.db.transaction() as cur:
            cur.execute(sql, params)
            self.db.when_answered(lambda: None if cur.rowcount == 1 else taken())

    def set_attempt_worker(self, series_id: str, idx: int, worker: str) -> None:
        """The worker that takes up a running attempt (resumed after another worker was lost)."""
        with self.db.transaction() as cur:
            cur.execute(
                "UPDATE attempts SET worker=? WHERE series_id=? AND idx=? AND (worker IS NULL OR worker<>?)",
                (worker, series_id, idx, worker),
            )

    def set_attempt_inputs(self, series_id: str, idx: int, inputs_hash: str) -> None:
        """Record the hash of the inputs an attempt starts on (kept across a wait for a person)."""
        with self.db.transaction() as cur:
            cur.execute(
                "UPDATE attempts SET inputs_hash=? WHERE series_id=? AND idx=? AND inputs_hash IS NULL",
                (inputs_hash, series_id, idx),
            )

    def finishing_attempt(
        self,
        series_id: str,
        idx: int,
        *,
        outcome: str,
        value: float | None,
        error_code: str | None,
        error_message: str | None,
        checks: list[dict[str, Any]],
        cost_usd: str,
        unpriced: bool,
        inputs_hash: str | None = None,
    ) -> Callable[[], None]:
        """Mark a running attempt done (a row not running any more is left as it is), as a write to run later
        (store/group_commit.py): its JSON is made now, outside the transaction; its end time and the series' running
        time at its end are read when it is written. `inputs_hash` (when given) is the hash of the inputs it ran on.
        """
        texts = (
            None if error_message is None else redact(error_message),  # no provider key is ever stored
            redact(_j(checks) or "[]"),
        )
        row = (outcome, value, error_code, *texts, cost_usd, int(unpriced))
        return functools.partial(self._finish_attempt, series_id, idx, row, inputs_hash)

    def _finish_attempt(self, series_id: str, idx: int, row: tuple[Any, ...], inputs_hash: str | None) -> None:
        with self.db.transaction() as cur:
            # The series' running time as it is now, read by the same statement (one round trip to a server).
            cur.execute(
                "UPDATE attempts SET status='done', outcome=?, value=?, error_code=?, error_message=?, checks=?,"
                " cost_usd=?, unpriced=?, ended_at=?, active_at_end=(SELECT active_seconds + CASE WHEN active_since"
                " IS NULL THEN 0 ELSE ? - active_since END FROM series WHERE id=?),"
                " inputs_hash=COALESCE(?, inputs_hash) WHERE series_id=? AND idx=? AND status='running'",
                (*row, now_iso(), time.time(), series_id, inputs_hash, series_id, idx),
            )

    def requeue_for_rerun(self, series_id: str, idx: int, spent_before: str) -> None:
        """A rate-limited attempt runs once more at the end; what it spent stays counted."""
        with self.db.transaction() as cur:
            cur.execute(
                "UPDATE attempts SET status='queued', reruns=reruns+1, run_id=NULL, outcome=NULL, value=NULL,"
                " error_code=NULL, error_message=NULL, checks=NULL, cost_usd=?, ended_at=NULL, active_at_end=NULL,"
                " inputs_hash=NULL"
                " WHERE series_id=? AND idx=?",
                (spent_before, series_id, idx),
            )

    def _attempt(self, row: Row) -> AttemptRow:
        # Rows come from our own schema: skip validation (a 10,000-attempt series is read per snapshot).
        return AttemptRow(
            series_id=row["series_id"],
            idx=row["idx"],
            case_name=row["case_name"],
            dataset_id=row["dataset_id"],
            side=row["side"],
            variant_id=row["variant_id"],
            rep=row["rep"],
            seed=row["seed"],
            status=row["status"],
            run_id=row["run_id"],
            outcome=row["outcome"],
            value=row["value"],
            error_code=row["error_code"],
            error_message=row["error_message"],
            checks_json=row["checks"],
            cost_usd=row["cost_usd"],
            unpriced=bool(row["unpriced"]),
            reruns=row["reruns"],
            started_at=row["started_at"],
            ended_at=row["ended_at"],
            active_at_end=row["active_at_end"],
            inputs_hash=row["inputs_hash"],
            worker=_worker_of(row),
        )


def _worker_of(row: Row) -> str | None:
    try:
        worker: str | None = row["worker"]
    except (IndexError, KeyError):  # a row of a schema before version 11 (read by a test of the migrations)
        return None
    return worker


def _claim_statement(
    series_id: str, idx: int, run_id: str, inputs_hash: str | None, worker: str | None
) -> tuple[str, tuple[Any, ...]]:
    """The conditional UPDATE of a claim: it changes a row only while the attempt is queued (its worker is kept
    where none is named)."""
    sql = (
        "UPDATE attempts SET status='running', run_id=?, started_at=?, inputs_hash=COALESCE(inputs_hash, ?),"
        " worker=COALESCE(?, worker) WHERE series_id=? AND idx=? AND status='queued'"
    )
    return sql, (run_id, now_iso(), inputs_hash, worker, series_id, idx)
