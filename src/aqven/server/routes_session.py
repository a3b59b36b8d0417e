"""Studio's door: one-time login links minted for the CLI, the session cookie, and the page with its CSRF token.

`aqven studio` (and every Studio link the CLI prints) asks `POST /api/studio/login-link` with the person key
(never the agent's server token: an agent opens no Studio session) for a link good once for five minutes, at
`http://localhost:PORT` (the origin passkeys are bound to); opening it sets an HttpOnly, SameSite=Strict session
cookie and lands on the page. Studio's page carries the session's CSRF token, which its script sends on every
state-changing request (`aqven.server.security` checks it).
"""

from __future__ import annotations

import html
import re
import urllib.parse
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from aqven.errors import AqvenError
from aqven.server.principals import principal_of, require_person, studio_origin
from aqven.server.routes_studio import NO_CACHE, STUDIO_DIR
from aqven.server.security import LOGIN_PATH, SESSION_COOKIE, Access

router = APIRouter(tags=["studio"])

_ROUTE = re.compile(r"[A-Za-z0-9_./?=&%-]{0,300}")

NO_SESSION_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>AQVEN Studio: log in</title>
<link rel="stylesheet" href="/studio/app.css"></head>
<body><main class="login"><h1>Open Studio from the terminal</h1>
<p>{message}</p><p>Run <code>aqven studio</code> in the project: it opens a link that logs this browser in.</p>
</main></body></html>
"""


def _access(request: Request) -> Access:
    access: Access = request.app.state.access
    return access


class LoginLinkBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    page: str = Field("", max_length=300, description="the Studio route to land on, e.g. series/ser_…")


@router.post("/api/studio/login-link")
def login_link(body: LoginLinkBody, request: Request) -> dict[str, Any]:
    """A one-time Studio login link; only a person at a terminal (the person key) gets one: neither an agent nor
    a session can mint one."""
    access = _access(request)
    principal = principal_of(request.state)
    require_person(principal)
    if principal.channel != "terminal":
        raise AqvenError(
            "a Studio session cannot mint login links",
            code="UNAUTHORIZED",
            hint="run `aqven studio` in the project",
            http_status=401,
        )
    page = body.page.strip().lstrip("#/")
    if not _ROUTE.fullmatch(page):
        raise AqvenError(
            f"not a Studio route: {body.page!r}", code="VALIDATION_ERROR", hint="e.g. series/ser_…", http_status=422
        )
    port = access.port or _port_of(request.headers.get("host", ""))
    query = urllib.parse.urlencode({"code": access.new_login(principal.name), **({"page": page} if page else {})})
    return {"url": f"{studio_origin(port)}{LOGIN_PATH}?{query}", "expires_in_s": 300}


def _port_of(host: str) -> int | None:
    tail = host.rpartition(":")[2]
    return int(tail) if tail.isdigit() else None


@router.get(LOGIN_PATH, include_in_schema=False)
def login(request: Request, code: str = "", page: str = "") -> Response:
    access = _access(request)
    used = access.use_login(code)
    if used is None:
        message = "This login link was already used or has expired."
        return HTMLResponse(NO_SESSION_PAGE.format(message=html.escape(message)), status_code=401, headers=NO_CACHE)
    sid, _session = used
    route = page if _ROUTE.fullmatch(page) else ""
    response = RedirectResponse("/studio/" + (f"#/{route}" if route else ""), status_code=303, headers=NO_CACHE)
    response.set_cookie(SESSION_COOKIE, sid, httponly=True, samesite="strict", path="/")
    return response


@router.get("/studio/", include_in_schema=False)
def studio_index(request: Request) -> Response:
    session = _access(request).session(request.headers.get("cookie"))
    if session is None:
        message = "This browser has no Studio session (a restarted server forgets its sessions)."
        return HTMLResponse(NO_SESSION_PAGE.format(message=html.escape(message)), status_code=401, headers=NO_CACHE)
    page = (STUDIO_DIR / "index.html").read_text(encoding="utf-8")
    meta = f'<meta name="aqven-csrf" content="{html.escape(session.csrf)}">'
    return HTMLResponse(page.replace("<!-- csrf -->", meta, 1), headers=NO_CACHE)
