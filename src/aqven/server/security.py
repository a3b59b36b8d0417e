"""Who the project server answers: its own people and programs only.

One ASGI gate in front of every route (REST, Studio, SSE, MCP at /mcp) holds these, in this order:

1. **Host.** Only the loopback names with the port the server listens on (421 `HOST_NOT_ALLOWED`): a page whose
   name resolves to 127.0.0.1 (DNS rebinding) sends its own name and is refused.
2. **Origin.** A request whose `Origin` is not the server's own, or that the browser marks `Sec-Fetch-Site:
   cross-site` / `same-site` (another port of 127.0.0.1 is the same *site*), is refused with 403
   `ORIGIN_REFUSED`; the only exception is a top-level navigation to a page (a link a person clicks), which
   carries no credential the page could use and is held by the framing headers.
3. **Credential, and who it proves** (`server/principals.py`). Every route but `/api/health`, Studio's static
   files and its login link needs `Authorization: Bearer <credential>` or a Studio session cookie. The server
   token (random per start, in `.aqven/server.json`) proves an *agent*; the person key (in the user's folder
   outside the project, `aqven.people`) proves a *person* at a terminal; a session (opened with a login link that
   only the person key mints) proves a person in Studio. A cookie alone never reaches `/mcp`; a state-changing
   request on a cookie also needs the session's CSRF token (`X-CSRF-Token`); an agent changes nothing under
   `/api/studio/` (403 `PERSON_REQUIRED`). 401 `UNAUTHORIZED` / 403 `CSRF_REFUSED` otherwise.
4. **JSON bodies.** A POST is `Content-Type: application/json` with a JSON body, `{}` when there is nothing to
   say (415 `JSON_REQUIRED`, 422 `VALIDATION_ERROR`): an HTML form or a `no-cors` fetch cannot send one.
   JSON nested deeper than `MAX_JSON_DEPTH` is refused here, before any model sees it (422).

Every response carries `X-Frame-Options: DENY` and `Content-Security-Policy: frame-ancestors 'none'` (no
clickjacking), `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer` (a login link never leaks in
a Referer).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aqven.people import person_key
from aqven.server.principals import AGENT, PRINCIPAL_STATE, Challenges, Principal

HOST = "127.0.0.1"  # the only address a project server binds
LOOPBACK_NAMES = (HOST, "localhost", "[::1]")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_JSON_DEPTH = 64
SESSION_COOKIE = "aqven_session"
CSRF_HEADER = "x-csrf-token"
LOGIN_PATH = "/studio/login"
LOGIN_TTL_S = 300.0  # a login link is good for five minutes, once
OPEN_PATHS = ("/api/health", LOGIN_PATH)  # answered without a credential (still Host- and Origin-checked)

SECURITY_HEADERS = [
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


def new_token() -> str:
    return secrets.token_urlsafe(32)


def health_proof(token: str, nonce: str) -> str:
    """What a server that knows `token` answers to `nonce`: a client checks it before it sends the token."""
    return hmac.new(token.encode(), ("aqven-health:" + nonce).encode(), hashlib.sha256).hexdigest()


@dataclass
class Session:
    csrf: str
    created_at: float
    person: str | None = None  # the name of the person key that minted its login link


@dataclass
class Access:
    """This server's agent token, its port (None in-process, where no socket exists), the project it serves
    (where the person folder must not lie), Studio's sessions and the passkey challenges given out."""

    token: str = field(default_factory=new_token)
    port: int | None = None
    root: Path | None = None
    sessions: dict[str, Session] = field(default_factory=dict)
    logins: dict[str, tuple[float, str | None]] = field(default_factory=dict)  # code -> (expiry, person)
    challenges: Challenges = field(default_factory=Challenges)

    def bearer_ok(self, header: str | None) -> bool:
        """True for the agent token (the server token of server.json)."""
        presented = _bearer(header)
        return presented is not None and hmac.compare_digest(presented.encode(), self.token.encode())

    def principal(self, header: str | None) -> Principal | None:
        """Who a bearer credential proves: the agent (server token), a person (the person key), or nobody."""
        presented = _bearer(header)
        if presented is None:
            return None
        if hmac.compare_digest(presented.encode(), self.token.encode()):
            return AGENT
        key = person_key(root=self.root)  # read each time: a person key made after the server started counts
        if key is not None and key.matches(presented):
            return Principal("person", "terminal", key.name)
        return None

    def new_login(self, person: str | None) -> str:
        now = time.monotonic()
        self.logins = {code: entry for code, entry in self.logins.items() if entry[0] > now}
        code = secrets.token_urlsafe(24)
        self.logins[code] = (now + LOGIN_TTL_S, person)
        return code

    def use_login(self, code: str) -> tuple[str, Session] | None:
        """Spend a login code (once) for a new session: (session id, session), or None."""
        entry = self.logins.pop(code, None)
        if entry is None or entry[0] < time.monotonic():
            return None
        sid = secrets.token_urlsafe(32)
        session = Session(csrf=secrets.token_urlsafe(24), created_at=time.time(), person=entry[1])
        self.sessions[sid] = session
        return sid, session

    def session(self, cookie_header: str | None) -> Session | None:
        sid = cookie_value(cookie_header, SESSION_COOKIE)
        return self.sessions.get(sid) if sid else None

    def host_ok(self, host: str | None) -> bool:
        if not host:
            return False
        name, _, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if not name:  # no port in the header
            name, port = host, ""
        if self.port is None:  # in-process (tests): no socket, no port to match; TestClient says "testserver"
            return name.lower() in (*LOOPBACK_NAMES, "testserver")
        if name.lower() not in LOOPBACK_NAMES:
            return False
        return port == str(self.port)

    def origin_ok(self, origin: str) -> bool:
        if self.port is None:
            return origin.split("://", 1)[-1].rsplit(":", 1)[0] in LOOPBACK_NAMES and origin.startswith("http://")
        return origin in {f"http://{name}:{self.port}" for name in LOOPBACK_NAMES}


