"""MCP over real transports: `aqven mcp` over stdio (which starts the project server) and streamable HTTP at
`/mcp` of a spawned project server, with the SDK's ClientSession.

The first test is the loop a coding agent walks on the showcase project with simulated models (AQVEN_SIMULATE=1
in the server's environment): read FINDINGS.md, check, look, explore on working cases, read the failing cases
and open a run, confirm once on held-out cases, quote the verdict; and it can neither see a held-out case nor
approve a paused series.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import anyio.to_thread
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from aqven.project.init import init_project
from aqven.project.split import side_of
from aqven.server.lifecycle import ensure_server, pid_alive, read_server
from aqven.server.mcp_backend import Backend
from aqven.server.mcp_server import build_server
from support.commands import server_token, stop_server
from support.mcp_agent import Agent

SETTLED = ("done", "cancelled", "failed", "awaiting_approval", "waiting_human")
SERVER_ENV = {"AQVEN_SIMULATE": "1", "AQVEN_SIM_LATENCY_SCALE": "0"}


def showcase_cases(root: Path) -> list[Any]:
    """What the test (not the agent) knows: every case of support_case_cases, from the file."""
    from aqven.project.loader import load_project

    dataset = load_project(root).datasets["support_case_cases"]
    assert dataset is not None
    return list(dataset.cases)


def stop(root: Path) -> None:
    """Stop the project server; one this process spawned is reaped (a zombie still answers kill(pid, 0))."""
    info = read_server(root)
    if info is None:
        return
    pid = int(info["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    stop_server(root)  # SIGKILL if it is still there


@pytest.fixture(scope="module")
def lumen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = init_project(tmp_path_factory.mktemp("mcp") / "lumen", "lumen")
    yield root
    stop(root)


def urlopen_json(port: int, path: str, token: str) -> Any:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def runs_in_db(root: Path, series_id: str) -> list[dict[str, Any]]:
    """The runs of a series as the project database holds them (no REST call lists held-out runs)."""
    import sqlite3

    uri = f"file:{root / '.aqven' / 'aqven.sqlite'}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT id, case_name FROM runs WHERE series_id=?", (series_id,))]


async def settle(agent: Agent, series_id: str, *, include_cases: bool = False) -> dict[str, Any]:
    args = {"series_id": series_id, "wait_seconds": 50, "include_cases": include_cases}
    state = await agent.call("series_get", args)
    while state["status"] not in SETTLED:
        state = await agent.call("series_get", args)
    return state


async def test_an_agent_walks_the_loop_over_stdio(lumen: Path, tmp_path: Path) -> None:
    stop(lumen)
    assert read_server(lumen) is None  # `aqven mcp` starts the project server itself
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "aqven", "mcp"],
        env={**SERVER_ENV, "AQVEN_PRICES_FILE": str(tmp_path / "no-prices.json")},
        cwd=lumen,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "aqven" and "FINDINGS.md" in (init.instructions or "")
        agent = Agent(session)
        tools = {t.name for t in (await session.list_tools()).tools}
        assert not [t for t in tools if "approve" in t or "stop" in t or "continue" in t]

        # Read what the project knows, then check it.
        assert (await agent.call("read_findings_md"))["exists"] is False
        assert (await agent.call("aqven_check"))["ok"] is True
        flows = await agent.call("list_flows")
        assert "support_case" in [f["id"] for f in flows["flows"]]
        dataset = await agent.call("get_dataset", {"dataset_id": "support_case_cases"})
        dev_names = [c["name"] for c in dataset["cases"]]
        assert "strip_flicker_credit" in dev_names and dataset["hidden_cases"] == 6

        # Look at what the flow does on two working cases and one held-out case (named, so it runs; not shown).
        guessed = next(c.name for c in showcase_cases(lumen) if side_of("lumen", c.name) == "holdout")
        look = {"flow_id": "support_case", "dataset_id": "support_case_cases", "case_names": [*dev_names[:2], guessed]}
        started = await agent.call("series_start", {"look": look})
        assert started["series"]["simulated"] is True and started["launch_plan"]["attempts"] == 3
        state = await settle(agent, started["series"]["series_id"], include_cases=True)
        assert state["status"] == "done" and state["progress"]["done"] == 3 and state["verdict"] is None
        assert sorted(r["case"] for r in state["cases"]) == sorted(dev_names[:2]) and state["hidden_cases"] == 1

        # Explore on working cases (each series draws its own simulators' seed: explore until one fails).
        explored = 0
        for _ in range(6):
            explored += 1
            started = await agent.call(
                "series_start", {"experiment_id": "reply_overpromise_risk", "on": "dev", "repeats": 10}
            )
            assert started["series"]["status"] == "running" and started["launch_plan"]["attempts"] == 60
            state = await settle(agent, started["series"]["series_id"], include_cases=True)
            assert state["status"] == "done" and state["verdict"]["verdict"] == "signal" and state["finding"] is None
            failing = [r for r in state["cases"] if r["failing"]]
            if failing:
                break
        assert failing and state["cases"][0]["failing"] is True  # failing cases first
        attempt = next(a for a in failing[0]["variants"]["as_written"]["attempts"] if a["outcome"] == "fail")
        assert attempt["error"] == "CHECK_FAILED" and attempt["run_id"]
        run = await agent.call("run_get", {"run_id": attempt["run_id"]})
        assert run["case_name"] == failing[0]["case"] and run["status"] == "done"
        events = await agent.call("run_events", {"run_id": attempt["run_id"]})
        nodes = [e["node_id"] for e in events["events"] if e["kind"] == "node_start"]
        assert "revise" in nodes and events["first_failed_node"] is None
        node = await agent.call("run_get_node", {"run_id": attempt["run_id"], "node_id": "revise"})
        assert node["status"] == "done" and node["model_calls"]

        # Confirm once on held-out cases, and quote the verdict.
        started = await agent.call("series_start", {"experiment_id": "reply_overpromise_risk", "on": "holdout"})
        state = await settle(agent, started["series"]["series_id"], include_cases=True)
        assert state["status"] == "done" and state["cases"] == [] and state["hidden_cases"] == 6
        verdict = state["verdict"]
        # The held-out simulation draws its own seed: six cases decide nothing, or refute the bar (0.98, with a
        # held-out case near 0.83) in an unlucky draw; never confirm it.
        assert verdict["verdict"] in ("inconclusive", "refuted"), verdict
        assert verdict["text"].startswith(f"{verdict['verdict'].capitalize()} on 6 held-out cases"), verdict
        assert state["finding"] and state["finding"].startswith("experiments/reply_overpromise_risk/findings/")
        findings_md = await agent.call("read_findings_md")
        assert findings_md["exists"] and "reply_overpromise_risk" in findings_md["text"]
        assert [f["verdict"] for f in (await agent.call("list_findings"))["findings"]] == [verdict["verdict"]]

        # It cannot see a held-out case: not in any answer, and not by opening a held-out attempt's run.
        from aqven.server.client import Client

        person = Client(lumen, start=False)
        person.port = int(cast(dict[str, Any], read_server(lumen))["port"])
        person.token = server_token(lumen)
        assert person.get("/api/runs", series_id=state["series_id"]) == []  # REST does not list them either
        held_runs = runs_in_db(lumen, state["series_id"])
        assert len(held_runs) == 12
        for tool in ("run_get", "run_events"):
            err = await agent.error(tool, {"run_id": held_runs[0]["id"]})
            assert err["code"] == "HOLDOUT_HIDDEN"
        held_out = {c.name for c in showcase_cases(lumen) if side_of("lumen", c.name) == "holdout"}
        assert {r["case_name"] for r in held_runs} == held_out and guessed in held_out
        err = await agent.error("run_start", {"flow_id": "support_case", "case": guessed})
        assert err["code"] == "HOLDOUT_HIDDEN"
        assert not [n for n in held_out if agent.saw(n)]

        # It cannot approve: a series above the project cap waits for a person, and the agent can only cancel it.
        paused = await agent.call("series_start", {"experiment_id": "reply_overpromise_risk", "cap_usd": "5.00"})
        assert paused["series"]["status"] == "awaiting_approval"
        assert paused["series"]["pause"]["reason"] == "cap_above_project"
        assert paused["series"]["eta"]["state"] == "paused"
        assert (await agent.raw("series_approve", {"series_id": paused["series"]["series_id"]})).is_error
        still = await agent.call("series_get", {"series_id": paused["series"]["series_id"], "wait_seconds": 1})
        assert still["status"] == "awaiting_approval" and still["progress"]["done"] == 0
        await agent.call("series_cancel", {"series_id": paused["series"]["series_id"], "reason": "not approved"})

        # The project server stopped between two calls: the next call starts it again.
        first_pid = cast(dict[str, Any], read_server(lumen))["pid"]
        stop(lumen)
        listed = await agent.call("series_list", {"experiment_id": "reply_overpromise_risk"})
        assert len(listed["series"]) == explored + 2 and cast(dict[str, Any], read_server(lumen))["pid"] != first_pid
    info = read_server(lumen)
    assert info is not None and info["healthy"]  # the server outlives the stdio bridge


async def test_streamable_http_on_the_project_server(lumen: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in SERVER_ENV.items():
        monkeypatch.setenv(key, value)
    port = ensure_server(lumen)
    url = f"http://127.0.0.1:{port}/mcp"
    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {server_token(lumen)}"})
    async with (
        http_client,
        streamable_http_client(url, http_client=http_client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        agent = Agent(session)
        listed = {t.name: t for t in (await session.list_tools()).tools}
        local = {t.name: t for t in await build_server(cast(Backend, None)).list_tools()}
        assert sorted(listed) == sorted(local)
        for name, tool in listed.items():
            assert tool.input_schema == local[name].input_schema, name
            assert tool.output_schema == local[name].output_schema, name

        started = await agent.call(
            "series_start",
            {"experiment_id": "reply_overpromise_risk", "cases": 2, "repeats": 2, "client_op_id": "http-1"},
        )
        again = await agent.call(
            "series_start",
            {"experiment_id": "reply_overpromise_risk", "cases": 2, "repeats": 2, "client_op_id": "http-1"},
        )
        sid = started["series"]["series_id"]
        assert again["series"]["series_id"] == sid and again["created"] is False
        state = await settle(agent, sid, include_cases=True)
        assert state["status"] == "done" and len(state["cases"]) == 2 and state["simulated"] is True
        err = await agent.error("series_cancel", {"series_id": sid})
        assert err["code"] == "SERIES_STATE_CONFLICT"
        err = await agent.error("series_start", {"experiment_id": "reply_overpromise_risk", "repeats": 30})
        assert err["code"] == "VALIDATION_ERROR"
        held_out = next(c.name for c in showcase_cases(lumen) if side_of("lumen", c.name) == "holdout")
        err = await agent.error("run_start", {"flow_id": "support_case", "case": held_out})
        assert err["code"] == "HOLDOUT_HIDDEN" and held_out not in json.dumps(err)
        look = {"flow_id": "support_case", "dataset_id": "support_case_cases", "case_names": [held_out]}
        looked = await settle(agent, (await agent.call("series_start", {"look": look}))["series"]["series_id"])
        assert looked["status"] == "done" and looked["progress"]["done"] == 1
        path = f"/api/runs?series_id={looked['series_id']}"
        assert await anyio.to_thread.run_sync(lambda: urlopen_json(port, path, server_token(lumen))) == []
        [held_run] = [r["id"] for r in runs_in_db(lumen, looked["series_id"])]
        err = await agent.error("run_get_node", {"run_id": held_run, "node_id": "revise"})
        assert err["code"] == "HOLDOUT_HIDDEN"
