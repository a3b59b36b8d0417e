"""Series whose attempts run in worker processes of the server (`workers: 2` in aqven.yaml).

A real server process runs a series with two workers and every attempt runs once, in a worker, with the outcomes
of the same series run without workers. Then the series tests of the guarantees that a move to workers could
break — the cap's exact arithmetic, approve and stop, cancel, a person's answer to a human node, an edit while
the series runs, the secret order and a held-out series' coarse steps — run again with two workers; each also
checks that every model call ran in a worker, not in the server.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from support.fault_soak import EXPERIMENT, LiveServer, server_env, write_project
from support.kill_soak import baseline, db_rows, worker_pids
from support.series_kit import (
    attempts,
    case_names,
    client_for,
    get,
    rows,
    runs_of,
    settle,
    start,
    wait_until,
    write_tiny,
)

TESTS = Path(__file__).resolve().parents[2]


def _module(rel_path: str) -> ModuleType:
    """A test module of the suite, loaded under its own name (its tests are not collected again here)."""
    path = TESTS / rel_path
    spec = importlib.util.spec_from_file_location(f"_workers_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SIM_PIDS = """\
import os

from aqven.models.simulator import SimReply, SimRequest


def answer(req: SimRequest) -> SimReply:
    with open(os.environ["SOAK_PIDS"], "a") as f:
        f.write(f"{os.getpid()}\\n")
    good = req.rng().random() < 0.9
    return SimReply(output={"answer": "right" if good else "wrong"}, input_tokens=40, output_tokens=8, latency_s=0.05)
