"""What a ``stop_early`` series should expect to run: attempts until a look decides, at the planning rate.

The plan simulates 400 series of the planned size at the planning numbers (rate, intra-case correlation,
the difference a dev series measured, or none), reads the confidence sequence of
`aqven.research.stats.sequential` at its 20 looks, and stops each at the first look that decides, as the series
would. Deterministic (a fixed seed): the same plan gives the same figure. The truth it plans at is the
planning rate, which for a threshold without a dev series is the bound itself — where a series decides
late or not at all — so without dev numbers the figure is cautious.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

from aqven.research.stats.betting import sequence_interval_batch
from aqven.research.stats.questions import is_paired
from aqven.research.stats.sequential import look_lengths

__all__ = ["expected_attempts"]

SERIES: Final[int] = 400
SEED: Final[int] = 20_261_201


def expected_attempts(
    *,
    kind: str,
    line: float,
    at_least: bool,
    rate: float,
    rho: float,
    cases: int,
    repeats: int,
    variants: int,
    difference: float = 0.0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Mean attempts and the share of series that stop early, for the plan's ``stop_early`` block."""
    planned = cases * repeats * variants
    lengths = look_lengths(cases, cases)
    if not lengths:
        return {"expected_attempts": planned, "attempts": planned, "stops_early_share": 0.0}
    rng = np.random.default_rng(SEED)
    q = _case_rates(rng, rate, rho, cases)
    x = rng.binomial(repeats, q).astype(np.float64) / repeats
    if is_paired(kind):
        qb = np.clip(q + difference, 0.0, 1.0)
        xb = rng.binomial(repeats, qb).astype(np.float64) / repeats
        x = (1.0 + xb - x) / 2  # the per-case difference, mapped to [0, 1] as the sequence reads it
        line = (1.0 + line) / 2
    seen = np.tile(np.array(lengths, dtype=np.int64), (SERIES, 1))
    lows, highs = sequence_interval_batch(x, np.ones_like(x, dtype=bool), 1 - level, seen, tuned_for=cases)
    decided = (lows > line) | (highs <= line) if at_least else (highs < line) | (lows >= line)
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), len(lengths) - 1)
    per_case = repeats * variants
    attempts = np.array(lengths)[first] * per_case
    return {
        "expected_attempts": math.ceil(float(attempts.mean())),
        "attempts": planned,
        "stops_early_share": round(float(np.mean(decided.any(axis=1) & (first < len(lengths) - 1))), 3),
    }


def _case_rates(rng: np.random.Generator, rate: float, rho: float, cases: int) -> np.ndarray:
    rate = min(max(rate, 1e-6), 1 - 1e-6)
    if rho <= 0:
        return np.full((SERIES, cases), rate)
    a, b = rate * (1 - rho) / rho, (1 - rate) * (1 - rho) / rho
    out: np.ndarray = rng.beta(a, b, size=(SERIES, cases))
    return out
