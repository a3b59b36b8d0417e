"""Series as the server offers them: start, get (with long-poll), cancel, approve and stop."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from aqven.engine.runner import Engine
from aqven.errors import SERIES_STATE_CONFLICT, VALIDATION_ERROR, AqvenError, StateConflictError
from aqven.research.experiments.workspace import Workspace
from aqven.research.launch.caps import check_ceiling, parse_cap
from aqven.research.launch.plan import project_cap_state
from aqven.research.series.end import finalize
from aqven.research.series.reads import rereads
from aqven.research.series.runner import SeriesRunner
from aqven.research.series.start import SeriesStartBody, prepare_series
from aqven.research.series.view import snapshot
from aqven.research.series.workers import RemotePool
from aqven.store.approvals import Approver, transition_recorded
from aqven.store.runs import RunStore
from aqven.store.series import SeriesStore
from aqven.store.series_records import ENDED, SeriesRow, active_now
from aqven.store.series_tally import TallyCache

SETTLED = ("done", "cancelled", "failed", "awaiting_approval", "waiting_human")
MAX_WAIT_S = 50.0
ENDED_VIEWS_KEPT = 32  # snapshots of ended series kept (a few KB each without include_cases)
INLINE_CHANGES = 2000  # a snapshot with at most this many changes to read since the last is computed on the loop
INLINE_MAX_S = 0.05  # unless one of its snapshots took longer there: then on a thread for OFF_LOOP_S
OFF_LOOP_S = 10.0


class SeriesConflict(StateConflictError):
    code = SERIES_STATE_CONFLICT


class SeriesService:
    def __init__(
        self,
        workspace: Callable[[], Workspace],
        engine: Callable[[], Engine],
        runs: RunStore,
        store: SeriesStore,
        remote: RemotePool | None = None,
    ) -> None:
        self.workspace = workspace
        self.engine = engine
        self.runs = runs
        self.store = store
        self.runner = SeriesRunner(workspace, engine, runs, store, remote)
        self._start_lock = asyncio.Lock()
        self._ended: dict[tuple[str, bool], tuple[SeriesRow, dict[str, Any]]] = {}
        self.tallies = TallyCache()  # a snapshot reads only the cells changed since the last one
        self._off_loop: dict[str, float] = {}  # series whose snapshots took too long for the loop, until when

    async def start(self, body: SeriesStartBody) -> dict[str, Any]:
        """Start a series (or return the one its client_op_id already started); answers at once."""
        async with self._start_lock:  # one start at a time, so a repeated client_op_id makes one series
            if body.client_op_id is not None:
                found = self.store.db.query_one("SELECT id FROM series WHERE client_op_id=?", (body.client_op_id,))
                if found is not None:
                    return self._summary(found["id"], created=False)
            fields = await asyncio.to_thread(prepare_series, self.workspace(), self.engine(), body, self.store)
            if fields["kind"] == "experiment" and fields["on"] == "holdout":
                # Re-reads are visible: the plan says how many of its cases earlier held-out series read.
                plan = fields["plan"]
                plan.launch_plan["earlier_reads"] = rereads(self.store, str(fields["experiment_id"]), plan.cases)
            sid, created = self.store.create(**fields)
        if created:
            self.runner.fill.begin(sid)  # the rows after the first FIRST_ROWS, written after this answers
        if created and fields["status"] == "running":
            self.runner.drive(sid)
        return self._summary(sid, created=created)

    def _summary(self, series_id: str, *, created: bool) -> dict[str, Any]:
        s = self.store.get(series_id)
        view = snapshot(s, self.store, self.runs, tallies=self.tallies)
        return {
            "series": {
                k: view[k]
                for k in (
                    "series_id",
                    "kind",
                    "experiment_id",
                    "on",
                    "status",
                    "simulated",
                    "created_at",
                    "progress",
                    "spend",
                    "pause",
                    "eta",
                )
            },
            "launch_plan": s.plan.launch_plan,
            "created": created,
        }

    async def get(self, series_id: str, *, wait_seconds: float = 0, include_cases: bool = False) -> dict[str, Any]:
        s = self.store.get(series_id)
        deadline = time.monotonic() + min(max(wait_seconds, 0.0), MAX_WAIT_S)
        while s.status not in SETTLED and time.monotonic() < deadline:
            # Woken when a status may have changed (and every 0.5 s all the same: a change made by another process).
            async with self.runner.moved:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.runner.moved.wait(), min(0.5, deadline - time.monotonic()))
            s = self.store.get(series_id)
        view = self._ended_view(s, include_cases)
        if view is None:
            view = await self._snapshot(s, include_cases)
            if s.ended_at is not None:
                self._keep_ended(s, include_cases, view)
        view = {**view, "as_of": time.time() if s.ended_at is not None else view["as_of"]}
        view["project_cap"] = self.project_cap_fields()
        return view

    async def _snapshot(self, s: SeriesRow, include_cases: bool) -> dict[str, Any]:
        if not include_cases and self._kept_close(s.id):
            # A few changes to read since the last snapshot: on the loop, in one go. On a thread beside the busy
            # loop of a running series it would take the interpreter lock back at every row SQLite steps
            # (waiting up to the 5 ms switch interval each time), and take many times its CPU in wall time.
            await asyncio.sleep(0)  # a turn of the loop all the same: a caller polling in a loop starves no one
            took = time.perf_counter()
            view = snapshot(s, self.store, self.runs, tallies=self.tallies)
            if time.perf_counter() - took > INLINE_MAX_S:  # too long to hold the loop: a thread for a while
                if len(self._off_loop) > 1000:
                    self._off_loop.clear()
                self._off_loop[s.id] = time.monotonic() + OFF_LOOP_S
            return view
        # Off the event loop: a first snapshot reads every cell, and running attempts must not wait for it.
        return await asyncio.to_thread(
            snapshot, s, self.store, self.runs, include_cases=include_cases, tallies=self.tallies
        )

    def _kept_close(self, series_id: str) -> bool:
        if self._off_loop.get(series_id, 0.0) > time.monotonic():
            return False
        behind = self.tallies.kept(series_id).behind(self.store.db)
        return behind is not None and behind <= INLINE_CHANGES

    def _ended_view(self, s: SeriesRow, include_cases: bool) -> dict[str, Any] | None:
        """The snapshot of an ended series, computed once: nothing it reads changes after the end (its row is
        compared whole, so a change to it still shows)."""
        hit = self._ended.get((s.id, include_cases))
        return hit[1] if hit is not None and hit[0] == s else None

    def _keep_ended(self, s: SeriesRow, include_cases: bool, view: dict[str, Any]) -> None:
        if len(self._ended) >= ENDED_VIEWS_KEPT:
            self._ended.pop(next(iter(self._ended)))
        self._ended[(s.id, include_cases)] = (s, view)

    def project_cap_fields(self) -> dict[str, Any]:
        """The confirmed project cap and whether the files ask for more (a person must confirm it)."""
        try:
            return project_cap_state(self.workspace()).fields()
        except AqvenError:  # the project does not load just now: the series' own caps still stand
            return {}

    async def cancel(
        self, series_id: str, reason: str | None = None, by: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Cancel a series; `by` says who, as the server proved it (an agent's token over MCP or REST, a person)."""
        await self.runner.fill.ready(series_id)  # no state change before its rows are all written
        s = self.store.get(series_id)
        fields: dict[str, Any] = {
            "status": "cancelled",
            "stop_reason": "cancelled",
            "pause": {"reason": "cancelled", **({"note": reason} if reason else {}), **({"by": by} if by else {})}
            if reason or by
            else None,
        }
        if s.active_since is not None:
            fields["active_seconds"] = active_now(s)
            fields["active_since"] = None
        if not self.store.transition(series_id, ("running", "awaiting_approval", "waiting_human"), **fields):
            raise SeriesConflict(
                f"series {series_id} has already stopped (status {s.status})",
                hint="only a running, paused or waiting series can be cancelled",
            )
        if s.status == "running" or s.status == "waiting_human":
            self.runner.drive(series_id)  # it stops starting, lets running attempts finish, then decides
        else:
            finalize(self.workspace(), self.store, self.runs, series_id)
        await self.runner.notify()
        return await self.get(series_id)

    async def approve(
        self, series_id: str, cap_usd: Any, who: Approver, token_cap: int | None = None
    ) -> dict[str, Any]:
        """A person continues a paused series with a higher cap (double the old one unless given).

        `who` says through which channel (Studio, a terminal, REST with the server token); the approval is
        recorded with the old and new cap in the same transaction as the status change. A series paused near its
        token cap continues with a higher token cap (`token_cap`, double the old one unless given)."""
        await self.runner.fill.ready(series_id)  # no state change before its rows are all written
        s = self.store.get(series_id)
        if s.status != "awaiting_approval":
            raise SeriesConflict(
                f"series {series_id} is not waiting for approval (status {s.status})",
                hint="approve a series whose status is awaiting_approval",
            )
        if (s.pause or {}).get("reason") == "tokens_near_cap":
            return await self._approve_tokens(s, token_cap, who)
        old = Decimal(s.cap_usd)
        given = parse_cap(cap_usd)
        reason = (s.pause or {}).get("reason")
        new = given if given is not None else (old if reason == "cap_above_project" else old * 2)
        spent = Decimal((s.pause or {}).get("spent_usd") or "0")
        if reason == "spend_near_cap" and new <= old:
            raise AqvenError(
                f"the new cap must be above the old one (${old})",
                code=VALIDATION_ERROR,
                hint=f"leave it out to double it to ${old * 2}",
                http_status=422,
            )
        if new <= spent:
            raise AqvenError(
                f"the new cap ${new} is not above what the series spent (${spent})",
                code=VALIDATION_ERROR,
                hint="give a higher cap",
                http_status=422,
            )
        check_ceiling(new)
        if not transition_recorded(
            self.store.db,
            series_id,
            ("awaiting_approval",),
            {"status": "running", "cap_usd": str(new), "pause": None, "active_since": time.time()},
            action="approve",
            who=who,
            old_cap_usd=str(old),
            new_cap_usd=str(new),
            spent_usd=str(spent),
            reason=reason,
        ):
            raise SeriesConflict(f"series {series_id} changed state meanwhile", hint="read it again")
        self.runner.drive(series_id)
        await self.runner.notify()
        return await self.get(series_id)

    async def _approve_tokens(self, s: SeriesRow, token_cap: int | None, who: Approver) -> dict[str, Any]:
        """Continue a series paused near its token cap under a higher one, recorded like a dollar approval."""
        pause = s.pause or {}
        old = int(s.token_cap or pause.get("token_cap") or 0)
        new = token_cap if token_cap is not None else old * 2
        used = int(pause.get("tokens_used") or 0)
        if new <= old or new <= used:
            raise AqvenError(
                f"the new token cap {new:,} must be above the old one ({old:,}) and the tokens used ({used:,})",
                code="VALIDATION_ERROR",
                hint=f"leave it out to double it to {old * 2:,}",
                http_status=422,
            )
        if not transition_recorded(
            self.store.db,
            s.id,
            ("awaiting_approval",),
            {"status": "running", "token_cap": new, "pause": None, "active_since": time.time()},
            action="approve",
            who=who,
            old_cap_usd=s.cap_usd,
            new_cap_usd=s.cap_usd,
            spent_usd=pause.get("spent_usd"),
            reason="tokens_near_cap",
            old_token_cap=old,
            new_token_cap=new,
        ):
            raise SeriesConflict(f"series {s.id} changed state meanwhile", hint="read it again")
        self.runner.drive(s.id)
        await self.runner.notify()
        return await self.get(s.id)

    async def stop(self, series_id: str, who: Approver) -> dict[str, Any]:
        """A person stops a paused series: it ends with verdict invalid (stopped by the spend cap)."""
        await self.runner.fill.ready(series_id)  # no state change before its rows are all written
        s = self.store.get(series_id)
        pause = s.pause or {}
        if not transition_recorded(
            self.store.db,
            series_id,
            ("awaiting_approval",),
            {"stop_reason": "stopped_at_cap"},
            action="stop",
            who=who,
            old_cap_usd=s.cap_usd,
            new_cap_usd=None,
            spent_usd=pause.get("spent_usd"),
            reason=pause.get("reason"),
        ):
            raise SeriesConflict(
                f"series {series_id} is not waiting for approval (status {s.status})",
                hint="stop applies to a series paused at its cap; cancel a running one",
            )
        finalize(self.workspace(), self.store, self.runs, series_id)
        await self.runner.notify()
        return await self.get(series_id)

    def list_series(self, experiment_id: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        out = []
        rows = self.store.list_series(experiment_id=experiment_id, limit=limit)
        # The spend of the series that ended (an active one's spend moves, and a held-out one shows it only at
        # coarse steps: its snapshot says it).
        spent = self.store.spent([s.id for s in rows if s.status in ENDED and s.ended_at is not None])
        for s in rows:
            usd, unpriced = spent.get(s.id, (None, 0))
            out.append(
                {
                    "series_id": s.id,
                    "kind": s.kind,
                    "experiment_id": s.experiment_id,
                    "on": s.on,
                    "status": s.status,
                    "created_at": s.created_at,
                    "ended_at": s.ended_at,
                    "simulated": s.simulated,
                    "verdict": (s.verdict or {}).get("verdict"),
                    "text": (s.verdict or {}).get("text"),
                    "finding": s.finding,
                    "stop_reason": s.stop_reason,  # "stopped_at_cap": Studio shows it as stopped, not done
                    "active": s.status not in ENDED,
                    "cap_usd": s.cap_usd,
                    "spend_usd": None if usd is None else str(usd),
                    "spend_lower_bound": unpriced > 0,
                    "flow_id": s.plan.flow_id,
                }
            )
        return out
