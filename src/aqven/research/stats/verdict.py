"""The verdict of a series and the sentence the server writes for it (DESIGN §7 "Verdicts").

`decide` turns per-case tallies into intervals (`aqven.research.stats.intervals`), applies the verdict table, then
the overrides, and writes one plain sentence that people and agents quote as is.

The table (``m`` = margin, ``b`` = bound, ``[L, U]`` the 95% interval):

=====================================  ==============  ==============  ============
question                               confirmed       refuted         inconclusive
=====================================  ==============  ==============  ============
threshold, at least b                  L > b + m       U ≤ b + m       otherwise
threshold, at most b (mirrored)        U < b − m       L ≥ b − m       otherwise
compare (B beats baseline A)           L > m           U ≤ m           otherwise
noninferior (B not worse than A)       L > −m          U ≤ −m          otherwise
=====================================  ==============  ==============  ============

For compare and noninferior, ``[L, U]`` is the interval of the paired difference ``B − A``.

* **below_mde**: an inconclusive result whose interval's half-width exceeds the margin — the series
  was too small to resolve an effect of the declared size. ``cases_to_decide`` then estimates how many
  cases would narrow the half-width to the margin: the observed cases are repeated to that many (same
  rate, same spread between cases, same repeats) and the interval recomputed.
* **signal** overrides confirmed, refuted and inconclusive when the series ran on dev (working) cases,
  or when the deciding check is a judge without ``validated_by``. What the table said is kept in
  ``would_be``.
* **invalid** overrides everything: ``cancelled``, ``stopped_at_cap``, ``inputs_changed``,
  ``infra_errors`` (more than 5% of the attempts, see `invalid_reason_for`) or ``no_data`` (the deciding
  variants have no counted attempt). ``would_be`` is not reported for an invalid series.

Several variants:

* threshold: the question's ``variant`` decides if named, else the first variant. Every variant still
  gets its interval in ``cells``.
* compare / noninferior: the question's ``variant`` is compared with the ``baseline`` if named (at 95%).
  Otherwise each of the ``k`` other variants is compared with the baseline at the Bonferroni level
  ``1 − 0.05/k``. The series is **confirmed** if any comparison is confirmed (the sentence names it),
  **refuted** if all are refuted, and inconclusive otherwise. A question without a baseline uses the first
  variant as its baseline.

Numbers in the sentence have 3 decimals; the verdict is decided on the unrounded numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from aqven.research.stats.exact_sequential import exact_rate
from aqven.research.stats.intervals import (
    Interval,
    NoData,
    one_rate,
    one_rate_batch,
    paired_difference,
    paired_difference_batch,
)
from aqven.research.stats.judge_correction import (
    Corrected,
    JudgeCorrection,
    correct_difference,
    correct_rate,
    corrected_bounds,
    limit_half_width,
)
from aqven.research.stats.questions import (
    QUESTION_KINDS,
    Decision,
    Direction,
    QuestionKind,
    classify,
    decision_line,
    kind_of,
)
from aqven.research.stats.sequential import SequenceView, sequence_difference, sequence_rate

__all__ = [
    "ALPHA",
    "INFRA_ERROR_LIMIT",
    "INVALID_REASONS",
    "MAX_CASES_TO_DECIDE",
    "CaseCell",
    "Comparison",
    "Decision",
    "InvalidReason",
    "QuestionSpec",
    "Scope",
    "Verdict",
    "VerdictName",
    "classify",
    "decide",
    "invalid_reason_for",
    "sentence",
]

VerdictName = Literal["confirmed", "refuted", "inconclusive", "signal", "invalid"]
InvalidReason = Literal["cancelled", "stopped_at_cap", "inputs_changed", "infra_errors", "no_data"]
SignalReason = Literal["dev_cases", "judge_unvalidated"]
On = Literal["dev", "holdout"]

INVALID_REASONS: Final[tuple[str, ...]] = get_args(InvalidReason)

ALPHA: Final[float] = 0.05
"""Two-sided error rate of every interval; split over k comparisons (Bonferroni)."""
INFRA_ERROR_LIMIT: Final[float] = 0.05
"""A series with more than this share of infrastructure errors among its attempts is invalid."""

MAX_CASES_TO_DECIDE: Final[int] = 1_000_000
"""Past this many cases, `Verdict.cases_to_decide` is None and the sentence says so."""

FloatArray = NDArray[np.float64]

CaseCell = tuple[str, float, int]
"""One case of one variant: (case name, passes — may be a fractional sum of scores —, counted attempts)."""


@dataclass(frozen=True)
class QuestionSpec:
    """The question of an experiment, as far as the verdict needs it."""

    kind: QuestionKind
    metric: str
    bound: float | None = None
    direction: Direction = "at_least"
    margin: float = 0.0
    baseline: str | None = None
    variant: str | None = None


@dataclass(frozen=True)
class Scope:
    """What the series ran on, for the sentence: cases per variant, repeats, which half, simulated."""

    cases: int
    repeats: int
    on: On
    simulated: bool = False
    stopped_early: tuple[int, int] | None = None
    """For a stop_early series that stopped because it was decided: (attempts run, attempts planned)."""


@dataclass(frozen=True)
class Comparison:
    """One decided interval: a variant's rate (threshold) or its difference from the baseline."""

    variant: str
    baseline: str | None
    interval: Interval
    level: float
    decision: Decision
    tallies: tuple[Sequence[tuple[float, int]], ...] = field(default=(), repr=False, compare=False)
    """The per-case (passes, attempts) the interval stands on: one list, or two aligned ones (A, B)."""
    correction: Corrected | None = field(default=None, repr=False, compare=False)
    """Set when the interval was corrected for the deciding judge's errors (`interval` is the corrected one)."""

    def to_json(self) -> dict[str, Any]:
        i = self.interval
        fixed = {"judge_correction": self.correction.to_json()} if self.correction else {}
        return fixed | {
            "variant": self.variant,
            "baseline": self.baseline,
            "estimate": i.estimate,
            "low": i.low,
            "high": i.high,
            "half_width": i.half_width,
            "level": self.level,
            "cases": i.n_cases,
            "attempts": i.n_attempts,
            "decision": self.decision,
        }


