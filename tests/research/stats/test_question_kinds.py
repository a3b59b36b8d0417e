"""The question-kinds table (research/stats/questions.py): one entry per kind, and the verdict table it gives."""

from __future__ import annotations

import itertools
from typing import get_args

import pytest

from aqven.research.experiments.schema import Question
from aqven.research.stats.questions import QUESTION_KINDS, QuestionKind, classify, decision_line, is_paired
from aqven.research.stats.verdict import QuestionSpec


def test_one_entry_per_kind_and_the_schema_takes_exactly_those() -> None:
    assert set(QUESTION_KINDS) == set(get_args(QuestionKind))
    assert set(get_args(Question.model_fields["kind"].annotation)) == set(QUESTION_KINDS)
    for name, spec in QUESTION_KINDS.items():
        assert spec.name == name
        if spec.decides:
            assert all(spec.claims), f"{name}: a deciding kind words all three decisions"


def _table(kind: str, direction: str, b: float, m: float, low: float, high: float) -> str:
    """The verdict table as docs/ and verdict.py's docstring write it, row by row."""
    if kind == "threshold" and direction == "at_least":
        return "confirmed" if low > b + m else "refuted" if high <= b + m else "inconclusive"
    if kind == "threshold":
        return "confirmed" if high < b - m else "refuted" if low >= b - m else "inconclusive"
    if kind == "compare":
        return "confirmed" if low > m else "refuted" if high <= m else "inconclusive"
    assert kind == "noninferior"
    return "confirmed" if low > -m else "refuted" if high <= -m else "inconclusive"


@pytest.mark.parametrize("kind", [k for k, s in QUESTION_KINDS.items() if s.decides])
def test_classify_is_the_verdict_table(kind: str) -> None:
    edges = [-0.3, -0.05, 0.0, 0.05, 0.5, 0.8, 0.85, 0.9, 1.0]
    for direction, b, m in itertools.product(("at_least", "at_most"), (0.8, 0.5), (0.0, 0.05)):
        q = QuestionSpec(kind=kind, metric="ok", bound=b, direction=direction, margin=m)  # type: ignore[arg-type]
        for low, high in itertools.combinations_with_replacement(edges, 2):
            assert classify(q, low, high) == _table(kind, direction, b, m, low, high), (q, low, high)


def test_lines_and_pairing() -> None:
    assert decision_line(QuestionSpec(kind="threshold", metric="ok", bound=0.9, margin=0.02)) == pytest.approx(0.92)
    assert decision_line(
        QuestionSpec(kind="threshold", metric="ok", bound=0.1, direction="at_most", margin=0.02)
    ) == pytest.approx(0.08)
    assert decision_line(QuestionSpec(kind="compare", metric="ok", margin=0.03)) == 0.03
    assert decision_line(QuestionSpec(kind="noninferior", metric="ok", margin=0.03)) == -0.03
    assert [k for k in QUESTION_KINDS if is_paired(k)] == ["compare", "noninferior"]
    assert not is_paired("no_such_kind")
    with pytest.raises(ValueError, match="needs a bound"):
        decision_line(QuestionSpec(kind="threshold", metric="ok"))
