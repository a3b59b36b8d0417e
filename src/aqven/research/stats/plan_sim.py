"""Launch-plan figures computed with the interval the series will report (issue 28, part 2).

A plan that promises "about N cases would decide it 80% of the time" must mean the interval the series
reports, not a normal approximation of it: near 0 and 1 the reported interval (Gaffke's bound on the
per-case means, `aqven.research.stats.intervals`) is wider than a Wald one, and a Wald plan promised power
the series did not have (a 98-case held-out half planned at ±0.033 reported ±0.045).

So the plan simulates series. A **population** is a finite distribution of case pass rates (with weights;
for a paired question, the two variants' rates of the same case). A series of ``n`` cases × ``r`` repeats
draws its cases from it and its attempts from their rates. With equal repeats the reported interval depends
only on how many cases ended at each per-case mean ``j/r`` (or each per-case difference), so a series is
drawn as multinomial counts over those ``r + 1`` (or ``2r + 1``) values and the interval computed from the
counts (`aqven.research.stats.gaffke.gaffke_lower_counts`): the very bound `one_rate_batch` and
`paired_difference_batch` compute, at a cost that does not grow with ``n``. Deterministic: a fixed seed
and the same random numbers at every ``n`` (so the share that decides rises smoothly with ``n``).

Populations come from the planning numbers: `beta_population` (a rate and an intra-case correlation, the
plan's defaults or a dev series' estimates) and `paired_population` (two such, linked by a Gaussian copula
with the between-variant correlation, B shifted by the planning difference). A test or a bench may pass the
true population of a world instead (`tests/research/stats/test_plan_calibration.py`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np
import scipy.special
import scipy.stats
from numpy.typing import NDArray

from aqven.research.stats import exact_sequential
from aqven.research.stats.gaffke import gaffke_lower_counts
from aqven.research.stats.sequential import look_lengths, sequence_bounds_counts

__all__ = [
    "SERIES",
    "Outcome",
    "Population",
    "SequentialOutcome",
    "beta_population",
    "cases_for_half_width",
    "cases_to_decide",
    "exact_sequential_outcome",
    "paired_population",
    "sequential_cases_to_decide",
    "simulate",
    "simulate_sequential",
]

Floats = NDArray[np.float64]

SERIES: Final[int] = 1000
"""Simulated series per size: a share of 0.8 has a Monte Carlo standard error of 0.013."""
SEED: Final[int] = 20_260_428
GRID: Final[int] = 400
"""Points of a Beta population (its quantiles at the midpoints of 400 equal slices)."""
MAX_CASES: Final[int] = 1_000_000


@dataclass(frozen=True, eq=False)
class Population:
    """Case pass rates with weights; ``b`` the other variant's rates of the same cases (paired)."""

    a: Floats
    weights: Floats
    b: Floats | None = None

    @staticmethod
    def of(
        a: list[float] | Floats, weights: list[float] | Floats | None = None, b: list[float] | Floats | None = None
    ) -> Population:
        rates = np.clip(np.asarray(a, dtype=np.float64), 0.0, 1.0)
        w = np.ones(len(rates)) if weights is None else np.asarray(weights, dtype=np.float64)
        other = None if b is None else np.clip(np.asarray(b, dtype=np.float64), 0.0, 1.0)
        return Population(rates, w / w.sum(), other)

    @property
    def paired(self) -> bool:
        return self.b is not None


@dataclass(frozen=True)
class Outcome:
    """What simulated series of one size report: the median half-width and the shares that decide."""

    cases: int
    half_width: float
    confirmed: float
    refuted: float

    @property
    def decided(self) -> float:
        return self.confirmed + self.refuted


@dataclass(frozen=True)
class SequentialOutcome:
    """What simulated ``stop_early`` series of one planned size do, each stopped at its first deciding look.

    ``confirmed`` and ``refuted`` are the shares decided so by the last look; ``expected_cases`` the mean
    number of cases run; ``median_saving`` the median over series of ``1 − cases run / planned``;
    ``stops_early`` the share that decided before the last look."""

    cases: int
    confirmed: float
    refuted: float
    expected_cases: float
    median_saving: float
    stops_early: float

    @property
    def decided(self) -> float:
        return self.confirmed + self.refuted


#: Below this intra-case correlation every case has the planning rate: a Beta that narrow (a and b near 1/ρ) is
#: a point for any plan, and its quantiles cost scipy minutes (a dev series' ρ estimate of 1e-16 took 95 s).
MIN_RHO: Final[float] = 1e-6


def beta_population(rate: float, rho: float) -> Population:
    """Case rates ``q ~ Beta`` with mean ``rate`` and intra-case correlation ``rho`` (``q = rate`` at 0)."""
    rate = min(max(rate, 1e-9), 1 - 1e-9)
    if rho <= MIN_RHO:
        return Population.of([rate])
    return Population.of(_beta_quantiles(rate, rho, (np.arange(GRID) + 0.5) / GRID))


