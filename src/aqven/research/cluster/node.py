"""A worker of a shared store: `aqven worker --store postgresql://… [--project PATH] [--slots N] [--name NAME]`.

It runs on any machine with the project's files. It registers in the store's `workers` table under a new DBOS
executor id (`NAME-<random>`: a worker declared lost never comes back under its id), launches DBOS on the store's
database listening to the attempts' queue, and runs each attempt DBOS hands it through the same `run_owned` as a
server or a local worker process: it claims the attempt (or takes up its run where it stopped), runs it, scores it,
writes its end, and announces the end on `queue.CHANNEL` for the server.

It runs only what the series was planned on: before an attempt it compares the series' inputs hash with the hash
of its own files; on a difference it records `WORKER_INPUTS_MISMATCH` on its row, logs it and exits without touching
the attempt, which the server hands to another worker once this one's heartbeat has stopped (the same path as a
crash: one workflow id throughout, so no attempt is ever run by two workers at once). It checks the series running
when it starts, too, and refuses at once if their inputs are not its files.

Its heartbeat (`WorkerStore.beat`, every BEAT_S on a connection of its own) must land: when its row says it was
declared lost, or when no beat has landed for FENCE_S (cut off from PostgreSQL), it exits at once, before the server
(LOST_AFTER_S, longer) hands its attempts to others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from aqven import heap
from aqven.errors import CLUSTER_NEEDS_POSTGRES, CLUSTER_UNAVAILABLE, WORKER_INPUTS_MISMATCH, AqvenError
from aqven.models.gate import CpuGate, held
from aqven.research.cluster import queue
from aqven.research.series.attempt import AttemptResult, inputs_hash, run_owned
from aqven.research.series.worker import Live
from aqven.store.location import StoreLocation, shown_dsn
from aqven.store.open import open_database
from aqven.store.provider_limits import share_limits
from aqven.store.runs import RunStore
from aqven.store.series import SeriesStore
from aqven.store.series_records import SeriesRow
from aqven.store.workers import WorkerStore

log = logging.getLogger("aqven.worker")

BEAT_S = 1.0
"""How often a worker's heartbeat lands."""
FENCE_S = 6.0
"""A worker none of whose beats landed for this long stops itself: the server may hand its attempts to others after
LOST_AFTER_S (dispatch.py), and must find it gone by then."""

EXIT_REFUSED, EXIT_LOST, EXIT_CUT_OFF = 3, 4, 5
CHILD_ENV = "AQVEN_WORKER_PARENT"
"""Set (to the supervisor's pid) in the worker process `aqven worker` runs and starts again (cli/worker_cmd.py)."""
HOT_S = 3.0
"""A worker polls the queue at its interval while attempts run here and for this long after the last one, or after
the server last woke it (queue.WAKE); otherwise once every queue.IDLE_POLL_S."""
QUEUE_ROW_S = 5.0
"""How often a worker reads the queue's settings again."""


def _die(code: int, message: str) -> None:
    log.error("%s", message)
    with contextlib.suppress(Exception):
        sys.stderr.write(f"aqven worker: {message}\n")
        sys.stderr.flush()
    os._exit(code)


