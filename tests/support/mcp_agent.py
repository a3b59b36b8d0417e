"""Helpers of the MCP tests (no tests here): a tiny project, and a recording MCP client session.

The tiny project "tiny" has one flow `answer` (prep → draft → pace), an agent `bot` on a model nobody prices
(`openrouter:acme/unpriced-1`) and a twin `bot2`, and a dataset `tickets` of generated cases. Its simulator
answers {"reply": "ok ..."}, except for tickets whose text contains "bad", where it breaks the output type
(a counted model failure at node `draft`). `pace` sleeps the case's `delay`, so a series can be made slow
without simulated latency; `prep` raises (broken code: an infrastructure error) on a text with "boom".
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp.client._memory import InMemoryTransport
from mcp.client.session import ClientSession
from mcp_types import CallToolResult

from aqven.project.split import side_of
from aqven.server.mcp_backend import ServiceBackend
from aqven.server.mcp_server import build_server
from aqven.server.service import ProjectService

PACKAGE = "tiny"
SETTLED = ("done", "cancelled", "failed", "awaiting_approval", "waiting_human")

AQVEN_YAML = """\
package: tiny
name: Tiny
research:
  spend_cap_usd: "1.00"
concurrency: 4
engine:
  provider_retries: 0
  retry_backoff_s: 0.01
"""

BOT = """\
model: openrouter:acme/unpriced-1
description: A bot on a model without a known price.
settings: {{temperature: 0, max_tokens: 100, timeout_s: 10}}
output_mode: tool
output_retries: 1
simulator: sim/agents.py:{fn}
"""

SIM = """\
from aqven.models.simulator import SimReply


def answer(req):
    text = str(req.inputs.get("text", ""))
    if "bad" in text:
        return SimReply(output={"nope": 1}, kind="schema_mismatch", input_tokens=5, output_tokens=3)
    return SimReply(output={"reply": "ok " + text}, input_tokens=5, output_tokens=3)
"""

FLOW = """\
description: Answer a ticket.
input: {text: string, delay: number}
output: {reply: string}
nodes:
  - id: prep
    kind: code
    code: steps.py:prep
    inputs: {text: $input.text}
    output: {text: string}
  - id: draft
    kind: llm
    agent: bot
    prompt: draft.md
    inputs: {text: $prep.out.text}
    output: {reply: string}
  - id: pace
    kind: code
    code: steps.py:pace
    inputs: {reply: $draft.out.reply, delay: $input.delay}
    output: {reply: string}
result: $pace.out
"""

STEPS = """\
import asyncio


def prep(text):
    if "boom" in text:
        raise ValueError(f"cannot prepare {text!r}")
    return {"text": text.strip()}


async def pace(reply, delay):
    await asyncio.sleep(delay)
    return {"reply": reply}
"""

EXPERIMENT = """\
failure_mode: wrong_reply
description: >
  The answer flow replies with an ok on more than 90% of the tickets: the lower end of the 95% interval of the
  ok rate is above 0.9. A held-out series whose interval ends at or below 0.9 refutes it.
subject:
  flow: answer
variants:
  - id: as_written
dataset:
  id: tickets
checks:
  - id: says_ok
    builtin: contains
    field: reply
    value: ok
metrics:
  ok:
    check: says_ok
question:
  kind: threshold
  metric: ok
  bound: 0.9
  direction: at_least
  margin: 0.0
repeats: 1
"""

RANGE_EXPERIMENT = """\
failure_mode: wrong_reply
description: >
  bot2 on the draft step keeps the ok rate of bot: the difference of bot2 minus bot stays above -0.05 on the
  tickets tagged range. A held-out series whose interval reaches -0.05 refutes it.
subject:
  flow: answer
  from: draft
  to: pace
varies:
  what: agent
  nodes: [draft]
variants:
  - id: bot
  - id: bot2
    nodes: {draft: bot2}
dataset:
  id: tickets
  tags: [range]
checks:
  - id: says_ok
    builtin: contains
    field: reply
    value: ok
metrics:
  ok:
    check: says_ok
question:
  kind: noninferior
  metric: ok
  baseline: bot
  margin: 0.05
