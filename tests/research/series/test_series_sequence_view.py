"""A stop_early series' finished prefix, from its tally and its case order, equals the prefix read attempt by attempt.

Random series (seeded) laid out case block by case block in a shuffled order, with attempts queued, running, done,
done after a rate limit (to run again at the end) and re-run after one; the truth walks every attempt row in index
order, as `sequence_view` did before it read the tally.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from aqven.models.outcomes import PROVIDER_RATE_LIMITED
from aqven.research.series.early import sequence_view
from aqven.store.series import SeriesStore
from aqven.store.series_records import SeriesPlan
from aqven.store.series_tally import _RATE_LIMITED, TallyCache, read_tally
from aqven.store.sqlite_db import SqliteDatabase
from support.series_rows import attempt_rows, create_series


def _by_rows(store: SeriesStore, series_id: str) -> tuple[str, ...]:
    """The prefix as the attempt rows give it: cases in index order, up to the first with an open attempt."""
    order: list[str] = []
    open_cases: set[str] = set()
    for a in store.attempts(series_id):
        if not order or order[-1] != a.case_name:
            order.append(a.case_name)
        if a.status != "done" or (a.error_code == PROVIDER_RATE_LIMITED and a.reruns == 0):
            open_cases.add(a.case_name)
    prefix: list[str] = []
    for name in order:
        if name in open_cases:
            break
        prefix.append(name)
    return tuple(prefix)


def _series(store: SeriesStore, rng: random.Random) -> tuple[str, int]:
    cases = [f"c{i:02d}" for i in range(rng.randint(2, 15))]
    plan = SeriesPlan(
        flow_id="f",
        dataset_id="d",
        cases=cases,
        sides=dict.fromkeys(cases, "dev"),
        variants=["a", "b"],
        repeats=rng.randint(1, 3),
        stop_early=True,
    )
    order = list(cases)
    rng.shuffle(order)
    rows = attempt_rows(plan, order)
    return create_series(store, plan, rows), len(rows)


@pytest.mark.parametrize("seed", range(10))
def test_the_prefix_from_the_tally_equals_the_prefix_from_the_rows(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    store = SeriesStore(SqliteDatabase(tmp_path / "db.sqlite"))
    sid, _ = _series(store, rng)
    cache = TallyCache()
    seen_open_by_rate_limit = False
    for _ in range(60):
        # The run moves forward mostly in index order, as the scheduler starts the lowest queued index first.
        for _ in range(rng.randint(1, 4)):
            # One of the first few attempts not finished yet (or finished after a rate limit, to run again).
            moving = [a for a in store.attempts(sid) if a.status != "done" or a.error_code == PROVIDER_RATE_LIMITED]
            if not moving:
                break
            a = rng.choice(moving[:4])
            idx = a.idx
            limited = rng.random() < 0.15
            with store.db.transaction() as cur:
                if a.status == "queued":
                    cur.execute("UPDATE attempts SET status='running' WHERE series_id=? AND idx=?", (sid, idx))
                elif a.status == "running":
                    cur.execute(
                        "UPDATE attempts SET status='done', outcome=?, error_code=?, value=?, active_at_end=1"
                        " WHERE series_id=? AND idx=?",
                        ("infra" if limited else "pass", PROVIDER_RATE_LIMITED if limited else None, 1.0, sid, idx),
                    )
                elif a.error_code == PROVIDER_RATE_LIMITED and a.reruns == 0 and rng.random() < 0.1:
                    cur.execute(  # its run again: queued once more, as requeue_for_rerun leaves it
                        "UPDATE attempts SET status='queued', outcome=NULL, error_code=NULL, reruns=1"
                        " WHERE series_id=? AND idx=?",
                        (sid, idx),
                    )
        s = store.get(sid)
        truth = _by_rows(store, sid)
        assert sequence_view(store, s).prefix == truth
        kept = cache.read(store.db, sid)
        assert sequence_view(store, s, kept).prefix == truth
        seen_open_by_rate_limit |= bool(read_tally(store.db, sid).rate_limited - read_tally(store.db, sid).pending)
    assert seen_open_by_rate_limit  # a case was held open by a rate limit alone at least once


def test_the_rate_limited_read_goes_along_its_index(tmp_path: Path) -> None:
    """The finished rate-limited attempts are found along the partial index, not by a walk of every attempt."""
    store = SeriesStore(SqliteDatabase(tmp_path / "db.sqlite"))
    sid, _ = _series(store, random.Random(1))
    plan = store.db.query("EXPLAIN QUERY PLAN " + _RATE_LIMITED, (sid,))
    assert any("attempts_rate_limited" in r["detail"] for r in plan), [r["detail"] for r in plan]
    assert f"error_code='{PROVIDER_RATE_LIMITED}'" in _RATE_LIMITED  # the literal the index and the query share
