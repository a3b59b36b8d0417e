"""Studio in a real browser: headless Debian chromium driven by Playwright, against a spawned project server.

The showcase project runs on simulated models. The tests walk the main flows a person takes, with the
keyboard where it matters: launch a dev series from the Launch panel and watch it finish, approve a series
paused at a small cap, open a failing run's trace, answer a human node, confirm on held-out cases and find the
finding, and ask the chat a question only FINDINGS.md answers. Each page is saved to test-artifacts/studio/.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import cli_env, stop_server

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "studio"
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing: install Debian's chromium (scripts/test.sh does)"
)

HUMAN_FLOW = """description: Ask a person whether a reply may go out.
input:
  ticket: string
output:
  approved: boolean
nodes:
  - id: approve
    kind: human
    question: Send a reply to this ticket?
    inputs:
      ticket: $input.ticket
    output:
      approved: boolean
"""


TOKENS: dict[str, str] = {}  # base URL -> the token of the server there (from its server.json)


def _get(base: str, path: str) -> Any:
    req = urllib.request.Request(base + path, headers={"authorization": f"Bearer {TOKENS.get(base, '')}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _post(base: str, path: str, body: Any) -> Any:
    headers = {"content-type": "application/json", "authorization": f"Bearer {TOKENS.get(base, '')}"}
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def login(pg: Any, base: str, page: str = "") -> None:
    """Log the page's browser context into Studio the way a person does: through a one-time link of the CLI's."""
    pg.goto(_post(base, "/api/studio/login-link", {"page": page})["url"])
    pg.wait_for_selector("main h1")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    from aqven.project.init import init_project

    root = init_project(tmp_path_factory.mktemp("studio") / "lumen", "lumen")
    (root / "flows" / "approve_reply").mkdir(parents=True)
    (root / "flows" / "approve_reply" / "flow.yaml").write_text(HUMAN_FLOW)
    env = cli_env(AQVEN_SIMULATE="1", AQVEN_SIM_LATENCY_SCALE="0.02")
    env.pop("AQVEN_CHAT_AGENT", None)
    log = open(root.parent / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "aqven", "serve", "--root", str(root)], cwd=root, env=env, stdout=log, stderr=log
    )
    info_file = root / ".aqven" / "server.json"
    deadline = time.monotonic() + 60
    base = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError((root.parent / "server.log").read_text())
        try:
            info = json.loads(info_file.read_text())
            base = f"http://127.0.0.1:{info['port']}"
            TOKENS[base] = info["token"]
            if _get(base, "/api/health")["status"] == "ok":
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    else:
        raise RuntimeError("the project server did not start")
    try:
        yield root, base
    finally:
        proc.terminate()  # our own child: wait for it (a zombie would still answer kill(pid, 0))
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        stop_server(root)
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, server: tuple[Path, str]) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.set_default_timeout(20_000)
    login(pg, server[1])
    yield pg
    context.close()
    assert not errors, errors


def shot(pg: Any, name: str) -> None:
    pg.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def open_page(pg: Any, base: str, route: str) -> None:
    pg.goto(f"{base}/studio/#/{route}")
    pg.wait_for_selector("main h1")


def test_overview_flows_and_keyboard(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    open_page(page, base, "")
    page.wait_for_selector("#check .note.ok")
    assert "Lumen support" in page.inner_text("main h1")
    assert "Simulated mode is on" in page.inner_text("main")
    assert "Simulated mode" in page.inner_text("#sim-banner")
    shot(page, "overview")
    page.keyboard.press("2")  # keys 1-6 switch pages
    page.wait_for_selector("svg.flow")
    assert page.url.endswith("#/flows")
    assert page.locator("svg.flow").count() == 3
    text = page.inner_text("main")
    assert (
        "polish" in text and "reply_overpromise_risk: polish → polish" in page.locator("svg.flow").nth(2).text_content()
    )
    assert "openrouter:openai/gpt-4.1-mini" in text
    shot(page, "flows")
    page.keyboard.press("4")
    page.wait_for_selector("#experiments")
    shot(page, "research")
    open_page(page, base, "experiments/panel_judge_prompt")
    assert page.inner_text("#variants caption") == "Varies: prompt of deepseek, qwen, llama"
    rows = page.locator("#variants tbody tr")
    described = "Each judge keeps the prompt of flows/judge_panel/."  # the variant's description from its YAML
    assert rows.nth(0).inner_text().split("\t") == ["as_written", "as written", described]
    assert "deepseek: claims_first" in rows.nth(1).inner_text()


def _wait_status(pg: Any, status: str, timeout: float = 45_000) -> None:
    pg.wait_for_function(
        "s => { const b = document.querySelector('main .sub .badge'); return b && b.textContent === s; }",
        arg=status,
        timeout=timeout,
    )


def test_launch_a_dev_series_and_watch_it_finish(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    open_page(page, base, "experiments/reply_overpromise_risk")
    page.wait_for_selector("#launch-plan dl")
    plan = page.inner_text("#launch-plan")
    assert "12" in plan and "6 cases × 2 repeats × 1 variant" in plan
    assert "Fewer cases than recommended" in plan and "1187 cases would bring the half-width" in plan
    assert "planned with" in plan and "defaults: rate 0.95" in plan and "at 95%" in plan
    assert "zero-failure floor" in plan and "at least 183 cases" in plan and "80% power" in plan
    assert page.is_checked("#on-dev")
    shot(page, "experiment-launch")
    page.focus("#lp-start")  # without a mouse: focus the button, press Enter
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*#/series/ser_[0-9a-f]+$"))
    page.wait_for_selector("#progress-text")
    _wait_status(page, "done")
    page.wait_for_selector("#verdict[data-provisional='false']")
    assert page.inner_text("#verdict-text").startswith("Signal (working cases, not evidence)")
    assert "12 of 12 attempts" in page.inner_text("#progress-text")
    assert page.locator("#matrix tbody tr").count() == 1
    assert page.locator("svg.plot").count() >= 2  # the spend curve and the intervals
    assert page.locator("#cases tbody tr").count() == 6
    assert "simulators" in page.inner_text("main")
    shot(page, "series-done")


def test_a_paused_series_is_approved_with_a_new_cap_and_finishes(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    open_page(page, base, "experiments/reply_overpromise_risk")
    page.wait_for_selector("#launch-plan dl")
    page.fill("#lp-cap", "0.0012")
    page.wait_for_function("() => document.querySelector('#launch-plan').textContent.includes('$0.0012')")
    page.click("#lp-start")
    page.wait_for_url(re.compile(r".*#/series/ser_[0-9a-f]+$"))
    page.wait_for_selector("#approval", timeout=45_000)
    text = page.inner_text("#approval")
    assert "paused near its cap" in text and "spend_near_cap" in text
    assert page.input_value("#approve-cap") == "0.0024"  # double the cap by default
    shot(page, "series-paused")
    page.fill("#approve-cap", "1.00")
    page.click("#approve")
    _wait_status(page, "done")
    page.wait_for_selector("#verdict[data-provisional='false']")
    assert page.locator("#approval").count() == 0
    assert "of $1.00" in page.inner_text("#spend-text")
    shot(page, "series-approved")


def test_a_failing_runs_trace(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    open_page(page, base, "runs")
    page.click("text=Start a run")
    page.select_option("#nr-flow", "support_case")
    page.select_option("#nr-kind", "input")
    page.fill("#nr-input", '{"ticket": "My bulb died", "tier": "gold"}')
    page.fill("#nr-context", '{"order_total": "lots", "days_since_delivery": 3}')
    page.click("text=Start run")
    page.wait_for_url(re.compile(r".*#/runs/run_[0-9a-f]+$"))
    _wait_status(page, "failed", 30_000)
    page.wait_for_selector("[data-node='draft']")
    assert "CODE_ERROR" in page.inner_text("main .note.bad")
    page.focus("[data-node='draft']")
    page.keyboard.press("Enter")
    page.wait_for_selector(".tl-detail")
    assert "Model call 1" in page.inner_text(".tl-detail")
    shot(page, "run-failed")
    open_page(page, base, "runs?status=failed")
    page.wait_for_selector("#runs-table")
    assert page.locator("#runs-table tbody tr").count() == 1
    shot(page, "runs")


def test_answering_a_human_node(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    rec = _post(base, "/api/runs", {"flow_id": "approve_reply", "input": {"ticket": "Refund please"}, "wait": True})
    assert rec["status"] == "waiting_human"
    open_page(page, base, f"runs/{rec['id']}")
    page.wait_for_selector("#human-answer")
    assert "Send a reply to this ticket?" in page.inner_text("main")
    page.fill("#human-answer", '{"approved": true}')
    shot(page, "run-human")
    page.click("text=Send answer")
    _wait_status(page, "done", 30_000)
    assert _get(base, f"/api/runs/{rec['id']}")["output"] == {"approved": True}


def test_confirm_on_held_out_cases_writes_a_finding(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    open_page(page, base, "experiments/reply_overpromise_risk")
    page.wait_for_selector("#launch-plan dl")
    page.check("#on-holdout")
    page.fill("#lp-cases", "3")
    page.fill("#lp-repeats", "1")
    page.wait_for_function("() => document.querySelector('#launch-plan').textContent.includes('3 cases × 1 repeats')")
    assert "writes a finding" in page.inner_text("#launch-plan")
    page.wait_for_selector("#confirm-ack")
    assert "first read of 3 held-out cases" in page.inner_text("#confirm-ack")
    assert page.is_disabled("#lp-start")  # a held-out read is named before it starts
    page.check("#ack")
    page.click("#lp-start")
    page.wait_for_url(re.compile(r".*#/series/ser_[0-9a-f]+$"))
    _wait_status(page, "done")
    page.wait_for_selector("text=Finding written")
    assert "never shown one by one" in page.inner_text("main")
    shot(page, "series-holdout")
    page.click("text=Finding written >> a")
    page.wait_for_selector("#findings-md h3")
    md = page.inner_text("#findings-md")
    assert "overpromise" in md and "reply_overpromise_risk" in md
    assert any(shelf in md for shelf in ("On holdout cases", "Inconclusive"))
    assert page.locator(".finding .fresh").count() == 1
    assert page.locator(".finding svg.plot").count() >= 1
    shot(page, "findings")
    # The held-out attempts' runs are not listed one by one on the runs page: only counted.
    open_page(page, base, "runs?source=series")
    page.wait_for_selector("#held-out-runs")
    assert "runs of held-out cases not listed" in page.inner_text("#held-out-runs")


def test_the_chat_answers_from_findings(page: Any, server: tuple[Path, str]) -> None:
    root, base = server
    if not (root / "FINDINGS.md").is_file():  # run alone: confirm once so that there is a finding
        body = {"experiment_id": "reply_overpromise_risk", "on": "holdout", "cases": 2, "repeats": 1}
        sid = _post(base, "/api/series", body)["series"]["series_id"]
        assert _get(base, f"/api/series/{sid}?wait_seconds=50")["status"] == "done"
    findings_md = (root / "FINDINGS.md").read_text()
    sentence = re.search(r"“(.+?)”", findings_md)
    assert sentence, findings_md
    open_page(page, base, "chat")
    info = page.inner_text("main dl")
    for name in ("FINDINGS.md", "AGENTS.md", "CLAUDE.md"):  # read first, present or not
        assert (f"{name} (absent)" in info) == (not (root / name).is_file()), info
    assert "offline responder" in page.inner_text("main .note.sim")
    page.fill("#chat-input", "What do we know about overpromise on the polish step?")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg.assistant:not(#chat-thinking)")
    answer = page.inner_text(".msg.assistant")
    assert sentence.group(1) in answer and "reply_overpromise_risk" in answer
    assert "read_findings" in answer
    shot(page, "chat")
