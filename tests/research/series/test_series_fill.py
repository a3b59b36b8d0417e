"""A series' attempt rows written in bulk: its first rows with the series, the rest in chunks after the start
answered (research/series/fill.py). The rows are the ones the attempt plan lists, however they are written;
nothing acts on a series before they are all there; a series a dead server left half-written is completed by
the next one; and a start reads the project files no second time."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from aqven.research.series import fill, start
from aqven.research.series.order import attempt_plan, attempt_seed, case_order, seed_key
from aqven.research.series.start import SeriesStartBody, prepare_series
from aqven.server.service import ProjectService
from aqven.store.series import SeriesStore
from aqven.store.series_records import SeriesPlan
from aqven.store.sqlite_db import SqliteDatabase
from support.series_kit import case_names, write_tiny
from support.series_rows import create_series

ROW_FIELDS = ("idx", "case_name", "dataset_id", "side", "variant_id", "rep", "seed", "status")


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """7 rows with the series, then chunks of 5: every size of series in these tests is written in pieces."""
    monkeypatch.setattr(fill, "FIRST_ROWS", 7)
    monkeypatch.setattr(start, "FIRST_ROWS", 7)
    monkeypatch.setattr(fill, "CHUNK", 5)


def _plan(cases: int = 9, variants: tuple[str, ...] = ("a", "b"), repeats: int = 3) -> SeriesPlan:
    names = [f"case_{i:02d}" for i in range(cases)]
    return SeriesPlan(
        flow_id="f",
        dataset_id="d",
        cases=names,
        sides={n: ("dev" if i % 3 else "holdout") for i, n in enumerate(names)},
        variants=list(variants),
        repeats=repeats,
    )


def _expected(plan: SeriesPlan, *, order_seed: int, sim_seed: int, experiment_id: str | None) -> list[dict[str, Any]]:
    """The rows as the start wrote them all at once before (attempt_plan), queued."""
    key = seed_key(experiment_id, plan.flow_id)
    rows = attempt_plan(
        plan.cases,
        order_seed=order_seed,
        repeats=plan.repeats,
        variants=plan.variants,
        seed_of=lambda case, rep: attempt_seed(key, case, rep, sim_seed),
    )
    return [{**r, "dataset_id": plan.dataset_id, "side": plan.sides[r["case_name"]], "status": "queued"} for r in rows]


def _create(store: SeriesStore, plan: SeriesPlan, *, order_seed: int, sim_seed: int) -> str:
    """A series as its start leaves it: the first rows and the whole series' queued tallies."""
    first = fill.attempt_rows(
        plan,
        order=case_order(plan.cases, order_seed),
        key=seed_key("e", plan.flow_id),
        sim_seed=sim_seed,
        start=0,
        stop=fill.FIRST_ROWS,
    )
    return create_series(store, plan, first, order_seed=order_seed, sim_seed=sim_seed, cells=fill.queued_cells(plan))


def _rows(store: SeriesStore, sid: str) -> list[dict[str, Any]]:
    return [{k: getattr(a, k) for k in ROW_FIELDS} for a in store.attempts(sid)]


def _cells_match_rows(store: SeriesStore, sid: str) -> bool:
    kept = store.db.query(
        "SELECT side, variant_id, case_name, status, n FROM series_cells WHERE series_id=? AND n != 0"
        " ORDER BY 1, 2, 3, 4",
        (sid,),
    )
    counted = store.db.query(
        "SELECT side, variant_id, case_name, status, COUNT(*) AS n FROM attempts WHERE series_id=?"
        " GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
        (sid,),
    )
    return [tuple(r) for r in kept] == [tuple(r) for r in counted]


