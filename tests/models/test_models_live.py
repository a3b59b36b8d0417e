"""Live model calls through real HTTP to the fake OpenAI-compatible server (tests/support/fake_provider.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from aqven.models.call import CallResult, ModelCall, call_model
from aqven.models.outcomes import ModelCallError
from aqven.project.schema import AgentSpec
from support.fake_provider import FakeProvider, FakeReply
from support.paths import FIXTURES

pytestmark = pytest.mark.usefixtures("clean_model_env", "closed_model_clients")


SCHEMA: dict[str, Any] = {"type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]}
PLANTED = "sk-or-v1-PLANTED0123456789abcdefPLANTED"


@pytest.fixture
def fp(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        monkeypatch.setenv("AQVEN_OPENROUTER_BASE_URL", server.base_url)
        monkeypatch.setenv("AQVEN_OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENROUTER_API_KEY", PLANTED)
        yield server


def agent(**kw: Any) -> AgentSpec:
    data: dict[str, Any] = {"id": "writer", "model": "openrouter:openai/gpt-4o-mini", "settings": {"timeout_s": 1.0}}
    data.update(kw)
    return AgentSpec.model_validate(data)


def call(a: AgentSpec, schema: dict[str, Any] | None = None) -> ModelCall:
    return ModelCall(
        agent=a,
        prompt="Say hi",
        output_schema=schema or SCHEMA,
        simulate=False,
        seed=1,
        node_id="draft",
        project_root=Path("."),
    )


async def fails(c: ModelCall, events: list[tuple[str, dict[str, Any]]] | None = None) -> ModelCallError:
    with pytest.raises(ModelCallError) as info:
        await call_model(c, on_event=(lambda k, p: events.append((k, p))) if events is not None else None)
    return info.value


# ---- success and cost ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["tool", "native", "prompted"])
async def test_answer_in_every_output_mode_with_reported_cost(fp: FakeProvider, mode: str) -> None:
    fp.script([FakeReply(output={"reply": "hi"}, cost="0.00123", model="openai/gpt-4o-mini-2024-07-18")])
    result = await call_model(call(agent(output_mode=mode)))
    assert isinstance(result, CallResult)
    assert result.output == {"reply": "hi"} and type(result.output) is dict
    assert result.model_name == "openai/gpt-4o-mini-2024-07-18"
    assert result.provider == "openrouter"
    assert (result.input_tokens, result.output_tokens, result.requests) == (11, 7, 1)
    assert result.cost_usd == Decimal("0.00123") and result.cost_source == "provider"
    assert not result.simulated and result.output_retries == 0 and result.latency_ms > 0
    (req,) = fp.chat_requests()
    assert req.headers.get("authorization") == f"Bearer {PLANTED}"
    if mode == "tool":
        assert req.body["tools"][0]["function"]["name"]
    if mode == "native":
        assert req.body["response_format"]["type"] == "json_schema"


async def test_settings_reach_the_request(fp: FakeProvider) -> None:
    a = agent(settings={"temperature": 0.3, "max_tokens": 50, "top_p": 0.9, "seed": 7, "timeout_s": 1.0})
    fp.script([FakeReply(output={"reply": "hi"})])
    await call_model(call(a, SCHEMA))
    body = fp.chat_requests()[0].body
    assert body["temperature"] == 0.3 and body["max_tokens"] == 50 and body["top_p"] == 0.9 and body["seed"] == 7


async def test_string_schema_is_plain_text(fp: FakeProvider) -> None:
    fp.script([FakeReply(output="plain words")])
    result = await call_model(call(agent(output_mode="tool"), {"type": "string"}))
    assert result.output == "plain words"
    assert not fp.chat_requests()[0].body.get("tools")


async def test_non_object_schema_is_wrapped_and_unwrapped(fp: FakeProvider) -> None:
    fp.script([FakeReply(output={"value": ["a", "b"]})])
    result = await call_model(call(agent(), {"type": "array", "items": {"type": "string"}}))
    assert result.output == ["a", "b"]


async def test_output_retry_then_success_counts_tokens_and_costs(fp: FakeProvider) -> None:
    fp.script([FakeReply(output={"nope": 1}, cost="0.001"), FakeReply(output={"reply": "ok"}, cost="0.002")])
    events: list[tuple[str, dict[str, Any]]] = []
    result = await call_model(call(agent(output_retries=2)), on_event=lambda k, p: events.append((k, p)))
    assert result.output == {"reply": "ok"}
    assert result.output_retries == 1 and result.requests == 2
    assert (result.input_tokens, result.output_tokens) == (22, 14)
    assert result.cost_usd == Decimal("0.003") and result.cost_source == "provider"
    assert [k for k, _ in events] == ["output_retry"]
    payload = events[0][1]
    assert payload["reason"] == "schema_mismatch" and payload["attempt"] == 1 and payload["node_id"] == "draft"


async def test_partly_reported_cost_falls_back_to_the_list(fp: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AQVEN_PRICES_FILE", str(FIXTURES / "openrouter_models.json"))
    fp.script([FakeReply(output={"nope": 1}, cost="0.001"), FakeReply(output={"reply": "ok"})])
    result = await call_model(call(agent(output_retries=1)))
    assert result.cost_source == "openrouter_list"
    assert result.cost_usd == Decimal("0.00000015") * 22 + Decimal("0.0000006") * 14


async def test_openai_compatible_reported_cost_is_read_from_the_body(fp: FakeProvider) -> None:
    a = agent(model="openai-compatible:local-llama", base_url=fp.base_url)
    fp.script([FakeReply(output={"reply": "hi"}, cost="0.0005")])
    result = await call_model(call(a))
    assert result.cost_usd == Decimal("0.0005") and result.cost_source == "provider"
    assert fp.chat_requests()[0].headers.get("authorization") == "Bearer not-needed"


async def test_genai_prices_fallback(fp: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    from genai_prices import Usage, calc_price

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0000000000000000")
    fp.script([FakeReply(output={"reply": "hi"})])
    result = await call_model(call(agent(model="openai:gpt-4o-mini")))
    expected = calc_price(Usage(input_tokens=11, output_tokens=7), model_ref="gpt-4o-mini", provider_id="openai")
    assert result.cost_source == "genai_prices"
    assert result.cost_usd == expected.total_price and isinstance(result.cost_usd, Decimal)


async def test_unknown_price(fp: FakeProvider) -> None:
    fp.script([FakeReply(output={"reply": "hi"})])
    result = await call_model(call(agent(model="openai-compatible:my-local-model", base_url=fp.base_url)))
    assert result.cost_usd is None and result.cost_source == "unknown"


# ---- failures -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "code", "outcome", "retryable", "status"),
    [
        (FakeReply("429"), "PROVIDER_RATE_LIMITED", "infra", True, 429),
        (FakeReply("500"), "PROVIDER_ERROR", "infra", True, 500),
        (FakeReply("bad_body"), "PROVIDER_ERROR", "infra", True, None),
        (FakeReply("401_echo"), "PROVIDER_ERROR", "infra", False, 401),
        (FakeReply("slow", delay_s=3), "MODEL_TIMEOUT", "infra", True, None),
        (FakeReply("refusal"), "MODEL_REFUSAL", "model_failure", False, None),
        (FakeReply("content_filter"), "MODEL_REFUSAL", "model_failure", False, None),
        (FakeReply("schema_rejected"), "OUTPUT_SCHEMA_REJECTED", "model_failure", False, 400),
    ],
    ids=lambda v: v.kind if isinstance(v, FakeReply) else None,
)
@pytest.mark.parametrize("mode", ["tool", "native"])
async def test_failure_classification(
    fp: FakeProvider, reply: FakeReply, code: str, outcome: str, retryable: bool, status: int | None, mode: str
) -> None:
    fp.script([reply])
    err = await fails(call(agent(output_mode=mode, settings={"timeout_s": 0.5})))
    assert (err.code, err.outcome, err.retryable, err.provider_status) == (code, outcome, retryable, status)
    assert len(fp.chat_requests()) == 1  # the SDK never retries: the engine owns retry policy


async def test_rate_limit_exposes_retry_after(fp: FakeProvider) -> None:
    fp.script([FakeReply("429", retry_after="7")])
    err = await fails(call(agent()))
    assert err.code == "PROVIDER_RATE_LIMITED" and err.retry_after == 7.0 and err.retryable


async def test_stalled_body_after_headers(fp: FakeProvider) -> None:
    fp.script([FakeReply("stall", delay_s=3)])
    err = await fails(call(agent(settings={"timeout_s": 2.0, "stall_timeout_s": 0.3})))
    assert err.code == "MODEL_STREAM_STALLED" and err.outcome == "infra" and err.retryable


async def test_stall_without_stall_timeout_is_a_timeout(fp: FakeProvider) -> None:
    fp.script([FakeReply("stall", delay_s=3)])
    err = await fails(call(agent(settings={"timeout_s": 0.5})))
    assert err.code == "MODEL_TIMEOUT"


async def test_slow_headers_are_a_timeout_not_a_stall(fp: FakeProvider) -> None:
    fp.script([FakeReply("slow", delay_s=3)])
    err = await fails(call(agent(settings={"timeout_s": 0.5, "stall_timeout_s": 0.2})))
    assert err.code == "MODEL_TIMEOUT"


@pytest.mark.parametrize("mode", ["tool", "native", "prompted"])
async def test_invalid_json_exhausts_retries(fp: FakeProvider, mode: str) -> None:
    fp.script([FakeReply("invalid_json"), FakeReply("invalid_json"), FakeReply("invalid_json")])
    events: list[tuple[str, dict[str, Any]]] = []
    err = await fails(call(agent(output_mode=mode, output_retries=2)), events)
    assert err.code == "MODEL_INVALID_JSON" and err.outcome == "model_failure" and not err.retryable
    assert err.output_retries == 2 and len(events) == 2 and {p["reason"] for _, p in events} == {"invalid_json"}
    assert err.requests == 3 and err.input_tokens == 33  # partial usage of the failed call


@pytest.mark.parametrize("mode", ["tool", "native", "prompted"])
async def test_schema_mismatch_exhausts_retries(fp: FakeProvider, mode: str) -> None:
    fp.script([FakeReply(output={"reply": 5}), FakeReply(output={"other": "x"})])
    err = await fails(call(agent(output_mode=mode, output_retries=1)))
    assert err.code == "MODEL_SCHEMA_MISMATCH" and err.outcome == "model_failure"


async def test_missing_key_names_the_variable_and_sends_nothing(
    fp: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY")
    err = await fails(call(agent()))
    assert err.code == "PROVIDER_KEY_MISSING" and err.outcome == "infra" and not err.retryable
    assert "OPENROUTER_API_KEY is not set" in err.message
    assert fp.requests == []


async def test_missing_custom_key_variable(fp: FakeProvider) -> None:
    a = agent(model="openai-compatible:llama", base_url=fp.base_url, api_key_env="MY_LLAMA_KEY")
    err = await fails(call(a))
    assert err.code == "PROVIDER_KEY_MISSING" and "MY_LLAMA_KEY" in err.message
    assert fp.requests == []


@pytest.mark.parametrize("provider", ["openai", "anthropic", "mistral", "groq"])
async def test_every_provider_checks_its_key_first(provider: str) -> None:
    err = await fails(call(agent(model=f"{provider}:some-model")))
    assert err.code == "PROVIDER_KEY_MISSING" and f"{provider.upper()}_API_KEY" in err.message


def _texts(err: BaseException) -> str:
    """Everything an exception shows: message, repr, dict, and its whole chain."""
    out: list[str] = []
    seen: set[int] = set()
    stack: list[BaseException | None] = [err]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        out += [str(e), repr(e), repr(e.args)]
        stack += [e.__cause__, e.__context__]
    if isinstance(err, ModelCallError):
        out.append(json.dumps(err.to_dict()))
    return "\n".join(out)


@pytest.mark.parametrize("kind", ["401_echo", "429", "500", "schema_rejected", "invalid_json", "refusal", "bad_body"])
async def test_planted_key_never_leaks(fp: FakeProvider, kind: str) -> None:
    fp.script([FakeReply(kind), FakeReply(kind)])
    events: list[tuple[str, dict[str, Any]]] = []
    err = await fails(call(agent(output_retries=1)), events)
    assert PLANTED not in _texts(err)
    assert PLANTED not in json.dumps(events)
    assert PLANTED[10:30] not in _texts(err)
