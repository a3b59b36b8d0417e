"""Kill soak across hosts (issue 31): a series on `aqven worker`s of three test hosts, while the soak SIGKILLs
workers and the server at random, pulls one worker host's cable for 20 s and crashes PostgreSQL once.

The hosts are network namespaces on a switch (tests/support/netns.py, tests/support/cluster_hosts.py): PostgreSQL
(a private durable cluster, fsync on) on `db`, `aqven serve --store postgresql://…@10.231.N.2/… --cluster` on
`server`, an `aqven worker` on each of `w1`, `w2`, `w3`; this process is the observer on the switch and serves the
fake provider (tests/support/fake_provider.py) there. Where namespaces cannot be made it says so and runs the same
on loopback processes. The project is the reliability project of bench/soak/soak_faults.py, on a real (fake) provider:
`providers: {openrouter: {rpm: RPM}}` in its aqven.yaml, answers after `--latency` s, right or wrong by a hash of
the question (so an attempt's outcome depends on its case only), each answer costing $0.001.

Events, in a random order with random gaps (`--min-gap`, `--max-gap`): `--kills` SIGKILLs, each of the server or
of one worker (its whole `aqven worker`: started again a second later, a new executor); one cut of a worker host's
link for `--cut` s (its worker fences itself: `aqven worker` starts it again once the cable is back); one
`pg_ctl restart -m immediate` of PostgreSQL. Then the series runs to its end. Checked and printed:

* lost: every attempt seen done before an event is done at the end with the same run, outcome, value and cost;
* counted twice: every attempt done with one counted run, no more runs than attempts and re-runs, per case and
  seed no more runs than 1 + re-runs; the series' spend within one attempt's reserve of its runs' costs;
* spend ≤ cap + one attempt's reserve;
* the verdict (verdict, reason, text, each cell's estimate and interval) equals an unkilled run's with the same
  seed (in-process on SQLite, against a fake provider of its own, with the same rpm);
* the largest number of requests the fake provider saw in any 60 s sliding window, against the rpm.

PASS needs all of them (and every event done before the series ended).

    .venv/bin/python bench/soak/cluster_hosts.py [--cases 200] [--repeats 2] [--rpm 240] [--kills 6] [--seed 11]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from support.cluster_hosts import ENDED, Hosts, Worker, rows
from support.fake_provider import FakeProvider, FakeReply, RecordedRequest
from support.fault_soak import EXPERIMENT, prompt_of, server_env, write_project
from support.kill_soak import baseline as unkilled_series

COST = "0.0010"
WINDOW_S = 60.0
API_KEY = "dummy-key-for-the-fake-provider"


class SoakProvider(FakeProvider):
    """Answers every request after `latency` s: right, or wrong for 10% of the questions (by a hash of the prompt)."""

    def __init__(self, host: str, latency: float) -> None:
        super().__init__(host=host)
        self.latency = latency
        self._local = threading.local()

    def __enter__(self) -> SoakProvider:
        super().__enter__()
        return self

    def _record(self, req: RecordedRequest) -> None:
        super()._record(req)
        self._local.body = req.body

    def _next(self) -> FakeReply:
        prompt = prompt_of(getattr(self._local, "body", None))
        wrong = int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16) % 10 == 0
        answer = {"answer": "wrong" if wrong else "right"}
        return FakeReply("slow", output=answer, cost=COST, delay_s=self.latency)

    def arrivals(self) -> list[float]:
        with self._lock:
            return sorted(r.at for r in self.requests if r.path.endswith("/chat/completions"))


def busiest_window(times: list[float], window: float = WINDOW_S) -> tuple[int, float]:
    """The most arrivals in any `window` s (and where it starts, as an arrival time)."""
    best, at, lo = 0, 0.0, 0
    for hi, t in enumerate(times):
        while times[lo] <= t - window:
            lo += 1
        if hi - lo + 1 > best:
            best, at = hi - lo + 1, times[lo]
    return best, at


def write(root: Path, *, cases: int, repeats: int, concurrency: int, rpm: int, cap: str) -> None:
    write_project(root, cases=cases, repeats=repeats, concurrency=concurrency, cap_usd=cap)
    config = root / "aqven.yaml"
    config.write_text(config.read_text() + f"providers:\n  openrouter: {{rpm: {rpm}}}\n")


async def _baseline(root: Path, seed: int, limit_s: float) -> dict[str, Any]:
    """The unkilled series (tests/support/kill_soak.py), each attempt's outcome and value by case, repeat, variant."""
    out = await unkilled_series(root, seed=seed, limit_s=limit_s, simulate=False)
    return {"state": out["state"], "attempts": {k: (v[1], v[2]) for k, v in out["attempts"].items()}}


