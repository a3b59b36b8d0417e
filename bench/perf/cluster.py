"""Attempts on several processes through DBOS queues over PostgreSQL: what the mechanism costs, against a
PostgreSQL-native queue and Ray actors (issue 31).

    python bench/perf/cluster.py series [--attempts 2000] [--concurrency 8] [--latency 0]
                                        [--modes sqlite,pg,pg+1,pg+2,pg+3] [--postgres DSN]

`series` runs one real series of the tiny project of bench/perf/perf_common.py (one llm node on a simulator that answers
after `latency` s, one built-in check) per mode, each in a fresh process: `sqlite` and `pg`, the server's own
process running every attempt (the project's SQLite file; a fresh database of the PostgreSQL server); `pg+N`, the
server in cluster mode (AQVEN_CLUSTER=1, as `aqven serve --cluster`) and N `aqven worker` processes of the same
project on this machine. Printed per mode: attempts/s, wall time against the ideal (attempts × latency / concurrency),
the CPU per attempt of the server, the workers and PostgreSQL (all its processes), and with workers, the CPU the
idle workers and PostgreSQL took per second during 5 s before the series.

    python bench/perf/cluster.py spike [--engine dbos|pgq|ray] [--attempts 2000] [--concurrency 8] [--workers 2]
                                  [--poll 0.05] [--latency 0] [--idle 10] [--settle 3] [--postgres DSN]

`spike` measures DBOS Transact alone, with no AQVEN attempt in it: a "server" (this process) keeps `concurrency`
workflows in flight on one DBOS queue (global concurrency = `concurrency`), enqueued with a `DBOSClient` under their
own id; `workers` worker processes (`DBOS.launch()`, each listening on the queue, polling every `poll` s) run each one
(an async workflow with no step that sleeps `latency` s and then says it is done with one `pg_notify`, as an attempt's
end would be announced with its row); the server LISTENs and enqueues the next one as each ends. Printed: attempts/s,
the CPU per attempt of the server, the workers and PostgreSQL (all its processes), the latency from enqueue to the
notification (p50, p95) against `latency`, and the CPU the idle workers and PostgreSQL take per second with nothing
queued, and the server's own idle CPU. The PostgreSQL server is a private durable cluster unless `--postgres` names one
(tests/support/postgres.py).

    python bench/perf/cluster.py spike --engine pgq …

the same harness on a minimal PostgreSQL-native queue (INSERT + NOTIFY; the workers claim with `UPDATE … FOR UPDATE
SKIP LOCKED` and write the end with its NOTIFY in one transaction).

    python bench/perf/cluster.py spike --engine ray [--ray-end listen|ref] …

the same harness with Ray actors as the workers (Ray is not a dependency: `.venv/bin/pip install ray` first). The bench
starts a local Ray (`ray_config`: all this machine's cores and no more, no dashboard, no log forwarding, no usage
report; it prints Ray's default beside it) with `workers` async actors sharing those cores, each holding up to
`concurrency` calls. Ray keeps nothing durable, so each attempt does the PostgreSQL work a durable hand-out over it
needs: the server records the hand-out in the store (one INSERT … ON CONFLICT DO NOTHING under the attempt's id, the
actor it goes to named) and calls the actor with the fewest running (Ray has no queue over actors); the actor sleeps
`latency` and marks it done with one UPDATE and the end's pg_notify in one transaction. The server hears the end on
its LISTEN connection, as AQVEN's server hears an attempt's end written with its row (an end heard is an end stored,
and ends of attempts handed out before a server restart are heard too), or with `--ray-end ref` from the call's
ObjectRef (`ray.wait`; Ray sends the reply to the caller either way, so its cost is in both). The workers' CPU is all
of Ray's processes (gcs_server, raylet and every worker and agent it starts, the Python daemons: every process Ray
started under this one, with their children), the actors' share printed apart; Ray's threads in the server's own
process count as the server's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stores import PgServer, children, cpu_with_children_s, postgres_server, tree_cpu_s

BENCH = Path(__file__).resolve().parent

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


def pgq_worker_main(dsn: str, name: str, slots: int, latency: float) -> None:
    """A worker of the minimal PostgreSQL-native queue the issue allows weighing against DBOS: it LISTENs for new
    work, claims up to its free slots with one UPDATE … FOR UPDATE SKIP LOCKED, and writes each end with its
    NOTIFY in one transaction (3 commits per attempt in all, the enqueue included); it looks once a second all the
    same (a notification it missed)."""
    import psycopg

    async def main() -> None:
        listen = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        work = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        lock = asyncio.Lock()
        await listen.execute(f"LISTEN {PGQ_NEW}")
        running: set[str] = set()
        tasks: set[asyncio.Task[None]] = set()
        wake = asyncio.Event()

        async def one(wid: str) -> None:
            if latency:
                await asyncio.sleep(latency)
            async with lock, work.transaction():
                await work.execute("UPDATE pgq SET state='done' WHERE id=%s", (wid,))
                await work.execute("SELECT pg_notify(%s, %s)", (CHANNEL, wid.lstrip("a")))
            running.discard(wid)
            wake.set()

        async def claim() -> None:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), 1.0)
                wake.clear()
                free = slots - len(running)
                if free <= 0:
                    continue
                async with lock:
                    cur = await work.execute(
                        "UPDATE pgq SET state='running', worker=%s WHERE id IN (SELECT id FROM pgq WHERE"
                        " state='queued' ORDER BY seq LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id",
                        (name, free),
                    )
                    ids = [r[0] for r in await cur.fetchall()]
                for wid in ids:
                    running.add(wid)
                    task = asyncio.ensure_future(one(wid))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)

        claiming = asyncio.ensure_future(claim())
        print("ready", flush=True)
        async for _note in listen.notifies():
            wake.set()
        claiming.cancel()

    asyncio.run(main())


PGQ_NEW = "aqven_pgq_new"


# ---- Ray actors as the workers ----

RAY_MISSING = (
    "Ray is not a dependency of AQVEN; install it into this venv for the bench only:\n"
    "    .venv/bin/pip install ray\n"
    "(do not add it to pyproject.toml)"
)
RAY_DEFAULT = "ray.init()  # num_cpus=os.cpu_count(), the dashboard if ray[default] is installed, log_to_driver=True"


def ray_config(workers: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fair configuration: ray.init's keywords, and each actor's options. Ray gets this machine's cores and
    no more (num_cpus), the `workers` actors share them (each cores/workers of a CPU, so they all fit and none is
    queued behind another); no dashboard, no log forwarding to the driver (the bench prints nothing of theirs)."""
    cores = os.cpu_count() or 1
    init = {"include_dashboard": False, "num_cpus": cores, "log_to_driver": False}
    return init, {"num_cpus": int(10_000 * cores / workers) / 10_000}  # rounded down: 3 × 0.6667 would not fit


