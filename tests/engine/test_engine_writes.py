"""When the engine writes a run: few transactions, and never a model's answer held across a wait.

A run's node starts and code-node ends wait for the run's next write (they share its transaction), or for a code
node that takes longer than SHOW_AFTER_S; a model's answer records money spent, so it is on record before the run
waits for anything else: another node's model call, a code node's thread. Read here from a second connection while
the run is still waiting, as a crash would leave it.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from aqven.engine.runner import Engine
from aqven.models.call import CallResult, ModelCall
from aqven.project.loader import load_project
from aqven.store.db import Database
from aqven.store.records import RunRequest
from aqven.store.runs import RunStore, new_id
from aqven.store.sqlite_db import SqliteDatabase
from support.model_answers import answered
from support.projects import write_files

FILES = {
    "aqven.yaml": "package: demo\nengine: {provider_retries: 0, retry_backoff_s: 0}\n",
    "agents/a.yaml": "model: openrouter:openai/gpt-4.1-mini\nsimulator: sim.py:a\n",
    "sim.py": "def a(req):\n    return None\n",
    # fast and slow side by side: fast's answer must be written while slow still waits for its model
    "flows/pair/flow.yaml": """
input: {q: string}
output: {answer: string}
nodes:
  - {id: fast, kind: llm, agent: a, prompt: ask.md, inputs: {q: $input.q}, output: {answer: string}}
  - {id: slow, kind: llm, agent: a, prompt: ask.md, inputs: {q: $input.q}, output: {answer: string}}
  - id: join
    kind: code
    code: code.py:join
    inputs: {f: $fast.out.answer, s: $slow.out.answer}
    output: {answer: string}
""",
    # a model's answer, then a code node that takes its time on its thread
    "flows/chain/flow.yaml": """
input: {q: string}
output: {answer: string}
nodes:
  - {id: ask, kind: llm, agent: a, prompt: ask.md, inputs: {q: $input.q}, output: {answer: string}}
  - {id: ponder, kind: code, code: code.py:ponder, inputs: {a: $ask.out.answer}, output: {answer: string}}
""",
    # the showcase's shape: a group of a code node and the llm node it feeds
    "flows/polish/flow.yaml": """
input: {q: string}
output: {answer: string}
nodes:
  - id: polish
    kind: group
    nodes:
      - {id: policy, kind: code, code: code.py:policy, inputs: {q: $input.q}, output: {rule: string}}
      - {id: revise, kind: llm, agent: a, prompt: ask.md, inputs: {q: $policy.out.rule}, output: {answer: string}}
    result: $revise.out
""",
    "flows/pair/ask.md": "Answer: {{ q }}\n",
    "flows/chain/ask.md": "Answer: {{ q }}\n",
    "flows/polish/ask.md": "Answer: {{ q }}\n",
    "flows/pair/code.py": "def join(f, s):\n    return {'answer': f + s}\n",
    "flows/chain/code.py": (
        "import os, pathlib, time\n\ndef ponder(a):\n"
        "    pathlib.Path(os.environ['PONDER_MARK']).write_text('started')\n"
        "    time.sleep(2.5)\n    return {'answer': a}\n"
    ),
    "flows/polish/code.py": "def policy(q):\n    return {'rule': 'no promises: ' + q}\n",
}

# A run of the polish flow, event by event
POLISH_EVENTS = [
    ("run_start", None),
    ("node_start", "polish"),
    ("node_start", "policy"),
    ("node_end", "policy"),
    ("node_start", "revise"),
    ("model_request", "revise"),
    ("model_response", "revise"),
    ("node_end", "revise"),
    ("node_end", "polish"),
    ("run_end", None),
]


class Model:
    """Answers each node after its own delay."""

    def __init__(self, delays: dict[str, float]) -> None:
        self.delays = delays

    async def __call__(self, call: ModelCall, on_event: Any = None) -> CallResult:
        await asyncio.sleep(self.delays.get(call.node_id, 0.0))
        return answered(call, {"answer": call.node_id})


def _engine(root: Path, delays: dict[str, float]) -> tuple[Engine, RunStore, RunStore]:
    write_files(root, FILES)
    project = load_project(root)
    assert not project.diagnostics, project.diagnostics
    path = root / ".aqven" / "aqven.sqlite"
    runs = RunStore(SqliteDatabase(path))
    return Engine(project, runs, call=Model(delays)), runs, RunStore(SqliteDatabase(path))


def _kinds(other: RunStore, run_id: str) -> list[tuple[str, str | None]]:
    """The run's events as a crash now would leave them: read on another connection."""
    return [(e.kind, e.node_id) for e in other.events(run_id)]


