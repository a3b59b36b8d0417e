"""The FIFO gate: CPU phases of concurrent attempts run whole and in turn, waits run side by side."""

from __future__ import annotations

import asyncio

from aqven.models.gate import CpuGate, held, released


async def attempt(gate: CpuGate | None, name: str, log: list[str], wait_s: float, steps: int = 5) -> None:
    async with held(gate):
        for i in range(steps):  # a CPU phase with many await points, as an engine's is
            log.append(f"{name}.before{i}")
            await asyncio.sleep(0)
        async with released():
            await asyncio.sleep(wait_s)
        for i in range(steps):
            log.append(f"{name}.after{i}")
            await asyncio.sleep(0)


def phases(log: list[str]) -> list[str]:
    """The log with runs of one attempt's one phase collapsed to one entry."""
    out: list[str] = []
    for entry in log:
        phase = entry.rstrip("0123456789")
        if not out or out[-1] != phase:
            out.append(phase)
    return out


async def test_without_a_gate_phases_interleave() -> None:
    log: list[str] = []
    await asyncio.gather(*(attempt(None, n, log, 0.01) for n in "abc"))
    assert len(phases(log)) > 6  # the convoy: every phase waits for the whole wave's steps


async def test_with_the_gate_each_phase_runs_whole_and_in_fifo_order() -> None:
    gate = CpuGate()
    log: list[str] = []
    waits = {"a": 0.03, "b": 0.01, "c": 0.02}
    await asyncio.gather(*(attempt(gate, n, log, waits[n]) for n in "abc"))
    assert phases(log) == ["a.before", "b.before", "c.before", "b.after", "c.after", "a.after"]


async def test_the_gate_is_free_while_every_holder_waits() -> None:
    gate = CpuGate()
    waiting = 0
    most = 0

    async def one() -> None:
        nonlocal waiting, most
        async with held(gate), released():
            waiting += 1
            most = max(most, waiting)
            await asyncio.sleep(0.05)
            waiting -= 1

    await asyncio.gather(*(one() for _ in range(20)))
    assert most == 20  # all twenty waited at once
    assert not gate.lock.locked()


async def test_child_tasks_share_the_hold_and_nothing_deadlocks() -> None:
    """A flow running nodes in child tasks: the first to wait releases, the rest run on; all finish."""
    gate = CpuGate()
    done: list[str] = []

    async def node(name: str, wait_s: float) -> None:
        await asyncio.sleep(0)
        async with released():
            await asyncio.sleep(wait_s)
        done.append(name)

    async def flow(tag: str) -> None:
        async with held(gate):
            await asyncio.gather(*(asyncio.ensure_future(node(f"{tag}{i}", 0.01 * i)) for i in range(3)))
            async with released():  # a retry's sleep after the parallel nodes
                await asyncio.sleep(0)

    await asyncio.wait_for(asyncio.gather(*(flow(t) for t in "pqr")), timeout=10)
    assert sorted(done) == sorted(f"{t}{i}" for t in "pqr" for i in range(3))
    assert not gate.lock.locked()


async def test_released_without_a_gate_just_runs() -> None:
    async with released():
        await asyncio.sleep(0)
    async with held(None), released():
        await asyncio.sleep(0)


async def test_a_cancelled_holder_gives_the_gate_back() -> None:
    gate = CpuGate()
    log: list[str] = []
    task = asyncio.ensure_future(attempt(gate, "a", log, 5.0))
    while "a.before4" not in log:
        await asyncio.sleep(0)
    await asyncio.sleep(0.01)  # now in its wait
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.wait_for(attempt(gate, "b", log, 0.0), timeout=5)
    assert not gate.lock.locked()
