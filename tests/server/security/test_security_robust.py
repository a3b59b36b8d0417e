"""Robust inside as well as at the door, against a real server process.

* A provider that echoes the key in a *successful* answer: the output is stored and shown masked, in the run,
  its events, the attempt and every byte under `.aqven/` (the old redaction only covered error messages).
* A code node that prints, returns and raises with the value of an agent's own `api_key_env` variable (an agent
  added while the server runs; attempts in worker processes): masked the same way, the server's log included.
* A series whose driver raises (here: a cap of 1e999999999 stored before caps were checked, which made the
  runner raise `decimal.Overflow` on every start) fails with `SERIES_INTERNAL_ERROR` instead of staying
  `running` forever, across restarts; the server keeps answering.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from support.fake_provider import FakeProvider, FakeReply
from support.fault_soak import EXPERIMENT, LiveServer, http, live_server, server_env, wait_series, write_project
from support.series_kit import case_names, write_tiny
from support.store_access import places_holding, write


def test_a_key_echoed_in_a_successful_output_is_never_stored(tmp_path: Path) -> None:
    key = f"PLANTED{uuid.uuid4().hex}KEY"
    root = tmp_path / "p"
    write_project(root, cases=3)
    with FakeProvider() as fp:
        fp.default = FakeReply(output={"answer": f"my key is {key}, and sk-or-v1-{uuid.uuid4().hex}"})
        env = server_env(
            AQVEN_OPENROUTER_BASE_URL=fp.base_url,
            OPENROUTER_API_KEY=key,
            AQVEN_PRICES_FILE=str(tmp_path / "no-prices.json"),
        )
        with live_server(root, env) as server:
            run = http(
                server.port, "POST", "/api/runs", {"flow_id": "answer", "input": {"question": "x"}, "wait": True}
            )
            assert run["status"] == "done", run
            assert run["output"]["answer"].startswith("my key is ***") and "sk-***" in run["output"]["answer"]
            events = json.dumps(http(server.port, "GET", f"/api/runs/{run['id']}/events"))
            sid = http(server.port, "POST", "/api/series", {"experiment_id": EXPERIMENT})["series"]["series_id"]
            state = wait_series(server, sid, limit_s=60)
            assert state["status"] == "done" and key not in json.dumps(state) and key not in events
        assert all(r.headers.get("authorization") == f"Bearer {key}" for r in fp.chat_requests())
    assert places_holding(root, key) == []


LEAK_FLOW = """\
input: {text: string}
output: {reply: string}
nodes:
  - id: leak
    kind: code
    code: leak.py:leak
    inputs: {text: $input.text}
    output: {reply: string}
"""

LEAK_PY = """\
import os


def leak(text: str) -> dict:
    key = os.environ.get("MY_COMPANY_KEY", "")
    print(f"the key is {key}")
    if "fail" in text:
        raise RuntimeError(f"no luck with {key}")
    return {"reply": f"good {key}"}
"""

LEAK_EXPERIMENT = """\
failure_mode: leak
description: The leak flow answers well.
subject: {flow: leak}
dataset: {id: cases}
checks:
  - id: ok
    function: checks/ok.py:reply_ok
metrics:
  ok: {check: ok}
