"""Who answers a tool call the MCP server received: the project service in this process (`ServiceBackend`, the
`/mcp` endpoint of the project server), or the project server's own `/mcp` over HTTP (`aqven.server.mcp_stdio`)."""

from __future__ import annotations

import json
from typing import Any, Protocol

from mcp_types import CallToolResult, TextContent
from pydantic_core import to_jsonable_python

from aqven.server.service import ProjectService
from aqven.server.tool_registry import ToolSpec


class Backend(Protocol):
    """Runs one tool with arguments the MCP server already validated against its input schema."""

    async def call(self, spec: ToolSpec, args: dict[str, Any]) -> CallToolResult: ...


def ok(data: Any) -> CallToolResult:
    """A tool's answer: the model as JSON, structured and as text (a model dumps the fields it was given)."""
    structured = to_jsonable_python(data)
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(structured, ensure_ascii=False, separators=(",", ":")))],
        structured_content=structured,
    )


class ServiceBackend:
    """The project service of this process; a tool's `AqvenError` propagates to the MCP server's error result."""

    def __init__(self, service: ProjectService) -> None:
        self.svc = service

    async def call(self, spec: ToolSpec, args: dict[str, Any]) -> CallToolResult:
        return ok(await spec.fn(self.svc, **args))
