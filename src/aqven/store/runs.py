"""Runs, their trace events and human answers in the project database."""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from aqven.errors import RUN_NOT_FOUND, NotFoundError
from aqven.models.outcomes import redact, redact_value, secret_values
from aqven.store.approvals import Approver
from aqven.store.db import Cursor, Database, Row
from aqven.store.group_commit import Later
from aqven.store.records import RunError, RunRecord, RunRequest, RunStatus, TraceEvent

#: A run's outcome as a person reads it: its attempt's (pass, fail: a check failed) or, by hand, the run's own.
RUN_OUTCOME_SQL = (
    "COALESCE((SELECT a.outcome FROM attempts a WHERE a.series_id = runs.series_id AND a.run_id = runs.id),"
    " runs.outcome)"
)

_second: tuple[int, str] = (-1, "")  # the last whole second formatted: a run writes ~10 timestamps per attempt


def now_iso() -> str:
    """The time now as `datetime.now(UTC).isoformat(timespec="milliseconds")` writes it, formatted per second."""
    global _second
    t = time.time()
    whole = int(t)
    if whole != _second[0]:
        _second = (whole, datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{_second[1]}.{int((t - whole) * 1000):03d}+00:00"


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


# What a key-shaped token starts with (models/outcomes._KEY_PATTERN): a text with none of these and no key
# value of the environment needs no masking, which keeps the common case to a few substring tests.
_KEY_MARKS = ("bearer", "k-", "k_", "i-", "i_")  # sk- pk- rk- gsk- csk- xai- (and _), lowered


def _may_hold_key(text: str) -> bool:
    if any(v in text for v in secret_values()):
        return True
    lowered = text.lower()
    return any(mark in lowered for mark in _KEY_MARKS)


def _stored(value: Any) -> str:
    """JSON text as it is stored: a provider key found in it (a model that echoes one in a successful output,
    an error message, an event) is masked first, so no key reaches the database whatever path it came by."""
    text = _dumps(value)
    if not _may_hold_key(text):
        return text
    masked = redact(text)
    if masked == text:
        return text
    try:
        json.loads(masked)  # masking replaces characters inside strings only; make sure of it
    except ValueError:
        return _dumps(redact_value(value))
    return masked


def _where(flow_id: str | None, status: str | None, series_id: str | None) -> tuple[str, tuple[str, ...]]:
    clauses, params = [], []
    for col, val in (("flow_id", flow_id), ("status", status), ("series_id", series_id)):
        if val is not None:
            clauses.append(f"{col}=?")
            params.append(val)
    return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), tuple(params)


