"""The MCP tools through the SDK's ClientSession, in-process (memory streams) against ProjectService.

Each rule of "How to run experiments and series as an agent" that the tools carry is asserted here through a
real MCP client: typed tools, no approval, series_start/get/cancel, eta, spend as a lower bound, dev cases only,
held-out cases never shown one by one (series and run tools), NOT_RUNNABLE before any model call, a missing
key, SERIES_STATE_CONFLICT and validation errors with stable codes.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from aqven.project.init import init_project
from aqven.server.mcp_server import tool_names
from support.fake_provider import FakeProvider, FakeReply
from support.mcp_agent import agent_on, dev, held_out, names, settle, tiny_cases, write_tiny
from support.paths import REPO

KEYS = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in (*KEYS, "AQVEN_SIMULATE", "AQVEN_OPENROUTER_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0")
    monkeypatch.setenv("AQVEN_PRICES_FILE", str(tmp_path / "no-prices.json"))


@pytest.fixture
def fp(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        monkeypatch.setenv("AQVEN_OPENROUTER_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-dummy")
        yield server


# ---- the tools ------------------------------------------------------------------------------------------------


async def test_tools_are_typed_and_none_approves(tmp_path: Path) -> None:
    async with agent_on(write_tiny(tmp_path / "tiny")) as (agent, _svc):
        tools = {t.name: t for t in (await agent.session.list_tools()).tools}
        assert sorted(tools) == sorted(tool_names())
        for needed in ("aqven_check", "series_start", "series_get", "series_cancel", "run_start", "run_get"):
            assert needed in tools
        assert {"run_events", "run_get_node", "list_flows", "list_datasets", "list_experiments"} <= set(tools)
        assert {"list_findings", "read_findings_md"} <= set(tools)
        assert not [n for n in tools if any(w in n for w in ("approve", "continue", "resume", "stop"))]
        for tool in tools.values():
            assert tool.input_schema["type"] == "object" and tool.input_schema["additionalProperties"] is False
            assert tool.output_schema is not None and tool.output_schema["type"] == "object", tool.name
        start = tools["series_start"].input_schema["properties"]
        assert set(start) == {
            "experiment_id", "look", "on", "cases", "repeats", "cap_usd", "client_op_id", "simulate"
        }  # fmt: skip
        assert "maximum" in str(start["repeats"]) and "20" in str(start["repeats"])
        assert "holdout" in str(start["on"]) and "dev" in str(start["on"])
        wait = tools["series_get"].input_schema["properties"]["wait_seconds"]
        assert wait["minimum"] == 0 and wait["maximum"] == 50
        assert set(tools["series_cancel"].input_schema["properties"]) == {"series_id", "reason"}
        out = (tools["series_get"].output_schema or {})["properties"]
        assert {"status", "progress", "spend", "eta", "matrix", "verdict", "cases", "hidden_cases"} <= set(out)
        assert (await agent.raw("series_approve", {"series_id": "x"})).is_error

        check = await agent.call("aqven_check")
        assert check["ok"] is True and check["errors"] == 0
        assert (await agent.call("read_findings_md"))["exists"] is False


async def test_validation_errors_carry_the_stable_code(tmp_path: Path) -> None:
    async with agent_on(write_tiny(tmp_path / "tiny")) as (agent, _svc):
        look = {"flow_id": "answer", "dataset_id": "tickets", "case_names": ["t000"]}
        for args in (
            {"experiment_id": "reply_ok", "repeats": 21},
            {"experiment_id": "reply_ok", "look": look},
            {},
            {"experiment_id": "reply_ok", "approve": True},
            {"experiment_id": "reply_ok", "cap_usd": "-1"},
            {"experiment_id": "reply_ok", "on": "both"},
            {"look": {**look, "case_names": []}},
        ):
            err = await agent.error("series_start", args)
            assert err["code"] == "VALIDATION_ERROR", (args, err)
            assert err["message"]
        err = await agent.error("series_get", {"series_id": "ser_x", "wait_seconds": 51})
        assert err["code"] == "VALIDATION_ERROR" and err["details"]["problems"][0]["loc"] == ["wait_seconds"]
        assert (await agent.error("series_get", {"series_id": "ser_nope"}))["code"] == "SERIES_NOT_FOUND"
        assert (await agent.error("series_start", {"experiment_id": "nope"}))["code"].endswith("NOT_FOUND")
        assert (await agent.error("run_get", {"run_id": "run_nope"}))["code"] == "RUN_NOT_FOUND"


# ---- series ---------------------------------------------------------------------------------------------------


async def test_start_at_once_long_poll_and_eta(tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", tiny_cases(24, bad=0, delay=0.1))
    async with agent_on(root) as (agent, _svc):
        args = {"experiment_id": "reply_ok", "repeats": 4, "simulate": True, "client_op_id": "op-1"}
        t = time.monotonic()
        started = await agent.call("series_start", args)
        assert time.monotonic() - t < 20  # it does not wait for attempts (each of them sleeps 0.1 s)
        summary, plan = started["series"], started["launch_plan"]
        n_dev = len(dev(names(24)))
        assert started["created"] is True and summary["status"] == "running" and summary["simulated"] is True
        assert summary["progress"]["attempts"] == n_dev * 4 and summary["progress"]["done"] < n_dev * 4
        assert summary["eta"] == {"state": "estimating"}
        assert plan["attempts"] == n_dev * 4 and plan["cases"] == n_dev and plan["repeats"] == 4
        assert plan["cap_usd"] == "1.00" and plan["needs_approval"] is False and "half_width" in plan
        sid = summary["series_id"]
        again = await agent.call("series_start", args)
        assert again["series"]["series_id"] == sid and again["created"] is False

        t = time.monotonic()
        held = await agent.call("series_get", {"series_id": sid, "wait_seconds": 0.6})
        assert time.monotonic() - t >= 0.5 and held["status"] == "running"
        states = [summary["eta"]["state"], held["eta"]["state"]]
        while True:
            state = await agent.call("series_get", {"series_id": sid})
            if state["status"] != "running":
                break
            states.append(state["eta"]["state"])
            if state["eta"]["state"] == "running":
                eta = state["eta"]
                assert eta["attempts_per_minute"] > 0 and eta["remaining_seconds"] >= 0 and eta["finish_at"]
            await asyncio.sleep(0.05)
        assert states[0] == "estimating" and "running" in states, states
        t = time.monotonic()
        final = await agent.call("series_get", {"series_id": sid, "wait_seconds": 50})
        assert time.monotonic() - t < 40  # back as soon as the series is done, not after 50 s
        assert final["status"] == "done" and final["eta"] is None
        assert final["verdict"]["verdict"] == "signal" and final["verdict"]["provisional"] is False
        assert final["spend"]["unpriced_attempts"] == n_dev * 4 and final["spend"]["lower_bound"] is True


async def test_cancel_then_cancel_again_conflicts(tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", tiny_cases(24, bad=0, delay=0.2))
    async with agent_on(root) as (agent, _svc):
        sid = (await agent.call("series_start", {"experiment_id": "reply_ok", "repeats": 5, "simulate": True}))[
            "series"
        ]["series_id"]
        cancelled = await agent.call("series_cancel", {"series_id": sid, "reason": "wrong question"})
        assert cancelled["status"] == "cancelled"
        final = await settle(agent, sid)
        assert final["status"] == "cancelled" and final["eta"] is None
        assert final["verdict"]["verdict"] == "invalid" and final["verdict"]["reason"] == "cancelled"
        assert final["progress"]["done"] < final["progress"]["attempts"] and final["finding"] is None
        err = await agent.error("series_cancel", {"series_id": sid})
        assert err["code"] == "SERIES_STATE_CONFLICT" and "already stopped" in err["message"]


async def test_include_cases_lists_dev_cases_failing_first_and_opens_a_run(tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", tiny_cases(130, bad=5))
    all_names = names(130)
    async with agent_on(root) as (agent, _svc):
        sid = (await agent.call("series_start", {"experiment_id": "reply_ok", "simulate": True}))["series"]["series_id"]
        state = await settle(agent, sid, include_cases=True)
        rows = state["cases"]
        assert len(rows) == 50 and state["hidden_cases"] == len(dev(all_names)) - 50
        assert {r["case"] for r in rows} <= set(dev(all_names))
        assert [r["failing"] for r in rows] == [True] * 5 + [False] * 45
        failing = rows[0]["variants"]["as_written"]
        assert failing["fails"] == 1 and failing["counted"] == 1 and isinstance(failing["failed_checks"], list)
        [attempt] = failing["attempts"]
        assert attempt["outcome"] == "model_failure" and attempt["error"] and attempt["run_id"]
        passing = rows[-1]["variants"]["as_written"]["attempts"][0]
        assert passing["outcome"] == "pass" and passing["error"] is None

        run = await agent.call("run_get", {"run_id": attempt["run_id"]})
        assert run["status"] == "failed" and run["error"]["node_id"] == "draft"
        assert run["case_name"] == rows[0]["case"]
        events = await agent.call("run_events", {"run_id": attempt["run_id"]})
        assert events["first_failed_node"] == "draft" and events["next_after"] is None
        assert events["events"][0]["kind"] == "run_start"
        assert any(e["kind"] == "node_error" and e["node_id"] == "draft" for e in events["events"])
        node = await agent.call("run_get_node", {"run_id": attempt["run_id"], "node_id": "draft"})
        assert node["status"] == "failed" and node["error"] and node["model_calls"]
        ok_node = await agent.call("run_get_node", {"run_id": passing["run_id"], "node_id": "pace"})
        assert ok_node["status"] == "done" and ok_node["output"]["reply"].startswith("ok")


async def test_held_out_cases_never_reach_the_agent(tmp_path: Path) -> None:
    all_names = names(24)
    hidden = held_out(all_names)
    root = write_tiny(tmp_path / "tiny", tiny_cases(24, bad=2))
    async with agent_on(root) as (agent, svc):
        sid = (await agent.call("series_start", {"experiment_id": "reply_ok", "on": "holdout", "simulate": True}))[
            "series"
        ]["series_id"]
        state = await settle(agent, sid, include_cases=True)
        assert state["status"] == "done" and state["on"] == "holdout"
        assert state["cases"] == [] and state["hidden_cases"] == len(hidden)
        assert state["verdict"]["verdict"] in ("confirmed", "refuted", "inconclusive") and state["finding"]
        assert (await agent.call("read_findings_md"))["exists"] is True

        run_ids = [a.run_id for a in svc.series.store.attempts(sid)]
        assert len(run_ids) == len(hidden) and all(run_ids)
        for run_id in run_ids[:3]:
            assert run_id is not None
            for tool, args in (
                ("run_get", {"run_id": run_id}),
                ("run_get", {"run_id": run_id, "wait_seconds": 1}),
                ("run_events", {"run_id": run_id}),
                ("run_get_node", {"run_id": run_id, "node_id": "draft"}),
            ):
                err = await agent.error(tool, args)
                assert err["code"] == "HOLDOUT_HIDDEN", (tool, err)

        before = len(svc.runs.list_runs(limit=500))
        err = await agent.error("run_start", {"flow_id": "answer", "case": hidden[0], "simulate": True})
        assert err["code"] == "HOLDOUT_HIDDEN"
        assert len(svc.runs.list_runs(limit=500)) == before  # refused before anything ran
        err = await agent.error("run_start", {"flow_id": "answer", "case": "no_such_case", "simulate": True})
        assert err["code"] == "CASE_NOT_FOUND"
        run = await agent.call(
            "run_start", {"flow_id": "answer", "case": dev(all_names)[3], "simulate": True, "wait_seconds": 20}
        )
        assert run["status"] == "done" and run["output"]["reply"].startswith("ok")
        assert (await agent.call("run_get", {"run_id": run["id"]}))["case_name"] == dev(all_names)[3]

        named = [*dev(all_names)[:2], *hidden[:2]]
        look = {"flow_id": "answer", "dataset_id": "tickets", "case_names": named}
        started = await agent.call("series_start", {"look": look, "simulate": True})
        assert started["series"]["kind"] == "look" and started["launch_plan"]["attempts"] == 4
        state = await settle(agent, started["series"]["series_id"], include_cases=True)
        assert state["status"] == "done" and state["progress"]["done"] == 4  # the held-out ones ran too
        assert sorted(r["case"] for r in state["cases"]) == sorted(dev(all_names)[:2])
        assert state["hidden_cases"] == 2 and state["verdict"] is None

        dataset = await agent.call("get_dataset", {"dataset_id": "tickets"})
        assert [c["name"] for c in dataset["cases"]] == dev(all_names)
        assert dataset["hidden_cases"] == dataset["holdout"] == len(hidden)
        listed = await agent.call("list_datasets")
        assert listed["datasets"][0]["holdout"] == len(hidden)
        await agent.call("list_experiments")
        await agent.call("get_experiment", {"experiment_id": "reply_ok"})
        await agent.call("list_findings")
        await agent.call("series_list")
        leaked = [n for n in hidden if agent.saw(n) and n not in named]
        assert not leaked, leaked
        for name in named[2:]:  # named by the agent in its look; still never shown back by a tool
            assert sum(name in s for s in agent.seen) == 0, name


async def test_a_failed_held_out_series_names_its_error_without_the_case(tmp_path: Path) -> None:
    cases = [{"name": n, "input": {"text": f"boom {n}", "delay": 0.0}} for n in names(12)]
    async with agent_on(write_tiny(tmp_path / "tiny", cases)) as (agent, _svc):
        sid = (await agent.call("series_start", {"experiment_id": "reply_ok", "on": "holdout", "simulate": True}))[
            "series"
        ]["series_id"]
        state = await settle(agent, sid, include_cases=True)
        assert state["status"] == "failed" and state["error"]["code"] == "CODE_ERROR"
        assert state["error"]["case"] is None and state["error"]["run_id"] is None
        assert "boom" not in json.dumps(state) and state["cases"] == []
    async with agent_on(write_tiny(tmp_path / "tiny2")) as (agent, _svc):  # live, and no key
        sid = (await agent.call("series_start", {"experiment_id": "reply_ok", "on": "holdout", "cases": 2}))["series"][
            "series_id"
        ]
        state = await settle(agent, sid)
        assert state["status"] == "failed" and state["error"]["code"] == "PROVIDER_KEY_MISSING"
        assert "OPENROUTER_API_KEY" in state["error"]["message"] and state["error"]["run_id"] is None


async def test_not_runnable_before_any_model_call(tmp_path: Path, fp: FakeProvider) -> None:
    r_names = names(8, "r")
    root = write_tiny(tmp_path / "tiny", tiny_cases(6, bad=0, range_cases=8), range_experiment=True)
    async with agent_on(root) as (agent, _svc):
        err = await agent.error("series_start", {"experiment_id": "bot2_range"})
        assert err["code"] == "NOT_RUNNABLE"
        problems = err["details"]["problems"]
        assert [(p["case"], p["variant"]) for p in problems] == [(dev(r_names)[0], "bot"), (dev(r_names)[0], "bot2")]
        assert {p["code"] for p in problems} == {"NODE_OUTPUTS_MISSING"}

        err = await agent.error("series_start", {"experiment_id": "bot2_range", "on": "holdout"})
        assert err["code"] == "NOT_RUNNABLE" and len(err["details"]["problems"]) == 2
        assert {p["case"] for p in err["details"]["problems"]} == {"<held-out case 1>"}
        assert not any(agent.saw(n) for n in held_out(r_names))

        (root / "agents" / "bot2.yaml").write_text("model: nowhere\nbogus_key: 1\n", encoding="utf-8")
        await asyncio.sleep(1.1)  # the service looks at the files once a second
        assert (await agent.call("aqven_check"))["ok"] is False
        err = await agent.error("series_start", {"experiment_id": "reply_ok"})
        assert err["code"] == "NOT_RUNNABLE" and err["details"]["problems"]
        assert all(p["code"] and p["message"] for p in err["details"]["problems"])
        assert any(p["file"] == "agents/bot2.yaml" for p in err["details"]["problems"])
    assert fp.chat_requests() == []


async def test_unpriced_spend_is_a_lower_bound(tmp_path: Path, fp: FakeProvider) -> None:
    async with agent_on(write_tiny(tmp_path / "tiny")) as (agent, _svc):
        sid = (await agent.call("series_start", {"experiment_id": "reply_ok", "cases": 3}))["series"]["series_id"]
        state = await settle(agent, sid)
        assert state["status"] == "done" and state["simulated"] is False
        assert state["spend"]["unpriced_attempts"] == 3 and state["spend"]["lower_bound"] is True
        assert state["progress"]["counted"] == 3
    assert len(fp.chat_requests()) == 3


async def test_pause_near_cap_waits_for_a_person(tmp_path: Path, fp: FakeProvider) -> None:
    fp.default = FakeReply(cost="0.30")
    async with agent_on(write_tiny(tmp_path / "tiny")) as (agent, _svc):
        started = await agent.call("series_start", {"experiment_id": "reply_ok", "cap_usd": "5.00"})
        assert started["series"]["status"] == "awaiting_approval" and started["launch_plan"]["needs_approval"]
        assert started["series"]["pause"]["reason"] == "cap_above_project"
        assert started["series"]["eta"] == {"state": "paused"}
        assert fp.chat_requests() == []
        await agent.call("series_cancel", {"series_id": started["series"]["series_id"]})

        sid = (await agent.call("series_start", {"experiment_id": "reply_ok"}))["series"]["series_id"]
        state = await settle(agent, sid)
        assert state["status"] == "awaiting_approval" and state["eta"] == {"state": "paused"}
        assert state["pause"]["reason"] == "spend_near_cap" and Decimal(state["pause"]["spent_usd"]) == Decimal("0.6")
        assert state["spend"]["lower_bound"] is False and state["progress"]["done"] == 2
        cancelled = await agent.call("series_cancel", {"series_id": sid})
        assert cancelled["status"] == "cancelled" and cancelled["eta"] is None
        assert (await agent.error("series_cancel", {"series_id": sid}))["code"] == "SERIES_STATE_CONFLICT"
    assert len(fp.chat_requests()) == 2


async def test_missing_key_fails_the_series_naming_the_key(tmp_path: Path) -> None:
    """The spec's example: reply_overpromise_risk on 2 working cases, 2 repeats, no --simulate, no key."""
    root = init_project(tmp_path / "lumen", "lumen")
    async with agent_on(root) as (agent, _svc):
        started = await agent.call(
            "series_start", {"experiment_id": "reply_overpromise_risk", "on": "dev", "cases": 2, "repeats": 2}
        )
        plan = started["launch_plan"]
        assert {k: plan[k] for k in ("on", "cases", "repeats", "variants", "attempts", "margin")} == {
            "on": "dev", "cases": 2, "repeats": 2, "variants": 1, "attempts": 4, "margin": 0.01
        }  # fmt: skip
        assert plan["needs_approval"] is False and plan["cap_usd"] == "1.00" and plan["project_cap_source"] == "project"
        assert plan["below_recommended"] is True and plan["recommended"]["reason"] == "short_of_cases"
        assert started["series"]["status"] == "running" and started["series"]["simulated"] is False
        state = await settle(agent, started["series"]["series_id"])
        assert state["status"] == "failed" and state["progress"]["infra_errors"] == 4
        assert state["error"]["code"] == "PROVIDER_KEY_MISSING" and "OPENROUTER_API_KEY" in state["error"]["message"]
        assert state["verdict"]["verdict"] == "invalid" and state["eta"] is None


