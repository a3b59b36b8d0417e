"""A model call's answer as a test's stand-in model gives it (`Engine(call=...)`): one request, priced."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from aqven.models.call import CallResult, ModelCall


def answered(call: ModelCall, output: Any, *, latency_s: float = 0.0) -> CallResult:
    """What `call` returns when the model answered `output`: 10 tokens in, 5 out, $0.0001 reported by the provider."""
    return CallResult(
        output=output,
        model_name=call.agent.model,
        provider="openrouter",
        input_tokens=10,
        output_tokens=5,
        requests=1,
        cost_usd=Decimal("0.0001"),
        cost_source="provider",
        simulated=call.simulate,
        latency_ms=latency_s * 1000,
        output_retries=0,
    )
