"""The verdict of a stored series, from its tallies (provisional while it runs), or from its confidence
sequence when it may stop early. Series (their end, their view, their driver) and findings (recomputing a
verdict to verify it) read it from here."""

from __future__ import annotations

from typing import Any

from aqven.research.stats.judge_correction import JudgeAccuracy, JudgeCorrection
from aqven.research.stats.questions import QUESTION_KINDS
from aqven.research.stats.sequential import SequenceView
from aqven.research.stats.verdict import CaseCell, QuestionSpec, Scope, decide, invalid_reason_for
from aqven.store.series import SeriesStore
from aqven.store.series_records import DECIDED_EARLY, SeriesRow
from aqven.store.series_tally import SeriesTally, read_tally


def sequence_view(store: SeriesStore, s: SeriesRow, tally: SeriesTally | None = None) -> SequenceView:
    """The finished prefix of the series' run order: cases whose every attempt is done, up to the first that
    is not (an attempt that hit a rate limit and will run again is not done yet). From the series' tally (read
    now unless given: a snapshot passes the one it read) and its case order, read once per series: no attempt
    is read."""
    tally = tally if tally is not None else read_tally(store.db, s.id)
    open_cases = tally.pending | tally.rate_limited
    prefix: list[str] = []
    for name in store.case_order(s.id):
        if name in open_cases:
            break
        prefix.append(name)
    return SequenceView(tuple(prefix), len(s.plan.cases), s.plan.repeats)


def case_cells(s: SeriesRow, tally: SeriesTally) -> dict[str, list[CaseCell]]:
    """Per variant, per case (in plan order): (case, passes, counted attempts)."""
    out: dict[str, list[CaseCell]] = {}
    for v in s.plan.variants:
        get = tally.cells.get(v, {}).get  # one lookup a case: a snapshot walks every case of the plan
        out[v] = [(c, *cell) for c in s.plan.cases if (cell := get(c)) is not None]
    return out


def compute_verdict(
    s: SeriesRow,
    tally: SeriesTally,
    *,
    provisional: bool,
    inputs_changed: bool = False,
    sequence: SequenceView | None = None,
) -> dict[str, Any] | None:
    """The verdict of a series from its tallies; a stop_early series' from its confidence ``sequence``."""
    q = s.plan.question
    kind = QUESTION_KINDS.get(str(q.get("kind")))
    if s.kind == "look" or (kind is not None and not kind.decides):
        return None
    total = tally.total
    reason = invalid_reason_for(
        cancelled=s.status == "cancelled",
        stopped_at_cap=s.stop_reason == "stopped_at_cap",
        inputs_changed=inputs_changed,
        infra_errors=total.infra_errors,
        attempts=total.done,
    )
    if provisional and reason == "infra_errors" and total.done < 20:
        reason = None  # too early to call a handful of errors more than 5%
    question = QuestionSpec(
        kind=q["kind"],
        metric=q.get("metric") or "",
        bound=q.get("bound"),
        direction=q.get("direction", "at_least"),
        margin=float(q.get("margin") or 0.0),
        baseline=q.get("baseline"),
        variant=q.get("variant"),
    )
    cells = case_cells(s, tally)
    if provisional and not any(n for rows in cells.values() for _c, _p, n in rows):
        return None  # nothing counted yet: no provisional verdict to show
    counted_cases = {c for rows in cells.values() for c, _p, n in rows if n}
    if sequence is not None:
        counted_cases &= set(sequence.prefix)
    stopped_early = None
    if s.stop_reason == DECIDED_EARLY and not provisional:
        stopped_early = (tally.total.done, tally.total.attempts)
    scope = Scope(
        cases=len(counted_cases) or len(s.plan.cases),
        repeats=s.plan.repeats,
        on="holdout" if s.on == "holdout" else "dev",
        simulated=s.simulated,
        stopped_early=stopped_early,
    )
    verdict = decide(
        question,
        cells,
        on=scope.on,
        judge_unvalidated=s.plan.judge_unvalidated,
        invalid_reason=reason,
        provisional=provisional,
        scope=scope,
        judge=_judge(s, tally),
        sequence=sequence,
    ).to_json()
    judge = s.plan.judge or {}
    if s.plan.judge_unvalidated and judge.get("validated_by"):
        # The judge names what validates it, but that experiment has no confirmed finding yet: say so, not
        # "without validated_by" (which is not what happened).
        verdict["text"] = verdict["text"].replace(
            "judge without validated_by",
            f"judge whose validated_by {judge['validated_by']} has no confirmed finding yet",
        )
    return verdict


def _judge(s: SeriesRow, tally: SeriesTally) -> JudgeCorrection | None:
    """The judge correction the series fixed at its start (a validated pass/fail judge with measured accuracy)."""
    if not s.plan.judge_correction or s.plan.judge_unvalidated:
        return None
    return JudgeCorrection(JudgeAccuracy.from_json(s.plan.judge_correction), tally.model_failed)
