"""`aqven worker`s on loopback (issue 31): a real `aqven serve --cluster` process and two `aqven worker` processes on a
real PostgreSQL store (the private cluster of tests/support/postgres.py; these tests need PostgreSQL, and skip only
where AQVEN_TEST_NO_POSTGRES=1 says it cannot be had). The machines are processes on this one, on loopback; the
same on hosts of their own (network namespaces, a worker's cable pulled) is test_cluster_hosts.py.

Checked: every attempt of a series runs once (one run each, none asked of a model twice), each attempt says which
worker ran it, a SIGKILLed worker is declared lost and the attempts it held finish on the other within 30 s, and a
worker whose files are not the series' inputs refuses with WORKER_INPUTS_MISMATCH and runs nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.fault_soak import EXPERIMENT, server_env, write_project
from support.live_server import LiveServer
from support.series_kit import wait_until

pytest.importorskip("dbos")


def _rows(dsn: str, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        return list(conn.execute(sql, params).fetchall())


class Workers:
    """`aqven worker` processes, each in its own session, logging to a file of its own."""

    def __init__(self, root: Path, dsn: str, env: dict[str, str]) -> None:
        self.root, self.dsn, self.env = root, dsn, env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *, project: Path | None = None, slots: int = 4) -> subprocess.Popen[bytes]:
        log = open(self.root.parent / f"worker-{name}.log", "ab")  # noqa: SIM115 - the process holds it
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aqven",
                "worker",
                "--store",
                self.dsn,
                "--project",
                str(project or self.root),
                "--name",
                name,
                "--slots",
                str(slots),
            ],
            env=self.env,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        return (self.root.parent / f"worker-{name}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def cluster(tmp_path: Path, pg_database: str) -> Iterator[tuple[Path, dict[str, str], Workers]]:
    root = tmp_path / "project"
    write_project(root, cases=40, repeats=2, concurrency=6, simulator="seeded", sim_latency_s=0.4)
    env = server_env(
        AQVEN_SIM_LATENCY_SCALE="1",
        AQVEN_PRICES_FILE=str(tmp_path / "no-prices.json"),
        AQVEN_STORE=pg_database,
        AQVEN_CLUSTER="1",
    )
    workers = Workers(root, pg_database, env)
    try:
        yield root, env, workers
    finally:
        workers.stop_all()


def _live(dsn: str) -> list[dict[str, Any]]:
    return _rows(dsn, "SELECT * FROM workers WHERE state='live'")


def test_two_workers_run_each_attempt_once_and_a_killed_ones_finish_on_the_other(
    cluster: tuple[Path, dict[str, str], Workers], pg_database: str
) -> None:
    root, env, workers = cluster
    dsn = pg_database
    with LiveServer(root, env) as server:
        workers.start("alpha")
        workers.start("beta")
        wait_until(lambda: len(_live(dsn)) == 2, timeout=90, step=0.2)
        started = server.post("/api/series", {"experiment_id": EXPERIMENT, "on": "dev", "seed": 7, "simulate": True})
        sid = started["series"]["series_id"]
        alpha = next(w["id"] for w in _live(dsn) if w["name"] == "alpha")

        def alpha_busy() -> list[dict[str, Any]]:
            done = _rows(dsn, "SELECT COUNT(*) AS n FROM attempts WHERE series_id=%s AND status='done'", (sid,))
            held = _rows(
                dsn, "SELECT idx FROM attempts WHERE series_id=%s AND status='running' AND worker=%s", (sid, alpha)
            )
            return held if done[0]["n"] >= 10 and held else []

        try:
            held = wait_until(alpha_busy, timeout=120, step=0.05)
        except AssertionError:
            counts = _rows(
                dsn, "SELECT status, worker, COUNT(*) AS n FROM attempts WHERE series_id=%s GROUP BY 1, 2", (sid,)
            )
            raise AssertionError(
                f"alpha never held an attempt: {counts} {_live(dsn)} {workers.log('alpha')[-2000:]}"
            ) from None
        workers.procs["alpha"].send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        held_idx = [r["idx"] for r in held]

        def held_finished() -> bool:
            rows = _rows(dsn, "SELECT status FROM attempts WHERE series_id=%s AND idx = ANY(%s)", (sid, held_idx))
            return all(r["status"] == "done" for r in rows)

        wait_until(held_finished, timeout=60, step=0.1)
        took = time.monotonic() - killed_at
        assert took < 30, f"the killed worker's attempts took {took:.1f} s to finish elsewhere"

        state = server.get(f"/api/series/{sid}?wait_seconds=50")
        deadline = time.monotonic() + 180
        while state["status"] not in ("done", "failed", "cancelled") and time.monotonic() < deadline:
            state = server.get(f"/api/series/{sid}?wait_seconds=20")
        assert state["status"] == "done", (state["status"], workers.log("beta")[-3000:])
        # Visible over REST (Studio reads it): the workers, and where the series' attempts ran.
        listed = server.get("/api/workers?ended=true")
        assert listed["cluster"] is True
        assert {(w["name"], w["state"]) for w in listed["workers"]} == {("alpha", "lost"), ("beta", "live")}
        ended = server.get(f"/api/series/{sid}")
        assert {r["name"] for r in ended["ran_on"]} == {"alpha", "beta"}
        assert sum(r["attempts"] for r in ended["ran_on"]) == 80

    attempts = _rows(dsn, "SELECT idx, status, run_id, worker, outcome FROM attempts WHERE series_id=%s", (sid,))
    assert len(attempts) == 80 and all(a["status"] == "done" for a in attempts)
    assert all(a["outcome"] in ("pass", "fail") for a in attempts), [
        a for a in attempts if a["outcome"] not in ("pass", "fail")
    ]
    # Once each: one run per attempt, and each run asked its model once (a resumed run never asks again what it has).
    runs = _rows(dsn, "SELECT id, model_calls FROM runs WHERE series_id=%s", (sid,))
    assert len(runs) == 80, len(runs)
    assert {r["id"] for r in runs} == {a["run_id"] for a in attempts}
    requests = _rows(
        dsn,
        "SELECT run_id, COUNT(*) AS n FROM events WHERE kind='model_response' AND run_id IN"
        " (SELECT id FROM runs WHERE series_id=%s) GROUP BY run_id",
        (sid,),
    )
    assert all(r["n"] == 1 for r in requests), [r for r in requests if r["n"] != 1]
    # Where they ran: both workers, and the attempts alpha held when it was killed ended on beta.
    names = {w["id"]: w["name"] for w in _rows(dsn, "SELECT id, name FROM workers")}
    ran_on = {names.get(a["worker"]) for a in attempts}
    assert ran_on == {"alpha", "beta"}, ran_on
    assert all(names.get(a["worker"]) == "beta" for a in attempts if a["idx"] in held_idx)
    lost = _rows(dsn, "SELECT state FROM workers WHERE id=%s", (alpha,))
    assert lost[0]["state"] == "lost"
    listing = subprocess.run(
        [sys.executable, "-m", "aqven", "workers", "--store", dsn, "--project", str(root), "--all"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listing.returncode == 0 and "alpha" in listing.stdout and "lost" in listing.stdout, listing


def test_a_worker_on_other_files_refuses_and_runs_nothing(
    cluster: tuple[Path, dict[str, str], Workers], pg_database: str, tmp_path: Path
) -> None:
    root, env, workers = cluster
    dsn = pg_database
    other = tmp_path / "other"
    write_project(other, cases=40, repeats=2, concurrency=6, simulator="seeded", sim_latency_s=0.4)
    (other / "checks" / "right.py").write_text(
        (other / "checks" / "right.py").read_text() + "\n# an edit the series was not planned on\n"
    )
    with LiveServer(root, env) as server:
        good = workers.start("good")
        wait_until(lambda: len(_live(dsn)) == 1, timeout=90, step=0.2)
        started = server.post("/api/series", {"experiment_id": EXPERIMENT, "on": "dev", "seed": 3, "simulate": True})
        sid = started["series"]["series_id"]
        bad = workers.start("stale", project=other)
        code = bad.wait(90)
        assert code == 3, workers.log("stale")
        assert "WORKER_INPUTS_MISMATCH" in workers.log("stale")
        row = _rows(dsn, "SELECT state, error_code FROM workers WHERE name='stale'")
        assert row == [{"state": "refused", "error_code": "WORKER_INPUTS_MISMATCH"}]
        state = server.get(f"/api/series/{sid}?wait_seconds=50")
        deadline = time.monotonic() + 180
        while state["status"] not in ("done", "failed", "cancelled") and time.monotonic() < deadline:
            state = server.get(f"/api/series/{sid}?wait_seconds=20")
        assert state["status"] == "done"
        assert good.poll() is None
    stale = _rows(dsn, "SELECT id FROM workers WHERE name='stale'")[0]["id"]
    assert not _rows(dsn, "SELECT idx FROM attempts WHERE series_id=%s AND worker=%s", (sid, stale))
    assert os.environ.get("AQVEN_CLUSTER") is None


def test_the_server_killed_and_restarted_resumes_the_series_on_the_workers(
    cluster: tuple[Path, dict[str, str], Workers], pg_database: str
) -> None:
    root, env, workers = cluster
    dsn = pg_database
    server = LiveServer(root, env)
    server.start()
    try:
        workers.start("one")
        workers.start("two")
        wait_until(lambda: len(_live(dsn)) == 2, timeout=90, step=0.2)
        started = server.post("/api/series", {"experiment_id": EXPERIMENT, "on": "dev", "seed": 5, "simulate": True})
        sid = started["series"]["series_id"]

        def done() -> int:
            return int(
                _rows(dsn, "SELECT COUNT(*) AS n FROM attempts WHERE series_id=%s AND status='done'", (sid,))[0]["n"]
            )

        wait_until(lambda: done() >= 15, timeout=120, step=0.05)
        server.kill()  # mid-series: attempts are out on the workers
        at_kill = done()
        server.start()
        state = server.get(f"/api/series/{sid}?wait_seconds=50")
        deadline = time.monotonic() + 180
        while state["status"] not in ("done", "failed", "cancelled") and time.monotonic() < deadline:
            state = server.get(f"/api/series/{sid}?wait_seconds=20")
        assert state["status"] == "done", state["status"]
        assert at_kill < 80
    finally:
        server.stop()
    attempts = _rows(dsn, "SELECT status, run_id, outcome FROM attempts WHERE series_id=%s", (sid,))
    assert len(attempts) == 80 and all(a["status"] == "done" and a["outcome"] in ("pass", "fail") for a in attempts)
    runs = _rows(dsn, "SELECT id FROM runs WHERE series_id=%s", (sid,))
    assert len(runs) == 80 and {r["id"] for r in runs} == {a["run_id"] for a in attempts}
    twice = _rows(
        dsn,
        "SELECT run_id FROM events WHERE kind='model_response' AND run_id IN (SELECT id FROM runs WHERE series_id=%s)"
        " GROUP BY run_id HAVING COUNT(*) > 1",
        (sid,),
    )
    assert not twice
    assert all(w["state"] == "live" for w in _rows(dsn, "SELECT state FROM workers"))


def test_postgres_restarted_mid_series_loses_nothing_committed(tmp_path: Path, pg_cluster: Any) -> None:
    from support.postgres import create_database

    dsn = create_database(pg_cluster.dsn)
    root = tmp_path / "project"
    write_project(root, cases=40, repeats=2, concurrency=6, simulator="seeded", sim_latency_s=0.4)
    env = server_env(
        AQVEN_SIM_LATENCY_SCALE="1",
        AQVEN_PRICES_FILE=str(tmp_path / "no-prices.json"),
        AQVEN_STORE=dsn,
        AQVEN_CLUSTER="1",
    )
    workers = Workers(root, dsn, env)
    try:
        with LiveServer(root, env) as server:
            workers.start("one")
            workers.start("two")
            wait_until(lambda: len(_live(dsn)) == 2, timeout=90, step=0.2)
            body = {"experiment_id": EXPERIMENT, "on": "dev", "seed": 9, "simulate": True}
            sid = server.post("/api/series", body)["series"]["series_id"]

            def done() -> int:
                rows = _rows(dsn, "SELECT COUNT(*) AS n FROM attempts WHERE series_id=%s AND status='done'", (sid,))
                return int(rows[0]["n"])

            wait_until(lambda: done() >= 15, timeout=120, step=0.05)
            pg_cluster.restart_immediate()  # a crash of PostgreSQL: what was committed is kept
            deadline = time.monotonic() + 240
            state: dict[str, Any] = {"status": "running"}
            while state["status"] not in ("done", "failed", "cancelled") and time.monotonic() < deadline:
                with contextlib.suppress(AssertionError, OSError):
                    state = server.get(f"/api/series/{sid}?wait_seconds=20")
            assert state["status"] == "done", (state["status"], workers.log("one")[-2000:])
        attempts = _rows(
            dsn, "SELECT status, run_id, outcome, error_code, error_message FROM attempts WHERE series_id=%s", (sid,)
        )
        assert len(attempts) == 80 and all(a["status"] == "done" for a in attempts)
        # A transaction the crash cut fails, as it does in one process (docs/architecture.md, "One server per store"):
        # an attempt whose first writes (its claim and its run's creation) were in flight ends as an infrastructure
        # error, and has no run; at most one per attempt side by side. Every other attempt ran once.
        cut = [a for a in attempts if a["outcome"] == "infra"]
        assert len(cut) <= 6, cut
        lost = ("connection", "OperationalError", "AdminShutdown", "terminat")
        assert all(any(w in (a["error_message"] or "") for w in lost) for a in cut), [a["error_message"] for a in cut]
        runs = _rows(dsn, "SELECT id FROM runs WHERE series_id=%s", (sid,))
        ran = {a["run_id"] for a in attempts if a not in cut}
        assert ran <= {r["id"] for r in runs} and len(runs) <= 80
        twice = _rows(
            dsn,
            "SELECT run_id FROM events WHERE kind='model_response' AND run_id IN"
            " (SELECT id FROM runs WHERE series_id=%s) GROUP BY run_id HAVING COUNT(*) > 1",
            (sid,),
        )
        assert not twice
    finally:
        workers.stop_all()
