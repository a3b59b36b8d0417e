"""The server's side of `aqven worker`s: the series runner hands an attempt here instead of to a local worker.

`ClusterPool.run(series, attempt, run_id)` has the same contract as `WorkerPool.run` (research/series/workers.py):
the attempt is claimed, run and finished elsewhere, and the answer is what its row says (`AttemptResult`), or None
when it was not queued any more. The runner stays the one place that decides what starts; here an attempt is
enqueued on the DBOS queue once, under its workflow id (enqueueing again is a no-op), and its end is heard on the
store's LISTEN channel (or read from the workflow's output when a notification was missed: `_sweep`).

The runner holds the project's `concurrency` (DBOS's own global limit is off: queue.DBOS_LIMIT). The workers poll
the queue often only while woken (queue.WAKE, sent at most once a second while attempts are handed out), and once a
second otherwise: what an idle worker costs is its polls (bench/perf/cluster.py).

A worker whose heartbeat counter has not moved for LOST_AFTER_S (on this server's clock) is declared lost, and the
workflows DBOS still holds as PENDING on its executor are put back on the queue (`DBOSClient.resume_workflow`), where
another worker takes each up: `run_owned` resumes its run from the last finished node, so a recorded model answer is
never asked for again. A worker cut off from PostgreSQL has stopped itself by then (node.FENCE_S < LOST_AFTER_S).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from asyncio import AbstractEventLoop, Future
from collections.abc import Callable

from aqven.errors import CLUSTER_NEEDS_POSTGRES, CLUSTER_UNAVAILABLE, AqvenError
from aqven.research.cluster import queue
from aqven.research.series.attempt import AttemptResult, result_of_row
from aqven.research.series.workers import RaisedInWorker
from aqven.store.series import SeriesStore
from aqven.store.series_records import AttemptRow, SeriesRow
from aqven.store.workers import LIVE, REFUSED, WorkerStore

log = logging.getLogger("aqven.cluster")

LOST_AFTER_S = 10.0
"""A worker whose heartbeat has not moved for this long (seen from the server) is lost: its attempts go to others."""
WATCH_S = 1.0
"""How often the server looks at the workers' heartbeats."""
SWEEP_S = 5.0
"""How often attempts out for that long are looked up in DBOS (an end whose notification was missed)."""
WAKE_EVERY_S = 1.0
"""While attempts are handed out, the workers are woken (queue.WAKE) at most this often."""
_TERMINAL = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


