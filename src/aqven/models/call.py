"""The one entry point the engine uses for a model call: `call_model(ModelCall) -> CallResult`.

The model is a cached pydantic-ai model (or, in simulated mode, a `FunctionModel` that asks the project's
simulator). A call of an llm node is one structured request/response exchange (with output retries), so it
runs on the lean path (`aqven.models.lean`: request parameters built once per agent and output type,
`pydantic_ai.direct.model_request`, the same parsing and validation); ``path="agent"`` (or
``AQVEN_CALL_PATH=agent``) runs it through a pydantic-ai `Agent` instead, which is what a call needing the
agent loop (tool use) would use. Both give the same outcomes (tests/models/test_models_lean.py). The SDK
never retries (``max_retries=0``): the engine owns retry policy. A failed call raises `ModelCallError`,
classified per DESIGN §5 (see `aqven.models.classify`), with the tokens and cost it used before failing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic_ai import Agent, capture_run_messages
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from aqven.models import gate, wire
from aqven.models.classify import Failure, classify, retry_events
from aqven.models.lean import lean_plan, run_lean
from aqven.models.outcomes import CODE_ERROR, CostSource, ModelCallError, redact_value, secret_values
from aqven.models.outputs import OutputPlan, plan_output
from aqven.models.pricing import Price, price_call
from aqven.models.providers import build_model
from aqven.models.simulate import SimContext, load_simulator, simulated_model
from aqven.project.local import sim_latency_scale
from aqven.project.schema import AgentSpec

EventSink = Callable[[str, dict[str, Any]], None]
CallPath = Literal["lean", "agent"]
PATH_VAR = "AQVEN_CALL_PATH"


@dataclass(frozen=True)
class ModelCall:
    agent: AgentSpec
    prompt: str
    output_schema: dict[str, Any]
    simulate: bool
    seed: int
    node_id: str
    project_root: Path
    inputs: dict[str, Any] = field(default_factory=dict)
    case_name: str | None = None
    retry: int = 0  # the engine's retry of this call (0 = first try)


@dataclass
class CallResult:
    output: Any
    model_name: str  # the model that actually answered (simulated: the real model's name)
    provider: str
    input_tokens: int
    output_tokens: int
    requests: int
    cost_usd: Decimal | None
    cost_source: CostSource
    simulated: bool
    latency_ms: float
    output_retries: int  # how many output-validation retries happened


def model_settings(agent: AgentSpec) -> ModelSettings:
    """The agent's settings as pydantic-ai `ModelSettings`; the SDK never retries."""
    s = agent.settings
    out: ModelSettings = {"max_retries": 0, "timeout": s.timeout_s, "request_timeout": s.timeout_s}
    if s.temperature is not None:
        out["temperature"] = s.temperature
    if s.max_tokens is not None:
        out["max_tokens"] = s.max_tokens
    if s.top_p is not None:
        out["top_p"] = s.top_p
    if s.seed is not None:
        out["seed"] = s.seed
    return out


@dataclass
class _Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0
    model_name: str | None = None
    provider_costs: list[Decimal | None] = field(default_factory=list)


def _usage(messages: list[ModelMessage]) -> _Usage:
    u = _Usage()
    for m in messages:
        if isinstance(m, ModelResponse):
            u.requests += 1
            u.input_tokens += m.usage.input_tokens
            u.output_tokens += m.usage.output_tokens
            u.cache_read_tokens += m.usage.cache_read_tokens
            u.cache_write_tokens += m.usage.cache_write_tokens
            u.model_name = m.model_name or u.model_name
            u.provider_costs.append(wire.to_decimal((m.provider_details or {}).get("cost")))
    return u


def _reported_cost(u: _Usage, state: wire.WireState) -> Decimal | None:
    """The provider's own report, when every answered request carried one."""
    if u.requests == 0:
        return None
    from_wire = state.reported_total()
    if from_wire is not None and len(state.reported_costs) >= u.requests:
        return from_wire
    if all(c is not None for c in u.provider_costs):
        return sum((c for c in u.provider_costs if c is not None), Decimal(0))
    return None


def _price(call: ModelCall, u: _Usage, state: wire.WireState) -> Price:
    names = [call.agent.model_name]
    if u.model_name and u.model_name not in names:
        names.append(u.model_name)
    return price_call(
        provider=call.agent.provider,
        model_names=names,
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        requests=u.requests,
        reported=None if call.simulate else _reported_cost(u, state),
        cache_read_tokens=u.cache_read_tokens,
        cache_write_tokens=u.cache_write_tokens,
        declared=call.agent.price,
    )


