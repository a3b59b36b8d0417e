"""Passkeys (WebAuthn) for a person's money decisions, on the maintained `webauthn` library (no crypto of ours).

Studio is served at `http://localhost:PORT` (a secure context; an IP address cannot be a relying party), so the
relying party is `localhost`. Every act a passkey approves is a `Binding` — the action, what it acts on (a series,
a run's node, the project), the amount, and a single-use nonce from the server — and the WebAuthn challenge is
the SHA-256 of that binding. An assertion for one series, amount or nonce therefore proves nothing for another,
and the record keeps the binding with the assertion, so it can be verified again later with the public key
alone (`reverify`). User verification is required at registration and at every assertion.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url
from webauthn.helpers.exceptions import InvalidAuthenticationResponse, InvalidRegistrationResponse
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from aqven.errors import PASSKEY_REFUSED, AqvenError
from aqven.people.records import Passkey

RP_ID = "localhost"
RP_NAME = "AQVEN"
ORIGIN = re.compile(r"http://localhost:[0-9]{1,5}")
#: What a passkey approves. Each names its target and amount the same way on every surface.
ACTIONS = ("approve", "stop", "cap_confirm", "human_answer", "passkey_add", "passkey_requirement_off")


class PasskeyRefused(AqvenError):
    code = PASSKEY_REFUSED
    http_status = 403


@dataclass(frozen=True)
class Binding:
    """One act a person approves: what, on what, for how much, once (the nonce)."""

    action: str
    target: str
    amount: str
    nonce: str

    def challenge(self) -> bytes:
        text = json.dumps({"aqven": 1, **asdict(self)}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).digest()


def registration_options(user: str, user_id: bytes, challenge: bytes, existing: list[Passkey]) -> dict[str, Any]:
    """The browser's `PublicKeyCredentialCreationOptions` as JSON (user verification required)."""
    options = generate_registration_options(
        rp_id=RP_ID,
        rp_name=RP_NAME,
        user_name=user,
        user_id=user_id,
        challenge=challenge,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED, user_verification=UserVerificationRequirement.REQUIRED
        ),
        exclude_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(p.id)) for p in existing],
    )
    out: dict[str, Any] = json.loads(options_to_json(options))
    return out


def assertion_options(binding: Binding, passkeys: list[Passkey]) -> dict[str, Any]:
    """The browser's `PublicKeyCredentialRequestOptions` for one binding."""
    options = generate_authentication_options(
        rp_id=RP_ID,
        challenge=binding.challenge(),
        allow_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(p.id)) for p in passkeys],
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    out: dict[str, Any] = json.loads(options_to_json(options))
    return out


def verify_registration(credential: Any, challenge: bytes, origin: str, user: str, added_with: str | None) -> Passkey:
    try:
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=challenge,
            expected_rp_id=RP_ID,
            expected_origin=origin,
            require_user_verification=True,
        )
    except (InvalidRegistrationResponse, ValueError, KeyError, TypeError) as exc:
        raise PasskeyRefused(
            f"the passkey's registration did not verify: {exc}",
            hint="register again from Studio at http://localhost (your authenticator must verify you)",
        ) from None
    return Passkey(
        id=bytes_to_base64url(verified.credential_id),
        public_key=bytes_to_base64url(verified.credential_public_key),
        sign_count=verified.sign_count,
        user=user,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        added_with=added_with,
    )


def credential_id(credential: Any) -> str:
    """The credential id an assertion names (its `rawId`, else `id`), base64url."""
    if not isinstance(credential, dict):
        raise PasskeyRefused("a passkey assertion is a JSON object", hint="approve again in Studio")
    raw = credential.get("rawId") or credential.get("id")
    if not isinstance(raw, str) or not raw:
        raise PasskeyRefused("the passkey assertion names no credential", hint="approve again in Studio")
    return raw


def verify_assertion(credential: Any, binding: Binding, passkeys: list[Passkey], origin: str | list[str]) -> Passkey:
    """Check an assertion for `binding` against the registered passkeys; the passkey it came from, with its new
    sign count (the caller stores it). Raises `PasskeyRefused` with what did not hold."""
    key = next((p for p in passkeys if p.id == credential_id(credential)), None)
    if key is None:
        raise PasskeyRefused(
            "that passkey is not registered for this project", hint="use a passkey listed in Studio under Passkeys"
        )
    try:
        verified = verify_authentication_response(
            credential=credential,
            expected_challenge=binding.challenge(),
            expected_rp_id=RP_ID,
            expected_origin=origin,
            credential_public_key=base64url_to_bytes(key.public_key),
            credential_current_sign_count=key.sign_count,
            require_user_verification=True,
        )
    except (InvalidAuthenticationResponse, ValueError, KeyError, TypeError) as exc:
        raise PasskeyRefused(
            f"the passkey assertion does not prove this {binding.action}: {exc}",
            hint="approve again in Studio: an assertion is good for one action, amount and moment only",
        ) from None
    return Passkey(**{**asdict(key), "sign_count": verified.new_sign_count})


def proof_of(binding: Binding, credential: dict[str, Any], key: Passkey) -> dict[str, Any]:
    """What an approval record keeps of a passkey's proof: enough to verify it again with the public key."""
    response = credential.get("response") or {}
    return {
        "method": "passkey",
        "binding": asdict(binding),
        "credential_id": key.id,
        "user": key.user,
        "client_data_json": response.get("clientDataJSON"),
        "authenticator_data": response.get("authenticatorData"),
        "signature": response.get("signature"),
    }


def reverify(proof: dict[str, Any], passkeys: list[Passkey]) -> str | None:
    """None when a stored proof still verifies against a registered public key; else why not."""
    try:
        binding = Binding(**proof["binding"])
        client_data = json.loads(base64url_to_bytes(proof["client_data_json"]))
        origin = str(client_data.get("origin", ""))
        credential = {
            "id": proof["credential_id"],
            "rawId": proof["credential_id"],
            "type": "public-key",
            "response": {
                "clientDataJSON": proof["client_data_json"],
                "authenticatorData": proof["authenticator_data"],
                "signature": proof["signature"],
            },
        }
    except (KeyError, TypeError, ValueError) as exc:
        return f"the record's proof is malformed ({exc})"
    if not ORIGIN.fullmatch(origin):
        return f"the assertion came from {origin!r}, not Studio at http://localhost"
    stale = [Passkey(**{**asdict(p), "sign_count": 0}) for p in passkeys]  # the count moved on since
    try:
        verify_assertion(credential, binding, stale, origin)
    except PasskeyRefused as exc:
        return exc.message
    return None
