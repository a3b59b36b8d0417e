"""The series scheduler: runs the attempts of a series under its spend cap, then decides.

Rules, in the order applied (DESIGN §6): the first attempt runs alone and its cost becomes the
reserve (the most any finished attempt cost); then attempts run side by side, ramping up with what the
series learned (one more than the attempts that finished with a cost: 1, 2, 4, 8, ... up to the
concurrency limit), and before starting one, if spent + reserve × (running + waiting for a person + 1)
reaches 90% of the cap, nothing more starts, the running ones finish and the series waits for approval.
Cancel stops new starts and lets running attempts finish (they are paid). A rate-limited attempt runs
once more at the end. Everything is in the database, so a restarted server resumes a series without
losing or repeating a finished attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from aqven import heap
from aqven.engine.runner import Engine
from aqven.errors import NotFoundError
from aqven.models import telemetry
from aqven.models.gate import CpuGate, held
from aqven.models.outcomes import PROVIDER_RATE_LIMITED, redact
from aqven.research.experiments.workspace import Workspace
from aqven.research.holdout import is_sealed, reads_held_out
from aqven.research.series.attempt import AttemptResult, dec, finish_row, internal_error, result_of_row, run_owned
from aqven.research.series.early import DECIDED_EARLY, EarlyStop, sequence_view
from aqven.research.series.end import finalize
from aqven.research.series.fill import AttemptFill
from aqven.research.series.view import refresh_sealed_view
from aqven.research.series.workers import (
    WORKER_LOST,
    AttemptPool,
    RaisedInWorker,
    RemotePool,
    WorkerDied,
    WorkerPool,
)
from aqven.research.stats.series_verdict import compute_verdict
from aqven.store.runs import RunStore, new_id, now_iso
from aqven.store.series import SeriesStore
from aqven.store.series_records import AttemptRow, SeriesRow, active_now
from aqven.store.series_tally import read_tally

log = logging.getLogger("aqven.series")


class _EndNotWritten(Exception):
    """Deciding a finished series failed midway; it stays running for the next start to decide."""


PAUSE_AT = Decimal("0.9")
WORKER_DEATHS = 5  # an attempt whose worker died this many times ends as an infrastructure error
RATE_LIMITED = PROVIDER_RATE_LIMITED


@dataclass
class _Tally:
    """What the cap rule needs: dollars spent by finished attempts, and the most one of them cost."""

    spent: Decimal
    reserve: Decimal | None
    closing: bool = False  # the 90% rule fired: start nothing more, pause once the running attempts finished
    done: int = 0  # finished attempts (a held-out series refreshes the numbers it shows at coarse steps of these)
    learned: int = 0  # finished attempts that told what an attempt costs: the ramp allows one more than these
    tokens: int = 0  # tokens (input + output) of the series' finished runs: what its token cap counts
    token_reserve: int | None = None  # the most tokens a finished attempt used
    near: str = "spend_near_cap"  # which cap the 90% rule fired for


def _near(s: SeriesRow, tally: _Tally, held: int, cap: Decimal) -> str | None:
    """Which cap the 90% rule fires for before one more attempt starts, or None: the spend cap (spent + the
    reserve × (held + 1)), else the token cap the same way (tokens used + the most an attempt used × (held + 1))."""
    assert tally.reserve is not None
    if tally.spent + tally.reserve * (held + 1) >= PAUSE_AT * cap:
        return "spend_near_cap"
    tokens = tally.token_reserve
    if s.token_cap is not None and tokens is not None and tally.tokens + tokens * (held + 1) >= PAUSE_AT * s.token_cap:
        return "tokens_near_cap"
    return None


RAMP_SKIP = 20
"""The ramp is skipped while the caps could absorb every attempt side by side costing this many times the dearest
one seen: then even a first batch far dearer than the first attempt cannot pass the 90% point."""


def _room_for_all(s: SeriesRow, tally: _Tally, width: int, cap: Decimal) -> bool:
    """True when `width` attempts side by side, each RAMP_SKIP times the dearest attempt seen (in money and in
    tokens), stay under the 90% point of the spend cap and of the token cap: no ramp is needed."""
    if tally.reserve is None:
        return False
    if tally.spent + tally.reserve * RAMP_SKIP * width >= PAUSE_AT * cap:
        return False
    tokens = tally.token_reserve
    return s.token_cap is None or (
        tokens is not None and tally.tokens + tokens * RAMP_SKIP * width < PAUSE_AT * s.token_cap
    )


def attempt_span(s: SeriesRow, a: AttemptRow) -> Any:
    """The OpenTelemetry span of one attempt (a no-op without an endpoint, `aqven.models.telemetry`).

    A held-out attempt names no case: it carries the case's position in the series' secret order only."""

    def attributes() -> dict[str, Any]:
        per_case = max(len(s.plan.variants) * s.plan.repeats, 1)
        out: dict[str, Any] = {
            "aqven.series_id": s.id,
            "aqven.kind": s.kind,
            "aqven.experiment_id": s.experiment_id or "",
            "aqven.flow_id": s.plan.flow_id,
            "aqven.on": a.side,
            "aqven.variant": a.variant_id,
            "aqven.repeat": a.rep,
            "aqven.attempt_index": a.idx,
            "aqven.case_index": a.idx // per_case,
            "aqven.simulated": s.simulated,
        }
        if a.side == "dev":
            out["aqven.case"] = a.case_name
        return out

    return telemetry.span("aqven.attempt", attributes)


def _internal_error(exc: Exception, cost: Decimal) -> AttemptResult:
    return internal_error(str(exc) if isinstance(exc, RaisedInWorker) else f"{type(exc).__name__}: {exc}", cost)


def _sets_reserve(outcome: str | None, cost: Decimal) -> bool:
    """Whether a finished attempt's cost tells what an attempt costs (not an infrastructure error that spent
    nothing)."""
    return outcome != "infra" or cost > 0


class SeriesRunner:
    def __init__(
        self,
        workspace: Callable[[], Workspace],
        engine: Callable[[], Engine],
        runs: RunStore,
        store: SeriesStore,
        remote: RemotePool | None = None,
    ) -> None:
        self._ws = workspace
        self._remote = remote  # cluster mode (`aqven serve --cluster`): attempts go to the store's `aqven worker`s
        self._engine = engine
        self.runs = runs
        self.store = store
        self._drivers: dict[str, asyncio.Task[None]] = {}
        # A series' bell: rung by `wake` (something outside changed: look at its running attempts again) and by each
        # of its attempts that ends (the driver goes on) — one event to wait on, not a task and a wait per step.
        self._wake: dict[str, asyncio.Event] = {}
        self._look: set[str] = set()  # series woken by `wake`, not just by an attempt's end
        # `changed`: anything a watcher shows moved (an attempt ended, a status); `moved`: a series' status may
        # have (what a long poll of series_get waits for: it returns only once the status settles, so waking it
        # at every attempt's end only made each poller read the series row again, per attempt).
        self.changed = asyncio.Condition()
        self.moved = asyncio.Condition()
        self.fill = AttemptFill(store)  # a new series' rows written after its start answered
        # The CPU phases of all attempts take turns in FIFO order, released while an attempt waits on a model
        # (aqven.models.gate): attempts started together would otherwise convoy. AQVEN_CPU_GATE=off turns it off
        # (for bench/perf/latency_bound.py's comparison).
        self.gate: CpuGate | None = None if os.environ.get("AQVEN_CPU_GATE", "").lower() == "off" else CpuGate()
        if self.gate is not None:  # a write waits for the attempts' CPU phases to join it (store/group_commit.py)
            store.db.group.hold = self.gate.busy
        self._workers: AttemptPool | None = None
        self._retired: list[AttemptPool] = []  # pools of an earlier `workers` setting, closed once idle

    # ---- control ----

    def drive(self, series_id: str) -> None:
        """Make sure a driver runs for the series (idempotent)."""
        task = self._drivers.get(series_id)
        if task is not None and not task.done():
            self.wake(series_id)
            return
        self._drivers[series_id] = asyncio.ensure_future(self._drive(series_id))

    def wake(self, series_id: str) -> None:
        event = self._wake.get(series_id)
        if event is not None:
            self._look.add(series_id)
            event.set()

    async def notify(self, *, progress_only: bool = False) -> None:
        """Wake the watchers of series: those of any change, and unless `progress_only` (attempts ended, no status
        changed), those waiting for a status to change."""
        async with self.changed:
            self.changed.notify_all()
        if not progress_only:
            async with self.moved:
                self.moved.notify_all()

    def resume_all(self) -> list[str]:
        """On server start: continue every series that was running or waiting for a person."""
        with contextlib.suppress(Exception):  # a project that does not load now: workers start with the first attempt
            self._pool()
        ids = self.store.ids_with_status("running", "waiting_human")
        # A series cancelled while attempts still ran: they finish (and are paid), then it is decided.
        ids += [
            r["id"] for r in self.store.db.query("SELECT id FROM series WHERE status='cancelled' AND ended_at IS NULL")
        ]
        for sid in ids:
            s = self.store.get(sid)
            if s.status == "running":
                # Downtime is not running time: the clock restarts now.
                self.store.update(sid, active_seconds=s.active_seconds, active_since=time.time())
            self.drive(sid)
        return ids

    async def warm(self) -> bool:
        """Start the worker processes now (when `workers` is above 1) and wait until they answer; False when there
        are none. The server starts them when it starts, so a first series does not wait for them."""
        pool = self._pool()
        return pool is not None and await pool.ready()

    def run_ids_owned(self) -> set[str]:
        rows = self.store.db.query("SELECT run_id FROM attempts WHERE run_id IS NOT NULL AND status='running'")
        return {r["run_id"] for r in rows}

    async def shutdown(self) -> None:
        await self.fill.shutdown()
        tasks = list(self._drivers.values())  # a driver removes itself from the dict when it ends
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        # Attempts in workers stop where they are (as cancelled ones in this process do): the next start resumes.
        for pool in [*self._retired, *([self._workers] if self._workers is not None else [])]:
            await asyncio.to_thread(pool.close)
        self._retired.clear()
        self._workers = None

    # ---- the driver ----

    async def _drive(self, series_id: str) -> None:
        await self.fill.ready(series_id)  # every attempt row first (a large series' are written after its start)
        wake = self._wake.setdefault(series_id, asyncio.Event())
        running: dict[int, asyncio.Task[str]] = {}
        # The database is the truth (a restart resumes from it); the driver keeps a copy of what it needs
        # to decide, so each step costs the same however many attempts the series has. `spent` counts every
        # attempt's recorded cost (a re-run's earlier try included); a finished attempt adds what it added.
        # Off the event loop: at 100,000 attempts this read took the loop for ~1.5 s (a GET waited behind it).
        queue, tally = await asyncio.to_thread(self._resume_state, series_id)
        heap.settle()  # the attempts just read stay for the series' life: out of the collector's full passes
        first = self.store.get(series_id)
        early = EarlyStop.resume(first, tally.done) if first.plan.stop_early else None
        look = True  # for attempts marked running that no task runs: on the first step, and after every wake
        waiting: list[int] = []
        try:
            while True:
                if series_id in self._look:
                    self._look.discard(series_id)
                    look = True
                wake.clear()
                s = self.store.get(series_id)
                if s.status not in ("running", "waiting_human", "cancelled"):
                    return
                if s.stop_reason == DECIDED_EARLY:
                    queue = []  # decided: nothing more starts; the running attempts finish, then it ends
                if look:
                    # Left by a dead server, waiting for a person, or answered by one: what makes an attempt such an
                    # orphan wakes the driver (a person's answer, an attempt that began to wait), so the running
                    # ones are not read after every attempt.
                    look = False
                    running_rows = self.store.attempts(series_id, status="running")
                    waiting = await self._adopt_orphans(s, running_rows, running, tally)
                if s.status == "cancelled":
                    if running:
                        await self._wait_any(running, wake)
                        continue
                    self._finalize_or_leave(series_id)
                    await self.notify()
                    return
                if s.status == "waiting_human":
                    if waiting and not running:
                        await wake.wait()
                        continue
                    self._set_status(s, "running")
                    continue
                if not queue and not running:
                    if waiting:
                        self._set_status(s, "waiting_human")
                        await self.notify()
                        await wake.wait()
                        continue
                    reruns = [] if s.stop_reason == DECIDED_EARLY else self._rate_limited(series_id)
                    if reruns:
                        for a in reruns:
                            self.store.requeue_for_rerun(series_id, a.idx, a.cost_usd or "0")
                        tally.done -= len(reruns)
                        queue = self.store.attempts(series_id, status="queued")
                        continue
                    self._finalize_or_leave(series_id)
                    await self.notify()
                    return
                if self._start_more(s, queue, running, tally, waiting=len(waiting)):
                    await self.notify()
                    return  # paused at the cap
                if running:
                    await self._wait_any(running, wake)
                    if early is not None and s.stop_reason is None and early.due(tally.done) and self._decided(s):
                        self.store.update(series_id, stop_reason=DECIDED_EARLY)
                elif waiting:
                    # Nothing runs, and nothing may start before a person answers (the first attempt's cost is not
                    # known yet, or the waiting attempts' reserves reach the cap): the series waits for them.
                    self._set_status(s, "waiting_human")
                    await self.notify()
                    await wake.wait()
        except asyncio.CancelledError:
            for task in running.values():
                task.cancel()
            raise
        except _EndNotWritten:
            pass  # left running on purpose: the next start decides it again (see _finalize_or_leave)
        except Exception as exc:  # a bug or a broken row: the series fails with a code instead of running forever
            for task in running.values():
                task.cancel()
            self._fail(series_id, exc)
            await self.notify()
        finally:
            if self._drivers.get(series_id) is asyncio.current_task():
                self._drivers.pop(series_id, None)

    def _rate_limited(self, series_id: str) -> list[AttemptRow]:
        rows = self.store.db.query(
            "SELECT idx FROM attempts WHERE series_id=? AND status='done' AND error_code=? AND reruns=0",
            (series_id, RATE_LIMITED),
        )
        return [self.store.attempt(series_id, r["idx"]) for r in rows]

    def _start_more(
        self,
        s: SeriesRow,
        queue: list[AttemptRow],
        running: dict[int, asyncio.Task[str]],
        tally: _Tally,
        *,
        waiting: int = 0,
    ) -> bool:
        """Start what the cap, the ramp and the concurrency allow; True when the series paused at the cap.

        An attempt waiting for a person (a human node) still holds its reserve: it has spent, and will spend
        more once answered. After the first attempt, attempts side by side ramp up with what the series learned
        of their cost: one more than the attempts that finished with a cost (1, 2, 4, 8, ... up to the
        concurrency limit), so a series with uneven costs learns a higher reserve before a wide batch starts —
        unless the caps are so far away that a whole batch RAMP_SKIP times dearer than any attempt seen would
        still stay under their 90% point (a latency-bound series then runs at full width after its first attempt).
        """
        cap = dec(s.cap_usd)
        width = self._ws().project.config.concurrency
        limit = width if _room_for_all(s, tally, width, cap) else min(width, tally.learned + 1)
        while queue and len(running) < limit:
            held = len(running) + waiting  # attempts that are spending: running, or waiting for a person
            if tally.reserve is None:
                if held:
                    break  # the first attempt runs alone: nothing has a price yet
            elif tally.closing or (near := _near(s, tally, held, cap)):
                # Near the cap: no new attempt starts; the running ones finish, then the series waits for a person.
                if not tally.closing:
                    tally.near = near or tally.near
                tally.closing = True
                if held:
                    break
                self._pause_at_cap(s, tally)
                return True
            attempt = queue.pop(0)
            # Claimed where it runs, with its run's first writes (research/series/attempt.py `run_owned`): with workers
            # on, this process writes nothing per attempt and never waits for the writer lock while they wait for work.
            running[attempt.idx] = self._track(s, attempt, new_id("run"), tally)
            if tally.reserve is None:
                break
        return False

    def _track(self, s: SeriesRow, attempt: AttemptRow, run_id: str, tally: _Tally) -> asyncio.Task[str]:
        pool = self._pool()

        async def run() -> str:
            # In the server, the attempt's CPU phases take the gate's turns; a worker process has its own gate.
            async with held(None if pool is not None else self.gate):
                return await body()

        async def body() -> str:
            cost, outcome = Decimal(0), None
            tokens: int | None = None  # what its run used, when the attempt says (else read from the run's row)
            try:
                with attempt_span(s, attempt) as span:
                    # Claimed, run and its end written where it runs (None: it was not queued any more).
                    if pool is not None:
                        got = await self._in_worker(pool, s, attempt, run_id)
                    else:
                        got = await run_owned(self._ws, self._engine, self.runs, self.store, s, attempt, run_id)
                    if got is None:
                        return "skipped"
                    out = got
                    if out.waiting:
                        self.wake(s.id)
                        result = "waiting"
                    else:
                        result, cost, outcome, tokens = "done", out.cost, out.outcome, out.tokens
                    span.set_attributes({"aqven.outcome": outcome or result, "aqven.cost_usd": str(cost)})
            except Exception as exc:  # a bug in one attempt must not stop the series: it is an infrastructure error
                cost, result, outcome = dec(attempt.cost_usd), "done", "infra"
                self._write_end(s, attempt, run_id, _internal_error(exc, cost))
            if result == "done":
                used = tokens if tokens is not None else self._run_tokens(run_id)
                tally.tokens += used
                tally.token_reserve = used if tally.token_reserve is None else max(tally.token_reserve, used)
                tally.done += 1
                self._coarse_step(s, tally.done)
                tally.spent += cost - dec(attempt.cost_usd)  # its recorded cost already held an earlier try's
                if outcome != "infra" or cost > 0:
                    # An attempt that failed before spending anything says nothing about what one costs: until
                    # one that does finishes, attempts keep running one at a time.
                    tally.reserve = cost if tally.reserve is None else max(tally.reserve, cost)
                    tally.learned += 1
            return result

        task = asyncio.ensure_future(run())
        bell = self._wake.get(s.id)
        if bell is not None:
            task.add_done_callback(lambda _task: bell.set())
        return task

    def _pool(self) -> AttemptPool | None:
        """The worker processes attempts run in (`workers` in aqven.yaml), or None: they run in this process. In
        cluster mode (`aqven serve --cluster`), the `aqven worker`s of the shared store (research/cluster)."""
        if self._remote is not None:
            if self._workers is None:
                self._workers = self._remote(self.store, lambda: self._ws().project.config.concurrency)
            return self._workers
        size = self._ws().project.config.workers
        if self._workers is not None and self._workers.size != size:
            self._retired.append(self._workers)  # it is closed once the attempts it runs have ended
            self._workers = None
        if size <= 1:
            return None
        if self._workers is None:
            self._workers = WorkerPool(self._ws().project.root, size)
        return self._workers

    async def _in_worker(
        self, pool: AttemptPool, s: SeriesRow, attempt: AttemptRow, run_id: str
    ) -> AttemptResult | None:
        """Run the attempt in a worker, which claims it and writes its end (None: it was not queued any more); a
        worker that dies under it (killed, crashed) is replaced and the attempt resumed from its run's last finished
        node in another, as after a restart of the server."""
        for _ in range(WORKER_DEATHS):
            try:
                return await pool.run(s, attempt, run_id)
            except WorkerDied as exc:
                # As far as it got: claimed or not, the inputs hash it started on, or its end written already.
                attempt = self.store.attempt(s.id, attempt.idx)
                if attempt.status == "done" and attempt.run_id == run_id:
                    return result_of_row(attempt)  # it died after it wrote the end, before it answered
                log.warning("series %s attempt %d: %s; resumed in another worker", s.id, attempt.idx, exc)
            finally:
                self._close_retired()
        lost = AttemptResult(
            outcome="infra",
            code=WORKER_LOST,
            message=f"the worker process running this attempt died {WORKER_DEATHS} times",
            cost=dec(attempt.cost_usd),
        )
        self._write_end(s, attempt, run_id, lost)
        return lost

    def _write_end(self, s: SeriesRow, a: AttemptRow, run_id: str, out: AttemptResult) -> None:
        """Write the end of an attempt whose runner could not write it (claimed here first if it never was)."""
        self.store.claim(s.id, a.idx, run_id)
        finish_row(self.store, s, a, out)

    def _close_retired(self) -> None:
        for pool in [p for p in self._retired if p.idle()]:
            self._retired.remove(pool)
            pool.close()

    def _coarse_step(self, s: SeriesRow, done: int) -> None:
        """A held-out series shows its numbers as of coarse steps only: store them when one is reached (at once,
        before another attempt can finish, so a step holds exactly the attempts finished by then)."""
        if is_sealed(s) or reads_held_out(s):
            refresh_sealed_view(self.store.get(s.id), self.store, done=done)

    def _decided(self, s: SeriesRow) -> bool:
        """A look of a stop_early series' confidence sequence: True when it decides the verdict."""
        tally = read_tally(self.store.db, s.id)
        verdict = compute_verdict(s, tally, provisional=True, sequence=sequence_view(self.store, s, tally))
        if verdict is None:
            return False
        decision = verdict.get("would_be") or verdict.get("verdict")
        return decision in ("confirmed", "refuted")

    async def _wait_any(self, running: dict[int, asyncio.Task[str]], wake: asyncio.Event) -> None:
        """Until an attempt ends or the series is woken (either rings `wake`, see `_track`)."""
        if not any(task.done() for task in running.values()):
            await wake.wait()
        for idx, task in list(running.items()):
            if task.done():
                running.pop(idx)
                if task.exception() is not None and not task.cancelled():
                    raise task.exception()  # type: ignore[misc]
        await self.notify(progress_only=True)

    async def _adopt_orphans(
        self, s: SeriesRow, attempts: list[AttemptRow], running: dict[int, asyncio.Task[str]], tally: _Tally
    ) -> list[int]:
        """Attempts marked running with no task (a restart, or a human answered): resume or finish them."""
        waiting: list[int] = []
        for a in attempts:
            if a.status != "running" or a.idx in running:
                continue
            assert a.run_id is not None
            try:
                record = self.runs.get(a.run_id)
            except NotFoundError:
                record = None
            if record is not None and record.status == "waiting_human":
                waiting.append(a.idx)
                continue
            running[a.idx] = self._track(s, a, a.run_id, tally)
        return waiting

    # ---- one attempt ----

    # ---- states ----

    def _set_status(self, s: SeriesRow, status: str) -> None:
        fields: dict[str, Any] = {"status": status}
        if status == "running" and s.active_since is None:
            fields["active_since"] = time.time()
        elif status != "running" and s.active_since is not None:
            fields["active_seconds"] = active_now(s)
            fields["active_since"] = None
        self.store.update(s.id, **fields)

    def _pause_at_cap(self, s: SeriesRow, tally: _Tally) -> None:
        pause: dict[str, Any] = {"reason": tally.near, "spent_usd": str(tally.spent), "cap_usd": s.cap_usd}
        if s.token_cap is not None:
            pause.update({"tokens_used": tally.tokens, "token_cap": s.token_cap})
        self.store.update(
            s.id,
            status="awaiting_approval",
            active_seconds=active_now(s),
            active_since=None,
            pause=pause | {"since": now_iso()},
        )

    def _run_tokens(self, run_id: str) -> int:
        """The tokens (input + output) one attempt's run used; 0 when it has no run row."""
        row = self.store.db.query_one("SELECT input_tokens + output_tokens AS t FROM runs WHERE id=?", (run_id,))
        return int(row["t"] or 0) if row is not None else 0

    def _resume_state(self, series_id: str) -> tuple[list[AttemptRow], _Tally]:
        """The queue and the cap tally a (re)started driver begins with. The finished attempts are read grouped by
        (status, outcome, cost), one row per distinct cost, not as rows: only the queued ones are loaded."""
        with self.store.db.reading() as conn:  # not under the writers' lock, which the event loop takes
            groups = conn.execute(
                "SELECT status, outcome, cost_usd, COUNT(*) AS n FROM attempts WHERE series_id=? GROUP BY 1, 2, 3",
                (series_id,),
            ).fetchall()
        tally = _Tally(spent=Decimal(0), reserve=None)
        for g in groups:
            cost, n = dec(g["cost_usd"]), int(g["n"])
            tally.spent += cost * n
            if g["status"] != "done":
                continue
            tally.done += n
            if _sets_reserve(g["outcome"], cost):
                tally.learned += n
                tally.reserve = cost if tally.reserve is None else max(tally.reserve, cost)
        tally.tokens, tally.token_reserve = self._tokens_so_far(series_id)
        queue = sorted(self.store.attempts(series_id, status="queued", reader=True), key=lambda a: (a.reruns, a.idx))
        return queue, tally

    def _tokens_so_far(self, series_id: str) -> tuple[int, int | None]:
        """(tokens of the series' runs, the most one of them used): the token tally a resumed driver starts from."""
        row = self.store.db.query_one(
            "SELECT SUM(input_tokens + output_tokens) AS t, MAX(input_tokens + output_tokens) AS m, COUNT(*) AS n"
            " FROM runs WHERE series_id=?",
            (series_id,),
        )
        if row is None or not row["n"]:
            return 0, None
        return int(row["t"] or 0), int(row["m"] or 0)

    def _finalize_or_leave(self, series_id: str) -> None:
        """Decide the series; when writing its end fails (the finding files, the row), leave it running: the
        next start decides it again and writes the finding once, as after a crash at the same point."""
        try:
            self._finalize(series_id)
        except Exception as exc:
            log.error(
                "series %s: its end was not written (%s); the next start decides it", series_id, redact(repr(exc))
            )
            raise _EndNotWritten from exc

    def _fail(self, series_id: str, exc: BaseException) -> None:
        """End a series whose driver raised: status failed, `SERIES_INTERNAL_ERROR`, the details in the log only
        (an exception's text could quote a held-out case); a restart does not resume it."""
        log.error("series %s failed: %s", series_id, redact(f"{type(exc).__name__}: {exc}"), exc_info=False)
        with contextlib.suppress(Exception):
            s = self.store.get(series_id)
            self.store.transition(
                series_id,
                ("running", "waiting_human", "cancelled", "awaiting_approval"),
                status="failed",
                ended_at=now_iso(),
                active_since=None,
                active_seconds=active_now(s) if s.active_since is not None else s.active_seconds,
                error={
                    "code": "SERIES_INTERNAL_ERROR",
                    "message": f"an internal error ({type(exc).__name__}) stopped the series; see .aqven/server.log",
                    "run_id": None,
                    "case": None,
                    "variant": None,
                },
                pause=None,
            )

    def _finalize(self, series_id: str) -> None:
        finalize(self._ws(), self.store, self.runs, series_id)

    def now(self) -> str:
        return datetime.now(UTC).isoformat()
