"""Where a person's proofs live: a folder of the user's own, outside every project folder.

An agent has whatever sits in a project folder (it reads `.aqven/server.json`, the database, the finding key).
What proves a person therefore lives elsewhere: `$XDG_CONFIG_HOME/aqven` (default `~/.config/aqven`), 0700 with
0600 files. It holds the person key of the terminal path (`person.json`) and, per project, the record of what a
person decided there (`projects/<id>.json`: the confirmed project cap, the registered passkeys). A folder that
lies inside the project is refused: an agent confined to the project would write its own proofs there.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aqven.errors import PERSON_KEY_UNSAFE, AqvenError

PERSON_FILE = "person.json"


def person_dir() -> Path:
    """The user's AQVEN folder (not created here)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "aqven"


def unsafe_for(root: Path | None, folder: Path | None = None) -> bool:
    """True when the person folder lies inside the project folder `root` (an agent there could write it)."""
    if root is None:
        return False
    here = (folder or person_dir()).resolve()
    project = root.resolve()
    return here == project or project in here.parents


def refuse_unsafe(root: Path | None) -> None:
    if unsafe_for(root):
        raise AqvenError(
            f"the person folder {person_dir()} lies inside the project: an agent there could write a person's proof",
            code=PERSON_KEY_UNSAFE,
            hint="set XDG_CONFIG_HOME to a folder outside the project (the default is ~/.config)",
            http_status=403,
        )


def _private_dir(folder: Path) -> None:
    """Make `folder` (and the person folder above it) if missing, readable by this user only."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for each in {folder, person_dir()}:
        with contextlib.suppress(OSError):
            if each.is_dir():
                os.chmod(each, 0o700)


def _private_temp(path: Path, data: Any) -> Path:
    """`data` as JSON in a new file beside `path`, readable by this user only (its folders 0700)."""
    _private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(data, indent=1, sort_keys=True))
    return tmp


def write_private(path: Path, data: Any) -> None:
    """Write JSON to `path` atomically, readable by this user only."""
    os.replace(_private_temp(path, data), path)


def create_private(path: Path, data: Any) -> None:
    """Make `path` with `data` unless it exists (never replacing one another process made meanwhile)."""
    tmp = _private_temp(path, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class PersonKey:
    """The terminal path's credential: who (the user's name) and the secret the aqven command sends."""

    name: str
    secret: str

    def matches(self, presented: str) -> bool:
        return hmac.compare_digest(presented.encode(), self.secret.encode())


def _user_name() -> str:
    """The login name of this user, the name a new person key is recorded under (never empty)."""
    try:
        return getpass.getuser().strip() or f"uid {os.getuid()}"
    except (OSError, KeyError):
        return f"uid {os.getuid()}"


def person_key(*, create: bool = False, root: Path | None = None) -> PersonKey | None:
    """This user's person key, made on first use when `create` (None when there is none and none may be made)."""
    if unsafe_for(root):
        return None
    path = person_dir() / PERSON_FILE
    data = read_json(path)
    if data and isinstance(data.get("secret"), str) and len(data["secret"]) >= 32:
        return PersonKey(str(data.get("name") or "").strip() or _user_name(), data["secret"])
    if not create:
        return None
    key = PersonKey(_user_name(), secrets.token_urlsafe(32))
    try:
        create_private(path, {"name": key.name, "secret": key.secret})
    except OSError:
        return None
    again = read_json(path)  # two processes made one at once: both use the one that was made first
    if again and isinstance(again.get("secret"), str):
        return PersonKey(str(again.get("name") or key.name), again["secret"])
    return None


def project_id(root: Path) -> str:
    """A project's name in the person folder: its resolved path, hashed (one record per project folder)."""
    return hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
