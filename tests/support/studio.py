"""The Studio browser tests' set-up: a spawned project server on the showcase project, headless Debian
Chromium, a logged-in page, screenshots under test-artifacts/studio/, and small JSON helpers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.browser import BROWSER_ARGS, CHROMIUM
from support.commands import cli_env, stop_server
from support.paths import ARTIFACTS as ARTIFACT_ROOT
from support.person import person_secret

ARTIFACTS = ARTIFACT_ROOT / "studio"

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


def _post(base: str, path: str, body: Any, *, person: bool = False) -> Any:
    """POST with the agent's token, or with the person key (`person`: a person's act, as the aqven command does)."""
    credential = person_secret() if person else TOKENS.get(base, "")
    headers = {"content-type": "application/json", "authorization": f"Bearer {credential}"}
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def login(pg: Any, base: str, page: str = "") -> None:
    """Log the page's browser context into Studio the way a person does: through a one-time link of the CLI's."""
    pg.goto(_post(base, "/api/studio/login-link", {"page": page}, person=True)["url"])
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
            base = f"http://localhost:{info['port']}"  # Studio's origin (passkeys are bound to it)
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
    context = browser.new_context(viewport={"width": 1440, "height": 900})  # the desktop the issue names
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


def _wait_status(pg: Any, status: str, timeout: float = 45_000) -> None:
    pg.wait_for_function(
        "s => { const b = document.querySelector('main .sub .badge'); return b && b.dataset.code === s; }",
        arg=status,
        timeout=timeout,
    )