class RaySpikeWorker:
    """A Ray actor of the spike (async: its calls run on its event loop, up to `max_concurrency` at once): each call
    sleeps `latency` and marks its hand-out done with one UPDATE and the end's pg_notify in one transaction."""

    def __init__(self, dsn: str, name: str, latency: float) -> None:
        self.dsn, self.name, self.latency = dsn, name, latency
        self.conn: Any = None
        self.lock: asyncio.Lock | None = None

    async def ready(self) -> int:
        import psycopg

        self.conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        self.lock = asyncio.Lock()
        return os.getpid()

    async def run(self, k: int) -> int:
        if self.latency:
            await asyncio.sleep(self.latency)
        assert self.lock is not None
        async with self.lock, self.conn.transaction():
            await self.conn.execute("UPDATE handout SET state='done' WHERE id=%s", (f"a{k}",))
            await self.conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(k)))
        return k


class RayWorkers:
    """A local Ray started by the bench (the fair configuration) with `workers` RaySpikeWorker actors; `pids` are
    all of Ray's processes (gcs_server, raylet and its workers and agents, the Python daemons), `actor_pids` the
    actors'."""

    def __init__(self, dsn: str, workers: int, concurrency: int, latency: float) -> None:
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # no report leaves this machine
        try:
            import ray
        except ImportError:
            raise SystemExit(RAY_MISSING) from None
        self.ray = ray
        init, actor = ray_config(workers)
        before = set(children(os.getpid()))
        ray.init(**init)
        self.pids = [p for p in children(os.getpid()) if p not in before]
        cls = ray.remote(RaySpikeWorker)
        self.actors = [
            cls.options(max_concurrency=concurrency, **actor).remote(dsn, f"w{i}", latency) for i in range(workers)
        ]
        self.actor_pids: list[int] = ray.get([a.ready.remote() for a in self.actors])
        self.running = [0] * workers
        self.on: dict[int, int] = {}  # attempt → its actor
        self.refs: dict[int, Any] = {}
        self.describe = (
            f"Ray {ray.__version__}; default: {RAY_DEFAULT}\n"
            f"  chosen: ray.init({', '.join(f'{k}={v!r}' for k, v in init.items())}), RAY_USAGE_STATS_ENABLED=0;"
            f" {workers} async actors .options(max_concurrency={concurrency},"
            f" {', '.join(f'{k}={v!r}' for k, v in actor.items())})"
        )

    def pick(self, k: int) -> int:
        """The actor with the fewest attempts running: Ray has no queue over actors, the server chooses."""
        i = min(range(len(self.actors)), key=self.running.__getitem__)
        self.running[i] += 1
        self.on[k] = i
        return i

    def call(self, k: int) -> None:
        self.refs[k] = self.actors[self.on[k]].run.remote(k)

    def ended(self, k: int) -> None:
        self.running[self.on.pop(k)] -= 1
        self.refs.pop(k, None)

    def wait_refs(self, timeout: float) -> list[int]:
        """The attempts whose call returned (their ObjectRef ready), at least one unless `timeout` passed."""
        ready, _ = self.ray.wait(list(self.refs.values()), num_returns=1, timeout=timeout)
        return [int(k) for k in self.ray.get(ready)]

    def cpu_s(self) -> float:
        return tree_cpu_s(self.pids)

    def actors_cpu_s(self) -> float:
        return tree_cpu_s(self.actor_pids)

    def shutdown(self) -> None:
        self.ray.shutdown()


