"""Intervals a series decides on (DESIGN §7): one rate, and the paired difference of two rates.

Data comes per case: ``(y_i, r_i)`` where ``r_i`` is the number of counted attempts of case ``i`` and
``y_i`` their passes. ``y_i`` may be a fractional sum of scores in ``[0, 1]`` (a judge on a score scale);
it must lie in ``[0, r_i]``. Cases with ``r_i == 0`` (no counted attempt, e.g. only infrastructure
errors) are left out. ``n`` is the number of cases that remain and ``N = Σ r_i`` the counted attempts.

Attempts of one case are not independent: a case that is hard stays hard on every repeat. Treating
the ``N`` attempts as ``N`` independent draws (`naive_wilson`) gives intervals far too narrow when the
cases differ. The intervals a verdict stands on work on the per-case means ``x_i = y_i/r_i`` instead, with
Gaffke's distribution-free bound (`aqven.research.stats.gaffke`): `one_rate` on the ``x_i``,
`paired_difference` on the per-case differences ``x_Bi − x_Ai``; each is widened, when needed, to hold
the reported estimate (``Σy/N``, or ``p̂_B − p̂_A``).

**Monotone by construction** (issue 28). Gaffke's bound is a quantile of ``Σ D_i·x_i`` with weights ``D``
that do not depend on the data, so lowering any ``x_i`` lowers it, and so does lowering the estimate: a
pass that becomes a failure, or a score that goes down, never raises a bound (of B − A: a worse A never
lowers one). With one pass-or-fail attempt per case the bound is Clopper–Pearson's (a flat Dirichlet sum
of ``k`` of ``n + 1`` weights is ``Beta(k, n + 1 − k)``); the saddlepoint formula computes it at most
0.0025 wider and 0.000005 narrower (n ≤ 2,000, one side at 0.025).

Until issue 28 the interval was the union of Gaffke's and a narrower-looking member that read the spread
between cases from the data: `penalised_beta_batch` (one rate) and `square_and_add_batch` (paired). The
union was never narrower than Gaffke's alone (it took the smaller low and the larger high), and that
member is not monotone: its t penalty on ``k − 1`` degrees of freedom (``k`` the cases with a failure)
falls from 12.7 to 4.3 as a third case fails, so one more failure could raise the union's lower bound.
Both functions stay, as documented approximations the benches compare with; no verdict uses them.

The penalised member (`penalised_beta_batch`): an exact (Clopper–Pearson style) beta interval on a
*penalised effective sample size* (Korn–Graubard):

1. ``p̂ = Σy/N``; residuals ``e_i = y_i − r_i·p̂``; clustered variance ``V = n/(n−1)·Σe_i²/N²``;
   ``n_eff = p̂(1−p̂)/V``.
2. ``k`` = the number of cases with at least one fail, or with at least one pass, whichever is
   smaller. If ``k ≥ 2``: ``n*_low = n_eff·(z/(t_{k−1} + δ))²`` and ``n*_high = n_eff·(z/(t_{k−1} − δ))²``,
   else both are ``n``. Clip them to ``[n, N]``.
3. ``x = p̂·n*``; low ``Beta⁻¹(α/2; x, n*−x+1)`` with ``n*_low``, high ``Beta⁻¹(1−α/2; x+1, n*−x)`` with
   ``n*_high``; 0 or 1 at the edges.

``δ`` is a skewness correction (Hall 1992, Johnson 1978, on the per-case residuals), ``δ = (2z²+1)/6·(g − γ)``
with ``γ = Σe_i³/(Σe_i²)^{3/2}`` and ``g = (1−2p̂)·√V/(p̂(1−p̂))``, kept within ``±t/2``.

`square_and_add_batch` combines the penalised intervals of two variants with Newcombe's square-and-add,
corrected for the correlation of the per-case means (a positive one shrunk by ``n/(n+2)``), and moves the
side toward the long tail of the per-case differences outward with a weight ``k/(k+25)`` in the ``k``
discordant cases.

Every estimator has a vectorised ``*_batch`` form (rows are series, columns are cases) that the
scalar form calls with one row, so simulations (coverage tests, benches) run the very same arithmetic.

No data: the scalar functions raise `NoData` (a `ValueError`); the batch forms return ``nan`` for
such rows. A caller turns no data into the verdict ``invalid`` (reason ``no_data``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import scipy.special
import scipy.stats
from numpy.typing import NDArray

from aqven.research.stats.gaffke import gaffke_interval_batch

__all__ = [
    "Z95",
    "Interval",
    "NoData",
    "clustered_wald",
    "clustered_wald_batch",
    "naive_wilson",
    "naive_wilson_batch",
    "one_rate",
    "one_rate_batch",
    "paired_difference",
    "paired_difference_batch",
    "penalised_beta",
    "penalised_beta_batch",
    "square_and_add",
    "square_and_add_batch",
    "z_for",
]

Z95: Final[float] = float(scipy.stats.norm.ppf(0.975))
"""The two-sided 95% normal quantile, 1.959963984540054."""

Floats = NDArray[np.float64]
Cells = Sequence[tuple[float, int]]
"""Per case: (passes — possibly a fractional sum of scores —, counted attempts)."""


class NoData(ValueError):
    """No case has a counted attempt: there is nothing to put an interval on."""


@dataclass(frozen=True)
class Interval:
    """An estimate with its two-sided interval at the level it was computed with."""

    estimate: float
    low: float
    high: float
    n_cases: int
    n_attempts: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def z_for(level: float) -> float:
    """The two-sided normal quantile of a confidence level (1.96 for 0.95)."""
    _check_level(level)
    if level == 0.95:
        return Z95
    return float(scipy.stats.norm.ppf(1 - (1 - level) / 2))


# ---- one rate ---------------------------------------------------------------------------------------


def one_rate(cells: Cells, level: float = 0.95) -> Interval:
    """The rate of passes with its interval (Gaffke's bound on the per-case means: `one_rate_batch`).

    Raises `NoData` when no case has a counted attempt, `ValueError` on passes outside ``[0, r_i]``.
    """
    return _single(one_rate_batch, cells, level)


def one_rate_batch(y: Floats, r: Floats, level: float = 0.95) -> tuple[Floats, Floats, Floats]:
    """`one_rate` over many series at once: ``y``, ``r`` of shape (series, cases).

    Returns ``(estimate, low, high)``, each of shape (series,); ``nan`` where a row has no data.
    Columns with ``r == 0`` are ignored, so rows may have different numbers of cases.

    The interval is Gaffke's distribution-free interval on the per-case means ``y_i/r_i``
    (`aqven.research.stats.gaffke`), widened when needed to hold the estimate ``Σy/N`` (which weighs cases
    by their attempts and so can differ from the mean of the per-case means when repeats are unequal).
    Both bounds are non-decreasing in every ``y_i`` **by construction**: Gaffke's bound is a quantile of a
    weighted mean of the per-case means with weights that do not depend on them, and ``Σy/N`` rises with
    every ``y_i``. So a pass that becomes a failure, or a score that goes down, never raises a bound.
    With one pass-or-fail attempt per case it is Clopper–Pearson's interval (a flat Dirichlet sum of ``k``
    of ``n + 1`` weights is ``Beta(k, n + 1 − k)``), computed by the same saddlepoint formula.

    The penalised beta interval (`penalised_beta_batch`) no longer enters: it was the narrow member of a
    union with Gaffke's (so the union was never narrower than Gaffke's alone), and it is not monotone (its
    t penalty falls as the failing cases grow from 2 to 3): issue 28.
    """
    _check_level(level)
    y = np.asarray(y, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    valid = r > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(valid, y, 0.0).sum(axis=1) / r.sum(axis=1)
    low, high = _case_mean_guard(y, r, 1 - level)
    return p, np.fmin(low, p), np.fmax(high, p)


def _case_mean_guard(y: Floats, r: Floats, alpha: float) -> tuple[Floats, Floats]:
    """Gaffke's interval of the mean of per-case means ``y_i/r_i`` over the cases with ``r_i > 0``."""
    valid = r > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(valid, y / np.where(valid, r, 1.0), 0.0)
    return gaffke_interval_batch(x, valid, alpha)


