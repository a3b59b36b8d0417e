"""The run order of a series: its cases shuffled by a secret seed kept in the database, run case block by case
block, and the simulators' seed drawn at the start (issue 12, items 2 and 5)."""

from __future__ import annotations

import json
from pathlib import Path

from aqven.research.series.order import attempt_plan, case_order
from aqven.store.open import project_database
from aqven.store.series import SeriesStore
from support.series_kit import (
    attempts,
    case_names,
    client_for,
    get,
    rows,
    run_order,
    settle,
    start,
    write_tiny,
)


def test_case_order_is_a_permutation_fixed_by_the_seed() -> None:
    cases = [f"c{i}" for i in range(30)]
    a, b, c = case_order(cases, 1), case_order(cases, 1), case_order(cases, 2)
    assert a == b and sorted(a) == sorted(cases)
    assert a != c and a != cases


def test_attempts_run_case_block_by_case_block_with_paired_seeds() -> None:
    plan = attempt_plan(
        ["a", "b", "c"], order_seed=7, repeats=2, variants=["x", "y"], seed_of=lambda case, rep: hash((case, rep))
    )
    order = case_order(["a", "b", "c"], 7)
    assert [p["idx"] for p in plan] == list(range(12))
    # every case's 4 attempts (2 repeats × 2 variants) are one contiguous block, the blocks in the drawn order
    assert [p["case_name"] for p in plan] == [c for c in order for _ in range(4)]
    for i in range(0, 12, 2):  # both variants of one case and repeat share one seed (paired)
        assert plan[i]["seed"] == plan[i + 1]["seed"] and plan[i]["variant_id"] != plan[i + 1]["variant_id"]


def test_a_series_runs_in_its_own_secret_order_never_shown(tiny_env: Path, tmp_path: Path) -> None:
    names = case_names(12, 12)
    root = write_tiny(tmp_path / "tiny", names, concurrency=1)
    with client_for(root) as client:
        started = start(client, experiment_id="rate", on="holdout", simulate=True)
        sid = started["series"]["series_id"]
        snap = settle(client, sid)
        other = settle(client, start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"])
        answers = [
            started,
            snap,
            get(client, sid),
            client.get(f"/api/studio/series/{sid}").json(),
            client.get("/api/series").json(),
            client.get(f"/api/studio/series/{sid}/attempts").json(),
        ]
    (seed,) = [r["order_seed"] for r in rows(root, "SELECT order_seed FROM series WHERE id=?", (sid,))]
    assert isinstance(seed, int)
    for answer in answers:  # the seed is in no answer of the API
        assert str(seed) not in json.dumps(answer)
    plan_cases = [n for n in names if n in set(run_order(root, sid))]
    order = run_order(root, sid)
    assert order == case_order(plan_cases, seed) and order != plan_cases  # shuffled, by the stored seed
    assert run_order(root, other["series_id"]) != order  # another series draws another order
    # attempts ran in index order: the first attempt to finish is index 0, and so on (concurrency 1)
    done = sorted(attempts(root, sid), key=lambda a: a["ended_at"])
    assert [a["idx"] for a in done] == list(range(len(done)))
    # the store's helper gives the same order (what a series that stops early reads)
    db = project_database(root)
    try:
        assert SeriesStore(db).case_order(sid) == order
    finally:
        db.close()


def test_simulated_reads_are_independent_unless_replayed(tiny_env: Path, tmp_path: Path) -> None:
    names = case_names(6, 6)
    root = write_tiny(tmp_path / "tiny", names)
    with client_for(root) as client:
        a = settle(client, start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"])
        b = settle(client, start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"])
        assert a["seed"] != b["seed"]  # each series drew its own simulators' seed
        r = client.post(
            "/api/series", json={"experiment_id": "rate", "on": "holdout", "simulate": True, "seed": a["seed"]}
        )
        assert r.status_code == 201, r.text
        c = settle(client, r.json()["series"]["series_id"])
        assert c["seed"] == a["seed"]

    def seeds(sid: str) -> dict[tuple[str, int], int]:
        return {(x["case_name"], x["rep"]): x["seed"] for x in attempts(root, sid)}

    assert seeds(a["series_id"]) != seeds(b["series_id"])
    assert seeds(c["series_id"]) == seeds(a["series_id"])  # replayed on purpose: the same draws
