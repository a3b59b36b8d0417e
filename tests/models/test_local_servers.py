"""Local OpenAI-compatible servers: settings reach a server as it expects them (`max_tokens` for an
openai-compatible server that ignores `max_completion_tokens`), named set-ups give the usual base_url, and errors
name the base_url and hint at /v1 or at another output mode. (`aqven check`: tests/engine/.)"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from aqven.models.call import ModelCall, call_model
from aqven.models.outcomes import ModelCallError
from aqven.models.providers import resolve_endpoint
from aqven.project.schema import AgentSpec
from support.fake_provider import FakeProvider, FakeReply

pytestmark = pytest.mark.usefixtures("clean_model_env", "closed_model_clients")


SCHEMA: dict[str, Any] = {"type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]}


def call(**agent: Any) -> ModelCall:
    spec = AgentSpec.model_validate({"id": "local", "settings": {"timeout_s": 5.0, "max_tokens": 120}, **agent})
    return ModelCall(
        agent=spec, prompt="hi", output_schema=SCHEMA, simulate=False, seed=1, node_id="n", project_root=Path(".")
    )


async def test_max_tokens_reaches_a_local_server_as_max_tokens(fp: FakeProvider) -> None:
    fp.script([FakeReply(output={"reply": "hi"})])
    await call_model(call(model="openai-compatible:gemma", base_url=fp.base_url, output_mode="prompted"))
    body = fp.chat_requests()[0].body
    assert body["max_tokens"] == 120 and "max_completion_tokens" not in body


async def test_openai_itself_keeps_max_completion_tokens(fp: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    monkeypatch.setenv("AQVEN_OPENAI_BASE_URL", fp.base_url)
    fp.script([FakeReply(output={"reply": "hi"})])
    await call_model(call(model="openai:gpt-4o-mini", output_mode="prompted"))
    body = fp.chat_requests()[0].body
    assert body["max_completion_tokens"] == 120 and "max_tokens" not in body


def test_a_named_server_gives_its_usual_base_url_and_the_file_wins() -> None:
    spec = AgentSpec.model_validate({"model": "openai-compatible:gemma", "server": "llama-cpp"})
    assert resolve_endpoint(spec).base_url == "http://127.0.0.1:8080/v1"
    spec = AgentSpec.model_validate({"model": "openai-compatible:m", "server": "ollama", "base_url": "http://h:1/v1"})
    assert resolve_endpoint(spec).base_url == "http://h:1/v1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_server_that_is_not_running_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ModelCallError) as info:
        await call_model(call(model="openai-compatible:gemma", base_url=url, output_mode="prompted"))
    err = info.value
    assert err.code == "PROVIDER_ERROR" and f"cannot reach the provider at {url}" in err.message
    assert "base_url" in err.hint


async def test_a_404_hints_at_v1() -> None:
    class NotFound(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            body = b'{"error": {"message": "File Not Found"}}'
            self.send_response(404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(ModelCallError) as info:
            await call_model(call(model="openai-compatible:gemma", base_url=url, output_mode="prompted"))
    finally:
        server.shutdown()
    err = info.value
    assert err.code == "PROVIDER_ERROR" and err.provider_status == 404 and url in err.message
    assert f"{url}/v1" in err.hint


async def test_a_mode_known_to_fail_on_the_server_hints_at_another(fp: FakeProvider) -> None:
    fp.script([FakeReply("500")] * 3)
    agent = {
        "model": "openai-compatible:gemma",
        "server": "llama-cpp",
        "base_url": fp.base_url,
        "output_mode": "native",
    }
    with pytest.raises(ModelCallError) as info:
        await call_model(call(**agent))
    assert info.value.code == "PROVIDER_ERROR" and "use output_mode: prompted" in info.value.hint
