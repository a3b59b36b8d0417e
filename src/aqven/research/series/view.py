"""What `series_get` shows: progress, spend against the cap, eta, the matrix, the verdict, dev cases.

Everything but the case rows comes from the series' aggregates (store/series_tally.py), so a snapshot costs about
the same at 1,000 attempts as at 100,000.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

from aqven.research.holdout import (
    coarse_step,
    held_out_attempts,
    reads_held_out,
    sealed_now,
    sealed_side,
    series_error_view,
    shown_spend,
    step_record,
)
from aqven.research.series.early import early_stop_record, sequence_view
from aqven.research.stats.sequential import SequenceView
from aqven.research.stats.series_verdict import compute_verdict
from aqven.store.approvals import approvals_of
from aqven.store.runs import RunStore
from aqven.store.series import SeriesStore
from aqven.store.series_records import ENDED, AttemptRow, SeriesPlan, SeriesRow, active_now
from aqven.store.series_tally import COUNTED, KeptTally, SeriesTally, TallyCache, read_tally
from aqven.store.workers import WorkerStore

ETA_WINDOW_S = 300.0
SLOW_VERDICT_S = 0.005  # a provisional verdict this slow to compute is not computed at every change ...
VERDICT_SHARE = 50  # ... but once it is this many times its cost old
clock = time.monotonic  # what a verdict's age and cost are measured with
MAX_CASE_ROWS = 50
OUTCOME_COUNTS = ("counted", "model_failures", "infra_errors", "reruns")  # a held-out series shows them per step


def refresh_sealed_view(s: SeriesRow, store: SeriesStore, *, done: int) -> bool:
    """After an attempt of a held-out series finished (`done` finished now): store what it shows until the next
    coarse step (its numbers, verdict, counts, spend and spend curve: `aqven.research.holdout`), when `step`
    attempts finished since the last one. A look's held-out attempts take their steps alone. True when it
    refreshed."""
    if reads_held_out(s):
        return _refresh_look(s, store)
    view = s.sealed_view or {}
    total = len(s.plan.cases) * len(s.plan.variants) * s.plan.repeats
    if done - int(view.get("done", 0)) < coarse_step(total):
        return False
    tally = read_tally(store.db, s.id)
    sequence = sequence_view(store, s, tally) if s.plan.stop_early else None
    verdict = compute_verdict(s, tally, provisional=True, sequence=sequence)
    t = tally.total
    spent, unpriced = spend(tally)
    seconds = (datetime.now(UTC) - datetime.fromisoformat(s.created_at)).total_seconds()
    curve = [*(view.get("curve") or []), {"t": round(seconds, 3), "usd": str(spent)}]
    store.update(
        s.id,
        sealed_view={
            "done": t.done,
            "matrix": matrix(s, tally, verdict),
            "verdict": verdict,
            "progress": {k: getattr(t, k) for k in OUTCOME_COUNTS},
            "spend": {"usd": str(spent), "unpriced_attempts": unpriced, **_tokens(s, store)},
            "curve": curve,
            **step_record(store.db, s.id),
        },
    )
    return True


def _refresh_look(s: SeriesRow, store: SeriesStore) -> bool:
    """A look's held-out attempts, at a coarse step of theirs: their spend, counts and a point of the spend curve
    (their numbers are never shown: a look shows its working cases only)."""
    view = s.sealed_view or {}
    held = read_tally(store.db, s.id, side="holdout")
    if held.total.done - int(view.get("done", 0)) < coarse_step(held_out_attempts(s)):
        return False
    spent, unpriced = spend(held)
    seconds = (datetime.now(UTC) - datetime.fromisoformat(s.created_at)).total_seconds()
    working, _unpriced = spend(read_tally(store.db, s.id, side="dev"))
    curve = [*(view.get("curve") or []), {"t": round(seconds, 3), "usd": str(spent + working)}]
    store.update(
        s.id,
        sealed_view={
            "done": held.total.done,
            "spend": {"usd": str(spent), "unpriced_attempts": unpriced, **_tokens(s, store)},
            "curve": curve,
            **step_record(store.db, s.id, side="holdout"),
        },
    )
    return True


def _sealed(s: SeriesRow, out: dict[str, Any]) -> None:
    """A running held-out series as it may be shown: its per-variant numbers, outcome counts and provisional
    verdict as of the last coarse step (none before the first), so no poll tells one attempt's result."""
    view = s.sealed_view or {}
    frozen = {m["variant"]: m for m in view.get("matrix") or []}
    rows = []
    for row in out["matrix"]:
        keep = {"variant": row["variant"], "attempts": row["attempts"]}
        old = frozen.get(row["variant"])
        zero = {"done": 0, "counted": 0, "passes": 0, "model_failures": 0, "infra_errors": 0, "spend_usd": "0"}
        rows.append({**zero, **(old or {}), **keep})
    out["matrix"] = rows
    out["verdict"] = view.get("verdict")
    out["progress"].update({k: int((view.get("progress") or {}).get(k, 0)) for k in OUTCOME_COUNTS})
    out["coarse"] = {"as_of_done": int(view.get("done", 0)), "step": coarse_step(out["progress"]["attempts"])}