_INSERT_RUN = (
    "INSERT INTO runs (id, flow_id, status, created_at, started_at, request, simulated, series_id, case_name,"
    " dataset_id, side) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_FINISH_RUN = "UPDATE runs SET status=?, ended_at=?, output=?, error_code=?, error_message=?, outcome=? WHERE id=?"
_INSERT_EVENT = "INSERT INTO events (run_id, seq, ts, kind, node_id, data) VALUES (?, ?, ?, ?, ?, ?)"
_SEQS_KEPT = 10_000  # runs whose last event seq a store remembers (a series runs far fewer at once)
_SEQ_TRIES = 50  # an event's seq taken by another process meanwhile: read the last one again


def _max_seq(cur: Cursor, run_id: str) -> int:
    row = cur.execute("SELECT COALESCE(MAX(seq), 0) AS s FROM events WHERE run_id=?", (run_id,)).fetchone()
    return int(row["s"])


class RunStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._last_seq: dict[str, tuple[int, int]] = {}  # run -> (db generation, the last seq this store wrote)
        self._cost: dict[str, tuple[int, Decimal]] = {}  # run -> (db generation, its cost as this store wrote it)

    # ---- runs ----

    def create(
        self,
        request: RunRequest,
        *,
        series_id: str | None = None,
        run_id: str | None = None,
        side: str | None = None,
    ) -> str:
        """Store a new run; `side` is the side of the split it runs on (dev | holdout; None without a case), kept
        with it so that what may be shown of it never depends on a later split."""
        rid = run_id or new_id("run")
        self.creating(request, rid, series_id=series_id, side=side)()
        return rid

    def creating(
        self,
        request: RunRequest,
        run_id: str,
        *,
        series_id: str | None = None,
        side: str | None = None,
        running: bool = False,
    ) -> Callable[[], None]:
        """`create` as a write to run later (store/group_commit.py): its JSON is made now, outside the transaction.
        `running`: the run is created running, started now (the engine's `begin_new`: one statement, not two)."""
        created = now_iso()
        row = (
            run_id,
            request.flow_id,
            "running" if running else "queued",
            created,
            created if running else None,
            request.model_dump_json(),
            int(request.simulate),
            series_id,
            request.case_name,
            request.dataset_id,
            side,
        )
        return functools.partial(self._insert_run, row)

    def _insert_run(self, row: tuple[Any, ...]) -> None:
        self._execute(_INSERT_RUN, row)
        self._remember_seq(row[0], 0)  # a new run has no event: its first is seq 1
        self._remember_cost(row[0], Decimal(0))

    def _execute(self, sql: str, params: tuple[Any, ...]) -> None:
        with self.db.transaction() as cur:
            cur.execute(sql, params)

    def set_status(self, run_id: str, status: RunStatus) -> None:
        with self.db.transaction() as cur:
            if status == "running":
                cur.execute(
                    "UPDATE runs SET status=?, started_at=COALESCE(started_at, ?) WHERE id=?",
                    (status, now_iso(), run_id),
                )
            else:
                cur.execute("UPDATE runs SET status=? WHERE id=?", (status, run_id))

    def add_usage(
        self, run_id: str, *, input_tokens: int, output_tokens: int, cost: Decimal | None, simulated: bool
    ) -> None:
        with self.db.transaction() as cur:
            # The run's cost so far: as this store last wrote it while no transaction rolled back since (a run is
            # run by one process at a time), else read, locked until the commit where rows are locked.
            kept = self._cost.get(run_id)
            if kept is not None and kept[0] == self.db.generation:
                before = kept[1]
            else:
                row = cur.execute(f"SELECT cost_usd FROM runs WHERE id=?{self.db.for_update}", (run_id,)).fetchone()
                before = Decimal(row["cost_usd"])
            total = before + (cost or Decimal(0))
            self._remember_cost(run_id, total)
            cur.execute(
                "UPDATE runs SET input_tokens=input_tokens+?, output_tokens=output_tokens+?, cost_usd=?,"
                " unpriced_calls=unpriced_calls+?, model_calls=model_calls+1,"
                " simulated=CASE WHEN ?=1 THEN 1 ELSE simulated END WHERE id=?",
                (input_tokens, output_tokens, str(total), int(cost is None), int(simulated), run_id),
            )

    def finishing(
        self,
        run_id: str,
        *,
        status: RunStatus,
        output: Any = None,
        error: RunError | None = None,
        outcome: str | None = None,
    ) -> Callable[[], None]:
        """The run's end, as a write to run now (`finishing(...)()`) or later, with a run's held writes: its time and
        JSON are taken now, outside the transaction that writes it."""
        return functools.partial(self._execute, _FINISH_RUN, _finish_row(run_id, status, output, error, outcome))

    def ending(
        self, run_id: str, *, status: RunStatus, output: Any = None, outcome: str | None = None
    ) -> Callable[[], Later[RunRecord]]:
        """`finishing` whose write answers the ended run's record, read by the same statement (one statement, not
        an UPDATE and a SELECT), once the write is committed (`Database.grouped`; `.read()` elsewhere)."""
        return functools.partial(self._end_returning, _finish_row(run_id, status, output, None, outcome))

    def _end_returning(self, row: tuple[Any, ...]) -> Later[RunRecord]:
        with self.db.transaction():
            found = self.db.query_one_later(_FINISH_RUN + " RETURNING *", row)
        return found.then(functools.partial(self._ended_record, row[-1]))

    def _ended_record(self, run_id: str, found: Row | None) -> RunRecord:
        if found is None:
            raise _no_run(run_id)
        return self._record(found)

    def exists(self, run_id: str) -> bool:
        return self.db.query_one("SELECT 1 FROM runs WHERE id=?", (run_id,)) is not None

    def get(self, run_id: str) -> RunRecord:
        row = self.db.query_one("SELECT * FROM runs WHERE id=?", (run_id,))
        if row is None:
            raise _no_run(run_id)
        return self._record(row)

    def list_runs(
        self,
        *,
        flow_id: str | None = None,
        status: str | None = None,
        series_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunRecord]:
        where, params = _where(flow_id, status, series_id)
        rows = self.db.query(
            f"SELECT * FROM runs {where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [self._record(r) for r in rows]

    def list_runs_except(
        self,
        hidden_sql: str,
        *,
        counted_sql: str | None = None,
        flow_id: str | None = None,
        status: str | None = None,
        series_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[RunRecord], int]:
        """`list_runs` without the runs the SQL condition `hidden_sql` is true for (offset and limit count the
        runs that are shown), and how many of the runs the filters match were left out (those `counted_sql` is
        true for, when given: the caller counts the others its own way)."""
        where, params = _where(flow_id, status, series_id)
        shown_where = f"{where} AND NOT {hidden_sql}" if where else f"WHERE NOT {hidden_sql}"
        rows = self.db.query(
            f"SELECT * FROM runs {shown_where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        counted = counted_sql or hidden_sql
        hidden_where = f"{where} AND {counted}" if where else f"WHERE {counted}"
        count = self.db.query_one(f"SELECT COUNT(*) AS n FROM runs {hidden_where}", params)
        return [self._record(r) for r in rows], int(count["n"]) if count else 0

    def ids_with_status(self, *statuses: str) -> list[str]:
        marks = ",".join("?" for _ in statuses)
        return [r["id"] for r in self.db.query(f"SELECT id FROM runs WHERE status IN ({marks})", statuses)]

    def _record(self, row: Row) -> RunRecord:
        error = None
        if row["error_message"]:
            error = RunError.model_validate(json.loads(row["error_message"]))
        waiting = None
        if row["status"] == "waiting_human":
            ev = self.db.query_one(
                "SELECT node_id FROM events WHERE run_id=? AND kind='human_wait' ORDER BY seq DESC LIMIT 1",
                (row["id"],),
            )
            waiting = ev["node_id"] if ev else None
        return RunRecord(
            id=row["id"],
            flow_id=row["flow_id"],
            status=row["status"],
            created_at=row["created_at"],
            started_at=row["started_at"],
            ended_at=row["ended_at"],
            request=RunRequest.model_validate_json(row["request"]),
            output=None if row["output"] is None else json.loads(row["output"]),
            error=error,
            outcome=row["outcome"],
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            cost_usd=row["cost_usd"],
            unpriced_calls=row["unpriced_calls"],
            cost_is_lower_bound=row["unpriced_calls"] > 0,
            model_calls=row["model_calls"],
            simulated=bool(row["simulated"]),
            series_id=row["series_id"],
            case_name=row["case_name"],
            dataset_id=row["dataset_id"],
            side=row["side"],
            waiting_node=waiting,
        )

    # ---- events ----

    def append_event(
        self, run_id: str, kind: str, node_id: str | None = None, data: dict[str, Any] | None = None
    ) -> None:
        self.event(run_id, kind, node_id, data)()

    def event(
        self, run_id: str, kind: str, node_id: str | None = None, data: dict[str, Any] | None = None
    ) -> Callable[[], None]:
        """`append_event` as a write to run later (a run's held writes, store/group_commit.py): the event's time and
        stored JSON are taken now, so the transaction that writes it, which other processes wait for, only inserts.
        """
        return functools.partial(self._insert_event, run_id, kind, node_id, now_iso(), _stored(data or {}))

    def _insert_event(self, run_id: str, kind: str, node_id: str | None, ts: str, payload: str) -> None:
        with self.db.transaction() as cur:
            # The next seq follows the last this store wrote for the run (no MAX read per event) while no
            # transaction rolled back since. Another process that wrote the run's events meanwhile (a worker that
            # resumed it) took that seq: the insert then fails, and the seq is read again.
            last = self._last_seq.get(run_id)
            known = last is not None and last[0] == self.db.generation
            if known and self.db.pipelined:  # with the write's other events, in one statement at its end
                assert last is not None
                self.db.defer(_INSERT_EVENT, (run_id, last[1] + 1, ts, kind, node_id, payload))
                self._remember_seq(run_id, last[1] + 1)
                return
            seq = last[1] + 1 if known and last is not None else _max_seq(cur, run_id) + 1
            for tries in range(_SEQ_TRIES):
                try:
                    with self.db.undoable():
                        cur.execute(_INSERT_EVENT, (run_id, seq, ts, kind, node_id, payload))
                    break
                except self.db.IntegrityError:
                    if tries == _SEQ_TRIES - 1:
                        raise
                # Where rows are locked (PostgreSQL), the run's row is taken first: the writers that collided then
                # read the last seq one after the other, each after the previous one committed.
                cur.execute(f"SELECT id FROM runs WHERE id=?{self.db.for_update}", (run_id,))
                seq = _max_seq(cur, run_id) + 1
            self._remember_seq(run_id, seq)

    def _remember_cost(self, run_id: str, cost: Decimal) -> None:
        """What the run has cost so far, as this store wrote it (good while no transaction of its rolls back)."""
        if len(self._cost) >= _SEQS_KEPT:
            self._cost.clear()
        self._cost[run_id] = (self.db.generation, cost)

    def _remember_seq(self, run_id: str, seq: int) -> None:
        """The last event seq this store wrote for the run (good while no transaction of its rolls back)."""
        if len(self._last_seq) >= _SEQS_KEPT:
            self._last_seq.clear()
        self._last_seq[run_id] = (self.db.generation, seq)

    def events(self, run_id: str, *, after: int = 0, limit: int = 1000) -> list[TraceEvent]:
        rows = self.db.query(
            "SELECT * FROM events WHERE run_id=? AND seq>? ORDER BY seq LIMIT ?", (run_id, after, limit)
        )
        return [
            TraceEvent(
                run_id=r["run_id"],
                seq=r["seq"],
                ts=r["ts"],
                kind=r["kind"],
                node_id=r["node_id"],
                data=json.loads(r["data"]),
            )
            for r in rows
        ]

    def node_events(self, run_id: str, node_id: str) -> list[TraceEvent]:
        rows = self.db.query("SELECT * FROM events WHERE run_id=? AND node_id=? ORDER BY seq", (run_id, node_id))
        return [
            TraceEvent(
                run_id=r["run_id"],
                seq=r["seq"],
                ts=r["ts"],
                kind=r["kind"],
                node_id=r["node_id"],
                data=json.loads(r["data"]),
            )
            for r in rows
        ]

    def finished_outputs(self, run_id: str) -> dict[str, Any]:
        """Outputs of nodes that already finished in this run (for resuming without re-running them)."""
        rows = self.db.query("SELECT node_id, data FROM events WHERE run_id=? AND kind='node_end'", (run_id,))
        return {r["node_id"]: json.loads(r["data"]).get("output") for r in rows}

    # ---- human answers ----

    def answer(self, run_id: str, node_id: str, answer: Any, by: Approver | None = None) -> None:
        """Store a person's answer to a human node, with who gave it and the proof (`by`)."""
        who = by or Approver("rest")
        with self.db.transaction() as cur:
            cur.execute(
                "INSERT INTO human_answers (run_id, node_id, answer, answered_at, channel, confirmed, person, proof)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, node_id) DO UPDATE SET answer=excluded.answer,"
                " answered_at=excluded.answered_at, channel=excluded.channel, confirmed=excluded.confirmed,"
                " person=excluded.person, proof=excluded.proof",
                (
                    run_id,
                    node_id,
                    _dumps(answer),
                    now_iso(),
                    who.channel,
                    who.confirmed,
                    who.person,
                    _dumps(who.proof) if who.proof is not None else None,
                ),
            )

    def human_answer(self, run_id: str, node_id: str) -> tuple[bool, Any]:
        row = self.db.query_one("SELECT answer FROM human_answers WHERE run_id=? AND node_id=?", (run_id, node_id))
        return (False, None) if row is None else (True, json.loads(row["answer"]))

    def human_answer_by(self, run_id: str, node_id: str) -> dict[str, Any] | None:
        """Who answered a human node and how (channel, confirmed, person; `proof` for a passkey), or None."""
        row = self.db.query_one(
            "SELECT channel, confirmed, person, proof FROM human_answers WHERE run_id=? AND node_id=?",
            (run_id, node_id),
        )
        if row is None or row["channel"] is None:
            return None
        by = {k: row[k] for k in ("channel", "confirmed", "person") if row[k] is not None}
        if row["proof"] is not None:
            by["proof"] = json.loads(row["proof"])
        return by


def _finish_row(
    run_id: str, status: RunStatus, output: Any, error: RunError | None, outcome: str | None
) -> tuple[Any, ...]:
    """The parameters of _FINISH_RUN: the end's time taken now, its JSON made now."""
    return (
        status,
        now_iso(),
        None if output is None else _stored(output),
        error.code if error else None,
        _stored(error.model_dump()) if error else None,
        outcome,
        run_id,
    )


def _no_run(run_id: str) -> NotFoundError:
    return NotFoundError(f"no run {run_id!r}", code=RUN_NOT_FOUND, hint="list runs with GET /api/runs")
