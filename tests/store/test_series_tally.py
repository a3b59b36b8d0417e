"""The aggregates a snapshot reads with GROUP BY equal the same figures counted row by row from the attempts.

Random series states (seeded): attempts queued, running or done with every outcome, fractional values, re-runs,
costs with many decimals, unpriced calls and finish times; the row-by-row count is the truth.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pytest

from aqven.store.db import Database
from aqven.store.schema import SCHEMA_VERSION
from aqven.store.series import SeriesStore
from aqven.store.series_records import SeriesPlan
from aqven.store.series_tally import COUNTED, finished_costs, read_tally
from aqven.store.sqlite_db import SqliteDatabase
from support.schema_versions import back_before_version_10
from support.series_rows import attempt_rows, create_series

VARIANTS = ["as_written", "other"]


def _create(store: SeriesStore, plan: SeriesPlan) -> tuple[str, list[dict[str, Any]]]:
    """A running series of `plan` with one queued attempt per case × variant × repeat (seed = index)."""
    rows = attempt_rows(plan)
    return create_series(store, plan, rows), rows


def _random_series(store: SeriesStore, rng: random.Random) -> str:
    cases = [f"case_{i:03d}" for i in range(rng.randint(1, 40))]
    repeats = rng.randint(1, 4)
    plan = SeriesPlan(
        flow_id="f",
        dataset_id="d",
        cases=cases,
        sides={c: rng.choice(["dev", "holdout"]) for c in cases},
        variants=VARIANTS,
        repeats=repeats,
    )
    sid, rows = _create(store, plan)
    with store.db.transaction() as cur:
        for a in rows:
            status = rng.choice(["queued", "running", "done", "done", "done"])
            outcome = rng.choice([*COUNTED, "infra"]) if status == "done" else None
            value = rng.choice([0.0, 1.0, 0.25, 0.5]) if outcome in COUNTED else None
            cost = None if status == "queued" and rng.random() < 0.7 else f"0.{rng.randint(0, 10**9):09d}"
            cur.execute(
                "UPDATE attempts SET status=?, outcome=?, value=?, cost_usd=?, unpriced=?, reruns=?, run_id=?,"
                " ended_at=?, active_at_end=? WHERE series_id=? AND idx=?",
                (
                    status,
                    outcome,
                    value,
                    cost,
                    int(rng.random() < 0.1),
                    int(rng.random() < 0.1),
                    None if status == "queued" else f"run_{a['idx']}",
                    f"2026-01-01T00:00:{rng.randint(0, 59):02d}.000+00:00" if status == "done" else None,
                    rng.uniform(0, 600) if status == "done" else None,
                    sid,
                    a["idx"],
                ),
            )
    return sid


@pytest.mark.parametrize("seed", range(25))
def test_tally_equals_a_count_of_the_rows(make_database: Callable[..., Database], seed: int) -> None:
    rng = random.Random(seed)
    store = SeriesStore(make_database())
    sid = _random_series(store, rng)
    since = rng.uniform(0, 600)
    tally = read_tally(store.db, sid, finished_since=since)
    rows = store.attempts(sid)

    for v in VARIANTS:
        mine = [a for a in rows if a.variant_id == v]
        done = [a for a in mine if a.status == "done"]
        counted = [a for a in done if a.outcome in COUNTED]
        t = tally.variants[v]
        assert (t.attempts, t.done, t.counted) == (len(mine), len(done), len(counted))
        assert t.running == sum(a.status == "running" for a in mine)
        assert t.queued == sum(a.status == "queued" for a in mine)
        assert t.passes == pytest.approx(sum(a.value or 0.0 for a in counted))
        assert t.model_failures == sum(a.outcome == "model_failure" for a in done)
        assert t.infra_errors == sum(a.outcome == "infra" for a in done)
        assert t.reruns == sum(a.reruns for a in mine)
        assert t.spend == sum((Decimal(a.cost_usd or "0") for a in mine), Decimal(0))  # exact, not approximately
        cells: dict[str, list[float]] = {}
        for a in counted:
            cell = cells.setdefault(a.case_name, [0.0, 0])
            cell[0] += a.value or 0.0
            cell[1] += 1
        expected: dict[str, tuple[Any, Any]] = {c: (pytest.approx(p), n) for c, (p, n) in cells.items()}
        assert expected == tally.cells.get(v, {})

    assert tally.unpriced_settled == sum(a.unpriced for a in rows if a.status != "running")
    assert [r.run_id for r in tally.running] == [a.run_id for a in rows if a.status == "running"]
    ends = sorted(a.active_at_end for a in rows if a.status == "done" and a.active_at_end is not None)
    assert tally.finish_times.count == len(ends)
    assert tally.finish_times.first == (ends[0] if ends else None)
    assert tally.finish_times.at_or_after_since == sum(t >= since for t in ends)

    finished = sorted((a.ended_at, a.cost_usd) for a in rows if a.status == "done" and a.ended_at)
    assert sorted(finished_costs(store.db, sid)) == finished
    assert [e for e, _ in finished_costs(store.db, sid)] == sorted(e for e, _ in finished)
    fails = {a.case_name: 0 for a in rows}
    for a in rows:
        if a.outcome in ("fail", "model_failure"):
            fails[a.case_name] += 1
    assert tally.fails == fails


def test_a_plan_is_parsed_once_per_series(
    make_database: Callable[..., Database], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SeriesStore(make_database())
    sid = _random_series(store, random.Random(1))
    parses = []
    real = SeriesPlan.model_validate_json

    def counted(text: str) -> SeriesPlan:
        parses.append(1)
        return real(text)

    monkeypatch.setattr(SeriesPlan, "model_validate_json", counted)
    first = store.get(sid)
    assert store.get(sid).plan is first.plan
    store.update(sid, status="done")
    assert store.get(sid).status == "done"
    assert len(parses) == 1


def _back_to_version_7(cur: Any) -> None:
    back_before_version_10(cur)
    cur.execute("DROP TRIGGER attempts_cells")
    cur.execute("DROP TABLE series_seq")
    cur.execute("DROP INDEX attempts_rate_limited")
    cur.execute("DROP TABLE series_cells")
    cur.execute("DROP TABLE series_costs")
    cur.execute("DROP INDEX attempts_ends")
    cur.execute(
        "CREATE INDEX attempts_tally ON attempts(series_id, variant_id, case_name, status, outcome, value, reruns,"
        " unpriced, active_at_end, cost_usd)"
    )
    cur.execute("DELETE FROM schema_version WHERE version>=8")


@pytest.mark.sqlite_only  # a SQLite file of an old schema; PostgreSQL stores start at the current one
def test_a_version_2_database_gains_everything_since(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    db = SqliteDatabase(path)
    with db.transaction() as cur:  # back to what a database of that release holds
        _back_to_version_7(cur)
        cur.execute("DROP INDEX attempts_tally")
        for table, column in (
            ("series", "order_seed"),
            ("series", "sim_seed"),
            ("series", "sealed_view"),
            ("attempts", "inputs_hash"),
            ("runs", "side"),
            ("series", "token_cap"),
        ):
            cur.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        cur.execute("DROP TABLE approvals")
        cur.execute("DROP INDEX attempts_run")
        cur.execute("DELETE FROM schema_version WHERE version>=3")
    db.close()
    again = SqliteDatabase(path)
    names = {r["name"] for r in again.query("SELECT name FROM sqlite_master")}
    assert {"series_cells", "series_costs", "attempts_ends", "attempts_cells", "attempts_run"} <= names
    assert "attempts_tally" not in names  # made in version 3, dropped in 8
    assert again.query_one("SELECT MAX(version) AS v FROM schema_version")["v"] == SCHEMA_VERSION  # type: ignore[index]


@pytest.mark.parametrize("seed", range(3))
def test_a_version_7_database_gets_its_series_tallies_from_its_attempts(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "db.sqlite"
    store = SeriesStore(SqliteDatabase(path))
    sid = _random_series(store, random.Random(seed))
    before = read_tally(store.db, sid, finished_since=300.0)
    with store.db.transaction() as cur:
        _back_to_version_7(cur)
    store.db.close()
    again = SqliteDatabase(path)
    after = read_tally(again, sid, finished_since=300.0)
    assert (after.variants, after.cells, after.fails, after.finish_times) == (
        before.variants,
        before.cells,
        before.fails,
        before.finish_times,
    )


def _finished_series(store: SeriesStore, cases: int, repeats: int) -> str:
    names = [f"c{i}" for i in range(cases)]
    plan = SeriesPlan(
        flow_id="f", dataset_id="d", cases=names, sides=dict.fromkeys(names, "dev"), variants=VARIANTS, repeats=repeats
    )
    sid, _ = _create(store, plan)
    with store.db.transaction() as cur:  # every attempt finished, as the runner's updates leave them
        cur.execute(
            "UPDATE attempts SET status='done', outcome='pass', value=1, cost_usd='0.001', active_at_end=idx * 0.01"
            " WHERE series_id=?",
            (sid,),
        )
    return sid


@pytest.mark.sqlite_only  # counted in SQLite's virtual machine steps
def test_a_snapshot_reads_cells_not_attempts(tmp_path: Path) -> None:
    """The tallies of 20 cases read about the same number of SQLite steps with 10 or 1,000 attempts a cell."""
    counts = []
    for repeats in (5, 500):
        store = SeriesStore(SqliteDatabase(tmp_path / f"cells{repeats}.sqlite"))
        sid = _finished_series(store, cases=20, repeats=repeats)
        steps = [0]

        def count(steps: list[int] = steps) -> int:
            steps[0] += 1
            return 0

        with store.db.reading() as conn:
            cast(Any, conn)._conn.set_progress_handler(count, 100)
        since = (40 * repeats - 5) * 0.01 - 0.001  # the last five attempts count as recent
        tally = read_tally(store.db, sid, finished_since=since)
        with store.db.reading() as conn:
            cast(Any, conn)._conn.set_progress_handler(None, 0)
        assert tally.total.done == tally.total.counted == 40 * repeats  # every attempt is in the tallies
        assert tally.total.spend == Decimal("0.001") * 40 * repeats
        assert tally.finish_times.at_or_after_since == 5
        counts.append(steps[0])
    assert counts[1] <= counts[0] + 2, counts  # 100 times the attempts, not 100 times the steps


def _steps_to_read_running(tmp_path: Path, queued: int) -> int:
    """SQLite VM steps (in hundreds) that reading a series' running attempts takes, with `queued` others."""
    store = SeriesStore(SqliteDatabase(tmp_path / f"steps{queued}.sqlite"))
    rng = random.Random(queued)
    sid = _random_series(store, rng)
    with store.db.transaction() as cur:
        cur.execute("UPDATE attempts SET status='queued' WHERE series_id=?", (sid,))
        cur.execute("UPDATE attempts SET status='running' WHERE series_id=? AND idx < 2", (sid,))
        cur.executemany(
            "INSERT INTO attempts (series_id, idx, case_name, dataset_id, side, variant_id, rep, seed)"
            " VALUES (?, ?, 'c', 'd', 'dev', 'as_written', 0, 0)",
            [(sid, 10_000 + i) for i in range(queued)],
        )
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    cast(SqliteDatabase, store.db)._conn.set_progress_handler(count, 100)
    running = store.attempts(sid, status="running")
    cast(SqliteDatabase, store.db)._conn.set_progress_handler(None, 0)
    assert [a.idx for a in running] == [0, 1]
    return steps[0]


@pytest.mark.sqlite_only  # counted in SQLite's virtual machine steps
def test_reading_the_running_attempts_does_not_walk_the_whole_series(tmp_path: Path) -> None:
    # The driver reads them after every attempt: the work must not grow with the series' queued attempts.
    small, big = _steps_to_read_running(tmp_path, 100), _steps_to_read_running(tmp_path, 20_000)
    assert big <= 2 * small + 2, (small, big)
