"""series_get at 1k / 10k / 100k attempts: the snapshot from SQL aggregates, against loading every attempt row.

No attempt runs: for each size the script writes the tiny project (bench/perf/perf_common.py), creates the series the
way SeriesService.start does (prepare_series + SeriesStore.create, without starting its driver), then marks 90% of the
attempts done with what a finished attempt holds (outcome pass, value 1, its check result JSON, cost, active time)
and leaves the series running, so series_get computes a provisional verdict, as while a series runs.

It times `SeriesService.get` (store/series_tally.py aggregates, then series_view.snapshot), the same with
include_cases, the same after 50 more attempts finished before each call (what a GET during a run costs: the kept
tally reads the cells they changed, the verdict is computed again), a full read of the tally, and, as the floor of
what series_get cost before the aggregates (it loaded every attempt as an AttemptRow and walked them),
`SeriesStore.attempts()` plus one walk.

With --plan it only times what parsing a series' plan costs at each size (SeriesStore now parses it once).

    .venv/bin/python bench/perf/perf_series_get.py [--sizes 1000,10000,100000] [--repeat 5] [--plan]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

import perf_common as pc

COUNTED = ("pass", "fail", "model_failure")
CREATE_MS: dict[int, float] = {}


def build(root: Path, attempts: int) -> tuple[Any, str]:
    from aqven.research.series.fill import write_missing
    from aqven.research.series.start import SeriesStartBody, prepare_series
    from aqven.server.service import ProjectService

    cases, repeats = pc.split_attempts(attempts)
    pc.write_tiny_project(root, cases=cases)
    svc = ProjectService(root)
    body = SeriesStartBody(
        experiment_id=pc.EXPERIMENT, on="dev", cases=cases, repeats=repeats, simulate=True, client_op_id=None
    )
    started = time.perf_counter()
    fields = prepare_series(svc.workspace(), svc.engine(), body)
    sid, _ = svc.series.store.create(**fields)
    CREATE_MS[attempts] = (time.perf_counter() - started) * 1000  # what POST /api/series does, without HTTP
    write_missing(svc.series.store, sid)  # the rows the server writes after its answer (research/series/fill.py)
    done = int(attempts * 0.9)
    pc.mark_done(svc.db, sid, fields["active_since"], done)
    return svc, sid


def row_by_row(svc: Any, sid: str) -> int:
    """What series_get did before it read aggregates: load every attempt and walk it (the walk is a count here,
    so this is a lower bound of the old cost)."""
    rows = svc.series.store.attempts(sid)
    return sum(1 for a in rows if a.status == "done" and a.outcome in COUNTED)


async def measure(attempts: int, repeat: int, tmp: Path) -> dict[str, Any]:
    from aqven.store.series_tally import read_tally

    svc, sid = build(tmp / f"p{attempts}", attempts)

    async def timed(call: Any) -> tuple[float, float]:
        walls: list[float] = []
        cpus: list[float] = []
        for _ in range(repeat):
            t, c = time.perf_counter(), time.process_time()
            result = call()
            if asyncio.iscoroutine(result):
                await result
            walls.append((time.perf_counter() - t) * 1000)
            cpus.append((time.process_time() - c) * 1000)
        return pc.median(walls), pc.median(cpus)

    snap = await svc.series.get(sid)
    assert snap["progress"]["done"] == int(attempts * 0.9), snap["progress"]
    assert snap["progress"]["counted"] == row_by_row(svc, sid)
    get_ms, get_cpu = await timed(lambda: svc.series.get(sid))
    cases_ms, cases_cpu = await timed(lambda: svc.series.get(sid, include_cases=True))
    rows_ms, rows_cpu = await timed(lambda: row_by_row(svc, sid))
    # As while the series runs: 50 more attempts finish before each GET (fewer when fewer are left, so that each
    # GET has some), so the kept tally reads what changed and the verdict is computed again.
    moved = [int(attempts * 0.9)]
    step = max(1, min(50, (attempts - moved[0]) // (repeat + 1)))

    async def after_progress() -> None:
        with svc.db.transaction() as cur:
            cur.execute(
                "UPDATE attempts SET status='done', outcome='pass', value=1.0, cost_usd='0.000016',"
                " active_at_end=active_at_end WHERE series_id=? AND idx >= ? AND idx < ?",
                (sid, moved[0], moved[0] + step),
            )
        moved[0] += step
        t, c = time.perf_counter(), time.process_time()
        await svc.series.get(sid)
        live_walls.append((time.perf_counter() - t) * 1000)
        live_cpus.append((time.process_time() - c) * 1000)

    live_walls: list[float] = []
    live_cpus: list[float] = []
    for _ in range(repeat):
        await after_progress()
    _, full_cpu = await timed(lambda: read_tally(svc.db, sid))
    size = sum(p.stat().st_size for p in (tmp / f"p{attempts}" / ".aqven").glob("aqven.sqlite*"))
    await svc.shutdown()
    return {
        "attempts": attempts,
        "get_ms": get_ms,
        "get_cpu_ms": get_cpu,
        "cases_ms": cases_ms,
        "cases_cpu_ms": cases_cpu,
        "rows_ms": rows_ms,
        "rows_cpu_ms": rows_cpu,
        "live_ms": pc.median(live_walls),
        "live_cpu_ms": pc.median(live_cpus),
        "full_cpu_ms": full_cpu,
        "db_mib": size / 2**20,
        "create_ms": CREATE_MS[attempts],
    }


def plan_parse(sizes: list[int]) -> None:
    """SeriesStore.get() parses the series' plan (every case name and its side) on each call; the driver calls it
    for every finished attempt. CPU per parse at each size (cases = attempts / 20)."""
    from aqven.store.series_records import SeriesPlan

    print("| attempts | cases | plan JSON bytes | SeriesPlan.model_validate_json CPU ms |")
    print("|---:|---:|---:|---:|")
    for n in sizes:
        cases, repeats = pc.split_attempts(n)
        names = pc.dev_case_names(cases)
        plan = SeriesPlan(
            flow_id="one",
            dataset_id="many",
            cases=names,
            sides=dict.fromkeys(names, "dev"),
            variants=["as_written"],
            repeats=repeats,
            question={"kind": "threshold"},
            simulate=True,
        )
        text = plan.model_dump_json()
        c = time.process_time()
        for _ in range(100):
            SeriesPlan.model_validate_json(text)
        print(f"| {n:,} | {cases:,} | {len(text):,} | {(time.process_time() - c) / 100 * 1000:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--plan", action="store_true", help="only time the plan parse of SeriesStore.get")
    args = parser.parse_args()
    if args.plan:
        plan_parse([int(x) for x in args.sizes.split(",")])
        return
    print(f"load avg {os.getloadavg()[0]:.2f}; medians of {args.repeat} calls; series running, 90% of attempts done")
    print(
        "| attempts | series_get wall ms | CPU ms | with include_cases wall ms | CPU ms "
        "| load + walk every attempt row (the old floor) wall ms | CPU ms | old floor / series_get (CPU) "
        "| create (prepare + insert, as POST /api/series) ms "
        "| series_get after up to 50 more finished: wall ms | CPU ms | a full tally read (a fresh KeptTally) CPU ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            load = os.getloadavg()[0]
            r = asyncio.run(measure(n, args.repeat, Path(tmp)))
            print(
                f"| {n:,} | {r['get_ms']:.1f} | {r['get_cpu_ms']:.1f} | {r['cases_ms']:.1f} | {r['cases_cpu_ms']:.1f} "
                f"| {r['rows_ms']:.1f} | {r['rows_cpu_ms']:.1f} "
                f"| ×{r['rows_cpu_ms'] / max(r['get_cpu_ms'], 1e-6):.1f} | {r['create_ms']:.0f} "
                f"| {r['live_ms']:.1f} | {r['live_cpu_ms']:.1f} | {r['full_cpu_ms']:.1f} |",
                flush=True,
            )
            print(f"  (load avg at the start of this size: {load:.2f})", flush=True)


if __name__ == "__main__":
    main()
