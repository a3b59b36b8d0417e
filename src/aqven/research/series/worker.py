"""A worker process of the project server: runs the attempts the server hands it, on the same database.

    main([ROOT, SERVER_PID, WORKERS])    (started by research/series/workers.py, bound to the server's life first)

It reads ("run", job, series_id, attempt, run_id), ("cancel", job) and ("stop",) from stdin; it claims the attempt,
runs it and writes its end (`run_owned`), and answers ("ready", pid), ("done", job, AttemptResult), ("skipped", job)
(the attempt was not queued any more) or ("error", job, text) on stdout, in frames of pickled messages read
on its event loop (research/series/workers.py). Several attempts run side by side on its event loop, their CPU
phases in FIFO order (aqven.models.gate), as in the server. It reads the project files again when they change, as
the server does. When its stdin ends the server is gone, and it exits at once; a watch thread also exits it when
its parent changes (the server died while the loop was busy in a long step).
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from aqven import heap
from aqven.engine.runner import Engine
from aqven.models import rate_limit
from aqven.models.gate import CpuGate, held
from aqven.models.masked_output import mask_output
from aqven.project.watch import FINGERPRINT_EVERY_S, Fingerprint, fingerprint
from aqven.research.experiments.workspace import Workspace
from aqven.research.series.attempt import run_owned
from aqven.research.series.workers import Outbox, read_pipe, write
from aqven.store.open import project_database
from aqven.store.provider_limits import share_limits
from aqven.store.runs import RunStore
from aqven.store.series import SeriesStore
from aqven.store.series_records import AttemptRow, SeriesRow

log = logging.getLogger("aqven.series.worker")
# AQVEN_WORKER_PROFILE=<path>: each worker profiles itself and writes <path>.<pid> when the server stops it (benches)
PROFILE = cProfile.Profile() if os.environ.get("AQVEN_WORKER_PROFILE") else None


class Live:
    """The project as its files are now: read again when they change (`aqven.project.watch`), as the server does."""

    def __init__(self, root: Path, runs: RunStore) -> None:
        self.root = root
        self.runs = runs
        self._ws: Workspace | None = None
        self._fp: Fingerprint | None = None
        self._checked = 0.0
        self._engine: tuple[Workspace, Engine] | None = None

    def workspace(self) -> Workspace:
        now = time.monotonic()
        if self._ws is not None and now - self._checked < FINGERPRINT_EVERY_S:
            return self._ws
        fp = fingerprint(self.root)
        self._checked = now
        if self._ws is None or fp != self._fp:
            self._ws, self._fp = Workspace.load(self.root), fp
        return self._ws

    def engine(self) -> Engine:
        ws = self.workspace()
        if self._engine is None or self._engine[0] is not ws:
            self._engine = (ws, Engine(ws.project, self.runs, patch_for=ws.patch_for))
        return self._engine[1]


class Worker:
    def __init__(self, root: Path, out: Outbox) -> None:
        db = project_database(root)
        share_limits(db)  # on a shared store, the providers' limits are every process's together (else `share`)
        self.runs = RunStore(db)
        self.store = SeriesStore(db)
        self.live = Live(root, self.runs)
        self.out = out
        self.gate: CpuGate | None = None if os.environ.get("AQVEN_CPU_GATE", "").lower() == "off" else CpuGate()
        if self.gate is not None:  # a write waits for the attempts' CPU phases to join it (store/group_commit.py)
            db.group.hold = self.gate.busy
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.series: dict[str, SeriesRow] = {}  # what an attempt reads of its series is fixed at the series' start

    def handle(self, message: tuple[Any, ...]) -> None:
        if message[0] == "run":
            _, job, series_id, attempt, run_id = message
            self.tasks[job] = asyncio.ensure_future(self.one(job, series_id, attempt, run_id))
        elif message[0] == "cancel":
            task = self.tasks.pop(message[1], None)
            if task is not None:
                task.cancel()
        elif message[0] == "stop":  # the server shuts down: what runs here stops where it is, resumed later
            if PROFILE is not None:
                PROFILE.disable()
                PROFILE.dump_stats(f"{os.environ['AQVEN_WORKER_PROFILE']}.{os.getpid()}")
            os._exit(0)

    async def one(self, job: int, series_id: str, attempt: AttemptRow, run_id: str) -> None:
        try:
            s = self.series.get(series_id)
            if s is None:
                if len(self.series) > 64:
                    self.series.clear()
                s = self.series[series_id] = self.store.get(series_id)
            async with held(self.gate):
                live = self.live
                result = await run_owned(live.workspace, live.engine, self.runs, self.store, s, attempt, run_id)
            answer: tuple[Any, ...] = ("skipped", job) if result is None else ("done", job, result)
        except asyncio.CancelledError:
            return
        except Exception as exc:
            answer = ("error", job, f"{type(exc).__name__}: {exc}")
        finally:
            self.tasks.pop(job, None)
        with contextlib.suppress(OSError):  # the server is gone: this process is about to end
            self.out.put(answer)


PARENT_CHECK_S = 0.5


def _watch_parent(server_pid: int) -> None:
    """Exit when the server is gone even while the loop is busy (the kernel does it on Linux already)."""
    while True:
        time.sleep(PARENT_CHECK_S)
        if os.getppid() != server_pid:
            os._exit(0)


async def serve(root: Path, inp: IO[bytes], out: IO[bytes]) -> None:
    loop = asyncio.get_running_loop()
    worker = Worker(root, Outbox(loop, out))
    worker.live.engine()  # the project loaded before the first attempt comes
    heap.settle()  # and kept out of the collector's full passes
    write(out, [("ready", os.getpid())])
    # stdin ended: the server is gone; stop now, mid-attempt or not (the next server resumes it)
    read_pipe(loop, inp, worker.handle, lambda: os._exit(0))
    await asyncio.Event().wait()


def main(argv: list[str]) -> None:
    root, server_pid, workers = Path(argv[0]), int(argv[1]), int(argv[2])
    # stdout carries the answers only: anything a project's code prints goes to stderr (the server's log).
    out = os.fdopen(os.dup(1), "wb")
    inp = os.fdopen(os.dup(0), "rb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    mask_output()  # a key a project's code prints reaches the server's log masked
    logging.basicConfig(level=logging.WARNING, format=f"worker {os.getpid()}: %(levelname)s %(name)s %(message)s")
    rate_limit.share(workers)  # a provider's rpm / tpm are the server's: each worker keeps its share of them
    threading.Thread(target=_watch_parent, args=(server_pid,), name="aqven-worker-parent", daemon=True).start()
    if PROFILE is not None:
        PROFILE.enable()
    asyncio.run(serve(root, inp, out))
