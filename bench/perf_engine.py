"""Engine overhead of a series: one llm node on an instant simulator plus one check, N attempts in-process.

Writes a tiny project into a temp folder (bench/perf_common.py: its own simulator, a one-node flow, an experiment
with one built-in `contains` check), starts the experiment's series through ProjectService/SeriesService (the
server's code path, without HTTP) and waits for its end. Three passes, each in a fresh project:

1. throughput: N attempts at the project's concurrency (8): attempts/s, CPU s/attempt, and the wall time spent
   inside RunStore/SeriesStore methods (they are synchronous, so that time is exclusive);
2. latency: a sequential sample (concurrency 1): median and p95 of one attempt, from claim to finish
   (attempts.started_at → ended_at) and of its run alone (runs.started_at → ended_at);
3. profile: N attempts again under cProfile; tottime is grouped by where the code lives (a built-in such as
   sqlite3's execute is charged to the group of the code that called it): database (sqlite3 + aqven.store),
   pydantic-ai (pydantic_ai, pydantic_graph, anyio, sniffio, genai_prices), aqven (everything else in
   aqven.*, the project's simulator included), pydantic (validation), asyncio (the event loop), other.

    .venv/bin/python bench/perf_engine.py [--attempts 5000] [--sequential 500] [--profile-attempts 5000] [--no-profile]
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import pstats
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

import perf_common as pc

GROUPS = ("database", "pydantic-ai", "aqven", "pydantic", "asyncio", "other")


# ---- timing the store layer ----------------------------------------------------------------------


class StoreTimer:
    """Wall time spent inside the public methods of RunStore and SeriesStore (outermost call only)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self._depth = 0
        self._undo: list[tuple[type, str, Any]] = []

    def install(self) -> None:
        from aqven.store.runs import RunStore
        from aqven.store.series import SeriesStore

        for cls in (RunStore, SeriesStore):
            for name, fn in list(vars(cls).items()):
                if name.startswith("__") or not callable(fn):
                    continue
                self._undo.append((cls, name, fn))
                setattr(cls, name, self._wrap(fn))

    def uninstall(self) -> None:
        for cls, name, fn in self._undo:
            setattr(cls, name, fn)
        self._undo.clear()

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        timer = self

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if timer._depth:
                return fn(*args, **kwargs)
            timer._depth += 1
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timer.seconds += time.perf_counter() - t
                timer.calls += 1
                timer._depth -= 1

        return wrapped


# ---- attributing profile time ---------------------------------------------------------------------


STDLIB_MARK = "/lib/python3.11/"


def group_of(filename: str, funcname: str) -> str | None:
    """The group of a profiled function, or None when it is charged to its callers (built-ins, stdlib helpers)."""
    f = filename.replace("\\", "/")
    if f == "~":
        return "database" if "sqlite3" in funcname else None
    if "/aqven/store/" in f or f"{STDLIB_MARK}sqlite3/" in f:
        return "database"
    for mark in ("/pydantic_ai/", "/pydantic_graph/", "/anyio/", "/sniffio/", "/genai_prices/", "/opentelemetry/"):
        if mark in f:
            return "pydantic-ai"
    if "/src/aqven/" in f or "/site-packages/aqven/" in f or "/sim/fast.py" in f:
        return "aqven"
    if "/pydantic/" in f or "/pydantic_core/" in f:
        return "pydantic"
    if "/asyncio/" in f:
        return "asyncio"
    if STDLIB_MARK in f and "/site-packages/" not in f:
        return None  # dataclasses.replace, copy, json, contextlib, ...: whoever called them
    return "other"


Key = tuple[str, int, str]


