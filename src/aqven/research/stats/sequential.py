"""Anytime-valid intervals for series that may stop early (an experiment's ``stop_early: true``).

A ``stop_early`` series runs its cases in a random order drawn from a seed stored with the series, one
case at a time (every variant and repeat of a case before the next case's), so the cases of any prefix
of that order are a random sample of the selected cases. Its intervals come from the betting confidence
*sequence* of `aqven.research.stats.betting` over the per-case means of that prefix, read at fixed **looks**:
the prefix lengths ``⌈j·N/20⌉`` (j = 1…20) of the ``N`` planned cases, every 5% of the cases. Bounds are
intersected over the looks so far (the running intersection). Ville's inequality makes the sequence
valid at every look at once, so the series may stop at the first look whose verdict is decided —
confirmed or refuted — and that verdict keeps its 95% guarantee. A fixed-size interval read at every
look and acted on would not: each look is another chance to cross the bound by luck.

Only cases whose attempts have all finished count, and only the longest finished prefix of the order:
a case that finished early because it failed fast must not enter before the cases ahead of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from aqven.research.stats.betting import sequence_interval_batch
from aqven.research.stats.intervals import Interval, NoData

__all__ = ["LOOKS", "SequenceView", "look_lengths", "sequence_difference", "sequence_rate"]

LOOKS: Final[int] = 20
"""Looks per series: one every 5% of the planned cases."""


@dataclass(frozen=True)
class SequenceView:
    """What a stop_early series has seen: the finished prefix of its case order, of how many planned."""

    prefix: tuple[str, ...]
    planned_cases: int


def look_lengths(planned_cases: int, seen: int) -> list[int]:
    """The prefix lengths of the looks reached with ``seen`` finished cases (at least one look: ``seen``
    itself when no look is reached yet is not a look, so then the list is empty)."""
    if planned_cases <= 0:
        return []
    marks = sorted({math.ceil(j * planned_cases / LOOKS) for j in range(1, LOOKS + 1)})
    return [m for m in marks if m <= seen]


def sequence_rate(means: Sequence[float], counted: Sequence[int], planned_cases: int, level: float) -> Interval:
    """The running interval of a rate after the looks the prefix reached.

    ``means`` and ``counted`` are the per-case means and counted attempts along the prefix (cases
    without a counted attempt are skipped). Raises `NoData` before the first look or without data.
    """
    x = np.asarray(means, dtype=np.float64)
    r = np.asarray(counted, dtype=np.float64)
    looks = look_lengths(planned_cases, len(x))
    valid = r > 0
    if not looks or not valid[: looks[-1]].any():
        raise NoData("no look of the sequence has a counted case yet")
    low, high = _read(x, valid, looks, 1 - level, planned_cases)
    used = valid[: looks[-1]]
    est = float(np.sum(x[: looks[-1]][used] * r[: looks[-1]][used]) / np.sum(r[: looks[-1]][used]))
    return Interval(est, low, high, int(used.sum()), int(r[: looks[-1]][used].sum()))


def sequence_difference(
    a: Sequence[tuple[float, int]], b: Sequence[tuple[float, int]], planned_cases: int, level: float
) -> Interval:
    """The running interval of ``B − A`` on per-case (passes, counted) along the prefix, aligned by case."""
    ya, ra = (np.array([float(t[i]) for t in a]) for i in (0, 1))
    yb, rb = (np.array([float(t[i]) for t in b]) for i in (0, 1))
    looks = look_lengths(planned_cases, len(ya))
    both = (ra > 0) & (rb > 0)
    if not looks or not both[: looks[-1]].any():
        raise NoData("no look of the sequence has a case counted in both variants yet")
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.where(both, yb / np.where(both, rb, 1.0) - ya / np.where(both, ra, 1.0), 0.0)
    low, high = _read((1.0 + diff) / 2, both, looks, 1 - level, planned_cases)
    last = looks[-1]
    used = both[:last]
    pa = ya[:last][used].sum() / ra[:last][used].sum()
    pb = yb[:last][used].sum() / rb[:last][used].sum()
    attempts = int(ra[:last][used].sum() + rb[:last][used].sum())
    return Interval(float(pb - pa), 2 * low - 1, 2 * high - 1, int(used.sum()), attempts)


def _read(x: np.ndarray, valid: np.ndarray, looks: list[int], alpha: float, planned: int) -> tuple[float, float]:
    """The running-intersection bounds after the given looks (prefix lengths of the whole order)."""
    counted_before = np.cumsum(valid)
    # A look at prefix length L sees the valid cases among the first L of the order.
    seen = np.array([[int(counted_before[length - 1]) for length in looks]], dtype=np.int64)
    lows, highs = sequence_interval_batch(x[None, :], valid[None, :], alpha, seen, tuned_for=planned)
    return float(lows[0, -1]), float(highs[0, -1])
