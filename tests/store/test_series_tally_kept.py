"""A tally kept in memory and updated from the changed cells only equals a full read, to the last bit.

Random series (seeded) go through random histories — attempts start, finish with every outcome and fractional
values, fail as infrastructure errors, are re-run, record costs with many decimals and unpriced calls — while one
KeptTally reads after every few steps; after each read it must equal a fresh read of every cell (floats compared
exactly, money compared as its text), and the fresh read must equal a count of the attempt rows.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from aqven.store.db import Database
from aqven.store.schema import MIGRATIONS as _MIGRATIONS
from aqven.store.schema import SCHEMA_VERSION
from aqven.store.schema import sqlite_statements as _statements
from aqven.store.series import SeriesStore
from aqven.store.series_records import SeriesPlan
from aqven.store.series_tally import COUNTED, KeptTally, SeriesTally, TallyCache, read_tally
from aqven.store.sqlite_db import SqliteDatabase
from support.schema_versions import back_before_version_10
from support.series_rows import attempt_rows, create_series

VARIANTS = ["as_written", "other"]
VALUES = [0.0, 1.0, 0.1, 0.7, 1 / 3, 0.2, 0.25]


def _series(store: SeriesStore, rng: random.Random) -> tuple[str, list[dict[str, Any]]]:
    cases = [f"case_{i:03d}" for i in range(rng.randint(1, 12))]
    plan = SeriesPlan(
        flow_id="f",
        dataset_id="d",
        cases=cases,
        sides={c: rng.choice(["dev", "holdout"]) for c in cases},
        variants=VARIANTS,
        repeats=rng.randint(1, 4),
    )
    rows = attempt_rows(plan)
    return create_series(store, plan, rows), rows


def _step(store: SeriesStore, sid: str, n: int, rng: random.Random, clock: list[float]) -> None:
    """One attempt moves on: queued -> running -> done (any outcome), a done one is re-run, a value changes.
    Costs with many decimals are rare, so a spend's exponent moves as the costs with 4 decimals come and go."""
    seed_costs = rng.random() < 0.02
    idx = rng.randrange(n)
    a = store.attempt(sid, idx)
    with store.db.transaction() as cur:
        if a.status == "queued":
            cost = rng.choice(["0.001", "0.00100"]) if rng.random() < 0.3 else a.cost_usd  # an earlier try's
            cur.execute(
                "UPDATE attempts SET status='running', run_id=?, cost_usd=? WHERE series_id=? AND idx=?",
                (f"run_{idx}_{a.reruns}", cost, sid, idx),
            )
        elif a.status == "running":
            outcome = rng.choice([*COUNTED, "infra"])
            clock[0] += rng.uniform(0, 20)
            cur.execute(
                "UPDATE attempts SET status='done', outcome=?, value=?, cost_usd=?, unpriced=?, active_at_end=?"
                " WHERE series_id=? AND idx=?",
                (
                    outcome,
                    rng.choice(VALUES) if outcome in COUNTED else None,
                    rng.choice(
                        [None, "0", "0.01", "0.0100", "0.5", f"0.{rng.randint(0, 10**9):09d}" if seed_costs else "1"]
                    ),
                    int(rng.random() < 0.15),
                    clock[0],
                    sid,
                    idx,
                ),
            )
        elif rng.random() < 0.5:  # re-run: back to the queue, its cost kept
            cur.execute(
                "UPDATE attempts SET status='queued', outcome=NULL, value=NULL, active_at_end=NULL,"
                " reruns=reruns+1 WHERE series_id=? AND idx=?",
                (sid, idx),
            )
        elif a.outcome in COUNTED:
            cur.execute("UPDATE attempts SET value=? WHERE series_id=? AND idx=?", (rng.choice(VALUES), sid, idx))


def _plain(t: SeriesTally) -> dict[str, Any]:
    """Everything a tally holds, with money as its text (Decimal('0.010') == Decimal('0.01'), but it shows)."""
    out = asdict(t)
    for name, v in t.variants.items():
        out["variants"][name]["spend"] = str(v.spend)
    return out


def _rows_count(store: SeriesStore, sid: str, tally: SeriesTally) -> None:
    rows = store.attempts(sid)
    for v in VARIANTS:
        mine = [a for a in rows if a.variant_id == v]
        counted = [a for a in mine if a.status == "done" and a.outcome in COUNTED]
        t = tally.variants[v]
        assert (t.attempts, t.counted, t.running, t.queued) == (
            len(mine),
            len(counted),
            sum(a.status == "running" for a in mine),
            sum(a.status == "queued" for a in mine),
        )
        assert t.passes == pytest.approx(sum(a.value or 0.0 for a in counted))
        assert str(t.spend) == str(sum((Decimal(a.cost_usd or 0) for a in mine), Decimal(0)))  # "0.5", not "0.5000"
        cases = {a.case_name for a in counted}
        assert set(tally.cells.get(v, {})) == cases
        for c in cases:
            mine_c = [a for a in counted if a.case_name == c]
            assert tally.cells[v][c][1] == len(mine_c)
            assert tally.cells[v][c][0] == pytest.approx(sum(a.value or 0.0 for a in mine_c))
        failed = {a.case_name for a in mine if a.status == "done" and a.outcome == "model_failure"}
        assert set(tally.model_failed.get(v, {})) == failed


