"""Model providers, in one table: the names an agent's ``provider:model`` may use and what AQVEN needs of each.

The agent schema accepts exactly these names (`aqven.project.schema`), `aqven.models.providers` reads the key
variable, the wire (which pydantic-ai model speaks to it) and the default URL, and `aqven.models.pricing` the
provider's prefix in OpenRouter's model list and its genai-prices id. Adding a provider that speaks one of the
existing wires is one entry here, plus its test and doc (docs/architecture.md, "How to add a provider").

Besides the five with a wire of their own, every provider pydantic-ai knows by name is here: those it calls
through the OpenAI SDK (wire ``openai-sdk``: its provider class with its model profiles, on AQVEN's shared
client) and those on an SDK of their own (wire ``sdk``: Gemini, Cohere, Bedrock, xAI, Hugging Face), which
need that SDK installed (``pip install "pydantic-ai-slim[<extra>]"``; `aqven check` says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["PROVIDERS", "Provider", "Wire", "provider_names"]

Wire = Literal["openai", "openrouter", "anthropic", "mistral", "groq", "openai-sdk", "sdk"]
"""The pydantic-ai model family a provider is called through (`aqven.models.providers`): ``openai-sdk`` is
pydantic-ai's provider class of that name on an OpenAI SDK client, ``sdk`` pydantic-ai's model for the provider
on the provider's own SDK."""


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
    sdk_extra: str | None = None
    """Wire ``sdk``: the pydantic-ai-slim extra that installs the provider's SDK; ``sdk_module`` is its import."""
    sdk_module: str | None = None
    shared_client: bool = True
    """False where the SDK speaks HTTP its own way (gRPC, boto3, its own client): no shared client or hooks."""


def _openai_sdk(
    name: str, key_env: str | None, base_url: str, *, list_prefix: str | None = None, genai_id: str | None = None
) -> Provider:
    return Provider(name, "openai-sdk", key_env, list_prefix, genai_id, base_url)


def _sdk(
    name: str,
    key_env: str | None,
    extra: str,
    module: str,
    *,
    list_prefix: str | None = None,
    genai_id: str | None = None,
    shared_client: bool = True,
) -> Provider:
    return Provider(
        name, "sdk", key_env, list_prefix, genai_id, sdk_extra=extra, sdk_module=module, shared_client=shared_client
    )


PROVIDERS: Final[dict[str, Provider]] = {
    p.name: p
    for p in (
        Provider("openrouter", "openrouter", "OPENROUTER_API_KEY", "", "openrouter", "https://openrouter.ai/api/v1"),
        Provider("openai", "openai", "OPENAI_API_KEY", "openai", "openai"),
        Provider("anthropic", "anthropic", "ANTHROPIC_API_KEY", "anthropic", "anthropic"),
        Provider("mistral", "mistral", "MISTRAL_API_KEY", "mistralai", "mistral"),
        Provider("groq", "groq", "GROQ_API_KEY", "groq", "groq"),
        Provider("openai-compatible", "openai", None, "", None, needs_base_url=True),
        # pydantic-ai's providers on the OpenAI SDK; base URLs as pydantic-ai has them (a test compares).
        _openai_sdk(
            "deepseek", "DEEPSEEK_API_KEY", "https://api.deepseek.com", list_prefix="deepseek", genai_id="deepseek"
        ),
        _openai_sdk("cerebras", "CEREBRAS_API_KEY", "https://api.cerebras.ai/v1", genai_id="cerebras"),
        _openai_sdk("fireworks", "FIREWORKS_API_KEY", "https://api.fireworks.ai/inference/v1", genai_id="fireworks"),
        _openai_sdk("together", "TOGETHER_API_KEY", "https://api.together.xyz/v1", genai_id="together"),
        _openai_sdk(
            "moonshotai",
            "MOONSHOTAI_API_KEY",
            "https://api.moonshot.ai/v1",
            list_prefix="moonshotai",
            genai_id="moonshotai",
        ),
        _openai_sdk("zai", "ZAI_API_KEY", "https://api.z.ai/api/paas/v4", list_prefix="z-ai", genai_id="zai"),
        _openai_sdk(
            "alibaba", "ALIBABA_API_KEY", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", list_prefix="qwen"
        ),
        _openai_sdk("nebius", "NEBIUS_API_KEY", "https://api.studio.nebius.com/v1"),
        _openai_sdk(
            "ovhcloud", "OVHCLOUD_API_KEY", "https://oai.endpoints.kepler.ai.cloud.ovh.net/v1", genai_id="ovhcloud"
        ),
        _openai_sdk("meta", "META_API_KEY", "https://api.meta.ai/v1", genai_id="meta"),
        _openai_sdk("crusoe", "CRUSOE_API_KEY", "https://api.inference.crusoecloud.com/v1"),
        _openai_sdk("vercel", "VERCEL_AI_GATEWAY_API_KEY", "https://ai-gateway.vercel.sh/v1"),
        # pydantic-ai's providers on an SDK of their own.
        _sdk("google", "GOOGLE_API_KEY", "google", "google.genai", list_prefix="google", genai_id="google"),
        _sdk("cohere", "CO_API_KEY", "cohere", "cohere", list_prefix="cohere", genai_id="cohere"),
        _sdk("xai", "XAI_API_KEY", "xai", "xai_sdk", list_prefix="x-ai", genai_id="x-ai", shared_client=False),
        _sdk("huggingface", "HF_TOKEN", "huggingface", "huggingface_hub", shared_client=False),
        _sdk(
            "bedrock", None, "bedrock", "boto3", genai_id="aws", shared_client=False
        ),  # AWS credentials as boto3 finds them
    )
}


def provider_names() -> tuple[str, ...]:
    return tuple(PROVIDERS)
