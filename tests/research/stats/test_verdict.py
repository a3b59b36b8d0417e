"""The verdict table, its overrides, several variants, and the sentence (DESIGN §7 "Verdicts")."""

from __future__ import annotations

import json
import math

import pytest

from aqven.research.stats.intervals import Interval, one_rate, paired_difference
from aqven.research.stats.verdict import (
    CaseCell,
    Comparison,
    QuestionSpec,
    Scope,
    classify,
    decide,
    invalid_reason_for,
    sentence,
)

HOLDOUT = Scope(212, 2, "holdout")


def cases(n: int, repeats: int, fails: int, prefix: str = "case") -> list[CaseCell]:
    """n cases × repeats; the first `fails` cases fail one attempt each."""
    return [(f"{prefix}{i}", float(repeats - (1 if i < fails else 0)), repeats) for i in range(n)]


def at_rate(n: int, repeats: int, passes_per_case: int) -> list[CaseCell]:
    return [(f"case{i}", float(passes_per_case), repeats) for i in range(n)]


# ---- the table at its boundaries ---------------------------------------------------------------------

# b = 0.75, m = 0.125: b ± m are exact in binary, so the boundaries are exact too.
AT_LEAST = QuestionSpec("threshold", "ok", bound=0.75, margin=0.125)
AT_MOST = QuestionSpec("threshold", "bad", bound=0.75, margin=0.125, direction="at_most")
COMPARE = QuestionSpec("compare", "ok", margin=0.125, baseline="a")
NONINFERIOR = QuestionSpec("noninferior", "ok", margin=0.125, baseline="a")
NEXT = math.ulp(1.0)


@pytest.mark.parametrize(
    ("question", "line"),
    [(AT_LEAST, 0.875), (COMPARE, 0.125), (NONINFERIOR, -0.125)],
)
def test_table_at_the_boundaries_of_at_least_kinds(question: QuestionSpec, line: float) -> None:
    # confirmed needs L strictly above the line; refuted needs U at or below it.
    assert classify(question, line + NEXT, line + 0.1) == "confirmed"
    assert classify(question, line, line + 0.1) == "inconclusive"
    assert classify(question, line - 0.1, line) == "refuted"
    assert classify(question, line - 0.1, line + NEXT) == "inconclusive"
    assert classify(question, line - 0.2, line - 0.1) == "refuted"
    assert classify(question, line - 0.1, line + 0.1) == "inconclusive"


def test_at_most_mirrors_at_least() -> None:
    line = 0.625  # b − m
    assert classify(AT_MOST, line - 0.1, line - NEXT / 2) == "confirmed"
    assert classify(AT_MOST, line - 0.1, line) == "inconclusive"
    assert classify(AT_MOST, line, line + 0.1) == "refuted"
    assert classify(AT_MOST, line - NEXT / 2, line + 0.1) == "inconclusive"
    # The mirror image: a failure rate at most b is a pass rate at least 1 − b.
    mirror = QuestionSpec("threshold", "ok", bound=0.25, margin=0.125)
    for low, high in [(0.1, 0.2), (0.5, 0.7), (0.62, 0.63), (0.7, 0.9), (0.0, 1.0), (0.3, 0.625)]:
        assert classify(AT_MOST, low, high) == classify(mirror, 1 - high, 1 - low)


def test_zero_margin() -> None:
    q = QuestionSpec("compare", "ok", baseline="a")
    assert classify(q, NEXT, 0.1) == "confirmed"
    assert classify(q, -0.1, 0.0) == "refuted"
    assert classify(q, -0.1, 0.1) == "inconclusive"


# ---- decide: threshold ------------------------------------------------------------------------------

THRESHOLD = QuestionSpec("threshold", "promises", bound=0.9, margin=0.02)


def test_threshold_confirmed_refuted_inconclusive() -> None:
    confirmed = decide(THRESHOLD, {"gpt": cases(212, 2, 2)}, on="holdout", scope=HOLDOUT)
    assert confirmed.verdict == "confirmed" and confirmed.decided[0].interval.low > 0.92
    refuted = decide(THRESHOLD, {"gpt": cases(212, 2, 60)}, on="holdout", scope=HOLDOUT)
    assert refuted.verdict == "refuted" and refuted.decided[0].interval.high <= 0.92
    small = decide(THRESHOLD, {"gpt": cases(6, 2, 0)}, on="holdout", scope=Scope(6, 2, "holdout"))
    assert small.verdict == "inconclusive" and small.below_mde
    for v in (confirmed, refuted, small):
        assert v.reason is None and v.would_be is None and not v.provisional


