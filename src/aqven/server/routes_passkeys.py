"""Studio's passkeys: register one under a person's name, list them, ask for an assertion bound to one act, turn
the requirement off.

Each passkey is registered under the name of the person whose it is (typed at registration; by default the
session's person, the user whose person key opened Studio). Every act it approves is recorded with that name, so
where several people register their own passkeys in one project, each approval names the one who signed.

Only a person in Studio reaches these (the gate refuses an agent's POST under `/api/studio/`; `require_studio`
refuses the terminal, which has no authenticator). The first passkey is registered by the person of the session;
every later one needs an assertion of a registered passkey (`passkey_add`), so a session alone cannot add a key of
its own to a project that has one. Turning the requirement off needs an assertion too.
"""

from __future__ import annotations

import hashlib
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from aqven.errors import PASSKEY_REFUSED, AqvenError
from aqven.people import ACTIONS, load, updating
from aqven.people.passkeys import assertion_options, registration_options, verify_registration
from aqven.research.launch.caps import parse_cap
from aqven.server.deps import person_acting, service_of
from aqven.server.principals import (
    UNNAMED,
    PasskeyProof,
    answer_digest,
    principal_of,
    require_person,
    studio_origin,
)
from aqven.server.service import ProjectService

router = APIRouter(prefix="/api/studio/passkeys", tags=["studio"])
USER_MAX = 64


class ChallengeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: str = Field(max_length=40)
    target: str = Field("", max_length=300)
    amount: str = Field("", max_length=100)
    answer: Any = None  # human_answer: the answer itself (the server binds its digest)

    def bound_amount(self) -> str:
        """The amount as the act's route will compute it: caps as plain decimals, an answer by its digest."""
        if self.action == "human_answer":
            return answer_digest(self.answer)
        if self.action in ("approve", "cap_confirm") and self.amount not in ("", "default"):
            if self.amount.endswith(" tokens"):
                return self.amount
            cap = parse_cap(self.amount)
            return str(cap) if cap is not None else ""
        return self.amount


class RegisterOptionsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str | None = Field(None, max_length=200)  # whose passkey: the name every act it approves is recorded with
    passkey: PasskeyProof | None = None  # an assertion of a registered passkey, when the project has one


class RegisterBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    nonce: str = Field(max_length=100)
    credential: dict[str, Any]


class RequirementBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    required: bool
    passkey: PasskeyProof | None = None


def _access(request: Request) -> Any:
    return request.app.state.access


def _person_in_studio(request: Request) -> str:
    principal = principal_of(request.state)
    require_person(principal)
    if principal.channel != "studio":
        raise AqvenError(
            "passkeys are registered and used in Studio, where the browser's authenticator is",
            code=PASSKEY_REFUSED,
            hint="open Studio with `aqven studio`",
            http_status=403,
        )
    return principal.name or UNNAMED


def passkey_user(asked: str | None, default: str) -> str:
    """The name a new passkey is registered under: the one typed (trimmed), else the session's person."""
    name = " ".join((asked or "").split()) or default
    if len(name) > USER_MAX or any(not ch.isprintable() for ch in name):
        raise AqvenError(
            f"a passkey's name is printable text of at most {USER_MAX} characters",
            code="VALIDATION_ERROR",
            hint="type the name of the person whose passkey this is, e.g. Ada Lovelace",
            http_status=422,
        )
    return name


def _listing(svc: ProjectService, request: Request) -> dict[str, Any]:
    record = load(svc.root)
    principal = principal_of(request.state)
    return {
        "passkeys": [
            {"id": p.id, "user": p.user, "created_at": p.created_at, "added_with": p.added_with}
            for p in record.passkeys
        ],
        "requirement_on": record.passkey_required,
        "required": record.needs_passkey,
        # the name a passkey registered in this session gets unless another is typed (the session's person)
        "session_person": principal.name if principal.channel == "studio" else None,
    }


