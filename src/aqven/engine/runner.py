"""Run a flow, or a range of its top-level nodes, and record its trace.

A run is resumable: every finished node's output is in the trace, so re-executing a run (after a
human answer or a server restart) reuses what finished and runs only the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aqven.engine.code_worker import CodeTimeout, run_code
from aqven.engine.compile import compile_flow
from aqven.engine.compiled import CompiledFlow, CompiledNode
from aqven.engine.template import render
from aqven.engine.variant import FlowPatch
from aqven.errors import NODE_OUTPUTS_MISSING, RANGE_INVALID, RUN_INPUT_INVALID, AqvenError, ProjectError, RunInputError
from aqven.models import gate, outage, rate_limit
from aqven.models.call import CallResult, ModelCall, call_model
from aqven.models.outcomes import CODE_ERROR, CODE_TIMEOUT, ModelCallError, outcome_class
from aqven.project.bindings import Binding, bindings_in, parse_binding, resolve
from aqven.project.conform import violation
from aqven.project.loader import Project
from aqven.project.pycode import load_function
from aqven.store.group_commit import Later
from aqven.store.records import RunError, RunRecord, RunRequest
from aqven.store.runs import RunStore

CallModel = Callable[[ModelCall, Callable[[str, dict[str, Any]], None] | None], Awaitable[CallResult]]
PatchResolver = Callable[[RunRequest], FlowPatch | None]
T = TypeVar("T")

MAX_RETRY_WAIT_S = 30.0
DEFAULT_CODE_TIMEOUT_S = 60.0


SHOW_AFTER_S = 0.1
"""A code node running longer than this has its run's held writes written while it runs (`_code_shown`)."""


class WaitingHuman(Exception):
    def __init__(self, node_id: str) -> None:
        super().__init__(node_id)
        self.node_id = node_id


@dataclass(frozen=True, slots=True)
class Begun:
    """A run `Engine.begin` marked running: what `Engine.proceed` runs."""

    run_id: str
    request: RunRequest
    fresh: bool = False  # a new run: no node of it has finished yet (nothing to read back to resume from)


@dataclass
class _Scope:
    input: Any
    context: dict[str, Any]
    nodes: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"input": self.input, "context": self.context, "nodes": self.nodes}


def derive_seed(run_seed: int, path: str) -> int:
    return int(hashlib.sha256(f"{run_seed}:{path}".encode()).hexdigest()[:12], 16)


