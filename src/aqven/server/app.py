"""The project server's HTTP application: REST (OpenAPI at /docs) with JSON errors carrying stable codes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aqven import __version__
from aqven.errors import AqvenError
from aqven.server.mcp_server import mount_mcp
from aqven.server.routes_passkeys import router as passkeys_router
from aqven.server.routes_project import router as project_router
from aqven.server.routes_research import router as research_router
from aqven.server.routes_runs import router as runs_router
from aqven.server.routes_session import router as session_router
from aqven.server.routes_studio import router as studio_router
from aqven.server.security import Access, Gate, health_proof
from aqven.server.service import ProjectService
from aqven.server.studio_price import router as price_router
from aqven.server.studio_standing import router as standing_router

MAX_BODY_BYTES = 2_000_000
_HTTP_CODES = {400: "BAD_REQUEST", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "BODY_TOO_LARGE"}


def _too_large(max_bytes: int) -> JSONResponse:
    return JSONResponse(
        status_code=413,
        content={
            "error": {
                "code": "BODY_TOO_LARGE",
                "message": f"request body over {max_bytes} bytes",
                "hint": "send a smaller request",
            }
        },
    )


class BodyLimit:
    """Refuse request bodies over `max_bytes` with 413 BODY_TOO_LARGE, by Content-Length or, when a body
    comes without one (chunked), by reading it here up to the limit before the app sees it."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if length is not None:
            if length.strip().isdigit() and int(length) > self.max_bytes:
                await _too_large(self.max_bytes)(scope, receive, send)
                return
            await self.app(scope, receive, send)  # the server holds the body to its Content-Length
            return
        buffered: list[Message] = []
        size = 0
        while True:
            message = await receive()
            buffered.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await _too_large(self.max_bytes)(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replay, send)


def create_app(root: Path, *, access: Access | None = None) -> FastAPI:
    """The app of one project; `access` holds the server's token and port (a fresh token in-process)."""
    service = ProjectService(root)
    access = access or Access()
    access.root = root  # the person folder must not lie in it (aqven.people.home)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.resume_interrupted()
        service.listen()
        warming = asyncio.get_running_loop().run_in_executor(None, service.warm)
        yield
        with contextlib.suppress(Exception):
            await warming
        await service.shutdown()

    app = FastAPI(title="AQVEN project server", version=__version__, lifespan=lifespan)
    app.state.service = service
    app.state.access = access

    @app.exception_handler(AqvenError)
    async def aqven_error(_request: Request, exc: AqvenError) -> JSONResponse:
        return JSONResponse(status_code=exc.http_status, content={"error": exc.to_dict()})

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [{"loc": [str(p) for p in e.get("loc", ())], "message": e.get("msg", "")} for e in exc.errors()]
        first = problems[0] if problems else {"loc": [], "message": "invalid request"}
        return JSONResponse(
            status_code=422,
            content={
                "error": {
                    "code": "VALIDATION_ERROR",
                    "message": f"{'.'.join(first['loc'])}: {first['message']}",
                    "hint": "see the request schema at /docs",
                    "details": {"problems": problems},
                }
            },
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Unknown paths, wrong methods, unreadable bodies: the same JSON error shape, with a code.
        code = _HTTP_CODES.get(exc.status_code, f"HTTP_{exc.status_code}")
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return JSONResponse(
            status_code=exc.status_code,
            content={"error": {"code": code, "message": detail, "hint": "see the REST API at /docs"}},
            headers=dict(exc.headers) if exc.headers else None,
        )

    # Static files and JSON compressed for a browser that asks (Starlette's gzip leaves event streams alone).
    app.add_middleware(GZipMiddleware, minimum_size=1024)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    app.add_middleware(Gate, access=access, max_body=MAX_BODY_BYTES)  # outermost: Host, Origin, token, JSON

    @app.get("/api/health")
    async def health(request: Request, nonce: str | None = None) -> dict[str, str]:
        # Open to anyone who passes the Host and Origin checks, so it says little: with a nonce, the proof
        # that this server knows the token of server.json (the CLI checks it before it sends the token).
        # `warm`: the project is loaded (or found not to load) and checked, so a request does not wait for that.
        out = {"status": "ok", "version": __version__, "warm": "yes" if service.warmed.is_set() else "no"}
        if nonce:
            out["proof"] = health_proof(access.token, nonce[:200])
        if access.bearer_ok(request.headers.get("authorization")):
            out["root"] = str(service.root)
        return out

    app.include_router(project_router)
    app.include_router(runs_router)
    app.include_router(research_router)
    app.include_router(session_router)  # before Studio's /studio/{name}
    app.include_router(passkeys_router)
    app.include_router(studio_router)
    app.include_router(standing_router)
    app.include_router(price_router)
    mount_mcp(app, service)  # MCP at /mcp
    return app
