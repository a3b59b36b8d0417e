"""Group commit: the writes that concurrent attempts of one process reach together share one transaction.

A commit costs about as much as the writes it holds, and with worker processes every transaction also queues for
SQLite's one writer and empties the other processes' page caches. So an attempt that must have a write on record
before it goes on (its claim before it pays for a model, its end before it answers) hands the write here and waits:
the writes handed in while the process's CPU phases still run (`hold`, the CPU gate's `busy`) are written together,
each in a savepoint of its own (one that raises is undone alone, and raises in its own caller), in one transaction,
at most `WAIT_S` after the first. A caller resumes only once its write is committed, so what it does next never
runs ahead of its record.

Where each statement is a round trip to a server (PostgreSQL, `whole_first`), a group is first written whole: no
savepoint per write and one wait for the answers, at its commit. A group that fails so (a write raised, a statement
failed, a check found its row taken) is certainly not written (`undone`): it is written again write by write, each in
its savepoint and answered before the next, so the failure is its write's alone. A write may so run twice: it leaves
nothing behind in Python that its group's rollback would not also undo (the stores' caches count rollbacks).

Order is kept: a plain transaction of the same connection first writes what is queued here (`drain`), so a write
handed in earlier is never committed after one made later. A write whose caller was cancelled before its turn is
not written at all, as if the caller had been cancelled before it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

WAIT_S = 0.002  # the longest a write waits for others to join it
MAX_WRITES = 64  # a group this big is written at once
RETRY_S = 0.0002  # a group that found the writer lock taken tries again after this
LOCK_WAIT_S = 1.0  # after this, a group waits for the lock as a plain transaction does (and fails in the end)


class Later(Generic[T]):
    """A grouped write's answer that is read once its group is committed (`Database.grouped`): from a statement's
    result that came with the commit's answers, where the group's statements are pipelined, instead of by a wait of
    its own in the middle of the group."""

    __slots__ = ("_read",)

    def __init__(self, read: Callable[[], T]) -> None:
        self._read = read

    def read(self) -> T:
        return self._read()

    def then(self, make: Callable[[T], R]) -> Later[R]:
        """The answer `make` makes of this one, read when this one is."""
        return Later(lambda: make(self._read()))


@dataclass
class _Queued:
    write: Callable[[], Any]
    future: asyncio.Future[Any]


def _never() -> bool:
    return False


class GroupCommit:
    """The queue of one connection's grouped writes (`Database.grouped`)."""

    def __init__(
        self,
        transaction: Callable[..., AbstractContextManager[Any]],
        *,
        busy: Callable[[BaseException], bool],
        undone: Callable[[BaseException], bool],
        whole_first: bool,
    ) -> None:
        self._transaction = transaction  # Database.transaction: `wait=False` fails at once on another's lock
        self._busy = busy  # the error of a BEGIN that found another process's writer lock (SQLite)
        self._undone = undone  # the error of a group that is certainly not written, on a connection that goes on
        self._whole_first = whole_first
        self._queue: list[_Queued] = []
        self._guard = threading.Lock()  # the queue is appended on the loop's thread, drained on any
        self._ticking = False
        self.hold: Callable[[], bool] = _never  # while true, a queued write waits for more to join it

    async def write(self, write: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._guard:
            self._queue.append(_Queued(write, future))
        if not self._ticking:
            self._ticking = True
            loop.call_soon(self._tick, loop, time.monotonic())
        return await future

    def _tick(self, loop: asyncio.AbstractEventLoop, since: float) -> None:
        waited = time.monotonic() - since
        if self._queue and self.hold() and len(self._queue) < MAX_WRITES and waited < WAIT_S:
            loop.call_soon(self._tick, loop, since)
            return
        # Another process holds the writer lock: try again soon, and let the loop run meanwhile (the attempts'
        # CPU phases go on, and their writes join this group) instead of sleeping on the lock.
        if not self.drain(wait=waited > LOCK_WAIT_S):
            loop.call_later(RETRY_S, self._tick, loop, since)
            return
        self._ticking = False

    def drain(self, *, wait: bool = True) -> bool:
        """Write what is queued, now (on the caller's thread, under the connection's lock). False when `wait` is
        off and another process holds the writer lock: then nothing is written and the queue stays as it was."""
        if not self._queue:
            return True
        with self._guard:
            queued, self._queue = [q for q in self._queue if not q.future.cancelled()], []
        if not queued:
            return True
        whole = self._whole_first
        while True:
            done: list[tuple[_Queued, bool, Any]] = []
            begun = False
            try:
                with self._transaction(wait=wait, pipelined=True, whole=whole):
                    begun = True
                    for q in queued:
                        ok, value = self._one(q)
                        if whole and not ok:
                            raise value  # the group is undone whole, and written again write by write
                        done.append((q, ok, value))
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # the group's BEGIN or COMMIT failed: nothing of it is written
                if not begun and not wait and self._busy(exc):
                    with self._guard:
                        self._queue[:0] = queued
                    return False
                if whole and begun and self._undone(exc):
                    whole = False
                    continue
                done = [(q, False, exc) for q in queued]
            break
        for q, ok, value in done:
            _settle(q.future, ok, value)
        return True

    def _one(self, q: _Queued) -> tuple[bool, Any]:
        """Write one queued write in a savepoint of its own: one that raises is undone alone."""
        try:
            with self._transaction():
                return True, q.write()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # it is raised again in the write's caller
            return False, exc


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """Answer a queued write's caller, on its loop's thread (a plain transaction on another thread may drain)."""
    loop = future.get_loop()
    try:
        here = asyncio.get_running_loop() is loop
    except RuntimeError:
        here = False
    if here:
        _answer(future, ok, value)
    else:
        loop.call_soon_threadsafe(_answer, future, ok, value)


def _answer(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