def _pause(s: SeriesRow, spent: Decimal, tokens: int | None) -> dict[str, Any] | None:
    """Why the series waits, with what it spent as shown (sealed attempts: as of their last step)."""
    if s.status != "awaiting_approval" or s.pause is None:
        return None
    if sealed_side(s) is None:
        return s.pause
    shown = {**s.pause}
    if "spent_usd" in shown:
        shown["spent_usd"] = str(spent)
    if "tokens_used" in shown and tokens is not None:
        shown["tokens_used"] = tokens
    return shown


def eta(s: SeriesRow, tally: SeriesTally) -> dict[str, Any] | None:
    """From the attempts finished per minute over the last 5 minutes of running time."""
    if s.status in ENDED:
        return None
    if s.status in ("awaiting_approval", "waiting_human"):
        return {"state": "paused"}
    times = tally.finish_times
    if times.count < 4 or times.first is None:  # estimating until 3 attempts finished after the first one
        return {"state": "estimating"}
    now = times.since + ETA_WINDOW_S
    span = min(ETA_WINDOW_S, max(now - times.first, 1e-6))
    # The first finish only starts the clock: it is not one of the recent ones.
    recent = times.at_or_after_since - (1 if times.first >= times.since else 0)
    if recent <= 0:
        return {"state": "estimating"}
    per_minute = recent / span * 60
    total = tally.total
    left = total.attempts - total.done
    remaining = left / per_minute * 60
    finish = datetime.now(UTC) + timedelta(seconds=remaining)
    return {
        "state": "running",
        "attempts_per_minute": round(per_minute, 3),
        "remaining_seconds": round(remaining, 1),
        "finish_at": finish.isoformat(timespec="seconds"),
    }


def matrix(s: SeriesRow, tally: SeriesTally, verdict: dict[str, Any] | None) -> list[dict[str, Any]]:
    cells = {c.get("variant"): c for c in (verdict or {}).get("cells", [])}
    out = []
    for v in s.plan.variants:
        t = tally.variants.get(v)
        row: dict[str, Any] = {
            "variant": v,
            "attempts": t.attempts if t else 0,
            "done": t.done if t else 0,
            "counted": t.counted if t else 0,
            "passes": round(t.passes, 6) if t else 0,
            "model_failures": t.model_failures if t else 0,
            "infra_errors": t.infra_errors if t else 0,
            "spend_usd": str(t.spend if t else Decimal(0)),
        }
        cell = cells.get(v)
        if cell:
            row.update({k: cell.get(k) for k in ("estimate", "low", "high") if k in cell})
        out.append(row)
    return out


def spend(tally: SeriesTally) -> tuple[Decimal, int]:
    """(dollars spent, attempts with an unpriced call). Running attempts add what their runs spent so far (read
    with the tally, in the same read)."""
    total = tally.total.spend
    unpriced = tally.unpriced_settled
    for a in tally.running:
        if a.run_cost_usd is None:  # the run row is not written yet: it has spent nothing
            unpriced += int(a.unpriced)
            continue
        total += Decimal(a.run_cost_usd)
        unpriced += int(a.run_unpriced_calls > 0)
    return total, unpriced


