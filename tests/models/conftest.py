"""Fixtures of the model tests: an environment with no provider key or base URL and no price list, the
shared HTTP clients closed after each test, and a fake provider on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from aqven.models.outcomes import KEY_ENV_VARS
from aqven.models.providers import aclose_models, base_url_override_var
from aqven.project.providers import PROVIDERS
from support.fake_provider import FakeProvider


@pytest.fixture
def clean_model_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in KEY_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    for provider in PROVIDERS:
        monkeypatch.delenv(base_url_override_var(provider), raising=False)
    monkeypatch.setenv("AQVEN_PRICES_FILE", str(tmp_path / "no-prices.json"))


@pytest.fixture
async def closed_model_clients() -> AsyncIterator[None]:
    yield
    await aclose_models()


@pytest.fixture
def fp() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server
