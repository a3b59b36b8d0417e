"""Planning arithmetic of a launch plan (DESIGN §7 "Launch plan"): how wide an interval a series of
``cases × repeats`` should expect, and how many cases would bring it within the margin.

Before a series runs, nothing is known about the rate or how much cases differ, so the plan assumes:

* a **planning rate** ``p0``: the question's bound clamped to ``[0.05, 0.95]`` (`planning_rate`). A
  ``compare`` or ``noninferior`` question has no bound, so it plans with ``p0 = 0.5``, the rate with
  the largest variance — the cautious choice. A caller with dev-series estimates may pass those instead.
* an **intra-case correlation** ``ρ = 0.3`` (`RHO`): how much of the variation is between cases rather
  than between repeats of one case. Repeats of a case count as ``1 + (r−1)ρ`` times one attempt's
  information — the *design effect* — so with ρ = 0.3, 2 repeats are worth 1.54 independent attempts,
  and no number of repeats is worth more than ``1/ρ ≈ 3.3`` fresh cases.

The one-rate half-width is the Wald half-width with that design effect:
``h = z·√(p0(1−p0)(1+(r−1)ρ)/(n·r))``, and the cases for ``h ≤ m`` are
``ceil(z²·p0(1−p0)(1+(r−1)ρ)/(r·m²))``: bound 0.97 (``p0 = 0.95``), 2 cases × 2 repeats →
``h = 0.24352108850049436``; margin 0.01 → 1187 cases (the spec's example). **Since issue 28 the launch plan
no longer prints these normal approximations**: its half-width and its one number of cases are computed with
the interval the series reports, by simulation (`aqven.research.stats.plan_sim`), because near 0 and 1 that
interval is wider than Wald's and a Wald plan promised power a series did not have. The formulas stay for the
zero-failure floor, the best half-width with repeats and the benches.

**Paired questions** (compare, noninferior). The difference ``B − A`` of two rates measured on the same
cases has variance ``Var(B) + Var(A) − 2·Cov(A, B)``. With both sides planned at the same rate and a
correlation ``ρ_between`` of their per-case means, that is ``2(1 − ρ_between)`` times one side's
variance, so the planned half-width of the difference is ``√(2(1 − ρ_between))`` times the one-rate
half-width. We plan with ``ρ_between = 0.5`` (`RHO_BETWEEN`): variants of one flow on the same cases
tend to find the same cases hard; at 0.5 the factor is exactly 1. (Unpaired, ρ_between = 0, it would be
√2; the pairing is what buys the difference its precision.)
"""

from __future__ import annotations

import math
from typing import Final

import scipy.stats

from aqven.research.stats.intervals import Z95
from aqven.research.stats.verdict import ALPHA

__all__ = [
    "MAX_REPEATS",
    "PLANNING_RATE_NO_BOUND",
    "RHO",
    "RHO_BETWEEN",
    "best_half_width_with_repeats",
    "cases_for_power",
    "design_effect",
    "expected_half_width",
    "expected_half_width_difference",
    "planning_rate",
    "recommended_cases",
    "recommended_cases_difference",
    "z_for",
    "zero_failure_cases",
    "zero_failure_floor",
]

RHO: Final[float] = 0.3
"""Planning intra-case correlation, unless dev series of the same experiment give an estimate."""
RHO_BETWEEN: Final[float] = 0.5
"""Planning correlation of two variants' per-case means on the same cases (paired questions)."""
PLANNING_RATE_NO_BOUND: Final[float] = 0.5
"""Planning rate of a question without a bound (compare, noninferior): the worst case."""
MAX_REPEATS: Final[int] = 20
"""The most repeats a series may ask for (the spec's limit)."""


def planning_rate(bound: float | None) -> float:
    """``p0`` of a plan: the bound clamped to ``[0.05, 0.95]``; 0.5 when the question has no bound."""
    if bound is None:
        return PLANNING_RATE_NO_BOUND
    return min(max(bound, 0.05), 0.95)


def design_effect(repeats: int, rho: float = RHO) -> float:
    """``1 + (r−1)ρ``: how many independent attempts' worth of variance ``r`` repeats of one case carry."""
    return 1 + (repeats - 1) * rho


def z_for(comparisons: int = 1) -> float:
    """The two-sided normal quantile of the level the verdict decides at: ``1 − 0.05/k`` for ``k``
    comparisons (Bonferroni), so 1.96 for one and 2.24 for two (97.5%)."""
    if comparisons < 1:
        raise ValueError("a plan needs at least one comparison")
    if comparisons == 1:
        return Z95  # exactly the constant the spec's example is computed with
    return float(scipy.stats.norm.ppf(1 - ALPHA / (2 * comparisons)))


