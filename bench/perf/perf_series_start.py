"""`POST /api/series` through a real server process at 1,000 / 10,000 / 100,000 attempts, without running them.

For each size: writes the tiny project (bench/perf/perf_common.py: cases × 20 repeats), starts `python -m aqven serve`
(bench/perf/scale.py's start_server), then 1 + --repeat times: POST /api/series (timed: what a client waits for), one
GET /api/series/{id} (timed), then waits until every attempt row is written (the rows after the first ones are
written after the answer: research/series/fill.py; the row count is read from the database every 20 ms) and
cancels the series, so the next start does not share the server with it. As the CLI does after it started a server
(`lifecycle.wait_warm`), the first POST waits until /api/health says the server is warm (it loaded and checked the
project); that wait is printed, and the first POST is reported apart. Prints the load average at the start of each
size.

    .venv/bin/python bench/perf/perf_series_start.py [--sizes 1000,10000,100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import perf_common as pc
import scale


def rows_of(root: Path, series_id: str) -> int:
    conn = sqlite3.connect(f"file:{root / '.aqven' / 'aqven.sqlite'}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM attempts WHERE series_id=?", (series_id,)).fetchone()[0])
    finally:
        conn.close()


def ended(root: Path, series_id: str) -> bool:
    conn = sqlite3.connect(f"file:{root / '.aqven' / 'aqven.sqlite'}?mode=ro", uri=True, timeout=30)
    try:
        row = conn.execute("SELECT ended_at FROM series WHERE id=?", (series_id,)).fetchone()
        return row is not None and row[0] is not None
    finally:
        conn.close()


def run_size(n: int, repeat: int) -> dict[str, Any]:
    root = scale.OUT / "series_start" / str(n)
    shutil.rmtree(root, ignore_errors=True)
    cases, repeats = pc.split_attempts(n)
    pc.write_tiny_project(root, cases=cases)
    proc, port = scale.start_server(root)
    posts: list[float] = []
    filled: list[float] = []
    gets: list[float] = []
    try:
        for i in range(repeat + 1):
            body = {"experiment_id": pc.EXPERIMENT, "on": "dev", "cases": cases, "repeats": repeats, "simulate": True}
            started = time.perf_counter()
            ms, out = scale.request(port, "POST", "/api/series", body)
            sid = out["series"]["series_id"]
            assert out["series"]["progress"]["attempts"] == n, out["series"]["progress"]
            gets.append(scale.request(port, "GET", f"/api/series/{sid}")[0])
            while rows_of(root, sid) < n:
                time.sleep(0.02)
            filled.append((time.perf_counter() - started) * 1000)
            scale.request(port, "POST", f"/api/series/{sid}/cancel", {"reason": "bench"})
            while not ended(root, sid):  # its driver done too: the next start has the server to itself
                time.sleep(0.05)
            posts.append(ms)
            print(f"  [{n}] POST {i}: {ms:.0f} ms; every row written after {filled[-1]:.0f} ms", flush=True)
    finally:
        scale.stop_server(proc)
        shutil.rmtree(root, ignore_errors=True)
    return {
        "attempts": n,
        "first_ms": posts[0],
        "warm_s": scale.WARM_S.get(port, 0.0),
        "post_median_ms": pc.median(posts[1:]),
        "post_max_ms": max(posts[1:]),
        "filled_median_ms": pc.median(filled[1:]),
        "get_median_ms": pc.median(gets[1:]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        load = os.getloadavg()
        print(f"== {n:,} attempts (load avg {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})", flush=True)
        rows.append((run_size(n, args.repeat), load[0]))
    print()
    print(
        "| attempts | load avg | server warm after s | first POST ms | POST median / max ms (of the next "
        f"{args.repeat}) | rows all written, after ms | GET after the start ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r, load in rows:
        print(
            f"| {r['attempts']:,} | {load:.2f} | {r['warm_s']:.2f} | {r['first_ms']:.0f} | {r['post_median_ms']:.0f} / "
            f"{r['post_max_ms']:.0f} | {r['filled_median_ms']:.0f} | {r['get_median_ms']:.0f} |"
        )


if __name__ == "__main__":
    main()
