"""Browser attacks on Studio and the REST API, in a real headless Chromium (Debian's, driven by Playwright).

A real project server (showcase, simulated models) holds a series paused for approval; the browser is logged
into Studio through a one-time link, as a person's is. A second origin, another HTTP server on another
127.0.0.1 port, serves the attacker's pages. Each attack must leave the series as it was:

* a cross-origin `<form method=POST>` with no fields to approve, stop and cancel (the browser sends the
  Studio cookie along: another port of 127.0.0.1 is the same site), and `fetch(…, {mode: 'no-cors'})` with a
  text/plain body → 403 / 415, nothing changes;
* DNS rebinding: Chromium resolves `evil.example` to 127.0.0.1 (`--host-resolver-rules`), a page of
  `http://evil.example:<port>/` reads and writes the API "same-origin" → 421 for every request;
* clickjacking: the attacker's page frames Studio's series page invisibly over a decoy button; the browser
  refuses to render the frame (`X-Frame-Options: DENY`, `frame-ancestors 'none'`; the server refuses the
  framed navigation too), and a click where the Approve button would be approves nothing.

Then a person approves the same series in Studio, and it runs on.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from support.browser import BROWSER_ARGS, CHROMIUM
from support.commands import stop_server
from support.fault_soak import LiveServer, http, server_env
from support.person import person_secret

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing: install Debian's chromium (scripts/test.sh does)"
)

# Chromium's own Private/Local Network Access checks would stop a public page's requests to loopback; they are
# off here, so that the test shows the server holding by itself (other browsers, older Chromium, extensions).
NO_PNA = (
    "--disable-features=BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,"
    "PrivateNetworkAccessRespectPreflightResults,LocalNetworkAccessChecks"
)
PAUSED_BODY = {"experiment_id": "reply_overpromise_risk", "cases": 1, "repeats": 1, "cap_usd": "5.00"}


class Attacker:
    """The second origin: pages set with `page(path, html)`, served from another 127.0.0.1 port."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        pages = self.pages

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = pages.get(self.path.split("?", 1)[0], "not here").encode()
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        self.origin = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def page(self, path: str, html: str) -> str:
        self.pages[path] = html
        return self.origin + path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    from aqven.project.init import init_project

    root = init_project(tmp_path_factory.mktemp("browser-attacks") / "lumen", "lumen")
    server = LiveServer(root, server_env(AQVEN_SIMULATE="1", AQVEN_SIM_LATENCY_SCALE="0"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
        stop_server(root)


@pytest.fixture(scope="module")
def attacker() -> Iterator[Attacker]:
    evil = Attacker()
    yield evil
    evil.httpd.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # evil.example resolves to 127.0.0.1, as a rebinding name does once its short TTL ran out
        args = [*BROWSER_ARGS, "--host-resolver-rules=MAP evil.example 127.0.0.1", NO_PNA]
        b = p.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        yield b
        b.close()


@pytest.fixture
def person(browser: Any, served: LiveServer) -> Iterator[Any]:
    """A browser context logged into Studio through a CLI login link; it records what the server answered."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    pg.answers = []  # type: ignore[attr-defined]
    pg.on("response", lambda r: pg.answers.append((r.request.method, r.url, r.status)))
    pg.goto(served.post("/api/studio/login-link", {"page": ""}, token=person_secret())["url"])
    pg.wait_for_selector("main h1")
    assert any(c["name"] == "aqven_session" for c in context.cookies())
    yield pg
    context.close()


def paused(server: LiveServer) -> str:
    sid = str(server.post("/api/series", PAUSED_BODY)["series"]["series_id"])
    assert server.get(f"/api/series/{sid}")["status"] == "awaiting_approval"
    return sid


def unchanged(server: LiveServer, sid: str) -> None:
    state = server.get(f"/api/series/{sid}")
    assert state["status"] == "awaiting_approval" and state["spend"]["cap_usd"] == "5.00", state["status"]
    assert state["pause"]["reason"] == "cap_above_project"


def answered(pg: Any, url_part: str) -> list[int]:
    return [status for method, url, status in pg.answers if url_part in url and method != "GET"]


def test_a_cross_origin_form_and_no_cors_fetch_change_nothing(
    person: Any, served: LiveServer, attacker: Attacker
) -> None:
    sid = paused(served)
    api = f"http://127.0.0.1:{served.port}/api/series/{sid}"
    for action in ("approve", "stop", "cancel"):
        url = attacker.page(
            f"/form-{action}.html",
            f'<form method="POST" action="{api}/{action}"></form><script>document.forms[0].submit()</script>',
        )
        person.goto(url)
        person.wait_for_url(f"{api}/{action}")
        assert "ORIGIN_REFUSED" in person.inner_text("body")
        unchanged(served, sid)
    assert answered(person, f"/api/series/{sid}/") == [403, 403, 403]

    fetches = attacker.page(
        "/fetch.html",
        f"""<pre id="out"></pre><script>
        const api = {json.dumps(api)};
        const results = [];
        async function go() {{
          for (const action of ["approve", "stop", "cancel"]) {{
            await fetch(api + "/" + action, {{method: "POST", mode: "no-cors", credentials: "include",
              headers: {{"content-type": "text/plain"}}, body: JSON.stringify({{cap_usd: "1000000"}})}})
              .then(r => results.push(action + ":" + r.type), e => results.push(action + ":error"));
            await fetch(api + "/" + action, {{method: "POST", credentials: "include",
              headers: {{"content-type": "application/json"}}, body: "{{}}"}})
              .then(r => results.push(action + ":json:" + r.status), e => results.push(action + ":json:blocked"));
          }}
          const es = new EventSource(api + "/stream", {{withCredentials: true}});
          await new Promise(done => {{ es.onerror = () => {{ results.push("sse:error"); es.close(); done(); }};
            es.onmessage = () => {{ results.push("sse:read"); es.close(); done(); }}; }});
          document.getElementById("out").textContent = results.join(" ");
        }}
        go();
        </script>""",
    )
    person.answers.clear()
    person.goto(fetches)
    person.wait_for_function("() => document.getElementById('out').textContent.includes('sse:')")
    out = person.inner_text("#out").split()
    assert out[-1] == "sse:error" and "sse:read" not in out
    assert [x for x in out if ":json:" in x] == ["approve:json:blocked", "stop:json:blocked", "cancel:json:blocked"]
    # the no-cors posts reached the server and were refused; the JSON ones died at their preflight (403)
    statuses = answered(person, f"/api/series/{sid}/")
    assert statuses and all(s in (403, 415) for s in statuses), statuses
    unchanged(served, sid)


def test_dns_rebinding_is_refused(person: Any, served: LiveServer) -> None:
    sid = paused(served)
    before = len(served.get("/api/series?limit=500"))
    rebound = f"http://evil.example:{served.port}"
    script = f"""<pre id="out"></pre><script>
    const out = [];
    async function go() {{
      for (const [method, path, body] of [
        ["GET", "/api/project", null],
        ["GET", "/api/series", null],
        ["POST", "/api/series", {json.dumps(json.dumps({**PAUSED_BODY, "cap_usd": "100000"}))}],
        ["POST", "/api/series/{sid}/approve", '{{"cap_usd": "1000000"}}'],
        ["GET", "/studio/", null],
      ]) {{
        try {{
          const r = await fetch(path, {{method, body, headers: body ? {{"content-type": "application/json"}} : {{}}}});
          out.push(r.status);
        }} catch (e) {{ out.push("error:" + e); }}
      }}
      document.getElementById("out").textContent = out.join(" ");
    }}
    go();
    </script>"""
    # The attacker's first answer for evil.example: its page. Every later request of that page goes to
    # 127.0.0.1 (the rebinding), i.e. to the project server, with the page's own Host header.
    person.route(f"{rebound}/attack", lambda route: route.fulfill(status=200, content_type="text/html", body=script))
    person.goto(f"{rebound}/attack")
    person.wait_for_function("() => document.getElementById('out').textContent.length > 0")
    assert person.inner_text("#out").split() == ["421"] * 5
    unchanged(served, sid)
    assert len(served.get("/api/series?limit=500")) == before  # no series started


def test_an_invisible_frame_cannot_click_approve(person: Any, served: LiveServer, attacker: Attacker) -> None:
    sid = paused(served)
    studio = f"http://localhost:{served.port}/studio/#/series/{sid}"
    # Where a person's Approve button is on this page, in a tab of their own.
    person.goto(studio)
    person.wait_for_selector("#approve")
    box = person.locator("#approve").bounding_box()
    assert box
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    trap = attacker.page(
        "/clickjack.html",
        f"""<style>body {{ margin: 0 }} iframe {{ position: absolute; top: 0; left: 0; width: 1280px;
        height: 800px; border: 0; opacity: 0.01; z-index: 2 }} button {{ position: absolute;
        left: {x - 60}px; top: {y - 15}px; width: 120px; height: 30px; z-index: 1 }}</style>
        <button id="decoy" onclick="document.title='decoy'">Win a prize</button>
        <iframe id="frame" src="{studio}"></iframe>""",
    )
    person.answers.clear()
    person.goto(trap)
    person.wait_for_timeout(1500)  # time for the frame to load, were it allowed
    frame = next(f for f in person.frames if f != person.main_frame)
    framed = [status for method, url, status in person.answers if url.startswith(studio.split("#")[0])]
    assert framed and all(s == 403 for s in framed), framed  # the server refuses the framed navigation too
    assert frame.url.startswith("chrome-error://") or frame.query_selector("#approve") is None
    person.mouse.click(x, y)
    person.wait_for_timeout(500)
    unchanged(served, sid)

    # A person, in Studio itself, approves it: the same click works where it belongs.
    person.goto(studio)
    person.wait_for_selector("#approve")
    person.fill("#approve-cap", "5.00")
    person.click("#approve")
    person.wait_for_function(
        "() => { const b = document.querySelector('main .sub .badge'); return b && b.dataset.code !== "
        "'awaiting_approval'; }"
    )
    state = http(served.port, "GET", f"/api/series/{sid}")
    assert state["status"] in ("running", "done") and state["spend"]["cap_usd"] == "5.00"
    assert [(a["action"], a["channel"]) for a in state["approvals"]] == [("approve", "studio")]
    person.wait_for_selector("#approvals tr[data-channel='studio']")  # the series page shows who approved


def test_a_raised_project_cap_is_confirmed_by_a_person_in_studio(person: Any, served: LiveServer) -> None:
    yaml_file = served.root / "aqven.yaml"
    text = yaml_file.read_text()
    yaml_file.write_text(text.replace('spend_cap_usd: "1.00"', 'spend_cap_usd: "3.00"'))
    try:
        deadline = time.monotonic() + 20
        while not served.get("/api/project")["project_cap_pending"]:
            assert time.monotonic() < deadline, "the server did not reload aqven.yaml"
            time.sleep(0.1)
        person.goto(f"http://localhost:{served.port}/studio/#/")
        person.wait_for_selector("#cap-pending")  # the overview says so too
        person.goto(f"http://localhost:{served.port}/studio/#/experiments/reply_overpromise_risk")
        person.wait_for_selector("#cap-pending")
        assert "asks for a project cap of $3.00" in person.inner_text("#cap-pending")
        assert "project cap $1.00" in person.inner_text("#launch-plan")
        person.click("#confirm-cap")
        person.wait_for_function("() => !document.querySelector('#cap-pending')")
        project = served.get("/api/project")
        assert (project["project_cap_usd"], project["project_cap_confirmed_by"]) == ("3.00", "studio")
        assert "project cap $3.00" in person.inner_text("#launch-plan")
    finally:
        yaml_file.write_text(text)  # lowering back takes effect at once