async def _seen_while_running(
    engine: Engine, other: RunStore, run_id: str, until: tuple[str, str]
) -> tuple[asyncio.Task[Any], list[tuple[str, str | None]]]:
    """Run it, and read its events on another connection until `until` is among them: still running by then."""
    return await _seen_while_running_task(asyncio.ensure_future(engine.execute(run_id)), other, run_id, until)


async def _seen_while_running_task(
    task: asyncio.Task[Any], other: RunStore, run_id: str, until: tuple[str, str]
) -> tuple[asyncio.Task[Any], list[tuple[str, str | None]]]:
    while until not in (seen := _kinds(other, run_id)):
        assert not task.done(), f"{until} was never on record while the run ran: {seen}"
        await asyncio.sleep(0.02)
    assert not task.done()
    return task, seen


async def test_a_models_answer_is_on_record_while_another_node_of_the_run_waits(tmp_path: Path) -> None:
    engine, runs, other = _engine(tmp_path, {"fast": 0.0, "slow": 3.0})
    run_id = runs.create(RunRequest(flow_id="pair", input={"q": "hi"}))
    task, seen = await _seen_while_running(engine, other, run_id, ("model_response", "fast"))
    assert ("node_end", "fast") in seen
    assert ("model_request", "slow") in seen and ("model_response", "slow") not in seen
    assert other.get(run_id).cost_usd == "0.0001"  # the money fast spent is counted already
    record = await task
    assert record.status == "done" and record.output == {"answer": "fastslow"}


async def test_a_models_answer_is_on_record_before_a_code_node_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = tmp_path / "ponder-started"
    monkeypatch.setenv("PONDER_MARK", str(mark))
    engine, runs, other = _engine(tmp_path, {"ask": 0.0})
    run_id = runs.create(RunRequest(flow_id="chain", input={"q": "hi"}))
    task = asyncio.ensure_future(engine.execute(run_id))
    while not mark.exists():  # the code began on its thread (it sleeps 2.5 s)
        assert not task.done()
        await asyncio.sleep(0.005)
    # the model's answer went on record before the code began, not later with what the run held besides
    seen = _kinds(other, run_id)
    assert ("model_response", "ask") in seen and ("node_end", "ask") in seen
    # the code node takes longer than SHOW_AFTER_S: its start shows while it runs
    _, seen = await _seen_while_running_task(task, other, run_id, ("node_start", "ponder"))
    assert ("node_end", "ponder") not in seen
    record = await task
    assert record.status == "done" and record.output == {"answer": "ask"}


async def test_a_group_of_a_code_node_and_an_llm_node_commits_twice(tmp_path: Path) -> None:
    engine, runs, _ = _engine(tmp_path, {})
    request = RunRequest(flow_id="polish", input={"q": "refund"})
    run_id = new_id("run")
    commits: list[str] = []
    cast(SqliteDatabase, runs.db)._conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    # as a series attempt starts a run: its creation held for the run's first write
    begun = engine.begin_new(run_id, request, [functools.partial(runs.create, request, run_id=run_id)])
    record = await engine.proceed(begun)
    cast(SqliteDatabase, runs.db)._conn.set_trace_callback(None)
    assert record.status == "done", record.error
    # the run's creation and start with the model request (and the group's start, the code node's start and end,
    # the llm node's start); the answer with the llm node's end, the group's end and the run's (no other node of
    # the run waits meanwhile): 2 commits, where each node and event on its own would be 8
    assert len(commits) == 2
    assert [(e.kind, e.node_id) for e in runs.events(run_id)] == POLISH_EVENTS