def case_rows(s: SeriesRow, store: SeriesStore, tally: SeriesTally) -> tuple[list[dict[str, Any]], int]:
    """Dev cases only, failing first, at most 50; the rest (and every held-out case) are counted as hidden."""
    dev = [c for c in s.plan.cases if s.plan.sides.get(c) == "dev"]
    fails = tally.fails
    order = sorted(range(len(dev)), key=lambda i: (not fails.get(dev[i], 0), i))
    shown = [dev[i] for i in order[:MAX_CASE_ROWS]]
    by_case: dict[str, list[AttemptRow]] = {c: [] for c in shown}
    for a in store.attempts_of_cases(s.id, shown):
        by_case[a.case_name].append(a)
    rows = []
    for case in shown:
        mine = by_case[case]
        variants = {}
        for v in s.plan.variants:
            va = [a for a in mine if a.variant_id == v]
            counted = [a for a in va if a.status == "done" and a.outcome in COUNTED]
            failed_checks = sorted({c["check_id"] for a in va for c in (a.checks or []) if c.get("passed") is False})
            variants[v] = {
                "passes": round(sum(a.value or 0.0 for a in counted), 6),
                "counted": len(counted),
                "fails": sum(a.outcome in ("fail", "model_failure") for a in va),
                "failed_checks": failed_checks,
                "attempts": [
                    {
                        "repeat": a.rep,
                        "status": a.status,
                        "outcome": a.outcome,
                        "error": a.error_code,
                        "message": a.error_message,
                        "run_id": a.run_id,
                    }
                    for a in sorted(va, key=lambda x: x.rep)
                ],
            }
        rows.append({"case": case, "side": "dev", "failing": fails.get(case, 0) > 0, "variants": variants})
    return rows, len(s.plan.cases) - len(rows)


def _tokens(s: SeriesRow, store: SeriesStore) -> dict[str, Any]:
    """A series with a token cap: the tokens its runs used so far against it (none without a cap)."""
    if s.token_cap is None:
        return {}
    row = store.db.query_one("SELECT SUM(input_tokens + output_tokens) AS t FROM runs WHERE series_id=?", (s.id,))
    return {"tokens_used": int(row["t"] or 0) if row is not None else 0, "token_cap": s.token_cap}


def _provisional(
    s: SeriesRow, tally: SeriesTally, sequence: SequenceView | None, kept: KeptTally | None
) -> dict[str, Any] | None:
    """The provisional verdict of a running series, computed again only when what it stands on changed: the
    tally's cells (its seq), the series' state and plan, the stop_early prefix (a page polled while nothing
    finished shows the verdict it computed last, which a new computation would repeat exactly).

    A verdict that takes long to compute (a big series: SLOW_VERDICT_S or more) is computed again on new cells
    only once it is VERDICT_SHARE times its cost old, so polling a running series spends at most about 1/50 of
    the server's time on it; the counts beside it are read fresh every time."""
    state = (s.status, s.stop_reason, s.kind, s.on, s.simulated, sequence)
    now = clock()
    if kept is not None:
        hit = kept.memo.get("verdict")
        if isinstance(hit, _KeptVerdict) and hit.fits(tally.seq, state, s.plan, now):
            return hit.verdict
    verdict = compute_verdict(s, tally, provisional=True, sequence=sequence)
    if kept is not None:
        kept.memo["verdict"] = _KeptVerdict(tally.seq, state, s.plan, verdict, now, clock() - now)
    return verdict


class _KeptVerdict(NamedTuple):
    """A provisional verdict kept with its tally: what it stands on, when it was computed and what that cost."""

    seq: int
    state: tuple[Any, ...]
    plan: SeriesPlan
    verdict: dict[str, Any] | None
    at: float
    cost: float

    def fits(self, seq: int, state: tuple[Any, ...], plan: SeriesPlan, now: float) -> bool:
        """Whether it may be shown now: what it stands on is unchanged, or it is slow and young enough."""
        if self.state != state or self.plan is not plan:
            return False
        return self.seq == seq or (self.cost >= SLOW_VERDICT_S and now - self.at < self.cost * VERDICT_SHARE)


