"""Only a person spends: every attack of issue 27 on the person's routes, against a real server process.

An agent holds the server token (`.aqven/server.json`) and can forge any header. A person holds the person key in
the user's folder outside the project (the tests' XDG_CONFIG_HOME) and, once registered, a passkey (here a software
authenticator that answers WebAuthn as a browser would; `test_security_passkey_browser.py` uses Chromium's own
virtual authenticator). The tiny project's server runs as `python -m aqven serve`.
"""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aqven.people import load, person_dir, reverify
from support.commands import aqven, cli_env, stop_server
from support.fault_soak import HttpError, LiveServer, http, live_server, server_env
from support.person import SoftAuthenticator, person_secret
from support.series_kit import case_names, write_tiny
from support.store_access import one, write

FORGED = {"X-Aqven-Channel": "terminal", "X-Aqven-Confirmed": "tty"}


@pytest.fixture
def served(tiny_env: Path, tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(write_tiny(tmp_path / "tiny", case_names(4, 2)), server_env()) as server:
        yield server


def refused(call: Any, code: str, status: int = 403) -> dict[str, Any]:
    with pytest.raises(HttpError) as caught:
        call()
    assert caught.value.status == status, caught.value.body
    error: dict[str, Any] = caught.value.body["error"]
    assert error["code"] == code, error
    return error


def paused(server: LiveServer, cap: str = "3.00", experiment: str = "rate") -> str:
    """A series waiting for a person: its cap is above the $1.00 project cap (started by the agent's token)."""
    out = server.post("/api/series", {"experiment_id": experiment, "simulate": True, "cap_usd": cap})
    sid = str(out["series"]["series_id"])
    assert server.get(f"/api/series/{sid}")["status"] == "awaiting_approval"
    return sid


def as_person(server: LiveServer, method: str, path: str, body: Any = None, **headers: str) -> Any:
    return http(server.port, method, path, body, token=person_secret(), headers=headers)


def studio(server: LiveServer) -> dict[str, str]:
    """A Studio session as a browser gets it: a login link minted with the person key, the cookie, the CSRF."""
    link = as_person(server, "POST", "/api/studio/login-link", {})["url"]
    assert link.startswith(f"http://localhost:{server.port}/studio/login?code="), link
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", link.split(str(server.port), 1)[1], headers={"Host": f"localhost:{server.port}"})
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 303
    cookie = str(resp.getheader("set-cookie")).split(";", 1)[0]
    conn.request("GET", "/studio/", headers={"Host": f"localhost:{server.port}", "Cookie": cookie})
    page = resp = conn.getresponse()
    html = page.read().decode()
    conn.close()
    csrf = html.split('name="aqven-csrf" content="', 1)[1].split('"', 1)[0]
    return {"Cookie": cookie, "X-CSRF-Token": csrf}


def in_studio(server: LiveServer, session: dict[str, str], path: str, body: Any) -> Any:
    return http(server.port, "POST", path, body, token="", headers=session)


def register(
    server: LiveServer, session: dict[str, str], device: SoftAuthenticator, proof: Any = None, user: str | None = None
) -> Any:
    body = {**({"passkey": proof} if proof else {}), **({"user": user} if user is not None else {})}
    opts = in_studio(server, session, "/api/studio/passkeys/register/options", body)
    credential = device.create(opts["options"])
    return in_studio(
        server, session, "/api/studio/passkeys/register", {"nonce": opts["nonce"], "credential": credential}
    )


def assertion(
    server: LiveServer, session: dict[str, str], device: SoftAuthenticator, action: str, target: str, amount: str
) -> dict[str, Any]:
    ch = in_studio(
        server, session, "/api/studio/passkeys/challenge", {"action": action, "target": target, "amount": amount}
    )
    return {"nonce": ch["nonce"], "credential": device.get(ch["options"])}


def test_the_agent_token_is_refused_on_every_person_route(served: LiveServer) -> None:
    sid = paused(served)
    aqven_yaml = served.root / "aqven.yaml"
    aqven_yaml.write_text(aqven_yaml.read_text().replace('spend_cap_usd: "1.00"', 'spend_cap_usd: "50.00"'))
    deadline = time.monotonic() + 20
    while served.get("/api/project")["project_cap_asked_usd"] != "50.00" and time.monotonic() < deadline:
        time.sleep(0.1)
    for headers in ({}, FORGED, {**FORGED, "Mcp-Session-Id": "abc"}, {"Mcp-Protocol-Version": "2025-06-18"}):
        for path, body in (
            (f"/api/series/{sid}/approve", {}),
            (f"/api/series/{sid}/approve", {"cap_usd": "3.00"}),
            (f"/api/series/{sid}/stop", {}),
            ("/api/project/cap/confirm", {"cap_usd": "50.00"}),
            ("/api/studio/login-link", {}),
            ("/api/studio/passkeys/challenge", {"action": "approve", "target": sid, "amount": "3.00"}),
            ("/api/studio/passkeys/register/options", {}),
            ("/api/studio/passkeys/requirement", {"required": False}),
            ("/api/studio/runs/run_x/human/approve", {"answer": {"ok": True}}),
            ("/api/runs/run_x/human/approve", {"answer": {"ok": True}}),
        ):
            refused(lambda p=path, b=body, h=headers: http(served.port, "POST", p, b, headers=h), "PERSON_REQUIRED")
    snap = served.get(f"/api/series/{sid}")
    assert snap["status"] == "awaiting_approval" and snap["approvals"] == []
    project = served.get("/api/project")
    assert project["project_cap_usd"] == "1.00" and project["project_cap_pending"] is True
    # the agent still does what the spec gives it: read, start, cancel
    assert served.post(f"/api/series/{sid}/cancel", {})["status"] == "cancelled"


def test_a_human_node_is_answered_by_a_person_only(served: LiveServer) -> None:
    out = served.post("/api/series", {"experiment_id": "reviewed", "simulate": True, "cases": 1, "repeats": 1})
    sid = out["series"]["series_id"]
    deadline = time.monotonic() + 30
    while served.get(f"/api/series/{sid}")["status"] != "waiting_human" and time.monotonic() < deadline:
        time.sleep(0.1)
    [run] = [r for r in served.get(f"/api/runs?series_id={sid}") if r["status"] == "waiting_human"]
    path = f"/api/runs/{run['id']}/human/approve"
    for headers in ({}, FORGED, {"Mcp-Session-Id": "abc"}):
        refused(
            lambda h=headers: http(served.port, "POST", path, {"answer": {"ok": True}}, headers=h), "PERSON_REQUIRED"
        )
    assert served.get(f"/api/runs/{run['id']}")["status"] == "waiting_human"
    done = as_person(served, "POST", path, {"answer": {"ok": True}})
    assert done["status"] in ("queued", "running", "done")
    deadline = time.monotonic() + 30
    while served.get(f"/api/runs/{run['id']}")["status"] != "done" and time.monotonic() < deadline:
        time.sleep(0.1)
    [answer] = [e for e in served.get(f"/api/runs/{run['id']}/events") if e["kind"] == "human_answer"]
    assert answer["data"]["by"]["channel"] == "terminal" and answer["data"]["by"]["person"]


def test_the_terminal_path_takes_the_person_key_kept_outside_the_project(served: LiveServer) -> None:
    sid = paused(served)
    out = as_person(served, "POST", f"/api/series/{sid}/approve", {}, **{"X-Aqven-Confirmed": "tty"})
    [approval] = out["approvals"]
    assert (approval["channel"], approval["confirmed"], approval["new_cap_usd"]) == ("terminal", "tty", "3.00")
    assert approval["person"]
    key_file = person_dir() / "person.json"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and stat.S_IMODE(person_dir().stat().st_mode) == 0o700
    assert served.root.resolve() not in key_file.resolve().parents
    secret = person_secret()
    for path in served.root.rglob("*"):  # nothing in the project folder holds the person key
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    # the confirmed project cap is the person's record too: editing a file in the project changes nothing
    (served.root / ".aqven" / "project_cap.json").write_text(
        json.dumps({"cap_usd": "50.00", "channel": "terminal", "confirmed": "tty"})
    )
    assert served.get("/api/project")["project_cap_usd"] == "1.00"


def test_passkeys_bind_each_act_and_refuse_replays(served: LiveServer) -> None:
    session = studio(served)
    device = SoftAuthenticator(origin=f"http://localhost:{served.port}")
    listing = register(served, session, device)
    assert listing["required"] is True and len(listing["passkeys"]) == 1
    record = load(served.root)
    assert record.needs_passkey and record.passkeys[0].public_key  # kept outside the project, public key only
    first, second = paused(served), paused(served)

    # the terminal and a bare session are refused once a passkey exists, with a hint to use Studio
    error = refused(lambda: as_person(served, "POST", f"/api/series/{first}/approve", {}), "PASSKEY_REQUIRED")
    assert "aqven studio" in error["hint"]
    refused(lambda: in_studio(served, session, f"/api/series/{first}/approve", {"cap_usd": "3.00"}), "PASSKEY_REQUIRED")

    # an assertion for another series, another amount or another action proves nothing here
    other_series = assertion(served, session, device, "approve", second, "3.00")
    refused(
        lambda: in_studio(
            served, session, f"/api/series/{first}/approve", {"cap_usd": "3.00", "passkey": other_series}
        ),
        "PASSKEY_REFUSED",
    )
    cheap = assertion(served, session, device, "approve", first, "3.00")
    refused(
        lambda: in_studio(served, session, f"/api/series/{first}/approve", {"cap_usd": "30.00", "passkey": cheap}),
        "PASSKEY_REFUSED",
    )
    stop = assertion(served, session, device, "stop", first, "")
    refused(
        lambda: in_studio(served, session, f"/api/series/{first}/approve", {"cap_usd": "3.00", "passkey": stop}),
        "PASSKEY_REFUSED",
    )
    # an assertion from another origin (Studio at 127.0.0.1) or without user verification is refused
    for bad in (
        SoftAuthenticator(origin=f"http://127.0.0.1:{served.port}", key=device.key, credential_id=device.credential_id),
        SoftAuthenticator(
            origin=device.origin, key=device.key, credential_id=device.credential_id, user_verified=False
        ),
    ):
        bad.sign_count = device.sign_count + 10
        ch = in_studio(
            served, session, "/api/studio/passkeys/challenge", {"action": "approve", "target": first, "amount": "3.00"}
        )
        proof = {"nonce": ch["nonce"], "credential": bad.get(ch["options"])}
        refused(
            lambda p=proof: in_studio(
                served, session, f"/api/series/{first}/approve", {"cap_usd": "3.00", "passkey": p}
            ),
            "PASSKEY_REFUSED",
        )
        device.sign_count = bad.sign_count
    # another authenticator's key for the same credential id: the signature does not verify
    forger = SoftAuthenticator(origin=device.origin, credential_id=device.credential_id)
    forger.sign_count = device.sign_count + 10
    ch = in_studio(
        served, session, "/api/studio/passkeys/challenge", {"action": "approve", "target": first, "amount": "3.00"}
    )
    forged = {"nonce": ch["nonce"], "credential": forger.get(ch["options"])}
    refused(
        lambda: in_studio(served, session, f"/api/series/{first}/approve", {"cap_usd": "3.00", "passkey": forged}),
        "PASSKEY_REFUSED",
    )
    assert served.get(f"/api/series/{first}")["approvals"] == []

    good = assertion(served, session, device, "approve", first, "3.00")
    out = in_studio(served, session, f"/api/series/{first}/approve", {"cap_usd": "3.00", "passkey": good})
    [approval] = out["approvals"]
    assert (approval["channel"], approval["confirmed"]) == ("studio", "passkey")
    assert approval["proof"]["binding"]["target"] == first and approval["proof"]["binding"]["amount"] == "3.00"
    assert reverify(approval["proof"], load(served.root).passkeys) is None  # verifiable again later
    tampered = {**approval["proof"], "binding": {**approval["proof"]["binding"], "amount": "300.00"}}
    assert reverify(tampered, load(served.root).passkeys) is not None
    # the same assertion again (a replay, its nonce used) is refused
    refused(
        lambda: in_studio(served, session, f"/api/series/{second}/approve", {"cap_usd": "3.00", "passkey": good}),
        "PASSKEY_REFUSED",
    )

    # a second passkey needs the first; a session alone adds none
    spare = SoftAuthenticator(origin=device.origin)
    refused(lambda: register(served, session, spare), "PASSKEY_REQUIRED")
    listing = register(served, session, spare, assertion(served, session, device, "passkey_add", "project", ""))
    assert len(listing["passkeys"]) == 2 and listing["passkeys"][1]["added_with"] == listing["passkeys"][0]["id"]

    # turning the requirement off needs a passkey too; then the terminal path works again
    off = "/api/studio/passkeys/requirement"
    refused(lambda: in_studio(served, session, off, {"required": False}), "PASSKEY_REQUIRED")
    proof = assertion(served, session, spare, "passkey_requirement_off", "project", "")
    assert in_studio(served, session, off, {"required": False, "passkey": proof})["required"] is False
    out = as_person(served, "POST", f"/api/series/{second}/approve", {}, **{"X-Aqven-Confirmed": "tty"})
    assert out["approvals"][0]["channel"] == "terminal"

    # `aqven check` verifies every passkey proof on record again; one whose amount was edited is an error.
    checked = aqven("check", cwd=served.root, env=cli_env())
    assert "E_APPROVAL_UNVERIFIED" not in checked.stdout + checked.stderr, checked.stderr
    (proof,) = one(served.root, "SELECT proof FROM approvals WHERE series_id=?", (first,))
    edited = json.loads(proof)
    edited["binding"]["amount"] = "300.00"
    write(
        served.root, "UPDATE approvals SET proof=?, new_cap_usd='300.00' WHERE series_id=?", (json.dumps(edited), first)
    )
    checked = aqven("check", cwd=served.root, env=cli_env())
    said = f"error E_APPROVAL_UNVERIFIED: the passkey approval of series {first} approve does not verify"
    assert checked.returncode == 1 and said in checked.stderr, checked.stderr


def test_a_person_folder_inside_the_project_proves_nobody(tiny_env: Path, tmp_path: Path) -> None:
    """An agent confined to the project starts the server with XDG_CONFIG_HOME pointing into the project, where it
    wrote a person key of its own: the server reads no person key there, so that key approves nothing."""
    root = write_tiny(tmp_path / "tiny", case_names(4, 2))
    planted = root / ".agent-config"
    (planted / "aqven").mkdir(parents=True)
    (planted / "aqven" / "person.json").write_text(json.dumps({"name": "person", "secret": "p" * 40}))
    server = LiveServer(root, server_env(XDG_CONFIG_HOME=str(planted)))
    server.start()
    try:
        sid = paused(server)
        refused(
            lambda: http(server.port, "POST", f"/api/series/{sid}/approve", {}, token="p" * 40), "UNAUTHORIZED", 401
        )
        assert server.get(f"/api/series/{sid}")["approvals"] == []
        # and the aqven command, run there, refuses to use such a folder
        out = aqven("approve", sid, "--yes", cwd=root, env=cli_env(XDG_CONFIG_HOME=str(planted)))
        assert out.returncode != 0 and "PERSON_KEY_UNSAFE" in out.stdout + out.stderr, out.stdout + out.stderr
    finally:
        server.stop()
        stop_server(root)


def test_a_cancelled_series_says_who_cancelled_it_and_how(served: LiveServer) -> None:
    """Issue 29: an agent may cancel, and the series says it was the agent's token; a person in Studio is named."""
    by_agent = paused(served)
    out = served.post(f"/api/series/{by_agent}/cancel", {"reason": "tried something else"})
    assert out["cancelled"] == {"note": "tried something else", "by": {"kind": "agent", "channel": "agent"}}
    by_person = paused(served)
    session = studio(served)
    out = in_studio(served, session, f"/api/series/{by_person}/cancel", {})
    assert out["cancelled"]["by"]["kind"] == "person" and out["cancelled"]["by"]["channel"] == "studio"
    assert out["cancelled"]["by"]["person"]
    assert served.get(f"/api/series/{by_agent}")["cancelled"]["by"]["kind"] == "agent"  # it stays with the series


def test_a_finding_names_its_passkey_approval_and_verifies_it_again(served: LiveServer) -> None:
    """A held-out series approved with a passkey: its finding says who approved spending above the cap and how, with
    the assertion, and verifies only while that assertion does (re-sealed with the key an agent can read, an edited
    amount makes the finding refused)."""
    import yaml

    from aqven.research.findings import records as findings
    from aqven.research.findings.verify import Verifier

    session = studio(served)
    device = SoftAuthenticator(origin=f"http://localhost:{served.port}")
    register(served, session, device)
    out = served.post("/api/series", {"experiment_id": "rate", "on": "holdout", "simulate": True, "cap_usd": "3.00"})
    sid = out["series"]["series_id"]
    proof = assertion(served, session, device, "approve", sid, "3.00")
    in_studio(served, session, f"/api/series/{sid}/approve", {"cap_usd": "3.00", "passkey": proof})
    deadline = time.monotonic() + 60
    while not (done := served.get(f"/api/series/{sid}?wait_seconds=5"))["ended_at"] and time.monotonic() < deadline:
        pass
    assert done["finding"], done["status"]
    path = served.root / done["finding"]
    data = yaml.safe_load(path.read_text())
    [approval] = data["approvals"]
    assert (approval["channel"], approval["confirmed"], approval["person"]) == (
        "studio",
        "passkey",
        device_user(served),
    )
    listed = {f["series_id"]: f for f in served.get("/api/findings")["findings"]}
    assert listed[sid]["verifies"] is True
    with Verifier(served.root) as verifier:
        assert verifier.verify(path, data).verifies
        approval["proof"]["binding"]["amount"] = "300.00"  # then sealed again, as an agent with the key could
        data.pop("seal", None)
        forged = findings.seal(data, findings.finding_key(served.root))
        result = verifier.verify(path, forged)
    assert not result.verifies and "passkey approval" in str(result.problem)


def device_user(server: LiveServer) -> str:
    from aqven.people import load

    return load(server.root).passkeys[0].user


def in_studio_get(server: LiveServer, session: dict[str, str], path: str) -> Any:
    return http(server.port, "GET", path, token="", headers=session)


def answer_waiting_human(server: LiveServer, session: dict[str, str], device: SoftAuthenticator) -> dict[str, Any]:
    """Start a series whose flow asks a person, and answer its node in Studio with `device`'s passkey: the trace."""
    sid = server.post("/api/series", {"experiment_id": "reviewed", "simulate": True, "cases": 1, "repeats": 1})[
        "series"
    ]["series_id"]
    deadline = time.monotonic() + 30
    while server.get(f"/api/series/{sid}")["status"] != "waiting_human" and time.monotonic() < deadline:
        time.sleep(0.1)
    [run] = [r for r in server.get(f"/api/runs?series_id={sid}") if r["status"] == "waiting_human"]
    answer, target = {"ok": True}, f"{run['id']}/approve"
    ch = in_studio(
        server,
        session,
        "/api/studio/passkeys/challenge",
        {"action": "human_answer", "target": target, "answer": answer},
    )
    proof = {"nonce": ch["nonce"], "credential": device.get(ch["options"])}
    in_studio(server, session, f"/api/studio/runs/{run['id']}/human/approve", {"answer": answer, "passkey": proof})
    deadline = time.monotonic() + 30
    while server.get(f"/api/runs/{run['id']}")["status"] != "done" and time.monotonic() < deadline:
        time.sleep(0.1)
    trace: dict[str, Any] = in_studio_get(server, session, f"/api/studio/runs/{run['id']}/trace")
    return trace


def test_each_approval_names_the_person_who_gave_it(served: LiveServer) -> None:
    """Issue 30: several people approve in one project, each named. The terminal's approval names the person key's
    user; two people register their own passkeys in the one Studio (Ada, then Ben with Ada's assent), and each
    approval, stop and answer to a human node names the passkey that signed it, not the session's person. The
    series' approvals over REST, Studio's series page and overview, the trace and `aqven series follow` say so."""
    from aqven.people import person_key

    login = person_key(create=True)
    assert login is not None and login.name  # the user's login name, kept in person.json
    by_terminal = paused(served)
    out = as_person(served, "POST", f"/api/series/{by_terminal}/approve", {}, **{"X-Aqven-Confirmed": "tty"})
    assert [(a["person"], a["channel"]) for a in out["approvals"]] == [(login.name, "terminal")]

    session = studio(served)
    assert in_studio_get(served, session, "/api/studio/passkeys")["session_person"] == login.name  # the default
    # A name is printable text of at most 64 characters.
    ada = SoftAuthenticator(origin=f"http://localhost:{served.port}")
    for bad in ("Ada\x1b[31m", "Ada\u202eecalevoL", "x" * 65):
        refused(lambda b=bad: register(served, session, ada, user=b), "VALIDATION_ERROR", 422)
    register(served, session, ada, user="  Ada   Lovelace ")
    ben = SoftAuthenticator(origin=ada.origin)
    listing = register(
        served, session, ben, assertion(served, session, ada, "passkey_add", "project", ""), user="Ben Okri"
    )
    assert [p["user"] for p in listing["passkeys"]] == ["Ada Lovelace", "Ben Okri"]
    # One passkey more, registered without a name: it is the session's person's (the user who opened Studio).
    spare = SoftAuthenticator(origin=ada.origin)
    listing = register(served, session, spare, assertion(served, session, ben, "passkey_add", "project", ""))
    assert listing["passkeys"][2]["user"] == login.name

    by_ada, by_ben, stopped_by_ben = paused(served), paused(served), paused(served)
    for sid, device in ((by_ada, ada), (by_ben, ben)):
        proof = assertion(served, session, device, "approve", sid, "3.00")
        in_studio(served, session, f"/api/series/{sid}/approve", {"cap_usd": "3.00", "passkey": proof})
    proof = assertion(served, session, ben, "stop", stopped_by_ben, "")
    in_studio(served, session, f"/api/series/{stopped_by_ben}/stop", {"passkey": proof})

    expected = {
        by_terminal: [("approve", login.name, "terminal", "tty")],
        by_ada: [("approve", "Ada Lovelace", "studio", "passkey")],
        by_ben: [("approve", "Ben Okri", "studio", "passkey")],
        stopped_by_ben: [("stop", "Ben Okri", "studio", "passkey")],
    }
    for sid, acts in expected.items():
        for path, credential in ((f"/api/series/{sid}", None), (f"/api/studio/series/{sid}", session)):
            got = served.get(path) if credential is None else in_studio_get(served, session, path)
            assert [(a["action"], a["person"], a["channel"], a["confirmed"]) for a in got["approvals"]] == acts, path
    # The passkey's proof names the same person; an agent (the server token) may read who approved what.
    [approval] = served.get(f"/api/series/{by_ben}")["approvals"]
    assert approval["proof"]["user"] == "Ben Okri" and reverify(approval["proof"], load(served.root).passkeys) is None

    # Studio's overview lists the latest approvals across series, newest first: series, what, who, how.
    recent = in_studio_get(served, session, "/api/studio/overview")["recent_approvals"]
    assert [(a["series_id"], a["action"], a["person"]) for a in recent] == [
        (sid, acts[0][0], acts[0][1]) for sid, acts in reversed(expected.items())
    ]
    assert recent[0]["experiment_id"] == "rate" and "proof" not in recent[0]

    # A human node answered with Ben's passkey is Ben's answer; the trace says so.
    trace = answer_waiting_human(served, session, ben)
    [node] = [n for n in trace["nodes"] if n["human"]]
    assert node["human"]["by"] == {"channel": "studio", "confirmed": "passkey", "person": "Ben Okri"}

    # The terminal names them too, under the series' verdict.
    deadline = time.monotonic() + 60
    while not served.get(f"/api/series/{by_ben}")["ended_at"] and time.monotonic() < deadline:
        time.sleep(0.2)
    followed = aqven("series", "follow", by_ben, cwd=served.root, env=cli_env())
    assert "approved a cap of $3.00 (was $3.00) by Ben Okri with a passkey in Studio" in followed.stdout, (
        followed.stdout + followed.stderr
    )
    followed = aqven("series", "follow", by_terminal, cwd=served.root, env=cli_env())
    assert f"by {login.name} at a terminal," in followed.stdout, followed.stdout + followed.stderr