@pytest.mark.parametrize("seed", range(12))
def test_a_kept_tally_equals_a_full_read_after_every_change(make_database: Callable[..., Database], seed: int) -> None:
    rng = random.Random(seed)
    store = SeriesStore(make_database())
    sid, rows = _series(store, rng)
    other, _ = _series(store, random.Random(seed + 100))  # another series' changes must not reach this one
    kept, kept_dev = KeptTally(sid), KeptTally(sid, side="dev")
    clock = [0.0]
    for _ in range(40):
        for _ in range(rng.randint(0, 12)):
            _step(store, sid, len(rows), rng, clock)
            if rng.random() < 0.3:
                _step(store, other, 1, rng, [0.0])
        since = rng.uniform(0, clock[0] + 1)
        full = read_tally(store.db, sid, finished_since=since)
        assert _plain(kept.read(store.db, finished_since=since)) == _plain(full)
        assert _plain(kept_dev.read(store.db)) == _plain(read_tally(store.db, sid, side="dev"))
        _rows_count(store, sid, full)
    assert kept.seq > 0


def test_the_cache_reads_only_what_changed(
    make_database: Callable[..., Database], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first read, a read fetches the cells one attempt changed, not every cell of the series."""
    store = SeriesStore(make_database())
    sid, _ = _series(store, random.Random(3))
    cache = TallyCache()
    cache.read(store.db, sid)
    fetched: list[int] = []
    real = KeptTally._apply

    def counting(self: KeptTally, cells: list[tuple[Any, ...]], costs: list[tuple[Any, ...]]) -> None:
        fetched.append(len(cells))
        real(self, cells, costs)

    monkeypatch.setattr(KeptTally, "_apply", counting)
    cache.read(store.db, sid)
    _step(store, sid, 1, random.Random(0), [0.0])  # attempt 0 starts: its queued cell and its running cell
    after = cache.read(store.db, sid)
    assert fetched[0] == 0
    assert fetched[1] == 2
    assert after.total.running == 1


def _back_to_version_8(db: Database) -> None:
    """The database as version 8 left it: no change sequence, the trigger without it."""
    trigger = next(s for s in _statements(_MIGRATIONS[8]) if "CREATE TRIGGER" in s)
    with db.transaction() as cur:
        back_before_version_10(cur)
        cur.execute("DROP TRIGGER attempts_cells")
        for name in ("series_cells_seq", "series_costs_seq", "attempts_rate_limited"):
            cur.execute(f"DROP INDEX {name}")
        cur.execute("ALTER TABLE series_cells DROP COLUMN seq")
        cur.execute("ALTER TABLE series_costs DROP COLUMN seq")
        cur.execute("DROP TABLE series_seq")
        cur.execute(trigger)
        cur.execute("DELETE FROM schema_version WHERE version>=9")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.sqlite_only  # a SQLite file of an old schema; PostgreSQL stores start at the current one
def test_a_version_8_database_gets_its_change_sequence(tmp_path: Path, seed: int) -> None:
    """After the migration the tallies count the rows, and a kept tally follows the changes made since."""
    rng = random.Random(seed)
    path = tmp_path / "db.sqlite"
    store = SeriesStore(SqliteDatabase(path))
    sid, rows = _series(store, rng)
    clock = [0.0]
    for _ in range(30):
        _step(store, sid, len(rows), rng, clock)
    _back_to_version_8(store.db)
    for _ in range(30):  # changes made by a version 8 server: no seq, and the migration must not need one
        _step(store, sid, len(rows), rng, clock)
    store.db.close()
    again = SeriesStore(SqliteDatabase(path))
    assert again.db.query_one("SELECT MAX(version) AS v FROM schema_version")["v"] == SCHEMA_VERSION  # type: ignore[index]
    _rows_count(again, sid, read_tally(again.db, sid))
    kept = KeptTally(sid)
    kept.read(again.db)
    for _ in range(30):
        _step(again, sid, len(rows), rng, clock)
        assert _plain(kept.read(again.db, finished_since=5.0)) == _plain(read_tally(again.db, sid, finished_since=5.0))


def test_the_eta_window_count_comes_from_kept_finish_counts_once_a_read_is_old_enough(
    make_database: Callable[..., Database], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attempts finish over 900 s of active time, read every 0.7 s: once a kept finish count is older than the
    window's start, the count since it is a subtraction (the store's COUNT is never asked: it is broken here), and
    it counts at least what finished since, and at most the few that finished in the second before as well."""
    from aqven.store import series_tally

    rng = random.Random(5)
    store = SeriesStore(make_database())
    cases = [f"case_{i:04d}" for i in range(1500)]
    plan = SeriesPlan(
        flow_id="f", dataset_id="d", cases=cases, sides=dict.fromkeys(cases, "dev"), variants=["v"], repeats=1
    )
    rows = attempt_rows(plan)
    sid = create_series(store, plan, rows)
    kept = KeptTally(sid)
    window, clock, idx, checked = 300.0, 0.0, 0, 0
    ends: list[float] = []
    while clock < 900.0:
        clock += 0.7
        with store.db.transaction() as cur:
            for _ in range(rng.randint(0, 3)):
                if idx < len(rows):
                    at = clock - rng.uniform(0, 0.7)
                    cur.execute(
                        "UPDATE attempts SET status='done', outcome='pass', value=1.0, active_at_end=?"
                        " WHERE series_id=? AND idx=?",
                        (at, sid, idx),
                    )
                    ends.append(at)
                    idx += 1
        since = clock - window
        if clock > window + 5.0 and not checked:
            monkeypatch.setattr(series_tally, "_RECENT", "SELECT no_such_column FROM attempts WHERE series_id=?")
        got = kept.read(store.db, finished_since=since, now=clock).finish_times.at_or_after_since
        exact = sum(t >= since for t in ends)
        if clock > window:  # a kept count at or before the window's start: the subtraction
            checked += 1
            assert exact <= got <= exact + sum(since - 2.0 <= t < since for t in ends), clock
        else:  # none yet: the store's count, exact
            assert got == exact
    assert checked > 500