@dataclass(frozen=True)
class Verdict:
    """What a series concluded. ``text`` is the sentence to quote; the rest is its evidence.

    ``reason``: for ``invalid`` its reason; for ``signal`` the first reason (``dev_cases`` before
    ``judge_unvalidated``; ``signal_reasons`` has all). ``would_be``: for ``signal``, the verdict the
    table gave. ``decided`` holds the deciding intervals (one for threshold, one per comparison for
    compare/noninferior); ``cells`` every variant's 95% interval of the metric rate.
    """

    verdict: VerdictName
    text: str
    reason: str | None
    below_mde: bool
    would_be: Decision | None
    provisional: bool
    signal_reasons: tuple[SignalReason, ...] = ()
    decided_by: tuple[str, ...] = ()
    cases_to_decide: int | None = None
    decided: tuple[Comparison, ...] = ()
    cells: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    judge_corrected_by: str | None = None
    """The finding whose measured judge accuracy corrected the deciding intervals (issue 10), or None."""

    @property
    def comparisons(self) -> list[dict[str, Any]]:
        """The paired differences of a compare/noninferior question as JSON dicts (empty for threshold)."""
        return [c.to_json() for c in self.decided if c.baseline is not None]

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "text": self.text,
            "reason": self.reason,
            "below_mde": self.below_mde,
            "would_be": self.would_be,
            "provisional": self.provisional,
            "signal_reasons": list(self.signal_reasons),
            "decided_by": list(self.decided_by),
            "cases_to_decide": self.cases_to_decide,
            "decided": [c.to_json() for c in self.decided],
            "cells": [dict(c) for c in self.cells],
            "comparisons": self.comparisons,
            "judge_corrected_by": self.judge_corrected_by,
        }


# ---- the table ------------------------------------------------------------------------------------


def invalid_reason_for(
    *,
    cancelled: bool = False,
    stopped_at_cap: bool = False,
    inputs_changed: bool = False,
    infra_errors: int = 0,
    attempts: int = 0,
) -> InvalidReason | None:
    """The reason a finished series is invalid, or None. ``attempts`` counts every finished attempt,
    infrastructure errors included; more than 5% of them in infrastructure errors is invalid.
    The first reason that applies wins, in the order of the parameters."""
    if cancelled:
        return "cancelled"
    if stopped_at_cap:
        return "stopped_at_cap"
    if inputs_changed:
        return "inputs_changed"
    if attempts > 0 and infra_errors / attempts > INFRA_ERROR_LIMIT:
        return "infra_errors"
    return None


