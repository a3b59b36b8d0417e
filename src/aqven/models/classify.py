"""Turn whatever a pydantic-ai run raised into an outcome code (DESIGN §5).

| raised | code | class | retryable |
|---|---|---|---|
| output retries exhausted, last problem broken JSON | MODEL_INVALID_JSON | model_failure | no |
| output retries exhausted, last problem the schema | MODEL_SCHEMA_MISMATCH | model_failure | no |
| output retries exhausted otherwise (no output, token limit) | MODEL_RETRIES_EXHAUSTED | model_failure | no |
| output cut off by max_tokens inside a tool call | MODEL_INVALID_JSON | model_failure | no |
| 400/422 naming an invalid or unsupported output schema | OUTPUT_SCHEMA_REJECTED | model_failure | no |
| refusal, content filter | MODEL_REFUSAL | model_failure | no |
| 429 | PROVIDER_RATE_LIMITED (retry_after) | infra | yes |
| 5xx, 408/409/425, connection error, garbled response | PROVIDER_ERROR | infra | yes |
| other 4xx (auth, quota, not found, rejected request) | PROVIDER_ERROR | infra | no |
| no response within timeout_s | MODEL_TIMEOUT | infra | yes |
| headers arrived, then no byte for stall_timeout_s | MODEL_STREAM_STALLED | infra | yes |
| the simulator raised; pydantic-ai usage error | CODE_ERROR | infra | no |
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import pydantic_core
from pydantic_ai import exceptions as pa
from pydantic_ai.messages import ModelMessage, ModelRequest, RetryFeedbackPart, ToolReturnPart

from aqven.models import outcomes as oc
from aqven.models.outcomes import OutcomeCode
from aqven.models.outputs import SCHEMA_MISMATCH_PREFIX
from aqven.models.simulate import SimulatorCrashed
from aqven.models.wire import WireState
from aqven.project.local_servers import LOCAL_SERVERS
from aqven.project.schema import AgentSpec

_SCHEMA_REJECTED = re.compile(
    r"invalid[_ ]json[_ ]schema|invalid[_ ]function[_ ]parameters|invalid schema for"
    r"|schema.{0,40}(too (complex|large|many)|not supported|unsupported|exceeds)"
    r"|(response_format|json_schema|output schema).{0,60}(not supported|unsupported|invalid)",
    re.IGNORECASE,
)
_EXHAUSTED = ("exceeded maximum output retries", "exceeded max retries count")


@dataclass(frozen=True)
class Failure:
    code: OutcomeCode
    message: str
    retryable: bool = False
    retry_after: float | None = None
    provider_status: int | None = None
    hint: str = ""


def _short(text: object, limit: int = 400) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _body_text(exc: pa.ModelAPIError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            parts = [str(error.get(k)) for k in ("message", "code", "type", "param") if error.get(k)]
            if parts:
                return " ".join(parts)
    return str(body) if body is not None else exc.message


def classify(
    exc: BaseException, *, state: WireState, agent: AgentSpec, messages: Sequence[ModelMessage], simulated: bool
) -> Failure:
    who = agent.model
    if isinstance(exc, oc.ModelCallError):
        code = cast(OutcomeCode, exc.code)
        return Failure(code, exc.message, exc.retryable, exc.retry_after, exc.provider_status, exc.hint)
    if isinstance(exc, SimulatorCrashed):
        return Failure(
            oc.CODE_ERROR,
            f"the simulator of agent {agent.id or who!r} ({agent.simulator}) failed: {_short(exc)}",
            hint="fix the simulator function; it must return a SimReply",
        )
    if isinstance(exc, pa.ContentFilterError):
        return Failure(oc.MODEL_REFUSAL, f"{who} refused to answer: {_short(exc.message)}")
    if isinstance(exc, pa.UnexpectedModelBehavior):
        return _unexpected(exc, agent, messages)
    if isinstance(exc, pa.ModelRequestTimeout):
        return Failure(
            oc.MODEL_TIMEOUT,
            f"{who} did not answer within timeout_s={agent.settings.timeout_s:g}s",
            retryable=True,
            hint="raise settings.timeout_s in the agent file if the model is just slow",
        )
    if isinstance(exc, pa.ModelTimeoutError):
        if state.headers_received and state.stall_timeout_s is not None:
            return Failure(
                oc.MODEL_STREAM_STALLED,
                f"{who} started answering, then sent nothing for stall_timeout_s={state.stall_timeout_s:g}s",
                retryable=True,
            )
        return Failure(
            oc.MODEL_TIMEOUT,
            f"{who} did not answer within timeout_s={agent.settings.timeout_s:g}s",
            retryable=True,
            hint="raise settings.timeout_s in the agent file if the model is just slow",
        )
    if isinstance(exc, pa.ModelAPIError):
        return _api_error(exc, agent)
    if isinstance(exc, pa.UserError):
        return Failure(oc.CODE_ERROR, f"{who} cannot be called as configured: {_short(exc.message)}")
    if simulated:
        return Failure(oc.CODE_ERROR, f"simulated call of {who} failed: {type(exc).__name__}: {_short(exc)}")
    return Failure(oc.PROVIDER_ERROR, f"{who} failed: {type(exc).__name__}: {_short(exc)}")


def _api_error(exc: pa.ModelAPIError, agent: AgentSpec) -> Failure:
    who = agent.model
    status = exc.status_code if isinstance(exc, pa.ModelHTTPError) else None
    detail = _short(_body_text(exc))
    where = f"HTTP {status}" if status is not None else type(exc).__name__
    if isinstance(exc, pa.ModelRateLimitError) or status == 429:
        after = exc.retry_after
        wait = f", retry after {after:g}s" if after is not None else ""
        return Failure(
            oc.PROVIDER_RATE_LIMITED,
            f"{who} is rate limited by the provider ({where}{wait})",
            retryable=True,
            retry_after=after,
            provider_status=status,
        )
    if isinstance(exc, pa.ModelConnectionError):
        url = _base_url(agent)
        return Failure(
            oc.PROVIDER_ERROR,
            f"{who}: cannot reach the provider{f' at {url}' if url else ''}: {detail}",
            retryable=True,
            hint="start the server, or fix base_url (host and port)" if url else "",
        )
    if status == 404 and agent.provider == "openai-compatible":
        url = _base_url(agent) or ""
        v1 = "" if "/v1" in url else f"; base_url usually ends in /v1 ({url.rstrip('/')}/v1)"
        return Failure(
            oc.PROVIDER_ERROR,
            f"{who}: the server at {url} answered HTTP 404: {detail}",
            provider_status=status,
            hint=f"check base_url and that the server serves the model {agent.model_name!r}{v1}",
        )
    if isinstance(exc, pa.ModelRequestRejectedError) and _SCHEMA_REJECTED.search(detail):
        return Failure(
            oc.OUTPUT_SCHEMA_REJECTED,
            f"the provider rejected the output schema for {who} ({where}): {detail}",
            provider_status=status,
            hint="simplify the output type, or try another output_mode",
        )
    if isinstance(exc, pa.ModelAuthenticationError):
        return Failure(
            oc.PROVIDER_ERROR,
            f"the provider rejected the key for {who} ({where}): {detail}",
            provider_status=status,
            hint="check the API key and that it may use this model",
        )
    if isinstance(exc, pa.ModelServerError | pa.ModelUnavailableError):
        return Failure(
            oc.PROVIDER_ERROR,
            f"{who}: provider error ({where}): {detail}",
            True,
            None,
            status,
            _mode_hint(agent, detail),
        )
    retryable = status is None or status >= 500 or status in (408, 409, 425)
    if isinstance(exc, pa.ModelQuotaExceededError | pa.ModelRequestRejectedError):
        retryable = False
    return Failure(oc.PROVIDER_ERROR, f"{who}: provider error ({where}): {detail}", retryable, None, status)


def _base_url(agent: AgentSpec) -> str | None:
    """Where the agent's calls go, for messages (an override variable first, as the provider resolves it)."""
    server = LOCAL_SERVERS.get(agent.server or "")
    override = os.environ.get(f"AQVEN_{agent.provider.upper().replace('-', '_')}_BASE_URL")
    return override or agent.base_url or (server.base_url if server else None)


