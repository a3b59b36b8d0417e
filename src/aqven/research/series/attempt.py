"""One attempt of a series, run to what its row should say: the run, its checks, outcome, value and cost.

The series runner decides which attempt runs; this module runs it, in whichever process has the attempt: the
server itself, or a worker process (`research/series/worker.py`). `_run_attempt` writes the attempt's run (its row
and events, through the engine) and the hash of the inputs it starts on. The attempt's own row moves from queued to
running (`claim`) and to done (`finish_row`) in the process that runs it: in the server, the runner writes both; a
worker writes both itself (`run_owned`), so with workers on, the server writes nothing per attempt and never waits
on the database's writer lock while it hands out work.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from aqven.engine.runner import Begun, Engine
from aqven.errors import CASE_NOT_FOUND, NotFoundError
from aqven.models import gate
from aqven.models.outcomes import CODE_ERROR
from aqven.project.schema import Case
from aqven.research.checks.scoring import AttemptView, score_checks
from aqven.research.experiments.inputs import attempt_inputs_hash
from aqven.research.experiments.workspace import Workspace
from aqven.research.series.start import request_for
from aqven.store.records import RunRecord
from aqven.store.runs import RunStore
from aqven.store.series import SeriesStore
from aqven.store.series_records import AttemptRow, SeriesRow

log = logging.getLogger("aqven.series")

STORE_TRIES = 3
"""How often an attempt runs on (and its end is written again) after the store lost a transaction of it."""


def dec(text: str | None) -> Decimal:
    return Decimal(text) if text else Decimal(0)


@dataclass
class AttemptResult:
    """What an attempt's row says at its end (or that its run waits for a person). Picklable: a worker sends it."""

    waiting: bool = False
    outcome: str = "infra"
    value: float | None = None
    code: str | None = None
    message: str | None = None
    checks: list[dict[str, Any]] = field(default_factory=list)
    cost: Decimal = Decimal(0)
    unpriced: bool = False
    inputs_hash: str | None = None
    tokens: int | None = None  # input + output tokens of its run (None: not known here)


def internal_error(what: str, cost: Decimal) -> AttemptResult:
    """The end of an attempt that raised `what` (a bug in one attempt must not stop the series): an infrastructure
    error."""
    return AttemptResult(outcome="infra", code=CODE_ERROR, message=f"internal error: {what}", cost=cost)


def finish_row(store: SeriesStore, s: SeriesRow, a: AttemptRow, out: AttemptResult) -> None:
    """Write a finished attempt's end on its row, with the series' running time at that moment (a row that is not
    running any more is left as it is)."""
    finishing_row(store, s, a, out)()


def finishing_row(store: SeriesStore, s: SeriesRow, a: AttemptRow, out: AttemptResult) -> Callable[[], None]:
    """`finish_row` as a write to run later: its JSON made now, outside the transaction that writes it."""
    return store.finishing_attempt(
        s.id,
        a.idx,
        outcome=out.outcome,
        value=out.value,
        error_code=out.code,
        error_message=out.message,
        checks=out.checks,
        cost_usd=str(out.cost),
        unpriced=out.unpriced,
        inputs_hash=out.inputs_hash,
    )


def result_of_row(a: AttemptRow) -> AttemptResult:
    """What a finished attempt's row says, as its runner would have answered (its tokens are read from its run)."""
    return AttemptResult(
        outcome=a.outcome or "infra",
        value=a.value,
        code=a.error_code,
        message=a.error_message,
        checks=a.checks or [],
        cost=dec(a.cost_usd),
        unpriced=a.unpriced,
        inputs_hash=a.inputs_hash,
    )


