"""Shared helpers of the series tests (no tests here): a tiny project whose behaviour a test controls.

The tiny project ("tiny") has one writer agent, `w`, on a model priced by a price-list file
(`AQVEN_PRICES_FILE`): every call costs exactly $0.01 (1000 input tokens at $0.00001). Its simulator
(sim/agents.py) answers by the case's name:

- a name containing ``fail`` gets the reply "bad" (the check `ok` fails: a counted failure);
- ``checkcrash`` gets "crash" (the check raises: CODE_ERROR, an infrastructure error);
- ``simcrash`` makes the simulator raise (CODE_ERROR, an infrastructure error);
- anything else gets "good" (the check passes);
- a name containing ``pricey`` costs $0.05 a call instead of $0.01.

With ``TINY_PIDS=<file>`` it appends the id of the process that ran each call to the file; ``TINY_WORKERS=<n>``
makes `write_tiny` set `workers: n`. With ``TINY_HOLD=<dir>`` in the environment the simulator waits until
``<dir>/open`` or ``<dir>/<case>`` exists, so a test decides when each attempt may finish. Each call sleeps
0.1 s × AQVEN_SIM_LATENCY_SCALE.

Experiments: ``rate`` (threshold 0.5 + 0.05 on check ok, flow `answer`), ``pair`` (compare; variant `m`
puts the `mystery` agent, an OpenAI-compatible model nothing prices, on the node), ``reviewed`` (flow
`review`, whose second node is a human node), ``ranged`` (the range from `second` of flow `two`, on a
dataset where one case lacks the node_outputs the range needs).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from aqven.project.split import side_of
from aqven.server.app import create_app
from aqven.store.db import Row
from aqven.store.open import project_database
from support.commands import api_client

PACKAGE = "tiny"
PRICED_MODEL = "test/priced"
COST_PER_CALL = "0.01"

AQVEN_YAML = """\
package: tiny
name: Tiny
research:
  spend_cap_usd: "{cap}"
concurrency: {concurrency}
workers: {workers}
engine:
  provider_retries: 0
  retry_backoff_s: 0
"""

AGENT_W = """\
model: openrouter:test/priced
settings: {temperature: 0, max_tokens: 100, timeout_s: 10}
output_mode: tool
output_retries: 0
simulator: sim/agents.py:writer
"""

AGENT_MYSTERY = """\
model: openai-compatible:mystery-model
base_url: http://127.0.0.1:9/v1
settings: {temperature: 0, max_tokens: 100, timeout_s: 10}
output_mode: tool
output_retries: 0
simulator: sim/agents.py:writer
"""

SIM_PY = '''\
"""The tiny project's simulator: its answer depends on the case's name (see tests/support/series_kit.py)."""

import asyncio
import os
from pathlib import Path

from aqven.models.simulator import SimReply, SimRequest


async def writer(req: SimRequest) -> SimReply:
    case = req.case_name or ""
    pids = os.environ.get("TINY_PIDS")
    if pids:  # which process ran the attempt's model call (the server, or one of its workers)
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\\n")
    hold = os.environ.get("TINY_HOLD")
    if hold:
        folder = Path(hold)
        while not ((folder / "open").exists() or (folder / case).exists()):
            await asyncio.sleep(0.005)
    if "simcrash" in case:
        raise RuntimeError("the simulator broke")
    reply = "bad" if "fail" in case else ("crash" if "checkcrash" in case else "good")
    tokens = 5000 if "pricey" in case else 1000
    return SimReply(output={"reply": reply}, input_tokens=tokens, output_tokens=0, latency_s=0.1)
'''

CHECKS_PY = """\
from typing import Any


def reply_ok(output: Any) -> tuple[bool, str]:
    reply = output["reply"]
    if reply == "crash":
        raise RuntimeError("the check broke")
    return reply != "bad", f"the reply is {reply}"


def approved(output: Any) -> tuple[bool, str]:
    return bool(output["ok"]), "approved" if output["ok"] else "rejected"
"""

ANSWER_FLOW = """\
input: {text: string}
output: {reply: string}
nodes:
  - id: answer
    kind: llm
    agent: w
    prompt: answer.md
    inputs: {text: $input.text}
    output: {reply: string}
"""

ANSWER_MD = "Answer this: {{ text }}\n"

REVIEW_FLOW = """\
input: {text: string}
output: {ok: boolean}
nodes:
  - id: answer
    kind: llm
    agent: w
    prompt: answer.md
    inputs: {text: $input.text}
    output: {reply: string}
  - id: approve
    kind: human
    question: Is this reply fine?
    inputs: {reply: $answer.out.reply}
    output: {ok: boolean}