def attribute(stats: pstats.Stats) -> tuple[dict[str, float], list[tuple[float, str, str]]]:
    """Own time per group. A function without a group of its own (a built-in or a stdlib helper) is charged to its
    callers, in proportion to the time each caller spent in it, recursively up to code that has a group."""
    raw: dict[Key, Any] = stats.stats  # type: ignore[attr-defined]
    memo: dict[Key, dict[str, float]] = {}

    def shares(key: Key, seen: frozenset[Key]) -> dict[str, float]:
        g = group_of(key[0], key[2])
        if g is not None:
            return {g: 1.0}
        if key in memo:
            return memo[key]
        callers = raw.get(key, (0, 0, 0.0, 0.0, {}))[4]
        out: dict[str, float] = defaultdict(float)
        total = 0.0
        for caller, value in callers.items():
            w = value[2] + value[3] * 1e-9  # tottime of this function under that caller
            if w <= 0:
                continue
            total += w
            if caller in seen:
                out["other"] += w
                continue
            for cg, frac in shares(caller, seen | {key}).items():
                out[cg] += w * frac
        result = {k: v / total for k, v in out.items()} if total > 0 else {"other": 1.0}
        memo[key] = result
        return result

    totals: dict[str, float] = defaultdict(float)
    rows: list[tuple[float, str, str]] = []
    for key, (_cc, _nc, tt, _ct, _callers) in raw.items():
        filename, line, name = key
        label = f"{filename}:{line}({name})" if filename != "~" else name
        own = group_of(filename, name)
        dist = shares(key, frozenset())
        for g, frac in dist.items():
            totals[g] += tt * frac
        main_group = own or (max(dist, key=lambda k: dist[k]) + "*")
        rows.append((tt, main_group, label))
    rows.sort(reverse=True)
    return dict(totals), rows


# ---- the passes -----------------------------------------------------------------------------------


def fresh_project(tmp: Path, name: str, attempts: int, concurrency: int) -> Path:
    cases, _repeats = pc.split_attempts(attempts)
    return pc.write_tiny_project(tmp / name, cases=cases, concurrency=concurrency)


