"""The exact binomial group-sequential design of a one-attempt-per-case ``stop_early`` series (issue 28, part 3).

**Why it is valid for every population.** With one attempt per case a case's pass is a Bernoulli draw of the
population's mean, whatever the population of cases in ``[0, 1]``, and the cases of a series' finished prefix are
a random sample (`aqven.research.stats.sequential`). So the passes seen by the looks are a binomial random walk,
and a boundary calibrated on its exact law at the line holds for every population.

**The boundaries.** The series is read at its looks (`sequential.look_lengths`: every 5% of the ``N`` planned
cases). At look ``k``, with ``m_k`` counted cases, the rate is shown above the line when the passes reach ``c_k``:
the smallest count whose chance of a first crossing by look ``k``, at the line, stays within the error spent by
then, ``α·t_k^ρ`` (``α`` = 0.025 a side, ``ρ`` = `RHO`, ``t_k = m_k / N``, and ``t = 1`` at the series' last look,
so all of ``α`` is spent there); error a look cannot use carries to the next. The chances come from dynamic
programming over the passes (`upper_counts`; no Monte Carlo). Below the line, mirrored: passes at most ``d_k``.
Each side is computed as if the other did not stop the series (non-binding), so each side's error is at most
``α`` whatever the other side does. The spending is read at the *actual* counted cases of each look (the
Lan–DeMets error-spending approach): a case without a counted attempt (an infrastructure error) lowers ``m_k`` and
the error spent by that look; the boundaries stay valid because a look's count does not depend on the passes.

**Scores.** A case's value is its pass (0 or 1). A score strictly between is counted conservatively on each side:
as a failure toward "above the line" (the passes are then those of the rate of cases scoring 1, at most the mean)
and as a pass toward "below the line" (the rate of cases scoring above 0, at least the mean), so each side keeps
its error for every population of scores in ``[0, 1]``; pass-or-fail cases are counted as they are.

**The interval it reports** (`exact_rate`). The series stands on its first crossing look (later looks are not
read), else on the last look reached. Its lower bound is the exact stagewise-ordering bound of the "above" design
(Armitage; Jennison & Turnbull ch. 8) at that look ``k``: the rate ``p`` at which the chance of a crossing before
look ``k`` plus that of reaching look ``k`` with at least the passes seen equals ``α·t_k^ρ``; the upper bound is
its mirror on the "below" design. At the line that chance is the one the boundary was calibrated on, so the lower
bound is above the line exactly when the passes crossed at this look, and the upper bound below it exactly when
they crossed below (`classify` on the interval gives the design's decision; `exact_rate` rounds a bound within
round-off of the line to the side of the decision). At the series' end — a stop on that side, or the last look —
the bound is a confidence bound for every rate: the stagewise ordering's p-value is exact for the design's
terminal states, at error ``α·t_k^ρ ≤ α``. While the series runs it is the bound the series would report if it
stopped now; at rates at or above the line (below it, for the upper bound) it is valid at every look, as the
decision is at the line.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import scipy.optimize
import scipy.signal
import scipy.stats
from numpy.typing import NDArray

from aqven.research.stats.intervals import Interval, NoData
from aqven.research.stats.sequential import look_lengths

__all__ = [
    "ALPHA",
    "RHO",
    "Design",
    "Reading",
    "bounds_at",
    "design",
    "exact_rate",
    "first_stops",
    "levels",
    "lower_counts",
    "read",
    "terminal_states",
    "upper_counts",
]

Floats = NDArray[np.float64]

ALPHA: Final[float] = 0.025
"""One side's error: the false confirmations at the line under peeking at every look."""
RHO: Final[float] = 0.1
"""The spending ``α·t^ρ``: most of the error is available from the first look (0.74·α at 5% of the cases), which
is what lets an easy series stop early; `bench/stats/early_limit.py` found ρ = 0.1 best at the 20 looks."""
TOLERANCE: Final[float] = 1e-12
"""A chance within ``budget·(1 + TOLERANCE)`` is within the budget (round-off of the sums)."""
_TRIM: Final[float] = 1e-20
"""Mass dropped from each end of a distribution after each look (Bernstein bounds the binomial's tails)."""
_DIRECT: Final[int] = 4_000_000
"""Convolve directly below this product of lengths, by FFT above (series of tens of thousands of cases)."""


