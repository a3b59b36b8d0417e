"""Correcting a rate a judge decides for the judge's own errors (Rogan–Gladen), with its uncertainty.

A judge check passes a good output with probability Se (its *sensitivity*) and fails a bad one with
probability Sp (its *specificity*). On attempts whose true pass rate is ``p``, the rate it reports is

    q = Se·p + (1 − Sp)·(1 − p)          so          p = (q + Sp − 1)/(Se + Sp − 1)

(Rogan & Gladen, 1978). A judge-agreement experiment (``judge_agreement`` in its experiment file) measures
Se on held-out cases people labelled as passing and Sp on those they labelled as failing; its finding keeps
those per-case agreement tallies (`JudgeAccuracy`). A series deciding on that judge then reports the corrected
rate.

**The interval.** Three things are uncertain: the judge-decided rate ``q`` of this series, Se and Sp. The
error ``α`` of the deciding interval is split (Bonferroni) — ``α/2`` for ``q``, ``α/4`` each for Se and Sp —
so that with probability at least ``1 − α`` all three lie in their intervals at once. The corrected
function is monotone in each argument separately (in ``q`` because ``Se + Sp − 1 > 0``; in Se and in Sp
because, the others fixed, it is a ratio of linear functions without a pole in the box), so over the box of
the three intervals its minimum and maximum are at corners: the corrected bounds are the smallest and
largest of the 8 corner values, clipped to [0, 1] (or [−1, 1] for a difference). This holds without the
usual side conditions (``q ≤ Se``, a positive numerator), which only say *which* corner is the extreme.
When the Se and Sp intervals allow ``Se + Sp ≤ 1`` (a judge not shown to beat a coin), the correction is
unbounded and the interval is the whole range: the verdict cannot be decided, and the sentence says why.

**Attempts the judge never saw.** A model failure (the flow broke its output type, refused, …) is a counted
failure that no judge read: it is a true failure, not a judge error. With ``g`` the share of the counted
attempts the judge did read (per case, averaged over cases as the rate is), the observed rate is
``q = Se·p + (1 − Sp)·(g − p)``, so ``p = (q − (1 − Sp)·g)/(Se + Sp − 1)``; with no model failure ``g = 1``
and this is the textbook formula. ``g`` is observed without error, so it stays fixed in the corners.

**Paired questions** (compare, noninferior). Both variants are judged by the same check, hence the same Se
and Sp, and the correction is linear in ``q``: the corrected difference is
``(Δq − (1 − Sp)·(g_B − g_A))/(Se + Sp − 1)``, with ``Δq`` the paired difference's interval at ``α/2`` and the
same corner rule. Correcting each variant's per-case means and then differencing gives exactly this.

**The assumption.** The judge is as accurate on this series' attempts as on the agreement experiment's
held-out cases (the same judge, rubric and kind of output). A judge that changes needs its own validation.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aqven.research.stats.intervals import Interval, NoData, one_rate, paired_difference

__all__ = [
    "SHARE_OBSERVED",
    "SHARE_SENSITIVITY",
    "SHARE_SPECIFICITY",
    "Corrected",
    "JudgeAccuracy",
    "agreement_tallies",
    "correct_difference",
    "correct_rate",
    "corrected_bounds",
    "rogan_gladen",
]

SHARE_OBSERVED: Final[float] = 0.5
"""Share of the interval's error spent on the judge-decided rate (or difference) of the series."""
SHARE_SENSITIVITY: Final[float] = 0.25
SHARE_SPECIFICITY: Final[float] = 0.25

Tallies = Sequence[tuple[float, int]]