# ---- deciding -------------------------------------------------------------------------------------


def decide(
    question: QuestionSpec,
    cells: Mapping[str, Sequence[CaseCell]],
    *,
    on: On,
    judge_unvalidated: bool = False,
    invalid_reason: str | None = None,
    provisional: bool = False,
    scope: Scope,
    judge: JudgeCorrection | None = None,
    sequence: SequenceView | None = None,
) -> Verdict:
    """The verdict of a series from its per-variant, per-case tallies (see the module docs).

    ``cells`` maps each variant id, in the experiment's order, to its cases. With ``sequence`` (a
    stop_early series) the deciding intervals are those of its design over the finished prefix of the series'
    case order (`aqven.research.stats.sequential`; a rate with one attempt per case:
    `aqven.research.stats.exact_sequential`), whose decision is valid at every look: such a verdict is never
    provisional. Raises `ValueError` for a
    question that cannot be decided on these variants (unknown variant, a threshold without bound, a
    paired question with one variant, ``scope.on`` different from ``on``) or an unknown ``invalid_reason``.
    With ``judge``, the deciding intervals (and each cell's ``judge_corrected``) are corrected for the deciding
    judge's measured errors (`aqven.research.stats.judge_correction`), and the sentence says so.
    """
    _validate(question, cells, on, scope)
    if invalid_reason is not None and invalid_reason not in INVALID_REASONS:
        raise ValueError(f"unknown invalid reason {invalid_reason!r}; one of {', '.join(INVALID_REASONS)}")
    # A variant's 95% rate interval is computed once: a threshold question's deciding interval is the same one.
    known: dict[str, tuple[list[tuple[float, int]], Interval]] = {}
    rates = tuple(_rate_cell(question.metric, v, c, judge, known) for v, c in cells.items())
    decided: list[Comparison] = []
    reason: str | None = invalid_reason
    so_far = sequence is not None and provisional  # a stop_early series still running: valid at every look
    if sequence is not None:
        provisional = False
    try:
        if sequence is None:
            decided = _intervals(question, cells, judge, known)
        else:
            decided = _sequence_intervals(question, cells, sequence)
    except NoData:
        reason = reason or "no_data"
    if reason is not None:
        text = sentence(question, scope, "invalid", reason=reason, provisional=provisional, so_far=so_far)
        return Verdict("invalid", text, reason, False, None, provisional, cells=rates)

    decision = _combine([c.decision for c in decided])
    winners = tuple(c.variant for c in decided if c.decision == "confirmed")
    open_wide = [c for c in decided if c.decision == "inconclusive" and c.interval.half_width > question.margin]
    below_mde = decision == "inconclusive" and bool(open_wide)
    to_decide = _cases_to_decide(open_wide, question.margin) if below_mde else None
    flags: tuple[tuple[SignalReason, bool], ...] = (
        ("dev_cases", on == "dev"),
        ("judge_unvalidated", judge_unvalidated),
    )
    signals = tuple(r for r, hit in flags if hit)
    name: VerdictName = "signal" if signals else decision
    text = sentence(
        question,
        scope,
        name,
        decided=decided,
        decision=decision,
        cases_to_decide=to_decide,
        signals=signals,
        provisional=provisional,
        so_far=so_far,
    )
    return Verdict(
        verdict=name,
        text=text,
        reason=signals[0] if signals else None,
        below_mde=below_mde,
        would_be=decision if signals else None,
        provisional=provisional,
        signal_reasons=signals,
        decided_by=winners,
        cases_to_decide=to_decide,
        decided=tuple(decided),
        cells=rates,
        judge_corrected_by=judge.accuracy.finding if judge else None,
    )