"""

TWO_FLOW = """\
input: {text: string}
output: {reply: string}
nodes:
  - id: first
    kind: llm
    agent: w
    prompt: answer.md
    inputs: {text: $input.text}
    output: {reply: string}
  - id: second
    kind: llm
    agent: w
    prompt: polish.md
    inputs: {draft: $first.out.reply}
    output: {reply: string}
"""

POLISH_MD = "Polish this: {{ draft }}\n"

RATE_EXPERIMENT = """\
failure_mode: bad_reply
description: >
  The writer answers well on more than 55% of the cases: the lower end of the 95% interval of the ok rate
  is above 0.5 + 0.05.
subject: {flow: answer}
dataset: {id: cases}
checks:
  - id: ok
    function: checks/ok.py:reply_ok
metrics:
  ok: {check: ok}
question: {kind: threshold, metric: ok, bound: 0.5, margin: 0.05}
repeats: 1
"""

PAIR_EXPERIMENT = """\
failure_mode: bad_reply
description: The mystery model answers well more often than w, by more than 5 points.
subject: {flow: answer}
varies: {what: agent, nodes: [answer]}
variants:
  - id: w
  - id: m
    nodes: {answer: mystery}
dataset: {id: cases}
checks:
  - id: ok
    function: checks/ok.py:reply_ok
metrics:
  ok: {check: ok}
question: {kind: compare, metric: ok, baseline: w, margin: 0.05}
repeats: 1
"""

REVIEWED_EXPERIMENT = """\
failure_mode: bad_reply
description: A person approves the writer's answer on more than 55% of the cases.
subject: {flow: review}
dataset: {id: cases}
checks:
  - id: approved
    function: checks/ok.py:approved
metrics:
  approved: {check: approved}
question: {kind: threshold, metric: approved, bound: 0.5, margin: 0.05}
repeats: 1
"""

RANGED_EXPERIMENT = """\
failure_mode: bad_reply
description: Polishing keeps the reply good on more than 55% of the cases.
subject: {flow: two, from: second}
varies: {what: agent, nodes: [second]}
variants:
  - id: w
  - id: w2
    nodes: {second: w2}
dataset: {id: ranged_cases}
checks:
  - id: ok
    function: checks/ok.py:reply_ok
metrics:
  ok: {check: ok}
question: {kind: compare, metric: ok, baseline: w, margin: 0.05}
repeats: 1
"""

RANGED_CASES = """\
cases:
  - name: with_draft
    input: {text: "hello"}
    node_outputs: {first: {reply: "a draft"}}
  - name: without_draft
    input: {text: "hello"}
