"""Infrastructure errors: out of the metrics, > 5% invalid, all of them failed, 429 re-run once at the end."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from aqven.project.init import init_project
from support.fake_provider import FakeProvider, FakeReply
from support.series_kit import (
    attempts,
    case_names,
    client_for,
    first_on,
    runs_of,
    settle,
    start,
    write_tiny,
)


@pytest.fixture
def fp(monkeypatch: pytest.MonkeyPatch, tiny_env: Path) -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        monkeypatch.setenv("AQVEN_OPENROUTER_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-dummy")
        yield server


def test_one_infra_error_in_twenty_one_stays_out_of_the_metrics(tiny_env: Path, tmp_path: Path) -> None:
    names = [*case_names(20, 0), first_on("dev", "simcrash")]  # 1 of 21 = 4.8%: not above 5%
    root = write_tiny(tmp_path / "tiny", names)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        snap = settle(client, sid)
        assert snap["status"] == "done"
        assert snap["progress"]["infra_errors"] == 1 and snap["progress"]["counted"] == 20
        assert snap["matrix"][0]["counted"] == 20 and snap["matrix"][0]["passes"] == 20
        cell = snap["verdict"]["cells"][0]
        assert cell["attempts"] == 20 and cell["cases"] == 20 and cell["estimate"] == 1.0
        assert snap["verdict"]["verdict"] == "signal"  # dev cases; not invalid
        bad = [a for a in attempts(root, sid) if a["outcome"] == "infra"]
        assert [(a["case_name"], a["error_code"]) for a in bad] == [(names[-1], "CODE_ERROR")]


def test_more_than_five_percent_infra_errors_make_the_series_invalid(
    tiny_env: Path,
    tmp_path: Path,
) -> None:
    names = [*case_names(0, 18), first_on("holdout", "simcrash"), first_on("holdout", "simcrash", 1000)]
    root = write_tiny(tmp_path / "tiny", names)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"]
        snap = settle(client, sid)
        assert snap["status"] == "done"
        assert snap["progress"]["infra_errors"] == 2 and snap["progress"]["counted"] == 18
        assert snap["verdict"]["verdict"] == "invalid" and snap["verdict"]["reason"] == "infra_errors"
        assert snap["finding"] is None  # invalid: no finding even on held-out cases
    assert not (root / "experiments" / "rate" / "findings").exists()


def test_a_check_that_crashes_is_a_code_error_infra_attempt(tiny_env: Path, tmp_path: Path) -> None:
    names = [*case_names(5, 0), first_on("dev", "checkcrash")]
    root = write_tiny(tmp_path / "tiny", names)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        snap = settle(client, sid, include_cases=True)
        assert snap["progress"]["infra_errors"] == 1 and snap["progress"]["counted"] == 5
        crashed = next(a for a in attempts(root, sid) if a["case_name"] == names[-1])
        assert crashed["outcome"] == "infra" and crashed["error_code"] == "CODE_ERROR"
        assert "the check broke" in crashed["error_message"]
        row = next(r for r in snap["cases"] if r["case"] == names[-1])
        assert row["variants"]["as_written"]["attempts"][0]["error"] == "CODE_ERROR"
        # One error in six is above 5%: invalid, which says why.
        assert snap["verdict"]["verdict"] == "invalid" and snap["verdict"]["reason"] == "infra_errors"


def test_every_attempt_infra_fails_the_series_naming_the_first_error(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The spec's example: reply_overpromise_risk, 2 cases x 2 repeats, no --simulate, no key."""
    for var in ("OPENROUTER_API_KEY", "AQVEN_SIMULATE", "AQVEN_OPENROUTER_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0")
    root = init_project(tmp_path / "lumen", "lumen")
    with client_for(root) as client:
        out = start(client, experiment_id="reply_overpromise_risk", cases=2, repeats=2)
        assert out["series"]["status"] == "running" and out["series"]["simulated"] is False
        assert out["series"]["spend"]["cap_usd"] == "1.00"
        sid = out["series"]["series_id"]
        snap = settle(client, sid)
        assert snap["status"] == "failed"
        assert snap["progress"]["done"] == 4 and snap["progress"]["infra_errors"] == 4
        error = snap["error"]
        assert error["code"] == "PROVIDER_KEY_MISSING"
        assert "OPENROUTER_API_KEY" in error["message"]
        first = attempts(root, sid)[0]
        assert error["run_id"] == first["run_id"]
        assert snap["verdict"]["verdict"] == "invalid"
        assert snap["eta"] is None and snap["finding"] is None
        assert Decimal(snap["spend"]["usd"]) == 0


