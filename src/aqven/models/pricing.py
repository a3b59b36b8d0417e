"""What a model call cost, in `Decimal` only, and where the price came from.

The chain (spec, "What a series costs"):

1. ``provider`` — the provider's own report (OpenRouter's ``usage.cost``, or the same field from an
   OpenAI-compatible server), summed over the call's requests;
2. ``openrouter_list`` — OpenRouter's public model list, cached in a file in the ``/api/v1/models``
   format (``AQVEN_PRICES_FILE``, else ``~/.cache/aqven/openrouter-models.json``), refreshed by
   ``aqven prices update`` when the network allows, never required;
3. ``genai_prices`` — the table bundled with genai-prices, on the full usage (cache reads and writes too);
4. ``agent_price`` — the price the agent file declares (``price:``, USD per million tokens), for a model
   nothing above prices (a local server, a new model);
5. ``unknown`` — no price: the cost is None and the spend is a lower bound.

Simulated calls skip step 1 and are priced like the real model for the same tokens. Input tokens include the
cache tokens (pydantic-ai's usage counts them in ``input_tokens``); cached tokens are priced at their own rate.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final

from aqven.errors import PRICES_UNAVAILABLE, AqvenError
from aqven.models.outcomes import CostSource
from aqven.project.providers import PROVIDERS
from aqven.project.schema import AgentPrice

MILLION: Final = Decimal(1_000_000)

OPENROUTER_MODELS_URL: Final = "https://openrouter.ai/api/v1/models"


@dataclass(frozen=True)
class Price:
    cost_usd: Decimal | None
    source: CostSource


@dataclass(frozen=True)
class Tokens:
    """The usage a call is priced on. `input` counts every input token, the cache reads and writes among them."""

    input: int
    output: int
    cache_read: int = 0
    cache_write: int = 0

    @property
    def uncached_input(self) -> int:
        return max(self.input - self.cache_read - self.cache_write, 0)


def declared_cost(price: AgentPrice, tokens: Tokens) -> Decimal:
    """The cost by an agent file's declared price (USD per million tokens); cache tokens at the input price
    unless the file gives their own."""
    read = price.cache_read if price.cache_read is not None else price.input
    write = price.cache_write if price.cache_write is not None else price.input
    total = (
        price.input * tokens.uncached_input
        + read * tokens.cache_read
        + write * tokens.cache_write
        + price.output * tokens.output
    )
    return total / MILLION


@dataclass(frozen=True)
class ListPrice:
    prompt: Decimal  # USD per input token
    completion: Decimal  # USD per output token
    request: Decimal = Decimal(0)  # USD per request

    def cost(self, input_tokens: int, output_tokens: int, requests: int) -> Decimal:
        return self.prompt * input_tokens + self.completion * output_tokens + self.request * requests


def prices_file() -> Path:
    return _prices_file(os.environ.get("AQVEN_PRICES_FILE"), os.environ.get("HOME"))


@functools.lru_cache(maxsize=16)
def _prices_file(env: str | None, home: str | None) -> Path:
    """Per (AQVEN_PRICES_FILE, HOME): every priced call asks for the file."""
    if env:
        return Path(env).expanduser()
    return (Path(home) if home else Path.home()) / ".cache" / "aqven" / "openrouter-models.json"


_lock = threading.Lock()
_list_cache: dict[tuple[str, float], dict[str, ListPrice]] = {}


def load_price_list(path: Path | None = None) -> dict[str, ListPrice]:
    """Model id → price from a cached OpenRouter model list; empty when the file is missing or unreadable."""
    path = path or prices_file()
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return {}
    key = (str(path), mtime)
    with _lock:
        cached = _list_cache.get(key)
        if cached is not None:
            return cached
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    prices = parse_price_list(data)
    with _lock:
        _list_cache.clear()
        _list_cache[key] = prices
    return prices


def parse_price_list(data: Any) -> dict[str, ListPrice]:
    out: dict[str, ListPrice] = {}
    rows = data.get("data") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        return out
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            continue
        pricing = row.get("pricing")
        if not isinstance(pricing, dict):
            continue
        prompt, completion = _price(pricing.get("prompt")), _price(pricing.get("completion"))
        if prompt is None or completion is None:
            continue  # missing, or "-1" for routers whose price depends on the routed model
        out[row["id"]] = ListPrice(prompt, completion, _price(pricing.get("request")) or Decimal(0))
    return out


def _price(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        out = Decimal(str(value))
    except InvalidOperation:
        return None
    return out if out.is_finite() and out >= 0 else None


def list_ids(provider: str, names: Iterable[str]) -> list[str]:
    """The ids to look up in OpenRouter's list for a provider's model names."""
    ids: list[str] = []
    for name in names:
        spec = PROVIDERS.get(provider)
        prefix = spec.list_prefix if spec else None
        candidates = [] if prefix is None else [f"{prefix}/{name}" if prefix else name]
        ids.extend(c for c in candidates if c and c not in ids)
    return ids


def list_price(
    provider: str, names: Sequence[str], input_tokens: int, output_tokens: int, requests: int
) -> Decimal | None:
    prices = load_price_list()
    for model_id in list_ids(provider, names):
        if (price := prices.get(model_id)) is not None:
            return price.cost(input_tokens, output_tokens, requests)
    return None


def warm_prices() -> None:
    """Load genai-prices' price data now (a server does at its start, in a thread) instead of at the first price."""
    from genai_prices import Usage, calc_price

    with contextlib.suppress(LookupError, ValueError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calc_price(Usage(input_tokens=1, output_tokens=1), model_ref="gpt-4o-mini", provider_id="openai")


def genai_price(provider: str, names: Sequence[str], tokens: Tokens) -> Decimal | None:
    spec = PROVIDERS.get(provider)
    provider_id = spec.genai_id if spec else None
    if provider_id is None:
        return None  # an OpenAI-compatible server of unknown pricing: never guess
    # genai-prices' prices change by date or by time of day (off-peak hours, to the minute): the same usage in the
    # same minute has the same price, and a series asks for it once per attempt.
    minute = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M")
    return _genai_price(provider_id, tuple(dict.fromkeys(n for n in names if n)), tokens, minute)


@functools.lru_cache(maxsize=4096)
def _genai_price(provider_id: str, names: tuple[str, ...], tokens: Tokens, minute: str) -> Decimal | None:
    from genai_prices import Usage, calc_price  # loads its price data on import: only a call to price pays for it

    usage = Usage(
        input_tokens=tokens.input,
        output_tokens=tokens.output,
        cache_read_tokens=tokens.cache_read or None,
        cache_write_tokens=tokens.cache_write or None,
    )
    for name in names:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = calc_price(usage, model_ref=name, provider_id=provider_id)
        except (LookupError, ValueError):
            continue
        total = result.total_price
        return total if isinstance(total, Decimal) else Decimal(str(total))
    return None


def price_call(
    *,
    provider: str,
    model_names: Sequence[str],
    input_tokens: int,
    output_tokens: int,
    requests: int = 1,
    reported: Decimal | None = None,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    declared: AgentPrice | None = None,
) -> Price:
    """The cost of a call and its source. `model_names`: the configured name first, then the answering one;
    `declared`: the agent file's own price, used when nothing else prices the model."""
    if reported is not None:
        return Price(reported, "provider")
    tokens = Tokens(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    cost = list_price(provider, model_names, input_tokens, output_tokens, requests)
    if cost is not None:
        return Price(cost, "openrouter_list")
    cost = genai_price(provider, model_names, tokens)
    if cost is not None:
        return Price(cost, "genai_prices")
    if declared is not None:
        return Price(declared_cost(declared, tokens), "agent_price")
    return Price(None, "unknown")


REPORTS_COST: Final = ("openrouter",)  # providers whose every answer reports its cost


def is_priced(provider: str, model_name: str, declared: AgentPrice | None, *, simulated: bool) -> bool:
    """Whether a call of the model will have a price: a series on a model that nothing prices has a cap that
    cannot stop it. A provider that reports its cost prices live calls; a simulated call has no report."""
    if declared is not None or (provider in REPORTS_COST and not simulated):
        return True
    if list_price(provider, [model_name], 1, 1, 1) is not None:
        return True
    return genai_price(provider, [model_name], Tokens(1, 1)) is not None


async def update_price_list(dest: Path | None = None) -> int:
    """Fetch OpenRouter's public model list into the price cache; returns how many models it holds.

    `AQVEN_OPENROUTER_BASE_URL` points the fetch at another server (tests). Offline, or on a bad answer,
    raises `AqvenError` (`PRICES_UNAVAILABLE`) and leaves the cached file as it was.
    """
    import httpx2

    base = os.environ.get("AQVEN_OPENROUTER_BASE_URL")
    url = f"{base.rstrip('/')}/models" if base else OPENROUTER_MODELS_URL
    dest = dest or prices_file()
    try:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, connect=10.0)) as client:
            response = await client.get(url)
            response.raise_for_status()
            data = response.json()
    except (httpx2.HTTPError, ValueError) as exc:
        raise AqvenError(
            f"could not fetch the OpenRouter model list from {url}: {type(exc).__name__}: {exc}",
            code=PRICES_UNAVAILABLE,
            hint="prices fall back to genai-prices' bundled table; try again when the network is available",
            http_status=503,
        ) from None
    rows = data.get("data") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise AqvenError(
            f"the answer from {url} is not a model list (no 'data' array)",
            code=PRICES_UNAVAILABLE,
            http_status=503,
        )
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.write_text(json.dumps({"data": rows}), encoding="utf-8")
        tmp.replace(dest)
    except OSError as exc:
        raise AqvenError(f"could not write {dest}: {exc}", code=PRICES_UNAVAILABLE) from None
    return len(rows)
