"""Model providers, in one table: the names an agent's ``provider:model`` may use and what AQVEN needs of each.

The agent schema accepts exactly these names (`aqven.project.schema`), `aqven.models.providers` reads the key
variable, the wire (which pydantic-ai model speaks to it) and the default URL, and `aqven.models.pricing` the
provider's prefix in OpenRouter's model list and its genai-prices id. Adding a provider that speaks one of the
existing wires is one entry here, plus its test and doc (docs/architecture.md, "How to add a provider").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["PROVIDERS", "Provider", "Wire", "provider_names"]

Wire = Literal["openai", "openrouter", "anthropic", "mistral", "groq"]
"""The pydantic-ai model family a provider is called through (`aqven.models.providers`)."""


@dataclass(frozen=True)
class Provider:
    name: str
    wire: Wire
    key_env: str | None
    """The environment variable with its key; None: no key (an OpenAI-compatible server may need none)."""
    list_prefix: str | None
    """Its models' prefix in OpenRouter's list: ``"openai"`` → ``openai/<model>``; ``""``: the model name as it
    is; None: not looked up there."""
    genai_id: str | None
    """Its genai-prices provider id; None: never guess a price."""
    default_base_url: str | None = None
    needs_base_url: bool = False
    """True when the agent must give ``base_url`` (a server of the person's own)."""


PROVIDERS: Final[dict[str, Provider]] = {
    p.name: p
    for p in (
        Provider("openrouter", "openrouter", "OPENROUTER_API_KEY", "", "openrouter", "https://openrouter.ai/api/v1"),
        Provider("openai", "openai", "OPENAI_API_KEY", "openai", "openai"),
        Provider("anthropic", "anthropic", "ANTHROPIC_API_KEY", "anthropic", "anthropic"),
        Provider("mistral", "mistral", "MISTRAL_API_KEY", "mistralai", "mistral"),
        Provider("groq", "groq", "GROQ_API_KEY", "groq", "groq"),
        Provider("openai-compatible", "openai", None, "", None, needs_base_url=True),
    )
}


def provider_names() -> tuple[str, ...]:
    return tuple(PROVIDERS)
