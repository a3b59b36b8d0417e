"""The project server's HTTP application: REST (OpenAPI at /docs) with JSON errors carrying stable codes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from aqven import __version__
from aqven.errors import AqvenError
from aqven.server.routes_project import router as project_router
from aqven.server.routes_research import router as research_router
from aqven.server.routes_runs import router as runs_router
from aqven.server.service import ProjectService

MAX_BODY_BYTES = 2_000_000


def create_app(root: Path) -> FastAPI:
    service = ProjectService(root)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.resume_interrupted()
        yield
        await service.shutdown()

    app = FastAPI(title="AQVEN project server", version=__version__, lifespan=lifespan)
    app.state.service = service

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

    @app.middleware("http")
    async def limit_body(request: Request, call_next):  # type: ignore[no-untyped-def]
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
            return JSONResponse(
                status_code=413,
                content={
                    "error": {
                        "code": "BODY_TOO_LARGE",
                        "message": f"request body over {MAX_BODY_BYTES} bytes",
                        "hint": "send a smaller request",
                    }
                },
            )
        return await call_next(request)

    @app.get("/api/health")
    async def health() -> dict[str, str]:
        return {"status": "ok", "root": str(service.root), "version": __version__}

    app.include_router(project_router)
    app.include_router(runs_router)
    app.include_router(research_router)
    return app
