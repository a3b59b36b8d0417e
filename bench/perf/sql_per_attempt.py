"""The SQL statements one attempt costs on the in-process path, by kind, on each store backend.

Runs bench/perf/perf_engine.py's project (one llm node on an instant simulator + one check, concurrency 8) as a series
of --attempts and prints the statements per attempt, most frequent first. SQLite: its trace callback on every connection
the store opens (a trigger's inner statements are counted under their own text); PostgreSQL: every statement the
store's cursors send (a trigger's body runs in the server, unseen), on a private durable cluster or --postgres DSN.

    .venv/bin/python bench/perf/sql_per_attempt.py [--store sqlite,postgresql] [--attempts 400] [--top 30]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

import perf_common as pc
import perf_engine as pe
import stores


def shape(sql: str) -> str:
    """A statement's text with its values and numbers made alike, so that statements of one kind count together."""
    text = re.sub(r"\s+", " ", sql.strip())
    text = re.sub(r"'[^']*'", "?", text)  # SQLite's trace gives statements with their values bound
    return re.sub(r"\b\d+(\.\d+)?\b", "N", text)[:140]


@contextlib.contextmanager
def counted(backend: str, counts: collections.Counter[str]) -> Iterator[None]:
    """Count every statement the store sends on `backend` while inside."""
    if backend == "sqlite":
        from aqven.store import sqlite_db

        connect = sqlite_db.SqliteDatabase._connect

        def traced(self: sqlite_db.SqliteDatabase) -> sqlite3.Connection:
            conn = connect(self)
            conn.set_trace_callback(lambda sql: counts.update([shape(sql)]))
            return conn

        sqlite_db.SqliteDatabase._connect = traced  # type: ignore[method-assign]
        try:
            yield
        finally:
            sqlite_db.SqliteDatabase._connect = connect  # type: ignore[method-assign]
        return
    from aqven.store import postgres_db

    cursor = postgres_db._PgCursor
    execute, executemany = cursor.execute, cursor.executemany

    def one(self: Any, sql: str, params: Any = (), /) -> Any:
        counts[shape(sql)] += 1
        return execute(self, sql, params)

    def many(self: Any, sql: str, params: Any, /) -> Any:
        rows = list(params)
        counts[f"[executemany x{len(rows)}] " + shape(sql)] += 1
        return executemany(self, sql, rows)

    cursor.execute, cursor.executemany = one, many  # type: ignore[method-assign]
    try:
        yield
    finally:
        cursor.execute, cursor.executemany = execute, executemany  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=400)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--store", default="sqlite,postgresql", help="backends, comma-separated (default both)")
    parser.add_argument("--postgres", metavar="DSN", help="a server where this user may create databases")
    args = parser.parse_args()
    backends = stores.parse_stores(args.store)
    n = args.attempts
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        server = stack.enter_context(stores.postgres_server(args.postgres)) if "postgresql" in backends else None
        for backend in backends:
            counts: collections.Counter[str] = collections.Counter()
            with stores.store(backend, server):
                root = pe.fresh_project(Path(tmp), f"sql-{backend}", n, 8)
                with counted(backend, counts):
                    pc.run_series_sync(root, n)
            commits = counts["COMMIT"]
            print(
                f"\n{stores.SHORT[backend]}: {sum(counts.values()) / n:.1f} statements per attempt; "
                f"{commits / n:.2f} commits per attempt"
            )
            for text, c in counts.most_common(args.top):
                print(f"{c / n:6.2f}  {text}")


if __name__ == "__main__":
    main()
