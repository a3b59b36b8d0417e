"""The engine on a small project: concurrency, ranges, groups, calls, human nodes, resume, traces."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from aqven.engine.runner import Engine
from aqven.errors import RunInputError
from aqven.models.call import CallResult, ModelCall
from aqven.models.outcomes import ModelCallError
from aqven.project.loader import load_project
from aqven.store.records import RunRequest
from aqven.store.runs import RunStore
from aqven.store.sqlite_db import SqliteDatabase
from support.model_answers import answered
from support.projects import write_files

FILES = {
    "aqven.yaml": "package: demo\nengine: {provider_retries: 2, retry_backoff_s: 0}\n",
    "agents/a.yaml": "model: openrouter:openai/gpt-4.1-mini\nsimulator: sim.py:a\n",
    "agents/b.yaml": "model: openrouter:mistralai/mistral-small-3.2-24b-instruct\nsimulator: sim.py:a\n",
    "sim.py": "def a(req):\n    return None\n",
    "flows/main/flow.yaml": """
input: {q: string}
output: {answer: string, votes: integer}
nodes:
  - id: left
    kind: llm
    agent: a
    prompt: ask.md
    inputs: {q: $input.q}
    output: {answer: string}
  - id: right
    kind: llm
    agent: b
    prompt: ask.md
    inputs: {q: $input.q}
    output: {answer: string}
  - id: merge
    kind: group
    nodes:
      - id: count
        kind: code
        code: merge.py:count
        inputs: {l: $left.out.answer, r: $right.out.answer}
        output: {answer: string, votes: integer}
    result: $count.out
""",
    "flows/main/ask.md": "Answer: {{ q }}\n",
    "flows/main/merge.py": "def count(l, r):\n    return {'answer': l + '|' + r, 'votes': 2}\n",
    "flows/outer/flow.yaml": """
input: {q: string}
output: {answer: string, votes: integer}
nodes:
  - id: inner
    kind: call
    flow: main
    inputs: {q: $input.q}
  - id: approve
    kind: human
    question: Is this answer right?
    inputs: {answer: $inner.out.answer}
    output: {ok: boolean}
  - id: final
    kind: code
    code: final.py:final
    inputs: {inner: $inner.out, ok: $approve.out.ok}
    output: {answer: string, votes: integer}