def levels(planned: int, looks: Sequence[int], last: bool, alpha: float = ALPHA, rho: float = RHO) -> list[float]:
    """The error spent by each look: ``α·(m_k / N)^ρ`` with ``m_k`` its counted cases, ``α`` at the last look."""
    out = [alpha * min(max(m / planned, 0.0), 1.0) ** rho if planned > 0 else alpha for m in looks]
    if last and out:
        out[-1] = alpha
    return out


@functools.lru_cache(maxsize=8192)
def _pmf(m: int, p: float) -> tuple[int, Floats]:
    """Binomial(m, p) on the counts with mass (outside ``mean ± (15 sd + 40)`` Bernstein leaves below 1e-24)."""
    if m <= 0 or p <= 0.0:
        return 0, np.ones(1)
    if p >= 1.0:
        return m, np.ones(1)
    mean, sd = m * p, math.sqrt(m * p * (1 - p))
    lo, hi = max(0, math.floor(mean - 15 * sd - 40)), min(m, math.ceil(mean + 15 * sd + 40))
    out: Floats = scipy.stats.binom.pmf(np.arange(lo, hi + 1), m, p)
    out.setflags(write=False)
    return lo, out


class _Walk:
    """The passes of the series still running, as masses over a window of counts from ``start``."""

    def __init__(self) -> None:
        self.start = 0
        self.mass: Floats = np.ones(1)

    def step(self, cases: int, p: float) -> None:
        if self.mass.size == 0:
            return
        s, pmf = _pmf(cases, p)
        if self.mass.size * pmf.size <= _DIRECT:
            self.mass = np.convolve(self.mass, pmf)
        else:
            self.mass = np.clip(scipy.signal.fftconvolve(self.mass, pmf), 0.0, None)
        self.start += s
        self._trim()

    def _trim(self) -> None:
        if self.mass.size == 0:
            return
        left = int(np.searchsorted(np.cumsum(self.mass), _TRIM, side="right"))
        right = int(np.searchsorted(np.cumsum(self.mass[::-1]), _TRIM, side="right"))
        if left + right >= self.mass.size:
            self.mass = np.zeros(0)
            return
        self.mass = self.mass[left : self.mass.size - right]
        self.start += left

    def at_least(self, c: int) -> float:
        """The mass at ``c`` passes or more."""
        i = max(c - self.start, 0)
        return float(self.mass[i:].sum()) if i < self.mass.size else 0.0

    def at_most(self, d: int) -> float:
        i = d - self.start + 1
        return float(self.mass[: max(i, 0)].sum()) if i > 0 else 0.0

    def cut_at_least(self, c: int) -> float:
        """Remove (and return) the mass at ``c`` passes or more: those series stopped."""
        out = self.at_least(c)
        self.mass = self.mass[: max(c - self.start, 0)]
        self._trim()
        return out

    def cut_at_most(self, d: int) -> float:
        out = self.at_most(d)
        i = max(d - self.start + 1, 0)
        self.mass = self.mass[i:]
        self.start += i
        self._trim()
        return out

    def smallest_within(self, budget: float, most: int) -> int:
        """The smallest count whose mass at or above it is within ``budget`` (``most + 1`` when none is)."""
        if budget <= 0:
            return most + 1
        if self.mass.size == 0:
            return self.start
        tail = np.cumsum(self.mass[::-1])[::-1]
        ok = np.flatnonzero(tail <= budget * (1 + TOLERANCE))
        c = self.start + int(ok[0]) if ok.size else self.start + self.mass.size
        return min(c, most + 1)


def upper_counts(looks: Sequence[int], line: float, spent_by: Sequence[float]) -> tuple[list[int], list[float]]:
    """The passes that cross above at each look (``m_k + 1``: that look cannot), the smallest whose exact chance of a
    first crossing by then at the line is within ``spent_by[k]``; and that chance, cumulated (the error spent)."""
    walk, prev, spent = _Walk(), 0, 0.0
    counts, cumulated = [], []
    for m, level in zip(looks, spent_by, strict=True):
        walk.step(m - prev, line)
        c = walk.smallest_within(level - spent, m)
        if c <= m:
            spent += walk.cut_at_least(c)
        counts.append(c)
        cumulated.append(spent)
        prev = m
    return counts, cumulated


