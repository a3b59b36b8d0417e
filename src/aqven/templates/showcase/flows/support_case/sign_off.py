"""Sign a polished reply off with the support team's signature."""

from __future__ import annotations

SIGNATURES = {
    "gold": "Lumen Support · Gold priority line",
    "plus": "Lumen Support · Plus",
}


def sign_off(reply: str, promises: list[str], tier: str) -> dict[str, object]:
    signature = SIGNATURES.get(tier, "Lumen Support")
    return {"reply": f"{reply.rstrip()}\n\n— {signature}", "promises": list(promises)}
