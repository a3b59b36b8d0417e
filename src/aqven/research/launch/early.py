"""What a ``stop_early`` series should expect to run: attempts until a look decides, at the planning numbers.

The plan simulates 1,000 series of the planned size at the planning numbers (rate, intra-case correlation,
the between-variant correlation and the difference a dev series measured, or the defaults), reads the
sequence of `aqven.research.stats.sequential` at its looks, and stops each at the first look that decides, as
the series would (`aqven.research.stats.plan_sim.simulate_sequential`). With one attempt per case of a one-rate
question the figures are the exact chances of the design such a series decides by
(`aqven.research.stats.exact_sequential`, `plan_sim.exact_sequential_outcome`), not a simulation.
Deterministic (a fixed seed): the same plan gives the same figure. The truth it plans at is the planning
rate, which for a threshold without a dev series is the bound itself — where a series decides late or not at
all — so without dev numbers the figure is cautious.
"""

from __future__ import annotations

import math
from typing import Any

from aqven.research.stats import plan_sim
from aqven.research.stats.questions import is_paired
from aqven.research.stats.sequential import look_lengths

__all__ = ["expected_attempts"]


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
    rho_between: float = 0.5,
    level: float = 0.95,
) -> dict[str, Any]:
    """Mean attempts, the median saving (1 − cases run ÷ planned, per series) and the share of series that stop
    early, for the plan's ``stop_early`` block."""
    planned = cases * repeats * variants
    if not look_lengths(cases, cases):
        return {"expected_attempts": planned, "attempts": planned, "median_saving": 0.0, "stops_early_share": 0.0}
    pop = (
        plan_sim.paired_population(rate, rho, rho_between, difference)
        if is_paired(kind)
        else plan_sim.beta_population(rate, rho)
    )
    out = plan_sim.simulate_sequential(pop, cases, repeats, level, line, at_least)
    return {
        "expected_attempts": math.ceil(out.expected_cases * repeats * variants),
        "attempts": planned,
        "median_saving": round(out.median_saving, 3),
        "stops_early_share": round(out.stops_early, 3),
    }
