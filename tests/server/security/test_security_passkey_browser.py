"""A person registers a passkey and approves with it in real Chromium (its virtual authenticator, the DevTools
`WebAuthn` domain); an approval without one is refused. Against a real `python -m aqven serve` of the tiny project.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aqven.people import load, person_key, reverify
from support.browser import BROWSER_ARGS, CHROMIUM
from support.fault_soak import LiveServer, live_server, server_env
from support.person import person_secret
from support.series_kit import case_names, write_tiny

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing: install Debian's chromium (scripts/test.sh does)"
)


@pytest.fixture
def served(tiny_env: Path, tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(write_tiny(tmp_path / "tiny", case_names(4, 2)), server_env()) as server:
        yield server


@pytest.fixture
def studio(served: LiveServer) -> Iterator[tuple[Any, Any]]:
    """A Chromium page logged into Studio at http://localhost:PORT, with a virtual platform authenticator."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20_000)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        cdp = context.new_cdp_session(page)
        cdp.send("WebAuthn.enable")
        options = {
            "protocol": "ctap2",
            "transport": "internal",
            "hasResidentKey": True,
            "hasUserVerification": True,
            "isUserVerified": True,
            "automaticPresenceSimulation": True,
        }
        authenticator = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": options})["authenticatorId"]
        page.authenticator = (cdp, authenticator)  # type: ignore[attr-defined]
        page.goto(served.post("/api/studio/login-link", {"page": ""}, token=person_secret())["url"])
        page.wait_for_selector("main h1")
        assert page.url.startswith(f"http://localhost:{served.port}/studio/")
        yield page, cdp
        context.close()
        browser.close()
        assert not errors, errors


def paused(server: LiveServer) -> str:
    sid = str(
        server.post("/api/series", {"experiment_id": "rate", "simulate": True, "cap_usd": "3.00"})["series"][
            "series_id"
        ]
    )
    assert server.get(f"/api/series/{sid}")["status"] == "awaiting_approval"
    return sid


def wait_until(check: Any, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_a_person_registers_a_passkey_and_approves_with_it(studio: tuple[Any, Any], served: LiveServer) -> None:
    page, cdp = studio
    cdp_id = page.authenticator[1]
    page.wait_for_selector("#passkey-register")
    # The name defaults to the person of the session (the user whose person key opened Studio); a person types theirs.
    login = person_key()
    assert login is not None and page.input_value("#passkey-user") == login.name
    page.fill("#passkey-user", "Ada Lovelace")
    page.click("#passkey-register")
    page.wait_for_selector("#passkey-table tbody tr")
    assert "Money moves on a passkey here" in page.inner_text("#passkey-rule")
    assert "Ada Lovelace" in page.inner_text("#passkey-table")
    [key] = load(served.root).passkeys
    assert key.user == "Ada Lovelace"
    [stored] = cdp.send("WebAuthn.getCredentials", {"authenticatorId": cdp_id})["credentials"]
    assert stored["isResidentCredential"] is True and key.public_key  # the server kept the public key only

    sid = paused(served)
    # Without a passkey, the same session's approval is refused (as an agent's page would try it).
    refused = page.evaluate(
        """async sid => {
            const csrf = document.querySelector('meta[name="aqven-csrf"]').content;
            const r = await fetch(`/api/series/${sid}/approve`, {method: 'POST', headers: {'content-type':
                'application/json', 'x-csrf-token': csrf}, body: JSON.stringify({cap_usd: '3.00'})});
            return [r.status, (await r.json()).error.code];
        }""",
        sid,
    )
    assert refused == [403, "PASSKEY_REQUIRED"]

    page.goto(f"http://localhost:{served.port}/studio/#/series/{sid}")
    page.wait_for_selector("#approve")
    page.fill("#approve-cap", "3.00")
    page.click("#approve")
    page.wait_for_selector("#approved-note")
    state = wait_until(lambda: (s := served.get(f"/api/series/{sid}"))["approvals"] and s)
    [approval] = state["approvals"]
    assert (approval["channel"], approval["confirmed"], approval["new_cap_usd"]) == ("studio", "passkey", "3.00")
    assert approval["proof"]["binding"] == {**approval["proof"]["binding"], "action": "approve", "target": sid}
    assert reverify(approval["proof"], load(served.root).passkeys) is None
    page.wait_for_selector("#approvals tr[data-channel='studio']")
    assert "passkey" in page.inner_text("#approvals")
    # Who approved: the name of the passkey that signed, in the series' approvals and on the overview.
    assert approval["person"] == "Ada Lovelace"
    assert page.inner_text("#approvals tr[data-person='Ada Lovelace'] td.who") == "Ada Lovelace"
    page.goto(f"http://localhost:{served.port}/studio/#/")
    row = page.wait_for_selector(f"#recent-approvals tr[data-series='{sid}']")
    assert row is not None and "Ada Lovelace" in row.inner_text() and "approved $3.00" in row.inner_text()

    # An authenticator that cannot verify the person (user verification fails): nothing is approved.
    other = paused(served)
    cdp.send("WebAuthn.setUserVerified", {"authenticatorId": cdp_id, "isUserVerified": False})
    page.goto(f"http://localhost:{served.port}/studio/#/series/{other}")
    page.wait_for_selector("#approve")
    page.click("#approve")
    page.wait_for_selector("#approval .note.bad, #approval [role=alert]")
    assert served.get(f"/api/series/{other}")["status"] == "awaiting_approval"
    assert served.get(f"/api/series/{other}")["approvals"] == []
    # With the person verified again, the passkey approves it.
    cdp.send("WebAuthn.setUserVerified", {"authenticatorId": cdp_id, "isUserVerified": True})
    page.goto(f"http://localhost:{served.port}/studio/#/series/{other}")
    page.wait_for_selector("#approve")
    page.click("#approve")
    page.wait_for_selector("#approved-note")
    assert served.get(f"/api/series/{other}")["approvals"][0]["confirmed"] == "passkey"
