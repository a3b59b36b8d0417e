"""Per-provider request and token limits (`providers: {openrouter: {rpm: 60, tpm: 200000}}` in aqven.yaml).

A sliding window of `WINDOW_S` seconds per provider: a call waits while the provider had `rpm` calls, or `tpm`
tokens, in the window. Tokens are known only once a call has answered, so a call over the token limit is seen
by the next ones, which wait. One window per provider in the server process, shared by every series; simulated
calls reach no provider and are not limited.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

WINDOW_S = 60.0


@dataclass
class _Window:
    calls: deque[list[float]] = field(default_factory=deque)  # [started at, tokens] per call in the window


_windows: dict[str, _Window] = {}


def _prune(w: _Window, now: float) -> None:
    while w.calls and w.calls[0][0] <= now - WINDOW_S:
        w.calls.popleft()


async def acquire(provider: str, *, rpm: int | None, tpm: int | None) -> list[float] | None:
    """Wait until a call to `provider` fits its limits; returns the call's slot (give it to `record`)."""
    if rpm is None and tpm is None:
        return None
    w = _windows.setdefault(provider, _Window())
    while True:
        now = time.monotonic()
        _prune(w, now)
        over_rpm = rpm is not None and len(w.calls) >= rpm
        over_tpm = tpm is not None and sum(c[1] for c in w.calls) >= tpm
        if not (over_rpm or over_tpm):
            slot = [now, 0.0]
            w.calls.append(slot)
            return slot
        # The oldest call leaves the window first: nothing fits before then.
        await asyncio.sleep(max(w.calls[0][0] + WINDOW_S - now, 0.01))


def record(slot: list[float] | None, tokens: int) -> None:
    """The tokens a call used, counted against its provider's `tpm` for the rest of the window."""
    if slot is not None:
        slot[1] = float(tokens)


def reset() -> None:
    """Forget every window (tests)."""
    _windows.clear()
