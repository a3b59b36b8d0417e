"""series_start over REST: answers at once, client_op_id idempotency, body rules, NOT_RUNNABLE before any call."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aqven.project.split import side_of
from support.fake_provider import FakeProvider
from support.series_kit import (
    PACKAGE,
    attempts,
    case_names,
    client_for,
    rows,
    settle,
    start,
    write_tiny,
)


@pytest.fixture
def fp(monkeypatch: pytest.MonkeyPatch, tiny_env: Path) -> Iterator[FakeProvider]:
    """Live calls go to the fake provider, with a dummy key: any request that reaches it is recorded."""
    with FakeProvider() as server:
        monkeypatch.setenv("AQVEN_OPENROUTER_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-dummy")
        yield server


def test_start_answers_at_once_with_summary_and_launch_plan(
    tiny_env: Path,
    hold: Path,
    tmp_path: Path,
) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(3, 3))
    with client_for(root) as client:
        out = start(client, experiment_id="rate", cases=3, repeats=2, simulate=True)
        assert out["created"] is True
        series = out["series"]
        assert series["status"] == "running" and series["progress"]["done"] == 0
        assert series["progress"]["attempts"] == 6
        assert series["kind"] == "experiment" and series["experiment_id"] == "rate" and series["on"] == "dev"
        assert series["spend"]["cap_usd"] == "1.00" and series["spend"]["usd"] == "0"
        assert series["simulated"] is True and series["pause"] is None
        lp = out["launch_plan"]
        assert lp["attempts"] == 6 and lp["cases"] == 3 and lp["repeats"] == 2 and lp["variants"] == 1
        assert {"half_width", "recommended", "cap_usd", "needs_approval"} <= set(lp)
        assert not any("price" in k or "cost" in k for k in lp)
        (hold / "open").touch()
        assert settle(client, series["series_id"])["status"] == "done"


def test_same_client_op_id_returns_the_same_series(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(3, 3))
    with client_for(root) as client:
        first = start(client, experiment_id="rate", simulate=True, client_op_id="op-1")
        again = start(client, experiment_id="rate", simulate=True, client_op_id="op-1")
        assert again["created"] is False
        assert again["series"]["series_id"] == first["series"]["series_id"]
        other = start(client, experiment_id="rate", simulate=True, client_op_id="op-2")
        assert other["series"]["series_id"] != first["series"]["series_id"]
        settle(client, first["series"]["series_id"])
        settle(client, other["series"]["series_id"])
        # After the series ended the op id still names it.
        late = start(client, experiment_id="rate", simulate=True, client_op_id="op-1")
        assert late["series"]["series_id"] == first["series"]["series_id"] and late["created"] is False
        assert late["series"]["status"] == "done"
    assert len(rows(root, "SELECT id FROM series")) == 2


def test_twenty_simultaneous_starts_with_one_client_op_id_make_one_series(
    tiny_env: Path,
    tmp_path: Path,
) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(3, 3))
    results: list[Any] = []
    with client_for(root) as client:
        barrier = threading.Barrier(20)

        def one() -> None:
            barrier.wait()
            r = client.post("/api/series", json={"experiment_id": "rate", "simulate": True, "client_op_id": "same"})
            results.append((r.status_code, r.json()))

        threads = [threading.Thread(target=one) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 20
        assert all(code == 201 for code, _ in results), results
        ids = {body["series"]["series_id"] for _, body in results}
        assert len(ids) == 1
        assert sum(body["created"] for _, body in results) == 1
        snap = settle(client, ids.pop())
        assert snap["status"] == "done" and snap["progress"]["done"] == 3
    assert len(rows(root, "SELECT id FROM series")) == 1
    assert len(rows(root, "SELECT id FROM runs")) == 3  # one series' attempts, run once each


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"simulate": True}, "neither"),
        (
            {
                "experiment_id": "rate",
                "look": {"flow_id": "answer", "dataset_id": "cases", "case_names": ["c0000"]},
                "simulate": True,
            },
            "both",
        ),
        ({"experiment_id": "rate", "repeats": 21, "simulate": True}, "repeats"),
        ({"experiment_id": "rate", "repeats": 0, "simulate": True}, "repeats"),
        ({"experiment_id": "rate", "cases": 0, "simulate": True}, "cases"),
        ({"experiment_id": "rate", "cap_usd": "0", "simulate": True}, "cap"),
        ({"experiment_id": "rate", "on": "both", "simulate": True}, "on"),
    ],
)
def test_start_refuses_a_bad_body(
    tiny_env: Path,
    tmp_path: Path,
    body: dict[str, Any],
    where: str,
) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(3, 3))
    with client_for(root) as client:
        r = client.post("/api/series", json=body)
        assert r.status_code == 422, (where, r.text)
        assert r.json()["error"]["code"] == "VALIDATION_ERROR"
    assert rows(root, "SELECT id FROM series") == []
    assert rows(root, "SELECT id FROM runs") == []


def test_twenty_repeats_is_the_most_a_series_takes(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(1, 1))
    with client_for(root) as client:
        out = start(client, experiment_id="rate", repeats=20, simulate=True)
        assert out["series"]["progress"]["attempts"] == 20
        assert settle(client, out["series"]["series_id"])["status"] == "done"


def test_not_runnable_on_a_project_with_an_error_before_any_model_call(fp: FakeProvider, tmp_path: Path) -> None:
    # A live series (no --simulate) would call the fake provider: nothing may reach it.
    root = write_tiny(
        tmp_path / "tiny",
        case_names(3, 3),
        overrides={"agents/broken.yaml": "model: no-provider-here\nsettings: {temperature: 9}\n"},
    )
    with client_for(root) as client:
        r = client.post("/api/series", json={"experiment_id": "rate", "client_op_id": "x"})
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "NOT_RUNNABLE"
        problems = err["details"]["problems"]
        assert problems and all(p["code"].startswith("E_") for p in problems)
        assert any(p["file"] == "agents/broken.yaml" for p in problems)
        # The same op id starts nothing later either: nothing was stored.
        assert client.get("/api/series").json() == []
    assert rows(root, "SELECT id FROM series") == []
    assert rows(root, "SELECT id FROM runs") == []
    assert fp.chat_requests() == []


def test_not_runnable_lists_one_problem_per_case_and_variant(fp: FakeProvider, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(3, 3))
    # Run on the side of the case that lacks the node_outputs the range needs (both cases, if they share it).
    on = side_of(PACKAGE, "without_draft")
    with client_for(root) as client:
        r = client.post("/api/series", json={"experiment_id": "ranged", "on": on})
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "NOT_RUNNABLE"
        problems = err["details"]["problems"]
        assert sorted((p["case"], p["variant"]) for p in problems) == [
            ("without_draft", "w"),
            ("without_draft", "w2"),
        ]
        assert {p["code"] for p in problems} == {"NODE_OUTPUTS_MISSING"}
        assert all("first" in p["message"] for p in problems)
    assert rows(root, "SELECT id FROM series") == []
    assert rows(root, "SELECT id FROM runs") == []
    assert fp.chat_requests() == []


def test_a_look_runs_named_cases_once_with_no_verdict(tiny_env: Path, tmp_path: Path) -> None:
    names = case_names(2, 2)
    root = write_tiny(tmp_path / "tiny", names)
    with client_for(root) as client:
        look = {"flow_id": "answer", "dataset_id": "cases", "case_names": names}
        out = start(client, look=look, simulate=True)
        assert out["series"]["kind"] == "look" and out["series"]["progress"]["attempts"] == 4
        snap = settle(client, out["series"]["series_id"])
        assert snap["status"] == "done" and snap["verdict"] is None and snap["finding"] is None
        assert [a["status"] for a in attempts(root, snap["series_id"])] == ["done"] * 4
        r = client.post("/api/series", json={"look": {**look, "case_names": ["nope"]}, "simulate": True})
        assert r.status_code == 404 and r.json()["error"]["code"] == "CASE_NOT_FOUND"