""",
    "flows/outer/final.py": "def final(inner, ok):\n    return inner if ok else {'answer': 'rejected', 'votes': 0}\n",
}


class FakeModel:
    """Answers every call after `delay` seconds and records when each call ran."""

    def __init__(self, delay: float = 0.2, fail: dict[str, list[ModelCallError]] | None = None) -> None:
        self.delay = delay
        self.calls: list[tuple[str, float, float]] = []
        self.fail = fail or {}

    async def __call__(self, call: ModelCall, on_event: Any = None) -> CallResult:
        start = time.perf_counter()
        await asyncio.sleep(self.delay)
        self.calls.append((call.node_id, start, time.perf_counter()))
        queue = self.fail.get(call.node_id)
        if queue:
            raise queue.pop(0)
        return answered(call, {"answer": f"{call.agent.id}:{call.prompt.strip()}"}, latency_s=self.delay)


@pytest.fixture
def env(tmp_path: Path) -> tuple[Engine, RunStore, FakeModel]:
    write_files(tmp_path, FILES)
    project = load_project(tmp_path)
    assert not project.diagnostics, project.diagnostics
    runs = RunStore(SqliteDatabase(tmp_path / ".aqven" / "aqven.sqlite"))
    fake = FakeModel()
    return Engine(project, runs, call=fake), runs, fake


async def test_independent_nodes_run_concurrently_and_trace_is_complete(env: Any) -> None:
    engine, runs, fake = env
    run_id = runs.create(RunRequest(flow_id="main", input={"q": "hi"}))
    record = await engine.execute(run_id)
    assert record.status == "done", record.error
    assert record.output == {"answer": "a:Answer: hi|b:Answer: hi", "votes": 2}
    (_n1, s1, e1), (_n2, s2, e2) = fake.calls
    assert s2 < e1 and s1 < e2, "left and right should overlap in time"
    kinds = [e.kind for e in runs.events(run_id)]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert kinds.count("model_request") == 2 and kinds.count("model_response") == 2
    assert record.input_tokens == 20 and record.output_tokens == 10 and Decimal(record.cost_usd) == Decimal("0.0002")
    node = runs.node_events(run_id, "count")
    assert node[0].data["inputs"] == {"l": "a:Answer: hi", "r": "b:Answer: hi"}


async def test_range_uses_node_outputs_and_refuses_when_missing(env: Any) -> None:
    engine, runs, fake = env
    request = RunRequest(
        flow_id="main",
        input={"q": "x"},
        from_node="merge",
        to_node="merge",
        node_outputs={"left": {"answer": "L"}, "right": {"answer": "R"}},
    )
    record = await engine.execute(runs.create(request))
    assert record.status == "done"
    assert record.output == {"answer": "L|R", "votes": 2}
    assert fake.calls == []
    with pytest.raises(RunInputError) as exc:
        engine.prepare(
            RunRequest(flow_id="main", input={"q": "x"}, from_node="merge", node_outputs={"left": {"answer": "L"}})
        )
    assert exc.value.code == "NODE_OUTPUTS_MISSING" and "right" in exc.value.message


async def test_call_and_human_pause_then_resume(env: Any) -> None:
    engine, runs, fake = env
    run_id = runs.create(RunRequest(flow_id="outer", input={"q": "hi"}))
    record = await engine.execute(run_id)
    assert record.status == "waiting_human" and record.waiting_node == "approve"
    assert {e.node_id for e in runs.events(run_id) if e.kind == "node_end"} >= {"inner/left", "inner/right", "inner"}
    runs.answer(run_id, "approve", {"ok": True})
    record = await engine.execute(run_id)
    assert record.status == "done"
    assert record.output["votes"] == 2
    assert len(fake.calls) == 2, "finished nodes must not run again on resume"


async def test_retryable_errors_are_retried_then_classified(env: Any) -> None:
    engine, runs, fake = env
    fake.fail["left"] = [ModelCallError("PROVIDER_RATE_LIMITED", "rate limited", retryable=True)]
    record = await engine.execute(runs.create(RunRequest(flow_id="main", input={"q": "hi"})))
    assert record.status == "done"
    assert [e.data["code"] for e in runs.events(record.id) if e.kind == "retry"] == ["PROVIDER_RATE_LIMITED"]
    fake.fail["left"] = [ModelCallError("MODEL_REFUSAL", "refused")]
    record = await engine.execute(runs.create(RunRequest(flow_id="main", input={"q": "hi"})))
    assert record.status == "failed" and record.outcome == "model_failure"
    assert record.error is not None and record.error.code == "MODEL_REFUSAL" and record.error.node_id == "left"
    fake.fail["left"] = [ModelCallError("PROVIDER_ERROR", "down", retryable=True) for _ in range(3)]
    record = await engine.execute(runs.create(RunRequest(flow_id="main", input={"q": "hi"})))
    assert record.status == "failed" and record.outcome == "infra" and record.error.code == "PROVIDER_ERROR"


async def test_code_error_is_infrastructure(tmp_path: Path) -> None:
    files = dict(FILES)
    files["flows/main/merge.py"] = "def count(l, r):\n    raise RuntimeError('boom')\n"
    write_files(tmp_path, files)
    runs = RunStore(SqliteDatabase(tmp_path / ".aqven" / "aqven.sqlite"))
    engine = Engine(load_project(tmp_path), runs, call=FakeModel(0))
    record = await engine.execute(runs.create(RunRequest(flow_id="main", input={"q": "hi"})))
    assert record.status == "failed" and record.outcome == "infra"
    assert record.error is not None and record.error.code == "CODE_ERROR" and "boom" in record.error.message


async def test_bad_input_is_refused_before_running(env: Any) -> None:
    engine, _runs, _fake = env
    with pytest.raises(RunInputError) as exc:
        engine.prepare(RunRequest(flow_id="main", input={"q": 3}))
    assert exc.value.code == "RUN_INPUT_INVALID"