# ---- a real series per mode ----


def one_series(args: argparse.Namespace) -> dict[str, Any]:
    """One mode in this (fresh) process: a series of the tiny project, timed; a JSON-able result."""
    import json
    import tempfile

    os.environ["AQVEN_SIM_LATENCY_SCALE"] = "1" if args.latency else "0"
    import perf_common as pc

    from aqven.research.series.start import SeriesStartBody
    from aqven.server.service import ProjectService

    mode: str = args.one
    workers = int(mode.split("+")[1]) if "+" in mode else 0
    tmp = Path(tempfile.mkdtemp(prefix="aqven-cluster-bench-"))
    root = pc.write_tiny_project(
        tmp / "p", cases=pc.split_attempts(args.attempts)[0], latency_s=args.latency, concurrency=args.concurrency
    )
    os.environ.pop("AQVEN_STORE", None)
    os.environ.pop("AQVEN_CLUSTER", None)
    if mode.startswith("pg"):
        os.environ["AQVEN_STORE"] = args.dsn
    if workers:
        os.environ["AQVEN_CLUSTER"] = "1"
    procs: list[subprocess.Popen[bytes]] = []
    server = PgServer(dsn=args.server_dsn, postmaster=args.postmaster or None) if args.server_dsn else None
    out: dict[str, Any] = {"mode": mode, "attempts": args.attempts}

    async def run() -> None:
        svc = ProjectService(root)
        await asyncio.to_thread(svc.warm)
        if workers:
            import psycopg

            for i in range(workers):
                log = open(tmp / f"worker-{i}.log", "ab")  # noqa: SIM115 - the process holds it
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "aqven", "worker", "--project", str(root), "--name", f"w{i}"],
                        stdout=log,
                        stderr=log,
                        env=dict(os.environ),
                    )
                )
            svc.series.runner._pool()  # the queue registered, the LISTEN on: as a server does at its start
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                with psycopg.connect(args.dsn, autocommit=True) as conn:
                    row = conn.execute("SELECT COUNT(*) FROM workers WHERE state='live'").fetchone()
                if row and row[0] == workers:
                    break
                await asyncio.sleep(0.2)
            await asyncio.sleep(3.0)  # their project loaded, DBOS launched, the queue idle
            w0 = sum(cpu_with_children_s(p.pid) for p in procs)
            pg0 = server.cpu_s() if server else None
            await asyncio.sleep(5.0)
            out["idle_workers_core"] = (sum(cpu_with_children_s(p.pid) for p in procs) - w0) / 5.0
            pg1 = server.cpu_s() if server else None
            out["idle_pg_core"] = None if pg0 is None or pg1 is None else (pg1 - pg0) / 5.0
        cases, repeats = pc.split_attempts(args.attempts)
        spies = (
            [
                subprocess.Popen(
                    [
                        str(Path(sys.executable).parent / "py-spy"),
                        "record",
                        "-p",
                        str(p.pid),
                        "-r",
                        "250",
                        "--nonblocking",
                        "-f",
                        "raw",
                        "-o",
                        f"{os.environ['AQVEN_BENCH_PYSPY']}.{mode}.{i}.txt",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for i, p in enumerate(procs)
            ]
            if os.environ.get("AQVEN_BENCH_PYSPY")
            else []
        )
        s0, w0 = _self_cpu_s(), sum(cpu_with_children_s(p.pid) for p in procs)
        pg0 = server.cpu_s() if server else None
        started = time.perf_counter()
        begun = await svc.series.start(
            SeriesStartBody(
                experiment_id=pc.EXPERIMENT, on="dev", cases=cases, repeats=repeats, simulate=True, client_op_id=None
            )
        )
        sid = begun["series"]["series_id"]
        state = await svc.series.get(sid, wait_seconds=50)
        while state["status"] not in ("done", "failed", "cancelled", "awaiting_approval"):
            state = await svc.series.get(sid, wait_seconds=50)
        wall = time.perf_counter() - started
        s1, w1 = _self_cpu_s(), sum(cpu_with_children_s(p.pid) for p in procs)
        pg1 = server.cpu_s() if server else None
        for spy in spies:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
        n = args.attempts
        out.update(
            status=state["status"],
            wall_s=wall,
            per_s=n / wall,
            server_cpu_ms=1000 * (s1 - s0) / n,
            workers_cpu_ms=1000 * (w1 - w0) / n if procs else None,
            pg_cpu_ms=None if pg0 is None or pg1 is None else 1000 * (pg1 - pg0) / n,
        )
        if args.latency:
            ideal = n * args.latency / args.concurrency
            out["ideal_s"] = ideal
            out["ratio"] = wall / ideal
        await svc.shutdown()

    try:
        asyncio.run(run())
    finally:
        for p in procs:
            p.kill()
            p.wait()
    print(json.dumps(out), flush=True)
    return out


def series_table(server: PgServer | None, args: argparse.Namespace) -> None:
    import json

    rows: list[dict[str, Any]] = []
    for mode in args.modes.split(","):
        dsn = ""
        if mode.startswith("pg"):
            assert server is not None
            dsn = server.fresh("aqven_cluster")
        cmd = [
            sys.executable,
            __file__,
            "one",
            "--one",
            mode,
            "--attempts",
            str(args.attempts),
            "--concurrency",
            str(args.concurrency),
            "--latency",
            str(args.latency),
            "--dsn",
            dsn,
            "--server-dsn",
            server.dsn if server else "",
            "--postmaster",
            str(server.postmaster or 0) if server else "0",
        ]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
            line = [x for x in done.stdout.splitlines() if x.startswith("{")]
            if not line:
                print(f"{mode}: failed\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
                continue
            rows.append(json.loads(line[-1]))
            print(line[-1], flush=True)
        finally:
            if dsn and server is not None:
                time.sleep(0.5)
                server.drop(dsn)

    def cell(v: Any, fmt: str) -> str:
        return "–" if v is None else f"{v:{fmt}}"

    print(f"\n{args.attempts} attempts, concurrency {args.concurrency}, latency {args.latency} s")
    head = f"{'mode':<8} {'status':<7} {'att/s':>8} {'wall s':>8} {'ratio':>6} {'server':>7} {'workers':>8}"
    head += f" {'pg':>6} {'total':>7}"
    print(head + f" {'idle w':>7} {'idle pg':>7}   (CPU ms per attempt; idle: cores)")
    for r in rows:
        total = sum(v for v in (r.get("server_cpu_ms"), r.get("workers_cpu_ms"), r.get("pg_cpu_ms")) if v)
        print(
            f"{r['mode']:<8} {r['status']:<7} {r['per_s']:>8.1f} {r['wall_s']:>8.1f} {cell(r.get('ratio'), '6.3f')}"
            f" {cell(r.get('server_cpu_ms'), '7.2f')} {cell(r.get('workers_cpu_ms'), '8.2f')}"
            f" {cell(r.get('pg_cpu_ms'), '6.2f')} {total:>7.2f} {cell(r.get('idle_workers_core'), '7.3f')}"
            f" {cell(r.get('idle_pg_core'), '7.3f')}"
        )


# ---- the DBOS spike ----


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

    dsn = server.fresh("aqven_cluster")
    procs: list[subprocess.Popen[str]] = []
    engine: str = args.engine
    pgq, ray = engine == "pgq", engine == "ray"
    client: Any = None
    sender: psycopg.Connection[Any] | None = None
    listen: psycopg.Connection[Any] | None = None
    raying: RayWorkers | None = None

    def close() -> None:
        """Every connection and worker of the spike gone (again: a no-op)."""
        nonlocal client, sender, listen, raying
        if client is not None:
            client.destroy()
        for conn in (sender, listen):
            if conn is not None:
                conn.close()
        if raying is not None:
            raying.shutdown()
        for proc in procs:
            proc.kill()
            proc.wait()
        client = sender = listen = raying = None
        procs.clear()

    try:
        if pgq:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(
                    "CREATE TABLE pgq (id TEXT PRIMARY KEY, seq BIGSERIAL, state TEXT NOT NULL, worker TEXT, args TEXT)"
                )
                conn.execute("CREATE INDEX pgq_queued ON pgq(seq) WHERE state='queued'")
        elif ray:  # the store's record of each hand-out, over an engine that keeps nothing
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("CREATE TABLE handout (id TEXT PRIMARY KEY, state TEXT NOT NULL, worker TEXT)")
        else:
            _dbos_schema(dsn)
        if ray:
            raying = RayWorkers(dsn, args.workers, args.concurrency, args.latency)
            print(raying.describe, flush=True)
        for i in range(0 if ray else args.workers):
            role = (
                ["pgq-worker", dsn, f"w{i}", str(args.concurrency), str(args.latency)]
                if pgq
                else ["worker", dsn, f"w{i}", str(args.concurrency), str(args.poll), str(args.latency)]
            )
            proc = subprocess.Popen([sys.executable, __file__, *role], stdout=subprocess.PIPE, text=True)
            procs.append(proc)
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        if engine == "dbos":
            from dbos import DBOSClient

            client = DBOSClient(system_database_url=dsn.replace("postgresql://", "postgresql+psycopg://", 1))
        else:
            sender = psycopg.connect(dsn, autocommit=True)
        listen = psycopg.connect(dsn, autocommit=True)
        listen.execute(f"LISTEN {CHANNEL}")

        def workers_cpu_s() -> float:
            return raying.cpu_s() if raying is not None else sum(cpu_with_children_s(p.pid) for p in procs)

        # idle: nothing queued, after `settle` s (Ray's daemons and agents start up for a few seconds)
        time.sleep(args.settle)
        s0, w0, pg0 = _self_cpu_s(), workers_cpu_s(), server.cpu_s()
        a0 = raying.actors_cpu_s() if raying is not None else None
        time.sleep(args.idle)
        idle_server = (_self_cpu_s() - s0) / args.idle
        idle_workers = (workers_cpu_s() - w0) / args.idle
        idle_actors = None if raying is None or a0 is None else (raying.actors_cpu_s() - a0) / args.idle
        pg1 = server.cpu_s()
        idle_pg = None if pg0 is None or pg1 is None else (pg1 - pg0) / args.idle

        def enqueue(k: int) -> None:
            if raying is not None:  # the hand-out recorded (a second insert of the id is a no-op), then the call
                assert sender is not None
                i = raying.pick(k)
                sender.execute(
                    "INSERT INTO handout (id, state, worker) VALUES (%s, 'running', %s) ON CONFLICT (id) DO NOTHING",
                    (f"a{k}", f"w{i}"),
                )
                raying.call(k)
                return
            if sender is not None:  # one transaction: the row (a second insert of the id is a no-op), the wake-up
                with sender.transaction():
                    sender.execute(
                        "INSERT INTO pgq (id, state, args) VALUES (%s, 'queued', %s) ON CONFLICT (id) DO NOTHING",
                        (f"a{k}", str(k)),
                    )
                    sender.execute(f"NOTIFY {PGQ_NEW}")
                return
            client.enqueue({"queue_name": QUEUE, "workflow_name": "spike_attempt", "workflow_id": f"a{k}"}, k)

        def ends() -> list[int]:
            """The attempts whose end was heard: on the LISTEN connection, or (Ray, --ray-end ref) their calls'
            returned ObjectRefs."""
            if raying is not None and args.ray_end == "ref":
                return raying.wait_refs(30)
            assert listen is not None
            return [int(note.payload) for note in listen.notifies(timeout=30, stop_after=1)]

        def run(n: int, offset: int) -> tuple[float, list[float]]:
            sent: dict[int, float] = {}
            latencies: list[float] = []
            next_n = offset
            t0 = time.perf_counter()
            while next_n < offset + min(n, args.concurrency):
                sent[next_n] = time.perf_counter()
                enqueue(next_n)
                next_n += 1
            done = 0
            while done < n:
                for k in ends():
                    latencies.append(time.perf_counter() - sent.pop(k))
                    if raying is not None:
                        raying.ended(k)
                    done += 1
                    if next_n < offset + n:
                        sent[next_n] = time.perf_counter()
                        enqueue(next_n)
                        next_n += 1
            return time.perf_counter() - t0, latencies

        warm = min(50, args.attempts)
        run(warm, 10_000_000)  # a warm-up round, untimed
        s0, w0, pg0 = _self_cpu_s(), workers_cpu_s(), server.cpu_s()
        a0 = raying.actors_cpu_s() if raying is not None else None
        wall, latencies = run(args.attempts, 0)
        s1, w1, pg1 = _self_cpu_s(), workers_cpu_s(), server.cpu_s()
        a1 = raying.actors_cpu_s() if raying is not None else None
        n = args.attempts
        close()
        time.sleep(0.5)  # a backend reports its counts at the latest when its client has gone
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone()
            commits = row[0] if row else None
        return {
            "attempts": n,
            "wall_s": wall,
            "per_s": n / wall,
            "server_cpu_ms": 1000 * (s1 - s0) / n,
            "workers_cpu_ms": 1000 * (w1 - w0) / n,
            **({"of_which_actors_ms": 1000 * (a1 - a0) / n} if a0 is not None and a1 is not None else {}),
            "pg_cpu_ms": None if pg0 is None or pg1 is None else 1000 * (pg1 - pg0) / n,
            "p50_ms": 1000 * statistics.median(latencies),
            "p95_ms": 1000 * sorted(latencies)[int(0.95 * (len(latencies) - 1))],
            "idle_server_core": idle_server,
            "idle_workers_core": idle_workers,
            **({"idle_of_which_actors": idle_actors} if idle_actors is not None else {}),
            "idle_pg_core": idle_pg,
            "commits_total": commits,  # all of the database's: setup, idle, warm-up and the run
        }
    finally:
        close()
        time.sleep(0.2)
        server.drop(dsn)


def main() -> None:
    if sys.argv[1:2] == ["pgq-worker"]:
        dsn, name, slots, latency = sys.argv[2:6]
        pgq_worker_main(dsn, name, int(slots), float(latency))
        return
    if sys.argv[1:2] == ["worker"]:
        dsn, name, concurrency, poll, latency = sys.argv[2:7]
        worker_main(dsn, name, int(concurrency), float(poll), float(latency))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["spike", "series", "one"])
    parser.add_argument(
        "--engine",
        choices=["dbos", "pgq", "ray"],
        default="dbos",
        help="spike: DBOS, a minimal PostgreSQL-native queue (SKIP LOCKED + LISTEN/NOTIFY), or Ray actors with the"
        " hand-out recorded in the store (`pip install ray` into the venv first)",
    )
    parser.add_argument(
        "--ray-end",
        choices=["listen", "ref"],
        default="listen",
        help="ray: the server hears an end on its LISTEN connection (as AQVEN does), or from the call's ObjectRef",
    )
    parser.add_argument("--modes", default="sqlite,pg,pg+1,pg+2,pg+3", help="series: the modes, in order")
    parser.add_argument("--one", default="pg", help=argparse.SUPPRESS)
    parser.add_argument("--dsn", default="", help=argparse.SUPPRESS)
    parser.add_argument("--server-dsn", default="", help=argparse.SUPPRESS)
    parser.add_argument("--postmaster", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--poll", type=float, default=0.05, help="each worker's queue polling interval, seconds")
    parser.add_argument("--latency", type=float, default=0.0, help="each workflow's sleep, seconds")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle workers measured")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds waited after the start before the idle")
    parser.add_argument("--postgres", default=None, help="a server to use instead of a private durable cluster")
    args = parser.parse_args()
    if args.mode == "one":
        one_series(args)
        return
    if args.mode == "series":
        with postgres_server(args.postgres) as server:
            series_table(server, args)
        return
    with postgres_server(args.postgres) as server:
        out = spike(server, args)
    print(
        f"{args.engine} spike: {args.workers} workers, concurrency {args.concurrency}, "
        + (f"poll {args.poll} s, " if args.engine == "dbos" else "")
        + (f"end heard by {args.ray_end}, " if args.engine == "ray" else "")
        + f"latency {args.latency} s, {out['attempts']} attempts"
    )
    for key, value in out.items():
        print(f"  {key:>18}: {value if not isinstance(value, float) else f'{value:.3f}'}")


if __name__ == "__main__":
    main()
