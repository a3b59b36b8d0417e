"""Studio for decisions, in headless Debian chromium against a spawned project server (issue 14).

Each test walks one thing a person decides from, and would have caught the bug the issue reports: a failed
check that read "outcome ok", plots whose ticks sat off their labels, a held-out series with a provisional
badge, "stopped" shown as a green "done", an approval note that vanished, a phone page wider than the phone.
The series run on the showcase's simulators with fixed seeds, so every count asserted here is the same on
every run. Screenshots go to test-artifacts/studio/ (the phone ones end in -phone).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from support.studio import ARTIFACTS, _get, _post, _wait_status, login, open_page, shot

MISTRAL = "reply_noninferior_mistral"  # a noninferiority question: a failed check quotes the reply


def start(base: str, body: dict[str, Any]) -> str:
    sid: str = _post(base, "/api/series", body)["series"]["series_id"]
    return sid


def settle(base: str, sid: str) -> dict[str, Any]:
    """Wait until the series ended or paused for a person."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        sn: dict[str, Any] = _get(base, f"/api/series/{sid}?wait_seconds=20")
        if sn["status"] not in ("running", "queued"):
            return sn
    raise AssertionError(f"series {sid} did not settle")


_SERIES: dict[str, str] = {}


def explored(base: str, seed: int) -> str:
    """A finished dev series of the noninferiority experiment: 30 cases × 1 repeat × 2 variants, seeded."""
    key = f"{base}:{seed}"
    if key not in _SERIES:
        sid = start(base, {"experiment_id": MISTRAL, "on": "dev", "cases": 30, "repeats": 1, "seed": seed})
        assert settle(base, sid)["status"] == "done"
        _SERIES[key] = sid
    return _SERIES[key]


@pytest.fixture
def phone(browser: Any, server: tuple[Path, str]) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 360, "height": 740}, is_mobile=True, has_touch=True)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.set_default_timeout(20_000)
    login(pg, server[1])
    yield pg
    context.close()
    assert not errors, errors


def no_sideways_scroll(pg: Any) -> None:
    width = pg.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide on a {width[1]} px screen"


# ---- the attempt view ----


