"""A series written straight into a `SeriesStore` for the store and fill tests (no tests here): the fields a
start writes, with test defaults for what those tests do not look at."""

from __future__ import annotations

from typing import Any

from aqven.store.series import SeriesStore
from aqven.store.series_records import SeriesPlan


def create_series(store: SeriesStore, plan: SeriesPlan, attempts: list[dict[str, Any]], **fields: Any) -> str:
    """A running dev experiment series `e` of `plan` with `attempts` queued (`fields` override the defaults)."""
    values: dict[str, Any] = {
        "kind": "experiment",
        "experiment_id": "e",
        "on": "dev",
        "status": "running",
        "plan": plan,
        "cap_usd": "1",
        "project_cap_usd": "10",
        "project_cap_source": "default",
        "inputs_hash": "h",
        "inputs": {},
        "simulated": True,
        "client_op_id": None,
        "pause": None,
        "attempts": attempts,
        "active_since": None,
        **fields,
    }
    sid, _ = store.create(**values)
    return sid