class Node:
    """One `aqven worker` process."""

    def __init__(self, root: Path, dsn: str, *, name: str | None = None, slots: int | None = None) -> None:
        self.root = root
        self.dsn = dsn
        location = StoreLocation("postgresql", dsn=dsn)
        db = open_database(location)
        self.runs = RunStore(db)
        self.store = SeriesStore(db)
        self.workers = WorkerStore(db)
        self.live = Live(root, self.runs)
        self.gate: CpuGate | None = None if os.environ.get("AQVEN_CPU_GATE", "").lower() == "off" else CpuGate()
        if self.gate is not None:
            db.group.hold = self.gate.busy
        self.host = socket.gethostname()
        self.name = name or f"{self.host}-{os.getpid()}"
        self.id = f"{self.name}-{secrets.token_hex(4)}"
        self.slots = slots or self.live.workspace().project.config.concurrency
        self.running: set[str] = set()
        self.ran = 0
        self._series: dict[str, SeriesRow] = {}
        self._verified: dict[str, str] = {}  # series id → the inputs hash found equal to it (files unchanged)
        self._last_beat = time.monotonic()
        self._hot_until = 0.0
        self._beats = WorkerStore(open_database(location))  # its own connection: a beat never waits for a write
        share_limits(db, self.id)  # each provider's rpm / tpm and outage clock, with every other process's

    # ---- life ----

    def check_running_series(self) -> None:
        """Refuse at once when a series running now was planned on other files than these."""
        for sid in self.store.ids_with_status("running", "waiting_human"):
            self._check_inputs(self._get_series(sid))

    def _get_series(self, series_id: str) -> SeriesRow:
        s = self._series.get(series_id)
        if s is None:
            if len(self._series) > 64:
                self._series.clear()
            s = self._series[series_id] = self.store.get(series_id)
        return s

    def _check_inputs(self, s: SeriesRow) -> None:
        ws = self.live.workspace()
        mine = inputs_hash(s, ws)
        if mine == s.inputs_hash:
            if self._verified.get(s.id) != mine:
                self._verified[s.id] = mine
                self.workers.verified(self.id, mine)
            return
        message = (
            f"this worker's project files ({self.root}) are not the inputs series {s.id} was planned on"
            f" (their hash {mine[:12]}…, the series' {s.inputs_hash[:12]}…): it runs none of its attempts and stops."
            " Bring the files to the series' version (the same commit) and start it again."
        )
        with contextlib.suppress(Exception):
            self.workers.refuse(self.id, WORKER_INPUTS_MISMATCH, message, mine)
        _die(EXIT_REFUSED, f"{WORKER_INPUTS_MISMATCH}: {message}")

    def beat_forever(self) -> None:
        """The heartbeat thread: a beat every BEAT_S; the process ends when its row is not live any more."""
        while True:
            try:
                if not self._beats.beat(self.id, running=len(self.running), ran=self.ran):
                    row = self._beats.get(self.id)
                    _die(EXIT_LOST, f"the server declared this worker {row.state if row else 'gone'}: it stops")
                self._last_beat = time.monotonic()
            except Exception as exc:
                log.warning("heartbeat failed: %s", type(exc).__name__)
            time.sleep(BEAT_S)

    def fence_forever(self) -> None:
        """The fence: no beat landed for FENCE_S (PostgreSQL unreachable, or this process stalled) → stop now."""
        while True:
            time.sleep(0.25)
            if time.monotonic() - self._last_beat > FENCE_S:
                _die(EXIT_CUT_OFF, f"no heartbeat reached the store for {FENCE_S:.0f} s: this worker stops")

    def hot(self, now: float) -> bool:
        return bool(self.running) or now < self._hot_until

    def woken(self, _payload: str) -> None:
        self._hot_until = time.monotonic() + HOT_S

    # ---- one attempt ----

    async def attempt(self, workflow_id: str, series_id: str, idx: int, run_id: str) -> str:
        """Run one attempt handed out by DBOS; its state (queue.DONE, WAITING, SKIPPED, ERROR) is announced and
        returned. A finished attempt's end is announced in the transaction that writes it, with what the server's
        runner counts (queue.ended_payload), so the server reads nothing per attempt."""
        self.running.add(workflow_id)
        announced: list[bool] = []
        try:
            state = await self._attempt(workflow_id, series_id, idx, run_id, announced)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            state = f"{queue.ERROR} {type(exc).__name__}: {exc}"
        finally:
            self.running.discard(workflow_id)
            self._hot_until = time.monotonic() + HOT_S
        self.ran += 1
        if not announced:
            # PostgreSQL may be what failed: then the server's sweep reads the state from the workflow's output
            with contextlib.suppress(Exception), self.store.db.transaction() as cur:
                self.store.db.announce(cur, queue.CHANNEL, f"{workflow_id} {state}")
        # an error keeps its reason in the output, for a server that missed the announcement
        return state if state.startswith(queue.ERROR) else state.split(" ", 1)[0]

    async def _attempt(self, wf: str, series_id: str, idx: int, run_id: str, announced: list[bool]) -> str:
        s = self._get_series(series_id)
        a = self.store.attempt(series_id, idx)
        if a.status == "done":  # written already (by a worker lost after it wrote the end)
            return queue.DONE if a.run_id == run_id else queue.SKIPPED
        if a.status == "running" and a.run_id != run_id:
            return queue.SKIPPED
        self._check_inputs(s)
        db = self.store.db

        def ended(out: AttemptResult) -> None:
            with db.transaction() as cur:
                db.announce(cur, queue.CHANNEL, f"{wf} {queue.DONE} {queue.ended_payload(out)}")
            announced.append(True)

        async with held(self.gate):
            live = self.live
            out = await run_owned(live.workspace, live.engine, self.runs, self.store, s, a, run_id, self.id, ended)
        if out is None:
            return queue.SKIPPED
        return queue.WAITING if out.waiting else queue.DONE