def _mode_hint(agent: AgentSpec, detail: str = "") -> str:
    """For an OpenAI-compatible server that fails the agent's structured output mode: what to change.

    Local servers differ in what they support (`aqven.project.local_servers`): llama.cpp's need their own request
    shapes (`server: llama-cpp`) and `llama-server` needs ``--jinja`` for tools; `prompted` works everywhere."""
    mode = agent.output_mode
    if agent.provider != "openai-compatible" or mode == "prompted":
        return ""
    server = LOCAL_SERVERS.get(agent.server or "")
    if "--jinja" in detail:
        return (
            "start llama-server with --jinja (tool calls need the model's chat template), or use output_mode: prompted"
        )
    if server is not None and mode in server.broken_modes:
        return f"output_mode {mode} is known to fail on {server.name}; use output_mode: prompted"
    if server is None:
        return (
            f"the server may not support output_mode {mode}: for llama.cpp set server: llama-cpp (llama-server) or "
            "server: llama-cpp-python (their own request shapes), or use output_mode: prompted"
        )
    return f"{server.name} may not support output_mode {mode} with this model; use output_mode: prompted"


def _unexpected(exc: pa.UnexpectedModelBehavior, agent: AgentSpec, messages: Sequence[ModelMessage]) -> Failure:
    who = agent.model
    if isinstance(exc, pa.IncompleteToolCall):
        return Failure(oc.MODEL_INVALID_JSON, f"{who} was cut off mid-output by max_tokens: {_short(exc.message)}")
    if isinstance(exc, pa.OutputTokenLimitExceeded):
        return Failure(oc.MODEL_RETRIES_EXHAUSTED, f"{who} produced no output within max_tokens")
    if any(marker in exc.message.lower() for marker in _EXHAUSTED):
        kind, detail = _last_problem(exc, messages)
        code: OutcomeCode = oc.MODEL_RETRIES_EXHAUSTED
        if kind == "invalid_json":
            code = oc.MODEL_INVALID_JSON
        elif kind == "schema_mismatch":
            code = oc.MODEL_SCHEMA_MISMATCH
        # A server that ignores the mode's request (no forced tool call, no JSON-schema output) shows up here.
        ignored = (agent.output_mode == "tool" and kind == "no_output") or (
            agent.output_mode == "native" and kind in ("invalid_json", "schema_mismatch")
        )
        hint = _mode_hint(agent) if ignored else ""
        return Failure(code, f"{who} failed its output type after its retries ({kind}): {detail}", hint=hint)
    return Failure(oc.PROVIDER_ERROR, f"{who}: unusable response: {_short(exc.message)}", retryable=True)


