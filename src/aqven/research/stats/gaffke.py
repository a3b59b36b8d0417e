"""Gaffke's distribution-free bound on the mean of per-case values in ``[0, 1]`` (fixed number of cases).

The value of case ``i`` is its mean ``x_i`` over its counted attempts (a pass rate, or a mean score); the
cases are an i.i.d. sample of the population of cases, so ``E[x_i] = μ`` whatever the population looks
like. **The bound.** Add the far end point ``e`` (0 for a lower bound) to the ``n`` values and weigh the
``n + 1`` points with flat Dirichlet weights ``D ~ Dirichlet(1, …, 1)``; the lower bound at error ``α``
is the ``α``-quantile of ``M = D_0·e + Σ D_i·x_i`` (Gaffke 2005; Learned-Miller & Thomas 2019, who
write it on the sorted sample — the flat Dirichlet is exchangeable, so the order does not matter). The
upper bound is the lower bound of ``1 − x`` mirrored.

**Why it should hold.** A sample is ``F⁻¹`` at uniform points, and with ``U_(1) ≤ … ≤ U_(n)`` uniform
order statistics the mean ``μ = ∫ F⁻¹`` is at least the left Riemann sum ``Σ F⁻¹(U_(j))·(U_(j+1) − U_(j))``,
whose spacings are flat Dirichlet weights: the bound compares the sample with that sum. That
``P(μ < L) ≤ α`` holds for *every* distribution on ``[0, 1]``, every ``n`` and every ``α`` is **Gaffke's
conjecture** (proposed by Gaffke 2005, stated as a conjecture by Learned-Miller & Thomas 2019): no proof
is accepted yet, and no counterexample is known; `bench/stats/stats_grid.py` checks it on two-point worlds, the
extreme populations of a bounded mean, besides the families. On smooth populations it is about as wide as
Student's t. The betting bound of `aqven.research.stats.betting` is proven but about 1.4 times as wide
(Markov's inequality); `docs/statistical-validity.md` says what each costs and why the fixed-size
interval uses this one.

**Computation.** ``P(M ≤ L) = P(Σ_j a_j·E_j ≤ 0)`` with ``E_j`` i.i.d. exponential and ``a_j = x_j − L``
(``a_0 = e − L``): the distribution of a weighted sum of exponentials, whose cumulant generating function
``K(s) = −Σ log(1 − s·a_j)`` is known exactly. Its tail is computed by the Lugannani–Rice saddlepoint
formula (a relative error of a few parts in a thousand at these tails: all ``n`` cases passing give
``0.9117`` for 40 cases against the exact ``0.025^{1/40} = 0.9119``), and ``L`` by a safeguarded secant
search. Deterministic (no Monte Carlo), and equal values are merged first, so pass/fail cases with ``r``
repeats cost ``r + 1`` terms however many cases there are.

Rows are series, columns cases (a mask says which columns a row has), as in `aqven.research.stats.betting`.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import scipy.special
from numpy.typing import NDArray

__all__ = ["gaffke_interval_batch", "gaffke_lower_batch", "gaffke_lower_counts"]

Floats = NDArray[np.float64]
Mask = NDArray[np.bool_]

_SQRT_2PI: Final[float] = math.sqrt(2 * math.pi)
_OUTER: Final[int] = 60
"""Secant steps on the bound at most (each with a bisection fallback; 10–20 are usual)."""
_INNER: Final[int] = 60
"""Newton steps on the saddlepoint at most (warm-started from the previous bound's)."""
_TOL: Final[float] = 1e-10


def gaffke_interval_batch(x: Floats, valid: Mask, alpha: float) -> tuple[Floats, Floats]:
    """Two-sided interval at level ``1 − alpha`` (``alpha/2`` on each side) of the mean of each row's ``x``."""
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    valid = np.asarray(valid, dtype=np.bool_)
    low = gaffke_lower_batch(x, valid, alpha / 2)
    high = 1.0 - gaffke_lower_batch(1.0 - x, valid, alpha / 2)
    return low, high


def gaffke_lower_batch(x: Floats, valid: Mask, alpha: float | Floats) -> Floats:
    """The lower bound at error ``alpha`` of the mean of ``x ∈ [0, 1]`` (rows: series; columns: cases).

    ``alpha`` is one error for every row or one per row (a confidence sequence spends a different share of
    its error at each look). ``nan`` for a row without a case; 0 for a row whose cases are all 0.
    """
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    valid = np.asarray(valid, dtype=np.bool_)
    has_data = valid.any(axis=1)
    values, counts = _merged(x, valid)
    top = np.where(counts > 0, values, 0.0).max(axis=1)
    out = np.zeros(x.shape[0])
    solve = has_data & (top > 0)
    if solve.any():
        out[solve] = _solve(values[solve], counts[solve], _per_row(alpha, x.shape[0])[solve])
    result: Floats = np.where(has_data, out, np.nan)
    return result


def _per_row(alpha: float | Floats, rows: int) -> Floats:
    out: Floats = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (rows,)).copy()
    if not np.all((out > 0) & (out < 1)):
        raise ValueError("every error must lie in (0, 1)")
    return out


