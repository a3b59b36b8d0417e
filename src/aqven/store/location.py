"""Which store a project uses, and how it is shown.

`store:` in `.aqven/local.yaml`, the environment's `AQVEN_STORE`, or `aqven serve --store` (which sets the
environment for the server and its workers) names it: `postgresql://…` (or `postgres://…`) for a PostgreSQL
database, `sqlite:PATH` for another SQLite file; nothing means `.aqven/aqven.sqlite`. A DSN is shown everywhere
without its password (`shown`): logs, errors, Studio and the server file never carry it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from aqven.errors import STORE_INVALID, AqvenError
from aqven.project.local import read_local
from aqven.project.paths import DB_FILE, state_dir

STORE_ENV = "AQVEN_STORE"
_PASSWORD = re.compile(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


@dataclass(frozen=True)
class StoreLocation:
    """A store: the SQLite file at `path`, or the PostgreSQL database at `dsn`."""

    backend: Literal["sqlite", "postgresql"]
    path: Path | None = None
    dsn: str | None = None

    @property
    def setting(self) -> str:
        """The location as `store:` or AQVEN_STORE take it, without a password (it goes in ~/.pgpass)."""
        return f"sqlite:{self.path}" if self.backend == "sqlite" else self.shown

    @property
    def shown(self) -> str:
        """The location as it may be shown: a DSN without its password."""
        if self.backend == "sqlite":
            return str(self.path)
        assert self.dsn is not None
        return shown_dsn(self.dsn)


def shown_dsn(dsn: str) -> str:
    """`dsn` with its password (in the URL or as `password=`) replaced by `***`."""
    out = re.sub(r"^(postgres(?:ql)?://[^:/@]*):[^@]*@", r"\1:***@", dsn)
    out = re.sub(r"(?i)([?&]password=)[^&]*", r"\1***", out)
    return _PASSWORD.sub(r"\1***", out)


def parse_store(text: str, *, root: Path, source: str) -> StoreLocation:
    """A `store:` value; `source` says where it was written, for the error."""
    value = text.strip()
    if value.startswith(("postgresql://", "postgres://")):
        return StoreLocation("postgresql", dsn=value)
    if value.startswith("sqlite:"):
        path = Path(value.removeprefix("sqlite:")).expanduser()
        return StoreLocation("sqlite", path=path if path.is_absolute() else root / path)
    raise AqvenError(
        f"{source} names the store {shown_dsn(value)!r}, which is neither postgresql://… nor sqlite:PATH",
        code=STORE_INVALID,
        hint="write store: postgresql://USER@HOST:PORT/DATABASE (the password in ~/.pgpass), or sqlite:PATH,"
        " or leave it out for .aqven/aqven.sqlite",
    )


def store_of(root: Path) -> StoreLocation:
    """The store of the project at `root`: AQVEN_STORE, else `store:` in .aqven/local.yaml, else the SQLite file."""
    env = os.environ.get(STORE_ENV, "").strip()
    if env:
        return parse_store(env, root=root, source=STORE_ENV)
    value = read_local(root).store
    if value and value.strip():
        return parse_store(value, root=root, source=".aqven/local.yaml")
    return StoreLocation("sqlite", path=state_dir(root) / DB_FILE)
