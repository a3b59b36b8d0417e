"""A fake OpenAI-compatible chat-completions server for tests: a real HTTP server on 127.0.0.1.

    with FakeProvider() as fp:
        monkeypatch.setenv("AQVEN_OPENROUTER_BASE_URL", fp.base_url)
        fp.script([FakeReply("429"), FakeReply(output={"reply": "hi"}, cost="0.0012")])
        ...
        assert len(fp.requests) == 2

Each POST ``/v1/chat/completions`` takes the next scripted reply (or `fp.default` once the script is
empty) and records the request. ``GET /v1/models`` answers `fp.models` (OpenRouter's model-list format).
``POST /v1beta/models/<model>:generateContent`` answers the same script in Gemini's format (kinds ``ok``,
``429`` and ``500``), for the providers on an SDK of their own.

Reply kinds:

``ok``             a normal answer: a call of the request's first tool when it sent tools, else the
                   output as JSON text (a string output as itself); ``usage.cost`` when ``cost`` is set
``invalid_json``   a normal answer whose content / tool arguments are broken JSON
``refusal``        ``message.refusal`` set, no content
``content_filter`` no content, ``finish_reason: content_filter``
``429``            rate limited, with ``retry-after``
``500``            server error
``401_echo``       401 whose error message echoes the Authorization header (for redaction tests)
``schema_rejected`` 400 ``Invalid schema for response_format`` / ``function`` (code invalid_json_schema)
``slow``           sleeps ``delay_s`` before sending anything (→ client timeout)
``stall``          sends the headers and half the body, then sleeps ``delay_s`` (→ stalled body)
``bad_body``       200 whose body is not JSON

``fp.shapes`` makes the server read requests as a kind of local server does (every reply kind above still
applies once a request passes):

``openai``           (default) every shape
``llama-cpp-python`` like `llama-cpp-python[server]` (issue 15): ``response_format`` ``json_schema`` is an HTTP
                     500; a tool call only for a *named* ``tool_choice`` (otherwise a text answer); the schema
                     only through ``{"type": "json_object", "schema": ...}``
``no-tools``         like `llama-server` without ``--jinja``: any request with ``tools`` is an HTTP 500
``no-json-schema``   a server without JSON-schema output: ``response_format`` is ignored (a text answer)
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeReply:
    kind: str = "ok"
    output: Any = None  # the answer; None → synthesised from the request's schema
    cost: str | float | None = None  # usage.cost to report
    model: str | None = None  # "model" of the answer (default: the requested model)
    input_tokens: int = 11
    output_tokens: int = 7
    cached_tokens: int = 0  # of input_tokens, read from the cache (usage.prompt_tokens_details.cached_tokens)
    delay_s: float = 5.0  # slow / stall
    retry_after: str = "2"


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any
    at: float = field(default_factory=time.monotonic)  # when it arrived


def example_of(schema: Any) -> Any:
    """A small value matching a JSON schema (for answers nobody scripted)."""
    if not isinstance(schema, dict):
        return "fake answer"
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return example_of(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or "properties" in schema:
        return {k: example_of(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [example_of(schema.get("items", {}))]
    return {"string": "fake answer", "integer": 1, "number": 1.5, "boolean": True, "null": None}.get(
        str(kind), "fake answer"
    )


class FakeProvider:
    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self.port = port  # 0: a free one; a fixed port lets a test bring a "restarted" server back on it
        self.host = host  # the address it listens on (a test host's, support/netns.py)
        self.requests: list[RecordedRequest] = []
        self.default = FakeReply()
        self.models: dict[str, Any] = {"data": []}
        self.shapes = "openai"  # which request shapes it honours (see the module docstring)
        self._queue: deque[FakeReply] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- API ---------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None, "use FakeProvider as a context manager"
        return f"http://{self.host}:{self._server.server_address[1]}/v1"

    def script(self, replies: list[FakeReply | str]) -> None:
        with self._lock:
            self._queue.extend(FakeReply(r) if isinstance(r, str) else r for r in replies)

    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def __enter__(self) -> FakeProvider:
        provider = self

        class Handler(_Handler):
            fake = provider

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # ---- internals -----------------------------------------------------------------------------
    def _next(self) -> FakeReply:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)

    def sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeProvider
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.fake._record(RecordedRequest("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None))
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, self.fake.models)
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        self.fake._record(RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        if self.path.endswith(":generateContent"):
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._gemini(self.fake._next(), body if isinstance(body, dict) else {})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"unknown path {self.path}"}})
            return
        reply = self.fake._next()
        request = body if isinstance(body, dict) else {}
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (timeouts)
            refusal = _refused_shape(self.fake.shapes, request)
            if refusal is not None:
                self._json(500, {"error": {"message": refusal, "type": "server_error"}})
                return
            if self.fake.shapes == "no-json-schema" and request.get("response_format"):
                reply = FakeReply(output="The answer is blue.")  # it ignores the format: free text
            self._answer(reply, _as_read(self.fake.shapes, request))

    def _answer(self, reply: FakeReply, body: dict[str, Any]) -> None:
        kind = reply.kind
        if kind == "429":
            self._json(
                429,
                {"error": {"message": "Rate limit reached", "type": "rate_limit_error", "code": "rate_limit_exceeded"}},
                {"retry-after": reply.retry_after},
            )
        elif kind == "500":
            self._json(500, {"error": {"message": "The server had an error", "type": "server_error"}})
        elif kind == "401_echo":
            auth = self.headers.get("authorization", "")
            self._json(
                401,
                {"error": {"message": f"Incorrect API key provided: {auth}", "type": "invalid_request_error"}},
            )
        elif kind == "schema_rejected":
            where = "function 'final_result'" if body.get("tools") else "response_format 'output'"
            self._json(
                400,
                {
                    "error": {
                        "message": f"Invalid schema for {where}: In context=(), 'additionalProperties' is required",
                        "type": "invalid_request_error",
                        "param": "tools" if body.get("tools") else "response_format",
                        "code": "invalid_json_schema" if not body.get("tools") else "invalid_function_parameters",
                    }
                },
            )
        elif kind == "bad_body":
            data = b'{"id": "chatcmpl-broken", "choices": [ {"mess'
            self._raw(200, data, "application/json")
        elif kind == "slow":
            self.fake.sleep(reply.delay_s)
            self._json(200, self._completion(reply, body))
        elif kind == "stall":
            data = json.dumps(self._completion(reply, body)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            half = len(data) // 2
            self.wfile.write(data[:half])
            self.wfile.flush()
            self.fake.sleep(reply.delay_s)
            self.wfile.write(data[half:])
        else:
            self._json(200, self._completion(reply, body))

    def _completion(self, reply: FakeReply, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        tools = body.get("tools") or []
        output = reply.output
        if output is None:
            output = example_of(_requested_schema(body))
        if reply.kind == "refusal":
            message["refusal"] = "I'm sorry, I can't help with that."
        elif reply.kind == "content_filter":
            finish = "content_filter"
        elif tools:
            name = tools[0]["function"]["name"]
            args = '{"reply": ' if reply.kind == "invalid_json" else json.dumps(output)
            call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}
            message["tool_calls"] = [call]
            finish = "tool_calls"
        elif reply.kind == "invalid_json":
            message["content"] = '{"reply": '
        else:
            message["content"] = output if isinstance(output, str) else json.dumps(output)
        usage: dict[str, Any] = {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        }
        if reply.cached_tokens:
            usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
        if reply.cost is not None:
            usage["cost"] = float(reply.cost) if isinstance(reply.cost, str) else reply.cost
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body.get("model", "fake-model"),
            "provider": "FakeUpstream",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage,
        }

    def _gemini(self, reply: FakeReply, body: dict[str, Any]) -> None:
        """Gemini's generateContent: a function call when the request declared tools, else the output as text."""
        if reply.kind in ("429", "500"):
            status = int(reply.kind)
            error = {"code": status, "message": "Resource exhausted" if status == 429 else "Internal error"}
            self._json(status, {"error": {**error, "status": "RESOURCE_EXHAUSTED" if status == 429 else "INTERNAL"}})
            return
        declarations = [d for tool in body.get("tools") or [] for d in tool.get("functionDeclarations") or []]
        config = body.get("generationConfig") or {}
        schema = (
            (declarations[0].get("parametersJsonSchema") or declarations[0].get("parameters"))
            if declarations
            else config.get("responseJsonSchema") or config.get("responseSchema") or {"type": "string"}
        )
        output = reply.output if reply.output is not None else example_of(schema)
        if declarations:
            part: dict[str, Any] = {"functionCall": {"name": declarations[0]["name"], "args": output}}
        else:
            part = {"text": output if isinstance(output, str) else json.dumps(output)}
        self._json(
            200,
            {
                "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
                "usageMetadata": {
                    "promptTokenCount": reply.input_tokens,
                    "candidatesTokenCount": reply.output_tokens,
                    "totalTokenCount": reply.input_tokens + reply.output_tokens,
                },
                "modelVersion": reply.model or self.path.rsplit("/", 1)[-1].split(":")[0],
            },
        )

    def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        self._raw(status, json.dumps(data).encode(), "application/json", headers)

    def _raw(self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _refused_shape(shapes: str, body: dict[str, Any]) -> str | None:
    """The error message of a server of kind `shapes` that refuses this request, or None."""
    fmt = body.get("response_format") or {}
    if shapes == "llama-cpp-python" and fmt.get("type") == "json_schema":
        return "Internal Server Error: response_format type json_schema is not supported"
    if shapes == "no-tools" and body.get("tools"):
        return "tools param requires --jinja flag"
    return None


def _as_read(shapes: str, body: dict[str, Any]) -> dict[str, Any]:
    """The request as a server of kind `shapes` reads it: what it ignores is dropped."""
    out = dict(body)
    if shapes == "llama-cpp-python" and not isinstance(body.get("tool_choice"), dict):
        out.pop("tools", None)  # no forced call: it answers in text
    if shapes == "no-json-schema":
        out.pop("response_format", None)
    return out


def _requested_schema(body: dict[str, Any]) -> Any:
    tools = body.get("tools") or []
    if tools:
        return tools[0].get("function", {}).get("parameters")
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema")
    if fmt.get("type") == "json_object" and "schema" in fmt:  # llama.cpp's form
        return fmt["schema"]
    return {"type": "string"}


__all__ = ["FakeProvider", "FakeReply", "RecordedRequest", "example_of"]
