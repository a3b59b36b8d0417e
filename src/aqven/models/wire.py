"""What the HTTP layer sees of one model call: response headers arriving, the stall timeout, reported cost.

The providers AQVEN builds on the OpenAI and Anthropic SDKs share one `httpx2.AsyncClient` per event loop
and provider, with two event hooks. The hooks read the state of the *current* call from a context
variable that `call_model` sets, so concurrent calls never see each other's state.

Timeout versus stall (non-streamed requests):

* Before the response headers arrive, the read timeout is the agent's ``timeout_s`` (a non-streamed
  model sends nothing until it has finished generating). A call whose headers never come, or that runs
  past ``timeout_s`` as a whole (pydantic-ai's ``request_timeout``), is ``MODEL_TIMEOUT``.
* When the headers have arrived and the agent sets ``stall_timeout_s``, the response hook shortens the
  read timeout of that request's body to ``stall_timeout_s``: no byte of the body for that long is
  ``MODEL_STREAM_STALLED``. Without ``stall_timeout_s`` a stalled body runs into ``timeout_s`` and is
  ``MODEL_TIMEOUT``.

The response hook also reads a JSON body once (it is cached for the SDK) to capture ``usage.cost``,
which OpenRouter and some OpenAI-compatible servers report.
"""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import httpx2


@dataclass
class WireState:
    """Per-call observations; one instance per `call_model`."""

    stall_timeout_s: float | None = None
    headers_received: bool = False  # for the request in flight
    responses: int = 0  # 2xx responses seen
    reported_costs: list[Decimal | None] = field(default_factory=list)  # one per 2xx response

    def reported_total(self) -> Decimal | None:
        """The sum of the reported costs, or None unless every successful response reported one."""
        if not self.reported_costs or any(c is None for c in self.reported_costs):
            return None
        return sum((c for c in self.reported_costs if c is not None), Decimal(0))


CURRENT: contextvars.ContextVar[WireState | None] = contextvars.ContextVar("aqven_wire_state", default=None)


async def _on_request(request: httpx2.Request | Any) -> None:
    state = CURRENT.get()
    if state is not None:
        state.headers_received = False


async def _on_response(response: httpx2.Response | Any) -> None:
    state = CURRENT.get()
    if state is None:
        return
    state.headers_received = True
    if state.stall_timeout_s is not None:
        timeouts = response.request.extensions.get("timeout")
        if isinstance(timeouts, dict):
            timeouts["read"] = state.stall_timeout_s
    if not 200 <= response.status_code < 300:
        return
    content_type = response.headers.get("content-type", "")
    if "json" not in content_type:
        return  # a stream (text/event-stream) or something the SDK will reject itself
    await response.aread()  # cached: the SDK reads the same bytes afterwards
    state.responses += 1
    state.reported_costs.append(_cost_of(response.content))


def _cost_of(body: bytes) -> Decimal | None:
    try:
        data: Any = json.loads(body)
    except ValueError:
        return None
    usage = data.get("usage") if isinstance(data, dict) else None
    cost = usage.get("cost") if isinstance(usage, dict) else None
    return to_decimal(cost)


def to_decimal(value: Any) -> Decimal | None:
    """A provider's number as Decimal through its text (``Decimal(str(x))``), never its binary value."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float | str | Decimal):
        try:
            out = Decimal(str(value))
        except InvalidOperation:
            return None
        return out if out.is_finite() and out >= 0 else None
    return None


def http_client(timeout_s: float) -> httpx2.AsyncClient:
    """An HTTP client with AQVEN's hooks. Per-request timeouts come from the model settings."""
    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
        event_hooks={"request": [_on_request], "response": [_on_response]},
    )


def legacy_http_client(timeout_s: float) -> Any:
    """The same client on the legacy `httpx` package, for SDKs still built on it (Groq's): the same hooks, so the
    reported cost and the stall timeout reach every provider."""
    import httpx

    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
        event_hooks={"request": [_on_request], "response": [_on_response]},
    )
