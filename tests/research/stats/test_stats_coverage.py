"""Monte-Carlo coverage of the intervals against a known truth, on the hardest part of the grid.

Series are simulated with a known rate: each case has its own pass rate drawn from a Beta distribution
with mean ``p`` and intra-case correlation ``ρ`` (``α = p(1−ρ)/ρ``, ``β = (1−p)(1−ρ)/ρ``), and each
attempt of that case passes with that rate. The interval of a series covers when it contains ``p``.
Here: rates 0.97–0.999, 10–30 cases, 10–20 repeats, ρ 0.5–0.9 — few cases that differ a lot, many
repeats that add little. Both intervals must cover at least 93% in every cell (2,000 series per cell;
at a true 95% the chance of falling below 93% is about 1 in 10,000).

Negative control: Wilson's interval on all attempts as if they were independent must fail the same
test visibly — otherwise the test could not tell a good interval from a bad one.

One-sided misses (20,000 series per cell): where the intervals used to lie above the truth too often
(docs/statistical-validity.md, "Defects fixed"), P(truth < low) must stay within 2.5% + 3 standard
errors — one rate at high rates with 20 repeats and ρ = 0.3, the paired difference when both variants
agree on most cases, and a variant that breaks a few cases outright.

Run with ``-s`` to see the table of measured coverage.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
import scipy.stats

from aqven.research.stats.intervals import (
    Z95,
    naive_wilson_batch,
    one_rate,
    one_rate_batch,
    paired_difference,
    paired_difference_batch,
    penalised_beta_batch,
)

SERIES = 2000
FLOOR = 0.93

Floats = np.ndarray
Repeats = int | tuple[int, int]
Result = tuple[tuple[object, ...], float, float]


def case_rates(u: Floats, p: float, rho: float) -> Floats:
    """Per-case rates with mean p and ICC ρ, as the Beta quantiles of uniforms u."""
    a, b = p * (1 - rho) / rho, (1 - p) * (1 - rho) / rho
    out: Floats = scipy.special.betaincinv(a, b, u)
    return out


def repeats_of(rng: np.random.Generator, n: int, r: int | tuple[int, int], series: int = SERIES) -> Floats:
    """r repeats per case, or a random count in [lo, hi] per case (attempts lost to infrastructure)."""
    if isinstance(r, int):
        return np.full((series, n), float(r))
    return rng.integers(r[0], r[1] + 1, size=(series, n)).astype(np.float64)


def coverage(low: Floats, high: Floats, truth: float) -> float:
    return float(np.mean((low <= truth) & (truth <= high)))


# (p, ρ, cases, repeats)
ONE_RATE_CELLS: list[tuple[float, float, int, Repeats]] = [
    (0.97, 0.5, 10, 20),
    (0.97, 0.9, 30, 10),
    (0.98, 0.7, 20, 15),
    (0.99, 0.5, 30, 20),
    (0.99, 0.9, 10, 10),
    (0.995, 0.6, 20, 20),
    (0.995, 0.9, 30, (5, 20)),
    (0.999, 0.5, 30, 10),
]

# (p_A, p_B, ρ, correlation of the two variants' case difficulty, cases, repeats)
PAIRED_CELLS: list[tuple[float, float, float, float, int, Repeats]] = [
    (0.97, 0.99, 0.5, 0.8, 10, 20),
    (0.99, 0.97, 0.9, 0.0, 30, 10),
    (0.98, 0.98, 0.7, 0.5, 20, 15),
    (0.995, 0.999, 0.6, 0.8, 30, 20),
    (0.99, 0.98, 0.9, 0.8, 20, (5, 20)),
    (0.97, 0.975, 0.5, 0.3, 30, 20),
]


def simulate_one(seed: int, p: float, rho: float, n: int, r: int | tuple[int, int]) -> tuple[Floats, Floats]:
    rng = np.random.default_rng(seed)
    q = case_rates(rng.random((SERIES, n)), p, rho)
    reps = repeats_of(rng, n, r)
    return rng.binomial(reps.astype(np.int64), q).astype(np.float64), reps


def simulate_pair(
    seed: int, pa: float, pb: float, rho: float, c: float, n: int, r: int | tuple[int, int], series: int = SERIES
) -> tuple[Floats, Floats, Floats, Floats]:
    """Two variants on the same cases; their case difficulties are linked by a Gaussian copula."""
    rng = np.random.default_rng(seed)
    za = rng.standard_normal((series, n))
    zb = c * za + np.sqrt(1 - c * c) * rng.standard_normal((series, n))
    qa = case_rates(scipy.stats.norm.cdf(za), pa, rho)
    qb = case_rates(scipy.stats.norm.cdf(zb), pb, rho)
    reps = repeats_of(rng, n, r, series).astype(np.int64)
    ya = rng.binomial(reps, qa).astype(np.float64)
    yb = rng.binomial(reps, qb).astype(np.float64)
    return ya, reps.astype(np.float64), yb, reps.astype(np.float64)


def naive_paired(ya: Floats, ra: Floats, yb: Floats, rb: Floats) -> tuple[Floats, Floats]:
    """Newcombe's square-and-add over naive Wilson intervals (the negative control for pairs)."""
    pa, la, ua = naive_wilson_batch(ya, ra)
    pb, lb, ub = naive_wilson_batch(yb, rb)
    d = pb - pa
    return d - np.hypot(pb - lb, ua - pa), d + np.hypot(ub - pb, pa - la)


