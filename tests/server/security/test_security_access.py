"""Who the project server answers, tried as an attacker on this machine would, against a real server process.

One `python -m aqven serve` of the showcase project (simulated models). Each attack of issue 11 that needs no
browser is sent as raw HTTP on 127.0.0.1 and must be refused with its code, while the server's own clients (the
token from `.aqven/server.json`, a Studio session from a one-time login link) still get through:

* DNS rebinding: a foreign `Host` on REST, Studio, SSE and /mcp → 421 `HOST_NOT_ALLOWED`.
* No or a wrong token on REST and /mcp → 401 `UNAUTHORIZED`; a Studio cookie never opens /mcp.
* A foreign `Origin`, or `Sec-Fetch-Site: cross-site` / `same-site` → 403 `ORIGIN_REFUSED`, even with the token.
* Bodies a form or a no-cors fetch can send (none, text/plain, form-encoded) → 415 / 422, also on approve, stop
  and cancel; JSON nested 500 deep → 422 at the door.
* `.aqven` is 0700 and its files (server.json with the token, the database) 0600.
* Sessions: a login link works once; the cookie is HttpOnly and SameSite=Strict; a cookie POST without the
  session's CSRF token → 403 `CSRF_REFUSED`; every response forbids framing.
* A foreign program on server.json's port cannot prove it knows the token: the CLI never sends it anything
  secret and starts its own server. SIGTERM and SIGINT remove server.json.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.commands import aqven, cli_env, stop_server
from support.fault_soak import LiveServer, server_env
from support.person import person_secret

PAUSED_BODY = {"experiment_id": "reply_overpromise_risk", "cases": 1, "repeats": 1, "cap_usd": "5.00"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    from aqven.project.init import init_project

    root = init_project(tmp_path_factory.mktemp("access") / "lumen", "lumen")
    server = LiveServer(root, server_env(AQVEN_SIMULATE="1", AQVEN_SIM_LATENCY_SCALE="0"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
        stop_server(root)


def send(
    server: LiveServer,
    method: str,
    path: str,
    body: bytes | None = None,
    *,
    token: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One raw request (http.client sends the Host header we give it, as a rebinding page's browser would)."""
    sent = {"Host": f"127.0.0.1:{server.port}"}
    if token is None:
        token = server.token
    if token:
        sent["Authorization"] = f"Bearer {token}"
    if body is not None:
        sent.setdefault("Content-Type", "application/json")
    sent.update(headers or {})
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for key, value in sent.items():
            conn.putheader(key, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def code_of(raw: bytes) -> str:
    return str(json.loads(raw)["error"]["code"])


def paused(server: LiveServer) -> str:
    """A series waiting for approval (its cap is above the project cap), started with the token."""
    status, _h, raw = send(server, "POST", "/api/series", json.dumps(PAUSED_BODY).encode())
    assert status == 201, raw
    sid = str(json.loads(raw)["series"]["series_id"])
    assert series(server, sid)["status"] == "awaiting_approval"
    return sid


def series(server: LiveServer, sid: str) -> dict[str, Any]:
    status, _h, raw = send(server, "GET", f"/api/series/{sid}")
    assert status == 200, raw
    out: dict[str, Any] = json.loads(raw)
    return out


def test_a_foreign_host_is_refused_on_every_route(served: LiveServer) -> None:
    sid = paused(served)
    rebound = {"Host": f"evil.example:{served.port}"}
    body = json.dumps({**PAUSED_BODY, "cap_usd": "100000"}).encode()
    for method, path, payload in (
        ("POST", "/api/series", body),
        ("POST", f"/api/series/{sid}/approve", b'{"cap_usd": "1000000"}'),
        ("GET", "/api/project", None),
        ("GET", "/api/health", None),
        ("GET", "/studio/", None),
        ("GET", "/studio/js/main.js", None),
        ("GET", f"/api/series/{sid}/stream", None),
        ("POST", "/mcp", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'),
    ):
        status, headers, raw = send(served, method, path, payload, headers=rebound)
        assert status == 421 and code_of(raw) == "HOST_NOT_ALLOWED", (path, status, raw[:200])
        assert headers["x-frame-options"] == "DENY"
    # the same port on another loopback name, and the right name on another port, are refused too
    for host in (f"127.0.0.2:{served.port}", f"127.0.0.1:{served.port + 1}", "127.0.0.1", ""):
        status, _h, raw = send(served, "GET", "/api/project", headers={"Host": host})
        assert status == 421, (host, raw)
    for host in (f"localhost:{served.port}", f"127.0.0.1:{served.port}"):
        assert send(served, "GET", "/api/project", headers={"Host": host})[0] == 200
    assert series(served, sid)["status"] == "awaiting_approval"
    assert series(served, sid)["spend"]["cap_usd"] == "5.00"


def test_no_token_no_answer_and_a_cookie_never_opens_mcp(served: LiveServer) -> None:
    sid = paused(served)
    for token in ("", "wrong-" + served.token[6:], served.token + "x"):
        for method, path, payload in (
            ("GET", "/api/project", None),
            ("GET", "/api/series", None),
            ("GET", "/openapi.json", None),
            ("POST", f"/api/series/{sid}/approve", b'{"cap_usd": "99999"}'),
            ("POST", "/api/series", json.dumps(PAUSED_BODY).encode()),
            ("POST", "/api/studio/login-link", b"{}"),
            ("POST", "/mcp", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'),
        ):
            status, headers, raw = send(served, method, path, payload, token=token)
            assert status == 401 and code_of(raw) == "UNAUTHORIZED", (token[:6], path, status, raw[:200])
            assert headers["www-authenticate"] == "Bearer"
    assert series(served, sid)["spend"]["cap_usd"] == "5.00"
    # health is open but proves only that the server knows the token: no root, no data
    status, _h, raw = send(served, "GET", "/api/health?nonce=abc", token="")
    assert status == 200 and set(json.loads(raw)) == {"status", "version", "warm", "proof"}
    # a logged-in Studio cookie reaches the REST API, but never /mcp
    cookie, _csrf = studio_session(served)
    assert send(served, "GET", "/api/project", token="", headers={"Cookie": cookie})[0] == 200
    mcp = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    accept = {"Cookie": cookie, "Accept": "application/json, text/event-stream"}
    status, _h, raw = send(served, "POST", "/mcp", mcp, token="", headers=accept)
    assert status == 401 and code_of(raw) == "UNAUTHORIZED"


def test_a_foreign_origin_is_refused_even_with_the_token(served: LiveServer) -> None:
    sid = paused(served)
    for headers in (
        {"Origin": f"http://127.0.0.1:{served.port + 7}"},  # another port of loopback: another origin
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # another port of 127.0.0.1 is the same site, not the same origin
    ):
        for path, payload in (
            (f"/api/series/{sid}/approve", b"{}"),
            (f"/api/series/{sid}/stop", b"{}"),
            (f"/api/series/{sid}/cancel", b"{}"),
        ):
            status, _h, raw = send(served, "POST", path, payload, headers=headers)
            assert status == 403 and code_of(raw) == "ORIGIN_REFUSED", (headers, path, raw[:200])
        status, _h, raw = send(served, "GET", "/api/project", headers=headers)
        assert status == 403, (headers, raw[:200])
    assert series(served, sid)["status"] == "awaiting_approval"
    # A person following a link from another site to a Studio page gets there; a link into the API does not.
    link = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    assert send(served, "GET", "/studio/", token="", headers=link)[0] == 401  # the page: log in with aqven studio
    assert send(served, "GET", "/api/project", headers=link)[0] == 403
    assert send(served, "GET", "/studio/", headers={**link, "Sec-Fetch-Dest": "iframe"})[0] == 403
    own = {"Origin": f"http://127.0.0.1:{served.port}", "Sec-Fetch-Site": "same-origin"}
    assert send(served, "GET", "/api/project", headers=own)[0] == 200


def test_only_json_bodies_and_not_too_deep(served: LiveServer) -> None:
    sid = paused(served)
    for path in (f"/api/series/{sid}/approve", f"/api/series/{sid}/stop", f"/api/series/{sid}/cancel"):
        status, _h, raw = send(served, "POST", path)  # no body at all, as a field-less <form> sends
        assert status == 415 and code_of(raw) == "JSON_REQUIRED", raw
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
            status, _h, raw = send(served, "POST", path, b"{}", headers={"Content-Type": ctype})
            assert status == 415 and code_of(raw) == "JSON_REQUIRED", (ctype, raw)
        status, _h, raw = send(served, "POST", path, b"")
        assert status == 422 and code_of(raw) == "VALIDATION_ERROR", raw
    assert series(served, sid)["status"] == "awaiting_approval"
    for depth in (65, 200, 999, 100_000):
        deep = b'{"flow_id": "support_case", "input": ' + b"[" * depth + b"]" * depth + b"}"
        status, _h, raw = send(served, "POST", "/api/runs", deep)
        assert status == 422 and code_of(raw) == "VALIDATION_ERROR", (depth, raw[:300])
        assert b"nested deeper than 64" in raw
    shallow = b'{"flow_id": "support_case", "input": {"ticket": [[["x"]]], "tier": "gold"}}'
    assert b"nested" not in send(served, "POST", "/api/runs", shallow)[2]  # the flow refuses it, not the door
    # {} is the empty body: cancel takes it
    status, _h, raw = send(served, "POST", f"/api/series/{sid}/cancel", b"{}")
    assert status == 200 and json.loads(raw)["status"] == "cancelled"


def test_state_is_readable_by_this_user_only(served: LiveServer) -> None:
    state = served.root / ".aqven"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in state.iterdir() if p.is_file()}
    assert {"server.json", "aqven.sqlite", "server.log", "server.lock"} <= set(files), files
    assert {name: mode for name, mode in files.items() if mode != 0o600} == {}
    assert json.loads((state / "server.json").read_text())["token"] == served.token


def studio_session(server: LiveServer, page: str = "") -> tuple[str, str]:
    """Log in as a browser does through a CLI link: (Cookie header, the page's CSRF token)."""
    status, _h, raw = send(
        server, "POST", "/api/studio/login-link", json.dumps({"page": page}).encode(), token=person_secret()
    )
    assert status == 200, raw
    link = json.loads(raw)["url"]
    assert link.startswith(f"http://localhost:{server.port}/studio/login?code=")
    path = link.split(str(server.port), 1)[1]
    status, headers, _raw = send(server, "GET", path, token="")
    assert status == 303 and headers["location"].startswith("/studio/")
    cookie = headers["set-cookie"]
    attrs = {a.strip().split("=")[0].lower() for a in cookie.split(";")}
    assert {"httponly", "path"} <= attrs and "samesite=strict" in cookie.lower(), cookie
    again = send(server, "GET", path, token="")
    assert again[0] == 401  # a login link works once
    pair = cookie.split(";", 1)[0]
    status, headers, page_html = send(server, "GET", "/studio/", token="", headers={"Cookie": pair})
    assert status == 200 and headers["content-security-policy"] == "frame-ancestors 'none'"
    csrf = page_html.split(b'name="aqven-csrf" content="', 1)[1].split(b'"', 1)[0].decode()
    return pair, csrf


def test_studio_sessions_need_their_csrf_token(served: LiveServer) -> None:
    assert send(served, "GET", "/studio/", token="")[0] == 401  # no session: a page saying how to log in
    assert send(served, "GET", "/studio/login?code=guess", token="")[0] == 401
    cookie, csrf = studio_session(served)
    sid = paused(served)
    body = b'{"reason": "from Studio"}'
    wrong = csrf[:-1] + ("y" if csrf.endswith("x") else "x")  # one character off, never the token itself
    for headers in ({"Cookie": cookie}, {"Cookie": cookie, "X-CSRF-Token": wrong}):
        status, _h, raw = send(served, "POST", f"/api/series/{sid}/cancel", body, token="", headers=headers)
        assert status == 403 and code_of(raw) == "CSRF_REFUSED", raw
    # a session cannot mint login links for others either
    status, _h, raw = send(
        served, "POST", "/api/studio/login-link", b"{}", token="", headers={"Cookie": cookie, "X-CSRF-Token": csrf}
    )
    assert status == 401, raw
    status, _h, raw = send(
        served, "POST", f"/api/series/{sid}/cancel", body, token="", headers={"Cookie": cookie, "X-CSRF-Token": csrf}
    )
    assert status == 200 and json.loads(raw)["status"] == "cancelled"
    # every response forbids framing, errors and static files included
    for path in ("/studio/js/main.js", "/api/health", "/api/nope", "/studio/"):
        headers = send(served, "GET", path)[1]
        assert headers["x-frame-options"] == "DENY" and headers["content-security-policy"] == "frame-ancestors 'none'"


FOREIGN = """
import http.server, json, sys
seen = open(sys.argv[2], "a")
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        seen.write(json.dumps(dict(self.headers)) + "\\n"); seen.flush()
        body = json.dumps({"status": "ok", "root": sys.argv[1], "version": "0"}).encode()
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
    do_POST = do_GET
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def test_the_cli_never_trusts_a_foreign_program_on_the_port(tmp_path: Path) -> None:
    from aqven.project.init import init_project

    root = init_project(tmp_path / "lumen", "lumen")
    seen = tmp_path / "seen.jsonl"
    foreign = subprocess.Popen(
        [sys.executable, "-c", FOREIGN, str(root.resolve()), str(seen)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert foreign.stdout is not None
        port = int(foreign.stdout.readline())
        state = root / ".aqven"
        state.mkdir(exist_ok=True)
        # What a crashed server and a reused port look like: server.json names a live pid that answers health.
        record = {"pid": foreign.pid, "port": port, "host": "127.0.0.1", "root": str(root), "token": "old"}
        (state / "server.json").write_text(json.dumps(record))
        out = aqven("studio", "--no-open", cwd=root, env=cli_env(AQVEN_SIMULATE="1"), timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "Traceback" not in out.stderr and f":{port}/" not in out.stdout
        info = json.loads((state / "server.json").read_text())
        assert info["pid"] != foreign.pid and info["port"] != port and info["token"] != "old"
        asked = [json.loads(line) for line in seen.read_text().splitlines()]
        assert asked and not [h for h in asked if "Authorization" in h or "authorization" in h]
    finally:
        foreign.kill()
        foreign.wait()
        stop_server(root)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_removes_server_json(tmp_path: Path, sig: signal.Signals) -> None:
    from aqven.project.init import init_project

    root = init_project(tmp_path / "lumen", "lumen")
    server = LiveServer(root, server_env(AQVEN_SIMULATE="1"))
    server.start()
    info = root / ".aqven" / "server.json"
    assert info.is_file()
    assert server.proc is not None
    os.kill(server.proc.pid, sig)
    assert server.proc.wait(timeout=20) is not None
    deadline = time.monotonic() + 5
    while info.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not info.exists()


NOBODY_READS = """
import json, sys, urllib.request, urllib.error
root = sys.argv[1]
out = {}
for name in ("server.json", "aqven.sqlite", "server.log"):
    try:
        open(f"{root}/.aqven/{name}", "rb").read(64)
        out[name] = "read"
    except OSError as exc:
        out[name] = type(exc).__name__
try:
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[2]}/api/project", timeout=10)
    out["api"] = 200
except urllib.error.HTTPError as exc:
    out["api"] = exc.code
print(json.dumps(out))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as the user nobody")
def test_another_local_user_reads_nothing(tmp_path_factory: pytest.TempPathFactory) -> None:
    """As the user `nobody`, with the project in a folder every user may enter: no token, no database."""
    import pwd
    import tempfile

    from aqven.project.init import init_project

    nobody = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="aqven-shared-", dir="/tmp"))
    base.chmod(0o755)
    root = init_project(base / "lumen", "lumen")
    for folder in (base, root):
        folder.chmod(0o755)
    server = LiveServer(root, server_env(AQVEN_SIMULATE="1"))
    server.start()
    try:
        assert (root / "aqven.yaml").stat().st_mode & 0o004  # the project itself is readable by others

        def as_nobody() -> None:
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)

        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable  # stdlib only
        out = subprocess.run(
            [python, "-I", "-c", NOBODY_READS, str(root), str(server.port)],
            preexec_fn=as_nobody,
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == {
            "server.json": "PermissionError",
            "aqven.sqlite": "PermissionError",
            "server.log": "PermissionError",
            "api": 401,
        }
    finally:
        server.stop()
        stop_server(root)
        import shutil

        shutil.rmtree(base, ignore_errors=True)
