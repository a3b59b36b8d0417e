"""Intervals valid at every look, for series that may stop early (an experiment's ``stop_early: true``).

A ``stop_early`` series runs its cases in a random order drawn from a seed stored with the series, one
case at a time (every variant and repeat of a case before the next case's), so the cases of any prefix
of that order are a random sample of the selected cases. Its intervals are read at fixed **looks**: the
prefix lengths ``⌈j·N/20⌉`` (j = 1…20) of the ``N`` planned cases, every 5% of the cases. Bounds are
intersected over the looks so far (the running intersection). The series may stop at the first look whose
verdict is decided — confirmed or refuted — and that verdict keeps its 95% guarantee; a fixed-size interval
read at every look and acted on would not: each look is another chance to cross the bound by luck.

**The design: error spent across the 20 looks (issue 28, part 3).** The looks are fixed before the data
(20, at known prefix lengths), so the error of each side, ``α/2``, is split among them: look ``j`` gets
``α_j = α/2·(F(j/20) − F((j−1)/20))`` with the Hwang–Shih–DeCani spending function
``F(t) = (1 − e^{−γt})/(1 − e^{−γ})``, ``γ = SPENDING_GAMMA`` (Pocock-like: a little more early than an even
split), and its bound is Gaffke's fixed-size bound (`aqven.research.stats.gaffke`) on the prefix at
error ``α_j``. Each look's prefix is an i.i.d. sample of a size fixed in advance, so each look misses with
chance at most ``α_j`` for every population of cases in ``[0, 1]`` (Gaffke's conjecture, as for the
fixed-size intervals; with one pass-or-fail attempt per case it is Clopper–Pearson's, exact), and by the
union bound some look misses with chance at most ``Σ α_j = α/2`` — whatever the population, however the
looks are correlated, and so also for a series that stops at its first decided look. The union bound
spends all of the error at the 20 looks; the betting confidence sequence this replaces
(`aqven.research.stats.betting.sequence_interval_batch`, valid at every number of cases by Ville's
inequality) spent about 0.014 of its 0.025 at 20 looks, which is why it saved little at the plan's size
(`docs/statistical-validity.md`, "Stopping early").

Only cases whose attempts have all finished count, and only the longest finished prefix of the order:
a case that finished early because it failed fast must not enter before the cases ahead of it.

**One attempt per case.** A one-rate question of a series with one attempt per case and variant is decided by
the exact binomial group-sequential design instead (`aqven.research.stats.exact_sequential`): at the same looks,
it spends the error the union bound leaves unspent (0.0102 of 0.025 used at the line for 0.97 against 0.90) and
saves a median of 0.45–0.50 of the cases at its own plan's size where this design saved 0.20–0.40. Several
attempts per case and paired questions keep this design: no exact joint law of their looks is known for every
population.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from aqven.research.stats.gaffke import gaffke_lower_batch, gaffke_lower_counts
from aqven.research.stats.intervals import Interval, NoData

__all__ = [
    "LOOKS",
    "SPEND_AT",
    "SequenceView",
    "look_alphas",
    "look_lengths",
    "sequence_bounds_batch",
    "sequence_bounds_counts",
    "sequence_difference",
    "sequence_rate",
]

LOOKS: Final[int] = 20
"""Looks per series: one every 5% of the planned cases."""
SPEND_AT: Final[tuple[float, ...]] = (0.25, 0.40, 0.60, 0.80, 1.00)
"""The shares of the planned cases at whose looks the error is spent, in equal parts (looks 5, 8, 12, 16 and
20 of 20). The other looks are read too and keep the running bounds; they cannot decide anything new.
`bench/stats/early_grid.py` compares this with spending at all 20 looks and with spending functions."""

Floats = NDArray[np.float64]


def look_alphas(alpha: float, looks: int = LOOKS) -> Floats:
    """The error each of ``looks`` looks spends on one side, from ``alpha`` for that side: equal parts at the
    looks of `SPEND_AT` (of a series with fewer than 20 distinct looks: at the same shares of its looks),
    0 elsewhere; they sum to ``alpha``."""
    at = sorted({max(math.ceil(share * looks - 1e-9), 1) for share in SPEND_AT})
    out: Floats = np.zeros(looks)
    out[np.array(at) - 1] = alpha / len(at)
    return out


def sequence_bounds_batch(
    x: Floats,
    valid: NDArray[np.bool_],
    alpha: float,
    looks: NDArray[np.int64],
    total_looks: int = LOOKS,
    spend: Floats | None = None,
) -> tuple[Floats, Floats]:
    """The two-sided sequence (``alpha/2`` on each side in all) read at the given looks, running intersection.

    ``looks`` (shape (series, k), k ≤ ``total_looks``) are the numbers of leading valid cases seen at looks
    1…k of a row; column ``j`` gets the error of look ``j + 1`` of ``total_looks`` (20, or the number of
    distinct look lengths of a series of fewer than 20 planned cases: `look_lengths`). Rows are series,
    columns cases in their run order. ``spend`` (one side's error per look, summing to at most ``alpha/2``)
    replaces `look_alphas` for a bench that compares designs.
    """
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    valid = np.asarray(valid, dtype=np.bool_)
    looks = np.asarray(looks, dtype=np.int64)
    rows, k = looks.shape
    a = (look_alphas(alpha / 2, total_looks) if spend is None else np.asarray(spend, dtype=np.float64))[:k]
    lows = np.zeros((rows, k))
    highs = np.ones((rows, k))
    rank = np.cumsum(valid, axis=1)
    for j in np.flatnonzero(a > 0):
        seen = valid & (rank <= looks[:, j : j + 1])
        lows[:, j] = gaffke_lower_batch(x, seen, float(a[j]))
        highs[:, j] = 1.0 - gaffke_lower_batch(1.0 - x, seen, float(a[j]))
    return _running(lows, highs)


def sequence_bounds_counts(
    values: Floats, counts: Floats, alpha: float, total_looks: int = LOOKS, spend: Floats | None = None
) -> tuple[Floats, Floats]:
    """`sequence_bounds_batch` on cases given in merged form: ``counts`` (shape (series, k, v)) says how many of
    the cases seen by look ``j`` have each of the ``v`` distinct ``values``. The cost does not grow with the
    number of cases (the launch plan simulates series of any size with it)."""
    counts = np.asarray(counts, dtype=np.float64)
    rows, k, v = counts.shape
    grid = np.broadcast_to(np.asarray(values, dtype=np.float64), (rows, v))
    a = (look_alphas(alpha / 2, total_looks) if spend is None else np.asarray(spend, dtype=np.float64))[:k]
    lows = np.zeros((rows, k))
    highs = np.ones((rows, k))
    for j in np.flatnonzero(a > 0):
        lows[:, j] = gaffke_lower_counts(grid, counts[:, j, :], float(a[j]))
        highs[:, j] = 1.0 - gaffke_lower_counts(1.0 - grid, counts[:, j, :], float(a[j]))
    return _running(lows, highs)


def _running(lows: Floats, highs: Floats) -> tuple[Floats, Floats]:
    lows = np.where(np.isnan(lows), 0.0, lows)
    highs = np.where(np.isnan(highs), 1.0, highs)
    out_low: Floats = np.maximum.accumulate(lows, axis=1)
    out_high: Floats = np.minimum.accumulate(highs, axis=1)
    return out_low, out_high


@dataclass(frozen=True)
class SequenceView:
    """What a stop_early series has seen: the finished prefix of its case order, of how many planned, and its
    attempts per case and variant (with 1, a one-rate question is decided by the exact design of
    `aqven.research.stats.exact_sequential`)."""

    prefix: tuple[str, ...]
    planned_cases: int
    repeats: int


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
    low, high = _read(x, valid, looks, 1 - level, len(look_lengths(planned_cases, planned_cases)))
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
    low, high = _read((1.0 + diff) / 2, both, looks, 1 - level, len(look_lengths(planned_cases, planned_cases)))
    last = looks[-1]
    used = both[:last]
    pa = ya[:last][used].sum() / ra[:last][used].sum()
    pb = yb[:last][used].sum() / rb[:last][used].sum()
    attempts = int(ra[:last][used].sum() + rb[:last][used].sum())
    return Interval(float(pb - pa), 2 * low - 1, 2 * high - 1, int(used.sum()), attempts)


def _read(x: np.ndarray, valid: np.ndarray, looks: list[int], alpha: float, total: int) -> tuple[float, float]:
    """The running-intersection bounds after the given looks (prefix lengths of the whole order)."""
    counted_before = np.cumsum(valid)
    # A look at prefix length L sees the valid cases among the first L of the order.
    seen = np.array([[int(counted_before[length - 1]) for length in looks]], dtype=np.int64)
    lows, highs = sequence_bounds_batch(x[None, :], valid[None, :], alpha, seen, total)
    return float(lows[0, -1]), float(highs[0, -1])
