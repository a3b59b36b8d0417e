"""Issue 28, part 1: more failures never help.

Every interval a verdict stands on is non-increasing in both bounds when a pass becomes a failure or a
score goes down (and non-decreasing in the mirror case), and `decide()` never moves toward "confirmed"
when one attempt gets worse for the claim. First the audit's reproductions (public functions only), then
property tests over random series of every kind (hypothesis).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from aqven.research.stats import (
    JudgeAccuracy,
    QuestionSpec,
    Scope,
    correct_difference,
    correct_rate,
    decide,
    one_rate,
    paired_difference,
)

Cells = list[tuple[float, int]]
TOL = 1e-9
"""Round-off the bounds may move by (the saddlepoint root search stops at 1e-10)."""

PROPERTY = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- the audit's reproductions -------------------------------------------------------------------------


def test_one_more_failure_does_not_raise_the_low_bound_of_a_few_hard_cases() -> None:
    a = [(20.0, 20)] * 17 + [(15.0, 20), (15.0, 20), (12.0, 20)]
    b = [(20.0, 20)] * 16 + [(19.0, 20), (15.0, 20), (15.0, 20), (12.0, 20)]  # a with one more failure
    assert one_rate(b).low <= one_rate(a).low  # was 0.75859 → 0.78513


def _c(k: int) -> Cells:
    return [(19.0, 20)] * k + [(20.0, 20)] * (100 - k)


def test_a_third_failing_case_does_not_confirm_at_least() -> None:
    two, three = one_rate(_c(2)).low, one_rate(_c(3)).low
    assert three <= two  # was 0.96177 → 0.96222
    q = QuestionSpec("threshold", "ok", bound=0.962)
    order = [_decision(q, {"a": _named(_c(k))}) for k in (2, 3)]
    assert _rank(order[1]) <= _rank(order[0])


def test_a_third_failing_case_does_not_confirm_noninferior() -> None:
    base: Cells = [(20.0, 20)] * 100
    two, three = (paired_difference(base, _c(k)).low for k in (2, 3))
    assert three <= two  # was −0.03957 → −0.03778
    q = QuestionSpec("noninferior", "ok", margin=0.0385, baseline="a")
    order = [_decision(q, {"a": _named(base), "b": _named(_c(k))}) for k in (2, 3)]
    assert _rank(order[1]) <= _rank(order[0])


def test_a_third_passing_case_does_not_confirm_at_most() -> None:
    def at_most(k: int) -> Cells:
        return [(1.0, 20)] * k + [(0.0, 20)] * (100 - k)

    two, three = one_rate(at_most(2)).high, one_rate(at_most(3)).high
    assert three >= two  # was 0.03823 → 0.03778
    q = QuestionSpec("threshold", "ok", bound=0.038, direction="at_most")
    order = [_decision(q, {"a": _named(at_most(k))}) for k in (2, 3)]
    assert _rank(order[1]) <= _rank(order[0])


def test_a_third_lower_score_does_not_raise_the_low_bound() -> None:
    def scores(k: int) -> Cells:
        return [(2.85, 3)] * k + [(3.0, 3)] * (100 - k)

    assert one_rate(scores(3)).low <= one_rate(scores(2)).low


# ---- property tests ----------------------------------------------------------------------------------


@st.composite
def series(draw: st.DrawFn, *, scores: bool = False, equal: bool = False, min_cases: int = 1) -> Cells:
    """A random series: 1–40 cases, each with 1–8 counted attempts (equal or not) and its passes (or scores),
    skewed toward the hard populations: mostly passing cases with a few that fail now and then."""
    n = draw(st.integers(min_cases, 40))
    shared = draw(st.integers(1, 8))
    easy = draw(st.floats(0.5, 1.0))
    out: Cells = []
    for _ in range(n):
        r = shared if equal else draw(st.integers(1, 8))
        hard = draw(st.booleans()) and draw(st.booleans())
        if scores:
            top = float(r) if not hard else draw(st.floats(0.0, float(r)))
            y = draw(st.floats(min(top, r * easy), top))
        else:
            y = float(draw(st.integers(0, r)) if hard else r - draw(st.integers(0, max(0, round(r * (1 - easy))))))
        out.append((y, r))
    return out


def _worse(cells: Cells, i: int, scores: bool, amount: float) -> Cells:
    """Case ``i`` with one pass turned into a failure (or its score lowered by ``amount`` of its total)."""
    y, r = cells[i]
    step = y * amount if scores else 1.0
    out = list(cells)
    out[i] = (y - step, r)
    return out


def _check_one_rate(cells: Cells, i: int, scores: bool, amount: float) -> None:
    assume(cells[i][0] > 0)
    before, after = one_rate(cells), one_rate(_worse(cells, i, scores, amount))
    assert after.low <= before.low + TOL
    assert after.high <= before.high + TOL


@PROPERTY
@given(series(), st.integers(0, 39))
def test_one_rate_bounds_never_rise_when_a_pass_fails_unequal_repeats(cells: Cells, i: int) -> None:
    _check_one_rate(cells, i % len(cells), False, 0.0)


@PROPERTY
@given(series(equal=True), st.integers(0, 39))
def test_one_rate_bounds_never_rise_when_a_pass_fails_equal_repeats(cells: Cells, i: int) -> None:
    _check_one_rate(cells, i % len(cells), False, 0.0)


@PROPERTY
@given(series(scores=True), st.integers(0, 39), st.floats(1e-6, 1.0))
def test_one_rate_bounds_never_rise_when_a_score_goes_down(cells: Cells, i: int, amount: float) -> None:
    _check_one_rate(cells, i % len(cells), True, amount)


@PROPERTY
@given(series(), st.integers(0, 39))
def test_at_most_the_high_bound_never_falls_when_a_failure_passes(cells: Cells, i: int) -> None:
    """The mirror: more passes of a rate that must stay low never lower its high bound."""
    i %= len(cells)
    y, r = cells[i]
    assume(y < r)
    after = list(cells)
    after[i] = (y + 1, r)
    assert one_rate(after).high >= one_rate(cells).high - TOL
    assert one_rate(after).low >= one_rate(cells).low - TOL


@st.composite
def pairs(draw: st.DrawFn, *, scores: bool = False) -> tuple[Cells, Cells]:
    a = draw(series(scores=scores))
    b = draw(series(scores=scores, min_cases=len(a)))[: len(a)]
    return a, b


@PROPERTY
@given(pairs(), st.integers(0, 39), st.booleans())
def test_paired_bounds_follow_each_variant(ab: tuple[Cells, Cells], i: int, in_b: bool) -> None:
    """B − A: a B pass that fails never raises a bound; an A pass that fails never lowers one."""
    a, b = ab
    i %= len(a)
    side = b if in_b else a
    assume(side[i][0] > 0)
    worse = _worse(side, i, False, 0.0)
    before = paired_difference(a, b)
    after = paired_difference(a, worse) if in_b else paired_difference(worse, b)
    if in_b:
        assert after.low <= before.low + TOL and after.high <= before.high + TOL
    else:
        assert after.low >= before.low - TOL and after.high >= before.high - TOL


@PROPERTY
@given(pairs(scores=True), st.integers(0, 39), st.floats(1e-6, 1.0))
def test_paired_bounds_fall_when_a_score_of_b_goes_down(ab: tuple[Cells, Cells], i: int, amount: float) -> None:
    a, b = ab
    i %= len(a)
    assume(b[i][0] > 0)
    before, after = paired_difference(a, b), paired_difference(a, _worse(b, i, True, amount))
    assert after.low <= before.low + TOL and after.high <= before.high + TOL


JUDGE = JudgeAccuracy(
    finding="findings/judge.md",
    experiment_id="judge_agreement",
    series_id="ser_judge",
    positives=tuple([(3.0, 3)] * 55 + [(2.0, 3)] * 5),
    negatives=tuple([(0.0, 3)] * 50 + [(1.0, 3)] * 10),
)


@PROPERTY
@given(series(), st.integers(0, 39), st.floats(0.5, 1.0))
def test_judge_corrected_rate_never_rises_when_the_judge_fails_one_more(cells: Cells, i: int, share: float) -> None:
    i %= len(cells)
    assume(cells[i][0] > 0)
    before = correct_rate(cells, JUDGE, 0.95, share).interval
    after = correct_rate(_worse(cells, i, False, 0.0), JUDGE, 0.95, share).interval
    assert after.low <= before.low + TOL and after.high <= before.high + TOL


@PROPERTY
@given(pairs(), st.integers(0, 39))
def test_judge_corrected_difference_never_rises_when_b_fails_one_more(ab: tuple[Cells, Cells], i: int) -> None:
    a, b = ab
    i %= len(a)
    assume(b[i][0] > 0)
    before = correct_difference(a, b, JUDGE, 0.95).interval
    after = correct_difference(a, _worse(b, i, False, 0.0), JUDGE, 0.95).interval
    assert after.low <= before.low + TOL and after.high <= before.high + TOL


# ---- decide() ----------------------------------------------------------------------------------------

RANK = {"refuted": 0, "inconclusive": 1, "confirmed": 2}


def _rank(decision: str) -> int:
    return RANK[decision]


def _named(cells: Cells) -> list[tuple[str, float, int]]:
    return [(f"c{j}", y, r) for j, (y, r) in enumerate(cells)]


def _decision(q: QuestionSpec, cells: dict[str, list[tuple[str, float, int]]]) -> str:
    first = next(iter(cells.values()))
    v = decide(q, cells, on="holdout", scope=Scope(len(first), 1, "holdout"))
    assert v.verdict in RANK, v.verdict
    return v.verdict


QUESTIONS: dict[str, Callable[[float, float], QuestionSpec]] = {
    "at_least": lambda b, m: QuestionSpec("threshold", "ok", bound=b, margin=m / 4),
    "at_most": lambda b, m: QuestionSpec("threshold", "ok", bound=b, margin=m / 4, direction="at_most"),
    "compare": lambda b, m: QuestionSpec("compare", "ok", margin=m / 4, baseline="a"),
    "noninferior": lambda b, m: QuestionSpec("noninferior", "ok", margin=m / 2 + 0.001, baseline="a"),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(QUESTIONS)),
    st.floats(0.3, 0.99),
    st.floats(0.0, 0.2),
    series(),
    series(),
    series(),
    st.integers(0, 39),
    st.sampled_from(["a", "b", "c"]),
)
def test_decide_never_moves_toward_confirmed_when_an_attempt_gets_worse(
    kind: str, bound: float, margin: float, a: Cells, b: Cells, c: Cells, i: int, who: str
) -> None:
    """Worse for the claim: a pass that fails (at least, and any compared variant of a paired question), a
    failure that passes (at most, and the baseline of a paired question)."""
    q = QUESTIONS[kind](bound, margin)
    paired = kind in ("compare", "noninferior")
    n = min(len(a), len(b), len(c)) if paired else len(a)
    sides = {"a": a[:n], "b": b[:n], "c": c[:n]} if paired else {"a": a}
    target = who if paired else "a"
    i %= n
    y, r = sides[target][i]
    up = (paired and target == "a") or kind == "at_most"  # the change that hurts the claim adds a pass
    assume(y < r if up else y > 0)
    worse = dict(sides)
    worse[target] = list(sides[target])
    worse[target][i] = (y + 1 if up else y - 1, r)
    before = _decision(q, {k: _named(v) for k, v in sides.items()})
    after = _decision(q, {k: _named(v) for k, v in worse.items()})
    assert _rank(after) <= _rank(before), (before, after)


@pytest.mark.parametrize("k", range(0, 8))
def test_more_failing_cases_never_raise_the_low_bound_step_by_step(k: int) -> None:
    """The reproduction's family walked further: from k to k + 1 cases that fail once in 20."""
    assert one_rate(_c(k + 1)).low <= one_rate(_c(k)).low + TOL
    assert paired_difference([(20.0, 20)] * 100, _c(k + 1)).low <= paired_difference([(20.0, 20)] * 100, _c(k)).low
