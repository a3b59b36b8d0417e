"""Kill: SIGKILL a real project server twice during a series and restart it (bench/soak_kill.py, 20 kills).

No finished attempt lost, none counted twice, spend within one attempt's reserve of the runs' costs and
equal to the uninterrupted series', and the same verdict and attempt outcomes as an uninterrupted series
with the same seeds.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from soak_kill import run_kill_soak


def test_series_survives_sigkill_and_restart(tmp_path: Path) -> None:
    report = run_kill_soak(
        tmp_path,
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
    assert report.spend_ok and report.attempt_spend == report.baseline_spend
    assert report.verdict_same, (report.verdict, report.baseline_verdict)


class _Died(Exception):
    """The process dies here: nothing after this line runs (a SIGKILL, as seen from the database)."""


def test_crash_between_deciding_and_the_finding_is_repaired_on_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that dies while it writes a held-out finding: the next start decides the series again and
    writes the finding (once). Regression test for a series left `done` without its finding."""
    from soak_faults import EXPERIMENT, PACKAGE, write_project

    from aqven.project.split import side_of
    from aqven.research.series_start import SeriesStartBody
    from aqven.server.service import ProjectService

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
            m.setattr("aqven.research.series_end.write_finding", die)
            out = await svc.series.start(SeriesStartBody(experiment_id=EXPERIMENT, on="holdout", simulate=True, seed=1))
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
