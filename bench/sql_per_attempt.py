"""The SQL statements one attempt costs on the in-process path, by kind: how many transactions it commits.

Runs bench/perf_engine.py's project (one llm node on an instant simulator + one check, concurrency 8) as a series of
--attempts, with SQLite's trace callback on every connection the store opens, and prints the statements per attempt
(a trigger's inner statements are printed under the statement that fired them), most frequent first.

    .venv/bin/python bench/sql_per_attempt.py [--attempts 400] [--top 30]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

import perf_common as pc
import perf_engine as pe


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=400)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    from aqven.store import db as dbm

    counts: collections.Counter[str] = collections.Counter()
    connect = dbm.Database._connect

    def traced(self: dbm.Database) -> sqlite3.Connection:
        conn = connect(self)

        def seen(sql: str) -> None:
            text = re.sub(r"\s+", " ", sql.strip())
            text = re.sub(r"'[^']*'", "?", text)  # the trace gives statements with their values bound
            counts[re.sub(r"\b\d+(\.\d+)?\b", "N", text)[:140]] += 1

        conn.set_trace_callback(seen)
        return conn

    dbm.Database._connect = traced  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        root = pe.fresh_project(Path(tmp), "sql", args.attempts, 8)
        pc.run_series_sync(root, args.attempts)
    n = args.attempts
    print(f"{sum(counts.values()) / n:.1f} statements per attempt; {counts['COMMIT'] / n:.2f} commits per attempt")
    for text, c in counts.most_common(args.top):
        print(f"{c / n:6.2f}  {text}")


if __name__ == "__main__":
    main()
