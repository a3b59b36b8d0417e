"""Shared pieces of the performance benchmarks (bench/perf/perf_*.py, bench/perf/latency_bound.py, bench/perf/scale.py).

`write_tiny_project(dir, ...)` writes a self-contained AQVEN project: one agent with its own simulator, a flow of
one llm node, a dataset of dev-side cases and an experiment with one built-in check (`contains`), so that a series
of `cases × repeats` attempts is exactly one model call (through pydantic-ai's FunctionModel) plus one check each.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aqven.project.split import side_of

PACKAGE = "perfbench"
EXPERIMENT = "one_check"
MAX_REPEATS = 20


def split_attempts(attempts: int) -> tuple[int, int]:
    """(cases, repeats) with cases × repeats == attempts, repeats as large as allowed (≤ 20)."""
    for repeats in range(MAX_REPEATS, 0, -1):
        if attempts % repeats == 0:
            return attempts // repeats, repeats
    raise ValueError(attempts)


def dev_case_names(n: int) -> list[str]:
    """n case names that the dev/holdout split puts on the dev side."""
    names: list[str] = []
    i = 0
    while len(names) < n:
        name = f"case_{i:06d}"
        if side_of(PACKAGE, name) == "dev":
            names.append(name)
        i += 1
    return names


def write_tiny_project(root: Path, *, cases: int, latency_s: float = 0.0, concurrency: int = 8) -> Path:
    files: dict[str, str] = {
        "aqven.yaml": (
            f'package: {PACKAGE}\nname: Perf bench\nresearch:\n  spend_cap_usd: "100000"\nconcurrency: {concurrency}\n'
        ),
        "agents/fast.yaml": (
            "model: openrouter:openai/gpt-4.1-mini\ndescription: A simulated agent that answers at once.\n"
            "settings: {temperature: 0.0, max_tokens: 50, timeout_s: 60}\noutput_mode: tool\noutput_retries: 1\n"
            "simulator: sim/fast.py:answer\n"
        ),
        "sim/fast.py": (
            "from aqven.models.simulator import SimReply, SimRequest\n\n\n"
            "def answer(req: SimRequest) -> SimReply:\n"
            f"    return SimReply(output={{'answer': 'ok: ' + str(req.inputs.get('question'))}}, input_tokens=20,"
            f" output_tokens=5, latency_s={latency_s!r})\n"
        ),
        "flows/one/flow.yaml": (
            "description: One llm node.\ninput: {question: string}\noutput: {answer: string}\nnodes:\n"
            "  - id: ask\n    kind: llm\n    agent: fast\n    prompt: ask.md\n"
            "    inputs: {question: $input.question}\n    output: {answer: string}\n"
        ),
        "flows/one/ask.md": "Answer: {{ question }}\n",
        "datasets/many.yaml": "description: Generated cases.\ncases:\n"
        + "".join(f"  - name: {n}\n    input: {{question: q{n[5:]}}}\n" for n in dev_case_names(cases)),
        f"experiments/{EXPERIMENT}/experiment.yaml": (
            "failure_mode: bench\ndescription: The answer says ok (always true; a benchmark).\n"
            "subject: {flow: one}\ndataset: {id: many}\n"
            "checks:\n  - id: says_ok\n    builtin: contains\n    field: answer\n    value: ok\n"
            "metrics:\n  ok: {check: says_ok}\n"
            "question: {kind: threshold, metric: ok, bound: 0.5}\nrepeats: 1\n"
        ),
        f"experiments/{EXPERIMENT}/experiment.md": "# one_check\n\nA benchmark experiment.\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


async def run_series_in_process(root: Path, attempts: int, *, poll_s: float = 50, warm: bool = False) -> dict[str, Any]:
    """Start the experiment's series through ProjectService/SeriesService and wait for its end. With `warm`, the
    service first loads the project, its check and the price table, as a server does when it starts (untimed)."""
    from aqven.research.series.start import SeriesStartBody
    from aqven.server.service import ProjectService

    cases, repeats = split_attempts(attempts)
    svc = ProjectService(root)
    if warm:
        await asyncio.to_thread(svc.warm)
    started = time.perf_counter()
    out = await svc.series.start(
        SeriesStartBody(
            experiment_id=EXPERIMENT, on="dev", cases=cases, repeats=repeats, simulate=True, client_op_id=None
        )
    )
    sid = out["series"]["series_id"]
    state = await svc.series.get(sid, wait_seconds=poll_s)
    while state["status"] not in ("done", "failed", "cancelled", "awaiting_approval"):
        state = await svc.series.get(sid, wait_seconds=poll_s)
    wall = time.perf_counter() - started
    await svc.shutdown()
    return {"series_id": sid, "wall_s": wall, "state": state}


def run_series_sync(root: Path, attempts: int) -> dict[str, Any]:
    return asyncio.run(run_series_in_process(root, attempts))


def peak_rss_mib_self() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def instant() -> None:
    os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"


PASSED_CHECK = [{"check_id": "says_ok", "passed": True, "score": None, "reason": "contains 'ok'", "cost_usd": "0"}]


def mark_done(db: Any, series_id: str, active_since: float, done: int) -> None:
    """The series' first `done` attempts as finished and passed, 10 ms of active time apart (a series far along,
    without running it): what the series_get benches read. On PostgreSQL in transactions of 500 attempts: its tally
    trigger updates the series' counter row once per attempt, and one transaction's updates of one row make a chain
    of row versions that each next update walks (one UPDATE of 94,000 attempts ran for more than 7 minutes)."""
    step = 500 if getattr(db, "dialect", "sqlite") == "postgresql" else max(done, 1)
    now = time.time()
    for lo in range(0, done, step):
        with db.transaction() as cur:
            cur.execute(
                "UPDATE attempts SET status='done', outcome='pass', value=1.0, checks=?, cost_usd='0.000016',"
                " unpriced=0, run_id='run_' || idx, started_at='2026-01-01T00:00:00.000+00:00',"
                " ended_at='2026-01-01T00:00:00.050+00:00', active_at_end=? - (? - idx) * 0.01"
                " WHERE series_id=? AND idx >= ? AND idx < ?",
                (json.dumps(PASSED_CHECK), now - active_since, done, series_id, lo, min(lo + step, done)),
            )
