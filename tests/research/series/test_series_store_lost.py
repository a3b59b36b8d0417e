"""PostgreSQL lost under an attempt's transaction: the attempt runs on, it does not end as an infrastructure error.

A PostgreSQL restart (or a network cut) ends the connections it had; the transaction in flight on one is lost.
Found at a transaction's BEGIN, nothing of it ran and it runs again on a new connection (tests/store/
test_postgres_restart.py). Found inside one, the writes of a whole group fail: before this, the attempts whose
writes were in it ended as infrastructure errors (`bench/soak/cluster_hosts.py` saw one after a `pg_ctl restart -m
immediate`), and the series' verdict moved. Now an attempt whose transaction the store lost runs on from what is on
record (`research/series/attempt.py` `run_owned`, `Database.is_lost`), as after a restart of the server.

Here the connection is ended for real, by `pg_terminate_backend` from another session, in the middle of the group
that writes an attempt's start (its claim, its run's creation) and, later, of the one that writes another's end.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from aqven.store.db import Database
from aqven.store.runs import RunStore
from aqven.store.series import SeriesStore
from support.series_kit import attempts, case_names, client_for, runs_of, settle, start, tiny_environment, write_tiny

pytestmark = pytest.mark.postgres_only


@pytest.fixture
def tiny_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return tiny_environment(monkeypatch, tmp_path)


def _cut(db: Database) -> None:
    """End the writer connection's backend, as a crash of PostgreSQL ends it (the store finds out at its next
    answer)."""
    conn = db._conn  # type: ignore[attr-defined]  # the PostgreSQL backend's writer connection
    with psycopg.connect(db.dsn, autocommit=True) as other:  # type: ignore[attr-defined]
        other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))


def _cutting(make: Callable[..., Callable[[], Any]], db: Callable[[Any], Database], cuts: list[str], case: str) -> Any:
    """`make` (a store's write maker), whose write for `case`'s attempt first ends the connection, once."""

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Callable[[], Any]:
        write = make(self, *args, **kwargs)
        if case in cuts:
            return write

        def cut_then_write() -> Any:
            if case not in cuts and _is_for(self, args, kwargs, case):
                cuts.append(case)
                _cut(db(self))
            return write()

        return cut_then_write

    return wrapped


def _is_for(store: Any, args: tuple[Any, ...], kwargs: dict[str, Any], case: str) -> bool:
    if isinstance(store, RunStore):  # creating(request, run_id, ...)
        return bool(args[0].case_name == case)
    series_id, idx = args[0], args[1]  # finishing_attempt(series_id, idx, ...)
    return bool(store.attempt(series_id, idx).case_name == case)


def test_an_attempt_whose_transaction_the_store_lost_runs_on_and_counts(
    tiny_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = case_names(12, 0)
    started_lost, ended_lost = names[3], names[8]
    cuts: list[str] = []
    monkeypatch.setattr(
        RunStore, "creating", _cutting(RunStore.creating, lambda s: s.db, cuts, started_lost), raising=True
    )
    monkeypatch.setattr(
        SeriesStore,
        "finishing_attempt",
        _cutting(SeriesStore.finishing_attempt, lambda s: s.db, cuts, ended_lost),
        raising=True,
    )
    root = write_tiny(tmp_path / "tiny", names)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        snap = settle(client, sid)
    assert sorted(cuts) == sorted([started_lost, ended_lost])  # both connections were ended mid-transaction
    assert snap["status"] == "done"
    assert snap["progress"]["infra_errors"] == 0 and snap["progress"]["counted"] == len(names)
    rows = attempts(root, sid)
    assert all(a["status"] == "done" and a["outcome"] != "infra" for a in rows), [dict(a) for a in rows]
    # Each attempt's end names a run that is on record and ended; the attempt whose end was lost kept its run.
    runs = {r["id"]: r for r in runs_of(root, sid)}
    for a in rows:
        assert runs[a["run_id"]]["status"] == "done", dict(a)
