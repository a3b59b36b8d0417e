"""Page load time of Studio's series page for a series of 10,000 attempts, in headless chromium.

Builds the showcase project, fixes a real series of reply_noninferior_mistral on dev (250 working cases × 20
repeats × 2 variants = 10,000 attempts) through the real start path, fills its attempts with simulated outcomes
straight in the database (running 10,000 attempts would take minutes and measures the scheduler, not the page),
decides it with the real finalize, then spawns the project server and loads #/series/ID several times: from
navigation until the matrix, the interval plot, the verdict and the case rows are drawn (then the latency and
cost table, which its own request reads).

    .venv/bin/python bench/perf/studio_series_page.py [--loads 5] [--attempts 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ["AQVEN_SIMULATE"] = "1"

from aqven.project.init import init_project
from aqven.research.series.end import finalize
from aqven.research.series.fill import write_missing
from aqven.research.series.start import SeriesStartBody, prepare_series
from aqven.server.service import ProjectService

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def build_series(root: Path, attempts: int) -> str:
    """A finished dev series with `attempts` attempts (20 repeats × 2 variants × attempts/40 cases)."""
    exp = root / "experiments" / "reply_noninferior_mistral" / "experiment.yaml"
    exp.write_text(exp.read_text().replace("  tags: [refund]\n", ""))  # all 307 working cases, not only refunds
    cases = attempts // 40
    svc = ProjectService(root)
    fields = prepare_series(
        svc.workspace(),
        svc.engine(),
        SeriesStartBody(
            experiment_id="reply_noninferior_mistral", on="dev", cases=cases, repeats=20, cap_usd="50.00", simulate=True
        ),
    )
    sid, _ = svc.series.store.create(**fields)
    write_missing(svc.series.store, sid)  # the rows after the first ones, as the server writes them after a start
    rng = random.Random(7)
    t0 = datetime.now(UTC) - timedelta(minutes=30)
    rows = []
    for a in svc.series.store.attempts(sid):
        rate = 0.97 if a.variant_id == "gpt" else 0.95
        ok = rng.random() < rate
        end = t0 + timedelta(seconds=a.idx * 0.15)
        rows.append(
            (
                "pass" if ok else "fail",
                1.0 if ok else 0.0,
                None if ok else "CHECK_FAILED",
                None if ok else "promises: an unkeepable promise",
                json.dumps([{"check_id": "promises", "passed": ok}]),
                f"{rng.uniform(0.0003, 0.0009):.7f}",
                end.isoformat(timespec="milliseconds"),
                a.idx * 0.15,
                sid,
                a.idx,
            )
        )
    with svc.db.transaction() as cur:
        cur.executemany(
            "UPDATE attempts SET status='done', outcome=?, value=?, error_code=?, error_message=?, checks=?,"
            " cost_usd=?, ended_at=?, active_at_end=? WHERE series_id=? AND idx=?",
            rows,
        )
    finalize(svc.workspace(), svc.series.store, svc.runs, sid)
    status = svc.series.store.get(sid).status
    svc.db.close()
    assert status == "done", status
    return sid


def serve(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "AQVEN_SIM_LATENCY_SCALE": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "aqven", "serve", "--root", str(root)],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            port = json.loads((root / ".aqven" / "server.json").read_text())["port"]
            base = f"http://127.0.0.1:{port}"
            urllib.request.urlopen(base + "/api/health", timeout=2).read()
            return proc, base
        except (OSError, ValueError, KeyError):
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the project server did not start")


def authed(root: Path, url: str, body: object = None) -> urllib.request.Request:
    """A request with the server's token (from .aqven/server.json); a POST when `body` is given."""
    token = json.loads((root / ".aqven" / "server.json").read_text())["token"]
    data = None if body is None else json.dumps(body).encode()
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    return urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--attempts", type=int, default=10_000)
    args = parser.parse_args()
    if not os.path.exists(CHROMIUM):
        sys.exit(f"{CHROMIUM} is missing: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        root = init_project(Path(tmp) / "bench", "lumen")
        t = time.perf_counter()
        sid = build_series(root, args.attempts)
        print(f"built series {sid}: {args.attempts} attempts in {time.perf_counter() - t:.1f} s")
        proc, base = serve(root)
        try:
            t = time.perf_counter()
            with urllib.request.urlopen(authed(root, f"{base}/api/studio/series/{sid}")) as r:
                size = len(r.read())
            print(f"GET /api/studio/series/{sid}: {(time.perf_counter() - t) * 1000:.0f} ms cold, {size // 1024} KiB")
            loads: list[float] = []
            dists: list[float] = []
            fetches: list[float] = []
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                for _ in range(args.loads):
                    context = browser.new_context(viewport={"width": 1280, "height": 800})
                    page = context.new_page()
                    login = json.loads(
                        urllib.request.urlopen(
                            authed(root, f"{base}/api/studio/login-link", {"page": f"series/{sid}"})
                        ).read()
                    )["url"]
                    start = time.perf_counter()
                    page.goto(login)  # logs the context in and lands on the series page
                    page.wait_for_selector("#matrix tbody tr", timeout=60_000)
                    page.wait_for_selector("#verdict[data-provisional='false']")
                    page.wait_for_selector("#cases tbody tr")
                    page.wait_for_selector("svg.plot")
                    loads.append(time.perf_counter() - start)
                    page.wait_for_selector("#dist-table")  # latency and cost p50/p95: read apart, after the page
                    dists.append(time.perf_counter() - start)
                    fetches.append(
                        page.evaluate(
                            "() => performance.getEntriesByType('resource')"
                            ".filter(e => e.name.includes('/api/studio/series/')).map(e => e.duration)[0] || 0"
                        )
                    )
                    rows = page.locator("#cases tbody tr").count()
                    context.close()
                browser.close()
            print(
                f"series page at {args.attempts:,} attempts: median {statistics.median(loads) * 1000:.0f} ms over "
                f"{len(loads)} loads (each: {', '.join(f'{x * 1000:.0f}' for x in loads)} ms; {rows} case rows drawn; "
                f"the series JSON took a median {statistics.median(fetches):.0f} ms of it)"
            )
            print(
                "... with the latency and cost table (p50/p95 per variant):"
                f" median {statistics.median(dists) * 1000:.0f} ms"
            )
        finally:
            proc.terminate()
            proc.wait(timeout=20)


if __name__ == "__main__":
    main()
