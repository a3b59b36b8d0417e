"""Who is asking: an agent or a person, told apart by the credential the gate checked, never by a header.

* **agent**: the server token of `.aqven/server.json` — what `aqven mcp`, MCP over HTTP and anything that reads
  the project folder get. It does what the spec gives agents and nothing a person does.
* **person** at a terminal: the person key in the user's folder outside the project (`aqven.people.home`), which
  the aqven command sends for `approve`, `stop`, `cap confirm` and Studio's login link.
* **person** in Studio: a session opened with a login link that only the person key mints.

Every act of a person (approve, stop, cap confirm, a human node's answer, the passkeys) goes through `person_of`,
which refuses an agent (403 `PERSON_REQUIRED`), and where the project has a passkey, refuses any act without a
fresh assertion bound to it (403 `PASSKEY_REQUIRED` / `PASSKEY_REFUSED`). The recorded channel and person come
from the proof: at a terminal and in a bare session, the person key's name (the user's login name); with a
passkey, the name that passkey was registered under.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from aqven.errors import PASSKEY_REQUIRED, PERSON_REQUIRED, AqvenError
from aqven.people import Binding, PasskeyRefused, load, proof_of, updating, verify_assertion
from aqven.store.approvals import Approver

PRINCIPAL_STATE = "aqven_principal"  # request.state key, set by the gate
CONFIRMED_HEADER = "x-aqven-confirmed"  # how the aqven command asked its person: "tty" or "--yes"
CHALLENGE_TTL_S = 300.0
UNNAMED = "person"  # a person proven by a credential that carries no name (never so for the person key's)
STUDIO_HINT = (
    "open Studio with `aqven studio` at your terminal, open the series (or run) and act there: your passkey confirms it"
)


@dataclass(frozen=True)
class Principal:
    kind: Literal["agent", "person"]
    channel: Literal["agent", "terminal", "studio"]
    name: str | None = None


AGENT = Principal("agent", "agent")


class PasskeyProof(BaseModel):
    """A passkey's assertion for one act: the nonce the server gave for it and the browser's credential JSON."""

    model_config = ConfigDict(extra="forbid")
    nonce: str = Field(max_length=100)
    credential: dict[str, Any]


@dataclass
class Challenges:
    """Single-use nonces the server gave out for passkey assertions and registrations (in memory, 5 minutes)."""

    pending: dict[str, tuple[Binding, float]] = field(default_factory=dict)

    def issue(self, action: str, target: str, amount: str) -> Binding:
        now = time.monotonic()
        self.pending = {n: (b, exp) for n, (b, exp) in self.pending.items() if exp > now}
        binding = Binding(action=action, target=target, amount=amount, nonce=secrets.token_urlsafe(24))
        self.pending[binding.nonce] = (binding, now + CHALLENGE_TTL_S)
        return binding

    def take(self, nonce: str) -> Binding | None:
        """The binding a nonce was given for, once: a second use (a replay) finds nothing."""
        found = self.pending.pop(nonce, None)
        if found is None or found[1] < time.monotonic():
            return None
        return found[0]


def principal_of(state: Any) -> Principal:
    principal = getattr(state, PRINCIPAL_STATE, None)
    return principal if isinstance(principal, Principal) else AGENT


def answer_digest(answer: Any) -> str:
    """What a passkey binds of a human node's answer: the SHA-256 of its canonical JSON."""
    return hashlib.sha256(json.dumps(answer, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def require_person(principal: Principal) -> None:
    if principal.kind != "person":
        raise AqvenError(
            "only a person may do this: an agent's credential (the server token) cannot approve, stop, raise or "
            "confirm a cap, answer a human node or open Studio",
            code=PERSON_REQUIRED,
            hint="a person approves in Studio (`aqven studio`) or with `aqven approve` at a terminal",
            http_status=403,
        )


def studio_origin(port: int | None) -> str:
    """The one origin a passkey assertion may come from: Studio at http://localhost:PORT."""
    return f"http://localhost:{port}" if port else "http://localhost"


def checked_passkey(
    root: Path, challenges: Challenges, port: int | None, proof: PasskeyProof, expect: tuple[str, str, str]
) -> Approver:
    """Verify a passkey's assertion for the act `expect` (action, target, amount); store the new sign count."""
    binding = challenges.take(proof.nonce)
    if binding is None:
        raise PasskeyRefused(
            "this passkey challenge is unknown, used or expired", hint="act again in Studio: each act asks anew"
        )
    if (binding.action, binding.target, binding.amount) != expect:
        raise PasskeyRefused(
            f"the passkey approved {binding.action} of {binding.target or 'the project'} for "
            f"{binding.amount or 'no amount'}, not {expect[0]} of {expect[1] or 'the project'} for "
            f"{expect[2] or 'no amount'}",
            hint="act again in Studio: an assertion is good for the act it was asked for only",
        )
    with updating(root) as record:
        key = verify_assertion(proof.credential, binding, record.passkeys, studio_origin(port))
        for i, known in enumerate(record.passkeys):
            if known.id == key.id:
                record.passkeys[i] = key
    # The name of the passkey that signed (given when it was registered), not the session's: where several people
    # registered their own passkeys in one project, each approval names its signer.
    who = key.user or f"passkey {key.id[:10]}"
    return Approver("studio", "passkey", who, proof_of(binding, proof.credential, key))


def person_of(
    state: Any,
    headers: Any,
    *,
    root: Path,
    challenges: Challenges,
    port: int | None,
    act: tuple[str, str, str],
    passkey: PasskeyProof | None,
) -> Approver:
    """The person who does `act` (action, target, amount), with the proof, or a 403 that says how to do it."""
    principal = principal_of(state)
    require_person(principal)
    if passkey is not None:
        if principal.channel != "studio":
            raise PasskeyRefused("a passkey approves in Studio", hint=STUDIO_HINT)
        return checked_passkey(root, challenges, port, passkey, act)
    if load(root).needs_passkey:
        raise AqvenError(
            f"this project approves with a passkey: {act[0].replace('_', ' ')} needs one",
            code=PASSKEY_REQUIRED,
            hint=STUDIO_HINT,
            http_status=403,
        )
    name = principal.name or UNNAMED
    if principal.channel == "terminal":  # the person key's name: the user's login name when it was made
        how = str(headers.get(CONFIRMED_HEADER, "")).lower()
        return Approver("terminal", how if how in ("tty", "--yes") else None, name)
    return Approver("studio", "session", name)  # the person whose key minted the session's login link
