"""The worker processes of a project server: where a series' attempts run when `workers` is above 1.

The series runner stays the one place that decides: it picks the next attempt and its run id exactly as with no
workers, then hands it to the least busy worker and waits for what the attempt's row says (`AttemptResult`). The
worker claims the attempt (queued → running, with that run id, or answers "skipped" when it is not queued any more),
runs its run and checks and writes its end (`research/series/attempt.py` `run_owned`), all against the same
database: the server writes nothing per attempt, so it never waits for the writer lock while the workers wait for
work. Only when a worker could not write an end (it raised, or died too often) does the server write it.

A worker is `aqven.research.series.worker` in a child of the server, spoken to over its stdin and stdout
(pickled messages). Who dies:

* a worker (SIGKILL, a crash): its stdout ends; the server makes sure the process is gone, fails the attempts it
  held with `WorkerDied`, and the runner resumes each in another worker from its run's last finished node — the
  same resume a restarted server does, so nothing finished is lost and nothing runs twice;
* the server: every worker's stdin ends and the worker exits at once (and on Linux the kernel kills it with the
  server, `PR_SET_PDEATHSIG`), so no worker outlives its server to write beside the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import pickle
import struct
import subprocess
import sys
import threading
from asyncio import AbstractEventLoop, Future, get_running_loop
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import aqven
from aqven.research.series.attempt import AttemptResult
from aqven.store.series import SeriesStore
from aqven.store.series_records import AttemptRow, SeriesRow

log = logging.getLogger("aqven.series")

STOP_WAIT_S = 5.0  # how long a worker asked to stop may take before it is killed
WORKER_LOST = "WORKER_LOST"
"""An attempt's worker process died under it too many times (an infrastructure error)."""


class WorkerDied(Exception):
    """The worker running an attempt died before it answered; the attempt is still running in the database."""


class RaisedInWorker(Exception):
    """The attempt raised in its worker; the text is its `Type: message`, as the server would have logged it."""


# How a worker starts: bound to the server's life before anything else is imported (importing the engine takes
# seconds, and a worker must not outlive a server killed meanwhile). On Linux the kernel SIGKILLs it when the server
# dies (PR_SET_PDEATHSIG = 1); everywhere, a server gone before that line ran is seen by its parent pid changing,
# and a server that dies later by the end of the worker's stdin (research/series/worker.py).
BOOT = """import os, signal, sys
if sys.platform.startswith("linux"):
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except Exception:
        pass
if os.getppid() != int(sys.argv[2]):
    os._exit(0)
from aqven.research.series.worker import main
main(sys.argv[1:])
"""


# The wire: frames of a 4-byte length and a pickled list of messages, read on the event loop (no reader thread, so
# no hand-off of the interpreter lock per message), written once per turn of the loop with every message of the turn.
_HEAD = struct.Struct("<I")


