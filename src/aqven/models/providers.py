"""An agent's ``provider:model`` as a pydantic-ai `Model`.

Keys come from the environment only, and a missing key fails before any network
(`PROVIDER_KEY_MISSING`, naming the variable). ``AQVEN_<PROVIDER>_BASE_URL`` (``-`` as ``_``, for
example ``AQVEN_OPENROUTER_BASE_URL``) points a provider at another server, which tests use for a local
fake; it wins over the agent's ``base_url``.

Models are cached per event loop (HTTP connection pools belong to one loop) and per provider, model,
base URL and key, so a changed key takes effect on the next call.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import weakref
from dataclasses import dataclass
from typing import Any, Final, assert_never

from pydantic_ai.models import Model

from aqven.models import wire
from aqven.models.outcomes import PROVIDER_ERROR, PROVIDER_KEY_MISSING, ModelCallError
from aqven.project.local_servers import LOCAL_SERVERS
from aqven.project.providers import PROVIDERS, Provider
from aqven.project.schema import AgentSpec

KEY_VARS: Final[dict[str, str]] = {p.name: p.key_env for p in PROVIDERS.values() if p.key_env}
PLACEHOLDER_KEY: Final = "not-needed"  # OpenAI-compatible servers without auth still need a non-empty key


@dataclass(frozen=True)
class Endpoint:
    """Where and how an agent's calls go; the key itself is never printed."""

    provider: str
    model_name: str
    base_url: str | None
    key_env: str | None
    api_key: str
    server: str | None = None
    """The agent's named local server (its request shapes: `aqven.models.local_chat`)."""

    def cache_key(self) -> tuple[str, str, str | None, str, str | None]:
        digest = hashlib.sha256(self.api_key.encode()).hexdigest()[:16]
        return (self.provider, self.model_name, self.base_url, digest, self.server)


def key_env_of(agent: AgentSpec) -> str | None:
    """The environment variable that holds the agent's key (None: an OpenAI-compatible server without one)."""
    if agent.api_key_env:
        return agent.api_key_env
    return KEY_VARS.get(agent.provider)


def base_url_override_var(provider: str) -> str:
    return f"AQVEN_{provider.upper().replace('-', '_')}_BASE_URL"


def resolve_endpoint(agent: AgentSpec) -> Endpoint:
    """The endpoint of an agent, or `ModelCallError` (`PROVIDER_KEY_MISSING`) before any network."""
    provider = agent.provider
    server = LOCAL_SERVERS.get(agent.server or "")
    base_url = (
        os.environ.get(base_url_override_var(provider)) or agent.base_url or (server.base_url if server else None)
    )
    key_env = key_env_of(agent)
    spec = PROVIDERS.get(provider)
    if spec is not None and spec.needs_base_url and not base_url:
        raise ModelCallError(
            PROVIDER_ERROR,
            f"agent {agent.id or agent.model!r} uses provider {provider!r} without base_url",
            hint="set base_url in the agent file, for example http://localhost:11434/v1 for Ollama",
        )
    if key_env is None:
        return Endpoint(provider, agent.model_name, base_url, None, PLACEHOLDER_KEY, agent.server)
    api_key = os.environ.get(key_env, "").strip()
    if not api_key:
        raise ModelCallError(
            PROVIDER_KEY_MISSING,
            f"{key_env} is not set",
            hint=f"export {key_env}=... in the environment of the AQVEN server, or run with --simulate",
        )
    return Endpoint(provider, agent.model_name, base_url, key_env, api_key, agent.server)


_models: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Model]] = (
    weakref.WeakKeyDictionary()
)
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Any]] = weakref.WeakKeyDictionary()


def build_model(agent: AgentSpec) -> Model:
    """The pydantic-ai model for a live call of `agent` (cached per event loop)."""
    endpoint = resolve_endpoint(agent)
    loop = asyncio.get_running_loop()
    cache = _models.setdefault(loop, {})
    key = endpoint.cache_key()
    model = cache.get(key)
    if model is None:
        # Every provider gets the shared client with the wire hooks; Groq's SDK is on the legacy httpx package.
        spec = PROVIDERS.get(endpoint.provider)
        client = _client(loop, endpoint, agent.settings.timeout_s, legacy=spec is not None and spec.wire == "groq")
        model = _new_model(endpoint, client)
        cache[key] = model
    return model


def _client(loop: asyncio.AbstractEventLoop, endpoint: Endpoint, timeout_s: float, *, legacy: bool = False) -> Any:
    """The shared client of a provider on this loop, with the wire hooks (`legacy`: on the `httpx` package)."""
    clients = _clients.setdefault(loop, {})
    key = (endpoint.provider, endpoint.base_url, timeout_s, legacy)
    client = clients.get(key)
    if client is None or client.is_closed:
        client = wire.legacy_http_client(timeout_s) if legacy else wire.http_client(timeout_s)
        clients[key] = client
    return client


