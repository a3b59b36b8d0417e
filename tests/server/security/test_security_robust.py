"""Robust inside as well as at the door, against a real server process.

* A provider that echoes the key in a *successful* answer: the output is stored and shown masked, in the run,
  its events, the attempt and every byte under `.aqven/` (the old redaction only covered error messages).
* A series whose driver raises (here: a cap of 1e999999999 stored before caps were checked, which made the
  runner raise `decimal.Overflow` on every start) fails with `SERIES_INTERNAL_ERROR` instead of staying
  `running` forever, across restarts; the server keeps answering.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from pathlib import Path

from support.fake_provider import FakeProvider, FakeReply
from support.fault_soak import EXPERIMENT, LiveServer, http, live_server, server_env, wait_series, write_project


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
    files = [p for p in (root / ".aqven").rglob("*") if p.is_file()]
    assert any(p.name == "aqven.sqlite" for p in files)
    assert [str(p) for p in files if key.encode() in p.read_bytes()] == []


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
        with sqlite3.connect(root / ".aqven" / "aqven.sqlite") as db:  # what an unchecked approve once stored
            db.execute(
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