@router.get("")
def list_passkeys(request: Request, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    """The project's passkeys (public keys only, never shown), whose each is, and whether money moves on one."""
    return _listing(svc, request)


@router.post("/challenge")
def challenge(body: ChallengeBody, request: Request, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    """A single-use challenge bound to one act (action, target, amount), and the browser's options for it."""
    _person_in_studio(request)
    if body.action not in ACTIONS:
        raise AqvenError(
            f"not an act a passkey approves: {body.action!r}",
            code="VALIDATION_ERROR",
            hint=f"one of {', '.join(ACTIONS)}",
            http_status=422,
        )
    record = load(svc.root)
    if not record.passkeys:
        raise AqvenError(
            "this project has no passkey yet", code=PASSKEY_REFUSED, hint="register one under Passkeys in Studio"
        )
    binding = _access(request).challenges.issue(body.action, body.target, body.bound_amount())
    return {"nonce": binding.nonce, "options": assertion_options(binding, record.passkeys)}


@router.post("/register/options")
def register_options(
    body: RegisterOptionsBody, request: Request, svc: ProjectService = Depends(service_of)
) -> dict[str, Any]:
    """Options to create a passkey for the person `user` names (default: the session's person); a project that
    has one needs a registered passkey's assertion first (`passkey_add`)."""
    user = passkey_user(body.user, _person_in_studio(request))
    record = load(svc.root)
    added_with = ""
    if record.passkeys:
        who = person_acting(request, ("passkey_add", "project", ""), body.passkey)
        if who.confirmed != "passkey" or not who.proof:
            raise AqvenError(
                "a project that has a passkey adds another only with a registered one",
                code="PASSKEY_REQUIRED",
                hint="confirm with a registered passkey first",
                http_status=403,
            )
        added_with = str(who.proof["credential_id"])
    # The registration's binding carries whose passkey it is (its target), so the name given here is the one kept.
    binding = _access(request).challenges.issue("register", user, added_with)
    user_id = hashlib.sha256(user.encode()).digest()[:16]
    return {
        "nonce": binding.nonce,
        "options": registration_options(user, user_id, binding.challenge(), record.passkeys),
    }


@router.post("/register")
def register(body: RegisterBody, request: Request, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    """Verify a new passkey (user verification required) and keep its public key in the person folder, under the
    name its options were asked for."""
    _person_in_studio(request)
    access = _access(request)
    binding = access.challenges.take(body.nonce)
    if binding is None or binding.action != "register":
        raise AqvenError(
            "this registration challenge is unknown, used or expired",
            code=PASSKEY_REFUSED,
            hint="start the registration again in Studio",
            http_status=403,
        )
    key = verify_registration(
        body.credential, binding.challenge(), studio_origin(access.port), binding.target, binding.amount or None
    )
    with updating(svc.root) as record:
        if record.passkeys and not binding.amount:  # one was registered meanwhile: this one needs its assertion
            raise AqvenError(
                "a passkey was registered meanwhile: add another with it",
                code=PASSKEY_REFUSED,
                hint="start again",
                http_status=409,
            )
        if not record.passkeys:
            record.passkey_required = True
        record.passkeys.append(key)
    return _listing(svc, request)


@router.post("/requirement")
def requirement(body: RequirementBody, request: Request, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    """Turn the passkey requirement on (a person) or off (a passkey's assertion, `passkey_requirement_off`)."""
    _person_in_studio(request)
    if not body.required:
        who = person_acting(request, ("passkey_requirement_off", "project", ""), body.passkey)
        if load(svc.root).passkeys and who.confirmed != "passkey":
            raise AqvenError(
                "turning the passkey requirement off needs a passkey",
                code="PASSKEY_REQUIRED",
                hint="confirm with your passkey",
                http_status=403,
            )
    with updating(svc.root) as record:
        record.passkey_required = body.required
    return _listing(svc, request)
