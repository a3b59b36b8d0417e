"""Named set-ups for local OpenAI-compatible servers: an agent's `server:` (with provider `openai-compatible`).

Each gives the server's usual `base_url` (an agent's own `base_url` wins) and the output modes known not to work
on it, which `aqven check` warns about (`W_OUTPUT_MODE_UNSUPPORTED`) and a failed call's hint names. Every
`openai-compatible` server gets the `max_tokens` field for `settings.max_tokens` (`aqven.models.providers`): the
local servers all read it, and llama.cpp ignores `max_completion_tokens`.

Only what was measured is listed as not working: llama.cpp's server (`llama-cpp-python[server]` with Gemma 3
270M, issue 15). The other servers' modes are as their own documentation states; none was measured here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

ServerName = Literal["ollama", "vllm", "llama-cpp", "lm-studio"]


@dataclass(frozen=True)
class LocalServer:
    name: str
    base_url: str
    broken_modes: dict[str, str] = field(default_factory=dict)
    """Output mode → what goes wrong on this server (measured)."""


LOCAL_SERVERS: Final[dict[str, LocalServer]] = {
    s.name: s
    for s in (
        LocalServer("ollama", "http://127.0.0.1:11434/v1"),
        LocalServer("vllm", "http://127.0.0.1:8000/v1"),
        LocalServer(
            "llama-cpp",
            "http://127.0.0.1:8080/v1",
            {
                "tool": 'it ignores tool_choice "required" under its gemma chat format: calls end in MODEL_TIMEOUT',
                "native": 'it rejects response_format {"type": "json_schema"} with HTTP 500 (PROVIDER_ERROR)',
            },
        ),
        LocalServer("lm-studio", "http://127.0.0.1:1234/v1"),
    )
}


def working_modes(server: str | None) -> list[str]:
    """The output modes not known to fail on `server` (all three for an unnamed server)."""
    broken = LOCAL_SERVERS[server].broken_modes if server in LOCAL_SERVERS else {}
    return [m for m in ("prompted", "tool", "native") if m not in broken]
