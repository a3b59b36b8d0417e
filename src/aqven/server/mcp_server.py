"""The MCP tools of a project, with the official `mcp` SDK (`MCPServer`).

The tools are the registry's (`aqven.server.tools`, where their rules are written: held-out cases never shown
one by one, no approval). Served two ways with the same tools, schemas and rules: over streamable HTTP at `/mcp`
of the project server itself (`ServiceBackend`, calling `ProjectService` directly), and over stdio by
`aqven mcp` (`aqven.server.mcp_stdio`, which forwards each call to that `/mcp`).

* Errors are MCP tool errors (`isError`) whose text is ``{"error": {"code", "message", "hint", "details"}}``
  with the REST API's stable codes; arguments that break a tool's input schema give `VALIDATION_ERROR`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from aqven import __version__
from aqven.errors import AqvenError
from aqven.server.mcp_backend import Backend, ServiceBackend
from aqven.server.security import HOST
from aqven.server.service import ProjectService
from aqven.server.tool_registry import Effect, ToolSpec, validation_problem
from aqven.server.tools import TOOLS

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger("aqven.mcp")

INSTRUCTIONS = """\
AQVEN makes LLM flows reliable in rounds. Before you propose a change, read what the project already knows:
read_findings_md (FINDINGS.md). Then, round after round: aqven_check after every edit; series_start with a look
on a few named cases to see what a flow does; write the question as an experiment file
(experiments/<id>/experiment.yaml) and explore it on working cases (on: dev) as often as you need; wait with
series_get (wait_seconds up to 50) until the status settles; read the failing cases with include_cases and open
a run with run_get, run_events and run_get_node; confirm once on held-out cases (on: holdout) and quote
verdict.text as it is. Every attempt calls the models and costs money. No tool approves a paused series: tell
the user what it spent; they continue it in Studio. Held-out cases are never shown one by one.
"""


# ---- results and errors ---------------------------------------------------------------------------------------


def error_result(error: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(to_jsonable_python({"error": error}), ensure_ascii=False))],
        is_error=True,
    )


class AqvenTool(Tool):
    """A tool whose failures come back as tool errors carrying AQVEN's stable codes."""

    async def run(self, arguments: dict[str, Any], context: Context[Any, Any], convert_result: bool = False) -> Any:
        known = set(self.parameters.get("properties", {}))
        unknown = sorted(set(arguments) - known)
        if unknown:
            return error_result(
                {
                    "code": "VALIDATION_ERROR",
                    "message": f"unknown argument(s) of {self.name}: {', '.join(unknown)}",
                    "hint": f"arguments: {', '.join(sorted(known)) or 'none'}",
                    "details": {"problems": [{"loc": [u], "message": "unknown argument"} for u in unknown]},
                }
            )
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, AqvenError):
                return error_result(cause.to_dict())
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                return error_result(validation_problem(cause))
            log.error("tool %s failed", self.name, exc_info=cause or exc)
            return error_result(
                {
                    "code": "INTERNAL_ERROR",
                    "message": f"{self.name} failed unexpectedly ({type(cause or exc).__name__})",
                    "hint": "see the project server's log (.aqven/server.log); the request may be retried",
                }
            )


# ---- the tools, from the registry ----------------------------------------------------------------------------

_HINTS: dict[Effect, ToolAnnotations] = {
    "read": ToolAnnotations(read_only_hint=True, open_world_hint=False),
    "spends": ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
    ),
    "destroys": ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
    ),
}


def _mcp_tool(spec: ToolSpec, backend: Backend) -> Tool:
    """`spec` as an MCP tool: its signature gives the input schema, its output model the output schema."""

    async def call(**args: Any) -> CallToolResult:
        return await backend.call(spec, args)

    call.__name__ = call.__qualname__ = spec.name  # the input schema's title: "<name>Arguments"
    sig = spec.signature.replace(return_annotation=Annotated[CallToolResult, spec.output])
    call.__signature__ = sig  # type: ignore[attr-defined]
    call.__annotations__ = {name: p.annotation for name, p in sig.parameters.items()} | {
        "return": sig.return_annotation
    }
    tool = AqvenTool.from_function(
        call, name=spec.name, title=spec.title, description=spec.description, annotations=_HINTS[spec.effect]
    )
    tool.parameters["additionalProperties"] = False
    return tool


def build_server(backend: Backend) -> MCPServer[Any]:
    """The MCP server of a project over `backend`: every tool of the registry."""
    return MCPServer(
        "aqven",
        title="AQVEN",
        instructions=INSTRUCTIONS,
        version=__version__,
        tools=[_mcp_tool(spec, backend) for spec in TOOLS],
        log_level="WARNING",
    )


def tool_names() -> list[str]:
    return TOOLS.names()


# ---- transports -----------------------------------------------------------------------------------------------


def mount_mcp(app: FastAPI, service: ProjectService) -> MCPServer[Any]:
    """Serve the tools over streamable HTTP at `/mcp` of the project server, calling `service` directly."""
    server = build_server(ServiceBackend(service))
    http_app = server.streamable_http_app(streamable_http_path="/mcp", host=HOST)
    app.router.routes[0:0] = http_app.routes  # before any catch-all route of Studio
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state, server.session_manager.run():
            yield state

    app.router.lifespan_context = lifespan
    app.state.mcp = server
    return server