def test_below_mde_only_when_the_half_width_exceeds_the_margin() -> None:
    # Rate 0.5 on 400 cases: half-width ≈ 0.05 < margin 0.1, but the interval straddles b + m = 0.5.
    q = QuestionSpec("threshold", "ok", bound=0.4, margin=0.1)
    v = decide(q, {"x": at_rate(400, 2, 1)}, on="holdout", scope=Scope(400, 2, "holdout"))
    assert v.verdict == "inconclusive"
    assert v.decided[0].interval.half_width < 0.1
    assert not v.below_mde and v.cases_to_decide is None
    assert "within the margin but still too wide" in v.text


def test_cases_to_decide_is_enough_and_not_far_too_many() -> None:
    # 20 cases × 2, all pass: no valid bound on n cases can pass 0.025^(1/n), so a zero-failure series
    # needs at least 183 cases to clear b + m = 0.98; the estimate is where the interval itself reaches it.
    q = QuestionSpec("threshold", "promises", bound=0.97, margin=0.01)
    v = decide(q, {"gpt": cases(20, 2, 0)}, on="holdout", scope=Scope(20, 2, "holdout"))
    assert v.verdict == "inconclusive" and v.below_mde
    floor = math.ceil(math.log(0.025) / math.log(0.98))
    assert v.cases_to_decide is not None and v.cases_to_decide >= floor

    def half_width(n: int) -> float:
        return one_rate([(2.0, 2)] * n).half_width

    assert half_width(v.cases_to_decide) <= 0.01 < half_width(math.floor(v.cases_to_decide * 0.98))
    assert f"about {v.cases_to_decide} cases would narrow it to the margin" in v.text


def test_threshold_decides_on_the_named_variant_else_the_first() -> None:
    cells = {"good": cases(212, 2, 0), "bad": cases(212, 2, 100)}
    assert decide(THRESHOLD, cells, on="holdout", scope=HOLDOUT).verdict == "confirmed"
    named = QuestionSpec("threshold", "promises", bound=0.9, margin=0.02, variant="bad")
    v = decide(named, cells, on="holdout", scope=HOLDOUT)
    assert v.verdict == "refuted" and v.decided[0].variant == "bad"
    assert [c["variant"] for c in v.cells] == ["good", "bad"]


def test_at_most_threshold_end_to_end() -> None:
    # A failure rate (passes = attempts that showed the failure) kept at most 0.1 with margin 0.02.
    q = QuestionSpec("threshold", "overpromise", bound=0.1, margin=0.02, direction="at_most")
    rare = [(f"c{i}", 1.0 if i < 4 else 0.0, 2) for i in range(212)]
    v = decide(q, {"gpt": rare}, on="holdout", scope=HOLDOUT)
    assert v.verdict == "confirmed"
    assert v.text.endswith(", below 0.1 − 0.02.")
    common = [(f"c{i}", 1.0 if i < 60 else 0.0, 2) for i in range(212)]
    v = decide(q, {"gpt": common}, on="holdout", scope=HOLDOUT)
    assert v.verdict == "refuted" and v.text.endswith(", not below 0.1 − 0.02.")


# ---- decide: paired --------------------------------------------------------------------------------


def test_noninferior_and_compare() -> None:
    # 1,000 cases: on 212 cases no interval valid for every population can clear −0.02 even when the
    # variants agree on all but one case (a 2% share of cases that B breaks would go unseen 1.4% of the time).
    cells = {"gpt": cases(1000, 2, 10), "mistral": cases(1000, 2, 11)}
    q = QuestionSpec("noninferior", "promises", margin=0.02, baseline="gpt")
    v = decide(q, cells, on="holdout", scope=HOLDOUT)
    small = {"gpt": cases(212, 2, 10), "mistral": cases(212, 2, 11)}
    assert decide(q, small, on="holdout", scope=HOLDOUT).verdict == "inconclusive"
    d = paired_difference([(c[1], c[2]) for c in cells["gpt"]], [(c[1], c[2]) for c in cells["mistral"]])
    assert v.verdict == "confirmed" and d.low > -0.02
    assert v.decided[0].interval == d
    assert v.decided_by == ("mistral",)
    c = decide(QuestionSpec("compare", "promises", margin=0.02, baseline="gpt"), cells, on="holdout", scope=HOLDOUT)
    assert c.verdict == "refuted" and d.high <= 0.02


