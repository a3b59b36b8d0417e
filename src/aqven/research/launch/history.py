"""Planning estimates from a dev series of the same experiment (DESIGN §7 "Launch plan").

A launch plan assumes a planning rate and an intra-case correlation (`aqven.research.stats.planning`).
When the experiment already ran on working (dev) cases *on the same inputs* — the same inputs hash, so
the same flow, prompts, agents, checks and dataset — its tallies are a better guess than the defaults:

* **rate**: the passes of the deciding variants over their counted attempts, shrunk a little towards
  0.5 as ``(passes + 0.5)/(attempts + 1)``, so that a small dev series that never failed does not
  plan with a rate of exactly 1 (zero variance, zero cases needed: a plan that lies).
* **intra-case correlation ρ**: the one-way ANOVA estimate over cases (clamped to [0, 1]) — only from
  at least `MIN_CASES_FOR_RHO` cases with two or more counted attempts and a rate strictly between 0
  and 1; otherwise the default, and the plan says which.
* **between-variant correlation** (paired questions): the Pearson correlation of the baseline's and
  the other variant's per-case means on the cases both have, clamped to [0, 0.95], from at least
  `MIN_CASES_FOR_RHO` such cases; otherwise the default.
* **differences** (paired questions): each compared variant's dev difference ``B − A``, the planning
  effect of the `power` estimate.

Only a `done` series counts, the newest first; held-out series are never read for planning.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from aqven.research.experiments.inputs import manifest_hash, series_manifest, without_cases
from aqven.research.experiments.schema import ExperimentSource
from aqven.research.experiments.workspace import Workspace
from aqven.research.stats.questions import QUESTION_KINDS, is_paired
from aqven.store.series import SeriesStore
from aqven.store.series_tally import read_tally

MIN_CASES_FOR_RHO: Final[int] = 5
"""Fewer cases than this estimate a correlation too poorly to plan with: the default is kept."""
MAX_SERIES_LOOKED_AT: Final[int] = 200
RHO_BETWEEN_MAX: Final[float] = 0.95

Tallies = Sequence[tuple[float, int]]


@dataclass(frozen=True)
class DevEstimates:
    """What one dev series says about the rate and its spread; None where it cannot say."""

    series_id: str
    cases: int
    attempts: int
    rate: float
    rho: float | None
    rho_between: float | None = None
    differences: tuple[float, ...] = ()
    """Paired questions: the dev difference ``B − A`` of each compared variant, in order."""


def dev_estimates(ws: Workspace, store: SeriesStore, exp: ExperimentSource, *, simulated: bool) -> DevEstimates | None:
    """The estimates of the newest done dev series of `exp` on today's inputs (in the same simulated or
    live mode), or None when there is none with a counted attempt."""
    spec = exp.spec
    # The same inputs but the cases (a dev series ran other cases than the planned one will).
    today = series_manifest(
        ws, flow_id=spec.subject.flow, variants=spec.variant_ids, experiment_id=exp.id, simulated=simulated
    )
    wanted = manifest_hash(without_cases(today))
    for s in store.list_series(experiment_id=exp.id, status="done", limit=MAX_SERIES_LOOKED_AT):
        if s.kind != "experiment" or s.on != "dev" or s.simulated != simulated:
            continue
        if manifest_hash(without_cases(s.inputs)) != wanted:
            continue
        tally = read_tally(store.db, s.id)
        cells = {v: [tally.cells.get(v, {}).get(c, (0.0, 0)) for c in s.plan.cases] for v in s.plan.variants}
        found = estimates_from_cells(s.id, spec.question.kind, _deciding(exp, s.plan.variants), cells)
        if found is not None:
            return found
    return None


def _deciding(exp: ExperimentSource, variants: Sequence[str]) -> tuple[str | None, list[str]]:
    """(baseline or None, the variants the question decides on), as the verdict picks them."""
    q = exp.spec.question
    if QUESTION_KINDS[q.kind].paired:
        base = q.baseline or variants[0]
        others = [q.variant] if q.variant else [v for v in variants if v != base]
        return base, [v for v in others if v in variants]
    return None, [q.variant or variants[0]]


def estimates_from_cells(
    series_id: str,
    kind: str,
    deciding: tuple[str | None, list[str]],
    cells: dict[str, list[tuple[float, int]]],
) -> DevEstimates | None:
    """The estimates from per-variant, per-case tallies aligned by case (see the module docs)."""
    base, others = deciding
    names = ([base] if base else []) + others
    if not names or any(n not in cells for n in names):
        return None
    rows = [t for n in names for t in cells[n] if t[1] > 0]
    attempts = sum(r for _y, r in rows)
    if attempts == 0:
        return None
    passes = sum(y for y, _r in rows)
    rate = (passes + 0.5) / (attempts + 1)
    rhos = [r for r in (intra_case_correlation(cells[n]) for n in names) if r is not None]
    rho = sum(rhos) / len(rhos) if rhos else None
    cases = max(sum(1 for _y, r in cells[n] if r > 0) for n in names)
    if base is None or not is_paired(kind):
        return DevEstimates(series_id, cases, attempts, rate, rho)
    diffs, betweens = [], []
    for other in others:
        pairs = [(a, b) for a, b in zip(cells[base], cells[other], strict=True) if a[1] > 0 and b[1] > 0]
        if not pairs:
            continue
        diffs.append(_mean([b[0] / b[1] for _a, b in pairs]) - _mean([a[0] / a[1] for a, _b in pairs]))
        between = _pearson([a[0] / a[1] for a, _b in pairs], [b[0] / b[1] for _a, b in pairs])
        if between is not None and len(pairs) >= MIN_CASES_FOR_RHO:
            betweens.append(min(max(between, 0.0), RHO_BETWEEN_MAX))
    if not diffs:
        return None
    return DevEstimates(
        series_id,
        cases,
        attempts,
        rate,
        rho,
        rho_between=sum(betweens) / len(betweens) if betweens else None,
        differences=tuple(diffs),
    )


def intra_case_correlation(cells: Tallies) -> float | None:
    """The one-way ANOVA estimate of ρ for pass/fail attempts grouped by case, clamped to [0, 1]; None
    with fewer than `MIN_CASES_FOR_RHO` cases of two or more attempts, or a rate of 0 or 1.

    ``ρ = (MSB − MSW)/(MSB + (r₀ − 1)·MSW)`` with ``r₀ = (N − Σr²/N)/(n − 1)``. For scores in [0, 1] the
    within-case sum of squares ``Σ(y − y²/r)`` is an upper bound, so ρ is then underestimated a little.
    """
    rows = [(y, r) for y, r in cells if r >= 2]
    n = len(rows)
    if n < MIN_CASES_FOR_RHO:
        return None
    big_n = sum(r for _y, r in rows)
    mean = sum(y for y, _r in rows) / big_n
    if mean <= 0 or mean >= 1:
        return None
    ssb = sum(r * (y / r - mean) ** 2 for y, r in rows)
    ssw = sum(y - y * y / r for y, r in rows)
    msb = ssb / (n - 1)
    msw = ssw / (big_n - n)
    r0 = (big_n - sum(r * r for _y, r in rows) / big_n) / (n - 1)
    denominator = msb + (r0 - 1) * msw
    if denominator <= 0:
        return None
    return min(max((msb - msw) / denominator, 0.0), 1.0)


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if len(xs) < 2:
        return None
    mx, my = _mean(xs), _mean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)
