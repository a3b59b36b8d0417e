"""OpenTelemetry export: with ``AQVEN_OTEL_ENDPOINT`` (or the standard ``OTEL_EXPORTER_OTLP_ENDPOINT``) set, runs
export OTLP/HTTP spans — pydantic-ai's own instrumentation of every model call, and AQVEN's spans of series
attempts (`aqven.research.series.runner`) tagged with series, experiment, variant, case and repeat.

What never leaves: prompts and answers (pydantic-ai runs with ``include_content=False``: a held-out case's input
would be in its prompt), held-out case names (an attempt of a held-out case is tagged with its position in the
series' secret order, ``aqven.case_index``, never its name), and keys (pydantic-ai puts none in its spans).
Logfire, Langfuse, Phoenix and Braintrust ingest OTLP; point the variable at their endpoint, or at a collector.
Without either variable nothing is configured and every span is a no-op.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Tracer

ENDPOINT_VARS = ("AQVEN_OTEL_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_lock = threading.Lock()
_state: dict[str, Any] = {"endpoint": None, "provider": None}


def endpoint() -> str | None:
    """The OTLP/HTTP base URL from the environment (AQVEN's variable first), or None."""
    for var in ENDPOINT_VARS:
        value = os.environ.get(var, "").strip()
        if value:
            return value.rstrip("/")
    return None


def tracer() -> Tracer:
    """AQVEN's tracer, exporting to the configured endpoint (configured on first use, again when it changes)."""
    url = endpoint()
    with _lock:
        if url != _state["endpoint"]:
            _configure(url)
        provider = _state["provider"]
    if provider is None:
        return trace.NoOpTracer()
    out: Tracer = provider.get_tracer("aqven")
    return out


def span(name: str, attributes: Callable[[], dict[str, Any]]) -> AbstractContextManager[Span]:
    """A span of AQVEN's tracer, current while the block runs. Without an endpoint, a no-op that costs nothing more
    (its attributes are not even made): a series' driver opens one per attempt."""
    chosen = tracer()
    if isinstance(chosen, trace.NoOpTracer):
        return contextlib.nullcontext(trace.INVALID_SPAN)
    return chosen.start_as_current_span(name, attributes=attributes())


def _configure(url: str | None) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings

    old = _state["provider"]
    if old is not None:
        old.shutdown()  # flushes what the old endpoint still had to send
    _state["endpoint"] = url
    _state["provider"] = None
    if url is None:
        Agent.instrument_all(False)
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "aqven"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=10)))
    _state["provider"] = provider
    # Every model call (the Agent path and the lean path's direct requests) gets pydantic-ai's spans, with no
    # prompt or answer text in them.
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider, include_content=False))


def flush(timeout_s: float = 10.0) -> bool:
    """Send every finished span now (tests; a server that stops). True when all were sent or none is pending."""
    with _lock:
        provider = _state["provider"]
    return True if provider is None else bool(provider.force_flush(int(timeout_s * 1000)))