def test_pairs_align_by_case_name_and_skip_unpaired_cases() -> None:
    a = [("x", 2.0, 2), ("y", 1.0, 2), ("only_a", 0.0, 2)]
    b = [("y", 2.0, 2), ("only_b", 0.0, 2), ("x", 2.0, 2)]
    v = decide(COMPARE, {"a": a, "b": b}, on="holdout", scope=Scope(3, 2, "holdout"))
    assert v.decided[0].interval == paired_difference([(2, 2), (1, 2)], [(2, 2), (2, 2)])


def test_bonferroni_over_several_variants() -> None:
    # At 95% b beats a (L > 0); at 97.5% — two variants compared with a — it does not.
    base = [(f"c{i}", 1.0, 2) for i in range(100)]
    better = [(f"c{i}", 2.0 if i < 10 else 1.0, 2) for i in range(100)]
    same = list(base)
    q = QuestionSpec("compare", "ok", baseline="a")
    scope = Scope(100, 2, "holdout")
    alone = decide(QuestionSpec("compare", "ok", baseline="a", variant="b"), {"a": base, "b": better, "c": same},
                   on="holdout", scope=scope)  # fmt: skip
    assert alone.verdict == "confirmed" and alone.decided[0].level == 0.95
    both = decide(q, {"a": base, "b": better, "c": same}, on="holdout", scope=scope)
    assert [c.level for c in both.decided] == [0.975, 0.975]
    pair = [(y, r) for _, y, r in base], [(y, r) for _, y, r in better]
    assert both.decided[0].interval == paired_difference(*pair, level=1 - 0.05 / 2)
    assert both.verdict == "inconclusive"
    assert "2 variants compared with a, each at 97.5% (Bonferroni)" in both.text


def test_several_variants_confirmed_if_any_refuted_if_all() -> None:
    base = cases(300, 2, 150)
    good, bad, worse = cases(300, 2, 10), cases(300, 2, 160), cases(300, 2, 200)
    q = QuestionSpec("compare", "ok", baseline="base", margin=0.05)
    v = decide(q, {"base": base, "bad": bad, "good": good}, on="holdout", scope=Scope(300, 2, "holdout"))
    assert v.verdict == "confirmed" and v.decided_by == ("good",)
    assert [c.decision for c in v.decided] == ["refuted", "confirmed"]
    assert "good beats base on ok by more than 0.05" in v.text
    assert "bad does not beat base on ok by more than 0.05" in v.text
    v = decide(q, {"base": base, "bad": bad, "worse": worse}, on="holdout", scope=Scope(300, 2, "holdout"))
    assert v.verdict == "refuted" and v.decided_by == ()
    v = decide(
        q, {"base": base, "bad": bad, "few": cases(300, 2, 150)[:5]}, on="holdout", scope=Scope(300, 2, "holdout")
    )
    assert v.verdict == "inconclusive" and v.below_mde


def test_baseline_defaults_to_the_first_variant() -> None:
    q = QuestionSpec("compare", "ok")
    v = decide(q, {"first": cases(50, 2, 40), "second": cases(50, 2, 0)}, on="holdout", scope=Scope(50, 2, "holdout"))
    assert v.decided[0].baseline == "first" and v.decided[0].variant == "second"


# ---- overrides --------------------------------------------------------------------------------------


def test_signal_overrides_on_dev_and_keeps_the_would_be() -> None:
    dev = Scope(212, 2, "dev")
    v = decide(THRESHOLD, {"gpt": cases(212, 2, 2)}, on="dev", scope=dev)
    assert (v.verdict, v.would_be, v.reason, v.signal_reasons) == ("signal", "confirmed", "dev_cases", ("dev_cases",))
    assert v.text.startswith("Signal (working cases, not evidence) on 212 working cases × 2 repeats: ")
    assert v.text.endswith("; on held-out cases this would be confirmed.")
    v = decide(THRESHOLD, {"gpt": cases(6, 2, 0)}, on="dev", scope=Scope(6, 2, "dev"))
    assert (v.verdict, v.would_be, v.below_mde) == ("signal", "inconclusive", True)