def _dbos_config(node: Node) -> Any:
    return {
        "name": queue.APP,
        "system_database_url": queue.sa_url(node.dsn),
        "executor_id": node.id,
        "application_version": queue.VERSION,
        "log_level": "WARNING",
        "sys_db_pool_size": 4,
        "scheduler_polling_interval_sec": 3600.0,
        "notification_coalesce_sec": 1.0,  # DBOS's events and streams are not used: its notifier thread sleeps
        "run_migrations": False,  # the server migrates DBOS's tables (dispatch.py), and so does `aqven worker` first
    }


STRANDED_S = 5.0
"""How often a worker looks for workflows DBOS dequeued to it but never started, and how long one must be so."""


async def _stranded_forever(node: Node) -> None:
    """Workflows DBOS marked PENDING on this executor but never ran: a dequeue whose dispatch failed (PostgreSQL
    restarting between the claim and the read of the workflows' rows, dbos-transact-py issues #716, #742, #804).
    Nobody else takes them (this executor is alive), so after two looks STRANDED_S apart that find one still not
    running here, it is put back on the queue (where any worker, this one too, takes it)."""
    from dbos import DBOS

    seen: dict[str, float] = {}
    while True:
        await asyncio.sleep(STRANDED_S)
        try:
            pending = await asyncio.to_thread(
                DBOS.list_workflows,
                status="PENDING",
                executor_id=node.id,
                queue_name=queue.QUEUE,
                load_input=False,
                load_output=False,
            )
        except Exception as exc:  # PostgreSQL restarting: the next look
            log.warning("looking for stranded workflows: %s", type(exc).__name__)
            continue
        now = time.monotonic()
        idle = {w.workflow_id for w in pending if w.workflow_id not in node.running}
        for wf in idle:
            first = seen.setdefault(wf, now)
            if now - first >= STRANDED_S and wf not in node.running:
                log.warning("workflow %s was dequeued here and never started: back on the queue", wf)
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(DBOS.resume_workflow, wf, queue_name=queue.QUEUE)
                seen.pop(wf, None)
        for wf in list(seen):
            if wf not in idle:
                seen.pop(wf)


