"""Engine overhead of a series: one llm node on an instant simulator plus one check, N attempts in-process, on
SQLite and PostgreSQL side by side.

Writes a tiny project into a temp folder (bench/perf/perf_common.py: its own simulator, a one-node flow, an experiment
with one built-in `contains` check), starts the experiment's series through ProjectService/SeriesService (the
server's code path, without HTTP) and waits for its end. Each pass runs on each backend of --store in turn, each in
a fresh store: the project's own SQLite file, or a new database (AQVEN_STORE) on the PostgreSQL server of
--postgres, by default a private durable cluster this bench starts (bench/perf/stores.py: fsync, synchronous_commit and
full_page_writes on). The passes, each printed as a table SQLite | PostgreSQL | PG/SQLite:

1. throughput: N attempts at the project's concurrency (8): attempts/s, CPU per attempt of this process, of the
   PostgreSQL server (the postmaster and all its children, exited ones included, from /proc, sampled once the
   pass's connections closed) and of all processes, and the wall time spent inside RunStore/SeriesStore methods
   (they are synchronous, so that time is exclusive);
   With --rounds N, this pass and the next run N times, the backends' order swapped every other round, and the
   tables show medians (each round's attempts/s and ratio printed below them);
2. the same on one core (--one-core CPU): this process's threads and every PostgreSQL process pinned to that CPU
   with sched_setaffinity, so the client and the server share one core as SQLite's in-process engine does;
   on a private cluster, then PostgreSQL once more with fsync, synchronous_commit and full_page_writes off;
3. latency: a sequential sample (concurrency 1): median and p95 of one attempt, from claim to finish
   (attempts.started_at → ended_at) and of its run alone (runs.started_at → ended_at);
4. profile: N attempts again under cProfile (this process only); tottime is grouped by where the code lives (a
   built-in such as sqlite3's execute is charged to the group of the code that called it): database (sqlite3,
   psycopg + aqven.store), pydantic-ai (pydantic_ai, pydantic_graph, anyio, sniffio, genai_prices), aqven
   (everything else in aqven.*, the project's simulator included), pydantic (validation), asyncio (the event
   loop), other.

    .venv/bin/python bench/perf/perf_engine.py [--attempts 5000] [--sequential 500] [--profile-attempts 5000]
        [--no-profile] [--store sqlite,postgresql] [--postgres DSN] [--via tcp|socket] [--one-core CPU] [--rounds 1]
        [--no-fsync-off]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import json
import os
import pstats
import shutil
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
import stores

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
        return "database" if "sqlite3" in funcname or "psycopg" in funcname else None
    if "/aqven/store/" in f or f"{STDLIB_MARK}sqlite3/" in f or "/psycopg/" in f or "/psycopg_binary/" in f:
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


class Meter:
    """The CPU around one pass's series: this process's (`time.process_time`, all its threads) and, on PostgreSQL,
    the server's (all its processes, sampled once no client backend is left: the pass's connections closed)."""

    def __init__(self, server: stores.PgServer | None) -> None:
        self.server = server
        self.cpu_s = 0.0
        self.server_cpu_s: float | None = None
        self._client = 0.0
        self._server: float | None = None

    def start(self) -> None:
        if self.server is not None:
            self.server.idle()
            self._server = self.server.cpu_s()
        self._client = time.process_time()

    def stop(self) -> None:
        self.cpu_s = time.process_time() - self._client
        if self.server is not None and self._server is not None:
            self.server.idle()
            after = self.server.cpu_s()
            self.server_cpu_s = None if after is None else after - self._server


def fresh_project(tmp: Path, name: str, attempts: int, concurrency: int) -> Path:
    """A new project at tmp/name (a round that ran before under the same name is removed: its database with it)."""
    cases, _repeats = pc.split_attempts(attempts)
    shutil.rmtree(tmp / name, ignore_errors=True)
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


def warm_up(tmp: Path, name: str = "warm") -> None:
    """Imports (scipy, pydantic-ai) and first-call caches, so the measured passes see the steady state."""
    root = fresh_project(tmp, name, 40, 8)
    pc.run_series_sync(root, 40)


def throughput(tmp: Path, attempts: int, meter: Meter, name: str = "throughput") -> dict[str, Any]:
    root = fresh_project(tmp, name, attempts, 8)
    timer = StoreTimer()
    timer.install()
    load = os.getloadavg()[0]
    meter.start()
    try:
        r = pc.run_series_sync(root, attempts)
    finally:
        meter.stop()
        timer.uninstall()
    st = r["state"]
    assert st["status"] == "done" and st["progress"]["done"] == attempts, st["progress"]
    att_ms, run_ms = durations(root, r["series_id"])
    return {
        "attempts": attempts,
        "wall_s": r["wall_s"],
        "cpu_s": meter.cpu_s,
        "server_cpu_s": meter.server_cpu_s,
        "per_s": attempts / r["wall_s"],
        "store_s": timer.seconds,
        "store_calls": timer.calls,
        "attempt_ms": att_ms,
        "run_ms": run_ms,
        "load": load,
        "db_mib": _db_mib(root),
    }


def sequential(tmp: Path, attempts: int, meter: Meter) -> dict[str, Any]:
    root = fresh_project(tmp, "sequential", attempts, 1)
    meter.start()
    r = pc.run_series_sync(root, attempts)
    meter.stop()
    att_ms, run_ms = durations(root, r["series_id"])
    return {
        "attempts": attempts,
        "wall_s": r["wall_s"],
        "cpu_s": meter.cpu_s,
        "server_cpu_s": meter.server_cpu_s,
        "attempt_ms": att_ms,
        "run_ms": run_ms,
    }


def profiled(tmp: Path, attempts: int, top: int, label: str) -> dict[str, Any]:
    root = fresh_project(tmp, f"profile-{label}", attempts, 8)
    prof = cProfile.Profile(time.process_time)  # CPU time: other processes' load does not count
    prof.enable()
    r = pc.run_series_sync(root, attempts)
    prof.disable()
    out = Path(__file__).resolve().parents[1] / "out"  # bench/out
    out.mkdir(exist_ok=True)
    prof.dump_stats(str(out / f"perf_engine-{label}.prof"))
    stats = pstats.Stats(prof)
    totals, rows = attribute(stats)
    return {"wall_s": r["wall_s"], "totals": totals, "rows": rows[:top]}


# ---- one pass on each backend --------------------------------------------------------------------


def on_backends(
    backends: list[str],
    server: stores.PgServer | None,
    run: Callable[[str, Meter], dict[str, Any]],
    *,
    cpus: set[int] | None = None,
) -> dict[str, dict[str, Any]]:
    """`run(backend, meter)` on each backend in turn, each in a fresh store (PostgreSQL: a new database, named by
    AQVEN_STORE). With `cpus`, this process and PostgreSQL's processes run on those CPUs only during the pass."""
    out: dict[str, dict[str, Any]] = {}
    for backend in backends:
        pg = server if backend == "postgresql" else None
        with stores.store(backend, pg) as dsn:
            if cpus is not None:
                stores.pin_self(cpus)
                if pg is not None:
                    pg.pin(cpus)
            try:
                out[backend] = run(backend, Meter(pg))
            finally:
                if cpus is not None:
                    stores.pin_self(stores.all_cpus())
                    if pg is not None:
                        pg.pin(stores.all_cpus())
            if pg is not None and dsn is not None:
                out[backend]["db_mib"] = pg.database_mib(dsn)
    return out


