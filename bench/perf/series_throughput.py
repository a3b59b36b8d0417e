"""Attempts per second of a series on an instant simulator, in-process (no HTTP), with and without workers.

Runs reply_noninferior_mistral of the showcase on dev with simulated models whose latency is scaled to zero,
through the real series scheduler, engine, checks and SQLite store. `--workers 1,2` runs the same series once per
setting of `workers` (aqven.yaml), each on a fresh copy of the project, `--rounds` times in alternation, and
prints attempts/s, CPU per attempt (this process and its workers) and the load average at each start, then the
ratio of the medians and round by round, with the share of the machine's time its hypervisor gave others (steal).
`workers: 1` is the server alone (one core); `workers: 2` is two worker processes that run
the attempts while this process decides. The workers are started and ready before the timing starts (a server
starts them when it starts); the CPU figure counts what they spent from the start of the timing (read from /proc
on Linux; elsewhere their start, a few seconds of imports and project load each, is included and said so), and
each process's share of the wall time (how busy it kept its core).

    .venv/bin/python bench/perf/series_throughput.py [--repeats 2] [--workers 1,2 --rounds 2] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

from aqven.project.init import init_project
from aqven.research.series.start import SeriesStartBody
from aqven.server.service import ProjectService


def _cpu() -> tuple[float, float]:
    """CPU seconds of this process, and of its children that ended (the workers, once the service shut down)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _proc_cpu(pid: int) -> float | None:
    """CPU seconds a live process has used so far (Linux /proc), or None where that cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Timed:
    done: int  # attempts done
    wall: float  # seconds from the start of the series to its end
    workers_before: float | None  # CPU seconds the workers had used when the timing started (their start)


async def run(root: Path, repeats: int, experiment: str) -> Timed:
    svc = ProjectService(root)
    warm = time.perf_counter()
    before: float | None = 0.0
    if await svc.series.runner.warm():  # as in a server that has been up for a while: its workers are ready
        print(f"  workers started and ready in {time.perf_counter() - warm:.2f} s (before the timing)")
        pool = svc.series.runner._workers  # the bench reads the pool's pids: no API gives them
        spent = [_proc_cpu(pid) for pid in (pool.pids() if pool is not None else [])]
        before = None if None in spent else sum(x for x in spent if x is not None)
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
    return Timed(n, wall, before)


def project(base: Path, name: str, *, workers: int = 1, concurrency: int | None = None) -> Path:
    root = init_project(base / name, "lumen")
    text = (root / "aqven.yaml").read_text().replace('spend_cap_usd: "1.00"', 'spend_cap_usd: "100.00"')
    if concurrency is not None:
        text = "\n".join(
            f"concurrency: {concurrency}" if ln.startswith("concurrency:") else ln for ln in text.split("\n")
        )
    (root / "aqven.yaml").write_text(text + f"\nworkers: {workers}\n")
    return root


def _machine() -> list[int] | None:
    """The machine's CPU time so far by state (Linux /proc/stat: user nice system idle iowait irq softirq steal)."""
    try:
        return [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None


def _steal(before: list[int] | None, after: list[int] | None) -> str:
    """The share of the machine's time its hypervisor gave to others (steal) over a run: a second core that another
    guest takes part of cannot run a worker at full speed."""
    if before is None or after is None:
        return "steal not known"
    spent = [b - a for a, b in zip(before, after, strict=True)]
    return f"steal {spent[7] / max(sum(spent), 1):.1%} of the cores' time"


def compare(base: Path, settings: list[int], rounds: int, repeats: int, experiment: str, concurrency: int) -> None:
    rates: dict[int, list[float]] = {w: [] for w in settings}
    cpus: dict[int, list[tuple[float, float]]] = {w: [] for w in settings}
    for r in range(rounds):
        for w in settings:
            root = project(base, f"r{r}-w{w}", workers=w, concurrency=concurrency)
            load = os.getloadavg()
            own0, kids0 = _cpu()
            machine0 = _machine()
            t = asyncio.run(run(root, repeats, experiment))
            own1, kids1 = _cpu()
            steal = _steal(machine0, _machine())
            n, wall = t.done, t.wall
            start = t.workers_before
            own, kids = (own1 - own0) / n, (kids1 - kids0 - (start or 0.0)) / n
            rates[w].append(n / wall)
            cpus[w].append((own, kids))
            if w > 1:
                counted = "their start included" if start is None else f"their start ({start:.1f} s) not counted"
                who = f"this process {own * 1000:.2f} + workers {kids * 1000:.2f}, {counted}"
                busy = f"busy {own * n / wall:.0%} + workers {kids * n / wall / w:.0%} each"
            else:
                who, busy = "one process", f"busy {own * n / wall:.0%}"
            print(
                f"  workers {w} (round {r + 1}): {n / wall:.1f} attempts/s; CPU/attempt {(own + kids) * 1000:.2f} ms"
                f" ({who}; {busy} of the wall time);"
                f" load avg at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {steal}"
            )
    medians = {w: statistics.median(v) for w, v in rates.items()}
    first = settings[0]
    cores = os.cpu_count() or 1

    def bound(w: int) -> float:
        """Attempts/s on free cores from the CPU figures: all processes share the cores, the deciding process and
        each worker use at most one."""
        own = statistics.median(c[0] for c in cpus[w])
        kids = statistics.median(c[1] for c in cpus[w])
        return 1 / (own + kids) if w <= 1 else min(cores / (own + kids), 1 / own, w / kids)

    if len(settings) > 1:  # machines drift within minutes: the rounds' own ratios, side by side, compare best
        other = settings[-1]
        by_round = [b / a for a, b in zip(rates[first], rates[other], strict=True)]
        print(
            f"workers {other} / workers {first}, round by round: {', '.join(f'{x:.2f}' for x in by_round)}"
            f" (median {statistics.median(by_round):.2f})"
        )
    for w in settings:
        print(
            f"workers {w}: median {medians[w]:.1f} attempts/s = {medians[w] / medians[first]:.2f}× workers {first}"
            f" measured; CPU-bound estimate on {cores} free cores {bound(w):.0f} attempts/s ="
            f" {bound(w) / bound(first):.2f}×"
        )
    print(
        f"load avg at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {cores} cores; "
        "the machine may be shared (load above ~1 means other work competes for the cores)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--experiment", default="reply_noninferior_mistral")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--workers", default=None, help="compare settings of `workers`, e.g. 1,2")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each setting, in alternation")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.workers:
            settings = [int(x) for x in args.workers.split(",")]
            compare(Path(tmp), settings, args.rounds, args.repeats, args.experiment, args.concurrency)
            return
        root = project(Path(tmp), "bench")
        if args.profile:
            cProfile.runctx(
                "asyncio.run(run(root, args.repeats, args.experiment))", globals(), locals(), "/tmp/series.prof"
            )
            pstats.Stats("/tmp/series.prof").sort_stats("tottime").print_stats(30)
        else:
            asyncio.run(run(root, args.repeats, args.experiment))


if __name__ == "__main__":
    main()