def _validate(question: QuestionSpec, cells: Mapping[str, Sequence[CaseCell]], on: On, scope: Scope) -> None:
    spec = QUESTION_KINDS.get(question.kind)
    if spec is None or not spec.decides:
        raise ValueError(f"a {question.kind!r} question has no verdict")
    if question.direction not in ("at_least", "at_most"):
        raise ValueError(f"direction must be at_least or at_most, not {question.direction!r}")
    if not (question.margin >= 0 and math.isfinite(question.margin)):
        raise ValueError(f"margin must be a number ≥ 0, not {question.margin}")
    if spec.needs_bound:
        _bound(question)
    if scope.on != on:
        raise ValueError(f"scope.on {scope.on!r} differs from on {on!r}")
    if not cells:
        raise ValueError("a verdict needs at least one variant")
    for key in ("baseline", "variant"):
        value = getattr(question, key)
        if value is not None and value not in cells:
            raise ValueError(f"question.{key} {value!r} is not a variant of the series")
    if spec.paired:
        others = [v for v in cells if v != _baseline(question, cells)]
        if not others or question.variant == _baseline(question, cells):
            raise ValueError(f"a {question.kind} question needs a variant other than its baseline")


def _intervals(
    question: QuestionSpec,
    cells: Mapping[str, Sequence[CaseCell]],
    judge: JudgeCorrection | None = None,
    known: Mapping[str, tuple[list[tuple[float, int]], Interval]] | None = None,
) -> list[Comparison]:
    """The deciding intervals; raises `NoData` when one of them has nothing to stand on. `known`: the variants'
    tallies and 95% rate intervals already computed (`_rate_cell`)."""
    if not kind_of(question).paired:
        target = question.variant or next(iter(cells))
        done = (known or {}).get(target)
        tallies = done[0] if done is not None else _tallies(cells[target])
        fixed = None
        if judge is not None:
            fixed = correct_rate(tallies, judge.accuracy, 1 - ALPHA, judge.share(target, cells[target]))
        interval = fixed.interval if fixed else done[1] if done is not None else one_rate(tallies, 1 - ALPHA)
        decision = classify(question, interval.low, interval.high)
        return [Comparison(target, None, interval, 1 - ALPHA, decision, (tallies,), fixed)]
    base = _baseline(question, cells)
    others = [question.variant] if question.variant else [v for v in cells if v != base]
    level = 1 - ALPHA / len(others)
    out = []
    for variant in others:
        a, b = _aligned(cells[base], cells[variant])
        fixed = None
        if judge is not None:
            ma, mb = _merge(cells[base]), _merge(cells[variant])
            both = {n for n, (_y, r) in ma.items() if r > 0 and mb.get(n, (0.0, 0))[1] > 0}
            ga, gb = judge.share(base, cells[base], both), judge.share(variant, cells[variant], both)
            fixed = correct_difference(a, b, judge.accuracy, level, ga, gb)
        interval = fixed.interval if fixed else paired_difference(a, b, level)
        decision = classify(question, interval.low, interval.high)
        out.append(Comparison(variant, base, interval, level, decision, (a, b), fixed))
    return out


def _sequence_intervals(
    question: QuestionSpec, cells: Mapping[str, Sequence[CaseCell]], view: SequenceView
) -> list[Comparison]:
    """The deciding intervals of a stop_early series along the case order: with one attempt per case, a rate's
    from the exact group-sequential design at the question's line (`aqven.research.stats.exact_sequential`),
    else the union-bound sequence (`aqven.research.stats.sequential`)."""
    merged = {v: _merge(c) for v, c in cells.items()}

    def along(variant: str) -> list[tuple[float, int]]:
        return [merged[variant].get(name, (0.0, 0)) for name in view.prefix]

    if not kind_of(question).paired:
        target = question.variant or next(iter(cells))
        tallies = along(target)
        means = [y / r if r else 0.0 for y, r in tallies]
        counted = [r for _, r in tallies]
        if view.repeats == 1:
            interval = exact_rate(means, counted, view.planned_cases, 1 - ALPHA, decision_line(question))
        else:
            interval = sequence_rate(means, counted, view.planned_cases, 1 - ALPHA)
        decision = classify(question, interval.low, interval.high)
        return [Comparison(target, None, interval, 1 - ALPHA, decision, (tallies,))]
    base = _baseline(question, cells)
    others = [question.variant] if question.variant else [v for v in cells if v != base]
    level = 1 - ALPHA / len(others)
    out = []
    for variant in others:
        a, b = along(base), along(variant)
        interval = sequence_difference(a, b, view.planned_cases, level)
        decision = classify(question, interval.low, interval.high)
        out.append(Comparison(variant, base, interval, level, decision, (a, b)))
    return out


