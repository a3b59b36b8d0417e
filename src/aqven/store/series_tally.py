"""What a series' attempts add up to, read with GROUP BY queries.

A snapshot of a running series (`series_get`, the Studio page) needs counts, spend, the per-case cells of the
verdict and the finish times behind the eta, not the attempts themselves. The counts come from `series_cells`
and the spend from `series_costs`, kept by a trigger as attempts change (store/db.py, migration 7): a
snapshot reads one row per variant, case, status and outcome, however many attempts the series has. The finish
times are read along the index `attempts_ends` (the first one, and the recent ones), the running attempts
along `attempts_status`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

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

    @property
    def total(self) -> VariantTally:
        out = VariantTally()
        for v in self.variants.values():
            out.add(v)
        return out


# The tallies kept per cell (store/db.py migration 8); a cell whose attempts all moved on has n = 0. A case has
# one side in a series (its plan's), so no two cells of a series share (variant, case, status, outcome): the rows
# are read as they are kept, without a GROUP BY (which sorted them all in a temporary B-tree).
_GROUPS = (
    "SELECT variant_id, case_name, status, NULLIF(outcome, '') AS outcome, n, reruns, v, unpriced, ends"
    " FROM series_cells WHERE series_id=? AND n > 0"
)
# Money is TEXT holding a Decimal: equal amounts are counted in SQL and added exactly in Python.
_SPEND = (
    "SELECT variant_id, cost_usd, SUM(n) AS n FROM series_costs WHERE series_id=?"
    " GROUP BY variant_id, cost_usd HAVING SUM(n) > 0"
)
# Only finished attempts have an active time at their end (a rerun clears it).
_FIRST = "SELECT MIN(active_at_end) AS first FROM attempts WHERE series_id=? AND active_at_end IS NOT NULL"
_RECENT = "SELECT COUNT(*) AS n FROM attempts WHERE series_id=? AND active_at_end >= ?"
_RUNNING = "SELECT idx, run_id, cost_usd, unpriced FROM attempts WHERE series_id=? AND status='running'"


def read_tally(db: Database, series_id: str, *, finished_since: float = 0.0, side: str | None = None) -> SeriesTally:
    """All aggregates of one series, from one consistent read; finishes at or after the active time
    `finished_since` count as recent. With `side`, only the attempts on that side of the split (a look that
    ran held-out cases shows the numbers of its working ones only)."""
    queries = [_GROUPS, _SPEND, _FIRST, _RECENT]
    extra: tuple[str, ...] = ()
    if side is not None:
        queries = [q.replace("WHERE series_id=?", "WHERE series_id=? AND side=?") for q in queries]
        extra = (side,)
    groups_sql, spend_sql, first_sql, recent_sql = queries
    with db.reading() as conn:
        cur = conn.cursor()
        cur.row_factory = None  # plain tuples: a snapshot walks one row per case, and Row lookups by name cost
        groups = cur.execute(groups_sql, (series_id, *extra)).fetchall()
        spend = conn.execute(spend_sql, (series_id, *extra)).fetchall()
        first_row = conn.execute(first_sql, (series_id, *extra)).fetchone()
        recent = int(conn.execute(recent_sql, (series_id, *extra, finished_since)).fetchone()["n"])
        running = [
            RunningAttempt(r["run_id"], r["cost_usd"], bool(r["unpriced"]))
            for r in conn.execute(_RUNNING, (series_id,))
        ]
    first: float | None = None if first_row["first"] is None else float(first_row["first"])
    variants: dict[str, VariantTally] = {}
    cells: dict[str, dict[str, tuple[float, int]]] = {}
    fails: dict[str, int] = {}
    model_failed: dict[str, dict[str, int]] = {}
    unpriced = ends = 0
    last: str | None = None
    t = VariantTally()
    mine: dict[str, tuple[float, int]] = {}
    for variant, case, status, outcome, n, reruns, v, unpriced_n, ends_n in groups:
        if variant != last:  # the rows come in key order: a variant's run of rows, per side
            last = variant
            t = variants.setdefault(variant, VariantTally())
            mine = cells.setdefault(variant, {})
        t.attempts += n
        t.reruns += reruns
        fails[case] = fails.get(case, 0) + (n if outcome == "fail" or outcome == "model_failure" else 0)
        if status == "running":
            t.running += n
            continue
        unpriced += unpriced_n
        if status == "queued":
            t.queued += n
            continue
        t.done += n
        ends += ends_n
        if outcome in COUNTED:
            t.counted += n
            t.passes += v
            passes, counted = mine.get(case, (0.0, 0))
            mine[case] = (passes + v, counted + n)
        if outcome == "model_failure":
            t.model_failures += n
            failed = model_failed.setdefault(variant, {})
            failed[case] = failed.get(case, 0) + n
        elif outcome == "infra":
            t.infra_errors += n
    cells = {variant: mine for variant, mine in cells.items() if mine}
    for r in spend:
        variants[r["variant_id"]].spend += Decimal(r["cost_usd"] or "0") * int(r["n"])
    times = FinishTimes(ends, first, finished_since, recent)
    return SeriesTally(variants, cells, fails, unpriced, running, times, model_failed)


def finished_costs(db: Database, series_id: str) -> list[tuple[str, str | None]]:
    """(ended_at, cost) of every finished attempt, in the order they finished: the spend curve."""
    with db.reading() as conn:
        rows = conn.execute(
            "SELECT ended_at, cost_usd FROM attempts WHERE series_id=? AND status='done' AND ended_at IS NOT NULL"
            " ORDER BY ended_at",
            (series_id,),
        ).fetchall()
    return [(r["ended_at"], r["cost_usd"]) for r in rows]