def in_rounds(
    rounds: int,
    backends: list[str],
    server: stores.PgServer | None,
    run: Callable[[str, Meter], dict[str, Any]],
    *,
    cpus: set[int] | None = None,
) -> tuple[dict[str, dict[str, Any]], list[dict[str, dict[str, Any]]]]:
    """`on_backends` `rounds` times, the backends' order swapped every other round (the machine's load drifts); the
    figures of each backend as their medians over the rounds (lists of durations joined), and each round's."""
    each = [on_backends(backends if i % 2 == 0 else backends[::-1], server, run, cpus=cpus) for i in range(rounds)]
    merged: dict[str, dict[str, Any]] = {}
    for b in backends:
        xs = [r[b] for r in each]
        out: dict[str, Any] = {}
        for k, v in xs[0].items():
            if isinstance(v, list):
                out[k] = [y for x in xs for y in x[k]]
            elif isinstance(v, int | float) and not isinstance(v, bool) and all(x[k] is not None for x in xs):
                out[k] = pc.median([x[k] for x in xs])
            else:
                out[k] = v
        merged[b] = out
    return merged, each


def rounds_line(each: list[dict[str, dict[str, Any]]]) -> tuple[str, float | None]:
    """Each round's attempts/s on each backend and their ratio; the median ratio."""
    parts = [f"{stores.SHORT[b]} " + ", ".join(f"{r[b]['per_s']:.0f}" for r in each) for b in each[0]]
    if len(each[0]) < 2:
        return "attempts/s by round: " + "; ".join(parts), None
    ratios = [r["postgresql"]["per_s"] / r["sqlite"]["per_s"] for r in each]
    med = pc.median(ratios)
    return (
        f"attempts/s by round: {'; '.join(parts)}; PG/SQLite {', '.join(f'{x:.2f}' for x in ratios)} "
        f"(median {med:.2f}×)",
        med,
    )


