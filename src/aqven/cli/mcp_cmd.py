"""`aqven mcp`: the project's MCP tools over stdio, for coding agents.

The process is a thin client of the project server: it finds the server through `.aqven/server.json`, starts it
when none runs, and answers every tool call with the server's REST API. Its stdout carries MCP messages only;
anything for people goes to stderr.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import anyio


def run_mcp(root: Path) -> None:
    """Serve MCP over stdin/stdout until the client closes it (raises `AqvenError` when no server can start)."""
    from aqven.server.mcp_stdio import serve_stdio

    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve_stdio, root)
