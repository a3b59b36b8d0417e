"""Gaffke's bound (`aqven.research.stats.gaffke`): its arithmetic against Monte Carlo and exact values,
and its one-sided miss on two-point worlds (the fast subset of ``bench/stats/stats_two_point.py``)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from aqven.research.stats.gaffke import gaffke_interval_batch, gaffke_lower_batch


def lower(values: list[float], alpha: float = 0.025) -> float:
    x = np.array([values], dtype=np.float64)
    return float(gaffke_lower_batch(x, np.ones_like(x, dtype=bool), alpha)[0])


@pytest.mark.parametrize("n", [1, 5, 40, 300])
def test_all_passing_cases_give_about_the_all_pass_floor(n: int) -> None:
    # Exactly α^(1/n) for the true quantile; the saddlepoint formula lands just below it (conservative).
    got = lower([1.0] * n)
    assert 0.025 ** (1 / n) * 0.9 < got <= 0.025 ** (1 / n)


def test_the_saddlepoint_matches_the_dirichlet_quantile() -> None:
    rng = np.random.default_rng(11)
    for n, values in ((12, rng.beta(2.0, 0.3, 12)), (30, rng.binomial(5, 0.9, 30) / 5)):
        e = rng.exponential(size=(200_000, n + 1))
        weights = e / e.sum(axis=1, keepdims=True)
        mc = float(np.quantile(weights[:, 1:] @ values, 0.025))  # the end point 0 adds nothing
        assert abs(lower(values.tolist()) - mc) < 0.003, (n, mc)


def test_fewer_passes_never_raise_the_bound_and_no_case_above_zero_gives_zero() -> None:
    base = [1.0] * 50
    lows = [lower(base[: 50 - k] + [0.8] * k) for k in range(6)]
    assert all(b < a for a, b in itertools.pairwise(lows)), lows
    assert lower([0.0] * 10) == 0.0
    x = np.zeros((1, 4))
    assert math.isnan(float(gaffke_lower_batch(x, np.zeros((1, 4), dtype=bool), 0.025)[0]))


def test_a_series_gets_the_same_bound_alone_and_in_a_batch() -> None:
    rng = np.random.default_rng(3)
    x = rng.binomial(4, 0.85, size=(50, 60)) / 4
    x[7] = rng.beta(9, 1, 60)  # one row of scores: many distinct values, more padding for the others
    valid = rng.random((50, 60)) < 0.9
    low, high = gaffke_interval_batch(x, valid, 0.05)
    for i in (0, 7, 49):
        one_low, one_high = gaffke_interval_batch(x[i : i + 1], valid[i : i + 1], 0.05)
        assert (one_low[0], one_high[0]) == (low[i], high[i])
    mirror_low, mirror_high = gaffke_interval_batch(1 - x, valid, 0.05)
    assert np.allclose(mirror_low, 1 - high) and np.allclose(mirror_high, 1 - low)


@pytest.mark.parametrize(
    ("n", "share", "low_value", "high_value"),
    [(5, 0.2, 0.0, 1.0), (30, 0.05, 0.0, 0.5), (100, 0.2, 0.0, 1.0), (100, 0.01, 0.9, 1.0), (300, 0.5, 0.0, 0.05)],
)
def test_two_point_worlds_miss_at_most_nominally(n: int, share: float, low_value: float, high_value: float) -> None:
    rng = np.random.default_rng([2026, n, int(share * 1000)])
    series = 2000
    x = np.where(rng.random((series, n)) < share, low_value, high_value)
    mu = share * low_value + (1 - share) * high_value
    low = gaffke_lower_batch(x, np.ones_like(x, dtype=bool), 0.025)
    limit = 0.025 + 3 * math.sqrt(0.025 * 0.975 / series)
    assert float(np.mean(low > mu)) <= limit
