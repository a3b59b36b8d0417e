"""The providers' table (project/providers.py): the schema, the model builder and pricing all read it."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest
from pydantic import ValidationError

from aqven.models.outcomes import ModelCallError
from aqven.models.pricing import Tokens, genai_price, list_ids
from aqven.models.providers import KEY_VARS, build_model
from aqven.project.providers import PROVIDERS
from aqven.project.schema import AgentSpec


def test_the_schema_takes_exactly_the_table() -> None:
    for name in PROVIDERS:
        AgentSpec(id="a", model=f"{name}:some-model")
    with pytest.raises(ValidationError, match="unknown provider 'nope'; known: " + ", ".join(PROVIDERS)):
        AgentSpec(id="a", model="nope:some-model")


def test_every_provider_builds_a_model_of_its_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    assert {p.key_env for p in PROVIDERS.values() if p.key_env} == set(KEY_VARS.values())
    for spec in PROVIDERS.values():
        if spec.key_env:
            monkeypatch.setenv(spec.key_env, "test-key")

    async def build(name: str) -> str:
        agent = AgentSpec(id="a", model=f"{name}:openai/m", base_url="http://127.0.0.1:9/v1")
        return type(build_model(agent)).__name__

    def installed(name: str) -> bool:
        module = PROVIDERS[name].sdk_module
        return module is None or importlib.util.find_spec(module.split(".")[0]) is not None

    wires = {name: asyncio.run(build(name)) for name in PROVIDERS if installed(name)}
    assert wires == {
        "openrouter": "OpenRouterModel",
        "openai": "OpenAIChatModel",
        "anthropic": "AnthropicModel",
        "mistral": "MistralModel",
        "groq": "GroqModel",
        "openai-compatible": "OpenAIChatModel",
        "google": "GoogleModel",
        **{name: "OpenAIChatModel" for name, p in PROVIDERS.items() if p.wire == "openai-sdk"},
        **({"huggingface": "HuggingFaceModel"} if installed("huggingface") else {}),  # with aqven[hf]
    }
    for name in PROVIDERS:
        if not installed(name):  # its SDK is an extra: the call fails with the extra to install
            with pytest.raises(ModelCallError, match="is not installed"):
                asyncio.run(build(name))


def test_pricing_reads_the_table() -> None:
    assert list_ids("mistral", ["mistral-small"]) == ["mistralai/mistral-small"]
    assert list_ids("openrouter", ["openai/gpt-4.1-mini"]) == ["openai/gpt-4.1-mini"]
    assert list_ids("openai-compatible", ["llama3"]) == ["llama3"]
    assert genai_price("openai-compatible", ["gpt-4o"], Tokens(1000, 1000)) is None  # never guess a server's price
