"""Load: one real project server, 4 series and 16 clients at once; 50 simultaneous starts of one client_op_id.

The clients long-poll series_get, read dev case rows, list the series' runs and read runs and their
events while the series run. Everything must finish within a bound (no deadlock), with no 5xx and no
failed request. Then 50 POST /api/series with the same client_op_id, released together, make one series.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from support.fault_soak import EXPERIMENT, HttpError, http, live_server, server_env, write_project
from support.store_access import one

ENDED = ("done", "failed", "cancelled")
SERIES = 4
CLIENTS = 16
STARTS = 50
LIMIT_S = 90.0


def test_four_series_sixteen_clients_then_fifty_identical_starts(tmp_path: Path) -> None:
    root = tmp_path / "load"
    write_project(root, cases=30, repeats=1, concurrency=8, simulator="seeded", sim_latency_s=0.05)
    env = server_env(AQVEN_SIM_LATENCY_SCALE="1", AQVEN_PRICES_FILE=str(tmp_path / "no-prices.json"))
    with live_server(root, env) as server:
        port = server.port
        ids = [
            server.post("/api/series", {"experiment_id": EXPERIMENT, "simulate": True, "seed": s})["series"][
                "series_id"
            ]
            for s in range(SERIES)
        ]
        assert len(set(ids)) == SERIES
        statuses: Counter[int] = Counter()
        problems: list[str] = []
        slowest = [0.0]
        lock = threading.Lock()
        stop = threading.Event()
        deadline = time.monotonic() + LIMIT_S

        def call(path: str) -> Any:
            t = time.monotonic()
            try:
                out = http(port, "GET", path, timeout=60)
                code = 200
            except HttpError as exc:
                out, code = None, exc.status
                with lock:
                    problems.append(f"GET {path}: {exc.status} {exc.body}")
            except OSError as exc:
                out, code = None, -1
                with lock:
                    problems.append(f"GET {path}: {type(exc).__name__}: {exc}")
            with lock:
                statuses[code] += 1
                slowest[0] = max(slowest[0], time.monotonic() - t)
            return out

        def client(i: int) -> None:
            sid = ids[i % SERIES]
            n = 0
            while not stop.is_set() and time.monotonic() < deadline:
                n += 1
                kind = (i + n) % 4
                if kind == 0:
                    state = call(f"/api/series/{sid}?wait_seconds=1")
                    if state and state["status"] in ENDED:
                        sid = ids[(ids.index(sid) + 1) % SERIES]
                elif kind == 1:
                    call(f"/api/series/{sid}?include_cases=true")
                elif kind == 2:
                    runs = call(f"/api/runs?series_id={sid}&limit=20") or []
                    if runs:
                        rid = runs[n % len(runs)]["id"]
                        call(f"/api/runs/{rid}")
                        call(f"/api/runs/{rid}/events?limit=50")
                else:
                    call("/api/series?limit=10")

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
        started = time.monotonic()
        for t in threads:
            t.start()
        finals: dict[str, Any] = {}
        while time.monotonic() < deadline and len(finals) < SERIES:
            for sid in ids:
                if sid not in finals:
                    state = http(port, "GET", f"/api/series/{sid}?wait_seconds=2", timeout=60)
                    if state["status"] in ENDED:
                        finals[sid] = state
        stop.set()
        for t in threads:
            t.join(timeout=70)
        wall = time.monotonic() - started
        assert not any(t.is_alive() for t in threads), "a client is stuck"
        print(
            f"\n{SERIES} series × 30 attempts, {CLIENTS} clients: {sum(statuses.values())} requests in {wall:.1f} s, "
            f"statuses {dict(statuses)}, slowest {slowest[0]:.2f} s"
        )
        assert len(finals) == SERIES, "not every series finished in time"
        assert all(s["status"] == "done" and s["progress"]["done"] == 30 for s in finals.values())
        assert problems == []
        assert not [c for c in statuses if c >= 500 or c < 0]

        # 50 simultaneous series_start with one client_op_id make exactly one series
        barrier = threading.Barrier(STARTS)
        answers: list[Any] = []

        def start() -> None:
            body = {"experiment_id": EXPERIMENT, "simulate": True, "seed": 99, "client_op_id": "same-op"}
            barrier.wait()
            try:
                out = http(port, "POST", "/api/series", body, timeout=60)
            except (HttpError, OSError) as exc:
                out = exc
            with lock:
                answers.append(out)

        t0 = time.monotonic()
        starters = [threading.Thread(target=start, daemon=True) for _ in range(STARTS)]
        for t in starters:
            t.start()
        for t in starters:
            t.join(timeout=60)
        print(f"{STARTS} identical starts answered in {time.monotonic() - t0:.2f} s")
        assert len(answers) == STARTS
        failed = [a for a in answers if not isinstance(a, dict)]
        assert failed == []
        made = {a["series"]["series_id"] for a in answers}
        assert len(made) == 1
        assert sum(a["created"] for a in answers) == 1
        (count,) = one(root, "SELECT COUNT(*) FROM series WHERE client_op_id='same-op'")
        (total,) = one(root, "SELECT COUNT(*) FROM series")
        assert count == 1 and total == SERIES + 1
