"""Kill: SIGKILL a real project server during a series and restart it (bench/soak/soak_kill.py does it 20 times).

No finished attempt lost, none counted twice, spend within one attempt's reserve of the runs' costs (and above
the uninterrupted series' by at most kills × concurrency × reserve: calls a kill cut off are made again), and
the same verdict and attempt outcomes as an uninterrupted series with the same seeds. Also: a crash while a
finding is written is repaired on restart, and `aqven series` follows its series through a server kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support import postgres
from support.kill_soak import PgStores, run_kill_soak
from support.store_access import one


@pytest.fixture
def soak_stores(store_url: str | None, request: pytest.FixtureRequest) -> Iterator[PgStores | None]:
    """On PostgreSQL, the killed series in the test's database and the uninterrupted one in a second fresh database
    of the same server (never restarted here: tests/store/test_postgres_restart.py and the soak's --pg-restarts do)."""
    if store_url is None:
        yield None
        return
    server: str = request.getfixturevalue("postgres_dsn")
    baseline = postgres.create_database(server, "aqven_soak_uninterrupted")
    try:
        yield PgStores(killed_dsn=store_url, baseline_dsn=baseline, restart=lambda: None, where="the tests' server")
    finally:
        postgres.drop_database(server, baseline)


def test_series_survives_sigkill_and_restart(tmp_path: Path, soak_stores: PgStores | None) -> None:
    report = run_kill_soak(
        tmp_path,
        pg=soak_stores,
        kills=2,
        cases=20,
        repeats=2,
        seed=11,
        latency_s=0.25,
        min_gap_s=0.3,
        max_gap_s=0.8,
        limit_s=100,
        rng_seed=3,
    )
    print("\n".join(report.lines()))
    assert report.kills == 2, "the series ended before the kills"
    assert report.status == "done"
    assert report.lost == []
    assert report.twice == []
    assert report.differ == []
    assert report.spend_ok and report.extra_ok
    assert report.verdict_same, (report.verdict, report.baseline_verdict)


def test_series_with_two_workers_survives_sigkill_of_a_worker_and_of_the_server(
    tmp_path: Path, soak_stores: PgStores | None
) -> None:
    """`workers: 2`: two kills hit a worker (the server resumes its attempts in a fresh one), two the server
    (its workers die with it). The books are checked as above, against the series run without workers."""
    report = run_kill_soak(
        tmp_path,
        kills=4,
        cases=20,
        repeats=2,
        seed=11,
        latency_s=0.25,
        min_gap_s=0.2,
        max_gap_s=0.6,
        limit_s=200,
        rng_seed=3,
        workers=2,
        pg=soak_stores,
    )
    print("\n".join(report.lines()))
    assert report.kills == 4 and report.worker_kills == 2, "the series ended before the kills"
    assert report.status == "done"
    assert report.outlived == []
    assert report.lost == []
    assert report.twice == []
    assert report.differ == []
    assert report.spend_ok and report.extra_ok
    assert report.verdict_same, (report.verdict, report.baseline_verdict)


class _Died(BaseException):
    """The process dies here: nothing after this line runs (a SIGKILL, as seen from the database)."""


def test_crash_between_deciding_and_the_finding_is_repaired_on_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that dies while it writes a held-out finding: the next start decides the series again and
    writes the finding (once). Regression test for a series left `done` without its finding."""
    from aqven.project.split import side_of
    from aqven.research.series.start import SeriesStartBody
    from aqven.server.service import ProjectService
    from support.fault_soak import EXPERIMENT, PACKAGE, write_project

    held = [n for n in (f"h{i:03d}" for i in range(40)) if side_of(PACKAGE, n) == "holdout"][:4]
    root = tmp_path / "p"
    write_project(root, cases=2, simulator="seeded", extra_cases=held)
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0")
    died = asyncio.Event()

    def die(*_a: Any, **_k: Any) -> Any:
        died.set()
        raise _Died

    async def first_life() -> str:
        svc = ProjectService(root)
        with monkeypatch.context() as m:
            m.setattr("aqven.research.series.end.write_finding", die)
            out = await svc.series.start(
                SeriesStartBody.model_validate(
                    {"experiment_id": EXPERIMENT, "on": "holdout", "simulate": True, "seed": 1}
                )
            )
            await asyncio.wait_for(died.wait(), 30)
            await asyncio.sleep(0.1)
        svc.db.close()  # no clean shutdown: the process is gone
        return str(out["series"]["series_id"])

    async def second_life(sid: str) -> Any:
        svc = ProjectService(root)
        svc.resume_interrupted()
        for _ in range(100):
            s = svc.series.store.get(sid)
            if s.status != "running":
                break
            await asyncio.sleep(0.1)
        await svc.shutdown()
        return s

    sid = asyncio.run(first_life())
    s = asyncio.run(second_life(sid))
    assert s.status == "done" and s.verdict is not None and s.verdict["verdict"] != "invalid"
    assert s.finding is not None and (root / s.finding).is_file()
    assert len(list((root / "experiments" / EXPERIMENT / "findings").glob("*.yaml"))) == 1


def test_aqven_series_follows_a_series_through_a_server_kill(tmp_path: Path) -> None:
    """`aqven series` keeps following when its server is SIGKILLed: it starts the server again, which resumes
    the series, and prints the final state (exit 0)."""
    import json
    import os
    import signal
    import subprocess
    import time

    from support.commands import cli_env, stop_server
    from support.fault_soak import EXPERIMENT, write_project

    root = tmp_path / "p"
    write_project(root, cases=30, concurrency=2, simulator="seeded", sim_latency_s=0.15)
    env = cli_env(AQVEN_SIM_LATENCY_SCALE="1", AQVEN_PRICES_FILE=str(tmp_path / "no-prices.json"))
    cli = subprocess.Popen(
        [sys.executable, "-m", "aqven", "series", EXPERIMENT, "--simulate", "--json"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        done = 0
        while done < 3 and time.monotonic() < deadline and cli.poll() is None:
            time.sleep(0.2)
            with contextlib.suppress(Exception):  # the store is made by the server the command starts
                done = one(root, "SELECT COUNT(*) FROM attempts WHERE status='done'")[0]
        assert done >= 3, "the series did not get going"
        first = json.loads((root / ".aqven" / "server.json").read_text())["pid"]
        os.kill(first, signal.SIGKILL)
        out, err = cli.communicate(timeout=120)
        assert cli.returncode == 0, out + err
        state = json.loads(out.strip().splitlines()[-1])
        assert state["status"] == "done" and state["progress"]["done"] == 30
        second = json.loads((root / ".aqven" / "server.json").read_text())["pid"]
        assert second != first
    finally:
        if cli.poll() is None:
            cli.kill()
        stop_server(root)
