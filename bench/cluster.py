"""Attempts on several processes through DBOS queues over PostgreSQL: what the mechanism costs (issue 31).

    python bench/cluster.py spike [--attempts 2000] [--concurrency 8] [--workers 2] [--poll 0.05] [--latency 0]
                                  [--idle 10] [--postgres DSN]

`spike` measures DBOS Transact alone, with no AQVEN attempt in it: a "server" (this process) keeps `concurrency`
workflows in flight on one DBOS queue (global concurrency = `concurrency`), enqueued with a `DBOSClient` under their
own id; `workers` worker processes (`DBOS.launch()`, each listening on the queue, polling every `poll` s) run each one
(an async workflow with no step that sleeps `latency` s and then says it is done with one `pg_notify`, as an attempt's
end would be announced with its row); the server LISTENs and enqueues the next one as each ends. Printed: attempts/s,
the CPU per attempt of the server, the workers and PostgreSQL (all its processes), the latency from enqueue to the
notification (p50, p95) against `latency`, and the CPU the idle workers and PostgreSQL take per second with nothing
queued. The PostgreSQL server is a private durable cluster unless `--postgres` names one (tests/support/postgres.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stores import PgServer, cpu_with_children_s, postgres_server

QUEUE = "aqven_spike"
CHANNEL = "aqven_spike_done"
APP = "aqven-spike"


def _self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---- a worker process ----


def worker_main(dsn: str, name: str, concurrency: int, poll: float, latency: float) -> None:
    """A DBOS executor named `name` running the spike's workflow from QUEUE until killed."""
    import psycopg
    from dbos import DBOS, DBOSConfig

    sa_dsn = dsn.replace("postgresql://", "postgresql+psycopg://", 1)
    config: DBOSConfig = {
        "name": APP,
        "system_database_url": sa_dsn,
        "executor_id": name,
        "application_version": "spike-1",
        "log_level": "WARNING",
        "sys_db_pool_size": 4,
        "scheduler_polling_interval_sec": 3600.0,
        "notification_listener_polling_interval_sec": 1.0,
    }
    state: dict[str, Any] = {}

    async def main() -> None:
        DBOS(config=config)

        @DBOS.workflow(name="spike_attempt")
        async def spike_attempt(n: int) -> int:
            if latency:
                await asyncio.sleep(latency)
            conn = state["conn"]
            async with state["lock"]:
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(n)))
            return n

        DBOS.listen_queues([QUEUE])
        DBOS.launch()  # in this loop's thread: async workflows run on this loop
        await DBOS.register_queue_async(QUEUE, global_concurrency=concurrency, polling_interval_sec=poll)
        state["conn"] = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        state["lock"] = asyncio.Lock()
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# ---- the bench ----


def _dbos_schema(dsn: str) -> None:
    """Create DBOS's system tables once (a DBOS launch migrates them), so the workers start on an existing schema."""
    from dbos import DBOS

    DBOS(
        config={
            "name": APP,
            "system_database_url": dsn.replace("postgresql://", "postgresql+psycopg://", 1),
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    DBOS.destroy()


def spike(server: PgServer, args: argparse.Namespace) -> dict[str, Any]:
    import psycopg
    from dbos import DBOSClient

    dsn = server.fresh("aqven_cluster")
    procs: list[subprocess.Popen[str]] = []
    try:
        _dbos_schema(dsn)
        for i in range(args.workers):
            proc = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "worker",
                    dsn,
                    f"w{i}",
                    str(args.concurrency),
                    str(args.poll),
                    str(args.latency),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            procs.append(proc)
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        client = DBOSClient(system_database_url=dsn.replace("postgresql://", "postgresql+psycopg://", 1))
        listen = psycopg.connect(dsn, autocommit=True)
        listen.execute(f"LISTEN {CHANNEL}")

        # idle: nothing queued
        time.sleep(1.0)
        w0 = sum(cpu_with_children_s(p.pid) for p in procs)
        pg0 = server.cpu_s()
        time.sleep(args.idle)
        idle_workers = (sum(cpu_with_children_s(p.pid) for p in procs) - w0) / args.idle
        pg1 = server.cpu_s()
        idle_pg = None if pg0 is None or pg1 is None else (pg1 - pg0) / args.idle

        # a warm-up round, untimed
        def run(n: int, offset: int) -> tuple[float, list[float]]:
            sent: dict[int, float] = {}
            latencies: list[float] = []
            next_n = offset
            t0 = time.perf_counter()

            def enqueue(k: int) -> None:
                sent[k] = time.perf_counter()
                client.enqueue({"queue_name": QUEUE, "workflow_name": "spike_attempt", "workflow_id": f"a{k}"}, k)

            while next_n < offset + min(n, args.concurrency):
                enqueue(next_n)
                next_n += 1
            done = 0
            while done < n:
                for note in listen.notifies(timeout=30, stop_after=1):
                    k = int(note.payload)
                    latencies.append(time.perf_counter() - sent.pop(k))
                    done += 1
                    if next_n < offset + n:
                        enqueue(next_n)
                        next_n += 1
            return time.perf_counter() - t0, latencies

        run(min(50, args.attempts), 10_000_000)
        s0, w0, pg0 = _self_cpu_s(), sum(cpu_with_children_s(p.pid) for p in procs), server.cpu_s()
        wall, latencies = run(args.attempts, 0)
        s1, w1, pg1 = _self_cpu_s(), sum(cpu_with_children_s(p.pid) for p in procs), server.cpu_s()
        n = args.attempts
        commits = None
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone()
            commits = row[0] if row else None
        client.destroy()
        listen.close()
        return {
            "attempts": n,
            "wall_s": wall,
            "per_s": n / wall,
            "server_cpu_ms": 1000 * (s1 - s0) / n,
            "workers_cpu_ms": 1000 * (w1 - w0) / n,
            "pg_cpu_ms": None if pg0 is None or pg1 is None else 1000 * (pg1 - pg0) / n,
            "p50_ms": 1000 * statistics.median(latencies),
            "p95_ms": 1000 * sorted(latencies)[int(0.95 * (len(latencies) - 1))],
            "idle_workers_core": idle_workers,
            "idle_pg_core": idle_pg,
            "db_commits_total": commits,
        }
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        time.sleep(0.2)
        server.drop(dsn)


def main() -> None:
    if sys.argv[1:2] == ["worker"]:
        dsn, name, concurrency, poll, latency = sys.argv[2:7]
        worker_main(dsn, name, int(concurrency), float(poll), float(latency))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["spike"])
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--poll", type=float, default=0.05, help="each worker's queue polling interval, seconds")
    parser.add_argument("--latency", type=float, default=0.0, help="each workflow's sleep, seconds")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle workers measured")
    parser.add_argument("--postgres", default=None, help="a server to use instead of a private durable cluster")
    args = parser.parse_args()
    os.environ.setdefault("DBOS__VMID", "bench")
    with postgres_server(args.postgres) as server:
        out = spike(server, args)
    print(
        f"DBOS spike: {args.workers} workers, concurrency {args.concurrency}, poll {args.poll} s, "
        f"latency {args.latency} s, {out['attempts']} workflows"
    )
    for key, value in out.items():
        print(f"  {key:>18}: {value if not isinstance(value, float) else f'{value:.3f}'}")


if __name__ == "__main__":
    main()