def _combine(decisions: Sequence[Decision]) -> Decision:
    if "confirmed" in decisions:
        return "confirmed"
    if all(d == "refuted" for d in decisions):
        return "refuted"
    return "inconclusive"


def _cases_to_decide(open_wide: Sequence[Comparison], margin: float) -> int | None:
    """About how many cases would narrow the widest open interval to the margin, or None past a million.

    The observed cases are repeated, in order, to ``n'`` cases (same rate, same spread between cases,
    same repeats) and the deciding interval is recomputed; ``n'`` is searched to within about 1%.
    """
    if margin <= 0 or not open_wide:
        return None
    needs = [_cases_for_margin(c, margin) for c in open_wide]
    return None if any(n is None for n in needs) else max(n for n in needs if n is not None)


def _cases_for_margin(c: Comparison, margin: float) -> int | None:
    arrays = [(np.array([t[0] for t in side]), np.array([float(t[1]) for t in side])) for side in c.tallies]
    counted = [(y[r > 0], r[r > 0]) for y, r in arrays] if len(arrays) == 1 else _paired_only(arrays)
    fix = c.correction
    if fix is not None and limit_half_width(fix) > margin:
        return None  # the judge's measured accuracy alone leaves the interval wider than the margin
    level = fix.observed_level if fix else c.level

    def narrow_enough(n: int) -> bool:
        rows = [(np.resize(y, n)[None, :], np.resize(r, n)[None, :]) for y, r in counted]
        if len(rows) == 1:
            _, low, high = one_rate_batch(rows[0][0], rows[0][1], level)
        else:
            _, low, high = paired_difference_batch(rows[0][0], rows[0][1], rows[1][0], rows[1][1], level)
        lo, hi = float(low[0]), float(high[0])
        if fix is not None:
            g = fix.judged_share[-1] - fix.judged_share[0] if len(rows) == 2 else fix.judged_share[0]
            se, sp = fix.sensitivity, fix.specificity
            box = corrected_bounds(
                (lo, hi), (se.low, se.high), (sp.low, sp.high), g, lowest=-1.0 if len(rows) == 2 else 0
            )
            if box is None:
                return False
            lo, hi = box
        return bool((hi - lo) / 2 <= margin)

    lo = hi = max(len(counted[0][0]), 1)
    while not narrow_enough(hi):
        if hi >= MAX_CASES_TO_DECIDE:
            return None
        lo, hi = hi, min(hi * 2, MAX_CASES_TO_DECIDE)
    while hi - lo > max(1, lo // 100):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if narrow_enough(mid) else (mid, hi)
    return hi


def _paired_only(arrays: Sequence[tuple[FloatArray, FloatArray]]) -> list[tuple[FloatArray, FloatArray]]:
    (ya, ra), (yb, rb) = arrays
    both = (ra > 0) & (rb > 0)
    return [(ya[both], ra[both]), (yb[both], rb[both])]


def _rate_cell(
    metric: str,
    variant: str,
    cases: Sequence[CaseCell],
    judge: JudgeCorrection | None,
    known: dict[str, tuple[list[tuple[float, int]], Interval]] | None = None,
) -> dict[str, Any]:
    """A variant's 95% interval of the metric rate, JSON-able (``None`` numbers without data); with a judge
    correction, ``judge_corrected`` holds the corrected rate (the other numbers are what the judge decided).
    The tallies and the interval go into `known`, for `_intervals`."""
    cell: dict[str, Any] = {"variant": variant, "metric": metric, "level": 1 - ALPHA}
    try:
        tallies = _tallies(cases)
        i = one_rate(tallies, 1 - ALPHA)
        if known is not None:
            known[variant] = (tallies, i)
        if judge is not None:
            f = correct_rate(tallies, judge.accuracy, 1 - ALPHA, judge.share(variant, cases)).interval
            cell["judge_corrected"] = {"estimate": f.estimate, "low": f.low, "high": f.high, "level": 1 - ALPHA}
    except NoData:
        counted = sum(c[2] for c in cases)
        return cell | dict.fromkeys(("estimate", "low", "high", "half_width"), None) | {"cases": 0, "attempts": counted}
    return cell | {
        "estimate": i.estimate,
        "low": i.low,
        "high": i.high,
        "half_width": i.half_width,
        "cases": i.n_cases,
        "attempts": i.n_attempts,
    }


def _baseline(question: QuestionSpec, cells: Mapping[str, Sequence[CaseCell]]) -> str:
    return question.baseline or next(iter(cells))


def _bound(question: QuestionSpec) -> float:
    if question.bound is None or not 0 <= question.bound <= 1:
        raise ValueError(f"a threshold question needs a bound in [0, 1], not {question.bound}")
    return question.bound


def _merge(cases: Sequence[CaseCell]) -> dict[str, tuple[float, int]]:
    """Per case name, in first-seen order; a name listed twice is summed."""
    if len({name for name, _p, _n in cases}) == len(cases):  # the usual case, one cell per name: no sums
        return {name: (0.0 + passes, 0 + counted) for name, passes, counted in cases}
    out: dict[str, tuple[float, int]] = {}
    for name, passes, counted in cases:
        y, r = out.get(name, (0.0, 0))
        out[name] = (y + passes, r + counted)
    return out


def _tallies(cases: Sequence[CaseCell]) -> list[tuple[float, int]]:
    return list(_merge(cases).values())


def _aligned(a: Sequence[CaseCell], b: Sequence[CaseCell]) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """Two variants' tallies aligned by case name; a case missing on one side has no attempts there."""
    ma, mb = _merge(a), _merge(b)
    names = list(ma) + [n for n in mb if n not in ma]
    return [ma.get(n, (0.0, 0)) for n in names], [mb.get(n, (0.0, 0)) for n in names]


# ---- the sentence ---------------------------------------------------------------------------------

_INVALID = {
    "cancelled": ("cancelled", "was cancelled before it finished"),
    "stopped_at_cap": ("stopped at the spend cap", "was stopped at its spend cap before it finished"),
    "inputs_changed": ("inputs changed", "ran on inputs that changed while it ran"),
    "infra_errors": ("infrastructure errors", "had more than 5% of its attempts end in infrastructure errors"),
    "no_data": ("no data", "has no counted attempt to decide on"),
}
_SIGNAL = {
    ("dev_cases",): ("working cases", "on held-out cases this would be"),
    ("judge_unvalidated",): ("judge without validated_by", "with a validated judge this would be"),
    ("dev_cases", "judge_unvalidated"): (
        "working cases and a judge without validated_by",
        "on held-out cases with a validated judge this would be",
    ),
}


def sentence(
    question: QuestionSpec,
    scope: Scope,
    verdict: VerdictName,
    *,
    decided: Sequence[Comparison] = (),
    decision: Decision | None = None,
    cases_to_decide: int | None = None,
    signals: Sequence[SignalReason] = (),
    reason: str | None = None,
    provisional: bool = False,
    so_far: bool = False,
) -> str:
    """The one sentence the server writes for a verdict: plain, exact, quotable.

    ``provisional``: a series still running, read on an interval made for its final size (not valid until
    the end). ``so_far``: a stop_early series still running, read on its confidence sequence (valid now).
    """
    where = _scope(scope)
    prefix = "Provisional (still running): " if provisional else ""
    if so_far:
        prefix = "So far (stop_early, valid at every look; still running): "
    if verdict == "invalid":
        short, long = _INVALID.get(reason or "", (reason or "unknown", "cannot be decided"))
        return f"{prefix}Invalid: {short} — the series on {where} {long}, so it decides nothing."
    claims = "; ".join(_claim(question, c) for c in decided)
    if len(decided) > 1:
        claims += f" — {len(decided)} variants compared with {decided[0].baseline}, each at {_pct(decided[0].level)}"
        claims += " (Bonferroni)"
    fixes = [c.correction for c in decided if c.correction is not None]
    if fixes:
        claims += _corrected(fixes[0])
    if decision == "inconclusive":
        claims += _too_wide(question, decided, cases_to_decide)
    if verdict == "signal":
        why, would = _SIGNAL[tuple(r for r in ("dev_cases", "judge_unvalidated") if r in signals)]
        return f"{prefix}Signal ({why}, not evidence) on {where}: {claims}; {would} {decision}{_early(scope)}."
    return f"{prefix}{verdict.capitalize()} on {where}: {claims}{_early(scope)}."


def _claim(q: QuestionSpec, c: Comparison) -> str:
    """What one interval says, in words, with its numbers (the kind's claim templates, `questions.py`)."""
    spec = kind_of(q)
    i = c.interval
    ci = f"{_pct(c.level)} CI"
    words: dict[str, str | None] = {
        "metric": q.metric,
        "variant": c.variant,
        "baseline": c.baseline,
        "by": f" by more than {_num(q.margin)}" if q.margin else "",
        "or_more": f" by {_num(q.margin)} or more" if q.margin else "",
        "nums": f"(difference {_diff(i.estimate)}, {ci} {_diff(i.low)} to {_diff(i.high)})",
    }
    if spec.needs_bound:
        b, m = _num(_bound(q)), q.margin
        words["line"] = f"{b} + {_num(m)}" if q.direction == "at_least" and m else f"{b} − {_num(m)}" if m else b
        words["side"] = "above" if q.direction == "at_least" else "below"
        words["head"] = (
            f"the {q.metric} rate of {c.variant} is {_rate(i.estimate)} ({ci} {_rate(i.low)} to {_rate(i.high)})"
        )
    confirmed, refuted, open_ = spec.claims
    template = {"confirmed": confirmed, "refuted": refuted, "inconclusive": open_}[c.decision]
    return template.format(**words)


def _corrected(fix: Corrected) -> str:
    """Which finding corrected the interval for the judge's errors, and with what."""
    where = f"by finding {fix.accuracy.finding}" if fix.accuracy else "by its agreement finding"
    if not fix.informative:
        return (
            f" — corrected for the judge's errors {where}, whose sensitivity and specificity do not show the judge "
            "beats a coin, so the corrected interval is the whole range"
        )
    se, sp = _rate(fix.sensitivity.estimate), _rate(fix.specificity.estimate)
    return f" — corrected for the judge's errors {where} (Rogan–Gladen; sensitivity {se}, specificity {sp})"


def _too_wide(q: QuestionSpec, decided: Sequence[Comparison], cases_to_decide: int | None) -> str:
    wide = [c for c in decided if c.decision == "inconclusive" and c.interval.half_width > q.margin]
    if not wide:
        return "; the interval is within the margin but still too wide to decide; more cases would decide it"
    widest = max(wide, key=lambda c: c.interval.half_width)
    whose = "its" if len(decided) == 1 else f"the half-width of {widest.variant},"
    text = f"; the interval is too wide to decide: {whose} half-width {_rate(widest.interval.half_width)}"
    text += f" exceeds the {_num(q.margin)} margin" if q.margin else " exceeds the margin of 0"
    if cases_to_decide is not None:
        text += f", and about {cases_to_decide} cases would narrow it to the margin"
    elif q.margin and widest.correction is not None and limit_half_width(widest.correction) > q.margin:
        text += (
            ", and no number of cases would narrow it to the margin while the judge's sensitivity and specificity "
            "are measured this loosely (label more cases for its agreement experiment)"
        )
    elif q.margin:
        text += f", and more than {MAX_CASES_TO_DECIDE} cases would be needed to narrow it to the margin"
    return text


def _early(scope: Scope) -> str:
    if scope.stopped_early is None:
        return ""
    ran, planned = scope.stopped_early
    return f" — stopped early at {ran:,} of {planned:,} attempts: decided"


def _scope(scope: Scope) -> str:
    kind = "held-out" if scope.on == "holdout" else "working"
    cases = f"{scope.cases} {kind} case{'' if scope.cases == 1 else 's'}"
    repeats = f"{scope.repeats} repeat{'' if scope.repeats == 1 else 's'}"
    return f"{cases} × {repeats}" + (" (simulated)" if scope.simulated else "")


def _rate(x: float) -> str:
    return f"{x:.3f}"


def _diff(x: float) -> str:
    text = f"{x:+.3f}"
    if text in ("+0.000", "-0.000"):
        return "0.000"
    return text.replace("-", "−")


def _num(x: float) -> str:
    """A declared number (bound, margin) as written: 0.97, 0.01, 0.5."""
    return format(x, ".10g")


def _pct(level: float) -> str:
    text = f"{level * 100:.1f}".removesuffix(".0")
    return f"{text}%"
