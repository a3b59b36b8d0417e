"""What a series' attempts add up to, read with GROUP BY queries.

A snapshot of a running series (`series_get`, the Studio page) needs counts, spend, the per-case cells of the
verdict and the finish times behind the eta, not the attempts themselves. The counts come from `series_cells`
and the spend from `series_costs`, kept by a trigger as attempts change (store/db.py, migration 7): a
snapshot reads one row per variant, case, status and outcome, however many attempts the series has. The finish
times are read along the index `attempts_ends` (the first one, and the recent ones), the running attempts
along `attempts_status`.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from aqven.store.db import Database

COUNTED = ("pass", "fail", "model_failure")


@dataclass(slots=True)
class VariantTally:
    """Counts of one variant's attempts (or of the whole series)."""

    attempts: int = 0
    done: int = 0
    running: int = 0
    queued: int = 0
    counted: int = 0
    passes: float = 0.0
    model_failures: int = 0
    infra_errors: int = 0
    reruns: int = 0
    spend: Decimal = field(default_factory=Decimal)  # recorded cost of its attempts (running ones: earlier tries)

    def add(self, other: VariantTally) -> None:
        for name in VariantTally.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass(slots=True)
class RunningAttempt:
    run_id: str | None
    cost_usd: str | None  # what an earlier, rate-limited try spent
    unpriced: bool
    run_cost_usd: str | None = None  # what its run spent so far (None: its run row is not written yet)
    run_unpriced_calls: int = 0


@dataclass(slots=True)
class FinishTimes:
    """Active seconds at which attempts finished: how many, the first, and how many after `since`."""

    count: int
    first: float | None
    since: float
    at_or_after_since: int


@dataclass(slots=True)
class SeriesTally:
    variants: dict[str, VariantTally]
    cells: dict[str, dict[str, tuple[float, int]]]  # variant -> case -> (passes, counted attempts)
    fails: dict[str, int]  # case -> attempts that failed (a check failed, or the model failed)
    unpriced_settled: int  # attempts not running with an unpriced call
    running: list[RunningAttempt]
    finish_times: FinishTimes
    model_failed: dict[str, dict[str, int]] = field(default_factory=dict)
    """variant -> case -> counted attempts that ended in a model failure (no check, no judge, read their output)"""
    pending: set[str] = field(default_factory=set)
    """cases with an attempt queued or running"""
    rate_limited: set[str] = field(default_factory=set)
    """cases with a finished attempt that hit a rate limit and has not run again (it runs again at the end)"""
    seq: int = -1
    """the last change of the series' cells it counts: two reads with the same seq count the same"""

    @property
    def total(self) -> VariantTally:
        out = VariantTally()
        for v in self.variants.values():
            out.add(v)
        return out


# The tallies kept per cell (store/db.py migrations 8, 9) changed after a given seq: every row of a series at
# seq > -1. A cell whose attempts all moved on has n = 0 (it counts nothing, but an incremental read must see that
# it changed). A case has one side in a series (its plan's), so no two cells of a series share (variant, case,
# status, outcome).
_CHANGED = (
    "SELECT variant_id, case_name, side, status, outcome, n, reruns, v, unpriced, ends"
    " FROM series_cells WHERE series_id=? AND seq>?"
)
# Money is TEXT holding a Decimal: each recorded cost's count is kept, the amounts are added exactly in Python.
_COSTS_CHANGED = "SELECT side, variant_id, cost_usd, n FROM series_costs WHERE series_id=? AND seq>?"
_SEQ = "SELECT n FROM series_seq WHERE series_id=?"
# Only finished attempts have an active time at their end (a rerun clears it).
_SAMPLE_EVERY_S = 1.0  # the finish counts kept (`KeptTally._samples`): at most one a second of active time
_FIRST = "SELECT MIN(active_at_end) AS first FROM attempts WHERE series_id=? AND active_at_end IS NOT NULL"
_RECENT = "SELECT COUNT(*) AS n FROM attempts WHERE series_id=? AND active_at_end >= ?"
# With what their runs spent so far, in the same read (one query, not one per running attempt).
_RUNNING = (
    "SELECT a.idx, a.run_id, a.cost_usd, a.unpriced, r.cost_usd, r.unpriced_calls FROM attempts a"
    " LEFT JOIN runs r ON r.id = a.run_id WHERE a.series_id=? AND a.status='running'"
)

