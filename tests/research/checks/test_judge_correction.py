"""Judge correction (Rogan–Gladen) against seeded simulations of known truth: a judge with known sensitivity and
specificity labels attempts of cases with a known true rate; the corrected interval covers the truth, the
uncorrected one visibly does not."""

from __future__ import annotations

import numpy as np
import pytest

from aqven.research.stats.intervals import NoData, one_rate, paired_difference
from aqven.research.stats.judge_correction import (
    JudgeAccuracy,
    agreement_tallies,
    correct_difference,
    correct_rate,
    corrected_bounds,
    rogan_gladen,
)

SE, SP = 0.90, 0.80


def agreement(rng: np.random.Generator, cases: int = 60, repeats: int = 3) -> JudgeAccuracy:
    """A judge-agreement series: `cases` human-labelled passing and as many failing, each judged `repeats` times."""
    pos = rng.binomial(repeats, SE, size=cases)
    neg = rng.binomial(repeats, SP, size=cases)
    return JudgeAccuracy(
        "experiments/agree/findings/ser_sim.yaml",
        "agree",
        "ser_sim",
        tuple((float(y), repeats) for y in pos),
        tuple((float(y), repeats) for y in neg),
    )


def judged(rng: np.random.Generator, rates: np.ndarray, repeats: int) -> list[tuple[float, int]]:
    """Per case: how many of its `repeats` attempts the judge passed (each attempt truly passes with the case's
    rate; the judge passes a good one with probability SE and a bad one with 1 − SP)."""
    good = rng.random((len(rates), repeats)) < rates[:, None]
    says = np.where(good, rng.random(good.shape) < SE, rng.random(good.shape) < 1 - SP)
    return [(float(s), repeats) for s in says.sum(axis=1)]


def beta_rates(rng: np.random.Generator, mean: float, kappa: float, n: int) -> np.ndarray:
    return rng.beta(mean * kappa, (1 - mean) * kappa, size=n)


def test_rogan_gladen_inverts_the_judge() -> None:
    for p in (0.0, 0.2, 0.85, 1.0):
        q = SE * p + (1 - SP) * (1 - p)
        assert rogan_gladen(q, SE, SP) == pytest.approx(p)
        # With a share g of the attempts judged (the rest are model failures, true failures):
        g = 0.9
        q = SE * p * g + (1 - SP) * (g - p * g)
        assert rogan_gladen(q, SE, SP, g) == pytest.approx(p * g)
    with pytest.raises(ValueError, match="better than a coin"):
        rogan_gladen(0.5, 0.5, 0.5)


def test_corner_bounds_are_the_extremes_of_the_box() -> None:
    rng = np.random.default_rng(3)
    q, se, sp = (0.70, 0.80), (0.85, 0.95), (0.75, 0.90)
    low, high = corrected_bounds(q, se, sp) or (np.nan, np.nan)
    lows, highs = np.array([q[0], se[0], sp[0]]), np.array([q[1], se[1], sp[1]])
    pts = [rogan_gladen(*(float(x) for x in rng.uniform(lows, highs))) for _ in range(20_000)]
    assert low <= min(pts) and max(pts) <= high
    assert min(pts) - low < 0.01 and high - max(pts) < 0.01
    # A judge not shown to beat a coin: no bound at all.
    assert corrected_bounds(q, (0.4, 0.9), (0.5, 0.9)) is None


def test_corrected_interval_covers_the_truth_and_the_uncorrected_one_does_not() -> None:
    rng = np.random.default_rng(20261201)
    truth, n, repeats, series = 0.85, 300, 3, 500
    hits = raw_hits = 0
    widths, estimates, raw_estimates = [], [], []
    for _ in range(series):
        acc = agreement(rng)
        cells = judged(rng, beta_rates(rng, truth, 8, n), repeats)
        fixed = correct_rate(cells, acc, 0.95)
        raw = one_rate(cells, 0.95)
        hits += fixed.interval.low <= truth <= fixed.interval.high
        raw_hits += raw.low <= truth <= raw.high
        widths.append(fixed.interval.half_width)
        estimates.append(fixed.interval.estimate)
        raw_estimates.append(raw.estimate)
        assert fixed.informative and fixed.observed_level == 0.975 and fixed.accuracy_level == 0.9875
    coverage, raw_coverage = hits / series, raw_hits / series
    assert coverage >= 0.94, coverage
    # The judge reports 0.9·0.85 + 0.2·0.15 = 0.795: the uncorrected interval sits well below the truth.
    assert float(np.mean(raw_estimates)) == pytest.approx(0.795, abs=0.005)
    assert raw_coverage < 0.1, raw_coverage
    assert float(np.mean(estimates)) == pytest.approx(truth, abs=0.005)
    # The price: about ±0.16 here, most of it from measuring Se and Sp on 60 + 60 labelled cases (the judged
    # rate's own interval is guarded on both bounds by the distribution-free interval).
    assert float(np.median(widths)) < 0.17


