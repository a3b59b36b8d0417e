"""Per-provider request and token limits (`providers: {openrouter: {rpm: 60, tpm: 200000}}` in aqven.yaml).

A sliding window of `WINDOW_S` seconds per provider: a call waits while the provider had `rpm` calls, or `tpm`
tokens, in the window. A call counts from its start until `WINDOW_S` after it ended: the provider counts it when
it arrives, which is after it started and before it ended, so counting it to its end plus a window never lets
one more through in any of the provider's windows (counting from the start did, by the time a new connection
takes). Tokens are known only once a call has answered, so a call over the token limit is seen by the next ones,
which wait. One window per provider in the server process, shared by every series; simulated
calls reach no provider and are not limited. With worker processes (`workers` in aqven.yaml) each process keeps
its share of the limits (`share`), so together they stay within them.

On a shared store every process of the project (the server, `aqven worker`s on other machines) keeps one window
per provider together, in the database (`use`, with store/provider_limits.py): a static share would let workers
that join, leave or die together exceed a limit, and idle one worker's share while another waits.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Protocol

WINDOW_S = 60.0


IN_FLIGHT_POLL_S = 0.05  # while every call in the window is still running, how often to look again


@dataclass
class _Window:
    calls: list[list[float]] = field(default_factory=list)  # [ended at (inf while running), tokens] per call


class SharedWindows(Protocol):
    """The windows of every process of a shared store, kept in its database."""

    async def acquire(self, provider: str, *, rpm: int | None, tpm: int | None) -> object:
        """Wait until a call to `provider` fits its limits across every process; returns the call's slot."""
        ...

    def record(self, slot: object, tokens: int) -> None:
        """The call of `slot` ended having used `tokens` (it may be written a moment later)."""
        ...


@dataclass(frozen=True)
class _SharedSlot:
    windows: SharedWindows
    slot: object


Slot = list[float] | _SharedSlot
_windows: dict[str, _Window] = {}
_share = 1  # how many processes split the limits (this one is one of them)
_shared: SharedWindows | None = None


def use(shared: SharedWindows | None) -> None:
    """Keep the limits in `shared` (every process of a shared store), or in this process again (None)."""
    global _shared
    _shared = shared


def current() -> SharedWindows | None:
    """Where the limits are kept now: None for this process's memory."""
    return _shared


def share(processes: int) -> None:
    """This process is one of `processes` calling the same providers: it keeps 1/processes of each limit."""
    global _share
    _share = max(1, processes)


def _part(limit: int | None) -> int | None:
    return None if limit is None else max(1, limit // _share)


def _prune(w: _Window, now: float) -> None:
    w.calls = [c for c in w.calls if c[0] > now - WINDOW_S]


async def acquire(provider: str, *, rpm: int | None, tpm: int | None) -> Slot | None:
    """Wait until a call to `provider` fits its limits; returns the call's slot (give it to `record` when the
    call ended, however it ended)."""
    if rpm is None and tpm is None:
        return None
    shared = _shared
    if shared is not None:
        return _SharedSlot(shared, await shared.acquire(provider, rpm=rpm, tpm=tpm))
    rpm, tpm = _part(rpm), _part(tpm)
    w = _windows.setdefault(provider, _Window())
    while True:
        now = time.monotonic()
        _prune(w, now)
        over_rpm = rpm is not None and len(w.calls) >= rpm
        over_tpm = tpm is not None and sum(c[1] for c in w.calls) >= tpm
        if not (over_rpm or over_tpm):
            slot = [math.inf, 0.0]
            w.calls.append(slot)
            return slot
        # The call that ended first leaves the window first; a running one may end any moment.
        await asyncio.sleep(max(min(min(c[0] for c in w.calls) + WINDOW_S - now, IN_FLIGHT_POLL_S), 0.01))


def record(slot: Slot | None, tokens: int) -> None:
    """A call ended, having used `tokens`: it counts against its provider's limits for one more window."""
    if isinstance(slot, _SharedSlot):
        slot.windows.record(slot.slot, tokens)
    elif slot is not None:
        slot[0] = time.monotonic()
        slot[1] = float(tokens)


def reset() -> None:
    """Forget every window (tests)."""
    _windows.clear()
