"""A price the agent file declares (the last source before unknown), cache tokens in every price, and the
shared HTTP client with its hooks for every provider (Groq and Mistral included), over real HTTP to the fake
OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from aqven.models.call import ModelCall, call_model
from aqven.models.pricing import Tokens, declared_cost, genai_price, is_priced, price_call
from aqven.project.schema import AgentPrice, AgentSpec
from support.fake_provider import FakeProvider, FakeReply

pytestmark = pytest.mark.usefixtures("clean_model_env", "closed_model_clients")


SCHEMA: dict[str, Any] = {"type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]}
PRICE = {"input": "0.10", "output": "0.40", "cache_read": "0.01"}


def call(agent: dict[str, Any]) -> ModelCall:
    spec = AgentSpec.model_validate({"id": "a", "settings": {"timeout_s": 5.0}, **agent})
    return ModelCall(
        agent=spec, prompt="hi", output_schema=SCHEMA, simulate=False, seed=1, node_id="n", project_root=Path(".")
    )


def test_a_declared_price_counts_cache_reads_at_their_own_rate() -> None:
    price = AgentPrice.model_validate(PRICE)
    # 1,000,000 input tokens of which 400,000 cached, 100,000 output: 0.6 × 0.10 + 0.4 × 0.01 + 0.1 × 0.40
    cost = declared_cost(price, Tokens(1_000_000, 100_000, cache_read=400_000))
    assert cost == Decimal("0.104") and isinstance(cost, Decimal)
    # Cache writes cost the input price unless the file says otherwise.
    assert declared_cost(price, Tokens(1_000_000, 0, cache_write=1_000_000)) == Decimal("0.1")


def test_the_declared_price_is_the_last_source_before_unknown() -> None:
    declared = AgentPrice.model_validate(PRICE)
    known = price_call(
        provider="openai", model_names=["gpt-4o-mini"], input_tokens=10, output_tokens=5, declared=declared
    )
    assert known.source == "genai_prices"  # a table that knows the model wins over the file
    local = price_call(
        provider="openai-compatible", model_names=["gemma"], input_tokens=10, output_tokens=5, declared=declared
    )
    assert local.source == "agent_price" and local.cost_usd == Decimal("0.000003")
    bare = price_call(provider="openai-compatible", model_names=["gemma"], input_tokens=10, output_tokens=5)
    assert bare.source == "unknown" and bare.cost_usd is None
    assert is_priced("openai-compatible", "gemma", declared, simulated=False)
    assert not is_priced("openai-compatible", "gemma", None, simulated=False)
    assert is_priced("openrouter", "some/new-model", None, simulated=False)  # it reports its cost
    assert not is_priced("openrouter", "some/new-model", None, simulated=True)  # a simulator reports nothing


def test_genai_prices_sees_the_cache_tokens() -> None:
    full = genai_price("anthropic", ["claude-3-5-haiku-latest"], Tokens(100_000, 0))
    cached = genai_price("anthropic", ["claude-3-5-haiku-latest"], Tokens(100_000, 0, cache_read=90_000))
    assert full is not None and cached is not None and cached < full


async def test_a_local_model_is_priced_by_its_agent_file_with_cached_tokens(fp: FakeProvider) -> None:
    fp.script([FakeReply(output={"reply": "hi"}, input_tokens=1_000, output_tokens=500, cached_tokens=600)])
    result = await call_model(call({"model": "openai-compatible:gemma", "base_url": fp.base_url, "price": PRICE}))
    assert result.cost_source == "agent_price"
    # 400 uncached × 0.10 + 600 cached × 0.01 + 500 output × 0.40, per million
    assert result.cost_usd == Decimal("0.000246")


@pytest.mark.parametrize(("provider", "var"), [("groq", "GROQ"), ("mistral", "MISTRAL")])
async def test_groq_and_mistral_go_through_the_shared_client_and_its_hooks(
    fp: FakeProvider, monkeypatch: pytest.MonkeyPatch, provider: str, var: str
) -> None:
    # The response hook reads usage.cost from the body: only the shared client has it.
    monkeypatch.setenv(f"{var}_API_KEY", "test-key-not-secret")
    monkeypatch.setenv(f"AQVEN_{var}_BASE_URL", fp.base_url.removesuffix("/v1"))
    fp.script([FakeReply(output={"reply": "hi"}, cost="0.0042")])
    result = await call_model(call({"model": f"{provider}:some-model", "output_mode": "prompted"}))
    assert result.output == {"reply": "hi"}
    assert result.cost_usd == Decimal("0.0042") and result.cost_source == "provider"