async def test_a_new_run_reads_none_of_its_events_back(tmp_path: Path) -> None:
    """A series attempt's new run has no event to resume from and no event seq to look up: each of those reads,
    on a worker, starts a read of the database that another process's commit has made cold."""
    engine, runs, _ = _engine(tmp_path, {})
    request = RunRequest(flow_id="polish", input={"q": "refund"})
    run_id = new_id("run")
    statements: list[str] = []
    cast(SqliteDatabase, runs.db)._conn.set_trace_callback(statements.append)
    begun = engine.begin_new(run_id, request, [runs.creating(request, run_id)])
    record = await engine.proceed(begun)
    cast(SqliteDatabase, runs.db)._conn.set_trace_callback(None)
    assert record.status == "done", record.error
    assert [s for s in statements if "FROM events" in s] == []
    assert len(runs.events(run_id)) == 10  # all written, numbered 1..10
    assert [e.seq for e in runs.events(run_id)] == list(range(1, 11))
    # begun again once done, it is its record (a resume reads the run back: `begin`)
    resumed = engine.begin(run_id)
    assert resumed == record


async def test_a_run_whose_first_transaction_did_not_commit_still_ends_on_record(tmp_path: Path) -> None:
    """The store's connection lost at the commit that carried a new run's creation (PostgreSQL restarted): its held
    writes are held again, so the run ends failed with the reason, on record, not as a run that is not there."""
    engine, runs, other = _engine(tmp_path, {"ask": 0.0})
    request = RunRequest(flow_id="chain", input={"q": "hi"})
    run_id = new_id("run")
    begun = engine.begin_new(run_id, request, [runs.creating(request, run_id)])
    commit = runs.db._commit
    failed: list[str] = []

    def lost_once(cur: Any) -> None:
        if not failed:
            failed.append("COMMIT")
            raise sqlite3.OperationalError("server closed the connection unexpectedly")
        commit(cur)

    runs.db._commit = lost_once  # type: ignore[method-assign]
    record = await engine.proceed(begun)
    assert failed
    assert record.status == "failed" and record.outcome == "infra"
    assert record.error is not None and "server closed the connection" in record.error.message
    kept = other.get(run_id)  # on record for every other process
    assert kept.status == "failed" and next(e.kind for e in other.events(run_id)) == "run_start"


async def test_runs_whose_group_is_undone_whole_are_written_again_whole(
    tmp_path: Path, make_database: Callable[..., Database]
) -> None:
    """On PostgreSQL a group of grouped writes is first sent whole, without a savepoint a write; a write that fails
    undoes the group, which is written again write by write (store/group_commit.py). A run's writes held for its
    next write (its creation, node starts, a model's answer) must be written by that second pass too, once each.
    Here a write that breaks the primary key joins nearly every group while runs go on beside it."""
    write_files(tmp_path, FILES)
    project = load_project(tmp_path)
    db = make_database("e")
    runs = RunStore(db)
    engine = Engine(project, runs, call=Model({}))
    with db.transaction() as cur:
        cur.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
        cur.execute("INSERT INTO t VALUES ('x')")
    undone: list[BaseException] = []
    is_undone = db.group._undone

    def counted(exc: BaseException) -> bool:
        undone.append(exc)
        return is_undone(exc)

    db.group._undone = counted

    def duplicate() -> None:
        with db.transaction() as cur:
            cur.execute("INSERT INTO t VALUES ('x')")

    ended = asyncio.Event()
    refused: list[BaseException] = []

    async def breaking() -> None:
        while not ended.is_set():
            try:
                await db.grouped(duplicate)
            except db.IntegrityError as exc:
                refused.append(exc)
            await asyncio.sleep(0)

    async def one(i: int) -> Any:
        request = RunRequest(flow_id="polish", input={"q": f"refund {i}"})
        run_id = new_id("run")
        begun = engine.begin_new(run_id, request, [runs.creating(request, run_id)])
        return await engine.proceed(begun)

    breaker = asyncio.ensure_future(breaking())
    records = await asyncio.gather(*(one(i) for i in range(24)))
    ended.set()
    await breaker
    assert refused and all(isinstance(exc, db.IntegrityError) for exc in refused)  # every time, and alone
    if db.pipelined_groups:
        assert len(undone) >= 3, len(undone)  # groups were undone whole and written again
    else:
        assert undone == []  # SQLite: a savepoint a write, from the start
    for record in records:
        assert record.status == "done" and record.output == {"answer": "revise"}, record.error
        kept = runs.get(record.id)
        assert kept.model_calls == 1 and kept.cost_usd == "0.0001" and kept.status == "done"
        events = runs.events(record.id)
        assert [(e.kind, e.node_id) for e in events] == POLISH_EVENTS
        assert [e.seq for e in events] == list(range(1, 11))
