"""Held-out cases never reach an agent one by one through the REST calls an agent uses.

The reliability project with 6 working (dev) and 6 held-out cases, each with a unique name and input.
GET /api/datasets/{id}, a series on holdout (with include_cases, the series list, the experiment, the
findings), a holdout series that fails, and a look that names held-out cases: no held-out name or input
appears in any response; they are only counted (hidden_cases, holdout).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aqven.models.outcomes import KEY_ENV_VARS as KEY_VARS
from aqven.project.split import side_of
from support.commands import api_client
from support.fault_soak import EXPERIMENT, PACKAGE, write_project
from support.person import person_headers

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

    from aqven.server.app import create_app

    saved = {k: os.environ.pop(k, None) for k in (*KEY_VARS, "AQVEN_SIMULATE")}
    os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"
    root = tmp_path_factory.mktemp("holdout") / "p"
    dev = write_project(root, cases=6, simulator="seeded", extra_cases=HELD)
    assert all(side_of(PACKAGE, n) == "dev" for n in dev)
    try:
        with api_client(create_app(root)) as c:
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
    assert state["error"]["run_id"] is None  # no handle on the held-out attempt's run either
    assert "API_KEY" in state["error"]["message"]  # a message AQVEN writes without the case is kept
    assert leaks(state) == [] and leaks(client.get(f"/api/series/{sid}?include_cases=true").json()) == []


def test_failed_dev_series_points_at_its_first_failing_run(client: Any) -> None:
    started = client.post("/api/series", json={"experiment_id": EXPERIMENT, "on": "dev", "cases": 2})
    state = finish(client, started.json()["series"]["series_id"])
    assert state["status"] == "failed" and state["error"]["case"] and state["error"]["run_id"]
    run = client.get(f"/api/runs/{state['error']['run_id']}")
    assert run.status_code == 200 and run.json()["case_name"] == state["error"]["case"]


def held_out_series(client: Any) -> tuple[str, list[str]]:
    """A finished held-out series and the ids of its runs (read from the store, as no REST call lists them)."""
    started = client.post("/api/series", json={"experiment_id": EXPERIMENT, "on": "holdout", "simulate": True})
    sid = started.json()["series"]["series_id"]
    assert finish(client, sid)["status"] == "done"
    runs = client.app.state.service.runs.list_runs(series_id=sid, limit=100)
    assert sorted(r.case_name for r in runs) == sorted(HELD)
    return sid, [r.id for r in runs]


def test_runs_of_a_held_out_series_are_not_listed_only_counted(client: Any) -> None:
    sid, _ids = held_out_series(client)
    listed = client.get("/api/runs", params={"series_id": sid})
    assert listed.status_code == 200 and listed.json() == []
    assert listed.headers["x-hidden-holdout-runs"] == "6"
    everything = client.get("/api/runs", params={"limit": 500})
    assert leaks(everything.json()) == [] and int(everything.headers["x-hidden-holdout-runs"]) >= 6
    assert all(r["case_name"] is None or r["case_name"] not in HELD for r in everything.json())


def test_a_held_out_run_its_events_and_nodes_are_refused(client: Any) -> None:
    _sid, ids = held_out_series(client)
    for run_id in ids[:2]:
        for path in (
            f"/api/runs/{run_id}",
            f"/api/runs/{run_id}?wait_seconds=1",
            f"/api/runs/{run_id}/events",
            f"/api/runs/{run_id}/nodes/reply",
        ):
            resp = client.get(path)
            assert resp.status_code == 403, (path, resp.text)
            error = resp.json()["error"]
            assert error["code"] == "HOLDOUT_HIDDEN" and "never shown one by one" in error["hint"]
            assert "Traceback" not in resp.text and leaks(resp.json()) == []
        answered = client.post(
            f"/api/runs/{run_id}/human/reply", json={"answer": {"answer": "x"}}, headers=person_headers()
        )
        assert answered.status_code == 403 and answered.json()["error"]["code"] == "HOLDOUT_HIDDEN"
    assert client.get("/api/runs/run_nope").json()["error"]["code"] == "RUN_NOT_FOUND"


def test_a_run_of_a_held_out_case_is_not_started(client: Any) -> None:
    svc = client.app.state.service
    before = len(svc.runs.list_runs(limit=500))
    resp = client.post("/api/runs", json={"flow_id": "answer", "case": HELD[0], "simulate": True, "wait": True})
    assert resp.status_code == 403 and resp.json()["error"]["code"] == "HOLDOUT_HIDDEN"
    assert leaks(resp.json()["error"]["message"]) == []
    assert len(svc.runs.list_runs(limit=500)) == before  # refused before anything was stored or ran
    assert client.post("/api/runs", json={"flow_id": "answer", "case": "nope"}).json()["error"]["code"] == (
        "CASE_NOT_FOUND"
    )
    dev = client.get("/api/datasets/questions").json()["cases"][0]["name"]
    ran = client.post("/api/runs", json={"flow_id": "answer", "case": dev, "simulate": True, "wait": True})
    assert ran.status_code == 201 and ran.json()["case_name"] == dev
    assert client.get(f"/api/runs/{ran.json()['id']}").status_code == 200


def test_not_runnable_names_working_cases_only(tmp_path: Path) -> None:
    """A case whose input breaks the flow's input type cannot run: NOT_RUNNABLE lists the working ones by name
    and the held-out ones by a label, without their messages (a type error quotes the input), and counts them."""

    from aqven.server.app import create_app

    root = tmp_path / "p"
    dev = write_project(root, cases=3, simulator="seeded", extra_cases=HELD[:2])
    dataset = root / "datasets/questions.yaml"
    text = dataset.read_text()
    for i, name in enumerate([dev[0], *HELD[:2]]):
        text = text.replace(f'question: "{name}"', f"question: {987650 + i}")
    dataset.write_text(text)
    look = {"flow_id": "answer", "dataset_id": "questions", "case_names": [*dev, *HELD[:2]]}
    with api_client(create_app(root)) as c:
        answers = [
            c.post("/api/series", json={"look": look, "simulate": True}),
            c.post("/api/series", json={"experiment_id": EXPERIMENT, "on": "holdout", "simulate": True}),
        ]
    for resp, dev_named in zip(answers, (True, False), strict=True):
        assert resp.status_code == 422, resp.text
        error = resp.json()["error"]
        assert error["code"] == "NOT_RUNNABLE" and error["details"]["held_out_cases"] == 2
        cases = [p["case"] for p in error["details"]["problems"]]
        assert cases == ([dev[0]] if dev_named else []) + ["<held-out case 1>", "<held-out case 2>"]
        assert leaks(resp.json()) == [] and "987651" not in resp.text and "987652" not in resp.text
        assert all(p["code"] == "RUN_INPUT_INVALID" for p in error["details"]["problems"])
    assert "987650" in answers[0].text  # a working case's problem is shown as it is


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


def test_studio_chat_tools_hide_held_out_runs(client: Any) -> None:
    """The Studio chat agent's run tools ask the same rule: held-out runs are refused and only counted."""
    import asyncio

    from aqven.server import chat

    sid, ids = held_out_series(client)
    svc = client.app.state.service

    async def ask() -> list[Any]:
        return [
            await chat.call_tool(svc, "run_get", {"run_id": ids[0]}),
            await chat.call_tool(svc, "run_events", {"run_id": ids[0]}),
            await chat.call_tool(svc, "run_get_node", {"run_id": ids[0], "node_id": "reply"}),
            await chat.call_tool(svc, "list_runs", {"series_id": sid}),
        ]

    got, events, node, listed = asyncio.run(ask())
    for answer in (got, events, node):
        assert answer["error"]["code"] == "HOLDOUT_HIDDEN", answer
    assert listed == {"runs": [], "hidden_holdout_runs": 6}
    assert leaks([got, events, node, listed]) == []


