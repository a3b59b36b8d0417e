"""Kill soak: SIGKILL the project server at random moments of a series, restart it, and check the books.

The project is the reliability project of bench/soak_faults.py on simulated models: one llm node whose
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

    .venv/bin/python bench/soak_kill.py [--kills 20] [--cases 150] [--repeats 2] [--seed 11]

With `--workers N` (N ≥ 2) the project runs its attempts in N worker processes of the server, and every other
kill SIGKILLs one of those workers instead of the server (picked at random; the server goes on and resumes its
attempts in a fresh worker). After each kill of the server, no worker of it may outlive it by more than a moment:
one that does is reported (`outlived`). The uninterrupted series runs in-process without workers, so the
comparison is also one of workers against none.

Bounded: `--limit` seconds (default 300) for the whole soak. `tests/server/reliability/test_reliability_kill.py`
runs short ones.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import sys
import time
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


async def baseline(root: Path, *, seed: int, limit_s: float) -> dict[str, Any]:
    """The same series, uninterrupted, in-process (same experiment, cases, repeats and seed)."""
    from aqven.research.series.start import SeriesStartBody
    from aqven.server.service import ProjectService

    svc = ProjectService(root)
    try:
        out = await svc.series.start(
            SeriesStartBody.model_validate({"experiment_id": EXPERIMENT, "on": "dev", "simulate": True, "seed": seed})
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


def _done(root: Path, series_id: str) -> int:
    return int(
        db_rows(root, "SELECT COUNT(*) AS n FROM attempts WHERE series_id=? AND status='done'", (series_id,))[0]["n"]
    )


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

    @property
    def spend_ok(self) -> bool:
        return abs(self.attempt_spend - self.run_spend) <= self.reserve

    @property
    def extra_spend(self) -> Decimal:
        """Spent beyond the uninterrupted series: model calls a kill cut off after they were paid, done again."""
        return self.attempt_spend - self.baseline_spend

    @property
    def extra_ok(self) -> bool:
        # each kill can interrupt at most `concurrency` attempts, each costing at most one reserve again
        return Decimal(0) <= self.extra_spend <= self.reserve * self.kills * self.concurrency

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
        )

    def lines(self) -> list[str]:
        mean_restart = sum(self.restarts_s) / len(self.restarts_s) if self.restarts_s else 0.0
        return [
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
) -> KillReport:
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

    # The uninterrupted series, at full speed (latency does not change outcomes, which depend on seeds only).
    saved = {k: os.environ.get(k) for k in ("AQVEN_SIM_LATENCY_SCALE", "AQVEN_PRICES_FILE")}
    os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"
    os.environ["AQVEN_PRICES_FILE"] = env["AQVEN_PRICES_FILE"]
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
    try:
        for n in range(kills):
            if workers > 1:
                # A worker takes seconds to start: each kill waits until the series moved on since the last one, so
                # it hits attempts running in workers, not a server still starting them.
                while time.monotonic() < deadline and _done(root, sid) <= (done_counts[-1] if done_counts else 0):
                    time.sleep(0.05)
            gap = rng.uniform(min_gap_s, max_gap_s)
            time.sleep(gap)
            status = db_rows(root, "SELECT status FROM series WHERE id=?", (sid,))[0]["status"]
            if status in ENDED:
                break  # the series ended before all kills: the caller sees fewer kills
            for a in db_rows(root, "SELECT * FROM attempts WHERE series_id=? AND status='done'", (sid,)):
                seen_done.setdefault(a["idx"], a)
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
        # Let it finish (a kill during POST /api/series would be answered by the same client_op_id).
        state = server.get(f"/api/series/{sid}")
        while state["status"] not in ENDED:
            if time.monotonic() > deadline:
                raise TimeoutError(f"series still {state['status']} at the limit: {state['progress']}")
            try:
                state = server.get(f"/api/series/{sid}?wait_seconds=10", timeout=40)
            except HttpError:
                raise
        again = server.post("/api/series", body)
        assert again["series"]["series_id"] == sid and again["created"] is False
    finally:
        server.stop()
    wall = time.monotonic() - started

    attempts = db_rows(root, "SELECT * FROM attempts WHERE series_id=? ORDER BY idx", (sid,))
    runs = db_rows(root, "SELECT * FROM runs WHERE series_id=?", (sid,))
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
    starts = db_rows(
        root,
        "SELECT e.run_id, COUNT(*) AS n FROM events e JOIN runs r ON r.id = e.run_id WHERE r.series_id=?"
        " AND e.kind IN ('run_start', 'run_resume') GROUP BY e.run_id",
        (sid,),
    )
    report.resumed_runs = sum(1 for s in starts if s["n"] > 1)
    report.model_requests = db_rows(
        root,
        "SELECT COUNT(*) AS n FROM events e JOIN runs r ON r.id = e.run_id WHERE r.series_id=?"
        " AND e.kind='model_request'",
        (sid,),
    )[0]["n"]
    return report


def main() -> None:
    import tempfile

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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
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
        )
    print("\n".join(report.lines()))
    ok = report.ok and report.kills == args.kills
    print("PASS" if ok else "FAIL" + ("" if report.kills == args.kills else f" (only {report.kills} kills)"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