def lower_counts(looks: Sequence[int], line: float, spent_by: Sequence[float]) -> tuple[list[int], list[float]]:
    """The mirror of `upper_counts`: the passes at or below which a look crosses below the line (−1: it cannot)."""
    counts, cumulated = upper_counts(looks, 1.0 - line, spent_by)  # failures crossing above 1 − line
    return [m - c for m, c in zip(looks, counts, strict=True)], cumulated


@dataclass(frozen=True)
class Design:
    """Both sides' boundaries at the looks read so far (``looks``: counted cases at each)."""

    planned: int
    line: float
    looks: tuple[int, ...]
    levels: tuple[float, ...]
    upper: tuple[int, ...]
    lower: tuple[int, ...]
    spent_upper: tuple[float, ...]
    spent_lower: tuple[float, ...]


@functools.lru_cache(maxsize=4096)
def design(
    planned: int, line: float, looks: tuple[int, ...], last: bool, alpha: float = ALPHA, rho: float = RHO
) -> Design:
    """The design of a series of ``planned`` cases at ``line`` after the looks ``looks`` (counted cases at each;
    ``last``: the last of them is the series' final look). Cached: a series reads the same looks again and again."""
    p0 = min(max(line, 0.0), 1.0)
    spent_by = levels(planned, looks, last, alpha, rho)
    up, spent_up = upper_counts(looks, p0, spent_by)
    down, spent_down = lower_counts(looks, p0, spent_by)
    return Design(planned, p0, looks, tuple(spent_by), tuple(up), tuple(down), tuple(spent_up), tuple(spent_down))


def first_stops(looks: Sequence[int], upper: Sequence[int], lower: Sequence[int], p: float) -> tuple[Floats, Floats]:
    """The chances that a series whose attempts pass with ``p`` stops at each look by crossing above, and below (it
    stops at its first crossing; ``lower`` all −1 for a design with one side)."""
    walk, prev = _Walk(), 0
    above, below = [], []
    for m, c, d in zip(looks, upper, lower, strict=True):
        walk.step(m - prev, p)
        above.append(walk.cut_at_least(c) if c <= m else 0.0)
        below.append(walk.cut_at_most(d) if d >= 0 else 0.0)
        prev = m
    return np.array(above), np.array(below)


def terminal_states(d: Design, p: float) -> list[tuple[int, int, float]]:
    """(look, passes, chance) of every state a pass-or-fail series stops in — its first crossing, else the last
    look — when its attempts pass with ``p`` (states of chance below about 1e-20 left out)."""
    walk, prev, out = _Walk(), 0, []
    for k, (m, c, low) in enumerate(zip(d.looks, d.upper, d.lower, strict=True)):
        walk.step(m - prev, p)
        last = k == len(d.looks) - 1
        for i, mass in enumerate(walk.mass):
            x = walk.start + i
            if mass > 0 and (x >= c or x <= low or last):
                out.append((k + 1, x, float(mass)))
        if c <= m:
            walk.cut_at_least(c)
        if low >= 0:
            walk.cut_at_most(low)
        prev = m
    return out


def _stagewise(looks: Sequence[int], upper: Sequence[int], p: float, passes: int) -> float:
    """The chance, at rate ``p``, of a crossing above before the last of ``looks`` plus that of reaching it with at
    least ``passes``: the stagewise-ordering p-value of that state of the "above" design."""
    walk, prev, crossed = _Walk(), 0, 0.0
    for k, (m, c) in enumerate(zip(looks, upper, strict=True)):
        walk.step(m - prev, p)
        if k == len(looks) - 1:
            return crossed + walk.at_least(passes)
        if c <= m:
            crossed += walk.cut_at_least(c)
        prev = m
    raise ValueError("no look")


def _lower_bound(looks: Sequence[int], upper: Sequence[int], line: float, level: float, passes: int) -> float:
    """The stagewise lower bound at the last of ``looks`` with ``passes``: the rate at which `_stagewise` is
    ``level``; above ``line`` exactly when the passes cross there (rounded to that side of the line)."""
    crossed = passes >= upper[-1]
    if passes <= 0:
        return 0.0

    def f(p: float) -> float:
        return _stagewise(looks, upper, p, passes) - level * (1 + TOLERANCE)

    lo, hi = (line, 1.0) if crossed else (0.0, line)
    f_lo, f_hi = f(lo), f(hi)
    if f_lo > 0:
        root = lo
    elif f_hi <= 0:
        root = hi
    else:
        root = float(scipy.optimize.brentq(f, lo, hi, xtol=1e-12))
    out = root - 2e-12
    out = max(out, float(np.nextafter(line, 2.0))) if crossed else min(out, float(np.nextafter(line, -1.0)))
    return min(max(out, 0.0), 1.0)


