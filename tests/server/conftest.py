"""Every test here runs on both backends of the store, SQLite and PostgreSQL (tests/conftest.py `backend`)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _on_each_backend(backend: str | None) -> None:
    """Parametrises the test by backend; `backend` sets AQVEN_STORE for PostgreSQL."""
