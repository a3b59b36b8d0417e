"""The models layer: turning an agent into a model call (pydantic-ai), simulators, outcomes and pricing.

Kept free of imports on purpose: a project's simulator imports `aqven.models.simulator`, which must stay
cheap. The engine imports `aqven.models.call` (`call_model`, `ModelCall`, `CallResult`) and
`aqven.models.outcomes` (`ModelCallError`, the outcome codes).
"""