def expected_half_width(p0: float, cases: int, repeats: int, rho: float = RHO, z: float = Z95) -> float:
    """Planned half-width of a one-rate interval: ``z·√(p0(1−p0)(1+(r−1)ρ)/(n·r))``."""
    _check(p0, cases, repeats, rho)
    return z * math.sqrt(p0 * (1 - p0) * (1 + (repeats - 1) * rho) / (cases * repeats))


def recommended_cases(p0: float, repeats: int, margin: float, rho: float = RHO, z: float = Z95) -> int:
    """Cases for a planned one-rate half-width within the margin: ``ceil(z²·p0(1−p0)(1+(r−1)ρ)/(r·m²))``."""
    _check(p0, 1, repeats, rho)
    if margin <= 0:
        raise ValueError("a margin of 0 needs infinitely many cases; plan with a margin above 0")
    return math.ceil(z**2 * p0 * (1 - p0) * (1 + (repeats - 1) * rho) / (repeats * margin**2))


def expected_half_width_difference(
    p0: float, cases: int, repeats: int, rho: float = RHO, rho_between: float = RHO_BETWEEN, z: float = Z95
) -> float:
    """Planned half-width of a paired difference: ``√(2(1−ρ_between))`` × `expected_half_width`."""
    return math.sqrt(2 * (1 - rho_between)) * expected_half_width(p0, cases, repeats, rho, z)


def recommended_cases_difference(
    p0: float, repeats: int, margin: float, rho: float = RHO, rho_between: float = RHO_BETWEEN, z: float = Z95
) -> int:
    """Cases for a planned paired-difference half-width within the margin."""
    _check(p0, 1, repeats, rho)
    if margin <= 0:
        raise ValueError("a margin of 0 needs infinitely many cases; plan with a margin above 0")
    factor = 2 * (1 - rho_between)
    return math.ceil(factor * z**2 * p0 * (1 - p0) * (1 + (repeats - 1) * rho) / (repeats * margin**2))


def cases_for_power(
    p0: float,
    repeats: int,
    distance: float,
    power: float = 0.8,
    rho: float = RHO,
    paired: bool = False,
    rho_between: float = RHO_BETWEEN,
    z: float = Z95,
) -> int:
    """Cases for a series to decide with probability ``power`` when the truth lies ``distance`` away
    from the decision line (``b ± m`` for a threshold, ``±m`` for a paired question).

    ``ceil((z + z_power)²·p0(1−p0)(1+(r−1)ρ)/(r·distance²))``, times ``2(1−ρ_between)`` when paired;
    ``z`` is the verdict's quantile (`z_for`).
    """
    _check(p0, 1, repeats, rho)
    if distance <= 0:
        raise ValueError("distance must be above 0")
    if not 0 < power < 1:
        raise ValueError("power must be between 0 and 1")
    z_power = float(scipy.stats.norm.ppf(power))
    factor = 2 * (1 - rho_between) if paired else 1.0
    need = factor * (z + z_power) ** 2 * p0 * (1 - p0) * (1 + (repeats - 1) * rho) / (repeats * distance**2)
    return math.ceil(need)


def zero_failure_floor(bound: float) -> float:
    """``ln(0.025)/ln(b)``: independent attempts that must all pass before a 95% interval's lower end
    can clear ``b`` (121.1 for b = 0.97). With correlated repeats it counts cases, not attempts; round up."""
    if not 0 < bound < 1:
        raise ValueError("bound must be between 0 and 1")
    return math.log(0.025) / math.log(bound)


def zero_failure_cases(line: float, tail: float = ALPHA / 2) -> int | None:
    """The fewest cases that, all passing, let a lower bound rise above ``line``: the smallest ``n``
    with ``tail^(1/n) > line`` (183 for 0.98). No interval valid for every population of case means
    puts its lower end above ``0.025^(1/n)`` on ``n`` cases, so below this many cases a series cannot
    confirm "at least ``line``" whatever it observes. None when ``line ≥ 1`` (no number of cases can);
    1 when ``line < tail``."""
    if line >= 1:
        return None
    if line < tail:
        return 1
    return math.floor(math.log(tail) / math.log(line)) + 1


def best_half_width_with_repeats(p0: float, cases: int, rho: float = RHO) -> float:
    """The narrowest planned half-width more repeats can give ``cases`` cases: `expected_half_width` at
    the repeat limit (20). Beyond it, only more cases help; as repeats grow without end it tends to
    ``z·√(p0(1−p0)ρ/n)``."""
    return expected_half_width(p0, cases, MAX_REPEATS, rho)


def _check(p0: float, cases: int, repeats: int, rho: float) -> None:
    if not 0 <= p0 <= 1:
        raise ValueError(f"planning rate must be in [0, 1], not {p0}")
    if cases < 1:
        raise ValueError("a plan needs at least one case")
    if repeats < 1:
        raise ValueError("a plan needs at least one repeat")
    if not 0 <= rho <= 1:
        raise ValueError(f"rho must be in [0, 1], not {rho}")
