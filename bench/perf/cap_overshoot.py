"""How far a series with uneven attempt costs goes past its spend cap, with and without the ramp.

Each trial writes a small simulated project whose attempts cost what their case says (heavy-tailed: most
cost about a cent, a few ten times more), starts a series under a cap far below what all of its attempts
would cost, and lets it run until it pauses at the cap. The figure is the overshoot, `spent - cap`, in units
of the dearest attempt the series ran: the scheduler promises at most one. With `--no-ramp` the series runs
a whole batch as soon as the first attempt set the reserve (the scheduler before the ramp), for comparison.

    .venv/bin/python bench/perf/cap_overshoot.py [--trials 30] [--cases 80] [--concurrency 8] [--cap 0.20]
        [--dist lognormal|bimodal] [--no-ramp]

Bounded by `--limit` seconds (default 300).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

PRICE = "0.00001"  # per input token: 1000 tokens = $0.01

AQVEN_YAML = 'package: capbench\nname: Cap bench\nresearch:\n  spend_cap_usd: "{cap}"\nconcurrency: {concurrency}\n'
AGENT = (
    "model: openrouter:bench/priced\nsettings: {temperature: 0, max_tokens: 10, timeout_s: 10}\n"
    "output_retries: 0\nsimulator: sim/agents.py:writer\n"
)
SIM = """\
import asyncio
import random

from aqven.models.simulator import SimReply, SimRequest


async def writer(req: SimRequest) -> SimReply:
    tokens = int(str(req.inputs["text"]).split(":")[1])
    await asyncio.sleep(random.uniform(0.002, 0.02))  # attempts finish out of order
    return SimReply(output={"reply": "good"}, input_tokens=tokens, output_tokens=0)
"""
FLOW = """\
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
EXPERIMENT = """\
failure_mode: bad_reply
description: The writer answers well on more than 55% of the cases.
subject: {flow: answer}
dataset: {id: cases}
checks:
  - id: ok
    builtin: contains
    field: reply
    value: good
metrics:
  ok: {check: ok}
question: {kind: threshold, metric: ok, bound: 0.5, margin: 0.05}
repeats: 1
"""


def write_project(root: Path, tokens: list[int], *, cap: str, concurrency: int) -> None:
    cases = "cases:\n" + "".join(f'  - name: c{i:04d}\n    input: {{text: "t:{t}"}}\n' for i, t in enumerate(tokens))
    files = {
        "aqven.yaml": AQVEN_YAML.format(cap=cap, concurrency=concurrency),
        "agents/w.yaml": AGENT,
        "sim/agents.py": SIM,
        "flows/answer/flow.yaml": FLOW,
        "flows/answer/answer.md": "Answer: {{ text }}\n",
        "datasets/cases.yaml": cases,
        "experiments/rate/experiment.yaml": EXPERIMENT,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def uneven_tokens(rng: random.Random, n: int, dist: str) -> list[int]:
    """`lognormal`: heavy-tailed, around 1000 tokens ($0.01), a few 10-30 times that. `bimodal`: half of the
    attempts cost $0.005, half $0.06 (a cheap first attempt sets a reserve twelve times too small)."""
    if dist == "bimodal":
        return [rng.choice((500, 6000)) for _ in range(n)]
    return [max(100, min(30_000, int(1000 * math.exp(rng.gauss(0, 1.0))))) for _ in range(n)]


async def one_trial(root: Path, *, limit_s: float) -> dict[str, Any]:
    from aqven.research.series.start import SeriesStartBody
    from aqven.server.service import ProjectService

    svc = ProjectService(root)
    try:
        started = await svc.series.start(SeriesStartBody(experiment_id="rate", on="dev", simulate=True))
        sid = started["series"]["series_id"]
        deadline = time.monotonic() + limit_s
        state = await svc.series.get(sid, wait_seconds=20)
        while state["status"] == "running" and time.monotonic() < deadline:
            state = await svc.series.get(sid, wait_seconds=20)
        costs = [Decimal(a.cost_usd or "0") for a in svc.series.store.attempts(sid) if a.status == "done"]
        return {"status": state["status"], "spent": sum(costs, Decimal(0)), "most": max(costs, default=Decimal(0))}
    finally:
        await svc.shutdown()


def disable_ramp() -> None:
    """The scheduler before the ramp: a whole batch as soon as one attempt's cost is known."""
    from aqven.research.series import runner as series_runner

    original = series_runner.SeriesRunner._start_more

    def start_more(self: Any, s: Any, queue: Any, running: Any, tally: Any, **kw: Any) -> bool:
        tally.learned = 10**9
        return original(self, s, queue, running, tally, **kw)

    series_runner.SeriesRunner._start_more = start_more  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--cases", type=int, default=80)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--cap", default="0.20")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dist", choices=("lognormal", "bimodal"), default="lognormal")
    parser.add_argument("--no-ramp", action="store_true", help="the scheduler before the ramp, for comparison")
    parser.add_argument("--limit", type=float, default=300.0)
    args = parser.parse_args()
    if args.no_ramp:
        disable_ramp()
    os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"
    rng = random.Random(args.seed)
    cap = Decimal(args.cap)
    started = time.monotonic()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        prices = Path(tmp) / "prices.json"
        prices.write_text(
            json.dumps({"data": [{"id": "bench/priced", "pricing": {"prompt": PRICE, "completion": "0"}}]})
        )
        os.environ["AQVEN_PRICES_FILE"] = str(prices)
        for trial in range(args.trials):
            if time.monotonic() - started > args.limit:
                break
            root = Path(tmp) / f"p{trial}"
            write_project(root, uneven_tokens(rng, args.cases, args.dist), cap=args.cap, concurrency=args.concurrency)
            results.append(asyncio.run(one_trial(root, limit_s=args.limit)))
    over = [max(Decimal(0), r["spent"] - cap) for r in results]
    units = [float(o / r["most"]) if r["most"] else 0.0 for o, r in zip(over, results, strict=True)]
    worst = max(range(len(results)), key=lambda i: results[i]["spent"])
    print(f"{'without' if args.no_ramp else 'with'} the ramp: {len(results)} trials, {args.cases} cases, cap ${cap},")
    print(f"  concurrency {args.concurrency}, {args.dist} costs (seed {args.seed}), {time.monotonic() - started:.0f} s")
    print(f"  paused at the cap: {sum(r['status'] == 'awaiting_approval' for r in results)} of {len(results)}")
    print(
        f"  spent / cap: max {max(r['spent'] for r in results) / cap:.3f}, mean "
        f"{sum(r['spent'] for r in results) / len(results) / cap:.3f}"
    )
    print(
        f"  overshoot past the cap: {sum(o > 0 for o in over)} of {len(results)} trials; "
        f"max {max(units):.2f} of the dearest attempt (worst trial spent ${results[worst]['spent']}, dearest "
        f"attempt ${results[worst]['most']})"
    )
    print(f"  trials over cap + one attempt: {sum(u > 1 for u in units)}")
    sys.exit(0)


if __name__ == "__main__":
    main()
