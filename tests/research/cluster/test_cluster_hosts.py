"""`aqven worker`s on hosts of their own (issue 31, "How it is tested"): PostgreSQL on one test host, the server
(`python -m aqven serve --store postgresql://…@10.231.N.2/… --cluster`) on another, and three `aqven worker`s each
on a host of its own: network namespaces joined by a switch (support/netns.py, support/cluster_hosts.py), every host
with its own address, loopback and host name, all on the project's one folder. The test process is the observer on
the switch. Where namespaces cannot be made (not root, no `ip`), the test says so (a warning) and runs the same on
loopback processes, a worker's link to PostgreSQL then going through a relay that the cut silences.

Checked: a series runs to its end with every attempt run once (one run each, each asking its model once), and
`attempts.worker` and the series' `ran_on` name the workers of the three hosts; pulling one worker host's cable for
20 s makes that worker fence itself (no heartbeat landed for 6 s: it exits) and the attempts it held finish on the
others within 30 s of the cut; nothing finished before the cut is lost, nothing counted twice; once the cable is
back, `aqven worker` starts its worker again and it joins as a new executor.

The kill soak across hosts (SIGKILLs of workers and the server, a cut, a PostgreSQL crash, a provider's rpm) is
bench/soak/cluster_hosts.py.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aqven.research.cluster.dispatch import LOST_AFTER_S, WATCH_S
from aqven.research.cluster.node import BEAT_S, FENCE_S
from support.cluster_hosts import Hosts, rows
from support.fault_soak import EXPERIMENT, server_env, write_project
from support.postgres import PostgresUnavailable, need_driver, skip_wanted
from support.series_kit import wait_until

pytest.importorskip("dbos")

CUT_S = 20.0


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Hosts]:
    try:
        need_driver()
        with Hosts(tmp_path, workers=3, say=lambda why: warnings.warn(why, stacklevel=2)) as made:
            yield made
    except PostgresUnavailable as e:
        if skip_wanted():
            pytest.skip(str(e))
        pytest.fail(str(e), pytrace=False)


def test_three_worker_hosts_run_each_attempt_once_and_a_cut_ones_fence_and_finish_elsewhere(
    hosts: Hosts, tmp_path: Path
) -> None:
    began = time.monotonic()
    dsn = hosts.database()

    def q(sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        return rows(dsn, sql, params)

    root = tmp_path / "project"
    write_project(root, cases=40, repeats=2, concurrency=6, simulator="seeded", sim_latency_s=0.4)
    env = server_env(AQVEN_SIM_LATENCY_SCALE="1", AQVEN_PRICES_FILE=str(tmp_path / "no-prices.json"))
    env.pop("AQVEN_STORE", None)
    server = hosts.server(root, env, dsn)
    workers = {name: hosts.worker(name, root, env, dsn, slots=2) for name in hosts.worker_hosts}

    def live() -> list[dict[str, Any]]:
        return q("SELECT id, name, host FROM workers WHERE state='live'")

    try:
        wait_until(lambda: len(live()) == 3, timeout=60, step=0.2)
    except AssertionError:
        raise AssertionError({n: w.tail(1500) for n, w in workers.items()}) from None
    if hosts.namespaces:  # each worker says it is on its own host
        assert {w["host"] for w in live()} == set(hosts.worker_hosts), live()
    started = server.post("/api/series", {"experiment_id": EXPERIMENT, "on": "dev", "seed": 7, "simulate": True})
    sid = started["series"]["series_id"]
    cut_name = "w3"
    cut_id = next(w["id"] for w in live() if w["name"] == cut_name)

    def cut_one_busy() -> list[dict[str, Any]]:
        done = q("SELECT COUNT(*) AS n FROM attempts WHERE series_id=%s AND status='done'", (sid,))
        held = q("SELECT idx FROM attempts WHERE series_id=%s AND status='running' AND worker=%s", (sid, cut_id))
        return held if done[0]["n"] >= 10 and held else []

    held_idx = [r["idx"] for r in wait_until(cut_one_busy, timeout=60, step=0.05)]
    finished_before = {
        r["idx"]: r["run_id"]
        for r in q("SELECT idx, run_id FROM attempts WHERE series_id=%s AND status='done'", (sid,))
    }
    link = hosts.worker_hosts[cut_name]
    link.cut()
    cut_at = time.monotonic()

    def held_finished() -> bool:
        got = q("SELECT status FROM attempts WHERE series_id=%s AND idx = ANY(%s)", (sid, held_idx))
        return all(r["status"] == "done" for r in got)

    try:
        wait_until(held_finished, timeout=CUT_S + 15, step=0.1)
    except AssertionError:
        got = q("SELECT idx, status, worker FROM attempts WHERE series_id=%s AND idx = ANY(%s)", (sid, held_idx))
        raise AssertionError((got, q("SELECT name, state FROM workers"), workers[cut_name].tail())) from None
    took = time.monotonic() - cut_at
    assert took < 30, f"the cut worker's attempts took {took:.1f} s to finish elsewhere"
    # Counted from the cut, not from that end: an attempt the worker was ending as the cable went can have ended
    # there, so its attempts may all be done before the fence or the server's verdict on it.
    fenced = "no heartbeat reached the store"
    fence_by = cut_at + FENCE_S + BEAT_S + 5
    wait_until(lambda: fenced in workers[cut_name].tail(20000), timeout=fence_by - time.monotonic(), step=0.1)
    lost_by = cut_at + LOST_AFTER_S + WATCH_S + 5

    def declared_lost() -> bool:
        return q("SELECT state FROM workers WHERE id=%s", (cut_id,))[0]["state"] == "lost"

    wait_until(declared_lost, timeout=lost_by - time.monotonic(), step=0.1)
    time.sleep(max(0.0, cut_at + CUT_S - time.monotonic()))
    link.restore()
    restored_at = time.monotonic()

    state = server.wait_series(sid, limit_s=60)
    assert state["status"] == "done", (state["status"], {n: w.tail(1500) for n, w in workers.items()})
    ran_on = server.get(f"/api/series/{sid}")["ran_on"]
    assert {r["name"] for r in ran_on} == set(hosts.worker_hosts), ran_on
    assert sum(r["attempts"] for r in ran_on) == 80

    attempts = q("SELECT idx, status, run_id, worker, outcome FROM attempts WHERE series_id=%s", (sid,))
    assert len(attempts) == 80 and all(a["status"] == "done" for a in attempts)
    assert all(a["outcome"] in ("pass", "fail") for a in attempts), [a for a in attempts if a["outcome"] == "infra"]
    # Nothing lost: what had finished before the cut is still finished, with the same run.
    by_idx = {a["idx"]: a for a in attempts}
    assert all(by_idx[i]["run_id"] == run for i, run in finished_before.items())
    # Nothing counted twice: one run per attempt, and each run asked its model once.
    runs = q("SELECT id FROM runs WHERE series_id=%s", (sid,))
    assert len(runs) == 80 and {r["id"] for r in runs} == {a["run_id"] for a in attempts}
    twice = q(
        "SELECT run_id FROM events WHERE kind='model_response' AND run_id IN (SELECT id FROM runs WHERE series_id=%s)"
        " GROUP BY run_id HAVING COUNT(*) > 1",
        (sid,),
    )
    assert not twice, twice
    # Where they ran: the three hosts, and the cut worker's attempts on the other two.
    who = {w["id"]: w for w in q("SELECT id, name, host FROM workers")}
    assert {who[a["worker"]]["name"] for a in attempts} == {"w1", "w2", "w3"}
    if hosts.namespaces:
        assert {who[a["worker"]]["host"] for a in attempts} == {"w1", "w2", "w3"}
    assert all(who[by_idx[i]["worker"]]["name"] != cut_name for i in held_idx)

    # The cable back: `aqven worker` started its worker again, a new executor of the same name.
    def rejoined() -> bool:
        return any(w["name"] == cut_name and w["id"] != cut_id for w in live())

    try:
        wait_until(rejoined, timeout=max(5.0, restored_at + 25 - time.monotonic()), step=0.2)
    except AssertionError:
        raise AssertionError(("w3 never came back", workers[cut_name].tail(4000))) from None
    assert workers[cut_name].alive()
    wall = time.monotonic() - began
    assert wall < 90, f"the test took {wall:.0f} s"