def penalised_beta_batch(y: Floats, r: Floats, level: float = 0.95) -> tuple[Floats, Floats, Floats]:
    """The penalised-effective-sample-size beta interval (the module docs, steps 1–3). No verdict uses it.

    Narrow and close to nominal on smooth populations, but it can lie above the truth when a few hard
    cases hide among easy ones with scattered failures, and it is not monotone in the passes.
    """
    alpha = 1 - level
    z = z_for(level)
    y = np.asarray(y, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    valid = r > 0
    n = valid.sum(axis=1).astype(np.float64)
    big_n = r.sum(axis=1)
    big_y = np.where(valid, y, 0.0).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = big_y / big_n
        resid = np.where(valid, y - r * p[:, None], 0.0)
        squares = (resid**2).sum(axis=1)
        v = np.where(n > 1, n / (n - 1), np.nan) * squares / big_n**2
        n_eff = np.where(v > 0, p * (1 - p) / v, np.inf)
    has_fail = (valid & (y < r)).sum(axis=1)
    has_pass = (valid & (y > 0)).sum(axis=1)
    k = np.minimum(has_fail, has_pass)
    df = np.maximum(k - 1, 1).astype(np.float64)
    t = scipy.stats.t.ppf(1 - alpha / 2, df)
    shift = np.clip(_skew_shift(p, v, resid, squares, z), -t / 2, t / 2)
    n_low = np.clip(np.where(k >= 2, n_eff * (z / (t + shift)) ** 2, n), n, big_n)
    n_high = np.clip(np.where(k >= 2, n_eff * (z / (t - shift)) ** 2, n), n, big_n)
    low, high = _beta_bounds(p, n_low, n_high, alpha)
    no_data = n == 0
    return (np.where(no_data, np.nan, p), np.where(no_data, np.nan, low), np.where(no_data, np.nan, high))


def _skew_shift(p: Floats, v: Floats, resid: Floats, squares: Floats, z: float) -> Floats:
    """``δ = (2z²+1)/6·(g − γ)``: the skewness of ``p̂`` beyond a binomial's, in units of the critical value.

    ``γ = Σe³/(Σe²)^{3/2}`` is the skewness of ``p̂`` estimated from the per-case residuals ``e``,
    ``g = (1−2p̂)·√V/(p̂(1−p̂))`` that of a binomial with ``n_eff = p̂(1−p̂)/V`` trials, which the beta
    bounds already allow for. Positive when ``p̂`` is more left-skewed than that binomial (a few cases
    fail often): the low bound then moves down and the high bound up less. 0 without spread.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        gamma = np.where(squares > 0, (resid**3).sum(axis=1) / squares**1.5, 0.0)
        g = np.where(v > 0, (1 - 2 * p) * np.sqrt(v) / (p * (1 - p)), 0.0)
    out: Floats = np.nan_to_num((2 * z * z + 1) / 6 * (g - gamma), nan=0.0, posinf=0.0, neginf=0.0)
    return out


def _beta_bounds(p: Floats, n_low: Floats, n_high: Floats, alpha: float) -> tuple[Floats, Floats]:
    """Clopper–Pearson bounds for ``x = p·n*`` successes in ``n*`` (real-valued) trials.

    The low bound uses ``n* = n_low``, the high bound ``n* = n_high``.
    """
    low = _beta_bound(p, n_low, alpha / 2, upper=False)
    high = _beta_bound(p, n_high, 1 - alpha / 2, upper=True)
    return low, high


def _beta_bound(p: Floats, n_star: Floats, q: float, *, upper: bool) -> Floats:
    """One Clopper–Pearson bound at probability ``q``: 0 (low) or 1 (high) at the edge."""
    ok = np.isfinite(p) & np.isfinite(n_star) & (n_star > 0)
    p = np.where(ok, p, 0.5)
    n_star = np.where(ok, n_star, 1.0)
    x = p * n_star
    rest = n_star - x
    # Placeholders keep the beta parameters positive where the edge rule applies instead.
    if upper:
        edge = rest <= 0
        bound = scipy.special.betaincinv(np.where(edge, 1.0, x + 1), np.where(edge, 1.0, rest), q)
    else:
        edge = x <= 0
        bound = scipy.special.betaincinv(np.where(edge, 1.0, x), np.where(edge, 1.0, rest + 1), q)
    bound = np.where(edge, 1.0 if upper else 0.0, bound)
    out: Floats = np.where(ok, bound, np.nan)
    return out


# ---- paired difference ------------------------------------------------------------------------------


def paired_difference(a: Cells, b: Cells, level: float = 0.95) -> Interval:
    """The difference of rates ``B − A`` on the cases both variants ran, with its interval.

    ``a`` and ``b`` are aligned per case. Only cases with counted attempts in both enter. Gaffke's
    distribution-free interval of the mean per-case difference ``m_B − m_A`` (mapped to [0, 1] as
    ``(1 + d)/2``), widened when needed to hold ``p̂_B − p̂_A``: see `paired_difference_batch`.

    ``n_cases`` counts the paired cases, ``n_attempts`` the counted attempts of both variants on them.
    Raises `NoData` when no case has counted attempts in both.
    """
    return _paired(paired_difference_batch, a, b, level)


def paired_difference_batch(
    ya: Floats, ra: Floats, yb: Floats, rb: Floats, level: float = 0.95
) -> tuple[Floats, Floats, Floats]:
    """`paired_difference` over many series at once (shape (series, cases)); ``nan`` rows without data.

    Gaffke's distribution-free interval of the mean per-case difference ``m_B − m_A`` over the cases both
    variants ran, widened when needed to hold the estimate ``p̂_B − p̂_A``. Non-decreasing in every ``y_B``
    and non-increasing in every ``y_A`` by construction (see `one_rate_batch`).
    """
    _check_level(level)
    ya, ra, yb, rb = (np.asarray(x, dtype=np.float64) for x in (ya, ra, yb, rb))
    both = (ra > 0) & (rb > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        pa = np.where(both, ya, 0.0).sum(axis=1) / np.where(both, ra, 0.0).sum(axis=1)
        pb = np.where(both, yb, 0.0).sum(axis=1) / np.where(both, rb, 0.0).sum(axis=1)
    d = pb - pa
    low, high = _difference_guard(ya, ra, yb, rb, both, 1 - level)
    return d, np.fmin(low, d), np.fmax(high, d)


def square_and_add_batch(
    ya: Floats, ra: Floats, yb: Floats, rb: Floats, level: float = 0.95
) -> tuple[Floats, Floats, Floats]:
    """Newcombe's square-and-add over the penalised beta intervals, with the correlation and skewness
    corrections of the module docs. No verdict uses it (issue 28): the benches compare with it."""
    ya, ra, yb, rb = (np.asarray(x, dtype=np.float64) for x in (ya, ra, yb, rb))
    both = (ra > 0) & (rb > 0)
    ya, yb = np.where(both, ya, 0.0), np.where(both, yb, 0.0)
    ra, rb = np.where(both, ra, 0.0), np.where(both, rb, 0.0)
    pa, la, ua = penalised_beta_batch(ya, ra, level)
    pb, lb, ub = penalised_beta_batch(yb, rb, level)
    n = both.sum(axis=1).astype(np.float64)
    phi = _case_correlation(ya, ra, yb, rb, both)
    phi = np.where(phi > 0, phi * n / (n + 2), phi)  # two uncorrelated pseudo-cases: never φ = 1
    d = pb - pa
    lo_b, hi_a = pb - lb, ua - pa
    hi_b, lo_a = ub - pb, pa - la
    h_low = np.sqrt(np.maximum(lo_b**2 + hi_a**2 - 2 * phi * lo_b * hi_a, 0.0))
    h_high = np.sqrt(np.maximum(hi_b**2 + lo_a**2 - 2 * phi * hi_b * lo_a, 0.0))
    widen_low, widen_high = _difference_skew_widening(ya, ra, yb, rb, both, pa, pb, h_low, h_high, z_for(level))
    return d, np.clip(d - h_low - widen_low, -1.0, 1.0), np.clip(d + h_high + widen_high, -1.0, 1.0)


def _difference_guard(
    ya: Floats, ra: Floats, yb: Floats, rb: Floats, both: NDArray[np.bool_], alpha: float
) -> tuple[Floats, Floats]:
    """Gaffke's interval of the mean per-case difference ``m_B − m_A ∈ [−1, 1]`` (mapped to [0, 1])."""
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.where(both, yb / np.where(both, rb, 1.0) - ya / np.where(both, ra, 1.0), 0.0)
    low, high = gaffke_interval_batch((1.0 + diff) / 2, both, alpha)
    return 2 * low - 1, 2 * high - 1


DISCORDANT_HALF: Final[float] = 25.0
"""Discordant cases at which the skewness widening of the paired difference gets half its weight: the
usual rule of thumb below which a paired difference (McNemar) needs exact, not normal, methods."""


def _difference_skew_widening(
    ya: Floats,
    ra: Floats,
    yb: Floats,
    rb: Floats,
    both: NDArray[np.bool_],
    pa: Floats,
    pb: Floats,
    h_low: Floats,
    h_high: Floats,
    z: float,
) -> tuple[Floats, Floats]:
    """How far to move the square-and-add bounds outward for the skewness of the difference itself.

    With ``u_i = (y_Bi − r_Bi·p̂_B)/N_B − (y_Ai − r_Ai·p̂_A)/N_A`` (case ``i``'s share of ``d − D``),
    ``γ = Σu³/(Σu²)^{3/2}`` is the skewness of ``d`` estimated from the cases. The square-and-add
    half-widths ``h_L``, ``h_U`` are read as ``σ·(z ± a)``, ``σ = (h_L + h_U)/(2z)``, ``a = z·(h_L − h_U)/(h_L + h_U)``;
    the Cornish–Fisher bounds of a studentised mean with skewness ``γ`` have ``a_CF = −(2z²+1)/6·γ``.
    ``s = w·(a_CF − a)``, kept within ``±z/2``, with ``w = k/(k + 25)`` and ``k`` the discordant cases
    (per-case means of A and B differ). Only the side the shift moves outward changes: the low bound by
    ``σ·max(s, 0)``, the high bound by ``σ·max(−s, 0)``. Never narrower than the square-and-add.
    """
    n = both.sum(axis=1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        big_a, big_b = ra.sum(axis=1), rb.sum(axis=1)
        u = np.where(
            both,
            (yb - rb * pb[:, None]) / big_b[:, None] - (ya - ra * pa[:, None]) / big_a[:, None],
            0.0,
        )
        squares = (u**2).sum(axis=1)
        gamma = np.where(squares > 0, (u**3).sum(axis=1) / squares**1.5, 0.0)
        total = h_low + h_high
        sigma = total / (2 * z)
        a_sa = np.where(total > 0, z * (h_low - h_high) / total, 0.0)
        ma = np.where(both, ya / np.where(both, ra, 1.0), 0.0)
        mb = np.where(both, yb / np.where(both, rb, 1.0), 0.0)
        k = (both & (np.abs(mb - ma) > 1e-12)).sum(axis=1).astype(np.float64)
        weight = k / (k + DISCORDANT_HALF)
        shift = weight * (-(2 * z * z + 1) / 6 * gamma - a_sa)
    shift = np.clip(np.nan_to_num(shift, nan=0.0, posinf=0.0, neginf=0.0), -z / 2, z / 2)
    sigma = np.where(n > 1, np.nan_to_num(sigma, nan=0.0, posinf=0.0, neginf=0.0), 0.0)
    widen_low: Floats = sigma * np.maximum(shift, 0.0)
    widen_high: Floats = sigma * np.maximum(-shift, 0.0)
    return widen_low, widen_high


def _case_correlation(ya: Floats, ra: Floats, yb: Floats, rb: Floats, both: NDArray[np.bool_]) -> Floats:
    """Pearson correlation of per-case means over the paired cases; 0 when either side is constant."""
    n = both.sum(axis=1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ma = np.where(both, ya / np.where(both, ra, 1.0), 0.0)
        mb = np.where(both, yb / np.where(both, rb, 1.0), 0.0)
        ca = np.where(both, ma - ma.sum(axis=1, keepdims=True) / n[:, None], 0.0)
        cb = np.where(both, mb - mb.sum(axis=1, keepdims=True) / n[:, None], 0.0)
        saa, sbb, sab = (ca * ca).sum(axis=1), (cb * cb).sum(axis=1), (ca * cb).sum(axis=1)
        # A side is constant when its spread is zero up to rounding.
        tiny = 1e-24
        phi = np.where((saa > tiny) & (sbb > tiny), sab / np.sqrt(saa * sbb), 0.0)
    out: Floats = np.clip(np.nan_to_num(phi, nan=0.0), -1.0, 1.0)
    return out


def penalised_beta(cells: Cells, level: float = 0.95) -> Interval:
    """`penalised_beta_batch` for one series (no verdict uses it)."""
    return _single(penalised_beta_batch, cells, level)


def square_and_add(a: Cells, b: Cells, level: float = 0.95) -> Interval:
    """`square_and_add_batch` for one series (no verdict uses it)."""
    return _paired(square_and_add_batch, a, b, level)


def _paired(
    batch: Callable[[Floats, Floats, Floats, Floats, float], tuple[Floats, Floats, Floats]],
    a: Cells,
    b: Cells,
    level: float,
) -> Interval:
    if len(a) != len(b):
        raise ValueError(f"paired cells must be aligned per case ({len(a)} vs {len(b)})")
    ya, ra = _arrays(a)
    yb, rb = _arrays(b)
    both = (ra > 0) & (rb > 0)
    n = int(both.sum())
    if n == 0:
        raise NoData("no case has counted attempts in both variants")
    d, low, high = batch(ya[None, :], ra[None, :], yb[None, :], rb[None, :], level)
    attempts = int(ra[both].sum() + rb[both].sum())
    return Interval(float(d[0]), float(low[0]), float(high[0]), n, attempts)


def _single(
    batch: Callable[[Floats, Floats, float], tuple[Floats, Floats, Floats]], cells: Cells, level: float
) -> Interval:
    """One series through a batch function (every interval is computed by the same vectorised code)."""
    y, r = _arrays(cells)
    n, total = _counts(r)
    if n == 0:
        raise NoData("no case has a counted attempt")
    est, low, high = batch(y[None, :], r[None, :], level)
    return Interval(float(est[0]), float(low[0]), float(high[0]), n, total)


# ---- negative controls ----------------------------------------------------------------------------


def naive_wilson(cells: Cells, level: float = 0.95) -> Interval:
    """Wilson's interval on all attempts as if they were independent. A negative control: too narrow
    when cases differ, because repeats of one case are correlated. Not for deciding anything."""
    return _single(naive_wilson_batch, cells, level)


def naive_wilson_batch(y: Floats, r: Floats, level: float = 0.95) -> tuple[Floats, Floats, Floats]:
    """`naive_wilson` over many series at once."""
    z = z_for(level)
    y = np.asarray(y, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    big_n = r.sum(axis=1)
    big_y = np.where(r > 0, y, 0.0).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = big_y / big_n
        centre = (p + z**2 / (2 * big_n)) / (1 + z**2 / big_n)
        half = z / (1 + z**2 / big_n) * np.sqrt(p * (1 - p) / big_n + z**2 / (4 * big_n**2))
    return p, np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def clustered_wald(cells: Cells, level: float = 0.95) -> Interval:
    """``p̂ ± z·√V`` with the clustered (per-case) variance, clipped to [0, 1]. A negative control:
    it collapses to a zero-width interval when every attempt passes, and undercovers near 0 and 1."""
    return _single(clustered_wald_batch, cells, level)


def clustered_wald_batch(y: Floats, r: Floats, level: float = 0.95) -> tuple[Floats, Floats, Floats]:
    """`clustered_wald` over many series at once (``V = 0`` for a single case)."""
    z = z_for(level)
    y = np.asarray(y, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    valid = r > 0
    n = valid.sum(axis=1).astype(np.float64)
    big_n = r.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(valid, y, 0.0).sum(axis=1) / big_n
        resid = np.where(valid, y - r * p[:, None], 0.0)
        v = np.where(n > 1, n / (n - 1), 0.0) * (resid**2).sum(axis=1) / big_n**2
    half = z * np.sqrt(v)
    return p, np.clip(p - half, 0.0, 1.0), np.clip(p + half, 0.0, 1.0)


# ---- helpers --------------------------------------------------------------------------------------


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, not {level}")


def _arrays(cells: Cells) -> tuple[Floats, Floats]:
    y = np.array([float(c[0]) for c in cells], dtype=np.float64)
    r = np.array([float(c[1]) for c in cells], dtype=np.float64)
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(r))):
        raise ValueError("passes and attempts must be finite numbers")
    if np.any(r < 0) or np.any(r != np.round(r)):
        raise ValueError("counted attempts must be whole numbers ≥ 0")
    slack = 1e-9 * np.maximum(r, 1.0)  # sums of fractional scores may overshoot by a rounding error
    bad = (y < -slack) | (y > r + slack)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(f"case {i}: passes {y[i]} outside [0, {int(r[i])}]")
    return np.clip(y, 0.0, r), r


def _counts(r: Floats) -> tuple[int, int]:
    return int((r > 0).sum()), int(math.fsum(r.tolist()))
