"""Studio's chat agent: reads FINDINGS.md, AGENTS.md and CLAUDE.md first, then answers with the project's tools.

The agent is a pydantic-ai `Agent` whose tools are the ones the MCP server offers (check, experiments, flows,
agents, datasets, findings, series start/get/cancel, runs start/get/events/node), minus approval: an agent
can start a series but never continue one past its cap.

Which model answers:

* ``AQVEN_CHAT_AGENT=<agent id>`` names an agent of the project (its model, settings and key). With simulated
  mode off, that model answers live.
* Otherwise (no agent named, or simulated mode on) AQVEN's **offline responder** answers. It is not a language
  model: it picks tools by keywords of the question, quotes the lines of FINDINGS.md that share words with it,
  and sums up what the tools returned. Every answer says so.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, RunContext
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
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aqven.errors import AqvenError, NotFoundError
from aqven.project.local import simulate_enabled
from aqven.project.paths import state_dir
from aqven.server.service import ProjectService

CONTEXT_FILES = ("FINDINGS.md", "AGENTS.md", "CLAUDE.md")
MAX_CONTEXT_CHARS = 60_000
MAX_STRING = 2_000
MAX_ITEMS = 60
CHAT_TIMEOUT_S = 180.0
OFFLINE_NAME = "aqven-offline-responder"
AGENT_ENV = "AQVEN_CHAT_AGENT"


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
        import yaml

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
    return {"responder": responder, "context_files": files, "tools": [t.__name__ for t in TOOLS]}


# ---- tools (the MCP server's, minus approval) ----


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


async def _guard(call: Any) -> Any:
    try:
        result = await call if asyncio.iscoroutine(call) else call
    except AqvenError as err:
        return {"error": err.to_dict()}
    if hasattr(result, "model_dump"):
        result = result.model_dump(mode="json")
    elif isinstance(result, list):
        result = [r.model_dump(mode="json") if hasattr(r, "model_dump") else r for r in result]
    return _clip(json.loads(json.dumps(result, default=str)))


async def aqven_check(ctx: RunContext[ChatDeps]) -> Any:
    """Validate the project's files (`aqven check`): errors and warnings with file:line."""
    from aqven.server.routes_project import get_check

    return await _guard(asyncio.to_thread(get_check, ctx.deps.svc))


async def list_experiments(ctx: RunContext[ChatDeps]) -> Any:
    """Every experiment: its question, failure mode, the factor it varies and the variants' values."""
    from aqven.server.routes_research import list_experiments as route

    def brief() -> list[dict[str, Any]]:
        return [
            {k: e[k] for k in ("id", "failure_mode", "description", "caption", "variants", "question", "subject")}
            for e in route(ctx.deps.svc)
        ]

    return await _guard(brief())


async def get_experiment(ctx: RunContext[ChatDeps], experiment_id: str) -> Any:
    """One experiment with its checks, dataset and series."""
    from aqven.server.routes_research import get_experiment as route

    return await _guard(asyncio.to_thread(route, experiment_id, ctx.deps.svc))


async def list_flows(ctx: RunContext[ChatDeps]) -> Any:
    """The project's flows and their top-level nodes."""
    from aqven.server.routes_project import list_flows as route

    return await _guard(route(ctx.deps.svc))


async def get_flow(ctx: RunContext[ChatDeps], flow_id: str) -> Any:
    """One flow compiled: its nodes (kind, agent, model, dependencies, children) and types."""
    from aqven.server.routes_project import get_flow as route

    return await _guard(asyncio.to_thread(route, flow_id, ctx.deps.svc))


async def list_agents(ctx: RunContext[ChatDeps]) -> Any:
    """The project's agents with their models and settings."""
    from aqven.server.routes_project import list_agents as route

    return await _guard(route(ctx.deps.svc))


async def list_datasets(ctx: RunContext[ChatDeps]) -> Any:
    """The datasets with how many cases are working (dev) and held out."""
    from aqven.server.routes_project import list_datasets as route

    return await _guard(route(ctx.deps.svc))


async def read_findings(ctx: RunContext[ChatDeps]) -> Any:
    """FINDINGS.md as it is now, and every finding file with its verdict sentence."""
    from aqven.server.routes_research import list_findings as route

    return await _guard(route(ctx.deps.svc))


async def list_series(ctx: RunContext[ChatDeps], experiment_id: str | None = None, limit: int = 20) -> Any:
    """Series, newest first, with status and verdict sentence."""
    return await _guard(ctx.deps.svc.series.list_series(experiment_id=experiment_id, limit=max(1, min(limit, 100))))


