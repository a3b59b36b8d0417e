"""Open a project's store on its backend (store/location.py says which)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from aqven.errors import STORE_UNAVAILABLE, AqvenError
from aqven.store.db import Database
from aqven.store.location import StoreLocation, store_of
from aqven.store.sqlite_db import SqliteDatabase


def open_database(location: StoreLocation) -> Database:
    """The database at `location`. PostgreSQL's driver comes with the extra `aqven[postgres]`."""
    if location.backend == "sqlite":
        assert location.path is not None
        return SqliteDatabase(location.path)
    assert location.dsn is not None
    try:
        from aqven.store.postgres_db import PostgresDatabase
    except ImportError:
        raise AqvenError(
            f"the store {location.shown} is PostgreSQL, and its driver is not installed",
            code=STORE_UNAVAILABLE,
            hint="pip install 'aqven[postgres]'",
        ) from None
    return PostgresDatabase(location.dsn)


def project_database(root: Path) -> Database:
    """The database of the project at `root`, where its settings put it."""
    return open_database(store_of(root))


def hold_store(root: Path, holder: str, lost: Callable[[AqvenError], None] | None = None) -> Callable[[], None]:
    """Hold the project's store for this server's life (the answer lets go). A SQLite file needs nothing more than
    the server's file lock (`.aqven/server.lock`); a PostgreSQL store is shared, so a second server anywhere is
    refused with STORE_HELD, naming the holder, and `lost` is told if another took it after a PostgreSQL restart."""
    location = store_of(root)
    if location.dsn is None:
        return lambda: None
    from aqven.store.postgres_db import hold_store as hold_postgres

    return hold_postgres(location.dsn, holder, lost)
