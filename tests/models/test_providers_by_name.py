"""Every provider pydantic-ai knows by name, in the one provider table: the OpenAI-SDK ones through
pydantic-ai's provider class on AQVEN's shared client, Gemini on Google's SDK, and those whose SDK is not
installed refused with the extra to install — each over real HTTP to the fake provider on 127.0.0.1."""

from __future__ import annotations

import importlib.util
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from genai_prices import data as genai_data
from pydantic_ai.providers import infer_provider_class

from aqven.engine.check import check_agents
from aqven.models.call import ModelCall, call_model
from aqven.models.outcomes import KEY_ENV_VARS, PROVIDER_ERROR, PROVIDER_KEY_MISSING, ModelCallError
from aqven.models.providers import base_url_override_var
from aqven.project.loader import load_project
from aqven.project.providers import PROVIDERS
from aqven.project.schema import AgentSpec
from support.fake_provider import FakeProvider, FakeReply
from support.projects import write_files

pytestmark = pytest.mark.usefixtures("clean_model_env", "closed_model_clients")

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]}
OPENAI_SDK = sorted(name for name, p in PROVIDERS.items() if p.wire == "openai-sdk")
KEY = "test-key-not-secret"


def call(model: str, **agent: Any) -> ModelCall:
    spec = AgentSpec.model_validate({"id": "a", "model": model, "settings": {"timeout_s": 30.0}, **agent})
    return ModelCall(
        agent=spec, prompt="hi", output_schema=SCHEMA, simulate=False, seed=1, node_id="n", project_root=Path(".")
    )


def test_every_provider_in_the_table_is_one_pydantic_ai_knows_and_prices_under_a_real_id() -> None:
    genai_ids = {p.id for p in genai_data.providers}
    for name, spec in PROVIDERS.items():
        if spec.wire == "sdk":  # importing its class would import its SDK, which may be missing
            assert importlib.util.find_spec(f"pydantic_ai.providers.{name}") is not None, name
        elif name != "openai-compatible":
            assert infer_provider_class(name) is not None, name
        assert spec.genai_id is None or spec.genai_id in genai_ids, name
        if spec.key_env:
            assert spec.key_env in KEY_ENV_VARS, name  # masked in every stored text
    assert len(OPENAI_SDK) >= 12


@pytest.mark.parametrize("name", OPENAI_SDK)
def test_the_table_s_base_url_is_pydantic_ai_s_own(name: str) -> None:
    provider = infer_provider_class(name)(api_key=KEY)  # type: ignore[call-arg]
    table_url = PROVIDERS[name].default_base_url
    assert table_url is not None and table_url.rstrip("/") == str(provider.base_url).rstrip("/")


@pytest.mark.parametrize("name", ["deepseek", "together", "cerebras"])
async def test_an_openai_sdk_provider_calls_with_its_key_its_profile_and_the_shared_client(
    fp: FakeProvider, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    spec = PROVIDERS[name]
    assert spec.key_env is not None
    monkeypatch.setenv(spec.key_env, KEY)
    monkeypatch.setenv(base_url_override_var(name), fp.base_url)
    fp.script([FakeReply(output={"reply": "hi"}, cost="0.0042")])
    result = await call_model(call(f"{name}:some-model", settings={"timeout_s": 30.0, "max_tokens": 64}))
    assert result.output == {"reply": "hi"}
    # usage.cost is read by the shared client's response hook: the call went through it.
    assert result.cost_usd == Decimal("0.0042") and result.cost_source == "provider"
    (request,) = fp.chat_requests()
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "some-model"
    if name == "deepseek":  # pydantic-ai's DeepSeek profile: its API reads max_tokens only
        assert request.body.get("max_tokens") == 64 and "max_completion_tokens" not in request.body


async def test_an_openai_sdk_provider_without_its_key_names_the_variable() -> None:
    with pytest.raises(ModelCallError) as err:
        await call_model(call("deepseek:deepseek-chat"))
    assert err.value.code == PROVIDER_KEY_MISSING and "DEEPSEEK_API_KEY" in str(err.value)


@pytest.mark.parametrize("mode", ["prompted", "native", "tool"])
async def test_gemini_through_google_s_sdk_on_the_shared_client(
    fp: FakeProvider, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    monkeypatch.setenv(base_url_override_var("google"), fp.base_url.removesuffix("/v1"))
    fp.script([FakeReply(output={"reply": "hi"}, input_tokens=1000, output_tokens=100)])
    result = await call_model(call("google:gemini-2.5-flash", output_mode=mode))
    assert result.output == {"reply": "hi"}
    assert result.cost_source == "genai_prices" and result.cost_usd is not None and result.cost_usd > 0
    (request,) = [r for r in fp.requests if r.method == "POST"]
    assert request.path.endswith("/models/gemini-2.5-flash:generateContent")
    assert request.headers["x-goog-api-key"] == KEY
    if mode == "tool":
        assert request.body["tools"][0]["functionDeclarations"]
    if mode == "native":
        assert request.body["generationConfig"]["responseMimeType"] == "application/json"


async def test_gemini_rate_limited_is_classified_as_such(fp: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    monkeypatch.setenv(base_url_override_var("google"), fp.base_url.removesuffix("/v1"))
    fp.script([FakeReply("429")] * 10)
    with pytest.raises(ModelCallError) as err:
        await call_model(call("google:gemini-2.5-flash", output_mode="prompted"))
    assert err.value.code == "PROVIDER_RATE_LIMITED"


async def test_a_provider_whose_sdk_is_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CO_API_KEY", KEY)
    with pytest.raises(ModelCallError) as err:
        await call_model(call("cohere:command-r"))
    assert err.value.code == PROVIDER_ERROR
    assert "pydantic-ai-slim[cohere]" in (err.value.hint or "")


def test_aqven_check_warns_about_a_missing_sdk_and_not_about_an_installed_one(tmp_path: Path) -> None:
    write_files(
        tmp_path,
        {
            "aqven.yaml": "package: p\n",
            "agents/co.yaml": "model: cohere:command-r\n",
            "agents/gem.yaml": "model: google:gemini-2.5-flash\n",
            "agents/ds.yaml": "model: deepseek:deepseek-chat\n",
        },
    )
    found = {(d.code, d.file, d.line) for d in check_agents(load_project(tmp_path))}
    assert ("W_PROVIDER_SDK_MISSING", "agents/co.yaml", 1) in found
    assert not [f for f in found if f[0] == "W_PROVIDER_SDK_MISSING" and f[1] != "agents/co.yaml"]
    assert not [f for f in found if f[0] == "E_UNKNOWN_PROVIDER"]