async def run_owned(
    workspace: Callable[[], Workspace],
    engine: Callable[[], Engine],
    runs: RunStore,
    store: SeriesStore,
    s: SeriesRow,
    a: AttemptRow,
    run_id: str,
    worker: str | None = None,
    ended: Callable[[AttemptResult], None] | None = None,
) -> AttemptResult | None:
    """Claim a queued attempt (or take up one already claimed with `run_id`), run it and write its end: None when it
    was not queued any more (nothing ran). An attempt that raises ends as an infrastructure error, written here too.
    The claim is one transaction with the run's creation and first writes (`_run_attempt`). `worker`: the
    `aqven worker` running it (recorded on the attempt), when one does; `ended`: a write of the same transaction as
    the attempt's end (an `aqven worker` announces the end in it)."""
    for tries in range(STORE_TRIES):
        try:
            out = await _run_attempt(workspace, engine, runs, store, s, a, run_id, worker)
            break
        except NotQueued:
            return None
        except Exception as exc:
            if store.db.is_lost(exc) and tries < STORE_TRIES - 1:
                # A transaction of its own did not commit (PostgreSQL restarted under it): it runs on from what is
                # on record, as after a restart of the server (claimed or not, its run resumed from its last node).
                log.warning("series %s attempt %d: the store lost a transaction (%s); run again", s.id, a.idx, exc)
                a = store.attempt(s.id, a.idx)
                if a.status == "done":
                    return result_of_row(a) if a.run_id == run_id else None
                if a.status != "queued" and a.run_id != run_id:
                    return None  # another run has it
                continue
            out = internal_error(f"{type(exc).__name__}: {exc}", dec(a.cost_usd))
            # It raised before its first write (so before its claim): claimed now, unless another run has it.
            if (
                a.status == "queued"
                and not store.claim(s.id, a.idx, run_id, worker=worker)
                and store.attempt(s.id, a.idx).run_id != run_id
            ):
                return None
            break
    if not out.waiting:
        write = finishing_row(store, s, a, out)
        if ended is not None:  # in the same transaction as the end (an announcement goes out at its commit)
            write = functools.partial(_both, write, functools.partial(ended, out))
        for tries in range(STORE_TRIES):
            try:
                async with gate.released():  # committed with what other attempts of this process write meanwhile
                    await store.db.grouped(write)
                break
            except Exception as exc:
                if not store.db.is_lost(exc) or tries == STORE_TRIES - 1:
                    raise
                log.warning("series %s attempt %d: the store lost its end (%s); written again", s.id, a.idx, exc)
    return out


def _both(first: Callable[[], None], then: Callable[[], None]) -> None:
    first()
    then()


class NotQueued(BaseException):
    """A queued attempt's claim found it taken: its first transaction rolls back, so nothing of its run is written.
    A BaseException, so that it passes through the engine's handlers untouched, up to `run_owned`."""


def _claim(
    store: SeriesStore, s: SeriesRow, a: AttemptRow, run_id: str, inputs: str | None = None, worker: str | None = None
) -> None:
    def taken() -> None:
        raise NotQueued(f"attempt {a.idx} of {s.id} is not queued")

    # In a grouped write the refusal comes at the write's end, undoing all of it (its run's creation included).
    store.claim_in_write(s.id, a.idx, run_id, inputs, worker, taken=taken)


def _case(ws: Workspace, s: SeriesRow, name: str) -> Case:
    case = ws.case(s.plan.dataset_id, name)
    if case is not None:
        return case
    raise NotFoundError(f"case {name!r} is gone from {s.plan.dataset_id!r}", code=CASE_NOT_FOUND)


def inputs_hash(s: SeriesRow, ws: Workspace) -> str:
    try:
        return attempt_inputs_hash(ws, s.id, s.plan, s.experiment_id, simulated=s.simulated)
    except Exception as exc:  # a file that vanished while it was read: the attempt's inputs are not the series'
        return f"unreadable:{type(exc).__name__}"


