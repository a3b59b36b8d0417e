"""Kill soak: SIGKILL the project server at random moments of a series, restart it, and check the books.

The project is the reliability project of bench/soak/soak_faults.py on simulated models: one llm node whose
simulator answers right with probability 0.9 drawn from the attempt's seed, after a short latency, so an
attempt's outcome depends only on its seed. A series runs on a real `python -m aqven serve` process; at
`--kills` random moments (uniform in [--min-gap, --max-gap] seconds after the server is up) the server gets
SIGKILL and is started again, until the series is done. Then:

* no finished attempt lost: every attempt seen done (read from the database just before a kill) is
  still done at the end with the same run, outcome, value and cost;
* none counted twice: every attempt is done with exactly one run that counted (its `run_id`, ended), and
  the series has at most 1 + reruns runs per attempt (runs are matched to attempts by case and seed);
* spend: the sum of the attempts' costs is within one attempt's reserve (the most one attempt cost) of
  the sum of the costs of the series' runs; above the uninterrupted series' spend by at most
  kills × concurrency × reserve (a model call that finished and was paid just before a kill, but whose node
  had not ended, is made again on restart and paid again — that is real spend);
* the verdict (verdict, reason, estimate and interval) and every attempt's outcome and value equal those of an
  uninterrupted series with the same seeds, run in-process first on a copy of the project.

    .venv/bin/python bench/soak/soak_kill.py [--kills 20] [--cases 150] [--repeats 2] [--seed 11]

With `--workers N` (N ≥ 2) the project runs its attempts in N worker processes of the server, and every other
kill SIGKILLs one of those workers instead of the server (picked at random; the server goes on and resumes its
attempts in a fresh worker). After each kill of the server, no worker of it may outlive it by more than a moment:
one that does is reported (`outlived`). The uninterrupted series runs in-process without workers, so the
comparison is also one of workers against none.

On PostgreSQL (`--store postgres`: a private durable cluster the soak starts, fsync on; or `--store
postgresql://USER@HOST:PORT/DB`, a server where USER may create databases, with `--pg-ctl-data DIR` its data
directory to restart it) both series run in fresh databases of their own (AQVEN_STORE), and besides the SIGKILLs
of the server PostgreSQL itself is crashed and restarted `--pg-restarts` times (default 2) mid-series with
`pg_ctl restart -m immediate`, the AQVEN server left running (once after the last kill, so that the server has
to finish the series by itself; the others before random kills): the soak then waits for the series to move on by
itself (a transaction in flight fails; the store reconnects on its next use). A server that does not is reported
with the end of its log, killed and started again, and the soak fails.

Bounded: `--limit` seconds (default 300) for the whole soak. `tests/server/reliability/test_reliability_kill.py`
runs short ones.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from support.fault_soak import EXPERIMENT, HttpError, LiveServer, server_env, write_project

ENDED = ("done", "failed", "cancelled")
WORKER_MODULE = "aqven.research.series.worker"


def worker_pids(server_pid: int) -> list[int]:
    """The worker processes of a server (Linux /proc: children of it running the worker module)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == server_pid and WORKER_MODULE in cmdline:
            found.append(int(entry.name))
    return sorted(found)


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