class ClusterPool:
    """Attempts handed to `aqven worker`s through the DBOS queue in the project's PostgreSQL store."""

    def __init__(self, store: SeriesStore, dsn: str | None, concurrency: Callable[[], int]) -> None:
        if dsn is None:
            raise AqvenError(
                "attempts on several machines need the project's store on PostgreSQL; this one is SQLite",
                code=CLUSTER_NEEDS_POSTGRES,
                hint="aqven serve --store postgresql://… --cluster (docs/how-to/run-on-several-machines.md)",
            )
        try:
            from dbos import DBOSClient
        except ImportError:
            raise AqvenError(
                "attempts on several machines need DBOS, which is not installed",
                code=CLUSTER_UNAVAILABLE,
                hint="pip install 'aqven[cluster]'",
            ) from None
        self.size = -1  # not a number of local processes (the runner compares it with `workers`)
        self.store = store
        self.workers = WorkerStore(store.db)
        self._concurrency = concurrency
        self._loop: AbstractEventLoop = asyncio.get_running_loop()
        queue.migrate(dsn)
        self.client = DBOSClient(system_database_url=queue.sa_url(dsn), application_name=queue.APP)
        self._width = concurrency()
        self.client.register_queue(
            queue.QUEUE,
            global_concurrency=self._width if queue.DBOS_LIMIT else None,
            polling_interval_sec=queue.POLL_S,
            on_conflict="always_update",
        )
        self._waiting: dict[str, Future[str]] = {}
        self._sent: dict[str, float] = {}  # workflow id → when it was handed out (monotonic)
        self._seen: dict[str, tuple[int, float]] = {}  # worker id → (heartbeat counter, when it last moved)
        self._recovered: set[str] = set()  # executors whose workflows were put back on the queue
        self._woken = 0.0  # when the workers were last woken (monotonic)
        self._closed = False
        self._stop_listening = store.db.listen(queue.CHANNEL, self._heard)
        self._watch = self._loop.create_task(self._watch_forever())

    # ---- the runner's side (WorkerPool's contract) ----

    async def run(self, s: SeriesRow, attempt: AttemptRow, run_id: str) -> AttemptResult | None:
        n = 0
        while True:
            wf = queue.workflow_id(s.id, attempt.idx, run_id, n)
            future: Future[str] = self._loop.create_future()
            self._waiting[wf] = future
            self._sent[wf] = time.monotonic()
            self._wake()
            try:
                await asyncio.to_thread(self._enqueue, wf, s.id, attempt.idx, run_id)
                if attempt.status != "queued" or n:  # handed out before (a restarted server, a person's answer)
                    status = await asyncio.to_thread(self._status, wf)
                    if status is not None and status[0] in _TERMINAL:
                        state = status[1]
                        if state.split(" ", 1)[0] == queue.WAITING or state.startswith(queue.ERROR):
                            n += 1  # it ended waiting for a person who has answered since: a new hand-out goes on
                            continue
                        future.set_result(state)
                state = await future
            finally:
                self._waiting.pop(wf, None)
                self._sent.pop(wf, None)
            return self._answer(s, attempt, run_id, state)

    def _answer(self, s: SeriesRow, attempt: AttemptRow, run_id: str, state: str) -> AttemptResult | None:
        word = state.split(" ", 1)[0]
        if word == queue.SKIPPED:
            return None
        if word == queue.WAITING:
            return AttemptResult(waiting=True)
        if word == queue.DONE:
            told = queue.read_ended(state.split(" ", 1)[1]) if " " in state else None
            if told is not None:  # announced with its end, in the transaction that wrote it
                return AttemptResult(
                    outcome=told["outcome"], cost=told["cost"], tokens=told["tokens"], unpriced=bool(told["unpriced"])
                )
            row = self.store.attempt(s.id, attempt.idx)
            if row.status == "done" and row.run_id == run_id:
                return result_of_row(row)
            raise RaisedInWorker(f"the worker said done, and the attempt's row is {row.status}")
        raise RaisedInWorker(state.split(" ", 1)[1] if " " in state else f"the attempt's workflow ended {state}")

    async def ready(self, timeout: float = 60.0) -> bool:
        """Until a worker is live (benches start timing with warm workers)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await asyncio.to_thread(self.workers.live):
                return True
            await asyncio.sleep(0.2)
        return False

    def idle(self) -> bool:
        return not self._waiting

    def pids(self) -> list[int]:
        return []

    def close(self) -> None:
        """Stop listening and watching; the attempts out stay with the workers (the next server hears their ends
        or reads them from the store)."""
        self._closed = True
        self._loop.call_soon_threadsafe(self._watch.cancel)
        with contextlib.suppress(Exception):
            self._stop_listening()
        with contextlib.suppress(Exception):
            self.client.destroy()

    # ---- DBOS ----

    def _enqueue(self, wf: str, series_id: str, idx: int, run_id: str) -> None:
        self.client.enqueue(
            {
                "queue_name": queue.QUEUE,
                "workflow_name": queue.WORKFLOW,
                "workflow_id": wf,
                "app_version": queue.VERSION,
            },
            series_id,
            idx,
            run_id,
        )

    def _status(self, wf: str) -> tuple[str, str] | None:
        found = self.client.list_workflows(workflow_ids=[wf], load_input=False)
        if not found:
            return None
        w = found[0]
        return w.status, _state_of(w.status, w.output, w.error)

    def _wake(self) -> None:
        """Wake the workers (they poll the queue at its interval for a while after: node.HOT_S), at most once every
        WAKE_EVERY_S while attempts are handed out."""
        now = time.monotonic()
        if now - self._woken > WAKE_EVERY_S:
            self._woken = now
            self._loop.run_in_executor(None, self._announce_wake)

    def _announce_wake(self) -> None:
        with contextlib.suppress(Exception), self.store.db.transaction() as cur:
            self.store.db.announce(cur, queue.WAKE, "")

    # ---- what the workers say ----

    def _heard(self, payload: str) -> None:
        """A notification on CHANNEL (the listener's thread): `<workflow id> <state>`."""
        wf, _, state = payload.partition(" ")
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server is ending
            self._loop.call_soon_threadsafe(self._settle, wf, state)

    def _settle(self, wf: str, state: str) -> None:
        future = self._waiting.get(wf)
        if future is not None and not future.done():
            future.set_result(state)

    async def _watch_forever(self) -> None:
        swept = time.monotonic()
        while not self._closed:
            await asyncio.sleep(WATCH_S)
            try:
                await asyncio.to_thread(self._watch_workers)
                now = time.monotonic()
                if now - swept > SWEEP_S:
                    swept = now
                    await self._sweep(now)
                width = self._concurrency()
                if width != self._width and queue.DBOS_LIMIT:
                    self._width = width
                    q = await asyncio.to_thread(self.client.retrieve_queue, queue.QUEUE)
                    if q is not None:
                        await asyncio.to_thread(q.set_global_concurrency, width)
            except Exception as exc:  # PostgreSQL restarting: the next look goes on
                log.warning("cluster watch: %s", type(exc).__name__)

    def _watch_workers(self) -> None:
        now = time.monotonic()
        rows = self.workers.listing(ended=True, limit=500)
        gone: list[str] = []
        for w in rows:
            if w.state in (LIVE, REFUSED):
                seen = self._seen.get(w.id)
                if seen is None or seen[0] != w.beats:
                    self._seen[w.id] = (w.beats, now)
                elif now - seen[1] > LOST_AFTER_S and self.workers.declare_lost(w.id, w.beats):
                    log.warning(
                        "worker %s on %s: no heartbeat for %.0f s; its attempts go to others",
                        w.name,
                        w.host,
                        now - seen[1],
                    )
                    gone.append(w.id)
            elif w.id not in self._recovered:
                gone.append(w.id)
        if gone:
            self._recover(gone)

    def _recover(self, executors: list[str]) -> None:
        """Put the workflows DBOS holds as PENDING on these (stopped, lost) executors back on the queue."""
        pending = self.client.list_workflows(
            status="PENDING", executor_id=executors, queue_name=queue.QUEUE, load_input=False, load_output=False
        )
        for wf in pending:
            self.client.resume_workflow(wf.workflow_id, queue_name=queue.QUEUE)
        if pending:
            log.warning("%d attempts of lost workers handed to the others", len(pending))
        self._recovered.update(executors)
        for e in executors:
            self._seen.pop(e, None)

    async def _sweep(self, now: float) -> None:
        """Ends whose notification was missed (the listener reconnecting after PostgreSQL restarted)."""
        old = [wf for wf, at in self._sent.items() if now - at > SWEEP_S]
        if not old:
            return
        found = await asyncio.to_thread(
            self.client.list_workflows, workflow_ids=old, status=list(_TERMINAL), load_input=False
        )
        for w in found:
            self._settle(w.workflow_id, _state_of(w.status, w.output, w.error))


def cluster_pool(store: SeriesStore, concurrency: Callable[[], int]) -> ClusterPool:
    """The runner's remote pool in cluster mode (research/series/workers.py: `RemotePool`)."""
    return ClusterPool(store, getattr(store.db, "dsn", None), concurrency)


def _state_of(status: str, output: object, error: BaseException | None) -> str:
    """What an ended workflow says: its output, or the exception it raised (a worker whose store went away)."""
    if isinstance(output, str):
        return output
    if error is not None:
        return f"{queue.ERROR} {type(error).__name__}: {error}"
    return f"{queue.ERROR} the attempt's workflow ended {status}"
