"""Studio in a real browser: headless Debian chromium driven by Playwright, against a spawned project server.

The showcase project runs on simulated models. The tests walk the main flows a person takes, with the
keyboard where it matters: launch a dev series from the Launch panel and watch it finish, approve a series
paused at a small cap, open a failing run's trace, answer a human node, confirm on held-out cases and find the
finding, and ask the chat a question only FINDINGS.md answers. Each page is saved to test-artifacts/studio/.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from aqven.people import person_key
from support.browser import CHROMIUM
from support.studio import _get, _post, _wait_status, open_page, shot

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing: install Debian's chromium (scripts/test.sh does)"
)


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


def test_launch_a_dev_series_and_watch_it_finish(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    open_page(page, base, "experiments/reply_overpromise_risk")
    page.wait_for_selector("#launch-plan dl")
    plan = page.inner_text("#launch-plan")
    assert "12" in plan and "6 cases × 2 repeats × 1 variant" in plan
    assert "Fewer cases than recommended" in plan and "194 cases would decide it (refuted)" in plan
    assert "planned with" in plan and "defaults: rate 0.95" in plan and "at 95%" in plan
    # one number of cases with where it comes from; the floor only as the reason when it binds (6 < 183)
    assert "why so many" in plan and "at least 183 cases" in plan and "80% power" not in plan
    assert page.inner_text("#recommended").startswith("194 cases × 2 repeats")
    # a price beside the plan: nothing has run yet, so no estimate, and it says why
    assert page.inner_text("#price-estimate").startswith("no estimate yet")
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
    assert "paused near its cap" in text and "near its cap" in text  # the reason in words, not its code
    assert page.locator("#approval [data-code='spend_near_cap']").count() == 1
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
    # The trace names who answered: the person of this Studio session (no passkey here), the person key's name.
    [node] = [n for n in _get(base, f"/api/studio/runs/{rec['id']}/trace")["nodes"] if n["human"]]
    page.click(f".tl-row[data-node='{node['id']}']")
    said, key = page.inner_text("#human-answered-by"), person_key()
    assert key is not None and said == f"answered by {key.name}, Studio (session)", said


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
