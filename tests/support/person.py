"""A person in the tests: the person key (in the session's XDG_CONFIG_HOME, set by conftest) and a software
authenticator that answers WebAuthn ceremonies the way a browser and a platform authenticator would.

The authenticator is test equipment, not product code: the server verifies what it makes with the `webauthn`
library, exactly as it verifies Chromium's. It signs ES256 (P-256, the `cryptography` package), sets user presence
and user verification, and makes "none" attestations.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import struct
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from aqven.people import person_key

UP, UV, AT = 0x01, 0x04, 0x40


def person_secret() -> str:
    key = person_key(create=True)
    assert key is not None, "the tests' person folder could not be written"
    return key.secret


def person_headers(**extra: str) -> dict[str, str]:
    """What `aqven approve` sends: the person key as the bearer credential."""
    return {"Authorization": f"Bearer {person_secret()}", **extra}


def studio_login(client: Any, page: str = "") -> dict[str, str]:
    """Log an in-process TestClient into Studio as a person does (a login link minted with the person key): its
    session cookie is kept by the client; returns the headers of a Studio request (no token, the CSRF token)."""
    link = client.post("/api/studio/login-link", json={"page": page}, headers=person_headers()).json()["url"]
    parts = urllib.parse.urlsplit(link)
    assert client.get(f"{parts.path}?{parts.query}", follow_redirects=False).status_code == 303
    html = client.get("/studio/").text
    csrf = html.split('name="aqven-csrf" content="', 1)[1].split('"', 1)[0]
    return {"Authorization": "", "X-CSRF-Token": csrf}


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class SoftAuthenticator:
    """One passkey on a software authenticator, used from `origin` (Studio at http://localhost:PORT)."""

    origin: str
    rp_id: str = "localhost"
    user_verified: bool = True
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    credential_id: bytes = field(default_factory=lambda: secrets.token_bytes(16))
    sign_count: int = 0

    def _flags(self, extra: int = 0) -> int:
        return UP | (UV if self.user_verified else 0) | extra

    def _client_data(self, kind: str, challenge: str) -> bytes:
        data = {"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": False}
        return json.dumps(data, separators=(",", ":")).encode()

    def create(self, options: dict[str, Any]) -> dict[str, Any]:
        """A registration response to `PublicKeyCredentialCreationOptions` JSON."""
        numbers = self.key.public_key().public_numbers()
        cose = {1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")}
        attested = bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id + cbor2.dumps(cose)
        rp_hash = hashlib.sha256(self.rp_id.encode()).digest()
        auth_data = rp_hash + bytes([self._flags(AT)]) + struct.pack(">I", self.sign_count) + attested
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        cid = b64url(self.credential_id)
        return {
            "id": cid,
            "rawId": cid,
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(self._client_data("webauthn.create", options["challenge"])),
                "attestationObject": b64url(attestation),
            },
            "clientExtensionResults": {},
        }

    def get(self, options: dict[str, Any]) -> dict[str, Any]:
        """An assertion for `PublicKeyCredentialRequestOptions` JSON (the sign count goes up by one)."""
        self.sign_count += 1
        rp_hash = hashlib.sha256(self.rp_id.encode()).digest()
        auth_data = rp_hash + bytes([self._flags()]) + struct.pack(">I", self.sign_count)
        client_data = self._client_data("webauthn.get", options["challenge"])
        signature = self.key.sign(auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256()))
        cid = b64url(self.credential_id)
        return {
            "id": cid,
            "rawId": cid,
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "authenticatorData": b64url(auth_data),
                "signature": b64url(signature),
                "userHandle": None,
            },
            "clientExtensionResults": {},
        }