@pytest.mark.parametrize(
    ("extra", "known"),
    [
        ("colour: blue\n", True),  # another key's mistake: the written package still salts the split
        ("package: 9-not-a-name\n", False),  # no valid package: every case counts as held out
    ],
)
def test_a_broken_aqven_yaml_never_moves_held_out_cases_to_dev(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str, known: bool
) -> None:

    from aqven.server.app import create_app

    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0")
    root = tmp_path / "p"
    dev = write_project(root, cases=6, simulator="seeded", extra_cases=HELD)
    cfg = root / "aqven.yaml"
    text = cfg.read_text()
    if extra.startswith("package:"):
        text = "\n".join(line for line in text.splitlines() if not line.startswith("package:")) + "\n"
    cfg.write_text(text + extra)
    with api_client(create_app(root)) as c:
        data = c.get("/api/datasets/questions").json()
        assert leaks(data) == []
        assert data["dev"] == (6 if known else 0)
        assert sorted(x["name"] for x in data["cases"]) == (sorted(dev) if known else [])
        refused = c.post("/api/runs", json={"flow_id": "answer", "case": HELD[0], "simulate": True})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "HOLDOUT_HIDDEN"
        working = c.post("/api/runs", json={"flow_id": "answer", "case": dev[0], "simulate": True})
        assert working.status_code == (201 if known else 403), working.text
