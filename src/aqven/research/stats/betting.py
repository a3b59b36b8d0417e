"""Distribution-free bounds on the mean of per-case values in ``[0, 1]``, by betting.

The value of case ``i`` is its mean ``x_i`` over its counted attempts (a pass rate, or a mean score);
cases are an i.i.d. sample of the population of cases, so ``E[x_i] = μ``, the mean over cases of each
case's pass probability — whatever the distribution of the cases looks like (a few hard cases among
easy ones, scores, unequal repeats). Nothing else is assumed.

**The test.** For a candidate mean ``m`` a gambler starts with wealth 1 and bets, case after case in a
fixed order, a fraction ``c_i ∈ [0, 1)`` of the wealth that ``x_i`` lands above ``m``::

    K(m) = Π_i (1 − c_i + c_i·x_i/m)

Each factor has expectation 1 when ``μ = m`` (so ``K(m)`` is a nonnegative martingale, an e-value) and
is at least ``1 − c_i > 0``. Markov's inequality (at a fixed number of cases) or Ville's (at any number
of cases, for the anytime-valid sequence) gives ``P(K(μ) ≥ 1/α) ≤ α``, so every ``m`` with
``K(m) ≥ 1/α`` can be rejected: the lower bound is the largest ``m`` with ``K(m) ≥ 1/α``. This is the
betting confidence interval of Waudby-Smith & Ramdas (JRSS-B 2024) with the bet written as a fraction
of wealth, ``λ = c/m``: because ``c_i`` does not depend on ``m``, ``K`` falls as ``m`` rises, the set
of rejected ``m`` is an interval ``[0, L)``, and ``L`` is found by Newton's method on the concave
``log K`` as a function of ``1/m`` (monotone from below, no bracketing needed). The upper bound is the
lower bound of ``1 − x`` mirrored.

**The bets** are predictable (each from the cases before it): with the running estimates
``μ̂ = (½ + Σx)/(t + 1)`` and ``σ̂² = (¼ + Σ(x − μ̂)²)/(t + 1)`` of Waudby-Smith & Ramdas,
``λ_i = √(2·ln(1/α)/(n·σ̂²))`` for a fixed number ``n`` of cases (the "tuned for n" choice; for the
sequence, ``n`` is the series' planned number of cases, fixed before the data, which keeps every prefix
valid), and ``c_i = min(λ_i·μ̂, C_MAX)``.

**What it costs.** At the edges this is as tight as any valid bound can be: ``n`` cases that all pass
give ``L ≈ α^{1/n}`` (with ``C_MAX = 0.9``: 0.901 for 40 cases against the floor 0.912). Inside it is
about ``√(2·ln(1/α))/z ≈ 1.39`` times the width of a normal interval, the price of Markov's inequality.
So the fixed-size intervals of `aqven.research.stats.intervals` are guarded by Gaffke's narrower bound
(`aqven.research.stats.gaffke`) instead, and this module serves the confidence sequence of ``stop_early`` series
(`sequence_interval_batch`), where Ville's inequality makes the same bets valid at every look.

Rows are series, columns cases (a mask says which columns a row has), so simulations run the very
arithmetic a series runs.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "C_MAX",
    "betting_interval_batch",
    "betting_lower_batch",
    "sequence_interval_batch",
]

Floats = NDArray[np.float64]
Mask = NDArray[np.bool_]

C_MAX: Final[float] = 0.9
"""The largest fraction of wealth one case may stake: near 1 the bound reaches the all-pass floor, but a
single failing case after many passing ones would then cost almost everything."""
_ORDER_SEED: Final[int] = 20_261_201
"""Seed of the permutation that fixed-``n`` bets follow (any fixed seed: it only has to ignore the data)."""
_U_MAX: Final[float] = 1e12
"""``1/m`` beyond which the lower bound is 0."""


def betting_lower_batch(
    x: Floats, valid: Mask, alpha: float, *, sequential: bool = False, tuned_for: int | None = None
) -> Floats:
    """The one-sided lower bound at error ``alpha`` of the mean of ``x`` (rows: series; columns: cases).

    ``valid`` marks the columns a row has; its cases are bet on in column order. Fixed-``n`` bets
    (``sequential=False``) are tuned for the row's number of cases; sequential bets for ``tuned_for``
    cases (the series' planned size) and never look further than the case they bet on, so the bound of
    every prefix is valid at once (what `sequence_interval_batch` reads). A row without a case gets ``nan``.
    """
    if sequential and tuned_for is None:
        raise ValueError("sequential bets need the size they are tuned for, fixed before the data")
    x = np.where(valid, np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0), 0.0)
    c = _bets(x, valid, alpha, tuned_for if sequential else None)
    return _solve(x, c, alpha, np.asarray(valid.any(axis=1), dtype=np.bool_))


def betting_interval_batch(x: Floats, valid: Mask, alpha: float) -> tuple[Floats, Floats]:
    """Two-sided fixed-``n`` interval at level ``1 − alpha`` (``alpha/2`` on each side).

    The bets run in a random order of the cases, not in the order given: a file that lists its hard
    cases last would otherwise be bet on after the easy ones and give a bound far too low (or, listed
    first, too high). The cases are put through a permutation drawn from a fixed seed (`_shuffled`), so
    the interval is the same on every machine, ignores cases without data, and mirrors exactly when
    passes and fails swap.
    """
    x, valid = _shuffled(np.asarray(x, dtype=np.float64), np.asarray(valid, dtype=np.bool_))
    low = betting_lower_batch(x, valid, alpha / 2)
    high = 1.0 - betting_lower_batch(1.0 - x, valid, alpha / 2)
    return low, high


def _shuffled(x: Floats, valid: Mask) -> tuple[Floats, Mask]:
    """Each row's cases in a fixed pseudo-random order of their positions among the row's cases.

    The cases a row has are moved to the front in their given order; the first ``v`` of them are then
    ordered by the first ``v`` of one seeded vector of keys, so a row's order depends only on how many
    cases it has and in which order they came — not on their values, and not on the columns it lacks.
    """
    cols = x.shape[1]
    front = np.argsort(~valid, axis=1, kind="stable")
    xs = np.take_along_axis(np.where(valid, x, 0.0), front, axis=1)
    count = valid.sum(axis=1, keepdims=True)
    keys = np.asarray(np.random.default_rng(_ORDER_SEED).random(cols), dtype=np.float64)
    position = np.arange(cols)[None, :]
    order = np.argsort(np.where(position < count, keys[None, :], np.inf), axis=1, kind="stable")
    return np.take_along_axis(xs, order, axis=1), position < count


def sequence_interval_batch(
    x: Floats, valid: Mask, alpha: float, looks: NDArray[np.int64], tuned_for: int | None = None
) -> tuple[Floats, Floats]:
    """The anytime-valid confidence sequence read at the given prefix lengths, with running intersection.

    ``looks`` (shape (series, k), nondecreasing along a row) are the numbers of leading valid cases seen
    at each look; the result (shape (series, k)) is ``max`` of the lower and ``min`` of the upper bounds
    of all looks so far. Valid at every look at once (Ville's inequality), so a series may stop at the
    first look that decides. The bets are tuned for ``tuned_for`` cases (default: the number of columns,
    the planned size): any size fixed before the data keeps the sequence valid, and the planned one makes
    it tightest near the end, where a series that does not stop early decides.
    """
    size = tuned_for if tuned_for is not None else x.shape[1]
    x = np.asarray(x, dtype=np.float64)
    rank = np.cumsum(valid, axis=1)
    looks = np.asarray(looks, dtype=np.int64)
    lows = np.empty(looks.shape, dtype=np.float64)
    highs = np.empty(looks.shape, dtype=np.float64)
    for j in range(looks.shape[1]):
        seen = valid & (rank <= looks[:, j : j + 1])
        lows[:, j] = betting_lower_batch(x, seen, alpha / 2, sequential=True, tuned_for=size)
        highs[:, j] = 1.0 - betting_lower_batch(1.0 - x, seen, alpha / 2, sequential=True, tuned_for=size)
    lows = np.where(np.isnan(lows), 0.0, lows)
    highs = np.where(np.isnan(highs), 1.0, highs)
    return np.maximum.accumulate(lows, axis=1), np.minimum.accumulate(highs, axis=1)


def _bets(x: Floats, valid: Mask, alpha: float, tuned_for: int | None) -> Floats:
    """The predictable fractions ``c_i`` (0 on columns a row does not have): tuned for the row's own number
    of cases, or for ``tuned_for`` cases fixed in advance (a sequence)."""
    rows = x.shape[0]
    seen = np.cumsum(valid, axis=1).astype(np.float64)  # cases up to and including i
    mean_after = (0.5 + np.cumsum(x, axis=1)) / (seen + 1)
    mean_before = np.concatenate([np.full((rows, 1), 0.5), mean_after[:, :-1]], axis=1)
    spread = np.where(valid, (x - mean_before) ** 2, 0.0)
    var_after = (0.25 + np.cumsum(spread, axis=1)) / (seen + 1)
    var_before = np.concatenate([np.full((rows, 1), 0.25), var_after[:, :-1]], axis=1)
    log_alpha = math.log(1 / alpha)
    if tuned_for is not None:
        n = np.full((rows, 1), float(max(tuned_for, 1)))
    else:
        n = np.maximum(valid.sum(axis=1, keepdims=True), 1).astype(np.float64)
    lam = np.sqrt(2 * log_alpha / (n * var_before))
    out: Floats = np.where(valid, np.minimum(lam * mean_before, C_MAX), 0.0)
    return out


def _solve(x: Floats, c: Floats, alpha: float, has_data: NDArray[np.bool_]) -> Floats:
    """The largest ``m`` with ``log K(m) ≥ ln(1/α)``, by Newton's method on ``u = 1/m``.

    ``W(u) = Σ ln(1 − c + c·x·u)`` is concave and nondecreasing, and ``W(1) ≤ 0 < ln(1/α)``, so Newton
    steps from ``u = 1`` rise monotonically to the root without passing it.
    """
    target = math.log(1 / alpha)
    u = np.ones(x.shape[0])
    slope_free = (c * x).sum(axis=1) <= 0  # no case above 0 that carries a bet: never rejects
    active = ~slope_free & has_data
    for _ in range(100):
        if not active.any():
            break
        xa, ca, ua = x[active], c[active], u[active]
        factor = 1 - ca + ca * xa * ua[:, None]
        w = np.log(factor).sum(axis=1)
        slope = (ca * xa / factor).sum(axis=1)
        step = np.maximum((target - w) / slope, 0.0)
        new = np.minimum(ua + step, _U_MAX)
        done = (step <= 1e-12 * new) | (new >= _U_MAX)
        u[active] = new
        idx = np.flatnonzero(active)
        active[idx[done]] = False
    low = np.where(u >= _U_MAX, 0.0, 1.0 / u)
    low = np.where(slope_free, 0.0, low)
    out: Floats = np.where(has_data, low, np.nan)
    return out