def snapshot(
    s: SeriesRow, store: SeriesStore, runs: RunStore, *, include_cases: bool = False, tallies: TallyCache | None = None
) -> dict[str, Any]:
    """The series as `series_get` shows it, read from its aggregates (the case rows read their attempts); with
    `tallies`, from the aggregates it keeps, brought up to date from the cells changed since its last read."""
    now = active_now(s)
    since = now - ETA_WINDOW_S
    kept = tallies.kept(s.id) if tallies is not None else None
    tally = (
        kept.read(store.db, finished_since=since, now=now)
        if kept is not None
        else read_tally(store.db, s.id, finished_since=since)
    )
    total = tally.total
    exact, exact_unpriced = spend(tally)
    tokens = _tokens(s, store)
    # A held-out series that still runs, and a look's held-out attempts, show their spend (and tokens) as of
    # their last coarse step (holdout.py).
    dev = read_tally(store.db, s.id, side="dev") if reads_held_out(s) else None
    working = spend(dev) if dev is not None else None
    spent, unpriced, used = shown_spend(s, exact, exact_unpriced, tokens.get("tokens_used"), working=working)
    if used is not None:
        tokens["tokens_used"] = used
    sequence = sequence_view(store, s, tally) if s.plan.stop_early and s.status not in ENDED else None
    verdict = s.verdict if s.status in ENDED else _provisional(s, tally, sequence, kept)
    if s.status == "cancelled" and s.ended_at is None:
        # Cancelled while attempts still finish: the verdict is already invalid (cancelled), not missing.
        verdict = compute_verdict(s, tally, provisional=False)
    out: dict[str, Any] = {
        "series_id": s.id,
        "kind": s.kind,
        "experiment_id": s.experiment_id,
        "on": s.on,
        "status": s.status,
        "simulated": s.simulated,
        "seed": s.sim_seed,  # the simulators' seed: `--seed` replays the series on purpose
        "created_at": s.created_at,
        "ended_at": s.ended_at,
        "progress": {
            "attempts": total.attempts,
            "done": total.done,
            "running": total.running,
            "queued": total.queued,
            "counted": total.counted,
            "model_failures": total.model_failures,
            "infra_errors": total.infra_errors,
            "reruns": total.reruns,
        },
        "spend": {
            "usd": str(spent),
            "cap_usd": s.cap_usd,
            "project_cap_usd": s.project_cap_usd,
            "project_cap_source": s.project_cap_source,
            "unpriced_attempts": unpriced,
            "lower_bound": unpriced > 0,
            **tokens,
        },
        "pause": _pause(s, spent, tokens.get("tokens_used")),
        # who cancelled it and how (the credential the server checked), and their note
        "cancelled": {k: v for k, v in (s.pause or {}).items() if k in ("note", "by")} or None
        if s.status == "cancelled"
        else None,
        "approvals": approvals_of(store.db, s.id),  # every approval and stop, with its channel
        "eta": eta(s, tally),
        "matrix": matrix(s, tally, verdict),
        "verdict": verdict,
        "error": series_error_view(s.error),  # a series stored before the rule may still name a held-out run
        "finding": s.finding,
        "plan": {
            "flow_id": s.plan.flow_id,
            "from": s.plan.from_node,
            "to": s.plan.to_node,
            "dataset_id": s.plan.dataset_id,
            "cases": len(s.plan.cases),
            "repeats": s.plan.repeats,
            "variants": s.plan.variants,
            "question": s.plan.question,
        },
        "launch_plan": s.plan.launch_plan,
        "stop_early": s.plan.stop_early,
        "early_stop": early_stop_record(s, total.done, total.attempts, spent),
        "as_of": time.time(),
    }
    if sealed_now(s):
        _sealed(s, out)
    elif dev is not None:
        # A look that ran held-out cases: its numbers are those of its working cases only (a look on one
        # held-out case would otherwise give that case's result through the aggregates).
        out["matrix"] = matrix(s, dev, None)
        out["progress"].update({k: getattr(dev.total, k) for k in OUTCOME_COUNTS})
        out["progress"]["held_out_attempts"] = total.attempts - dev.total.attempts
    if include_cases:
        rows, hidden = case_rows(s, store, tally)
        out["cases"] = rows
        out["hidden_cases"] = hidden
    if (include_cases and not sealed_now(s)) or s.status in ENDED:
        # Where its attempts ran, when `aqven worker`s ran them: per worker, the attempts it ran last (a held-out
        # series' counts by worker would tell its progress between coarse steps: shown once it ended).
        ran_on = WorkerStore(store.db).ran_where(s.id)
        if ran_on:
            out["ran_on"] = ran_on
    return out