def _build(call: ModelCall, plan: OutputPlan) -> Model:
    if not call.simulate:
        return build_model(call.agent)
    simulator = load_simulator(call.agent, call.project_root)
    ctx = SimContext(
        agent=call.agent,
        node_id=call.node_id,
        prompt=call.prompt,
        inputs=call.inputs,
        output_schema=call.output_schema,
        seed=call.seed,
        plan=plan,
        case_name=call.case_name,
        engine_retry=call.retry,
        latency_scale=sim_latency_scale(call.project_root),
    )
    return simulated_model(ctx, simulator)


def default_path() -> CallPath:
    """``lean`` unless ``AQVEN_CALL_PATH=agent``."""
    return "agent" if os.environ.get(PATH_VAR, "").strip().lower() == "agent" else "lean"


async def _run_agent(model: Model, plan: OutputPlan, call: ModelCall, messages: list[ModelMessage]) -> Any:
    """The call through a pydantic-ai `Agent` (built per call); `messages` receives the run's history."""
    agent = call.agent
    runner: Agent[None, Any] = Agent(
        model,
        output_type=plan.output_type(agent.output_mode),
        instructions=agent.system_prompt or None,
        retries={"output": agent.output_retries},
        model_settings=model_settings(agent),
        name=agent.id or None,
    )
    runner.output_validator(plan.check)
    with capture_run_messages() as captured:
        try:
            result = await runner.run(call.prompt)
        finally:
            messages.extend(captured)
    return result.output


async def call_model(call: ModelCall, on_event: EventSink | None = None, path: CallPath | None = None) -> CallResult:
    """Run one model call. Raises `ModelCallError` (never with a key in it) when it ends without an output.

    `on_event("output_retry", payload)` is called once per output-validation retry, in order, after the
    call ends (payload: agent_id, node_id, attempt, max_retries, reason, message, simulated).
    """
    agent = call.agent
    secrets = secret_values([agent.api_key_env] if agent.api_key_env else [])
    try:
        plan = plan_output(call.output_schema)
    except ValueError as exc:
        raise ModelCallError(CODE_ERROR, f"node {call.node_id!r}: {exc}", secrets=secrets) from None
    model = _build(call, plan)  # PROVIDER_KEY_MISSING / SIMULATOR_MISSING / CODE_ERROR before any request
    chosen = path or default_path()
    state = wire.WireState(stall_timeout_s=agent.settings.stall_timeout_s)
    token = wire.CURRENT.set(state)
    started = time.perf_counter()
    failure: Failure | None = None
    output: Any = None
    messages: list[ModelMessage] = []
    try:
        async with gate.released():  # the exchange waits on the model: other attempts' CPU phases run meanwhile
            if chosen == "lean":
                lean = lean_plan(plan, agent.output_mode, agent.system_prompt or None)
                raw = await run_lean(
                    model, lean, plan, call.prompt, model_settings(agent), agent.output_retries, messages
                )
            else:
                raw = await _run_agent(model, plan, call, messages)
        output = plan.unwrap(raw)
    except Exception as exc:  # classified here, outside the run, so no chained exception holds a key
        failure = classify(exc, state=state, agent=agent, messages=messages, simulated=call.simulate)
    finally:
        wire.CURRENT.reset(token)
    latency_ms = (time.perf_counter() - started) * 1000.0

    usage = _usage(messages)
    events = retry_events(messages)
    if on_event is not None:
        for i, (reason, message) in enumerate(events, start=1):
            payload = {
                "agent_id": agent.id,
                "node_id": call.node_id,
                "attempt": i,
                "max_retries": agent.output_retries,
                "reason": reason,
                "message": message,
                "simulated": call.simulate,
            }
            on_event("output_retry", redact_value(payload, secrets))
    price = _price(call, usage, state)
    model_name = usage.model_name or agent.model_name

    if failure is not None:
        raise ModelCallError(
            failure.code,
            failure.message,
            retryable=failure.retryable,
            retry_after=failure.retry_after,
            provider_status=failure.provider_status,
            hint=failure.hint,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            requests=usage.requests,
            cost_usd=price.cost_usd,
            cost_source=price.source,
            model_name=model_name,
            simulated=call.simulate,
            output_retries=len(events),
            secrets=secrets,
        )
    return CallResult(
        output=output,
        model_name=model_name,
        provider=agent.provider,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        requests=usage.requests,
        cost_usd=price.cost_usd,
        cost_source=price.source,
        simulated=call.simulate,
        latency_ms=latency_ms,
        output_retries=len(events),
    )