def _merged(x: Floats, valid: Mask) -> tuple[Floats, Floats]:
    """Each row's distinct values and how often each occurs (padded with count 0)."""
    rows = x.shape[0]
    xs = np.sort(np.where(valid, x, np.inf), axis=1)
    present = np.isfinite(xs)
    starts = present.copy()
    starts[:, 1:] &= xs[:, 1:] != xs[:, :-1]
    run = np.cumsum(starts, axis=1) - 1
    width = max(int(starts.sum(axis=1).max(initial=0)), 1)
    slot = (np.arange(rows)[:, None] * width + run)[present]
    counts = np.bincount(slot, minlength=rows * width).reshape(rows, width).astype(np.float64)
    values = np.zeros(rows * width)
    values[slot] = xs[present]
    return values.reshape(rows, width), counts


def _solve(values: Floats, counts: Floats, alpha: Floats) -> Floats:
    """The ``L`` with ``P(M ≤ L) = α``, by a secant search on ``Φ⁻¹(P(M ≤ L))`` bracketed in ``(0, max x)``.

    ``P(M ≤ L)`` rises from 0 (just above 0, when some case is above 0) to 1 (at the largest value).
    """
    n = _rowsum(counts)
    mean = _rowsum(values * counts) / (n + 1)
    spread = np.sqrt((_rowsum(counts * (values - mean[:, None]) ** 2) + mean**2) / ((n + 1) * (n + 2)))
    spread = np.maximum(spread, 1e-12)
    target = np.asarray(scipy.special.ndtri(alpha), dtype=np.float64)
    lo = np.zeros(len(n))
    hi = np.where(counts > 0, values, 0.0).max(axis=1)
    bound = np.clip(mean + target * spread, lo + 1e-9 * hi, hi * (1 - 1e-9))
    s = np.zeros(len(n))
    prev_bound: Floats | None = None
    prev_gap: Floats | None = None
    active = np.ones(len(n), dtype=np.bool_)
    for _ in range(_OUTER):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        cdf, s[idx] = _tail(values[idx], counts[idx], bound[idx], s[idx])
        gap = scipy.special.ndtri(np.clip(cdf, 1e-300, 1 - 1e-16)) - target[idx]  # rises with the bound
        b = bound[idx]
        lo[idx] = np.where(gap < 0, b, lo[idx])
        hi[idx] = np.where(gap >= 0, b, hi[idx])
        if prev_bound is None or prev_gap is None:
            slope = 1.0 / spread[idx]  # Φ⁻¹ of a normal's CDF rises by 1/sd
        else:
            pb, pg = prev_bound[idx], prev_gap[idx]
            with np.errstate(divide="ignore", invalid="ignore"):
                slope = np.where(np.abs(b - pb) > 0, (gap - pg) / (b - pb), 1.0 / spread[idx])
            slope = np.where(np.isfinite(slope) & (slope > 0), slope, 1.0 / spread[idx])
        new = b - gap / slope
        inside = (new > lo[idx]) & (new < hi[idx])
        new = np.where(inside, new, 0.5 * (lo[idx] + hi[idx]))
        prev_bound = bound.copy()
        prev_gap = np.zeros(len(n)) if prev_gap is None else prev_gap.copy()
        prev_gap[idx] = gap
        bound[idx] = new
        done = (np.abs(new - b) <= _TOL) | (hi[idx] - lo[idx] <= _TOL)
        active[idx[done]] = False
    out: Floats = bound
    return out