@pytest.fixture(scope="module")
def one_rate_results() -> list[Result]:
    out: list[Result] = []
    for seed, (p, rho, n, r) in enumerate(ONE_RATE_CELLS):
        y, reps = simulate_one(1000 + seed, p, rho, n, r)
        _, low, high = one_rate_batch(y, reps)
        _, nlow, nhigh = naive_wilson_batch(y, reps)
        out.append(((p, rho, n, r), coverage(low, high, p), coverage(nlow, nhigh, p)))
    print("\none rate: p, ρ, cases, repeats → coverage of one_rate | naive Wilson")
    for cell, ours, naive in out:
        print(f"  {cell!s:28} {ours:.3f} | {naive:.3f}")
    return out


@pytest.fixture(scope="module")
def paired_results() -> list[Result]:
    out: list[Result] = []
    for seed, (pa, pb, rho, c, n, r) in enumerate(PAIRED_CELLS):
        ya, ra, yb, rb = simulate_pair(2000 + seed, pa, pb, rho, c, n, r)
        _, low, high = paired_difference_batch(ya, ra, yb, rb)
        nlow, nhigh = naive_paired(ya, ra, yb, rb)
        truth = pb - pa
        out.append(((pa, pb, rho, c, n, r), coverage(low, high, truth), coverage(nlow, nhigh, truth)))
    print("\npaired difference: p_A, p_B, ρ, c, cases, repeats → coverage of paired_difference | naive")
    for cell, ours, naive in out:
        print(f"  {cell!s:40} {ours:.3f} | {naive:.3f}")
    return out


def test_one_rate_covers_on_the_hard_cells(one_rate_results: list[Result]) -> None:
    low = [(cell, ours) for cell, ours, _ in one_rate_results if ours < FLOOR]
    assert not low, f"one_rate below {FLOOR}: {low}"


def test_paired_difference_covers_on_the_hard_cells(
    paired_results: list[Result],
) -> None:
    low = [(cell, ours) for cell, ours, _ in paired_results if ours < FLOOR]
    assert not low, f"paired_difference below {FLOOR}: {low}"


def test_naive_wilson_fails_the_same_test(one_rate_results: list[Result]) -> None:
    failing = [naive for _, _, naive in one_rate_results if naive < FLOOR]
    assert len(failing) >= 6, f"naive Wilson should undercover on most hard cells: {one_rate_results}"
    assert float(np.mean([naive for _, _, naive in one_rate_results])) < 0.85


def test_naive_paired_fails_the_same_test(paired_results: list[Result]) -> None:
    failing = [naive for _, _, naive in paired_results if naive < FLOOR]
    assert len(failing) >= 5, f"naive pairs should undercover on most hard cells: {paired_results}"


