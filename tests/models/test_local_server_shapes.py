"""The request shapes of the output modes on local servers: llama.cpp's servers (`server: llama-cpp`,
`server: llama-cpp-python`) get `native` output as ``{"type": "json_object", "schema": ...}``, and
`llama-cpp-python` gets `tool` forced with a named ``tool_choice`` (the one form it honours), while
`llama-server` and other servers keep ``"required"`` and OpenAI's shapes; and a fake server of each kind (one that
reads only llama-cpp-python's shapes, one without tool calls, one without JSON-schema output) gives the documented
outcome. Real HTTP to a fake server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aqven.models.call import CallResult, ModelCall, call_model
from aqven.models.outcomes import ModelCallError
from aqven.project.schema import AgentSpec
from support.fake_provider import FakeProvider, FakeReply

pytestmark = pytest.mark.usefixtures("clean_model_env", "closed_model_clients")

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]}


def call(fp: FakeProvider, mode: str, server: str | None) -> ModelCall:
    agent: dict[str, Any] = {
        "id": "local",
        "model": "openai-compatible:gemma",
        "base_url": fp.base_url,
        "settings": {"timeout_s": 5.0, "max_tokens": 60},
        "output_mode": mode,
        "output_retries": 1,
    }
    if server is not None:
        agent["server"] = server
    spec = AgentSpec.model_validate(agent)
    return ModelCall(
        agent=spec, prompt="hi", output_schema=SCHEMA, simulate=False, seed=1, node_id="n", project_root=Path(".")
    )


async def answered(fp: FakeProvider, mode: str, server: str | None) -> CallResult:
    fp.default = FakeReply(output={"reply": "blue"})
    return await call_model(call(fp, mode, server))


@pytest.mark.parametrize("server", ["llama-cpp", "llama-cpp-python"])
async def test_llama_cpp_native_sends_the_schema_as_json_object(fp: FakeProvider, server: str) -> None:
    result = await answered(fp, "native", server)
    fmt = fp.chat_requests()[0].body["response_format"]
    assert fmt["type"] == "json_object" and set(fmt) == {"type", "schema"}
    assert fmt["schema"]["properties"] == SCHEMA["properties"] and fmt["schema"]["required"] == ["reply"]
    assert result.output == {"reply": "blue"}


async def test_llama_cpp_python_tool_names_its_output_tool(fp: FakeProvider) -> None:
    result = await answered(fp, "tool", "llama-cpp-python")
    body = fp.chat_requests()[0].body
    assert len(body["tools"]) == 1
    name = body["tools"][0]["function"]["name"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": name}}
    assert result.output == {"reply": "blue"}


async def test_llama_server_keeps_tool_choice_required(fp: FakeProvider) -> None:
    await answered(fp, "tool", "llama-cpp")  # llama-server takes a named choice as "auto": not forced
    assert fp.chat_requests()[0].body["tool_choice"] == "required"


@pytest.mark.parametrize("server", [None, "ollama"])
async def test_other_servers_keep_openais_shapes(fp: FakeProvider, server: str | None) -> None:
    await answered(fp, "native", server)
    await answered(fp, "tool", server)
    native, tool = (r.body for r in fp.chat_requests())
    assert native["response_format"]["type"] == "json_schema"
    assert native["response_format"]["json_schema"]["schema"]["properties"] == SCHEMA["properties"]
    assert tool["tool_choice"] == "required"


async def test_prompted_sends_no_schema_and_no_tools(fp: FakeProvider) -> None:
    await answered(fp, "prompted", "llama-cpp")
    body = fp.chat_requests()[0].body
    assert body["response_format"] == {"type": "json_object"}  # any JSON object: the schema is in the prompt
    assert "tools" not in body and "tool_choice" not in body


@pytest.mark.parametrize("mode", ["native", "tool", "prompted"])
async def test_every_mode_works_on_a_server_that_reads_only_llama_cpp_pythons_shapes(
    fp: FakeProvider, mode: str
) -> None:
    fp.shapes = "llama-cpp-python"
    result = await answered(fp, mode, "llama-cpp-python")
    assert result.output == {"reply": "blue"} and result.requests == 1


async def test_without_the_profile_such_a_server_refuses_native_with_a_hint(fp: FakeProvider) -> None:
    fp.shapes = "llama-cpp-python"
    with pytest.raises(ModelCallError) as info:
        await answered(fp, "native", server=None)
    err = info.value
    assert err.code == "PROVIDER_ERROR" and err.provider_status == 500 and err.retryable
    assert "server: llama-cpp-python" in err.hint and "output_mode: prompted" in err.hint


async def test_without_the_profile_such_a_server_never_calls_the_tool(fp: FakeProvider) -> None:
    fp.shapes = "llama-cpp-python"
    with pytest.raises(ModelCallError) as info:
        await answered(fp, "tool", server=None)
    err = info.value
    assert err.code == "MODEL_RETRIES_EXHAUSTED" and not err.retryable
    assert "(no_output)" in err.message and "server: llama-cpp-python" in err.hint
    assert "output_mode: prompted" in err.hint
    assert len(fp.chat_requests()) == 2  # the first answer and its one output retry


async def test_a_server_without_tool_calls_is_a_classified_error_with_a_hint(fp: FakeProvider) -> None:
    fp.shapes = "no-tools"
    with pytest.raises(ModelCallError) as info:
        await answered(fp, "tool", "llama-cpp")
    err = info.value
    assert err.code == "PROVIDER_ERROR" and err.provider_status == 500
    assert "tools param requires --jinja" in err.message
    assert "--jinja" in err.hint and "output_mode: prompted" in err.hint


async def test_a_server_without_json_schema_output_is_a_model_failure_with_a_hint(fp: FakeProvider) -> None:
    fp.shapes = "no-json-schema"
    with pytest.raises(ModelCallError) as info:
        await answered(fp, "native", server="ollama")
    err = info.value
    assert err.code == "MODEL_INVALID_JSON" and not err.retryable
    assert "output_mode: prompted" in err.hint
