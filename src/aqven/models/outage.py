"""A provider that stops answering: its calls are held with a bounded, jittered backoff instead of failing.

A connection refused (or reset, or a host that does not resolve) says nothing about the model; it is a server
restarting, a laptop's Wi-Fi, a single-slot local server being replaced. The engine keeps retrying such calls
(`outage_wait`), every wait drawn with jitter so that many attempts do not come back in step, for at most
``engine.outage_hold_s`` (120 s by default) counted from when the provider was first found unreachable — one
clock per provider and base URL, shared by every attempt of every series, so an attempt that starts during an
outage does not wait a whole new hold. Past the hold, calls fail as before: `PROVIDER_ERROR`, an
infrastructure error. The first call that reaches the provider again ends the outage.
"""

from __future__ import annotations

import random
import threading
import time

from aqven.models.outcomes import PROVIDER_ERROR, ModelCallError
from aqven.project.local_servers import LOCAL_SERVERS
from aqven.project.schema import AgentSpec

MAX_WAIT_S = 30.0
_lock = threading.Lock()
_down_since: dict[tuple[str, str], float] = {}


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
    left = hold_s - (now - since)
    if left <= 0:
        return None
    return min(jittered(max(backoff_s, 0.05) * 2 ** min(tries, 10)), left)


def reached(agent: AgentSpec) -> None:
    """A call reached the provider: its outage, if any, is over."""
    with _lock:
        _down_since.pop(key_of(agent), None)


def down_for(agent: AgentSpec) -> float | None:
    """Seconds the agent's provider has been unreachable, or None."""
    with _lock:
        since = _down_since.get(key_of(agent))
    return None if since is None else time.monotonic() - since