"""


def test_a_series_on_a_real_server_with_two_workers_runs_every_attempt_once(tmp_path: Path) -> None:
    root = tmp_path / "p"
    write_project(root, cases=30, repeats=2, concurrency=6, simulator="seeded", workers=2)
    (root / "sim" / "writer.py").write_text(SIM_PIDS)
    pids_file = tmp_path / "pids.txt"
    env = server_env(AQVEN_SIM_LATENCY_SCALE="1", AQVEN_PRICES_FILE=str(tmp_path / "none.json"))
    env["SOAK_PIDS"] = str(pids_file)
    server = LiveServer(root, env)
    server.start()
    try:
        assert server.proc is not None
        body = {"experiment_id": EXPERIMENT, "on": "dev", "simulate": True, "seed": 5}
        sid = server.post("/api/series", body)["series"]["series_id"]
        state = server.get(f"/api/series/{sid}")
        seen_workers: set[int] = set()
        deadline = time.monotonic() + 120
        while state["status"] not in ("done", "failed", "cancelled"):
            assert time.monotonic() < deadline, state["progress"]
            seen_workers.update(worker_pids(server.proc.pid))
            state = server.get(f"/api/series/{sid}?wait_seconds=2", timeout=30)
        server_pid = server.proc.pid
    finally:
        server.stop()
    assert state["status"] == "done", state
    attempts = db_rows(root, "SELECT * FROM attempts WHERE series_id=?", (sid,))
    runs = db_rows(root, "SELECT * FROM runs WHERE series_id=?", (sid,))
    assert len(attempts) == 60 and all(a["status"] == "done" for a in attempts)
    # Once each: one run per attempt, the one it counts, started once (no resume) and ended.
    assert sorted(r["id"] for r in runs) == sorted(a["run_id"] for a in attempts)
    assert all(r["status"] == "done" for r in runs)
    starts = db_rows(
        root,
        "SELECT e.run_id, COUNT(*) AS n FROM events e JOIN runs r ON r.id = e.run_id WHERE r.series_id=?"
        " AND e.kind IN ('run_start', 'run_resume') GROUP BY e.run_id",
        (sid,),
    )
    assert len(starts) == 60 and all(s["n"] == 1 for s in starts)
    keys = [(json.loads(r["request"])["case_name"], json.loads(r["request"])["seed"]) for r in runs]
    assert len(set(keys)) == 60
    assert state["progress"]["done"] == 60 and state["progress"]["counted"] == 60
    # Every model call ran in one of the server's two workers, and both took work.
    callers = [int(line) for line in pids_file.read_text().split()]
    assert len(callers) == 60
    assert server_pid not in callers
    assert set(callers) <= seen_workers and len(set(callers)) == 2

    # The same series (same seed) in-process without workers: the same outcomes and verdict.
    plain = tmp_path / "plain"
    write_project(plain, cases=30, repeats=2, concurrency=6, simulator="seeded")
    os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"
    try:
        base = asyncio.run(baseline(plain, seed=5, limit_s=120))
    finally:
        os.environ.pop("AQVEN_SIM_LATENCY_SCALE", None)
    mine = {(a["case_name"], a["rep"], a["variant_id"]): (a["seed"], a["outcome"], a["value"]) for a in attempts}
    assert mine == {k: v[:3] for k, v in base["attempts"].items()}
    assert state["verdict"]["text"] == base["state"]["verdict"]["text"]


# ---- the guarantees again, with two workers ---------------------------------------------------------------------


@pytest.fixture
def two_workers(tiny_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """write_tiny writes `workers: 2`; the simulator notes which process ran each call."""
    monkeypatch.setenv("TINY_WORKERS", "2")
    pids = tmp_path / "caller-pids.txt"
    monkeypatch.setenv("TINY_PIDS", str(pids))
    return pids


def _in_workers(pids: Path, at_least: int = 1) -> None:
    callers = [int(line) for line in pids.read_text().split()] if pids.exists() else []
    assert len(callers) >= at_least, callers
    assert os.getpid() not in callers  # no model call ran in the server (this process)


CASES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # name: (test module, test, fixtures besides tiny_env and tmp_path)
    "cap_pause_approve": (
        "research/series/test_series_cap.py",
        "test_pause_near_cap_then_approve_doubles_then_a_given_cap_finishes",
        (),
    ),
    "cap_stop": ("research/series/test_series_cap.py", "test_stop_at_the_cap_ends_invalid_without_a_finding", ()),
    "cap_uneven": (
        "research/series/test_series_cap.py",
        "test_once_near_the_cap_nothing_more_starts_even_if_the_running_ones_cost_less",
        ("file_order",),
    ),
    "cancel": (
        "research/series/test_series_cancel.py",
        "test_cancel_lets_running_attempts_finish_and_starts_nothing_more",
        ("hold",),
    ),
    "human": (
        "research/series/test_series_inputs_human.py",
        "test_one_answer_resumes_the_series_while_others_still_wait",
        (),
    ),
    "edit": (
        "research/series/test_series_inputs_human.py",
        "test_a_prompt_edited_while_the_series_runs_makes_it_invalid_without_a_finding",
        ("hold",),
    ),
    "order": ("research/series/test_series_order.py", "test_a_series_runs_in_its_own_secret_order_never_shown", ()),
    "coarse": (
        "server/security/test_security_sealed.py",
        "test_polling_a_held_out_series_tells_no_attempt_apart",
        ("hold",),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_series_guarantees_hold_with_two_workers(
    case: str, two_workers: Path, tiny_env: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    rel_path, name, fixtures = CASES[case]
    test: Callable[..., Any] = getattr(_module(rel_path), name)
    extra = {f: request.getfixturevalue(f) for f in fixtures}
    test(tiny_env=tiny_env, tmp_path=tmp_path, **extra)
    _in_workers(two_workers)


def test_a_worker_killed_mid_attempt_is_replaced_and_its_attempts_resume_once(
    two_workers: Path, hold: Path, tmp_path: Path
) -> None:
    """Attempts held inside their model call; the worker holding some is SIGKILLed. The server replaces it, the
    attempts it held resume (run_resume) in a live worker, and each attempt ends with exactly one run."""
    n = 30
    root = write_tiny(tmp_path / "tiny", case_names(n, 0), cap="10.00", concurrency=4)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        first = wait_until(lambda: [a for a in attempts(root, sid) if a["status"] == "running"])[0]
        (hold / first["case_name"]).touch()  # the first attempt alone; then several side by side
        wait_until(lambda: sum(a["status"] == "running" for a in attempts(root, sid)) >= 2)

        def calls_in_both_workers() -> bool:
            # A worker still importing gets no work (workers.py sends it to a ready one): under load every running
            # attempt may sit in one worker. Let the oldest one finish each time, so that new attempts are handed
            # out and the other worker gets one once it is ready, and no held call waits until its timeout.
            if len(set(two_workers.read_text().split())) >= 2:
                return True
            running = sorted((a for a in attempts(root, sid) if a["status"] == "running"), key=lambda a: a["idx"])
            if running:
                (hold / running[0]["case_name"]).touch()
            return False

        wait_until(calls_in_both_workers, timeout=90, step=1.0)
        holding = [int(p) for p in two_workers.read_text().split()]
        victim = holding[-1]  # it is inside a held call right now
        os.kill(victim, signal.SIGKILL)
        (hold / "open").touch()
        snap = settle(client, sid)
        assert snap["status"] == "done" and snap["progress"]["done"] == n
        assert get(client, sid)["progress"]["counted"] == n
    final = attempts(root, sid)
    runs = runs_of(root, sid)
    assert all(a["status"] == "done" and a["outcome"] == "pass" for a in final)
    assert sorted(r["id"] for r in runs) == sorted(a["run_id"] for a in final)  # one run each, the counted one
    assert resumed_runs(root, sid) >= 1  # the killed worker's attempts went on from their runs in another worker
    callers = [int(p) for p in two_workers.read_text().split()]
    assert victim in callers and len(set(callers)) >= 2
    assert os.getpid() not in callers


def resumed_runs(root: Path, series_id: str) -> int:
    """How many of the series' runs were resumed (a run_resume event)."""
    found = rows(
        root,
        "SELECT COUNT(DISTINCT e.run_id) AS n FROM events e JOIN runs r ON r.id = e.run_id"
        " WHERE r.series_id=? AND e.kind='run_resume'",
        (series_id,),
    )
    return int(found[0]["n"])
