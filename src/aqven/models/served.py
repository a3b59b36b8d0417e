"""Which models a local OpenAI-compatible server serves, for `aqven check` (`W_MODEL_NOT_SERVED`).

Only a server on this machine (a loopback `base_url`) is asked, once per URL, with a one-second timeout: the
check stays offline and fast, and a server that is down or lists nothing says nothing. llama.cpp's
`llama-server` answers any model name with the one model it loaded, so an agent on `server: llama-cpp` is not
warned. The CLI's `aqven check` runs this; a series' own check does not (it never waits on a server).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

import httpx2

from aqven.project.diagnostics import Diagnostic
from aqven.project.loader import Project
from aqven.project.local_servers import LOCAL_SERVERS

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
ANY_NAME_SERVERS = frozenset({"llama-cpp"})  # they answer every model name with their one loaded model


def served_models(base_url: str, timeout_s: float = 1.0) -> list[str] | None:
    """The model ids a server lists at ``<base_url>/models``; None when it cannot say (down, error, no list)."""
    try:
        with httpx2.Client(timeout=timeout_s, trust_env=False) as client:  # no proxy for a loopback address
            response = client.get(f"{base_url.rstrip('/')}/models")
        data: Any = response.json() if response.status_code == 200 else None
    except (httpx2.HTTPError, ValueError):
        return None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    ids = [str(item["id"]) for item in items if isinstance(item, dict) and item.get("id")]
    return ids or None


def _base_url(agent_server: str | None, base_url: str | None) -> str | None:
    server = LOCAL_SERVERS.get(agent_server or "")
    return os.environ.get("AQVEN_OPENAI_COMPATIBLE_BASE_URL") or base_url or (server.base_url if server else None)


def served_model_diagnostics(project: Project) -> list[Diagnostic]:
    """A warning per openai-compatible agent whose model a local server does not list."""
    out: list[Diagnostic] = []
    lists: dict[str, list[str] | None] = {}
    for agent_id, agent in project.agents.items():
        if agent.provider != "openai-compatible" or agent.server in ANY_NAME_SERVERS:
            continue
        url = _base_url(agent.server, agent.base_url)
        if not url or urlsplit(url).hostname not in LOOPBACK:
            continue
        if url not in lists:
            lists[url] = served_models(url)
        served = lists[url]
        if served is None or agent.model_name in served:
            continue
        file = project.file_of("agent", agent_id) or f"agents/{agent_id}.yaml"
        shown = ", ".join(served[:8]) + (", …" if len(served) > 8 else "")
        out.append(
            Diagnostic.of(
                "W_MODEL_NOT_SERVED",
                f"agent {agent_id!r}: the server at {url} does not list the model {agent.model_name!r} "
                f"(it lists: {shown}); its calls would fail",
                file=file,
                line=project.doc_line(file, ("model",)),
                hint=f"model: openai-compatible:{served[0]}",
                severity="warning",
            )
        )
    return out