def test_the_showcase_ships_agent_guidance(tmp_path: Path) -> None:
    root = init_project(tmp_path / "lumen", "lumen")
    registered = json.loads((root / ".mcp.json").read_text())["mcpServers"]["aqven"]
    assert registered["command"] == "aqven" and registered["args"][0] == "mcp"
    agents_md = (root / "AGENTS.md").read_text()
    assert agents_md.index("FINDINGS.md") < agents_md.index("aqven mcp")  # read what the project knows first
    assert '"mcpServers"' in agents_md and "HOLDOUT_HIDDEN" in agents_md
    mentioned = set(re.findall(r"`([a-z_]+)`", agents_md))
    assert {"series_start", "series_get", "series_cancel", "run_get", "aqven_check", "read_findings_md"} <= mentioned
    assert not [t for t in mentioned & {"series_approve", "approve"}]
    for doc in ("run-series-as-an-agent.md", "follow-runs-as-an-agent.md", "agent-loop.md"):
        text = (REPO / "docs" / "how-to" / doc).read_text()
        named = set(re.findall(r"`([a-z]+_[a-z_]+)`", text))
        tools = {n for n in named if n.split("_")[0] in ("series", "run", "list", "get", "read", "aqven")}
        fields = {"run_id", "series_id", "run_end", "run_resume"}  # arguments and event kinds, not tools
        assert tools - fields <= set(tool_names()), (doc, tools - fields - set(tool_names()))


async def test_series_finish_cost_prices_what_is_left(tmp_path: Path) -> None:
    """The chat's answer to "what does finishing cost": the server's finish estimate, as a tool of every agent."""
    root = write_tiny(tmp_path / "tiny", tiny_cases(6, bad=0, delay=0.0))
    async with agent_on(root) as (agent, _svc):
        started = await agent.call("series_start", {"experiment_id": "reply_ok", "repeats": 1, "simulate": True})
        sid = started["series"]["series_id"]
        final = await settle(agent, sid)
        est = await agent.call("series_finish_cost", {"series_id": sid})
        assert est["left"] == 0 and est["done"] == final["progress"]["attempts"]
        assert (await agent.error("series_finish_cost", {"series_id": "ser_0123456789ab"}))[
            "code"
        ] == "SERIES_NOT_FOUND"