@dataclass(frozen=True)
class Reading:
    """What the design says of a series' prefix: the look it stands on (1-based), its counted cases and passes
    (toward above the line; toward below), the side crossed, and the interval."""

    look: int
    cases: int
    passes_up: int
    passes_down: int
    crossed: Literal["above", "below"] | None
    low: float
    high: float


@functools.lru_cache(maxsize=4096)
def _reading(
    planned: int,
    line: float,
    alpha: float,
    looks: tuple[int, ...],
    up: tuple[int, ...],
    down: tuple[int, ...],
    last: bool,
) -> Reading:
    d = design(planned, line, looks, last, alpha)
    stop = len(looks) - 1
    crossed: Literal["above", "below"] | None = None
    for k in range(len(looks)):
        if up[k] >= d.upper[k]:
            stop, crossed = k, "above"
            break
        if down[k] <= d.lower[k]:
            stop, crossed = k, "below"
            break
    low, high = bounds_at(d, stop + 1, up[stop], down[stop])
    return Reading(stop + 1, looks[stop], up[stop], down[stop], crossed, low, high)


def bounds_at(d: Design, look: int, up: int, down: int) -> tuple[float, float]:
    """The interval of a series standing on look ``look`` (1-based, not crossed before it) with ``up`` passes
    toward above and ``down`` toward below: the stagewise bounds at the error spent by that look."""
    seen, level = d.looks[:look], d.levels[look - 1]
    low = _lower_bound(seen, d.upper[:look], d.line, level, up)
    fails_upper = [m - c for m, c in zip(seen, d.lower[:look], strict=True)]  # the mirror: failures ≥ m − d
    high = 1.0 - _lower_bound(seen, fails_upper, 1.0 - d.line, level, seen[-1] - down)
    return low, high


def read(
    means: Sequence[float], counted: Sequence[int], planned_cases: int, line: float, alpha: float = ALPHA
) -> Reading:
    """The design's reading of a prefix: per-case means and counted attempts in run order (cases without a counted
    attempt are skipped). Raises `NoData` before the first look or without a counted case by it."""
    x = np.asarray(means, dtype=np.float64)
    valid = np.asarray(counted, dtype=np.float64) > 0
    lengths = look_lengths(planned_cases, len(x))
    if not lengths or not valid[: lengths[-1]].any():
        raise NoData("no look of the sequence has a counted case yet")
    idx = np.array(lengths) - 1
    looks = np.cumsum(valid)[idx]
    up = np.cumsum(valid & (x >= 1.0))[idx]  # a score below 1 is a failure toward "above"
    down = np.cumsum(valid & (x > 0.0))[idx]  # and a pass toward "below"
    last = lengths[-1] == planned_cases
    return _reading(
        planned_cases,
        float(line),
        float(alpha),
        tuple(int(v) for v in looks),
        tuple(int(v) for v in up),
        tuple(int(v) for v in down),
        bool(last),
    )


def exact_rate(
    means: Sequence[float], counted: Sequence[int], planned_cases: int, level: float, line: float
) -> Interval:
    """The interval of a one-attempt-per-case stop_early series at ``line`` (`read`, error ``(1 − level)/2`` a
    side): its lower bound is above the line exactly when the design crossed above, its upper bound below the line
    exactly when it crossed below. The estimate and counts are those of the look it stands on."""
    r = read(means, counted, planned_cases, line, round((1 - level) / 2, 12))
    lengths = look_lengths(planned_cases, len(means))
    length = lengths[r.look - 1]
    x = np.asarray(means, dtype=np.float64)[:length]
    n = np.asarray(counted, dtype=np.float64)[:length]
    used = n > 0
    estimate = float(np.sum(x[used] * n[used]) / np.sum(n[used]))
    return Interval(estimate, r.low, r.high, int(used.sum()), int(n[used].sum()))