question: {kind: threshold, metric: ok, bound: 0.5, margin: 0.05}
repeats: 1
"""

COMPANY_AGENT = """\
model: openai-compatible:company-model
base_url: http://127.0.0.1:9/v1
api_key_env: MY_COMPANY_KEY
settings: {temperature: 0, max_tokens: 100, timeout_s: 10}
"""


def test_a_custom_api_key_env_echoed_by_a_code_node_is_never_stored_or_served(tmp_path: Path) -> None:
    """An agent may name its key variable (`api_key_env: MY_COMPANY_KEY`). A code node that prints, returns and
    raises with its value: the key was stored in clear and served by the run, its events, node and Studio trace.
    The agent is added while the server runs (a reload), and the series' attempts run in worker processes."""
    key = f"COMPANY{uuid.uuid4().hex}KEY"
    root = write_tiny(
        tmp_path / "tiny",
        case_names(4, 0),
        overrides={
            "flows/leak/flow.yaml": LEAK_FLOW,
            "flows/leak/leak.py": LEAK_PY,
            "experiments/leaky/experiment.yaml": LEAK_EXPERIMENT,
        },
    )
    config = root / "aqven.yaml"
    config.write_text(config.read_text().replace("workers: 1", "workers: 2"))
    env = server_env(MY_COMPANY_KEY=key, AQVEN_SIM_LATENCY_SCALE="0", AQVEN_PRICES_FILE=str(tmp_path / "none.json"))
    answers: list[str] = []
    with live_server(root, env) as server:
        assert "company" not in json.dumps(server.get("/api/agents"))
        (root / "agents" / "company.yaml").write_text(COMPANY_AGENT)  # the project reloads with a new agent
        deadline = time.monotonic() + 20
        while "company" not in json.dumps(server.get("/api/agents")) and time.monotonic() < deadline:
            time.sleep(0.2)
        runs = []
        for text in ("hello", "fail now"):
            run = server.post("/api/runs", {"flow_id": "leak", "input": {"text": text}, "wait": True})
            runs.append(run)
            answers.append(json.dumps(run))
        assert runs[0]["status"] == "done" and runs[0]["output"]["reply"] == "good ***", runs[0]
        assert runs[1]["status"] == "failed" and "no luck with ***" in json.dumps(runs[1]["error"]), runs[1]
        sid = server.post("/api/series", {"experiment_id": "leaky"})["series"]["series_id"]
        state = wait_series(server, sid, limit_s=60)
        assert state["status"] == "done", state
        answers.append(json.dumps(state))
        series_runs = server.get(f"/api/runs?series_id={sid}")
        answers.append(json.dumps(series_runs))
        run_ids = [r["id"] for r in runs] + [r["id"] for r in series_runs]
        assert len(run_ids) == 6
        for run_id in run_ids:
            for path in (
                f"/api/runs/{run_id}",
                f"/api/runs/{run_id}/events",
                f"/api/runs/{run_id}/nodes/leak",
                f"/api/studio/runs/{run_id}/trace",
            ):
                answers.append(json.dumps(server.get(path)))
        answers.append(json.dumps(server.get(f"/api/studio/series/{sid}/attempts")))
    assert [a for a in answers if key in a] == []
    assert sum("good ***" in a for a in answers) >= 6  # the outputs were there, masked
    log = (root / ".aqven" / "server.log").read_text()
    assert "the key is ***" in log  # what the code printed reached the log (from the server and its workers)
    assert places_holding(root, key) == []


def test_a_series_whose_driver_raises_fails_with_a_code_across_restarts(tmp_path: Path) -> None:
    root = tmp_path / "p"
    write_project(root, cases=3, simulator="seeded")
    server = LiveServer(root, server_env(AQVEN_SIM_LATENCY_SCALE="0"))
    server.start()
    try:
        body = {"experiment_id": EXPERIMENT, "simulate": True, "cap_usd": "500.00"}  # above the project cap: waits
        sid = server.post("/api/series", body)["series"]["series_id"]
        assert server.get(f"/api/series/{sid}")["status"] == "awaiting_approval"
        server.stop()
        write(  # what an unchecked approve once stored
            root,
            "UPDATE series SET status='running', cap_usd='1e999999999', pause=NULL, active_since=? WHERE id=?",
            (time.time(), sid),
        )
        for _restart in range(2):
            server.start()
            deadline = time.monotonic() + 30
            state = server.get(f"/api/series/{sid}")
            while state["status"] == "running" and time.monotonic() < deadline:
                time.sleep(0.2)
                state = server.get(f"/api/series/{sid}")
            assert state["status"] == "failed", state["status"]
            assert state["error"]["code"] == "SERIES_INTERNAL_ERROR" and "server.log" in state["error"]["message"]
            assert server.get("/api/health")["status"] == "ok"
            other = server.post("/api/series", {"experiment_id": EXPERIMENT, "simulate": True})["series"]["series_id"]
            assert wait_series(server, other, limit_s=60)["status"] == "done"
            server.stop()
        assert "Overflow" in (root / ".aqven" / "server.log").read_text()
    finally:
        server.stop()
