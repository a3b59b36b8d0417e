"""series_get at 1k / 10k / 100k attempts: today's snapshot against the same figures from SQL aggregates.

No attempt runs: for each size the script writes the tiny project (bench/perf_common.py), creates the series the way
SeriesService.start does (prepare_series + SeriesStore.create, without starting its driver), then marks 90% of the
attempts done with what a finished attempt holds (outcome pass, value 1, its check result JSON, cost, active time)
and leaves the series running, so series_get computes a provisional verdict, as while a series runs.

It times (a) `SeriesService.get` as it is today — SeriesStore.attempts() loads every attempt as an AttemptRow,
then series_view.snapshot() walks them — and (b) a prototype `aggregate_view` below that reads the same numbers
(progress, spend, eta, matrix, the verdict's per-case cells) with GROUP BY queries, and checks that both agree.
The prototype is a proposal for research/series_view.py and store/series.py, which this bench does not change.

With --plan it only times what SeriesStore.get() spends parsing the plan at each size.

    .venv/bin/python bench/perf_series_get.py [--sizes 1000,10000,100000] [--repeat 5] [--plan]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

import perf_common as pc

COUNTED = ("pass", "fail", "model_failure")
CHECK = [{"check_id": "says_ok", "passed": True, "score": None, "reason": "contains 'ok'", "cost_usd": "0"}]


def build(root: Path, attempts: int) -> tuple[Any, str]:
    from aqven.research.series_start import SeriesStartBody, prepare_series
    from aqven.server.service import ProjectService

    cases, repeats = pc.split_attempts(attempts)
    pc.write_tiny_project(root, cases=cases)
    svc = ProjectService(root)
    body = SeriesStartBody(
        experiment_id=pc.EXPERIMENT, on="dev", cases=cases, repeats=repeats, simulate=True, client_op_id=None
    )
    fields = prepare_series(svc.workspace(), svc.engine(), body)
    sid, _ = svc.series.store.create(**fields)
    done = int(attempts * 0.9)
    now = time.time()
    with svc.db.transaction() as cur:
        cur.execute(
            "UPDATE attempts SET status='done', outcome='pass', value=1.0, checks=?, cost_usd='0.000016', unpriced=0,"
            " run_id='run_' || idx, started_at='2026-01-01T00:00:00.000+00:00',"
            " ended_at='2026-01-01T00:00:00.050+00:00', active_at_end=? - (? - idx) * 0.01"
            " WHERE series_id=? AND idx < ?",
            (json.dumps(CHECK), now - fields["active_since"], done, sid, done),
        )
    return svc, sid


def aggregate_view(db: Any, series_id: str, now_active: float) -> dict[str, Any]:
    """What snapshot() needs, from GROUP BY queries: no AttemptRow, no JSON parsing of checks."""
    rows = db.query(
        "SELECT variant_id, status, outcome, COUNT(*) AS n, SUM(reruns) AS reruns, SUM(COALESCE(value, 0)) AS v"
        " FROM attempts WHERE series_id=? GROUP BY variant_id, status, outcome",
        (series_id,),
    )
    progress = {
        "attempts": 0,
        "done": 0,
        "running": 0,
        "queued": 0,
        "counted": 0,
        "model_failures": 0,
        "infra_errors": 0,
        "reruns": 0,
    }
    matrix: dict[str, dict[str, Any]] = {}
    for r in rows:
        m = matrix.setdefault(
            r["variant_id"],
            {"attempts": 0, "done": 0, "counted": 0, "passes": 0.0, "model_failures": 0, "infra_errors": 0},
        )
        progress["attempts"] += r["n"]
        progress["reruns"] += r["reruns"]
        m["attempts"] += r["n"]
        if r["status"] in ("running", "queued"):
            progress[r["status"]] += r["n"]
        if r["status"] != "done":
            continue
        progress["done"] += r["n"]
        m["done"] += r["n"]
        if r["outcome"] in COUNTED:
            progress["counted"] += r["n"]
            m["counted"] += r["n"]
            m["passes"] += r["v"]
        if r["outcome"] == "model_failure":
            progress["model_failures"] += r["n"]
            m["model_failures"] += r["n"]
        if r["outcome"] == "infra":
            progress["infra_errors"] += r["n"]
            m["infra_errors"] += r["n"]
    # Money is TEXT holding a Decimal: group equal amounts in SQL, add them exactly in Python.
    spend = Decimal(0)
    for r in db.query(
        "SELECT cost_usd, COUNT(*) AS n FROM attempts WHERE series_id=? AND status!='running' GROUP BY cost_usd",
        (series_id,),
    ):
        spend += Decimal(r["cost_usd"] or "0") * r["n"]
    eta = db.query_one(
        "SELECT COUNT(*) AS n, MIN(active_at_end) AS first, SUM(active_at_end >= ?) AS recent FROM attempts"
        " WHERE series_id=? AND status='done' AND active_at_end IS NOT NULL",
        (now_active - 300.0, series_id),
    )
    cells = db.query(
        "SELECT variant_id, case_name, SUM(COALESCE(value, 0)) AS passes, COUNT(*) AS n FROM attempts"
        " WHERE series_id=? AND status='done' AND outcome IN ('pass', 'fail', 'model_failure')"
        " GROUP BY variant_id, case_name",
        (series_id,),
    )
    return {
        "progress": progress,
        "matrix": matrix,
        "spend": spend,
        "eta_rows": dict(eta) if eta else None,
        "cells": len(cells),
    }


async def measure(attempts: int, repeat: int, tmp: Path) -> dict[str, Any]:
    from aqven.research.series_runner import active_now

    svc, sid = build(tmp / f"p{attempts}", attempts)
    today: list[float] = []
    today_cpu: list[float] = []
    snap: dict[str, Any] = {}
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        snap = await svc.series.get(sid)
        today.append((time.perf_counter() - t) * 1000)
        today_cpu.append((time.process_time() - c) * 1000)
    agg: list[float] = []
    agg_cpu: list[float] = []
    view: dict[str, Any] = {}
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        s = svc.series.store.get(sid)
        view = aggregate_view(svc.db, sid, active_now(s))
        agg.append((time.perf_counter() - t) * 1000)
        agg_cpu.append((time.process_time() - c) * 1000)
    assert view["progress"] == snap["progress"], (view["progress"], snap["progress"])
    assert str(view["spend"]) == snap["spend"]["usd"] or view["spend"] == Decimal(snap["spend"]["usd"])
    row = snap["matrix"][0]
    mine = view["matrix"][row["variant"]]
    assert (mine["done"], mine["counted"], round(mine["passes"], 6)) == (row["done"], row["counted"], row["passes"])
    size = sum(p.stat().st_size for p in (tmp / f"p{attempts}" / ".aqven").glob("aqven.sqlite*"))
    await svc.shutdown()
    return {
        "attempts": attempts,
        "today_ms": pc.median(today),
        "today_cpu_ms": pc.median(today_cpu),
        "agg_ms": pc.median(agg),
        "agg_cpu_ms": pc.median(agg_cpu),
        "db_mib": size / 2**20,
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
    print("| attempts | series_get today: wall ms | CPU ms | SQL aggregates (prototype): wall ms | CPU ms | speed-up |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            r = asyncio.run(measure(n, args.repeat, Path(tmp)))
            print(
                f"| {n:,} | {r['today_ms']:.1f} | {r['today_cpu_ms']:.1f} | {r['agg_ms']:.1f} | "
                f"{r['agg_cpu_ms']:.1f} | ×{r['today_cpu_ms'] / max(r['agg_cpu_ms'], 1e-6):.0f} (CPU) |",
                flush=True,
            )


if __name__ == "__main__":
    main()
