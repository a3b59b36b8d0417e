"""bench/stats/validity_cost.py (issue 28, part 4): its counts arithmetic is the methods' own on per-case data,
and its seeded measurements show what the table says (pooled Wilson undercovers with correlated repeats,
AQVEN's interval does not)."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from aqven.research.stats import naive_wilson_batch, one_rate_batch
from support.paths import REPO

sys.path.insert(0, str(REPO / "bench" / "stats"))

vc = importlib.import_module("validity_cost")  # bench/stats is no package


def _cases(values: np.ndarray, counts: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-case passes and attempts (series, n) from counts of cases at each per-case mean."""
    y = np.stack([np.repeat(values * r, row.astype(int)) for row in counts])
    return y, np.full_like(y, float(r))


def test_counts_arithmetic_is_the_per_case_arithmetic() -> None:
    values, probs = vc.beta_world(0.95, 0.3, 3)
    counts = vc.draw(probs, 60, 50, seed=3)
    y, r = _cases(values, counts, 3)
    low, high = vc.interval("AQVEN", values, counts, 3, 0, 0)
    _, low1, high1 = one_rate_batch(y, r)
    assert np.allclose(low, low1, atol=1e-9) and np.allclose(high, high1, atol=1e-9)
    low, high = vc.interval("Wilson", values, counts, 3, 0, 0)
    _, low1, high1 = naive_wilson_batch(y, r)
    assert np.allclose(low, low1) and np.allclose(high, high1)
    # Inspect AI's stderr() on the per-case means: sample sd (ddof 1) over √n.
    low, high = vc.interval("clustered SE", values, counts, 3, 0, 0)
    means = y / r
    se = means.std(axis=1, ddof=1) / np.sqrt(means.shape[1])
    assert np.allclose(high - low, 2 * vc.Z * se)
    # The bimodal world is the family's, with the asked mean.
    bvalues, bprobs = vc.bimodal_world(0.98, 5)
    assert float(bprobs @ bvalues) == pytest.approx(0.98, abs=1e-12)


def test_pooled_wilson_undercovers_where_aqven_does_not() -> None:
    values, probs = vc.beta_world(0.95, 0.3, 5)
    wilson = vc.coverage("Wilson", probs, values, 100, 5, 0.95, 2000, 7, 0)
    aqven = vc.coverage("AQVEN", probs, values, 100, 5, 0.95, 2000, 7, 0)
    assert wilson < 0.90 and aqven >= 0.94, (wilson, aqven)
    assert vc.oracle_cases(0.95, 0.3, 5) == 201