def frame(messages: list[Any]) -> bytes:
    body = pickle.dumps(messages, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEAD.pack(len(body)) + body


class Frames:
    """The messages in a byte stream of frames, as its pieces arrive (a frame split across reads waits for its rest)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self._buffer += data
        out: list[Any] = []
        start = 0
        while len(self._buffer) - start >= _HEAD.size:
            (size,) = _HEAD.unpack_from(self._buffer, start)
            end = start + _HEAD.size + size
            if len(self._buffer) < end:
                break
            out.extend(pickle.loads(memoryview(self._buffer)[start + _HEAD.size : end]))
            start = end
        del self._buffer[:start]
        return out


class Outbox:
    """Messages to the other side, sent together at the end of the loop's turn: attempts claimed (or finished) in
    one turn cost one write, and one wake-up of the process that reads them. Loop thread only."""

    def __init__(self, loop: AbstractEventLoop, stream: IO[bytes]) -> None:
        self._loop = loop
        self.stream = stream
        self._queue: list[Any] = []
        self.closed = False

    def put(self, message: Any) -> None:
        if self.closed:
            raise BrokenPipeError("the other side is gone")
        self._queue.append(message)
        if len(self._queue) == 1:
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        messages, self._queue = self._queue, []
        if messages and not self.closed:
            with contextlib.suppress(OSError, ValueError):  # the reader is gone: its end is seen on the other pipe
                write(self.stream, messages)

    def close(self) -> None:
        self.closed = True
        self._queue.clear()


def write(stream: IO[bytes], messages: list[Any]) -> None:
    stream.write(frame(messages))
    stream.flush()


class _Reader(asyncio.Protocol):
    """The loop's end of a pipe: each message to `on_message`, the pipe's end (or a torn frame) to `on_end`."""

    def __init__(self, on_message: Callable[[Any], None], on_end: Callable[[], None]) -> None:
        self._frames = Frames()
        self._on_message = on_message
        self._on_end = on_end
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            messages = self._frames.feed(data)
        except Exception:  # a torn or garbled frame: the writer died mid-write
            if self._transport is not None:
                self._transport.close()
            return
        for message in messages:
            self._on_message(message)

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_end()


def read_pipe(
    loop: AbstractEventLoop, stream: IO[bytes], on_message: Callable[[Any], None], on_end: Callable[[], None]
) -> None:
    """Call `on_message` on the loop for each message read from `stream`, then `on_end` once when it ends. On the
    loop itself where it can watch a pipe (POSIX); on a thread of its own elsewhere."""

    async def connect() -> None:
        try:
            await loop.connect_read_pipe(lambda: _Reader(on_message, on_end), stream)
        except (NotImplementedError, OSError, ValueError):
            threading.Thread(target=_read_in_thread, args=(loop, stream, on_message, on_end), daemon=True).start()

    _keep(loop.create_task(connect()))


def _read_in_thread(
    loop: AbstractEventLoop, stream: IO[bytes], on_message: Callable[[Any], None], on_end: Callable[[], None]
) -> None:
    frames = Frames()
    with contextlib.suppress(Exception):  # EOF, a torn frame, a closed stream
        read = getattr(stream, "read1", stream.read)
        while data := read(1 << 16):
            for message in frames.feed(data):
                loop.call_soon_threadsafe(on_message, message)
    with contextlib.suppress(RuntimeError):  # the loop is closed: its process is ending anyway
        loop.call_soon_threadsafe(on_end)


_tasks: set[asyncio.Task[Any]] = set()


def _keep(task: asyncio.Task[Any]) -> None:
    """Hold a reference to a background task until it ends (the loop keeps only weak ones)."""
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


@dataclass(eq=False)
class _Worker:
    proc: subprocess.Popen[bytes]
    outbox: Outbox
    pending: dict[int, Future[AttemptResult | None]] = field(default_factory=dict)
    ready: bool = False  # it has loaded its modules and answers (a fresh one takes a few seconds)
    alive: bool = True

    @property
    def takes_work(self) -> bool:
        """Alive and its pipe open: a worker whose stdout ended is dying (buried once surely gone, `_bury`), and
        work handed to it meanwhile would fail at once, again at each retry, until the attempt is lost."""
        return self.alive and not self.outbox.closed


class AttemptPool(Protocol):
    """Where attempts run outside the runner's loop: this machine's worker processes (`WorkerPool`), or the
    `aqven worker`s of a shared store (research/cluster/dispatch.py: `ClusterPool`, whose `size` is -1)."""

    size: int

    async def run(self, s: SeriesRow, attempt: AttemptRow, run_id: str) -> AttemptResult | None: ...

    async def ready(self, timeout: float = 60.0) -> bool: ...

    def idle(self) -> bool: ...

    def pids(self) -> list[int]: ...

    def close(self) -> None: ...


RemotePool = Callable[[SeriesStore, Callable[[], int]], AttemptPool]
"""Makes the pool of another machine's workers, given the store and the project's `concurrency` (read when needed)."""


class WorkerPool:
    """`size` worker processes for the project at `root`, started at once and replaced when one dies."""

    def __init__(self, root: Path, size: int) -> None:
        self.root = root
        self.size = size
        self._loop: AbstractEventLoop = get_running_loop()
        self._jobs = itertools.count(1)
        self._workers: list[_Worker] = []
        self._closed = False
        self._fill()

    # ---- the server's side ----

    async def run(self, s: SeriesRow, attempt: AttemptRow, run_id: str) -> AttemptResult | None:
        """Claim, run and finish one attempt in a worker (None: it was not queued any more); `WorkerDied` when that
        worker died before it answered."""
        self._fill()
        worker = self._pick()
        job = next(self._jobs)
        future: Future[AttemptResult | None] = self._loop.create_future()
        worker.pending[job] = future
        try:
            worker.outbox.put(("run", job, s.id, attempt, run_id))
        except OSError as exc:  # its pipes are closed: it died
            worker.pending.pop(job, None)
            raise WorkerDied(f"worker {worker.proc.pid} took no more work ({type(exc).__name__})") from exc
        # A write that fails later (the worker died meanwhile) is not an error here: its end fails `future`.
        try:
            return await future
        except BaseException:
            if not future.done():  # cancelled here: stop it there too (a stopped attempt is resumed later)
                worker.pending.pop(job, None)
                with contextlib.suppress(OSError, RuntimeError):
                    worker.outbox.put(("cancel", job))
            raise

    async def ready(self, timeout: float = 60.0) -> bool:
        """Wait until every worker has loaded the project and answers (benches time series with warm workers)."""
        deadline = self._loop.time() + timeout
        while not all(w.ready for w in self._workers if w.alive) and self._loop.time() < deadline:
            await asyncio.sleep(0.05)
        return all(w.ready for w in self._workers if w.alive)

    def idle(self) -> bool:
        return not any(w.pending for w in self._workers)

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers if w.alive]

    def close(self) -> None:
        """Stop every worker: an attempt it held stays running in the database and is resumed by the next start."""
        self._closed = True
        for w in self._workers:  # written now: this may run on a thread, and the loop may not turn again
            with contextlib.suppress(OSError, ValueError):
                write(w.outbox.stream, [("stop",)])
        for w in self._workers:
            with contextlib.suppress(Exception):
                w.proc.wait(timeout=STOP_WAIT_S)
            with contextlib.suppress(OSError):
                w.proc.kill()  # one that did not stop at once (busy in a long step): it is not waited for longer
            with contextlib.suppress(Exception):
                w.proc.wait(timeout=10)
        self._workers.clear()

    def _pick(self) -> _Worker:
        # A fresh worker is still importing: work goes to a ready one when there is one, the least busy first.
        taking = [w for w in self._workers if w.takes_work]
        ready = [w for w in taking if w.ready] or taking
        return min(ready, key=lambda w: len(w.pending))

    def _fill(self) -> None:
        # A dying worker is replaced at once; it stays listed until buried (its attempts fail then, not before).
        self._workers = [w for w in self._workers if w.alive]
        while not self._closed and sum(w.takes_work for w in self._workers) < self.size:
            self._workers.append(self._spawn())

    def _spawn(self) -> _Worker:
        env = dict(os.environ)
        # The worker imports the same aqven as the server, whatever the current folder or install.
        src = str(Path(aqven.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join([src, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
        proc = subprocess.Popen(
            [sys.executable, "-c", BOOT, str(self.root), str(os.getpid()), str(self.size)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,  # the server's lock and database stay its own
        )
        assert proc.stdin is not None and proc.stdout is not None
        worker = _Worker(proc, Outbox(self._loop, proc.stdin))
        read_pipe(self._loop, proc.stdout, lambda m: self._answer(worker, m), lambda: self._ended(worker))
        return worker

    def _ended(self, worker: _Worker) -> None:
        """The worker's stdout ended (or tore): it is dead, or dying. Its attempts fail once it is surely gone."""
        worker.outbox.close()
        _keep(self._loop.create_task(self._bury(worker)))

    async def _bury(self, worker: _Worker) -> None:
        with contextlib.suppress(OSError):
            worker.proc.kill()
        try:
            await asyncio.to_thread(worker.proc.wait)
        except RuntimeError:  # the loop's executor is shut down (the server is stopping): a killed process ends fast
            with contextlib.suppress(Exception):
                worker.proc.wait(timeout=10)
        self._died(worker)

    def _answer(self, worker: _Worker, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "ready":
            worker.ready = True
            return
        future = worker.pending.pop(message[1], None)
        if future is None or future.done():
            return  # cancelled meanwhile
        if kind == "done":
            future.set_result(message[2])
        elif kind == "skipped":
            future.set_result(None)
        else:  # "error": the attempt raised in the worker, as it would have here
            future.set_exception(RaisedInWorker(message[2]))

    def _died(self, worker: _Worker) -> None:
        worker.alive = False
        code = worker.proc.returncode
        if not self._closed:
            log.warning("worker %d died (exit %s) holding %d attempts", worker.proc.pid, code, len(worker.pending))
        for future in worker.pending.values():
            if not future.done():
                future.set_exception(WorkerDied(f"worker {worker.proc.pid} died (exit {code})"))
        worker.pending.clear()
        for stream in (worker.proc.stdin, worker.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
