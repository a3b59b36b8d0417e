"""A provider that stops answering: its calls are held with a bounded, jittered backoff instead of failing.

A connection refused (or reset, or a host that does not resolve) says nothing about the model; it is a server
restarting, a laptop's Wi-Fi, a single-slot local server being replaced. The engine keeps retrying such calls
(`outage_wait`), every wait drawn with jitter so that many attempts do not come back in step, for at most
``engine.outage_hold_s`` (120 s by default) counted from when the provider was first found unreachable — one
clock per provider and base URL, shared by every attempt of every series, so an attempt that starts during an
outage does not wait a whole new hold. Past the hold, calls fail as before: `PROVIDER_ERROR`, an
infrastructure error. The first call that reaches the provider again ends the outage.

On a shared store the clock is the database's (`use`, with store/provider_limits.py): an outage that one worker
found is the one every worker holds its calls for, so a worker that meets it later does not start a new hold.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from typing import Protocol

from aqven.models.outcomes import PROVIDER_ERROR, ModelCallError
from aqven.project.local_servers import LOCAL_SERVERS
from aqven.project.schema import AgentSpec

MAX_WAIT_S = 30.0
_lock = threading.Lock()
_down_since: dict[tuple[str, str], float] = {}


class SharedOutages(Protocol):
    """The outage clocks of every process of a shared store, kept in its database."""

    def failing(self, key: str) -> float:
        """A call to `key` found it unreachable: seconds since the outage began (0 when this call began it)."""
        ...

    def reached(self, key: str) -> None:
        """A call reached `key`: its outage is over."""
        ...


_shared: SharedOutages | None = None


def use(shared: SharedOutages | None) -> None:
    """Keep the outage clocks in `shared` (every process of a shared store), or in this process again (None)."""
    global _shared
    _shared = shared


def current() -> SharedOutages | None:
    """Where the outage clocks are kept now: None for this process's memory."""
    return _shared


def _shared_key(key: tuple[str, str]) -> str:
    return f"{key[0]} {key[1]}"


def key_of(agent: AgentSpec) -> tuple[str, str]:
    server = LOCAL_SERVERS.get(agent.server or "")
    return agent.provider, agent.base_url or (server.base_url if server else "")


def unreachable(exc: ModelCallError) -> bool:
    """A call that never reached the provider: no HTTP status, nothing used, a connection error."""
    return (
        exc.code == PROVIDER_ERROR
        and exc.provider_status is None
        and exc.requests == 0
        and "cannot reach the provider" in exc.message
    )


def jittered(wait_s: float) -> float:
    """A wait drawn between half and all of `wait_s` ("equal jitter"), capped at `MAX_WAIT_S`."""
    wait_s = min(wait_s, MAX_WAIT_S)
    return wait_s / 2 + random.uniform(0, wait_s / 2)


def outage_wait(agent: AgentSpec, tries: int, *, backoff_s: float, hold_s: float) -> float | None:
    """After an unreachable call: how long to wait before trying again, or None when the hold is over."""
    key = key_of(agent)
    now = time.monotonic()
    with _lock:
        since = _down_since.setdefault(key, now)
    shared = _shared
    if shared is not None:  # the outage may have begun in another process: its clock is the one that counts
        try:
            since = now - shared.failing(_shared_key(key))
        except Exception:  # the database is unreachable too: this process's own clock holds the call meanwhile
            pass
        else:
            with _lock:
                _down_since[key] = since
    left = hold_s - (now - since)
    if left <= 0:
        return None
    return min(jittered(max(backoff_s, 0.05) * 2 ** min(tries, 10)), left)


def reached(agent: AgentSpec) -> None:
    """A call reached the provider: its outage, if any, is over."""
    key = key_of(agent)
    with _lock:
        was_down = _down_since.pop(key, None) is not None
    shared = _shared
    if was_down and shared is not None:  # only a process that saw the outage writes its end (one write, not one a call)
        with contextlib.suppress(Exception):  # an end not written is forgotten once its row is stale
            shared.reached(_shared_key(key))


def down_for(agent: AgentSpec) -> float | None:
    """Seconds the agent's provider has been unreachable, or None."""
    with _lock:
        since = _down_since.get(key_of(agent))
    return None if since is None else time.monotonic() - since