@dataclass(frozen=True)
class JudgeAccuracy:
    """What a judge-agreement finding measured: per held-out case, how often the judge agreed with the human
    label, for the cases labelled passing (``positives``: sensitivity) and failing (``negatives``: specificity)."""

    finding: str
    """The finding file, relative to the project root."""
    experiment_id: str
    series_id: str
    positives: tuple[tuple[float, int], ...]
    negatives: tuple[tuple[float, int], ...]

    def sensitivity(self, level: float) -> Interval:
        return one_rate(self.positives, level)

    def specificity(self, level: float) -> Interval:
        return one_rate(self.negatives, level)

    def to_json(self) -> dict[str, Any]:
        return {
            "finding": self.finding,
            "experiment_id": self.experiment_id,
            "series_id": self.series_id,
            "positives": [list(t) for t in self.positives],
            "negatives": [list(t) for t in self.negatives],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JudgeAccuracy:
        return cls(
            finding=str(data["finding"]),
            experiment_id=str(data["experiment_id"]),
            series_id=str(data["series_id"]),
            positives=tuple((float(y), int(r)) for y, r in data["positives"]),
            negatives=tuple((float(y), int(r)) for y, r in data["negatives"]),
        )


@dataclass(frozen=True)
class Corrected:
    """A corrected interval and what it stands on."""

    interval: Interval
    """The corrected estimate and bounds (cases and attempts are the series')."""
    observed: Interval
    """The judge-decided interval, at `observed_level`."""
    observed_level: float
    sensitivity: Interval
    specificity: Interval
    accuracy_level: float
    """The level of each of the sensitivity and specificity intervals."""
    informative: bool
    """False when the judge is not shown to beat a coin (Se + Sp ≤ 1 in the box): the interval is the range."""
    judged_share: tuple[float, ...] = field(default=(1.0,))
    accuracy: JudgeAccuracy | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        def cell(i: Interval, level: float) -> dict[str, Any]:
            return {"estimate": i.estimate, "low": i.low, "high": i.high, "level": level}

        return {
            "method": "rogan_gladen",
            "finding": self.accuracy.finding if self.accuracy else None,
            "series_id": self.accuracy.series_id if self.accuracy else None,
            "informative": self.informative,
            "observed": cell(self.observed, self.observed_level),
            "sensitivity": cell(self.sensitivity, self.accuracy_level)
            | {"cases": self.sensitivity.n_cases, "attempts": self.sensitivity.n_attempts},
            "specificity": cell(self.specificity, self.accuracy_level)
            | {"cases": self.specificity.n_cases, "attempts": self.specificity.n_attempts},
            "judged_share": list(self.judged_share),
        }


def rogan_gladen(q: float, se: float, sp: float, judged: float = 1.0) -> float:
    """``(q − (1 − Sp)·g)/(Se + Sp − 1)``: the true rate behind a judge-decided rate ``q`` (unclipped)."""
    d = se + sp - 1
    if d <= 0:
        raise ValueError("the correction needs Se + Sp > 1 (a judge better than a coin)")
    return (q - (1 - sp) * judged) / d


def corrected_bounds(
    q: tuple[float, float],
    se: tuple[float, float],
    sp: tuple[float, float],
    judged: float = 1.0,
    *,
    lowest: float = 0.0,
) -> tuple[float, float] | None:
    """The smallest and largest corrected value over the box ``q × Se × Sp`` (its 8 corners), clipped to
    ``[lowest, 1]``; None when ``Se + Sp ≤ 1`` somewhere in the box. ``judged`` is ``g`` (or ``g_B − g_A``
    for a difference)."""
    if se[0] + sp[0] - 1 <= 0:
        return None
    values = [rogan_gladen(a, b, c, judged) for a, b, c in itertools.product(q, se, sp)]
    return _clip(min(values), lowest), _clip(max(values), lowest)


def _clip(x: float, lowest: float) -> float:
    return min(max(x, lowest), 1.0)


def _accuracy(accuracy: JudgeAccuracy, level: float) -> tuple[Interval, Interval, float, float]:
    """Sensitivity and specificity intervals at their share of the error; and the observed level."""
    alpha = 1 - level
    sens_level = 1 - alpha * SHARE_SENSITIVITY
    spec_level = 1 - alpha * SHARE_SPECIFICITY
    assert sens_level == spec_level  # one level for both keeps the record simple
    return (
        accuracy.sensitivity(sens_level),
        accuracy.specificity(spec_level),
        sens_level,
        1 - alpha * SHARE_OBSERVED,
    )


def correct_rate(tallies: Tallies, accuracy: JudgeAccuracy, level: float, judged_share: float = 1.0) -> Corrected:
    """The corrected rate of a judge-decided series with a ``level`` interval; raises `NoData` when the series
    or either side of the agreement finding has no counted attempt."""
    sens, spec, acc_level, obs_level = _accuracy(accuracy, level)
    observed = one_rate(tallies, obs_level)
    box = corrected_bounds((observed.low, observed.high), (sens.low, sens.high), (spec.low, spec.high), judged_share)
    if box is None or sens.estimate + spec.estimate - 1 <= 0:
        estimate = observed.estimate
        low, high, informative = 0.0, 1.0, False
    else:
        estimate = _clip(rogan_gladen(observed.estimate, sens.estimate, spec.estimate, judged_share), 0.0)
        (low, high), informative = box, True
    interval = Interval(min(max(estimate, low), high), low, high, observed.n_cases, observed.n_attempts)
    return Corrected(interval, observed, obs_level, sens, spec, acc_level, informative, (judged_share,), accuracy)


def correct_difference(
    a: Tallies,
    b: Tallies,
    accuracy: JudgeAccuracy,
    level: float,
    judged_a: float = 1.0,
    judged_b: float = 1.0,
) -> Corrected:
    """The corrected paired difference ``B − A`` of two judge-decided variants on the same cases."""
    sens, spec, acc_level, obs_level = _accuracy(accuracy, level)
    observed = paired_difference(a, b, obs_level)
    dg = judged_b - judged_a
    box = corrected_bounds((observed.low, observed.high), (sens.low, sens.high), (spec.low, spec.high), dg, lowest=-1)
    if box is None or sens.estimate + spec.estimate - 1 <= 0:
        estimate = observed.estimate
        low, high, informative = -1.0, 1.0, False
    else:
        estimate = _clip(rogan_gladen(observed.estimate, sens.estimate, spec.estimate, dg), -1.0)
        (low, high), informative = box, True
    interval = Interval(min(max(estimate, low), high), low, high, observed.n_cases, observed.n_attempts)
    return Corrected(interval, observed, obs_level, sens, spec, acc_level, informative, (judged_a, judged_b), accuracy)


def agreement_tallies(
    cells: Sequence[tuple[str, float, int]], labels: Mapping[str, bool]
) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """Split a judge-agreement series' per-case agreement tallies by the human label: (positives, negatives),
    each sorted so that the finding lists no case in an order that names it. Cases without a label are left out.
    Raises `NoData` when either side has no counted attempt."""
    positives = sorted((y, r) for name, y, r in cells if r > 0 and labels.get(name) is True)
    negatives = sorted((y, r) for name, y, r in cells if r > 0 and labels.get(name) is False)
    if not positives or not negatives:
        raise NoData("a judge-agreement series needs counted attempts on cases labelled passing and failing")
    return positives, negatives


def agreement_record(
    variant: str,
    label: str,
    positive: Any,
    cells: Sequence[tuple[str, float, int]],
    labels: Mapping[str, bool],
    level: float = 0.95,
) -> dict[str, Any] | None:
    """The ``judge_agreement`` block of a judge-agreement finding: sensitivity and specificity with their
    intervals, and the per-case tallies behind them (unnamed, sorted) so that a series correcting for this judge
    can put them at the level its own error split needs. None when one side has no counted attempt."""
    try:
        positives, negatives = agreement_tallies(cells, labels)
    except NoData:
        return None

    def side(tallies: Tallies) -> dict[str, Any]:
        i = one_rate(tallies, level)
        return {
            "estimate": i.estimate,
            "low": i.low,
            "high": i.high,
            "level": level,
            "cases": i.n_cases,
            "attempts": i.n_attempts,
        }

    return {
        "variant": variant,
        "label": label,
        "positive": positive,
        "sensitivity": side(positives),
        "specificity": side(negatives),
        "tallies": {"positive": [list(t) for t in positives], "negative": [list(t) for t in negatives]},
    }


def accuracy_of(finding: str, data: Mapping[str, Any]) -> JudgeAccuracy | None:
    """The judge accuracy a finding's ``judge_agreement`` block measured; None when it has none (or a broken one)."""
    block = data.get("judge_agreement")
    if not isinstance(block, Mapping):
        return None
    try:
        tallies = block["tallies"]
        return JudgeAccuracy.from_json(
            {
                "finding": finding,
                "experiment_id": data["experiment_id"],
                "series_id": data["series_id"],
                "positives": tallies["positive"],
                "negatives": tallies["negative"],
            }
        )
    except (KeyError, TypeError, ValueError):
        return None


@dataclass(frozen=True)
class JudgeCorrection:
    """What `aqven.research.stats.verdict.decide` needs to correct a judge-decided verdict."""

    accuracy: JudgeAccuracy
    unjudged: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """variant -> case -> counted attempts no judge read (model failures)."""

    def share(self, variant: str, cells: Sequence[tuple[str, float, int]], only: set[str] | None = None) -> float:
        """``g``: the share of counted attempts the judge read, per case, averaged over the cases with counted
        attempts (or over `only`), as the rate averages them."""
        counted: dict[str, int] = {}
        for name, _y, r in cells:
            counted[name] = counted.get(name, 0) + r
        failed = self.unjudged.get(variant, {})
        shares = [
            (r - failed.get(name, 0)) / r for name, r in counted.items() if r > 0 and (only is None or name in only)
        ]
        return sum(shares) / len(shares) if shares else 1.0


def limit_half_width(corrected: Corrected) -> float:
    """The corrected half-width with the series' own rate known exactly (infinitely many cases): what the judge's
    measured sensitivity and specificity alone leave open. More cases cannot narrow an interval below it."""
    s, p = corrected.sensitivity, corrected.specificity
    obs = corrected.observed.estimate
    dg = corrected.judged_share[-1] - corrected.judged_share[0] if len(corrected.judged_share) == 2 else None
    g = dg if dg is not None else corrected.judged_share[0]
    box = corrected_bounds((obs, obs), (s.low, s.high), (p.low, p.high), g, lowest=-1.0 if dg is not None else 0.0)
    return math.inf if box is None else (box[1] - box[0]) / 2
