"""Series of a ``stop_early`` experiment: what their confidence sequence has seen, and when they may stop.

Attempts run in the series' random order, case block by case block (`aqven.research.series.order`), so the
cases whose attempts have all finished, taken in that order up to the first one that has not, are a random
sample of the selected cases (`sequence_view`, kept with the verdict in `aqven.research.stats.series_verdict` so a
finding's verification reads it too). The verdict of such a series comes from its design over that prefix, read at
20 looks (`aqven.research.stats.sequential`; one attempt per case of a one-rate question:
`aqven.research.stats.exact_sequential`); the driver asks `EarlyStop.due`
after attempts finish, and once a look decides the verdict (confirmed or refuted) the series starts nothing
more: its running attempts finish and it ends, with the attempts it never ran and the spend they would
have cost on the record (`early_stop_record`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from aqven.research.stats.sequential import look_lengths
from aqven.research.stats.series_verdict import sequence_view
from aqven.store.series_records import DECIDED_EARLY, SeriesRow

__all__ = ["DECIDED_EARLY", "EarlyStop", "early_stop_record", "sequence_view"]


@dataclass
class EarlyStop:
    """When the next look is due: after ``attempts per case × look length`` attempts have finished."""

    s: SeriesRow
    looks_seen: int = 0
    marks: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        per_case = len(self.s.plan.variants) * self.s.plan.repeats
        planned = len(self.s.plan.cases)
        self.marks = [length * per_case for length in look_lengths(planned, planned)]

    @classmethod
    def resume(cls, s: SeriesRow, finished: int) -> EarlyStop:
        """For a driver that starts (or restarts) with ``finished`` attempts done: the last look reached is
        read again at the next finished attempt, in case a server died between reaching it and reading it."""
        early = cls(s)
        early.looks_seen = max(sum(1 for m in early.marks if m <= finished) - 1, 0)
        return early

    def due(self, finished: int) -> bool:
        """True when ``finished`` attempts reach a look not read yet (then that look counts as read)."""
        reached = sum(1 for m in self.marks if m <= finished)
        if reached > self.looks_seen:
            self.looks_seen = reached
            return True
        return False


def early_stop_record(s: SeriesRow, done: int, planned: int, spent: Decimal) -> dict[str, Any] | None:
    """What an early stop saved, for the snapshot and the finding; None unless the series stopped early."""
    if s.stop_reason != DECIDED_EARLY:
        return None
    never_ran = max(planned - done, 0)
    saved = (spent / done * never_ran).quantize(Decimal("0.000001")) if done else Decimal(0)
    return {
        "stopped": True,
        "reason": "decided",
        "attempts_run": done,
        "attempts_planned": planned,
        "never_ran": never_ran,
        "spend_saved_usd": str(saved),
        "text": f"stopped early at {done:,} of {planned:,} attempts: decided; about ${saved} not spent",
    }