class Engine:
    """Compiles and executes runs for one project."""

    def __init__(
        self, project: Project, runs: RunStore, *, call: CallModel | None = None, patch_for: PatchResolver | None = None
    ) -> None:
        self.project = project
        self.runs = runs
        self._call: CallModel = call or call_model
        self._patch_for = patch_for or (lambda _req: None)
        self._compiled: dict[tuple[str, str | None, str | None], CompiledFlow] = {}
        self._spans: dict[tuple[str, str | None, str | None, str | None, str | None], tuple[int, int, set[str]]] = {}
        # Writes of a run held back to share the transaction of the run's next write: each commit costs about as
        # much as the writes it holds, and with worker processes every transaction queues for SQLite's one writer.
        # What may wait: a run's start, a node's start, a code or group node's end: lost in a crash, they cost a
        # code node run again on resume. What may not wait past a wait of the run: a model's answer (it records
        # money spent), so a run holding one (`_paid`) writes it before any wait, and at the end of its node's task
        # while another node task of the run has not ended (it may be waiting); every write goes before a model
        # request (a request that is sent is on record) and before a wait for a person.
        self._held: dict[str, list[Callable[[], object]]] = {}
        self._paid: set[str] = set()
        self._tasks: dict[str, int] = {}  # a run's node tasks not yet ended (in scopes of several nodes)

    # ---- preparing ----

    def compile_for(self, request: RunRequest) -> CompiledFlow:
        # The project is immutable once loaded, so a flow (and a variant of it) compiles once per engine.
        key = (request.flow_id, request.experiment_id, request.variant_id)
        flow = self._compiled.get(key)
        if flow is None:
            flow = compile_flow(self.project, request.flow_id, self._patch_for(request))
            self._compiled[key] = flow
        return flow

    def prepare(self, request: RunRequest) -> CompiledFlow:
        """Compile and check that the run can start; raises before anything runs."""
        flow = self.compile_for(request)
        key = (request.flow_id, request.experiment_id, request.variant_id, request.from_node, request.to_node)
        span = self._spans.get(key)
        if span is None:
            span = self._spans[key] = self._span(flow, request)
        start, end, needed = span
        top = flow.top_ids()
        missing = sorted(needed - set(request.node_outputs)) if needed else []
        if missing:
            raise RunInputError(
                f"the range {top[start]}..{top[end]} reads {', '.join(missing)}, which runs above the range, and "
                "the case has no node_outputs for it",
                code=NODE_OUTPUTS_MISSING,
                hint=f"add node_outputs: {{{missing[0]}: ...}} to the case, or start the range earlier",
            )
        if start == 0:
            problem = violation(request.input, flow.input_schema)
            if problem:
                raise RunInputError(
                    f"the input does not match flow {flow.id!r}'s input type: {problem}",
                    code=RUN_INPUT_INVALID,
                    hint="give the input the flow declares (see `aqven check` or the flow's flow.yaml)",
                ) from None
        return flow

    @staticmethod
    def _span(flow: CompiledFlow, request: RunRequest) -> tuple[int, int, set[str]]:
        """(start, end, the nodes above it the range reads) of a request's range; raises when it is invalid.
        The same for every case of a series (Engine.prepare keeps it per flow, variant and range)."""
        top = flow.top_ids()
        for name, node_id in (("from", request.from_node), ("to", request.to_node)):
            if node_id is not None and node_id not in top:
                raise RunInputError(
                    f"--{name} {node_id!r} is not a top-level node of flow {flow.id!r}",
                    code=RANGE_INVALID,
                    hint=f"top-level nodes: {', '.join(top)}",
                )
        start = top.index(request.from_node) if request.from_node else 0
        end = top.index(request.to_node) if request.to_node else len(top) - 1
        if start > end:
            raise RunInputError(
                f"range {request.from_node}..{request.to_node} is empty: 'from' comes after 'to'",
                code=RANGE_INVALID,
                hint=f"top-level nodes in order: {', '.join(top)}",
            )
        return start, end, needed_above(flow, start, end)

    # ---- executing ----

    async def execute(self, run_id: str) -> RunRecord:
        """Execute (or resume) a run to its end, or until a human node waits."""
        with self.runs.db.batch():  # the writes of each stretch between two waits are one transaction
            begun = self.begin(run_id)
        return begun if isinstance(begun, RunRecord) else await self.proceed(begun)

    def begin(self, run_id: str) -> RunRecord | Begun:
        """The synchronous start of `execute`: the run's record when it already ended, else the run marked running
        and its start (or resume) traced."""
        record = self.runs.get(run_id)
        if record.status in ("done", "failed"):
            return record
        self._held.pop(run_id, None)  # nothing of an earlier execution is left to write
        self._paid.discard(run_id)
        self._mark_started(run_id, record.request, resumed=bool(self.runs.events(run_id, limit=1)))
        return Begun(run_id, record.request)

    def begin_new(self, run_id: str, request: RunRequest, before: Sequence[Callable[[], object]]) -> Begun:
        """A run that is not stored yet: `before` (the caller's writes, the run's creation among them, created
        running: `RunStore.creating(running=True)`) and the run's start event are held, and written with the run's
        first own write, which comes before its first wait (an llm node's model request, usually): a series
        attempt's start is one transaction."""
        self._held[run_id] = [*before, self._starting(run_id, request, resumed=False, created_running=True)]
        return Begun(run_id, request, fresh=True)

    def _mark_started(self, run_id: str, request: RunRequest, *, resumed: bool) -> None:
        self._starting(run_id, request, resumed=resumed)()

    def _starting(
        self, run_id: str, request: RunRequest, *, resumed: bool, created_running: bool = False
    ) -> Callable[[], None]:
        """The run marked running (unless it was created so) and its start traced, as a write to run later (its
        event made now)."""
        opening = {
            "flow_id": request.flow_id,
            "from": request.from_node,
            "to": request.to_node,
            "case": request.case_name,
            "simulate": request.simulate,
        }
        event = self.runs.event(run_id, "run_resume" if resumed else "run_start", None, opening)

        def write() -> None:
            if not created_running:
                self.runs.set_status(run_id, "running")
            event()

        return write

    async def proceed(self, begun: Begun, *, raise_lost: bool = False) -> RunRecord:
        """Run a begun run (`begin`) to its end, or until a human node waits. `raise_lost`: a transaction of the run
        that the store lost (`Database.is_lost`: PostgreSQL restarted under it) is raised to the caller, who runs
        the run on from what is on record (a series attempt), instead of failing the run."""
        run_id, request = begun.run_id, begun.request
        started = time.perf_counter()
        try:
            flow = self.prepare(request)
            done = {} if begun.fresh else self.runs.finished_outputs(run_id)
            output = await self._run_flow(run_id, flow, request, prefix="", top=True, done=done)
        except WaitingHuman:
            with self.runs.db.batch():
                self._flush(run_id)
                self.runs.set_status(run_id, "waiting_human")
                return self.runs.get(run_id)
        except AqvenError as exc:
            if raise_lost and self.runs.db.is_lost(exc):
                raise
            # A counted model failure or an infrastructure error; a project or code problem is infrastructure.
            outcome = outcome_class(exc.code) if isinstance(exc, ModelCallError) else "infra"
            return self._fail(run_id, exc.code, exc.message, outcome, exc.details.get("node_id"))
        except Exception as exc:  # a defect of ours: the run fails as infrastructure, the server goes on
            if raise_lost and self.runs.db.is_lost(exc):
                raise
            return self._fail(run_id, "ENGINE_ERROR", f"{type(exc).__name__}: {exc}", "infra", None)
        ending = {"status": "done", "output": output, "duration_ms": round((time.perf_counter() - started) * 1000, 3)}
        # Made before the transaction that writes them (other processes wait for it), and read back after it.
        end_event = self.runs.event(run_id, "run_end", None, ending)
        finish = self.runs.ending(run_id, status="done", output=output, outcome="ok")

        def end() -> Later[RunRecord]:
            end_event()
            # The record is answered by the end's own statement, as `_fail` reads it in its transaction: on
            # PostgreSQL with the group's commit, so it costs no round trip of its own.
            return finish()

        return await self._committed(run_id, end)

    def _hold(self, run_id: str, write: Callable[[], object], *, paid: bool = False) -> None:
        self._held.setdefault(run_id, []).append(write)
        if paid:
            self._paid.add(run_id)

    def _flush(self, run_id: str) -> None:
        """Write what the run held back (inside the caller's batch)."""
        self._write_taken(self._take(run_id))

    def _take(self, run_id: str) -> tuple[list[Callable[[], object]], bool]:
        """What the run held back, taken off its list to be written now (and whether a model's answer is in it)."""
        paid = run_id in self._paid
        self._paid.discard(run_id)
        return self._held.pop(run_id, []), paid

    @staticmethod
    def _write_taken(taken: tuple[list[Callable[[], object]], bool]) -> None:
        for write in taken[0]:
            write()

    def _unflush(self, run_id: str, taken: tuple[list[Callable[[], object]], bool]) -> None:
        """The transaction that wrote the run's held writes did not commit (the store's connection was lost, a write
        of it failed): they are held again, ahead of what was held since, so that the run's next write (its failure,
        at the least) still writes its creation and its claim first, and never writes about a run that is not there."""
        writes, paid = taken
        if writes:
            self._held[run_id] = [*writes, *self._held.get(run_id, ())]
        if paid:
            self._paid.add(run_id)

    async def _committed(self, run_id: str, write: Callable[[], T | Later[T]]) -> T:
        """The run's held writes and `write`, committed together with what other runs of this process write
        meanwhile (store/group_commit.py): the run goes on once they are on record, and waits without the CPU gate."""
        taken: list[tuple[list[Callable[[], object]], bool]] = []

        def together() -> T | Later[T]:
            if not taken:  # taken once: a group undone whole writes it again (store/group_commit.py)
                taken.append(self._take(run_id))
            self._write_taken(taken[0])
            return write()

        try:
            async with gate.released():
                return await self.runs.db.grouped(together)
        except Exception:
            if taken:
                self._unflush(run_id, taken[0])
            raise

    @contextlib.contextmanager
    def _write(self, run_id: str) -> Iterator[None]:
        """One transaction for the run's held writes and the block's."""
        taken = self._take(run_id)
        try:
            with self.runs.db.batch():
                self._write_taken(taken)
                yield
        except Exception:
            self._unflush(run_id, taken)
            raise

    def _event(self, run_id: str, kind: str, path: str | None, data: dict[str, Any]) -> None:
        with self._write(run_id):
            self.runs.append_event(run_id, kind, path, data)

    def _flush_paid(self, run_id: str) -> None:
        """Before a wait of the run (or while another of its nodes waits): write what is held if a model's answer
        is among it; the rest waits for the run's next write."""
        if run_id in self._paid:
            with self._write(run_id):
                pass

    def _fail(self, run_id: str, code: str, message: str, outcome: str, node_id: str | None) -> RunRecord:
        with self.runs.db.batch():
            self._flush(run_id)
            self.runs.append_event(
                run_id, "run_end", node_id, {"status": "failed", "code": code, "message": message, "outcome": outcome}
            )
            self.runs.finishing(
                run_id, status="failed", error=RunError(code=code, message=message, node_id=node_id), outcome=outcome
            )()
            return self.runs.get(run_id)

    async def _run_flow(
        self,
        run_id: str,
        flow: CompiledFlow,
        request: RunRequest,
        *,
        prefix: str,
        top: bool,
        done: dict[str, Any],
        flow_input: Any = None,
    ) -> Any:
        """Run a flow's nodes, those in `done` (the outputs of the run's nodes that finished before this execution,
        by path) taken as they are."""
        top_ids = flow.top_ids()
        scope = _Scope(input=request.input if top else flow_input, context=request.context)
        nodes = flow.nodes
        end_index = len(nodes) - 1
        if top:
            start = top_ids.index(request.from_node) if request.from_node else 0
            end_index = top_ids.index(request.to_node) if request.to_node else len(nodes) - 1
            for node_id in top_ids[:start]:
                if node_id in request.node_outputs:
                    scope.nodes[node_id] = request.node_outputs[node_id]
            nodes = nodes[start : end_index + 1]
        await self._run_scope(run_id, nodes, scope, request, prefix, done)
        if top and end_index < len(flow.nodes) - 1:
            return scope.nodes[flow.nodes[end_index].id]
        return resolve(flow.result, scope.as_dict())

    async def _run_scope(
        self,
        run_id: str,
        nodes: list[CompiledNode],
        scope: _Scope,
        request: RunRequest,
        prefix: str,
        done: dict[str, Any],
    ) -> None:
        if len(nodes) == 1:
            # The usual flow of one llm node: no task to schedule and gather.
            await self._run_node(run_id, nodes[0], scope, request, prefix, done)
            return
        self._flush_paid(run_id)  # the tasks start after a wait
        tasks: dict[str, asyncio.Task[None]] = {}
        local_ids = {n.id for n in nodes}

        async def run_one(node: CompiledNode) -> None:
            self._tasks[run_id] = self._tasks.get(run_id, 0) + 1
            try:
                for dep in node.deps & local_ids:
                    await tasks[dep]
                await self._run_node(run_id, node, scope, request, prefix, done)
                if self._tasks[run_id] > 1:  # another node of the run may be waiting now: a model's answer goes first
                    self._flush_paid(run_id)
            finally:
                self._tasks[run_id] -= 1
                if not self._tasks[run_id]:
                    del self._tasks[run_id]

        for node in nodes:
            tasks[node.id] = asyncio.ensure_future(run_one(node))
        results = await asyncio.gather(*tasks.values(), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        real = [e for e in errors if not isinstance(e, WaitingHuman)]
        if real:
            raise real[0]
        if errors:
            raise errors[0]

    async def _run_node(
        self,
        run_id: str,
        node: CompiledNode,
        scope: _Scope,
        request: RunRequest,
        prefix: str,
        done: dict[str, Any],
    ) -> None:
        path = f"{prefix}{node.id}"
        if path in done:
            scope.nodes[node.id] = done[path]
            return
        inputs = resolve(node.inputs, scope.as_dict())
        opening = {"kind": node.kind, "inputs": inputs} if node.kind != "group" else {"kind": node.kind}
        # Written with the run's next write: an llm node's model request, a code node's end (`_held`).
        self._hold(run_id, self.runs.event(run_id, "node_start", path, opening))
        started = time.perf_counter()
        try:
            output = await self._dispatch(run_id, node, inputs, scope, request, prefix, done)
        except WaitingHuman:
            raise
        except AqvenError as exc:
            exc.details.setdefault("node_id", path)
            self._event(run_id, "node_error", path, {"code": exc.code, "message": exc.message})
            raise
        scope.nodes[node.id] = output
        ending = {"output": output, "duration_ms": round((time.perf_counter() - started) * 1000, 3)}
        # With an llm node's response, before the run's next wait; else with the run's next write (`_held`).
        self._hold(run_id, self.runs.event(run_id, "node_end", path, ending))

    async def _dispatch(
        self,
        run_id: str,
        node: CompiledNode,
        inputs: dict[str, Any],
        scope: _Scope,
        request: RunRequest,
        prefix: str,
        done: dict[str, Any],
    ) -> Any:
        path = f"{prefix}{node.id}"
        if node.kind == "llm":
            return await self._llm(run_id, node, inputs, request, path)
        if node.kind == "code":
            return await self._code_shown(run_id, node, inputs, path)
        if node.kind == "call":
            assert node.called is not None
            return await self._run_flow(
                run_id, node.called, request, prefix=f"{path}/", top=False, done=done, flow_input=inputs
            )
        if node.kind == "group":
            await self._run_scope(run_id, node.children, scope, request, prefix, done)
            return resolve(node.result, scope.as_dict())
        if node.kind == "human":
            answered, answer = self.runs.human_answer(run_id, path)
            if not answered:
                self._event(
                    run_id,
                    "human_wait",
                    path,
                    {
                        "question": getattr(node.spec, "question", ""),
                        "inputs": inputs,
                        "output_schema": node.output_schema,
                    },
                )
                raise WaitingHuman(path)
            by = self.runs.human_answer_by(run_id, path)  # who answered, proven by the server (issue 27)
            self._event(run_id, "human_answer", path, {"answer": answer, **({"by": by} if by else {})})
            return answer
        raise AqvenError(f"unknown node kind {node.kind}", code=CODE_ERROR)

    async def _llm(
        self, run_id: str, node: CompiledNode, inputs: dict[str, Any], request: RunRequest, path: str
    ) -> Any:
        assert node.agent is not None and node.prompt_text is not None
        prompt = render(node.prompt_text, inputs)
        retries = self.project.config.engine.provider_retries
        backoff = self.project.config.engine.retry_backoff_s
        seed = derive_seed(request.seed, path)
        attempt = 0
        held = 0  # waits for a provider that does not answer: they do not use up provider_retries
        while True:
            call = ModelCall(
                agent=node.agent,
                prompt=prompt,
                output_schema=node.output_schema,
                simulate=request.simulate,
                seed=seed,
                node_id=path,
                project_root=self.project.root,
                inputs=inputs,
                case_name=request.case_name,
                retry=attempt,
            )
            asking = {
                "agent": node.agent.id,
                "model": node.agent.model,
                "simulated": request.simulate,
                "prompt": prompt,
                "output_mode": node.agent.output_mode,
                "attempt": attempt,
            }
            # On record, with what is held (the node's start, a new run's start and claim), before money is spent.
            await self._committed(run_id, self.runs.event(run_id, "model_request", path, asking))

            def on_event(kind: str, data: dict[str, Any]) -> None:
                self._event(run_id, kind, path, data)

            limits = None if request.simulate else self.project.config.providers.get(node.agent.provider)
            slot = None
            if limits is not None:
                async with gate.released():  # waiting for the provider's limit holds no one else up
                    slot = await rate_limit.acquire(node.agent.provider, rpm=limits.rpm, tpm=limits.tpm)
            try:
                result = await self._call(call, on_event)
            except BaseException as failure:
                if not isinstance(failure, ModelCallError):
                    rate_limit.record(slot, 0)  # cancelled, or a bug: the call ended all the same
                    raise
                exc = failure
                rate_limit.record(slot, exc.input_tokens + exc.output_tokens)
                with self._write(run_id):
                    if exc.requests or exc.input_tokens or exc.cost_usd is not None:
                        self._count_usage(run_id, exc)  # a failed call that reached the model is paid for
                    self.runs.append_event(
                        run_id,
                        "model_error",
                        path,
                        {
                            "code": exc.code,
                            "message": exc.message,
                            "outcome": exc.outcome,
                            "retryable": exc.retryable,
                            "provider_status": exc.provider_status,
                            "input_tokens": exc.input_tokens,
                            "output_tokens": exc.output_tokens,
                            "cost_usd": None if exc.cost_usd is None else str(exc.cost_usd),
                            "cost_source": exc.cost_source,
                        },
                    )
                hold = self.project.config.engine.outage_hold_s
                pause = (
                    None
                    if request.simulate or not outage.unreachable(exc)
                    else outage.outage_wait(node.agent, held, backoff_s=backoff, hold_s=hold)
                )
                if pause is not None:
                    # The provider does not answer: hold this call (bounded by outage_hold_s since the outage began).
                    held += 1
                    event = {"code": exc.code, "attempt": attempt, "wait_s": round(pause, 3), "outage": True}
                    self._event(run_id, "retry", path, event)
                    async with gate.released():
                        await asyncio.sleep(pause)
                    continue
                if exc.retryable and attempt < retries:
                    wait = min(
                        MAX_RETRY_WAIT_S, exc.retry_after if exc.retry_after is not None else backoff * (2**attempt)
                    )
                    if exc.retry_after is None:
                        wait = outage.jittered(wait)  # so attempts failing together do not retry in step
                    if request.simulate:
                        wait = 0.0
                    attempt += 1
                    self._event(run_id, "retry", path, {"code": exc.code, "attempt": attempt, "wait_s": wait})
                    async with gate.released():  # a series' other attempts run while this one waits
                        await asyncio.sleep(wait)
                    continue
                raise
            rate_limit.record(slot, result.input_tokens + result.output_tokens)
            if not request.simulate:
                outage.reached(node.agent)
            # Written with the node's end, which follows at once (`_run_node`).
            self._hold(run_id, self._response(run_id, path, result), paid=True)
            return result.output

    def _count_usage(self, run_id: str, used: CallResult | ModelCallError) -> None:
        """Add what a model call used (tokens, cost) to its run."""
        self.runs.add_usage(
            run_id,
            input_tokens=used.input_tokens,
            output_tokens=used.output_tokens,
            cost=used.cost_usd,
            simulated=used.simulated,
        )

    def _response(self, run_id: str, path: str, result: CallResult) -> Callable[[], None]:
        """A model's answer: its usage added to the run and its event, as a write to run later (the event made now)."""
        event = self.runs.event(
            run_id,
            "model_response",
            path,
            {
                "model_name": result.model_name,
                "provider": result.provider,
                "simulated": result.simulated,
                "input_tokens": result.input_tokens,
                "output_tokens": result.output_tokens,
                "cost_usd": None if result.cost_usd is None else str(result.cost_usd),
                "cost_source": result.cost_source,
                "latency_ms": result.latency_ms,
                "output_retries": result.output_retries,
                "output": result.output,
            },
        )

        def write() -> None:
            self._count_usage(run_id, result)
            event()

        return write

    async def _code_shown(self, run_id: str, node: CompiledNode, inputs: dict[str, Any], path: str) -> Any:
        """A code node runs on a thread, a wait: a model's answer the run holds is written first, and what else it
        holds (its start, a series attempt's claim) once the code has taken SHOW_AFTER_S, so a slow code node's run
        is on record, and counted running, while it runs. A claim that fails there fails the node's run as it would
        have at the run's next write."""
        self._flush_paid(run_id)
        failed: list[BaseException] = []

        def show() -> None:
            try:
                if self._held.get(run_id):
                    with self._write(run_id):
                        pass
            except BaseException as exc:  # raised in the run's own task below, not in the loop's handler
                failed.append(exc)

        timer = asyncio.get_running_loop().call_later(SHOW_AFTER_S, show)
        try:
            value = await self._code(node, inputs, path)
        finally:
            timer.cancel()
        if failed:
            raise failed[0]
        return value

    async def _code(self, node: CompiledNode, inputs: dict[str, Any], path: str) -> Any:
        assert node.code_file is not None and node.code_function is not None
        timeout_s = getattr(node.spec, "timeout_s", DEFAULT_CODE_TIMEOUT_S)
        try:
            fn = load_function(self.project.root, node.code_file, node.code_function)
            value = await run_code(fn, inputs, timeout_s)  # in a worker thread: never on the server's loop
        except CodeTimeout:
            raise AqvenError(
                f"code node {path!r} did not finish within its timeout of {timeout_s:g} s",
                code=CODE_TIMEOUT,
                hint=f"make {node.code_file.name}:{node.code_function} faster, or raise the node's timeout_s",
                details={"node_id": path},
            ) from None
        except ProjectError as exc:
            raise AqvenError(exc.message, code=CODE_ERROR, hint=exc.hint, file=exc.file, line=exc.line) from None
        except Exception as exc:  # the project's own code: report it, never crash the engine
            raise AqvenError(
                f"code node {path!r} raised {type(exc).__name__}: {exc}",
                code=CODE_ERROR,
                hint=f"fix {node.code_file.name}:{node.code_function}",
                details={"node_id": path},
            ) from None
        problem = violation(value, node.output_schema)
        if problem:
            raise AqvenError(
                f"code node {path!r} returned a value that breaks its output type: {problem}",
                code=CODE_ERROR,
                hint="return what the node's output declares",
            ) from None
        return value


def needed_above(flow: CompiledFlow, start: int, end: int) -> set[str]:
    """The top-level nodes above the range start..end whose outputs the range reads (a case's node_outputs)."""
    above = set(flow.top_ids()[:start])
    needed: set[str] = set()
    for node in flow.nodes[start : end + 1]:
        for n in [node, *_descendants(node)]:
            for b in _node_bindings(n):
                if b.source == "node" and b.node in above:
                    needed.add(b.node)
    if end == len(flow.nodes) - 1 and start > 0:
        b = parse_binding(flow.result)
        if b.node in above:
            needed.add(b.node)
    return needed


def _descendants(node: CompiledNode) -> list[CompiledNode]:
    out: list[CompiledNode] = []
    for c in node.children:
        out.append(c)
        out.extend(_descendants(c))
    return out


def _node_bindings(node: CompiledNode) -> list[Binding]:
    found = bindings_in(node.inputs)
    if node.result:
        found.append(parse_binding(node.result))
    return found