def _new_model(endpoint: Endpoint, client: Any) -> Model:
    provider, name, base_url, api_key = endpoint.provider, endpoint.model_name, endpoint.base_url, endpoint.api_key
    spec = PROVIDERS.get(provider)
    if spec is None:
        raise ModelCallError(PROVIDER_ERROR, f"unknown provider {provider!r}")
    # The SDKs are imported here, for the wire a live call uses: a simulated project never loads them.
    wire_ = spec.wire
    if wire_ == "openai" or wire_ == "openrouter":
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        openai_client = AsyncOpenAI(
            api_key=api_key, base_url=base_url or spec.default_base_url, http_client=client, max_retries=0
        )
        if wire_ == "openrouter":
            from pydantic_ai.models.openrouter import OpenRouterModel
            from pydantic_ai.providers.openrouter import OpenRouterProvider

            return OpenRouterModel(name, provider=OpenRouterProvider(openai_client=openai_client))
        if endpoint.provider == "openai-compatible":
            from pydantic_ai.profiles.openai import OpenAIModelProfile

            # Local servers read `max_tokens`; llama.cpp ignores `max_completion_tokens`, pydantic-ai's default.
            profile = OpenAIModelProfile(openai_chat_supports_max_completion_tokens=False)
            server = LOCAL_SERVERS.get(endpoint.server or "")
            if server is not None:
                from aqven.models.local_chat import LocalChatModel

                # The server's own shapes for native output and tool forcing (llama.cpp's differ from OpenAI's).
                oai = OpenAIProvider(openai_client=openai_client)
                return LocalChatModel(name, provider=oai, profile=profile, server=server)
            return OpenAIChatModel(name, provider=OpenAIProvider(openai_client=openai_client), profile=profile)
        return OpenAIChatModel(name, provider=OpenAIProvider(openai_client=openai_client))
    if wire_ == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        return AnthropicModel(name, provider=AnthropicProvider(api_key=api_key, base_url=base_url, http_client=client))
    if wire_ == "mistral":
        from pydantic_ai.models.mistral import MistralModel
        from pydantic_ai.providers.mistral import MistralProvider

        return MistralModel(name, provider=MistralProvider(api_key=api_key, base_url=base_url, http_client=client))
    if wire_ == "groq":
        from pydantic_ai.models.groq import GroqModel
        from pydantic_ai.providers.groq import GroqProvider

        return GroqModel(name, provider=GroqProvider(api_key=api_key, base_url=base_url, http_client=client))
    if wire_ == "openai-sdk":
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers import infer_provider_class

        # pydantic-ai's provider class brings the model profiles (max_tokens, JSON modes, tool choice) of its
        # models; the OpenAI client is ours, on the shared HTTP client with the wire hooks.
        openai_client = AsyncOpenAI(
            api_key=api_key, base_url=base_url or spec.default_base_url, http_client=client, max_retries=0
        )
        return OpenAIChatModel(name, provider=infer_provider_class(provider)(openai_client=openai_client))  # type: ignore[call-arg]
    if wire_ == "sdk":
        return _sdk_model(endpoint, spec, client)
    assert_never(wire_)


def _sdk_model(endpoint: Endpoint, spec: Provider, client: Any) -> Model:
    """pydantic-ai's model for a provider on its own SDK, or PROVIDER_ERROR naming the extra to install."""
    import importlib.util
    import inspect

    from pydantic_ai.models import infer_model
    from pydantic_ai.providers import infer_provider_class

    module = spec.sdk_module or spec.name
    if importlib.util.find_spec(module.split(".")[0]) is None:
        raise ModelCallError(
            PROVIDER_ERROR,
            f"provider {spec.name!r} needs its SDK ({module}), which is not installed",
            hint=f'pip install "pydantic-ai-slim[{spec.sdk_extra}]" into AQVEN\'s environment',
        )
    cls = infer_provider_class(spec.name)
    accepted = inspect.signature(cls.__init__).parameters
    kwargs: dict[str, Any] = {}
    if endpoint.key_env is not None and "api_key" in accepted:
        kwargs["api_key"] = endpoint.api_key
    if spec.shared_client and "http_client" in accepted:  # the shared client and its hooks
        kwargs["http_client"] = client
    if endpoint.base_url and "base_url" in accepted:
        kwargs["base_url"] = endpoint.base_url
    provider = cls(**kwargs)
    return infer_model(f"{spec.name}:{endpoint.model_name}", provider_factory=lambda _name: provider)


async def aclose_models() -> None:
    """Close the HTTP clients of the current event loop (server shutdown, tests)."""
    loop = asyncio.get_running_loop()
    _models.pop(loop, None)
    for client in (_clients.pop(loop, None) or {}).values():
        await client.aclose()
