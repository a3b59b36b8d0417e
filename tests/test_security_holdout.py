"""Held-out cases never reach an agent one by one through the REST calls an agent uses.

The reliability project with 6 working (dev) and 6 held-out cases, each with a unique name and input.
GET /api/datasets/{id}, a series on holdout (with include_cases, the series list, the experiment, the
findings), a holdout series that fails, and a look that names held-out cases: no held-out name or input
appears in any response; they are only counted (hidden_cases, holdout).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from soak_faults import EXPERIMENT, KEY_VARS, PACKAGE, write_project

from aqven.project.split import side_of

ENDED = ("done", "failed", "cancelled")


def holdout_names(n: int) -> list[str]:
    names: list[str] = []
    i = 0
    while len(names) < n:
        name = f"heldout{i:04d}"
        if side_of(PACKAGE, name) == "holdout":
            names.append(name)
        i += 1
    return names


HELD = holdout_names(6)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from aqven.server.app import create_app

    saved = {k: os.environ.pop(k, None) for k in (*KEY_VARS, "AQVEN_SIMULATE")}
    os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"
    root = tmp_path_factory.mktemp("holdout") / "p"
    dev = write_project(root, cases=6, simulator="seeded", extra_cases=HELD)
    assert all(side_of(PACKAGE, n) == "dev" for n in dev)
    try:
        with TestClient(create_app(root)) as c:
            yield c
    finally:
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v


def leaks(payload: Any) -> list[str]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return [name for name in HELD if name in text]


def finish(client: Any, sid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    state: dict[str, Any] = client.get(f"/api/series/{sid}").json()
    while state["status"] not in ENDED and time.monotonic() < deadline:
        state = client.get(f"/api/series/{sid}?wait_seconds=5").json()
    assert state["status"] in ENDED, state["progress"]
    return state


def test_dataset_lists_working_cases_only(client: Any) -> None:
    resp = client.get("/api/datasets/questions")
    assert resp.status_code == 200
    data = resp.json()
    assert leaks(data) == []
    assert (data["dev"], data["holdout"], data["hidden_cases"]) == (6, 6, 6)
    assert len(data["cases"]) == 6
    assert leaks(client.get("/api/datasets").json()) == []


def test_holdout_series_shows_numbers_not_cases(client: Any) -> None:
    started = client.post("/api/series", json={"experiment_id": EXPERIMENT, "on": "holdout", "simulate": True})
    assert started.status_code == 201, started.text
    assert leaks(started.json()) == []
    sid = started.json()["series"]["series_id"]
    state = finish(client, sid)
    assert state["status"] == "done" and state["progress"]["done"] == 6
    shown = client.get(f"/api/series/{sid}?include_cases=true").json()
    assert shown["cases"] == [] and shown["hidden_cases"] == 6
    for payload in (
        state,
        shown,
        client.get(f"/api/series/{sid}?wait_seconds=1&include_cases=true").json(),
        client.get("/api/series").json(),
        client.get(f"/api/experiments/{EXPERIMENT}").json(),
        client.get("/api/findings").json(),
    ):
        assert leaks(payload) == []


def test_failed_holdout_series_does_not_name_its_case(client: Any) -> None:
    # no key and no simulation: every attempt is an infrastructure error and the series fails
    started = client.post("/api/series", json={"experiment_id": EXPERIMENT, "on": "holdout"})
    sid = started.json()["series"]["series_id"]
    state = finish(client, sid)
    assert state["status"] == "failed" and state["error"]["code"] == "PROVIDER_KEY_MISSING"
    assert state["error"]["case"] is None
    assert leaks(state) == [] and leaks(client.get(f"/api/series/{sid}?include_cases=true").json()) == []


def test_look_naming_held_out_cases_lists_only_working_ones(client: Any) -> None:
    dev = [c["name"] for c in client.get("/api/datasets/questions").json()["cases"]][:2]
    look = {"flow_id": "answer", "dataset_id": "questions", "case_names": [*dev, *HELD[:3]]}
    started = client.post("/api/series", json={"look": look, "simulate": True})
    assert started.status_code == 201, started.text
    assert leaks(started.json()) == []
    sid = started.json()["series"]["series_id"]
    finish(client, sid)
    shown = client.get(f"/api/series/{sid}?include_cases=true").json()
    assert [row["case"] for row in shown["cases"]] == dev
    assert shown["hidden_cases"] == 3
    assert leaks(shown) == []