def paired_population(rate: float, rho: float, rho_between: float, difference: float) -> Population:
    """A: ``Beta(rate, rho)``; B: ``Beta(rate + difference, rho)``; linked case by case through a Gaussian
    copula with correlation ``rho_between``, on a deterministic grid (A's normal score at 400 quantiles ×
    the independent part at 50: a Monte Carlo draw of the population would move its mean difference by
    more than a plan can afford)."""
    za = scipy.special.ndtri((np.arange(GRID) + 0.5) / GRID)
    noise = scipy.special.ndtri((np.arange(50) + 0.5) / 50)
    c = min(max(rho_between, -0.999), 0.999)
    zb = (c * za[:, None] + np.sqrt(1 - c * c) * noise[None, :]).ravel()
    za = np.repeat(za, noise.size)
    rb = min(max(rate + difference, 1e-9), 1 - 1e-9)
    ra = min(max(rate, 1e-9), 1 - 1e-9)
    if rho <= MIN_RHO:
        return Population.of(np.full(za.size, ra), b=np.full(za.size, rb))
    ua, ub = scipy.special.ndtr(za), scipy.special.ndtr(zb)
    return Population.of(_beta_quantiles(ra, rho, ua), b=_beta_quantiles(rb, rho, ub))


def _beta_quantiles(rate: float, rho: float, u: Floats) -> Floats:
    rho = min(rho, 0.999)  # ρ = 1 (every case all-pass or all-fail) as the limit of a very wide Beta
    a, b = rate * (1 - rho) / rho, (1 - rate) * (1 - rho) / rho
    out: Floats = scipy.special.betaincinv(a, b, np.clip(u, 1e-12, 1 - 1e-12))
    return out


def _value_probabilities(pop: Population, repeats: int) -> tuple[Floats, Floats]:
    """The values a case's mean (or difference, mapped to [0, 1]) takes, and their probabilities."""
    j = np.arange(repeats + 1)
    pa = scipy.stats.binom.pmf(j[None, :], repeats, pop.a[:, None])
    if pop.b is None:
        return j / repeats, pop.weights @ pa
    pb = scipy.stats.binom.pmf(j[None, :], repeats, pop.b[:, None])
    diff = np.zeros((len(pop.a), 2 * repeats + 1))
    for ja in range(repeats + 1):  # P(jB − jA = k) per case
        diff[:, repeats - ja : 2 * repeats + 1 - ja] += pa[:, ja : ja + 1] * pb
    k = np.arange(-repeats, repeats + 1)
    return (1 + k / repeats) / 2, pop.weights @ diff


def simulate(
    pop: Population, cases: int, repeats: int, level: float, line: float, upward: bool, series: int = SERIES
) -> Outcome:
    """``series`` simulated series of ``cases × repeats`` from ``pop``, each with the interval the series
    reports at ``level``, classified against ``line`` as the verdict does (`questions.classify`)."""
    values, probs = _value_probabilities(pop, repeats)
    probs = np.clip(probs, 0.0, None)
    rng = np.random.default_rng(SEED)
    counts = rng.multinomial(cases, probs / probs.sum(), size=series).astype(np.float64)
    grid = np.tile(values, (series, 1))
    alpha = 1 - level
    low = gaffke_lower_counts(grid, counts, alpha / 2)
    high = 1 - gaffke_lower_counts(1 - grid, counts, alpha / 2)
    estimate = counts @ values / cases
    low, high = np.fmin(low, estimate), np.fmax(high, estimate)
    if pop.paired:
        low, high = 2 * low - 1, 2 * high - 1
    if upward:
        confirmed, refuted = low > line, high <= line
    else:
        confirmed, refuted = high < line, low >= line
    return Outcome(cases, float(np.median(high - low) / 2), float(confirmed.mean()), float(refuted.mean()))