# Along the partial index attempts_rate_limited (store/db.py migration 9); the code is models' PROVIDER_RATE_LIMITED.
_RATE_LIMITED = (
    "SELECT DISTINCT case_name FROM attempts WHERE series_id=? AND status='done'"
    " AND error_code='PROVIDER_RATE_LIMITED' AND reruns=0"
)

_Row = tuple[int, int, float, int, int]  # a cell's n, reruns, value sum, unpriced, finishes
_FAILING = ("fail", "model_failure")


_UNIT = 1 << 1074  # every float is a whole multiple of 2**-1074


def _exact(v: float) -> int:
    """A float as an exact whole number of 2**-1074: sums of these do not depend on the order of the terms."""
    num, den = float(v).as_integer_ratio()  # den is a power of 2, at most 2**1074
    return num << (1075 - den.bit_length())


def _sided(sql: str, side: str | None) -> str:
    return sql if side is None else sql.replace("WHERE series_id=?", "WHERE series_id=? AND side=?")


class KeptTally:
    """A series' tallies kept in memory, brought up to date from the cells changed since the last read.

    Every update of an attempt stamps the cells and cost counts it changes with the next number of its series'
    counter (store/db.py migration 9); a read fetches the rows stamped after the last one it saw, takes each one's
    old contribution out of the aggregates and puts its new one in (`_count`, the one place that says what a cell
    adds). A fresh KeptTally reads every row the same way, so a full read and an incremental one are the same
    code; the sums they keep are exact (integers, the values as whole multiples of 2**-1074, the per-case cell
    recounted from its few rows), so they agree to the last bit whatever the order the changes came in.
    Thread-safe."""

    def __init__(self, series_id: str, side: str | None = None) -> None:
        self.series_id = series_id
        self.side = side
        self.seq = -1  # the last change read; every row has seq >= 0
        self._lock = threading.Lock()
        self._rows: dict[tuple[str, str], dict[tuple[str, str, str], _Row]] = {}  # (variant, case) -> its cells
        self._costs: dict[tuple[str, str, str], int] = {}  # (side, variant, cost) -> attempts that recorded it
        self._variants: dict[str, VariantTally] = {}  # passes and spend kept apart, exactly:
        self._passes: dict[str, int] = {}  # in units of 2**-1074 (`_exact`)
        self._spend: dict[str, Decimal] = {}
        self._exponents: dict[str, Counter[int]] = {}  # the exponents of the costs a variant's spend adds up
        self._cells: dict[str, dict[str, tuple[float, int]]] = {}
        self._fails: dict[str, int] = {}
        self._model_failed: dict[str, dict[str, int]] = {}
        self._pending: dict[str, int] = {}  # case -> its attempts queued or running (none: not there)
        self._unpriced = 0
        self._ends = 0
        # (active seconds at a read, attempts finished by then), at most one a second: the finish count at an
        # earlier time, so that the count since a moment of the eta's window is a subtraction, not a COUNT of
        # every attempt that finished in it (300 s of a fast series: tens of thousands of index entries).
        self._samples: deque[tuple[float, int]] = deque()
        self.memo: dict[str, Any] = {}  # what a reader derives from this tally and keeps with it (the verdict)

    def behind(self, db: Database) -> int | None:
        """How many changes of the series this tally has not read yet (None: it never read it, or another thread
        reads it just now)."""
        if self.seq < 0 or self._lock.locked():
            return None
        row = db.query_one(_SEQ, (self.series_id,))
        return max(0, (0 if row is None else int(row[0])) - self.seq)

    def read(self, db: Database, *, finished_since: float = 0.0, now: float | None = None) -> SeriesTally:
        """The series' aggregates now, from one consistent read (see `read_tally`). With `now` (the series' active
        seconds at this read), how many finished since `finished_since` comes from a finish count an earlier read
        kept, where one was taken at or before it (`_ends_by`): counted from the store otherwise."""
        sid, side = self.series_id, self.side
        extra: tuple[str, ...] = () if side is None else (side,)
        with self._lock:
            before = self._ends_by(finished_since)
            with db.reading() as conn:
                cur = conn.tuples()  # Row lookups by name cost, and a first read walks every cell
                seq = cur.execute(_SEQ, (sid,)).fetchone()
                # A first read skips the cells that count nothing (n = 0): a later change of one finds no old row.
                changed = _sided(_CHANGED if self.seq >= 0 else _CHANGED + " AND n>0", side)
                cells = cur.execute(changed, (sid, *extra, self.seq)).fetchall()
                costs = cur.execute(_sided(_COSTS_CHANGED, side), (sid, *extra, self.seq)).fetchall()
                first = cur.execute(_sided(_FIRST, side), (sid, *extra)).fetchone()[0]
                recent = (
                    -1
                    if before is not None
                    else int(cur.execute(_sided(_RECENT, side), (sid, *extra, finished_since)).fetchone()[0])
                )
                # In index order, sorted here: an ORDER BY makes SQLite walk every attempt of the series.
                running = [
                    RunningAttempt(r[1], r[2], bool(r[3]), r[4], int(r[5] or 0))
                    for r in sorted(cur.execute(_RUNNING, (sid,)).fetchall(), key=lambda r: int(r[0]))
                ]
                limited = {r[0] for r in cur.execute(_sided(_RATE_LIMITED, side), (sid, *extra))}
            self._apply(cells, costs)
            self.seq = max(self.seq, 0 if seq is None else int(seq[0]))
            if before is not None:
                recent = max(0, self._ends - before)
            if now is not None:
                self._sample(now)
            times = FinishTimes(self._ends, None if first is None else float(first), finished_since, recent)
            return self._tally(running, times, limited)

    def _ends_by(self, moment: float) -> int | None:
        """The finish count of the latest sample taken at or before `moment` (older ones are let go), or None.

        It may count a little less than finished by `moment` (the attempts that finished between that sample and
        it), so the count since `moment` a little more: by one read's worth in a window of minutes. An attempt that
        finished before the sample and runs again at the end takes one off."""
        samples = self._samples
        while len(samples) >= 2 and samples[1][0] <= moment:
            samples.popleft()
        return samples[0][1] if samples and samples[0][0] <= moment else None

    def _sample(self, now: float) -> None:
        samples = self._samples
        if samples and now < samples[-1][0]:
            samples.clear()  # the series' active clock went back: nothing kept is comparable
        if not samples or now - samples[-1][0] >= _SAMPLE_EVERY_S:
            samples.append((now, self._ends))

    def _apply(self, cells: list[tuple[Any, ...]], costs: list[tuple[Any, ...]]) -> None:
        touched: set[tuple[str, str]] = set()
        for variant, case, side, status, outcome, n, reruns, v, unpriced, ends in cells:
            group = self._rows.get((variant, case))
            if group is None:
                group = self._rows[(variant, case)] = {}
            key = (side, status, outcome)
            old = group.get(key)
            if old is not None:
                self._count(variant, case, status, outcome, old, -1)
            new: _Row = (n, reruns, v, unpriced, ends)
            group[key] = new
            self._count(variant, case, status, outcome, new, 1)
            touched.add((variant, case))
        for variant, case in touched:
            self._recount_cell(variant, case)
        for side, variant, cost, n in costs:
            old_n = self._costs.get((side, variant, cost), 0)
            self._costs[(side, variant, cost)] = n
            amount = Decimal(cost or "0")
            self._spend[variant] = self._spend.get(variant, Decimal()) + amount * (n - old_n)
            exponents = self._exponents.setdefault(variant, Counter())
            exponents[int(amount.as_tuple().exponent)] += (n > 0) - (old_n > 0)

    def _count(self, variant: str, case: str, status: str, outcome: str, row: _Row, sign: int) -> None:
        """Add (sign 1) or take out (sign -1) what one cell counts; a cell with n = 0 counts nothing."""
        n, reruns, v, unpriced, ends = row
        if n <= 0:
            return
        t = self._variants.get(variant)
        if t is None:
            t = self._variants[variant] = VariantTally()
        t.attempts += sign * n
        t.reruns += sign * reruns
        self._fails[case] = self._fails.get(case, 0) + (sign * n if outcome in _FAILING else 0)
        if status == "running" or status == "queued":
            pending = self._pending.get(case, 0) + sign * n
            if pending:
                self._pending[case] = pending
            else:
                del self._pending[case]
        if status == "running":
            t.running += sign * n
            return
        self._unpriced += sign * unpriced
        if status == "queued":
            t.queued += sign * n
            return
        t.done += sign * n
        self._ends += sign * ends
        if outcome in COUNTED:
            t.counted += sign * n
            self._passes[variant] = self._passes.get(variant, 0) + sign * _exact(v)
        if outcome == "model_failure":
            t.model_failures += sign * n
            failed = self._model_failed.setdefault(variant, {})
            failed[case] = failed.get(case, 0) + sign * n
            if not failed[case]:
                del failed[case]
            if not failed:
                del self._model_failed[variant]
        elif outcome == "infra":
            t.infra_errors += sign * n

    def _recount_cell(self, variant: str, case: str) -> None:
        """A case's (passes, counted attempts), added from its own few cells in key order (not kept by adding and
        taking out floats, whose rounding would depend on the order of the changes)."""
        passes, counted = 0.0, 0
        group = self._rows[(variant, case)]
        for key in sorted(group) if len(group) > 1 else group:
            _side, status, outcome = key
            n, _reruns, v, _unpriced, _ends = group[key]
            if n > 0 and status != "running" and status != "queued" and outcome in COUNTED:
                passes += v
                counted += n
        mine = self._cells.setdefault(variant, {})
        if counted:
            mine[case] = (passes, counted)
        else:
            mine.pop(case, None)
            if not mine:
                del self._cells[variant]

    def _tally(self, running: list[RunningAttempt], times: FinishTimes, limited: set[str]) -> SeriesTally:
        """A copy the caller may keep while later reads change this one."""
        variants = {}
        for name, t in self._variants.items():
            spend = self._spend.get(name, Decimal())
            exponents = [e for e, k in self._exponents.get(name, Counter()).items() if k > 0]
            # Decimal sums take the smallest exponent of their terms: the one a sum of the costs there now has.
            spend = spend.quantize(Decimal((0, (1,), min([0, *exponents]))))
            variants[name] = VariantTally(
                t.attempts,
                t.done,
                t.running,
                t.queued,
                t.counted,
                self._passes.get(name, 0) / _UNIT,  # int / int: rounded once, correctly
                t.model_failures,
                t.infra_errors,
                t.reruns,
                spend,
            )
        cells = {v: dict(mine) for v, mine in self._cells.items()}
        failed = {v: dict(mine) for v, mine in self._model_failed.items()}
        return SeriesTally(
            variants,
            cells,
            dict(self._fails),
            self._unpriced,
            running,
            times,
            failed,
            set(self._pending),
            limited,
            self.seq,
        )


