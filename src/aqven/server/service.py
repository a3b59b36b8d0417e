"""The project service: one project, its database and engine, and the runs in flight.

The project files are re-read when they change, so an edit is picked up by the next request
without restarting the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aqven import heap
from aqven.engine.runner import Engine
from aqven.errors import NotFoundError, RunInputError, StateConflictError
from aqven.models.pricing import warm_prices
from aqven.project.cases import find_case
from aqven.project.conform import violation
from aqven.project.loader import Project
from aqven.project.local import simulate_enabled
from aqven.project.schema import Case
from aqven.project.watch import FINGERPRINT_EVERY_S, fingerprint
from aqven.research.cluster.dispatch import cluster_pool
from aqven.research.cluster.queue import cluster_wanted
from aqven.research.diagnostics.workspace import loaded_diagnostics
from aqven.research.experiments.workspace import Workspace
from aqven.research.findings.writing import regenerate
from aqven.research.holdout import check_case, check_run
from aqven.research.series.service import SeriesService
from aqven.store.approvals import Approver
from aqven.store.db import SERIES_CHANNEL
from aqven.store.open import project_database
from aqven.store.provider_limits import share_limits
from aqven.store.records import RunRecord, RunRequest
from aqven.store.runs import RunStore
from aqven.store.series import SeriesStore


class ProjectService:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.db = project_database(self.root)
        self.limits = share_limits(self.db, f"server-{os.getpid()}")  # None on SQLite (the limits in memory)
        self.runs = RunStore(self.db)
        self._workspace: Workspace | None = None
        self._checked = 0.0
        self._fp: tuple[tuple[str, float, int], ...] | None = None
        self._loading = threading.Lock()
        self.warmed = threading.Event()  # `warm` ended (every server warms once, at its start)
        self._tasks: dict[str, asyncio.Task[RunRecord]] = {}
        self._engine: tuple[Workspace, Engine] | None = None
        remote = cluster_pool if cluster_wanted() else None
        self.series = SeriesService(self.workspace, self.engine, self.runs, SeriesStore(self.db), remote)
        self._unlisten: Callable[[], None] = lambda: None

    # ---- project ----

    def workspace(self) -> Workspace:
        """The project and its experiments, re-read when a file changed."""
        now = time.monotonic()
        if self._workspace is not None and now - self._checked < FINGERPRINT_EVERY_S:
            return self._workspace
        with self._loading:  # while `warm` loads it, wait for that load instead of doing it twice
            fp = fingerprint(self.root)
            self._checked = now
            if self._workspace is None or fp != self._fp:
                self._workspace = Workspace.load(self.root)
                self._fp = fp
            return self._workspace

    def warm(self) -> None:
        """Load the project, what `aqven check` finds in it and the price table before the first request needs
        them (run in a thread when the server starts): the first series' start would wait for them. The next
        request still looks at the files (the load stays unchecked), and a project that does not load is left
        to the request that reads it, which reports why."""
        try:
            with contextlib.suppress(Exception):
                with self._loading:
                    if self._workspace is None:
                        self._fp = fingerprint(self.root)
                        self._workspace = Workspace.load(self.root)
                    ws = self._workspace
                loaded_diagnostics(ws)
                warm_prices()
        finally:
            heap.settle()  # the project and the prices stay: out of the collector's full passes
            self.warmed.set()  # loaded, or found not to load: /api/health says so, and a starting CLI waits for it

    def project(self) -> Project:
        return self.workspace().project

    def engine(self) -> Engine:
        ws = self.workspace()
        if self._engine is None or self._engine[0] is not ws:
            self._engine = (ws, Engine(ws.project, self.runs, patch_for=ws.patch_for))
        return self._engine[1]

    def find_case(self, case_name: str, dataset_id: str | None) -> tuple[str, Case]:
        return find_case(self.project().datasets, case_name, dataset_id)

    # ---- held-out cases (aqven.research.holdout decides) ----

    def package(self) -> str | None:
        """The salt of the dev/holdout split; None when aqven.yaml names no valid package (every case is then
        treated as held out)."""
        return self.project().split_package

    def visible_run(self, run_id: str) -> RunRecord:
        """A run that may be shown: RUN_NOT_FOUND when there is none, HOLDOUT_HIDDEN when it ran a held-out case."""
        record = self.runs.get(run_id)
        check_run(run_id, record.side, record.case_name)  # the side it ran on, never today's split
        return record

    # ---- runs ----

    def build_request(self, body: dict[str, Any]) -> RunRequest:
        flow_id = body.get("flow_id")
        if not isinstance(flow_id, str) or not flow_id:
            raise RunInputError("flow_id is required", code="VALIDATION_ERROR", hint="give the flow to run")
        if flow_id not in self.project().flows:
            raise NotFoundError(
                f"no flow {flow_id!r}",
                code="FLOW_NOT_FOUND",
                hint=f"flows: {', '.join(self.project().flows) or 'none'}",
            )
        case_name, dataset_id = body.get("case"), body.get("dataset_id")
        if case_name is not None and body.get("input") is not None:
            raise RunInputError(
                "give either a case or an input, not both", code="VALIDATION_ERROR", hint="--case NAME or --input JSON"
            )
        fields: dict[str, Any] = {}
        if case_name is not None:
            dataset_id, case = self.find_case(str(case_name), dataset_id)
            check_case(self.package(), case.name)  # held-out cases run only inside a series
            fields = {
                "input": case.input,
                "context": case.context,
                "node_outputs": case.node_outputs,
                "case_name": case.name,
                "dataset_id": dataset_id,
            }
        elif "input" in body:
            fields = {
                "input": body.get("input"),
                "context": body.get("context") or {},
                "node_outputs": body.get("node_outputs") or {},
            }
        else:
            raise RunInputError(
                "a run needs a case or an input", code="VALIDATION_ERROR", hint="--case NAME or --input JSON"
            )
        seed = body.get("seed")
        return RunRequest(
            flow_id=flow_id,
            from_node=body.get("from_node"),
            to_node=body.get("to_node"),
            simulate=simulate_enabled(self.root, bool(body.get("simulate"))),
            seed=int(seed) if seed is not None else random.randrange(2**31),
            **fields,
        )

    def start_run(self, request: RunRequest) -> str:
        engine = self.engine()
        engine.prepare(request)  # refuse before anything is stored or runs
        side = self.project().side(request.case_name) if request.case_name else None
        run_id = self.runs.create(request, side=side)
        self._spawn(run_id)
        return run_id

    def _spawn(self, run_id: str) -> asyncio.Task[RunRecord]:
        task = asyncio.ensure_future(self.engine().execute(run_id))
        self._tasks[run_id] = task
        task.add_done_callback(lambda _t: self._tasks.pop(run_id, None))
        return task

    async def wait_run(self, run_id: str, timeout: float | None = None) -> RunRecord:
        task = self._tasks.get(run_id)
        if task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), timeout)
        return self.runs.get(run_id)

    def answer_human(self, run_id: str, node_id: str, answer: Any, who: Approver) -> None:
        record = self.runs.get(run_id)
        if record.status != "waiting_human" or record.waiting_node != node_id:
            raise StateConflictError(
                f"run {run_id} is not waiting for node {node_id!r} (status {record.status}"
                + (f", waiting for {record.waiting_node!r}" if record.waiting_node else "")
                + ")",
                code="RUN_NOT_WAITING",
                hint="answer the node the run waits for",
            )
        waits = [e for e in self.runs.node_events(run_id, node_id) if e.kind == "human_wait"]
        schema = waits[-1].data.get("output_schema") if waits else None
        problem = violation(answer, schema) if schema else None
        if problem:
            raise RunInputError(
                f"the answer does not match node {node_id!r}'s output type: {problem}",
                code="VALIDATION_ERROR",
                hint=f"answer with a value of type {schema}",
            ) from None
        self.runs.answer(run_id, node_id, answer, who)
        self.runs.set_status(run_id, "queued")
        if record.series_id is not None:
            self.series.runner.drive(record.series_id)  # the series driver resumes its own attempts
        else:
            self._spawn(run_id)

    def resume_interrupted(self) -> list[str]:
        """After a restart: finish runs and series a dead server left, and repair a stale FINDINGS.md."""
        regenerate(self.root)
        if self.limits is not None:  # a dead server's calls in flight hold no provider's window any more
            self.limits.settle_orphans()
        rows = self.db.query("SELECT id FROM runs WHERE status IN ('running', 'queued') AND series_id IS NULL")
        ids = [r["id"] for r in rows]
        for run_id in ids:
            self._spawn(run_id)
        self.series.runner.resume_all()
        return ids

    def listen(self) -> None:
        """Hear the status changes other processes announce on the store (a worker, a colleague's command on a
        shared store) and wake this server's waiters as its own changes do (a series_get long poll, Studio)."""
        loop = asyncio.get_running_loop()

        def heard(series_id: str) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                asyncio.run_coroutine_threadsafe(self.series.runner.notify(), loop)

        self._unlisten = self.db.listen(SERIES_CHANNEL, heard)

    async def shutdown(self) -> None:
        self._unlisten()
        await self.series.runner.shutdown()
        for task in list(self._tasks.values()):
            task.cancel()
        if self.limits is not None:
            self.limits.close()
        self.db.close()