"""


def live_agent(base_url: str) -> str:
    """agents/w.yaml of the tiny project for live calls to an OpenAI-compatible (fake) server at `base_url`:
    one try, no output retry, priced by its own file at $1 per million tokens."""
    return (
        f"model: openai-compatible:gemma\nbase_url: {base_url}\n"
        "settings: {temperature: 0, max_tokens: 100, timeout_s: 10}\n"
        'output_mode: tool\noutput_retries: 0\nprice: {input: "1", output: "1"}\n'
    )


def case_names(dev: int, holdout: int, *, prefix: str = "c", special: dict[str, str] | None = None) -> list[str]:
    """`dev` working and `holdout` held-out case names of the tiny package, in a stable order.

    `special` maps a marker (e.g. "fail") to the sides it should appear on: names are drawn until each
    side has its count, so the caller knows the split of every name it gets.
    """
    out: list[str] = []
    want = {"dev": dev, "holdout": holdout}
    i = 0
    while want["dev"] > 0 or want["holdout"] > 0:
        name = f"{prefix}{i:04d}"
        i += 1
        side = side_of(PACKAGE, name)
        if want[side] > 0:
            want[side] -= 1
            out.append(name)
    return out


def first_on(side: str, marker: str, start: int = 0) -> str:
    """A name containing `marker` that falls on `side` of the tiny split."""
    i = start
    while True:
        name = f"{marker}_{i:04d}"
        if side_of(PACKAGE, name) == side:
            return name
        i += 1


def dataset_yaml(names: list[str]) -> str:
    return "cases:\n" + "".join(f'  - name: {n}\n    input: {{text: "ticket {n}"}}\n' for n in names)


def prices_json() -> str:
    return json.dumps({"data": [{"id": PRICED_MODEL, "pricing": {"prompt": "0.00001", "completion": "0"}}]})


def write_tiny(
    root: Path,
    names: list[str],
    *,
    cap: str = "1.00",
    concurrency: int = 4,
    overrides: dict[str, str | None] | None = None,
) -> Path:
    files: dict[str, str | None] = {
        # TINY_WORKERS=2: the attempts run in two worker processes of the server (test_series_workers.py)
        "aqven.yaml": AQVEN_YAML.format(cap=cap, concurrency=concurrency, workers=os.environ.get("TINY_WORKERS", "1")),
        "agents/w.yaml": AGENT_W,
        "agents/w2.yaml": AGENT_W,
        "agents/mystery.yaml": AGENT_MYSTERY,
        "sim/agents.py": SIM_PY,
        "checks/ok.py": CHECKS_PY,
        "flows/answer/flow.yaml": ANSWER_FLOW,
        "flows/answer/answer.md": ANSWER_MD,
        "flows/review/flow.yaml": REVIEW_FLOW,
        "flows/review/answer.md": ANSWER_MD,
        "flows/two/flow.yaml": TWO_FLOW,
        "flows/two/answer.md": ANSWER_MD,
        "flows/two/polish.md": POLISH_MD,
        "datasets/cases.yaml": dataset_yaml(names),
        "datasets/ranged_cases.yaml": RANGED_CASES,
        "experiments/rate/experiment.yaml": RATE_EXPERIMENT,
        "experiments/pair/experiment.yaml": PAIR_EXPERIMENT,
        "experiments/reviewed/experiment.yaml": REVIEWED_EXPERIMENT,
        "experiments/ranged/experiment.yaml": RANGED_EXPERIMENT,
    }
    files.update(overrides or {})
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = root / name
        if content is None:
            path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    return root


def tiny_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No keys, no base-URL overrides, a price list that prices the tiny model, zero simulated latency.

    Each test module wraps it in its own `tiny_env` fixture; returns the price-list file."""
    for var in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    for provider in ("OPENROUTER", "OPENAI", "ANTHROPIC", "MISTRAL", "GROQ", "OPENAI_COMPATIBLE"):
        monkeypatch.delenv(f"AQVEN_{provider}_BASE_URL", raising=False)
    monkeypatch.delenv("AQVEN_SIMULATE", raising=False)
    monkeypatch.delenv("TINY_HOLD", raising=False)
    monkeypatch.delenv("TINY_WORKERS", raising=False)
    monkeypatch.delenv("TINY_PIDS", raising=False)
    prices = tmp_path / "prices.json"
    prices.write_text(prices_json())
    monkeypatch.setenv("AQVEN_PRICES_FILE", str(prices))
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0")
    return prices


@contextmanager
def client_for(root: Path) -> Iterator[TestClient]:
    """The project server in-process (with its lifespan: resume and FINDINGS.md repair on start)."""
    with api_client(create_app(root)) as client:
        yield client


def start(client: TestClient, **body: Any) -> dict[str, Any]:
    r = client.post("/api/series", json=body)
    assert r.status_code == 201, r.text
    data: dict[str, Any] = r.json()
    return data


def get(client: TestClient, series_id: str, *, wait: float = 0, include_cases: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {"wait_seconds": wait}
    if include_cases:
        params["include_cases"] = "true"
    r = client.get(f"/api/series/{series_id}", params=params)
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


def settle(client: TestClient, series_id: str, *, timeout: float = 60, include_cases: bool = False) -> dict[str, Any]:
    """Poll (long-poll) until the series is no longer running."""
    deadline = time.monotonic() + timeout
    while True:
        snap = get(
            client, series_id, wait=min(10.0, max(deadline - time.monotonic(), 0.1)), include_cases=include_cases
        )
        if snap["status"] != "running" or time.monotonic() > deadline:
            return snap


def wait_until(check: Callable[[], Any], timeout: float = 20.0, step: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(step)


def rows(root: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Row]:
    """Rows of the project's store (SQLite or PostgreSQL, as the project's settings say), read on a connection of
    the test's own: it sees what the server committed."""
    database = project_database(root)
    try:
        with database.reading() as conn:
            return list(conn.execute(sql, params).fetchall())
    finally:
        database.close()


def attempts(root: Path, series_id: str) -> list[Row]:
    return rows(root, "SELECT * FROM attempts WHERE series_id=? ORDER BY idx", (series_id,))


def runs_of(root: Path, series_id: str) -> list[Row]:
    return rows(root, "SELECT * FROM runs WHERE series_id=? ORDER BY created_at", (series_id,))


def run_order(root: Path, series_id: str) -> list[str]:
    """The series' cases in the order they run (drawn by its secret seed), read from the database on purpose:
    attempt indexes are given case block by case block in that order."""
    found = rows(
        root,
        "SELECT case_name, MIN(idx) AS first FROM attempts WHERE series_id=? GROUP BY case_name ORDER BY first",
        (series_id,),
    )
    return [r["case_name"] for r in found]