def test_the_scalar_functions_are_the_batch_path() -> None:
    """The scalar API computes exactly what the simulation measured."""
    y, reps = simulate_one(7, 0.98, 0.7, 20, (5, 20))
    ya, ra, yb, rb = simulate_pair(8, 0.97, 0.99, 0.5, 0.8, 10, 20)
    _, low, high = one_rate_batch(y[:50], reps[:50])
    _, dlow, dhigh = paired_difference_batch(ya[:50], ra[:50], yb[:50], rb[:50])
    for s in range(50):
        i = one_rate(list(zip(y[s].tolist(), reps[s].astype(int).tolist(), strict=True)))
        assert (i.low, i.high) == (low[s], high[s])
        a = list(zip(ya[s].tolist(), ra[s].astype(int).tolist(), strict=True))
        b = list(zip(yb[s].tolist(), rb[s].astype(int).tolist(), strict=True))
        d = paired_difference(a, b)
        assert (d.low, d.high) == (dlow[s], dhigh[s])


def test_the_simulation_has_the_intended_truth() -> None:
    """Guard the test itself: the Beta case rates have mean p and intra-case correlation ρ."""
    rng = np.random.default_rng(3)
    q = case_rates(rng.random(400_000), 0.98, 0.7)
    assert float(q.mean()) == pytest.approx(0.98, abs=5e-4)
    # ICC of Bernoulli(q) attempts = Var(q) / (p(1−p)).
    assert float(q.var()) / (0.98 * 0.02) == pytest.approx(0.7, abs=0.02)


# ---- one-sided misses where the intervals used to lie above the truth -----------------------------------

ONE_SIDED_SERIES = 20_000


def miss_limit(series: int) -> float:
    """2.5% plus 3 Monte Carlo standard errors: a true 2.5% exceeds it about once in 700 runs."""
    return 0.025 + 3 * math.sqrt(0.025 * 0.975 / series)


def one_sided(low: Floats, high: Floats, truth: float) -> tuple[float, float]:
    """(P(truth < low), P(truth > high)): the interval lies above / below the truth."""
    return float(np.mean(truth < low)), float(np.mean(truth > high))


def test_one_rate_does_not_lie_above_a_high_rate_too_often() -> None:
    """High rates, 20 repeats, ρ = 0.3: a few cases fail often, so p̂ is skewed and V is small exactly
    when p̂ is high. Before the skewness correction these cells missed below 3.0–3.4% of the time.
    Measured on the penalised beta interval alone — the narrow member of the union `one_rate` takes —
    so that its own correction stays tested (the union is only wider)."""
    cells = [(0.97, 0.3, 100, 20), (0.99, 0.3, 300, 20), (0.97, 0.3, 300, 20)]
    below_all: list[float] = []
    for seed, (p, rho, n, r) in enumerate(cells):
        rng = np.random.default_rng(5000 + seed)
        a, b = p * (1 - rho) / rho, (1 - p) * (1 - rho) / rho
        y = rng.binomial(r, rng.beta(a, b, size=(ONE_SIDED_SERIES, n))).astype(np.float64)
        _, low, high = penalised_beta_batch(y, np.full_like(y, float(r)))
        below, above = one_sided(low, high, p)
        oracle = 2 * Z95 * math.sqrt(p * (1 - p) * (1 + (r - 1) * rho) / (n * r))
        width = float(np.median(high - low)) / oracle
        print(f"\n  one rate {(p, rho, n, r)}: P(truth<low) {below:.4f}, P(truth>high) {above:.4f}, width {width:.3f}")
        assert below <= miss_limit(ONE_SIDED_SERIES), (p, rho, n, r, below)
        assert above <= miss_limit(ONE_SIDED_SERIES), (p, rho, n, r, above)
        assert width < 1.3, "the fix must not buy coverage with width"
        below_all.append(below)
    assert float(np.mean(below_all)) <= miss_limit(ONE_SIDED_SERIES * len(cells))


