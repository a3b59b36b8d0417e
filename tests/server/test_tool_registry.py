"""The tool registry (`aqven.server.tools`): one declaration per tool, served alike by MCP and the Studio chat.

The MCP server lists exactly the registry's tools with the registry's schemas; the chat agent gets the same
names; the tools that only the registry added over the chat's old list (`list_agents`, `list_runs`) answer
through the real MCP client and keep the held-out rule (runs of held-out cases only counted).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcp.client._memory import InMemoryTransport
from mcp.client.session import ClientSession

from aqven.server import chat
from aqven.server.mcp_backend import ServiceBackend
from aqven.server.mcp_server import build_server, tool_names
from aqven.server.service import ProjectService
from aqven.server.tools import TOOLS
from support.mcp_agent import Agent, dev, held_out, names, tiny_cases, write_tiny


def test_every_tool_is_declared_once_with_its_schemas() -> None:
    assert tool_names() == TOOLS.names() and len(set(TOOLS.names())) == len(TOOLS)
    for spec in TOOLS:
        assert spec.description and "\n    " not in spec.description, spec.name  # no indentation reaches an agent
        assert spec.args_model.model_config.get("extra") == "forbid"
        assert spec.output.model_json_schema()["type"] == "object", spec.name
        assert list(spec.signature.parameters) == list(spec.args_model.model_fields), spec.name
    assert not [n for n in TOOLS.names() if any(w in n for w in ("approve", "stop", "continue", "confirm"))]
    effects = {spec.name: spec.effect for spec in TOOLS}
    assert effects["series_start"] == effects["run_start"] == "spends" and effects["series_cancel"] == "destroys"
    assert {n for n, e in effects.items() if e == "read"} == set(TOOLS.names()) - {
        "series_start", "run_start", "series_cancel"
    }  # fmt: skip


async def test_mcp_lists_the_registry_and_the_chat_the_same_names(tmp_path: Path) -> None:
    svc = ProjectService(write_tiny(tmp_path / "tiny"))
    try:
        server = build_server(ServiceBackend(svc))
        async with InMemoryTransport(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = {t.name: t for t in (await session.list_tools()).tools}
        assert list(listed) == TOOLS.names()
        for spec in TOOLS:
            schema = listed[spec.name].input_schema
            assert set(schema.get("properties", {})) == set(spec.args_model.model_fields), spec.name
            assert listed[spec.name].description == spec.description
            hints = listed[spec.name].annotations
            assert hints is not None and hints.read_only_hint is (spec.effect == "read"), spec.name
        assert chat.describe(svc)["tools"] == TOOLS.names()
    finally:
        svc.db.close()


async def test_list_agents_and_list_runs_over_mcp_keep_held_out_runs_counted(
    tmp_path: Path, monkeypatch: object
) -> None:
    cases = names(8)
    root = write_tiny(tmp_path / "tiny", tiny_cases(8, bad=0))
    svc = ProjectService(root)
    try:
        async with (
            InMemoryTransport(build_server(ServiceBackend(svc))) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            agent = Agent(session)
            agents = await agent.call("list_agents")
            assert [a["id"] for a in agents["agents"]] == ["bot", "bot2"]
            assert agents["agents"][0]["model"] == "openrouter:acme/unpriced-1"
            look = {"flow_id": "answer", "dataset_id": "tickets", "case_names": cases}
            started = await agent.call("series_start", {"look": look, "simulate": True})
            sid = started["series"]["series_id"]
            state = await agent.call("series_get", {"series_id": sid, "wait_seconds": 50})
            while state["status"] == "running":
                await asyncio.sleep(0.05)
                state = await agent.call("series_get", {"series_id": sid, "wait_seconds": 50})
            listed = await agent.call("list_runs", {"series_id": sid})
            assert sorted(r["case_name"] for r in listed["runs"]) == sorted(dev(cases))
            assert listed["hidden_holdout_runs"] == len(held_out(cases)) > 0
            assert not [n for n in held_out(cases) if agent.saw(n)]
            err = await agent.error("list_runs", {"limit": 101})
            assert err["code"] == "VALIDATION_ERROR"
    finally:
        await asyncio.sleep(0.05)
        await svc.shutdown()
