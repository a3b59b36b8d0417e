"""The Studio chat asked about a series by its id: it answers from the MCP tools (the registry), never crashes on
a series snapshot, lists only working cases, and reports failures as errors with a stable code.

Issue 14 item 2: "status of ser_…" and "which working cases failed in series ser_…" answered
`CHAT_FAILED: AttributeError: 'NoneType' object has no attribute 'get'` (HTTP 502).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aqven.project.init import init_project
from aqven.research.series.start import SeriesStartBody
from aqven.server import chat, chat_offline
from aqven.server.app import create_app
from aqven.server.mcp_server import tool_names
from aqven.server.service import ProjectService
from support.commands import api_client


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AQVEN_SIMULATE", "1")
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0")
    monkeypatch.delenv(chat_offline.AGENT_ENV, raising=False)
    root = init_project(tmp_path / "lumen", "lumen")
    (root / "AGENTS.md").write_text("Agents: answer in one paragraph and quote verdict sentences as they are.\n")
    return root


async def run_series(svc: ProjectService, on: str) -> dict[str, Any]:
    body = SeriesStartBody.model_validate({"experiment_id": "reply_overpromise_risk", "on": on, "repeats": 3})
    sid = (await svc.series.start(body))["series"]["series_id"]
    state = await svc.series.get(sid, wait_seconds=50, include_cases=True)
    while state["status"] == "running":
        state = await svc.series.get(sid, wait_seconds=50, include_cases=True)
    assert state["status"] == "done"
    return state


def held_out_names(svc: ProjectService) -> set[str]:
    project = svc.project()
    return {c.name for ds in project.datasets.values() for c in ds.cases if project.side(c.name) != "dev"}


async def test_status_and_failing_cases_of_a_series(project: Path) -> None:
    svc = ProjectService(project)
    try:
        dev = await run_series(svc, "dev")
        sid = dev["series_id"]
        out = await chat.reply(svc, [{"role": "user", "content": f"status of {sid}"}])
        assert [c["name"] for c in out["tool_calls"]] == ["series_get"]
        assert f"series {sid}" in out["reply"] and "done" in out["reply"]
        assert f"“{dev['verdict']['text']}”" in out["reply"]  # the verdict sentence quoted as it is

        out = await chat.reply(svc, [{"role": "user", "content": f"which working cases failed in series {sid}"}])
        [call] = out["tool_calls"]
        assert call["name"] == "series_get" and call["args"]["include_cases"] is True
        failing = [r["case"] for r in dev["cases"] if r["failing"]]
        passing = [r["case"] for r in dev["cases"] if not r["failing"]]
        for name in failing:
            assert f"- {name}:" in out["reply"]
        for name in passing:
            assert f"- {name}:" not in out["reply"]
        if not failing:
            assert "no working case failed" in out["reply"]

        held = await run_series(svc, "holdout")
        out = await chat.reply(svc, [{"role": "user", "content": f"which cases failed in series {held['series_id']}"}])
        assert "held-out cases are never shown one by one" in out["reply"]
        assert not [n for n in held_out_names(svc) if n in out["reply"]]
    finally:
        await svc.shutdown()


async def test_chat_tools_are_the_mcp_tools_and_follow_agents_md(project: Path) -> None:
    svc = ProjectService(project)
    seen: dict[str, Any] = {}

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen["tools"] = {t.name: t.parameters_json_schema for t in info.function_tools}
        seen["instructions"] = info.instructions or ""
        return chat_offline.offline_model().function(messages, info)  # type: ignore[misc,return-value]

    try:
        await chat.reply(svc, [{"role": "user", "content": "hello"}], model=FunctionModel(script))
        assert sorted(seen["tools"]) == sorted(tool_names()) == sorted(chat.describe(svc)["tools"])
        assert set(seen["tools"]["series_get"]["properties"]) == {"series_id", "wait_seconds", "include_cases"}
        assert "quote verdict sentences as they are" in seen["instructions"]
        assert "Follow AGENTS.md" in seen["instructions"]
    finally:
        await svc.shutdown()


async def test_a_tool_error_is_an_error_and_reaches_the_caller(project: Path) -> None:
    svc = ProjectService(project)
    try:
        got = await chat.call_tool(svc, "series_get", {"series_id": "ser_0123456789ab"})
        assert got == {"error": got["error"]} and got["error"]["code"] == "SERIES_NOT_FOUND"
        bad = await chat.call_tool(svc, "series_get", {"series_id": "ser_x", "wait_seconds": 99})
        assert bad["error"]["code"] == "VALIDATION_ERROR"
        assert (await chat.call_tool(svc, "series_approve", {"series_id": "ser_x"}))["error"][
            "code"
        ] == "TOOL_NOT_FOUND"
        out = await chat.reply(svc, [{"role": "user", "content": "status of ser_0123456789ab"}])
        [call] = out["tool_calls"]
        assert call["name"] == "series_get" and call["error"]["code"] == "SERIES_NOT_FOUND"
        assert "SERIES_NOT_FOUND" in out["reply"]
    finally:
        await svc.shutdown()


@pytest.fixture
def client(project: Path) -> Iterator[TestClient]:
    with api_client(create_app(project)) as c:
        yield c


def test_a_failing_chat_answers_an_error_with_a_stable_code(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        raise RuntimeError("the model went away")

    monkeypatch.setattr(chat, "offline_model", lambda: FunctionModel(broken))
    r = client.post("/api/chat", json={"messages": [{"role": "user", "content": "status?"}]})
    assert r.status_code == 502
    assert set(r.json()) == {"error"} and r.json()["error"]["code"] == "CHAT_FAILED"
    assert "reply" not in r.json()
    assert "RuntimeError: the model went away" in r.json()["error"]["message"]


def test_no_series_answer_crashes_the_offline_summary() -> None:
    """Every key of a snapshot may be null (a new series, a look): the summary never calls .get on None."""
    snap = {"series_id": "ser_1", "status": "running", "error": None, "progress": None, "spend": None,
            "verdict": None, "cases": None}  # fmt: skip
    lines = chat_offline.summarize("series_get", snap)
    assert lines and "ser_1" in lines[0]


def test_money_is_shown_as_studio_shows_it() -> None:
    from aqven.project.money import shown_usd

    assert shown_usd("2.0593529") == "$2.06" and shown_usd("0.0123456") == "$0.012"
    assert shown_usd("0.004") == "$0.0040" and shown_usd("0.00012345") == "$0.00012" and shown_usd("0") == "$0.00"
    assert shown_usd(None) == "—"


async def test_a_paused_series_reads_as_studio_says_with_money_rounded_and_the_cost_to_finish(project: Path) -> None:
    """Issue: the chat said '$2.0593529', called a paused series 'still running' and gave no cost to finish."""
    from aqven.project.money import shown_usd
    from aqven.server.operations.finish import finish

    svc = ProjectService(project)
    try:
        body = SeriesStartBody.model_validate(
            {"experiment_id": "reply_noninferior_mistral", "on": "dev", "cases": 12, "repeats": 1, "cap_usd": "0.002"}
        )
        sid = (await svc.series.start(body))["series"]["series_id"]
        state = await svc.series.get(sid, wait_seconds=50)
        while state["status"] == "running":
            state = await svc.series.get(sid, wait_seconds=50)
        assert state["status"] == "awaiting_approval"
        out = await chat.reply(svc, [{"role": "user", "content": f"status of {sid}"}])
        reply = out["reply"]
        assert (
            "paused, awaiting approval" in reply and "still running" not in reply and "awaiting_approval" not in reply
        )
        spent = shown_usd(state["spend"]["usd"])
        assert f"spent {spent} of $0.0020" in reply, reply
        assert all(len(m.split(".")[1]) <= 5 for m in re.findall(r"\$\d+\.\d+", reply)), reply  # no $0.0013529

        out = await chat.reply(svc, [{"role": "user", "content": f"what would it cost to finish {sid}?"}])
        assert "series_finish_cost" in [c["name"] for c in out["tool_calls"]]
        est = await finish(svc, sid)
        assert est.more_usd and est.cap_to_finish_usd
        want = f"To finish: about {shown_usd(est.more_usd)} more for the {est.left} attempts left"
        assert want in out["reply"] and f"a cap of {shown_usd(est.cap_to_finish_usd)} lets it finish" in out["reply"]
    finally:
        await svc.shutdown()
