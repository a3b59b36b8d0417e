"""Attempts per second of a series on an instant simulator, in-process (no HTTP).

Runs reply_noninferior_mistral of the showcase on dev with simulated models whose latency is scaled
to zero, through the real series scheduler, engine, checks and SQLite store.

    .venv/bin/python bench/series_throughput.py [--repeats 2] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import tempfile
import time
from pathlib import Path

os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

from aqven.project.init import init_project
from aqven.research.series.start import SeriesStartBody
from aqven.server.service import ProjectService


async def run(root: Path, repeats: int, experiment: str) -> None:
    svc = ProjectService(root)
    started = time.perf_counter()
    out = await svc.series.start(
        SeriesStartBody(experiment_id=experiment, on="dev", repeats=repeats, simulate=True, cap_usd=None)
    )
    sid = out["series"]["series_id"]
    state = await svc.series.get(sid, wait_seconds=50)
    while state["status"] not in ("done", "failed", "cancelled", "awaiting_approval"):
        state = await svc.series.get(sid, wait_seconds=50)
    wall = time.perf_counter() - started
    n = state["progress"]["done"]
    print(
        f"{experiment}: {n} attempts in {wall:.2f} s = {n / wall:.1f} attempts/s ({state['status']}; "
        f"{state['verdict']['verdict'] if state['verdict'] else '-'})"
    )
    await svc.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--experiment", default="reply_noninferior_mistral")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = init_project(Path(tmp) / "bench", "lumen")
        (root / "aqven.yaml").write_text(
            (root / "aqven.yaml").read_text().replace('spend_cap_usd: "1.00"', 'spend_cap_usd: "100.00"')
        )
        if args.profile:
            cProfile.runctx(
                "asyncio.run(run(root, args.repeats, args.experiment))", globals(), locals(), "/tmp/series.prof"
            )
            pstats.Stats("/tmp/series.prof").sort_stats("tottime").print_stats(30)
        else:
            asyncio.run(run(root, args.repeats, args.experiment))


if __name__ == "__main__":
    main()
