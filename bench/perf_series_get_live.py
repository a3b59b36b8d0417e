"""series_get during and after a 100,000-attempt series on a real server, without running 100,000 attempts first.

A 100,000-attempt `bench/scale.py` run takes a quiet core for 16 minutes. This one builds the series the way
bench/perf_series_get.py does (the tiny project, prepare_series + SeriesStore.create + the rest of its rows, then
all but the last --live attempts marked done with what a finished attempt holds), starts
`python -m aqven serve` on that project, which resumes the series and runs its last --live attempts for real
(instant simulator), and meanwhile times GET /api/series/{id} (no long-poll) every --poll seconds; then --after
more GETs once the series ended. Server memory from /proc/PID/status (VmRSS sampled every 0.5 s, VmHWM at the
end). Prints the load average at the start and at the end.

    .venv/bin/python bench/perf_series_get_live.py [--attempts 100000] [--live 5000] [--poll 0.5] [--after 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

import perf_common as pc
import scale


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--live", type=int, default=5_000, help="attempts the server runs while it is timed")
    parser.add_argument("--poll", type=float, default=0.5)
    parser.add_argument("--after", type=int, default=20)
    args = parser.parse_args()
    root = scale.OUT / "series_get_live"
    shutil.rmtree(root, ignore_errors=True)
    load0 = os.getloadavg()
    print(f"load avg at the start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)
    t = time.perf_counter()
    sid = build(root, args.attempts, args.live)
    print(f"built {args.attempts:,} attempts ({args.attempts - args.live:,} done) in {time.perf_counter() - t:.1f} s")
    proc, port = scale.start_server(root)
    sampler = scale.MemSampler(proc.pid)
    sampler.start()
    during: list[float] = []
    result: dict[str, Any] = {}
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
            time.sleep(args.poll)
        wall = time.perf_counter() - started
        after = [scale.request(port, "GET", f"/api/series/{sid}")[0] for _ in range(args.after)]
        result = {
            "status": state["status"],
            "done": state["progress"]["done"],
            "wall_s": wall,
            "during": during,
            "after": after,
        }
    finally:
        st = scale.proc_status(proc.pid)
        sampler.stop.set()
        sampler.join()
        hwm = max(sampler.hwm_kb, st.get("VmHWM", 0)) / 1024
        rss = sampler.peak_rss_kb / 1024
        scale.stop_server(proc)
    load1 = os.getloadavg()
    during, after = result["during"] or [0.0], result["after"] or [0.0]
    print(
        f"\n{result['status']}: {result['done']:,} attempts; the last {args.live:,} ran in {result['wall_s']:.1f} s "
        f"({args.live / result['wall_s']:.0f}/s)\n"
        f"series_get during ({len(result['during'])} GETs): median {pc.median(during):.1f} ms, p95 "
        f"{pc.percentile(during, 0.95):.1f} ms, max {max(during):.1f} ms\n"
        f"series_get after ({len(result['after'])} GETs): median {pc.median(after):.1f} ms, p95 "
        f"{pc.percentile(after, 0.95):.1f} ms\n"
        f"server peak VmRSS {rss:.0f} MiB, VmHWM {hwm:.0f} MiB\n"
        f"load avg at the end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}"
    )


if __name__ == "__main__":
    main()
