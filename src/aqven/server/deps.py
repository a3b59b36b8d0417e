"""Request-scoped access to the project service, and the person who acts in a request."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from aqven.server.principals import PasskeyProof, person_of
from aqven.server.service import ProjectService
from aqven.store.approvals import Approver


def service_of(request: Request) -> ProjectService:
    svc: ProjectService = request.app.state.service
    return svc


def person_acting(request: Request, act: tuple[str, str, str], passkey: PasskeyProof | None) -> Approver:
    """The person doing `act` (action, target, amount) in this request, with the proof; 403 for an agent, and for
    an act without a passkey where the project has one (server/principals.py)."""
    access: Any = request.app.state.access
    return person_of(
        request.state,
        request.headers,
        root=service_of(request).root,
        challenges=access.challenges,
        port=access.port,
        act=act,
        passkey=passkey,
    )
