"""series_get latency through an MCP client, on a series of 10,000 attempts; and the MCP tools' schema sizes.

A tiny project (one code-node flow, 1,100 cases, an instant `contains` check) runs one series of 500 working
cases × 20 repeats = 10,000 attempts in-process, through the real scheduler, engine, checks and SQLite store.
The SDK's ClientSession, connected to the project's MCP server over in-memory streams (the same tools as
`aqven mcp` and `/mcp`), calls series_get while the series runs and after it is done, with and without
include_cases, and for comparison the same snapshot from ProjectService directly (no MCP). Prints the median and
p95 milliseconds of each, and the tool list with the bytes of each tool's input and output JSON schema.

    .venv/bin/python bench/perf/mcp_series_get.py [--cases 500] [--repeats 20] [--calls 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

import anyio
from mcp.client._memory import InMemoryTransport
from mcp.client.session import ClientSession
from mcp_types import CallToolResult

from aqven.server.mcp_backend import ServiceBackend
from aqven.server.mcp_server import build_server
from aqven.server.service import ProjectService

EXPERIMENT = """\
failure_mode: wrong_reply
description: >
  The echo flow replies with an ok on more than 90% of the cases: the lower end of the 95% interval of the ok
  rate is above 0.9.
subject:
  flow: echo
dataset:
  id: many
checks:
  - id: ok
    builtin: contains
    field: reply
    value: ok
metrics:
  ok:
    check: ok
question:
  kind: threshold
  metric: ok
  bound: 0.9
  margin: 0.0
repeats: 1
"""


def write_project(root: Path, n_cases: int) -> None:
    files = {
        "aqven.yaml": 'package: bench\nresearch:\n  spend_cap_usd: "1.00"\nconcurrency: 16\n',
        "flows/echo/flow.yaml": "input: {text: string}\noutput: {reply: string}\nnodes:\n  - id: answer\n"
        "    kind: code\n    code: steps.py:answer\n    inputs: {text: $input.text}\n    output: {reply: string}\n"
        "result: $answer.out\n",
        "flows/echo/steps.py": "def answer(text):\n"
        "    return {'reply': ('no ' if text.endswith('7') else 'ok ') + text}\n",
        "datasets/many.yaml": json.dumps(
            {"cases": [{"name": f"c{i:05d}", "input": {"text": f"ticket {i}"}} for i in range(n_cases)]}
        ),
        "experiments/echo_ok/experiment.yaml": EXPERIMENT,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def figures(times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered):7.1f} ms   p95 {p95:7.1f} ms   (n={len(ordered)})"


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(name, args)
    assert isinstance(result, CallToolResult) and not result.is_error, result
    assert result.structured_content is not None
    return result.structured_content


async def measure(session: ClientSession, sid: str, calls: int, include_cases: bool) -> tuple[list[float], int]:
    times: list[float] = []
    size = 0
    for _ in range(calls):
        t = time.perf_counter()
        result = await session.call_tool("series_get", {"series_id": sid, "include_cases": include_cases})
        times.append((time.perf_counter() - t) * 1000)
        assert isinstance(result, CallToolResult) and not result.is_error
        size = len(result.content[0].text) if result.content else 0  # type: ignore[union-attr]
    return times, size


async def main(cases: int, repeats: int, calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bench"
        write_project(root, max(2 * cases + 100, 200))
        svc = ProjectService(root)
        server = build_server(ServiceBackend(svc))
        async with InMemoryTransport(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            print(f"{len(tools)} MCP tools (bytes of the JSON schemas the client sees):")
            print(
                f"  {'tool':<18} {'input':>7} {'output':>7} {'described':>10}   (described: name, description, input)"
            )
            described_total = 0
            for tool in tools:
                size_in = len(json.dumps(tool.input_schema))
                size_out = len(json.dumps(tool.output_schema)) if tool.output_schema else 0
                described = len(json.dumps([tool.name, tool.description, tool.input_schema]))
                described_total += described
                print(f"  {tool.name:<18} {size_in:>7} {size_out:>7} {described:>10}")
            print(f"  what a model reads of the tools (names, descriptions, input schemas): {described_total} bytes")
            total = sum(len(json.dumps(t.model_dump(mode="json", exclude_none=True))) for t in tools)
            print(f"  the whole tools/list answer: {total} bytes")

            t0 = time.perf_counter()
            started = await call(
                session, "series_start", {"experiment_id": "echo_ok", "cases": cases, "repeats": repeats}
            )
            sid = started["series"]["series_id"]
            attempts = started["series"]["progress"]["attempts"]
            print(f"\nseries {sid}: {attempts} attempts; series_start took {(time.perf_counter() - t0):.2f} s")

            marks = [0.0, 0.5]
            while True:
                state = await call(session, "series_get", {"series_id": sid, "wait_seconds": 5})
                done = state["progress"]["done"]
                if marks and done >= marks[0] * attempts:
                    mark = marks.pop(0)
                    plain, _ = await measure(session, sid, calls, False)
                    print(f"while running ({done:>5} of {attempts} done, target {mark:.0%}):")
                    print(f"  series_get                       {figures(plain)}")
                if state["status"] not in ("running", "waiting_human"):
                    break
            wall = time.perf_counter() - t0
            print(f"series {state['status']} after {wall:.1f} s ({attempts / wall:.0f} attempts/s)")
            print(f"  verdict: {state['verdict']['text']}")
            # Interleaved, so that the machine's load weighs the same on each of them.
            plain: list[float] = []
            cased: list[float] = []
            direct: list[float] = []
            size_plain = size_cased = 0
            for _ in range(calls):
                times, size_plain = await measure(session, sid, 1, False)
                plain += times
                times, size_cased = await measure(session, sid, 1, True)
                cased += times
                t = time.perf_counter()
                await svc.series.get(sid)
                direct.append((time.perf_counter() - t) * 1000)
            print(f"done, {attempts} attempts:")
            print(f"  series_get                       {figures(plain)}   answer {size_plain} bytes")
            print(f"  series_get include_cases=true    {figures(cased)}   answer {size_cased} bytes")
            print(f"  ProjectService.series.get direct {figures(direct)}   (the same snapshot without MCP)")
            t = time.perf_counter()
            await call(session, "series_get", {"series_id": sid, "wait_seconds": 50})
            waited = (time.perf_counter() - t) * 1000
            print(f"  series_get wait_seconds=50 on a settled series returned in {waited:.1f} ms")
        await svc.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=500, help="working cases of the series")
    parser.add_argument("--repeats", type=int, default=20, help="repeats (at most 20)")
    parser.add_argument("--calls", type=int, default=40, help="series_get calls per measurement")
    args = parser.parse_args()
    anyio.run(main, args.cases, args.repeats, args.calls)