# ---- output retries -----------------------------------------------------------------------------


def _problem_of_content(content: Any) -> tuple[str, str]:
    if isinstance(content, list):
        types = [str(e.get("type", "")) for e in content if isinstance(e, dict)]
        msgs = [str(e.get("msg", "")) for e in content if isinstance(e, dict)]
        kind = "invalid_json" if "json_invalid" in types else "schema_mismatch"
        return kind, _short("; ".join(msgs) or content)
    text = str(content)
    if text.startswith(SCHEMA_MISMATCH_PREFIX):
        return "schema_mismatch", _short(text)
    return "other", _short(text)


def _problem_of_part(part: RetryFeedbackPart | ToolReturnPart) -> tuple[str, str]:
    if isinstance(part, RetryFeedbackPart) and part.retry.cause == "no_output":
        return "no_output", _short(part.content)
    return _problem_of_content(part.content)


def _retry_parts(messages: Sequence[ModelMessage]) -> list[RetryFeedbackPart | ToolReturnPart]:
    out: list[RetryFeedbackPart | ToolReturnPart] = []
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, RetryFeedbackPart) or (isinstance(p, ToolReturnPart) and p.outcome == "retried"):
                    out.append(p)
    return out


def retry_events(messages: Sequence[ModelMessage]) -> list[tuple[str, str]]:
    """(reason, message) for every output retry in the history: invalid_json, schema_mismatch, no_output, other."""
    return [_problem_of_part(p) for p in _retry_parts(messages)]


def _last_problem(exc: BaseException, messages: Sequence[ModelMessage]) -> tuple[str, str]:
    """What made the last attempt fail: the exhausting error's cause first, else the last retry in history."""
    cause = exc.__cause__
    if isinstance(cause, pa.ToolRetryError):
        return _problem_of_part(cause.tool_retry)
    if isinstance(cause, pydantic_core.ValidationError):
        return _problem_of_content(cause.errors(include_url=False))
    if isinstance(cause, pa.ModelRetry):
        return _problem_of_content(cause.message)
    parts = _retry_parts(messages)
    if parts:
        return _problem_of_part(parts[-1])
    return "other", _short(exc)