def _per_attempt_ms(seconds: float | None, attempts: int) -> float | None:
    return None if seconds is None else seconds / attempts * 1000


def _all_cpu_ms(t: dict[str, Any]) -> float | None:
    """CPU per attempt of every process involved: this one, plus PostgreSQL's server on that backend."""
    if t["backend"] == "sqlite":
        return t["cpu_s"] / t["attempts"] * 1000
    if t["server_cpu_s"] is None:
        return None
    return (t["cpu_s"] + t["server_cpu_s"]) / t["attempts"] * 1000


_f = stores.cell


def throughput_rows(by: dict[str, dict[str, Any]]) -> list[stores.Row]:
    def cell(backend: str, key: Callable[[dict[str, Any]], float | None], fmt: str, unit: str = "") -> str:
        t = by.get(backend)
        return "(not run)" if t is None else _f(key(t), fmt, unit)

    def row(label: str, key: Callable[[dict[str, Any]], float | None], fmt: str, unit: str = "") -> tuple[str, ...]:
        lite = key(by["sqlite"]) if "sqlite" in by else None
        pg = key(by["postgresql"]) if "postgresql" in by else None
        return (label, cell("sqlite", key, fmt, unit), cell("postgresql", key, fmt, unit), stores.ratio(pg, lite))

    rows = [
        row("attempts/s", lambda t: t["per_s"], ".1f"),
        row("wall", lambda t: t["wall_s"], ".1f", " s"),
        row("CPU per attempt, this process", lambda t: _per_attempt_ms(t["cpu_s"], t["attempts"]), ".2f", " ms"),
        row(
            "CPU per attempt, PostgreSQL server",
            lambda t: 0.0 if t["backend"] == "sqlite" else _per_attempt_ms(t["server_cpu_s"], t["attempts"]),
            ".2f",
            " ms",
        ),
        row("CPU per attempt, all processes", _all_cpu_ms, ".2f", " ms"),
        row("this process's share of a core", lambda t: t["cpu_s"] / t["wall_s"] * 100, ".0f", " %"),
        row("inside RunStore/SeriesStore", lambda t: t["store_s"] / t["wall_s"] * 100, ".1f", " % of wall"),
        row("store calls per attempt", lambda t: t["store_calls"] / t["attempts"], ".1f"),
        row("µs per store call", lambda t: t["store_s"] / max(1, t["store_calls"]) * 1e6, ".0f"),
        row("attempt claim→finish median", lambda t: pc.median(t["attempt_ms"]), ".2f", " ms"),
        row("attempt claim→finish p95", lambda t: pc.percentile(t["attempt_ms"], 0.95), ".2f", " ms"),
        row("its run median", lambda t: pc.median(t["run_ms"]), ".2f", " ms"),
        row("database size", lambda t: t["db_mib"], ".1f", " MiB"),
    ]
    rows.append(
        ("load avg at the start", *(_f(by[b]["load"], ".2f") if b in by else "–" for b in stores.BACKENDS), "–")
    )
    return [(a, b, c, d) for a, b, c, d in rows]