def db_rows(root: Path, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Rows from the project database, read by a separate connection (as a crash observer would)."""
    from aqven.store.open import project_database

    db = project_database(root)
    try:
        with db.reading() as conn:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
    finally:
        db.close()


Rows = Callable[..., list[dict[str, Any]]]


def pg_rows(dsn: str, wait_s: float = 60.0) -> Rows:
    """`db_rows` for a PostgreSQL store: a connection per read (a restart of PostgreSQL between two reads is waited
    out for up to `wait_s`)."""
    import psycopg
    from psycopg.rows import dict_row

    from aqven.store.postgres_db import to_postgres

    def rows(sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                with psycopg.connect(dsn, autocommit=True, row_factory=dict_row, connect_timeout=10) as con:
                    return [dict(r) for r in con.execute(to_postgres(sql), params).fetchall()]
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    return rows


@dataclass
class PgStores:
    """A soak on PostgreSQL: the databases of the killed and of the uninterrupted series, and a crash and restart of
    their server (`pg_ctl restart -m immediate`)."""

    killed_dsn: str
    baseline_dsn: str
    restart: Callable[[], None]
    where: str
    log: Path | None = None  # PostgreSQL's server log, where readable


async def baseline(root: Path, *, seed: int, limit_s: float, simulate: bool = True) -> dict[str, Any]:
    """The same series, uninterrupted, in-process (same experiment, cases, repeats and seed); `simulate` off for a
    project whose agents call a (fake) provider."""
    from aqven.research.series.start import SeriesStartBody
    from aqven.server.service import ProjectService

    svc = ProjectService(root)
    try:
        out = await svc.series.start(
            SeriesStartBody.model_validate(
                {"experiment_id": EXPERIMENT, "on": "dev", "simulate": simulate, "seed": seed}
            )
        )
        sid = out["series"]["series_id"]
        deadline = time.monotonic() + limit_s
        state = await svc.series.get(sid, wait_seconds=20)
        while state["status"] not in ENDED:
            if time.monotonic() > deadline:
                raise TimeoutError("the baseline series did not finish in time")
            state = await svc.series.get(sid, wait_seconds=20)
        # By case, repeat and variant: each series runs its cases in its own drawn order, so indexes differ.
        attempts = {(a.case_name, a.rep, a.variant_id): a for a in svc.series.store.attempts(sid)}
        return {
            "series_id": sid,
            "state": state,
            "attempts": {k: (a.seed, a.outcome, a.value, a.cost_usd) for k, a in attempts.items()},
        }
    finally:
        await svc.shutdown()


def _done(rows: Rows, series_id: str) -> int:
    return int(rows("SELECT COUNT(*) AS n FROM attempts WHERE series_id=? AND status='done'", (series_id,))[0]["n"])


@dataclass
class KillReport:
    kills: int
    kill_offsets_s: list[float]
    restarts_s: list[float]
    attempts: int
    wall_s: float
    status: str
    verdict: dict[str, Any]
    baseline_verdict: dict[str, Any]
    lost: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)
    differ: list[str] = field(default_factory=list)
    attempt_spend: Decimal = Decimal(0)
    run_spend: Decimal = Decimal(0)
    baseline_spend: Decimal = Decimal(0)
    reserve: Decimal = Decimal(0)
    resumed_runs: int = 0
    model_requests: int = 0
    done_before_kill: list[int] = field(default_factory=list)

    concurrency: int = 1
    workers: int = 1
    worker_kills: int = 0  # of `kills`: the ones that hit a worker process instead of the server
    outlived: list[str] = field(default_factory=list)  # workers still alive a moment after their server died

    store: str = "SQLite"
    pg_restarts_s: list[float] = field(default_factory=list)  # seconds each `pg_ctl restart -m immediate` took
    pg_restart_offsets_s: list[float] = field(default_factory=list)  # s after the server was up
    pg_recovered_s: list[float | None] = field(
        default_factory=list
    )  # to the series' next finished attempt; None: never
    stalls: list[str] = field(default_factory=list)  # the server did not move on by itself: what its log said
    get_errors: list[str] = field(default_factory=list)  # GETs of the series the server failed (PostgreSQL only)

    @property
    def spend_ok(self) -> bool:
        return abs(self.attempt_spend - self.run_spend) <= self.reserve

    @property
    def extra_spend(self) -> Decimal:
        """Spent beyond the uninterrupted series: model calls a kill cut off after they were paid, done again."""
        return self.attempt_spend - self.baseline_spend

    @property
    def extra_ok(self) -> bool:
        # each kill (or crash of PostgreSQL) can interrupt at most `concurrency` attempts, each costing at most one
        # reserve again
        cuts = self.kills + len(self.pg_restarts_s) + len(self.stalls)
        return Decimal(0) <= self.extra_spend <= self.reserve * cuts * self.concurrency

    @property
    def verdict_same(self) -> bool:
        keys = ("verdict", "reason", "text")
        same = all(self.verdict.get(k) == self.baseline_verdict.get(k) for k in keys)
        cells = [(c.get("estimate"), c.get("low"), c.get("high")) for c in self.verdict.get("cells", [])]
        base = [(c.get("estimate"), c.get("low"), c.get("high")) for c in self.baseline_verdict.get("cells", [])]
        return same and cells == base

    @property
    def ok(self) -> bool:
        return (
            self.status == "done"
            and not self.lost
            and not self.twice
            and not self.differ
            and self.spend_ok
            and self.extra_ok
            and self.verdict_same
            and not self.outlived
            and not self.stalls
        )

    def lines(self) -> list[str]:
        mean_restart = sum(self.restarts_s) / len(self.restarts_s) if self.restarts_s else 0.0
        pg: list[str] = []
        if self.pg_restarts_s:
            recovered = [None if r is None else round(r, 2) for r in self.pg_recovered_s]
            pg = [
                f"PostgreSQL crashed and restarted (pg_ctl restart -m immediate) {len(self.pg_restarts_s)} times, "
                f"at {[round(x, 2) for x in self.pg_restart_offsets_s]} s after the server was up, each taking "
                f"{[round(x, 2) for x in self.pg_restarts_s]} s; the server, left running, finished its next attempt "
                f"after {recovered} s (None: not by itself); servers restarted by the soak for that: "
                f"{len(self.stalls)}",
                f"GETs of the series that failed after the kills: {len(self.get_errors)}",
                *self.get_errors[:5],
            ]
        return [
            f"store: {self.store}",
            *pg,
            f"{self.kills} SIGKILLs ({self.worker_kills} of a worker, {self.kills - self.worker_kills} of the server;"
            f" workers {self.workers}) during a series of {self.attempts} attempts; wall {self.wall_s:.1f} s; "
            f"status {self.status}",
            f"workers still alive after their server was killed: {len(self.outlived)}",
            f"kill moments (s after the server was up): {[round(x, 2) for x in self.kill_offsets_s]}",
            f"attempts done just before each kill: {self.done_before_kill}",
            f"restart to healthy: mean {mean_restart:.2f} s, max {max(self.restarts_s, default=0):.2f} s",
            f"runs resumed after a kill (more than one run_start/run_resume): {self.resumed_runs}; "
            f"model requests {self.model_requests} for {self.attempts} attempts",
            f"verdict {self.verdict.get('verdict')} ({self.verdict.get('reason')}); uninterrupted: "
            f"{self.baseline_verdict.get('verdict')} ({self.baseline_verdict.get('reason')}); "
            f"same: {self.verdict_same}",
            f"verdict text: {self.verdict.get('text')}",
            f"spend: attempts {self.attempt_spend}, runs {self.run_spend}, uninterrupted {self.baseline_spend}, "
            f"reserve {self.reserve}; attempts within one reserve of runs: {self.spend_ok}; "
            f"extra over uninterrupted {self.extra_spend} (≤ kills × concurrency × reserve: {self.extra_ok})",
            f"finished attempts lost: {len(self.lost)}; counted twice: {len(self.twice)}; "
            f"outcomes differing from the uninterrupted series: {len(self.differ)}",
            *(self.lost + self.twice + self.differ + self.outlived)[:20],
            *self.stalls,
        ]


def run_kill_soak(
    workdir: Path,
    *,
    kills: int = 20,
    cases: int = 150,
    repeats: int = 2,
    seed: int = 11,
    concurrency: int = 4,
    latency_s: float = 0.25,
    min_gap_s: float = 0.1,
    max_gap_s: float = 1.5,
    limit_s: float = 300.0,
    rng_seed: int | None = None,
    workers: int = 1,
    pg: PgStores | None = None,
    pg_restarts: int = 0,
    recover_s: float = 30.0,
) -> KillReport:
    """The soak; with `pg`, on PostgreSQL, crashing it `pg_restarts` times mid-series (the AQVEN server left running;
    one that has not finished an attempt `recover_s` after PostgreSQL is back is a stall: reported, restarted)."""
    started = time.monotonic()
    rng = random.Random(rng_seed)
    root = workdir / "killed"
    write_project(
        root, cases=cases, repeats=repeats, concurrency=concurrency, simulator="seeded", sim_latency_s=latency_s
    )
    base_root = workdir / "uninterrupted"
    shutil.copytree(root, base_root)  # the uninterrupted series runs in-process, without workers
    if workers > 1:
        write_project(
            root,
            cases=cases,
            repeats=repeats,
            concurrency=concurrency,
            simulator="seeded",
            sim_latency_s=latency_s,
            workers=workers,
        )
    env = server_env(AQVEN_SIM_LATENCY_SCALE="1", AQVEN_PRICES_FILE=str(workdir / "no-prices.json"))
    env.pop("AQVEN_STORE", None)
    if pg is not None:
        env["AQVEN_STORE"] = pg.killed_dsn
    rows: Rows = functools.partial(db_rows, root) if pg is None else pg_rows(pg.killed_dsn)

    # The uninterrupted series, at full speed (latency does not change outcomes, which depend on seeds only).
    saved = {k: os.environ.get(k) for k in ("AQVEN_SIM_LATENCY_SCALE", "AQVEN_PRICES_FILE", "AQVEN_STORE")}
    os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"
    os.environ["AQVEN_PRICES_FILE"] = env["AQVEN_PRICES_FILE"]
    os.environ.pop("AQVEN_STORE", None)
    if pg is not None:
        os.environ["AQVEN_STORE"] = pg.baseline_dsn
    try:
        base = asyncio.run(baseline(base_root, seed=seed, limit_s=limit_s))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    server = LiveServer(root, env)
    server.start()
    body = {"experiment_id": EXPERIMENT, "on": "dev", "simulate": True, "seed": seed, "client_op_id": "kill-soak"}
    sid = server.post("/api/series", body)["series"]["series_id"]
    seen_done: dict[int, dict[str, Any]] = {}
    offsets: list[float] = []
    restarts: list[float] = []
    done_counts: list[int] = []
    outlived: list[str] = []
    worker_kills = 0
    deadline = started + limit_s
    # PostgreSQL is crashed and restarted once after the last kill, so that the server must finish the series by
    # itself, and the other times before kills drawn at random (only then: a soak on SQLite keeps its moments).
    among = max(0, min(pg_restarts - 1, kills - 1))
    pg_before = set(rng.sample(range(1, kills), among)) if pg is not None and among else set()
    pg_restarts_s: list[float] = []
    pg_offsets: list[float] = []
    pg_recovered: list[float | None] = []
    stalls: list[str] = []
    get_errors: list[str] = []

    def see_done() -> bool:
        """Note the attempts done so far; False once the series ended."""
        if rows("SELECT status FROM series WHERE id=?", (sid,))[0]["status"] in ENDED:
            return False
        for a in rows("SELECT * FROM attempts WHERE series_id=? AND status='done'", (sid,)):
            seen_done.setdefault(a["idx"], a)
        return True

    def crash_postgres() -> bool:
        """Crash and restart PostgreSQL under the running server, then wait for the series to move on by itself;
        a server that does not is reported (the end of its log), killed and started again. False once ended."""
        assert pg is not None and server.proc is not None
        gap = rng.uniform(min_gap_s, max_gap_s)
        time.sleep(gap)
        if not see_done():
            return False
        log = root / ".aqven" / "server.log"
        log_from = log.stat().st_size if log.exists() else 0
        before = len(seen_done)
        t = time.monotonic()
        pg.restart()
        pg_restarts_s.append(time.monotonic() - t)
        pg_offsets.append(gap)
        back = time.monotonic()
        while time.monotonic() - back < recover_s:
            st = rows("SELECT status FROM series WHERE id=?", (sid,))[0]["status"]
            if st in ENDED or _done(rows, sid) > before:
                pg_recovered.append(time.monotonic() - back)
                return True
            time.sleep(0.1)
        pg_recovered.append(None)
        stalled(
            f"PostgreSQL restart {len(pg_restarts_s)}: no attempt finished in {recover_s:.0f} s after it was back",
            log_from,
        )
        return True

    def stalled(what: str, log_from: int) -> None:
        """The server did not go on by itself: say so with its log since `log_from`, kill it and start it again."""
        assert server.proc is not None
        log = root / ".aqven" / "server.log"
        said = log.read_bytes()[log_from:].decode(errors="replace").splitlines() if log.exists() else []
        stalls.append(
            f"{what} (server pid {server.proc.pid} alive: {server.proc.poll() is None}); its log since:\n  "
            + "\n  ".join(said[-40:] or ["(nothing)"])
        )
        server.kill()
        server.start()

    try:
        for n in range(kills):
            if n in pg_before and not crash_postgres():
                break
            if workers > 1:
                # A worker takes seconds to start: each kill waits until the series moved on since the last one, so
                # it hits attempts running in workers, not a server still starting them.
                while time.monotonic() < deadline and _done(rows, sid) <= (done_counts[-1] if done_counts else 0):
                    time.sleep(0.05)
            gap = rng.uniform(min_gap_s, max_gap_s)
            time.sleep(gap)
            if not see_done():
                break  # the series ended before all kills: the caller sees fewer kills
            done_counts.append(len(seen_done))
            assert server.proc is not None
            pids = worker_pids(server.proc.pid) if workers > 1 else []
            offsets.append(gap)
            if pids and n % 2 == 0:  # a worker: the server replaces it and resumes its attempts elsewhere
                os.kill(rng.choice(pids), signal.SIGKILL)
                worker_kills += 1
                continue
            server.kill()
            time.sleep(0.5)  # a moment: the kernel (or the end of their stdin) ends its workers
            outlived += [f"worker {pid} of killed server {server.proc.pid} still alive" for pid in pids if alive(pid)]
            t = time.monotonic()
            server.start()
            restarts.append(time.monotonic() - t)
            if time.monotonic() > deadline:
                raise TimeoutError("the kill soak ran past its limit")
        if pg is not None and len(pg_restarts_s) < pg_restarts:
            crash_postgres()
        # Let it finish (a kill during POST /api/series would be answered by the same client_op_id). On PostgreSQL
        # a server that finishes no attempt for `recover_s` has stalled: reported, and started again.
        state: dict[str, Any] = {"status": "running"} if pg is not None else server.get(f"/api/series/{sid}")
        moved, last_done = time.monotonic(), -1
        log = root / ".aqven" / "server.log"
        log_from = log.stat().st_size if log.exists() else 0
        while state["status"] not in ENDED:
            if time.monotonic() > deadline:
                raise TimeoutError(f"series still {state['status']} at the limit: {state['progress']}")
            if pg is not None:
                done_now = _done(rows, sid)
                if done_now != last_done:
                    moved, last_done = time.monotonic(), done_now
                    log_from = log.stat().st_size if log.exists() else 0
                elif time.monotonic() - moved > recover_s:
                    stalled(f"no attempt finished in {recover_s:.0f} s at {done_now} done, after the kills", log_from)
                    moved = time.monotonic()
            try:
                state = server.get(f"/api/series/{sid}?wait_seconds={10 if pg is None else 2}", timeout=40)
            except HttpError as e:
                if pg is None:
                    raise
                get_errors.append(f"GET /api/series/{sid} at {last_done} done: {str(e)[:300]}")
                time.sleep(0.5)
        again = server.post("/api/series", body)
        assert again["series"]["series_id"] == sid and again["created"] is False
    finally:
        server.stop()
    wall = time.monotonic() - started

    attempts = rows("SELECT * FROM attempts WHERE series_id=? ORDER BY idx", (sid,))
    runs = rows("SELECT * FROM runs WHERE series_id=?", (sid,))
    report = KillReport(
        kills=len(offsets),
        kill_offsets_s=offsets,
        restarts_s=restarts,
        attempts=len(attempts),
        wall_s=wall,
        status=state["status"],
        verdict=state.get("verdict") or {},
        baseline_verdict=base["state"].get("verdict") or {},
        done_before_kill=done_counts,
        concurrency=concurrency,
        workers=workers,
        worker_kills=worker_kills,
        outlived=outlived,
        store="SQLite" if pg is None else f"PostgreSQL ({pg.where})",
        pg_restarts_s=pg_restarts_s,
        pg_restart_offsets_s=pg_offsets,
        pg_recovered_s=pg_recovered,
        stalls=stalls,
        get_errors=get_errors,
    )
    final = {a["idx"]: a for a in attempts}
    for idx, before in seen_done.items():
        after = final.get(idx)
        keys = ("status", "run_id", "outcome", "value", "cost_usd", "error_code")
        if after is None or any(after[k] != before[k] for k in keys):
            report.lost.append(
                f"attempt {idx}: before a kill {[before[k] for k in keys]}, at the end "
                f"{[after[k] for k in keys] if after else None}"
            )
    import json

    runs_by_key: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in runs:
        req = json.loads(r["request"])
        runs_by_key.setdefault((req["case_name"], int(req["seed"])), []).append(r)
    run_ids = {r["id"]: r for r in runs}
    for a in attempts:
        mine = runs_by_key.get((a["case_name"], int(a["seed"])), [])
        counted = run_ids.get(a["run_id"] or "")
        if a["status"] != "done" or counted is None or counted["status"] not in ("done", "failed"):
            report.twice.append(
                f"attempt {a['idx']}: status {a['status']}, counted run {a['run_id']} "
                f"{counted['status'] if counted else 'missing'}"
            )
        if len(mine) > 1 + a["reruns"]:
            report.twice.append(f"attempt {a['idx']}: {len(mine)} runs for {a['reruns']} re-runs")
        want = base["attempts"].get((a["case_name"], a["rep"], a["variant_id"]))
        got = (a["seed"], a["outcome"], a["value"])
        if want is None or want[:3] != got:
            report.differ.append(f"attempt {a['idx']}: {got}, uninterrupted {want}")
    if len(runs) != len(attempts):
        report.twice.append(f"{len(runs)} runs for {len(attempts)} attempts")
    costs = [Decimal(a["cost_usd"] or "0") for a in attempts]
    report.attempt_spend = sum(costs, Decimal(0))
    report.run_spend = sum((Decimal(r["cost_usd"]) for r in runs), Decimal(0))
    report.baseline_spend = sum((Decimal(v[3] or "0") for v in base["attempts"].values()), Decimal(0))
    report.reserve = max(costs, default=Decimal(0))
    starts = rows(
        "SELECT e.run_id, COUNT(*) AS n FROM events e JOIN runs r ON r.id = e.run_id WHERE r.series_id=?"
        " AND e.kind IN ('run_start', 'run_resume') GROUP BY e.run_id",
        (sid,),
    )
    report.resumed_runs = sum(1 for s in starts if s["n"] > 1)
    report.model_requests = rows(
        "SELECT COUNT(*) AS n FROM events e JOIN runs r ON r.id = e.run_id WHERE r.series_id=?"
        " AND e.kind='model_request'",
        (sid,),
    )[0]["n"]
    return report


def _pg_ctl_restart(data: Path) -> Callable[[], None]:
    """`pg_ctl restart -m immediate` of the server whose data directory is `data`, run as its owner."""
    import pwd

    from support.postgres import find_bindir

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("--pg-ctl-data: no pg_ctl found (pg_config --bindir, /usr/lib/postgresql/*/bin, PATH)")
    owner = pwd.getpwuid(data.stat().st_uid).pw_name
    fd, log_name = tempfile.mkstemp(prefix="aqven-soak-pg-", suffix=".log")
    os.close(fd)
    log = Path(log_name)
    if os.geteuid() == 0:
        os.chown(log, data.stat().st_uid, data.stat().st_gid)
    cmd = [str(bindir / "pg_ctl"), "--pgdata", str(data), "--log", str(log), "--wait", "--timeout=60"]
    cmd += ["--mode=immediate", "restart"]
    if os.geteuid() == 0 and owner != "root":
        cmd = ["runuser", "-u", owner, "--", *cmd]

    def restart() -> None:
        subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)

    return restart


@contextmanager
def pg_stores(store: str, pg_ctl_data: Path | None) -> Iterator[PgStores]:
    """Two fresh databases for a soak on PostgreSQL: on a private durable cluster (`store` "postgres"), or on the
    server of the DSN `store`, restarted through `pg_ctl_data`."""
    from support.postgres import create_database, drop_database, private_cluster

    with ExitStack() as stack:
        if store in ("postgres", "postgresql"):
            cluster = stack.enter_context(private_cluster(durable=True))
            server_dsn, restart, where, log = cluster.dsn, cluster.restart_immediate, "a private cluster", cluster.log
            where += f" of PostgreSQL {cluster.bindir.parent.name}, fsync on"
        else:
            if pg_ctl_data is None:
                raise SystemExit("--store postgresql://… needs --pg-ctl-data DIR (its data directory) to restart it")
            server_dsn, restart, where, log = store, _pg_ctl_restart(pg_ctl_data), "the server of --store", None
        killed = create_database(server_dsn, "aqven_soak_killed")
        base = create_database(server_dsn, "aqven_soak_uninterrupted")
        try:
            yield PgStores(killed_dsn=killed, baseline_dsn=base, restart=restart, where=where, log=log)
        finally:
            for dsn in (killed, base):
                with contextlib.suppress(Exception):
                    drop_database(server_dsn, dsn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--cases", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=11, help="the series seed (attempt seeds derive from it)")
    parser.add_argument("--rng", type=int, default=None, help="seed of the kill moments (default: random)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.25, help="simulated seconds per model call")
    parser.add_argument("--min-gap", type=float, default=0.1)
    parser.add_argument("--max-gap", type=float, default=1.5)
    parser.add_argument("--limit", type=float, default=300.0, help="seconds for the whole soak")
    parser.add_argument(
        "--workers", type=int, default=1, help="worker processes of the server (≥ 2: every other kill hits a worker)"
    )
    parser.add_argument(
        "--store",
        default="sqlite",
        help="sqlite (default), postgres (a private durable cluster), or postgresql://USER@HOST:PORT/DB (a server"
        " where USER may create databases; with --pg-ctl-data)",
    )
    parser.add_argument("--pg-ctl-data", type=Path, help="the data directory of --store's server, for pg_ctl restart")
    parser.add_argument(
        "--pg-restarts",
        type=int,
        default=2,
        help="immediate restarts of PostgreSQL mid-series (PostgreSQL only): one after the last kill, the others"
        " before kills drawn at random",
    )
    args = parser.parse_args()
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        pg = None if args.store == "sqlite" else stack.enter_context(pg_stores(args.store, args.pg_ctl_data))
        report = run_kill_soak(
            Path(tmp),
            kills=args.kills,
            cases=args.cases,
            repeats=args.repeats,
            seed=args.seed,
            concurrency=args.concurrency,
            latency_s=args.latency,
            min_gap_s=args.min_gap,
            max_gap_s=args.max_gap,
            limit_s=args.limit,
            rng_seed=args.rng,
            workers=args.workers,
            pg=pg,
            pg_restarts=args.pg_restarts if pg is not None else 0,
        )
    print("\n".join(report.lines()))
    ok = report.ok and report.kills == args.kills
    if pg is not None and len(report.pg_restarts_s) < args.pg_restarts:
        ok = False
    short = [] if report.kills == args.kills else [f"only {report.kills} kills"]
    if pg is not None and len(report.pg_restarts_s) < args.pg_restarts:
        short.append(f"only {len(report.pg_restarts_s)} PostgreSQL restarts")
    print("PASS" if ok else "FAIL" + (f" ({'; '.join(short)})" if short else ""))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
