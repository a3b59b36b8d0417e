"""A FIFO gate for the CPU phases of concurrent attempts, released while they wait on a model.

Attempts started together would otherwise stay in waves: asyncio round-robins their many await points, so
each attempt's work before and after its model call waits for the CPU of the whole wave, and a
latency-bound series takes a multiple of attempts × latency / concurrency. Holding one gate for the CPU
phases (an `asyncio.Lock`, which hands over in FIFO order) and releasing it around the waits lets each
phase run to its end in arrival order.

An attempt's flow may run nodes in child tasks: they share the attempt's hold (a context variable), and the
first of them to wait releases it; the others run on meanwhile (`released` is then a no-op for them), and
the one that released takes it back. Whoever holds the gate always reaches a wait or its end without
needing the gate again, so the gate cannot deadlock.

The series runner holds the gate for an attempt (`held`); `call_model` releases it around the model
exchange and the engine around a retry's sleep (`released`). The gate orders work, it guards no data: a
task that does not hold it (a child task of a parallel flow, a call outside a series) simply runs.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass


class CpuGate:
    """One holder at a time, in FIFO order."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.waiting = 0  # tasks queued for the gate

    def busy(self) -> bool:
        """Whether a CPU phase runs or waits for its turn (the store's group commit waits while one does)."""
        return self.lock.locked() or self.waiting > 0

    async def take(self) -> None:
        self.waiting += 1
        try:
            await self.lock.acquire()
        finally:
            self.waiting -= 1


@dataclass
class _Hold:
    gate: CpuGate
    holding: bool = False


_CURRENT: contextvars.ContextVar[_Hold | None] = contextvars.ContextVar("aqven_cpu_gate", default=None)


@asynccontextmanager
async def held(gate: CpuGate | None) -> AsyncIterator[None]:
    """Run the block holding `gate` (None: no gate)."""
    if gate is None:
        yield
        return
    hold = _Hold(gate)
    await gate.take()
    hold.holding = True
    token = _CURRENT.set(hold)
    try:
        yield
    finally:
        _CURRENT.reset(token)
        if hold.holding:
            hold.holding = False
            gate.lock.release()


@asynccontextmanager
async def released() -> AsyncIterator[None]:
    """Run the block (a wait) without the gate, if this attempt holds it; take it back after, in turn."""
    hold = _CURRENT.get()
    if hold is None or not hold.holding:
        yield
        return
    hold.holding = False
    hold.gate.lock.release()
    try:
        yield
    finally:
        await hold.gate.take()
        hold.holding = True
