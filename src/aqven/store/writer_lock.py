"""The project database's writer lock across processes: a file lock each write transaction takes first.

SQLite lets one connection write at a time and answers the others "busy", with no way to wait for the writer to
finish: a connection can only try again later. A server with worker processes (research/series/workers.py) writes
from three processes, hundreds of transactions a second, and polling (`store/db.py` `_patient`, or SQLite's own busy
handler) slept past the moment the lock was free: each process lay asleep about a millisecond per attempt, its event
loop blocked. A `flock` on a file beside the database is a queue instead: the kernel wakes a waiting writer as soon as
the holder releases it, or dies (a killed process's locks go with it), so a wait lasts as long as the other
transaction and no longer.

The wait has a deadline (a process stopped while it holds the lock must not hang the others for ever): an
uncontended take costs one system call; a contended one waits on a helper thread the caller waits for with a timeout.
Where `fcntl` is missing (Windows) there is no file lock, and SQLite's busy answers are polled as before.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class WriterLock:
    """An exclusive lock on `path` (created 0600) shared by every process that writes the same database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        if fcntl is not None:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._waiter: ThreadPoolExecutor | None = None
        self._guard = threading.Lock()

    def acquire(self, timeout: float) -> None:
        """Take the lock, waiting at most `timeout` seconds for another process's transaction to end; raises
        `sqlite3.OperationalError` ("database is locked") past it, as a busy database would."""
        fd = self._fd
        if fd is None or fcntl is None or os.environ.get("XNOFLOCK"):
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if os.environ.get("XFLOCKDIRECT"):
                fcntl.flock(fd, fcntl.LOCK_EX)
                return
        # Contended: block in a helper thread (flock has no timeout) and wait for it with one.
        if self._waiter is None:
            self._waiter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aqven-writer-lock")
        state = {"got": False, "abandoned": False}  # both changed under self._guard only

        def wait() -> None:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with self._guard:
                if state["abandoned"]:  # the caller gave up meanwhile: the lock is not its to hold
                    fcntl.flock(fd, fcntl.LOCK_UN)
                else:
                    state["got"] = True

        future = self._waiter.submit(wait)
        try:
            future.result(timeout=timeout)
        except FutureTimeout:
            with self._guard:
                if not state["got"]:
                    state["abandoned"] = True
            if not state["got"]:
                raise sqlite3.OperationalError(f"database is locked (another process held {self.path.name})") from None

    def release(self) -> None:
        if self._fd is not None and fcntl is not None and not os.environ.get("XNOFLOCK"):
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._waiter is not None:
            self._waiter.shutdown(wait=False, cancel_futures=True)
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
