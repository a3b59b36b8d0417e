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


def attempt_rows(plan: SeriesPlan, order: list[str] | None = None) -> list[dict[str, Any]]:
    """One queued attempt row per case × variant × repeat, case by case in `order` (the plan's by default), each
    on its case's side, its seed its index."""
    cases = plan.cases if order is None else order
    return [
        {"idx": i, "case_name": c, "dataset_id": "d", "side": plan.sides[c], "variant_id": v, "rep": r, "seed": i}
        for i, (c, v, r) in enumerate((c, v, r) for c in cases for v in plan.variants for r in range(plan.repeats))
    ]