def test_a_failed_check_reads_failed_with_its_reason_and_the_quoted_text(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    sid = explored(base, 1)
    failed = _get(base, f"/api/studio/series/{sid}/attempts?outcome=fail")["items"]
    assert failed and failed[0]["error_code"] == "CHECK_FAILED"
    quoted = re.search(r'"([^"]+)"', failed[0]["error_message"])
    assert quoted, failed[0]
    open_page(page, base, f"runs/{failed[0]['run_id']}")
    page.wait_for_selector("#checks")
    head = page.inner_text("main .sub")
    assert "check failed" in head  # the run finished "done", the attempt failed its check
    outcome = page.inner_text("#outcome")
    assert outcome.startswith("fail: CHECK_FAILED") and "ok" not in outcome
    row = page.locator("#checks tr[data-check='promises']")
    assert row.locator(".badge").inner_text() == "fail"
    assert quoted.group(1) in row.inner_text()  # the stored reason, in full
    marks = page.locator(".reply mark")
    assert marks.count() >= 1 and quoted.group(1) in marks.first.inner_text()  # the offending text, highlighted
    reply = page.inner_text(".reply[data-field='reply']")
    assert "\\n" not in reply and "{" not in reply  # the reply as text, not as JSON with escapes
    assert not page.is_visible("#output-json pre")  # the JSON on demand
    page.click("#output-json summary")
    assert '"reply"' in page.inner_text("#output-json pre")
    shot(page, "run-check-failed")
    # The runs list says which runs failed their checks, and filters on it.
    open_page(page, base, f"runs?series={sid}&outcome=fail")
    page.wait_for_selector("#runs-table")
    rows = page.locator("#runs-table tbody tr")
    assert rows.count() == len(failed)
    assert all(rows.nth(i).locator("td.outcome").inner_text() == "check failed" for i in range(rows.count()))
    open_page(page, base, f"runs?series={sid}")
    page.wait_for_selector("#runs-table")
    assert page.locator("#runs-table tbody tr[data-outcome='pass']").count() > 0
    shot(page, "runs-outcomes")


# ---- the decision header and the plots ----


def ticks_where_labels_say(pg: Any, selector: str) -> dict[str, Any]:
    """Read one interval plot's SVG: tick positions, their labels, reference lines and labels, the SVG width."""
    return pg.eval_on_selector(
        selector,
        """svg => {
          const box = el => { const b = el.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; };
          const all = sel => [...svg.querySelectorAll(sel)];
          const at = (l, a) => [Number(l.dataset.value), Number(l.getAttribute(a))];
          return {
            width: svg.getBoundingClientRect().width,
            lo: Number(svg.dataset.lo), hi: Number(svg.dataset.hi),
            ticks: all('line.tick').map(l => at(l, 'x1')),
            labels: all('text.tick-label').map(t => [t.textContent, Number(t.getAttribute('x')), box(t)]),
            refs: all('line.ref').map(l => at(l, 'x1')),
            refLabels: all('text.ref-label').map(box),
            rowLabels: all('text.row-label').map(t => [t.textContent, box(t)]),
            intervals: all('g.interval').map(g => [Number(g.dataset.low), Number(g.dataset.high)]),
          };
        }""",
    )


def assert_readable_plot(p: dict[str, Any]) -> None:
    ticks = p["ticks"]
    assert len(ticks) >= 3, p
    (v0, x0), (v1, x1) = ticks[0], ticks[-1]
    scale = (x1 - x0) / (v1 - v0)
    steps = {round(b[0] - a[0], 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1, steps  # one step between ticks ...
    step = steps.pop()
    assert round(step / 10 ** math.floor(math.log10(step)), 6) in (1, 2, 2.5, 5)  # ... a round one
    for value, x in ticks:  # every tick where its value is on one linear scale
        assert abs(x0 + (value - v0) * scale - x) < 0.5, (value, x)
    for (text, x, _box), (value, tx) in zip(p["labels"], ticks, strict=True):  # ... and its label says that value
        assert abs(float(text.replace("−", "-")) - value) < 1e-9 and abs(x - tx) < 0.01, (text, value)
    for value, x in p["refs"]:  # the bound, margin and zero lines where their values are
        assert abs(x0 + (value - v0) * scale - x) < 0.5, (value, x)
    labels = p["refLabels"]
    for i, a in enumerate(labels):  # no reference label overlaps another
        for b in labels[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    for text, box in p["rowLabels"]:  # every row label whole inside the plot
        assert box[0] >= 0, text
    for low, high in p["intervals"]:  # the axis is zoomed to the data: no interval shrinks to a dot
        assert (high - low) * abs(scale) > 8 or high - low < 1e-9
    assert p["lo"] <= min([lo for lo, _ in p["intervals"]] + [v for v, _ in p["refs"]])
    assert p["hi"] >= max([hi for _, hi in p["intervals"]] + [v for v, _ in p["refs"]])


def test_the_decision_header_leads_and_the_plots_read_true(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    sid = explored(base, 1)
    page.set_viewport_size({"width": 1440, "height": 900})
    open_page(page, base, f"series/{sid}")
    page.wait_for_selector("#verdict[data-provisional='false']")
    # The verdict first: above progress and spend, a badge and a one-line claim, the sentence, a table.
    order = page.evaluate(
        "() => ['#verdict', '#progress-text', '#matrix']"
        ".map(s => document.querySelector(s).getBoundingClientRect().top)"
    )
    assert order == sorted(order), order
    claim = page.inner_text("#verdict .claim")
    assert claim.startswith("signal") and "mistral − gpt" in claim and "CI" in claim and "margin −0.02" in claim
    assert page.inner_text("#verdict-text").startswith("Signal (working cases, not evidence)")
    assert page.locator("#decision-table tbody tr").count() == 1
    for plot in ("svg[aria-label^='promises per variant']", "svg[aria-label^='differences']"):
        page.wait_for_selector(plot)
        p = ticks_where_labels_say(page, plot)
        assert_readable_plot(p)
        assert p["width"] > 900  # as wide as the page gives it, not a fixed 640 px
    diff = ticks_where_labels_say(page, "svg[aria-label^='differences']")
    assert {v for v, _ in diff["refs"]} == {0.0, -0.02}  # zero and the margin, both labelled
    # Latency and cost per attempt, p50 and p95 per variant.
    page.wait_for_selector("#dist-table")
    rows = page.locator("#dist-table tbody tr")
    assert rows.count() == 2 and rows.nth(0).inner_text().startswith("gpt\t30")
    shot(page, "series-decision")
    # The same plots, drawn the same way, on a narrow page: still round ticks where their labels say.
    page.set_viewport_size({"width": 390, "height": 844})
    diffs = "svg[aria-label^='differences']"
    page.wait_for_function("s => document.querySelector(s).getBoundingClientRect().width < 380", arg=diffs)
    assert_readable_plot(ticks_where_labels_say(page, "svg[aria-label^='differences']"))


def test_compare_case_by_case_and_diff_two_series(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    before, after = explored(base, 1), explored(base, 2)
    open_page(page, base, f"series/{after}")
    page.click("#grid summary")
    page.wait_for_selector("#grid-table")
    assert page.locator("#grid-table tbody tr").count() == 30
    assert page.locator("#grid-table thead th").all_inner_texts() == ["case", "gpt", "mistral"]
    page.check("#grid-failures")
    page.wait_for_function("() => document.querySelectorAll('#grid-table tbody tr').length < 30")
    failing = page.locator("#grid-table tbody tr")
    fails = _get(base, f"/api/studio/series/{after}/attempts?outcome=fail")["items"]
    assert failing.count() == len({a["case_name"] for a in fails})
    assert all("failing" in (failing.nth(i).get_attribute("class") or "") for i in range(failing.count()))
    first = failing.first.locator("td.cell-bad a.attempt-link").first
    href = first.get_attribute("href")
    assert href and href.startswith("#/runs/run_")
    # The diff with the earlier series of the same experiment: worse and better beyond chance, within chance, same.
    page.select_option("#diff-with", before)
    page.wait_for_selector("#diff-counts")
    want = _get(base, f"/api/studio/series/{before}/diff/{after}")
    c = want["counts"]
    assert page.inner_text("#diff-counts").startswith(f"{c['worse']} worse · {c['better']} better beyond chance")
    assert page.locator("#diff-table tbody tr").count() == min(50, want["total"])
    shot(page, "series-compare")
    first.click()
    page.wait_for_selector("#checks")


# ---- series that have not decided, stopped series, approvals ----


def test_a_new_and_a_paused_series_are_not_decided_and_stop_asks_first(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    # Above the project cap: it waits for a person before anything runs.
    sid = start(base, {"experiment_id": MISTRAL, "on": "dev", "cases": 10, "repeats": 1, "cap_usd": "5.00"})
    assert settle(base, sid)["status"] == "awaiting_approval"
    open_page(page, base, f"series/{sid}")
    page.wait_for_selector("#approval")
    header = page.inner_text("#verdict")
    assert "not decided yet" in header and "invalid" not in header and "no data" not in header
    assert page.locator("#verdict .badge.invalid").count() == 0
    shot(page, "series-new")
    dialogs: list[str] = []
    page.once("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))  # type: ignore[func-returns-value]
    page.click("#stop")
    assert dialogs and "20 queued attempts never run" in dialogs[0]
    time.sleep(0.5)
    assert _get(base, f"/api/series/{sid}")["status"] == "awaiting_approval"  # dismissed: nothing stopped
    page.once("dialog", lambda d: d.accept())
    page.click("#stop")
    _wait_status(page, "stopped")
    page.wait_for_selector("#verdict[data-provisional='false']")
    assert page.get_attribute("main .sub .badge", "data-code") == "stopped"  # not a green "done"
    assert page.locator("main .sub .badge.done").count() == 0
    assert page.inner_text("#never-ran") == "20 never ran"
    assert "Stopped at the cap with 20 attempts never run" in page.inner_text("#verdict .claim")
    assert page.locator("#approved-note").count() == 1  # the note of what was done stays
    assert page.locator("#approvals tbody tr[data-channel='studio']").count() == 1
    shot(page, "series-stopped")


def test_the_approval_names_both_amounts_and_enough_to_finish_finishes(page: Any, server: tuple[Path, str]) -> None:
    """Issue 29: no button approves an unnamed amount; the doubled cap is named with what it buys (it pauses
    again before the end), "enough to finish" finishes without a second pause, and the panel says what finishing
    can decide."""
    _root, base = server
    sid = start(base, {"experiment_id": MISTRAL, "on": "dev", "cases": 12, "repeats": 1, "cap_usd": "0.002", "seed": 5})
    assert settle(base, sid)["status"] == "awaiting_approval"
    est = _get(base, f"/api/studio/series/{sid}/finish")
    assert est["double_usd"] == "0.004" and est["double_pauses_after"] is not None
    assert est["double_pauses_after"] < est["left"]  # the doubled cap would pause again before the end
    open_page(page, base, f"series/{sid}")
    page.wait_for_selector("#approve-finish")
    double, finish = page.inner_text("#approve-double"), page.inner_text("#approve-finish")
    assert double == "Approve $0.0040 (double)", double
    assert finish.startswith("Approve $") and finish.endswith("— enough to finish"), finish
    note = page.inner_text("#double-note")
    n = est["double_pauses_after"]
    said = "before another attempt can start" if n == 0 else f"after about {n} more attempt{'' if n == 1 else 's'}"
    assert note == f"double pauses again {said}", note
    assert page.inner_text("#approve").startswith("Approve $0.0040")  # the typed field's button names its amount
    page.fill("#approve-cap", "0.05")
    page.dispatch_event("#approve-cap", "input")
    assert page.inner_text("#approve") == "Approve $0.050"
    if est["decides"]:
        assert page.inner_text("#finish-decides").startswith("Finishing cannot settle the margin with 12 working")
    shot(page, "series-paused-two-amounts")
    page.click("#approve-finish")
    page.wait_for_selector("#approved-note")
    final = settle(base, sid)
    assert final["status"] == "done", final["status"]  # enough to finish: no second pause
    assert [a["action"] for a in final["approvals"]] == ["approve"]
    assert final["approvals"][0]["new_cap_usd"] == est["cap_to_finish_usd"]


def test_an_approval_keeps_its_note_history_and_says_what_finishing_costs(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    sid = start(base, {"experiment_id": MISTRAL, "on": "dev", "cases": 12, "repeats": 1, "cap_usd": "0.002", "seed": 3})
    assert settle(base, sid)["status"] == "awaiting_approval"
    open_page(page, base, f"series/{sid}")
    page.wait_for_selector("#finish-estimate")
    estimate = page.inner_text("#finish-estimate")
    assert "attempts left" in estimate and "lets it finish" in estimate
    assert "not decided yet" in page.inner_text("#verdict")
    shot(page, "series-paused-estimate")
    page.click("#use-finish-cap")
    suggested = page.input_value("#approve-cap")
    assert float(suggested) > 0.002
    page.click("#approve")
    page.wait_for_selector("#approved-note")
    final = settle(base, sid)
    assert final["status"] == "done", final["status"]  # the estimated cap was enough: no second pause
    _wait_status(page, "done")
    assert "the cap went from $0.0020 to" in page.inner_text("#approved-note")  # still there after it ran on
    row = page.locator("#approvals tbody tr").first
    cells = row.locator("td").all_inner_texts()
    assert cells[1] == "approve" and cells[2] and cells[3].startswith("Studio (session)") and cells[4] == "$0.0020"
    shot(page, "series-approved-history")


def test_a_running_held_out_series_shows_no_provisional_verdict(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    open_page(page, base, "experiments/reply_overpromise_risk")
    page.wait_for_selector("#launch-plan dl")
    page.check("#on-holdout")
    page.wait_for_selector("#confirm-ack")
    ack = page.inner_text("#confirm-ack")
    assert "This read cannot decide" in ack and "first read of" in ack
    assert page.is_disabled("#lp-start")
    page.fill("#lp-cap", "0.0012")  # pauses after a few attempts: a held-out series that has not ended
    page.wait_for_function("() => document.querySelector('#launch-plan').textContent.includes('$0.0012')")
    page.check("#ack")
    shot(page, "confirm-ack")
    page.click("#lp-start")
    page.wait_for_url(re.compile(r".*#/series/ser_[0-9a-f]+$"))
    page.wait_for_selector("#approval", timeout=45_000)
    header = page.inner_text("#verdict")
    assert "not decided yet" in header and "Provisional" not in page.inner_text("main")
    for word in ("confirmed", "refuted", "inconclusive", "signal", "invalid"):
        assert page.locator(f"#verdict .badge.{word}").count() == 0
    assert page.locator("#grid").count() == 0 and page.locator("#dist-table").count() == 0  # held out: only counted
    shot(page, "series-holdout-running")


# ---- phones ----


def test_series_and_approval_pages_fit_a_phone(phone: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    sid = explored(base, 1)
    open_page(phone, base, f"series/{sid}")
    phone.wait_for_selector("#verdict[data-provisional='false']")
    phone.wait_for_selector("svg[aria-label^='differences']")
    no_sideways_scroll(phone)
    nav = phone.eval_on_selector("#nav", "n => n.getBoundingClientRect().width / window.innerWidth")
    assert nav > 0.9  # a row across the top, not a column taking half the screen
    shot(phone, "series-phone")
    paused = start(base, {"experiment_id": MISTRAL, "on": "dev", "cases": 8, "repeats": 1, "cap_usd": "0.0012"})
    assert settle(base, paused)["status"] == "awaiting_approval"
    open_page(phone, base, f"series/{paused}")
    phone.wait_for_selector("#approval")
    no_sideways_scroll(phone)
    box = phone.eval_on_selector("#approve", "b => b.getBoundingClientRect().right")
    assert box <= 360
    shot(phone, "approval-phone")
    failed = _get(base, f"/api/studio/series/{sid}/attempts?outcome=fail")["items"][0]
    for route in ("", "runs", f"runs/{failed['run_id']}", "findings", "experiments/reply_overpromise_risk"):
        open_page(phone, base, route)
        phone.wait_for_timeout(200)
        no_sideways_scroll(phone)
    shot(phone, "experiment-phone")


def nothing_wider_than_the_screen(pg: Any) -> None:
    """No table, card or plot runs past the screen's right edge, and none scrolls sideways inside itself."""
    wide = pg.evaluate(
        """() => [...document.querySelectorAll('main table, main .card, main .plot-box')]
            .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 || e.scrollWidth > e.clientWidth + 1)
            .map(e => (e.id || e.className) + ' ' + Math.round(e.getBoundingClientRect().right))"""
    )
    assert wide == [], wide


def test_a_phone_shows_the_decision_and_what_waits_on_the_first_screen(browser: Any, server: tuple[Path, str]) -> None:
    """Issue 29 at 390×844: status and verdict without sideways scrolling (tables become cards), the approval and
    the live progress on the first screen, what waits for the person first on the Overview, the navigation one row,
    a flow graph that scrolls instead of shrinking its text below 11 px."""
    _root, base = server
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    login(pg, base)
    paused = start(base, {"experiment_id": MISTRAL, "on": "dev", "cases": 8, "repeats": 1, "cap_usd": "0.0012"})
    assert settle(base, paused)["status"] == "awaiting_approval"
    open_page(pg, base, f"series/{paused}")
    pg.wait_for_selector("#approve-double")
    no_sideways_scroll(pg)
    nothing_wider_than_the_screen(pg)
    tops = pg.evaluate(
        """() => ({approval: document.querySelector('#approval').getBoundingClientRect().top,
                   progress: document.querySelector('#progress-text').getBoundingClientRect().top,
                   badge: document.querySelector('main .sub .badge').getBoundingClientRect().right})"""
    )
    assert tops["approval"] < 844 and tops["badge"] <= 390, tops
    assert tops["progress"] < 844 * 2, tops  # right under the approval panel, before the verdict's long sentence
    assert pg.evaluate("() => document.querySelector('.stack').dataset.active") == "true"
    shot(pg, "approval-phone-390")
    # The series table of Research as cards: each cell beside its heading, the status and verdict in view.
    open_page(pg, base, "research")
    pg.wait_for_selector("#experiments tbody tr")
    no_sideways_scroll(pg)
    nothing_wider_than_the_screen(pg)
    labels = pg.eval_on_selector_all("#experiments tbody tr:first-child td", "tds => tds.map(td => td.dataset.label)")
    assert labels[:2] == ["experiment", "standing finding"], labels
    shot(pg, "research-phone-390")
    # The Overview: what waits for the person comes before the counts.
    open_page(pg, base, "")
    pg.wait_for_selector("#waiting")
    waiting = pg.eval_on_selector("#waiting", "e => e.getBoundingClientRect().top")
    assert waiting < 844, waiting
    nav = pg.eval_on_selector("#nav", "n => [n.getBoundingClientRect().height, n.scrollWidth >= n.clientWidth]")
    assert nav[0] < 60, nav  # one row
    # A flow graph keeps its size and scrolls: no text drawn below 11 px.
    open_page(pg, base, "flows/support_case")
    pg.wait_for_selector("svg.flow")
    smallest = pg.evaluate(
        """() => { const svg = document.querySelector('svg.flow');
                   const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
                   const sizes = [...svg.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize));
                   return Math.min(...sizes) * scale; }"""
    )
    assert smallest >= 11, smallest
    no_sideways_scroll(pg)
    shot(pg, "flow-phone-390")
    context.close()


# ---- findings, lists, the chat ----


def test_findings_plots_read_true_and_lists_say_stopped(page: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    sid = start(base, {"experiment_id": "reply_overpromise_risk", "on": "holdout", "cases": 3, "repeats": 1})
    assert settle(base, sid)["status"] == "done"
    open_page(page, base, "findings")
    plot = f"svg[aria-label='cells of finding {sid}']"
    page.wait_for_selector(plot)
    assert_readable_plot(ticks_where_labels_say(page, plot))  # drawn as on the series page: zoomed, round ticks
    stopped = start(base, {"experiment_id": MISTRAL, "on": "dev", "cases": 2, "repeats": 1, "cap_usd": "5.00"})
    assert settle(base, stopped)["status"] == "awaiting_approval"
    _post(base, f"/api/series/{stopped}/stop", {}, person=True)
    open_page(page, base, "research")
    page.wait_for_selector("#experiments")
    row = page.locator("tr", has=page.locator(f"a[href='#/series/{stopped}']")).last
    assert row.locator("td").nth(3).inner_text() == "stopped" and row.locator("td").nth(4).inner_text() == "—"


def test_a_chat_error_is_shown_as_an_error(browser: Any, server: tuple[Path, str]) -> None:
    _root, base = server
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.set_default_timeout(20_000)
    login(pg, base)
    open_page(pg, base, "chat")
    failure = '{"error": {"code": "CHAT_FAILED", "message": "the model answered nothing", "hint": "try again"}}'

    def fail_post(route: Any) -> None:
        if route.request.method == "POST":
            route.fulfill(status=502, content_type="application/json", body=failure)
        else:
            route.continue_()

    pg.route("**/api/chat", fail_post)
    pg.fill("#chat-input", "status of the latest series")
    pg.keyboard.press("Enter")
    pg.wait_for_selector(".msg.error[role='alert']")
    text = pg.inner_text(".msg.error")
    assert "The chat failed" in text and "CHAT_FAILED" in text and "hint: try again" in text
    assert pg.locator(".msg.assistant:not(#chat-thinking)").count() == 0  # not an answer bubble
    shot(pg, "chat-error")
    context.close()
    # The browser logs the 502 it was given; nothing else may reach the console.
    assert [e for e in errors if "502" not in e] == [], errors


def test_research_and_the_experiment_lead_with_the_standing_finding(page: Any, server: tuple[Path, str]) -> None:
    """Issue 29: the held-out finding that verifies comes first, with its interval, cases, date, freshness and a
    line of cost per variant; explorations after it."""
    _root, base = server
    sid = start(base, {"experiment_id": MISTRAL, "on": "holdout", "cases": 8, "repeats": 1, "seed": 11})
    done = settle(base, sid)
    assert done["status"] == "done" and done["finding"], done["status"]
    [st] = [s for s in _get(base, "/api/studio/standing") if s["experiment_id"] == MISTRAL]
    assert st["series_id"] == sid and st["cases"] == 8 and st["fresh"] is True
    assert st["low"] is not None and st["low"] <= st["estimate"] <= st["high"]
    costs = {c["variant"]: c for c in st["costs"]}
    gpt, mistral = Decimal(costs["gpt"]["spend_usd"]), Decimal(costs["mistral"]["spend_usd"])
    assert gpt > mistral > 0  # the showcase's mistral is the cheaper model
    pct = ((gpt - mistral) / gpt * 100).quantize(Decimal("1"))
    words = {"confirmed": "not worse", "refuted": "worse", "inconclusive": "undecided"}[st["verdict"]]
    assert costs["mistral"]["line"] == f"mistral: {words}, {pct}% cheaper"
    assert costs["gpt"]["line"].startswith("gpt: the baseline, $")

    open_page(page, base, "research")
    row = page.locator(f"#experiments tr[data-experiment='{MISTRAL}']")
    cell = row.locator("td.standing-cell").inner_text()
    assert st["verdict"] in cell and "8 held-out cases" in cell and f"mistral: {words}, {pct}% cheaper" in cell
    assert row.locator("td").nth(1).inner_text() == cell  # right after the experiment's name
    open_page(page, base, f"experiments/{MISTRAL}")
    card = page.inner_text("#standing")
    assert card.startswith("Standing finding") and st["text"][:40] in card and "unchanged" in card
    first_cards = page.locator("main section.card, main div.card").all_inner_texts()
    assert first_cards[0].startswith("Standing finding")  # before the question and the Launch panel
    shot(page, "experiment-standing-finding")


def test_plots_are_honest_spend_scaled_marked_levels_and_axes_named(page: Any, server: tuple[Path, str]) -> None:
    """Issue 29: the spend axis is scaled to the spend (a far cap is named, not drawn as a flat line), time runs from
    the first attempt, approvals are marked on it; every interval plot names its level and its axis; a range run's
    timeline starts at its earliest node."""
    _root, base = server
    sid = start(base, {"experiment_id": MISTRAL, "on": "dev", "cases": 6, "repeats": 1, "cap_usd": "0.002", "seed": 8})
    assert settle(base, sid)["status"] == "awaiting_approval"
    _post(base, f"/api/series/{sid}/approve", {"cap_usd": "4.00"}, person=True)
    done = settle(base, sid)
    assert done["status"] == "done"
    open_page(page, base, f"series/{sid}")
    page.wait_for_selector("[data-plot='spend'] svg")
    spent = float(done["spend"]["usd"])
    ticks = [
        float(v)
        for v in page.eval_on_selector_all(
            "[data-plot='spend'] .tick-label[data-value]", "els => els.map(e => e.dataset.value)"
        )
    ]
    assert max(ticks) <= spent * 1.5 and max(ticks) >= spent * 0.4, (ticks, spent)  # scaled to the spend, not the cap
    plot = page.text_content("[data-plot='spend'] svg") or ""
    assert "cap $4.00, far above" in plot and "first attempt" in plot and "time since the first attempt ended" in plot
    assert page.locator("[data-plot='spend'] .mark-line[data-mark='approved $4.00']").count() == 1
    page.locator("[data-plot='spend']").screenshot(path=str(ARTIFACTS / "spend-plot-marked.png"))
    heading = page.inner_text("#diff-plot-h")
    assert "interval" in heading and "%" in heading, heading
    titles = page.locator("svg .axis-title").all_text_contents()
    assert any("variant minus gpt" in t for t in titles) and any("share of attempts" in t for t in titles)

    # A run over a node range: the timeline's bars start inside their track.
    body = {"flow_id": "support_case", "case": "hub_firmware_update_stuck", "from_node": "polish", "to_node": "polish"}
    run = _post(base, "/api/runs", {**body, "wait": True})
    open_page(page, base, f"runs/{run['id']}")
    page.wait_for_selector(".tl-track span")
    lefts = page.eval_on_selector_all(".tl-track span", "els => els.map(e => parseFloat(e.style.left))")
    assert lefts and min(lefts) >= 0, lefts


def test_the_launch_plan_has_a_price_and_explains_its_planning_rate(page: Any, server: tuple[Path, str]) -> None:
    """Issue 29: after a dev series ran, the Launch panel prices the next one from its cost per attempt (flagged as
    an estimate, with what the cap will do), and says where the planning rate comes from."""
    _root, base = server
    sid = start(base, {"experiment_id": MISTRAL, "on": "dev", "cases": 6, "repeats": 1, "seed": 21})
    done = settle(base, sid)
    assert done["status"] == "done"
    est = _get(base, f"/api/studio/experiments/{MISTRAL}/price?on=dev&cases=6&repeats=1&simulate=true")
    assert est["estimate"] is True and est["usd"] is not None and est["attempts"] == 12
    per = {v: Decimal(x) for v, x in est["per_attempt_usd"].items()}
    assert set(per) == {"gpt", "mistral"} and per["gpt"] > per["mistral"] > 0
    assert Decimal(est["usd"]) == (per["gpt"] + per["mistral"]) * 6
    plan = _post(base, f"/api/experiments/{MISTRAL}/launch-plan", {"on": "dev", "cases": 6, "repeats": 1})
    assert "price" not in plan and "usd" not in json.dumps(plan.get("recommended", {}))  # the plan has no dollars
    big = _get(base, f"/api/studio/experiments/{MISTRAL}/price?on=dev&simulate=true")
    assert "above its $1.00 cap, it will pause near $0.900 for your approval" in big["text"], big["text"]
    open_page(page, base, f"experiments/{MISTRAL}")
    page.wait_for_selector("#price-estimate")
    page.wait_for_function("() => document.querySelector('#price-estimate').textContent.startsWith('about $')")
    assert "an estimate from the cost per attempt of each variant in series" in page.inner_text("#price-estimate")
    planned = page.inner_text("#launch-plan")
    assert "passes + 0.5" in planned and "pulled a little toward 0.5" in planned


# ---- outputs side by side: the grid and the diff of two series ----


def test_the_diff_shows_both_outputs_marks_chance_and_names_changed_files(page: Any, server: tuple[Path, str]) -> None:
    """Issue: two dev series of the same unchanged files read '13 worse · 7 better · 100 same' with red badges for
    1.000 → 0.500, no word of chance, no outputs, 2,500 px down the page. Now: no worse within chance, both outputs
    per case, "same files", a button from the decision; an edited prompt is named; the grid shows outputs."""
    root, base = server
    body = {"experiment_id": MISTRAL, "on": "dev", "cases": 20, "repeats": 2}
    # Both started before either is done: a launch plan drawn from a done dev series of 2 repeats takes minutes
    # (the power search), and the plan is not what this test is about.
    a = start(base, {**body, "seed": 31})
    b = start(base, {**body, "seed": 32})
    assert settle(base, a)["status"] == settle(base, b)["status"] == "done"
    want = _get(base, f"/api/studio/series/{a}/diff/{b}")
    c = want["counts"]
    assert c["worse"] == c["better"] == 0 and c["within_chance"] > 0, c  # 2 repeats: nothing beyond chance
    open_page(page, base, f"series/{b}")
    page.wait_for_selector("#verdict[data-provisional='false']")
    page.click("#to-compare")  # from the decision at the top
    page.wait_for_selector("#diff-counts")
    top = page.eval_on_selector("#compare", "e => e.getBoundingClientRect().top")
    assert -5 <= top < 800, top  # brought into view
    assert page.input_value("#diff-with") == a  # the newest earlier series, compared by itself
    order = page.evaluate(
        "() => ['#matrix', '#compare', '#cases', '#grid']"
        ".map(s => document.querySelector(s).getBoundingClientRect().top)"
    )
    assert order == sorted(order), order  # right after the per-variant table, before the cases
    assert page.inner_text("#diff-files").startswith("Same files:")
    counts = page.inner_text("#diff-counts")
    assert counts.startswith("0 worse · 0 better beyond chance") and f"{c['within_chance']} within chance" in counts
    assert "p = 0.33" in page.inner_text("#diff-chance")  # even 2/2 → 0/2 cannot be told from chance
    assert page.locator("#diff-table tr[data-change='worse'], #diff-table .badge.bad").count() == 0
    assert page.locator("#diff-table tr[data-change='within_chance']").count() == c["within_chance"]
    rows = page.locator("#diff-table tbody tr")
    assert rows.count() == want["total"] == 40
    for i in range(rows.count()):  # both outputs, one attempt of each
        row = rows.nth(i)
        assert row.locator("td.before .snippet").count() == 1 and row.locator("td.after .snippet").count() == 1
    texts = page.locator("#diff-table td.after .snippet-text").all_inner_texts()
    assert len(texts) >= 30 and all(len(t) > 20 for t in texts)
    shot(page, "series-diff-outputs")
    # The grid: each cell shows an output, a failing attempt's with its quoted passage marked.
    page.click("#grid summary")
    page.wait_for_selector("#grid-table")
    assert page.locator("#grid-table td[data-variant] .snippet").count() == 40
    grid = _get(base, f"/api/studio/series/{b}/grid")
    quoted = [c for r in grid["rows"] for c in r["cells"].values() if c["sample"]["quotes"]]
    if quoted:
        assert page.locator("#grid-table td.cell-bad .snippet mark").count() >= len(quoted)
    shot(page, "series-grid-outputs")

    # Edit the prompt of the revise step and run again: the diff names the file.
    prompt = root / "flows" / "support_case" / "revise.md"
    before = prompt.read_text()
    try:
        prompt.write_text(before + "\nNever promise a same-day refund.\n")
        c3 = start(base, {**body, "seed": 33})
        assert settle(base, c3)["status"] == "done"
        open_page(page, base, f"series/{c3}")
        page.wait_for_selector("#diff-files")
        assert page.input_value("#diff-with") == b
        files = page.inner_text("#diff-files")
        assert files.startswith("The files changed between the two series") and "flows/support_case/revise.md" in files
        shot(page, "series-diff-files-changed")
    finally:
        prompt.write_text(before)


def test_the_chat_keeps_line_breaks_links_ids_and_rounds_money(page: Any, server: tuple[Path, str]) -> None:
    """Issue: the chat's answer collapsed its lines into one paragraph, and series ids were not links."""
    _root, base = server
    sid = explored(base, 1)
    open_page(page, base, "chat")
    page.fill("#chat-input", f"status of {sid}")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg.assistant .md")
    answer = page.locator(".msg.assistant").last
    assert answer.locator("br").count() >= 2  # "series …", "Verdict: …", the responder's line: each its own line
    link = answer.locator(f"a[href='#/series/{sid}']")
    assert link.count() >= 1 and link.first.inner_text() == sid
    text = answer.inner_text()
    assert re.search(r"spent \$\d+\.\d{2,5} of \$\d+\.\d{2}", text), text
    shot(page, "chat-lines-and-links")
    link.first.click()
    page.wait_for_selector("#verdict")