def baseline(root: Path, *, seed: int, latency: float, limit_s: float) -> tuple[dict[str, Any], float]:
    """The same series unkilled, in this process on SQLite, against a fake provider of its own; and its wall time."""
    keys = ("AQVEN_OPENROUTER_BASE_URL", "OPENROUTER_API_KEY", "AQVEN_PRICES_FILE", "AQVEN_STORE", "AQVEN_CLUSTER")
    saved = {k: os.environ.get(k) for k in keys}
    began = time.monotonic()
    with SoakProvider("127.0.0.1", latency) as fp:
        os.environ.update(
            AQVEN_OPENROUTER_BASE_URL=fp.base_url,
            OPENROUTER_API_KEY=API_KEY,
            AQVEN_PRICES_FILE=str(root.parent / "no-prices.json"),
        )
        os.environ.pop("AQVEN_STORE", None)
        os.environ.pop("AQVEN_CLUSTER", None)
        try:
            return asyncio.run(_baseline(root, seed, limit_s)), time.monotonic() - began
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def same_verdict(a: dict[str, Any], b: dict[str, Any]) -> bool:
    cells = [[(c.get("estimate"), c.get("low"), c.get("high")) for c in v.get("cells", [])] for v in (a, b)]
    return all(a.get(k) == b.get(k) for k in ("verdict", "reason", "text")) and cells[0] == cells[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--rpm", type=int, default=240, help="the provider's rpm in aqven.yaml")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds the fake provider takes to answer")
    parser.add_argument("--kills", type=int, default=6, help="SIGKILLs, of the server or of a worker")
    parser.add_argument("--cut", type=float, default=20.0, help="seconds one worker host's link is cut")
    parser.add_argument("--min-gap", type=float, default=3.0)
    parser.add_argument("--max-gap", type=float, default=9.0)
    parser.add_argument("--seed", type=int, default=11, help="the series seed")
    parser.add_argument("--rng", type=int, default=None, help="seed of the events' order and moments")
    parser.add_argument("--cap", default="5.00", help="the project's spend cap (USD)")
    parser.add_argument("--limit", type=float, default=900.0, help="seconds for the killed series")
    args = parser.parse_args()
    rng_seed = args.rng if args.rng is not None else random.randrange(1 << 30)
    rng = random.Random(rng_seed)
    ok = True
    with tempfile.TemporaryDirectory(prefix="aqven-soak-hosts-") as tmp:
        work = Path(tmp)
        root = work / "killed"
        write(root, cases=args.cases, repeats=args.repeats, concurrency=args.concurrency, rpm=args.rpm, cap=args.cap)
        base_root = work / "unkilled" / "project"
        shutil.copytree(root, base_root)
        print(f"unkilled series first (in-process, SQLite, rpm {args.rpm})…", flush=True)
        base, base_wall = baseline(base_root, seed=args.seed, latency=args.latency, limit_s=args.limit)
        print(f"  done in {base_wall:.1f} s: {base['state']['status']}", flush=True)
        with Hosts(work, workers=3, durable=True) as hosts, SoakProvider(hosts.net.observer, args.latency) as fp:
            report = soak(hosts, fp, root, args, rng)
    base_verdict = base["state"].get("verdict") or {}
    differ = [
        f"{a['case_name']} rep {a['rep']}: {a['outcome']} {a['error_code']} ({(a['error_message'] or '')[:160]}),"
        f" unkilled {base['attempts'].get(key)}"
        for a in report["rows"]
        if base["attempts"].get(key := (a["case_name"], a["rep"], a["variant_id"]), (None,))[0] != a["outcome"]
    ]
    verdict = report["verdict"]
    lines = [
        f"hosts: {report['hosts']}; events order seed (--rng) {rng_seed}",
        f"series of {report['attempts']} attempts, status {report['status']}, wall {report['wall']:.1f} s "
        f"(unkilled: {base_wall:.1f} s)",
        *report["events"],
        f"finished attempts lost: {len(report['lost'])}; counted twice: {len(report['twice'])}",
        *(report["lost"] + report["twice"])[:20],
        f"spend: series {report['spend']}, attempts {report['attempt_spend']}, runs {report['run_spend']}, provider"
        f" billed {report['billed']} ({report['answers']} answers); reserve (one attempt) {report['reserve']}; "
        f"cap {args.cap}",
        f"spend ≤ cap + reserve: {report['spend_ok']}; attempts within one reserve of runs: {report['runs_ok']}",
        f"verdict {verdict.get('verdict')} ({verdict.get('reason')}); unkilled {base_verdict.get('verdict')} "
        f"({base_verdict.get('reason')}); same: {same_verdict(verdict, base_verdict)}",
        f"verdict text: {verdict.get('text')}",
        f"attempt outcomes {dict(report['outcomes'])}; differing from the unkilled run's: {len(differ)}",
        *differ[:10],
        f"provider requests: {report['requests']}; most in any {WINDOW_S:.0f} s window: {report['window']} "
        f"(from {report['window_at']:.0f} s after the first), rpm {args.rpm}: "
        f"{'within' if report['window'] <= args.rpm else 'OVER'}",
        f"re-asked (a run's model asked again after a kill): {report['reasked']}",
    ]
    print("\n".join(lines))
    failed = [
        name
        for name, good in (
            ("status", report["status"] == "done"),
            ("events", report["events_done"] == args.kills + 2),
            ("lost", not report["lost"]),
            ("counted twice", not report["twice"] and report["runs_ok"]),
            ("spend", report["spend_ok"]),
            ("verdict", same_verdict(verdict, base_verdict)),
            ("rpm", report["window"] <= args.rpm),
        )
        if not good
    ]
    ok = not failed
    print("PASS" if ok else f"FAIL ({', '.join(failed)})")
    sys.exit(0 if ok else 1)


def soak(hosts: Hosts, fp: SoakProvider, root: Path, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    dsn = hosts.database("aqven_soak_hosts")

    def q(sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        return rows(dsn, sql, params)

    env = server_env(
        AQVEN_OPENROUTER_BASE_URL=fp.base_url,
        OPENROUTER_API_KEY=API_KEY,
        AQVEN_PRICES_FILE=str(root.parent / "no-prices.json"),
    )
    env.pop("AQVEN_STORE", None)
    server = hosts.server(root, env, dsn)
    slots = max(1, -(-args.concurrency // 2))  # two workers can still hold the whole concurrency
    workers: dict[str, Worker] = {n: hosts.worker(n, root, env, dsn, slots=slots) for n in hosts.worker_hosts}
    deadline = time.monotonic() + 90
    while len(q("SELECT id FROM workers WHERE state='live'")) < 3:
        if time.monotonic() > deadline:
            raise SystemExit("the workers did not come up: " + json.dumps({n: w.tail(800) for n, w in workers.items()}))
        time.sleep(0.2)
    body = {"experiment_id": EXPERIMENT, "on": "dev", "seed": args.seed, "client_op_id": "soak-hosts"}
    sid = server.post("/api/series", body)["series"]["series_id"]
    began = time.monotonic()

    seen: dict[int, dict[str, Any]] = {}

    def look() -> bool:
        """Note the attempts done so far; False once the series ended."""
        if q("SELECT status FROM series WHERE id=%s", (sid,))[0]["status"] in ENDED:
            return False
        for a in q("SELECT * FROM attempts WHERE series_id=%s AND status='done'", (sid,)):
            seen.setdefault(a["idx"], a)
        return True

    plan = ["server", "worker"] + [rng.choice(["server", "worker"]) for _ in range(max(0, args.kills - 2))]
    plan = [*plan[: args.kills], "cut", "pg"]
    rng.shuffle(plan)
    events: list[str] = []
    done = 0
    for event in plan:
        gap = rng.uniform(args.min_gap, args.max_gap)
        time.sleep(gap)
        if not look():
            events.append(f"the series ended before event {done + 1} of {len(plan)}")
            break
        at = time.monotonic() - began
        finished = len(seen)
        if event == "server":
            server.kill()
            t = time.monotonic()
            server.start()
            events.append(f"{at:6.1f} s ({finished} done): SIGKILL server; up again in {time.monotonic() - t:.1f} s")
        elif event == "worker":
            name = rng.choice(sorted(workers))
            workers[name].kill()
            time.sleep(1.0)
            workers[name].start()
            events.append(f"{at:6.1f} s ({finished} done): SIGKILL worker {name}; started again")
        elif event == "cut":
            name = rng.choice(sorted(workers))
            log_from = len(workers[name].tail(10**9))
            hosts.worker_hosts[name].cut()
            time.sleep(args.cut)
            hosts.worker_hosts[name].restore()
            said = workers[name].tail(10**9)[log_from:]
            fenced = "no heartbeat reached the store" in said
            events.append(
                f"{at:6.1f} s ({finished} done): cut worker host {name}'s link for {args.cut:.0f} s; it fenced itself:"
                f" {fenced}"
            )
        else:
            t = time.monotonic()
            hosts.pg.restart_immediate()
            events.append(
                f"{at:6.1f} s ({finished} done): pg_ctl restart -m immediate, back in {time.monotonic() - t:.1f} s"
            )
        done += 1
    state = server.wait_series(sid, limit_s=max(30.0, began + args.limit - time.monotonic()))
    wall = time.monotonic() - began
    again = server.post("/api/series", body)
    if again["series"]["series_id"] != sid:
        events.append(f"the same client_op_id started another series: {again['series']['series_id']}")

    attempts = q("SELECT * FROM attempts WHERE series_id=%s ORDER BY idx", (sid,))
    runs = q("SELECT * FROM runs WHERE series_id=%s", (sid,))
    final = {a["idx"]: a for a in attempts}
    lost: list[str] = []
    keys = ("status", "run_id", "outcome", "value", "cost_usd")
    for idx, before in seen.items():
        after = final.get(idx)
        if after is None or any(after[k] != before[k] for k in keys):
            lost.append(
                f"attempt {idx}: before {[before[k] for k in keys]}, at the end {after and [after[k] for k in keys]}"
            )
    twice: list[str] = []
    by_key: dict[tuple[str, int], int] = Counter()
    for r in runs:
        req = json.loads(r["request"])
        by_key[(req["case_name"], int(req["seed"]))] += 1
    run_ids = {r["id"]: r for r in runs}
    for a in attempts:
        counted = run_ids.get(a["run_id"] or "")
        if a["status"] != "done" or (a["outcome"] != "infra" and counted is None):
            twice.append(f"attempt {a['idx']}: status {a['status']}, outcome {a['outcome']}, run {a['run_id']}")
        if by_key[(a["case_name"], int(a["seed"]))] > 1 + a["reruns"]:
            twice.append(f"attempt {a['idx']}: {by_key[(a['case_name'], int(a['seed']))]} runs, {a['reruns']} re-runs")
    if len(runs) > len(attempts) + sum(a["reruns"] for a in attempts):
        twice.append(f"{len(runs)} runs for {len(attempts)} attempts")
    costs = [Decimal(a["cost_usd"] or "0") for a in attempts]
    reserve = max(costs, default=Decimal(0))
    attempt_spend = sum(costs, Decimal(0))
    run_spend = sum((Decimal(r["cost_usd"] or "0") for r in runs), Decimal(0))
    spend = Decimal(str((state.get("spend") or {}).get("usd") or attempt_spend))
    asked = q(
        "SELECT e.run_id, COUNT(*) AS n FROM events e JOIN runs r ON r.id = e.run_id WHERE r.series_id=%s"
        " AND e.kind='model_request' GROUP BY e.run_id",
        (sid,),
    )
    times = fp.arrivals()
    window, window_at = busiest_window(times)
    return {
        "hosts": f"{hosts.net.kind}"
        + (f", subnet {getattr(hosts.net, 'subnet', '')}.0/24" if hosts.namespaces else ""),
        "attempts": len(attempts),
        "status": state["status"],
        "wall": wall,
        "events": events,
        "events_done": done,
        "lost": lost,
        "twice": twice,
        "spend": spend,
        "attempt_spend": attempt_spend,
        "run_spend": run_spend,
        "billed": Decimal(COST) * len(times),
        "answers": len(times),
        "reserve": reserve,
        "spend_ok": spend <= Decimal(args.cap) + reserve,
        "runs_ok": abs(attempt_spend - run_spend) <= reserve,
        "verdict": state.get("verdict") or {},
        "outcomes": Counter(a["outcome"] for a in attempts),
        "rows": attempts,
        "requests": len(times),
        "window": window,
        "window_at": window_at - (times[0] if times else 0.0),
        "reasked": sum(1 for r in asked if r["n"] > 1),
    }


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