def _tune_queue_thread(dbos: Any, node: Node) -> None:
    """Where AQVEN reaches into DBOS's insides (two methods of its system database that DBOS's queue thread calls at
    each poll; DBOS is pinned to 3.4.x, and tests/research/cluster runs through both):

    * `get_queue`, the queue's row read again at every poll: read once every QUEUE_ROW_S instead, with this worker's
      own `slots` as its per-worker limit (DBOS keeps one per queue, for every worker);
    * `dequeue_scopes`, where a poll begins: a worker that is not hot (no attempt running or woken in the last HOT_S)
      skips its poll but once every IDLE_POLL_S, so an idle worker costs a wake-up of a thread, not a transaction,
      20 times a second.
    """
    sys_db = dbos._sys_db
    read = sys_db.get_queue
    scopes = sys_db.dequeue_scopes
    kept: list[Any] = [None, 0.0]
    last = [0.0]

    def get_queue(name: str, **kw: Any) -> Any:
        if name != queue.QUEUE or kw:
            return read(name, **kw)
        now = time.monotonic()
        if kept[0] is None or now - kept[1] > QUEUE_ROW_S:
            q = read(name)
            if q is None:
                return None
            q._worker_concurrency = node.slots
            kept[0], kept[1] = q, now
        return kept[0]

    def dequeue_scopes(name: str) -> Any:
        if name == queue.QUEUE:
            now = time.monotonic()
            if not node.hot(now) and now - last[0] < queue.IDLE_POLL_S:
                return []
            last[0] = now
        return scopes(name)

    sys_db.get_queue = get_queue
    sys_db.dequeue_scopes = dequeue_scopes


async def serve(node: Node) -> None:
    try:
        from dbos import DBOS
    except ImportError:
        raise AqvenError(
            "aqven worker needs DBOS, which is not installed",
            code=CLUSTER_UNAVAILABLE,
            hint="pip install 'aqven[cluster]'",
        ) from None
    node.workers.register(node.id, node.name, node.host, os.getpid(), node.slots)
    node._last_beat = time.monotonic()
    threading.Thread(target=node.beat_forever, name="aqven-beat", daemon=True).start()
    threading.Thread(target=node.fence_forever, name="aqven-fence", daemon=True).start()
    node.check_running_series()  # a refusal is on its row, for `aqven workers` and Studio
    await asyncio.to_thread(queue.migrate, node.dsn)
    DBOS(config=_dbos_config(node))

    @DBOS.workflow(name=queue.WORKFLOW)
    async def aqven_attempt(series_id: str, idx: int, run_id: str) -> str:
        return await node.attempt(DBOS.workflow_id or "", series_id, idx, run_id)

    DBOS.listen_queues([queue.QUEUE])
    node.live.engine()  # the project loaded before the first attempt comes
    heap.settle()
    DBOS.launch()  # from this loop's thread: the workflows (async) run on this loop
    from dbos._dbos import _get_dbos_instance

    _tune_queue_thread(_get_dbos_instance(), node)
    node.store.db.listen(queue.WAKE, node.woken)
    stranded = asyncio.ensure_future(_stranded_forever(node))
    shown = shown_dsn(node.dsn)
    log.warning("worker %s on %s: %d slots, project %s, store %s", node.id, node.host, node.slots, node.root, shown)
    print(f"aqven worker {node.id} ready: {node.slots} slots on {node.host}", file=sys.stderr, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        stranded.cancel()
        with contextlib.suppress(Exception):
            node.workers.stop(node.id)


def _bind_to_parent() -> None:
    """The worker process dies with its supervisor (`aqven worker`): SIGKILLed by the kernel with it on Linux, and
    on every system it exits when its parent changes (checked every second by the fence's thread)."""
    parent = os.environ.get(CHILD_ENV)
    if not parent:
        return
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != int(parent):
        os._exit(0)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != int(parent):
                os._exit(0)

    threading.Thread(target=watch, name="aqven-parent", daemon=True).start()


def main(root: Path, dsn: str, *, name: str | None = None, slots: int | None = None) -> None:
    """`aqven worker`: run until interrupted (Ctrl-C: the attempts it holds are handed to others by the server)."""
    if not dsn.startswith(("postgresql://", "postgres://")):
        raise AqvenError(
            "aqven worker needs the project's shared PostgreSQL store (--store postgresql://USER@HOST:PORT/DB)",
            code=CLUSTER_NEEDS_POSTGRES,
            hint="docs/how-to/run-on-several-machines.md",
        )
    _bind_to_parent()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s worker: %(levelname)s %(name)s %(message)s")
    node = Node(root, dsn, name=name, slots=slots)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(node))
    with contextlib.suppress(Exception):
        node.workers.stop(node.id)
    os._exit(0)  # DBOS's threads are not waited for: what this worker held is handed to others
