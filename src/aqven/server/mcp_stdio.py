"""`aqven mcp`: the MCP tools over stdio, each call forwarded to the project server's own `/mcp`.

The bridge lists the registry's tools itself (the MCP handshake does not wait for the server) and sends every
call to the project server, which starts in the background when none runs and again when it stopped between two
calls. The answers are the server's own, so stdio and `/mcp` give the same results and errors.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio.to_thread
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult
from pydantic_core import to_jsonable_python

from aqven.errors import AqvenError, ServerError
from aqven.server.client import Client
from aqven.server.lifecycle import read_server
from aqven.server.mcp_server import build_server
from aqven.server.tool_registry import ToolSpec

CALL_TIMEOUT_S = 600.0  # longer than any tool holds an answer (series_get waits up to 50 s)


class Unreachable(Exception):
    """The project server did not answer (no connection, or it went away during the call)."""

    def __init__(self, cause: BaseException, *, refused: bool) -> None:
        super().__init__(str(cause))
        self.refused = refused  # the request never reached a server: safe to send again


def _refused(exc: BaseException) -> bool:
    """Whether the failure was a refused connection (searched through exception groups and causes)."""
    seen: list[BaseException] = [exc]
    while seen:
        e = seen.pop()
        if "ConnectError" in type(e).__name__ or isinstance(e, ConnectionRefusedError):
            return True
        if isinstance(e, BaseExceptionGroup):
            seen.extend(e.exceptions)
        if e.__cause__ is not None:
            seen.append(e.__cause__)
    return False


async def forward(client: Client, name: str, args: dict[str, Any]) -> CallToolResult:
    """One tool call on the project server's `/mcp`, in a session of its own."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {client.token}"})
    try:
        async with (
            http,
            streamable_http_client(f"{client.base}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await session.call_tool(name, args, read_timeout_seconds=CALL_TIMEOUT_S)
    except Exception as exc:
        raise Unreachable(exc, refused=_refused(exc)) from exc


class HttpBackend:
    """The project server of `root` (started in the background at once; the first tool call waits for it)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aqven-server")
        self._client: Future[Client] = self._pool.submit(Client, self.root)

    async def _connected(self) -> Client:
        try:
            return await anyio.to_thread.run_sync(self._client.result)
        except AqvenError:  # SERVER_START_FAILED: say so now, and try again on the next call
            self._client = self._pool.submit(Client, self.root)
            raise

    async def call(self, spec: ToolSpec, args: dict[str, Any]) -> CallToolResult:
        client = await self._connected()
        payload = to_jsonable_python(args)
        try:
            return await forward(client, spec.name, payload)
        except Unreachable as exc:
            info = await anyio.to_thread.run_sync(read_server, self.root)
            if info is not None and info.get("healthy"):
                raise ServerError(f"the project server failed to answer {spec.name}: {exc}") from None
            # It stopped since the last call: start it again (a new server has a new token). A call that may have
            # reached the old server is sent again only when it reads.
            await anyio.to_thread.run_sync(client.connect)
            if spec.effect == "read" or exc.refused:
                return await forward(client, spec.name, payload)
            raise ServerError(
                f"the project server stopped during {spec.name}; whether it took effect is unknown",
                hint="read the state back (series_list, series_get) before you try again",
            ) from None


async def serve_stdio(root: Path) -> None:
    """Serve the tools over stdin/stdout until the client closes it."""
    await build_server(HttpBackend(root)).run_stdio_async()
