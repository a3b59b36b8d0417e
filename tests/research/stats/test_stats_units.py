"""Unit tests of the interval estimators and the launch-plan arithmetic against known values.

Known truths used: textbook Clopper–Pearson and Wilson bounds, closed forms at the edges
(``0.025^(1/n)``), the DESIGN §7 formulas written out step by step with scipy's own distributions,
symmetry (passes ↔ fails), and the spec's launch-plan example.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
import scipy.stats

from aqven.research.stats import planning as lm
from aqven.research.stats.intervals import (
    Z95,
    Interval,
    NoData,
    clustered_wald,
    naive_wilson,
    one_rate,
    one_rate_batch,
    paired_difference,
    penalised_beta,
    square_and_add,
)


def approx(x: float, rel: float = 1e-9) -> object:
    return pytest.approx(x, rel=rel, abs=1e-12)


# ---- one rate: known values -------------------------------------------------------------------------


def test_z95_is_the_normal_quantile() -> None:
    expected = float(scipy.stats.norm.ppf(0.975))
    assert expected == Z95
    assert pytest.approx(1.959963984540054) == Z95


def test_one_attempt_per_case_is_clopper_pearson() -> None:
    # 5 of 10 independent attempts: the textbook exact interval 0.1871 to 0.8129. Gaffke's bound on pass/fail
    # cases is Clopper–Pearson's; the saddlepoint formula computes it a hair wider.
    i = one_rate([(1, 1)] * 5 + [(0, 1)] * 5)
    assert (i.estimate, i.n_cases, i.n_attempts) == (0.5, 10, 10)
    assert i.low == pytest.approx(0.18708602844739855, abs=1e-4) and i.low <= 0.18708602844739855
    assert i.high == pytest.approx(0.8129139715526015, abs=1e-4) and i.high >= 0.8129139715526015
    assert i.half_width == approx((i.high - i.low) / 2)


def test_all_pass_and_all_fail_use_the_closed_form_edges() -> None:
    up = one_rate([(1, 1)] * 10)
    assert (up.estimate, up.high) == (1.0, 1.0)
    assert up.low == pytest.approx(0.025 ** (1 / 10), abs=2e-3) and up.low <= 0.025 ** (1 / 10)  # 0.6915
    down = one_rate([(0, 1)] * 10)
    assert (down.estimate, down.low) == (0.0, 0.0)
    assert down.high == pytest.approx(1 - 0.025 ** (1 / 10), abs=2e-3)  # 0.3085


def test_repeats_do_not_help_without_a_single_failure() -> None:
    # 10 cases × 20 repeats, all pass: no case has a fail, so n* = n = 10 cases, not 200 attempts.
    i = penalised_beta([(20, 20)] * 10)
    assert i.n_attempts == 200
    assert i.low == approx(0.025 ** (1 / 10))
    # The guarded interval never claims more than the all-pass floor of 10 cases.
    assert one_rate([(20, 20)] * 10).low <= 0.025 ** (1 / 10)
    # The naive interval pretends 200 independent attempts and is far narrower.
    assert naive_wilson([(20, 20)] * 10).low > 0.98


def test_cases_that_agree_bound_the_mean_of_their_means() -> None:
    # Every case passes exactly 1 of 2: Gaffke's bound is 0.5·(1 − D₀), D₀ ~ Beta(1, 10): 0.5·0.025^(1/10).
    i = one_rate([(1, 2)] * 10)
    assert i.estimate == 0.5
    assert i.low == pytest.approx(0.5 * 0.025 ** (1 / 10), abs=2e-3)
    assert i.high == pytest.approx(1 - 0.5 * 0.025 ** (1 / 10), abs=2e-3)


def test_one_case_is_one_value_of_the_mean() -> None:
    # One case of mean 0.6: M = 0.6·(1 − D₀) with D₀ uniform, so the bounds are 0.6·0.025 and 1 − 0.4·0.025.
    i = one_rate([(3, 5)])
    assert (i.estimate, i.n_cases, i.n_attempts) == (0.6, 1, 5)
    assert i.low == pytest.approx(0.6 * 0.025, abs=2e-3)
    assert i.high == pytest.approx(1 - 0.4 * 0.025, abs=2e-3)


def test_formula_step_by_step_when_the_penalty_applies() -> None:
    """DESIGN §7 'One rate' computed by hand: k ≥ 2 and n < n* < N."""
    passes = [10, 10, 9, 10, 7, 10, 10, 8, 10, 10, 10, 6, 10, 10, 9, 10, 10, 10, 10, 10]
    repeats = [10] * 20
    n, big_n = 20, 200
    p = sum(passes) / big_n
    v = n / (n - 1) * sum((y - r * p) ** 2 for y, r in zip(passes, repeats, strict=True)) / big_n**2
    n_eff = p * (1 - p) / v
    k = min(sum(1 for y, r in zip(passes, repeats, strict=True) if y < r), sum(1 for y in passes if y > 0))
    assert k == 5
    t = scipy.stats.t.ppf(0.975, k - 1)
    # The skewness correction: γ from the residuals, g of a binomial with n_eff trials.
    resid = [y - r * p for y, r in zip(passes, repeats, strict=True)]
    gamma = sum(e**3 for e in resid) / sum(e**2 for e in resid) ** 1.5
    g = (1 - 2 * p) / math.sqrt(n_eff * p * (1 - p))
    delta = (2 * Z95**2 + 1) / 6 * (g - gamma)
    assert 0 < delta < t / 2  # a few cases fail often: p̂ is more left-skewed than the binomial
    n_low = n_eff * (Z95 / (t + delta)) ** 2
    n_high = n_eff * (Z95 / (t - delta)) ** 2
    assert n < n_low < n_high < big_n  # no clipping: the penalised path itself is under test
    i = penalised_beta(list(zip(passes, repeats, strict=True)))
    assert i.estimate == approx(p)
    x = p * n_low
    assert i.low == approx(scipy.stats.beta.ppf(0.025, x, n_low - x + 1), rel=1e-7)
    x = p * n_high
    assert i.high == approx(scipy.stats.beta.ppf(0.975, x + 1, n_high - x), rel=1e-7)


def test_fractional_scores() -> None:
    # Scores of 0.5 on every attempt: each case "has a pass" and "has a fail"; V = 0 → CP on N.
    i = one_rate([(1.0, 2)] * 10)
    j = one_rate([(0.5 * 2, 2)] * 10)
    assert i == j
    # A score sum a hair above r from rounding is accepted and clipped.
    assert one_rate([(0.1 + 0.2 + 0.7, 1)]).estimate == 1.0


def test_cases_without_counted_attempts_are_ignored() -> None:
    cells = [(3, 4), (4, 4), (2, 4), (4, 4)]
    assert one_rate([*cells, (0, 0), (0, 0)]) == one_rate(cells)


def test_no_data_and_bad_input() -> None:
    with pytest.raises(NoData):
        one_rate([])
    with pytest.raises(NoData):
        one_rate([(0, 0), (0, 0)])
    with pytest.raises(ValueError, match="outside"):
        one_rate([(3, 2)])
    with pytest.raises(ValueError, match="outside"):
        one_rate([(-1, 2)])
    with pytest.raises(ValueError, match="whole"):
        one_rate([(1, 1.5)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="level"):
        one_rate([(1, 2)], level=1.0)
    assert isinstance(NoData("x"), ValueError)


def test_batch_rows_without_data_are_nan() -> None:
    y = np.array([[1.0, 2.0], [0.0, 0.0]])
    r = np.array([[2.0, 2.0], [0.0, 0.0]])
    est, low, high = one_rate_batch(y, r)
    assert math.isnan(est[1]) and math.isnan(low[1]) and math.isnan(high[1])
    assert (est[0], low[0], high[0]) == tuple(
        getattr(one_rate([(1, 2), (2, 2)]), k) for k in ("estimate", "low", "high")
    )


# ---- one rate: properties -------------------------------------------------------------------------


def _random_cells(rng: random.Random) -> list[tuple[float, int]]:
    out = []
    for _ in range(rng.randint(1, 25)):
        r = rng.randint(1, 8)
        out.append((float(rng.randint(0, r)), r))
    return out


def test_swapping_passes_and_fails_mirrors_the_interval() -> None:
    rng = random.Random(7)
    for _ in range(200):
        cells = _random_cells(rng)
        i = one_rate(cells)
        j = one_rate([(r - y, r) for y, r in cells])
        assert j.estimate == approx(1 - i.estimate)
        assert j.low == pytest.approx(1 - i.high, abs=1e-9)
        assert j.high == pytest.approx(1 - i.low, abs=1e-9)


def test_interval_contains_the_estimate_and_stays_in_unit_range() -> None:
    rng = random.Random(8)
    for _ in range(300):
        i = one_rate(_random_cells(rng), level=rng.choice([0.9, 0.95, 0.99]))
        assert 0.0 <= i.low <= i.estimate <= i.high <= 1.0


def test_more_passes_never_lower_the_bounds_with_independent_attempts() -> None:
    # One attempt per case: n* = n = N, the exact Clopper–Pearson interval, monotone in the passes.
    for n in (1, 5, 30):
        intervals = [one_rate([(1, 1)] * x + [(0, 1)] * (n - x)) for x in range(n + 1)]
        assert all(a.low < b.low or b.low == 0 == a.low for a, b in itertools.pairwise(intervals))
        assert all(a.high < b.high or a.high == 1 == b.high for a, b in itertools.pairwise(intervals))


def test_more_passes_never_lower_the_bounds_when_cases_agree() -> None:
    # Every case at the same rate y/r: V = 0, n* = N, so the interval is CP(y·n, r·n), monotone in y.
    intervals = [one_rate([(y, 6)] * 12) for y in range(7)]
    assert [i.low for i in intervals] == sorted(i.low for i in intervals)
    assert [i.high for i in intervals] == sorted(i.high for i in intervals)


def test_one_more_failure_never_raises_a_bound() -> None:
    """Issue 28: a fourth case with a failure moved the penalised interval's t quantile from t(2) to t(3),
    which relaxed its penalty more than the extra failure lowered the rate, and the lower bound rose (the
    penalised member alone still does; the interval a verdict stands on no longer does)."""
    before = [(6, 6), (3, 3), (1, 1), (7, 8), (6, 6), (1, 1), (3, 3), (7, 7)]
    before += [(3, 3), (1, 1), (3, 3), (5, 7), (5, 5), (3, 4), (2, 2)]
    after = list(before)
    after[7] = (6, 7)
    a, b = one_rate(before), one_rate(after)
    assert b.estimate < a.estimate
    assert b.low <= a.low and b.high <= a.high
    assert penalised_beta(after).low > penalised_beta(before).low


def test_more_cases_narrow_the_interval() -> None:
    pattern = [(10, 10), (9, 10), (10, 10), (7, 10), (10, 10)]
    widths = [one_rate(pattern * k).half_width for k in (1, 2, 4, 8, 16)]
    assert widths == sorted(widths, reverse=True)
    assert widths[-1] < widths[0] / 4


def test_higher_level_is_wider() -> None:
    cells = [(3, 4), (4, 4), (2, 4), (4, 4), (1, 4), (4, 4)]
    a, b, c = (one_rate(cells, level) for level in (0.9, 0.95, 1 - 0.05 / 3))
    assert c.low < b.low < a.low and a.high < b.high < c.high


# ---- paired difference ------------------------------------------------------------------------------


def test_paired_difference_is_newcombe_over_one_rate_when_a_side_is_constant() -> None:
    a = [(1, 2)] * 30  # constant per-case means → φ = 0
    b = [(2, 2)] * 20 + [(1, 2)] * 5 + [(0, 2)] * 5
    ia, ib = penalised_beta(a), penalised_beta(b)
    d = square_and_add(a, b)
    assert d.estimate == approx(ib.estimate - ia.estimate)
    h_low = math.hypot(ib.estimate - ib.low, ia.high - ia.estimate)
    h_high = math.hypot(ib.high - ib.estimate, ia.estimate - ia.low)
    widen_low, widen_high = skew_widening(a, b, h_low, h_high)
    assert widen_low > 0 and widen_high == 0  # B's 5 cases at 0 make d skewed to the left
    assert d.low == approx(d.estimate - h_low - widen_low)
    assert d.high == approx(d.estimate + h_high)
    assert (d.n_cases, d.n_attempts) == (30, 120)


def skew_widening(
    a: list[tuple[int, int]], b: list[tuple[int, int]], h_low: float, h_high: float
) -> tuple[float, float]:
    """The skewness widening of the paired difference, written out (docs/how-to/how-a-series-decides.md)."""
    z = Z95
    pa = sum(y for y, _ in a) / sum(r for _, r in a)
    pb = sum(y for y, _ in b) / sum(r for _, r in b)
    na, nb = sum(r for _, r in a), sum(r for _, r in b)
    u = [(yb - rb * pb) / nb - (ya - ra * pa) / na for (ya, ra), (yb, rb) in zip(a, b, strict=True)]
    squares = sum(x * x for x in u)
    gamma = sum(x**3 for x in u) / squares**1.5 if squares > 0 else 0.0
    sigma = (h_low + h_high) / (2 * z)
    a_sa = z * (h_low - h_high) / (h_low + h_high)
    k = sum(ya / ra != yb / rb for (ya, ra), (yb, rb) in zip(a, b, strict=True))
    s = k / (k + 25) * (-(2 * z * z + 1) / 6 * gamma - a_sa)
    s = min(max(s, -z / 2), z / 2)
    return sigma * max(s, 0.0), sigma * max(-s, 0.0)


def test_paired_difference_uses_the_case_correlation() -> None:
    a = [(2, 2)] * 20 + [(1, 2)] * 6 + [(0, 2)] * 4
    b = [(2, 2)] * 22 + [(1, 2)] * 4 + [(0, 2)] * 4  # finds the same cases hard: φ > 0
    ia, ib = penalised_beta(a), penalised_beta(b)
    ma = np.array([y / r for y, r in a])
    mb = np.array([y / r for y, r in b])
    phi = float(np.corrcoef(ma, mb)[0, 1])
    assert phi > 0.8
    lo_b, hi_a = ib.estimate - ib.low, ia.high - ia.estimate
    hi_b, lo_a = ib.high - ib.estimate, ia.estimate - ia.low
    d = square_and_add(a, b)
    phi *= 30 / 32  # shrunk by n/(n+2)
    h_low = math.sqrt(lo_b**2 + hi_a**2 - 2 * phi * lo_b * hi_a)
    h_high = math.sqrt(hi_b**2 + lo_a**2 - 2 * phi * hi_b * lo_a)
    widen_low, widen_high = skew_widening(a, b, h_low, h_high)
    assert d.low == approx(d.estimate - h_low - widen_low, rel=1e-9)
    assert d.high == approx(d.estimate + h_high + widen_high, rel=1e-9)
    # The correlation makes the paired interval narrower than treating the variants as independent.
    assert d.high - d.low < math.hypot(lo_b, hi_a) + math.hypot(hi_b, lo_a)


def test_the_skewness_widening_never_narrows_and_needs_discordant_cases() -> None:
    """The paired interval holds the square-and-add interval, and a few discordant cases move it little."""
    rng = np.random.default_rng(11)
    for n, r in [(10, 1), (30, 5), (300, 20)]:
        for _ in range(20):
            q = rng.beta(2.0, 0.2, size=n)
            a = [(int(y), r) for y in rng.binomial(r, q)]
            b = [(0 if rng.random() < 0.03 else int(y), r) for y in rng.binomial(r, q)]
            ia, ib = penalised_beta(a), penalised_beta(b)
            ma, mb = np.array([y / r for y, _ in a]), np.array([y / r for y, _ in b])
            sa, sb = ma.std(), mb.std()
            phi = float(np.corrcoef(ma, mb)[0, 1]) if sa > 0 and sb > 0 else 0.0
            phi = phi * n / (n + 2) if phi > 0 else phi
            lo_b, hi_a = ib.estimate - ib.low, ia.high - ia.estimate
            hi_b, lo_a = ib.high - ib.estimate, ia.estimate - ia.low
            h_low = math.sqrt(max(lo_b**2 + hi_a**2 - 2 * phi * lo_b * hi_a, 0.0))
            h_high = math.sqrt(max(hi_b**2 + lo_a**2 - 2 * phi * hi_b * lo_a, 0.0))
            d = square_and_add(a, b)
            assert d.low <= d.estimate - h_low + 1e-12
            assert d.high >= d.estimate + h_high - 1e-12
            widen_low, widen_high = skew_widening(a, b, h_low, h_high)
            assert d.low == approx(max(d.estimate - h_low - widen_low, -1.0))
            assert d.high == approx(min(d.estimate + h_high + widen_high, 1.0))
            # at most z/2 in units of σ = (h_L + h_U)/(2z); nothing without a discordant case
            assert widen_low + widen_high <= (h_low + h_high) / 4 + 1e-12
            if not (ma != mb).any():
                assert widen_low == widen_high == 0.0


def test_identical_variants_give_zero_difference() -> None:
    a = [(2, 2), (1, 2), (0, 2), (2, 2), (2, 2), (1, 2)]
    d = square_and_add(a, a)
    assert d.estimate == 0.0
    assert d.low < 0.0 < d.high
    # φ = 1 shrunk to n/(n+2) = 6/8: the radicands keep 2·l·u·(1 − 6/8) besides the asymmetry.
    i = penalised_beta(a)
    lo, hi = i.estimate - i.low, i.high - i.estimate
    assert d.low == approx(-math.sqrt((lo - hi) ** 2 + 2 * lo * hi * 2 / 8))
    assert d.high == approx(math.sqrt((lo - hi) ** 2 + 2 * lo * hi * 2 / 8))


def test_identical_variants_at_one_half_keep_a_width() -> None:
    """Both variants pass the same 5 of 10 cases: the old square-and-add gave [0, 0] here."""
    a = [(1, 1)] * 5 + [(0, 1)] * 5
    d = paired_difference(a, a)
    assert d.estimate == 0.0
    assert d.high == approx(-d.low)
    # At least Agresti–Min's adjusted Wald for matched pairs with no discordant pair: z/(n+2).
    assert d.high >= Z95 / 12
    # And no wider than treating the two variants as independent (φ = 0).
    i = one_rate(a)
    assert d.high < math.hypot(i.high - i.estimate, i.estimate - i.low)
    for n in (2, 3, 30, 300, 3000):  # never zero width from a finite sample, whatever the size
        cells = [(1, 1)] * (n // 2) + [(0, 1)] * (n - n // 2)
        assert paired_difference(cells, cells).half_width > 0


def test_only_cases_in_both_variants_enter() -> None:
    a = [(2, 2), (1, 2), (0, 0), (2, 2)]
    b = [(2, 2), (0, 0), (1, 2), (1, 2)]
    assert paired_difference(a, b) == paired_difference([(2, 2), (2, 2)], [(2, 2), (1, 2)])
    with pytest.raises(NoData):
        paired_difference([(1, 2), (0, 0)], [(0, 0), (1, 2)])
    with pytest.raises(ValueError, match="aligned"):
        paired_difference([(1, 2)], [])


def test_paired_difference_mirrors_when_variants_swap() -> None:
    a = [(2, 2)] * 15 + [(1, 2)] * 5 + [(0, 2)] * 2
    b = [(2, 2)] * 10 + [(1, 2)] * 8 + [(0, 2)] * 4
    ab, ba = paired_difference(a, b), paired_difference(b, a)
    assert ab.estimate == approx(-ba.estimate)
    assert ab.low == approx(-ba.high) and ab.high == approx(-ba.low)


# ---- negative controls -------------------------------------------------------------------------------


def test_naive_wilson_is_wilson_on_all_attempts() -> None:
    # 5 of 10: Wilson 0.2366 to 0.7634, whatever the grouping into cases.
    for cells in ([(1, 1)] * 5 + [(0, 1)] * 5, [(5, 5), (0, 5)]):
        i = naive_wilson(cells)
        assert i.low == pytest.approx(0.2365931, abs=1e-6)
        assert i.high == pytest.approx(0.7634069, abs=1e-6)


def test_clustered_wald_collapses_when_all_pass() -> None:
    i = clustered_wald([(5, 5)] * 4)
    assert (i.low, i.high) == (1.0, 1.0)
    j = clustered_wald([(1, 1)] * 5 + [(0, 1)] * 5)
    assert j.half_width == pytest.approx(Z95 * math.sqrt(10 / 9 * 2.5 / 100))


def test_interval_is_frozen() -> None:
    i = Interval(0.5, 0.4, 0.6, 3, 6)
    with pytest.raises(AttributeError):
        i.low = 0.0  # type: ignore[misc]
    assert i.half_width == pytest.approx(0.1)


# ---- launch math ----------------------------------------------------------------------------------


def test_launch_plan_reproduces_the_spec_example_bit_for_bit() -> None:
    p0 = lm.planning_rate(0.97)
    assert p0 == 0.95
    assert lm.expected_half_width(p0, 2, 2) == 0.24352108850049436
    assert lm.recommended_cases(p0, 2, 0.01) == 1187


def test_planning_rate() -> None:
    assert lm.planning_rate(0.999) == 0.95
    assert lm.planning_rate(0.01) == 0.05
    assert lm.planning_rate(0.3) == 0.3
    assert lm.planning_rate(None) == 0.5


def test_half_width_formula_and_design_effect() -> None:
    # One repeat: the plain Wald half-width z·√(p(1−p)/n).
    assert lm.expected_half_width(0.5, 100, 1) == pytest.approx(Z95 * 0.05)
    # With ρ = 1 repeats add nothing; with ρ = 0 they count as fresh cases.
    assert lm.expected_half_width(0.5, 100, 10, rho=1.0) == pytest.approx(lm.expected_half_width(0.5, 100, 1))
    assert lm.expected_half_width(0.5, 100, 10, rho=0.0) == pytest.approx(lm.expected_half_width(0.5, 1000, 1))
    assert lm.design_effect(2) == pytest.approx(1.3)


def test_recommended_cases_reach_the_margin() -> None:
    for p0, r, m in [(0.95, 2, 0.01), (0.5, 1, 0.05), (0.8, 5, 0.03), (0.05, 20, 0.02)]:
        n = lm.recommended_cases(p0, r, m)
        assert lm.expected_half_width(p0, n, r) <= m + 1e-15
        assert n == 1 or lm.expected_half_width(p0, n - 1, r) > m
    with pytest.raises(ValueError):
        lm.recommended_cases(0.5, 2, 0.0)


def test_paired_planning() -> None:
    one = lm.expected_half_width(0.5, 50, 2)
    assert lm.expected_half_width_difference(0.5, 50, 2) == pytest.approx(one)  # ρ_between = 0.5 → ×1
    assert lm.expected_half_width_difference(0.5, 50, 2, rho_between=0.0) == pytest.approx(one * math.sqrt(2))
    n = lm.recommended_cases_difference(0.5, 2, 0.05)
    assert lm.expected_half_width_difference(0.5, n, 2) <= 0.05
    assert lm.expected_half_width_difference(0.5, n - 1, 2) > 0.05


def test_zero_failure_floor_and_best_half_width() -> None:
    assert lm.zero_failure_floor(0.97) == pytest.approx(121.1, abs=0.05)
    # n all-pass attempts put the exact lower bound 0.025^(1/n) at the bound exactly.
    assert 0.025 ** (1 / lm.zero_failure_floor(0.97)) == pytest.approx(0.97)
    best = lm.best_half_width_with_repeats(0.95, 6)
    assert best == lm.expected_half_width(0.95, 6, 20)
    assert best < lm.expected_half_width(0.95, 6, 2)
    assert best > Z95 * math.sqrt(0.95 * 0.05 * lm.RHO / 6)  # the r → ∞ limit is never reached


def test_cases_for_power() -> None:
    # (z_.975 + z_.8)² ≈ 7.849: the classic 80%-power multiplier.
    n = lm.cases_for_power(0.5, 1, 0.1)
    assert n == math.ceil((Z95 + scipy.stats.norm.ppf(0.8)) ** 2 * 0.25 / 0.01)
    assert lm.cases_for_power(0.5, 1, 0.1, paired=True) == n  # ρ_between = 0.5
    assert lm.cases_for_power(0.5, 1, 0.1, power=0.9) > n
