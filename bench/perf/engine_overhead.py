"""Per-run overhead of the engine with an instant simulator.

Runs N runs of a one-node flow and of the showcase's support_case, one after another, in-process,
through the real engine, store (SQLite, WAL) and pydantic-ai path (FunctionModel), with simulated
latency scaled to zero. Prints the median and p95 milliseconds per run.

    .venv/bin/python bench/perf/engine_overhead.py [--runs 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

from aqven.engine.runner import Engine
from aqven.project.init import init_project
from aqven.project.loader import load_project
from aqven.store.records import RunRequest
from aqven.store.runs import RunStore
from aqven.store.sqlite_db import SqliteDatabase

ONE_NODE = {
    "flows/one/flow.yaml": "input: {ticket: string, tier: string}\noutput: {reply: string}\nnodes:\n"
    "  - id: draft\n    kind: llm\n    agent: gpt\n    prompt: p.md\n    inputs: {ticket: $input.ticket}\n"
    "    output: {reply: string}\n",
    "flows/one/p.md": "Reply to: {{ ticket }}\n",
}


async def measure(engine: Engine, runs: RunStore, request: RunRequest, n: int) -> list[float]:
    times = []
    for i in range(n):
        req = request.model_copy(update={"seed": i})
        t = time.perf_counter()
        record = await engine.execute(runs.create(req))
        times.append((time.perf_counter() - t) * 1000)
        assert record.status == "done", record.error
    return times


def report(name: str, times: list[float]) -> None:
    times = sorted(times)
    p95 = times[int(0.95 * (len(times) - 1))]
    print(f"{name:<34} runs={len(times):>5}  median={statistics.median(times):7.2f} ms  p95={p95:7.2f} ms")


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = init_project(Path(tmp) / "bench", "lumen")
        for name, text in ONE_NODE.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        project = load_project(root)
        runs = RunStore(SqliteDatabase(root / ".aqven" / "aqven.sqlite"))
        engine = Engine(project, runs)
        case = project.datasets["support_case_cases"].cases[0]
        base = RunRequest(flow_id="one", input=case.input, simulate=True)
        await measure(engine, runs, base, 20)  # warm-up: imports, caches
        report("one llm node (simulated, instant)", await measure(engine, runs, base, n))
        full = RunRequest(flow_id="support_case", input=case.input, context=case.context, simulate=True)
        report("support_case: 2 llm + 2 code nodes", await measure(engine, runs, full, n))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300)
    asyncio.run(main(parser.parse_args().runs))