def _bearer(header: str | None) -> str | None:
    if not header or not header.lower().startswith("bearer "):
        return None
    return header[7:].strip() or None


def cookie_value(header: str | None, name: str) -> str | None:
    for part in (header or "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and value:
            return value
    return None


def json_depth_over(value: Any, limit: int) -> bool:
    """True when `value` nests lists/objects deeper than `limit` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def refusal(status: int, code: str, message: str, hint: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        status_code=status, content={"error": {"code": code, "message": message, "hint": hint}}, headers=headers
    )


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        out.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def _is_static(path: str) -> bool:
    """Studio's page and files: public code without data (the data comes from the API, which needs a credential)."""
    if path.startswith("/studio/js/"):  # its ES modules, one folder down
        return path.count("/") == 3
    return path in ("/studio", "/studio/") or (path.startswith("/studio/") and path.count("/") == 2)


class Gate:
    """The ASGI gate described in the module docstring."""

    def __init__(self, app: ASGIApp, access: Access, max_body: int) -> None:
        self.app = app
        self.access = access
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        refused = self.check(scope)
        if refused is not None:
            await refused(scope, receive, send_secured)
            return
        if scope["type"] == "http" and scope["method"] == "POST":
            replay, refused = await self.read_json(scope, receive)
            if refused is not None:
                await refused(scope, receive, send_secured)
                return
            receive = replay
        await self.app(scope, receive, send_secured)

    def check(self, scope: Scope) -> JSONResponse | None:
        headers = _headers(scope)
        method = scope.get("method", "GET")
        path: str = scope.get("path", "")
        if not self.access.host_ok(headers.get("host")):
            return refusal(
                421,
                "HOST_NOT_ALLOWED",
                f"this server answers only 127.0.0.1:{self.access.port} (Host {headers.get('host')!r})",
                "open the address the aqven command prints; another name pointing at 127.0.0.1 is refused",
            )
        site = headers.get("sec-fetch-site", "")
        navigation = (  # a person following a link to a page (never to the API, never into a frame)
            method == "GET"
            and headers.get("sec-fetch-mode") == "navigate"
            and headers.get("sec-fetch-dest") == "document"
            and not path.startswith(("/api/", "/mcp"))
        )
        origin = headers.get("origin")
        if (origin is not None and not self.access.origin_ok(origin)) or (
            site in ("cross-site", "same-site") and not navigation
        ):
            return refusal(
                403,
                "ORIGIN_REFUSED",
                f"a request from another origin ({origin or site}) is refused",
                "use Studio at the address `aqven studio` opens, or the aqven command",
            )
        if path in OPEN_PATHS or (method in SAFE_METHODS and _is_static(path)):
            return None
        principal = self.access.principal(headers.get("authorization"))
        if principal is not None:
            if principal.kind == "agent" and method not in SAFE_METHODS and path.startswith("/api/studio/"):
                return refusal(
                    403,
                    "PERSON_REQUIRED",
                    "an agent's credential changes nothing in Studio and opens no Studio session",
                    "a person opens Studio with `aqven studio` at a terminal",
                )
            scope.setdefault("state", {})[PRINCIPAL_STATE] = principal
            return None
        session = None if path.startswith("/mcp") else self.access.session(headers.get("cookie"))
        if session is None:
            return refusal(
                401,
                "UNAUTHORIZED",
                "this request needs the server's token or a Studio session",
                "send Authorization: Bearer <token from .aqven/server.json>, or open Studio with `aqven studio`",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if method not in SAFE_METHODS and not hmac.compare_digest(
            headers.get(CSRF_HEADER, "").encode(), session.csrf.encode()
        ):
            return refusal(
                403,
                "CSRF_REFUSED",
                "a state-changing Studio request without its session's CSRF token",
                "reload Studio; open it again with `aqven studio` when the session is gone",
            )
        scope.setdefault("state", {})[PRINCIPAL_STATE] = Principal("person", "studio", session.person)
        return None

    async def read_json(self, scope: Scope, receive: Receive) -> tuple[Receive, JSONResponse | None]:
        """Read a POST body (up to the size limit) and refuse one that is not JSON, is empty or nests too deep."""
        headers = _headers(scope)
        media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            hint = "send the body as JSON with Content-Type: application/json ({} when empty)"
            return receive, refusal(415, "JSON_REQUIRED", f"a POST body must be JSON, not {media or 'none'}", hint)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return receive, refusal(
                    413, "BODY_TOO_LARGE", f"request body over {self.max_body} bytes", "send a smaller request"
                )
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        problem = None
        if not body.strip():
            problem = "the body is empty"
        else:
            try:
                value = json.loads(body)
            except RecursionError:
                problem = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
            except ValueError as exc:
                problem = f"the body is not JSON: {exc}"
            else:
                if json_depth_over(value, MAX_JSON_DEPTH):
                    problem = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
        if problem is not None:
            return receive, refusal(
                422, "VALIDATION_ERROR", problem, "send a JSON body ({} when empty), nested at most 64 deep"
            )
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay, None
