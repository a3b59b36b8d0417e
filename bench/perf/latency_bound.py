"""Latency-bound efficiency: N attempts on a simulator that takes 1 s per call, concurrency 50, in-process.

The tiny project of bench/perf/perf_common.py with `concurrency: 50` in its aqven.yaml and a simulator that returns
latency_s=1.0, run with AQVEN_SIM_LATENCY_SCALE=1 (the latency is slept for real). The ideal wall time is
attempts × latency / concurrency (2,000 × 1 s / 50 = 40 s); the script prints the measured wall time, the ratio
to the ideal, how many attempts ran at once (sampled from the attempts table every 0.5 s) and the CPU time.

The service is warmed before the timing (the project, its check and the price table loaded, as `aqven serve` does
when it starts: a series always runs on a server that has); --cold times that first load too.

Note the series rule (DESIGN §6): the first attempt runs alone, so its cost becomes the cap reserve; the ideal
below does not include that first lone second, the "ideal + 1 s" line does.

    .venv/bin/python bench/perf/latency_bound.py [--attempts 2000] [--latency 1.0] [--concurrency 50] [--compare]

--compare runs the same series three times back to back, each in a fresh subprocess, and prints the ratios
side by side: as before issue 16 (AQVEN_CALL_PATH=agent, AQVEN_CPU_GATE=off), the lean call path alone
(AQVEN_CPU_GATE=off), and both (the defaults).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["AQVEN_SIM_LATENCY_SCALE"] = "1"

import perf_common as pc


async def sample_running(db: Path, stop: asyncio.Event, out: list[int]) -> None:
    while not stop.is_set():
        if db.exists():
            try:
                con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
                out.append(con.execute("SELECT COUNT(*) FROM attempts WHERE status='running'").fetchone()[0])
                con.close()
            except sqlite3.Error:
                pass
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)


WARM = True  # the service loads the project and prices before the timing, as a server does at its start


async def run(root: Path, attempts: int) -> tuple[dict[str, object], list[int]]:
    stop = asyncio.Event()
    running: list[int] = []
    sampler = asyncio.ensure_future(sample_running(root / ".aqven" / "aqven.sqlite", stop, running))
    try:
        r = await pc.run_series_in_process(root, attempts, poll_s=5, warm=WARM)
    finally:
        stop.set()
        await sampler
    return r, running


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--compare", action="store_true", help="agent path / lean / lean + gate, back to back")
    parser.add_argument("--json-line", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cold", action="store_true", help="time the project's first load too (no warm-up)")
    args = parser.parse_args()
    global WARM
    WARM = not args.cold
    if args.compare:
        compare(args)
        return
    ideal = args.attempts * args.latency / args.concurrency
    with tempfile.TemporaryDirectory() as tmp:
        cases, repeats = pc.split_attempts(args.attempts)
        root = pc.write_tiny_project(Path(tmp) / "p", cases=cases, latency_s=args.latency, concurrency=args.concurrency)
        load = os.getloadavg()[0]
        cpu = time.process_time()
        r, running = asyncio.run(run(root, args.attempts))
        cpu = time.process_time() - cpu
    st = r["state"]
    assert isinstance(st, dict)
    wall = float(r["wall_s"])  # type: ignore[arg-type]
    busy = [x for x in running if x > 0]
    print(
        f"{args.attempts} attempts ({cases} cases × {repeats} repeats), simulator latency {args.latency} s, "
        f"concurrency {args.concurrency}; status {st['status']}, done {st['progress']['done']} "
        f"(load avg at start {load:.2f}; {'warmed before the timing' if WARM else 'cold: its first load timed'})"
    )
    print(
        f"wall {wall:.1f} s; ideal {ideal:.1f} s (attempts × latency / concurrency): ratio {wall / ideal:.3f}; "
        f"against ideal + the first attempt's lone {args.latency:g} s: {wall / (ideal + args.latency):.3f}"
    )
    print(
        f"efficiency {ideal / wall * 100:.1f}%; overhead beyond the ideal {wall - ideal:.1f} s "
        f"= {(wall - ideal) / args.attempts * 1000:.1f} ms per attempt; CPU {cpu:.1f} s "
        f"({cpu / args.attempts * 1000:.2f} ms/attempt; this process got {cpu / wall * 100:.0f}% of a core)"
    )
    print(
        f"CPU-bound floor: the event loop needs {cpu:.1f} s of CPU, so even with a free core the wall time is at "
        f"least max(ideal, CPU) = {max(ideal, cpu):.1f} s (ratio {max(ideal, cpu) / ideal:.3f})"
    )
    if args.json_line:
        print(json.dumps({"wall": wall, "ideal": ideal, "cpu": cpu, "load": load, "done": st["progress"]["done"]}))
    if busy:
        print(
            f"attempts running at once (sampled every 0.5 s while any ran): median {pc.median(busy):.0f}, "
            f"max {max(busy)}, min {min(busy)} over {len(busy)} samples"
        )


CONFIGS = {
    "agent path, no gate (before)": {"AQVEN_CALL_PATH": "agent", "AQVEN_CPU_GATE": "off"},
    "lean path, no gate": {"AQVEN_CALL_PATH": "lean", "AQVEN_CPU_GATE": "off"},
    "lean path + FIFO gate (default)": {"AQVEN_CALL_PATH": "lean", "AQVEN_CPU_GATE": "on"},
}


def compare(args: argparse.Namespace) -> None:
    argv = [sys.executable, __file__, "--attempts", str(args.attempts), "--latency", str(args.latency)]
    argv += ["--concurrency", str(args.concurrency), "--json-line"]
    rows = []
    for name, env in CONFIGS.items():
        out = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout
        r = json.loads([x for x in out.splitlines() if x.startswith("{")][-1])
        rows.append((name, r))
        print(
            f"{name:<34} wall {r['wall']:6.1f} s  ratio {r['wall'] / r['ideal']:.3f}  (+1 lone latency: "
            f"{r['wall'] / (r['ideal'] + args.latency):.3f})  CPU {r['cpu']:5.1f} s  load at start {r['load']:.2f}",
            flush=True,
        )
    print(f"load avg after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
