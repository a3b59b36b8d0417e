"""The lean call path: one structured request/response exchange without pydantic-ai's agent loop.

An llm node asks for one structured output and uses no tools, so the agent graph (run context, capability
hooks, task groups, the output toolset) is overhead on every call. This module builds the request
parameters once per (output mode, output schema, instructions) and sends the messages itself through
`pydantic_ai.direct.model_request`, which keeps the model's own request preparation and the
``request_timeout`` deadline. The answer is parsed and validated with the same pydantic-ai output processor
and AQVEN's schema check, and output retries go back to the model in the shape the agent sends them:

* an output-tool call that fails validation or the schema check → a retried `ToolReturnPart` answering
  that call, counted against the tool's retries;
* text, native or prompted output that fails → a `RetryFeedbackPart`, counted against the run's retries;
* no usable output → `RetryFeedbackPart(cause="no_output")` with the agent's wording;
* an empty response cut off by ``max_tokens`` → `OutputTokenLimitExceeded`; a refusal → `ContentFilterError`;
  structured text cut off mid-JSON → `OutputTokenLimitExceeded`; a tool call cut off → `IncompleteToolCall`.

It raises the exceptions the agent raises (``Exceeded maximum output retries (N)`` chained to the last
retry), so `aqven.models.classify` gives the same outcome on both paths; the caller passes a list that
receives the message history as the agent's `capture_run_messages` would. It reads a few pydantic-ai
internals (`_output`, `_messages` helpers): `tests/models/test_models_lean.py` compares its request
parameters and outcomes with the agent's, so a change there fails a test rather than drifting.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, cast

import pydantic_core
from pydantic_ai import ModelRetry, _output
from pydantic_ai import exceptions as pa
from pydantic_ai import messages as m
from pydantic_ai._content_filter import content_filter_message
from pydantic_ai.direct import model_request
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings

from aqven.models.outputs import OutputMode, OutputPlan

_CACHE_SIZE = 256


@dataclass(frozen=True)
class LeanPlan:
    """What stays the same between calls of one agent with one output type."""

    params: ModelRequestParameters
    schema: _output.OutputSchema[Any]
    tool_name: str | None  # the output tool (tool mode), else None
    instructions: str | None


_plans: OrderedDict[tuple[str, str, str | None], LeanPlan] = OrderedDict()


def lean_plan(plan: OutputPlan, mode: OutputMode, instructions: str | None) -> LeanPlan:
    """The request parameters and output schema of (plan, mode, instructions), built once (LRU cache)."""
    key = (json.dumps(plan.schema, sort_keys=True), mode if not plan.is_text else "text", instructions)
    hit = _plans.get(key)
    if hit is not None:
        _plans.move_to_end(key)
        return hit
    built = _build(plan, mode, instructions)
    _plans[key] = built
    if len(_plans) > _CACHE_SIZE:
        _plans.popitem(last=False)
    return built


def _build(plan: OutputPlan, mode: OutputMode, instructions: str | None) -> LeanPlan:
    schema: _output.OutputSchema[Any] = _output.OutputSchema.build(plan.output_type(mode))
    toolset = schema.toolset
    # As the agent's tool manager lists them: stamped with the output toolset's id.
    tools = [replace(t, toolset_id=toolset.id) for t in toolset._tool_defs] if toolset is not None else []
    template = schema.template if isinstance(schema, _output.StructuredTextOutputSchema) else None
    parts = (
        [m.InstructionPart(content=instructions, id=m.InstructionId(source=m.AgentInstructionSource()))]
        if instructions
        else None
    )
    params = ModelRequestParameters(
        output_mode=schema.mode,
        output_tools=tools,
        output_object=schema.object_def,
        prompted_output_template=template,
        allow_text_output=schema.allows_text,
        allow_image_output=schema.allows_image,
        instruction_parts=parts,
    )
    return LeanPlan(params, schema, tools[0].name if tools else None, instructions)


class _Retry(Exception):
    """One output attempt failed: `part` goes back to the model; `tool` says which budget it spends."""

    def __init__(self, part: m.RetryFeedbackPart | m.ToolReturnPart, tool: bool):
        super().__init__()
        self.part, self.tool = part, tool


async def run_lean(
    model: Model,
    lean: LeanPlan,
    plan: OutputPlan,
    prompt: str,
    settings: ModelSettings,
    max_retries: int,
    messages: list[m.ModelMessage],
) -> Any:
    """The validated output (wrapped as the model sent it), or the exception the agent would raise."""
    request = m.ModelRequest(parts=[m.UserPromptPart(content=prompt)], instructions=lean.instructions)
    used = 0  # the run's output retries (text, native, prompted, no output)
    tool_used = 0  # the output tool's own retries
    while True:
        messages.append(request)
        response = await model_request(model, messages, model_settings=settings, model_request_parameters=lean.params)
        messages.append(response)
        try:
            return _output_of(response, lean, plan, settings)
        except _Retry as retry:
            if retry.tool:
                tool_used += 1
                exhausted = tool_used > max_retries
                used += 1
            else:
                used += 1
                exhausted = used > max_retries
            if exhausted:
                _raise_if_incomplete_tool_call(response, settings)
                # Chained like the agent's, so classify reads the last problem from the cause.
                exc = pa.UnexpectedModelBehavior(f"Exceeded maximum output retries ({max_retries})")
                raise exc from pa.ToolRetryError(retry.part)
            attempt = tool_used if retry.tool else used
            info = retry.part.retry
            if info is not None:  # stamped as the agent stamps it: the attempt this retry consumed
                retry.part.retry = replace(info, attempt=attempt, max_retries=max_retries)  # type: ignore[arg-type]
            request = m.ModelRequest(parts=[retry.part], instructions=lean.instructions)


def _output_of(response: m.ModelResponse, lean: LeanPlan, plan: OutputPlan, settings: ModelSettings) -> Any:
    parts = response.parts
    if not parts or all(isinstance(p, m.ThinkingPart) or (isinstance(p, m.TextPart) and not p.content) for p in parts):
        if response.finish_reason == "length":
            raise pa.OutputTokenLimitExceeded(
                f"Model token limit ({settings.get('max_tokens') or 'provider default'}) exceeded before any "
                "response was generated. Increase the `max_tokens` model setting, or simplify the prompt to "
                "result in a shorter response that will fit within the limit."
            )
        if response.finish_reason == "content_filter":
            body = m.ModelMessagesTypeAdapter.dump_json([response]).decode()
            raise pa.ContentFilterError(content_filter_message(response.provider_details), body=body)
    calls = [p for p in parts if isinstance(p, m.ToolCallPart)]
    if calls:
        return _from_tool_calls(calls, lean, plan, response, settings)
    text = "".join(p.content for p in parts if isinstance(p, m.TextPart))
    processor = lean.schema.text_processor
    if processor is None or not text:
        alternatives = []
        if lean.schema.toolset is not None:
            alternatives.append(m._NO_OUTPUT_USE_OUTPUT_TOOL)
        if processor is not None:
            alternatives.insert(0, m._NO_OUTPUT_RETURN_TEXT)
        feedback = m.RetryFeedbackPart(
            content=m._no_output_feedback_text(alternatives),
            retry=m.RetryInfo(cause="no_output"),
        )
        raise _Retry(feedback, tool=False)
    return _from_text(text, response, processor, plan, settings)


def _from_text(
    text: str,
    response: m.ModelResponse,
    processor: _output.BaseOutputProcessor[Any],
    plan: OutputPlan,
    settings: ModelSettings,
) -> Any:
    if plan.is_text:
        value: Any = text
    else:
        try:
            value = cast(_output.ObjectOutputProcessor[Any], processor).validate(text)
        except pydantic_core.ValidationError as exc:
            if response.finish_reason == "length" and _output.is_incomplete_json(exc):
                raise pa.OutputTokenLimitExceeded(_output.truncated_output_message(settings.get("max_tokens"))) from exc
            details = exc.errors(include_url=False, include_context=False)
            raise _Retry(
                m.RetryFeedbackPart(content=details, retry=m.RetryInfo(cause="validation_error")), tool=False
            ) from None
    try:
        return plan.check(value)
    except ModelRetry as exc:
        part = m.RetryFeedbackPart(content=exc.message, retry=m.RetryInfo(cause="model_retry"))
        raise _Retry(part, tool=False) from None


def _from_tool_calls(
    calls: list[m.ToolCallPart], lean: LeanPlan, plan: OutputPlan, response: m.ModelResponse, settings: ModelSettings
) -> Any:
    """The first output-tool call that validates wins; otherwise the first failure is retried.

    A failed call that the token limit cut off is not retried (the agent's rule: the same limit would only cut
    it off again) but raises `IncompleteToolCall`.
    """
    first: _Retry | None = None
    for call in calls:
        try:
            return _from_tool_call(call, lean, plan)
        except _Retry as retry:
            if call.tool_name == lean.tool_name:
                _raise_if_incomplete_tool_call(response, settings, call)
            first = first or retry
    assert first is not None
    raise first


def _from_tool_call(call: m.ToolCallPart, lean: LeanPlan, plan: OutputPlan) -> Any:
    toolset = lean.schema.toolset
    if toolset is None or call.tool_name != lean.tool_name:
        names = ", ".join(repr(n) for n in ([lean.tool_name] if lean.tool_name else [])) or "no tools"
        part = m.ToolReturnPart(
            tool_name=call.tool_name,
            content=f"Unknown tool name: {call.tool_name!r}. Available tools: {names}",
            tool_call_id=call.tool_call_id,
            outcome="retried",
            retry=m.RetryInfo(cause="unknown_tool"),
        )
        raise _Retry(part, tool=True)
    processor = toolset.processors[call.tool_name]
    try:
        value = processor.validate(call.args)
        return plan.check(value)
    except (pydantic_core.ValidationError, ModelRetry) as exc:
        part = _output.build_retried_tool_return(exc, tool_name=call.tool_name, tool_call_id=call.tool_call_id)
        raise _Retry(part, tool=True) from None


def _raise_if_incomplete_tool_call(
    response: m.ModelResponse, settings: ModelSettings, only: m.ToolCallPart | None = None
) -> None:
    """`IncompleteToolCall` if the response ended on a tool call (`only`, when given) whose arguments the token
    limit cut off, as the agent's run state checks it."""
    if (
        response.finish_reason == "length"
        and response.parts
        and isinstance(call := response.parts[-1], m.ToolCallPart)
        and (only is None or only.tool_call_id == call.tool_call_id)
        and _output.are_tool_call_args_cut_off(call)
    ):
        raise pa.IncompleteToolCall(_output.incomplete_tool_call_message(settings.get("max_tokens")))
