"""Request-scoped access to the project service."""

from __future__ import annotations

from fastapi import Request

from aqven.server.service import ProjectService


def service_of(request: Request) -> ProjectService:
    svc: ProjectService = request.app.state.service
    return svc