@pytest.mark.parametrize(("cases", "variants", "repeats"), [(9, ("a", "b"), 3), (1, ("a",), 1), (4, ("a",), 2)])
def test_rows_written_in_chunks_are_the_rows_of_the_attempt_plan(
    small_chunks: None, tmp_path: Path, cases: int, variants: tuple[str, ...], repeats: int
) -> None:
    store = SeriesStore(SqliteDatabase(tmp_path / "db.sqlite"))
    plan = _plan(cases, variants, repeats)
    sid = _create(store, plan, order_seed=11, sim_seed=22)
    assert store.attempt_count(sid) == min(7, fill.total_attempts(plan))
    written = fill.write_missing(store, sid)
    assert written == max(0, fill.total_attempts(plan) - 7)
    assert _rows(store, sid) == _expected(plan, order_seed=11, sim_seed=22, experiment_id="e")
    assert _cells_match_rows(store, sid)
    assert fill.write_missing(store, sid) == 0  # complete: nothing more


def test_a_fill_stopped_half_way_is_completed_the_same_way(small_chunks: None, tmp_path: Path) -> None:
    store = SeriesStore(SqliteDatabase(tmp_path / "db.sqlite"))
    plan = _plan()
    sid = _create(store, plan, order_seed=5, sim_seed=6)

    class StopAfterTwoChunks(threading.Event):
        checks = 0

        def is_set(self) -> bool:
            self.checks += 1
            return self.checks > 2

    assert fill.write_missing(store, sid, StopAfterTwoChunks()) == 10  # as a server stopping mid-way leaves it
    assert store.attempt_count(sid) == 17
    assert fill.write_missing(SeriesStore(SqliteDatabase(tmp_path / "db.sqlite")), sid) == 54 - 17
    assert _rows(store, sid) == _expected(plan, order_seed=5, sim_seed=6, experiment_id="e")


def test_a_series_created_with_all_its_rows_is_left_alone(tmp_path: Path) -> None:
    """A series written in one go (no seeds: an older one, or a test's) is never added to."""
    store = SeriesStore(SqliteDatabase(tmp_path / "db.sqlite"))
    plan = _plan(cases=2, variants=("a",), repeats=1)
    rows = [
        {"idx": 0, "case_name": "case_00", "dataset_id": "d", "side": "holdout", "variant_id": "a", "rep": 0, "seed": 1}
    ]
    sid = create_series(store, plan, rows, kind="look", experiment_id=None, on="any", project_cap_usd="1")
    assert fill.write_missing(store, sid) == 0 and store.attempt_count(sid) == 1


def _service_start(svc: ProjectService, **body: Any) -> str:
    async def go() -> str:
        out = await svc.series.start(
            SeriesStartBody.model_validate({"experiment_id": "rate", "simulate": True, **body})
        )
        return str(out["series"]["series_id"])

    return asyncio.run(go())


def test_a_series_runs_every_planned_attempt_once_when_its_rows_come_in_chunks(
    tiny_env: Path, small_chunks: None, tmp_path: Path
) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(6, 2))

    async def go() -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
        svc = ProjectService(root)
        out = await svc.series.start(
            SeriesStartBody.model_validate({"experiment_id": "rate", "simulate": True, "repeats": 4})
        )
        sid = str(out["series"]["series_id"])
        assert out["series"]["progress"]["attempts"] == 24  # the tallies are whole at once
        snap = await svc.series.get(sid, wait_seconds=30)
        while snap["status"] == "running":
            snap = await svc.series.get(sid, wait_seconds=30)
        s = svc.series.store.get(sid)
        assert s.order_seed is not None and s.sim_seed is not None
        expected = _expected(s.plan, order_seed=s.order_seed, sim_seed=s.sim_seed, experiment_id="rate")
        rows = _rows(svc.series.store, sid)
        assert _cells_match_rows(svc.series.store, sid)
        await svc.shutdown()
        return sid, [{**r, "status": "done"} for r in expected], {"rows": rows, "snap": snap}

    _sid, expected, got = asyncio.run(go())
    assert got["snap"]["status"] == "done" and got["snap"]["progress"]["done"] == 24
    assert got["rows"] == expected