def test_signal_overrides_for_an_unvalidated_judge() -> None:
    v = decide(THRESHOLD, {"gpt": cases(212, 2, 60)}, on="holdout", scope=HOLDOUT, judge_unvalidated=True)
    assert (v.verdict, v.would_be, v.reason) == ("signal", "refuted", "judge_unvalidated")
    assert "judge without validated_by, not evidence" in v.text
    both = decide(THRESHOLD, {"gpt": cases(212, 2, 60)}, on="dev", scope=Scope(212, 2, "dev"), judge_unvalidated=True)
    assert both.signal_reasons == ("dev_cases", "judge_unvalidated") and both.reason == "dev_cases"


@pytest.mark.parametrize("reason", ["cancelled", "stopped_at_cap", "inputs_changed", "infra_errors"])
def test_invalid_overrides_everything(reason: str) -> None:
    v = decide(
        THRESHOLD,
        {"gpt": cases(212, 2, 2)},
        on="dev",
        scope=Scope(212, 2, "dev"),
        judge_unvalidated=True,
        invalid_reason=reason,
    )
    assert (v.verdict, v.reason, v.would_be, v.below_mde) == ("invalid", reason, None, False)
    assert v.text.startswith("Invalid: ") and v.text.endswith(", so it decides nothing.")
    assert v.cells[0]["estimate"] is not None  # the numbers stay visible


def test_no_data_is_invalid() -> None:
    v = decide(THRESHOLD, {"gpt": [("a", 0.0, 0), ("b", 0.0, 0)]}, on="holdout", scope=HOLDOUT)
    assert (v.verdict, v.reason) == ("invalid", "no_data")
    assert v.cells[0]["estimate"] is None
    v = decide(COMPARE, {"a": [("x", 1.0, 2)], "b": [("y", 1.0, 2)]}, on="holdout", scope=HOLDOUT)
    assert (v.verdict, v.reason) == ("invalid", "no_data")
    v = decide(COMPARE, {"a": [], "b": []}, on="holdout", scope=HOLDOUT, invalid_reason="cancelled")
    assert v.reason == "cancelled"  # a given reason wins over no data


def test_unknown_invalid_reason_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown invalid reason"):
        decide(THRESHOLD, {"gpt": cases(5, 2, 0)}, on="holdout", scope=HOLDOUT, invalid_reason="bored")


def test_invalid_reason_for() -> None:
    assert invalid_reason_for() is None
    assert invalid_reason_for(infra_errors=5, attempts=100) is None  # exactly 5% is allowed
    assert invalid_reason_for(infra_errors=6, attempts=100) == "infra_errors"
    assert invalid_reason_for(cancelled=True, infra_errors=50, attempts=100) == "cancelled"
    assert invalid_reason_for(stopped_at_cap=True, inputs_changed=True) == "stopped_at_cap"
    assert invalid_reason_for(inputs_changed=True) == "inputs_changed"


def test_provisional() -> None:
    v = decide(THRESHOLD, {"gpt": cases(212, 2, 2)}, on="holdout", scope=HOLDOUT, provisional=True)
    assert v.provisional and v.verdict == "confirmed"
    assert v.text.startswith("Provisional (still running): Confirmed on 212 held-out cases × 2 repeats: ")


def test_questions_that_cannot_be_decided() -> None:
    with pytest.raises(ValueError, match="bound"):
        decide(QuestionSpec("threshold", "x"), {"a": cases(3, 1, 0)}, on="holdout", scope=HOLDOUT)
    with pytest.raises(ValueError, match="not a variant"):
        decide(QuestionSpec("compare", "x", baseline="zz"), {"a": cases(3, 1, 0)}, on="holdout", scope=HOLDOUT)
    with pytest.raises(ValueError, match="other than its baseline"):
        decide(QuestionSpec("compare", "x", baseline="a"), {"a": cases(3, 1, 0)}, on="holdout", scope=HOLDOUT)
    with pytest.raises(ValueError, match="differs"):
        decide(THRESHOLD, {"a": cases(3, 1, 0)}, on="dev", scope=HOLDOUT)
    with pytest.raises(ValueError, match="no verdict"):
        decide(QuestionSpec("look", "x"), {"a": cases(3, 1, 0)}, on="dev", scope=Scope(3, 1, "dev"))  # type: ignore[arg-type]


