"""What a person decided in one project, kept in the person folder: the confirmed project cap and the passkeys.

One JSON file per project folder (`projects/<id>.json`, `home.project_id`), changed under a file lock so two
servers or a server and a command never lose each other's write. The project folder holds none of it: an agent
that edits `.aqven/` can neither raise the confirmed cap nor add a passkey of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from aqven.people.home import person_dir, project_id, read_json, refuse_unsafe, unsafe_for, write_private


@dataclass
class Passkey:
    """A registered WebAuthn credential: only its public key is kept (COSE, base64url)."""

    id: str
    public_key: str
    sign_count: int
    user: str
    created_at: str
    added_with: str | None = None  # the passkey whose assertion allowed this one (None for the first)


@dataclass
class ConfirmedCap:
    """The project cap a person last confirmed, and how."""

    cap_usd: str
    at: str
    channel: str
    confirmed: str | None = None
    person: str | None = None


@dataclass
class ProjectRecord:
    root: str
    cap: ConfirmedCap | None = None
    passkeys: list[Passkey] = field(default_factory=list)
    passkey_required: bool = True  # once a passkey exists, money moves on one until a passkey says otherwise

    @property
    def needs_passkey(self) -> bool:
        return bool(self.passkeys) and self.passkey_required

    def passkey(self, credential_id: str) -> Passkey | None:
        return next((p for p in self.passkeys if p.id == credential_id), None)


def record_path(root: Path) -> Path:
    """The file of a project's person record."""
    return person_dir() / "projects" / f"{project_id(root)}.json"


def _parse(root: Path, data: dict[str, Any] | None) -> ProjectRecord:
    record = ProjectRecord(root=str(root.resolve()))
    if not data:
        return record
    cap = data.get("cap")
    if isinstance(cap, dict) and isinstance(cap.get("cap_usd"), str):
        record.cap = ConfirmedCap(
            cap_usd=cap["cap_usd"],
            at=str(cap.get("at") or ""),
            channel=str(cap.get("channel") or ""),
            confirmed=cap.get("confirmed"),
            person=cap.get("person"),
        )
    for item in data.get("passkeys") or []:
        if isinstance(item, dict) and {"id", "public_key"} <= item.keys():
            record.passkeys.append(
                Passkey(
                    id=str(item["id"]),
                    public_key=str(item["public_key"]),
                    sign_count=int(item.get("sign_count") or 0),
                    user=str(item.get("user") or ""),
                    created_at=str(item.get("created_at") or ""),
                    added_with=item.get("added_with"),
                )
            )
    record.passkey_required = bool(data.get("passkey_required", True))
    return record


def load(root: Path) -> ProjectRecord:
    """The person record of the project at `root` (empty when none was written, or the folder is unsafe)."""
    if unsafe_for(root):
        return ProjectRecord(root=str(root.resolve()))
    return _parse(root, read_json(record_path(root)))


@contextmanager
def updating(root: Path) -> Iterator[ProjectRecord]:
    """Read the record under its lock, let the caller change it, and write it back (not on an exception)."""
    refuse_unsafe(root)
    path = record_path(root)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with FileLock(str(path.with_suffix(".lock")), timeout=10, mode=0o600):
        record = _parse(root, read_json(path))
        yield record
        write_private(path, asdict(record))
