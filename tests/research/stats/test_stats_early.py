"""The stop_early sequence (issue 28, part 3): the error spent across the looks, valid under peeking at every
look on worst-case worlds at the line, and planned at the size it needs. Seeded simulations of known truth."""

from __future__ import annotations

import numpy as np
import pytest

from aqven.research.stats import exact_sequential, plan_sim
from aqven.research.stats.betting import sequence_interval_batch
from aqven.research.stats.gaffke import gaffke_lower_batch, gaffke_lower_counts
from aqven.research.stats.sequential import (
    LOOKS,
    look_alphas,
    look_lengths,
    sequence_bounds_batch,
    sequence_bounds_counts,
    sequence_rate,
)


def _counts_at_looks(rng: np.random.Generator, probs: np.ndarray, cases: int, series: int) -> np.ndarray:
    lengths = look_lengths(cases, cases)
    steps = np.diff(np.concatenate([[0], lengths]))
    new = np.stack([rng.multinomial(int(k), probs, size=series) for k in steps], axis=1)
    return np.cumsum(new, axis=1).astype(np.float64)


def test_the_looks_spend_exactly_the_error_of_a_side() -> None:
    for looks in (LOOKS, 10, 3, 1):
        spend = look_alphas(0.025, looks)
        assert spend.sum() == pytest.approx(0.025) and (spend >= 0).all() and spend[-1] > 0
    assert np.count_nonzero(look_alphas(0.025)) == 5


@pytest.mark.parametrize(("low_rate", "repeats"), [(0.0, 5), (0.5, 5), (0.0, 1)])
def test_peeking_at_every_look_confirms_falsely_at_most_alpha_on_two_point_worlds_at_the_line(
    low_rate: float, repeats: int
) -> None:
    """Case rates at two points with mean exactly 0.9 (a rare value far below the rest): read at each of the
    20 looks and "confirmed" if any look's running lower bound clears 0.9. The sequence stays within 0.025
    (CP slack for 3,000 series); Gaffke's fixed-size bound at 0.025 read at every look does not."""
    line, cases, series = 0.9, 300, 3000
    share = (1.0 - line) / (1.0 - low_rate)
    pop = plan_sim.Population.of([low_rate, 1.0], [share, 1 - share])
    values, probs = plan_sim._value_probabilities(pop, repeats)
    counts = _counts_at_looks(np.random.default_rng(2028), probs / probs.sum(), cases, series)
    low, _ = sequence_bounds_counts(values, counts, 0.05)
    assert float((low > line).any(axis=1).mean()) <= 0.025 + 2 * np.sqrt(0.025 * 0.975 / series)
    control = counts[:1000]
    grid = np.tile(values, (control.shape[0] * LOOKS, 1))
    fixed = gaffke_lower_counts(grid, control.reshape(-1, len(values)), 0.025).reshape(-1, LOOKS)
    assert float((fixed > line).any(axis=1).mean()) > 0.04  # the negative control: each look is another chance


def test_the_per_case_and_the_counted_sequence_agree() -> None:
    rng = np.random.default_rng(5)
    series, cases, repeats = 40, 120, 3
    x = rng.binomial(repeats, rng.beta(9, 1, size=(series, cases))) / repeats
    lengths = np.array(look_lengths(cases, cases), dtype=np.int64)
    low, high = sequence_bounds_batch(x, np.ones_like(x, dtype=bool), 0.05, np.tile(lengths, (series, 1)))
    values = np.arange(repeats + 1) / repeats
    counts = np.stack([(x[:, :, None] == values)[:, :length].sum(axis=1) for length in lengths], axis=1)
    low2, high2 = sequence_bounds_counts(values, counts.astype(np.float64), 0.05)
    np.testing.assert_allclose(low, low2, atol=1e-9)
    np.testing.assert_allclose(high, high2, atol=1e-9)
    one = sequence_rate(list(x[0]), [repeats] * cases, cases, 0.95)
    assert one.low == pytest.approx(low[0, -1]) and one.high == pytest.approx(high[0, -1])


def test_counted_bounds_ignore_values_no_case_has() -> None:
    """A grid value with count 0 above every case (the all-fail value of a mirrored upper bound) once turned a
    bound into garbage: three all-pass cases and one at 0.8 had an upper bound of 0.9."""
    values = np.array([[1.0, 0.8, 0.6, 0.4, 0.2, 0.0]])
    counts = np.array([[0.0, 0.0, 0.0, 0.0, 1.0, 3.0]])
    direct = gaffke_lower_batch(np.array([[0.0, 0.0, 0.0, 0.2]]), np.ones((1, 4), dtype=bool), 0.001)
    assert gaffke_lower_counts(values, counts, 0.001)[0] == pytest.approx(direct[0], rel=1e-6)
    assert direct[0] < 0.001


def test_stop_early_saves_more_than_the_betting_sequence_at_the_same_planned_size() -> None:
    """0.97 against 0.90, one attempt per case, N = 3 × the stop_early plan: the exact design such a series now
    decides by saves a median of at least 0.65 of the cases, the union-bound sequence (the design of series with
    several attempts per case) too, and the betting sequence both replaced, read at the same looks of the same
    series, saves less than either."""
    pop = plan_sim.beta_population(0.97, 0.0)
    plan = plan_sim.sequential_cases_to_decide(pop, 1, 0.95, 0.9, True)
    assert plan is not None and plan.cases == 159  # the exact design's own 80%-power N (bench/stats/early_limit.py)
    fixed = plan_sim.cases_to_decide(pop, 1, 0.95, 0.9, True)
    assert fixed is not None and plan.cases > fixed.cases  # the sequence needs more cases for the same power
    n, series = 3 * plan.cases, 300
    x = (np.random.default_rng(9).random((series, n)) < 0.97).astype(np.float64)
    lengths = np.array(look_lengths(n, n), dtype=np.int64)
    seen = np.tile(lengths, (series, 1))

    def median_saving(low: np.ndarray) -> float:
        decided = low > 0.9
        first = np.where(decided.any(axis=1), decided.argmax(axis=1), LOOKS - 1)
        return float(np.median(1 - lengths[first] / n))

    design = exact_sequential.design(n, 0.9, tuple(int(v) for v in lengths), True)
    exact = np.where(np.cumsum(x, axis=1)[:, lengths - 1] >= np.array(design.upper), 1.0, 0.0)
    union, _ = sequence_bounds_batch(x, np.ones_like(x, dtype=bool), 0.05, seen)
    old, _ = sequence_interval_batch(x, np.ones_like(x, dtype=bool), 0.05, seen, tuned_for=n)
    assert median_saving(exact) >= 0.65 and median_saving(union) >= 0.65
    assert median_saving(exact) > median_saving(union) > median_saving(old)
