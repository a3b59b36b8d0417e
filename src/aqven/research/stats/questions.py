"""Question kinds: what each kind of experiment question asks, in one table.

Everything that differs by kind — whether it decides at all, whether it reads one variant's rate or the paired
difference ``B − A`` of two, the line its interval must clear, the words of its sentence and what its
zero-failure floor assumes — is read from `QUESTION_KINDS`. The experiment schema, the verdict, the launch
plan and `aqven check` ask this table, never the kind's name. Adding a kind is one entry here (and its name in
`QuestionKind`), plus its test and its doc (docs/architecture.md, "How to add a question kind").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Protocol, get_args

__all__ = [
    "QUESTION_KINDS",
    "Decision",
    "Direction",
    "FloorKind",
    "QuestionKind",
    "QuestionKindSpec",
    "QuestionLike",
    "classify",
    "decision_line",
    "is_paired",
    "kind_of",
    "upward",
]

QuestionKind = Literal["look", "threshold", "compare", "noninferior"]
Direction = Literal["at_least", "at_most"]
Decision = Literal["confirmed", "refuted", "inconclusive"]
FloorKind = Literal["all", "agree"]
"""What a zero-failure floor assumes of every case: all pass (or fail, at most), or the variants all agree."""


class QuestionLike(Protocol):
    """What the table reads of a question: the schema's `Question` and the verdict's `QuestionSpec` both fit."""

    @property
    def kind(self) -> str: ...
    @property
    def bound(self) -> float | None: ...
    @property
    def margin(self) -> float: ...
    @property
    def direction(self) -> str: ...


@dataclass(frozen=True)
class QuestionKindSpec:
    """One kind of question. The claim templates are `str.format` strings over the fields `verdict.py` fills:
    ``head`` (a threshold's rate with its interval), ``side``, ``line``, ``variant``, ``baseline``, ``metric``,
    ``by`` (" by more than m", or empty), ``or_more`` (" by m or more", or empty) and ``nums`` (a difference with
    its interval)."""

    name: QuestionKind
    decides: bool
    """False for a look: it runs and shows, and has no verdict."""
    paired: bool = False
    """Decided on the paired difference B − A: needs a baseline and at least two variants."""
    needs_bound: bool = False
    needs_margin: bool = False
    """The margin must be above 0 (noninferior: how much worse is still fine)."""
    margin_sign: Literal[1, -1] = 1
    """The line is ``bound ± margin`` (threshold, by direction) or ``margin_sign × margin`` (paired)."""
    claims: tuple[str, str, str] = ("", "", "")
    """The sentence's words for confirmed, refuted, inconclusive."""
    short: tuple[str, str, str] = ("", "", "")
    """A word or two for confirmed, refuted, inconclusive, where a verdict stands beside its cost ("not worse")."""
    floor: FloorKind | None = None
    """The zero-failure floor of its launch plan, or None when no sample of agreeing cases clears its line."""
    agreement: bool = False
    """A judge-agreement experiment may ask it (its agreement rate against a threshold)."""


QUESTION_KINDS: Final[dict[str, QuestionKindSpec]] = {
    k.name: k
    for k in (
        QuestionKindSpec(name="look", decides=False),
        QuestionKindSpec(
            name="threshold",
            decides=True,
            needs_bound=True,
            claims=("{head}, {side} {line}", "{head}, not {side} {line}", "{head}, which straddles {line}"),
            short=("holds", "does not hold", "undecided"),
            floor="all",
            agreement=True,
        ),
        QuestionKindSpec(
            name="compare",
            decides=True,
            paired=True,
            claims=(
                "{variant} beats {baseline} on {metric}{by} {nums}",
                "{variant} does not beat {baseline} on {metric}{by} {nums}",
                "whether {variant} beats {baseline} on {metric}{by} is open {nums}",
            ),
            short=("better", "not better", "undecided"),
        ),
        QuestionKindSpec(
            name="noninferior",
            decides=True,
            paired=True,
            needs_margin=True,
            margin_sign=-1,
            claims=(
                "{variant} is not worse than {baseline} on {metric}{by} {nums}",
                "{variant} is worse than {baseline} on {metric}{or_more} {nums}",
                "whether {variant} is worse than {baseline} on {metric}{by} is open {nums}",
            ),
            short=("not worse", "worse", "undecided"),
            floor="agree",
        ),
    )
}
assert set(QUESTION_KINDS) == set(get_args(QuestionKind)), "every QuestionKind has one entry, and only those"

DECIDING_KINDS: Final[tuple[str, ...]] = tuple(k for k, spec in QUESTION_KINDS.items() if spec.decides)


def kind_of(question: QuestionLike) -> QuestionKindSpec:
    """The question's kind; `ValueError` for a name the table lacks."""
    spec = QUESTION_KINDS.get(question.kind)
    if spec is None:
        raise ValueError(f"unknown question kind {question.kind!r}; one of {', '.join(QUESTION_KINDS)}")
    return spec


def upward(question: QuestionLike) -> bool:
    """True when the interval confirms above its line (a paired question, or a threshold at least)."""
    return kind_of(question).paired or question.direction == "at_least"


def decision_line(question: QuestionLike) -> float:
    """The line the interval must clear: ``b ± m`` for a threshold (by direction), ``±m`` for a paired one."""
    spec = kind_of(question)
    m = question.margin
    if spec.needs_bound:
        if question.bound is None or not 0 <= question.bound <= 1:
            raise ValueError(f"a {spec.name} question needs a bound in [0, 1], not {question.bound}")
        return question.bound + m if question.direction == "at_least" else question.bound - m
    return m if spec.margin_sign == 1 else -m


def classify(question: QuestionLike, low: float, high: float) -> Decision:
    """The verdict table for one interval ``[low, high]`` (a rate, or a difference B − A): above the line
    confirms upward (``L > line``, refuted when ``U ≤ line``), mirrored for a threshold at most."""
    line = decision_line(question)
    if upward(question):
        return "confirmed" if low > line else "refuted" if high <= line else "inconclusive"
    return "confirmed" if high < line else "refuted" if low >= line else "inconclusive"


def is_paired(kind: str) -> bool:
    """True for a kind decided on the paired difference of two variants (False for a name the table lacks)."""
    spec = QUESTION_KINDS.get(kind)
    return spec is not None and spec.paired