def _answered_start(svc: ProjectService) -> str:
    """What POST /api/series writes before it answers (24 attempts of `rate`, the first rows only), with no driver."""
    fields = prepare_series(
        svc.workspace(),
        svc.engine(),
        SeriesStartBody.model_validate({"experiment_id": "rate", "simulate": True, "repeats": 4}),
    )
    sid, _ = svc.series.store.create(**fields)
    return sid


def test_a_dead_servers_half_written_series_is_completed_and_run_by_the_next_one(
    tiny_env: Path, small_chunks: None, tmp_path: Path
) -> None:
    """The start answered with 7 of 24 rows written, and the server died: the next one writes the rest before
    its driver starts anything, and runs each attempt once."""
    root = write_tiny(tmp_path / "tiny", case_names(6, 2))
    dead = ProjectService(root)
    sid = _answered_start(dead)
    assert dead.series.store.attempt_count(sid) == 7
    dead.db.close()

    async def go() -> dict[str, Any]:
        svc = ProjectService(root)
        svc.resume_interrupted()
        snap = await svc.series.get(sid, wait_seconds=30)
        while snap["status"] == "running":
            snap = await svc.series.get(sid, wait_seconds=30)
        runs = svc.db.query("SELECT COUNT(*) AS n FROM runs WHERE series_id=?", (sid,))[0]["n"]
        done = [a for a in svc.series.store.attempts(sid) if a.status == "done" and a.run_id]
        await svc.shutdown()
        return {"snap": snap, "runs": runs, "done": len(done)}

    got = asyncio.run(go())
    assert got["snap"]["status"] == "done" and got["snap"]["progress"]["done"] == 24
    assert got["runs"] == 24 and got["done"] == 24


def test_cancel_waits_for_the_rows_and_nothing_starts(tiny_env: Path, small_chunks: None, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(6, 2))
    svc = ProjectService(root)
    sid = _answered_start(svc)  # no driver: a start that answered, its rows still coming

    async def go() -> dict[str, Any]:
        snap = await svc.series.cancel(sid, "changed my mind")
        while snap["status"] == "cancelled" and svc.series.store.get(sid).ended_at is None:
            snap = await svc.series.get(sid, wait_seconds=1)
        count = svc.series.store.attempt_count(sid)
        statuses = {a.status for a in svc.series.store.attempts(sid)}
        await svc.shutdown()
        return {"snap": snap, "count": count, "statuses": statuses}

    got = asyncio.run(go())
    assert got["count"] == 24 and got["statuses"] == {"queued"}
    assert got["snap"]["status"] == "cancelled" and got["snap"]["progress"]["done"] == 0


def test_a_start_reads_the_project_files_no_second_time(
    tiny_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loaded workspace is checked once (its experiments' cases against their subjects' input types), not
    loaded from disk again per start; the series still refuses to start on a project with errors."""
    from aqven.engine import check
    from aqven.project import loader
    from aqven.research.diagnostics import workspace as diagnostics
    from aqven.research.diagnostics.experiments import check_experiment as real_check
    from aqven.research.experiments import workspace as ws_module

    loads: list[Path] = []
    experiment_checks: list[str] = []
    real_load = loader.load_project

    def counted_load(root: Path) -> Any:
        loads.append(root)
        return real_load(root)

    def counted_check(project: Any, exp: Any, experiments: Any) -> Any:
        experiment_checks.append(exp.id)
        return real_check(project, exp, experiments)

    monkeypatch.setattr(ws_module, "load_project", counted_load)
    monkeypatch.setattr(check, "load_project", counted_load)
    monkeypatch.setattr(diagnostics, "check_experiment", counted_check)
    root = write_tiny(tmp_path / "tiny", case_names(6, 2))
    svc = ProjectService(root)
    for _ in range(3):
        _service_start(svc)
    assert len(loads) == 1  # the workspace itself
    assert sorted(experiment_checks) == sorted(svc.workspace().experiments)  # once each, for all three starts
    asyncio.run(svc.shutdown())
