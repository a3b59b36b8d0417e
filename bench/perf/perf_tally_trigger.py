"""What the kept tallies cost an attempt's writes: the two updates every attempt makes through the tally trigger.

A series of 2,000 cases × 10 repeats written straight into a fresh store (no server, no run); then, per attempt,
one transaction marks it running and one marks it done (outcome, value, cost, active time), as the runner's writes
leave it. Prints the CPU per attempt for three rounds of 5,000 attempts. Run it in two checkouts, back to back, to
see what a schema change adds (main's `src` first on PYTHONPATH for the older one).

    .venv/bin/python bench/perf/perf_tally_trigger.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    from aqven.store.schema import SCHEMA_VERSION
    from aqven.store.series import SeriesStore
    from aqven.store.series_records import SeriesPlan
    from aqven.store.sqlite_db import SqliteDatabase

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from support.series_rows import create_series

    cases = [f"c{i:04d}" for i in range(2000)]
    plan = SeriesPlan(
        flow_id="f", dataset_id="d", cases=cases, sides=dict.fromkeys(cases, "dev"), variants=["a"], repeats=10
    )
    rows = [
        {"idx": i, "case_name": c, "dataset_id": "d", "side": "dev", "variant_id": "a", "rep": r, "seed": i}
        for i, (c, r) in enumerate((c, r) for c in cases for r in range(10))
    ]
    with tempfile.TemporaryDirectory() as tmp:
        store = SeriesStore(SqliteDatabase(Path(tmp) / "db.sqlite"))
        sid = create_series(store, plan, rows)
        rounds = []
        for k in range(3):
            started = time.process_time()
            for i in range(k * 5000, (k + 1) * 5000):
                with store.db.transaction() as cur:
                    cur.execute(
                        "UPDATE attempts SET status='running', run_id=? WHERE series_id=? AND idx=?", (f"r{i}", sid, i)
                    )
                with store.db.transaction() as cur:
                    cur.execute(
                        "UPDATE attempts SET status='done', outcome='pass', value=1.0, cost_usd='0.000016',"
                        " active_at_end=? WHERE series_id=? AND idx=?",
                        (float(i), sid, i),
                    )
            rounds.append((time.process_time() - started) / 5000 * 1e6)
        store.db.close()
    load = os.getloadavg()
    print(
        f"schema {SCHEMA_VERSION}: CPU µs per attempt (2 updates, 2 transactions), 3 rounds of 5,000: "
        f"{', '.join(f'{r:.0f}' for r in rounds)}; load avg {load[0]:.2f}"
    )


if __name__ == "__main__":
    main()
