"""Named set-ups for local OpenAI-compatible servers: an agent's `server:` (with provider `openai-compatible`).

Each gives the server's usual `base_url` (an agent's own `base_url` wins), the request shapes its output modes
need (`aqven.models.local_chat`), and the output modes known not to work on it, which `aqven check` warns about
(`W_OUTPUT_MODE_UNSUPPORTED`) and a failed call's hint names. Every `openai-compatible` server gets the
`max_tokens` field for `settings.max_tokens` (`aqven.models.providers`): the local servers all read it, and
llama.cpp ignores `max_completion_tokens`.

llama.cpp comes as two servers that read `tool_choice` differently, both measured with Gemma 3 270M:
`llama-server` (`llama-cpp`: bench/perf/real_local_model.py) forces a tool call for ``"required"`` and takes a named
choice as ``"auto"``; `llama-cpp-python[server]` (`llama-cpp-python`: issue 15) forces one only by name and
refuses ``json_schema`` output with HTTP 500. Both take the schema as ``{"type": "json_object", "schema": ...}``.
The other servers' modes are as their own documentation states; none was measured here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

ServerName = Literal["ollama", "vllm", "llama-cpp", "llama-cpp-python", "lm-studio"]


NativeFormat = Literal["json_schema", "json_object"]
ToolChoice = Literal["required", "named"]


@dataclass(frozen=True)
class LocalServer:
    name: str
    base_url: str
    broken_modes: dict[str, str] = field(default_factory=dict)
    """Output mode → what goes wrong on this server (measured)."""
    native_format: NativeFormat = "json_schema"
    """How `native` asks for the schema: OpenAI's ``json_schema`` or ``{"type": "json_object", "schema": ...}``."""
    tool_choice: ToolChoice = "required"
    """How `tool` forces its one output tool: ``"required"`` or a named ``{"type": "function", ...}``."""


LOCAL_SERVERS: Final[dict[str, LocalServer]] = {
    s.name: s
    for s in (
        LocalServer("ollama", "http://127.0.0.1:11434/v1"),
        LocalServer("vllm", "http://127.0.0.1:8000/v1"),
        LocalServer(
            "llama-cpp",
            "http://127.0.0.1:8080/v1",
            {
                "tool": "llama-server calls tools only with --jinja and a chat template that has a tool-call format "
                "(Gemma 3's has none: it answers in text, MODEL_RETRIES_EXHAUSTED)",
            },
            native_format="json_object",
        ),
        LocalServer("llama-cpp-python", "http://127.0.0.1:8000/v1", native_format="json_object", tool_choice="named"),
        LocalServer("lm-studio", "http://127.0.0.1:1234/v1"),
    )
}


def working_modes(server: str | None) -> list[str]:
    """The output modes not known to fail on `server` (all three for an unnamed server)."""
    broken = LOCAL_SERVERS[server].broken_modes if server in LOCAL_SERVERS else {}
    return [m for m in ("prompted", "tool", "native") if m not in broken]
