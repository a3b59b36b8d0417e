"""bench/stats/early_limit.py (issue 28, part 3): its exact dynamic programming agrees with seeded simulation, its
exact designs confirm falsely at most 0.025 under peeking at every look, its copy of the product's union-bound design
is the product's arithmetic, and its Gaussian integration spends exactly the error."""

from __future__ import annotations

import importlib
import math
import sys

import numpy as np
import pytest

from aqven.research.stats.sequential import look_alphas
from support.paths import REPO

sys.path.insert(0, str(REPO / "bench" / "stats"))

el = importlib.import_module("early_limit")  # bench/stats is no package


def _simulated(sizes: list[int], bounds: list[int], p: float, series: int, seed: int) -> tuple[float, np.ndarray]:
    """Confirmed at any look, and the saving of each series (a series that never confirms runs all N)."""
    n = sizes[-1]
    passes = np.cumsum(np.random.default_rng(seed).random((series, n)) < p, axis=1)[:, np.array(sizes) - 1]
    hit = passes >= np.array(bounds)
    first = np.where(hit.any(axis=1), hit.argmax(axis=1), len(sizes) - 1)
    return float(hit.any(axis=1).mean()), 1 - np.array(sizes)[first] / n


@pytest.mark.parametrize(("line", "n"), [(0.90, 159), (0.95, 400)])
def test_exact_design_matches_simulation_and_stays_within_the_error_at_the_line(line: float, n: int) -> None:
    """The bench's 20-look design spending 0.025·t^0.1: the exact chance of confirming at the line (every population
    of one-attempt cases gives Bernoulli passes at its mean) is at most 0.025, and 20,000 seeded series at the line
    and at the truth agree with the dynamic programming."""
    sizes = el.look_sizes(n, "20 looks")
    bounds = el.exact_bounds(sizes, line, 0.1)
    exact_false = float(el.crossings(sizes, bounds, line).sum())
    assert exact_false <= 0.025
    series = 20_000
    sd = math.sqrt(0.025 * 0.975 / series)
    sim_false, _ = _simulated(sizes, bounds, line, series, seed=28)
    assert abs(sim_false - exact_false) <= 4 * sd
    for below in (line - 0.02, line - 0.1):  # below the line the chance is smaller
        assert float(el.crossings(sizes, bounds, below).sum()) < exact_false
    first = el.crossings(sizes, bounds, 0.97)
    sim_power, saving = _simulated(sizes, bounds, 0.97, series, seed=29)
    assert abs(sim_power - float(first.sum())) <= 4 * math.sqrt(0.25 / series)
    assert abs(float(saving.mean()) - el.stops(sizes, first).mean_saving) <= 0.01


def test_the_exact_design_meets_both_targets_at_0_90_with_one_attempt_per_case() -> None:
    """The row the docs quote: 0.97 against 0.90, 20 looks, 0.025·t^0.1, its own N 159 (80% power)."""
    r = el.evaluate("exact", "20 looks", 0.1, 0.90, el.exact_design(0.1))
    assert r.n == 159
    assert r.at_n.median_saving == pytest.approx(0.447, abs=5e-4) and r.at_3n.median_saving >= 0.65
    assert max(r.false_n, r.false_3n) <= 0.025 and r.meets()


def test_the_product_row_is_the_products_arithmetic_and_clopper_pearson() -> None:
    """With one attempt per case Gaffke's bound at the product's errors gives the Clopper–Pearson pass counts."""
    for line in (0.90, 0.95):
        for n in (40, 152, 333, 1154):
            sizes = el.look_sizes(n, "20 looks")
            shares = look_alphas(0.025, len(sizes))
            assert el.product_bounds(sizes, line) == el.union_bounds(sizes, line, shares)


def test_gaussian_integration_spends_the_error_and_matches_simulation() -> None:
    times = np.arange(1, 21) / 20
    design = el.gaussian_design(times, 1.0)
    assert design.spent == pytest.approx(0.025, abs=1e-9)
    assert float(design.first(0.0).sum()) == pytest.approx(0.025, abs=1e-6)
    rng = np.random.default_rng(7)
    paths = np.cumsum(rng.standard_normal((100_000, 20)) * math.sqrt(1 / 20), axis=1)
    z = 3.0
    simulated = paths + z * times  # drift 3 by t = 1
    # The design's boundary on the score: cross at look k where the null mass removed starts.
    bounds = np.array([x.min() for x, _ in design.crossed])
    crossed = (simulated >= bounds).any(axis=1).mean()
    assert abs(crossed - float(design.first(z).sum())) <= 0.01