async def series_start(
    ctx: RunContext[ChatDeps],
    experiment_id: str,
    on: str = "dev",
    cases: int | None = None,
    repeats: int | None = None,
    cap_usd: str | None = None,
    client_op_id: str | None = None,
) -> Any:
    """Start a series of an experiment on dev (explore) or holdout (confirm, once). Returns its launch plan."""
    from aqven.research.series.start import SeriesStartBody

    try:
        body = SeriesStartBody.model_validate(
            {
                "experiment_id": experiment_id,
                "on": on,
                "cases": cases,
                "repeats": repeats,
                "cap_usd": cap_usd,
                "client_op_id": client_op_id,
            }
        )
    except ValueError as exc:
        return {"error": {"code": "VALIDATION_ERROR", "message": str(exc).splitlines()[0]}}
    return await _guard(ctx.deps.svc.series.start(body))


async def series_get(
    ctx: RunContext[ChatDeps], series_id: str, wait_seconds: float = 0, include_cases: bool = False
) -> Any:
    """A series' snapshot: progress, spend against the cap, the matrix with 95% intervals, eta and verdict."""
    wait = max(0.0, min(float(wait_seconds), 20.0))
    return await _guard(ctx.deps.svc.series.get(series_id, wait_seconds=wait, include_cases=include_cases))


async def series_cancel(ctx: RunContext[ChatDeps], series_id: str, reason: str | None = None) -> Any:
    """Cancel a series: queued attempts never start; no finding is written."""
    return await _guard(ctx.deps.svc.series.cancel(series_id, reason))


async def run_start(
    ctx: RunContext[ChatDeps],
    flow_id: str,
    case: str | None = None,
    dataset_id: str | None = None,
    input: Any = None,
    from_node: str | None = None,
    to_node: str | None = None,
) -> Any:
    """Start a run of a flow on a case (or an input) and wait up to 30 s for it."""
    svc = ctx.deps.svc
    body: dict[str, Any] = {"flow_id": flow_id, "from_node": from_node, "to_node": to_node}
    if case is not None:
        body.update(case=case, dataset_id=dataset_id)
    else:
        body["input"] = input

    async def go() -> Any:
        run_id = svc.start_run(svc.build_request(body))
        return await svc.wait_run(run_id, 30.0)

    return await _guard(go())


async def run_get(ctx: RunContext[ChatDeps], run_id: str) -> Any:
    """One run: status, output, error, tokens and cost. A run of a held-out case is refused (HOLDOUT_HIDDEN)."""
    svc = ctx.deps.svc
    return await _guard(asyncio.to_thread(svc.visible_run, run_id))


async def run_events(ctx: RunContext[ChatDeps], run_id: str, after: int = 0, limit: int = 100) -> Any:
    """A run's trace events in order."""
    svc = ctx.deps.svc

    def events() -> Any:
        svc.visible_run(run_id)
        return svc.runs.events(run_id, after=after, limit=max(1, min(limit, 500)))

    return await _guard(asyncio.to_thread(events))


async def run_get_node(ctx: RunContext[ChatDeps], run_id: str, node_id: str) -> Any:
    """One node of a run: inputs, output, error and model calls."""
    from aqven.server.routes_runs import run_node

    return await _guard(asyncio.to_thread(run_node, run_id, node_id, ctx.deps.svc))


async def list_runs(
    ctx: RunContext[ChatDeps],
    flow_id: str | None = None,
    status: str | None = None,
    series_id: str | None = None,
    limit: int = 20,
) -> Any:
    """Runs, newest first; runs of held-out cases are only counted (hidden_holdout_runs)."""
    from aqven.research.holdout import HELD_OUT_RUN_SQL

    svc = ctx.deps.svc
    runs, hidden = svc.runs.list_runs_except(
        HELD_OUT_RUN_SQL, flow_id=flow_id, status=status, series_id=series_id, limit=max(1, min(limit, 100))
    )
    items = [{k: v for k, v in r.model_dump(mode="json").items() if k != "request"} for r in runs]
    return await _guard({"runs": items, "hidden_holdout_runs": hidden})


TOOLS = (
    aqven_check,
    list_experiments,
    get_experiment,
    list_flows,
    get_flow,
    list_agents,
    list_datasets,
    read_findings,
    list_series,
    series_start,
    series_get,
    series_cancel,
    run_start,
    run_get,
    run_events,
    run_get_node,
    list_runs,
)