# (p_A, p_B, ρ, c, cases, repeats): variants that agree on (almost) every case at p̂ near ½
AGREEING_CELLS: list[tuple[float, float, float, float, int, Repeats]] = [
    (0.5, 0.48, 0.9, 0.9, 10, 1),
    (0.5, 0.48, 0.9, 0.9, 30, 1),
]


def test_paired_difference_does_not_lie_above_the_truth_when_variants_agree() -> None:
    """φ near 1: the old square-and-add shrank to |asymmetry|, [0, 0] at p̂ = ½; it missed below
    4.96% (10 cases) and 3.2% (30 cases) of the time in these cells."""
    for seed, (pa, pb, rho, c, n, r) in enumerate(AGREEING_CELLS):
        ya, ra, yb, rb = simulate_pair(6000 + seed, pa, pb, rho, c, n, r, ONE_SIDED_SERIES)
        _, low, high = paired_difference_batch(ya, ra, yb, rb)
        below, above = one_sided(low, high, pb - pa)
        print(f"\n  paired {(pa, pb, rho, c, n, r)}: P(truth<low) {below:.4f}, P(truth>high) {above:.4f}")
        assert below <= miss_limit(ONE_SIDED_SERIES), (n, below)
        assert above <= miss_limit(ONE_SIDED_SERIES), (n, above)
        assert np.all(high > low), "never a zero-width interval"


def test_paired_difference_sees_a_variant_that_breaks_a_few_cases() -> None:
    """B = A, except that B fails every attempt of a case with probability 5% (a regression on a few
    cases); cases are nearly all-or-nothing (ρ = 0.9), 30 cases × 5 repeats. Truth: −0.05·0.5. The old
    interval lay above the truth in 14% of the series: with no broken case seen, φ was close to 1."""
    p, rho, n, r, broken = 0.5, 0.9, 30, 5, 0.05
    rng = np.random.default_rng(7000)
    q = case_rates(rng.random((ONE_SIDED_SERIES, n)), p, rho)
    ya = rng.binomial(r, q).astype(np.float64)
    yb = np.where(rng.random((ONE_SIDED_SERIES, n)) < broken, 0.0, rng.binomial(r, q)).astype(np.float64)
    reps = np.full_like(ya, float(r))
    _, low, high = paired_difference_batch(ya, reps, yb, reps)
    below, above = one_sided(low, high, -broken * p)
    print(f"\n  broken cases: P(truth<low) {below:.4f}, P(truth>high) {above:.4f}")
    assert below <= miss_limit(ONE_SIDED_SERIES)
    assert above <= miss_limit(ONE_SIDED_SERIES)


def test_paired_difference_sees_a_few_broken_cases_among_many_cases_that_fail_now_and_then() -> None:
    """p 0.99, 1,000 cases × 20 repeats, ρ = 0.3: B breaks each case with probability 0.004 (about 4
    broken cases). The broken cases hide among many that fail now and then, so φ is not near 1; what
    matters is the left skew of the difference: series that drew fewer broken cases have d high and
    its variance small together. Without the skewness widening the interval lay above the truth 3.5%
    of the time."""
    p, rho, n, r, broken = 0.99, 0.3, 1000, 20, 0.004
    rng = np.random.default_rng(7100)
    below = above = 0.0
    chunk = ONE_SIDED_SERIES // 4  # four blocks keep the arrays small
    for _ in range(4):
        q = rng.beta(p * (1 - rho) / rho, (1 - p) * (1 - rho) / rho, size=(chunk, n))
        ya = rng.binomial(r, q).astype(np.float64)
        yb = np.where(rng.random((chunk, n)) < broken, 0.0, rng.binomial(r, q)).astype(np.float64)
        reps = np.full_like(ya, float(r))
        _, low, high = paired_difference_batch(ya, reps, yb, reps)
        b, a = one_sided(low, high, -broken * p)
        below, above = below + b / 4, above + a / 4
    print(f"\n  a few broken among 1,000 cases: P(truth<low) {below:.4f}, P(truth>high) {above:.4f}")
    assert below <= miss_limit(ONE_SIDED_SERIES)
    assert above <= miss_limit(ONE_SIDED_SERIES)
