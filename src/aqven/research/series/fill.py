"""A new series' attempt rows: the first ones with the series, the rest in chunks once the start has answered.

`POST /api/series` answers with the launch plan and the series' queued tallies (`series_cells`, complete in the
series' own transaction). Writing 100,000 attempt rows is about a second of SQLite work, so a series' rows after
the first FIRST_ROWS are written afterwards, CHUNK rows per transaction (each holds the write lock briefly). The
rows are a pure function of the series row — its plan, its secret order seed and its simulators' seed
(research/series/order.py) — so a series a dead server left half-written is completed, the same way, by the next
one. Nothing acts on a series before its rows are all there: its driver waits for them (SeriesRunner._drive), and
so do cancel, approve and stop (SeriesService).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from aqven.research.series import order as run_order
from aqven.research.series.order import attempt_keys, attempt_seed, seed_key
from aqven.store.series import SeriesStore
from aqven.store.series_records import SeriesPlan

FIRST_ROWS = 2_000  # written with the series: a series this small is complete when its start answers
CHUNK = 2_000  # rows per transaction after that (the write lock is held ~15 ms for each)


def total_attempts(plan: SeriesPlan) -> int:
    return len(plan.cases) * plan.repeats * len(plan.variants)


def queued_cells(plan: SeriesPlan) -> list[tuple[str, str, str, int]]:
    """(side, variant, case, queued attempts) of a new series: its tallies before anything ran."""
    cells: Counter[tuple[str, str, str]] = Counter()
    for case in plan.cases:
        for variant in plan.variants:
            cells[(plan.sides[case], variant, case)] += plan.repeats
    return [(side, variant, case, n) for (side, variant, case), n in cells.items()]


def attempt_rows(
    plan: SeriesPlan, *, order: Sequence[str], key: str, sim_seed: int, start: int, stop: int
) -> list[dict[str, Any]]:
    """The attempt rows start..stop-1 of a series whose cases run in `order` (`case_order` of its order seed)."""
    rows: list[dict[str, Any]] = []
    last: tuple[str, int] | None = None
    seed = 0
    for idx, case, rep, variant in attempt_keys(
        order, repeats=plan.repeats, variants=plan.variants, start=start, stop=stop
    ):
        if last != (case, rep):  # the variants of one repeat sit side by side and share its seed (paired)
            last, seed = (case, rep), attempt_seed(key, case, rep, sim_seed)
        rows.append(
            {
                "idx": idx,
                "case_name": case,
                "dataset_id": plan.dataset_id,
                "side": plan.sides[case],
                "variant_id": variant,
                "rep": rep,
                "seed": seed,
            }
        )
    return rows


def write_missing(store: SeriesStore, series_id: str, stop: threading.Event | None = None) -> int:
    """Write the attempt rows the series lacks, CHUNK per transaction, until `stop` is set; how many it wrote."""
    s = store.get(series_id)
    total = total_attempts(s.plan)
    have = store.attempt_count(series_id)
    if have >= total or s.order_seed is None or s.sim_seed is None:
        return 0
    order = run_order.case_order(s.plan.cases, s.order_seed)  # looked up now: tests may run in file order
    key = seed_key(s.experiment_id, s.plan.flow_id)
    written = 0
    for start in range(have, total, CHUNK):
        if stop is not None and stop.is_set():
            break  # the server stops: the next one writes the rest
        rows = attempt_rows(s.plan, order=order, key=key, sim_seed=s.sim_seed, start=start, stop=start + CHUNK)
        store.add_attempts(series_id, rows)
        written += len(rows)
    return written


class AttemptFill:
    """The background writes of the series' missing rows, at most one per series at a time."""

    def __init__(self, store: SeriesStore) -> None:
        self.store = store
        self._tasks: dict[str, asyncio.Task[int]] = {}
        self._complete: set[str] = set()
        self._stop = threading.Event()

    def begin(self, series_id: str) -> asyncio.Task[int] | None:
        """Start writing what the series lacks (idempotent); None when it is known to be complete."""
        if series_id in self._complete:
            return None
        task = self._tasks.get(series_id)
        if task is None:
            task = self._tasks[series_id] = asyncio.ensure_future(self._write(series_id))
        return task

    async def ready(self, series_id: str) -> None:
        """Return once every attempt row of the series is written (written now when a dead server left some)."""
        task = self.begin(series_id)
        if task is not None:
            await asyncio.shield(task)  # one waiter's cancellation must not stop the writes the others wait for

    async def shutdown(self) -> None:
        self._stop.set()
        for task in list(self._tasks.values()):
            with contextlib.suppress(Exception):
                await task

    async def _write(self, series_id: str) -> int:
        try:
            written = await asyncio.to_thread(write_missing, self.store, series_id, self._stop)
            if not self._stop.is_set():
                self._complete.add(series_id)
            return written
        finally:
            self._tasks.pop(series_id, None)
