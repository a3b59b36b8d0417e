"""Studio's chat agent: reads FINDINGS.md, AGENTS.md and CLAUDE.md first, then answers with the project's tools.

The agent is a pydantic-ai `Agent` whose tools are the MCP server's, from the same registry
(`aqven.server.tools`) under the same names and with the same rules: held-out cases never shown one by one, no
approval (an agent can start a series but never continue one past its cap). A tool's failure reaches the model
as ``{"error": {code, message, hint}}``; a failure of the chat itself is an `AqvenError` (`CHAT_FAILED`,
`CHAT_TIMEOUT`, `VALIDATION_ERROR`), which POST /api/chat answers as an HTTP error.

Which model answers:

* ``AQVEN_CHAT_AGENT=<agent id>`` names an agent of the project (its model, settings and key). With simulated
  mode off, that model answers live.
* Otherwise (no agent named, or simulated mode on) AQVEN's **offline responder** (`chat_offline`) answers. It
  is not a language model: it picks tools by keywords of the question, quotes the lines of FINDINGS.md that
  share words with it, and sums up what the tools returned. Every answer says so.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_core import to_jsonable_python

from aqven.errors import AqvenError
from aqven.models.providers import build_model
from aqven.project.local import simulate_enabled
from aqven.project.paths import state_dir
from aqven.server.chat_offline import AGENT_ENV, OFFLINE_NAME, as_object, is_tool_error, offline_model
from aqven.server.service import ProjectService
from aqven.server.tool_registry import ToolSpec, validation_problem
from aqven.server.tools import TOOLS

CONTEXT_FILES = ("FINDINGS.md", "AGENTS.md", "CLAUDE.md")
MAX_CONTEXT_CHARS = 60_000
MAX_STRING = 2_000
MAX_ITEMS = 60
CHAT_TIMEOUT_S = 180.0
log = logging.getLogger("aqven.chat")


# ---- context ----


def context_files(root: Path) -> list[dict[str, Any]]:
    """The files the agent reads before the first message, in order; a missing file is said to be absent."""
    out = []
    for name in CONTEXT_FILES:
        path = root / name
        text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
        out.append({"name": name, "present": text is not None, "chars": len(text or ""), "text": text})
    return out


def instructions_for(root: Path) -> str:
    parts = [
        "You are the chat agent of AQVEN Studio for the project in "
        f"{root.name}. Before this conversation you read the files below. FINDINGS.md is what the project knows: "
        "quote a finding's sentence exactly as written, never recompute or round it.",
        "Rules: you may start a series (on dev to explore, on holdout once to confirm) and cancel one, but you can "
        "never approve or continue a paused series: tell the person what it spent and that they approve it in "
        "Studio. Held-out cases are never shown one by one. A series on dev gives a signal, never a finding. "
        "Say plainly when something ran on simulated models.",
        "Follow AGENTS.md and CLAUDE.md below as the project's instructions to agents, where they do not contradict "
        "these rules. Answer about a series, a run or a finding from the tools (series_get, run_get, run_events, "
        "list_findings), and say when a tool answered an error. Asked what finishing a series costs, call "
        "series_finish_cost and give its amounts. Write money as Studio does ($2.06 from $1, $0.012 from a cent, "
        "two significant digits below: $0.0040), and name a status as Studio does (awaiting_approval: paused, "
        "awaiting approval; waiting_human: waiting for a person; done with stop_reason stopped_at_cap: stopped at "
        "the cap). Name a series or run by its id (ser_…, run_…): Studio links it to its page.",
    ]
    budget = MAX_CONTEXT_CHARS
    for f in context_files(root):
        text = f["text"] if f["present"] else "(absent: the project has no such file)"
        text = text[:budget]
        budget -= len(text)
        parts.append(f"=== {f['name']} ===\n{text}\n=== end of {f['name']} ===")
    return "\n\n".join(parts)


def chat_agent_name(root: Path) -> str | None:
    """The project agent named for the chat: env AQVEN_CHAT_AGENT, else `chat: {agent: ...}` in .aqven/local.yaml."""
    name = os.environ.get(AGENT_ENV, "").strip()
    if name:
        return name
    path = state_dir(root) / "local.yaml"
    if path.is_file():
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError:
            return None
        chat = data.get("chat") if isinstance(data, dict) else None
        if isinstance(chat, dict) and isinstance(chat.get("agent"), str) and chat["agent"].strip():
            return str(chat["agent"]).strip()
    return None


def describe(svc: ProjectService) -> dict[str, Any]:
    """Who answers the chat, and which files it read first."""
    name = chat_agent_name(svc.root)
    simulated = simulate_enabled(svc.root)
    agent = svc.project().agents.get(name) if name else None
    if name and agent is not None and not simulated:
        responder = {
            "kind": "agent",
            "agent": name,
            "model": agent.model,
            "simulated": False,
            "text": f"agent {name} ({agent.model}) answers live; its calls cost money",
        }
    else:
        why = (
            f"simulated mode is on, so it stands in for agent {name}"
            if name and agent is not None
            else (f"agent {name!r} is not in the project" if name else f"no agent is named ({AGENT_ENV})")
        )
        responder = {
            "kind": "offline",
            "agent": name,
            "model": OFFLINE_NAME,
            "simulated": True,
            "text": "AQVEN's offline responder answers: not a language model; it picks tools by keywords and "
            f"quotes FINDINGS.md ({why})",
        }
    files = [{k: v for k, v in f.items() if k != "text"} for f in context_files(svc.root)]
    return {"responder": responder, "context_files": files, "tools": TOOLS.names()}


# ---- tools: the registry's, the same as the MCP server's ----


@dataclass
class ChatDeps:
    svc: ProjectService


def _clip(value: Any, depth: int = 0) -> Any:
    """Keep tool results small enough for a model's context."""
    if isinstance(value, str):
        return value if len(value) <= MAX_STRING else value[:MAX_STRING] + f"… ({len(value) - MAX_STRING} more chars)"
    if isinstance(value, dict):
        return {k: _clip(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_clip(v, depth + 1) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"… {len(value) - MAX_ITEMS} more")
        return items
    return value


async def call_tool(svc: ProjectService, name: str, args: dict[str, Any]) -> Any:
    """Run tool `name` of the registry as the chat agent: its JSON answer, or ``{"error": {code, message, hint}}``
    (the same codes an MCP client gets)."""
    spec = TOOLS.get(name)
    if spec is None:
        return {
            "error": {
                "code": "TOOL_NOT_FOUND",
                "message": f"no tool {name!r}",
                "hint": f"tools: {', '.join(TOOLS.names())}",
            }
        }
    try:
        result = await spec.call(svc, args)
    except ValidationError as exc:
        return {"error": validation_problem(exc)}
    except AqvenError as err:
        return {"error": err.to_dict()}
    return _clip(to_jsonable_python(result))


def _chat_tool(spec: ToolSpec) -> Tool[ChatDeps]:
    async def run(ctx: RunContext[ChatDeps], **args: Any) -> Any:
        return await call_tool(ctx.deps.svc, spec.name, args)

    return Tool.from_schema(
        run,
        name=spec.name,
        description=spec.description,
        json_schema=spec.args_model.model_json_schema(),
        takes_ctx=True,
    )


def build_agent(model: Model, root: Path) -> Agent[ChatDeps, str]:
    return Agent(
        model,
        deps_type=ChatDeps,
        instructions=instructions_for(root),
        tools=[_chat_tool(spec) for spec in TOOLS],
        retries=1,
    )


def _model_for(svc: ProjectService) -> tuple[Model, dict[str, Any]]:
    info = describe(svc)["responder"]
    if info["kind"] == "agent":
        agent = svc.project().agents[info["agent"]]
        return build_model(agent), info
    return offline_model(), info


def _history(messages: list[dict[str, Any]]) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for m in messages:
        text = str(m.get("content", ""))
        if m.get("role") == "assistant":
            out.append(ModelResponse(parts=[TextPart(text)]))
        else:
            out.append(ModelRequest(parts=[UserPromptPart(text)]))
    return out


async def reply(svc: ProjectService, messages: list[dict[str, Any]], *, model: Model | None = None) -> dict[str, Any]:
    """Answer the last user message of `messages` (earlier ones are the history): the reply, the tool calls (each
    with `error` when the tool answered one), the responder, the files read and the tokens. A chat that cannot
    answer raises `AqvenError` (CHAT_FAILED 502, CHAT_TIMEOUT 504, VALIDATION_ERROR 422), never a reply."""
    if not messages or messages[-1].get("role") != "user" or not str(messages[-1].get("content", "")).strip():
        raise AqvenError("the last message must be the user's question", code="VALIDATION_ERROR", http_status=422)
    if model is None:
        try:
            model, info = _model_for(svc)
        except AqvenError as err:
            raise AqvenError(err.message, code=err.code, hint=err.hint, http_status=503) from None
    else:
        info = {"kind": "given", "model": getattr(model, "model_name", "model"), "simulated": True}
    agent = build_agent(model, svc.root)
    try:
        result = await asyncio.wait_for(
            agent.run(
                str(messages[-1]["content"]),
                message_history=_history(messages[:-1]) or None,
                deps=ChatDeps(svc),
            ),
            CHAT_TIMEOUT_S,
        )
    except TimeoutError:
        raise AqvenError("the chat agent took too long", code="CHAT_TIMEOUT", http_status=504) from None
    except AqvenError:
        raise
    except Exception as exc:  # a provider or model failure: say what happened, never a traceback
        log.warning("the chat agent failed", exc_info=exc)
        raise AqvenError(
            f"the chat agent failed: {type(exc).__name__}: {str(exc)[:300]}",
            code="CHAT_FAILED",
            hint="see the responder shown in the chat panel",
            http_status=502,
        ) from None
    new = result.new_messages()
    errors: dict[str, Any] = {
        p.tool_call_id: as_object(p.content).get("error")
        for m in new
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and is_tool_error(p.content)
    }
    calls: list[dict[str, Any]] = []
    for m in new:
        for p in m.parts if isinstance(m, ModelResponse) else ():
            if isinstance(p, ToolCallPart):
                call: dict[str, Any] = {"name": p.tool_name, "args": p.args_as_dict()}
                if p.tool_call_id in errors:
                    call["error"] = errors[p.tool_call_id]  # the tool answered an error with this code
                calls.append(call)
    usage = result.usage
    return {
        "reply": result.output,
        "tool_calls": calls,
        "responder": info,
        "context_files": [{k: v for k, v in f.items() if k != "text"} for f in context_files(svc.root)],
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
    }