def build_agent(model: Model, root: Path) -> Agent[ChatDeps, str]:
    return Agent(model, deps_type=ChatDeps, instructions=instructions_for(root), tools=list(TOOLS), retries=1)


# ---- the offline responder ----

_WORD = re.compile(r"[a-z0-9_]{4,}")
_STOP = {
    "what",
    "which",
    "does",
    "this",
    "that",
    "have",
    "with",
    "from",
    "about",
    "know",
    "tell",
    "there",
    "their",
    "project",
    "please",
    "would",
    "could",
    "should",
    "findings",
    "finding",
    "when",
    "where",
    "were",
    "been",
    "they",
    "them",
    "will",
    "your",
}


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def findings_lines(md: str) -> list[tuple[str, str]]:
    """(heading path, line) of every finding line of FINDINGS.md."""
    out: list[tuple[str, str]] = []
    section = shelf = ""
    for line in md.splitlines():
        if line.startswith("## "):
            section, shelf = line[3:].strip(), ""
        elif line.startswith("### "):
            shelf = line[4:].strip()
        elif line.startswith("- "):
            out.append((" · ".join(x for x in (section, shelf) if x), line[2:].strip()))
    return out


def _section(instructions: str, name: str) -> str:
    m = re.search(rf"=== {re.escape(name)} ===\n(.*?)\n=== end of {re.escape(name)} ===", instructions, re.S)
    return m.group(1) if m else ""


def plan_tools(question: str, available: set[str]) -> list[tuple[str, dict[str, Any]]]:
    q = question.lower()
    calls: list[tuple[str, dict[str, Any]]] = []
    for sid in dict.fromkeys(re.findall(r"\bser_[0-9a-f]{6,}\b", q)):
        calls.append(("series_get", {"series_id": sid}))
    for rid in dict.fromkeys(re.findall(r"\brun_[0-9a-f]{6,}\b", q)):
        calls.append(("run_get", {"run_id": rid}))
    if re.search(r"\b(check|errors?|warnings?|valid|broken)\b", q):
        calls.append(("aqven_check", {}))
    if "experiment" in q:
        calls.append(("list_experiments", {}))
    if "series" in q and not any(c[0] == "series_get" for c in calls):
        calls.append(("list_series", {}))
    if re.search(r"\bflows?\b", q):
        calls.append(("list_flows", {}))
    if re.search(r"\b(agents?|models?)\b", q):
        calls.append(("list_agents", {}))
    if re.search(r"\b(datasets?|cases?)\b", q):
        calls.append(("list_datasets", {}))
    if re.search(r"finding|confirm|refut|verdict|learn|know", q):
        calls.append(("read_findings", {}))
    return [(name, args) for name, args in calls if name in available]


def _summarize(name: str, content: Any) -> list[str]:
    if isinstance(content, dict) and "error" in content:
        err = content["error"]
        return [f"{name}: {err.get('code')}: {err.get('message')}"]
    if name == "aqven_check" and isinstance(content, dict):
        lines = [f"aqven check: {content.get('errors')} error(s), {content.get('warnings')} warning(s)."]
        for d in (content.get("diagnostics") or [])[:8]:
            where = (d.get("file") or "project") + (f":{d['line']}" if d.get("line") else "")
            lines.append(f"- {where}: {d.get('code')}: {d.get('message')}")
        return lines
    if name == "list_experiments" and isinstance(content, list):
        lines = [f"{len(content)} experiment(s):"]
        for e in content:
            if isinstance(e, dict):
                lines.append(f"- {e.get('id')} ({e.get('failure_mode')}): {e.get('caption')}")
        return lines
    if name == "list_series" and isinstance(content, list):
        lines = [f"latest series ({len(content)}):"]
        for s in content[:8]:
            if isinstance(s, dict):
                verdict = f" — {s.get('text')}" if s.get("text") else ""
                lines.append(
                    f"- {s.get('series_id')} {s.get('experiment_id')} on {s.get('on')}: {s.get('status')}{verdict}"
                )
        return lines
    if name == "series_get" and isinstance(content, dict):
        p = content.get("progress") or {}
        sp = content.get("spend") or {}
        lines = [
            f"series {content.get('series_id')} ({content.get('experiment_id')} on {content.get('on')}"
            f"{', simulated' if content.get('simulated') else ''}): {content.get('status')}, "
            f"{p.get('done')} of {p.get('attempts')} attempts, spent ${sp.get('usd')} of ${sp.get('cap_usd')}"
            f"{' (a lower bound)' if sp.get('lower_bound') else ''}."
        ]
        vd: dict[str, Any] = content.get("verdict") or {}
        if vd.get("text"):
            lines.append(("Provisional: " if vd.get("provisional") else "Verdict: ") + f"“{vd['text']}”")
        if content.get("status") == "awaiting_approval":
            lines.append("It waits for a person: approve it with a new cap on its Studio page (I cannot).")
        return lines
    if name == "run_get" and isinstance(content, dict):
        err = content.get("error") or {}
        tail = f": {err.get('code')}: {err.get('message')}" if err else ""
        return [f"run {content.get('id')} of {content.get('flow_id')}: {content.get('status')}{tail}"]
    if name in ("list_flows", "list_agents", "list_datasets") and isinstance(content, list):
        what = name.split("_")[1]
        items = []
        for x in content:
            if isinstance(x, dict):
                items.append(str(x.get("id")) + (f" ({x['model']})" if x.get("model") else ""))
        return [f"{what}: " + ", ".join(items)]
    return []