class TallyCache:
    """The kept tallies of the last few series read (a server process keeps one: SeriesService)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._kept: dict[str, KeptTally] = {}
        self._lock = threading.Lock()

    def read(
        self, db: Database, series_id: str, *, finished_since: float = 0.0, now: float | None = None
    ) -> SeriesTally:
        return self.kept(series_id).read(db, finished_since=finished_since, now=now)

    def kept(self, series_id: str) -> KeptTally:
        with self._lock:
            kept = self._kept.pop(series_id, None) or KeptTally(series_id)
            self._kept[series_id] = kept  # the most recently read last
            while len(self._kept) > self.size:
                self._kept.pop(next(iter(self._kept)))
        return kept


def read_tally(db: Database, series_id: str, *, finished_since: float = 0.0, side: str | None = None) -> SeriesTally:
    """All aggregates of one series, from one consistent read; finishes at or after the active time
    `finished_since` count as recent. With `side`, only the attempts on that side of the split (a look that
    ran held-out cases shows the numbers of its working ones only)."""
    return KeptTally(series_id, side).read(db, finished_since=finished_since)


def finished_costs(db: Database, series_id: str) -> list[tuple[str, str | None]]:
    """(ended_at, cost) of every finished attempt, in the order they finished: the spend curve."""
    with db.reading() as conn:
        rows = conn.execute(
            "SELECT ended_at, cost_usd FROM attempts WHERE series_id=? AND status='done' AND ended_at IS NOT NULL"
            " ORDER BY ended_at",
            (series_id,),
        ).fetchall()
    return [(r["ended_at"], r["cost_usd"]) for r in rows]