def test_model_failures_are_true_failures_not_judge_errors() -> None:
    rng = np.random.default_rng(7)
    mean, fail, n, repeats, series = 0.9, 0.1, 150, 2, 400
    truth = mean * (1 - fail)  # a model failure fails the attempt whatever the judge would have said
    hits = 0
    gaps, estimates = [], []
    for _ in range(series):
        acc = agreement(rng)
        rates = beta_rates(rng, mean, 10, n)
        broken = rng.random((n, repeats)) < fail
        good = rng.random((n, repeats)) < rates[:, None]
        says = np.where(good, rng.random((n, repeats)) < SE, rng.random((n, repeats)) < 1 - SP) & ~broken
        cells = [(float(s), repeats) for s in says.sum(axis=1)]
        share = float(np.mean((~broken).sum(axis=1) / repeats))
        fixed = correct_rate(cells, acc, 0.95, judged_share=share)
        plain = correct_rate(cells, acc, 0.95)
        hits += fixed.interval.low <= truth <= fixed.interval.high
        gaps.append(fixed.interval.estimate - plain.interval.estimate)
        estimates.append(fixed.interval.estimate)
    assert hits / series >= 0.94, hits / series
    assert float(np.mean(estimates)) == pytest.approx(truth, abs=0.005)
    # Treating model failures as judged ones (g = 1) underestimates the rate by (1 − Sp)(1 − g)/(Se + Sp − 1).
    assert float(np.mean(gaps)) == pytest.approx(0.2 * fail / 0.7, abs=0.002)


def test_paired_difference_is_corrected_consistently() -> None:
    rng = np.random.default_rng(11)
    n, repeats, series = 150, 3, 400
    # B passes 15 points more on every case, up to 1: the population difference, from a million cases.
    big = beta_rates(np.random.default_rng(0), 0.7, 6, 1_000_000)
    truth = float(np.mean(np.clip(big + 0.15, 0, 1) - big))
    hits = raw_hits = 0
    estimates, raw_estimates = [], []
    for _ in range(series):
        acc = agreement(rng)
        base = beta_rates(rng, 0.7, 6, n)
        better = np.clip(base + 0.15, 0, 1)
        a, b = judged(rng, base, repeats), judged(rng, better, repeats)
        fixed = correct_difference(a, b, acc, 0.95)
        raw = paired_difference(a, b, 0.95)
        hits += fixed.interval.low <= truth <= fixed.interval.high
        raw_hits += raw.low <= truth <= raw.high
        estimates.append(fixed.interval.estimate)
        raw_estimates.append(raw.estimate)
        # Correcting each variant's rate with the same Se and Sp, then differencing, gives the same estimate.
        ra, rb = correct_rate(a, acc, 0.95), correct_rate(b, acc, 0.95)
        if 0 < ra.interval.estimate < 1 and 0 < rb.interval.estimate < 1:
            assert fixed.interval.estimate == pytest.approx(rb.interval.estimate - ra.interval.estimate)
    assert hits / series >= 0.94, hits / series
    # The judge shrinks differences by Se + Sp − 1 = 0.7; the corrected estimate is unbiased.
    assert float(np.mean(raw_estimates)) == pytest.approx(0.7 * truth, abs=0.005)
    assert float(np.mean(estimates)) == pytest.approx(truth, abs=0.005)
    assert raw_hits < hits


def test_agreement_tallies_split_by_label_and_name_no_case() -> None:
    cells = [("c3", 2.0, 3), ("c1", 3.0, 3), ("c2", 1.0, 3), ("c4", 0.0, 0), ("c5", 3.0, 3)]
    labels = {"c1": True, "c2": False, "c3": True, "c4": True}
    pos, neg = agreement_tallies(cells, labels)
    assert pos == [(2.0, 3), (3.0, 3)] and neg == [(1.0, 3)]  # c4 has no attempt, c5 no label
    with pytest.raises(NoData):
        agreement_tallies(cells, {"c1": True})
    acc = JudgeAccuracy("f.yaml", "agree", "ser_a", tuple(pos), tuple(neg))
    assert JudgeAccuracy.from_json(acc.to_json()) == acc