repeats: 1
"""


def names(n: int, prefix: str = "t") -> list[str]:
    return [f"{prefix}{i:03d}" for i in range(n)]


def dev(names_: list[str]) -> list[str]:
    return [n for n in names_ if side_of(PACKAGE, n) == "dev"]


def held_out(names_: list[str]) -> list[str]:
    return [n for n in names_ if side_of(PACKAGE, n) == "holdout"]


def dataset_yaml(cases: list[dict[str, Any]]) -> str:
    return json.dumps({"description": "Generated tickets.", "cases": cases}, indent=1)


def tiny_cases(n: int = 24, *, bad: int = 3, delay: float = 0.0, range_cases: int = 0) -> list[dict[str, Any]]:
    """n tickets t000.. (the first `bad` working ones say "bad"), plus `range_cases` tickets r000.. tagged range
    with node_outputs for prep; the first working and the first held-out range ticket lack them."""
    out: list[dict[str, Any]] = []
    bad_names = set(dev(names(n))[:bad])
    for name in names(n):
        text = f"{'bad' if name in bad_names else 'fine'} ticket {name}"
        out.append({"name": name, "input": {"text": text, "delay": delay}, "tags": ["main"]})
    r_names = names(range_cases, "r")
    broken = {*dev(r_names)[:1], *held_out(r_names)[:1]}
    for name in r_names:
        case: dict[str, Any] = {"name": name, "input": {"text": f"fine {name}", "delay": 0.0}, "tags": ["range"]}
        if name not in broken:
            case["node_outputs"] = {"prep": {"text": f"fine {name}"}}
        out.append(case)
    return out


def write_tiny(root: Path, cases: list[dict[str, Any]] | None = None, *, range_experiment: bool = False) -> Path:
    files = {
        "aqven.yaml": AQVEN_YAML,
        "agents/bot.yaml": BOT.format(fn="answer"),
        "agents/bot2.yaml": BOT.format(fn="answer"),
        "sim/agents.py": SIM,
        "flows/answer/flow.yaml": FLOW,
        "flows/answer/draft.md": "Answer this ticket: {{ text }}\n",
        "flows/answer/steps.py": STEPS,
        "datasets/tickets.yaml": dataset_yaml(cases if cases is not None else tiny_cases()),
        "experiments/reply_ok/experiment.yaml": EXPERIMENT,
    }
    if range_experiment:
        files["experiments/bot2_range/experiment.yaml"] = RANGE_EXPERIMENT
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


class Agent:
    """An MCP client session as a coding agent uses it: every answer it ever saw is kept in `seen`."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self.seen: list[str] = []

    async def call(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """The structured result of a tool call that must succeed."""
        result = await self.raw(name, args)
        assert not result.is_error, f"{name} failed: {result.content}"
        assert result.structured_content is not None
        return result.structured_content

    async def error(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """The error object (code, message, hint, details) of a tool call that must fail."""
        result = await self.raw(name, args)
        assert result.is_error, f"{name} should have failed"
        text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
        payload: dict[str, Any] = json.loads(text)
        return payload["error"]  # type: ignore[no-any-return]

    async def raw(self, name: str, args: dict[str, Any] | None = None) -> CallToolResult:
        result = await self.session.call_tool(name, args or {})
        assert isinstance(result, CallToolResult)
        self.seen.extend(getattr(c, "text", "") for c in result.content)
        if result.structured_content is not None:
            self.seen.append(json.dumps(result.structured_content))
        return result

    def saw(self, text: str) -> bool:
        return any(text in s for s in self.seen)


@asynccontextmanager
async def agent_on(root: Path) -> AsyncIterator[tuple[Agent, ProjectService]]:
    """A project service and an MCP client session connected to its tools in this process."""
    svc = ProjectService(root)
    try:
        server = build_server(ServiceBackend(svc))
        async with InMemoryTransport(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield Agent(session), svc
    finally:
        for _ in range(300):  # let every series stop (a cancelled one finishes its running attempts) first
            if all(s["ended_at"] or s["status"] in SETTLED[3:] for s in svc.series.list_series(limit=500)):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.05)
        await svc.shutdown()


async def settle(agent: Agent, series_id: str, *, include_cases: bool = False) -> dict[str, Any]:
    state = await agent.call("series_get", {"series_id": series_id, "wait_seconds": 50, "include_cases": include_cases})
    while state["status"] not in SETTLED:
        state = await agent.call(
            "series_get", {"series_id": series_id, "wait_seconds": 50, "include_cases": include_cases}
        )
    return state
