"""The cost chain: provider report, OpenRouter list, genai-prices, unknown — Decimal throughout."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from aqven.errors import AqvenError
from aqven.models.pricing import (
    list_ids,
    load_price_list,
    parse_price_list,
    price_call,
    prices_file,
    update_price_list,
)
from support.fake_provider import FakeProvider
from support.paths import FIXTURES

FIXTURE = FIXTURES / "openrouter_models.json"


@pytest.fixture(autouse=True)
def prices(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AQVEN_PRICES_FILE", str(FIXTURE))
    monkeypatch.delenv("AQVEN_OPENROUTER_BASE_URL", raising=False)
    yield


def test_reported_cost_wins() -> None:
    p = price_call(
        provider="openrouter",
        model_names=["openai/gpt-4o-mini"],
        input_tokens=1000,
        output_tokens=1000,
        reported=Decimal("0.5"),
    )
    assert (p.cost_usd, p.source) == (Decimal("0.5"), "provider")


def test_list_price_from_the_cached_model_list() -> None:
    p = price_call(provider="openrouter", model_names=["openai/gpt-4o-mini"], input_tokens=1000, output_tokens=500)
    assert p.source == "openrouter_list"
    assert p.cost_usd == Decimal("0.00015") + Decimal("0.0003")
    assert isinstance(p.cost_usd, Decimal)


def test_list_price_for_other_providers_uses_their_prefix() -> None:
    assert list_ids("mistral", ["mistral-small-3.2-24b-instruct"]) == ["mistralai/mistral-small-3.2-24b-instruct"]
    p = price_call(
        provider="mistral", model_names=["mistral-small-3.2-24b-instruct"], input_tokens=10, output_tokens=10
    )
    assert p.source == "openrouter_list" and p.cost_usd == Decimal("0.0000005") + Decimal("0.000001")


def test_per_request_fee_is_added() -> None:
    p = price_call(
        provider="openrouter", model_names=["fake/listed-model"], input_tokens=1, output_tokens=1, requests=2
    )
    assert p.cost_usd == Decimal("0.000001") + Decimal("0.000002") + Decimal("0.0002")


def test_answering_model_is_tried_after_the_configured_one() -> None:
    # openrouter/auto has no fixed price ("-1"); the model that answered has one
    p = price_call(
        provider="openrouter", model_names=["openrouter/auto", "openai/gpt-4o-mini"], input_tokens=10, output_tokens=0
    )
    assert p.source == "openrouter_list" and p.cost_usd == Decimal("0.0000015")


def test_genai_prices_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from genai_prices import Usage, calc_price

    monkeypatch.setenv("AQVEN_PRICES_FILE", str(tmp_path / "missing.json"))
    p = price_call(provider="anthropic", model_names=["claude-3-5-haiku-latest"], input_tokens=1000, output_tokens=100)
    expected = calc_price(
        Usage(input_tokens=1000, output_tokens=100), model_ref="claude-3-5-haiku-latest", provider_id="anthropic"
    )
    assert p.source == "genai_prices" and p.cost_usd == expected.total_price


def test_unknown_price() -> None:
    p = price_call(provider="openai-compatible", model_names=["llama3.1:8b"], input_tokens=10, output_tokens=10)
    assert (p.cost_usd, p.source) == (None, "unknown")
    p = price_call(provider="openrouter", model_names=["nobody/never-heard-of"], input_tokens=10, output_tokens=10)
    assert (p.cost_usd, p.source) == (None, "unknown")


def test_price_list_parsing_is_exact_and_tolerant() -> None:
    prices = parse_price_list(
        {
            "data": [
                {"id": "a/b", "pricing": {"prompt": "0.1", "completion": "0.2"}},
                {"id": "a/float", "pricing": {"prompt": 0.1, "completion": 0.2}},
                {"id": "a/neg", "pricing": {"prompt": "-1", "completion": "-1"}},
                {"id": "a/none", "pricing": {}},
                "garbage",
            ]
        }
    )
    assert set(prices) == {"a/b", "a/float"}
    assert prices["a/float"].prompt == Decimal("0.1")  # through the text, not the binary float
    assert parse_price_list(["not", "a", "list"]) == {}


def test_unreadable_price_file_is_empty(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert load_price_list(bad) == {}
    assert load_price_list(tmp_path / "missing.json") == {}


def test_default_price_file_location(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AQVEN_PRICES_FILE")
    assert prices_file() == Path.home() / ".cache" / "aqven" / "openrouter-models.json"


async def test_update_price_list(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    dest = tmp_path / "cache" / "models.json"
    with FakeProvider() as fp:
        fp.models = json.loads(FIXTURE.read_text())
        monkeypatch.setenv("AQVEN_OPENROUTER_BASE_URL", fp.base_url)
        count = await update_price_list(dest)
        assert [r.path for r in fp.requests] == ["/v1/models"]
    assert count == 4
    assert set(load_price_list(dest)) == {
        "openai/gpt-4o-mini",
        "mistralai/mistral-small-3.2-24b-instruct",
        "fake/listed-model",
    }


async def test_update_price_list_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with FakeProvider() as fp:
        url = fp.base_url
    monkeypatch.setenv("AQVEN_OPENROUTER_BASE_URL", url)  # nothing listens there any more
    with pytest.raises(AqvenError) as info:
        await update_price_list(tmp_path / "models.json")
    assert info.value.code == "PRICES_UNAVAILABLE"
    assert not (tmp_path / "models.json").exists()