async def _run_attempt(
    workspace: Callable[[], Workspace],
    engine: Callable[[], Engine],
    runs: RunStore,
    store: SeriesStore,
    s: SeriesRow,
    a: AttemptRow,
    run_id: str,
    worker: str | None = None,
) -> AttemptResult:
    """Run (or resume) one claimed attempt's run and score it. `workspace` gives the loaded project as it is now
    (it is read again to score and at the end, for the inputs the attempt ended on)."""
    ws = workspace()
    try:
        case = _case(ws, s, a.case_name)
    except NotFoundError as exc:
        if a.status == "queued":
            _claim(store, s, a, run_id, worker=worker)  # its end is written on a claimed row
        return AttemptResult(outcome="infra", code=exc.code, message=exc.message, cost=dec(a.cost_usd))
    started_on = a.inputs_hash
    runner = engine()
    before: list[Callable[[], object]] = []
    fresh = started_on is None
    if started_on is None:  # what the attempt starts on (a wait for a person keeps it)
        started_on = inputs_hash(s, ws)
    begun: RunRecord | Begun
    if a.status == "queued":  # claimed with its run's creation: the first transaction of both (`run_owned`)
        before.append(functools.partial(_claim, store, s, a, run_id, started_on if fresh else None, worker))
    else:
        if fresh:
            before.append(functools.partial(store.set_attempt_inputs, s.id, a.idx, started_on))
        if worker is not None and a.worker != worker:  # taken up here after the worker that ran it was lost
            before.append(functools.partial(store.set_attempt_worker, s.id, a.idx, worker))
    if a.status != "queued" and runs.exists(run_id):  # resumed: after a restart, a person's answer, another worker
        with runs.db.batch():
            for write in before:
                write()
            begun = runner.begin(run_id)
    else:
        # A new run: these writes, its creation and its start are one transaction with its first model request.
        request = request_for(s.plan, case, a.variant_id, a.seed, s.experiment_id)
        # The attempt's side: what may be shown of the run never depends on a later split.
        before.append(runs.creating(request, run_id, series_id=s.id, side=a.side, running=True))
        begun = runner.begin_new(run_id, request, before)
    record = begun if isinstance(begun, RunRecord) else await runner.proceed(begun, raise_lost=True)
    if record.status == "waiting_human":
        return AttemptResult(waiting=True)
    prior = dec(a.cost_usd)  # what an earlier, rate-limited try of this attempt spent
    out = AttemptResult(outcome="pass", value=1.0, cost=prior + dec(record.cost_usd))
    out.unpriced = record.unpriced_calls > 0
    out.tokens = record.input_tokens + record.output_tokens
    if record.status == "failed" and record.outcome == "infra":
        out.outcome, out.value = "infra", None
        out.code, out.message = (record.error.code, record.error.message) if record.error else ("PROVIDER_ERROR", "")
    else:
        results = await _score(workspace(), s, case, record, a.seed)
        out.checks = [r.to_json() for r in results]
        for r in results:
            if r.cost_usd is None:
                out.unpriced = True
            else:
                out.cost += r.cost_usd
        broken = next((r for r in results if r.error), None)
        if broken is not None and broken.error is not None:
            out.outcome, out.value = "infra", None
            out.code, out.message = broken.error.get("code", "CODE_ERROR"), broken.error.get("message", "")
        elif record.status == "failed":
            out.outcome, out.value = "model_failure", 0.0
            out.code, out.message = (record.error.code, record.error.message) if record.error else (None, None)
        elif s.plan.deciding_check:
            deciding = next((r for r in results if r.check_id == s.plan.deciding_check), None)
            if deciding is None or deciding.passed is None:
                out.outcome, out.value = "infra", None
                out.code, out.message = "CODE_ERROR", f"check {s.plan.deciding_check!r} gave no result"
            else:
                out.value = float(deciding.score if deciding.score is not None else (1.0 if deciding.passed else 0.0))
                out.outcome = "pass" if deciding.passed else "fail"
                if not deciding.passed:
                    out.code, out.message = "CHECK_FAILED", f"{deciding.check_id}: {deciding.reason}"
        else:
            failed = [r for r in results if r.passed is False]
            out.outcome = "fail" if failed else "pass"
            out.value = 0.0 if failed else 1.0
            if failed:
                out.code, out.message = "CHECK_FAILED", ", ".join(r.check_id for r in failed)
    # The inputs it ran on: the same at its end as at its start, or both (an edit while it ran, even one put
    # back later, shows as a hash no other attempt shares).
    end = inputs_hash(s, workspace())
    out.inputs_hash = started_on if end == started_on else f"{started_on}>{end}"
    return out


async def _score(ws: Workspace, s: SeriesRow, case: Case, record: Any, seed: int) -> list[Any]:
    if s.experiment_id is None:
        return []
    exp = ws.experiment(s.experiment_id)
    latency = None
    if record.started_at and record.ended_at:
        latency = (datetime.fromisoformat(record.ended_at) - datetime.fromisoformat(record.started_at)).total_seconds()
    view = AttemptView(
        output=record.output,
        status=record.status,
        error_code=record.error.code if record.error else None,
        outcome=record.outcome,
        case=case,
        cost_usd=None if record.unpriced_calls else dec(record.cost_usd),
        latency_s=latency,
        run_id=record.id,
    )
    return list(await score_checks(ws.project, exp, view, simulate=s.plan.simulate, seed=seed))