def test_a_rate_limited_attempt_runs_once_more_at_the_end(fp: FakeProvider, tmp_path: Path) -> None:
    fp.script([FakeReply("429", retry_after="0")])  # the first model call of the series is rate limited
    root = write_tiny(tmp_path / "tiny", case_names(4, 0))
    with client_for(root) as client:
        sid = start(client, experiment_id="rate")["series"]["series_id"]  # live, against the fake provider
        snap = settle(client, sid)
        assert snap["status"] == "done", snap.get("error")
        assert snap["progress"]["reruns"] == 1
        assert snap["progress"]["infra_errors"] == 0 and snap["progress"]["counted"] == 4
        assert snap["matrix"][0]["counted"] == 4 and snap["matrix"][0]["passes"] == 4
        assert snap["verdict"]["cells"][0]["attempts"] == 4
    rows = attempts(root, sid)
    rerun = [a for a in rows if a["reruns"] == 1]
    assert len(rerun) == 1 and rerun[0]["idx"] == 0 and rerun[0]["outcome"] == "pass"
    by_idx = {a["idx"]: a for a in rows}
    # It ran again after every other attempt had finished: at the end of the series.
    assert all(rerun[0]["started_at"] >= a["ended_at"] for a in rows if a["idx"] != 0)
    assert len(fp.chat_requests()) == 5  # 4 attempts + the one re-run
    runs = runs_of(root, sid)
    assert len(runs) == 5  # the rate-limited run stays, with its trace
    limited = [r for r in runs if r["status"] == "failed"]
    assert len(limited) == 1 and limited[0]["error_code"] == "PROVIDER_RATE_LIMITED"
    # The first try failed before it spent anything, so it set no reserve: the next attempt ran alone too,
    # and only once that one had a price did attempts run side by side.
    assert by_idx[1]["started_at"] >= limited[0]["ended_at"]
    assert all(by_idx[i]["started_at"] >= by_idx[1]["ended_at"] for i in (2, 3))


def test_a_second_429_counts_as_an_infra_error(fp: FakeProvider, tmp_path: Path) -> None:
    # Replies go out in request order: the first attempt, the two others, then the re-run at the end.
    fp.script([FakeReply("429", retry_after="0"), FakeReply(), FakeReply(), FakeReply("429", retry_after="0")])
    root = write_tiny(tmp_path / "tiny", case_names(3, 0))
    with client_for(root) as client:
        sid = start(client, experiment_id="rate")["series"]["series_id"]
        snap = settle(client, sid)
        assert snap["status"] == "done"
        assert snap["progress"]["reruns"] == 1 and snap["progress"]["infra_errors"] == 1
        assert snap["progress"]["counted"] == 2
        rerun = next(a for a in attempts(root, sid) if a["reruns"] == 1)
        assert rerun["outcome"] == "infra" and rerun["error_code"] == "PROVIDER_RATE_LIMITED"
    assert len(fp.chat_requests()) == 4


def test_an_internal_error_in_one_attempt_does_not_stop_the_series(
    tiny_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aqven.engine.runner import Begun, Engine
    from aqven.store.records import RunRecord

    broken = first_on("dev", "boom")
    real = Engine.proceed  # what runs an attempt's run once it began

    async def proceed(self: Engine, begun: Begun, **options: Any) -> RunRecord:
        if begun.request.case_name == broken:
            raise KeyError("a bug")
        return await real(self, begun, **options)

    monkeypatch.setattr(Engine, "proceed", proceed)
    root = write_tiny(tmp_path / "tiny", [*case_names(25, 0), broken])
    with client_for(root) as client:
        snap = settle(client, start(client, experiment_id="rate", simulate=True)["series"]["series_id"])
        assert snap["status"] == "done" and snap["progress"]["done"] == 26
        assert snap["progress"]["infra_errors"] == 1 and snap["progress"]["counted"] == 25
        bad = next(a for a in attempts(root, snap["series_id"]) if a["case_name"] == broken)
        assert bad["error_code"] == "CODE_ERROR" and "KeyError" in bad["error_message"]
