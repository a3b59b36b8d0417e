"""Series: start, schedule, end, view, and the service the server offers."""

from __future__ import annotations

from aqven.research.holdout import is_sealed
from aqven.research.series.end import finalize
from aqven.research.series.order import attempt_plan, case_order
from aqven.research.series.reads import planned_cases, rereads
from aqven.research.series.service import SeriesService
from aqven.research.series.start import SeriesStartBody, prepare_series
from aqven.research.series.view import snapshot

__all__ = [
    "SeriesService",
    "SeriesStartBody",
    "attempt_plan",
    "case_order",
    "finalize",
    "is_sealed",
    "planned_cases",
    "prepare_series",
    "rereads",
    "snapshot",
]