def _tail(values: Floats, counts: Floats, bound: Floats, s0: Floats) -> tuple[Floats, Floats]:
    """``P(Σ a_j·E_j ≤ 0)`` (``a = x − L``, plus ``a_0 = −L``) by Lugannani–Rice, and the saddlepoint.

    The saddlepoint ``ŝ`` solves ``K'(ŝ) = Σ a_j/(1 − ŝ·a_j) = 0`` on ``(1/min a, 1/max a)``, where
    ``K'`` rises from −∞ to +∞: Newton's method kept inside a shrinking bracket.
    """
    used = counts > 0
    # A value no case has (count 0, padding or a grid's unused value) is moved to the end point: with a large
    # value there, ``1 − s·a`` could turn negative and its ``0·log`` poison the row.
    a = np.where(used, values - bound[:, None], -bound[:, None])
    a0 = -bound
    a_min = np.minimum(np.where(used, a, np.inf).min(axis=1), a0)  # a0 < 0: always negative
    a_max = np.where(used, a, -np.inf).max(axis=1)  # positive while the bound is below the largest value
    lo = 1.0 / a_min
    hi = np.where(a_max > 0, 1.0 / a_max, 1e300)
    s = np.where((s0 > lo) & (s0 < hi), s0, 0.0)
    going = np.ones(len(s), dtype=np.bool_)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for _ in range(_INNER):
            i = np.flatnonzero(going)
            if i.size == 0:
                break
            ai, ci, si, a0i = a[i], counts[i], s[i], a0[i]
            d = 1 - si[:, None] * ai
            d0 = 1 - si * a0i
            k1 = _rowsum(ci * ai / d) + a0i / d0
            k2 = _rowsum(ci * ai * ai / (d * d)) + a0i * a0i / (d0 * d0)
            hi[i] = np.where(k1 > 0, si, hi[i])
            lo[i] = np.where(k1 <= 0, si, lo[i])
            new = si - k1 / k2
            fallback = 0.5 * (lo[i] + np.minimum(hi[i], 1e6 * np.abs(lo[i]) + 1.0))
            new = np.where((new > lo[i]) & (new < hi[i]), new, fallback)
            s[i] = new
            going[i[np.abs(new - si) <= 1e-14 * (1 + np.abs(new))]] = False
        d = 1 - s[:, None] * a
        d0 = 1 - s * a0
        cgf = -_rowsum(counts * np.log(d)) - np.log(d0)
        k2 = _rowsum(counts * a * a / (d * d)) + a0 * a0 / (d0 * d0)
        w = np.sign(s) * np.sqrt(np.maximum(-2 * cgf, 0.0))
        u = s * np.sqrt(k2)
        near_mean = np.abs(w) < 1e-6  # the formula's two terms cancel there; the CDF is about ½
        cdf = scipy.special.ndtr(w) + np.exp(-w * w / 2) / _SQRT_2PI * (1 / w - 1 / u)
    cdf = np.where(near_mean | ~np.isfinite(cdf), scipy.special.ndtr(w), cdf)
    out: Floats = np.clip(cdf, 0.0, 1.0)
    return out, s


def _rowsum(a: Floats) -> Floats:
    """Row sums added left to right: the zero padding of `_merged` then changes no rounding, so a series
    gets the same bound alone as in any batch (the scalar functions are the batch path, bit for bit)."""
    out: Floats = np.cumsum(a, axis=1)[:, -1]
    return out


def gaffke_lower_counts(values: Floats, counts: Floats, alpha: float | Floats) -> Floats:
    """`gaffke_lower_batch` on rows given in merged form: distinct ``values`` in ``[0, 1]`` and how often
    each occurs (``counts``, 0 for padding). The cost does not grow with the number of cases, which lets
    the launch plan simulate series of any size (`aqven.research.stats.plan_sim`)."""
    values = np.clip(np.asarray(values, dtype=np.float64), 0.0, 1.0)
    counts = np.asarray(counts, dtype=np.float64)
    has_data = counts.sum(axis=1) > 0
    top = np.where(counts > 0, values, 0.0).max(axis=1)
    out = np.zeros(values.shape[0])
    solve = has_data & (top > 0)
    if solve.any():
        out[solve] = _solve(values[solve], counts[solve], _per_row(alpha, values.shape[0])[solve])
    result: Floats = np.where(has_data, out, np.nan)
    return result
