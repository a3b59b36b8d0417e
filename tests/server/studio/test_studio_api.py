"""Studio's server side, in-process: its files, the aggregated endpoints, the streams and the chat agent."""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aqven.project.init import init_project
from aqven.research.experiments.inputs import series_manifest
from aqven.server import chat, chat_offline
from aqven.server.app import create_app
from aqven.server.routes_studio import STUDIO_DIR, freshness
from aqven.server.service import ProjectService
from support.commands import api_client, stop_server
from support.person import studio_login

FINDINGS = """# Findings

What this project knows, from held-out series.

## overpromise

### On holdout cases

- **reply_overpromise_risk** *(simulated)*: “Refuted on 6 held-out cases × 2 repeats (simulated): the promises rate \
of as_written is 0.917.” — 6 cases × 2 repeats of `support_case_cases`, 2026-01-02. \
[ser_0123456789abcdef](experiments/reply_overpromise_risk/findings/ser_0123456789abcdef.yaml)

## judge_error

### Signals

- **panel_judge_prompt**: “Signal on 23 working cases: claims_first is open.” — 23 cases × 3 repeats.
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AQVEN_SIMULATE", "1")
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0")
    monkeypatch.delenv(chat_offline.AGENT_ENV, raising=False)
    return init_project(tmp_path / "lumen", "lumen")


@pytest.fixture
def client(project: Path) -> Iterator[TestClient]:
    with api_client(create_app(project)) as c:
        yield c


def test_studio_files_are_served_and_nothing_else(client: TestClient) -> None:
    r = client.get("/studio", follow_redirects=False)
    assert r.status_code in (302, 307) and r.headers["location"] == "/studio/"
    assert client.get("/studio/").status_code == 401  # no session yet: a page that says `aqven studio`
    studio_login(client)
    page = client.get("/studio/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert '<meta name="aqven-csrf" content="' in page.text
    assert '<script type="module" src="js/main.js">' in page.text and "http" not in page.text.replace("http-equiv", "")
    modules = sorted(p.name for p in (STUDIO_DIR / "js").glob("*.js"))
    assert {"main.js", "api.js", "dom.js", "plots.js", "series.js"} <= set(modules)
    for name in modules:  # every module, and every module it imports, is served as JavaScript with the headers
        js = client.get(f"/studio/js/{name}")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript"), name
        assert js.headers["x-content-type-options"] == "nosniff" and js.headers["x-frame-options"] == "DENY"
        assert "innerHTML" not in js.text and "eval(" not in js.text
        for imported in re.findall(r"from '\./([\w.]+)'", js.text):
            assert imported in modules, (name, imported)
    assert client.get("/studio/app.js").status_code == 404  # the one-file script is gone
    assert client.get("/studio/js/nope.js").status_code == 404
    assert client.get("/studio/js/..%2F..%2Fapp.py").status_code == 404
    assert client.get("/studio/app.css").status_code == 200
    missing = client.get("/studio/..%2Faqven.yaml")
    assert missing.status_code == 404
    assert client.get("/studio/server.py").status_code == 404


def test_status_overview_and_runs_pages(client: TestClient) -> None:
    status = client.get("/api/studio/status").json()
    assert status == {"name": "Lumen support", "package": "lumen", "simulate": True}
    for _ in range(3):
        r = client.post("/api/runs", json={"flow_id": "support_case", "case": "strip_flicker_credit", "wait": True})
        assert r.status_code == 201 and r.json()["status"] == "done"
    page = client.get("/api/studio/runs", params={"per_page": 2}).json()
    assert page["total"] == 3 and page["pages"] == 2 and len(page["items"]) == 2
    assert page["items"][0]["simulated"] is True and page["items"][0]["case_name"] == "strip_flicker_credit"
    assert client.get("/api/studio/runs", params={"per_page": 2, "page": 2}).json()["items"][0]["id"]
    assert client.get("/api/studio/runs", params={"flow_id": "judge_panel"}).json()["total"] == 0
    assert client.get("/api/studio/runs", params={"source": "series"}).json()["total"] == 0
    over = client.get("/api/studio/overview").json()
    assert over["runs"]["total"] == 3 and over["runs"]["simulated"] == 3 and over["simulate"] is True
    assert over["chat"]["kind"] == "offline"


def test_trace_is_a_timeline_of_nodes_with_calls_tokens_and_cost(client: TestClient) -> None:
    rec = client.post(
        "/api/runs", json={"flow_id": "support_case", "case": "strip_flicker_credit", "wait": True}
    ).json()
    trace = client.get(f"/api/studio/runs/{rec['id']}/trace").json()
    ids = [n["id"] for n in trace["nodes"]]
    assert ids[:2] == ["draft", "polish"] and {"policy", "revise", "sign_off"} <= set(ids)
    revise = next(n for n in trace["nodes"] if n["id"] == "revise")
    assert revise["parent"] == "polish" and revise["depth"] == 1 and revise["status"] == "done"
    call = revise["calls"][0]
    assert call["request"]["agent"] == "gpt" and call["response"]["input_tokens"] > 0
    assert call["response"]["cost_source"] and revise["tokens"]["input"] > 0
    assert trace["source"] == {"kind": "hand"}
    failed = client.post(
        "/api/runs",
        json={
            "flow_id": "support_case",
            "input": {"ticket": "x", "tier": "gold"},
            "context": {"order_total": "lots", "days_since_delivery": 3},
            "wait": True,
        },
    ).json()
    assert failed["status"] == "failed"
    trace = client.get(f"/api/studio/runs/{failed['id']}/trace").json()
    draft = next(n for n in trace["nodes"] if n["id"] == "draft")
    assert draft["status"] == "failed" and draft["error"]["code"] == "CODE_ERROR"
    # A finished run's stream sends its trace once and ends.
    with client.stream("GET", f"/api/runs/{failed['id']}/stream") as resp:
        body = "".join(resp.iter_text())
    assert "event: trace" in body and "event: end" in body


def test_series_payload_stream_and_attempt_pages(client: TestClient) -> None:
    started = client.post(
        "/api/series", json={"experiment_id": "reply_overpromise_risk", "on": "dev", "cases": 3, "repeats": 2}
    ).json()
    sid = started["series"]["series_id"]
    state = client.get(f"/api/series/{sid}", params={"wait_seconds": 30}).json()
    assert state["status"] == "done"
    payload = client.get(f"/api/studio/series/{sid}").json()
    assert payload["experiment"]["caption"].startswith("Varies:")
    assert payload["experiment"]["variants"][0]["value"] == "as written"
    assert len(payload["cases"]) == 3 and payload["spend_curve"][-1]["usd"] == payload["spend"]["usd"]
    with client.stream("GET", f"/api/series/{sid}/stream") as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        body = "".join(resp.iter_text())
    events = [line[len("event: ") :] for line in body.splitlines() if line.startswith("event: ")]
    assert events == ["snapshot", "end"]
    data = json.loads(next(line[len("data: ") :] for line in body.splitlines() if line.startswith("data: ")))
    assert data["status"] == "done" and data["verdict"]["verdict"] == "signal"
    page = client.get(f"/api/studio/series/{sid}/attempts", params={"per_page": 4}).json()
    assert page["total"] == 6 and page["pages"] == 2 and page["items"][0]["run_id"]
    assert client.get(f"/api/studio/series/{sid}/attempts", params={"outcome": "infra"}).json()["total"] == 0
    runs = client.get("/api/studio/runs", params={"series_id": sid}).json()
    assert runs["total"] == 6 and not any(r["held_out"] for r in runs["items"])


def test_held_out_attempts_are_not_listed_one_by_one(client: TestClient) -> None:
    started = client.post(
        "/api/series", json={"experiment_id": "reply_overpromise_risk", "on": "holdout", "cases": 2, "repeats": 1}
    ).json()
    sid = started["series"]["series_id"]
    assert client.get(f"/api/series/{sid}", params={"wait_seconds": 30}).json()["status"] == "done"
    payload = client.get(f"/api/studio/series/{sid}").json()
    assert payload["cases"] == [] and payload["hidden_cases"] == 2
    # Not listed one by one at all (an index, outcome or cost would tell one apart): only counted.
    for query in ({}, {"outcome": "fail"}, {"outcome": "pass"}, {"status": "done"}):
        listed = client.get(f"/api/studio/series/{sid}/attempts", params=query).json()
        assert listed["items"] == [] and listed["total"] == 0, query
    assert client.get(f"/api/studio/series/{sid}/attempts").json()["held_out"] == 2
    page = client.get("/api/studio/runs", params={"series_id": sid}).json()
    assert page["items"] == [] and page["total"] == 0 and page["held_out_hidden"] == 2
    assert all(not r["held_out"] for r in client.get("/api/studio/runs").json()["items"])
    runs = [{"id": a.run_id} for a in cast(Any, client.app).state.service.series.store.attempts(sid)]
    for r in runs:  # the run itself is not opened either: not its trace, not its live stream
        for url in (f"/api/studio/runs/{r['id']}/trace", f"/api/runs/{r['id']}/stream"):
            refused = client.get(url)
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "HOLDOUT_HIDDEN", url
    # A search by case name does not count held-out runs (the count would tell which names are held out).
    held = [a.case_name for a in cast(Any, client.app).state.service.series.store.attempts(sid)]
    for name in held:
        found = client.get("/api/studio/runs", params={"case": name}).json()
        assert found["total"] == 0 and found["items"] == [], name
    findings = client.get("/api/studio/findings").json()
    assert len(findings["findings"]) == 1 and "reply_overpromise_risk" in findings["findings_md"]
    one = findings["findings"][0]
    assert one["intact"] and one["freshness"]["matches"] and one["cells"]
    fresh = client.get(f"/api/studio/findings/reply_overpromise_risk/{sid}/freshness").json()
    assert fresh["matches"] is True


def test_freshness_names_the_files_that_changed(project: Path) -> None:
    svc = ProjectService(project)
    ws = svc.workspace()
    variants = ws.experiment("reply_overpromise_risk").spec.variant_ids
    files = series_manifest(
        ws, flow_id="support_case", variants=variants, experiment_id="reply_overpromise_risk", simulated=True
    )
    data: dict[str, Any] = {
        "experiment_id": "reply_overpromise_risk",
        "series_id": "ser_not_on_this_machine",
        "scope": {"dataset": "support_case_cases", "simulated": True, "subject": {"flow": "support_case"}},
        "variants": [{"id": v} for v in variants],
        "inputs": {"files": dict(files)},
    }
    assert freshness(svc, data)["matches"] is True
    assert not [f for f in files if f.startswith(("flows/judge_panel", "agents/qwen"))]  # only what it runs
    # An edit of a flow and an agent the series never ran leaves the finding fresh (it measured neither).
    panel = project / "flows" / "judge_panel" / "qwen.md"
    panel.write_text(panel.read_text() + "\nAn unrelated edit.\n")
    (project / "agents" / "qwen.yaml").write_text((project / "agents" / "qwen.yaml").read_text() + "\n# edited\n")
    assert freshness(svc, data)["matches"] is True
    prompt = project / "flows" / "support_case" / "revise.md"
    prompt.write_text(prompt.read_text() + "\nBe brief.\n")
    out = freshness(svc, data)
    assert out["matches"] is False and out["changed"] == ["flows/support_case/revise.md"]
    svc.db.close()


# ---- the chat agent ----


def test_chat_reads_findings_agents_and_claude_first(project: Path) -> None:
    (project / "FINDINGS.md").write_text(FINDINGS)
    (project / "AGENTS.md").write_text("Agents: quote verdict sentences as they are.\n")
    text = chat.instructions_for(project)
    assert text.index("=== FINDINGS.md ===") < text.index("=== AGENTS.md ===") < text.index("=== CLAUDE.md ===")
    assert "Refuted on 6 held-out cases" in text and "quote verdict sentences" in text
    assert "(absent: the project has no such file)" in text.split("=== CLAUDE.md ===")[1]
    svc = ProjectService(project)
    info = chat.describe(svc)
    assert [f["name"] for f in info["context_files"]] == ["FINDINGS.md", "AGENTS.md", "CLAUDE.md"]
    assert [f["present"] for f in info["context_files"]] == [True, True, False]
    assert not any("approve" in t or "stop" in t for t in info["tools"])
    assert {"series_start", "series_get", "series_cancel", "run_get", "run_events", "aqven_check"} <= set(info["tools"])
    assert info["responder"]["kind"] == "offline" and info["responder"]["simulated"] is True
    svc.db.close()


async def test_offline_responder_quotes_findings_and_uses_tools(project: Path) -> None:
    (project / "FINDINGS.md").write_text(FINDINGS)
    svc = ProjectService(project)
    try:
        out = await chat.reply(svc, [{"role": "user", "content": "What do we know about overpromise?"}])
        assert "Refuted on 6 held-out cases × 2 repeats (simulated)" in out["reply"]
        assert "reply_overpromise_risk" in out["reply"] and "offline responder" in out["reply"]
        assert "panel_judge_prompt" not in out["reply"]  # only the lines that share words with the question
        assert [c["name"] for c in out["tool_calls"]] == ["read_findings_md"]
        out = await chat.reply(
            svc,
            [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "hi"},
                {"role": "user", "content": "Does aqven check find errors? And approve ser_0123456789ab please."},
            ],
        )
        assert "aqven check: 0 error(s)" in out["reply"]
        assert "cannot approve" in out["reply"]
        assert {c["name"] for c in out["tool_calls"]} == {"aqven_check", "series_get"}
        assert "SERIES_NOT_FOUND" in out["reply"]
    finally:
        await svc.shutdown()


async def test_a_model_driven_chat_starts_a_series_with_the_tools(project: Path) -> None:
    seen: list[str] = []

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info.instructions or "")
        returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if not returns:
            assert "approve" not in {t.name for t in info.function_tools}
            args = {"experiment_id": "reply_overpromise_risk", "on": "dev", "cases": 1, "repeats": 1}
            return ModelResponse(parts=[ToolCallPart("series_start", json.dumps(args))])
        if len(returns) == 1:
            sid = cast(Any, returns[0].content)["series"]["series_id"]
            return ModelResponse(parts=[ToolCallPart("series_get", json.dumps({"series_id": sid, "wait_seconds": 20}))])
        state = cast(Any, returns[-1].content)
        return ModelResponse(parts=[TextPart(f"{state['status']}: {state['verdict']['text']}")])

    svc = ProjectService(project)
    try:
        out = await chat.reply(
            svc,
            [{"role": "user", "content": "Explore reply_overpromise_risk on one case."}],
            model=FunctionModel(script),
        )
        assert out["reply"].startswith("done: Signal")
        assert [c["name"] for c in out["tool_calls"]] == ["series_start", "series_get"]
        assert "=== FINDINGS.md ===" in seen[0]
        assert len(svc.series.list_series()) == 1
    finally:
        await svc.shutdown()


def test_chat_endpoint(client: TestClient, project: Path) -> None:
    info = client.get("/api/chat").json()
    assert info["responder"]["kind"] == "offline"
    r = client.post("/api/chat", json={"messages": [{"role": "user", "content": "Which experiments are there?"}]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert "reply_overpromise_risk" in body["reply"] and body["tool_calls"][0]["name"] == "list_experiments"
    assert "FINDINGS.md has no findings yet" not in body["reply"]
    bad = client.post("/api/chat", json={"messages": [{"role": "assistant", "content": "hi"}]})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "VALIDATION_ERROR"


def test_chat_agent_is_named_by_env_and_stands_in_when_simulated(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(chat_offline.AGENT_ENV, "gpt")
    svc = ProjectService(project)
    r = chat.describe(svc)["responder"]
    assert r["kind"] == "offline" and "stands in for agent gpt" in r["text"]
    monkeypatch.setenv("AQVEN_SIMULATE", "0")
    r = chat.describe(svc)["responder"]
    assert r["kind"] == "agent" and r["model"].startswith("openrouter:") and r["simulated"] is False
    monkeypatch.setenv(chat_offline.AGENT_ENV, "nobody")
    assert "not in the project" in chat.describe(svc)["responder"]["text"]
    svc.db.close()
    assert os.environ[chat_offline.AGENT_ENV] == "nobody"


def test_aqven_studio_prints_the_url_and_opens_a_browser(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from aqven.cli.main import app

    opened: list[str] = []

    def open_url(url: str) -> bool:
        opened.append(url)
        return True

    monkeypatch.setattr("aqven.cli.studio_cmd.webbrowser.open", open_url)
    try:
        r = CliRunner().invoke(app, ["studio", "research", "--root", str(project)])
        assert r.exit_code == 0, r.output
        port = json.loads((project / ".aqven" / "server.json").read_text())["port"]
        [link] = opened
        assert link.startswith(f"http://localhost:{port}/studio/login?code=") and link.endswith("&page=research")
        assert link in r.output
        # the link logs a browser in once and lands on the page; a second use is refused
        no_redirect = urllib.request.build_opener(NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as landed:
            no_redirect.open(link, timeout=30)
        assert landed.value.code == 303 and landed.value.headers["location"] == "/studio/#/research"
        assert "HttpOnly" in landed.value.headers["set-cookie"]
        with pytest.raises(urllib.error.HTTPError) as again:
            no_redirect.open(link, timeout=30)
        assert again.value.code == 401
        r = CliRunner().invoke(app, ["studio", "--no-open", "--root", str(project)])
        assert r.exit_code == 0 and f"http://localhost:{port}/studio/login?code=" in r.output and len(opened) == 1
    finally:
        stop_server(project)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_pages_past_the_end_are_refused_not_a_server_error(client: TestClient) -> None:
    for path in ("/api/studio/runs?page=99999999999999999999", "/api/studio/series/x/attempts?page=10000000"):
        r = client.get(path)
        assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION_ERROR", r.text
    assert client.get("/api/studio/runs?page=1000000").json()["items"] == []


def test_the_check_is_kept_until_what_it_reads_changes(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29: the Overview asks for `aqven check` on every load; it runs again only when a file it reads changed."""
    from aqven.server.operations import project as operations

    calls: list[Path] = []
    real = operations.check_workspace  # type: ignore[attr-defined]

    def counted(root: Path) -> Any:
        calls.append(root)
        return real(root)

    monkeypatch.setattr(operations, "check_workspace", counted)
    operations._CHECKED.clear()
    first = client.get("/api/check").json()
    again = client.get("/api/check").json()
    assert first == again and len(calls) == 1
    root = client.app.state.service.root  # type: ignore[attr-defined]
    agent = root / "agents" / "gpt.yaml"
    agent.write_text(agent.read_text() + "\nnot_a_key: 1\n")
    edited = client.get("/api/check").json()
    assert len(calls) == 2 and edited != first and any(d["file"] == "agents/gpt.yaml" for d in edited["diagnostics"])


def test_static_files_are_compressed_and_the_overview_counts_outcomes(client: TestClient) -> None:
    """Issue 29: Studio's files go gzipped to a browser that asks; the overview names outcomes as outcomes."""
    js = client.get("/studio/js/series.js", headers={"Accept-Encoding": "gzip"})
    assert js.status_code == 200 and js.headers.get("content-encoding") == "gzip"
    assert "export function pausePanel" in js.text  # the client unzipped it
    plain = client.get("/studio/js/series.js", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    overview = client.get("/api/studio/overview").json()
    assert isinstance(overview["attempts_by_outcome"], dict)
    overview_js = client.get("/studio/js/overview.js").text
    assert "failed their checks" in overview_js and "ended in an error" in overview_js
