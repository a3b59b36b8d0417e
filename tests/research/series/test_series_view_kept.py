"""The snapshot a server keeps tallies for: the same as one read from scratch, verdict included, after every change.

A running series (store-level, threshold and compare questions) moves on in random steps; after each, the snapshot
with the server's TallyCache must equal the snapshot read from scratch (but for `as_of`), and its provisional
verdict is computed again only when a cell changed.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from aqven.research.series import view
from aqven.research.series.view import snapshot
from aqven.research.stats.series_verdict import compute_verdict
from aqven.store.runs import RunStore
from aqven.store.series import SeriesStore
from aqven.store.series_records import SeriesPlan
from aqven.store.series_tally import COUNTED, TallyCache
from aqven.store.sqlite_db import SqliteDatabase
from support.series_rows import attempt_rows, create_series

QUESTIONS = [
    {"kind": "threshold", "metric": "ok", "bound": 0.5, "margin": 0.02},
    {"kind": "compare", "metric": "ok", "baseline": "a", "margin": 0.0},
]


def _series(store: SeriesStore, question: dict[str, Any], stop_early: bool) -> tuple[str, int]:
    cases = [f"c{i:02d}" for i in range(20)]
    plan = SeriesPlan(
        flow_id="f",
        dataset_id="d",
        cases=cases,
        sides=dict.fromkeys(cases, "dev"),
        variants=["a", "b"],
        repeats=2,
        question=question,
        stop_early=stop_early,
    )
    rows = attempt_rows(plan)
    return create_series(store, plan, rows), len(rows)


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Equal but for the clock: when it was read, and the finish time the eta gives from now."""

    def timeless(v: dict[str, Any]) -> dict[str, Any]:
        eta = {k: x for k, x in (v["eta"] or {}).items() if k != "finish_at"}
        return {k: x for k, x in v.items() if k != "as_of"} | {"eta": eta}

    assert timeless(a) == timeless(b)


@pytest.mark.parametrize(
    ("question", "stop_early"), [(QUESTIONS[0], False), (QUESTIONS[1], False), (QUESTIONS[0], True)]
)
def test_a_kept_snapshot_equals_a_fresh_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, question: dict[str, Any], stop_early: bool
) -> None:
    rng = random.Random(7)
    db = SqliteDatabase(tmp_path / "db.sqlite")
    store, runs = SeriesStore(db), RunStore(db)
    sid, n = _series(store, question, stop_early)
    computed: list[int] = []
    real = compute_verdict

    def counting(*args: Any, **kwargs: Any) -> Any:
        computed.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(view, "compute_verdict", counting)
    monkeypatch.setattr(view, "SLOW_VERDICT_S", float("inf"))  # every verdict fresh (the next test: a slow one)
    cache = TallyCache()
    nxt = 0
    for step in range(40):
        changed = False
        if step % 4 != 3:  # every fourth poll finds nothing new
            for _ in range(rng.randint(1, 4)):
                if nxt >= n:
                    break
                outcome = rng.choice(COUNTED)
                with db.transaction() as cur:
                    cur.execute(
                        "UPDATE attempts SET status='done', outcome=?, value=?, active_at_end=? WHERE series_id=?"
                        " AND idx=?",
                        (outcome, rng.choice([0.0, 1.0, 0.3]), float(step), sid, nxt),
                    )
                nxt += 1
                changed = True
        s = store.get(sid)
        before = len(computed)
        kept = snapshot(s, store, runs, tallies=cache)
        kept_computed = len(computed) - before
        _same(kept, snapshot(s, store, runs))
        assert kept_computed == (1 if changed or step == 0 else 0)
        last = kept
    assert last["verdict"] is not None and last["progress"]["done"] == nxt > 0


def test_a_slow_verdict_is_computed_again_only_once_it_is_fifty_times_its_cost_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big series' provisional verdict (SLOW_VERDICT_S or more to compute) is not computed at every poll that
    finds a change: polling then costs the server at most 1/VERDICT_SHARE of its time. The counts beside it are
    fresh at every poll, and once the verdict is old enough it is the fresh one again."""
    db = SqliteDatabase(tmp_path / "db.sqlite")
    store, runs = SeriesStore(db), RunStore(db)
    sid, n = _series(store, QUESTIONS[1], False)
    clock = [1000.0]
    monkeypatch.setattr(view, "clock", lambda: clock[0])
    real = compute_verdict

    def slow(*args: Any, **kwargs: Any) -> Any:
        clock[0] += 0.01  # 10 ms a verdict: slow
        return real(*args, **kwargs)

    monkeypatch.setattr(view, "compute_verdict", slow)
    cache = TallyCache()

    def finish(idx: int, outcome: str) -> None:
        with db.transaction() as cur:
            cur.execute(
                "UPDATE attempts SET status='done', outcome=?, value=?, active_at_end=1 WHERE series_id=? AND idx=?",
                (outcome, 1.0 if outcome == "pass" else 0.0, sid, idx),
            )

    for idx in range(10):
        finish(idx, "pass")
    first = snapshot(store.get(sid), store, runs, tallies=cache)
    for idx in range(10, 30):
        finish(idx, "fail")
    clock[0] += 0.4  # 0.4 s later: younger than 50 × 10 ms
    again = snapshot(store.get(sid), store, runs, tallies=cache)
    assert again["progress"]["done"] == 30 and first["progress"]["done"] == 10  # the counts: fresh
    assert again["verdict"] == first["verdict"]  # the verdict: the one computed 0.4 s ago
    assert again["verdict"] != snapshot(store.get(sid), store, runs)["verdict"]  # which is not today's any more
    clock[0] += 0.2  # 0.6 s after it was computed: older than 50 × its cost
    late = snapshot(store.get(sid), store, runs, tallies=cache)
    assert late["verdict"] == snapshot(store.get(sid), store, runs)["verdict"]
    assert n > 30