def offline_reply(question: str, instructions: str, returns: list[tuple[str, Any]]) -> str:
    md = _section(instructions, "FINDINGS.md")
    lines = findings_lines(md)
    asked = _words(question)
    scored = sorted(((len(asked & _words(h + " " + line)), h, line) for h, line in lines), key=lambda x: -x[0])
    hits = [(h, line) for score, h, line in scored if score > 0]
    general = re.search(r"finding|know|learn|confirm|refut|verdict", question.lower())
    out: list[str] = []
    if re.search(r"\b(approve|continue|raise the cap)\b", question.lower()):
        out.append(
            "I cannot approve or continue a series: only a person can, with Approve on the series page in Studio "
            "(or POST /api/series/{id}/approve)."
        )
    if not lines and (general or hits or not returns):
        out.append("FINDINGS.md has no findings yet: a series on held-out cases writes the first one.")
    elif hits or general:
        chosen = hits or [(h, line) for h, line in lines]
        out.append("From FINDINGS.md (read before this conversation):")
        out += [f"- [{h}] {line}" for h, line in chosen[:8]]
    for name, content in returns:
        if name == "read_findings":
            continue
        out += _summarize(name, content)
    if not out:
        out.append(
            "I found nothing in FINDINGS.md, AGENTS.md or CLAUDE.md that matches your question. Ask about findings, "
            "experiments, series (by id), runs (by id), flows, agents or `aqven check`."
        )
    out.append(
        "— AQVEN's offline responder (not a language model): it picks tools by keywords and quotes FINDINGS.md. "
        f"Name an agent in {AGENT_ENV} and turn simulated mode off to talk to a model."
    )
    return "\n".join(out)


async def _offline(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    question = ""
    start = 0
    for i, m in enumerate(messages):
        if isinstance(m, ModelRequest):
            for part in m.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    question, start = part.content, i
    returns: list[tuple[str, Any]] = []
    for m in messages[start:]:
        if isinstance(m, ModelRequest):
            returns += [(p.tool_name, p.content) for p in m.parts if isinstance(p, ToolReturnPart)]
    called = any(
        isinstance(m, ModelResponse) and any(isinstance(p, ToolCallPart) for p in m.parts) for m in messages[start:]
    )
    if not called:
        plan = plan_tools(question, {t.name for t in info.function_tools})
        if plan:
            return ModelResponse(parts=[ToolCallPart(name, json.dumps(args)) for name, args in plan])
    text = offline_reply(question, info.instructions or "", returns)
    return ModelResponse(parts=[TextPart(text)])


def offline_model() -> FunctionModel:
    return FunctionModel(_offline, model_name=OFFLINE_NAME)


def _model_for(svc: ProjectService) -> tuple[Model, dict[str, Any]]:
    info = describe(svc)["responder"]
    if info["kind"] == "agent":
        from aqven.models.providers import build_model

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
    """Answer the last user message of `messages` (earlier ones are the history)."""
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
    except NotFoundError:
        raise
    except AqvenError:
        raise
    except Exception as exc:  # a provider or model failure: say what happened, never a traceback
        raise AqvenError(
            f"the chat agent failed: {type(exc).__name__}: {str(exc)[:300]}",
            code="CHAT_FAILED",
            hint="see the responder shown in the chat panel",
            http_status=502,
        ) from None
    calls = [
        {"name": p.tool_name, "args": p.args_as_dict()}
        for m in result.new_messages()
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    ]
    usage = result.usage
    return {
        "reply": result.output,
        "tool_calls": calls,
        "responder": info,
        "context_files": [{k: v for k, v in f.items() if k != "text"} for f in context_files(svc.root)],
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
    }
