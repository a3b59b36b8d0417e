"""series_get during and after a 100,000-attempt series on a real server, without running 100,000 attempts first,
on SQLite and PostgreSQL side by side.

A 100,000-attempt `bench/perf/scale.py` run takes a quiet core for 16 minutes. This one builds the series the way
bench/perf/perf_series_get.py does (the tiny project, prepare_series + SeriesStore.create + the rest of its rows, then
all but the last --live attempts marked done with what a finished attempt holds), starts
`python -m aqven serve` on that project, which resumes the series and runs its last --live attempts for real
(instant simulator), and meanwhile times GET /api/series/{id} (no long-poll) every --poll seconds; then --after
more GETs once the series ended. Server memory from /proc/PID/status (VmRSS sampled every 0.5 s, VmHWM at the
end). Prints the load average at the start and at the end.

Each backend of --store runs the whole of it in turn, in a fresh store: the project's own SQLite file, or a new
database (AQVEN_STORE, in the server's environment too) on the PostgreSQL server of --postgres, by default a private
durable cluster this bench starts (bench/perf/stores.py); then one table SQLite | PostgreSQL | PG/SQLite.

    .venv/bin/python bench/perf/perf_series_get_live.py [--attempts 100000] [--live 5000] [--poll 0.5] [--after 20]
        [--store sqlite,postgresql] [--postgres DSN]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

import perf_common as pc
import scale
import stores


def build(root: Path, attempts: int, live: int) -> str:
    """The series, running, with its first `attempts - live` attempts done (their runs are not written)."""
    from aqven.research.series.fill import write_missing
    from aqven.research.series.start import SeriesStartBody, prepare_series
    from aqven.server.service import ProjectService

    cases, repeats = pc.split_attempts(attempts)
    pc.write_tiny_project(root, cases=cases)
    svc = ProjectService(root)
    body = SeriesStartBody(experiment_id=pc.EXPERIMENT, on="dev", cases=cases, repeats=repeats, simulate=True)
    fields = prepare_series(svc.workspace(), svc.engine(), body)
    sid, _ = svc.series.store.create(**fields)
    write_missing(svc.series.store, sid)
    done = attempts - live
    pc.mark_done(svc.db, sid, fields["active_since"], done)
    svc.db.close()
    return sid


def live(root: Path, attempts: int, live_n: int, poll: float, after_n: int) -> dict[str, Any]:
    """Build the series at `root` in the store AQVEN_STORE names (or the project's file), serve it, time GETs."""
    shutil.rmtree(root, ignore_errors=True)
    t = time.perf_counter()
    sid = build(root, attempts, live_n)
    built = time.perf_counter() - t
    print(f"built {attempts:,} attempts ({attempts - live_n:,} done) in {built:.1f} s", flush=True)
    proc, port = scale.start_server(root)
    sampler = scale.MemSampler(proc.pid)
    sampler.start()
    during: list[float] = []
    result: dict[str, Any] = {"built_s": built}
    try:
        started = time.perf_counter()
        while True:
            ms, state = scale.request(port, "GET", f"/api/series/{sid}")
            if state["status"] != "running":
                break
            during.append(ms)
            if len(during) % 20 == 1:
                print(
                    f"  {time.perf_counter() - started:6.1f} s  done {state['progress']['done']:>7}  get {ms:7.1f} ms"
                    f"  rss {sampler.peak_rss_kb / 1024:5.0f} MiB",
                    flush=True,
                )
            time.sleep(poll)
        wall = time.perf_counter() - started
        after = [scale.request(port, "GET", f"/api/series/{sid}")[0] for _ in range(after_n)]
        result.update(status=state["status"], done=state["progress"]["done"], wall_s=wall, during=during, after=after)
    finally:
        st = scale.proc_status(proc.pid)
        sampler.stop.set()
        sampler.join()
        result["hwm_mib"] = max(sampler.hwm_kb, st.get("VmHWM", 0)) / 1024
        result["rss_mib"] = sampler.peak_rss_kb / 1024
        result["server_cpu_s"] = scale.proc_cpu_s(proc.pid)
        scale.stop_server(proc)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--live", type=int, default=5_000, help="attempts the server runs while it is timed")
    parser.add_argument("--poll", type=float, default=0.5)
    parser.add_argument("--after", type=int, default=20)
    parser.add_argument("--store", default="sqlite,postgresql", help="backends, comma-separated (default both)")
    parser.add_argument(
        "--postgres",
        metavar="DSN",
        help="a PostgreSQL server where this user may create databases (default: a private durable cluster)",
    )
    args = parser.parse_args()
    backends = stores.parse_stores(args.store)
    load0 = os.getloadavg()
    print(f"load avg at the start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)
    by: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        server: stores.PgServer | None = None
        if "postgresql" in backends:
            server = stack.enter_context(stores.postgres_server(args.postgres))
            print("PostgreSQL: " + ("a private durable cluster" if server.cluster else "the server of --postgres"))
        for backend in backends:
            print(f"== {stores.SHORT[backend]}", flush=True)
            with stores.store(backend, server if backend == "postgresql" else None, "aqven_series_get"):
                by[backend] = live(
                    scale.OUT / f"series_get_live-{backend}", args.attempts, args.live, args.poll, args.after
                )
    load1 = os.getloadavg()

    def row(label: str, key: Callable[[dict[str, Any]], float], fmt: str, unit: str = "") -> stores.Row:
        v = {b: key(x) for b, x in by.items()}
        return (
            label,
            stores.cell(v.get("sqlite"), fmt, unit),
            stores.cell(v.get("postgresql"), fmt, unit),
            stores.ratio(v.get("postgresql"), v.get("sqlite")),
        )

    def got(x: dict[str, Any], name: str) -> list[float]:
        return x.get(name) or [0.0]

    ended = {b: f"{x['status']}, {x['done']:,} done" for b, x in by.items()}
    rows = [
        ("status at the end", ended.get("sqlite", "–"), ended.get("postgresql", "–"), ""),
        row("built (rows written directly)", lambda x: x["built_s"], ".1f", " s"),
        row(f"the last {args.live:,} attempts: attempts/s", lambda x: args.live / x["wall_s"], ".0f"),
        row("GETs during", lambda x: len(x["during"]), ".0f"),
        row("series_get during: median", lambda x: pc.median(got(x, "during")), ".1f", " ms"),
        row("series_get during: p95", lambda x: pc.percentile(got(x, "during"), 0.95), ".1f", " ms"),
        row("series_get during: max", lambda x: max(got(x, "during")), ".1f", " ms"),
        row(f"series_get after ({args.after} GETs): median", lambda x: pc.median(got(x, "after")), ".1f", " ms"),
        row("series_get after: p95", lambda x: pc.percentile(got(x, "after"), 0.95), ".1f", " ms"),
        row("server peak VmRSS", lambda x: x["rss_mib"], ".0f", " MiB"),
        row("server VmHWM", lambda x: x["hwm_mib"], ".0f", " MiB"),
        row("server process CPU (not PostgreSQL's)", lambda x: x["server_cpu_s"], ".1f", " s"),
    ]
    print(stores.table(f"series_get during and after a {args.attempts:,}-attempt series", rows))
    print(f"load avg at the end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")


if __name__ == "__main__":
    main()