def durations(root: Path, series_id: str) -> tuple[list[float], list[float]]:
    from aqven.store.open import project_database

    db = project_database(root)
    att = [tuple(r) for r in db.query("SELECT started_at, ended_at FROM attempts WHERE series_id=?", (series_id,))]
    run = [tuple(r) for r in db.query("SELECT started_at, ended_at FROM runs WHERE series_id=?", (series_id,))]
    db.close()

    def ms(rows: list[tuple[str, str]]) -> list[float]:
        return [
            (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds() * 1000 for a, b in rows if a and b
        ]

    return ms(att), ms(run)


def _db_mib(root: Path) -> float:
    path = root / ".aqven" / "aqven.sqlite"
    return path.stat().st_size / 2**20 if path.exists() else 0.0


def warm_up(tmp: Path) -> None:
    """Imports (scipy, pydantic-ai) and first-call caches, so the measured passes see the steady state."""
    root = fresh_project(tmp, "warm", 40, 8)
    pc.run_series_sync(root, 40)


def throughput(tmp: Path, attempts: int) -> dict[str, Any]:
    root = fresh_project(tmp, "throughput", attempts, 8)
    timer = StoreTimer()
    timer.install()
    cpu = time.process_time()
    load = os.getloadavg()[0]
    try:
        r = pc.run_series_sync(root, attempts)
    finally:
        timer.uninstall()
    cpu = time.process_time() - cpu
    st = r["state"]
    assert st["status"] == "done" and st["progress"]["done"] == attempts, st["progress"]
    att_ms, run_ms = durations(root, r["series_id"])
    return {
        "attempts": attempts,
        "wall_s": r["wall_s"],
        "cpu_s": cpu,
        "per_s": attempts / r["wall_s"],
        "store_s": timer.seconds,
        "store_calls": timer.calls,
        "attempt_ms": att_ms,
        "run_ms": run_ms,
        "load": load,
        "db_mib": _db_mib(root),
    }


def sequential(tmp: Path, attempts: int) -> dict[str, Any]:
    root = fresh_project(tmp, "sequential", attempts, 1)
    cpu = time.process_time()
    r = pc.run_series_sync(root, attempts)
    cpu = time.process_time() - cpu
    att_ms, run_ms = durations(root, r["series_id"])
    return {"attempts": attempts, "wall_s": r["wall_s"], "cpu_s": cpu, "attempt_ms": att_ms, "run_ms": run_ms}


def profiled(tmp: Path, attempts: int, top: int) -> dict[str, Any]:
    root = fresh_project(tmp, "profile", attempts, 8)
    prof = cProfile.Profile(time.process_time)  # CPU time: other processes' load does not count
    prof.enable()
    r = pc.run_series_sync(root, attempts)
    prof.disable()
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    prof.dump_stats(str(out / "perf_engine.prof"))
    stats = pstats.Stats(prof)
    totals, rows = attribute(stats)
    return {"wall_s": r["wall_s"], "totals": totals, "rows": rows[:top]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=5000)
    parser.add_argument("--sequential", type=int, default=500)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--profile-attempts", type=int, default=5000, help="attempts of the profiled pass")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        warm_up(tmp)
        t = throughput(tmp, args.attempts)
        print(f"== throughput: {t['attempts']} attempts, concurrency 8, instant simulator (load avg {t['load']:.2f})")
        print(
            f"wall {t['wall_s']:.1f} s = {t['per_s']:.1f} attempts/s; CPU {t['cpu_s']:.1f} s "
            f"= {t['cpu_s'] / t['attempts'] * 1000:.2f} ms CPU/attempt; wall/attempt "
            f"{t['wall_s'] / t['attempts'] * 1000:.2f} ms; this process got {t['cpu_s'] / t['wall_s'] * 100:.0f}% "
            f"of a core (CPU-bound estimate on a free core: {t['attempts'] / t['cpu_s']:.0f} attempts/s)"
        )
        print(
            f"inside RunStore/SeriesStore: {t['store_s']:.1f} s = {t['store_s'] / t['wall_s'] * 100:.1f}% of wall "
            f"({t['store_calls']} calls, {t['store_calls'] / t['attempts']:.1f} per attempt, "
            f"{t['store_s'] / t['store_calls'] * 1e6:.0f} µs each); database file {t['db_mib']:.1f} MiB"
        )
        print(
            f"attempt claim→finish at concurrency 8: median {pc.median(t['attempt_ms']):.2f} ms, "
            f"p95 {pc.percentile(t['attempt_ms'], 0.95):.2f} ms; its run: median {pc.median(t['run_ms']):.2f} ms"
        )
        result["throughput"] = {k: v for k, v in t.items() if not isinstance(v, list)}
        if args.sequential:
            s = sequential(tmp, args.sequential)
            print(f"== latency: {s['attempts']} attempts one at a time (concurrency 1)")
            print(
                f"one attempt (claim→finish): median {pc.median(s['attempt_ms']):.2f} ms, "
                f"p95 {pc.percentile(s['attempt_ms'], 0.95):.2f} ms; its run (engine only): median "
                f"{pc.median(s['run_ms']):.2f} ms, p95 {pc.percentile(s['run_ms'], 0.95):.2f} ms; "
                f"{s['attempts'] / s['wall_s']:.1f} attempts/s; "
                f"CPU {s['cpu_s'] / s['attempts'] * 1000:.2f} ms/attempt"
            )
            result["sequential"] = {
                "attempts": s["attempts"],
                "attempt_median_ms": pc.median(s["attempt_ms"]),
                "attempt_p95_ms": pc.percentile(s["attempt_ms"], 0.95),
                "run_median_ms": pc.median(s["run_ms"]),
                "per_s": s["attempts"] / s["wall_s"],
                "cpu_ms_per_attempt": s["cpu_s"] / s["attempts"] * 1000,
            }
        if not args.no_profile:
            p = profiled(tmp, args.profile_attempts, args.top)
            total = sum(p["totals"].values())
            print(
                f"== profile: {args.profile_attempts} attempts under cProfile, CPU-time timer "
                f"(wall {p['wall_s']:.1f} s, profiled CPU {total:.1f} s); built-ins and stdlib helpers are "
                "charged to their callers"
            )
            for g in GROUPS:
                v = p["totals"].get(g, 0.0)
                per = v / args.profile_attempts * 1000
                print(f"  {g:<12} {v:7.1f} s  {v / total * 100:5.1f}%   {per:6.2f} ms/attempt")
            print(
                f"top {args.top} functions by own CPU time (group; * = no group of its own: charged to its callers, "
                "mostly to the one shown)"
            )
            for tt, g, label in p["rows"]:
                print(f"  {tt:7.2f} s  {g:<13} {label[-110:]}")
            result["profile"] = {"totals": p["totals"], "wall_s": p["wall_s"]}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