def simulate_sequential(
    pop: Population, cases: int, repeats: int, level: float, line: float, upward: bool, series: int = SERIES
) -> SequentialOutcome:
    """``series`` simulated ``stop_early`` series of ``cases`` planned cases × ``repeats`` from ``pop``, each
    read at its looks with the sequence the series reports (`aqven.research.stats.sequential`) and stopped at
    the first look that decides, as the series would. One attempt per case of one rate: the exact figures of the
    design such a series decides by (`exact_sequential_outcome`), not a simulation."""
    if pop.b is None and repeats == 1:
        return exact_sequential_outcome(float(pop.weights @ pop.a), cases, level, line, upward)
    values, probs = _value_probabilities(pop, repeats)
    probs = np.clip(probs, 0.0, None)
    probs = probs / probs.sum()
    lengths = np.array(look_lengths(cases, cases), dtype=np.int64)
    rng = np.random.default_rng(SEED)
    steps = np.diff(np.concatenate([[0], lengths]))
    new = np.stack([rng.multinomial(int(k), probs, size=series) for k in steps], axis=1)
    counts = np.cumsum(new, axis=1).astype(np.float64)  # (series, look, value): the cases seen by each look
    low, high = sequence_bounds_counts(values, counts, 1 - level, len(lengths))
    if pop.paired:
        low, high = 2 * low - 1, 2 * high - 1
    if upward:
        confirmed, refuted = low > line, high <= line
    else:
        confirmed, refuted = high < line, low >= line
    decided = confirmed | refuted
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), len(lengths) - 1)
    rows = np.arange(series)
    ran = lengths[first]
    return SequentialOutcome(
        cases,
        float(confirmed[rows, first].mean()),
        float(refuted[rows, first].mean()),
        float(ran.mean()),
        float(np.median(1 - ran / cases)),
        float(np.mean(decided.any(axis=1) & (first < len(lengths) - 1))),
    )


def exact_sequential_outcome(rate: float, cases: int, level: float, line: float, upward: bool) -> SequentialOutcome:
    """What one-attempt-per-case ``stop_early`` series of ``cases`` planned cases do when their attempts pass with
    ``rate`` (any population of that mean), decided by the exact design at ``line``
    (`aqven.research.stats.exact_sequential`): exact chances by dynamic programming. ``median_saving`` is the
    smallest saving ``s`` with P(saving ≤ s) ≥ 1/2."""
    lengths = look_lengths(cases, cases)
    d = exact_sequential.design(cases, line, tuple(lengths), True, round((1 - level) / 2, 12))
    above, below = exact_sequential.first_stops(lengths, d.upper, d.lower, min(max(rate, 0.0), 1.0))
    stop = above + below
    stop[-1] += max(0.0, 1.0 - float(stop.sum()))  # undecided at the last look: ran every case
    ran = np.asarray(lengths, dtype=np.float64)
    later = np.cumsum(stop[::-1])[::-1]  # P(saving ≤ 1 − ran_k / cases) = P(stops at look k or later)
    median_look = int(np.flatnonzero(later >= 0.5 - 1e-12)[-1])
    confirmed, refuted = (above, below) if upward else (below, above)
    return SequentialOutcome(
        cases,
        float(confirmed.sum()),
        float(refuted.sum()),
        float(stop @ ran),
        float(1 - ran[median_look] / cases),
        float((above + below)[:-1].sum()),
    )


@functools.lru_cache(maxsize=256)
def sequential_cases_to_decide(
    pop: Population, repeats: int, level: float, line: float, upward: bool, power: float = 0.8
) -> SequentialOutcome | None:
    """The fewest planned cases at which a share ``power`` of simulated ``stop_early`` series decide by their
    last look (`simulate_sequential`: with one attempt per case of one rate, the exact design's own chance);
    None when no number up to a million does."""
    found = _smallest(
        lambda n: simulate_sequential(pop, n, repeats, level, line, upward).decided >= power,
        pop,
        repeats,
        level,
        line,
        upward,
    )
    return None if found is None else simulate_sequential(pop, found.cases, repeats, level, line, upward)


@functools.lru_cache(maxsize=512)
def cases_to_decide(
    pop: Population, repeats: int, level: float, line: float, upward: bool, power: float = 0.8
) -> Outcome | None:
    """The fewest cases at which a share ``power`` of simulated series decide (either way), with what they
    report there; None when no number up to a million does (the truth on the line)."""
    return _smallest(
        lambda n: simulate(pop, n, repeats, level, line, upward).decided >= power, pop, repeats, level, line, upward
    )


@functools.lru_cache(maxsize=512)
def cases_for_half_width(
    pop: Population, repeats: int, level: float, margin: float, line: float, upward: bool
) -> Outcome | None:
    """The fewest cases whose median reported half-width is within ``margin``; None past a million."""
    return _smallest(
        lambda n: simulate(pop, n, repeats, level, line, upward).half_width <= margin, pop, repeats, level, line, upward
    )


def _smallest(
    test: Callable[[int], bool], pop: Population, repeats: int, level: float, line: float, upward: bool
) -> Outcome | None:
    """The smallest ``n`` with ``test(n)``: doubling, then bisection (the same random numbers at every n)."""
    lo, hi = 0, 1
    while not test(hi):
        if hi >= MAX_CASES:
            return None
        lo, hi = hi, min(hi * 2, MAX_CASES)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if test(mid) else (mid, hi)
    return simulate(pop, hi, repeats, level, line, upward)