def test_json_cells() -> None:
    cells = {"gpt": cases(50, 2, 3), "mistral": cases(50, 2, 5), "idle": []}
    v = decide(QuestionSpec("noninferior", "promises", baseline="gpt", margin=0.05, variant="mistral"), cells,
               on="holdout", scope=Scope(50, 2, "holdout"))  # fmt: skip
    data = json.loads(json.dumps(v.to_json()))
    assert [c["variant"] for c in data["cells"]] == ["gpt", "mistral", "idle"]
    gpt = one_rate([(c[1], c[2]) for c in cells["gpt"]])
    assert data["cells"][0] | {} == {
        "variant": "gpt",
        "metric": "promises",
        "level": 0.95,
        "estimate": gpt.estimate,
        "low": gpt.low,
        "high": gpt.high,
        "half_width": gpt.half_width,
        "cases": 50,
        "attempts": 100,
    }
    assert data["cells"][2]["estimate"] is None
    (comparison,) = data["comparisons"]
    assert comparison["variant"] == "mistral" and comparison["baseline"] == "gpt"
    assert comparison["decision"] == data["decided"][0]["decision"]
    assert data["text"] == v.text


# ---- the sentence ------------------------------------------------------------------------------------


def _cmp(variant: str, baseline: str | None, est: float, low: float, high: float, level: float = 0.95) -> Comparison:
    return Comparison(variant, baseline, Interval(est, low, high, 212, 848), level, "inconclusive")


def test_sentence_noninferior_confirmed() -> None:
    q = QuestionSpec("noninferior", "promises", margin=0.02, baseline="gpt")
    c = _cmp("mistral", "gpt", -0.003, -0.015, 0.009)
    c = Comparison(c.variant, c.baseline, c.interval, c.level, "confirmed")
    assert sentence(q, HOLDOUT, "confirmed", decided=[c], decision="confirmed") == (
        "Confirmed on 212 held-out cases × 2 repeats: mistral is not worse than gpt on promises by more than 0.02"
        " (difference −0.003, 95% CI −0.015 to +0.009)."
    )


def test_sentence_threshold_refuted() -> None:
    q = QuestionSpec("threshold", "promises", bound=0.97, margin=0.01)
    c = Comparison("gpt", None, Interval(0.951, 0.93, 0.968, 212, 424), 0.95, "refuted")
    assert sentence(q, HOLDOUT, "refuted", decided=[c], decision="refuted") == (
        "Refuted on 212 held-out cases × 2 repeats: the promises rate of gpt is 0.951 (95% CI 0.930 to 0.968),"
        " not above 0.97 + 0.01."
    )


def test_sentence_inconclusive_below_mde() -> None:
    q = QuestionSpec("threshold", "promises", bound=0.97, margin=0.01)
    c = Comparison("gpt", None, Interval(0.75, 0.194, 0.994, 2, 4), 0.95, "inconclusive")
    scope = Scope(2, 2, "holdout", simulated=True)
    assert sentence(q, scope, "inconclusive", decided=[c], decision="inconclusive", cases_to_decide=3200) == (
        "Inconclusive on 2 held-out cases × 2 repeats (simulated): the promises rate of gpt is 0.750"
        " (95% CI 0.194 to 0.994), which straddles 0.97 + 0.01; the interval is too wide to decide:"
        " its half-width 0.400 exceeds the 0.01 margin, and about 3200 cases would narrow it to the margin."
    )


def test_sentence_compare_signal_and_singular_scope() -> None:
    q = QuestionSpec("compare", "promises", margin=0.0, baseline="gpt")
    c = Comparison("mistral", "gpt", Interval(0.0004, -0.0004, 0.031, 1, 2), 0.95, "inconclusive")
    text = sentence(
        q,
        Scope(1, 1, "dev"),
        "signal",
        decided=[c],
        decision="inconclusive",
        signals=["dev_cases"],
        cases_to_decide=None,
    )
    assert text == (
        "Signal (working cases, not evidence) on 1 working case × 1 repeat: whether mistral beats gpt on promises"
        " is open (difference 0.000, 95% CI 0.000 to +0.031); the interval is too wide to decide: its half-width"
        " 0.016 exceeds the margin of 0; on held-out cases this would be inconclusive."
    )


def test_sentence_invalid() -> None:
    q = QuestionSpec("threshold", "promises", bound=0.97, margin=0.01)
    assert sentence(q, HOLDOUT, "invalid", reason="cancelled") == (
        "Invalid: cancelled — the series on 212 held-out cases × 2 repeats was cancelled before it finished,"
        " so it decides nothing."
    )
    assert "more than 5% of its attempts end in infrastructure errors" in sentence(
        q, HOLDOUT, "invalid", reason="infra_errors"
    )