def test_a_judge_no_better_than_a_coin_gives_the_whole_range() -> None:
    acc = JudgeAccuracy("f.yaml", "agree", "ser_a", ((2.0, 4), (3.0, 4)), ((2.0, 4), (1.0, 4)))
    got = correct_rate([(3.0, 4)] * 20, acc, 0.95)
    assert not got.informative and (got.interval.low, got.interval.high) == (0.0, 1.0)
    diff = correct_difference([(3.0, 4)] * 20, [(4.0, 4)] * 20, acc, 0.95)
    assert not diff.informative and (diff.interval.low, diff.interval.high) == (-1.0, 1.0)


# ---- in the verdict -------------------------------------------------------------------------------------------


def _accuracy(cases: int, se: float, sp: float, repeats: int = 4) -> JudgeAccuracy:
    def side(rate: float) -> tuple[tuple[float, int], ...]:
        agreed = round(rate * cases * repeats)
        rows = [(float(min(repeats, max(0, agreed - i * repeats))), repeats) for i in range(cases)]
        return tuple(rows)

    return JudgeAccuracy("experiments/agree/findings/ser_a.yaml", "agree", "ser_a", side(se), side(sp))


def test_decide_corrects_and_says_by_which_finding() -> None:
    from aqven.research.stats.judge_correction import JudgeCorrection
    from aqven.research.stats.verdict import QuestionSpec, Scope, decide

    q = QuestionSpec(kind="threshold", metric="tone", bound=0.5, margin=0.05)
    cells = {"as_written": [(f"c{i}", 3.0 if i % 10 < 7 else 0.0, 3) for i in range(400)]}
    scope = Scope(cases=400, repeats=3, on="holdout")
    acc = _accuracy(400, 0.95, 0.95)
    plain = decide(q, cells, on="holdout", scope=scope)
    fixed = decide(q, cells, on="holdout", scope=scope, judge=JudgeCorrection(acc))
    i, j = plain.decided[0].interval, fixed.decided[0].interval
    assert j.estimate == pytest.approx((0.7 + 0.95 - 1) / 0.9)
    assert j.high - j.low > i.high - i.low
    assert fixed.judge_corrected_by == acc.finding
    assert "corrected for the judge's errors by finding experiments/agree/findings/ser_a.yaml" in fixed.text
    assert "(Rogan–Gladen; sensitivity 0.950, specificity 0.950)" in fixed.text
    assert "corrected" not in plain.text and plain.judge_corrected_by is None
    data = fixed.to_json()
    assert data["decided"][0]["judge_correction"]["observed"]["estimate"] == pytest.approx(0.7)
    assert data["cells"][0]["judge_corrected"]["estimate"] == pytest.approx(j.estimate)
    # A loosely measured judge: its Se and Sp alone leave the interval wider than the margin.
    loose = decide(q, cells, on="holdout", scope=scope, judge=JudgeCorrection(_accuracy(8, 0.8, 0.8)))
    assert loose.verdict == "inconclusive" and loose.below_mde and loose.cases_to_decide is None
    assert "no number of cases would narrow it to the margin while the judge's sensitivity" in loose.text


def test_decide_corrects_a_paired_question_and_model_failures() -> None:
    from aqven.research.stats.judge_correction import JudgeCorrection
    from aqven.research.stats.verdict import QuestionSpec, Scope, decide

    q = QuestionSpec(kind="compare", metric="tone", baseline="a", margin=0.05)
    cells = {
        "a": [(f"c{i}", 2.0 if i % 2 else 0.0, 2) for i in range(300)],
        "b": [(f"c{i}", 2.0 if i % 4 else 0.0, 2) for i in range(300)],
    }
    scope = Scope(cases=300, repeats=2, on="holdout")
    acc = _accuracy(300, 0.9, 0.9)
    fixed = decide(q, cells, on="holdout", scope=scope, judge=JudgeCorrection(acc))
    c = fixed.decided[0]
    assert c.correction is not None and c.interval.estimate == pytest.approx(0.25 / 0.8)
    assert fixed.to_json()["comparisons"][0]["judge_correction"]["method"] == "rogan_gladen"
    # Every failure of b on the first 60 cases was a model failure: no judge read those attempts.
    unjudged = {"b": {f"c{i}": 2 for i in range(0, 60, 4)}}
    shared = decide(q, cells, on="holdout", scope=scope, judge=JudgeCorrection(acc, unjudged))
    assert shared.decided[0].correction is not None
    assert shared.decided[0].correction.judged_share == pytest.approx((1.0, 1 - 15 / 300))
    # The share b's judge read is lower: (1 − Sp)·(g_b − g_a) is negative, the corrected difference higher.
    assert shared.decided[0].interval.estimate == pytest.approx((0.25 + 0.1 * 15 / 300) / 0.8)