def sequential_rows(by: dict[str, dict[str, Any]]) -> list[stores.Row]:
    def row(label: str, key: Callable[[dict[str, Any]], float | None], fmt: str, unit: str = "") -> tuple[str, ...]:
        lite = key(by["sqlite"]) if "sqlite" in by else None
        pg = key(by["postgresql"]) if "postgresql" in by else None
        return (label, _f(lite, fmt, unit), _f(pg, fmt, unit), stores.ratio(pg, lite))

    rows = [
        row("one attempt (claim→finish) median", lambda s: pc.median(s["attempt_ms"]), ".2f", " ms"),
        row("one attempt p95", lambda s: pc.percentile(s["attempt_ms"], 0.95), ".2f", " ms"),
        row("its run (engine only) median", lambda s: pc.median(s["run_ms"]), ".2f", " ms"),
        row("its run p95", lambda s: pc.percentile(s["run_ms"], 0.95), ".2f", " ms"),
        row("attempts/s", lambda s: s["attempts"] / s["wall_s"], ".1f"),
        row("CPU per attempt, this process", lambda s: _per_attempt_ms(s["cpu_s"], s["attempts"]), ".2f", " ms"),
        row("CPU per attempt, all processes", _all_cpu_ms, ".2f", " ms"),
    ]
    return [(a, b, c, d) for a, b, c, d in rows]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=5000)
    parser.add_argument("--sequential", type=int, default=500)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--profile-attempts", type=int, default=5000, help="attempts of the profiled pass")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--store", default="sqlite,postgresql", help="backends, comma-separated (default both)")
    parser.add_argument(
        "--postgres",
        metavar="DSN",
        help="a PostgreSQL server where this user may create databases (default: a private durable cluster)",
    )
    parser.add_argument(
        "--via",
        choices=stores.VIAS,
        default="tcp",
        help="how the private cluster is reached: TCP on loopback (default, as from another machine) or its unix"
        " socket (as a client on its machine connects by default)",
    )
    parser.add_argument(
        "--one-core",
        type=int,
        default=os.cpu_count() - 1 if os.cpu_count() else 0,
        metavar="CPU",
        help="the CPU of the one-core throughput pass (default the last); -1: no such pass",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="throughput passes per backend (medians shown; order swapped each round)"
    )
    parser.add_argument("--no-fsync-off", action="store_true", help="skip the private cluster's pass with fsync off")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    backends = stores.parse_stores(args.store)
    result: dict[str, Any] = {}
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        server: stores.PgServer | None = None
        if "postgresql" in backends:
            server = stack.enter_context(stores.postgres_server(args.postgres, via=args.via))
            where = (
                f"a private cluster of {server.cluster.bindir.parent.name} (fsync, synchronous_commit, "
                f"full_page_writes on), reached over {'its unix socket' if args.via == 'socket' else 'TCP on loopback'}"
                if server.cluster
                else "the server of --postgres"
            )
            print(f"PostgreSQL: {where}; a fresh database per pass", flush=True)
            if not server.sees_processes:
                print("  (its processes cannot be seen from here: no server CPU, no one-core pinning of it)")
        on_backends(backends, server, lambda b, m: (warm_up(tmp, f"warm-{b}"), {})[1])

        def tp(name: str) -> Callable[[str, Meter], dict[str, Any]]:
            return lambda b, m: {"backend": b, **throughput(tmp, args.attempts, m, f"{name}-{b}")}

        med = f", medians of {args.rounds} rounds" if args.rounds > 1 else ""
        t, t_each = in_rounds(args.rounds, backends, server, tp("throughput"))
        print(
            stores.table(
                f"throughput: {args.attempts} attempts, concurrency 8, instant simulator, all {os.cpu_count()} cores"
                + med,
                throughput_rows(t),
            ),
            flush=True,
        )
        line, two = rounds_line(t_each)
        print(line, flush=True)
        result["throughput"] = {b: {k: v for k, v in x.items() if not isinstance(v, list)} for b, x in t.items()}
        one: dict[str, dict[str, Any]] = {}
        one_ratio: float | None = None
        if args.one_core >= 0:
            one, one_each = in_rounds(args.rounds, backends, server, tp("one-core"), cpus={args.one_core})
            print(
                stores.table(
                    f"throughput on one core: CPU {args.one_core} only, for this process and every PostgreSQL "
                    "process (sched_setaffinity)" + med,
                    throughput_rows(one),
                ),
                flush=True,
            )
            line, one_ratio = rounds_line(one_each)
            print(line, flush=True)
            result["one_core"] = {b: {k: v for k, v in x.items() if not isinstance(v, list)} for b, x in one.items()}
        if server is not None and server.cluster is not None and not args.no_fsync_off:
            server.set_durable(False)
            try:
                nf = on_backends(["postgresql"], server, tp("fsync-off"))["postgresql"]
            finally:
                server.set_durable(True)
            lite = t.get("sqlite", {}).get("per_s")
            print(
                f"PostgreSQL with fsync, synchronous_commit and full_page_writes off (all cores): "
                f"{nf['per_s']:.1f} attempts/s ({stores.ratio(nf['per_s'], lite)} of SQLite's above); CPU per attempt "
                f"{_f(_per_attempt_ms(nf['cpu_s'], nf['attempts']), '.2f')} ms this process, "
                f"{_f(_per_attempt_ms(nf['server_cpu_s'], nf['attempts']), '.2f')} ms the server",
                flush=True,
            )
            result["fsync_off"] = {k: v for k, v in nf.items() if not isinstance(v, list)}
        if two is not None:
            line = f"PostgreSQL/SQLite attempts/s: {two:.2f}× on all {os.cpu_count()} cores"
            if one:
                line += f", {one_ratio:.2f}× on one core"
            print(
                line + (" (medians of the rounds' ratios)" if args.rounds > 1 else "") + "; target ≥ 0.5× on one core"
            )
        if args.sequential:
            s = on_backends(backends, server, lambda b, m: {"backend": b, **sequential(tmp, args.sequential, m)})
            print(
                stores.table(f"latency: {args.sequential} attempts one at a time (concurrency 1)", sequential_rows(s)),
                flush=True,
            )
            result["sequential"] = {
                b: {
                    "attempts": x["attempts"],
                    "attempt_median_ms": pc.median(x["attempt_ms"]),
                    "attempt_p95_ms": pc.percentile(x["attempt_ms"], 0.95),
                    "run_median_ms": pc.median(x["run_ms"]),
                    "per_s": x["attempts"] / x["wall_s"],
                    "cpu_ms_per_attempt": x["cpu_s"] / x["attempts"] * 1000,
                }
                for b, x in s.items()
            }
        if not args.no_profile:
            p = on_backends(backends, server, lambda b, m: profiled(tmp, args.profile_attempts, args.top, b))
            print(
                f"== profile: {args.profile_attempts} attempts under cProfile, CPU-time timer, this process only; "
                "built-ins and stdlib helpers are charged to their callers (ms/attempt, share of the profiled CPU)"
            )
            totals = {b: sum(x["totals"].values()) for b, x in p.items()}
            for b, x in p.items():
                print(f"  {stores.SHORT[b]}: wall {x['wall_s']:.1f} s, profiled CPU {totals[b]:.1f} s")
            rows: list[stores.Row] = []
            for g in GROUPS:
                cells = {
                    b: (x["totals"].get(g, 0.0) / args.profile_attempts * 1000, x["totals"].get(g, 0.0) / totals[b])
                    for b, x in p.items()
                }
                rows.append(
                    (
                        g,
                        f"{cells['sqlite'][0]:.2f} ms {cells['sqlite'][1] * 100:4.1f}%" if "sqlite" in cells else "–",
                        f"{cells['postgresql'][0]:.2f} ms {cells['postgresql'][1] * 100:4.1f}%"
                        if "postgresql" in cells
                        else "–",
                        stores.ratio(
                            cells["postgresql"][0] if "postgresql" in cells else None,
                            cells["sqlite"][0] if "sqlite" in cells else None,
                        ),
                    )
                )
            print(stores.table("profile by group", rows))
            for b, x in p.items():
                print(
                    f"{stores.SHORT[b]}: top {args.top} functions by own CPU time (group; * = no group of its own: "
                    "charged to its callers, mostly to the one shown)"
                )
                for tt, g, label in x["rows"]:
                    print(f"  {tt:7.2f} s  {g:<13} {label[-110:]}")
            result["profile"] = {b: {"totals": x["totals"], "wall_s": x["wall_s"]} for b, x in p.items()}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
