"""The server's pool of worker processes: which worker an attempt goes to while one of them is dying."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from aqven.research.series.workers import RaisedInWorker, WorkerDied, WorkerPool
from support.series_kit import case_names, write_tiny


def test_a_worker_whose_pipe_ended_gets_no_work_while_it_is_buried(
    tiny_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL one worker and hold its burial (the kill + wait that fails its attempts): an attempt handed out
    meanwhile goes to a worker that takes work. Handed to the dying one, it failed at once with `WorkerDied`, and
    each retry picked the same one until the attempt was lost (`WORKER_LOST`) after a single kill."""
    root = write_tiny(tmp_path / "tiny", case_names(2, 0))
    buried = asyncio.Event()
    real_bury = WorkerPool._bury

    async def held_bury(self: WorkerPool, worker: Any) -> None:
        await buried.wait()
        await real_bury(self, worker)

    monkeypatch.setattr(WorkerPool, "_bury", held_bury)

    async def go() -> tuple[BaseException | None, list[int]]:
        pool = WorkerPool(root, 2)
        try:
            assert await pool.ready()
            victim = pool._workers[0]  # both idle: the first is the one picked first
            os.kill(victim.proc.pid, signal.SIGKILL)
            for _ in range(200):
                if victim.outbox.closed:
                    break
                await asyncio.sleep(0.05)
            assert victim.outbox.closed and victim.alive  # its pipe ended; not buried yet
            # A series that does not exist: the worker that takes it answers with the error it raised.
            nowhere: Any = SimpleNamespace(id="ser_nowhere")
            try:
                await pool.run(nowhere, SimpleNamespace(idx=0), "run_x")  # type: ignore[arg-type]
                raised: BaseException | None = None
            except (RaisedInWorker, WorkerDied) as exc:
                raised = exc
            buried.set()
            for _ in range(200):
                if not victim.alive:
                    break
                await asyncio.sleep(0.05)
            return raised, pool.pids()
        finally:
            buried.set()
            pool.close()

    raised, pids = asyncio.run(go())
    assert isinstance(raised, RaisedInWorker), raised  # answered by a live worker, not failed on the dying one
    assert len(pids) == 2  # the dying one was replaced
