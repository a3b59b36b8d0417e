"""A series of 1,000 / 10,000 / 100,000 attempts through a real server process, on an instant simulator.

For each size: writes the tiny project (bench/perf/perf_common.py: one llm node, one `contains` check; cases × 20
repeats) into bench/out/scale/<n>, starts `python -m aqven serve --root DIR` (AQVEN_SIM_LATENCY_SCALE=0), reads
its port from DIR/.aqven/server.json, starts the series with POST /api/series and, while it runs, every
--poll seconds times one GET /api/series/{id} (no long-poll) and reads the server's VmRSS/VmHWM from
/proc/PID/status (a GET blocks the server's event loop while it builds its answer, so the client waits at least
4 × the last GET's latency before the next one, keeping GETs to ≤ 20% of the time). A size that has not ended after
--limit-min minutes is cancelled (its running attempts finish) and reported as such. After the end it times
--after more GETs, reads the database size (main file + WAL) and stops the
server (SIGTERM to the process it started). Prints one row per size and how each figure grows.

    .venv/bin/python bench/perf/scale.py [--sizes 1000,10000,100000] [--poll 2] [--after 20] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import perf_common as pc

OUT = Path(__file__).resolve().parents[1] / "out"  # bench/out
TICK = os.sysconf("SC_CLK_TCK")


def proc_status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])  # kB
    except OSError:
        pass
    return out


def proc_cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return 0.0


TOKENS: dict[int, str] = {}  # port -> the token of the server there (start_server reads it from server.json)


def request(port: int, method: str, path: str, body: Any = None, timeout: float = 300) -> tuple[float, Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"content-type": "application/json", "authorization": f"Bearer {TOKENS.get(port, '')}"}
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method, headers=headers)
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        payload = json.loads(resp.read())
    return (time.perf_counter() - t) * 1000, payload


WARM_S: dict[int, float] = {}  # port -> seconds from the server's first health answer to its warm one


def start_server(root: Path) -> tuple[subprocess.Popen[bytes], int]:
    env = {**os.environ, "AQVEN_SIM_LATENCY_SCALE": "0"}
    log = open(root / "server.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "aqven", "serve", "--root", str(root)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=str(root),
    )
    info = root / ".aqven" / "server.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: see {root / 'server.log'}")
        try:
            data = json.loads(info.read_text())
            port = int(data["port"])
            TOKENS[port] = str(data["token"])
            request(port, "GET", "/api/health", timeout=5)
            # As the CLI does after starting a server (lifecycle.wait_warm): wait until it loaded the project.
            started = time.monotonic()
            while request(port, "GET", "/api/health", timeout=5)[1].get("warm") == "no":
                if time.monotonic() - started > 60:
                    break
                time.sleep(0.05)
            WARM_S[port] = time.monotonic() - started
            return proc, port
        except (OSError, ValueError, KeyError):
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("the server did not answer /api/health in 120 s")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def db_bytes(root: Path) -> tuple[int, int]:
    base = root / ".aqven" / "aqven.sqlite"
    wal = base.with_name(base.name + "-wal")
    return base.stat().st_size, (wal.stat().st_size if wal.exists() else 0)


class MemSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_rss_kb = 0
        self.hwm_kb = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            st = proc_status(self.pid)
            self.peak_rss_kb = max(self.peak_rss_kb, st.get("VmRSS", 0))
            self.hwm_kb = max(self.hwm_kb, st.get("VmHWM", 0))
            self.stop.wait(0.5)


def run_size(n: int, *, poll_s: float, after: int, keep: bool, limit_s: float) -> dict[str, Any]:
    root = OUT / "scale" / str(n)
    shutil.rmtree(root, ignore_errors=True)
    cases, repeats = pc.split_attempts(n)
    pc.write_tiny_project(root, cases=cases)
    proc, port = start_server(root)
    sampler = MemSampler(proc.pid)
    sampler.start()
    idle_hwm_kb = proc_status(proc.pid).get("VmHWM", 0)
    cpu0 = proc_cpu_s(proc.pid)
    result: dict[str, Any] = {"attempts": n, "cases": cases, "repeats": repeats, "idle_hwm_mib": idle_hwm_kb / 1024}
    try:
        body = {"experiment_id": pc.EXPERIMENT, "on": "dev", "cases": cases, "repeats": repeats, "simulate": True}
        started = time.perf_counter()
        start_ms, out = request(port, "POST", "/api/series", body)
        sid = out["series"]["series_id"]
        result["start_ms"] = start_ms
        during: list[tuple[float, int, float]] = []  # (elapsed s, done, ms)
        status = "running"
        done = 0
        while True:
            ms, state = request(port, "GET", f"/api/series/{sid}")
            status, done = state["status"], state["progress"]["done"]
            during.append((time.perf_counter() - started, done, ms))
            if status in ("done", "failed", "cancelled", "awaiting_approval"):
                break
            if time.perf_counter() - started > limit_s:
                result["stopped_early"] = True
                break
            if len(during) % 10 == 1:
                rate = done / max(time.perf_counter() - started, 1e-9)
                print(
                    f"  [{n}] {time.perf_counter() - started:7.1f} s  done {done:>7}  {rate:6.1f}/s  "
                    f"get {ms:8.1f} ms  rss {sampler.peak_rss_kb / 1024:6.0f} MiB",
                    flush=True,
                )
            # A GET blocks the server's event loop while it builds the snapshot: keep GETs to ≤ 20% of the time.
            time.sleep(max(poll_s, 4 * ms / 1000))
        if result.get("stopped_early"):
            request(port, "POST", f"/api/series/{sid}/cancel", {"reason": "bench time limit"})
            while status not in ("done", "cancelled", "failed"):
                time.sleep(1)
                state = request(port, "GET", f"/api/series/{sid}")[1]
                status, done = state["status"], state["progress"]["done"]
        wall = time.perf_counter() - started
        cpu_s = proc_cpu_s(proc.pid) - cpu0
        result.update(status=status, done=done, wall_s=wall, per_s=done / wall, server_cpu_s=cpu_s)
        after_ms = [request(port, "GET", f"/api/series/{sid}")[0] for _ in range(after)]
        main_b, wal_b = db_bytes(root)
        lat = [m for _t, _d, m in during[:-1]] or [during[-1][2]]
        half = [m for t, _d, m in during[:-1] if t >= wall / 2] or lat
        result.update(
            get_during_median_ms=pc.median(lat),
            get_during_p95_ms=pc.percentile(lat, 0.95),
            get_during_max_ms=max(lat),
            get_second_half_median_ms=pc.median(half),
            get_after_median_ms=pc.median(after_ms) if after_ms else None,
            get_after_p95_ms=pc.percentile(after_ms, 0.95) if after_ms else None,
            gets_during=len(lat),
            db_mib=main_b / 2**20,
            wal_mib=wal_b / 2**20,
            db_bytes_per_attempt=(main_b + wal_b) / max(done, 1),
        )
        curve = [(round(t, 1), d, round(m, 1)) for t, d, m in during]
        result["curve"] = curve
    finally:
        st = proc_status(proc.pid)
        sampler.stop.set()
        sampler.join()
        result["hwm_mib"] = max(sampler.hwm_kb, st.get("VmHWM", 0)) / 1024
        result["rss_end_mib"] = st.get("VmRSS", 0) / 1024
        stop_server(proc)
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--poll", type=float, default=2.0, help="seconds between GETs while the series runs")
    parser.add_argument("--after", type=int, default=20, help="GETs timed after the series ended")
    parser.add_argument("--limit-min", type=float, default=60.0, help="cancel a size that runs longer than this")
    parser.add_argument("--keep", action="store_true", help="keep bench/out/scale/<n> (project + database)")
    parser.add_argument("--json", type=Path, default=OUT / "scale.json")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        print(f"== {n} attempts (load avg {os.getloadavg()[0]:.2f})", flush=True)
        r = run_size(n, poll_s=args.poll, after=args.after, keep=args.keep, limit_s=args.limit_min * 60)
        rows.append(r)
        early = " (cancelled at the time limit)" if r.get("stopped_early") else ""
        print(
            f"  {r['status']}{early}: {r['done']} attempts in {r['wall_s']:.1f} s = {r['per_s']:.1f}/s, server CPU "
            f"{r['server_cpu_s']:.1f} s ({r['server_cpu_s'] / max(r['done'], 1) * 1000:.2f} ms/attempt); "
            f"POST /api/series {r['start_ms']:.0f} ms; "
            f"VmHWM {r['hwm_mib']:.0f} MiB (idle {r['idle_hwm_mib']:.0f}); db {r['db_mib']:.1f} MiB + wal "
            f"{r['wal_mib']:.1f} MiB ({r['db_bytes_per_attempt']:.0f} B/attempt); series_get during: median "
            f"{r['get_during_median_ms']:.1f} ms p95 {r['get_during_p95_ms']:.1f} ms max {r['get_during_max_ms']:.1f}"
            f" ms (n={r['gets_during']}); after: median {r['get_after_median_ms']:.1f} ms p95 "
            f"{r['get_after_p95_ms']:.1f} ms",
            flush=True,
        )
        args.json.write_text(json.dumps(rows, indent=1))
    print()
    print(
        "| attempts | wall s | attempts/s | server CPU ms/attempt | VmHWM MiB | db+wal MiB | B/attempt "
        "| get during median/p95 ms | get after median/p95 ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        label = f"{r['done']:,} of {r['attempts']:,}" if r.get("stopped_early") else f"{r['done']:,}"
        print(
            f"| {label} | {r['wall_s']:.0f} | {r['per_s']:.1f} | {r['server_cpu_s'] / max(r['done'], 1) * 1000:.2f} "
            f"| {r['hwm_mib']:.0f} | {r['db_mib'] + r['wal_mib']:.1f} | {r['db_bytes_per_attempt']:.0f} "
            f"| {r['get_during_median_ms']:.0f} / {r['get_during_p95_ms']:.0f} "
            f"| {r['get_after_median_ms']:.0f} / {r['get_after_p95_ms']:.0f} |"
        )
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        k = b["done"] / max(a["done"], 1)
        print(
            f"\ngrowth {a['done']:,} → {b['done']:,} attempts (×{k:.0f}): VmHWM ×{b['hwm_mib'] / a['hwm_mib']:.2f}, "
            f"database ×{(b['db_mib'] + b['wal_mib']) / (a['db_mib'] + a['wal_mib']):.1f}, get after "
            f"×{b['get_after_median_ms'] / a['get_after_median_ms']:.1f}, server CPU per attempt "
            f"×{(b['server_cpu_s'] / b['done']) / (a['server_cpu_s'] / a['done']):.2f}"
        )


if __name__ == "__main__":
    main()
