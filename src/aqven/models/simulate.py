"""Simulated mode: a project's simulator answers in the model's place, through pydantic-ai's `FunctionModel`.

The agent, its output mode, validation and output retries are the real ones; only the model is
replaced. The simulator is ``simulator: path/to/file.py:function`` (or ``pkg.module:function``),
relative to the project root, a function ``(SimRequest) -> SimReply`` (sync or async; any other return
value is taken as ``SimReply(output=value)``).

Each model request of the call asks the simulator again with ``retry`` = the number of earlier attempts
in the conversation and ``seed = call seed + 7919 * retry + 104729 * engine retry``.

How a reply reaches pydantic-ai:

* ``ok`` — the output as the model would send it: a call of the output tool in tool mode, JSON text in
  native and prompted modes, the text itself for string outputs.
* ``refusal`` — an empty response with finish reason ``content_filter`` → ``MODEL_REFUSAL``.
* ``invalid_json`` — ``text`` (or a broken JSON fragment) where JSON is expected → output retries →
  ``MODEL_INVALID_JSON``. A string output has no JSON to break: the text is accepted as the answer.
* ``schema_mismatch`` — ``output`` if given (it should violate the schema), else a JSON array where an
  object is expected → output retries → ``MODEL_SCHEMA_MISMATCH``. For a string output without
  ``output`` it is an empty answer, which pydantic-ai retries as "no output".

The reply's ``latency_s`` is slept, scaled by ``AQVEN_SIM_LATENCY_SCALE`` (default 1.0).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, ModelResponsePart, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from aqven.errors import ProjectError
from aqven.models.outcomes import CODE_ERROR, SIMULATOR_MISSING, ModelCallError
from aqven.models.outputs import OutputPlan
from aqven.models.simulator import SimReply, SimRequest
from aqven.project.paths import inside
from aqven.project.pycode import load_function
from aqven.project.schema import AgentSpec

RETRY_SEED_STEP = 7919
ENGINE_RETRY_SEED_STEP = 104729
BROKEN_JSON = '{"answer": "unterminated'
KINDS = ("ok", "refusal", "invalid_json", "schema_mismatch")

Simulator = Callable[[SimRequest], Any]


class SimulatorCrashed(Exception):
    """The project's simulator raised or returned something unusable (→ `CODE_ERROR`)."""


@dataclass(frozen=True)
class SimContext:
    agent: AgentSpec
    node_id: str
    prompt: str
    inputs: dict[str, Any]
    output_schema: dict[str, Any]
    seed: int
    plan: OutputPlan
    case_name: str | None = None
    engine_retry: int = 0
    latency_scale: float = 1.0


def simulator_path(project_root: Path, ref: str) -> tuple[Path, str]:
    """``file.py:function`` or ``pkg.module:function`` → (file inside the project, function name)."""
    target, sep, name = ref.rpartition(":")
    if not sep or not target or not name.isidentifier():
        raise ValueError(f"simulator must be 'file.py:function'; got {ref!r}")
    if not target.endswith(".py") and "/" not in target and "\\" not in target:
        target = target.replace(".", "/") + ".py"
    return _simulator_file(project_root, target), name


@functools.lru_cache(maxsize=256)
def _simulator_file(project_root: Path, target: str) -> Path:
    """The checked path of a simulator file, once per process (every simulated call looks its simulator up; a
    path that leaves the project raises, and is not kept)."""
    return inside(project_root, project_root, target)


def load_simulator(agent: AgentSpec, project_root: Path) -> Simulator:
    """The agent's simulator function, or `ModelCallError` (`SIMULATOR_MISSING` / `CODE_ERROR`)."""
    who = agent.id or agent.model
    if not agent.simulator:
        raise ModelCallError(
            SIMULATOR_MISSING,
            f"agent {who!r} has no simulator, so it cannot run in simulated mode",
            hint="add 'simulator: file.py:function' to the agent file, or run without --simulate",
        )
    try:
        path, name = simulator_path(project_root, agent.simulator)
        return load_function(project_root, path, name)
    except (ProjectError, ValueError) as exc:
        message = exc.message if isinstance(exc, ProjectError) else str(exc)
        raise ModelCallError(
            CODE_ERROR,
            f"simulator {agent.simulator!r} of agent {who!r} cannot be loaded: {message}",
            hint=exc.hint if isinstance(exc, ProjectError) else "",
        ) from None


def simulated_model(ctx: SimContext, simulator: Simulator) -> FunctionModel:
    """A `FunctionModel` named like the agent's real model that asks `simulator` for every response."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        attempt = sum(1 for m in messages if isinstance(m, ModelResponse))
        request = SimRequest(
            agent_id=ctx.agent.id,
            model=ctx.agent.model,
            node_id=ctx.node_id,
            prompt=ctx.prompt,
            inputs=ctx.inputs,
            output_schema=ctx.output_schema,
            seed=ctx.seed + RETRY_SEED_STEP * attempt + ENGINE_RETRY_SEED_STEP * ctx.engine_retry,
            case_name=ctx.case_name,
            retry=attempt,
        )
        reply = await _ask(simulator, request)
        if reply.latency_s > 0:
            await asyncio.sleep(reply.latency_s * ctx.latency_scale)
        return to_response(reply, info, ctx.plan)

    return FunctionModel(respond, model_name=ctx.agent.model_name)


async def _ask(simulator: Simulator, request: SimRequest) -> SimReply:
    try:
        result = simulator(request)
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:  # the project's own code
        raise SimulatorCrashed(f"{type(exc).__name__}: {exc}") from None
    reply = result if isinstance(result, SimReply) else SimReply(output=result)
    if reply.kind not in KINDS:
        raise SimulatorCrashed(f"SimReply.kind must be one of {', '.join(KINDS)}; got {reply.kind!r}")
    if reply.input_tokens < 0 or reply.output_tokens < 0 or reply.latency_s < 0:
        raise SimulatorCrashed("SimReply tokens and latency_s must not be negative")
    return reply


def to_response(reply: SimReply, info: AgentInfo, plan: OutputPlan) -> ModelResponse:
    """The `ModelResponse` a real model would have sent for `reply`."""
    usage = RequestUsage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens)
    if reply.kind == "refusal":
        return ModelResponse(
            parts=[],
            usage=usage,
            finish_reason="content_filter",
            provider_details={"refusal": reply.text or "The model declined to answer."},
        )
    tool = info.output_tools[0].name if info.output_tools else None
    parts: list[ModelResponsePart]
    if reply.kind == "invalid_json":
        raw = reply.text if reply.text is not None else BROKEN_JSON
        parts = [ToolCallPart(tool, raw)] if tool else [TextPart(raw)]
    elif reply.kind == "schema_mismatch":
        if reply.output is not None:
            parts = _answer(plan.wrap(reply.output), tool, plan, None)
        elif plan.is_text:
            parts = [TextPart("")]
        else:
            parts = [ToolCallPart(tool, "[]")] if tool else [TextPart("[]")]
    else:
        parts = _answer(plan.wrap(reply.output), tool, plan, reply.text)
    return ModelResponse(parts=parts, usage=usage)


def _answer(payload: Any, tool: str | None, plan: OutputPlan, text: str | None) -> list[ModelResponsePart]:
    if tool:
        return [ToolCallPart(tool, json.dumps(payload, default=str))]
    if text is not None:
        return [TextPart(text)]
    if plan.is_text and isinstance(payload, str):
        return [TextPart(payload)]
    return [TextPart(json.dumps(payload, default=str))]
