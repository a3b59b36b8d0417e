"""Series: start, list, read, cancel, and a person's approve and stop."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_jsonable_python

from aqven.research.series.start import SeriesStartBody
from aqven.server.operations.models import SeriesItem, SeriesOut, SeriesStartOut
from aqven.server.operations.research import series_items
from aqven.server.service import ProjectService
from aqven.store.approvals import Approver


def _snapshot(view: dict[str, Any]) -> SeriesOut:
    return SeriesOut.model_validate(to_jsonable_python(view))


async def start(svc: ProjectService, body: SeriesStartBody) -> SeriesStartOut:
    """Start a series (or return the one its client_op_id already started); answers at once."""
    return SeriesStartOut.model_validate(to_jsonable_python(await svc.series.start(body)))


def list_series(svc: ProjectService, experiment_id: str | None = None, limit: int = 50) -> list[SeriesItem]:
    return series_items(svc, experiment_id=experiment_id, limit=limit)


async def get(
    svc: ProjectService, series_id: str, *, wait_seconds: float = 0, include_cases: bool = False
) -> SeriesOut:
    """A series now (held until it settles or `wait_seconds` passed): progress, spend, matrix, verdict, cases."""
    return _snapshot(await svc.series.get(series_id, wait_seconds=wait_seconds, include_cases=include_cases))


async def cancel(
    svc: ProjectService, series_id: str, reason: str | None = None, by: dict[str, Any] | None = None
) -> SeriesOut:
    """Cancel a series (an agent may); `by` is who, as the credential proved it."""
    return _snapshot(await svc.series.cancel(series_id, reason, by))


async def approve(
    svc: ProjectService, series_id: str, cap_usd: Any, who: Approver, token_cap: int | None = None
) -> SeriesOut:
    """A person continues a paused series (never an agent: no tool calls this)."""
    return _snapshot(await svc.series.approve(series_id, cap_usd, who, token_cap))


async def stop(svc: ProjectService, series_id: str, who: Approver) -> SeriesOut:
    """A person stops a paused series (never an agent: no tool calls this)."""
    return _snapshot(await svc.series.stop(series_id, who))
